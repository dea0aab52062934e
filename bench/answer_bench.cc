// The size of berth's answers (docs/performance.md, "Answer sizes"): kube-scheduler decodes every
// filter and prioritize answer with Go's encoding/json, once per pod. Each answer is written in
// the short form berth sends and in its earlier long form (extender::AnswerForm), by two
// Services over one model, and both are read back as kube-scheduler reads them
// (extender/sim/answers.h): the same nodes pass, fail and are unresolvable, the same hosts get
// the same scores. Sizes only; nothing is timed.
#include "bench/answer_bench.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/cluster_profiles.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/service.h"
#include "extender/sim/answers.h"
#include "policy/registry.h"

namespace berth::bench {
namespace {

int g_failures = 0;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

class AcceptBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

/// GPUs the training pod of node `i` holds: three nodes in five are idle, one holds 2 to 4
/// GPUs, one all 8.
int BusyGpus(int i) {
  switch (i % 5) {
    case 3: return 2 + (i / 5) % 3;
    case 4: return 8;
    default: return 0;
  }
}

core::Pod RunningPod(const ClusterProfile& p, int i, int k, int64_t cpu_milli, int64_t memory,
                     int gpus) {
  core::Pod pod;
  pod.uid = StrCat("answer-bench-", i, "-", k);
  pod.ns = StrCat("team-", i % 20);
  pod.name = StrCat(k == 0 ? "trainer-" : "system-", i, "-", k);
  pod.scheduler_name = k == 0 ? "berth-scheduler" : "default-scheduler";
  pod.node_name = NodeName(p, i);
  pod.phase = core::PodPhase::kRunning;
  pod.creation = absl::FromUnixSeconds(1'700'000'000 + i);
  pod.request.Set(core::kCpu, cpu_milli);
  pod.request.Set(core::kMemory, memory);
  pod.request.Set(core::kPods, 1);
  if (gpus > 0) pod.request.Set(core::kNvidiaGpu, gpus);
  return pod;
}

/// Every node an 8-GPU node (96 cpu, 680Gi) running two system pods (250m, 512Mi); the busy
/// ones also run a training pod of 10 cpu and 60Gi per GPU.
void Load(const ClusterProfile& p, core::ClusterModel* model) {
  std::vector<core::ModelEvent> events;
  core::Queue queue;
  queue.name = "q-1";  // the queue PendingPodJson names
  events.emplace_back(core::QueueUpsert{std::move(queue)});
  for (int begin = 0; begin < p.nodes; begin += 1000) {
    const int end = std::min(p.nodes, begin + 1000);
    AppendNodeEvents(p, begin, end, &events);
    for (int i = begin; i < end; ++i) {
      for (int k = 1; k <= 2; ++k) {
        events.emplace_back(core::PodUpsert{RunningPod(p, i, k, 250, int64_t{512} << 20, 0)});
      }
      if (const int g = BusyGpus(i); g > 0) {
        events.emplace_back(
            core::PodUpsert{RunningPod(p, i, 0, int64_t{10'000} * g, (int64_t{60} << 30) * g, g)});
      }
    }
    model->Apply(events);
    events.clear();
  }
}

struct Case {
  std::string label;
  PendingPodSpec pod;
};

PendingPodSpec Pod(const std::string& name, const std::string& cpu, const std::string& memory,
                   int gpus) {
  PendingPodSpec s;
  s.name = name;
  s.generate_name = name.substr(0, name.rfind('-') + 1);
  s.uid = StrCat("answer-bench-", name);
  s.cpu = cpu;
  s.memory = memory;
  s.memory_limit = memory;
  s.gpus = gpus;
  return s;
}

PendingPodSpec Gang(PendingPodSpec spec, const std::string& group) {
  spec.pod_group = group;
  return spec;
}

std::string Size(size_t n) {
  if (n >= 1024) return absl::StrFormat("%.1f KB", static_cast<double>(n) / 1024);
  return StrCat(n, " B");
}

std::string Ratio(size_t after, size_t before) {
  return before == 0 ? "-" : absl::StrFormat("%.2f", static_cast<double>(after) / static_cast<double>(before));
}

/// What kube-scheduler decides from a filter answer: the names that pass, in order, and the
/// names it marks unschedulable and unresolvable (the latter wins).
struct FilterDecision {
  bool ok = false;
  std::vector<std::string> pass;
  std::set<std::string> failed, unresolvable;
  bool operator==(const FilterDecision&) const = default;
};

FilterDecision DecideFilter(const std::string& body) {
  FilterDecision d;
  absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
  if (!el.ok()) return d;
  absl::StatusOr<extender::sim::FilterAnswer> a = extender::sim::ReadFilterAnswer(*el);
  if (!a.ok() || !a->error.empty()) return d;
  d.ok = true;
  for (std::string_view n : a->names) d.pass.emplace_back(n);
  for (std::string_view n : a->unresolvable) d.unresolvable.emplace(n);
  for (std::string_view n : a->failed) {
    if (!d.unresolvable.contains(std::string(n))) d.failed.emplace(n);
  }
  return d;
}

/// What kube-scheduler takes from a prioritize answer: (host, score) per entry, in order.
std::vector<std::pair<std::string, int64_t>> DecidePrioritize(const std::string& body, bool* ok) {
  std::vector<std::pair<std::string, int64_t>> out;
  *ok = false;
  absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
  if (!el.ok()) return out;
  absl::StatusOr<std::vector<extender::sim::HostScore>> list = extender::sim::ReadPriorityList(*el);
  if (!list.ok()) return out;
  *ok = true;
  for (const extender::sim::HostScore& hs : *list) out.emplace_back(std::string(hs.host), hs.score);
  return out;
}

}  // namespace

int RunAnswerBench(bool quick) {
  ClusterProfile p;
  p.name = quick ? "gpu-300" : "gpu-5k";
  p.nodes = quick ? 300 : 5000;
  p.gpu_every = 1;
  const std::vector<int> counts = quick ? std::vector<int>{100, 300} : std::vector<int>{500, 2000, 5000};

  core::RealClock clock;
  core::ClusterModel model(&clock);
  Load(p, &model);
  AcceptBinder binder;
  auto service = [&](extender::AnswerForm form) {
    absl::StatusOr<std::unique_ptr<policy::Pipeline>> pipeline =
        policy::BuildDefaultRegistry().Build(policy::PolicyConfig{}, model.resources());
    if (!pipeline.ok()) {
      std::fprintf(stderr, "cannot build the default pipeline: %s\n", pipeline.status().ToString().c_str());
      std::exit(2);
    }
    extender::ServiceOptions o;
    o.mode = extender::Mode::kKubernetes;
    o.answers = form;
    auto s = std::make_unique<extender::Service>(o, &model, *std::move(pipeline), &binder, &clock);
    s->SetReady(true);
    return s;
  };
  const std::unique_ptr<extender::Service> now = service(extender::AnswerForm::kShort);
  const std::unique_ptr<extender::Service> before = service(extender::AnswerForm::kLong);

  const std::vector<Case> cases = {
      {"CPU-only pod (2 cpu, 8Gi)", Pod("etl-worker-0", "2", "8Gi", 0)},
      {"1-GPU pod (8 cpu, 64Gi)", Pod("finetune-0", "8", "64Gi", 1)},
      {"8-GPU pod (64 cpu, 480Gi)", Pod("pretrain-0", "64", "480Gi", 8)},
      {"gang member, PodGroup not created yet", Gang(Pod("ddp-worker-0", "16", "128Gi", 2), "ddp")},
  };
  std::printf("\nAnswer sizes: %d 8-GPU nodes (names of %zu characters), 3 in 5 idle; before = "
              "berth's earlier answers (AnswerForm::kLong), after = what it sends now\n\n",
              p.nodes, NodeName(p, 0).size());
  std::printf("| pod | candidates | filter: pass / failed / unresolvable | filter bytes before | after "
              "| after / before | prioritize: hosts (score 0) | prioritize bytes before | after | after / before |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    const std::string pod_json = PendingPodJson(c.pod);
    for (int count : counts) {
      const std::vector<int> cand = CandidateIndices(p, count, 42);
      const std::string label = StrCat(c.label, " at ", count);
      const std::string filter_body = ArgsNamesJson(p, pod_json, cand);
      const extender::Reply fa = now->Filter(filter_body);
      const extender::Reply fb = before->Filter(filter_body);
      Check(fa.status == 200 && fb.status == 200, StrCat(label, ": filter answered ", fa.status, "/", fb.status));
      const FilterDecision da = DecideFilter(fa.body);
      const FilterDecision db = DecideFilter(fb.body);
      Check(da.ok && da == db, StrCat(label, ": kube-scheduler reads the same filter decision in both forms"));
      Check(da.pass.size() + da.failed.size() + da.unresolvable.size() == cand.size(),
            StrCat(label, ": every candidate is named once"));

      // kube-scheduler asks prioritize about the nodes that passed, when more than one did.
      std::map<std::string, int> index;
      for (int i : cand) index[NodeName(p, i)] = i;
      std::vector<int> passed;
      for (const std::string& n : da.pass) passed.push_back(index.at(n));
      std::string prio = "- | - | - | -";
      if (passed.size() > 1) {
        const std::string prio_body = ArgsNamesJson(p, pod_json, passed);
        const extender::Reply pa = now->Prioritize(prio_body);
        const extender::Reply pb = before->Prioritize(prio_body);
        bool ok_a = false, ok_b = false;
        const auto sa = DecidePrioritize(pa.body, &ok_a);
        const auto sb = DecidePrioritize(pb.body, &ok_b);
        Check(pa.status == 200 && pb.status == 200 && ok_a && ok_b && sa == sb &&
                  sa.size() == passed.size(),
              StrCat(label, ": kube-scheduler reads the same hosts and scores in both forms"));
        size_t zeros = 0;
        for (const auto& [host, score] : sa) zeros += score == 0 ? 1 : 0;
        prio = StrCat(sa.size(), " (", zeros, ") | ", Size(pb.body.size()), " | ", Size(pa.body.size()),
                      " | ", Ratio(pa.body.size(), pb.body.size()));
      }
      std::printf("| %s | %d | %zu / %zu / %zu | %s | %s | %s | %s |\n", c.label.c_str(), count,
                  da.pass.size(), da.failed.size(), da.unresolvable.size(), Size(fb.body.size()).c_str(),
                  Size(fa.body.size()).c_str(), Ratio(fa.body.size(), fb.body.size()).c_str(), prio.c_str());
      std::fflush(stdout);
    }
  }
  if (g_failures > 0) {
    std::printf("\n%d check(s) FAILED: see stderr\n", g_failures);
    return 1;
  }
  std::printf("\nboth forms read back as the same decisions\n");
  return 0;
}

}  // namespace berth::bench
