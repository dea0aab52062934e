#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/rw_mutex.h"

namespace berth::extender {

/// Writes the Prometheus text exposition format (version 0.0.4): one `# HELP` and `# TYPE` line
/// per family, then its samples. Label values are escaped (backslash, double quote, newline).
class PromWriter {
 public:
  explicit PromWriter(std::string* out) : out_(out) {}
  /// Starts a family. \param type counter, gauge or histogram.
  PromWriter& Family(std::string_view name, std::string_view type, std::string_view help);
  /// One sample of the current family (`name` may carry a suffix: _bucket, _sum, _count).
  PromWriter& Sample(std::string_view name,
                     const std::vector<std::pair<std::string_view, std::string_view>>& labels,
                     double value);

 private:
  std::string* out_;
};

/// Durations in seconds, in fixed buckets; lock-free.
class Histogram {
 public:
  /// Upper bounds in seconds: 50 us to 10 s, what extender calls take.
  static constexpr std::array<double, 17> kBounds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                     0.0025,  0.005,  0.01,    0.025,  0.05,
                                                     0.1,     0.25,   0.5,     1,      2.5,
                                                     5,       10};
  void Observe(absl::Duration d);
  /// Writes the _bucket, _sum and _count samples under `name` with `labels` (plus `le`).
  void Write(PromWriter& w, std::string_view name,
             const std::vector<std::pair<std::string_view, std::string_view>>& labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size()> buckets_{};  // not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_ns_{0};
};

/// Writes the _bucket (cumulative, then +Inf), _sum and _count samples of one histogram series:
/// `buckets[i]` (not cumulative) counts observations up to `bounds[i]` seconds, `count` all of
/// them.
void WriteHistogramSamples(PromWriter& w, std::string_view name,
                           const std::vector<std::pair<std::string_view, std::string_view>>& labels,
                           std::span<const double> bounds, std::span<const uint64_t> buckets,
                           uint64_t count, double sum);

/// Writes the families of the model's exclusive lock holds (ClusterModel::write_lock_holds):
/// berth_model_write_lock_hold_seconds (histogram) and berth_model_write_lock_hold_max_seconds.
void WriteModelLockMetrics(PromWriter& w, const core::HoldTimes& holds);

/// A counter per label value (a reason code, a cause), each created on first use.
class LabeledCounter {
 public:
  void Add(std::string_view label, uint64_t n = 1);
  /// (label value, count), in label order.
  std::vector<std::pair<std::string, uint64_t>> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t, std::less<>> counts_ ABSL_GUARDED_BY(mu_);
};

/// The verbs kube-scheduler calls.
enum class VerbKind : uint8_t { kFilter, kPrioritize, kBind, kPreempt };
inline constexpr std::array<std::string_view, 4> kVerbNames = {"filter", "prioritize", "bind",
                                                               "preempt"};

/// berth's counters and histograms (SPEC 7); the gauges are read from the model at each scrape
/// (Service::Metrics). Thread-safe: every verb thread counts without a shared lock.
struct Metrics {
  std::array<std::atomic<uint64_t>, 4> requests{};
  std::array<std::atomic<uint64_t>, 4> errors{};  ///< answers other than 200
  std::array<Histogram, 4> latency;
  /// Filter calls that rejected at least one node, per reason code (one per call and code).
  LabeledCounter rejections;
  LabeledCounter binds;      ///< by result: bound, refused
  LabeledCounter evictions;  ///< by cause: reclaim, gang-elastic, gang-incomplete, fair-share
  std::atomic<uint64_t> preemption_victims{0};  ///< victims the preempt verb answered with
  std::atomic<uint64_t> reclaims{0};            ///< pool reclaims started
  std::atomic<uint64_t> gang_admissions{0};
  std::atomic<uint64_t> gang_timeouts{0};
  std::atomic<uint64_t> nudges{0};

  /// Writes every counter and histogram family.
  void Write(PromWriter& w) const;
};

}  // namespace berth::extender
