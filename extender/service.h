#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "extender/answer_form.h"
#include "extender/decoded_pod_cache.h"
#include "extender/intents.h"
#include "extender/metrics.h"
#include "nlohmann/json_fwd.hpp"
#include "policy/framework.h"
#include "policy/config.h"
#include "policy/pipeline.h"
#include "policy/topology/topology.h"

namespace berth::extender {

class Journal;  // extender/journal.h
struct Forecast;  // extender/eta.h

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

/// Evicts pods to make room for another (pool reclaim). Standalone mode deletes them from the
/// model; Kubernetes mode uses the Eviction API, which honours PodDisruptionBudgets.
class EvictorInterface {
 public:
  virtual ~EvictorInterface() = default;
  /// Whether this process may evict at all (Kubernetes mode: only the elected leader does).
  virtual absl::Status CanEvict() const { return absl::OkStatus(); }
  /// Evicts `victim` to make room for `for_pod`; `why` says what for ("reclaim in pool gpu").
  virtual absl::Status Evict(const core::Pod& victim, const core::Pod& for_pod,
                             std::string_view why) = 0;
};

/// Standalone evictor: the pod is gone from the model at once, as if it had exited.
class LocalEvictor final : public EvictorInterface {
 public:
  explicit LocalEvictor(core::ClusterModel* model) : model_(model) {}
  absl::Status Evict(const core::Pod& victim, const core::Pod& for_pod,
                     std::string_view why) override;

 private:
  core::ClusterModel* model_;
};

/// Makes kube-scheduler try a waiting pod again at once (SPEC 6.4): an update of the pod moves
/// it out of kube-scheduler's backoff and unschedulable lists, instead of waiting out its
/// backoff (up to podMaxInUnschedulablePodsDuration, 5 minutes by default).
class NudgerInterface {
 public:
  virtual ~NudgerInterface() = default;
  /// Whether this process may write to pods (Kubernetes mode: only the elected leader does).
  virtual absl::Status CanNudge() const { return absl::OkStatus(); }
  /// Touches `pod` so that kube-scheduler retries it; `why` for logs ("admitted by queue a").
  virtual absl::Status Nudge(const core::Pod& pod, std::string_view why) = 0;
};

/// Writes an Event about a pod (Kubernetes mode: events.k8s.io, see kube::KubeWriter).
class PodEventSinkInterface {
 public:
  virtual ~PodEventSinkInterface() = default;
  /// Whether this process may write (Kubernetes mode: only the elected leader does).
  virtual absl::Status CanRecord() const { return absl::OkStatus(); }
  /// \param reason a stable reason code ("QueueWaiting"); \param note the message a person reads.
  virtual absl::Status Record(const core::Pod& pod, std::string_view type, std::string_view reason,
                              std::string_view note) = 0;
};

/// How often a waiting pod's reason is written as an Event (SPEC 6.8): a pod kube-scheduler
/// retries every second must not flood the API server.
struct PodEventOptions {
  /// The same reason and message again only after this long.
  absl::Duration repeat_after = absl::Minutes(5);
  /// A new reason or message for one pod at most this often.
  absl::Duration min_interval = absl::Seconds(10);
  /// At most this many Events per admission tick (one second); the rest wait their turn.
  int max_per_tick = 20;
};

/// Which pods the admission tick nudges (SPEC 6.4): only pods kube-scheduler holds back
/// because berth's filter answered that no node fits; a pod admitted before kube-scheduler asked
/// about it, or whose last answer fit, is never patched (one API write per scheduled pod: the
/// binding).
struct NudgeOptions {
  /// At most this many nudges per admission tick (one second); the rest wait for the next.
  int max_per_tick = 50;
};

/// What one admission tick recorded (the intent worker carries it out).
struct AdmissionTickStats {
  int nudged = 0;   ///< pods to tell to retry
  int deferred = 0; ///< nudges left for the next tick (max_per_tick)
  int evicted = 0;  ///< pods to evict for fair share
  int events = 0;   ///< Events to write about waiting pods
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
  /// How long room freed by a reclaim stays held for its pod (config pools.reclaimTimeoutSeconds).
  absl::Duration reclaim_timeout = absl::Minutes(2);
  /// Events about waiting pods (Kubernetes mode, with a sink set).
  PodEventOptions pod_events;
  /// Nudges of admitted pods (Kubernetes mode, with a nudger set).
  NudgeOptions nudges;
  /// Retries of evictions, nudges and Events that failed (extender/intents.h).
  IntentOptions intents;
  /// How filter and prioritize answers are written; kLong only where a bench or a test compares
  /// with berth's earlier answers.
  AnswerForm answers = AnswerForm::kShort;
  /// Which fitting nodes the filter answer names (config filterAnswer).
  FilterAnswer filter_answer = FilterAnswer::kAll;
  std::string version = "0.0.0";
  std::string git_commit = "unknown";
  std::string build_type = "unknown";
  /// The policy configuration the pipeline was built from: what-ifs build the same pipeline
  /// for their copy of the state. Without it, POST /v1/whatif answers 503.
  std::shared_ptr<const policy::PolicyConfig> policy;
  /// How often the ETA forecast runs (config eta.intervalSeconds; zero: off). The service only
  /// shows the forecast `berth serve` runs (SetForecast).
  absl::Duration eta_interval = absl::Seconds(60);
};

struct Config;  // extender/config.h

/// The options `config` sets for a Service in `mode`: what `berth serve` and `berth simulate`
/// both run with (the version fields are left for the caller).
ServiceOptions ServiceOptionsFor(const Config& config, Mode mode);

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
  /// Stops the intent worker, if started.
  ~Service();

  // Extender verbs (SPEC 3.1). Undecodable input: 400 with {"Error": "..."}. Each call is
  // counted and timed (GET /metrics).
  /// \param verdicts when given, receives the verdict of each node asked about, in the order of
  /// the question: the messages behind the answer's short reasons (/debug/explain and berth's
  /// Events give them too).
  Reply Filter(std::string_view body, std::vector<policy::NodeVerdict>* verdicts = nullptr);
  Reply Prioritize(std::string_view body);
  Reply Bind(std::string_view body);
  Reply Preempt(std::string_view body);

  /// POST /v1/events (SPEC 3.3): one watch event or an array; all or nothing.
  Reply Events(std::string_view body);

  /// POST /v1/whatif (service_whatif.cc): what the verbs would decide next for the objects a
  /// user would apply (pods, or a PodGroup and its pods; JSON or YAML), decided on a copy of
  /// berth's state (ClusterModel::Fork) that is thrown away: where they would run now and how
  /// far apart, or which pods would be preempted or reclaimed and the work lost, or which rule
  /// holds them back. Changes nothing, so it is served on the read-only port too. One at a
  /// time: a second concurrent call gets 429. `text`: a page for people.
  Reply WhatIf(std::string_view body, bool text) const;

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
  /// Per gang (SPEC 6.2): minMember, bound, reserved, pending, state, timeout, fulfillment,
  /// placement and its max hop count.
  Reply DebugGangs(bool text) const;
  /// Per queue (SPEC 6.4): weight, fair share, flow, usage (preemptible or not), limit, budget;
  /// the waiting jobs in admission order with their state, position and what holds them back.
  Reply DebugQueues(bool text) const;
  /// `compact`: the List on one line (the journal's snapshots).
  Reply DebugSnapshot(bool text, bool compact = false) const;
  /// GET /debug/explain?pod=NS/NAME (SPEC 6.8): the pod's pool, queue, gang, priority and
  /// admission state; every node grouped by its verdict (the first failing rule, with the
  /// numbers of one node); and the smallest changes that would let it run. 400 for a malformed
  /// `pod`, 404 for a pod berth does not hold.
  Reply DebugExplain(std::string_view pod, bool text) const;
  /// GET /metrics (SPEC 7): the counters and histograms, and gauges read from the model now
  /// (model size, per pool, per queue), in the Prometheus text format.
  Reply Metrics() const;

  /// Loads a Kubernetes List document into the model (the --cluster file, the demo cluster).
  /// \param source named in errors ("demo-cluster.json: items[3].spec...").
  /// \return the number of objects loaded.
  absl::StatusOr<size_t> LoadList(std::string_view json, std::string_view source);

  /// Where reclaim evictions go; standalone mode defaults to a LocalEvictor, Kubernetes mode
  /// reclaims nothing until one is set. Set before serving.
  void SetEvictor(EvictorInterface* evictor);
  /// Where admission nudges go (Kubernetes mode: a pod annotation patch); none by default, as
  /// standalone mode has no kube-scheduler backoff to cut short. Set before serving.
  void SetNudger(NudgerInterface* nudger);
  /// Where Events about waiting pods go (Kubernetes mode); none by default. Set before serving.
  void SetPodEventSink(PodEventSinkInterface* sink);
  /// Records every verb call, every change taken through POST /v1/events or LoadList, and every
  /// tick in `journal` (extender/journal.h), beginning with a snapshot of the model now. Set
  /// before serving; the journal outlives the service's use of it.
  void SetJournal(Journal* journal);
  Journal* journal() const { return journal_; }

  /// The latest ETA forecast (extender/eta.h), shown in /debug/explain, /debug/queues and
  /// /metrics; null until the first pass (or with the forecast off). Thread-safe.
  void SetForecast(std::shared_ptr<const Forecast> forecast);
  std::shared_ptr<const Forecast> forecast() const;
  /// The fair-share policy's book, for a forecast's copy (null without fair share).
  policy::FairShare* fair_share() const;
  /// Runs the ETA forecast on a model (extender/sim/forecast.h, which this library does not
  /// link: `berth serve` sets it). With one set, a what-if gives each pod that waits its ETA.
  using Forecaster = std::function<absl::StatusOr<Forecast>(const core::ClusterModel& model,
                                                            policy::FairShare* book, absl::Time now)>;
  void SetForecaster(Forecaster forecaster) { forecaster_ = std::move(forecaster); }

  /// Verbs and ticks only record their side effects (evictions, nudges, Events) as intents.
  /// `berth serve` starts the worker that carries them out (off the request path) and stops it
  /// on shutdown; Stop returns once the intent in hand is done, leaving the rest queued.
  void StartIntentWorker() { intents_.Start(); }
  void StopIntentWorker() { intents_.Stop(); }
  /// Carries out, on the calling thread, every intent due now (a retry waits for its backoff on
  /// the service's clock). The simulator calls it after each verb and tick instead of running
  /// the worker. \return the attempts made.
  int DrainIntents() { return intents_.Drain(); }

  /// The admission tick (called every second): plans admissions anew, nudges the pods of jobs
  /// that became admitted (and gang members whose room was just reserved), and evicts pods of
  /// queues over their fair share whose lifetime has passed, for the job next to start.
  AdmissionTickStats AdmissionTick();

  /// Housekeeping (called every few seconds): releases room held past its time, and, in
  /// Kubernetes mode, starts reclaims and plans gangs for berth's pending pods that
  /// kube-scheduler has not brought to filter (a pod no node fits in kube-scheduler's own
  /// filters never reaches berth's filter). \return the reclaims started and gangs given room.
  int Housekeeping();

  void SetReady(bool ready) { ready_.store(ready); }
  /// Whether the model is loaded (what /readyz answers).
  bool ready() const { return ready_.load(); }
  /// The HTTP servers' connection counters, exposed on GET /metrics with the rest.
  TransportMetrics& transport_metrics() const { return metrics_.transport; }
  /// Counters of API writes made outside the verbs (kube::PoolStatusWriter's).
  ApiWriteMetrics& api_write_metrics() const { return metrics_.api_writes; }
  /// The ETA forecast's pass counters, on GET /metrics.
  ForecastMetrics& forecast_metrics() const { return metrics_.forecast; }
  const ServiceOptions& options() const { return options_; }
  core::ClusterModel& model() { return *model_; }

 private:
  Reply FilterVerb(std::string_view body, std::vector<policy::NodeVerdict>* verdicts_out);
  /// filterAnswer "best": for each verdict, whether the answer names it: the fitting nodes with
  /// the highest of `scores` (prioritize's, given by the filter's pass). Empty (every fitting
  /// node named) when fewer than two fit.
  std::vector<char> BestFitting(const std::vector<policy::NodeVerdict>& verdicts,
                                const std::vector<int64_t>& scores);
  Reply PrioritizeVerb(std::string_view body);
  Reply BindVerb(std::string_view body);
  Reply PreemptVerb(std::string_view body);
  /// Counts and times one verb call.
  /// Journals it too, with `body`.
  template <class Fn>
  Reply Observed(VerbKind verb, std::string_view body, Fn&& fn);
  AdmissionTickStats RunAdmissionTick();

  /// Standalone mode learns the pod (and full nodes) a verb carries if the model lacks them.
  /// The nodes come decoded with their provisional resource names (core::NodeUpsert).
  void Learn(const core::Pod& pod, std::vector<core::NodeUpsert> nodes);
  /// Standalone mode is the API server: a pod posted without metadata.creationTimestamp gets
  /// the time it arrived (or keeps the one it had), as the API server stamps it on create.
  void StampCreation(std::vector<core::ModelEvent>* events) const;
  std::vector<std::string> TopologyPath(const core::Node& node) const;
  /// Where the framework's side effects go: intents, nudges, counters and the log.
  class Effects;
  friend class Effects;

  ServiceOptions options_;
  core::ClusterModel* model_;
  /// The scheduling cycle (policy/framework.h), and its pipeline for the debug endpoints.
  std::unique_ptr<Effects> effects_;
  std::unique_ptr<policy::Framework> framework_;
  const policy::Pipeline* pipeline_;
  /// The fabric for the debug endpoints' and metrics' figures per topology domain.
  policy::TopologyCache topology_{options_.topology_levels};
  BinderInterface* binder_;
  std::unique_ptr<LocalEvictor> local_evictor_;
  EvictorInterface* evictor_ = nullptr;
  NudgerInterface* nudger_ = nullptr;
  PodEventSinkInterface* pod_events_ = nullptr;
  Journal* journal_ = nullptr;
  /// Why each waiting pod last waited, and what was written about it (tick-driven).
  struct WaitingNote {
    core::Pod pod;
    std::string reason, message;     ///< the latest filter's answer
    std::string sent_reason, sent_message;
    absl::Time sent = absl::InfinitePast();
    absl::Time seen;                 ///< the latest filter that gave it
  };
  absl::Mutex waiting_mu_;
  std::map<std::string, WaitingNote, std::less<>> waiting_ ABSL_GUARDED_BY(waiting_mu_);
  /// Records why a pod waits after a filter where no node fits.
  /// \param reasons how many nodes gave each reason code (the filter counts them once).
  void NoteWaiting(const core::Pod& pod, const std::vector<policy::NodeVerdict>& verdicts,
                   const std::vector<std::pair<policy::Reason, int>>& reasons);
  /// Writes the due Events (deduplicated, rate-limited). \return how many were written.
  int WriteWaitingEvents(absl::Time now);
  mutable extender::Metrics metrics_;
  /// The pod the last filter or prioritize decoded: the prioritize that follows a filter sends
  /// the same pod.
  DecodedPodCache verb_pods_;
  /// Evictions, nudges and Events recorded by verbs and ticks, carried out by its worker.
  IntentQueue intents_;
  /// Pods that passed admission at the last tick, and nudges asked for since.
  absl::Mutex nudge_mu_;
  Forecaster forecaster_;
  mutable absl::Mutex forecast_mu_;
  std::shared_ptr<const Forecast> forecast_ ABSL_GUARDED_BY(forecast_mu_);
  /// Set while a what-if runs (they copy the whole model: one at a time).
  mutable std::atomic<bool> whatif_running_{false};
  /// The uids the last tick's plan admitted: views into that plan, kept alive beside them.
  absl::flat_hash_set<std::string_view> admitted_at_last_tick_ ABSL_GUARDED_BY(nudge_mu_);
  std::shared_ptr<const policy::AdmissionPlan> admitted_plan_ ABSL_GUARDED_BY(nudge_mu_);
  std::vector<std::pair<std::string, std::string>> pending_nudges_ ABSL_GUARDED_BY(nudge_mu_);
  /// berth's pods whose latest filter answer fit no node, or whose preemption berth refused on
  /// every candidate: kube-scheduler parked them (or backs them off) for berth's answer, so only
  /// they need a nudge. Apart from nudge_mu_, which the tick holds while it
  /// plans: filters only touch this.
  absl::Mutex answered_waiting_mu_;
  absl::flat_hash_set<std::string> answered_waiting_ ABSL_GUARDED_BY(answered_waiting_mu_);
  /// Notes a filter's (or a refused preemption's) answer for one of berth's pods (with a nudger
  /// set).
  void NoteAnswer(std::string_view uid, bool none_fit);
  /// The latest forecast's ETA of a waiting pod ("namespace/name") as JSON, and the sentence
  /// explain shows; or why there is none.
  nlohmann::json EtaOf(std::string_view key, std::string* sentence) const;
  const core::Clock* clock_;
  std::atomic<bool> ready_{false};
};

/// A JSON document, pretty-printed, for the operations endpoints.
Reply JsonReply(int status, const nlohmann::json& j);
/// A plain-text reply (the `?format=text` tables).
Reply TextReply(std::string text);
/// {"error": message} with the given status, for the non-verb endpoints.
Reply ErrorReply(int status, std::string_view message);
/// {"Error": message} with the given status, for the verbs.
Reply VerbErrorReply(int status, std::string_view message);

}  // namespace berth::extender
