// Verb requests never grow the shared, capped resource-name table: a resource no node offers is
// an unresolvable request, not a new name. Objects of the model (events, cluster files) add
// names only when the model commits them: refused input leaves no trace in the table. A full
// table refuses the object that names a new resource, says so, and counts it.

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "core/resources.h"
#include "core/strings.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/text.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

size_t NameCount(Harness& h) { return h.model().resources().size(); }

// The value of an unlabelled sample in GET /metrics, or -1 when absent.
double MetricValue(Harness& h, std::string_view name) {
  const std::string body = h.service().Metrics().body;
  const std::string prefix = StrCat("\n", name, " ");
  const size_t at = body.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + prefix.size()));
}

// The first refusal a POST /v1/events reply lists, or "".
std::string Refused(const extender::Reply& r) {
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("refused") || j["refused"].empty()) return "";
  return j["refused"][0].get<std::string>();
}

// A node offering `resource`, valid or not.
nlohmann::json NodeOffering(const std::string& name, const std::string& resource,
                            bool valid = true) {
  nlohmann::json node = MakeNode(name).Cpu("8").Memory("16Gi").Allocatable(resource, "4").Obj();
  node["status"]["capacity"] = node["status"]["allocatable"];
  if (!valid) node["status"]["allocatable"]["memory"] = "16 GB";
  return node;
}

TEST_CASE("a pod requesting a resource no node offers is unresolvable everywhere") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("16Gi").Gpu(2).Obj()));
  const size_t names = NameCount(h);
  std::vector<policy::NodeVerdict> v;
  const auto r = h.Filter(
      ArgsNames(MakePod("fpga").Cpu("1").Request("example.com/fpga", "2").Obj(), {"n1"}), &v);
  INFO(r.dump());
  CHECK(r["NodeNames"].empty());
  REQUIRE(r["FailedAndUnresolvableNodes"].contains("n1"));
  CHECK(r["FailedAndUnresolvableNodes"]["n1"] == "berth: requested resource not offered");
  REQUIRE(v.size() == 1);
  CHECK(v[0].message == "berth: no node offers example.com/fpga");
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

TEST_CASE("260 refused requests naming new resources leave every table as it was") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("16Gi").Obj()));
  const size_t names = NameCount(h);
  const uint64_t generation = Generation(h);
  const std::string snapshot = h.service().DebugSnapshot(false).body;
  for (int i = 0; i < 260; ++i) {
    const std::string resource = StrCat("example.com/r", i);
    std::string body;
    switch (i % 4) {
      case 0:  // a node whose capacity names it and whose allocatable is bad
        body = Event("ADDED", NodeOffering(StrCat("bad-", i), resource, false)).dump();
        break;
      case 1:  // a good node, then a bad event: the whole array is refused
        body = nlohmann::json::array(
                   {Event("ADDED", NodeOffering(StrCat("good-", i), resource)),
                    Event("ADDED", NodeOffering(StrCat("bad-", i), "example.com/x", false))})
                   .dump();
        break;
      case 2: {  // a pod naming it in one container, a bad quantity in the next
        nlohmann::json pod = MakePod(StrCat("p", i)).Request(resource, "1").Obj();
        pod["spec"]["containers"].push_back(
            {{"name", "b"}, {"resources", {{"requests", {{"cpu", "lots"}}}}}});
        body = Event("ADDED", pod).dump();
        break;
      }
      default:  // a filter whose full Node names it and is bad further on
        body = ArgsNodes(MakePod(StrCat("p", i)).Cpu("1").Obj(),
                         {NodeOffering(StrCat("bad-", i), resource, false)})
                   .dump();
        break;
    }
    const extender::Reply r =
        i % 4 == 3 ? h.service().Filter(body) : h.service().Events(body);
    INFO("request " << i << ": " << r.body);
    REQUIRE(r.status == 400);
  }
  CHECK(NameCount(h) == names);
  CHECK_FALSE(h.model().resources().Find("example.com/r0").has_value());
  CHECK(Generation(h) == generation);
  CHECK(h.service().DebugSnapshot(false).body == snapshot);
  CHECK(MetricValue(h, "berth_resource_names_refused_total") == 0);

  // A valid node with a new resource is learned, and a pod requesting it fits there.
  const extender::Reply added =
      h.service().Events(Event("ADDED", NodeOffering("fpga-1", "example.com/fpga")).dump());
  INFO(added.body);
  REQUIRE(added.status == 200);
  CHECK(NameCount(h) == names + 1);
  const auto r = h.Filter(ArgsNames(
      MakePod("uses-fpga").Cpu("1").Request("example.com/fpga", "2").Obj(), {"n1", "fpga-1"}));
  INFO(r.dump());
  CHECK(r["NodeNames"] == nlohmann::json::array({"fpga-1"}));
}

TEST_CASE("a full name table refuses the object naming a new resource, clearly and counted") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("16Gi").Obj()));
  // Fill the table with names that committed nodes offer.
  for (size_t i = NameCount(h); i < core::ResourceNames::kMaxResources; ++i) {
    h.Apply(Event("ADDED", NodeOffering(StrCat("r-", i), StrCat("example.com/r", i))));
  }
  REQUIRE(NameCount(h) == core::ResourceNames::kMaxResources);
  CHECK(MetricValue(h, "berth_resource_names") == 256);
  const uint64_t generation = Generation(h);
  const std::string snapshot = h.service().DebugSnapshot(false).body;

  const extender::Reply node =
      h.service().Events(Event("ADDED", NodeOffering("fpga-1", "example.com/fpga")).dump());
  INFO(node.body);
  CHECK(node.status == 422);
  CHECK(Refused(node) == "node fpga-1: status.capacity/allocatable: resource name "
                         "\"example.com/fpga\" cannot be added: berth's table of resource "
                         "names is full (256 distinct names, the limit)");
  CHECK(MetricValue(h, "berth_resource_names_refused_total") == 1);

  // A pod that would be committed with a new name is refused the same way.
  const extender::Reply pod = h.service().Events(
      RunningOn(MakePod("p").Request("example.com/fpga", "1"), "n1").dump());
  INFO(pod.body);
  CHECK(pod.status == 422);
  CHECK(Contains(Refused(pod), "pod default/p: requests: resource name \"example.com/fpga\""));
  CHECK(MetricValue(h, "berth_resource_names_refused_total") == 2);
  CHECK(Generation(h) == generation);
  CHECK(h.service().DebugSnapshot(false).body == snapshot);
  CHECK(NameCount(h) == core::ResourceNames::kMaxResources);

  // Objects naming only known resources still go in, a new resource at zero too.
  nlohmann::json zero = NodeOffering("n2", "example.com/r100");
  zero["status"]["allocatable"]["example.com/fpga"] = "0";
  const extender::Reply known = h.service().Events(Event("ADDED", zero).dump());
  INFO(known.body);
  CHECK(known.status == 200);
  CHECK(MetricValue(h, "berth_resource_names_refused_total") == 2);
}

TEST_CASE("a pod refused for its node's totals adds no resource name") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("big").Cpu("8").Memory("7Ei").Obj()));
  h.Apply(RunningOn(MakePod("a").Memory("7Ei"), "big"));
  const size_t names = NameCount(h);
  const extender::Reply r = h.service().Events(
      RunningOn(MakePod("b").Memory("2Ei").Request("example.com/new", "1"), "big").dump());
  CHECK(r.status == 422);
  CHECK(NameCount(h) == names);
  CHECK_FALSE(h.model().resources().Find("example.com/new").has_value());
}

}  // namespace
}  // namespace berth::testing
