#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace berth::policy {

/// Settings of the binpack score module.
struct BinpackConfig {
  /// Weight of each resource in the lost-opportunity score; resources not listed do not count.
  std::vector<std::pair<std::string, int64_t>> weights = {
      {"cpu", 1}, {"memory", 1}, {"nvidia.com/gpu", 4}};
};

/// Which policy modules run for each verb, with their settings. Names refer to the registry
/// (BuildDefaultRegistry); order matters for filters (the first failing rule is reported).
struct PolicyConfig {
  std::vector<std::string> filters = {"resource-fit"};
  /// (module, weight); the combined score is the weighted mean, so it stays in [0, kMaxScore].
  std::vector<std::pair<std::string, int64_t>> scores = {{"binpack", 1}};
  std::vector<std::string> preempt = {"resource-fit"};
  std::vector<std::string> admission;
  std::vector<std::string> order;
  BinpackConfig binpack;
};

}  // namespace berth::policy
