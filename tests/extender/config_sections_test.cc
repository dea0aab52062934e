// Sections of berth's configuration file that belong to policy modules: the file hands each one
// to the module that registered it, so a module added to the registry gets its section without
// any change to the extender.

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "extender/config.h"
#include "policy/registry.h"
#include "policy/settings.h"
#include "tests/testing/config_errors.h"
#include "tests/testing/verbs.h"

namespace berth::extender {
namespace {

using policy::Settings;

struct DialSettings {
  int64_t level = 1;
  bool loud = false;
};

absl::StatusOr<DialSettings> ParseDialSettings(const Settings& section) {
  if (absl::Status s = policy::CheckKeys(section, {"level", "loud"}); !s.ok()) return s;
  DialSettings out;
  std::optional<int64_t> level;
  if (absl::Status s = policy::ReadInt(section, "level", &level); !s.ok()) return s;
  if (level) out.level = *level;
  if (absl::Status s = policy::ReadBool(section, "loud", &out.loud); !s.ok()) return s;
  return out;
}

policy::Registry WithDial() {
  policy::Registry r = policy::BuildDefaultRegistry();
  REQUIRE(r.RegisterSettings("dial", &ParseDialSettings).ok());
  return r;
}

TEST_CASE("config: a module's own section reaches it by the registry alone", "[config]") {
  const policy::Registry r = WithDial();
  absl::StatusOr<Config> c =
      ParseConfig(R"({"dial": {"level": 4, "loud": true}, "gangs": {"releaseIncomplete": true}})",
                  "c.json", r);
  REQUIRE(c.ok());
  absl::StatusOr<DialSettings> dial = c->policy.Section<DialSettings>("dial");
  REQUIRE(dial.ok());
  CHECK(dial->level == 4);
  CHECK(dial->loud);
  CHECK(c->policy.gangs.release_incomplete);

  c = ParseConfig(R"({"dial": {"level": "high"}})", "c.json", r);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == "c.json: dial.level: expected an integer, got a string");
  c = ParseConfig(R"({"dial": {"lvl": 2}})", "c.json", r);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == "c.json: dial.lvl: unknown field (known: level, loud)");
  c = ParseConfig(R"({"dial": [1]})", "c.json", r);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == "c.json: dial: expected an object, got an array");

  // Without the module, its section is an unknown field like any other.
  CHECK(testing::Contains(testing::ConfigError(R"({"dial": {"level": 4}})"),
                          "c.json: dial: unknown field (known: "));
}

TEST_CASE("config: a number out of range names the range and the number given", "[config]") {
  CHECK(testing::ConfigError(R"({"httpThreads": 1})") == "c.json: httpThreads: expected 2..1024, got 1");
  CHECK(testing::ConfigError(R"({"maxRequestBytes": 10})") ==
        "c.json: maxRequestBytes: expected 1024..4294967296, got 10");
  CHECK(testing::ConfigError(R"({"eta": {"intervalSeconds": -1}})") ==
        "c.json: eta.intervalSeconds: expected 1..86400 seconds, got -1");
  CHECK(testing::ConfigError(R"({"kubernetes": {"watchTimeoutSeconds": 0.01}})") ==
        "c.json: kubernetes.watchTimeoutSeconds: expected 0.1..3600 seconds, got 0.01");
}

TEST_CASE("config: the unknown top-level field lists the extender's fields and the modules' "
          "sections", "[config]") {
  CHECK(testing::ConfigError(R"({"gang": {}})") ==
        "c.json: gang: unknown field (known: bindConfirmTimeoutSeconds, binpack, eta, events, "
        "filterAnswer, gangs, gpu, httpThreads, kubernetes, maxRequestBytes, policies, pools, queues, "
        "schedulerName, topology, topologyLevels)");
  // The pools section is shared: its unknown-field error lists the Pool.status writer's field
  // beside the module's.
  CHECK(testing::ConfigError(R"({"pools": {"reclaimTimeout": 3}})") ==
        "c.json: pools.reclaimTimeout: unknown field (known: reclaimTimeoutSeconds, "
        "statusIntervalSeconds)");
}

}  // namespace
}  // namespace berth::extender
