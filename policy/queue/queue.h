#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/settings.h"

namespace berth::policy {

class Pipeline;
/// Reclaim what-ifs one admission plan asks at most (the rest wait for the next plan).
inline constexpr int kMaxReclaimChecks = 64;

/// Pod label naming the pod's fair-share queue (SPEC 4); absent: queue `default`.
inline constexpr std::string_view kQueueLabel = "berth.io/queue";
/// Pod annotation: after this long the pod may be preempted to restore fair share.
inline constexpr std::string_view kLifetimeKey = "berth.io/lifetime";
/// The queue every pod without a queue label joins; it exists without a Queue object.
inline constexpr std::string_view kDefaultQueue = "default";

/// The four priority levels of seed 000 (SPEC 4: PriorityClasses berth-experiment 10,
/// berth-offline 100, berth-normal 1000, berth-production 10000). A pod's level comes from its
/// priority value, so pods of other PriorityClasses map too: >= 10000 production, >= 1000
/// normal, >= 100 offline, anything lower (the default 0 included) experiment.
enum class PriorityLevel : uint8_t { kExperiment, kOffline, kNormal, kProduction };
PriorityLevel LevelOf(int32_t priority);
std::string_view LevelName(PriorityLevel level);
/// The seed's value of a level (10, 100, 1000, 10000), the factor of its CFS score.
int64_t LevelValue(PriorityLevel level);

/// The queue a pod joins (its label, else `default`).
std::string_view QueueNameOf(const core::Pod& pod);

/// The pod's `berth.io/lifetime`: nullopt when absent (never preempted for fair share); an
/// error naming the annotation when it is not a duration of 0 or more.
absl::StatusOr<std::optional<absl::Duration>> LifetimeOf(const core::Pod& pod);

/// Resource usage (seed 001): CPU cores + w_gpu x GPUs + w_mem x memory GiB.
class UsageMeter {
 public:
  explicit UsageMeter(const QueueConfig& config)
      : gpu_weight_(config.gpu_weight), memory_weight_(config.memory_weight_per_gib) {}
  double Of(const core::ResourceVector& r) const;

 private:
  double gpu_weight_;
  double memory_weight_;
};

/// Where a waiting job stands in one admission plan.
enum class JobState : uint8_t {
  kAdmitted,      ///< may start now
  kHead,          ///< next to start; room is kept for it while it waits for room
  kMayPreempt,    ///< no room, but of higher priority than the head: may preempt lower ones
  kWaiting,       ///< no room for it behind the jobs before it
  kBackfill,      ///< fits only in room kept for the head; starting it would delay the head
  kOverLimit,     ///< non-preemptible usage would exceed the queue's limit
  kOverBudget,    ///< its lifetime would overdraw the queue's excess budget
  kUnknownQueue,  ///< names a queue that does not exist
  kUnplaceable,   ///< no node could take it even empty: left to the node filters to explain
};
std::string_view JobStateName(JobState state);
/// What a job no node could ever take is told (kUnplaceable), before what it needs; the ETA
/// forecast gives it as the reason such a job gets no start time.
inline constexpr std::string_view kUnplaceableWhy =
    "no node could ever take it as the cluster stands (the node filters say why: /debug/explain)";

/// Whether a job in this state goes on to the node filters (the rest wait, unresolvable).
inline bool PassesAdmission(JobState s) {
  return s == JobState::kAdmitted || s == JobState::kHead || s == JobState::kMayPreempt ||
         s == JobState::kUnplaceable;
}

/// One waiting job of a plan: a pod on its own, or the waiting members of a gang that has not
/// started (a gang is admitted as one job, all or nothing).
struct PlannedJob {
  std::string key;  ///< "ns/name" of the pod or of the gang
  bool gang = false;
  std::string queue;
  /// Every waiting pod of the job (uids); for a gang, all its waiting members.
  std::vector<std::string> pods;
  /// How many pods it starts with (a gang: the members its minimum still needs).
  int start_pods = 1;
  core::ResourceVector request;  ///< summed over the pods it starts with
  double usage = 0;
  int32_t priority = 0;
  PriorityLevel level = PriorityLevel::kExperiment;
  PriorityLevel effective = PriorityLevel::kExperiment;  ///< after aging
  absl::Time created;
  /// Seed 000's CFS score: level value x usage x seconds its pods have run (restarted gangs).
  double cfs = 0;
  std::optional<absl::Duration> lifetime;
  JobState state = JobState::kWaiting;
  /// 1-based place among the waiting jobs of its queue (0 when admitted).
  int position = 0;
  /// Place in the plan's admission order.
  int order = 0;
  /// The numbers that hold it back, for people ("needs 8 cpu, 1 nvidia.com/gpu; ...").
  std::string why;
  /// The budget (resource-minutes) it draws while it lives.
  double charge = 0;
  /// Something about the job berth could not read (an unreadable berth.io/lifetime, which
  /// then counts as none), for /debug/queues.
  std::string warning;
};

/// One queue as a plan saw it.
struct QueueFigures {
  std::string name;
  double weight = 1;
  bool exists = true;
  bool has_pods = false;
  double fair_share = 0;  ///< fraction of the cluster
  double flow = 0;        ///< before this plan's admissions, resource units
  double usage = 0;       ///< running, binding or holding room
  double usage_nonpreemptible = 0;
  double usage_preemptible = 0;
  double limit_factor = 0.2;
  double budget = 0;       ///< resource-minutes
  double budget_used = 0;  ///< charged to live jobs
  int running_pods = 0;
  int waiting_jobs = 0;
  int admitted_jobs = 0;
  /// Usage after this plan's admissions.
  double planned_usage = 0;
};

/// A pod to evict so that the head of an under-served queue can start (SPEC 6.4: a queue over
/// its fair share loses pods older than their lifetime).
struct FairShareVictim {
  core::Pod pod;
  std::string queue;
  std::string why;
};

/// One admission plan: progressive filling over the queues from one state of the model.
class AdmissionPlan {
 public:
  absl::Time time;
  uint64_t generation = 0;
  /// Cluster capacity in usage units: every schedulable node's allocatable, less what pods of
  /// other schedulers use (capacity berth cannot give to its queues).
  double capacity = 0;
  std::vector<QueueFigures> queues;  ///< name order
  std::vector<PlannedJob> jobs;      ///< admission order
  std::optional<size_t> head;        ///< index in `jobs` of the job next to start
  std::vector<FairShareVictim> victims;

  /// The job a waiting pod belongs to, or nullptr (not waiting, not managed, or started).
  const PlannedJob* JobOf(std::string_view uid) const;
  /// Whether the plan looked at this pod (waiting or started), so a reused plan knows it.
  bool Covers(std::string_view uid) const { return seen_.contains(uid); }
  const QueueFigures* Queue(std::string_view name) const;
  /// The verdict for a pod of `job` (kFit when it passes).
  NodeVerdict VerdictFor(const PlannedJob& job) const;
  /// How many jobs are admitted.
  size_t admitted() const;

 private:
  friend class FairShare;
  absl::flat_hash_map<std::string, size_t, StringHash, StringEq> job_of_pod_;
  absl::flat_hash_set<std::string, StringHash, StringEq> seen_;
};

/// The queue's verdict for `pod` in `plan`: kFit when it may go on to the node filters (its
/// job passes, or the pod is not a waiting pod of berth's model); otherwise why it waits. A
/// waiting pod the plan does not cover yet (it arrived after the plan was made, and the plan
/// was too costly to make again at once) waits for the next plan.
NodeVerdict AdmissionVerdict(const AdmissionPlan& plan, const core::ClusterState& state,
                             const core::Pod& pod);

/// The fair-share book (SPEC 6.4): remembers each queue's flow and the budget charged to live
/// jobs, and makes admission plans. Thread-safe; one per pipeline.
class FairShare {
 public:
  FairShare(QueueConfig config, std::string scheduler_name);

  /// A plan for `state` at `now`: the last one when it is younger than `plan_reuse` and was
  /// made from this very state, or covers pod `uid`, or the model holds over 10,000 pods (then
  /// a burst of new pods costs one plan per `plan_reuse`, not one each); the last one when it
  /// is younger than `admitted_plan_reuse` and admits `uid`'s job; else a new one.
  std::shared_ptr<const AdmissionPlan> PlanFor(const core::ClusterState& state, absl::Time now,
                                               std::string_view uid = {});
  /// For readers that must not change the book (GET endpoints): the last plan when it was made
  /// from this very state less than `plan_reuse` ago; otherwise a plan made on copies of the
  /// book and not kept.
  std::shared_ptr<const AdmissionPlan> Published(const core::ClusterState& state, absl::Time now);
  /// A new plan, whatever the last one was.
  std::shared_ptr<const AdmissionPlan> Replan(const core::ClusterState& state, absl::Time now);

  const QueueConfig& config() const { return config_; }
  const std::string& scheduler_name() const { return scheduler_name_; }
  /// The pipeline whose rules plans ask (pool rules and GPU reserve where a job may run, and
  /// whether it could start by reclaiming). Set once, before the first plan; the pipeline owns
  /// this book.
  void SetPipeline(const Pipeline* pipeline) { pipeline_ = pipeline; }
  /// The clock callers take `now` from (berth's: real in `berth serve`, virtual in simulations).
  /// Set once, before the first plan. A plan is then reused for planReuse from when it was done
  /// on this clock, not from when it began: a plan that took longer than planReuse to make
  /// would otherwise be too old for the next caller, who would make another, and so on for
  /// every pod asked about. Unset: from when it began.
  void SetClock(const core::Clock* clock) { clock_ = clock; }
  const UsageMeter& meter() const { return meter_; }
  /// Plans made so far (kept, and those Published made and dropped), and the wall time they
  /// took: what admission costs the process (/metrics).
  uint64_t plans_made() const { return plans_made_.load(std::memory_order_relaxed); }
  double plan_seconds() const { return static_cast<double>(plan_nanos_.load(std::memory_order_relaxed)) / 1e9; }

  /// Takes `other`'s memory (each queue's flow, the budget charged to live jobs, the last plan),
  /// so that plans made here for a copy of `other`'s model are the plans `other` would make: a
  /// what-if must not start from a book with no past.
  void CopyBookFrom(FairShare& other);

 private:
  std::shared_ptr<const AdmissionPlan> Make(const core::ClusterState& state, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Make, counted in plans_made() and plan_seconds().
  std::shared_ptr<const AdmissionPlan> MakeCounted(const core::ClusterState& state, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// MakeCounted, remembering the plan and how long it took on clock_.
  std::shared_ptr<const AdmissionPlan> MakeTimed(const core::ClusterState& state, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const QueueConfig config_;
  const std::string scheduler_name_;
  const Pipeline* pipeline_ = nullptr;
  const core::Clock* clock_ = nullptr;
  const UsageMeter meter_;
  absl::Mutex mu_;
  std::atomic<uint64_t> plans_made_{0};
  std::atomic<uint64_t> plan_nanos_{0};
  struct Flow {
    double flow = 0;
    absl::Time updated = absl::InfinitePast();
  };
  std::map<std::string, Flow, std::less<>> flows_ ABSL_GUARDED_BY(mu_);
  /// Budget charged per job key, while the job lives.
  struct Charge {
    std::string queue;
    double amount = 0;
  };
  std::map<std::string, Charge, std::less<>> charges_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const AdmissionPlan> last_ ABSL_GUARDED_BY(mu_);
  /// What the last plan took to make on clock_ (0 without one, and in virtual time).
  absl::Duration last_making_ ABSL_GUARDED_BY(mu_);
  /// Whether the last plan is younger than `reuse` at `now`, counted from when it was done.
  bool Recent(absl::Time now, absl::Duration reuse) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

/// Module "queue", at PreFilter: a managed pod that waits in a queue is unresolvable everywhere
/// with its queue, position and the numbers that hold it back; admitted jobs (and the job next
/// to start, so that node filters can name the shortage and kube-scheduler may preempt for it)
/// go on.
class QueueAdmission final : public PreFilterPlugin {
 public:
  explicit QueueAdmission(std::shared_ptr<FairShare> book) : book_(std::move(book)) {}
  std::string_view Name() const override { return "queue"; }
  NodeVerdict PreFilter(const CycleContext& ctx) const override;

 private:
  std::shared_ptr<FairShare> book_;
};

/// Reads the "queues" section (module queue; SPEC 6.4): usage weights, flow half-life, limits,
/// aging (0: none) and how long an admission plan is reused.
absl::StatusOr<QueueConfig> ParseQueueSettings(const Settings& section);

}  // namespace berth::policy
