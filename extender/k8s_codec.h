#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "extender/json.h"
#include "nlohmann/json.hpp"
#include "simdjson.h"

namespace berth::extender {

/// How decoders turn resource names into ids. Objects that become part of the model (watch
/// events, cluster files) intern new names. Verb requests only look names up, so untrusted,
/// high-volume input cannot grow the shared, capped name table; a pod's request of a name no
/// node has advertised goes to Pod::unknown_requests instead.
enum class NameMode { kIntern, kLookup };

/// Decodes a Kubernetes `v1.Pod` into what berth keeps (see core::Pod): identity, placement,
/// priority, berth's labels and annotations, and the effective request computed from
/// containers, init containers (sidecars included), pod-level requests and overhead. As the API
/// server does at admission, a container resource with a limit and no request requests the
/// limit. A pod without `metadata.uid` (hand-written standalone input) gets the uid
/// "generated:NAMESPACE/NAME". Errors name the field path under `path`.
absl::StatusOr<core::Pod> DecodePod(simdjson::dom::object obj, core::ResourceNames& names,
                                    const JsonPath& path, NameMode mode = NameMode::kIntern);

/// Decodes a Kubernetes `v1.Node`. `status.allocatable` defaults to `status.capacity`.
absl::StatusOr<core::Node> DecodeNode(simdjson::dom::object obj, core::ResourceNames& names,
                                      const JsonPath& path);

/// Decodes a `resources.requests`-style map of resource name -> Quantity (string or number).
/// With NameMode::kLookup, names not in the table are appended to `*unknown` (non-zero amounts
/// only) instead of being interned; `unknown` must then be given.
absl::StatusOr<core::ResourceVector> DecodeResourceList(
    simdjson::dom::object obj, core::ResourceNames& names, const JsonPath& path,
    NameMode mode = NameMode::kIntern,
    std::vector<std::pair<std::string, int64_t>>* unknown = nullptr);

/// Decodes one object of any kind berth ingests into the model event it stands for.
/// \param deleted true for a watch DELETED event; a Pod in phase Succeeded/Failed stays an
/// upsert (it frees its node's resources but remains an API object until deleted).
absl::StatusOr<core::ModelEvent> DecodeObjectEvent(simdjson::dom::object obj, bool deleted,
                                                   core::ResourceNames& names,
                                                   const JsonPath& path);

/// Decodes watch events: one `{"type": "ADDED|MODIFIED|DELETED", "object": {...}}` or an array
/// of them. Either every event decodes, or the first error is returned and nothing is applied.
absl::StatusOr<std::vector<core::ModelEvent>> DecodeWatchEvents(simdjson::dom::element root,
                                                                 core::ResourceNames& names);

/// Decodes a Kubernetes list (`List`, `NodeList`, `PodList`: what `kubectl get nodes,pods -o
/// json` prints, and what /debug/snapshot prints) into upsert events.
absl::StatusOr<std::vector<core::ModelEvent>> DecodeList(simdjson::dom::element root,
                                                         core::ResourceNames& names);

/// Encodes what berth keeps of a node or pod as a Kubernetes object that DecodeNode/DecodePod
/// read back to the same value (the snapshot round trip). A pod's effective request is written
/// as the request of one container named "main".
nlohmann::json EncodeNode(const core::Node& node, const core::ResourceNames& names);
nlohmann::json EncodePod(const core::Pod& pod, const core::ResourceNames& names);
/// A resource vector as a Kubernetes ResourceList ({"cpu": "500m", ...}); zero entries omitted.
nlohmann::json EncodeResourceList(const core::ResourceVector& v, const core::ResourceNames& names);

/// RFC 3339 text of a time, or null for InfinitePast.
nlohmann::json EncodeTime(absl::Time t);

}  // namespace berth::extender
