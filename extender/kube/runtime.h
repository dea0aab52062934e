#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "extender/kube/client.h"
#include "extender/kube/kubeconfig.h"
#include "extender/kube/leader.h"
#include "extender/kube/pool_status.h"
#include "extender/kube/reflector.h"
#include "extender/kube/writer.h"

namespace berth::extender::kube {

struct KubernetesOptions {
  ReflectorOptions reflector;
  LeaderElectionConfig leader_election;
  ClientOptions client;
  WriterOptions writer;
  /// Pool.status writes (PoolStatusWriter): pods of this scheduler have home pools; the leader
  /// writes at most once per interval; zero turns them off.
  std::string scheduler_name = "berth-scheduler";
  absl::Duration pool_status_interval = absl::Seconds(10);
};

/// The collections berth watches: nodes, every pod that holds or will hold capacity (all
/// schedulers' pods; Succeeded and Failed ones are left out by the field selector and arrive as
/// DELETED when they finish), PodGroups, Pools, Queues and PriorityClasses. The custom
/// resources are optional: berth runs without their CRDs.
std::vector<ResourceSpec> WatchedResources();

/// Kubernetes mode: one API client, a reflector per watched collection feeding the model, the
/// leader elector, the writer that binds, evicts, records events and patches pods, and the
/// writer of Pool.status.
class KubernetesRuntime {
 public:
  static absl::StatusOr<std::unique_ptr<KubernetesRuntime>> Create(ClientConfig config,
                                                                   KubernetesOptions options,
                                                                   core::ClusterModel* model);
  ~KubernetesRuntime();

  /// Starts the watches and the elector. \param on_synced called once, from a watch thread,
  /// when every collection's first list is in the model (berth then reports ready).
  void Start(std::function<void()> on_synced = nullptr);
  /// Stops the watches and the elector (a leader releases its Lease).
  void Stop();
  /// True once every collection's first list is in the model.
  bool synced() const;

  KubeClient& client() { return *client_; }
  KubeWriter& writer() { return *writer_; }
  BinderInterface& binder() { return *binder_; }
  /// nullptr when leader election is disabled.
  LeaderElector* elector() { return elector_.get(); }
  /// Writes Pool.status when ticked (main's housekeeping thread ticks it once synced()).
  PoolStatusWriter& pool_status() { return *pool_status_; }
  const std::vector<std::unique_ptr<Reflector>>& reflectors() const { return reflectors_; }

 private:
  KubernetesRuntime() = default;

  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<KubeWriter> writer_;
  std::unique_ptr<KubeBinder> binder_;
  std::unique_ptr<PoolStatusWriter> pool_status_;
  std::vector<std::unique_ptr<Reflector>> reflectors_;
  bool started_ = false;
  std::function<void()> on_synced_;
  std::atomic<bool> synced_reported_{false};
};

}  // namespace berth::extender::kube
