#pragma once

// How long a pod is expected to run, for the ETA forecast (docs/decisions.md, "ETA"). The first
// of these that exists:
//   1. the pod's `berth.io/expected-duration` annotation (a Go duration: "90m", "1h30m", or a
//      number of seconds);
//   2. its spec.activeDeadlineSeconds (the kubelet ends it then at the latest);
//   3. the median run time of the pods of its queue that berth saw finish (the newest
//      kRunsPerQueue of them, at least kMinRunsForMedian);
//   4. otherwise unknown: the forecast lets it run past its horizon.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "core/objects.h"

namespace berth::policy {

inline constexpr std::string_view kExpectedDurationKey = "berth.io/expected-duration";

/// Where an expected run time came from, most certain first.
enum class RunTimeSource : uint8_t { kAnnotation, kActiveDeadline, kQueueMedian, kUnknown };

/// "annotation", "activeDeadlineSeconds", "queueMedian", "unknown".
std::string_view RunTimeSourceName(RunTimeSource source);

struct RunTime {
  absl::Duration duration = absl::InfiniteDuration();  ///< InfiniteDuration when unknown
  RunTimeSource source = RunTimeSource::kUnknown;
};

/// The annotation's value: a Go duration ("45s", "90m", "1h30m") or a whole number of seconds;
/// positive. nullopt for anything else (the forecast then falls back to the next source).
std::optional<absl::Duration> ParseExpectedDuration(std::string_view text);

/// Run times berth saw, per queue, and the expected run time of a pod from them.
class RunTimeBook {
 public:
  static constexpr size_t kRunsPerQueue = 256;
  static constexpr size_t kMinRunsForMedian = 3;

  /// From the model's finished runs (ClusterState::ForEachFinishedRun), newest last.
  static RunTimeBook FromModel(const core::ClusterState& state);
  /// Adds one finished run of a pod of `queue`.
  void Add(std::string_view queue, absl::Duration ran);

  /// The median run time of the queue's finished pods; nullopt below kMinRunsForMedian.
  std::optional<absl::Duration> QueueMedian(std::string_view queue) const;
  /// Finished runs known for the queue (at most kRunsPerQueue).
  size_t Runs(std::string_view queue) const;
  /// The pod's expected run time from the first source that exists (see the top of this file).
  RunTime Expected(const core::Pod& pod) const;

 private:
  struct QueueRuns {
    std::vector<absl::Duration> ring;  // at most kRunsPerQueue
    size_t next = 0;
  };
  std::map<std::string, QueueRuns, std::less<>> runs_;
};

}  // namespace berth::policy
