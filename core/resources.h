#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/strings.h"

namespace berth::core {

class Quantity;  // core/quantity.h

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

/// Checks that `name` can be a resource name: not empty, at most 253 characters, no spaces,
/// control characters or quotes. The message quotes the name (cut to 64 characters).
absl::Status ValidateResourceName(std::string_view name);

/// The intern table of resource names. Append-only and thread-safe: ids never change once
/// given, so any ResourceVector stays meaningful for the life of the table. The table is capped
/// (kMaxResources) so that hostile input cannot grow it without bound.
///
/// Only objects the model commits add names (ClusterModel::Apply, through
/// ResolveProvisionalIds); decoders look names up and give names the table lacks provisional
/// ids (ResourceNameScope), so input that is refused never adds a name. When the table is full,
/// an object naming a new resource is refused whole (nothing added) and refusals() counts it.
class ResourceNames {
 public:
  static constexpr size_t kMaxResources = 256;

  ResourceNames();
  ResourceNames(const ResourceNames&) = delete;
  ResourceNames& operator=(const ResourceNames&) = delete;

  /// \return the id of `name`, adding it if new; an error when the table is full or the name is
  /// not a valid resource name (ValidateResourceName).
  absl::StatusOr<ResourceId> Intern(std::string_view name);
  /// Interns every name, all or nothing: when the names new to the table do not all fit, none
  /// is added, refusals() grows by one and the error (ResourceExhausted) names the first name
  /// that did not fit and the limit. \return the ids, in the order of `names`.
  absl::StatusOr<std::vector<ResourceId>> InternAll(std::span<const std::string> names);
  /// How many Intern/InternAll calls were refused because the table was full.
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
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
  std::atomic<uint64_t> refusals_{0};
};

/// Resolves resource names for the decoding of one object without changing the shared table:
/// a name the table holds gets its id; a name it lacks gets a provisional id
/// (kFirstProvisional + i, local to this scope), which ResolveProvisionalIds later turns into
/// a real one when the model commits the object. Not thread-safe; one per object decoded.
class ResourceNameScope {
 public:
  static constexpr ResourceId kFirstProvisional = ResourceNames::kMaxResources;
  /// More new names than the table could ever hold are refused at once.
  static constexpr size_t kMaxProvisional = ResourceNames::kMaxResources;

  explicit ResourceNameScope(const ResourceNames& table) : table_(&table) {}

  const ResourceNames& table() const { return *table_; }
  /// \return the id of `name` (the table's, or a provisional one, given now if new); an error
  /// for an invalid name or past kMaxProvisional new names.
  absl::StatusOr<ResourceId> Resolve(std::string_view name);
  /// \return the id of `name` if the table or this scope already has one.
  std::optional<ResourceId> Find(std::string_view name) const;
  /// Name of a table or provisional id.
  std::string_view Name(ResourceId id) const;
  ResourceScale Scale(ResourceId id) const { return table_->Scale(id); }
  /// The names of the provisional ids, in id order.
  const std::vector<std::string>& provisional() const { return provisional_; }
  std::vector<std::string> TakeProvisional() { return std::move(provisional_); }

 private:
  const ResourceNames* table_;
  std::vector<std::string> provisional_;
};

/// True for an id that ResourceNameScope gave provisionally.
inline bool IsProvisional(ResourceId id) { return id >= ResourceNameScope::kFirstProvisional; }

/// An amount of every resource, indexed by ResourceId; an absent entry means zero. Values are in
/// the resource's integer unit (millicores for cpu, bytes for memory and storage, counts
/// otherwise). Add and Sub saturate at the int64 range instead of wrapping: policies use them on
/// scratch copies. The model's own totals never saturate, because it refuses any change that
/// would take a total past kMaxAmount before making it (see ClusterModel).
class ResourceVector {
 public:
  static constexpr int64_t kMaxAmount = INT64_MAX;

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
  /// `this += other` exactly. \return false, leaving `this` unchanged and setting `*overflow`
  /// (when given) to the first resource whose sum does not fit an int64.
  bool TryAdd(const ResourceVector& other, ResourceId* overflow = nullptr);
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

/// Turns the provisional ids in `vectors` (named by `provisional`, as a ResourceNameScope gave
/// them) into ids of `table`, interning the names that carry a non-zero amount somewhere; a
/// provisional entry of zero is dropped. All or nothing: when the names do not fit in the table
/// (or an id has no name), no vector and no table entry changes and the error says why.
/// What ClusterModel::Apply does to every object before committing it.
absl::Status ResolveProvisionalIds(ResourceNames& table, std::span<const std::string> provisional,
                                   std::span<ResourceVector* const> vectors);

/// The amount a quantity stands for in `scale` (millicores for cpu, whole units rounded up
/// otherwise), exactly; an error ("out of range ...") when it does not fit an int64, instead of
/// the saturated value Quantity::MilliValue() gives.
absl::StatusOr<int64_t> AmountOf(const Quantity& q, ResourceScale scale);

/// Formats one amount of a resource the way Kubernetes prints quantities ("1500m", "64Gi", "8").
std::string FormatAmount(const ResourceNames& names, ResourceId id, int64_t amount);

}  // namespace berth::core
