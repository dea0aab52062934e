// Queues in Kubernetes mode, against the in-process fake API server: a job that becomes
// admitted while kube-scheduler holds it back (berth's filter found no node for it) is nudged
// with a pod annotation patch, so kube-scheduler retries it at once instead of waiting out its
// backoff, once; a job that waits in its queue is not, and neither is a pod admitted before
// kube-scheduler asked about it: a scheduled pod costs the API server one write, its binding.

#include <string>
#include <vector>

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

// kube-scheduler asks about `name` on `nodes`: \return whether berth found no node for it.
bool AnsweredWaiting(KubeBerth& berth, FakeApiServer& api, const std::string& name,
                     const std::vector<std::string>& nodes) {
  const Json pod = api.Get("pods", "ml", name).value();
  const Json r = Json::parse(berth.service().Filter(ArgsNames(pod, nodes).dump()).body);
  return r["NodeNames"].empty();
}

TEST_CASE("kubernetes mode: an admitted job is nudged by an annotation patch, once", "[kubernetes][queue]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  Seed(api);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  // kube-scheduler asked about both and parked them: no node has room.
  REQUIRE(AnsweredWaiting(berth, api, "first", {"n1"}));
  REQUIRE(AnsweredWaiting(berth, api, "second", {"n1"}));

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

  // The running pod ends: both jobs are admitted; only "second" is new. ("first" was nudged
  // and kube-scheduler has not asked again: its nudge is spent.)
  REQUIRE(api.Delete("pods", "ml", "big").ok());
  REQUIRE(berth.WaitFor([&] {
    auto view = berth.model().Read();
    return view->FindPodByName("ml", "big") == nullptr;
  }));
  CHECK(berth.service().AdmissionTick().nudged == 1);
  berth.service().DrainIntents();
  CHECK_FALSE(AdmittedMark(api, "second").empty());
}

TEST_CASE("kubernetes mode: one API write per scheduled pod, the binding; no nudge for a pod "
          "admitted before kube-scheduler asked", "[kubernetes][queue]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj()).ok());
  constexpr int kPods = 5;
  for (int i = 0; i < kPods; ++i) {
    REQUIRE(api.Create("pods", "ml", MakePod("p" + std::to_string(i)).Namespace("ml").Scheduler("berth-scheduler")
                                         .Cpu("1").Obj()).ok());
  }
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  api.ClearCalls();
  // As berth runs: the admission tick every second, kube-scheduler's calls in between.
  for (int i = 0; i < kPods; ++i) {
    const std::string name = "p" + std::to_string(i);
    berth.service().AdmissionTick();
    CHECK_FALSE(AnsweredWaiting(berth, api, name, {"n1"}));
    const Json pod = api.Get("pods", "ml", name).value();
    const Json bind = {{"PodName", name}, {"PodNamespace", "ml"},
                       {"PodUID", pod["metadata"]["uid"]}, {"Node", "n1"}};
    CHECK(Json::parse(berth.service().Bind(bind.dump()).body)["Error"] == "");
    REQUIRE(berth.WaitFor([&] {
      auto view = berth.model().Read();
      const core::PodState* p = view->FindPodByName("ml", name);
      return p != nullptr && p->pod.node_name == "n1";
    }));
  }
  berth.service().AdmissionTick();
  berth.service().DrainIntents();
  int writes = 0, bindings = 0;
  for (const RecordedCall& c : api.calls()) {
    if (c.method == "GET") continue;  // lists and watches
    if (c.resource == "leases") continue;
    INFO(c.method << " " << c.path);
    ++writes;
    if (c.method == "POST" && c.subresource == "binding") ++bindings;
  }
  CHECK(bindings == kPods);
  CHECK(writes == kPods);
  CHECK(api.patches().empty());
}

TEST_CASE("kubernetes mode: nudges are limited per tick, and the rest follow", "[kubernetes][queue]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  // A 64-CPU node that one running pod fills; 60 one-CPU pods wait for it.
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("64").Memory("256Gi").Pods(110).Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("big").Namespace("ml").Scheduler("berth-scheduler").Cpu("64")
                                       .Node("n1").Phase("Running").Obj()).ok());
  constexpr int kWaiting = 60;
  for (int i = 0; i < kWaiting; ++i) {
    REQUIRE(api.Create("pods", "ml", MakePod("w" + std::to_string(i)).Namespace("ml").Scheduler("berth-scheduler")
                                         .Cpu("1").Obj()).ok());
  }
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  for (int i = 0; i < kWaiting; ++i) REQUIRE(AnsweredWaiting(berth, api, "w" + std::to_string(i), {"n1"}));
  // The head of the queue passes admission at once (kube-scheduler may preempt for it).
  CHECK(berth.service().AdmissionTick().nudged == 1);
  REQUIRE(api.Delete("pods", "ml", "big").ok());
  REQUIRE(berth.WaitFor([&] { return berth.model().Read()->FindPodByName("ml", "big") == nullptr; }));
  // The other 59 are admitted at once; 50 are nudged now (events.nudgesPerSecond), 9 at the
  // next tick.
  const extender::AdmissionTickStats first = berth.service().AdmissionTick();
  CHECK(first.nudged == 50);
  CHECK(first.deferred == 9);
  const extender::AdmissionTickStats second = berth.service().AdmissionTick();
  CHECK(second.nudged == 9);
  CHECK(second.deferred == 0);
  CHECK(berth.service().AdmissionTick().nudged == 0);
  berth.service().DrainIntents();
  CHECK(api.patches().size() == kWaiting);
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
