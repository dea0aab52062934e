// Explain below the wire: every node grouped by its verdict with the first node's numbers, and
// the changes offered that would let the pod run (room on the closest node, a larger node, a
// resource nobody offers, a gang's minimum, its hop limit, its freeze window).

#include "policy/explain/explain.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "policy/registry.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CorePod;
using testing::CorePodGroup;
using testing::FabricLevels;
using testing::FabricNode;
using testing::GangPod;
using testing::kGi;

using Nodes = std::vector<std::string>;

// A model and the default pipeline over it; the fabric is FabricNode's.
struct Explainer {
  core::FakeClock clock;
  core::ClusterModel model{&clock};
  PolicyConfig config;
  std::unique_ptr<Pipeline> pipeline;

  Explainer() {
    config.gangs.topology_levels = FabricLevels();
    auto built = BuildDefaultRegistry().Build(config, model.resources());
    REQUIRE(built.ok());
    pipeline = *std::move(built);
  }
  void Add(std::vector<core::ModelEvent> events) { model.Apply(events); }
  Explanation Of(std::string_view uid) {
    auto view = model.Read();
    const core::PodState* p = view->FindPod(uid);
    REQUIRE(p != nullptr);
    return Explain(*pipeline, *view, p->pod, clock.Now(), config.scheduler_name);
  }
};

core::Pod Berth(core::Pod p) {
  p.scheduler_name = "berth-scheduler";
  return p;
}

core::ModelEvent Filler(std::string node, int64_t cpu_milli) {
  return core::PodUpsert{testing::FillerPod(std::move(node), cpu_milli)};
}

TEST_CASE("explain: nodes grouped by verdict, most nodes first, with the first node's numbers",
          "[explain]") {
  Explainer x;
  x.Add({core::NodeUpsert{FabricNode("n0", 8000, "z1", "s1", "l1")},
         core::NodeUpsert{FabricNode("n1", 8000, "z1", "s1", "l1")},
         core::NodeUpsert{FabricNode("n2", 2000, "z1", "s1", "l2")},
         core::NodeUpsert{FabricNode("n3", 8000, "z1", "s1", "l2")}, Filler("n0", 7000),
         Filler("n1", 5000), Filler("n3", 6000),
         core::PodUpsert{Berth(CorePod("wants", "", 4000, kGi))}});
  Explanation e = x.Of("wants");
  CHECK(e.pod == "default/pod-wants");
  CHECK(e.managed);
  CHECK(e.node.empty());
  CHECK(e.pool == "default");
  CHECK(e.queue == "default");
  CHECK(e.gang.empty());
  CHECK(e.admission.ok());
  CHECK(e.fits.empty());
  REQUIRE(e.rejected.size() == 2);
  CHECK(e.rejected[0].nodes == Nodes{"n0", "n1", "n3"});
  CHECK(e.rejected[0].verdict.fit == Fit::kUnschedulable);
  CHECK(e.rejected[0].verdict.reason == Reason::kInsufficientResource);
  CHECK(e.rejected[0].verdict.message == "berth: insufficient cpu (pod requests 4 cpu)");
  CHECK(e.rejected[0].verdict.detail ==
        "cpu: requested 4, free 1 (allocatable 8, used 7, in-flight binds 0): short by 3");
  CHECK(e.rejected[1].nodes == Nodes{"n2"});
  CHECK(e.rejected[1].verdict.fit == Fit::kUnresolvable);
  CHECK(e.rejected[1].verdict.reason == Reason::kExceedsAllocatable);
  CHECK(e.rejected[1].verdict.detail ==
        "cpu: requested 4, free 2 (allocatable 2, used 0, in-flight binds 0): exceeds allocatable");
  // n1 is the closest (1 CPU short), named with its place in the fabric.
  CHECK(e.would_run_if ==
        Nodes{"fits on node n1 (z1/s1/l1) once 1 more cpu are free there (pods of lower "
              "priority could be preempted for it)"});

  // A node that takes it: no change is needed.
  x.Add({core::NodeUpsert{FabricNode("n4", 8000, "z1", "s1", "l2")}});
  e = x.Of("wants");
  CHECK(e.fits == Nodes{"n4"});
  CHECK(e.rejected.size() == 2);
  CHECK(e.would_run_if.empty());
}

TEST_CASE("explain: no node large enough, a resource no node offers", "[explain]") {
  Explainer x;
  x.Add({core::NodeUpsert{FabricNode("n0", 2000, "", "", "")},
         core::NodeUpsert{FabricNode("n1", 6000, "", "", "")},
         core::PodUpsert{Berth(CorePod("huge", "", 8000, kGi))},
         core::PodUpsert{Berth(CorePod("gpu", "", 1000, kGi, 1))}});
  Explanation e = x.Of("huge");
  REQUIRE(e.rejected.size() == 1);
  CHECK(e.rejected[0].nodes == Nodes{"n0", "n1"});
  CHECK(e.rejected[0].verdict.reason == Reason::kExceedsAllocatable);
  CHECK(e.would_run_if == Nodes{"no node is large enough; the closest, n1, would need 2 more cpu "
                                "allocatable; or the pod asks for less"});
  e = x.Of("gpu");
  REQUIRE(e.rejected.size() == 1);
  CHECK(e.rejected[0].verdict.reason == Reason::kExceedsAllocatable);
  CHECK(e.would_run_if ==
        Nodes{"no node advertises nvidia.com/gpu: it runs only once a node offers it"});
}

// a1 and b1: one spine, two leaves, each taking one 6-CPU member.
void TwoLeaves(Explainer& x) {
  x.Add({core::NodeUpsert{FabricNode("a1", 8000, "z1", "s1", "l1")},
         core::NodeUpsert{FabricNode("b1", 8000, "z1", "s1", "l2")}});
}

TEST_CASE(
    "explain: a gang short of room: every node gives the admission's verdict, and how many fit",
    "[explain][gang]") {
  Explainer x;
  TwoLeaves(x);
  x.Add({core::PodGroupUpsert{CorePodGroup("g", 3)}, core::PodUpsert{GangPod("g0", "g", "", 6000)},
         core::PodUpsert{GangPod("g1", "g", "", 6000)},
         core::PodUpsert{GangPod("g2", "g", "", 6000)}});
  const Explanation e = x.Of("g0");
  CHECK(e.gang == "g");
  CHECK(e.admission.reason == Reason::kGangNotPlaceable);
  CHECK(e.fits.empty());
  REQUIRE(e.rejected.size() == 1);
  CHECK(e.rejected[0].nodes == Nodes{"a1", "b1"});
  CHECK(e.rejected[0].verdict.reason == Reason::kGangNotPlaceable);
  CHECK(e.rejected[0].verdict.message == "berth: gang default/g: 2 of 3 members placeable");
  CHECK(e.would_run_if == Nodes{"fits if minMember were 2 (2 of 3 members are placeable now), or "
                                "when room for 1 more member is free"});
}

TEST_CASE("explain: a gang held by its hop limit: the limit it would need", "[explain][gang]") {
  Explainer x;
  TwoLeaves(x);
  x.Add({core::PodGroupUpsert{CorePodGroup("tight", 2)}});
  for (const char* uid : {"t0", "t1"}) {
    core::Pod p = GangPod(uid, "tight", "", 6000);
    p.annotations.Set(kMaxHopsKey, "2");
    x.Add({core::PodUpsert{p}});
  }
  const Explanation e = x.Of("t1");
  CHECK(e.admission.reason == Reason::kGangMaxHops);
  REQUIRE(e.rejected.size() == 1);
  CHECK(e.rejected[0].nodes == Nodes{"a1", "b1"});
  CHECK(e.rejected[0].verdict.message ==
        "berth: gang default/tight: its 2 members fit only 4 hops apart; berth.io/max-hops is 2");
  CHECK(e.would_run_if ==
        Nodes{"fits if berth.io/max-hops were 4 (its members fit 4 hops apart now)"});
}

TEST_CASE("explain: an elastic member of a frozen gang: when the window ends", "[explain][gang]") {
  Explainer x;
  x.Add({core::NodeUpsert{FabricNode("a1", 8000, "z1", "s1", "l1")},
         core::PodGroupUpsert{CorePodGroup("el", 1)},
         core::PodUpsert{GangPod("e0", "el", "a1", 2000)},
         core::PodUpsert{GangPod("e1", "el", "", 2000)}});
  const absl::Time resized = x.clock.Now() - absl::Seconds(10);
  x.model.UpdateGangRecord("default", "el", [&](core::GangRecord& r) { r.resized = resized; });
  Explanation e = x.Of("e1");
  CHECK(e.admission.reason == Reason::kGangElasticWaiting);
  CHECK(e.would_run_if == Nodes{"gang default/el's freeze window ends (in 50s), and room for cpu=2 "
                                "memory=1Gi pods=1 is free near the gang"});
  x.clock.Advance(absl::Minutes(1));
  e = x.Of("e1");
  CHECK(e.admission.reason == Reason::kGangElasticWaiting);
  CHECK(e.would_run_if ==
        Nodes{"room for cpu=2 memory=1Gi pods=1 is free near gang default/el (free "
              "room goes to the least fulfilled elastic gang first)"});
}

TEST_CASE("explain: a bound pod, or another scheduler's, is not examined", "[explain]") {
  Explainer x;
  x.Add({core::NodeUpsert{FabricNode("n0", 1000, "", "", "")},
         core::PodUpsert{Berth(CorePod("placed", "n0", 4000, kGi))},
         core::PodUpsert{CorePod("foreign", "", 4000, kGi)}});
  Explanation e = x.Of("placed");
  CHECK(e.node == "n0");
  CHECK(e.managed);
  CHECK(e.rejected.empty());
  CHECK(e.would_run_if.empty());
  e = x.Of("foreign");
  CHECK_FALSE(e.managed);
  CHECK(e.rejected.empty());
  CHECK(e.fits.empty());
}

}  // namespace
}  // namespace berth::policy
