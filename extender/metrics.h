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

/// Connections and request bodies of one HTTP listener (extender/http_server.h). Written by the
/// server's event loop, read at scrape time.
struct ListenerMetrics {
  /// Why a connection was closed as soon as it was accepted (after a 503).
  enum class Refused : uint8_t { kMaxConnections, kPerPeer, kFdLimit, kCount };
  static constexpr std::array<std::string_view, 3> kRefusedNames = {
      "max_connections", "max_connections_per_peer", "fd_limit"};
  /// Why an accepted connection was closed.
  enum class Closed : uint8_t {
    kDone,           ///< the client asked (Connection: close, HTTP/1.0) or the request limit
    kPeer,           ///< the client closed it
    kIdleTimeout,    ///< kept alive without a request for the idle timeout
    kHeaderTimeout,  ///< the request head did not arrive within its deadline
    kBodyTimeout,    ///< the body did not arrive within its deadline (408)
    kWriteTimeout,   ///< the client did not take the response
    kBadRequest,     ///< malformed or unsupported request (400, 411, 414, 415, 417, 431, 501)
    kTooLarge,       ///< body over the limit (413)
    kBusy,           ///< no memory for the body within its deadline (503)
    kEvicted,        ///< idle, closed to make room for a new connection at max_connections
    kShutdown,       ///< the server stopped
    kError,          ///< a socket error
    kTlsHandshake,   ///< HTTPS: the TLS handshake failed (plain HTTP, a refused client certificate)
    kCount
  };
  static constexpr std::array<std::string_view, 13> kClosedNames = {
      "done",       "peer",          "idle_timeout", "header_timeout", "body_timeout", "write_timeout",
      "bad_request", "too_large",    "busy",         "evicted",        "shutdown",     "error",
      "tls_handshake"};

  std::atomic<uint64_t> accepted{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Refused::kCount)> refused{};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Closed::kCount)> closed{};
  std::atomic<int64_t> open{0};
  /// Request bodies held (being received, waiting for or in a worker) and replies not yet taken.
  std::atomic<int64_t> bytes_in_flight{0};
  /// Requests whose body waited for room under the in-flight limit.
  std::atomic<uint64_t> waited_for_memory{0};
  /// Filter, prioritize and bind requests the event loop answered itself, with no worker (the
  /// only request at the time; extender/http_server.cc, SettleVerbs).
  std::atomic<uint64_t> answered_on_loop{0};
  /// Binds the event loop took that then had to wait while the loop had other work: the loop
  /// went to a worker thread, and the bind's thread became a worker (SettleVerbs).
  std::atomic<uint64_t> loop_handoffs{0};

  void Refuse(Refused r) { ++refused[static_cast<size_t>(r)]; }
  void Close(Closed c) { ++closed[static_cast<size_t>(c)]; }
};

/// HTTPS: the certificate's gauges and counters on GET /metrics (berth_tls_*; extender/tls.h).
struct TlsMetrics {
  std::atomic<bool> enabled{false};
  std::atomic<uint64_t> reloads{0};          ///< certificate files re-read and taken
  std::atomic<uint64_t> reload_failures{0};  ///< changed files that could not be taken
  /// The served certificate's notAfter, in seconds since the epoch.
  std::atomic<int64_t> not_after_seconds{0};
};

/// The HTTP listeners: the verb port and the read-only operations port (--ops-listen).
struct TransportMetrics {
  enum Listener : uint8_t { kVerbs = 0, kOps = 1 };
  static constexpr std::array<std::string_view, 2> kListenerNames = {"verbs", "ops"};
  std::array<ListenerMetrics, 2> listeners;
  /// HTTPS (berth serve --tls-cert-file): the certificate both listeners serve.
  TlsMetrics tls;

  /// Writes berth_http_connections_{accepted,refused,closed}_total, berth_http_connections_open,
  /// berth_http_bytes_in_flight and berth_http_requests_waited_for_memory_total; with HTTPS,
  /// berth_tls_certificate_expiry_timestamp_seconds and berth_tls_certificate_reloads_total.
  void Write(PromWriter& w) const;
};

/// Writes to the API server that are not a verb's answer (Kubernetes mode): Pool.status.
/// Evictions, nudges and Events are counted as intents (berth_intents_total).
struct ApiWriteMetrics {
  std::atomic<uint64_t> pool_status_written{0};  ///< Pool status patches the server took
  std::atomic<uint64_t> pool_status_failed{0};   ///< patches that failed (retried next pass)
  std::atomic<uint64_t> eta_annotations_written{0};  ///< berth.io/eta patches the server took
  std::atomic<uint64_t> eta_annotations_failed{0};
};

/// The ETA forecast's passes (extender/sim/eta_runner.h).
struct ForecastMetrics {
  std::atomic<uint64_t> passes{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> truncated{0};  ///< passes that spent eta.maxPassSeconds
  std::atomic<uint64_t> pass_micros_total{0};  ///< wall time of the passes
  std::atomic<uint64_t> pass_micros_last{0};
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
  std::atomic<uint64_t> nudges_not_needed{0};  ///< admitted pods never answered waiting: not patched
  std::atomic<uint64_t> nudges_deferred{0};    ///< nudges left for a later tick (nudgesPerSecond)
  /// filterAnswer "best": fitting nodes left out of filter answers, and answers that named one
  /// node where several fit (kube-scheduler then neither scores nor calls prioritize).
  std::atomic<uint64_t> filter_left_out{0};
  std::atomic<uint64_t> filter_one_node{0};
  TransportMetrics transport;
  ApiWriteMetrics api_writes;
  ForecastMetrics forecast;

  /// Writes every counter and histogram family.
  void Write(PromWriter& w) const;
};

}  // namespace berth::extender
