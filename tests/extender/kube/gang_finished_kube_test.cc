// Gang members that finish in Kubernetes mode: the pod watch leaves finished pods out (its field
// selector), so a member that Succeeded is reported DELETED with its last Running state. berth
// must still count it for its gang: the gang is not "incomplete" after its deadline and its
// running members are not released. Runs against the in-process fake API server, whose field
// selectors behave as kube-apiserver's.

#include <chrono>
#include <thread>
#include <memory>
#include <string>

#include "catch2/catch.hpp"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"

namespace berth::testing {
namespace {

Json GangMember(const std::string& name, const std::string& node) {
  return MakePod(name).Namespace("ml").Scheduler("berth-scheduler").Cpu("2")
      .Label("scheduling.x-k8s.io/pod-group", "train").Node(node).Phase("Running").Obj();
}

Json WithPhase(FakeApiServer& api, const std::string& name, const std::string& phase) {
  Json pod = api.Get("pods", "ml", name).value();
  pod["status"]["phase"] = phase;
  return pod;
}

/// Two nodes, PodGroup ml/train (minMember `min`) and its members a and b bound and running (c
/// too when `min` is 3), watched by a berth that releases incomplete gangs.
class GangOnFake {
 protected:
  void Start(int min) {
    REQUIRE(api_.start_status().ok());
    for (const char* n : {"n1", "n2"}) {
      REQUIRE(api_.Create("nodes", "", MakeNode(n).Cpu("8").Memory("32Gi").Pods(110).Obj()).ok());
    }
    REQUIRE(api_.Create("podgroups", "ml",
                        MakePodGroup("train").Namespace("ml").MinMember(min).Obj()).ok());
    REQUIRE(api_.Create("pods", "ml", GangMember("a", "n1")).ok());
    REQUIRE(api_.Create("pods", "ml", GangMember("b", "n2")).ok());
    if (min == 3) REQUIRE(api_.Create("pods", "ml", GangMember("c", "n2")).ok());
    policy::PolicyConfig config;
    config.gangs.release_incomplete = true;
    berth_ = std::make_unique<KubeBerth>(api_, FastOptions(), "", config);
    REQUIRE(berth_->StartReady());
  }

  std::string Uid(const std::string& name) {
    return api_.Get("pods", "ml", name).value()["metadata"]["uid"];
  }

  /// The gang was admitted a while ago and its reservations ran out a minute ago.
  void PastDeadline() {
    const absl::Time now = absl::Now();
    berth_->model().UpdateGangRecord("ml", "train", [&](core::GangRecord& r) {
      r.admitted = now - absl::Minutes(3);
      r.deadline = now - absl::Minutes(1);
    });
  }

  FakeApiServer api_;
  std::unique_ptr<KubeBerth> berth_;
};

Json GangRow(KubeBerth& berth) {
  const Json gangs = Json::parse(berth.service().DebugGangs(false).body)["gangs"];
  for (const Json& g : gangs) {
    if (g["namespace"] == "ml" && g["name"] == "train") return g;
  }
  return nullptr;
}

TEST_CASE_METHOD(GangOnFake, "kubernetes mode: a gang member that succeeded still counts; the "
                 "gang is not released as incomplete", "[kubernetes][gang]") {
  Start(2);
  const std::string a_uid = Uid("a");
  REQUIRE(berth_->HasPod(a_uid));
  PastDeadline();

  REQUIRE(api_.Update("pods", "ml", WithPhase(api_, "a", "Succeeded")).ok());
  // The pod watch reports it gone (DELETED, its last state still Running).
  REQUIRE(berth_->WaitFor([&] { return !berth_->HasPod(a_uid); }));

  berth_->service().Housekeeping();
  {
    auto view = berth_->model().Read();
    const core::GangRecord* r = view->FindGangRecord("ml", "train");
    REQUIRE(r != nullptr);
    CHECK_FALSE(r->incomplete);
  }
  CHECK(api_.evictions().empty());
  CHECK(api_.Get("pods", "ml", "b").has_value());
  const Json row = GangRow(*berth_);
  INFO(row.dump());
  CHECK(row["succeeded"] == 1);
  CHECK(row["bound"] == 1);
  CHECK(row["state"] != "Incomplete");
  CHECK(berth_->reflector("pods").stats().gang_members_succeeded == 1);
}

TEST_CASE_METHOD(GangOnFake, "kubernetes mode: a gang member that failed or was deleted does "
                 "not count; the gang is released as incomplete", "[kubernetes][gang]") {
  Start(2);
  const std::string a_uid = Uid("a");
  PastDeadline();

  SECTION("failed") { REQUIRE(api_.Update("pods", "ml", WithPhase(api_, "a", "Failed")).ok()); }
  SECTION("deleted") { REQUIRE(api_.Delete("pods", "ml", "a").ok()); }
  REQUIRE(berth_->WaitFor([&] { return !berth_->HasPod(a_uid); }));

  berth_->service().Housekeeping();
  // The release is an intent: carry it out here (no intent worker runs in this test).
  berth_->service().DrainIntents();
  REQUIRE(api_.evictions().size() == 1);
  CHECK(api_.evictions()[0]["metadata"]["name"] == "b");
  CHECK(GangRow(*berth_)["succeeded"] == 0);
}

TEST_CASE_METHOD(GangOnFake, "kubernetes mode: members that finished while the pod watch was "
                 "away are resolved by the relist", "[kubernetes][gang]") {
  Start(3);
  const std::string a_uid = Uid("a");
  const std::string b_uid = Uid("b");
  // The pod watch cannot reconnect while a succeeds and b fails, and history is compacted: the
  // watch gets 410 Gone and berth relists, and the list shows neither (field selector).
  api_.InjectFailure({.method = "GET", .path_prefix = "/api/v1/pods", .code = 503, .times = -1});
  // A watch request that got past the failure check just before it was injected registers a
  // moment later: drop until none has been open for 100 ms.
  for (int i = 0; i < 20; ++i) {
    api_.DropWatches();
    REQUIRE(api_.WaitFor([](FakeApiServer& s) { return s.open_watches("pods") == 0; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (api_.open_watches("pods") == 0) break;
  }
  REQUIRE(api_.open_watches("pods") == 0);
  REQUIRE(api_.Update("pods", "ml", WithPhase(api_, "a", "Succeeded")).ok());
  REQUIRE(api_.Update("pods", "ml", WithPhase(api_, "b", "Failed")).ok());
  api_.CompactHistory();
  api_.ClearFailures();
  REQUIRE(berth_->WaitFor([&] { return !berth_->HasPod(a_uid) && !berth_->HasPod(b_uid); }));
  CHECK(berth_->reflector("pods").stats().lists == 2);

  const Json row = GangRow(*berth_);
  INFO(row.dump());
  CHECK(row["succeeded"] == 1);
  CHECK(row["bound"] == 1);
}

}  // namespace
}  // namespace berth::testing
