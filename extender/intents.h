#pragma once

// Side effects as intents (issue 15, point 3): verbs and ticks decide what must happen to pods
// outside berth (evictions, nudges, Events) and record it here; one worker carries it out through
// the evictor, nudger and Event sink, off the request path. A retryable answer is tried again with
// capped exponential backoff; any other failure, or running out of attempts, calls the undo the
// intent was recorded with, so the decision that made it can be taken back.

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/objects.h"
#include "extender/metrics.h"

namespace berth::extender {

class EvictorInterface;
class NudgerInterface;
class PodEventSinkInterface;

enum class IntentKind : uint8_t { kEviction, kNudge, kEvent };
inline constexpr std::array<std::string_view, 3> kIntentKindNames = {"eviction", "nudge", "event"};

/// One side effect berth decided on.
struct Intent {
  IntentKind kind = IntentKind::kEviction;
  /// The pod acted on: the victim, the pod nudged, the pod the Event is about.
  core::Pod pod;
  /// Eviction: the pod the room is for.
  core::Pod for_pod;
  /// Eviction and nudge: what for ("reclaim in pool gpu", "admitted by queue a").
  std::string why;
  /// Eviction: the cause berth_evictions_total counts it under (reclaim, gang-elastic,
  /// gang-incomplete, fair-share).
  std::string cause;
  /// Event: its type (Normal, Warning), reason code and the note a person reads.
  std::string type, reason, note;
  /// Called once, on the thread that carries the intent out, when it fails for good (a
  /// permanent error, or the last attempt): takes back what the decision did. May be empty.
  std::function<void(const absl::Status&)> undo;
  /// Intents of one decision share this flag: once one of them is undone the others still queued
  /// are dropped (counted as undone) instead of carried out. May be null.
  std::shared_ptr<std::atomic<bool>> cancelled;
};

/// Whether an answer is worth trying again: the API server is unavailable, throttles (429),
/// timed out, or a conflict the next attempt may not meet.
bool RetryableIntentError(const absl::Status& s);

struct IntentOptions {
  /// The wait before the second attempt; doubled after each retry, up to max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(5);
  /// Attempts in all (the first one included) before an intent is undone.
  int max_attempts = 5;
};

/// Outcomes counted by berth_intents_total.
enum class IntentOutcome : uint8_t { kDone, kRetried, kFailed, kUndone };
inline constexpr std::array<std::string_view, 4> kIntentOutcomeNames = {"done", "retried", "failed",
                                                                        "undone"};

/// The queue of intents and its worker. Thread-safe: verbs record from any thread; the worker
/// (Start) and Drain may run at the same time, each intent is carried out once.
class IntentQueue {
 public:
  /// \param clock times retries (a fake clock in tests: a retry waits until it is advanced).
  /// \param metrics where carried-out evictions and nudges are counted (berth_evictions_total,
  ///   berth_nudges_total).
  IntentQueue(const core::Clock* clock, Metrics* metrics, IntentOptions options = {});
  ~IntentQueue();
  IntentQueue(const IntentQueue&) = delete;
  IntentQueue& operator=(const IntentQueue&) = delete;

  void SetEvictor(EvictorInterface* evictor);
  void SetNudger(NudgerInterface* nudger);
  void SetPodEventSink(PodEventSinkInterface* sink);

  /// Queues an intent; never waits on the API server.
  void Record(Intent intent);

  /// Carries out, on the calling thread, every intent due now (all newly recorded ones; a retry
  /// waits for its backoff on the clock). \return how many attempts were made.
  int Drain();

  /// Starts the worker thread (idempotent); Stop ends it once the intent in hand is done.
  /// Intents still queued at Stop stay queued (and are logged) for a later Drain or Start.
  void Start();
  void Stop();

  /// Intents waiting to be carried out (retries included), of one kind.
  int64_t pending(IntentKind kind) const;
  /// How many intents of `kind` ended in (or went through) `outcome`.
  uint64_t count(IntentKind kind, IntentOutcome outcome) const;
  /// Writes berth_intents_total{kind,outcome} and berth_intents_pending{kind}.
  void WriteMetrics(PromWriter& w) const;

 private:
  struct Entry {
    Intent intent;
    int attempts = 0;
    absl::Time due;
  };
  /// Takes the first intent due at `now` off the queue, if any.
  bool PopDue(absl::Time now, Entry* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// One attempt; requeues a retry under the lock.
  void Attempt(Entry entry);
  absl::Status Execute(const Intent& intent);
  void Count(IntentKind kind, IntentOutcome outcome);
  void Run();

  const core::Clock* clock_;
  Metrics* metrics_;
  const IntentOptions options_;
  std::atomic<EvictorInterface*> evictor_{nullptr};
  std::atomic<NudgerInterface*> nudger_{nullptr};
  std::atomic<PodEventSinkInterface*> events_{nullptr};

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;

  std::array<std::atomic<int64_t>, kIntentKindNames.size()> pending_{};
  std::array<std::array<std::atomic<uint64_t>, kIntentOutcomeNames.size()>, kIntentKindNames.size()>
      outcomes_{};
};

}  // namespace berth::extender
