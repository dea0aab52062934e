// Each module's settings parsed from a settings tree built here, without any wire format: good
// values, each bad value with its exact error, and unknown keys.

#include "policy/settings.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "policy/binpack/binpack.h"
#include "policy/config.h"
#include "policy/gang/gang.h"
#include "policy/gpu/gpu.h"
#include "policy/pools/pools.h"
#include "policy/queue/queue.h"

namespace berth::policy {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

/// Section `name` of a configuration with these fields.
Settings Section(std::string name, std::vector<Settings::Entry> fields) {
  return Settings::Map(std::move(fields)).At(std::move(name));
}

/// The settings `parse` reads from section `name` with the one field `key: value`.
template <class T>
T Good(absl::StatusOr<T> (*parse)(const Settings&), std::string name, std::string key,
       Settings value) {
  absl::StatusOr<T> out = parse(Section(std::move(name), {{std::move(key), std::move(value)}}));
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  return *std::move(out);
}

/// The error `parse` gives for section `name` with the one field `key: value`.
template <class T>
std::string Bad(absl::StatusOr<T> (*parse)(const Settings&), std::string name, std::string key,
                Settings value) {
  absl::StatusOr<T> out = parse(Section(std::move(name), {{std::move(key), std::move(value)}}));
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(out.status().message());
}

TEST_CASE("Settings: every value knows its path; null counts as absent", "[settings]") {
  const Settings s =
      Section("binpack", {{"weights", Settings::Map({{"nvidia.com/gpu", 4}, {"cpu", Settings()}})},
                          {"levels", Settings::List({"a", 2})}});
  CHECK(s.path() == "binpack");
  REQUIRE(s.Find("weights") != nullptr);
  const Settings& weights = *s.Find("weights");
  REQUIRE(weights.Find("nvidia.com/gpu") != nullptr);
  CHECK(weights.Find("nvidia.com/gpu")->path() == "binpack.weights.nvidia.com/gpu");
  CHECK(weights.Find("cpu") == nullptr);
  CHECK(weights.Find("memory") == nullptr);
  CHECK(s.Find("levels")->items()[1].path() == "binpack.levels[1]");
  CHECK(s.Find("levels")->items()[1].Error("bad").message() == "binpack.levels[1]: bad");
  CHECK(s.ErrorAt("name", "required").message() == "binpack.name: required");
  CHECK(Settings::Map({}).At("").Error("x").message() == "(document): x");
}

TEST_CASE("Settings readers: types, ranges and unknown keys name the field", "[settings]") {
  const Settings s = Section("s", {{"n", 5}, {"f", 2.5}, {"t", "x"}, {"b", true}});
  CHECK(CheckKeys(s, {"n", "f", "t"}).message() == "s.b: unknown field (known: f, n, t)");
  CHECK(CheckKeys(s, {"n", "f", "t", "b"}).ok());
  // A key another reader took is still known, but no longer handed on.
  const Settings rest = s.Without("b");
  CHECK(rest.Find("b") == nullptr);
  CHECK(CheckKeys(rest, {"n"}).message() == "s.f: unknown field (known: b, n)");
  CHECK(ExpectMap(Settings(3).At("s")).message() == "s: expected an object, got a number");

  double d = 0;
  CHECK(ReadNumber(s, "n", 0, 4, &d).message() == "s.n: expected 0..4, got 5");
  CHECK(ReadNumber(s, "t", 0, 4, &d).message() == "s.t: expected a number");
  REQUIRE(ReadNumber(s, "f", 0, 4, &d).ok());
  CHECK(d == 2.5);
  absl::Duration t = absl::Seconds(7);
  CHECK(ReadSeconds(s, "n", 0.1, 1, &t).message() == "s.n: expected 0.1..1 seconds, got 5");
  CHECK(ReadSeconds(s, "t", 0.1, 1, &t).message() == "s.t: expected a number of seconds");
  REQUIRE(ReadSeconds(s, "absent", 0.1, 1, &t).ok());
  CHECK(t == absl::Seconds(7));
  bool b = false;
  CHECK(ReadBool(s, "t", &b).message() == "s.t: expected true or false, got a string");
  std::optional<int64_t> i;
  CHECK(ReadInt(s, "f", &i).message() == "s.f: expected an integer, got a number");
  enum class Pick { kA, kB, kC };
  Pick p = Pick::kA;
  CHECK(ReadChoice<Pick>(s, "t", {{"a", Pick::kA}, {"b", Pick::kB}, {"c", Pick::kC}}, &p)
            .message() == "s.t: expected \"a\", \"b\" or \"c\"");
  REQUIRE(ReadChoice<Pick>(s, "t", {{"x", Pick::kC}}, &p).ok());
  CHECK(p == Pick::kC);
}

TEST_CASE("gang settings: defaults, good values, each bad value, unknown key", "[settings][gang]") {
  absl::StatusOr<GangConfig> empty = ParseGangSettings(Section("gangs", {}));
  REQUIRE(empty.ok());
  CHECK(empty->schedule_timeout == absl::Seconds(60));
  CHECK(empty->freeze_window == absl::Seconds(60));
  CHECK_FALSE(empty->release_incomplete);

  absl::StatusOr<GangConfig> g = ParseGangSettings(Section(
      "gangs",
      {{"scheduleTimeoutSeconds", 300}, {"freezeWindowSeconds", 0}, {"releaseIncomplete", true}}));
  REQUIRE(g.ok());
  CHECK(g->schedule_timeout == absl::Seconds(300));
  CHECK(g->freeze_window == absl::ZeroDuration());
  CHECK(g->release_incomplete);
  CHECK(Good(&ParseGangSettings, "gangs", "freezeWindowSeconds", 0.5).freeze_window ==
        absl::Milliseconds(500));

  CHECK(Bad(&ParseGangSettings, "gangs", "scheduleTimeoutSeconds", 0) ==
        "gangs.scheduleTimeoutSeconds: expected 0.1..86400 seconds, got 0");
  CHECK(Bad(&ParseGangSettings, "gangs", "scheduleTimeoutSeconds", "60s") ==
        "gangs.scheduleTimeoutSeconds: expected a number of seconds");
  CHECK(Bad(&ParseGangSettings, "gangs", "freezeWindowSeconds", -5) ==
        "gangs.freezeWindowSeconds: expected 0.1..86400 seconds, got -5");
  CHECK(Bad(&ParseGangSettings, "gangs", "freezeWindowSeconds", 0.05) ==
        "gangs.freezeWindowSeconds: expected 0.1..86400 seconds, got 0.05");
  CHECK(Bad(&ParseGangSettings, "gangs", "releaseIncomplete", "yes") ==
        "gangs.releaseIncomplete: expected true or false, got a string");
  CHECK(Bad(&ParseGangSettings, "gangs", "timeout", 3) ==
        "gangs.timeout: unknown field (known: freezeWindowSeconds, releaseIncomplete, "
        "scheduleTimeoutSeconds)");
  CHECK(ParseGangSettings(Settings(1).At("gangs")).status().message() ==
        "gangs: expected an object, got a number");
}

TEST_CASE("queue settings: defaults, good values, each bad value, unknown key",
          "[settings][queue]") {
  absl::StatusOr<QueueConfig> d = ParseQueueSettings(Section("queues", {}));
  REQUIRE(d.ok());
  CHECK(d->gpu_weight == 8);
  CHECK(d->half_time == absl::Minutes(10));
  CHECK(d->plan_reuse == absl::Milliseconds(250));
  CHECK(d->admitted_plan_reuse == absl::Milliseconds(1500));

  absl::StatusOr<QueueConfig> q = ParseQueueSettings(
      Section("queues", {{"gpuWeight", 4},
                         {"memoryWeightPerGiB", 0.5},
                         {"halfTimeSeconds", 120},
                         {"nonPreemptibleLimitFactor", 0},
                         {"excessBudget", 5000},
                         {"agingIntervalSeconds", 0},
                         {"planReuseMilliseconds", 50},
                         {"admittedPlanReuseMilliseconds", 700}}));
  REQUIRE(q.ok());
  CHECK(q->gpu_weight == 4);
  CHECK(q->memory_weight_per_gib == 0.5);
  CHECK(q->half_time == absl::Minutes(2));
  CHECK(q->non_preemptible_limit_factor == 0);
  CHECK(q->excess_budget == 5000);
  CHECK(q->aging_interval == absl::ZeroDuration());
  CHECK(q->plan_reuse == absl::Milliseconds(50));
  CHECK(q->admitted_plan_reuse == absl::Milliseconds(700));

  CHECK(Bad(&ParseQueueSettings, "queues", "gpuWeight", -1) ==
        "queues.gpuWeight: expected 0..1e+06, got -1");
  CHECK(Bad(&ParseQueueSettings, "queues", "gpuWeight", "8") ==
        "queues.gpuWeight: expected a number");
  CHECK(Bad(&ParseQueueSettings, "queues", "memoryWeightPerGiB", 2e6) ==
        "queues.memoryWeightPerGiB: expected 0..1e+06, got 2e+06");
  CHECK(Bad(&ParseQueueSettings, "queues", "nonPreemptibleLimitFactor", 1000.5) ==
        "queues.nonPreemptibleLimitFactor: expected 0..1000, got 1000.5");
  CHECK(Bad(&ParseQueueSettings, "queues", "excessBudget", -5) ==
        "queues.excessBudget: expected 0..1e+15, got -5");
  CHECK(Bad(&ParseQueueSettings, "queues", "halfTimeSeconds", 0) ==
        "queues.halfTimeSeconds: expected 1..2592000 seconds, got 0");
  CHECK(Bad(&ParseQueueSettings, "queues", "halfTimeSeconds", "10m") ==
        "queues.halfTimeSeconds: expected a number of seconds");
  CHECK(Bad(&ParseQueueSettings, "queues", "agingIntervalSeconds", -1) ==
        "queues.agingIntervalSeconds: expected 0..2592000 seconds, got -1");
  CHECK(Bad(&ParseQueueSettings, "queues", "planReuseMilliseconds", 60000) ==
        "queues.planReuseMilliseconds: expected 0..10000, got 60000");
  CHECK(Bad(&ParseQueueSettings, "queues", "admittedPlanReuseMilliseconds", -1) ==
        "queues.admittedPlanReuseMilliseconds: expected 0..10000, got -1");
  CHECK(Bad(&ParseQueueSettings, "queues", "halfTime", 3) ==
        "queues.halfTime: unknown field (known: admittedPlanReuseMilliseconds, agingIntervalSeconds, "
        "excessBudget, gpuWeight, halfTimeSeconds, memoryWeightPerGiB, nonPreemptibleLimitFactor, "
        "planReuseMilliseconds)");
}

TEST_CASE("pools settings: the reclaim timeout; the status interval is not the module's",
          "[settings][pools]") {
  absl::StatusOr<PoolsConfig> d = ParsePoolsSettings(Section("pools", {}));
  REQUIRE(d.ok());
  CHECK(d->reclaim_timeout == absl::Minutes(2));
  CHECK(Good(&ParsePoolsSettings, "pools", "reclaimTimeoutSeconds", 45).reclaim_timeout ==
        absl::Seconds(45));
  CHECK(Good(&ParsePoolsSettings, "pools", "reclaimTimeoutSeconds", 0.5).reclaim_timeout ==
        absl::Milliseconds(500));

  CHECK(Bad(&ParsePoolsSettings, "pools", "reclaimTimeoutSeconds", 0) ==
        "pools.reclaimTimeoutSeconds: expected 0.1..86400 seconds, got 0");
  CHECK(Bad(&ParsePoolsSettings, "pools", "reclaimTimeoutSeconds", "soon") ==
        "pools.reclaimTimeoutSeconds: expected a number of seconds");
  CHECK(Bad(&ParsePoolsSettings, "pools", "reclaimTimeout", 3) ==
        "pools.reclaimTimeout: unknown field (known: reclaimTimeoutSeconds)");
  CHECK(Bad(&ParsePoolsSettings, "pools", "statusIntervalSeconds", 10) ==
        "pools.statusIntervalSeconds: unknown field (known: reclaimTimeoutSeconds)");
  // The Pool.status writer takes its field out before handing the section on; the error for
  // another key still lists it.
  const Settings section =
      Section("pools", {{"statusIntervalSeconds", 10}, {"reclaimTimeout", 3}});
  CHECK(ParsePoolsSettings(section.Without("statusIntervalSeconds")).status().message() ==
        "pools.reclaimTimeout: unknown field (known: reclaimTimeoutSeconds, statusIntervalSeconds)");
}

TEST_CASE("gpu settings: quantities as strings or numbers, each bad value, unknown key",
          "[settings][gpu]") {
  absl::StatusOr<GpuConfig> d = ParseGpuSettings(Section("gpu", {}));
  REQUIRE(d.ok());
  CHECK(d->reserved_cpu_per_gpu_milli == 2000);
  CHECK(d->reserved_memory_per_gpu == 8 * kGi);
  CHECK(d->min_cpu_per_gpu_milli == 1000);
  CHECK(d->min_cpu_action == GpuConfig::MinCpuAction::kWarn);

  absl::StatusOr<GpuConfig> g = ParseGpuSettings(Section(
      "gpu", {{"reservedCpuPerGpu", "3"}, {"reservedMemoryPerGpu", "16Gi"}, {"minCpuPerGpu", 0.25},
              {"minCpuPerGpuAction", "reject"}}));
  REQUIRE(g.ok());
  CHECK(g->reserved_cpu_per_gpu_milli == 3000);
  CHECK(g->reserved_memory_per_gpu == 16 * kGi);
  CHECK(g->min_cpu_per_gpu_milli == 250);
  CHECK(g->min_cpu_action == GpuConfig::MinCpuAction::kReject);
  CHECK(Good(&ParseGpuSettings, "gpu", "reservedMemoryPerGpu", int64_t{1} << 30)
            .reserved_memory_per_gpu == kGi);
  CHECK(Good(&ParseGpuSettings, "gpu", "reservedCpuPerGpu", 0).reserved_cpu_per_gpu_milli == 0);
  CHECK(Good(&ParseGpuSettings, "gpu", "minCpuPerGpu", "0.0001").min_cpu_per_gpu_milli == 1);

  CHECK(Bad(&ParseGpuSettings, "gpu", "minCpuPerGpuAction", "ignore") ==
        "gpu.minCpuPerGpuAction: expected \"warn\" or \"reject\"");
  CHECK(Bad(&ParseGpuSettings, "gpu", "minCpuPerGpuAction", true) ==
        "gpu.minCpuPerGpuAction: expected a string, got a boolean");
  CHECK(Bad(&ParseGpuSettings, "gpu", "reservedCpuPerGpu", "-1") ==
        "gpu.reservedCpuPerGpu: expected 0 (off) or more, got -1");
  CHECK(Bad(&ParseGpuSettings, "gpu", "reservedMemoryPerGpu", -1024) ==
        "gpu.reservedMemoryPerGpu: expected 0 (off) or more, got -1024");
  CHECK(Bad(&ParseGpuSettings, "gpu", "minCpuPerGpu", true) ==
        "gpu.minCpuPerGpu: expected a quantity (string or number), got a boolean");
  CHECK(Bad(&ParseGpuSettings, "gpu", "reservedCpuPerGpu", "2000000") ==
        "gpu.reservedCpuPerGpu: expected at most 1000000 cores");
  CHECK(Bad(&ParseGpuSettings, "gpu", "reservedMemoryPerGpu", "2Pi") ==
        "gpu.reservedMemoryPerGpu: expected at most 1Pi");
  CHECK_THAT(Bad(&ParseGpuSettings, "gpu", "minCpuPerGpu", "1K"),
             Catch::Matchers::StartsWith("gpu.minCpuPerGpu: invalid quantity \"1K\""));
  CHECK(Bad(&ParseGpuSettings, "gpu", "reservedCPUPerGpu", "2") ==
        "gpu.reservedCPUPerGpu: unknown field (known: minCpuPerGpu, minCpuPerGpuAction, "
        "reservedCpuPerGpu, reservedMemoryPerGpu)");
}

TEST_CASE("binpack settings: weights replace the defaults; Create checks their range",
          "[settings][binpack]") {
  absl::StatusOr<BinpackConfig> d = ParseBinpackSettings(Section("binpack", {}));
  REQUIRE(d.ok());
  CHECK(d->weights == BinpackConfig{}.weights);

  const BinpackConfig b = Good(&ParseBinpackSettings, "binpack", "weights",
                               Settings::Map({{"nvidia.com/gpu", 8}, {"cpu", 1}}));
  CHECK(b.weights == std::vector<std::pair<std::string, int64_t>>{{"nvidia.com/gpu", 8}, {"cpu", 1}});
  CHECK(Good(&ParseBinpackSettings, "binpack", "weights", Settings::Map({})).weights.empty());

  CHECK(Bad(&ParseBinpackSettings, "binpack", "weights", Settings::Map({{"nvidia.com/gpu", 1.5}})) ==
        "binpack.weights.nvidia.com/gpu: expected an integer");
  CHECK(Bad(&ParseBinpackSettings, "binpack", "weights", Settings::List({})) ==
        "binpack.weights: expected an object, got an array");
  CHECK(Bad(&ParseBinpackSettings, "binpack", "weight", 1) ==
        "binpack.weight: unknown field (known: weights)");

  // The range of a weight is checked once, where the module is made.
  const BinpackConfig big =
      Good(&ParseBinpackSettings, "binpack", "weights", Settings::Map({{"cpu", 2000}}));
  core::ResourceNames names;
  CHECK(BinpackScore::Create(big, names).status().message() ==
        "binpack weight of \"cpu\" is 2000; expected 0..1000");
}

}  // namespace
}  // namespace berth::policy
