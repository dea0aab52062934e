#include "policy/pipeline.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "policy/fit/resource_fit.h"
#include "policy/policy.h"
#include "policy/verdict.h"

namespace berth::policy {
namespace {

// ---- fakes --------------------------------------------------------------------------------------

// Fails the nodes named in `verdicts` with the given verdict; counts its calls.
class FakeFilter final : public FilterPlugin {
 public:
  FakeFilter(std::string name, std::map<std::string, NodeVerdict> verdicts,
             std::shared_ptr<std::atomic<int>> calls)
      : name_(std::move(name)), verdicts_(std::move(verdicts)), calls_(std::move(calls)) {}
  std::string_view Name() const override { return name_; }
  bool Filter(const CycleContext&, const core::NodeState& node, NodeVerdict* why) const override {
    ++*calls_;
    auto it = verdicts_.find(node.node.name);
    if (it == verdicts_.end() || it->second.ok()) return true;
    *why = it->second;
    return false;
  }

 private:
  std::string name_;
  std::map<std::string, NodeVerdict> verdicts_;
  std::shared_ptr<std::atomic<int>> calls_;
};

// Scores each node as listed (0 for others), even outside [0, kMaxScore].
class FakeScore final : public ScorePlugin {
 public:
  FakeScore(std::string name, std::map<std::string, int64_t> scores, bool applies = true)
      : name_(std::move(name)), scores_(std::move(scores)), applies_(applies) {}
  std::string_view Name() const override { return name_; }
  bool Applies(const CycleContext&) const override { return applies_; }
  int64_t Score(const CycleContext&, const core::NodeState& node) const override {
    auto it = scores_.find(node.node.name);
    return it == scores_.end() ? 0 : it->second;
  }

 private:
  std::string name_;
  std::map<std::string, int64_t> scores_;
  bool applies_;
};

class FakeAdmission final : public PreFilterPlugin {
 public:
  FakeAdmission(std::string name, NodeVerdict verdict)
      : name_(std::move(name)), verdict_(std::move(verdict)) {}
  std::string_view Name() const override { return name_; }
  NodeVerdict PreFilter(const CycleContext&) const override { return verdict_; }

 private:
  std::string name_;
  NodeVerdict verdict_;
};

// Refuses the node `refuse`; removes victims whose uid starts with `drop_prefix`; appends a
// victim `add` (if not empty) to every node it keeps. Records the victim uids it was shown.
class FakePreempt final : public PreemptionReviewPlugin {
 public:
  struct Options {
    std::string refuse;
    std::string drop_prefix = "\x01";
    std::string add;
    int32_t add_priority = 0;
  };
  FakePreempt(std::string name, Options o, std::vector<std::string>* seen = nullptr)
      : name_(std::move(name)), o_(std::move(o)), seen_(seen) {}
  std::string_view Name() const override { return name_; }
  bool Review(const CycleContext&, const core::NodeState& node, NodeVictims* proposal,
              NodeVerdict* why) const override {
    if (seen_ != nullptr) {
      for (const Victim& v : proposal->victims) seen_->push_back(proposal->node + ":" + v.uid);
    }
    if (node.node.name == o_.refuse) {
      *why = NodeVerdict{.fit = Fit::kUnresolvable,
                         .reason = Reason::kPreemptionNotHelpful,
                         .message = name_ + " refuses",
                         .detail = "fake"};
      return false;
    }
    std::erase_if(proposal->victims,
                  [&](const Victim& v) { return v.uid.starts_with(o_.drop_prefix); });
    if (!o_.add.empty()) {
      proposal->victims.push_back(Victim{.uid = o_.add, .priority = o_.add_priority});
    }
    return true;
  }

 private:
  std::string name_;
  Options o_;
  std::vector<std::string>* seen_;
};

class FakeOrder final : public QueueSortPlugin {
 public:
  std::string_view Name() const override { return "fake-order"; }
  bool Less(const core::ClusterState&, const core::Pod& a, const core::Pod& b) const override {
    return a.name < b.name;
  }
};

NodeVerdict Fail(Fit fit, Reason reason, std::string message) {
  return NodeVerdict{.fit = fit, .reason = reason, .message = std::move(message), .detail = "d"};
}

// One filter that finds n2 full and lets every other node through.
std::vector<std::shared_ptr<FilterPlugin>> N2Full() {
  return {std::make_shared<FakeFilter>(
      "f", std::map<std::string, NodeVerdict>{{"n2", Fail(Fit::kUnschedulable, Reason::kInsufficientResource, "full")}},
      std::make_shared<std::atomic<int>>(0))};
}

// ---- fixture ------------------------------------------------------------------------------------

// Nodes n1, n2 and n3, of 4 CPUs each.
void AddThreeNodes(core::ClusterModel& model) {
  for (const char* name : {"n1", "n2", "n3"}) {
    core::Node n;
    n.name = name;
    n.allocatable.Set(core::kCpu, 4000);
    n.allocatable.Set(core::kPods, 110);
    model.Apply(core::NodeUpsert{std::move(n)});
  }
}

class PipelineTest {
 protected:
  PipelineTest() {
    AddThreeNodes(model_);
    pod_.uid = "p-uid";
    pod_.ns = "default";
    pod_.name = "p";
    pod_.request.Set(core::kPods, 1);
  }

  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};
  core::Pod pod_;
};

// ---- filter -------------------------------------------------------------------------------------

TEST_CASE_METHOD(PipelineTest, "Pipeline: the first failing filter wins", "[pipeline]") {
  auto calls1 = std::make_shared<std::atomic<int>>(0);
  auto calls2 = std::make_shared<std::atomic<int>>(0);
  std::vector<std::shared_ptr<FilterPlugin>> filters;
  filters.push_back(std::make_shared<FakeFilter>(
      "first",
      std::map<std::string, NodeVerdict>{
          {"n1", Fail(Fit::kUnschedulable, Reason::kInsufficientResource, "first says no")}},
      calls1));
  filters.push_back(std::make_shared<FakeFilter>(
      "second",
      std::map<std::string, NodeVerdict>{
          {"n1", Fail(Fit::kUnresolvable, Reason::kExceedsAllocatable, "second says no")},
          {"n2", Fail(Fit::kUnresolvable, Reason::kExceedsAllocatable, "second says no")}},
      calls2));
  Pipeline p({.filter = std::move(filters)});

  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  const std::vector<std::string_view> candidates = {"n1", "n2", "n3"};
  const std::vector<NodeVerdict> v = p.Filter(ctx, candidates);
  REQUIRE(v.size() == 3);
  CHECK(v[0].fit == Fit::kUnschedulable);
  CHECK(v[0].reason == Reason::kInsufficientResource);
  CHECK(v[0].message == "first says no");
  CHECK(v[1].fit == Fit::kUnresolvable);
  CHECK(v[1].reason == Reason::kExceedsAllocatable);
  CHECK(v[1].message == "second says no");
  CHECK(v[2].ok());
  CHECK(v[2].reason == Reason::kNone);
  // The second filter is not consulted once the first has failed a node.
  CHECK(calls1->load() == 3);
  CHECK(calls2->load() == 2);

  const NodeVerdict direct = p.FilterNode(ctx, *view->FindNode("n1"));
  CHECK(direct.message == "first says no");
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: unknown nodes are unschedulable, in input order",
                 "[pipeline]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::vector<std::shared_ptr<FilterPlugin>> filters;
  filters.push_back(
      std::make_shared<FakeFilter>("f", std::map<std::string, NodeVerdict>{}, calls));
  Pipeline p({.filter = std::move(filters)});

  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  const std::vector<std::string_view> candidates = {"ghost", "n2", "", "n1"};
  const std::vector<NodeVerdict> v = p.Filter(ctx, candidates);
  REQUIRE(v.size() == 4);
  for (size_t i : {0, 2}) {
    INFO("candidate " << i);
    CHECK(v[i].fit == Fit::kUnschedulable);
    CHECK(v[i].reason == Reason::kUnknownNode);
    CHECK(ReasonCode(v[i].reason) == "UnknownNode");
    CHECK(v[i].message == "unknown node");
  }
  CHECK(v[1].ok());
  CHECK(v[3].ok());
  CHECK(calls->load() == 2);  // filters never see unknown nodes

  const NodeVerdict u = UnknownNodeVerdict();
  CHECK(u.fit == Fit::kUnschedulable);
  CHECK(u.reason == Reason::kUnknownNode);
  CHECK(u.message == "unknown node");

  CHECK(p.Filter(ctx, std::vector<std::string_view>{}).empty());
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: an admission refusal applies to every known node",
                 "[pipeline]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  const NodeVerdict refusal =
      Fail(Fit::kUnresolvable, Reason::kInsufficientResource, "gang not admitted");
  std::vector<std::shared_ptr<PreFilterPlugin>> admission;
  admission.push_back(std::make_shared<FakeAdmission>("yes", NodeVerdict::Ok()));
  admission.push_back(std::make_shared<FakeAdmission>("gang", refusal));
  admission.push_back(std::make_shared<FakeAdmission>(
      "later", Fail(Fit::kUnschedulable, Reason::kInsufficientResource, "later refusal")));
  std::vector<std::shared_ptr<FilterPlugin>> filters;
  filters.push_back(
      std::make_shared<FakeFilter>("f", std::map<std::string, NodeVerdict>{}, calls));
  Pipeline p({.prefilter = std::move(admission), .filter = std::move(filters)});

  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  const NodeVerdict a = p.PreFilter(ctx);
  CHECK(a.fit == Fit::kUnresolvable);
  CHECK(a.message == "gang not admitted");  // the first refusal

  const std::vector<std::string_view> candidates = {"n1", "ghost", "n3"};
  const std::vector<NodeVerdict> v = p.Filter(ctx, candidates);
  REQUIRE(v.size() == 3);
  CHECK(v[0].fit == Fit::kUnresolvable);
  CHECK(v[0].message == "gang not admitted");
  CHECK(v[0].detail == "d");
  CHECK(v[1].reason == Reason::kUnknownNode);
  CHECK(v[2].fit == Fit::kUnresolvable);
  CHECK(v[2].message == "gang not admitted");
  CHECK(calls->load() == 0);
}

TEST_CASE_METHOD(PipelineTest,
                 "Pipeline: a filter without messages decides the same, and gives words to the first "
                 "verdict of each reason only",
                 "[pipeline]") {
  // n1, n2, n3: 4 CPUs, n2 and n3 with 2 in use; small1, small2: 2 CPUs. The pod asks for 3.
  for (const char* name : {"small1", "small2"}) {
    core::Node n;
    n.name = name;
    n.allocatable.Set(core::kCpu, 2000);
    n.allocatable.Set(core::kPods, 110);
    REQUIRE(model_.Apply(core::NodeUpsert{std::move(n)}).refused.empty());
  }
  for (const char* node : {"n2", "n3"}) {
    core::Pod running;
    running.uid = running.name = std::string("on-") + node;
    running.ns = "default";
    running.node_name = node;
    running.phase = core::PodPhase::kRunning;
    running.request.Set(core::kCpu, 2000);
    REQUIRE(model_.Apply(core::PodUpsert{std::move(running)}).refused.empty());
  }
  pod_.request.Set(core::kCpu, 3000);
  Pipeline p({.filter = {std::make_shared<ResourceFitModule>()}});
  auto view = model_.Read();
  const std::vector<std::string_view> candidates = {"ghost", "small1", "n1", "n2", "n3",
                                                    "small2", "ghost2"};
  const CycleContext worded{.state = *view, .pod = pod_, .now = clock_.Now(), .explain = false};
  CycleContext bare = worded;
  bare.messages = false;
  const std::vector<NodeVerdict> all = p.Filter(worded, candidates);
  const std::vector<NodeVerdict> v = p.Filter(bare, candidates);
  REQUIRE(all.size() == candidates.size());
  REQUIRE(v.size() == candidates.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO(candidates[i]);
    CHECK(v[i].fit == all[i].fit);
    CHECK(v[i].reason == all[i].reason);
    if (!all[i].ok()) CHECK_FALSE(all[i].message.empty());
    // The first of each reason says what the worded filter says; the others say nothing.
    const bool first = i == 0 || i == 1 || i == 3;
    CHECK(v[i].message == (first ? all[i].message : ""));
    CHECK(v[i].detail == (first ? all[i].detail : ""));
  }
  CHECK(all[1].reason == Reason::kExceedsAllocatable);
  CHECK(all[2].ok());
  CHECK(all[3].reason == Reason::kInsufficientResource);
  CHECK(all[4].reason == Reason::kInsufficientResource);
  CHECK(all[5].reason == Reason::kExceedsAllocatable);
  CHECK(v[1].message == "berth: node too small for the pod's cpu (pod requests 3 cpu)");
  CHECK(v[3].message == "berth: insufficient cpu (pod requests 3 cpu)");

  SECTION("an admission refusal: words on the first known node") {
    const NodeVerdict refusal = Fail(Fit::kUnresolvable, Reason::kQueueWaiting, "waits its turn");
    Pipeline q({.prefilter = {std::make_shared<FakeAdmission>("queue", refusal)},
                .filter = {std::make_shared<ResourceFitModule>()}});
    const std::vector<NodeVerdict> r = q.Filter(bare, candidates);
    CHECK(r[0].reason == Reason::kUnknownNode);
    CHECK(r[0].message == "unknown node");
    CHECK(r[1].reason == Reason::kQueueWaiting);
    CHECK(r[1].message == "waits its turn");
    for (size_t i : {2, 3, 4, 5}) {
      INFO(candidates[i]);
      CHECK(r[i].reason == Reason::kQueueWaiting);
      CHECK(r[i].fit == Fit::kUnresolvable);
      CHECK(r[i].message.empty());
    }
  }
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: admission that lets the pod through", "[pipeline]") {
  std::vector<std::shared_ptr<PreFilterPlugin>> admission;
  admission.push_back(std::make_shared<FakeAdmission>("yes", NodeVerdict::Ok()));
  Pipeline p({.prefilter = std::move(admission)});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  CHECK(p.PreFilter(ctx).ok());
  const std::vector<std::string_view> candidates = {"n1", "n2"};
  for (const NodeVerdict& v : p.Filter(ctx, candidates)) CHECK(v.ok());

  Pipeline empty(Pipeline::Points{});
  CHECK(empty.PreFilter(ctx).ok());
}

// ---- score --------------------------------------------------------------------------------------

TEST_CASE_METHOD(PipelineTest, "Pipeline: the score is the rounded weighted mean", "[pipeline]") {
  std::vector<Pipeline::WeightedScore> scores;
  scores.push_back({std::make_shared<FakeScore>(
                        "a", std::map<std::string, int64_t>{{"n1", 10}, {"n2", 3}, {"n3", 15}}),
                    1});
  scores.push_back({std::make_shared<FakeScore>(
                        "b", std::map<std::string, int64_t>{{"n1", 2}, {"n2", 4}, {"n3", -7}}),
                    3});
  Pipeline p({.score = std::move(scores)});

  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  // n1: (10*1 + 2*3) / 4 = 4.
  CHECK(p.ScoreNode(ctx, *view->FindNode("n1")) == 4);
  // n2: (3*1 + 4*3) / 4 = 3.75 -> 4.
  CHECK(p.ScoreNode(ctx, *view->FindNode("n2")) == 4);
  // n3: out-of-range scores are clamped first: (10*1 + 0*3) / 4 = 2.5 -> 3.
  CHECK(p.ScoreNode(ctx, *view->FindNode("n3")) == 3);

  const std::vector<std::string_view> candidates = {"n3", "ghost", "n1", "n2"};
  CHECK(p.Score(ctx, candidates) == std::vector<int64_t>{3, 0, 4, 4});
}

// Score takes the nodes of the names its Filter let through from that Filter, not from new
// lookups: only for the very same names, pod and model state, never after the node set changed.
TEST_CASE_METHOD(PipelineTest, "Pipeline: a score after its filter scores the nodes the names name now",
                 "[pipeline]") {
  std::vector<Pipeline::WeightedScore> scores;
  scores.push_back({std::make_shared<FakeScore>(
                        "s", std::map<std::string, int64_t>{{"n1", 3}, {"n3", 7}, {"n4", 9}}),
                    1});
  Pipeline p({.filter = N2Full(), .score = std::move(scores)});
  const std::vector<std::string_view> candidates = {"n1", "n2", "n3"};
  const std::vector<std::string_view> passed = {"n1", "n3"};
  core::NodeSlot n1_slot = core::kNoNode;
  {
    auto view = model_.Read();
    const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
    const std::vector<NodeVerdict> verdicts = p.Filter(ctx, candidates);
    CHECK(verdicts[0].ok());
    CHECK_FALSE(verdicts[1].ok());
    CHECK(verdicts[2].ok());
    CHECK(p.Score(ctx, passed) == std::vector<int64_t>{3, 7});
    // Other names, or the same in another order: each named node, as always.
    CHECK(p.Score(ctx, std::vector<std::string_view>{"n3", "n1"}) == std::vector<int64_t>{7, 3});
    CHECK(p.Score(ctx, std::vector<std::string_view>{"n1", "ghost"}) == std::vector<int64_t>{3, 0});
    n1_slot = view->FindNode("n1")->slot;
    // Filter once more, so that the names that passed are the last ones remembered.
    CHECK(p.Filter(ctx, candidates).size() == 3);
  }
  // n1 leaves and n4 takes its slot: the same names must not score n4 in n1's place.
  model_.Apply(core::NodeDelete{"n1"});
  core::Node n4;
  n4.name = "n4";
  n4.allocatable.Set(core::kCpu, 4000);
  n4.allocatable.Set(core::kPods, 110);
  model_.Apply(core::NodeUpsert{std::move(n4)});
  auto view = model_.Read();
  REQUIRE(view->FindNode("n4") != nullptr);
  REQUIRE(view->FindNode("n4")->slot == n1_slot);
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  CHECK(p.Score(ctx, passed) == std::vector<int64_t>{0, 7});
}

// filterAnswer "best" scores in the filter's pass: exactly what Score gives the nodes that pass.
TEST_CASE_METHOD(PipelineTest, "Pipeline: a filter asked for scores gives the passing nodes Score's scores",
                 "[pipeline]") {
  const std::vector<std::shared_ptr<FilterPlugin>> filters = N2Full();
  auto make_scores = [] {
    std::vector<Pipeline::WeightedScore> scores;
    scores.push_back({std::make_shared<FakeScore>(
                          "a", std::map<std::string, int64_t>{{"n1", 10}, {"n2", 9}, {"n3", 15}}),
                      1});
    scores.push_back({std::make_shared<FakeScore>(
                          "b", std::map<std::string, int64_t>{{"n1", 2}, {"n2", 9}, {"n3", 6}}),
                      3});
    return scores;
  };
  Pipeline p({.filter = filters, .score = make_scores()});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  const std::vector<std::string_view> candidates = {"n3", "ghost", "n1", "n2"};
  std::vector<int64_t> scores = {42};
  const std::vector<NodeVerdict> verdicts = p.Filter(ctx, candidates, &scores);
  const std::vector<NodeVerdict> plain = p.Filter(ctx, candidates);
  REQUIRE(plain.size() == verdicts.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CHECK(verdicts[i].fit == plain[i].fit);
    CHECK(verdicts[i].message == plain[i].message);
  }
  // n3: (10 + 6*3) / 4 = 7; n1: (10 + 2*3) / 4 = 4; the unknown node and n2 (rejected): 0.
  CHECK(scores == std::vector<int64_t>{7, 0, 4, 0});
  CHECK(p.Score(ctx, std::vector<std::string_view>{"n3", "n1"}) == std::vector<int64_t>{7, 4});

  // Refused before any node (admission): no node passes, none is scored.
  Pipeline refused({.prefilter = {std::make_shared<FakeAdmission>(
                        "q", Fail(Fit::kUnresolvable, Reason::kQueueWaiting, "waits its turn"))},
                    .filter = filters,
                    .score = make_scores()});
  CHECK_FALSE(refused.Filter(ctx, candidates, &scores)[0].ok());
  CHECK(scores == std::vector<int64_t>{0, 0, 0, 0});
  // No score module: every node 0, as Score.
  Pipeline unscored({.filter = filters});
  unscored.Filter(ctx, candidates, &scores);
  CHECK(scores == std::vector<int64_t>{0, 0, 0, 0});
}

// A "best" filter answer names only the best-scoring nodes that pass, so the prioritize after
// it names those: with scores, only they are remembered, in candidate order.
TEST_CASE_METHOD(PipelineTest, "PassedCandidates: with scores, the best-scoring passing nodes are remembered",
                 "[pipeline]") {
  auto view = model_.Read();
  const std::vector<std::string_view> names = {"n1", "n2", "n3"};
  const std::vector<const core::NodeState*> nodes = {view->FindNode("n1"), view->FindNode("n2"),
                                                     view->FindNode("n3")};
  REQUIRE(std::find(nodes.begin(), nodes.end(), nullptr) == nodes.end());
  const std::vector<NodeVerdict> all_pass = {NodeVerdict::Ok(), NodeVerdict::Ok(), NodeVerdict::Ok()};
  const std::vector<int64_t> scores = {7, 4, 7};
  core::Pod uid1 = pod_;
  uid1.uid = "uid-1";
  PassedCandidates passed;
  const core::NodeState* out[3] = {};
  passed.Remember(*view, uid1, names, nodes, all_pass, &scores);
  CHECK(passed.Recall(*view, "uid-1", std::vector<std::string_view>{"n1", "n3"}, out));
  CHECK(out[0] == nodes[0]);
  CHECK(out[1] == nodes[2]);
  CHECK_FALSE(passed.Recall(*view, "uid-1", names, out));
  // A node that does not pass counts for nothing, whatever its score.
  const std::vector<NodeVerdict> n1_fails = {Fail(Fit::kUnschedulable, Reason::kInsufficientResource, "full"),
                                             NodeVerdict::Ok(), NodeVerdict::Ok()};
  const std::vector<int64_t> n1_best = {9, 4, 7};
  passed.Remember(*view, uid1, names, nodes, n1_fails, &n1_best);
  CHECK(passed.Recall(*view, "uid-1", std::vector<std::string_view>{"n3"}, out));
  CHECK(out[0] == nodes[2]);
  // Without scores: every node that passes.
  passed.Remember(*view, uid1, names, nodes, all_pass);
  CHECK(passed.Recall(*view, "uid-1", names, out));
  CHECK_FALSE(passed.Recall(*view, "uid-1", std::vector<std::string_view>{"n1", "n3"}, out));
}

// Scores a node by the CPU left on it (kMaxScore when none is used), and counts its calls.
class CpuLeftScore final : public ScorePlugin {
 public:
  explicit CpuLeftScore(std::shared_ptr<std::atomic<int>> calls) : calls_(std::move(calls)) {}
  std::string_view Name() const override { return "cpu-left"; }
  int64_t Score(const CycleContext&, const core::NodeState& node) const override {
    ++*calls_;
    return kMaxScore - node.InUseOf(core::kCpu) / 1000;
  }

 private:
  std::shared_ptr<std::atomic<int>> calls_;
};

// The prioritize after a "best" filter names the nodes that tied for the best score. While the
// model and the pod are as they were, it takes that score without scoring again; after any
// change, or for another pod or model, it scores as before.
TEST_CASE_METHOD(PipelineTest, "Pipeline: the score after a best filter is the filter's until the model changes",
                 "[pipeline]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::vector<Pipeline::WeightedScore> score;
  score.push_back({std::make_shared<CpuLeftScore>(calls), 1});
  Pipeline p({.score = std::move(score)});
  const std::vector<std::string_view> all = {"n1", "n2", "n3"};
  std::vector<int64_t> scores;
  {
    auto view = model_.Read();
    const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
    p.Filter(ctx, all, &scores);
    CHECK(scores == std::vector<int64_t>{kMaxScore, kMaxScore, kMaxScore});
    const int scored = calls->load();
    CHECK(p.Score(ctx, all) == std::vector<int64_t>{kMaxScore, kMaxScore, kMaxScore});
    CHECK(calls->load() == scored);  // taken from the filter
    // Other names than the filter's best: scored.
    CHECK(p.Score(ctx, std::vector<std::string_view>{"n1", "n2"}) == std::vector<int64_t>{kMaxScore, kMaxScore});
    CHECK(calls->load() == scored + 2);
    // Another pod (one field differs): scored.
    core::Pod other = pod_;
    other.priority = 5;
    const CycleContext other_ctx{.state = *view, .pod = other, .now = clock_.Now()};
    CHECK(p.Score(other_ctx, all) == std::vector<int64_t>{kMaxScore, kMaxScore, kMaxScore});
    CHECK(calls->load() == scored + 5);
  }
  // A pod lands on n2: the model's generation moves, and n2's score with it.
  core::Pod placed;
  placed.uid = "placed-uid";
  placed.ns = "default";
  placed.name = "placed";
  placed.node_name = "n2";
  placed.phase = core::PodPhase::kRunning;
  placed.request.Set(core::kCpu, 2000);
  placed.request.Set(core::kPods, 1);
  model_.Apply(core::PodUpsert{placed});
  {
    auto view = model_.Read();
    const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
    const int before = calls->load();
    CHECK(p.Score(ctx, all) == std::vector<int64_t>{kMaxScore, kMaxScore - 2, kMaxScore});
    CHECK(calls->load() == before + 3);
    // A fork starts at the same generation, but it is another model: scored there.
    const std::vector<std::string_view> best = {"n1", "n3"};
    p.Filter(ctx, all, &scores);
    CHECK(scores == std::vector<int64_t>{kMaxScore, kMaxScore - 2, kMaxScore});
    const int filtered = calls->load();
    CHECK(p.Score(ctx, best) == std::vector<int64_t>{kMaxScore, kMaxScore});
    CHECK(calls->load() == filtered);
    core::FakeClock fork_clock;
    std::unique_ptr<core::ClusterModel> fork = model_.Fork(&fork_clock);
    auto fork_view = fork->Read();
    REQUIRE(fork_view->generation() == view->generation());
    const CycleContext fork_ctx{.state = *fork_view, .pod = pod_, .now = clock_.Now()};
    CHECK(p.Score(fork_ctx, best) == std::vector<int64_t>{kMaxScore, kMaxScore});
    CHECK(calls->load() == filtered + 2);
  }
}

// A model made where another was destroyed has its address, and can have its generation: the
// filter's scores are not taken for it.
TEST_CASE("Pipeline: the filter's scores are not taken for a model made in a destroyed one's place",
          "[pipeline]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::vector<Pipeline::WeightedScore> score;
  score.push_back({std::make_shared<CpuLeftScore>(calls), 1});
  Pipeline p({.score = std::move(score)});
  core::FakeClock clock;
  core::Pod pod;
  pod.uid = "p-uid";
  pod.ns = "default";
  pod.name = "p";
  pod.request.Set(core::kPods, 1);
  // Three nodes and one pod of 2 CPUs, on `busy`: four changes.
  auto fill = [](core::ClusterModel& model, const char* busy) {
    AddThreeNodes(model);
    core::Pod placed;
    placed.uid = "placed-uid";
    placed.ns = "default";
    placed.name = "placed";
    placed.node_name = busy;
    placed.phase = core::PodPhase::kRunning;
    placed.request.Set(core::kCpu, 2000);
    placed.request.Set(core::kPods, 1);
    model.Apply(core::PodUpsert{placed});
  };
  const std::vector<std::string_view> all = {"n1", "n2", "n3"};
  const std::vector<std::string_view> n2_n3 = {"n2", "n3"};
  std::optional<core::ClusterModel> model;
  model.emplace(&clock);
  fill(*model, "n1");
  const void* address = &*model;
  uint64_t generation = 0;
  {
    auto view = model->Read();
    generation = view->generation();
    const CycleContext ctx{.state = *view, .pod = pod, .now = clock.Now()};
    std::vector<int64_t> scores;
    p.Filter(ctx, all, &scores);
    CHECK(scores == std::vector<int64_t>{kMaxScore - 2, kMaxScore, kMaxScore});
  }
  model.reset();
  model.emplace(&clock);
  fill(*model, "n2");
  auto view = model->Read();
  REQUIRE(static_cast<const void*>(&*model) == address);
  REQUIRE(view->generation() == generation);
  const CycleContext ctx{.state = *view, .pod = pod, .now = clock.Now()};
  CHECK(p.Score(ctx, n2_n3) == std::vector<int64_t>{kMaxScore - 2, kMaxScore});
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: rounding of the weighted mean", "[pipeline]") {
  std::vector<Pipeline::WeightedScore> scores;
  scores.push_back({std::make_shared<FakeScore>(
                        "a", std::map<std::string, int64_t>{{"n1", 3}, {"n2", 0}, {"n3", 10}}),
                    1});
  scores.push_back({std::make_shared<FakeScore>(
                        "b", std::map<std::string, int64_t>{{"n1", 4}, {"n2", 1}, {"n3", 10}}),
                    2});
  Pipeline p({.score = std::move(scores)});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  CHECK(p.ScoreNode(ctx, *view->FindNode("n1")) == 4);   // 11/3 = 3.67 -> 4
  CHECK(p.ScoreNode(ctx, *view->FindNode("n2")) == 1);   // 2/3 = 0.67 -> 1
  CHECK(p.ScoreNode(ctx, *view->FindNode("n3")) == 10);  // 30/3 = 10
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: one score module passes its score through",
                 "[pipeline]") {
  std::vector<Pipeline::WeightedScore> scores;
  scores.push_back(
      {std::make_shared<FakeScore>("a", std::map<std::string, int64_t>{{"n1", 7}}), 5});
  Pipeline p({.score = std::move(scores)});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  CHECK(p.ScoreNode(ctx, *view->FindNode("n1")) == 7);
  CHECK(p.ScoreNode(ctx, *view->FindNode("n2")) == 0);
}

// The one module that applies to a pod gives its score, clamped, whatever its weight and
// whatever the modules that stand aside would have said: by ScoreNode, Score and Filter alike.
TEST_CASE_METHOD(PipelineTest, "Pipeline: the one module that applies gives the score, clamped",
                 "[pipeline]") {
  std::vector<Pipeline::WeightedScore> scores;
  scores.push_back({std::make_shared<FakeScore>(
                        "aside", std::map<std::string, int64_t>{{"n1", 100}, {"n2", 100}, {"n3", 100}},
                        /*applies=*/false),
                    7});
  scores.push_back({std::make_shared<FakeScore>(
                        "a", std::map<std::string, int64_t>{{"n1", 7}, {"n2", -4}, {"n3", 250}}),
                    3});
  Pipeline p({.score = std::move(scores)});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  CHECK(p.ScoreNode(ctx, *view->FindNode("n1")) == 7);
  CHECK(p.ScoreNode(ctx, *view->FindNode("n2")) == 0);
  CHECK(p.ScoreNode(ctx, *view->FindNode("n3")) == kMaxScore);
  const std::vector<std::string_view> candidates = {"n3", "ghost", "n1", "n2"};
  const std::vector<int64_t> want = {kMaxScore, 0, 7, 0};
  CHECK(p.Score(ctx, candidates) == want);
  std::vector<int64_t> filtered;
  p.Filter(ctx, candidates, &filtered);
  CHECK(filtered == want);
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: no score modules scores every node 0", "[pipeline]") {
  Pipeline p(Pipeline::Points{});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  const std::vector<std::string_view> candidates = {"n1", "ghost"};
  CHECK(p.Score(ctx, candidates) == std::vector<int64_t>{0, 0});
}

// ---- preempt ------------------------------------------------------------------------------------

std::vector<Victim> Victims(std::initializer_list<std::pair<const char*, int32_t>> vs) {
  std::vector<Victim> out;
  for (const auto& [uid, prio] : vs) out.push_back(Victim{.uid = uid, .priority = prio});
  return out;
}

std::vector<std::string> Uids(const NodeVictims& nv) {
  std::vector<std::string> out;
  for (const Victim& v : nv.victims) out.push_back(v.uid);
  return out;
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: Preempt filters nodes and orders victims",
                 "[pipeline][preempt]") {
  std::vector<std::shared_ptr<PreemptionReviewPlugin>> preempt;
  preempt.push_back(std::make_shared<FakePreempt>(
      "fake", FakePreempt::Options{.refuse = "n2", .drop_prefix = "gone-"}));
  Pipeline p({.review = std::move(preempt)});

  std::vector<NodeVictims> proposal;
  proposal.push_back(NodeVictims{
      .node = "n1",
      .victims = Victims({{"low", 1}, {"high", 5}, {"mid-a", 3}, {"gone-x", 9}, {"mid-b", 3}}),
      .pdb_violations = 2});
  proposal.push_back(NodeVictims{.node = "n2", .victims = Victims({{"a", 1}})});
  proposal.push_back(NodeVictims{.node = "ghost", .victims = Victims({{"b", 1}})});
  proposal.push_back(NodeVictims{.node = "n3", .victims = Victims({{"gone-y", 1}})});

  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  std::vector<std::pair<std::string, NodeVerdict>> dropped;
  const std::vector<NodeVictims> kept = p.ReviewPreemption(ctx, std::move(proposal), &dropped);

  REQUIRE(kept.size() == 1);
  CHECK(kept[0].node == "n1");
  CHECK(kept[0].pdb_violations == 2);
  // Highest priority first; equal priorities keep their order.
  CHECK(Uids(kept[0]) == std::vector<std::string>{"high", "mid-a", "mid-b", "low"});

  REQUIRE(dropped.size() == 3);
  CHECK(dropped[0].first == "n2");
  CHECK(dropped[0].second.reason == Reason::kPreemptionNotHelpful);
  CHECK(dropped[0].second.message == "fake refuses");
  CHECK(dropped[1].first == "ghost");
  CHECK(dropped[1].second.reason == Reason::kUnknownNode);
  CHECK(dropped[1].second.message == "unknown node");
  CHECK(dropped[2].first == "n3");
  CHECK(dropped[2].second.fit == Fit::kUnresolvable);
  CHECK(dropped[2].second.reason == Reason::kPreemptionNotHelpful);
  CHECK(dropped[2].second.message == "no victim on this node");
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: Preempt without modules", "[pipeline][preempt]") {
  Pipeline p(Pipeline::Points{});
  std::vector<NodeVictims> proposal;
  proposal.push_back(NodeVictims{.node = "n1", .victims = Victims({{"a", 1}, {"b", 2}})});
  proposal.push_back(NodeVictims{.node = "n2"});  // kube-scheduler sent no victims
  proposal.push_back(NodeVictims{.node = "ghost", .victims = Victims({{"c", 1}})});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  // `dropped` is optional.
  const std::vector<NodeVictims> kept = p.ReviewPreemption(ctx, std::move(proposal));
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].node == "n1");
  CHECK(Uids(kept[0]) == std::vector<std::string>{"b", "a"});
  CHECK(p.ReviewPreemption(ctx, {}).empty());
}

TEST_CASE_METHOD(PipelineTest, "Pipeline: preempt modules run in turn on the changed proposal",
                 "[pipeline][preempt]") {
  std::vector<std::string> seen_first;
  std::vector<std::string> seen_second;
  std::vector<std::shared_ptr<PreemptionReviewPlugin>> preempt;
  preempt.push_back(std::make_shared<FakePreempt>(
      "adder", FakePreempt::Options{.drop_prefix = "x-", .add = "added", .add_priority = 7},
      &seen_first));
  preempt.push_back(std::make_shared<FakePreempt>(
      "refuser", FakePreempt::Options{.refuse = "n2"}, &seen_second));
  Pipeline p({.review = std::move(preempt)});

  std::vector<NodeVictims> proposal;
  proposal.push_back(NodeVictims{.node = "n1", .victims = Victims({{"x-1", 1}, {"keep", 2}})});
  proposal.push_back(NodeVictims{.node = "n2", .victims = Victims({{"k2", 1}})});
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  std::vector<std::pair<std::string, NodeVerdict>> dropped;
  const std::vector<NodeVictims> kept = p.ReviewPreemption(ctx, std::move(proposal), &dropped);

  CHECK(seen_first == std::vector<std::string>{"n1:x-1", "n1:keep", "n2:k2"});
  CHECK(seen_second == std::vector<std::string>{"n1:keep", "n1:added", "n2:k2", "n2:added"});
  REQUIRE(kept.size() == 1);
  CHECK(Uids(kept[0]) == std::vector<std::string>{"added", "keep"});
  REQUIRE(dropped.size() == 1);
  CHECK(dropped[0].first == "n2");
  CHECK(dropped[0].second.message == "refuser refuses");
}

// ---- describe -----------------------------------------------------------------------------------

TEST_CASE("Pipeline::Describe lists modules per point", "[pipeline]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::vector<std::shared_ptr<PreFilterPlugin>> admission;
  admission.push_back(std::make_shared<FakeAdmission>("gate", NodeVerdict::Ok()));
  std::vector<std::shared_ptr<FilterPlugin>> filters;
  for (const char* name : {"f1", "f2"}) {
    filters.push_back(
        std::make_shared<FakeFilter>(name, std::map<std::string, NodeVerdict>{}, calls));
  }
  std::vector<Pipeline::WeightedScore> scores;
  scores.push_back({std::make_shared<FakeScore>("s", std::map<std::string, int64_t>{}), 3});
  std::vector<std::shared_ptr<PreemptionReviewPlugin>> preempt;
  preempt.push_back(std::make_shared<FakePreempt>("pr", FakePreempt::Options{}));
  std::vector<std::shared_ptr<QueueSortPlugin>> order;
  order.push_back(std::make_shared<FakeOrder>());
  Pipeline p({.prefilter = std::move(admission),
              .filter = std::move(filters),
              .review = std::move(preempt),
              .score = std::move(scores),
              .queue_sort = std::move(order)});
  CHECK(p.Describe() == std::vector<std::string>{"prefilter:gate", "filter:f1", "filter:f2",
                                                 "review:pr", "score:s*3", "queuesort:fake-order"});
  REQUIRE(p.queue_sort().size() == 1);
  CHECK(p.queue_sort()[0]->Name() == "fake-order");
}

}  // namespace
}  // namespace berth::policy
