#pragma once

// Fragmentation as a number (docs/decisions.md, "Fragmentation"): for a set of nodes (a pool, a
// topology domain), how much of its free room the most common pod shape can still use, the
// largest gang of that shape and of whole nodes that fits now, and the GPUs stranded on nodes
// too full for one more pod of it.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/cluster_model.h"
#include "policy/pools/pools.h"
#include "policy/topology/topology.h"

namespace berth::policy {

/// The figures of one set of nodes against one pod shape.
struct Fragmentation {
  /// The pod shape counted in (MostCommonRequest).
  core::ResourceVector request;
  /// The resource the amounts count: nvidia.com/gpu when `request` asks for GPUs, else cpu.
  core::ResourceId resource = core::kNvidiaGpu;
  int64_t nodes = 0;        ///< schedulable nodes of the set
  /// Nodes with every unit of `resource` free: the largest gang of whole-node members that
  /// fits now.
  int64_t whole_nodes = 0;
  int64_t free = 0;         ///< free units of `resource` (GPUs; millicores of cpu)
  /// Pods of `request` that fit now, all at once (each node takes as many as its free room of
  /// every resource allows): the largest gang of them.
  int64_t fits = 0;
  /// Free units of `resource` on nodes that cannot take one pod of `request`.
  int64_t stranded = 0;
  /// 1 - fits × request[resource] / free: the share of the free units that pods of `request`
  /// cannot use, in [0, 1]; 0 when nothing is free.
  double index = 0;
};

/// One node as the figures see it, for callers with accounting of their own (the simulator).
struct NodeRoom {
  core::ResourceVector allocatable;
  core::ResourceVector free;
  bool schedulable = true;
};

Fragmentation MeasureFragmentation(std::span<const NodeRoom> nodes, const core::ResourceVector& request);

/// The same for node slots of the model: free room is berth's (allocatable less the requests of
/// bound pods, in-flight binds and room held for pods); unschedulable nodes do not count.
Fragmentation MeasureFragmentation(const core::ClusterState& state, std::span<const core::NodeSlot> nodes,
                                   const core::ResourceVector& request);

/// The most common of `requests` (equal vectors counted together): among those that ask for
/// GPUs if any do, else among all; ties go to more GPUs, then to the smaller vector. nullopt
/// when `requests` has none that asks for anything.
std::optional<core::ResourceVector> MostCommonRequest(std::span<const core::ResourceVector> requests);
/// The shape counted in where no pod gives one: one GPU when `gpu_nodes`, else one CPU core
/// (each with its pod slot).
core::ResourceVector DefaultRequest(bool gpu_nodes);

/// The figures of every pool and every topology domain of one state.
struct FragmentationReport {
  struct Scope {
    std::string level;  ///< "pool", or the topology level's label ("topology.kubernetes.io/zone")
    std::string name;   ///< the pool's name, or the domain's path ("zone-a/spine-a1")
    int depth = 0;      ///< a domain's depth (1 top level ... L); 0 for a pool
    Fragmentation figures;
  };
  std::vector<Scope> pools;    ///< in the PoolMap's order (default first)
  std::vector<Scope> domains;  ///< every domain of depth 1 to L, top level first, by path
};

/// Pools count in the most common request of berth's own pods (scheduler `scheduler_name`,
/// waiting or running) whose home pool it is; domains, and pools whose own pods give none, in
/// that of all of berth's pods; with no pods at all, DefaultRequest.
FragmentationReport MeasureFragmentation(const core::ClusterState& state, const PoolMap& pools,
                                         const Topology& topology, std::string_view scheduler_name);

/// "4 cpu, 32Gi memory, 1 nvidia.com/gpu" (the pod slot left out).
std::string DescribeRequest(const core::ResourceNames& names, const core::ResourceVector& request);

}  // namespace berth::policy
