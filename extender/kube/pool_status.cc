#include "extender/kube/pool_status.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/strings.h"
#include "extender/k8s_codec.h"
#include "policy/pools/pools.h"
#include "spdlog/spdlog.h"

namespace berth::extender::kube {

PoolStatusWriter::PoolStatusWriter(KubeClient* client, const LeadershipInterface* leadership,
                                   const core::ClusterModel* model, std::string scheduler_name,
                                   absl::Duration interval)
    : client_(client),
      leadership_(leadership),
      model_(model),
      scheduler_name_(std::move(scheduler_name)),
      interval_(interval) {}

void PoolStatusWriter::Tick(absl::Time now) {
  if (interval_ == absl::ZeroDuration()) return;
  if (leadership_ != nullptr && !leadership_->IsLeader()) {
    leading_ = false;
    return;
  }
  if (!leading_) {
    // Another replica may have written since this one last did.
    written_.clear();
    leading_ = true;
  }
  if (now - last_pass_ < interval_) return;
  last_pass_ = now;

  // The statistics of every Pool object, computed under the read lock.
  std::vector<std::pair<std::string, nlohmann::json>> statuses;
  {
    auto view = model_->Read();
    const std::shared_ptr<const policy::PoolMap> map = policy::PoolMap::Build(*view);
    const std::vector<policy::PoolStats> stats =
        policy::ComputePoolStats(*view, *map, scheduler_name_);
    view->ForEachPool([&](const core::Pool& pool) {
      // The map has every Pool object; one named "default" is the default pool.
      const policy::PoolStats& s = stats[*map->Find(pool.name)];
      nlohmann::json status = EncodePoolStats(s, view->resources());
      status["nodes"] = s.capacity.nodes;
      statuses.emplace_back(pool.name, std::move(status));
    });
  }

  std::erase_if(written_, [&](const auto& entry) {
    return std::none_of(statuses.begin(), statuses.end(),
                        [&](const auto& s) { return s.first == entry.first; });
  });
  const std::string stamp = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  int failed = 0;
  absl::Status first_error;
  for (auto& [name, status] : statuses) {
    auto it = written_.find(name);
    if (it != written_.end() && it->second == status) continue;
    nlohmann::json patch = {{"status", status}};
    patch["status"]["lastUpdateTime"] = stamp;
    const std::string path = StrCat("/apis/berth.io/v1alpha1/pools/", name, "/status");
    absl::StatusOr<Response> r =
        client_->Call("PATCH", path, patch.dump(), "application/merge-patch+json");
    if (r.ok() && r->ok()) {
      written_[name] = std::move(status);
      if (metrics_ != nullptr) ++metrics_->pool_status_written;
      continue;
    }
    if (r.ok() && r->status == 404) {  // deleted since the model saw it
      written_.erase(name);
      continue;
    }
    if (metrics_ != nullptr) ++metrics_->pool_status_failed;
    if (++failed == 1) first_error = r.ok() ? ApiError("PATCH", path, *r) : r.status();
    // Unreachable or overloaded: the other pools wait for the next pass too.
    if (!r.ok() || r->status == 429) break;
  }
  if (failed > 0) {
    spdlog::warn("kubernetes: {} Pool status write(s) failed; trying again in {}: {}", failed,
                 absl::FormatDuration(interval_), ToStd(first_error.message()));
  }
}

}  // namespace berth::extender::kube
