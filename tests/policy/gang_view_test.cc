// ViewGang's counting of members that finished: those still in the model and those that left it
// (the model's tombstones) count toward minMember; failed or deleted ones do not.

#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "policy/gang/gang.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CoreNode;
using testing::CorePod;
using testing::kGi;

core::Pod Member(const std::string& uid) {
  core::Pod p = CorePod(uid, "n1", 1000, kGi);
  p.labels.Set("scheduling.x-k8s.io/pod-group", "g");
  return p;
}

/// A model with node n1 and PodGroup default/g of `min_member`, and members `uids` bound there.
void Seed(core::ClusterModel& model, int32_t min_member, std::initializer_list<const char*> uids) {
  model.Apply(core::NodeUpsert{CoreNode("n1", 64000, 256 * kGi)});
  core::PodGroup group;
  group.ns = "default";
  group.name = "g";
  group.min_member = min_member;
  model.Apply(core::PodGroupUpsert{group});
  for (const char* uid : uids) model.Apply(core::PodUpsert{Member(uid)});
}

core::PodDelete Left(const std::string& uid, bool succeeded) {
  return core::PodDelete{.uid = uid, .ns = "default", .name = "pod-" + uid, .succeeded = succeeded};
}

TEST_CASE("ViewGang counts members that succeeded, in the model or gone from it",
          "[policy][gang][tombstone]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Seed(model, 3, {"a", "b", "c", "d"});
  core::Pod done = Member("c");
  done.phase = core::PodPhase::kSucceeded;  // still in the model (standalone mode keeps it)
  model.Apply(core::PodUpsert{done});

  model.Apply(Left("a", /*succeeded=*/true));
  model.Apply(Left("d", /*succeeded=*/false));
  auto view = model.Read();
  const GangView g = ViewGang(*view, "default", "g", GangConfig{});
  CHECK(g.succeeded == 2);  // a (gone) and c (in the model)
  CHECK(g.bound.size() == 1);
  CHECK(g.placed() == 3);
  CHECK(g.admitted());
}

TEST_CASE("ViewGang does not count a member that failed or was deleted",
          "[policy][gang][tombstone]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Seed(model, 2, {"a", "b"});
  model.Apply(Left("a", /*succeeded=*/false));
  auto view = model.Read();
  const GangView g = ViewGang(*view, "default", "g", GangConfig{});
  CHECK(g.succeeded == 0);
  CHECK(g.placed() == 1);
  CHECK_FALSE(g.admitted());
}

}  // namespace
}  // namespace berth::policy
