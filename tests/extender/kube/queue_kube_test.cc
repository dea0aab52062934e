// Queues in Kubernetes mode, against the in-process fake API server: a job that becomes
// admitted is nudged with a pod annotation patch (so kube-scheduler retries it at once instead
// of waiting out its backoff), once; a job that waits in its queue is not.

#include <string>

#include "catch2/catch.hpp"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"

namespace berth::testing {
namespace {

// One node of 2 CPUs, full; two jobs wait in queue "default".
void Seed(FakeApiServer& api) {
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("2").Memory("8Gi").Pods(110).Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("big").Namespace("ml").Scheduler("berth-scheduler").Cpu("2")
                                       .Node("n1").Phase("Running").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("first").Namespace("ml").Scheduler("berth-scheduler").Cpu("2")
                                       .Created("2026-01-01T00:00:00Z").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("second").Namespace("ml").Scheduler("berth-scheduler")
                                       .Cpu("1").Created("2026-01-01T00:01:00Z").Obj()).ok());
}

std::string AdmittedMark(FakeApiServer& api, const std::string& name) {
  const Json pod = api.Get("pods", "ml", name).value();
  const Json& meta = pod["metadata"];
  if (!meta.contains("annotations") || !meta["annotations"].contains("berth.io/admitted")) return "";
  return meta["annotations"]["berth.io/admitted"];
}

TEST_CASE("kubernetes mode: an admitted job is nudged by an annotation patch, once", "[kubernetes][queue]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  Seed(api);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());

  // "first" is next to start (it goes on to the node filters, where kube-scheduler may preempt
  // for it): nudged. "second" waits behind it, untouched.
  CHECK(berth.service().AdmissionTick().nudged == 1);
  berth.service().DrainIntents();
  CHECK_FALSE(AdmittedMark(api, "first").empty());
  CHECK(AdmittedMark(api, "second").empty());
  const std::vector<Json> patches = api.patches();
  REQUIRE(patches.size() == 1);
  CHECK(patches[0]["metadata"]["annotations"].contains("berth.io/admitted"));
  int merge_patches = 0;
  for (const RecordedCall& c : api.calls()) {
    if (c.method == "PATCH" && c.resource == "pods") {
      CHECK(c.content_type == "application/merge-patch+json");
      ++merge_patches;
    }
  }
  CHECK(merge_patches == 1);
  // The watch brings the patched pod back; nothing is nudged twice.
  REQUIRE(berth.WaitFor([&] {
    auto view = berth.model().Read();
    const core::PodState* p = view->FindPodByName("ml", "first");
    return p != nullptr && p->pod.annotations.Has("berth.io/admitted");
  }));
  CHECK(berth.service().AdmissionTick().nudged == 0);

  // The running pod ends: both jobs are admitted; only "second" is new.
  REQUIRE(api.Delete("pods", "ml", "big").ok());
  REQUIRE(berth.WaitFor([&] {
    auto view = berth.model().Read();
    return view->FindPodByName("ml", "big") == nullptr;
  }));
  CHECK(berth.service().AdmissionTick().nudged == 1);
  berth.service().DrainIntents();
  CHECK_FALSE(AdmittedMark(api, "second").empty());
}

TEST_CASE("kubernetes mode: why a pod waits is an Event on it, written once", "[kubernetes][events]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  Seed(api);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  // "second" waits behind "first" in its queue: kube-scheduler asks twice, one Event is written.
  const Json second = api.Get("pods", "ml", "second").value();
  for (int i = 0; i < 2; ++i) {
    const Json r = Json::parse(berth.service().Filter(ArgsNames(second, {"n1"}).dump()).body);
    CHECK(r["FailedAndUnresolvableNodes"].contains("n1"));
  }
  CHECK(berth.service().AdmissionTick().events == 1);
  CHECK(berth.service().AdmissionTick().events == 0);
  berth.service().DrainIntents();
  int found = 0;
  for (const Json& e : api.events()) {
    if (e.value("reason", "") != "QueueWaiting") continue;
    ++found;
    CHECK(e["regarding"]["name"] == "second");
    CHECK(e["type"] == "Warning");
    CHECK(e["note"].get<std::string>().find("queue default: position 2 of 2") != std::string::npos);
  }
  CHECK(found == 1);
}

}  // namespace
}  // namespace berth::testing
