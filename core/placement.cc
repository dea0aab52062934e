#include "core/placement.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/strings.h"

namespace berth::core {

std::string_view NodeSelectorOpName(NodeSelectorOp op) {
  switch (op) {
    case NodeSelectorOp::kIn: return "In";
    case NodeSelectorOp::kNotIn: return "NotIn";
    case NodeSelectorOp::kExists: return "Exists";
    case NodeSelectorOp::kDoesNotExist: return "DoesNotExist";
    case NodeSelectorOp::kGt: return "Gt";
    case NodeSelectorOp::kLt: return "Lt";
  }
  return "Exists";
}

std::optional<NodeSelectorOp> ParseNodeSelectorOp(std::string_view text) {
  static constexpr std::array<NodeSelectorOp, 6> kAll = {
      NodeSelectorOp::kIn,           NodeSelectorOp::kNotIn, NodeSelectorOp::kExists,
      NodeSelectorOp::kDoesNotExist, NodeSelectorOp::kGt,    NodeSelectorOp::kLt};
  for (NodeSelectorOp op : kAll) {
    if (NodeSelectorOpName(op) == text) return op;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseGoInt64(std::string_view text) {
  // std::from_chars takes a leading '-' but not '+'; Go takes either.
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return std::nullopt;
  }
  if (text.empty()) return std::nullopt;
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

bool NodeSelectorRequirement::Matches(std::optional<std::string_view> value) const {
  switch (op) {
    case NodeSelectorOp::kIn:
      return value.has_value() && std::find(values.begin(), values.end(), *value) != values.end();
    case NodeSelectorOp::kNotIn:
      return !value.has_value() || std::find(values.begin(), values.end(), *value) == values.end();
    case NodeSelectorOp::kExists: return value.has_value();
    case NodeSelectorOp::kDoesNotExist: return !value.has_value();
    case NodeSelectorOp::kGt:
    case NodeSelectorOp::kLt: {
      if (!value.has_value() || !number_ok) return false;
      const std::optional<int64_t> have = ParseGoInt64(*value);
      if (!have) return false;
      return op == NodeSelectorOp::kGt ? *have > number : *have < number;
    }
  }
  return false;
}

bool NodeSelectorTerm::Matches(const Node& node) const {
  if (empty()) return false;
  for (const NodeSelectorRequirement& r : match_expressions) {
    if (!r.Matches(node.labels.Get(r.key))) return false;
  }
  // Kubernetes checks matchFields only for a node that has fields, i.e. a name (every node in
  // the model has one).
  if (node.name.empty()) return true;
  for (const NodeSelectorRequirement& r : match_fields) {
    const std::optional<std::string_view> field =
        r.key == kNodeNameField ? std::optional<std::string_view>(node.name) : std::nullopt;
    if (!r.Matches(field)) return false;
  }
  return true;
}

bool Toleration::Tolerates(const Taint& taint) const {
  if (!effect.empty() && effect != taint.effect) return false;
  if (!key.empty() && key != taint.key) return false;
  return op == TolerationOp::kExists || value == taint.value;
}

bool PodPlacement::Tolerates(const Taint& taint) const {
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const Toleration& t) { return t.Tolerates(taint); });
}

namespace {

// A text that differs for placements that differ: every string length-prefixed.
void AppendKeyField(std::string* out, std::string_view s) {
  StrAppend(out, s.size(), ":", s);
}

std::string PlacementKey(const PodPlacement& p) {
  std::string key;
  for (const auto& [k, v] : p.node_selector.items()) {
    key.push_back('S');
    AppendKeyField(&key, k);
    AppendKeyField(&key, v);
  }
  if (p.required_terms.has_value()) {
    key.push_back('A');
    for (const NodeSelectorTerm& t : *p.required_terms) {
      key.push_back('T');
      for (const auto* reqs : {&t.match_expressions, &t.match_fields}) {
        key.push_back(reqs == &t.match_fields ? 'F' : 'E');
        for (const NodeSelectorRequirement& r : *reqs) {
          key.push_back(static_cast<char>('0' + static_cast<int>(r.op)));
          AppendKeyField(&key, r.key);
          StrAppend(&key, r.values.size(), "#");
          for (const std::string& v : r.values) AppendKeyField(&key, v);
        }
      }
    }
  }
  for (const Toleration& t : p.tolerations) {
    key.push_back(t.op == TolerationOp::kExists ? 'X' : 'Q');
    AppendKeyField(&key, t.key);
    AppendKeyField(&key, t.value);
    AppendKeyField(&key, t.effect);
  }
  return key;
}

const PodPlacement& NoPlacement() {
  static const PodPlacement kNone;
  return kNone;
}

// The taint a cordoned node stands for (NodeUnschedulable).
const Taint& UnschedulableTaint() {
  static const Taint kTaint{.key = std::string(kUnschedulableTaintKey), .effect = "NoSchedule"};
  return kTaint;
}

bool Fail(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
  return false;
}

}  // namespace

std::shared_ptr<const PodPlacement> SharePlacement(PodPlacement p) {
  if (p.empty()) return nullptr;
  struct Table {
    absl::Mutex mu;
    // Weak: a placement lives as long as some pod holds it. Expired entries are swept when the
    // table has doubled since the last sweep, so it stays within twice the live placements.
    absl::flat_hash_map<std::string, std::weak_ptr<const PodPlacement>> placements
        ABSL_GUARDED_BY(mu);
    size_t sweep_at ABSL_GUARDED_BY(mu) = 1024;
  };
  static Table* const table = new Table();  // never destroyed: pods may outlive statics
  std::string key = PlacementKey(p);
  absl::MutexLock lock(&table->mu);
  std::weak_ptr<const PodPlacement>& slot = table->placements[std::move(key)];
  if (std::shared_ptr<const PodPlacement> shared = slot.lock()) return shared;
  auto made = std::make_shared<const PodPlacement>(std::move(p));
  slot = made;
  if (table->placements.size() >= table->sweep_at) {
    absl::erase_if(table->placements, [](const auto& entry) { return entry.second.expired(); });
    table->sweep_at = std::max<size_t>(1024, 2 * table->placements.size());
  }
  return made;
}

bool PlacementAllows(const Pod& pod, const Node& node, std::string* why) {
  // The hot path: most nodes are schedulable and untainted, and on those only a pod's
  // nodeSelector and node affinity matter, which most pods do not have (nearly all have
  // tolerations: see SharePlacement).
  if (node.taints.empty() && !node.unschedulable &&
      (pod.placement == nullptr ||
       (pod.placement->node_selector.empty() && !pod.placement->required_terms.has_value()))) {
    return true;
  }
  const PodPlacement& p = pod.placement != nullptr ? *pod.placement : NoPlacement();

  // NodeUnschedulable.
  if (node.unschedulable && !p.Tolerates(UnschedulableTaint())) {
    return Fail(why, "node is cordoned");
  }
  // TaintToleration: NoSchedule and NoExecute taints only.
  for (const Taint& t : node.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    if (!p.Tolerates(t)) {
      return Fail(why, t.value.empty() ? StrCat("untolerated taint ", t.key, ":", t.effect)
                                       : StrCat("untolerated taint ", t.key, "=", t.value, ":",
                                                t.effect));
    }
  }
  // NodeAffinity: nodeSelector, then required node affinity.
  for (const auto& [key, value] : p.node_selector.items()) {
    const std::optional<std::string_view> have = node.labels.Get(key);
    if (!have || *have != value) {
      return Fail(why, StrCat("node selector ", key, "=", value, " does not match"));
    }
  }
  if (p.required_terms.has_value() &&
      std::none_of(p.required_terms->begin(), p.required_terms->end(),
                   [&](const NodeSelectorTerm& t) { return t.Matches(node); })) {
    return Fail(why, "required node affinity does not match");
  }
  return true;
}

}  // namespace berth::core
