#include "tests/testing/files.h"

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <fstream>
#include <sstream>

namespace berth::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/berth-test-XXXXXX";
  const char* made = ::mkdtemp(tmpl);
  REQUIRE(made != nullptr);
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& rel, std::string_view content) const {
  const std::filesystem::path p = path_ / rel;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  REQUIRE(out.good());
  return p.string();
}

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
