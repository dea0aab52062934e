#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/settings.h"

namespace berth::policy {

/// The pool every node no Pool selects (or several select) belongs to, and the home pool of a
/// pod that names none. It always exists, whether or not a Pool object of that name does; a Pool
/// object named "default" only sets its flags.
inline constexpr std::string_view kDefaultPool = "default";

/// The pod's home pool: annotation `berth.io/pool`, else the seed's `resource.aibee.cn/pool`,
/// else "default".
std::string_view HomePoolName(const core::Pod& pod);

using PoolId = uint32_t;
inline constexpr PoolId kDefaultPoolId = 0;

/// Which pool each node belongs to, derived from one state of the model (SPEC 6.1): a node
/// goes to the one pool whose nodeSelector matches it; matching none or several, to "default".
/// Immutable once built, so verbs can share it across threads.
class PoolMap {
 public:
  struct Entry {
    std::string name;
    bool disable_preemption = false;
    bool disable_borrowing = false;
    bool disable_sharing = false;
    std::vector<core::NodeSlot> nodes;  ///< present nodes, in slot order
  };

  static std::shared_ptr<const PoolMap> Build(const core::ClusterState& state);

  /// Pools by id; id 0 is "default", the others in name order.
  const std::vector<Entry>& pools() const { return pools_; }
  const Entry& pool(PoolId id) const { return pools_[id]; }
  std::optional<PoolId> Find(std::string_view name) const;
  /// The pool of a node slot (default for a slot it has never seen).
  PoolId PoolOf(core::NodeSlot slot) const {
    return slot < node_pool_.size() ? node_pool_[slot] : kDefaultPoolId;
  }
  /// The generations the map was built from.
  uint64_t pools_generation() const { return pools_generation_; }
  uint64_t node_labels_generation() const { return node_labels_generation_; }

 private:
  std::vector<Entry> pools_;
  std::vector<PoolId> node_pool_;  ///< by NodeSlot
  uint64_t pools_generation_ = 0;
  uint64_t node_labels_generation_ = 0;
};

/// Rebuilds the PoolMap only when Pools or node labels changed. Thread-safe.
class PoolMapCache {
 public:
  std::shared_ptr<const PoolMap> Get(const core::ClusterState& state) const;

 private:
  mutable absl::Mutex mu_;
  mutable std::shared_ptr<const PoolMap> map_ ABSL_GUARDED_BY(mu_);
};

/// Whether a bound pod runs outside its home pool (a borrower), given the map of its state.
bool IsBorrower(const core::PodState& pod, const PoolMap& map);

/// Pool statistics (SPEC 3.2, seed 004's pool table), per pool.
struct PoolStats {
  /// One row of the table: amounts per resource plus node and pod counts.
  struct Row {
    core::ResourceVector resources;
    int64_t nodes = 0;
    int64_t pods = 0;
  };
  std::string name;
  bool disable_preemption = false, disable_borrowing = false, disable_sharing = false;
  Row capacity;     ///< its nodes' capacity
  Row allocatable;  ///< its nodes' allocatable
  Row used;         ///< requests of every pod on its nodes (any scheduler; in-flight binds too); nodes: with a pod
  Row shared;       ///< requests of other pools' pods running on its nodes (lent)
  Row borrowed;     ///< requests of its pods running on other pools' nodes
  Row pending;      ///< requests of its pods waiting to be placed

  /// The seed's flags: "p" preemption, "b" borrowing, "s" sharing, "-" where disabled.
  std::string Flags() const;
};

/// The rows of the pool table, spelled as Pool.status and /metrics spell them ("capacity").
inline constexpr std::array<std::pair<std::string_view, PoolStats::Row PoolStats::*>, 6>
    kPoolStatsRows = {{{"capacity", &PoolStats::capacity},
                       {"allocatable", &PoolStats::allocatable},
                       {"used", &PoolStats::used},
                       {"shared", &PoolStats::shared},
                       {"borrowed", &PoolStats::borrowed},
                       {"pending", &PoolStats::pending}}};
/// The seed's resource columns of the pool table: cpu, gpu, memory, storage.
inline constexpr std::array<std::pair<std::string_view, core::ResourceId>, 4> kPoolStatsResources = {
    {{"cpu", core::kCpu},
     {"nvidia.com/gpu", core::kNvidiaGpu},
     {"memory", core::kMemory},
     {"ephemeral-storage", core::kEphemeralStorage}}};

/// Statistics of every pool of `map`. \param scheduler_name pods of this scheduler have home
/// pools; the others only use capacity.
std::vector<PoolStats> ComputePoolStats(const core::ClusterState& state, const PoolMap& map,
                                        std::string_view scheduler_name);

/// Whether some node of `pool` takes the pod now (room held for the pod counts as its own).
/// `whatif`, when given, supplies the free room (tentative placements and evictions counted).
bool PoolHasRoom(const core::ClusterState& state, const core::Pod& pod, const PoolMap::Entry& pool,
                 const WhatIf* whatif = nullptr);

/// Where and whom to evict so that `pod` fits in its home pool (SPEC 6.1, seed 004), or nullopt.
/// Only for berth's own unbound pods whose home pool exists and has no room. Victims are berth's
/// pods below production priority on one node of the home pool that is not cordoned: borrowers
/// whatever their priority, and, where the pool allows preemption, in-pool pods of lower
/// priority than `pod`. Pods already terminating count as leaving and are not evicted again.
/// On each node the cheapest victims go first (borrowers, then lower priority, then the most
/// recently started), and victims not needed after all are spared again, most valuable first.
/// Among nodes: fewest in-pool victims, lowest highest-victim priority, lowest priority sum,
/// fewest victims (PDBs are unknown to berth; the Eviction API enforces them).
struct PoolReclaim {
  PoolId pool = kDefaultPoolId;
  core::NodeSlot node = core::kNoNode;
  std::vector<const core::PodState*> victims;
  int in_pool_victims = 0;
};
/// Every step is asked of a what-if on top of `whatif` (so every filter must accept the pod
/// with the room the eviction makes), which the search leaves unchanged.
std::optional<PoolReclaim> FindPoolReclaim(const WhatIf& whatif, const PoolMap& map,
                                           const core::Pod& pod, std::string_view scheduler_name);
/// The pods pool rules allow evicting on `node` to make room for `pod` in its home pool,
/// cheapest first: berth's pods below production priority; borrowers whatever their priority,
/// in-pool pods of lower priority than `pod` where the pool allows preemption; members of a
/// gang only down to its minimum (its elastic members). Empty for a node outside the home pool,
/// a cordoned node or one the pod's placement excludes. `leaving`, if given, receives the
/// node's pods already on their way out (terminating, or evicted by an earlier reclaim).
std::vector<const core::PodState*> ReclaimCandidates(const core::ClusterState& state,
                                                     const PoolMap& map, const core::Pod& pod,
                                                     const core::NodeState& node,
                                                     std::string_view scheduler_name,
                                                     std::vector<const core::PodState*>* leaving);

/// The verdict of a node that does not take a pod while room is being reclaimed for it: names
/// the node, the pool and the evicted pods still leaving. Unresolvable, so kube-scheduler does
/// not start a preemption of its own on top (SPEC 6).
NodeVerdict ReclaimInProgressVerdict(const core::ClusterState& state,
                                     const core::Reservation& reservation);

/// Priority at and above which a pod is production work (the `berth-production` PriorityClass,
/// SPEC 4): berth never preempts it.
inline constexpr int32_t kProductionPriority = 10000;

/// Module "pools" (SPEC 6.1): one type at three points, sharing one PoolMapCache.
///
/// Filter: a pod stays in its home pool while the pool has room; when it has none and the home
/// pool allows borrowing, the pod may go to one other pool that allows sharing and has room: the
/// one with the most free resources (of the kinds the pod asks for: GPUs, then CPU, then
/// memory), then the fewest pods. Unknown home pools are rejected with a reason. Runs after
/// resource-fit, so a node without room reports that first.
///
/// PostFilter (reclaim): carries out FindPoolReclaim for a pod that no candidate takes; the
/// Filter keeps such a pod out of other pools meanwhile (preempt first, then borrow).
///
/// PreemptionReview (SPEC 6.1, 6.5): removes from kube-scheduler's proposal the victims pool
/// rules protect, and drops nodes of pools with disablePreemption. Never a pod of another
/// scheduler, never production priority, never an in-pool pod to make room for a borrower.
/// When the preemptor is in its home pool and the node holds borrowers, it replaces the
/// proposal with borrowers where evicting them alone makes room (the cheaper victims: seed 004
/// takes borrowers first). Runs before "resource-fit", which drops nodes whose remaining
/// victims do not free enough.
class PoolsModule final : public FilterPlugin,
                          public PostFilterPlugin,
                          public PreemptionReviewPlugin {
 public:
  PoolsModule(const core::ResourceNames* names, std::string scheduler_name)
      : names_(names), scheduler_name_(std::move(scheduler_name)) {}
  std::string_view Name() const override { return "pools"; }
  bool Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const override;
  std::optional<ReclaimPlan> PostFilter(const CycleContext& ctx) const override;
  std::vector<const core::PodState*> ReclaimCandidates(const CycleContext& ctx,
                                                       const core::NodeState& node) const override;
  bool Review(const CycleContext& ctx, const core::NodeState& node, NodeVictims* proposal,
              NodeVerdict* why) const override;

  /// The per-pod decision, made once per cycle. Whether the home pool has room, and which pool
  /// lends, are worked out only when a node outside the home pool is asked about: with no Pool
  /// objects every node is home, and the hot path costs one lookup.
  struct Plan {
    std::shared_ptr<const PoolMap> map;
    std::optional<PoolId> home;  ///< nullopt: the pod names a pool that does not exist
    struct Borrowing {
      bool home_has_room = false;
      /// Preempt first, then borrow: room is held for the pod in its home pool, or evicting
      /// there would make some; the pod does not borrow meanwhile.
      bool reclaiming = false;
      std::optional<PoolId> lender;  ///< the pool to borrow from, if borrowing
    };
    /// Filled on first use (a plan belongs to one cycle, on one thread).
    mutable std::optional<Borrowing> borrowing;
  };
  Plan MakePlan(const CycleContext& ctx) const;
  Plan::Borrowing DecideBorrowing(const CycleContext& ctx, const Plan& plan) const;

 private:
  const core::ResourceNames* names_;
  std::string scheduler_name_;
  PoolMapCache cache_;
};

/// Reads the pools module's part of the "pools" section: how long room freed by a reclaim is
/// held (reclaimTimeoutSeconds). "statusIntervalSeconds" there belongs to the Pool.status
/// writer, which takes it out before handing the section on (Settings::Without).
absl::StatusOr<PoolsConfig> ParsePoolsSettings(const Settings& section);

}  // namespace berth::policy
