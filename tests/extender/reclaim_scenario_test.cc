// Pool reclaim through the verbs (SPEC 6.1, seed 004): an in-pool pod that does not fit because
// borrowers (or, where the pool allows preemption, lower-priority in-pool pods) hold its pool
// gets them evicted in the seed's order, the freed room is held for it until it binds or the
// hold times out, filter names the reclaim while the victims leave, and berth reclaims before
// it lets the pod borrow. Then seed 004's three stories.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

const std::vector<std::string> kAll = {"a1", "a2", "b1", "b2", "d1"};

// Pools team-a (a1, a2) and team-b (b1, b2) of 8-CPU nodes, and d1 in the default pool.
Json TwoPools(bool b_preempts = true) {
  MakePool b = MakePool("team-b").Label("pool", "b");
  if (!b_preempts) b.NoPreemption();
  return Json::array({Event("ADDED", MakePool("team-a").Label("pool", "a").Obj()),
                      Event("ADDED", b.Obj()),
                      Event("ADDED", MakeNode("a1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Obj()),
                      Event("ADDED", MakeNode("a2").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "a").Obj()),
                      Event("ADDED", MakeNode("b1").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Obj()),
                      Event("ADDED", MakeNode("b2").Cpu("8").Memory("32Gi").Pods(110).Label("pool", "b").Obj()),
                      Event("ADDED", MakeNode("d1").Cpu("8").Memory("32Gi").Pods(110).Obj())});
}

MakePod InPool(const std::string& name, const std::string& pool, const std::string& cpu) {
  return MakePod(name).Namespace("ml").Uid(name).Annotation("berth.io/pool", pool).Cpu(cpu);
}

// A pod already running on `node`.
Json Running(MakePod pod, const std::string& node) {
  return Event("ADDED", pod.Node(node).Phase("Running").Obj());
}

// The names of the pods berth's model holds.
std::set<std::string> PodNames(Harness& h) {
  std::set<std::string> out;
  const Json pods = ParseReply(h.service().DebugPods(false, true));
  for (const Json& p : pods.is_array() ? pods : pods["pods"]) out.insert(p["name"].get<std::string>());
  return out;
}

// An evictor that behaves like the API server with a grace period: the victim is marked
// terminating (metadata.deletionTimestamp) and stays until the test deletes it; evictions of
// pods in `blocked` fail as a PodDisruptionBudget would make them.
class GracefulEvictor final : public extender::EvictorInterface {
 public:
  explicit GracefulEvictor(Harness* h) : h_(h) {}
  absl::Status Evict(const core::Pod& victim, const core::Pod&, std::string_view) override {
    evicted.push_back(victim.name.str());
    if (blocked.contains(victim.name.str())) {
      // As the Kubernetes evictor reports a disruption budget's refusal.
      return absl::FailedPreconditionError("Cannot evict pod as it would violate the pod's disruption budget.");
    }
    terminating.push_back(victim.name.str());
    return absl::OkStatus();
  }
  std::vector<std::string> evicted;      // every eviction asked for
  std::vector<std::string> terminating;  // the ones that succeeded
  std::set<std::string> blocked;

 private:
  Harness* h_;
};

TEST_CASE("reclaim: borrowers are evicted for an in-pool pod, which binds in the freed room",
          "[pools][reclaim]") {
  Harness h;
  h.Apply(TwoPools());
  // team-a borrowed all of team-b, at a priority above the team-b pod that comes.
  h.Apply(Json::array({Running(InPool("borrow-1", "team-a", "6").Priority(5000), "b1"),
                       Running(InPool("borrow-2", "team-a", "6").Priority(5000), "b2")}));
  const MakePod mine = InPool("b-job", "team-b", "4").Priority(0);
  h.Apply(Json::array({Event("ADDED", mine.Obj())}));

  // The filter holds the room and records the eviction; it answers with the reclaim.
  const Verdicts first = FilterPod(h, mine, kAll);
  CHECK(first.fit.empty());
  CHECK(Contains(first.Why("b1"), "reclaim in pool team-b: room held on node b1"));
  CHECK(PodNames(h).contains("borrow-1"));
  // The standalone evictor removes the victim when the intent is carried out: the pod fits in
  // its home pool, on the one node reclaimed.
  CHECK(h.service().DrainIntents() == 1);
  const Verdicts v = FilterPod(h, mine, kAll);
  CHECK(v.fit == std::vector<std::string>{"b1"});
  CHECK(Contains(v.Why("a1"), "home pool team-b"));
  CHECK(Contains(v.Why("d1"), "home pool team-b"));
  const std::set<std::string> left = PodNames(h);
  CHECK_FALSE(left.contains("borrow-1"));  // one victim is enough
  CHECK(left.contains("borrow-2"));
  CHECK(HeldCpu(h, "b1") == "4");

  // The held room is the pod's alone: another team-b pod does not get it (8 - 4 held < 5).
  const MakePod other = InPool("b-other", "team-b", "5").Priority(0);
  const Verdicts o = FilterPod(h, other, {"b1"});
  CHECK(o.fit.empty());

  // Not being able to go to b1, it reclaimed b2 for itself.
  h.service().DrainIntents();
  CHECK_FALSE(PodNames(h).contains("borrow-2"));
  CHECK(HeldCpu(h, "b2") == "5");

  BindOk(h, mine, "b1");
  CHECK(HeldCpu(h, "b1") == "");  // the hold became the pod's own usage
  const Json pools = ParseReply(h.service().DebugPools(false))["pools"];
  for (const Json& p : pools) {
    if (p["name"] == "team-b") {
      CHECK(p["shared"]["pods"] == 0);
      CHECK(p["used"]["cpu"] == "4");
    }
  }
}

TEST_CASE("reclaim: filter names the reclaim while victims leave; the room is held until bind or "
          "timeout",
          "[pools][reclaim]") {
  policy::PolicyConfig config;
  config.pools.reclaim_timeout = absl::Seconds(30);
  Harness h(config);
  GracefulEvictor evictor(&h);
  h.service().SetEvictor(&evictor);
  h.Apply(TwoPools());
  h.Apply(Json::array({Running(InPool("borrow-1", "team-a", "6"), "b1"),
                       Running(InPool("borrow-2", "team-a", "6"), "b2")}));
  const MakePod mine = InPool("b-job", "team-b", "4");
  h.Apply(Json::array({Event("ADDED", mine.Obj())}));

  Verdicts v = FilterPod(h, mine, kAll);
  h.service().DrainIntents();
  REQUIRE(evictor.evicted == std::vector<std::string>{"borrow-1"});
  CHECK(v.fit.empty());
  CHECK(v.failed.empty());  // unresolvable: kube-scheduler must not preempt on top of berth
  for (const std::string& n : kAll) {
    INFO(n);
    CHECK(Contains(v.Why(n), "reclaim in pool team-b: room held on node b1"));
    CHECK(Contains(v.Why(n), "waiting for 1 evicted pod(s) to exit: ml/borrow-1"));
  }
  // The API server marks the victim terminating; it is still running, so still nothing fits,
  // and no second reclaim starts.
  Json terminating = InPool("borrow-1", "team-a", "6").Node("b1").Phase("Running").Obj();
  terminating["metadata"]["deletionTimestamp"] = "2026-11-21T10:00:00Z";
  h.Apply(Json::array({Event("MODIFIED", terminating)}));
  v = FilterPod(h, mine, kAll);
  h.service().DrainIntents();
  CHECK(v.fit.empty());
  CHECK(evictor.evicted.size() == 1);
  CHECK(Contains(v.Why("b2"), "room held on node b1"));

  // The victim exits: the pod fits where its room is held, and only there.
  h.Apply(Json::array({Event("DELETED", terminating)}));
  v = FilterPod(h, mine, kAll);
  CHECK(v.fit == std::vector<std::string>{"b1"});
  // Another pod of the pool sees b1 without the held room (8 - 4 held = 4 < 5).
  const MakePod other = InPool("b-other", "team-b", "5");
  h.Apply(Json::array({Event("ADDED", other.Obj())}));
  const Verdicts o = FilterPod(h, other, {"b1"});
  CHECK(o.fit.empty());
  h.service().DrainIntents();
  // (it started a reclaim of its own on b2, which does not touch b1)
  CHECK(evictor.evicted == std::vector<std::string>{"borrow-1", "borrow-2"});

  SECTION("the hold ends when the pod binds") {
    BindOk(h, mine, "b1");
    CHECK(HeldCpu(h, "b1") == "");
  }
  SECTION("the hold times out") {
    h.clock().Advance(absl::Seconds(29));
    h.service().Housekeeping();
    CHECK(HeldCpu(h, "b1") == "4");
    h.clock().Advance(absl::Seconds(2));
    h.service().Housekeeping();
    CHECK(HeldCpu(h, "b1") == "");
  }
  SECTION("the hold ends when the pod is deleted") {
    h.Apply(Json::array({Event("DELETED", mine.Obj())}));
    CHECK(HeldCpu(h, "b1") == "");
  }
}

TEST_CASE("reclaim: a blocked eviction releases the room and the pod may borrow",
          "[pools][reclaim]") {
  Harness h;
  GracefulEvictor evictor(&h);
  evictor.blocked = {"borrow-1", "borrow-2"};
  h.service().SetEvictor(&evictor);
  h.Apply(TwoPools());
  h.Apply(Json::array({Running(InPool("borrow-1", "team-a", "6"), "b1"),
                       Running(InPool("borrow-2", "team-a", "6"), "b2")}));
  const MakePod mine = InPool("b-job", "team-b", "4");
  h.Apply(Json::array({Event("ADDED", mine.Obj())}));
  // The filter holds room on b1 and answers with the reclaim; the refused eviction undoes it.
  CHECK(FilterPod(h, mine, kAll).fit.empty());
  CHECK(HeldCpu(h, "b1") == "4");
  h.service().DrainIntents();
  CHECK(evictor.evicted.size() == 1);
  CHECK(HeldCpu(h, "b1") == "");
  CHECK(HeldCpu(h, "b2") == "");
  // Nothing is held, and the eviction failed: the pod borrows instead (seed 004), from the
  // pool with most free room (team-a's 16 CPUs over the default pool's 8).
  const Verdicts v = FilterPod(h, mine, kAll);
  h.service().DrainIntents();
  CHECK(evictor.evicted.size() == 1);  // no second reclaim while it may borrow
  CHECK(v.fit == std::vector<std::string>{"a1", "a2"});
  CHECK(Contains(v.Why("d1"), "borrowing from pool team-a"));
}

TEST_CASE("reclaim: victims in the seed's order", "[pools][reclaim]") {
  SECTION("borrowers before in-pool pods, whatever their priority") {
    Harness h;
    h.Apply(TwoPools());
    h.Apply(Json::array({Running(InPool("own-low", "team-b", "6").Priority(1), "b1"),
                         Running(InPool("borrower-high", "team-a", "6").Priority(5000), "b2")}));
    const MakePod mine = InPool("b-job", "team-b", "4").Priority(100);
    h.Apply(Json::array({Event("ADDED", mine.Obj())}));
    CHECK(FilterSettled(h, mine, kAll).fit == std::vector<std::string>{"b2"});
    const std::set<std::string> left = PodNames(h);
    CHECK(left.contains("own-low"));
    CHECK_FALSE(left.contains("borrower-high"));
  }
  SECTION("lowest highest-victim priority, and no more victims than needed") {
    Harness h;
    h.Apply(TwoPools());
    // b1: one borrower of priority 500. b2: borrowers of priority 10 and 20; evicting the one
    // of priority 10 alone is enough.
    h.Apply(Json::array({Running(InPool("x-500", "team-a", "6").Priority(500), "b1"),
                         Running(InPool("y-10", "team-a", "3").Priority(10), "b2"),
                         Running(InPool("z-20", "team-a", "3").Priority(20), "b2")}));
    const MakePod mine = InPool("b-job", "team-b", "4");
    h.Apply(Json::array({Event("ADDED", mine.Obj())}));
    CHECK(FilterSettled(h, mine, kAll).fit == std::vector<std::string>{"b2"});
    const std::set<std::string> left = PodNames(h);
    CHECK(left.contains("x-500"));
    CHECK(left.contains("z-20"));
    CHECK_FALSE(left.contains("y-10"));
  }
  SECTION("in-pool pods of lower priority, where the pool allows preemption") {
    Harness h;
    h.Apply(TwoPools());
    h.Apply(Json::array({Running(InPool("own-low", "team-b", "6").Priority(1), "b1"),
                         Running(InPool("own-same", "team-b", "6").Priority(100), "b2"),
                         Running(InPool("fill-a1", "team-a", "8").Priority(100), "a1"),
                         Running(InPool("fill-a2", "team-a", "8").Priority(100), "a2"),
                         Running(InPool("fill-d1", "default", "8").Priority(100), "d1")}));
    const MakePod mine = InPool("b-job", "team-b", "4").Priority(100);
    h.Apply(Json::array({Event("ADDED", mine.Obj())}));
    CHECK(FilterSettled(h, mine, kAll).fit == std::vector<std::string>{"b1"});
    const std::set<std::string> left = PodNames(h);
    CHECK_FALSE(left.contains("own-low"));
    CHECK(left.contains("own-same"));  // equal priority is never a victim
  }
  SECTION("not where the pool has disablePreemption, which still takes back what it lent") {
    Harness h;
    h.Apply(TwoPools(/*b_preempts=*/false));
    h.Apply(Json::array({Running(InPool("own-low", "team-b", "6").Priority(1), "b1"),
                         Running(InPool("borrower", "team-a", "6").Priority(5000), "b2")}));
    const MakePod mine = InPool("b-job", "team-b", "4").Priority(100);
    h.Apply(Json::array({Event("ADDED", mine.Obj())}));
    CHECK(FilterSettled(h, mine, kAll).fit == std::vector<std::string>{"b2"});
    CHECK(PodNames(h).contains("own-low"));
    // With no borrower left, the in-pool pod is safe: the next pod borrows instead.
    const MakePod next = InPool("b-next", "team-b", "5").Priority(100);
    h.Apply(Json::array({Event("ADDED", next.Obj())}));
    BindOk(h, mine, "b2");
    const Verdicts v = FilterSettled(h, next, kAll);
    CHECK(PodNames(h).contains("own-low"));
    CHECK(v.fit == std::vector<std::string>{"a1", "a2"});  // it borrows team-a's room
  }
  SECTION("never production pods, pods of other schedulers, or pods of equal priority") {
    Harness h;
    h.Apply(TwoPools());
    h.Apply(Json::array({Running(InPool("prod", "team-a", "6").Priority(10000), "b1"),
                         Running(MakePod("web").Namespace("ml").Scheduler("default-scheduler").Cpu("6"), "b2"),
                         Running(InPool("fill-a1", "team-a", "8"), "a1"),
                         Running(InPool("fill-a2", "team-a", "8"), "a2"),
                         Running(InPool("fill-d1", "default", "8"), "d1")}));
    const MakePod mine = InPool("b-job", "team-b", "4");
    h.Apply(Json::array({Event("ADDED", mine.Obj())}));
    const Verdicts v = FilterSettled(h, mine, kAll);
    CHECK(v.fit.empty());
    CHECK(PodNames(h).size() == 6);
    CHECK(HeldCpu(h, "b1") == "");
    CHECK(HeldCpu(h, "b2") == "");
  }
}

// ---- seed 004's stories ----------------------------------------------------------------------

TEST_CASE("seed story: CPU jobs use GPU nodes' CPU only while no GPU job needs it",
          "[pools][reclaim][story]") {
  Harness h;
  // GPU.cpu: a GPU machine's CPU; CPU.cpu: a CPU machine's.
  h.Apply(Json::array({Event("ADDED", MakePool("gpu").Label("gpu", "true").Obj()),
                       Event("ADDED", MakePool("cpu").Label("cpu", "true").Obj()),
                       Event("ADDED", MakeNode("g1").Cpu("32").Memory("256Gi").Gpu(8).Pods(110).Label("gpu", "true").Obj()),
                       Event("ADDED", MakeNode("c1").Cpu("16").Memory("64Gi").Pods(110).Label("cpu", "true").Obj())}));
  auto cpu_job = [](const std::string& name) {
    return MakePod(name).Namespace("etl").Uid(name).Annotation("berth.io/pool", "cpu").Cpu("8").Memory("8Gi");
  };
  const std::vector<std::string> nodes = {"g1", "c1"};
  // Four CPU jobs: two fill the CPU machine, two borrow the GPU machine's idle CPU.
  for (const char* name : {"etl-1", "etl-2", "etl-3", "etl-4"}) {
    const MakePod p = cpu_job(name);
    h.Apply(Json::array({Event("ADDED", p.Obj())}));
    const Verdicts v = FilterPod(h, p, nodes);
    REQUIRE(v.fit.size() == 1);
    BindOk(h, p, v.fit[0]);
  }
  // The GPU machine keeps 2 CPUs per free GPU for GPU jobs, so a fifth CPU job finds no room.
  const MakePod fifth = cpu_job("etl-5");
  h.Apply(Json::array({Event("ADDED", fifth.Obj())}));
  CHECK(FilterPod(h, fifth, nodes).fit.empty());

  // A GPU job arrives: the GPU machine's CPU goes back to it.
  const MakePod train = MakePod("train").Namespace("ml").Uid("train").Annotation("berth.io/pool", "gpu")
                            .Cpu("24").Memory("64Gi").Gpu(8);
  h.Apply(Json::array({Event("ADDED", train.Obj())}));
  CHECK(FilterSettled(h, train, nodes).fit == std::vector<std::string>{"g1"});
  BindOk(h, train, "g1");
  const std::set<std::string> left = PodNames(h);
  CHECK((left.contains("etl-3") != left.contains("etl-4")));  // 32 - 24 leaves room for one
  CHECK(left.contains("etl-1"));
  CHECK(left.contains("etl-2"));
}

TEST_CASE("seed story: 1-GPU jobs use 8-GPU machines only while no 8-GPU job waits",
          "[pools][reclaim][story]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakePool("gpu8").Label("gpus", "8").Obj()),
                       Event("ADDED", MakePool("gpu1").Label("gpus", "1").Obj()),
                       Event("ADDED", MakeNode("big-1").Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Label("gpus", "8").Obj()),
                       Event("ADDED", MakeNode("big-2").Cpu("64").Memory("512Gi").Gpu(8).Pods(110).Label("gpus", "8").Obj()),
                       Event("ADDED", MakeNode("small-1").Cpu("16").Memory("64Gi").Gpu(1).Pods(110).Label("gpus", "1").Obj())}));
  const std::vector<std::string> nodes = {"big-1", "big-2", "small-1"};
  // Thirteen 1-GPU jobs: one on the small machine, eight borrowed on big-1, four on big-2.
  std::vector<std::string> placed;
  for (int i = 1; i <= 13; ++i) {
    const MakePod p = MakePod(StrCat("small-", i)).Namespace("dev").Uid(StrCat("small-", i))
                          .Annotation("berth.io/pool", "gpu1").Cpu("4").Memory("16Gi").Gpu(1);
    h.Apply(Json::array({Event("ADDED", p.Obj())}));
    const Verdicts v = FilterPod(h, p, nodes);
    REQUIRE_FALSE(v.fit.empty());
    BindOk(h, p, v.fit[0]);
    placed.push_back(v.fit[0]);
  }
  CHECK(placed[0] == "small-1");
  CHECK(std::count(placed.begin(), placed.end(), "big-2") == 4);
  auto gpu8 = [&] {
    const Json pools = ParseReply(h.service().DebugPools(false))["pools"];
    for (const Json& p : pools) {
      if (p["name"] == "gpu8") return p;
    }
    FAIL("no pool gpu8");
    return Json();
  };
  CHECK(gpu8()["shared"]["nvidia.com/gpu"] == "12");
  // An 8-GPU job of the 8-GPU pool: no machine has 8 free GPUs, so berth evicts the borrowers
  // of the machine that needs fewest victims (big-2's four), and the job gets it whole.
  const MakePod big = MakePod("big-train").Namespace("ml").Uid("big-train").Annotation("berth.io/pool", "gpu8")
                          .Cpu("32").Memory("256Gi").Gpu(8);
  h.Apply(Json::array({Event("ADDED", big.Obj())}));
  const Verdicts v = FilterSettled(h, big, nodes);
  CHECK(v.fit == std::vector<std::string>{"big-2"});
  BindOk(h, big, "big-2");
  CHECK(PodNames(h).size() == 13 + 1 - 4);
  CHECK(gpu8()["shared"]["nvidia.com/gpu"] == "8");
  CHECK(gpu8()["used"]["nvidia.com/gpu"] == "16");
  // Another 1-GPU job now waits: the 8-GPU machines are full, the small one too.
  const MakePod more = MakePod("small-14").Namespace("dev").Uid("small-14")
                           .Annotation("berth.io/pool", "gpu1").Cpu("4").Memory("16Gi").Gpu(1);
  h.Apply(Json::array({Event("ADDED", more.Obj())}));
  CHECK(FilterPod(h, more, nodes).fit.empty());
}

TEST_CASE("seed story: team A uses team B's idle pool and gives it back when B's work arrives",
          "[pools][reclaim][story]") {
  Harness h;
  h.Apply(TwoPools());
  // d1 is busy with another scheduler's work, so team A can only borrow from team B.
  h.Apply(Json::array({Running(MakePod("web").Namespace("web").Scheduler("default-scheduler").Cpu("8"), "d1")}));
  std::vector<MakePod> team_a;
  for (int i = 1; i <= 4; ++i) {
    team_a.push_back(InPool(StrCat("a-", i), "team-a", "8"));
    h.Apply(Json::array({Event("ADDED", team_a.back().Obj())}));
    const Verdicts v = FilterPod(h, team_a.back(), kAll);
    REQUIRE_FALSE(v.fit.empty());
    BindOk(h, team_a.back(), v.fit[0]);
  }
  auto pool = [&](const std::string& name) {
    const Json pools = ParseReply(h.service().DebugPools(false))["pools"];
    for (const Json& p : pools) {
      if (p["name"] == name) return p;
    }
    FAIL("no pool " << name);
    return Json();
  };
  CHECK(pool("team-a")["borrowed"]["pods"] == 2);
  CHECK(pool("team-b")["shared"]["cpu"] == "16");

  // Team B's work arrives, at a lower priority than team A's borrowers: B gets its pool back.
  for (int i = 1; i <= 2; ++i) {
    const MakePod b = InPool(StrCat("b-", i), "team-b", "6").Priority(-10);
    h.Apply(Json::array({Event("ADDED", b.Obj())}));
    const Verdicts v = FilterSettled(h, b, kAll);
    REQUIRE(v.fit.size() == 1);
    CHECK(v.fit[0].rfind("b", 0) == 0);
    BindOk(h, b, v.fit[0]);
  }
  CHECK(pool("team-a")["borrowed"]["pods"] == 0);
  CHECK(pool("team-b")["shared"]["pods"] == 0);
  CHECK(pool("team-b")["used"]["cpu"] == "12");

  // Team A's evicted pods come back to their own queue: nowhere to go, they wait at home.
  const MakePod again = InPool("a-3-again", "team-a", "8");
  h.Apply(Json::array({Event("ADDED", again.Obj())}));
  const Verdicts v = FilterSettled(h, again, kAll);
  CHECK(v.fit.empty());
  CHECK(PodNames(h).contains("b-1"));
  CHECK(PodNames(h).contains("b-2"));
}

}  // namespace
}  // namespace berth::testing
