#pragma once

// The placement constraints of a pod that kube-scheduler's in-tree filters NodeUnschedulable,
// NodeAffinity and TaintToleration check, and the check itself, so that berth's own planning
// (gang placement, pool room, reclaim) agrees with kube-scheduler about where a pod may go.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/objects.h"

namespace berth::core {

/// Operators of a node selector requirement (v1.NodeSelectorOperator). Gt and Lt compare the
/// node's label value, read as a base-10 int64, with the requirement's one value.
enum class NodeSelectorOp : uint8_t { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };

std::string_view NodeSelectorOpName(NodeSelectorOp op);
/// \return the operator spelled exactly as Kubernetes spells it, or nullopt.
std::optional<NodeSelectorOp> ParseNodeSelectorOp(std::string_view text);

/// Parses an integer as Go's strconv.ParseInt(text, 10, 64) does: an optional sign, then
/// decimal digits only, in the int64 range; else nullopt.
std::optional<int64_t> ParseGoInt64(std::string_view text);

/// One `matchExpressions[]` or `matchFields[]` entry of a node selector term.
struct NodeSelectorRequirement {
  std::string key;
  NodeSelectorOp op = NodeSelectorOp::kExists;
  std::vector<std::string> values;
  /// Gt and Lt: values[0] as an integer.
  int64_t number = 0;
  /// Gt and Lt: false when values[0] is not an integer. The API server accepts such a pod
  /// (it checks only that there is one value); kube-scheduler's selector fails to parse it, so
  /// the requirement matches no node. berth keeps the pod (it may hold capacity) and does the
  /// same.
  bool number_ok = true;

  /// True if a node whose value of `key` is `value` (nullopt: no such key) satisfies this
  /// requirement. NotIn and DoesNotExist match an absent key; Gt and Lt need a present key
  /// whose value is an integer, as Kubernetes' labels.Requirement does.
  bool Matches(std::optional<std::string_view> value) const;
  friend bool operator==(const NodeSelectorRequirement&, const NodeSelectorRequirement&) = default;
};

/// The only field `matchFields` may select (v1 validation: metadata.name with In or NotIn).
inline constexpr std::string_view kNodeNameField = "metadata.name";

/// A v1.NodeSelectorTerm: every requirement must hold. A term with no requirements matches no
/// node (Kubernetes: "nil or empty term selects no objects").
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;  ///< on the node's labels
  std::vector<NodeSelectorRequirement> match_fields;       ///< on kNodeNameField only

  bool empty() const { return match_expressions.empty() && match_fields.empty(); }
  bool Matches(const Node& node) const;
  friend bool operator==(const NodeSelectorTerm&, const NodeSelectorTerm&) = default;
};

enum class TolerationOp : uint8_t { kEqual, kExists };

/// A pod toleration (`spec.tolerations[]`). Kubernetes' Toleration.ToleratesTaint: the effect
/// matches when empty or equal; the key when empty or equal; then Exists matches any value and
/// Equal needs the same value. So an empty key with Exists tolerates every taint.
struct Toleration {
  std::string key;
  TolerationOp op = TolerationOp::kEqual;
  std::string value;
  std::string effect;  ///< NoSchedule, PreferNoSchedule, NoExecute, or empty: every effect

  bool Tolerates(const Taint& taint) const;
  friend bool operator==(const Toleration&, const Toleration&) = default;
};

/// What a pod says about where it may run, beyond resources (see Pod::placement).
struct PodPlacement {
  /// `spec.nodeSelector`: every key=value must be a label of the node.
  Labels node_selector;
  /// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`:
  /// some term must match (terms are ORed). nullopt when the pod has no required node affinity.
  ///
  /// A present selector with no terms matches no node. That is what kube-scheduler makes of it
  /// (component-helpers' nodeaffinity.GetRequiredNodeAffinity keeps a non-nil
  /// requiredDuringScheduling..., and a LazyErrorNodeSelector without terms matches nothing),
  /// though API validation refuses such a pod ("must have at least one node selector term"), so
  /// only hand-written input has it.
  std::optional<std::vector<NodeSelectorTerm>> required_terms;
  /// `spec.tolerations`.
  std::vector<Toleration> tolerations;

  /// True when it constrains nothing (a pod with such a placement keeps a null Pod::placement).
  bool empty() const {
    return node_selector.empty() && !required_terms.has_value() && tolerations.empty();
  }
  /// True if some toleration tolerates `taint`.
  bool Tolerates(const Taint& taint) const;
  friend bool operator==(const PodPlacement&, const PodPlacement&) = default;
};

/// A shared, immutable PodPlacement equal to `p`, or null when `p` is empty. Equal placements
/// share one object while some pod holds it: every pod of a workload carries the same one, and
/// the API server's DefaultTolerationSeconds admission gives nearly every pod the same two
/// NoExecute tolerations (not-ready, unreachable), so 100k pods hold a handful of placements
/// instead of one each. Thread-safe.
std::shared_ptr<const PodPlacement> SharePlacement(PodPlacement p);

/// The taint kube-scheduler's NodeUnschedulable checks tolerations against for a cordoned node
/// (key node.kubernetes.io/unschedulable, effect NoSchedule, no value).
inline constexpr std::string_view kUnschedulableTaintKey = "node.kubernetes.io/unschedulable";

/// True when kube-scheduler's filters NodeUnschedulable, TaintToleration and NodeAffinity
/// (nodeSelector and required node affinity) would all accept `node` for `pod`:
///   - a cordoned node (`spec.unschedulable`) only if the pod tolerates the taint
///     node.kubernetes.io/unschedulable:NoSchedule;
///   - every taint with effect NoSchedule or NoExecute tolerated (PreferNoSchedule is only a
///     preference, and no filter reads it);
///   - every nodeSelector pair a label of the node, and, with required node affinity, some term
///     matching the node.
/// When false and `why` is given, it gets the first failing rule in kube-scheduler's filter
/// order, in words: "node is cordoned", "untolerated taint gpu=true:NoSchedule", "node selector
/// pool=a does not match", "required node affinity does not match".
///
/// Cheap on the hot path: on an untainted, schedulable node, a pod without placement or with
/// tolerations only returns at once.
bool PlacementAllows(const Pod& pod, const Node& node, std::string* why = nullptr);

}  // namespace berth::core
