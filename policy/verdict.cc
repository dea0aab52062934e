#include "policy/verdict.h"

namespace berth::policy {

std::string_view ReasonCode(Reason reason) {
  switch (reason) {
    case Reason::kNone: return "None";
    case Reason::kUnknownNode: return "UnknownNode";
    case Reason::kInsufficientResource: return "InsufficientResource";
    case Reason::kExceedsAllocatable: return "ExceedsAllocatable";
    case Reason::kNodeConstraint: return "NodeConstraint";
    case Reason::kPreemptionNotHelpful: return "PreemptionNotHelpful";
    case Reason::kResourceNotOffered: return "ResourceNotOffered";
    case Reason::kUnknownPool: return "UnknownPool";
    case Reason::kHomePoolHasRoom: return "HomePoolHasRoom";
    case Reason::kBorrowingDisabled: return "BorrowingDisabled";
    case Reason::kSharingDisabled: return "SharingDisabled";
    case Reason::kNotLenderPool: return "NotLenderPool";
    case Reason::kPoolRule: return "PoolRule";
    case Reason::kReclaiming: return "Reclaiming";
    case Reason::kGpuReserved: return "GpuReserved";
    case Reason::kCpuPerGpuTooLow: return "CpuPerGpuTooLow";
    case Reason::kGangNoPodGroup: return "GangNoPodGroup";
    case Reason::kGangMembersMissing: return "GangMembersMissing";
    case Reason::kGangNotPlaceable: return "GangNotPlaceable";
    case Reason::kGangMaxHops: return "GangMaxHops";
    case Reason::kGangReservedElsewhere: return "GangReservedElsewhere";
    case Reason::kGangElasticWaiting: return "GangElasticWaiting";
    case Reason::kGangMinimum: return "GangMinimum";
    case Reason::kQueueUnknown: return "QueueUnknown";
    case Reason::kQueueWaiting: return "QueueWaiting";
    case Reason::kQueueBackfill: return "QueueBackfill";
    case Reason::kQueueLimit: return "QueueLimit";
    case Reason::kQueueBudget: return "QueueBudget";
  }
  return "Unknown";
}

}  // namespace berth::policy
