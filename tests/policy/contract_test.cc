// Contract tests: every filter and score module of BuildDefaultRegistry() must be deterministic,
// must not change the model, must be safe to call from several threads at once on one view, and
// (scores) must stay within [0, kMaxScore]. A module registered without an entry in the type lists
// below fails "the contract covers every registered module".

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "core/strings.h"
#include "policy/binpack/binpack.h"
#include "policy/config.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"
#include "policy/gpu/gpu.h"
#include "policy/pipeline.h"
#include "policy/policy.h"
#include "policy/pools/pools.h"
#include "policy/registry.h"
#include "policy/verdict.h"

namespace berth::policy {
namespace {

using core::kCpu;
using core::kMemory;
using core::kNvidiaGpu;
using core::kPods;

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---- the modules under contract -----------------------------------------------------------------

struct ResourceFitContract {
  static constexpr std::string_view kName = "resource-fit";
  static std::unique_ptr<FilterPlugin> Make(core::ResourceNames&) {
    return std::make_unique<ResourceFitModule>();
  }
};

struct BinpackContract {
  static constexpr std::string_view kName = "binpack";
  static std::unique_ptr<ScorePlugin> Make(core::ResourceNames& names) {
    absl::StatusOr<std::unique_ptr<BinpackScore>> s =
        BinpackScore::Create(PolicyConfig{}.binpack, names);
    REQUIRE(s.ok());
    return *std::move(s);
  }
};

struct PoolsContract {
  static constexpr std::string_view kName = "pools";
  static std::unique_ptr<FilterPlugin> Make(core::ResourceNames& names) {
    return std::make_unique<PoolsModule>(&names, PolicyConfig{}.scheduler_name);
  }
};

struct GpuReserveContract {
  static constexpr std::string_view kName = "gpu-reserve";
  static std::unique_ptr<FilterPlugin> Make(core::ResourceNames&) {
    absl::StatusOr<std::unique_ptr<GpuReserveFilter>> f =
        GpuReserveFilter::Create(PolicyConfig{}.gpu);
    REQUIRE(f.ok());
    return *std::move(f);
  }
};

struct GpuAffinityContract {
  static constexpr std::string_view kName = "gpu-affinity";
  static std::unique_ptr<ScorePlugin> Make(core::ResourceNames&) {
    return std::make_unique<GpuAffinityScore>();
  }
};

struct GangFilterContract {
  static constexpr std::string_view kName = "gang";
  static std::unique_ptr<FilterPlugin> Make(core::ResourceNames&) {
    return std::make_unique<GangModule>(
        std::make_shared<const GangPlanner>(PolicyConfig{}.gangs, PolicyConfig{}.scheduler_name));
  }
};

struct GangTopologyContract {
  static constexpr std::string_view kName = "gang-topology";
  static std::unique_ptr<ScorePlugin> Make(core::ResourceNames&) {
    return std::make_unique<GangTopologyScore>(
        std::make_shared<const GangPlanner>(PolicyConfig{}.gangs, PolicyConfig{}.scheduler_name));
  }
};

#define BERTH_FILTER_MODULES ResourceFitContract, PoolsContract, GpuReserveContract, GangFilterContract
#define BERTH_SCORE_MODULES BinpackContract, GpuAffinityContract, GangTopologyContract

template <class... M>
std::vector<std::string> NamesOf() {
  std::vector<std::string> out = {std::string(M::kName)...};
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("The contract covers every registered module", "[contract]") {
  const Registry r = BuildDefaultRegistry();
  CHECK(NamesOf<BERTH_FILTER_MODULES>() == r.NamesAt(Point::kFilter));
  // Score modules listed here are also checked module by module; every registered score module,
  // these and any added later, goes through "Score contract through the registry".
  for (const std::string& name : NamesOf<BERTH_SCORE_MODULES>()) {
    INFO(name);
    CHECK(r.PointsOf(name) & Bit(Point::kScore));
  }
}

// ---- a cluster with awkward corners -------------------------------------------------------------

class ContractCluster {
 public:
  ContractCluster() {
    foo_ = *model_.resources().Intern("example.com/foo");
    bar_ = *model_.resources().Intern("example.com/bar");

    AddNode("empty", {{kCpu, 8000}, {kMemory, 32 * kGi}, {kPods, 110}});
    AddNode("busy", {{kCpu, 8000}, {kMemory, 32 * kGi}, {kPods, 110}});
    AddPod("b1", "busy", {{kCpu, 7000}, {kMemory, 30 * kGi}, {kPods, 1}});
    AddNode("over", {{kCpu, 2000}, {kMemory, 4 * kGi}, {kPods, 110}});
    AddPod("o1", "over", {{kCpu, 5000}, {kMemory, 8 * kGi}, {kPods, 1}});
    AddNode("gpu", {{kCpu, 64000}, {kMemory, 512 * kGi}, {kPods, 110}, {kNvidiaGpu, 8}});
    AddPod("g1", "gpu", {{kCpu, 8000}, {kMemory, 64 * kGi}, {kNvidiaGpu, 6}, {kPods, 1}});
    AddPod("g2", "", {{kCpu, 1000}, {kNvidiaGpu, 1}, {kPods, 1}});
    REQUIRE(*model_.Assume("g2", "gpu", nullptr));  // an in-flight bind
    AddNode("bare", {{kPods, 10}});
    AddNode("no-slots", {{kCpu, 8000}, {kMemory, 32 * kGi}, {kPods, 0}});
    AddNode("foo", {{kCpu, 4000}, {kMemory, 8 * kGi}, {kPods, 110}, {foo_, 4}});
    AddPod("f1", "foo", {{foo_, 3}, {kPods, 1}});
    AddNode("unbounded", {{kCpu, kInt64Max}, {kMemory, kInt64Max}, {kPods, kInt64Max},
                          {kNvidiaGpu, kInt64Max}});
    AddPod("u1", "unbounded", {{kCpu, kInt64Max - 1}, {kMemory, kInt64Max}, {kPods, 1}});
    // Together at the int64 bound of cpu exactly (more would be refused by the model).
    AddPod("u2", "unbounded", {{kCpu, 1}, {kNvidiaGpu, kInt64Max}, {kPods, 1}});
    AddPod("done", "empty", {{kCpu, 8000}, {kPods, 1}}, core::PodPhase::kSucceeded);

    pods_.push_back(MakePod("tiny", {{kCpu, 1}, {kPods, 1}}));
    pods_.push_back(MakePod("slot-only", {{kPods, 1}}));
    pods_.push_back(MakePod("nothing", {}));
    pods_.push_back(MakePod("medium", {{kCpu, 2000}, {kMemory, 4 * kGi}, {kPods, 1}}));
    pods_.push_back(
        MakePod("gpu", {{kCpu, 4000}, {kMemory, 16 * kGi}, {kNvidiaGpu, 2}, {kPods, 1}}));
    pods_.push_back(MakePod("foo", {{kCpu, 100}, {foo_, 1}, {kPods, 1}}));
    pods_.push_back(MakePod("bar", {{kCpu, 100}, {bar_, 1}, {kPods, 1}}));
    pods_.push_back(MakePod("huge", {{kCpu, kInt64Max}, {kMemory, kInt64Max}, {kPods, 1}}));
    pods_.push_back(MakePod("negative", {{kCpu, -1000}, {kMemory, -kGi}, {kPods, 1}}));
  }

  core::ClusterModel& model() { return model_; }
  const std::vector<core::Pod>& pods() const { return pods_; }
  absl::Time Now() const { return clock_.Now(); }

 private:
  void AddNode(std::string name,
               std::initializer_list<std::pair<core::ResourceId, int64_t>> alloc) {
    core::Node n;
    n.name = std::move(name);
    for (const auto& [id, amount] : alloc) n.allocatable.Set(id, amount);
    n.capacity = n.allocatable;
    REQUIRE(model_.Apply(core::NodeUpsert{std::move(n)}).refused.empty());
  }
  void AddPod(std::string uid, std::string node,
              std::initializer_list<std::pair<core::ResourceId, int64_t>> req,
              core::PodPhase phase = core::PodPhase::kRunning) {
    core::Pod p = MakePod(std::move(uid), req);
    p.node_name = std::move(node);
    p.phase = p.node_name.empty() ? core::PodPhase::kPending : phase;
    REQUIRE(model_.Apply(core::PodUpsert{std::move(p)}).refused.empty());
  }
  static core::Pod MakePod(std::string uid,
                           std::initializer_list<std::pair<core::ResourceId, int64_t>> req) {
    core::Pod p;
    p.uid = uid;
    p.ns = "contract";
    p.name = std::move(uid);
    for (const auto& [id, amount] : req) p.request.Set(id, amount);
    return p;
  }

  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};
  core::ResourceId foo_ = 0;
  core::ResourceId bar_ = 0;
  std::vector<core::Pod> pods_;
};

std::string Describe(const NodeVerdict& v) {
  return StrCat(static_cast<int>(v.fit), "|", ReasonCode(v.reason), "|", v.message, "|", v.detail);
}

// Every (pod, node) answer of a filter, in a fixed order.
std::vector<std::string> AllVerdicts(const FilterPlugin& f, const core::ClusterState& s,
                                     const std::vector<core::Pod>& pods, absl::Time now) {
  std::vector<std::string> out;
  for (const core::Pod& pod : pods) {
    const CycleContext ctx{.state = s, .pod = pod, .now = now};
    s.ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      out.push_back(StrCat(pod.name, "@", n.node.name, ": ", Describe(f.Verdict(ctx, n))));
    });
  }
  return out;
}

std::vector<int64_t> AllScores(const ScorePlugin& sc, const core::ClusterState& s,
                               const std::vector<core::Pod>& pods, absl::Time now) {
  std::vector<int64_t> out;
  for (const core::Pod& pod : pods) {
    const CycleContext ctx{.state = s, .pod = pod, .now = now};
    s.ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      out.push_back(sc.Score(ctx, n));
    });
  }
  return out;
}

constexpr int kThreads = 4;

// Runs `compute` (one module's answers for every pod on one view) on kThreads threads at once,
// 20 rounds each, and checks every thread saw `first`.
template <class Compute, class Result>
void CheckSameFromThreads(const Compute& compute, const Result& first) {
  std::vector<Result> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        results[t] = compute();
        if (results[t] != first) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& r : results) CHECK(r == first);
}

// ---- filters ------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("Filter contract", "[contract][concurrency]", BERTH_FILTER_MODULES) {
  ContractCluster cluster;
  auto module = TestType::Make(cluster.model().resources());
  CHECK(module->Name() == TestType::kName);
  const uint64_t generation = cluster.model().Read()->generation();
  {  // the view is let go before the model's generation is read again
    auto view = cluster.model().Read();
    const absl::Time now = cluster.Now();

    const std::vector<std::string> first = AllVerdicts(*module, *view, cluster.pods(), now);
    REQUIRE(first.size() == cluster.pods().size() * view->node_count());

    SECTION("deterministic, also across instances") {
      CHECK(AllVerdicts(*module, *view, cluster.pods(), now) == first);
      auto again = TestType::Make(cluster.model().resources());
      CHECK(AllVerdicts(*again, *view, cluster.pods(), now) == first);
    }
    SECTION("verdicts are well formed") {
      for (const core::Pod& pod : cluster.pods()) {
        const CycleContext ctx{.state = *view, .pod = pod, .now = now};
        view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
          const NodeVerdict v = module->Verdict(ctx, n);
          INFO(pod.name << "@" << n.node.name << ": " << Describe(v));
          // A module that skips the pod passes every node.
          if (module->Skips(ctx)) CHECK(v.ok());
          // A pass leaves the caller's verdict as it was; a failure says so both ways.
          NodeVerdict why{.message = "left as it was"};
          const bool pass = module->Filter(ctx, n, &why);
          CHECK(pass == v.ok());
          if (pass) CHECK(why.message == "left as it was");
          if (!pass) CHECK(Describe(why) == Describe(v));
          if (v.ok()) {
            CHECK(v.reason == Reason::kNone);
            CHECK(v.message.empty());
          } else {
            CHECK(v.reason != Reason::kNone);
            CHECK_FALSE(v.message.empty());
          }
        });
      }
    }
    SECTION("without messages: the same fit and reason, and no words") {
      for (const core::Pod& pod : cluster.pods()) {
        const CycleContext worded{.state = *view, .pod = pod, .now = now, .explain = false};
        CycleContext bare = worded;
        bare.messages = false;
        view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
          const NodeVerdict v = module->Verdict(bare, n);
          const NodeVerdict w = module->Verdict(worded, n);
          INFO(pod.name << "@" << n.node.name << ": " << Describe(w));
          CHECK(v.fit == w.fit);
          CHECK(v.reason == w.reason);
          CHECK(v.message.empty());
          CHECK(v.detail.empty());
        });
      }
    }
    SECTION("thread-safe on one view") {
      CheckSameFromThreads([&] { return AllVerdicts(*module, *view, cluster.pods(), now); }, first);
    }
    SECTION("the registry builds the same module") {
      PolicyConfig config;
      config.filters = {std::string(TestType::kName)};
      config.scores.clear();
      config.preempt.clear();
      auto pipeline = BuildDefaultRegistry().Build(config, cluster.model().resources());
      REQUIRE(pipeline.ok());
      for (const core::Pod& pod : cluster.pods()) {
        const CycleContext ctx{.state = *view, .pod = pod, .now = now};
        view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
          CHECK(Describe((*pipeline)->FilterNode(ctx, n)) == Describe(module->Verdict(ctx, n)));
        });
      }
    }
  }
  CHECK(cluster.model().Read()->generation() == generation);  // nothing changed the model
}

// ---- scores -------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("Score contract", "[contract][concurrency]", BERTH_SCORE_MODULES) {
  ContractCluster cluster;
  auto module = TestType::Make(cluster.model().resources());
  CHECK(module->Name() == TestType::kName);
  const uint64_t generation = cluster.model().Read()->generation();
  {  // the view is let go before the model's generation is read again
    auto view = cluster.model().Read();
    const absl::Time now = cluster.Now();

    const std::vector<int64_t> first = AllScores(*module, *view, cluster.pods(), now);
    REQUIRE(first.size() == cluster.pods().size() * view->node_count());

    SECTION("within [0, kMaxScore]") {
      for (int64_t s : first) {
        CHECK(s >= 0);
        CHECK(s <= kMaxScore);
      }
    }
    SECTION("deterministic, also across instances") {
      CHECK(AllScores(*module, *view, cluster.pods(), now) == first);
      auto again = TestType::Make(cluster.model().resources());
      CHECK(AllScores(*again, *view, cluster.pods(), now) == first);
    }
    SECTION("thread-safe on one view") {
      CheckSameFromThreads([&] { return AllScores(*module, *view, cluster.pods(), now); }, first);
    }
    SECTION("the registry builds the same module") {
      PolicyConfig config;
      config.filters.clear();
      config.scores = {{std::string(TestType::kName), 1}};
      config.preempt.clear();
      auto pipeline = BuildDefaultRegistry().Build(config, cluster.model().resources());
      REQUIRE(pipeline.ok());
      for (const core::Pod& pod : cluster.pods()) {
        const CycleContext ctx{.state = *view, .pod = pod, .now = now};
        view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
          CHECK((*pipeline)->ScoreNode(ctx, n) == module->Score(ctx, n));
        });
      }
    }
  }
  CHECK(cluster.model().Read()->generation() == generation);  // nothing changed the model
}

TEST_CASE("Score contract through the registry, for every registered score module",
          "[contract]") {
  const Registry r = BuildDefaultRegistry();
  REQUIRE_FALSE(r.NamesAt(Point::kScore).empty());
  for (const std::string& name : r.NamesAt(Point::kScore)) {
    INFO(name);
    ContractCluster cluster;
    const uint64_t generation = cluster.model().Read()->generation();
    PolicyConfig config;
    config.filters.clear();
    config.preempt.clear();
    config.scores = {{name, 1}};
    auto scores = [&] {
      auto pipeline = r.Build(config, cluster.model().resources());
      REQUIRE(pipeline.ok());
      auto view = cluster.model().Read();
      std::vector<int64_t> out;
      for (const core::Pod& pod : cluster.pods()) {
        const CycleContext ctx{.state = *view, .pod = pod, .now = cluster.Now()};
        view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
          out.push_back((*pipeline)->ScoreNode(ctx, n));
        });
      }
      return out;
    };
    const std::vector<int64_t> first = scores();
    REQUIRE_FALSE(first.empty());
    for (int64_t s : first) {
      CHECK(s >= 0);
      CHECK(s <= kMaxScore);
    }
    CHECK(scores() == first);  // deterministic, also across builds
    CHECK(cluster.model().Read()->generation() == generation);
  }
}

}  // namespace
}  // namespace berth::policy
