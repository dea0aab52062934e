#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/objects.h"
#include "extender/kube/client.h"
#include "extender/kube/leader.h"
#include "extender/eta.h"
#include "extender/service.h"

namespace berth::extender::kube {

/// The object an Event is about.
struct ObjectRef {
  std::string api_version = "v1";
  std::string kind = "Pod";
  std::string ns;
  std::string name;
  std::string uid;
};

struct EventRecord {
  ObjectRef regarding;
  std::string type = "Normal";  ///< Normal or Warning
  std::string reason;           ///< UpperCamelCase, e.g. "Reclaimed"
  std::string action;           ///< what berth did, e.g. "Evict"
  std::string note;             ///< the human message
};

struct WriterOptions {
  /// How long a bind keeps retrying the API server's 429/5xx (honouring Retry-After) before it
  /// reports failure; below kube-scheduler's extender httpTimeout so the answer arrives in time.
  absl::Duration bind_retry_budget = absl::Seconds(5);
  std::string reporting_instance = "berth";  ///< this replica, in Events
};

/// Everything berth writes to the API server: bindings, evictions, events and pod annotation
/// patches. Bindings and evictions are refused unless this replica is the leader.
class KubeWriter {
 public:
  /// \param leadership nullptr: this replica always acts (leader election disabled).
  KubeWriter(KubeClient* client, LeadershipInterface* leadership, WriterOptions options = {});

  /// OK when this replica may bind and evict; otherwise FailedPrecondition naming the leader.
  /// `recheck`: read the Lease once more before refusing (binds: kube-scheduler's first binds
  /// may come a moment after it took the Lease this replica follows).
  absl::Status CheckLeader(bool recheck = false) const;

  /// POST pods/{name}/binding with the pod's uid as precondition. A 409 (already bound,
  /// being deleted, another pod with that name) or any other refusal is returned as an error
  /// carrying the API server's message.
  absl::Status Bind(const core::Pod& pod, std::string_view node);

  /// POST pods/{name}/eviction (policy/v1), PDB-aware: a 429 whose causes name a disruption
  /// budget is FailedPrecondition (the budget forbids it; retrying soon will not help), any other
  /// 429 ResourceExhausted (throttled; try later). \param grace_seconds nullopt: the pod's own.
  absl::Status Evict(std::string_view ns, std::string_view name, std::string_view uid,
                     std::optional<int64_t> grace_seconds = std::nullopt);

  /// Writes an events.k8s.io/v1 Event; falls back to a core v1 Event when the API server does
  /// not serve events.k8s.io (404), and remembers that.
  absl::Status RecordEvent(const EventRecord& event);

  /// JSON merge patch of a pod's annotations; a nullopt value deletes the key. Used to make
  /// kube-scheduler look at a pod again at once (an update moves it out of its backoff).
  absl::Status PatchPodAnnotations(
      std::string_view ns, std::string_view name,
      const std::vector<std::pair<std::string, std::optional<std::string>>>& annotations);

 private:
  /// Calls and retries 429/5xx/transport failures until `budget` is spent.
  absl::StatusOr<Response> CallWithRetry(std::string_view method, const std::string& path,
                                         const std::string& body, std::string_view content_type,
                                         absl::Duration budget);

  KubeClient* client_;
  LeadershipInterface* leadership_;
  WriterOptions options_;
  std::atomic<bool> core_events_only_{false};
};

/// Kubernetes mode's binder: creates the pods/binding subresource (leader only).
class KubeBinder final : public BinderInterface {
 public:
  explicit KubeBinder(KubeWriter* writer) : writer_(writer) {}
  absl::Status CanBind() const override { return writer_->CheckLeader(/*recheck=*/true); }
  absl::Status Bind(const core::Pod& pod, std::string_view node) override {
    return writer_->Bind(pod, node);
  }

 private:
  KubeWriter* writer_;
};

/// Kubernetes mode's evictor (pool reclaim): the policy/v1 Eviction API (leader only), so
/// PodDisruptionBudgets are honoured, and an Event on the victim saying why, as kube-scheduler
/// records "Preempted". A failed Event does not fail the eviction.
class KubeEvictor final : public EvictorInterface {
 public:
  explicit KubeEvictor(KubeWriter* writer) : writer_(writer) {}
  absl::Status CanEvict() const override { return writer_->CheckLeader(); }
  absl::Status Evict(const core::Pod& victim, const core::Pod& for_pod,
                     std::string_view why) override;

 private:
  KubeWriter* writer_;
};

/// Kubernetes mode's nudger (SPEC 6.4): sets the pod annotation `berth.io/admitted` to the
/// time of its admission (leader only). The update makes kube-scheduler move the pod out of
/// its backoff and unschedulable lists and try it again at once.
class KubeNudger final : public NudgerInterface {
 public:
  KubeNudger(KubeWriter* writer, const core::Clock* clock) : writer_(writer), clock_(clock) {}
  absl::Status CanNudge() const override { return writer_->CheckLeader(); }
  absl::Status Nudge(const core::Pod& pod, std::string_view why) override;

 private:
  KubeWriter* writer_;
  const core::Clock* clock_;
};

/// Kubernetes mode's ETA annotation (extender/eta.h): `berth.io/eta` on a waiting pod (leader
/// only).
class KubeEtaAnnotator final : public EtaAnnotatorInterface {
 public:
  explicit KubeEtaAnnotator(KubeWriter* writer) : writer_(writer) {}
  absl::Status CanWrite() const override { return writer_->CheckLeader(); }
  absl::Status Annotate(const core::Pod& pod, std::string_view value) override {
    return writer_->PatchPodAnnotations(pod.ns, pod.name, {{std::string(kEtaAnnotation), std::string(value)}});
  }

 private:
  KubeWriter* writer_;
};

/// Kubernetes mode's sink for Events about waiting pods: an events.k8s.io Event on the pod
/// (leader only), reported by "berth".
class KubePodEventSink final : public PodEventSinkInterface {
 public:
  explicit KubePodEventSink(KubeWriter* writer) : writer_(writer) {}
  absl::Status CanRecord() const override { return writer_->CheckLeader(); }
  absl::Status Record(const core::Pod& pod, std::string_view type, std::string_view reason,
                      std::string_view note) override {
    return writer_->RecordEvent(EventRecord{
        .regarding = ObjectRef{.ns = pod.ns.str(), .name = pod.name.str(), .uid = pod.uid.str()},
        .type = std::string(type),
        .reason = std::string(reason),
        .action = "Schedule",
        .note = std::string(note)});
  }

 private:
  KubeWriter* writer_;
};

}  // namespace berth::extender::kube
