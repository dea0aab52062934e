// How a module's settings reach it: the registry knows which module reads which configuration
// section, and a module PolicyConfig has no field for finds its parsed settings in
// PolicyConfig::sections.

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/pipeline.h"
#include "policy/policy.h"
#include "policy/registry.h"
#include "policy/settings.h"

namespace berth::policy {
namespace {

/// A score module with one setting, as a new module would be written.
struct TiltSettings {
  int64_t bias = 3;
};

absl::StatusOr<TiltSettings> ParseTiltSettings(const Settings& section) {
  if (absl::Status s = CheckKeys(section, {"bias"}); !s.ok()) return s;
  TiltSettings out;
  double bias = static_cast<double>(out.bias);
  if (absl::Status s = ReadNumber(section, "bias", 0, 10, &bias); !s.ok()) return s;
  out.bias = static_cast<int64_t>(bias);
  return out;
}

class TiltScore final : public ScorePlugin {
 public:
  explicit TiltScore(TiltSettings settings) : settings_(settings) {}
  std::string_view Name() const override { return "tilt"; }
  int64_t Score(const CycleContext&, const core::NodeState&) const override {
    return settings_.bias;
  }

 private:
  TiltSettings settings_;
};

/// The default registry with "tilt" added; `*built` receives the settings its factory got.
Registry WithTilt(TiltSettings* built) {
  Registry r = BuildDefaultRegistry();
  REQUIRE(r.RegisterSettings("tilt", &ParseTiltSettings).ok());
  REQUIRE(r.Register<TiltScore>("tilt", [built](const BuildContext& ctx)
                                            -> absl::StatusOr<std::unique_ptr<TiltScore>> {
                absl::StatusOr<TiltSettings> s = ctx.config.Section<TiltSettings>("tilt");
                if (!s.ok()) return s.status();
                *built = *s;
                return std::make_unique<TiltScore>(*s);
              }).ok());
  return r;
}

TEST_CASE("Registry: the default modules read the gpu, gangs, queues, pools and binpack sections",
          "[registry][settings]") {
  CHECK(BuildDefaultRegistry().SettingsNames() ==
        std::vector<std::string>{"binpack", "gangs", "gpu", "pools", "queues"});

  PolicyConfig c;
  const Registry r = BuildDefaultRegistry();
  REQUIRE(r.ParseSettings("gangs",
                          Settings::Map({{"scheduleTimeoutSeconds", 5}}).At("gangs"), &c)
              .ok());
  CHECK(c.gangs.schedule_timeout == absl::Seconds(5));
  REQUIRE(r.ParseSettings("binpack",
                          Settings::Map({{"weights", Settings::Map({{"cpu", 7}})}}).At("binpack"),
                          &c)
              .ok());
  CHECK(c.binpack.weights == std::vector<std::pair<std::string, int64_t>>{{"cpu", 7}});
  // The module's own error comes back as it is.
  CHECK(r.ParseSettings("queues", Settings::Map({{"gpuWeight", "8"}}).At("queues"), &c)
            .message() == "queues.gpuWeight: expected a number");

  const absl::Status unknown = r.ParseSettings("tilt", Settings::Map({}).At("tilt"), &c);
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(unknown.message() == "no module reads settings section \"tilt\"");
}

TEST_CASE("Registry: a section is registered once", "[registry][settings]") {
  Registry r = BuildDefaultRegistry();
  const absl::Status twice = r.RegisterSettings("gangs", &PolicyConfig::gangs, &ParseGangSettings);
  CHECK(twice.code() == absl::StatusCode::kAlreadyExists);
  CHECK(twice.message() == "settings section \"gangs\" registered twice");
}

TEST_CASE("Registry: a new module's settings reach its factory through PolicyConfig::sections",
          "[registry][settings]") {
  TiltSettings built{.bias = -1};
  const Registry r = WithTilt(&built);
  PolicyConfig c;
  c.scores.emplace_back("tilt", 1);
  core::ResourceNames names;

  SECTION("absent section: the defaults") {
    REQUIRE(r.Build(c, names).ok());
    CHECK(built.bias == 3);
  }
  SECTION("the section as parsed") {
    REQUIRE(r.ParseSettings("tilt", Settings::Map({{"bias", 7}}).At("tilt"), &c).ok());
    REQUIRE(r.Build(c, names).ok());
    CHECK(built.bias == 7);
  }
  SECTION("errors name the field") {
    CHECK(r.ParseSettings("tilt", Settings::Map({{"bias", 11}}).At("tilt"), &c).message() ==
          "tilt.bias: expected 0..10, got 11");
    CHECK(r.ParseSettings("tilt", Settings::Map({{"tilts", 1}}).At("tilt"), &c).message() ==
          "tilt.tilts: unknown field (known: bias)");
    CHECK(c.sections.empty());
  }
  SECTION("a factory that asks for another type gets an error, not a wrong value") {
    c.sections["tilt"] = std::string("not TiltSettings");
    absl::StatusOr<std::unique_ptr<Pipeline>> p = r.Build(c, names);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().message() ==
          "policy.scores: module \"tilt\": settings of section \"tilt\" have another type");
  }
}

}  // namespace
}  // namespace berth::policy
