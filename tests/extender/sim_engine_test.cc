// berth simulate's engine: golden traces computed by hand, the baseline's placements, and each
// invariant firing on a configuration that breaks its rule on purpose.

#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "extender/config.h"
#include "extender/sim/engine.h"
#include "extender/sim/report.h"
#include "nlohmann/json.hpp"

namespace berth::extender::sim {
namespace {

using nlohmann::json;

json Node(const std::string& name, const std::string& cpu, const std::string& memory,
          const std::string& gpus = "0", json labels = json::object()) {
  labels["kubernetes.io/hostname"] = name;
  json alloc = {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}};
  if (gpus != "0") alloc["nvidia.com/gpu"] = gpus;
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"capacity", alloc}, {"allocatable", alloc}}}};
}

json PriorityClass(const std::string& name, int value) {
  return {{"apiVersion", "scheduling.k8s.io/v1"}, {"kind", "PriorityClass"},
          {"metadata", {{"name", name}}}, {"value", value}};
}

json Pool(const std::string& name, const std::string& label_value) {
  return {{"apiVersion", "berth.io/v1alpha1"}, {"kind", "Pool"}, {"metadata", {{"name", name}}},
          {"spec", {{"nodeSelector", {{"matchLabels", {{"pool", label_value}}}}}}}};
}

std::string List(std::vector<json> items) {
  for (auto [name, value] : {std::pair<const char*, int>{"berth-experiment", 10}, {"berth-offline", 100},
                             {"berth-normal", 1000}, {"berth-production", 10000}}) {
    items.push_back(PriorityClass(name, value));
  }
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump();
}

Job MakeJob(const std::string& name, int submit_s, int duration_s, std::map<std::string, std::string> requests,
            int count = 1) {
  Job j;
  j.name = name;
  j.submit = absl::Seconds(submit_s);
  j.duration = absl::Seconds(duration_s);
  PodTemplate t;
  t.count = count;
  t.requests = std::move(requests);
  j.pods.push_back(t);
  return j;
}

SimOptions Options(std::string cluster, std::vector<Job> jobs) {
  SimOptions o;
  o.cluster_json = std::move(cluster);
  o.cluster_source = "cluster.json";
  o.workload.name = "test";
  o.workload.jobs = std::move(jobs);
  o.workload_source = "workload.yaml";
  o.sample_interval = absl::Seconds(10);
  return o;
}

Config ParsedConfig(const std::string& text) {
  absl::StatusOr<Config> c = ParseConfig(text, "config.json");
  REQUIRE(c.ok());
  return *c;
}

const JobOutcome& Find(const RunMetrics& m, const std::string& name) {
  for (const JobOutcome& j : m.jobs) {
    if (j.name == "default/" + name) return j;
  }
  FAIL("no job " << name);
  return m.jobs.front();
}

const InvariantResult& Invariant(const RunMetrics& m, const std::string& name) {
  for (const InvariantResult& r : m.invariants) {
    if (r.name == name) return r;
  }
  FAIL("no invariant " << name);
  return m.invariants.front();
}

int64_t TotalViolations(const RunMetrics& m) {
  int64_t n = 0;
  for (const InvariantResult& r : m.invariants) n += r.violations;
  return n;
}

// Two nodes: n1 has 4 CPUs and 8Gi, n2 2 CPUs and 16Gi. Jobs a (2 CPUs, 100 s, at 0), b (3 CPUs,
// 50 s, at 10) and c (2 CPUs, 30 s, at 20, only on n2).
//
// kube-scheduler alone scores by least allocated:
//   t=0   a starts on n1 (n1 keeps 50% of its CPUs free, n2 would keep none).
//   t=10  b fits no node: n1 has 2 CPUs free, n2 2 in all.
//   t=20  c starts on n2; it ends at 50, and b still fits nowhere.
//   t=100 a ends; b starts on n1 and ends at 150.
//
// berth (weight 20) packs: its bin-packing score outweighs least-allocated.
//   t=0   a starts on n2, which it fills.
//   t=10  b starts on n1 (4 CPUs free), and ends at 60.
//   t=20  c (only n2) waits for a.
//   t=100 a ends; c starts on n2 and ends at 130.
struct Expected {
  std::string job;
  double start, end;
  std::string node;
};

void CheckTrace(const RunMetrics& m, const std::vector<Expected>& expected, double makespan) {
  INFO(m.world);
  for (const Expected& e : expected) {
    INFO(e.job);
    const JobOutcome& j = Find(m, e.job);
    CHECK(j.start == e.start);
    CHECK(j.end == e.end);
    CHECK(j.nodes == std::vector<std::string>{e.node});
  }
  CHECK(m.makespan == makespan);
  CHECK(m.jobs_completed == 3);
  CHECK(m.pods_started == 3);
  CHECK(TotalViolations(m) == 0);
}

TEST_CASE("simulate: a golden trace, computed by hand, through berth and the baseline", "[sim]") {
  std::vector<Job> jobs = {MakeJob("a", 0, 100, {{"cpu", "2"}, {"memory", "1Gi"}}),
                           MakeJob("b", 10, 50, {{"cpu", "3"}, {"memory", "1Gi"}}),
                           MakeJob("c", 20, 30, {{"cpu", "2"}, {"memory", "1Gi"}})};
  jobs[2].pods[0].node_selector = {{"kubernetes.io/hostname", "n2"}};
  SimOptions o = Options(List({Node("n1", "4", "8Gi"), Node("n2", "2", "16Gi")}), jobs);
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  CheckTrace(r->baseline, {{"a", 0, 100, "n1"}, {"b", 100, 150, "n1"}, {"c", 20, 50, "n2"}}, 150);
  CheckTrace(r->berth, {{"a", 0, 100, "n2"}, {"b", 10, 60, "n1"}, {"c", 100, 130, "n2"}}, 130);
  // CPU utilisation at t=30 (the fourth sample, every 10 s) of the 6 CPUs: a and c (baseline),
  // a and b (berth).
  REQUIRE(r->baseline.times.size() > 4);
  CHECK(r->baseline.times[3] == 30);
  CHECK(r->baseline.utilisation.at("cpu")[3] == Approx(4.0 / 6.0));
  CHECK(r->berth.utilisation.at("cpu")[3] == Approx(5.0 / 6.0));
  CHECK(r->berth.verb_calls.at("filter") > 0);
  CHECK(r->berth.verb_calls.at("bind") == 3);
  CHECK(r->baseline.verb_calls.empty());
}

// Job x takes one of two 4-GPU nodes for 100 s; a gang of two 4-GPU members (timeout 60 s)
// arrives at t=1. kube-scheduler alone binds one member to the free node at once, and it waits
// there, partially bound, until x ends: past the gang's timeout. berth binds no member until both
// can go, at t=100.
TEST_CASE("simulate: a gang is never partially bound by berth, and is by the baseline", "[sim]") {
  Job x = MakeJob("x", 0, 100, {{"cpu", "1"}, {"nvidia.com/gpu", "4"}});
  Job gang = MakeJob("gang", 1, 100, {{"cpu", "1"}, {"nvidia.com/gpu", "4"}}, 2);
  gang.min_member = 2;
  gang.schedule_timeout_seconds = 60;
  SimOptions o = Options(List({Node("g1", "8", "64Gi", "4"), Node("g2", "8", "64Gi", "4")}), {x, gang});
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  for (const RunMetrics* m : {&r->berth, &r->baseline}) {
    INFO(m->world);
    CHECK(Find(*m, "gang").start == 100);
    CHECK(Find(*m, "gang").end == 200);
    CHECK(m->makespan == 200);
  }
  CHECK(Invariant(r->berth, "gang-partial-timeout").violations == 0);
  CHECK(r->berth.partial_gangs_stuck == 0);
  CHECK(r->baseline.partial_gangs_stuck == 1);
  CHECK(Invariant(r->baseline, "gang-partial-timeout").violations == 1);
  CHECK(Invariant(r->baseline, "gang-partial-timeout").first_time == 61);
  CHECK_THAT(Invariant(r->baseline, "gang-partial-timeout").first_example,
             Catch::Contains("default/gang: 1 of minMember 2 bound since t=1s"));
  // The gang samples: partial in the baseline from t=1 to t=100, never in berth.
  int berth_partial = 0, baseline_partial = 0;
  for (const GangCounts& g : r->berth.gangs) berth_partial += g.partial;
  for (const GangCounts& g : r->baseline.gangs) baseline_partial += g.partial;
  CHECK(berth_partial == 0);
  CHECK(baseline_partial == 10);  // samples at 10, 20, ..., 100 (before the member binds at 100)
  // At t=50 the baseline's waiting member holds half of the GPUs: they count as utilisation, not
  // as useful utilisation. berth holds none for the gang.
  REQUIRE(r->baseline.times.size() > 5);
  CHECK(r->baseline.times[5] == 50);
  CHECK(r->baseline.utilisation.at("nvidia.com/gpu")[5] == Approx(1.0));
  CHECK(r->baseline.useful_utilisation.at("nvidia.com/gpu")[5] == Approx(0.5));
  CHECK(r->berth.utilisation.at("nvidia.com/gpu")[5] == Approx(0.5));
  CHECK(r->berth.useful_utilisation.at("nvidia.com/gpu")[5] == Approx(0.5));
  // The demand then: x's 4 GPUs and the gang's 8 (bound or waiting) of the cluster's 8, so work
  // waits in both worlds. Completed work is the same: x's 4 GPUs for 100 s and the gang's 8 for
  // 100 s from its start; the baseline member bound idle since t=1 adds nothing.
  for (const RunMetrics* m : {&r->berth, &r->baseline}) {
    INFO(m->world);
    CHECK(m->gpu_demand[5] == Approx(1.5));
    CHECK(m->gpu_hours_completed == Approx((4 * 100 + 8 * 100) / 3600.0));
    // Work waits at the samples from t=10 to t=100 (taken before the binds at 100): 100 s of 200.
    CHECK(Summarize(*m, SimInfo{}).waiting_share == Approx(0.5));
  }
  // berth holds no room for the gang while x runs (both members would need a node each).
  for (double held : r->berth.held_gpus) CHECK(held == 0);
}

// Two queues of equal weight share a 4-CPU node: queue a runs 3 CPUs and queue b, which wants
// only 1, runs 1. Neither queue can be given more than it asked for, so each is exactly at its
// fair share (0.75 and 0.25 of the usage), not at half each.
TEST_CASE("simulate: a queue's fair share is capped by what it asks for", "[sim]") {
  Job a = MakeJob("a", 0, 1000, {{"cpu", "3"}});
  a.queue = "a";
  Job b = MakeJob("b", 0, 1000, {{"cpu", "1"}});
  b.queue = "b";
  json qa = {{"apiVersion", "berth.io/v1alpha1"}, {"kind", "Queue"}, {"metadata", {{"name", "a"}}}, {"spec", {{"weight", 1}}}};
  json qb = qa;
  qb["metadata"]["name"] = "b";
  SimOptions o = Options(List({Node("n1", "4", "8Gi"), qa, qb}), {a, b});
  o.max_time = absl::Seconds(100);
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  for (const RunMetrics* m : {&r->berth, &r->baseline}) {
    INFO(m->world);
    REQUIRE(m->times.size() > 5);
    CHECK(m->queue_share.at("a")[5] == Approx(0.75));
    CHECK(m->queue_fair_share.at("a")[5] == Approx(0.75));
    CHECK(m->queue_fair_share.at("b")[5] == Approx(0.25));
    CHECK(Summarize(*m, r->info).fairness_error == Approx(0).margin(1e-9));
  }
}

TEST_CASE("simulate: over-commit fires when every fit check is off", "[sim]") {
  std::vector<Job> jobs = {MakeJob("a", 0, 100, {{"cpu", "2"}}), MakeJob("b", 1, 100, {{"cpu", "2"}})};
  SimOptions o = Options(List({Node("n1", "3", "8Gi")}), jobs);
  o.run_baseline = false;
  {
    absl::StatusOr<SimResult> r = RunSimulation(o);
    REQUIRE(r.ok());
    CHECK(Invariant(r->berth, "no-overcommit").violations == 0);
  }
  o.break_rules.emplace(kBreakInTreeFit);
  o.config = ParsedConfig(R"({"policies": {"filters": [], "admission": [], "preempt": [], "reclaim": []}})");
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  const InvariantResult& v = Invariant(r->berth, "no-overcommit");
  CHECK(v.violations == 1);
  CHECK_THAT(v.first_example, Catch::Contains("node n1: cpu requested 4 > allocatable 3"));
  CHECK(v.first_time == 1);
}

TEST_CASE("simulate: partial gangs fire when berth's gang modules are off", "[sim]") {
  Job gang = MakeJob("gang", 0, 100, {{"cpu", "1"}, {"nvidia.com/gpu", "4"}}, 3);
  gang.min_member = 3;
  gang.schedule_timeout_seconds = 60;
  SimOptions o = Options(List({Node("g1", "8", "64Gi", "4"), Node("g2", "8", "64Gi", "4")}), {gang});
  o.max_time = absl::Minutes(10);
  o.run_baseline = false;
  o.config = ParsedConfig(R"({"policies": {"filters": ["resource-fit"], "admission": ["queue"]}})");
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  CHECK(Invariant(r->berth, "gang-partial-timeout").violations == 1);
  CHECK(Invariant(r->berth, "gang-partial-timeout").first_time == 60);
}

TEST_CASE("simulate: berth's model losing pod deletions fires capacity-double", "[sim]") {
  std::vector<Job> jobs = {MakeJob("a", 0, 10, {{"cpu", "1"}})};
  SimOptions o = Options(List({Node("n1", "4", "8Gi")}), jobs);
  o.run_baseline = false;
  o.break_rules.emplace(kBreakPodDeletes);
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  const InvariantResult& v = Invariant(r->berth, "capacity-double");
  CHECK(v.violations == 1);
  CHECK(v.first_time == 10);
  CHECK_THAT(v.first_example, Catch::Contains("node n1: berth counts cpu used 1, the cluster 0"));
}

// A production pod fills the only node; a pod of a higher class than production arrives.
// kube-scheduler proposes the production pod as the victim; berth's preempt review refuses it.
TEST_CASE("simulate: production pods preempted fire when berth's preempt review is off", "[sim]") {
  Job prod = MakeJob("prod", 0, 1000, {{"cpu", "4"}});
  prod.priority_class = "berth-production";
  Job top = MakeJob("top", 10, 100, {{"cpu", "4"}});
  top.priority_class = "top";
  const std::string cluster = List({Node("n1", "4", "8Gi"), PriorityClass("top", 100000)});
  SimOptions o = Options(cluster, {prod, top});
  o.run_baseline = false;
  o.max_time = absl::Minutes(5);
  {
    absl::StatusOr<SimResult> r = RunSimulation(o);
    REQUIRE(r.ok());
    CHECK(Invariant(r->berth, "production-preempted").violations == 0);
    CHECK(Find(r->berth, "top").start == -1);
  }
  o.config = ParsedConfig(R"({"policies": {"preempt": []}})");
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  const InvariantResult& v = Invariant(r->berth, "production-preempted");
  CHECK(v.violations == 1);
  CHECK_THAT(v.first_example, Catch::Contains("production pod default/prod-worker-0"));
  CHECK(Find(r->berth, "top").start == 40);  // the victim's 30 s grace period, then it binds
}

// kube-scheduler's nominator forgets a pod once it is bound: the room it kept on the node for the
// preemptor is not kept again after the preemptor ends. One node of 4 CPUs; `low` (offline,
// 1000 s) runs from 0; `high` (normal, 100 s) arrives at 10, preempts it, binds at 40 after the
// victim's 30 s grace and ends at 140. The replacement of `low` then starts at 140 and ends at 1140.
TEST_CASE("simulate: a preemptor's nomination ends when it binds", "[sim]") {
  Job low = MakeJob("low", 0, 1000, {{"cpu", "4"}});
  low.priority_class = "berth-offline";
  Job high = MakeJob("high", 10, 100, {{"cpu", "4"}});
  high.priority_class = "berth-normal";
  SimOptions o = Options(List({Node("n1", "4", "8Gi")}), {low, high});
  o.max_time = absl::Hours(1);
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  for (const RunMetrics* m : {&r->berth, &r->baseline}) {
    INFO(m->world);
    CHECK(Find(*m, "high").start == 40);
    CHECK(Find(*m, "high").end == 140);
    CHECK(Find(*m, "low").end == 1140);
    CHECK(m->jobs_completed == 2);
  }
}

// A gang of two (min 2) holds both nodes; a higher-priority pod needs one node. kube-scheduler
// proposes one member; berth's gang review drops that (the gang would fall below its minimum).
TEST_CASE("simulate: gangs below minMember fire when berth's gang preempt review is off", "[sim]") {
  Job gang = MakeJob("gang", 0, 1000, {{"cpu", "4"}}, 2);
  gang.min_member = 2;
  gang.priority_class = "berth-offline";
  Job urgent = MakeJob("urgent", 10, 100, {{"cpu", "4"}});
  urgent.priority_class = "berth-normal";
  SimOptions o = Options(List({Node("n1", "4", "8Gi"), Node("n2", "4", "8Gi")}), {gang, urgent});
  o.run_baseline = false;
  o.max_time = absl::Minutes(5);
  // Pool reclaim is off here: today it may take a gang member below the minimum too (the
  // simulator finds it with reclaim on; docs/simulate.md), and this test is about preempt.
  o.config = ParsedConfig(R"({"policies": {"reclaim": []}})");
  {
    absl::StatusOr<SimResult> r = RunSimulation(o);
    REQUIRE(r.ok());
    CHECK(Invariant(r->berth, "gang-below-min").violations == 0);
    CHECK(Find(r->berth, "urgent").start == -1);
  }
  o.config = ParsedConfig(R"({"policies": {"reclaim": [], "preempt": ["pools", "resource-fit"]}})");
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  const InvariantResult& v = Invariant(r->berth, "gang-below-min");
  CHECK(v.violations == 1);
  CHECK_THAT(v.first_example, Catch::Contains("gang default/gang with 1 of its minMember 2"));
}

// Seed 004: a borrower from pool cpu holds the gpu pool's only node; an in-pool pod of lower
// priority arrives. berth reclaims the node (kube-scheduler's preemption cannot: the borrower has
// the higher priority). With reclaim off, the in-pool pod waits behind the borrower.
TEST_CASE("simulate: pods waiting behind borrowers fire when reclaim is off", "[sim]") {
  Job borrower = MakeJob("borrower", 0, 3600, {{"cpu", "4"}});
  borrower.pool = "cpu";
  borrower.priority_class = "berth-normal";
  Job inpool = MakeJob("inpool", 10, 100, {{"cpu", "4"}});
  inpool.pool = "gpu";
  inpool.priority_class = "berth-offline";
  const std::string cluster =
      List({Node("c1", "4", "8Gi", "0", {{"pool", "cpu"}}), Node("g1", "4", "8Gi", "0", {{"pool", "gpu"}}),
            Pool("cpu", "cpu"), Pool("gpu", "gpu")});
  // The cpu node is busy first, so the borrower goes to the gpu pool.
  Job busy = MakeJob("busy", 0, 3600, {{"cpu", "4"}});
  busy.pool = "cpu";
  busy.priority_class = "berth-normal";
  busy.pods[0].node_selector = {{"kubernetes.io/hostname", "c1"}};
  borrower.submit = absl::Seconds(1);
  SimOptions o = Options(cluster, {busy, borrower, inpool});
  o.run_baseline = false;
  o.max_time = absl::Minutes(30);
  {
    absl::StatusOr<SimResult> r = RunSimulation(o);
    REQUIRE(r.ok());
    CHECK(Find(r->berth, "borrower").nodes == std::vector<std::string>{"g1"});
    CHECK(Invariant(r->berth, "pool-borrowers").violations == 0);
    // The borrower went by berth's reclaim (the cause is read from berth's reason), and its run
    // is lost: it restarts.
    REQUIRE(r->berth.evictions.size() == 1);
    CHECK(r->berth.evictions[0].cause == "reclaim");
    CHECK(r->berth.evictions[0].pods == 1);
    CHECK(Find(r->berth, "borrower").restarts == 1);
    CHECK(Find(r->berth, "inpool").start > 10);
    CHECK(Find(r->berth, "inpool").start < 100);
  }
  o.config = ParsedConfig(R"({"policies": {"reclaim": []}})");
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  const InvariantResult& v = Invariant(r->berth, "pool-borrowers");
  CHECK(v.violations == 1);
  CHECK_THAT(v.first_example, Catch::Contains("pod default/inpool-worker-0 of pool gpu"));
  CHECK(Find(r->berth, "inpool").start == -1);
}

// Virtual time drives berth's own timers: queue a's two jobs fill the node at t=0 with a
// berth.io/lifetime of 60 s; queue b's job arrives at t=10 and waits under its fair share. At
// the admission tick of t=60 the lifetimes have passed, berth evicts one of a's pods for fair
// share, the pod's 30 s grace period ends at t=90, and b starts then.
TEST_CASE("simulate: lifetimes and fair-share evictions run on the simulated clock", "[sim]") {
  Job a1 = MakeJob("a1", 0, 3600, {{"cpu", "2"}});
  Job a2 = MakeJob("a2", 0, 3600, {{"cpu", "2"}});
  for (Job* j : {&a1, &a2}) {
    j->queue = "a";
    j->lifetime = absl::Seconds(60);
  }
  Job b = MakeJob("b", 10, 100, {{"cpu", "2"}});
  b.queue = "b";
  json qa = {{"apiVersion", "berth.io/v1alpha1"}, {"kind", "Queue"}, {"metadata", {{"name", "a"}}}, {"spec", {{"weight", 1}}}};
  json qb = qa;
  qb["metadata"]["name"] = "b";
  SimOptions o = Options(List({Node("n1", "4", "8Gi"), qa, qb}), {a1, a2, b});
  o.run_baseline = false;
  o.max_time = absl::Minutes(10);
  // The same with every admission tick run (no idle ticks skipped): the same decisions.
  for (absl::Duration idle : {absl::Seconds(10), absl::Seconds(1)}) {
    o.idle_tick = idle;
    absl::StatusOr<SimResult> r = RunSimulation(o);
    REQUIRE(r.ok());
    CHECK(Find(r->berth, "b").start == 90);
    int64_t fair_share = 0;
    for (const EvictionCount& e : r->berth.evictions) fair_share += e.cause == "fair-share" ? e.pods : 0;
    CHECK(fair_share == 1);
    // Ticks run while a pod waits: b from t=10, then the evicted pod's replacement until b ends
    // at t=190 and frees its room. Skipping idle ticks runs fewer of them.
    if (idle == absl::Seconds(1)) {
      CHECK(r->berth.verb_calls.at("tick") == 181);
    } else {
      CHECK(r->berth.verb_calls.at("tick") < 181);
    }
  }
}

// Node events: n2 is added at t=50 and takes the pod waiting for room; n1 is drained at t=100
// (its pod is evicted, keeps its room for the 30 s grace period, and its replacement runs on n2
// from t=130... if n2 has room: it has 4 CPUs, one pod of 2 already); n2 fails at t=200 (its pods
// are gone at once and wait, as no node is left).
TEST_CASE("simulate: nodes added, drained and failed at given times", "[sim]") {
  std::vector<Job> jobs = {MakeJob("a", 0, 1000, {{"cpu", "2"}}), MakeJob("b", 10, 1000, {{"cpu", "2"}}),
                           MakeJob("c", 20, 1000, {{"cpu", "2"}})};
  SimOptions o = Options(List({Node("n1", "4", "8Gi")}), jobs);
  NodeEvent add{.at = absl::Seconds(50), .action = NodeEvent::Action::kAdd, .node = "n2",
                .allocatable = {{"cpu", "4"}, {"memory", "8Gi"}}, .labels = {{"kubernetes.io/hostname", "n2"}}};
  NodeEvent drain{.at = absl::Seconds(100), .action = NodeEvent::Action::kDrain, .node = "n1"};
  NodeEvent fail{.at = absl::Seconds(200), .action = NodeEvent::Action::kFail, .node = "n2"};
  o.workload.node_events = {add, drain, fail};
  o.max_time = absl::Seconds(300);
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  for (const RunMetrics* m : {&r->berth, &r->baseline}) {
    INFO(m->world);
    // a and b fill n1; c waits for n2.
    CHECK(Find(*m, "c").start == 50);
    CHECK(Find(*m, "c").nodes == std::vector<std::string>{"n2"});
    int64_t drained = 0, failed = 0;
    for (const EvictionCount& e : m->evictions) {
      if (e.cause == "drain") drained = e.pods;
      if (e.cause == "node-failure") failed = e.pods;
    }
    CHECK(drained == 2);  // a and b
    // After the drain, one replacement fits on n2 beside c (at t=130, when the drained pods are
    // gone); the failure of n2 takes c and that replacement.
    CHECK(failed == 2);
    CHECK(m->pods_started == 4);
    REQUIRE(!m->utilisation.at("cpu").empty());
    CHECK(m->utilisation.at("cpu").back() == 0);  // no schedulable node is left
    CHECK(TotalViolations(*m) == 0);
  }
}

// With nothing happening in the cluster, a pod that fits nowhere is tried again only when it has
// waited 5 minutes in kube-scheduler's unschedulable list, checked every 30 s: at t=0, 330, 660
// and 990 in a 20-minute run. berth does not nudge it although its queue admits it: the in-tree
// filters refused it before berth was asked, so no answer of berth's holds it back.
TEST_CASE("simulate: an unschedulable pod is retried every five minutes when nothing happens", "[sim]") {
  SimOptions o = Options(List({Node("n1", "4", "8Gi")}), {MakeJob("big", 0, 100, {{"cpu", "8"}})});
  o.max_time = absl::Minutes(20);
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  CHECK(r->baseline.scheduling_attempts == 4);
  CHECK(r->berth.scheduling_attempts == 4);
  CHECK(Find(r->baseline, "big").start == -1);
}

// Pods of the cluster file: a service of another scheduler bound to n1 only takes room; a pending
// berth pod of queue b is scheduled like any other and runs for ever. Queue shares count berth's
// pods only: b's 1 CPU against a's 2. (Without Queue objects for a and b, berth would hold both
// pods back: a queue nobody created waits, QueueUnknown.)
TEST_CASE("simulate: pods of the cluster file take room and are scheduled", "[sim]") {
  auto pod = [](const std::string& name, const std::string& scheduler, const std::string& node,
                json labels) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", name}, {"labels", labels}}},
              {"spec", {{"schedulerName", scheduler},
                        {"containers", {{{"name", "main"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}},
              {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
    if (!node.empty()) p["spec"]["nodeName"] = node;
    return p;
  };
  auto queue = [](const std::string& name) {
    return json{{"apiVersion", "berth.io/v1alpha1"}, {"kind", "Queue"}, {"metadata", {{"name", name}}}};
  };
  const std::string cluster =
      List({Node("n1", "4", "8Gi"), queue("a"), queue("b"), pod("svc", "default-scheduler", "n1", json::object()),
            pod("waiting", "berth-scheduler", "", {{"berth.io/queue", "b"}})});
  Job a = MakeJob("a", 0, 100, {{"cpu", "2"}});
  a.queue = "a";
  SimOptions o = Options(cluster, {a});
  absl::StatusOr<SimResult> r = RunSimulation(o);
  REQUIRE(r.ok());
  for (const RunMetrics* m : {&r->berth, &r->baseline}) {
    INFO(m->world);
    REQUIRE(m->times.size() > 2);
    CHECK(m->times[1] == 10);
    CHECK(m->utilisation.at("cpu")[1] == Approx(1.0));  // svc, waiting and a: 4 of 4 CPUs
    CHECK(m->pending_pods[1] == 0);
    CHECK(m->queue_share.at("b")[1] == Approx(1.0 / 3.0));
    CHECK(m->queue_share.at("a")[1] == Approx(2.0 / 3.0));
    CHECK(m->queue_share.at("b").back() == Approx(1.0));  // a has ended
    CHECK(Find(*m, "a").start == 0);
    CHECK(m->jobs_completed == 1);
  }
}

TEST_CASE("simulate: a job naming an unknown PriorityClass is refused with the job named", "[sim]") {
  Job j = MakeJob("a", 0, 10, {{"cpu", "1"}});
  j.priority_class = "gold";
  absl::StatusOr<SimResult> r = RunSimulation(Options(List({Node("n1", "4", "8Gi")}), {j}));
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) ==
        "workload.yaml: jobs[0] (a): priorityClass \"gold\" is not a PriorityClass of the cluster (cluster.json)");
}

}  // namespace
}  // namespace berth::extender::sim
