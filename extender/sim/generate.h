#pragma once

// Synthetic workloads for `berth simulate --generate PROFILE`: seeded, from documented
// distributions (docs/simulate-workloads.md names their sources).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "extender/sim/workload.h"

namespace berth::extender::sim {

struct GenerateOptions {
  std::string profile;  ///< one of ProfileNames()
  int jobs = 0;         ///< >= 1
  int nodes = 0;        ///< cluster size; 0: the profile's default
  uint64_t seed = 1;
  /// Offered GPU load for gpu-mix and gang-fat-tree: the arrival span is chosen so that the
  /// jobs' GPU time is this fraction of the cluster's GPU time over the span (a lower load
  /// spreads the same jobs over a longer time). 0: the profile's default (1.0 and 0.95).
  double load = 0;
};

struct Generated {
  Workload workload;
  /// The cluster the workload is shaped for, as a Kubernetes `List` (nodes, Pools, Queues,
  /// PriorityClasses) that `berth serve --cluster` and `berth simulate --cluster` read.
  std::string cluster_json;
};

/// "gpu-mix", "seed-stories", "gang-fat-tree".
std::vector<std::string> ProfileNames();
/// One line per profile for --help and errors.
std::string DescribeProfiles();

/// The same options always give the same workload and cluster. Errors name the option.
absl::StatusOr<Generated> Generate(const GenerateOptions& options);

}  // namespace berth::extender::sim
