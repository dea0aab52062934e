#include "policy/registry.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/pipeline.h"
#include "policy/policy.h"
#include "policy/verdict.h"

namespace berth::policy {
namespace {

class NamedFilter final : public FilterPlugin {
 public:
  explicit NamedFilter(std::string name) : name_(std::move(name)) {}
  std::string_view Name() const override { return name_; }
  bool Filter(const CycleContext&, const core::NodeState&, NodeVerdict*) const override { return true; }

 private:
  std::string name_;
};

class ConstScore final : public ScorePlugin {
 public:
  ConstScore(std::string name, int64_t score) : name_(std::move(name)), score_(score) {}
  std::string_view Name() const override { return name_; }
  int64_t Score(const CycleContext&, const core::NodeState&) const override { return score_; }

 private:
  std::string name_;
  int64_t score_;
};

// A module at two points, counting how often it is built.
class FilterAndScore final : public FilterPlugin, public ScorePlugin {
 public:
  std::string_view Name() const override { return "both"; }
  bool Filter(const CycleContext&, const core::NodeState&, NodeVerdict*) const override { return true; }
  int64_t Score(const CycleContext&, const core::NodeState&) const override { return 4; }
};

// A registry with filters "alpha", "beta" and scores "five", "nine".
Registry SmallRegistry() {
  Registry r;
  for (const char* name : {"alpha", "beta"}) {
    REQUIRE(r.Register<NamedFilter>(name, [name](const BuildContext&) {
               return std::make_unique<NamedFilter>(name);
             }).ok());
  }
  for (auto [name, score] : {std::pair{"five", 5}, std::pair{"nine", 9}}) {
    REQUIRE(r.Register<ConstScore>(name, [name, score](const BuildContext&) {
               return std::make_unique<ConstScore>(name, score);
             }).ok());
  }
  return r;
}

PolicyConfig Empty() {
  PolicyConfig c;
  c.filters.clear();
  c.scores.clear();
  c.preempt.clear();
  c.admission.clear();
  c.reclaim.clear();
  return c;
}

std::string BuildError(const Registry& r, const PolicyConfig& c) {
  core::ResourceNames names;
  absl::StatusOr<std::unique_ptr<Pipeline>> p = r.Build(c, names);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

TEST_CASE("Registry rejects a name registered twice, whatever its points", "[registry]") {
  Registry r = SmallRegistry();
  const absl::Status s = r.Register<NamedFilter>(
      "alpha", [](const BuildContext&) { return std::make_unique<NamedFilter>("other"); });
  CHECK(s.code() == absl::StatusCode::kAlreadyExists);
  CHECK(s.message() == "module \"alpha\" registered twice");
  // One table: a score may not take a filter's name either.
  const absl::Status s2 = r.Register<ConstScore>(
      "alpha", [](const BuildContext&) { return std::make_unique<ConstScore>("alpha", 1); });
  CHECK(s2.code() == absl::StatusCode::kAlreadyExists);

  // The first registration stands.
  CHECK(r.Names() == std::vector<std::string>{"alpha", "beta", "five", "nine"});
  CHECK(r.NamesAt(Point::kFilter) == std::vector<std::string>{"alpha", "beta"});
  CHECK(r.NamesAt(Point::kScore) == std::vector<std::string>{"five", "nine"});
  CHECK(r.PointsOf("alpha") == Bit(Point::kFilter));
  CHECK(r.PointsOf("ghost") == 0);
}

TEST_CASE("Registry::Build rejects unknown module names and lists the ones with that point",
          "[registry]") {
  Registry r = SmallRegistry();
  PolicyConfig c = Empty();

  SECTION("filter") {
    c.filters = {"alpha", "gamma"};
    CHECK(BuildError(r, c) ==
          "policy.filters: unknown module \"gamma\"; modules with a Filter point: alpha, beta");
  }
  SECTION("score") {
    c.scores = {{"seven", 1}};
    CHECK(BuildError(r, c) ==
          "policy.scores: unknown module \"seven\"; modules with a Score point: five, nine");
  }
  SECTION("preempt, with none registered") {
    c.preempt = {"resource-fit"};
    CHECK(BuildError(r, c) == "policy.preempt: unknown module \"resource-fit\"; modules with a "
                              "PreemptionReview point: ");
  }
  SECTION("admission") {
    c.admission = {"gang"};
    CHECK_THAT(BuildError(r, c),
               Catch::Matchers::StartsWith("policy.admission: unknown module \"gang\""));
  }
  SECTION("order") {
    c.order = {"drf"};
    CHECK_THAT(BuildError(r, c), Catch::Matchers::StartsWith("policy.order: unknown module \"drf\""));
  }
}

TEST_CASE("Registry::Build names the point a listed module does not implement", "[registry]") {
  Registry r = SmallRegistry();
  PolicyConfig c = Empty();
  SECTION("a score listed as a filter") {
    c.filters = {"five"};
    CHECK(BuildError(r, c) ==
          "policy.filters: module \"five\" has no Filter point; it implements: Score");
  }
  SECTION("a filter listed for reclaim") {
    c.reclaim = {"alpha"};
    CHECK(BuildError(r, c) ==
          "policy.reclaim: module \"alpha\" has no PostFilter point; it implements: Filter");
  }
}

TEST_CASE("Registry::Build rejects a module listed twice", "[registry]") {
  Registry r = SmallRegistry();
  PolicyConfig c = Empty();
  SECTION("filter") {
    c.filters = {"alpha", "beta", "alpha"};
    CHECK(BuildError(r, c) == "policy.filters: module \"alpha\" is listed twice");
  }
  SECTION("score, even with different weights") {
    c.scores = {{"five", 1}, {"five", 2}};
    CHECK(BuildError(r, c) == "policy.scores: module \"five\" is listed twice");
  }
}

TEST_CASE("Registry::Build places one instance of a module at every point it is listed for",
          "[registry]") {
  Registry r;
  auto built = std::make_shared<int>(0);
  REQUIRE(r.Register<FilterAndScore>("both", [built](const BuildContext&) {
             ++*built;
             return std::make_unique<FilterAndScore>();
           }).ok());
  CHECK(r.PointsOf("both") == (Bit(Point::kFilter) | Bit(Point::kScore)));
  PolicyConfig c = Empty();
  c.filters = {"both"};
  c.scores = {{"both", 3}};
  core::ResourceNames names;
  absl::StatusOr<std::unique_ptr<Pipeline>> p = r.Build(c, names);
  REQUIRE(p.ok());
  CHECK(*built == 1);
  CHECK((*p)->Describe() == std::vector<std::string>{"filter:both", "score:both*3"});

  // Listed at one point only, it is still built once and placed there alone.
  c.scores.clear();
  REQUIRE(r.Build(c, names).ok());
  CHECK(*built == 2);
  c = Empty();
  c.admission = {"both"};
  CHECK(BuildError(r, c) ==
        "policy.admission: module \"both\" has no PreFilter point; it implements: Filter, Score");
  CHECK(*built == 2);  // nothing is built for a configuration that does not hold
}

TEST_CASE("Registry::Build checks score weights are within 1..100", "[registry]") {
  Registry r = SmallRegistry();
  PolicyConfig c = Empty();
  SECTION("zero") {
    c.scores = {{"five", 0}};
    CHECK(BuildError(r, c) == "policy.scores: module \"five\" has weight 0; expected 1..100");
  }
  SECTION("negative") {
    c.scores = {{"nine", 1}, {"five", -3}};
    CHECK(BuildError(r, c) == "policy.scores: module \"five\" has weight -3; expected 1..100");
  }
  SECTION("too big") {
    c.scores = {{"five", 101}};
    CHECK(BuildError(r, c) == "policy.scores: module \"five\" has weight 101; expected 1..100");
  }
  SECTION("the bounds are accepted and weight the mean") {
    c.scores = {{"five", 1}, {"nine", 100}};
    core::ResourceNames names;
    absl::StatusOr<std::unique_ptr<Pipeline>> p = r.Build(c, names);
    REQUIRE(p.ok());
    CHECK((*p)->Describe() == std::vector<std::string>{"score:five*1", "score:nine*100"});
    core::FakeClock clock;
    core::ClusterModel model(&clock);
    core::Node n;
    n.name = "n1";
    model.Apply(core::NodeUpsert{n});
    auto view = model.Read();
    const core::Pod pod;
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock.Now()};
    // (5*1 + 9*100) / 101 = 8.96 -> 9.
    CHECK((*p)->ScoreNode(ctx, *view->FindNode("n1")) == 9);
  }
}

TEST_CASE("Registry::Build reports a failing factory with the module name", "[registry]") {
  Registry r;
  REQUIRE(r.Register<NamedFilter>("broken", [](const BuildContext&)
                                                -> absl::StatusOr<std::unique_ptr<NamedFilter>> {
             return absl::InvalidArgumentError("bad setting");
           }).ok());
  PolicyConfig c = Empty();
  c.filters = {"broken"};
  CHECK(BuildError(r, c) == "policy.filters: module \"broken\": bad setting");
}

TEST_CASE("Registry::Build keeps the configured filter order", "[registry]") {
  Registry r = SmallRegistry();
  PolicyConfig c = Empty();
  c.filters = {"beta", "alpha"};
  c.scores = {{"nine", 2}};
  core::ResourceNames names;
  absl::StatusOr<std::unique_ptr<Pipeline>> p = r.Build(c, names);
  REQUIRE(p.ok());
  CHECK((*p)->Describe() ==
        std::vector<std::string>{"filter:beta", "filter:alpha", "score:nine*2"});

  // An empty configuration builds an empty pipeline.
  absl::StatusOr<std::unique_ptr<Pipeline>> e = r.Build(Empty(), names);
  REQUIRE(e.ok());
  CHECK((*e)->Describe().empty());
}

// ---- the default registry -----------------------------------------------------------------------

TEST_CASE("BuildDefaultRegistry registers each module once, at all of its points",
          "[registry]") {
  const Registry r = BuildDefaultRegistry();
  // (A score module added later only adds a name: these lists are what must be there.)
  for (const char* name : {"binpack", "gang", "gang-topology", "gpu-affinity", "gpu-min-cpu",
                           "gpu-reserve", "pools", "queue", "resource-fit"}) {
    INFO(name);
    CHECK(r.PointsOf(name) != 0);
  }
  CHECK(PointNames(r.PointsOf("pools")) == "Filter, PostFilter, PreemptionReview");
  CHECK(PointNames(r.PointsOf("resource-fit")) == "Filter, PreemptionReview");
  CHECK(PointNames(r.PointsOf("gang")) == "PreFilter, Filter, PreemptionReview, Permit");
  CHECK(PointNames(r.PointsOf("gang-topology")) == "Score");
  CHECK(PointNames(r.PointsOf("queue")) == "PreFilter");
  CHECK(r.NamesAt(Point::kFilter) ==
        std::vector<std::string>{"gang", "gpu-reserve", "pools", "resource-fit"});
  for (const char* name : {"binpack", "gang-topology", "gpu-affinity"}) {
    CHECK(r.PointsOf(name) == Bit(Point::kScore));
  }

  core::ResourceNames names;
  absl::StatusOr<std::unique_ptr<Pipeline>> p = r.Build(PolicyConfig{}, names);
  REQUIRE(p.ok());
  CHECK((*p)->Describe() ==
        std::vector<std::string>{"prefilter:gpu-min-cpu", "prefilter:queue", "prefilter:gang",
                                 "filter:gang", "filter:resource-fit", "filter:pools",
                                 "filter:gpu-reserve", "postfilter:pools", "review:pools",
                                 "review:gang", "review:resource-fit", "score:binpack*1",
                                 "score:gpu-affinity*1", "score:gang-topology*2", "permit:gang"});

  // binpack is a score module only.
  PolicyConfig c = Empty();
  c.preempt = {"binpack"};
  CHECK(BuildError(r, c) ==
        "policy.preempt: module \"binpack\" has no PreemptionReview point; it implements: Score");
  c = Empty();
  c.filters = {"binpack"};
  CHECK(BuildError(r, c) ==
        "policy.filters: module \"binpack\" has no Filter point; it implements: Score");
}

TEST_CASE("BuildDefaultRegistry passes the binpack settings through", "[registry]") {
  const Registry r = BuildDefaultRegistry();
  PolicyConfig c;
  c.binpack.weights = {{"cpu", 2000}};
  CHECK(BuildError(r, c) ==
        "policy.scores: module \"binpack\": binpack weight of \"cpu\" is 2000; expected 0..1000");

  // Resources named in the weights are interned into the model's table.
  c.binpack.weights = {{"example.com/foo", 1}};
  core::ResourceNames names;
  REQUIRE(r.Build(c, names).ok());
  CHECK(names.Find("example.com/foo").has_value());
}

TEST_CASE("The default pipeline filters, scores and preempts a real model", "[registry]") {
  core::FakeClock clock;
  core::ClusterModel model(&clock);
  absl::StatusOr<std::unique_ptr<Pipeline>> p =
      BuildDefaultRegistry().Build(PolicyConfig{}, model.resources());
  REQUIRE(p.ok());

  for (auto [name, cpu] : {std::pair{"small", 2000}, std::pair{"big", 8000}}) {
    core::Node n;
    n.name = name;
    n.allocatable.Set(core::kCpu, cpu);
    n.allocatable.Set(core::kMemory, int64_t{8} << 30);
    n.allocatable.Set(core::kPods, 110);
    model.Apply(core::NodeUpsert{n});
  }
  core::Pod victim;
  victim.uid = "v";
  victim.ns = "default";
  victim.name = "v";
  victim.node_name = "small";
  victim.scheduler_name = PolicyConfig{}.scheduler_name;  // berth's own: it may be preempted
  victim.phase = core::PodPhase::kRunning;
  victim.request.Set(core::kCpu, 1500);
  victim.request.Set(core::kPods, 1);
  model.Apply(core::PodUpsert{victim});

  core::Pod pod;
  pod.uid = "p";
  pod.ns = "default";
  pod.name = "p";
  pod.request.Set(core::kCpu, 1000);
  pod.request.Set(core::kPods, 1);

  auto view = model.Read();
  const CycleContext ctx{.state = *view, .pod = pod, .now = clock.Now()};
  const std::vector<std::string_view> candidates = {"small", "big", "ghost"};
  const std::vector<NodeVerdict> v = (*p)->Filter(ctx, candidates);
  REQUIRE(v.size() == 3);
  CHECK(v[0].fit == Fit::kUnschedulable);
  CHECK(v[0].message == "berth: insufficient cpu (pod requests 1 cpu)");
  CHECK(v[1].ok());
  CHECK(v[2].reason == Reason::kUnknownNode);

  // binpack: big has cpu 1/8 and memory 0 in use -> (0.125 + 0) / 2 * 10 = 0.625 -> 1 (GPU
  // weight does not count on nodes without GPUs); gpu-affinity: a CPU-only pod on a node without
  // GPUs -> 10. Mean (1 + 10) / 2 = 5.5 -> 6.
  CHECK((*p)->ScoreNode(ctx, *view->FindNode("big")) == 6);

  std::vector<NodeVictims> proposal;
  proposal.push_back(NodeVictims{.node = "small",
                                 .victims = {Victim{.uid = "v", .priority = 0,
                                                    .known = view->FindPod("v")}}});
  const std::vector<NodeVictims> kept = (*p)->ReviewPreemption(ctx, std::move(proposal));
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].node == "small");
}

}  // namespace
}  // namespace berth::policy
