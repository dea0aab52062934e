// Fragmentation figures (issue 18 part 4) through /debug/pools and /metrics on a hand-built
// cluster: every figure below was worked out by hand from the objects.

#include <string>

#include "catch2/catch.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"

namespace berth::testing {
namespace {

Json Find(const Json& list, const std::string& key, const std::string& value) {
  for (const Json& j : list) {
    if (j.value(key, "") == value) return j;
  }
  FAIL("no " << key << " " << value << " in " << list.dump());
  return Json();
}

TEST_CASE("fragmentation: per pool and per topology domain in /debug/pools and /metrics", "[fragmentation]") {
  Harness h;
  auto gpu_node = [](const std::string& name, const std::string& leaf) {
    return MakeNode(name).Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Label("pool", "gpu").Topology("zone-a", "spine-a1", leaf).Obj();
  };
  auto two_gpu_pod = [](const std::string& name) {
    return MakePod(name).Namespace("ml").Pool("gpu").Cpu("8").Memory("64Gi").Gpu(2);
  };
  Json events = Json::array({Event("ADDED", MakePool("gpu").Label("pool", "gpu").Obj()),
                             Event("ADDED", gpu_node("g1", "leaf-1")), Event("ADDED", gpu_node("g2", "leaf-1")),
                             Event("ADDED", gpu_node("g3", "leaf-2")), Event("ADDED", gpu_node("g4", "leaf-2")),
                             // A pool of its own with no pods: counted in every berth pod's request.
                             Event("ADDED", MakePool("spare").Label("pool", "spare").Obj()),
                             Event("ADDED", MakeNode("s1").Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Label("pool", "spare").Obj())});
  // g1: three 2-GPU pods (2 GPUs free); g2: one 2-GPU pod and one 3-GPU pod (3 free); g3 empty
  // (8 free, whole); g4: 7 GPUs of another scheduler (1 free: too few for a 2-GPU pod). One
  // more 2-GPU pod waits. Most common request: 8 cpu, 64Gi, 2 GPUs (5 of 6 berth pods).
  for (int i = 0; i < 3; ++i) events.push_back(Event("ADDED", two_gpu_pod("a" + std::to_string(i)).Node("g1").Phase("Running").Obj()));
  events.push_back(Event("ADDED", two_gpu_pod("b0").Node("g2").Phase("Running").Obj()));
  events.push_back(Event("ADDED", MakePod("b1").Namespace("ml").Pool("gpu").Cpu("12").Memory("96Gi").Gpu(3)
                                      .Node("g2").Phase("Running").Obj()));
  events.push_back(Event("ADDED", MakePod("other").Scheduler("default-scheduler").Cpu("1").Gpu(7).Node("g4")
                                      .Phase("Running").Obj()));
  events.push_back(Event("ADDED", two_gpu_pod("waiting").Obj()));
  h.Apply(events);

  const Json reply = ParseReply(h.service().DebugPools(false));
  const Json gpu = Find(reply["pools"], "name", "gpu")["fragmentation"];
  INFO(gpu.dump());
  CHECK(gpu["request"] == "8 cpu, 64Gi memory, 2 nvidia.com/gpu");
  CHECK(gpu["resource"] == "nvidia.com/gpu");
  CHECK(gpu["nodes"] == 4);
  CHECK(gpu["wholeNodesFree"] == 1);
  CHECK(gpu["free"] == "14");
  CHECK(gpu["podsThatFit"] == 6);  // 1 + 1 + 4 + 0
  CHECK(gpu["stranded"] == "1");
  CHECK(gpu["index"].get<double>() == Approx(1.0 - 12.0 / 14.0));

  const Json spare = Find(reply["pools"], "name", "spare")["fragmentation"];
  CHECK(spare["request"] == "8 cpu, 64Gi memory, 2 nvidia.com/gpu");
  CHECK(spare["podsThatFit"] == 4);
  CHECK(spare["index"].get<double>() == 0);

  const Json& domains = reply["domains"];
  const Json leaf1 = Find(domains, "domain", "zone-a/spine-a1/leaf-1");
  const Json leaf2 = Find(domains, "domain", "zone-a/spine-a1/leaf-2");
  CHECK(leaf1["level"] == "berth.io/leaf");
  CHECK(leaf1["free"] == "5");
  CHECK(leaf1["podsThatFit"] == 2);
  CHECK(leaf1["stranded"] == "0");
  CHECK(leaf1["index"].get<double>() == Approx(0.2));
  CHECK(leaf2["wholeNodesFree"] == 1);
  CHECK(leaf2["podsThatFit"] == 4);
  CHECK(leaf2["stranded"] == "1");
  CHECK(leaf2["index"].get<double>() == Approx(1.0 / 9.0));
  CHECK(Find(domains, "domain", "zone-a")["podsThatFit"] == 6);

  const std::string text = h.service().DebugPools(true).body;
  CHECK(text.find("PODS THAT FIT") != std::string::npos);
  CHECK(text.find("zone-a/spine-a1/leaf-2") != std::string::npos);
  CHECK(text.find("0.14") != std::string::npos);

  const std::string metrics = h.service().Metrics().body;
  CHECK(metrics.find("berth_pool_pods_that_fit{pool=\"gpu\",resource=\"nvidia.com/gpu\"} 6\n") != std::string::npos);
  CHECK(metrics.find("berth_pool_stranded{pool=\"gpu\",resource=\"nvidia.com/gpu\"} 1\n") != std::string::npos);
  CHECK(metrics.find("berth_domain_whole_nodes_free{level=\"berth.io/leaf\",domain=\"zone-a/spine-a1/leaf-2\","
                     "resource=\"nvidia.com/gpu\"} 1\n") != std::string::npos);

  // A bind changes the figures at once: the waiting pod on g3 leaves 6 of its GPUs.
  h.Bind(BindArgs(two_gpu_pod("waiting"), "g3"));
  const Json after = Find(ParseReply(h.service().DebugPools(false))["pools"], "name", "gpu")["fragmentation"];
  CHECK(after["wholeNodesFree"] == 0);
  CHECK(after["podsThatFit"] == 5);
  CHECK(after["free"] == "12");
}

}  // namespace
}  // namespace berth::testing
