// Test runner: Catch2's main, with berth's logging quieted to warnings (tests assert on replies,
// not on log lines). Set BERTH_TEST_LOG_LEVEL=debug to see them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>

#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  spdlog::level::level_enum level = spdlog::level::warn;
  if (const char* env = std::getenv("BERTH_TEST_LOG_LEVEL")) level = spdlog::level::from_str(env);
  spdlog::set_level(level);
  return Catch::Session().run(argc, argv);
}
