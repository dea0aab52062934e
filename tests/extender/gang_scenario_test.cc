// Gangs through the verbs (SPEC 6.2, 6.3, 6.6; seeds 001, 002, 003): no PodGroup no
// scheduling, all-or-nothing admission into reservations, no deadlock between gangs, timeouts,
// elastic members by fulfillment with a freezing window, preemption that never breaks a gang,
// fat-tree placement with the fewest hops, and /debug/gangs.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

// A member of gang `gang` in namespace ml.
MakePod Member(const std::string& gang, int i, const std::string& cpu = "6") {
  const std::string name = StrCat(gang, "-", i);
  return MakePod(name).Namespace("ml").Uid(name).Label("scheduling.x-k8s.io/pod-group", gang).Cpu(cpu);
}

std::vector<MakePod> Members(const std::string& gang, int n, const std::string& cpu = "6") {
  std::vector<MakePod> out;
  for (int i = 0; i < n; ++i) out.push_back(Member(gang, i, cpu));
  return out;
}

Json Group(const std::string& gang, int min) {
  return Event("ADDED", MakePodGroup(gang).Namespace("ml").MinMember(min).Obj());
}

void AddPods(Harness& h, const std::vector<MakePod>& pods) {
  Json events = Json::array();
  for (const MakePod& p : pods) events.push_back(Event("ADDED", p.Obj()));
  h.Apply(events);
}

// n nodes of 8 CPUs named prefix-0..n-1 (no topology labels).
std::vector<std::string> AddNodes(Harness& h, const std::string& prefix, int n) {
  Json events = Json::array();
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back(StrCat(prefix, "-", i));
    events.push_back(Event("ADDED", MakeNode(names.back()).Cpu("8").Memory("32Gi").Pods(110).Obj()));
  }
  h.Apply(events);
  return names;
}

// Filters `pod` and binds it where berth lets it go. \return the node, or "" when it waits.
std::string FilterAndBind(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes) {
  const Verdicts v = FilterPod(h, pod, nodes);
  if (v.fit.empty()) return "";
  REQUIRE(v.fit.size() == 1);  // a gang member is answered with its reserved node only
  BindOk(h, pod, v.fit[0]);
  return v.fit[0];
}

std::string AnyReason(const Verdicts& v) {
  return v.unresolvable.empty() ? (v.failed.empty() ? "" : v.Why(v.failed.begin()->first))
                                : v.Why(v.unresolvable.begin()->first);
}

policy::PolicyConfig WithGangs(std::function<void(policy::GangConfig&)> edit) {
  policy::PolicyConfig c;
  edit(c.gangs);
  return c;
}

TEST_CASE("gang: no PodGroup, no scheduling; too few members wait with that reason", "[gang]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 4);
  const std::vector<MakePod> job = Members("job", 3);
  AddPods(h, job);
  Verdicts v = FilterPod(h, job[0], nodes);
  CHECK(v.fit.empty());
  REQUIRE(v.unresolvable.size() == nodes.size());  // berth's own decision: no preemption
  CHECK(Contains(v.Why("n-0"), "gang ml/job: PodGroup ml/job does not exist yet"));
  CHECK(Contains(BindError(h, job[0], "n-0"), "does not exist yet"));

  h.Apply(Group("job", 4));
  v = FilterPod(h, job[0], nodes);
  CHECK(v.fit.empty());
  CHECK(Contains(v.Why("n-1"), "gang ml/job: 3 of 4 members exist"));
  CHECK(GangInfo(h, "job")["state"] == "WaitingForMembers");

  AddPods(h, {Member("job", 3)});
  v = FilterPod(h, job[0], nodes);
  CHECK(v.fit.size() == 1);
  CHECK(GangInfo(h, "job")["reserved"] == 4);
}

TEST_CASE("gang: all or nothing; reserved room is the member's alone", "[gang]") {
  Harness h;
  std::vector<std::string> nodes = AddNodes(h, "n", 3);  // room for 3 members of 6 CPUs
  const std::vector<MakePod> job = Members("job", 4);
  AddPods(h, job);
  h.Apply(Group("job", 4));

  Verdicts v = FilterPod(h, job[0], nodes);
  CHECK(v.fit.empty());
  CHECK(Contains(v.Why("n-0"), "gang ml/job: 3 of 4 members placeable"));
  CHECK(v.unresolvable.size() == 3);
  CHECK(GangInfo(h, "job")["reserved"] == 0);
  // No member binds while the gang cannot be placed whole.
  CHECK_FALSE(BindError(h, job[1], "n-1").empty());

  nodes.push_back(AddNodes(h, "m", 1)[0]);
  std::set<std::string> used;
  for (const MakePod& m : job) {
    v = FilterPod(h, m, nodes);
    REQUIRE(v.fit.size() == 1);
    used.insert(v.fit[0]);
    for (const std::string& n : nodes) {
      if (n != v.fit[0]) CHECK(Contains(v.Why(n), "this member's room is reserved on node " + v.fit[0]));
    }
  }
  CHECK(used.size() == 4);  // one per node: 6 CPUs each on 8-CPU nodes
  Json info = GangInfo(h, "job");
  CHECK(info["state"] == "Reserved");
  CHECK(info["reserved"] == 4);

  // A plain pod sees reserved room as taken.
  const MakePod plain = MakePod("plain").Namespace("ml").Uid("plain").Cpu("4");
  v = FilterPod(h, plain, nodes);
  CHECK(v.fit.empty());
  CHECK(v.failed.size() == 4);
  // A member may not bind on another member's node.
  const std::string first = FilterPod(h, job[0], nodes).fit.at(0);
  const std::string second = FilterPod(h, job[1], nodes).fit.at(0);
  CHECK_FALSE(BindError(h, job[0], second).empty());
  for (const MakePod& m : job) BindOk(h, m, FilterPod(h, m, nodes).fit.at(0));
  info = GangInfo(h, "job");
  CHECK(info["state"] == "Running");
  CHECK(info["bound"] == 4);
  CHECK(info["reserved"] == 0);
  (void)first;
}

// Gangs submitted member by member, interleaved, on a cluster that holds fewer than all of them.
void Interleave(int gangs, int nodes_count, int members) {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", nodes_count);
  std::vector<std::vector<MakePod>> jobs;
  for (int g = 0; g < gangs; ++g) {
    const std::string name = StrCat("job", g);
    jobs.push_back(Members(name, members));
    AddPods(h, jobs.back());
    h.Apply(Group(name, members));
  }
  // kube-scheduler's queue: member 0 of every gang, then member 1 of every gang, ... and again,
  // as retries come round.
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < members; ++i) {
      for (int g = 0; g < gangs; ++g) {
        const Json info = GangInfo(h, StrCat("job", g));
        (void)info;
        FilterAndBind(h, jobs[g][i], nodes);
      }
    }
  }
  int complete = 0, untouched = 0;
  for (int g = 0; g < gangs; ++g) {
    const Json info = GangInfo(h, StrCat("job", g));
    INFO(info.dump());
    if (info["bound"] == members) ++complete;
    if (info["bound"] == 0 && info["reserved"] == 0) ++untouched;
  }
  CHECK(complete == nodes_count / members);
  CHECK(complete + untouched == gangs);  // never a gang partly bound
}

TEST_CASE("gang: two gangs that fit alone but not together never deadlock", "[gang]") {
  Interleave(/*gangs=*/2, /*nodes=*/5, /*members=*/3);
}

TEST_CASE("gang: three gangs, and a cluster that holds only one", "[gang]") {
  Interleave(3, 7, 3);  // room for two gangs of three
  Interleave(3, 4, 3);  // room for one
}

TEST_CASE("gang: reservations expire; the gang waits whole again; incomplete gangs", "[gang]") {
  for (bool release : {false, true}) {
    DYNAMIC_SECTION("releaseIncomplete=" << release) {
      Harness h(WithGangs([&](policy::GangConfig& g) { g.release_incomplete = release; }));
      const std::vector<std::string> nodes = AddNodes(h, "n", 3);
      const std::vector<MakePod> job = Members("job", 3);
      AddPods(h, job);
      h.Apply(Event("ADDED", MakePodGroup("job").Namespace("ml").MinMember(3).TimeoutSeconds(30).Obj()));
      REQUIRE(!FilterAndBind(h, job[0], nodes).empty());
      Json info = GangInfo(h, "job");
      CHECK(info["bound"] == 1);
      CHECK(info["reserved"] == 2);
      CHECK(info["timeoutSeconds"] == 30);
      CHECK(info["secondsLeft"] == 30);

      h.clock().Advance(absl::Seconds(29));
      h.service().Housekeeping();
      CHECK(GangInfo(h, "job")["reserved"] == 2);
      h.clock().Advance(absl::Seconds(2));
      h.service().Housekeeping();
      h.service().DrainIntents();  // the release of the bound member, when configured
      info = GangInfo(h, "job");
      INFO(info.dump());
      CHECK(info["reserved"] == 0);
      CHECK(info["timeouts"] == 1);
      // The room is free for others again (and, when released, the bound member's too).
      const MakePod plain = MakePod("plain").Namespace("ml").Uid("plain").Cpu("6");
      CHECK(FilterPod(h, plain, nodes).fit.size() == (release ? 3u : 2u));
      if (release) {
        // Standalone mode: the evicted member is gone (its controller would recreate it).
        CHECK(info["bound"] == 0);
        CHECK(info["members"] == 2);
        CHECK(info["state"] == "WaitingForMembers");
      } else {
        CHECK(info["state"] == "Incomplete");
        CHECK(info["bound"] == 1);
      }
    }
  }
}

TEST_CASE("gang: kube-scheduler not offering the reserved node re-plans that member", "[gang]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 4);
  const std::vector<MakePod> job = Members("job", 2);
  AddPods(h, job);
  h.Apply(Group("job", 2));
  const std::string reserved = FilterPod(h, job[0], nodes).fit.at(0);
  std::vector<std::string> offered;
  for (const std::string& n : nodes) {
    if (n != reserved) offered.push_back(n);
  }
  const Verdicts v = FilterPod(h, job[0], offered);
  REQUIRE(v.fit.size() == 1);
  CHECK(v.fit[0] != reserved);
  BindOk(h, job[0], v.fit[0]);
  CHECK(GangInfo(h, "job")["bound"] == 1);
}

TEST_CASE("gang: a member whose reserved node was not offered and that has no other place is asked "
          "about again", "[gang]") {
  // kube-scheduler's adaptive sample (percentageOfNodesToScore below 100) can leave out the
  // member's reserved node while every node it offers is taken. The member waits, and is nudged
  // at the next tick so that kube-scheduler asks again, with a sample that starts elsewhere,
  // before the gang's reservations time out.
  Harness h;
  RecordingNudger nudger;
  h.service().SetNudger(&nudger);
  const std::vector<std::string> nodes = AddNodes(h, "n", 2);
  const std::vector<MakePod> job = Members("job", 2);
  AddPods(h, job);
  h.Apply(Group("job", 2));
  const std::string reserved = FilterPod(h, job[0], nodes).fit.at(0);
  const std::string other = reserved == nodes[0] ? nodes[1] : nodes[0];
  // The other node holds the other member's room: nowhere to re-plan to.
  const Verdicts v = FilterPod(h, job[0], {other});
  CHECK(v.fit.empty());
  CHECK(h.Tick().nudged == 1);
  CHECK(nudger.nudged == std::vector<std::string>{StrCat("ml/job-0 (its reserved node ", reserved,
                                                         " was not among the nodes offered)")});
  // The nudge is spent: nothing more until kube-scheduler asks again.
  CHECK(h.Tick().nudged == 0);
  // Asked again with the reserved node in the sample, it goes there; no nudge follows.
  CHECK(FilterAndBind(h, job[0], nodes) == reserved);
  CHECK(FilterAndBind(h, job[1], {other}) == other);
  CHECK(h.Tick().nudged == 0);
  CHECK(GangInfo(h, "job")["bound"] == 2);
  CHECK(nudger.nudged.size() == 1);
}

TEST_CASE("gang: the plan respects nodeSelector, taints and cordoned nodes", "[gang]") {
  Harness h;
  h.Apply(Json::array({
      Event("ADDED", MakeNode("cordoned").Cpu("8").Pods(110).Unschedulable().Obj()),
      Event("ADDED", MakeNode("tainted").Cpu("8").Pods(110).Taint("dedicated", "infer", "NoSchedule").Obj()),
      Event("ADDED", MakeNode("other").Cpu("8").Pods(110).Label("kind", "cpu").Obj()),
      Event("ADDED", MakeNode("good-1").Cpu("8").Pods(110).Label("kind", "train").Obj()),
      Event("ADDED", MakeNode("good-2").Cpu("8").Pods(110).Label("kind", "train").Obj()),
  }));
  const std::vector<std::string> all = {"cordoned", "tainted", "other", "good-1", "good-2"};
  std::vector<MakePod> job;
  for (int i = 0; i < 2; ++i) {
    MakePod p = Member("job", i);
    Json o = p.Obj();
    job.push_back(p);
  }
  // nodeSelector kind=train via the raw object.
  Json events = Json::array();
  std::vector<Json> objs;
  for (const MakePod& p : job) {
    Json o = p.Obj();
    o["spec"]["nodeSelector"] = {{"kind", "train"}};
    objs.push_back(o);
    events.push_back(Event("ADDED", o));
  }
  h.Apply(events);
  h.Apply(Group("job", 2));
  std::set<std::string> used;
  for (const Json& o : objs) {
    const Json r = h.Filter(ArgsNames(o, all));
    REQUIRE(r["NodeNames"].size() == 1);
    used.insert(r["NodeNames"][0].get<std::string>());
  }
  CHECK(used == std::set<std::string>{"good-1", "good-2"});

  // Three members need the tainted node too; they wait until they tolerate it.
  Harness h2;
  h2.Apply(Json::array({Event("ADDED", MakeNode("tainted").Cpu("8").Pods(110).Taint("dedicated", "infer", "NoSchedule").Obj()),
                        Event("ADDED", MakeNode("a").Cpu("8").Pods(110).Obj()),
                        Event("ADDED", MakeNode("b").Cpu("8").Pods(110).Obj())}));
  const std::vector<MakePod> three = Members("three", 3);
  AddPods(h2, three);
  h2.Apply(Group("three", 3));
  Verdicts v = FilterPod(h2, three[0], {"tainted", "a", "b"});
  CHECK(v.fit.empty());
  CHECK(Contains(v.Why("a"), "2 of 3 members placeable"));
  Json tolerant = Json::array();
  for (const MakePod& p : three) {
    Json o = p.Obj();
    o["spec"]["tolerations"] = Json::array({{{"key", "dedicated"}, {"operator", "Exists"}}});
    tolerant.push_back(Event("MODIFIED", o));
  }
  h2.Apply(tolerant);
  v = FilterPod(h2, three[0], {"tainted", "a", "b"});
  CHECK(v.fit.size() == 1);
}

// ---- elastic members (seed 002) ------------------------------------------------------------------

TEST_CASE("gang: elastic members go to the least fulfilled gang first, then freeze", "[gang][elastic]") {
  Harness h(WithGangs([](policy::GangConfig& g) { g.freeze_window = absl::Seconds(60); }));
  // 8 nodes of 8 CPUs, members of 6 CPUs: 8 members fit.
  const std::vector<std::string> nodes = AddNodes(h, "n", 8);
  const std::vector<MakePod> a = Members("a", 6);  // min 2, 4 elastic
  const std::vector<MakePod> b = Members("b", 6);  // min 2, 4 elastic
  AddPods(h, a);
  AddPods(h, b);
  h.Apply(Group("a", 2));
  h.Apply(Group("b", 2));
  for (int i = 0; i < 2; ++i) {
    REQUIRE(!FilterAndBind(h, a[i], nodes).empty());
    REQUIRE(!FilterAndBind(h, b[i], nodes).empty());
  }
  CHECK(GangInfo(h, "a")["fulfillment"] == 0.0);
  // Four nodes left. Asking for a's elastic member shares them out by fulfillment: two each,
  // not four to a.
  Verdicts v = FilterPod(h, a[2], nodes);
  CHECK(v.fit.size() == 1);
  Json ia = GangInfo(h, "a"), ib = GangInfo(h, "b");
  INFO(ia.dump() << ib.dump());
  CHECK(ia["reserved"] == 2);
  CHECK(ib["reserved"] == 2);
  CHECK(ia["frozen"] == true);
  for (int i = 2; i < 6; ++i) {
    FilterAndBind(h, a[i], nodes);
    FilterAndBind(h, b[i], nodes);
  }
  CHECK(GangInfo(h, "a")["bound"] == 4);
  CHECK(GangInfo(h, "b")["bound"] == 4);

  // Room for one more appears: a and b are frozen, so their members wait, saying so.
  const std::vector<std::string> more = AddNodes(h, "m", 1);
  std::vector<std::string> all = nodes;
  all.push_back(more[0]);
  v = FilterPod(h, a[4], all);
  CHECK(v.fit.empty());
  CHECK(Contains(AnyReason(v), "within its freeze window of 1m"));
  h.clock().Advance(absl::Seconds(61));
  v = FilterPod(h, a[4], all);
  CHECK(v.fit.size() == 1);
}

TEST_CASE("gang: the PodGroup's berth.io/freeze-window overrides the configured one", "[gang][elastic]") {
  Harness h;  // configured window: 60 s
  const std::vector<std::string> nodes = AddNodes(h, "n", 4);
  const std::vector<MakePod> a = Members("a", 3);
  AddPods(h, a);
  h.Apply(Event("ADDED", MakePodGroup("a").Namespace("ml").MinMember(1)
                             .Annotation("berth.io/freeze-window", "10s").Obj()));
  REQUIRE(!FilterAndBind(h, a[0], nodes).empty());
  // One elastic pass gives a both elastic members (it is the only gang), then freezes it.
  REQUIRE(!FilterAndBind(h, a[1], nodes).empty());
  REQUIRE(!FilterAndBind(h, a[2], nodes).empty());
  CHECK(GangInfo(h, "a")["frozen"] == true);
  // A fourth member arrives while the gang is frozen.
  const MakePod late = Member("a", 3);
  AddPods(h, {late});
  Verdicts v = FilterPod(h, late, nodes);
  CHECK(v.fit.empty());
  CHECK(Contains(AnyReason(v), "within its freeze window of 10s"));
  h.clock().Advance(absl::Seconds(11));
  v = FilterPod(h, late, nodes);
  CHECK(v.fit.size() == 1);
}

TEST_CASE("gang: Volcano's group-name annotation and PodGroup; minResources must be free", "[gang]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 2);
  std::vector<MakePod> v;
  for (int i = 0; i < 2; ++i) {
    const std::string name = StrCat("vc-", i);
    v.push_back(MakePod(name).Namespace("ml").Uid(name).Annotation("scheduling.k8s.io/group-name", "vc").Cpu("4"));
  }
  AddPods(h, v);
  h.Apply(Event("ADDED", MakePodGroup("vc").Namespace("ml").MinMember(2).Volcano()
                             .MinResource("cpu", "32").Obj()));
  Verdicts r = FilterPod(h, v[0], nodes);
  CHECK(r.fit.empty());
  CHECK(Contains(AnyReason(r), "gang ml/vc: minResources cpu=32 exceed the cluster's free room"));
  h.Apply(Event("MODIFIED", MakePodGroup("vc").Namespace("ml").MinMember(2).Volcano()
                                .MinResource("cpu", "16").Obj()));
  r = FilterPod(h, v[0], nodes);
  CHECK(r.fit.size() == 1);
  CHECK(GangInfo(h, "vc")["reserved"] == 2);
}

TEST_CASE("gang: capacity is taken back from the most fulfilled gang, never below min", "[gang][elastic]") {
  Harness h(WithGangs([](policy::GangConfig& g) { g.freeze_window = absl::ZeroDuration(); }));
  const std::vector<std::string> nodes = AddNodes(h, "n", 6);
  const std::vector<MakePod> a = Members("a", 4);  // min 1: fulfillment 1.0 at 4
  const std::vector<MakePod> b = Members("b", 4);  // min 1
  AddPods(h, a);
  AddPods(h, b);
  h.Apply(Group("a", 1));
  h.Apply(Group("b", 1));
  // a gets 4 nodes, b 2.
  for (int i = 0; i < 4; ++i) REQUIRE(!FilterAndBind(h, a[i], nodes).empty());
  for (int i = 0; i < 2; ++i) REQUIRE(!FilterAndBind(h, b[i], nodes).empty());
  CHECK(GangInfo(h, "a")["bound"] == 4);
  CHECK(GangInfo(h, "b")["bound"] == 2);
  // A new gang of 3 needs three nodes: a (fulfillment 1.0) gives before b (0.33).
  const std::vector<MakePod> c = Members("c", 3);
  AddPods(h, c);
  h.Apply(Group("c", 3));
  // The room is reserved at once; the elastic members leave when their evictions are carried
  // out, and then the member fits.
  CHECK(FilterPod(h, c[0], nodes).fit.empty());
  CHECK(GangInfo(h, "a")["bound"] == 4);
  CHECK(h.service().DrainIntents() == 3);
  const Verdicts v = FilterPod(h, c[0], nodes);
  CHECK(v.fit.size() == 1);
  const Json ia = GangInfo(h, "a"), ib = GangInfo(h, "b"), ic = GangInfo(h, "c");
  INFO(ia.dump() << ib.dump() << ic.dump());
  CHECK(ic["reserved"] == 3);
  CHECK(ib["bound"] == 2);     // untouched
  CHECK(ia["bound"] == 1);     // gave three, kept its minimum
}

TEST_CASE("gang: in Kubernetes mode, housekeeping plans a gang that starts only by taking back "
          "elastic room", "[gang][elastic]") {
  Harness h(WithGangs([](policy::GangConfig& g) { g.freeze_window = absl::ZeroDuration(); }),
            extender::Mode::kKubernetes);
  RecordingEvictor evictor;
  RecordingNudger nudger;
  h.service().SetEvictor(&evictor);
  h.service().SetNudger(&nudger);
  // Six nodes of 8 CPUs. Gang a runs four members of 6 CPUs (fulfillment 1); gang b runs two
  // and waits for two more (fulfillment 1/3). Both have min 1.
  Json events = Json::array({Group("a", 1), Group("b", 1)});
  for (int i = 0; i < 6; ++i) {
    events.push_back(
        Event("ADDED", MakeNode(StrCat("n-", i)).Cpu("8").Memory("32Gi").Pods(110).Obj()));
  }
  for (int i = 0; i < 6; ++i) {
    const MakePod running = i < 4 ? Member("a", i) : Member("b", i - 4);
    events.push_back(Event("ADDED", MakePod(running).Node(StrCat("n-", i)).Phase("Running").Obj()));
  }
  for (int i = 2; i < 4; ++i) events.push_back(Event("ADDED", Member("b", i).Obj()));
  // Gang c: three members of 6 CPUs, created now. kube-scheduler's own check finds 2 free CPUs
  // on every node, so its members are not brought to berth's filter. c-0 was, once, before its
  // PodGroup existed, and was answered that it waits: kube-scheduler parked it for berth.
  for (int i = 0; i < 3; ++i) {
    events.push_back(Event("ADDED", Member("c", i).Created("2023-11-14T22:13:20Z").Obj()));
  }
  ApplyToModel(h, events);
  const std::vector<std::string> nodes = {"n-0", "n-1", "n-2", "n-3", "n-4", "n-5"};
  REQUIRE(FilterPod(h, Member("c", 0), nodes).fit.empty());
  ApplyToModel(h, Json::array({Group("c", 3)}));

  // Within the grace kube-scheduler is given, housekeeping leaves the gang alone.
  CHECK(h.service().Housekeeping() == 0);
  CHECK(GangInfo(h, "c")["reserved"] == 0);

  h.clock().Advance(absl::Seconds(6));
  CHECK(h.service().Housekeeping() == 1);
  // As a member's filter would: room for all three at once, taken back from the most fulfilled
  // gang (a), which keeps its minimum; b is untouched.
  CHECK(GangInfo(h, "c")["reserved"] == 3);
  CHECK(h.service().DrainIntents() == 3);
  INFO("evicted: " << absl::StrJoin(evictor.evicted, ", "));
  REQUIRE(evictor.evicted.size() == 3);
  for (const std::string& pod : evictor.evicted) CHECK(pod.rfind("ml/a-", 0) == 0);
  // The gang was planned by c-0, its oldest member (ties by name), and c-0 is nudged too:
  // kube-scheduler parked it for berth's answer and would not try it again by itself. c-1 and
  // c-2 failed kube-scheduler's own check, which it tries again when the victims are deleted.
  CHECK(h.Tick().nudged == 1);
  CHECK(nudger.nudged == std::vector<std::string>{"ml/c-0 (room reserved for its gang)"});
  // Planned once: the next pass has nothing to start.
  CHECK(h.service().Housekeeping() == 0);
  CHECK(evictor.evicted.size() == 3);
}

// ---- preemption (seed 001) -----------------------------------------------------------------------

TEST_CASE("gang: preempt never leaves a gang below minMember", "[gang][preempt]") {
  Harness h;
  const std::vector<std::string> nodes = AddNodes(h, "n", 3);
  Json events = Json::array();
  // Gang g (min 2) runs g-0 on n-0 and g-1 on n-1; gang e (min 1) runs e-0 and e-1 (elastic) on n-2;
  // gang s (min 2) runs both members on n-2 too? no: s-0, s-1 on n-0... keep it small.
  auto run = [&](MakePod p, const std::string& node) {
    events.push_back(Event("ADDED", p.Priority(10).Node(node).Phase("Running").Obj()));
  };
  run(Member("g", 0, "4"), "n-0");
  run(Member("g", 1, "4"), "n-1");
  run(Member("e", 0, "4"), "n-2");
  run(Member("e", 1, "4"), "n-2");
  run(Member("w", 0, "2"), "n-1");
  run(Member("w", 1, "2"), "n-1");
  h.Apply(events);
  h.Apply(Json::array({Group("g", 2), Group("e", 1), Group("w", 2)}));
  const MakePod urgent = MakePod("urgent").Namespace("ml").Uid("urgent").Cpu("8").Priority(1000);
  // n-0: taking g-0 would leave g at 1 of 2: spared, nothing else there: node dropped.
  // n-1: g-1 spared the same way; w-0 and w-1 are all of gang w and all on n-1: fine, but
  //      without g-1 they do not free 8 CPUs: dropped.
  // n-2: e-0 and e-1: e keeps... min 1 of 2: taking both leaves 0 < 1, and all of e is on n-2:
  //      the whole gang goes.
  const Json r = h.Preempt(PreemptArgsMeta(urgent.Obj(), {{"n-0", {"g-0"}},
                                                          {"n-1", {"g-1", "w-0", "w-1"}},
                                                          {"n-2", {"e-0", "e-1"}}}));
  INFO(r.dump());
  const Json& m = r["NodeNameToMetaVictims"];
  CHECK_FALSE(m.contains("n-0"));
  CHECK_FALSE(m.contains("n-1"));
  REQUIRE(m.contains("n-2"));
  CHECK(m["n-2"]["Pods"].size() == 2);

  // Elastic members before anyone's minimum: kube-scheduler proposes g-0 on n-0, where an
  // elastic member of e also runs; berth swaps it in.
  Harness h2;
  AddNodes(h2, "n", 2);
  Json ev = Json::array();
  ev.push_back(Event("ADDED", Member("g", 0, "4").Priority(10).Node("n-0").Phase("Running").Obj()));
  ev.push_back(Event("ADDED", Member("g", 1, "4").Priority(10).Node("n-1").Phase("Running").Obj()));
  ev.push_back(Event("ADDED", Member("e", 0, "4").Priority(10).Node("n-1").Phase("Running").Obj()));
  ev.push_back(Event("ADDED", Member("e", 1, "4").Priority(10).Node("n-0").Phase("Running").Obj()));
  h2.Apply(ev);
  h2.Apply(Json::array({Group("g", 2), Group("e", 1)}));
  const MakePod half = MakePod("half").Namespace("ml").Uid("half").Cpu("4").Priority(1000);
  const Json r2 = h2.Preempt(PreemptArgsMeta(half.Obj(), {{"n-0", {"g-0"}}}));
  INFO(r2.dump());
  REQUIRE(r2["NodeNameToMetaVictims"].contains("n-0"));
  const Json& pods = r2["NodeNameToMetaVictims"]["n-0"]["Pods"];
  REQUIRE(pods.size() == 1);
  CHECK(pods[0]["UID"] == "e-1");
}

// kube-scheduler preempts for one member at a time. A member of a gang that has not started is
// let preempt only where that alone lets the whole gang start; otherwise the node it freed goes
// to others before its gang finds the rest (node after node evicted for nothing).
TEST_CASE("gang: a member preempts only where that lets its whole gang start", "[gang][preempt]") {
  Harness h;
  AddNodes(h, "n", 2);
  Json events = Json::array();
  for (const std::string node : {"n-0", "n-1"}) {
    events.push_back(Event("ADDED", MakePod("low-" + node).Namespace("ml").Uid("low-" + node).Cpu("8")
                                        .Priority(10).Node(node).Phase("Running").Obj()));
  }
  h.Apply(events);
  const std::vector<MakePod> big = {Member("big", 0, "8").Priority(1000),
                                    Member("big", 1, "8").Priority(1000)};
  AddPods(h, big);
  h.Apply(Group("big", 2));
  const Json r = h.Preempt(PreemptArgsMeta(big[0].Obj(), {{"n-0", {"low-n-0"}}}));
  INFO(r.dump());
  CHECK(r["NodeNameToMetaVictims"].empty());
  // A pod still terminating elsewhere does not count (kube-scheduler would move on to preempt
  // the next node, and that room would go to others); once it is gone, the same proposal lets
  // the gang start.
  Json leaving = MakePod("low-n-1").Namespace("ml").Uid("low-n-1").Cpu("8").Priority(10)
                     .Node("n-1").Phase("Running").Obj();
  leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  h.Apply(Event("MODIFIED", leaving));
  CHECK(h.Preempt(PreemptArgsMeta(big[0].Obj(), {{"n-0", {"low-n-0"}}}))["NodeNameToMetaVictims"].empty());
  h.Apply(Event("DELETED", leaving));
  const Json r2 = h.Preempt(PreemptArgsMeta(big[0].Obj(), {{"n-0", {"low-n-0"}}}));
  INFO(r2.dump());
  REQUIRE(r2["NodeNameToMetaVictims"].contains("n-0"));
  CHECK(r2["NodeNameToMetaVictims"]["n-0"]["Pods"].size() == 1);
}

// Room reserved for a member that has not started does not count as the gang running: taking a
// bound member is judged against the members bound.
TEST_CASE("gang: preempt counts a gang's bound members, not its reserved ones", "[gang][preempt]") {
  Harness h(WithGangs([](policy::GangConfig& g) { g.freeze_window = absl::ZeroDuration(); }));
  const std::vector<std::string> nodes = AddNodes(h, "n", 3);
  const std::vector<MakePod> g = {Member("g", 0, "4").Priority(10), Member("g", 1, "4").Priority(10),
                                  Member("g", 2, "4").Priority(10)};
  AddPods(h, g);
  h.Apply(Group("g", 2));
  const std::string on = FilterAndBind(h, g[0], nodes);
  REQUIRE(!on.empty());
  REQUIRE(FilterAndBind(h, g[1], nodes) != "");
  // The third member gets room as an elastic member; it has not bound.
  REQUIRE(FilterPod(h, g[2], nodes).fit.size() == 1);
  REQUIRE(GangInfo(h, "g")["bound"] == 2);
  REQUIRE(GangInfo(h, "g")["reserved"] == 1);
  // Taking g-0 leaves one member running, below the minimum of 2 (the reserved one does not
  // count): spared, and nothing else on its node frees room: the node is dropped.
  const MakePod urgent = MakePod("urgent").Namespace("ml").Uid("urgent").Cpu("4").Priority(1000);
  const Json r = h.Preempt(PreemptArgsMeta(urgent.Obj(), {{on, {"g-0"}}}));
  INFO(r.dump());
  CHECK(r["NodeNameToMetaVictims"].empty());
}

// ---- topology (SPEC 6.3) -------------------------------------------------------------------------

// 2 zones x 2 spines x 2 leaves x 2 nodes of 8 CPUs: z{Z}-s{S}-l{L}-{N}.
std::vector<std::string> AddFabric(Harness& h) {
  Json events = Json::array();
  std::vector<std::string> names;
  for (int z = 0; z < 2; ++z)
    for (int s = 0; s < 2; ++s)
      for (int l = 0; l < 2; ++l)
        for (int n = 0; n < 2; ++n) {
          const std::string name = StrCat("z", z, "-s", s, "-l", l, "-", n);
          names.push_back(name);
          events.push_back(Event("ADDED", MakeNode(name).Cpu("8").Memory("32Gi").Pods(110)
                                              .Topology(StrCat("zone-", z), StrCat("spine-", z, s),
                                                        StrCat("leaf-", z, s, l))
                                              .Obj()));
        }
  h.Apply(events);
  return names;
}

// Fills a node with a running plain pod.
void Fill(Harness& h, const std::string& node, const std::string& cpu = "8") {
  h.Apply(Event("ADDED", MakePod("fill-" + node).Namespace("ml").Uid("fill-" + node).Cpu(cpu)
                             .Node(node).Phase("Running").Obj()));
}

TEST_CASE("topology: the gang goes to the smallest subtree that holds it", "[gang][topology]") {
  Harness h;
  const std::vector<std::string> nodes = AddFabric(h);
  // Four members of 4 CPUs: one leaf (2 nodes x 2) holds them: 2 hops.
  const std::vector<MakePod> job = Members("job", 4, "4");
  AddPods(h, job);
  h.Apply(Group("job", 4));
  for (const MakePod& m : job) REQUIRE(!FilterAndBind(h, m, nodes).empty());
  Json info = GangInfo(h, "job");
  INFO(info.dump());
  CHECK(info["placement"]["maxHops"] == 2);
  CHECK(info["placement"]["domain"].get<std::string>().find("leaf-") != std::string::npos);

  // Every leaf has at most one free node now (one per leaf filled): six members of 8 CPUs need
  // three nodes, which no leaf has, but a spine (4 nodes) has after filling: 4 hops.
  Harness t;
  const std::vector<std::string> fab = AddFabric(t);
  for (const std::string& n : fab) {
    if (n.back() == '0') Fill(t, n);  // node 0 of every leaf is full
  }
  const std::vector<MakePod> wide = Members("wide", 2, "8");
  AddPods(t, wide);
  t.Apply(Group("wide", 2));
  for (const MakePod& m : wide) REQUIRE(!FilterAndBind(t, m, fab).empty());
  info = GangInfo(t, "wide");
  INFO(info.dump());
  CHECK(info["placement"]["maxHops"] == 4);  // two leaves of one spine, never two zones
}

TEST_CASE("topology: berth.io/max-hops is a hard limit with a reason", "[gang][topology]") {
  Harness h;
  const std::vector<std::string> nodes = AddFabric(h);
  for (const std::string& n : nodes) {
    if (n.back() == '0') Fill(h, n);
  }
  std::vector<MakePod> job;
  for (int i = 0; i < 2; ++i) job.push_back(Member("job", i, "8").Annotation("berth.io/max-hops", "2"));
  AddPods(h, job);
  h.Apply(Group("job", 2));
  const Verdicts v = FilterPod(h, job[0], nodes);
  CHECK(v.fit.empty());
  CHECK(Contains(AnyReason(v), "gang ml/job: its 2 members fit only 4 hops apart; berth.io/max-hops is 2"));
  // Freeing a second node in one leaf lets it run within 2 hops.
  h.Apply(Event("DELETED", MakePod("fill-z1-s1-l1-0").Namespace("ml").Uid("fill-z1-s1-l1-0").Obj()));
  for (const MakePod& m : job) CHECK(FilterAndBind(h, m, nodes).rfind("z1-s1-l1-", 0) == 0);
  CHECK(GangInfo(h, "job")["placement"]["maxHops"] == 2);
}

TEST_CASE("topology: prioritize follows the plan", "[gang][topology]") {
  Harness h;
  const std::vector<std::string> nodes = AddFabric(h);
  const std::vector<MakePod> job = Members("job", 2, "8");
  AddPods(h, job);
  h.Apply(Group("job", 2));
  const std::string first = FilterAndBind(h, job[0], nodes);
  const std::string reserved = FilterPod(h, job[1], nodes).fit.at(0);
  const Json scores = h.Prioritize(ArgsNames(job[1].Obj(), nodes));
  std::map<std::string, int64_t> s = ScoresOf(scores);
  INFO(scores.dump());
  for (const std::string& n : nodes) {
    if (n != reserved) CHECK(s[reserved] > s[n]);
  }
  // Closer to the reserved node scores higher: same leaf > same spine > same zone > other zone.
  CHECK(s["z0-s0-l0-1"] >= s["z0-s0-l1-0"]);
  CHECK(s["z0-s0-l1-0"] > s["z1-s1-l1-1"]);
  (void)first;
}

TEST_CASE("gang: /debug/gangs as text", "[gang]") {
  Harness h;
  const std::vector<std::string> nodes = AddFabric(h);
  const std::vector<MakePod> job = Members("job", 2, "8");
  AddPods(h, job);
  h.Apply(Group("job", 2));
  FilterPod(h, job[0], nodes);
  const extender::Reply r = h.service().DebugGangs(true);
  INFO(r.body);
  CHECK(Contains(r.body, "NAMESPACE"));
  CHECK(Contains(r.body, "MAX-HOPS"));
  CHECK(Contains(r.body, "Reserved"));
  CHECK(Contains(r.body, "leaf-000"));
}

}  // namespace
}  // namespace berth::testing
