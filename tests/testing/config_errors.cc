#include "tests/testing/config_errors.h"

#include "absl/status/statusor.h"
#include "catch2/catch.hpp"
#include "extender/config.h"

namespace berth::testing {

std::string ConfigError(const std::string& text) {
  const absl::StatusOr<extender::Config> c = extender::ParseConfig(text, "c.json");
  INFO(text);
  REQUIRE_FALSE(c.ok());
  return std::string(c.status().message());
}

}  // namespace berth::testing
