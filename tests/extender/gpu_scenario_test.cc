// GPU placement (SPEC 6.7) end to end, through berth's request/response interface: CPU-only pods
// prefer CPU nodes, may not take what a GPU node's free GPUs need, and GPU pods that ask too
// little CPU per GPU are warned about or rejected.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "extender/config.h"
#include "nlohmann/json.hpp"
#include "policy/config.h"
#include "tests/testing/harness.h"
#include "tests/testing/scenario.h"

namespace berth::testing {
namespace {

constexpr const char* kReserved = "reserved for the node's free GPUs";

// gpu-1 keeps 2 cpu and 8Gi per free GPU: 8 cpu and 32Gi while its 4 GPUs are free.
std::vector<nlohmann::json> GpuAndCpuNode() {
  return {MakeNode("gpu-1").Cpu("16").Memory("64Gi").Gpu(4).Obj(),
          MakeNode("cpu-1").Cpu("16").Memory("64Gi").Obj()};
}

TEST_CASE("a CPU-only pod ranks the CPU node above the GPU node", "[gpu][scenario]") {
  RunScenario({.name = "gpu affinity",
               .objects = GpuAndCpuNode(),
               .steps = {PrioritizeStep{
                   .pod = MakePod("etl").Cpu("2").Memory("4Gi"),
                   .nodes = {"gpu-1", "cpu-1"},
                   .ranking = {"cpu-1", "gpu-1"},
                   // cpu-1: binpack (2/16 + 4/64) / 2 -> 0.94 -> 1, gpu-affinity 10 -> 5.5 -> 6.
                   // gpu-1: binpack counts the idle GPUs too -> 0, gpu-affinity 0 -> 0.
                   .exact = {{"cpu-1", 6}, {"gpu-1", 0}}}}});
}

TEST_CASE("a GPU pod is scored by bin packing alone among GPU nodes", "[gpu][scenario]") {
  RunScenario({.name = "gpu pods pack",
               .objects = {MakeNode("gpu-big").Cpu("32").Memory("128Gi").Gpu(8).Obj(),
                           MakeNode("gpu-small").Cpu("16").Memory("64Gi").Gpu(4).Obj()},
               .steps = {PrioritizeStep{.pod = MakePod("train").Cpu("16").Memory("64Gi").Gpu(4),
                                        .nodes = {"gpu-big", "gpu-small"},
                                        // gpu-small is filled: binpack 10, affinity 10 -> 10.
                                        // gpu-big is half full: binpack 5, affinity 10 -> 7.5 -> 8.
                                        .ranking = {"gpu-small", "gpu-big"},
                                        .exact = {{"gpu-small", 10}, {"gpu-big", 8}}}}});
}

TEST_CASE("CPU-only pods may not take the CPU that a GPU node's free GPUs need",
          "[gpu][scenario]") {
  const MakePod cpu_job = MakePod("cpu-job").Cpu("10").Memory("8Gi");
  const MakePod one_gpu = MakePod("one-gpu").Cpu("2").Memory("8Gi").Gpu(1);
  const MakePod three_gpus = MakePod("three-gpus").Cpu("3").Memory("16Gi").Gpu(3);
  RunScenario(
      {.name = "gpu reserve",
       .objects = GpuAndCpuNode(),
       .steps = {
           // 16 cpu free, 8 kept for 4 free GPUs: 10 is too much there (preemption of CPU pods
           // could help, so FailedNodes), fine on the CPU node.
           FilterStep{.pod = cpu_job,
                      .nodes = {"gpu-1", "cpu-1"},
                      .expect = {{"gpu-1", Expect::kFailed, kReserved},
                                 {"cpu-1", Expect::kFit, ""}}},
           // A GPU pod may use the GPU node's CPU.
           FilterStep{.pod = one_gpu, .nodes = {"gpu-1"}, .expect = {{"gpu-1", Expect::kFit, ""}}},
           BindStep{.pod = one_gpu, .node = "gpu-1"},
           // 14 cpu free, 3 free GPUs keep 6: still too little for 10.
           FilterStep{.pod = cpu_job,
                      .nodes = {"gpu-1"},
                      .expect = {{"gpu-1", Expect::kFailed, "cpu reserved"}}},
           // A bind is re-checked against the same rule.
           BindStep{.pod = cpu_job, .node = "gpu-1", .error_contains = kReserved},
           FilterStep{.pod = three_gpus,
                      .nodes = {"gpu-1"},
                      .expect = {{"gpu-1", Expect::kFit, ""}}},
           BindStep{.pod = three_gpus, .node = "gpu-1"},
           FreeStep{.node = "gpu-1", .resource = "nvidia.com/gpu", .free = "0"},
           // Every GPU taken: nothing is reserved, the CPU-only pod fits in the 11 cpu left.
           FilterStep{.pod = cpu_job,
                      .nodes = {"gpu-1", "cpu-1"},
                      .expect = {{"gpu-1", Expect::kFit, ""}, {"cpu-1", Expect::kFit, ""}}},
           BindStep{.pod = cpu_job, .node = "gpu-1"},
           FreeStep{.node = "gpu-1", .resource = "cpu", .free = "1"},
       }});
}

TEST_CASE("memory is reserved for free GPUs too", "[gpu][scenario]") {
  RunScenario({.name = "gpu reserve memory",
               .objects = GpuAndCpuNode(),
               .steps = {FilterStep{.pod = MakePod("cache").Cpu("1").Memory("40Gi"),
                                    .nodes = {"gpu-1", "cpu-1"},
                                    .expect = {{"gpu-1", Expect::kFailed, "memory reserved"},
                                               {"cpu-1", Expect::kFit, ""}}}}});
}

TEST_CASE("a GPU pod below minCpuPerGpu is admitted under warn", "[gpu][scenario]") {
  // The default configuration warns (the event comes from the Kubernetes-mode writer).
  const MakePod starved = MakePod("starved").Cpu("500m").Memory("8Gi").Gpu(1);
  RunScenario({.name = "min cpu warn",
               .objects = GpuAndCpuNode(),
               .steps = {FilterStep{.pod = starved,
                                    .nodes = {"gpu-1"},
                                    .expect = {{"gpu-1", Expect::kFit, ""}}},
                         BindStep{.pod = starved, .node = "gpu-1"}}});
}

TEST_CASE("a GPU pod below minCpuPerGpu is rejected everywhere under reject, set in the config",
          "[gpu][scenario]") {
  // The settings come from a configuration document, as `berth serve --config` reads it.
  const absl::StatusOr<extender::Config> config = extender::ParseConfig(
      R"({"gpu": {"minCpuPerGpu": "1", "minCpuPerGpuAction": "reject"}})", "gpu.json");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  const MakePod starved = MakePod("starved").Cpu("1").Memory("8Gi").Gpu(2);
  const MakePod fed = MakePod("fed").Cpu("2").Memory("8Gi").Gpu(2);
  const std::string why =
      "requests 0.5 CPU per GPU, below the minimum of 1 (config gpu.minCpuPerGpu)";
  RunScenario({.name = "min cpu reject",
               .objects = GpuAndCpuNode(),
               .steps = {FilterStep{.pod = starved,
                                    .nodes = {"gpu-1", "cpu-1"},
                                    .expect = {{"gpu-1", Expect::kUnresolvable, why},
                                               {"cpu-1", Expect::kUnresolvable, why}}},
                         BindStep{.pod = starved, .node = "gpu-1", .error_contains = why},
                         FreeStep{.node = "gpu-1", .resource = "nvidia.com/gpu", .free = "4"},
                         FilterStep{.pod = fed,
                                    .nodes = {"gpu-1", "cpu-1"},
                                    .expect = {{"gpu-1", Expect::kFit, ""},
                                               {"cpu-1", Expect::kUnresolvable, "nvidia.com/gpu"}}},
                         BindStep{.pod = fed, .node = "gpu-1"}},
               .policies = config->policy});
}

TEST_CASE("reservedCpuPerGpu 0 from the config file lets CPU-only pods fill GPU nodes",
          "[gpu][scenario]") {
  const absl::StatusOr<extender::Config> config = extender::ParseConfig(
      R"({"gpu": {"reservedCpuPerGpu": 0, "reservedMemoryPerGpu": "0"}})", "gpu.json");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  RunScenario({.name = "reserve off",
               .objects = GpuAndCpuNode(),
               .steps = {FilterStep{.pod = MakePod("all").Cpu("16").Memory("64Gi"),
                                    .nodes = {"gpu-1"},
                                    .expect = {{"gpu-1", Expect::kFit, ""}}},
                         // The score still steers it to the CPU node.
                         PrioritizeStep{.pod = MakePod("all").Cpu("16").Memory("64Gi"),
                                        .nodes = {"gpu-1", "cpu-1"},
                                        .ranking = {"cpu-1", "gpu-1"}}},
               .policies = config->policy});
}

}  // namespace
}  // namespace berth::testing
