#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "policy/policy.h"

namespace berth::policy {

/// Module "resource-fit": resource fit on berth's own accounting, at two points.
///
/// Filter: a node fits a pod when, for every resource the pod requests (cpu, memory, storage,
/// pods, hugepages and every extended resource such as nvidia.com/gpu), the node's allocatable
/// minus the requests of every pod bound to it (any scheduler) minus berth's in-flight binds
/// covers the request. A request larger than the node's allocatable is unresolvable (no eviction
/// can help); a request larger than the free room is unschedulable (preemption may help). The
/// message names every short resource, in resource-id order; the detail gives the per-node
/// numbers. A pod requesting a resource no node advertises is unresolvable everywhere.
///
/// PreemptionReview: keeps a preemption candidate only if, with the proposed victims evicted in
/// a what-if, the pipeline's filters accept the pod on the node (room on berth's accounting, and
/// every other rule with that room). kube-scheduler's dry run does not run extender filters, so
/// without this it could evict pods on a node berth would still reject (pods of other
/// schedulers and berth's in-flight binds are invisible to that dry run's victim choice).
class ResourceFitModule final : public FilterPlugin, public PreemptionReviewPlugin {
 public:
  std::string_view Name() const override { return "resource-fit"; }
  bool Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const override;
  bool Review(const CycleContext& ctx, const core::NodeState& node, NodeVictims* proposal,
              NodeVerdict* why) const override;
};

/// The resource-fit verdict for `request` on `node`: its free room (allocatable - requested -
/// in-flight binds - room held for pods) plus `extra_free` (room that evictions would free, or
/// room held for this very pod), if given. Only the
/// resources the pod requests are looked at, so a fit costs a few compares.
/// `words` says what the verdict of a node that does not fit says besides its fit and reason
/// (a caller that only asks whether the pod fits takes none, and no string is built).
/// `whatif`, when given, supplies the free room (tentative placements and evictions counted).
NodeVerdict CheckFit(const core::ResourceNames& names, const core::ResourceVector& request,
                     const core::NodeState& node, const core::ResourceVector* extra_free,
                     Words words, const WhatIf* whatif = nullptr);
/// CheckFit's fit alone.
Fit FitOf(const core::ResourceVector& request, const core::NodeState& node,
          const core::ResourceVector* extra_free, const WhatIf* whatif = nullptr);

/// How far a node is from fitting `want`: over the resources `want` asks for, the sum of the
/// fraction missing (0 when it fits; 2 when two resources are wholly missing). `have(id)` gives
/// the room for one resource (negative counts as none). What "the node closest to fitting"
/// means wherever berth picks one (the room kept for the next job, explain's counterfactuals).
template <class Have>
double MissingFraction(const core::ResourceVector& want, Have&& have) {
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t w = want.Get(id);
    if (w <= 0) continue;
    const int64_t h = std::max<int64_t>(have(id), 0);
    if (h < w) d += static_cast<double>(w - h) / static_cast<double>(w);
  }
  return d;
}

}  // namespace berth::policy
