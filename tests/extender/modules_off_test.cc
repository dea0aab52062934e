// Switching a module off in the configuration removes its behaviour (issue 15). One case per
// module name of the registry, through the Service verbs: each shows the behaviour with the
// module on, then builds a service without the module and shows it is gone. Turning a module
// off takes its name out of every policy list (policy.admission, filters, reclaim, preempt,
// scores), as a user editing the configuration would; a case about one point takes it out of
// that list alone.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "core/strings.h"
#include "policy/registry.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

// The default configuration without `module` in any list.
policy::PolicyConfig Without(const std::string& module, policy::PolicyConfig c = {}) {
  for (auto* list : {&c.admission, &c.filters, &c.reclaim, &c.preempt, &c.order}) {
    std::erase(*list, module);
  }
  std::erase_if(c.scores, [&](const auto& s) { return s.first == module; });
  return c;
}

MakePod MlPod(const std::string& name) { return MakePod(name).Namespace("ml").Uid(name); }

// The pod's object, bound and running on `node`.
Json Running(MakePod pod, const std::string& node) {
  return pod.Node(node).Phase("Running").Obj();
}

Json PoolObj(const std::string& name) { return MakePool(name).Label("pool", name).Obj(); }

Json GpuNode(const std::string& name, const std::string& pool) {
  return MakeNode(name).Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Label("pool", pool).Obj();
}

// Node -> score of a prioritize call.
std::map<std::string, int64_t> Scores(Harness& h, const MakePod& pod,
                                      const std::vector<std::string>& nodes) {
  return ScoresOf(h.Prioritize(ArgsNames(pod.Obj(), nodes)));
}

// The nodes a preempt call keeps.
std::set<std::string> KeptNodes(const Json& reply) {
  std::set<std::string> out;
  const Json& m = reply["NodeNameToMetaVictims"];
  if (m.is_object()) {
    for (const auto& [node, victims] : m.items()) out.insert(node);
  }
  return out;
}

TEST_CASE("modules off: every module of the registry has a case here", "[modules-off]") {
  // The cases below, by module name. A module added to the registry needs one, except a module
  // that is only a score (its test shows its ranking; the score contract covers it).
  const std::set<std::string> covered = {"binpack",      "gang",        "gang-topology",
                                         "gpu-affinity", "gpu-min-cpu", "gpu-reserve",
                                         "pools",        "queue",       "resource-fit"};
  const policy::Registry r = policy::BuildDefaultRegistry();
  for (const std::string& name : r.Names()) {
    INFO(name);
    if (r.PointsOf(name) == policy::Bit(policy::Point::kScore)) continue;
    CHECK(covered.contains(name));
  }
  for (const std::string& name : covered) {
    INFO(name);
    CHECK(r.PointsOf(name) != 0);  // still registered
  }
}

TEST_CASE("modules off: resource-fit: without it a pod is placed on a node too small for it",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("resource-fit " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("resource-fit"));
    AddObjects(h, {MakeNode("small").Cpu("2").Memory("8Gi").Pods(110).Obj(),
                   MakeNode("big").Cpu("8").Memory("8Gi").Pods(110).Obj()});
    const Verdicts v = FilterPod(h, MlPod("p").Cpu("4"), {"small", "big"});
    if (on) {
      CHECK(v.fit == std::vector<std::string>{"big"});
      INFO(v.Why("small"));
      CHECK(Contains(v.Why("small"), "node too small for the pod's cpu"));
    } else {
      CHECK(v.fit == std::vector<std::string>{"small", "big"});
    }
  }
}

TEST_CASE("modules off: pools (Filter): without it a pod of a full pool that may not borrow "
          "goes to another pool's node",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("pools " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("pools"));
    AddObjects(h, {MakePool("a").Label("pool", "a").NoBorrowing().Obj(), PoolObj("b"),
                   MakeNode("a1").Cpu("4").Memory("8Gi").Pods(110).Label("pool", "a").Obj(),
                   MakeNode("b1").Cpu("4").Memory("8Gi").Pods(110).Label("pool", "b").Obj(),
                   Running(MlPod("full").Pool("a").Cpu("4").Priority(10000), "a1")});
    const Verdicts v = FilterPod(h, MlPod("p").Pool("a").Cpu("2"), {"a1", "b1"});
    if (on) {
      CHECK(v.fit.empty());
      CHECK(Contains(v.Why("b1"), "does not allow borrowing"));
    } else {
      CHECK(v.fit == std::vector<std::string>{"b1"});
    }
  }
}

TEST_CASE("modules off: pools (PostFilter): without its reclaim nothing is evicted",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("pools reclaim " << (on ? "on" : "off"));
    policy::PolicyConfig c;
    if (!on) c.reclaim.clear();  // pools stays a filter: the pod still may not borrow
    Harness h(c);
    AddObjects(h, {PoolObj("gpu"), PoolObj("research"), GpuNode("g1", "gpu"),
                   GpuNode("r1", "research"),
                   Running(MlPod("own-r").Pool("research").Cpu("32").Gpu(8), "r1"),
                   Running(MlPod("borrower").Pool("research").Cpu("32").Gpu(8), "g1")});
    const MakePod pod = MlPod("p").Pool("gpu").Cpu("32").Gpu(8).Priority(100);
    const std::set<std::string> before = PodKeys(h);
    const Verdicts first = FilterPod(h, pod, {"g1", "r1"});
    CHECK(first.fit.empty());
    const std::set<std::string> evicted = EvictedSince(h, before);
    if (on) {
      CHECK(evicted == std::set<std::string>{"ml/borrower"});
      CHECK(FilterPod(h, pod, {"g1", "r1"}).fit == std::vector<std::string>{"g1"});
    } else {
      CHECK(evicted.empty());
      CHECK(FilterPod(h, pod, {"g1", "r1"}).fit.empty());
    }
  }
}

TEST_CASE("modules off: pools (PreemptionReview): without it kube-scheduler's proposal to evict "
          "an in-pool pod for a borrower stands",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("pools review " << (on ? "on" : "off"));
    policy::PolicyConfig c;
    if (!on) std::erase(c.preempt, "pools");
    Harness h(c);
    AddObjects(h, {PoolObj("gpu"), PoolObj("research"), GpuNode("g1", "gpu"),
                   Running(MlPod("home").Pool("gpu").Cpu("32").Gpu(8).Priority(10), "g1")});
    const MakePod borrower = MlPod("b").Pool("research").Cpu("32").Gpu(8).Priority(500);
    h.Apply(Event("ADDED", borrower.Obj()));
    const Json r = h.Preempt(PreemptArgsMeta(borrower.Obj(), {{"g1", {"home"}}}));
    INFO(r.dump());
    if (on) {
      CHECK(KeptNodes(r).empty());
    } else {
      CHECK(KeptNodes(r) == std::set<std::string>{"g1"});
    }
  }
}

TEST_CASE("modules off: gang: without it a gang member is placed and binds alone",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("gang " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("gang"));
    AddObjects(h, {MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj(),
                   MakePodGroup("train").Namespace("ml").MinMember(2).Obj()});
    // One member of two exists: the gang cannot start.
    const MakePod member = MlPod("train-0").Cpu("2").Gang("train");
    h.Apply(Event("ADDED", member.Obj()));
    const Verdicts v = FilterPod(h, member, {"n1"});
    // Permit at bind: the member binds only into room its gang reserved.
    const std::string bind = BindError(h, member, "n1");
    if (on) {
      CHECK(v.fit.empty());
      CHECK(Contains(v.Why("n1"), "1 of 2 members exist"));
      CHECK(Contains(bind, "1 of 2 members exist"));
    } else {
      CHECK(v.fit == std::vector<std::string>{"n1"});
      CHECK(bind.empty());
    }
  }
}

TEST_CASE("modules off: gang-topology: without it a node near the gang's members scores no "
          "higher than one far away",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("gang-topology " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("gang-topology"));
    auto node = [](const std::string& name, const std::string& leaf) {
      return MakeNode(name).Cpu("8").Memory("32Gi").Pods(110).Topology("z0", "s0", leaf).Obj();
    };
    AddObjects(h, {node("x", "l1"), node("near", "l1"), node("far", "l2"),
                   MakePodGroup("train").Namespace("ml").MinMember(1).Obj(),
                   Running(MlPod("train-0").Cpu("2").Gang("train"), "x")});
    const MakePod member = MlPod("train-1").Cpu("2").Gang("train");
    h.Apply(Event("ADDED", member.Obj()));
    const std::map<std::string, int64_t> s = Scores(h, member, {"near", "far"});
    INFO("near " << s.at("near") << ", far " << s.at("far"));
    if (on) {
      CHECK(s.at("near") > s.at("far"));
    } else {
      CHECK(s.at("near") == s.at("far"));
    }
  }
}

TEST_CASE("modules off: queue: without it a job of a queue that does not exist is not held, and "
          "no fair-share book is kept",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("queue " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("queue"));
    AddObjects(h, {MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj()});
    const MakePod job = MlPod("job").Cpu("1").Label("berth.io/queue", "team-x");
    h.Apply(Event("ADDED", job.Obj()));
    const Verdicts v = FilterPod(h, job, {"n1"});
    const int queues = h.service().DebugQueues(false).status;
    if (on) {
      CHECK(v.fit.empty());
      CHECK(Contains(v.Why("n1"), "queue \"team-x\" does not exist"));
      CHECK(queues == 200);
    } else {
      CHECK(v.fit == std::vector<std::string>{"n1"});
      CHECK(queues == 404);
    }
  }
}

TEST_CASE("modules off: binpack: without it a half-full node scores no higher than an empty one",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("binpack " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("binpack"));
    AddObjects(h, {MakeNode("half").Cpu("8").Memory("32Gi").Pods(110).Obj(),
                   MakeNode("empty").Cpu("8").Memory("32Gi").Pods(110).Obj(),
                   Running(MlPod("r").Cpu("4").Memory("16Gi"), "half")});
    const std::map<std::string, int64_t> s =
        Scores(h, MlPod("p").Cpu("2").Memory("8Gi"), {"half", "empty"});
    INFO("half " << s.at("half") << ", empty " << s.at("empty"));
    if (on) {
      CHECK(s.at("half") > s.at("empty"));
    } else {
      CHECK(s.at("half") == s.at("empty"));
    }
  }
}

TEST_CASE("modules off: gpu-affinity: without it a CPU-only pod does not prefer a node without "
          "GPUs",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("gpu-affinity " << (on ? "on" : "off"));
    policy::PolicyConfig c = on ? policy::PolicyConfig{} : Without("gpu-affinity");
    // Bin packing counts CPU and memory only here, so that idle GPUs do not lower its score.
    c.binpack.weights = {{"cpu", 1}, {"memory", 1}};
    Harness h(c);
    AddObjects(h, {MakeNode("gpu").Cpu("16").Memory("64Gi").Gpu(1).Pods(110).Obj(),
                   MakeNode("cpu").Cpu("16").Memory("64Gi").Pods(110).Obj()});
    const std::map<std::string, int64_t> s = Scores(h, MlPod("p").Cpu("2"), {"gpu", "cpu"});
    INFO("gpu " << s.at("gpu") << ", cpu " << s.at("cpu"));
    if (on) {
      CHECK(s.at("cpu") > s.at("gpu"));
    } else {
      CHECK(s.at("cpu") == s.at("gpu"));
    }
  }
}

TEST_CASE("modules off: gpu-reserve: without it a CPU-only pod takes the CPU a GPU node keeps "
          "for its GPUs",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("gpu-reserve " << (on ? "on" : "off"));
    Harness h(on ? policy::PolicyConfig{} : Without("gpu-reserve"));
    // 8 free GPUs keep 16 CPUs (2 per GPU) of the node's 20.
    AddObjects(h, {MakeNode("gpu").Cpu("20").Memory("512Gi").Gpu(8).Pods(110).Obj()});
    const Verdicts v = FilterPod(h, MlPod("p").Cpu("8"), {"gpu"});
    if (on) {
      CHECK(v.fit.empty());
      CHECK(Contains(v.Why("gpu"), "reserved for the node's free GPUs"));
    } else {
      CHECK(v.fit == std::vector<std::string>{"gpu"});
    }
  }
}

TEST_CASE("modules off: gpu-min-cpu: without it a GPU pod starving its GPUs is not refused",
          "[modules-off]") {
  for (const bool on : {true, false}) {
    INFO("gpu-min-cpu " << (on ? "on" : "off"));
    policy::PolicyConfig c = on ? policy::PolicyConfig{} : Without("gpu-min-cpu");
    c.gpu.min_cpu_action = policy::GpuConfig::MinCpuAction::kReject;
    Harness h(c);
    AddObjects(h, {MakeNode("gpu").Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Obj()});
    const Verdicts v = FilterPod(h, MlPod("p").Cpu("100m").Gpu(1), {"gpu"});
    if (on) {
      CHECK(v.fit.empty());
      CHECK(v.unresolvable.contains("gpu"));
    } else {
      CHECK(v.fit == std::vector<std::string>{"gpu"});
    }
  }
}

}  // namespace
}  // namespace berth::testing
