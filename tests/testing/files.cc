#include "tests/testing/files.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

namespace berth::testing {

std::string ReadTestFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("reading " << path.string());
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReadFixture(const std::string& name) {
  return ReadTestFile(std::filesystem::path(BERTH_FIXTURES_DIR) / name);
}

}  // namespace berth::testing
