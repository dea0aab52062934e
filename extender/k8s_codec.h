#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/quantity.h"
#include "core/resources.h"
#include "extender/json.h"
#include "policy/pools/pools.h"
#include "nlohmann/json.hpp"
#include "simdjson.h"

namespace berth::extender {

/// How decoders turn resource names into ids. No decoder ever adds a name to the shared, capped
/// name table: names are looked up read-only, so refused input leaves no trace there.
/// - kProvisional: objects that may become part of the model (watch events, cluster files,
///   standalone nodes) give a name the table lacks a provisional id from the scope; the model
///   adds the name when it commits the object (core::ClusterModel::Apply).
/// - kLookup: verb requests; a pod's request of a name the table lacks goes to
///   Pod::unknown_requests instead.
enum class NameMode { kProvisional, kLookup };

/// Decodes a Kubernetes `v1.Pod` into what berth keeps (see core::Pod): identity, placement,
/// priority, berth's labels and annotations, and the effective request computed from
/// containers, init containers (sidecars included), pod-level requests and overhead. As the API
/// server does at admission, a container resource with a limit and no request requests the
/// limit. A pod without `metadata.uid` (hand-written standalone input) gets the uid
/// "generated:NAMESPACE/NAME". Where the pod may run goes to Pod::placement (null when it says
/// nothing): `spec.nodeSelector`, `spec.affinity.nodeAffinity.requiredDuringScheduling...`
/// (matchExpressions with In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields on metadata.name
/// with In or NotIn) and `spec.tolerations`, checked as the API server validates them, and Gt/Lt
/// values must be integers. Errors name the field path under `path`.
absl::StatusOr<core::Pod> DecodePod(simdjson::dom::object obj, core::ResourceNameScope& names,
                                    const JsonPath& path,
                                    NameMode mode = NameMode::kProvisional);

/// Decodes a Kubernetes `v1.Node`. `status.allocatable` defaults to `status.capacity`.
absl::StatusOr<core::Node> DecodeNode(simdjson::dom::object obj, core::ResourceNameScope& names,
                                      const JsonPath& path);

/// Decodes one Kubernetes quantity: a string ("500m", "8Gi") or a JSON number.
absl::StatusOr<core::Quantity> DecodeQuantity(simdjson::dom::element el, const JsonPath& path);

/// Decodes a `resources.requests`-style map of resource name -> Quantity (string or number).
/// With NameMode::kLookup, names not in the table are appended to `*unknown` (non-zero amounts
/// only) instead of getting an id. Each amount must fit an int64 in its unit (millicores for
/// cpu, whole units rounded up otherwise: core::AmountOf); one that does not is an error naming
/// the field, never a saturated value.
absl::StatusOr<core::ResourceVector> DecodeResourceList(
    simdjson::dom::object obj, core::ResourceNameScope& names, const JsonPath& path,
    NameMode mode = NameMode::kProvisional,
    std::vector<std::pair<std::string, int64_t>>* unknown = nullptr);

/// Decodes a metav1.LabelSelector: `matchLabels` and `matchExpressions` (operators In, NotIn,
/// Exists, DoesNotExist; In and NotIn need values, the others take none).
absl::StatusOr<core::LabelSelector> DecodeLabelSelector(simdjson::dom::object obj,
                                                        const JsonPath& path);

/// Decodes a `Pool` (berth.io/v1alpha1, or the seed's resource.aibee.cn/v1alpha1: the same
/// fields). An absent `spec.nodeSelector` is the empty selector, which selects every node.
absl::StatusOr<core::Pool> DecodePool(simdjson::dom::object obj, const JsonPath& path);

/// Decodes a `Queue` (berth.io/v1alpha1): `spec.weight` (> 0, default 1),
/// `spec.nonPreemptibleLimitFactor` and `spec.excessBudget` (>= 0, optional). The CRD's schema
/// checks these too; berth checks again rather than trust it.
absl::StatusOr<core::Queue> DecodeQueue(simdjson::dom::object obj, const JsonPath& path);

/// Decodes a PodGroup of either CRD (`source` says which; it comes from the apiVersion):
/// `spec.minMember` (int32 >= 0; absent: 1, see core::PodGroup), `spec.minResources`,
/// and for scheduler-plugins `spec.scheduleTimeoutSeconds` (int32 >= 0; Volcano has none, and
/// the field is ignored on a Volcano PodGroup). A missing namespace is "default".
absl::StatusOr<core::PodGroup> DecodePodGroup(simdjson::dom::object obj,
                                              core::PodGroupSource source,
                                              core::ResourceNameScope& names,
                                              const JsonPath& path);

/// Decodes a scheduling.k8s.io/v1 `PriorityClass`: `value` (required, int32), `globalDefault`,
/// `preemptionPolicy` (PreemptLowerPriority, the default, or Never).
absl::StatusOr<core::PriorityClass> DecodePriorityClass(simdjson::dom::object obj,
                                                        const JsonPath& path);

/// Decodes one object of any kind berth ingests into the model event it stands for. The kind
/// and apiVersion choose the decoder:
///
///   Node, Pod                v1
///   Pool                     berth.io/v1alpha1 or resource.aibee.cn/v1alpha1
///   Queue                    berth.io/v1alpha1
///   PodGroup                 scheduling.x-k8s.io/v1alpha1 or scheduling.volcano.sh/v1beta1
///   PriorityClass            scheduling.k8s.io/v1
///
/// An object without `apiVersion` is read as the first version listed for its kind (hand-written
/// standalone input often omits it); one with an apiVersion not listed for its kind is refused,
/// so that, say, a Volcano Queue is never read as berth's.
/// \param deleted true for a watch DELETED event; a Pod in phase Succeeded/Failed stays an
/// upsert (it frees its node's resources but remains an API object until deleted). Deletes of
/// pools, queues, PodGroups and PriorityClasses read only the identity (metadata.name and, for
/// PodGroups, metadata.namespace): the last state of a deleted object need not be valid.
/// \param kind_hint, api_version_hint the item kind and apiVersion of a typed list (PodList,
/// PoolList...), whose items may omit both. An object's own fields win; `api_version_hint`
/// applies only to an object of kind `kind_hint`.
absl::StatusOr<core::ModelEvent> DecodeObjectEvent(simdjson::dom::object obj, bool deleted,
                                                   const core::ResourceNames& names,
                                                   const JsonPath& path,
                                                   std::string_view kind_hint = {},
                                                   std::string_view api_version_hint = {});

/// Decodes watch events: one `{"type": "ADDED|MODIFIED|DELETED", "object": {...}}` or an array
/// of them. Either every event decodes, or the first error is returned and nothing is applied.
absl::StatusOr<std::vector<core::ModelEvent>> DecodeWatchEvents(
    simdjson::dom::element root, const core::ResourceNames& names);

/// Decodes a Kubernetes list into upsert events: a `List` (what `kubectl get nodes,pods -o json`
/// prints, and what /debug/snapshot prints), whose items carry their kind, or a typed list of a
/// kind DecodeObjectEvent reads (`NodeList`, `PodList`, `PoolList`, `QueueList`,
/// `PodGroupList`, `PriorityClassList`), whose items take kind and apiVersion from the list
/// when they lack them.
absl::StatusOr<std::vector<core::ModelEvent>> DecodeList(simdjson::dom::element root,
                                                         const core::ResourceNames& names);

/// Encodes what berth keeps of a node or pod as a Kubernetes object that DecodeNode/DecodePod
/// read back to the same value (the snapshot round trip). A pod's effective request is written
/// as the request of one container named "main"; its placement as nodeSelector, required node
/// affinity and tolerations.
nlohmann::json EncodeNode(const core::Node& node, const core::ResourceNames& names);
nlohmann::json EncodePod(const core::Pod& pod, const core::ResourceNames& names);
/// Encode the other kinds the same way: Kubernetes JSON that the decoders above read back to an
/// equal value. Pools are written as berth.io/v1alpha1 whatever apiVersion they came as;
/// a PodGroup keeps its CRD (PodGroup::source).
nlohmann::json EncodeLabelSelector(const core::LabelSelector& selector);
nlohmann::json EncodePool(const core::Pool& pool);
nlohmann::json EncodeQueue(const core::Queue& queue);
nlohmann::json EncodePodGroup(const core::PodGroup& group, const core::ResourceNames& names);
nlohmann::json EncodePriorityClass(const core::PriorityClass& pc);
/// A resource vector as a Kubernetes ResourceList ({"cpu": "500m", ...}); zero entries omitted.
nlohmann::json EncodeResourceList(const core::ResourceVector& v, const core::ResourceNames& names);

/// RFC 3339 text of a time, or null for InfinitePast.
nlohmann::json EncodeTime(absl::Time t);

/// Pool statistics as GET /debug/pools and Pool.status (kube::PoolStatusWriter) show them:
/// `flags` and the rows `capacity`, `allocatable`, `used`, `shared`, `borrowed`, `pending`. Every
/// row has the same keys whatever the amounts: `cpu`, `nvidia.com/gpu`, `memory`,
/// `ephemeral-storage` (quantity strings, "0" for none) and `nodes`, `pods` (integers).
nlohmann::json EncodePoolStats(const policy::PoolStats& stats, const core::ResourceNames& names);

}  // namespace berth::extender
