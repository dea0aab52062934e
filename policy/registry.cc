#include "policy/registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "core/strings.h"
#include "policy/binpack/binpack.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"
#include "policy/gpu/gpu.h"
#include "policy/pools/pools.h"
#include "policy/queue/queue.h"

namespace berth::policy {

absl::Status Registry::Add(std::string name, PointMask points, Factory make) {
  if (modules_.contains(name)) {
    return absl::AlreadyExistsError(StrCat("module \"", name, "\" registered twice"));
  }
  modules_.emplace(std::move(name), Entry{points, std::move(make)});
  return absl::OkStatus();
}

std::vector<std::string> Registry::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : modules_) out.push_back(name);
  return out;
}

std::vector<std::string> Registry::NamesAt(Point point) const {
  std::vector<std::string> out;
  for (const auto& [name, e] : modules_) {
    if (e.points & Bit(point)) out.push_back(name);
  }
  return out;
}

PointMask Registry::PointsOf(std::string_view name) const {
  auto it = modules_.find(name);
  return it == modules_.end() ? 0 : it->second.points;
}

namespace {

// One configuration list: the field that holds it and the point it places modules at.
struct List {
  std::string_view field;
  Point point;
  std::vector<std::string> names;
};

}  // namespace

absl::Status Registry::AddSettings(std::string section, SettingsParser parse) {
  if (settings_.contains(section)) {
    return absl::AlreadyExistsError(StrCat("settings section \"", section, "\" registered twice"));
  }
  settings_.emplace(std::move(section), std::move(parse));
  return absl::OkStatus();
}

absl::Status Registry::ParseSettings(std::string_view section, const Settings& tree,
                                     PolicyConfig* config) const {
  auto it = settings_.find(section);
  if (it == settings_.end()) {
    return absl::NotFoundError(StrCat("no module reads settings section \"", section, "\""));
  }
  return it->second(tree, *config);
}

std::vector<std::string> Registry::SettingsNames() const {
  std::vector<std::string> out;
  for (const auto& [name, parse] : settings_) out.push_back(name);
  return out;
}

absl::StatusOr<std::unique_ptr<Pipeline>> Registry::Build(const PolicyConfig& config,
                                                          core::ResourceNames& resources) const {
  std::vector<std::string> score_names;
  for (const auto& [name, weight] : config.scores) {
    if (weight <= 0 || weight > 100) {
      return absl::InvalidArgumentError(StrCat("policy.scores: module \"", name, "\" has weight ",
                                               weight, "; expected 1..100"));
    }
    score_names.push_back(name);
  }
  const std::vector<List> lists = {
      {"policy.admission", Point::kPreFilter, config.admission},
      {"policy.filters", Point::kFilter, config.filters},
      {"policy.reclaim", Point::kPostFilter, config.reclaim},
      {"policy.preempt", Point::kPreemptionReview, config.preempt},
      {"policy.scores", Point::kScore, score_names},
      {"policy.order", Point::kQueueSort, config.order}};
  // Check every list before building anything: a module is built only for a valid configuration.
  bool uses_gangs = false, uses_queue = false;
  for (const List& list : lists) {
    std::set<std::string_view> seen;
    for (const std::string& name : list.names) {
      auto it = modules_.find(name);
      if (it == modules_.end()) {
        return absl::InvalidArgumentError(
            StrCat(list.field, ": unknown module \"", name, "\"; modules with a ",
                   PointName(list.point), " point: ", absl::StrJoin(NamesAt(list.point), ", ")));
      }
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(
            StrCat(list.field, ": module \"", name, "\" is listed twice"));
      }
      if (!(it->second.points & Bit(list.point))) {
        return absl::InvalidArgumentError(
            StrCat(list.field, ": module \"", name, "\" has no ", PointName(list.point),
                   " point; it implements: ", PointNames(it->second.points)));
      }
      uses_gangs = uses_gangs || name == "gang" || name == "gang-topology";
      uses_queue = uses_queue || name == "queue";
    }
  }
  // A module switched off leaves nothing behind: no gang planner without a gang module, no
  // fair-share book without the queue module.
  const BuildContext ctx{
      .config = config,
      .resources = resources,
      .gangs = uses_gangs ? std::make_shared<const GangPlanner>(config.gangs, config.scheduler_name)
                          : nullptr,
      .fair_share = uses_queue ? std::make_shared<FairShare>(config.queues, config.scheduler_name)
                               : nullptr};
  // One instance per module, whatever the number of points it is listed at.
  std::map<std::string_view, std::shared_ptr<Module>> built;
  auto instance = [&](const List& list,
                      const std::string& name) -> absl::StatusOr<std::shared_ptr<Module>> {
    if (auto it = built.find(name); it != built.end()) return it->second;
    absl::StatusOr<std::unique_ptr<Module>> m = modules_.find(name)->second.make(ctx);
    if (!m.ok()) {
      return absl::InvalidArgumentError(
          StrCat(list.field, ": module \"", name, "\": ", m.status().message()));
    }
    std::shared_ptr<Module> shared = *std::move(m);
    built.emplace(name, shared);
    return shared;
  };
  Pipeline::Points points;
  for (const List& list : lists) {
    for (size_t i = 0; i < list.names.size(); ++i) {
      absl::StatusOr<std::shared_ptr<Module>> m = instance(list, list.names[i]);
      if (!m.ok()) return m.status();
      switch (list.point) {
        case Point::kPreFilter:
          points.prefilter.push_back(std::dynamic_pointer_cast<PreFilterPlugin>(*m));
          // Permit and Reserve follow the PreFilter list: the pod-level gates of the bind.
          if (auto p = std::dynamic_pointer_cast<PermitPlugin>(*m)) points.permit.push_back(p);
          if (auto r = std::dynamic_pointer_cast<ReservePlugin>(*m)) points.reserve.push_back(r);
          break;
        case Point::kFilter:
          points.filter.push_back(std::dynamic_pointer_cast<FilterPlugin>(*m));
          break;
        case Point::kPostFilter:
          points.postfilter.push_back(std::dynamic_pointer_cast<PostFilterPlugin>(*m));
          break;
        case Point::kPreemptionReview:
          points.review.push_back(std::dynamic_pointer_cast<PreemptionReviewPlugin>(*m));
          break;
        case Point::kScore:
          points.score.push_back(
              {std::dynamic_pointer_cast<ScorePlugin>(*m), config.scores[i].second});
          break;
        case Point::kQueueSort:
          points.queue_sort.push_back(std::dynamic_pointer_cast<QueueSortPlugin>(*m));
          break;
        case Point::kPermit:
        case Point::kReserve:
          break;  // no list of their own
      }
    }
  }
  auto pipeline = std::make_unique<Pipeline>(std::move(points), ctx.gangs, ctx.fair_share);
  if (ctx.fair_share != nullptr) ctx.fair_share->SetPipeline(pipeline.get());
  return pipeline;
}

Registry BuildDefaultRegistry() {
  Registry r;
  // Every module berth has, by name, once each, and the configuration sections they read, each
  // parsed by its module. Registration of a fixed, distinct list cannot fail.
  (void)r.RegisterSettings("binpack", &PolicyConfig::binpack, &ParseBinpackSettings);
  (void)r.RegisterSettings("gpu", &PolicyConfig::gpu, &ParseGpuSettings);
  (void)r.RegisterSettings("pools", &PolicyConfig::pools, &ParsePoolsSettings);
  (void)r.RegisterSettings("gangs", &PolicyConfig::gangs, &ParseGangSettings);
  (void)r.RegisterSettings("queues", &PolicyConfig::queues, &ParseQueueSettings);
  (void)r.Register<ResourceFitModule>(
      "resource-fit", [](const BuildContext&) { return std::make_unique<ResourceFitModule>(); });
  (void)r.Register<PoolsModule>("pools", [](const BuildContext& ctx) {
    return std::make_unique<PoolsModule>(&ctx.resources, ctx.config.scheduler_name);
  });
  (void)r.Register<GangModule>(
      "gang", [](const BuildContext& ctx) { return std::make_unique<GangModule>(ctx.gangs); });
  (void)r.Register<GangTopologyScore>("gang-topology", [](const BuildContext& ctx) {
    return std::make_unique<GangTopologyScore>(ctx.gangs);
  });
  (void)r.Register<QueueAdmission>("queue", [](const BuildContext& ctx) {
    return std::make_unique<QueueAdmission>(ctx.fair_share);
  });
  (void)r.Register<BinpackScore>("binpack", [](const BuildContext& ctx) {
    return BinpackScore::Create(ctx.config.binpack, ctx.resources);
  });
  (void)r.Register<GpuAffinityScore>(
      "gpu-affinity", [](const BuildContext&) { return std::make_unique<GpuAffinityScore>(); });
  (void)r.Register<GpuReserveFilter>(
      "gpu-reserve", [](const BuildContext& ctx) { return GpuReserveFilter::Create(ctx.config.gpu); });
  (void)r.Register<GpuMinCpuAdmission>("gpu-min-cpu", [](const BuildContext& ctx) {
    return GpuMinCpuAdmission::Create(ctx.config.gpu);
  });
  return r;
}

}  // namespace berth::policy
