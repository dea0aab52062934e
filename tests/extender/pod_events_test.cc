// Events about waiting pods (SPEC 6.8, 7): the reason a pod waits is written on the pod,
// once per reason and message, again only after a while, with a per-second cap, never for a
// pod that fits or has been placed.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

struct Recorded {
  std::string pod, type, reason, note;
};

class RecordingSink final : public extender::PodEventSinkInterface {
 public:
  absl::Status Record(const core::Pod& pod, std::string_view type, std::string_view reason,
                      std::string_view note) override {
    events.push_back({pod.Key(), std::string(type), std::string(reason), std::string(note)});
    return absl::OkStatus();
  }
  std::vector<Recorded> events;
};

struct Setup {
  Harness h;
  RecordingSink sink;
  std::vector<std::string> nodes = {"n1", "n2"};
  Setup() {
    h.service().SetPodEventSink(&sink);
    h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("4").Memory("8Gi").Pods(110).Obj()),
                         Event("ADDED", MakeNode("n2").Cpu("4").Memory("8Gi").Pods(110).Obj())}));
  }
  int Tick() {
    const size_t before = sink.events.size();
    const int n = h.Tick().events;
    CHECK(static_cast<size_t>(n) == sink.events.size() - before);
    return n;
  }
};

TEST_CASE("events: a waiting pod gets its reason once, again only after a while", "[events]") {
  Setup s;
  const MakePod lost = MakePod("lost").Cpu("1").Label("berth.io/queue", "team-x");
  s.h.Apply(Json::array({Event("ADDED", lost.Obj())}));
  CHECK(FilterPod(s.h, lost, s.nodes).fit.empty());
  CHECK(s.Tick() == 1);
  REQUIRE(s.sink.events.size() == 1);
  CHECK(s.sink.events[0].pod == "default/lost");
  CHECK(s.sink.events[0].type == "Warning");
  CHECK(s.sink.events[0].reason == "QueueUnknown");
  CHECK(Contains(s.sink.events[0].note, "queue \"team-x\" does not exist"));

  // Retried every second for a minute: nothing new is written.
  for (int i = 0; i < 60; ++i) {
    s.h.clock().Advance(absl::Seconds(1));
    FilterPod(s.h, lost, s.nodes);
    CHECK(s.Tick() == 0);
  }
  // Five minutes on, still waiting for the same reason: written again, once.
  s.h.clock().Advance(absl::Minutes(4));
  FilterPod(s.h, lost, s.nodes);
  CHECK(s.Tick() == 1);
  CHECK(s.Tick() == 0);

  // A new reason is written at once if the last Event is 10 seconds old, not sooner.
  s.h.Apply(Json::array({Event("ADDED", MakeQueue("team-x").Obj()),
                         Event("ADDED", MakePod("hog-1").Scheduler("default-scheduler").Cpu("4")
                                            .Node("n1").Phase("Running").Obj()),
                         Event("ADDED", MakePod("hog-2").Scheduler("default-scheduler").Cpu("4")
                                            .Node("n2").Phase("Running").Obj())}));
  s.h.clock().Advance(absl::Seconds(1));
  FilterPod(s.h, lost, s.nodes);
  CHECK(s.Tick() == 0);
  s.h.clock().Advance(absl::Seconds(10));
  FilterPod(s.h, lost, s.nodes);
  CHECK(s.Tick() == 1);
  CHECK(s.sink.events.back().reason == "InsufficientResource");
  CHECK(Contains(s.sink.events.back().note, "insufficient cpu"));

  // Once it is placed, nothing more is written about it.
  s.h.Apply(Json::array({Event("DELETED", MakePod("hog-1").Scheduler("default-scheduler").Obj())}));
  s.h.clock().Advance(absl::Seconds(1));
  const Verdicts v = FilterPod(s.h, lost, s.nodes);
  REQUIRE(v.fit == std::vector<std::string>{"n1"});
  BindOk(s.h, lost, "n1");
  s.h.clock().Advance(absl::Minutes(10));
  CHECK(s.Tick() == 0);
}

TEST_CASE("events: at most maxPerSecond per tick, the longest untold first", "[events]") {
  Setup s;
  std::vector<MakePod> pods;
  Json events = Json::array();
  for (int i = 0; i < 30; ++i) {
    pods.push_back(MakePod(StrCat("p", i)).Cpu("1").Label("berth.io/queue", "missing"));
    events.push_back(Event("ADDED", pods.back().Obj()));
  }
  s.h.Apply(events);
  for (const MakePod& p : pods) FilterPod(s.h, p, s.nodes);
  CHECK(s.Tick() == 20);
  CHECK(s.Tick() == 10);
  CHECK(s.Tick() == 0);
  // A pod that fits gets none.
  const MakePod fine = MakePod("fine").Cpu("1");
  s.h.Apply(Json::array({Event("ADDED", fine.Obj())}));
  CHECK(FilterPod(s.h, fine, s.nodes).fit.size() == 2);
  CHECK(s.Tick() == 0);
}

}  // namespace
}  // namespace berth::testing
