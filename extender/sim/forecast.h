#pragma once

// The ETA forecast (docs/decisions.md, "ETA"): the simulator's engine run forward from a copy
// of berth's live model, in virtual time, with berth's real verbs and kube-scheduler's model,
// until every job that waits now has started or the horizon is reached.
//
// What it starts from:
// - every object of the model, the binds in flight, the room held and the gang records (a
//   ClusterModel::Fork), and the fair-share book's memory;
// - berth's running pods end at their start plus their expected run time
//   (policy::RunTimeBook::Expected: annotation, activeDeadlineSeconds, the queue's median);
//   one already past it ends now; one with none runs past the horizon;
// - other schedulers' pods run for ever; terminating pods leave after their grace period;
// - berth's waiting pods are in kube-scheduler's queue, oldest first; a gang's members together
//   (their PodGroup's minMember), any other pod on its own.
// What it does not know: jobs submitted later, nodes that will come or go, run times that
// differ from what was expected. The accuracy study (`berth simulate --eta-every`) measures
// what that costs.

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "extender/config.h"
#include "extender/eta.h"
#include "extender/sim/workload.h"
#include "policy/queue/queue.h"

namespace berth::extender::sim {

struct ForecastOptions {
  const core::ClusterModel* model = nullptr;  ///< forked, never changed
  policy::FairShare* book = nullptr;  ///< its memory is copied (read, never changed); may be null
  Config config;                              ///< berth's configuration (policies, scheduler name)
  absl::Time now;                             ///< where virtual time starts
  absl::Duration horizon = absl::Hours(7 * 24);
  /// Wall time a pass may take (0: no limit). Jobs it has not started by then get no time, and
  /// the answer says the pass was cut short (Forecast::truncated).
  absl::Duration max_wall = absl::Seconds(30);
  /// When set and true, the pass ends at its next check, as when its budget is spent: `berth
  /// serve` sets it on SIGTERM, so that a pass of many seconds at nice 19 does not hold the
  /// shutdown (and the Lease it releases) past the pod's grace period.
  const std::atomic<bool>* stop = nullptr;
  /// Called on the pass's thread once the live model and the book are copied, before the run.
  /// `berth serve` lowers the thread's priority there (EtaRunner): the copy holds the live
  /// model's reader lock, so it runs at full speed; the run must never slow the verbs.
  std::function<void()> after_copy;
  /// The accuracy study only (SimOptions::eta_knows_arrivals): jobs submitted after `now`, each
  /// at `now + after`, that the pass submits as the workload would. `berth serve` knows none.
  struct Arrival {
    absl::Duration after;
    const Job* job = nullptr;  ///< outlives the pass
    absl::Duration duration;   ///< the run time it announces, which the pass gives it
  };
  std::vector<Arrival> arrivals;
};

/// Runs one forecast pass. Errors only for a configuration the policies refuse.
absl::StatusOr<Forecast> RunForecast(const ForecastOptions& options);

}  // namespace berth::extender::sim
