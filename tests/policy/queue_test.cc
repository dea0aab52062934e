// The fair-share book below the wire: when an admission plan is reused, and what a pod that
// arrived after the last plan is told in a large cluster (plans there are rate-limited).

#include <catch2/catch.hpp>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "policy/queue/queue.h"
#include "tests/testing/core_builders.h"

namespace berth::policy {
namespace {

using testing::CoreNode;
using testing::CorePod;
using testing::kGi;

core::Pod Managed(core::Pod p) {
  p.scheduler_name = "berth-scheduler";
  return p;
}

// `nodes` nodes of 8 CPUs, each running `per_node` pods of another scheduler (1 CPU each).
void Fill(core::ClusterModel& model, int nodes, int per_node) {
  std::vector<core::ModelEvent> events;
  for (int n = 0; n < nodes; ++n) {
    const std::string name = "n" + std::to_string(n);
    events.emplace_back(core::NodeUpsert{CoreNode(name, 8000, 32 * kGi)});
    for (int k = 0; k < per_node; ++k) {
      events.emplace_back(core::PodUpsert{CorePod(name + "-" + std::to_string(k), name, 100, kGi)});
    }
  }
  model.Apply(events);
}

TEST_CASE("fair share: a small cluster plans anew for any pod the plan does not cover", "[queue]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Fill(model, 4, 2);
  FairShare book(QueueConfig{}, "berth-scheduler");
  model.Apply(core::PodUpsert{Managed(CorePod("a", "", 1000, kGi))});
  auto first = book.PlanFor(*model.Read(), clock.Now(), "a");
  REQUIRE(first->JobOf("a") != nullptr);
  // The same state, the same plan; a new pod at the same instant: a new plan.
  CHECK(book.PlanFor(*model.Read(), clock.Now(), "a") == first);
  model.Apply(core::PodUpsert{Managed(CorePod("b", "", 1000, kGi))});
  auto second = book.PlanFor(*model.Read(), clock.Now(), "b");
  CHECK(second != first);
  CHECK(second->JobOf("b") != nullptr);
  CHECK(AdmissionVerdict(*second, *model.Read(), Managed(CorePod("b", "", 1000, kGi))).ok());
  // A pod the model does not hold makes no plan (and is let through).
  CHECK(book.PlanFor(*model.Read(), clock.Now(), "not-in-the-model") == second);
  // Two plans made (the reuses made none), and their time counted (/metrics).
  CHECK(book.plans_made() == 2);
  CHECK(book.plan_seconds() > 0);
  // A reader's plan of a state no kept plan saw is made, counted, and not kept.
  model.Apply(core::PodUpsert{Managed(CorePod("c", "", 1000, kGi))});
  auto published = book.Published(*model.Read(), clock.Now());
  CHECK(published->JobOf("c") != nullptr);
  CHECK(book.plans_made() == 3);
  CHECK(book.PlanFor(*model.Read(), clock.Now(), "b") == second);
  CHECK(book.plans_made() == 3);
  CHECK(book.Replan(*model.Read(), clock.Now()) != second);
  CHECK(book.plans_made() == 4);
}

TEST_CASE("fair share: in a large cluster a pod that just arrived waits for the next plan", "[queue]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Fill(model, 1001, 10);  // 10,010 pods: plans are rate-limited
  QueueConfig config;
  config.plan_reuse = absl::Milliseconds(250);
  FairShare book(config, "berth-scheduler");
  model.Apply(core::PodUpsert{Managed(CorePod("a", "", 1000, kGi))});
  auto first = book.PlanFor(*model.Read(), clock.Now(), "a");
  REQUIRE(first->JobOf("a") != nullptr);

  const core::Pod late = Managed(CorePod("late", "", 1000, kGi));
  model.Apply(core::PodUpsert{late});
  clock.Advance(absl::Milliseconds(100));
  auto reused = book.PlanFor(*model.Read(), clock.Now(), "late");
  CHECK(reused == first);
  const NodeVerdict v = AdmissionVerdict(*reused, *model.Read(), late);
  CHECK(v.fit == Fit::kUnresolvable);
  CHECK(v.reason == Reason::kQueueWaiting);
  CHECK(v.message == "berth: queue default: arrived after the last admission plan; the next one places it");
  // A pod berth's model does not hold (a watch behind the scheduler) is not held back.
  CHECK(AdmissionVerdict(*reused, *model.Read(), Managed(CorePod("unknown", "", 1000, kGi))).ok());

  clock.Advance(absl::Milliseconds(200));
  auto next = book.PlanFor(*model.Read(), clock.Now(), "late");
  CHECK(next != first);
  CHECK(AdmissionVerdict(*next, *model.Read(), late).ok());
}

TEST_CASE("fair share: a plan serves the pods it admits longer than those it keeps waiting", "[queue]") {
  // An admission holds until a later plan (the tick makes one each second); a pod the plan
  // keeps waiting is asked again after planReuse, as room freed since may admit it.
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Fill(model, 1, 0);  // one node of 8 CPUs
  QueueConfig config;
  config.plan_reuse = absl::Milliseconds(250);
  config.admitted_plan_reuse = absl::Milliseconds(1500);
  FairShare book(config, "berth-scheduler");
  model.Apply(core::PodUpsert{Managed(CorePod("first", "", 6000, kGi))});
  clock.Advance(absl::Seconds(1));
  model.Apply(core::PodUpsert{Managed(CorePod("second", "", 6000, kGi))});
  auto plan = book.PlanFor(*model.Read(), clock.Now(), "first");
  REQUIRE(plan->JobOf("first") != nullptr);
  REQUIRE(plan->JobOf("first")->state == JobState::kAdmitted);
  REQUIRE(plan->JobOf("second") != nullptr);
  REQUIRE(plan->JobOf("second")->state != JobState::kAdmitted);
  model.Apply(core::NodeUpsert{CoreNode("n-late", 8000, 32 * kGi)});  // the model moved on

  clock.Advance(absl::Milliseconds(400));
  CHECK(book.PlanFor(*model.Read(), clock.Now(), "first") == plan);  // admitted: still served
  CHECK(book.plans_made() == 1);
  auto again = book.PlanFor(*model.Read(), clock.Now(), "second");  // waiting: asked anew
  CHECK(again != plan);
  CHECK(book.plans_made() == 2);
  // The new node took it.
  CHECK(again->JobOf("second")->state == JobState::kAdmitted);

  clock.Advance(absl::Milliseconds(1600));
  model.Apply(core::PodUpsert{Managed(CorePod("third", "", 1000, kGi))});
  CHECK(book.PlanFor(*model.Read(), clock.Now(), "first") != again);  // too old even admitted
  CHECK(book.plans_made() == 3);
}

/// A clock on which every reading is a second after the one before: a plan made between two
/// readings took a second.
class TickingClock final : public core::Clock {
 public:
  explicit TickingClock(absl::Time start) : next_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    const absl::Time t = next_;
    next_ += absl::Seconds(1);
    return t;
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::Time next_ ABSL_GUARDED_BY(mu_);
};

TEST_CASE("fair share: a plan is reused for planReuse from when it was done, not from when it began", "[queue]") {
  // A plan that takes longer than planReuse to make must still serve the callers after it;
  // counted from its start, it was too old for the next pod, and a housekeeping pass made a
  // plan per waiting pod (berth_bench --queues, "housekeeping pass").
  core::FakeClock model_clock;
  core::ClusterModel model(&model_clock);
  Fill(model, 4, 2);
  QueueConfig config;
  config.plan_reuse = absl::Milliseconds(250);
  config.admitted_plan_reuse = config.plan_reuse;  // "a" is admitted: one window for both
  FairShare book(config, "berth-scheduler");
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  TickingClock clock(t0);
  book.SetClock(&clock);
  model.Apply(core::PodUpsert{Managed(CorePod("a", "", 1000, kGi))});
  // Asked at t0; the plan is done a second later on the book's clock.
  auto first = book.PlanFor(*model.Read(), t0, "a");
  REQUIRE(first->JobOf("a") != nullptr);
  model.Apply(core::NodeUpsert{CoreNode("n-late", 8000, 32 * kGi)});
  // 1.2 s after it began, 0.2 s after it was done: reused (it covers "a").
  CHECK(book.PlanFor(*model.Read(), t0 + absl::Milliseconds(1200), "a") == first);
  // 1.3 s after it began: planReuse after it was done has passed.
  auto next = book.PlanFor(*model.Read(), t0 + absl::Milliseconds(1300), "a");
  CHECK(next != first);
  CHECK(next->JobOf("a") != nullptr);
}


TEST_CASE("fair share: a job no node could ever take holds no room and no place in line", "[queue]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  Fill(model, 2, 7);  // two 8-CPU nodes, 1 CPU free on each
  FairShare book(QueueConfig{}, "berth-scheduler");
  // The older job asks for more than any node has; the younger one fits.
  model.Apply(core::PodUpsert{Managed(CorePod("huge", "", 16000, kGi))});
  clock.Advance(absl::Seconds(1));
  model.Apply(core::PodUpsert{Managed(CorePod("small", "", 1000, kGi))});
  auto plan = book.PlanFor(*model.Read(), clock.Now(), "small");
  const PlannedJob* huge = plan->JobOf("huge");
  const PlannedJob* small = plan->JobOf("small");
  REQUIRE(huge != nullptr);
  REQUIRE(small != nullptr);
  CHECK(huge->state == JobState::kUnplaceable);
  CHECK(huge->position == 0);
  // The why names no rule it cannot know (the node filters do), and what the job needs.
  CHECK_THAT(huge->why, Catch::StartsWith("no node could ever take it as the cluster stands"));
  CHECK_THAT(huge->why, Catch::Contains("/debug/explain"));
  CHECK_THAT(huge->why, Catch::Contains("cpu"));
  // It goes on to the node filters, which say why; the job behind it is not held back.
  CHECK(AdmissionVerdict(*plan, *model.Read(), Managed(CorePod("huge", "", 16000, kGi))).ok());
  CHECK(small->state == JobState::kAdmitted);
}

}  // namespace
}  // namespace berth::policy
