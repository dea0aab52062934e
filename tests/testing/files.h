#pragma once

#include <filesystem>
#include <string>

namespace berth::testing {

/// The whole content of a file; fails the running test (naming the path) if it cannot be read.
std::string ReadTestFile(const std::filesystem::path& path);

/// The whole content of a file in the kube-scheduler fixtures directory (BERTH_FIXTURES_DIR).
std::string ReadFixture(const std::string& name);

}  // namespace berth::testing
