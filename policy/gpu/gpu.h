#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/objects.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/settings.h"

namespace berth::policy {

// GPU placement (SPEC 6.7, seeds 000 and 004): keep GPU machines for GPU work. A GPU node whose
// CPU and memory were taken by CPU-only pods strands its GPUs, which are the scarce resource;
// these modules steer CPU-only pods away from GPU nodes (score), keep a share of a GPU node's
// CPU and memory for its free GPUs (filter), and catch GPU pods that ask for too little CPU to
// feed their GPUs (admission).

/// True when the pod requests at least one nvidia.com/gpu.
inline bool RequestsGpu(const core::Pod& pod) { return pod.request.Get(core::kNvidiaGpu) > 0; }

/// True when the node advertises nvidia.com/gpu in its allocatable.
inline bool HasGpus(const core::NodeState& node) {
  return node.AllocatableOf(core::kNvidiaGpu) > 0;
}

/// Score `gpu-affinity`: a CPU-only pod scores 0 on a node with GPUs and kMaxScore on a node
/// without, so CPU-only work prefers CPU nodes whatever their fill. A GPU pod scores kMaxScore
/// everywhere: among the GPU nodes that pass the filters, the other scores (bin packing) decide.
class GpuAffinityScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "gpu-affinity"; }
  int64_t Score(const CycleContext& ctx, const core::NodeState& node) const override;
};

/// Filter `gpu-reserve`: on a GPU node, a CPU-only pod may not take the CPU and memory that the
/// node's free GPUs need, so a GPU job arriving later finds its host share still there.
///
/// free GPUs = allocatable - requested - in-flight binds (never below 0); the node keeps
/// free GPUs x `reserved_cpu_per_gpu_milli` of CPU and free GPUs x `reserved_memory_per_gpu`
/// of memory. A CPU-only pod fits when each of cpu and memory it requests is at most the node's
/// free amount minus the reserved amount. Only requested resources are checked (a pod asking no
/// memory is not refused for memory). GPU pods, nodes without GPUs and nodes whose GPUs are all
/// taken are not restricted; a per-GPU amount of 0 turns that half of the rule off.
///
/// A refusal is kUnschedulable: evicting CPU-only pods from the node frees unreserved room.
/// Resource-fit runs first in the default filter order, so a plain shortage is reported as such.
class GpuReserveFilter final : public FilterPlugin {
 public:
  /// \return an error naming the config field when an amount is negative.
  static absl::StatusOr<std::unique_ptr<GpuReserveFilter>> Create(const GpuConfig& config);
  std::string_view Name() const override { return "gpu-reserve"; }
  bool Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const override;
  /// A GPU pod, or a pod that asks for none of what is reserved.
  bool Skips(const CycleContext& ctx) const override;

 private:
  GpuReserveFilter(int64_t cpu_per_gpu_milli, int64_t memory_per_gpu);

  int64_t cpu_per_gpu_milli_;
  int64_t memory_per_gpu_;
  // The node-independent messages, built once: a refusal copies one, a fit builds nothing.
  std::string cpu_message_;
  std::string memory_message_;
  std::string both_message_;
};

/// PreFilter `gpu-min-cpu`: a GPU pod requesting less CPU per GPU than `min_cpu_per_gpu_milli`
/// starves its GPUs (data loading and launch run on the CPU). With action kReject the pod is
/// unresolvable on every node until its request changes; with kWarn (the default) it is
/// admitted.
///
/// The PreFilter point can only refuse (the pipeline keeps no fit verdict), so under kWarn
/// PreFilter lets the pod through and the warning is available from Check(): the Kubernetes-mode
/// event writer turns it into a pod event in a later change. berth's policy layer does not log.
class GpuMinCpuAdmission final : public PreFilterPlugin {
 public:
  /// \return an error naming the config field when the minimum is negative.
  static absl::StatusOr<std::unique_ptr<GpuMinCpuAdmission>> Create(const GpuConfig& config);
  std::string_view Name() const override { return "gpu-min-cpu"; }
  NodeVerdict PreFilter(const CycleContext& ctx) const override;

  /// The rule's finding for `pod`, whatever the action: an empty kFit verdict when the pod is
  /// CPU-only, asks enough CPU per GPU, or the rule is off; otherwise reason kCpuPerGpuTooLow
  /// with its message (and the numbers in the detail when `explain`), kUnresolvable under
  /// kReject and kFit under kWarn (a warning). Allocates nothing when the pod passes.
  NodeVerdict Check(const core::Pod& pod, bool explain) const;

 private:
  GpuMinCpuAdmission(int64_t min_cpu_per_gpu_milli, GpuConfig::MinCpuAction action);

  int64_t min_cpu_per_gpu_milli_;
  GpuConfig::MinCpuAction action_;
  std::string min_text_;  ///< the minimum in cores, as the message prints it ("1", "0.5")
};

/// Millicores as a decimal number of cores, truncated to the millicore: 500 -> "0.5",
/// 2000 -> "2", 1250 -> "1.25". Used in messages that speak of "CPU per GPU".
std::string FormatCores(int64_t milli);

/// Reads the "gpu" section (gpu-reserve, gpu-min-cpu): amounts are Kubernetes quantities,
/// strings or numbers, 0 turns a rule off; "minCpuPerGpuAction" is "warn" or "reject".
absl::StatusOr<GpuConfig> ParseGpuSettings(const Settings& section);

}  // namespace berth::policy
