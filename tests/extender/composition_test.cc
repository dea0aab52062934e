// Where two policy modules meet (issue 15): one scenario per pair of modules, through the verbs
// as kube-scheduler and the API server drive them in standalone mode. Each case starts with
// the rule it pins, as issue 15 decides it; the assertions are what a user sees: the filter's
// answer, the bind, the evictions and the debug endpoints.
//
// Pools are selected by the node label `pool`; every pod lives in namespace ml with its name
// as uid, so victims and jobs read "ml/NAME". A pod that makes room by evicting is filtered
// once (the reclaim starts), the evictions are read through EvictedSince (the one place
// where they must have been carried out: FilterAndRetry), and kube-scheduler's retry of the
// pod is filtered again: that answer must fit.

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

using Keys = std::set<std::string>;

Json PoolObj(const std::string& name) { return MakePool(name).Label("pool", name).Obj(); }

// An 8-GPU machine of `pool`.
Json GpuNode(const std::string& name, const std::string& pool) {
  return MakeNode(name).Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Label("pool", pool).Obj();
}

// An 8-CPU machine of `pool`, at a place in the fabric (zone z0, spine s0, the given leaf).
Json CpuNodeInLeaf(const std::string& name, const std::string& pool, const std::string& leaf) {
  return MakeNode(name).Cpu("8").Memory("32Gi").Pods(110).Label("pool", pool)
      .Topology("z0", "s0", leaf).Obj();
}

// A pod of namespace ml whose uid is its name.
MakePod MlPod(const std::string& name) { return MakePod(name).Namespace("ml").Uid(name); }

// A pod of `pool` asking for `gpus` GPUs (4 CPUs and 16Gi per GPU).
MakePod GpuPod(const std::string& name, const std::string& pool, int gpus, int32_t priority) {
  return MlPod(name).Pool(pool).Cpu(StrCat(4 * gpus)).Memory(StrCat(16 * gpus, "Gi")).Gpu(gpus)
      .Priority(priority);
}

// Members NAME-0 .. NAME-(n-1) of gang `gang`, each made by `shape` from its name.
std::vector<MakePod> Members(const std::string& gang, int n,
                             const std::function<MakePod(const std::string&)>& shape) {
  std::vector<MakePod> out;
  for (int i = 0; i < n; ++i) out.push_back(shape(StrCat(gang, "-", i)).Gang(gang));
  return out;
}

Json Group(const std::string& gang, int min) {
  return MakePodGroup(gang).Namespace("ml").MinMember(min).Obj();
}

// Every reason the answer gives, one per line, for INFO.
std::string Reasons(const Verdicts& v) {
  std::string out;
  for (const auto& [node, why] : v.messages) StrAppend(&out, node, ": ", why, "\n");
  return out;
}

// Filters each member of gang `gang` as kube-scheduler would and binds it where berth lets it
// go. \return the nodes the members went to.
std::set<std::string> PlaceMembers(Harness& h, const std::string& gang,
                                   const std::vector<MakePod>& members,
                                   const std::vector<std::string>& nodes) {
  std::set<std::string> used;
  for (const MakePod& m : members) {
    const Verdicts v = FilterPod(h, m, nodes);
    INFO(m.Name() << "'s filter answer:\n" << Reasons(v) << "gang: " << GangInfo(h, gang).dump());
    CHECK(v.fit.size() == 1);
    if (v.fit.size() != 1) continue;
    BindOk(h, m, v.fit[0]);
    used.insert(v.fit[0]);
  }
  return used;
}

// What kube-scheduler and berth make of a pod that needs room: the reasons of its first
// filter answer (where berth starts evicting), the pods evicted once side effects settle,
// and the answer to kube-scheduler's retry of the pod.
struct Tried {
  std::string first;
  Keys evicted;
  Verdicts retry;
};

Tried FilterAndRetry(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes) {
  const Keys before = PodKeys(h);
  Tried t{.first = Reasons(FilterPod(h, pod, nodes))};
  t.evicted = EvictedSince(h, before);
  t.retry = FilterPod(h, pod, nodes);
  return t;
}

// gpu pool: g1 (and g2 when `two`); research pool: r1.
void GpuAndResearch(Harness& h, bool two) {
  std::vector<Json> objects = {PoolObj("gpu"), PoolObj("research"), GpuNode("g1", "gpu"),
                               GpuNode("r1", "research")};
  if (two) objects.push_back(GpuNode("g2", "gpu"));
  AddObjects(h, objects);
}

// The nodes kube-scheduler offers in the two-node gpu pool cases.
const std::vector<std::string> kNodes = {"g1", "g2", "r1"};

// ---- pools x queues --------------------------------------------------------------------------

TEST_CASE("composition: pools x queues: room kept for a would-be borrower never blocks a "
          "reclaim in the home pool",
          "[composition]") {
  // Rule: a job that can run in its home pool only by reclaiming passes queue admission, so
  // its filter runs and the reclaim starts; room the queue keeps for its next job is kept only
  // where that job may run by pool rules.
  //
  // The gpu pool's one node g1 holds a research pod that borrows 4 GPUs and a gpu-pool pod of
  // priority 10 with the other 4. P (gpu pool, priority 500) wants 4 GPUs: seed 004 says the
  // borrower goes and P runs on g1. B (research, priority 1000) wants 4 GPUs too; its home
  // pool is full with a pod of its own priority, so B could only borrow, and nothing lends.
  // B is ahead of P in the queue (higher priority), yet P must not wait for it.
  for (const bool with_b : {true, false}) {
    DYNAMIC_SECTION((with_b ? "a would-be borrower of higher priority waits too" : "control: P alone")) {
      Harness h;
      GpuAndResearch(h, /*two=*/false);
      h.Apply(Json::array({RunningOn(GpuPod("r-own", "research", 8, 1000), "r1"),
                           RunningOn(GpuPod("r-borrower", "research", 4, 1000), "g1"),
                           RunningOn(GpuPod("g-low", "gpu", 4, 10), "g1")}));
      const MakePod p = GpuPod("p", "gpu", 4, 500);
      const MakePod b = GpuPod("b", "research", 4, 1000);
      AddObjects(h, with_b ? std::vector<Json>{p.Obj(), b.Obj()} : std::vector<Json>{p.Obj()});
      const Tried t = FilterAndRetry(h, p, {"g1", "r1"});
      INFO("P's first filter answer:\n" << t.first << "jobs: " << QueueJobs(h).dump());
      // The borrower goes first; the in-pool pod of lower priority is not needed.
      CHECK(t.evicted == Keys{"ml/r-borrower"});
      REQUIRE(t.retry.fit == std::vector<std::string>{"g1"});
      BindOk(h, p, "g1");
      CHECK(PodInfo(h, "ml/p")["node"] == "g1");
      if (with_b) {
        // B keeps waiting: nothing lends it room, and it takes nothing from the gpu pool.
        const Tried tb = FilterAndRetry(h, b, {"g1", "r1"});
        CHECK(tb.retry.fit.empty());
        CHECK(tb.evicted.empty());
        CHECK(PodInfo(h, "ml/b")["node"] == "");
      }
    }
  }
}

// ---- pools x gangs ---------------------------------------------------------------------------

TEST_CASE("composition: pools x gangs: a gang reclaims its pool from borrowers, all members "
          "at once or none",
          "[composition]") {
  // Rule: a gang of pool X that fits only by evicting borrowers (or lower-priority in-pool
  // pods where X allows preemption) in X gets room for every member at once and the victims
  // are evicted together; no member is answered FailedAndUnresolvable while that is possible.
  // If not every member can get room, nothing is evicted. Explain never offers "minMember
  // were 0". A single pod's reclaim never takes a gang member its gang needs for minMember.
  Harness h;
  GpuAndResearch(h, /*two=*/true);
  const MakePod m0 = GpuPod("train-0", "gpu", 8, 1000).Gang("train");
  const MakePod m1 = GpuPod("train-1", "gpu", 8, 1000).Gang("train");

  SECTION("borrowers hold both nodes of the gang's pool") {
    h.Apply(Json::array({RunningOn(GpuPod("r-own", "research", 8, 100), "r1"),
                         RunningOn(GpuPod("r-b1", "research", 8, 100), "g1"),
                         RunningOn(GpuPod("r-b2", "research", 8, 100), "g2")}));
    AddObjects(h, {m0.Obj(), m1.Obj(), Group("train", 2)});
    const Json explain = ExplainJson(h, "ml/train-0");
    INFO("explain: " << explain.dump());
    CHECK_FALSE(Contains(explain.dump(), "minMember were 0"));
    const Tried t = FilterAndRetry(h, m0, kNodes);
    INFO("train-0's first filter answer:\n" << t.first);
    CHECK_FALSE(Contains(t.first, "members placeable"));
    CHECK(t.evicted == Keys{"ml/r-b1", "ml/r-b2"});
    const Verdicts& v0 = t.retry;
    const Verdicts v1 = FilterPod(h, m1, kNodes);
    INFO("train-1's filter answer:\n" << Reasons(v1));
    REQUIRE(v0.fit.size() == 1);
    REQUIRE(v1.fit.size() == 1);
    CHECK(Keys{v0.fit[0], v1.fit[0]} == Keys{"g1", "g2"});
    BindOk(h, m0, v0.fit[0]);
    BindOk(h, m1, v1.fit[0]);
    const Json gang = GangInfo(h, "train");
    CHECK(gang["state"] == "Running");
    CHECK(gang["bound"] == 2);
  }

  SECTION("room for one member only: nothing is evicted") {
    // g2 holds a gpu-pool pod above the gang's priority: it is no victim, so only g1 can be
    // reclaimed, and the gang needs two nodes.
    h.Apply(Json::array({RunningOn(GpuPod("r-own", "research", 8, 100), "r1"),
                         RunningOn(GpuPod("r-b1", "research", 8, 100), "g1"),
                         RunningOn(GpuPod("g-high", "gpu", 8, 2000), "g2")}));
    AddObjects(h, {m0.Obj(), m1.Obj(), Group("train", 2)});
    const Tried t = FilterAndRetry(h, m0, kNodes);
    CHECK(t.retry.fit.empty());
    CHECK(t.evicted.empty());
    CHECK(GangInfo(h, "train")["reserved"] == 0);
    const Json explain = ExplainJson(h, "ml/train-0");
    INFO("explain: " << explain.dump());
    CHECK_FALSE(Contains(explain.dump(), "minMember were 0"));
  }

  SECTION("a single pod's reclaim spares the member a gang needs for its minimum") {
    // Research gang rg (minMember 2) runs rg-0 borrowing g1 and rg-1 at home on r1; a plain
    // research pod borrows g2 at a higher priority than rg's. Taking rg-0 would leave rg
    // below its minimum, so the gpu pod reclaims g2.
    h.Apply(Json::array({RunningOn(GpuPod("rg-0", "research", 8, 10).Gang("rg"), "g1"),
                         RunningOn(GpuPod("rg-1", "research", 8, 10).Gang("rg"), "r1"),
                         RunningOn(GpuPod("r-plain", "research", 8, 500), "g2")}));
    AddObjects(h, {Group("rg", 2)});
    const MakePod p = GpuPod("p", "gpu", 8, 1000);
    AddObjects(h, {p.Obj()});
    const Tried t = FilterAndRetry(h, p, kNodes);
    INFO("P's first filter answer:\n" << t.first);
    CHECK(t.evicted == Keys{"ml/r-plain"});
    CHECK(t.retry.fit == std::vector<std::string>{"g2"});
    CHECK(GangInfo(h, "rg")["bound"] == 2);
  }
}

// ---- gangs x queues --------------------------------------------------------------------------

TEST_CASE("composition: gangs x queues: the queue admits a gang only as the gang planner "
          "places it",
          "[composition]") {
  // Rule: a gang is one job in its queue, admitted only when its whole minimum can be placed
  // by the gang planner's rules (pools, gpu reserve, max-hops); a gang member never gets room
  // reserved while its job waits in its queue.
  Harness h;

  SECTION("a gang its berth.io/max-hops cannot place is not admitted") {
    // Two leaves of one spine with two 8-CPU nodes each; one node of each leaf is full. The
    // gang's two 8-CPU members fit only one per leaf, 4 hops apart; max-hops 2 forbids that.
    AddObjects(h, {PoolObj("a"), CpuNodeInLeaf("l0-0", "a", "l0"), CpuNodeInLeaf("l0-1", "a", "l0"),
                   CpuNodeInLeaf("l1-0", "a", "l1"), CpuNodeInLeaf("l1-1", "a", "l1")});
    h.Apply(Json::array({RunningOn(MlPod("fill-0").Pool("a").Cpu("8"), "l0-1"),
                         RunningOn(MlPod("fill-1").Pool("a").Cpu("8"), "l1-1")}));
    const std::vector<MakePod> tight = Members("tight", 2, [](const std::string& name) {
      return MlPod(name).Pool("a").Cpu("8").Annotation("berth.io/max-hops", "2");
    });
    AddObjects(h, {tight[0].Obj(), tight[1].Obj(), Group("tight", 2)});
    const Verdicts v = FilterPod(h, tight[0], {"l0-0", "l0-1", "l1-0", "l1-1"});
    INFO("tight-0's filter answer:\n" << Reasons(v));
    CHECK(v.fit.empty());
    CHECK(Contains(Reasons(v), "berth.io/max-hops is 2"));
    const Json job = JobInfo(h, "ml/tight");
    INFO("/debug/queues: " << job.dump());
    CHECK(job["state"] != "admitted");
  }

  SECTION("a gang waiting behind the job next to start reserves no room") {
    // Two 8-CPU nodes. Gang first (two members of 8 CPUs) is admitted and takes both; gang
    // second is next to start; gang third waits behind it. kube-scheduler tries third's member
    // first: it gets no room, and first still runs. (The job next to start may take free room:
    // holding it back as well stalled whole queues when the jobs admitted before it could not
    // start; docs/decisions.md, "gangs x queues".)
    AddObjects(h, {PoolObj("a"), CpuNodeInLeaf("n0", "a", "l0"), CpuNodeInLeaf("n1", "a", "l0")});
    const std::vector<MakePod> first = Members("first", 2, [](const std::string& name) {
      return MlPod(name).Pool("a").Cpu("8").Priority(1000).Created("2025-12-01T00:00:00Z");
    });
    const std::vector<MakePod> second = Members("second", 2, [](const std::string& name) {
      return MlPod(name).Pool("a").Cpu("8").Priority(1000).Created("2025-12-02T00:00:00Z");
    });
    const std::vector<MakePod> third = Members("third", 2, [](const std::string& name) {
      return MlPod(name).Pool("a").Cpu("4").Priority(1000).Created("2025-12-03T00:00:00Z");
    });
    AddObjects(h, {first[0].Obj(), first[1].Obj(), second[0].Obj(), second[1].Obj(),
                   third[0].Obj(), third[1].Obj(), Group("first", 2), Group("second", 2),
                   Group("third", 2)});
    REQUIRE(JobInfo(h, "ml/first")["state"] == "admitted");
    REQUIRE(JobInfo(h, "ml/second")["state"] == "next");
    REQUIRE(JobInfo(h, "ml/third")["state"] == "waiting");

    const Verdicts s = FilterPod(h, third[0], {"n0", "n1"});
    INFO("third-0's filter answer:\n" << Reasons(s) << "jobs: " << QueueJobs(h).dump());
    CHECK(s.fit.empty());
    CHECK(GangInfo(h, "third")["reserved"] == 0);
    CHECK(PlaceMembers(h, "first", first, {"n0", "n1"}) == std::set<std::string>{"n0", "n1"});
    CHECK(GangInfo(h, "first")["state"] == "Running");
  }
}

// ---- elastic x reclaim -----------------------------------------------------------------------

TEST_CASE("composition: elastic x reclaim: reclaim takes elastic members first, never the "
          "minimum; elastic growth takes only free room",
          "[composition]") {
  // Rule: elastic members (above minMember) are reclaim victims before members at the minimum,
  // and pool reclaim never takes a member at the minimum. A gang's elastic members are its
  // newest bound members (the gang planner takes them back newest first). Elastic growth
  // takes only free room, never room held for a reclaim or for another gang.
  Harness h;
  GpuAndResearch(h, /*two=*/true);
  const MakePod p = GpuPod("p", "gpu", 8, 1000);

  SECTION("the elastic member goes, not the minimum one") {
    // Research gang rg (minMember 1) borrows both gpu nodes: rg-0, its first member, on g1 and
    // rg-1, its elastic one, on g2. Equal in every other way, so the two nodes tie for a
    // reclaim, and the first node, with the member at the minimum, would win the tie.
    h.Apply(Json::array(
        {RunningOn(GpuPod("r-own", "research", 8, 1000), "r1"),
         RunningOn(GpuPod("rg-0", "research", 8, 100).Gang("rg").Created("2025-12-01T00:00:00Z")
                       .Started("2025-12-01T00:00:00Z"), "g1"),
         RunningOn(GpuPod("rg-1", "research", 8, 100).Gang("rg").Created("2025-12-02T00:00:00Z")
                       .Started("2025-12-02T00:00:00Z"), "g2")}));
    AddObjects(h, {Group("rg", 1), p.Obj()});
    const Tried t = FilterAndRetry(h, p, kNodes);
    INFO("P's first filter answer:\n" << t.first);
    CHECK(t.evicted == Keys{"ml/rg-1"});
    CHECK(t.retry.fit == std::vector<std::string>{"g2"});
    CHECK(GangInfo(h, "rg")["bound"] == 1);
  }

  SECTION("a gang at its minimum is never a reclaim victim") {
    // rg (minMember 1) runs one member, borrowing g1, at a lower priority than the plain
    // borrower on g2: the plain borrower goes.
    h.Apply(Json::array({RunningOn(GpuPod("r-own", "research", 8, 1000), "r1"),
                         RunningOn(GpuPod("rg-0", "research", 8, 10).Gang("rg"), "g1"),
                         RunningOn(GpuPod("r-plain", "research", 8, 500), "g2")}));
    AddObjects(h, {Group("rg", 1), p.Obj()});
    const Tried t = FilterAndRetry(h, p, kNodes);
    INFO("P's first filter answer:\n" << t.first);
    CHECK(t.evicted == Keys{"ml/r-plain"});
    CHECK(t.retry.fit == std::vector<std::string>{"g2"});
  }

  SECTION("elastic growth does not take room held for a reclaim") {
    // gpu gang e (minMember 1) runs e-0 on g2; its elastic member e-1 waits. A research pod
    // borrows g1; P reclaims it and g1's room is held for P until it binds.
    const MakePod e1 = GpuPod("e-1", "gpu", 8, 1000).Gang("e");
    h.Apply(Json::array({RunningOn(GpuPod("r-own", "research", 8, 1000), "r1"),
                         RunningOn(GpuPod("r-b", "research", 8, 100), "g1"),
                         RunningOn(GpuPod("e-0", "gpu", 8, 1000).Gang("e"), "g2")}));
    AddObjects(h, {Group("e", 1), e1.Obj(), p.Obj()});
    const Tried t = FilterAndRetry(h, p, kNodes);
    REQUIRE(t.evicted == Keys{"ml/r-b"});
    REQUIRE(t.retry.fit == std::vector<std::string>{"g1"});
    const Verdicts v = FilterPod(h, e1, kNodes);
    INFO("e-1's filter answer:\n" << Reasons(v));
    CHECK(v.fit.empty());
    CHECK(GangInfo(h, "e")["reserved"] == 0);
    BindOk(h, p, "g1");
  }
}

// ---- GPU reserve x gangs ---------------------------------------------------------------------

TEST_CASE("composition: gpu reserve x gangs: the gang plan counts its own members against a "
          "GPU node's reserve",
          "[composition]") {
  // Rule: gang planning honours gpu-reserve with the room its own members take: a CPU-only
  // gang is never planned into the CPU a GPU node keeps for its free GPUs.
  //
  // gpu-1 has 16 CPUs and 4 free GPUs, which keep 2 CPUs each: 8 CPUs are for CPU-only pods,
  // room for one member of 5 CPUs. cpu-1 has 8 CPUs: room for the other.
  Harness h;
  AddObjects(h, {MakeNode("gpu-1").Cpu("16").Memory("64Gi").Gpu(4).Pods(110).Obj(),
                 MakeNode("cpu-1").Cpu("8").Memory("32Gi").Pods(110).Obj()});
  const std::vector<MakePod> etl =
      Members("etl", 2, [](const std::string& name) { return MlPod(name).Cpu("5").Memory("1Gi"); });
  AddObjects(h, {etl[0].Obj(), etl[1].Obj(), Group("etl", 2)});
  CHECK(PlaceMembers(h, "etl", etl, {"gpu-1", "cpu-1"}) == std::set<std::string>{"gpu-1", "cpu-1"});
  CHECK(GangInfo(h, "etl")["state"] == "Running");
}

// ---- topology x pools ------------------------------------------------------------------------

TEST_CASE("composition: topology x pools: a gang's domain is searched over the nodes its pool "
          "rules allow",
          "[composition]") {
  // Rule: a gang's placement domain is searched only over nodes its pool rules allow; it
  // never spreads over two lender pools, and its hop count is computed over the nodes it gets.
  // Leaves l0 and l1 hang off one spine: 2 hops within a leaf, 4 across the two.
  Harness h;
  // Gang job of pool a: two members of 8 CPUs, a whole node each.
  const std::vector<MakePod> job =
      Members("job", 2, [](const std::string& name) { return MlPod(name).Pool("a").Cpu("8"); });
  auto add_job = [&] { AddObjects(h, {job[0].Obj(), job[1].Obj(), Group("job", 2)}); };

  SECTION("with room at home, the gang stays in its pool over a tighter domain with another pool") {
    // Pool a: a1 in l0 and a2 in l1. Pool b: b1 in l0, next to a1: {a1, b1} would be 2 hops.
    AddObjects(h, {PoolObj("a"), PoolObj("b"), CpuNodeInLeaf("a1", "a", "l0"),
                   CpuNodeInLeaf("a2", "a", "l1"), CpuNodeInLeaf("b1", "b", "l0")});
    add_job();
    CHECK(PlaceMembers(h, "job", job, {"a1", "a2", "b1"}) == std::set<std::string>{"a1", "a2"});
    const Json gang = GangInfo(h, "job");
    INFO(gang.dump());
    CHECK(gang["placement"]["maxHops"] == 4);
  }

  SECTION("borrowing, the gang uses one lender pool") {
    // Pool a's one node is full with a pod of the gang's priority (no victim). Pool b (b1 in
    // l0, b2 in l1) has the most free room and lends; pool c's c1 in l0 would make {b1, c1} a
    // 2-hop domain, over two lenders.
    AddObjects(h, {PoolObj("a"), PoolObj("b"), PoolObj("c"), CpuNodeInLeaf("a1", "a", "l0"),
                   CpuNodeInLeaf("b1", "b", "l0"), CpuNodeInLeaf("b2", "b", "l1"),
                   CpuNodeInLeaf("c1", "c", "l0")});
    h.Apply(Json::array({RunningOn(MlPod("a-fill").Pool("a").Cpu("8"), "a1")}));
    add_job();
    CHECK(PlaceMembers(h, "job", job, {"a1", "b1", "b2", "c1"}) == std::set<std::string>{"b1", "b2"});
    const Json gang = GangInfo(h, "job");
    INFO(gang.dump());
    CHECK(gang["placement"]["maxHops"] == 4);
  }
}

}  // namespace
}  // namespace berth::testing
