#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "policy/pipeline.h"
#include "policy/queue/queue.h"
#include "policy/verdict.h"

namespace berth::policy {

/// Nodes that gave one pod the same verdict (reason code and message).
struct NodeGroup {
  NodeVerdict verdict;           ///< with the first node's detail (its numbers)
  std::vector<std::string> nodes;
};

/// Why a pod is (not) placed, and what would let it run (SPEC 6.8): what GET /debug/explain
/// answers. Computed from one view of the model with the same pipeline the verbs use.
struct Explanation {
  std::string pod;  ///< "ns/name"
  bool managed = false;
  std::string node;  ///< where it is bound, if it is
  std::string pool, queue, gang;
  int32_t priority = 0;
  PriorityLevel level = PriorityLevel::kExperiment;
  /// kFit when every PreFilter module lets the pod through; otherwise why it waits.
  NodeVerdict admission;
  /// Its job in the latest admission plan (queues enabled, pod waiting), as the plan has it.
  std::optional<PlannedJob> job;
  /// Waiting jobs ahead of it in the plan's order, and how many of them are in its queue.
  int waiting_ahead = 0;
  int waiting_ahead_in_queue = 0;
  std::vector<std::string> fits;  ///< nodes that take it now
  std::vector<NodeGroup> rejected;  ///< by verdict, most nodes first
  /// The smallest changes that would let it run, computed from the model, most direct first
  /// ("fits on node gpu-3 once 2 more nvidia.com/gpu are free there").
  std::vector<std::string> would_run_if;
};

/// Explains `pod` (as the model holds it) against every present node.
Explanation Explain(const Pipeline& pipeline, const core::ClusterState& state,
                    const core::Pod& pod, absl::Time now, const std::string& scheduler_name);

}  // namespace berth::policy
