#include "policy/gpu/gpu.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "core/checked_math.h"
#include "core/quantity.h"
#include "core/strings.h"

namespace berth::policy {

std::string FormatCores(int64_t milli) {
  std::string out;
  // The magnitude as unsigned, so INT64_MIN has one too.
  const uint64_t m =
      milli < 0 ? uint64_t{0} - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  if (milli < 0) out.push_back('-');
  StrAppend(&out, m / 1000);
  uint64_t frac = m % 1000;
  if (frac == 0) return out;
  out.push_back('.');
  for (uint64_t div = 100; frac != 0; div /= 10) {
    out.push_back(static_cast<char>('0' + frac / div));
    frac %= div;
  }
  return out;
}

// ---- gpu-affinity ------------------------------------------------------------------------------

int64_t GpuAffinityScore::Score(const CycleContext& ctx, const core::NodeState& node) const {
  if (RequestsGpu(ctx.pod)) return kMaxScore;
  return HasGpus(node) ? 0 : kMaxScore;
}

// ---- gpu-reserve -------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GpuReserveFilter>> GpuReserveFilter::Create(
    const GpuConfig& config) {
  if (config.reserved_cpu_per_gpu_milli < 0) {
    return absl::InvalidArgumentError(StrCat("gpu.reservedCpuPerGpu is ",
                                             core::FormatMilli(config.reserved_cpu_per_gpu_milli),
                                             "; expected 0 (off) or more"));
  }
  if (config.reserved_memory_per_gpu < 0) {
    return absl::InvalidArgumentError(StrCat("gpu.reservedMemoryPerGpu is ",
                                             core::FormatUnits(config.reserved_memory_per_gpu),
                                             "; expected 0 (off) or more"));
  }
  return std::unique_ptr<GpuReserveFilter>(
      new GpuReserveFilter(config.reserved_cpu_per_gpu_milli, config.reserved_memory_per_gpu));
}

GpuReserveFilter::GpuReserveFilter(int64_t cpu_per_gpu_milli, int64_t memory_per_gpu)
    : cpu_per_gpu_milli_(cpu_per_gpu_milli), memory_per_gpu_(memory_per_gpu) {
  const std::string cpu = StrCat(core::FormatMilli(cpu_per_gpu_milli_), " cpu");
  const std::string memory = StrCat(core::FormatUnits(memory_per_gpu_), " memory");
  constexpr std::string_view kPrefix = "berth: CPU-only pods may not use the ";
  constexpr std::string_view kMiddle = " reserved for the node's free GPUs (";
  cpu_message_ = StrCat(kPrefix, "cpu", kMiddle, cpu, " per GPU)");
  memory_message_ = StrCat(kPrefix, "memory", kMiddle, memory, " per GPU)");
  both_message_ = StrCat(kPrefix, "cpu and memory", kMiddle, cpu, " and ", memory, " per GPU)");
}

namespace {

/// One resource's side of the reservation on one node.
struct Reserve {
  int64_t want = 0;       ///< the pod's request
  int64_t free = 0;       ///< allocatable - requested - in-flight binds
  int64_t reserved = 0;   ///< free GPUs x per-GPU amount
  bool is_short = false;  ///< want > free - reserved
};

Reserve CheckReserve(const CycleContext& ctx, const core::NodeState& node, core::ResourceId id,
                     int64_t per_gpu, int64_t free_gpus) {
  const core::Pod& pod = ctx.pod;
  Reserve r;
  r.want = pod.request.Get(id);
  if (r.want <= 0 || per_gpu <= 0) return r;
  r.free = ctx.FreeOf(node, id);
  // Room held for this very pod is its own, not taken.
  if (const core::ResourceVector* own = ctx.state.OwnReservation(pod.uid, node)) {
    r.free = core::SaturatingAdd(r.free, own->Get(id));
  }
  r.reserved = core::SaturatingMul(free_gpus, per_gpu);
  r.is_short = r.want > core::SaturatingSub(r.free, r.reserved);
  return r;
}

void AppendReserveDetail(std::string* out, const core::ResourceNames& names, core::ResourceId id,
                         const Reserve& r) {
  auto amount = [&](int64_t v) { return core::FormatAmount(names, id, v); };
  const int64_t unreserved = std::max<int64_t>(core::SaturatingSub(r.free, r.reserved), 0);
  StrAppend(out, "; ", names.Name(id), ": free ", amount(r.free), ", reserved ",
            amount(r.reserved), ", pod requests ", amount(r.want), ": short by ",
            amount(core::SaturatingSub(r.want, unreserved)));
}

}  // namespace

bool GpuReserveFilter::Skips(const CycleContext& ctx) const {
  // CheckReserve finds nothing short for a resource the pod does not request or that keeps none.
  auto keeps = [&](core::ResourceId id, int64_t per_gpu) { return per_gpu > 0 && ctx.pod.request.Get(id) > 0; };
  return RequestsGpu(ctx.pod) || (!keeps(core::kCpu, cpu_per_gpu_milli_) && !keeps(core::kMemory, memory_per_gpu_));
}

bool GpuReserveFilter::Filter(const CycleContext& ctx, const core::NodeState& node, NodeVerdict* why) const {
  if (RequestsGpu(ctx.pod) || !HasGpus(node)) return true;
  const int64_t alloc_gpus = node.AllocatableOf(core::kNvidiaGpu);
  const int64_t free_gpus = ctx.FreeOf(node, core::kNvidiaGpu);
  if (free_gpus <= 0) return true;
  const Reserve cpu = CheckReserve(ctx, node, core::kCpu, cpu_per_gpu_milli_, free_gpus);
  const Reserve memory = CheckReserve(ctx, node, core::kMemory, memory_per_gpu_, free_gpus);
  if (!cpu.is_short && !memory.is_short) return true;
  *why = NodeVerdict{.fit = Fit::kUnschedulable, .reason = Reason::kGpuReserved};
  if (!ctx.messages) return false;
  NodeVerdict& v = *why;
  v.message = cpu.is_short && memory.is_short ? both_message_
              : cpu.is_short                ? cpu_message_
                                            : memory_message_;
  if (ctx.explain) {
    const core::ResourceNames& names = ctx.state.resources();
    v.detail = StrCat(free_gpus, " of ", alloc_gpus, " GPUs free");
    if (cpu.is_short) AppendReserveDetail(&v.detail, names, core::kCpu, cpu);
    if (memory.is_short) AppendReserveDetail(&v.detail, names, core::kMemory, memory);
  }
  return false;
}

// ---- gpu-min-cpu -------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GpuMinCpuAdmission>> GpuMinCpuAdmission::Create(
    const GpuConfig& config) {
  if (config.min_cpu_per_gpu_milli < 0) {
    return absl::InvalidArgumentError(StrCat("gpu.minCpuPerGpu is ",
                                             core::FormatMilli(config.min_cpu_per_gpu_milli),
                                             "; expected 0 (off) or more"));
  }
  return std::unique_ptr<GpuMinCpuAdmission>(
      new GpuMinCpuAdmission(config.min_cpu_per_gpu_milli, config.min_cpu_action));
}

GpuMinCpuAdmission::GpuMinCpuAdmission(int64_t min_cpu_per_gpu_milli,
                                       GpuConfig::MinCpuAction action)
    : min_cpu_per_gpu_milli_(min_cpu_per_gpu_milli),
      action_(action),
      min_text_(FormatCores(min_cpu_per_gpu_milli)) {}

NodeVerdict GpuMinCpuAdmission::Check(const core::Pod& pod, bool explain) const {
  const int64_t gpus = pod.request.Get(core::kNvidiaGpu);
  if (gpus <= 0 || min_cpu_per_gpu_milli_ <= 0) return NodeVerdict::Ok();
  const int64_t cpu = pod.request.Get(core::kCpu);
  const int64_t needed = core::SaturatingMul(gpus, min_cpu_per_gpu_milli_);
  if (cpu >= needed) return NodeVerdict::Ok();
  // Per-GPU CPU truncated to the millicore: the printed figure is never above the exact one, so
  // it always reads as below the minimum.
  NodeVerdict v{.fit = action_ == GpuConfig::MinCpuAction::kReject ? Fit::kUnresolvable : Fit::kFit,
                .reason = Reason::kCpuPerGpuTooLow,
                .message = StrCat("berth: the pod requests ", FormatCores(cpu / gpus),
                                  " CPU per GPU, below the minimum of ", min_text_,
                                  " (config gpu.minCpuPerGpu)")};
  if (explain) {
    v.detail = StrCat("requests ", core::FormatMilli(cpu), " cpu for ", gpus, " GPU",
                      gpus == 1 ? "" : "s", "; at least ", core::FormatMilli(needed),
                      " cpu needed");
  }
  return v;
}

NodeVerdict GpuMinCpuAdmission::PreFilter(const CycleContext& ctx) const {
  // Under kWarn the finding is a warning, not a refusal: skip the check (and its strings).
  if (action_ != GpuConfig::MinCpuAction::kReject) return NodeVerdict::Ok();
  return Check(ctx.pod, ctx.explain);
}

// ---- settings ----------------------------------------------------------------------------------

absl::StatusOr<GpuConfig> ParseGpuSettings(const Settings& section) {
  if (absl::Status s = CheckKeys(section, {"reservedCpuPerGpu", "reservedMemoryPerGpu",
                                           "minCpuPerGpu", "minCpuPerGpuAction"});
      !s.ok()) {
    return s;
  }
  GpuConfig out;
  // Bounds far above any real machine; they keep per-node products far from the int64 range.
  constexpr int64_t kMaxCpuMilli = int64_t{1000000} * 1000;  // a million cores
  constexpr int64_t kMaxMemory = int64_t{1} << 50;           // 1Pi
  for (auto [key, target] :
       {std::pair<std::string_view, int64_t*>{"reservedCpuPerGpu", &out.reserved_cpu_per_gpu_milli},
        {"minCpuPerGpu", &out.min_cpu_per_gpu_milli}}) {
    std::optional<core::Quantity> q;
    if (absl::Status s = ReadNonNegativeQuantity(section, key, &q); !s.ok()) return s;
    if (!q) continue;
    if (q->MilliValue() > kMaxCpuMilli) {
      return section.Find(key)->Error("expected at most 1000000 cores");
    }
    *target = q->MilliValue();
  }
  std::optional<core::Quantity> memory;
  if (absl::Status s = ReadNonNegativeQuantity(section, "reservedMemoryPerGpu", &memory); !s.ok()) {
    return s;
  }
  if (memory) {
    if (memory->Value() > kMaxMemory) {
      return section.Find("reservedMemoryPerGpu")->Error("expected at most 1Pi");
    }
    out.reserved_memory_per_gpu = memory->Value();
  }
  if (absl::Status s = ReadChoice<GpuConfig::MinCpuAction>(
          section, "minCpuPerGpuAction",
          {{"warn", GpuConfig::MinCpuAction::kWarn}, {"reject", GpuConfig::MinCpuAction::kReject}},
          &out.min_cpu_action);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace berth::policy
