#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/gang/gang.h"
#include "policy/policy.h"
#include "policy/queue/queue.h"

namespace berth::policy {

/// Runs the enabled modules for each verb and combines their answers:
/// - admission: every admission module must let the pod through (AND); the first refusal is
///   the verdict of every node;
/// - filter: per node, modules in configured order; the first non-fit verdict wins (AND);
/// - score: weighted mean of the score modules, rounded, in [0, kMaxScore];
/// - preempt: each module reviews the proposal in turn and may shrink, grow or drop it.
class Pipeline {
 public:
  struct WeightedScore {
    std::unique_ptr<ScorePolicyInterface> policy;
    int64_t weight;
  };

  Pipeline(std::vector<std::unique_ptr<AdmissionPolicyInterface>> admission,
           std::vector<std::unique_ptr<FilterPolicyInterface>> filters,
           std::vector<WeightedScore> scores,
           std::vector<std::unique_ptr<PreemptPolicyInterface>> preempt,
           std::vector<std::unique_ptr<OrderPolicyInterface>> order,
           std::vector<std::unique_ptr<ReclaimPolicyInterface>> reclaim = {},
           std::shared_ptr<const GangPlanner> gangs = nullptr,
           std::shared_ptr<FairShare> fair_share = nullptr);

  /// The pod-level gate. kFit when every admission module agrees.
  NodeVerdict Admit(const CycleContext& ctx) const;

  /// The verdict of one node (filters only; call Admit first).
  NodeVerdict FilterNode(const CycleContext& ctx, const core::NodeState& node) const;

  /// Verdicts for candidate node names, in input order. Unknown nodes get kUnknownNode.
  std::vector<NodeVerdict> Filter(const CycleContext& ctx,
                                  std::span<const std::string_view> candidates) const;

  /// Combined score of one node that passed the filters.
  int64_t ScoreNode(const CycleContext& ctx, const core::NodeState& node) const;

  /// Scores for candidate node names, in input order; unknown nodes score 0.
  std::vector<int64_t> Score(const CycleContext& ctx,
                             std::span<const std::string_view> candidates) const;

  /// Reviews a preemption proposal. Nodes berth does not know, nodes a module drops and nodes
  /// left with no victim are removed (kube-scheduler rejects an empty victim list). Victims are
  /// returned highest priority first, as kube-scheduler expects.
  /// \param dropped if not null, receives (node, why) for every removed node.
  std::vector<NodeVictims> Preempt(
      const CycleContext& ctx, std::vector<NodeVictims> proposal,
      std::vector<std::pair<std::string, NodeVerdict>>* dropped = nullptr) const;

  const std::vector<std::unique_ptr<OrderPolicyInterface>>& order() const { return order_; }

  /// The first reclaim module's plan for a pod no candidate takes (nullopt: none reclaims).
  std::optional<ReclaimPlan> PlanReclaim(const CycleContext& ctx) const;

  /// The pods the reclaim modules would let go on `node` for `ctx.pod` (empty when none is
  /// configured): what a gang plan may evict for all of its members at once.
  std::vector<const core::PodState*> ReclaimCandidates(const CycleContext& ctx,
                                                       const core::NodeState& node) const;

  /// The gang planner the gang modules share (nullptr when the pipeline was built without one).
  const GangPlanner* gangs() const { return gangs_.get(); }
  /// The fair-share book of the "queue" admission module (nullptr when it is not enabled).
  FairShare* fair_share() const { return fair_share_.get(); }
  /// Whether a pod may go on a node by every filter in planning mode (resources aside): what
  /// gang plans ask of each node.
  EligibleFn Eligibility(const core::ClusterState& state, absl::Time now) const;

  /// Module names per verb, for /debug and logs.
  std::vector<std::string> Describe() const;

 private:
  /// `ctx` with this pipeline as its `pipeline`.
  CycleContext Own(const CycleContext& ctx) const;
  std::vector<std::unique_ptr<AdmissionPolicyInterface>> admission_;
  std::vector<std::unique_ptr<FilterPolicyInterface>> filters_;
  std::vector<WeightedScore> scores_;
  int64_t total_weight_ = 0;
  std::vector<std::unique_ptr<PreemptPolicyInterface>> preempt_;
  std::vector<std::unique_ptr<OrderPolicyInterface>> order_;
  std::vector<std::unique_ptr<ReclaimPolicyInterface>> reclaim_;
  std::shared_ptr<const GangPlanner> gangs_;
  std::shared_ptr<FairShare> fair_share_;
};

/// The verdict for a node berth has never heard of.
NodeVerdict UnknownNodeVerdict();

}  // namespace berth::policy
