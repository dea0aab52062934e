// The pool map and its cache, below the wire: membership, default pool, rebuilds only when
// pools or node labels change; room and reclaim only on nodes the pod may go to.

#include <catch2/catch.hpp>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/placement.h"
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


// ---- room and reclaim respect the pod's placement (nodeSelector, taints, cordon) --------------

constexpr std::string_view kScheduler = "berth-scheduler";

// A pod of berth's scheduler whose home pool is `pool`, `cpu` millicores.
core::Pod PoolPod(std::string uid, std::string node, std::string pool, int64_t cpu, int32_t priority = 0) {
  core::Pod p = CorePod(std::move(uid), std::move(node), cpu, kGi);
  p.scheduler_name = std::string(kScheduler);
  p.annotations.Set("berth.io/pool", pool);
  p.priority = priority;
  return p;
}

core::Pod WithNodeSelector(core::Pod pod, std::string key, std::string value) {
  core::PodPlacement placement;
  placement.node_selector.Set(key, value);
  pod.placement = core::SharePlacement(std::move(placement));
  return pod;
}

// Pools a (a1, a2) and b (b1); a2 alone has disk=ssd.
std::vector<core::ModelEvent> PoolsAB() {
  core::Node a2 = Labelled("a2", "pool", "a");
  a2.labels.Set("disk", "ssd");
  return {core::PoolUpsert{PoolSelecting("a", "pool", "a")},
          core::PoolUpsert{PoolSelecting("b", "pool", "b")},
          core::NodeUpsert{Labelled("a1", "pool", "a")},
          core::NodeUpsert{a2},
          core::NodeUpsert{Labelled("b1", "pool", "b")}};
}

TEST_CASE("pool room: only nodes the pod may go to count", "[pools][placement]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  model.Apply(PoolsAB());
  // a2 (the ssd node) is full; a1 is empty.
  model.Apply(core::ModelEvent(core::PodUpsert{PoolPod("fill", "a2", "a", 8000)}));
  auto view = model.Read();
  const std::shared_ptr<const PoolMap> map = PoolMap::Build(*view);
  const PoolMap::Entry& a = map->pool(*map->Find("a"));
  const core::Pod plain = PoolPod("p", "", "a", 2000);
  CHECK(PoolHasRoom(*view, plain, a));
  // The pod needs an ssd node: a1 does not qualify and a2 is full, so pool a has no room.
  const core::Pod ssd = WithNodeSelector(plain, "disk", "ssd");
  CHECK_FALSE(PoolHasRoom(*view, ssd, a));
  // Pool b has room for the plain pod; not for the ssd one.
  const PoolMap::Entry& b = map->pool(*map->Find("b"));
  CHECK(PoolHasRoom(*view, plain, b));
  CHECK_FALSE(PoolHasRoom(*view, ssd, b));
}

TEST_CASE("pool room: taints and cordons take a node's room away unless tolerated", "[pools][placement]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  core::Node tainted = Labelled("n1", "pool", "a");
  tainted.taints.push_back(core::Taint{.key = "gpu", .value = "true", .effect = "NoSchedule"});
  core::Node cordoned = Labelled("n2", "pool", "a");
  cordoned.unschedulable = true;
  core::Node soft = Labelled("n3", "pool", "c");
  soft.taints.push_back(core::Taint{.key = "gpu", .value = "true", .effect = "PreferNoSchedule"});
  model.Apply(std::vector<core::ModelEvent>{core::PoolUpsert{PoolSelecting("a", "pool", "a")},
                                            core::PoolUpsert{PoolSelecting("c", "pool", "c")},
                                            core::NodeUpsert{tainted}, core::NodeUpsert{cordoned},
                                            core::NodeUpsert{soft}});
  auto view = model.Read();
  const std::shared_ptr<const PoolMap> map = PoolMap::Build(*view);
  const PoolMap::Entry& a = map->pool(*map->Find("a"));
  core::Pod pod = PoolPod("p", "", "a", 1000);
  CHECK_FALSE(PoolHasRoom(*view, pod, a));
  // PreferNoSchedule does not keep the pod off.
  CHECK(PoolHasRoom(*view, pod, map->pool(*map->Find("c"))));

  core::PodPlacement gpu;
  gpu.tolerations.push_back(core::Toleration{.key = "gpu", .op = core::TolerationOp::kExists});
  pod.placement = core::SharePlacement(gpu);
  CHECK(PoolHasRoom(*view, pod, a));  // n1

  core::PodPlacement cordon;
  cordon.tolerations.push_back(core::Toleration{.key = std::string(core::kUnschedulableTaintKey),
                                                .op = core::TolerationOp::kExists,
                                                .effect = "NoSchedule"});
  pod.placement = core::SharePlacement(cordon);
  CHECK(PoolHasRoom(*view, pod, a));  // n2
}

TEST_CASE("pool borrowers: a bound pod whose home pool does not exist borrows its node's pool, in every view", "[pools][reclaim]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  model.Apply(PoolsAB());
  // On a1 (pool a): one of pool a, one naming pool "gone"; one of "gone" also waits.
  model.Apply(std::vector<core::ModelEvent>{core::PodUpsert{PoolPod("own", "a1", "a", 2000, 100)},
                                            core::PodUpsert{PoolPod("orphan", "a1", "gone", 2000, 100)},
                                            core::PodUpsert{PoolPod("waiting", "", "gone", 2000)}});
  auto view = model.Read();
  const std::shared_ptr<const PoolMap> map = PoolMap::Build(*view);
  const core::PodState* own = view->FindPod("own");
  const core::PodState* orphan = view->FindPod("orphan");
  REQUIRE(own != nullptr);
  REQUIRE(orphan != nullptr);
  CHECK_FALSE(IsBorrower(*own, *map));
  CHECK(IsBorrower(*orphan, *map));
  // The statistics agree: pool a lends the orphan its room; no pool borrows it, and the waiting
  // pod of "gone" is pending in none.
  const std::vector<PoolStats> stats = ComputePoolStats(*view, *map, kScheduler);
  const PoolStats& a = stats[*map->Find("a")];
  CHECK(a.shared.pods == 1);
  CHECK(a.shared.resources.Get(core::kCpu) == 2000);
  int64_t borrowed = 0, pending = 0;
  for (const PoolStats& s : stats) {
    borrowed += s.borrowed.pods;
    pending += s.pending.pods;
  }
  CHECK(borrowed == 0);
  CHECK(pending == 0);
  // And a pod of pool a reclaims the orphan (a borrower, whatever its priority), not its own.
  const core::Pod mine = PoolPod("mine", "", "a", 8000, 1);
  const std::vector<const core::PodState*> victims =
      ReclaimCandidates(*view, *map, mine, view->node(view->FindNodeSlot("a1")), kScheduler, nullptr);
  REQUIRE(victims.size() == 1);
  CHECK(victims[0]->pod.uid == "orphan");
}

TEST_CASE("pool reclaim: victims only on a node the pod may go to", "[pools][placement][reclaim]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  model.Apply(PoolsAB());
  // Pool b's pods borrow all of pool a: the cheaper victim (priority 1) on a1, a dearer one
  // (priority 100) on the ssd node a2.
  model.Apply(std::vector<core::ModelEvent>{core::PodUpsert{PoolPod("cheap", "a1", "b", 8000, 1)},
                                            core::PodUpsert{PoolPod("dear", "a2", "b", 8000, 100)}});
  auto view = model.Read();
  const std::shared_ptr<const PoolMap> map = PoolMap::Build(*view);

  const core::Pod plain = PoolPod("p", "", "a", 4000);
  std::optional<PoolReclaim> r = FindPoolReclaim(WhatIf(*view, absl::UnixEpoch(), nullptr), *map, plain, kScheduler);
  REQUIRE(r.has_value());
  CHECK(r->node == view->FindNodeSlot("a1"));  // the cheaper victim

  // A pod that needs ssd can only use a2: evicting on a1 would make room it cannot use.
  const core::Pod ssd = WithNodeSelector(plain, "disk", "ssd");
  r = FindPoolReclaim(WhatIf(*view, absl::UnixEpoch(), nullptr), *map, ssd, kScheduler);
  REQUIRE(r.has_value());
  CHECK(r->node == view->FindNodeSlot("a2"));
  REQUIRE(r->victims.size() == 1);
  CHECK(r->victims[0]->pod.uid == "dear");

  // No node of the pool qualifies: no reclaim at all.
  const core::Pod nvme = WithNodeSelector(plain, "disk", "nvme");
  CHECK_FALSE(FindPoolReclaim(WhatIf(*view, absl::UnixEpoch(), nullptr), *map, nvme, kScheduler).has_value());
}

TEST_CASE("pool reclaim: never on a cordoned node, even for a pod tolerating the cordon",
          "[pools][placement][reclaim]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  model.Apply(PoolsAB());
  core::Node a1 = Labelled("a1", "pool", "a");
  a1.unschedulable = true;
  model.Apply(std::vector<core::ModelEvent>{core::NodeUpsert{a1},
                                            core::PodUpsert{PoolPod("cheap", "a1", "b", 8000, 1)},
                                            core::PodUpsert{PoolPod("dear", "a2", "b", 8000, 100)}});
  auto view = model.Read();
  const std::shared_ptr<const PoolMap> map = PoolMap::Build(*view);
  core::Pod pod = PoolPod("p", "", "a", 4000);
  core::PodPlacement cordon;
  cordon.tolerations.push_back(core::Toleration{.key = std::string(core::kUnschedulableTaintKey),
                                                .op = core::TolerationOp::kExists});
  pod.placement = core::SharePlacement(cordon);
  std::optional<PoolReclaim> r = FindPoolReclaim(WhatIf(*view, absl::UnixEpoch(), nullptr), *map, pod, kScheduler);
  REQUIRE(r.has_value());
  CHECK(r->node == view->FindNodeSlot("a2"));
}

}  // namespace
}  // namespace berth::policy
