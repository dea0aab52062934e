#include "policy/explain/explain.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/strings.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"
#include "policy/pools/pools.h"

namespace berth::policy {
namespace {

bool IsResourceShortage(Reason r) {
  return r == Reason::kInsufficientResource || r == Reason::kExceedsAllocatable;
}

/// "2 more nvidia.com/gpu and 4 more cpu": what `want` asks beyond `have`, per resource.
std::string Shortfall(const core::ResourceNames& names, const core::ResourceVector& want,
                      const core::ResourceVector& have) {
  std::string out;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t short_by = want.Get(id) - std::max<int64_t>(have.Get(id), 0);
    if (want.Get(id) <= 0 || short_by <= 0) continue;
    StrAppend(&out, out.empty() ? "" : " and ", core::FormatAmount(names, id, short_by), " more ",
              names.Name(id));
  }
  return out;
}

std::string Where(const GangPlanner* planner, const core::ClusterState& state, core::NodeSlot slot) {
  if (planner == nullptr) return "";
  const std::string path = planner->topology(state)->PathOf(slot);
  return path.empty() ? "" : StrCat(" (", path, ")");
}

/// Counterfactuals for a pod that passed admission but that no node takes: the node closest to
/// fitting by free room, or, when no node is large enough, the largest.
void ResourceCounterfactuals(const core::ClusterState& state, const core::Pod& pod,
                             const std::vector<std::pair<core::NodeSlot, Reason>>& failed,
                             const GangPlanner* planner, std::vector<std::string>* out) {
  const core::ResourceNames& names = state.resources();
  bool unoffered = false;
  for (const auto& [name, amount] : pod.unknown_requests) {
    (void)amount;
    out->push_back(StrCat("no node advertises ", name, ": it runs only once a node offers it"));
    unoffered = true;
  }
  // Resources the model knows but no node offers.
  for (size_t i = 0; i < pod.request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    if (pod.request.Get(id) <= 0) continue;
    bool offered = false;
    state.ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      offered = offered || n.node.allocatable.Get(id) > 0;
    });
    if (!offered) {
      out->push_back(StrCat("no node advertises ", names.Name(id), ": it runs only once a node offers it"));
      unoffered = true;
    }
  }
  if (unoffered) return;
  std::optional<core::NodeSlot> closest;
  double best = std::numeric_limits<double>::infinity();
  std::optional<core::NodeSlot> largest;
  double largest_gap = std::numeric_limits<double>::infinity();
  for (const auto& [slot, reason] : failed) {
    const core::NodeState& n = state.node(slot);
    if (reason == Reason::kInsufficientResource) {
      const double d = MissingFraction(pod.request, [&](core::ResourceId id) { return n.FreeOf(id); });
      if (d < best) {
        best = d;
        closest = slot;
      }
    } else if (reason == Reason::kExceedsAllocatable) {
      const double d =
          MissingFraction(pod.request, [&](core::ResourceId id) { return n.node.allocatable.Get(id); });
      if (d < largest_gap) {
        largest_gap = d;
        largest = slot;
      }
    }
  }
  if (closest) {
    const core::NodeState& n = state.node(*closest);
    out->push_back(StrCat("fits on node ", n.node.name, Where(planner, state, *closest), " once ",
                          Shortfall(names, pod.request, n.Free()),
                          " are free there (pods of lower priority could be preempted for it)"));
  } else if (largest) {
    const core::NodeState& n = state.node(*largest);
    out->push_back(StrCat("no node is large enough; the closest, ", n.node.name, ", would need ",
                          Shortfall(names, pod.request, n.node.allocatable),
                          " allocatable; or the pod asks for less"));
  }
}

void QueueCounterfactuals(const AdmissionPlan& plan, const PlannedJob& job, const Explanation& e,
                          const core::ClusterState& state, std::vector<std::string>* out) {
  const QueueFigures* q = plan.Queue(job.queue);
  switch (job.state) {
    case JobState::kUnknownQueue: {
      std::string known;
      state.ForEachQueue([&](const core::Queue& queue) { StrAppend(&known, known.empty() ? "" : ", ", queue.name); });
      out->push_back(StrCat("a Queue named ", job.queue, " exists (berth.io/v1alpha1), or the pod's ",
                            kQueueLabel, " label names one that does: ",
                            known.empty() ? std::string("default") : StrCat("default, ", known)));
      return;
    }
    case JobState::kWaiting: {
      const PlannedJob* head = plan.head ? &plan.jobs[*plan.head] : nullptr;
      out->push_back(StrCat("admitted once the ", e.waiting_ahead, " waiting job",
                            e.waiting_ahead == 1 ? "" : "s", " ahead of it (", e.waiting_ahead_in_queue,
                            " in queue ", job.queue, ") have started",
                            head != nullptr ? StrCat(", the next being ", head->key) : std::string(),
                            ", and room for ", job.request.DebugString(state.resources()),
                            " is free"));
      return;
    }
    case JobState::kHead:
    case JobState::kMayPreempt: {
      const size_t admitted = static_cast<size_t>(std::count_if(
          plan.jobs.begin(), plan.jobs.end(), [&](const PlannedJob& other) {
            return other.order < job.order && other.state == JobState::kAdmitted;
          }));
      if (admitted == 0) return;  // nothing planned ahead of it: room decides (see below)
      out->push_back(StrCat("starts once room for ", job.request.DebugString(state.resources()),
                            " is free beyond what the ", admitted, " admitted job",
                            admitted == 1 ? "" : "s", " ahead of it take",
                            admitted == 1 ? "s" : "", " (they bind first), or once pods of lower "
                            "priority are preempted for it"));
      return;
    }
    case JobState::kBackfill: {
      const PlannedJob* head = plan.head ? &plan.jobs[*plan.head] : nullptr;
      out->push_back(StrCat("starts as soon as ", head != nullptr ? head->key : std::string("the next job"),
                            " has started (it fits only in the room kept for that job), or when room "
                            "for ", job.request.DebugString(state.resources()),
                            " is free outside it"));
      return;
    }
    case JobState::kOverLimit: {
      if (q == nullptr) return;
      const double limit = (1 + q->limit_factor) * q->fair_share * plan.capacity;
      out->push_back(absl::StrFormat(
          "starts when queue %s's non-preemptible usage is at most %.1f (it is %.1f: %.1f must "
          "finish), or with a berth.io/lifetime (preemptible jobs are not held by this limit)",
          job.queue, std::max(limit - job.usage, 0.0), q->usage_nonpreemptible,
          std::max(q->usage_nonpreemptible + job.usage - limit, 0.0)));
      return;
    }
    case JobState::kOverBudget: {
      if (q == nullptr || !job.lifetime) return;
      const double left = std::max(q->budget - q->budget_used, 0.0);
      const double charge = job.usage * absl::ToDoubleMinutes(*job.lifetime);
      const absl::Duration fits_budget =
          absl::Trunc(absl::Minutes(job.usage > 0 ? left / job.usage : 0), absl::Seconds(1));
      out->push_back(absl::StrFormat(
          "starts when %.0f more resource-minutes of queue %s's excess budget are returned (jobs "
          "with a lifetime end), or with berth.io/lifetime: %s",
          std::max(charge - left, 0.0), job.queue,
          fits_budget > absl::ZeroDuration()
              ? StrCat(absl::FormatDuration(fits_budget), " or less (0s draws nothing)")
              : std::string("0s (which draws nothing)")));
      return;
    }
    default:
      return;
  }
}

void GangCounterfactuals(const Pipeline& pipeline, const core::ClusterState& state,
                         const core::Pod& pod, absl::Time now, Reason reason,
                         std::vector<std::string>* out) {
  const GangPlanner* planner = pipeline.gangs();
  auto key = GangOf(pod);
  if (planner == nullptr || !key) return;
  GangView g = ViewGang(state, key->first, key->second, planner->config());
  const CycleContext ctx{
      .state = state, .pod = pod, .now = now, .explain = false, .pipeline = &pipeline};
  switch (reason) {
    case Reason::kGangNoPodGroup:
      out->push_back(StrCat("a PodGroup ", g.Key(), " exists (scheduling.x-k8s.io/v1alpha1, spec.minMember)"));
      return;
    case Reason::kGangMembersMissing:
      out->push_back(StrCat(g.min_member - g.total(), " more member", g.min_member - g.total() == 1 ? "" : "s",
                            " of gang ", g.Key(), " exist (", g.total(), " of minMember ",
                            g.min_member, "), or minMember were ", g.total()));
      return;
    case Reason::kGangNotPlaceable: {
      const GangOutcome o = planner->PlanAdmission(ctx, g, pipeline.Eligibility(state, now));
      if (o.plan) return;
      const int short_by = g.min_member - o.placeable;
      const std::string room = StrCat("room for ", short_by, " more member",
                                      short_by == 1 ? "" : "s", " is free");
      // A gang of which no member fits has no smaller minimum to offer: only room.
      if (o.placeable <= 0) {
        out->push_back(StrCat("fits when ", room, " (no member is placeable now)"));
        return;
      }
      out->push_back(StrCat("fits if minMember were ", o.placeable, " (", o.placeable, " of ",
                            g.min_member, " members are placeable now), or when ", room));
      return;
    }
    case Reason::kGangElasticWaiting: {
      if (g.Frozen(now) && g.record != nullptr) {
        const absl::Duration left =
            absl::Trunc(g.record->resized + g.freeze_window - now, absl::Seconds(1));
        out->push_back(StrCat("gang ", g.Key(), "'s freeze window ends (in ",
                              absl::FormatDuration(left), "), and room for ",
                              pod.request.DebugString(state.resources()), " is free near the gang"));
      } else {
        out->push_back(StrCat("room for ", pod.request.DebugString(state.resources()),
                              " is free near gang ", g.Key(),
                              " (free room goes to the least fulfilled elastic gang first)"));
      }
      return;
    }
    case Reason::kGangMaxHops: {
      GangView relaxed = g;
      relaxed.max_hops.reset();
      const GangOutcome o = planner->PlanAdmission(ctx, relaxed, pipeline.Eligibility(state, now));
      if (!o.plan) return;
      out->push_back(StrCat("fits if ", kMaxHopsKey, " were ", o.plan->max_hops,
                            " (its members fit ", o.plan->max_hops, " hops apart now)"));
      return;
    }
    default:
      return;
  }
}

}  // namespace

Explanation Explain(const Pipeline& pipeline, const core::ClusterState& state, const core::Pod& pod,
                    absl::Time now, const std::string& scheduler_name) {
  Explanation e;
  e.pod = pod.Key();
  e.managed = pod.scheduler_name == scheduler_name;
  e.node = pod.node_name.str();
  e.pool = std::string(HomePoolName(pod));
  e.queue = std::string(QueueNameOf(pod));
  e.gang = std::string(core::GangNameOf(pod));
  e.priority = pod.priority;
  e.level = LevelOf(pod.priority);
  if (!e.node.empty() || !e.managed) return e;

  const CycleContext ctx{.state = state, .pod = pod, .now = now, .explain = true, .read_only = true};
  e.admission = pipeline.PreFilter(ctx);
  if (FairShare* book = pipeline.fair_share()) {
    std::shared_ptr<const AdmissionPlan> plan = book->Published(state, now);
    if (const PlannedJob* job = plan->JobOf(pod.uid.view())) {
      e.job = *job;
      for (const PlannedJob& other : plan->jobs) {
        // Ahead: before it in the order, and waiting (the job next to start counts; jobs no
        // node can take and jobs of unknown queues hold nobody back).
        if (other.order >= job->order || other.state == JobState::kAdmitted ||
            other.state == JobState::kUnplaceable || other.state == JobState::kUnknownQueue) {
          continue;
        }
        ++e.waiting_ahead;
        if (other.queue == job->queue) ++e.waiting_ahead_in_queue;
      }
      if (job->state != JobState::kAdmitted) QueueCounterfactuals(*plan, *job, e, state, &e.would_run_if);
    }
  }
  if (!e.admission.ok()) {
    GangCounterfactuals(pipeline, state, pod, now, e.admission.reason, &e.would_run_if);
    if (e.admission.reason == Reason::kCpuPerGpuTooLow) {
      // The admission's detail has the numbers: "requests 500m cpu for 1 GPU; at least 1 cpu needed".
      const std::string& d = e.admission.detail;
      const size_t at = d.find("at least ");
      e.would_run_if.push_back(at == std::string::npos
                                   ? std::string("it asks for more CPU per GPU (gpu.minCpuPerGpu)")
                                   : StrCat("it asks for ", d.substr(at, d.size() - at - std::string(" needed").size()),
                                            " (gpu.minCpuPerGpu per GPU; it ", d.substr(0, d.find(';')), ")"));
    }
    NodeGroup all{e.admission, {}};
    state.ForEachNode([&](core::NodeSlot, const core::NodeState& n) { all.nodes.push_back(n.node.name); });
    if (!all.nodes.empty()) e.rejected.push_back(std::move(all));
    return e;
  }

  // Every present node, grouped by the verdict (reason and message).
  std::map<std::pair<Reason, std::string>, size_t> group_of;
  std::vector<std::pair<core::NodeSlot, Reason>> failed;
  state.ForEachNode([&](core::NodeSlot slot, const core::NodeState& n) {
    NodeVerdict v = pipeline.FilterNode(ctx, n);
    if (v.ok()) {
      e.fits.push_back(n.node.name);
      return;
    }
    failed.emplace_back(slot, v.reason);
    auto key = std::make_pair(v.reason, v.message);
    auto it = group_of.find(key);
    if (it == group_of.end()) {
      group_of.emplace(key, e.rejected.size());
      e.rejected.push_back({std::move(v), {n.node.name}});
    } else {
      e.rejected[it->second].nodes.push_back(n.node.name);
    }
  });
  std::stable_sort(e.rejected.begin(), e.rejected.end(),
                   [](const NodeGroup& a, const NodeGroup& b) { return a.nodes.size() > b.nodes.size(); });
  // Room being reclaimed for it (pool reclaim): it runs once the victims have left.
  if (const core::Reservation* r = state.FindReservation(pod.uid.view());
      r != nullptr && r->gang.empty()) {
    const NodeVerdict v = ReclaimInProgressVerdict(state, *r);
    e.would_run_if.push_back(StrCat(v.message.substr(std::min<size_t>(v.message.size(), 7)),
                                    "; it runs there once they have left (the room is held for it)"));
  }
  if (e.fits.empty()) {
    auto any = [&](Reason r) {
      return std::any_of(failed.begin(), failed.end(), [r](const auto& f) { return f.second == r; });
    };
    if (any(Reason::kUnknownPool)) {
      e.would_run_if.push_back(StrCat("a Pool named ", e.pool, " exists (berth.io/v1alpha1), or the pod's ",
                                      "berth.io/pool annotation names one that does"));
    }
    if (any(Reason::kBorrowingDisabled)) {
      e.would_run_if.push_back(StrCat("room frees in its home pool ", e.pool, ", or pool ", e.pool,
                                      " allows borrowing (spec.disableBorrowing: false)"));
    }
    if (any(Reason::kSharingDisabled)) {
      // The pools whose nodes would take it, were they lent.
      const std::shared_ptr<const PoolMap> map = PoolMap::Build(state);
      std::vector<std::string> closed;
      for (const auto& [slot, reason] : failed) {
        if (reason != Reason::kSharingDisabled) continue;
        const std::string& name = map->pool(map->PoolOf(slot)).name;
        if (std::find(closed.begin(), closed.end(), name) == closed.end()) closed.push_back(name);
      }
      std::string names;
      for (const std::string& n : closed) StrAppend(&names, names.empty() ? "" : ", ", n);
      e.would_run_if.push_back(StrCat("pool ", names, " lends its nodes (spec.disableSharing: false), ",
                                      "or room frees in its home pool ", e.pool));
    }
    if (any(Reason::kGpuReserved)) {
      e.would_run_if.push_back(StrCat(
          "it asks for less CPU or memory: GPU nodes keep gpu.reservedCpuPerGpu and "
          "gpu.reservedMemoryPerGpu per free GPU out of reach of CPU-only pods (see the detail of "
          "the GpuReserved nodes), or their GPUs are taken"));
    }
    const bool resources = std::any_of(failed.begin(), failed.end(),
                                       [](const auto& f) { return IsResourceShortage(f.second); });
    if (resources || !pod.unknown_requests.empty()) {
      ResourceCounterfactuals(state, pod, failed, pipeline.gangs(), &e.would_run_if);
    }
  }
  return e;
}

}  // namespace berth::policy
