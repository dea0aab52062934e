#pragma once

// How the simulator's kube-scheduler reads berth's filter and prioritize answers: the extender
// client of kube-scheduler (pkg/scheduler/extender.go, `Filter`, `Prioritize`, `send`) decodes
// them with Go's encoding/json, and schedule_one.go (`findNodesThatPassExtenders`,
// `prioritizeNodes`) uses what it decoded. docs/decisions.md, "What kube-scheduler reads from an
// answer", has the sources.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simdjson.h"

namespace berth::extender::sim {

/// ExtenderFilterResult as decoded; the views point into the parsed answer.
struct FilterAnswer {
  std::string_view error;
  /// Whether `NodeNames` was given (not absent, not null): kube-scheduler then passes exactly
  /// those names, each of which must be one it asked about.
  bool names_given = false;
  std::vector<std::string_view> names;
  std::vector<std::string_view> failed;        ///< keys of FailedNodes
  std::vector<std::string_view> unresolvable;  ///< keys of FailedAndUnresolvableNodes
};

/// Decodes a filter answer as Go does into ExtenderFilterResult: keys match case-insensitively
/// (the last of a repeated key wins), null and absent keys leave the zero value, and a value of
/// another type fails the whole answer (kube-scheduler's call then fails).
absl::StatusOr<FilterAnswer> ReadFilterAnswer(simdjson::dom::element root);

/// One decoded HostPriority.
struct HostScore {
  std::string_view host;
  int64_t score = 0;
};

/// Decodes a prioritize answer as Go does into HostPriorityList: a JSON array (null: no entries)
/// of objects (null: an entry with no host). In an entry, `Host` and `Score` match
/// case-insensitively; an absent or null key leaves "" or 0, so `{"Host": "n1"}` names n1 with
/// score 0. A Score that is not an integer in int64 (5.0, "5"), or any other value of the wrong
/// type, fails the whole answer: kube-scheduler then takes no score from the extender.
absl::StatusOr<std::vector<HostScore>> ReadPriorityList(simdjson::dom::element root);

/// The extender's part of each candidate's total, as prioritizeNodes adds it: for every entry
/// naming a candidate, score x weight x (MaxNodeScore 100 / MaxExtenderPriority 10), with Go's
/// wrapping int64 arithmetic; entries naming a host kube-scheduler did not ask about add
/// nothing, a host named twice adds twice, and a candidate no entry names gets 0.
std::vector<int64_t> ExtenderScores(std::span<const HostScore> list,
                                    std::span<const std::string_view> candidates, int64_t weight);

}  // namespace berth::extender::sim
