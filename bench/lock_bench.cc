// The model's exclusive lock under load (issue 15): every write to the model (a watch event, a
// bind's Assume, a reservation) holds the lock exclusively, and every verb waits meanwhile. On
// the 5,000-node profile (50,000 bound pods) plus pending pods of berth's, through the Service
// verbs in-process, four phases of the same length, each on its own start of the lock figures:
//   1. the scheduler thread alone: filter (500 candidates) then prioritize of a pending pod,
//      back to back: the do-nothing baseline of the verbs' latency;
//   2. the bind thread alone, at a steady rate: the baseline of bind's latency;
//   3. the event thread alone, at a steady rate (pod upserts and deletes, node label changes);
//   4. all three at once.
// It prints the longest exclusive hold (exact) and the p99 hold (the upper bound of its bucket
// in the histogram GET /metrics exposes) per phase, then the verbs' p50 and p99 with all three
// running, and their ratio to phases 1 and 2.
#include "bench/lock_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/cluster_profiles.h"
#include "bench/loadgen.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/k8s_codec.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "policy/registry.h"

namespace berth::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Binds and events arrive at these rates, about what kube-scheduler and a busy API server's
// watches deliver on a cluster of this size.
constexpr int kBindsPerSecond = 100;
constexpr int kEventsPerSecond = 1000;

// The scheduler thread asks about pending pods 0..kVerbPods-1; the bind thread binds the others.
constexpr int kVerbPods = 64;

class AcceptingBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

/// Pending pod `j` of berth's (1 CPU, 2 GiB) in one of the profile's queues.
core::Pod PendingPod(int j) {
  core::Pod pod;
  pod.uid = StrCat("lock-bench-", j);
  pod.ns = "bench-lock";
  pod.name = StrCat("pending-", j);
  pod.scheduler_name = "berth-scheduler";
  pod.labels.Set("berth.io/queue", StrCat("q-", j % kBenchQueues));
  pod.creation = absl::FromUnixSeconds(1'767'225'600);
  pod.request.Set(core::kCpu, 1000);
  pod.request.Set(core::kMemory, int64_t{2} << 30);
  pod.request.Set(core::kPods, 1);
  return pod;
}

struct Setup {
  ClusterProfile profile;
  core::RealClock clock;
  core::ClusterModel model{&clock};
  AcceptingBinder binder;
  std::unique_ptr<extender::Service> service;
  std::vector<std::string> verb_bodies;  // filter / prioritize ExtenderArgs, one per pending pod
  int pending = 0;
};

std::unique_ptr<Setup> Build(const ClusterProfile& p, int pending) {
  auto s = std::make_unique<Setup>();
  s->profile = p;
  s->pending = pending;
  LoadModel(p, &s->model);
  std::vector<core::ModelEvent> events;
  for (int j = 0; j < pending; ++j) events.emplace_back(core::PodUpsert{PendingPod(j)});
  s->model.Apply(events);
  auto pipeline =
      policy::BuildDefaultRegistry().Build(policy::PolicyConfig{}, s->model.resources());
  if (!pipeline.ok()) {
    std::fprintf(stderr, "lock bench: %s\n", std::string(pipeline.status().message()).c_str());
    std::exit(2);
  }
  extender::ServiceOptions so;
  so.mode = extender::Mode::kKubernetes;  // binds wait for the watch: the ledger holds them
  s->service = std::make_unique<extender::Service>(so, &s->model, *std::move(pipeline),
                                                   &s->binder, &s->clock);
  s->service->SetReady(true);
  for (int j = 0; j < kVerbPods; ++j) {
    const std::string pod = extender::EncodePod(PendingPod(j), s->model.resources()).dump();
    s->verb_bodies.push_back(
        ArgsNamesJson(p, pod, CandidateIndices(p, p.CandidateCount(), 1000 + j)));
  }
  return s;
}

struct Figures {
  LatencyStats filter, prioritize, bind;
  core::HoldTimes::Snapshot holds;
  int64_t events = 0;
  int64_t refused = 0;  // binds answered with an Error (the node had no room)
  int failures = 0;     // answers other than 200
};

/// One phase: the threads asked for, for `seconds`, on the lock figures started afresh.
/// `next_bind` (the next pending pod to bind) and `serial` (churn pods) go on across phases.
Figures RunPhase(Setup& s, double seconds, bool verbs, bool binds, bool events, int* next_bind,
                 int64_t* serial) {
  Figures f;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  s.model.write_lock_holds().Reset();
  std::vector<std::thread> threads;
  if (verbs) {
    threads.emplace_back([&] {
      for (size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const std::string& body = s.verb_bodies[i % s.verb_bodies.size()];
        int64_t t = Now();
        const extender::Reply a = s.service->Filter(body);
        f.filter.Add(Now() - t);
        t = Now();
        const extender::Reply b = s.service->Prioritize(body);
        f.prioritize.Add(Now() - t);
        if (a.status != 200 || b.status != 200) ++failures;
      }
    });
  }
  // A steady rate: the i-th operation starts at start + i / rate (or at once when late).
  auto paced = [&](int per_second, auto&& op) {
    const Clock::time_point start = Clock::now();
    for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      std::this_thread::sleep_until(start + std::chrono::nanoseconds(i * 1'000'000'000 / per_second));
      op(i);
    }
  };
  if (binds) {
    threads.emplace_back([&] {
      paced(kBindsPerSecond, [&](int64_t) {
        // Past the pods the scheduler thread asks about, each pod bound once.
        const int j = kVerbPods + (*next_bind)++ % (s.pending - kVerbPods);
        const core::Pod pod = PendingPod(j);
        const nlohmann::json args = {{"PodName", pod.name},
                                     {"PodNamespace", pod.ns},
                                     {"PodUID", pod.uid},
                                     {"Node", NodeName(s.profile, (j * 7919) % s.profile.nodes)}};
        const int64_t t = Now();
        const extender::Reply r = s.service->Bind(args.dump());
        f.bind.Add(Now() - t);
        if (r.status != 200) {
          ++failures;
        } else if (nlohmann::json::parse(r.body).value("Error", "") != "") {
          ++f.refused;
        }
      });
    });
  }
  if (events) {
    threads.emplace_back([&] {
      std::vector<core::Pod> churn;  // live churn pods, oldest first
      paced(kEventsPerSecond, [&](int64_t i) {
        const int node = static_cast<int>((i * 104729) % s.profile.nodes);
        if (i % 10 == 9) {
          // A node label change (as a node controller or an operator makes them).
          core::Node n = MakeNode(s.profile, node);
          n.labels.Set("bench.berth.io/revision", StrCat(i));
          s.model.Apply(core::ModelEvent(core::NodeUpsert{std::move(n)}));
        } else if (i % 2 == 0 || churn.size() < 100) {
          churn.push_back(MakeChurnPod(s.profile, node, (*serial)++));
          s.model.Apply(core::ModelEvent(core::PodUpsert{churn.back()}));
        } else {
          const core::Pod& gone = churn.front();
          s.model.Apply(core::DeleteEventFor(core::PodUpsert{gone}));
          churn.erase(churn.begin());
        }
        ++f.events;
      });
      for (const core::Pod& gone : churn) {
        s.model.Apply(core::DeleteEventFor(core::PodUpsert{gone}));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& t : threads) t.join();
  f.holds = s.model.write_lock_holds().Read();
  f.failures = failures.load();
  return f;
}

/// The upper bound of the bucket the p-th percentile hold falls in, in microseconds (-1 above
/// the last bound, 0 when nothing was held).
double HoldPercentileUs(const core::HoldTimes::Snapshot& h, double p) {
  if (h.count == 0) return 0;
  const double rank = p / 100.0 * static_cast<double>(h.count);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.buckets.size(); ++i) {
    cumulative += h.buckets[i];
    if (static_cast<double>(cumulative) >= rank) {
      return static_cast<double>(core::HoldTimes::kBoundsNs[i]) / 1e3;
    }
  }
  return -1;
}

std::string Us(int64_t ns) { return absl::StrFormat("%.1f us", static_cast<double>(ns) / 1e3); }

void HoldLines(const char* phase, const Figures& f) {
  const double p99 = HoldPercentileUs(f.holds, 99);
  std::printf("%s: longest exclusive hold %s; p99 hold <= %s (%llu writes)\n", phase,
              Us(f.holds.max_ns).c_str(),
              p99 < 0 ? "above 1 s" : absl::StrFormat("%.1f us", p99).c_str(),
              static_cast<unsigned long long>(f.holds.count));
}

void LatencyLine(const char* verb, int percentile, const LatencyStats& loaded,
                 const LatencyStats& alone) {
  const int64_t l = loaded.Percentile(percentile);
  const int64_t a = alone.Percentile(percentile);
  std::printf("%s p%d: %s with binds and events; %s alone; %.2fx\n", verb, percentile,
              Us(l).c_str(), Us(a).c_str(),
              static_cast<double>(l) / static_cast<double>(std::max<int64_t>(a, 1)));
}

}  // namespace

int RunLockBench(bool quick, double seconds) {
  ClusterProfile p = Profile5k();
  if (quick) p.nodes = 500;
  if (seconds <= 0) seconds = quick ? 0.3 : 5;
  const int pending = 2000;
  std::printf("\n## The model's exclusive lock (%d nodes, %d bound pods, %d pending pods of berth's; "
              "%d candidates per verb; binds %d/s, watch events %d/s; %.1f s per phase)\n\n",
              p.nodes, p.PodCount(), pending, p.CandidateCount(), kBindsPerSecond,
              kEventsPerSecond, seconds);
  std::unique_ptr<Setup> s = Build(p, pending);
  int next_bind = 0;
  int64_t serial = 0;
  const Figures verbs = RunPhase(*s, seconds, true, false, false, &next_bind, &serial);
  const Figures binds = RunPhase(*s, seconds, false, true, false, &next_bind, &serial);
  const Figures events = RunPhase(*s, seconds, false, false, true, &next_bind, &serial);
  const Figures all = RunPhase(*s, seconds, true, true, true, &next_bind, &serial);

  HoldLines("binds alone", binds);
  HoldLines("watch events alone", events);
  HoldLines("verbs, binds and events at once", all);
  LatencyLine("filter", 50, all.filter, verbs.filter);
  LatencyLine("filter", 99, all.filter, verbs.filter);
  LatencyLine("prioritize", 50, all.prioritize, verbs.prioritize);
  LatencyLine("prioritize", 99, all.prioritize, verbs.prioritize);
  LatencyLine("bind", 50, all.bind, binds.bind);
  LatencyLine("bind", 99, all.bind, binds.bind);
  std::printf("calls with binds and events: %lld filter, %lld prioritize, %lld bind (%lld refused: "
              "no room), %lld events\n",
              static_cast<long long>(all.filter.Count()),
              static_cast<long long>(all.prioritize.Count()),
              static_cast<long long>(all.bind.Count()), static_cast<long long>(all.refused),
              static_cast<long long>(all.events));
  const int failures = verbs.failures + binds.failures + events.failures + all.failures;
  if (failures > 0) std::fprintf(stderr, "FAIL: %d verb call(s) answered other than 200\n", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace berth::bench
