#include "tests/testing/verbs.h"

#include "catch2/catch.hpp"

namespace berth::testing {

std::string Verdicts::Why(const std::string& node) const {
  if (auto it = unresolvable.find(node); it != unresolvable.end()) return it->second;
  if (auto it = failed.find(node); it != failed.end()) return it->second;
  return "";
}

Verdicts FilterPod(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes) {
  const Json r = h.Filter(ArgsNames(pod.Obj(), nodes));
  INFO("filter reply: " << r.dump());
  REQUIRE((!r.contains("Error") || r["Error"].is_null() || r["Error"] == ""));
  Verdicts v;
  if (r.contains("NodeNames") && r["NodeNames"].is_array()) {
    for (const Json& n : r["NodeNames"]) v.fit.push_back(n.get<std::string>());
  }
  if (r.contains("FailedNodes") && r["FailedNodes"].is_object()) {
    for (const auto& [n, why] : r["FailedNodes"].items()) v.failed[n] = why.get<std::string>();
  }
  if (r.contains("FailedAndUnresolvableNodes") && r["FailedAndUnresolvableNodes"].is_object()) {
    for (const auto& [n, why] : r["FailedAndUnresolvableNodes"].items()) {
      v.unresolvable[n] = why.get<std::string>();
    }
  }
  return v;
}

Verdicts FilterSettled(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes) {
  Verdicts v = FilterPod(h, pod, nodes);
  for (int round = 0; round < 3 && h.service().DrainIntents() > 0; ++round) {
    v = FilterPod(h, pod, nodes);
  }
  return v;
}

std::string HeldCpu(Harness& h, const std::string& node) {
  const Json nodes = ParseReply(h.service().DebugNodes(false))["nodes"];
  for (const Json& n : nodes) {
    if (n["name"] == node) return n["held"].value("cpu", "");
  }
  FAIL("no node " << node);
  return "";
}

std::string BindError(Harness& h, const MakePod& pod, const std::string& node) {
  const Json r = h.Bind(BindArgs(pod, node));
  if (!r.contains("Error") || r["Error"].is_null()) return "";
  return r["Error"].get<std::string>();
}

void BindOk(Harness& h, const MakePod& pod, const std::string& node) {
  const std::string error = BindError(h, pod, node);
  INFO("bind " << pod.Obj()["metadata"]["name"] << " to " << node << ": " << error);
  CHECK(error.empty());
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace berth::testing
