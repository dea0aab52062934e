#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/answer_form.h"
#include "extender/kube/leader.h"
#include "policy/config.h"
#include "policy/registry.h"

namespace berth::extender {

/// berth's configuration file (`--config FILE`, JSON). Every field is optional; unknown fields
/// are errors, as in kube-scheduler's own strict configuration decoding. Example:
///
///     {
///       "schedulerName": "berth-scheduler",
///       "topologyLevels": ["topology.kubernetes.io/zone", "berth.io/spine", "berth.io/leaf"],
///       "maxRequestBytes": 67108864,
///       "httpThreads": 64,
///       "bindConfirmTimeoutSeconds": 600,
///       "filterAnswer": "all",
///       "policies": {"filters": ["resource-fit"], "scores": [{"name": "binpack", "weight": 1}],
///                    "preempt": ["resource-fit"]},
///       "binpack": {"weights": {"cpu": 1, "memory": 1, "nvidia.com/gpu": 4}},
///       "kubernetes": {
///         "watchTimeoutSeconds": 300,
///         "leaderElection": {"enabled": true, "mode": "acquire", "leaseName": "berth",
///                            "leaseNamespace": "", "identity": "",
///                            "leaseDurationSeconds": 15, "renewDeadlineSeconds": 10,
///                            "retryPeriodSeconds": 2}
///       },
///       "gpu": {"reservedCpuPerGpu": "2", "reservedMemoryPerGpu": "8Gi", "minCpuPerGpu": "1",
///               "minCpuPerGpuAction": "warn"},
///       "pools": {"reclaimTimeoutSeconds": 120, "statusIntervalSeconds": 10}
///     }
///
/// The "kubernetes" section matters only in Kubernetes mode; its durations accept fractions
/// (tests run elections in a fraction of a second).
///
/// The "gpu" section sets the GPU placement modules (policy::GpuConfig): the CPU and memory a
/// GPU node keeps per free GPU out of reach of CPU-only pods (gpu-reserve), and the least CPU a
/// GPU pod should request per GPU (gpu-min-cpu) with what happens below it, "warn" or "reject".
/// Amounts are Kubernetes quantities, as strings or JSON numbers; 0 turns a rule off, negative
/// amounts are errors.
struct Config {
  std::string scheduler_name = "berth-scheduler";
  std::vector<std::string> topology_levels = {"topology.kubernetes.io/zone", "berth.io/spine",
                                              "berth.io/leaf"};
  size_t max_request_bytes = 64u << 20;
  int http_threads = 64;
  absl::Duration bind_confirm_timeout = absl::Minutes(10);
  /// filterAnswer: "all" names every fitting node in the filter answer, "best" only those berth
  /// scores highest (FilterAnswer).
  FilterAnswer filter_answer = FilterAnswer::kAll;
  policy::PolicyConfig policy;
  /// Kubernetes mode: how long a watch runs before berth re-opens it (randomised up to 2x).
  absl::Duration watch_timeout = absl::Minutes(5);
  kube::LeaderElectionConfig leader_election;
  /// Kubernetes mode: how often the leader writes pool statistics to Pool.status (only pools
  /// whose statistics changed are written); zero turns it off.
  absl::Duration pool_status_interval = absl::Seconds(10);
  /// Kubernetes mode: Events about waiting pods ("events" section; see PodEventOptions).
  absl::Duration events_repeat_after = absl::Minutes(5);
  absl::Duration events_min_interval = absl::Seconds(10);
  int events_max_per_second = 20;
  /// events.nudgesPerSecond: nudges of admitted pods per admission tick (NudgeOptions).
  int nudges_per_second = 50;
  /// The ETA forecast ("eta" section; docs/decisions.md, "ETA"): how often it runs at most
  /// (intervalSeconds; 0 turns it off), how far ahead it looks (horizonHours), and how many
  /// `berth.io/eta` annotations the leader writes per second in Kubernetes mode
  /// (annotationsPerSecond; 0 writes none).
  absl::Duration eta_interval = absl::Seconds(60);
  absl::Duration eta_horizon = absl::Hours(7 * 24);
  int eta_annotations_per_second = 5;
  /// eta.maxPassSeconds: the wall time one pass may take; jobs it has not reached get no time.
  absl::Duration eta_max_pass = absl::Seconds(30);
};

/// Parses a configuration document. \param source names the file in errors.
///
/// The extender reads its own fields (server, Kubernetes, events, module lists, topology and
/// Pool.status interval); every other section belongs to a policy module and is handed, as a
/// policy::Settings tree, to the parser that module registered (Registry::RegisterSettings).
/// \param registry the modules whose sections the file may have (BuildDefaultRegistry).
absl::StatusOr<Config> ParseConfig(std::string_view json, std::string_view source,
                                   const policy::Registry& registry);
absl::StatusOr<Config> ParseConfig(std::string_view json, std::string_view source);

/// Reads and parses a configuration file; errors name the file and the field.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

/// Reads a whole file; the error names the file and the reason.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace berth::extender
