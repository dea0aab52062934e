#pragma once

// The Kubernetes manifests under manifests/ as tests read them: every YAML document, the JSON
// the API server would make of one, and berth's own RBAC rules with Kubernetes' matching, so a
// test can check each API call berth's client makes against what the manifests grant.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "nlohmann/json.hpp"

namespace berth::testing {

/// BERTH_SOURCE_DIR/manifests.
std::filesystem::path ManifestsDir();

/// One YAML document of a manifest file.
struct ManifestDocument {
  std::string
      file;       ///< path relative to manifests/, e.g. "03-rbac.yaml" or "examples/01-pools.yaml"
  int index = 0;  ///< position of the document in its file, from 0 (empty documents count)
  YAML::Node node;

  /// "03-rbac.yaml, document 2 (ClusterRole berth)", for test messages.
  std::string Where() const;
};

/// Every non-empty document of the `*.yaml` / `*.yml` files at `relative_path_or_dir`, a path
/// under manifests/ ("" for the whole directory). Directories are read recursively (but for
/// those holding a kustomization.yaml: kustomize components, made of patches), files in
/// path order (lexical, as `kubectl apply -f` reads a directory), documents in file order.
/// Fails the running test if the path does not exist or a file does not parse (naming the file,
/// line and column).
std::vector<ManifestDocument> LoadManifestFiles(const std::string& relative_path_or_dir);

/// The nodes of LoadManifestFiles(relative_path_or_dir).
std::vector<YAML::Node> LoadManifestDocuments(const std::string& relative_path_or_dir);

/// The object of `kind` named `name` (in namespace `ns` when not empty) among `docs`.
std::optional<YAML::Node> FindManifestObject(const std::vector<YAML::Node>& docs,
                                             std::string_view kind, std::string_view name,
                                             std::string_view ns = "");

/// A YAML node as the JSON the API server makes of it. kubectl converts YAML with YAML 1.1 rules
/// (sigs.k8s.io/yaml), so a plain scalar is null (`~`, `null`, empty), a boolean (`true`,
/// `yes`, `on`, `y` and their negations, in lower, title or upper case), an integer, a float,
/// or else a string; quoted and block scalars are always strings. Map keys are strings.
nlohmann::json YamlToJson(const YAML::Node& node);

/// One rule of a Role or ClusterRole. Resources use the "pods/binding" form for subresources.
struct RbacRule {
  std::vector<std::string> api_groups, resources, verbs, resource_names;
};

/// What a set of roles grants: ClusterRole rules apply in every namespace and to cluster-scoped
/// objects; Role rules only in the Role's namespace `ns`.
struct RbacPolicy {
  std::vector<RbacRule> cluster_rules;
  std::vector<RbacRule> namespace_rules;
  std::string ns;
};

/// The `rules` of a Role or ClusterRole document. Fails the running test on a rule that is not
/// a map of string lists, and on `nonResourceURLs`, which berth's roles never need.
std::vector<RbacRule> ParseRbacRules(const YAML::Node& role);

/// berth's own permissions: the ClusterRole `berth` and the Role `berth` of manifests/. Fails the
/// running test unless each exists once and a ClusterRoleBinding / RoleBinding grants it to the
/// ServiceAccount `berth` in the Role's namespace (an unbound role grants nothing).
RbacPolicy LoadBerthRbac();

/// Whether the policy allows `verb` on `api_group`/`resource_with_subresource` ("pods",
/// "pods/binding"), in namespace `ns` ("" for cluster-scoped objects), on the object `name`
/// ("" when the request names none, as list, watch and create of a new object do). Matching is
/// Kubernetes': "*" matches any verb, group or resource; "*/SUB" any resource's subresource SUB;
/// a resource never implies its subresources; a rule with resourceNames matches only requests
/// naming one of them.
bool RbacAllows(const RbacPolicy& policy, std::string_view verb, std::string_view api_group,
                std::string_view resource_with_subresource, std::string_view ns,
                std::string_view name);

}  // namespace berth::testing
