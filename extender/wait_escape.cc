#include "extender/wait_escape.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <utility>

namespace berth::extender {

thread_local WaitEscape* WaitEscape::armed_ = nullptr;

WaitEscape::WaitEscape(int watch_fd, Clock::time_point until, std::function<void()> fire)
    : watch_fd_(watch_fd), until_(until), fire_(std::move(fire)), outer_(armed_) {
  armed_ = this;
}

WaitEscape::~WaitEscape() {
  if (armed_ == this) armed_ = outer_;
}

void WaitEscape::Fire() {
  if (armed_ == this) armed_ = outer_;
  fired_ = true;
  // Moved out first: the callback runs once, and what it captured goes with it.
  std::function<void()> fire = std::move(fire_);
  if (fire) fire();
}

void WaitEscape::BeforeBlindWait() {
  if (WaitEscape* e = armed_) e->Fire();
}

namespace {

/// Milliseconds from `now` to `end`, rounded up, as a poll timeout (-1: `end` is never).
int PollMsUntil(WaitEscape::Clock::time_point end, WaitEscape::Clock::time_point now) {
  if (end == WaitEscape::Clock::time_point::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(
      std::max(end - now, WaitEscape::Clock::duration::zero()));
  return static_cast<int>(std::min<int64_t>(left.count(), std::numeric_limits<int>::max()));
}

}  // namespace

int WaitEscape::Poll(pollfd* fds, nfds_t n, int timeout_ms) {
  WaitEscape* e = armed_;
  constexpr nfds_t kMax = 7;
  if (e == nullptr || n > kMax) {
    if (e != nullptr) e->Fire();  // more than it can watch: wait blind
    return ::poll(fds, n, timeout_ms);
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = timeout_ms < 0 ? Clock::time_point::max()
                                               : start + std::chrono::milliseconds(timeout_ms);
  std::array<pollfd, kMax + 1> all{};
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= e->until_) break;  // the other duties' deadline: give them away, then wait
    // The sooner of the two, and -1 (no timeout) only when both are never.
    const int to_until = PollMsUntil(e->until_, now);
    const int to_end = PollMsUntil(end, now);
    const int wait = to_until < 0 ? to_end : to_end < 0 ? to_until : std::min(to_until, to_end);
    std::copy(fds, fds + n, all.begin());
    all[n] = pollfd{e->watch_fd_, POLLIN, 0};
    const int rc = ::poll(all.data(), n + 1, wait);
    if (rc < 0) return rc;  // errno as poll left it
    int mine = 0;
    for (nfds_t i = 0; i < n; ++i) {
      fds[i].revents = all[i].revents;
      if (fds[i].revents != 0) ++mine;
    }
    if (all[n].revents != 0) break;
    if (mine > 0) return mine;
    if (Clock::now() >= end) return 0;
  }
  e->Fire();
  return ::poll(fds, n, PollMsUntil(end, Clock::now()));
}

}  // namespace berth::extender
