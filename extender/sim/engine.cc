#include "extender/sim/engine.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/cluster_model.h"
#include "core/placement.h"
#include "core/quantity.h"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/journal.h"
#include "extender/service.h"
#include "extender/sim/answers.h"
#include "extender/sim/forecast.h"
#include "nlohmann/json.hpp"
#include "policy/gang/gang.h"
#include "policy/pools/pools.h"
#include "policy/queue/queue.h"
#include "policy/fragmentation/fragmentation.h"
#include "policy/forecast/run_time.h"
#include "policy/registry.h"
#include "spdlog/spdlog.h"

namespace berth::extender::sim {
namespace {

// Virtual time in microseconds since the start of the simulation.
using Micros = int64_t;
constexpr Micros kSecond = 1'000'000;
Micros ToMicros(absl::Duration d) { return absl::ToInt64Microseconds(d); }
double Seconds(Micros t) { return static_cast<double>(t) / 1e6; }
// The simulation starts at a fixed instant, so that two runs of the same input are identical.
const absl::Time kEpoch = absl::FromUnixSeconds(1'767'225'600);  // 2026-01-01T00:00:00Z

constexpr std::string_view kGangLabel = "scheduling.x-k8s.io/pod-group";

/// berth's clock in a simulation: moves only when the event loop says so.
class SimClock final : public core::Clock {
 public:
  absl::Time Now() const override { return base_ + absl::Microseconds(now_.load(std::memory_order_relaxed)); }
  void Set(Micros t) { now_.store(t, std::memory_order_relaxed); }
  /// Where virtual time 0 is (a forecast starts from the live clock's now). Before any reader.
  void SetBase(absl::Time base) { base_ = base; }

 private:
  absl::Time base_ = kEpoch;
  std::atomic<Micros> now_{0};
};

// Intents berth's Service hands to the cluster (the simulated API server): carried out by the
// event loop once the verb or tick that made them has returned, as a real API server would
// answer them after the request.
struct Intents {
  std::vector<std::pair<std::string, std::string>> binds;      // (uid, node)
  std::vector<std::pair<std::string, std::string>> evictions;  // (uid, why)
  std::vector<std::string> nudges;                              // uid
};

class SimBinder final : public BinderInterface {
 public:
  explicit SimBinder(Intents* intents) : intents_(intents) {}
  absl::Status Bind(const core::Pod& pod, std::string_view node) override {
    intents_->binds.emplace_back(pod.uid.str(), std::string(node));
    return absl::OkStatus();
  }

 private:
  Intents* intents_;
};

class SimEvictor final : public EvictorInterface {
 public:
  explicit SimEvictor(Intents* intents) : intents_(intents) {}
  absl::Status Evict(const core::Pod& victim, const core::Pod&, std::string_view why) override {
    intents_->evictions.emplace_back(victim.uid.str(), std::string(why));
    return absl::OkStatus();
  }

 private:
  Intents* intents_;
};

class SimNudger final : public NudgerInterface {
 public:
  explicit SimNudger(Intents* intents) : intents_(intents) {}
  absl::Status Nudge(const core::Pod& pod, std::string_view) override {
    intents_->nudges.push_back(pod.uid.str());
    return absl::OkStatus();
  }

 private:
  Intents* intents_;
};

// What made berth evict a pod, from the reason its Service gave.
std::string EvictionCause(std::string_view why) {
  if (why.find("reclaim") != std::string_view::npos) return "reclaim";
  if (why.find("elastic") != std::string_view::npos) return "elastic";
  if (why.find("could not complete") != std::string_view::npos) return "gang-release";
  return "fair-share";
}

enum class EventType : uint8_t {
  kSubmit,        // a = job
  kPodFinish,     // a = pod (a pod of a job without a gang ran its duration)
  kJobFinish,     // a = job, b = epoch (a gang ran its duration)
  kBackoffDone,   // a = pod, b = queue token
  kDeleted,       // a = pod (its termination grace period ended)
  kNodeEvent,     // a = index into Workload::node_events
  kTick,          // berth's admission tick
  kHousekeeping,  // berth's housekeeping
  kSample,
  kFlush,         // kube-scheduler's flushUnschedulablePodsLeftover (every 30 s)
  kGangCheck,     // a = job, b = epoch: the gang's schedule timeout after its first bind
  kEta,           // the ETA accuracy study's pass (SimOptions::eta_every)
};

struct Event {
  Micros t;
  uint64_t seq;
  EventType type;
  int32_t a;
  int32_t b;
  bool operator>(const Event& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
};

struct InvariantSpec {
  std::string_view name, description;
};
constexpr InvariantSpec kInvariants[] = {
    {"no-overcommit", "no node is over-committed: the pods bound to it request at most its allocatable"},
    {"gang-partial-timeout", "no gang stays partially bound (some members bound, fewer than minMember) past its schedule timeout"},
    {"pool-borrowers", "a pod of a pool never waits while borrowers hold room in that pool that it could take"},
    {"production-preempted", "production pods (priority 10000 or more) are never preempted or evicted"},
    {"gang-below-min", "preemption and eviction never take a running gang below minMember (only whole)"},
    {"capacity-double", "no capacity is counted twice: berth's model of each node matches the cluster"},
};

enum class QueueState : uint8_t { kNone, kActive, kBackoff, kUnschedulable };

struct SimNode {
  core::Node node;
  bool present = true;
  core::ResourceVector requested;  // bound pods not yet gone (terminating ones included)
  std::vector<int> pods;
  int pool = 0;                    // index into World::pool_names_
  double borrowed_units = 0;       // usage units of berth pods of other pools on this node
  core::ResourceVector borrowed;   // their requests
  std::string quoted;              // the name as a JSON string, for the bodies of the verbs
  std::vector<int> finished_jobs;  // jobs whose pods last ended here, newest last (at most 3)
  // A forecast's: the pods it deleted here, newest last (at most 3): job (or pod) and cause.
  std::vector<JobEta::Evicted> evicted;
};

struct SimPod {
  int job = -1;  // -1: a pod of the cluster file
  core::Pod pod;
  std::string json;  // the v1.Pod kube-scheduler sends in verbs
  bool managed = false;
  int node = -1;
  bool terminating = false;
  bool gone = false;
  Micros bound_at = -1;
  int home_pool = 0;
  int queue = 0;
  double units = 0;  // queue usage units
  double gpus = 0, cpus = 0;
  // kube-scheduler's queue
  QueueState q = QueueState::kNone;
  uint64_t token = 0;
  int attempts = 0;
  Micros backoff_until = 0;
  Micros enqueued = 0;
  Micros unschedulable_since = 0;
  uint64_t cycle = 0;  // the scheduling cycle of its last attempt
  int nominated = -1;
  bool pending = false;  // counted in World::pending_pods_
  int target = -1;       // a forecast: index into World::targets_ (a pod waiting at the start)
  // the pool invariant
  Micros pool_blocked_since = -1;
  bool pool_reported = false;
};

struct SimJob {
  const Job* spec = nullptr;
  std::vector<int> pods;  // the current pod of each member slot
  int min_member = 0;     // 0: not a gang
  int bound = 0;          // members bound and not terminating
  Micros start = -1;      // current run
  Micros first_start = -1;
  std::vector<std::string> first_nodes;  // where its pods ran when it first started
  Micros end = -1;
  int epoch = 0;
  int restarts = 0;
  int pods_finished = 0;  // jobs without a gang
  int incarnations = 0;   // replacement pods made so far (their names end in -rN)
  Micros partial_since = -1;
  bool submitted = false, done = false, partial_reported = false;
  Micros timeout = 0;
  int queue = 0;
  // a forecast
  std::vector<int> after;  // jobs whose end on its nodes came last before its first start
  std::vector<JobEta::Evicted> evicts;  // a forecast's: deleted from its nodes before it, newest first
  policy::RunTimeSource run_source = policy::RunTimeSource::kUnknown;
};


/// One world: a simulated cluster (the API server's truth), a kube-scheduler model, and berth
/// in the loop or not.
class World {
 public:
  World(const SimOptions& o, bool berth) : o_(o), berth_(berth), rng_(o.seed) {
    metrics_.world = berth ? "berth" : "baseline";
    for (const InvariantSpec& s : kInvariants) {
      metrics_.invariants.push_back(
          InvariantResult{.name = std::string(s.name), .description = std::string(s.description)});
    }
  }

  absl::Status Init();
  void Run();
  /// A forecast's answer, after Run.
  Forecast TakeForecast() const;
  EtaStudy& study() { return study_; }
  RunMetrics& metrics() { return metrics_; }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  double end_seconds() const { return sim_end_; }
  const std::vector<std::string>& queue_names() const { return queue_names_; }
  const std::vector<double>& queue_weights() const { return queue_weights_; }

 private:
  core::ResourceNames& names() { return berth_ ? model_->resources() : own_names_; }
  Micros now() const { return now_; }
  void Push(Micros t, EventType type, int32_t a = 0, int32_t b = 0) {
    if (Changes(type)) ++pending_changes_;
    events_.push(Event{t, seq_++, type, a, b});
  }
  /// Events that change the cluster whatever berth or kube-scheduler do (not timers).
  static bool Changes(EventType t) {
    return t == EventType::kSubmit || t == EventType::kPodFinish || t == EventType::kJobFinish ||
           t == EventType::kDeleted || t == EventType::kNodeEvent;
  }
  // --- objects ----------------------------------------------------------------------------
  absl::Status LoadCluster();
  absl::Status MakeService(policy::FairShare* book);
  void SizeFigures();
  // --- a forecast (SimOptions::forecast) ---------------------------------------------------
  absl::Status InitForecast();
  int MakeForecastPod(int job, int member, int incarnation);
  int AddPod(core::Pod pod, int job);
  void EtaPass();
  void FinishStudy();
  absl::StatusOr<int> MakePod(int job, const PodTemplate& t, int member, int incarnation);
  void Submit(int job);
  /// What the figures need of a pod: whether it is berth's, its home pool and queue (SPEC 4's
  /// annotation and label), and its usage in queue units.
  void Classify(SimPod& sp);
  void CountQueuePod(const SimPod& sp, int sign);
  int PoolOfNode(const core::Node& n) const;
  int PoolIndex(std::string_view name) const;
  int QueueIndex(std::string_view name);
  /// Points `job` at `spec` and sets its queue and gang fields from it.
  void SetUpJob(SimJob& job, const Job& spec);
  void ToBerth(const core::ModelEvent& e);
  // --- the cluster's changes ----------------------------------------------------------------
  void BindPod(int p, int node);
  void RecordFirstNodes(SimJob& job);
  void StartTerminating(int p, const std::string& cause);
  void RemovePod(int p);
  void CountOnNode(int p, int node, int sign);
  void MemberLeft(int job, int p, const std::string& cause);
  void Recreate(int p);
  void FinishJob(int job);
  void NodeChange(const NodeEvent& e);
  void MoveAll();  // kube-scheduler's MoveAllToActiveOrBackoffQueue
  // --- kube-scheduler ----------------------------------------------------------------------
  void Enqueue(int p);       // to activeQ
  void ToBackoffOrActive(int p);
  void Failed(int p, bool error);
  void ScheduleOne(int p);
  bool InTreeFits(const SimPod& p, int node, bool with_nominated, std::string_view* why) const;
  /// NodeResourcesFit: the pod's requests fit the node's allocatable on top of `used` plus
  /// `extra` (nullptr: nothing more).
  static bool ResourcesFit(const SimPod& p, const SimNode& n, const core::ResourceVector& used,
                           const core::ResourceVector* extra);
  int64_t LeastAllocated(const SimPod& p, const SimNode& n) const;
  void Preempt(int p, const std::vector<int>& unschedulable_nodes);
  /// kube-scheduler's nominator: `node` < 0 clears the pod's nominated node. A pod leaves the
  /// nominator when it is bound (assumed) or deleted, and when preemption finds no candidate
  /// for it (1.26's PostFilter answers with an empty nominated node).
  void Nominate(int p, int node);
  void TerminateBatch(const std::vector<int>& victims, const std::string& cause);
  // --- berth ---------------------------------------------------------------------------
  void CarryOutIntents();
  std::string FilterBody(const SimPod& p, const std::vector<int>& nodes) const;
  /// Finds a node name of berth's answer among the nodes asked about, from `*from` on first (berth
  /// answers in the order of the question), and advances `*from`. -1: not asked about, which
  /// kube-scheduler treats as an extender error.
  int AskedNode(const std::vector<int>& asked, std::string_view name, size_t* from) const;
  // --- measures -------------------------------------------------------------------------
  void Sample();
  void Violation(size_t invariant, const std::string& example);
  void CheckNode(int node);
  void CheckPoolWait(int p);
  void CheckGang(int job, int epoch);
  void Evicted(const SimPod& p, const std::string& cause, bool work_lost);
  /// Counts the pod as waiting (submitted, not bound) or no longer, in pending_pods_ and
  /// pending_gpus_.
  void SetPending(SimPod& p, bool pending);
  /// Counts the work of a pod that ran to its end since `from` as completed.
  void Completed(const SimPod& p, Micros from);
  bool TickDue() const {
    if (now_ - last_tick_ >= ToMicros(o_.idle_tick)) return true;
    // A forecast plans again only once room was freed (a pod gone, a node changed) or a gang
    // started (its admission is over, so the jobs queued behind it may go): another bind only
    // takes room a plan already gave, and a plan over every waiting job and node after each
    // one is most of what a pass would cost.
    if (o_.forecast != nullptr) return replan_;
    return model_->Read()->generation() != last_tick_generation_;
  }
  bool Done() const { return jobs_left_ == 0; }

  const SimOptions& o_;
  const bool berth_;
  std::mt19937_64 rng_;
  Micros now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;

  // berth (berth world only)
  SimClock clock_;
  std::unique_ptr<core::ClusterModel> model_;
  std::unique_ptr<Service> service_;
  Intents intents_;
  SimBinder binder_{&intents_};
  SimEvictor evictor_{&intents_};
  SimNudger nudger_{&intents_};
  core::ResourceNames own_names_;

  // the cluster
  std::vector<SimNode> nodes_;
  absl::flat_hash_map<std::string, int> node_by_name_;
  std::vector<SimPod> pods_;
  absl::flat_hash_map<std::string, int> pod_by_uid_;
  std::vector<SimJob> jobs_;
  std::vector<core::Pool> pools_;
  std::vector<std::string> pool_names_;  // [0] = "default"
  std::vector<bool> pool_preemption_;
  std::vector<std::string> queue_names_;  // [0] = "default"
  std::vector<double> queue_weights_;
  absl::flat_hash_map<std::string, int32_t> priority_classes_;
  std::string default_priority_class_;
  int64_t jobs_left_ = 0;
  double gpu_weight_ = 8, mem_weight_ = 0.25;

  // kube-scheduler's queue
  struct ActiveEntry {
    int32_t priority;
    Micros enqueued;
    uint64_t seq;
    int pod;
    uint64_t token;
    bool operator<(const ActiveEntry& o) const {  // std::priority_queue pops the largest
      if (priority != o.priority) return priority < o.priority;
      if (enqueued != o.enqueued) return enqueued > o.enqueued;
      return seq > o.seq;
    }
  };
  std::priority_queue<ActiveEntry> active_;
  std::vector<int> unschedulable_;  // may hold stale entries; q says where a pod is
  std::vector<std::vector<int>> nominated_;  // per node: pods nominated to it by preemption
  uint64_t cycle_ = 0, move_cycle_ = 0;
  size_t next_start_node_ = 0;

  // running totals for the samples
  core::ResourceVector total_requested_, total_allocatable_;
  /// The workload's most common pod request: what fragmentation is counted in.
  core::ResourceVector common_request_;
  std::vector<double> queue_usage_;
  std::vector<int> queue_pods_;  // pods waiting or running per queue
  std::vector<double> queue_demand_;  // their usage units
  std::vector<double> pool_lent_, pool_borrowed_;
  int64_t pending_pods_ = 0;
  double pending_gpus_ = 0;  // GPUs the pending pods ask for

  RunMetrics metrics_;
  std::map<std::string, EvictionCount> evictions_;
  double sim_end_ = 0;
  Micros last_tick_ = -1'000'000'000'000;
  int64_t pending_changes_ = 0;  // Changes() events in the queue
  Micros last_progress_ = 0;     // the last time a pod started or ended
  uint64_t last_tick_generation_ = 0;

  // a forecast
  struct Target {
    std::string pod;  // "namespace/name"
    Micros start = -1;
    std::string node;
  };
  struct ForecastJob {
    int job;
    std::string key;
    bool gang = false;
    bool started = false;  // running already (only elastic members wait)
    absl::Time waiting_since = absl::InfiniteFuture();
    std::vector<int> targets;
    policy::RunTime run;
  };
  std::deque<Job> forecast_specs_;              // the jobs' specs, made from the model
  std::vector<std::vector<core::Pod>> originals_;  // per job: each member as the model had it
  std::vector<Target> targets_;
  std::vector<ForecastJob> forecast_jobs_;
  int64_t targets_left_ = 0;
  int running_jobs_ = 0, running_unknown_ = 0;
  uint64_t forecast_generation_ = 0;
  bool replan_ = false;     // a forecast's tick is due: room was freed or a gang started (TickDue)
  bool truncated_ = false;  // a forecast stopped by its wall-time budget
  std::map<int32_t, int> bound_priorities_;  // bound pods (terminating included) by priority
  // the ETA accuracy study (SimOptions::eta_every)
  struct Prediction {
    std::string key;
    Micros at;
    Micros start;  // -1: none given
  };
  std::vector<Prediction> predictions_;
  // Every start of a job (a gang restarted after an eviction starts again) or pod, in order.
  absl::flat_hash_map<std::string, std::vector<Micros>> actual_start_;
  absl::flat_hash_map<std::string, Micros> submitted_at_;
  absl::flat_hash_map<std::string, int> gang_by_key_;  // "namespace/name" of each gang job
  std::vector<double> duration_factor_;  // per job
  uint64_t last_eta_generation_ = ~uint64_t{0};
  EtaStudy study_;
};

// ---- set-up -----------------------------------------------------------------------------------

// berth's Service on model_, as `berth serve` runs it in Kubernetes mode: the model learns only
// from the cluster's events, binds go to the API server, and housekeeping reclaims for pods
// kube-scheduler does not bring to filter. `book`: fair-share memory to start from (a forecast).
absl::Status World::MakeService(policy::FairShare* book) {
  policy::Registry registry = policy::BuildDefaultRegistry();
  policy::PolicyConfig pc = o_.config.policy;
  pc.scheduler_name = o_.config.scheduler_name;
  absl::StatusOr<std::unique_ptr<policy::Pipeline>> pipeline = registry.Build(pc, model_->resources());
  if (!pipeline.ok()) return absl::InvalidArgumentError(StrCat("policies: ", pipeline.status().message()));
  if (policy::FairShare* mine = (*pipeline)->fair_share(); mine != nullptr && book != nullptr) {
    mine->CopyBookFrom(*book);
  }
  ServiceOptions options = ServiceOptionsFor(o_.config, Mode::kKubernetes);
  options.answers = o_.answers;
  service_ = std::make_unique<Service>(std::move(options), model_.get(), *std::move(pipeline),
                                       &binder_, &clock_);
  service_->SetEvictor(&evictor_);
  service_->SetNudger(&nudger_);
  service_->SetReady(true);
  if (o_.journal != nullptr) service_->SetJournal(o_.journal);
  return absl::OkStatus();
}

absl::Status World::Init() {
  gpu_weight_ = o_.config.policy.queues.gpu_weight;
  mem_weight_ = o_.config.policy.queues.memory_weight_per_gib;
  if (o_.forecast != nullptr) return InitForecast();
  if (berth_) {
    model_ = std::make_unique<core::ClusterModel>(&clock_);
    if (absl::Status s = MakeService(nullptr); !s.ok()) return s;
  }
  pool_names_ = {"default"};
  pool_preemption_ = {true};
  queue_names_ = {"default"};
  queue_weights_ = {1};
  if (absl::Status s = LoadCluster(); !s.ok()) return s;
  nominated_.resize(nodes_.size());
  // Jobs, in submit order (stable: equal times keep the file's order).
  const Workload& w = o_.workload;
  jobs_.resize(w.jobs.size());
  for (size_t j = 0; j < w.jobs.size(); ++j) {
    const Job& spec = w.jobs[j];
    SimJob& job = jobs_[j];
    if (!spec.priority_class.empty() && !priority_classes_.contains(spec.priority_class)) {
      return absl::InvalidArgumentError(
          StrCat(o_.workload_source, ": jobs[", j, "] (", spec.name, "): priorityClass \"",
                 spec.priority_class, "\" is not a PriorityClass of the cluster (",
                 o_.cluster_source, ")"));
    }
    if (!spec.pool.empty() && spec.pool != "default" && PoolIndex(spec.pool) == 0) {
      return absl::InvalidArgumentError(StrCat(o_.workload_source, ": jobs[", j, "] (", spec.name,
                                               "): pool \"", spec.pool,
                                               "\" is not a Pool of the cluster (", o_.cluster_source, ")"));
    }
    SetUpJob(job, spec);
    Push(ToMicros(spec.submit), EventType::kSubmit, static_cast<int32_t>(j));
    ++jobs_left_;
  }
  for (size_t i = 0; i < w.node_events.size(); ++i) {
    const NodeEvent& e = w.node_events[i];
    if (e.action != NodeEvent::Action::kAdd && !node_by_name_.contains(e.node)) {
      bool added_before = false;
      for (size_t k = 0; k < i; ++k) {
        added_before |= w.node_events[k].action == NodeEvent::Action::kAdd && w.node_events[k].node == e.node;
      }
      if (!added_before) {
        return absl::InvalidArgumentError(StrCat(o_.workload_source, ": nodeEvents[", i, "]: node \"",
                                                 e.node, "\" is not a node of the cluster"));
      }
    }
    Push(ToMicros(e.at), EventType::kNodeEvent, static_cast<int32_t>(i));
  }
  // Fragmentation is counted in the workload's most common request, the same in both worlds
  // and through the whole run (docs/decisions.md, "Fragmentation").
  std::vector<core::ResourceVector> shapes;
  for (const Job& spec : w.jobs) {
    for (const PodTemplate& t : spec.pods) {
      core::ResourceVector r;
      r.Set(core::kPods, 1);
      for (const auto& [name, text] : t.requests) {
        const std::optional<core::ResourceId> id =
            name == "cpu" ? core::kCpu : name == "memory" ? core::kMemory : name == "nvidia.com/gpu" ? std::optional(core::kNvidiaGpu) : std::nullopt;
        absl::StatusOr<core::Quantity> q = core::Quantity::Parse(text);
        if (!id || !q.ok()) continue;
        r.Set(*id, *id == core::kCpu ? q->MilliValue() : q->Value());
      }
      for (int k = 0; k < t.count; ++k) shapes.push_back(r);
    }
  }
  common_request_ = policy::MostCommonRequest(shapes).value_or(
      policy::DefaultRequest(total_allocatable_.Get(core::kNvidiaGpu) > 0));
  Push(0, EventType::kSample);
  Push(30 * kSecond, EventType::kFlush);
  if (berth_) {
    Push(ToMicros(o_.admission_tick), EventType::kTick);
    Push(ToMicros(o_.housekeeping), EventType::kHousekeeping);
    if (o_.eta_every > absl::ZeroDuration()) {
      // Each job's run time as its pods announce it: exact, or off by a factor drawn per job.
      std::mt19937_64 noise(o_.seed ^ 0x5eed'e7a0ULL);
      std::uniform_real_distribution<double> factor(1 - o_.eta_noise, 1 + o_.eta_noise);
      duration_factor_.resize(jobs_.size(), 1.0);
      for (double& f : duration_factor_) f = o_.eta_noise > 0 ? factor(noise) : 1.0;
      study_.enabled = true;
      for (size_t j = 0; j < jobs_.size(); ++j) {
        if (jobs_[j].min_member > 0) gang_by_key_[StrCat(jobs_[j].spec->ns, "/", jobs_[j].spec->name)] = static_cast<int>(j);
      }
      study_.every_seconds = absl::ToDoubleSeconds(o_.eta_every);
      study_.noise = o_.eta_noise;
      study_.knows_arrivals = o_.eta_knows_arrivals;
      Push(ToMicros(o_.admission_tick) / 2, EventType::kEta);
    }
  }
  return absl::OkStatus();
}

absl::Status World::LoadCluster() {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(o_.cluster_json);
  if (!doc.ok()) return absl::InvalidArgumentError(StrCat(o_.cluster_source, ": ", doc.status().message()));
  absl::StatusOr<std::vector<core::ModelEvent>> events = DecodeList(doc->root(), names());
  if (!events.ok()) {
    return absl::InvalidArgumentError(StrCat(o_.cluster_source, ": ", events.status().message()));
  }
  // The simulator reads the objects itself: their new resource names are added at once.
  for (core::ModelEvent& e : *events) {
    if (absl::Status s = core::ResolveEventResources(names(), e); !s.ok()) {
      return absl::InvalidArgumentError(StrCat(o_.cluster_source, ": ", s.message()));
    }
  }
  std::vector<core::Pod> cluster_pods;
  for (const core::ModelEvent& e : *events) {
    if (const auto* n = std::get_if<core::NodeUpsert>(&e)) {
      node_by_name_[n->node.name] = static_cast<int>(nodes_.size());
      nodes_.push_back(SimNode{.node = n->node});
      AppendJsonString(&nodes_.back().quoted, n->node.name);
    } else if (const auto* p = std::get_if<core::PoolUpsert>(&e)) {
      pools_.push_back(p->pool);
      pool_names_.push_back(p->pool.name);
      pool_preemption_.push_back(!p->pool.disable_preemption);
    } else if (const auto* q = std::get_if<core::QueueUpsert>(&e)) {
      const int i = QueueIndex(q->queue.name);
      queue_weights_[static_cast<size_t>(i)] = q->queue.weight;
    } else if (const auto* pc = std::get_if<core::PriorityClassUpsert>(&e)) {
      priority_classes_[pc->priority_class.name] = pc->priority_class.value;
      if (pc->priority_class.global_default) default_priority_class_ = pc->priority_class.name;
    } else if (const auto* pod = std::get_if<core::PodUpsert>(&e)) {
      cluster_pods.push_back(pod->pod);
    }
  }
  if (nodes_.empty()) return absl::InvalidArgumentError(StrCat(o_.cluster_source, ": the cluster has no nodes"));
  if (berth_) {
    std::vector<core::ModelEvent> without_pods;
    for (const core::ModelEvent& e : *events) {
      if (!std::holds_alternative<core::PodUpsert>(e)) without_pods.push_back(e);
    }
    if (o_.journal != nullptr) o_.journal->ModelEvents(clock_.Now(), without_pods, model_->resources());
    model_->Apply(without_pods);
  }
  SizeFigures();
  // Pods of the cluster file: bound ones run for ever (other schedulers' services, as in seed
  // 000); pending ones are scheduled like any other and then run for ever.
  for (core::Pod& pod : cluster_pods) {
    if (core::IsTerminal(pod.phase)) continue;
    SimPod sp;
    sp.pod = std::move(pod);
    sp.pod.creation = kEpoch;
    sp.json = EncodePod(sp.pod, names()).dump();
    Classify(sp);
    const int index = static_cast<int>(pods_.size());
    pod_by_uid_[sp.pod.uid.str()] = index;
    std::string node(sp.pod.node_name.view());
    sp.pod.node_name = "";
    sp.pod.phase = core::PodPhase::kPending;
    pods_.push_back(std::move(sp));
    SimPod& p = pods_.back();
    if (p.managed) CountQueuePod(p, +1);
    if (!node.empty()) {
      auto it = node_by_name_.find(node);
      if (it == node_by_name_.end()) {
        return absl::InvalidArgumentError(StrCat(o_.cluster_source, ": pod ", p.pod.Key(),
                                                 " is bound to node \"", node, "\", which is not in the file"));
      }
      ToBerth(core::PodUpsert{p.pod});
      BindPod(index, it->second);
    } else {
      ToBerth(core::PodUpsert{p.pod});
      SetPending(p, true);
      Enqueue(index);
    }
  }
  return absl::OkStatus();
}

// Once the nodes, pools and queues are known: each node's pool, the schedulable total, and the
// per-queue and per-pool figures (QueueIndex grows them with every queue it meets from here on).
void World::SizeFigures() {
  for (SimNode& n : nodes_) {
    n.pool = PoolOfNode(n.node);
    if (!n.node.unschedulable) total_allocatable_.Add(n.node.allocatable);
  }
  queue_usage_.assign(queue_names_.size(), 0);
  queue_pods_.assign(queue_names_.size(), 0);
  queue_demand_.assign(queue_names_.size(), 0);
  pool_lent_.assign(pool_names_.size(), 0);
  pool_borrowed_.assign(pool_names_.size(), 0);
}

int World::PoolIndex(std::string_view name) const {
  for (size_t i = 1; i < pool_names_.size(); ++i) {
    if (pool_names_[i] == name) return static_cast<int>(i);
  }
  return 0;
}

// SPEC 6.1: the pool whose selector matches the node; none or several: the default pool.
int World::PoolOfNode(const core::Node& n) const {
  int found = 0;
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (!pools_[i].node_selector.Matches(n.labels)) continue;
    if (found != 0) return 0;
    found = static_cast<int>(i) + 1;
  }
  return found;
}

int World::QueueIndex(std::string_view name) {
  for (size_t i = 0; i < queue_names_.size(); ++i) {
    if (queue_names_[i] == name) return static_cast<int>(i);
  }
  queue_names_.emplace_back(name);
  queue_weights_.push_back(1);
  queue_usage_.push_back(0);
  queue_pods_.push_back(0);
  queue_demand_.push_back(0);
  return static_cast<int>(queue_names_.size()) - 1;
}

void World::ToBerth(const core::ModelEvent& e) {
  if (!berth_) return;
  if (o_.break_rules.contains(kBreakPodDeletes) && std::holds_alternative<core::PodDelete>(e)) return;
  if (o_.journal != nullptr) o_.journal->ModelEvents(clock_.Now(), std::span<const core::ModelEvent>(&e, 1), model_->resources());
  model_->Apply(e);
}


// The v1.Pod a job's controller would create: requests in one container, the berth labels and
// annotations the job asks for, and its priority resolved from its PriorityClass, as the API
// server's admission does.
absl::StatusOr<int> World::MakePod(int job, const PodTemplate& t, int member, int incarnation) {
  const Job& spec = *jobs_[static_cast<size_t>(job)].spec;
  const std::string name = incarnation == 0 ? StrCat(spec.name, "-", t.name, "-", member)
                                            : StrCat(spec.name, "-", t.name, "-", member, "-r", incarnation);
  nlohmann::json labels = nlohmann::json::object();
  nlohmann::json annotations = nlohmann::json::object();
  labels["job-name"] = spec.name;
  if (!spec.queue.empty()) labels[std::string(policy::kQueueLabel)] = spec.queue;
  if (spec.min_member) labels[std::string(kGangLabel)] = spec.name;
  if (!spec.pool.empty()) annotations["berth.io/pool"] = spec.pool;
  if (spec.lifetime) annotations[std::string(policy::kLifetimeKey)] = StrCat(absl::ToInt64Seconds(*spec.lifetime), "s");
  if (spec.max_hops) annotations[std::string(policy::kMaxHopsKey)] = StrCat(*spec.max_hops);
  if (!duration_factor_.empty() || o_.forecast != nullptr) {
    const double seconds = absl::ToDoubleSeconds(spec.duration) *
                           (duration_factor_.empty() ? 1.0 : duration_factor_[static_cast<size_t>(job)]);
    annotations[std::string(policy::kExpectedDurationKey)] = StrCat(std::max<int64_t>(1, std::llround(seconds)), "s");
  }
  nlohmann::json requests = nlohmann::json::object();
  for (const auto& [k, v] : t.requests) requests[k] = v;
  nlohmann::json pod_spec = {{"schedulerName", o_.config.scheduler_name},
                             {"terminationGracePeriodSeconds", absl::ToInt64Seconds(o_.termination_grace)},
                             {"containers", {{{"name", "main"}, {"image", "training:latest"},
                                              {"resources", {{"requests", requests}}}}}}};
  const std::string pc = spec.priority_class.empty() ? default_priority_class_ : spec.priority_class;
  if (!pc.empty()) {
    pod_spec["priorityClassName"] = pc;
    pod_spec["priority"] = priority_classes_[pc];
  }
  if (!t.node_selector.empty()) pod_spec["nodeSelector"] = t.node_selector;
  if (!t.tolerations.empty()) {
    nlohmann::json tol = nlohmann::json::array();
    for (const std::string& k : t.tolerations) tol.push_back({{"key", k}, {"operator", "Exists"}});
    pod_spec["tolerations"] = tol;
  }
  // A forecast's jobs are numbered apart from the workload's, whose pods its model holds.
  const std::string uid = StrCat(o_.forecast != nullptr ? "forecast-" : "sim-", job, "-", member, "-", incarnation);
  nlohmann::json obj = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", spec.ns}, {"uid", uid},
                    {"creationTimestamp", absl::FormatTime(absl::RFC3339_sec, clock_.Now(), absl::UTCTimeZone())},
                    {"labels", labels}, {"annotations", annotations}}},
      {"spec", pod_spec},
      {"status", {{"phase", "Pending"}}}};
  SimPod sp;
  sp.job = job;
  sp.json = obj.dump();
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(sp.json);
  if (!doc.ok()) return doc.status();
  simdjson::dom::object root;
  if (doc->root().get(root) != simdjson::SUCCESS) return absl::InternalError("pod JSON is not an object");
  const JsonPath path;
  core::ResourceNameScope scope(names());
  absl::StatusOr<core::Pod> pod = DecodePod(root, scope, path);
  if (!pod.ok()) {
    return absl::InvalidArgumentError(StrCat(o_.workload_source, ": job ", spec.name, ": ", pod.status().message()));
  }
  core::ResourceVector* request[] = {&pod->request};
  if (absl::Status s = core::ResolveProvisionalIds(names(), scope.provisional(), request);
      !s.ok()) {
    return absl::InvalidArgumentError(StrCat(o_.workload_source, ": job ", spec.name, ": ", s.message()));
  }
  sp.pod = *std::move(pod);
  sp.pod.creation = clock_.Now();
  Classify(sp);
  const int index = static_cast<int>(pods_.size());
  pod_by_uid_[uid] = index;
  pods_.push_back(std::move(sp));
  return index;
}

void World::Classify(SimPod& sp) {
  sp.managed = sp.pod.scheduler_name == o_.config.scheduler_name;
  sp.home_pool = PoolIndex(policy::HomePoolName(sp.pod));
  sp.queue = QueueIndex(policy::QueueNameOf(sp.pod));
  sp.cpus = static_cast<double>(sp.pod.request.Get(core::kCpu)) / 1000.0;
  if (auto gpu = names().Find("nvidia.com/gpu")) sp.gpus = static_cast<double>(sp.pod.request.Get(*gpu));
  sp.units = sp.cpus + gpu_weight_ * sp.gpus +
             mem_weight_ * static_cast<double>(sp.pod.request.Get(core::kMemory)) / double(1LL << 30);
}

// A pod of the queue's demand appears (sign +1) or is gone (-1).
void World::CountQueuePod(const SimPod& sp, int sign) {
  queue_pods_[static_cast<size_t>(sp.queue)] += sign;
  queue_demand_[static_cast<size_t>(sp.queue)] += sign * sp.units;
}

void World::SetUpJob(SimJob& job, const Job& spec) {
  job.spec = &spec;
  job.queue = QueueIndex(spec.queue.empty() ? "default" : spec.queue);
  if (spec.min_member) {
    job.min_member = *spec.min_member;
    job.timeout = spec.schedule_timeout_seconds ? int64_t{*spec.schedule_timeout_seconds} * kSecond
                                                : ToMicros(o_.config.policy.gangs.schedule_timeout);
  }
}

void World::Submit(int j) {
  SimJob& job = jobs_[static_cast<size_t>(j)];
  job.submitted = true;
  if (study_.enabled && job.min_member > 0) submitted_at_.try_emplace(StrCat(job.spec->ns, "/", job.spec->name), now_);
  if (berth_ && job.min_member > 0) {
    core::PodGroup g;
    g.ns = job.spec->ns;
    g.name = job.spec->name;
    g.min_member = job.min_member;
    if (job.spec->schedule_timeout_seconds) g.schedule_timeout_seconds = *job.spec->schedule_timeout_seconds;
    g.creation = clock_.Now();
    ToBerth(core::PodGroupUpsert{std::move(g)});
  }
  int member = 0;
  for (const PodTemplate& t : job.spec->pods) {
    for (int k = 0; k < t.count; ++k, ++member) {
      absl::StatusOr<int> p = MakePod(j, t, member, 0);
      if (!p.ok()) {
        spdlog::error("{}", ToStd(p.status().message()));
        continue;
      }
      job.pods.push_back(*p);
      SimPod& pod = pods_[static_cast<size_t>(*p)];
      if (study_.enabled && job.min_member == 0) submitted_at_.try_emplace(pod.pod.Key(), now_);
      ToBerth(core::PodUpsert{pod.pod});
      SetPending(pod, true);
      CountQueuePod(pod, +1);
      Enqueue(*p);
    }
  }
}

// ---- the cluster's changes --------------------------------------------------------------------

void World::CountOnNode(int p, int node, int sign) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  SimNode& n = nodes_[static_cast<size_t>(node)];
  const bool counted = n.present && !n.node.unschedulable;
  if (int& k = bound_priorities_[pod.pod.priority]; (k += sign) == 0) bound_priorities_.erase(pod.pod.priority);
  if (sign > 0) {
    n.requested.Add(pod.pod.request);
    if (counted) total_requested_.Add(pod.pod.request);
  } else {
    n.requested.Sub(pod.pod.request);
    if (counted) total_requested_.Sub(pod.pod.request);
  }
  if (!pod.managed) return;
  queue_usage_[static_cast<size_t>(pod.queue)] += sign * pod.units;
  if (pod.home_pool != n.pool) {
    n.borrowed_units += sign * pod.units;
    if (sign > 0) n.borrowed.Add(pod.pod.request); else n.borrowed.Sub(pod.pod.request);
    pool_lent_[static_cast<size_t>(n.pool)] += sign * pod.units;
    pool_borrowed_[static_cast<size_t>(pod.home_pool)] += sign * pod.units;
  }
}

void World::BindPod(int p, int node) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  SimNode& n = nodes_[static_cast<size_t>(node)];
  pod.node = node;
  pod.bound_at = now_;
  last_progress_ = now_;
  Nominate(p, -1);
  pod.pod.node_name = n.node.name;
  pod.pod.phase = core::PodPhase::kRunning;
  pod.pod.started = clock_.Now();
  n.pods.push_back(p);
  CountOnNode(p, node, +1);
  ToBerth(core::PodUpsert{pod.pod});
  CheckNode(node);
  SetPending(pod, false);
  if (pod.target >= 0 && targets_[static_cast<size_t>(pod.target)].start < 0) {
    targets_[static_cast<size_t>(pod.target)].start = now_;
    targets_[static_cast<size_t>(pod.target)].node = n.node.name;
    --targets_left_;
  }
  if (study_.enabled && pod.job >= 0 && jobs_[static_cast<size_t>(pod.job)].min_member == 0) {
    actual_start_[pod.pod.Key()].push_back(now_);
  }
  if (pod.job < 0) return;
  ++metrics_.pods_started;
  SimJob& job = jobs_[static_cast<size_t>(pod.job)];
  const Micros duration = ToMicros(job.spec->duration);
  if (job.min_member == 0) {
    Push(now_ + duration, EventType::kPodFinish, p);
    bool all = true;
    for (int q : job.pods) all &= pods_[static_cast<size_t>(q)].node >= 0;
    if (all && job.first_start < 0) {
      job.first_start = now_;
      RecordFirstNodes(job);
    }
    return;
  }
  ++job.bound;
  if (job.start >= 0) return;  // an elastic member joins a running gang
  if (job.bound >= job.min_member) {
    job.start = now_;
    replan_ = true;
    if (study_.enabled) actual_start_[StrCat(job.spec->ns, "/", job.spec->name)].push_back(now_);
    if (job.first_start < 0) {
      job.first_start = now_;
      RecordFirstNodes(job);
    }
    job.partial_since = -1;
    Push(now_ + duration, EventType::kJobFinish, pod.job, job.epoch);
  } else if (job.partial_since < 0) {
    job.partial_since = now_;
    job.partial_reported = false;
    Push(now_ + job.timeout, EventType::kGangCheck, pod.job, job.epoch);
  }
}

void World::RecordFirstNodes(SimJob& job) {
  for (int q : job.pods) {
    const int n = pods_[static_cast<size_t>(q)].node;
    job.first_nodes.push_back(n >= 0 ? nodes_[static_cast<size_t>(n)].node.name : "");
  }
  if (o_.forecast == nullptr) return;
  // The jobs whose end made room for it: those that ended last on its nodes, newest first.
  std::vector<int> after;
  for (int q : job.pods) {
    const int n = pods_[static_cast<size_t>(q)].node;
    if (n < 0) continue;
    for (int k : nodes_[static_cast<size_t>(n)].finished_jobs) {
      if (std::find(after.begin(), after.end(), k) == after.end()) after.push_back(k);
    }
  }
  std::stable_sort(after.begin(), after.end(), [&](int a, int b) {
    return jobs_[static_cast<size_t>(a)].end > jobs_[static_cast<size_t>(b)].end;
  });
  if (after.size() > 3) after.resize(3);
  job.after = std::move(after);
  std::vector<JobEta::Evicted> evicts;
  for (int q : job.pods) {
    const int n = pods_[static_cast<size_t>(q)].node;
    if (n < 0) continue;
    for (const JobEta::Evicted& e : nodes_[static_cast<size_t>(n)].evicted) {
      if (std::none_of(evicts.begin(), evicts.end(), [&](const JobEta::Evicted& x) { return x.job == e.job; })) {
        evicts.push_back(e);
      }
    }
  }
  std::stable_sort(evicts.begin(), evicts.end(), [](const JobEta::Evicted& a, const JobEta::Evicted& b) { return a.at > b.at; });
  if (evicts.size() > 3) evicts.resize(3);
  job.evicts = std::move(evicts);
}

void World::Evicted(const SimPod& p, const std::string& cause, bool work_lost) {
  EvictionCount& e = evictions_[cause];
  e.cause = cause;
  ++e.pods;
  if (work_lost && p.bound_at >= 0) {
    const double hours = Seconds(now_ - p.bound_at) / 3600.0;
    e.gpu_hours_lost += hours * p.gpus;
    e.cpu_hours_lost += hours * p.cpus;
  }
}

void World::Completed(const SimPod& p, Micros from) {
  if (from < 0 || from > now_) return;
  const double hours = Seconds(now_ - from) / 3600.0;
  metrics_.gpu_hours_completed += hours * p.gpus;
  metrics_.cpu_hours_completed += hours * p.cpus;
}

void World::SetPending(SimPod& p, bool pending) {
  if (p.pending == pending) return;
  p.pending = pending;
  pending_pods_ += pending ? 1 : -1;
  pending_gpus_ += pending ? p.gpus : -p.gpus;
}

// A graceful deletion (eviction, preemption, drain): the pod keeps its room for its grace
// period, then it is gone and its job's controller makes a new one.
void World::StartTerminating(int p, const std::string& cause) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  if (pod.terminating || pod.gone) return;
  if (pod.pod.priority >= policy::kProductionPriority && cause != "drain" && cause != "node-failure") {
    Violation(3, StrCat("production pod ", pod.pod.Key(), " (priority ", pod.pod.priority,
                        ") was deleted for ", cause, " at t=", Seconds(now_), "s"));
  }
  pod.terminating = true;
  pod.pod.terminating = true;
  if (pod.node < 0) {  // never bound: gone at once
    RemovePod(p);
    return;
  }
  ToBerth(core::PodUpsert{pod.pod});
  if (o_.forecast != nullptr && cause != "drain") {
    const SimJob* job = pod.job >= 0 ? &jobs_[static_cast<size_t>(pod.job)] : nullptr;
    std::vector<JobEta::Evicted>& here = nodes_[static_cast<size_t>(pod.node)].evicted;
    JobEta::Evicted e{.job = job != nullptr ? StrCat(job->spec->ns, "/", job->spec->name) : pod.pod.Key(),
                      .at = clock_.Now(), .cause = cause};
    std::erase_if(here, [&](const JobEta::Evicted& x) { return x.job == e.job; });
    here.push_back(std::move(e));
    if (here.size() > 3) here.erase(here.begin());
  }
  if (pod.job >= 0) MemberLeft(pod.job, p, cause);
  Push(now_ + ToMicros(o_.termination_grace), EventType::kDeleted, p);
}

// A member stopped counting for its job (it is terminating or gone).
void World::MemberLeft(int j, int p, const std::string& cause) {
  SimJob& job = jobs_[static_cast<size_t>(j)];
  SimPod& pod = pods_[static_cast<size_t>(p)];
  if (job.done) return;
  if (job.min_member == 0) {
    Evicted(pod, cause, true);
    ++job.restarts;
    Recreate(p);
    return;
  }
  const bool was_running = job.start >= 0;
  --job.bound;
  if (was_running && job.bound < job.min_member) {
    // The gang fell below its minimum: the run is lost, every member's work with it.
    Evicted(pod, cause, true);
    for (int q : job.pods) {
      const SimPod& m = pods_[static_cast<size_t>(q)];
      if (q != p && m.node >= 0 && !m.terminating) {
        const double hours = Seconds(now_ - std::max(m.bound_at, job.start)) / 3600.0;
        evictions_[cause].gpu_hours_lost += hours * m.gpus;
        evictions_[cause].cpu_hours_lost += hours * m.cpus;
      }
    }
    job.start = -1;
    ++job.epoch;
    ++job.restarts;
    if (job.bound > 0) {
      job.partial_since = now_;
      job.partial_reported = false;
      Push(now_ + job.timeout, EventType::kGangCheck, j, job.epoch);
    }
  } else {
    // An elastic member of a running gang, or a member of a gang that had not started: the
    // job's progress is not lost.
    Evicted(pod, cause, false);
  }
  Recreate(p);
}

// The job's controller replaces a pod that was evicted or preempted.
void World::Recreate(int p) {
  SimPod& old = pods_[static_cast<size_t>(p)];
  SimJob& job = jobs_[static_cast<size_t>(old.job)];
  auto slot = std::find(job.pods.begin(), job.pods.end(), p);
  if (slot == job.pods.end()) return;
  const int member = static_cast<int>(slot - job.pods.begin());
  int k = member;
  const PodTemplate* t = nullptr;
  for (const PodTemplate& pt : job.spec->pods) {
    if (k < pt.count) { t = &pt; break; }
    k -= pt.count;
  }
  if (t == nullptr) return;
  const int incarnation = ++job.incarnations;
  const bool from_model = o_.forecast != nullptr && !originals_[static_cast<size_t>(old.job)].empty();
  absl::StatusOr<int> fresh = from_model ? MakeForecastPod(old.job, member, incarnation)
                                         : MakePod(old.job, *t, k, incarnation);
  if (!fresh.ok()) return;
  if (old.target >= 0 && targets_[static_cast<size_t>(old.target)].start < 0) {
    pods_[static_cast<size_t>(*fresh)].target = old.target;  // the replacement waits in its place
  }
  job.pods[static_cast<size_t>(member)] = *fresh;
  SimPod& np = pods_[static_cast<size_t>(*fresh)];
  ToBerth(core::PodUpsert{np.pod});
  SetPending(np, true);
  CountQueuePod(np, +1);
  Enqueue(*fresh);
}

// The pod is gone from the API server (deleted, or finished: kube-scheduler's informer drops
// Succeeded pods, and so does berth's pod watch).
void World::RemovePod(int p) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  if (pod.gone) return;
  pod.gone = true;
  pod.q = QueueState::kNone;
  Nominate(p, -1);
  if (pod.managed) CountQueuePod(pod, -1);
  SetPending(pod, false);
  const int node = pod.node;
  if (node >= 0) {
    SimNode& n = nodes_[static_cast<size_t>(node)];
    auto it = std::find(n.pods.begin(), n.pods.end(), p);
    if (it != n.pods.end()) { *it = n.pods.back(); n.pods.pop_back(); }
    CountOnNode(p, node, -1);
    if (pod.job >= 0 && pod.pod.phase == core::PodPhase::kSucceeded) {
      std::erase(n.finished_jobs, pod.job);
      n.finished_jobs.push_back(pod.job);
      if (n.finished_jobs.size() > 3) n.finished_jobs.erase(n.finished_jobs.begin());
    }
  }
  // A pod that finished leaves the pod watch as a real API server's field selector makes it
  // (berth's reflector reads it back and marks the delete as a success).
  ToBerth(core::PodDelete{.uid = pod.pod.uid.str(),
                          .ns = pod.pod.ns.str(),
                          .name = pod.pod.name.str(),
                          .succeeded = pod.pod.phase == core::PodPhase::kSucceeded});
  if (node >= 0) {
    CheckNode(node);
    replan_ = true;
  }
  pod.json.clear();
  pod.json.shrink_to_fit();
  // AssignedPodDelete: kube-scheduler moves every unschedulable pod.
  if (node >= 0) MoveAll();
}

void World::FinishJob(int j) {
  SimJob& job = jobs_[static_cast<size_t>(j)];
  if (job.done) return;
  job.done = true;
  job.end = now_;
  --jobs_left_;
  ++metrics_.jobs_completed;
  metrics_.makespan = std::max(metrics_.makespan, Seconds(now_));
  for (int q : job.pods) {
    SimPod& m = pods_[static_cast<size_t>(q)];
    if (m.gone) continue;
    if (m.node >= 0) {
      m.pod.phase = core::PodPhase::kSucceeded;
      // A gang's members worked from the gang's start (or from joining it, elastic ones).
      if (job.min_member > 0 && !m.terminating) Completed(m, std::max(m.bound_at, job.start));
    }
    RemovePod(q);
  }
  if (berth_ && job.min_member > 0) {
    ToBerth(core::PodGroupDelete{.ns = job.spec->ns, .name = job.spec->name});
  }
}

void World::NodeChange(const NodeEvent& e) {
  auto it = node_by_name_.find(e.node);
  if (e.action == NodeEvent::Action::kAdd) {
    core::Node n;
    n.name = e.node;
    for (const auto& [k, v] : e.labels) n.labels.Set(k, v);
    for (const auto& [k, v] : e.allocatable) {
      absl::StatusOr<core::ResourceId> id = names().Intern(k);
      absl::StatusOr<core::Quantity> q = core::Quantity::Parse(v);
      if (!id.ok() || !q.ok()) continue;  // the workload parser has checked both
      n.allocatable.Set(*id, names().Scale(*id) == core::ResourceScale::kMilli ? q->MilliValue() : q->Value());
    }
    if (n.allocatable.Get(core::kPods) == 0) n.allocatable.Set(core::kPods, 110);
    n.capacity = n.allocatable;
    n.creation = clock_.Now();
    int index;
    if (it == node_by_name_.end()) {
      index = static_cast<int>(nodes_.size());
      node_by_name_[n.name] = index;
      nodes_.push_back(SimNode{.node = n});
      AppendJsonString(&nodes_.back().quoted, n.name);
      nominated_.emplace_back();
    } else {
      index = it->second;
      SimNode& old = nodes_[static_cast<size_t>(index)];
      if (old.present && !old.node.unschedulable) total_allocatable_.Sub(old.node.allocatable);
      old.node = n;
      old.present = true;
    }
    SimNode& sn = nodes_[static_cast<size_t>(index)];
    sn.pool = PoolOfNode(sn.node);
    total_allocatable_.Add(sn.node.allocatable);
    ToBerth(core::NodeUpsert{sn.node});
    MoveAll();
    return;
  }
  if (it == node_by_name_.end()) return;
  SimNode& n = nodes_[static_cast<size_t>(it->second)];
  const bool counted = n.present && !n.node.unschedulable;
  switch (e.action) {
    case NodeEvent::Action::kDrain: {
      if (counted) { total_allocatable_.Sub(n.node.allocatable); total_requested_.Sub(n.requested); }
      n.node.unschedulable = true;
      ToBerth(core::NodeUpsert{n.node});
      const std::vector<int> on = n.pods;
      for (int p : on) {
        if (pods_[static_cast<size_t>(p)].job >= 0) StartTerminating(p, "drain");
      }
      break;
    }
    case NodeEvent::Action::kFail: {
      if (counted) { total_allocatable_.Sub(n.node.allocatable); total_requested_.Sub(n.requested); }
      n.present = false;
      const std::vector<int> on = n.pods;
      for (int p : on) {
        SimPod& pod = pods_[static_cast<size_t>(p)];
        if (pod.job >= 0 && !pod.terminating) {
          pod.terminating = true;
          MemberLeft(pod.job, p, "node-failure");
        }
        // The node is gone: its pods are deleted at once (no kubelet to wait for).
        RemovePod(p);
      }
      n.requested = core::ResourceVector();
      ToBerth(core::NodeDelete{n.node.name});
      break;
    }
    case NodeEvent::Action::kRestore: {
      if (!counted) {
        n.present = true;
        n.node.unschedulable = false;
        total_allocatable_.Add(n.node.allocatable);
        total_requested_.Add(n.requested);
      }
      ToBerth(core::NodeUpsert{n.node});
      MoveAll();
      break;
    }
    case NodeEvent::Action::kAdd: break;
  }
}

// ---- kube-scheduler's queue -------------------------------------------------------------------

void World::Enqueue(int p) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  pod.q = QueueState::kActive;
  pod.enqueued = now_;
  active_.push(ActiveEntry{pod.pod.priority, now_, seq_++, p, ++pod.token});
}

void World::ToBackoffOrActive(int p) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  if (pod.backoff_until > now_) {
    pod.q = QueueState::kBackoff;
    Push(pod.backoff_until, EventType::kBackoffDone, p, static_cast<int32_t>(++pod.token));
  } else {
    Enqueue(p);
  }
}

void World::MoveAll() {
  move_cycle_ = cycle_;
  std::vector<int> parked;
  parked.swap(unschedulable_);
  for (int p : parked) {
    if (pods_[static_cast<size_t>(p)].q == QueueState::kUnschedulable) ToBackoffOrActive(p);
  }
}

// After a failed attempt: backoff grows 1 s, 2 s, 4 s... up to the maximum. An unschedulable
// pod waits for a cluster event unless one came during its attempt; an error backs off.
void World::Failed(int p, bool error) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  Micros backoff = ToMicros(o_.initial_backoff);
  for (int i = 1; i < pod.attempts && backoff < ToMicros(o_.max_backoff); ++i) backoff *= 2;
  pod.backoff_until = now_ + std::min(backoff, ToMicros(o_.max_backoff));
  if (error || move_cycle_ >= pod.cycle) {
    ToBackoffOrActive(p);
    return;
  }
  pod.q = QueueState::kUnschedulable;
  pod.unschedulable_since = now_;
  unschedulable_.push_back(p);
}

bool World::ResourcesFit(const SimPod& p, const SimNode& n, const core::ResourceVector& used,
                         const core::ResourceVector* extra) {
  const core::ResourceVector& req = p.pod.request;
  for (size_t i = 0; i < req.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = req.Get(id);
    if (want == 0) continue;
    const int64_t taken = used.Get(id) + (extra != nullptr ? extra->Get(id) : 0);
    if (taken + want > n.node.allocatable.Get(id)) return false;
  }
  return true;
}

// kube-scheduler's in-tree filters that matter here: NodeUnschedulable, NodeAffinity and
// TaintToleration (PlacementAllows), then NodeResourcesFit with the pods nominated to the node
// at this pod's priority or above counted as if they ran there.
bool World::InTreeFits(const SimPod& p, int node, bool with_nominated, std::string_view* why) const {
  const SimNode& n = nodes_[static_cast<size_t>(node)];
  if (!n.present) { *why = "unresolvable"; return false; }
  if (!core::PlacementAllows(p.pod, n.node)) { *why = "unresolvable"; return false; }
  if (o_.break_rules.contains(kBreakInTreeFit)) return true;
  core::ResourceVector nominated;
  const core::ResourceVector* extra = nullptr;
  if (with_nominated) {
    for (int q : nominated_[static_cast<size_t>(node)]) {
      const SimPod& other = pods_[static_cast<size_t>(q)];
      if (&other != &p && other.pod.priority >= p.pod.priority) nominated.Add(other.pod.request);
    }
    if (!nominated.IsZero()) extra = &nominated;
  }
  if (!ResourcesFit(p, n, n.requested, extra)) { *why = "resources"; return false; }
  return true;
}

// ---- one scheduling attempt --------------------------------------------------------------------

int64_t World::LeastAllocated(const SimPod& p, const SimNode& n) const {
  // NodeResourcesFit's default strategy: the share of cpu and memory left free after the pod,
  // 0..100, averaged with equal weights.
  int64_t sum = 0;
  for (core::ResourceId id : {core::kCpu, core::kMemory}) {
    const int64_t alloc = n.node.allocatable.Get(id);
    if (alloc <= 0) continue;
    const int64_t left = alloc - n.requested.Get(id) - p.pod.request.Get(id);
    sum += std::max<int64_t>(0, left) * 100 / alloc;
  }
  return sum / 2;
}

std::string World::FilterBody(const SimPod& p, const std::vector<int>& nodes) const {
  std::string body;
  size_t size = p.json.size() + 48;
  for (int n : nodes) size += nodes_[static_cast<size_t>(n)].quoted.size() + 1;
  body.reserve(size);
  body.append(R"({"Pod":)").append(p.json).append(R"(,"Nodes":null,"NodeNames":[)");
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) body.push_back(',');
    body.append(nodes_[static_cast<size_t>(nodes[i])].quoted);
  }
  body.append("]}");
  return body;
}

namespace {
// kube-scheduler's numFeasibleNodesToFind (1.26).
size_t FeasibleToFind(size_t all, int percentage) {
  if (all < 100 || percentage >= 100) return all;
  int64_t p = percentage;
  if (p <= 0) p = std::max<int64_t>(5, 50 - static_cast<int64_t>(all) / 125);
  return std::max<size_t>(100, all * static_cast<size_t>(p) / 100);
}

}  // namespace

int World::AskedNode(const std::vector<int>& asked, std::string_view name, size_t* from) const {
  for (size_t k = 0; k < asked.size(); ++k) {
    const size_t i = (*from + k) % asked.size();
    if (nodes_[static_cast<size_t>(asked[i])].node.name == name) {
      *from = i + 1;
      return asked[i];
    }
  }
  return -1;
}

void World::ScheduleOne(int p) {
  ++cycle_;
  {
    SimPod& pod = pods_[static_cast<size_t>(p)];
    pod.cycle = cycle_;
    ++pod.attempts;
  }
  ++metrics_.scheduling_attempts;
  auto timed = [&](std::string_view verb, auto&& call) {
    const auto start = std::chrono::steady_clock::now();
    Reply r = call();
    metrics_.verb_seconds[std::string(verb)] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++metrics_.verb_calls[std::string(verb)];
    return r;
  };
  // kube-scheduler's reading of a filter answer (answers.h): an error, a non-200 answer or a
  // name it did not ask about fail the attempt; `NodeNames` pass. When none passes, preemption
  // may help on every node asked about but those in FailedAndUnresolvableNodes: in 1.26 a node
  // the answer names nowhere has no status, which preemption does not count as unresolvable.
  // The last filter body, which prioritize reuses when berth passed every node it was asked about.
  std::string last_body;
  std::vector<int> last_body_nodes;
  auto ext_filter = [&](const std::vector<int>& nodes, std::vector<int>* pass,
                        std::vector<int>* failed) -> bool {
    last_body = FilterBody(pods_[static_cast<size_t>(p)], nodes);
    last_body_nodes = nodes;
    Reply r = timed("filter", [&] { return service_->Filter(last_body); });
    absl::StatusOr<FilterAnswer> answer = absl::UnknownError("not read");
    if (r.status == 200) {
      if (absl::StatusOr<simdjson::dom::element> el = ParseReused(r.body); el.ok()) {
        answer = ReadFilterAnswer(*el);
      }
    }
    bool ok = answer.ok() && answer->error.empty();
    if (ok && answer->names_given) {
      size_t from = 0;
      for (std::string_view name : answer->names) {
        const int node = AskedNode(nodes, name, &from);
        if (node < 0) {
          ok = false;
          break;
        }
        pass->push_back(node);
      }
    }
    if (ok && pass->empty()) {
      const absl::flat_hash_set<std::string_view> unresolvable(answer->unresolvable.begin(),
                                                               answer->unresolvable.end());
      for (int n : nodes) {
        if (!unresolvable.contains(nodes_[static_cast<size_t>(n)].node.name)) failed->push_back(n);
      }
    }
    CarryOutIntents();
    if (!ok) pass->clear();
    return ok;
  };

  int chosen = -1;
  std::vector<int> feasible, preemptable;
  // The nominated node first (kube-scheduler's evaluateNominatedNode): if it passes the filters
  // and the extender, it is the answer.
  if (const int nom = pods_[static_cast<size_t>(p)].nominated; nom >= 0) {
    std::string_view why;
    if (InTreeFits(pods_[static_cast<size_t>(p)], nom, true, &why)) {
      std::vector<int> pass, failed;
      if (!berth_) {
        chosen = nom;
      } else if (!ext_filter({nom}, &pass, &failed)) {
        Failed(p, true);
        return;
      } else if (!pass.empty()) {
        chosen = nom;
      }
    }
  }
  if (chosen < 0) {
    const size_t all = nodes_.size();
    const size_t want = FeasibleToFind(all, o_.percentage_of_nodes_to_score);
    size_t processed = 0;
    const size_t start = next_start_node_ % all;
    for (; processed < all && feasible.size() < want; ++processed) {
      const int n = static_cast<int>((start + processed) % all);
      std::string_view why;
      if (InTreeFits(pods_[static_cast<size_t>(p)], n, true, &why)) {
        feasible.push_back(n);
      } else if (why == "resources") {
        preemptable.push_back(n);
      }
    }
    next_start_node_ = (start + processed) % all;
    if (!feasible.empty() && berth_) {
      std::vector<int> pass, failed;
      if (!ext_filter(feasible, &pass, &failed)) {
        Failed(p, true);
        return;
      }
      feasible = std::move(pass);
      preemptable.insert(preemptable.end(), failed.begin(), failed.end());
    }
    if (feasible.empty()) {
      CheckPoolWait(p);
      Preempt(p, preemptable);
      Failed(p, false);
      return;
    }
    if (feasible.size() == 1) {
      chosen = feasible[0];
    } else {
      // Score: NodeResourcesFit (weight 1, 0..100) plus berth's 0..10 x weight x 10; the top
      // total wins, ties at random (kube-scheduler's selectHost).
      std::vector<int64_t> total(feasible.size());
      for (size_t i = 0; i < feasible.size(); ++i) {
        total[i] = LeastAllocated(pods_[static_cast<size_t>(p)], nodes_[static_cast<size_t>(feasible[i])]);
      }
      if (berth_) {
        if (last_body_nodes != feasible) last_body = FilterBody(pods_[static_cast<size_t>(p)], feasible);
        Reply r = timed("prioritize", [&] { return service_->Prioritize(last_body); });
        absl::StatusOr<std::vector<HostScore>> list = absl::UnknownError("not read");
        if (r.status == 200) {
          if (absl::StatusOr<simdjson::dom::element> el = ParseReused(r.body); el.ok()) {
            list = ReadPriorityList(*el);
          }
        }
        if (list.ok()) {
          std::vector<std::string_view> names;
          names.reserve(feasible.size());
          for (int n : feasible) names.push_back(nodes_[static_cast<size_t>(n)].node.name);
          const std::vector<int64_t> scores = ExtenderScores(*list, names, o_.extender_weight);
          // Go's int64 sums wrap; so do these, whatever an answer holds.
          for (size_t i = 0; i < feasible.size(); ++i) {
            total[i] = static_cast<int64_t>(static_cast<uint64_t>(total[i]) + static_cast<uint64_t>(scores[i]));
          }
        }  // a prioritize error is ignored, as kube-scheduler ignores it
      }
      int64_t best = -1;
      int ties = 0;
      for (size_t i = 0; i < feasible.size(); ++i) {
        if (total[i] > best) {
          best = total[i];
          chosen = feasible[i];
          ties = 1;
        } else if (total[i] == best && std::uniform_int_distribution<int>(0, ties++)(rng_) == 0) {
          chosen = feasible[i];
        }
      }
    }
  }
  // Bind: berth binds through its bind verb; the baseline's DefaultBinder binds at once.
  if (!berth_) {
    BindPod(p, chosen);
    return;
  }
  const SimPod& pod = pods_[static_cast<size_t>(p)];
  std::string body = R"({"PodName":)";
  AppendJsonString(&body, pod.pod.name.view());
  body.append(R"(,"PodNamespace":)");
  AppendJsonString(&body, pod.pod.ns.view());
  body.append(R"(,"PodUID":)");
  AppendJsonString(&body, pod.pod.uid.view());
  body.append(R"(,"Node":)");
  AppendJsonString(&body, nodes_[static_cast<size_t>(chosen)].node.name);
  body.push_back('}');
  Reply r = timed("bind", [&] { return service_->Bind(body); });
  bool ok = r.status == 200;
  if (ok) {
    absl::StatusOr<simdjson::dom::element> el = ParseReused(r.body);
    std::string_view err;
    ok = el.ok() && (*el)["Error"].get(err) == simdjson::SUCCESS && err.empty();
  }
  CarryOutIntents();
  if (!ok || pods_[static_cast<size_t>(p)].node < 0) Failed(p, true);
}

// kube-scheduler's DefaultPreemption (1.26), then berth's preempt verb on its proposal.
void World::Preempt(int p, const std::vector<int>& candidates) {
  const SimPod& pod = pods_[static_cast<size_t>(p)];
  if (pod.nominated >= 0) {
    // A pod whose nominated node still has lower-priority pods terminating waits for them
    // (PodEligibleToPreemptOthers): it keeps its nomination.
    for (int q : nodes_[static_cast<size_t>(pod.nominated)].pods) {
      const SimPod& other = pods_[static_cast<size_t>(q)];
      if (other.terminating && other.pod.priority < pod.pod.priority) return;
    }
  }
  // No node where preemption could help, or none where it does: kube-scheduler clears the
  // pod's nominated node, and the room it kept there for the pod is free again.
  auto no_candidate = [&] {
    if (pod.nominated < 0) return;
    Nominate(p, -1);
    ToBerth(core::PodUpsert{pods_[static_cast<size_t>(p)].pod});
  };
  if (candidates.empty()) {
    no_candidate();
    return;
  }
  struct Candidate {
    int node;
    std::vector<int> victims;  // highest priority first
  };
  std::vector<Candidate> found;
  const size_t want = std::min(candidates.size(), std::max<size_t>(100, candidates.size() / 10));
  const size_t offset = std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_);
  // No bound pod of lower priority anywhere: no node can have a victim (the search below would
  // find none; at thousands of nodes it is most of a forecast's time).
  if (bound_priorities_.empty() || bound_priorities_.begin()->first >= pod.pod.priority) {
    no_candidate();
    return;
  }
  for (size_t i = 0; i < candidates.size() && found.size() < want; ++i) {
    const int n = candidates[(offset + i) % candidates.size()];
    SimNode& node = nodes_[static_cast<size_t>(n)];
    std::vector<int> lower;
    for (int q : node.pods) {
      const SimPod& other = pods_[static_cast<size_t>(q)];
      if (!other.terminating && other.pod.priority < pod.pod.priority) lower.push_back(q);
    }
    if (lower.empty()) continue;
    // Remove every lower-priority pod; if the pod fits, put back as many as it allows, most
    // important first.
    const core::ResourceVector saved = node.requested;
    for (int q : lower) node.requested.Sub(pods_[static_cast<size_t>(q)].pod.request);
    std::string_view why;
    if (!InTreeFits(pod, n, true, &why)) {
      node.requested = saved;
      continue;
    }
    std::sort(lower.begin(), lower.end(), [&](int a, int b) {
      const SimPod& x = pods_[static_cast<size_t>(a)];
      const SimPod& y = pods_[static_cast<size_t>(b)];
      if (x.pod.priority != y.pod.priority) return x.pod.priority > y.pod.priority;
      return x.bound_at < y.bound_at;
    });
    Candidate c{n, {}};
    for (int q : lower) {
      node.requested.Add(pods_[static_cast<size_t>(q)].pod.request);
      if (!InTreeFits(pod, n, true, &why)) {
        node.requested.Sub(pods_[static_cast<size_t>(q)].pod.request);
        c.victims.push_back(q);
      }
    }
    node.requested = saved;
    if (!c.victims.empty()) found.push_back(std::move(c));
  }
  if (found.empty()) {
    no_candidate();
    return;
  }
  if (berth_) {
    std::string body = R"({"Pod":)";
    body.append(pod.json).append(R"(,"NodeNameToVictims":null,"NodeNameToMetaVictims":{)");
    for (size_t i = 0; i < found.size(); ++i) {
      if (i > 0) body.push_back(',');
      AppendJsonString(&body, nodes_[static_cast<size_t>(found[i].node)].node.name);
      body.append(R"(:{"Pods":[)");
      for (size_t k = 0; k < found[i].victims.size(); ++k) {
        if (k > 0) body.push_back(',');
        body.append(R"({"UID":)");
        AppendJsonString(&body, pods_[static_cast<size_t>(found[i].victims[k])].pod.uid.view());
        body.push_back('}');
      }
      body.append(R"(],"NumPDBViolations":0})");
    }
    body.append("}}");
    const auto t0 = std::chrono::steady_clock::now();
    Reply r = service_->Preempt(body);
    metrics_.verb_seconds["preempt"] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++metrics_.verb_calls["preempt"];
    CarryOutIntents();
    // berth's answer replaces the proposal; kube-scheduler checks every victim is a pod of its
    // cache on that node, else the whole call is an error and nothing is preempted.
    std::vector<Candidate> answer;
    absl::StatusOr<simdjson::dom::element> el = ParseReused(r.body);
    simdjson::dom::object map;
    if (r.status != 200 || !el.ok() || (*el)["NodeNameToMetaVictims"].get(map) != simdjson::SUCCESS) return;
    for (auto field : map) {
      auto nit = node_by_name_.find(std::string(field.key));
      if (nit == node_by_name_.end()) return;
      Candidate c{nit->second, {}};
      simdjson::dom::array victims;
      if (field.value["Pods"].get(victims) != simdjson::SUCCESS) return;
      for (simdjson::dom::element v : victims) {
        std::string_view uid;
        if (v["UID"].get(uid) != simdjson::SUCCESS) return;
        auto pit = pod_by_uid_.find(std::string(uid));
        if (pit == pod_by_uid_.end() || pods_[static_cast<size_t>(pit->second)].node != c.node) return;
        c.victims.push_back(pit->second);
      }
      if (c.victims.empty()) return;
      std::sort(c.victims.begin(), c.victims.end(), [&](int a, int b) {
        return pods_[static_cast<size_t>(a)].pod.priority > pods_[static_cast<size_t>(b)].pod.priority;
      });
      answer.push_back(std::move(c));
    }
    found = std::move(answer);
    if (found.empty()) return;
  }
  // SelectCandidate: lowest highest-victim priority, then the smallest priority sum, then the
  // fewest victims, then the latest start of the most important victim (no PDBs here).
  auto key = [&](const Candidate& c) {
    int64_t sum = 0;
    for (int v : c.victims) sum += pods_[static_cast<size_t>(v)].pod.priority;
    const SimPod& top = pods_[static_cast<size_t>(c.victims.front())];
    return std::make_tuple(top.pod.priority, sum, c.victims.size(), -top.bound_at);
  };
  const Candidate* best = &found.front();
  for (const Candidate& c : found) {
    if (key(c) < key(*best)) best = &c;
  }
  const int node = best->node;
  if (spdlog::should_log(spdlog::level::debug)) {
    std::string names;
    for (int v : best->victims) StrAppend(&names, names.empty() ? "" : ", ", pods_[static_cast<size_t>(v)].pod.Key());
    spdlog::debug("sim {} t={}s: kube-scheduler preempts [{}] on node {} for pod {}", metrics_.world, Seconds(now_),
                  names, nodes_[static_cast<size_t>(best->node)].node.name, pods_[static_cast<size_t>(p)].pod.Key());
  }
  TerminateBatch(best->victims, "preemption");
  Nominate(p, node);
  ToBerth(core::PodUpsert{pods_[static_cast<size_t>(p)].pod});
}

void World::Nominate(int p, int node) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  if (pod.nominated == node) return;
  if (pod.nominated >= 0) std::erase(nominated_[static_cast<size_t>(pod.nominated)], p);
  pod.nominated = node;
  pod.pod.nominated_node = node >= 0 ? nodes_[static_cast<size_t>(node)].node.name : "";
  if (node >= 0) nominated_[static_cast<size_t>(node)].push_back(p);
}

// Deletes pods gracefully as one decision, and checks that it left no gang below its minimum
// (a gang goes whole or keeps its minimum: SPEC 6.2).
void World::TerminateBatch(const std::vector<int>& victims, const std::string& cause) {
  std::map<int, int> before;  // job -> members bound
  for (int v : victims) {
    const SimPod& pod = pods_[static_cast<size_t>(v)];
    if (pod.job >= 0 && jobs_[static_cast<size_t>(pod.job)].min_member > 0) {
      before.emplace(pod.job, jobs_[static_cast<size_t>(pod.job)].bound);
    }
  }
  for (int v : victims) StartTerminating(v, cause);
  for (const auto& [j, was] : before) {
    const SimJob& job = jobs_[static_cast<size_t>(j)];
    if (was >= job.min_member && job.bound > 0 && job.bound < job.min_member) {
      Violation(4, StrCat(cause, " left gang ", job.spec->ns, "/", job.spec->name, " with ", job.bound,
                          " of its minMember ", job.min_member, " members bound (", was,
                          " before) at t=", Seconds(now_), "s"));
    }
  }
}

// ---- berth's side effects ---------------------------------------------------------------------

void World::CarryOutIntents() {
  if (!berth_) return;
  // The Service's own intents first, on this thread: its evictor and nudger add to ours.
  service_->DrainIntents();
  while (!intents_.binds.empty() || !intents_.evictions.empty() || !intents_.nudges.empty()) {
    Intents now;
    std::swap(now, intents_);
    for (const auto& [uid, node] : now.binds) {
      auto pit = pod_by_uid_.find(uid);
      auto nit = node_by_name_.find(node);
      if (pit == pod_by_uid_.end() || nit == node_by_name_.end()) continue;
      const SimPod& pod = pods_[static_cast<size_t>(pit->second)];
      if (pod.node >= 0 || pod.gone || pod.terminating) continue;  // the API server's 409
      // Bound by berth outside kube-scheduler's cycle (never today): leave its queue.
      pods_[static_cast<size_t>(pit->second)].q = QueueState::kNone;
      BindPod(pit->second, nit->second);
    }
    std::map<std::string, std::vector<int>> by_cause;
    for (const auto& [uid, why] : now.evictions) {
      auto pit = pod_by_uid_.find(uid);
      if (pit != pod_by_uid_.end()) by_cause[EvictionCause(why)].push_back(pit->second);
    }
    for (const auto& [cause, victims] : by_cause) TerminateBatch(victims, cause);
    for (const std::string& uid : now.nudges) {
      auto pit = pod_by_uid_.find(uid);
      if (pit == pod_by_uid_.end()) continue;
      // An update of an unschedulable pod moves it (kube-scheduler's Update).
      if (pods_[static_cast<size_t>(pit->second)].q == QueueState::kUnschedulable) ToBackoffOrActive(pit->second);
    }
  }
}

// ---- measures ---------------------------------------------------------------------------------

void World::Violation(size_t i, const std::string& example) {
  InvariantResult& r = metrics_.invariants[i];
  if (r.violations++ == 0) {
    r.first_example = example;
    r.first_time = Seconds(now_);
  }
}

void World::CheckNode(int node) {
  const SimNode& n = nodes_[static_cast<size_t>(node)];
  if (!n.present) return;
  const size_t size = std::max(n.requested.size(), n.node.allocatable.size());
  for (size_t i = 0; i < size; ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    if (n.requested.Get(id) > n.node.allocatable.Get(id)) {
      Violation(0, StrCat("node ", n.node.name, ": ", names().Name(id), " requested ",
                          core::FormatAmount(names(), id, n.requested.Get(id)), " > allocatable ",
                          core::FormatAmount(names(), id, n.node.allocatable.Get(id)), " at t=", Seconds(now_), "s"));
      break;
    }
  }
  if (!berth_) return;
  auto view = model_->Read();
  const core::NodeState* mine = view->FindNode(n.node.name);
  if (mine == nullptr) return;
  const size_t m = std::max(mine->requested.size(), n.requested.size());
  for (size_t i = 0; i < m; ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    if (mine->requested.Get(id) != n.requested.Get(id)) {
      Violation(5, StrCat("node ", n.node.name, ": berth counts ", names().Name(id), " used ",
                          core::FormatAmount(names(), id, mine->requested.Get(id)), ", the cluster ",
                          core::FormatAmount(names(), id, n.requested.Get(id)), " at t=", Seconds(now_), "s"));
      break;
    }
  }
}

// Seed 004: in-pool pods outrank borrowers. A berth pod that found no node, while a node of its
// own pool would take it once that node's borrowers left, must see them go (reclaim) within the
// termination grace period and the reclaim timeout.
void World::CheckPoolWait(int p) {
  SimPod& pod = pods_[static_cast<size_t>(p)];
  if (!pod.managed || pools_.empty() || pod.pool_reported) return;
  const size_t home = static_cast<size_t>(pod.home_pool);
  bool blocked = false;
  if (pool_preemption_[home] && pool_lent_[home] > 0) {
    for (size_t i = 0; i < nodes_.size() && !blocked; ++i) {
      const SimNode& n = nodes_[i];
      if (n.pool != pod.home_pool || n.borrowed_units <= 0 || !n.present || n.node.unschedulable) continue;
      if (!core::PlacementAllows(pod.pod, n.node) || ResourcesFit(pod, n, n.requested, nullptr)) continue;
      core::ResourceVector without_borrowers = n.requested;
      without_borrowers.Sub(n.borrowed);
      blocked = ResourcesFit(pod, n, without_borrowers, nullptr);
      if (blocked && Seconds(now_ - (pod.pool_blocked_since < 0 ? now_ : pod.pool_blocked_since)) >
                         absl::ToDoubleSeconds(o_.termination_grace + o_.config.policy.pools.reclaim_timeout)) {
        pod.pool_reported = true;
        Violation(2, StrCat("pod ", pod.pod.Key(), " of pool ", pool_names_[home], " has waited since t=",
                            Seconds(pod.pool_blocked_since), "s while borrowers hold node ", n.node.name,
                            ", which would take it without them (t=", Seconds(now_), "s)"));
      }
    }
  }
  if (!blocked) pod.pool_blocked_since = -1;
  else if (pod.pool_blocked_since < 0) pod.pool_blocked_since = now_;
}

void World::CheckGang(int j, int epoch) {
  const SimJob& job = jobs_[static_cast<size_t>(j)];
  if (job.epoch != epoch || job.done || job.start >= 0 || job.bound <= 0 || job.partial_since < 0 ||
      now_ - job.partial_since < job.timeout) {
    return;
  }
  ++metrics_.partial_gangs_stuck;
  const std::string example = StrCat(job.spec->ns, "/", job.spec->name, ": ", job.bound, " of minMember ",
                                     job.min_member, " bound since t=", Seconds(job.partial_since),
                                     "s, past its ", Seconds(job.timeout), "s timeout");
  if (metrics_.partial_gang_examples.size() < 10) metrics_.partial_gang_examples.push_back(example);
  Violation(1, example);
}

void World::Sample() {
  metrics_.times.push_back(Seconds(now_));
  const std::pair<std::string_view, std::optional<core::ResourceId>> resources[] = {
      {"cpu", core::kCpu}, {"memory", core::kMemory}, {"nvidia.com/gpu", names().Find("nvidia.com/gpu")}};
  for (const auto& [name, id] : resources) {
    double u = 0;
    if (id && total_allocatable_.Get(*id) > 0) {
      u = static_cast<double>(total_requested_.Get(*id)) / static_cast<double>(total_allocatable_.Get(*id));
    }
    if (id) metrics_.utilisation[std::string(name)].push_back(u);
  }
  double usage = 0;
  std::vector<double> demands(queue_names_.size(), 0.0);
  for (size_t q = 0; q < queue_names_.size(); ++q) {
    usage += std::max(0.0, queue_usage_[q]);
    if (queue_pods_[q] > 0) demands[q] = std::max(0.0, queue_demand_[q]);
  }
  const std::vector<double> fair = FairShares(queue_weights_, demands, usage);
  for (size_t q = 0; q < queue_names_.size(); ++q) {
    metrics_.queue_share[queue_names_[q]].push_back(usage > 0 ? std::max(0.0, queue_usage_[q]) / usage : 0);
    metrics_.queue_fair_share[queue_names_[q]].push_back(fair[q]);
  }
  GangCounts g;
  core::ResourceVector held;  // bound pods of gangs short of minMember
  std::optional<core::ClusterModel::ReadView> view;
  if (berth_) view.emplace(model_.get());
  for (const SimJob& job : jobs_) {
    if (job.min_member == 0 || !job.submitted || job.done) continue;
    if (job.start >= 0) {
      ++g.running;
    } else if (job.bound > 0) {
      ++g.partial;
      for (int q : job.pods) {
        const SimPod& m = pods_[static_cast<size_t>(q)];
        if (m.node < 0 || m.gone) continue;
        const SimNode& n = nodes_[static_cast<size_t>(m.node)];
        if (n.present && !n.node.unschedulable) held.Add(m.pod.request);
      }
    } else {
      bool reserved = false;
      if (view) {
        for (int q : job.pods) reserved |= (*view)->FindReservation(pods_[static_cast<size_t>(q)].pod.uid.view()) != nullptr;
      }
      ++(reserved ? g.reserved : g.waiting);
    }
  }
  metrics_.gangs.push_back(g);
  for (const auto& [name, id] : resources) {
    double u = 0;
    if (id && total_allocatable_.Get(*id) > 0) {
      u = static_cast<double>(total_requested_.Get(*id) - held.Get(*id)) /
          static_cast<double>(total_allocatable_.Get(*id));
    }
    if (id) metrics_.useful_utilisation[std::string(name)].push_back(u);
  }
  for (size_t i = 0; i < pool_names_.size(); ++i) {
    metrics_.pool_lent[pool_names_[i]].push_back(std::max(0.0, pool_lent_[i]));
    metrics_.pool_borrowed[pool_names_[i]].push_back(std::max(0.0, pool_borrowed_[i]));
  }
  metrics_.pending_pods.push_back(static_cast<int>(pending_pods_));
  {
    const std::optional<core::ResourceId> gpu = names().Find("nvidia.com/gpu");
    const double total = gpu ? static_cast<double>(total_allocatable_.Get(*gpu)) : 0;
    metrics_.gpu_demand.push_back(
        total > 0 ? (static_cast<double>(total_requested_.Get(*gpu)) + std::max(0.0, pending_gpus_)) / total : 0);
    double held = 0;
    if (view && total > 0) {
      (*view)->ForEachReservation([&](std::string_view, const core::Reservation& r) {
        held += static_cast<double>(r.request.Get(*gpu));
      });
    }
    metrics_.held_gpus.push_back(total > 0 ? held / total : 0);
  }
  std::vector<policy::NodeRoom> rooms;
  rooms.reserve(nodes_.size());
  for (const SimNode& n : nodes_) {
    if (!n.present) continue;
    core::ResourceVector free = n.node.allocatable;
    free.Sub(n.requested);
    rooms.push_back({.allocatable = n.node.allocatable, .free = std::move(free), .schedulable = !n.node.unschedulable});
  }
  const policy::Fragmentation f = policy::MeasureFragmentation(rooms, common_request_);
  metrics_.fragmentation_index.push_back(f.index);
  metrics_.pods_that_fit.push_back(f.fits);
}

// ---- the event loop ---------------------------------------------------------------------------

void World::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  const Micros max_time = o_.max_time > absl::ZeroDuration() ? ToMicros(o_.max_time) : 0;
  // Without a limit, the run ends when every job has finished, or when nothing but timers is
  // left to happen and nothing has started or ended for a simulated day (jobs that never start).
  // A forecast gives up sooner: past two hours without a change, nothing it can foresee will
  // start its waiting jobs.
  const Micros idle_limit = (o_.forecast != nullptr ? 2 : 24) * 3600 * kSecond;
  const absl::Duration budget = o_.forecast != nullptr ? o_.forecast->max_wall : absl::ZeroDuration();
  uint64_t steps = 0;
  while (true) {
    // A forecast is done once every pod that waited at its start has started, or when its
    // wall-time budget is spent or it is told to stop (checked every 64 steps: a step is an
    // event or an attempt).
    if (o_.forecast != nullptr && targets_left_ == 0) break;
    if (o_.forecast != nullptr && ++steps % 64 == 0 &&
        ((budget > absl::ZeroDuration() &&
          std::chrono::steady_clock::now() - wall_start > absl::ToChronoNanoseconds(budget)) ||
         (o_.forecast->stop != nullptr && o_.forecast->stop->load(std::memory_order_relaxed)))) {
      truncated_ = true;
      break;
    }
    while (!events_.empty() && events_.top().t <= now_) {
      const Event e = events_.top();
      events_.pop();
      if (Changes(e.type)) --pending_changes_;
      switch (e.type) {
        case EventType::kSubmit:
          Submit(e.a);
          last_progress_ = now_;
          break;
        case EventType::kPodFinish: {
          SimPod& pod = pods_[static_cast<size_t>(e.a)];
          if (pod.gone || pod.terminating) break;
          SimJob& job = jobs_[static_cast<size_t>(pod.job)];
          Completed(pod, pod.bound_at);
          pod.pod.phase = core::PodPhase::kSucceeded;
          RemovePod(e.a);
          if (++job.pods_finished == static_cast<int>(job.pods.size())) FinishJob(pod.job);
          last_progress_ = now_;
          break;
        }
        case EventType::kJobFinish:
          if (jobs_[static_cast<size_t>(e.a)].epoch == e.b && jobs_[static_cast<size_t>(e.a)].start >= 0) {
            FinishJob(e.a);
            last_progress_ = now_;
          }
          break;
        case EventType::kBackoffDone: {
          SimPod& pod = pods_[static_cast<size_t>(e.a)];
          if (pod.q == QueueState::kBackoff && pod.token == static_cast<uint64_t>(e.b)) Enqueue(e.a);
          break;
        }
        case EventType::kDeleted:
          RemovePod(e.a);
          last_progress_ = now_;
          break;
        case EventType::kNodeEvent:
          NodeChange(o_.workload.node_events[static_cast<size_t>(e.a)]);
          last_progress_ = now_;
          break;
        case EventType::kTick:
          if (Done()) break;
          if (pending_pods_ > 0 && TickDue()) {
            const auto t0 = std::chrono::steady_clock::now();
            service_->AdmissionTick();
            metrics_.verb_seconds["tick"] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++metrics_.verb_calls["tick"];
            CarryOutIntents();
            last_tick_ = now_;
            last_tick_generation_ = model_->Read()->generation();
            replan_ = false;
          }
          Push(now_ + ToMicros(o_.admission_tick), EventType::kTick);
          break;
        case EventType::kHousekeeping:
          if (Done()) break;
          service_->Housekeeping();
          model_->ExpireBinds(o_.config.bind_confirm_timeout);
          CarryOutIntents();
          Push(now_ + ToMicros(o_.housekeeping), EventType::kHousekeeping);
          break;
        case EventType::kSample:
          Sample();
          if (!Done()) Push(now_ + ToMicros(o_.sample_interval), EventType::kSample);
          break;
        case EventType::kFlush: {
          if (Done()) break;
          std::vector<int> parked;
          parked.swap(unschedulable_);
          for (int p : parked) {
            SimPod& pod = pods_[static_cast<size_t>(p)];
            if (pod.q != QueueState::kUnschedulable) continue;
            if (now_ - pod.unschedulable_since > ToMicros(o_.max_unschedulable)) {
              ToBackoffOrActive(p);
            } else {
              unschedulable_.push_back(p);
            }
          }
          Push(now_ + 30 * kSecond, EventType::kFlush);
          break;
        }
        case EventType::kGangCheck:
          CheckGang(e.a, e.b);
          break;
        case EventType::kEta:
          if (Done()) break;
          EtaPass();
          Push(now_ + ToMicros(o_.eta_every), EventType::kEta);
          break;
      }
    }
    if (!active_.empty()) {
      const ActiveEntry top = active_.top();
      active_.pop();
      SimPod& pod = pods_[static_cast<size_t>(top.pod)];
      if (pod.q != QueueState::kActive || pod.token != top.token || pod.gone || pod.terminating) continue;
      pod.q = QueueState::kNone;
      ScheduleOne(top.pod);
      continue;
    }
    if (events_.empty()) break;
    if (Done()) break;
    const Micros next = events_.top().t;
    if (max_time > 0 && next > max_time) break;
    if ((max_time == 0 || o_.forecast != nullptr) && pending_changes_ == 0 && next - last_progress_ > idle_limit) break;
    now_ = next;
    clock_.Set(now_);
  }
  Sample();
  metrics_.makespan = std::max(metrics_.makespan, 0.0);
  for (const SimJob& job : jobs_) {
    JobOutcome out;
    out.name = StrCat(job.spec->ns, "/", job.spec->name);
    out.queue = queue_names_[static_cast<size_t>(job.queue)];
    out.priority_class = job.spec->priority_class;
    out.pods = job.spec->PodCount();
    out.gang = job.min_member > 0;
    out.submit = Seconds(ToMicros(job.spec->submit));
    out.start = job.first_start >= 0 ? Seconds(job.first_start) : -1;
    out.end = job.done ? Seconds(job.end) : -1;
    out.restarts = job.restarts;
    out.nodes = job.first_nodes;
    metrics_.jobs.push_back(std::move(out));
  }
  for (auto& [cause, e] : evictions_) metrics_.evictions.push_back(e);
  if (study_.enabled) FinishStudy();
  metrics_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  sim_end_ = Seconds(now_);
}

// ---- a forecast -------------------------------------------------------------------------------

// The world as the model has it: its nodes and kinds, berth's pods grouped into jobs (a gang's
// members together, any other pod on its own), running ones ending at their expected end,
// waiting ones in kube-scheduler's queue, oldest first.
absl::Status World::InitForecast() {
  const ForecastOptions& f = *o_.forecast;
  clock_.SetBase(f.now);
  model_ = f.model->Fork(&clock_);
  forecast_generation_ = model_->Read()->generation();
  if (absl::Status s = MakeService(f.book); !s.ok()) return s;
  if (f.after_copy) f.after_copy();
  pool_names_ = {"default"};
  pool_preemption_ = {true};
  queue_names_ = {"default"};
  queue_weights_ = {1};
  struct Member {
    core::Pod pod;
    std::string node;  // bound (or being bound) there; "" waits
  };
  struct Group {
    std::string ns, name;
    bool gang = false;
    int min_member = 0;
    std::optional<int> timeout_seconds;
    absl::Time oldest = absl::InfiniteFuture();
    std::vector<Member> members;
  };
  std::map<std::string, Group> groups;  // by "namespace/name"
  std::vector<Member> others;           // other schedulers' pods and terminating pods, bound
  policy::RunTimeBook book;
  {
    auto view = model_->Read();
    book = policy::RunTimeBook::FromModel(*view);
    view->ForEachPool([&](const core::Pool& p) {
      pools_.push_back(p);
      pool_names_.push_back(p.name);
      pool_preemption_.push_back(!p.disable_preemption);
    });
    view->ForEachQueue([&](const core::Queue& q) { queue_weights_[static_cast<size_t>(QueueIndex(q.name))] = q.weight; });
    view->ForEachPriorityClass([&](const core::PriorityClass& pc) {
      priority_classes_[pc.name] = pc.value;
      if (pc.global_default) default_priority_class_ = pc.name;
    });
    view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      node_by_name_[n.node.name] = static_cast<int>(nodes_.size());
      nodes_.push_back(SimNode{.node = n.node});
      AppendJsonString(&nodes_.back().quoted, n.node.name);
    });
    view->ForEachPod([&](core::PodSlot, const core::PodState& ps) {
      const core::Pod& p = ps.pod;
      if (core::IsTerminal(p.phase)) return;
      std::string node(p.node_name.view());
      if (node.empty()) {
        if (const core::LedgerEntry* bind = view->FindBind(p.uid.view()); bind != nullptr) {
          node = view->node(bind->node).node.name;
        }
      }
      if (p.scheduler_name != o_.config.scheduler_name || p.terminating) {
        if (!node.empty()) others.push_back(Member{p, std::move(node)});
        return;
      }
      const std::string_view gang = core::GangNameOf(p);
      const std::string key = StrCat(p.ns.view(), "/", gang.empty() ? p.name.view() : gang);
      Group& g = groups[key];
      if (g.members.empty()) {
        g.ns = p.ns.str();
        g.name = std::string(gang.empty() ? p.name.view() : gang);
        g.gang = !gang.empty();
        if (const core::PodGroup* pg = g.gang ? view->FindPodGroup(g.ns, g.name) : nullptr) {
          g.min_member = pg->min_member;
          if (pg->schedule_timeout_seconds) g.timeout_seconds = static_cast<int>(*pg->schedule_timeout_seconds);
        }
      }
      if (node.empty()) g.oldest = std::min(g.oldest, p.creation);
      g.members.push_back(Member{p, std::move(node)});
    });
  }
  SizeFigures();
  nominated_.resize(nodes_.size());
  common_request_ = policy::DefaultRequest(total_allocatable_.Get(core::kNvidiaGpu) > 0);

  // A pod already in the model: no event for berth, which has it.
  auto add_pod = [&](core::Pod pod, int job) {
    const int index = AddPod(std::move(pod), job);
    if (pods_.back().managed) CountQueuePod(pods_.back(), +1);
    return index;
  };
  auto place = [&](int p, const std::string& node_name) {
    SimPod& sp = pods_[static_cast<size_t>(p)];
    const int node = node_by_name_.at(node_name);
    sp.node = node;
    sp.bound_at = sp.pod.started != absl::InfinitePast() ? std::min<Micros>(0, ToMicros(sp.pod.started - f.now)) : 0;
    nodes_[static_cast<size_t>(node)].pods.push_back(p);
    CountOnNode(p, node, +1);
  };
  for (Member& m : others) {
    if (!node_by_name_.contains(m.node)) continue;
    const bool terminating = m.pod.terminating;
    const int p = add_pod(std::move(m.pod), -1);
    place(p, m.node);
    if (terminating) {
      pods_[static_cast<size_t>(p)].terminating = true;
      Push(ToMicros(o_.termination_grace), EventType::kDeleted, p);
    }
  }

  // Jobs: the waiting ones by age (kube-scheduler's queue order within a priority), then the rest.
  std::vector<Group*> order;
  for (auto& [key, g] : groups) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(), [](const Group* a, const Group* b) { return a->oldest < b->oldest; });
  constexpr absl::Duration kForever = absl::Hours(24 * 365 * 20);
  std::vector<int> queue_order;
  for (Group* g : order) {
    const int j = static_cast<int>(jobs_.size());
    policy::RunTime run;
    for (const Member& m : g->members) {
      const policy::RunTime r = book.Expected(m.pod);
      if (r.source < run.source) run = r;
    }
    Job& spec = forecast_specs_.emplace_back();
    spec.name = g->name;
    spec.ns = g->ns;
    spec.duration = run.duration == absl::InfiniteDuration() ? kForever : run.duration;
    spec.queue = std::string(policy::QueueNameOf(g->members.front().pod));
    spec.priority_class = g->members.front().pod.priority_class.str();
    for (const Member& m : g->members) spec.pods.push_back(PodTemplate{.name = m.pod.name.str()});
    if (g->gang) {
      spec.min_member = g->min_member > 0 ? g->min_member : static_cast<int>(g->members.size());
      spec.schedule_timeout_seconds = g->timeout_seconds;
    }
    SimJob& job = jobs_.emplace_back();
    SetUpJob(job, spec);
    job.submitted = true;
    job.run_source = run.source;
    ++jobs_left_;
    std::vector<core::Pod>& originals = originals_.emplace_back();
    ForecastJob fj{.job = j, .key = StrCat(g->ns, "/", g->name), .gang = g->gang, .run = run};
    std::vector<Micros> bound_at;  // of the members bound, before now (<= 0)
    for (Member& m : g->members) {
      originals.push_back(m.pod);
      const bool bound = !m.node.empty() && node_by_name_.contains(m.node);
      const int p = add_pod(std::move(m.pod), j);
      job.pods.push_back(p);
      SimPod& sp = pods_[static_cast<size_t>(p)];
      if (bound) {
        place(p, m.node);
        bound_at.push_back(sp.bound_at);
        if (job.min_member > 0) {
          ++job.bound;
        } else {
          Push(std::max<Micros>(0, sp.bound_at + ToMicros(spec.duration)), EventType::kPodFinish, p);
        }
        continue;
      }
      SetPending(sp, true);
      sp.target = static_cast<int>(targets_.size());
      targets_.push_back(Target{.pod = sp.pod.Key()});
      fj.targets.push_back(sp.target);
      fj.waiting_since = std::min(fj.waiting_since, sp.pod.creation);
      ++targets_left_;
      queue_order.push_back(p);
    }
    // A job that started before the forecast has its start at 0, "now or earlier": the world's
    // times before now are negative, and a negative start reads as "not started" (a gang whose
    // start was negative never ended, nor lost its run when a member was evicted). Its end is
    // still its real start plus its run time; a gang started when its minMember-th member did.
    std::sort(bound_at.begin(), bound_at.end());
    const bool any_bound = !bound_at.empty();
    if (job.min_member > 0 && job.bound >= job.min_member) {
      job.start = job.first_start = 0;
      const Micros started = bound_at[static_cast<size_t>(job.min_member - 1)];
      Push(std::max<Micros>(0, started + ToMicros(spec.duration)), EventType::kJobFinish, j, job.epoch);
    } else if (job.min_member > 0 && job.bound > 0) {
      job.partial_since = 0;
      Push(job.timeout, EventType::kGangCheck, j, job.epoch);
    } else if (job.min_member == 0 && any_bound) {
      job.first_start = 0;
    }
    fj.started = job.first_start >= 0;
    if (!fj.targets.empty()) {
      forecast_jobs_.push_back(std::move(fj));
    } else {
      ++running_jobs_;
      if (run.source == policy::RunTimeSource::kUnknown) ++running_unknown_;
    }
  }
  // The study's arrivals (ForecastOptions::arrivals): submitted as the workload would, at their
  // time, running for the time they announce.
  for (const ForecastOptions::Arrival& a : f.arrivals) {
    Job& spec = forecast_specs_.emplace_back(*a.job);
    spec.duration = a.duration;
    SetUpJob(jobs_.emplace_back(), spec);
    originals_.emplace_back();  // none: its replacements are made as the workload's are
    Push(ToMicros(a.after), EventType::kSubmit, static_cast<int32_t>(jobs_.size() - 1));
    ++jobs_left_;
  }
  for (int p : queue_order) Enqueue(p);
  Push(30 * kSecond, EventType::kFlush);
  Push(ToMicros(o_.admission_tick), EventType::kTick);
  Push(ToMicros(o_.housekeeping), EventType::kHousekeeping);
  return absl::OkStatus();
}

// The job controller's replacement of a member, as the model had it, under a new name and uid.
int World::MakeForecastPod(int job, int member, int incarnation) {
  core::Pod pod = originals_[static_cast<size_t>(job)][static_cast<size_t>(member)];
  pod.name = StrCat(pod.name.view(), "-r", incarnation);
  pod.uid = StrCat(pod.uid.view(), "-r", incarnation);
  pod.node_name = "";
  pod.nominated_node = "";
  pod.phase = core::PodPhase::kPending;
  pod.started = absl::InfinitePast();
  pod.terminating = false;
  pod.creation = clock_.Now();
  return AddPod(std::move(pod), job);
}

// A pod of job `job` (-1: none) as the model has it, with the v1.Pod kube-scheduler would send.
int World::AddPod(core::Pod pod, int job) {
  SimPod sp;
  sp.job = job;
  sp.pod = std::move(pod);
  sp.json = EncodePod(sp.pod, names()).dump();
  Classify(sp);
  const int index = static_cast<int>(pods_.size());
  pod_by_uid_[sp.pod.uid.str()] = index;
  pods_.push_back(std::move(sp));
  return index;
}

Forecast World::TakeForecast() const {
  const ForecastOptions& f = *o_.forecast;
  Forecast out;
  out.at = f.now;
  out.generation = forecast_generation_;
  out.horizon = f.horizon;
  out.running_jobs = running_jobs_;
  out.running_unknown = running_unknown_;
  out.simulated_seconds = Seconds(now_);
  out.truncated = truncated_;
  out.attempts = metrics_.scheduling_attempts;
  for (const auto& [verb, n] : metrics_.verb_calls) {
    auto it = metrics_.verb_seconds.find(verb);
    out.calls[verb] = {n, it == metrics_.verb_seconds.end() ? 0.0 : it->second};
  }
  const std::vector<std::string>& levels = o_.config.topology_levels;
  for (const ForecastJob& fj : forecast_jobs_) {
    const SimJob& job = jobs_[static_cast<size_t>(fj.job)];
    JobEta e;
    e.job = fj.key;
    e.gang = fj.gang;
    e.running = fj.started;
    e.queue = job.spec->queue;
    e.waiting_since = fj.waiting_since;
    e.run = fj.run;
    Micros start = -1;
    bool all = true;
    for (int t : fj.targets) {
      const Target& target = targets_[static_cast<size_t>(t)];
      e.pods.push_back(target.pod);
      e.nodes.push_back(target.node);
      all &= target.start >= 0;
      start = std::max(start, target.start);
    }
    // A job that waits whole starts when it first runs (a gang: minMember members); elastic
    // members of a running one when the last of them is bound.
    if (!fj.started) {
      start = job.first_start;  // -1 if it did not start
    } else if (!all) {
      start = -1;
    }
    if (start >= 0) {
      e.start = f.now + absl::Microseconds(start);
      for (int k : job.after) {
        const SimJob& a = jobs_[static_cast<size_t>(k)];
        e.after.push_back(JobEta::After{.job = StrCat(a.spec->ns, "/", a.spec->name),
                                        .end = f.now + absl::Microseconds(a.end),
                                        .source = a.run_source});
      }
      e.evicts = job.evicts;
      // The narrowest domain of every node it got: the longest run of levels they all share.
      std::vector<const core::Node*> placed;
      for (const std::string& n : e.nodes) {
        if (auto it = node_by_name_.find(n); it != node_by_name_.end()) placed.push_back(&nodes_[static_cast<size_t>(it->second)].node);
      }
      std::string path;
      for (const std::string& level : levels) {
        std::optional<std::string_view> v = placed.empty() ? std::nullopt : placed.front()->labels.Get(level);
        bool same = v.has_value();
        for (const core::Node* n : placed) same = same && n->labels.Get(level) == v;
        if (!same) break;
        StrAppend(&path, path.empty() ? "" : "/", *v);
        e.domain_level = level;
        e.domain = path;
      }
    } else if (truncated_) {
      e.unknown = StrCat("the forecast spent its time budget (eta.maxPassSeconds, ",
                         absl::FormatDuration(f.max_wall), ") ", absl::FormatDuration(absl::Microseconds(now_)),
                         " ahead, before it started");
    } else if (running_unknown_ > 0) {
      e.unknown = StrCat("it waits behind running work whose end is unknown (", running_unknown_,
                         " running job", running_unknown_ == 1 ? " has" : "s have",
                         " no berth.io/expected-duration, no activeDeadlineSeconds and no queue median)");
    } else {
      e.unknown = StrCat("nothing expected within the forecast's horizon (",
                         absl::FormatDuration(f.horizon), ") makes room for it");
    }
    const size_t index = out.jobs.size();
    for (const std::string& pod : e.pods) out.by_pod[pod] = index;
    out.by_job[e.job] = index;
    out.jobs.push_back(std::move(e));
  }
  return out;
}

// The study's pass: a forecast from berth's model as it is now, whenever it changed.
void World::EtaPass() {
  const uint64_t generation = model_->Read()->generation();
  if (generation == last_eta_generation_) return;
  last_eta_generation_ = generation;
  ForecastOptions fo{.model = model_.get(), .book = service_->fair_share(), .config = o_.config,
                     .now = clock_.Now(), .horizon = o_.config.eta_horizon, .max_wall = o_.config.eta_max_pass};
  if (o_.eta_knows_arrivals) {
    for (size_t j = 0; j < jobs_.size(); ++j) {
      const SimJob& job = jobs_[j];
      const Micros at = ToMicros(job.spec->submit);
      if (job.submitted || at < now_ || at - now_ > ToMicros(fo.horizon)) continue;
      fo.arrivals.push_back(ForecastOptions::Arrival{
          .after = absl::Microseconds(at - now_), .job = job.spec,
          .duration = job.spec->duration * duration_factor_[j]});
    }
  }
  absl::StatusOr<Forecast> f = RunForecast(fo);
  if (!f.ok()) return;
  ++study_.passes;
  study_.pass_wall_seconds += f->wall_seconds;
  study_.pass_wall_seconds_max = std::max(study_.pass_wall_seconds_max, f->wall_seconds);
  for (const JobEta& e : f->jobs) {
    // Members of a job that runs (elastic members, replacements) are not a start of the job.
    if (e.running) continue;
    if (auto it = gang_by_key_.find(e.job); it != gang_by_key_.end() && jobs_[static_cast<size_t>(it->second)].start >= 0) {
      continue;
    }
    predictions_.push_back(Prediction{
        .key = e.job, .at = now_, .start = e.start ? ToMicros(*e.start - clock_.Now()) + now_ : -1});
  }
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void World::FinishStudy() {
  // Lead buckets' upper bounds, seconds: 10 min, 30 min, 1 h, 3 h, beyond.
  static constexpr std::array<double, 5> kLeads = {600, 1800, 3600, 10800, std::numeric_limits<double>::infinity()};
  std::array<std::vector<double>, kLeads.size()> by_lead;
  std::vector<double> errors, first_errors, signed_errors;
  absl::flat_hash_set<std::string> seen;
  double waits = 0;
  for (const Prediction& p : predictions_) {
    const bool first = seen.insert(p.key).second;
    // What it predicted: the job's next start after the prediction (a gang evicted and
    // restarted is predicted again, for its next start).
    std::optional<Micros> actual;
    if (auto it = actual_start_.find(p.key); it != actual_start_.end()) {
      auto next = std::lower_bound(it->second.begin(), it->second.end(), p.at);
      if (next != it->second.end()) actual = *next;
    }
    if (first && actual) {
      auto submitted = submitted_at_.find(p.key);
      waits += Seconds(*actual - (submitted != submitted_at_.end() ? submitted->second : p.at));
      ++study_.jobs;
    }
    if (p.start < 0) {
      ++study_.no_start;
      continue;
    }
    if (!actual) {
      ++study_.never_started;
      continue;
    }
    const double error = Seconds(p.start - *actual);
    errors.push_back(std::abs(error));
    signed_errors.push_back(error);
    if (first) first_errors.push_back(std::abs(error));
    const double lead = Seconds(*actual - p.at);
    size_t b = 0;
    while (b + 1 < kLeads.size() && lead >= kLeads[b]) ++b;
    by_lead[b].push_back(error);
  }
  for (size_t b = 0; b < kLeads.size(); ++b) {
    std::vector<double> abs_errors;
    for (double e : by_lead[b]) abs_errors.push_back(std::abs(e));
    study_.by_lead.push_back(EtaStudy::Lead{.below_seconds = kLeads[b],
                                            .predictions = static_cast<int64_t>(by_lead[b].size()),
                                            .median_error = Quantile(abs_errors, 0.5),
                                            .median_signed_error = Quantile(by_lead[b], 0.5)});
  }
  study_.median_signed_error = Quantile(signed_errors, 0.5);
  study_.predictions = static_cast<int64_t>(errors.size());
  study_.median_error = Quantile(errors, 0.5);
  study_.p90_error = Quantile(errors, 0.9);
  study_.first_median_error = Quantile(first_errors, 0.5);
  study_.first_p90_error = Quantile(first_errors, 0.9);
  study_.mean_wait = study_.jobs > 0 ? waits / static_cast<double>(study_.jobs) : 0;
}

}  // namespace

absl::StatusOr<Forecast> RunForecast(const ForecastOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  SimOptions o;
  o.config = options.config;
  o.cluster_source = "berth's model";
  o.run_baseline = false;
  o.max_time = options.horizon;
  o.forecast = &options;
  // berth's timers, coarser than `berth serve` runs them: the admission tick and housekeeping
  // plan over every waiting job and node (most of a pass's time at thousands of nodes), and a
  // coarser timer moves a start by seconds (at most 15), where an ETA is read in minutes.
  o.admission_tick = absl::Seconds(15);
  o.idle_tick = absl::Seconds(120);
  o.housekeeping = absl::Seconds(120);
  // An admission plan (every waiting job over every node) is reused for one tick of virtual
  // time by the pods it covers, as `berth serve` reuses one for 250 ms of real time.
  o.config.policy.queues.plan_reuse = o.admission_tick;
  World world(o, true);
  if (absl::Status s = world.Init(); !s.ok()) return s;
  world.Run();
  Forecast f = world.TakeForecast();
  f.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return f;
}

absl::StatusOr<SimResult> RunSimulation(const SimOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  World berth(options, true);
  if (absl::Status s = berth.Init(); !s.ok()) return s;
  std::optional<World> baseline;
  if (options.run_baseline) {
    baseline.emplace(options, false);
    if (absl::Status s = baseline->Init(); !s.ok()) return s;
  }
  std::thread other;
  if (baseline) other = std::thread([&] { baseline->Run(); });
  berth.Run();
  if (other.joinable()) other.join();
  SimResult r;
  SimInfo& info = r.info;
  info.cluster_file = options.cluster_source;
  info.workload_file = options.workload_source;
  info.workload_name = options.workload.name;
  info.config_file = options.config_source;
  info.seed = options.seed;
  info.nodes = berth.node_count();
  info.jobs = static_cast<int>(options.workload.jobs.size());
  info.pods = options.workload.PodCount();
  info.sample_seconds = absl::ToDoubleSeconds(options.sample_interval);
  info.simulated_seconds = std::max(berth.end_seconds(), baseline ? baseline->end_seconds() : 0.0);
  info.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  for (size_t i = 0; i < berth.queue_names().size(); ++i) {
    info.queue_weights[berth.queue_names()[i]] = berth.queue_weights()[i];
  }
  r.eta = berth.study();
  r.berth = std::move(berth.metrics());
  if (baseline) r.baseline = std::move(baseline->metrics());
  else r.baseline.world = "baseline";
  return r;
}

}  // namespace berth::extender::sim
