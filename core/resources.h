#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/strings.h"

namespace berth::core {

/// Dense index of a resource name ("cpu", "memory", "nvidia.com/gpu", ...).
using ResourceId = uint16_t;

/// Well-known resources have fixed ids, so hot paths and tests can name them directly.
inline constexpr ResourceId kCpu = 0;
inline constexpr ResourceId kMemory = 1;
inline constexpr ResourceId kEphemeralStorage = 2;
inline constexpr ResourceId kPods = 3;
inline constexpr ResourceId kNvidiaGpu = 4;
inline constexpr ResourceId kNumWellKnownResources = 5;

/// How a resource's quantities are turned into integers. kube-scheduler uses `MilliValue()` for
/// cpu and `Value()` (rounded up) for everything else; berth does exactly the same so that its
/// verdicts agree with kube-scheduler's own NodeResourcesFit.
enum class ResourceScale : uint8_t { kMilli, kUnit };

/// The intern table of resource names. Append-only and thread-safe: ids never change once
/// given, so any ResourceVector stays meaningful for the life of the table. The table is capped
/// (kMaxResources) so that hostile input cannot grow it without bound.
class ResourceNames {
 public:
  static constexpr size_t kMaxResources = 256;

  ResourceNames();
  ResourceNames(const ResourceNames&) = delete;
  ResourceNames& operator=(const ResourceNames&) = delete;

  /// \return the id of `name`, adding it if new; an error when the table is full or the name is
  /// not a valid resource name (empty, longer than 253 characters, or containing spaces).
  absl::StatusOr<ResourceId> Intern(std::string_view name);
  /// \return the id of `name` if known.
  std::optional<ResourceId> Find(std::string_view name) const;
  /// \return the name of a known id. Lock-free.
  std::string_view Name(ResourceId id) const;
  ResourceScale Scale(ResourceId id) const;
  /// Number of names interned so far. Lock-free.
  size_t size() const { return size_.load(std::memory_order_acquire); }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ResourceId, StringHash, StringEq> ids_ ABSL_GUARDED_BY(mu_);
  // Written once per slot under mu_ before size_ is published; read lock-free below size_.
  std::array<std::string, kMaxResources> names_;
  std::atomic<size_t> size_{0};
};

/// An amount of every resource, indexed by ResourceId; an absent entry means zero. Values are in
/// the resource's integer unit (millicores for cpu, bytes for memory and storage, counts
/// otherwise). Arithmetic saturates at the int64 range instead of wrapping.
class ResourceVector {
 public:
  ResourceVector() = default;

  int64_t Get(ResourceId id) const { return id < v_.size() ? v_[id] : 0; }
  void Set(ResourceId id, int64_t value);
  /// Number of slots (the highest id set plus one, possibly trailing zeros).
  size_t size() const { return v_.size(); }
  bool IsZero() const;

  /// `this += other` (saturating).
  void Add(const ResourceVector& other);
  /// `this -= other` (saturating).
  void Sub(const ResourceVector& other);
  /// Element-wise max.
  void MaxWith(const ResourceVector& other);
  /// \return true if any entry is negative.
  bool AnyNegative() const;

  friend bool operator==(const ResourceVector& a, const ResourceVector& b);

  /// "cpu=500m memory=1Gi nvidia.com/gpu=2" (non-zero entries only).
  std::string DebugString(const ResourceNames& names) const;

 private:
  absl::InlinedVector<int64_t, 5> v_;
};

/// Formats one amount of a resource the way Kubernetes prints quantities ("1500m", "64Gi", "8").
std::string FormatAmount(const ResourceNames& names, ResourceId id, int64_t amount);

}  // namespace berth::core
