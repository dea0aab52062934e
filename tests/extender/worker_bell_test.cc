#include "extender/worker_bell.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace berth::extender {
namespace {

TEST_CASE("WorkerBell: a ring between Prepare and Wait is not lost", "[worker_bell][concurrency]") {
  WorkerBell bell;
  const uint32_t ticket = bell.Prepare();
  CHECK(bell.sleepers() == 1);
  bell.RingOne();
  // Wait returns at once: the ring came after the ticket. A lost ring would sleep forever.
  auto waited = std::async(std::launch::async, [&] { bell.Wait(ticket); });
  REQUIRE(waited.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(bell.sleepers() == 0);
}

TEST_CASE("WorkerBell: a sleeping waiter is woken by RingOne, and every waiter by RingAll",
          "[worker_bell][concurrency]") {
  WorkerBell bell;
  const uint32_t first = bell.Prepare();
  auto one = std::async(std::launch::async, [&] { bell.Wait(first); });
  // Let it reach the kernel; whether it has or not, the ring must end its wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(one.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  bell.RingOne();
  REQUIRE(one.wait_for(std::chrono::seconds(10)) == std::future_status::ready);

  std::vector<std::future<void>> all;
  for (int i = 0; i < 4; ++i) {
    const uint32_t ticket = bell.Prepare();
    all.push_back(std::async(std::launch::async, [&bell, ticket] { bell.Wait(ticket); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bell.RingAll();
  for (auto& f : all) REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(bell.sleepers() == 0);
}

// The HTTP server's use: workers take jobs from a queue under a mutex and sleep on the bell
// when it is empty; the producer pushes in bursts and pauses, so that workers are found in
// every state (running, between Prepare and Wait, asleep).
TEST_CASE("WorkerBell: no job waits in the queue while every worker sleeps", "[worker_bell][concurrency]") {
  WorkerBell bell;
  std::mutex mu;
  std::deque<int> jobs;
  bool stop = false;
  std::atomic<int> done{0};
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      for (;;) {
        int job = -1;
        uint32_t ticket = 0;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!jobs.empty()) {
            job = jobs.front();
            jobs.pop_front();
          } else if (stop) {
            return;
          } else {
            ticket = bell.Prepare();
          }
        }
        if (job < 0) {
          bell.Wait(ticket);
          continue;
        }
        sum += job;
        ++done;
      }
    });
  }
  constexpr int kJobs = 20000;
  std::mt19937 gen(5);
  int64_t expected = 0;
  for (int i = 0; i < kJobs; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      jobs.push_back(i);
    }
    expected += i;
    bell.RingOne();
    if (gen() % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(gen() % 200));
  }
  // Every job is taken without another ring: a lost wake-up leaves one in the queue.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (done.load() < kJobs && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(done.load() == kJobs);
  CHECK(sum.load() == expected);
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  bell.RingAll();
  for (std::thread& t : workers) t.join();
  CHECK(bell.sleepers() == 0);
}

}  // namespace
}  // namespace berth::extender
