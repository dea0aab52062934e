// The "events" section of berth's configuration file.

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

TEST_CASE("events config: defaults, values and errors", "[config][events]") {
  absl::StatusOr<Config> c = ParseConfig("{}", "c.json");
  REQUIRE(c.ok());
  CHECK(c->events_repeat_after == absl::Minutes(5));
  CHECK(c->events_min_interval == absl::Seconds(10));
  CHECK(c->events_max_per_second == 20);
  c = ParseConfig(R"({"events": {"repeatAfterSeconds": 60, "minIntervalSeconds": 0, "maxPerSecond": 5}})",
                  "c.json");
  REQUIRE(c.ok());
  CHECK(c->events_repeat_after == absl::Minutes(1));
  CHECK(c->events_min_interval == absl::ZeroDuration());
  CHECK(c->events_max_per_second == 5);
  CHECK(Contains(ConfigError(R"({"events": {"repeatAfter": 1}})"), "events.repeatAfter"));
  CHECK(Contains(ConfigError(R"({"events": {"repeatAfterSeconds": 0}})"), "events.repeatAfterSeconds"));
  CHECK(Contains(ConfigError(R"({"events": {"maxPerSecond": -1}})"), "events.maxPerSecond"));
}

}  // namespace
}  // namespace berth::extender
