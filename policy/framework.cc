#include "policy/framework.h"

#include <algorithm>
#include <set>

#include "core/strings.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"
#include "policy/pools/pools.h"
#include "policy/queue/queue.h"

namespace berth::policy {
namespace {

using Level = EffectSink::Level;

// Under the model's write lock: every planned node still has the room the plan counted on
// (victims still there count as leaving), and no planned pod got room meanwhile.
absl::Status CheckStillFits(const core::ClusterState& state,
                            const std::vector<core::ReservationRequest>& requests,
                            const std::vector<core::Pod>& victims) {
  std::map<std::string, core::ResourceVector> need;
  for (const core::ReservationRequest& r : requests) {
    if (state.FindReservation(r.uid) != nullptr) {
      return absl::AbortedError(StrCat("pod uid ", r.uid, " got room meanwhile"));
    }
    need[r.node].Add(r.reservation.request);
  }
  for (const core::Pod& v : victims) {
    const core::PodState* now = state.FindPod(v.uid.view());
    if (now == nullptr || now->pod.terminating || now->pod.node_name != v.node_name) {
      return absl::AbortedError(StrCat("victim ", v.Key(), " changed meanwhile"));
    }
    if (auto it = need.find(v.node_name.str()); it != need.end()) it->second.Sub(v.request);
  }
  for (const auto& [node, want] : need) {
    const core::NodeState* n = state.FindNode(node);
    if (n == nullptr) return absl::AbortedError(StrCat("node ", node, " is gone"));
    for (size_t i = 0; i < want.size(); ++i) {
      const auto id = static_cast<core::ResourceId>(i);
      if (want.Get(id) > 0 && want.Get(id) > n->FreeOf(id)) {
        return absl::AbortedError(StrCat("node ", node, " no longer has the room"));
      }
    }
  }
  return absl::OkStatus();
}

bool NoneFit(const std::vector<NodeVerdict>& v) {
  return std::none_of(v.begin(), v.end(), [](const NodeVerdict& x) { return x.ok(); });
}

/// How long a pending pod waits for kube-scheduler before housekeeping reclaims for it (or plans
/// its gang).
constexpr absl::Duration kReclaimPendingAfter = absl::Seconds(5);

/// Whether `pod` is one of `scheduler_name`'s and still waits for a node: not bound, no bind in
/// flight, not leaving. What housekeeping asks of a pod before acting for it.
bool WaitsForNode(const core::ClusterState& state, const core::Pod& pod,
                  std::string_view scheduler_name) {
  return pod.scheduler_name == scheduler_name && pod.node_name.empty() && !pod.terminating &&
         !core::IsTerminal(pod.phase) && state.FindBind(pod.uid.view()) == nullptr;
}

}  // namespace

Framework::Framework(std::unique_ptr<Pipeline> pipeline, FrameworkOptions options,
                     core::ClusterModel* model, const core::Clock* clock)
    : pipeline_(std::move(pipeline)), options_(std::move(options)), model_(model), clock_(clock) {
  if (FairShare* book = pipeline_->fair_share()) book->SetClock(clock_);
}

NodeVerdict Framework::QueueVerdict(const core::ClusterState& state, const core::Pod& pod) const {
  FairShare* book = pipeline_->fair_share();
  if (book == nullptr || pod.scheduler_name != options_.scheduler_name) return NodeVerdict::Ok();
  std::shared_ptr<const AdmissionPlan> plan = book->PlanFor(state, clock_->Now(), pod.uid.view());
  return AdmissionVerdict(*plan, state, pod);
}

// ---- filter -------------------------------------------------------------------------------------

std::vector<NodeVerdict> Framework::Filter(const core::Pod& pod, std::span<const std::string_view> candidates,
                                           std::vector<int64_t>* scores, bool every_message) {
  const bool managed = pod.scheduler_name == options_.scheduler_name;
  const bool gang_member = managed && GangOf(pod).has_value();
  // PreFilter "queue": a job waiting in its queue is answered by the queue module alone: no gang
  // reservation, no reclaim on its behalf. The verdict is asked once and handed to the module.
  std::optional<NodeVerdict> queue_verdict;
  if (managed && pipeline_->fair_share() != nullptr) {
    auto view = model_->Read();
    queue_verdict = QueueVerdict(*view, pod);
  }
  const bool queued = queue_verdict.has_value() && !queue_verdict->ok();
  // PreFilter "gang": a gang is admitted whole before any member is filtered: room for every
  // member it needs is planned against one view and reserved at once.
  std::optional<NodeVerdict> gang_waiting;
  if (gang_member && !queued) gang_waiting = PrepareGang(pod);
  auto run = [&](bool reclaim_blocked = false) {
    auto view = model_->Read();
    const CycleContext ctx{.state = *view,
                           .pod = pod,
                           .now = clock_->Now(),
                           .explain = false,
                           .messages = every_message,
                           .reclaim_blocked = reclaim_blocked,
                           .gang_waiting = gang_waiting ? &*gang_waiting : nullptr,
                           .queue_verdict = queue_verdict ? &*queue_verdict : nullptr};
    return pipeline_->Filter(ctx, candidates, scores);
  };
  std::vector<NodeVerdict> verdicts = run();
  if (gang_member && NoneFit(verdicts)) {
    std::string not_offered;
    if (ReplanGangMember(pod, candidates, &not_offered)) {
      // kube-scheduler did not offer the member's reserved node (or it no longer fits there):
      // its room moved to a candidate near the rest of the gang.
      verdicts = run();
    } else if (!not_offered.empty()) {
      // No candidate near the gang either. kube-scheduler parks the member as unschedulable
      // and, with nothing else changing, would not ask again for minutes, past the gang's
      // timeout. Sampled candidates (percentageOfNodesToScore below 100) start at a new node
      // on every attempt, so the member is nudged to be asked again with another sample.
      effects_->NudgeAtNextTick(std::string(pod.uid.view()),
                                StrCat("its reserved node ", not_offered, " was not among the nodes offered"));
    }
  }
  if (NoneFit(verdicts) && managed && !gang_member && !queued) {
    // PostFilter: preempt first, then borrow: make room in the pod's home pool. The victims
    // leave once the effects are carried out; meanwhile the answer names the reclaim. A pod
    // whose reclaim was refused lately borrows instead (seed 004).
    if (ReclaimBlocked(pod.uid.view(), clock_->Now())) {
      verdicts = run(/*reclaim_blocked=*/true);
    } else if (StartReclaim(pod) == Reclaim::kHeld) {
      verdicts = run();
    }
    if (NoneFit(verdicts)) {
      auto view = model_->Read();
      if (const core::Reservation* r = view->FindReservation(pod.uid);
          r != nullptr && r->gang.empty()) {
        const NodeVerdict waiting = ReclaimInProgressVerdict(*view, *r);
        bool worded = false;  // without every message, the first verdict of the reason has it
        for (NodeVerdict& v : verdicts) {
          if (v.reason == Reason::kUnknownNode) continue;
          v = every_message || !worded ? waiting : waiting.Bare();
          worded = true;
        }
      }
    }
  }
  return verdicts;
}

std::optional<NodeVerdict> Framework::PrepareGang(const core::Pod& pod) {
  const GangPlanner* planner = pipeline_->gangs();
  auto key = GangOf(pod);
  if (planner == nullptr || !key) return std::nullopt;
  const std::string ns(key->first), name(key->second);
  // Another filter may change the model between planning and reserving; the reservation's
  // check then refuses and the gang is planned again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<core::ReservationRequest> requests;
    std::vector<core::Pod> victims;
    std::set<std::pair<std::string, std::string>> grown;  // gangs given elastic members
    bool admission = false;
    absl::Duration timeout;
    std::string summary;
    const absl::Time now = clock_->Now();
    {
      auto view = model_->Read();
      const core::PodState* p = view->FindPod(pod.uid.view());
      if (p == nullptr || !p->pod.node_name.empty()) return std::nullopt;
      if (const core::Reservation* r = view->FindReservation(pod.uid.view());
          r != nullptr && !r->gang.empty()) {
        return std::nullopt;
      }
      const GangView g = ViewGang(*view, ns, name, planner->config());
      if (g.group == nullptr || g.total() < g.min_member) return std::nullopt;
      const EligibleFn eligible = pipeline_->Eligibility(*view, now);
      timeout = GangTimeout(g, planner->config());
      if (!g.admitted()) {
        admission = true;
        const CycleContext ctx{.state = *view,
                               .pod = p->pod,
                               .now = now,
                               .explain = false,
                               .pipeline = pipeline_.get()};
        GangOutcome o = planner->PlanAdmission(ctx, g, eligible);
        if (!o.plan) return o.why;
        std::vector<std::string> evicted;
        for (const core::PodState* v : o.plan->victims) {
          victims.push_back(v->pod);
          evicted.push_back(v->pod.Key());
        }
        for (const GangPlacement& pl : o.plan->placements) {
          requests.push_back(core::ReservationRequest{
              .uid = pl.member->pod.uid.str(),
              .node = view->node(pl.node).node.name,
              .reservation = core::Reservation{.request = pl.member->pod.request,
                                               .expires = now + timeout,
                                               .purpose = StrCat("gang ", g.Key()),
                                               .evicted = evicted,
                                               .gang = g.Key()}});
        }
        summary = StrCat(requests.size(), " members in ",
                         o.plan->domain.empty() ? "the whole cluster" : o.plan->domain,
                         ", max ", o.plan->max_hops, " hops");
      } else {
        for (const GangPlacement& pl : planner->PlanElastic(*view, now, eligible, pipeline_.get())) {
          auto mk = GangOf(pl.member->pod);
          if (!mk) continue;
          const GangView mg = ViewGang(*view, mk->first, mk->second, planner->config());
          grown.emplace(std::string(mk->first), std::string(mk->second));
          requests.push_back(core::ReservationRequest{
              .uid = pl.member->pod.uid.str(),
              .node = view->node(pl.node).node.name,
              .reservation = core::Reservation{.request = pl.member->pod.request,
                                               .expires = now + GangTimeout(mg, planner->config()),
                                               .purpose = StrCat("gang ", mg.Key(), " (elastic)"),
                                               .gang = mg.Key()}});
        }
        if (requests.empty()) return std::nullopt;
      }
    }
    if (!victims.empty() && !CanEvict()) {
      // Evicting (elastic members of other gangs, borrowers of its pool) needs the evictor (the
      // leader, in Kubernetes mode).
      return NodeVerdict{
          .fit = Fit::kUnresolvable,
          .reason = Reason::kGangNotPlaceable,
          .message = StrCat("berth: gang ", ns, "/", name,
                            ": fits only after evicting other pods, which this replica does not "
                            "do (not the leader)")};
    }
    const absl::Status held = model_->ReserveAll(
        requests, [&](const core::ClusterState& state) {
          return CheckStillFits(state, requests, victims);
        });
    if (absl::IsAborted(held)) {
      Log(Level::kDebug, StrCat("gang ", ns, "/", name, ": plan outdated (", held.message(),
                                "); planning again"));
      continue;
    }
    if (!held.ok()) {
      Log(Level::kInfo, StrCat("gang ", ns, "/", name, ": reservation refused: ", held.message()));
      return std::nullopt;
    }
    // Members other than this one may sit in kube-scheduler's backoff: have them tried again.
    if (effects_ != nullptr) {
      for (const core::ReservationRequest& r : requests) {
        if (r.uid != pod.uid.view()) effects_->NudgeAtNextTick(r.uid, "room reserved for its gang");
      }
    }
    if (admission) {
      model_->UpdateGangRecord(ns, name, [&](core::GangRecord& r) {
        r.admitted = now;
        r.deadline = now + timeout;
        r.incomplete = false;
      });
      Log(Level::kInfo, StrCat("gang ", ns, "/", name, " admitted: room reserved for ", summary));
      if (effects_ != nullptr) effects_->Counted(EffectSink::Count::kGangAdmission);
      // An eviction refused for good undoes the admission: the room reserved for the members
      // is released and the gang is planned again at its next member's filter.
      std::vector<std::string> members;
      for (const core::ReservationRequest& r : requests) members.push_back(r.uid);
      auto undo = [this, ns, name, members](const absl::Status& s) {
        Log(Level::kWarn, StrCat("gang ", ns, "/", name, ": taking back elastic room failed (",
                                 s.message(), "); its reservations are released and it waits "
                                 "whole again"));
        for (const std::string& uid : members) model_->Unreserve(uid);
      };
      auto cancelled = std::make_shared<std::atomic<bool>>(false);
      for (const core::Pod& v : victims) {
        if (auto vk = GangOf(v)) {
          model_->UpdateGangRecord(vk->first, vk->second, [&](core::GangRecord& r) { r.resized = now; });
        }
        const bool elastic = GangOf(v).has_value();
        effects_->Evict({.pod = v,
                         .for_pod = pod,
                         .why = StrCat("gang ", ns, "/", name,
                                       elastic ? " takes back elastic room" : " reclaims its pool"),
                         .cause = elastic ? "gang-elastic" : "reclaim",
                         .undo = undo,
                         .cancelled = cancelled});
      }
    } else {
      for (const auto& [gns, gname] : grown) {
        model_->UpdateGangRecord(gns, gname, [&](core::GangRecord& r) { r.resized = now; });
      }
      Log(Level::kInfo, StrCat("elastic members placed: ", requests.size(), " reservation(s) for ",
                               grown.size(), " gang(s)"));
    }
    return std::nullopt;
  }
  return std::nullopt;
}

bool Framework::ReplanGangMember(const core::Pod& pod,
                                 std::span<const std::string_view> candidates,
                                 std::string* not_offered) {
  const GangPlanner* planner = pipeline_->gangs();
  auto key = GangOf(pod);
  if (planner == nullptr || !key) return false;
  core::Reservation moved;
  std::string node;
  {
    auto view = model_->Read();
    const core::PodState* p = view->FindPod(pod.uid.view());
    const core::Reservation* r = view->FindReservation(pod.uid.view());
    if (p == nullptr || r == nullptr || r->gang.empty()) return false;
    const GangView g = ViewGang(*view, key->first, key->second, planner->config());
    std::vector<core::NodeSlot> allowed;
    bool offered = false;
    for (std::string_view c : candidates) {
      const core::NodeSlot s = view->FindNodeSlot(c);
      if (s == core::kNoNode) continue;
      if (s == r->node) {
        offered = true;
      } else {
        allowed.push_back(s);
      }
    }
    if (!offered && r->node != core::kNoNode) *not_offered = view->node(r->node).node.name;
    const std::optional<core::NodeSlot> to = planner->ReplanMember(
        *view, g, *p, allowed, pipeline_->Eligibility(*view, clock_->Now()), clock_->Now(),
        pipeline_.get());
    if (!to) return false;
    moved = *r;
    node = view->node(*to).node.name;
    Log(Level::kInfo, StrCat("gang ", key->first, "/", key->second, ": member ", pod.Key(),
                             " re-planned from node ", view->node(r->node).node.name, " to node ",
                             node, " (not offered)"));
  }
  const core::Reservation before = moved;
  const absl::Status s = model_->Reserve(
      pod.uid.view(), node, std::move(moved), [&](const core::ClusterState& state) -> absl::Status {
        const core::Reservation* r = state.FindReservation(pod.uid.view());
        if (r == nullptr || r->node != before.node) return absl::AbortedError("reservation changed");
        const core::NodeState* n = state.FindNode(node);
        for (size_t i = 0; n != nullptr && i < pod.request.size(); ++i) {
          const auto id = static_cast<core::ResourceId>(i);
          if (pod.request.Get(id) > 0 && pod.request.Get(id) > n->FreeOf(id)) {
            return absl::AbortedError("no room any more");
          }
        }
        return absl::OkStatus();
      });
  return s.ok();
}

// ---- PostFilter: reclaim ------------------------------------------------------------------------

Framework::Reclaim Framework::StartReclaim(const core::Pod& pod) {
  // Gangs make room through their own plan (elastic members of other gangs), not pool reclaim.
  if (pod.scheduler_name != options_.scheduler_name || GangOf(pod).has_value() || !CanEvict()) {
    return Reclaim::kNone;
  }
  std::optional<ReclaimPlan> plan;
  std::vector<core::Pod> victims;
  core::Pod known;
  core::Reservation hold;
  {
    auto view = model_->Read();
    const core::PodState* p = view->FindPod(pod.uid);
    if (p == nullptr) return Reclaim::kNone;
    if (view->FindReservation(pod.uid) != nullptr) return Reclaim::kHeld;
    known = p->pod;
    const CycleContext ctx{.state = *view, .pod = known, .now = clock_->Now(), .explain = false};
    plan = pipeline_->PostFilter(ctx);
    if (!plan) return Reclaim::kNone;
    for (const core::PodState* v : plan->victims) {
      victims.push_back(v->pod);
      hold.evicted.push_back(v->pod.Key());
    }
    hold.request = known.request;
    hold.expires = clock_->Now() + options_.reclaim_timeout;
    hold.purpose = plan->purpose;
  }
  // Hold the room before evicting, so that nothing else takes it as the victims leave. The
  // check runs under the model's write lock, so concurrent reclaims need no lock of their own:
  // the pod must have no room held yet (another filter of it may have won), and the victims
  // must still be there as planned, not evicted by another reclaim meanwhile.
  absl::Status held = model_->Reserve(
      known.uid, plan->node, hold, [&](const core::ClusterState& state) -> absl::Status {
        if (state.FindReservation(known.uid) != nullptr) {
          return absl::AbortedError("room is already held for it");
        }
        absl::Status taken = absl::OkStatus();
        state.ForEachReservation([&](std::string_view, const core::Reservation& r) {
          for (const std::string& key : r.evicted) {
            if (std::find(hold.evicted.begin(), hold.evicted.end(), key) != hold.evicted.end()) {
              taken = absl::AbortedError(StrCat("victim ", key, " is being evicted for another pod"));
            }
          }
        });
        if (!taken.ok()) return taken;
        for (const core::Pod& v : victims) {
          const core::PodState* now = state.FindPod(v.uid);
          if (now == nullptr || now->pod.terminating || now->pod.node_name != v.node_name) {
            return absl::AbortedError(StrCat("victim ", v.Key(), " changed meanwhile"));
          }
        }
        return absl::OkStatus();
      });
  if (!held.ok()) {
    Log(Level::kInfo, StrCat("reclaim for pod=", known.Key(), " not started: ", held.message()));
    return Reclaim::kNone;
  }
  std::string names;
  for (const core::Pod& v : victims) StrAppend(&names, names.empty() ? "" : ", ", v.Key());
  Log(Level::kInfo, StrCat(plan->purpose, " for pod=", known.Key(), ": holding room on node ",
                           plan->node, ", evicting [", names, "]"));
  // The first eviction refused for good (a disruption budget, a lost leadership) undoes the
  // reclaim, and the other evictions of it still queued are dropped.
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  for (const core::Pod& v : victims) {
    effects_->Evict({.pod = v,
                     .for_pod = known,
                     .why = plan->purpose,
                     .cause = "reclaim",
                     .undo = [this, known](const absl::Status& s) { UndoReclaim(known, s); },
                     .cancelled = cancelled});
  }
  effects_->Counted(EffectSink::Count::kReclaim);
  return Reclaim::kHeld;
}

void Framework::UndoReclaim(const core::Pod& pod, const absl::Status& why) {
  Log(Level::kWarn, StrCat("reclaim for pod=", pod.Key(), " undone (", why.message(),
                           "): room released, it may borrow for ",
                           absl::FormatDuration(options_.reclaim_timeout)));
  model_->Unreserve(pod.uid.view());
  {
    absl::MutexLock lock(&blocked_mu_);
    reclaim_blocked_[pod.uid.str()] = clock_->Now() + options_.reclaim_timeout;
  }
  // kube-scheduler may hold the pod in its backoff: have it try again, borrowing now.
  if (effects_ != nullptr) effects_->Nudge(pod, "its reclaim was refused");
}

bool Framework::ReclaimBlocked(std::string_view uid, absl::Time now) {
  absl::MutexLock lock(&blocked_mu_);
  std::erase_if(reclaim_blocked_, [&](const auto& e) { return e.second <= now; });
  return reclaim_blocked_.contains(uid);
}

// ---- prioritize, bind, preempt ------------------------------------------------------------------

std::vector<int64_t> Framework::Score(const core::Pod& pod,
                                      std::span<const std::string_view> candidates) {
  auto view = model_->Read();
  const CycleContext ctx{.state = *view, .pod = pod, .now = clock_->Now(), .explain = false};
  return pipeline_->Score(ctx, candidates);
}

BindResult Framework::Bind(
    const core::Pod& pod, std::string_view node_name,
    const std::function<absl::Status(const core::Pod&, std::string_view)>& bind) {
  const std::string node(node_name);
  const std::string& uid = pod.uid.str();
  const std::string key = pod.Key();
  auto refusal = [&](const NodeVerdict& v) {
    return absl::FailedPreconditionError(StrCat("node ", node, " cannot take pod ", key, ": ",
                                                v.message, v.detail.empty() ? "" : " (", v.detail,
                                                v.detail.empty() ? "" : ")"));
  };
  // Permit and Filter run on a read view, off the model's exclusive lock: the what-if's check
  // (every pod-level gate as bind asks it, and every filter, as the filter call answered). The
  // commit under the lock then only compares the node's generation with the one checked, and
  // re-checks the room of a node that changed meanwhile (docs/decisions.md, "Bind").
  uint64_t checked_generation = 0;
  core::ResourceVector checked_request;
  core::Labels checked_labels;
  bool checked = false;
  {
    auto view = model_->Read();
    const core::PodState* p = view->FindPod(uid);
    const core::NodeState* n = view->FindNode(node);
    // A pod bound or being bound already is Assume's to answer (idempotent binds).
    if (p != nullptr && n != nullptr && p->pod.node_name.empty() &&
        view->FindBind(uid) == nullptr) {
      const WhatIf whatif(*view, clock_->Now(), pipeline_.get());
      const NodeVerdict v = whatif.Check(p->pod, *n, /*as_plan=*/false, Words::kDetail);
      if (!v.ok()) return {.outcome = BindResult::Outcome::kRefused, .status = refusal(v)};
      checked_generation = n->generation;
      checked_request = p->pod.request;
      checked_labels = p->pod.labels;
      checked = true;
    }
  }
  auto check = [&](const core::ClusterState& state, const core::PodState& p,
                   const core::NodeState& n) -> absl::Status {
    if (!checked) return absl::AbortedError("the pod changed while its bind was checked");
    // A pod event between the check and this commit (its requests grown, its pool, queue or gang
    // labels changed) voids the check: refused, and kube-scheduler's next cycle decides anew.
    if (!(p.pod.request == checked_request) || !(p.pod.labels == checked_labels)) {
      return absl::AbortedError(StrCat("pod ", key, " changed while its bind to node ", node,
                                       " was checked; it is scheduled again"));
    }
    if (n.generation == checked_generation) return absl::OkStatus();
    const NodeVerdict v =
        CheckFit(state.resources(), p.pod.request, n, state.OwnReservation(p.pod.uid, n),
                 Words::kDetail);
    return v.ok() ? absl::OkStatus() : refusal(v);
  };
  absl::StatusOr<bool> assumed = model_->Assume(uid, node, check);
  if (!assumed.ok()) return {.outcome = BindResult::Outcome::kRefused, .status = assumed.status()};
  if (!*assumed) return {.outcome = BindResult::Outcome::kAlreadyPlaced};
  // Reserve, then the binder outside every lock; Unreserve when it fails.
  auto tell = [&](bool reserve) {
    auto view = model_->Read();
    const core::NodeState* n = view->FindNode(node);
    if (n == nullptr) return;
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock_->Now(), .explain = false};
    if (reserve) pipeline_->Reserve(ctx, *n); else pipeline_->Unreserve(ctx, *n);
  };
  tell(/*reserve=*/true);
  absl::Status bound = bind(pod, node);
  if (!bound.ok()) {
    model_->Forget(uid);
    tell(/*reserve=*/false);
    return {.outcome = BindResult::Outcome::kBinderFailed, .status = bound};
  }
  model_->BindSucceeded(uid);
  return {.outcome = BindResult::Outcome::kBound};
}

std::vector<NodeVictims> Framework::ReviewPreemption(
    const core::Pod& pod, std::vector<NodeVictims> proposal,
    std::vector<std::pair<std::string, NodeVerdict>>* dropped) {
  auto view = model_->Read();
  for (NodeVictims& nv : proposal) {
    for (Victim& v : nv.victims) {
      v.known = view->FindPod(v.uid);
      if (v.known != nullptr) v.priority = v.known->pod.priority;
    }
  }
  // A pod its queue holds back would not pass the filter once the victims were gone: no node is
  // worth a preemption for it. kube-scheduler asks without a filter call when every node failed
  // its own checks, so the queue's word is asked here too.
  if (const NodeVerdict queued = QueueVerdict(*view, pod); !queued.ok()) {
    if (dropped != nullptr) {
      for (NodeVictims& nv : proposal) dropped->emplace_back(std::move(nv.node), queued);
    }
    return {};
  }
  const CycleContext ctx{.state = *view, .pod = pod, .now = clock_->Now(), .explain = false};
  return pipeline_->ReviewPreemption(ctx, std::move(proposal), dropped);
}

// ---- housekeeping -------------------------------------------------------------------------------

bool Framework::MayReclaimFor(const core::ClusterState& state, const core::Pod& pod, absl::Time now) {
  return WaitsForNode(state, pod, options_.scheduler_name) && !GangOf(pod).has_value() &&
         state.FindReservation(pod.uid.view()) == nullptr && !ReclaimBlocked(pod.uid.view(), now) &&
         QueueVerdict(state, pod).ok();
}

bool Framework::ReclaimForPending(const core::Pod& pod) {
  if (!CanEvict()) return false;
  {
    auto view = model_->Read();
    if (!MayReclaimFor(*view, pod, clock_->Now())) return false;
  }
  return StartReclaim(pod) == Reclaim::kHeld;
}

int Framework::Housekeeping(bool reclaim_pending) {
  const absl::Time now = clock_->Now();
  std::vector<std::string> expired_gangs;
  {
    auto view = model_->Read();
    view->ForEachReservation([&](std::string_view, const core::Reservation& r) {
      if (r.expires <= now && !r.gang.empty() &&
          std::find(expired_gangs.begin(), expired_gangs.end(), r.gang) == expired_gangs.end()) {
        expired_gangs.push_back(r.gang);
      }
    });
  }
  for (const std::string& uid : model_->ExpireReservations(now)) {
    Log(Level::kInfo, StrCat("room held for pod uid=", uid, " released: its time ran out"));
  }
  GangHousekeeping(now, expired_gangs);
  if (!reclaim_pending || !CanEvict()) return 0;
  std::vector<core::Pod> pending;
  {
    auto view = model_->Read();
    view->ForEachPod([&](core::PodSlot, const core::PodState& p) {
      if (now - p.pod.creation >= kReclaimPendingAfter && MayReclaimFor(*view, p.pod, now)) {
        pending.push_back(p.pod);
      }
    });
  }
  // Highest priority first, then oldest, as the pods would have been tried.
  auto tried_first = [](const core::Pod& a, const core::Pod& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.creation < b.creation;
  };
  std::sort(pending.begin(), pending.end(), tried_first);
  int started = 0;
  for (const core::Pod& p : pending) started += StartReclaim(p) == Reclaim::kHeld ? 1 : 0;

  // Gangs kube-scheduler keeps from berth. A gang that starts only by taking room back (elastic
  // members of other gangs, borrowers of its pool) fails kube-scheduler's own resource check on
  // every node, so none of its members reaches berth's filter, where gangs are planned; it would
  // wait until some node happened to be free when a member was tried. Housekeeping plans it as
  // that filter would, after the same grace, by its oldest waiting member.
  const GangPlanner* planner = pipeline_->gangs();
  if (planner == nullptr) return started;
  std::vector<core::Pod> leads;
  {
    auto view = model_->Read();
    view->ForEachGang([&](std::string_view ns, std::string_view name) {
      const GangView g = ViewGang(*view, ns, name, planner->config());
      if (g.group == nullptr || g.admitted() || g.pending.empty() || g.total() < g.min_member) {
        return;
      }
      const core::Pod& lead = g.pending.front()->pod;
      if (now - lead.creation >= kReclaimPendingAfter &&
          WaitsForNode(*view, lead, options_.scheduler_name) && QueueVerdict(*view, lead).ok()) {
        leads.push_back(lead);
      }
    });
  }
  std::sort(leads.begin(), leads.end(), tried_first);
  for (const core::Pod& lead : leads) {
    if (PrepareGang(lead).has_value()) continue;  // it waits, for the reason its filter gives
    bool reserved = false;
    {
      auto view = model_->Read();
      const core::Reservation* r = view->FindReservation(lead.uid.view());
      reserved = r != nullptr && !r->gang.empty();
    }
    if (!reserved) continue;
    // PrepareGang nudges every member given room but the one it plans for, which in the filter
    // is the member being asked about. Here nobody is asking: nudge that one too, or the gang
    // could stay partly bound past its timeout.
    effects_->NudgeAtNextTick(std::string(lead.uid.view()), "room reserved for its gang");
    ++started;
  }
  return started;
}

void Framework::GangHousekeeping(absl::Time now, const std::vector<std::string>& expired_gangs) {
  const GangPlanner* planner = pipeline_->gangs();
  if (planner == nullptr) return;
  for (const std::string& key : expired_gangs) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos) continue;
    Log(Level::kWarn, StrCat("gang ", key, ": its members did not bind before the reserved room "
                             "ran out; it waits whole again"));
    model_->UpdateGangRecord(key.substr(0, slash), key.substr(slash + 1),
                             [](core::GangRecord& r) { ++r.timeouts; });
    if (effects_ != nullptr) effects_->Counted(EffectSink::Count::kGangTimeout);
  }
  struct Incomplete {
    std::string ns, name;
    std::vector<core::Pod> bound;
    int min = 0;
  };
  std::vector<Incomplete> incomplete;
  {
    auto view = model_->Read();
    view->ForEachGang([&](std::string_view ns, std::string_view name) {
      const GangView g = ViewGang(*view, ns, name, planner->config());
      if (g.record == nullptr || g.record->incomplete || now < g.record->deadline ||
          g.admitted() || g.bound.empty()) {
        return;
      }
      Incomplete inc{.ns = g.ns, .name = g.name, .min = g.min_member};
      for (const core::PodState* p : g.bound) inc.bound.push_back(p->pod);
      incomplete.push_back(std::move(inc));
    });
  }
  for (Incomplete& inc : incomplete) {
    model_->UpdateGangRecord(inc.ns, inc.name, [](core::GangRecord& r) { r.incomplete = true; });
    const bool release = planner->config().release_incomplete && CanEvict();
    Log(Level::kWarn, StrCat("gang ", inc.ns, "/", inc.name, " is incomplete: ", inc.bound.size(),
                             " of ", inc.min, " members bound when its time ran out",
                             release ? "; releasing the bound members" : ""));
    if (!release) continue;
    // Nothing to take back when a release fails: the member keeps running, and the log and
    // berth_intents_total say so.
    for (const core::Pod& p : inc.bound) {
      effects_->Evict({.pod = p,
                       .for_pod = p,
                       .why = StrCat("gang ", inc.ns, "/", inc.name, " could not complete in time"),
                       .cause = "gang-incomplete"});
    }
  }
}

}  // namespace berth::policy
