#include "policy/whatif.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/placement.h"
#include "policy/fit/resource_fit.h"
#include "policy/pipeline.h"

namespace berth::policy {

WhatIf::WhatIf(const core::ClusterState& state, absl::Time now, const Pipeline* pipeline)
    : state_(state), now_(now), pipeline_(pipeline) {}

core::ResourceVector& WhatIf::Delta(core::NodeSlot slot) {
  if (slot >= delta_.size()) {
    delta_.resize(slot + 1);
    touched_.resize(slot + 1, 0);
  }
  touched_[slot] = 1;
  return delta_[slot];
}

int64_t WhatIf::FreeOf(const core::NodeState& node, core::ResourceId id) const {
  const int64_t base = node.FreeOf(id);
  if (node.slot >= touched_.size() || !touched_[node.slot]) return base;
  return core::SaturatingAdd(base, delta_[node.slot].Get(id));
}

core::ResourceVector WhatIf::Free(const core::NodeState& node) const {
  core::ResourceVector free = node.Free();
  if (node.slot < touched_.size() && touched_[node.slot]) free.Add(delta_[node.slot]);
  return free;
}

NodeVerdict WhatIf::Check(const core::Pod& pod, const core::NodeState& node, bool as_plan,
                          Words words) const {
  if (!node.present) {
    return NodeVerdict{.fit = Fit::kUnschedulable,
                       .reason = Reason::kUnknownNode,
                       .message = "unknown node"};
  }
  if (!core::PlacementAllows(pod, node.node)) {
    if (words == Words::kNone) return NodeVerdict{.fit = Fit::kUnresolvable, .reason = Reason::kNodeConstraint};
    std::string why;
    core::PlacementAllows(pod, node.node, &why);
    return NodeVerdict{.fit = Fit::kUnresolvable,
                       .reason = Reason::kNodeConstraint,
                       .message = StrCat("berth: ", why)};
  }
  const CycleContext ctx{.state = state_,
                         .pod = pod,
                         .now = now_,
                         .explain = words == Words::kDetail,
                         .messages = words != Words::kNone,
                         .reclaim_blocked = as_plan,
                         .planning = as_plan,
                         .whatif = this};
  if (pipeline_ == nullptr) {
    return CheckFit(state_.resources(), pod.request, node, state_.OwnReservation(pod.uid, node),
                    words, this);
  }
  if (!as_plan) {
    // A bind: the pod-level gates as bind asks them (PreFilter modules, and Permit in place of
    // the PreFilter of a module that has one: the gang barrier).
    if (NodeVerdict v = pipeline_->Permit(ctx, node); !v.ok()) return v;
  }
  return pipeline_->FilterNode(ctx, node);
}

void WhatIf::Apply(const Op& op, int sign) {
  const core::PodState& p = *op.pod;
  if (op.kind == Op::Kind::kEvict) {
    core::ResourceVector& d = Delta(op.node);
    if (sign > 0) d.Add(p.pod.request); else d.Sub(p.pod.request);
    return;
  }
  // A placement releases room held for the pod (wherever it is) and takes its request.
  if (const core::Reservation* r = state_.FindReservation(p.pod.uid.view())) {
    core::ResourceVector& held = Delta(r->node);
    if (sign > 0) held.Add(r->request); else held.Sub(r->request);
  }
  core::ResourceVector& d = Delta(op.node);
  if (sign > 0) d.Sub(p.pod.request); else d.Add(p.pod.request);
}

void WhatIf::Place(const core::PodState& pod, core::NodeSlot node) {
  const Op op{.kind = Op::Kind::kPlace, .pod = &pod, .node = node};
  Apply(op, +1);
  ops_.push_back(op);
}

void WhatIf::Evict(const core::PodState& victim) {
  if (victim.counted_on == core::kNoNode) return;
  if (!evicted_.insert(victim.pod.uid.str()).second) return;
  const Op op{.kind = Op::Kind::kEvict, .pod = &victim, .node = victim.counted_on};
  Apply(op, +1);
  ops_.push_back(op);
}

core::NodeSlot WhatIf::PlacedOn(std::string_view uid) const {
  for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
    if (it->kind == Op::Kind::kPlace && it->pod->pod.uid.view() == uid) return it->node;
  }
  return core::kNoNode;
}

void WhatIf::Rollback(size_t mark) {
  while (ops_.size() > mark) {
    const Op op = ops_.back();
    ops_.pop_back();
    Apply(op, -1);
    if (op.kind == Op::Kind::kEvict) evicted_.erase(op.pod->pod.uid.view());
  }
}

std::vector<const core::PodState*> WhatIf::Evictions() const {
  std::vector<const core::PodState*> out;
  for (const Op& op : ops_) {
    if (op.kind == Op::Kind::kEvict) out.push_back(op.pod);
  }
  return out;
}

std::vector<WhatIf::Op> WhatIf::Placements() const {
  std::vector<Op> out;
  for (const Op& op : ops_) {
    if (op.kind == Op::Kind::kPlace) out.push_back(op);
  }
  return out;
}

}  // namespace berth::policy
