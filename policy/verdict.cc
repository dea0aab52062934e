#include "policy/verdict.h"

#include <array>

namespace berth::policy {

namespace {

struct ReasonText {
  Reason reason;
  std::string_view code;
  std::string_view summary;
};

// In the order of the enum, so a reason indexes its row (checked below).
constexpr std::array kReasonTexts = {
    ReasonText{Reason::kNone, "None", "berth: rejected"},
    ReasonText{Reason::kUnknownNode, "UnknownNode", "unknown node"},
    ReasonText{Reason::kInsufficientResource, "InsufficientResource",
               "berth: insufficient free resources"},
    ReasonText{Reason::kExceedsAllocatable, "ExceedsAllocatable", "berth: node too small for the pod"},
    ReasonText{Reason::kNodeConstraint, "NodeConstraint",
               "berth: node excluded by the pod's placement rules"},
    ReasonText{Reason::kPreemptionNotHelpful, "PreemptionNotHelpful",
               "berth: preemption would not help"},
    ReasonText{Reason::kResourceNotOffered, "ResourceNotOffered",
               "berth: requested resource not offered"},
    ReasonText{Reason::kUnknownPool, "UnknownPool", "berth: the pod's pool does not exist"},
    ReasonText{Reason::kHomePoolHasRoom, "HomePoolHasRoom", "berth: home pool has room"},
    ReasonText{Reason::kBorrowingDisabled, "BorrowingDisabled", "berth: home pool full, borrowing off"},
    ReasonText{Reason::kSharingDisabled, "SharingDisabled", "berth: node's pool does not lend"},
    ReasonText{Reason::kNotLenderPool, "NotLenderPool", "berth: another pool lends"},
    ReasonText{Reason::kPoolRule, "PoolRule", "berth: pool rules protect the victims"},
    ReasonText{Reason::kReclaiming, "Reclaiming", "berth: room being reclaimed"},
    ReasonText{Reason::kGpuReserved, "GpuReserved", "berth: room kept for free GPUs"},
    ReasonText{Reason::kCpuPerGpuTooLow, "CpuPerGpuTooLow", "berth: too little CPU per GPU"},
    ReasonText{Reason::kGangNoPodGroup, "GangNoPodGroup", "berth: gang's PodGroup missing"},
    ReasonText{Reason::kGangMembersMissing, "GangMembersMissing", "berth: gang members missing"},
    ReasonText{Reason::kGangNotPlaceable, "GangNotPlaceable", "berth: gang does not fit"},
    ReasonText{Reason::kGangMaxHops, "GangMaxHops", "berth: gang would exceed max-hops"},
    ReasonText{Reason::kGangReservedElsewhere, "GangReservedElsewhere",
               "berth: member's room is on another node"},
    ReasonText{Reason::kGangElasticWaiting, "GangElasticWaiting", "berth: elastic member waits"},
    ReasonText{Reason::kGangMinimum, "GangMinimum", "berth: gang would fall below minMember"},
    ReasonText{Reason::kQueueUnknown, "QueueUnknown", "berth: the pod's queue does not exist"},
    ReasonText{Reason::kQueueWaiting, "QueueWaiting", "berth: waiting in its queue"},
    ReasonText{Reason::kQueueBackfill, "QueueBackfill", "berth: room kept for the next job"},
    ReasonText{Reason::kQueueLimit, "QueueLimit", "berth: queue limit reached"},
    ReasonText{Reason::kQueueBudget, "QueueBudget", "berth: queue budget used up"},
};

constexpr bool InEnumOrder() {
  for (size_t i = 0; i < kReasonTexts.size(); ++i) {
    if (static_cast<size_t>(kReasonTexts[i].reason) != i) return false;
  }
  return kReasonTexts.back().reason == Reason::kQueueBudget;
}
static_assert(InEnumOrder(), "kReasonTexts must list every Reason, in the enum's order");

const ReasonText* TextOf(Reason reason) {
  const auto i = static_cast<size_t>(reason);
  return i < kReasonTexts.size() ? &kReasonTexts[i] : nullptr;
}

}  // namespace

std::string_view ReasonCode(Reason reason) {
  const ReasonText* t = TextOf(reason);
  return t != nullptr ? t->code : "Unknown";
}

std::string_view ReasonSummary(Reason reason) {
  const ReasonText* t = TextOf(reason);
  return t != nullptr ? t->summary : kReasonTexts[0].summary;
}

}  // namespace berth::policy
