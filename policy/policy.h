#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "policy/verdict.h"
#include "policy/whatif.h"

namespace berth::policy {

/// Values a module derives once per decision about one pod rather than once per node (e.g.
/// "does the pod's home pool have room anywhere"), kept for the length of one verb call. One
/// decision runs on one thread, so it needs no lock.
class CycleMemo {
 public:
  /// The value stored under `key` (a module's address) in this cycle, made by `make()` the
  /// first time.
  template <class T, class Make>
  const T& Get(const void* key, Make&& make) {
    for (const Entry& e : entries_) {
      if (e.key == key) return *static_cast<const T*>(e.value.get());
    }
    auto value = std::make_shared<const T>(make());
    entries_.push_back({key, value});
    return *value;
  }

 private:
  struct Entry {
    const void* key;
    std::shared_ptr<const void> value;
  };
  std::vector<Entry> entries_;
};

/// What every policy sees for one decision about one pod: the pod and one consistent view of the
/// cluster. Policies read only this; they never hold on to it after the call.
struct CycleContext {
  const core::ClusterState& state;
  const core::Pod& pod;
  absl::Time now;
  /// Fill NodeVerdict::detail (per-node numbers). The hot verbs turn it off: kube-scheduler
  /// only reads the node-independent message, and building hundreds of detail strings per call
  /// would cost more than the decision itself.
  bool explain = true;
  /// Per-decision memo; null when the caller checks a single node (a module then computes what
  /// it needs for that call alone).
  CycleMemo* memo = nullptr;
  /// A reclaim for this pod was tried in this cycle and could not evict (a disruption budget):
  /// the pod may borrow instead (seed 004: "if eviction fails, borrowing is allowed").
  bool reclaim_blocked = false;
  /// Planning mode: a gang plan asks whether the pod may go on a node by every rule except
  /// free room, which the planner accounts for itself (members it already placed take room
  /// the model does not show yet). Resource fit and the gang modules stand aside.
  bool planning = false;
  /// Why the pod's gang waits, when the caller has just planned it and found no room
  /// (the gang admission module answers with it instead of planning again).
  const NodeVerdict* gang_waiting = nullptr;
  /// The queue's verdict for the pod, when the caller has just asked the admission plan (the
  /// queue admission module answers with it instead of asking again).
  const NodeVerdict* queue_verdict = nullptr;
  /// A reader that must change nothing (GET endpoints): the queue module answers from the
  /// published admission plan instead of making one.
  bool read_only = false;
  /// Tentative placements and evictions the decision is made under (a planner's, a reclaim's,
  /// a preemption review's); null: the state as it is. Modules read free room through FreeOf
  /// and Free, never from the node directly, so that every what-if sees the same rules.
  const WhatIf* whatif = nullptr;
  /// The pipeline running the decision (set by the pipeline itself): what a module asks when it
  /// needs a what-if of its own (WhatIf(state, now, pipeline)).
  const Pipeline* pipeline = nullptr;

  int64_t FreeOf(const core::NodeState& node, core::ResourceId id) const {
    return whatif != nullptr ? whatif->FreeOf(node, id) : node.FreeOf(id);
  }
  core::ResourceVector Free(const core::NodeState& node) const {
    return whatif != nullptr ? whatif->Free(node) : node.Free();
  }
  /// Whether the what-if evicts pod `uid` (it no longer counts where it runs).
  bool Evicted(std::string_view uid) const { return whatif != nullptr && whatif->Evicted(uid); }
};

/// Per-node filter. Called once per candidate node; must be pure and thread-safe.
class FilterPolicyInterface {
 public:
  virtual ~FilterPolicyInterface() = default;
  virtual std::string_view Name() const = 0;
  /// \return kFit, or the first rule the node breaks for this pod.
  virtual NodeVerdict Filter(const CycleContext& ctx, const core::NodeState& node) const = 0;
};

/// Per-node score. Called only for nodes that passed every filter; pure and thread-safe.
class ScorePolicyInterface {
 public:
  virtual ~ScorePolicyInterface() = default;
  virtual std::string_view Name() const = 0;
  /// Whether the module has an opinion on this pod; modules that do not are left out of the
  /// weighted mean (so a gang-only score does not flatten every other pod's ranking).
  virtual bool Applies(const CycleContext& ctx) const {
    (void)ctx;
    return true;
  }
  /// \return a score in [0, kMaxScore]; higher is better.
  virtual int64_t Score(const CycleContext& ctx, const core::NodeState& node) const = 0;
};

/// One victim kube-scheduler proposes (or a policy adds) on one node.
struct Victim {
  std::string uid;
  int32_t priority = 0;
  /// The pod as berth's model holds it, or nullptr when berth does not know it.
  const core::PodState* known = nullptr;
};

/// The victims on one candidate node of a preemption.
struct NodeVictims {
  std::string node;
  std::vector<Victim> victims;
  int64_t pdb_violations = 0;
};

/// Reviews kube-scheduler's preemption proposal for one node.
class PreemptPolicyInterface {
 public:
  virtual ~PreemptPolicyInterface() = default;
  virtual std::string_view Name() const = 0;
  /// May change `proposal->victims` (drop or add pods). \return false to drop the node as a
  /// preemption candidate, with the reason in `*why`.
  virtual bool Review(const CycleContext& ctx, const core::NodeState& node, NodeVictims* proposal,
                      NodeVerdict* why) const = 0;
};

/// Pod-level gate run before any node is filtered: gangs, queues and pools decide here whether a
/// pod may be placed now at all.
class AdmissionPolicyInterface {
 public:
  virtual ~AdmissionPolicyInterface() = default;
  virtual std::string_view Name() const = 0;
  /// \return kFit to let the pod through, or the reason it waits (applied to every node).
  virtual NodeVerdict Admit(const CycleContext& ctx) const = 0;
};

/// A reclaim a module wants carried out: evict `victims` on `node` and hold room there for the
/// pod (SPEC 6.1). The pointers are into the state the plan was made from.
struct ReclaimPlan {
  std::string node;
  std::vector<const core::PodState*> victims;  ///< in eviction order, cheapest first
  /// Why, for the reservation, logs and events ("reclaim in pool gpu").
  std::string purpose;
};

/// Makes room for a pod that no candidate node takes by evicting others (pool reclaim). The
/// extender carries the plan out: it holds the room for the pod, then evicts the victims.
class ReclaimPolicyInterface {
 public:
  virtual ~ReclaimPolicyInterface() = default;
  virtual std::string_view Name() const = 0;
  ///\return the reclaim to carry out for `ctx.pod`, or nullopt when this module does not
  /// reclaim for it. Called only for berth's own pods that have no room held already.
  virtual std::optional<ReclaimPlan> Plan(const CycleContext& ctx) const = 0;
  /// The pods this module would let go on `node` to make room for `ctx.pod`, cheapest first:
  /// what a gang plan may evict for all of its members at once (pools x gangs).
  virtual std::vector<const core::PodState*> Candidates(const CycleContext& ctx,
                                                        const core::NodeState& node) const {
    (void)ctx;
    (void)node;
    return {};
  }
};

/// Order between pending pods (the admission order of queues and gangs).
class OrderPolicyInterface {
 public:
  virtual ~OrderPolicyInterface() = default;
  virtual std::string_view Name() const = 0;
  /// \return true if `a` should be admitted before `b`.
  virtual bool Less(const core::ClusterState& state, const core::Pod& a,
                    const core::Pod& b) const = 0;
};

}  // namespace berth::policy
