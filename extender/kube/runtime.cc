#include "extender/kube/runtime.h"

#include <utility>

#include "core/strings.h"
#include "spdlog/spdlog.h"

namespace berth::extender::kube {

std::vector<ResourceSpec> WatchedResources() {
  return {
      {.name = "nodes", .path = "/api/v1/nodes", .kind = "Node", .api_version = "v1"},
      {.name = "pods",
       .path = "/api/v1/pods",
       .kind = "Pod",
       .api_version = "v1",
       // What kube-scheduler's own informer watches: finished pods hold no capacity.
       .field_selector = "status.phase!=Succeeded,status.phase!=Failed",
       // ... but a gang member that succeeded still counts for its gang (a tombstone).
       .resolve_finished_gang_members = true},
      {.name = "podgroups",
       .path = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
       .kind = "PodGroup",
       .api_version = "scheduling.x-k8s.io/v1alpha1",
       .optional = true},
      {.name = "pools",
       .path = "/apis/berth.io/v1alpha1/pools",
       .kind = "Pool",
       .api_version = "berth.io/v1alpha1",
       .optional = true},
      {.name = "queues",
       .path = "/apis/berth.io/v1alpha1/queues",
       .kind = "Queue",
       .api_version = "berth.io/v1alpha1",
       .optional = true},
      {.name = "priorityclasses",
       .path = "/apis/scheduling.k8s.io/v1/priorityclasses",
       .kind = "PriorityClass",
       .api_version = "scheduling.k8s.io/v1"},
  };
}

absl::StatusOr<std::unique_ptr<KubernetesRuntime>> KubernetesRuntime::Create(
    ClientConfig config, KubernetesOptions options, core::ClusterModel* model) {
  std::unique_ptr<KubernetesRuntime> rt(new KubernetesRuntime());
  absl::StatusOr<std::unique_ptr<KubeClient>> client =
      KubeClient::Create(std::move(config), options.client);
  if (!client.ok()) return client.status();
  rt->client_ = *std::move(client);

  if (options.leader_election.enabled) {
    if (absl::Status s = LeaderElector::Validate(options.leader_election); !s.ok()) return s;
    KubernetesRuntime* self = rt.get();
    rt->elector_ = std::make_unique<LeaderElector>(
        rt->client_.get(), options.leader_election, [self](bool leader) {
          if (!leader) return;  // a replica that lost the lease may not reach the API server
          const LeaderElector& e = *self->elector_;
          // As client-go's elector does: an Event on the Lease tells operators who leads.
          absl::Status s = self->writer_->RecordEvent(
              {.regarding = {.api_version = "coordination.k8s.io/v1",
                             .kind = "Lease",
                             .ns = e.lease_namespace(),
                             .name = e.config().lease_name},
               .type = "Normal",
               .reason = "LeaderElection",
               .action = "Acquire",
               .note = StrCat(e.config().identity, " became leader")});
          if (!s.ok()) spdlog::debug("leader election event: {}", ToStd(s.message()));
        });
    options.writer.reporting_instance = rt->elector_->config().identity;
  }
  rt->writer_ = std::make_unique<KubeWriter>(rt->client_.get(), rt->elector_.get(), options.writer);
  rt->binder_ = std::make_unique<KubeBinder>(rt->writer_.get());
  rt->pool_status_ = std::make_unique<PoolStatusWriter>(
      rt->client_.get(), rt->elector_.get(), model, options.scheduler_name,
      options.pool_status_interval);
  for (ResourceSpec& spec : WatchedResources()) {
    rt->reflectors_.push_back(
        std::make_unique<Reflector>(rt->client_.get(), std::move(spec), model, options.reflector));
  }
  return rt;
}

KubernetesRuntime::~KubernetesRuntime() { Stop(); }

void KubernetesRuntime::Start(std::function<void()> on_synced) {
  if (started_) return;
  started_ = true;
  on_synced_ = std::move(on_synced);
  // Ready once every watched collection is listed and, with leader election, the Lease has been
  // read: before that, berth cannot say whether it may bind.
  auto maybe_ready = [this] {
    if (!synced() || (elector_ && !elector_->Known())) return;
    if (synced_reported_.exchange(true)) return;
    spdlog::info("kubernetes: every watched collection is listed{}; ready",
                 elector_ ? " and the Lease is read" : "");
    if (on_synced_) on_synced_();
  };
  for (auto& r : reflectors_) r->set_on_synced(maybe_ready);
  if (elector_) elector_->set_on_known(maybe_ready);
  spdlog::info("kubernetes: connecting to {} ({})", client_->server(), client_->config().source);
  for (auto& r : reflectors_) r->Start();
  if (elector_) elector_->Start();
}

void KubernetesRuntime::Stop() {
  if (!started_) return;
  started_ = false;
  if (elector_) elector_->Stop();
  for (auto& r : reflectors_) r->Stop();
}

bool KubernetesRuntime::synced() const {
  for (const auto& r : reflectors_) {
    if (!r->synced()) return false;
  }
  return true;
}

}  // namespace berth::extender::kube
