// GET /debug/explain (SPEC 6.8): the pod's standing, every node grouped by its first failing
// rule with numbers, and the computed change that would let it run, for each family of
// reasons: resources, queues, gangs, pools. Unknown pods 404, malformed requests 400.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

Json Explain(Harness& h, const std::string& pod) {
  const extender::Reply r = h.service().DebugExplain(pod, false);
  INFO(r.body);
  REQUIRE(r.status == 200);
  return ParseReply(r);
}

std::string Counterfactual(const Json& e) {
  REQUIRE(e["wouldRunIf"].is_array());
  REQUIRE(!e["wouldRunIf"].empty());
  return e["wouldRunIf"][0].get<std::string>();
}

void AddNodes(Harness& h, int n, const std::string& cpu) {
  Json events = Json::array();
  for (int i = 0; i < n; ++i) {
    events.push_back(Event("ADDED", MakeNode(StrCat("n", i)).Cpu(cpu).Memory("32Gi").Pods(110).Obj()));
  }
  h.Apply(events);
}

void Add(Harness& h, const std::vector<MakePod>& pods) {
  Json events = Json::array();
  for (const MakePod& p : pods) events.push_back(Event("ADDED", p.Obj()));
  h.Apply(events);
}

TEST_CASE("explain: unknown pods 404, malformed requests 400", "[explain]") {
  Harness h;
  extender::Reply r = h.service().DebugExplain("ml/nope", false);
  CHECK(r.status == 404);
  CHECK(Contains(r.body, "pod ml/nope is not in berth's model"));
  for (const char* bad : {"", "nope", "/x", "x/", "a/b/c"}) {
    r = h.service().DebugExplain(bad, false);
    CHECK(r.status == 400);
    CHECK(Contains(r.body, "expected ?pod=NAMESPACE/NAME"));
  }
}

TEST_CASE("explain: resources: the closest node and what it lacks, or no node large enough", "[explain]") {
  Harness h;
  AddNodes(h, 3, "8");
  Add(h, {MakePod("a").Cpu("7").Node("n0").Phase("Running"), MakePod("b").Cpu("5").Node("n1").Phase("Running"),
          MakePod("c").Cpu("6").Node("n2").Phase("Running"), MakePod("wants").Cpu("4")});
  Json e = Explain(h, "default/wants");
  CHECK(e["state"] == "next to start in queue default; no node takes it now");
  CHECK(e["fits"]["count"] == 0);
  REQUIRE(e["rejected"].size() == 1);  // one verdict message for all three nodes
  CHECK(e["rejected"][0]["reason"] == "InsufficientResource");
  CHECK(e["rejected"][0]["verdict"] == "unschedulable");
  CHECK(e["rejected"][0]["count"] == 3);
  CHECK(Contains(e["rejected"][0]["detail"].get<std::string>(), "short by"));
  // n1 has 3 free: one more CPU is the smallest change.
  CHECK(Counterfactual(e) ==
        "fits on node n1 once 1 more cpu are free there (pods of lower priority could be preempted for it)");

  Add(h, {MakePod("huge").Cpu("12")});
  e = Explain(h, "default/huge");
  CHECK(e["rejected"][0]["reason"] == "ExceedsAllocatable");
  CHECK(Contains(Counterfactual(e), "no node is large enough; the closest, n0, would need 4 more cpu allocatable"));

  Add(h, {MakePod("fpga").Cpu("1").Request("example.com/fpga", "1")});
  e = Explain(h, "default/fpga");
  CHECK(Contains(Counterfactual(e), "no node advertises example.com/fpga"));
}

TEST_CASE("explain: queues: position, backfill, limit, budget, unknown queue", "[explain]") {
  Harness h;
  AddNodes(h, 2, "4");
  h.Apply(Json::array({Event("ADDED", MakeQueue("a").Obj()), Event("ADDED", MakeQueue("b").Obj())}));
  auto job = [&](const std::string& name, const std::string& queue, const std::string& cpu, int age_min) {
    return MakePod(name).Cpu(cpu).Label("berth.io/queue", queue)
        .Created(absl::FormatTime(absl::RFC3339_sec, h.clock().Now() - absl::Minutes(age_min), absl::UTCTimeZone()));
  };
  // n0 is full; n1 has 3 free. The head (4 CPUs) keeps n1's room; "small" would take it.
  Add(h, {MakePod("hog").Cpu("4").Node("n0").Phase("Running").Label("berth.io/queue", "b"),
          MakePod("b-run").Cpu("1").Node("n1").Phase("Running").Label("berth.io/queue", "b"),
          job("head", "a", "4", 9), job("small", "a", "1", 8), job("later", "a", "4", 7)});
  Json e = Explain(h, "default/small");
  CHECK(e["admission"]["admitted"] == false);
  CHECK(e["admission"]["reason"] == "QueueBackfill");
  CHECK(e["admission"]["state"] == "backfill-blocked");
  CHECK(Counterfactual(e) == "starts as soon as default/head has started (it fits only in the room kept "
                             "for that job), or when room for cpu=1 pods=1 is free outside it");
  e = Explain(h, "default/head");
  CHECK(e["admission"]["state"] == "next");
  CHECK(Contains(e["state"].get<std::string>(), "next to start in queue a"));
  // Nothing is admitted ahead of it: what decides is room (n1 has 3 of its 4 CPUs free).
  CHECK(Counterfactual(e) ==
        "fits on node n1 once 1 more cpu are free there (pods of lower priority could be preempted for it)");

  // Two jobs that fit, the second planned behind the first: it is told the room is planned.
  Harness p;
  AddNodes(p, 1, "4");
  Add(p, {job("first", "", "4", 5), job("second", "", "4", 4)});
  e = Explain(p, "default/second");
  CHECK(e["state"] == "next to start in queue default (the room it fits now is planned for jobs ahead of it)");
  CHECK(e["fits"]["count"] == 1);
  CHECK(Counterfactual(e) == "starts once room for cpu=4 pods=1 is free beyond what the 1 admitted job ahead "
                             "of it takes (they bind first), or once pods of lower priority are preempted for it");
  e = Explain(h, "default/later");
  CHECK(e["admission"]["reason"] == "QueueWaiting");
  CHECK(e["admission"]["waitingAhead"] == 2);
  CHECK(Counterfactual(e) == "admitted once the 2 waiting jobs ahead of it (2 in queue a) have started, "
                             "the next being default/head, and room for cpu=4 pods=1 is free");

  // b runs 5 of 8 CPUs, non-preemptible: its share is 4, its limit 4.8.
  Harness l;  // CPU-only nodes: usage is CPU cores alone
  l.Apply(Json::array({Event("ADDED", MakeNode("n0").Cpu("4").Pods(110).Obj()),
                       Event("ADDED", MakeNode("n1").Cpu("4").Pods(110).Obj())}));
  l.Apply(Json::array({Event("ADDED", MakeQueue("a").Obj()), Event("ADDED", MakeQueue("b").Obj())}));
  Add(l, {MakePod("b1").Cpu("4").Node("n0").Phase("Running").Label("berth.io/queue", "b"),
          MakePod("a1").Cpu("1").Node("n1").Phase("Running").Label("berth.io/queue", "a"),
          MakePod("b2").Cpu("1").Label("berth.io/queue", "b"),
          MakePod("b3").Cpu("1").Label("berth.io/queue", "b").Annotation("berth.io/lifetime", "30m")});
  e = Explain(l, "default/b2");
  CHECK(e["admission"]["reason"] == "QueueLimit");
  CHECK(Counterfactual(e) == "starts when queue b's non-preemptible usage is at most 3.8 (it is 4.0: 0.2 must "
                             "finish), or with a berth.io/lifetime (preemptible jobs are not held by this limit)");
  e = Explain(l, "default/b3");
  CHECK(e["admission"]["reason"] == "QueueBudget");
  CHECK(Counterfactual(e) == "starts when 30 more resource-minutes of queue b's excess budget are returned (jobs "
                             "with a lifetime end), or with berth.io/lifetime: 0s (which draws nothing)");

  Add(l, {MakePod("lost").Cpu("1").Label("berth.io/queue", "team-x")});
  e = Explain(l, "default/lost");
  CHECK(e["admission"]["reason"] == "QueueUnknown");
  CHECK(Counterfactual(e) == "a Queue named team-x exists (berth.io/v1alpha1), or the pod's berth.io/queue label "
                             "names one that does: default, a, b");
}

TEST_CASE("explain: gangs: no PodGroup, members missing, not placeable, max hops", "[explain]") {
  Harness h;
  AddNodes(h, 3, "8");
  auto member = [](const std::string& gang, int i) {
    return MakePod(StrCat(gang, "-", i)).Namespace("ml").Cpu("6").Label("scheduling.x-k8s.io/pod-group", gang);
  };
  Add(h, {member("g", 0), member("g", 1), member("g", 2), member("g", 3)});
  Json e = Explain(h, "ml/g-0");
  CHECK(e["gang"] == "g");
  CHECK(e["admission"]["reason"] == "GangNoPodGroup");
  CHECK(Counterfactual(e) == "a PodGroup ml/g exists (scheduling.x-k8s.io/v1alpha1, spec.minMember)");
  REQUIRE(e["rejected"].size() == 1);
  CHECK(e["rejected"][0]["count"] == 3);

  h.Apply(Json::array({Event("ADDED", MakePodGroup("g").Namespace("ml").MinMember(5).Obj())}));
  e = Explain(h, "ml/g-0");
  CHECK(e["admission"]["reason"] == "GangMembersMissing");
  CHECK(Counterfactual(e) == "1 more member of gang ml/g exist (4 of minMember 5), or minMember were 4");

  h.Apply(Json::array({Event("ADDED", MakePodGroup("g").Namespace("ml").MinMember(4).Obj())}));
  e = Explain(h, "ml/g-0");
  CHECK(e["admission"]["reason"] == "GangNotPlaceable");
  CHECK(Counterfactual(e) == "fits if minMember were 3 (3 of 4 members are placeable now), or when room for "
                             "1 more member is free");

  // Two members on two nodes under different leaves: 4 hops; max-hops 2 forbids it.
  Harness t;
  h.Apply(Json::array());
  t.Apply(Json::array({Event("ADDED", MakeNode("x").Cpu("8").Memory("32Gi").Pods(110).Topology("z", "s", "l1").Obj()),
                       Event("ADDED", MakeNode("y").Cpu("8").Memory("32Gi").Pods(110).Topology("z", "s", "l2").Obj()),
                       Event("ADDED", MakePodGroup("tight").Namespace("ml").MinMember(2).Obj())}));
  Add(t, {member("tight", 0).Annotation("berth.io/max-hops", "2"), member("tight", 1).Annotation("berth.io/max-hops", "2")});
  e = Explain(t, "ml/tight-0");
  CHECK(e["admission"]["reason"] == "GangMaxHops");
  CHECK(Counterfactual(e) == "fits if berth.io/max-hops were 4 (its members fit 4 hops apart now)");
}

TEST_CASE("explain: pools, placed and foreign pods, and the text report", "[explain]") {
  Harness h;
  AddNodes(h, 2, "8");
  Add(h, {MakePod("nowhere").Cpu("1").Annotation("berth.io/pool", "missing"),
          MakePod("web").Scheduler("default-scheduler").Cpu("1"),
          MakePod("done").Cpu("1").Node("n0").Phase("Running")});
  Json e = Explain(h, "default/nowhere");
  CHECK(e["pool"] == "missing");
  CHECK(e["rejected"][0]["reason"] == "UnknownPool");
  CHECK(Counterfactual(e) == "a Pool named missing exists (berth.io/v1alpha1), or the pod's berth.io/pool "
                             "annotation names one that does");
  e = Explain(h, "default/web");
  CHECK(e["managed"] == false);
  CHECK(Contains(e["state"].get<std::string>(), "not berth's"));
  e = Explain(h, "default/done");
  CHECK(e["state"] == "placed on n0");
  CHECK(e["node"] == "n0");

  Add(h, {MakePod("ok").Cpu("1")});
  const extender::Reply text = h.service().DebugExplain("default/nowhere", true);
  CHECK(text.status == 200);
  CHECK(text.content_type.rfind("text/plain", 0) == 0);
  CHECK(Contains(text.body, "pod       default/nowhere"));
  CHECK(Contains(text.body, "nodes that do not take it:"));
  CHECK(Contains(text.body, "2 nodes UnknownPool"));
  CHECK(Contains(text.body, "would run if:\n  - a Pool named missing exists"));
  e = Explain(h, "default/ok");
  CHECK(e["fits"]["count"] == 2);
  CHECK(e["wouldRunIf"].empty());
}

// Pool "a" (node a1, full of its own pod) and pool "b" (node b1, empty).
void TwoPools(Harness& h, bool a_borrows, bool b_shares) {
  MakePool a = MakePool("a").Label("pool", "a");
  if (!a_borrows) a.NoBorrowing();
  MakePool b = MakePool("b").Label("pool", "b");
  if (!b_shares) b.NoSharing();
  h.Apply(Json::array({Event("ADDED", a.Obj()), Event("ADDED", b.Obj()),
                       Event("ADDED", MakeNode("a1").Cpu("8").Pods(110).Label("pool", "a").Obj()),
                       Event("ADDED", MakeNode("b1").Cpu("8").Pods(110).Label("pool", "b").Obj()),
                       Event("ADDED", MakePod("a-own").Cpu("8").Annotation("berth.io/pool", "a")
                                          .Node("a1").Phase("Running").Obj()),
                       Event("ADDED", MakePod("p").Cpu("1").Annotation("berth.io/pool", "a").Obj())}));
}

TEST_CASE("explain: pools that do not borrow or do not lend", "[explain]") {
  {
    Harness h;
    TwoPools(h, /*a_borrows=*/false, /*b_shares=*/true);
    const Json e = Explain(h, "default/p");
    bool borrowing = false;
    for (const Json& g : e["rejected"]) borrowing = borrowing || g["reason"] == "BorrowingDisabled";
    CHECK(borrowing);
    CHECK(Counterfactual(e) == "room frees in its home pool a, or pool a allows borrowing (spec.disableBorrowing: false)");
  }
  {
    Harness h;
    TwoPools(h, /*a_borrows=*/true, /*b_shares=*/false);
    const Json e = Explain(h, "default/p");
    bool sharing = false;
    for (const Json& g : e["rejected"]) sharing = sharing || g["reason"] == "SharingDisabled";
    CHECK(sharing);
    CHECK(Counterfactual(e) == "pool b lends its nodes (spec.disableSharing: false), or room frees in its home pool a");
  }
}

TEST_CASE("explain: GPU rules: CPU kept for free GPUs, too little CPU per GPU", "[explain]") {
  policy::PolicyConfig reject;
  reject.gpu.min_cpu_action = policy::GpuConfig::MinCpuAction::kReject;
  Harness h(reject);
  h.Apply(Json::array({Event("ADDED", MakeNode("g").Cpu("16").Memory("64Gi").Gpu(4).Pods(110).Obj())}));
  // A CPU-only pod that would leave less than 2 CPUs per free GPU.
  Add(h, {MakePod("cpu-hungry").Cpu("12"), MakePod("starved").Cpu("500m").Gpu(1)});
  Json e = Explain(h, "default/cpu-hungry");
  CHECK(e["rejected"][0]["reason"] == "GpuReserved");
  CHECK(Contains(e["rejected"][0]["detail"].get<std::string>(), "4 of 4 GPUs free"));
  CHECK(Contains(Counterfactual(e), "it asks for less CPU or memory"));
  e = Explain(h, "default/starved");
  CHECK(e["admission"]["reason"] == "CpuPerGpuTooLow");
  CHECK(Counterfactual(e) == "it asks for at least 1 cpu (gpu.minCpuPerGpu per GPU; it requests 500m cpu for 1 GPU)");
}

TEST_CASE("explain: home pool with room, the lender pool, a reclaim under way", "[explain]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakePool("a").Label("pool", "a").Obj()),
                       Event("ADDED", MakePool("b").Label("pool", "b").Obj()),
                       Event("ADDED", MakePool("c").Label("pool", "c").Obj()),
                       Event("ADDED", MakeNode("a1").Cpu("8").Pods(110).Label("pool", "a").Obj()),
                       Event("ADDED", MakeNode("b1").Cpu("8").Pods(110).Label("pool", "b").Obj()),
                       Event("ADDED", MakeNode("c1").Cpu("4").Pods(110).Label("pool", "c").Obj())}));
  Add(h, {MakePod("home").Cpu("1").Annotation("berth.io/pool", "a")});
  Json e = Explain(h, "default/home");
  CHECK(e["fits"]["nodes"] == Json::array({"a1"}));
  CHECK(e["rejected"][0]["reason"] == "HomePoolHasRoom");
  CHECK(e["rejected"][0]["count"] == 2);
  CHECK(e["wouldRunIf"].empty());  // it runs now

  // a is full: borrowing goes to b (most free room); c's node is not the lender.
  Add(h, {MakePod("a-own").Cpu("8").Annotation("berth.io/pool", "a").Node("a1").Phase("Running"),
          MakePod("borrower").Cpu("2").Annotation("berth.io/pool", "a")});
  e = Explain(h, "default/borrower");
  CHECK(e["fits"]["nodes"] == Json::array({"b1"}));
  bool not_lender = false;
  for (const Json& g : e["rejected"]) not_lender = not_lender || g["reason"] == "NotLenderPool";
  CHECK(not_lender);

  // A pod of pool b whose home is full of a's borrower: the borrower is evicted (slowly) and
  // the room held; explain says what it waits for.
  RecordingEvictor evictor;
  h.service().SetEvictor(&evictor);
  Add(h, {MakePod("lent").Cpu("8").Annotation("berth.io/pool", "a").Node("b1").Phase("Running"),
          MakePod("b-job").Cpu("4").Annotation("berth.io/pool", "b")});
  const Verdicts v = FilterPod(h, MakePod("b-job").Cpu("4").Annotation("berth.io/pool", "b"), {"a1", "b1", "c1"});
  h.service().DrainIntents();
  CHECK(evictor.evicted == std::vector<std::string>{"default/lent"});
  CHECK(Contains(v.Why("b1"), "room held on node b1"));
  e = Explain(h, "default/b-job");
  CHECK(Counterfactual(e) == "reclaim in pool b: room held on node b1, waiting for 1 evicted pod(s) to exit: "
                             "default/lent; it runs there once they have left (the room is held for it)");
}

TEST_CASE("explain: a resource no node offers, a gang member's reserved node, an elastic member", "[explain]") {
  Harness h;
  AddNodes(h, 3, "8");
  // Learned from a filter: the pod asks for a resource no node has ever advertised.
  const MakePod fpga = MakePod("fpga").Cpu("1").Request("example.com/fpga", "1");
  FilterPod(h, fpga, {"n0"});
  Json e = Explain(h, "default/fpga");
  CHECK(e["rejected"][0]["reason"] == "ResourceNotOffered");
  CHECK(Counterfactual(e) == "no node advertises example.com/fpga: it runs only once a node offers it");

  // A gang of 2 (minimum 2) plus an elastic third member; each takes a whole node.
  h.Apply(Json::array({Event("ADDED", MakePodGroup("g").Namespace("ml").MinMember(2).Obj())}));
  auto member = [](int i) {
    return MakePod(StrCat("g-", i)).Namespace("ml").Cpu("6").Label("scheduling.x-k8s.io/pod-group", "g");
  };
  Add(h, {member(0), member(1)});
  REQUIRE(FilterPod(h, member(0), {"n0", "n1", "n2"}).fit.size() == 1);  // the gang is reserved
  e = Explain(h, "ml/g-1");
  REQUIRE(e["fits"]["count"] == 1);
  bool elsewhere = false;
  for (const Json& g : e["rejected"]) elsewhere = elsewhere || g["reason"] == "GangReservedElsewhere";
  CHECK(elsewhere);
  // Bind both; a third member waits for room (the third node is taken by someone else).
  for (int i = 0; i < 2; ++i) {
    const Verdicts v = FilterPod(h, member(i), {"n0", "n1", "n2"});
    REQUIRE(v.fit.size() == 1);
    BindOk(h, member(i), v.fit[0]);
  }
  Add(h, {MakePod("other").Cpu("8").Node("n2").Phase("Running"), member(2)});
  h.clock().Advance(absl::Minutes(5));
  e = Explain(h, "ml/g-2");
  CHECK(e["admission"]["reason"] == "GangElasticWaiting");
  CHECK(Counterfactual(e) == "room for cpu=6 pods=1 is free near gang ml/g (free room goes to the least "
                             "fulfilled elastic gang first)");
}

}  // namespace
}  // namespace berth::testing
