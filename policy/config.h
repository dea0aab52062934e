#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::policy {

/// Settings of the binpack score module.
struct BinpackConfig {
  /// Weight of each resource in the lost-opportunity score; resources not listed do not count.
  std::vector<std::pair<std::string, int64_t>> weights = {
      {"cpu", 1}, {"memory", 1}, {"nvidia.com/gpu", 4}};
};

/// Settings of the GPU placement modules (gpu-affinity, gpu-reserve, gpu-min-cpu). Amounts are
/// in the model's units: millicores for cpu, bytes for memory. 0 turns a rule off.
struct GpuConfig {
  /// gpu-reserve: CPU a GPU node keeps for each of its free GPUs, out of reach of CPU-only pods.
  int64_t reserved_cpu_per_gpu_milli = 2000;
  /// gpu-reserve: memory a GPU node keeps for each of its free GPUs.
  int64_t reserved_memory_per_gpu = int64_t{8} << 30;
  /// gpu-min-cpu: the least CPU a GPU pod should request per GPU.
  int64_t min_cpu_per_gpu_milli = 1000;
  /// gpu-min-cpu: what happens to a GPU pod below the minimum. kWarn admits it (the warning is
  /// for the event writer); kReject makes it unresolvable everywhere.
  enum class MinCpuAction : uint8_t { kWarn, kReject };
  MinCpuAction min_cpu_action = MinCpuAction::kWarn;
};

/// Settings of the pools modules.
struct PoolsConfig {
  /// How long room freed by a reclaim stays held for the pod it was freed for: until the pod
  /// binds, or this long (evicted pods get their termination grace period to exit).
  absl::Duration reclaim_timeout = absl::Minutes(2);
};

/// Settings of gangs and topology placement (SPEC 6.2, 6.3, 6.6).
struct GangConfig {
  /// How long room reserved for a gang waits for its members to bind, when the PodGroup does
  /// not say (`spec.scheduleTimeoutSeconds`).
  absl::Duration schedule_timeout = absl::Seconds(60);
  /// After berth grows or shrinks a gang beyond its minimum, it leaves the gang's size alone
  /// this long (PodGroup annotation `berth.io/freeze-window` overrides it).
  absl::Duration freeze_window = absl::Seconds(60);
  /// Evict the bound members of a gang still below minMember when its reservations ran out,
  /// so it cannot hold capacity forever. Off: the gang is reported (logs, /debug/gangs).
  bool release_incomplete = false;
  /// Node labels naming the fabric tree, top level first.
  std::vector<std::string> topology_levels = {"topology.kubernetes.io/zone", "berth.io/spine",
                                              "berth.io/leaf"};
};

/// Settings of queues and fair share (SPEC 6.4, 6.5; module "queue").
struct QueueConfig {
  /// Resource usage of a pod = CPU cores + gpu_weight x GPUs + memory_weight_per_gib x GiB.
  double gpu_weight = 8;
  double memory_weight_per_gib = 0.25;
  /// Flow forgets past usage with this half-life.
  absl::Duration half_time = absl::Minutes(10);
  /// How far a queue's non-preemptible usage may exceed its fair share, when the Queue does not
  /// say (`spec.nonPreemptibleLimitFactor`).
  double non_preemptible_limit_factor = 0.2;
  /// Resource-minutes jobs with a lifetime may draw on above the fair share, when the Queue does
  /// not say (`spec.excessBudget`).
  double excess_budget = 0;
  /// A waiting job rises one priority level per interval (never to production): aging, so a
  /// low-priority job is admitted eventually (seed 000).
  absl::Duration aging_interval = absl::Minutes(10);
  /// A plan of admissions is reused this long by filters of pods it already covers, so that a
  /// burst of filters does not recompute it for every bind in between.
  absl::Duration plan_reuse = absl::Milliseconds(250);
  /// ...and this long by filters and binds of pods it admits. An admission holds until a later
  /// plan: the admission tick's, each second, or one made for a pod the plan does not cover.
  /// A waiting pod is asked again sooner (plan_reuse): room freed may admit it.
  absl::Duration admitted_plan_reuse = absl::Milliseconds(1500);
};

/// Which policy modules run for each verb, with their settings. Names refer to the registry
/// (BuildDefaultRegistry); order matters for filters (the first failing rule is reported).
///
/// Each module parses its own section of the configuration file (Registry::RegisterSettings):
/// the sections above have a field each; a module added later keeps its parsed settings in
/// `sections` under its section's name and reads them back with Section<T>, so adding one
/// changes nothing here.
struct PolicyConfig {
  /// Pods of this schedulerName are berth's own (pools, preemption rules); others only take
  /// capacity. Set from the top-level configuration.
  std::string scheduler_name = "berth-scheduler";
  std::vector<std::string> filters = {"gang", "resource-fit", "pools", "gpu-reserve"};
  /// (module, weight); the combined score is the weighted mean of the modules that apply to
  /// the pod, so it stays in [0, kMaxScore].
  std::vector<std::pair<std::string, int64_t>> scores = {
      {"binpack", 1}, {"gpu-affinity", 1}, {"gang-topology", 2}};
  std::vector<std::string> preempt = {"pools", "gang", "resource-fit"};
  std::vector<std::string> admission = {"gpu-min-cpu", "queue", "gang"};
  std::vector<std::string> order;
  /// Modules that make room for a pod by evicting others (SPEC 6.1: pool reclaim).
  std::vector<std::string> reclaim = {"pools"};
  BinpackConfig binpack;
  GpuConfig gpu;
  PoolsConfig pools;
  GangConfig gangs;
  QueueConfig queues;
  /// Parsed settings of modules without a field above, by section name; each holds the type
  /// its module's parser returns.
  std::map<std::string, std::any, std::less<>> sections;

  /// The settings of section `name` as type T, or T's defaults when the file has no such
  /// section (a parser given an empty section returns those defaults too). An error when the
  /// section holds another type: the module's parser and its factory disagree.
  template <class T>
  absl::StatusOr<T> Section(std::string_view name) const {
    auto it = sections.find(name);
    if (it == sections.end()) return T{};
    const T* value = std::any_cast<T>(&it->second);
    if (value == nullptr) {
      return absl::InternalError(
          std::string("settings of section \"").append(name).append("\" have another type"));
    }
    return *value;
  }
};

}  // namespace berth::policy
