#include "policy/binpack/binpack.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/verdict.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using core::kCpu;
using core::kMemory;
using core::kNvidiaGpu;
using core::kPods;

using testing::kGi;
using testing::CoreNode;
using testing::CorePod;

class BinpackTest {
 protected:
  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};

  std::unique_ptr<BinpackScore> Make(BinpackConfig config = {}) {
    absl::StatusOr<std::unique_ptr<BinpackScore>> s =
        BinpackScore::Create(config, model_.resources());
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    return *std::move(s);
  }
  void Add(core::Node n) { model_.Apply(core::NodeUpsert{std::move(n)}); }
  void Add(core::Pod p) { model_.Apply(core::PodUpsert{std::move(p)}); }

  // (FineScore, Score) of `pod` on `node`.
  std::pair<int64_t, int64_t> Eval(const BinpackScore& s, const core::Pod& pod,
                                   std::string_view node) {
    auto view = model_.Read();
    const core::NodeState* n = view->FindNode(node);
    REQUIRE(n != nullptr);
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock_.Now()};
    return {s.FineScore(ctx, *n), s.Score(ctx, *n)};
  }
};

TEST_CASE_METHOD(BinpackTest, "Binpack prefers the node the pod fills best", "[binpack]") {
  auto s = Make();
  CHECK(s->Name() == "binpack");
  Add(CoreNode("half-full", 4000, 16 * kGi));
  Add(CoreNode("empty-big", 8000, 32 * kGi));
  Add(CorePod("a", "half-full", 2000, 8 * kGi));
  const core::Pod pod = CorePod("p", "", 1000, 4 * kGi);

  // half-full: cpu (2000+1000)/4000 = 0.75, memory 12/16 = 0.75 -> 7.5 -> rounds to 8.
  CHECK(Eval(*s, pod, "half-full") == std::make_pair<int64_t, int64_t>(75000, 8));
  // empty-big: cpu 1000/8000 = 0.125, memory 4/32 = 0.125 -> 1.25 -> 1.
  CHECK(Eval(*s, pod, "empty-big") == std::make_pair<int64_t, int64_t>(12500, 1));
}

TEST_CASE_METHOD(BinpackTest, "Binpack: a pod that fills the node exactly scores 10",
                 "[binpack]") {
  auto s = Make();
  Add(CoreNode("n1", 2000, 4 * kGi));
  CHECK(Eval(*s, CorePod("p", "", 2000, 4 * kGi), "n1") ==
        std::make_pair<int64_t, int64_t>(100000, 10));
  // Nothing requested on an empty node scores 0.
  CHECK(Eval(*s, CorePod("p", "", 0, 0), "n1") == std::make_pair<int64_t, int64_t>(0, 0));
}

TEST_CASE_METHOD(BinpackTest, "Binpack: a CPU-only pod scores an idle GPU node lower",
                 "[binpack]") {
  auto s = Make();  // cpu 1, memory 1, nvidia.com/gpu 4
  Add(CoreNode("gpu", 4000, 16 * kGi, 8));
  Add(CoreNode("cpu", 4000, 16 * kGi));
  const core::Pod pod = CorePod("p", "", 2000, 8 * kGi);

  // gpu: (0.5*1 + 0.5*1 + 0*4) / 6 = 1/6 -> 16666 (truncated), score 2.
  CHECK(Eval(*s, pod, "gpu") == std::make_pair<int64_t, int64_t>(16666, 2));
  // cpu: GPUs are not advertised, so they do not count: (0.5 + 0.5) / 2 -> 5.
  CHECK(Eval(*s, pod, "cpu") == std::make_pair<int64_t, int64_t>(50000, 5));

  // A GPU pod filling the GPU node's GPUs scores it high.
  const core::Pod gpu_pod = CorePod("g", "", 2000, 8 * kGi, 8);
  // (0.5 + 0.5 + 1*4) / 6 = 5/6 -> 83333, score 8.
  CHECK(Eval(*s, gpu_pod, "gpu") == std::make_pair<int64_t, int64_t>(83333, 8));
}

TEST_CASE_METHOD(BinpackTest, "Binpack counts requested, in-flight and the pod itself",
                 "[binpack]") {
  auto s = Make(BinpackConfig{.weights = {{"cpu", 1}}});
  Add(CoreNode("n1", 10000, 16 * kGi));
  Add(CorePod("bound", "n1", 2000, 0));
  Add(CorePod("inflight", "", 3000, 0));
  const core::Pod pod = CorePod("p", "", 1000, 0);

  CHECK(Eval(*s, pod, "n1") == std::make_pair<int64_t, int64_t>(30000, 3));  // (2+1)/10
  REQUIRE(*model_.Assume("inflight", "n1", nullptr));
  CHECK(Eval(*s, pod, "n1") == std::make_pair<int64_t, int64_t>(60000, 6));  // (2+3+1)/10
  // Once confirmed, the bind counts once, not twice.
  REQUIRE(model_.ConfirmBindLocally("inflight").ok());
  CHECK(Eval(*s, pod, "n1") == std::make_pair<int64_t, int64_t>(60000, 6));
}

TEST_CASE_METHOD(BinpackTest, "Binpack: exact scores with custom weights", "[binpack]") {
  Add(CoreNode("n3", 3000, 4 * kGi));
  Add(CoreNode("n4", 4000, 4 * kGi));

  SECTION("shares truncate to 1/10000, scores round half up") {
    auto s = Make(BinpackConfig{.weights = {{"cpu", 1}}});
    // 1000/3000 -> 3333 -> 33330 -> 3.
    CHECK(Eval(*s, CorePod("p", "", 1000, 0), "n3") ==
          std::make_pair<int64_t, int64_t>(33330, 3));
    // 2000/3000 -> 6666 -> 66660 -> 7.
    CHECK(Eval(*s, CorePod("p", "", 2000, 0), "n3") ==
          std::make_pair<int64_t, int64_t>(66660, 7));
    // 1000/4000 -> 2500 -> 25000 -> exactly 2.5 rounds to 3.
    CHECK(Eval(*s, CorePod("p", "", 1000, 0), "n4") ==
          std::make_pair<int64_t, int64_t>(25000, 3));
    // 980/4000 -> 2450 -> 24500 -> 2.
    CHECK(Eval(*s, CorePod("p", "", 980, 0), "n4") ==
          std::make_pair<int64_t, int64_t>(24500, 2));
  }
  SECTION("weights") {
    auto s = Make(BinpackConfig{.weights = {{"cpu", 3}, {"memory", 1}}});
    // cpu 4000/4000 = 1, memory 1/4 -> (3*10000 + 2500) * 10 / 4 = 81250 -> 8.
    CHECK(Eval(*s, CorePod("p", "", 4000, kGi), "n4") ==
          std::make_pair<int64_t, int64_t>(81250, 8));
  }
  SECTION("a zero weight leaves the resource out") {
    auto s = Make(BinpackConfig{.weights = {{"cpu", 1}, {"memory", 0}}});
    CHECK(Eval(*s, CorePod("p", "", 1000, 4 * kGi), "n4") ==
          std::make_pair<int64_t, int64_t>(25000, 3));
  }
  SECTION("an extended resource") {
    const core::ResourceId foo = *model_.resources().Intern("example.com/foo");
    core::Node n = CoreNode("foo", 4000, 4 * kGi);
    n.allocatable.Set(foo, 4);
    Add(n);
    auto s = Make(BinpackConfig{.weights = {{"example.com/foo", 1}}});
    core::Pod pod = CorePod("p", "", 4000, 4 * kGi);
    pod.request.Set(foo, 1);
    CHECK(Eval(*s, pod, "foo") == std::make_pair<int64_t, int64_t>(25000, 3));
    // A node without the resource has nothing to score.
    CHECK(Eval(*s, pod, "n4") == std::make_pair<int64_t, int64_t>(0, 0));
  }
}

TEST_CASE_METHOD(BinpackTest, "Binpack: the score stays within [0, 10]", "[binpack]") {
  auto s = Make();
  SECTION("an over-committed node") {
    Add(CoreNode("n1", 4000, 4 * kGi));
    Add(CorePod("a", "n1", 6000, 8 * kGi));
    CHECK(Eval(*s, CorePod("p", "", 1000, kGi), "n1") ==
          std::make_pair<int64_t, int64_t>(100000, 10));
  }
  SECTION("a request at the int64 bound") {
    Add(CoreNode("n1", 4000, 4 * kGi));
    Add(CorePod("a", "n1", 2000, 0));
    const int64_t max = std::numeric_limits<int64_t>::max();
    CHECK(Eval(*s, CorePod("p", "", max, max), "n1") ==
          std::make_pair<int64_t, int64_t>(100000, 10));
  }
  SECTION("negative usage counts as none") {
    Add(CoreNode("n1", 4000, 4 * kGi));
    CHECK(Eval(*s, CorePod("p", "", -1000, -kGi), "n1") ==
          std::make_pair<int64_t, int64_t>(0, 0));
  }
  SECTION("a node that advertises none of the weighted resources") {
    core::Node bare;
    bare.name = "bare";
    bare.allocatable.Set(kPods, 10);
    Add(bare);
    CHECK(Eval(*s, CorePod("p", "", 1000, kGi), "bare") ==
          std::make_pair<int64_t, int64_t>(0, 0));
  }
}

TEST_CASE_METHOD(BinpackTest, "Binpack weight validation", "[binpack]") {
  auto fails = [&](BinpackConfig c) {
    absl::StatusOr<std::unique_ptr<BinpackScore>> s = BinpackScore::Create(c, model_.resources());
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  CHECK(fails(BinpackConfig{.weights = {{"cpu", -1}}}) ==
        "binpack weight of \"cpu\" is -1; expected 0..1000");
  CHECK(fails(BinpackConfig{.weights = {{"memory", 1}, {"nvidia.com/gpu", 1001}}}) ==
        "binpack weight of \"nvidia.com/gpu\" is 1001; expected 0..1000");
  CHECK_THAT(fails(BinpackConfig{.weights = {{"bad name", 1}}}),
             Catch::Matchers::StartsWith("invalid resource name \"bad name\""));
  CHECK_THAT(fails(BinpackConfig{.weights = {{"", 1}}}),
             Catch::Matchers::StartsWith("invalid resource name"));

  // The bounds themselves are fine.
  auto s = Make(BinpackConfig{.weights = {{"cpu", 0}, {"memory", 1000}}});
  Add(CoreNode("n1", 4000, 4 * kGi));
  CHECK(Eval(*s, CorePod("p", "", 4000, kGi), "n1") ==
        std::make_pair<int64_t, int64_t>(25000, 3));
  // No weights at all: every node scores 0.
  auto none = Make(BinpackConfig{.weights = {}});
  CHECK(Eval(*none, CorePod("p", "", 4000, kGi), "n1") ==
        std::make_pair<int64_t, int64_t>(0, 0));
}

}  // namespace
}  // namespace berth::policy
