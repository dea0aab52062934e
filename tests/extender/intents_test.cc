// Side effects leave the request path (issue 15, point 3): a verb or tick records evictions,
// nudges and Events as intents, and returns; the worker (or DrainIntents) carries them out. A
// retryable refusal is tried again after a backoff, a permanent one undoes the decision: a
// reclaim's held room is released and its pod may borrow. All of it shows in /metrics.

#include <atomic>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

const std::vector<std::string> kAll = {"a1", "a2", "b1", "b2"};

// Pools team-a (a1, a2) and team-b (b1, b2) of 8-CPU nodes; team-a borrowers fill team-b; a
// team-b pod of 4 CPUs waits.
MakePod Seed(Harness& h) {
  auto node = [](const std::string& name, const std::string& pool) {
    return Event("ADDED", MakeNode(name).Cpu("8").Memory("32Gi").Pods(110).Label("pool", pool).Obj());
  };
  auto in_pool = [](const std::string& name, const std::string& pool, const std::string& cpu) {
    return MakePod(name).Namespace("ml").Uid(name).Annotation("berth.io/pool", pool).Cpu(cpu);
  };
  h.Apply(Json::array({Event("ADDED", MakePool("team-a").Label("pool", "a").Obj()),
                       Event("ADDED", MakePool("team-b").Label("pool", "b").Obj()),
                       node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")}));
  h.Apply(Json::array(
      {Event("ADDED", in_pool("borrow-1", "team-a", "6").Node("b1").Phase("Running").Obj()),
       Event("ADDED", in_pool("borrow-2", "team-a", "6").Node("b2").Phase("Running").Obj())}));
  const MakePod mine = in_pool("b-job", "team-b", "4");
  h.Apply(Json::array({Event("ADDED", mine.Obj())}));
  return mine;
}

std::string Intents(const std::string& kind, const std::string& outcome) {
  return StrCat("berth_intents_total{kind=\"", kind, "\",outcome=\"", outcome, "\"}");
}

std::string Pending(const std::string& kind) {
  return StrCat("berth_intents_pending{kind=\"", kind, "\"}");
}

bool HasPod(Harness& h, const std::string& name) {
  return h.model().Read()->FindPodByName("ml", name) != nullptr;
}

// The victim leaves the model, as the standalone evictor has it (the model, not the test's
// Apply: evictors may run on the worker thread).
void Delete(Harness* h, const core::Pod& victim) {
  h->model().Apply(core::PodDelete{.uid = victim.uid.str(), .ns = victim.ns.str(), .name = victim.name.str()});
}

// Waits on a latch the test releases. Should the caller be the verb itself (berth before
// intents), the wait ends after a long while instead of never, and says so.
class Latch {
 public:
  void Wait() {
    entered_.Notify();
    if (!released_.WaitForNotificationWithTimeout(absl::Seconds(20))) gave_up = true;
  }
  void Release() { released_.Notify(); }
  void WaitEntered() { entered_.WaitForNotification(); }
  std::atomic<bool> gave_up{false};

 private:
  absl::Notification entered_, released_;
};

// Evicts from the model as the standalone evictor does, once the latch is released.
class LatchedEvictor final : public extender::EvictorInterface {
 public:
  explicit LatchedEvictor(Harness* h) : h_(h) {}
  absl::Status Evict(const core::Pod& victim, const core::Pod&, std::string_view) override {
    latch.Wait();
    Delete(h_, victim);
    evicted.push_back(victim.name.str());
    return absl::OkStatus();
  }
  Latch latch;
  std::vector<std::string> evicted;

 private:
  Harness* h_;
};

// Answers the queued statuses in turn (OK once they run out), deleting the victim on OK.
class ScriptedEvictor final : public extender::EvictorInterface {
 public:
  ScriptedEvictor(Harness* h, std::vector<absl::Status> answers) : h_(h), answers_(std::move(answers)) {}
  absl::Status Evict(const core::Pod& victim, const core::Pod&, std::string_view) override {
    asked.push_back(victim.name.str());
    absl::Status s = absl::OkStatus();
    if (next_ < answers_.size()) s = answers_[next_++];
    if (s.ok()) {
      Delete(h_, victim);
    }
    return s;
  }
  std::vector<std::string> asked;

 private:
  Harness* h_;
  std::vector<absl::Status> answers_;
  size_t next_ = 0;
};

TEST_CASE("intents: a filter that starts a reclaim returns while the eviction is still blocked",
          "[intents][reclaim]") {
  Harness h;
  LatchedEvictor evictor(&h);
  h.service().SetEvictor(&evictor);
  const MakePod mine = Seed(h);
  h.service().StartIntentWorker();

  const Verdicts v = FilterPod(h, mine, kAll);
  // The filter answered while the eviction waits on the latch: the room is held, the victim
  // is still there, and the answer names the reclaim.
  CHECK(v.fit.empty());
  CHECK(Contains(v.Why("b2"), "reclaim in pool team-b: room held on node b1"));
  CHECK(HeldCpu(h, "b1") == "4");
  CHECK(HasPod(h, "borrow-1"));
  evictor.latch.WaitEntered();  // the worker has it
  evictor.latch.Release();
  h.service().StopIntentWorker();  // returns once the eviction in hand is done
  h.service().DrainIntents();
  CHECK_FALSE(evictor.latch.gave_up);  // the verb never waited on it
  CHECK(evictor.evicted == std::vector<std::string>{"borrow-1"});
  CHECK_FALSE(HasPod(h, "borrow-1"));
  CHECK(Metric(h, Intents("eviction", "done")) == 1);
  CHECK(Metric(h, "berth_evictions_total{cause=\"reclaim\"}") == 1);
  CHECK(Metric(h, Pending("eviction")) == 0);
  // The victim gone, the pod fits where its room is held.
  CHECK(FilterPod(h, mine, kAll).fit == std::vector<std::string>{"b1"});
}

TEST_CASE("intents: a throttled eviction (429) is retried after a backoff, then done",
          "[intents][reclaim]") {
  Harness h;
  ScriptedEvictor evictor(&h, {absl::ResourceExhaustedError("POST .../eviction: 429 TooManyRequests")});
  h.service().SetEvictor(&evictor);
  const MakePod mine = Seed(h);

  CHECK(FilterPod(h, mine, kAll).fit.empty());
  CHECK(evictor.asked.empty());  // recorded, not carried out
  CHECK(Metric(h, Pending("eviction")) == 1);
  h.service().DrainIntents();
  CHECK(evictor.asked == std::vector<std::string>{"borrow-1"});
  CHECK(Metric(h, Intents("eviction", "retried")) == 1);
  CHECK(Metric(h, Intents("eviction", "done")) == 0);
  CHECK(Metric(h, Pending("eviction")) == 1);
  // The room stays held while the eviction waits for its retry.
  CHECK(HeldCpu(h, "b1") == "4");
  // The retry waits for its backoff: draining now does nothing.
  h.service().DrainIntents();
  CHECK(evictor.asked.size() == 1);
  h.clock().Advance(absl::Seconds(1));
  h.service().DrainIntents();
  CHECK(evictor.asked == std::vector<std::string>{"borrow-1", "borrow-1"});
  CHECK(Metric(h, Intents("eviction", "done")) == 1);
  CHECK(Metric(h, Intents("eviction", "failed")) == 0);
  CHECK(Metric(h, Pending("eviction")) == 0);
  CHECK(Metric(h, "berth_evictions_total{cause=\"reclaim\"}") == 1);
  CHECK(FilterPod(h, mine, kAll).fit == std::vector<std::string>{"b1"});
}

TEST_CASE("intents: a retryable refusal that never ends is undone after the last attempt",
          "[intents][reclaim]") {
  Harness h;
  std::vector<absl::Status> refusals(10, absl::UnavailableError("connection refused"));
  ScriptedEvictor evictor(&h, refusals);
  h.service().SetEvictor(&evictor);
  const MakePod mine = Seed(h);
  CHECK(FilterPod(h, mine, kAll).fit.empty());
  for (int i = 0; i < 10; ++i) {
    h.service().DrainIntents();
    h.clock().Advance(absl::Seconds(10));
  }
  CHECK(evictor.asked.size() == 5);  // the attempts are bounded
  CHECK(Metric(h, Intents("eviction", "retried")) == 4);
  CHECK(Metric(h, Intents("eviction", "failed")) == 1);
  CHECK(Metric(h, Intents("eviction", "undone")) == 1);
  CHECK(HeldCpu(h, "b1") == "");
}

TEST_CASE("intents: a refused eviction is undone: room released, the pod borrows next",
          "[intents][reclaim]") {
  // A permission error, or a disruption budget as the Kubernetes evictor reports it.
  const absl::Status refusal = GENERATE(
      absl::PermissionDeniedError("pods \"borrow-1\" is forbidden"),
      absl::FailedPreconditionError("Cannot evict pod as it would violate the pod's disruption budget."));
  INFO(refusal.ToString());
  Harness h;
  ScriptedEvictor evictor(&h, {refusal, refusal});
  h.service().SetEvictor(&evictor);
  const MakePod mine = Seed(h);

  CHECK(FilterPod(h, mine, kAll).fit.empty());
  CHECK(HeldCpu(h, "b1") == "4");
  h.service().DrainIntents();
  CHECK(evictor.asked == std::vector<std::string>{"borrow-1"});  // never retried
  CHECK(Metric(h, Intents("eviction", "failed")) == 1);
  CHECK(Metric(h, Intents("eviction", "undone")) == 1);
  CHECK(Metric(h, Intents("eviction", "retried")) == 0);
  CHECK(Metric(h, "berth_evictions_total{cause=\"reclaim\"}") == 0);
  CHECK(HeldCpu(h, "b1") == "");
  CHECK(HasPod(h, "borrow-1"));
  // Its next filter may borrow (seed 004), and starts no second reclaim meanwhile.
  const Verdicts v = FilterPod(h, mine, kAll);
  CHECK(v.fit == std::vector<std::string>{"a1", "a2"});
  h.service().DrainIntents();
  CHECK(evictor.asked.size() == 1);
  CHECK(HeldCpu(h, "b2") == "");
}

// Counts nudges; blocks on a latch when one is set.
class CountingNudger final : public extender::NudgerInterface {
 public:
  absl::Status Nudge(const core::Pod& pod, std::string_view) override {
    if (latch != nullptr) latch->Wait();
    nudged.push_back(pod.name.str());
    return absl::OkStatus();
  }
  Latch* latch = nullptr;
  std::vector<std::string> nudged;
};

class CountingEvictor final : public extender::EvictorInterface {
 public:
  explicit CountingEvictor(Harness* h) : h_(h) {}
  absl::Status Evict(const core::Pod& victim, const core::Pod&, std::string_view) override {
    Delete(h_, victim);
    evicted.push_back(victim.name.str());
    return absl::OkStatus();
  }
  std::vector<std::string> evicted;

 private:
  Harness* h_;
};

TEST_CASE("intents: the admission tick queues its nudges and fair-share evictions",
          "[intents][queue]") {
  Harness h;
  Latch latch;
  CountingNudger nudger;
  nudger.latch = &latch;
  CountingEvictor evictor(&h);
  h.service().SetNudger(&nudger);
  h.service().SetEvictor(&evictor);
  // Queue a fills four 1-CPU nodes, two of its pods with a 10 minute lifetime; queue b's job
  // waits for its share.
  Json events = Json::array({Event("ADDED", MakeQueue("a").Obj()), Event("ADDED", MakeQueue("b").Obj())});
  for (int i = 0; i < 4; ++i) {
    events.push_back(Event("ADDED", MakeNode(StrCat("n-", i)).Cpu("1").Pods(110).Obj()));
  }
  const std::string since = absl::FormatTime(absl::RFC3339_sec, h.clock().Now() - absl::Minutes(1),
                                             absl::UTCTimeZone());
  for (int i = 0; i < 4; ++i) {
    MakePod p = MakePod(StrCat("a-", i)).Namespace("ml").Uid(StrCat("a-", i)).Cpu("1")
                    .Label("berth.io/queue", "a").Created(since).Started(since)
                    .Node(StrCat("n-", i)).Phase("Running");
    if (i < 2) p.Annotation("berth.io/lifetime", "10m");
    events.push_back(Event("ADDED", p.Obj()));
  }
  const MakePod b0 = MakePod("b-0").Namespace("ml").Uid("b-0").Cpu("1").Label("berth.io/queue", "b").Created(since);
  events.push_back(Event("ADDED", b0.Obj()));
  h.Apply(events);
  // kube-scheduler asked about b's job and parked it: no node has room.
  REQUIRE(FilterPod(h, b0, {"n-0", "n-1", "n-2", "n-3"}).fit.empty());
  h.clock().Advance(absl::Minutes(15));
  h.service().StartIntentWorker();

  // The nudger blocks; the tick returns anyway, having recorded one nudge and one eviction.
  const extender::AdmissionTickStats stats = h.service().AdmissionTick();
  CHECK(stats.nudged == 1);
  CHECK(stats.evicted == 1);
  latch.WaitEntered();
  // The eviction waits behind the blocked nudge: nothing was evicted by the tick itself.
  CHECK(evictor.evicted.empty());
  CHECK(Metric(h, Pending("eviction")) == 1);
  CHECK(Metric(h, "berth_nudges_total") == 0);
  latch.Release();
  h.service().StopIntentWorker();
  h.service().DrainIntents();
  CHECK_FALSE(latch.gave_up);
  CHECK(nudger.nudged == std::vector<std::string>{"b-0"});
  CHECK(evictor.evicted.size() == 1);
  CHECK(Metric(h, "berth_nudges_total") == 1);
  CHECK(Metric(h, "berth_evictions_total{cause=\"fair-share\"}") == 1);
  CHECK(Metric(h, Intents("nudge", "done")) == 1);
  CHECK(Metric(h, Intents("eviction", "done")) == 1);
  CHECK(Metric(h, Pending("nudge")) == 0);
}

}  // namespace
}  // namespace berth::testing
