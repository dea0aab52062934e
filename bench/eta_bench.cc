// The ETA forecast's cost (docs/performance.md, "ETA forecast"): a pass copies the model under
// its reader lock, then runs berth's verbs forward in virtual time on the copy, on a thread of
// its own. What a pass costs in wall time, how long it holds the live model, and what it does to
// the verbs' latency while it runs.
#include "bench/eta_bench.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/cluster_profiles.h"
#include "core/strings.h"
#include "extender/config.h"
#include "extender/service.h"
#include "extender/sim/forecast.h"
#include "extender/thread_name.h"
#include "policy/registry.h"

namespace berth::bench {
namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

class NoBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

constexpr int64_t kGi = int64_t{1} << 30;

// The profile's cluster, berth's running pods announcing run times of 10 minutes to 10 hours
// (started up to an hour ago), and `waiting` jobs: one in twenty a gang of two 8-GPU pods, the
// rest single pods, a third of them asking for GPUs; four queues.
void Load(const ClusterProfile& p, int waiting, absl::Time now, core::ClusterModel* model) {
  std::vector<core::ModelEvent> events;
  AppendNodeEvents(p, 0, p.nodes, &events);
  model->Apply(events);
  events.clear();
  for (int i = 0; i < p.nodes; ++i) {
    for (int k = 0; k < p.pods_per_node; ++k) {
      core::Pod pod = MakeRunningPod(p, i, k);
      if (pod.scheduler_name == "berth-scheduler") {
        const int minutes = 10 + (i * 7919 + k * 104729) % 590;
        pod.annotations.Set("berth.io/expected-duration", StrCat(minutes, "m"));
        pod.started = now - absl::Minutes((i + k * 13) % 60);
      }
      events.emplace_back(core::PodUpsert{std::move(pod)});
    }
    if (events.size() > 20000) {
      model->Apply(events);
      events.clear();
    }
  }
  static const char* kQueues[] = {"team-a", "team-b", "team-c", "team-d"};
  for (const char* q : kQueues) {
    core::Queue queue;
    queue.name = q;
    events.emplace_back(core::QueueUpsert{std::move(queue)});
  }
  for (int j = 0; j < waiting; ++j) {
    const bool gang = j % 20 == 0;
    const int members = gang ? 2 : 1;
    if (gang) {
      core::PodGroup g;
      g.ns = "bench";
      g.name = StrCat("gang-", j);
      g.min_member = 2;
      g.creation = now - absl::Seconds(waiting - j);
      events.emplace_back(core::PodGroupUpsert{std::move(g)});
    }
    for (int m = 0; m < members; ++m) {
      core::Pod pod;
      pod.ns = "bench";
      pod.name = gang ? StrCat("gang-", j, "-", m) : StrCat("job-", j);
      pod.uid = StrCat("eta-bench-", j, "-", m);
      pod.scheduler_name = "berth-scheduler";
      pod.creation = now - absl::Seconds(waiting - j);
      pod.labels.Set("berth.io/queue", kQueues[j % 4]);
      if (gang) pod.labels.Set("scheduling.x-k8s.io/pod-group", StrCat("gang-", j));
      pod.annotations.Set("berth.io/expected-duration", StrCat(5 + (j * 31) % 240, "m"));
      pod.request.Set(core::kPods, 1);
      if (gang) {
        pod.request.Set(core::kCpu, 32000);
        pod.request.Set(core::kMemory, 256 * kGi);
        pod.request.Set(core::kNvidiaGpu, 8);
      } else if (j % 3 == 0) {
        pod.request.Set(core::kCpu, 8000);
        pod.request.Set(core::kMemory, 64 * kGi);
        pod.request.Set(core::kNvidiaGpu, 1 + j % 4);
      } else {
        pod.request.Set(core::kCpu, 4000);
        pod.request.Set(core::kMemory, 16 * kGi);
      }
      events.emplace_back(core::PodUpsert{std::move(pod)});
    }
  }
  model->Apply(events);
}

}  // namespace

int RunEtaBench(bool quick) {
  struct Size {
    int nodes, waiting;
    absl::Duration budget;  // eta.maxPassSeconds; 0: none
  };
  const std::vector<Size> sizes =
      quick ? std::vector<Size>{{300, 200, absl::ZeroDuration()}}
            : std::vector<Size>{{1000, 1000, absl::ZeroDuration()}, {5000, 10000, absl::Seconds(30)}};
  int failures = 0;
  std::printf("ETA forecast: one pass (wall), its copy of the model (reader lock held), and filter latency while passes run\n");
  std::printf("%-6s %8s %7s %9s %10s %8s %10s %8s\n", "nodes", "waiting", "budget", "pass s", "forecast", "copy ms",
              "sim hours", "no time");
  for (const Size& size : sizes) {
    ClusterProfile p = Profile1k();
    p.nodes = size.nodes;
    const absl::Time now = absl::FromUnixSeconds(1'767'229'200);
    core::FakeClock clock(now);
    core::ClusterModel model(&clock);
    Load(p, size.waiting, now, &model);
    auto pipeline = policy::BuildDefaultRegistry().Build(policy::PolicyConfig{}, model.resources());
    if (!pipeline.ok()) return 2;
    NoBinder binder;
    extender::ServiceOptions so;
    so.mode = extender::Mode::kKubernetes;
    extender::Service service(so, &model, *std::move(pipeline), &binder, &clock);
    service.SetReady(true);
    service.AdmissionTick();  // the plan the live service would have

    const extender::Config config;
    auto pass_with = [&](const extender::Config& c, const std::atomic<bool>* stop = nullptr) {
      return extender::sim::RunForecast({.model = &model, .book = service.fair_share(), .config = c,
                                         .now = now, .horizon = c.eta_horizon, .max_wall = size.budget,
                                         .stop = stop});
    };
    const auto c0 = std::chrono::steady_clock::now();
    (void)model.Fork(&clock);
    const double copy_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    // One pass, timed: the forecast, its wall seconds, and the jobs it gave no time.
    struct TimedPass {
      absl::StatusOr<extender::Forecast> forecast;
      double seconds = 0;
      int no_time = 0;
    };
    auto timed_pass = [&](const extender::Config& c) {
      const auto t0 = std::chrono::steady_clock::now();
      TimedPass t{.forecast = pass_with(c)};
      t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t.forecast.ok()) {
        for (const extender::JobEta& e : t.forecast->jobs) t.no_time += e.start ? 0 : 1;
      } else {
        std::fprintf(stderr, "FAIL: %s\n", std::string(t.forecast.status().message()).c_str());
      }
      return t;
    };
    TimedPass first = timed_pass(config);
    if (!first.forecast.ok()) return 1;
    const absl::StatusOr<extender::Forecast>& f = first.forecast;
    const double pass_s = first.seconds;
    const int unknown = first.no_time;
    if (static_cast<int>(f->jobs.size()) != size.waiting) {
      std::fprintf(stderr, "FAIL: the forecast has %zu waiting jobs of %d\n", f->jobs.size(), size.waiting);
      ++failures;
    }

    // Filter latency: a pod that fits, every node a candidate, in rounds of four phases: no
    // pass; passes back to back on another core; passes sharing the filter's core at normal
    // priority; passes sharing it at nice 19, the priority a `berth serve` pass runs at once
    // its copy is made (EtaRunner::SetLowPriority; here the copies run at nice 19 too, as the
    // thread runs pass after pass). The shared-core phases are what a busy node does.
    const std::vector<int> all = CandidateIndices(p, p.nodes, 1);
    PendingPodSpec spec = PendingPodSpecOf(PendingKind::kFits);
    const std::string body = ArgsNamesJson(p, PendingPodJson(spec), all);
    enum Phase { kIdle, kOtherCore, kSameCore, kSameCoreLow, kPhases };
    std::array<std::vector<double>, kPhases> latency;
    const int rounds = quick ? 1 : 2;
    const auto phase_length = std::chrono::milliseconds(quick ? 300 : 3000);
    cpu_set_t original;
    CPU_ZERO(&original);
    (void)pthread_getaffinity_np(pthread_self(), sizeof(original), &original);
    const bool two_cpus = CPU_COUNT(&original) >= 2;
    int first_cpu = 0;
    while (first_cpu < CPU_SETSIZE && !CPU_ISSET(first_cpu, &original)) ++first_cpu;
    auto pin = [&](pthread_t t, int cpu) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      (void)pthread_setaffinity_np(t, sizeof(one), &one);
    };
    for (int round = 0; round < rounds; ++round) {
      for (int ph = 0; ph < kPhases; ++ph) {
        if (ph == kOtherCore && !two_cpus) continue;
        std::atomic<bool> stop{false};
        std::thread background;
        if (ph != kIdle) {
          background = std::thread([&, ph] {
            if (ph == kSameCoreLow) (void)extender::LowerThisThreadPriority();
            // A pass ends with its phase, as `berth serve`'s ends on SIGTERM: at nice 19 on a
            // core other processes share, its remaining steps could take minutes of wall time.
            while (!stop) (void)pass_with(config, &stop);
          });
        }
        const bool shared = ph == kSameCore || ph == kSameCoreLow;
        if (shared) {
          pin(pthread_self(), first_cpu);
          pin(background.native_handle(), first_cpu);
        }
        const auto end = std::chrono::steady_clock::now() + phase_length;
        while (std::chrono::steady_clock::now() < end) {
          const auto s = std::chrono::steady_clock::now();
          const extender::Reply r = service.Filter(body);
          const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count();
          if (r.status != 200) ++failures;
          latency[static_cast<size_t>(ph)].push_back(us);
        }
        stop = true;
        if (background.joinable()) background.join();
        if (shared) (void)pthread_setaffinity_np(pthread_self(), sizeof(original), &original);
      }
    }
    auto print_pass = [&](const extender::Forecast& fc, double seconds, int no_time) {
      std::string calls;
      for (const auto& [verb, c] : fc.calls) StrAppend(&calls, " ", verb, " ", c.first, " (", static_cast<int>(c.second * 1000), " ms)");
      std::printf("  pass: %lld attempts;%s\n", static_cast<long long>(fc.attempts), calls.c_str());
      std::printf("%-6d %8d %7s %9.2f %10zu %8.1f %10.1f %8d\n", size.nodes, size.waiting,
                  size.budget > absl::ZeroDuration() ? absl::FormatDuration(size.budget).c_str() : "none",
                  seconds, fc.jobs.size(), copy_ms, fc.simulated_seconds / 3600, no_time);
    };
    print_pass(*f, pass_s, unknown);
    // The same pass with the manifests' filterAnswer "best": the forecast's kube-scheduler then
    // calls prioritize only for the pods berth's filter left several nodes (the ratio is to the
    // default pass above, in the same run).
    {
      extender::Config best = config;
      best.filter_answer = extender::FilterAnswer::kBest;
      const TimedPass b = timed_pass(best);
      if (!b.forecast.ok()) return 1;
      std::printf("  with filterAnswer \"best\" (the manifests'): pass %.2f s (%.2fx the pass above)\n", b.seconds,
                  pass_s > 0 ? b.seconds / pass_s : 0);
      print_pass(*b.forecast, b.seconds, b.no_time);
    }
    const std::array<const char*, kPhases> names = {"no pass", "passes on another core", "passes on the same core",
                                                    "same core, nice 19 (berth serve)"};
    for (int ph = 0; ph < kPhases; ++ph) {
      const std::vector<double>& v = latency[static_cast<size_t>(ph)];
      if (v.empty()) continue;
      const double p99 = Percentile(v, 0.99), idle99 = Percentile(latency[kIdle], 0.99);
      std::printf("  filter %-34s p50 %9.1f us  p99 %9.1f us  (p99 %.2fx no pass)  %zu calls\n", names[static_cast<size_t>(ph)],
                  Percentile(v, 0.5), p99, idle99 > 0 ? p99 / idle99 : 0, v.size());
    }
  }
  if (failures > 0) std::fprintf(stderr, "FAIL: %d failures\n", failures);
  return failures > 0 ? 1 : 0;
}

}  // namespace berth::bench
