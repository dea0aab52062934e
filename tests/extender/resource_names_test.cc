// Verb requests never grow the shared, capped resource-name table: a resource no node offers is
// an unresolvable request, not a new name. Objects of the model (events, cluster files) do add
// names.

#include <catch2/catch.hpp>

#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"

namespace berth::testing {
namespace {

size_t NameCount(Harness& h) { return h.model().resources().size(); }

TEST_CASE("a pod requesting a resource no node offers is unresolvable everywhere") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("16Gi").Gpu(2).Obj()));
  const size_t names = NameCount(h);
  const auto r = h.Filter(ArgsNames(
      MakePod("fpga").Cpu("1").Request("example.com/fpga", "2").Obj(), {"n1"}));
  INFO(r.dump());
  CHECK(r["NodeNames"].empty());
  REQUIRE(r["FailedAndUnresolvableNodes"].contains("n1"));
  CHECK(r["FailedAndUnresolvableNodes"]["n1"] == "berth: no node offers example.com/fpga");
  CHECK(NameCount(h) == names);
}

TEST_CASE("hundreds of requests with new resource names leave the name table as it was") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("16Gi").Obj()));
  const size_t names = NameCount(h);
  for (int i = 0; i < 400; ++i) {
    const auto pod = MakePod(StrCat("p", i)).Request(StrCat("example.com/r", i), "1");
    h.Filter(ArgsNames(pod.Obj(), {"n1"}));
    h.Prioritize(ArgsNames(pod.Obj(), {"n1"}));
    h.Preempt(PreemptArgsMeta(pod.Obj(), {{"n1", {"uid-x"}}}));
  }
  CHECK(NameCount(h) == names);
  // A node that really offers a new resource is still learned, and pods requesting it fit.
  h.Apply(Event("ADDED", MakeNode("fpga-1").Cpu("8").Memory("16Gi").Allocatable("example.com/fpga", "4").Obj()));
  CHECK(NameCount(h) == names + 1);
  const auto r = h.Filter(ArgsNames(
      MakePod("uses-fpga").Cpu("1").Request("example.com/fpga", "2").Obj(), {"n1", "fpga-1"}));
  INFO(r.dump());
  CHECK(r["NodeNames"] == nlohmann::json::array({"fpga-1"}));
  CHECK(r["FailedAndUnresolvableNodes"].contains("n1"));
}

TEST_CASE("a learned pod keeps its unknown requests through the snapshot round trip") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("16Gi").Obj()));
  // Learned from a filter request (standalone mode); limits-only counts as a request.
  nlohmann::json pod = MakePod("odd").Cpu("1").Obj();
  pod["spec"]["containers"][0]["resources"]["limits"]["example.com/widget"] = "3";
  h.Filter(ArgsNames(pod, {"n1"}));
  const nlohmann::json snap = h.Snapshot();
  bool found = false;
  for (const auto& item : snap["items"]) {
    if (item["kind"] != "Pod" || item["metadata"]["name"] != "odd") continue;
    found = true;
    CHECK(item["spec"]["containers"][0]["resources"]["requests"]["example.com/widget"] == "3");
  }
  REQUIRE(found);
  // Loaded as a cluster file, the name is interned like any object's.
  Harness again;
  REQUIRE(again.service().LoadList(snap.dump(), "snapshot").ok());
  CHECK(again.model().resources().Find("example.com/widget").has_value());
}

}  // namespace
}  // namespace berth::testing
