#include "policy/pipeline.h"

#include <algorithm>
#include <optional>

#include "core/placement.h"
#include "core/strings.h"

namespace berth::policy {

NodeVerdict UnknownNodeVerdict() {
  return NodeVerdict{.fit = Fit::kUnschedulable,
                     .reason = Reason::kUnknownNode,
                     .message = "unknown node",
                     .detail = "berth's model has no node of this name"};
}

Pipeline::Pipeline(std::vector<std::unique_ptr<AdmissionPolicyInterface>> admission,
                   std::vector<std::unique_ptr<FilterPolicyInterface>> filters,
                   std::vector<WeightedScore> scores,
                   std::vector<std::unique_ptr<PreemptPolicyInterface>> preempt,
                   std::vector<std::unique_ptr<OrderPolicyInterface>> order,
                   std::vector<std::unique_ptr<ReclaimPolicyInterface>> reclaim,
                   std::shared_ptr<const GangPlanner> gangs,
                   std::shared_ptr<FairShare> fair_share)
    : admission_(std::move(admission)),
      filters_(std::move(filters)),
      scores_(std::move(scores)),
      preempt_(std::move(preempt)),
      order_(std::move(order)),
      reclaim_(std::move(reclaim)),
      gangs_(std::move(gangs)),
      fair_share_(std::move(fair_share)) {
  for (const WeightedScore& s : scores_) total_weight_ += s.weight;
}

CycleContext Pipeline::Own(const CycleContext& ctx) const {
  CycleContext c = ctx;
  c.pipeline = this;
  return c;
}

NodeVerdict Pipeline::Admit(const CycleContext& in) const {
  const CycleContext ctx = Own(in);
  for (const auto& a : admission_) {
    NodeVerdict v = a->Admit(ctx);
    if (!v.ok()) return v;
  }
  return NodeVerdict::Ok();
}

NodeVerdict Pipeline::FilterNode(const CycleContext& in, const core::NodeState& node) const {
  // Called once per candidate node: the context is copied only when it does not name this
  // pipeline yet (Filter's own context does).
  std::optional<CycleContext> owned;
  if (in.pipeline != this) owned.emplace(Own(in));
  const CycleContext& ctx = owned ? *owned : in;
  for (const auto& f : filters_) {
    NodeVerdict v = f->Filter(ctx, node);
    if (!v.ok()) return v;
  }
  return NodeVerdict::Ok();
}

std::vector<NodeVerdict> Pipeline::Filter(const CycleContext& ctx,
                                          std::span<const std::string_view> candidates) const {
  std::vector<NodeVerdict> out(candidates.size());
  CycleMemo memo;
  CycleContext cycle = Own(ctx);
  if (cycle.memo == nullptr) cycle.memo = &memo;
  NodeVerdict admitted = Admit(cycle);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const core::NodeState* node = cycle.state.FindNode(candidates[i]);
    if (node == nullptr) {
      out[i] = UnknownNodeVerdict();
    } else if (!admitted.ok()) {
      out[i] = admitted;
    } else {
      out[i] = FilterNode(cycle, *node);
    }
  }
  return out;
}

std::optional<ReclaimPlan> Pipeline::PlanReclaim(const CycleContext& in) const {
  const CycleContext ctx = Own(in);
  if (reclaim_.empty() || !Admit(ctx).ok()) return std::nullopt;
  for (const auto& r : reclaim_) {
    if (std::optional<ReclaimPlan> plan = r->Plan(ctx)) return plan;
  }
  return std::nullopt;
}

std::vector<const core::PodState*> Pipeline::ReclaimCandidates(const CycleContext& in,
                                                                const core::NodeState& node) const {
  const CycleContext ctx = Own(in);
  std::vector<const core::PodState*> out;
  for (const auto& r : reclaim_) {
    for (const core::PodState* p : r->Candidates(ctx, node)) {
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  }
  return out;
}

namespace {

// Rounded weighted mean of the modules that apply; stays in [0, kMaxScore] because each term
// does.
int64_t WeightedMean(const std::vector<Pipeline::WeightedScore>& scores,
                     const std::vector<char>& applies, const CycleContext& ctx,
                     const core::NodeState& node) {
  int64_t sum = 0, weight = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!applies[i]) continue;
    sum += std::clamp<int64_t>(scores[i].policy->Score(ctx, node), 0, kMaxScore) * scores[i].weight;
    weight += scores[i].weight;
  }
  return weight <= 0 ? 0 : (sum + weight / 2) / weight;
}

std::vector<char> Applying(const std::vector<Pipeline::WeightedScore>& scores,
                           const CycleContext& ctx) {
  std::vector<char> applies(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) applies[i] = scores[i].policy->Applies(ctx) ? 1 : 0;
  return applies;
}

}  // namespace

int64_t Pipeline::ScoreNode(const CycleContext& in, const core::NodeState& node) const {
  if (total_weight_ <= 0) return 0;
  const CycleContext ctx = Own(in);
  return WeightedMean(scores_, Applying(scores_, ctx), ctx, node);
}

std::vector<int64_t> Pipeline::Score(const CycleContext& ctx,
                                     std::span<const std::string_view> candidates) const {
  std::vector<int64_t> out(candidates.size(), 0);
  if (total_weight_ <= 0) return out;
  CycleMemo memo;
  CycleContext cycle = Own(ctx);
  if (cycle.memo == nullptr) cycle.memo = &memo;
  const std::vector<char> applies = Applying(scores_, cycle);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (const core::NodeState* node = cycle.state.FindNode(candidates[i])) {
      out[i] = WeightedMean(scores_, applies, cycle, *node);
    }
  }
  return out;
}

EligibleFn Pipeline::Eligibility(const core::ClusterState& state, absl::Time now) const {
  return [this, &state, now](const core::Pod& pod, const core::NodeState& node) {
    if (!core::PlacementAllows(pod, node.node)) return false;
    const CycleContext ctx{.state = state,
                           .pod = pod,
                           .now = now,
                           .explain = false,
                           .reclaim_blocked = true,
                           .planning = true,
                           .pipeline = this};
    return FilterNode(ctx, node).ok();
  };
}

std::vector<NodeVictims> Pipeline::Preempt(
    const CycleContext& in, std::vector<NodeVictims> proposal,
    std::vector<std::pair<std::string, NodeVerdict>>* dropped) const {
  const CycleContext ctx = Own(in);
  std::vector<NodeVictims> kept;
  kept.reserve(proposal.size());
  auto drop = [&](std::string node, NodeVerdict why) {
    if (dropped != nullptr) dropped->emplace_back(std::move(node), std::move(why));
  };
  for (NodeVictims& nv : proposal) {
    const core::NodeState* node = ctx.state.FindNode(nv.node);
    if (node == nullptr) {
      drop(std::move(nv.node), UnknownNodeVerdict());
      continue;
    }
    bool keep = true;
    for (const auto& p : preempt_) {
      NodeVerdict why;
      if (!p->Review(ctx, *node, &nv, &why)) {
        drop(nv.node, std::move(why));
        keep = false;
        break;
      }
    }
    if (!keep) continue;
    if (nv.victims.empty()) {
      drop(std::move(nv.node), NodeVerdict{.fit = Fit::kUnresolvable,
                                           .reason = Reason::kPreemptionNotHelpful,
                                           .message = "no victim on this node",
                                           .detail = "kube-scheduler rejects empty victim lists"});
      continue;
    }
    std::stable_sort(nv.victims.begin(), nv.victims.end(),
                     [](const Victim& a, const Victim& b) { return a.priority > b.priority; });
    kept.push_back(std::move(nv));
  }
  return kept;
}

std::vector<std::string> Pipeline::Describe() const {
  std::vector<std::string> out;
  for (const auto& a : admission_) out.push_back(StrCat("admission:", a->Name()));
  for (const auto& f : filters_) out.push_back(StrCat("filter:", f->Name()));
  for (const auto& s : scores_) out.push_back(StrCat("score:", s.policy->Name(), "*", s.weight));
  for (const auto& p : preempt_) out.push_back(StrCat("preempt:", p->Name()));
  for (const auto& o : order_) out.push_back(StrCat("order:", o->Name()));
  for (const auto& r : reclaim_) out.push_back(StrCat("reclaim:", r->Name()));
  return out;
}

}  // namespace berth::policy
