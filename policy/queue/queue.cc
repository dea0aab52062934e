#include "policy/queue/queue.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/placement.h"
#include "core/strings.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"
#include "policy/pipeline.h"
#include "policy/pools/pools.h"

namespace berth::policy {

PriorityLevel LevelOf(int32_t priority) {
  if (priority >= kProductionPriority) return PriorityLevel::kProduction;
  if (priority >= 1000) return PriorityLevel::kNormal;
  if (priority >= 100) return PriorityLevel::kOffline;
  return PriorityLevel::kExperiment;
}

std::string_view LevelName(PriorityLevel level) {
  switch (level) {
    case PriorityLevel::kExperiment: return "experiment";
    case PriorityLevel::kOffline: return "offline";
    case PriorityLevel::kNormal: return "normal";
    case PriorityLevel::kProduction: return "production";
  }
  return "experiment";
}

int64_t LevelValue(PriorityLevel level) {
  switch (level) {
    case PriorityLevel::kExperiment: return 10;
    case PriorityLevel::kOffline: return 100;
    case PriorityLevel::kNormal: return 1000;
    case PriorityLevel::kProduction: return 10000;
  }
  return 10;
}

std::string_view QueueNameOf(const core::Pod& pod) {
  std::optional<std::string_view> q = pod.labels.Get(kQueueLabel);
  return q && !q->empty() ? *q : kDefaultQueue;
}

absl::StatusOr<std::optional<absl::Duration>> LifetimeOf(const core::Pod& pod) {
  std::optional<std::string_view> v = pod.annotations.Get(kLifetimeKey);
  if (!v) return std::optional<absl::Duration>();
  absl::Duration d;
  if (!absl::ParseDuration(ToAbsl(*v), &d) || d < absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(StrCat("annotation ", kLifetimeKey, ": expected a duration of 0s or more such as \"30m\", got \"",
                                             v->substr(0, 64), "\""));
  }
  return std::optional<absl::Duration>(d);
}

double UsageMeter::Of(const core::ResourceVector& r) const {
  return static_cast<double>(r.Get(core::kCpu)) / 1000.0 +
         gpu_weight_ * static_cast<double>(r.Get(core::kNvidiaGpu)) +
         memory_weight_ * static_cast<double>(r.Get(core::kMemory)) / (1024.0 * 1024.0 * 1024.0);
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kAdmitted: return "admitted";
    case JobState::kHead: return "next";
    case JobState::kMayPreempt: return "may-preempt";
    case JobState::kWaiting: return "waiting";
    case JobState::kBackfill: return "backfill-blocked";
    case JobState::kOverLimit: return "over-limit";
    case JobState::kOverBudget: return "over-budget";
    case JobState::kUnknownQueue: return "unknown-queue";
    case JobState::kUnplaceable: return "unplaceable";
  }
  return "waiting";
}

const PlannedJob* AdmissionPlan::JobOf(std::string_view uid) const {
  auto it = job_of_pod_.find(uid);
  return it == job_of_pod_.end() ? nullptr : &jobs[it->second];
}

const QueueFigures* AdmissionPlan::Queue(std::string_view name) const {
  for (const QueueFigures& q : queues) {
    if (q.name == name) return &q;
  }
  return nullptr;
}

size_t AdmissionPlan::admitted() const {
  return static_cast<size_t>(std::count_if(jobs.begin(), jobs.end(), [](const PlannedJob& j) {
    return j.state == JobState::kAdmitted;
  }));
}

NodeVerdict AdmissionPlan::VerdictFor(const PlannedJob& job) const {
  if (PassesAdmission(job.state)) return NodeVerdict::Ok();
  NodeVerdict v;
  v.fit = Fit::kUnresolvable;
  switch (job.state) {
    case JobState::kUnknownQueue:
      v.reason = Reason::kQueueUnknown;
      v.message = StrCat("berth: ", job.why);
      return v;
    case JobState::kBackfill: v.reason = Reason::kQueueBackfill; break;
    case JobState::kOverLimit: v.reason = Reason::kQueueLimit; break;
    case JobState::kOverBudget: v.reason = Reason::kQueueBudget; break;
    default: v.reason = Reason::kQueueWaiting; break;
  }
  const QueueFigures* q = Queue(job.queue);
  int waiting = q != nullptr ? q->waiting_jobs : 0;
  std::string standing;
  if (q != nullptr && capacity > 0) {
    standing = absl::StrFormat("flow %.1f%% vs fair share %.1f%%", 100.0 * q->flow / capacity,
                               100.0 * q->fair_share);
  } else if (q != nullptr) {
    standing = absl::StrFormat("flow %.1f, fair share %.1f%%", q->flow, 100.0 * q->fair_share);
  }
  v.message = StrCat("berth: queue ", job.queue, ": position ", job.position, " of ", waiting, ", ",
                     standing, "; ", job.why);
  return v;
}

namespace {

/// The resources a request asks for, as a bit set (ids above 63 share the last bit).
uint64_t Mask(const core::ResourceVector& req) {
  uint64_t m = 0;
  for (size_t i = 0; i < req.size(); ++i) {
    if (req.Get(static_cast<core::ResourceId>(i)) > 0) m |= uint64_t{1} << std::min<size_t>(i, 63);
  }
  return m;
}

/// Whether `req` fits in `free` less `kept` (when given), without building the difference.
bool FitsIn(const core::ResourceVector& req, const core::ResourceVector& free,
            const core::ResourceVector* kept) {
  for (size_t i = 0; i < req.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = req.Get(id);
    if (want <= 0) continue;
    const int64_t room = kept == nullptr ? free.Get(id) : free.Get(id) - kept->Get(id);
    if (want > room) return false;
  }
  return true;
}

bool Dominates(const core::ResourceVector& big, const core::ResourceVector& small) {
  for (size_t i = 0; i < small.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    if (small.Get(id) > big.Get(id)) return false;
  }
  return true;
}

/// The free room of every schedulable node, as admissions in one plan take it. Placement is
/// first fit from a rotating cursor under the pod's placement constraints; kube-scheduler's
/// own filters and berth's decide the real node later. What the plan needs is whether a job
/// fits at all, and room it keeps for the head.
class Sim {
 public:
  /// \param eligible whether a pod may go on a node by every rule except room (the pipeline's
  /// filters in planning mode: pool rules, GPU reserve, placement); empty: placement only.
  Sim(const core::ClusterState& state, EligibleFn eligible) : eligible_(std::move(eligible)) {
    state.ForEachNode([&](core::NodeSlot slot, const core::NodeState& n) {
      if (n.node.unschedulable) return;
      index_of_slot_.emplace(slot, nodes_.size());
      nodes_.push_back({&n, n.Free(), {}});
      total_free_.Add(Clamped(nodes_.back().free));
    });
  }

  /// A node for every pod of `start` (first fit from a rotating cursor), or nullopt;
  /// `respect_kept`: outside the room kept for the head. Nothing is taken (see Take).
  std::optional<std::vector<size_t>> Find(const std::vector<const core::PodState*>& start,
                                          bool respect_kept) {
    if (start.empty()) return std::vector<size_t>{};
    if (nodes_.empty()) return std::nullopt;
    core::ResourceVector sum;
    for (const core::PodState* p : start) sum.Add(p->pod.request);
    if (!FitsIn(sum, total_free_, respect_kept ? &total_kept_ : nullptr)) return std::nullopt;
    std::vector<size_t> found;
    found.reserve(start.size());
    auto undo = [&] {
      for (size_t k = 0; k < found.size(); ++k) nodes_[found[k]].free.Add(start[k]->pod.request);
    };
    std::vector<core::ResourceVector>& memo = failed_[respect_kept ? 1 : 0];
    for (const core::PodState* p : start) {
      const core::ResourceVector& req = p->pod.request;
      const bool plain = p->pod.placement == nullptr && start.size() == 1;
      if (plain && std::any_of(memo.begin(), memo.end(), [&](const core::ResourceVector& f) {
            return Dominates(req, f);
          })) {
        return std::nullopt;
      }
      // One cursor per set of resources asked for, so that GPU pods do not walk past every
      // CPU node after a CPU pod moved the cursor there (and the other way round).
      size_t& cursor = cursors_[Mask(req)];
      std::optional<size_t> at;
      for (size_t k = 0; k < nodes_.size() && !at; ++k) {
        const size_t i = (cursor + k) % nodes_.size();
        const SimNode& n = nodes_[i];
        if (!FitsIn(req, n.free, respect_kept ? &n.kept : nullptr)) continue;
        if (p->pod.placement != nullptr && !core::PlacementAllows(p->pod, n.node->node)) continue;
        if (eligible_ && !eligible_(p->pod, *n.node)) continue;
        at = i;
      }
      if (!at) {
        if (plain && memo.size() < 32) memo.push_back(req);
        undo();
        return std::nullopt;
      }
      nodes_[*at].free.Sub(req);  // members of one job must not share the same room
      found.push_back(*at);
      cursor = *at;
    }
    undo();
    return found;
  }

  /// Takes the room Find found for `start`.
  void Take(const std::vector<const core::PodState*>& start, const std::vector<size_t>& at) {
    for (size_t k = 0; k < at.size(); ++k) {
      nodes_[at[k]].free.Sub(start[k]->pod.request);
      total_free_.Sub(start[k]->pod.request);
    }
  }

  /// Whether every pod of `start` could go on some node were it empty (its allocatable, its
  /// placement constraints): a job that could not never gets room kept for it.
  bool Possible(const std::vector<const core::PodState*>& start) {
    for (const core::PodState* p : start) {
      if (!p->pod.unknown_requests.empty()) return false;
      // Pods of one request and home pool are alike here (the pool rules decide eligibility).
      const bool plain = p->pod.placement == nullptr;
      const std::string_view pool = HomePoolName(p->pod);
      if (plain) {
        auto known = std::find_if(possible_.begin(), possible_.end(), [&](const auto& e) {
          return std::get<0>(e) == p->pod.request && std::get<1>(e) == pool;
        });
        if (known != possible_.end()) {
          if (!std::get<2>(*known)) return false;
          continue;
        }
      }
      const bool some = std::any_of(nodes_.begin(), nodes_.end(), [&](const SimNode& n) {
        return FitsIn(p->pod.request, n.node->node.allocatable, nullptr) &&
               (plain || core::PlacementAllows(p->pod, n.node->node)) &&
               (!eligible_ || eligible_(p->pod, *n.node));
      });
      if (plain && possible_.size() < 64) possible_.emplace_back(p->pod.request, std::string(pool), some);
      if (!some) return false;
    }
    return true;
  }

  /// Keeps room for the head: for each pod, on the node closest to fitting it (the smallest
  /// shortfall, as a fraction of what it asks), whatever of its request is free there now.
  void Keep(const std::vector<const core::PodState*>& start) {
    for (const core::PodState* p : start) {
      const core::ResourceVector& req = p->pod.request;
      std::optional<size_t> best;
      double best_short = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < nodes_.size(); ++i) {
        const SimNode& n = nodes_[i];
        if (p->pod.placement != nullptr && !core::PlacementAllows(p->pod, n.node->node)) continue;
        // Room is kept only where the job may run by pool rules: a job that could run here only
        // by borrowing keeps no room against the pool's own pods (docs/decisions.md).
        if (eligible_ && !eligible_(p->pod, *n.node)) continue;
        const double shortfall = MissingFraction(
            req, [&](core::ResourceId id) { return n.free.Get(id) - n.kept.Get(id); });
        if (shortfall < best_short) {
          best_short = shortfall;
          best = i;
        }
      }
      if (!best) continue;
      SimNode& n = nodes_[*best];
      core::ResourceVector keep;
      for (size_t r = 0; r < req.size(); ++r) {
        const auto id = static_cast<core::ResourceId>(r);
        const int64_t room = n.free.Get(id) - n.kept.Get(id);
        keep.Set(id, std::clamp<int64_t>(room, 0, std::max<int64_t>(req.Get(id), 0)));
      }
      n.kept.Add(keep);
      total_kept_.Add(keep);
    }
  }

  /// Gives back room on a node (a pod that is leaving or would be evicted).
  void Release(core::NodeSlot slot, const core::ResourceVector& request) {
    auto it = index_of_slot_.find(slot);
    if (it == index_of_slot_.end()) return;
    nodes_[it->second].free.Add(request);
    total_free_ = {};
    for (const SimNode& n : nodes_) total_free_.Add(Clamped(n.free));
    failed_[0].clear();
    failed_[1].clear();
  }

 private:
  static core::ResourceVector Clamped(core::ResourceVector v) {
    for (size_t i = 0; i < v.size(); ++i) {
      const auto id = static_cast<core::ResourceId>(i);
      if (v.Get(id) < 0) v.Set(id, 0);
    }
    return v;
  }

  EligibleFn eligible_;
  struct SimNode {
    const core::NodeState* node;
    core::ResourceVector free;
    core::ResourceVector kept;
  };
  std::vector<SimNode> nodes_;
  absl::flat_hash_map<core::NodeSlot, size_t> index_of_slot_;
  core::ResourceVector total_free_;
  core::ResourceVector total_kept_;
  absl::flat_hash_map<uint64_t, size_t> cursors_;
  /// Whether a request without placement constraints fits some node's allocatable.
  std::vector<std::tuple<core::ResourceVector, std::string, bool>> possible_;
  /// Requests of single pods without placement constraints that found no node (free room
  /// only shrinks while a plan admits, so whatever asks at least as much fails too).
  std::vector<core::ResourceVector> failed_[2];
};

/// A job while it is planned.
struct Draft {
  PlannedJob job;
  std::vector<const core::PodState*> start;
};

/// A pod that may go for fair share: running, managed, not production, not in a gang, with a
/// lifetime that has passed.
struct Candidate {
  const core::PodState* pod;
  size_t queue;  ///< index into the plan's queues
  double usage;
};

std::string Needs(const core::ClusterState& state, const PlannedJob& job) {
  return absl::StrFormat("%s (usage %.1f)", job.request.DebugString(state.resources()), job.usage);
}

}  // namespace

FairShare::FairShare(QueueConfig config, std::string scheduler_name)
    : config_(std::move(config)), scheduler_name_(std::move(scheduler_name)), meter_(config_) {}

std::shared_ptr<const AdmissionPlan> FairShare::PlanFor(const core::ClusterState& state,
                                                        absl::Time now, std::string_view uid) {
  absl::MutexLock lock(&mu_);
  // A plan reads every pod of the model: up to this many it costs about a millisecond and is
  // made again for any pod it does not cover; above, a pod that arrived after the last plan
  // waits for the next one (at most `plan_reuse` away). By size, not by measured time, so that
  // the same cluster is always treated the same way.
  constexpr size_t kCheapPlanPods = 10000;
  // A pod the model does not hold (a watch behind kube-scheduler) is not the plan's to judge
  // (AdmissionVerdict lets it through): no new plan for it.
  if (last_ != nullptr && !uid.empty() && state.FindPod(uid) == nullptr) return last_;
  if (Recent(now, config_.plan_reuse) &&
      (last_->generation == state.generation() || (!uid.empty() && last_->Covers(uid)) ||
       state.pod_count() > kCheapPlanPods)) {
    return last_;
  }
  if (!uid.empty() && Recent(now, config_.admitted_plan_reuse)) {
    if (const PlannedJob* job = last_->JobOf(uid); job != nullptr && job->state == JobState::kAdmitted) return last_;
  }
  return MakeTimed(state, now);
}

bool FairShare::Recent(absl::Time now, absl::Duration reuse) const {
  return last_ != nullptr && last_->time <= now && now - last_->time < reuse + last_making_;
}

void FairShare::CopyBookFrom(FairShare& other) {
  if (&other == this) return;
  std::map<std::string, Flow, std::less<>> flows;
  std::map<std::string, Charge, std::less<>> charges;
  std::shared_ptr<const AdmissionPlan> last;
  absl::Duration making;
  {
    absl::MutexLock lock(&other.mu_);
    flows = other.flows_;
    charges = other.charges_;
    last = other.last_;
    making = other.last_making_;
  }
  absl::MutexLock lock(&mu_);
  flows_ = std::move(flows);
  charges_ = std::move(charges);
  last_ = std::move(last);
  last_making_ = making;
}

std::shared_ptr<const AdmissionPlan> FairShare::Published(const core::ClusterState& state,
                                                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (Recent(now, config_.plan_reuse) && last_->generation == state.generation()) {
    return last_;
  }
  // No plan of this state yet: one made on copies of the book and not kept, so that reading
  // changes nothing (the next verb or tick makes and keeps its own).
  const auto flows = flows_;
  const auto charges = charges_;
  std::shared_ptr<const AdmissionPlan> plan = MakeCounted(state, now);
  flows_ = flows;
  charges_ = charges;
  return plan;
}

std::shared_ptr<const AdmissionPlan> FairShare::Replan(const core::ClusterState& state,
                                                       absl::Time now) {
  absl::MutexLock lock(&mu_);
  return MakeTimed(state, now);
}

std::shared_ptr<const AdmissionPlan> FairShare::MakeCounted(const core::ClusterState& state,
                                                            absl::Time now) {
  const auto began = std::chrono::steady_clock::now();
  std::shared_ptr<const AdmissionPlan> plan = Make(state, now);
  plans_made_.fetch_add(1, std::memory_order_relaxed);
  plan_nanos_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - began).count()),
                        std::memory_order_relaxed);
  return plan;
}

std::shared_ptr<const AdmissionPlan> FairShare::MakeTimed(const core::ClusterState& state,
                                                          absl::Time now) {
  const absl::Time began = clock_ != nullptr ? clock_->Now() : now;
  last_ = MakeCounted(state, now);
  last_making_ = clock_ != nullptr ? std::max(absl::ZeroDuration(), clock_->Now() - began) : absl::ZeroDuration();
  return last_;
}

NodeVerdict AdmissionVerdict(const AdmissionPlan& plan, const core::ClusterState& state,
                             const core::Pod& pod) {
  if (const PlannedJob* job = plan.JobOf(pod.uid.view())) return plan.VerdictFor(*job);
  if (plan.Covers(pod.uid.view())) return NodeVerdict::Ok();
  const core::PodState* p = state.FindPod(pod.uid.view());
  if (p == nullptr || !p->pod.node_name.empty() || p->pod.terminating ||
      core::IsTerminal(p->pod.phase) || p->counted_on != core::kNoNode ||
      state.FindBind(pod.uid.view()) != nullptr || state.FindReservation(pod.uid.view()) != nullptr) {
    return NodeVerdict::Ok();
  }
  NodeVerdict v;
  v.fit = Fit::kUnresolvable;
  v.reason = Reason::kQueueWaiting;
  v.message = StrCat("berth: queue ", QueueNameOf(p->pod),
                     ": arrived after the last admission plan; the next one places it");
  return v;
}

std::shared_ptr<const AdmissionPlan> FairShare::Make(const core::ClusterState& state,
                                                     absl::Time now) {
  auto plan = std::make_shared<AdmissionPlan>();
  plan->time = now;
  plan->generation = state.generation();

  // Queues: every Queue object, plus `default`; queues named by pods but missing are unknown.
  std::vector<QueueFigures>& queues = plan->queues;
  absl::flat_hash_map<std::string, size_t, StringHash, StringEq> index_of_queue;
  auto queue_index = [&](std::string_view name) -> size_t {
    if (auto it = index_of_queue.find(name); it != index_of_queue.end()) return it->second;
    index_of_queue.emplace(std::string(name), queues.size());
    QueueFigures f;
    f.name = std::string(name);
    f.limit_factor = config_.non_preemptible_limit_factor;
    f.budget = config_.excess_budget;
    if (const core::Queue* q = state.FindQueue(name)) {
      f.weight = q->weight > 0 ? q->weight : 1;
      if (q->non_preemptible_limit_factor) f.limit_factor = *q->non_preemptible_limit_factor;
      if (q->excess_budget) f.budget = *q->excess_budget;
    } else {
      f.exists = name == kDefaultQueue;
    }
    queues.push_back(std::move(f));
    return queues.size() - 1;
  };
  state.ForEachQueue([&](const core::Queue& q) { queue_index(q.name); });
  queue_index(kDefaultQueue);

  // Capacity, usage of running pods, and the waiting pods.
  double capacity = 0;
  state.ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
    if (!n.node.unschedulable) capacity += meter_.Of(n.node.allocatable);
  });
  std::vector<Draft> drafts;
  std::vector<Candidate> candidates;
  std::vector<const core::PodState*> leaving;
  // Keys of jobs with running pods (only needed while some job is charged to a budget).
  absl::flat_hash_set<std::string, StringHash, StringEq> live_jobs;
  std::map<std::pair<std::string, std::string>, bool> gangs_seen;
  // Waiting pods outside gangs, each a job: their drafts are made once they are counted, so
  // that thousands of drafts are not moved as the vector grows.
  std::vector<const core::PodState*> singles;
  // About as many pods wait as for the last plan: room for their uids up front.
  if (last_ != nullptr) plan->seen_.reserve(last_->seen_.size());
  state.ForEachPod([&](core::PodSlot, const core::PodState& p) {
    const core::Pod& pod = p.pod;
    if (core::IsTerminal(pod.phase)) return;
    const bool managed = pod.scheduler_name == scheduler_name_;
    const bool holds = p.counted_on != core::kNoNode;
    if (!managed) {
      if (holds && state.node(p.counted_on).present && !state.node(p.counted_on).node.unschedulable) {
        capacity -= meter_.Of(pod.request);
      }
      return;
    }
    auto gang = GangOf(pod);
    const bool placed = holds || state.FindBind(pod.uid.view()) != nullptr ||
                        state.FindReservation(pod.uid.view()) != nullptr;
    if (!placed) {
      if (pod.terminating || !pod.node_name.empty()) return;
      plan->seen_.insert(std::string(pod.uid.view()));
      if (gang) {
        gangs_seen.emplace(std::make_pair(std::string(gang->first), std::string(gang->second)), true);
        return;
      }
      singles.push_back(&p);
      return;
    }
    // Running (or binding, or holding room).
    QueueFigures& q = queues[queue_index(QueueNameOf(pod))];
    const double u = meter_.Of(pod.request);
    q.usage += u;
    q.has_pods = true;
    ++q.running_pods;
    absl::StatusOr<std::optional<absl::Duration>> lifetime = LifetimeOf(pod);
    const bool preemptible = lifetime.ok() && lifetime->has_value();
    (preemptible ? q.usage_preemptible : q.usage_nonpreemptible) += u;
    if (!charges_.empty()) live_jobs.insert(gang ? StrCat(gang->first, "/", gang->second) : pod.Key());
    if (!holds) return;
    if (pod.terminating) {
      leaving.push_back(&p);
      return;
    }
    const absl::Time since = pod.started != absl::InfinitePast() ? pod.started : pod.creation;
    if (preemptible && !gang && LevelOf(pod.priority) != PriorityLevel::kProduction &&
        now - since >= **lifetime) {
      candidates.push_back({&p, static_cast<size_t>(&q - queues.data()), u});
    }
  });
  capacity = std::max(capacity, 0.0);
  plan->capacity = capacity;
  drafts.reserve(singles.size() + gangs_seen.size());
  for (const core::PodState* p : singles) {
    Draft& d = drafts.emplace_back();
    d.job.key = p->pod.Key();
    d.job.queue = std::string(QueueNameOf(p->pod));
    d.job.pods.push_back(std::string(p->pod.uid.view()));
    d.start.push_back(p);
  }

  // Gangs that have not started are one job each: all their waiting members, starting with
  // the members their minimum still needs. Gangs the gang module holds back (no PodGroup,
  // too few members) are left to it.
  for (const auto& [key, unused] : gangs_seen) {
    (void)unused;
    GangView g = ViewGang(state, key.first, key.second, GangConfig{});
    if (g.group == nullptr || g.admitted() || g.total() < g.min_member || g.pending.empty() ||
        !g.reserved.empty()) {
      continue;
    }
    Draft d;
    d.job.key = g.Key();
    d.job.gang = true;
    d.job.queue = std::string(QueueNameOf(g.pending.front()->pod));
    const size_t need = static_cast<size_t>(g.min_member - g.placed());
    for (const core::PodState* m : g.pending) {
      d.job.pods.push_back(std::string(m->pod.uid.view()));
      if (d.start.size() < need) d.start.push_back(m);
    }
    for (const core::PodState* b : g.bound) {
      if (b->pod.started != absl::InfinitePast() && now > b->pod.started) {
        d.job.cfs += absl::ToDoubleSeconds(now - b->pod.started);
      }
    }
    drafts.push_back(std::move(d));
  }

  // Fill in each job's figures.
  for (Draft& d : drafts) {
    PlannedJob& j = d.job;
    j.start_pods = static_cast<int>(d.start.size());
    j.created = absl::InfiniteFuture();
    for (const core::PodState* p : d.start) {
      j.request.Add(p->pod.request);
      j.priority = std::max(j.priority, p->pod.priority);
      j.created = std::min(j.created, p->pod.creation);
      absl::StatusOr<std::optional<absl::Duration>> lt = LifetimeOf(p->pod);
      if (!lt.ok() && j.warning.empty()) {
        j.warning = StrCat("pod ", p->pod.Key(), ": ", lt.status().message(),
                           "; it counts as no lifetime (never preempted for fair share)");
      }
      // The strictest lifetime of its pods: none if any pod has none (or an unreadable one).
      if (p == d.start.front()) {
        j.lifetime = lt.ok() ? *lt : std::nullopt;
      } else if (!lt.ok() || !lt->has_value()) {
        j.lifetime.reset();
      } else if (j.lifetime) {
        j.lifetime = std::max(*j.lifetime, **lt);
      }
    }
    j.usage = meter_.Of(j.request);
    j.level = LevelOf(j.priority);
    j.effective = j.level;
    if (j.level < PriorityLevel::kNormal && config_.aging_interval > absl::ZeroDuration() &&
        j.created != absl::InfinitePast() && now > j.created) {
      absl::Duration rest;
      const int64_t steps = absl::IDivDuration(now - j.created, config_.aging_interval, &rest);
      j.effective = static_cast<PriorityLevel>(
          std::min<int64_t>(static_cast<int64_t>(j.level) + steps,
                            static_cast<int64_t>(PriorityLevel::kNormal)));
    }
    j.cfs *= static_cast<double>(LevelValue(j.level)) * j.usage;
    queues[queue_index(j.queue)].has_pods = true;
  }

  // Fair shares and flows.
  double weights = 0;
  for (const QueueFigures& q : queues) {
    if (q.exists && q.has_pods) weights += q.weight;
  }
  for (QueueFigures& q : queues) {
    q.fair_share = q.exists && q.has_pods && weights > 0 ? q.weight / weights : 0;
    Flow& f = flows_[q.name];
    if (f.updated == absl::InfinitePast() || now <= f.updated) {
      f.flow = std::max(f.flow, q.usage);
    } else {
      const double beta =
          std::pow(0.5, absl::ToDoubleSeconds(now - f.updated) /
                            std::max(absl::ToDoubleSeconds(config_.half_time), 1e-9));
      f.flow = q.usage + std::max(f.flow - q.usage, 0.0) * beta;
    }
    f.updated = std::max(f.updated, now);
    q.flow = f.flow;
    q.planned_usage = q.usage;
  }
  // Budget charges of jobs still alive (running now, or waiting: dropped below unless they
  // are admitted again).
  std::map<std::string, Charge, std::less<>> charges;
  for (auto& [key, c] : charges_) {
    if (live_jobs.contains(key)) charges.emplace(key, c);
  }

  // Each queue's jobs in its own order (seed 000): higher priority level (after aging), less
  // weighted running time, older, then by name. Levels, not raw values, so that a job aged
  // into a level competes there on equal terms.
  std::vector<std::vector<size_t>> per_queue(queues.size());
  for (size_t i = 0; i < drafts.size(); ++i) {
    const size_t qi = queue_index(drafts[i].job.queue);
    if (!queues[qi].exists) {
      drafts[i].job.state = JobState::kUnknownQueue;
      drafts[i].job.why =
          StrCat("queue \"", drafts[i].job.queue, "\" does not exist (no Queue object of that name; ",
                 "label ", kQueueLabel, " names it)");
      continue;
    }
    per_queue[qi].push_back(i);
  }
  for (auto& list : per_queue) {
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      const PlannedJob& x = drafts[a].job;
      const PlannedJob& y = drafts[b].job;
      if (x.effective != y.effective) return x.effective > y.effective;
      if (x.cfs != y.cfs) return x.cfs < y.cfs;
      if (x.created != y.created) return x.created < y.created;
      return x.key < y.key;
    });
  }
  for (auto& [key, c] : charges) {
    const size_t qi = queue_index(c.queue);
    queues[qi].budget_used += c.amount;
  }

  // Progressive filling: repeatedly take, over the queues with waiting jobs, the head job
  // whose admission leaves its queue with the smallest flow per weight.
  // Where a pod may go by every rule except room, asked of the pipeline's filters (one for
  // the whole plan).
  const EligibleFn eligible = pipeline_ != nullptr ? pipeline_->Eligibility(state, now) : EligibleFn();
  Sim sim(state, eligible);
  int reclaim_checks = 0;
  int gang_checks = 0;
  const GangPlanner* planner = pipeline_ != nullptr ? pipeline_->gangs() : nullptr;
  // For a gang, the gang planner's answer on the model as it is (topology, pool rules, GPU
  // reserve, reclaim of its pool): nullopt when not asked (no planner, or over the cap).
  auto gang_outcome = [&](const Draft& d) -> std::optional<GangOutcome> {
    if (planner == nullptr || !d.job.gang || d.start.empty() || gang_checks >= kMaxReclaimChecks) {
      return std::nullopt;
    }
    const auto key = GangOf(d.start[0]->pod);
    if (!key) return std::nullopt;
    ++gang_checks;
    const GangView g = ViewGang(state, key->first, key->second, planner->config());
    const CycleContext ctx{.state = state, .pod = d.start[0]->pod, .now = now, .explain = false,
                           .pipeline = pipeline_};
    return planner->PlanAdmission(ctx, g, eligible);
  };
  // Whether a job that does not fit could start by reclaiming its home pool (evicting borrowers,
  // or lower-priority pods where its pool allows preemption): asked of the reclaim modules'
  // what-if, for single pods of named pools, at most kMaxReclaimChecks per plan.
  auto may_reclaim = [&](const Draft& d) {
    if (pipeline_ == nullptr || d.job.gang || d.start.size() != 1 ||
        HomePoolName(d.start[0]->pod) == kDefaultPool || reclaim_checks >= kMaxReclaimChecks) {
      return false;
    }
    ++reclaim_checks;
    const CycleContext ctx{.state = state, .pod = d.start[0]->pod, .now = now, .explain = false,
                           .planning = true};
    return pipeline_->PostFilter(ctx).has_value();
  };
  std::vector<double> flow(queues.size());
  std::vector<double> nonpre(queues.size());
  std::vector<size_t> next(queues.size(), 0);
  for (size_t i = 0; i < queues.size(); ++i) {
    flow[i] = queues[i].flow;
    nonpre[i] = queues[i].usage_nonpreemptible;
  }
  std::vector<size_t> order;
  order.reserve(drafts.size());
  const Draft* head = nullptr;
  // A min-heap of (flow after the queue's head job, per weight; queue index): only the queue
  // that was picked changes, so each pick costs log(queues).
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto push = [&](size_t qi) {
    if (next[qi] < per_queue[qi].size()) {
      heap.emplace((flow[qi] + drafts[per_queue[qi][next[qi]]].job.usage) / queues[qi].weight, qi);
    }
  };
  for (size_t qi = 0; qi < queues.size(); ++qi) push(qi);
  // Decides one job of queue `qi` (the queue's flow and usage change when it is admitted).
  auto decide = [&](size_t qi, Draft& d) {
    QueueFigures& q = queues[qi];
    PlannedJob& j = d.job;
    j.order = static_cast<int>(order.size());
    order.push_back(static_cast<size_t>(&d - drafts.data()));
    const double share = q.fair_share * capacity;
    // Limits (seed 001): non-preemptible usage at most (1 + factor) x fair share; jobs with a
    // lifetime draw resource-minutes from the excess budget while the queue is over its share.
    // They bind when a job could start: a job without room waits for room first (its queue's
    // usage when room comes is not known now), and is checked again then.
    const std::optional<std::vector<size_t>> room = sim.Find(d.start, /*respect_kept=*/true);
    // A gang fits only where the gang planner can place its minimum (max-hops included); when the
    // room is short but the planner can take it back (its pool's borrowers, elastic members of
    // other gangs), it may reclaim.
    const std::optional<GangOutcome> gang = gang_outcome(d);
    const bool fits = room.has_value() && (!gang || gang->plan.has_value());
    const bool gang_reclaims =
        !room.has_value() && gang && gang->plan && !gang->plan->victims.empty();
    double charge = 0;
    if (!fits) {
      // Room decides.
    } else if (!j.lifetime && capacity > 0 && nonpre[qi] + j.usage > (1 + q.limit_factor) * share) {
      j.state = JobState::kOverLimit;
      j.why = absl::StrFormat(
          "non-preemptible usage would reach %.1f, over the queue's limit %.1f (%.2g x fair share "
          "%.1f); a berth.io/lifetime lets it run preemptible",
          nonpre[qi] + j.usage, (1 + q.limit_factor) * share, 1 + q.limit_factor, share);
    } else if (j.lifetime && *j.lifetime > absl::ZeroDuration() &&
               q.planned_usage + j.usage > share) {
      auto known = charges.find(j.key);
      charge = j.usage * absl::ToDoubleMinutes(*j.lifetime);
      if (known != charges.end()) {
        charge = 0;  // charged when it was first admitted
      } else if (q.budget_used + charge > q.budget) {
        j.state = JobState::kOverBudget;
        j.why = absl::StrFormat(
            "over its fair share, its lifetime %s x usage %.1f = %.0f resource-minutes, but %.0f "
            "of the queue's excess budget %.0f remain",
            absl::FormatDuration(*j.lifetime), j.usage, charge,
            std::max(q.budget - q.budget_used, 0.0), q.budget);
      }
    }
    if (j.state == JobState::kOverLimit || j.state == JobState::kOverBudget) {
      j.position = ++q.waiting_jobs;
      return;
    }
    if (fits) {
      sim.Take(d.start, *room);
      j.state = JobState::kAdmitted;
      ++q.admitted_jobs;
      flow[qi] += j.usage;
      q.planned_usage += j.usage;
      if (!j.lifetime) nonpre[qi] += j.usage;
      if (charge > 0) {
        charges[j.key] = Charge{q.name, charge};
        q.budget_used += charge;
        j.charge = charge;
      } else if (auto c = charges.find(j.key); c != charges.end()) {
        j.charge = c->second.amount;
      }
      return;
    }
    if (!sim.Possible(d.start)) {
      // No node could ever take it: the node filters say why (exceeds allocatable, resource
      // not offered, placement); it holds no room and no place in line.
      j.state = JobState::kUnplaceable;
      j.why = StrCat(kUnplaceableWhy, "; it needs ", Needs(state, j));
      return;
    }
    if (gang_reclaims || may_reclaim(d)) {
      j.state = JobState::kMayPreempt;
      j.why = StrCat("no free room for ", Needs(state, j),
                     "; may reclaim room in its pool from borrowers or lower-priority pods");
      return;
    }
    j.position = ++q.waiting_jobs;
    if (head == nullptr) {
      head = &d;
      j.state = JobState::kHead;
      // The gang planner's reason when it has one (a hop limit, k of n members placeable).
      std::string_view planner_why =
          gang && !gang->plan ? std::string_view(gang->why.message) : std::string_view();
      if (planner_why.substr(0, 7) == "berth: ") planner_why.remove_prefix(7);
      j.why = planner_why.empty() ? StrCat("next to start: waits for room for ", Needs(state, j))
                                  : StrCat("next to start: ", planner_why);
      sim.Keep(d.start);
    } else if (!j.gang && j.priority > head->job.priority) {
      j.state = JobState::kMayPreempt;
      j.why = StrCat("no room for ", Needs(state, j), "; of higher priority than ", head->job.key,
                     ", next to start");
    } else if (sim.Find(d.start, /*respect_kept=*/false)) {
      j.state = JobState::kBackfill;
      j.why = StrCat("it fits only in room kept for ", head->job.key, " (queue ", head->job.queue,
                     "), next to start; starting it would delay that job");
    } else {
      j.state = JobState::kWaiting;
      j.why = StrCat("no room for ", Needs(state, j), " now; next to start is ", head->job.key,
                     " (queue ", head->job.queue, ")");
    }
    };
  while (!heap.empty()) {
    const size_t qi = heap.top().second;
    heap.pop();
    decide(qi, drafts[per_queue[qi][next[qi]++]]);
    push(qi);
  }
  // Charges of waiting jobs that this plan did not admit are returned.
  for (auto it = charges.begin(); it != charges.end();) {
    bool keep = live_jobs.contains(it->first);
    if (!keep) {
      for (const Draft& d : drafts) {
        if (d.job.key == it->first && d.job.state == JobState::kAdmitted) keep = true;
      }
    }
    it = keep ? std::next(it) : charges.erase(it);
  }
  charges_ = std::move(charges);

  // Fair-share preemption: when the head's queue is under its fair share, pods of queues over
  // theirs whose lifetime has passed may go, as few as make room for the head.
  if (head != nullptr && !candidates.empty()) {
    const size_t hq = queue_index(head->job.queue);
    const double head_share = queues[hq].fair_share * capacity;
    if (queues[hq].planned_usage < head_share) {
      Sim room(state, eligible);
      for (const core::PodState* p : leaving) room.Release(p->counted_on, p->pod.request);
      if (!room.Find(head->start, false)) {
        std::vector<double> over(queues.size());
        for (size_t i = 0; i < queues.size(); ++i) {
          over[i] = queues[i].planned_usage - queues[i].fair_share * capacity;
        }
        std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
          if (over[a.queue] != over[b.queue]) return over[a.queue] > over[b.queue];
          if (a.pod->pod.priority != b.pod->pod.priority) {
            return a.pod->pod.priority < b.pod->pod.priority;
          }
          return a.pod->pod.started > b.pod->pod.started;  // youngest first: least work lost
        });
        std::vector<const Candidate*> chosen;
        bool fits = false;
        for (const Candidate& c : candidates) {
          if (c.queue == hq || over[c.queue] <= 0) continue;
          chosen.push_back(&c);
          over[c.queue] -= c.usage;
          room.Release(c.pod->counted_on, c.pod->pod.request);
          if (room.Find(head->start, false)) {
            fits = true;
            break;
          }
        }
        if (fits) {
          for (const Candidate* c : chosen) {
            plan->victims.push_back(
                {c->pod->pod, queues[c->queue].name,
                 absl::StrFormat("fair share: queue %s is over its share (%.1f%% of the cluster vs "
                                 "%.1f%%) and the pod outlived its lifetime; room for %s of queue "
                                 "%s (%.1f%% vs %.1f%%)",
                                 queues[c->queue].name,
                                 capacity > 0 ? 100 * queues[c->queue].planned_usage / capacity : 0,
                                 100 * queues[c->queue].fair_share, head->job.key, queues[hq].name,
                                 capacity > 0 ? 100 * queues[hq].planned_usage / capacity : 0,
                                 100 * queues[hq].fair_share)});
          }
        }
      }
    }
  }

  // The plan's jobs in admission order, unknown-queue jobs last.
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (drafts[i].job.state == JobState::kUnknownQueue) order.push_back(i);
  }
  plan->jobs.reserve(order.size());
  for (size_t i : order) {
    if (&drafts[i] == head) plan->head = plan->jobs.size();
    for (const std::string& uid : drafts[i].job.pods) {
      plan->job_of_pod_.emplace(uid, plan->jobs.size());
    }
    plan->jobs.push_back(std::move(drafts[i].job));
  }
  std::sort(queues.begin(), queues.end(),
            [](const QueueFigures& a, const QueueFigures& b) { return a.name < b.name; });
  return plan;
}

NodeVerdict QueueAdmission::PreFilter(const CycleContext& ctx) const {
  if (ctx.planning || ctx.pod.scheduler_name != book_->scheduler_name()) return NodeVerdict::Ok();
  if (ctx.queue_verdict != nullptr) return *ctx.queue_verdict;
  std::shared_ptr<const AdmissionPlan> plan =
      ctx.read_only ? book_->Published(ctx.state, ctx.now)
                    : book_->PlanFor(ctx.state, ctx.now, ctx.pod.uid.view());
  return AdmissionVerdict(*plan, ctx.state, ctx.pod);
}

absl::StatusOr<QueueConfig> ParseQueueSettings(const Settings& section) {
  if (absl::Status s = CheckKeys(section, {"gpuWeight", "memoryWeightPerGiB", "halfTimeSeconds",
                                           "nonPreemptibleLimitFactor", "excessBudget",
                                           "agingIntervalSeconds", "planReuseMilliseconds",
                                           "admittedPlanReuseMilliseconds"});
      !s.ok()) {
    return s;
  }
  QueueConfig q;
  for (auto [key, max, out] :
       {std::tuple{"gpuWeight", 1e6, &q.gpu_weight},
        std::tuple{"memoryWeightPerGiB", 1e6, &q.memory_weight_per_gib},
        std::tuple{"nonPreemptibleLimitFactor", 1e3, &q.non_preemptible_limit_factor},
        std::tuple{"excessBudget", 1e15, &q.excess_budget}}) {
    if (absl::Status s = ReadNumber(section, key, 0, max, out); !s.ok()) return s;
  }
  if (absl::Status s = ReadSeconds(section, "halfTimeSeconds", 1, 30 * 86400, &q.half_time);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadSeconds(section, "agingIntervalSeconds", 0, 30 * 86400,
                                   &q.aging_interval);
      !s.ok()) {
    return s;
  }
  for (auto [key, out] : {std::pair{"planReuseMilliseconds", &q.plan_reuse},
                          std::pair{"admittedPlanReuseMilliseconds", &q.admitted_plan_reuse}}) {
    double ms = absl::ToDoubleMilliseconds(*out);
    if (absl::Status s = ReadNumber(section, key, 0, 10000, &ms); !s.ok()) return s;
    *out = absl::Milliseconds(ms);
  }
  return q;
}

}  // namespace berth::policy
