#pragma once

// Runs the ETA forecast (extender/sim/forecast.h) for `berth serve`, off the request path: a
// pass when the model changed since the last one and eta.intervalSeconds has passed, its answer
// handed to the Service (/debug/explain, /debug/queues, /metrics), and in Kubernetes mode the
// `berth.io/eta` annotation on waiting pods, rate-limited (docs/decisions.md, "ETA").

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "extender/config.h"
#include "extender/eta.h"
#include "extender/service.h"

namespace berth::extender::sim {

class EtaRunner {
 public:
  /// \param config berth's configuration: policies, scheduler name, topology and eta.*.
  EtaRunner(Service* service, const core::Clock* clock, Config config);

  /// Where annotations go (Kubernetes mode); none by default.
  void SetAnnotator(EtaAnnotatorInterface* annotator) { annotator_ = annotator; }
  /// Runs each pass on a thread of its own ("eta-pass") whose priority drops to nice 19 once
  /// the live model is copied, so a pass takes only CPU the verbs leave (`berth serve` does).
  void SetLowPriority(bool low) { low_priority_ = low; }
  /// A flag that, once true, ends a pass in progress at its next check (ForecastOptions::stop).
  void SetStop(const std::atomic<bool>* stop) { stop_ = stop; }
  /// The nice value the latest pass ran its forecast at (read on its thread as it ended).
  int last_pass_nice() const { return last_pass_nice_; }

  /// One step of the loop `berth serve` runs every second: a pass if one is due, then the
  /// annotations due. \return whether a pass ran.
  bool Step();
  /// Runs a pass now, whatever the interval, and hands its answer to the service.
  absl::Status RunPass();
  /// Writes the annotations due (at most eta.annotationsPerSecond per second of the service's
  /// clock). \return how many were written.
  int WriteAnnotations();

 private:
  /// Queues the annotation of every waiting pod whose written ETA is missing or moved a lot.
  void PlanAnnotations(const Forecast& f);

  Service* service_;
  const core::Clock* clock_;
  Config config_;
  EtaAnnotatorInterface* annotator_ = nullptr;
  bool low_priority_ = false;
  const std::atomic<bool>* stop_ = nullptr;
  int last_pass_nice_ = 0;
  absl::Time last_pass_ = absl::InfinitePast();
  uint64_t last_generation_ = ~uint64_t{0};
  /// Pod key -> value to write, in key order; written oldest-queued first is not needed: every
  /// entry is due, and the rate limit only spreads them.
  std::map<std::string, std::string> due_;
  double tokens_ = 0;
  absl::Time last_refill_ = absl::InfinitePast();
};

}  // namespace berth::extender::sim
