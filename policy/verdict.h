#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace berth::policy {

/// A node's verdict for one pod. Maps one-to-one onto the extender protocol: kFit -> the pass
/// list, kUnschedulable -> FailedNodes (preemption may help), kUnresolvable ->
/// FailedAndUnresolvableNodes (it will not). Internal failures are never verdicts.
enum class Fit : uint8_t { kFit, kUnschedulable, kUnresolvable };

/// Stable reason codes. They are part of berth's interface (metrics labels, /debug/explain), so a
/// code is never renamed; new ones are appended, with their row in verdict.cc's table (whose
/// compile-time check names the last one).
enum class Reason : uint8_t {
  kNone,
  kUnknownNode,           ///< the node is not in berth's model
  kInsufficientResource,  ///< not enough free room now; evicting pods could make room
  kExceedsAllocatable,    ///< more than the node's allocatable: nothing can make room
  kNodeConstraint,        ///< the pod's node selector, affinity or tolerations exclude the node
  kPreemptionNotHelpful,  ///< evicting the proposed victims would not make the pod fit
  kResourceNotOffered,    ///< the pod requests a resource no node advertises
  // Pools (SPEC 6.1).
  kUnknownPool,           ///< the pod's home pool does not exist
  kHomePoolHasRoom,       ///< the node is outside the pod's home pool, which has room
  kBorrowingDisabled,     ///< the home pool is full and does not allow borrowing
  kSharingDisabled,       ///< the node's pool does not lend its nodes
  kNotLenderPool,         ///< borrowing goes to another pool (most free resources)
  kPoolRule,              ///< a preemption victim that pool rules protect
  kReclaiming,            ///< room is being reclaimed for the pod in its home pool
  // GPU placement (SPEC 6.7).
  kGpuReserved,           ///< a CPU-only pod would take the CPU or memory kept for free GPUs
  kCpuPerGpuTooLow,       ///< a GPU pod requests less CPU per GPU than gpu.minCpuPerGpu
  // Gangs and topology (SPEC 6.2, 6.3, 6.6).
  kGangNoPodGroup,        ///< the gang's PodGroup does not exist (yet)
  kGangMembersMissing,    ///< fewer members exist than minMember
  kGangNotPlaceable,      ///< the gang's minimum cannot be placed at once
  kGangMaxHops,           ///< the gang fits only farther apart than berth.io/max-hops
  kGangReservedElsewhere, ///< the member's room is reserved on another node
  kGangElasticWaiting,    ///< an elastic member waits (fulfillment order, freeze window)
  kGangMinimum,           ///< a preemption that would leave a gang below its minimum
  // Queues and fair share (SPEC 6.4, 6.5).
  kQueueUnknown,          ///< the pod names a queue that does not exist
  kQueueWaiting,          ///< the job waits its turn: no room for it behind the jobs before it
  kQueueBackfill,         ///< it fits only in room kept for the job next to start
  kQueueLimit,            ///< non-preemptible usage would exceed the queue's limit
  kQueueBudget,           ///< its lifetime would overdraw the queue's excess budget
};

std::string_view ReasonCode(Reason reason);

/// The short text kube-scheduler gets for a rejected node: one per reason, the same on every
/// node, so its FailedScheduling event counts nodes by reason ("0/2000 nodes are available: 1500
/// berth: insufficient free resources, ..."). The pod's own numbers are in the verdict's message.
std::string_view ReasonSummary(Reason reason);

/// The verdict of one node for one pod.
struct NodeVerdict {
  Fit fit = Fit::kFit;
  Reason reason = Reason::kNone;
  /// What holds the pod back, for people: /debug/explain, berth's Events about waiting pods,
  /// logs ("berth: insufficient nvidia.com/gpu (pod requests 2 nvidia.com/gpu)"). The same on
  /// every node where it can be; kube-scheduler gets ReasonSummary(reason) instead.
  std::string message;
  /// Node-specific numbers for people ("free 1, allocatable 4, in-flight binds 1: short by 1").
  std::string detail;

  bool ok() const { return fit == Fit::kFit; }
  static NodeVerdict Ok() { return NodeVerdict{}; }
  /// The same fit and reason without words.
  NodeVerdict Bare() const { return NodeVerdict{.fit = fit, .reason = reason}; }
};

/// The words a verdict is given besides its fit and reason: none (only whether and why, by
/// code), the node-independent message, or the message and the node's numbers (detail).
enum class Words : uint8_t { kNone, kMessage, kDetail };

/// Extender scores run 0..kMaxScore (kube-scheduler's MaxExtenderPriority).
inline constexpr int64_t kMaxScore = 10;

}  // namespace berth::policy
