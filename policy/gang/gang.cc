#include "policy/gang/gang.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/placement.h"
#include "core/checked_math.h"
#include "core/strings.h"
#include "policy/fit/resource_fit.h"
#include "policy/pipeline.h"
#include "policy/pools/pools.h"

namespace berth::policy {
namespace {

// How many pods of `request` fit into `free` (every requested resource; a pod always asks for
// one `pods` slot, so the count is bounded).
int64_t CountFits(const core::ResourceVector& free, const core::ResourceVector& request) {
  int64_t k = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = request.Get(id);
    if (want <= 0) continue;
    const int64_t have = free.Get(id);
    if (have < want) return 0;
    k = std::min(k, have / want);
  }
  return k == std::numeric_limits<int64_t>::max() ? 1 : k;
}


// Members of one shape (same request, labels, annotations and constraints) are interchangeable
// for planning: one eligibility pass and one fit count serve them all.
bool SameShape(const core::Pod& a, const core::Pod& b) {
  if (!(a.request == b.request) || !(a.labels == b.labels) || !(a.annotations == b.annotations)) {
    return false;
  }
  if (a.placement == b.placement) return true;
  return a.placement != nullptr && b.placement != nullptr && *a.placement == *b.placement;
}

// The node a placed member holds room on (bound, being bound or reserved), or kNoNode.
core::NodeSlot PlacedNode(const core::ClusterState& state, const core::PodState& p) {
  if (p.counted_on != core::kNoNode) return p.counted_on;
  if (const core::LedgerEntry* e = state.FindBind(p.pod.uid.view())) return e->node;
  if (const core::Reservation* r = state.FindReservation(p.pod.uid.view())) return r->node;
  if (!p.pod.node_name.empty()) return state.FindNodeSlot(p.pod.node_name.view());
  return core::kNoNode;
}

struct Group {
  const core::Pod* shape = nullptr;
  std::vector<const core::PodState*> members;
  std::vector<char> eligible;  // by node slot
  /// The most members of this shape a node takes (by slot), once the what-if refused one more
  /// there; -1: as many as the room counts. The room's arithmetic only prunes the search.
  std::vector<int64_t> cap;

  int64_t Fits(core::NodeSlot n, const core::ResourceVector& free) const {
    const int64_t k = CountFits(free, shape->request);
    return n < cap.size() && cap[n] >= 0 ? std::min(k, cap[n]) : k;
  }
};

// Room kube-scheduler keeps for pods it nominated to a node after preempting for them, by node
// slot: the requests of waiting pods whose status.nominatedNodeName names the node, at
// `priority` or above, other than `own` (the gang's own members). kube-scheduler's resource fit
// counts such pods as placed for any pod of lower or equal priority (addNominatedPods), so a gang
// planned into that room would never be offered the node, and would wait out its reservations.
absl::flat_hash_map<core::NodeSlot, core::ResourceVector> NominatedRoom(
    const core::ClusterState& state, int32_t priority, const std::vector<const core::PodState*>& own) {
  absl::flat_hash_map<core::NodeSlot, core::ResourceVector> held;
  state.ForEachPod([&](core::PodSlot, const core::PodState& p) {
    if (p.pod.nominated_node.empty() || !p.pod.node_name.empty() || p.pod.terminating ||
        core::IsTerminal(p.pod.phase) || p.pod.priority < priority) {
      return;
    }
    if (std::find(own.begin(), own.end(), &p) != own.end()) return;
    const core::NodeSlot slot = state.FindNodeSlot(p.pod.nominated_node.view());
    if (slot != core::kNoNode) held[slot].Add(p.pod.request);
  });
  return held;
}

// Free room per node slot for one planning pass, read from a what-if (its evictions counted)
// and cached: the search reads each node's room many times. Room held for nominated pods
// (NominatedRoom) is not free.
class Room {
 public:
  explicit Room(WhatIf& whatif,
                absl::flat_hash_map<core::NodeSlot, core::ResourceVector> nominated = {})
      : whatif_(whatif), nominated_(std::move(nominated)) {}
  const core::ResourceVector& Free(core::NodeSlot slot) {
    if (slot >= known_.size()) {
      known_.resize(slot + 1, 0);
      free_.resize(slot + 1);
    }
    if (!known_[slot]) {
      known_[slot] = 1;
      free_[slot] = whatif_.Free(whatif_.state().node(slot));
      if (auto it = nominated_.find(slot); it != nominated_.end()) free_[slot].Sub(it->second);
    }
    return free_[slot];
  }
  /// Evicts `victim` in the what-if: its node gets its room back.
  void Evict(const core::PodState& victim) {
    whatif_.Evict(victim);
    if (victim.counted_on < known_.size()) known_[victim.counted_on] = 0;
  }
  /// Places `pod` on `slot` in the what-if.
  void Place(const core::PodState& pod, core::NodeSlot slot) {
    whatif_.Place(pod, slot);
    if (slot < known_.size()) known_[slot] = 0;
  }
  WhatIf& whatif() { return whatif_; }

 private:
  WhatIf& whatif_;
  absl::flat_hash_map<core::NodeSlot, core::ResourceVector> nominated_;
  std::vector<char> known_;
  std::vector<core::ResourceVector> free_;
};

// GPUs first, then CPU, then memory: bigger shapes are packed first.
bool BiggerShape(const Group& a, const Group& b) {
  for (core::ResourceId id : {core::kNvidiaGpu, core::kCpu, core::kMemory}) {
    if (a.shape->request.Get(id) != b.shape->request.Get(id)) {
      return a.shape->request.Get(id) > b.shape->request.Get(id);
    }
  }
  return false;
}

struct DomainFit {
  std::vector<GangPlacement> placements;
  int64_t surplus = 0;  // members of the first shape that would still fit in the domain
};

class Search {
 public:
  Search(const core::ClusterState& state, const Topology& topo, std::vector<Group>& groups,
         Room& room, std::vector<core::NodeSlot> placed_nodes)
      : state_(state), topo_(topo), groups_(groups), room_(room),
        placed_nodes_(std::move(placed_nodes)) {}

  // Tries `nodes` as one domain. Nodes are used largest leaf first and, in a leaf, the node
  // with room for the most members first, so the gang spreads over as few leaves and nodes
  // as the room allows.
  std::optional<DomainFit> TryDomain(const std::vector<core::NodeSlot>& nodes) {
    // Quick bound: enough room counted per shape, ignoring the other shapes.
    for (Group& g : groups_) {
      int64_t cap = 0;
      const int64_t need = static_cast<int64_t>(g.members.size());
      for (core::NodeSlot n : nodes) {
        if (!g.eligible[n]) continue;
        cap += std::min<int64_t>(g.Fits(n, room_.Free(n)), need);
        if (cap >= need) break;
      }
      if (cap < need) return std::nullopt;
    }
    const int leaf_depth = topo_.levels();
    std::map<Topology::DomainId, int64_t> leaf_cap;
    std::vector<std::pair<core::NodeSlot, int64_t>> order;
    order.reserve(nodes.size());
    for (core::NodeSlot n : nodes) {
      if (!groups_[0].eligible[n]) {
        order.emplace_back(n, 0);
        continue;
      }
      const int64_t k = groups_[0].Fits(n, room_.Free(n));
      order.emplace_back(n, k);
      if (leaf_depth > 0) leaf_cap[topo_.DomainOf(n, leaf_depth)] += k;
    }
    auto leaf_of = [&](core::NodeSlot n) {
      return leaf_depth > 0 ? topo_.DomainOf(n, leaf_depth) : Topology::kRoot;
    };
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      const Topology::DomainId la = leaf_of(a.first), lb = leaf_of(b.first);
      if (la != lb) {
        const int64_t ca = leaf_cap[la], cb = leaf_cap[lb];
        if (ca != cb) return ca > cb;
        return la < lb;
      }
      if (a.second != b.second) return a.second > b.second;
      return a.first < b.first;
    });
    DomainFit fit;
    std::map<core::NodeSlot, core::ResourceVector> used;  // room taken in this try
    auto free_of = [&](core::NodeSlot n) {
      core::ResourceVector f = room_.Free(n);
      if (auto it = used.find(n); it != used.end()) f.Sub(it->second);
      return f;
    };
    for (Group& g : groups_) {
      size_t next = 0;
      for (const auto& [n, k0] : order) {
        if (next == g.members.size()) break;
        if (!g.eligible[n]) continue;
        const int64_t k = g.Fits(n, free_of(n));
        const int64_t take = std::min<int64_t>(k, static_cast<int64_t>(g.members.size() - next));
        for (int64_t i = 0; i < take; ++i) {
          fit.placements.push_back({g.members[next++], n});
          used[n].Add(g.shape->request);
        }
      }
      if (next < g.members.size()) return std::nullopt;
    }
    for (const auto& [n, k] : order) {
      if (groups_[0].eligible[n]) fit.surplus += groups_[0].Fits(n, free_of(n));
    }
    return fit;
  }

  // The smallest domain (fewest hops) within `max_hops` that holds the members, containing
  // the nodes of the members already placed.
  std::optional<GangPlan> Run(std::optional<int> max_hops) {
    const int levels = topo_.levels();
    for (int depth = levels + 1; depth >= 0; --depth) {
      const int hops = depth == levels + 1 ? Topology::kSameNode : topo_.HopsWithin(depth);
      if (max_hops && hops > *max_hops) continue;
      std::optional<DomainFit> best;
      std::string best_path;
      auto consider = [&](const std::vector<core::NodeSlot>& nodes, std::string_view path) {
        std::optional<DomainFit> f = TryDomain(nodes);
        if (f && (!best || f->surplus < best->surplus)) {
          best = std::move(f);
          best_path = std::string(path);
        }
      };
      if (depth == levels + 1) {
        // One node holds every member.
        if (!placed_nodes_.empty()) {
          if (std::all_of(placed_nodes_.begin(), placed_nodes_.end(),
                          [&](core::NodeSlot s) { return s == placed_nodes_[0]; })) {
            consider({placed_nodes_[0]}, state_.node(placed_nodes_[0]).node.name.c_str());
          }
        } else {
          state_.ForEachNode([&](core::NodeSlot slot, const core::NodeState& n) {
            consider({slot}, n.node.name);
          });
        }
      } else {
        for (Topology::DomainId d : topo_.at_depth(depth)) {
          const bool holds_placed =
              std::all_of(placed_nodes_.begin(), placed_nodes_.end(),
                          [&](core::NodeSlot s) { return topo_.DomainOf(s, depth) == d; });
          if (holds_placed) consider(topo_.domain(d).nodes, topo_.domain(d).path);
        }
      }
      if (!best) continue;
      GangPlan plan;
      plan.placements = std::move(best->placements);
      plan.domain = best_path;
      std::vector<core::NodeSlot> all = placed_nodes_;
      for (const GangPlacement& p : plan.placements) all.push_back(p.node);
      const int common = topo_.CommonDepth(all);
      plan.max_hops = common == levels + 1 ? 0 : topo_.HopsWithin(common);
      if (all.size() <= 1) plan.max_hops = 0;
      return plan;
    }
    return std::nullopt;
  }

  // How many members fit anywhere (no topology limit), packing greedily.
  int64_t CountPlaceable() {
    int64_t total = 0;
    std::map<core::NodeSlot, core::ResourceVector> used;
    for (Group& g : groups_) {
      int64_t left = static_cast<int64_t>(g.members.size());
      state_.ForEachNode([&](core::NodeSlot n, const core::NodeState&) {
        if (left == 0 || !g.eligible[n]) return;
        core::ResourceVector f = room_.Free(n);
        if (auto it = used.find(n); it != used.end()) f.Sub(it->second);
        const int64_t take = std::min(left, g.Fits(n, f));
        for (int64_t i = 0; i < take; ++i) used[n].Add(g.shape->request);
        left -= take;
        total += take;
      });
    }
    return total;
  }

 private:
  const core::ClusterState& state_;
  const Topology& topo_;
  std::vector<Group>& groups_;
  Room& room_;
  std::vector<core::NodeSlot> placed_nodes_;
};

// Picks the node that keeps a gang closest: the deepest domain shared with the gang's nodes,
// then room for the most such members; never beyond the gang's hop limit.
class NearestNode {
 public:
  NearestNode(const Topology& topo, std::vector<core::NodeSlot> gang_nodes,
              std::optional<int> max_hops)
      : topo_(topo), with_(std::move(gang_nodes)), max_hops_(max_hops) {
    with_.push_back(core::kNoNode);
  }
  // Considers `slot`, where `k` such members fit; `eligible()` is asked only of a node that
  // would win, so most nodes cost a few compares.
  template <class Eligible>
  void Offer(core::NodeSlot slot, int64_t k, Eligible&& eligible) {
    if (k <= 0) return;
    with_.back() = slot;
    const int depth = topo_.CommonDepth(with_);
    const int hops = with_.size() <= 1 || depth == topo_.levels() + 1 ? 0 : topo_.HopsWithin(depth);
    if (max_hops_ && hops > *max_hops_) return;
    if (depth < depth_ || (depth == depth_ && k <= k_)) return;
    if (!eligible()) return;
    chosen_ = slot;
    depth_ = depth;
    k_ = k;
  }
  core::NodeSlot chosen() const { return chosen_; }

 private:
  const Topology& topo_;
  std::vector<core::NodeSlot> with_;
  std::optional<int> max_hops_;
  core::NodeSlot chosen_ = core::kNoNode;
  int depth_ = -1;
  int64_t k_ = 0;
};

std::vector<Group> MakeGroups(const core::ClusterState& state,
                              const std::vector<const core::PodState*>& members,
                              const EligibleFn& eligible) {
  std::vector<Group> groups;
  for (const core::PodState* m : members) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return SameShape(*g.shape, m->pod); });
    if (it == groups.end()) {
      groups.push_back(Group{.shape = &m->pod});
      it = groups.end() - 1;
    }
    it->members.push_back(m);
  }
  size_t slots = 0;
  state.ForEachNode([&](core::NodeSlot s, const core::NodeState&) { slots = std::max<size_t>(slots, s + 1); });
  for (Group& g : groups) {
    g.eligible.assign(slots, 0);
    state.ForEachNode([&](core::NodeSlot s, const core::NodeState& n) {
      g.eligible[s] = eligible(*g.shape, n) ? 1 : 0;
    });
  }
  std::stable_sort(groups.begin(), groups.end(), BiggerShape);
  return groups;
}

// Places the plan's members in `whatif` in order, each checked by the filter chain with the
// members before it placed. \return the index of the first placement refused, or nullopt when
// all pass (the placements stay in the what-if; roll back to discard them).
std::optional<size_t> FirstRefused(const core::ClusterState& state, const GangPlan& plan,
                                   WhatIf& whatif) {
  for (size_t i = 0; i < plan.placements.size(); ++i) {
    const GangPlacement& pl = plan.placements[i];
    if (!whatif.Check(pl.member->pod, state.node(pl.node)).ok()) return i;
    whatif.Place(*pl.member, pl.node);
  }
  return std::nullopt;
}

// The plan the search finds, accepted only when the what-if's filter chain takes every member on
// its planned node with the members before it placed (the chain is the judge; the search's
// arithmetic only prunes). A refusal caps that node for that shape and the search runs again;
// every refusal lowers a cap, so this ends.
std::optional<GangPlan> RunVerified(const core::ClusterState& state, const Topology& topo,
                                    std::vector<Group>& groups, Room& room,
                                    const std::vector<core::NodeSlot>& placed_nodes,
                                    std::optional<int> max_hops) {
  while (true) {
    Search search(state, topo, groups, room, placed_nodes);
    std::optional<GangPlan> plan = search.Run(max_hops);
    if (!plan) return std::nullopt;
    WhatIf& whatif = room.whatif();
    const size_t mark = whatif.Mark();
    const std::optional<size_t> refused = FirstRefused(state, *plan, whatif);
    whatif.Rollback(mark);
    if (!refused) return plan;
    // Cap the refused node for that member's shape at the members of the shape placed there
    // before it.
    const GangPlacement& pl = plan->placements[*refused];
    Group& g = *std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return std::find(x.members.begin(), x.members.end(), pl.member) != x.members.end();
    });
    int64_t before = 0;
    for (size_t i = 0; i < *refused; ++i) {
      const GangPlacement& q = plan->placements[i];
      if (q.node == pl.node &&
          std::find(g.members.begin(), g.members.end(), q.member) != g.members.end()) {
        ++before;
      }
    }
    if (g.cap.size() <= pl.node) g.cap.resize(std::max<size_t>(g.eligible.size(), pl.node + 1), -1);
    g.cap[pl.node] = before;
  }
}

// Whether every placement of `plan` passes the filter chain once `victims` are evicted.
bool PlanHolds(const core::ClusterState& state, absl::Time now, const Pipeline* pipeline,
               const GangPlan& plan, const std::vector<const core::PodState*>& victims) {
  WhatIf whatif(state, now, pipeline);
  for (const core::PodState* v : victims) whatif.Evict(*v);
  return !FirstRefused(state, plan, whatif).has_value();
}

bool Managed(const core::PodState& p, std::string_view scheduler_name) {
  return p.pod.scheduler_name == scheduler_name;
}

NodeVerdict Waiting(Reason reason, std::string message, std::string detail = {}) {
  return NodeVerdict{.fit = Fit::kUnresolvable,
                     .reason = reason,
                     .message = std::move(message),
                     .detail = std::move(detail)};
}

std::string FormatFulfillment(double f) { return absl::StrFormat("%.2f", f); }

}  // namespace

bool IsElasticMember(const core::ClusterState& state, const core::PodState& pod) {
  const auto key = GangOf(pod.pod);
  if (!key) return false;
  const GangView g = ViewGang(state, key->first, key->second, GangConfig{});
  const int extra = g.running() - g.min_member;
  if (extra <= 0) return false;
  std::vector<const core::PodState*> newest = g.bound;
  std::sort(newest.begin(), newest.end(), [](const auto* a, const auto* b) {
    return std::tie(b->pod.creation, b->pod.name) < std::tie(a->pod.creation, a->pod.name);
  });
  const auto it = std::find(newest.begin(), newest.end(), &pod);
  return it != newest.end() && it - newest.begin() < extra;
}

std::vector<core::NodeSlot> PlacedNodes(const core::ClusterState& state, const GangView& gang,
                                        const core::PodState* skip) {
  std::vector<core::NodeSlot> out;
  for (const auto* list : {&gang.bound, &gang.reserved}) {
    for (const core::PodState* p : *list) {
      if (p == skip) continue;
      if (core::NodeSlot s = PlacedNode(state, *p); s != core::kNoNode) out.push_back(s);
    }
  }
  return out;
}

std::optional<std::pair<std::string_view, std::string_view>> GangOf(const core::Pod& pod) {
  const std::string_view name = core::GangNameOf(pod);
  if (name.empty()) return std::nullopt;
  return std::make_pair(std::string_view(pod.ns), name);
}

double GangView::Fulfillment() const {
  const int extra = total() - min_member;
  if (extra <= 0) return 1.0;
  return std::clamp(static_cast<double>(placed() - min_member) / extra, 0.0, 1.0);
}

bool GangView::Frozen(absl::Time now) const {
  return record != nullptr && record->resized != absl::InfinitePast() &&
         now - record->resized < freeze_window;
}

GangView ViewGang(const core::ClusterState& state, std::string_view ns, std::string_view name,
                  const GangConfig& config) {
  GangView g;
  g.ns = std::string(ns);
  g.name = std::string(name);
  g.group = state.FindPodGroup(ns, name);
  if (g.group != nullptr) g.min_member = std::max<int32_t>(g.group->min_member, 1);
  g.record = state.FindGangRecord(ns, name);
  g.freeze_window = config.freeze_window;
  std::optional<absl::Duration> freeze;
  if (g.group != nullptr) {
    if (auto v = g.group->annotations.Get(kFreezeWindowKey)) {
      absl::Duration d;
      if (absl::ParseDuration(ToAbsl(*v), &d) && d >= absl::ZeroDuration()) freeze = d;
    }
  }
  state.ForEachGangMember(ns, name, [&](const core::PodState& p) {
    if (p.pod.phase == core::PodPhase::kSucceeded) {
      ++g.succeeded;
      return;
    }
    if (core::IsTerminal(p.pod.phase) || p.pod.terminating) return;
    if (auto v = p.pod.annotations.Get(kMaxHopsKey)) {
      int hops;
      if (absl::SimpleAtoi(ToAbsl(*v), &hops) && hops >= 0) {
        g.max_hops = g.max_hops ? std::min(*g.max_hops, hops) : hops;
      }
    }
    if (!freeze) {
      if (auto v = p.pod.annotations.Get(kFreezeWindowKey)) {
        absl::Duration d;
        if (absl::ParseDuration(ToAbsl(*v), &d) && d >= absl::ZeroDuration()) freeze = d;
      }
    }
    if (!p.pod.node_name.empty() || state.FindBind(p.pod.uid.view()) != nullptr) {
      g.bound.push_back(&p);
    } else if (const core::Reservation* r = state.FindReservation(p.pod.uid.view());
               r != nullptr && !r->gang.empty()) {
      g.reserved.push_back(&p);
    } else {
      g.pending.push_back(&p);
    }
  });
  // Members that finished and left the model (the pod watch leaves finished pods out).
  g.succeeded += state.SucceededGangTombstones(ns, name);
  if (freeze) g.freeze_window = *freeze;
  std::sort(g.pending.begin(), g.pending.end(), [](const auto* a, const auto* b) {
    return std::tie(a->pod.creation, a->pod.name) < std::tie(b->pod.creation, b->pod.name);
  });
  return g;
}

GangPlanner::GangPlanner(GangConfig config, std::string scheduler_name)
    : config_(std::move(config)),
      scheduler_name_(std::move(scheduler_name)),
      topology_(config_.topology_levels) {}

int GangPlanner::MaxHops(const core::ClusterState& state,
                         const std::vector<core::NodeSlot>& nodes) const {
  if (nodes.size() <= 1) return 0;
  std::shared_ptr<const Topology> topo = topology(state);
  const int common = topo->CommonDepth(nodes);
  return common == topo->levels() + 1 ? 0 : topo->HopsWithin(common);
}

GangOutcome GangPlanner::PlanAdmission(const CycleContext& ctx, const GangView& gang,
                                       const EligibleFn& eligible) const {
  GangOutcome out;
  out.placeable = gang.placed();
  const int needed = gang.min_member - gang.placed();
  if (needed <= 0) {
    out.plan = GangPlan{};
    return out;
  }
  if (static_cast<int>(gang.pending.size()) < needed) {
    out.why = Waiting(Reason::kGangMembersMissing,
                      StrCat("berth: gang ", gang.Key(), ": ", gang.total(), " of ",
                             gang.min_member, " members exist"));
    return out;
  }
  const core::ClusterState& state = ctx.state;
  std::vector<const core::PodState*> to_place(gang.pending.begin(),
                                              gang.pending.begin() + needed);
  std::vector<Group> groups = MakeGroups(state, to_place, eligible);
  std::shared_ptr<const Topology> topo = topology(state);
  const std::vector<core::NodeSlot> placed_nodes = PlacedNodes(state, gang);
  // A what-if handed in (pods it already evicted) is the starting point; it is not changed.
  WhatIf whatif = ctx.whatif != nullptr ? *ctx.whatif : WhatIf(state, ctx.now, ctx.pipeline);
  Room room(whatif, NominatedRoom(state, to_place.front()->pod.priority, gang.pending));
  if (gang.group != nullptr && !gang.group->min_resources.IsZero()) {
    core::ResourceVector free;
    state.ForEachNode([&](core::NodeSlot s, const core::NodeState&) { free.Add(room.Free(s)); });
    for (const core::PodState* p : gang.bound) free.Add(p->pod.request);
    for (const core::PodState* p : gang.reserved) free.Add(p->pod.request);
    bool enough = true;
    for (size_t i = 0; i < gang.group->min_resources.size(); ++i) {
      const auto id = static_cast<core::ResourceId>(i);
      if (gang.group->min_resources.Get(id) > free.Get(id)) enough = false;
    }
    if (!enough) {
      out.why = Waiting(Reason::kGangNotPlaceable,
                        StrCat("berth: gang ", gang.Key(), ": minResources ",
                               gang.group->min_resources.DebugString(state.resources()),
                               " exceed the cluster's free room"));
      return out;
    }
  }
  if (std::optional<GangPlan> plan =
          RunVerified(state, *topo, groups, room, placed_nodes, gang.max_hops)) {
    out.placeable = gang.min_member;
    out.plan = std::move(plan);
    return out;
  }
  // Take capacity back from elastic members of other gangs: the most fulfilled gang first,
  // never below its minimum, never a frozen gang, never higher priority than this pod.
  struct Donor {
    GangView view;
    std::vector<const core::PodState*> members;  // bound elastic candidates, newest first
    int taken = 0;
  };
  std::vector<Donor> donors;
  state.ForEachGang([&](std::string_view ns, std::string_view name) {
    if (ns == gang.ns && name == gang.name) return;
    GangView v = ViewGang(state, ns, name, config_);
    // Only running members may go, and only down to the minimum (reserved room is not running).
    if (v.group == nullptr || v.running() <= v.min_member || v.Frozen(ctx.now)) return;
    Donor d{.view = std::move(v)};
    for (const core::PodState* p : d.view.bound) {
      if (p->counted_on == core::kNoNode || !Managed(*p, scheduler_name_) ||
          p->pod.priority >= kProductionPriority || p->pod.priority > ctx.pod.priority) {
        continue;
      }
      d.members.push_back(p);
    }
    std::sort(d.members.begin(), d.members.end(), [](const auto* a, const auto* b) {
      return std::tie(b->pod.creation, b->pod.name) < std::tie(a->pod.creation, a->pod.name);
    });
    if (!d.members.empty()) donors.push_back(std::move(d));
  });
  std::vector<const core::PodState*> victims;
  while (true) {
    Donor* pick = nullptr;
    double best = -1;
    for (Donor& d : donors) {
      const int running = d.view.running() - d.taken;
      if (running <= d.view.min_member || d.taken >= static_cast<int>(d.members.size())) continue;
      const int extra = d.view.total() - d.view.min_member;
      const double f = static_cast<double>(running - d.view.min_member) / std::max(extra, 1);
      if (f > best) {
        best = f;
        pick = &d;
      }
    }
    if (pick == nullptr) break;
    const core::PodState* v = pick->members[pick->taken++];
    victims.push_back(v);
    room.Evict(*v);
    if (std::optional<GangPlan> plan =
            RunVerified(state, *topo, groups, room, placed_nodes, gang.max_hops)) {
      // Spare the victims on nodes the plan does not use.
      for (const core::PodState* p : victims) {
        const bool used = std::any_of(plan->placements.begin(), plan->placements.end(),
                                      [&](const GangPlacement& gp) { return gp.node == p->counted_on; });
        if (used) plan->victims.push_back(p);
      }
      out.placeable = gang.min_member;
      out.plan = std::move(plan);
      return out;
    }
  }
  // Reclaim the gang's pool (pools x gangs): what the reclaim modules would let go for its
  // members, on every node at once, evicted in the what-if; a plan then takes all its members'
  // room at once, and only the victims it needs go (most valuable spared first).
  if (ctx.pipeline != nullptr) {
    const CycleContext rctx{.state = state, .pod = to_place.front()->pod, .now = ctx.now,
                            .explain = false};
    std::vector<const core::PodState*> taken;
    state.ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      for (const core::PodState* v : ctx.pipeline->ReclaimCandidates(rctx, n)) {
        if (whatif.Evicted(v->pod.uid.view())) continue;
        taken.push_back(v);
        room.Evict(*v);
      }
    });
    if (!taken.empty()) {
      if (std::optional<GangPlan> plan =
              RunVerified(state, *topo, groups, room, placed_nodes, gang.max_hops)) {
        std::vector<const core::PodState*> all = victims;
        for (const core::PodState* v : taken) {
          const bool used = std::any_of(plan->placements.begin(), plan->placements.end(),
                                        [&](const GangPlacement& gp) { return gp.node == v->counted_on; });
          if (used) all.push_back(v);
        }
        for (size_t i = all.size(); i-- > 0;) {
          std::vector<const core::PodState*> without = all;
          without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
          if (PlanHolds(state, ctx.now, ctx.pipeline, *plan, without)) all = std::move(without);
        }
        plan->victims = std::move(all);
        out.placeable = gang.min_member;
        out.plan = std::move(plan);
        return out;
      }
    }
  }
  // No plan. Say why: the hop limit, or how many members fit.
  WhatIf as_is(state, ctx.now, ctx.pipeline);
  Room plain(as_is);
  Search count(state, *topo, groups, plain, placed_nodes);
  const int64_t placeable = count.CountPlaceable();
  out.placeable = gang.placed() + static_cast<int>(placeable);
  if (gang.max_hops && placeable >= needed) {
    Search wide(state, *topo, groups, plain, placed_nodes);
    if (std::optional<GangPlan> p = wide.Run(std::nullopt)) {
      out.why = Waiting(Reason::kGangMaxHops,
                        StrCat("berth: gang ", gang.Key(), ": its ", gang.min_member,
                               " members fit only ", p->max_hops, " hops apart; ",
                               kMaxHopsKey, " is ", *gang.max_hops));
      return out;
    }
  }
  out.why = Waiting(Reason::kGangNotPlaceable,
                    StrCat("berth: gang ", gang.Key(), ": ", out.placeable, " of ",
                           gang.min_member, " members placeable"));
  return out;
}

std::vector<GangPlacement> GangPlanner::PlanElastic(const core::ClusterState& state,
                                                    absl::Time now, const EligibleFn& eligible,
                                                    const Pipeline* pipeline) const {
  struct Active {
    GangView view;
    std::vector<core::NodeSlot> nodes;  // where its members are (and go in this pass)
    size_t next = 0;                    // next pending member
    int added = 0;
  };
  std::vector<Active> gangs;
  state.ForEachGang([&](std::string_view ns, std::string_view name) {
    GangView v = ViewGang(state, ns, name, config_);
    if (v.group == nullptr || !v.admitted() || v.pending.empty() || v.Frozen(now)) return;
    if (!Managed(*v.pending[0], scheduler_name_)) return;
    Active a{.view = std::move(v)};
    a.nodes = PlacedNodes(state, a.view);
    gangs.push_back(std::move(a));
  });
  std::vector<GangPlacement> out;
  if (gangs.empty()) return out;
  std::shared_ptr<const Topology> topo = topology(state);
  // Elastic members take free room only: the what-if counts room held for reclaims and for
  // other gangs as taken (it is reserved in the model), and never evicts.
  WhatIf whatif(state, now, pipeline);
  Room room(whatif);
  std::vector<bool> done(gangs.size(), false);
  while (true) {
    int pick = -1;
    double best = 2;
    for (size_t i = 0; i < gangs.size(); ++i) {
      Active& a = gangs[i];
      if (done[i] || a.next >= a.view.pending.size()) continue;
      const int extra = a.view.total() - a.view.min_member;
      const double f =
          static_cast<double>(a.view.placed() + a.added - a.view.min_member) / std::max(extra, 1);
      if (f < best) {
        best = f;
        pick = static_cast<int>(i);
      }
    }
    if (pick < 0) break;
    Active& a = gangs[pick];
    const core::PodState* member = a.view.pending[a.next];
    NearestNode pick_node(*topo, a.nodes, a.view.max_hops);
    state.ForEachNode([&](core::NodeSlot s, const core::NodeState& n) {
      pick_node.Offer(s, CountFits(room.Free(s), member->pod.request), [&] {
        return eligible(member->pod, n) && whatif.Check(member->pod, n).ok();
      });
    });
    const core::NodeSlot chosen = pick_node.chosen();
    if (chosen == core::kNoNode) {
      done[pick] = true;
      continue;
    }
    out.push_back({member, chosen});
    room.Place(*member, chosen);
    a.nodes.push_back(chosen);
    ++a.next;
    ++a.added;
  }
  return out;
}

std::optional<core::NodeSlot> GangPlanner::ReplanMember(const core::ClusterState& state,
                                                        const GangView& gang,
                                                        const core::PodState& member,
                                                        const std::vector<core::NodeSlot>& allowed,
                                                        const EligibleFn& eligible,
                                                        absl::Time now,
                                                        const Pipeline* pipeline) const {
  std::shared_ptr<const Topology> topo = topology(state);
  std::vector<core::NodeSlot> with = PlacedNodes(state, gang, &member);
  const core::Reservation* own = state.FindReservation(member.pod.uid.view());
  NearestNode pick(*topo, std::move(with), gang.max_hops);
  const WhatIf whatif(state, now, pipeline);
  for (core::NodeSlot s : allowed) {
    core::ResourceVector free = state.node(s).Free();
    if (own != nullptr && own->node == s) free.Add(own->request);
    pick.Offer(s, CountFits(free, member.pod.request), [&] {
      return eligible(member.pod, state.node(s)) && whatif.Check(member.pod, state.node(s)).ok();
    });
  }
  const core::NodeSlot chosen = pick.chosen();
  if (chosen == core::kNoNode) return std::nullopt;
  return chosen;
}

NodeVerdict GangPlanner::WaitingVerdict(const CycleContext& ctx, const GangView& gang,
                                        const EligibleFn& eligible) const {
  if (gang.group == nullptr) {
    return Waiting(Reason::kGangNoPodGroup,
                   StrCat("berth: gang ", gang.Key(), ": PodGroup ", gang.Key(),
                          " does not exist yet"));
  }
  if (gang.total() < gang.min_member) {
    return Waiting(Reason::kGangMembersMissing,
                   StrCat("berth: gang ", gang.Key(), ": ", gang.total(), " of ",
                          gang.min_member, " members exist"));
  }
  if (gang.admitted()) {
    if (gang.Frozen(ctx.now)) {
      return Waiting(Reason::kGangElasticWaiting,
                     StrCat("berth: gang ", gang.Key(), ": elastic member waits: the gang was "
                            "resized ", absl::FormatDuration(absl::Trunc(ctx.now - gang.record->resized, absl::Seconds(1))),
                            " ago, within its freeze window of ",
                            absl::FormatDuration(gang.freeze_window)));
    }
    return Waiting(Reason::kGangElasticWaiting,
                   StrCat("berth: gang ", gang.Key(), ": elastic member waits for room "
                          "(fulfillment ", FormatFulfillment(gang.Fulfillment()), ")"));
  }
  GangOutcome o = PlanAdmission(ctx, gang, eligible);
  if (o.plan) {
    return Waiting(Reason::kGangNotPlaceable,
                   StrCat("berth: gang ", gang.Key(), ": ", gang.min_member, " of ",
                          gang.min_member, " members placeable; room is not reserved yet"));
  }
  return o.why;
}

absl::Duration GangTimeout(const GangView& g, const GangConfig& config) {
  if (g.group != nullptr && g.group->schedule_timeout_seconds.has_value() &&
      *g.group->schedule_timeout_seconds > 0) {
    return absl::Seconds(*g.group->schedule_timeout_seconds);
  }
  return config.schedule_timeout;
}

// ---- modules ----------------------------------------------------------------------------------

NodeVerdict GangModule::PreFilter(const CycleContext& ctx) const {
  if (ctx.planning) return NodeVerdict::Ok();
  auto gang = GangOf(ctx.pod);
  if (!gang) return NodeVerdict::Ok();
  if (const core::Reservation* r = ctx.state.FindReservation(ctx.pod.uid.view());
      r != nullptr && !r->gang.empty()) {
    return NodeVerdict::Ok();
  }
  if (ctx.gang_waiting != nullptr) return *ctx.gang_waiting;
  GangView view = ViewGang(ctx.state, gang->first, gang->second, planner_->config());
  // Without the pipeline at hand, planning here checks only the placement constraints.
  return planner_->WaitingVerdict(ctx, view, [](const core::Pod& pod, const core::NodeState& n) {
    return core::PlacementAllows(pod, n.node);
  });
}

NodeVerdict GangModule::Permit(const CycleContext& ctx, const core::NodeState& node) const {
  (void)node;  // the gang's Filter keeps a member to its reserved node
  return PreFilter(ctx);
}

namespace {
struct MemberMemo {
  core::NodeSlot reserved = core::kNoNode;
  std::string elsewhere;  // the message of every other node, formatted once per cycle
};
MemberMemo MakeMemberMemo(const CycleContext& ctx) {
  MemberMemo m;
  auto gang = GangOf(ctx.pod);
  if (!gang) return m;
  if (const core::Reservation* r = ctx.state.FindReservation(ctx.pod.uid.view());
      r != nullptr && !r->gang.empty()) {
    m.reserved = r->node;
    m.elsewhere = StrCat("berth: gang ", gang->first, "/", gang->second,
                         ": this member's room is reserved on node ",
                         ctx.state.node(r->node).node.name);
  }
  return m;
}

// The cycle's memo, or `local` made for this call alone. By reference: called for every
// candidate, and the memo holds a string.
const MemberMemo& MemberMemoOf(const void* module, const CycleContext& ctx, std::optional<MemberMemo>& local) {
  return ctx.cycle != nullptr ? ctx.cycle->Get<MemberMemo>(module, [&] { return MakeMemberMemo(ctx); })
                              : local.emplace(MakeMemberMemo(ctx));
}
}  // namespace

bool GangModule::Skips(const CycleContext& ctx) const {
  std::optional<MemberMemo> local;
  return ctx.planning || MemberMemoOf(this, ctx, local).reserved == core::kNoNode;
}

bool GangModule::Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const {
  if (ctx.planning) return true;
  std::optional<MemberMemo> local;
  const MemberMemo& m = MemberMemoOf(this, ctx, local);
  if (m.reserved == core::kNoNode || m.reserved == node.slot) return true;
  *why = NodeVerdict{.fit = Fit::kUnresolvable, .reason = Reason::kGangReservedElsewhere};
  if (ctx.messages) why->message = m.elsewhere;
  return false;
}

bool GangTopologyScore::Applies(const CycleContext& ctx) const {
  return GangOf(ctx.pod).has_value();
}

namespace {
struct ScoreMemo {
  core::NodeSlot reserved = core::kNoNode;
  std::vector<core::NodeSlot> placed;
  std::shared_ptr<const Topology> topo;
};
}  // namespace

int64_t GangTopologyScore::Score(const CycleContext& ctx, const core::NodeState& node) const {
  auto make = [&] {
    ScoreMemo m;
    auto gang = GangOf(ctx.pod);
    if (!gang) return m;
    m.topo = planner_->topology(ctx.state);
    if (const core::Reservation* r = ctx.state.FindReservation(ctx.pod.uid.view());
        r != nullptr && !r->gang.empty()) {
      m.reserved = r->node;
    }
    ctx.state.ForEachGangMember(gang->first, gang->second, [&](const core::PodState& p) {
      if (p.pod.uid == ctx.pod.uid || core::IsTerminal(p.pod.phase)) return;
      if (core::NodeSlot s = PlacedNode(ctx.state, p); s != core::kNoNode) m.placed.push_back(s);
    });
    return m;
  };
  const ScoreMemo m = ctx.cycle != nullptr ? ctx.cycle->Get<ScoreMemo>(this, make) : make();
  if (m.topo == nullptr) return 0;
  if (m.reserved != core::kNoNode) {
    if (m.reserved == node.slot) return kMaxScore;
    const int hops = m.topo->Hops(m.reserved, node.slot);
    const int worst = m.topo->HopsWithin(0);
    return (kMaxScore - 1) * (worst - hops) / std::max(worst, 1);
  }
  if (m.placed.empty()) return kMaxScore / 2;
  std::vector<core::NodeSlot> with = m.placed;
  with.push_back(node.slot);
  const int depth = m.topo->CommonDepth(with);
  return kMaxScore * depth / (m.topo->levels() + 1);
}

// A gang member gets victims only where they let its own gang start (docs/decisions.md, "gangs x
// preemption"). A member of a gang that has started gets none: a member with room reserved has
// its node already, and an elastic member takes only free room. kube-scheduler proposes victims
// for them when its own checks fail (victims of the gang's plan still terminating on the reserved
// node, no free room for an elastic member); accepted, those victims go for nothing, and the
// member's nomination keeps their node's room from the gang members berth reserves there.
//
// A member of a gang that has not started may preempt only where that lets the whole gang start:
// with the proposal's victims gone, the planner must find room for every member the gang still
// needs without evicting anyone else (docs/decisions.md, "gangs x preemption"). Pods still
// terminating from earlier proposals do not count: kube-scheduler keeps one nominated node per
// member, so room freed for a member that then preempts elsewhere goes to other pods, and the
// gang would evict node after node for nothing. Evictions a whole gang needs are the gang
// planner's, for all members at once.
std::optional<NodeVerdict> GangModule::PreemptorGangShort(const CycleContext& ctx,
                                                         const NodeVictims& proposal) const {
  const auto key = GangOf(ctx.pod);
  if (!key || ctx.pod.scheduler_name != planner_->scheduler_name()) return std::nullopt;
  const GangView g = ViewGang(ctx.state, key->first, key->second, planner_->config());
  if (g.group == nullptr) return std::nullopt;
  if (g.admitted()) {
    const core::Reservation* own = ctx.state.FindReservation(ctx.pod.uid.view());
    if (own != nullptr && !own->gang.empty()) {
      return NodeVerdict{.fit = Fit::kUnresolvable,
                         .reason = Reason::kGangReservedElsewhere,
                         .message = StrCat("berth: gang ", g.Key(),
                                           ": this member's room is reserved on node ",
                                           ctx.state.node(own->node).node.name,
                                           "; evicting pods does not place it")};
    }
    return NodeVerdict{.fit = Fit::kUnresolvable,
                       .reason = Reason::kGangElasticWaiting,
                       .message = StrCat("berth: gang ", g.Key(),
                                         ": an elastic member takes only free room; evicting "
                                         "pods does not place it")};
  }
  WhatIf whatif(ctx.state, ctx.now, ctx.pipeline);
  for (const Victim& v : proposal.victims) {
    if (v.known != nullptr) whatif.Evict(*v.known);
  }
  CycleContext with = ctx;
  with.whatif = &whatif;
  const EligibleFn eligible =
      ctx.pipeline != nullptr ? ctx.pipeline->Eligibility(ctx.state, ctx.now) : EligibleFn();
  const GangOutcome o = planner_->PlanAdmission(with, g, eligible);
  // A plan that needs more evictions is the gang planner's to carry out, for all members at once.
  if (o.plan && o.plan->victims.empty()) return std::nullopt;
  return NodeVerdict{.fit = Fit::kUnresolvable,
                     .reason = Reason::kGangNotPlaceable,
                     .message = StrCat("berth: gang ", g.Key(),
                                       ": preempting here does not let it start (", o.placeable,
                                       " of ", g.min_member,
                                       " members placeable with these victims gone)")};
}

bool GangModule::Review(const CycleContext& ctx, const core::NodeState& node,
                         NodeVictims* proposal, NodeVerdict* why) const {
  if (std::optional<NodeVerdict> short_of = PreemptorGangShort(ctx, *proposal)) {
    *why = *std::move(short_of);
    return false;
  }
  // Victims per gang, and what each gang would keep.
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_gang;
  for (size_t i = 0; i < proposal->victims.size(); ++i) {
    const Victim& v = proposal->victims[i];
    if (v.known == nullptr) continue;
    if (auto g = GangOf(v.known->pod)) {
      by_gang[{std::string(g->first), std::string(g->second)}].push_back(i);
    }
  }
  std::vector<size_t> spare;
  std::vector<const core::PodState*> add;
  std::string spared_gangs;
  for (const auto& [key, idx] : by_gang) {
    GangView g = ViewGang(ctx.state, key.first, key.second, planner_->config());
    // What the gang keeps running (room reserved for members not started does not count).
    const int running = g.running();
    const int keep = running - static_cast<int>(idx.size());
    if (g.group == nullptr || keep >= g.min_member) continue;  // elastic members only
    const bool all_here = std::all_of(g.bound.begin(), g.bound.end(), [&](const core::PodState* p) {
      return p->counted_on == node.slot;
    }) && g.reserved.empty();
    if (all_here) {
      // The whole gang is on this node: take all of it.
      for (const core::PodState* p : g.bound) {
        const bool listed = std::any_of(proposal->victims.begin(), proposal->victims.end(),
                                        [&](const Victim& v) { return v.known == p; });
        if (!listed) add.push_back(p);
      }
      continue;
    }
    // Spare members down to the gang's minimum: keep only its elastic members as victims.
    const int elastic = std::max(0, running - g.min_member);
    for (size_t j = static_cast<size_t>(elastic); j < idx.size(); ++j) spare.push_back(idx[j]);
    StrAppend(&spared_gangs, spared_gangs.empty() ? "" : ", ", g.Key());
  }
  for (const core::PodState* p : add) {
    proposal->victims.push_back(Victim{.uid = p->pod.uid.str(), .priority = p->pod.priority,
                                       .known = p});
  }
  if (spare.empty()) return true;
  std::sort(spare.rbegin(), spare.rend());
  for (size_t i : spare) proposal->victims.erase(proposal->victims.begin() + static_cast<long>(i));
  // Elastic members on this node go before anyone's minimum: add them while the room is short.
  auto freed_enough = [&] {
    core::ResourceVector freed;
    for (const Victim& v : proposal->victims) {
      if (v.known != nullptr && v.known->counted_on == node.slot) freed.Add(v.known->pod.request);
    }
    return CheckFit(ctx.state.resources(), ctx.pod.request, node, &freed, Words::kNone).ok();
  };
  if (!freed_enough()) {
    for (core::PodSlot slot : node.pods) {
      if (freed_enough()) break;
      const core::PodState& p = ctx.state.pod(slot);
      auto g = GangOf(p.pod);
      if (!g || p.pod.terminating || p.pod.scheduler_name != planner_->scheduler_name() ||
          p.pod.priority >= ctx.pod.priority || p.pod.priority >= kProductionPriority) {
        continue;
      }
      if (std::any_of(proposal->victims.begin(), proposal->victims.end(),
                      [&](const Victim& v) { return v.known == &p; })) {
        continue;
      }
      GangView gv = ViewGang(ctx.state, g->first, g->second, planner_->config());
      int already = 0;
      for (const Victim& v : proposal->victims) {
        if (v.known != nullptr) {
          if (auto vg = GangOf(v.known->pod); vg && vg->first == g->first && vg->second == g->second) ++already;
        }
      }
      if (gv.group == nullptr || gv.running() - already - 1 < gv.min_member) continue;
      proposal->victims.push_back(Victim{.uid = p.pod.uid.str(), .priority = p.pod.priority,
                                         .known = &p});
    }
  }
  if (!proposal->victims.empty() && freed_enough()) return true;
  *why = NodeVerdict{.fit = Fit::kUnresolvable,
                     .reason = Reason::kGangMinimum,
                     .message = StrCat("berth: preemption would leave gang ", spared_gangs,
                                       " below its minMember"),
                     .detail = {}};
  return false;
}

absl::StatusOr<GangConfig> ParseGangSettings(const Settings& section) {
  if (absl::Status s = CheckKeys(section, {"scheduleTimeoutSeconds", "freezeWindowSeconds",
                                           "releaseIncomplete"});
      !s.ok()) {
    return s;
  }
  GangConfig out;
  if (absl::Status s = ReadSeconds(section, "scheduleTimeoutSeconds", 0.1, 86400,
                                   &out.schedule_timeout);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadSecondsOrZero(section, "freezeWindowSeconds", 0.1, 86400,
                                         &out.freeze_window);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadBool(section, "releaseIncomplete", &out.release_incomplete); !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace berth::policy
