#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/settings.h"

namespace berth::policy {

/// Bin packing that minimises lost opportunity (seed 001): prefer the node the pod fills best.
///
/// Lost opportunity of placing a pod on a node is the room the node has left afterwards, which
/// may go unused because later pods do not fit into it. For each weighted resource r the node
/// advertises, berth takes the share of r that would be in use after the placement,
/// (requested + in-flight + pod) / allocatable, and scores the weighted mean of those shares on
/// 0..10. A node the pod fills exactly scores 10. Resources the pod does not request still count:
/// a CPU-only pod on an idle GPU node leaves its GPUs idle, which lowers that node's score, so
/// CPU-only work drifts towards CPU nodes. Integer arithmetic only (shares in 1/10000).
class BinpackScore final : public ScorePlugin {
 public:
  static absl::StatusOr<std::unique_ptr<BinpackScore>> Create(const BinpackConfig& config,
                                                              core::ResourceNames& names);
  std::string_view Name() const override { return "binpack"; }
  int64_t Score(const CycleContext& ctx, const core::NodeState& node) const override;
  /// The unrounded score in 1/10000 of a score point (0..100000: 75000 is 7.5), for explanations
  /// and tests.
  int64_t FineScore(const CycleContext& ctx, const core::NodeState& node) const;

 private:
  explicit BinpackScore(std::vector<std::pair<core::ResourceId, int64_t>> weights);
  /// Up to this many weighted resources, the mean divides by the total weight's inverse.
  static constexpr size_t kSubsetBits = 8;
  std::vector<std::pair<core::ResourceId, int64_t>> weights_;
  /// core::Inverse of the total weight of each subset of weights_ (bit i: weights_[i]), for
  /// the subset a node advertises; empty beyond kSubsetBits weights.
  std::vector<float> subset_inverse_;
};

/// Reads the "binpack" section: {"weights": {RESOURCE: INTEGER, ...}} replaces the default
/// weights (Create checks their range and names).
absl::StatusOr<BinpackConfig> ParseBinpackSettings(const Settings& section);

}  // namespace berth::policy
