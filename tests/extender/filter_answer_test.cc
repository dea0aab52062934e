// filterAnswer "best" (docs/decisions.md, "The filter answer names berth's best nodes"): the
// filter answer names only the fitting nodes prioritize would score highest, leaves the other
// fitting nodes out of every list, keeps each rejected node's failure, and counts what it left
// out in /metrics. Checked through the verbs (and over a socket for /metrics), against
// prioritize's own scores, and in the simulator, where kube-scheduler then calls prioritize less
// and still places every job.

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/strings.h"
#include "extender/config.h"
#include "extender/http_server.h"
#include "extender/service.h"
#include "extender/sim/engine.h"
#include "extender/sim/generate.h"
#include "httplib.h"
#include "policy/registry.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/sim_runs.h"
#include "tests/testing/text.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

using extender::FilterAnswer;

/// A standalone Service whose filter answers in the given form (Harness's, with that option).
class Berth {
 public:
  explicit Berth(FilterAnswer answer)
      : h_({}, extender::Mode::kStandalone,
           [answer](extender::ServiceOptions& o) { o.filter_answer = answer; }) {}
  extender::Service& service() { return h_.service(); }
  Json Call(const extender::Reply& r) {
    INFO(r.body);
    REQUIRE(r.status == 200);
    return ParseReply(r);
  }

 private:
  Harness h_;
};

/// Five nodes for a 4-CPU pod: two empty, one half full (bin packing's favourite), one too full
/// (FailedNodes) and one too small (FailedAndUnresolvableNodes).
Json Cluster(bool second_half_full = false) {
  Json events = Json::array(
      {Event("ADDED", MakeNode("empty-1").Cpu("32").Memory("128Gi").Obj()),
       Event("ADDED", MakeNode("half").Cpu("32").Memory("128Gi").Obj()),
       Event("ADDED", MakeNode("empty-2").Cpu("32").Memory("128Gi").Obj()),
       Event("ADDED", MakeNode("full").Cpu("32").Memory("128Gi").Obj()),
       Event("ADDED", MakeNode("tiny").Cpu("2").Memory("8Gi").Obj()),
       Event("ADDED", MakePod("h").Cpu("16").Memory("64Gi").Node("half").Phase("Running").Obj()),
       Event("ADDED", MakePod("f").Cpu("30").Memory("64Gi").Node("full").Phase("Running").Obj())});
  if (second_half_full) {
    events.push_back(
        Event("ADDED", MakePod("h2").Cpu("16").Memory("64Gi").Node("empty-2").Phase("Running").Obj()));
  }
  return events;
}

const std::vector<std::string> kCandidates = {"empty-1", "half", "empty-2", "full", "tiny"};

std::vector<std::string> Names(const Json& answer) {
  std::vector<std::string> out;
  for (const Json& n : answer.at("NodeNames")) out.push_back(n.get<std::string>());
  return out;
}

const Json kFull = {{"full", "berth: insufficient free resources"}};
const Json kTiny = {{"tiny", "berth: node too small for the pod"}};

TEST_CASE("filterAnswer best names only the fitting nodes prioritize scores highest",
          "[protocol][filter-answer]") {
  const bool tie = GENERATE(false, true);
  INFO((tie ? "two nodes half full" : "one node half full"));
  Berth all(FilterAnswer::kAll);
  Berth best(FilterAnswer::kBest);
  all.Call(all.service().Events(Cluster(tie).dump()));
  best.Call(best.service().Events(Cluster(tie).dump()));
  const MakePod pod = MakePod("p").Cpu("4").Memory("8Gi");
  const std::string args = ArgsNames(pod.Obj(), kCandidates).dump();

  const Json every = all.Call(all.service().Filter(args));
  const Json chosen = best.Call(best.service().Filter(args));
  const std::vector<std::string> fitting = Names(every);
  CHECK(fitting == std::vector<std::string>{"empty-1", "half", "empty-2"});

  // The oracle: prioritize over the fitting nodes, on the service that answered "all".
  std::map<std::string, int64_t> score = ScoresOf(all.Call(all.service().Prioritize(
      ArgsNames(pod.Obj(), fitting).dump())));
  int64_t top = -1;
  for (const auto& [node, s] : score) top = std::max(top, s);
  std::vector<std::string> expected;
  for (const std::string& n : fitting) {
    if (score[n] == top) expected.push_back(n);
  }
  CHECK(expected.size() == (tie ? 2u : 1u));
  CHECK(Names(chosen) == expected);
  CHECK(Names(chosen) == (tie ? std::vector<std::string>{"half", "empty-2"} : std::vector<std::string>{"half"}));
  // Rejected nodes keep their failures; the fitting nodes left out are in neither map.
  CHECK(chosen.at("FailedNodes") == every.at("FailedNodes"));
  CHECK(chosen.at("FailedAndUnresolvableNodes") == every.at("FailedAndUnresolvableNodes"));
  CHECK(chosen.at("FailedNodes") == kFull);
  CHECK(chosen.at("FailedAndUnresolvableNodes") == kTiny);
  CHECK(chosen.at("Error") == "");
}

TEST_CASE("filterAnswer best names every node when fewer than two fit or all score the same",
          "[protocol][filter-answer]") {
  Berth best(FilterAnswer::kBest);
  best.Call(best.service().Events(Cluster().dump()));
  const MakePod pod = MakePod("p").Cpu("4").Memory("8Gi");
  // One fitting node among failures: named, failures kept.
  const Json one = best.Call(best.service().Filter(ArgsNames(pod.Obj(), {"empty-1", "full", "tiny"}).dump()));
  CHECK(Names(one) == std::vector<std::string>{"empty-1"});
  CHECK(one.at("FailedNodes") == kFull);
  // Two empty nodes score the same: both named, in the order asked.
  const Json both = best.Call(best.service().Filter(ArgsNames(pod.Obj(), {"empty-2", "empty-1"}).dump()));
  CHECK(Names(both) == std::vector<std::string>{"empty-2", "empty-1"});
  // None fits: no name, every failure.
  const MakePod huge = MakePod("huge").Cpu("64").Memory("8Gi");
  const Json none = best.Call(best.service().Filter(ArgsNames(huge.Obj(), kCandidates).dump()));
  CHECK(Names(none).empty());
  CHECK(none.at("FailedAndUnresolvableNodes").size() + none.at("FailedNodes").size() == kCandidates.size());
}

// The prioritize after a "best" filter names the tied nodes. With nothing changed, berth gives
// each the filter's score without scoring again (PassedCandidates::RecallScored); after a
// change it scores them again, so its answer is always the one a fresh prioritize gives.
TEST_CASE("filterAnswer best: the prioritize that follows answers as a fresh one would, before and after a change",
          "[protocol][filter-answer]") {
  Berth all(FilterAnswer::kAll);
  Berth best(FilterAnswer::kBest);
  all.Call(all.service().Events(Cluster(/*second_half_full=*/true).dump()));
  best.Call(best.service().Events(Cluster(/*second_half_full=*/true).dump()));
  const MakePod pod = MakePod("p").Cpu("4").Memory("8Gi");
  const std::vector<std::string> tied = {"half", "empty-2"};
  CHECK(Names(best.Call(best.service().Filter(ArgsNames(pod.Obj(), kCandidates).dump()))) == tied);
  const std::string args = ArgsNames(pod.Obj(), tied).dump();
  const std::map<std::string, int64_t> before = ScoresOf(all.Call(all.service().Prioritize(args)));
  CHECK(before.at("half") == before.at("empty-2"));
  CHECK(ScoresOf(best.Call(best.service().Prioritize(args))) == before);
  // Eight more CPUs used on "half": its score moves, and both services say so.
  const Json more = Json::array(
      {Event("ADDED", MakePod("h3").Cpu("8").Memory("32Gi").Node("half").Phase("Running").Obj())});
  all.Call(all.service().Events(more.dump()));
  best.Call(best.service().Events(more.dump()));
  const std::map<std::string, int64_t> after = ScoresOf(all.Call(all.service().Prioritize(args)));
  CHECK(after.at("half") > after.at("empty-2"));
  CHECK(ScoresOf(best.Call(best.service().Prioritize(args))) == after);
}

TEST_CASE("filterAnswer is read from the configuration, and a wrong value is refused by name",
          "[config][filter-answer]") {
  const policy::Registry registry = policy::BuildDefaultRegistry();
  absl::StatusOr<extender::Config> unset = extender::ParseConfig("{}", "berth.json", registry);
  REQUIRE(unset.ok());
  CHECK(unset->filter_answer == FilterAnswer::kAll);
  CHECK(extender::ServiceOptionsFor(*unset, extender::Mode::kStandalone).filter_answer == FilterAnswer::kAll);
  absl::StatusOr<extender::Config> best = extender::ParseConfig(R"({"filterAnswer": "best"})", "berth.json", registry);
  REQUIRE(best.ok());
  CHECK(best->filter_answer == FilterAnswer::kBest);
  CHECK(extender::ServiceOptionsFor(*best, extender::Mode::kKubernetes).filter_answer == FilterAnswer::kBest);
  absl::StatusOr<extender::Config> all = extender::ParseConfig(R"({"filterAnswer": "all"})", "berth.json", registry);
  REQUIRE(all.ok());
  CHECK(all->filter_answer == FilterAnswer::kAll);
  for (const char* bad : {R"({"filterAnswer": "top"})", R"({"filterAnswer": 1})", R"({"filterAnswer": ""})"}) {
    INFO(bad);
    absl::StatusOr<extender::Config> c = extender::ParseConfig(bad, "berth.json", registry);
    REQUIRE_FALSE(c.ok());
    const std::string message(c.status().message());
    INFO(message);
    CHECK(Contains(message, "berth.json"));
    CHECK(Contains(message, "filterAnswer"));
  }
}

TEST_CASE("filterAnswer best: /metrics counts the nodes left out and the one-node answers",
          "[metrics][filter-answer]") {
  Berth best(FilterAnswer::kBest);
  best.Call(best.service().Events(Cluster().dump()));
  extender::HttpServer server(&best.service(), {});
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  REQUIRE(port.ok());
  httplib::Client c("127.0.0.1", *port);
  auto counter = [&](const std::string& name) {
    auto r = c.Get("/metrics");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const size_t at = r->body.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(r->body.substr(at + name.size() + 2));
  };
  CHECK(counter("berth_filter_nodes_left_out_total") == 0);
  CHECK(counter("berth_filter_one_node_answers_total") == 0);
  const std::string args = ArgsNames(MakePod("p").Cpu("4").Memory("8Gi").Obj(), kCandidates).dump();
  auto r = c.Post("/filter", args, "application/json");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  CHECK(Names(Json::parse(r->body)) == std::vector<std::string>{"half"});
  CHECK(counter("berth_filter_nodes_left_out_total") == 2);  // empty-1, empty-2
  CHECK(counter("berth_filter_one_node_answers_total") == 1);
  // Two equal nodes: nothing left out, no one-node answer.
  r = c.Post("/filter", ArgsNames(MakePod("q").Cpu("4").Memory("8Gi").Obj(), {"empty-1", "empty-2"}).dump(),
             "application/json");
  REQUIRE(r);
  CHECK(Names(Json::parse(r->body)).size() == 2);
  CHECK(counter("berth_filter_nodes_left_out_total") == 2);
  CHECK(counter("berth_filter_one_node_answers_total") == 1);
  server.Stop();
}

TEST_CASE("the simulator's kube-scheduler with filterAnswer best calls prioritize less and places every job",
          "[sim][filter-answer]") {
  absl::StatusOr<extender::sim::Generated> g =
      extender::sim::Generate({.profile = "seed-stories", .jobs = 120, .seed = 3});
  REQUIRE(g.ok());
  auto run = [&](FilterAnswer answer) {
    return SimulateGenerated(*g, [&](extender::sim::SimOptions& o) { o.config.filter_answer = answer; });
  };
  const extender::sim::RunMetrics all = run(FilterAnswer::kAll);
  const extender::sim::RunMetrics best = run(FilterAnswer::kBest);
  REQUIRE(all.jobs.size() == best.jobs.size());
  size_t started_all = 0, started_best = 0;
  for (size_t i = 0; i < all.jobs.size(); ++i) {
    started_all += all.jobs[i].start >= 0 ? 1 : 0;
    started_best += best.jobs[i].start >= 0 ? 1 : 0;
  }
  CHECK(started_all == all.jobs.size());
  CHECK(started_best == best.jobs.size());
  for (const extender::sim::InvariantResult& inv : best.invariants) {
    INFO(inv.name);
    CHECK(inv.violations == 0);
  }
  INFO("prioritize calls: all " << all.verb_calls.at("prioritize") << ", best "
                                << (best.verb_calls.count("prioritize") ? best.verb_calls.at("prioritize") : 0));
  CHECK(all.verb_calls.at("prioritize") > 0);
  const int64_t best_prioritize = best.verb_calls.count("prioritize") ? best.verb_calls.at("prioritize") : 0;
  CHECK(best_prioritize * 2 < all.verb_calls.at("prioritize"));
  CHECK(best.verb_calls.at("filter") > 0);
}

}  // namespace
}  // namespace berth::testing
