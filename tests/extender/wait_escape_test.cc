// WaitEscape: a thread's waits hand its other duties away before they block (the HTTP loop's
// bind, extender/http_server.cc).

#include "extender/wait_escape.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "catch2/catch.hpp"

namespace berth::extender {
namespace {

using Clock = std::chrono::steady_clock;

struct Pipe {
  Pipe() { REQUIRE(::pipe(fds) == 0); }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  int read_end() const { return fds[0]; }
  /// No assertion here: Catch's are not to be made from other threads.
  bool Write() const { return ::write(fds[1], "x", 1) == 1; }
  int fds[2];
};

int PollRead(int fd, int timeout_ms, short* revents = nullptr) {
  pollfd p{fd, POLLIN, 0};
  const int rc = WaitEscape::Poll(&p, 1, timeout_ms);
  if (revents != nullptr) *revents = p.revents;
  return rc;
}

TEST_CASE("wait escape: a wait whose own descriptor is ready first leaves the escape armed") {
  Pipe own, watched;
  int fired = 0;
  WaitEscape escape(watched.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++fired; });
  REQUIRE(own.Write());
  short revents = 0;
  CHECK(PollRead(own.read_end(), 1000, &revents) == 1);
  CHECK((revents & POLLIN) != 0);
  CHECK(fired == 0);
  CHECK_FALSE(escape.fired());
  // Nothing ready: the wait times out, still without firing.
  Pipe quiet;
  CHECK(PollRead(quiet.read_end(), 20) == 0);
  CHECK(fired == 0);
}

TEST_CASE("wait escape: the watched descriptor fires it once, and the wait goes on", "[concurrency]") {
  Pipe own, watched;
  std::atomic<int> fired{0};
  WaitEscape escape(watched.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++fired; });
  REQUIRE(watched.Write());  // new work for the thread's other duties, before the wait starts
  std::atomic<bool> wrote{false};
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    wrote = own.Write();
  });
  const auto t0 = Clock::now();
  short revents = 0;
  CHECK(PollRead(own.read_end(), 5000, &revents) == 1);  // the watched one is never reported
  later.join();
  CHECK(wrote);
  CHECK((revents & POLLIN) != 0);
  CHECK(Clock::now() - t0 >= std::chrono::milliseconds(90));
  CHECK(fired == 1);
  CHECK(escape.fired());
  // Fired: later waits are plain waits, and watch nothing more.
  Pipe quiet;
  CHECK(PollRead(quiet.read_end(), 20) == 0);
  WaitEscape::BeforeBlindWait();
  CHECK(fired == 1);
}

TEST_CASE("wait escape: the other duties' deadline fires it within the wait") {
  Pipe own, watched;
  int fired = 0;
  WaitEscape escape(watched.read_end(), Clock::now() + std::chrono::milliseconds(50), [&] { ++fired; });
  const auto t0 = Clock::now();
  CHECK(PollRead(own.read_end(), 300) == 0);  // times out at its own timeout, not at the deadline
  const auto waited = Clock::now() - t0;
  CHECK(fired == 1);
  CHECK(waited >= std::chrono::milliseconds(290));
  CHECK(waited < std::chrono::seconds(3));
}

TEST_CASE("wait escape: a deadline already past fires it before the wait") {
  Pipe own, watched;
  int fired = 0;
  WaitEscape escape(watched.read_end(), Clock::now() - std::chrono::milliseconds(1), [&] { ++fired; });
  REQUIRE(own.Write());
  CHECK(PollRead(own.read_end(), 1000) == 1);
  CHECK(fired == 1);
}

TEST_CASE("wait escape: a blind wait fires it at once; a destroyed escape is disarmed") {
  Pipe watched;
  int fired = 0;
  {
    WaitEscape escape(watched.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++fired; });
    WaitEscape::BeforeBlindWait();
    CHECK(fired == 1);
    CHECK(escape.fired());
  }
  {
    WaitEscape escape(watched.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++fired; });
  }
  REQUIRE(watched.Write());
  WaitEscape::BeforeBlindWait();
  Pipe quiet;
  CHECK(PollRead(quiet.read_end(), 10) == 0);
  CHECK(fired == 1);
}

TEST_CASE("wait escape: only the thread that armed it sees it", "[concurrency]") {
  Pipe watched, quiet;
  REQUIRE(watched.Write());
  std::atomic<int> fired{0};
  WaitEscape escape(watched.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++fired; });
  std::atomic<int> other_polled{-1};
  std::thread other([&] {
    WaitEscape::BeforeBlindWait();
    other_polled = PollRead(quiet.read_end(), 10);
  });
  other.join();
  CHECK(other_polled == 0);
  CHECK(fired == 0);
  CHECK(PollRead(quiet.read_end(), 10) == 0);
  CHECK(fired == 1);
}

TEST_CASE("wait escape: an inner escape covers its waits, then the outer one is armed again") {
  Pipe watched_outer, watched_inner;
  int outer = 0, inner = 0;
  WaitEscape a(watched_outer.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++outer; });
  {
    WaitEscape b(watched_inner.read_end(), Clock::now() + std::chrono::seconds(10), [&] { ++inner; });
    WaitEscape::BeforeBlindWait();
    CHECK(inner == 1);
    CHECK(outer == 0);
  }
  WaitEscape::BeforeBlindWait();
  CHECK(outer == 1);
}

}  // namespace
}  // namespace berth::extender
