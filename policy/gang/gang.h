#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/settings.h"
#include "policy/topology/topology.h"

namespace berth::policy {

class Pipeline;

/// Annotation on a gang's pods: the most network hops allowed between any two members.
inline constexpr std::string_view kMaxHopsKey = "berth.io/max-hops";
/// Annotation on a PodGroup (or its pods): the gang's freezing window ("90s", "5m").
inline constexpr std::string_view kFreezeWindowKey = "berth.io/freeze-window";

/// A gang as one state of the model has it (SPEC 6.2, 6.6).
struct GangView {
  std::string ns;
  std::string name;
  const core::PodGroup* group = nullptr;  ///< nullptr: no PodGroup object (yet)
  int32_t min_member = 1;
  /// Members holding node room: bound (or being bound) and not finished.
  std::vector<const core::PodState*> bound;
  /// Members with room reserved for them by a gang plan.
  std::vector<const core::PodState*> reserved;
  /// Members waiting without room, oldest first.
  std::vector<const core::PodState*> pending;
  /// Members that finished successfully (they count as done): those still in the model and
  /// those that left it (ClusterState::SucceededGangTombstones).
  int succeeded = 0;
  /// `berth.io/max-hops` of its members (the strictest), or nullopt.
  std::optional<int> max_hops;
  absl::Duration freeze_window;
  const core::GangRecord* record = nullptr;

  std::string Key() const { return ns + "/" + name; }
  /// Members placed or done: what counts toward minMember.
  int placed() const {
    return static_cast<int>(bound.size() + reserved.size()) + succeeded;
  }
  /// Every member that still counts (placed, done or waiting).
  int total() const { return placed() + static_cast<int>(pending.size()); }
  bool admitted() const { return placed() >= min_member; }
  /// Members running or done (reserved room does not count): what an eviction may take down to
  /// min_member.
  int running() const { return static_cast<int>(bound.size()) + succeeded; }
  /// (placed - min) / (total - min) (seed 002); 1 when the gang has no elastic members.
  double Fulfillment() const;
  /// Whether berth resized the gang less than its freezing window ago.
  bool Frozen(absl::Time now) const;
};

/// Reads gang `ns/name` from `state`. `config` supplies the default freezing window.
GangView ViewGang(const core::ClusterState& state, std::string_view ns, std::string_view name,
                  const GangConfig& config);

/// How long room reserved for the gang waits for its members to bind: the PodGroup's
/// `spec.scheduleTimeoutSeconds`, else the configured default.
absl::Duration GangTimeout(const GangView& gang, const GangConfig& config);

/// The nodes of the gang's placed members (bound, being bound or reserved), in member order,
/// leaving out `skip`'s; a node holding several members appears once per member.
std::vector<core::NodeSlot> PlacedNodes(const core::ClusterState& state, const GangView& gang,
                                        const core::PodState* skip = nullptr);

/// One member's planned node.
struct GangPlacement {
  const core::PodState* member = nullptr;
  core::NodeSlot node = core::kNoNode;
};

/// A gang admission: a node for every member it needs, possibly after evicting elastic members
/// of other gangs (seed 002: capacity is taken back from the most fulfilled gang first).
struct GangPlan {
  std::vector<GangPlacement> placements;
  std::vector<const core::PodState*> victims;
  /// Most hops between any two members once placed (bound members included).
  int max_hops = 0;
  /// The smallest domain holding the whole gang ("" for the root).
  std::string domain;
};

/// What planning a gang found: a plan, or why there is none.
struct GangOutcome {
  std::optional<GangPlan> plan;
  /// Members placeable now (placed ones included), for "5 of 8 members placeable".
  int placeable = 0;
  /// Set when there is no plan: the reason every node gives.
  NodeVerdict why;
};

/// Whether `pod` may go on `node` by every rule except resources (berth's other filters in
/// planning mode, and the constraints kube-scheduler checks).
using EligibleFn = std::function<bool(const core::Pod& pod, const core::NodeState& node)>;

/// Plans gangs (SPEC 6.2, 6.3, 6.6): all-or-nothing admission against one view with the
/// fewest-hops placement, elastic growth by fulfillment, and re-planning of one member.
/// Stateless apart from the topology cache; thread-safe.
class GangPlanner {
 public:
  GangPlanner(GangConfig config, std::string scheduler_name);

  const GangConfig& config() const { return config_; }
  std::shared_ptr<const Topology> topology(const core::ClusterState& state) const {
    return topology_.Get(state);
  }

  /// Plans room for the members `gang` still needs to reach minMember, all at once: the
  /// smallest topology domain that holds them (within `berth.io/max-hops`; among domains of one
  /// depth, the one left with the least room) and, inside it, the leaf with the most room first
  /// and the node with room for the most members first, so the gang spreads over as few leaves
  /// and nodes as it can. Every member is checked by the pipeline's filters in a what-if with
  /// the members before it placed. When free room is short, elastic members of other gangs (most
  /// fulfilled gang first, never below its minimum, never a frozen gang, never of higher
  /// priority than `pod`) may be evicted, then what the reclaim modules let go in its pool.
  GangOutcome PlanAdmission(const CycleContext& ctx, const GangView& gang,
                            const EligibleFn& eligible) const;

  /// Places elastic members (beyond minMember) of admitted, unfrozen gangs while room allows,
  /// one at a time to the least fulfilled gang (seed 002), each near its gang's members.
  /// Every node it picks passes the filter chain of `pipeline` in a what-if with the members
  /// placed before it (resources and placement only without a pipeline).
  std::vector<GangPlacement> PlanElastic(const core::ClusterState& state, absl::Time now,
                                         const EligibleFn& eligible,
                                         const Pipeline* pipeline = nullptr) const;

  /// A new node for one member whose reserved node kube-scheduler no longer offers: among
  /// `allowed` (candidate names), the one fewest hops from the gang's other members that fits.
  std::optional<core::NodeSlot> ReplanMember(const core::ClusterState& state,
                                             const GangView& gang, const core::PodState& member,
                                             const std::vector<core::NodeSlot>& allowed,
                                             const EligibleFn& eligible,
                                             absl::Time now = absl::InfinitePast(),
                                             const Pipeline* pipeline = nullptr) const;

  /// The verdict for a gang member that is not placed: why it waits. Plans (without reserving)
  /// when that is what the reason needs ("5 of 8 members placeable").
  NodeVerdict WaitingVerdict(const CycleContext& ctx, const GangView& gang,
                             const EligibleFn& eligible) const;

  /// Most hops between the nodes of `nodes` (0 for none or one).
  int MaxHops(const core::ClusterState& state, const std::vector<core::NodeSlot>& nodes) const;

  const std::string& scheduler_name() const { return scheduler_name_; }

 private:
  GangConfig config_;
  std::string scheduler_name_;
  TopologyCache topology_;
};

/// Whether a bound member of a gang is one of its elastic members: the gang has more members
/// placed than its minimum, and this one is among the newest that many beyond it (the members
/// the gang planner takes back first). False for a pod of no gang.
bool IsElasticMember(const core::ClusterState& state, const core::PodState& pod);
/// The gang of a pod as (namespace, name), or nullopt.
std::optional<std::pair<std::string_view, std::string_view>> GangOf(const core::Pod& pod);

/// Module "gang" (SPEC 6.2): one type at four points, sharing the gang planner.
///
/// PreFilter: a gang member waits unless room is reserved for it (the gang was admitted whole)
/// or it is already placed; the framework plans and reserves the gang before asking
/// (Framework::Filter), and hands over why it waits when it found no room.
///
/// Filter: a member with room reserved fits only its reserved node; every other node is
/// unresolvable for it, naming the reserved node.
///
/// Permit (the gang barrier, at bind): a member binds only into the room its gang's plan reserved
/// for it, that is when the gang's minimum is placed or reserved as a whole; otherwise the
/// bind is refused with why the gang waits. Being the gang's answer at bind, it replaces the
/// PreFilter there.
///
/// PreemptionReview (SPEC 6.2, 6.5, seed 001): a proposal never leaves a gang below its
/// minimum by a part of it. Elastic members (above minimum) may go; a member at the minimum
/// goes only with the whole gang, which is possible through this verb only when all of the
/// gang's members are on that node (kube-scheduler deletes only victims on the chosen node):
/// then they are all added; otherwise the member is spared, and the node is kept only if the
/// remaining victims, plus elastic members on the node that kube-scheduler did not propose,
/// make room (elastic members go before anyone's minimum).
class GangModule final : public PreFilterPlugin,
                         public FilterPlugin,
                         public PermitPlugin,
                         public PreemptionReviewPlugin {
 public:
  explicit GangModule(std::shared_ptr<const GangPlanner> planner) : planner_(std::move(planner)) {}
  std::string_view Name() const override { return "gang"; }
  NodeVerdict PreFilter(const CycleContext& ctx) const override;
  bool Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const override;
  /// Planning, or a pod with no room reserved as a gang member.
  bool Skips(const CycleContext& ctx) const override;
  NodeVerdict Permit(const CycleContext& ctx, const core::NodeState& node) const override;
  bool Review(const CycleContext& ctx, const core::NodeState& node, NodeVictims* proposal,
              NodeVerdict* why) const override;

 private:
  /// Why kube-scheduler's proposal does not let the preemptor's gang start, when the preemptor
  /// is a member of a gang not yet admitted; nullopt otherwise.
  std::optional<NodeVerdict> PreemptorGangShort(const CycleContext& ctx,
                                                const NodeVictims& proposal) const;
  std::shared_ptr<const GangPlanner> planner_;
};

/// Score module "gang-topology" (SPEC 6.3): for a gang member, its reserved node scores
/// highest, then nodes fewer hops from the gang's placed members. Abstains for other pods.
class GangTopologyScore final : public ScorePlugin {
 public:
  explicit GangTopologyScore(std::shared_ptr<const GangPlanner> planner)
      : planner_(std::move(planner)) {}
  std::string_view Name() const override { return "gang-topology"; }
  bool Applies(const CycleContext& ctx) const override;
  int64_t Score(const CycleContext& ctx, const core::NodeState& node) const override;

 private:
  std::shared_ptr<const GangPlanner> planner_;
};

/// Reads the "gangs" section (modules gang and gang-topology): reservation timeout, freezing
/// window (0: none), release of incomplete gangs. The fabric's levels come from the top-level
/// "topology" section.
absl::StatusOr<GangConfig> ParseGangSettings(const Settings& section);

}  // namespace berth::policy
