#pragma once

// Fluent builders for the Kubernetes objects and extender requests tests feed berth, in the
// JSON kube-scheduler and the API server really send (so tests go through the real codec).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace berth::testing {

using Json = nlohmann::json;

/// A v1.Node. Example: MakeNode("gpu-1").Cpu("64").Memory("256Gi").Gpu(8).Label("zone", "a").
class MakeNode {
 public:
  explicit MakeNode(std::string name);
  MakeNode& Cpu(std::string q) { return Allocatable("cpu", std::move(q)); }
  MakeNode& Memory(std::string q) { return Allocatable("memory", std::move(q)); }
  MakeNode& Gpu(int n) { return Allocatable("nvidia.com/gpu", std::to_string(n)); }
  MakeNode& Pods(int n) { return Allocatable("pods", std::to_string(n)); }
  MakeNode& Allocatable(const std::string& resource, std::string q);
  MakeNode& Label(const std::string& key, std::string value);
  MakeNode& Unschedulable(bool on = true);
  MakeNode& Taint(std::string key, std::string value, std::string effect);
  /// Fabric position: the default topology levels (zone, spine, leaf).
  MakeNode& Topology(std::string zone, std::string spine, std::string leaf);
  Json Obj() const { return j_; }
  std::string Name() const { return j_["metadata"]["name"]; }

 private:
  Json j_;
};

/// A v1.Pod. Defaults: namespace "default", uid "uid-NAME", schedulerName "berth-scheduler",
/// phase Pending, one container "main" with no requests.
class MakePod {
 public:
  explicit MakePod(std::string name);
  MakePod& Namespace(std::string ns);
  MakePod& Uid(std::string uid);
  MakePod& Scheduler(std::string name);
  MakePod& Cpu(std::string q) { return Request("cpu", std::move(q)); }
  MakePod& Memory(std::string q) { return Request("memory", std::move(q)); }
  MakePod& Gpu(int n);
  /// A request of the first container.
  MakePod& Request(const std::string& resource, std::string q);
  /// A further container with one request.
  MakePod& Container(std::string name, const std::string& resource, std::string q);
  /// An init container; `sidecar` sets restartPolicy: Always.
  MakePod& InitContainer(std::string name, const std::string& resource, std::string q,
                         bool sidecar = false);
  MakePod& Overhead(const std::string& resource, std::string q);
  MakePod& Node(std::string node);
  MakePod& Phase(std::string phase);
  MakePod& Priority(int32_t p);
  MakePod& Label(const std::string& key, std::string value);
  MakePod& Annotation(const std::string& key, std::string value);
  /// Home pool: annotation berth.io/pool.
  MakePod& Pool(std::string pool) { return Annotation("berth.io/pool", std::move(pool)); }
  /// Gang membership: label scheduling.x-k8s.io/pod-group.
  MakePod& Gang(std::string gang) { return Label("scheduling.x-k8s.io/pod-group", std::move(gang)); }
  /// metadata.creationTimestamp and status.startTime, RFC 3339 ("2026-01-01T00:00:00Z").
  MakePod& Created(std::string rfc3339);
  MakePod& Started(std::string rfc3339);
  Json Obj() const { return j_; }
  std::string Name() const { return j_["metadata"]["name"]; }
  std::string Ns() const { return j_["metadata"]["namespace"]; }
  std::string UidOf() const { return j_["metadata"]["uid"]; }

 private:
  Json j_;
};

/// A watch event {"type": TYPE, "object": OBJ}.
Json Event(const std::string& type, const Json& object);
/// The ADDED event of `pod` already running on `node`.
Json RunningOn(MakePod pod, const std::string& node);
/// A Kubernetes List of objects.
Json List(const std::vector<Json>& items);

/// ExtenderArgs in name form (nodeCacheCapable: true).
Json ArgsNames(const Json& pod, const std::vector<std::string>& nodes);
/// ExtenderArgs in full-object form (nodeCacheCapable: false).
Json ArgsNodes(const Json& pod, const std::vector<Json>& nodes);
/// ExtenderBindingArgs.
Json BindArgs(const MakePod& pod, const std::string& node);
/// ExtenderPreemptionArgs in name form: node -> victim uids.
Json PreemptArgsMeta(const Json& pod,
                     const std::vector<std::pair<std::string, std::vector<std::string>>>& victims,
                     int64_t pdb_violations = 0);

}  // namespace berth::testing

namespace berth::testing {

// ---- the kinds policies read: Pool, Queue, PodGroup, PriorityClass ---------------------------

/// A berth.io/v1alpha1 Pool. Example: MakePool("train").Label("pool", "train").NoBorrowing().
/// Defaults: no selector (every node), every flag false.
class MakePool {
 public:
  explicit MakePool(std::string name);
  /// A spec.nodeSelector.matchLabels entry.
  MakePool& Label(const std::string& key, std::string value);
  /// A spec.nodeSelector.matchExpressions entry; `values` omitted when empty.
  MakePool& Expression(std::string key, std::string op, std::vector<std::string> values = {});
  MakePool& NoPreemption(bool on = true);
  MakePool& NoBorrowing(bool on = true);
  MakePool& NoSharing(bool on = true);
  MakePool& ApiVersion(std::string api_version);
  Json Obj() const { return j_; }

 private:
  Json j_;
};

/// A berth.io/v1alpha1 Queue. Defaults: no spec fields (weight 1).
class MakeQueue {
 public:
  explicit MakeQueue(std::string name);
  MakeQueue& Weight(double w);
  MakeQueue& NonPreemptibleLimitFactor(double f);
  MakeQueue& ExcessBudget(double resource_minutes);
  Json Obj() const { return j_; }

 private:
  Json j_;
};

/// A PodGroup, scheduling.x-k8s.io/v1alpha1 unless Volcano(). Defaults: namespace "default",
/// minMember 1.
class MakePodGroup {
 public:
  explicit MakePodGroup(std::string name);
  MakePodGroup& Namespace(std::string ns);
  MakePodGroup& MinMember(int32_t n);
  MakePodGroup& TimeoutSeconds(int32_t seconds);
  MakePodGroup& MinResource(const std::string& resource, std::string q);
  MakePodGroup& Annotation(const std::string& key, std::string value);
  /// scheduling.volcano.sh/v1beta1 instead.
  MakePodGroup& Volcano();
  Json Obj() const { return j_; }

 private:
  Json j_;
};

/// A scheduling.k8s.io/v1 PriorityClass.
class MakePriorityClass {
 public:
  MakePriorityClass(std::string name, int32_t value);
  MakePriorityClass& GlobalDefault(bool on = true);
  /// "PreemptLowerPriority" or "Never".
  MakePriorityClass& PreemptionPolicy(std::string policy);
  Json Obj() const { return j_; }

 private:
  Json j_;
};

}  // namespace berth::testing
