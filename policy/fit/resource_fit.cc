#include "policy/fit/resource_fit.h"

#include <algorithm>
#include <vector>

#include "core/strings.h"
#include "core/checked_math.h"

namespace berth::policy {

NodeVerdict CheckFit(const core::ResourceNames& names, const core::ResourceVector& request,
                     const core::NodeState& node, const core::ResourceVector* extra_free,
                     Words words, const WhatIf* whatif) {
  NodeVerdict v;
  std::string short_names;
  std::string requests;
  for (size_t i = 0; i < request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = request.Get(id);
    if (want <= 0) continue;
    // Room the what-if frees on this node (evictions) or takes (placements), and room held for
    // this very pod: both count as the pod's.
    const int64_t base = node.FreeOf(id);
    int64_t freed = whatif != nullptr ? core::SaturatingSub(whatif->FreeOf(node, id), base) : 0;
    if (extra_free != nullptr) freed = core::SaturatingAdd(freed, extra_free->Get(id));
    const int64_t have = core::SaturatingAdd(base, freed);
    if (want <= have) continue;
    const int64_t alloc = node.AllocatableOf(id);
    const bool never = want > alloc;
    if (never) v.fit = Fit::kUnresolvable;
    if (v.fit != Fit::kUnresolvable) v.fit = Fit::kUnschedulable;
    if (words == Words::kNone) continue;
    StrAppend(&short_names, short_names.empty() ? "" : ", ", names.Name(id));
    StrAppend(&requests, requests.empty() ? "" : ", ",
                    core::FormatAmount(names, id, want), " ", names.Name(id));
    if (words != Words::kDetail) continue;
    StrAppend(&v.detail, v.detail.empty() ? "" : "; ", names.Name(id), ": requested ",
                    core::FormatAmount(names, id, want), ", free ",
                    core::FormatAmount(names, id, have), " (allocatable ",
                    core::FormatAmount(names, id, alloc), ", used ",
                    core::FormatAmount(names, id, node.requested.Get(id)), ", in-flight binds ",
                    core::FormatAmount(names, id, node.assumed.Get(id)),
                    node.reserved.Get(id) != 0
                        ? StrCat(", held for other pods ",
                                 core::FormatAmount(names, id, node.reserved.Get(id)))
                        : std::string(),
                    freed > 0 ? StrCat(", freed for this pod ", core::FormatAmount(names, id, freed))
                    : freed < 0
                        ? StrCat(", taken by the plan ", core::FormatAmount(names, id, -freed))
                        : std::string(),
                    ")",
                    never ? ": exceeds allocatable"
                          : StrCat(": short by ",
                                         core::FormatAmount(names, id,
                                                            core::SaturatingSub(want, have))));
  }
  if (v.fit == Fit::kFit) return v;
  if (words == Words::kNone) {
    v.reason = v.fit == Fit::kUnresolvable ? Reason::kExceedsAllocatable : Reason::kInsufficientResource;
    return v;
  }
  if (v.fit == Fit::kUnresolvable) {
    v.reason = Reason::kExceedsAllocatable;
    v.message = StrCat("berth: node too small for the pod's ", short_names,
                             " (pod requests ", requests, ")");
  } else {
    v.reason = Reason::kInsufficientResource;
    v.message = StrCat("berth: insufficient ", short_names, " (pod requests ", requests, ")");
  }
  return v;
}

NodeVerdict ResourceFitModule::Filter(const CycleContext& ctx, const core::NodeState& node) const {
  // Eligibility (planning without a what-if) leaves room to the planner's own count; a what-if
  // check counts it here, on the what-if's room.
  if (ctx.planning && ctx.whatif == nullptr) return NodeVerdict::Ok();
  if (!ctx.pod.unknown_requests.empty()) {
    if (!ctx.messages) return NodeVerdict{.fit = Fit::kUnresolvable, .reason = Reason::kResourceNotOffered};
    std::string names;
    for (const auto& [name, amount] : ctx.pod.unknown_requests) {
      StrAppend(&names, names.empty() ? "" : ", ", name);
    }
    return NodeVerdict{.fit = Fit::kUnresolvable,
                       .reason = Reason::kResourceNotOffered,
                       .message = StrCat("berth: no node offers ", names),
                       .detail = StrCat("the pod requests ", names,
                                        ", which no node in berth's model advertises")};
  }
  return CheckFit(ctx.state.resources(), ctx.pod.request, node,
                  ctx.state.OwnReservation(ctx.pod.uid, node), ctx.words(), ctx.whatif);
}

bool ResourceFitModule::Review(const CycleContext& ctx, const core::NodeState& node,
                                NodeVictims* proposal, NodeVerdict* why) const {
  WhatIf whatif(ctx.state, ctx.now, ctx.pipeline);
  for (const Victim& v : proposal->victims) {
    // Only pods berth counts on this node free room in berth's accounting.
    if (v.known != nullptr && v.known->counted_on == node.slot) whatif.Evict(*v.known);
  }
  NodeVerdict fit = whatif.Check(ctx.pod, node, /*as_plan=*/true, ctx.words());
  if (fit.ok()) return true;
  *why = NodeVerdict{.fit = Fit::kUnresolvable,
                     .reason = Reason::kPreemptionNotHelpful,
                     .message = "berth: evicting the proposed victims would not make room",
                     .detail = fit.detail.empty() ? fit.message : fit.detail};
  return false;
}

}  // namespace berth::policy
