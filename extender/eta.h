#pragma once

// The ETA forecast's answer (issue: foresight, part 1; docs/decisions.md, "ETA"): for every
// job that waits, when it is expected to start, where, and after which running jobs end. The
// forecast itself runs berth's real verbs forward in virtual time on a copy of the model
// (extender/sim/forecast.h); the Service only keeps its latest answer and shows it in
// /debug/explain, /debug/queues and /metrics.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/objects.h"
#include "absl/time/time.h"
#include "nlohmann/json_fwd.hpp"
#include "policy/forecast/run_time.h"

namespace berth::extender {

/// One waiting job: a gang (every member that waits), or a pod on its own.
struct JobEta {
  std::string job;                ///< "namespace/name" of the gang, or of the pod
  bool gang = false;
  /// The job runs already and only some members wait (elastic members, or replacements of
  /// evicted ones): `start` is when the last of them is bound.
  bool running = false;
  std::string queue;
  std::vector<std::string> pods;  ///< its waiting pods, "namespace/name"
  absl::Time waiting_since = absl::InfinitePast();  ///< the oldest creation among them
  /// The predicted start: a gang when minMember of its members run, a pod when it is bound.
  /// nullopt: not within the forecast's horizon (see `unknown`).
  std::optional<absl::Time> start;
  /// Where its waiting pods start (node names, in pod order, "" for one not placed then).
  std::vector<std::string> nodes;
  /// The narrowest topology domain holding all of `nodes`: its level's label key ("berth.io/leaf")
  /// and the path of values from the top level down ("zone-a/spine-a1/leaf-a1-2"); empty when
  /// the nodes share none.
  std::string domain_level, domain;
  /// The running jobs (or jobs that ran in the forecast) whose end on those nodes came last
  /// before its start, newest first (at most 3), with where their expected end came from.
  struct After {
    std::string job;
    absl::Time end;
    policy::RunTimeSource source = policy::RunTimeSource::kUnknown;
  };
  std::vector<After> after;
  /// The pods the forecast deleted from those nodes before its start (a pool's reclaim, fair
  /// share, kube-scheduler's preemption), newest first (at most 3): a start that takes room from
  /// running work says whose.
  struct Evicted {
    std::string job;    ///< "namespace/name" of the job (of the pod, for one not berth's)
    absl::Time at;      ///< when the forecast deleted it
    std::string cause;  ///< reclaim, fair-share, preemption, elastic, gang-release
  };
  std::vector<Evicted> evicts;
  /// Its own expected run time and where it came from (its end, for the jobs after it).
  policy::RunTime run;
  /// Why there is no start: "waits on running work of unknown duration" or "not within the
  /// horizon of 168h".
  std::string unknown;

  /// The least certain source among `after` (kUnknown if there is none).
  policy::RunTimeSource Basis() const;
};

/// One forecast pass.
struct Forecast {
  absl::Time at;                 ///< the model's time it started from
  uint64_t generation = 0;       ///< the model generation it started from
  absl::Duration horizon;
  std::vector<JobEta> jobs;      ///< by waiting_since, then job
  /// Waiting pod ("namespace/name") -> index into `jobs`.
  absl::flat_hash_map<std::string, size_t> by_pod;
  /// Job ("namespace/name" of the gang or pod, as /debug/queues names it) -> index into `jobs`.
  absl::flat_hash_map<std::string, size_t> by_job;
  int running_jobs = 0;          ///< berth's jobs running at `at`
  int running_unknown = 0;       ///< of those, how many with no expected run time
  double wall_seconds = 0;       ///< what the pass cost
  double simulated_seconds = 0;  ///< how far it ran in virtual time
  /// What the pass did: kube-scheduler's scheduling attempts, and berth's calls and their wall
  /// seconds by verb ("filter", "prioritize", "bind", "preempt", "tick").
  int64_t attempts = 0;
  /// The pass spent its wall-time budget (eta.maxPassSeconds) before every waiting job started.
  bool truncated = false;
  std::map<std::string, std::pair<int64_t, double>> calls;

  const JobEta* ForPod(std::string_view key) const;
  const JobEta* ForJob(std::string_view key) const;
};

/// The pod annotation a forecast writes in Kubernetes mode: the predicted start (RFC 3339), or
/// "unknown".
inline constexpr std::string_view kEtaAnnotation = "berth.io/eta";

/// Writes `berth.io/eta` on a pod (Kubernetes mode: a JSON merge patch, by the leader only).
class EtaAnnotatorInterface {
 public:
  virtual ~EtaAnnotatorInterface() = default;
  virtual absl::Status CanWrite() const { return absl::OkStatus(); }
  virtual absl::Status Annotate(const core::Pod& pod, std::string_view value) = 0;
};

/// "in about 40 min", "in about 2 h 10 min", "now" (under a minute).
std::string AboutFromNow(absl::Duration d);
/// The sentence explain shows: "expected to start in about 40 min, on leaf
/// zone-a/spine-a1/leaf-a1-2, after jobs team-a/x and team-b/y finish (their ends: annotation)";
/// or why no time can be given.
std::string EtaSentence(const JobEta& eta, absl::Time now);
/// The JSON object of one job's ETA (explain, queues, what-if).
nlohmann::json EtaJson(const JobEta& eta, absl::Time now);

}  // namespace berth::extender
