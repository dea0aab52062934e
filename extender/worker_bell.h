#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace berth::extender {

/// Wakes threads that wait for work kept elsewhere (a queue guarded by the caller's mutex),
/// with a futex on a ring counter.
///
/// A waiter, holding the queue's lock and finding it empty, takes a ticket (Prepare), releases
/// the lock and sleeps (Wait) until the counter moves past its ticket. A producer publishes
/// work under the lock, releases it, and rings: the counter moves and one sleeper is woken.
/// A waiter that took its ticket before the work was published either sleeps and is woken, or
/// sees the counter moved and does not sleep; one that takes it after finds the work.
///
/// Why not std::condition_variable: glibc's condition variable takes the mutex back, for the
/// woken thread, in its "contended" state, so the unlock that follows every wake-up makes a
/// FUTEX_WAKE system call that wakes nobody. The HTTP server's workers wake once per request
/// handed to them (every bind); that was one system call in seven of a bind's.
class WorkerBell {
 public:
  /// With the queue's lock held, after finding nothing to do: the ticket to Wait on.
  uint32_t Prepare() {
    sleepers_.fetch_add(1);
    return ring_.load();
  }

  /// Without the lock: sleeps until a ring after Prepare (at once if one came already). May
  /// return spuriously; the caller looks at the queue again either way.
  void Wait(uint32_t ticket) {
    while (ring_.load() == ticket) {
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ring_), FUTEX_WAIT_PRIVATE, ticket, nullptr, nullptr, 0);
    }
    sleepers_.fetch_sub(1);
  }

  /// After publishing work and releasing the lock: wakes one waiter, if any has a ticket. No
  /// system call when none does.
  void RingOne() {
    if (sleepers_.load() == 0) return;
    ring_.fetch_add(1);
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ring_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

  /// Wakes every waiter (to stop).
  void RingAll() {
    ring_.fetch_add(1);
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ring_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }

  /// Threads between Prepare and the end of Wait.
  int sleepers() const { return sleepers_.load(); }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  std::atomic<uint32_t> ring_{0};
  std::atomic<int> sleepers_{0};
};

}  // namespace berth::extender
