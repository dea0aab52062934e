#pragma once

// `berth simulate`: a workload replayed in virtual time through a model of kube-scheduler 1.26
// that calls berth's real Service verbs with the bodies kube-scheduler sends, and, in the same
// run, through the same kube-scheduler model with no extender (the baseline). docs/simulate.md
// describes the model and its limits.

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/answer_form.h"
#include "extender/config.h"
#include "extender/sim/result.h"
#include "extender/sim/workload.h"

namespace berth::extender {
class Journal;  // extender/journal.h
}  // namespace berth::extender

namespace berth::extender::sim {

struct ForecastOptions;  // extender/sim/forecast.h

/// Rules the simulator can break on purpose, to show that the matching invariant fires
/// (`--break RULE`). Never for real runs.
inline constexpr std::string_view kBreakInTreeFit = "in-tree-fit";  ///< kube-scheduler skips NodeResourcesFit
inline constexpr std::string_view kBreakPodDeletes = "drop-pod-deletes";  ///< berth's model misses pod deletions

struct SimOptions {
  std::string cluster_json;    ///< a Kubernetes List, as `berth serve --cluster` reads
  std::string cluster_source;  ///< named in errors and the report
  Workload workload;
  std::string workload_source;
  Config config;               ///< berth's configuration (defaults unless --config)
  std::string config_source;   ///< "" for the defaults
  uint64_t seed = 1;
  /// How often the figures are sampled, in virtual time.
  absl::Duration sample_interval = absl::Minutes(1);
  // --- the kube-scheduler model (docs/simulate.md) -----------------------------------------
  /// percentageOfNodesToScore: 100 as the manifests set it; 0 for kube-scheduler's adaptive
  /// default (max(5, 50 - nodes/125) percent, at least 100 nodes).
  int percentage_of_nodes_to_score = 100;
  /// The extender's `weight` in the KubeSchedulerConfiguration (manifests: 20).
  int64_t extender_weight = 20;
  /// podInitialBackoffSeconds and podMaxBackoffSeconds.
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(10);
  /// podMaxInUnschedulablePodsDuration.
  absl::Duration max_unschedulable = absl::Minutes(5);
  /// terminationGracePeriodSeconds of every pod: how long an evicted or preempted pod keeps its
  /// room before it is gone.
  absl::Duration termination_grace = absl::Seconds(30);
  // --- berth's timers, as `berth serve` runs them ------------------------------------------
  absl::Duration admission_tick = absl::Seconds(1);
  /// A tick finds nothing new to do when the model has not changed since the last one, save
  /// what time alone moves (flows, aging, lifetimes: minutes). Such ticks are skipped until
  /// this long has passed since the last tick that ran (`admission_tick` or less: none skipped).
  absl::Duration idle_tick = absl::Seconds(10);
  absl::Duration housekeeping = absl::Seconds(5);
  /// Stop here even if work remains (0: run until every job has finished or nothing can move).
  absl::Duration max_time = absl::ZeroDuration();
  bool run_baseline = true;
  /// How berth writes its answers; kLong only to compare with its earlier answers (tests).
  AnswerForm answers = AnswerForm::kShort;
  std::set<std::string, std::less<>> break_rules;
  /// `--journal DIR`: berth's world records its decisions there, as `berth serve --journal`
  /// does (the baseline has none).
  Journal* journal = nullptr;
  /// The ETA accuracy study (docs/simulate.md, "ETA accuracy"): berth's world runs the ETA
  /// forecast on its own model at most this often, whenever the model changed (0: never), and
  /// the report compares each prediction with the simulated start. Every pod then carries its
  /// job's run time as `berth.io/expected-duration`, off by a factor drawn per job from
  /// [1 - eta_noise, 1 + eta_noise] (0: exact).
  absl::Duration eta_every = absl::ZeroDuration();
  double eta_noise = 0;
  /// The study only (`--eta-knows-arrivals`): every pass is also told each job the workload
  /// submits later, within the horizon, with its announced run time, as if berth knew the future
  /// arrivals. It separates what the forecast cannot know from what it gets wrong about the jobs
  /// it knows (docs/simulate.md, "ETA accuracy").
  bool eta_knows_arrivals = false;
  /// Set by RunForecast only: the world starts from a copy of this model instead of the
  /// cluster file and the workload.
  const ForecastOptions* forecast = nullptr;
};

/// Runs the workload through berth and (unless disabled) through the baseline, the two worlds
/// on two threads. Errors name the file and the object (a job naming a PriorityClass the
/// cluster lacks, a node event naming an unknown node).
absl::StatusOr<SimResult> RunSimulation(const SimOptions& options);

}  // namespace berth::extender::sim
