// Exact accounting through berth's request interface (POST /v1/events, the verbs): a quantity
// or a sum that cannot be represented is refused with the object and the field named, the
// model is left as it was, and what is added is exactly undone on removal.

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/cluster_model.h"
#include "core/resources.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/text.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

constexpr int64_t kEi = int64_t{1} << 60;

TEST_CASE("Accounting: two 7Ei pods on one node: the second is refused and removal is exact",
          "[accounting]") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("big").Cpu("64").Memory("7Ei").Pods(110).Obj()));
  const extender::Reply first =
      h.service().Events(RunningOn(MakePod("a").Memory("7Ei"), "big").dump());
  CHECK(first.status == 200);
  const uint64_t generation = Generation(h);
  const extender::Reply second =
      h.service().Events(RunningOn(MakePod("b").Memory("7Ei"), "big").dump());
  INFO(second.body);
  CHECK(second.status == 422);
  const nlohmann::json j = nlohmann::json::parse(second.body);
  REQUIRE(j["refused"].size() == 1);
  const std::string why = j["refused"][0];
  CHECK(Contains(why, "pod default/b"));
  CHECK(Contains(why, "requests.memory"));
  CHECK(Contains(why, "node big"));
  CHECK(j["applied"] == 0);
  CHECK(Contains(j["error"].get<std::string>(), "pod default/b"));
  CHECK(Generation(h) == generation);
  {
    auto view = h.model().Read();
    const core::NodeState* n = view->FindNode("big");
    REQUIRE(n != nullptr);
    CHECK(view->FindPod("uid-b") == nullptr);
    CHECK(n->requested.Get(core::kMemory) == 7 * kEi);
    CHECK(n->FreeOf(core::kMemory) == 0);
  }
  // The full node is full for the next pod, not over-committed.
  const auto r = h.Filter(ArgsNames(MakePod("c").Memory("1Gi").Obj(), {"big"}));
  CHECK(r["NodeNames"].empty());

  h.Apply(Event("DELETED", MakePod("a").Node("big").Obj()));
  h.Apply(Event("DELETED", MakePod("b").Node("big").Obj()));
  auto view = h.model().Read();
  const core::NodeState* n = view->FindNode("big");
  REQUIRE(n != nullptr);
  CHECK(n->requested.IsZero());
  CHECK(n->FreeOf(core::kMemory) == 7 * kEi);
  CHECK(n->Free() == n->node.allocatable);
}

TEST_CASE("Accounting: cpu 9223372036854775807 is refused naming the field, not clamped",
          "[accounting]") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n").Cpu("64").Memory("64Gi").Pods(110).Obj()));
  const uint64_t generation = Generation(h);
  const extender::Reply r = h.service().Events(
      RunningOn(MakePod("huge").Cpu("9223372036854775807"), "n").dump());
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(Contains(r.body, "object.spec.containers[0].resources.requests.cpu: out of range"));
  CHECK(Generation(h) == generation);
  {
    auto view = h.model().Read();
    CHECK(view->FindPod("uid-huge") == nullptr);
  }

  // The same pod in a verb is a 400 naming the field too.
  const extender::Reply f = h.service().Filter(
      ArgsNames(MakePod("huge").Cpu("9223372036854775807").Obj(), {"n"}).dump());
  INFO(f.body);
  CHECK(f.status == 400);
  CHECK(Contains(f.body, "Pod.spec.containers[0].resources.requests.cpu: out of range"));

  // A node advertising as much: refused naming its field.
  const extender::Reply node = h.service().Events(
      Event("ADDED", MakeNode("m").Cpu("9223372036854775807").Obj()).dump());
  INFO(node.body);
  CHECK(node.status == 400);
  CHECK(Contains(node.body, "object.status."));
  CHECK(Contains(node.body, ".cpu: out of range"));

  // The largest cpu an int64 of millicores holds is accepted exactly.
  const extender::Reply most = h.service().Events(
      RunningOn(MakePod("most").Cpu("9223372036854775807m"), "ghost").dump());
  CHECK(most.status == 200);
  auto view = h.model().Read();
  const core::PodState* p = view->FindPod("uid-most");
  REQUIRE(p != nullptr);
  CHECK(p->pod.request.Get(core::kCpu) == INT64_MAX);
}

TEST_CASE("Accounting: a pod whose summed container requests do not fit is refused",
          "[accounting]") {
  Harness h;
  const uint64_t generation = Generation(h);
  const extender::Reply r = h.service().Events(
      Event("ADDED",
            MakePod("wide").Memory("5Ei").Container("second", "memory", "5Ei").Obj())
          .dump());
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(Contains(r.body, "object.spec: the sum of the containers' requests of memory"));
  CHECK(Generation(h) == generation);
  // Overhead on top of a request at the limit.
  const extender::Reply o = h.service().Events(
      Event("ADDED", MakePod("over").Memory("8191Pi").Overhead("memory", "2Pi").Obj()).dump());
  CHECK(o.status == 400);
  CHECK(Contains(o.body, "overhead"));
  CHECK(Generation(h) == generation);
}

TEST_CASE("Accounting: a refused event does not stop the others of a batch", "[accounting]") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("big").Cpu("64").Memory("7Ei").Pods(110).Obj()));
  const nlohmann::json batch = nlohmann::json::array(
      {RunningOn(MakePod("a").Memory("7Ei"), "big"), RunningOn(MakePod("b").Memory("1Ei"), "big"),
       Event("ADDED", MakeNode("other").Cpu("8").Obj())});
  const extender::Reply r = h.service().Events(batch.dump());
  INFO(r.body);
  CHECK(r.status == 422);
  const nlohmann::json j = nlohmann::json::parse(r.body);
  CHECK(j["applied"] == 2);
  CHECK(j["nodesUpserted"] == 1);
  CHECK(j["podsUpserted"] == 1);
  REQUIRE(j["refused"].size() == 1);
  CHECK(Contains(j["refused"][0].get<std::string>(), "pod default/b: requests.memory"));
}

}  // namespace
}  // namespace berth::testing
