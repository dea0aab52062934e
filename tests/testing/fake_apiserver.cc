#include "tests/testing/fake_apiserver.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string_view>
#include <thread>
#include <utility>

#include "core/strings.h"
#include "extender/http_server.h"
#include "httplib.h"

namespace berth::testing {

// ---- resources ----------------------------------------------------------------------------------

struct FakeApiServer::ResourceInfo {
  const char* key;    // the name tests use
  const char* group;  // "" for core
  const char* version;
  const char* plural;  // URL segment
  const char* kind;
  bool namespaced;
  // Has /status; the main resource then ignores status changes.
  bool status_subresource;
  bool unconditional_update;  // PUT without metadata.resourceVersion allowed

  std::string api_version() const {
    return *group != '\0' ? StrCat(group, "/", version) : std::string(version);
  }
  // How kube-apiserver names the resource in messages: "pods", "leases.coordination.k8s.io".
  std::string qualified() const {
    return *group != '\0' ? StrCat(plural, ".", group) : std::string(plural);
  }
  // How kube-apiserver names the kind in Invalid messages: "Pod", "Lease.coordination.k8s.io".
  std::string qualified_kind() const {
    return *group != '\0' ? StrCat(kind, ".", group) : std::string(kind);
  }
};

namespace {

/// What a write may change, as kube-apiserver's strategies for resources with a status
/// subresource decide: through `/status` only the status, through the main resource all but
/// the status. `next` (the written object) is adjusted against `old`.
void KeepStatusRule(bool via_status, bool has_status_subresource, const Json& old, Json* next) {
  if (via_status) {
    Json status = next->contains("status") ? (*next)["status"] : Json();
    *next = old;
    if (status.is_null()) {
      next->erase("status");
    } else {
      (*next)["status"] = std::move(status);
    }
  } else if (has_status_subresource) {
    if (old.contains("status")) {
      (*next)["status"] = old.at("status");
    } else {
      next->erase("status");
    }
  }
}

using ResourceInfo = FakeApiServer::ResourceInfo;
using Clock = std::chrono::steady_clock;

// Custom resources (podgroups, pools, queues) and Leases refuse an update without a
// resourceVersion, as their strategies in kube-apiserver do.
const ResourceInfo kResources[] = {
    {"nodes", "", "v1", "nodes", "Node", false, true, true},
    {"pods", "", "v1", "pods", "Pod", true, true, true},
    {"events", "", "v1", "events", "Event", true, false, true},
    {"events.k8s.io", "events.k8s.io", "v1", "events", "Event", true, false, true},
    {"leases", "coordination.k8s.io", "v1", "leases", "Lease", true, false, false},
    {"podgroups", "scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", true, true, false},
    {"pools", "berth.io", "v1alpha1", "pools", "Pool", false, true, false},
    {"queues", "berth.io", "v1alpha1", "queues", "Queue", false, true, false},
    {"priorityclasses", "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, false,
     true},
};

// Custom resources (CRDs) serialize with sorted keys and take no strategic merge patches.
bool IsCustom(const ResourceInfo& r) {
  return std::string_view(r.group) == "berth.io" || std::string_view(r.group) == "scheduling.x-k8s.io";
}

const ResourceInfo* FindResource(std::string_view key) {
  for (const ResourceInfo& r : kResources) {
    if (key == r.key) return &r;
  }
  return nullptr;
}

/// The resource of a table key, or an error naming it (for the test-facing object API).
absl::StatusOr<const ResourceInfo*> KnownResource(std::string_view key) {
  const ResourceInfo* r = FindResource(key);
  if (r == nullptr) return absl::InvalidArgumentError(StrCat("unknown resource \"", key, "\""));
  return r;
}

const ResourceInfo* FindResource(std::string_view group, std::string_view version,
                                 std::string_view plural) {
  for (const ResourceInfo& r : kResources) {
    if (group == r.group && version == r.version && plural == r.plural) return &r;
  }
  return nullptr;
}

// ---- JSON helpers (never throw on untrusted input) ----------------------------------------------

std::string Str(const Json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string MetaStr(const Json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find("metadata");
  return it == obj.end() ? std::string() : Str(*it, key);
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// ---- kube-apiserver's byte layout ---------------------------------------------------------------

// Built-in types serialize their fields in Go struct order, custom resources with sorted keys
// (nlohmann's order). The orders below are those of the envelopes whose bytes clients and tests
// see: a watch event, TypeMeta + ObjectMeta/ListMeta + spec/status, Status and its details and
// causes. Fields of a spec or status come in sorted order (their shape, not their layout, is what
// the fake models).
enum class KeyOrder { kTop, kMeta, kDetails, kCause, kSorted };

int KeyRank(KeyOrder order, std::string_view key) {
  static constexpr std::string_view kTop[] = {"kind",    "apiVersion", "metadata", "spec",
                                              "status",  "message",    "reason",   "details",
                                              "code",    "items"};
  static constexpr std::string_view kMeta[] = {
      "name",  "generateName", "namespace",         "selfLink",
      "uid",   "resourceVersion", "continue",       "remainingItemCount",
      "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
      "labels", "annotations", "ownerReferences",   "finalizers",
      "managedFields"};
  static constexpr std::string_view kDetails[] = {"name", "group", "kind", "uid", "causes",
                                                  "retryAfterSeconds"};
  static constexpr std::string_view kCause[] = {"reason", "message", "field"};
  auto rank = [&](const auto& table) {
    for (size_t i = 0; i < std::size(table); ++i) {
      if (table[i] == key) return static_cast<int>(i);
    }
    return static_cast<int>(std::size(table));
  };
  switch (order) {
    case KeyOrder::kTop:
      return rank(kTop);
    case KeyOrder::kMeta:
      return rank(kMeta);
    case KeyOrder::kDetails:
      return rank(kDetails);
    case KeyOrder::kCause:
      return rank(kCause);
    case KeyOrder::kSorted:
      break;
  }
  return 0;
}

// Go's encoding/json escapes <, > and & in strings.
void AppendScalar(std::string* out, const Json& j) {
  const std::string s = Dump(j);
  if (!j.is_string()) {
    out->append(s);
    return;
  }
  for (char c : s) {
    if (c == '<') {
      out->append("\\u003c");
    } else if (c == '>') {
      out->append("\\u003e");
    } else if (c == '&') {
      out->append("\\u0026");
    } else {
      out->push_back(c);
    }
  }
}

void AppendKube(std::string* out, const Json& j, KeyOrder order, bool custom) {
  if (j.is_array()) {
    out->push_back('[');
    bool first = true;
    for (const Json& e : j) {
      if (!first) out->push_back(',');
      first = false;
      AppendKube(out, e, order, custom);
    }
    out->push_back(']');
    return;
  }
  if (!j.is_object()) {
    AppendScalar(out, j);
    return;
  }
  std::vector<std::pair<int, const std::string*>> keys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    keys.emplace_back(custom ? 0 : KeyRank(order, it.key()), &it.key());
  }
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  out->push_back('{');
  bool first = true;
  for (const auto& [rank, key] : keys) {
    if (!first) out->push_back(',');
    first = false;
    AppendScalar(out, Json(*key));
    out->push_back(':');
    KeyOrder child = KeyOrder::kSorted;
    if (order == KeyOrder::kTop) {
      if (*key == "metadata") child = KeyOrder::kMeta;
      if (*key == "details") child = KeyOrder::kDetails;
      if (*key == "items") child = KeyOrder::kTop;
    } else if (order == KeyOrder::kDetails && *key == "causes") {
      child = KeyOrder::kCause;
    }
    AppendKube(out, j.at(*key), child, custom);
  }
  out->push_back('}');
}

/// `j` as kube-apiserver writes it (without the trailing newline of a response body). `custom`:
/// an object or list of a custom resource (sorted keys); a Status is always a built-in type.
std::string KubeDump(const Json& j, bool custom) {
  std::string out;
  AppendKube(&out, j, KeyOrder::kTop, custom && Str(j, "kind") != "Status");
  return out;
}

Json WithKind(const ResourceInfo& res, Json obj) {
  obj["kind"] = res.kind;
  obj["apiVersion"] = res.api_version();
  return obj;
}

std::string ObjectKey(const ResourceInfo& res, const std::string& ns, const std::string& name) {
  return res.namespaced ? StrCat(ns, "/", name) : name;
}

std::string NowRfc3339() {
  const time_t now = ::time(nullptr);
  tm utc{};
  ::gmtime_r(&now, &utc);
  char buf[32];
  ::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

std::string NewUid() {
  const uint64_t a = Rng()();
  const uint64_t b = Rng()();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// kube-apiserver's generateName suffix: five characters from an alphabet without vowels.
std::string NameSuffix() {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string s;
  for (int i = 0; i < 5; ++i) s.push_back(kAlphabet[Rng()() % (sizeof(kAlphabet) - 1)]);
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Go's strconv.ParseBool, which kube-apiserver uses for watch and allowWatchBookmarks.
bool ParseBool(std::string_view s) {
  return s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True";
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string Base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// ---- Status objects -----------------------------------------------------------------------------

Json StatusBody(int code, const std::string& reason, const std::string& message,
                Json details = nullptr) {
  Json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
            {"status", "Failure"}, {"message", message}, {"code", code}};
  // An error kube-apiserver passes through from etcd has no reason.
  if (!reason.empty()) s["reason"] = reason;
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

Json SuccessStatus(int code) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", Json::object()},
          {"status", "Success"},
          {"code", code}};
}

Json Details(const ResourceInfo* res, const std::string& name, const std::string& kind = "") {
  Json d = Json::object();
  if (!name.empty()) d["name"] = name;
  if (res != nullptr && *res->group != '\0') d["group"] = res->group;
  if (!kind.empty()) {
    d["kind"] = kind;
  } else if (res != nullptr) {
    d["kind"] = res->plural;
  }
  return d;
}

std::string DefaultReason(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

std::string DefaultMessage(int code) {
  switch (code) {
    case 401:
      return "Unauthorized";
    case 403:
      return "forbidden: the fake API server was told to refuse this request";
    case 404:
      return "the server could not find the requested resource";
    case 409:
      return "the server reported a conflict";
    case 410:
      return "too old resource version";
    case 429:
      return "Too many requests, please try again later.";
    case 500:
      return "Internal error occurred: injected failure";
    case 503:
      return "the server is currently unable to handle the request";
    case 504:
      return "the server was unable to return a response in the time allotted, "
             "but may still be "
             "processing the request";
    default:
      return StrCat("injected failure (HTTP ", code, ")");
  }
}

// ---- selectors ----------------------------------------------------------------------------------

}  // namespace

namespace fake_apiserver_internal {

struct FieldSpec {
  const char* field;
  const char* path;    // dotted path into the object
  const char* absent;  // the value when the path is absent
};

}  // namespace fake_apiserver_internal

namespace {

using fake_apiserver_internal::FieldSpec;

// The field labels kube-apiserver accepts per resource (every resource has metadata.name, and
// namespaced ones metadata.namespace).
std::vector<FieldSpec> SelectableFields(const ResourceInfo& res) {
  std::vector<FieldSpec> f = {{"metadata.name", "metadata.name", ""}};
  if (res.namespaced) f.push_back({"metadata.namespace", "metadata.namespace", ""});
  const std::string_view key = res.key;
  if (key == "pods") {
    f.insert(f.end(), {{"spec.nodeName", "spec.nodeName", ""},
                       {"spec.restartPolicy", "spec.restartPolicy", ""},
                       {"spec.schedulerName", "spec.schedulerName", ""},
                       {"spec.serviceAccountName", "spec.serviceAccountName", ""},
                       {"spec.hostNetwork", "spec.hostNetwork", "false"},
                       {"status.phase", "status.phase", ""},
                       {"status.podIP", "status.podIP", ""},
                       {"status.nominatedNodeName", "status.nominatedNodeName", ""}});
  } else if (key == "nodes") {
    f.push_back({"spec.unschedulable", "spec.unschedulable", "false"});
  } else if (key == "events") {
    f.insert(f.end(), {{"involvedObject.kind", "involvedObject.kind", ""},
                       {"involvedObject.namespace", "involvedObject.namespace", ""},
                       {"involvedObject.name", "involvedObject.name", ""},
                       {"involvedObject.uid", "involvedObject.uid", ""},
                       {"involvedObject.apiVersion", "involvedObject.apiVersion", ""},
                       {"involvedObject.resourceVersion", "involvedObject.resourceVersion", ""},
                       {"involvedObject.fieldPath", "involvedObject.fieldPath", ""},
                       {"reason", "reason", ""},
                       {"reportingComponent", "reportingComponent", ""},
                       {"source", "source.component", ""},
                       {"type", "type", ""}});
  }
  return f;
}

std::string FieldValue(const Json& obj, const FieldSpec& spec) {
  const Json* cur = &obj;
  std::string_view path = spec.path;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string part(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    if (!cur->is_object()) return spec.absent;
    auto it = cur->find(part);
    if (it == cur->end() || it->is_null()) return spec.absent;
    cur = &*it;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  return Dump(*cur);
}

}  // namespace

namespace fake_apiserver_internal {

struct FieldRequirement {
  FieldSpec spec;
  bool negate = false;
  std::string value;
};

struct LabelRequirement {
  enum Op { kEq, kNe, kIn, kNotIn, kExists, kNotExists } op = kEq;
  std::string key;
  std::vector<std::string> values;
};

struct Selectors {
  std::vector<FieldRequirement> fields;
  std::vector<LabelRequirement> labels;
};

}  // namespace fake_apiserver_internal

namespace {

using fake_apiserver_internal::FieldRequirement;
using fake_apiserver_internal::LabelRequirement;
using fake_apiserver_internal::Selectors;

/// "%2C" -> ",", "+" -> " ", as Go's url.QueryUnescape; a malformed escape stays as it is.
std::string QueryUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

/// The query parameters of a request target, each split at its first '=' as kube-apiserver
/// does.
httplib::Params QueryParams(std::string_view target) {
  httplib::Params params;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return params;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    params.emplace(QueryUnescape(kv.substr(0, eq)),
                   eq == std::string_view::npos ? std::string() : QueryUnescape(kv.substr(eq + 1)));
  }
  return params;
}

absl::StatusOr<std::vector<FieldRequirement>> ParseFieldSelector(const ResourceInfo& res,
                                                                 std::string_view text) {
  std::vector<FieldRequirement> out;
  if (Trim(text).empty()) return out;
  const std::vector<FieldSpec> fields = SelectableFields(res);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view term = text.substr(start, comma - start);
    start = comma + 1;
    // The first operator wins, as in apimachinery's fields.ParseSelector.
    size_t op = std::string_view::npos, op_len = 0;
    bool negate = false;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.substr(i, 2) == "!=") {
        op = i, op_len = 2, negate = true;
        break;
      }
      if (term.substr(i, 2) == "==") {
        op = i, op_len = 2;
        break;
      }
      if (term[i] == '=') {
        op = i, op_len = 1;
        break;
      }
    }
    if (op == std::string_view::npos) {
      return absl::InvalidArgumentError(
          StrCat("invalid selector: '", text, "'; can't understand '", term, "'"));
    }
    const std::string field = Trim(term.substr(0, op));
    auto spec = std::find_if(fields.begin(), fields.end(),
                             [&](const FieldSpec& f) { return field == f.field; });
    if (spec == fields.end()) {
      return absl::InvalidArgumentError(StrCat("field label not supported: ", field));
    }
    out.push_back({*spec, negate, std::string(term.substr(op + op_len))});
    if (comma == text.size()) break;
  }
  return out;
}

absl::StatusOr<std::vector<LabelRequirement>> ParseLabelSelector(std::string_view text) {
  std::vector<LabelRequirement> out;
  if (Trim(text).empty()) return out;
  // Split on commas outside parentheses ("a in (x,y),b").
  std::vector<std::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      terms.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  auto bad = [&](std::string_view term) {
    return absl::InvalidArgumentError(
        StrCat("unable to parse requirement: found '", term, "' in label selector '", text, "'"));
  };
  for (std::string_view raw : terms) {
    const std::string term = Trim(raw);
    if (term.empty()) return bad(raw);
    LabelRequirement r;
    if (const size_t paren = term.find('('); paren != std::string::npos) {
      if (term.back() != ')') return bad(term);
      const std::string head = Trim(std::string_view(term).substr(0, paren));
      const size_t space = head.find_last_of(" \t");
      if (space == std::string::npos) return bad(term);
      const std::string op = head.substr(space + 1);
      r.key = Trim(std::string_view(head).substr(0, space));
      if (op == "in") {
        r.op = LabelRequirement::kIn;
      } else if (op == "notin") {
        r.op = LabelRequirement::kNotIn;
      } else {
        return bad(term);
      }
      std::string_view inner = std::string_view(term).substr(paren + 1, term.size() - paren - 2);
      while (true) {
        const size_t c = inner.find(',');
        r.values.push_back(Trim(inner.substr(0, c)));
        if (c == std::string_view::npos) break;
        inner.remove_prefix(c + 1);
      }
    } else if (const size_t ne = term.find("!="); ne != std::string::npos) {
      r.op = LabelRequirement::kNe;
      r.key = Trim(std::string_view(term).substr(0, ne));
      r.values.push_back(Trim(std::string_view(term).substr(ne + 2)));
    } else if (const size_t eq = term.find('='); eq != std::string::npos) {
      r.op = LabelRequirement::kEq;
      r.key = Trim(std::string_view(term).substr(0, eq));
      const size_t skip = term.compare(eq, 2, "==") == 0 ? 2 : 1;
      r.values.push_back(Trim(std::string_view(term).substr(eq + skip)));
    } else if (term.front() == '!') {
      r.op = LabelRequirement::kNotExists;
      r.key = Trim(std::string_view(term).substr(1));
    } else {
      r.op = LabelRequirement::kExists;
      r.key = term;
    }
    if (r.key.empty()) return bad(term);
    out.push_back(std::move(r));
  }
  return out;
}

bool LabelsMatch(const std::vector<LabelRequirement>& reqs, const Json& obj) {
  if (reqs.empty()) return true;
  const Json* labels = nullptr;
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    if (auto l = m->find("labels"); l != m->end() && l->is_object()) labels = &*l;
  }
  for (const LabelRequirement& r : reqs) {
    std::optional<std::string> value;
    if (labels != nullptr) {
      if (auto it = labels->find(r.key); it != labels->end() && it->is_string()) {
        value = it->get<std::string>();
      }
    }
    const bool in = value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
    switch (r.op) {
      case LabelRequirement::kEq:
      case LabelRequirement::kIn:
        if (!in) return false;
        break;
      case LabelRequirement::kNe:
      case LabelRequirement::kNotIn:
        if (in) return false;
        break;
      case LabelRequirement::kExists:
        if (!value) return false;
        break;
      case LabelRequirement::kNotExists:
        if (value) return false;
        break;
    }
  }
  return true;
}

bool FieldsMatch(const std::vector<FieldRequirement>& reqs, const Json& obj) {
  for (const FieldRequirement& r : reqs) {
    if ((FieldValue(obj, r.spec) == r.value) == r.negate) return false;
  }
  return true;
}

// ---- sockets ------------------------------------------------------------------------------------

// The socket a request came in on, to notice a watch client that went away while no event is being
// written (a write would notice, but a quiet watch writes nothing).
int RequestSocket(const httplib::Request& req) {
  if (req.ssl != nullptr) return SSL_get_fd(req.ssl);
  if (req.local_port <= 0 || req.remote_port <= 0) return -1;
  int found = -1;
  extender::ForEachAcceptedSocket(req.local_port, [&](int fd, int peer) {
    if (peer != req.remote_port) return true;
    found = fd;
    return false;
  });
  return found;
}

bool PeerClosed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// kube-apiserver compresses only responses of at least 128 KiB, only with gzip, and never watch
// streams. cpp-httplib would compress every application/json reply with brotli or gzip when the
// client offers it, and would hold a watch's events back in the compressor; narrowing the request's
// Accept-Encoding before replying keeps the fake's bytes like the real server's. (The Request is
// the server's own non-const object; handlers only see it as const.)
void MatchApiserverCompression(const httplib::Request& req, size_t body_size, bool stream) {
  auto& headers = const_cast<httplib::Request&>(req).headers;
  auto it = headers.find("Accept-Encoding");
  if (it == headers.end()) return;
  const bool gzip = it->second.find("gzip") != std::string::npos;
  headers.erase("Accept-Encoding");
  if (!stream && gzip && body_size >= 128 * 1024) headers.emplace("Accept-Encoding", "gzip");
}

std::string EventLine(std::string_view type, const Json& object, bool custom) {
  return StrCat("{\"type\":\"", type, "\",\"object\":", KubeDump(object, custom), "}\n");
}

// A BOOKMARK's object: the kind with only metadata.resourceVersion, plus the zero values a
// built-in Go type cannot omit (a Pod: creationTimestamp null, containers null, empty status).
Json BookmarkObject(const ResourceInfo& r, int64_t rv) {
  Json o = {{"kind", r.kind},
            {"apiVersion", r.api_version()},
            {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
  if (IsCustom(r)) return o;
  o["metadata"]["creationTimestamp"] = nullptr;
  const std::string_view key = r.key;
  if (key == "pods") {
    o["spec"] = {{"containers", nullptr}};
    o["status"] = Json::object();
  } else if (key == "nodes") {
    o["spec"] = Json::object();
    o["status"] = Json::object();
  } else if (key == "leases") {
    o["spec"] = Json::object();
  }
  return o;
}

Json WatchErrorStatus(int code, const std::string& message) {
  return StatusBody(code, DefaultReason(code), message);
}

}  // namespace

// ---- per-request state --------------------------------------------------------------------------

struct FakeApiServer::Route {
  bool api = false;                   // the path has the shape of a resource path
  const ResourceInfo* res = nullptr;  // null: no such resource
  std::string group;
  std::string plural;
  std::string ns;
  std::string name;
  std::string subresource;
  bool namespaced_path = false;
  bool watch = false;
  std::string verb;
};

struct FakeApiServer::Reply {
  int status = 200;
  Json body;
  int retry_after = -1;
};

struct FakeApiServer::Watcher {
  const ResourceInfo* res = nullptr;
  std::string ns;    // "" : all namespaces
  std::string name;  // "" : every object (a watch of one object sets it)
  Selectors selectors;
  bool bookmarks = false;
  int64_t last_rv = 0;  // every event up to here is delivered (or queued in `pending`)
  Clock::time_point deadline;
  Clock::time_point next_bookmark = Clock::time_point::max();
  uint64_t bookmark_seq = 0;
  Clock::time_point timeout_bookmark = Clock::time_point::max();
  int64_t start_rv = 0;     // the resourceVersion it started from
  bool saw_events = false;  // events of its resource happened since it started
  std::vector<std::string> pending;   // chunks to write before anything else
  bool finish_after_pending = false;  // e.g. a 410 ERROR event: then end the stream
  bool drop = false;
  bool end = false;
  int error_code = 0;
  int fd = -1;

  bool Matches(const Json& obj) const {
    if (!ns.empty() && MetaStr(obj, "namespace") != ns) return false;
    if (!name.empty() && MetaStr(obj, "name") != name) return false;
    return FieldsMatch(selectors.fields, obj) && LabelsMatch(selectors.labels, obj);
  }
};

namespace {

using Route = FakeApiServer::Route;
using Reply = FakeApiServer::Reply;

Reply Error(int code, const std::string& message, Json details = nullptr) {
  return {code, StatusBody(code, DefaultReason(code), message, std::move(details)), -1};
}

Reply NotFound(const ResourceInfo& res, const std::string& name) {
  return Error(404, StrCat(res.qualified(), " \"", name, "\" not found"), Details(&res, name));
}

Reply GenericNotFound() {
  return Error(404, "the server could not find the requested resource", Json::object());
}

Reply MethodNotAllowed() {
  return Error(405, "the server does not allow this method on the requested resource");
}

Reply Conflict(const std::string& qualified, const ResourceInfo& res, const std::string& name,
               const std::string& why) {
  return Error(409,
               StrCat("Operation cannot be fulfilled on ", qualified, " \"", name, "\": ", why),
               Details(&res, name, qualified == res.qualified() ? "" : qualified));
}

Reply StaleConflict(const ResourceInfo& res, const std::string& name) {
  return Conflict(res.qualified(), res, name,
                  "the object has been modified; please apply your changes to "
                  "the latest version "
                  "and try again");
}

Reply Invalid(const std::string& qualified_kind, const ResourceInfo& res, const std::string& name,
              const std::string& field, const std::string& reason, const std::string& detail) {
  Json details = Details(&res, name, qualified_kind);
  details["causes"] = Json::array({{{"reason", reason}, {"message", detail}, {"field", field}}});
  return Error(422, StrCat(qualified_kind, " \"", name, "\" is invalid: ", field, ": ", detail),
               std::move(details));
}

// Parses a request body that must be a JSON object.
std::optional<Json> ParseObject(const std::string& body, Reply* error) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    *error = Error(400,
                   "couldn't get version/kind; json parse error: the body "
                   "is not valid JSON");
    return std::nullopt;
  }
  if (!j.is_object()) {
    *error = Error(400,
                   "couldn't get version/kind; json parse error: the body "
                   "is not a JSON object");
    return std::nullopt;
  }
  if (auto m = j.find("metadata"); m != j.end() && !m->is_object() && !m->is_null()) {
    *error = Error(400, "metadata: expected an object");
    return std::nullopt;
  }
  return j;
}

// A body's kind and apiVersion, when present, must be what the endpoint takes (absent ones default
// from the URL, as kube-apiserver's decoder does).
std::optional<Reply> CheckTypeMeta(const Json& body, const std::string& kind,
                                   const std::string& api_version) {
  const std::string k = Str(body, "kind");
  const std::string v = Str(body, "apiVersion");
  if (!v.empty() && v != api_version) {
    return Error(400, StrCat("the API version in the data (", v,
                             ") does not match the expected API version (", api_version, ")"));
  }
  if (!k.empty() && k != kind) {
    return Error(400, StrCat(k, " in version \"", v.empty() ? api_version : v,
                             "\" cannot be handled as a ", kind));
  }
  return std::nullopt;
}

// The Precondition failures kube-apiserver's storage layer reports, as a Conflict on the
// resource (also for pods/binding and pods/eviction) whose message embeds the StorageError.
std::optional<Reply> CheckPreconditions(const Json& preconditions, const Json& stored,
                                        const ResourceInfo& res, const std::string& ns,
                                        const std::string& name) {
  const std::string key =
      StrCat("/registry/", *res.group != '\0' && IsCustom(res) ? StrCat(res.group, "/") : "",
             res.plural, "/", res.namespaced ? StrCat(ns, "/") : "", name);
  auto storage_error = [&](const std::string& why) {
    return Conflict(res.qualified(), res, name,
                    StrCat("StorageError: invalid object, Code: 4, Key: ", key,
                           ", ResourceVersion: 0, AdditionalErrorMsg: ", why));
  };
  const std::string uid = Str(preconditions, "uid");
  if (!uid.empty() && uid != MetaStr(stored, "uid")) {
    return storage_error(StrCat("Precondition failed: UID in precondition: ", uid,
                                ", UID in object meta: ", MetaStr(stored, "uid")));
  }
  const std::string rv = Str(preconditions, "resourceVersion");
  if (!rv.empty() && rv != MetaStr(stored, "resourceVersion")) {
    return storage_error(StrCat("Precondition failed: ResourceVersion in precondition: ", rv,
                                ", ResourceVersion in object meta: ",
                                MetaStr(stored, "resourceVersion")));
  }
  return std::nullopt;
}

Route ParseRoute(const httplib::Request& req) {
  Route r;
  std::vector<std::string> segs;
  for (size_t i = 0; i < req.path.size();) {
    size_t slash = req.path.find('/', i);
    if (slash == std::string::npos) slash = req.path.size();
    if (slash > i) segs.push_back(req.path.substr(i, slash - i));
    i = slash + 1;
  }
  size_t i = 0;
  std::string version;
  if (segs.size() >= 2 && segs[0] == "api") {
    version = segs[1];
    i = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis") {
    r.group = segs[1];
    version = segs[2];
    i = 3;
  } else {
    return r;
  }
  if (segs.size() - i >= 3 && segs[i] == "namespaces") {
    r.ns = segs[i + 1];
    r.namespaced_path = true;
    i += 2;
  }
  if (i >= segs.size()) return r;  // discovery paths: not served
  r.api = true;
  r.plural = segs[i];
  if (i + 1 < segs.size()) r.name = segs[i + 1];
  if (i + 2 < segs.size()) r.subresource = segs[i + 2];
  r.res = i + 3 < segs.size() ? nullptr : FindResource(r.group, version, r.plural);
  if (r.res != nullptr && !r.res->namespaced && r.namespaced_path) r.res = nullptr;
  r.watch = req.has_param("watch") && ParseBool(req.get_param_value("watch"));
  if (req.method == "GET" || req.method == "HEAD") {
    r.verb = r.watch ? "watch" : (r.name.empty() ? "list" : "get");
  } else if (req.method == "POST") {
    r.verb = "create";
  } else if (req.method == "PUT") {
    r.verb = "update";
  } else if (req.method == "PATCH") {
    r.verb = "patch";
  } else if (req.method == "DELETE") {
    r.verb = r.name.empty() ? "deletecollection" : "delete";
  }
  return r;
}

}  // namespace

// ---- strategic merge patch ---------------------------------------------------------------------

namespace {

// The lists of the built-in types the fake serves that merge by key under a strategic merge
// patch (patchStrategy "merge" in their Go types), by field name; "" merges a list of scalars as a
// set. Every other list is replaced.
const char* MergeKey(std::string_view field) {
  static constexpr std::pair<std::string_view, const char*> kKeys[] = {
      {"conditions", "type"},        {"containers", "name"},      {"initContainers", "name"},
      {"ephemeralContainers", "name"}, {"env", "name"},            {"ports", "containerPort"},
      {"volumeMounts", "mountPath"}, {"volumeDevices", "devicePath"}, {"volumes", "name"},
      {"imagePullSecrets", "name"},  {"ownerReferences", "uid"},  {"addresses", "type"},
      {"taints", "key"},             {"finalizers", ""}};
  for (const auto& [name, key] : kKeys) {
    if (name == field) return key;
  }
  return nullptr;
}

Json WithoutDirectives(Json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (!it.key().empty() && it.key()[0] == '$') {
        it = j.erase(it);
      } else {
        *it = WithoutDirectives(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (Json& e : j) e = WithoutDirectives(e);
  }
  return j;
}

Json StrategicMergeList(Json target, const Json& patch, const char* merge_key) {
  if (!target.is_array()) target = Json::array();
  if (*merge_key == '\0') {  // a set of scalars
    for (const Json& e : patch) {
      if (std::find(target.begin(), target.end(), e) == target.end()) target.push_back(e);
    }
    return target;
  }
  for (const Json& e : patch) {
    if (e.is_object() && Str(e, "$patch") == "replace") return WithoutDirectives(Json(patch));
  }
  for (const Json& e : patch) {
    if (!e.is_object() || !e.contains(merge_key)) {
      target.push_back(WithoutDirectives(e));
      continue;
    }
    auto same = std::find_if(target.begin(), target.end(), [&](const Json& t) {
      return t.is_object() && t.contains(merge_key) && t.at(merge_key) == e.at(merge_key);
    });
    if (Str(e, "$patch") == "delete") {
      if (same != target.end()) target.erase(same);
    } else if (same != target.end()) {
      *same = StrategicMerge(std::move(*same), e);
    } else {
      target.push_back(WithoutDirectives(e));
    }
  }
  return target;
}

}  // namespace

// Applies a strategic merge patch as kube-apiserver does for the built-in types: maps merge, null
// deletes, the lists of MergeKey merge by key, and the $patch (replace, delete),
// $deleteFromPrimitiveList/<field>, $retainKeys and $setElementOrder/<field> directives.
Json StrategicMerge(Json target, const Json& patch) {
  if (!patch.is_object()) return patch;
  const std::string directive = Str(patch, "$patch");
  if (directive == "replace") return WithoutDirectives(patch);
  if (directive == "delete") return nullptr;
  if (!target.is_object()) target = Json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& key = it.key();
    const Json& value = it.value();
    constexpr std::string_view kDeleteFrom = "$deleteFromPrimitiveList/";
    if (key.compare(0, kDeleteFrom.size(), kDeleteFrom) == 0) {
      const std::string field = key.substr(kDeleteFrom.size());
      if (auto t = target.find(field); t != target.end() && t->is_array() && value.is_array()) {
        Json kept = Json::array();
        for (const Json& e : *t) {
          if (std::find(value.begin(), value.end(), e) == value.end()) kept.push_back(e);
        }
        *t = std::move(kept);
      }
      continue;
    }
    if (!key.empty() && key[0] == '$') continue;  // $patch, $retainKeys, $setElementOrder/...
    if (value.is_null()) {
      target.erase(key);
    } else if (value.is_object()) {
      Json merged = StrategicMerge(target.contains(key) ? target[key] : Json(), value);
      if (merged.is_null()) {
        target.erase(key);
      } else {
        target[key] = std::move(merged);
      }
    } else if (const char* mk = MergeKey(key); value.is_array() && mk != nullptr) {
      target[key] = StrategicMergeList(target.contains(key) ? target[key] : Json(), value, mk);
    } else {
      target[key] = WithoutDirectives(value);
    }
  }
  if (auto retain = patch.find("$retainKeys"); retain != patch.end() && retain->is_array()) {
    for (auto it = target.begin(); it != target.end();) {
      if (std::find(retain->begin(), retain->end(), Json(it.key())) == retain->end()) {
        it = target.erase(it);
      } else {
        ++it;
      }
    }
  }
  return target;
}

// ---- lifecycle ----------------------------------------------------------------------------------

FakeApiServer::FakeApiServer(Options options)
    : options_(std::move(options)),
      tls_(options_.tls_material != nullptr ? options_.tls_material : &SharedTlsMaterial()) {
  token_ = options_.token;
  start_status_ = Start();
  kubelet_ = std::thread([this] { KubeletLoop(); });
}

FakeApiServer::~FakeApiServer() {
  Stop();
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  kubelet_.join();
}

absl::Status FakeApiServer::Start() {
  std::lock_guard<std::mutex> life(lifecycle_mu_);
  if (server_) return absl::OkStatus();
  std::unique_ptr<httplib::Server> server;
  if (options_.tls) {
    if (!tls_->ok()) return absl::InternalError(StrCat("TLS material: ", tls_->error));
    server = std::make_unique<httplib::SSLServer>(
        tls_->server_cert_file.c_str(), tls_->server_key_file.c_str(),
        options_.require_client_cert ? tls_->ca_cert_file.c_str() : nullptr);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  if (!server->is_valid()) {
    return absl::InternalError(StrCat("cannot load the server certificate ", tls_->server_cert_file,
                                      " and key ", tls_->server_key_file));
  }
  Install(*server);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = false;
  }
  if (port_ == 0) {
    port_ = server->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      port_ = 0;
      return absl::UnavailableError("cannot bind 127.0.0.1 to an ephemeral port");
    }
  } else {
    // The port was ours a moment ago; a restart may race a socket still closing.
    bool bound = false;
    for (int attempt = 0; attempt < 40 && !bound; ++attempt) {
      bound = server->bind_to_port("127.0.0.1", port_);
      if (!bound) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!bound) return absl::UnavailableError(StrCat("cannot bind 127.0.0.1:", port_, " again"));
  }
  listener_done_ = false;
  httplib::Server* s = server.get();
  listener_ = std::thread([this, s] {
    s->listen_after_bind();
    listener_done_ = true;
  });
  // httplib's stop() does nothing until the accept loop runs; wait for it so Stop() is safe.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!s->is_running() && !listener_done_ && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  server_ = std::move(server);
  return absl::OkStatus();
}

void FakeApiServer::Stop() {
  std::lock_guard<std::mutex> life(lifecycle_mu_);
  if (!server_) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->stop();
  // The listener thread joins the workers; a worker waiting on an idle kept-alive connection only
  // notices when its socket is shut down. Repeat until the listener is done, so that a connection
  // accepted at the last moment is cut too.
  while (!listener_done_) {
    extender::ForEachAcceptedSocket(port_, [](int fd, int) {
      ::shutdown(fd, SHUT_RDWR);
      return true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  listener_.join();
  server_.reset();
}

bool FakeApiServer::running() const {
  std::lock_guard<std::mutex> life(lifecycle_mu_);
  return server_ != nullptr;
}

std::string FakeApiServer::url() const {
  return StrCat(options_.tls ? "https" : "http", "://127.0.0.1:", port_);
}

std::string FakeApiServer::Kubeconfig(bool client_cert) const {
  std::string y = StrCat("apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n",
                         "- name: fake\n  cluster:\n    server: ", url(), "\n");
  if (options_.tls) StrAppend(&y, "    certificate-authority-data: ", Base64(tls_->ca_pem), "\n");
  StrAppend(&y,
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: "
            "fake\n",
            "    namespace: default\nusers:\n- name: fake\n  user:\n");
  if (client_cert) {
    StrAppend(&y, "    client-certificate-data: ", Base64(tls_->client_cert_pem), "\n",
              "    client-key-data: ", Base64(tls_->client_key_pem), "\n");
  } else {
    StrAppend(&y, "    token: ", token(), "\n");
  }
  return y;
}

void FakeApiServer::Install(httplib::Server& s) {
  const size_t threads = static_cast<size_t>(std::max(4, options_.threads));
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_tcp_nodelay(true);
  // SO_REUSEADDR only: with cpp-httplib's default SO_REUSEPORT another process could bind the same
  // port while this server is stopped and both would then accept.
  s.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_keep_alive_max_count(std::numeric_limits<size_t>::max());
  s.set_keep_alive_timeout(60);
  s.set_read_timeout(10, 0);
  s.set_write_timeout(10, 0);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    // kube-apiserver (Go's url.ParseQuery) splits a query parameter at its first '='; httplib
    // splits at its last, which would read "fieldSelector=status.phase!=Failed" (a selector
    // sent unescaped, as the captures' clients do) as "Failed". Replaced in place (the Request
    // is the server's own object; see MatchApiserverCompression), not in a copy.
    const_cast<httplib::Request&>(req).params = QueryParams(req.target);
    Handle(req, res);
  };
  s.Get(".*", handler);
  s.Post(".*", handler);
  s.Put(".*", handler);
  s.Patch(".*", handler);
  s.Delete(".*", handler);
  // Errors cpp-httplib raises itself (a method it does not route, a malformed request) get a Status
  // body too; replies of Handle already have theirs.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string body =
        KubeDump(StatusBody(res.status, DefaultReason(res.status),
                            StrCat("HTTP ", res.status, " for ", req.method, " ", req.path)),
                 false) +
        "\n";
    MatchApiserverCompression(req, body.size(), false);
    res.set_content(body, "application/json");
  });
  s.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        res.status = 500;
        const std::string body =
            KubeDump(StatusBody(500, "InternalError", StrCat("Internal error occurred: ", what)),
                     false) +
            "\n";
        MatchApiserverCompression(req, body.size(), false);
        res.set_content(body, "application/json");
      });
}

// ---- request handling ---------------------------------------------------------------------------

std::string FakeApiServer::Authenticate(const httplib::Request& req) const {
  if (options_.tls && options_.require_client_cert && req.ssl != nullptr) {
    X509* cert = SSL_get0_peer_certificate(req.ssl);
    if (cert != nullptr && SSL_get_verify_result(req.ssl) == X509_V_OK) {
      std::string cn;
      X509_NAME* subject = X509_get_subject_name(cert);
      const int idx = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
      if (idx >= 0) {
        const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx));
        cn.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                  static_cast<size_t>(ASN1_STRING_length(data)));
      }
      return cn.empty() ? "client-certificate" : cn;
    }
  }
  const std::string header = Trim(req.get_header_value("Authorization"));
  const size_t space = header.find(' ');
  if (space == std::string::npos) return {};
  std::string scheme = header.substr(0, space);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string presented = Trim(std::string_view(header).substr(space + 1));
  if (scheme != "bearer" || presented.empty()) return {};
  std::lock_guard<std::mutex> lk(mu_);
  return presented == token_ ? "token" : "";
}

void FakeApiServer::Handle(const httplib::Request& req, httplib::Response& res) {
  RecordedCall call;
  call.method = req.method;
  call.path = req.path;
  for (const auto& [k, v] : req.params) call.query.emplace(k, v);
  call.content_type = req.get_header_value("Content-Type");
  call.body = req.body;
  const Route route = ParseRoute(req);
  call.verb = route.api ? route.verb : "";
  call.api_group = route.group;
  call.resource = route.plural;
  call.subresource = route.subresource;
  call.ns = route.ns;
  call.name = route.name;
  call.user = Authenticate(req);
  call.remote_port = req.remote_port;

  Reply reply;
  bool streaming = false;
  std::optional<InjectedFailure> failure;
  if (!call.user.empty()) {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = failures_.begin(); it != failures_.end(); ++it) {
      if (!it->method.empty() && it->method != req.method) continue;
      if (req.path.compare(0, it->path_prefix.size(), it->path_prefix) != 0) continue;
      failure = *it;
      if (it->times > 0 && --it->times == 0) failures_.erase(it);
      break;
    }
  }
  if (failure && failure->delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(failure->delay_ms));
  }
  if (failure && failure->code == 0) failure.reset();
  if (call.user.empty()) {
    reply = Error(401, "Unauthorized");
  } else if (failure) {
    const int code = failure->code;
    reply = Error(code, failure->message.empty() ? DefaultMessage(code) : failure->message);
    reply.body["reason"] = failure->reason.empty() ? DefaultReason(code) : failure->reason;
    if (failure->retry_after_seconds >= 0) {
      reply.retry_after = failure->retry_after_seconds;
      reply.body["details"] = {{"retryAfterSeconds", failure->retry_after_seconds}};
    }
  } else {
    try {
      reply = Serve(req, res, route, &streaming);
    } catch (const std::exception& e) {
      reply = Error(500, StrCat("Internal error occurred: ", e.what()));
      streaming = false;
    }
  }
  if (!streaming) {
    res.status = reply.status;
    if (reply.retry_after >= 0) res.set_header("Retry-After", std::to_string(reply.retry_after));
    // Compact JSON and a newline, as kube-apiserver's encoder writes it.
    std::string body =
        KubeDump(reply.body, route.res != nullptr && IsCustom(*route.res)) + "\n";
    MatchApiserverCompression(req, body.size(), false);
    call.response_bytes = body.size();
    res.set_content(std::move(body), "application/json");
  }
  call.status = streaming ? 200 : reply.status;
  std::lock_guard<std::mutex> lk(mu_);
  calls_.push_back(std::move(call));
}

FakeApiServer::Reply FakeApiServer::Serve(const httplib::Request& req, httplib::Response& res,
                                          const Route& route, bool* streaming) {
  if (!route.api && (req.method == "GET" || req.method == "HEAD")) return ServeDiscovery(req.path);
  if (!route.api || route.res == nullptr) return GenericNotFound();
  const ResourceInfo& r = *route.res;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (uninstalled_.count(r.key) > 0) return GenericNotFound();
  }
  const std::string& sub = route.subresource;
  const bool pods = std::string_view(r.key) == "pods";
  if (!sub.empty()) {
    const bool known = (sub == "status" && r.status_subresource) ||
                       (pods && (sub == "binding" || sub == "eviction"));
    if (!known) return GenericNotFound();
    if ((sub == "binding" || sub == "eviction") && req.method != "POST") return MethodNotAllowed();
  }
  const std::string& m = req.method;
  // A namespaced object is only reachable under its namespace.
  if (r.namespaced && !route.namespaced_path && !route.name.empty()) return GenericNotFound();
  if (m == "GET" || m == "HEAD") {
    if (route.name.empty() || route.watch) {
      return route.watch ? StartWatch(req, res, route, streaming) : ServeList(req, route);
    }
    std::unique_lock<std::mutex> lk(mu_);
    // A get with a resourceVersion is served from the watch cache: not older than it.
    const std::string rv_text = req.get_param_value("resourceVersion");
    if (!rv_text.empty() && rv_text != "0") {
      const std::optional<int64_t> want = ParseInt(rv_text);
      if (!want || *want < 0) return Error(400, StrCat("invalid resource version: ", rv_text));
      if (auto late = WaitForRvLocked(lk, *want)) return *late;
    }
    const auto& objects = store_[r.key];
    auto it = objects.find(ObjectKey(r, route.ns, route.name));
    if (it == objects.end()) return NotFound(r, route.name);
    return {200, WithKind(r, it->second), -1};
  }
  if (r.namespaced && !route.namespaced_path) return MethodNotAllowed();
  if (m == "POST") {
    if (route.name.empty()) return ServeCreate(route, req.body);
    if (sub == "binding") return ServeBinding(route, req.body);
    if (sub == "eviction") return ServeEviction(route, req.body);
    return MethodNotAllowed();
  }
  if (route.name.empty()) return MethodNotAllowed();
  if (m == "PUT") return ServeUpdate(route, req.body);
  if (m == "PATCH") return ServePatch(route, req.get_header_value("Content-Type"), req.body);
  if (m == "DELETE") {
    if (!sub.empty()) return MethodNotAllowed();
    return ServeDelete(route, req.body);
  }
  return MethodNotAllowed();
}

// ---- discovery ----------------------------------------------------------------------------------

FakeApiServer::Reply FakeApiServer::ServeDiscovery(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::lock_guard<std::mutex> lk(mu_);
  auto installed = [&](const ResourceInfo& r) { return uninstalled_.count(r.key) == 0; };
  auto group_version = [](const ResourceInfo& r) {
    return Json{{"groupVersion", r.api_version()}, {"version", r.version}};
  };
  if (p == "/api") {
    return {200,
            {{"kind", "APIVersions"},
             {"versions", Json::array({"v1"})},
             {"serverAddressByClientCIDRs",
              Json::array({{{"clientCIDR", "0.0.0.0/0"},
                            {"serverAddress", StrCat("127.0.0.1:", port_)}}})}},
            -1};
  }
  if (p == "/apis") {
    Json groups = Json::array();
    std::set<std::string> seen;
    for (const ResourceInfo& r : kResources) {
      if (*r.group == '\0' || !installed(r) || !seen.insert(r.group).second) continue;
      groups.push_back({{"name", r.group},
                        {"versions", Json::array({group_version(r)})},
                        {"preferredVersion", group_version(r)}});
    }
    return {200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}}, -1};
  }
  for (const ResourceInfo& r : kResources) {
    if (*r.group == '\0' || !installed(r) || p != StrCat("/apis/", r.group)) continue;
    return {200,
            {{"kind", "APIGroup"},
             {"apiVersion", "v1"},
             {"name", r.group},
             {"versions", Json::array({group_version(r)})},
             {"preferredVersion", group_version(r)}},
            -1};
  }
  // /api/v1 and /apis/GROUP/VERSION: the resources installed in that group version.
  Json resources = Json::array();
  std::string gv;
  for (const ResourceInfo& r : kResources) {
    const std::string prefix = *r.group == '\0' ? "/api/v1" : StrCat("/apis/", r.api_version());
    if (p != prefix || !installed(r)) continue;
    gv = r.api_version();
    std::string singular = r.kind;
    for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    resources.push_back(
        {{"name", r.plural},
         {"singularName", singular},
         {"namespaced", r.namespaced},
         {"kind", r.kind},
         {"verbs", Json::array({"create", "delete", "get", "list", "patch", "update", "watch"})}});
    if (r.status_subresource) {
      resources.push_back({{"name", StrCat(r.plural, "/status")},
                           {"singularName", ""},
                           {"namespaced", r.namespaced},
                           {"kind", r.kind},
                           {"verbs", Json::array({"get", "patch", "update"})}});
    }
    if (std::string_view(r.key) == "pods") {
      resources.push_back({{"name", "pods/binding"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"kind", "Binding"},
                           {"verbs", Json::array({"create"})}});
      resources.push_back({{"name", "pods/eviction"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"group", "policy"},
                           {"version", "v1"},
                           {"kind", "Eviction"},
                           {"verbs", Json::array({"create"})}});
    }
  }
  if (gv.empty()) return GenericNotFound();
  return {200,
          {{"kind", "APIResourceList"},
           {"apiVersion", "v1"},
           {"groupVersion", gv},
           {"resources", resources}},
          -1};
}

// ---- list ---------------------------------------------------------------------------------------

namespace {

// kube-apiserver's answer to a read from a resourceVersion it has not reached.
Reply TooLargeResourceVersion(int64_t want, int64_t current, int retry_after) {
  Json details = {{"causes", Json::array({{{"reason", "ResourceVersionTooLarge"},
                                           {"message", "Too large resource version"}}})}};
  if (retry_after > 0) details["retryAfterSeconds"] = retry_after;
  Reply r = Error(504, StrCat("Timeout: Too large resource version: ", want, ", current: ", current),
                  std::move(details));
  r.retry_after = retry_after > 0 ? retry_after : -1;
  return r;
}

// ListOptions that kube-apiserver's validation refuses: 422 Invalid on meta.k8s.io ListOptions.
Reply InvalidListOptions(const std::string& field, const std::string& type,
                         const std::string& detail) {
  Json details = {{"group", "meta.k8s.io"},
                  {"kind", "ListOptions"},
                  {"causes", Json::array({{{"reason", type}, {"message", detail}, {"field", field}}})}};
  return Error(422, StrCat("ListOptions.meta.k8s.io \"\" is invalid: ", field, ": ", detail),
               std::move(details));
}

}  // namespace

std::optional<FakeApiServer::Reply> FakeApiServer::WaitForRvLocked(std::unique_lock<std::mutex>& lk,
                                                                   int64_t want) {
  if (rv_ >= want) return std::nullopt;
  cv_.wait_for(lk, std::chrono::milliseconds(options_.too_large_rv_wait_ms),
               [&] { return rv_ >= want || stopping_; });
  if (rv_ >= want) return std::nullopt;
  return TooLargeResourceVersion(want, rv_, 1);
}

FakeApiServer::Reply FakeApiServer::ServeList(const httplib::Request& req, const Route& route) {
  const ResourceInfo& r = *route.res;
  const bool custom = IsCustom(r);
  const std::string field_text = req.get_param_value("fieldSelector");
  const std::string label_text = req.get_param_value("labelSelector");
  auto fields = ParseFieldSelector(r, field_text);
  if (!fields.ok()) return Error(400, std::string(fields.status().message()));
  auto labels = ParseLabelSelector(label_text);
  if (!labels.ok()) return Error(400, std::string(labels.status().message()));
  int64_t limit = 0;
  if (req.has_param("limit")) {
    auto parsed = ParseInt(req.get_param_value("limit"));
    if (!parsed || *parsed < 0) {
      return Error(400, StrCat("invalid limit \"", req.get_param_value("limit"),
                               "\": expected a non-negative integer"));
    }
    limit = *parsed;
  }
  const std::string scope = StrCat(r.key, "/", route.ns);
  const std::string cont = req.get_param_value("continue");
  const std::string rv_text = req.get_param_value("resourceVersion");
  const std::string match = req.get_param_value("resourceVersionMatch");
  // kube-apiserver's ValidateListOptions.
  if (!match.empty()) {
    if (rv_text.empty()) {
      return InvalidListOptions("resourceVersionMatch", "FieldValueForbidden",
                                "Forbidden: resourceVersionMatch is forbidden unless "
                                "resourceVersion is provided");
    }
    if (!cont.empty()) {
      return InvalidListOptions("resourceVersionMatch", "FieldValueForbidden",
                                "Forbidden: resourceVersionMatch is forbidden when continue is "
                                "provided");
    }
    if (match != "Exact" && match != "NotOlderThan") {
      return InvalidListOptions(
          "resourceVersionMatch", "FieldValueNotSupported",
          StrCat("Unsupported value: \"", match,
                 "\": supported values: \"Exact\", \"NotOlderThan\", \"\""));
    }
    if (match == "Exact" && rv_text == "0") {
      return InvalidListOptions("resourceVersionMatch", "FieldValueForbidden",
                                "Forbidden: resourceVersionMatch \"exact\" is forbidden for "
                                "resourceVersion \"0\"");
    }
  }
  std::optional<int64_t> want;
  if (!rv_text.empty() && rv_text != "0") {
    want = ParseInt(rv_text);
    if (!want || *want < 0) return Error(400, StrCat("invalid resource version: ", rv_text));
  }
  if (!cont.empty() && want) {
    return Error(400, "specifying resource version is not allowed when using continue");
  }
  // Exact, or a paginated list from a resourceVersion: an etcd read at that revision. Otherwise
  // (NotOlderThan, or no limit) the watch cache answers, with its current state.
  const bool exact = want && (match == "Exact" || (match.empty() && limit > 0));

  std::unique_lock<std::mutex> lk(mu_);
  std::shared_ptr<const std::vector<Json>> items;
  size_t offset = 0;
  int64_t rv = rv_;
  Watcher filter;
  filter.ns = route.ns;
  filter.selectors.fields = *std::move(fields);
  filter.selectors.labels = *std::move(labels);
  if (!cont.empty()) {
    auto it = continues_.find(cont);
    if (it == continues_.end()) {
      // Tokens this server issued and then forgot are expired; anything else is garbage.
      constexpr std::string_view kPrefix = "fake-continue-";
      const std::string_view tail = std::string_view(cont).substr(
          cont.compare(0, kPrefix.size(), kPrefix) == 0 ? kPrefix.size() : cont.size());
      auto id = ParseInt(tail);
      if (id && *id >= 1 && *id <= continues_issued_) {
        return Error(410,
                     "The provided continue parameter is too old to display a "
                     "consistent list "
                     "result. You can start a new list without the continue parameter.");
      }
      return Error(400, StrCat("continue key is not valid: ", cont));
    }
    if (it->second.scope != scope) {
      return Error(400,
                   "continue key is not valid: it was issued for another "
                   "resource or namespace");
    }
    items = it->second.items;
    offset = it->second.offset;
    rv = it->second.rv;
  } else {
    std::map<std::string, Json> at = store_[r.key];
    if (exact) {
      if (*want > rv_) {
        return {500,
                StatusBody(500, "", "etcdserver: mvcc: required revision is a future revision"),
                -1};
      }
      if (*want < compacted_rv_) {
        return Error(410, "The resourceVersion for the provided list is too old.");
      }
      // The state at that revision: undo the later writes.
      for (auto h = history_.rbegin(); h != history_.rend() && h->rv > *want; ++h) {
        if (h->res != &r) continue;
        const Json& obj = h->type == "ADDED" ? h->object : h->prev;
        const std::string key = ObjectKey(r, MetaStr(obj, "namespace"), MetaStr(obj, "name"));
        if (h->type == "ADDED") {
          at.erase(key);
        } else {
          Json before = h->prev;
          before.erase("kind");
          before.erase("apiVersion");
          at[key] = std::move(before);
        }
      }
      rv = *want;
    } else if (want) {
      if (match.empty() || limit == 0) {
        if (auto late = WaitForRvLocked(lk, *want)) return *late;
      } else if (*want > rv_) {
        // NotOlderThan with a limit reads etcd, which does not wait.
        return TooLargeResourceVersion(*want, rv_, 0);
      }
      at = store_[r.key];
      rv = rv_;
    }
    auto all = std::make_shared<std::vector<Json>>();
    for (const auto& [key, obj] : at) {
      if (filter.Matches(obj)) all->push_back(obj);
    }
    items = std::move(all);
  }
  const size_t remaining = items->size() - std::min(offset, items->size());
  const size_t take = limit > 0 ? std::min(remaining, static_cast<size_t>(limit)) : remaining;
  Json list_items = Json::array();
  for (size_t i = offset; i < offset + take; ++i) {
    // Items of a custom resource list carry their kind and apiVersion (built-in ones do not).
    list_items.push_back(custom ? WithKind(r, (*items)[i]) : (*items)[i]);
  }
  Json metadata = {{"resourceVersion", std::to_string(rv)}};
  // Custom resource lists always carry continue, empty on the last page.
  if (custom) metadata["continue"] = "";
  if (take < remaining) {
    const std::string token = StrCat("fake-continue-", ++continues_issued_);
    continues_[token] = ContinueToken{items, offset + take, rv, scope};
    metadata["continue"] = token;
    if (field_text.empty() && label_text.empty()) metadata["remainingItemCount"] = remaining - take;
  }
  return {200,
          {{"kind", StrCat(r.kind, "List")},
           {"apiVersion", r.api_version()},
           {"metadata", std::move(metadata)},
           {"items", std::move(list_items)}},
          -1};
}

// ---- watch --------------------------------------------------------------------------------------

FakeApiServer::Reply FakeApiServer::StartWatch(const httplib::Request& req, httplib::Response& res,
                                               const Route& route, bool* streaming) {
  const ResourceInfo& r = *route.res;
  const bool custom = IsCustom(r);
  auto w = std::make_shared<Watcher>();
  w->res = &r;
  w->ns = route.ns;
  w->name = route.name;
  auto fields = ParseFieldSelector(r, req.get_param_value("fieldSelector"));
  if (!fields.ok()) return Error(400, std::string(fields.status().message()));
  auto labels = ParseLabelSelector(req.get_param_value("labelSelector"));
  if (!labels.ok()) return Error(400, std::string(labels.status().message()));
  w->selectors.fields = *std::move(fields);
  w->selectors.labels = *std::move(labels);
  w->bookmarks = ParseBool(req.get_param_value("allowWatchBookmarks"));
  int64_t timeout = options_.default_watch_timeout_seconds;
  if (req.has_param("timeoutSeconds")) {
    auto t = ParseInt(req.get_param_value("timeoutSeconds"));
    if (!t || *t < 0) {
      return Error(400, StrCat("invalid timeoutSeconds \"", req.get_param_value("timeoutSeconds"),
                               "\": expected a non-negative integer"));
    }
    if (*t > 0) timeout = *t;
  }
  const auto now = Clock::now();
  w->deadline = now + std::chrono::seconds(timeout);
  if (options_.bookmark_interval_ms > 0 && w->bookmarks) {
    w->next_bookmark = now + std::chrono::milliseconds(options_.bookmark_interval_ms);
  }
  // kube-apiserver 1.26 sends a watch that asked for bookmarks one about two seconds before its
  // timeout, if events of its resource happened meanwhile.
  if (w->bookmarks && timeout > 2) w->timeout_bookmark = w->deadline - std::chrono::seconds(2);
  const std::string rv_text = req.get_param_value("resourceVersion");
  std::optional<int64_t> from;
  if (!rv_text.empty() && rv_text != "0") {
    from = ParseInt(rv_text);
    if (!from || *from < 0) {
      return Error(400,
                   StrCat("invalid resourceVersion \"", rv_text, "\": expected a decimal integer"));
    }
  }
  w->fd = RequestSocket(req);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!from) {
      // "Any" or "most recent": the current state as synthetic ADDED events (all in one chunk),
      // then live.
      std::string initial;
      for (const auto& [key, obj] : store_[r.key]) {
        if (w->Matches(obj)) initial += EventLine("ADDED", WithKind(r, obj), custom);
      }
      w->last_rv = rv_;
      if (w->bookmarks && ParseBool(req.get_param_value("sendInitialEvents"))) {
        Json bookmark = BookmarkObject(r, rv_);
        bookmark["metadata"]["annotations"] = {{"k8s.io/initial-events-end", "true"}};
        initial += EventLine("BOOKMARK", bookmark, custom);
      }
      if (!initial.empty()) w->pending.push_back(std::move(initial));
    } else if (*from < compacted_rv_) {
      const std::string message =
          StrCat("too old resource version: ", *from, " (", compacted_rv_, ")");
      if (options_.watch_410_as_http_status) return Error(410, message);
      w->pending.push_back(EventLine("ERROR", WatchErrorStatus(410, message), false));
      w->finish_after_pending = true;
      w->last_rv = rv_;
    } else {
      // From a resourceVersion newer than the server's: silent until it gets there.
      w->last_rv = *from;
    }
    w->start_rv = w->last_rv;
    w->bookmark_seq = bookmark_seq_;
    watchers_.insert(w);
  }
  MatchApiserverCompression(req, 0, true);
  res.status = 200;
  res.set_chunked_content_provider(
      "application/json",
      [this, w](size_t, httplib::DataSink& sink) {
        std::vector<std::string> chunks;
        bool finish = false;
        const bool keep = WatchStep(*w, &chunks, &finish);
        // One chunk per event, as kube-apiserver flushes each. (An empty write would end
        // cpp-httplib's chunked loop as if the stream were done.)
        size_t written = 0;
        for (const std::string& chunk : chunks) {
          if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) return false;
          written += chunk.size();
        }
        if (written > 0) {
          std::lock_guard<std::mutex> lk(mu_);
          watch_bytes_[w->res->key] += written;
        }
        if (!keep) return false;  // cut: no terminating chunk
        if (finish) {
          sink.done();
          return true;
        }
        if (chunks.empty() && w->fd >= 0 && PeerClosed(w->fd)) return false;
        return true;
      },
      [this, w](bool) {
        std::lock_guard<std::mutex> lk(mu_);
        watchers_.erase(w);
      });
  *streaming = true;
  return {};
}

bool FakeApiServer::HasWorkLocked(const Watcher& w) const {
  const auto now = Clock::now();
  return stopping_ || w.drop || w.end || w.error_code != 0 || !w.pending.empty() ||
         w.finish_after_pending || rv_ > w.last_rv || w.last_rv < compacted_rv_ ||
         uninstalled_.count(w.res->key) > 0 || (w.bookmarks && w.bookmark_seq != bookmark_seq_) ||
         now >= w.next_bookmark || now >= w.timeout_bookmark || now >= w.deadline;
}

bool FakeApiServer::WatchStep(Watcher& w, std::vector<std::string>* out, bool* finish) {
  std::unique_lock<std::mutex> lk(mu_);
  // Short waits, so that shutdown, timeouts and clients that left are noticed.
  cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return HasWorkLocked(w); });
  if (stopping_ || w.drop) return false;
  *out = std::move(w.pending);
  w.pending.clear();
  if (w.finish_after_pending) {
    *finish = true;
    return true;
  }
  const ResourceInfo& r = *w.res;
  const bool custom = IsCustom(r);
  if (w.error_code != 0) {
    const int code = w.error_code;
    const std::string message =
        code == 410 ? StrCat("too old resource version: ", w.last_rv, " (", rv_, ")")
                    : StrCat(
                          "an error on the server (\"injected watch error\") has "
                          "prevented the "
                          "request from succeeding");
    out->push_back(EventLine("ERROR", WatchErrorStatus(code, message), false));
    *finish = true;
    return true;
  }
  if (uninstalled_.count(r.key) > 0) {
    *finish = true;
    return true;
  }
  if (w.last_rv < compacted_rv_) {
    out->push_back(EventLine("ERROR",
                             WatchErrorStatus(410, StrCat("too old resource version: ", w.last_rv,
                                                          " (", compacted_rv_, ")")),
                             false));
    *finish = true;
    return true;
  }
  auto it = std::upper_bound(history_.begin(), history_.end(), w.last_rv,
                             [](int64_t rv, const HistoryEvent& e) { return rv < e.rv; });
  for (; it != history_.end(); ++it) {
    const HistoryEvent& e = *it;
    if (e.res != &r) continue;
    w.saw_events = true;
    // As kube-apiserver's watch cache filters: an object entering the selection is ADDED, one
    // leaving it is DELETED (its previous state at the event's resourceVersion).
    const bool now_in = e.type != "DELETED" && w.Matches(e.object);
    const bool was_in = !e.prev.is_null() && w.Matches(e.prev);
    if (now_in && !was_in) {
      out->push_back(EventLine("ADDED", e.object, custom));
    } else if (now_in) {
      out->push_back(EventLine(e.type == "ADDED" ? "ADDED" : "MODIFIED", e.object, custom));
    } else if (was_in) {
      Json gone = e.prev;
      gone["metadata"]["resourceVersion"] = std::to_string(e.rv);
      out->push_back(EventLine("DELETED", gone, custom));
    }
  }
  w.last_rv = std::max(w.last_rv, rv_);  // a watch from a future resourceVersion stays there
  const auto now = Clock::now();
  // A watch from a future resourceVersion gets no bookmark before the server gets there.
  const bool caught_up = rv_ >= w.start_rv;
  bool bookmark = w.bookmarks && caught_up &&
                  (w.bookmark_seq != bookmark_seq_ || now >= w.next_bookmark);
  if (now >= w.timeout_bookmark) {
    bookmark = bookmark || (w.saw_events && caught_up);
    w.timeout_bookmark = Clock::time_point::max();
  }
  if (bookmark) {
    out->push_back(EventLine("BOOKMARK", BookmarkObject(r, rv_), custom));
    w.bookmark_seq = bookmark_seq_;
  }
  if (now >= w.next_bookmark && options_.bookmark_interval_ms > 0) {
    w.next_bookmark = now + std::chrono::milliseconds(options_.bookmark_interval_ms);
  }
  if (w.end || now >= w.deadline) *finish = true;
  return true;
}

// ---- writes -------------------------------------------------------------------------------------

int64_t FakeApiServer::CommitLocked(const ResourceInfo& res, const std::string& type, Json* object,
                                    const Json* prev) {
  ++rv_;
  (*object)["metadata"]["resourceVersion"] = std::to_string(rv_);
  HistoryEvent e;
  e.rv = rv_;
  e.res = &res;
  e.type = type;
  e.object = WithKind(res, *object);
  if (prev != nullptr) e.prev = WithKind(res, *prev);
  history_.push_back(std::move(e));
  cv_.notify_all();
  return rv_;
}

absl::StatusOr<Json> FakeApiServer::CreateLocked(const ResourceInfo& res, const std::string& ns,
                                                 Json object) {
  if (!object.is_object()) return absl::InvalidArgumentError("the object is not a JSON object");
  object.erase("kind");
  object.erase("apiVersion");
  Json& meta = object["metadata"];
  if (meta.is_null()) meta = Json::object();
  if (!meta.is_object()) return absl::InvalidArgumentError("metadata: expected an object");
  if (res.namespaced) {
    std::string namespace_name = ns.empty() ? Str(meta, "namespace") : ns;
    if (namespace_name.empty()) {
      return absl::InvalidArgumentError(StrCat(res.key, " are namespaced: no namespace given"));
    }
    meta["namespace"] = namespace_name;
  } else {
    meta.erase("namespace");
  }
  std::string name = Str(meta, "name");
  if (name.empty() && !Str(meta, "generateName").empty()) {
    name = StrCat(Str(meta, "generateName"), NameSuffix());
    meta["name"] = name;
  }
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "metadata.name: Required value: name or generateName is required");
  }
  const std::string key = ObjectKey(res, Str(meta, "namespace"), name);
  auto& objects = store_[res.key];
  if (objects.count(key) > 0) {
    return absl::AlreadyExistsError(StrCat(res.qualified(), " \"", name, "\" already exists"));
  }
  if (Str(meta, "uid").empty()) meta["uid"] = NewUid();
  if (Str(meta, "creationTimestamp").empty()) meta["creationTimestamp"] = NowRfc3339();
  if (std::string_view(res.key) == "pods") grace_ends_.erase(key);
  CommitLocked(res, "ADDED", &object, nullptr);
  objects[key] = object;
  return WithKind(res, std::move(object));
}

absl::StatusOr<Json> FakeApiServer::UpdateLocked(const ResourceInfo& res, const std::string& ns,
                                                 Json object) {
  if (!object.is_object()) return absl::InvalidArgumentError("the object is not a JSON object");
  object.erase("kind");
  object.erase("apiVersion");
  Json& meta = object["metadata"];
  if (!meta.is_object()) return absl::InvalidArgumentError("metadata: expected an object");
  const std::string namespace_name =
      res.namespaced ? (ns.empty() ? Str(meta, "namespace") : ns) : "";
  if (res.namespaced) meta["namespace"] = namespace_name;
  const std::string name = Str(meta, "name");
  auto& objects = store_[res.key];
  auto it = objects.find(ObjectKey(res, namespace_name, name));
  if (name.empty() || it == objects.end()) {
    return absl::NotFoundError(StrCat(res.qualified(), " \"", name, "\" not found"));
  }
  const Json prev = it->second;
  for (const char* kept : {"uid", "creationTimestamp"}) {
    if (Str(meta, kept).empty() && !MetaStr(prev, kept).empty()) meta[kept] = MetaStr(prev, kept);
  }
  if (FinishDeletionLocked(res, it->first, object, prev)) return WithKind(res, std::move(object));
  CommitLocked(res, "MODIFIED", &object, &prev);
  it->second = object;
  return WithKind(res, std::move(object));
}

FakeApiServer::Reply FakeApiServer::ServeCreate(const Route& route, const std::string& body) {
  const ResourceInfo& r = *route.res;
  Reply error;
  std::optional<Json> obj = ParseObject(body, &error);
  if (!obj) return error;
  if (auto bad = CheckTypeMeta(*obj, r.kind, r.api_version())) return *bad;
  const std::string body_ns = MetaStr(*obj, "namespace");
  if (r.namespaced && !body_ns.empty() && body_ns != route.ns) {
    return Error(400,
                 "the namespace of the provided object does not match the "
                 "namespace sent on "
                 "the request");
  }
  if (MetaStr(*obj, "name").empty() && MetaStr(*obj, "generateName").empty()) {
    return Invalid(r.qualified_kind(), r, "", "metadata.name", "FieldValueRequired",
                   "Required value: name or generateName is required");
  }
  // What kube-apiserver's create strategies reset: a new pod starts Pending whatever status it was
  // sent with; a custom resource with a status subresource starts without status.
  if (std::string_view(r.key) == "pods") {
    (*obj)["status"] = {{"phase", "Pending"}};
    if (auto spec = obj->find("spec");
        spec != obj->end() && spec->is_object() && Str(*spec, "schedulerName").empty()) {
      (*spec)["schedulerName"] = "default-scheduler";
    }
  } else if (r.status_subresource && std::string_view(r.key) != "nodes") {
    obj->erase("status");
  }
  const std::string name = MetaStr(*obj, "name");
  std::lock_guard<std::mutex> lk(mu_);
  auto created = CreateLocked(r, route.ns, *std::move(obj));
  if (!created.ok()) {
    if (absl::IsAlreadyExists(created.status())) {
      Reply exists = Error(409, std::string(created.status().message()), Details(&r, name));
      exists.body["reason"] = "AlreadyExists";
      return exists;
    }
    return Error(400, std::string(created.status().message()));
  }
  return {201, *std::move(created), -1};
}

FakeApiServer::Reply FakeApiServer::ServeUpdate(const Route& route, const std::string& body) {
  const ResourceInfo& r = *route.res;
  Reply error;
  std::optional<Json> obj = ParseObject(body, &error);
  if (!obj) return error;
  if (auto bad = CheckTypeMeta(*obj, r.kind, r.api_version())) return *bad;
  obj->erase("kind");
  obj->erase("apiVersion");
  if (MetaStr(*obj, "name") != route.name) {
    return Error(400, StrCat("the name of the object (", MetaStr(*obj, "name"),
                             ") does not match the name on the URL (", route.name, ")"));
  }
  const std::string body_ns = MetaStr(*obj, "namespace");
  if (r.namespaced && !body_ns.empty() && body_ns != route.ns) {
    return Error(400,
                 "the namespace of the provided object does not match the "
                 "namespace sent on "
                 "the request");
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto& objects = store_[r.key];
  auto it = objects.find(ObjectKey(r, route.ns, route.name));
  if (it == objects.end()) return NotFound(r, route.name);
  const Json& old = it->second;
  const std::string rv = MetaStr(*obj, "resourceVersion");
  if (rv.empty() && !r.unconditional_update) {
    return Invalid(r.qualified_kind(), r, route.name, "metadata.resourceVersion",
                   "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update");
  }
  if (!rv.empty() && rv != MetaStr(old, "resourceVersion")) return StaleConflict(r, route.name);
  Json preconditions = {{"uid", MetaStr(*obj, "uid")}};
  if (auto bad = CheckPreconditions(preconditions, old, r, route.ns, route.name)) return *bad;

  Json next = *std::move(obj);
  KeepStatusRule(route.subresource == "status", r.status_subresource, old, &next);
  Json& meta = next["metadata"];
  if (r.namespaced) meta["namespace"] = route.ns;
  meta["uid"] = MetaStr(old, "uid");
  meta["creationTimestamp"] = MetaStr(old, "creationTimestamp");
  meta["resourceVersion"] = MetaStr(old, "resourceVersion");
  // kube-apiserver does not write an update that changes nothing: same resourceVersion, no event.
  if (next == old) return {200, WithKind(r, old), -1};
  const Json prev = old;
  // Clearing the last finalizer of an object being deleted deletes it.
  if (FinishDeletionLocked(r, it->first, next, prev)) return {200, WithKind(r, std::move(next)), -1};
  CommitLocked(r, "MODIFIED", &next, &prev);
  it->second = next;
  return {200, WithKind(r, std::move(next)), -1};
}

FakeApiServer::Reply FakeApiServer::ServePatch(const Route& route, const std::string& content_type,
                                               const std::string& body) {
  const ResourceInfo& r = *route.res;
  const std::string media = Trim(std::string_view(content_type).substr(0, content_type.find(';')));
  const bool merge =
      media == "application/merge-patch+json" || media == "application/strategic-merge-patch+json";
  const bool json_patch = media == "application/json-patch+json";
  const bool strategic = media == "application/strategic-merge-patch+json";
  // Custom resources take no strategic merge patch.
  if ((!merge && !json_patch) || (strategic && IsCustom(r))) {
    return Error(415, "415: Unsupported Media Type", Json::object());
  }
  Json patch = Json::parse(body, nullptr, false);
  if (patch.is_discarded()) return Error(400, "error decoding patch: the body is not valid JSON");
  if (json_patch && !patch.is_array()) {
    return Error(400, "error decoding patch: a JSON patch must be an array of operations");
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto& objects = store_[r.key];
  auto it = objects.find(ObjectKey(r, route.ns, route.name));
  if (it == objects.end()) return NotFound(r, route.name);
  const Json& old = it->second;
  Json next = old;
  if (merge) {
    // metadata.resourceVersion in a merge patch is a precondition.
    const std::string rv = MetaStr(patch, "resourceVersion");
    if (!rv.empty() && rv != MetaStr(old, "resourceVersion")) return StaleConflict(r, route.name);
    if (strategic) {
      next = StrategicMerge(std::move(next), patch);
    } else {
      next.merge_patch(patch);
    }
  } else {
    try {
      next = old.patch(patch);
    } catch (const Json::exception& e) {
      return Invalid(r.qualified_kind(), r, route.name, "patch", "FieldValueInvalid",
                     StrCat("the JSON patch cannot be applied: ", e.what()));
    }
    const std::string rv = MetaStr(next, "resourceVersion");
    if (!rv.empty() && rv != MetaStr(old, "resourceVersion")) return StaleConflict(r, route.name);
  }
  if (!next.is_object() || !next["metadata"].is_object()) {
    return Error(400, "the patched object is not a JSON object with metadata");
  }
  next.erase("kind");
  next.erase("apiVersion");
  if (MetaStr(next, "name") != route.name) {
    return Error(400, StrCat("the name of the object (", MetaStr(next, "name"),
                             ") does not match the name on the URL (", route.name, ")"));
  }
  if (r.namespaced && MetaStr(next, "namespace") != route.ns) {
    return Error(400,
                 "the namespace of the provided object does not match the "
                 "namespace sent on "
                 "the request");
  }
  if (!MetaStr(next, "uid").empty() && MetaStr(next, "uid") != MetaStr(old, "uid")) {
    return Invalid(r.qualified_kind(), r, route.name, "metadata.uid", "FieldValueInvalid",
                   StrCat("Invalid value: \"", MetaStr(next, "uid"), "\": field is immutable"));
  }
  KeepStatusRule(route.subresource == "status", r.status_subresource, old, &next);
  Json& meta = next["metadata"];
  meta["uid"] = MetaStr(old, "uid");
  meta["creationTimestamp"] = MetaStr(old, "creationTimestamp");
  meta["resourceVersion"] = MetaStr(old, "resourceVersion");
  if (next == old) return {200, WithKind(r, old), -1};
  const Json prev = old;
  // Clearing the last finalizer of an object being deleted deletes it.
  if (FinishDeletionLocked(r, it->first, next, prev)) return {200, WithKind(r, std::move(next)), -1};
  CommitLocked(r, "MODIFIED", &next, &prev);
  it->second = next;
  return {200, WithKind(r, std::move(next)), -1};
}

FakeApiServer::Reply FakeApiServer::ServeDelete(const Route& route, const std::string& body) {
  Json options = Json::object();
  if (!Trim(body).empty()) {
    Reply error;
    std::optional<Json> parsed = ParseObject(body, &error);
    if (!parsed) return error;
    options = *std::move(parsed);
  }
  std::lock_guard<std::mutex> lk(mu_);
  return DeleteLocked(*route.res, route.ns, route.name, options);
}

// ---- graceful deletion --------------------------------------------------------------------------

namespace {

bool HasFinalizers(const Json& obj) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return false;
  auto f = m->find("finalizers");
  return f != m->end() && f->is_array() && !f->empty();
}

bool Terminating(const Json& obj) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return false;
  auto d = m->find("deletionTimestamp");
  return d != m->end() && !d->is_null();
}

std::string Rfc3339After(int64_t seconds) {
  const time_t at = ::time(nullptr) + static_cast<time_t>(seconds);
  tm utc{};
  ::gmtime_r(&at, &utc);
  char buf[32];
  ::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace

void FakeApiServer::RemoveLocked(const ResourceInfo& r, std::string key, Json last) {
  store_[r.key].erase(key);
  if (std::string_view(r.key) == "pods") grace_ends_.erase(key);
  const Json prev = last;
  CommitLocked(r, "DELETED", &last, &prev);
}

FakeApiServer::Reply FakeApiServer::DeleteLocked(const ResourceInfo& r, const std::string& ns,
                                                 const std::string& name, const Json& options) {
  auto& objects = store_[r.key];
  const std::string key = ObjectKey(r, ns, name);
  auto it = objects.find(key);
  if (it == objects.end()) return NotFound(r, name);
  if (auto pre = options.find("preconditions"); pre != options.end() && pre->is_object()) {
    if (auto bad = CheckPreconditions(*pre, it->second, r, ns, name)) return *bad;
  }
  const bool pod = std::string_view(r.key) == "pods";
  const bool finalizers = HasFinalizers(it->second);
  if (!pod && !finalizers) {
    Json last = it->second;
    RemoveLocked(r, key, last);
    last["metadata"]["resourceVersion"] = std::to_string(rv_);
    return {200, WithKind(r, std::move(last)), -1};
  }
  // The grace period: the request's, else the pod's terminationGracePeriodSeconds (30 when
  // unset). The pod strategy makes it 0 for a pod no kubelet runs (unbound or finished).
  int64_t grace = 0;
  if (pod) {
    grace = 30;
    const Json& spec = it->second.contains("spec") ? it->second["spec"] : Json::object();
    if (auto g = spec.find("terminationGracePeriodSeconds");
        spec.is_object() && g != spec.end() && g->is_number_integer()) {
      grace = g->get<int64_t>();
    }
    if (auto g = options.find("gracePeriodSeconds"); g != options.end() && g->is_number_integer()) {
      grace = g->get<int64_t>();
    }
    if (grace < 0) grace = 1;
    std::string phase;
    if (auto st = it->second.find("status"); st != it->second.end()) phase = Str(*st, "phase");
    if (Str(spec, "nodeName").empty() || phase == "Succeeded" || phase == "Failed") grace = 0;
  }
  if (Terminating(it->second)) {
    // Deleting what is being deleted only ever shortens a pod's grace period.
    const Json& meta = it->second["metadata"];
    const int64_t current = meta.value("deletionGracePeriodSeconds", int64_t{0});
    if (!pod || grace >= current) return {200, WithKind(r, it->second), -1};
  }
  Json next = it->second;
  next["metadata"]["deletionTimestamp"] = Rfc3339After(grace);
  next["metadata"]["deletionGracePeriodSeconds"] = grace;
  const Json prev = it->second;
  CommitLocked(r, "MODIFIED", &next, &prev);
  it->second = next;
  if (pod && (grace == 0 || options_.kubelet)) {
    grace_ends_[key] = Clock::now() + std::chrono::seconds(grace);
  }
  if (!finalizers && grace == 0) {
    RemoveLocked(r, key, next);
    next["metadata"]["resourceVersion"] = std::to_string(rv_);
  } else {
    cv_.notify_all();  // the kubelet's turn
  }
  return {200, WithKind(r, std::move(next)), -1};
}

bool FakeApiServer::FinishDeletionLocked(const ResourceInfo& r, const std::string& key,
                                         const Json& next, const Json& prev) {
  if (!Terminating(next) || HasFinalizers(next)) return false;
  if (std::string_view(r.key) == "pods") {
    auto due = grace_ends_.find(key);
    if (due == grace_ends_.end() || due->second > Clock::now()) return false;
  }
  // Only DELETED, carrying the state before the write (its finalizers still listed).
  RemoveLocked(r, key, prev);
  return true;
}

void FakeApiServer::KubeletLoop() {
  const ResourceInfo& pods = *FindResource("pods");
  std::unique_lock<std::mutex> lk(mu_);
  while (!closing_) {
    cv_.wait_for(lk, std::chrono::milliseconds(20));
    if (closing_ || stopping_) continue;
    const auto now = Clock::now();
    std::vector<std::string> done;
    for (auto it = grace_ends_.begin(); it != grace_ends_.end();) {
      auto pod = store_[pods.key].find(it->first);
      if (pod == store_[pods.key].end()) {
        it = grace_ends_.erase(it);
        continue;
      }
      // Its containers are gone; finalizers still hold the object.
      if (it->second <= now && !HasFinalizers(pod->second)) done.push_back(it->first);
      ++it;
    }
    for (const std::string& key : done) RemoveLocked(pods, key, store_[pods.key].at(key));
  }
}

FakeApiServer::Reply FakeApiServer::ServeBinding(const Route& route, const std::string& body) {
  const ResourceInfo& r = *route.res;
  Reply error;
  std::optional<Json> binding = ParseObject(body, &error);
  if (!binding) return error;
  if (auto bad = CheckTypeMeta(*binding, "Binding", "v1")) return *bad;
  if (MetaStr(*binding, "name") != route.name) {
    return Error(400, "name in URL does not match name in Binding object");
  }
  const std::string body_ns = MetaStr(*binding, "namespace");
  if (!body_ns.empty() && body_ns != route.ns) {
    return Error(400,
                 "the namespace of the provided object does not match the "
                 "namespace sent on "
                 "the request");
  }
  const Json target = binding->contains("target") ? (*binding)["target"] : Json::object();
  const std::string target_kind = Str(target, "kind");
  const std::string node = Str(target, "name");
  if (!target_kind.empty() && target_kind != "Node") {
    return Invalid("Binding", r, route.name, "target.kind", "FieldValueNotSupported",
                   StrCat("Unsupported value: \"", target_kind,
                          "\": supported values: \"Node\", \"<empty>\""));
  }
  if (node.empty()) {
    return Invalid("Binding", r, route.name, "target.name", "FieldValueRequired", "Required value");
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto& pods = store_[r.key];
  auto it = pods.find(ObjectKey(r, route.ns, route.name));
  if (it == pods.end()) return NotFound(r, route.name);
  const Json& pod = it->second;
  const std::string qualified = "pods/binding";
  Json preconditions = {{"uid", MetaStr(*binding, "uid")},
                        {"resourceVersion", MetaStr(*binding, "resourceVersion")}};
  if (auto bad = CheckPreconditions(preconditions, pod, r, route.ns, route.name)) return *bad;
  if (auto m = pod.find("metadata");
      m != pod.end() && m->contains("deletionTimestamp") && !m->at("deletionTimestamp").is_null()) {
    return Conflict(qualified, r, route.name,
                    StrCat("pod ", route.name, " is being deleted, cannot be assigned to a host"));
  }
  std::string assigned;
  if (auto s = pod.find("spec"); s != pod.end()) assigned = Str(*s, "nodeName");
  if (!assigned.empty()) {
    return Conflict(qualified, r, route.name,
                    StrCat("pod ", route.name, " is already assigned to node \"", assigned, "\""));
  }
  Json next = pod;
  if (!next["spec"].is_object()) next["spec"] = Json::object();
  next["spec"]["nodeName"] = node;
  // The binding's annotations land on the pod in the same write (device assignments).
  if (auto m = binding->find("metadata"); m != binding->end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) {
      Json& annotations = next["metadata"]["annotations"];
      if (!annotations.is_object()) annotations = Json::object();
      for (const auto& [k, v] : a->items()) {
        if (v.is_string()) annotations[k] = v;
      }
    }
  }
  Json& status = next["status"];
  if (!status.is_object()) status = Json::object();
  Json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = Json::array();
  Json scheduled = {{"type", "PodScheduled"},
                    {"status", "True"},
                    {"lastProbeTime", nullptr},
                    {"lastTransitionTime", NowRfc3339()}};
  auto c = std::find_if(conditions.begin(), conditions.end(),
                        [](const Json& j) { return Str(j, "type") == "PodScheduled"; });
  if (c != conditions.end()) {
    *c = std::move(scheduled);
  } else {
    conditions.push_back(std::move(scheduled));
  }
  const Json prev = pod;
  CommitLocked(r, "MODIFIED", &next, &prev);
  it->second = std::move(next);
  return {201, SuccessStatus(201), -1};
}

FakeApiServer::Reply FakeApiServer::ServeEviction(const Route& route, const std::string& body) {
  const ResourceInfo& r = *route.res;
  Reply error;
  std::optional<Json> eviction = ParseObject(body, &error);
  if (!eviction) return error;
  if (auto bad = CheckTypeMeta(*eviction, "Eviction", "policy/v1")) return *bad;
  if (MetaStr(*eviction, "name") != route.name) {
    return Error(400, "name in URL does not match name in Eviction object");
  }
  Json options = Json::object();
  if (auto opts = eviction->find("deleteOptions"); opts != eviction->end() && opts->is_object()) {
    options = *opts;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto& pods = store_[r.key];
  auto it = pods.find(ObjectKey(r, route.ns, route.name));
  if (it == pods.end()) return NotFound(r, route.name);
  if (auto pre = options.find("preconditions"); pre != options.end() && pre->is_object()) {
    if (auto bad = CheckPreconditions(*pre, it->second, r, route.ns, route.name)) return *bad;
  }
  std::string phase;
  if (auto s = it->second.find("status"); s != it->second.end()) phase = Str(*s, "phase");
  // Disruption budgets do not protect pods that are not running (finished, Pending) or already
  // terminating.
  const bool ignores_budget = phase == "Succeeded" || phase == "Failed" || phase == "Pending" ||
                              Terminating(it->second);
  if (!ignores_budget && blocked_evictions_.count(StrCat(route.ns, "/", route.name)) > 0) {
    // As a budget whose status the disruption controller computed: no name, no Retry-After.
    Json details = {{"causes", Json::array({{{"reason", "DisruptionBudget"},
                                             {"message",
                                              "The disruption budget fake-pdb needs 1 "
                                              "healthy pods and has 1 currently"}}})}};
    return Error(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                 std::move(details));
  }
  // Then a delete with the eviction's options: graceful for a pod bound to a node.
  Reply deleted = DeleteLocked(r, route.ns, route.name, options);
  if (deleted.status != 200) return deleted;
  return {201, SuccessStatus(201), -1};
}

// ---- test-facing state --------------------------------------------------------------------------

void FakeApiServer::SetToken(std::string token) {
  std::lock_guard<std::mutex> lk(mu_);
  token_ = std::move(token);
}

std::string FakeApiServer::token() const {
  std::lock_guard<std::mutex> lk(mu_);
  return token_;
}

absl::StatusOr<Json> FakeApiServer::Create(const std::string& resource, const std::string& ns,
                                           Json object) {
  absl::StatusOr<const ResourceInfo*> found = KnownResource(resource);
  if (!found.ok()) return found.status();
  const ResourceInfo& r = **found;
  std::lock_guard<std::mutex> lk(mu_);
  return CreateLocked(r, ns, std::move(object));
}

absl::StatusOr<Json> FakeApiServer::Update(const std::string& resource, const std::string& ns,
                                           Json object) {
  absl::StatusOr<const ResourceInfo*> found = KnownResource(resource);
  if (!found.ok()) return found.status();
  const ResourceInfo& r = **found;
  std::lock_guard<std::mutex> lk(mu_);
  return UpdateLocked(r, ns, std::move(object));
}

absl::StatusOr<Json> FakeApiServer::Apply(const std::string& resource, const std::string& ns,
                                          Json object) {
  absl::StatusOr<const ResourceInfo*> found = KnownResource(resource);
  if (!found.ok()) return found.status();
  const ResourceInfo& r = **found;
  std::lock_guard<std::mutex> lk(mu_);
  const std::string namespace_name = ns.empty() ? MetaStr(object, "namespace") : ns;
  const std::string key = ObjectKey(r, namespace_name, MetaStr(object, "name"));
  if (store_[r.key].count(key) > 0) return UpdateLocked(r, ns, std::move(object));
  return CreateLocked(r, ns, std::move(object));
}

absl::StatusOr<Json> FakeApiServer::Delete(const std::string& resource, const std::string& ns,
                                           const std::string& name) {
  absl::StatusOr<const ResourceInfo*> found = KnownResource(resource);
  if (!found.ok()) return found.status();
  const ResourceInfo& r = **found;
  std::lock_guard<std::mutex> lk(mu_);
  auto& objects = store_[r.key];
  auto it = objects.find(ObjectKey(r, ns, name));
  if (it == objects.end()) {
    return absl::NotFoundError(StrCat(r.qualified(), " \"", name, "\" not found"));
  }
  Json last = it->second;
  RemoveLocked(r, ObjectKey(r, ns, name), last);
  last["metadata"]["resourceVersion"] = std::to_string(rv_);
  return WithKind(r, std::move(last));
}

absl::StatusOr<Json> FakeApiServer::DeleteGracefully(const std::string& resource,
                                                     const std::string& ns,
                                                     const std::string& name,
                                                     std::optional<int64_t> grace_seconds) {
  absl::StatusOr<const ResourceInfo*> found = KnownResource(resource);
  if (!found.ok()) return found.status();
  Json options = Json::object();
  if (grace_seconds) options["gracePeriodSeconds"] = *grace_seconds;
  std::lock_guard<std::mutex> lk(mu_);
  Reply r = DeleteLocked(**found, ns, name, options);
  if (r.status == 404) return absl::NotFoundError(Str(r.body, "message"));
  if (r.status != 200) return absl::FailedPreconditionError(Str(r.body, "message"));
  return r.body;
}

std::optional<Json> FakeApiServer::Get(const std::string& resource, const std::string& ns,
                                       const std::string& name) const {
  const ResourceInfo* r = FindResource(resource);
  if (r == nullptr) return std::nullopt;
  std::lock_guard<std::mutex> lk(mu_);
  auto objects = store_.find(r->key);
  if (objects == store_.end()) return std::nullopt;
  auto it = objects->second.find(ObjectKey(*r, ns, name));
  if (it == objects->second.end()) return std::nullopt;
  return WithKind(*r, it->second);
}

std::vector<Json> FakeApiServer::List(const std::string& resource) const {
  std::vector<Json> out;
  const ResourceInfo* r = FindResource(resource);
  if (r == nullptr) return out;
  std::lock_guard<std::mutex> lk(mu_);
  auto objects = store_.find(r->key);
  if (objects == store_.end()) return out;
  for (const auto& [key, obj] : objects->second) out.push_back(WithKind(*r, obj));
  return out;
}

int64_t FakeApiServer::current_rv() const {
  std::lock_guard<std::mutex> lk(mu_);
  return rv_;
}

void FakeApiServer::CompactHistory() {
  std::lock_guard<std::mutex> lk(mu_);
  history_.clear();
  compacted_rv_ = rv_;
  cv_.notify_all();
}

void FakeApiServer::ExpireContinueTokens() {
  std::lock_guard<std::mutex> lk(mu_);
  continues_.clear();
}

void FakeApiServer::SendBookmarks() {
  std::lock_guard<std::mutex> lk(mu_);
  ++bookmark_seq_;
  cv_.notify_all();
}

void FakeApiServer::DropWatches() {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& w : watchers_) w->drop = true;
  cv_.notify_all();
}

void FakeApiServer::EndWatches() {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& w : watchers_) w->end = true;
  cv_.notify_all();
}

void FakeApiServer::InjectWatchError(const std::string& resource, int code) {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& w : watchers_) {
    if (resource == w->res->key) w->error_code = code;
  }
  cv_.notify_all();
}

int FakeApiServer::open_watches(const std::string& resource) const {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const auto& w : watchers_) {
    if (resource.empty() || resource == w->res->key) ++n;
  }
  return n;
}

void FakeApiServer::InjectFailure(InjectedFailure failure) {
  if (failure.times == 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  failures_.push_back(std::move(failure));
}

void FakeApiServer::ClearFailures() {
  std::lock_guard<std::mutex> lk(mu_);
  failures_.clear();
}

void FakeApiServer::SetEvictionBlocked(const std::string& ns, const std::string& name,
                                       bool blocked) {
  std::lock_guard<std::mutex> lk(mu_);
  if (blocked) {
    blocked_evictions_.insert(StrCat(ns, "/", name));
  } else {
    blocked_evictions_.erase(StrCat(ns, "/", name));
  }
}

void FakeApiServer::SetInstalled(const std::string& resource, bool installed) {
  std::lock_guard<std::mutex> lk(mu_);
  if (installed) {
    uninstalled_.erase(resource);
  } else {
    uninstalled_.insert(resource);
  }
  cv_.notify_all();
}

std::vector<RecordedCall> FakeApiServer::calls() const {
  std::lock_guard<std::mutex> lk(mu_);
  return calls_;
}

void FakeApiServer::ClearCalls() {
  std::lock_guard<std::mutex> lk(mu_);
  calls_.clear();
}

namespace {

template <class Pred>
std::vector<Json> Bodies(const std::vector<RecordedCall>& calls, Pred pred) {
  std::vector<Json> out;
  for (const RecordedCall& c : calls) {
    if (c.status < 200 || c.status >= 300 || !pred(c)) continue;
    Json j = Json::parse(c.body, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

std::vector<Json> FakeApiServer::bindings() const {
  return Bodies(calls(), [](const RecordedCall& c) {
    return c.method == "POST" && c.resource == "pods" && c.subresource == "binding";
  });
}

std::vector<Json> FakeApiServer::evictions() const {
  return Bodies(calls(), [](const RecordedCall& c) {
    return c.method == "POST" && c.resource == "pods" && c.subresource == "eviction";
  });
}

std::vector<Json> FakeApiServer::events() const {
  return Bodies(calls(), [](const RecordedCall& c) {
    return c.method == "POST" && c.resource == "events" && c.subresource.empty() &&
           (c.api_group.empty() || c.api_group == "events.k8s.io");
  });
}

std::vector<Json> FakeApiServer::patches() const {
  return Bodies(calls(), [](const RecordedCall& c) { return c.method == "PATCH"; });
}

int FakeApiServer::CountCalls(const std::string& method, const std::string& path_prefix) const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int>(std::count_if(calls_.begin(), calls_.end(), [&](const RecordedCall& c) {
    return (method.empty() || c.method == method) &&
           c.path.compare(0, path_prefix.size(), path_prefix) == 0;
  }));
}

std::map<std::string, uint64_t> FakeApiServer::watch_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return watch_bytes_;
}

bool FakeApiServer::WaitFor(const std::function<bool(FakeApiServer&)>& predicate,
                            std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (predicate(*this)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> FakeApiServer::ResourceNames() {
  std::vector<std::string> out;
  for (const ResourceInfo& r : kResources) out.emplace_back(r.key);
  return out;
}

}  // namespace berth::testing
