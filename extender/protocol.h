#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/objects.h"
#include "core/resources.h"
#include "extender/answer_form.h"
#include "extender/decoded_pod_cache.h"
#include "policy/verdict.h"
#include "simdjson.h"

namespace berth::extender {

// The kube-scheduler extender protocol (k8s.io/kube-scheduler/extender/v1). Wire keys are the Go
// field names (`Pod`, `NodeNames`, ...); request keys are matched case-insensitively, as Go does.
// Decoded values may point into the parsed request: use them before the request buffer goes.

/// ExtenderArgs: the filter and prioritize request.
struct ExtenderArgs {
  core::Pod pod;
  /// True when the nodes came as full objects (`Nodes`, nodeCacheCapable: false).
  bool full_nodes = false;
  /// Candidate node names in input order (both forms).
  std::vector<std::string_view> node_names;
  /// True when every name was checked to be PlainJsonText as it was read (DecodeNodeNamesArgs):
  /// the answers copy them between quotes without looking at them again.
  bool names_plain = false;
  /// Full-object form only: the node objects, parallel to node_names.
  std::vector<simdjson::dom::object> node_objects;
};

/// ExtenderBindingArgs.
struct BindingArgs {
  std::string_view pod_name;
  std::string_view pod_namespace;
  std::string_view pod_uid;
  std::string_view node;
};

/// One node's entry of ExtenderPreemptionArgs (either form).
struct PreemptionCandidate {
  std::string_view node;
  /// (uid, priority if the full pod was given) of each proposed victim, in input order.
  std::vector<std::pair<std::string_view, std::optional<int32_t>>> victims;
  int64_t pdb_violations = 0;
};

/// ExtenderPreemptionArgs.
struct PreemptionArgs {
  core::Pod pod;
  std::vector<PreemptionCandidate> candidates;
};

/// Decodes ExtenderArgs. With `cache`, `body` must be the text `root` was parsed from: a pod
/// whose text the cache remembers is not decoded again, and a decoded one is remembered.
absl::StatusOr<ExtenderArgs> DecodeExtenderArgs(simdjson::dom::element root,
                                                const core::ResourceNames& names,
                                                std::string_view body = {},
                                                DecodedPodCache* cache = nullptr);
/// ExtenderArgs read without parsing the whole body, when it has the form kube-scheduler sends
/// with nodeCacheCapable: true, `{"Pod":{...},"Nodes":null,"NodeNames":["a",...]}`: members in
/// that order, "Nodes" optional, any JSON whitespace, names of plain ASCII without escapes. The
/// pod is taken from `cache` when its text is the one remembered, and otherwise parsed alone
/// (and remembered); the names are read in place, pointing into `body`.
///
/// The answer is exactly DecodeExtenderArgs's for the same body. nullopt for a body in any
/// other form, or one with an error: the caller then parses it whole and calls
/// DecodeExtenderArgs, which reads every form and names every error.
std::optional<ExtenderArgs> DecodeNodeNamesArgs(std::string_view body, const core::ResourceNames& names,
                                                DecodedPodCache* cache);
absl::StatusOr<BindingArgs> DecodeBindingArgs(simdjson::dom::element root);
absl::StatusOr<PreemptionArgs> DecodePreemptionArgs(simdjson::dom::element root,
                                                    const core::ResourceNames& names);

/// ExtenderFilterResult in the form of the question: `NodeNames` for names, `Nodes` (the passing
/// node objects copied from the request) for full objects. `shown`, when not empty, has one
/// entry per verdict: a fitting node with 0 there is left out of the answer (FilterAnswer::kBest).
std::string EncodeFilterResult(const ExtenderArgs& args,
                               const std::vector<policy::NodeVerdict>& verdicts,
                               AnswerForm form = AnswerForm::kShort,
                               std::span<const char> shown = {});
/// HostPriorityList: a bare array with one {"Host", "Score"} per host, in order, integer scores.
/// `hosts_plain`: every host is known to be PlainJsonText (ExtenderArgs::names_plain).
std::string EncodePriorityList(const std::vector<std::string_view>& hosts,
                               const std::vector<int64_t>& scores,
                               AnswerForm form = AnswerForm::kShort, bool hosts_plain = false);
/// ExtenderBindingResult.
std::string EncodeBindingResult(std::string_view error);
/// ExtenderPreemptionResult: always `NodeNameToMetaVictims`.
struct MetaVictims {
  std::string node;
  std::vector<std::string> uids;
  int64_t pdb_violations = 0;
};
std::string EncodePreemptionResult(const std::vector<MetaVictims>& result);
/// `{"Error": message}` for a verb request that could not be decoded.
std::string EncodeVerbError(std::string_view message);

}  // namespace berth::extender
