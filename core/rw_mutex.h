#pragma once

#include <pthread.h>

namespace berth::core {

/// A reader-writer lock that lets a waiting writer in first: once a writer waits, new readers
/// wait behind it, so a steady stream of verbs (readers) cannot keep watch events (the writer)
/// out of the model. glibc's default rwlock, and so std::shared_mutex, prefers readers and let
/// the model's writer starve in a stress test; absl::Mutex in Debian 12's abseil (20220623) did
/// too, now and then. A thread must not take the read lock twice (it would wait behind a
/// waiting writer): berth's verbs take one view each.
///
/// Meets the Lockable and SharedLockable requirements (std::unique_lock, std::shared_lock).
class RwMutex {
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

  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace berth::core
