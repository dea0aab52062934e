#include "policy/registry.h"

#include <algorithm>
#include <set>

#include "core/strings.h"
#include "absl/strings/str_join.h"
#include "policy/binpack/binpack.h"
#include "policy/fit/resource_fit.h"
#include "policy/gang/gang.h"
#include "policy/queue/queue.h"
#include "policy/gpu/gpu.h"
#include "policy/pools/pools.h"

namespace berth::policy {
namespace {

template <class T>
absl::Status Insert(std::map<std::string, Factory<T>>& table, std::string_view kind,
                    std::string name, Factory<T> f) {
  if (table.contains(name)) {
    return absl::AlreadyExistsError(StrCat(kind, " module \"", name, "\" registered twice"));
  }
  table.emplace(std::move(name), std::move(f));
  return absl::OkStatus();
}

template <class T>
std::vector<std::string> Names(const std::map<std::string, Factory<T>>& table) {
  std::vector<std::string> out;
  for (const auto& [name, f] : table) out.push_back(name);
  return out;
}

template <class T>
absl::StatusOr<std::vector<std::unique_ptr<T>>> BuildAll(
    const std::map<std::string, Factory<T>>& table, std::string_view kind,
    const std::vector<std::string>& names, const BuildContext& ctx) {
  std::vector<std::unique_ptr<T>> out;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    auto it = table.find(name);
    if (it == table.end()) {
      return absl::InvalidArgumentError(StrCat("unknown ", kind, " module \"", name,
                                                     "\"; known: ",
                                                     absl::StrJoin(Names(table), ", ")));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          StrCat(kind, " module \"", name, "\" is listed twice"));
    }
    absl::StatusOr<std::unique_ptr<T>> module = it->second(ctx);
    if (!module.ok()) {
      return absl::InvalidArgumentError(
          StrCat(kind, " module \"", name, "\": ", module.status().message()));
    }
    out.push_back(*std::move(module));
  }
  return out;
}

}  // namespace

absl::Status Registry::RegisterFilter(std::string name, Factory<FilterPolicyInterface> f) {
  return Insert(filters_, "filter", std::move(name), std::move(f));
}
absl::Status Registry::RegisterScore(std::string name, Factory<ScorePolicyInterface> f) {
  return Insert(scores_, "score", std::move(name), std::move(f));
}
absl::Status Registry::RegisterPreempt(std::string name, Factory<PreemptPolicyInterface> f) {
  return Insert(preempt_, "preempt", std::move(name), std::move(f));
}
absl::Status Registry::RegisterAdmission(std::string name, Factory<AdmissionPolicyInterface> f) {
  return Insert(admission_, "admission", std::move(name), std::move(f));
}
absl::Status Registry::RegisterOrder(std::string name, Factory<OrderPolicyInterface> f) {
  return Insert(order_, "order", std::move(name), std::move(f));
}

absl::Status Registry::RegisterReclaim(std::string name, Factory<ReclaimPolicyInterface> f) {
  return Insert(reclaim_, "reclaim", std::move(name), std::move(f));
}

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

std::vector<std::string> Registry::FilterNames() const { return Names(filters_); }
std::vector<std::string> Registry::ScoreNames() const { return Names(scores_); }

absl::StatusOr<std::unique_ptr<Pipeline>> Registry::Build(const PolicyConfig& config,
                                                          core::ResourceNames& resources) const {
  const BuildContext ctx{.config = config,
                         .resources = resources,
                         .gangs = std::make_shared<const GangPlanner>(config.gangs,
                                                                      config.scheduler_name),
                         .fair_share = std::make_shared<FairShare>(config.queues,
                                                                   config.scheduler_name)};
  auto admission = BuildAll(admission_, "admission", config.admission, ctx);
  const bool uses_queue =
      std::find(config.admission.begin(), config.admission.end(), "queue") != config.admission.end();
  if (!admission.ok()) return admission.status();
  auto filters = BuildAll(filters_, "filter", config.filters, ctx);
  if (!filters.ok()) return filters.status();
  std::vector<std::string> score_names;
  for (const auto& [name, weight] : config.scores) {
    if (weight <= 0 || weight > 100) {
      return absl::InvalidArgumentError(
          StrCat("score module \"", name, "\" has weight ", weight, "; expected 1..100"));
    }
    score_names.push_back(name);
  }
  auto scores = BuildAll(scores_, "score", score_names, ctx);
  if (!scores.ok()) return scores.status();
  std::vector<Pipeline::WeightedScore> weighted;
  for (size_t i = 0; i < scores->size(); ++i) {
    weighted.push_back({std::move((*scores)[i]), config.scores[i].second});
  }
  auto preempt = BuildAll(preempt_, "preempt", config.preempt, ctx);
  if (!preempt.ok()) return preempt.status();
  auto order = BuildAll(order_, "order", config.order, ctx);
  if (!order.ok()) return order.status();
  auto reclaim = BuildAll(reclaim_, "reclaim", config.reclaim, ctx);
  if (!reclaim.ok()) return reclaim.status();
  // A module switched off leaves nothing behind: no gang planner without a gang module, no
  // fair-share book without the queue module.
  auto listed = [&](std::string_view name) {
    for (const auto* list : {&config.admission, &config.filters, &config.preempt}) {
      if (std::find(list->begin(), list->end(), name) != list->end()) return true;
    }
    return std::any_of(config.scores.begin(), config.scores.end(),
                       [&](const auto& s) { return s.first == name; });
  };
  const bool uses_gangs = listed("gang") || listed("gang-topology");
  auto pipeline = std::make_unique<Pipeline>(
      *std::move(admission), *std::move(filters), std::move(weighted), *std::move(preempt),
      *std::move(order), *std::move(reclaim), uses_gangs ? ctx.gangs : nullptr,
      uses_queue ? ctx.fair_share : nullptr);
  if (uses_queue) ctx.fair_share->SetPipeline(pipeline.get());
  return pipeline;
}

Registry BuildDefaultRegistry() {
  Registry r;
  // Every module berth has, by name. Registration of a fixed, distinct list cannot fail.
  // The configuration sections the modules read, each parsed by its module.
  (void)r.RegisterSettings("binpack", &PolicyConfig::binpack, &ParseBinpackSettings);
  (void)r.RegisterSettings("gpu", &PolicyConfig::gpu, &ParseGpuSettings);
  (void)r.RegisterSettings("pools", &PolicyConfig::pools, &ParsePoolsSettings);
  (void)r.RegisterSettings("gangs", &PolicyConfig::gangs, &ParseGangSettings);
  (void)r.RegisterSettings("queues", &PolicyConfig::queues, &ParseQueueSettings);
  (void)r.RegisterFilter("resource-fit", [](const BuildContext&)
                             -> absl::StatusOr<std::unique_ptr<FilterPolicyInterface>> {
    return std::make_unique<ResourceFitFilter>();
  });
  (void)r.RegisterScore("binpack", [](const BuildContext& ctx)
                            -> absl::StatusOr<std::unique_ptr<ScorePolicyInterface>> {
    auto s = BinpackScore::Create(ctx.config.binpack, ctx.resources);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ScorePolicyInterface>(*std::move(s));
  });
  (void)r.RegisterFilter("pools", [](const BuildContext& ctx)
                             -> absl::StatusOr<std::unique_ptr<FilterPolicyInterface>> {
    return std::make_unique<PoolsFilter>(ctx.config.scheduler_name);
  });
  (void)r.RegisterReclaim("pools", [](const BuildContext& ctx)
                              -> absl::StatusOr<std::unique_ptr<ReclaimPolicyInterface>> {
    return std::make_unique<PoolsReclaim>(ctx.config.scheduler_name);
  });
  (void)r.RegisterPreempt("pools", [](const BuildContext& ctx)
                              -> absl::StatusOr<std::unique_ptr<PreemptPolicyInterface>> {
    return std::make_unique<PoolsPreempt>(&ctx.resources, ctx.config.scheduler_name);
  });
  (void)r.RegisterPreempt("resource-fit", [](const BuildContext&)
                              -> absl::StatusOr<std::unique_ptr<PreemptPolicyInterface>> {
    return std::make_unique<ResourceFitPreempt>();
  });
  (void)r.RegisterScore("gpu-affinity", [](const BuildContext&)
                            -> absl::StatusOr<std::unique_ptr<ScorePolicyInterface>> {
    return std::make_unique<GpuAffinityScore>();
  });
  (void)r.RegisterFilter("gpu-reserve", [](const BuildContext& ctx)
                             -> absl::StatusOr<std::unique_ptr<FilterPolicyInterface>> {
    auto f = GpuReserveFilter::Create(ctx.config.gpu);
    if (!f.ok()) return f.status();
    return std::unique_ptr<FilterPolicyInterface>(*std::move(f));
  });
  (void)r.RegisterAdmission("gpu-min-cpu", [](const BuildContext& ctx)
                                -> absl::StatusOr<std::unique_ptr<AdmissionPolicyInterface>> {
    auto a = GpuMinCpuAdmission::Create(ctx.config.gpu);
    if (!a.ok()) return a.status();
    return std::unique_ptr<AdmissionPolicyInterface>(*std::move(a));
  });
  (void)r.RegisterAdmission("gang", [](const BuildContext& ctx)
                                -> absl::StatusOr<std::unique_ptr<AdmissionPolicyInterface>> {
    return std::make_unique<GangAdmission>(ctx.gangs);
  });
  (void)r.RegisterAdmission("queue", [](const BuildContext& ctx)
                                -> absl::StatusOr<std::unique_ptr<AdmissionPolicyInterface>> {
    return std::make_unique<QueueAdmission>(ctx.fair_share);
  });
  (void)r.RegisterFilter("gang", [](const BuildContext&)
                             -> absl::StatusOr<std::unique_ptr<FilterPolicyInterface>> {
    return std::make_unique<GangFilter>();
  });
  (void)r.RegisterScore("gang-topology", [](const BuildContext& ctx)
                            -> absl::StatusOr<std::unique_ptr<ScorePolicyInterface>> {
    return std::make_unique<GangTopologyScore>(ctx.gangs);
  });
  (void)r.RegisterPreempt("gang", [](const BuildContext& ctx)
                              -> absl::StatusOr<std::unique_ptr<PreemptPolicyInterface>> {
    return std::make_unique<GangPreempt>(ctx.gangs);
  });
  return r;
}

}  // namespace berth::policy
