// The Kubernetes manifests operators apply (manifests/, with `kubectl apply -f` or `-k`) and the
// examples (manifests/examples/): every object well formed and applied in a working order; the
// settings that must agree across files agreeing (kube-scheduler's configuration, berth's
// configuration and flags, the Deployment, the Service, RBAC); the CRDs structural; the examples
// valid against the CRDs and readable by berth's own decoders; and the RBAC matching other tests
// use to check berth's API calls against what the manifests grant.

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/objects.h"
#include "core/resources.h"
#include "extender/build_info.h"
#include "extender/config.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "nlohmann/json.hpp"
#include "tests/testing/files.h"
#include "tests/testing/manifests.h"

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The smallest extender weight that lets berth's scores decide. kube-scheduler's in-tree score
// plugins have default weights summing to 12 and score 0..100 each, 1200 points at most; an
// extender's score s (0..10) counts s x weight x 10 (extender-protocol.md 2.3). With a weight of
// 13 or more, berth's full range (1300+) exceeds everything the plugins can add.
constexpr int kMinExtenderWeight = 13;

constexpr std::string_view kSchedulerName = "berth-scheduler";

// ---- loading --------------------------------------------------------------------------------

struct Object {
  std::string where;  // file and document, for messages
  std::string file;   // relative to manifests/
  json j;             // the document as the API server sees it

  std::string kind() const { return j.value("kind", ""); }
  std::string name() const { return j.contains("metadata") ? j["metadata"].value("name", "") : ""; }
  std::string ns() const {
    return j.contains("metadata") ? j["metadata"].value("namespace", "") : "";
  }
  bool top_level() const { return file.find('/') == std::string::npos; }
};

std::vector<Object> LoadObjects(const std::string& rel) {
  std::vector<Object> out;
  for (const ManifestDocument& d : LoadManifestFiles(rel)) {
    Object o{d.Where(), d.file, YamlToJson(d.node)};
    INFO(o.where);
    REQUIRE(o.j.is_object());
    REQUIRE(o.j.contains("metadata"));
    REQUIRE(o.j["metadata"].is_object());
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<Object> TopLevel(const std::vector<Object>& all) {
  std::vector<Object> out;
  for (const Object& o : all) {
    if (o.top_level()) out.push_back(o);
  }
  return out;
}

// The one object of `kind` named `name`; fails the test unless there is exactly one.
const Object& Find(const std::vector<Object>& objs, std::string_view kind, std::string_view name) {
  const Object* found = nullptr;
  int count = 0;
  for (const Object& o : objs) {
    if (o.kind() == kind && o.name() == name) {
      found = &o;
      ++count;
    }
  }
  INFO(kind << " " << name);
  REQUIRE(count == 1);
  return *found;
}

// The value at JSON pointer `pointer`; fails the test (naming where) when it is absent.
const json& At(const json& j, const std::string& pointer, const std::string& where) {
  const json::json_pointer p(pointer);
  INFO(where << ": " << pointer);
  REQUIRE(j.contains(p));
  return j.at(p);
}

// A JSON value from `text`, or a test failure naming `what` and nlohmann's position.
json ParseJsonOrFail(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    FAIL(what << ": " << e.what());
  }
  return nullptr;
}

YAML::Node ParseYamlOrFail(const std::string& text, const std::string& what) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    FAIL(what << ": " << e.what());
  }
  return YAML::Node();
}

// Keys that occur twice in one map. yaml-cpp keeps both; kube-scheduler's strict decoding and
// the API server refuse them, and kubectl would silently keep one.
void CollectDuplicateKeys(const YAML::Node& n, const std::string& path,
                          std::vector<std::string>* out) {
  if (n.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      if (!seen.insert(key).second) out->push_back(path + "." + key);
      CollectDuplicateKeys(kv.second, path + "." + key, out);
    }
  } else if (n.IsSequence()) {
    int i = 0;
    for (const YAML::Node& item : n) {
      CollectDuplicateKeys(item, path + "[" + std::to_string(i++) + "]", out);
    }
  }
}

// ---- the berth pod ----------------------------------------------------------------------------

struct BerthPod {
  const Object* deployment = nullptr;
  json spec;       // spec.template.spec
  json scheduler;  // the kube-scheduler container
  json berth;      // the berth container
};

BerthPod LoadBerthPod(const std::vector<Object>& objs) {
  BerthPod pod;
  pod.deployment = &Find(objs, "Deployment", "berth");
  pod.spec = At(pod.deployment->j, "/spec/template/spec", pod.deployment->where);
  const json& containers = At(pod.spec, "/containers", pod.deployment->where);
  REQUIRE(containers.is_array());
  for (const json& c : containers) {
    if (c.value("name", "") == "kube-scheduler") pod.scheduler = c;
    if (c.value("name", "") == "berth") pod.berth = c;
  }
  INFO(pod.deployment->where << ": containers kube-scheduler and berth");
  REQUIRE(containers.size() == 2);
  REQUIRE(pod.scheduler.is_object());
  REQUIRE(pod.berth.is_object());
  return pod;
}

// The command line of a container: command then args.
std::vector<std::string> CommandLine(const json& container) {
  std::vector<std::string> out;
  for (const char* field : {"command", "args"}) {
    if (!container.contains(field)) continue;
    REQUIRE(container[field].is_array());
    for (const json& a : container[field]) {
      REQUIRE(a.is_string());
      out.push_back(a.get<std::string>());
    }
  }
  return out;
}

// "--name=value" flags of a command line ("--name" alone maps to ""); each flag at most once.
std::map<std::string, std::string> Flags(const json& container) {
  std::map<std::string, std::string> out;
  for (const std::string& arg : CommandLine(container)) {
    if (arg.rfind("--", 0) != 0) continue;
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    INFO("flag --" << name);
    CHECK(out.count(name) == 0);
    out[name] = value;
  }
  return out;
}

std::string Flag(const std::map<std::string, std::string>& flags, const std::string& name) {
  INFO("flag --" << name);
  REQUIRE(flags.count(name) == 1);
  return flags.at(name);
}

struct HostPort {
  std::string host;
  int port = 0;
};

HostPort SplitHostPort(const std::string& hp) {
  INFO("host:port " << hp);
  const size_t colon = hp.rfind(':');
  REQUIRE(colon != std::string::npos);
  REQUIRE(std::regex_match(hp.substr(colon + 1), std::regex("[0-9]{1,5}")));
  return {hp.substr(0, colon), std::stoi(hp.substr(colon + 1))};
}

// The number a probe's or Service's port means: a number, or the name of one of the
// container's ports.
int ResolvePort(const json& container, const json& port) {
  if (port.is_number_integer()) return port.get<int>();
  INFO("port " << port.dump());
  REQUIRE(port.is_string());
  for (const json& p : container.value("ports", json::array())) {
    if (p.value("name", "") == port.get<std::string>()) return p.value("containerPort", 0);
  }
  FAIL("no container port named " << port.get<std::string>());
  return 0;
}

// The ConfigMap and key a container reads at `file`: the configMap volume mounted at the file's
// directory, and the item projected to the file's name (or the key of that name without items).
std::pair<std::string, std::string> MountedConfigMapKey(const json& pod_spec, const json& container,
                                                        const std::string& file) {
  INFO("file " << file << " in container " << container.value("name", ""));
  const fs::path path(file);
  const std::string dir = path.parent_path().string();
  const std::string base = path.filename().string();
  std::string volume;
  for (const json& m : container.value("volumeMounts", json::array())) {
    if (m.value("mountPath", "") == dir) volume = m.value("name", "");
  }
  REQUIRE_FALSE(volume.empty());
  for (const json& v : pod_spec.value("volumes", json::array())) {
    if (v.value("name", "") != volume) continue;
    REQUIRE(v.contains("configMap"));
    const json& cm = v["configMap"];
    if (!cm.contains("items")) return {cm.value("name", ""), base};
    for (const json& item : cm["items"]) {
      if (item.value("path", "") == base) return {cm.value("name", ""), item.value("key", "")};
    }
    FAIL("volume " << volume << " projects no item to " << base);
  }
  FAIL("no volume " << volume);
  return {};
}

// The text of a ConfigMap key that a container reads at `file`.
std::string MountedConfigText(const std::vector<Object>& objs, const BerthPod& pod,
                              const json& container, const std::string& file) {
  const auto [cm_name, key] = MountedConfigMapKey(pod.spec, container, file);
  const Object& cm = Find(objs, "ConfigMap", cm_name);
  CHECK(cm.ns() == pod.deployment->ns());
  const json& data = At(cm.j, "/data", cm.where);
  INFO(cm.where << ": key " << key);
  REQUIRE(data.contains(key));
  REQUIRE(data[key].is_string());
  return data[key].get<std::string>();
}

json SchedulerConfig(const std::vector<Object>& objs, const BerthPod& pod) {
  const std::string file = Flag(Flags(pod.scheduler), "config");
  const std::string text = MountedConfigText(objs, pod, pod.scheduler, file);
  const YAML::Node node = ParseYamlOrFail(text, "scheduler configuration " + file);
  std::vector<std::string> dups;
  CollectDuplicateKeys(node, "KubeSchedulerConfiguration", &dups);
  CHECK(dups.empty());
  return YamlToJson(node);
}

json BerthConfig(const std::vector<Object>& objs, const BerthPod& pod) {
  const std::string file = Flag(Flags(pod.berth), "config");
  return ParseJsonOrFail(MountedConfigText(objs, pod, pod.berth, file),
                         "berth configuration " + file);
}

// Every key of `obj` is one of `known` (kube-scheduler decodes its configuration strictly).
void CheckKnownKeys(const json& obj, const std::set<std::string>& known, const std::string& where) {
  REQUIRE(obj.is_object());
  for (const auto& [key, value] : obj.items()) {
    INFO(where << ": field " << key);
    CHECK(known.count(key) == 1);
  }
}

bool LabelsSelect(const json& selector_labels, const json& labels) {
  if (!selector_labels.is_object() || selector_labels.empty()) return false;
  for (const auto& [k, v] : selector_labels.items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

// ---- CRD schemas ------------------------------------------------------------------------------

// The schema keywords these tests understand. A CRD using another one fails the structural check,
// so the validator below never silently ignores a constraint.
const std::set<std::string>& SchemaKeywords() {
  static const std::set<std::string> k = {"type",
                                          "description",
                                          "properties",
                                          "additionalProperties",
                                          "items",
                                          "required",
                                          "enum",
                                          "minimum",
                                          "exclusiveMinimum",
                                          "maximum",
                                          "exclusiveMaximum",
                                          "default",
                                          "format",
                                          "pattern",
                                          "minLength",
                                          "maxLength",
                                          "minItems",
                                          "maxItems",
                                          "anyOf",
                                          "nullable",
                                          "x-kubernetes-int-or-string",
                                          "x-kubernetes-preserve-unknown-fields",
                                          "x-kubernetes-map-type",
                                          "x-kubernetes-list-type"};
  return k;
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Validates `v` as the API server would against a structural schema `s`, and also reports fields
// the server would silently prune (a misspelled field in an example is a mistake, not a no-op).
void Validate(const json& v, const json& s, const std::string& path,
              std::vector<std::string>* errors) {
  auto err = [&](const std::string& what) {
    errors->push_back((path.empty() ? "<root>" : path) + ": " + what);
  };
  if (v.is_null()) {
    if (!s.value("nullable", false)) err("null (the API server drops it)");
    return;
  }
  if (s.value("x-kubernetes-int-or-string", false)) {
    if (!v.is_number_integer() && !v.is_string()) {
      err("want an integer or a string, got " + v.dump());
    }
    if (v.is_string() && s.contains("pattern") &&
        !std::regex_search(v.get<std::string>(), std::regex(s["pattern"].get<std::string>()))) {
      err("\"" + v.get<std::string>() + "\" does not match " + s["pattern"].get<std::string>());
    }
    return;
  }
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
    err(v.dump() + " is not one of " + s["enum"].dump());
  }
  const std::string type = s.value("type", "");
  if (type == "object") {
    if (!v.is_object()) return err("want an object, got " + v.dump());
    for (const json& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) err("missing required field " + r.get<std::string>());
    }
    // Kubernetes validates metadata itself; the schema may only say it is an object.
    if (path == "metadata") return;
    const bool preserve = s.value("x-kubernetes-preserve-unknown-fields", false);
    for (const auto& [key, item] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(key)) {
        Validate(item, s["properties"][key], Join(path, key), errors);
      } else if (s.contains("additionalProperties")) {
        Validate(item, s["additionalProperties"], Join(path, key), errors);
      } else if (!preserve) {
        err("unknown field " + key + " (the API server would drop it)");
      }
    }
  } else if (type == "array") {
    if (!v.is_array()) return err("want an array, got " + v.dump());
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) err("too many items");
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) err("too few items");
    const json items = s.value("items", json::object());
    for (size_t i = 0; i < v.size(); ++i) {
      Validate(v[i], items, path + "[" + std::to_string(i) + "]", errors);
    }
  } else if (type == "string") {
    if (!v.is_string()) return err("want a string, got " + v.dump());
    const std::string text = v.get<std::string>();
    if (s.contains("minLength") && text.size() < s["minLength"].get<size_t>()) err("too short");
    if (s.contains("maxLength") && text.size() > s["maxLength"].get<size_t>()) err("too long");
    if (s.contains("pattern") &&
        !std::regex_search(text, std::regex(s["pattern"].get<std::string>()))) {
      err("\"" + text + "\" does not match " + s["pattern"].get<std::string>());
    }
  } else if (type == "integer" || type == "number") {
    if (type == "integer" ? !v.is_number_integer() : !v.is_number()) {
      return err("want " + type + ", got " + v.dump());
    }
    const double x = v.get<double>();
    if (s.contains("minimum")) {
      const double min = s["minimum"].get<double>();
      if (s.value("exclusiveMinimum", false) ? x <= min : x < min) {
        err(v.dump() + " is below the minimum");
      }
    }
    if (s.contains("maximum")) {
      const double max = s["maximum"].get<double>();
      if (s.value("exclusiveMaximum", false) ? x >= max : x > max) {
        err(v.dump() + " is above the maximum");
      }
    }
    if (s.value("format", "") == "int32" && (x < -2147483648.0 || x > 2147483647.0)) {
      err("out of int32 range");
    }
  } else if (type == "boolean") {
    if (!v.is_boolean()) err("want a boolean, got " + v.dump());
  } else {
    err("schema without a type");
  }
}

// Whether a CRD schema is structural (what apiextensions.k8s.io/v1 requires) and uses only the
// keywords Validate() understands; defaults must validate against their own schema.
void CheckStructural(const json& s, const std::string& path, std::vector<std::string>* errors) {
  auto err = [&](const std::string& what) {
    errors->push_back((path.empty() ? "<root>" : path) + ": " + what);
  };
  if (!s.is_object()) return err("schema is not an object");
  for (const auto& [key, value] : s.items()) {
    if (SchemaKeywords().count(key) == 0) err("keyword " + key + " not understood by this test");
  }
  if (s.value("x-kubernetes-int-or-string", false)) {
    const json want = json::parse(R"([{"type":"integer"},{"type":"string"}])");
    if (s.contains("type")) err("int-or-string with a type");
    if (s.value("anyOf", json()) != want) err("int-or-string without anyOf [integer, string]");
  } else if (s.contains("anyOf")) {
    err("anyOf is used here only for int-or-string");
  }
  const std::string type = s.value("type", "");
  const bool untyped_ok = s.value("x-kubernetes-int-or-string", false) ||
                          s.value("x-kubernetes-preserve-unknown-fields", false);
  static const std::set<std::string> kTypes = {"object",  "array",  "string",
                                               "integer", "number", "boolean"};
  if (type.empty() ? !untyped_ok : kTypes.count(type) == 0) {
    err("missing or unknown type '" + type + "'");
  }
  if (s.contains("properties") || s.contains("additionalProperties")) {
    if (type != "object") err("properties on a non-object");
    if (s.contains("properties") && s.contains("additionalProperties")) {
      err("both properties and additionalProperties");
    }
  }
  if (s.contains("properties")) {
    for (const auto& [key, sub] : s["properties"].items()) {
      CheckStructural(sub, Join(path, key), errors);
    }
    for (const json& r : s.value("required", json::array())) {
      if (!s["properties"].contains(r.get<std::string>())) {
        err("required field " + r.dump() + " not declared");
      }
    }
  }
  if (s.contains("additionalProperties")) {
    CheckStructural(s["additionalProperties"], path + ".*", errors);
  }
  if (type == "array") {
    if (!s.contains("items")) {
      err("array without items");
    } else {
      CheckStructural(s["items"], path + "[]", errors);
    }
  } else if (s.contains("items")) {
    err("items on a non-array");
  }
  if (s.contains("default")) Validate(s["default"], s, path, errors);
  for (const json& e : s.value("enum", json::array())) Validate(e, s, path, errors);
}

const json& CrdSchema(const Object& crd) {
  return At(crd.j, "/spec/versions/0/schema/openAPIV3Schema", crd.where);
}

// The CRD in `objs` that serves apiVersion/kind, or nullptr when no CRD there defines the group.
const Object* CrdFor(const std::vector<Object>& objs, const std::string& api_version,
                     const std::string& kind) {
  const size_t slash = api_version.find('/');
  if (slash == std::string::npos) return nullptr;
  const std::string group = api_version.substr(0, slash);
  for (const Object& o : objs) {
    if (o.kind() != "CustomResourceDefinition") continue;
    const json spec = o.j.value("spec", json::object());
    if (spec.value("group", "") == group &&
        spec.value("names", json::object()).value("kind", "") == kind) {
      return &o;
    }
  }
  return nullptr;
}

// ---- berth's decoders -------------------------------------------------------------------------

// Decodes `obj` with one of berth's decoders, `decode(object, path)`, as berth decodes what the
// API server sends. The simdjson document lives only while decoding (decoded values own their
// strings). Fails the test with berth's error, naming `where`.
template <class Decode>
auto DecodeWith(const json& obj, const std::string& where, Decode decode) {
  absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(obj.dump());
  INFO(where);
  REQUIRE(doc.ok());
  simdjson::dom::object o;
  REQUIRE(doc->root().get_object().get(o) == simdjson::SUCCESS);
  const extender::JsonPath top;
  auto decoded = decode(o, top);
  INFO(decoded.status().ToString());
  REQUIRE(decoded.ok());
  return *std::move(decoded);
}

// ================================================================================================

TEST_CASE("every manifest is a well-formed Kubernetes object", "[manifests]") {
  const std::vector<Object> all = LoadObjects("");
  REQUIRE(all.size() >= 20);

  struct KindInfo {
    std::string api_version;
    bool namespaced;
  };
  // The kinds the manifests use, with their API version and scope in Kubernetes 1.29 and later.
  const std::map<std::string, KindInfo> kinds = {
      {"Namespace", {"v1", false}},
      {"ServiceAccount", {"v1", true}},
      {"ConfigMap", {"v1", true}},
      {"Service", {"v1", true}},
      {"Pod", {"v1", true}},
      {"Deployment", {"apps/v1", true}},
      {"Job", {"batch/v1", true}},
      {"PodDisruptionBudget", {"policy/v1", true}},
      {"CustomResourceDefinition", {"apiextensions.k8s.io/v1", false}},
      {"PriorityClass", {"scheduling.k8s.io/v1", false}},
      {"ClusterRole", {"rbac.authorization.k8s.io/v1", false}},
      {"ClusterRoleBinding", {"rbac.authorization.k8s.io/v1", false}},
      {"Role", {"rbac.authorization.k8s.io/v1", true}},
      {"RoleBinding", {"rbac.authorization.k8s.io/v1", true}},
      {"Pool", {"berth.io/v1alpha1", false}},
      {"Queue", {"berth.io/v1alpha1", false}},
      {"PodGroup", {"scheduling.x-k8s.io/v1alpha1", true}},
  };
  // A DNS-1123 subdomain: what metadata.name must be for all of these kinds.
  const std::regex dns_subdomain(
      "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");

  std::set<std::string> namespaces = {"kube-system"};
  for (const Object& o : all) {
    if (o.kind() == "Namespace") namespaces.insert(o.name());
  }
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const Object& o : all) {
    INFO(o.where);
    REQUIRE(o.j.value("apiVersion", json()).is_string());
    REQUIRE(o.j.value("kind", json()).is_string());
    const auto kind = kinds.find(o.kind());
    REQUIRE(kind != kinds.end());
    CHECK(o.j["apiVersion"] == kind->second.api_version);
    CHECK(o.name().size() <= 253);
    CHECK(std::regex_match(o.name(), dns_subdomain));
    // Every object names its namespace: none relies on kubectl's current namespace, so
    // `kubectl apply -f` puts everything where the guide says whatever the context.
    if (kind->second.namespaced) {
      CHECK(namespaces.count(o.ns()) == 1);
    } else {
      CHECK_FALSE(o.j["metadata"].contains("namespace"));
    }
    CHECK(seen.insert({o.kind(), o.ns(), o.name()}).second);
    // `kubectl get ... -l app.kubernetes.io/part-of=berth` finds everything berth installed.
    if (o.top_level()) {
      CHECK(
          o.j["metadata"].value("labels", json::object()).value("app.kubernetes.io/part-of", "") ==
          "berth");
    }
  }
  for (const ManifestDocument& d : LoadManifestFiles("")) {
    std::vector<std::string> dups;
    CollectDuplicateKeys(d.node, d.Where(), &dups);
    INFO("duplicate keys: " << json(dups).dump());
    CHECK(dups.empty());
  }
}

TEST_CASE("kubectl apply -f and -k read the same files in a working order", "[manifests]") {
  // `kubectl apply -f DIR` reads the *.json, *.yaml and *.yml files of DIR, not of its
  // subdirectories, in lexical order.
  std::set<std::string> applied;
  std::set<std::string> other_files;
  for (const fs::directory_entry& e : fs::directory_iterator(ManifestsDir())) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (ext == ".yaml" || ext == ".yml" || ext == ".json") {
      applied.insert(name);
    } else {
      other_files.insert(name);
    }
  }
  REQUIRE_FALSE(applied.empty());
  for (const std::string& name : applied) {
    // apply -f would send a kustomization file to the API server as an object and fail.
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    INFO(name);
    CHECK(lower.rfind("kustomization.", 0) != 0);
  }
  CHECK(other_files == std::set<std::string>{"Kustomization"});

  SECTION("Kustomization lists exactly the files apply -f reads") {
    const std::string path = (ManifestsDir() / "Kustomization").string();
    const json k = YamlToJson(ParseYamlOrFail(ReadTestFile(path), path));
    CHECK(k.value("apiVersion", "") == "kustomize.config.k8s.io/v1beta1");
    CHECK(k.value("kind", "") == "Kustomization");
    const json& resources = At(k, "/resources", path);
    REQUIRE(resources.is_array());
    std::set<std::string> listed;
    for (const json& r : resources) {
      REQUIRE(r.is_string());
      INFO("resource " << r.get<std::string>());
      CHECK(listed.insert(r.get<std::string>()).second);
      CHECK(fs::is_regular_file(ManifestsDir() / r.get<std::string>()));
    }
    CHECK(listed == applied);
  }

  SECTION("each object comes after its Namespace and CRD, the Namespace and CRDs first") {
    const std::vector<Object> all = LoadObjects("");  // top level, then examples/, in path order
    std::set<std::string> created_namespaces = {"kube-system", "default"};
    std::set<std::string> created_crds;
    bool other_seen = false;
    for (const Object& o : all) {
      INFO(o.where);
      if (o.top_level()) {
        const bool first_kind = o.kind() == "Namespace" || o.kind() == "CustomResourceDefinition";
        if (!first_kind) other_seen = true;
        CHECK((first_kind ? !other_seen : true));
      }
      if (!o.ns().empty()) CHECK(created_namespaces.count(o.ns()) == 1);
      if (const Object* crd = CrdFor(all, o.j.value("apiVersion", ""), o.kind())) {
        CHECK(created_crds.count(crd->name()) == 1);
        // The examples use the CRDs; they are applied after the top level, never with it.
        CHECK_FALSE(o.top_level());
      }
      if (o.kind() == "Namespace") created_namespaces.insert(o.name());
      if (o.kind() == "CustomResourceDefinition") created_crds.insert(o.name());
    }
  }
}

// Where kubectl is, or empty.
fs::path FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / program;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return {};
}

// The objects `kubectl kustomize DIR` builds, as JSON; fails the test if it fails.
std::vector<json> Kustomize(const fs::path& kubectl, const fs::path& dir) {
  // Runs offline: kustomize only reads the directory. Standard error goes to a file of its own,
  // so warnings never mix into the YAML.
  const fs::path errors_file =
      fs::temp_directory_path() / ("berth-kustomize-" + std::to_string(getpid()) + ".err");
  const std::string command = "'" + kubectl.string() + "' kustomize '" + dir.string() +
                              "' 2>'" + errors_file.string() + "'";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  std::string errors;
  if (fs::exists(errors_file)) errors = ReadTestFile(errors_file);
  std::error_code ec;
  fs::remove(errors_file, ec);
  INFO(command << "\n" << errors);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  std::vector<YAML::Node> built;
  try {
    built = YAML::LoadAll(output);
  } catch (const YAML::Exception& e) {
    FAIL("kubectl kustomize output: " << e.what());
  }
  std::vector<json> out;
  for (const YAML::Node& d : built) {
    if (!d.IsNull()) out.push_back(YamlToJson(d));
  }
  return out;
}

TEST_CASE("kubectl kustomize builds the same objects as the files", "[manifests]") {
  const fs::path kubectl = FindOnPath("kubectl");
  if (kubectl.empty()) {
    WARN("kubectl is not on PATH: `kubectl kustomize manifests/` not checked");
    return;
  }
  std::multiset<std::string> from_kustomize;
  for (const json& j : Kustomize(kubectl, ManifestsDir())) {
    const json meta = j.value("metadata", json::object());
    from_kustomize.insert(j.value("kind", "") + " " + meta.value("namespace", "") + "/" +
                          meta.value("name", ""));
  }
  std::multiset<std::string> from_files;
  for (const Object& o : TopLevel(LoadObjects(""))) {
    from_files.insert(o.kind() + " " + o.ns() + "/" + o.name());
  }
  CHECK(from_kustomize == from_files);
}

TEST_CASE("the scheduler configuration sends every pod of berth-scheduler to berth",
          "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const BerthPod pod = LoadBerthPod(objs);
  const json cfg = SchedulerConfig(objs, pod);
  const std::string where = "scheduler-config.yaml";

  CHECK(cfg.value("apiVersion", "") == "kubescheduler.config.k8s.io/v1");
  CHECK(cfg.value("kind", "") == "KubeSchedulerConfiguration");
  // kube-scheduler refuses unknown fields; these are the v1 fields.
  CheckKnownKeys(
      cfg,
      {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
       "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
       "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"},
      where);

  // berth's filter must see every feasible node.
  CHECK(At(cfg, "/percentageOfNodesToScore", where) == 100);

  const json& le = At(cfg, "/leaderElection", where);
  CheckKnownKeys(le,
                 {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
                  "resourceName", "resourceNamespace"},
                 where + " leaderElection");
  CHECK(le.value("leaderElect", false));
  CHECK(le.value("resourceLock", "") == "leases");
  // The default scheduler holds kube-system/kube-scheduler; sharing it would stop one of them.
  CHECK(le.value("resourceName", "") == "berth-scheduler");
  CHECK(le.value("resourceNamespace", "") == pod.deployment->ns());

  const json& profiles = At(cfg, "/profiles", where);
  REQUIRE(profiles.is_array());
  REQUIRE(profiles.size() == 1);
  CheckKnownKeys(profiles[0],
                 {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"},
                 where + " profiles[0]");
  CHECK(profiles[0].value("schedulerName", "") == kSchedulerName);
  if (profiles[0].contains("percentageOfNodesToScore")) {
    CHECK(profiles[0]["percentageOfNodesToScore"] == 100);
  }

  const json& extenders = At(cfg, "/extenders", where);
  REQUIRE(extenders.is_array());
  REQUIRE(extenders.size() == 1);
  const json& ext = extenders[0];
  CheckKnownKeys(ext,
                 {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
                  "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
                  "ignorable"},
                 where + " extenders[0]");
  CHECK(ext.value("filterVerb", "") == "filter");
  CHECK(ext.value("prioritizeVerb", "") == "prioritize");
  CHECK(ext.value("preemptVerb", "") == "preempt");
  CHECK(ext.value("bindVerb", "") == "bind");
  CHECK(ext.value("nodeCacheCapable", false));
  // With managedResources, kube-scheduler would consult berth only for pods requesting them.
  CHECK_FALSE(ext.contains("managedResources"));
  CHECK_FALSE(ext.value("ignorable", false));
  REQUIRE(ext.value("weight", json()).is_number_integer());
  CHECK(ext["weight"].get<int>() >= kMinExtenderWeight);
  if (ext.contains("httpTimeout")) {
    CHECK(std::regex_match(ext["httpTimeout"].get<std::string>(),
                           std::regex("^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$")));
  }

  // kube-scheduler reaches berth where berth listens: plain HTTP on the pod's loopback.
  const std::string url = ext.value("urlPrefix", "");
  INFO("urlPrefix " << url);
  REQUIRE(url.rfind("http://", 0) == 0);
  CHECK_FALSE(ext.value("enableHTTPS", false));
  std::string authority = url.substr(7);
  authority = authority.substr(0, authority.find('/'));
  CHECK(authority == Flag(Flags(pod.berth), "listen"));
}

TEST_CASE("berth leads exactly when its own pod's kube-scheduler does", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const BerthPod pod = LoadBerthPod(objs);
  const json sched = SchedulerConfig(objs, pod);
  const json cfg = BerthConfig(objs, pod);
  const std::string where = "berth.json";

  CHECK(cfg.value("schedulerName", "") ==
        At(sched, "/profiles/0/schedulerName", "scheduler config"));
  CheckKnownKeys(At(cfg, "/kubernetes", where), {"watchTimeoutSeconds", "leaderElection"},
                 where + " kubernetes");
  const json& le = At(cfg, "/kubernetes/leaderElection", where);
  CheckKnownKeys(le,
                 {"enabled", "mode", "leaseName", "leaseNamespace", "identity",
                  "leaseDurationSeconds", "renewDeadlineSeconds", "retryPeriodSeconds"},
                 where + " kubernetes.leaderElection");
  CHECK(le.value("enabled", true));
  CHECK(le.value("mode", "") == "follow");
  CHECK(le.value("leaseName", "") == At(sched, "/leaderElection/resourceName", "scheduler config"));
  CHECK(le.value("leaseNamespace", "") ==
        At(sched, "/leaderElection/resourceNamespace", "scheduler config"));

  // berth itself accepts the file, with the meaning checked above.
  const absl::StatusOr<extender::Config> parsed = extender::ParseConfig(cfg.dump(), where);
  INFO((parsed.ok() ? std::string("ok") : std::string(parsed.status().message())));
  REQUIRE(parsed.ok());
  CHECK(parsed->leader_election.mode == extender::kube::LeaderElectionConfig::Mode::kFollow);
  CHECK(parsed->leader_election.lease_name == le.value("leaseName", ""));
  CHECK(parsed->scheduler_name == cfg.value("schedulerName", ""));
  // The shipped deployment names only berth's best nodes in the filter answer (berth is its
  // kube-scheduler's only extender): kube-scheduler mostly gets one node and skips scoring.
  CHECK(parsed->filter_answer == extender::FilterAnswer::kBest);
  CHECK(At(sched, "/extenders", "scheduler config").size() == 1);

  // Follow mode recognises its pod in the Lease holder ("<pod name>_<uuid>").
  std::map<std::string, std::string> env;
  for (const json& e : pod.berth.value("env", json::array())) {
    env[e.value("name", "")] = e.value("valueFrom", json::object())
                                   .value("fieldRef", json::object())
                                   .value("fieldPath", "");
  }
  CHECK(env["POD_NAME"] == "metadata.name");
  CHECK(env["POD_NAMESPACE"] == "metadata.namespace");

  // Both can reach the Lease: berth reads it, kube-scheduler creates and renews it.
  const std::string lease = le.value("leaseName", "");
  const std::string lease_ns = le.value("leaseNamespace", "");
  CHECK(RbacAllows(LoadBerthRbac(), "get", "coordination.k8s.io", "leases", lease_ns, lease));
  RbacPolicy scheduler_lease;
  scheduler_lease.ns = lease_ns;
  scheduler_lease.namespace_rules = ParseRbacRules(
      *FindManifestObject(LoadManifestDocuments(""), "Role", "berth-kube-scheduler", lease_ns));
  CHECK(RbacAllows(scheduler_lease, "create", "coordination.k8s.io", "leases", lease_ns, ""));
  CHECK(RbacAllows(scheduler_lease, "get", "coordination.k8s.io", "leases", lease_ns, lease));
  CHECK(RbacAllows(scheduler_lease, "update", "coordination.k8s.io", "leases", lease_ns, lease));
  CHECK_FALSE(
      RbacAllows(scheduler_lease, "update", "coordination.k8s.io", "leases", lease_ns, "other"));

  // More than one replica is safe (one leader pair); it then needs a disruption budget so that
  // node drains keep one pair running.
  const int replicas = At(pod.deployment->j, "/spec", pod.deployment->where).value("replicas", 1);
  CHECK(replicas >= 1);
  if (replicas > 1) {
    bool covered = false;
    for (const Object& o : objs) {
      if (o.kind() == "PodDisruptionBudget" && o.ns() == pod.deployment->ns() &&
          LabelsSelect(At(o.j, "/spec/selector/matchLabels", o.where),
                       At(pod.deployment->j, "/spec/template/metadata/labels", o.where))) {
        covered = true;
      }
    }
    CHECK(covered);
  }
}

TEST_CASE("the Deployment runs kube-scheduler and berth side by side as decided", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const BerthPod pod = LoadBerthPod(objs);
  const json& dep = pod.deployment->j;
  const std::string where = pod.deployment->where;

  CHECK(pod.deployment->ns() == "berth-system");
  CHECK(At(dep, "/spec/strategy/type", where) == "RollingUpdate");
  CHECK(LabelsSelect(At(dep, "/spec/selector/matchLabels", where),
                     At(dep, "/spec/template/metadata/labels", where)));

  // Placed by the default scheduler (berth cannot place its own pod), as a cluster component.
  CHECK(pod.spec.value("schedulerName", "") == "default-scheduler");
  CHECK(pod.spec.value("priorityClassName", "") == "system-cluster-critical");
  CHECK(pod.spec.value("serviceAccountName", "") == "berth");

  // kube-scheduler: the upstream image, a v1 minor, with the configuration from the ConfigMap.
  CHECK(pod.scheduler.value("image", "").rfind("registry.k8s.io/kube-scheduler:v1.", 0) == 0);
  const std::vector<std::string> sched_cmd = CommandLine(pod.scheduler);
  REQUIRE_FALSE(sched_cmd.empty());
  CHECK(sched_cmd[0] == "kube-scheduler");
  CHECK(Flag(Flags(pod.scheduler), "config") == "/etc/kubernetes/berth/scheduler-config.yaml");

  // berth: the release image of this version, in Kubernetes mode from the pod's account.
  CHECK(pod.berth.value("image", "") ==
        std::string("ghcr.io/berth-scheduler/berth:") + extender::kVersion);
  const std::vector<std::string> berth_cmd = CommandLine(pod.berth);
  REQUIRE_FALSE(berth_cmd.empty());
  CHECK(berth_cmd[0] == "serve");
  const std::map<std::string, std::string> flags = Flags(pod.berth);
  CHECK(flags.count("in-cluster") == 1);
  CHECK(Flag(flags, "config") == "/etc/berth/berth.json");
  CHECK(Flag(flags, "log-format") == "json");

  // Security: non-root, read-only, no privilege, no capabilities, the runtime's seccomp profile.
  const json& psc = At(pod.spec, "/securityContext", where);
  CHECK(psc.value("runAsNonRoot", false));
  CHECK(psc.value("runAsUser", 0) != 0);
  for (const json* c : {&pod.scheduler, &pod.berth}) {
    const std::string cname = c->value("name", "");
    INFO("container " << cname);
    const json& sc = At(*c, "/securityContext", where);
    CHECK(sc.value("allowPrivilegeEscalation", true) == false);
    CHECK(sc.value("readOnlyRootFilesystem", false));
    CHECK_FALSE(sc.value("privileged", false));
    const json drop = sc.value("capabilities", json::object()).value("drop", json::array());
    CHECK(std::find(drop.begin(), drop.end(), "ALL") != drop.end());
    const std::string seccomp = sc.contains("seccompProfile")
                                    ? sc["seccompProfile"].value("type", "")
                                    : psc.value("seccompProfile", json::object()).value("type", "");
    CHECK(seccomp == "RuntimeDefault");
    // A memory limit: a leak ends in a restart, not in the node's OOM killer choosing.
    CHECK(c->value("resources", json::object()).value("limits", json::object()).contains("memory"));
  }
  CHECK(At(pod.berth, "/resources/requests/cpu", where) == "500m");
  CHECK(At(pod.berth, "/resources/requests/memory", where) == "512Mi");
  CHECK(At(pod.scheduler, "/resources/requests/cpu", where) == "100m");
  CHECK(At(pod.scheduler, "/resources/requests/memory", where) == "128Mi");
}

TEST_CASE("only berth's read-only operations port is reachable from outside the pod",
          "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const BerthPod pod = LoadBerthPod(objs);
  const std::string where = pod.deployment->where;
  const std::map<std::string, std::string> flags = Flags(pod.berth);

  // The verbs (bind creates pods/binding with berth's credentials) stay on loopback.
  const HostPort listen = SplitHostPort(Flag(flags, "listen"));
  CHECK(listen.host == "127.0.0.1");
  const HostPort ops = SplitHostPort(Flag(flags, "ops-listen"));
  CHECK(ops.host == "0.0.0.0");
  CHECK(ops.port != listen.port);

  std::set<int> container_ports;
  for (const json& p : pod.berth.value("ports", json::array())) {
    container_ports.insert(p.value("containerPort", 0));
  }
  CHECK(container_ports.count(ops.port) == 1);
  CHECK(container_ports.count(listen.port) == 0);

  for (const auto& [probe, path] :
       {std::pair<std::string, std::string>{"readinessProbe", "/readyz"},
        {"livenessProbe", "/healthz"}}) {
    INFO(probe);
    const json& get = At(pod.berth, "/" + probe + "/httpGet", where);
    CHECK(get.value("path", "") == path);
    CHECK(get.value("scheme", "HTTP") == "HTTP");
    CHECK(ResolvePort(pod.berth, At(get, "/port", where)) == ops.port);
  }

  const Object& svc = Find(objs, "Service", "berth");
  CHECK(svc.ns() == pod.deployment->ns());
  CHECK(At(svc.j, "/spec", svc.where).value("type", "ClusterIP") == "ClusterIP");
  CHECK(LabelsSelect(At(svc.j, "/spec/selector", svc.where),
                     At(pod.deployment->j, "/spec/template/metadata/labels", where)));
  const json& ports = At(svc.j, "/spec/ports", svc.where);
  REQUIRE(ports.is_array());
  REQUIRE(ports.size() == 1);
  CHECK(ports[0].value("port", 0) == ops.port);  // kubectl port-forward svc/berth 8889
  CHECK(ResolvePort(pod.berth, ports[0].value("targetPort", ports[0]["port"])) == ops.port);
}

// The Secret volume mounted at `dir` in `container`: its secretName ("" if none).
std::string MountedSecret(const json& pod_spec, const json& container, const std::string& dir) {
  std::string volume;
  for (const json& m : container.value("volumeMounts", json::array())) {
    if (m.value("mountPath", "") == dir) volume = m.value("name", "");
  }
  for (const json& v : pod_spec.value("volumes", json::array())) {
    if (v.value("name", "") == volume && v.contains("secret")) return v["secret"].value("secretName", "");
  }
  return "";
}

// The objects of manifests/ with the https component's patches applied, as kustomize applies
// a component's JSON patches to their targets.
std::vector<Object> WithHttpsComponent() {
  std::vector<Object> objs = TopLevel(LoadObjects(""));
  const std::string kpath = (ManifestsDir() / "https" / "kustomization.yaml").string();
  const json k = YamlToJson(ParseYamlOrFail(ReadTestFile(kpath), kpath));
  CHECK(k.value("apiVersion", "") == "kustomize.config.k8s.io/v1alpha1");
  CHECK(k.value("kind", "") == "Component");
  const json& patches = At(k, "/patches", kpath);
  REQUIRE(patches.is_array());
  REQUIRE(patches.size() == 2);
  for (const json& p : patches) {
    const std::string file = (ManifestsDir() / "https" / p.value("path", "")).string();
    const json& target = At(p, "/target", kpath);
    Object* obj = nullptr;
    for (Object& o : objs) {
      if (o.kind() == target.value("kind", "") && o.name() == target.value("name", "") &&
          o.ns() == target.value("namespace", "")) {
        obj = &o;
      }
    }
    INFO(kpath << ": patch " << file << " targets " << target.dump());
    REQUIRE(obj != nullptr);
    const std::string api_version = target.contains("group")
                                        ? target["group"].get<std::string>() + "/" + target.value("version", "")
                                        : target.value("version", "");
    CHECK(obj->j.value("apiVersion", "") == api_version);
    const json ops = YamlToJson(ParseYamlOrFail(ReadTestFile(file), file));
    REQUIRE(ops.is_array());
    try {
      obj->j = obj->j.patch(ops);
    } catch (const json::exception& e) {
      FAIL(file << " does not apply to " << obj->where << ": " << e.what());
    }
    obj->where += " patched by https/" + p.value("path", "");
  }
  return objs;
}

TEST_CASE("the https component serves both ports over TLS, and kube-scheduler verifies berth",
          "[manifests]") {
  const std::vector<Object> base_objs = LoadObjects("");
  const BerthPod base = LoadBerthPod(base_objs);
  const std::vector<Object> objs = WithHttpsComponent();
  const BerthPod pod = LoadBerthPod(objs);
  const std::string where = pod.deployment->where;

  // The containers are where the patch's indexes say.
  CHECK(pod.spec["containers"][0].value("name", "") == "kube-scheduler");
  CHECK(pod.spec["containers"][1].value("name", "") == "berth");

  // berth: every flag of the base, and the certificate and key from the Secret berth-tls.
  std::map<std::string, std::string> flags = Flags(pod.berth);
  const fs::path cert(Flag(flags, "tls-cert-file"));
  const fs::path key(Flag(flags, "tls-key-file"));
  CHECK(cert.filename() == "tls.crt");
  CHECK(key.filename() == "tls.key");
  CHECK(cert.parent_path() == key.parent_path());
  CHECK(MountedSecret(pod.spec, pod.berth, cert.parent_path().string()) == "berth-tls");
  flags.erase("tls-cert-file");
  flags.erase("tls-key-file");
  CHECK(flags == Flags(base.berth));

  // The kubelet probes the same paths and port, over HTTPS.
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    INFO(probe);
    json get = At(pod.berth, std::string("/") + probe + "/httpGet", where);
    CHECK(get.value("scheme", "") == "HTTPS");
    get.erase("scheme");
    CHECK(get == At(base.berth, std::string("/") + probe + "/httpGet", base.deployment->where));
  }
  CHECK(At(pod.deployment->j, "/spec/template/metadata/annotations", where).value("prometheus.io/scheme", "") ==
        "https");

  // kube-scheduler: https to berth's --listen, verified against ca.crt of the same Secret.
  const json cfg = SchedulerConfig(objs, pod);
  const json& ext = At(cfg, "/extenders/0", "https scheduler configuration");
  const HostPort listen = SplitHostPort(Flag(flags, "listen"));
  CHECK(ext.value("urlPrefix", "") == "https://" + listen.host + ":" + std::to_string(listen.port));
  CHECK(ext.value("enableHTTPS", false));
  const json& tls = At(ext, "/tlsConfig", "https scheduler configuration");
  CHECK_FALSE(tls.value("insecure", false));
  const fs::path ca(tls.value("caFile", ""));
  CHECK(ca.filename() == "ca.crt");
  CHECK(MountedSecret(pod.spec, pod.scheduler, ca.parent_path().string()) == "berth-tls");
  // The certificate names the Service, not the loopback address kube-scheduler dials.
  CHECK(tls.value("serverName", "") == "berth.berth-system.svc");
  CheckKnownKeys(tls, {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"},
                 "tlsConfig");

  // Everything else is the base's configuration.
  json same = cfg;
  same["extenders"][0].erase("tlsConfig");
  same["extenders"][0]["enableHTTPS"] = false;
  same["extenders"][0]["urlPrefix"] = At(SchedulerConfig(base_objs, base), "/extenders/0/urlPrefix", "base");
  CHECK(same == SchedulerConfig(base_objs, base));

  // kubectl builds the same thing from the component.
  const fs::path kubectl = FindOnPath("kubectl");
  if (kubectl.empty()) {
    WARN("kubectl is not on PATH: `kubectl kustomize` with the https component not checked");
    return;
  }
  const fs::path copy = fs::temp_directory_path() / ("berth-manifests-" + std::to_string(getpid()));
  fs::remove_all(copy);
  fs::copy(ManifestsDir(), copy, fs::copy_options::recursive);
  {
    std::ofstream out(copy / "Kustomization", std::ios::app);
    out << "components:\n- https\n";
  }
  const std::vector<json> built = Kustomize(kubectl, copy);
  fs::remove_all(copy);
  size_t matched = 0;
  for (const Object& o : objs) {
    if (o.kind() != "Deployment" && o.kind() != "ConfigMap") continue;
    for (const json& b : built) {
      if (b.value("kind", "") == o.kind() && b["metadata"].value("name", "") == o.name()) {
        INFO(o.where);
        if (o.kind() == "ConfigMap") CHECK(b["data"] == o.j["data"]);
        if (o.kind() == "Deployment") CHECK(b["spec"]["template"] == o.j["spec"]["template"]);
        ++matched;
      }
    }
  }
  CHECK(matched == 2);
}

TEST_CASE("the ServiceAccount is bound to berth's roles and to kube-scheduler's", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const BerthPod pod = LoadBerthPod(objs);
  const std::string ns = pod.deployment->ns();
  const Object& sa = Find(objs, "ServiceAccount", "berth");
  CHECK(sa.ns() == ns);

  auto subject_is_berth = [&](const Object& binding) {
    for (const json& s : binding.j.value("subjects", json::array())) {
      if (s.value("kind", "") == "ServiceAccount" && s.value("name", "") == "berth" &&
          s.value("namespace", "") == ns) {
        return true;
      }
    }
    return false;
  };
  // (binding kind, namespace, role kind, role name) the ServiceAccount must hold.
  const std::set<std::tuple<std::string, std::string, std::string, std::string>> want = {
      {"ClusterRoleBinding", "", "ClusterRole", "berth"},
      {"RoleBinding", ns, "Role", "berth"},
      {"ClusterRoleBinding", "", "ClusterRole", "system:kube-scheduler"},
      {"ClusterRoleBinding", "", "ClusterRole", "system:volume-scheduler"},
      {"RoleBinding", "kube-system", "Role", "extension-apiserver-authentication-reader"},
      {"RoleBinding", ns, "Role", "berth-kube-scheduler"},
  };
  std::set<std::tuple<std::string, std::string, std::string, std::string>> have;
  for (const Object& o : objs) {
    if (o.kind() != "ClusterRoleBinding" && o.kind() != "RoleBinding") continue;
    INFO(o.where);
    CHECK(subject_is_berth(o));
    const json& ref = At(o.j, "/roleRef", o.where);
    CHECK(ref.value("apiGroup", "") == "rbac.authorization.k8s.io");
    have.insert({o.kind(), o.ns(), ref.value("kind", ""), ref.value("name", "")});
    // A role defined here must exist where the binding looks for it.
    const std::string role = ref.value("name", "");
    if (role.rfind("system:", 0) != 0 && role != "extension-apiserver-authentication-reader") {
      bool found = false;
      for (const Object& r : objs) {
        found = found || (r.kind() == ref.value("kind", "") && r.name() == role &&
                          (r.kind() == "ClusterRole" || r.ns() == o.ns()));
      }
      CHECK(found);
    }
  }
  CHECK(have == want);
  LoadBerthRbac();  // fails unless berth's own roles are bound to the ServiceAccount
}

TEST_CASE("RbacAllows matches as Kubernetes RBAC does", "[manifests][rbac]") {
  RbacPolicy p;
  p.ns = "team";
  p.cluster_rules = {
      {{""}, {"pods"}, {"get", "list"}, {}},
      {{"apps"}, {"*/scale"}, {"update"}, {}},
      {{"*"}, {"widgets"}, {"*"}, {}},
  };
  p.namespace_rules = {
      {{"coordination.k8s.io"}, {"leases"}, {"get", "update"}, {"mine"}},
      {{"coordination.k8s.io"}, {"leases"}, {"create"}, {}},
  };
  SECTION("allowed") {
    CHECK(RbacAllows(p, "get", "", "pods", "ml", "a"));
    CHECK(RbacAllows(p, "list", "", "pods", "", ""));
    CHECK(RbacAllows(p, "update", "apps", "deployments/scale", "ml", "web"));
    CHECK(RbacAllows(p, "delete", "example.com", "widgets", "", "w"));
    CHECK(RbacAllows(p, "get", "coordination.k8s.io", "leases", "team", "mine"));
    CHECK(RbacAllows(p, "create", "coordination.k8s.io", "leases", "team", ""));
  }
  SECTION("denied") {
    CHECK_FALSE(RbacAllows(p, "delete", "", "pods", "ml", "a"));   // verb
    CHECK_FALSE(RbacAllows(p, "get", "apps", "pods", "ml", "a"));  // group
    CHECK_FALSE(
        RbacAllows(p, "get", "", "pods/log", "ml", "a"));  // a resource is not its subresources
    CHECK_FALSE(RbacAllows(p, "update", "apps", "deployments", "ml", "web"));  // */scale only
    CHECK_FALSE(RbacAllows(p, "get", "coordination.k8s.io", "leases", "team", "other"));  // name
    CHECK_FALSE(RbacAllows(p, "update", "coordination.k8s.io", "leases", "team", ""));    // unnamed
    CHECK_FALSE(
        RbacAllows(p, "get", "coordination.k8s.io", "leases", "other", "mine"));     // namespace
    CHECK_FALSE(RbacAllows(p, "get", "coordination.k8s.io", "leases", "", "mine"));  // cluster-wide
    CHECK_FALSE(RbacAllows(RbacPolicy{}, "get", "", "pods", "ml", "a"));
  }
}

TEST_CASE("berth's RBAC grants the calls berth makes and nothing more", "[manifests][rbac]") {
  const RbacPolicy p = LoadBerthRbac();
  CHECK(p.ns == "berth-system");
  const std::string lease = "berth-scheduler";
  struct Call {
    std::string verb, group, resource, ns, name;
  };
  // Every call berth's Kubernetes client makes (extender-protocol.md section 4): list/watch
  // across all namespaces, writes on one named pod, Lease calls in berth's namespace.
  const std::vector<Call> calls = {
      {"list", "", "nodes", "", ""},
      {"watch", "", "nodes", "", ""},
      {"list", "", "pods", "", ""},
      {"watch", "", "pods", "", ""},
      // Whether a gang member that left the pod watch succeeded.
      {"get", "", "pods", "ml", "train-0"},
      {"patch", "", "pods", "ml", "train-0"},
      {"create", "", "pods/binding", "ml", "train-0"},
      {"create", "", "pods/eviction", "ml", "train-0"},
      {"create", "", "events", "ml", ""},
      {"create", "events.k8s.io", "events", "ml", ""},
      {"list", "scheduling.x-k8s.io", "podgroups", "", ""},
      {"watch", "scheduling.x-k8s.io", "podgroups", "", ""},
      {"list", "berth.io", "pools", "", ""},
      {"watch", "berth.io", "pools", "", ""},
      {"patch", "berth.io", "pools/status", "", "gpu-large"},
      {"list", "berth.io", "queues", "", ""},
      {"watch", "berth.io", "queues", "", ""},
      {"list", "scheduling.k8s.io", "priorityclasses", "", ""},
      {"watch", "scheduling.k8s.io", "priorityclasses", "", ""},
      {"get", "coordination.k8s.io", "leases", "berth-system", lease},
      {"create", "coordination.k8s.io", "leases", "berth-system", ""},
      {"update", "coordination.k8s.io", "leases", "berth-system", lease},
  };
  for (const Call& c : calls) {
    INFO(c.verb << " " << c.group << "/" << c.resource << " in '" << c.ns << "' named '" << c.name
                << "'");
    CHECK(RbacAllows(p, c.verb, c.group, c.resource, c.ns, c.name));
  }
  // Calls berth never makes are refused.
  const std::vector<Call> refused = {
      {"delete", "", "pods", "ml", "train-0"},
      {"update", "", "pods", "ml", "train-0"},
      {"create", "", "pods", "ml", ""},
      {"patch", "", "pods/status", "ml", "train-0"},
      {"create", "", "bindings", "ml", ""},
      {"patch", "", "nodes", "", "gpu-1"},
      {"get", "", "secrets", "berth-system", "x"},
      {"list", "", "configmaps", "", ""},
      {"update", "berth.io", "pools/status", "", "gpu-large"},
      {"list", "scheduling.volcano.sh", "podgroups", "", ""},
      {"get", "coordination.k8s.io", "leases", "kube-system", "kube-scheduler"},
      {"delete", "coordination.k8s.io", "leases", "berth-system", lease},
  };
  for (const Call& c : refused) {
    INFO(c.verb << " " << c.group << "/" << c.resource << " in '" << c.ns << "' named '" << c.name
                << "'");
    CHECK_FALSE(RbacAllows(p, c.verb, c.group, c.resource, c.ns, c.name));
  }
  // Nothing more: no wildcard, and the rules expand to exactly the calls above.
  std::set<std::string> granted;
  auto expand = [&](const std::vector<RbacRule>& rules, const std::string& scope) {
    for (const RbacRule& r : rules) {
      for (const auto* list : {&r.api_groups, &r.resources, &r.verbs}) {
        CHECK(std::find(list->begin(), list->end(), "*") == list->end());
      }
      for (const std::string& g : r.api_groups) {
        for (const std::string& res : r.resources) {
          for (const std::string& v : r.verbs) {
            granted.insert(scope + " " + v + " " + g + "/" + res);
          }
        }
      }
    }
  };
  expand(p.cluster_rules, "cluster");
  expand(p.namespace_rules, "namespace");
  std::set<std::string> wanted;
  for (const Call& c : calls) {
    wanted.insert((c.resource == "leases" ? "namespace " : "cluster ") + c.verb + " " + c.group +
                  "/" + c.resource);
  }
  CHECK(granted == wanted);
}

TEST_CASE("the PriorityClasses are berth's four levels", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const std::map<std::string, int> want = {{"berth-experiment", 10},
                                           {"berth-offline", 100},
                                           {"berth-normal", 1000},
                                           {"berth-production", 10000}};
  std::map<std::string, int> have;
  for (const Object& o : objs) {
    if (o.kind() != "PriorityClass") continue;
    INFO(o.where);
    const core::PriorityClass pc =
        DecodeWith(o.j, o.where, [](simdjson::dom::object obj, const extender::JsonPath& path) {
          return extender::DecodePriorityClass(obj, path);
        });
    have[pc.name] = pc.value;
    // Installing berth changes no existing pod's priority.
    CHECK_FALSE(pc.global_default);
    CHECK_FALSE(o.j.value("description", "").empty());
  }
  CHECK(have == want);
  CHECK(Find(objs, "PriorityClass", "berth-production")
            .j.value("description", "")
            .find("never preempted by berth") != std::string::npos);
}

TEST_CASE("the CRDs define Pool, Queue and PodGroup with structural schemas", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  struct Want {
    std::string name, group, kind, plural, singular, scope;
    std::vector<std::string> short_names;  // checked when not empty
  };
  const std::vector<Want> wants = {
      {"pools.berth.io", "berth.io", "Pool", "pools", "pool", "Cluster", {}},
      {"queues.berth.io", "berth.io", "Queue", "queues", "queue", "Cluster", {}},
      {"podgroups.scheduling.x-k8s.io",
       "scheduling.x-k8s.io",
       "PodGroup",
       "podgroups",
       "podgroup",
       "Namespaced",
       {"pg", "pgs"}},
  };
  int crds = 0;
  for (const Object& o : objs) crds += o.kind() == "CustomResourceDefinition";
  CHECK(crds == static_cast<int>(wants.size()));

  for (const Want& w : wants) {
    const Object& crd = Find(objs, "CustomResourceDefinition", w.name);
    INFO(crd.where);
    const json& spec = At(crd.j, "/spec", crd.where);
    CHECK(spec.value("group", "") == w.group);
    CHECK(spec.value("scope", "") == w.scope);
    CHECK(At(spec, "/names/kind", crd.where) == w.kind);
    CHECK(At(spec, "/names/plural", crd.where) == w.plural);
    CHECK(At(spec, "/names/singular", crd.where) == w.singular);
    CHECK(At(spec, "/names/listKind", crd.where) == w.kind + "List");
    CHECK(w.name == w.plural + "." + w.group);
    if (!w.short_names.empty()) {
      CHECK(At(spec, "/names/shortNames", crd.where) == json(w.short_names));
    }
    const json& versions = At(spec, "/versions", crd.where);
    REQUIRE(versions.size() == 1);
    CHECK(versions[0].value("name", "") == "v1alpha1");
    CHECK(versions[0].value("served", false));
    CHECK(versions[0].value("storage", false));
    // Controllers (berth for pools and queues) write status without racing spec edits.
    CHECK(At(versions[0], "/subresources/status", crd.where) == json::object());
    CHECK_FALSE(versions[0].value("additionalPrinterColumns", json::array()).empty());

    const json& schema = CrdSchema(crd);
    std::vector<std::string> errors;
    CheckStructural(schema, "", &errors);
    CHECK(schema.value("type", "") == "object");
    CHECK(At(schema, "/properties/metadata", crd.where) == json{{"type", "object"}});
    INFO("schema problems: " << json(errors).dump(1));
    CHECK(errors.empty());
  }

  auto field = [&](const std::string& crd, const std::string& pointer) -> const json& {
    const Object& o = Find(objs, "CustomResourceDefinition", crd);
    return At(CrdSchema(o), pointer, o.where);
  };
  SECTION("Pool: a LabelSelector over nodes and three flags, free-form status") {
    const std::string sel = "/properties/spec/properties/nodeSelector/properties";
    CHECK(field("pools.berth.io", sel + "/matchLabels/additionalProperties/type") == "string");
    const std::string expr = sel + "/matchExpressions/items";
    CHECK(field("pools.berth.io", expr + "/required") == json({"key", "operator"}));
    CHECK(field("pools.berth.io", expr + "/properties/operator/enum") ==
          json({"In", "NotIn", "Exists", "DoesNotExist"}));
    CHECK(field("pools.berth.io", expr + "/properties/values/items/type") == "string");
    for (const char* flag : {"disablePreemption", "disableBorrowing", "disableSharing"}) {
      INFO(flag);
      const json& f = field("pools.berth.io", std::string("/properties/spec/properties/") + flag);
      CHECK(f.value("type", "") == "boolean");
      CHECK(f.value("default", true) == false);
    }
    CHECK(field("pools.berth.io", "/properties/status/x-kubernetes-preserve-unknown-fields") ==
          true);
    CHECK(field("pools.berth.io", "/properties/status/properties/observedGeneration/type") ==
          "integer");
  }
  SECTION("Queue: weight above 0 defaulting to 1, the two limits at least 0") {
    const json& weight = field("queues.berth.io", "/properties/spec/properties/weight");
    CHECK(weight.value("type", "") == "number");
    CHECK(weight.value("minimum", -1.0) == 0.0);
    CHECK(weight.value("exclusiveMinimum", false));
    CHECK(weight.value("default", 0.0) == 1.0);
    for (const char* f : {"nonPreemptibleLimitFactor", "excessBudget"}) {
      INFO(f);
      const json& s = field("queues.berth.io", std::string("/properties/spec/properties/") + f);
      CHECK(s.value("type", "") == "number");
      CHECK(s.value("minimum", -1.0) == 0.0);
      CHECK_FALSE(s.value("exclusiveMinimum", false));
    }
    CHECK(field("queues.berth.io", "/properties/status/x-kubernetes-preserve-unknown-fields") ==
          true);
  }
  SECTION("PodGroup: scheduler-plugins' spec and status fields") {
    const std::string crd = "podgroups.scheduling.x-k8s.io";
    for (const char* f : {"minMember", "scheduleTimeoutSeconds"}) {
      INFO(f);
      const json& s = field(crd, std::string("/properties/spec/properties/") + f);
      CHECK(s.value("type", "") == "integer");
      CHECK(s.value("format", "") == "int32");
    }
    const json& q = field(crd, "/properties/spec/properties/minResources/additionalProperties");
    CHECK(q.value("x-kubernetes-int-or-string", false));
    for (const char* f : {"phase", "occupiedBy", "scheduleStartTime"}) {
      CHECK(field(crd, std::string("/properties/status/properties/") + f + "/type") == "string");
    }
    for (const char* f : {"running", "succeeded", "failed"}) {
      CHECK(field(crd, std::string("/properties/status/properties/") + f + "/type") == "integer");
    }
  }
}

TEST_CASE("custom resources in the manifests validate against their CRDs", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  int checked = 0;
  for (const Object& o : objs) {
    const Object* crd = CrdFor(objs, o.j.value("apiVersion", ""), o.kind());
    if (crd == nullptr) continue;
    INFO(o.where);
    const std::string version = o.j["apiVersion"].get<std::string>().substr(
        o.j["apiVersion"].get<std::string>().find('/') + 1);
    CHECK(version == At(crd->j, "/spec/versions/0/name", crd->where));
    CHECK(o.ns().empty() == (At(crd->j, "/spec/scope", crd->where) == "Cluster"));
    std::vector<std::string> errors;
    Validate(o.j, CrdSchema(*crd), "", &errors);
    INFO("problems: " << json(errors).dump(1));
    CHECK(errors.empty());
    ++checked;
  }
  CHECK(checked >= 9);  // 5 Pools, 3 Queues, 1 PodGroup

  // The validator itself finds mistakes (so a pass above means something): each bad field is
  // reported once, by its path.
  auto problems = [&](const std::string& crd, const std::string& text) {
    std::vector<std::string> errors;
    Validate(json::parse(text), CrdSchema(Find(objs, "CustomResourceDefinition", crd)), "",
             &errors);
    std::set<std::string> paths;
    for (const std::string& e : errors) paths.insert(e.substr(0, e.find(':')));
    INFO(json(errors).dump(1));
    CHECK(paths.size() == errors.size());
    return paths;
  };
  CHECK(problems("queues.berth.io", R"({"kind": "Queue", "metadata": {"name": "q"},
          "spec": {"weight": 0, "excessBudget": "lots", "wieght": 2}})") ==
        std::set<std::string>{"spec.weight", "spec.excessBudget", "spec"});
  CHECK(problems("pools.berth.io", R"({"kind": "Pool", "metadata": {"name": "p"},
          "spec": {"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Matches"}]},
                   "disableSharing": "yes"}})") ==
        std::set<std::string>{"spec.nodeSelector.matchExpressions[0].operator",
                              "spec.disableSharing"});
  CHECK(problems("podgroups.scheduling.x-k8s.io",
                 R"({"kind": "PodGroup", "metadata": {"name": "g", "namespace": "n"},
          "spec": {"minMember": -1, "minResources": {"cpu": "2 cores", "memory": "1Gi"}}})") ==
        std::set<std::string>{"spec.minMember", "spec.minResources.cpu"});
}

TEST_CASE("the examples decode as berth's objects and refer to objects that exist", "[manifests]") {
  const std::vector<Object> objs = LoadObjects("");
  const BerthPod berth_pod = LoadBerthPod(objs);
  const std::string scheduler_name = BerthConfig(objs, berth_pod).value("schedulerName", "");
  core::ResourceNames table;
  core::ResourceNameScope names(table);  // the checks read only the well-known resources

  std::map<std::string, core::Pool> pools;
  std::set<std::string> queues = {"default"};
  std::map<std::string, core::PodGroup> groups;  // "ns/name"
  std::set<std::string> priority_classes = {"system-cluster-critical", "system-node-critical"};
  for (const Object& o : objs) {
    if (o.kind() == "Pool") {
      core::Pool p =
          DecodeWith(o.j, o.where, [](simdjson::dom::object obj, const extender::JsonPath& path) {
            return extender::DecodePool(obj, path);
          });
      pools.emplace(p.name, std::move(p));
    } else if (o.kind() == "Queue") {
      const core::Queue q =
          DecodeWith(o.j, o.where, [](simdjson::dom::object obj, const extender::JsonPath& path) {
            return extender::DecodeQueue(obj, path);
          });
      CHECK(q.weight > 0);
      queues.insert(q.name);
    } else if (o.kind() == "PodGroup") {
      core::PodGroup g =
          DecodeWith(o.j, o.where, [&](simdjson::dom::object obj, const extender::JsonPath& path) {
            return extender::DecodePodGroup(obj, core::PodGroupSource::kSchedulerPlugins, names,
                                            path);
          });
      groups.emplace(g.Key(), std::move(g));
    } else if (o.kind() == "PriorityClass") {
      priority_classes.insert(o.name());
    }
  }
  CHECK(pools.size() == 5);
  CHECK(queues == std::set<std::string>{"default", "team-a", "team-b", "research"});
  REQUIRE(groups.count("berth-examples/train") == 1);

  SECTION("the node-pool pools split the demo cluster's nodes as its labels say") {
    const json demo =
        ParseJsonOrFail(ReadTestFile(fs::path(BERTH_SOURCE_DIR) / "extender/demo_cluster.json"),
                        "demo_cluster.json");
    int nodes = 0;
    for (const json& item : At(demo, "/items", "demo_cluster.json")) {
      if (item.value("kind", "") != "Node") continue;
      const core::Node node = DecodeWith(
          item, "demo node", [&](simdjson::dom::object obj, const extender::JsonPath& path) {
            return extender::DecodeNode(obj, names, path);
          });
      INFO("node " << node.name);
      std::vector<std::string> matching;
      for (const auto& [name, pool] : pools) {
        if (pool.node_selector.Matches(node.labels)) matching.push_back(name);
      }
      REQUIRE(matching.size() == 1);  // two would put the node in the default pool
      CHECK(node.labels.Get("berth.io/node-pool") == std::optional<std::string_view>(matching[0]));
      ++nodes;
    }
    CHECK(nodes == 14);
  }

  SECTION("workloads are berth's pods with pools, queues, gangs and priorities that exist") {
    // Each Pod, and each Job's pod template as the pods the Job creates.
    std::vector<std::pair<std::string, json>> workloads;
    int jobs = 0;
    for (const Object& o : objs) {
      if (o.kind() == "Pod") workloads.emplace_back(o.where, o.j);
      if (o.kind() == "Job") {
        json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
        pod["metadata"] = At(o.j, "/spec/template/metadata", o.where);
        pod["metadata"]["name"] = o.name() + "-0";
        pod["metadata"]["namespace"] = o.ns();
        pod["spec"] = At(o.j, "/spec/template/spec", o.where);
        workloads.emplace_back(o.where, pod);
        ++jobs;
      }
    }
    CHECK(workloads.size() >= 4);
    CHECK(jobs == 1);
    std::set<std::string> features;
    for (const auto& [where, j] : workloads) {
      INFO(where);
      const core::Pod pod =
          DecodeWith(j, where, [&](simdjson::dom::object obj, const extender::JsonPath& path) {
            return extender::DecodePod(obj, names, path);
          });
      CHECK(pod.scheduler_name == scheduler_name);
      CHECK(pod.request.Get(core::kCpu) > 0);
      if (!pod.priority_class.view().empty()) {
        CHECK(priority_classes.count(pod.priority_class.str()) == 1);
      }
      if (auto pool = pod.annotations.Get("berth.io/pool")) {
        CHECK(pools.count(std::string(*pool)) == 1);
        features.insert("pool");
      }
      if (auto queue = pod.labels.Get("berth.io/queue")) {
        CHECK(queues.count(std::string(*queue)) == 1);
        features.insert("queue");
      }
      if (auto group = pod.labels.Get("scheduling.x-k8s.io/pod-group")) {
        INFO("pod group " << *group);
        REQUIRE(groups.count(pod.ns.str() + "/" + std::string(*group)) == 1);
        const core::PodGroup& g = groups.at(pod.ns.str() + "/" + std::string(*group));
        // The Job starts exactly the gang, and the gang's minResources are its members' requests.
        const json& job = Find(objs, "Job", std::string(*group)).j;
        CHECK(job["spec"].value("parallelism", 0) == g.min_member);
        for (core::ResourceId r : {core::kCpu, core::kMemory, core::kNvidiaGpu}) {
          CHECK(g.min_resources.Get(r) == pod.request.Get(r) * g.min_member);
        }
        CHECK(pod.request.Get(core::kNvidiaGpu) > 0);
        features.insert("gang");
      }
    }
    CHECK(features == std::set<std::string>{"pool", "queue", "gang"});
  }
}

TEST_CASE("the seed's Pool examples ship with only apiVersion changed", "[manifests]") {
  const fs::path seeds = fs::path(BERTH_SOURCE_DIR) / ".." / "shared" / "seeds";
  fs::path seed;
  std::error_code ec;
  if (fs::is_directory(seeds, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(seeds)) {
      if (e.path().filename().string().rfind("004_", 0) == 0) seed = e.path();
    }
  }
  if (seed.empty()) {
    WARN("seed 004 not found under " << seeds.string()
                                     << ": the seed's Pool examples not compared");
    return;
  }
  // The ```yaml blocks of the seed that hold a Pool.
  std::map<std::string, json> seed_pools;
  std::stringstream lines(ReadTestFile(seed));
  std::string line, block;
  bool in_yaml = false;
  while (std::getline(lines, line)) {
    if (!in_yaml && line.rfind("```yaml", 0) == 0) {
      in_yaml = true;
      block.clear();
    } else if (in_yaml && line.rfind("```", 0) == 0) {
      in_yaml = false;
      const json j = YamlToJson(ParseYamlOrFail(block, seed.string()));
      if (j.is_object() && j.value("kind", "") == "Pool") {
        seed_pools[j["metadata"].value("name", "")] = j;
      }
    } else if (in_yaml) {
      block += line + "\n";
    }
  }
  const std::vector<Object> examples = LoadObjects("examples");
  for (const std::string name : {"demo", "masters"}) {
    INFO("Pool " << name);
    REQUIRE(seed_pools.count(name) == 1);
    json from_seed = seed_pools[name];
    json shipped = Find(examples, "Pool", name).j;
    CHECK(from_seed.value("apiVersion", "") == "resource.aibee.cn/v1alpha1");
    CHECK(shipped.value("apiVersion", "") == "berth.io/v1alpha1");
    // berth reads both the same way.
    auto decode = [](const json& j) {
      return DecodeWith(j, "Pool", [](simdjson::dom::object obj, const extender::JsonPath& path) {
        return extender::DecodePool(obj, path);
      });
    };
    CHECK(decode(from_seed) == decode(shipped));
    from_seed.erase("apiVersion");
    shipped.erase("apiVersion");
    CHECK(shipped == from_seed);
  }
}

TEST_CASE("YamlToJson types scalars as kubectl does", "[manifests]") {
  const json j = YamlToJson(
      YAML::Load("a: yes\nb: \"yes\"\nc: 8\nd: '8'\ne: 1.5\nf: ~\ng: |\n  text\nh: 0x1F\ni: Off\n"
                 "j: [1, \"x\", -3]\nk: 64Gi\nl:\nm: {n: true}\n"));
  CHECK(j["a"] == true);
  CHECK(j["b"] == "yes");
  CHECK(j["c"] == 8);
  CHECK(j["d"] == "8");
  CHECK(j["e"] == 1.5);
  CHECK(j["f"].is_null());
  CHECK(j["g"] == "text\n");
  CHECK(j["h"] == 31);
  CHECK(j["i"] == false);
  CHECK(j["j"] == json({1, "x", -3}));
  CHECK(j["k"] == "64Gi");
  CHECK(j["l"].is_null());
  CHECK(j["m"] == json{{"n", true}});
}

}  // namespace
}  // namespace berth::testing
