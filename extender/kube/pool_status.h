#pragma once

#include <map>
#include <string>

#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "extender/kube/client.h"
#include "extender/kube/leader.h"
#include "extender/metrics.h"
#include "nlohmann/json.hpp"

namespace berth::extender::kube {

/// Writes pool statistics (policy::ComputePoolStats, what GET /debug/pools shows) to the status
/// subresource of every Pool object (SPEC 6.1), from the leader only, at most once per interval,
/// and only for pools whose statistics changed since this writer last wrote them. Each write is
/// `PATCH /apis/berth.io/v1alpha1/pools/{name}/status` with a JSON merge patch
/// `{"status": STATUS}`, where STATUS is
///
///     {"flags": "pbs",            // the seed's flags: p, b, s, or "-" where disabled
///      "nodes": 2,                // nodes in the pool
///      "capacity":    ROW,        // its nodes' capacity
///      "allocatable": ROW,        // its nodes' allocatable
///      "used":        ROW,        // requests of every pod on its nodes (any scheduler)
///      "shared":      ROW,        // requests of other pools' pods on its nodes (lent)
///      "borrowed":    ROW,        // requests of its pods on other pools' nodes
///      "pending":     ROW,        // requests of its pods waiting to be placed
///      "lastUpdateTime": "2026-11-21T08:30:00Z"}
///
/// and every ROW has exactly the keys `cpu`, `nvidia.com/gpu`, `memory`, `ephemeral-storage`
/// (quantity strings, "0" when none) and `nodes`, `pods` (integers; see policy::PoolStats for
/// what each row counts). The key set never varies, so a merge patch leaves no stale key behind.
/// The synthetic `default` pool is written only when a Pool object named "default" exists.
///
/// Nothing is retried within a pass: a failed write (429, 5xx, transport) is logged once per pass
/// and made again on the next one; a 404 (the Pool was deleted meanwhile) forgets the pool.
class PoolStatusWriter {
 public:
  /// \param leadership nullptr: this replica always writes (leader election disabled).
  /// \param scheduler_name pods of this scheduler have home pools; the others only use capacity.
  /// \param interval the least time between two passes; zero turns the writer off.
  PoolStatusWriter(KubeClient* client, const LeadershipInterface* leadership,
                   const core::ClusterModel* model, std::string scheduler_name,
                   absl::Duration interval);

  /// Makes a pass when this replica leads and `interval` has passed since the last pass: the
  /// statistics are computed under the model's read lock, which is released before any call to
  /// the API server. Meant to be called often (main's housekeeping thread calls it every 100 ms).
  /// A replica that leads again after having not led writes every pool again. Not thread-safe:
  /// call it from one thread.
  void Tick(absl::Time now);

  /// Where writes are counted (berth_pool_status_writes_total); none by default.
  void set_metrics(ApiWriteMetrics* metrics) { metrics_ = metrics; }

 private:
  ApiWriteMetrics* metrics_ = nullptr;
  KubeClient* client_;
  const LeadershipInterface* leadership_;
  const core::ClusterModel* model_;
  std::string scheduler_name_;
  absl::Duration interval_;

  bool leading_ = false;  ///< whether this replica led at the last Tick
  absl::Time last_pass_ = absl::InfinitePast();
  /// The status last written successfully per pool, without lastUpdateTime.
  std::map<std::string, nlohmann::json, std::less<>> written_;
};

}  // namespace berth::extender::kube
