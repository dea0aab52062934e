// Pool reclaim in Kubernetes mode, against the in-process fake API server: the victims go
// through the Eviction API (a disruption budget's 429 stops the reclaim), each gets an Event
// saying why, the freed room is held for the pod, and housekeeping starts reclaims for pods
// kube-scheduler never brings to filter.

#include <optional>
#include <string>

#include "catch2/catch.hpp"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"

namespace berth::testing {
namespace {

Json Parse(const extender::Reply& r) { return Json::parse(r.body); }

// team-b's two nodes are full of team-a borrowers; a team-b pod waits.
void Seed(FakeApiServer& api) {
  REQUIRE(api.Create("pools", "", MakePool("team-a").Label("pool", "a").Obj()).ok());
  REQUIRE(api.Create("pools", "", MakePool("team-b").Label("pool", "b").Obj()).ok());
  for (const char* n : {"a1", "b1", "b2"}) {
    REQUIRE(api.Create("nodes", "", MakeNode(n).Cpu("8").Memory("32Gi").Pods(110)
                                         .Label("pool", std::string(1, n[0])).Obj()).ok());
  }
  REQUIRE(api.Create("pods", "ml", MakePod("a-own").Namespace("ml").Scheduler("berth-scheduler")
                                       .Annotation("berth.io/pool", "team-a").Cpu("8").Node("a1")
                                       .Phase("Running").Obj()).ok());
  for (const char* n : {"b1", "b2"}) {
    // Evicted, a borrower terminates for a second (its grace period) before it is gone.
    Json borrower = MakePod(std::string("borrow-") + n).Namespace("ml")
                        .Scheduler("berth-scheduler").Annotation("berth.io/pool", "team-a")
                        .Cpu("6").Priority(5000).Node(n).Phase("Running").Obj();
    borrower["spec"]["terminationGracePeriodSeconds"] = 1;
    REQUIRE(api.Create("pods", "ml", borrower).ok());
  }
  REQUIRE(api.Create("pods", "ml", MakePod("b-job").Namespace("ml").Scheduler("berth-scheduler")
                                       .Annotation("berth.io/pool", "team-b").Cpu("4").Obj()).ok());
}

std::string UidOf(FakeApiServer& api, const std::string& name) {
  return api.Get("pods", "ml", name).value()["metadata"]["uid"];
}

Json FilterArgs(FakeApiServer& api, const std::string& name) {
  return ArgsNames(api.Get("pods", "ml", name).value(), {"a1", "b1", "b2"});
}

TEST_CASE("kubernetes mode: reclaim evicts through the Eviction API and holds the room",
          "[kubernetes][reclaim]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  Seed(api);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  const std::string uid = UidOf(api, "b-job");
  const std::string victim_uid = UidOf(api, "borrow-b1");

  SECTION("through filter") {
    std::vector<policy::NodeVerdict> verdicts;
    const Json r = Parse(berth.service().Filter(FilterArgs(api, "b-job").dump(), &verdicts));
    INFO(r.dump());
    // The filter answered before any eviction; the intent worker's turn.
    CHECK(api.evictions().empty());
    berth.service().DrainIntents();
    // One borrower is evicted, with its uid as precondition, and an Event on it says why.
    REQUIRE(api.evictions().size() == 1);
    CHECK(api.evictions()[0]["metadata"]["name"] == "borrow-b1");
    CHECK(api.evictions()[0]["deleteOptions"]["preconditions"]["uid"] == victim_uid);
    bool event_found = false;
    for (const Json& e : api.events()) {
      if (e.value("reason", "") == "Reclaimed") {
        event_found = true;
        CHECK(e["regarding"]["name"] == "borrow-b1");
        CHECK(e["note"].get<std::string>().find("to make room for ml/b-job") != std::string::npos);
      }
    }
    CHECK(event_found);
    // The pod does not fit until the watch reports the victim gone: the answer names the reclaim.
    CHECK(r["FailedAndUnresolvableNodes"].value("b1", "") == "berth: room being reclaimed");
    bool named = false;
    for (const policy::NodeVerdict& v : verdicts) {
      named |= v.message.find("reclaim in pool team-b: room held on node b1") != std::string::npos;
    }
    CHECK(named);
    // Once berth's watch has the victim gone, b1 is the pod's and it binds there.
    REQUIRE(berth.WaitFor([&] { return !berth.HasPod(victim_uid); }));
    const Json again = Parse(berth.service().Filter(FilterArgs(api, "b-job").dump()));
    CHECK(again["NodeNames"] == Json::array({"b1"}));
    const Json bound = Parse(berth.service().Bind(
        Json{{"PodName", "b-job"}, {"PodNamespace", "ml"}, {"PodUID", uid}, {"Node", "b1"}}.dump()));
    CHECK(bound["Error"] == "");
    REQUIRE(api.bindings().size() == 1);
    CHECK(api.Get("pods", "ml", "borrow-b2").has_value());  // one victim was enough
  }

  SECTION("a disruption budget stops it and releases the room") {
    api.SetEvictionBlocked("ml", "borrow-b1", true);
    api.SetEvictionBlocked("ml", "borrow-b2", true);
    const Json r = Parse(berth.service().Filter(FilterArgs(api, "b-job").dump()));
    INFO(r.dump());
    CHECK(berth.model().Read()->reservation_count() == 1);  // held until the refusal comes
    berth.service().DrainIntents();
    int refused = 0;
    for (const auto& c : api.calls()) {
      if (c.subresource == "eviction" && c.status == 429) ++refused;
    }
    CHECK(refused == 1);  // the first refusal stops the reclaim, never retried
    CHECK(api.evictions().empty());
    CHECK(api.Get("pods", "ml", "borrow-b1").has_value());
    CHECK(berth.model().Read()->reservation_count() == 0);
    const std::string metrics = berth.service().Metrics().body;
    CHECK(metrics.find("berth_intents_total{kind=\"eviction\",outcome=\"undone\"} 1\n") !=
          std::string::npos);
    // The pod is nudged so kube-scheduler retries it at once; its next filter may borrow (no
    // room to borrow here) and starts no second reclaim meanwhile.
    berth.service().DrainIntents();
    CHECK(api.patches().size() == 1);
    Parse(berth.service().Filter(FilterArgs(api, "b-job").dump()));
    berth.service().DrainIntents();
    CHECK(berth.model().Read()->reservation_count() == 0);
    int asked = 0;
    for (const auto& c : api.calls()) asked += c.subresource == "eviction" ? 1 : 0;
    CHECK(asked == 1);
  }

  SECTION("through housekeeping, for a pod kube-scheduler never brought to filter") {
    // The pod is older than the grace housekeeping gives kube-scheduler.
    REQUIRE(berth.WaitFor([&] {
      berth.service().Housekeeping();
      berth.service().DrainIntents();
      return !api.evictions().empty();
    }, std::chrono::seconds(10)));
    CHECK(api.evictions()[0]["metadata"]["name"] == "borrow-b1");
    auto view = berth.model().Read();
    const core::Reservation* held = view->FindReservation(uid);
    REQUIRE(held != nullptr);
    CHECK(view->node(held->node).node.name == "b1");
  }
}

TEST_CASE("kubernetes mode: an evicted victim holds its room while it terminates",
          "[kubernetes][reclaim]") {
  // No kubelet: the victim stays terminating until the test ends it.
  FakeApiServerOptions options;
  options.kubelet = false;
  FakeApiServer api(options);
  REQUIRE(api.start_status().ok());
  Seed(api);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  const std::string uid = UidOf(api, "b-job");
  const std::string victim_uid = UidOf(api, "borrow-b1");
  Parse(berth.service().Filter(FilterArgs(api, "b-job").dump()));
  berth.service().DrainIntents();
  REQUIRE(api.evictions().size() == 1);
  // Evicted, not gone: the pod is terminating, and berth's watch has it so.
  const std::optional<Json> victim = api.Get("pods", "ml", "borrow-b1");
  REQUIRE(victim.has_value());
  CHECK((*victim)["metadata"].contains("deletionTimestamp"));
  REQUIRE(berth.WaitFor([&] {
    auto view = berth.model().Read();
    const core::PodState* p = view->FindPod(victim_uid);
    return p != nullptr && p->pod.terminating;
  }));
  // Its containers still run: b1's room is still its, and the pod waits for it (no second
  // victim, neither through filter nor through housekeeping).
  CHECK(berth.NodeCpuMilli("b1") >= 6000);
  for (int i = 0; i < 3; ++i) {
    const Json r = Parse(berth.service().Filter(FilterArgs(api, "b-job").dump()));
    INFO(r.dump());
    CHECK(r["NodeNames"].empty());
    berth.service().Housekeeping();
    berth.service().DrainIntents();
  }
  CHECK(api.evictions().size() == 1);
  CHECK_FALSE(api.Get("pods", "ml", "borrow-b2").value()["metadata"].contains("deletionTimestamp"));
  // Once it is gone, b1 is the pod's.
  REQUIRE(api.Delete("pods", "ml", "borrow-b1").ok());
  REQUIRE(berth.WaitFor([&] { return !berth.HasPod(victim_uid); }));
  const Json again = Parse(berth.service().Filter(FilterArgs(api, "b-job").dump()));
  CHECK(again["NodeNames"] == Json::array({"b1"}));
  const Json bound = Parse(berth.service().Bind(
      Json{{"PodName", "b-job"}, {"PodNamespace", "ml"}, {"PodUID", uid}, {"Node", "b1"}}.dump()));
  CHECK(bound["Error"] == "");
}

TEST_CASE("kubernetes mode: a follower never reclaims", "[kubernetes][reclaim]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  Seed(api);
  // Another holder owns the Lease for good: this replica follows.
  REQUIRE(api.Create("leases", "berth-system",
                     Json{{"apiVersion", "coordination.k8s.io/v1"},
                          {"kind", "Lease"},
                          {"metadata", {{"name", "berth"}, {"namespace", "berth-system"}}},
                          {"spec",
                           {{"holderIdentity", "someone-else"},
                            {"leaseDurationSeconds", 3600},
                            {"renewTime", "2099-01-01T00:00:00.000000Z"},
                            {"acquireTime", "2099-01-01T00:00:00.000000Z"}}}}).ok());
  KubeBerth berth(api, FastOptions(/*elect=*/true), "me");
  REQUIRE(berth.StartReady());
  berth.service().Filter(FilterArgs(api, "b-job").dump());
  CHECK(berth.service().Housekeeping() == 0);
  CHECK(api.evictions().empty());
  auto view = berth.model().Read();
  CHECK(view->reservation_count() == 0);
}

}  // namespace
}  // namespace berth::testing
