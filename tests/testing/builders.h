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
  Json Obj() const { return j_; }
  std::string Name() const { return j_["metadata"]["name"]; }
  std::string Ns() const { return j_["metadata"]["namespace"]; }
  std::string UidOf() const { return j_["metadata"]["uid"]; }

 private:
  Json j_;
};

/// A watch event {"type": TYPE, "object": OBJ}.
Json Event(const std::string& type, const Json& object);
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
