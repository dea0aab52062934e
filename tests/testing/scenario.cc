#include "tests/testing/scenario.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

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
  std::vector<policy::NodeVerdict> verdicts;
  const Json r = h.Filter(args, &verdicts);
  INFO("filter reply: " << r.dump());
  REQUIRE(r["Error"] == "");
  REQUIRE(verdicts.size() == s.nodes.size());
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
    if (!failed && !unresolvable) continue;
    // The answer carries the reason's summary; the verdict's message says more.
    const auto at = std::find(s.nodes.begin(), s.nodes.end(), e.node);
    REQUIRE(at != s.nodes.end());
    const policy::NodeVerdict& v = verdicts[static_cast<size_t>(at - s.nodes.begin())];
    const Json& map = failed ? r["FailedNodes"] : r["FailedAndUnresolvableNodes"];
    CHECK(map[e.node] == policy::ReasonSummary(v.reason));
    if (!e.contains.empty()) CHECK_THAT(v.message, Catch::Matchers::Contains(e.contains));
  }
}

void RunStep(Harness& h, const PrioritizeStep& s) {
  const Json r = h.Prioritize(ArgsNames(s.pod.Obj(), s.nodes));
  INFO("prioritize reply: " << r.dump());
  REQUIRE(r.is_array());
  const std::map<std::string, int64_t> score = ScoresOf(r);
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
