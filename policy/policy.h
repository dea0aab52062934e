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

class Module;

/// Per-module state for one cycle (kube-scheduler's CycleState): values a module derives once per
/// decision about one pod rather than once per node (e.g. "does the pod's home pool have room
/// anywhere"), kept for the length of one verb call. Each module keeps its values under its own
/// address, typed: a value is found only under the type it was put with. One decision runs on
/// one thread, so it needs no lock.
class CycleState {
 public:
  /// The value `module` stored in this cycle, made by `make()` the first time.
  template <class T, class Make>
  const T& Get(const void* module, Make&& make) {
    if (const T* found = Find<T>(module)) return *found;
    return Put<T>(module, make());
  }
  /// Stores `value` as `module`'s value of type T, replacing one stored before.
  template <class T>
  const T& Put(const void* module, T value) {
    auto stored = std::make_shared<const T>(std::move(value));
    for (Entry& e : entries_) {
      if (e.module == module && e.type == TypeKey<T>()) {
        e.value = stored;
        return *stored;
      }
    }
    entries_.push_back({module, TypeKey<T>(), stored});
    return *stored;
  }
  /// `module`'s value of type T in this cycle, or null.
  template <class T>
  const T* Find(const void* module) const {
    for (const Entry& e : entries_) {
      if (e.module == module && e.type == TypeKey<T>()) return static_cast<const T*>(e.value.get());
    }
    return nullptr;
  }

 private:
  // One address per type: the key that keeps two types of one module apart.
  template <class T>
  static const void* TypeKey() {
    static const char key = 0;
    return &key;
  }
  struct Entry {
    const void* module;
    const void* type;
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
  /// Fill NodeVerdict::message on every verdict. Off, a filter gives a failing node its fit and
  /// reason only: kube-scheduler's short answers name the reason's summary (ReasonSummary), and
  /// a planner asks only whether a pod fits, so neither pays for words per rejected node (a
  /// busy cluster rejects most candidates). Pipeline::Filter then gives words to the first
  /// verdict of each reason alone, which is what berth's Events about waiting pods quote.
  bool messages = true;
  /// Per-module state of this cycle; null when the caller checks a single node (a module then
  /// computes what it needs for that call alone).
  CycleState* cycle = nullptr;
  /// A reclaim for this pod was tried in this cycle and could not evict (a disruption budget):
  /// the pod may borrow instead (seed 004: "if eviction fails, borrowing is allowed").
  bool reclaim_blocked = false;
  /// Planning mode: a gang plan asks whether the pod may go on a node by every rule except
  /// free room, which the planner accounts for itself (members it already placed take room
  /// the model does not show yet). Resource fit and the gang modules stand aside.
  bool planning = false;
  /// Why the pod's gang waits, when the caller has just planned it and found no room
  /// (the gang module's PreFilter answers with it instead of planning again).
  const NodeVerdict* gang_waiting = nullptr;
  /// The queue's verdict for the pod, when the caller has just asked the admission plan (the
  /// queue module's PreFilter answers with it instead of asking again).
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

  /// The words a verdict made in this context carries (explain implies the message).
  Words words() const { return explain ? Words::kDetail : messages ? Words::kMessage : Words::kNone; }

  int64_t FreeOf(const core::NodeState& node, core::ResourceId id) const {
    return whatif != nullptr ? whatif->FreeOf(node, id) : node.FreeOf(id);
  }
  core::ResourceVector Free(const core::NodeState& node) const {
    return whatif != nullptr ? whatif->Free(node) : node.Free();
  }
  /// Whether the what-if evicts pod `uid` (it no longer counts where it runs).
  bool Evicted(std::string_view uid) const { return whatif != nullptr && whatif->Evicted(uid); }
};

// ---- the extension points ---------------------------------------------------------------------
//
// berth's scheduling cycle, in the order kube-scheduler users know it (docs/architecture.md, "One
// pod through the cycle"). A module is one type that implements the points it needs, each an
// interface below; the registry builds it once and the pipeline places that one instance at
// every point the configuration lists it for:
//
//   point             configuration list    verb
//   PreFilter         policy.admission      filter (and bind, for modules without Permit)
//   Filter            policy.filters        filter, and every what-if check
//   PostFilter        policy.reclaim        filter, when no candidate fits (reclaim)
//   PreemptionReview  policy.preempt        preempt
//   Score             policy.scores         prioritize
//   Permit            policy.admission      bind (the gang barrier)
//   Reserve           policy.admission      bind committed / rolled back
//   QueueSort         policy.order          the admission order
//
// Permit and Reserve have no list of their own: a module listed in policy.admission that
// implements them is placed there too, in the same order.

/// The extension points, in cycle order.
enum class Point : uint8_t {
  kPreFilter,
  kFilter,
  kPostFilter,
  kPreemptionReview,
  kScore,
  kPermit,
  kReserve,
  kQueueSort,
};
inline constexpr size_t kPointCount = 8;
/// A set of points, one bit per Point.
using PointMask = uint32_t;
constexpr PointMask Bit(Point p) { return PointMask{1} << static_cast<unsigned>(p); }
/// The point as this file names it ("PreFilter").
std::string_view PointName(Point p);
/// "PreFilter, Filter" for the points of `mask`, in cycle order; "none" for none.
std::string PointNames(PointMask mask);

/// What every module is: a name the configuration refers to. A module type derives from the
/// interfaces of the points it implements (each derives virtually from Module, so a module has
/// one name whatever the number of its points).
class Module {
 public:
  virtual ~Module() = default;
  virtual std::string_view Name() const = 0;
};

/// PreFilter: a pod-level gate run before any node is filtered (gangs, queues and GPU rules
/// decide here whether a pod may be placed now at all). Also asked at bind, unless the module
/// implements Permit, which answers for it there.
class PreFilterPlugin : public virtual Module {
 public:
  /// \return kFit to let the pod through, or the reason it waits (applied to every node).
  virtual NodeVerdict PreFilter(const CycleContext& ctx) const = 0;
};

/// Filter: called once per candidate node; must be pure and thread-safe. Every what-if check
/// (gang plans, reclaim, preemption review, bind) runs the same chain.
class FilterPlugin : public virtual Module {
 public:
  /// Whether the pod may go on `node`. A pass leaves `*why` as it is (the caller's pass); a
  /// failure sets it to the first rule the node breaks for this pod, with the words
  /// `ctx.words()` asks for. Called for every candidate: a pass builds no verdict.
  virtual bool Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const = 0;
  /// Whether Filter passes every node for this pod in this cycle, so that a pass over many
  /// candidates leaves the module out (kube-scheduler's PreFilter "Skip" for a Filter plugin).
  /// Exact, never a guess: a module that cannot tell for the whole cycle says false.
  virtual bool Skips(const CycleContext& ctx) const {
    (void)ctx;
    return false;
  }
  /// The verdict alone: kFit, or the first rule the node breaks.
  NodeVerdict Verdict(const CycleContext& ctx, const core::NodeState& node) const {
    NodeVerdict v;
    Filter(ctx, node, &v);
    return v;
  }
};

/// Score: called only for nodes that passed every filter; pure and thread-safe.
class ScorePlugin : public virtual Module {
 public:
  /// Whether the module has an opinion on this pod; modules that do not are left out of the
  /// weighted mean (so a gang-only score does not flatten every other pod's ranking).
  virtual bool Applies(const CycleContext& ctx) const {
    (void)ctx;
    return true;
  }
  /// \return a score in [0, kMaxScore]; higher is better. A function of the pod and the model's
  /// state only (not of the time, nor of anything the module keeps): the prioritize that
  /// follows a "best" filter takes the filter's scores while the model's generation is the same
  /// (PassedCandidates::RecallScored).
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

/// PreemptionReview (the part of PostFilter kube-scheduler runs itself): reviews kube-scheduler's
/// preemption proposal for one node.
class PreemptionReviewPlugin : public virtual Module {
 public:
  /// May change `proposal->victims` (drop or add pods). \return false to drop the node as a
  /// preemption candidate, with the reason in `*why`.
  virtual bool Review(const CycleContext& ctx, const core::NodeState& node, NodeVictims* proposal,
                      NodeVerdict* why) const = 0;
};

/// A reclaim a module wants carried out: evict `victims` on `node` and hold room there for the
/// pod (SPEC 6.1). The pointers are into the state the plan was made from.
struct ReclaimPlan {
  std::string node;
  std::vector<const core::PodState*> victims;  ///< in eviction order, cheapest first
  /// Why, for the reservation, logs and events ("reclaim in pool gpu").
  std::string purpose;
};

/// PostFilter: makes room for a pod that no candidate node takes by evicting others (pool
/// reclaim). The framework carries the plan out: it holds the room for the pod, then records
/// the evictions of the victims.
class PostFilterPlugin : public virtual Module {
 public:
  ///\return the reclaim to carry out for `ctx.pod`, or nullopt when this module does not
  /// reclaim for it. Called only for berth's own pods that have no room held already.
  virtual std::optional<ReclaimPlan> PostFilter(const CycleContext& ctx) const = 0;
  /// The pods this module would let go on `node` to make room for `ctx.pod`, cheapest first:
  /// what a gang plan may evict for all of its members at once (pools x gangs).
  virtual std::vector<const core::PodState*> ReclaimCandidates(const CycleContext& ctx,
                                                               const core::NodeState& node) const {
    (void)ctx;
    (void)node;
    return {};
  }
};

/// Permit: the last word before a bind is committed, run at bind on the what-if of the bind
/// (kube-scheduler's Permit; berth answers at once, it never waits). The gang barrier: a gang
/// member is permitted only when its room was planned and reserved with the gang's minimum.
class PermitPlugin : public virtual Module {
 public:
  /// \return kFit to permit the bind, or why the pod may not bind now.
  virtual NodeVerdict Permit(const CycleContext& ctx, const core::NodeState& node) const = 0;
};

/// Reserve / Unreserve: told when a bind of `ctx.pod` on `node` is committed to the model
/// (Reserve) and when a committed bind is rolled back because the binder failed (Unreserve).
/// Both default to doing nothing: berth's model keeps the assumed pod itself (the bind ledger),
/// so a module implements them only to keep state of its own in step. Unreserve must be
/// idempotent and is called only after Reserve.
class ReservePlugin : public virtual Module {
 public:
  virtual void Reserve(const CycleContext& ctx, const core::NodeState& node) const {
    (void)ctx;
    (void)node;
  }
  virtual void Unreserve(const CycleContext& ctx, const core::NodeState& node) const {
    (void)ctx;
    (void)node;
  }
};

/// QueueSort: the order between pending pods (the admission order of queues and gangs).
class QueueSortPlugin : public virtual Module {
 public:
  /// \return true if `a` should be admitted before `b`.
  virtual bool Less(const core::ClusterState& state, const core::Pod& a,
                    const core::Pod& b) const = 0;
};

/// The points `module` implements.
PointMask PointsOf(const Module& module);

}  // namespace berth::policy
