#include "policy/topology/topology.h"

#include <algorithm>
#include <map>

#include "core/strings.h"

namespace berth::policy {

std::shared_ptr<const Topology> Topology::Build(const core::ClusterState& state,
                                                const std::vector<std::string>& levels) {
  auto t = std::make_shared<Topology>();
  t->levels_ = levels;
  t->node_labels_generation_ = state.node_labels_generation();
  const int depth_count = static_cast<int>(levels.size());
  t->domains_.push_back(Domain{.depth = 0});
  t->by_depth_.resize(depth_count + 1);
  t->by_depth_[0].push_back(kRoot);
  // Paths in order, so domains of one depth come out sorted (stable debug output).
  std::map<std::string, DomainId, std::less<>> by_path;
  std::vector<std::pair<core::NodeSlot, std::vector<std::string>>> paths;
  state.ForEachNode([&](core::NodeSlot slot, const core::NodeState& n) {
    std::vector<std::string> path;
    for (const std::string& level : levels) {
      auto v = n.node.labels.Get(level);
      if (!v || v->empty()) break;
      path.emplace_back(*v);
    }
    paths.emplace_back(slot, std::move(path));
  });
  // Create domains depth by depth in path order.
  for (int depth = 1; depth <= depth_count; ++depth) {
    std::map<std::string, DomainId> created;
    for (const auto& [slot, path] : paths) {
      if (static_cast<int>(path.size()) < depth) continue;
      std::string key;
      for (int i = 0; i < depth; ++i) StrAppend(&key, i == 0 ? "" : "/", path[i]);
      created.emplace(std::move(key), kNoDomain);
    }
    for (auto& [key, id] : created) {
      id = static_cast<DomainId>(t->domains_.size());
      DomainId parent = kRoot;
      if (depth > 1) parent = by_path.at(key.substr(0, key.rfind('/')));
      t->domains_.push_back(Domain{.depth = depth, .parent = parent, .path = key});
      t->by_depth_[depth].push_back(id);
      by_path.emplace(key, id);
    }
  }
  for (const auto& [slot, path] : paths) {
    if (t->node_domains_.size() <= slot) t->node_domains_.resize(slot + 1);
    std::vector<DomainId>& mine = t->node_domains_[slot];
    mine.assign(depth_count, kNoDomain);
    t->domains_[kRoot].nodes.push_back(slot);
    std::string key;
    for (int i = 0; i < static_cast<int>(path.size()); ++i) {
      StrAppend(&key, i == 0 ? "" : "/", path[i]);
      const DomainId id = by_path.at(key);
      mine[i] = id;
      t->domains_[id].nodes.push_back(slot);
    }
  }
  return t;
}

Topology::DomainId Topology::DomainOf(core::NodeSlot slot, int depth) const {
  if (depth == 0) return kRoot;
  if (slot >= node_domains_.size() || depth > levels() || node_domains_[slot].empty()) {
    return kNoDomain;
  }
  return node_domains_[slot][depth - 1];
}

int Topology::Hops(core::NodeSlot a, core::NodeSlot b) const {
  if (a == b) return kSameNode;
  for (int depth = levels(); depth >= 1; --depth) {
    const DomainId da = DomainOf(a, depth);
    if (da != kNoDomain && da == DomainOf(b, depth)) return HopsWithin(depth);
  }
  return HopsWithin(0);
}

int Topology::CommonDepth(const std::vector<core::NodeSlot>& nodes) const {
  if (nodes.empty()) return 0;
  if (std::all_of(nodes.begin(), nodes.end(), [&](core::NodeSlot s) { return s == nodes[0]; })) {
    return levels() + 1;
  }
  for (int depth = levels(); depth >= 1; --depth) {
    const DomainId d = DomainOf(nodes[0], depth);
    if (d == kNoDomain) continue;
    if (std::all_of(nodes.begin(), nodes.end(),
                    [&](core::NodeSlot s) { return DomainOf(s, depth) == d; })) {
      return depth;
    }
  }
  return 0;
}

std::string Topology::PathOf(core::NodeSlot slot) const {
  for (int depth = levels(); depth >= 1; --depth) {
    const DomainId d = DomainOf(slot, depth);
    if (d != kNoDomain) return domains_[d].path;
  }
  return "";
}

std::shared_ptr<const Topology> TopologyCache::Get(const core::ClusterState& state) const {
  absl::MutexLock lock(&mu_);
  if (tree_ == nullptr || tree_->node_labels_generation() != state.node_labels_generation()) {
    tree_ = Topology::Build(state, levels_);
  }
  return tree_;
}

}  // namespace berth::policy
