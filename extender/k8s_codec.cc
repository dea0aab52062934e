#include "extender/k8s_codec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <utility>

#include "core/strings.h"
#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
#include "core/checked_math.h"
#include "core/placement.h"
#include "core/quantity.h"

namespace berth::extender {
namespace {

constexpr size_t kMaxNameLength = 253;

absl::StatusOr<absl::Time> OptionalTime(simdjson::dom::object obj, std::string_view key,
                                        const JsonPath& path) {
  absl::StatusOr<std::optional<std::string_view>> s = OptionalString(obj, key, path);
  if (!s.ok()) return s.status();
  if (!s->has_value()) return absl::InfinitePast();
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(**s), &t, &err)) {
    return FieldError(path.Field(key),
                      StrCat("expected an RFC 3339 time such as 2025-03-01T10:00:00Z, got \"",
                                   (*s)->substr(0, 64), "\""));
  }
  return t;
}

// Reads a string map (labels, annotations, nodeSelector). `keep` filters keys.
template <class Keep>
absl::Status DecodeStringMap(simdjson::dom::object parent, std::string_view key,
                             const JsonPath& path, core::Labels* out, Keep keep) {
  absl::StatusOr<std::optional<simdjson::dom::object>> obj = OptionalObject(parent, key, path);
  if (!obj.ok()) return obj.status();
  if (!obj->has_value()) return absl::OkStatus();
  const JsonPath here = path.Field(key);
  for (auto [k, v] : **obj) {
    std::string_view value;
    if (v.get_string().get(value) != simdjson::SUCCESS) {
      return FieldError(here.Field(k), StrCat("expected a string, got ", TypeName(v)));
    }
    if (keep(k)) out->Set(std::string(k), std::string(value));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> RequiredName(simdjson::dom::object meta, const JsonPath& path) {
  absl::StatusOr<std::optional<std::string_view>> name = OptionalString(meta, "name", path);
  if (!name.ok()) return name.status();
  if (!name->has_value() || (*name)->empty()) {
    return FieldError(path.Field("name"), "required: expected a non-empty string");
  }
  if ((*name)->size() > kMaxNameLength) {
    return FieldError(path.Field("name"), "longer than 253 characters");
  }
  return **name;
}

// metadata.name (required) and metadata.creationTimestamp, common to every object kind.
struct ObjectMeta {
  simdjson::dom::object meta;
  std::string_view name;
  absl::Time creation;
};

absl::StatusOr<ObjectMeta> DecodeObjectMeta(simdjson::dom::object obj, const JsonPath& path,
                                            const JsonPath& mpath) {
  absl::StatusOr<std::optional<simdjson::dom::object>> meta = OptionalObject(obj, "metadata", path);
  if (!meta.ok()) return meta.status();
  if (!meta->has_value()) return FieldError(mpath, "required: expected an object");
  absl::StatusOr<std::string_view> name = RequiredName(**meta, mpath);
  if (!name.ok()) return name.status();
  absl::StatusOr<absl::Time> created = OptionalTime(**meta, "creationTimestamp", mpath);
  if (!created.ok()) return created.status();
  return ObjectMeta{**meta, *name, *created};
}

// Requests of one container: `resources.requests`, with limits defaulting missing requests.
absl::StatusOr<core::ResourceVector> ContainerRequests(
    simdjson::dom::object container, core::ResourceNameScope& names, const JsonPath& path,
    NameMode mode, std::vector<std::pair<std::string, int64_t>>* unknown) {
  core::ResourceVector requests;
  absl::StatusOr<std::optional<simdjson::dom::object>> res =
      OptionalObject(container, "resources", path);
  if (!res.ok()) return res.status();
  if (!res->has_value()) return requests;
  const JsonPath rpath = path.Field("resources");
  absl::StatusOr<std::optional<simdjson::dom::object>> req = OptionalObject(**res, "requests", rpath);
  if (!req.ok()) return req.status();
  if (req->has_value()) {
    absl::StatusOr<core::ResourceVector> v =
        DecodeResourceList(**req, names, rpath.Field("requests"), mode, unknown);
    if (!v.ok()) return v.status();
    requests = *std::move(v);
  }
  absl::StatusOr<std::optional<simdjson::dom::object>> lim = OptionalObject(**res, "limits", rpath);
  if (!lim.ok()) return lim.status();
  if (lim->has_value()) {
    // Unknown names among the limits are already in `unknown` when they are requested too;
    // limits-only ones are collected here and kept where no request names them.
    std::vector<std::pair<std::string, int64_t>> unknown_limits;
    absl::StatusOr<core::ResourceVector> limits =
        DecodeResourceList(**lim, names, rpath.Field("limits"), mode, &unknown_limits);
    if (!limits.ok()) return limits.status();
    // Requests the API server would default from limits at admission.
    for (auto [k, v] : **lim) {
      auto id = names.Find(k);
      const bool has_request =
          req->has_value() && (**req).at_key(k).error() == simdjson::SUCCESS;
      if (id && !has_request) requests.Set(*id, limits->Get(*id));
    }
    for (auto& [name, amount] : unknown_limits) {
      const bool has_request =
          req->has_value() && (**req).at_key(name).error() == simdjson::SUCCESS;
      if (!has_request && unknown != nullptr) unknown->emplace_back(std::move(name), amount);
    }
  }
  return requests;
}

// A JSON number (integer or not) as a double.
absl::StatusOr<std::optional<double>> OptionalNumber(simdjson::dom::object obj,
                                                     std::string_view key, const JsonPath& path) {
  std::optional<simdjson::dom::element> el = OptionalField(obj, key);
  if (!el) return std::optional<double>();
  switch (el->type()) {
    case simdjson::dom::element_type::INT64:
      return std::optional<double>(static_cast<double>(el->get_int64().value_unsafe()));
    case simdjson::dom::element_type::UINT64:
      return std::optional<double>(static_cast<double>(el->get_uint64().value_unsafe()));
    case simdjson::dom::element_type::DOUBLE:
      return std::optional<double>(el->get_double().value_unsafe());
    default:
      return FieldError(path.Field(key), StrCat("expected a number, got ", TypeName(*el)));
  }
}

// An int32 field (Go's int32 and *int32), optionally required to be >= 0.
absl::StatusOr<std::optional<int32_t>> OptionalInt32(simdjson::dom::object obj,
                                                     std::string_view key, const JsonPath& path,
                                                     bool non_negative) {
  absl::StatusOr<std::optional<int64_t>> v = OptionalInt(obj, key, path);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return std::optional<int32_t>();
  if (**v < INT32_MIN || **v > INT32_MAX) {
    return FieldError(path.Field(key), StrCat("out of the int32 range, got ", **v));
  }
  if (non_negative && **v < 0) {
    return FieldError(path.Field(key), StrCat("must not be negative, got ", **v));
  }
  return std::optional<int32_t>(static_cast<int32_t>(**v));
}

// The optional `values` string array of a selector requirement, appended to `*out`.
absl::Status DecodeValues(simdjson::dom::object expr, const JsonPath& epath,
                          std::vector<std::string>* out) {
  absl::StatusOr<std::optional<simdjson::dom::array>> values = OptionalArray(expr, "values", epath);
  if (!values.ok()) return values.status();
  if (!values->has_value()) return absl::OkStatus();
  int64_t j = 0;
  for (simdjson::dom::element v : **values) {
    absl::StatusOr<std::string_view> text = AsString(v, epath.Item("values", j++));
    if (!text.ok()) return text.status();
    out->emplace_back(*text);
  }
  return absl::OkStatus();
}

// One `matchExpressions[]` (on labels) or `matchFields[]` (on node fields) entry of a node
// selector term, checked as the API server's validation does.
absl::StatusOr<core::NodeSelectorRequirement> DecodeNodeSelectorRequirement(
    simdjson::dom::element el, const JsonPath& epath, bool field) {
  absl::StatusOr<simdjson::dom::object> expr = AsObject(el, epath);
  if (!expr.ok()) return expr.status();
  core::NodeSelectorRequirement req;
  absl::StatusOr<std::optional<std::string_view>> key = OptionalString(*expr, "key", epath);
  if (!key.ok()) return key.status();
  if (!key->has_value() || (*key)->empty()) {
    return FieldError(epath.Field("key"), field ? "required: expected metadata.name"
                                                : "required: expected a non-empty label key");
  }
  if (field && **key != core::kNodeNameField) {
    return FieldError(epath.Field("key"), StrCat("unsupported field \"", (*key)->substr(0, 64),
                                                 "\"; matchFields may only select metadata.name"));
  }
  req.key = std::string(**key);
  const std::string_view operators =
      field ? "In or NotIn" : "In, NotIn, Exists, DoesNotExist, Gt or Lt";
  absl::StatusOr<std::optional<std::string_view>> op = OptionalString(*expr, "operator", epath);
  if (!op.ok()) return op.status();
  if (!op->has_value()) {
    return FieldError(epath.Field("operator"), StrCat("required: expected ", operators));
  }
  std::optional<core::NodeSelectorOp> parsed = core::ParseNodeSelectorOp(**op);
  if (!parsed || (field && *parsed != core::NodeSelectorOp::kIn &&
                  *parsed != core::NodeSelectorOp::kNotIn)) {
    return FieldError(epath.Field("operator"), StrCat("unsupported operator \"", (*op)->substr(0, 64),
                                                      "\"; expected ", operators));
  }
  req.op = *parsed;
  if (absl::Status st = DecodeValues(*expr, epath, &req.values); !st.ok()) return st;
  const JsonPath vpath = epath.Field("values");
  const std::string_view name = core::NodeSelectorOpName(req.op);
  switch (req.op) {
    case core::NodeSelectorOp::kIn:
    case core::NodeSelectorOp::kNotIn:
      if (field && req.values.size() != 1) {
        return FieldError(vpath, StrCat("operator ", name, " on a field needs exactly one value, got ",
                                        req.values.size()));
      }
      if (req.values.empty()) {
        return FieldError(vpath, StrCat("operator ", name, " needs at least one value"));
      }
      break;
    case core::NodeSelectorOp::kExists:
    case core::NodeSelectorOp::kDoesNotExist:
      if (!req.values.empty()) {
        return FieldError(vpath, StrCat("operator ", name, " takes no values, got ", req.values.size()));
      }
      break;
    case core::NodeSelectorOp::kGt:
    case core::NodeSelectorOp::kLt: {
      if (req.values.size() != 1) {
        return FieldError(vpath, StrCat("operator ", name, " needs exactly one value, got ",
                                        req.values.size()));
      }
      // A value that is not an integer is accepted by the API server and matches no node in
      // kube-scheduler (see NodeSelectorRequirement::number_ok).
      std::optional<int64_t> number = core::ParseGoInt64(req.values[0]);
      req.number = number.value_or(0);
      req.number_ok = number.has_value();
      break;
    }
  }
  return req;
}

// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution into `*out` (left
// unset when absent; see PodPlacement::required_terms for a present one without terms).
absl::Status DecodeRequiredNodeAffinity(
    simdjson::dom::object spec, const JsonPath& spath,
    std::optional<std::vector<core::NodeSelectorTerm>>* out) {
  absl::StatusOr<std::optional<simdjson::dom::object>> affinity =
      OptionalObject(spec, "affinity", spath);
  if (!affinity.ok()) return affinity.status();
  if (!affinity->has_value()) return absl::OkStatus();
  const JsonPath apath = spath.Field("affinity");
  absl::StatusOr<std::optional<simdjson::dom::object>> node_affinity =
      OptionalObject(**affinity, "nodeAffinity", apath);
  if (!node_affinity.ok()) return node_affinity.status();
  if (!node_affinity->has_value()) return absl::OkStatus();
  const JsonPath napath = apath.Field("nodeAffinity");
  constexpr std::string_view kRequired = "requiredDuringSchedulingIgnoredDuringExecution";
  absl::StatusOr<std::optional<simdjson::dom::object>> required =
      OptionalObject(**node_affinity, kRequired, napath);
  if (!required.ok()) return required.status();
  if (!required->has_value()) return absl::OkStatus();
  const JsonPath rpath = napath.Field(kRequired);
  std::vector<core::NodeSelectorTerm> terms;
  absl::StatusOr<std::optional<simdjson::dom::array>> list =
      OptionalArray(**required, "nodeSelectorTerms", rpath);
  if (!list.ok()) return list.status();
  if (list->has_value()) {
    int64_t i = 0;
    for (simdjson::dom::element el : **list) {
      const JsonPath tpath = rpath.Item("nodeSelectorTerms", i++);
      absl::StatusOr<simdjson::dom::object> tobj = AsObject(el, tpath);
      if (!tobj.ok()) return tobj.status();
      core::NodeSelectorTerm term;
      for (const bool field : {false, true}) {
        const std::string_view name = field ? "matchFields" : "matchExpressions";
        absl::StatusOr<std::optional<simdjson::dom::array>> reqs = OptionalArray(*tobj, name, tpath);
        if (!reqs.ok()) return reqs.status();
        if (!reqs->has_value()) continue;
        int64_t j = 0;
        for (simdjson::dom::element r : **reqs) {
          const JsonPath epath = tpath.Item(name, j++);
          absl::StatusOr<core::NodeSelectorRequirement> req =
              DecodeNodeSelectorRequirement(r, epath, field);
          if (!req.ok()) return req.status();
          (field ? term.match_fields : term.match_expressions).push_back(*std::move(req));
        }
      }
      terms.push_back(std::move(term));
    }
  }
  *out = std::move(terms);
  return absl::OkStatus();
}

// spec.tolerations, checked as the API server's validation does.
absl::Status DecodeTolerations(simdjson::dom::object spec, const JsonPath& spath,
                               std::vector<core::Toleration>* out) {
  absl::StatusOr<std::optional<simdjson::dom::array>> list = OptionalArray(spec, "tolerations", spath);
  if (!list.ok()) return list.status();
  if (!list->has_value()) return absl::OkStatus();
  int64_t i = 0;
  for (simdjson::dom::element el : **list) {
    const JsonPath tpath = spath.Item("tolerations", i++);
    absl::StatusOr<simdjson::dom::object> tobj = AsObject(el, tpath);
    if (!tobj.ok()) return tobj.status();
    core::Toleration t;
    for (auto [field, target] :
         {std::pair<std::string_view, std::string*>{"key", &t.key}, {"value", &t.value},
          {"effect", &t.effect}}) {
      absl::StatusOr<std::optional<std::string_view>> v = OptionalString(*tobj, field, tpath);
      if (!v.ok()) return v.status();
      if (v->has_value()) *target = std::string(**v);
    }
    absl::StatusOr<std::optional<std::string_view>> op = OptionalString(*tobj, "operator", tpath);
    if (!op.ok()) return op.status();
    const std::string_view op_text = op->value_or("");
    if (op_text.empty() || op_text == "Equal") {
      t.op = core::TolerationOp::kEqual;
    } else if (op_text == "Exists") {
      t.op = core::TolerationOp::kExists;
    } else {
      return FieldError(tpath.Field("operator"), StrCat("unsupported operator \"", op_text.substr(0, 64),
                                                        "\"; expected Equal or Exists"));
    }
    if (t.key.empty() && t.op != core::TolerationOp::kExists) {
      return FieldError(tpath.Field("operator"),
                        "must be Exists when the key is empty (which tolerates every taint)");
    }
    if (t.op == core::TolerationOp::kExists && !t.value.empty()) {
      return FieldError(tpath.Field("value"), "must be empty when the operator is Exists");
    }
    if (!t.effect.empty() && t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" &&
        t.effect != "NoExecute") {
      return FieldError(tpath.Field("effect"),
                        StrCat("unsupported effect \"", std::string_view(t.effect).substr(0, 64),
                               "\"; expected NoSchedule, PreferNoSchedule or NoExecute (or none "
                               "for every effect)"));
    }
    out->push_back(std::move(t));
  }
  return absl::OkStatus();
}

// metadata.namespace of a namespaced object; absent or empty is "default", as kubectl assumes.
absl::StatusOr<std::string> NamespaceOf(simdjson::dom::object meta, const JsonPath& mpath) {
  absl::StatusOr<std::optional<std::string_view>> ns = OptionalString(meta, "namespace", mpath);
  if (!ns.ok()) return ns.status();
  if (!ns->has_value() || (*ns)->empty()) return std::string("default");
  if ((*ns)->size() > kMaxNameLength) {
    return FieldError(mpath.Field("namespace"), "longer than 253 characters");
  }
  return std::string(**ns);
}

// The object kinds berth ingests, with the apiVersions each may carry; the first is assumed for
// an object without apiVersion.
enum class Kind : uint8_t { kNode, kPod, kPool, kQueue, kPodGroup, kPriorityClass };
struct KindInfo {
  Kind kind;
  std::string_view name;
  std::array<std::string_view, 2> versions;  // the second may be empty
};
constexpr std::string_view kBerthV1alpha1 = "berth.io/v1alpha1";
constexpr std::string_view kAibeeV1alpha1 = "resource.aibee.cn/v1alpha1";
constexpr std::string_view kSchedulerPluginsV1alpha1 = "scheduling.x-k8s.io/v1alpha1";
constexpr std::string_view kVolcanoV1beta1 = "scheduling.volcano.sh/v1beta1";
constexpr std::string_view kSchedulingV1 = "scheduling.k8s.io/v1";
constexpr std::array<KindInfo, 6> kKinds = {{
    {Kind::kNode, "Node", {"v1", ""}},
    {Kind::kPod, "Pod", {"v1", ""}},
    {Kind::kPool, "Pool", {kBerthV1alpha1, kAibeeV1alpha1}},
    {Kind::kQueue, "Queue", {kBerthV1alpha1, ""}},
    {Kind::kPodGroup, "PodGroup", {kSchedulerPluginsV1alpha1, kVolcanoV1beta1}},
    {Kind::kPriorityClass, "PriorityClass", {kSchedulingV1, ""}},
}};

const KindInfo* FindKind(std::string_view name) {
  for (const KindInfo& k : kKinds) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// "\"a\"" or "\"a\" or \"b\"": the apiVersions of a kind, for messages.
std::string VersionsText(const KindInfo& k) {
  std::string out = StrCat("\"", k.versions[0], "\"");
  if (!k.versions[1].empty()) StrAppend(&out, " or \"", k.versions[1], "\"");
  return out;
}

// "Node (v1), Pod (v1), Pool (berth.io/v1alpha1 or ...), ...": what berth ingests.
std::string AcceptedKindsText() {
  std::string out;
  for (const KindInfo& k : kKinds) {
    StrAppend(&out, out.empty() ? "" : ", ", k.name, " (", k.versions[0]);
    if (!k.versions[1].empty()) StrAppend(&out, " or ", k.versions[1]);
    out.push_back(')');
  }
  return out;
}

// "Node, Pod, ...", each name followed by `suffix` ("List" names the typed lists).
std::string KindNamesText(std::string_view suffix) {
  std::string out;
  for (const KindInfo& k : kKinds) StrAppend(&out, out.empty() ? "" : ", ", k.name, suffix);
  return out;
}

}  // namespace

absl::StatusOr<core::Quantity> DecodeQuantity(simdjson::dom::element el, const JsonPath& path) {
  std::string_view text;
  std::string number_text;
  switch (el.type()) {
    case simdjson::dom::element_type::STRING:
      text = el.get_string().value_unsafe();
      break;
    case simdjson::dom::element_type::INT64:
      number_text = std::to_string(el.get_int64().value_unsafe());
      text = number_text;
      break;
    case simdjson::dom::element_type::UINT64:
      number_text = std::to_string(el.get_uint64().value_unsafe());
      text = number_text;
      break;
    case simdjson::dom::element_type::DOUBLE: {
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), el.get_double().value_unsafe());
      number_text.assign(buf, end);
      text = number_text;
      break;
    }
    default:
      return FieldError(path, StrCat("expected a quantity (string or number), got ",
                                           TypeName(el)));
  }
  absl::StatusOr<core::Quantity> q = core::Quantity::Parse(text);
  if (!q.ok()) return FieldError(path, ToStd(q.status().message()));
  return q;
}


absl::StatusOr<core::ResourceVector> DecodeResourceList(
    simdjson::dom::object obj, core::ResourceNameScope& names, const JsonPath& path,
    NameMode mode, std::vector<std::pair<std::string, int64_t>>* unknown) {
  // Decoding never changes the shared name table: a name it lacks gets a provisional id from
  // the scope (NameMode::kProvisional), which the model resolves if and when it commits the
  // object, or goes to `unknown` (NameMode::kLookup).
  core::ResourceVector out;
  for (auto [key, value] : obj) {
    const JsonPath here = path.Field(key);
    absl::StatusOr<core::Quantity> q = DecodeQuantity(value, here);
    if (!q.ok()) return q.status();
    if (q->IsNegative()) {
      return FieldError(here, StrCat("must not be negative, got ", q->DebugString()));
    }
    std::optional<core::ResourceId> id;
    if (mode == NameMode::kProvisional) {
      absl::StatusOr<core::ResourceId> resolved = names.Resolve(key);
      if (!resolved.ok()) return FieldError(here, ToStd(resolved.status().message()));
      id = *resolved;
    } else {
      id = names.Find(key);
    }
    // Only names that are not ids yet lack one: they are never cpu, so whole units.
    const core::ResourceScale scale = id ? names.Scale(*id) : core::ResourceScale::kUnit;
    absl::StatusOr<int64_t> amount = core::AmountOf(*q, scale);
    if (!amount.ok()) return FieldError(here, ToStd(amount.status().message()));
    if (!id) {
      if (*amount != 0 && unknown != nullptr) unknown->emplace_back(std::string(key), *amount);
      continue;
    }
    out.Set(*id, *amount);
  }
  return out;
}

absl::StatusOr<core::Pod> DecodePod(simdjson::dom::object obj, core::ResourceNameScope& names,
                                    const JsonPath& path, NameMode mode) {
  core::Pod pod;
  const JsonPath mpath = path.Field("metadata");
  absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
  if (!meta.ok()) return meta.status();
  pod.name = std::string(meta->name);
  pod.creation = meta->creation;
  absl::StatusOr<std::optional<std::string_view>> ns = OptionalString(meta->meta, "namespace", mpath);
  if (!ns.ok()) return ns.status();
  pod.ns = ns->has_value() && !(*ns)->empty() ? std::string(**ns) : "default";
  if (pod.ns.size() > kMaxNameLength) return FieldError(mpath.Field("namespace"), "too long");
  absl::StatusOr<std::optional<std::string_view>> uid = OptionalString(meta->meta, "uid", mpath);
  if (!uid.ok()) return uid.status();
  if (uid->has_value() && (*uid)->size() > kMaxNameLength) {
    return FieldError(mpath.Field("uid"), "too long");
  }
  pod.uid = uid->has_value() && !(*uid)->empty() ? std::string(**uid)
                                                 : StrCat("generated:", pod.ns, "/", pod.name);
  pod.terminating = OptionalField(meta->meta, "deletionTimestamp").has_value();
  if (absl::Status s = DecodeStringMap(meta->meta, "labels", mpath, &pod.labels, core::IsBerthKey);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          DecodeStringMap(meta->meta, "annotations", mpath, &pod.annotations, core::IsBerthKey);
      !s.ok()) {
    return s;
  }

  core::PodResourceSpec resources;
  std::vector<std::pair<std::string, int64_t>> unknown;  // NameMode::kLookup only
  absl::StatusOr<std::optional<simdjson::dom::object>> spec = OptionalObject(obj, "spec", path);
  if (!spec.ok()) return spec.status();
  if (spec->has_value()) {
    const JsonPath spath = path.Field("spec");
    auto sched = OptionalString(**spec, "schedulerName", spath);
    if (!sched.ok()) return sched.status();
    if (sched->has_value() && !(*sched)->empty()) pod.scheduler_name = std::string(**sched);
    auto node = OptionalString(**spec, "nodeName", spath);
    if (!node.ok()) return node.status();
    if (node->has_value()) pod.node_name = std::string(**node);
    auto prio = OptionalInt(**spec, "priority", spath);
    if (!prio.ok()) return prio.status();
    if (prio->has_value()) {
      if (**prio < INT32_MIN || **prio > INT32_MAX) {
        return FieldError(spath.Field("priority"), "out of the int32 range");
      }
      pod.priority = static_cast<int32_t>(**prio);
    }
    auto pclass = OptionalString(**spec, "priorityClassName", spath);
    if (!pclass.ok()) return pclass.status();
    if (pclass->has_value()) pod.priority_class = std::string(**pclass);
    auto deadline = OptionalInt(**spec, "activeDeadlineSeconds", spath);
    if (!deadline.ok()) return deadline.status();
    if (deadline->has_value()) {
      // v1 validation: a positive number of seconds, at most 2^31-1 as the API server stores it.
      if (**deadline <= 0 || **deadline > INT32_MAX) {
        return FieldError(spath.Field("activeDeadlineSeconds"), "must be between 1 and 2147483647");
      }
      pod.active_deadline_seconds = **deadline;
    }

    core::PodPlacement placement;
    if (absl::Status s = DecodeStringMap(**spec, "nodeSelector", spath, &placement.node_selector,
                                         [](std::string_view) { return true; });
        !s.ok()) {
      return s;
    }
    if (absl::Status s = DecodeRequiredNodeAffinity(**spec, spath, &placement.required_terms);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = DecodeTolerations(**spec, spath, &placement.tolerations); !s.ok()) {
      return s;
    }
    // Null for a pod that says nothing of where it goes; shared among pods that say the same.
    pod.placement = core::SharePlacement(std::move(placement));

    for (std::string_view list : {"containers", "initContainers"}) {
      auto arr = OptionalArray(**spec, list, spath);
      if (!arr.ok()) return arr.status();
      if (!arr->has_value()) continue;
      int64_t i = 0;
      for (simdjson::dom::element c : **arr) {
        const JsonPath cpath = spath.Item(list, i++);
        absl::StatusOr<simdjson::dom::object> cobj = AsObject(c, cpath);
        if (!cobj.ok()) return cobj.status();
        absl::StatusOr<core::ResourceVector> req =
            ContainerRequests(*cobj, names, cpath, mode, &unknown);
        if (!req.ok()) return req.status();
        if (list == "containers") {
          resources.containers.push_back(*std::move(req));
        } else {
          auto restart = OptionalString(*cobj, "restartPolicy", cpath);
          if (!restart.ok()) return restart.status();
          resources.init_containers.push_back(
              {*std::move(req), restart->has_value() && **restart == "Always"});
        }
      }
    }
    auto overhead = OptionalObject(**spec, "overhead", spath);
    if (!overhead.ok()) return overhead.status();
    if (overhead->has_value()) {
      auto v = DecodeResourceList(**overhead, names, spath.Field("overhead"), mode, &unknown);
      if (!v.ok()) return v.status();
      resources.overhead = *std::move(v);
    }
    auto pod_res = OptionalObject(**spec, "resources", spath);
    if (!pod_res.ok()) return pod_res.status();
    if (pod_res->has_value()) {
      auto req = OptionalObject(**pod_res, "requests", spath.Field("resources"));
      if (!req.ok()) return req.status();
      if (req->has_value()) {
        const JsonPath rpath = spath.Field("resources");
        auto v = DecodeResourceList(**req, names, rpath.Field("requests"), mode, &unknown);
        if (!v.ok()) return v.status();
        for (auto [k, unused] : **req) {
          if (auto id = names.Find(k)) resources.pod_level.emplace_back(*id, v->Get(*id));
        }
      }
    }
  }
  absl::StatusOr<core::ResourceVector> request = core::EffectiveRequest(resources, &names);
  if (!request.ok()) return FieldError(path.Field("spec"), ToStd(request.status().message()));
  pod.request = *std::move(request);
  // Unknown resources are summed by name: no node offers them, so the amount matters only for
  // printing the pod back.
  std::sort(unknown.begin(), unknown.end());
  for (auto& [name, amount] : unknown) {
    if (!pod.unknown_requests.empty() && pod.unknown_requests.back().first == name) {
      int64_t& sum = pod.unknown_requests.back().second;
      if (!core::CheckedAdd(sum, amount, &sum)) {
        return FieldError(path.Field("spec"),
                          StrCat("the requests of ", name,
                                 " do not fit (more than 9223372036854775807 units)"));
      }
    } else {
      pod.unknown_requests.emplace_back(std::move(name), amount);
    }
  }

  absl::StatusOr<std::optional<simdjson::dom::object>> status = OptionalObject(obj, "status", path);
  if (!status.ok()) return status.status();
  if (status->has_value()) {
    const JsonPath stpath = path.Field("status");
    auto phase = OptionalString(**status, "phase", stpath);
    if (!phase.ok()) return phase.status();
    if (phase->has_value() && !(*phase)->empty()) {
      std::optional<core::PodPhase> p = core::ParsePodPhase(**phase);
      if (!p) {
        return FieldError(stpath.Field("phase"),
                          StrCat("expected Pending, Running, Succeeded, Failed or Unknown, "
                                       "got \"", (*phase)->substr(0, 64), "\""));
      }
      pod.phase = *p;
    }
    auto nominated = OptionalString(**status, "nominatedNodeName", stpath);
    if (!nominated.ok()) return nominated.status();
    if (nominated->has_value()) pod.nominated_node = std::string(**nominated);
    absl::StatusOr<absl::Time> started = OptionalTime(**status, "startTime", stpath);
    if (!started.ok()) return started.status();
    pod.started = *started;
  }
  return pod;
}

absl::StatusOr<core::Node> DecodeNode(simdjson::dom::object obj, core::ResourceNameScope& names,
                                      const JsonPath& path) {
  core::Node node;
  const JsonPath mpath = path.Field("metadata");
  absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
  if (!meta.ok()) return meta.status();
  node.name = std::string(meta->name);
  node.creation = meta->creation;
  if (absl::Status s = DecodeStringMap(meta->meta, "labels", mpath, &node.labels,
                                       [](std::string_view) { return true; });
      !s.ok()) {
    return s;
  }
  auto spec = OptionalObject(obj, "spec", path);
  if (!spec.ok()) return spec.status();
  if (spec->has_value()) {
    const JsonPath spath = path.Field("spec");
    auto unsched = OptionalBool(**spec, "unschedulable", spath);
    if (!unsched.ok()) return unsched.status();
    node.unschedulable = unsched->value_or(false);
    auto taints = OptionalArray(**spec, "taints", spath);
    if (!taints.ok()) return taints.status();
    if (taints->has_value()) {
      int64_t i = 0;
      for (simdjson::dom::element t : **taints) {
        const JsonPath tpath = spath.Item("taints", i++);
        auto tobj = AsObject(t, tpath);
        if (!tobj.ok()) return tobj.status();
        core::Taint taint;
        for (auto [field, target] : {std::pair<std::string_view, std::string*>{"key", &taint.key},
                                     {"value", &taint.value},
                                     {"effect", &taint.effect}}) {
          auto s = OptionalString(*tobj, field, tpath);
          if (!s.ok()) return s.status();
          if (s->has_value()) *target = std::string(**s);
        }
        node.taints.push_back(std::move(taint));
      }
    }
  }
  auto status = OptionalObject(obj, "status", path);
  if (!status.ok()) return status.status();
  if (status->has_value()) {
    const JsonPath stpath = path.Field("status");
    bool has_allocatable = false;
    for (auto [field, target] :
         {std::pair<std::string_view, core::ResourceVector*>{"capacity", &node.capacity},
          {"allocatable", &node.allocatable}}) {
      auto list = OptionalObject(**status, field, stpath);
      if (!list.ok()) return list.status();
      if (!list->has_value()) continue;
      auto v = DecodeResourceList(**list, names, stpath.Field(field));
      if (!v.ok()) return v.status();
      *target = *std::move(v);
      if (field == "allocatable") has_allocatable = true;
    }
    if (!has_allocatable) node.allocatable = node.capacity;
  }
  return node;
}


absl::StatusOr<core::LabelSelector> DecodeLabelSelector(simdjson::dom::object obj,
                                                        const JsonPath& path) {
  constexpr std::string_view kOperators = "In, NotIn, Exists or DoesNotExist";
  core::LabelSelector selector;
  if (absl::Status s = DecodeStringMap(obj, "matchLabels", path, &selector.match_labels,
                                       [](std::string_view) { return true; });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<simdjson::dom::array>> exprs =
      OptionalArray(obj, "matchExpressions", path);
  if (!exprs.ok()) return exprs.status();
  if (!exprs->has_value()) return selector;
  int64_t i = 0;
  for (simdjson::dom::element el : **exprs) {
    const JsonPath epath = path.Item("matchExpressions", i++);
    absl::StatusOr<simdjson::dom::object> expr = AsObject(el, epath);
    if (!expr.ok()) return expr.status();
    core::SelectorRequirement req;
    absl::StatusOr<std::optional<std::string_view>> key = OptionalString(*expr, "key", epath);
    if (!key.ok()) return key.status();
    if (!key->has_value() || (*key)->empty()) {
      return FieldError(epath.Field("key"), "required: expected a non-empty label key");
    }
    req.key = std::string(**key);
    absl::StatusOr<std::optional<std::string_view>> op = OptionalString(*expr, "operator", epath);
    if (!op.ok()) return op.status();
    if (!op->has_value()) {
      return FieldError(epath.Field("operator"), StrCat("required: expected ", kOperators));
    }
    std::optional<core::SelectorOp> parsed = core::ParseSelectorOp(**op);
    if (!parsed) {
      return FieldError(epath.Field("operator"),
                        StrCat("unsupported operator \"", (*op)->substr(0, 64), "\"; expected ",
                               kOperators));
    }
    req.op = *parsed;
    if (absl::Status st = DecodeValues(*expr, epath, &req.values); !st.ok()) return st;
    if (absl::Status s = core::ValidateRequirement(req); !s.ok()) {
      return FieldError(epath.Field("values"), ToStd(s.message()));
    }
    selector.match_expressions.push_back(std::move(req));
  }
  return selector;
}

absl::StatusOr<core::Pool> DecodePool(simdjson::dom::object obj, const JsonPath& path) {
  core::Pool pool;
  const JsonPath mpath = path.Field("metadata");
  absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
  if (!meta.ok()) return meta.status();
  pool.name = std::string(meta->name);
  pool.creation = meta->creation;
  absl::StatusOr<std::optional<simdjson::dom::object>> spec = OptionalObject(obj, "spec", path);
  if (!spec.ok()) return spec.status();
  if (!spec->has_value()) return pool;
  const JsonPath spath = path.Field("spec");
  absl::StatusOr<std::optional<simdjson::dom::object>> selector =
      OptionalObject(**spec, "nodeSelector", spath);
  if (!selector.ok()) return selector.status();
  if (selector->has_value()) {
    absl::StatusOr<core::LabelSelector> sel =
        DecodeLabelSelector(**selector, spath.Field("nodeSelector"));
    if (!sel.ok()) return sel.status();
    pool.node_selector = *std::move(sel);
  }
  for (auto [field, target] :
       {std::pair<std::string_view, bool*>{"disablePreemption", &pool.disable_preemption},
        {"disableBorrowing", &pool.disable_borrowing},
        {"disableSharing", &pool.disable_sharing}}) {
    absl::StatusOr<std::optional<bool>> flag = OptionalBool(**spec, field, spath);
    if (!flag.ok()) return flag.status();
    *target = flag->value_or(false);
  }
  return pool;
}

absl::StatusOr<core::Queue> DecodeQueue(simdjson::dom::object obj, const JsonPath& path) {
  core::Queue queue;
  const JsonPath mpath = path.Field("metadata");
  absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
  if (!meta.ok()) return meta.status();
  queue.name = std::string(meta->name);
  queue.creation = meta->creation;
  absl::StatusOr<std::optional<simdjson::dom::object>> spec = OptionalObject(obj, "spec", path);
  if (!spec.ok()) return spec.status();
  if (!spec->has_value()) return queue;
  const JsonPath spath = path.Field("spec");
  absl::StatusOr<std::optional<double>> weight = OptionalNumber(**spec, "weight", spath);
  if (!weight.ok()) return weight.status();
  if (weight->has_value()) {
    // The fair share divides by the sum of weights: zero or negative weights would break it.
    if (!(**weight > 0)) {
      return FieldError(spath.Field("weight"), StrCat("must be greater than 0, got ", **weight));
    }
    queue.weight = **weight;
  }
  using Limit = std::pair<std::string_view, std::optional<double>*>;
  for (auto [field, target] :
       {Limit{"nonPreemptibleLimitFactor", &queue.non_preemptible_limit_factor},
        Limit{"excessBudget", &queue.excess_budget}}) {
    absl::StatusOr<std::optional<double>> v = OptionalNumber(**spec, field, spath);
    if (!v.ok()) return v.status();
    if (!v->has_value()) continue;
    if (**v < 0) return FieldError(spath.Field(field), StrCat("must not be negative, got ", **v));
    *target = **v;
  }
  return queue;
}

absl::StatusOr<core::PodGroup> DecodePodGroup(simdjson::dom::object obj,
                                              core::PodGroupSource source,
                                              core::ResourceNameScope& names,
                                              const JsonPath& path) {
  core::PodGroup group;
  group.source = source;
  const JsonPath mpath = path.Field("metadata");
  absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
  if (!meta.ok()) return meta.status();
  group.name = std::string(meta->name);
  group.creation = meta->creation;
  absl::StatusOr<std::string> ns = NamespaceOf(meta->meta, mpath);
  if (!ns.ok()) return ns.status();
  group.ns = *std::move(ns);
  if (absl::Status st = DecodeStringMap(meta->meta, "annotations", mpath, &group.annotations,
                                        core::IsBerthKey);
      !st.ok()) {
    return st;
  }
  absl::StatusOr<std::optional<simdjson::dom::object>> spec = OptionalObject(obj, "spec", path);
  if (!spec.ok()) return spec.status();
  if (!spec->has_value()) return group;
  const JsonPath spath = path.Field("spec");
  absl::StatusOr<std::optional<int32_t>> min_member =
      OptionalInt32(**spec, "minMember", spath, /*non_negative=*/true);
  if (!min_member.ok()) return min_member.status();
  if (min_member->has_value()) group.min_member = **min_member;
  if (source == core::PodGroupSource::kSchedulerPlugins) {
    absl::StatusOr<std::optional<int32_t>> timeout =
        OptionalInt32(**spec, "scheduleTimeoutSeconds", spath, /*non_negative=*/true);
    if (!timeout.ok()) return timeout.status();
    group.schedule_timeout_seconds = *timeout;
  }
  absl::StatusOr<std::optional<simdjson::dom::object>> min_resources =
      OptionalObject(**spec, "minResources", spath);
  if (!min_resources.ok()) return min_resources.status();
  if (min_resources->has_value()) {
    absl::StatusOr<core::ResourceVector> v =
        DecodeResourceList(**min_resources, names, spath.Field("minResources"));
    if (!v.ok()) return v.status();
    group.min_resources = *std::move(v);
  }
  return group;
}

absl::StatusOr<core::PriorityClass> DecodePriorityClass(simdjson::dom::object obj,
                                                        const JsonPath& path) {
  core::PriorityClass pc;
  const JsonPath mpath = path.Field("metadata");
  absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
  if (!meta.ok()) return meta.status();
  pc.name = std::string(meta->name);
  pc.creation = meta->creation;
  // PriorityClass has no spec: its fields sit at the top level.
  absl::StatusOr<std::optional<int32_t>> value =
      OptionalInt32(obj, "value", path, /*non_negative=*/false);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return FieldError(path.Field("value"), "required: expected an int32");
  pc.value = **value;
  absl::StatusOr<std::optional<bool>> global = OptionalBool(obj, "globalDefault", path);
  if (!global.ok()) return global.status();
  pc.global_default = global->value_or(false);
  absl::StatusOr<std::optional<std::string_view>> policy =
      OptionalString(obj, "preemptionPolicy", path);
  if (!policy.ok()) return policy.status();
  if (policy->has_value()) {
    if (**policy != "PreemptLowerPriority" && **policy != "Never") {
      return FieldError(path.Field("preemptionPolicy"),
                        StrCat("expected PreemptLowerPriority or Never, got \"",
                               (*policy)->substr(0, 64), "\""));
    }
    pc.preemption_policy = std::string(**policy);
  }
  return pc;
}

absl::StatusOr<core::ModelEvent> DecodeObjectEvent(simdjson::dom::object obj, bool deleted,
                                                   const core::ResourceNames& table,
                                                   const JsonPath& path,
                                                   std::string_view kind_hint,
                                                   std::string_view api_version_hint) {
  absl::StatusOr<std::optional<std::string_view>> kind = OptionalString(obj, "kind", path);
  if (!kind.ok()) return kind.status();
  const std::string_view kind_name = kind->has_value() && !(*kind)->empty() ? **kind : kind_hint;
  if (kind_name.empty()) {
    return FieldError(path.Field("kind"),
                      StrCat("required: expected one of ", KindNamesText("")));
  }
  const KindInfo* info = FindKind(kind_name);
  if (info == nullptr) {
    return FieldError(path.Field("kind"), StrCat("unsupported kind \"", kind_name.substr(0, 64),
                                                 "\"; berth ingests ", AcceptedKindsText()));
  }
  absl::StatusOr<std::optional<std::string_view>> api_version =
      OptionalString(obj, "apiVersion", path);
  if (!api_version.ok()) return api_version.status();
  std::string_view version = api_version->value_or("");
  if (version.empty() && kind_name == kind_hint) version = api_version_hint;
  if (version.empty()) version = info->versions[0];
  if (version != info->versions[0] && (info->versions[1].empty() || version != info->versions[1])) {
    return FieldError(path.Field("apiVersion"),
                      StrCat("expected ", VersionsText(*info), " for kind ", info->name,
                             ", got \"", version.substr(0, 64), "\""));
  }

  const JsonPath mpath = path.Field("metadata");
  // Names new to the table get provisional ids; the upsert carries them for the model to add
  // when it commits the object.
  core::ResourceNameScope names(table);
  switch (info->kind) {
    case Kind::kNode: {
      absl::StatusOr<core::Node> node = DecodeNode(obj, names, path);
      if (!node.ok()) return node.status();
      if (deleted) return core::ModelEvent(core::NodeDelete{node->name});
      return core::ModelEvent(core::NodeUpsert{*std::move(node), names.TakeProvisional()});
    }
    case Kind::kPod: {
      absl::StatusOr<core::Pod> pod = DecodePod(obj, names, path);
      if (!pod.ok()) return pod.status();
      if (deleted) {
        return core::ModelEvent(core::PodDelete{pod->uid.str(), pod->ns.str(), pod->name.str()});
      }
      return core::ModelEvent(core::PodUpsert{*std::move(pod), names.TakeProvisional()});
    }
    case Kind::kPool: {
      if (deleted) {
        absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
        if (!meta.ok()) return meta.status();
        return core::ModelEvent(core::PoolDelete{std::string(meta->name)});
      }
      absl::StatusOr<core::Pool> pool = DecodePool(obj, path);
      if (!pool.ok()) return pool.status();
      return core::ModelEvent(core::PoolUpsert{*std::move(pool)});
    }
    case Kind::kQueue: {
      if (deleted) {
        absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
        if (!meta.ok()) return meta.status();
        return core::ModelEvent(core::QueueDelete{std::string(meta->name)});
      }
      absl::StatusOr<core::Queue> queue = DecodeQueue(obj, path);
      if (!queue.ok()) return queue.status();
      return core::ModelEvent(core::QueueUpsert{*std::move(queue)});
    }
    case Kind::kPodGroup: {
      if (deleted) {
        absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
        if (!meta.ok()) return meta.status();
        absl::StatusOr<std::string> ns = NamespaceOf(meta->meta, mpath);
        if (!ns.ok()) return ns.status();
        return core::ModelEvent(core::PodGroupDelete{*std::move(ns), std::string(meta->name)});
      }
      const core::PodGroupSource source = version == kVolcanoV1beta1
                                              ? core::PodGroupSource::kVolcano
                                              : core::PodGroupSource::kSchedulerPlugins;
      absl::StatusOr<core::PodGroup> group = DecodePodGroup(obj, source, names, path);
      if (!group.ok()) return group.status();
      return core::ModelEvent(core::PodGroupUpsert{*std::move(group), names.TakeProvisional()});
    }
    case Kind::kPriorityClass: {
      if (deleted) {
        absl::StatusOr<ObjectMeta> meta = DecodeObjectMeta(obj, path, mpath);
        if (!meta.ok()) return meta.status();
        return core::ModelEvent(core::PriorityClassDelete{std::string(meta->name)});
      }
      absl::StatusOr<core::PriorityClass> pc = DecodePriorityClass(obj, path);
      if (!pc.ok()) return pc.status();
      return core::ModelEvent(core::PriorityClassUpsert{*std::move(pc)});
    }
  }
  return absl::InternalError("unhandled kind");
}

absl::StatusOr<std::vector<core::ModelEvent>> DecodeWatchEvents(
    simdjson::dom::element root, const core::ResourceNames& names) {
  std::vector<core::ModelEvent> out;
  auto decode_one = [&](simdjson::dom::element el, const JsonPath& path) -> absl::Status {
    absl::StatusOr<simdjson::dom::object> ev = AsObject(el, path);
    if (!ev.ok()) return ev.status();
    auto type = OptionalString(*ev, "type", path);
    if (!type.ok()) return type.status();
    if (!type->has_value()) {
      // A bare object where its event belongs: say what to wrap it in.
      std::string_view kind;
      if ((*ev)["kind"].get_string().get(kind) == simdjson::SUCCESS) {
        return FieldError(path, StrCat("expected a watch event {\"type\": ADDED, MODIFIED or DELETED, "
                                       "\"object\": ...}, got a bare ", kind.substr(0, 32),
                                       " object; wrap it: {\"type\":\"ADDED\",\"object\":{...}}"));
      }
      return FieldError(path.Field("type"), "required: expected ADDED, MODIFIED or DELETED");
    }
    const bool deleted = **type == "DELETED";
    if (!deleted && **type != "ADDED" && **type != "MODIFIED") {
      return FieldError(path.Field("type"),
                        StrCat("expected ADDED, MODIFIED or DELETED, got \"",
                                     (*type)->substr(0, 32), "\""));
    }
    auto object = OptionalObject(*ev, "object", path);
    if (!object.ok()) return object.status();
    if (!object->has_value()) return FieldError(path.Field("object"), "required: expected an object");
    absl::StatusOr<core::ModelEvent> e =
        DecodeObjectEvent(**object, deleted, names, path.Field("object"));
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
    return absl::OkStatus();
  };
  simdjson::dom::array arr;
  if (root.get_array().get(arr) == simdjson::SUCCESS) {
    const JsonPath top;
    int64_t i = 0;
    for (simdjson::dom::element el : arr) {
      if (absl::Status s = decode_one(el, top.Element(i++)); !s.ok()) return s;
    }
  } else {
    if (absl::Status s = decode_one(root, JsonPath{}); !s.ok()) return s;
  }
  return out;
}

absl::StatusOr<std::vector<core::ModelEvent>> DecodeList(simdjson::dom::element root,
                                                         const core::ResourceNames& names) {
  const JsonPath top;
  absl::StatusOr<simdjson::dom::object> obj = AsObject(root, top);
  if (!obj.ok()) return obj.status();
  auto kind = OptionalString(*obj, "kind", top);
  if (!kind.ok()) return kind.status();
  // A typed list ("PoolList") names the kind of its items, which may omit kind and apiVersion.
  std::string_view item_kind;
  std::string_view item_version;
  constexpr std::string_view kListSuffix = "List";
  if (kind->has_value() && **kind != "List" && (*kind)->size() > kListSuffix.size() &&
      (*kind)->ends_with(kListSuffix)) {
    const std::string_view prefix = (*kind)->substr(0, (*kind)->size() - kListSuffix.size());
    if (FindKind(prefix) != nullptr) {
      item_kind = prefix;
      auto version = OptionalString(*obj, "apiVersion", top);
      if (!version.ok()) return version.status();
      item_version = version->value_or("");
    }
  }
  if (!kind->has_value() || (**kind != "List" && item_kind.empty())) {
    return FieldError(top.Field("kind"),
                      StrCat("expected \"List\" or a typed list of a kind berth ingests (",
                             KindNamesText("List"), ")"));
  }
  auto items = OptionalArray(*obj, "items", top);
  if (!items.ok()) return items.status();
  std::vector<core::ModelEvent> out;
  if (!items->has_value()) return out;
  int64_t i = 0;
  for (simdjson::dom::element el : **items) {
    const JsonPath ipath = top.Item("items", i++);
    auto item = AsObject(el, ipath);
    if (!item.ok()) return item.status();
    absl::StatusOr<core::ModelEvent> e =
        DecodeObjectEvent(*item, /*deleted=*/false, names, ipath, item_kind, item_version);
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  return out;
}

// ---- encoding ---------------------------------------------------------------------------------

nlohmann::json EncodeTime(absl::Time t) {
  if (t == absl::InfinitePast()) return nullptr;
  // %E*S keeps a fractional second (decoded times may carry one) and prints none when whole.
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

nlohmann::json EncodePoolStats(const policy::PoolStats& stats, const core::ResourceNames& names) {
  nlohmann::json out = {{"flags", stats.Flags()}};
  for (const auto& [key, member] : policy::kPoolStatsRows) {
    const policy::PoolStats::Row& r = stats.*member;
    nlohmann::json row = nlohmann::json::object();
    for (const auto& [name, id] : policy::kPoolStatsResources) {
      row[std::string(name)] = core::FormatAmount(names, id, r.resources.Get(id));
    }
    row["nodes"] = r.nodes;
    row["pods"] = r.pods;
    out[std::string(key)] = std::move(row);
  }
  return out;
}

nlohmann::json EncodeResourceList(const core::ResourceVector& v, const core::ResourceNames& names) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < v.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    if (v.Get(id) == 0) continue;
    out[std::string(names.Name(id))] = core::FormatAmount(names, id, v.Get(id));
  }
  return out;
}

namespace {
nlohmann::json EncodeLabels(const core::Labels& labels) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : labels.items()) out[k] = v;
  return out;
}

nlohmann::json EncodeNodeSelectorRequirements(const std::vector<core::NodeSelectorRequirement>& reqs) {
  nlohmann::json out = nlohmann::json::array();
  for (const core::NodeSelectorRequirement& r : reqs) {
    nlohmann::json e = {{"key", r.key}, {"operator", core::NodeSelectorOpName(r.op)}};
    if (!r.values.empty()) e["values"] = r.values;
    out.push_back(std::move(e));
  }
  return out;
}

// nodeSelector, affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution and
// tolerations into a pod's `spec`.
void EncodePlacement(const core::PodPlacement& p, nlohmann::json* spec) {
  if (!p.node_selector.empty()) (*spec)["nodeSelector"] = EncodeLabels(p.node_selector);
  if (p.required_terms.has_value()) {
    nlohmann::json terms = nlohmann::json::array();
    for (const core::NodeSelectorTerm& t : *p.required_terms) {
      nlohmann::json term = nlohmann::json::object();
      if (!t.match_expressions.empty()) {
        term["matchExpressions"] = EncodeNodeSelectorRequirements(t.match_expressions);
      }
      if (!t.match_fields.empty()) term["matchFields"] = EncodeNodeSelectorRequirements(t.match_fields);
      terms.push_back(std::move(term));
    }
    (*spec)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        {"nodeSelectorTerms", std::move(terms)}};
  }
  if (!p.tolerations.empty()) {
    nlohmann::json tolerations = nlohmann::json::array();
    for (const core::Toleration& t : p.tolerations) {
      nlohmann::json tj = {{"operator", t.op == core::TolerationOp::kExists ? "Exists" : "Equal"}};
      if (!t.key.empty()) tj["key"] = t.key;
      if (!t.value.empty()) tj["value"] = t.value;
      if (!t.effect.empty()) tj["effect"] = t.effect;
      tolerations.push_back(std::move(tj));
    }
    (*spec)["tolerations"] = std::move(tolerations);
  }
}
}  // namespace

nlohmann::json EncodeNode(const core::Node& node, const core::ResourceNames& names) {
  nlohmann::json j = {{"apiVersion", "v1"}, {"kind", "Node"}};
  j["metadata"] = {{"name", node.name}, {"creationTimestamp", EncodeTime(node.creation)}};
  if (!node.labels.empty()) j["metadata"]["labels"] = EncodeLabels(node.labels);
  j["spec"] = nlohmann::json::object();
  if (node.unschedulable) j["spec"]["unschedulable"] = true;
  if (!node.taints.empty()) {
    nlohmann::json taints = nlohmann::json::array();
    for (const core::Taint& t : node.taints) {
      nlohmann::json tj = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) tj["value"] = t.value;
      taints.push_back(std::move(tj));
    }
    j["spec"]["taints"] = std::move(taints);
  }
  j["status"] = {{"capacity", EncodeResourceList(node.capacity, names)},
                 {"allocatable", EncodeResourceList(node.allocatable, names)}};
  return j;
}

nlohmann::json EncodePod(const core::Pod& pod, const core::ResourceNames& names) {
  nlohmann::json j = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  j["metadata"] = {{"name", pod.name},
                   {"namespace", pod.ns},
                   {"uid", pod.uid},
                   {"creationTimestamp", EncodeTime(pod.creation)}};
  if (pod.terminating) j["metadata"]["deletionTimestamp"] = "1970-01-01T00:00:00Z";
  if (!pod.labels.empty()) j["metadata"]["labels"] = EncodeLabels(pod.labels);
  if (!pod.annotations.empty()) j["metadata"]["annotations"] = EncodeLabels(pod.annotations);
  core::ResourceVector requests = pod.request;
  requests.Set(core::kPods, 0);  // implied by every pod; added back when decoded
  nlohmann::json request_list = EncodeResourceList(requests, names);
  for (const auto& [name, amount] : pod.unknown_requests) {
    request_list[name] = core::FormatUnits(amount);
  }
  nlohmann::json spec = {{"schedulerName", pod.scheduler_name},
                         {"priority", pod.priority},
                         {"containers",
                          {{{"name", "main"}, {"resources", {{"requests", request_list}}}}}}};
  if (!pod.node_name.empty()) spec["nodeName"] = pod.node_name;
  if (!pod.priority_class.empty()) spec["priorityClassName"] = pod.priority_class;
  if (pod.active_deadline_seconds > 0) spec["activeDeadlineSeconds"] = pod.active_deadline_seconds;
  if (pod.placement != nullptr) EncodePlacement(*pod.placement, &spec);
  j["spec"] = std::move(spec);
  j["status"] = {{"phase", core::PodPhaseName(pod.phase)}};
  if (!pod.nominated_node.empty()) j["status"]["nominatedNodeName"] = pod.nominated_node;
  if (pod.started != absl::InfinitePast()) j["status"]["startTime"] = EncodeTime(pod.started);
  return j;
}

nlohmann::json EncodeLabelSelector(const core::LabelSelector& selector) {
  nlohmann::json j = nlohmann::json::object();
  if (!selector.match_labels.empty()) j["matchLabels"] = EncodeLabels(selector.match_labels);
  if (!selector.match_expressions.empty()) {
    nlohmann::json exprs = nlohmann::json::array();
    for (const core::SelectorRequirement& r : selector.match_expressions) {
      nlohmann::json e = {{"key", r.key}, {"operator", core::SelectorOpName(r.op)}};
      if (!r.values.empty()) e["values"] = r.values;
      exprs.push_back(std::move(e));
    }
    j["matchExpressions"] = std::move(exprs);
  }
  return j;
}

nlohmann::json EncodePool(const core::Pool& pool) {
  nlohmann::json j = {{"apiVersion", kBerthV1alpha1}, {"kind", "Pool"}};
  j["metadata"] = {{"name", pool.name}, {"creationTimestamp", EncodeTime(pool.creation)}};
  j["spec"] = {{"nodeSelector", EncodeLabelSelector(pool.node_selector)},
               {"disablePreemption", pool.disable_preemption},
               {"disableBorrowing", pool.disable_borrowing},
               {"disableSharing", pool.disable_sharing}};
  return j;
}

nlohmann::json EncodeQueue(const core::Queue& queue) {
  nlohmann::json j = {{"apiVersion", kBerthV1alpha1}, {"kind", "Queue"}};
  j["metadata"] = {{"name", queue.name}, {"creationTimestamp", EncodeTime(queue.creation)}};
  j["spec"] = {{"weight", queue.weight}};
  if (queue.non_preemptible_limit_factor) {
    j["spec"]["nonPreemptibleLimitFactor"] = *queue.non_preemptible_limit_factor;
  }
  if (queue.excess_budget) j["spec"]["excessBudget"] = *queue.excess_budget;
  return j;
}

nlohmann::json EncodePodGroup(const core::PodGroup& group, const core::ResourceNames& names) {
  const bool volcano = group.source == core::PodGroupSource::kVolcano;
  nlohmann::json j = {
      {"apiVersion", volcano ? kVolcanoV1beta1 : kSchedulerPluginsV1alpha1},
      {"kind", "PodGroup"}};
  j["metadata"] = {{"name", group.name},
                   {"namespace", group.ns},
                   {"creationTimestamp", EncodeTime(group.creation)}};
  if (!group.annotations.empty()) j["metadata"]["annotations"] = EncodeLabels(group.annotations);
  j["spec"] = {{"minMember", group.min_member}};
  if (group.schedule_timeout_seconds && !volcano) {
    j["spec"]["scheduleTimeoutSeconds"] = *group.schedule_timeout_seconds;
  }
  if (!group.min_resources.IsZero()) {
    j["spec"]["minResources"] = EncodeResourceList(group.min_resources, names);
  }
  return j;
}

nlohmann::json EncodePriorityClass(const core::PriorityClass& pc) {
  nlohmann::json j = {{"apiVersion", kSchedulingV1}, {"kind", "PriorityClass"}};
  j["metadata"] = {{"name", pc.name}, {"creationTimestamp", EncodeTime(pc.creation)}};
  j["value"] = pc.value;
  j["globalDefault"] = pc.global_default;
  j["preemptionPolicy"] = pc.preemption_policy;
  return j;
}

}  // namespace berth::extender
