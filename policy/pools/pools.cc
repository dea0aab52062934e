#include "policy/pools/pools.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"

#include "core/placement.h"
#include "core/strings.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"

namespace berth::policy {

std::string_view HomePoolName(const core::Pod& pod) {
  for (std::string_view key : {"berth.io/pool", "resource.aibee.cn/pool"}) {
    if (auto v = pod.annotations.Get(key); v && !v->empty()) return *v;
  }
  return kDefaultPool;
}

// ---- PoolMap ------------------------------------------------------------------------------------

std::shared_ptr<const PoolMap> PoolMap::Build(const core::ClusterState& state) {
  auto map = std::make_shared<PoolMap>();
  map->pools_generation_ = state.pools_generation();
  map->node_labels_generation_ = state.node_labels_generation();
  map->pools_.push_back(Entry{.name = std::string(kDefaultPool)});
  std::vector<const core::Pool*> selecting;  // parallel to pools_ (nullptr for default)
  selecting.push_back(nullptr);
  state.ForEachPool([&](const core::Pool& p) {
    if (p.name == kDefaultPool) {
      // A Pool named "default" sets the default pool's flags; its selector is meaningless
      // (the default pool is what no other pool selects).
      Entry& d = map->pools_[kDefaultPoolId];
      d.disable_preemption = p.disable_preemption;
      d.disable_borrowing = p.disable_borrowing;
      d.disable_sharing = p.disable_sharing;
      return;
    }
    map->pools_.push_back(Entry{.name = p.name,
                                .disable_preemption = p.disable_preemption,
                                .disable_borrowing = p.disable_borrowing,
                                .disable_sharing = p.disable_sharing});
    selecting.push_back(&p);
  });
  state.ForEachNode([&](core::NodeSlot slot, const core::NodeState& n) {
    PoolId chosen = kDefaultPoolId;
    int matches = 0;
    for (PoolId id = 1; id < selecting.size(); ++id) {
      if (selecting[id]->node_selector.Matches(n.node.labels)) {
        chosen = id;
        ++matches;
      }
    }
    // Matching none or several pools: the default pool (seed 004).
    if (matches != 1) chosen = kDefaultPoolId;
    if (map->node_pool_.size() <= slot) map->node_pool_.resize(slot + 1, kDefaultPoolId);
    map->node_pool_[slot] = chosen;
    map->pools_[chosen].nodes.push_back(slot);
  });
  return map;
}

std::optional<PoolId> PoolMap::Find(std::string_view name) const {
  for (PoolId id = 0; id < pools_.size(); ++id) {
    if (pools_[id].name == name) return id;
  }
  return std::nullopt;
}

std::shared_ptr<const PoolMap> PoolMapCache::Get(const core::ClusterState& state) const {
  absl::MutexLock lock(&mu_);
  if (map_ == nullptr || map_->pools_generation() != state.pools_generation() ||
      map_->node_labels_generation() != state.node_labels_generation()) {
    map_ = PoolMap::Build(state);
  }
  return map_;
}

bool IsBorrower(const core::PodState& pod, const PoolMap& map) {
  if (pod.counted_on == core::kNoNode) return false;
  // A home pool that does not exist (deleted after the pod was placed, or a pod bound by hand)
  // is one the node is outside of: the pod borrows, as ReclaimCandidates treats it.
  const std::optional<PoolId> home = map.Find(HomePoolName(pod.pod));
  return !home.has_value() || map.PoolOf(pod.counted_on) != *home;
}

// ---- statistics ---------------------------------------------------------------------------------

std::string PoolStats::Flags() const {
  std::string f;
  f.push_back(disable_preemption ? '-' : 'p');
  f.push_back(disable_borrowing ? '-' : 'b');
  f.push_back(disable_sharing ? '-' : 's');
  return f;
}

std::vector<PoolStats> ComputePoolStats(const core::ClusterState& state, const PoolMap& map,
                                        std::string_view scheduler_name) {
  std::vector<PoolStats> out(map.pools().size());
  for (PoolId id = 0; id < map.pools().size(); ++id) {
    const PoolMap::Entry& e = map.pool(id);
    PoolStats& s = out[id];
    s.name = e.name;
    s.disable_preemption = e.disable_preemption;
    s.disable_borrowing = e.disable_borrowing;
    s.disable_sharing = e.disable_sharing;
    for (core::NodeSlot slot : e.nodes) {
      const core::NodeState& n = state.node(slot);
      s.capacity.resources.Add(n.node.capacity);
      s.allocatable.resources.Add(n.node.allocatable);
      ++s.capacity.nodes;
      ++s.allocatable.nodes;
      s.used.resources.Add(n.requested);
      s.used.resources.Add(n.assumed);
      if (!n.pods.empty() || n.binds_in_flight > 0) ++s.used.nodes;
      s.used.pods += static_cast<int64_t>(n.pods.size()) + n.binds_in_flight;
    }
    s.capacity.pods = s.capacity.resources.Get(core::kPods);
    s.allocatable.pods = s.allocatable.resources.Get(core::kPods);
  }
  state.ForEachPod([&](core::PodSlot, const core::PodState& p) {
    if (p.pod.scheduler_name != scheduler_name || core::IsTerminal(p.pod.phase)) return;
    const std::optional<PoolId> home = map.Find(HomePoolName(p.pod));
    if (p.counted_on == core::kNoNode) {
      // Waiting for a pool that does not exist: pending in none.
      if (home && p.pod.node_name.empty() && state.FindBind(p.pod.uid.view()) == nullptr) {
        out[*home].pending.resources.Add(p.pod.request);
        ++out[*home].pending.pods;
      }
      return;
    }
    const PoolId host = map.PoolOf(p.counted_on);
    if (home == host) return;
    // Its node's pool lends it room; a home that does not exist borrows it nowhere (IsBorrower).
    out[host].shared.resources.Add(p.pod.request);
    ++out[host].shared.pods;
    if (!home) return;
    out[*home].borrowed.resources.Add(p.pod.request);
    ++out[*home].borrowed.pods;
  });
  return out;
}

// ---- the filter ---------------------------------------------------------------------------------

namespace {

/// Free room of a pool in the resources a pod asks for, compared GPUs first, then CPU, then
/// memory; then fewer pods (seed 004: "most free resources, fewest tasks").
struct LenderRank {
  int64_t gpu = 0, cpu = 0, memory = 0, pods = 0;
  bool Better(const LenderRank& o) const {
    if (gpu != o.gpu) return gpu > o.gpu;
    if (cpu != o.cpu) return cpu > o.cpu;
    if (memory != o.memory) return memory > o.memory;
    return pods < o.pods;
  }
};

}  // namespace

bool PoolHasRoom(const core::ClusterState& state, const core::Pod& pod, const PoolMap::Entry& pool,
                 const WhatIf* whatif) {
  for (core::NodeSlot slot : pool.nodes) {
    const core::NodeState& n = state.node(slot);
    // Room on a node kube-scheduler would not give the pod (taints, cordon, node affinity) is
    // no room for it.
    if (!core::PlacementAllows(pod, n.node)) continue;
    if (CheckFit(state.resources(), pod.request, n, state.OwnReservation(pod.uid, n), Words::kNone, whatif)
            .ok()) {
      return true;
    }
  }
  return false;
}

PoolsModule::Plan PoolsModule::MakePlan(const CycleContext& ctx) const {
  Plan plan;
  plan.map = cache_.Get(ctx.state);
  plan.home = plan.map->Find(HomePoolName(ctx.pod));
  return plan;
}

PoolsModule::Plan::Borrowing PoolsModule::DecideBorrowing(const CycleContext& ctx,
                                                          const Plan& plan) const {
  Plan::Borrowing b;
  const PoolMap& map = *plan.map;
  b.home_has_room = PoolHasRoom(ctx.state, ctx.pod, map.pool(*plan.home), ctx.whatif);
  if (b.home_has_room) return b;
  // Preempt first, then borrow (seed 004): room held for the pod, or that evicting in its home
  // pool would make, keeps it home.
  if (const core::Reservation* r = ctx.state.FindReservation(ctx.pod.uid);
      (r != nullptr && map.PoolOf(r->node) == *plan.home) ||
      (!ctx.reclaim_blocked &&
       FindPoolReclaim(ctx.whatif != nullptr ? *ctx.whatif : WhatIf(ctx.state, ctx.now, ctx.pipeline),
                       map, ctx.pod, scheduler_name_))) {
    b.reclaiming = true;
    return b;
  }
  if (map.pool(*plan.home).disable_borrowing) return b;
  const bool wants_gpu = ctx.pod.request.Get(core::kNvidiaGpu) > 0;
  std::optional<LenderRank> best;
  for (PoolId id = 0; id < map.pools().size(); ++id) {
    const PoolMap::Entry& p = map.pool(id);
    if (id == *plan.home || p.disable_sharing || !PoolHasRoom(ctx.state, ctx.pod, p, ctx.whatif)) {
      continue;
    }
    LenderRank rank;
    for (core::NodeSlot slot : p.nodes) {
      const core::NodeState& n = ctx.state.node(slot);
      const core::ResourceVector free = ctx.Free(n);
      if (wants_gpu) rank.gpu += std::max<int64_t>(free.Get(core::kNvidiaGpu), 0);
      rank.cpu += std::max<int64_t>(free.Get(core::kCpu), 0);
      rank.memory += std::max<int64_t>(free.Get(core::kMemory), 0);
      rank.pods += static_cast<int64_t>(n.pods.size());
    }
    if (!best || rank.Better(*best)) {
      best = rank;
      b.lender = id;
    }
  }
  return b;
}

bool PoolsModule::Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const {
  std::optional<Plan> local;
  const Plan* plan;
  if (ctx.cycle != nullptr) {
    plan = &ctx.cycle->Get<Plan>(this, [&] { return MakePlan(ctx); });
  } else {
    local = MakePlan(ctx);
    plan = &*local;
  }
  const PoolMap& map = *plan->map;
  const PoolId pool = map.PoolOf(node.slot);
  if (plan->home && pool == *plan->home) return true;
  // Past the common case (a node of the pod's home pool): the pod's annotations are read only
  // for the message.
  if (!plan->home) {
    *why = NodeVerdict{.fit = Fit::kUnresolvable, .reason = Reason::kUnknownPool};
    if (ctx.messages) why->message = StrCat("berth: pool ", HomePoolName(ctx.pod), " does not exist");
    return false;
  }
  // Room held for this pod (a gang member's planned place) was given by these rules when it was
  // planned; the lender is not chosen again, or the gang's own reservations would move it.
  if (ctx.state.OwnReservation(ctx.pod.uid, node) != nullptr) return true;
  if (!plan->borrowing) plan->borrowing = DecideBorrowing(ctx, *plan);
  const Plan::Borrowing& borrowing = *plan->borrowing;
  Reason reason;
  if (borrowing.home_has_room) {
    reason = Reason::kHomePoolHasRoom;
  } else if (borrowing.reclaiming) {
    reason = Reason::kReclaiming;
  } else if (map.pool(*plan->home).disable_borrowing) {
    reason = Reason::kBorrowingDisabled;
  } else if (map.pool(pool).disable_sharing) {
    reason = Reason::kSharingDisabled;
  } else if (!borrowing.lender || *borrowing.lender != pool) {
    reason = Reason::kNotLenderPool;
  } else {
    return true;
  }
  *why = NodeVerdict{.fit = Fit::kUnresolvable, .reason = reason};
  if (!ctx.messages) return false;
  NodeVerdict& v = *why;
  const std::string_view home_name = HomePoolName(ctx.pod);
  const std::string& pool_name = map.pool(pool).name;
  switch (reason) {
    case Reason::kHomePoolHasRoom:
      v.message = StrCat("berth: outside the pod's home pool ", home_name, ", which has room");
      break;
    case Reason::kReclaiming:
      v.message = StrCat("berth: home pool ", home_name,
                         " is full; berth reclaims room there before the pod borrows");
      break;
    case Reason::kBorrowingDisabled:
      v.message = StrCat("berth: home pool ", home_name, " is full and does not allow borrowing");
      break;
    case Reason::kSharingDisabled:
      v.message = StrCat("berth: pool ", pool_name, " does not lend its nodes");
      break;
    default:
      v.message = borrowing.lender ? StrCat("berth: home pool ", home_name, " is full; borrowing from pool ",
                                            map.pool(*borrowing.lender).name, " (most free resources)")
                                   : StrCat("berth: home pool ", home_name, " is full; no pool lends room");
      break;
  }
  if (ctx.explain) v.detail = StrCat("node is in pool ", pool_name);
  return false;
}

// ---- preemption ---------------------------------------------------------------------------------

bool PoolsModule::Review(const CycleContext& ctx, const core::NodeState& node,
                          NodeVictims* proposal, NodeVerdict* why) const {
  const std::shared_ptr<const PoolMap> map = cache_.Get(ctx.state);
  const PoolId node_pool = map->PoolOf(node.slot);
  const PoolMap::Entry& pool = map->pool(node_pool);
  if (pool.disable_preemption) {
    *why = NodeVerdict{.fit = Fit::kUnresolvable,
                       .reason = Reason::kPoolRule,
                       .message = StrCat("berth: pool ", pool.name, " does not allow preemption")};
    return false;
  }
  const std::optional<PoolId> home = map->Find(HomePoolName(ctx.pod));
  const bool preemptor_borrows = !home || *home != node_pool;
  auto in_pool = [&](const core::PodState& p) {
    const std::optional<PoolId> h = map->Find(HomePoolName(p.pod));
    return h && *h == node_pool;
  };
  auto protected_victim = [&](const Victim& v) {
    if (v.priority >= kProductionPriority) return true;
    if (v.known == nullptr) return false;  // resource-fit drops what berth cannot account for
    const core::Pod& p = v.known->pod;
    if (p.scheduler_name != scheduler_name_) return true;
    if (p.priority >= kProductionPriority) return true;
    return preemptor_borrows && in_pool(*v.known);
  };
  std::erase_if(proposal->victims, protected_victim);

  if (!preemptor_borrows) {
    // Borrowers on this node, lowest priority first (seed 004's order among borrowers): if
    // evicting a prefix of them makes room, they replace the proposal.
    std::vector<const core::PodState*> borrowers;
    for (core::PodSlot slot : node.pods) {
      const core::PodState& p = ctx.state.pod(slot);
      if (p.pod.scheduler_name == scheduler_name_ && p.pod.priority < kProductionPriority &&
          !in_pool(p)) {
        borrowers.push_back(&p);
      }
    }
    std::sort(borrowers.begin(), borrowers.end(), [](const auto* a, const auto* b) {
      return a->pod.priority != b->pod.priority ? a->pod.priority < b->pod.priority
                                                : a->pod.request.Get(core::kCpu) > b->pod.request.Get(core::kCpu);
    });
    WhatIf whatif(ctx.state, ctx.now, ctx.pipeline);
    std::vector<Victim> chosen;
    for (const core::PodState* b : borrowers) {
      whatif.Evict(*b);
      chosen.push_back(Victim{.uid = b->pod.uid.str(), .priority = b->pod.priority, .known = b});
      if (whatif.Check(ctx.pod, node).ok()) {
        proposal->victims = std::move(chosen);
        return true;
      }
    }
  }
  if (proposal->victims.empty()) {
    *why = NodeVerdict{.fit = Fit::kUnresolvable,
                       .reason = Reason::kPoolRule,
                       .message = "berth: pool rules protect every proposed victim"};
    return false;
  }
  return true;
}

// ---- reclaim ------------------------------------------------------------------------------------

namespace {

/// How much a victim is worth keeping: borrowers below every in-pool pod, then priority, then
/// the longer-running pod (more work lost by evicting it).
struct VictimRank {
  bool in_pool;
  int32_t priority;
  absl::Time creation;
  bool operator<(const VictimRank& o) const {
    if (in_pool != o.in_pool) return !in_pool;
    if (priority != o.priority) return priority < o.priority;
    return creation > o.creation;
  }
};

}  // namespace

std::vector<const core::PodState*> ReclaimCandidates(const core::ClusterState& state,
                                                     const PoolMap& map, const core::Pod& pod,
                                                     const core::NodeState& node,
                                                     std::string_view scheduler_name,
                                                     std::vector<const core::PodState*>* leaving) {
  std::vector<const core::PodState*> out;
  const std::optional<PoolId> home = map.Find(HomePoolName(pod));
  // Never a cordoned node (even for a pod that tolerates the cordon), nor one kube-scheduler
  // would not give the pod (taints, node affinity): evicting there makes no room for it.
  if (!home || map.PoolOf(node.slot) != *home || node.node.unschedulable ||
      !core::PlacementAllows(pod, node.node)) {
    return out;
  }
  const bool may_preempt = !map.pool(*home).disable_preemption;
  // Pods an earlier reclaim evicted are leaving too, even before the watch says so.
  absl::flat_hash_set<std::string> evicted;
  state.ForEachReservation([&](std::string_view, const core::Reservation& r) {
    if (r.node == node.slot) evicted.insert(r.evicted.begin(), r.evicted.end());
  });
  std::vector<std::pair<VictimRank, const core::PodState*>> candidates;
  // Members of a gang may go only down to its minimum (its elastic members); the rest of a gang
  // is never a reclaim victim (docs/decisions.md, "elastic x reclaim").
  for (core::PodSlot slot : node.pods) {
    const core::PodState& p = state.pod(slot);
    if (p.pod.terminating || (!evicted.empty() && evicted.contains(p.pod.Key()))) {
      if (leaving != nullptr) leaving->push_back(&p);
      continue;
    }
    if (p.pod.scheduler_name != scheduler_name || p.pod.priority >= kProductionPriority ||
        p.pod.uid == pod.uid) {
      continue;
    }
    const std::optional<PoolId> victim_home = map.Find(HomePoolName(p.pod));
    const bool in_pool = victim_home && *victim_home == *home;
    if (in_pool && (!may_preempt || p.pod.priority >= pod.priority)) continue;
    candidates.push_back({VictimRank{in_pool, p.pod.priority, p.pod.creation}, &p});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [rank, p] : candidates) {
    if (GangOf(p->pod).has_value() && !IsElasticMember(state, *p)) continue;
    out.push_back(p);
  }
  return out;
}

namespace {

/// The victims on one node, cheapest first, or nullopt when evicting all it may does not make
/// room: every step is asked of the what-if, so the pod must pass every filter with that room.
std::optional<PoolReclaim> ReclaimOnNode(const WhatIf& base, const PoolMap& map, PoolId home,
                                         const core::Pod& pod, const core::NodeState& node,
                                         std::string_view scheduler_name) {
  const core::ClusterState& state = base.state();
  std::vector<const core::PodState*> leaving;
  const std::vector<const core::PodState*> candidates =
      ReclaimCandidates(state, map, pod, node, scheduler_name, &leaving);
  WhatIf whatif = base;
  for (const core::PodState* p : leaving) whatif.Evict(*p);
  const size_t mark = whatif.Mark();
  auto fits_without = [&](const std::vector<bool>& spared) {
    whatif.Rollback(mark);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!spared[i]) whatif.Evict(*candidates[i]);
    }
    return whatif.Check(pod, node).ok();
  };
  std::vector<bool> spared(candidates.size(), false);
  if (!fits_without(spared)) return std::nullopt;
  // Spare what is not needed, most valuable first (kube-scheduler's reprieve).
  for (size_t i = candidates.size(); i-- > 0;) {
    spared[i] = true;
    if (!fits_without(spared)) spared[i] = false;
  }
  PoolReclaim r{.pool = home, .node = node.slot};
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (spared[i]) continue;
    r.victims.push_back(candidates[i]);
    const std::optional<PoolId> h = map.Find(HomePoolName(candidates[i]->pod));
    if (h && *h == home) ++r.in_pool_victims;
  }
  return r;
}

/// Seed 004's order between nodes: fewest in-pool victims (borrowers first), lowest
/// highest-victim rank, lowest priority sum, fewest victims.
bool BetterReclaim(const PoolReclaim& a, const PoolReclaim& b, const PoolMap& map) {
  if (a.in_pool_victims != b.in_pool_victims) return a.in_pool_victims < b.in_pool_victims;
  auto highest = [&](const PoolReclaim& r) {
    std::optional<std::pair<bool, int32_t>> top;
    for (const core::PodState* v : r.victims) {
      const std::optional<PoolId> h = map.Find(HomePoolName(v->pod));
      const std::pair<bool, int32_t> key{h && *h == r.pool, v->pod.priority};
      if (!top || *top < key) top = key;
    }
    return top;
  };
  const auto ha = highest(a), hb = highest(b);
  if (ha != hb) return ha < hb;  // nullopt (no victim at all) first
  auto sum = [](const PoolReclaim& r) {
    int64_t s = 0;
    for (const core::PodState* v : r.victims) s += v->pod.priority;
    return s;
  };
  if (sum(a) != sum(b)) return sum(a) < sum(b);
  return a.victims.size() < b.victims.size();
}

}  // namespace

std::optional<PoolReclaim> FindPoolReclaim(const WhatIf& whatif, const PoolMap& map,
                                           const core::Pod& pod, std::string_view scheduler_name) {
  if (pod.scheduler_name != scheduler_name || !pod.node_name.empty() || pod.terminating) {
    return std::nullopt;
  }
  const core::ClusterState& state = whatif.state();
  const std::optional<PoolId> home = map.Find(HomePoolName(pod));
  if (!home || PoolHasRoom(state, pod, map.pool(*home), &whatif)) return std::nullopt;
  std::optional<PoolReclaim> best;
  for (core::NodeSlot slot : map.pool(*home).nodes) {
    std::optional<PoolReclaim> r =
        ReclaimOnNode(whatif, map, *home, pod, state.node(slot), scheduler_name);
    if (r && (!best || BetterReclaim(*r, *best, map))) best = std::move(r);
  }
  return best;
}

std::optional<ReclaimPlan> PoolsModule::PostFilter(const CycleContext& ctx) const {
  const std::shared_ptr<const PoolMap> map = cache_.Get(ctx.state);
  const WhatIf whatif(ctx.state, ctx.now, ctx.pipeline);
  std::optional<PoolReclaim> r = FindPoolReclaim(whatif, *map, ctx.pod, scheduler_name_);
  if (!r) return std::nullopt;
  return ReclaimPlan{.node = ctx.state.node(r->node).node.name,
                     .victims = std::move(r->victims),
                     .purpose = StrCat("reclaim in pool ", map->pool(r->pool).name)};
}

std::vector<const core::PodState*> PoolsModule::ReclaimCandidates(
    const CycleContext& ctx, const core::NodeState& node) const {
  const std::shared_ptr<const PoolMap> map = cache_.Get(ctx.state);
  return policy::ReclaimCandidates(ctx.state, *map, ctx.pod, node, scheduler_name_, nullptr);
}

NodeVerdict ReclaimInProgressVerdict(const core::ClusterState& state,
                                     const core::Reservation& reservation) {
  std::string leaving;
  int count = 0;
  for (const std::string& key : reservation.evicted) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos) continue;
    if (state.FindPodByName(std::string_view(key).substr(0, slash),
                            std::string_view(key).substr(slash + 1)) == nullptr) {
      continue;
    }
    if (count++ < 5) StrAppend(&leaving, leaving.empty() ? "" : ", ", key);
  }
  if (count > 5) StrAppend(&leaving, " and ", count - 5, " more");
  const std::string& node = state.node(reservation.node).node.name;
  return NodeVerdict{
      .fit = Fit::kUnresolvable,
      .reason = Reason::kReclaiming,
      .message = count > 0 ? StrCat("berth: ", reservation.purpose, ": room held on node ", node,
                                    ", waiting for ", count, " evicted pod(s) to exit: ", leaving)
                           : StrCat("berth: ", reservation.purpose, ": room held on node ", node)};
}

absl::StatusOr<PoolsConfig> ParsePoolsSettings(const Settings& section) {
  if (absl::Status s = CheckKeys(section, {"reclaimTimeoutSeconds"}); !s.ok()) return s;
  PoolsConfig out;
  if (absl::Status s = ReadSeconds(section, "reclaimTimeoutSeconds", 0.1, 86400,
                                   &out.reclaim_timeout);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace berth::policy
