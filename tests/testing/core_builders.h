#pragma once

// Builders of core objects for tests below the wire layer (core/ and policy/), where objects go
// straight into ClusterModel::Apply instead of through JSON.

#include <cstdint>
#include <string>
#include <utility>

#include "core/objects.h"
#include "core/resources.h"

namespace berth::testing {

inline constexpr int64_t kGi = int64_t{1} << 30;

/// A node with cpu (millicores), memory (bytes), GPUs and pod slots; capacity = allocatable.
inline core::Node CoreNode(std::string name, int64_t cpu_milli, int64_t memory, int64_t gpus = 0,
                           int64_t pods = 110) {
  core::Node n;
  n.name = std::move(name);
  n.allocatable.Set(core::kCpu, cpu_milli);
  n.allocatable.Set(core::kMemory, memory);
  n.allocatable.Set(core::kPods, pods);
  n.allocatable.Set(core::kNvidiaGpu, gpus);
  n.capacity = n.allocatable;
  return n;
}

/// A pod named "pod-UID" in namespace default, bound (and Running) when `node` is not empty,
/// else Pending; its request includes one pod slot.
inline core::Pod CorePod(std::string uid, std::string node, int64_t cpu_milli, int64_t memory,
                         int64_t gpus = 0) {
  core::Pod p;
  p.uid = uid;
  p.ns = "default";
  p.name = "pod-" + uid;
  p.node_name = std::move(node);
  p.phase = p.node_name.empty() ? core::PodPhase::kPending : core::PodPhase::kRunning;
  p.request.Set(core::kCpu, cpu_milli);
  p.request.Set(core::kMemory, memory);
  p.request.Set(core::kNvidiaGpu, gpus);
  p.request.Set(core::kPods, 1);
  return p;
}

}  // namespace berth::testing
