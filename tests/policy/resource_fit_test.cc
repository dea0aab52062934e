#include "policy/fit/resource_fit.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
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

class FitTest {
 protected:
  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};
  ResourceFitModule filter_;
  ResourceFitModule preempt_;

  void Add(core::Node n) { model_.Apply(core::NodeUpsert{std::move(n)}); }
  void Add(core::Pod p) { model_.Apply(core::PodUpsert{std::move(p)}); }
  core::ResourceId Id(std::string_view name) { return *model_.resources().Intern(name); }

  NodeVerdict Filter(const core::Pod& pod, std::string_view node) {
    auto view = model_.Read();
    const core::NodeState* n = view->FindNode(node);
    REQUIRE(n != nullptr);
    return filter_.Verdict(CycleContext{.state = *view, .pod = pod, .now = clock_.Now()}, *n);
  }

  // Runs ResourceFitModule::Review on `node` with victims given by uid (unknown uids stay unknown).
  bool Review(const core::Pod& pod, std::string_view node, const std::vector<std::string>& uids,
              NodeVerdict* why, NodeVictims* out = nullptr) {
    auto view = model_.Read();
    const core::NodeState* n = view->FindNode(node);
    REQUIRE(n != nullptr);
    NodeVictims proposal{.node = std::string(node)};
    for (const std::string& uid : uids) {
      proposal.victims.push_back(Victim{.uid = uid, .priority = 0, .known = view->FindPod(uid)});
    }
    const bool keep = preempt_.Review(
        CycleContext{.state = *view, .pod = pod, .now = clock_.Now()}, *n, &proposal, why);
    if (out != nullptr) {
      out->node = proposal.node;
      out->victims.clear();
      for (const Victim& v : proposal.victims) out->victims.push_back(Victim{.uid = v.uid});
    }
    return keep;
  }
};

// ---- filter -------------------------------------------------------------------------------------

TEST_CASE_METHOD(FitTest, "ResourceFit: a pod that fits passes", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi));
  Add(CorePod("other", "n1", 1000, 2 * kGi));

  const NodeVerdict v = Filter(CorePod("p", "", 1000, kGi), "n1");
  CHECK(v.ok());
  CHECK(v.fit == Fit::kFit);
  CHECK(v.reason == Reason::kNone);
  CHECK(v.message.empty());
  CHECK(v.detail.empty());

  // Exactly the free room fits too.
  CHECK(Filter(CorePod("p", "", 3000, 6 * kGi), "n1").ok());
  CHECK(Filter(CorePod("p", "", 3001, 6 * kGi), "n1").fit == Fit::kUnschedulable);
}

TEST_CASE_METHOD(FitTest, "ResourceFit: too little free room is unschedulable", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi));
  Add(CoreNode("n2", 4000, 8 * kGi));
  Add(CorePod("a", "n1", 3500, kGi));
  Add(CorePod("b", "n2", 3800, kGi));
  const core::Pod pod = CorePod("p", "", 1000, kGi);

  const NodeVerdict v1 = Filter(pod, "n1");
  const NodeVerdict v2 = Filter(pod, "n2");
  CHECK(v1.fit == Fit::kUnschedulable);
  CHECK(v1.reason == Reason::kInsufficientResource);
  CHECK(ReasonCode(v1.reason) == "InsufficientResource");
  CHECK(v1.message == "berth: insufficient cpu (pod requests 1 cpu)");
  // The message is node-independent, so kube-scheduler groups identical reasons...
  CHECK(v2.fit == Fit::kUnschedulable);
  CHECK(v2.reason == Reason::kInsufficientResource);
  CHECK(v2.message == v1.message);
  // ...while the detail carries each node's numbers.
  CHECK(v1.detail ==
        "cpu: requested 1, free 500m (allocatable 4, used 3500m, in-flight binds 0): "
        "short by 500m");
  CHECK(v2.detail ==
        "cpu: requested 1, free 200m (allocatable 4, used 3800m, in-flight binds 0): "
        "short by 800m");
}

TEST_CASE_METHOD(FitTest, "ResourceFit: a request above allocatable is unresolvable", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi));
  Add(CoreNode("n2", 2000, 8 * kGi));
  Add(CorePod("a", "n1", 3500, kGi));
  const core::Pod pod = CorePod("p", "", 8000, kGi);

  const NodeVerdict v1 = Filter(pod, "n1");
  const NodeVerdict v2 = Filter(pod, "n2");
  CHECK(v1.fit == Fit::kUnresolvable);
  CHECK(v1.reason == Reason::kExceedsAllocatable);
  CHECK(ReasonCode(v1.reason) == "ExceedsAllocatable");
  CHECK(v1.message == "berth: node too small for the pod's cpu (pod requests 8 cpu)");
  CHECK(v2.fit == Fit::kUnresolvable);
  CHECK(v2.message == v1.message);
  CHECK(v1.detail ==
        "cpu: requested 8, free 500m (allocatable 4, used 3500m, in-flight binds 0): "
        "exceeds allocatable");
  CHECK(v2.detail ==
        "cpu: requested 8, free 2 (allocatable 2, used 0, in-flight binds 0): "
        "exceeds allocatable");
}

TEST_CASE_METHOD(FitTest, "ResourceFit names every short resource in id order", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi, /*gpus=*/8));
  Add(CorePod("a", "n1", 3500, 6 * kGi, 4));

  SECTION("several insufficient resources") {
    const NodeVerdict v = Filter(CorePod("p", "", 1000, 4 * kGi, 2), "n1");
    CHECK(v.fit == Fit::kUnschedulable);
    CHECK(v.reason == Reason::kInsufficientResource);
    CHECK(v.message == "berth: insufficient cpu, memory (pod requests 1 cpu, 4Gi memory)");
    CHECK(v.detail ==
          "cpu: requested 1, free 500m (allocatable 4, used 3500m, in-flight binds 0): "
          "short by 500m; memory: requested 4Gi, free 2Gi (allocatable 8Gi, used 6Gi, "
          "in-flight binds 0): short by 2Gi");
  }
  SECTION("one resource beyond allocatable makes the whole verdict unresolvable") {
    const NodeVerdict v = Filter(CorePod("p", "", 1000, kGi, 16), "n1");
    CHECK(v.fit == Fit::kUnresolvable);
    CHECK(v.reason == Reason::kExceedsAllocatable);
    CHECK(v.message ==
          "berth: node too small for the pod's cpu, nvidia.com/gpu "
          "(pod requests 1 cpu, 16 nvidia.com/gpu)");
  }
  SECTION("order does not depend on which is unresolvable") {
    const NodeVerdict v = Filter(CorePod("p", "", 8000, kGi, 6), "n1");
    CHECK(v.fit == Fit::kUnresolvable);
    CHECK(v.message ==
          "berth: node too small for the pod's cpu, nvidia.com/gpu "
          "(pod requests 8 cpu, 6 nvidia.com/gpu)");
  }
}

TEST_CASE_METHOD(FitTest, "ResourceFit: nvidia.com/gpu is an ordinary counted resource", "[fit]") {
  Add(CoreNode("gpu", 64000, 256 * kGi, /*gpus=*/4));
  Add(CorePod("a", "gpu", 1000, kGi, 3));

  CHECK(Filter(CorePod("p", "", 1000, kGi, 1), "gpu").ok());
  const NodeVerdict v = Filter(CorePod("p", "", 1000, kGi, 2), "gpu");
  CHECK(v.fit == Fit::kUnschedulable);
  CHECK(v.reason == Reason::kInsufficientResource);
  CHECK(v.message == "berth: insufficient nvidia.com/gpu (pod requests 2 nvidia.com/gpu)");
  CHECK(v.detail ==
        "nvidia.com/gpu: requested 2, free 1 (allocatable 4, used 3, in-flight binds 0): "
        "short by 1");

  const NodeVerdict never = Filter(CorePod("p", "", 1000, kGi, 5), "gpu");
  CHECK(never.fit == Fit::kUnresolvable);
  CHECK(never.message ==
        "berth: node too small for the pod's nvidia.com/gpu (pod requests 5 nvidia.com/gpu)");
}

TEST_CASE_METHOD(FitTest, "ResourceFit: extended resources such as example.com/foo", "[fit]") {
  const core::ResourceId foo = Id("example.com/foo");
  core::Node n = CoreNode("n1", 4000, 8 * kGi);
  n.allocatable.Set(foo, 2);
  Add(n);

  core::Pod pod = CorePod("p", "", 100, 0);
  pod.request.Set(foo, 2);
  CHECK(Filter(pod, "n1").ok());

  core::Pod holder = CorePod("h", "n1", 100, 0);
  holder.request.Set(foo, 1);
  Add(holder);
  const NodeVerdict short_v = Filter(pod, "n1");
  CHECK(short_v.fit == Fit::kUnschedulable);
  CHECK(short_v.message ==
        "berth: insufficient example.com/foo (pod requests 2 example.com/foo)");

  pod.request.Set(foo, 3);
  const NodeVerdict v = Filter(pod, "n1");
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kExceedsAllocatable);
  CHECK(v.message ==
        "berth: node too small for the pod's example.com/foo (pod requests 3 example.com/foo)");
}

TEST_CASE_METHOD(FitTest, "ResourceFit: a resource the node does not advertise", "[fit]") {
  Add(CoreNode("cpu-only", 4000, 8 * kGi));
  const core::ResourceId bar = Id("example.com/bar");

  core::Pod pod = CorePod("p", "", 100, 0);
  pod.request.Set(bar, 1);
  const NodeVerdict v = Filter(pod, "cpu-only");
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kExceedsAllocatable);
  CHECK(v.message ==
        "berth: node too small for the pod's example.com/bar (pod requests 1 example.com/bar)");
  CHECK(v.detail ==
        "example.com/bar: requested 1, free 0 (allocatable 0, used 0, in-flight binds 0): "
        "exceeds allocatable");

  const NodeVerdict gpu = Filter(CorePod("g", "", 100, 0, 1), "cpu-only");
  CHECK(gpu.fit == Fit::kUnresolvable);
  CHECK(gpu.message ==
        "berth: node too small for the pod's nvidia.com/gpu (pod requests 1 nvidia.com/gpu)");
}

TEST_CASE_METHOD(FitTest, "ResourceFit: only requested resources are compared", "[fit]") {
  // An over-committed node (bound pods of other schedulers can do that) still takes a pod that
  // asks for nothing it lacks.
  Add(CoreNode("n1", 4000, 8 * kGi));
  Add(CorePod("big", "n1", 6000, kGi));
  CHECK(Filter(CorePod("p", "", 0, kGi), "n1").ok());
  const NodeVerdict v = Filter(CorePod("q", "", 1, 0), "n1");
  CHECK(v.fit == Fit::kUnschedulable);
  CHECK(v.detail ==
        "cpu: requested 1m, free -2 (allocatable 4, used 6, in-flight binds 0): short by 2001m");
}

TEST_CASE_METHOD(FitTest, "ResourceFit: every pod takes a pod slot", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi, 0, /*pods=*/2));
  Add(CoreNode("no-slots", 4000, 8 * kGi, 0, /*pods=*/0));
  Add(CorePod("a", "n1", 100, 0));
  CHECK(Filter(CorePod("p", "", 100, 0), "n1").ok());
  Add(CorePod("b", "n1", 100, 0));
  const NodeVerdict v = Filter(CorePod("p", "", 100, 0), "n1");
  CHECK(v.fit == Fit::kUnschedulable);
  CHECK(v.message == "berth: insufficient pods (pod requests 1 pods)");
  CHECK(Filter(CorePod("p", "", 100, 0), "no-slots").fit == Fit::kUnresolvable);
}

TEST_CASE_METHOD(FitTest, "ResourceFit: terminal pods free their room", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi));
  core::Pod done = CorePod("done", "n1", 4000, kGi);
  Add(done);
  CHECK(Filter(CorePod("p", "", 1000, kGi), "n1").fit == Fit::kUnschedulable);
  done.phase = core::PodPhase::kSucceeded;
  Add(done);
  CHECK(Filter(CorePod("p", "", 1000, kGi), "n1").ok());
}

TEST_CASE_METHOD(FitTest, "ResourceFit: in-flight binds count", "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi));
  Add(CorePod("a", "", 3000, kGi));  // pending
  const core::Pod pod = CorePod("p", "", 2000, kGi);
  CHECK(Filter(pod, "n1").ok());

  REQUIRE(*model_.Assume("a", "n1", nullptr));
  const NodeVerdict v = Filter(pod, "n1");
  CHECK(v.fit == Fit::kUnschedulable);
  CHECK(v.reason == Reason::kInsufficientResource);
  CHECK(v.message == "berth: insufficient cpu (pod requests 2 cpu)");
  CHECK(v.detail ==
        "cpu: requested 2, free 1 (allocatable 4, used 0, in-flight binds 3): short by 1");

  model_.Forget("a");
  CHECK(Filter(pod, "n1").ok());
}

// ---- preempt ------------------------------------------------------------------------------------

class PreemptTest : public FitTest {
 protected:
  PreemptTest() {
    Add(CoreNode("n1", 4000, 8 * kGi));
    Add(CoreNode("n2", 4000, 8 * kGi));
    Add(CorePod("v1", "n1", 2000, kGi));
    Add(CorePod("v2", "n1", 1500, kGi));
    Add(CorePod("far", "n2", 4000, kGi));
    Add(CorePod("pending", "", 3000, kGi));
  }
  // Free on n1: 500m cpu. The preemptor needs 3 cpu.
  const core::Pod preemptor_ = CorePod("preemptor", "", 3000, kGi);
};

TEST_CASE_METHOD(PreemptTest, "ResourceFitModule::Review keeps a node when the victims free enough",
                 "[fit][preempt]") {
  NodeVerdict why;
  NodeVictims out;
  CHECK(Review(preemptor_, "n1", {"v1", "v2"}, &why, &out));
  // The proposal is left as it was.
  REQUIRE(out.victims.size() == 2);
  CHECK(out.victims[0].uid == "v1");
  CHECK(out.victims[1].uid == "v2");
}

TEST_CASE_METHOD(PreemptTest, "ResourceFitModule::Review drops a node the victims cannot free",
                 "[fit][preempt]") {
  NodeVerdict why;
  CHECK_FALSE(Review(preemptor_, "n1", {"v1"}, &why));  // 500m + 2 < 3
  CHECK(why.fit == Fit::kUnresolvable);
  CHECK(why.reason == Reason::kPreemptionNotHelpful);
  CHECK(ReasonCode(why.reason) == "PreemptionNotHelpful");
  CHECK(why.message == "berth: evicting the proposed victims would not make room");
  CHECK(why.detail ==
        "cpu: requested 3, free 2500m (allocatable 4, used 3500m, in-flight binds 0, freed for "
        "this pod 2): short by 500m");
}

TEST_CASE_METHOD(PreemptTest, "ResourceFitModule::Review ignores victims it cannot count on the node",
                 "[fit][preempt]") {
  NodeVerdict why;
  SECTION("unknown to berth") { CHECK_FALSE(Review(preemptor_, "n1", {"v1", "ghost"}, &why)); }
  SECTION("on another node") { CHECK_FALSE(Review(preemptor_, "n1", {"v1", "far"}, &why)); }
  SECTION("not bound anywhere") {
    CHECK_FALSE(Review(preemptor_, "n1", {"v1", "pending"}, &why));
  }
  SECTION("listed twice") {
    // A victim frees its room once, however often the (untrusted) proposal lists it:
    // 500m + 2 + 2 would pass, 500m + 2 does not.
    CHECK_FALSE(Review(preemptor_, "n1", {"v1", "v1"}, &why));
  }
  CHECK(why.reason == Reason::kPreemptionNotHelpful);
}

TEST_CASE_METHOD(PreemptTest, "ResourceFitModule::Review counts in-flight binds against the room",
                 "[fit][preempt]") {
  REQUIRE(*model_.Assume("pending", "n2", nullptr));
  NodeVerdict why;
  // n2: 4 cpu allocatable, 4 used by "far", 3 held for "pending". Evicting "far" leaves 1.
  CHECK_FALSE(Review(preemptor_, "n2", {"far"}, &why));
  CHECK(why.detail ==
        "cpu: requested 3, free 1 (allocatable 4, used 4, in-flight binds 3, freed for this pod "
        "4): short by 2");
  model_.Forget("pending");
  CHECK(Review(preemptor_, "n2", {"far"}, &why));
}

TEST_CASE_METHOD(PreemptTest, "ResourceFitModule::Review: a pod too big for the node", "[fit][preempt]") {
  NodeVerdict why;
  CHECK_FALSE(Review(CorePod("huge", "", 5000, kGi), "n1", {"v1", "v2"}, &why));
  CHECK(why.fit == Fit::kUnresolvable);
  CHECK(why.reason == Reason::kPreemptionNotHelpful);
}

}  // namespace
}  // namespace berth::policy

namespace berth::policy {
namespace {

TEST_CASE_METHOD(FitTest, "ResourceFit: without explain the verdict and message are the same and detail stays empty",
                 "[fit]") {
  Add(CoreNode("n1", 4000, 8 * kGi, 2));
  Add(CorePod("busy", "n1", 3000, kGi, 1));
  const core::Pod pod = CorePod("p", "", 2000, kGi, 2);
  auto view = model_.Read();
  const core::NodeState* n = view->FindNode("n1");
  REQUIRE(n != nullptr);
  const NodeVerdict full =
      filter_.Verdict(CycleContext{.state = *view, .pod = pod, .now = clock_.Now()}, *n);
  const NodeVerdict fast = filter_.Verdict(
      CycleContext{.state = *view, .pod = pod, .now = clock_.Now(), .explain = false}, *n);
  CHECK(full.fit == Fit::kUnschedulable);
  CHECK(fast.fit == full.fit);
  CHECK(fast.reason == full.reason);
  CHECK(fast.message == full.message);
  CHECK(fast.message == "berth: insufficient cpu, nvidia.com/gpu (pod requests 2 cpu, 2 nvidia.com/gpu)");
  CHECK_THAT(full.detail, Catch::Matchers::Contains("cpu: requested 2, free 1"));
  CHECK(fast.detail.empty());
}

}  // namespace
}  // namespace berth::policy
