// GET /metrics (SPEC 7): berth's counters and histograms, and gauges read from the model at
// scrape time, in the Prometheus text format. Names follow Prometheus conventions: the berth_
// prefix, base units (seconds, bytes, CPU cores), _total for counters.
#include <string>
#include <vector>

#include "core/strings.h"
#include "extender/journal.h"
#include "extender/metrics.h"
#include "extender/service.h"

#include <array>

#include "extender/eta.h"
#include "policy/fragmentation/fragmentation.h"
#include "policy/pools/pools.h"
#include "policy/queue/queue.h"

namespace berth::extender {
Reply Service::Metrics() const {
  std::string out;
  PromWriter w(&out);
  w.Family("berth_build_info", "gauge", "Always 1; the labels name the build.");
  w.Sample("berth_build_info",
           {{"version", options_.version}, {"git_commit", options_.git_commit},
            {"build_type", options_.build_type}},
           1);
  w.Family("berth_ready", "gauge", "1 once the model is loaded (Kubernetes mode: first lists in).");
  w.Sample("berth_ready", {}, ready_.load() ? 1 : 0);
  metrics_.Write(w);
  intents_.WriteMetrics(w);
  if (journal_ != nullptr) journal_->WriteMetrics(w);
  WriteModelLockMetrics(w, model_->write_lock_holds());
  if (std::shared_ptr<const Forecast> f = forecast()) {
    // The latest forecast's predicted waits, from its pass: one observation per waiting job.
    static constexpr std::array<double, 11> kWaitBounds = {60, 300, 900, 1800, 3600, 7200,
                                                           14400, 28800, 86400, 259200, 604800};
    std::array<uint64_t, kWaitBounds.size()> buckets{};
    uint64_t count = 0, unknown = 0;
    double sum = 0;
    for (const JobEta& e : f->jobs) {
      if (!e.start) {
        ++unknown;
        continue;
      }
      const double wait = std::max(0.0, absl::ToDoubleSeconds(*e.start - f->at));
      for (size_t i = 0; i < kWaitBounds.size(); ++i) {
        if (wait <= kWaitBounds[i]) {
          ++buckets[i];
          break;
        }
      }
      ++count;
      sum += wait;
    }
    w.Family("berth_eta_predicted_wait_seconds", "histogram",
             "Predicted wait from now to start of each waiting job, by the latest ETA forecast.");
    WriteHistogramSamples(w, "berth_eta_predicted_wait_seconds", {}, kWaitBounds, buckets, count, sum);
    w.Family("berth_eta_unknown_jobs", "gauge",
             "Waiting jobs the latest ETA forecast could give no start time.");
    w.Sample("berth_eta_unknown_jobs", {}, static_cast<double>(unknown));
    w.Family("berth_eta_forecast_age_seconds", "gauge", "How old the latest ETA forecast is.");
    w.Sample("berth_eta_forecast_age_seconds", {}, std::max(0.0, absl::ToDoubleSeconds(clock_->Now() - f->at)));
  }

  const core::ResourceNames& names = model_->resources();
  w.Family("berth_resource_names", "gauge",
           StrCat("Distinct resource names in berth's table (limit ",
                  core::ResourceNames::kMaxResources, ")."));
  w.Sample("berth_resource_names", {}, static_cast<double>(names.size()));
  w.Family("berth_resource_names_refused_total", "counter",
           "Objects refused because they named resources new to berth and its table of resource "
           "names was full.");
  w.Sample("berth_resource_names_refused_total", {}, static_cast<double>(names.refusals()));

  w.Family("berth_verb_pods_reused_total", "counter",
           "Filter and prioritize requests whose pod was taken from the previous verb's decode "
           "(the same text): kube-scheduler's prioritize repeats its filter's pod.");
  w.Sample("berth_verb_pods_reused_total", {}, static_cast<double>(verb_pods_.hits()));

  auto view = model_->Read();
  auto gauge = [&](std::string_view name, std::string_view help, double v) {
    w.Family(name, "gauge", help);
    w.Sample(name, {}, v);
  };
  gauge("berth_nodes", "Nodes in berth's model.", static_cast<double>(view->node_count()));
  gauge("berth_pods", "Pods in berth's model (any scheduler, not finished or finished).",
        static_cast<double>(view->pod_count()));
  gauge("berth_binds_in_flight", "Binds accepted and not yet confirmed by the pod watch.",
        static_cast<double>(view->binds_in_flight()));
  gauge("berth_reservations", "Pods with room held for them (gang plans, reclaims).",
        static_cast<double>(view->reservation_count()));

  // Pools (seed 004's table).
  const std::shared_ptr<const policy::PoolMap> map = policy::PoolMap::Build(*view);
  const std::vector<policy::PoolStats> pools =
      policy::ComputePoolStats(*view, *map, options_.scheduler_name);
  for (const auto& [row, member] : policy::kPoolStatsRows) {
    const std::string name = StrCat("berth_pool_", row);
    w.Family(name, "gauge",
             StrCat("Pool statistics (GET /debug/pools), row ", row,
                    ": CPU in cores, memory and storage in bytes, GPUs, nodes and pods."));
    for (const policy::PoolStats& p : pools) {
      const policy::PoolStats::Row& r = p.*member;
      // Base units: CPU in cores (the model counts millicores), the rest as the model has them.
      for (const auto& [resource, id] : policy::kPoolStatsResources) {
        w.Sample(name, {{"pool", p.name}, {"resource", resource}},
                 static_cast<double>(r.resources.Get(id)) * (id == core::kCpu ? 1e-3 : 1));
      }
      w.Sample(name, {{"pool", p.name}, {"resource", "nodes"}}, static_cast<double>(r.nodes));
      w.Sample(name, {{"pool", p.name}, {"resource", "pods"}}, static_cast<double>(r.pods));
    }
  }

  // Fragmentation (docs/decisions.md, "Fragmentation"): per pool and per topology domain, one
  // series per switch of the fabric (hundreds at most), none per node.
  const policy::FragmentationReport frag =
      policy::MeasureFragmentation(*view, *map, *topology_.Get(*view), options_.scheduler_name);
  struct FragmentGauge {
    std::string_view suffix, help;
    double (*get)(const policy::Fragmentation&);
  };
  const FragmentGauge frag_gauges[] = {
      {"fragmentation_index",
       "Share of the free GPUs (CPU where the common request asks for none) that pods of the most "
       "common request cannot use, 0 to 1.",
       [](const policy::Fragmentation& f) { return f.index; }},
      {"pods_that_fit", "Pods of the most common request that fit now, all at once: the largest such gang.",
       [](const policy::Fragmentation& f) { return static_cast<double>(f.fits); }},
      {"whole_nodes_free", "Nodes with all their GPUs free (all their CPU, where the request asks for no GPU).",
       [](const policy::Fragmentation& f) { return static_cast<double>(f.whole_nodes); }},
      {"stranded", "Free GPUs (CPU cores) on nodes that cannot take one pod of the most common request.",
       [](const policy::Fragmentation& f) {
         return static_cast<double>(f.stranded) * (f.resource == core::kCpu ? 1e-3 : 1);
       }},
  };
  for (const FragmentGauge& g : frag_gauges) {
    const std::string pool_name = StrCat("berth_pool_", g.suffix);
    w.Family(pool_name, "gauge", StrCat(g.help, " Per pool, counted in its pods' most common request."));
    for (const policy::FragmentationReport::Scope& sc : frag.pools) {
      w.Sample(pool_name, {{"pool", sc.name}, {"resource", names.Name(sc.figures.resource)}}, g.get(sc.figures));
    }
    const std::string domain_name = StrCat("berth_domain_", g.suffix);
    w.Family(domain_name, "gauge", StrCat(g.help, " Per topology domain, counted in berth's pods' most common request."));
    for (const policy::FragmentationReport::Scope& sc : frag.domains) {
      w.Sample(domain_name, {{"level", sc.level}, {"domain", sc.name}, {"resource", names.Name(sc.figures.resource)}},
               g.get(sc.figures));
    }
  }

  // Queues (the latest admission plan).
  if (policy::FairShare* book = pipeline_->fair_share()) {
    std::shared_ptr<const policy::AdmissionPlan> plan = book->Published(*view, clock_->Now());
    w.Family("berth_admission_plans_total", "counter",
             "Admission plans made (every waiting job over the cluster), by verbs, ticks, housekeeping and readers.");
    w.Sample("berth_admission_plans_total", {}, static_cast<double>(book->plans_made()));
    w.Family("berth_admission_plan_seconds_total", "counter", "Wall time spent making admission plans.");
    w.Sample("berth_admission_plan_seconds_total", {}, book->plan_seconds());
    gauge("berth_queue_capacity",
          "Cluster capacity the queues share, in usage units (CPU cores + weighted GPUs and GiB).",
          plan->capacity);
    struct QueueGauge {
      std::string_view name, help;
      double (*get)(const policy::QueueFigures&);
    };
    const QueueGauge gauges[] = {
        {"berth_queue_weight", "Queue weight.", [](const policy::QueueFigures& q) { return q.weight; }},
        {"berth_queue_fair_share", "Fair share of the cluster, 0 to 1 (weight over the weights of queues with pods).",
         [](const policy::QueueFigures& q) { return q.fair_share; }},
        {"berth_queue_flow", "Flow, in usage units (usage with a half-life memory of the past).",
         [](const policy::QueueFigures& q) { return q.flow; }},
        {"berth_queue_usage", "Usage of the queue's running pods, in usage units.",
         [](const policy::QueueFigures& q) { return q.usage; }},
        {"berth_queue_running_pods", "Running pods of the queue.",
         [](const policy::QueueFigures& q) { return static_cast<double>(q.running_pods); }},
        {"berth_queue_pending_jobs", "Jobs of the queue waiting to be admitted.",
         [](const policy::QueueFigures& q) { return static_cast<double>(q.waiting_jobs); }},
        {"berth_queue_admitted_jobs", "Jobs of the queue admitted and not yet running.",
         [](const policy::QueueFigures& q) { return static_cast<double>(q.admitted_jobs); }},
    };
    for (const QueueGauge& g : gauges) {
      w.Family(g.name, "gauge", g.help);
      for (const policy::QueueFigures& q : plan->queues) {
        if (q.exists || q.has_pods) w.Sample(g.name, {{"queue", q.name}}, g.get(q));
      }
    }
  }
  return Reply{.status = 200, .body = std::move(out),
               .content_type = "text/plain; version=0.0.4; charset=utf-8"};
}

}  // namespace berth::extender
