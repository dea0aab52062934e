#include "tests/testing/manifests.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <regex>
#include <utility>

namespace berth::testing {
namespace {

namespace fs = std::filesystem;

bool IsYamlFile(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml";
}

std::string Scalar(const YAML::Node& node, std::string_view key) {
  if (!node.IsMap()) return "";
  for (const auto& kv : node) {
    if (kv.first.Scalar() == key && kv.second.IsScalar()) return kv.second.Scalar();
  }
  return "";
}

YAML::Node Child(const YAML::Node& node, std::string_view key) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (kv.first.Scalar() == key) return kv.second;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The YAML 1.1 scalars sigs.k8s.io/yaml (go-yaml v2) resolves to booleans.
constexpr std::array<std::string_view, 11> kTrue = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                                    "True", "TRUE", "on",  "On",  "ON"};
constexpr std::array<std::string_view, 11> kFalse = {"n",     "N",     "no",  "No",  "NO", "false",
                                                     "False", "FALSE", "off", "Off", "OFF"};

bool In(std::string_view s, const std::array<std::string_view, 11>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

nlohmann::json ResolvePlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (In(s, kTrue)) return true;
  if (In(s, kFalse)) return false;
  static const std::regex kInt(R"(^[-+]?(0|[1-9][0-9]*)$)");
  static const std::regex kOctal(R"(^[-+]?0[0-7]+$)");
  static const std::regex kHex(R"(^[-+]?0x[0-9a-fA-F]+$)");
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  const bool negative = s[0] == '-';
  const size_t sign = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  auto integer = [&](size_t skip, int base) -> nlohmann::json {
    int64_t v = 0;
    const char* first = s.data() + sign + skip;
    const char* last = s.data() + s.size();
    auto [end, ec] = std::from_chars(first, last, v, base);
    if (ec != std::errc() || end != last) return s;  // out of int64 range: keep the text
    return negative ? -v : v;
  };
  if (std::regex_match(s, kInt)) return integer(0, 10);
  if (std::regex_match(s, kOctal)) return integer(1, 8);
  if (std::regex_match(s, kHex)) return integer(2, 16);
  if (std::regex_match(s, kFloat)) return std::stod(s);
  return s;
}

}  // namespace

fs::path ManifestsDir() { return fs::path(BERTH_SOURCE_DIR) / "manifests"; }

std::string ManifestDocument::Where() const {
  std::string out = file + ", document " + std::to_string(index);
  const std::string kind = Scalar(node, "kind");
  const std::string name = Scalar(Child(node, "metadata"), "name");
  if (!kind.empty() || !name.empty()) out += " (" + kind + " " + name + ")";
  return out;
}

std::vector<ManifestDocument> LoadManifestFiles(const std::string& relative_path_or_dir) {
  const fs::path root = ManifestsDir();
  const fs::path start = relative_path_or_dir.empty() ? root : root / relative_path_or_dir;
  INFO("manifests path " << start.string());
  REQUIRE(fs::exists(start));
  std::vector<fs::path> files;
  if (fs::is_directory(start)) {
    for (auto it = fs::recursive_directory_iterator(start); it != fs::recursive_directory_iterator(); ++it) {
      // A kustomize component (e.g. https/) holds patches, not objects.
      if (it->is_directory() && fs::exists(it->path() / "kustomization.yaml")) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && IsYamlFile(it->path())) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(start);
  }
  std::vector<ManifestDocument> out;
  for (const fs::path& path : files) {
    const std::string rel = fs::relative(path, root).generic_string();
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAllFromFile(path.string());
    } catch (const YAML::Exception& e) {
      // The message carries yaml-cpp's line and column.
      FAIL("manifests/" << rel << ": " << e.what());
    }
    for (size_t i = 0; i < docs.size(); ++i) {
      if (docs[i].IsNull()) continue;  // an empty document (e.g. a trailing ---)
      out.push_back(ManifestDocument{rel, static_cast<int>(i), docs[i]});
    }
  }
  return out;
}

std::vector<YAML::Node> LoadManifestDocuments(const std::string& relative_path_or_dir) {
  std::vector<YAML::Node> out;
  for (ManifestDocument& d : LoadManifestFiles(relative_path_or_dir)) out.push_back(d.node);
  return out;
}

std::optional<YAML::Node> FindManifestObject(const std::vector<YAML::Node>& docs,
                                             std::string_view kind, std::string_view name,
                                             std::string_view ns) {
  for (const YAML::Node& d : docs) {
    const YAML::Node meta = Child(d, "metadata");
    if (Scalar(d, "kind") == kind && Scalar(meta, "name") == name &&
        (ns.empty() || Scalar(meta, "namespace") == ns)) {
      return d;
    }
  }
  return std::nullopt;
}

nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.Scalar()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Scalar:
      // yaml-cpp tags plain scalars "?" and quoted or block scalars "!"; an explicit !!str
      // keeps the text too.
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return node.Scalar();
      return ResolvePlainScalar(node.Scalar());
  }
  return nullptr;
}

std::vector<RbacRule> ParseRbacRules(const YAML::Node& role) {
  const std::string where = Scalar(role, "kind") + " " + Scalar(Child(role, "metadata"), "name");
  std::vector<RbacRule> out;
  const YAML::Node rules = Child(role, "rules");
  if (!rules.IsDefined() || rules.IsNull()) return out;
  INFO(where);
  REQUIRE(rules.IsSequence());
  for (const YAML::Node& rule : rules) {
    REQUIRE(rule.IsMap());
    RbacRule r;
    for (const auto& kv : rule) {
      const std::string key = kv.first.Scalar();
      INFO("rules[]." << key);
      std::vector<std::string>* target = nullptr;
      if (key == "apiGroups") target = &r.api_groups;
      if (key == "resources") target = &r.resources;
      if (key == "verbs") target = &r.verbs;
      if (key == "resourceNames") target = &r.resource_names;
      if (target == nullptr) FAIL(where << ": unexpected rule field " << key);
      REQUIRE(kv.second.IsSequence());
      for (const YAML::Node& item : kv.second) {
        REQUIRE(item.IsScalar());
        target->push_back(item.Scalar());
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

RbacPolicy LoadBerthRbac() {
  const std::vector<YAML::Node> docs = LoadManifestDocuments("");
  auto count = [&](std::string_view kind, std::string_view name) {
    return std::count_if(docs.begin(), docs.end(), [&](const YAML::Node& d) {
      return Scalar(d, "kind") == kind && Scalar(Child(d, "metadata"), "name") == name;
    });
  };
  REQUIRE(count("ClusterRole", "berth") == 1);
  REQUIRE(count("Role", "berth") == 1);
  const YAML::Node cluster_role = *FindManifestObject(docs, "ClusterRole", "berth");
  const YAML::Node role = *FindManifestObject(docs, "Role", "berth");
  RbacPolicy policy;
  policy.ns = Scalar(Child(role, "metadata"), "namespace");
  REQUIRE_FALSE(policy.ns.empty());
  policy.cluster_rules = ParseRbacRules(cluster_role);
  policy.namespace_rules = ParseRbacRules(role);

  // Each role must reach the ServiceAccount berth through a binding of the matching kind.
  auto bound = [&](std::string_view binding_kind, std::string_view role_kind,
                   std::string_view binding_ns) {
    for (const YAML::Node& d : docs) {
      if (Scalar(d, "kind") != binding_kind) continue;
      if (!binding_ns.empty() && Scalar(Child(d, "metadata"), "namespace") != binding_ns) continue;
      const YAML::Node ref = Child(d, "roleRef");
      if (Scalar(ref, "kind") != role_kind || Scalar(ref, "name") != "berth" ||
          Scalar(ref, "apiGroup") != "rbac.authorization.k8s.io") {
        continue;
      }
      const YAML::Node subjects = Child(d, "subjects");
      if (!subjects.IsSequence()) continue;
      for (const YAML::Node& s : subjects) {
        if (Scalar(s, "kind") == "ServiceAccount" && Scalar(s, "name") == "berth" &&
            Scalar(s, "namespace") == policy.ns) {
          return true;
        }
      }
    }
    return false;
  };
  INFO("ServiceAccount " << policy.ns << "/berth");
  CHECK(bound("ClusterRoleBinding", "ClusterRole", ""));
  CHECK(bound("RoleBinding", "Role", policy.ns));
  return policy;
}

namespace {

bool Contains(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool ContainsOrStar(const std::vector<std::string>& list, std::string_view value) {
  return Contains(list, value) || Contains(list, "*");
}

bool RuleAllows(const RbacRule& rule, std::string_view verb, std::string_view api_group,
                std::string_view resource, std::string_view name) {
  if (!ContainsOrStar(rule.verbs, verb) || !ContainsOrStar(rule.api_groups, api_group)) {
    return false;
  }
  const size_t slash = resource.find('/');
  const std::string_view subresource =
      slash == std::string_view::npos ? std::string_view() : resource.substr(slash + 1);
  const bool resource_matches =
      std::any_of(rule.resources.begin(), rule.resources.end(), [&](const std::string& r) {
        if (r == "*" || r == resource) return true;
        return !subresource.empty() && r.size() > 2 && r.compare(0, 2, "*/") == 0 &&
               std::string_view(r).substr(2) == subresource;
      });
  if (!resource_matches) return false;
  if (rule.resource_names.empty()) return true;
  return !name.empty() && Contains(rule.resource_names, name);
}

}  // namespace

bool RbacAllows(const RbacPolicy& policy, std::string_view verb, std::string_view api_group,
                std::string_view resource_with_subresource, std::string_view ns,
                std::string_view name) {
  auto any = [&](const std::vector<RbacRule>& rules) {
    return std::any_of(rules.begin(), rules.end(), [&](const RbacRule& r) {
      return RuleAllows(r, verb, api_group, resource_with_subresource, name);
    });
  };
  if (any(policy.cluster_rules)) return true;
  return !ns.empty() && ns == policy.ns && any(policy.namespace_rules);
}

}  // namespace berth::testing
