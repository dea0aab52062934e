// Tests of the model's gang tombstones: gang members that finished successfully and left the
// model (the pod watch leaves finished pods out) keep counting for their gang, within bounds.

#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "tests/testing/core_builders.h"

namespace berth::core {
namespace {

using testing::CoreNode;
using testing::CorePod;
using testing::kGi;

/// A bound, running member `uid` of gang `gang` (namespace default).
Pod Member(const std::string& uid, const std::string& gang, const std::string& node = "n1") {
  Pod p = CorePod(uid, node, 1000, kGi);
  p.labels.Set("scheduling.x-k8s.io/pod-group", gang);
  return p;
}

PodDelete Left(const std::string& uid, bool succeeded) {
  return PodDelete{.uid = uid, .ns = "default", .name = "pod-" + uid, .succeeded = succeeded};
}

PodGroup Group(const std::string& name, int32_t min_member) {
  PodGroup g;
  g.ns = "default";
  g.name = name;
  g.min_member = min_member;
  return g;
}

class TombstoneTest {
 protected:
  TombstoneTest() { model_.Apply(NodeUpsert{CoreNode("n1", 64000, 256 * kGi)}); }

  int Succeeded(const std::string& gang) {
    return model_.Read()->SucceededGangTombstones("default", gang);
  }
  size_t Count() { return model_.Read()->gang_tombstone_count(); }

  FakeClock clock_;
  ClusterModel model_{&clock_};
};

TEST_CASE_METHOD(TombstoneTest, "a gang member that succeeded leaves a tombstone; one deleted or "
                 "failed does not", "[model][gang][tombstone]") {
  model_.Apply(PodUpsert{Member("a", "g")});
  model_.Apply(PodUpsert{Member("b", "g")});
  model_.Apply(PodUpsert{Member("c", "g")});
  model_.Apply(PodUpsert{CorePod("solo", "n1", 1000, kGi)});  // in no gang

  model_.Apply(Left("a", /*succeeded=*/true));
  CHECK(Succeeded("g") == 1);
  model_.Apply(Left("b", /*succeeded=*/false));  // failed, or deleted: gone for good
  CHECK(Succeeded("g") == 1);
  model_.Apply(Left("solo", /*succeeded=*/true));
  CHECK(Count() == 1);
  // A watch replays deletes: the same success is remembered once.
  model_.Apply(PodUpsert{Member("a", "g")});
  CHECK(Succeeded("g") == 0);  // live again: counted as the pod it is, not twice
  model_.Apply(Left("a", /*succeeded=*/true));
  model_.Apply(Left("a", /*succeeded=*/true));
  CHECK(Succeeded("g") == 1);
  CHECK(Count() == 1);
  auto view = model_.Read();
  CHECK(view->FindPod("a") == nullptr);
  CHECK(view->FindNode("n1")->requested.Get(kCpu) == 1000);  // only c holds room
}

TEST_CASE_METHOD(TombstoneTest, "tombstones survive a relist, which lists no finished pod",
                 "[model][gang][tombstone]") {
  model_.Apply(PodUpsert{Member("a", "g")});
  model_.Apply(PodUpsert{Member("b", "g")});
  model_.Apply(PodUpsert{Member("x", "other")});
  model_.Apply(Left("a", /*succeeded=*/true));
  // A relist after 410 Gone: the live pods again, and deletes of pods the list no longer shows
  // (x was deleted meanwhile); the finished member is in neither.
  model_.Apply(std::vector<ModelEvent>{PodUpsert{Member("b", "g")}, Left("x", false)});
  CHECK(Succeeded("g") == 1);
  CHECK(Count() == 1);
}

TEST_CASE_METHOD(TombstoneTest, "deleting a PodGroup drops its gang's tombstones",
                 "[model][gang][tombstone]") {
  model_.Apply(PodGroupUpsert{Group("g", 2)});
  model_.Apply(PodGroupUpsert{Group("h", 2)});
  for (const char* uid : {"g1", "g2"}) model_.Apply(PodUpsert{Member(uid, "g")});
  for (const char* uid : {"h1", "h2"}) model_.Apply(PodUpsert{Member(uid, "h")});
  model_.Apply(Left("g1", true));
  model_.Apply(Left("h1", true));
  REQUIRE(Count() == 2);

  model_.Apply(PodGroupDelete{"default", "g"});
  CHECK(Succeeded("g") == 0);
  CHECK(Succeeded("h") == 1);
  CHECK(Count() == 1);
  // A PodGroup of that name created again starts without them.
  model_.Apply(PodGroupUpsert{Group("g", 2)});
  CHECK(Succeeded("g") == 0);
}

TEST_CASE_METHOD(TombstoneTest, "a gang with neither live members nor a PodGroup loses its "
                 "tombstones after the grace", "[model][gang][tombstone]") {
  model_.SetGangTombstoneLimits({.limit = 100, .orphan_grace = absl::Minutes(10)});
  model_.Apply(PodGroupUpsert{Group("kept", 2)});
  for (const char* uid : {"k1", "k2"}) model_.Apply(PodUpsert{Member(uid, "kept")});
  for (const char* uid : {"a", "b"}) model_.Apply(PodUpsert{Member(uid, "g")});
  model_.Apply(Left("a", true));
  model_.Apply(Left("k1", true));
  model_.Apply(Left("k2", false));  // "kept" has no live member but still its PodGroup

  // A live member keeps the tombstones however long it runs.
  clock_.Advance(absl::Hours(2));
  model_.Apply(NodeUpsert{CoreNode("n2", 1000, kGi)});
  REQUIRE(Succeeded("g") == 1);

  model_.Apply(Left("b", false));  // the last live member goes: the grace starts
  clock_.Advance(absl::Minutes(9));
  model_.Apply(NodeUpsert{CoreNode("n2", 1000, kGi)});
  CHECK(Succeeded("g") == 1);

  SECTION("past the grace they are dropped") {
    clock_.Advance(absl::Minutes(2));
    model_.Apply(NodeUpsert{CoreNode("n2", 1000, kGi)});
    CHECK(Succeeded("g") == 0);
    CHECK(Succeeded("kept") == 1);  // a PodGroup keeps them
    CHECK(Count() == 1);
  }
  SECTION("a member that comes back stops the clock") {
    model_.Apply(PodUpsert{Member("c", "g")});
    clock_.Advance(absl::Hours(1));
    model_.Apply(NodeUpsert{CoreNode("n2", 1000, kGi)});
    CHECK(Succeeded("g") == 1);
  }
}

TEST_CASE_METHOD(TombstoneTest, "at the limit, the gang without live members that finished "
                 "longest ago makes room", "[model][gang][tombstone]") {
  model_.SetGangTombstoneLimits({.limit = 2, .orphan_grace = absl::Hours(24)});
  for (const char* uid : {"old1", "old2"}) model_.Apply(PodUpsert{Member(uid, "old")});
  for (const char* uid : {"mid1", "mid2"}) model_.Apply(PodUpsert{Member(uid, "mid")});
  for (const char* uid : {"run1", "run2", "run3"}) model_.Apply(PodUpsert{Member(uid, "run")});
  model_.Apply(Left("old1", true));
  model_.Apply(Left("old2", false));  // "old" has no live member
  clock_.Advance(absl::Minutes(1));
  model_.Apply(Left("mid1", true));
  model_.Apply(Left("mid2", false));  // neither has "mid", and it finished later
  REQUIRE(Count() == 2);

  clock_.Advance(absl::Minutes(1));
  model_.Apply(Left("run1", true));
  CHECK(Succeeded("old") == 0);
  CHECK(Succeeded("mid") == 1);
  CHECK(Succeeded("run") == 1);
  CHECK(model_.Read()->gang_tombstones_dropped() == 1);

  model_.Apply(Left("run2", true));  // takes "mid"'s place
  CHECK(Succeeded("mid") == 0);
  CHECK(Succeeded("run") == 2);
  CHECK(model_.Read()->gang_tombstones_dropped() == 2);

  // Every tombstone now belongs to a gang with a live member: a new one is not kept.
  for (const char* uid : {"s1", "s2"}) model_.Apply(PodUpsert{Member(uid, "second")});
  model_.Apply(Left("s1", true));
  CHECK(Succeeded("second") == 0);
  CHECK(Succeeded("run") == 2);
  CHECK(Count() == 2);
  CHECK(model_.Read()->gang_tombstones_dropped() == 3);
}

}  // namespace
}  // namespace berth::core
