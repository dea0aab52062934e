// POST /v1/whatif (issue 18 part 2): every answer is checked against what the real verbs decide
// next for the same objects, and against the state being left exactly as it was.

#include <set>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "core/strings.h"
#include "extender/http_server.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"
#include "httplib.h"

namespace berth::testing {
namespace {

Json WhatIf(Harness& h, const std::string& body, int want_status = 200) {
  const extender::Reply r = h.service().WhatIf(body, false);
  INFO(r.body);
  REQUIRE(r.status == want_status);
  return ParseReply(r);
}

std::string Dump(const std::vector<MakePod>& pods, const std::vector<Json>& extra = {}) {
  Json items = Json::array();
  for (const Json& e : extra) items.push_back(e);
  for (const MakePod& p : pods) {
    Json o = p.Obj();
    o["metadata"].erase("uid");  // as a user writes it
    items.push_back(o);
  }
  return Json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump();
}

// The model as /debug/snapshot prints it, and its generation: a what-if changes neither.
struct State {
  std::string snapshot;
  uint64_t generation;
};
State StateOf(Harness& h) {
  return {h.service().DebugSnapshot(false).body, h.model().Read()->generation()};
}
void CheckUnchanged(Harness& h, const State& before) {
  const State now = StateOf(h);
  CHECK(now.generation == before.generation);
  CHECK(now.snapshot == before.snapshot);
}

void Submit(Harness& h, const std::vector<MakePod>& pods, const std::vector<Json>& extra = {}) {
  Json events = Json::array();
  for (const Json& e : extra) events.push_back(Event("ADDED", e));
  for (const MakePod& p : pods) events.push_back(Event("ADDED", p.Obj()));
  h.Apply(events);
}

std::vector<std::string> Names(const Json& a) {
  std::vector<std::string> out;
  for (const Json& s : a) out.push_back(s.get<std::string>());
  return out;
}

TEST_CASE("what-if: a pod that fits gets the nodes the next filter and prioritize give it", "[whatif]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj()),
                       Event("ADDED", MakeNode("n2").Cpu("16").Memory("64Gi").Pods(110).Obj()),
                       Event("ADDED", MakeNode("n3").Cpu("16").Memory("64Gi").Pods(110).Obj()),
                       Event("ADDED", MakeNode("n4").Cpu("2").Memory("8Gi").Pods(110).Obj())}));
  h.Apply(Json::array({Event("ADDED", MakePod("busy").Namespace("ml").Cpu("10").Node("n2").Phase("Running").Obj())}));
  const MakePod pod = MakePod("job").Namespace("ml").Uid("whatif:ml/job").Cpu("4").Memory("8Gi");
  const State before = StateOf(h);
  const Json w = WhatIf(h, Dump({pod}));
  CheckUnchanged(h, before);
  REQUIRE(w["decision"] == "runs now");
  REQUIRE(w["pods"].size() == 1);
  const Json& row = w["pods"][0];
  CHECK(row["pod"] == "ml/job");
  CHECK(row["nodesThatFit"] == 3);  // n4 is too small for kube-scheduler's own fit

  // Submitted, the same pod gets the same answers from the real verbs.
  Submit(h, {pod});
  const std::vector<std::string> all = {"n1", "n2", "n3"};
  const Verdicts v = FilterPod(h, pod, all);
  CHECK(v.fit.size() == 3);
  const std::map<std::string, int64_t> scores = ScoresOf(h.Prioritize(ArgsNames(pod.Obj(), v.fit)));
  int64_t best = -1;
  for (const auto& [n, s] : scores) best = std::max(best, s);
  std::vector<std::string> best_nodes;
  for (const auto& [n, s] : scores) {
    if (s == best) best_nodes.push_back(n);
  }
  CHECK(row["bestScore"] == best);
  CHECK(Names(row["bestNodes"]) == best_nodes);
  CHECK(row["node"] == best_nodes[0]);
}

TEST_CASE("what-if: a waiting pod is held back by the rules the real filter names", "[whatif]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj())}));
  const MakePod pod = MakePod("lost").Namespace("ml").Uid("whatif:ml/lost").Pool("nowhere").Cpu("1");
  const State before = StateOf(h);
  const Json w = WhatIf(h, Dump({pod}));
  CheckUnchanged(h, before);
  CHECK(w["decision"] == "waits");
  const Json& held = w["pods"][0]["heldBackBy"];
  REQUIRE(held.size() == 1);
  CHECK(held[0]["reason"] == "UnknownPool");
  CHECK(held[0]["nodes"] == 1);

  Submit(h, {pod});
  std::vector<policy::NodeVerdict> verdicts;
  h.Filter(ArgsNames(pod.Obj(), {"n1"}), &verdicts);
  REQUIRE(verdicts.size() == 1);
  CHECK(policy::ReasonCode(verdicts[0].reason) == held[0]["reason"].get<std::string>());
  CHECK(verdicts[0].message == held[0]["message"].get<std::string>());
}

TEST_CASE("what-if: a gang is placed where its admission reserves room, with its hops", "[whatif]") {
  Harness h;
  Json nodes = Json::array();
  // Two leaves of two 8-GPU nodes; leaf-1's nodes are half full.
  int i = 0;
  for (const std::string leaf : {"leaf-1", "leaf-2"}) {
    for (int k = 0; k < 2; ++k) {
      nodes.push_back(Event("ADDED", MakeNode(StrCat("g", ++i)).Cpu("64").Memory("512Gi").Gpu(8).Pods(110)
                                         .Topology("zone-a", "spine-1", leaf).Obj()));
    }
  }
  h.Apply(nodes);
  h.Apply(Json::array({Event("ADDED", MakePod("half-1").Namespace("ml").Gpu(4).Cpu("4").Node("g1").Phase("Running").Obj()),
                       Event("ADDED", MakePod("half-2").Namespace("ml").Gpu(4).Cpu("4").Node("g2").Phase("Running").Obj())}));
  std::vector<MakePod> members;
  for (int m = 0; m < 2; ++m) {
    members.push_back(MakePod(StrCat("train-", m)).Namespace("ml").Uid(StrCat("whatif:ml/train-", m)).Gang("train")
                          .Gpu(8).Cpu("16").Memory("64Gi"));
  }
  const Json group = MakePodGroup("train").Namespace("ml").MinMember(2).Obj();
  const State before = StateOf(h);
  const Json w = WhatIf(h, Dump(members, {group}));
  CheckUnchanged(h, before);
  REQUIRE(w["decision"] == "runs now");
  CHECK(w["maxHops"] == 2);  // both on leaf-2
  std::set<std::string> predicted;
  for (const Json& p : w["pods"]) predicted.insert(p["node"].get<std::string>());
  CHECK(predicted == std::set<std::string>{"g3", "g4"});
  const extender::Reply text = h.service().WhatIf(Dump(members, {group}), true);
  CHECK(text.body.find(": runs now (2 pods, at most 2 hops apart)\n") != std::string::npos);

  // Submitted: the first member's filter admits the gang; each member is offered its node.
  Submit(h, members, {group});
  const std::vector<std::string> all = {"g1", "g2", "g3", "g4"};
  for (size_t m = 0; m < members.size(); ++m) {
    const Verdicts v = FilterPod(h, members[m], all);
    REQUIRE(v.fit.size() == 1);
    CHECK(v.fit[0] == w["pods"][m]["node"].get<std::string>());
    BindOk(h, members[m], v.fit[0]);
  }
}

// Pools team-a and team-b of one 8-CPU node each; team-a fills its own node and borrows 6 CPUs of
// team-b's (a pod started an hour before the harness clock).
Json TwoPoolsWithABorrower() {
  return Json::array(
      {Event("ADDED", MakePool("team-a").Label("pool", "a").Obj()),
       Event("ADDED", MakePool("team-b").Label("pool", "b").Obj()),
       Event("ADDED", MakeNode("a1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Obj()),
       Event("ADDED", MakeNode("b1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Obj()),
       Event("ADDED", MakePod("borrow").Namespace("ml").Uid("borrow").Pool("team-a").Cpu("6")
                          .Priority(5000).Node("b1").Phase("Running").Started("2023-11-14T21:13:20Z").Obj()),
       Event("ADDED", MakePod("a-own").Namespace("ml").Uid("a-own").Pool("team-a").Cpu("8")
                          .Node("a1").Phase("Running").Obj())});
}

TEST_CASE("what-if: a pod that starts only by a reclaim names the victims the filter evicts", "[whatif]") {
  Harness h;
  Json events = TwoPoolsWithABorrower();
  // Room in the default pool: kube-scheduler's own checks pass there.
  events.push_back(Event("ADDED", MakeNode("d1").Cpu("8").Memory("32Gi").Pods(110).Obj()));
  h.Apply(events);
  const MakePod mine = MakePod("b-job").Namespace("ml").Uid("whatif:ml/b-job").Pool("team-b").Cpu("4");
  const State before = StateOf(h);
  const Json w = WhatIf(h, Dump({mine}));
  CheckUnchanged(h, before);
  CHECK(w["decision"] == "starts only by taking room");
  const Json& row = w["pods"][0];
  CHECK(row["decision"] == "starts after a reclaim");
  REQUIRE(row["victims"].size() == 1);
  CHECK(row["victims"][0]["pod"] == "ml/borrow");
  CHECK(row["victims"][0]["node"] == "b1");
  CHECK(row["node"] == "b1");
  // 6 CPUs for the hour since it started (the harness clock reads 2023-11-14T22:13:20Z).
  CHECK(row["victims"][0]["cpuHoursLost"].get<double>() == Approx(6.0));
  CHECK(w["workLost"]["cpuHours"].get<double>() == Approx(6.0));

  // Submitted, the real filter starts exactly that reclaim.
  Submit(h, {mine});
  const Verdicts v = FilterPod(h, mine, {"d1"});  // the one node kube-scheduler's checks pass
  CHECK(v.fit.empty());
  RecordingEvictor evictor;
  h.service().SetEvictor(&evictor);
  h.service().DrainIntents();
  CHECK(evictor.evicted == std::vector<std::string>{"ml/borrow"});
}

TEST_CASE("what-if: in Kubernetes mode, a pod kube-scheduler keeps from berth gets housekeeping's reclaim",
          "[whatif]") {
  Harness h(policy::PolicyConfig{}, extender::Mode::kKubernetes);
  ApplyToModel(h, TwoPoolsWithABorrower());
  // No node has 4 CPUs by kube-scheduler's count, and nothing of lower priority to preempt.
  const MakePod mine = MakePod("b-job").Namespace("ml").Uid("whatif:ml/b-job").Pool("team-b").Cpu("4");
  const State before = StateOf(h);
  const Json w = WhatIf(h, Dump({mine}));
  CheckUnchanged(h, before);
  const Json& row = w["pods"][0];
  REQUIRE(row["decision"] == "starts after a reclaim");
  REQUIRE(row["victims"].size() == 1);
  CHECK(row["victims"][0]["pod"] == "ml/borrow");

  // Created, the pod is never brought to berth's filter; housekeeping reclaims for it.
  Json created = mine.Obj();
  created["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z";
  ApplyToModel(h, Json::array({Event("ADDED", created)}));
  RecordingEvictor evictor;
  h.service().SetEvictor(&evictor);
  h.clock().Advance(absl::Seconds(6));
  CHECK(h.service().Housekeeping() == 1);
  h.service().DrainIntents();
  CHECK(evictor.evicted == std::vector<std::string>{"ml/borrow"});
}

TEST_CASE("what-if: a high-priority pod starts by preemption that berth's preempt verb accepts", "[whatif]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj()),
                       Event("ADDED", MakeNode("n2").Cpu("8").Memory("32Gi").Pods(110).Obj())}));
  h.Apply(Json::array({Event("ADDED", MakePod("low-1").Namespace("ml").Uid("low-1").Cpu("6").Priority(10).Node("n1").Phase("Running").Obj()),
                       Event("ADDED", MakePod("low-2").Namespace("ml").Uid("low-2").Cpu("6").Priority(100).Node("n2").Phase("Running").Obj())}));
  const MakePod urgent = MakePod("urgent").Namespace("ml").Uid("whatif:ml/urgent").Cpu("6").Priority(1000);
  const State before = StateOf(h);
  const Json w = WhatIf(h, Dump({urgent}));
  CheckUnchanged(h, before);
  const Json& row = w["pods"][0];
  REQUIRE(row["decision"] == "starts after preemption");
  // kube-scheduler picks the node whose victims have the lowest priority.
  CHECK(row["node"] == "n1");
  REQUIRE(row["victims"].size() == 1);
  CHECK(row["victims"][0]["pod"] == "ml/low-1");
  CHECK(row["victims"][0]["priority"] == 10);

  // The real preempt verb keeps that proposal as it is.
  Submit(h, {urgent});
  const Json kept = h.Preempt(PreemptArgsMeta(urgent.Obj(), {{"n1", {"low-1"}}}));
  CHECK(kept["NodeNameToMetaVictims"]["n1"]["Pods"][0]["UID"] == "low-1");
}

TEST_CASE("what-if: YAML documents are read as kubectl reads them", "[whatif]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj())}));
  const std::string yaml = R"(---
apiVersion: v1
kind: Pod
metadata:
  name: from-yaml
  namespace: ml
spec:
  priority: 5
  containers:
  - name: main
    resources:
      requests:
        cpu: "2"
        memory: 1Gi
---
)";
  const Json w = WhatIf(h, yaml);
  CHECK(w["decision"] == "runs now");
  CHECK(w["pods"][0]["node"] == "n1");
  const extender::Reply text = h.service().WhatIf(yaml, true);
  CHECK(text.status == 200);
  CHECK(text.body.find("ml/from-yaml: runs now on n1") != std::string::npos);
}

TEST_CASE("what-if: bad input is a clear 400 and changes nothing", "[whatif]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj())}));
  const State before = StateOf(h);
  auto error = [&](const std::string& body) {
    const extender::Reply r = h.service().WhatIf(body, false);
    CHECK(r.status == 400);
    return ParseReply(r)["error"].get<std::string>();
  };
  CHECK_THAT(error("kind: Pod\nmetadata: [unclosed"), Catch::Contains("line"));
  CHECK_THAT(error(R"({"kind":"Deployment","metadata":{"name":"d"}})"), Catch::Contains("Deployment"));
  CHECK_THAT(error(R"({"kind":"Pod","metadata":{"name":"p"},"spec":{"schedulerName":"default-scheduler"}})"),
             Catch::Contains("schedulerName"));
  CHECK_THAT(error(R"({"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeName":"n1"}})"), Catch::Contains("nodeName"));
  CHECK_THAT(error(R"({"kind":"Pod","metadata":{}})"), Catch::Contains("metadata.name"));
  CHECK_THAT(error(R"({"kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"m","resources":{"requests":{"cpu":"lots"}}}]}})"),
             Catch::Contains("cpu"));
  CHECK_THAT(error(""), Catch::Contains("empty"));
  CheckUnchanged(h, before);
}

TEST_CASE("what-if: served on the read-only operations port, which refuses every other POST", "[whatif]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj())}));
  extender::HttpServer ops(&h.service(), extender::OpsServerOptions());
  absl::StatusOr<int> port = ops.Start("127.0.0.1", 0);
  REQUIRE(port.ok());
  httplib::Client c("127.0.0.1", *port);
  const State before = StateOf(h);
  const std::string pod = R"({"kind":"Pod","metadata":{"name":"p","namespace":"ml"},)"
                          R"("spec":{"containers":[{"name":"m","resources":{"requests":{"cpu":"1"}}}]}})";
  auto r = c.Post("/v1/whatif?format=text", pod, "application/yaml");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find("ml/p: runs now on n1") != std::string::npos);
  // One pod has no distance to speak of: "(1 pod)", not "(1 pods, at most 0 hops apart)".
  CHECK(r->body.find(": runs now (1 pod)\n") != std::string::npos);
  CHECK(r->body.find("hops apart") == std::string::npos);
  r = c.Post("/v1/whatif?format=yaml", pod, "application/yaml");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->body.find(R"(format: expected json or text, got \"yaml\")") != std::string::npos);
  r = c.Post("/filter", ArgsNames(Json::parse(pod), {"n1"}).dump(), "application/json");
  REQUIRE(r);
  CHECK(r->status == 403);
  CheckUnchanged(h, before);
  ops.Stop();
}

}  // namespace
}  // namespace berth::testing
