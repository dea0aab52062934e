// The ETA forecast (issue 18 part 1) against hand-computed timelines: running pods end at the
// end their annotation, activeDeadlineSeconds or queue median gives, and a waiting job starts
// when the room it needs is free. Through the real interfaces: the runner `berth serve` runs,
// /debug/explain, /debug/queues, /metrics and the annotation writer.

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "core/strings.h"
#include "extender/config.h"
#include "extender/eta.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/sim/eta_runner.h"
#include "extender/sim/forecast.h"
#include "policy/forecast/run_time.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"

namespace berth::testing {
namespace {

// Every timeline starts here.
const absl::Time kT0 = absl::FromUnixSeconds(1'767'229'200);  // 2026-01-01T01:00:00Z

std::string At(absl::Duration from_t0) {
  return absl::FormatTime(absl::RFC3339_sec, kT0 + from_t0, absl::UTCTimeZone());
}

void StartAtT0(Harness& h) { h.clock().Advance(kT0 - h.clock().Now()); }

// Two 8-GPU nodes on one leaf.
Json TwoNodes() {
  return Json::array({Event("ADDED", MakeNode("n1").Cpu("64").Memory("256Gi").Gpu(8).Pods(110)
                                         .Topology("zone-a", "spine-a1", "leaf-a1-2").Obj()),
                      Event("ADDED", MakeNode("n2").Cpu("64").Memory("256Gi").Gpu(8).Pods(110)
                                         .Topology("zone-a", "spine-a1", "leaf-a1-2").Obj())});
}

MakePod Running(const std::string& ns, const std::string& name, const std::string& node, absl::Duration started_before_t0) {
  return MakePod(name).Namespace(ns).Cpu("8").Gpu(8).Node(node).Phase("Running")
      .Created(At(-started_before_t0 - absl::Minutes(1))).Started(At(-started_before_t0));
}

extender::Config EtaConfig() {
  extender::Config c;
  c.eta_interval = absl::Seconds(60);
  return c;
}

// A hand-computed start: at T0 + `at`, or within kube-scheduler's retry (30 s) after it.
void CheckStartsAt(const extender::JobEta& e, absl::Duration at) {
  REQUIRE(e.start.has_value());
  const absl::Duration wait = *e.start - kT0;
  INFO(e.job << " starts at T0+" << absl::FormatDuration(wait));
  CHECK(wait >= at);
  CHECK(wait <= at + absl::Seconds(30));
}

const extender::JobEta& EtaOfJob(const extender::Forecast& f, const std::string& job) {
  const extender::JobEta* e = f.ForJob(job);
  INFO(job);
  REQUIRE(e != nullptr);
  return *e;
}

TEST_CASE("eta: a gang waits for the two jobs that hold its nodes, and starts when the later ends", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  // x ends at T0+30m by its annotation, y at T0+40m by activeDeadlineSeconds.
  Json y = Running("team-b", "y-0", "n2", absl::Minutes(20)).Obj();
  y["spec"]["activeDeadlineSeconds"] = 3600;
  h.Apply(Json::array({Event("ADDED", Running("team-a", "x-0", "n1", absl::Minutes(10))
                                          .Annotation("berth.io/expected-duration", "40m").Obj()),
                       Event("ADDED", y),
                       Event("ADDED", MakePodGroup("z").Namespace("team-c").MinMember(2).Obj()),
                       Event("ADDED", MakePod("z-0").Namespace("team-c").Gang("z").Cpu("8").Gpu(8)
                                          .Annotation("berth.io/expected-duration", "2h").Created(At(-absl::Minutes(5))).Obj()),
                       Event("ADDED", MakePod("z-1").Namespace("team-c").Gang("z").Cpu("8").Gpu(8)
                                          .Annotation("berth.io/expected-duration", "2h").Created(At(-absl::Minutes(5))).Obj())}));
  const uint64_t generation = h.model().Read()->generation();
  const std::string snapshot = h.service().DebugSnapshot(false).body;

  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(runner.RunPass().ok());
  // The forecast works on a copy: the live model is as it was.
  CHECK(h.model().Read()->generation() == generation);
  CHECK(h.service().DebugSnapshot(false).body == snapshot);

  std::shared_ptr<const extender::Forecast> f = h.service().forecast();
  REQUIRE(f != nullptr);
  CHECK(f->running_jobs == 2);
  CHECK(f->running_unknown == 0);
  REQUIRE(f->jobs.size() == 1);
  const extender::JobEta& z = EtaOfJob(*f, "team-c/z");
  CHECK(z.gang);
  // Hand-computed: y's end at T0+40m frees n2; kube-scheduler's retry follows within its backoff.
  CheckStartsAt(z, absl::Minutes(40));
  std::vector<std::string> nodes = z.nodes;
  std::sort(nodes.begin(), nodes.end());
  CHECK(nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(z.domain_level == "berth.io/leaf");
  CHECK(z.domain == "zone-a/spine-a1/leaf-a1-2");
  REQUIRE(z.after.size() == 2);
  CHECK(z.after[0].job == "team-b/y-0");
  CHECK(z.after[0].end == kT0 + absl::Minutes(40));
  CHECK(z.after[0].source == policy::RunTimeSource::kActiveDeadline);
  CHECK(z.after[1].job == "team-a/x-0");
  CHECK(z.after[1].end == kT0 + absl::Minutes(30));
  CHECK(z.after[1].source == policy::RunTimeSource::kAnnotation);
  CHECK(z.Basis() == policy::RunTimeSource::kActiveDeadline);
  CHECK(z.run.source == policy::RunTimeSource::kAnnotation);
  CHECK(z.run.duration == absl::Hours(2));

  // /debug/explain, text and JSON.
  const extender::Reply text = h.service().DebugExplain("team-c/z-1", true);
  INFO(text.body);
  CHECK(text.body.find("eta       expected to start in about 40 min, on leaf zone-a/spine-a1/leaf-a1-2, "
                       "after jobs team-b/y-0 and team-a/x-0 finish (expected ends from: activeDeadlineSeconds)") !=
        std::string::npos);
  const Json explain = ParseReply(h.service().DebugExplain("team-c/z-0", false));
  CHECK(explain["eta"]["job"] == "team-c/z");
  CHECK(explain["eta"]["basis"] == "activeDeadlineSeconds");
  CHECK(explain["eta"]["domain"]["path"] == "zone-a/spine-a1/leaf-a1-2");
  CHECK(explain["eta"]["after"][0]["end"] == At(absl::Minutes(40)));
  CHECK(explain["eta"]["waitSeconds"].get<double>() >= 2400);

  // /debug/queues: the job's row carries it.
  const Json queues = ParseReply(h.service().DebugQueues(false));
  bool found = false;
  for (const Json& j : queues["jobs"]) {
    if (j["job"] != "team-c/z") continue;
    found = true;
    CHECK(j["eta"]["start"] == explain["eta"]["start"]);
  }
  CHECK(found);
  CHECK(h.service().DebugQueues(true).body.find("40 min") != std::string::npos);

  // /metrics: one predicted wait, in the bucket up to an hour, and the pass counted.
  const std::string metrics = h.service().Metrics().body;
  INFO(metrics);
  CHECK(metrics.find("berth_eta_predicted_wait_seconds_bucket{le=\"1800\"} 0") != std::string::npos);
  CHECK(metrics.find("berth_eta_predicted_wait_seconds_bucket{le=\"3600\"} 1") != std::string::npos);
  CHECK(metrics.find("berth_eta_predicted_wait_seconds_count 1") != std::string::npos);
  CHECK(metrics.find("berth_eta_passes_total 1") != std::string::npos);
  CHECK(metrics.find("berth_eta_unknown_jobs 0") != std::string::npos);
}

TEST_CASE("eta: a gang that started before the pass ends its run time after its last needed member started", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  // g started when its second member did, 10 min before T0, and runs 30 min: it ends at T0+20m
  // (counting from its first member would say T0+18m).
  h.Apply(Json::array({Event("ADDED", MakePodGroup("g").Namespace("team-a").MinMember(2).Obj()),
                       Event("ADDED", Running("team-a", "g-0", "n1", absl::Minutes(12)).Gang("g")
                                          .Annotation("berth.io/expected-duration", "30m").Obj()),
                       Event("ADDED", Running("team-a", "g-1", "n2", absl::Minutes(10)).Gang("g")
                                          .Annotation("berth.io/expected-duration", "30m").Obj()),
                       Event("ADDED", MakePod("w-0").Namespace("team-b").Cpu("8").Gpu(8)
                                          .Annotation("berth.io/expected-duration", "1h").Created(At(-absl::Minutes(2))).Obj())}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(runner.RunPass().ok());
  std::shared_ptr<const extender::Forecast> f = h.service().forecast();
  REQUIRE(f != nullptr);
  CHECK(f->running_jobs == 1);
  const extender::JobEta& w = EtaOfJob(*f, "team-b/w-0");
  CHECK_FALSE(w.running);
  CheckStartsAt(w, absl::Minutes(20));
  REQUIRE(w.after.size() == 1);
  CHECK(w.after[0].job == "team-a/g");
  CHECK(w.after[0].end == kT0 + absl::Minutes(20));
}

TEST_CASE("eta: a pass told of a later arrival that goes first (the accuracy study's) starts the waiting job after it", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  // a ends at T0+30m and b at T0+60m; both at a priority the arrival cannot preempt. w waits at 10.
  h.Apply(Json::array({Event("ADDED", MakePriorityClass("low", 10).Obj()),
                       Event("ADDED", MakePriorityClass("high", 1000).Obj()),
                       Event("ADDED", Running("default", "a", "n1", absl::Minutes(10)).Priority(1000)
                                          .Annotation("berth.io/expected-duration", "40m").Obj()),
                       Event("ADDED", Running("default", "b", "n2", absl::Minutes(10)).Priority(1000)
                                          .Annotation("berth.io/expected-duration", "70m").Obj()),
                       Event("ADDED", MakePod("w").Cpu("8").Gpu(8).Priority(10)
                                          .Annotation("berth.io/expected-duration", "1h").Created(At(-absl::Minutes(2))).Obj())}));
  extender::sim::Job later{.name = "later", .submit = absl::Hours(5), .duration = absl::Hours(2), .priority_class = "high"};
  later.pods.push_back(extender::sim::PodTemplate{.requests = {{"cpu", "8"}, {"nvidia.com/gpu", "8"}}});
  extender::sim::ForecastOptions o{.model = &h.model(), .book = h.service().fair_share(), .config = EtaConfig(), .now = kT0};
  absl::StatusOr<extender::Forecast> alone = extender::sim::RunForecast(o);
  REQUIRE(alone.ok());
  CheckStartsAt(EtaOfJob(*alone, "default/w"), absl::Minutes(30));
  // Told that `later` (priority 1000) arrives at T0+10m, a pass gives it n1 at T0+30m, and w
  // n2 when b ends. The arrival is not one of the jobs it forecasts.
  o.arrivals.push_back({.after = absl::Minutes(10), .job = &later, .duration = later.duration});
  absl::StatusOr<extender::Forecast> told = extender::sim::RunForecast(o);
  REQUIRE(told.ok());
  const extender::JobEta& w = EtaOfJob(*told, "default/w");
  CheckStartsAt(w, absl::Minutes(60));
  CHECK(w.nodes == std::vector<std::string>{"n2"});
  CHECK(told->jobs.size() == 1);
  CHECK(told->ForJob("default/later") == nullptr);
}

TEST_CASE("eta: a start that takes room from running work names whose, and why", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  // Both nodes are full for 10 hours; low (priority 10) holds n1, high (1000) n2. w (1000) waits.
  h.Apply(Json::array({Event("ADDED", Running("default", "low", "n1", absl::Minutes(10)).Priority(10)
                                          .Annotation("berth.io/expected-duration", "10h").Obj()),
                       Event("ADDED", Running("default", "high", "n2", absl::Minutes(10)).Priority(1000)
                                          .Annotation("berth.io/expected-duration", "10h").Obj()),
                       Event("ADDED", MakePod("w").Cpu("8").Gpu(8).Priority(1000)
                                          .Annotation("berth.io/expected-duration", "1h").Created(At(-absl::Minutes(2))).Obj())}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(runner.RunPass().ok());
  const extender::JobEta& w = EtaOfJob(*h.service().forecast(), "default/w");
  // kube-scheduler preempts low at once; its room is free when its grace period (30 s) ends.
  CheckStartsAt(w, absl::Seconds(30));
  CHECK(w.nodes == std::vector<std::string>{"n1"});
  CHECK(w.after.empty());
  REQUIRE(w.evicts.size() == 1);
  CHECK(w.evicts[0].job == "default/low");
  CHECK(w.evicts[0].cause == "preemption");
  CHECK(w.evicts[0].at == kT0);
  CHECK(extender::EtaSentence(w, kT0) == "expected to start now, on node n1, after evicting default/low (preemption)");
  const Json explain = ParseReply(h.service().DebugExplain("default/w", false));
  CHECK(explain["eta"]["evicts"][0]["job"] == "default/low");
  CHECK(explain["eta"]["evicts"][0]["cause"] == "preemption");
}

TEST_CASE("eta: without an annotation or a deadline, the queue's median run time ends a running pod", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", MakeQueue("q1").Obj())}));
  // Three pods of q1 ran 10, 20 and 50 minutes and succeeded at T0: the median is 20 minutes.
  const absl::Duration runs[] = {absl::Minutes(10), absl::Minutes(20), absl::Minutes(50)};
  for (int i = 0; i < 3; ++i) {
    MakePod done = MakePod(StrCat("old-", i)).Label("berth.io/queue", "q1").Cpu("1").Node("n1").Phase("Running")
                       .Created(At(-runs[i] - absl::Minutes(1))).Started(At(-runs[i]));
    h.Apply(Json::array({Event("ADDED", done.Obj())}));
    h.Apply(Json::array({Event("MODIFIED", done.Phase("Succeeded").Obj())}));
  }
  {
    auto view = h.model().Read();
    CHECK(view->finished_runs_total() == 3);
  }
  // r started 5 minutes ago on n1 with all its GPUs: by the median it ends at T0+15m.
  h.Apply(Json::array({Event("ADDED", Running("default", "r", "n1", absl::Minutes(5)).Label("berth.io/queue", "q1").Obj()),
                       Event("ADDED", Running("default", "hog", "n2", absl::Minutes(5))
                                          .Annotation("berth.io/expected-duration", "10h").Obj()),
                       Event("ADDED", MakePod("w").Label("berth.io/queue", "q1").Cpu("1").Gpu(8).Created(At(-absl::Minutes(2))).Obj())}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(runner.RunPass().ok());
  const extender::JobEta& w = EtaOfJob(*h.service().forecast(), "default/w");
  CheckStartsAt(w, absl::Minutes(15));
  REQUIRE(w.after.size() == 1);
  CHECK(w.after[0].job == "default/r");
  CHECK(w.after[0].source == policy::RunTimeSource::kQueueMedian);
  CHECK(w.nodes == std::vector<std::string>{"n1"});
  CHECK(w.run.source == policy::RunTimeSource::kQueueMedian);
  CHECK(w.run.duration == absl::Minutes(20));
  CHECK(extender::EtaSentence(w, kT0).find("on node n1, after job default/r finishes (expected ends from: queueMedian)") !=
        std::string::npos);
}

TEST_CASE("eta: a job behind running work of unknown duration gets no time, and says why", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", Running("default", "a", "n1", absl::Minutes(5)).Obj()),
                       Event("ADDED", Running("default", "b", "n2", absl::Minutes(5)).Obj()),
                       Event("ADDED", MakePod("w").Cpu("1").Gpu(8).Created(At(-absl::Minutes(2))).Obj())}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(runner.RunPass().ok());
  std::shared_ptr<const extender::Forecast> f = h.service().forecast();
  CHECK(f->running_unknown == 2);
  const extender::JobEta& w = EtaOfJob(*f, "default/w");
  CHECK_FALSE(w.start.has_value());
  CHECK(w.unknown.find("2 running jobs have no berth.io/expected-duration") != std::string::npos);
  const Json explain = ParseReply(h.service().DebugExplain("default/w", false));
  CHECK(explain["eta"]["start"].is_null());
  CHECK(h.service().Metrics().body.find("berth_eta_unknown_jobs 1") != std::string::npos);
}

TEST_CASE("eta: a job no node could ever take gets no time, and says so rather than the horizon", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  // 16 GPUs: more than either 8-GPU node will ever have. A pod that fits is forecast beside it.
  h.Apply(Json::array({Event("ADDED", MakePod("huge").Cpu("1").Gpu(16).Created(At(-absl::Minutes(2))).Obj()),
                       Event("ADDED", Running("default", "r", "n1", absl::Minutes(5))
                                          .Annotation("berth.io/expected-duration", "1h").Obj()),
                       Event("ADDED", Running("default", "s", "n2", absl::Minutes(5))
                                          .Annotation("berth.io/expected-duration", "1h").Obj()),
                       Event("ADDED", MakePod("w").Cpu("1").Gpu(8).Created(At(-absl::Minutes(1))).Obj())}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(runner.RunPass().ok());
  std::shared_ptr<const extender::Forecast> f = h.service().forecast();
  const extender::JobEta& huge = EtaOfJob(*f, "default/huge");
  CHECK_FALSE(huge.start.has_value());
  CHECK(huge.unknown == "no node could ever take it as the cluster stands (the node filters say why: /debug/explain)");
  const Json explain = ParseReply(h.service().DebugExplain("default/huge", false));
  CHECK(explain["eta"]["unknown"].get<std::string>().find("no node could ever take it") != std::string::npos);
  // The job that fits keeps its time: after r or s ends, at T0+55m.
  CheckStartsAt(EtaOfJob(*f, "default/w"), absl::Minutes(55));
}

TEST_CASE("eta: a pod that arrived after the latest pass, and the forecast turned off, say so", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  const Json none = ParseReply(h.service().DebugExplain("default/w", false).status == 404
                                   ? extender::Reply{.status = 200, .body = "{}"}
                                   : h.service().DebugExplain("default/w", false));
  CHECK(none.empty());
  h.Apply(Json::array({Event("ADDED", MakePod("w").Cpu("1").Gpu(16).Created(At(absl::ZeroDuration())).Obj())}));
  const Json before = ParseReply(h.service().DebugExplain("default/w", false));
  CHECK(before["eta"]["start"].is_null());
  CHECK(before["eta"]["unknown"].get<std::string>().find("not forecast yet") != std::string::npos);
}

TEST_CASE("eta: berth serve's runner forecasts at the lowest priority on a thread of its own with the same answer", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", Running("team-a", "x-0", "n1", absl::Minutes(10))
                                          .Annotation("berth.io/expected-duration", "40m").Obj()),
                       Event("ADDED", Running("team-a", "x-1", "n2", absl::Minutes(10))
                                          .Annotation("berth.io/expected-duration", "1h").Obj()),
                       Event("ADDED", MakePod("w-0").Namespace("team-b").Cpu("8").Gpu(8)
                                          .Annotation("berth.io/expected-duration", "1h").Created(At(-absl::Minutes(2))).Obj())}));
  errno = 0;
  const int mine = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  REQUIRE(mine < 19);  // (a test run at nice 19 could not tell the two apart)

  extender::sim::EtaRunner plain(&h.service(), &h.clock(), EtaConfig());
  REQUIRE(plain.RunPass().ok());
  CHECK(plain.last_pass_nice() == mine);
  const std::optional<absl::Time> start = EtaOfJob(*h.service().forecast(), "team-b/w-0").start;
  REQUIRE(start.has_value());
  CHECK(*start - kT0 >= absl::Minutes(30));

  extender::sim::EtaRunner low(&h.service(), &h.clock(), EtaConfig());
  low.SetLowPriority(true);
  REQUIRE(low.RunPass().ok());
  CHECK(low.last_pass_nice() == 19);
  CHECK(EtaOfJob(*h.service().forecast(), "team-b/w-0").start == start);
  // The calling thread keeps its priority: the next pass's copy runs at full speed.
  errno = 0;
  CHECK(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))) == mine);
}

TEST_CASE("eta: the runner passes only when the model changed and the interval passed", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", MakePod("w").Cpu("1").Gpu(16).Created(At(absl::ZeroDuration())).Obj())}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), EtaConfig());
  CHECK(runner.Step());        // the first pass
  CHECK_FALSE(runner.Step());  // within the interval
  h.clock().Advance(absl::Seconds(61));
  CHECK_FALSE(runner.Step());  // nothing changed
  h.Apply(Json::array({Event("ADDED", MakePod("v").Cpu("1").Created(At(absl::Seconds(61))).Obj())}));
  CHECK(runner.Step());
  CHECK(h.service().forecast_metrics().passes.load() == 2);
  extender::Config off = EtaConfig();
  off.eta_interval = absl::ZeroDuration();
  extender::sim::EtaRunner never(&h.service(), &h.clock(), off);
  h.clock().Advance(absl::Seconds(120));
  CHECK_FALSE(never.Step());
}

TEST_CASE("eta: a what-if gives a pod that must wait the ETA the forecast gives once it is submitted", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", Running("default", "a", "n1", absl::Minutes(10)).Annotation("berth.io/expected-duration", "40m").Obj()),
                       Event("ADDED", Running("default", "b", "n2", absl::Minutes(10)).Annotation("berth.io/expected-duration", "70m").Obj())}));
  const extender::Config config = EtaConfig();
  h.service().SetForecaster([&config](const core::ClusterModel& m, policy::FairShare* book, absl::Time now) {
    return extender::sim::RunForecast({.model = &m, .book = book, .config = config, .now = now, .horizon = config.eta_horizon});
  });
  const MakePod w = MakePod("w").Cpu("1").Gpu(8).Created(At(absl::ZeroDuration()));
  Json asked = w.Obj();
  asked["metadata"].erase("uid");
  const extender::Reply r = h.service().WhatIf(asked.dump(), false);
  INFO(r.body);
  REQUIRE(r.status == 200);
  const Json answer = ParseReply(r);
  CHECK(answer["decision"] == "waits");
  const Json& eta = answer["pods"][0]["eta"];
  REQUIRE(eta.is_object());
  CHECK(eta["after"][0]["job"] == "default/a");  // n1 frees first, at T0+30m
  CHECK(eta["nodes"] == Json::array({"n1"}));
  CHECK(eta["waitSeconds"].get<double>() >= 1800);
  CHECK(eta["waitSeconds"].get<double>() <= 1830);
  const extender::Reply page = h.service().WhatIf(asked.dump(), true);
  CHECK(page.body.find("eta: expected to start in about 30 min, on node n1, after job default/a finishes") != std::string::npos);

  // Submitted: the forecast gives the same start.
  asked["metadata"]["uid"] = "whatif:default/w";
  h.Apply(Json::array({Event("ADDED", asked)}));
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), config);
  REQUIRE(runner.RunPass().ok());
  const extender::JobEta& after = EtaOfJob(*h.service().forecast(), "default/w");
  REQUIRE(after.start.has_value());
  CHECK(absl::FormatTime(absl::RFC3339_sec, *after.start, absl::UTCTimeZone()) == eta["start"]);
}

TEST_CASE("eta: a pass cut short by its time budget gives the jobs it did not reach no time, and says so", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", Running("default", "a", "n1", absl::Minutes(1)).Annotation("berth.io/expected-duration", "10h").Obj()),
                       Event("ADDED", Running("default", "b", "n2", absl::Minutes(1)).Annotation("berth.io/expected-duration", "10h").Obj())}));
  Json events = Json::array();
  for (int i = 0; i < 200; ++i) {
    events.push_back(Event("ADDED", MakePod(StrCat("w", i)).Cpu("1").Gpu(1).Annotation("berth.io/expected-duration", "20m")
                                        .Created(At(-absl::Minutes(200 - i))).Obj()));
  }
  h.Apply(events);
  extender::Config config = EtaConfig();
  absl::StatusOr<extender::Forecast> f = extender::sim::RunForecast(
      {.model = &h.model(), .book = h.service().fair_share(), .config = config, .now = kT0,
       .horizon = config.eta_horizon, .max_wall = absl::Nanoseconds(1)});
  REQUIRE(f.ok());
  CHECK(f->truncated);
  int without = 0;
  for (const extender::JobEta& e : f->jobs) {
    if (e.start) continue;
    ++without;
    CHECK(e.unknown.find("the forecast spent its time budget (eta.maxPassSeconds") != std::string::npos);
  }
  CHECK(without > 0);
  absl::StatusOr<extender::Forecast> whole = extender::sim::RunForecast(
      {.model = &h.model(), .book = h.service().fair_share(), .config = config, .now = kT0,
       .horizon = config.eta_horizon, .max_wall = absl::ZeroDuration()});
  REQUIRE(whole.ok());
  CHECK_FALSE(whole->truncated);
  for (const extender::JobEta& e : whole->jobs) CHECK(e.start.has_value());
  // Told to stop (berth serve on SIGTERM), a pass without a budget ends as one whose budget is
  // spent.
  const std::atomic<bool> stop{true};
  absl::StatusOr<extender::Forecast> stopped = extender::sim::RunForecast(
      {.model = &h.model(), .book = h.service().fair_share(), .config = config, .now = kT0,
       .horizon = config.eta_horizon, .max_wall = absl::ZeroDuration(), .stop = &stop});
  REQUIRE(stopped.ok());
  CHECK(stopped->truncated);
  CHECK(std::count_if(stopped->jobs.begin(), stopped->jobs.end(),
                      [](const extender::JobEta& e) { return !e.start.has_value(); }) > 0);
}

class RecordingAnnotator final : public extender::EtaAnnotatorInterface {
 public:
  absl::Status Annotate(const core::Pod& pod, std::string_view value) override {
    written.emplace_back(pod.Key(), std::string(value));
    return absl::OkStatus();
  }
  std::vector<std::pair<std::string, std::string>> written;
};

TEST_CASE("eta: berth.io/eta is written on pods that waited an interval, rate-limited, and not again unless it moved", "[eta]") {
  Harness h;
  StartAtT0(h);
  h.Apply(TwoNodes());
  h.Apply(Json::array({Event("ADDED", Running("default", "a", "n1", absl::Minutes(10)).Annotation("berth.io/expected-duration", "40m").Obj()),
                       Event("ADDED", Running("default", "b", "n2", absl::Minutes(10)).Annotation("berth.io/expected-duration", "40m").Obj()),
                       Event("ADDED", MakePodGroup("g").MinMember(2).Obj()),
                       Event("ADDED", MakePod("g-0").Gang("g").Cpu("1").Gpu(8).Created(At(-absl::Minutes(3))).Obj()),
                       Event("ADDED", MakePod("g-1").Gang("g").Cpu("1").Gpu(8).Created(At(-absl::Minutes(3))).Obj()),
                       // Arrived just now: not written (most pods start within a pass).
                       Event("ADDED", MakePod("fresh").Cpu("1").Gpu(8).Created(At(-absl::Seconds(10))).Obj())}));
  extender::Config c = EtaConfig();
  c.eta_annotations_per_second = 1;
  extender::sim::EtaRunner runner(&h.service(), &h.clock(), c);
  RecordingAnnotator annotator;
  runner.SetAnnotator(&annotator);
  REQUIRE(runner.RunPass().ok());
  CHECK(runner.WriteAnnotations() == 1);  // one per second
  CHECK(runner.WriteAnnotations() == 0);
  h.clock().Advance(absl::Seconds(1));
  CHECK(runner.WriteAnnotations() == 1);
  h.clock().Advance(absl::Seconds(5));
  CHECK(runner.WriteAnnotations() == 0);  // nothing else due
  REQUIRE(annotator.written.size() == 2);
  const extender::JobEta& g = EtaOfJob(*h.service().forecast(), "default/g");
  REQUIRE(g.start.has_value());
  const std::string value = absl::FormatTime(absl::RFC3339_sec, *g.start, absl::UTCTimeZone());
  CHECK(annotator.written[0] == std::make_pair(std::string("default/g-0"), value));
  CHECK(annotator.written[1] == std::make_pair(std::string("default/g-1"), value));
  CHECK(h.service().api_write_metrics().eta_annotations_written.load() == 2);
  // The watch brings the annotation back; the next pass predicts the same: nothing to write.
  h.Apply(Json::array({Event("MODIFIED", MakePod("g-0").Gang("g").Cpu("1").Gpu(8).Created(At(-absl::Minutes(3)))
                                             .Annotation("berth.io/eta", value).Obj()),
                       Event("MODIFIED", MakePod("g-1").Gang("g").Cpu("1").Gpu(8).Created(At(-absl::Minutes(3)))
                                             .Annotation("berth.io/eta", value).Obj())}));
  REQUIRE(runner.RunPass().ok());
  h.clock().Advance(absl::Seconds(5));
  CHECK(runner.WriteAnnotations() == 0);
  CHECK(annotator.written.size() == 2);
}

TEST_CASE("eta: expected durations are read as Go durations or seconds; anything else falls through", "[eta]") {
  using policy::ParseExpectedDuration;
  CHECK(ParseExpectedDuration("90m") == absl::Minutes(90));
  CHECK(ParseExpectedDuration("1h30m") == absl::Minutes(90));
  CHECK(ParseExpectedDuration("2.5h") == absl::Minutes(150));
  CHECK(ParseExpectedDuration("3600") == absl::Hours(1));
  CHECK_FALSE(ParseExpectedDuration("0").has_value());
  CHECK_FALSE(ParseExpectedDuration("-5m").has_value());
  CHECK_FALSE(ParseExpectedDuration("soon").has_value());
  CHECK_FALSE(ParseExpectedDuration("").has_value());
  CHECK_FALSE(ParseExpectedDuration("inf").has_value());
  policy::RunTimeBook book;
  CHECK_FALSE(book.QueueMedian("q").has_value());
  book.Add("q", absl::Minutes(10));
  book.Add("q", absl::Minutes(30));
  CHECK_FALSE(book.QueueMedian("q").has_value());  // below kMinRunsForMedian
  book.Add("q", absl::Minutes(20));
  CHECK(book.QueueMedian("q") == absl::Minutes(20));
  book.Add("q", absl::Minutes(40));
  CHECK(book.QueueMedian("q") == absl::Minutes(25));
  // A bad annotation falls through to the deadline, then the median.
  core::Pod p;
  p.annotations.Set("berth.io/expected-duration", "soon");
  p.active_deadline_seconds = 600;
  CHECK(book.Expected(p).source == policy::RunTimeSource::kActiveDeadline);
  p.active_deadline_seconds = 0;
  p.labels.Set("berth.io/queue", "q");
  CHECK(book.Expected(p).source == policy::RunTimeSource::kQueueMedian);
  p.labels.Set("berth.io/queue", "other");
  CHECK(book.Expected(p).source == policy::RunTimeSource::kUnknown);
}

TEST_CASE("eta: activeDeadlineSeconds is decoded, and a value the API server would refuse is named", "[eta]") {
  core::ResourceNames names;
  auto decode = [&](const Json& pod) -> absl::StatusOr<core::Pod> {
    const std::string text = pod.dump();
    absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(text);
    REQUIRE(doc.ok());
    simdjson::dom::object root;
    REQUIRE(doc->root().get(root) == simdjson::SUCCESS);
    core::ResourceNameScope scope(names);
    return extender::DecodePod(root, scope, extender::JsonPath());
  };
  Json pod = MakePod("p").Obj();
  pod["spec"]["activeDeadlineSeconds"] = 7200;
  absl::StatusOr<core::Pod> ok = decode(pod);
  REQUIRE(ok.ok());
  CHECK(ok->active_deadline_seconds == 7200);
  CHECK(extender::EncodePod(*ok, names)["spec"]["activeDeadlineSeconds"] == 7200);
  pod["spec"]["activeDeadlineSeconds"] = 0;
  absl::StatusOr<core::Pod> bad = decode(pod);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("spec.activeDeadlineSeconds") != std::string::npos);
}

TEST_CASE("eta: the eta section of the configuration", "[eta]") {
  absl::StatusOr<extender::Config> c =
      extender::ParseConfig(R"({"eta": {"intervalSeconds": 30, "horizonHours": 24, "annotationsPerSecond": 2, "maxPassSeconds": 10}})", "c.json");
  REQUIRE(c.ok());
  CHECK(c->eta_max_pass == absl::Seconds(10));
  CHECK(c->eta_interval == absl::Seconds(30));
  CHECK(c->eta_horizon == absl::Hours(24));
  CHECK(c->eta_annotations_per_second == 2);
  absl::StatusOr<extender::Config> off = extender::ParseConfig(R"({"eta": {"intervalSeconds": 0}})", "c.json");
  REQUIRE(off.ok());
  CHECK(off->eta_interval == absl::ZeroDuration());
  absl::StatusOr<extender::Config> bad = extender::ParseConfig(R"({"eta": {"horizon": 3}})", "c.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("horizon") != std::string::npos);
  absl::StatusOr<extender::Config> budget = extender::ParseConfig(R"({"eta": {"maxPassSeconds": 0}})", "c.json");
  REQUIRE_FALSE(budget.ok());
  CHECK(std::string(budget.status().message()).find("maxPassSeconds") != std::string::npos);
  absl::StatusOr<extender::Config> range = extender::ParseConfig(R"({"eta": {"horizonHours": 0}})", "c.json");
  REQUIRE_FALSE(range.ok());
  CHECK(std::string(range.status().message()).find("horizonHours") != std::string::npos);
}

}  // namespace
}  // namespace berth::testing
