#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "policy/pipeline.h"

namespace berth::policy {

/// Where the cycle's side effects go. The framework never calls the API server: it records
/// evictions and nudges here, and the layer running it (the extender) turns them into intents
/// that a worker carries out off the request path, counts them and writes the log.
class EffectSink {
 public:
  virtual ~EffectSink() = default;
  /// Whether evictions may be recorded at all (Kubernetes mode: only the leader evicts).
  virtual bool CanEvict() const = 0;
  /// One eviction to carry out: `pod` leaves to make room for `for_pod`.
  struct Eviction {
    core::Pod pod;
    core::Pod for_pod;
    std::string why;    ///< for logs and the Event ("reclaim in pool gpu")
    std::string cause;  ///< the metrics label ("reclaim", "gang-elastic", "gang-incomplete")
    /// Called once if the eviction fails for good (a disruption budget, lost leadership).
    std::function<void(const absl::Status&)> undo;
    /// Set by the first failure of a group: the group's other evictions still queued are dropped.
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  virtual void Evict(Eviction eviction) = 0;
  /// Has kube-scheduler retry `pod` at once (its reclaim was undone).
  virtual void Nudge(const core::Pod& pod, std::string why) = 0;
  /// Has kube-scheduler retry the pod of `uid` at the next admission tick (room was reserved for
  /// its gang by another member's filter, or kube-scheduler's sample left out its reserved node).
  virtual void NudgeAtNextTick(std::string uid, std::string why) = 0;
  /// Events worth a counter.
  enum class Count : uint8_t { kReclaim, kGangAdmission, kGangTimeout };
  virtual void Counted(Count what) = 0;
  enum class Level : uint8_t { kDebug, kInfo, kWarn };
  /// One log line (the policy layer has no logger of its own).
  virtual void Log(Level level, std::string message) = 0;
};

struct FrameworkOptions {
  /// Pods of this schedulerName are berth's own; others only take capacity.
  std::string scheduler_name = "berth-scheduler";
  /// How long room freed by a reclaim stays held for its pod, and how long a pod whose reclaim
  /// was undone borrows instead.
  absl::Duration reclaim_timeout = absl::Minutes(2);
};

/// The outcome of Framework::Bind.
struct BindResult {
  enum class Outcome : uint8_t {
    kBound,          ///< committed and bound
    kAlreadyPlaced,  ///< the pod was bound or being bound there already (idempotent binds)
    kRefused,        ///< Permit, a filter or the commit's check refused; `status` says why
    kBinderFailed,   ///< the binder refused; the commit was rolled back
  };
  Outcome outcome = Outcome::kBound;
  absl::Status status;
};

/// berth's scheduling cycle (docs/architecture.md, "One pod through the cycle"): the order of
/// the extension points per verb, the model's reservations and binds they commit, and the side
/// effects they record. The pipeline says which module runs at which point; the framework says
/// when each point runs:
///
/// - filter: the queue's verdict (PreFilter "queue", asked once) -> the gang's plan and
///   reservation (PreFilter "gang": a gang is admitted whole before any member is filtered) ->
///   PreFilter and Filter per node -> a gang member's re-plan when none fits -> PostFilter
///   (reclaim) when none fits, for berth's own pods that do not wait in a queue;
/// - prioritize: Score;
/// - bind: Permit and Filter on a read view (off the model's exclusive lock) -> the commit ->
///   Reserve -> the binder -> Unreserve and the model's Forget when it fails;
/// - preempt: PreemptionReview.
///
/// Thread-safe: every verb reads the model through one view of its own, and commits through the
/// model's single writer.
class Framework {
 public:
  Framework(std::unique_ptr<Pipeline> pipeline, FrameworkOptions options,
            core::ClusterModel* model, const core::Clock* clock);

  /// Where side effects go; none are recorded until one is set. Set before serving.
  void SetEffects(EffectSink* effects) { effects_ = effects; }
  const Pipeline& pipeline() const { return *pipeline_; }
  const FrameworkOptions& options() const { return options_; }

  /// The filter verb: verdicts for candidate node names, in input order. With `scores`, the
  /// nodes that pass are also given the scores Score would give them, from the same view
  /// (Pipeline::Filter), and the others 0. Without `every_message`, only the first verdict of
  /// each reason carries its message (CycleContext::messages).
  std::vector<NodeVerdict> Filter(const core::Pod& pod, std::span<const std::string_view> candidates,
                                  std::vector<int64_t>* scores = nullptr, bool every_message = true);
  /// The prioritize verb: scores for candidate node names, in input order.
  std::vector<int64_t> Score(const core::Pod& pod, std::span<const std::string_view> candidates);
  /// The bind verb for `pod` (as the model holds it) on `node`. `bind` is the binder, called
  /// after the commit and outside every lock.
  BindResult Bind(const core::Pod& pod, std::string_view node,
                  const std::function<absl::Status(const core::Pod&, std::string_view)>& bind);
  /// The preempt verb: reviews kube-scheduler's proposal (victims named by uid, with the
  /// priority the request gave; the model's priority wins for pods berth knows).
  std::vector<NodeVictims> ReviewPreemption(
      const core::Pod& pod, std::vector<NodeVictims> proposal,
      std::vector<std::pair<std::string, NodeVerdict>>* dropped);

  /// Housekeeping: releases room held past its time, reports gangs whose reservations ran out
  /// or that stayed incomplete, and, when `reclaim_pending`, does for berth's pending pods that
  /// kube-scheduler has not brought to filter what their filter would: starts reclaims for plain
  /// pods, and plans gangs (reserving their room, taking room back where needed, nudging the
  /// members given room). \return the number of reclaims started and gangs given room.
  int Housekeeping(bool reclaim_pending);
  /// The reclaim Housekeeping starts for a pending pod that kube-scheduler's own checks keep
  /// from berth's filter, for this pod now (what-ifs ask it without waiting the few seconds
  /// housekeeping waits). The same conditions: berth's pod, not a gang member, admitted by its
  /// queue, no room held or bind in flight for it, no reclaim refused lately. \return whether
  /// room is now held for it.
  bool ReclaimForPending(const core::Pod& pod);

  /// The queue's verdict for the pod on the current admission plan: kFit unless it waits in its
  /// queue (always kFit without the "queue" module).
  NodeVerdict QueueVerdict(const core::ClusterState& state, const core::Pod& pod) const;

 private:
  /// What StartReclaim did.
  enum class Reclaim { kNone, kHeld };
  /// PreFilter of a gang member: admits its gang (plans and reserves room for every member it
  /// needs at once) or places elastic members. \return why the gang waits when it was just
  /// planned and does not fit (the gang module answers with it).
  std::optional<NodeVerdict> PrepareGang(const core::Pod& pod);
  /// After filtering a member whose reserved node kube-scheduler did not offer (or that no
  /// longer fits): moves its reservation to a candidate near the gang. \return whether it moved.
  /// `*not_offered` gets the reserved node's name when it is not among `candidates`.
  bool ReplanGangMember(const core::Pod& pod, std::span<const std::string_view> candidates,
                        std::string* not_offered);
  /// PostFilter: plans a reclaim for a berth pod no candidate takes, holds the room for it and
  /// records the evictions of the victims. kHeld: room is held for the pod (now or from before).
  Reclaim StartReclaim(const core::Pod& pod);
  /// A reclaim's eviction failed for good: releases the room held for `pod`, lets it borrow
  /// until the reclaim timeout has passed, and nudges it.
  void UndoReclaim(const core::Pod& pod, const absl::Status& why);
  /// Whether a reclaim for the pod failed recently (its filters may borrow, none starts).
  bool ReclaimBlocked(std::string_view uid, absl::Time now);
  /// Whether housekeeping may start a reclaim for pending `pod` (age aside).
  bool MayReclaimFor(const core::ClusterState& state, const core::Pod& pod, absl::Time now);
  /// Gangs whose reservations ran out, and gangs left incomplete (evicting their bound members
  /// when configured).
  void GangHousekeeping(absl::Time now, const std::vector<std::string>& expired_gangs);
  bool CanEvict() const { return effects_ != nullptr && effects_->CanEvict(); }
  void Log(EffectSink::Level level, std::string message) const {
    if (effects_ != nullptr) effects_->Log(level, std::move(message));
  }

  std::unique_ptr<Pipeline> pipeline_;
  FrameworkOptions options_;
  core::ClusterModel* model_;
  const core::Clock* clock_;
  EffectSink* effects_ = nullptr;
  /// Pods whose reclaim was undone, until when they may borrow instead.
  absl::Mutex blocked_mu_;
  std::map<std::string, absl::Time, std::less<>> reclaim_blocked_ ABSL_GUARDED_BY(blocked_mu_);
};

}  // namespace berth::policy
