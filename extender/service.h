#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "policy/pipeline.h"

namespace berth::extender {

/// Where the model's truth comes from.
enum class Mode {
  kStandalone,  ///< objects arrive through POST /v1/events or a file; binds change the model only
  kKubernetes,  ///< the API server's watches; binds create pods/binding
};

/// Creates the binding of a pod once berth has accepted it. Standalone mode confirms locally;
/// Kubernetes mode posts the pods/binding subresource.
class BinderInterface {
 public:
  virtual ~BinderInterface() = default;
  /// Whether this process may bind at all (Kubernetes mode: only the elected leader does).
  /// Checked before berth touches its model, so a refused bind changes nothing.
  virtual absl::Status CanBind() const { return absl::OkStatus(); }
  /// \return OK once the pod is bound to `node` (or the API server's refusal).
  virtual absl::Status Bind(const core::Pod& pod, std::string_view node) = 0;
};

/// Standalone binder: berth is the API server and the kubelet, so the pod becomes bound and
/// Running in the model at once.
class LocalBinder final : public BinderInterface {
 public:
  explicit LocalBinder(core::ClusterModel* model) : model_(model) {}
  absl::Status Bind(const core::Pod& pod, std::string_view node) override;

 private:
  core::ClusterModel* model_;
};

struct ServiceOptions {
  Mode mode = Mode::kStandalone;
  /// Pods of this schedulerName are berth's own ("managed"); others only take capacity.
  std::string scheduler_name = "berth-scheduler";
  /// Node labels naming the fabric tree, top level first.
  std::vector<std::string> topology_levels = {"topology.kubernetes.io/zone", "berth.io/spine",
                                              "berth.io/leaf"};
  /// How long a bind waits for the pod watch to confirm it before its held room is released.
  absl::Duration bind_confirm_timeout = absl::Minutes(10);
  std::string version = "0.0.0";
  std::string git_commit = "unknown";
  std::string build_type = "unknown";
};

/// An HTTP answer, independent of the transport.
struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

/// Every route of berth as a function from request body to reply. The HTTP server only maps
/// routes to these; tests call them directly too. Thread-safe: verbs read the model through one
/// consistent view each, writes go through the model's single writer.
class Service {
 public:
  Service(ServiceOptions options, core::ClusterModel* model,
          std::unique_ptr<policy::Pipeline> pipeline, BinderInterface* binder,
          const core::Clock* clock);

  // Extender verbs (SPEC 3.1). Undecodable input: 400 with {"Error": "..."}.
  Reply Filter(std::string_view body);
  Reply Prioritize(std::string_view body);
  Reply Bind(std::string_view body);
  Reply Preempt(std::string_view body);

  /// POST /v1/events (SPEC 3.3): one watch event or an array; all or nothing.
  Reply Events(std::string_view body);

  // Operations endpoints (SPEC 3.2).
  /// Liveness and readiness; `text` answers one plain line ("ok", "ready"), as Kubernetes'
  /// own probes do.
  Reply Healthz(bool text = false) const;
  Reply Readyz(bool text = false) const;
  Reply Version(bool text) const;
  Reply DebugNodes(bool text) const;
  Reply DebugPods(bool text, bool all) const;
  /// Per pool: Capacity, Allocatable, Used, Shared, Borrowed, Pending and the p/b/s flags.
  Reply DebugPools(bool text) const;
  Reply DebugSnapshot(bool text) const;

  /// Loads a Kubernetes List document into the model (the --cluster file, the demo cluster).
  /// \param source named in errors ("demo-cluster.json: items[3].spec...").
  /// \return the number of objects loaded.
  absl::StatusOr<size_t> LoadList(std::string_view json, std::string_view source);

  void SetReady(bool ready) { ready_.store(ready); }
  const ServiceOptions& options() const { return options_; }
  core::ClusterModel& model() { return *model_; }

 private:
  /// Standalone mode learns the pod (and full nodes) a verb carries if the model lacks them.
  void Learn(const core::Pod& pod, std::vector<core::Node> nodes);
  std::vector<std::string> TopologyPath(const core::Node& node) const;

  ServiceOptions options_;
  core::ClusterModel* model_;
  std::unique_ptr<policy::Pipeline> pipeline_;
  BinderInterface* binder_;
  const core::Clock* clock_;
  std::atomic<bool> ready_{false};
};

/// {"error": message} with the given status, for the non-verb endpoints.
Reply ErrorReply(int status, std::string_view message);
/// {"Error": message} with the given status, for the verbs.
Reply VerbErrorReply(int status, std::string_view message);

}  // namespace berth::extender
