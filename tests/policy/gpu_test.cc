#include "policy/gpu/gpu.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "core/strings.h"
#include "policy/config.h"
#include "policy/pipeline.h"
#include "policy/policy.h"
#include "policy/registry.h"
#include "policy/verdict.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CoreNode;
using testing::CorePod;
using testing::kGi;

constexpr std::string_view kCpuMessage =
    "berth: CPU-only pods may not use the cpu reserved for the node's free GPUs (2 cpu per GPU)";
constexpr std::string_view kMemoryMessage =
    "berth: CPU-only pods may not use the memory reserved for the node's free GPUs (8Gi memory "
    "per GPU)";
constexpr std::string_view kBothMessage =
    "berth: CPU-only pods may not use the cpu and memory reserved for the node's free GPUs (2 cpu "
    "and 8Gi memory per GPU)";

class GpuTest {
 protected:
  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};

  GpuTest() {
    // gpu: 16 cpu, 64Gi, 4 GPUs: with every GPU free it keeps 8 cpu and 32Gi for them.
    Add(CoreNode("gpu", 16000, 64 * kGi, 4));
    Add(CoreNode("cpu", 16000, 64 * kGi));
  }

  void Add(core::Node n) { model_.Apply(core::NodeUpsert{std::move(n)}); }
  void Add(core::Pod p) { model_.Apply(core::PodUpsert{std::move(p)}); }

  static std::unique_ptr<GpuReserveFilter> Reserve(GpuConfig config = {}) {
    absl::StatusOr<std::unique_ptr<GpuReserveFilter>> f = GpuReserveFilter::Create(config);
    INFO(f.status().ToString());
    REQUIRE(f.ok());
    return *std::move(f);
  }
  static std::unique_ptr<GpuMinCpuAdmission> MinCpu(GpuConfig config = {}) {
    absl::StatusOr<std::unique_ptr<GpuMinCpuAdmission>> a = GpuMinCpuAdmission::Create(config);
    INFO(a.status().ToString());
    REQUIRE(a.ok());
    return *std::move(a);
  }

  NodeVerdict Filter(const FilterPlugin& f, const core::Pod& pod, std::string_view node,
                     bool explain = true) {
    auto view = model_.Read();
    const core::NodeState* n = view->FindNode(node);
    REQUIRE(n != nullptr);
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock_.Now(), .explain = explain};
    return f.Verdict(ctx, *n);
  }
  int64_t Score(const ScorePlugin& s, const core::Pod& pod, std::string_view node) {
    auto view = model_.Read();
    const core::NodeState* n = view->FindNode(node);
    REQUIRE(n != nullptr);
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock_.Now()};
    return s.Score(ctx, *n);
  }
  NodeVerdict Admit(const PreFilterPlugin& a, const core::Pod& pod, bool explain = true) {
    auto view = model_.Read();
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock_.Now(), .explain = explain};
    return a.PreFilter(ctx);
  }
};

// ---- gpu-affinity -------------------------------------------------------------------------------

TEST_CASE_METHOD(GpuTest, "GpuAffinity: CPU-only pods prefer nodes without GPUs", "[gpu]") {
  const GpuAffinityScore s;
  CHECK(s.Name() == "gpu-affinity");
  const core::Pod cpu_pod = CorePod("c", "", 2000, 4 * kGi);
  CHECK(Score(s, cpu_pod, "gpu") == 0);
  CHECK(Score(s, cpu_pod, "cpu") == kMaxScore);

  // A pod asking for nothing but a slot is CPU-only too.
  CHECK(Score(s, CorePod("empty", "", 0, 0), "gpu") == 0);

  // A GPU node stays a GPU node when its GPUs are all taken.
  Add(CorePod("g", "gpu", 4000, 16 * kGi, 4));
  CHECK(Score(s, cpu_pod, "gpu") == 0);
}

TEST_CASE_METHOD(GpuTest, "GpuAffinity: a GPU pod scores the maximum everywhere", "[gpu]") {
  const GpuAffinityScore s;
  const core::Pod gpu_pod = CorePod("g", "", 4000, 16 * kGi, 1);
  CHECK(Score(s, gpu_pod, "gpu") == kMaxScore);
  CHECK(Score(s, gpu_pod, "cpu") == kMaxScore);
}

// ---- gpu-reserve --------------------------------------------------------------------------------

TEST_CASE_METHOD(GpuTest, "GpuReserve: a CPU-only pod may not take what free GPUs need",
                 "[gpu]") {
  auto f = Reserve();
  CHECK(f->Name() == "gpu-reserve");

  // 16 cpu free, 8 reserved: up to 8 cpu fits.
  CHECK(Filter(*f, CorePod("c8", "", 8000, 4 * kGi), "gpu").ok());
  const NodeVerdict cpu = Filter(*f, CorePod("c9", "", 9000, 4 * kGi), "gpu");
  CHECK(cpu.fit == Fit::kUnschedulable);
  CHECK(cpu.reason == Reason::kGpuReserved);
  CHECK(ReasonCode(cpu.reason) == "GpuReserved");
  CHECK(cpu.message == kCpuMessage);

  // 64Gi free, 32Gi reserved.
  CHECK(Filter(*f, CorePod("m32", "", 1000, 32 * kGi), "gpu").ok());
  const NodeVerdict memory = Filter(*f, CorePod("m33", "", 1000, 33 * kGi), "gpu");
  CHECK(memory.fit == Fit::kUnschedulable);
  CHECK(memory.reason == Reason::kGpuReserved);
  CHECK(memory.message == kMemoryMessage);

  const NodeVerdict both = Filter(*f, CorePod("both", "", 9000, 33 * kGi), "gpu");
  CHECK(both.fit == Fit::kUnschedulable);
  CHECK(both.message == kBothMessage);

  // The same pods fit the CPU node whole.
  CHECK(Filter(*f, CorePod("both", "", 9000, 33 * kGi), "cpu").ok());
  CHECK(Filter(*f, CorePod("all", "", 16000, 64 * kGi), "cpu").ok());
}

TEST_CASE_METHOD(GpuTest, "GpuReserve: the reservation follows the node's free GPUs", "[gpu]") {
  auto f = Reserve();
  const core::Pod ten = CorePod("ten", "", 10000, 4 * kGi);
  // 4 free GPUs keep 8 of 16 cpu.
  CHECK_FALSE(Filter(*f, ten, "gpu").ok());

  // A bound GPU pod takes 1 GPU and 2 cpu: 14 free, 3 GPUs keep 6, 8 unreserved.
  Add(CorePod("g1", "gpu", 2000, 8 * kGi, 1));
  CHECK_FALSE(Filter(*f, ten, "gpu").ok());
  CHECK(Filter(*f, CorePod("eight", "", 8000, 4 * kGi), "gpu").ok());

  // An in-flight bind of a 2-GPU pod with 1 cpu counts too: 13 free, 1 GPU keeps 2, 11 left.
  Add(CorePod("g2", "", 1000, 8 * kGi, 2));
  REQUIRE(*model_.Assume("g2", "gpu", nullptr));
  CHECK(Filter(*f, ten, "gpu").ok());
  CHECK(Filter(*f, CorePod("eleven", "", 11000, 4 * kGi), "gpu").ok());
  CHECK_FALSE(Filter(*f, CorePod("twelve", "", 12000, 4 * kGi), "gpu").ok());

  // The last GPU taken: nothing is reserved any more, the whole free room is open.
  Add(CorePod("g3", "gpu", 1000, 8 * kGi, 1));
  CHECK(Filter(*f, CorePod("twelve", "", 12000, 4 * kGi), "gpu").ok());

  // The GPU pod finishes: its GPU is free and reserved again.
  core::Pod done = CorePod("g3", "gpu", 1000, 8 * kGi, 1);
  done.phase = core::PodPhase::kSucceeded;
  Add(done);
  CHECK_FALSE(Filter(*f, CorePod("twelve", "", 12000, 4 * kGi), "gpu").ok());
}

TEST_CASE_METHOD(GpuTest, "GpuReserve: GPU pods and unrequested resources are not restricted",
                 "[gpu]") {
  auto f = Reserve();
  // A GPU pod may use the node whole.
  CHECK(Filter(*f, CorePod("g", "", 16000, 64 * kGi, 1), "gpu").ok());
  // A pod requesting no memory is not refused for memory, even when the node's free memory is
  // below the reservation.
  Add(CorePod("hog", "gpu", 0, 48 * kGi));
  CHECK(Filter(*f, CorePod("cpu-only", "", 1000, 0), "gpu").ok());
  CHECK_FALSE(Filter(*f, CorePod("some-memory", "", 1000, 1), "gpu").ok());
  CHECK(Filter(*f, CorePod("nothing", "", 0, 0), "gpu").ok());
}

TEST_CASE_METHOD(GpuTest, "GpuReserve: a per-GPU amount of 0 turns that half off", "[gpu]") {
  const core::Pod big_cpu = CorePod("big-cpu", "", 16000, 4 * kGi);
  const core::Pod big_memory = CorePod("big-memory", "", 1000, 64 * kGi);

  auto no_cpu = Reserve(GpuConfig{.reserved_cpu_per_gpu_milli = 0});
  CHECK(Filter(*no_cpu, big_cpu, "gpu").ok());
  CHECK(Filter(*no_cpu, big_memory, "gpu").message == kMemoryMessage);

  auto no_memory = Reserve(GpuConfig{.reserved_memory_per_gpu = 0});
  CHECK(Filter(*no_memory, big_cpu, "gpu").message == kCpuMessage);
  CHECK(Filter(*no_memory, big_memory, "gpu").ok());

  auto off = Reserve(GpuConfig{.reserved_cpu_per_gpu_milli = 0, .reserved_memory_per_gpu = 0});
  CHECK(Filter(*off, CorePod("all", "", 16000, 64 * kGi), "gpu").ok());
}

TEST_CASE_METHOD(GpuTest, "GpuReserve: custom amounts appear in the message", "[gpu]") {
  auto f = Reserve(GpuConfig{.reserved_cpu_per_gpu_milli = 1500,
                             .reserved_memory_per_gpu = 512 * (int64_t{1} << 20)});
  // 4 GPUs keep 6 cpu: 10 cpu is the most a CPU-only pod gets.
  CHECK(Filter(*f, CorePod("ten", "", 10000, kGi), "gpu").ok());
  const NodeVerdict v = Filter(*f, CorePod("eleven", "", 11000, kGi), "gpu");
  CHECK(v.message ==
        "berth: CPU-only pods may not use the cpu reserved for the node's free GPUs (1500m cpu "
        "per GPU)");
  CHECK(Filter(*f, CorePod("m", "", 1000, 63 * kGi), "gpu").message ==
        "berth: CPU-only pods may not use the memory reserved for the node's free GPUs (512Mi "
        "memory per GPU)");
}

TEST_CASE_METHOD(GpuTest, "GpuReserve: the detail gives the numbers, only when explaining",
                 "[gpu]") {
  auto f = Reserve();
  Add(CorePod("g1", "gpu", 2000, 8 * kGi, 1));
  Add(CorePod("c1", "gpu", 2000, 8 * kGi));
  // 3 of 4 GPUs free keep 6 cpu and 24Gi; free 12 cpu and 48Gi.
  const core::Pod pod = CorePod("p", "", 8000, 30 * kGi);
  const NodeVerdict explained = Filter(*f, pod, "gpu", /*explain=*/true);
  CHECK(explained.message == kBothMessage);
  CHECK(explained.detail ==
        "3 of 4 GPUs free; cpu: free 12, reserved 6, pod requests 8: short by 2; memory: free "
        "48Gi, reserved 24Gi, pod requests 30Gi: short by 6Gi");

  const NodeVerdict quiet = Filter(*f, pod, "gpu", /*explain=*/false);
  CHECK(quiet.fit == explained.fit);
  CHECK(quiet.reason == explained.reason);
  CHECK(quiet.message == explained.message);
  CHECK(quiet.detail.empty());

  // Only the short resource is described.
  CHECK(Filter(*f, CorePod("q", "", 7000, kGi), "gpu").detail ==
        "3 of 4 GPUs free; cpu: free 12, reserved 6, pod requests 7: short by 1");

  // A fit carries nothing.
  const NodeVerdict fit = Filter(*f, CorePod("r", "", 6000, kGi), "gpu");
  CHECK(fit.ok());
  CHECK(fit.reason == Reason::kNone);
  CHECK(fit.message.empty());
  CHECK(fit.detail.empty());
}

TEST_CASE_METHOD(GpuTest, "GpuReserve: extreme amounts saturate instead of wrapping", "[gpu]") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Add(CoreNode("huge", kMax, kMax, kMax));
  auto f = Reserve(GpuConfig{.reserved_cpu_per_gpu_milli = kMax, .reserved_memory_per_gpu = kMax});
  // The reservation saturates at the int64 range: every CPU-only request is refused.
  CHECK(Filter(*f, CorePod("p", "", 1, 1), "huge").reason == Reason::kGpuReserved);
  CHECK(Filter(*f, CorePod("g", "", kMax, kMax, 1), "huge").ok());
}

TEST_CASE("GpuReserve: negative amounts are configuration errors", "[gpu]") {
  auto cpu = GpuReserveFilter::Create(GpuConfig{.reserved_cpu_per_gpu_milli = -500});
  REQUIRE_FALSE(cpu.ok());
  CHECK(cpu.status().message() == "gpu.reservedCpuPerGpu is -500m; expected 0 (off) or more");
  auto memory = GpuReserveFilter::Create(GpuConfig{.reserved_memory_per_gpu = -1});
  REQUIRE_FALSE(memory.ok());
  CHECK(memory.status().message() == "gpu.reservedMemoryPerGpu is -1; expected 0 (off) or more");
}

// ---- gpu-min-cpu --------------------------------------------------------------------------------

TEST_CASE_METHOD(GpuTest, "GpuMinCpu: reject makes a starved GPU pod unresolvable", "[gpu]") {
  auto a = MinCpu(GpuConfig{.min_cpu_action = GpuConfig::MinCpuAction::kReject});
  CHECK(a->Name() == "gpu-min-cpu");

  const NodeVerdict v = Admit(*a, CorePod("half", "", 1000, 8 * kGi, 2));
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kCpuPerGpuTooLow);
  CHECK(ReasonCode(v.reason) == "CpuPerGpuTooLow");
  CHECK(v.message ==
        "berth: the pod requests 0.5 CPU per GPU, below the minimum of 1 (config "
        "gpu.minCpuPerGpu)");
  CHECK(v.detail == "requests 1 cpu for 2 GPUs; at least 2 cpu needed");

  const NodeVerdict quiet = Admit(*a, CorePod("half", "", 1000, 8 * kGi, 2), /*explain=*/false);
  CHECK(quiet.fit == Fit::kUnresolvable);
  CHECK(quiet.message == v.message);
  CHECK(quiet.detail.empty());

  // Exactly the minimum, above it, and CPU-only pods pass with an empty verdict.
  for (const core::Pod& pod : {CorePod("exact", "", 2000, 0, 2), CorePod("more", "", 8000, 0, 2),
                               CorePod("cpu-only", "", 100, 0), CorePod("nothing", "", 0, 0)}) {
    INFO(pod.name.str());
    const NodeVerdict ok = Admit(*a, pod);
    CHECK(ok.ok());
    CHECK(ok.reason == Reason::kNone);
    CHECK(ok.message.empty());
    CHECK(ok.detail.empty());
  }
  // No CPU at all for one GPU.
  CHECK(Admit(*a, CorePod("zero", "", 0, 0, 1)).message ==
        "berth: the pod requests 0 CPU per GPU, below the minimum of 1 (config gpu.minCpuPerGpu)");
}

TEST_CASE_METHOD(GpuTest, "GpuMinCpu: warn admits, and Check still reports the warning",
                 "[gpu]") {
  auto a = MinCpu();  // the default action is warn
  const core::Pod starved = CorePod("half", "", 1000, 8 * kGi, 2);
  const NodeVerdict admitted = Admit(*a, starved);
  CHECK(admitted.ok());
  CHECK(admitted.message.empty());

  const NodeVerdict warning = a->Check(starved, /*explain=*/true);
  CHECK(warning.fit == Fit::kFit);
  CHECK(warning.reason == Reason::kCpuPerGpuTooLow);
  CHECK(warning.message ==
        "berth: the pod requests 0.5 CPU per GPU, below the minimum of 1 (config "
        "gpu.minCpuPerGpu)");
  CHECK(warning.detail == "requests 1 cpu for 2 GPUs; at least 2 cpu needed");
  CHECK(a->Check(CorePod("fed", "", 2000, 0, 2), true).reason == Reason::kNone);
}

TEST_CASE_METHOD(GpuTest, "GpuMinCpu: fractional minimums, and 0 turns the rule off", "[gpu]") {
  auto a = MinCpu(GpuConfig{.min_cpu_per_gpu_milli = 1500,
                            .min_cpu_action = GpuConfig::MinCpuAction::kReject});
  // 4 cpu for 3 GPUs is 1.333... per GPU, printed truncated so it never reads as enough.
  CHECK(Admit(*a, CorePod("p", "", 4000, 0, 3)).message ==
        "berth: the pod requests 1.333 CPU per GPU, below the minimum of 1.5 (config "
        "gpu.minCpuPerGpu)");
  CHECK(Admit(*a, CorePod("q", "", 4500, 0, 3)).ok());
  // 2999m for 2 GPUs: 1.4995 per GPU is below the minimum even though it rounds to 1.5.
  CHECK(Admit(*a, CorePod("r", "", 2999, 0, 2)).message ==
        "berth: the pod requests 1.499 CPU per GPU, below the minimum of 1.5 (config "
        "gpu.minCpuPerGpu)");

  auto off = MinCpu(GpuConfig{.min_cpu_per_gpu_milli = 0,
                              .min_cpu_action = GpuConfig::MinCpuAction::kReject});
  CHECK(Admit(*off, CorePod("zero", "", 0, 0, 8)).ok());
  CHECK(off->Check(CorePod("zero", "", 0, 0, 8), true).reason == Reason::kNone);

  auto negative = GpuMinCpuAdmission::Create(GpuConfig{.min_cpu_per_gpu_milli = -1000});
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.status().message() == "gpu.minCpuPerGpu is -1; expected 0 (off) or more");
}

TEST_CASE("FormatCores prints millicores as decimal cores", "[gpu]") {
  CHECK(FormatCores(0) == "0");
  CHECK(FormatCores(1) == "0.001");
  CHECK(FormatCores(500) == "0.5");
  CHECK(FormatCores(1250) == "1.25");
  CHECK(FormatCores(2000) == "2");
  CHECK(FormatCores(12034) == "12.034");
  CHECK(FormatCores(-1500) == "-1.5");
  CHECK(FormatCores(std::numeric_limits<int64_t>::min()) == "-9223372036854775.808");
}

// ---- through the registry -----------------------------------------------------------------------

TEST_CASE_METHOD(GpuTest, "The default pipeline runs the GPU modules", "[gpu][registry]") {
  absl::StatusOr<std::unique_ptr<Pipeline>> p =
      BuildDefaultRegistry().Build(PolicyConfig{}, model_.resources());
  REQUIRE(p.ok());
  const std::vector<std::string> described = (*p)->Describe();
  for (const char* want : {"prefilter:gpu-min-cpu", "filter:gpu-reserve", "score:gpu-affinity*1"}) {
    INFO(want);
    CHECK(std::find(described.begin(), described.end(), want) != described.end());
  }

  auto view = model_.Read();
  const core::Pod pod = CorePod("p", "", 9000, 4 * kGi);
  const CycleContext ctx{.state = *view, .pod = pod, .now = clock_.Now(), .explain = false};
  const std::vector<std::string_view> nodes = {"gpu", "cpu"};
  const std::vector<NodeVerdict> v = (*p)->Filter(ctx, nodes);
  REQUIRE(v.size() == 2);
  CHECK(v[0].reason == Reason::kGpuReserved);
  CHECK(v[1].ok());
  // The CPU node wins the combined score.
  CHECK((*p)->ScoreNode(ctx, *view->FindNode("cpu")) >
        (*p)->ScoreNode(ctx, *view->FindNode("gpu")));
  // Warn is the default: a starved GPU pod is admitted.
  const core::Pod starved = CorePod("s", "", 100, 0, 1);
  CHECK((*p)->PreFilter({.state = *view, .pod = starved, .now = clock_.Now()}).ok());
}

TEST_CASE_METHOD(GpuTest, "The registry passes the gpu settings through", "[gpu][registry]") {
  PolicyConfig config;
  config.gpu.min_cpu_action = GpuConfig::MinCpuAction::kReject;
  config.gpu.reserved_cpu_per_gpu_milli = 0;
  absl::StatusOr<std::unique_ptr<Pipeline>> p =
      BuildDefaultRegistry().Build(config, model_.resources());
  REQUIRE(p.ok());
  auto view = model_.Read();
  const core::Pod starved = CorePod("s", "", 100, 0, 1);
  CHECK((*p)->PreFilter({.state = *view, .pod = starved, .now = clock_.Now()}).fit ==
        Fit::kUnresolvable);
  const core::Pod big = CorePod("b", "", 16000, 0);
  CHECK((*p)->FilterNode({.state = *view, .pod = big, .now = clock_.Now()},
                         *view->FindNode("gpu"))
            .ok());

  config.gpu.reserved_memory_per_gpu = -1;
  absl::StatusOr<std::unique_ptr<Pipeline>> bad =
      BuildDefaultRegistry().Build(config, model_.resources());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "policy.filters: module \"gpu-reserve\": gpu.reservedMemoryPerGpu is -1; expected 0 (off) or more");
}

}  // namespace
}  // namespace berth::policy
