#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "extender/kube/client.h"

namespace berth::extender::kube {

/// Whether this replica may write bindings and evictions.
class LeadershipInterface {
 public:
  virtual ~LeadershipInterface() = default;
  virtual bool IsLeader() const = 0;
  /// Before refusing to act for leadership: reads the Lease again (the state last seen may be a
  /// round old, e.g. the co-located kube-scheduler took the Lease a moment ago) and answers
  /// IsLeader() after that. The default only answers IsLeader().
  virtual bool RecheckLeader() { return IsLeader(); }
  /// "berth-0_1a2b (leader)", "berth-1_3c4d (follower; leader: berth-0_1a2b)": for errors.
  virtual std::string Describe() const = 0;
};

struct LeaderElectionConfig {
  bool enabled = true;
  /// kAcquire: replicas compete for the Lease (client-go's algorithm). kFollow: berth holds no
  /// Lease itself; it is the leader while the Lease's holder identity starts with `identity`.
  /// With berth beside a kube-scheduler in one pod, following that kube-scheduler's Lease
  /// (holder "<pod name>_<uuid>") makes the replica that schedules the one that binds.
  enum class Mode { kAcquire, kFollow };
  Mode mode = Mode::kAcquire;
  std::string lease_name = "berth";
  std::string lease_namespace;  ///< empty: the client's default namespace, else "default"
  /// kAcquire: this replica's holder identity (default "<hostname>_<random>"). kFollow: the
  /// prefix of the holder identity that means "this pod" (default "<$POD_NAME or hostname>_").
  std::string identity;
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
};

/// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics: the holder
/// renews every retry_period; another replica takes over only after it has seen the Lease
/// unchanged for lease_duration (measured on its own clock, so clocks need not agree); a holder
/// that cannot renew within renew_deadline stops acting as leader before anyone may take over
/// (renew_deadline < lease_duration). Updates carry the resourceVersion, so two replicas cannot
/// both win a round (the loser gets 409).
class LeaderElector final : public LeadershipInterface {
 public:
  /// \param on_change called (on the elector's thread) when this replica gains or loses
  /// leadership.
  LeaderElector(KubeClient* client, LeaderElectionConfig config,
                std::function<void(bool)> on_change = nullptr);
  ~LeaderElector() override;

  /// Checks the configuration (renew_deadline < lease_duration, names set).
  static absl::Status Validate(const LeaderElectionConfig& config);

  void Start();
  /// Stops; a leader in acquire mode releases the Lease (empty holder) so a successor need
  /// not wait for it to expire.
  void Stop();

  bool IsLeader() const override;
  /// One read of the Lease (a round, as the elector's loop runs it), unless a round started after
  /// this call did (concurrent rechecks share one); rounds never overlap.
  bool RecheckLeader() override;
  std::string Describe() const override;
  /// Whether the Lease has been read at least once (found, or found absent): until then this
  /// replica cannot say who leads, and berth does not answer ready.
  bool Known() const;
  /// Called once (on the thread of the round) when the Lease is first known.
  void set_on_known(std::function<void()> f) { on_known_ = std::move(f); }

  const LeaderElectionConfig& config() const { return config_; }
  const std::string& lease_namespace() const { return lease_ns_; }
  /// The holder identity last read from the Lease ("" when none).
  std::string holder() const;

  /// One round: read the Lease and, in acquire mode, take or renew it. Public for tests.
  absl::Status TryAcquireOrRenew();

 private:
  void Run();
  /// TryAcquireOrRenew under round_mu_; marks the Lease known when the round read it.
  absl::Status Round();
  void SetLeader(bool leader);
  absl::Status Release();
  std::string LeasePath(bool item) const;

  KubeClient* client_;
  LeaderElectionConfig config_;
  std::function<void(bool)> on_change_;
  std::function<void()> on_known_;
  std::thread thread_;
  /// One round at a time, from the loop or from RecheckLeader.
  absl::Mutex round_mu_;  // taken before mu_
  uint64_t rounds_started_ ABSL_GUARDED_BY(round_mu_) = 0;
  std::atomic<uint64_t> rounds_begun_{0};  ///< rounds_started_, readable without round_mu_
  std::atomic<bool> lease_read_{false};  ///< a round has read the Lease (or its absence)
  std::atomic<bool> known_{false};       ///< ... and on_known_ has been called

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_renew_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  ///< our last successful write (acquire) or read showing us as holder (follow)
  std::string holder_ ABSL_GUARDED_BY(mu_);
  std::string observed_record_ ABSL_GUARDED_BY(mu_);  ///< holder + renewTime last seen
  absl::Time observed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration observed_duration_ ABSL_GUARDED_BY(mu_);
  std::string lease_ns_;
};

/// The default identity of this process: $POD_NAME, else the host name.
std::string DefaultPodName();

}  // namespace berth::extender::kube
