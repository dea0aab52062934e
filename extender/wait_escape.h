#pragma once

// A thread with duties besides the call it is making, when that call may wait: the HTTP loop
// answering a bind, whose binding waits for the API server (docs/decisions.md, "HTTP").
//
// The thread arms a WaitEscape around the call. Every wait the call makes that honours it
// gives the thread's other duties away first (the escape "fires": its callback hands them to
// another thread), and then waits as it would have:
// - WaitEscape::Poll (the API client's waits for its socket) watches `watch_fd` beside its own
//   descriptors, and fires as soon as `watch_fd` is readable (new work for those duties) or
//   `until` passes (their next deadline). A wait that ends before either costs nothing more;
// - WaitEscape::BeforeBlindWait fires at once, before a wait that cannot watch a descriptor:
//   a sleep, a name lookup, a lock that another thread holds across a network call.
//
// It fires at most once. After that the thread only finishes its call; the escape's owner
// asks fired() to know which duties it still has. Only the thread that armed an escape sees it.

#include <poll.h>

#include <chrono>
#include <functional>

namespace berth::extender {

class WaitEscape {
 public:
  using Clock = std::chrono::steady_clock;

  /// Arms the escape for this thread's waits, until it is destroyed (or fires). At most one is
  /// armed per thread: arming another while one is armed replaces it until that one ends.
  WaitEscape(int watch_fd, Clock::time_point until, std::function<void()> fire);
  ~WaitEscape();
  WaitEscape(const WaitEscape&) = delete;
  WaitEscape& operator=(const WaitEscape&) = delete;

  bool fired() const { return fired_; }

  /// ::poll(fds, n, timeout_ms), honouring this thread's armed escape if there is one. Returns
  /// what ::poll would for `fds` alone (watch_fd's readiness is never reported). It watches
  /// watch_fd beside at most 7 descriptors; with more, the escape fires and the wait is blind.
  static int Poll(pollfd* fds, nfds_t n, int timeout_ms);
  /// Before a wait that watches no descriptor: fires this thread's armed escape, if any.
  static void BeforeBlindWait();

 private:
  void Fire();

  int watch_fd_;
  Clock::time_point until_;
  std::function<void()> fire_;
  bool fired_ = false;
  WaitEscape* outer_;
  static thread_local WaitEscape* armed_;
};

}  // namespace berth::extender
