// The pool map and its cache, below the wire: membership, default pool, rebuilds only when
// pools or node labels change.

#include <catch2/catch.hpp>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "policy/pools/pools.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CoreNode;
using testing::CorePod;
using testing::kGi;

core::Pool PoolSelecting(std::string name, std::string key, std::string value) {
  core::Pool p;
  p.name = std::move(name);
  p.node_selector.match_labels.Set(key, value);
  return p;
}

core::Node Labelled(std::string name, std::string key, std::string value) {
  core::Node n = CoreNode(std::move(name), 8000, 32 * kGi);
  if (!key.empty()) n.labels.Set(key, value);
  return n;
}

TEST_CASE("pool map: membership, the default pool and its flags", "[pools]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  core::Pool flags_only = PoolSelecting("default", "ignored", "x");
  flags_only.disable_sharing = true;
  const std::vector<core::ModelEvent> events = {
      core::PoolUpsert{PoolSelecting("gpu", "kind", "gpu")},
      core::PoolUpsert{flags_only},
      core::NodeUpsert{Labelled("g1", "kind", "gpu")},
      core::NodeUpsert{Labelled("c1", "kind", "cpu")},
      core::NodeUpsert{Labelled("x1", "ignored", "x")}};
  model.Apply(events);
  auto view = model.Read();
  const std::shared_ptr<const PoolMap> map = PoolMap::Build(*view);
  REQUIRE(map->pools().size() == 2);  // default first, then gpu; "default" only sets flags
  CHECK(map->pool(kDefaultPoolId).name == "default");
  CHECK(map->pool(kDefaultPoolId).disable_sharing);
  CHECK(map->Find("gpu") == PoolId{1});
  CHECK_FALSE(map->Find("nope").has_value());
  CHECK(map->PoolOf(view->FindNodeSlot("g1")) == 1);
  CHECK(map->PoolOf(view->FindNodeSlot("c1")) == kDefaultPoolId);
  CHECK(map->PoolOf(view->FindNodeSlot("x1")) == kDefaultPoolId);
  CHECK(map->pool(kDefaultPoolId).nodes.size() == 2);
}

TEST_CASE("pool map cache: rebuilt when pools or node labels change, not for pods", "[pools]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  model.Apply(core::ModelEvent(core::PoolUpsert{PoolSelecting("gpu", "kind", "gpu")}));
  model.Apply(core::ModelEvent(core::NodeUpsert{Labelled("n1", "kind", "gpu")}));
  PoolMapCache cache;
  std::shared_ptr<const PoolMap> first;
  {
    auto view = model.Read();
    first = cache.Get(*view);
    CHECK(cache.Get(*view) == first);
  }
  // Pods and node status changes do not invalidate it.
  model.Apply(core::ModelEvent(core::PodUpsert{CorePod("p1", "n1", 1000, kGi)}));
  core::Node same = Labelled("n1", "kind", "gpu");
  same.unschedulable = true;
  model.Apply(core::ModelEvent(core::NodeUpsert{same}));
  {
    auto view = model.Read();
    CHECK(cache.Get(*view) == first);
  }
  // A label change does, and moves the node.
  model.Apply(core::ModelEvent(core::NodeUpsert{Labelled("n1", "kind", "cpu")}));
  {
    auto view = model.Read();
    std::shared_ptr<const PoolMap> second = cache.Get(*view);
    CHECK(second != first);
    CHECK(second->PoolOf(view->FindNodeSlot("n1")) == kDefaultPoolId);
  }
  // So does a pool change.
  model.Apply(core::ModelEvent(core::PoolUpsert{PoolSelecting("gpu", "kind", "cpu")}));
  {
    auto view = model.Read();
    CHECK(cache.Get(*view)->PoolOf(view->FindNodeSlot("n1")) == 1);
  }
}

TEST_CASE("home pool: berth's annotation, the seed's, else default", "[pools]") {
  core::Pod p = CorePod("p", "", 1000, kGi);
  CHECK(HomePoolName(p) == "default");
  p.annotations.Set("resource.aibee.cn/pool", "seed");
  CHECK(HomePoolName(p) == "seed");
  p.annotations.Set("berth.io/pool", "mine");
  CHECK(HomePoolName(p) == "mine");
}

}  // namespace
}  // namespace berth::policy
