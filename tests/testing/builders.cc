#include "tests/testing/builders.h"

namespace berth::testing {

MakeNode::MakeNode(std::string name) {
  j_ = {{"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
        {"spec", Json::object()},
        {"status", {{"allocatable", {{"pods", "110"}}}, {"capacity", {{"pods", "110"}}}}}};
}

MakeNode& MakeNode::Allocatable(const std::string& resource, std::string q) {
  j_["status"]["allocatable"][resource] = q;
  j_["status"]["capacity"][resource] = std::move(q);
  return *this;
}

MakeNode& MakeNode::Label(const std::string& key, std::string value) {
  j_["metadata"]["labels"][key] = std::move(value);
  return *this;
}

MakeNode& MakeNode::Unschedulable(bool on) {
  j_["spec"]["unschedulable"] = on;
  return *this;
}

MakeNode& MakeNode::Taint(std::string key, std::string value, std::string effect) {
  j_["spec"]["taints"].push_back({{"key", key}, {"value", value}, {"effect", effect}});
  return *this;
}

MakeNode& MakeNode::Topology(std::string zone, std::string spine, std::string leaf) {
  Label("topology.kubernetes.io/zone", std::move(zone));
  Label("berth.io/spine", std::move(spine));
  return Label("berth.io/leaf", std::move(leaf));
}

MakePod::MakePod(std::string name) {
  j_ = {{"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", "default"},
          {"uid", "uid-" + name},
          {"creationTimestamp", "2026-01-01T00:00:00Z"}}},
        {"spec",
         {{"schedulerName", "berth-scheduler"},
          {"containers", {{{"name", "main"}, {"image", "registry.invalid/x:1"}, {"resources", Json::object()}}}}}},
        {"status", {{"phase", "Pending"}}}};
}

MakePod& MakePod::Created(std::string rfc3339) {
  j_["metadata"]["creationTimestamp"] = std::move(rfc3339);
  return *this;
}
MakePod& MakePod::Started(std::string rfc3339) {
  j_["status"]["startTime"] = std::move(rfc3339);
  return *this;
}

MakePod& MakePod::Namespace(std::string ns) {
  j_["metadata"]["namespace"] = std::move(ns);
  return *this;
}
MakePod& MakePod::Uid(std::string uid) {
  j_["metadata"]["uid"] = std::move(uid);
  return *this;
}
MakePod& MakePod::Scheduler(std::string name) {
  j_["spec"]["schedulerName"] = std::move(name);
  return *this;
}
MakePod& MakePod::Gpu(int n) {
  Request("nvidia.com/gpu", std::to_string(n));
  j_["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(n);
  return *this;
}
MakePod& MakePod::Request(const std::string& resource, std::string q) {
  j_["spec"]["containers"][0]["resources"]["requests"][resource] = std::move(q);
  return *this;
}
MakePod& MakePod::Container(std::string name, const std::string& resource, std::string q) {
  j_["spec"]["containers"].push_back(
      {{"name", std::move(name)}, {"resources", {{"requests", {{resource, std::move(q)}}}}}});
  return *this;
}
MakePod& MakePod::InitContainer(std::string name, const std::string& resource, std::string q,
                                bool sidecar) {
  Json c = {{"name", std::move(name)}, {"resources", {{"requests", {{resource, std::move(q)}}}}}};
  if (sidecar) c["restartPolicy"] = "Always";
  j_["spec"]["initContainers"].push_back(std::move(c));
  return *this;
}
MakePod& MakePod::Overhead(const std::string& resource, std::string q) {
  j_["spec"]["overhead"][resource] = std::move(q);
  return *this;
}
MakePod& MakePod::Node(std::string node) {
  j_["spec"]["nodeName"] = std::move(node);
  return *this;
}
MakePod& MakePod::Phase(std::string phase) {
  j_["status"]["phase"] = std::move(phase);
  return *this;
}
MakePod& MakePod::Priority(int32_t p) {
  j_["spec"]["priority"] = p;
  return *this;
}
MakePod& MakePod::Label(const std::string& key, std::string value) {
  j_["metadata"]["labels"][key] = std::move(value);
  return *this;
}
MakePod& MakePod::Annotation(const std::string& key, std::string value) {
  j_["metadata"]["annotations"][key] = std::move(value);
  return *this;
}

Json Event(const std::string& type, const Json& object) {
  return {{"type", type}, {"object", object}};
}

Json RunningOn(MakePod pod, const std::string& node) {
  return Event("ADDED", pod.Node(node).Phase("Running").Obj());
}

Json List(const std::vector<Json>& items) {
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", Json::object()}, {"items", items}};
}

Json ArgsNames(const Json& pod, const std::vector<std::string>& nodes) {
  return {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}};
}

Json ArgsNodes(const Json& pod, const std::vector<Json>& nodes) {
  return {{"Pod", pod}, {"Nodes", {{"metadata", Json::object()}, {"items", nodes}}}, {"NodeNames", nullptr}};
}

Json BindArgs(const MakePod& pod, const std::string& node) {
  return {{"PodName", pod.Name()}, {"PodNamespace", pod.Ns()}, {"PodUID", pod.UidOf()}, {"Node", node}};
}

Json PreemptArgsMeta(const Json& pod,
                     const std::vector<std::pair<std::string, std::vector<std::string>>>& victims,
                     int64_t pdb_violations) {
  Json map = Json::object();
  for (const auto& [node, uids] : victims) {
    Json pods = Json::array();
    for (const auto& uid : uids) pods.push_back({{"UID", uid}});
    map[node] = {{"Pods", pods}, {"NumPDBViolations", pdb_violations}};
  }
  return {{"Pod", pod}, {"NodeNameToVictims", nullptr}, {"NodeNameToMetaVictims", map}};
}

}  // namespace berth::testing

namespace berth::testing {

MakePool::MakePool(std::string name) {
  j_ = {{"apiVersion", "berth.io/v1alpha1"},
        {"kind", "Pool"},
        {"metadata", {{"name", std::move(name)}}},
        {"spec", Json::object()}};
}
MakePool& MakePool::Label(const std::string& key, std::string value) {
  j_["spec"]["nodeSelector"]["matchLabels"][key] = std::move(value);
  return *this;
}
MakePool& MakePool::Expression(std::string key, std::string op, std::vector<std::string> values) {
  Json e = {{"key", std::move(key)}, {"operator", std::move(op)}};
  if (!values.empty()) e["values"] = std::move(values);
  j_["spec"]["nodeSelector"]["matchExpressions"].push_back(std::move(e));
  return *this;
}
MakePool& MakePool::NoPreemption(bool on) {
  j_["spec"]["disablePreemption"] = on;
  return *this;
}
MakePool& MakePool::NoBorrowing(bool on) {
  j_["spec"]["disableBorrowing"] = on;
  return *this;
}
MakePool& MakePool::NoSharing(bool on) {
  j_["spec"]["disableSharing"] = on;
  return *this;
}
MakePool& MakePool::ApiVersion(std::string api_version) {
  j_["apiVersion"] = std::move(api_version);
  return *this;
}

MakeQueue::MakeQueue(std::string name) {
  j_ = {{"apiVersion", "berth.io/v1alpha1"},
        {"kind", "Queue"},
        {"metadata", {{"name", std::move(name)}}},
        {"spec", Json::object()}};
}
MakeQueue& MakeQueue::Weight(double w) {
  j_["spec"]["weight"] = w;
  return *this;
}
MakeQueue& MakeQueue::NonPreemptibleLimitFactor(double f) {
  j_["spec"]["nonPreemptibleLimitFactor"] = f;
  return *this;
}
MakeQueue& MakeQueue::ExcessBudget(double resource_minutes) {
  j_["spec"]["excessBudget"] = resource_minutes;
  return *this;
}

MakePodGroup::MakePodGroup(std::string name) {
  j_ = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
        {"kind", "PodGroup"},
        {"metadata", {{"name", std::move(name)}, {"namespace", "default"}}},
        {"spec", {{"minMember", 1}}}};
}
MakePodGroup& MakePodGroup::Namespace(std::string ns) {
  j_["metadata"]["namespace"] = std::move(ns);
  return *this;
}
MakePodGroup& MakePodGroup::MinMember(int32_t n) {
  j_["spec"]["minMember"] = n;
  return *this;
}
MakePodGroup& MakePodGroup::TimeoutSeconds(int32_t seconds) {
  j_["spec"]["scheduleTimeoutSeconds"] = seconds;
  return *this;
}
MakePodGroup& MakePodGroup::MinResource(const std::string& resource, std::string q) {
  j_["spec"]["minResources"][resource] = std::move(q);
  return *this;
}

MakePodGroup& MakePodGroup::Annotation(const std::string& key, std::string value) {
  j_["metadata"]["annotations"][key] = std::move(value);
  return *this;
}
MakePodGroup& MakePodGroup::Volcano() {
  j_["apiVersion"] = "scheduling.volcano.sh/v1beta1";
  return *this;
}

MakePriorityClass::MakePriorityClass(std::string name, int32_t value) {
  j_ = {{"apiVersion", "scheduling.k8s.io/v1"},
        {"kind", "PriorityClass"},
        {"metadata", {{"name", std::move(name)}}},
        {"value", value}};
}
MakePriorityClass& MakePriorityClass::GlobalDefault(bool on) {
  j_["globalDefault"] = on;
  return *this;
}
MakePriorityClass& MakePriorityClass::PreemptionPolicy(std::string policy) {
  j_["preemptionPolicy"] = std::move(policy);
  return *this;
}

}  // namespace berth::testing
