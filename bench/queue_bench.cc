// Queues and fair share (issue 6): the admission decision with 10,000 pending jobs in 100
// queues on 5,000 nodes. In-process, on the 5,000-node profile with its background pods:
//   - a full admission plan (FairShare::Replan), against the same plan with no pending job
//     (the cost of reading the cluster) measured in the same run;
//   - the filter verb of a pending pod the current plan covers, against the same filter with
//     the queue module off (the same pipeline otherwise), interleaved;
//   - the filter verb of a pod that just arrived (planned anew when plans are cheap; else it
//     waits for the next plan, made at most every planReuseMilliseconds);
//   - a housekeeping pass in Kubernetes mode, as the leader runs it every 5 s, with the same
//     pending jobs and waiting gangs on top: the reclaim check of every pod that waited past
//     the grace, and the planning of gangs kube-scheduler keeps from berth's filter. Against
//     the same pass on the same cluster with nothing pending.
#include "bench/queue_bench.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/cluster_profiles.h"
#include "bench/loadgen.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/k8s_codec.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "policy/queue/queue.h"
#include "policy/registry.h"

namespace berth::bench {
namespace {

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class AcceptBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

/// The leader's evictor, counting what it is asked to evict (the pods stay: every pass sees the
/// same cluster).
class CountingEvictor final : public extender::EvictorInterface {
 public:
  absl::Status Evict(const core::Pod&, const core::Pod&, std::string_view) override {
    ++evictions;
    return absl::OkStatus();
  }
  int64_t evictions = 0;
};

/// Pending job `j` (one pod): queue j % queues, 4 to 16 CPUs and 16 GiB, every fifth with 2
/// GPUs, one of the priority levels, created a second apart. More than the cluster holds.
core::Pod PendingJob(int j, int queues, absl::Time t0) {
  core::Pod pod;
  pod.uid = StrCat("queued-", j);
  pod.ns = "bench-queues";
  pod.name = StrCat("job-", j);
  pod.scheduler_name = "berth-scheduler";
  pod.labels.Set("berth.io/queue", StrCat("team-", j % queues));
  static constexpr int32_t kPriorities[] = {10, 100, 1000, 1000, 100};
  pod.priority = kPriorities[j % 5];
  pod.creation = t0 - absl::Seconds(20000 - j);
  pod.request.Set(core::kCpu, 4000 * (1 + j % 4));
  pod.request.Set(core::kMemory, int64_t{16} << 30);
  pod.request.Set(core::kPods, 1);
  if (j % 5 == 0) pod.request.Set(core::kNvidiaGpu, 2);
  return pod;
}

constexpr int kGangSize = 4;

/// Waiting gang `g`: a PodGroup of minMember 4 and its 4 members (8 CPUs, 64 GiB and 4 GPUs
/// each), in queue g % queues, made an hour before t0.
std::vector<core::ModelEvent> WaitingGang(int g, int queues, absl::Time t0) {
  std::vector<core::ModelEvent> events;
  core::PodGroup group;
  group.ns = "bench-gangs";
  group.name = StrCat("gang-", g);
  group.min_member = kGangSize;
  events.emplace_back(core::PodGroupUpsert{.podgroup = group});
  for (int m = 0; m < kGangSize; ++m) {
    core::Pod pod;
    pod.uid = StrCat("gang-", g, "-", m);
    pod.ns = group.ns;
    pod.name = StrCat(group.name, "-", m);
    pod.scheduler_name = "berth-scheduler";
    pod.labels.Set("berth.io/queue", StrCat("team-", g % queues));
    pod.labels.Set("scheduling.x-k8s.io/pod-group", group.name);
    pod.priority = 1000;
    pod.creation = t0 - absl::Hours(1);
    pod.request.Set(core::kCpu, 8000);
    pod.request.Set(core::kMemory, int64_t{64} << 30);
    pod.request.Set(core::kPods, 1);
    pod.request.Set(core::kNvidiaGpu, 4);
    events.emplace_back(core::PodUpsert{std::move(pod)});
  }
  return events;
}

struct Setup {
  core::RealClock clock;
  core::ClusterModel model{&clock};
  AcceptBinder binder;
  CountingEvictor evictor;
  std::unique_ptr<extender::Service> service;
};

std::unique_ptr<Setup> Build(const ClusterProfile& p, int jobs, int queues, bool with_queue, int gangs = 0) {
  auto s = std::make_unique<Setup>();
  LoadModel(p, &s->model);
  std::vector<core::ModelEvent> events;
  for (int q = 0; q < queues; ++q) {
    core::Queue queue;
    queue.name = StrCat("team-", q);
    queue.weight = 1 + q % 4;
    events.emplace_back(core::QueueUpsert{std::move(queue)});
  }
  const absl::Time t0 = absl::Now();
  for (int j = 0; j < jobs; ++j) events.emplace_back(core::PodUpsert{PendingJob(j, queues, t0)});
  for (int g = 0; g < gangs; ++g) {
    for (core::ModelEvent& e : WaitingGang(g, queues, t0)) events.push_back(std::move(e));
  }
  s->model.Apply(events);
  policy::PolicyConfig config;
  if (!with_queue) config.admission = {"gpu-min-cpu", "gang"};
  auto pipeline = policy::BuildDefaultRegistry().Build(config, s->model.resources());
  if (!pipeline.ok()) {
    std::fprintf(stderr, "queue bench: %s\n", std::string(pipeline.status().message()).c_str());
    std::exit(1);
  }
  extender::ServiceOptions so;
  so.mode = extender::Mode::kKubernetes;  // the model is the API server's: filters learn nothing
  s->service = std::make_unique<extender::Service>(so, &s->model, *std::move(pipeline), &s->binder,
                                                   &s->clock);
  s->service->SetEvictor(&s->evictor);
  return s;
}

std::string Ms(double ns) { return absl::StrFormat("%.2f", ns / 1e6); }

void Line(const char* what, const LatencyStats& s) {
  auto p = s.Percentiles({50, 99});
  std::printf("| %s | %lld | %s / %s / %s |\n", what, static_cast<long long>(s.Count()), Ms(p[0]).c_str(),
              Ms(s.Mean()).c_str(), Ms(p[1]).c_str());
}

}  // namespace

int RunQueueBench(bool quick) {
  ClusterProfile p = Profile5k();
  const int jobs = quick ? 1000 : 10000;
  const int queues = quick ? 10 : 100;
  if (quick) p.nodes = 500;
  const int rounds = quick ? 3 : 15;
  std::printf("\n## Queues: the admission decision (%d pending jobs in %d queues, %d nodes)\n\n", jobs,
              queues, p.nodes);

  int failures = 0;
  // The plan itself.
  LatencyStats plan, empty_plan;
  size_t admitted = 0;
  {
    std::unique_ptr<Setup> full = Build(p, jobs, queues, true);
    std::unique_ptr<Setup> none = Build(p, 0, queues, true);
    policy::FairShare book(policy::QueueConfig{}, "berth-scheduler");
    policy::FairShare empty_book(policy::QueueConfig{}, "berth-scheduler");
    for (int r = 0; r < rounds; ++r) {
      {
        auto view = none->model.Read();
        const int64_t t = Now();
        auto x = empty_book.Replan(*view, absl::Now());
        empty_plan.Add(Now() - t);
      }
      auto view = full->model.Read();
      const int64_t t = Now();
      auto x = book.Replan(*view, absl::Now());
      plan.Add(Now() - t);
      admitted = x->admitted();
      if (x->jobs.size() != static_cast<size_t>(jobs)) {
        std::fprintf(stderr, "FAIL: the plan has %zu jobs, expected %d\n", x->jobs.size(), jobs);
        ++failures;
      }
    }
  }
  std::printf("| measured | runs | p50 / mean / p99 ms |\n|---|---|---|\n");
  Line("admission plan, pending jobs as above", plan);
  Line("baseline: the same cluster, no pending job", empty_plan);
  std::printf("\nplan / baseline (p50): %.1fx; jobs admitted by the plan: %zu of %d\n",
              static_cast<double>(plan.Percentile(50)) / std::max<int64_t>(empty_plan.Percentile(50), 1),
              admitted, jobs);

  // The filter verb: covered by a fresh plan, against the queue module off.
  std::unique_ptr<Setup> on = Build(p, jobs, queues, true);
  std::unique_ptr<Setup> off = Build(p, jobs, queues, false);
  const std::vector<int> cand = CandidateIndices(p, p.CandidateCount(), 11);
  LatencyStats covered, baseline, fresh;
  const absl::Time t0 = absl::Now();
  const int calls = quick ? 50 : 400;
  for (int i = 0; i < calls; ++i) {
    const core::Pod pod = PendingJob(i * 7 % jobs, queues, t0);
    const std::string body =
        ArgsNamesJson(p, extender::EncodePod(pod, on->model.resources()).dump(), cand);
    int64_t t = Now();
    extender::Reply a = off->service->Filter(body);
    baseline.Add(Now() - t);
    t = Now();
    extender::Reply b = on->service->Filter(body);
    covered.Add(Now() - t);
    if (a.status != 200 || b.status != 200) {
      std::fprintf(stderr, "FAIL: filter answered %d / %d\n", a.status, b.status);
      ++failures;
    }
  }
  // A pod the plan has not seen: it arrives, then kube-scheduler filters it.
  for (int i = 0; i < (quick ? 5 : 20); ++i) {
    core::Pod pod = PendingJob(jobs + i, queues, t0);
    on->model.Apply(core::ModelEvent(core::PodUpsert{pod}));
    const std::string body =
        ArgsNamesJson(p, extender::EncodePod(pod, on->model.resources()).dump(), cand);
    const int64_t t = Now();
    extender::Reply r = on->service->Filter(body);
    fresh.Add(Now() - t);
    if (r.status != 200) ++failures;
  }
  std::printf("\n| filter (%zu candidates) | calls | p50 / mean / p99 ms |\n|---|---|---|\n", cand.size());
  Line("pending pod, plan reused", covered);
  Line("baseline: queue module off", baseline);
  Line("new pod, just arrived", fresh);
  std::printf("\nreused / baseline (p50): %.2fx; new pod / baseline (p50): %.1fx\n",
              static_cast<double>(covered.Percentile(50)) / std::max<int64_t>(baseline.Percentile(50), 1),
              static_cast<double>(fresh.Percentile(50)) / std::max<int64_t>(baseline.Percentile(50), 1));

  // Housekeeping, as the leader runs it: the pending jobs above and waiting gangs, against the
  // same cluster with nothing pending. Evictions are counted, not carried out, so every pass
  // sees the same cluster.
  const int gangs = quick ? 50 : 500;
  LatencyStats housekeeping, empty_housekeeping;
  int64_t evictions = 0;
  {
    std::unique_ptr<Setup> full = Build(p, jobs, queues, true, gangs);
    std::unique_ptr<Setup> none = Build(p, 0, queues, true);
    for (int r = 0; r < rounds; ++r) {
      int64_t t = Now();
      none->service->Housekeeping();
      empty_housekeeping.Add(Now() - t);
      t = Now();
      full->service->Housekeeping();
      housekeeping.Add(Now() - t);
    }
    evictions = full->evictor.evictions;
  }
  std::printf("\n| housekeeping pass | runs | p50 / mean / p99 ms |\n|---|---|---|\n");
  const std::string with = StrCat("pending jobs as above and ", gangs, " waiting gangs of ", kGangSize);
  Line(with.c_str(), housekeeping);
  Line("baseline: the same cluster, nothing pending", empty_housekeeping);
  std::printf("\nhousekeeping / baseline (p50): %.1fx; evictions asked over the passes: %lld\n",
              static_cast<double>(housekeeping.Percentile(50)) /
                  std::max<int64_t>(empty_housekeeping.Percentile(50), 1),
              static_cast<long long>(evictions));
  std::printf("peak RSS: %.1f MiB\n", PeakRssKiB() / 1024.0);
  if (failures > 0) std::fprintf(stderr, "%d check(s) FAILED\n", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace berth::bench
