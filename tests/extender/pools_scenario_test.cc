// Pools through the verbs (SPEC 6.1): membership, home pool first, borrowing, flags, borrowers
// in /debug/pods, preemption rules, the pool statistics of /debug/pools, and room that counts
// only on nodes the pod may go to (nodeSelector, taints).

#include <algorithm>
#include <map>
#include <string>

#include "catch2/catch.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/scenario.h"

namespace berth::testing {
namespace {

// Two pools of two nodes each (8 CPUs), selected by the label `pool`, plus one unlabelled node
// that belongs to the default pool.
std::vector<Json> TwoPools(bool a_borrows = true, bool b_shares = true) {
  return {MakePool("team-a").Label("pool", "a").NoBorrowing(!a_borrows).Obj(),
          MakePool("team-b").Label("pool", "b").NoSharing(!b_shares).Obj(),
          MakeNode("a1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Obj(),
          MakeNode("a2").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Obj(),
          MakeNode("b1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Obj(),
          MakeNode("b2").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Obj(),
          MakeNode("d1").Cpu("8").Memory("32Gi").Pods(110).Obj()};
}

MakePod InPool(const std::string& name, const std::string& pool, const std::string& cpu) {
  return MakePod(name).Namespace("ml").Annotation("berth.io/pool", pool).Cpu(cpu);
}

const std::vector<std::string> kAll = {"a1", "a2", "b1", "b2", "d1"};

TEST_CASE("pools: a pod stays in its home pool while it has room", "[pools]") {
  RunScenario({.name = "home first",
               .objects = TwoPools(),
               .steps = {FilterStep{.pod = InPool("p", "team-a", "2"),
                                    .nodes = kAll,
                                    .expect = {{"a1", Expect::kFit, ""},
                                               {"a2", Expect::kFit, ""},
                                               {"b1", Expect::kUnresolvable, "home pool team-a, which has room"},
                                               {"b2", Expect::kUnresolvable, "home pool team-a"},
                                               {"d1", Expect::kUnresolvable, "home pool team-a"}}},
                         // No annotation: the default pool, here node d1 only.
                         FilterStep{.pod = MakePod("q").Cpu("2"),
                                    .nodes = kAll,
                                    .expect = {{"d1", Expect::kFit, ""},
                                               {"a1", Expect::kUnresolvable, "home pool default"}}},
                         // The seed's annotation key works too.
                         FilterStep{.pod = MakePod("s").Annotation("resource.aibee.cn/pool", "team-b").Cpu("1"),
                                    .nodes = kAll,
                                    .expect = {{"b1", Expect::kFit, ""},
                                               {"a1", Expect::kUnresolvable, "home pool team-b"}}}}});
}

TEST_CASE("pools: an unknown pool is a clear rejection, not a silent default", "[pools]") {
  RunScenario({.name = "unknown pool",
               .objects = TwoPools(),
               .steps = {FilterStep{.pod = InPool("p", "team-z", "1"),
                                    .nodes = kAll,
                                    .expect = {{"a1", Expect::kUnresolvable, "pool team-z does not exist"},
                                               {"d1", Expect::kUnresolvable, "pool team-z does not exist"}}}}});
}

TEST_CASE("pools: a full home pool borrows from the sharing pool with most free room", "[pools]") {
  Scenario s{.name = "borrowing", .objects = TwoPools()};
  // Fill team-a: two 7-CPU pods.
  for (const char* n : {"a1", "a2"}) {
    MakePod fill = InPool(std::string("fill-") + n, "team-a", "7");
    s.steps.push_back(FilterStep{.pod = fill, .nodes = {n}, .expect = {{n, Expect::kFit, ""}}});
    s.steps.push_back(BindStep{.pod = fill, .node = n});
  }
  // team-b has a pod on b1; the default pool's d1 is busier. The lender is the pool with the
  // most free CPU: team-b (8 - 1 + 8 = 15) over default (8 - 6 = 2).
  s.objects.push_back(MakePod("busy").Scheduler("default-scheduler").Cpu("6").Node("d1").Phase("Running").Obj());
  s.objects.push_back(InPool("b-own", "team-b", "1").Node("b1").Phase("Running").Obj());
  MakePod borrower = InPool("borrower", "team-a", "2");
  s.steps.push_back(FilterStep{.pod = borrower,
                               .nodes = kAll,
                               .expect = {{"a1", Expect::kFailed, "insufficient cpu"},
                                          {"a2", Expect::kFailed, "insufficient cpu"},
                                          {"b1", Expect::kFit, ""},
                                          {"b2", Expect::kFit, ""},
                                          {"d1", Expect::kUnresolvable, "borrowing from pool team-b"}}});
  s.steps.push_back(BindStep{.pod = borrower, .node = "b2"});
  RunScenario(s);
}

TEST_CASE("pools: borrowing and sharing can be switched off", "[pools]") {
  auto fill_team_a = [](Scenario& s) {
    for (const char* n : {"a1", "a2"}) {
      MakePod fill = InPool(std::string("fill-") + n, "team-a", "8");
      s.steps.push_back(FilterStep{.pod = fill, .nodes = {n}, .expect = {{n, Expect::kFit, ""}}});
      s.steps.push_back(BindStep{.pod = fill, .node = n});
    }
  };
  SECTION("home pool without borrowing") {
    Scenario s{.name = "no borrowing", .objects = TwoPools(/*a_borrows=*/false)};
    fill_team_a(s);
    s.steps.push_back(FilterStep{.pod = InPool("p", "team-a", "1"),
                                 .nodes = kAll,
                                 .expect = {{"b1", Expect::kUnresolvable, "does not allow borrowing"},
                                            {"d1", Expect::kUnresolvable, "does not allow borrowing"}}});
    RunScenario(s);
  }
  SECTION("a pool that does not share") {
    Scenario s{.name = "no sharing", .objects = TwoPools(true, /*b_shares=*/false)};
    fill_team_a(s);
    s.steps.push_back(FilterStep{.pod = InPool("p", "team-a", "1"),
                                 .nodes = kAll,
                                 .expect = {{"b1", Expect::kUnresolvable, "pool team-b does not lend"},
                                            {"d1", Expect::kFit, ""}}});
    RunScenario(s);
  }
}

TEST_CASE("pools: nodes matching no pool or several go to default; label changes move nodes",
          "[pools]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakePool("x").Label("zone", "z1").Obj()),
                       Event("ADDED", MakePool("y").Label("gpu", "yes").Obj()),
                       Event("ADDED", MakeNode("n1").Cpu("4").Label("zone", "z1").Obj()),
                       Event("ADDED", MakeNode("n2").Cpu("4").Label("zone", "z1").Label("gpu", "yes").Obj()),
                       Event("ADDED", MakeNode("n3").Cpu("4").Obj())}));
  auto pool_of = [&](const std::string& node) {
    const Json nodes = ParseReply(h.service().DebugNodes(false))["nodes"];
    for (const Json& n : nodes) {
      if (n["name"] == node) return n["pool"].get<std::string>();
    }
    return std::string("missing");
  };
  CHECK(pool_of("n1") == "x");
  CHECK(pool_of("n2") == "default");  // both x and y select it
  CHECK(pool_of("n3") == "default");  // none selects it
  h.Apply(Event("MODIFIED", MakeNode("n3").Cpu("4").Label("gpu", "yes").Obj()));
  CHECK(pool_of("n3") == "y");
  h.Apply(Event("DELETED", MakePool("y").Label("gpu", "yes").Obj()));
  CHECK(pool_of("n3") == "default");
  CHECK(pool_of("n2") == "x");  // only x selects it now
}

TEST_CASE("pools: borrowers are visible and counted in the pool statistics", "[pools]") {
  Harness h;
  Json events = Json::array();
  for (const Json& o : TwoPools()) events.push_back(Event("ADDED", o));
  events.push_back(Event("ADDED", InPool("a-run", "team-a", "3").Node("a1").Phase("Running").Obj()));
  events.push_back(Event("ADDED", InPool("a-borrow", "team-a", "2").Node("b1").Phase("Running").Obj()));
  events.push_back(Event("ADDED", InPool("a-wait", "team-a", "5").Obj()));
  events.push_back(Event("ADDED", MakePod("other").Scheduler("default-scheduler").Cpu("1").Node("b2")
                                      .Phase("Running").Obj()));
  h.Apply(events);

  const Json pods = ParseReply(h.service().DebugPods(false, false));
  for (const Json& p : pods.is_array() ? pods : pods["pods"]) {
    if (p["name"] == "a-borrow") CHECK(p["borrower"] == true);
    if (p["name"] == "a-run") CHECK(p["borrower"] == false);
  }
  const Json pools = ParseReply(h.service().DebugPools(false))["pools"];
  auto stats = [&](const std::string& name) {
    for (const Json& p : pools) {
      if (p["name"] == name) return p;
    }
    FAIL("no pool " << name);
    return Json();
  };
  const Json a = stats("team-a");
  const Json b = stats("team-b");
  CHECK(a["flags"] == "pbs");
  CHECK(a["capacity"]["cpu"] == "16");
  CHECK(a["capacity"]["nodes"] == 2);
  CHECK(a["used"]["cpu"] == "3");
  CHECK(a["borrowed"]["cpu"] == "2");
  CHECK(a["borrowed"]["pods"] == 1);
  CHECK(a["pending"]["cpu"] == "5");
  CHECK(a["pending"]["pods"] == 1);
  CHECK(b["used"]["cpu"] == "3");  // the borrower and the other scheduler's pod
  CHECK(b["shared"]["cpu"] == "2");
  CHECK(b["shared"]["pods"] == 1);
  CHECK(b["used"]["nodes"] == 2);
  CHECK(stats("default")["capacity"]["nodes"] == 1);

  const std::string text = h.service().DebugPools(true).body;
  CHECK(text.find("team-a") != std::string::npos);
  CHECK(text.find("Borrowed") != std::string::npos);
  CHECK(text.find("STORAGE") != std::string::npos);
}

TEST_CASE("pools: preemption follows pool rules", "[pools]") {
  // b1 holds a team-b pod (in-pool) and a team-a borrower; b2 holds a production pod and a pod of
  // another scheduler.
  std::vector<Json> objects = TwoPools();
  objects[1] = MakePool("team-b").Label("pool", "b").Obj();
  objects.push_back(InPool("b-own", "team-b", "4").Uid("b-own").Priority(1).Node("b1").Phase("Running").Obj());
  objects.push_back(InPool("lender-borrower", "team-a", "4").Uid("borrower").Priority(100).Node("b1")
                        .Phase("Running").Obj());
  objects.push_back(InPool("prod", "team-b", "4").Uid("prod").Priority(10000).Node("b2").Phase("Running").Obj());
  objects.push_back(MakePod("web").Uid("web").Scheduler("default-scheduler").Cpu("4").Node("b2")
                        .Phase("Running").Obj());
  RunScenario({.name = "pool preemption",
               .objects = objects,
               .steps = {
                   // A team-b pod (in its home pool) asks for b1 with the in-pool victim:
                   // berth evicts the borrower instead, even though it has higher priority.
                   PreemptStep{.pod = InPool("b-new", "team-b", "4").Priority(1000),
                               .proposal = {{"b1", {"b-own"}}},
                               .expect = {{"b1", {"borrower"}}}},
                   // Production pods and other schedulers' pods are never victims.
                   PreemptStep{.pod = InPool("b-new", "team-b", "4").Priority(1000),
                               .proposal = {{"b2", {"prod", "web"}}},
                               .expect = {}},
                   // A borrower never takes an in-pool pod's place.
                   PreemptStep{.pod = InPool("a-new", "team-a", "4").Priority(5000),
                               .proposal = {{"b1", {"b-own"}}},
                               .expect = {}},
               }});
  SECTION("a pool with disablePreemption is never a preemption target") {
    std::vector<Json> locked = objects;
    locked[1] = MakePool("team-b").Label("pool", "b").NoPreemption().Obj();
    RunScenario({.name = "no preemption",
                 .objects = locked,
                 .steps = {PreemptStep{.pod = InPool("b-new", "team-b", "4").Priority(1000),
                                       .proposal = {{"b1", {"b-own", "borrower"}}},
                                       .expect = {}}}});
  }
}


// Filter verdicts by node: "fit", or the reason of a failed or unresolvable node.
/// node -> "fit", or the message of the verdict that rejects it (the answer carries its
/// reason's summary).
std::map<std::string, std::string> FilterVerdicts(Harness& h, const Json& pod,
                                                  const std::vector<std::string>& nodes) {
  std::vector<policy::NodeVerdict> verdicts;
  const Json r = h.Filter(ArgsNames(pod, nodes), &verdicts);
  INFO("filter reply: " << r.dump());
  REQUIRE((!r.contains("Error") || r["Error"].is_null() || r["Error"] == ""));
  REQUIRE(verdicts.size() == nodes.size());
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (verdicts[i].ok()) {
      CHECK(std::count(r["NodeNames"].begin(), r["NodeNames"].end(), Json(nodes[i])) == 1);
      out[nodes[i]] = "fit";
      continue;
    }
    const bool unresolvable = verdicts[i].fit == policy::Fit::kUnresolvable;
    CHECK(r[unresolvable ? "FailedAndUnresolvableNodes" : "FailedNodes"].contains(nodes[i]));
    out[nodes[i]] = verdicts[i].message;
  }
  return out;
}

// team-a: a1 (no disk label, empty) and a2 (disk=ssd, full); team-b: b1 (disk=ssd) and b2, both
// partly used; default: d1 (no disk label, empty, so the most free CPU).
Json SsdPools() {
  return Json::array(
      {Event("ADDED", MakePool("team-a").Label("pool", "a").Obj()),
       Event("ADDED", MakePool("team-b").Label("pool", "b").Obj()),
       Event("ADDED", MakeNode("a1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Obj()),
       Event("ADDED", MakeNode("a2").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Label("disk", "ssd").Obj()),
       Event("ADDED", MakeNode("b1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Label("disk", "ssd").Obj()),
       Event("ADDED", MakeNode("b2").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Obj()),
       Event("ADDED", MakeNode("d1").Cpu("8").Memory("32Gi").Pods(110).Obj()),
       // a2 is full with a team-a pod of the same priority as the pods below: nothing to reclaim.
       Event("ADDED", InPool("a-fill", "team-a", "8").Node("a2").Phase("Running").Obj()),
       Event("ADDED", MakePod("b-busy-1").Scheduler("default-scheduler").Cpu("4").Node("b1").Phase("Running").Obj()),
       Event("ADDED", MakePod("b-busy-2").Scheduler("default-scheduler").Cpu("7").Node("b2").Phase("Running").Obj())});
}

TEST_CASE("pools: room on a home node the pod's nodeSelector excludes is no room", "[pools][placement]") {
  Harness h;
  h.Apply(SsdPools());
  const std::vector<std::string> nodes = {"a1", "a2", "b1", "b2", "d1"};

  // A plain team-a pod has room at home, on a1: it does not borrow.
  const Json plain = InPool("plain", "team-a", "2").Obj();
  std::map<std::string, std::string> v = FilterVerdicts(h, plain, nodes);
  CHECK(v["a1"] == "fit");
  CHECK(v["b1"].find("home pool team-a, which has room") != std::string::npos);
  CHECK(v["d1"].find("home pool team-a, which has room") != std::string::npos);

  // The same pod asking for an ssd node: a1 is not one and a2 is full, so the home pool has no
  // room and the pod borrows. Only team-b has an ssd node with room (b1), so it lends, although
  // the default pool has more free CPU (d1: 8 against 1 + 4).
  Json ssd = InPool("ssd", "team-a", "2").Obj();
  ssd["spec"]["nodeSelector"] = {{"disk", "ssd"}};
  v = FilterVerdicts(h, ssd, nodes);
  INFO("a1: " << v["a1"] << "; d1: " << v["d1"]);
  CHECK(v["b1"] == "fit");
  CHECK(v["d1"].find("borrowing from pool team-b") != std::string::npos);
  CHECK(v["a2"].find("insufficient cpu") != std::string::npos);

  // Without a node it may use anywhere, it is told no pool lends room.
  Json nvme = InPool("nvme", "team-a", "2").Obj();
  nvme["spec"]["nodeSelector"] = {{"disk", "nvme"}};
  v = FilterVerdicts(h, nvme, nodes);
  CHECK(v["b1"].find("no pool lends room") != std::string::npos);
  CHECK(v["d1"].find("no pool lends room") != std::string::npos);
}

TEST_CASE("pools: an untolerated taint on the home pool's free node sends the pod borrowing",
          "[pools][placement]") {
  Harness h;
  h.Apply(SsdPools());
  h.Apply(Event("MODIFIED", MakeNode("a1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a")
                                .Taint("maintenance", "true", "NoSchedule").Obj()));
  const std::vector<std::string> nodes = {"a1", "a2", "b1", "b2", "d1"};
  const Json pod = InPool("p", "team-a", "2").Obj();
  std::map<std::string, std::string> v = FilterVerdicts(h, pod, nodes);
  // Home has no room it may use; the default pool has the most free CPU and lends.
  CHECK(v["d1"] == "fit");
  CHECK(v["b1"].find("borrowing from pool default") != std::string::npos);
  // Tolerating the taint, the pod stays home.
  Json tolerant = InPool("tolerant", "team-a", "2").Obj();
  tolerant["spec"]["tolerations"] = Json::array({{{"key", "maintenance"}, {"operator", "Exists"}}});
  v = FilterVerdicts(h, tolerant, nodes);
  CHECK(v["d1"].find("home pool team-a, which has room") != std::string::npos);
  CHECK(v["b1"].find("home pool team-a, which has room") != std::string::npos);
}

}  // namespace
}  // namespace berth::testing
