#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace berth::testing {

/// A fresh directory under /tmp, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  /// Writes `content` to `rel` (creating directories) and returns the absolute path.
  std::string Write(const std::string& rel, std::string_view content) const;

 private:
  std::filesystem::path path_;
};

/// The whole content of a file; fails the running test (naming the path) if it cannot be read.
std::string ReadTestFile(const std::filesystem::path& path);

/// The whole content of a file in the kube-scheduler fixtures directory (BERTH_FIXTURES_DIR).
std::string ReadFixture(const std::string& name);

}  // namespace berth::testing
