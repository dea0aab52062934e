// The "gpu" section of berth's configuration file: the settings of the GPU placement modules.

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/strings.h"
#include "extender/config.h"
#include "policy/config.h"

namespace berth::extender {
namespace {

using policy::GpuConfig;

constexpr int64_t kGi = int64_t{1} << 30;

GpuConfig Parse(const std::string& gpu_section) {
  const absl::StatusOr<Config> c = ParseConfig(StrCat(R"({"gpu": )", gpu_section, "}"), "c.json");
  INFO(gpu_section << ": " << c.status().ToString());
  REQUIRE(c.ok());
  return c->policy.gpu;
}

std::string Error(const std::string& gpu_section) {
  const absl::StatusOr<Config> c = ParseConfig(StrCat(R"({"gpu": )", gpu_section, "}"), "c.json");
  INFO(gpu_section);
  REQUIRE_FALSE(c.ok());
  return std::string(c.status().message());
}

TEST_CASE("gpu config: defaults when the section or a field is absent", "[config][gpu]") {
  const absl::StatusOr<Config> none = ParseConfig("{}", "c.json");
  REQUIRE(none.ok());
  const GpuConfig& d = none->policy.gpu;
  CHECK(d.reserved_cpu_per_gpu_milli == 2000);
  CHECK(d.reserved_memory_per_gpu == 8 * kGi);
  CHECK(d.min_cpu_per_gpu_milli == 1000);
  CHECK(d.min_cpu_action == GpuConfig::MinCpuAction::kWarn);
  // The GPU modules are in the default module lists.
  CHECK(none->policy.admission == std::vector<std::string>{"gpu-min-cpu", "queue", "gang"});

  const GpuConfig empty = Parse("{}");
  CHECK(empty.reserved_cpu_per_gpu_milli == 2000);
  CHECK(empty.reserved_memory_per_gpu == 8 * kGi);
  CHECK(empty.min_cpu_per_gpu_milli == 1000);
  CHECK(empty.min_cpu_action == GpuConfig::MinCpuAction::kWarn);

  // null counts as absent, as for every optional field.
  CHECK(Parse(R"({"minCpuPerGpu": null})").min_cpu_per_gpu_milli == 1000);
}

TEST_CASE("gpu config: quantities as Kubernetes strings", "[config][gpu]") {
  const GpuConfig g = Parse(R"({"reservedCpuPerGpu": "3", "reservedMemoryPerGpu": "16Gi",
                                "minCpuPerGpu": "500m", "minCpuPerGpuAction": "reject"})");
  CHECK(g.reserved_cpu_per_gpu_milli == 3000);
  CHECK(g.reserved_memory_per_gpu == 16 * kGi);
  CHECK(g.min_cpu_per_gpu_milli == 500);
  CHECK(g.min_cpu_action == GpuConfig::MinCpuAction::kReject);

  CHECK(Parse(R"({"reservedCpuPerGpu": "1.5"})").reserved_cpu_per_gpu_milli == 1500);
  CHECK(Parse(R"({"reservedMemoryPerGpu": "8G"})").reserved_memory_per_gpu == 8'000'000'000);
  CHECK(Parse(R"({"reservedMemoryPerGpu": "1e3"})").reserved_memory_per_gpu == 1000);
  // Below a millicore rounds up, as Kubernetes rounds requests.
  CHECK(Parse(R"({"minCpuPerGpu": "0.0001"})").min_cpu_per_gpu_milli == 1);
  CHECK(Parse(R"({"minCpuPerGpuAction": "warn"})").min_cpu_action ==
        GpuConfig::MinCpuAction::kWarn);
}

TEST_CASE("gpu config: quantities as JSON numbers", "[config][gpu]") {
  const GpuConfig g = Parse(R"({"reservedCpuPerGpu": 4, "reservedMemoryPerGpu": 1073741824,
                                "minCpuPerGpu": 0.25})");
  CHECK(g.reserved_cpu_per_gpu_milli == 4000);
  CHECK(g.reserved_memory_per_gpu == kGi);
  CHECK(g.min_cpu_per_gpu_milli == 250);
  CHECK(Parse(R"({"reservedCpuPerGpu": 1.5e0})").reserved_cpu_per_gpu_milli == 1500);
}

TEST_CASE("gpu config: 0 turns a rule off", "[config][gpu]") {
  const GpuConfig g =
      Parse(R"({"reservedCpuPerGpu": 0, "reservedMemoryPerGpu": "0", "minCpuPerGpu": "0m"})");
  CHECK(g.reserved_cpu_per_gpu_milli == 0);
  CHECK(g.reserved_memory_per_gpu == 0);
  CHECK(g.min_cpu_per_gpu_milli == 0);
}

TEST_CASE("gpu config: errors name the file and the field", "[config][gpu]") {
  CHECK(Error(R"({"reservedCPUPerGpu": "2"})") ==
        "c.json: gpu.reservedCPUPerGpu: unknown field (known: minCpuPerGpu, minCpuPerGpuAction, "
        "reservedCpuPerGpu, reservedMemoryPerGpu)");
  CHECK(Error(R"({"minCpuPerGpuAction": "ignore"})") ==
        "c.json: gpu.minCpuPerGpuAction: expected \"warn\" or \"reject\"");
  CHECK(Error(R"({"minCpuPerGpuAction": true})") ==
        "c.json: gpu.minCpuPerGpuAction: expected a string, got a boolean");
  CHECK(Error(R"({"reservedCpuPerGpu": "-1"})") ==
        "c.json: gpu.reservedCpuPerGpu: expected 0 (off) or more, got -1");
  CHECK(Error(R"({"reservedMemoryPerGpu": -1024})") ==
        "c.json: gpu.reservedMemoryPerGpu: expected 0 (off) or more, got -1024");
  CHECK(Error(R"({"minCpuPerGpu": true})") ==
        "c.json: gpu.minCpuPerGpu: expected a quantity (string or number), got "
        "a boolean");
  CHECK(Error(R"({"reservedCpuPerGpu": "2000000"})") ==
        "c.json: gpu.reservedCpuPerGpu: expected at most 1000000 cores");
  CHECK(Error(R"({"reservedMemoryPerGpu": "2Pi"})") ==
        "c.json: gpu.reservedMemoryPerGpu: expected at most 1Pi");
  CHECK_THAT(Error(R"({"minCpuPerGpu": "1K"})"),
             Catch::Matchers::StartsWith("c.json: gpu.minCpuPerGpu: invalid quantity \"1K\""));
  CHECK_THAT(Error(R"({"reservedMemoryPerGpu": "8 Gi"})"),
             Catch::Matchers::StartsWith("c.json: gpu.reservedMemoryPerGpu: invalid quantity"));
  const absl::StatusOr<Config> not_object = ParseConfig(R"({"gpu": []})", "c.json");
  REQUIRE_FALSE(not_object.ok());
  CHECK(not_object.status().message() == "c.json: gpu: expected an object, got an array");
}

}  // namespace
}  // namespace berth::extender
