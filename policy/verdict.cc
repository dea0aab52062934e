#include "policy/verdict.h"

namespace berth::policy {

std::string_view ReasonCode(Reason reason) {
  switch (reason) {
    case Reason::kNone: return "None";
    case Reason::kUnknownNode: return "UnknownNode";
    case Reason::kInsufficientResource: return "InsufficientResource";
    case Reason::kExceedsAllocatable: return "ExceedsAllocatable";
    case Reason::kPreemptionNotHelpful: return "PreemptionNotHelpful";
    case Reason::kResourceNotOffered: return "ResourceNotOffered";
  }
  return "Unknown";
}

}  // namespace berth::policy
