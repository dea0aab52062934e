#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/compact_string.h"
#include "core/resources.h"

namespace berth::core {

/// Labels or annotations: (key, value) pairs sorted by key, keys unique.
///
/// Stored in one flat buffer, `[u32 key length][key][u32 value length][value]...` in key order,
/// so a node's twenty-odd labels cost one allocation and about half the memory of separate
/// strings. Lookups scan the entries, which is fast at the sizes labels have.
class Labels {
 public:
  Labels() = default;
  /// Sets `key` to `value`, keeping the entries sorted.
  void Set(std::string_view key, std::string_view value);
  /// \return the value of `key`, or nullopt. The view lives until the next Set.
  std::optional<std::string_view> Get(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key).has_value(); }
  /// The entries in key order. The views live until the next Set.
  std::vector<std::pair<std::string_view, std::string_view>> items() const;
  size_t size() const;
  bool empty() const { return data_.empty(); }
  friend bool operator==(const Labels& a, const Labels& b) { return a.data_ == b.data_; }

 private:
  struct Entry {
    std::string_view key;
    std::string_view value;
    size_t begin;  ///< offset of the entry
    size_t end;    ///< offset just past it
  };
  /// Calls fn(entry) for each entry in order until it returns false.
  template <class Fn>
  void Scan(Fn fn) const;

  CompactString data_;
};

/// A node taint (`spec.taints[]`).
struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule or NoExecute
  friend bool operator==(const Taint&, const Taint&) = default;
};

/// What berth keeps of a Kubernetes Node.
struct Node {
  std::string name;
  Labels labels;
  ResourceVector capacity;
  ResourceVector allocatable;
  bool unschedulable = false;
  std::vector<Taint> taints;
  absl::Time creation = absl::InfinitePast();
};

enum class PodPhase : uint8_t { kPending, kRunning, kSucceeded, kFailed, kUnknown };

std::string_view PodPhaseName(PodPhase phase);
std::optional<PodPhase> ParsePodPhase(std::string_view text);
/// Succeeded and Failed pods no longer hold node resources.
inline bool IsTerminal(PodPhase phase) {
  return phase == PodPhase::kSucceeded || phase == PodPhase::kFailed;
}

/// What berth keeps of a Kubernetes Pod: identity, placement, priority, the labels and
/// annotations berth's policies read, and the effective request (see EffectiveRequest).
struct Pod {
  CompactString uid;
  CompactString ns;
  CompactString name;
  CompactString scheduler_name = "default-scheduler";
  CompactString node_name;       // spec.nodeName; empty while not bound
  CompactString nominated_node;  // status.nominatedNodeName
  PodPhase phase = PodPhase::kPending;
  int32_t priority = 0;
  CompactString priority_class;
  absl::Time creation = absl::InfinitePast();
  bool terminating = false;  // metadata.deletionTimestamp is set
  Labels labels;             // only the keys berth reads (see IsBerthKey)
  Labels annotations;        // only the keys berth reads
  ResourceVector request;    // effective request, including one unit of `pods`
  /// Requests of resources no node in berth's model has ever advertised (so no node can
  /// satisfy them), by name, summed over containers. Only verb requests produce these: they
  /// look resource names up instead of adding them to the shared name table.
  std::vector<std::pair<std::string, int64_t>> unknown_requests;

  /// "namespace/name".
  std::string Key() const;
};

/// True for label and annotation keys berth's policies read. The model keeps only these, so
/// that a pod costs a few hundred bytes whatever its metadata carries.
bool IsBerthKey(std::string_view key);

/// Requests of one container, as decoded from `resources.requests`.
struct ContainerRequest {
  ResourceVector requests;
  bool sidecar = false;  // an init container with restartPolicy: Always
};

/// The parts of a pod spec that determine its effective request.
struct PodResourceSpec {
  std::vector<ResourceVector> containers;
  std::vector<ContainerRequest> init_containers;
  /// Pod-level `spec.resources.requests`: (resource, amount) for each resource it sets.
  std::vector<std::pair<ResourceId, int64_t>> pod_level;
  ResourceVector overhead;
};

/// The request kube-scheduler's NodeResourcesFit compares with node allocatable, per resource:
/// max(sum of containers and sidecars, each init container plus the sidecars started before it);
/// a pod-level request replaces it; `spec.overhead` is added. One unit of `pods` is added,
/// because every pod takes one of a node's pod slots.
ResourceVector EffectiveRequest(const PodResourceSpec& spec);

}  // namespace berth::core
