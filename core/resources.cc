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

absl::Status ValidateResourceName(std::string_view name) {
  const bool bad_char = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == '"' || c == 0x7f;
  });
  if (name.empty() || name.size() > 253 || bad_char) {
    return absl::InvalidArgumentError(StrCat("invalid resource name \"", name.substr(0, 64), "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceId> ResourceNames::Intern(std::string_view name) {
  if (auto found = Find(name)) return *found;
  const std::string owned(name);
  absl::StatusOr<std::vector<ResourceId>> ids = InternAll(std::span<const std::string>(&owned, 1));
  if (!ids.ok()) return ids.status();
  return ids->front();
}

absl::StatusOr<std::vector<ResourceId>> ResourceNames::InternAll(
    std::span<const std::string> names) {
  for (const std::string& name : names) {
    if (absl::Status s = ValidateResourceName(name); !s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  size_t n = size_.load(std::memory_order_relaxed);
  // First pass: do the new names fit? Nothing is added unless all of them do.
  size_t added = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (ids_.contains(names[i])) continue;
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i) continue;
    if (n + added >= kMaxResources) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(
          StrCat("resource name \"", std::string_view(names[i]).substr(0, 64),
                 "\" cannot be added: berth's table of resource names is full (",
                 kMaxResources, " distinct names, the limit)"));
    }
    ++added;
  }
  std::vector<ResourceId> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    if (auto it = ids_.find(name); it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    names_[n] = name;
    ids_.emplace(names_[n], static_cast<ResourceId>(n));
    out.push_back(static_cast<ResourceId>(n));
    ++n;
    // Readers read names_ lock-free below size_: publish each slot once it is written.
    size_.store(n, std::memory_order_release);
  }
  return out;
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

absl::StatusOr<ResourceId> ResourceNameScope::Resolve(std::string_view name) {
  if (auto id = Find(name)) return *id;
  if (absl::Status s = ValidateResourceName(name); !s.ok()) return s;
  if (provisional_.size() >= kMaxProvisional) {
    return absl::InvalidArgumentError(
        StrCat("too many distinct resource names in one object (more than ", kMaxProvisional,
               " that berth does not know yet)"));
  }
  provisional_.emplace_back(name);
  return static_cast<ResourceId>(kFirstProvisional + provisional_.size() - 1);
}

std::optional<ResourceId> ResourceNameScope::Find(std::string_view name) const {
  if (auto id = table_->Find(name)) return id;
  for (size_t i = 0; i < provisional_.size(); ++i) {
    if (provisional_[i] == name) return static_cast<ResourceId>(kFirstProvisional + i);
  }
  return std::nullopt;
}

std::string_view ResourceNameScope::Name(ResourceId id) const {
  if (IsProvisional(id)) {
    const size_t i = id - kFirstProvisional;
    return i < provisional_.size() ? std::string_view(provisional_[i]) : "<unknown-resource>";
  }
  return table_->Name(id);
}

absl::Status ResolveProvisionalIds(ResourceNames& table, std::span<const std::string> provisional,
                                   std::span<ResourceVector* const> vectors) {
  // Provisional ids carrying a non-zero amount somewhere, in id order.
  std::vector<ResourceId> used;
  for (const ResourceVector* v : vectors) {
    for (size_t i = ResourceNameScope::kFirstProvisional; i < v->size(); ++i) {
      const auto id = static_cast<ResourceId>(i);
      if (v->Get(id) != 0 && std::find(used.begin(), used.end(), id) == used.end()) {
        used.push_back(id);
      }
    }
  }
  bool any_provisional = false;
  for (const ResourceVector* v : vectors) {
    any_provisional = any_provisional || v->size() > ResourceNameScope::kFirstProvisional;
  }
  if (!any_provisional) return absl::OkStatus();
  std::sort(used.begin(), used.end());
  std::vector<std::string> names;
  names.reserve(used.size());
  for (ResourceId id : used) {
    const size_t i = id - ResourceNameScope::kFirstProvisional;
    if (i >= provisional.size()) {
      return absl::InvalidArgumentError(
          StrCat("resource id ", id, " was given provisionally but has no name"));
    }
    names.push_back(provisional[i]);
  }
  absl::StatusOr<std::vector<ResourceId>> ids = table.InternAll(names);
  if (!ids.ok()) return ids.status();
  for (ResourceVector* v : vectors) {
    ResourceVector resolved;
    for (size_t i = 0; i < v->size() && i < ResourceNameScope::kFirstProvisional; ++i) {
      resolved.Set(static_cast<ResourceId>(i), v->Get(static_cast<ResourceId>(i)));
    }
    for (size_t k = 0; k < used.size(); ++k) {
      const int64_t amount = v->Get(used[k]);
      // Two provisional names are never one table name (the scope gives one id per name), so
      // no amount is merged here.
      if (amount != 0) resolved.Set((*ids)[k], amount);
    }
    *v = std::move(resolved);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AmountOf(const Quantity& q, ResourceScale scale) {
  const std::optional<int64_t> amount =
      scale == ResourceScale::kMilli ? q.ExactMilliValue() : q.ExactValue();
  if (amount) return *amount;
  return absl::OutOfRangeError(StrCat(
      "out of range: ", q.DebugString(), " is more than berth can hold (",
      scale == ResourceScale::kMilli ? "9223372036854775807m, about 9.2e15 cores"
                                     : "9223372036854775807 units",
      ")"));
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

bool ResourceVector::TryAdd(const ResourceVector& other, ResourceId* overflow) {
  for (size_t i = 0; i < other.v_.size(); ++i) {
    int64_t sum;
    if (!CheckedAdd(Get(static_cast<ResourceId>(i)), other.v_[i], &sum)) {
      if (overflow != nullptr) *overflow = static_cast<ResourceId>(i);
      return false;
    }
  }
  Add(other);  // every sum fits, so nothing saturates
  return true;
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
