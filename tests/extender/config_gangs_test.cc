// The "gangs" and "topology" sections of berth's configuration file.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/config.h"
#include "tests/testing/config_errors.h"
#include "tests/testing/verbs.h"

namespace berth::extender {
namespace {

using testing::ConfigError;
using testing::Contains;

TEST_CASE("gangs config: defaults, values and 0 for no freezing window", "[config][gang]") {
  absl::StatusOr<Config> c = ParseConfig("{}", "c.json");
  REQUIRE(c.ok());
  CHECK(c->policy.gangs.schedule_timeout == absl::Seconds(60));
  CHECK(c->policy.gangs.freeze_window == absl::Seconds(60));
  CHECK_FALSE(c->policy.gangs.release_incomplete);
  CHECK(c->policy.admission == std::vector<std::string>{"gpu-min-cpu", "queue", "gang"});
  CHECK(c->policy.gangs.topology_levels ==
        std::vector<std::string>{"topology.kubernetes.io/zone", "berth.io/spine", "berth.io/leaf"});

  c = ParseConfig(R"({"gangs": {"scheduleTimeoutSeconds": 300, "freezeWindowSeconds": 0,
                                "releaseIncomplete": true}})", "c.json");
  REQUIRE(c.ok());
  CHECK(c->policy.gangs.schedule_timeout == absl::Seconds(300));
  CHECK(c->policy.gangs.freeze_window == absl::ZeroDuration());
  CHECK(c->policy.gangs.release_incomplete);
}

TEST_CASE("topology config: topology.levels, the older topologyLevels, not both", "[config][gang]") {
  absl::StatusOr<Config> c = ParseConfig(R"({"topology": {"levels": ["rack", "row"]}})", "c.json");
  REQUIRE(c.ok());
  CHECK(c->topology_levels == std::vector<std::string>{"rack", "row"});
  CHECK(c->policy.gangs.topology_levels == std::vector<std::string>{"rack", "row"});
  c = ParseConfig(R"({"topologyLevels": ["zone"]})", "c.json");
  REQUIRE(c.ok());
  CHECK(c->policy.gangs.topology_levels == std::vector<std::string>{"zone"});
  CHECK(Contains(ConfigError(R"({"topology": {"levels": ["a"]}, "topologyLevels": ["b"]})"), "not both"));
  CHECK(Contains(ConfigError(R"({"topology": {"level": ["a"]}})"), "topology.level"));
  CHECK(Contains(ConfigError(R"({"topology": {"levels": [""]}})"), "topology.levels"));
}

TEST_CASE("gangs config: errors name the file and the field", "[config][gang]") {
  CHECK(Contains(ConfigError(R"({"gangs": {"timeout": 3}})"), "gangs.timeout"));
  CHECK(Contains(ConfigError(R"({"gangs": {"scheduleTimeoutSeconds": 0}})"), "gangs.scheduleTimeoutSeconds"));
  CHECK(Contains(ConfigError(R"({"gangs": {"freezeWindowSeconds": -5}})"), "gangs.freezeWindowSeconds"));
  CHECK(Contains(ConfigError(R"({"gangs": {"releaseIncomplete": "yes"}})"), "gangs.releaseIncomplete"));
  CHECK(Contains(ConfigError(R"({"gangs": 1})"), "c.json"));
}

}  // namespace
}  // namespace berth::extender
