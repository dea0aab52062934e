#include "core/resources.h"

#include <algorithm>

#include "absl/status/status.h"
#include "core/strings.h"
#include "core/checked_math.h"
#include "core/quantity.h"

namespace berth::core {

ResourceNames::ResourceNames() {
  // Pinned ids first, in the order of the k* constants.
  for (std::string_view name : {"cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu"}) {
    (void)Intern(name);
  }
}

absl::StatusOr<ResourceId> ResourceNames::Intern(std::string_view name) {
  if (auto found = Find(name)) return *found;
  if (name.empty() || name.size() > 253 ||
      name.find_first_of(" \t\r\n\"") != std::string_view::npos) {
    return absl::InvalidArgumentError(
        StrCat("invalid resource name \"", name.substr(0, 64), "\""));
  }
  absl::MutexLock lock(&mu_);
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  const size_t n = size_.load(std::memory_order_relaxed);
  if (n >= kMaxResources) {
    return absl::ResourceExhaustedError(StrCat("too many distinct resource names (limit ",
                                                     kMaxResources, "); refusing \"", name, "\""));
  }
  names_[n] = std::string(name);
  ids_.emplace(names_[n], static_cast<ResourceId>(n));
  size_.store(n + 1, std::memory_order_release);
  return static_cast<ResourceId>(n);
}

std::optional<ResourceId> ResourceNames::Find(std::string_view name) const {
  // The well-known names are the common case and need no lock.
  const size_t n = std::min<size_t>(size(), kNumWellKnownResources);
  for (size_t i = 0; i < n; ++i) {
    if (names_[i] == name) return static_cast<ResourceId>(i);
  }
  absl::MutexLock lock(&mu_);
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  return std::nullopt;
}

std::string_view ResourceNames::Name(ResourceId id) const {
  if (id >= size()) return "<unknown-resource>";
  return names_[id];
}

ResourceScale ResourceNames::Scale(ResourceId id) const {
  return id == kCpu ? ResourceScale::kMilli : ResourceScale::kUnit;
}

void ResourceVector::Set(ResourceId id, int64_t value) {
  if (id >= v_.size()) {
    if (value == 0) return;
    v_.resize(id + 1, 0);
  }
  v_[id] = value;
}

bool ResourceVector::IsZero() const {
  return std::all_of(v_.begin(), v_.end(), [](int64_t x) { return x == 0; });
}

void ResourceVector::Add(const ResourceVector& other) {
  if (other.v_.size() > v_.size()) v_.resize(other.v_.size(), 0);
  for (size_t i = 0; i < other.v_.size(); ++i) v_[i] = SaturatingAdd(v_[i], other.v_[i]);
}

void ResourceVector::Sub(const ResourceVector& other) {
  if (other.v_.size() > v_.size()) v_.resize(other.v_.size(), 0);
  for (size_t i = 0; i < other.v_.size(); ++i) v_[i] = SaturatingSub(v_[i], other.v_[i]);
}

void ResourceVector::MaxWith(const ResourceVector& other) {
  if (other.v_.size() > v_.size()) v_.resize(other.v_.size(), 0);
  for (size_t i = 0; i < other.v_.size(); ++i) v_[i] = std::max(v_[i], other.v_[i]);
}

bool ResourceVector::AnyNegative() const {
  return std::any_of(v_.begin(), v_.end(), [](int64_t x) { return x < 0; });
}

bool operator==(const ResourceVector& a, const ResourceVector& b) {
  const size_t n = std::max(a.v_.size(), b.v_.size());
  for (size_t i = 0; i < n; ++i) {
    if (a.Get(static_cast<ResourceId>(i)) != b.Get(static_cast<ResourceId>(i))) return false;
  }
  return true;
}

std::string ResourceVector::DebugString(const ResourceNames& names) const {
  std::string out;
  for (size_t i = 0; i < v_.size(); ++i) {
    if (v_[i] == 0) continue;
    const auto id = static_cast<ResourceId>(i);
    StrAppend(&out, out.empty() ? "" : " ", names.Name(id), "=",
                    FormatAmount(names, id, v_[i]));
  }
  return out.empty() ? "none" : out;
}

std::string FormatAmount(const ResourceNames& names, ResourceId id, int64_t amount) {
  return names.Scale(id) == ResourceScale::kMilli ? FormatMilli(amount) : FormatUnits(amount);
}

}  // namespace berth::core
