#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

struct PodPlacement;  // core/placement.h

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
  /// status.startTime: when the kubelet accepted the pod (standalone mode: when berth bound it).
  /// InfinitePast while unknown. A pod's lifetime (berth.io/lifetime) runs from here.
  absl::Time started = absl::InfinitePast();
  /// spec.activeDeadlineSeconds: the kubelet ends the pod this long after its start. 0: none.
  /// The ETA forecast reads it as an upper bound of the pod's run time.
  int64_t active_deadline_seconds = 0;
  bool terminating = false;  // metadata.deletionTimestamp is set
  Labels labels;             // only the keys berth reads (see IsBerthKey)
  Labels annotations;        // only the keys berth reads
  ResourceVector request;    // effective request, including one unit of `pods`
  /// Requests of resources no node in berth's model has ever advertised (so no node can
  /// satisfy them), by name, summed over containers. Only verb requests produce these: they
  /// look resource names up instead of adding them to the shared name table.
  std::vector<std::pair<std::string, int64_t>> unknown_requests;
  /// Where the pod may run, as kube-scheduler's NodeAffinity and TaintToleration filters read
  /// it: nodeSelector, required node affinity, tolerations (see core/placement.h and
  /// PlacementAllows). Null when the pod has none of these, as most of 100k+ pods do, so that
  /// they pay only for the pointer. Immutable, so copies of a pod share it.
  std::shared_ptr<const PodPlacement> placement;

  /// "namespace/name".
  std::string Key() const;
  /// Every field equal; placements compared by value.
  friend bool operator==(const Pod& a, const Pod& b);
};

// ---- the kinds policies read: Pool, Queue, PodGroup, PriorityClass ---------------------------
//
// Few of these exist (tens, not thousands), so they are plain structs with std::strings.

/// Operators of a label selector requirement (metav1.LabelSelectorOperator). Gt and Lt exist
/// only in node selectors (NodeSelectorRequirement), not here, as in Kubernetes.
enum class SelectorOp : uint8_t { kIn, kNotIn, kExists, kDoesNotExist };

std::string_view SelectorOpName(SelectorOp op);
/// \return the operator spelled exactly as Kubernetes spells it ("In", "NotIn", "Exists",
/// "DoesNotExist"), or nullopt.
std::optional<SelectorOp> ParseSelectorOp(std::string_view text);

/// One `matchExpressions[]` entry: {key, operator, values}.
struct SelectorRequirement {
  std::string key;
  SelectorOp op = SelectorOp::kExists;
  std::vector<std::string> values;

  /// True if `labels` satisfy this requirement. NotIn and DoesNotExist match a label set that
  /// lacks the key, as Kubernetes' selectors do.
  bool Matches(const Labels& labels) const;
  friend bool operator==(const SelectorRequirement&, const SelectorRequirement&) = default;
};

/// What Kubernetes requires of a requirement: a non-empty key; In and NotIn with at least one
/// value; Exists and DoesNotExist with none. The message says what is wrong ("operator In needs
/// at least one value"); callers prefix where it was found.
absl::Status ValidateRequirement(const SelectorRequirement& req);

/// A metav1.LabelSelector: matchLabels (every key=value must hold) AND matchExpressions (every
/// requirement must hold).
///
/// An empty selector (no matchLabels, no matchExpressions) matches every label set: that is what
/// metav1.LabelSelectorAsSelector makes of `{}`, and Pools rely on it (a Pool whose
/// `spec.nodeSelector` is empty or absent selects every node). Kubernetes' nil selector, which
/// matches nothing, has no representation here: Pool decoding maps an absent selector to the
/// empty one.
struct LabelSelector {
  Labels match_labels;
  std::vector<SelectorRequirement> match_expressions;

  bool empty() const { return match_labels.empty() && match_expressions.empty(); }
  bool Matches(const Labels& labels) const;
  /// ValidateRequirement over every expression, naming "matchExpressions[i]" in the message.
  absl::Status Validate() const;
  /// Kubernetes' own string form ("pool=demo,gpu in (a100,h100),!spot"), for logs and tables;
  /// empty for the empty selector.
  std::string DebugString() const;
  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;
};

/// A resource pool (SPEC 4, 6.1): `Pool` of berth.io/v1alpha1, cluster-scoped. The nodes its
/// selector matches belong to it, unless they match another pool too (then the default pool).
/// The `default` pool always exists conceptually; the model does not hold one for it.
struct Pool {
  std::string name;
  LabelSelector node_selector;
  bool disable_preemption = false;
  bool disable_borrowing = false;
  bool disable_sharing = false;
  absl::Time creation = absl::InfinitePast();
  friend bool operator==(const Pool&, const Pool&) = default;
};

/// A fair-share queue (SPEC 4, 6.4): `Queue` of berth.io/v1alpha1, cluster-scoped. The `default`
/// queue (weight 1) always exists conceptually; the model does not hold one for it.
struct Queue {
  std::string name;
  double weight = 1;  ///< > 0
  /// How far the queue's non-preemptible usage may exceed its fair share (>= 0); unset: the
  /// configured default.
  std::optional<double> non_preemptible_limit_factor;
  /// Resource-minutes that jobs with a lifetime may draw on (>= 0); unset: no budget of its own.
  std::optional<double> excess_budget;
  absl::Time creation = absl::InfinitePast();
  friend bool operator==(const Queue&, const Queue&) = default;
};

/// Which CRD a PodGroup came from; they differ in apiVersion, membership key and fields.
enum class PodGroupSource : uint8_t {
  /// scheduling.x-k8s.io/v1alpha1; members carry the label scheduling.x-k8s.io/pod-group.
  kSchedulerPlugins,
  /// scheduling.volcano.sh/v1beta1; members carry the annotation scheduling.k8s.io/group-name.
  kVolcano,
};

/// A gang (SPEC 4, 6.2): a namespaced PodGroup of either CRD.
struct PodGroup {
  std::string ns;
  std::string name;
  /// Members that must be placeable together (>= 0). Both CRDs declare it `omitempty`, so an
  /// absent field reaches Go code as 0; berth reads an absent field as 1 instead, a gang of one,
  /// which places each pod on its own like a plain pod (what 0 amounts to as well) without a
  /// special case for an empty gang.
  int32_t min_member = 1;
  /// scheduler-plugins' `spec.scheduleTimeoutSeconds`; unset: the configured default (Volcano's
  /// CRD has no such field).
  std::optional<int32_t> schedule_timeout_seconds;
  ResourceVector min_resources;
  /// The annotations berth reads (berth.io/freeze-window), as for pods (IsBerthKey).
  Labels annotations;
  absl::Time creation = absl::InfinitePast();
  PodGroupSource source = PodGroupSource::kSchedulerPlugins;

  /// "namespace/name".
  std::string Key() const;
  friend bool operator==(const PodGroup&, const PodGroup&) = default;
};

/// A scheduling.k8s.io/v1 PriorityClass (cluster-scoped). Pods carry their resolved priority in
/// `spec.priority`; policies read the class for its preemption policy and global default.
struct PriorityClass {
  std::string name;
  int32_t value = 0;
  bool global_default = false;
  /// "PreemptLowerPriority" (Kubernetes' default) or "Never".
  std::string preemption_policy = "PreemptLowerPriority";
  absl::Time creation = absl::InfinitePast();
  friend bool operator==(const PriorityClass&, const PriorityClass&) = default;
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
///
/// Exact: when a sum (containers, sidecars, an init container with the sidecars before it,
/// overhead) does not fit an int64, the error (OutOfRange) says which sum and which resource
/// (named by `names` when given), and no request is made up.
absl::StatusOr<ResourceVector> EffectiveRequest(const PodResourceSpec& spec,
                                                const ResourceNameScope* names = nullptr);

}  // namespace berth::core
