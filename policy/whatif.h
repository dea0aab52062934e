#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "policy/verdict.h"

namespace berth::policy {

class Pipeline;

/// The one what-if engine: one state of the model with tentative placements and evictions on
/// top, checked by the pipeline's own filter chain, that the caller then commits (turns into
/// reservations, evictions or a bind) or discards (Volcano's Statement).
///
/// Every rule that asks "what if this pod went there" asks it here: queue admission, gang
/// planning, elastic growth, pool reclaim, preemption review, explain's counterfactuals and
/// bind's check. There is no second fit check: planners may count room with arithmetic to prune
/// their search, but a placement they propose is accepted only when Check() says so, and Check
/// is the filter chain kube-scheduler's filter call gets, reading free room through the overlay.
///
/// Not thread-safe; one what-if belongs to one decision. It reads the state it was made from,
/// so it lives inside one ReadView (or snapshot) and never outlives it.
class WhatIf {
 public:
  /// \param pipeline whose filters Check runs; null checks resources and placement only (tests).
  WhatIf(const core::ClusterState& state, absl::Time now, const Pipeline* pipeline);

  const core::ClusterState& state() const { return state_; }
  absl::Time now() const { return now_; }
  const Pipeline* pipeline() const { return pipeline_; }
  /// The generation of the state the what-if reads; a commit checks it (or the generations of
  /// the nodes it touches) before applying.
  uint64_t generation() const { return state_.generation(); }

  /// Free room of `node` for one resource once the tentative operations are carried out.
  int64_t FreeOf(const core::NodeState& node, core::ResourceId id) const;
  /// Free room of every resource of `node`, likewise.
  core::ResourceVector Free(const core::NodeState& node) const;

  /// Whether `pod` may go on `node` once the tentative operations are carried out: every filter
  /// of the pipeline, reading room through this what-if. Gang filters stand aside when
  /// `as_plan` (a planner is choosing the member's node; its reservation is what is planned).
  /// `words`: what the verdict says besides its fit and reason (a planner asks only whether).
  NodeVerdict Check(const core::Pod& pod, const core::NodeState& node, bool as_plan = true,
                    Words words = Words::kNone) const;

  /// Places `pod` on `node` tentatively: the node loses the pod's request; room held for the pod
  /// elsewhere (a reservation) is given back, as a bind or a new reservation would release it.
  void Place(const core::PodState& pod, core::NodeSlot node);
  /// Evicts `victim` tentatively: its node gets its request back. A terminating pod counts as
  /// leaving (its room frees without an eviction); a pod not counted on a node (pending,
  /// binding) frees nothing; evicting a pod twice is a no-op.
  void Evict(const core::PodState& victim);
  bool Evicted(std::string_view uid) const { return evicted_.contains(uid); }
  /// The node `pod` was placed on by this what-if, or kNoNode.
  core::NodeSlot PlacedOn(std::string_view uid) const;

  /// A point to roll back to; Rollback(Mark()) discards every operation made since.
  size_t Mark() const { return ops_.size(); }
  void Rollback(size_t mark);

  /// The tentative operations, in the order they were made: what a commit carries out.
  struct Op {
    enum class Kind : uint8_t { kPlace, kEvict };
    Kind kind;
    const core::PodState* pod;
    core::NodeSlot node;  ///< placed on; for an eviction, the node it leaves
  };
  const std::vector<Op>& ops() const { return ops_; }
  std::vector<const core::PodState*> Evictions() const;
  std::vector<Op> Placements() const;

 private:
  void Apply(const Op& op, int sign);
  core::ResourceVector& Delta(core::NodeSlot slot);

  const core::ClusterState& state_;
  absl::Time now_;
  const Pipeline* pipeline_;
  std::vector<Op> ops_;
  /// Free room added (+) or taken (-) per node slot by the operations; sized on first use.
  std::vector<core::ResourceVector> delta_;
  std::vector<char> touched_;
  absl::flat_hash_set<std::string, StringHash, StringEq> evicted_;
};

}  // namespace berth::policy
