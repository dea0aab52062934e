#include "bench/sim_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/config.h"
#include "extender/service.h"
#include "extender/sim/engine.h"
#include "extender/sim/generate.h"
#include "extender/sim/report.h"
#include "policy/registry.h"

namespace berth::bench {
namespace {

struct Size {
  int nodes;
  int jobs;
  double load;  // offered GPU load over the arrival span: gpu-mix's 50,000 jobs span a week at 0.1
  int percentage = 100;  // kube-scheduler's percentageOfNodesToScore (0: its adaptive default)
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The in-process cost of the verbs the simulator calls most, on the same cluster with no pods:
// one 1-GPU pod filtered and prioritized over every node, as the simulator sends them
// (percentageOfNodesToScore 100). The filter bench measures the same calls over loopback.
struct InProcess {
  double filter_us = 0, prioritize_us = 0;
};

InProcess MeasureInProcess(const std::string& cluster_json) {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  extender::Config config;
  policy::Registry registry = policy::BuildDefaultRegistry();
  auto pipeline = registry.Build(config.policy, model.resources());
  if (!pipeline.ok()) return {};
  extender::LocalBinder binder(&model);
  extender::Service service(extender::ServiceOptions{.mode = extender::Mode::kStandalone},
                            &model, *std::move(pipeline), &binder, &clock);
  if (!service.LoadList(cluster_json, "cluster").ok()) return {};
  std::string names;
  {
    auto view = model.Read();
    view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      StrAppend(&names, names.empty() ? "" : ",", "\"", n.node.name, "\"");
    });
  }
  const std::string pod =
      R"({"metadata":{"name":"probe","namespace":"bench","uid":"probe-1"},"spec":{"schedulerName":"berth-scheduler","containers":[{"name":"main","resources":{"requests":{"cpu":"4","memory":"32Gi","nvidia.com/gpu":"1"}}}]}})";
  const std::string body = StrCat(R"({"Pod":)", pod, R"(,"Nodes":null,"NodeNames":[)", names, "]}");
  InProcess r;
  std::vector<double> f, p;
  for (int i = 0; i < 60; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    extender::Reply a = service.Filter(body);
    auto t1 = std::chrono::steady_clock::now();
    extender::Reply b = service.Prioritize(body);
    auto t2 = std::chrono::steady_clock::now();
    if (a.status != 200 || b.status != 200) return {};
    f.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    p.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  r.filter_us = Median(f);
  r.prioritize_us = Median(p);
  return r;
}

double PerCall(const extender::sim::RunMetrics& m, const std::string& verb) {
  auto c = m.verb_calls.find(verb);
  auto s = m.verb_seconds.find(verb);
  if (c == m.verb_calls.end() || s == m.verb_seconds.end() || c->second == 0) return 0;
  return s->second * 1e6 / static_cast<double>(c->second);
}

int RunOne(const Size& size) {
  extender::sim::GenerateOptions g{.profile = "gpu-mix", .jobs = size.jobs, .nodes = size.nodes, .seed = 1,
                                   .load = size.load};
  absl::StatusOr<extender::sim::Generated> made = extender::sim::Generate(g);
  if (!made.ok()) {
    std::printf("FAIL generate: %s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  extender::sim::SimOptions o;
  o.cluster_json = made->cluster_json;
  o.cluster_source = "gpu-mix cluster";
  o.workload = made->workload;
  o.workload_source = "gpu-mix workload";
  o.sample_interval = absl::Minutes(5);
  o.percentage_of_nodes_to_score = size.percentage;
  const InProcess inproc = MeasureInProcess(made->cluster_json);
  absl::StatusOr<extender::sim::SimResult> r = extender::sim::RunSimulation(o);
  if (!r.ok()) {
    std::printf("FAIL simulate: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  const extender::sim::SimInfo& info = r->info;
  std::printf("\nsimulate gpu-mix: %d nodes, %d jobs, %d pods, %.1f simulated days, percentageOfNodesToScore %s\n",
              info.nodes, info.jobs, info.pods, info.simulated_seconds / 86400,
              size.percentage == 0 ? "adaptive" : StrCat(size.percentage).c_str());
  std::printf("  wall %.1f s (berth %.1f s, baseline %.1f s, on two threads); simulated/wall %.0fx\n",
              info.wall_seconds, r->berth.wall_seconds, r->baseline.wall_seconds,
              info.simulated_seconds / std::max(info.wall_seconds, 1e-9));
  for (const extender::sim::RunMetrics* m : {&r->berth, &r->baseline}) {
    double verbs = 0;
    for (const auto& [verb, s] : m->verb_seconds) verbs += s;
    std::printf("  %-8s attempts %lld, jobs completed %lld of %d; wall in berth's verbs and ticks %.1f s, "
                "in the simulator %.1f s (%.1f us per attempt)\n",
                m->world.c_str(), static_cast<long long>(m->scheduling_attempts),
                static_cast<long long>(m->jobs_completed), info.jobs, verbs, m->wall_seconds - verbs,
                (m->wall_seconds - verbs) * 1e6 / std::max<double>(1, static_cast<double>(m->scheduling_attempts)));
  }
  for (const char* verb : {"filter", "prioritize", "bind", "preempt", "tick"}) {
    auto c = r->berth.verb_calls.find(verb);
    if (c == r->berth.verb_calls.end()) continue;
    const double us = PerCall(r->berth, verb);
    const double base = std::string(verb) == "filter" ? inproc.filter_us
                        : std::string(verb) == "prioritize" ? inproc.prioritize_us : 0;
    std::printf("  %-10s %9lld calls  %9.1f us per call", verb, static_cast<long long>(c->second), us);
    if (base > 0 && size.percentage == 100) {
      std::printf("  (in process on the empty cluster, every node a candidate: %.1f us; ratio %.2fx)", base,
                  us / base);
    }
    std::printf("\n");
  }
  const extender::sim::Summary b = extender::sim::Summarize(r->berth, info);
  const extender::sim::Summary a = extender::sim::Summarize(r->baseline, info);
  std::printf("  gpu utilisation %.1f%% vs %.1f%%, wait p99 %.0f s vs %.0f s, partial gangs %lld vs %lld\n",
              100 * b.utilisation_gpu, 100 * a.utilisation_gpu, b.wait_p99, a.wait_p99,
              static_cast<long long>(b.partial_gangs_stuck), static_cast<long long>(a.partial_gangs_stuck));
  int failed = 0;
  if (r->berth.jobs.size() != static_cast<size_t>(info.jobs) || r->baseline.jobs.size() != static_cast<size_t>(info.jobs)) {
    std::printf("FAIL: job outcomes missing\n");
    failed = 1;
  }
  return failed;
}

}  // namespace

int RunSimBench(bool quick, const std::string& size) {
  std::vector<Size> sizes;
  if (!size.empty()) {
    int n = 0, j = 0;
    if (std::sscanf(size.c_str(), "%dx%d", &n, &j) != 2 || n < 1 || j < 1) {
      std::printf("--simulate=%s: expected NODESxJOBS, e.g. 5000x50000\n", size.c_str());
      return 2;
    }
    sizes.push_back({n, j, 0.1});
  } else if (quick) {
    sizes.push_back({200, 1000, 0.5});
  } else {
    sizes.push_back({1000, 10000, 0.1});
    sizes.push_back({5000, 50000, 0.1});
    sizes.push_back({5000, 50000, 0.1, 0});
  }
  std::printf("berth_bench --simulate%s: gpu-mix over a simulated week (quick: a day), berth and the "
              "baseline together\n", quick ? " --quick (smoke run: figures are not meaningful)" : "");
  int failed = 0;
  for (const Size& s : sizes) failed |= RunOne(s);
  return failed;
}

}  // namespace berth::bench
