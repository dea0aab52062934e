#include "extender/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/strings.h"

namespace berth::extender {
namespace {

/// The text format's escaping: backslash and newline, and in label values the double quote too
/// (HELP text keeps its quotes as they are).
void AppendEscaped(std::string* out, std::string_view v, bool label_value) {
  for (char c : v) {
    switch (c) {
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '"':
        *out += label_value ? "\\\"" : "\"";
        break;
      default: *out += c;
    }
  }
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::abs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.17g", v);
}

}  // namespace

PromWriter& PromWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  *out_ += StrCat("# HELP ", name, " ");
  AppendEscaped(out_, help, /*label_value=*/false);
  *out_ += StrCat("\n# TYPE ", name, " ", type, "\n");
  return *this;
}

PromWriter& PromWriter::Sample(std::string_view name,
                               const std::vector<std::pair<std::string_view, std::string_view>>& labels,
                               double value) {
  *out_ += name;
  if (!labels.empty()) {
    *out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) *out_ += ',';
      first = false;
      *out_ += k;
      *out_ += "=\"";
      AppendEscaped(out_, v, /*label_value=*/true);
      *out_ += '"';
    }
    *out_ += '}';
  }
  *out_ += ' ';
  *out_ += Number(value);
  *out_ += '\n';
  return *this;
}

void Histogram::Observe(absl::Duration d) {
  const double s = absl::ToDoubleSeconds(d);
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (s <= kBounds[i]) {
      buckets_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_relaxed);
}

void Histogram::Write(PromWriter& w, std::string_view name,
                      const std::vector<std::pair<std::string_view, std::string_view>>& labels) const {
  // Read the total first: buckets read later can only be at least as full.
  const uint64_t count = count_.load(std::memory_order_relaxed);
  const double sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  std::array<uint64_t, kBounds.size()> buckets;
  for (size_t i = 0; i < kBounds.size(); ++i) buckets[i] = buckets_[i].load(std::memory_order_relaxed);
  WriteHistogramSamples(w, name, labels, kBounds, buckets, count, sum);
}

void WriteHistogramSamples(PromWriter& w, std::string_view name,
                           const std::vector<std::pair<std::string_view, std::string_view>>& labels,
                           std::span<const double> bounds, std::span<const uint64_t> buckets,
                           uint64_t count, double sum) {
  // Clamped to the count, and the +Inf bucket is the count itself, so the buckets stay
  // cumulative and monotonic in one scrape although they are read one by one.
  uint64_t cumulative = 0;
  const std::string bucket = StrCat(name, "_bucket");
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += buckets[i];
    auto with_le = labels;
    const std::string le = Number(bounds[i]);
    with_le.emplace_back("le", le);
    w.Sample(bucket, with_le, static_cast<double>(std::min(cumulative, count)));
  }
  auto inf = labels;
  inf.emplace_back("le", "+Inf");
  w.Sample(bucket, inf, static_cast<double>(count));
  w.Sample(StrCat(name, "_sum"), labels, sum);
  w.Sample(StrCat(name, "_count"), labels, static_cast<double>(count));
}

void WriteModelLockMetrics(PromWriter& w, const core::HoldTimes& holds) {
  const core::HoldTimes::Snapshot s = holds.Read();
  std::array<double, core::HoldTimes::kBoundsNs.size()> bounds;
  for (size_t i = 0; i < bounds.size(); ++i) {
    bounds[i] = static_cast<double>(core::HoldTimes::kBoundsNs[i]) / 1e9;
  }
  w.Family("berth_model_write_lock_hold_seconds", "histogram",
           "How long each write to the model (watch events, binds, reservations) held its lock "
           "exclusively; verbs and other writes wait meanwhile.");
  WriteHistogramSamples(w, "berth_model_write_lock_hold_seconds", {}, bounds, s.buckets, s.count,
                        static_cast<double>(s.sum_ns) / 1e9);
  w.Family("berth_model_write_lock_hold_max_seconds", "gauge",
           "The longest exclusive hold of the model's lock since berth started.");
  w.Sample("berth_model_write_lock_hold_max_seconds", {}, static_cast<double>(s.max_ns) / 1e9);
}

void LabeledCounter::Add(std::string_view label, uint64_t n) {
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(label);
  if (it == counts_.end()) it = counts_.emplace(std::string(label), 0).first;
  it->second += n;
}

std::vector<std::pair<std::string, uint64_t>> LabeledCounter::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return {counts_.begin(), counts_.end()};
}

void TransportMetrics::Write(PromWriter& w) const {
  // One sample per listener of the value `get` reads from its metrics.
  auto per_listener = [&](std::string_view name, std::string_view type, std::string_view help,
                          auto get) {
    w.Family(name, type, help);
    for (size_t l = 0; l < listeners.size(); ++l) {
      w.Sample(name, {{"listener", kListenerNames[l]}}, static_cast<double>(get(listeners[l])));
    }
  };
  // One sample per listener and reason.
  auto per_reason = [&](std::string_view name, std::string_view help, const auto& names,
                        auto counters) {
    w.Family(name, "counter", help);
    for (size_t l = 0; l < listeners.size(); ++l) {
      for (size_t r = 0; r < names.size(); ++r) {
        w.Sample(name, {{"listener", kListenerNames[l]}, {"reason", names[r]}},
                 static_cast<double>((listeners[l].*counters)[r].load()));
      }
    }
  };
  per_listener("berth_http_connections_accepted_total", "counter",
               "Connections accepted, by listener (verbs, ops).",
               [](const ListenerMetrics& m) { return m.accepted.load(); });
  per_reason("berth_http_connections_refused_total",
             "Connections answered 503 and closed as soon as accepted, by listener and reason "
             "(max_connections, max_connections_per_peer, fd_limit).",
             ListenerMetrics::kRefusedNames, &ListenerMetrics::refused);
  per_reason("berth_http_connections_closed_total",
             "Accepted connections closed, by listener and reason (done, peer, idle_timeout, "
             "header_timeout, body_timeout, write_timeout, bad_request, too_large, busy, evicted, "
             "shutdown, error, tls_handshake).",
             ListenerMetrics::kClosedNames, &ListenerMetrics::closed);
  per_listener("berth_http_connections_open", "gauge", "Connections open now, by listener.",
               [](const ListenerMetrics& m) { return m.open.load(); });
  per_listener("berth_http_bytes_in_flight", "gauge",
               "Request bodies held and replies not yet taken by their client, in bytes, by listener.",
               [](const ListenerMetrics& m) { return m.bytes_in_flight.load(); });
  per_listener("berth_http_requests_waited_for_memory_total", "counter",
               "Requests whose body waited for room under the listener's in-flight byte limit.",
               [](const ListenerMetrics& m) { return m.waited_for_memory.load(); });
  per_listener("berth_http_requests_answered_on_loop_total", "counter",
               "Filter, prioritize and bind requests the event loop took itself, being the only "
               "request at the time, instead of handing them to a worker.",
               [](const ListenerMetrics& m) { return m.answered_on_loop.load(); });
  per_listener("berth_http_loop_handoffs_total", "counter",
               "Binds the event loop took that waited for the API server while other work "
               "arrived: the loop moved to a worker thread and the bind finished as a worker.",
               [](const ListenerMetrics& m) { return m.loop_handoffs.load(); });
  if (tls.enabled) {
    w.Family("berth_tls_certificate_expiry_timestamp_seconds", "gauge",
             "notAfter of the certificate served over HTTPS, in seconds since the epoch.");
    w.Sample("berth_tls_certificate_expiry_timestamp_seconds", {},
             static_cast<double>(tls.not_after_seconds.load()));
    w.Family("berth_tls_certificate_reloads_total", "counter",
             "Changes of the certificate files, by result: ok (served from then on) or error "
             "(did not load; the previous certificate is still served).");
    w.Sample("berth_tls_certificate_reloads_total", {{"result", "ok"}},
             static_cast<double>(tls.reloads.load()));
    w.Sample("berth_tls_certificate_reloads_total", {{"result", "error"}},
             static_cast<double>(tls.reload_failures.load()));
  }
}

void Metrics::Write(PromWriter& w) const {
  auto per_verb = [&](std::string_view name, std::string_view help,
                      const std::array<std::atomic<uint64_t>, 4>& values) {
    w.Family(name, "counter", help);
    for (size_t i = 0; i < kVerbNames.size(); ++i) {
      w.Sample(name, {{"verb", kVerbNames[i]}}, static_cast<double>(values[i].load()));
    }
  };
  transport.Write(w);
  per_verb("berth_requests_total", "Extender calls received, by verb.", requests);
  per_verb("berth_request_errors_total",
           "Extender calls answered with an HTTP error (undecodable or refused input), by verb.",
           errors);
  w.Family("berth_request_duration_seconds", "histogram",
           "Time berth took to answer an extender call, by verb (without the HTTP transport).");
  for (size_t i = 0; i < kVerbNames.size(); ++i) {
    latency[i].Write(w, "berth_request_duration_seconds", {{"verb", kVerbNames[i]}});
  }
  auto labeled = [&](std::string_view name, std::string_view help, std::string_view label,
                     const LabeledCounter& c) {
    w.Family(name, "counter", help);
    for (const auto& [value, n] : c.Snapshot()) {
      w.Sample(name, {{label, value}}, static_cast<double>(n));
    }
  };
  labeled("berth_filter_rejections_total",
          "Filter calls that rejected at least one node, by reason code (one per call and code).",
          "reason", rejections);
  labeled("berth_binds_total", "Bind calls, by result (bound, refused).", "result", binds);
  labeled("berth_evictions_total",
          "Pods berth evicted, by cause (reclaim, gang-elastic, gang-incomplete, fair-share).",
          "cause", evictions);
  auto plain = [&](std::string_view name, std::string_view help, const std::atomic<uint64_t>& v) {
    w.Family(name, "counter", help);
    w.Sample(name, {}, static_cast<double>(v.load()));
  };
  plain("berth_preemption_victims_total",
        "Victims berth's preempt verb answered with (kube-scheduler deletes them).",
        preemption_victims);
  plain("berth_reclaims_total", "Pool reclaims started (room held, victims evicted).", reclaims);
  plain("berth_gang_admissions_total", "Gangs admitted: room reserved for their minimum at once.",
        gang_admissions);
  plain("berth_gang_timeouts_total",
        "Gang reservations that ran out before the gang's members were bound.", gang_timeouts);
  plain("berth_nudges_total",
        "Pods told to retry at once after their job was admitted (a pod annotation patch).",
        nudges);
  w.Family("berth_pool_status_writes_total", "counter",
           "Pool.status patches by result (ok, failed); a pool's status is written only when it "
           "changed, at most every pools.statusIntervalSeconds.");
  w.Sample("berth_pool_status_writes_total", {{"result", "ok"}},
           static_cast<double>(api_writes.pool_status_written.load()));
  w.Sample("berth_pool_status_writes_total", {{"result", "failed"}},
           static_cast<double>(api_writes.pool_status_failed.load()));
  w.Family("berth_eta_annotations_total", "counter",
           "berth.io/eta patches on waiting pods by result (ok, failed), at most "
           "eta.annotationsPerSecond.");
  w.Sample("berth_eta_annotations_total", {{"result", "ok"}},
           static_cast<double>(api_writes.eta_annotations_written.load()));
  w.Sample("berth_eta_annotations_total", {{"result", "failed"}},
           static_cast<double>(api_writes.eta_annotations_failed.load()));
  plain("berth_eta_passes_total", "ETA forecast passes run.", forecast.passes);
  plain("berth_eta_pass_failures_total", "ETA forecast passes that failed (logged).", forecast.failed);
  plain("berth_eta_passes_truncated_total",
        "ETA forecast passes cut short by eta.maxPassSeconds (jobs not reached get no time).", forecast.truncated);
  w.Family("berth_eta_pass_seconds_total", "counter", "Wall time spent in ETA forecast passes.");
  w.Sample("berth_eta_pass_seconds_total", {}, static_cast<double>(forecast.pass_micros_total.load()) / 1e6);
  w.Family("berth_eta_last_pass_seconds", "gauge", "Wall time of the latest ETA forecast pass.");
  w.Sample("berth_eta_last_pass_seconds", {}, static_cast<double>(forecast.pass_micros_last.load()) / 1e6);
  plain("berth_nudges_not_needed_total",
        "Admitted pods not patched because no filter answer of berth's held them back (kube-scheduler "
        "has not parked them).",
        nudges_not_needed);
  plain("berth_nudges_deferred_total",
        "Nudges left for a later admission tick by events.nudgesPerSecond.", nudges_deferred);
  plain("berth_filter_nodes_left_out_total",
        "Fitting nodes a filter answer left out because berth scored others higher (filterAnswer: best).",
        filter_left_out);
  plain("berth_filter_one_node_answers_total",
        "Filter answers that named one node where several fit (filterAnswer: best): kube-scheduler "
        "takes it without scoring and without calling prioritize.",
        filter_one_node);
}

}  // namespace berth::extender
