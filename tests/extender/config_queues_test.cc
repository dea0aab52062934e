// The "queues" section of berth's configuration file (SPEC 6.4).

#include <catch2/catch.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/config.h"
#include "tests/testing/config_errors.h"
#include "tests/testing/verbs.h"

namespace berth::extender {
namespace {

using testing::ConfigError;
using testing::Contains;

TEST_CASE("queues config: defaults and values", "[config][queue]") {
  absl::StatusOr<Config> c = ParseConfig("{}", "c.json");
  REQUIRE(c.ok());
  const policy::QueueConfig& d = c->policy.queues;
  CHECK(d.gpu_weight == 8);
  CHECK(d.memory_weight_per_gib == 0.25);
  CHECK(d.half_time == absl::Minutes(10));
  CHECK(d.non_preemptible_limit_factor == 0.2);
  CHECK(d.excess_budget == 0);
  CHECK(d.aging_interval == absl::Minutes(10));
  CHECK(d.plan_reuse == absl::Milliseconds(250));
  CHECK(d.admitted_plan_reuse == absl::Milliseconds(1500));

  c = ParseConfig(R"({"queues": {"gpuWeight": 4, "memoryWeightPerGiB": 0.5, "halfTimeSeconds": 120,
                                 "nonPreemptibleLimitFactor": 0, "excessBudget": 5000,
                                 "agingIntervalSeconds": 0, "planReuseMilliseconds": 50,
                                 "admittedPlanReuseMilliseconds": 2000}})",
                  "c.json");
  REQUIRE(c.ok());
  const policy::QueueConfig& q = c->policy.queues;
  CHECK(q.gpu_weight == 4);
  CHECK(q.memory_weight_per_gib == 0.5);
  CHECK(q.half_time == absl::Minutes(2));
  CHECK(q.non_preemptible_limit_factor == 0);
  CHECK(q.excess_budget == 5000);
  CHECK(q.aging_interval == absl::ZeroDuration());
  CHECK(q.plan_reuse == absl::Milliseconds(50));
  CHECK(q.admitted_plan_reuse == absl::Milliseconds(2000));
}

TEST_CASE("queues config: errors name the file and the field", "[config][queue]") {
  CHECK(Contains(ConfigError(R"({"queues": {"halfTime": 3}})"), "queues.halfTime"));
  CHECK(Contains(ConfigError(R"({"queues": {"gpuWeight": -1}})"), "queues.gpuWeight"));
  CHECK(Contains(ConfigError(R"({"queues": {"gpuWeight": "8"}})"), "expected a number"));
  CHECK(Contains(ConfigError(R"({"queues": {"halfTimeSeconds": 0}})"), "queues.halfTimeSeconds"));
  CHECK(Contains(ConfigError(R"({"queues": {"halfTimeSeconds": "10m"}})"), "expected a number of seconds"));
  CHECK(Contains(ConfigError(R"({"queues": {"excessBudget": -5}})"), "queues.excessBudget"));
  CHECK(Contains(ConfigError(R"({"queues": {"planReuseMilliseconds": 60000}})"), "queues.planReuseMilliseconds"));
  CHECK(Contains(ConfigError(R"({"queues": {"admittedPlanReuseMilliseconds": 20000}})"),
                 "queues.admittedPlanReuseMilliseconds"));
  CHECK(Contains(ConfigError(R"({"queues": 3})"), "queues"));
}

}  // namespace
}  // namespace berth::extender
