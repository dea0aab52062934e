// The "pools" section of berth's configuration file and the "reclaim" module list.

#include <catch2/catch.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/strings.h"
#include "extender/config.h"
#include "tests/testing/text.h"

namespace berth::extender {
namespace {

using berth::testing::Contains;

absl::StatusOr<Config> ParsePools(const std::string& section) {
  return ParseConfig(StrCat(R"({"pools": )", section, "}"), "c.json");
}

TEST_CASE("pools config: defaults", "[config][pools]") {
  const absl::StatusOr<Config> c = ParseConfig("{}", "c.json");
  REQUIRE(c.ok());
  CHECK(c->policy.pools.reclaim_timeout == absl::Minutes(2));
  CHECK(c->pool_status_interval == absl::Seconds(10));
  CHECK(c->policy.reclaim == std::vector<std::string>{"pools"});
}

TEST_CASE("pools config: values, fractions and 0 for off", "[config][pools]") {
  absl::StatusOr<Config> c = ParsePools(R"({"reclaimTimeoutSeconds": 45, "statusIntervalSeconds": 2.5})");
  REQUIRE(c.ok());
  CHECK(c->policy.pools.reclaim_timeout == absl::Seconds(45));
  CHECK(c->pool_status_interval == absl::Milliseconds(2500));
  c = ParsePools(R"({"statusIntervalSeconds": 0})");
  REQUIRE(c.ok());
  CHECK(c->pool_status_interval == absl::ZeroDuration());
  // Reclaim can be switched off by emptying its module list.
  c = ParseConfig(R"({"policies": {"reclaim": []}})", "c.json");
  REQUIRE(c.ok());
  CHECK(c->policy.reclaim.empty());
}

TEST_CASE("pools config: errors name the file and the field", "[config][pools]") {
  auto error = [](const std::string& text) {
    const absl::StatusOr<Config> c = ParseConfig(text, "c.json");
    INFO(text);
    REQUIRE_FALSE(c.ok());
    return std::string(c.status().message());
  };
  CHECK(Contains(error(R"({"pools": {"reclaimTimeout": 3}})"), "pools.reclaimTimeout"));
  CHECK(Contains(error(R"({"pools": {"reclaimTimeoutSeconds": 0}})"), "pools.reclaimTimeoutSeconds"));
  CHECK(Contains(error(R"({"pools": {"reclaimTimeoutSeconds": "soon"}})"),
                 "pools.reclaimTimeoutSeconds"));
  CHECK(Contains(error(R"({"pools": {"statusIntervalSeconds": -1}})"), "pools.statusIntervalSeconds"));
  CHECK(Contains(error(R"({"pools": []})"), "c.json"));
  CHECK(Contains(error(R"({"policies": {"reclaim": "pools"}})"), "policies.reclaim"));
}

}  // namespace
}  // namespace berth::extender
