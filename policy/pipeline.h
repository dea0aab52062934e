#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "policy/gang/gang.h"
#include "policy/policy.h"
#include "policy/queue/queue.h"

namespace berth::policy {

/// The nodes of the candidates that passed the last Filter, so that the prioritize call that
/// follows it need not look each name up again: kube-scheduler sends an extender's prioritize
/// exactly the names its filter let through, in the order it answered them. Recall checks every
/// name against the remembered one (a prioritize of other names, or of another pod, looks its
/// names up as before), and slots are trusted only in the same state object (its instance())
/// at the same node_labels_generation (no node added, removed or relabelled since).
///
/// With scores (filterAnswer "best"), the nodes remembered are the passing ones with the best
/// score, and that score too: the prioritize that follows names exactly them, and while the
/// model is at the same generation and the pod is the same, each one's score is still that
/// one (RecallScored). Thread-safe.
class PassedCandidates {
 public:
  /// Remembers the candidates of `pod` whose verdict is ok and, with `scores`, whose score is
  /// the best of those (what a "best" filter answer names), with their nodes (`nodes[i]` for
  /// `names[i]`).
  void Remember(const core::ClusterState& state, const core::Pod& pod,
                std::span<const std::string_view> names,
                std::span<const core::NodeState* const> nodes,
                std::span<const NodeVerdict> verdicts, const std::vector<int64_t>* scores = nullptr);
  /// out[i]: the node of `names[i]`, when `names` are exactly the candidates remembered for pod
  /// `uid` in `state`. \return false (out untouched) otherwise.
  bool Recall(const core::ClusterState& state, std::string_view uid,
              std::span<const std::string_view> names, const core::NodeState** out) const;
  /// Recall, and `*score`: the score every node named had when remembered. Only when Remember
  /// had scores, `pod` equals the pod remembered (every field), and `state` is the same state
  /// object at the same generation (nothing in the model changed since). \return false
  /// (out and score untouched) otherwise.
  bool RecallScored(const core::ClusterState& state, const core::Pod& pod,
                    std::span<const std::string_view> names, const core::NodeState** out,
                    int64_t* score) const;

 private:
  bool RecallLocked(const core::ClusterState& state, std::string_view uid,
                    std::span<const std::string_view> names, const core::NodeState** out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t instance_ ABSL_GUARDED_BY(mu_) = 0;  ///< the state's instance(); 0 is none
  uint64_t node_labels_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string uid_ ABSL_GUARDED_BY(mu_);
  std::string names_ ABSL_GUARDED_BY(mu_);     ///< the names, one after another
  std::vector<uint32_t> ends_ ABSL_GUARDED_BY(mu_);  ///< where each name ends in names_
  std::vector<core::NodeSlot> slots_ ABSL_GUARDED_BY(mu_);
  /// With scores: the best one, the pod and the model's generation they were computed for.
  std::optional<int64_t> best_ ABSL_GUARDED_BY(mu_);
  core::Pod pod_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

/// The modules placed at each extension point (policy.h), and how their answers combine:
/// - PreFilter: every module must let the pod through (AND); the first refusal is the verdict
///   of every node;
/// - Filter: per node, modules in configured order; the first non-fit verdict wins (AND);
/// - PostFilter: the first module that plans a reclaim for the pod wins;
/// - Score: weighted mean of the score modules, rounded, in [0, kMaxScore];
/// - PreemptionReview: each module reviews the proposal in turn and may shrink, grow or drop it;
/// - Permit: at bind, the PreFilter modules without a Permit of their own, then every Permit
///   module; the first refusal wins;
/// - Reserve / Unreserve: every module, in order (Unreserve in reverse order).
/// One module instance may sit at several points (the registry places it); the pipeline owns it.
class Pipeline {
 public:
  struct WeightedScore {
    std::shared_ptr<ScorePlugin> policy;
    int64_t weight;
  };
  /// The modules at each point, in configured order.
  struct Points {
    std::vector<std::shared_ptr<PreFilterPlugin>> prefilter;
    std::vector<std::shared_ptr<FilterPlugin>> filter;
    std::vector<std::shared_ptr<PostFilterPlugin>> postfilter;
    std::vector<std::shared_ptr<PreemptionReviewPlugin>> review;
    std::vector<WeightedScore> score;
    std::vector<std::shared_ptr<PermitPlugin>> permit;
    std::vector<std::shared_ptr<ReservePlugin>> reserve;
    std::vector<std::shared_ptr<QueueSortPlugin>> queue_sort;
  };

  explicit Pipeline(Points points, std::shared_ptr<const GangPlanner> gangs = nullptr,
                    std::shared_ptr<FairShare> fair_share = nullptr);

  /// PreFilter: the pod-level gate. kFit when every PreFilter module agrees.
  NodeVerdict PreFilter(const CycleContext& ctx) const;

  /// Filter: the verdict of one node (call PreFilter first).
  NodeVerdict FilterNode(const CycleContext& ctx, const core::NodeState& node) const;

  /// PreFilter, then Filter for candidate node names, in input order. Unknown nodes get
  /// kUnknownNode. With `scores`, each node that passes is also scored as Score would score it
  /// (its own context and cycle state), in the same pass while its state is in cache; the
  /// others get 0. The caller then answers only the best-scoring nodes that pass (filterAnswer
  /// "best"), so only those are remembered for the Score that follows. With `ctx.messages`
  /// off, only the first verdict of each reason carries its message.
  std::vector<NodeVerdict> Filter(const CycleContext& ctx, std::span<const std::string_view> candidates,
                                  std::vector<int64_t>* scores = nullptr) const;

  /// Score: combined score of one node that passed the filters.
  int64_t ScoreNode(const CycleContext& ctx, const core::NodeState& node) const;

  /// Scores for candidate node names, in input order; unknown nodes score 0.
  std::vector<int64_t> Score(const CycleContext& ctx,
                             std::span<const std::string_view> candidates) const;

  /// PreemptionReview: reviews a preemption proposal. Nodes berth does not know, nodes a module
  /// drops and nodes left with no victim are removed (kube-scheduler rejects an empty victim
  /// list). Victims are returned highest priority first, as kube-scheduler expects.
  /// \param dropped if not null, receives (node, why) for every removed node.
  std::vector<NodeVictims> ReviewPreemption(
      const CycleContext& ctx, std::vector<NodeVictims> proposal,
      std::vector<std::pair<std::string, NodeVerdict>>* dropped = nullptr) const;

  /// PostFilter: the first module's reclaim plan for a pod no candidate takes (nullopt: none
  /// reclaims, or the pod does not pass PreFilter).
  std::optional<ReclaimPlan> PostFilter(const CycleContext& ctx) const;

  /// The pods the PostFilter modules would let go on `node` for `ctx.pod` (empty when none is
  /// configured): what a gang plan may evict for all of its members at once.
  std::vector<const core::PodState*> ReclaimCandidates(const CycleContext& ctx,
                                                       const core::NodeState& node) const;

  /// Permit, at bind: the PreFilter modules that have no Permit, then the Permit modules.
  NodeVerdict Permit(const CycleContext& ctx, const core::NodeState& node) const;
  /// Reserve: a bind of `ctx.pod` on `node` was committed to the model.
  void Reserve(const CycleContext& ctx, const core::NodeState& node) const;
  /// Unreserve: that bind was rolled back (the binder failed).
  void Unreserve(const CycleContext& ctx, const core::NodeState& node) const;

  /// QueueSort modules, in order.
  const std::vector<std::shared_ptr<QueueSortPlugin>>& queue_sort() const {
    return points_.queue_sort;
  }

  /// The gang planner the gang modules share (nullptr when the pipeline was built without one).
  const GangPlanner* gangs() const { return gangs_.get(); }
  /// The fair-share book of the "queue" module (nullptr when it is not enabled).
  FairShare* fair_share() const { return fair_share_.get(); }
  /// Whether a pod may go on a node by every filter in planning mode (resources aside): what
  /// gang plans ask of each node.
  EligibleFn Eligibility(const core::ClusterState& state, absl::Time now) const;

  /// Module names per point ("prefilter:gang", "score:binpack*1"), for /debug and logs.
  std::vector<std::string> Describe() const;

 private:
  /// `ctx` with this pipeline as its `pipeline`.
  CycleContext Own(const CycleContext& ctx) const;
  /// After a Filter without messages: the first verdict of each reason is made again with its
  /// words (the message berth's Events quote), from the same cycle.
  void GiveFirstWords(const CycleContext& cycle, const NodeVerdict& admitted,
                      std::span<const core::NodeState* const> nodes, std::vector<NodeVerdict>& out) const;
  Points points_;
  int64_t total_weight_ = 0;
  /// PreFilter modules that answer at bind (those without a Permit of their own).
  std::vector<const PreFilterPlugin*> bind_prefilter_;
  std::shared_ptr<const GangPlanner> gangs_;
  std::shared_ptr<FairShare> fair_share_;
  /// What Filter let through, for the Score call that follows it.
  std::unique_ptr<PassedCandidates> passed_ = std::make_unique<PassedCandidates>();
};

/// The verdict for a node berth has never heard of.
NodeVerdict UnknownNodeVerdict();

}  // namespace berth::policy
