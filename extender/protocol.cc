#include "extender/protocol.h"

#include <strings.h>

#include <cstring>

#include "core/strings.h"
#include "extender/byte_scan.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"

namespace berth::extender {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// The value of `key` in `obj`, matched exactly first and then case-insensitively (Go's rule);
// nullopt when absent or null.
std::optional<simdjson::dom::element> Envelope(simdjson::dom::object obj, std::string_view key) {
  if (auto el = OptionalField(obj, key)) return el;
  for (auto [k, v] : obj) {
    if (EqualsIgnoreCase(k, key)) {
      if (v.is_null()) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

absl::StatusOr<core::Pod> DecodeEnvelopePod(simdjson::dom::object obj, std::string_view type,
                                            const core::ResourceNames& table) {
  core::ResourceNameScope names(table);
  const JsonPath top;
  auto pod_el = Envelope(obj, "Pod");
  if (!pod_el) return FieldError(top.Field("Pod"), StrCat("required in ", type, ": expected a Pod object"));
  auto pod_obj = AsObject(*pod_el, top.Field("Pod"));
  if (!pod_obj.ok()) return pod_obj.status();
  return DecodePod(*pod_obj, names, top.Field("Pod"), NameMode::kLookup);
}

absl::StatusOr<std::string_view> EnvelopeString(simdjson::dom::object obj, std::string_view key,
                                                bool required) {
  const JsonPath top;
  auto el = Envelope(obj, key);
  if (!el) {
    if (required) return FieldError(top.Field(key), "required: expected a non-empty string");
    return std::string_view();
  }
  auto s = AsString(*el, top.Field(key));
  if (!s.ok()) return s.status();
  if (required && s->empty()) return FieldError(top.Field(key), "required: expected a non-empty string");
  return *s;
}

}  // namespace

std::optional<core::Pod> DecodedPodCache::Find(std::string_view rest, const core::ResourceNames& names,
                                               size_t* text_size) const {
  absl::MutexLock lock(&mu_);
  if (names_ != &names || names_size_ != names.size() || text_.empty() || !rest.starts_with(text_)) {
    return std::nullopt;
  }
  ++hits_;
  if (text_size != nullptr) *text_size = text_.size();
  return pod_;
}

void DecodedPodCache::Remember(std::string_view text, const core::ResourceNames& names,
                               const core::Pod& pod) {
  absl::MutexLock lock(&mu_);
  text_.assign(text);
  names_ = &names;
  names_size_ = names.size();
  pod_ = pod;
}

int64_t DecodedPodCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

absl::StatusOr<ExtenderArgs> DecodeExtenderArgs(simdjson::dom::element root,
                                                const core::ResourceNames& names,
                                                std::string_view body, DecodedPodCache* cache) {
  const JsonPath top;
  absl::StatusOr<simdjson::dom::object> obj = AsObject(root, top.Field("ExtenderArgs"));
  if (!obj.ok()) return obj.status();
  ExtenderArgs args;
  // The pod's text is a key only when it is the one member of its name that the decoder reads:
  // with two members named "pod" in any case, the text found first might not be the one decoded.
  std::string_view pod_rest;  // from the pod's first byte to the end of the body
  if (cache != nullptr) {
    if (auto first = FirstMember(body); first && EqualsIgnoreCase(first->first, "pod")) {
      pod_rest = first->second;
    }
    int named_pod = 0;
    for (auto member : *obj) named_pod += EqualsIgnoreCase(member.key, "pod") ? 1 : 0;
    if (named_pod != 1) pod_rest = {};
  }
  if (std::optional<core::Pod> known = pod_rest.empty() ? std::nullopt : cache->Find(pod_rest, names)) {
    args.pod = *std::move(known);
  } else {
    absl::StatusOr<core::Pod> pod = DecodeEnvelopePod(*obj, "ExtenderArgs", names);
    if (!pod.ok()) return pod.status();
    args.pod = *std::move(pod);
    if (const std::string_view text = LeadingObject(pod_rest); !text.empty()) {
      cache->Remember(text, names, args.pod);
    }
  }

  if (auto names_el = Envelope(*obj, "NodeNames")) {
    simdjson::dom::array arr;
    if (names_el->get_array().get(arr) != simdjson::SUCCESS) {
      return FieldError(top.Field("NodeNames"),
                        StrCat("expected an array of node names, got ", TypeName(*names_el)));
    }
    args.node_names.reserve(arr.size());
    int64_t i = 0;
    for (simdjson::dom::element el : arr) {
      // Hundreds of names a call: read directly, and the error (with its path) built only for
      // one that is not a string.
      std::string_view name;
      if (el.get_string().get(name) != simdjson::SUCCESS) {
        return AsString(el, top.Item("NodeNames", i)).status();
      }
      args.node_names.push_back(name);
      ++i;
    }
    return args;
  }
  if (auto nodes_el = Envelope(*obj, "Nodes")) {
    const JsonPath npath = top.Field("Nodes");
    auto list = AsObject(*nodes_el, npath);
    if (!list.ok()) return list.status();
    auto items = OptionalArray(*list, "items", npath);
    if (!items.ok()) return items.status();
    args.full_nodes = true;
    if (!items->has_value()) return args;
    int64_t i = 0;
    for (simdjson::dom::element el : **items) {
      const JsonPath ipath = npath.Item("items", i++);
      auto node = AsObject(el, ipath);
      if (!node.ok()) return node.status();
      auto meta = OptionalObject(*node, "metadata", ipath);
      if (!meta.ok()) return meta.status();
      if (!meta->has_value()) return FieldError(ipath.Field("metadata"), "required: expected an object");
      auto name = OptionalString(**meta, "name", ipath.Field("metadata"));
      if (!name.ok()) return name.status();
      if (!name->has_value() || (*name)->empty()) {
        const JsonPath mpath = ipath.Field("metadata");
        return FieldError(mpath.Field("name"), "required: expected a non-empty string");
      }
      args.node_names.push_back(**name);
      args.node_objects.push_back(*node);
    }
    return args;
  }
  return FieldError(top.Field("NodeNames"),
                    "ExtenderArgs needs NodeNames (nodeCacheCapable: true) or Nodes (false); both are null");
}

namespace {

// Reads, from the start of `text`, the members kube-scheduler writes after the pod with
// nodeCacheCapable: true, `,"Nodes":null,"NodeNames":[...]}` ("Nodes" may be left out), then
// only whitespace. Each name must be plain text (PlainJsonText): a name with an escape, or with
// bytes that would need a look as UTF-8, makes it give up. \return false, with `out` in any
// state, for anything else.
bool ReadNodeNamesTail(std::string_view text, std::vector<std::string_view>* out) {
  const size_t n = text.size();
  const char* p = text.data();
  size_t i = 0;
  auto space = [&] {
    while (i < n && IsJsonSpace(p[i])) ++i;
  };
  auto take = [&](std::string_view token) {
    space();
    if (text.substr(i, token.size()) != token) return false;
    i += token.size();
    return true;
  };
  if (!take(",")) return false;
  // kube-scheduler writes the null "Nodes" (a Go struct's nil pointer); without it, the same.
  if (take(R"("Nodes")") && !(take(":") && take("null") && take(","))) return false;
  if (!take(R"("NodeNames")") || !take(":") || !take("[")) return false;
  space();
  if (i < n && p[i] == ']') {
    ++i;
  } else {
    for (;;) {
      if (!take("\"")) return false;
      // The name runs to the first byte that plain text cannot hold, eight bytes at a time; that
      // byte must be the closing quote. So the name is PlainJsonText, found in one pass.
      size_t end = NextStop<SpecialBytes>(p, i, n);
      while (end < n && !IsSpecialByte(p[end])) ++end;
      if (end >= n || p[end] != '"') return false;
      out->push_back(text.substr(i, end - i));
      i = end + 1;
      space();
      if (i < n && p[i] == ',') {
        ++i;
        continue;
      }
      if (!take("]")) return false;
      break;
    }
  }
  if (!take("}")) return false;
  space();
  return i == n;
}

}  // namespace

std::optional<ExtenderArgs> DecodeNodeNamesArgs(std::string_view body, const core::ResourceNames& names,
                                                DecodedPodCache* cache) {
  const auto first = FirstMember(body);
  if (!first || first->first != "Pod") return std::nullopt;
  const std::string_view rest = first->second;  // from the pod's first byte to the end
  ExtenderArgs args;
  // Hundreds of names: room for one every twenty bytes, then the exact count.
  auto read_names = [&](size_t pod_size) {
    args.node_names.reserve((rest.size() - pod_size) / 20 + 1);
    if (!ReadNodeNamesTail(rest.substr(pod_size), &args.node_names)) return false;
    args.names_plain = true;
    return true;
  };
  // A pod the cache holds (every prioritize) ends where its remembered text does, a whole object.
  size_t known_size = 0;
  if (std::optional<core::Pod> known = cache != nullptr ? cache->Find(rest, names, &known_size) : std::nullopt) {
    if (!read_names(known_size)) return std::nullopt;
    args.pod = *std::move(known);
    return args;
  }
  // Where the pod ends: kube-scheduler writes `"Nodes"` right after it, so the first `},"Nodes":`
  // is taken as its end if the text up to there parses as one value. A value that parses is
  // whole, and no shorter prefix of it is (its depth reaches zero only at its last byte), so
  // that is the end the scan below finds. Anything else (the bytes inside the pod, an error) is
  // scanned for its end as a string-aware brace count.
  static constexpr std::string_view kNodesAfterPod = "},\"Nodes\":";
  std::string_view pod_text;
  absl::StatusOr<simdjson::dom::element> root = absl::UnknownError("not parsed");
  if (const size_t at = rest.find(kNodesAfterPod); at != std::string_view::npos && at < kReusedParserLimit) {
    root = ParseReused(rest.substr(0, at + 1), kDefaultMaxDepth - 1);
    if (root.ok()) pod_text = rest.substr(0, at + 1);
  }
  if (pod_text.empty()) {
    pod_text = LeadingObject(rest);
    if (pod_text.empty() || pod_text.size() > kReusedParserLimit) return std::nullopt;
    // The pod alone, one level shallower than in the body: the same pods parse as in the whole.
    root = ParseReused(pod_text, kDefaultMaxDepth - 1);
  }
  if (!read_names(pod_text.size())) return std::nullopt;
  if (!root.ok()) return std::nullopt;
  simdjson::dom::object obj;
  if (root->get_object().get(obj) != simdjson::SUCCESS) return std::nullopt;
  core::ResourceNameScope scope(names);
  const JsonPath top;
  absl::StatusOr<core::Pod> pod = DecodePod(obj, scope, top.Field("Pod"), NameMode::kLookup);
  if (!pod.ok()) return std::nullopt;
  args.pod = *std::move(pod);
  if (cache != nullptr) cache->Remember(pod_text, names, args.pod);
  return args;
}

absl::StatusOr<BindingArgs> DecodeBindingArgs(simdjson::dom::element root) {
  const JsonPath top;
  absl::StatusOr<simdjson::dom::object> obj = AsObject(root, top.Field("ExtenderBindingArgs"));
  if (!obj.ok()) return obj.status();
  BindingArgs args;
  auto name = EnvelopeString(*obj, "PodName", true);
  if (!name.ok()) return name.status();
  auto ns = EnvelopeString(*obj, "PodNamespace", false);
  if (!ns.ok()) return ns.status();
  auto uid = EnvelopeString(*obj, "PodUID", false);
  if (!uid.ok()) return uid.status();
  auto node = EnvelopeString(*obj, "Node", true);
  if (!node.ok()) return node.status();
  args.pod_name = *name;
  args.pod_namespace = ns->empty() ? std::string_view("default") : *ns;
  args.pod_uid = *uid;
  args.node = *node;
  return args;
}

absl::StatusOr<PreemptionArgs> DecodePreemptionArgs(simdjson::dom::element root,
                                                    const core::ResourceNames& table) {
  const JsonPath top;
  absl::StatusOr<simdjson::dom::object> obj = AsObject(root, top.Field("ExtenderPreemptionArgs"));
  if (!obj.ok()) return obj.status();
  PreemptionArgs args;
  absl::StatusOr<core::Pod> pod = DecodeEnvelopePod(*obj, "ExtenderPreemptionArgs", table);
  if (!pod.ok()) return pod.status();
  args.pod = *std::move(pod);

  std::optional<simdjson::dom::element> map_el = Envelope(*obj, "NodeNameToMetaVictims");
  std::string_view map_key = "NodeNameToMetaVictims";
  bool full = false;
  if (!map_el) {
    map_el = Envelope(*obj, "NodeNameToVictims");
    map_key = "NodeNameToVictims";
    full = true;
  }
  if (!map_el) return args;  // no candidates: nothing to review
  const JsonPath mpath = top.Field(map_key);
  auto map = AsObject(*map_el, mpath);
  if (!map.ok()) return map.status();
  for (auto [node, victims_el] : *map) {
    const JsonPath npath = mpath.Field(node);
    PreemptionCandidate cand;
    cand.node = node;
    if (victims_el.is_null()) {
      args.candidates.push_back(std::move(cand));
      continue;
    }
    auto victims = AsObject(victims_el, npath);
    if (!victims.ok()) return victims.status();
    if (auto pdb = Envelope(*victims, "NumPDBViolations")) {
      int64_t n;
      if (pdb->get_int64().get(n) != simdjson::SUCCESS) {
        return FieldError(npath.Field("NumPDBViolations"),
                          StrCat("expected an integer, got ", TypeName(*pdb)));
      }
      cand.pdb_violations = n;
    }
    if (auto pods_el = Envelope(*victims, "Pods")) {
      simdjson::dom::array pods;
      if (pods_el->get_array().get(pods) != simdjson::SUCCESS) {
        return FieldError(npath.Field("Pods"), StrCat("expected an array, got ", TypeName(*pods_el)));
      }
      int64_t i = 0;
      for (simdjson::dom::element p : pods) {
        const JsonPath ppath = npath.Item("Pods", i++);
        auto pobj = AsObject(p, ppath);
        if (!pobj.ok()) return pobj.status();
        if (full) {
          core::ResourceNameScope names(table);
          auto victim = DecodePod(*pobj, names, ppath, NameMode::kLookup);
          if (!victim.ok()) return victim.status();
          auto meta = OptionalObject(*pobj, "metadata", ppath);
          auto uid = OptionalString(**meta, "uid", ppath.Field("metadata"));
          if (!uid.ok()) return uid.status();
          const JsonPath mpath = ppath.Field("metadata");
          if (!uid->has_value()) return FieldError(mpath.Field("uid"), "required");
          cand.victims.emplace_back(**uid, victim->priority);
        } else {
          auto uid_el = Envelope(*pobj, "UID");
          if (!uid_el) return FieldError(ppath.Field("UID"), "required: expected a pod uid");
          auto uid = AsString(*uid_el, ppath.Field("UID"));
          if (!uid.ok()) return uid.status();
          cand.victims.emplace_back(*uid, std::nullopt);
        }
      }
    }
    args.candidates.push_back(std::move(cand));
  }
  return args;
}

// ---- encoding ---------------------------------------------------------------------------------

// The hot replies are appended directly: one reply carries hundreds of names, and the generic
// writer's per-token bookkeeping showed in profiles.

namespace {

// A candidate's name: copied between quotes when the reader checked it (`plain`), else escaped.
void AppendName(std::string* out, std::string_view name, bool plain) {
  if (plain) {
    AppendPlainJsonString(out, name);
  } else {
    AppendJsonString(out, name);
  }
}

}  // namespace

std::string EncodeFilterResult(const ExtenderArgs& args,
                               const std::vector<policy::NodeVerdict>& verdicts, AnswerForm form,
                               std::span<const char> shown) {
  std::string out;
  size_t names_bytes = 0;
  for (std::string_view n : args.node_names) names_bytes += n.size() + 3;
  out.reserve(128 + names_bytes);
  auto name = [&](size_t i) { AppendName(&out, args.node_names[i], args.names_plain); };
  // How many nodes fail each way, counted in the pass list: a map with none is not scanned.
  size_t unschedulable = 0, unresolvable = 0;
  auto list = [&](auto&& emit) {
    bool first = true;
    for (size_t i = 0; i < verdicts.size(); ++i) {
      if (!verdicts[i].ok()) {
        ++(verdicts[i].fit == policy::Fit::kUnschedulable ? unschedulable : unresolvable);
        continue;
      }
      if (!shown.empty() && !shown[i]) continue;
      if (!first) out.push_back(',');
      first = false;
      emit(i);
    }
  };
  if (args.full_nodes) {
    out.append(R"({"Nodes":{"metadata":{},"items":[)");
    list([&](size_t i) { out.append(simdjson::minify(args.node_objects[i])); });
    out.append(R"(]},"NodeNames":null)");
  } else {
    out.append(R"({"Nodes":null,"NodeNames":[)");
    list(name);
    out.push_back(']');
  }
  for (policy::Fit kind : {policy::Fit::kUnschedulable, policy::Fit::kUnresolvable}) {
    out.append(kind == policy::Fit::kUnschedulable ? R"(,"FailedNodes":{)"
                                                   : R"(,"FailedAndUnresolvableNodes":{)");
    bool first = true;
    size_t left = kind == policy::Fit::kUnschedulable ? unschedulable : unresolvable;
    for (size_t i = 0; i < verdicts.size() && left > 0; ++i) {
      if (verdicts[i].fit != kind) continue;
      --left;
      if (!first) out.push_back(',');
      first = false;
      name(i);
      out.push_back(':');
      AppendJsonString(&out, form == AnswerForm::kShort ? policy::ReasonSummary(verdicts[i].reason)
                                                         : std::string_view(verdicts[i].message));
    }
    out.push_back('}');
  }
  out.append(R"(,"Error":""})");
  return out;
}

std::string EncodePriorityList(const std::vector<std::string_view>& hosts,
                               const std::vector<int64_t>& scores, AnswerForm form,
                               bool hosts_plain) {
  std::string out;
  size_t names_bytes = 0;
  for (std::string_view h : hosts) names_bytes += h.size() + 24;
  out.reserve(2 + names_bytes);
  out.push_back('[');
  for (size_t i = 0; i < hosts.size(); ++i) {
    out.append(i == 0 ? R"({"Host":)" : R"(,{"Host":)");
    AppendName(&out, hosts[i], hosts_plain);
    // Every host stays: kube-scheduler 1.35 and later break ties at random only between the
    // hosts an extender named. A zero score is its decoder's default, so it is not written.
    if (scores[i] != 0 || form == AnswerForm::kLong) {
      out.append(R"(,"Score":)");
      StrAppend(&out, scores[i]);
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

std::string EncodeBindingResult(std::string_view error) {
  std::string out;
  JsonWriter(&out).BeginObject().Key("Error").String(error).EndObject();
  return out;
}

std::string EncodePreemptionResult(const std::vector<MetaVictims>& result) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("NodeNameToMetaVictims").BeginObject();
  for (const MetaVictims& mv : result) {
    w.Key(mv.node).BeginObject().Key("Pods").BeginArray();
    for (const std::string& uid : mv.uids) w.BeginObject().Key("UID").String(uid).EndObject();
    w.EndArray().Key("NumPDBViolations").Int(mv.pdb_violations).EndObject();
  }
  w.EndObject().EndObject();
  return out;
}

std::string EncodeVerbError(std::string_view message) { return EncodeBindingResult(message); }

}  // namespace berth::extender
