#pragma once

// Builders of core objects for tests below the wire layer (core/ and policy/), where objects go
// straight into ClusterModel::Apply instead of through JSON.

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/objects.h"
#include "core/resources.h"

namespace berth::testing {

inline constexpr int64_t kGi = int64_t{1} << 30;
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

/// A vector of (resource, amount) pairs.
inline core::ResourceVector Vec(
    std::initializer_list<std::pair<core::ResourceId, int64_t>> entries) {
  core::ResourceVector v;
  for (const auto& [id, amount] : entries) v.Set(id, amount);
  return v;
}

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

/// A plain pod "pod-fill-NODE" of another scheduler, taking `cpu_milli` and 1 GiB on `node`.
inline core::Pod FillerPod(std::string node, int64_t cpu_milli) {
  return CorePod("fill-" + node, node, cpu_milli, kGi);
}

/// The fabric label keys of FabricNode, top level first: the topology levels to give a
/// Topology or a GangConfig that should read FabricNode's placement.
inline const std::vector<std::string>& FabricLevels() {
  static const std::vector<std::string> levels = {"zone", "spine", "leaf"};
  return levels;
}

/// A node of `cpu_milli` millicores and 32 GiB under zone/spine/leaf (FabricLevels); an empty
/// value leaves that level's label off, whatever the levels below it say.
inline core::Node FabricNode(std::string name, int64_t cpu_milli, std::string_view zone,
                             std::string_view spine, std::string_view leaf) {
  core::Node n = CoreNode(std::move(name), cpu_milli, 32 * kGi);
  const std::string_view values[] = {zone, spine, leaf};
  for (size_t i = 0; i < FabricLevels().size(); ++i) {
    if (!values[i].empty()) n.labels.Set(FabricLevels()[i], values[i]);
  }
  return n;
}

/// A member of gang `gang` (label scheduling.x-k8s.io/pod-group) of berth's scheduler
/// ("berth-scheduler"), asking `cpu_milli` millicores and 1 GiB: CorePod otherwise.
inline core::Pod GangPod(std::string uid, std::string gang, std::string node, int64_t cpu_milli) {
  core::Pod p = CorePod(std::move(uid), std::move(node), cpu_milli, kGi);
  p.scheduler_name = "berth-scheduler";
  p.labels.Set("scheduling.x-k8s.io/pod-group", gang);
  return p;
}

/// PodGroup `name` in namespace default with `min_member`.
inline core::PodGroup CorePodGroup(std::string name, int32_t min_member) {
  core::PodGroup g;
  g.ns = "default";
  g.name = std::move(name);
  g.min_member = min_member;
  return g;
}

}  // namespace berth::testing
