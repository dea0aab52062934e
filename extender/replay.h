#pragma once

// `berth replay --journal DIR [--config FILE]`: runs a decision journal (extender/journal.h)
// again through the current code in virtual time, and reports every decision that differs
// from the one recorded. docs/decisions.md ("Journal and replay") says what is compared.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::extender {

struct ReplayOptions {
  std::string dir;
  /// --config: the configuration to replay under instead of the journal's own. The journal's
  /// then runs beside it, so each difference comes with the explain of both.
  std::optional<std::string> config_json;
  std::string config_source;
  /// Differences reported in full; the rest are counted.
  size_t max_full = 20;
};

/// One decision that came out differently.
struct ReplayDiff {
  std::string where;      ///< "journal-000001.jsonl:345"
  absl::Time time;
  std::string kind;       ///< filter, prioritize, bind, preempt, tick, housekeeping
  std::string pod;        ///< namespace/name ("" for ticks)
  std::string recorded;   ///< the decision in the journal, in a line
  std::string replayed;   ///< the decision now
  /// Why, as /debug/explain?format=text gives it at that moment: under the journal's
  /// configuration (with --config; otherwise the reasons the recorded answer gave) and under
  /// this replay's.
  std::string explain_recorded;
  std::string explain_replayed;
};

struct ReplayResult {
  std::vector<std::string> files;
  uint64_t entries = 0;
  uint64_t verbs = 0;
  uint64_t ticks = 0;
  uint64_t events = 0;     ///< model changes applied
  uint64_t decisions = 0;  ///< verb answers and ticks compared
  uint64_t differing = 0;
  uint64_t starts = 0;     ///< process starts in the journal (each replays from an empty model)
  std::vector<ReplayDiff> diffs;  ///< the first max_full
  absl::Time first = absl::InfinitePast(), last = absl::InfinitePast();
  std::string config;      ///< which configuration the replay ran under
  std::string recorded_version;
  bool partial_last_line = false;  ///< the last line was cut short (a process killed mid-write)
};

/// Errors: no journal in `dir`, a line that is not a journal entry (named by file and line), a
/// configuration that does not parse.
absl::StatusOr<ReplayResult> Replay(const ReplayOptions& options);

/// The report `berth replay` prints.
std::string ReplayReport(const ReplayResult& result);

}  // namespace berth::extender
