// Queues and fair share through the verbs (SPEC 6.4, 6.5; seeds 000, 001): queues by label,
// usage and fair share, flow with its half-life, progressive filling, the order inside a queue,
// gangs as one job, limits and the excess budget, backfill that never delays the head,
// work conservation, aging, fair-share preemption that spares production, nudges, and
// /debug/queues.

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

std::string Iso(absl::Time t) { return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone()); }

// n CPU-only nodes (no memory, no GPUs, so usage is CPU cores alone) named prefix-0..n-1.
std::vector<std::string> AddNodes(Harness& h, const std::string& prefix, int n, const std::string& cpu) {
  Json events = Json::array();
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back(StrCat(prefix, "-", i));
    events.push_back(Event("ADDED", MakeNode(names.back()).Cpu(cpu).Pods(110).Obj()));
  }
  h.Apply(events);
  return names;
}

void AddQueue(Harness& h, const MakeQueue& q) { h.Apply(Event("ADDED", q.Obj())); }

// A job of one pod in namespace t, queue `queue` ("" for none), created `age` before now.
MakePod Job(Harness& h, const std::string& name, const std::string& queue, const std::string& cpu,
            absl::Duration age = absl::Minutes(1)) {
  MakePod p = MakePod(name).Namespace("t").Uid(name).Cpu(cpu).Created(Iso(h.clock().Now() - age));
  if (!queue.empty()) p.Label("berth.io/queue", queue);
  return p;
}

// A pod of `queue` already running on `node` since `since`.
MakePod Running(Harness& h, const std::string& name, const std::string& queue,
                const std::string& cpu, const std::string& node, absl::Time since) {
  return Job(h, name, queue, cpu, h.clock().Now() - since + absl::Seconds(1))
      .Node(node)
      .Phase("Running")
      .Started(Iso(since));
}

void Add(Harness& h, const std::vector<MakePod>& pods) {
  Json events = Json::array();
  for (const MakePod& p : pods) events.push_back(Event("ADDED", p.Obj()));
  h.Apply(events);
}

void Remove(Harness& h, const MakePod& p) { h.Apply(Event("DELETED", p.Obj())); }

Json Queues(Harness& h) { return ParseReply(h.service().DebugQueues(false)); }

Json QueueInfo(Harness& h, const std::string& name) {
  const Json all = Queues(h);
  for (const Json& q : all["queues"]) {
    if (q["name"] == name) return q;
  }
  FAIL("no queue " << name << " in " << all.dump());
  return Json();
}

// The jobs of the plan in admission order, as "key:state".
std::vector<std::string> Order(Harness& h) {
  std::vector<std::string> out;
  const Json all = Queues(h);
  for (const Json& j : all["jobs"]) {
    out.push_back(StrCat(j["job"].get<std::string>(), ":", j["state"].get<std::string>()));
  }
  return out;
}

// Lets the plan of admissions be made anew (plans are reused for a moment between filters).
// kube-scheduler proposes preemptions without a filter call when every node fails its own checks:
// a job its queue holds back gets no victims (it would not start once they left), the head does.
TEST_CASE("queue: no preemption for a job its queue holds back", "[queue][preempt]") {
  Harness h;
  AddNodes(h, "n", 2, "4");
  Add(h, {Running(h, "a", "", "2", "n-0", h.clock().Now()), Running(h, "b", "", "3", "n-1", h.clock().Now())});
  const MakePod head = Job(h, "head", "", "3", absl::Minutes(10)).Priority(100);
  const MakePod fill = Job(h, "fill", "", "1", absl::Minutes(5)).Priority(100);
  const MakePod blocked = Job(h, "fill-2", "", "1", absl::Minutes(4)).Priority(100);
  Add(h, {head, fill, blocked});
  REQUIRE(Order(h) == std::vector<std::string>{"t/head:next", "t/fill:admitted", "t/fill-2:backfill-blocked"});
  const Json held = h.Preempt(PreemptArgsMeta(blocked.Obj(), {{"n-1", {"b"}}}));
  INFO(held.dump());
  CHECK(held["NodeNameToMetaVictims"].empty());
  const Json next = h.Preempt(PreemptArgsMeta(head.Obj(), {{"n-1", {"b"}}}));
  INFO(next.dump());
  CHECK(next["NodeNameToMetaVictims"].contains("n-1"));
}


void Later(Harness& h, absl::Duration d = absl::Seconds(1)) { h.clock().Advance(d); }

policy::PolicyConfig WithQueues(std::function<void(policy::QueueConfig&)> edit) {
  policy::PolicyConfig c;
  edit(c.queues);
  return c;
}

TEST_CASE("queue: pods join by label, default always exists, an unknown queue is named", "[queue]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 1, "8");
  const MakePod plain = Job(h, "plain", "", "1");
  const MakePod lost = Job(h, "lost", "team-x", "1");
  Add(h, {plain, lost});
  Verdicts v = FilterPod(h, plain, nodes);
  CHECK(v.fit == std::vector<std::string>{"n-0"});
  CHECK(JobInfo(h, "t/plain")["queue"] == "default");
  CHECK(QueueInfo(h, "default")["exists"] == true);

  v = FilterPod(h, lost, nodes);
  CHECK(v.fit.empty());
  REQUIRE(v.unresolvable.size() == 1);
  CHECK(Contains(v.Why("n-0"), "queue \"team-x\" does not exist"));
  CHECK(JobInfo(h, "t/lost")["state"] == "unknown-queue");
  CHECK(QueueInfo(h, "team-x")["exists"] == false);

  AddQueue(h, MakeQueue("team-x"));
  Later(h);
  CHECK(FilterPod(h, lost, nodes).fit == std::vector<std::string>{"n-0"});
}

TEST_CASE("queue: usage is cpu + w_gpu x GPUs + w_mem x GiB, with configurable weights", "[queue]") {
  for (auto [gpu_weight, expected] : {std::pair{8.0, 2 + 8 + 4 * 0.25}, std::pair{4.0, 2 + 4 + 4 * 0.25}}) {
    Harness h(WithQueues([&](policy::QueueConfig& q) { q.gpu_weight = gpu_weight; }));
    h.Apply(Event("ADDED", MakeNode("g").Cpu("16").Memory("64Gi").Gpu(4).Pods(110).Obj()));
    Add(h, {Running(h, "r", "", "2", "g", h.clock().Now()).Gpu(1).Memory("4Gi")});
    const Json q = QueueInfo(h, "default");
    CHECK(q["usage"].get<double>() == Approx(expected));
    CHECK(Queues(h)["capacity"].get<double>() == Approx(16 + 4 * gpu_weight + 64 * 0.25));
  }
}

TEST_CASE("queue: fair share counts queues with pods; flow decays with the half-life", "[queue]") {
  Harness h(WithQueues([](policy::QueueConfig& q) { q.half_time = absl::Minutes(10); }));
  const std::vector<std::string> nodes = AddNodes(h, "n", 2, "8");
  AddQueue(h, MakeQueue("a").Weight(1));
  AddQueue(h, MakeQueue("b").Weight(1));
  AddQueue(h, MakeQueue("c").Weight(2));
  const MakePod r = Running(h, "r", "a", "4", "n-0", h.clock().Now());
  Add(h, {r, Job(h, "w", "c", "1")});
  // The book learns usage from the plans the admission tick makes (every second in berth
  // serve); reading /debug/queues changes nothing.
  h.service().AdmissionTick();
  CHECK(QueueInfo(h, "a")["fairShare"].get<double>() == Approx(1.0 / 3));
  CHECK(QueueInfo(h, "b")["fairShare"].get<double>() == 0);  // no pods: no share
  CHECK(QueueInfo(h, "c")["fairShare"].get<double>() == Approx(2.0 / 3));
  CHECK(QueueInfo(h, "a")["flow"].get<double>() == Approx(4));

  // The pod ends: usage drops at once, flow halves every half-life.
  Remove(h, r);
  Later(h, absl::Minutes(10));
  CHECK(QueueInfo(h, "a")["usage"].get<double>() == 0);
  CHECK(QueueInfo(h, "a")["flow"].get<double>() == Approx(2).epsilon(0.01));
  h.service().AdmissionTick();
  Later(h, absl::Minutes(10));
  CHECK(QueueInfo(h, "a")["flow"].get<double>() == Approx(1).epsilon(0.01));
}

TEST_CASE("queue: progressive filling takes the job leaving the smallest flow per weight", "[queue]") {
  // One node with 3.5 CPUs; queue a runs 0.5 already. Six 1-CPU jobs wait, three per queue;
  // room for three.
  for (double b_weight : {1.0, 3.0}) {
    Harness h;
    const std::vector<std::string> nodes = AddNodes(h, "n", 1, "3500m");
    AddQueue(h, MakeQueue("a").Weight(1));
    AddQueue(h, MakeQueue("b").Weight(b_weight));
    Add(h, {Running(h, "a-run", "a", "500m", "n-0", h.clock().Now())});
    std::vector<MakePod> jobs;
    for (int i = 1; i <= 3; ++i) {
      jobs.push_back(Job(h, StrCat("a", i), "a", "1", absl::Minutes(10 - i)));
      jobs.push_back(Job(h, StrCat("b", i), "b", "1", absl::Minutes(10 - i)));
    }
    Add(h, jobs);
    if (b_weight == 1.0) {
      // (flow + job) / weight: b1 1, a1 1.5, b2 2, a2 2.5 (no room: a's flow stays), a3 2.5, b3 3.
      CHECK(Order(h) == std::vector<std::string>{"t/b1:admitted", "t/a1:admitted", "t/b2:admitted",
                                                 "t/a2:next", "t/a3:waiting", "t/b3:waiting"});
    } else {
      // b's weight 3: b1 0.33, b2 0.67, b3 1, then a1 1.5.
      CHECK(Order(h) == std::vector<std::string>{"t/b1:admitted", "t/b2:admitted", "t/b3:admitted",
                                                 "t/a1:next", "t/a2:waiting", "t/a3:waiting"});
      const Verdicts v = FilterPod(h, jobs[2], nodes);  // a2
      CHECK(v.fit.empty());
      REQUIRE(v.unresolvable.size() == 1);  // berth's decision: kube-scheduler must not preempt
      CHECK(Contains(v.Why("n-0"), "queue a: position 2 of 3"));
      CHECK(Contains(v.Why("n-0"), "fair share 25.0%"));
      CHECK(Contains(v.Why("n-0"), "next to start is t/a1"));
    }
  }
}

TEST_CASE("queue: inside a queue, higher priority, then less weighted running time, then older", "[queue]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 1, "1");
  Add(h, {Job(h, "old", "", "1", absl::Minutes(5)).Priority(100),
          Job(h, "older", "", "1", absl::Minutes(6)).Priority(100),
          Job(h, "high", "", "1", absl::Minutes(1)).Priority(1000)});
  CHECK(Order(h) == std::vector<std::string>{"t/high:admitted", "t/older:next", "t/old:waiting"});
  CHECK(JobInfo(h, "t/old")["position"] == 2);

  // Two gangs of one priority: the older one has a member that ran for an hour (its gang came
  // apart); the newer one has run nothing, so it goes first (seed 000's CFS order).
  Harness g;
  const std::vector<std::string> gnodes = AddNodes(g, "n", 3, "1");
  g.Apply(Event("ADDED", MakePodGroup("x").Namespace("t").MinMember(2).Obj()));
  g.Apply(Event("ADDED", MakePodGroup("y").Namespace("t").MinMember(2).Obj()));
  const absl::Time hour_ago = g.clock().Now() - absl::Hours(1);
  auto member = [](MakePod p, const std::string& gang) {
    return p.Priority(1000).Label("scheduling.x-k8s.io/pod-group", gang);
  };
  Add(g, {member(Running(g, "x-0", "", "1", "n-0", hour_ago), "x"),
          member(Job(g, "x-1", "", "1", absl::Hours(2)), "x"),
          member(Job(g, "y-0", "", "1", absl::Minutes(1)), "y"),
          member(Job(g, "y-1", "", "1", absl::Minutes(1)), "y")});
  CHECK(Order(g) == std::vector<std::string>{"t/y:admitted", "t/x:next"});
}

TEST_CASE("queue: a gang is one job, all or nothing; backfill never delays it", "[queue]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 2, "2");
  h.Apply(Event("ADDED", MakePodGroup("g").Namespace("t").MinMember(3).Obj()));
  std::vector<MakePod> members;
  for (int i = 0; i < 3; ++i) {
    members.push_back(Job(h, StrCat("g-", i), "", "1", absl::Minutes(10)).Label("scheduling.x-k8s.io/pod-group", "g"));
  }
  Add(h, members);
  Add(h, {Running(h, "busy", "", "1", "n-0", h.clock().Now()), Job(h, "small", "", "1", absl::Minutes(1))});
  // Three CPUs free; the gang needs 3 and is older: it is admitted whole.
  CHECK(Order(h) == std::vector<std::string>{"t/g:admitted", "t/small:next"});
  CHECK(JobInfo(h, "t/g")["pods"] == 3);

  // With one more CPU taken the gang no longer fits: it is next, and the small job, which
  // would fit, may not take the room kept for it.
  Add(h, {Running(h, "busy-2", "", "1", "n-1", h.clock().Now())});
  Later(h);
  CHECK(Order(h) == std::vector<std::string>{"t/g:next", "t/small:backfill-blocked"});
  const Verdicts v = FilterPod(h, Job(h, "small", "", "1", absl::Minutes(1)), nodes);
  CHECK(v.fit.empty());
  CHECK(Contains(v.Why("n-1"), "fits only in room kept for t/g"));
  // Every member waits for room as one: the gang module says so, nothing is reserved.
  const Verdicts m = FilterPod(h, members[0], nodes);
  CHECK(m.fit.empty());
  CHECK(Contains(m.Why("n-0"), "2 of 3 members placeable"));
}

TEST_CASE("queue: backfill starts a job outside the room kept for the head", "[queue]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 2, "4");
  Add(h, {Running(h, "a", "", "2", "n-0", h.clock().Now()), Running(h, "b", "", "3", "n-1", h.clock().Now())});
  // Free: n-0 2, n-1 1. The head needs 3 CPUs: room is kept on n-0 (closest to fitting).
  Add(h, {Job(h, "head", "", "3", absl::Minutes(10)), Job(h, "fill", "", "1", absl::Minutes(5)),
          Job(h, "fill-2", "", "1", absl::Minutes(4))});
  CHECK(Order(h) == std::vector<std::string>{"t/head:next", "t/fill:admitted", "t/fill-2:backfill-blocked"});
  // The head itself goes on to the node filters (a plain shortage: kube-scheduler may preempt).
  const Verdicts v = FilterPod(h, Job(h, "head", "", "3", absl::Minutes(10)), nodes);
  CHECK(v.unresolvable.empty());
  CHECK(v.failed.size() == 2);
  CHECK(Contains(v.Why("n-0"), "insufficient cpu"));
}

TEST_CASE("queue: idle room the waiting jobs cannot use goes to jobs that can", "[queue]") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("gpu").Cpu("8").Gpu(1).Pods(110).Obj()));
  h.Apply(Event("ADDED", MakeNode("cpu").Cpu("8").Pods(110).Obj()));
  AddQueue(h, MakeQueue("gpu-team").Weight(10));
  AddQueue(h, MakeQueue("cpu-team").Weight(1));
  Add(h, {Running(h, "trainer", "gpu-team", "1", "gpu", h.clock().Now()).Gpu(1)});
  // gpu-team ranks first (its weight) but its job needs a GPU, which is taken: the CPU job of
  // the other queue still starts, on the CPU room nobody else can use.
  const MakePod wants_gpu = Job(h, "wants-gpu", "gpu-team", "1", absl::Minutes(10)).Gpu(1);
  // (Preemptible at once, so cpu-team's small share does not cap it: see the limits case.)
  const MakePod cpu_job =
      Job(h, "cpu-job", "cpu-team", "6", absl::Minutes(1)).Annotation("berth.io/lifetime", "0s");
  Add(h, {wants_gpu, cpu_job});
  CHECK(JobInfo(h, "t/wants-gpu")["state"] == "next");
  CHECK(JobInfo(h, "t/cpu-job")["state"] == "admitted");
  CHECK(FilterPod(h, cpu_job, {"gpu", "cpu"}).fit == std::vector<std::string>{"gpu", "cpu"});
}

TEST_CASE("queue: non-preemptible usage is capped at (1 + factor) x fair share", "[queue]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 5, "2");  // capacity 10
  AddQueue(h, MakeQueue("a"));
  AddQueue(h, MakeQueue("b"));
  Add(h, {Running(h, "a-1", "a", "2", "n-0", h.clock().Now()),
          Running(h, "a-2", "a", "2", "n-1", h.clock().Now()),
          Running(h, "a-3", "a", "2", "n-2", h.clock().Now()),
          Running(h, "b-1", "b", "1", "n-3", h.clock().Now())});
  // a has 6 of 10 running; its share is 5, its limit 1.2 x 5 = 6.
  const MakePod more = Job(h, "a-more", "a", "1");
  Add(h, {more});
  const Verdicts v = FilterPod(h, more, nodes);
  CHECK(v.fit.empty());
  REQUIRE(v.unresolvable.size() == 5);
  CHECK(Contains(v.Why("n-4"), "non-preemptible usage would reach 7.0, over the queue's limit 6.0"));
  CHECK(JobInfo(h, "t/a-more")["state"] == "over-limit");

  // The same job, preemptible at once (lifetime 0), draws on nothing and starts.
  Remove(h, more);
  const MakePod at_once = Job(h, "a-zero", "a", "1").Annotation("berth.io/lifetime", "0s");
  Add(h, {at_once});
  Later(h);
  CHECK(FilterPod(h, at_once, nodes).fit.size() == 2);

  // A finite lifetime over the fair share draws lifetime x usage resource-minutes from the
  // queue's excess budget: none by default...
  Remove(h, at_once);
  const MakePod finite = Job(h, "a-30m", "a", "1").Annotation("berth.io/lifetime", "30m");
  Add(h, {finite});
  Later(h);
  const Verdicts b = FilterPod(h, finite, nodes);
  CHECK(b.fit.empty());
  CHECK(Contains(b.Why("n-4"), "30 resource-minutes, but 0 of the queue's excess budget 0 remain"));
  // ... and with a budget of 100 it starts, and 30 are charged while it lives.
  AddQueue(h, MakeQueue("a").ExcessBudget(100));
  Later(h);
  CHECK(FilterPod(h, finite, nodes).fit.size() == 2);
  CHECK(QueueInfo(h, "a")["excessBudgetUsed"].get<double>() == Approx(30));
  CHECK(JobInfo(h, "t/a-30m")["budgetCharge"].get<double>() == Approx(30));
}

TEST_CASE("queue: a low-priority job is admitted eventually (aging), not past production", "[queue]") {
  Harness h(WithQueues([](policy::QueueConfig& q) { q.aging_interval = absl::Minutes(10); }));
  AddNodes(h, "n", 1, "1");
  Add(h, {Job(h, "experiment", "", "1", absl::Minutes(1)).Priority(10),
          Job(h, "normal", "", "1", absl::Seconds(30)).Priority(1000)});
  CHECK(Order(h) == std::vector<std::string>{"t/normal:admitted", "t/experiment:next"});
  // Twenty minutes on it has risen two levels to normal, and is the older of the two.
  Later(h, absl::Minutes(20));
  CHECK(Order(h) == std::vector<std::string>{"t/experiment:admitted", "t/normal:next"});
  CHECK(JobInfo(h, "t/experiment")["effectiveLevel"] == "normal");
  // Production work still goes first, however long the other waited.
  Add(h, {Job(h, "prod", "", "1", absl::Seconds(1)).Priority(10000)});
  Later(h, absl::Hours(5));
  CHECK(Order(h).front() == "t/prod:admitted");
  CHECK(JobInfo(h, "t/experiment")["effectiveLevel"] == "normal");
}

TEST_CASE("queue: over its share, a queue loses pods past their lifetime; production never", "[queue]") {
  Harness h;
  RecordingNudger nudger;
  h.service().SetNudger(&nudger);
  const std::vector<std::string> nodes = AddNodes(h, "n", 4, "1");
  AddQueue(h, MakeQueue("a"));
  AddQueue(h, MakeQueue("b"));
  const absl::Time start = h.clock().Now();
  // a fills the cluster: two pods with a 10 minute lifetime, one without, one production.
  Add(h, {Running(h, "a-0", "a", "1", "n-0", start).Annotation("berth.io/lifetime", "10m"),
          Running(h, "a-1", "a", "1", "n-1", start + absl::Seconds(1)).Annotation("berth.io/lifetime", "10m"),
          Running(h, "a-2", "a", "1", "n-2", start),
          Running(h, "a-prod", "a", "1", "n-3", start).Priority(10000).Annotation("berth.io/lifetime", "0s")});
  const MakePod wants = Job(h, "b-0", "b", "1");
  Add(h, {wants});
  REQUIRE(FilterPod(h, wants, nodes).fit.empty());  // kube-scheduler parks it
  // Before the lifetime has passed nobody is evicted (production never is). b's job is next
  // to start and told so once.
  Later(h, absl::Minutes(5));
  const extender::AdmissionTickStats first = h.Tick();
  CHECK(first.evicted == 0);
  CHECK(first.nudged == 1);
  CHECK(nudger.nudged == std::vector<std::string>{"t/b-0 (admitted by queue b)"});
  CHECK(Queues(h)["fairShareVictims"].empty());
  CHECK(JobInfo(h, "t/b-0")["state"] == "next");
  // Past it, one pod goes (the youngest), the one b's job needs.
  Later(h, absl::Minutes(6));
  CHECK(Queues(h)["fairShareVictims"].size() == 1);
  CHECK(Queues(h)["fairShareVictims"][0]["pod"] == "t/a-1");
  CHECK(h.Tick().evicted == 1);
  CHECK(h.model().Read()->FindPodByName("t", "a-1") == nullptr);
  CHECK(h.model().Read()->FindPodByName("t", "a-prod") != nullptr);
  // b's job is admitted now; kube-scheduler retries it on the victim's deletion by itself.
  Later(h);
  CHECK(JobInfo(h, "t/b-0")["state"] == "admitted");
  CHECK(FilterPod(h, wants, nodes).fit == std::vector<std::string>{"n-1"});
  // A queue at or under its share loses nothing: b is at its share now.
  Later(h, absl::Hours(1));
  CHECK(h.Tick().evicted == 0);
}

TEST_CASE("queue: jobs that become admitted are nudged once; gang members when room is reserved", "[queue]") {
  Harness h;
  RecordingNudger nudger;
  h.service().SetNudger(&nudger);
  const std::vector<std::string> nodes = AddNodes(h, "n", 1, "2");
  const MakePod big = Running(h, "big", "", "2", "n-0", h.clock().Now());
  const std::vector<MakePod> waiting = {Job(h, "w1", "", "1", absl::Minutes(3)), Job(h, "w2", "", "1", absl::Minutes(2)),
                                        Job(h, "w3", "", "1", absl::Minutes(1))};
  Add(h, {big, waiting[0], waiting[1], waiting[2]});
  // kube-scheduler asked about each and parked it: the node is full.
  for (const MakePod& w : waiting) REQUIRE(FilterPod(h, w, nodes).fit.empty());
  // The head passes admission (so kube-scheduler can preempt for it): it is nudged once.
  CHECK(h.Tick().nudged == 1);
  CHECK(nudger.nudged == std::vector<std::string>{"t/w1 (admitted by queue default)"});
  Later(h);
  CHECK(h.Tick().nudged == 0);
  // Room frees: w1 and w2 are admitted and w3 is next; w1 was let through already, so only
  // the other two are nudged.
  Remove(h, big);
  Later(h);
  nudger.nudged.clear();
  CHECK(h.Tick().nudged == 2);
  CHECK(nudger.nudged == std::vector<std::string>{"t/w2 (admitted by queue default)",
                                                  "t/w3 (admitted by queue default)"});

  // A gang admitted through its first member's filter: the other members are nudged.
  Harness g;
  RecordingNudger gn;
  g.service().SetNudger(&gn);
  const std::vector<std::string> gnodes = AddNodes(g, "n", 2, "4");
  g.Apply(Event("ADDED", MakePodGroup("gang").Namespace("t").MinMember(2).Obj()));
  const MakePod m0 = Job(g, "gang-0", "", "1").Label("scheduling.x-k8s.io/pod-group", "gang");
  const MakePod m1 = Job(g, "gang-1", "", "1").Label("scheduling.x-k8s.io/pod-group", "gang");
  const MakePod full0 = Running(g, "full-0", "", "4", "n-0", g.clock().Now());
  const MakePod full1 = Running(g, "full-1", "", "4", "n-1", g.clock().Now());
  Add(g, {full0, full1, m0, m1});
  // The cluster is full: kube-scheduler asks about both members and parks them.
  REQUIRE(FilterPod(g, m0, gnodes).fit.empty());
  REQUIRE(FilterPod(g, m1, gnodes).fit.empty());
  Remove(g, full0);
  Remove(g, full1);
  Later(g);
  // kube-scheduler retries gang-0 first: its filter reserves room for the whole gang. gang-1,
  // still parked, is nudged once; gang-0, whose last answer fit, is not.
  CHECK(FilterPod(g, m0, gnodes).fit.size() == 1);
  CHECK(g.Tick().nudged == 1);
  REQUIRE(gn.nudged.size() == 1);
  CHECK(gn.nudged[0].rfind("t/gang-1 (", 0) == 0);
}

TEST_CASE("queue: a pod admitted before kube-scheduler asked about it is not nudged", "[queue]") {
  Harness h;
  RecordingNudger nudger;
  h.service().SetNudger(&nudger);
  const std::vector<std::string> nodes = AddNodes(h, "n", 1, "2");
  const MakePod big = Running(h, "big", "", "2", "n-0", h.clock().Now());
  const MakePod asked = Job(h, "asked", "", "1", absl::Minutes(2));
  const MakePod fresh = Job(h, "fresh", "", "1", absl::Minutes(1));
  Add(h, {big, asked, fresh});
  REQUIRE(FilterPod(h, asked, nodes).fit.empty());
  Remove(h, big);
  Later(h);
  // Both are admitted; only the one kube-scheduler parked is patched. The other is in
  // kube-scheduler's active queue and will be asked anyway.
  CHECK(h.Tick().nudged == 1);
  CHECK(nudger.nudged == std::vector<std::string>{"t/asked (admitted by queue default)"});
  CHECK(Metric(h, "berth_nudges_not_needed_total") == 1);
  // A pod whose last answer fit is not nudged either, even if it waited before.
  CHECK(FilterPod(h, fresh, nodes).fit.size() == 1);
  CHECK(h.Tick().nudged == 0);
}

// A pod the in-tree filters refuse is never asked about by filter; kube-scheduler's preemption is
// what berth answers. Refused on every candidate, it waits for berth: once its queue admits it,
// it is nudged (so kube-scheduler tries again, preemption included). Had berth kept a candidate,
// kube-scheduler would have preempted and retried it by itself.
TEST_CASE("queue: a pod whose preemption berth refused is nudged when its job is admitted", "[queue][preempt]") {
  Harness h;
  RecordingNudger nudger;
  h.service().SetNudger(&nudger);
  AddNodes(h, "n", 1, "4");
  const MakePod running = Running(h, "r", "", "4", "n-0", h.clock().Now());
  const MakePod head = Job(h, "head", "", "2", absl::Minutes(10)).Priority(100);
  const MakePod second = Job(h, "second", "", "2", absl::Minutes(5)).Priority(100);
  Add(h, {running, head, second});
  // Both wait; kube-scheduler proposes victims for each.
  CHECK(h.Preempt(PreemptArgsMeta(second.Obj(), {{"n-0", {"r"}}}))["NodeNameToMetaVictims"].empty());
  // The head is admitted at the first tick, and was never refused by berth: not nudged.
  CHECK(h.Tick().nudged == 0);
  // The running pod ends: the second job is admitted too, and told so once.
  Remove(h, running);
  h.clock().Advance(absl::Seconds(1));
  CHECK(h.Tick().nudged == 1);
  CHECK(nudger.nudged == std::vector<std::string>{"t/second (admitted by queue default)"});
}

TEST_CASE("queue: /debug/queues as JSON and text", "[queue]") {
  Harness h;
  AddNodes(h, "n", 1, "2");
  AddQueue(h, MakeQueue("research").Weight(2).NonPreemptibleLimitFactor(0.5).ExcessBudget(600));
  Add(h, {Running(h, "r", "research", "1", "n-0", h.clock().Now()),
          Job(h, "next", "research", "2", absl::Minutes(2)).Annotation("berth.io/lifetime", "1h")});
  const Json all = Queues(h);
  CHECK(all["capacity"].get<double>() == Approx(2));
  CHECK(all["next"] == "t/next");
  const Json q = QueueInfo(h, "research");
  CHECK(q["weight"].get<double>() == 2);
  CHECK(q["fairShare"].get<double>() == 1);
  CHECK(q["usageNonPreemptible"].get<double>() == 1);
  CHECK(q["nonPreemptibleLimit"].get<double>() == Approx(3));
  CHECK(q["excessBudget"].get<double>() == 600);
  CHECK(q["waitingJobs"] == 1);
  const Json j = JobInfo(h, "t/next");
  CHECK(j["lifetime"] == "1h");
  CHECK(j["position"] == 1);
  CHECK(Contains(j["why"].get<std::string>(), "next to start: waits for room for cpu=2"));

  const extender::Reply text = h.service().DebugQueues(true);
  CHECK(text.content_type.rfind("text/plain", 0) == 0);
  CHECK(Contains(text.body, "QUEUE"));
  CHECK(Contains(text.body, "research"));
  CHECK(Contains(text.body, "t/next"));
  CHECK(Contains(text.body, "next to start"));
}

TEST_CASE("queue: an unreadable lifetime is never preemptible and is said so", "[queue]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 1, "1");
  AddQueue(h, MakeQueue("b"));
  Add(h, {Running(h, "odd", "", "1", "n-0", h.clock().Now() - absl::Hours(5))
              .Annotation("berth.io/lifetime", "soon"),
          Job(h, "b-job", "b", "1")});
  // default is over its share and b's job is next, but the pod's lifetime cannot be read.
  CHECK(QueueInfo(h, "default")["usageNonPreemptible"].get<double>() == 1);
  CHECK(QueueInfo(h, "default")["share"].get<double>() > QueueInfo(h, "default")["fairShare"].get<double>());
  CHECK(Queues(h)["next"] == "t/b-job");
  CHECK(Queues(h)["fairShareVictims"].empty());
  CHECK(h.Tick().evicted == 0);
  // A waiting job with an unreadable lifetime says so in /debug/queues.
  Add(h, {Job(h, "odd-waiting", "b", "1").Annotation("berth.io/lifetime", "forever")});
  CHECK(Contains(JobInfo(h, "t/odd-waiting")["warning"].get<std::string>(),
                 "annotation berth.io/lifetime: expected a duration of 0s or more"));
  CHECK(Contains(JobInfo(h, "t/odd-waiting")["warning"].get<std::string>(), "counts as no lifetime"));
}

}  // namespace
}  // namespace berth::testing
