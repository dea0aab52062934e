#pragma once
// A berth in Kubernetes mode wired as main.cc wires it (model, runtime, service), against the
// in-process fake API server, with timings shortened so resilience tests take milliseconds.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "extender/kube/runtime.h"
#include "extender/service.h"
#include "policy/registry.h"
#include "tests/testing/fake_apiserver.h"

namespace berth::testing {

/// A client configuration for the fake server (token authentication, its CA).
inline extender::kube::ClientConfig FakeClientConfig(const FakeApiServer& api) {
  extender::kube::ClientConfig c;
  c.scheme = "https";
  c.host = "127.0.0.1";
  c.port = api.port();
  c.ca_pem = api.tls().ca_pem;
  c.token = api.token();
  c.default_namespace = "berth-system";
  c.source = "fake API server";
  return c;
}

/// Fast timings: backoff in milliseconds, a one-second lease. Leader election is off unless a
/// test turns it on (`elect`), so Lease writes do not advance resourceVersions under other tests.
inline extender::kube::KubernetesOptions FastOptions(bool elect = false) {
  extender::kube::KubernetesOptions o;
  o.leader_election.enabled = elect;
  o.reflector.min_backoff = absl::Milliseconds(10);
  o.reflector.max_backoff = absl::Milliseconds(100);
  o.reflector.absent_retry = absl::Milliseconds(200);
  o.reflector.watch_timeout = absl::Seconds(30);
  o.leader_election.lease_duration = absl::Milliseconds(1000);
  o.leader_election.renew_deadline = absl::Milliseconds(600);
  o.leader_election.retry_period = absl::Milliseconds(50);
  o.leader_election.lease_namespace = "berth-system";
  o.writer.bind_retry_budget = absl::Seconds(2);
  return o;
}

/// One berth replica (`policy_config`: berth's policy settings, default ones if not given).
class KubeBerth {
 public:
  explicit KubeBerth(FakeApiServer& api,
                     extender::kube::KubernetesOptions options = FastOptions(),
                     std::string identity = "", policy::PolicyConfig policy_config = {})
      : model_(&clock_) {
    if (!identity.empty()) options.leader_election.identity = std::move(identity);
    auto rt = extender::kube::KubernetesRuntime::Create(FakeClientConfig(api), options, &model_);
    if (!rt.ok()) throw std::runtime_error(std::string(rt.status().message()));
    runtime_ = *std::move(rt);
    policy::Registry registry = policy::BuildDefaultRegistry();
    auto pipeline = registry.Build(policy_config, model_.resources());
    if (!pipeline.ok()) throw std::runtime_error(std::string(pipeline.status().message()));
    service_ = std::make_unique<extender::Service>(
        extender::ServiceOptions{.mode = extender::Mode::kKubernetes}, &model_,
        *std::move(pipeline), &runtime_->binder(), &clock_);
    evictor_ = std::make_unique<extender::kube::KubeEvictor>(&runtime_->writer());
    service_->SetEvictor(evictor_.get());
    nudger_ = std::make_unique<extender::kube::KubeNudger>(&runtime_->writer(), &clock_);
    service_->SetNudger(nudger_.get());
    pod_events_ = std::make_unique<extender::kube::KubePodEventSink>(&runtime_->writer());
    service_->SetPodEventSink(pod_events_.get());
  }
  ~KubeBerth() { Stop(); }

  void Start() {
    runtime_->Start([this] { service_->SetReady(true); });
  }
  void Stop() { runtime_->Stop(); }

  /// Waits until `predicate` holds (polling every 5 ms) or `timeout` passes.
  bool WaitFor(const std::function<bool()>& predicate,
               std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (predicate()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return predicate();
  }
  bool WaitReady() {
    return WaitFor([this] { return service_->Readyz().status == 200; });
  }
  /// Start(), then waits for readiness; \return whether berth became ready.
  bool StartReady() {
    Start();
    return WaitReady();
  }
  /// Requested milli-CPU on a node in berth's model (-1: node unknown).
  int64_t NodeCpuMilli(const std::string& node) {
    auto view = model_.Read();
    const core::NodeState* n = view->FindNode(node);
    if (n == nullptr || !n->present) return -1;
    return n->requested.Get(core::kCpu) + n->assumed.Get(core::kCpu);
  }
  bool HasPod(const std::string& uid) {
    auto view = model_.Read();
    return view->FindPod(uid) != nullptr;
  }

  core::ClusterModel& model() { return model_; }
  extender::Service& service() { return *service_; }
  extender::kube::KubernetesRuntime& runtime() { return *runtime_; }
  extender::kube::Reflector& reflector(const std::string& name) {
    for (const auto& r : runtime_->reflectors()) {
      if (r->spec().name == name) return *r;
    }
    throw std::runtime_error("no reflector " + name);
  }

 private:
  core::RealClock clock_;
  core::ClusterModel model_;
  std::unique_ptr<extender::kube::KubernetesRuntime> runtime_;
  std::unique_ptr<extender::Service> service_;
  std::unique_ptr<extender::kube::KubeEvictor> evictor_;
  std::unique_ptr<extender::kube::KubeNudger> nudger_;
  std::unique_ptr<extender::kube::KubePodEventSink> pod_events_;
};

}  // namespace berth::testing
