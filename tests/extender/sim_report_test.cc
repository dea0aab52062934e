// The report of `berth simulate` (issue 14, point 6): the headline figures computed from a
// hand-built RunMetrics whose answers are worked out in the comments, the summary table, the
// schema of report.json, and the files WriteReport leaves: report.json, summary.txt, index.html
// and every plot as SVG and PNG drawn by gnuplot (or a clear error when gnuplot is missing).

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>

#include "extender/sim/report.h"
#include "nlohmann/json.hpp"
#include "tests/testing/files.h"

namespace berth::testing {
namespace {

using extender::sim::GangCounts;
using extender::sim::JobOutcome;
using extender::sim::RunMetrics;
using extender::sim::SimInfo;
using extender::sim::SimResult;
namespace fs = std::filesystem;

const char* kPlots[] = {"utilisation", "queue-shares", "wait-cdf", "gangs", "pools", "pending"};

bool HaveGnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty() && access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

fs::path TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "berth-report-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

// Samples every 60 s; the makespan (150 s) ends halfway through the third sample, so the
// fourth is outside the window and the third counts for 30 s.
RunMetrics HandBuilt() {
  RunMetrics m;
  m.world = "berth";
  m.times = {0, 60, 120, 180};
  // Time-average over [0, 150): (0.5*60 + 1.0*60 + 0.5*30) / 150 = 0.7. (The plain mean of all
  // four samples would be 0.5, of the first three 0.667.)
  m.utilisation["cpu"] = {0.5, 1.0, 0.5, 0.0};
  m.utilisation["memory"] = {0.2, 0.2, 0.2, 0.2};
  // Fairness: sample 0 has two queues with pods, errors 0.3 and 0.3 -> 0.3; sample 1 has one
  // queue with pods -> skipped; sample 2 has three, all exactly fair -> 0; sample 3 none ->
  // skipped. Mean over the two counted samples: 0.15.
  m.queue_fair_share["a"] = {0.5, 1.0, 0.25, 0};
  m.queue_fair_share["b"] = {0.5, 0.0, 0.25, 0};
  m.queue_fair_share["c"] = {0.0, 0.0, 0.5, 0};
  m.queue_share["a"] = {0.8, 1.0, 0.25, 0};
  m.queue_share["b"] = {0.2, 0.0, 0.25, 0};
  m.queue_share["c"] = {0.0, 0.0, 0.5, 0};
  m.gangs = {GangCounts{1, 0, 0, 0}, GangCounts{0, 1, 0, 0}, GangCounts{0, 0, 1, 0},
             GangCounts{0, 0, 0, 1}};
  m.pending_pods = {5, 3, 1, 0};
  // Ten jobs that started with waits 1..10 s, two pods each; the first eight completed.
  for (int i = 1; i <= 10; ++i) {
    JobOutcome j;
    j.name = "ns/job-" + std::to_string(i);
    j.queue = i <= 5 ? "a" : "b";
    j.priority_class = i % 2 == 0 ? "high" : "";
    j.pods = 2;
    j.submit = 10.0 * i;
    j.start = j.submit + i;
    j.end = i <= 8 ? j.start + 20 : -1;
    m.jobs.push_back(j);
  }
  // One that never started: submitted at 100 s, the run ends at 1000 s -> waited 900 s.
  JobOutcome starved;
  starved.name = "ns/starved";
  starved.queue = "c";
  starved.pods = 4;
  starved.submit = 100;
  m.jobs.push_back(starved);
  m.jobs_completed = 8;
  m.pods_started = 20;
  m.makespan = 150;
  m.evictions = {{"reclaim", 3, 1.5, 10}, {"preemption", 2, 0.5, 4}};
  m.partial_gangs_stuck = 1;
  m.partial_gang_examples = {"ns/g: 1 of 4 bound for 700s"};
  m.invariants = {{"no-overcommit", "No node is over-committed.", 0, "", -1},
                  {"gang-partial-timeout", "No gang stays partially bound past its timeout.", 2,
                   "ns/g: 1 of 4 bound at 600s", 600}};
  m.verb_calls = {{"filter", 100}, {"bind", 20}};
  m.verb_seconds = {{"filter", 0.01}, {"bind", 0.001}};
  m.scheduling_attempts = 120;
  m.wall_seconds = 0.5;
  return m;
}

SimInfo Info() {
  SimInfo info;
  info.cluster_file = "cluster.yaml";
  info.workload_file = "workload.yaml";
  info.workload_name = "hand-built";
  info.nodes = 3;
  info.jobs = 11;
  info.pods = 24;
  info.simulated_seconds = 1000;
  info.wall_seconds = 1;
  info.queue_weights = {{"a", 1}, {"b", 1}, {"c", 2}};
  return info;
}

SimResult HandBuiltResult() {
  SimResult r;
  r.info = Info();
  r.berth = HandBuilt();
  r.baseline = HandBuilt();
  r.baseline.world = "baseline";
  r.baseline.utilisation["cpu"] = {0.35, 0.35, 0.35, 0.35};  // berth / baseline = 2.00x
  r.baseline.evictions.clear();                               // ratio "-"
  return r;
}

// A day of a 3-queue, 2-pool cluster with gangs, shaped like a real run: diurnal arrivals,
// long-tailed waits, berth keeping queues near their fair shares and the baseline not.
SimResult Realistic() {
  SimResult r;
  r.info = Info();
  r.info.workload_name = "demo (synthetic figures)";
  r.info.nodes = 200;
  r.info.simulated_seconds = 86400;
  r.info.wall_seconds = 4.2;
  r.info.queue_weights = {{"research", 2}, {"prod", 1}, {"batch", 1}};
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 1);
  const std::string queues[] = {"batch", "prod", "research"};
  const double weights[] = {1, 1, 2};
  for (int w = 0; w < 2; ++w) {
    RunMetrics& m = w == 0 ? r.berth : r.baseline;
    m.world = w == 0 ? "berth" : "baseline";
    const double level = w == 0 ? 0.92 : 0.78;
    double pending = 0;
    for (int i = 0; i <= 1440; ++i) {
      const double t = i * 60.0;
      const double day = std::sin((t / 86400 - 0.3) * 2 * M_PI);  // diurnal load
      const double ramp = std::min(1.0, t / 3600);                // the first hour fills up
      const double load = std::clamp(level * ramp * (1 + 0.06 * day) + 0.01 * noise(rng), 0.0,
                                     1.0);
      m.times.push_back(t);
      m.utilisation["cpu"].push_back(load);
      m.utilisation["memory"].push_back(std::clamp(load * 0.7 + 0.01 * noise(rng), 0.0, 1.0));
      m.utilisation["nvidia.com/gpu"].push_back(
          std::clamp(load * (w == 0 ? 1.02 : 0.9) + 0.02 * noise(rng), 0.0, 1.0));
      // Queue shares: berth converges on the fair share, the baseline follows arrivals.
      const bool batch_on = t > 4 * 3600 && t < 20 * 3600;
      double sum_w = 0;
      for (int q = 0; q < 3; ++q) sum_w += (q == 0 && !batch_on) ? 0 : weights[q];
      double raw[3], sum_raw = 0;
      for (int q = 0; q < 3; ++q) {
        const double fair = (q == 0 && !batch_on) ? 0 : weights[q] / sum_w;
        const double drift = w == 0 ? 0.03 * noise(rng) : 0.15 * std::sin(t / 7000 + q) +
                                                              0.03 * noise(rng);
        raw[q] = std::max(0.0, fair + drift * (fair > 0));
        sum_raw += raw[q];
        m.queue_fair_share[queues[q]].push_back(fair);
      }
      for (int q = 0; q < 3; ++q) {
        m.queue_share[queues[q]].push_back(sum_raw > 0 ? raw[q] / sum_raw : 0);
      }
      GangCounts g;
      g.running = static_cast<int>(std::lround(12 + 4 * day + noise(rng)));
      g.waiting = std::max(0, static_cast<int>(std::lround((w == 0 ? 2 : 5) + 3 * day)));
      g.reserved = w == 0 ? std::max(0, static_cast<int>(std::lround(1 + noise(rng)))) : 0;
      g.partial = w == 0 ? (i % 97 < 3 ? 1 : 0) : std::max(0, static_cast<int>(3 + 2 * day));
      m.gangs.push_back(g);
      m.pool_lent["training"].push_back(
          std::max(0.0, (w == 0 ? 120 : 40) * (1 - day) + 10 * noise(rng)));
      m.pool_borrowed["training"].push_back(std::max(0.0, 20 * (1 + day) + 5 * noise(rng)));
      m.pool_lent["inference"].push_back(std::max(0.0, 20 * (1 + day) + 5 * noise(rng)));
      m.pool_borrowed["inference"].push_back(
          std::max(0.0, (w == 0 ? 120 : 40) * (1 - day) + 10 * noise(rng)));
      pending = std::max(0.0, 0.9 * pending + (w == 0 ? 8 : 14) * (1 + day) + 4 * noise(rng) -
                                  (t > 22 * 3600 ? 30 : 0));
      m.pending_pods.push_back(static_cast<int>(pending));
    }
    std::lognormal_distribution<double> wait(w == 0 ? std::log(120) : std::log(400), 1.6);
    std::uniform_real_distribution<double> submit(0, 80000);
    std::exponential_distribution<double> duration(1.0 / 3600);
    for (int j = 0; j < 600; ++j) {
      JobOutcome o;
      o.name = "team/job-" + std::to_string(j);
      o.queue = queues[j % 3];
      o.priority_class = j % 5 == 0 ? "production" : (j % 5 == 1 ? "" : "batch-low");
      o.pods = 1 << (j % 4);
      o.gang = o.pods > 2;
      o.submit = submit(rng);
      const double wt = wait(rng);
      if (o.submit + wt < 86400) {
        o.start = o.submit + wt;
        const double end = o.start + duration(rng);
        if (end < 86400) o.end = end;
      }
      if (o.end >= 0) {
        ++m.jobs_completed;
        m.makespan = std::max(m.makespan, o.end);
      }
      m.pods_started += o.start >= 0 ? o.pods : 0;
      m.jobs.push_back(o);
    }
    m.evictions = {{"preemption", w == 0 ? 12 : 30, w == 0 ? 6.5 : 21.0, 40},
                   {"reclaim", w == 0 ? 20 : 0, w == 0 ? 3.2 : 0.0, 60}};
    m.invariants = {{"no-overcommit", "No node is over-committed.", 0, "", -1},
                    {"gang-partial-timeout", "No gang stays partially bound past its timeout.",
                     w == 0 ? 0 : 17, w == 0 ? "" : "team/job-3: 2 of 8 bound for 612s", 5400}};
    m.partial_gangs_stuck = w == 0 ? 0 : 4;
    m.verb_calls = {{"filter", 5000}, {"prioritize", 5000}, {"bind", 1700}};
    m.verb_seconds = {{"filter", 0.4}, {"prioritize", 0.3}, {"bind", 0.02}};
    m.scheduling_attempts = 5200;
    m.wall_seconds = 2.1;
  }
  return r;
}

TEST_CASE("Summarize computes the documented figures on a hand-built run", "[sim][report]") {
  const auto s = extender::sim::Summarize(HandBuilt(), Info());
  CHECK(s.utilisation_cpu == Approx(0.7));
  CHECK(s.utilisation_memory == Approx(0.2));
  CHECK(s.utilisation_gpu == 0);
  CHECK(s.fairness_error == Approx(0.15));
  // Nearest rank over waits 1..10: p50 = 5th, p90 = 9th, p99 = ceil(9.9) = 10th.
  CHECK(s.wait_p50 == 5);
  CHECK(s.wait_p90 == 9);
  CHECK(s.wait_p99 == 10);
  CHECK(s.longest_wait == 900);
  CHECK(s.longest_wait_job == "ns/starved");
  CHECK(s.jobs_never_started == 1);
  CHECK(s.jobs_completed == 8);
  CHECK(s.makespan == 150);
  // Pods of completed jobs (8 x 2) and completed jobs, over the makespan.
  CHECK(s.pods_per_second == Approx(16.0 / 150));
  CHECK(s.jobs_per_second == Approx(8.0 / 150));
  CHECK(s.evicted_pods == 5);
  CHECK(s.gpu_hours_lost == Approx(2.0));
  CHECK(s.partial_gangs_stuck == 1);
  CHECK(s.invariant_violations == 2);
}

TEST_CASE("figures while work waits, goodput and time to fair share, on a hand-built run",
          "[sim][report]") {
  RunMetrics m = HandBuilt();
  // Work waits at a sample with pods pending and a GPU demand of at least the cluster: samples
  // 0 (demand 1.5) and 2 (exactly 1.0); not 1 (0.9: every waiting pod could fit) nor 3 (nobody
  // waits). Sample 0 counts for 60 s, sample 2 for 30 s (the makespan is 150 s): 90 s of 150.
  m.pending_pods = {5, 3, 1, 0};
  m.gpu_demand = {1.5, 0.9, 1.0, 2.0};
  m.utilisation["nvidia.com/gpu"] = {0.9, 0.5, 0.6, 0.1};
  m.useful_utilisation["nvidia.com/gpu"] = {0.8, 0.5, 0.5, 0.1};
  m.held_gpus = {0.1, 0.0, 0.04, 0.0};
  m.gpu_hours_completed = 5;  // over 150 s: 5 / (150 / 3600) = 120 GPU-hours an hour
  const auto s = extender::sim::Summarize(m, Info());
  CHECK(s.waiting_share == Approx(90.0 / 150));
  CHECK(s.utilisation_gpu_waiting == Approx((0.9 * 60 + 0.6 * 30) / 90));   // 0.8
  CHECK(s.useful_utilisation_gpu_waiting == Approx((0.8 * 60 + 0.5 * 30) / 90));  // 0.7
  CHECK(s.held_gpu_waiting == Approx((0.1 * 60 + 0.04 * 30) / 90));  // 0.08
  CHECK(s.goodput_gpu == Approx(120));
  CHECK(s.cpu_hours_lost == Approx(14));  // 10 + 4 over the two causes

  // Queue a is due 0.5, 1.0, 0.25 and has 0.8, 1.0, 0.25: reached at once, never below. Queue
  // b is due 0.5 and has 0.2 at 0 (below from 0), nothing due at 60 (the episode ends without
  // a reach), and reaches 0.25 at 120: first reach 120 s after its first demand, no episode
  // counted (its only one ended when nothing was due). Queue c is first due at 120 and has it.
  const auto reach = extender::sim::FairShareReaches(m, 150);
  REQUIRE(reach.size() == 3);
  CHECK(reach.at("a").first == 0);
  CHECK(reach.at("a").episodes == 0);
  CHECK(reach.at("b").first == 120);
  CHECK(reach.at("b").episodes == 0);
  CHECK(reach.at("c").first == 0);
  // An episode still open at the end counts to the end of the run.
  m.queue_share["b"] = {0.2, 0.0, 0.1, 0};
  m.queue_fair_share["b"] = {0.5, 0.5, 0.25, 0.25};
  const auto open = extender::sim::FairShareReaches(m, 150);
  CHECK(open.at("b").first == -1);
  CHECK(open.at("b").episodes == 1);
  CHECK(open.at("b").longest == 180);  // from 0 to the last sample, at 180 s
  const std::string text = extender::sim::FairShareText(HandBuiltResult());
  CHECK(text.find("queue") == 0);
  CHECK(text.find("never") == std::string::npos);
  const std::string evictions = extender::sim::EvictionsText(HandBuiltResult());
  CHECK(evictions.find("reclaim") != std::string::npos);
  CHECK(evictions.find("1.5") != std::string::npos);
}

TEST_CASE("no job is named as the longest wait when nobody waited", "[sim][report]") {
  RunMetrics m = HandBuilt();
  m.jobs.pop_back();  // the starved job
  for (auto& j : m.jobs) j.start = j.submit;
  const auto s = extender::sim::Summarize(m, Info());
  CHECK(s.longest_wait == 0);
  CHECK(s.longest_wait_job.empty());
  CHECK(s.wait_p99 == 0);
}

// Weighted max-min division of the usage, capped by each queue's demand.
TEST_CASE("fair shares: weights divide the usage, and no queue is due more than it asks", "[sim][report]") {
  using extender::sim::FairShares;
  auto approx = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
  };
  approx(FairShares({1, 1}, {10, 10}, 6), {0.5, 0.5});
  approx(FairShares({2, 1}, {10, 10}, 6), {2.0 / 3, 1.0 / 3});
  // b asks for 1 of the 6: a is due the other 5.
  approx(FairShares({1, 1}, {10, 1}, 6), {5.0 / 6, 1.0 / 6});
  // Capping in turn: c (1) and b (2) are below the level; a takes the 6 left of 9.
  approx(FairShares({1, 1, 1}, {10, 2, 1}, 9), {6.0 / 9, 2.0 / 9, 1.0 / 9});
  // A queue with no demand, or no weight, is due nothing.
  approx(FairShares({1, 1, 0}, {0, 4, 4}, 4), {0, 1, 0});
  // Demand below the usage: each queue its demand.
  approx(FairShares({1, 3}, {1, 1}, 4), {0.25, 0.25});
  // Nothing in use: nothing is due.
  approx(FairShares({1, 1}, {3, 3}, 0), {0, 0});
}

TEST_CASE("fairness error is 0 when never two queues have pods", "[sim][report]") {
  RunMetrics m = HandBuilt();
  m.queue_fair_share = {{"a", {1, 1, 1, 1}}, {"b", {0, 0, 0, 0}}};
  CHECK(extender::sim::Summarize(m, Info()).fairness_error == 0);
}

TEST_CASE("Percentile is nearest-rank", "[sim][report]") {
  using extender::sim::Percentile;
  CHECK(Percentile({}, 50) == 0);
  CHECK(Percentile({7}, 99) == 7);
  CHECK(Percentile({4, 1, 3, 2}, 50) == 2);  // ceil(2) = 2nd
  CHECK(Percentile({4, 1, 3, 2}, 51) == 3);  // ceil(2.04) = 3rd
  CHECK(Percentile({4, 1, 3, 2}, 100) == 4);
}

TEST_CASE("waits by queue and by priority class", "[sim][report]") {
  auto q = extender::sim::WaitsBy(HandBuilt(), true);
  REQUIRE(q.count("a") == 1);
  CHECK(q["a"].count == 5);
  CHECK(q["a"].p50 == 3);
  CHECK(q["b"].p99 == 10);
  CHECK(q["c"].count == 0);
  CHECK(q["c"].never_started == 1);
  auto c = extender::sim::WaitsBy(HandBuilt(), false);
  CHECK(c["high"].count == 5);  // jobs 2, 4, 6, 8, 10
  CHECK(c["high"].p99 == 10);
  CHECK(c[""].p50 == 5);  // jobs 1, 3, 5, 7, 9 and the starved one
}

TEST_CASE("durations read in human units", "[sim][report]") {
  using extender::sim::HumanDuration;
  CHECK(HumanDuration(0) == "0s");
  CHECK(HumanDuration(2.5) == "2.5s");
  CHECK(HumanDuration(45) == "45s");
  CHECK(HumanDuration(125) == "2m 05s");
  CHECK(HumanDuration(3600 + 23 * 60) == "1h 23m");
  CHECK(HumanDuration(3 * 86400 + 4 * 3600 + 100) == "3d 4h");
}

TEST_CASE("the summary table has a row per figure and berth/baseline ratios", "[sim][report]") {
  const std::string t = extender::sim::SummaryTable(HandBuiltResult());
  INFO(t);
  for (const char* row :
       {"utilisation cpu", "utilisation memory", "utilisation nvidia.com/gpu",
        "useful utilisation nvidia.com/gpu", "fairness error",
        "wait p50", "wait p90", "wait p99", "longest wait", "jobs completed",
        "jobs never started", "throughput pods/s", "throughput jobs/s", "makespan",
        "partial gangs stuck", "evicted pods", "GPU-hours lost", "CPU-hours lost",
        "invariant violations", "wait by queue", "wait by priority class",
        "GPU utilisation while work waits", "useful GPU utilisation while work waits",
        "goodput GPU-hours/h", "work thrown away by evictions", "time to fair share"}) {
    CHECK(t.find(row) != std::string::npos);
  }
  CHECK(t.find("figure") == 0);
  // cpu: 70.0% against 35.0%.
  std::istringstream lines(t);
  std::string line, cpu, evicted, longest;
  while (std::getline(lines, line)) {
    if (line.rfind("utilisation cpu", 0) == 0) cpu = line;
    if (line.rfind("evicted pods", 0) == 0) evicted = line;
    if (line.rfind("longest wait", 0) == 0) longest = line;
  }
  CHECK(cpu.find("70.0%") != std::string::npos);
  CHECK(cpu.find("35.0%") != std::string::npos);
  CHECK(cpu.find("2.00x") != std::string::npos);
  CHECK(evicted.size() > 0);
  CHECK(evicted.back() == '-');  // the baseline evicted nothing
  CHECK(longest.find("15m 00s (ns/starved)") != std::string::npos);
}

TEST_CASE("report.json has schema version 2 and every section", "[sim][report]") {
  const auto j = nlohmann::json::parse(extender::sim::ReportJson(HandBuiltResult()));
  CHECK(j.at("schemaVersion") == 2);
  for (const char* key : {"info", "summary", "waits", "series", "evictions", "invariants",
                          "partialGangs", "cost", "jobs", "fairShareReach"}) {
    CHECK(j.contains(key));
  }
  CHECK(j["info"]["workloadName"] == "hand-built");
  CHECK(j["summary"]["berth"]["utilisationCpu"].get<double>() == Approx(0.7));
  CHECK(j["summary"]["baseline"]["utilisationCpu"].get<double>() == Approx(0.35));
  CHECK(j["summary"]["ratio"]["utilisationCpu"].get<double>() == Approx(2.0));
  CHECK(j["summary"]["ratio"]["evictedPods"].is_null());
  CHECK(j["summary"]["berth"]["longestWaitJob"] == "ns/starved");
  CHECK(j["waits"]["berth"]["byQueue"]["a"]["p50"] == 3);
  CHECK(j["waits"]["berth"]["byQueue"]["c"]["neverStarted"] == 1);
  CHECK(j["waits"]["baseline"]["byPriorityClass"]["high"]["count"] == 5);
  for (const char* key : {"times", "utilisation", "usefulUtilisation", "queueShare", "queueFairShare", "gangs",
                          "poolLent", "poolBorrowed", "pendingPods", "gpuDemand", "heldGpus"}) {
    CHECK(j["series"]["berth"].contains(key));
    CHECK(j["series"]["baseline"].contains(key));
  }
  CHECK(j["series"]["berth"]["times"].size() == 4);
  CHECK(j["series"]["berth"]["gangs"]["partial"][2] == 1);
  CHECK(j["evictions"]["berth"].size() == 2);
  CHECK(j["invariants"]["berth"][1]["violations"] == 2);
  CHECK(j["invariants"]["berth"][1]["firstExample"] == "ns/g: 1 of 4 bound at 600s");
  CHECK(j["partialGangs"]["berth"]["stuck"] == 1);
  CHECK(j["cost"]["berth"]["verbCalls"]["filter"] == 100);
  CHECK(j["cost"]["berth"]["verbMicrosPerCall"]["filter"].get<double>() == Approx(100));
  CHECK(j["cost"]["berth"]["simulatedToWall"].get<double>() == Approx(2000));
  CHECK(j["jobs"]["columns"][0] == "name");
  REQUIRE(j["jobs"]["berth"].size() == 11);
  CHECK(j["jobs"]["berth"][10][0] == "ns/starved");
  CHECK(j["jobs"]["berth"][10][6] == -1);  // start: never
}

TEST_CASE("WriteReport writes the JSON, the summary, every plot and the page", "[sim][report]") {
  const fs::path dir = TempDir() / "out";  // WriteReport creates it
  const auto status = extender::sim::WriteReport(Realistic(), dir.string());
  const auto json = nlohmann::json::parse(ReadTestFile(dir / "report.json"));
  CHECK(json["schemaVersion"] == 2);
  CHECK(ReadTestFile(dir / "summary.txt").find("utilisation cpu") != std::string::npos);
  const std::string html = ReadTestFile(dir / "index.html");
  CHECK(html.find("<table>") != std::string::npos);
  CHECK(html.find("report.json") != std::string::npos);
  CHECK(html.find("team/job-3: 2 of 8 bound for 612s") != std::string::npos);
  if (!HaveGnuplot()) {
    WARN("gnuplot is not installed: the plots are not checked");
    CHECK(status.message().find("gnuplot not found") != std::string_view::npos);
    return;
  }
  INFO(status.ToString());
  REQUIRE(status.ok());
  for (const char* plot : kPlots) {
    INFO(plot);
    for (const char* ext : {".svg", ".png"}) {
      const fs::path f = dir / (std::string(plot) + ext);
      REQUIRE(fs::exists(f));
      CHECK(fs::file_size(f) > 1000);
    }
    CHECK(ReadTestFile(dir / (std::string(plot) + ".svg")).find("<svg") != std::string::npos);
    CHECK(ReadTestFile(dir / (std::string(plot) + ".png")).substr(1, 3) == "PNG");
    CHECK(html.find(std::string("src=\"") + plot + ".svg\"") != std::string::npos);
  }
  CHECK(ReadTestFile(dir / "pending.svg").find("Pending pods: berth vs baseline") != std::string::npos);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("WriteReport says which plots it skipped and why", "[sim][report]") {
  SimResult r = HandBuiltResult();
  for (auto* m : {&r.berth, &r.baseline}) {
    m->gangs.assign(4, GangCounts{});
    m->pool_lent.clear();
    m->pool_borrowed.clear();
  }
  const fs::path dir = TempDir();
  const auto status = extender::sim::WriteReport(r, dir.string());
  const std::string html = ReadTestFile(dir / "index.html");
  CHECK(html.find("Not drawn: the workload has no gangs") != std::string::npos);
  CHECK(html.find("Not drawn: no pool lent or borrowed capacity") != std::string::npos);
  CHECK(!fs::exists(dir / "gangs.png"));
  if (HaveGnuplot()) {
    INFO(status.ToString());
    CHECK(status.ok());
    CHECK(fs::file_size(dir / "utilisation.png") > 1000);
  }
  fs::remove_all(dir);
}

TEST_CASE("a run without the baseline still reports and plots berth", "[sim][report]") {
  SimResult r = Realistic();
  r.baseline = RunMetrics{};
  r.baseline.world = "baseline";
  const std::string table = extender::sim::SummaryTable(r);
  // Every ratio is "-": the cpu row ends with it.
  const auto cpu = table.find("utilisation cpu");
  REQUIRE(cpu != std::string::npos);
  const std::string row = table.substr(cpu, table.find('\n', cpu) - cpu);
  CHECK(row.back() == '-');
  const auto j = nlohmann::json::parse(extender::sim::ReportJson(r));
  CHECK(j["summary"]["ratio"]["utilisationCpu"].is_null());
  const fs::path dir = TempDir();
  const auto status = extender::sim::WriteReport(r, dir.string());
  if (HaveGnuplot()) {
    INFO(status.ToString());
    CHECK(status.ok());
    for (const char* plot : kPlots) {
      INFO(plot);
      CHECK(fs::file_size(dir / (std::string(plot) + ".png")) > 1000);
      // Titles name the one world drawn, not a comparison with a baseline that was not run.
      CHECK(ReadTestFile(dir / (std::string(plot) + ".svg")).find("vs baseline") == std::string::npos);
    }
    CHECK(ReadTestFile(dir / "pending.svg").find("Pending pods: berth") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("without gnuplot, WriteReport says so and still writes the JSON and the page",
          "[sim][report]") {
  const fs::path dir = TempDir();
  const fs::path empty = TempDir();
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  setenv("PATH", empty.c_str(), 1);
  const auto status = extender::sim::WriteReport(HandBuiltResult(), dir.string());
  setenv("PATH", saved.c_str(), 1);
  CHECK(!status.ok());
  CHECK(status.message() ==
        "gnuplot not found: install gnuplot-nox; report.json and index.html were written");
  CHECK(fs::exists(dir / "report.json"));
  CHECK(fs::exists(dir / "summary.txt"));
  CHECK(ReadTestFile(dir / "index.html").find("gnuplot not found") != std::string::npos);
  fs::remove_all(dir);
  fs::remove_all(empty);
}

// Not run by default: writes the synthetic day to /tmp/sim-report-demo to look at the plots.
TEST_CASE("demo report", "[.][demo]") {
  const auto status = extender::sim::WriteReport(Realistic(), "/tmp/sim-report-demo");
  INFO(status.ToString());
  CHECK(status.ok());
}

}  // namespace
}  // namespace berth::testing
