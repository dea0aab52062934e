#include "policy/binpack/binpack.h"

#include <algorithm>

#include "absl/status/status.h"
#include "core/strings.h"
#include "core/checked_math.h"
#include "core/quotient.h"

namespace berth::policy {

absl::StatusOr<std::unique_ptr<BinpackScore>> BinpackScore::Create(const BinpackConfig& config,
                                                                   core::ResourceNames& names) {
  std::vector<std::pair<core::ResourceId, int64_t>> weights;
  for (const auto& [name, weight] : config.weights) {
    if (weight < 0 || weight > 1000) {
      return absl::InvalidArgumentError(StrCat("binpack weight of \"", name, "\" is ", weight,
                                                     "; expected 0..1000"));
    }
    absl::StatusOr<core::ResourceId> id = names.Intern(name);
    if (!id.ok()) return id.status();
    if (weight > 0) weights.emplace_back(*id, weight);
  }
  return std::unique_ptr<BinpackScore>(new BinpackScore(std::move(weights)));
}

BinpackScore::BinpackScore(std::vector<std::pair<core::ResourceId, int64_t>> weights)
    : weights_(std::move(weights)) {
  if (weights_.size() > kSubsetBits) return;
  // The weight of every subset of the resources a node advertises, and its inverse.
  subset_inverse_.resize(size_t{1} << weights_.size());
  for (size_t mask = 1; mask < subset_inverse_.size(); ++mask) {
    int64_t total = 0;
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (mask & (size_t{1} << i)) total += weights_[i].second;
    }
    subset_inverse_[mask] = core::Inverse(total);
  }
}

int64_t BinpackScore::FineScore(const CycleContext& ctx, const core::NodeState& node) const {
  __extension__ typedef __int128 Int128;
  constexpr int64_t kScale = 10000;
  // Shares are at most kScale and weights at most 1000 (Create checks), so the sums fit int64.
  int64_t weighted = 0;
  int64_t total = 0;
  size_t advertised = 0;  // bit i: the node advertises weights_[i]'s resource
  for (size_t i = 0; i < weights_.size(); ++i) {
    const auto [id, weight] = weights_[i];
    const int64_t alloc = node.AllocatableOf(id);
    if (alloc <= 0) continue;
    // requested + assumed + reserved (exact, see NodeState::Free) and the pod's request.
    const int64_t used =
        std::max<int64_t>(core::SaturatingAdd(node.InUseOf(id), ctx.pod.request.Get(id)), 0);
    // A node used up (or over-committed) has the whole share. Otherwise the share is below
    // kScale: in 64 bits unless used * kScale overflows (memory beyond ~900 TB), then 128. A
    // well-known resource's allocatable comes with its inverse: a multiplication, not a
    // division, for every candidate (both exact).
    int64_t share = kScale;
    if (used < alloc) {
      int64_t scaled;
      if (__builtin_mul_overflow(used, kScale, &scaled)) {
        share = static_cast<int64_t>(Int128(used) * kScale / alloc);
      } else if (id < core::WellKnownAmounts::kResources) {
        share = core::QuotientByInverse(scaled, alloc, node.room.inverse_allocatable[id]);
      } else {
        share = core::SmallQuotient(scaled, alloc);
      }
    }
    weighted += share * weight;
    total += weight;
    advertised |= size_t{1} << (i % kSubsetBits);
  }
  if (total == 0) return 0;
  // The quotient is at most kMaxScore * kScale, below 2^20.
  if (!subset_inverse_.empty()) {
    return core::QuotientByInverse(weighted * kMaxScore, total, subset_inverse_[advertised]);
  }
  return core::SmallQuotient(weighted * kMaxScore, total);
}

int64_t BinpackScore::Score(const CycleContext& ctx, const core::NodeState& node) const {
  return (FineScore(ctx, node) + 5000) / 10000;
}

absl::StatusOr<BinpackConfig> ParseBinpackSettings(const Settings& section) {
  if (absl::Status s = CheckKeys(section, {"weights"}); !s.ok()) return s;
  BinpackConfig out;
  absl::StatusOr<const Settings*> weights = ReadMap(section, "weights");
  if (!weights.ok()) return weights.status();
  if (*weights == nullptr) return out;
  out.weights.clear();
  for (const auto& [resource, weight] : (*weights)->entries()) {
    if (weight.kind() != Settings::Kind::kInt) return weight.Error("expected an integer");
    out.weights.emplace_back(resource, weight.int_value());
  }
  return out;
}

}  // namespace berth::policy
