#include "tests/testing/scenario.h"

#include <catch2/catch.hpp>

#include "tests/testing/harness.h"

namespace berth::testing {
namespace {

using Json = nlohmann::json;

std::string Describe(Expect e) {
  switch (e) {
    case Expect::kFit: return "fit";
    case Expect::kFailed: return "FailedNodes";
    case Expect::kUnresolvable: return "FailedAndUnresolvableNodes";
  }
  return "?";
}

void RunStep(Harness& h, const FilterStep& s) {
  Json args;
  if (s.full_nodes) {
    std::vector<Json> nodes;
    for (const std::string& n : s.nodes) nodes.push_back(MakeNode(n).Obj());
    args = ArgsNodes(s.pod.Obj(), nodes);
  } else {
    args = ArgsNames(s.pod.Obj(), s.nodes);
  }
  const Json r = h.Filter(args);
  INFO("filter reply: " << r.dump());
  REQUIRE(r["Error"] == "");
  for (const NodeExpect& e : s.expect) {
    INFO("node " << e.node << " expected " << Describe(e.verdict));
    bool passed = false;
    if (s.full_nodes) {
      for (const Json& item : r["Nodes"]["items"]) passed |= item["metadata"]["name"] == e.node;
    } else {
      for (const Json& n : r["NodeNames"]) passed |= n == e.node;
    }
    const bool failed = r["FailedNodes"].contains(e.node);
    const bool unresolvable = r["FailedAndUnresolvableNodes"].contains(e.node);
    CHECK(passed == (e.verdict == Expect::kFit));
    CHECK(failed == (e.verdict == Expect::kFailed));
    CHECK(unresolvable == (e.verdict == Expect::kUnresolvable));
    if (!e.contains.empty()) {
      const Json& map = failed ? r["FailedNodes"] : r["FailedAndUnresolvableNodes"];
      REQUIRE(map.contains(e.node));
      CHECK_THAT(map[e.node].get<std::string>(), Catch::Matchers::Contains(e.contains));
    }
  }
}

void RunStep(Harness& h, const PrioritizeStep& s) {
  const Json r = h.Prioritize(ArgsNames(s.pod.Obj(), s.nodes));
  INFO("prioritize reply: " << r.dump());
  REQUIRE(r.is_array());
  std::map<std::string, int> score;
  for (const Json& e : r) score[e["Host"]] = e["Score"].get<int>();
  for (size_t i = 0; i + 1 < s.ranking.size(); ++i) {
    INFO(s.ranking[i] << " must score above " << s.ranking[i + 1]);
    CHECK(score.at(s.ranking[i]) > score.at(s.ranking[i + 1]));
  }
  for (const auto& [node, want] : s.exact) {
    INFO("score of " << node);
    CHECK(score.at(node) == want);
  }
}

void RunStep(Harness& h, const BindStep& s) {
  const Json r = h.Bind(BindArgs(s.pod, s.node));
  INFO("bind reply: " << r.dump());
  if (s.error_contains.empty()) {
    CHECK(r["Error"] == "");
  } else {
    CHECK_THAT(r["Error"].get<std::string>(), Catch::Matchers::Contains(s.error_contains));
  }
}

void RunStep(Harness& h, const EventsStep& s) { h.Apply(s.events); }

void RunStep(Harness& h, const PreemptStep& s) {
  const Json r = h.Preempt(PreemptArgsMeta(s.pod.Obj(), s.proposal));
  INFO("preempt reply: " << r.dump());
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& [node, victims] : r["NodeNameToMetaVictims"].items()) {
    for (const Json& p : victims["Pods"]) got[node].push_back(p["UID"]);
  }
  CHECK(got == s.expect);
}

void RunStep(Harness& h, const FreeStep& s) {
  const Json nodes = ParseReply(h.service().DebugNodes(false));
  for (const Json& n : nodes["nodes"]) {
    if (n["name"] != s.node) continue;
    INFO("node " << s.node << ": " << n.dump());
    const std::string free = n["free"].contains(s.resource) ? n["free"][s.resource].get<std::string>() : "0";
    CHECK(free == s.free);
    return;
  }
  FAIL("node " << s.node << " not in /debug/nodes");
}

}  // namespace

void RunScenario(const Scenario& scenario) {
  INFO("scenario: " << scenario.name);
  Harness h(scenario.policies);
  if (!scenario.objects.empty()) {
    Json events = Json::array();
    for (const Json& o : scenario.objects) events.push_back(Event("ADDED", o));
    h.Apply(events);
  }
  for (size_t i = 0; i < scenario.steps.size(); ++i) {
    INFO("step " << i);
    std::visit([&](const auto& step) { RunStep(h, step); }, scenario.steps[i]);
  }
}

}  // namespace berth::testing
