#include "policy/fit/resource_fit.h"

#include <algorithm>
#include <vector>

#include "core/strings.h"
#include "core/checked_math.h"

namespace berth::policy {

namespace {

// The room for resource `id` on `node` counted as the pod's, and how much of it the what-if and
// `extra_free` add (negative: the what-if takes room).
struct PodRoom {
  int64_t have;
  int64_t freed;
};
// Inlined: FitOf asks it for every resource of every candidate.
[[gnu::always_inline]] inline PodRoom PodRoomOf(core::ResourceId id, const core::NodeState& node,
                                                const core::ResourceVector* extra_free,
                                                const WhatIf* whatif) {
  // Room the what-if frees on this node (evictions) or takes (placements), and room held for
  // this very pod: both count as the pod's.
  const int64_t base = node.FreeOf(id);
  int64_t freed = whatif != nullptr ? core::SaturatingSub(whatif->FreeOf(node, id), base) : 0;
  if (extra_free != nullptr) freed = core::SaturatingAdd(freed, extra_free->Get(id));
  return {core::SaturatingAdd(base, freed), freed};
}

}  // namespace

Fit FitOf(const core::ResourceVector& request, const core::NodeState& node,
          const core::ResourceVector* extra_free, const WhatIf* whatif) {
  Fit fit = Fit::kFit;
  for (size_t i = 0; i < request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = request.Get(id);
    if (want <= 0 || want <= PodRoomOf(id, node, extra_free, whatif).have) continue;
    if (want > node.AllocatableOf(id)) return Fit::kUnresolvable;
    fit = Fit::kUnschedulable;
  }
  return fit;
}

namespace {

// CheckFit's verdict once its fit (FitOf's) is known: the filter decides first and words only a
// failure, without deciding again.
NodeVerdict WordFit(const core::ResourceNames& names, const core::ResourceVector& request,
                    const core::NodeState& node, const core::ResourceVector* extra_free, Fit fit,
                    Words words, const WhatIf* whatif) {
  NodeVerdict v{.fit = fit};
  if (v.fit == Fit::kFit) return v;
  v.reason = v.fit == Fit::kUnresolvable ? Reason::kExceedsAllocatable : Reason::kInsufficientResource;
  if (words == Words::kNone) return v;
  std::string short_names;
  std::string requests;
  for (size_t i = 0; i < request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = request.Get(id);
    if (want <= 0) continue;
    const auto [have, freed] = PodRoomOf(id, node, extra_free, whatif);
    if (want <= have) continue;
    const int64_t alloc = node.AllocatableOf(id);
    const bool never = want > alloc;
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
  if (v.fit == Fit::kUnresolvable) {
    v.message = StrCat("berth: node too small for the pod's ", short_names, " (pod requests ", requests, ")");
  } else {
    v.message = StrCat("berth: insufficient ", short_names, " (pod requests ", requests, ")");
  }
  return v;
}

}  // namespace

NodeVerdict CheckFit(const core::ResourceNames& names, const core::ResourceVector& request,
                     const core::NodeState& node, const core::ResourceVector* extra_free,
                     Words words, const WhatIf* whatif) {
  // Whether it fits first, without a string: most checks are passes, and many callers ask only
  // whether.
  return WordFit(names, request, node, extra_free, FitOf(request, node, extra_free, whatif), words,
                 whatif);
}

bool ResourceFitModule::Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const {
  // Eligibility (planning without a what-if) leaves room to the planner's own count; a what-if
  // check counts it here, on the what-if's room.
  if (ctx.planning && ctx.whatif == nullptr) return true;
  if (!ctx.pod.unknown_requests.empty()) {
    *why = NodeVerdict{.fit = Fit::kUnresolvable, .reason = Reason::kResourceNotOffered};
    if (!ctx.messages) return false;
    std::string names;
    for (const auto& [name, amount] : ctx.pod.unknown_requests) {
      StrAppend(&names, names.empty() ? "" : ", ", name);
    }
    why->message = StrCat("berth: no node offers ", names);
    why->detail = StrCat("the pod requests ", names, ", which no node in berth's model advertises");
    return false;
  }
  const core::ResourceVector* own = ctx.state.OwnReservation(ctx.pod.uid, node);
  const Fit fit = FitOf(ctx.pod.request, node, own, ctx.whatif);
  if (fit == Fit::kFit) return true;
  *why = WordFit(ctx.state.resources(), ctx.pod.request, node, own, fit, ctx.words(), ctx.whatif);
  return false;
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
