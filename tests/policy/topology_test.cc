// The fabric tree below the wire: domains from node labels, hops between nodes at each level,
// the common depth of a set of nodes, nodes whose labels stop early, and the cache.

#include "policy/topology/topology.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CorePod;
using testing::FabricLevels;
using testing::FabricNode;
using testing::kGi;

// Two zones; z1 has spines s1 (leaves l1: a1, a2; l2: b1) and s2 (leaf l3: c1); z2 has s3 (leaf
// l4: d1). Then nodes whose labels stop early: z1 alone (zonly, zonly2), z1 and a leaf but no
// spine (nospine), an empty zone label (blank), and none at all (bare).
void Fabric(core::ClusterModel& model) {
  core::Node blank = FabricNode("blank", 8000, "", "s1", "l1");
  blank.labels.Set("zone", "");
  model.Apply(std::vector<core::ModelEvent>{
      core::NodeUpsert{FabricNode("a1", 8000, "z1", "s1", "l1")},
      core::NodeUpsert{FabricNode("a2", 8000, "z1", "s1", "l1")},
      core::NodeUpsert{FabricNode("b1", 8000, "z1", "s1", "l2")},
      core::NodeUpsert{FabricNode("c1", 8000, "z1", "s2", "l3")},
      core::NodeUpsert{FabricNode("d1", 8000, "z2", "s3", "l4")},
      core::NodeUpsert{FabricNode("zonly", 8000, "z1", "", "")},
      core::NodeUpsert{FabricNode("zonly2", 8000, "z1", "", "")},
      core::NodeUpsert{FabricNode("nospine", 8000, "z1", "", "l1")}, core::NodeUpsert{blank},
      core::NodeUpsert{FabricNode("bare", 8000, "", "", "")},
      core::NodeUpsert{FabricNode("bare2", 8000, "", "", "")}});
}

// The fabric in a model, read, and its tree by `levels`; nodes by name.
struct Tree {
  core::FakeClock clock;
  core::ClusterModel model{&clock};
  std::optional<core::ClusterModel::ReadView> view;
  const core::ClusterState* state = nullptr;
  std::shared_ptr<const Topology> topo;

  explicit Tree(const std::vector<std::string>& levels = FabricLevels()) {
    Fabric(model);
    view.emplace(&model);
    state = &**view;
    topo = Topology::Build(*state, levels);
  }
  core::NodeSlot operator[](std::string_view name) const { return state->FindNodeSlot(name); }
  std::vector<std::string> Paths(int depth) const {
    std::vector<std::string> out;
    for (Topology::DomainId d : topo->at_depth(depth)) out.push_back(topo->domain(d).path);
    return out;
  }
  std::vector<std::string> NodesOf(Topology::DomainId d) const {
    std::vector<std::string> out;
    for (core::NodeSlot s : topo->domain(d).nodes) out.push_back(state->node(s).node.name);
    return out;
  }
  int Common(std::initializer_list<std::string_view> names) const {
    std::vector<core::NodeSlot> slots;
    for (std::string_view n : names) slots.push_back((*this)[n]);
    return topo->CommonDepth(slots);
  }
};

TEST_CASE("topology: domains from node labels, depth by depth in path order", "[topology]") {
  const Tree t;
  CHECK(t.topo->levels() == 3);
  CHECK(t.topo->level_names() == FabricLevels());
  CHECK(t.Paths(0) == std::vector<std::string>{""});
  CHECK(t.Paths(1) == std::vector<std::string>{"z1", "z2"});
  CHECK(t.Paths(2) == std::vector<std::string>{"z1/s1", "z1/s2", "z2/s3"});
  CHECK(t.Paths(3) == std::vector<std::string>{"z1/s1/l1", "z1/s1/l2", "z1/s2/l3", "z2/s3/l4"});
  // The root holds every present node, in slot order; a leaf only its own.
  CHECK(t.NodesOf(Topology::kRoot) == std::vector<std::string>{"a1", "a2", "b1", "c1", "d1",
                                                               "zonly", "zonly2", "nospine",
                                                               "blank", "bare", "bare2"});
  const Topology::DomainId l1 = t.topo->DomainOf(t["a1"], 3);
  REQUIRE(l1 != Topology::kNoDomain);
  CHECK(t.topo->domain(l1).path == "z1/s1/l1");
  CHECK(t.topo->domain(l1).depth == 3);
  CHECK(t.NodesOf(l1) == std::vector<std::string>{"a1", "a2"});
  CHECK(t.topo->domain(t.topo->domain(l1).parent).path == "z1/s1");
  CHECK(t.topo->DomainOf(t["a1"], 0) == Topology::kRoot);
  CHECK(t.topo->DomainOf(t["a1"], 2) == t.topo->DomainOf(t["b1"], 2));
  CHECK(t.topo->DomainOf(t["a1"], 2) != t.topo->DomainOf(t["c1"], 2));
  CHECK(t.topo->PathOf(t["d1"]) == "z2/s3/l4");
  // Nodes whose labels stop early are in z1's domain (or none), never in a spine or leaf.
  CHECK(t.NodesOf(t.topo->DomainOf(t["a1"], 1)) ==
        std::vector<std::string>{"a1", "a2", "b1", "c1", "zonly", "zonly2", "nospine"});
}

TEST_CASE("topology: hops between nodes at each level", "[topology]") {
  const Tree t;
  CHECK(t.topo->Hops(t["a1"], t["a1"]) == Topology::kSameNode);
  CHECK(t.topo->Hops(t["a1"], t["a2"]) == 2);  // same leaf
  CHECK(t.topo->Hops(t["a1"], t["b1"]) == 4);  // same spine
  CHECK(t.topo->Hops(t["a1"], t["c1"]) == 6);  // same zone
  CHECK(t.topo->Hops(t["a1"], t["d1"]) == 8);  // only the root
  CHECK(t.topo->Hops(t["d1"], t["a1"]) == 8);
  CHECK(t.topo->Hops(t["b1"], t["a2"]) == 4);
  // The worst case inside a domain of each depth.
  CHECK(t.topo->HopsWithin(0) == 8);
  CHECK(t.topo->HopsWithin(1) == 6);
  CHECK(t.topo->HopsWithin(2) == 4);
  CHECK(t.topo->HopsWithin(3) == 2);
}

TEST_CASE("topology: a node missing a label belongs only to the domains above it", "[topology]") {
  const Tree t;
  // Zone only: in z1, no spine or leaf; as close to z1's nodes as the zone proves, no closer.
  CHECK(t.topo->PathOf(t["zonly"]) == "z1");
  CHECK(t.topo->DomainOf(t["zonly"], 1) == t.topo->DomainOf(t["a1"], 1));
  CHECK(t.topo->DomainOf(t["zonly"], 2) == Topology::kNoDomain);
  CHECK(t.topo->DomainOf(t["zonly"], 3) == Topology::kNoDomain);
  CHECK(t.topo->Hops(t["zonly"], t["a1"]) == 6);
  CHECK(t.topo->Hops(t["zonly"], t["zonly2"]) == 6);
  CHECK(t.topo->Hops(t["zonly"], t["d1"]) == 8);
  // A leaf label under a missing spine proves nothing: berth does not guess the spine.
  CHECK(t.topo->PathOf(t["nospine"]) == "z1");
  CHECK(t.topo->DomainOf(t["nospine"], 3) == Topology::kNoDomain);
  CHECK(t.topo->Hops(t["nospine"], t["a1"]) == 6);
  // No zone (an empty value counts as none): only the root holds it.
  for (std::string_view name : {"blank", "bare"}) {
    INFO(name);
    CHECK(t.topo->PathOf(t[name]) == "");
    CHECK(t.topo->DomainOf(t[name], 1) == Topology::kNoDomain);
    CHECK(t.topo->Hops(t[name], t["a1"]) == 8);
  }
  CHECK(t.topo->Hops(t["bare"], t["bare2"]) == 8);
  CHECK(t.topo->Hops(t["bare"], t["bare"]) == Topology::kSameNode);
}

TEST_CASE("topology: the common depth of a set of nodes", "[topology]") {
  const Tree t;
  CHECK(t.topo->CommonDepth({}) == 0);
  CHECK(t.Common({"a1"}) == 4);  // one node: L + 1
  CHECK(t.Common({"a1", "a1"}) == 4);
  CHECK(t.Common({"a1", "a2"}) == 3);
  CHECK(t.Common({"a1", "a2", "b1"}) == 2);
  CHECK(t.Common({"a1", "c1"}) == 1);
  CHECK(t.Common({"a1", "d1"}) == 0);
  CHECK(t.Common({"a1", "a2", "d1"}) == 0);
  // Nodes whose labels stop early share only what they prove, whichever comes first.
  CHECK(t.Common({"zonly", "a1"}) == 1);
  CHECK(t.Common({"a1", "zonly"}) == 1);
  CHECK(t.Common({"nospine", "a1", "a2"}) == 1);
  CHECK(t.Common({"zonly", "zonly2"}) == 1);
  CHECK(t.Common({"bare", "a1"}) == 0);
  CHECK(t.Common({"bare", "bare2"}) == 0);
  CHECK(t.Common({"bare", "bare"}) == 4);
}

TEST_CASE("topology: without levels only the root holds nodes: 2 hops between any two",
          "[topology]") {
  const Tree t(std::vector<std::string>{});
  CHECK(t.topo->levels() == 0);
  CHECK(t.topo->Hops(t["a1"], t["a2"]) == 2);
  CHECK(t.topo->Hops(t["a1"], t["a1"]) == 0);
  CHECK(t.Common({"a1", "a2"}) == 0);
  CHECK(t.Common({"a1"}) == 1);
  CHECK(t.topo->PathOf(t["a1"]) == "");
}

TEST_CASE("topology cache: rebuilt when node labels change, not for pods", "[topology]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Fabric(model);
  TopologyCache cache(FabricLevels());
  std::shared_ptr<const Topology> first;
  {
    auto view = model.Read();
    first = cache.Get(*view);
    CHECK(cache.Get(*view) == first);
  }
  model.Apply(core::ModelEvent(core::PodUpsert{CorePod("p", "a1", 1000, kGi)}));
  {
    auto view = model.Read();
    CHECK(cache.Get(*view) == first);
  }
  // a2 moves to leaf l2: b1's neighbour now.
  model.Apply(core::ModelEvent(core::NodeUpsert{FabricNode("a2", 8000, "z1", "s1", "l2")}));
  {
    auto view = model.Read();
    const std::shared_ptr<const Topology> second = cache.Get(*view);
    CHECK(second != first);
    CHECK(second->Hops(view->FindNodeSlot("a2"), view->FindNodeSlot("b1")) == 2);
    CHECK(second->Hops(view->FindNodeSlot("a2"), view->FindNodeSlot("a1")) == 4);
  }
}

}  // namespace
}  // namespace berth::policy
