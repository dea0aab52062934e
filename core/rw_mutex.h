#pragma once

#include <pthread.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"

namespace berth::core {

/// How long a lock was held exclusively: a histogram and the longest hold since start. Recorded
/// with relaxed atomics by the writer after it releases the lock, read at any time (GET
/// /metrics); readers of the lock never touch it.
class HoldTimes {
 public:
  /// Upper bounds of the buckets, in nanoseconds: 1 us to 1 s (a model write takes
  /// microseconds; anything in the milliseconds stalls every verb).
  static constexpr std::array<int64_t, 19> kBoundsNs = {
      1'000,      2'500,      5'000,      10'000,      25'000,      50'000,     100'000,
      250'000,    500'000,    1'000'000,  2'500'000,   5'000'000,   10'000'000, 25'000'000,
      50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000};

  /// A copy of the figures. `buckets` are not cumulative; holds above the last bound are
  /// counted only in `count`.
  struct Snapshot {
    std::array<uint64_t, kBoundsNs.size()> buckets{};
    uint64_t count = 0;
    int64_t sum_ns = 0;
    int64_t max_ns = 0;
  };

  void Record(int64_t ns) {
    for (size_t i = 0; i < kBoundsNs.size(); ++i) {
      if (ns <= kBoundsNs[i]) {
        buckets_[i].fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
    int64_t max = max_ns_.load(std::memory_order_relaxed);
    while (ns > max && !max_ns_.compare_exchange_weak(max, ns, std::memory_order_relaxed)) {
    }
    count_.fetch_add(1, std::memory_order_relaxed);
  }

  /// Starts over from nothing. berth never calls it (GET /metrics reports the longest hold
  /// since start); a benchmark does, to measure one phase at a time.
  void Reset() {
    for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
    count_.store(0, std::memory_order_relaxed);
    sum_ns_.store(0, std::memory_order_relaxed);
    max_ns_.store(0, std::memory_order_relaxed);
  }

  Snapshot Read() const {
    Snapshot s;
    s.count = count_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < kBoundsNs.size(); ++i) {
      s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    }
    s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
    s.max_ns = max_ns_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBoundsNs.size()> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_ns_{0};
  std::atomic<int64_t> max_ns_{0};
};

/// A reader-writer lock that lets a waiting writer in first: once a writer waits, new readers
/// wait behind it, so a steady stream of verbs (readers) cannot keep watch events (the writer)
/// out of the model. glibc's default rwlock, and so std::shared_mutex, prefers readers and let
/// the model's writer starve in a stress test; absl::Mutex in Debian 12's abseil (20220623) did
/// too, now and then. A thread must not take the read lock twice (it would wait behind a
/// waiting writer): berth's verbs take one view each.
///
/// Meets the Lockable and SharedLockable requirements (std::unique_lock, std::shared_lock), and
/// is a capability for clang's thread-safety analysis: take it exclusively with WriterLock so
/// that ABSL_EXCLUSIVE_LOCKS_REQUIRED and ABSL_GUARDED_BY on it are checked (std::unique_lock
/// carries no annotations).
///
/// Every exclusive hold is timed (the steady clock read when the writer gets the lock and when
/// it lets go) into write_holds(); shared holds are not, and cost nothing more.
class ABSL_LOCKABLE RwMutex {
 public:
  RwMutex() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwMutex() { pthread_rwlock_destroy(&lock_); }
  RwMutex(const RwMutex&) = delete;
  RwMutex& operator=(const RwMutex&) = delete;

  // The bodies call pthreads, which the analysis does not know: it checks the callers.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    pthread_rwlock_wrlock(&lock_);
    write_since_ = std::chrono::steady_clock::now();
  }
  void unlock() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const auto held = std::chrono::steady_clock::now() - write_since_;
    pthread_rwlock_unlock(&lock_);
    write_holds_.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(held).count());
  }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    pthread_rwlock_rdlock(&lock_);
  }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    pthread_rwlock_unlock(&lock_);
  }

  /// How long writers held the lock.
  const HoldTimes& write_holds() const { return write_holds_; }
  HoldTimes& write_holds() { return write_holds_; }

 private:
  pthread_rwlock_t lock_;
  /// When the current writer got the lock; written and read only by that writer.
  std::chrono::steady_clock::time_point write_since_;
  // Its own cache line: the writer updates it while readers take the lock.
  alignas(64) HoldTimes write_holds_;
};

/// Holds an RwMutex exclusively for its scope.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(RwMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  RwMutex& mu_;
};

}  // namespace berth::core
