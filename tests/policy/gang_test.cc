// The gang planner below the wire: reading a gang from the model, all-or-nothing admission in
// the smallest topology domain (hop limits, shapes, capacity taken back from elastic members of
// other gangs), elastic growth by fulfillment, re-planning one member, why a member waits, and
// the preemption review of a gang member.

#include "policy/gang/gang.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CorePod;
using testing::CorePodGroup;
using testing::FabricLevels;
using testing::FabricNode;
using testing::FillerPod;
using testing::GangPod;
using testing::kGi;

constexpr char kScheduler[] = "berth-scheduler";

using Strings = std::vector<std::string>;

GangConfig FabricConfig() {
  GangConfig c;
  c.topology_levels = FabricLevels();
  c.freeze_window = absl::Seconds(60);
  return c;
}

// A model and a planner that reads its fabric.
struct Cluster {
  core::FakeClock clock;
  core::ClusterModel model{&clock};
  GangPlanner planner{FabricConfig(), kScheduler};

  void Add(std::vector<core::ModelEvent> events) { model.Apply(events); }
  // Holds room on `node` for member `uid` of gang g, as an admission does.
  void Reserve(std::string_view uid, std::string_view node, int64_t cpu_milli) {
    core::Reservation r;
    r.request = CorePod("x", "", cpu_milli, kGi).request;
    r.expires = clock.Now() + absl::Minutes(1);
    r.gang = "default/g";
    REQUIRE(model.Reserve(uid, node, std::move(r)).ok());
  }
  // Marks gang `name` resized `ago`: frozen for the config's window from then.
  void Resized(std::string_view name, absl::Duration ago) {
    const absl::Time at = clock.Now() - ago;
    model.UpdateGangRecord("default", name, [&](core::GangRecord& r) { r.resized = at; });
  }
};

// Where members may go besides room, in the tests' own terms. The planner asks once per shape
// (members alike but for their names), with the first member of the shape.
struct Rules {
  std::set<std::string> barred;                       ///< nodes no member may use
  std::map<std::string, std::set<std::string>> only;  ///< pod name -> the nodes it may use
};

// The one place the tests build the planner's eligibility input, so that a change of its form
// touches only this function.
EligibleFn Eligibility(const Rules& rules) {
  return [rules](const core::Pod& pod, const core::NodeState& node) {
    const std::string& name = node.node.name;
    if (rules.barred.contains(name)) return false;
    auto it = rules.only.find(pod.name.str());
    return it == rules.only.end() || it->second.contains(name);
  };
}

GangView View(const Cluster& c, const core::ClusterState& s, std::string_view gang = "g") {
  return ViewGang(s, "default", gang, c.planner.config());
}

// PlanAdmission for `gang`, on behalf of `pod` (its oldest waiting member when null).
GangOutcome Admit(const Cluster& c, const core::ClusterState& s, const GangView& gang,
                  const Rules& rules = {}, const core::Pod* pod = nullptr) {
  REQUIRE((pod != nullptr || !gang.pending.empty()));
  const CycleContext ctx{
      .state = s, .pod = pod != nullptr ? *pod : gang.pending[0]->pod, .now = c.clock.Now()};
  return c.planner.PlanAdmission(ctx, gang, Eligibility(rules));
}

NodeVerdict Waiting(const Cluster& c, const core::ClusterState& s, const GangView& gang,
                    const Rules& rules = {}) {
  const core::PodState* any = !gang.pending.empty() ? gang.pending[0] : gang.bound.at(0);
  const CycleContext ctx{.state = s, .pod = any->pod, .now = c.clock.Now()};
  return c.planner.WaitingVerdict(ctx, gang, Eligibility(rules));
}

std::vector<GangPlacement> Elastic(const Cluster& c, const core::ClusterState& s,
                                   const Rules& rules = {}) {
  return c.planner.PlanElastic(s, c.clock.Now(), Eligibility(rules));
}

// ReplanMember for `uid` among `allowed` (node names); the chosen node's name, or "".
std::string Replan(const Cluster& c, const core::ClusterState& s, std::string_view uid,
                   const std::vector<std::string>& allowed, const Rules& rules = {}) {
  const GangView gang = View(c, s);
  std::vector<core::NodeSlot> slots;
  for (const std::string& n : allowed) slots.push_back(s.FindNodeSlot(n));
  const core::PodState* member = s.FindPod(uid);
  REQUIRE(member != nullptr);
  const auto chosen = c.planner.ReplanMember(s, gang, *member, slots, Eligibility(rules));
  return chosen ? s.node(*chosen).node.name : "";
}

// "pod@node" for each placement, in order.
Strings Named(const core::ClusterState& s, const std::vector<GangPlacement>& ps) {
  Strings out;
  for (const GangPlacement& p : ps)
    out.push_back(p.member->pod.name.str() + "@" + s.node(p.node).node.name);
  return out;
}
std::multiset<std::string> NodesOf(const core::ClusterState& s,
                                   const std::vector<GangPlacement>& ps) {
  std::multiset<std::string> out;
  for (const GangPlacement& p : ps) out.insert(s.node(p.node).node.name);
  return out;
}
Strings Names(const std::vector<const core::PodState*>& pods) {
  Strings out;
  for (const core::PodState* p : pods) out.push_back(p->pod.name.str());
  return out;
}
Strings Names(const core::ClusterState& s, const std::vector<core::NodeSlot>& slots) {
  Strings out;
  for (core::NodeSlot n : slots) out.push_back(s.node(n).node.name);
  return out;
}

// A refused admission in one string, "Reason (N placeable): message", or "planned". A verdict
// that is not unresolvable is marked: kube-scheduler must never preempt for a waiting gang.
std::string Refusal(const GangOutcome& o) {
  if (o.plan) return "planned";
  return std::string(o.why.fit == Fit::kUnresolvable ? "" : "(not unresolvable) ") +
         std::string(ReasonCode(o.why.reason)) + " (" + std::to_string(o.placeable) +
         " placeable): " + o.why.message;
}

core::Pod WithAnnotation(core::Pod p, std::string_view key, std::string_view value) {
  p.annotations.Set(key, value);
  return p;
}

// A node of the tests' fabric: leaves l1 and l2 under z1/s1, l3 under z1/s2, l4 under z2/s3.
core::ModelEvent NodeAt(std::string name, std::string_view leaf, int64_t cpu_milli = 8000) {
  static const std::map<std::string_view, std::pair<std::string_view, std::string_view>> above = {
      {"l1", {"z1", "s1"}}, {"l2", {"z1", "s1"}}, {"l3", {"z1", "s2"}}, {"l4", {"z2", "s3"}}};
  const auto& [zone, spine] = above.at(leaf);
  return core::NodeUpsert{FabricNode(std::move(name), cpu_milli, zone, spine, leaf)};
}

core::ModelEvent Member(std::string uid, std::string gang, std::string node, int64_t cpu_milli) {
  return core::PodUpsert{GangPod(std::move(uid), std::move(gang), std::move(node), cpu_milli)};
}

core::ModelEvent Group(std::string name, int32_t min_member) {
  return core::PodGroupUpsert{CorePodGroup(std::move(name), min_member)};
}

core::ModelEvent Filler(std::string node, int64_t cpu_milli) {
  return core::PodUpsert{FillerPod(std::move(node), cpu_milli)};
}

// ---- reading a gang -----------------------------------------------------------------------------

TEST_CASE("gang view: members by state, the strictest max-hops, the freeze window", "[gang]") {
  Cluster c;
  core::Pod succeeded = GangPod("s", "g", "a1", 1000);
  succeeded.phase = core::PodPhase::kSucceeded;
  core::Pod failed = GangPod("f", "g", "a1", 1000);
  failed.phase = core::PodPhase::kFailed;
  core::Pod leaving = WithAnnotation(GangPod("t", "g", "", 1000), kMaxHopsKey, "0");
  leaving.terminating = true;
  core::Pod older = WithAnnotation(GangPod("p2", "g", "", 1000), kMaxHopsKey, "not-a-number");
  older.creation = absl::FromUnixSeconds(100);
  core::Pod newer = WithAnnotation(GangPod("p1", "g", "", 1000), kFreezeWindowKey, "30s");
  newer.creation = absl::FromUnixSeconds(200);
  c.Add({NodeAt("a1", "l1"), Group("g", 3),
         core::PodUpsert{WithAnnotation(GangPod("b", "g", "a1", 1000), kMaxHopsKey, "6")},
         core::PodUpsert{WithAnnotation(GangPod("r", "g", "", 1000), kMaxHopsKey, "4")},
         core::PodUpsert{succeeded}, core::PodUpsert{failed}, core::PodUpsert{leaving},
         core::PodUpsert{newer}, core::PodUpsert{older}, Member("other", "h", "", 1000)});
  c.Reserve("r", "a1", 1000);
  {
    auto view = c.model.Read();
    const GangView g = View(c, *view);
    CHECK(g.Key() == "default/g");
    REQUIRE(g.group != nullptr);
    CHECK(g.min_member == 3);
    CHECK(Names(g.bound) == Strings{"pod-b"});
    CHECK(Names(g.reserved) == Strings{"pod-r"});
    CHECK(Names(g.pending) == Strings{"pod-p2", "pod-p1"});  // oldest first
    CHECK(g.succeeded == 1);
    CHECK(g.placed() == 3);  // bound, reserved, succeeded
    CHECK(g.total() == 5);
    CHECK(g.admitted());
    // 6 and 4 are read, the unreadable value is ignored, the leaving member's 0 does not count.
    CHECK(g.max_hops == 4);
    CHECK(g.freeze_window == absl::Seconds(30));  // a member's annotation over the config
  }
  // The PodGroup's annotation wins over its members'.
  core::PodGroup annotated = CorePodGroup("g", 3);
  annotated.annotations.Set(kFreezeWindowKey, "2m");
  c.Add({core::PodGroupUpsert{annotated}});
  {
    auto view = c.model.Read();
    CHECK(View(c, *view).freeze_window == absl::Minutes(2));
    // A gang without a PodGroup: a gang of one, the config's window.
    const GangView h = View(c, *view, "h");
    CHECK(h.group == nullptr);
    CHECK(h.min_member == 1);
    CHECK(h.freeze_window == absl::Seconds(60));
    CHECK_FALSE(h.max_hops.has_value());
  }
  // minMember 0 reads as 1.
  c.Add({Group("h", 0)});
  {
    auto view = c.model.Read();
    CHECK(View(c, *view, "h").min_member == 1);
  }
}

TEST_CASE("gang view: fulfillment is (placed - min) / (members - min), 1 without elastic members",
          "[gang]") {
  const core::PodState member;
  auto gang = [&](int min, int bound, int pending) {
    GangView g;
    g.min_member = min;
    g.bound.assign(static_cast<size_t>(bound), &member);
    g.pending.assign(static_cast<size_t>(pending), &member);
    return g;
  };
  CHECK(gang(2, 2, 0).Fulfillment() == 1.0);  // no elastic members
  CHECK(gang(1, 1, 2).Fulfillment() == 0.0);
  CHECK(gang(1, 2, 1).Fulfillment() == 0.5);
  CHECK(gang(2, 3, 1).Fulfillment() == 0.5);
  CHECK(gang(2, 4, 0).Fulfillment() == 1.0);
  CHECK(gang(2, 1, 3).Fulfillment() == 0.0);  // below its minimum: never negative
  GangView done = gang(1, 1, 1);
  done.succeeded = 1;  // finished members count as placed: (2 - 1) / (3 - 1)
  CHECK(done.Fulfillment() == 0.5);
}

TEST_CASE("gang view: frozen for its window after berth resized it", "[gang]") {
  const absl::Time now = absl::FromUnixSeconds(1000);
  GangView g;
  g.freeze_window = absl::Seconds(60);
  CHECK_FALSE(g.Frozen(now));  // no record
  core::GangRecord record;
  g.record = &record;
  CHECK_FALSE(g.Frozen(now));  // never resized
  record.resized = now - absl::Seconds(59);
  CHECK(g.Frozen(now));
  record.resized = now - absl::Seconds(60);
  CHECK_FALSE(g.Frozen(now));
  g.freeze_window = absl::ZeroDuration();
  record.resized = now;
  CHECK_FALSE(g.Frozen(now));
}

TEST_CASE("placed nodes: bound, being bound and reserved members, once per member", "[gang]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("b1", "l2"), NodeAt("d1", "l4"), Group("g", 5),
         Member("m1", "g", "a1", 1000), Member("m2", "g", "a1", 1000), Member("m3", "g", "", 1000),
         Member("m4", "g", "", 1000), Member("m5", "g", "", 1000)});
  REQUIRE(c.model.Assume("m3", "d1", nullptr).ok());  // being bound
  c.Reserve("m4", "b1", 1000);
  auto view = c.model.Read();
  const GangView g = View(c, *view);
  REQUIRE(g.pending.size() == 1);  // m5 has no node
  CHECK(Names(*view, PlacedNodes(*view, g)) == Strings{"a1", "a1", "d1", "b1"});
  CHECK(Names(*view, PlacedNodes(*view, g, view->FindPod("m1"))) == Strings{"a1", "d1", "b1"});
  CHECK(Names(*view, PlacedNodes(*view, g, view->FindPod("m4"))) == Strings{"a1", "a1", "d1"});
}

TEST_CASE("max hops: the widest pair of a set of nodes", "[gang][topology]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1"), NodeAt("b1", "l2"), NodeAt("c1", "l3"),
         NodeAt("d1", "l4")});
  auto view = c.model.Read();
  auto hops = [&](std::initializer_list<std::string_view> names) {
    std::vector<core::NodeSlot> slots;
    for (std::string_view n : names) slots.push_back(view->FindNodeSlot(n));
    return c.planner.MaxHops(*view, slots);
  };
  CHECK(hops({}) == 0);
  CHECK(hops({"a1"}) == 0);
  CHECK(hops({"a1", "a1"}) == 0);
  CHECK(hops({"a1", "a2"}) == 2);
  CHECK(hops({"a1", "a2", "b1"}) == 4);
  CHECK(hops({"a1", "c1"}) == 6);
  CHECK(hops({"a2", "a1", "d1"}) == 8);
}

// ---- admission ----------------------------------------------------------------------------------

TEST_CASE("gang admission: one node when one holds every member, the fullest such node", "[gang]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1"), NodeAt("d1", "l4"), Filler("a2", 4000),
         Group("g", 2), Member("g0", "g", "", 2000), Member("g1", "g", "", 2000)});
  auto view = c.model.Read();
  const GangOutcome o = Admit(c, *view, View(c, *view));
  REQUIRE(o.plan.has_value());
  // a2 (4 CPUs free) holds both exactly; a1 and d1 would be left with room for two more.
  CHECK(Named(*view, o.plan->placements) == Strings{"pod-g0@a2", "pod-g1@a2"});
  CHECK(o.plan->domain == "a2");
  CHECK(o.plan->max_hops == 0);
  CHECK(o.plan->victims.empty());
  CHECK(o.placeable == 2);
}

TEST_CASE("gang admission: room kube-scheduler keeps for a nominated pod is not free", "[gang]") {
  // a2 is the fullest node that holds both members; a pod kube-scheduler nominated there after
  // preempting (status.nominatedNodeName) at the gang's priority or above keeps that room, as
  // kube-scheduler's resource fit counts it. A lower-priority nomination, a bound pod's stale
  // one and the gang's own member's do not.
  auto nominated = [](std::string uid, std::string node, int32_t priority) {
    core::Pod p = CorePod(std::move(uid), "", 2000, kGi);
    p.nominated_node = std::move(node);
    p.priority = priority;
    return core::ModelEvent{core::PodUpsert{std::move(p)}};
  };
  auto plan = [](Cluster& c) {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    REQUIRE(o.plan.has_value());
    return Named(*view, o.plan->placements);
  };
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1"), Filler("a2", 4000), Group("g", 2),
         Member("g0", "g", "", 2000), Member("g1", "g", "", 2000)});
  CHECK(plan(c) == Strings{"pod-g0@a2", "pod-g1@a2"});
  c.Add({nominated("low", "a2", -1)});
  CHECK(plan(c) == Strings{"pod-g0@a2", "pod-g1@a2"});
  core::Pod own = GangPod("g1", "g", "", 2000);
  own.nominated_node = "a2";
  c.Add({core::PodUpsert{own}});
  CHECK(plan(c) == Strings{"pod-g0@a2", "pod-g1@a2"});
  c.Add({nominated("preemptor", "a2", 0)});
  CHECK(plan(c) == Strings{"pod-g0@a1", "pod-g1@a1"});
  // Bound elsewhere, its nomination no longer holds anything on a2 (its room is on a1 now).
  core::Pod bound = CorePod("preemptor", "a1", 2000, kGi);
  bound.nominated_node = "a2";
  c.Add({core::PodUpsert{bound}});
  CHECK(plan(c) == Strings{"pod-g0@a2", "pod-g1@a2"});
}

TEST_CASE("gang admission: the smallest domain that holds the members", "[gang][topology]") {
  // No node holds two members; nodes are listed widest first, so the order of the slots
  // does not lead to the answer.
  Cluster c;
  c.Add({NodeAt("d1", "l4"), NodeAt("c1", "l3"), NodeAt("b1", "l2"), NodeAt("a1", "l1"),
         NodeAt("a2", "l1"), Group("g", 2), Member("g0", "g", "", 6000),
         Member("g1", "g", "", 6000)});
  struct Case {
    std::set<std::string> barred;
    std::string domain;
    std::multiset<std::string> nodes;
    int hops;
  };
  const std::vector<Case> cases = {
      {{}, "z1/s1/l1", {"a1", "a2"}, 2},
      {{"a2"}, "z1/s1", {"a1", "b1"}, 4},
      {{"a2", "b1"}, "z1", {"a1", "c1"}, 6},
      {{"a2", "b1", "c1"}, "", {"a1", "d1"}, 8},
  };
  auto view = c.model.Read();
  for (const Case& k : cases) {
    INFO("expected domain " << k.domain);
    const GangOutcome o = Admit(c, *view, View(c, *view), Rules{.barred = k.barred});
    REQUIRE(o.plan.has_value());
    CHECK(o.plan->domain == k.domain);
    CHECK(NodesOf(*view, o.plan->placements) == k.nodes);
    CHECK(o.plan->max_hops == k.hops);
  }
  // Nowhere left for two: one member is placeable.
  const GangOutcome none =
      Admit(c, *view, View(c, *view), Rules{.barred = {"a2", "b1", "c1", "d1"}});
  CHECK(Refusal(none) ==
        "GangNotPlaceable (1 placeable): berth: gang default/g: 1 of 2 members placeable");
}

TEST_CASE("gang admission: among domains of one depth, the one left with the least room",
          "[gang]") {
  // Leaves l1 and l4 both hold the two members; l4 is fuller (best fit), though it comes last.
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1"), NodeAt("a3", "l1"), NodeAt("d1", "l4"),
         NodeAt("d2", "l4"), Group("g", 2), Member("g0", "g", "", 6000),
         Member("g1", "g", "", 6000)});
  auto view = c.model.Read();
  const GangOutcome o = Admit(c, *view, View(c, *view));
  REQUIRE(o.plan.has_value());
  CHECK(o.plan->domain == "z2/s3/l4");
  CHECK(NodesOf(*view, o.plan->placements) == std::multiset<std::string>{"d1", "d2"});
}

// Leaf l1 alone: a1 and a3 empty, a2 half full (room for one 4-CPU member); three such
// members. Where the plan puts them, as "pod@node".
Strings PlanPartlyFullLeaf() {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1"), NodeAt("a3", "l1"), Filler("a2", 4000),
         Group("g", 3), Member("g0", "g", "", 4000), Member("g1", "g", "", 4000),
         Member("g2", "g", "", 4000)});
  auto view = c.model.Read();
  const GangOutcome o = Admit(c, *view, View(c, *view));
  REQUIRE(o.plan.has_value());
  CHECK(o.plan->domain == "z1/s1/l1");
  return Named(*view, o.plan->placements);
}

TEST_CASE("gang admission: inside the domain, the node with room for the most members first",
          "[gang]") {
  // decisions.md: "inside a leaf, to the node with room for the most members first, so the gang
  // spreads over as few leaves and nodes as possible".
  CHECK(PlanPartlyFullLeaf() == Strings{"pod-g0@a1", "pod-g1@a1", "pod-g2@a3"});
}


TEST_CASE("gang admission: inside a spine, the leaf with the most room first", "[gang]") {
  // Spine s1: leaf l1 has room for one member, l2 for two. Three members: l2 fills first.
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("b1", "l2"), NodeAt("b2", "l2"), Group("g", 3),
         Member("g0", "g", "", 6000), Member("g1", "g", "", 6000), Member("g2", "g", "", 6000)});
  auto view = c.model.Read();
  const GangOutcome o = Admit(c, *view, View(c, *view));
  REQUIRE(o.plan.has_value());
  CHECK(o.plan->domain == "z1/s1");
  CHECK(Named(*view, o.plan->placements) == Strings{"pod-g0@b1", "pod-g1@b2", "pod-g2@a1"});
  CHECK(o.plan->max_hops == 4);
}

TEST_CASE("gang admission: placed members pin the search to domains that contain them", "[gang]") {
  // g0 is bound on a1; its leaf is full; d1 (listed first) would hold g1 alone.
  Cluster c;
  c.Add({NodeAt("d1", "l4"), NodeAt("a1", "l1"), NodeAt("a2", "l1"), NodeAt("b1", "l2"),
         Filler("a2", 8000), Group("g", 2), Member("g0", "g", "a1", 6000),
         Member("g1", "g", "", 6000)});
  auto view = c.model.Read();
  const GangOutcome o = Admit(c, *view, View(c, *view));
  REQUIRE(o.plan.has_value());
  CHECK(Named(*view, o.plan->placements) == Strings{"pod-g1@b1"});
  CHECK(o.plan->domain == "z1/s1");
  CHECK(o.plan->max_hops == 4);  // the bound member counts
}

TEST_CASE("gang admission: berth.io/max-hops excludes wider domains and says how far apart",
          "[gang][topology]") {
  Cluster c;
  auto members = [&](std::string_view hops0, std::string_view hops1) {
    c.Add({core::PodUpsert{WithAnnotation(GangPod("g0", "g", "", 6000), kMaxHopsKey, hops0)},
           core::PodUpsert{WithAnnotation(GangPod("g1", "g", "", 6000), kMaxHopsKey, hops1)}});
  };
  c.Add({NodeAt("a1", "l1"), NodeAt("b1", "l2"), Group("g", 2)});
  members("4", "2");  // the strictest wins
  {
    auto view = c.model.Read();
    const GangView g = View(c, *view);
    REQUIRE(g.max_hops == 2);
    const GangOutcome o = Admit(c, *view, g);
    CHECK(Refusal(o) ==
          "GangMaxHops (2 placeable): berth: gang default/g: its 2 members fit only 4 hops apart; "
          "berth.io/max-hops is 2");
    // The verdict a waiting member is given is the same.
    const NodeVerdict v = Waiting(c, *view, g);
    CHECK(v.reason == Reason::kGangMaxHops);
    CHECK(v.message == o.why.message);
  }
  members("4", "4");
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    REQUIRE(o.plan.has_value());
    CHECK(o.plan->max_hops == 4);
    CHECK(NodesOf(*view, o.plan->placements) == std::multiset<std::string>{"a1", "b1"});
  }
  // When room is what is short, the reason is the count, not the limit.
  c.Add({Filler("b1", 4000)});
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    CHECK(o.why.reason == Reason::kGangNotPlaceable);
    CHECK(o.why.message == "berth: gang default/g: 1 of 2 members placeable");
  }
}

TEST_CASE("gang admission: members of different shapes, the largest first, each where it may go",
          "[gang]") {
  // Leaf l1: a1 (8 CPUs) and a2 (4 CPUs). A 6-CPU member and two of 2 CPUs: placed smallest
  // first, the small ones would take a1 and leave no node for the large one.
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1", 4000), Group("g", 3), Member("s0", "g", "", 2000),
         Member("s1", "g", "", 2000), Member("big", "g", "", 6000)});
  auto view = c.model.Read();
  const GangOutcome o = Admit(c, *view, View(c, *view));
  REQUIRE(o.plan.has_value());
  CHECK(Named(*view, o.plan->placements) == Strings{"pod-big@a1", "pod-s0@a1", "pod-s1@a2"});
  CHECK(o.plan->domain == "z1/s1/l1");

  // Each shape is asked where it may go: the small members may not use a1.
  const Rules small_off_a1{.only = {{"pod-s0", {"a2"}}, {"pod-s1", {"a2"}}}};
  const GangOutcome kept = Admit(c, *view, View(c, *view), small_off_a1);
  REQUIRE(kept.plan.has_value());
  CHECK(Named(*view, kept.plan->placements) == Strings{"pod-big@a1", "pod-s0@a2", "pod-s1@a2"});
  // The large member may go only on a2, where it does not fit: 2 of 3 placeable.
  const GangOutcome refused = Admit(c, *view, View(c, *view), Rules{.only = {{"pod-big", {"a2"}}}});
  CHECK(Refusal(refused) ==
        "GangNotPlaceable (2 placeable): berth: gang default/g: 2 of 3 members placeable");
}

TEST_CASE("gang admission: k of n members placeable, placed members counted", "[gang]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("b1", "l2"), Group("g", 3), Member("g0", "g", "", 6000),
         Member("g1", "g", "", 6000), Member("g2", "g", "", 6000)});
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    CHECK(Refusal(o) ==
          "GangNotPlaceable (2 placeable): berth: gang default/g: 2 of 3 members placeable");
  }
  // A fourth member bound on a1 (minimum 4): one placed, two more fit (one on a1, one on b1).
  c.Add({Group("g", 4), Member("g3", "g", "a1", 2000)});
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    CHECK(Refusal(o) ==
          "GangNotPlaceable (3 placeable): berth: gang default/g: 3 of 4 members placeable");
  }
}

TEST_CASE("gang admission: too few members, minResources beyond the free room, nothing needed",
          "[gang]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), Group("g", 3), Member("g0", "g", "", 1000),
         Member("g1", "g", "", 1000)});
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    CHECK(Refusal(o) ==
          "GangMembersMissing (0 placeable): berth: gang default/g: 2 of 3 members exist");
  }
  core::PodGroup big = CorePodGroup("g", 2);
  big.min_resources.Set(core::kCpu, 9000);
  c.Add({core::PodGroupUpsert{big}});
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    CHECK(Refusal(o) ==
          "GangNotPlaceable (0 placeable): berth: gang default/g: minResources cpu=9 exceed the "
          "cluster's free room");
  }
  // Room the gang already holds counts as free for its minResources.
  big.min_resources.Set(core::kCpu, 8000);
  c.Add({core::PodGroupUpsert{big}, Member("g0", "g", "a1", 1000)});
  {
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    REQUIRE(o.plan.has_value());
    CHECK(Named(*view, o.plan->placements) == Strings{"pod-g1@a1"});
  }
  // Admitted already: an empty plan.
  c.Add({Member("g1", "g", "a1", 1000)});
  {
    auto view = c.model.Read();
    const GangView g = View(c, *view);
    const GangOutcome o = Admit(c, *view, g, {}, &g.bound[0]->pod);
    REQUIRE(o.plan.has_value());
    CHECK(o.plan->placements.empty());
    CHECK(o.placeable == 2);
  }
}

// ---- taking capacity back -----------------------------------------------------------------------

// Leaf l1: n1 and n2, 4 CPUs each, full. Gang alpha (min 1): a0 and a1 bound on n1, a2 waiting:
// fulfillment 1/2. Gang beta (min `beta_min`): b0 on n1 and b1 on n2, all bound: fulfillment 1.
// Members take 1 CPU; plain pods fill the rest. Gang g (min 1) waits with one 1-CPU member.
struct TakeBack {
  int beta_min = 1;
  int32_t beta_priority = 0;
  bool beta_frozen = false;
  int alpha_min = 1;
  int32_t pod_priority = 0;
};

void BuildTakeBack(Cluster& c, const TakeBack& t) {
  auto member = [](std::string uid, std::string gang, std::string node, int32_t priority) {
    core::Pod p = GangPod(std::move(uid), std::move(gang), std::move(node), 1000);
    p.priority = priority;
    return p;
  };
  c.Add({NodeAt("n1", "l1", 4000), NodeAt("n2", "l1", 4000), Filler("n1", 1000), Filler("n2", 3000),
         Group("alpha", t.alpha_min), Group("beta", t.beta_min), Group("g", 1),
         core::PodUpsert{member("a0", "alpha", "n1", 0)},
         core::PodUpsert{member("a1", "alpha", "n1", 0)},
         core::PodUpsert{member("a2", "alpha", "", 0)},
         core::PodUpsert{member("b0", "beta", "n1", t.beta_priority)},
         core::PodUpsert{member("b1", "beta", "n2", t.beta_priority)},
         core::PodUpsert{member("w", "g", "", t.pod_priority)}});
  if (t.beta_frozen) c.Resized("beta", absl::Seconds(10));
}

TEST_CASE("gang admission: elastic members of other gangs are taken, most fulfilled gang first",
          "[gang][victims]") {
  struct Case {
    const char* what;
    TakeBack setup;
    std::string victim;  // "" for no plan
  };
  const std::vector<Case> cases = {
      {"beta is the most fulfilled: its newest member", {}, "pod-b1"},
      {"beta at its minimum: alpha's newest", {.beta_min = 2}, "pod-a1"},
      {"beta frozen: alpha's", {.beta_frozen = true}, "pod-a1"},
      {"beta of higher priority than the pod: alpha's", {.beta_priority = 5}, "pod-a1"},
      {"beta of the pod's own priority: beta's", {.beta_priority = 5, .pod_priority = 5}, "pod-b1"},
      {"production members are never taken",
       {.beta_priority = 10000, .pod_priority = 10000},
       "pod-a1"},
      {"no gang above its minimum: no plan", {.beta_min = 2, .alpha_min = 2}, ""},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    Cluster c;
    BuildTakeBack(c, k.setup);
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    if (k.victim.empty()) {
      CHECK(Refusal(o) ==
            "GangNotPlaceable (0 placeable): berth: gang default/g: 0 of 1 members placeable");
      continue;
    }
    REQUIRE(o.plan.has_value());
    CHECK(Names(o.plan->victims) == Strings{k.victim});
    // The member goes where its victim leaves room.
    REQUIRE(o.plan->placements.size() == 1);
    CHECK(o.plan->placements[0].node == view->FindPod(k.victim.substr(4))->counted_on);
  }
}

TEST_CASE("gang admission: victims on nodes the plan does not use are spared; never below minimum",
          "[gang][victims]") {
  // Gang rich (min `min`): r0, r1, r3 on n2 and r2 on n1, 1 CPU each; both nodes full. Gang g
  // needs 2 CPUs on one node. Newest first: r3 (n2), r2 (n1), r1 (n2): then n2 has room, and
  // r2 on n1 is spared.
  for (const int min : {1, 3}) {
    INFO("rich's minimum " << min);
    Cluster c;
    c.Add({NodeAt("n1", "l1", 4000), NodeAt("n2", "l1", 4000), Filler("n1", 3000),
           Filler("n2", 1000), Group("rich", min), Group("g", 1), Member("r0", "rich", "n2", 1000),
           Member("r1", "rich", "n2", 1000), Member("r2", "rich", "n1", 1000),
           Member("r3", "rich", "n2", 1000), Member("w", "g", "", 2000)});
    auto view = c.model.Read();
    const GangOutcome o = Admit(c, *view, View(c, *view));
    if (min == 1) {
      REQUIRE(o.plan.has_value());
      CHECK(Names(o.plan->victims) == Strings{"pod-r3", "pod-r1"});
      CHECK(Named(*view, o.plan->placements) == Strings{"pod-w@n2"});
    } else {
      // Only one member is above the minimum: taking it is not enough, and nothing more goes.
      CHECK(Refusal(o) ==
            "GangNotPlaceable (0 placeable): berth: gang default/g: 0 of 1 members placeable");
    }
  }
}

TEST_CASE("gang admission: room reserved for a member that has not started does not make a running "
          "member elastic",
          "[gang][victims]") {
  // Gang rich (min 2): r0 and r1 run on n2, r2 has room reserved there; both nodes are full.
  // rich has three members placed but only two running: none of them may go, and gang g (one
  // member of 1 CPU) finds no room.
  Cluster c;
  c.Add({NodeAt("n1", "l1", 4000), NodeAt("n2", "l1", 4000), Filler("n1", 4000),
         Filler("n2", 1000), Group("rich", 2), Group("g", 1), Member("r0", "rich", "n2", 1000),
         Member("r1", "rich", "n2", 1000), Member("r2", "rich", "", 1000),
         Member("w", "g", "", 1000)});
  core::Reservation r;
  r.request = CorePod("x", "", 1000, kGi).request;
  r.expires = c.clock.Now() + absl::Minutes(1);
  r.gang = "default/rich";
  REQUIRE(c.model.Reserve("r2", "n2", std::move(r)).ok());
  auto view = c.model.Read();
  REQUIRE(View(c, *view, "rich").reserved.size() == 1);
  REQUIRE(View(c, *view, "rich").running() == 2);
  CHECK(Refusal(Admit(c, *view, View(c, *view))) ==
        "GangNotPlaceable (0 placeable): berth: gang default/g: 0 of 1 members placeable");
  CHECK_FALSE(IsElasticMember(*view, *view->FindPod("r1")));
}

// ---- elastic growth -----------------------------------------------------------------------------

TEST_CASE("elastic growth: least fulfilled gang first, near its members, frozen gangs skipped",
          "[gang][elastic]") {
  // alpha (min 1): two members on a1, one waiting: fulfillment 1/2. beta (min 1): one member on
  // d1, one waiting: fulfillment 0. Free: one member's room on a1 and on d2 (d1's leaf). gamma
  // (min 3) is not admitted: its waiting member is not elastic.
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("d1", "l4"), NodeAt("d2", "l4"), NodeAt("c1", "l3"),
         Filler("a1", 2000), Filler("d1", 6000), Filler("d2", 6000), Filler("c1", 8000),
         Group("alpha", 1), Group("beta", 1), Group("gamma", 3), Member("a0", "alpha", "a1", 2000),
         Member("a1", "alpha", "a1", 2000), Member("a2", "alpha", "", 2000),
         Member("b0", "beta", "d1", 2000), Member("b1", "beta", "", 2000),
         Member("c0", "gamma", "", 2000), Member("c1", "gamma", "", 2000)});
  {
    auto view = c.model.Read();
    // beta first (d2, near b0; a1 comes first among the nodes), then alpha (a1).
    CHECK(Named(*view, Elastic(c, *view)) == Strings{"pod-b1@d2", "pod-a2@a1"});
    // With d2 barred, beta's nearest node with room is a1; alpha then finds none.
    CHECK(Named(*view, Elastic(c, *view, Rules{.barred = {"d2"}})) == Strings{"pod-b1@a1"});
  }
  c.Resized("beta", absl::Seconds(30));
  {
    auto view = c.model.Read();
    CHECK(Named(*view, Elastic(c, *view)) == Strings{"pod-a2@a1"});
  }
  c.clock.Advance(absl::Seconds(30));  // the window is over
  {
    auto view = c.model.Read();
    CHECK(Elastic(c, *view).size() == 2);
  }
}

TEST_CASE("elastic growth: a gang's hop limit holds for its elastic members", "[gang][elastic]") {
  // beta's member is on d1; the only room is on a1, 8 hops away; max-hops 6 keeps it waiting.
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("d1", "l4"), Filler("d1", 6000), Group("beta", 1),
         core::PodUpsert{WithAnnotation(GangPod("b0", "beta", "d1", 2000), kMaxHopsKey, "6")},
         core::PodUpsert{WithAnnotation(GangPod("b1", "beta", "", 2000), kMaxHopsKey, "6")}});
  auto view = c.model.Read();
  CHECK(Elastic(c, *view).empty());
}

// ---- re-planning one member ---------------------------------------------------------------------

TEST_CASE("replan member: the allowed node fewest hops from the others that fits", "[gang]") {
  // g0 is bound on a1; g1 holds room on a2 (a2 is otherwise full); g2 waits.
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("a2", "l1"), NodeAt("b1", "l2"), NodeAt("b2", "l2"),
         NodeAt("d1", "l4"), Filler("a2", 4000), Filler("b2", 6000), Group("g", 3),
         Member("g0", "g", "a1", 4000), Member("g1", "g", "", 4000), Member("g2", "g", "", 4000)});
  c.Reserve("g1", "a2", 4000);
  auto view = c.model.Read();
  // Its own reserved room counts as free for it.
  CHECK(Replan(c, *view, "g1", {"d1", "b1", "a2"}) == "a2");
  CHECK(Replan(c, *view, "g1", {"d1", "b1"}) == "b1");
  CHECK(Replan(c, *view, "g1", {"d1", "b2"}) == "d1");  // b2 lacks room
  CHECK(Replan(c, *view, "g1", {"d1", "b1"}, Rules{.barred = {"b1"}}) == "d1");
  CHECK(Replan(c, *view, "g1", {"b2"}).empty());
  CHECK(Replan(c, *view, "g1", {}).empty());
}

TEST_CASE("replan member: never beyond the gang's hop limit", "[gang]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), NodeAt("b1", "l2"), NodeAt("d1", "l4"), Group("g", 2),
         core::PodUpsert{WithAnnotation(GangPod("g0", "g", "a1", 4000), kMaxHopsKey, "4")},
         core::PodUpsert{WithAnnotation(GangPod("g1", "g", "", 4000), kMaxHopsKey, "4")}});
  c.Reserve("g1", "a1", 4000);
  auto view = c.model.Read();
  CHECK(Replan(c, *view, "g1", {"d1"}).empty());
  CHECK(Replan(c, *view, "g1", {"d1", "b1"}) == "b1");
}

// ---- why a member waits -------------------------------------------------------------------------

TEST_CASE("waiting verdict: no PodGroup, too few members, placeable but not reserved, no room",
          "[gang]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), Member("g0", "g", "", 6000), Member("g1", "g", "", 6000)});
  auto verdict = [&] {
    auto view = c.model.Read();
    return Waiting(c, *view, View(c, *view));
  };
  NodeVerdict v = verdict();
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kGangNoPodGroup);
  CHECK(v.message == "berth: gang default/g: PodGroup default/g does not exist yet");

  c.Add({Group("g", 3)});
  v = verdict();
  CHECK(v.reason == Reason::kGangMembersMissing);
  CHECK(v.message == "berth: gang default/g: 2 of 3 members exist");

  c.Add({Group("g", 2)});
  v = verdict();  // one 8-CPU node: one member fits
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kGangNotPlaceable);
  CHECK(v.message == "berth: gang default/g: 1 of 2 members placeable");

  c.Add({NodeAt("a2", "l1")});
  v = verdict();
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kGangNotPlaceable);
  CHECK(v.message == "berth: gang default/g: 2 of 2 members placeable; room is not reserved yet");
}

TEST_CASE("waiting verdict: an admitted gang's elastic member waits for room or its window",
          "[gang][elastic]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1"), Group("g", 1), Member("g0", "g", "a1", 2000),
         Member("g1", "g", "a1", 2000), Member("g2", "g", "", 2000), Member("g3", "g", "", 2000)});
  {
    auto view = c.model.Read();
    const NodeVerdict v = Waiting(c, *view, View(c, *view));
    CHECK(v.fit == Fit::kUnresolvable);
    CHECK(v.reason == Reason::kGangElasticWaiting);
    CHECK(v.message == "berth: gang default/g: elastic member waits for room (fulfillment 0.33)");
  }
  c.Resized("g", absl::Seconds(10));
  {
    auto view = c.model.Read();
    const NodeVerdict v = Waiting(c, *view, View(c, *view));
    CHECK(v.reason == Reason::kGangElasticWaiting);
    CHECK(v.message ==
          "berth: gang default/g: elastic member waits: the gang was resized 10s ago, "
          "within its freeze window of 1m");
  }
}


// ---- preemption review --------------------------------------------------------------------------

// kube-scheduler preempts for a gang member when its in-tree checks fail (victims of the gang's own
// plan still terminating on its reserved node, an elastic member waiting for room). A member of a
// gang that has started is placed by berth alone: victims for it would be evicted for nothing, and
// the node kube-scheduler then nominates it to keeps that room from the gang members berth
// reserves there.
TEST_CASE("preemption review: no victims for a member of a gang that has started", "[gang][preempt]") {
  Cluster c;
  c.Add({NodeAt("a1", "l1", 4000), NodeAt("a2", "l1", 4000), NodeAt("b1", "l2", 4000),
         Group("g", 2), Member("g0", "g", "a1", 2000), Member("g1", "g", "a1", 2000),
         Member("g2", "g", "", 2000), Group("h", 2), Member("h0", "h", "", 2000),
         Member("h1", "h", "", 2000), Filler("b1", 4000)});
  core::Reservation r;
  r.request = CorePod("x", "", 2000, kGi).request;
  r.expires = c.clock.Now() + absl::Minutes(1);
  r.gang = "default/h";
  REQUIRE(c.model.Reserve("h0", "a2", r).ok());
  REQUIRE(c.model.Reserve("h1", "a2", r).ok());
  const GangModule module(std::make_shared<GangPlanner>(FabricConfig(), kScheduler));
  auto view = c.model.Read();
  REQUIRE(View(c, *view, "g").admitted());
  REQUIRE(View(c, *view, "h").admitted());
  // The review of kube-scheduler's proposal to evict the filler on b1 for `pod` (priority above
  // the filler's): "kept", or the unresolvable reason and message of the refusal.
  auto review = [&](core::Pod pod) {
    pod.priority = 1000;
    const CycleContext ctx{.state = *view, .pod = pod, .now = c.clock.Now(), .explain = false};
    NodeVictims proposal{.node = "b1",
                         .victims = {Victim{.uid = "fill-b1", .known = view->FindPod("fill-b1")}}};
    NodeVerdict why;
    if (module.Review(ctx, *view->FindNode("b1"), &proposal, &why)) return std::string("kept");
    return std::string(why.fit == Fit::kUnresolvable ? "" : "(not unresolvable) ") +
           std::string(ReasonCode(why.reason)) + ": " + why.message;
  };
  // g has its minimum running: g2 is an elastic member, which takes only free room.
  CHECK(review(view->FindPod("g2")->pod) ==
        "GangElasticWaiting: berth: gang default/g: an elastic member takes only free room; "
        "evicting pods does not place it");
  // h's room is reserved on a2: evicting on b1 does not place h0.
  CHECK(review(view->FindPod("h0")->pod) ==
        "GangReservedElsewhere: berth: gang default/h: this member's room is reserved on node "
        "a2; evicting pods does not place it");
  // A pod of no gang is not the gang module's to refuse here.
  CHECK(review(CorePod("plain", "", 4000, kGi)) == "kept");
}

}  // namespace
}  // namespace berth::policy
