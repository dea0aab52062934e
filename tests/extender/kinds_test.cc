// Pools, Queues, PodGroups and PriorityClasses through the Service, as a user feeds them in
// standalone mode: POST /v1/events, /debug/snapshot, and loading a snapshot back.

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/cluster_model.h"
#include "core/objects.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"

namespace berth::extender {
namespace {

using testing::Event;
using testing::Harness;
using testing::Json;
using testing::MakeNode;
using testing::MakePod;
using testing::MakePodGroup;
using testing::MakePool;
using testing::MakePriorityClass;
using testing::MakeQueue;

// One of each new kind, as a user would write them.
Json Kinds(const std::string& type) {
  return Json::array({Event(type, MakePool("train").Label("pool", "train").NoBorrowing().Obj()),
                      Event(type, MakeQueue("team-a").Weight(2).ExcessBudget(120).Obj()),
                      Event(type, MakePodGroup("job-7")
                                      .Namespace("ml")
                                      .MinMember(4)
                                      .TimeoutSeconds(60)
                                      .MinResource("nvidia.com/gpu", "4")
                                      .Obj()),
                      Event(type, MakePriorityClass("berth-production", 10000).Obj())});
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST_CASE("Events: the new kinds are applied and counted", "[service][events][kinds]") {
  Harness h;
  const Json reply = h.Apply(Kinds("ADDED"));
  CHECK(reply["applied"] == 4);
  CHECK(reply["poolsUpserted"] == 1);
  CHECK(reply["queuesUpserted"] == 1);
  CHECK(reply["podGroupsUpserted"] == 1);
  CHECK(reply["priorityClassesUpserted"] == 1);
  CHECK(reply["poolsDeleted"] == 0);
  CHECK(reply["queuesDeleted"] == 0);
  CHECK(reply["podGroupsDeleted"] == 0);
  CHECK(reply["priorityClassesDeleted"] == 0);
  // The existing counters are still there.
  CHECK(reply["nodesUpserted"] == 0);
  CHECK(reply["podsUpserted"] == 0);
  CHECK(reply.contains("bindsConfirmed"));
  CHECK(reply.contains("generation"));
  {
    auto view = h.model().Read();
    REQUIRE(view->FindPool("train") != nullptr);
    CHECK(view->FindPool("train")->disable_borrowing);
    CHECK(view->FindPool("train")->node_selector.match_labels.Get("pool") == "train");
    REQUIRE(view->FindQueue("team-a") != nullptr);
    CHECK(view->FindQueue("team-a")->weight == 2);
    REQUIRE(view->FindPodGroup("ml", "job-7") != nullptr);
    CHECK(view->FindPodGroup("ml", "job-7")->min_member == 4);
    REQUIRE(view->FindPriorityClass("berth-production") != nullptr);
    CHECK(view->FindPriorityClass("berth-production")->value == 10000);
  }

  // MODIFIED replaces the object.
  const Json modified = h.Apply(Event("MODIFIED", MakeQueue("team-a").Weight(5).Obj()));
  CHECK(modified["queuesUpserted"] == 1);
  auto view = h.model().Read();
  CHECK(view->queue_count() == 1);
  CHECK(view->FindQueue("team-a")->weight == 5);
  CHECK_FALSE(view->FindQueue("team-a")->excess_budget.has_value());
}

TEST_CASE("Events: DELETED removes the new kinds", "[service][events][kinds]") {
  Harness h;
  h.Apply(Kinds("ADDED"));
  const Json reply = h.Apply(Kinds("DELETED"));
  CHECK(reply["poolsDeleted"] == 1);
  CHECK(reply["queuesDeleted"] == 1);
  CHECK(reply["podGroupsDeleted"] == 1);
  CHECK(reply["priorityClassesDeleted"] == 1);
  CHECK(reply["poolsUpserted"] == 0);
  {
    auto view = h.model().Read();
    CHECK(view->pool_count() == 0);
    CHECK(view->queue_count() == 0);
    CHECK(view->podgroup_count() == 0);
    CHECK(view->priorityclass_count() == 0);
  }
  // Deleting again is harmless (watches replay deletes) and counts nothing.
  const Json again = h.Apply(Kinds("DELETED"));
  CHECK(again["applied"] == 4);
  CHECK(again["poolsDeleted"] == 0);
  CHECK(again["podGroupsDeleted"] == 0);
}

TEST_CASE("Events: one bad object of a new kind changes nothing", "[service][events][kinds]") {
  Harness h;
  h.Apply(Kinds("ADDED"));
  const Json before = h.Snapshot();
  const uint64_t generation = h.model().Read()->generation();
  const Json events = Json::array(
      {Event("ADDED", MakePool("infer").Label("pool", "infer").Obj()),
       Event("DELETED", MakeQueue("team-a").Obj()), Event("ADDED", MakeNode("n9").Cpu("8").Obj()),
       Event("ADDED", MakePool("broken").Expression("gpu", "In").Obj())});
  const Reply r = h.service().Events(events.dump());
  CHECK(r.status == 400);
  const Json err = testing::ParseReply(r);
  CHECK(err["error"] ==
        "[3].object.spec.nodeSelector.matchExpressions[0].values: operator In needs at least one "
        "value");
  CHECK(h.Snapshot() == before);
  {
    auto view = h.model().Read();
    CHECK(view->generation() == generation);
    CHECK(view->FindPool("infer") == nullptr);
    CHECK(view->FindQueue("team-a") != nullptr);
    CHECK(view->FindNode("n9") == nullptr);
    CHECK(view->pool_count() == 1);
  }

  // The same for the other kinds' validations.
  for (const Json& bad : {MakeQueue("q").Weight(0).Obj(), MakePodGroup("g").MinMember(-2).Obj(),
                          MakePriorityClass("c", 1).PreemptionPolicy("Always").Obj()}) {
    INFO(bad.dump());
    const Reply br = h.service().Events(
        Json::array({Event("ADDED", MakeQueue("ok").Obj()), Event("ADDED", bad)}).dump());
    CHECK(br.status == 400);
    CHECK(h.model().Read()->FindQueue("ok") == nullptr);
  }
  CHECK(h.Snapshot() == before);
}

TEST_CASE("Snapshot: the new kinds are written after nodes and pods and load back",
          "[service][snapshot][kinds]") {
  Harness h;
  h.Apply(
      Json::array({Event("ADDED", MakeNode("gpu-1").Cpu("64").Gpu(8).Label("pool", "train").Obj()),
                   Event("ADDED", MakePod("w-0")
                                      .Namespace("ml")
                                      .Cpu("4")
                                      .Gpu(1)
                                      .Label("scheduling.x-k8s.io/pod-group", "job-7")
                                      .Node("gpu-1")
                                      .Phase("Running")
                                      .Obj())}));
  h.Apply(Kinds("ADDED"));
  h.Apply(Json::array(
      {Event("ADDED", MakePool("masters")
                          .ApiVersion("resource.aibee.cn/v1alpha1")
                          .Label("kubernetes.io/role", "master")
                          .NoPreemption()
                          .NoBorrowing()
                          .NoSharing()
                          .Obj()),
       Event("ADDED", MakePodGroup("tf-1").Namespace("research").MinMember(3).Volcano().Obj()),
       Event("ADDED", MakeQueue("team-b").NonPreemptibleLimitFactor(0.2).Obj()),
       Event("ADDED", MakePriorityClass("berth-offline", 100).PreemptionPolicy("Never").Obj())}));

  const Json snap = h.Snapshot();
  CHECK(snap["kind"] == "List");
  std::vector<std::string> kinds;
  std::vector<std::string> names;
  for (const Json& item : snap["items"]) {
    kinds.push_back(item["kind"]);
    names.push_back(item["metadata"]["name"]);
  }
  CHECK(kinds == std::vector<std::string>{"Node", "Pod", "Pool", "Pool", "Queue", "Queue",
                                          "PodGroup", "PodGroup", "PriorityClass",
                                          "PriorityClass"});
  CHECK(names == std::vector<std::string>{"gpu-1", "w-0", "masters", "train", "team-a", "team-b",
                                          "job-7", "tf-1", "berth-offline", "berth-production"});
  const Json& volcano = snap["items"][7];
  CHECK(volcano["apiVersion"] == "scheduling.volcano.sh/v1beta1");
  CHECK(volcano["metadata"]["namespace"] == "research");
  CHECK(snap["items"][2]["apiVersion"] ==
        "berth.io/v1alpha1");  // the seed's group is read, not kept

  // Loading the snapshot into a fresh berth gives the same model, hence the same snapshot.
  Harness fresh;
  absl::StatusOr<size_t> loaded = fresh.service().LoadList(snap.dump(), "snapshot.json");
  REQUIRE(loaded.ok());
  CHECK(*loaded == 10);
  const Json again = fresh.Snapshot();
  CHECK(again["items"] == snap["items"]);
  {
    auto view = fresh.model().Read();
    CHECK(view->pool_count() == 2);
    CHECK(view->queue_count() == 2);
    CHECK(view->podgroup_count() == 2);
    CHECK(view->priorityclass_count() == 2);
    REQUIRE(view->FindPodGroup("research", "tf-1") != nullptr);
    CHECK(view->FindPodGroup("research", "tf-1")->source == core::PodGroupSource::kVolcano);
    REQUIRE(view->FindQueue("team-b") != nullptr);
    CHECK(view->FindQueue("team-b")->non_preemptible_limit_factor == 0.2);
  }

  // The text form lists them in the KIND column.
  const Reply text = h.service().DebugSnapshot(true);
  const std::vector<std::string> lines = Lines(text.body);
  REQUIRE(lines.size() == 11);
  CHECK(lines[0].rfind("KIND", 0) == 0);
  const size_t ns_col = lines[0].find("NAMESPACE");
  const size_t name_col = lines[0].find("NAME", ns_col + 1);
  std::vector<std::string> row_kinds;
  for (size_t i = 1; i < lines.size(); ++i)
    row_kinds.push_back(lines[i].substr(0, lines[i].find(' ')));
  CHECK(row_kinds == kinds);
  CHECK(lines[3].substr(name_col, 7) == "masters");
  CHECK(lines[7].substr(ns_col, 2) == "ml");
  CHECK(lines[7].substr(name_col, 5) == "job-7");
  CHECK(lines[9].substr(ns_col, 1) == "-");
}

TEST_CASE("LoadList: a bad object of a new kind names the file and the item",
          "[service][snapshot][kinds]") {
  Harness h;
  const Json list = testing::List({MakePool("a").Obj(), MakePodGroup("g").MinMember(-1).Obj()});
  absl::StatusOr<size_t> loaded = h.service().LoadList(list.dump(), "cluster.json");
  REQUIRE_FALSE(loaded.ok());
  CHECK(std::string(loaded.status().message()) ==
        "cluster.json: items[1].spec.minMember: must not be negative, got -1");
  CHECK(h.model().Read()->pool_count() == 0);
}

TEST_CASE("Events: the new kinds are refused in Kubernetes mode", "[service][events][kinds]") {
  Harness h({}, Mode::kKubernetes);
  const Reply r = h.service().Events(Kinds("ADDED").dump());
  CHECK(r.status == 403);
  CHECK(h.model().Read()->pool_count() == 0);
}

}  // namespace
}  // namespace berth::extender
