#pragma once

#include <catch2/catch.hpp>

#include <functional>

#include "extender/sim/engine.h"
#include "extender/sim/generate.h"

namespace berth::testing {

/// Simulates a generated workload on its cluster, berth only (no baseline), after `set` adjusts
/// the options (berth's configuration, the answer form); REQUIREs that the run succeeds.
inline extender::sim::RunMetrics SimulateGenerated(
    const extender::sim::Generated& g, const std::function<void(extender::sim::SimOptions&)>& set) {
  extender::sim::SimOptions o;
  o.cluster_json = g.cluster_json;
  o.cluster_source = "cluster.json";
  o.workload = g.workload;
  o.workload_source = "workload.yaml";
  o.run_baseline = false;
  set(o);
  absl::StatusOr<extender::sim::SimResult> r = extender::sim::RunSimulation(o);
  INFO((r.ok() ? std::string("ok") : std::string(r.status().message())));
  REQUIRE(r.ok());
  return r->berth;
}

}  // namespace berth::testing
