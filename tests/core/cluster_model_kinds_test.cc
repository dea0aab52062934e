// Tests of the cluster model's rarer kinds: Pools, Queues, PodGroups and PriorityClasses, and
// DeleteEventFor.

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "tests/testing/core_builders.h"

namespace berth::core {
namespace {

Pool MakePool(std::string name, std::string label_value) {
  Pool p;
  p.name = std::move(name);
  p.node_selector.match_labels.Set("pool", label_value);
  return p;
}

Queue MakeQueue(std::string name, double weight) {
  Queue q;
  q.name = std::move(name);
  q.weight = weight;
  return q;
}

PodGroup MakeGroup(std::string ns, std::string name, int32_t min_member) {
  PodGroup g;
  g.ns = std::move(ns);
  g.name = std::move(name);
  g.min_member = min_member;
  return g;
}

PriorityClass MakeClass(std::string name, int32_t value) {
  PriorityClass pc;
  pc.name = std::move(name);
  pc.value = value;
  return pc;
}

class KindsTest {
 protected:
  FakeClock clock_;
  ClusterModel model_{&clock_};

  ApplyStats Apply(ModelEvent e) { return model_.Apply(e); }
  uint64_t Generation() { return model_.Read()->generation(); }
  std::vector<std::string> PoolNames() {
    std::vector<std::string> out;
    model_.Read()->ForEachPool([&](const Pool& p) { out.push_back(p.name); });
    return out;
  }
};

TEST_CASE_METHOD(KindsTest, "Model kinds: pools are added, replaced and deleted",
                 "[model][kinds]") {
  ApplyStats s = Apply(PoolUpsert{MakePool("train", "train")});
  CHECK(s.pools_upserted == 1);
  CHECK(s.pools_deleted == 0);
  CHECK(s.nodes_upserted == 0);
  {
    auto view = model_.Read();
    CHECK(view->pool_count() == 1);
    const Pool* p = view->FindPool("train");
    REQUIRE(p != nullptr);
    CHECK(p->node_selector.match_labels.Get("pool") == "train");
    CHECK(view->FindPool("infer") == nullptr);
    // The default pool is a policy's business, not an object of the model.
    CHECK(view->FindPool("default") == nullptr);
  }

  Pool changed = MakePool("train", "gpu");
  changed.disable_borrowing = true;
  s = Apply(PoolUpsert{changed});
  CHECK(s.pools_upserted == 1);
  {
    auto view = model_.Read();
    CHECK(view->pool_count() == 1);
    REQUIRE(view->FindPool("train") != nullptr);
    CHECK(*view->FindPool("train") == changed);
  }

  s = Apply(PoolDelete{"train"});
  CHECK(s.pools_deleted == 1);
  CHECK(model_.Read()->pool_count() == 0);
  CHECK(model_.Read()->FindPool("train") == nullptr);
  // Deleting what is not there is harmless and counts nothing.
  s = Apply(PoolDelete{"train"});
  CHECK(s.pools_deleted == 0);
}

TEST_CASE_METHOD(KindsTest, "Model kinds: queues are added, replaced and deleted",
                 "[model][kinds]") {
  Queue a = MakeQueue("team-a", 2);
  a.non_preemptible_limit_factor = 0.5;
  CHECK(Apply(QueueUpsert{a}).queues_upserted == 1);
  CHECK(Apply(QueueUpsert{MakeQueue("team-b", 1)}).queues_upserted == 1);
  {
    auto view = model_.Read();
    CHECK(view->queue_count() == 2);
    REQUIRE(view->FindQueue("team-a") != nullptr);
    CHECK(view->FindQueue("team-a")->weight == 2);
    CHECK(view->FindQueue("team-a")->non_preemptible_limit_factor == 0.5);
    CHECK(view->FindQueue("default") == nullptr);  // never synthesized
  }
  Apply(QueueUpsert{MakeQueue("team-a", 3)});
  {
    auto view = model_.Read();
    CHECK(view->queue_count() == 2);
    CHECK(view->FindQueue("team-a")->weight == 3);
    CHECK_FALSE(view->FindQueue("team-a")->non_preemptible_limit_factor.has_value());
  }
  CHECK(Apply(QueueDelete{"team-a"}).queues_deleted == 1);
  CHECK(Apply(QueueDelete{"nope"}).queues_deleted == 0);
  auto view = model_.Read();
  CHECK(view->queue_count() == 1);
  CHECK(view->FindQueue("team-a") == nullptr);
  CHECK(view->FindQueue("team-b") != nullptr);
}

TEST_CASE_METHOD(KindsTest, "Model kinds: PodGroups are keyed by namespace and name",
                 "[model][kinds]") {
  CHECK(Apply(PodGroupUpsert{MakeGroup("ml", "job-7", 8)}).podgroups_upserted == 1);
  Apply(PodGroupUpsert{MakeGroup("research", "job-7", 2)});
  {
    auto view = model_.Read();
    CHECK(view->podgroup_count() == 2);
    REQUIRE(view->FindPodGroup("ml", "job-7") != nullptr);
    CHECK(view->FindPodGroup("ml", "job-7")->min_member == 8);
    REQUIRE(view->FindPodGroup("research", "job-7") != nullptr);
    CHECK(view->FindPodGroup("research", "job-7")->min_member == 2);
    CHECK(view->FindPodGroup("default", "job-7") == nullptr);
    CHECK(view->FindPodGroup("ml", "job-") == nullptr);
  }
  PodGroup replaced = MakeGroup("ml", "job-7", 4);
  replaced.schedule_timeout_seconds = 60;
  replaced.min_resources.Set(kNvidiaGpu, 32);
  replaced.source = PodGroupSource::kVolcano;
  Apply(PodGroupUpsert{replaced});
  {
    auto view = model_.Read();
    CHECK(view->podgroup_count() == 2);
    CHECK(*view->FindPodGroup("ml", "job-7") == replaced);
  }
  CHECK(Apply(PodGroupDelete{"research", "job-7"}).podgroups_deleted == 1);
  CHECK(Apply(PodGroupDelete{"research", "job-7"}).podgroups_deleted == 0);
  CHECK(Apply(PodGroupDelete{"other", "job-7"}).podgroups_deleted == 0);
  auto view = model_.Read();
  CHECK(view->podgroup_count() == 1);
  CHECK(view->FindPodGroup("ml", "job-7") != nullptr);
}

TEST_CASE_METHOD(KindsTest, "Model kinds: PriorityClasses are added, replaced and deleted",
                 "[model][kinds]") {
  CHECK(Apply(PriorityClassUpsert{MakeClass("berth-production", 10000)}).priorityclasses_upserted ==
        1);
  PriorityClass never = MakeClass("berth-offline", 100);
  never.preemption_policy = "Never";
  never.global_default = true;
  Apply(PriorityClassUpsert{never});
  {
    auto view = model_.Read();
    CHECK(view->priorityclass_count() == 2);
    REQUIRE(view->FindPriorityClass("berth-production") != nullptr);
    CHECK(view->FindPriorityClass("berth-production")->value == 10000);
    CHECK(view->FindPriorityClass("berth-production")->preemption_policy == "PreemptLowerPriority");
    CHECK(*view->FindPriorityClass("berth-offline") == never);
  }
  Apply(PriorityClassUpsert{MakeClass("berth-production", 20000)});
  CHECK(model_.Read()->FindPriorityClass("berth-production")->value == 20000);
  CHECK(Apply(PriorityClassDelete{"berth-offline"}).priorityclasses_deleted == 1);
  CHECK(Apply(PriorityClassDelete{"berth-offline"}).priorityclasses_deleted == 0);
  CHECK(model_.Read()->priorityclass_count() == 1);
}

TEST_CASE_METHOD(KindsTest, "Model kinds: every event advances the generation and stamps its kind",
                 "[model][kinds]") {
  auto view_gens = [&] {
    auto view = model_.Read();
    return std::vector<uint64_t>{view->pools_generation(), view->queues_generation(),
                                 view->podgroups_generation(), view->priorityclasses_generation()};
  };
  CHECK(view_gens() == std::vector<uint64_t>{0, 0, 0, 0});
  const uint64_t g0 = Generation();
  Apply(PoolUpsert{MakePool("a", "a")});
  CHECK(Generation() == g0 + 1);
  CHECK(view_gens() == std::vector<uint64_t>{g0 + 1, 0, 0, 0});
  Apply(QueueUpsert{MakeQueue("q", 1)});
  Apply(PodGroupUpsert{MakeGroup("ns", "g", 1)});
  Apply(PriorityClassUpsert{MakeClass("c", 1)});
  CHECK(Generation() == g0 + 4);
  CHECK(view_gens() == std::vector<uint64_t>{g0 + 1, g0 + 2, g0 + 3, g0 + 4});
  // A replace with the same content is still a change event.
  Apply(PoolUpsert{MakePool("a", "a")});
  CHECK(Generation() == g0 + 5);
  CHECK(view_gens()[0] == g0 + 5);
  Apply(PoolDelete{"a"});
  CHECK(view_gens()[0] == g0 + 6);
  // An idempotent delete advances the model generation (as every event does) but changes no
  // pool, so the pools' stamp stays.
  Apply(PoolDelete{"a"});
  CHECK(Generation() == g0 + 7);
  CHECK(view_gens()[0] == g0 + 6);
  // Node events do not touch the kinds' stamps.
  Apply(NodeUpsert{testing::CoreNode("n1", 1000, testing::kGi)});
  CHECK(view_gens() == std::vector<uint64_t>{g0 + 6, g0 + 2, g0 + 3, g0 + 4});
}

TEST_CASE_METHOD(KindsTest, "Model kinds: ForEach visits in name order", "[model][kinds]") {
  model_.Apply(std::vector<ModelEvent>{
      PoolUpsert{MakePool("zeta", "z")}, PoolUpsert{MakePool("alpha", "a")},
      PoolUpsert{MakePool("mid", "m")}, QueueUpsert{MakeQueue("q2", 1)},
      QueueUpsert{MakeQueue("q10", 1)}, QueueUpsert{MakeQueue("q1", 1)},
      PodGroupUpsert{MakeGroup("b", "a", 1)}, PodGroupUpsert{MakeGroup("a", "z", 1)},
      PodGroupUpsert{MakeGroup("a", "b", 1)}, PriorityClassUpsert{MakeClass("low", 1)},
      PriorityClassUpsert{MakeClass("high", 100)}});
  CHECK(PoolNames() == std::vector<std::string>{"alpha", "mid", "zeta"});
  auto view = model_.Read();
  std::vector<std::string> queues, groups, classes;
  view->ForEachQueue([&](const Queue& q) { queues.push_back(q.name); });
  view->ForEachPodGroup([&](const PodGroup& g) { groups.push_back(g.Key()); });
  view->ForEachPriorityClass([&](const PriorityClass& c) { classes.push_back(c.name); });
  CHECK(queues == std::vector<std::string>{"q1", "q10", "q2"});
  CHECK(groups == std::vector<std::string>{"a/b", "a/z", "b/a"});
  CHECK(classes == std::vector<std::string>{"high", "low"});
}

TEST_CASE_METHOD(KindsTest, "Model kinds: nodes and pods are unaffected by the other kinds",
                 "[model][kinds]") {
  Apply(NodeUpsert{testing::CoreNode("n1", 4000, 8 * testing::kGi)});
  Apply(PodUpsert{testing::CorePod("u1", "n1", 1000, testing::kGi)});
  Apply(PoolUpsert{MakePool("n1", "x")});  // same name as the node: another kind, no clash
  Apply(PodGroupUpsert{MakeGroup("default", "pod-u1", 1)});
  Apply(PoolDelete{"n1"});
  Apply(PodGroupDelete{"default", "pod-u1"});
  auto view = model_.Read();
  CHECK(view->node_count() == 1);
  CHECK(view->pod_count() == 1);
  REQUIRE(view->FindNode("n1") != nullptr);
  CHECK(view->FindNode("n1")->requested.Get(kCpu) == 1000);
  CHECK(view->FindPodByName("default", "pod-u1") != nullptr);
}

TEST_CASE("DeleteEventFor maps every upsert to the delete of its object", "[model][kinds]") {
  const Pod pod = testing::CorePod("u-9", "", 1, 1);
  ModelEvent e = DeleteEventFor(PodUpsert{pod});
  const auto* pd = std::get_if<PodDelete>(&e);
  REQUIRE(pd != nullptr);
  CHECK(pd->uid == "u-9");
  CHECK(pd->ns == "default");
  CHECK(pd->name == "pod-u-9");

  e = DeleteEventFor(NodeUpsert{testing::CoreNode("n7", 1, 1)});
  REQUIRE(std::get_if<NodeDelete>(&e) != nullptr);
  CHECK(std::get<NodeDelete>(e).name == "n7");

  e = DeleteEventFor(PoolUpsert{MakePool("train", "t")});
  REQUIRE(std::get_if<PoolDelete>(&e) != nullptr);
  CHECK(std::get<PoolDelete>(e).name == "train");

  e = DeleteEventFor(QueueUpsert{MakeQueue("team", 1)});
  REQUIRE(std::get_if<QueueDelete>(&e) != nullptr);
  CHECK(std::get<QueueDelete>(e).name == "team");

  e = DeleteEventFor(PodGroupUpsert{MakeGroup("ml", "job", 3)});
  REQUIRE(std::get_if<PodGroupDelete>(&e) != nullptr);
  CHECK(std::get<PodGroupDelete>(e).ns == "ml");
  CHECK(std::get<PodGroupDelete>(e).name == "job");

  e = DeleteEventFor(PriorityClassUpsert{MakeClass("high", 5)});
  REQUIRE(std::get_if<PriorityClassDelete>(&e) != nullptr);
  CHECK(std::get<PriorityClassDelete>(e).name == "high");

  // A delete is its own delete.
  e = DeleteEventFor(PodGroupDelete{"ml", "job"});
  REQUIRE(std::get_if<PodGroupDelete>(&e) != nullptr);
  CHECK(std::get<PodGroupDelete>(e).name == "job");
}

TEST_CASE("DeleteEventFor undoes an upsert in the model", "[model][kinds]") {
  FakeClock clock;
  ClusterModel model(&clock);
  const std::vector<ModelEvent> upserts = {NodeUpsert{testing::CoreNode("n1", 1000, testing::kGi)},
                                           PodUpsert{testing::CorePod("u1", "n1", 100, 1)},
                                           PoolUpsert{MakePool("p", "p")},
                                           QueueUpsert{MakeQueue("q", 2)},
                                           PodGroupUpsert{MakeGroup("ns", "g", 2)},
                                           PriorityClassUpsert{MakeClass("c", 7)}};
  ApplyStats added = model.Apply(upserts);
  CHECK(added.nodes_upserted + added.pods_upserted + added.pools_upserted + added.queues_upserted +
            added.podgroups_upserted + added.priorityclasses_upserted ==
        6);
  std::vector<ModelEvent> deletes;
  for (const ModelEvent& e : upserts) deletes.push_back(DeleteEventFor(e));
  ApplyStats removed = model.Apply(deletes);
  CHECK(removed.nodes_deleted == 1);
  CHECK(removed.pods_deleted == 1);
  CHECK(removed.pools_deleted == 1);
  CHECK(removed.queues_deleted == 1);
  CHECK(removed.podgroups_deleted == 1);
  CHECK(removed.priorityclasses_deleted == 1);
  auto view = model.Read();
  CHECK(view->node_count() == 0);
  CHECK(view->pod_count() == 0);
  CHECK(view->pool_count() == 0);
  CHECK(view->queue_count() == 0);
  CHECK(view->podgroup_count() == 0);
  CHECK(view->priorityclass_count() == 0);
}

}  // namespace
}  // namespace berth::core
