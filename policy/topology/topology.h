#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/cluster_model.h"

namespace berth::policy {

/// The network fabric as a tree (SPEC 6.3), derived from one state of the model: the node labels
/// named by `levels` (top level first, e.g. zone, spine, leaf) give each node its path. A domain
/// is one subtree: the root (depth 0, every node), one value of the first level under it (depth
/// 1), and so on down to the last level (depth L); a single node is depth L + 1.
///
/// A node that lacks the label of some level belongs only to the domains above it: berth does not
/// guess where such a node is attached, so it never counts it as close to anything it cannot
/// prove. Immutable once built, so verbs share it across threads.
class Topology {
 public:
  using DomainId = uint32_t;
  static constexpr DomainId kRoot = 0;
  static constexpr DomainId kNoDomain = UINT32_MAX;

  struct Domain {
    int depth = 0;                      ///< 0 root ... L last level
    DomainId parent = kNoDomain;
    std::string path;                   ///< "zone-a/spine-1/leaf-3"; "" for the root
    std::vector<core::NodeSlot> nodes;  ///< present nodes under it, in slot order
  };

  static std::shared_ptr<const Topology> Build(const core::ClusterState& state,
                                               const std::vector<std::string>& levels);

  /// Number of levels (L).
  int levels() const { return static_cast<int>(levels_.size()); }
  const std::vector<std::string>& level_names() const { return levels_; }
  const std::vector<Domain>& domains() const { return domains_; }
  const Domain& domain(DomainId id) const { return domains_[id]; }
  /// Domains of one depth (1..L), in path order.
  const std::vector<DomainId>& at_depth(int depth) const { return by_depth_[depth]; }

  /// The domain of `slot` at `depth` (0..L), or kNoDomain when its labels stop above it.
  DomainId DomainOf(core::NodeSlot slot, int depth) const;
  /// Hops between two nodes: 2 × (levels from the bottom to their lowest common domain), so
  /// same node 0, same last-level domain 2, ... different top-level domains 2 × (L + 1).
  int Hops(core::NodeSlot a, core::NodeSlot b) const;
  /// Hops between members placed anywhere inside one domain of `depth` (its worst case).
  int HopsWithin(int depth) const { return 2 * (levels() + 1 - depth); }
  /// The hops of a single node, the least there are.
  static constexpr int kSameNode = 0;
  /// Depth of the lowest domain holding every slot of `nodes` (L + 1 when they are all one
  /// node; 0 when nothing but the root holds them, or `nodes` is empty).
  int CommonDepth(const std::vector<core::NodeSlot>& nodes) const;
  /// The path of a node ("zone-a/spine-1/leaf-3"; shorter when labels are missing).
  std::string PathOf(core::NodeSlot slot) const;

  uint64_t node_labels_generation() const { return node_labels_generation_; }

 private:
  std::vector<std::string> levels_;
  std::vector<Domain> domains_;
  std::vector<std::vector<DomainId>> by_depth_;      ///< [depth] -> domains
  std::vector<std::vector<DomainId>> node_domains_;  ///< [slot][depth-1] for depth 1..L
  uint64_t node_labels_generation_ = 0;
};

/// Rebuilds the Topology only when node labels change. Thread-safe.
class TopologyCache {
 public:
  explicit TopologyCache(std::vector<std::string> levels) : levels_(std::move(levels)) {}
  std::shared_ptr<const Topology> Get(const core::ClusterState& state) const;
  const std::vector<std::string>& levels() const { return levels_; }

 private:
  std::vector<std::string> levels_;
  mutable absl::Mutex mu_;
  mutable std::shared_ptr<const Topology> tree_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::policy
