#pragma once

// What one `berth simulate` run measured: one RunMetrics per world (berth in the loop, and
// kube-scheduler alone as the baseline), sampled over virtual time. report.h turns it into the
// summary table, report.json, the plots and index.html.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace berth::extender::sim {

/// One job's outcome.
struct JobOutcome {
  std::string name;            ///< "namespace/name"
  std::string queue;           ///< "default" when the job names none
  std::string priority_class;  ///< "" when the job names none
  int pods = 0;
  bool gang = false;
  double submit = 0;           ///< seconds since the start
  double start = -1;           ///< when it started running (gang: minMember running); -1 never
  double end = -1;             ///< when it finished; -1 never
  int restarts = 0;            ///< times its work was lost (eviction, preemption) and redone
  /// The node each pod of its first start ran on, in pod order ("" for a pod not placed then).
  std::vector<std::string> nodes;
};

/// Gang states at one sample time, counted over gangs that exist and have not finished.
struct GangCounts {
  int waiting = 0;    ///< no member bound, no room reserved
  int reserved = 0;   ///< room reserved for members (berth), none bound
  int partial = 0;    ///< some members bound, fewer than minMember
  int running = 0;    ///< at least minMember members bound
};

/// An invariant (docs/simulate.md lists them) and how often it was broken.
struct InvariantResult {
  std::string name;         ///< "no-overcommit", "gang-partial-timeout", "pool-borrowers",
                            ///< "production-preempted", "gang-below-min", "capacity-double"
  std::string description;  ///< one sentence
  int64_t violations = 0;
  std::string first_example;  ///< the first violation in full; empty when none
  double first_time = -1;     ///< seconds since the start of the first violation
};

/// Pods removed from running before they finished, by cause.
struct EvictionCount {
  std::string cause;  ///< "preemption" (kube-scheduler, via berth's preempt verb), "reclaim",
                      ///< "fair-share", "gang-release", "elastic", "node-failure", "drain"
  int64_t pods = 0;
  double gpu_hours_lost = 0;  ///< GPU-hours of work thrown away (runs that must start over)
  double cpu_hours_lost = 0;
};

/// One world's figures.
struct RunMetrics {
  std::string world;  ///< "berth" or "baseline"
  // --- sampled every SimInfo::sample_seconds --------------------------------------------
  std::vector<double> times;  ///< sample times, seconds since the start
  /// resource ("cpu", "memory", "nvidia.com/gpu") -> fraction of schedulable allocatable that
  /// bound pods request, per sample.
  std::map<std::string, std::vector<double>> utilisation;
  /// The same, without the pods of gangs that have members bound but fewer than minMember
  /// (room held by a gang that cannot run yet): the part of the cluster doing work.
  std::map<std::string, std::vector<double>> useful_utilisation;
  /// queue -> fraction of the usage of all queues (cpu + 8*gpu + 0.25*GiB) per sample.
  std::map<std::string, std::vector<double>> queue_share;
  /// queue -> its fair share of that usage, per sample: the usage of all queues divided
  /// max-min fairly by weight, no queue getting more than its demand (FairShares); 0 when the
  /// queue has no pods.
  std::map<std::string, std::vector<double>> queue_fair_share;
  std::vector<GangCounts> gangs;
  /// pool -> usage units (cpu + 8*gpu + 0.25*GiB) that pods of other pools hold on its nodes
  /// (lent), and that its own pods hold on other pools' nodes (borrowed), per sample.
  std::map<std::string, std::vector<double>> pool_lent;
  std::map<std::string, std::vector<double>> pool_borrowed;
  std::vector<int> pending_pods;  ///< pods submitted, not running, per sample
  /// GPU demand per sample: the GPUs bound pods request plus those the pending pods ask for,
  /// as a fraction of the schedulable GPUs. Work waits for the cluster at a sample when pods wait
  /// and the demand is at least 1: a scheduler could then keep every GPU busy.
  std::vector<double> gpu_demand;
  /// GPUs of room berth's model holds for pods not bound yet (a gang's planned places, room a
  /// reclaim freed for its pod), as a fraction of the schedulable GPUs, per sample; always 0 for
  /// the baseline.
  std::vector<double> held_gpus;
  /// Fragmentation of the schedulable nodes per sample, counted in the workload's most common
  /// pod request (policy/fragmentation): the share of the free GPUs (CPU) such pods cannot use,
  /// and how many of them fit at once.
  std::vector<double> fragmentation_index;
  std::vector<int64_t> pods_that_fit;
  // --- totals ------------------------------------------------------------------------
  std::vector<JobOutcome> jobs;
  int64_t pods_started = 0;     ///< pod starts (restarts count again)
  /// GPU-hours and CPU-hours of runs that completed: the work done, without the runs that
  /// evictions threw away and without gang members that sat bound while their gang waited.
  double gpu_hours_completed = 0, cpu_hours_completed = 0;
  int64_t jobs_completed = 0;
  double makespan = 0;          ///< seconds from the start to the last job's end
  std::vector<EvictionCount> evictions;
  /// Gangs that stayed partially bound (some members bound, fewer than minMember) longer than
  /// their schedule timeout, and how many there were at the end.
  int64_t partial_gangs_stuck = 0;
  std::vector<std::string> partial_gang_examples;  ///< up to 10 "ns/name: k of m bound for Ts"
  std::vector<InvariantResult> invariants;
  // --- cost ----------------------------------------------------------------------------
  std::map<std::string, int64_t> verb_calls;  ///< "filter", "prioritize", "bind", "preempt"
  std::map<std::string, double> verb_seconds; ///< wall seconds spent in each verb
  int64_t scheduling_attempts = 0;
  double wall_seconds = 0;
};

/// Max-min fair division of `pie` by weight, no queue getting more than its demand (weighted
/// water-filling, the allocation DRF and hierarchical fair sharing converge to): the fraction of
/// `pie` each queue is due. A queue with no demand (or no weight) is due 0. When the demands
/// add up to less than `pie`, each queue is due its demand.
std::vector<double> FairShares(const std::vector<double>& weights, const std::vector<double>& demands,
                               double pie);

struct SimInfo {
  int schema_version = 2;
  std::string cluster_file;
  std::string workload_file;
  std::string workload_name;
  std::string config_file;  ///< "" for berth's defaults
  uint64_t seed = 1;
  int nodes = 0;
  int jobs = 0;
  int pods = 0;
  double sample_seconds = 60;
  double simulated_seconds = 0;
  double wall_seconds = 0;
  std::string berth_version;
  std::map<std::string, double> queue_weights;  ///< queue -> weight (queue `default` included)
};

/// The ETA accuracy study (`berth simulate --eta-every`): berth's world runs the ETA forecast
/// on its own model whenever it changed, at most every `every_seconds`, and each waiting job's
/// predicted start is compared with when it started in the simulation.
struct EtaStudy {
  bool enabled = false;
  double every_seconds = 0;
  double noise = 0;           ///< each job's expected-duration annotation is off by up to this share
  bool knows_arrivals = false;  ///< each pass was told every later arrival (SimOptions::eta_knows_arrivals)
  int64_t passes = 0;
  double pass_wall_seconds = 0;      ///< the passes' wall time, in total
  double pass_wall_seconds_max = 0;
  int64_t predictions = 0;           ///< (job, pass) pairs with a predicted start, compared
  int64_t no_start = 0;              ///< (job, pass) pairs the forecast gave no start
  int64_t never_started = 0;         ///< predictions for jobs that did not start in the simulation
  /// Absolute error |predicted - actual start|, seconds: over every prediction, and over each
  /// job's first (at submission).
  double median_error = 0, p90_error = 0;
  double first_median_error = 0, first_p90_error = 0;
  /// The median of predicted - actual: below 0 when predictions are early (jobs that arrive
  /// later and go first, run times longer than announced).
  double median_signed_error = 0;
  /// Mean wait (start - submit) of the jobs predicted, seconds; the goal is a median error of
  /// at most 10% of it with exact durations.
  double mean_wait = 0;
  int64_t jobs = 0;  ///< jobs predicted at least once
  /// The errors by lead: how long before the job's actual start the prediction was made. The
  /// forecast assumes no new work arrives, so the further ahead, the more later arrivals that
  /// go first can move the start.
  struct Lead {
    double below_seconds = 0;  ///< the bucket's upper bound (infinity for the last)
    int64_t predictions = 0;
    double median_error = 0;
    double median_signed_error = 0;
  };
  std::vector<Lead> by_lead;
};

struct SimResult {
  SimInfo info;
  RunMetrics berth;
  RunMetrics baseline;
  EtaStudy eta;
};

}  // namespace berth::extender::sim
