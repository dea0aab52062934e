// berth's answers in the form it sends (extender::AnswerForm::kShort) against its earlier long
// form, read back as kube-scheduler reads them (extender/sim/answers.h, Go's encoding/json):
// the same nodes pass and fail, the same hosts get the same scores; and the simulator's
// kube-scheduler model places every pod the same way on both.

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "extender/json.h"
#include "extender/protocol.h"
#include "extender/sim/answers.h"
#include "extender/sim/engine.h"
#include "extender/sim/generate.h"
#include "policy/verdict.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/sim_runs.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

using extender::AnswerForm;
using extender::sim::HostScore;

/// (host, score) of each entry, as kube-scheduler decodes the prioritize answer; FAILs when it
/// would reject the answer.
std::vector<std::pair<std::string, int64_t>> Decoded(const std::string& body) {
  INFO("prioritize answer: " << body);
  absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
  REQUIRE(el.ok());
  absl::StatusOr<std::vector<HostScore>> list = extender::sim::ReadPriorityList(*el);
  REQUIRE(list.ok());
  std::vector<std::pair<std::string, int64_t>> out;
  for (const HostScore& hs : *list) out.emplace_back(hs.host, hs.score);
  return out;
}

/// kube-scheduler's extender part of each candidate's total (weight 5).
std::vector<int64_t> Sums(const std::string& body, const std::vector<std::string_view>& candidates) {
  absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
  REQUIRE(el.ok());
  absl::StatusOr<std::vector<HostScore>> list = extender::sim::ReadPriorityList(*el);
  REQUIRE(list.ok());
  return extender::sim::ExtenderScores(*list, candidates, 5);
}

std::set<std::string> Keys(const Json& obj) {
  std::set<std::string> out;
  for (const auto& [k, v] : obj.items()) out.insert(k);
  return out;
}

TEST_CASE("prioritize answers write no zero score, keep every host, and sum as the long form does",
          "[protocol][answers]") {
  const std::vector<std::string_view> hosts = {"gpu-1", "cpu-1", "gpu-2", "cpu-2", "gpu-3"};
  const std::vector<int64_t> scores = {0, 7, 0, 10, 0};
  const std::string now = extender::EncodePriorityList(hosts, scores);
  const std::string before = extender::EncodePriorityList(hosts, scores, AnswerForm::kLong);
  INFO(now);
  CHECK_FALSE(Contains(now, R"("Score":0)"));
  CHECK(now ==
        R"([{"Host":"gpu-1"},{"Host":"cpu-1","Score":7},{"Host":"gpu-2"},{"Host":"cpu-2","Score":10},)"
        R"({"Host":"gpu-3"}])");
  CHECK(before.size() > now.size());
  // Every host is still named, in order: kube-scheduler 1.35 and later draw a random tie-breaker
  // only for the hosts an extender named.
  const auto decoded = Decoded(now);
  CHECK(decoded == Decoded(before));
  REQUIRE(decoded.size() == hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) CHECK(decoded[i].first == hosts[i]);
  // The totals kube-scheduler adds, for the candidates it asked about (one the answer does not
  // name gets 0 either way).
  const std::vector<std::string_view> candidates = {"cpu-2", "gpu-1", "gpu-2", "cpu-1", "gpu-3", "spare"};
  CHECK(Sums(now, candidates) == Sums(before, candidates));
  CHECK(Sums(now, candidates) == std::vector<int64_t>{500, 0, 0, 350, 0, 0});
}

// Host names as kube-scheduler could send them (most plain, some that JSON must escape or that
// are not UTF-8), more of them, with longer messages, than the answers' first guess of their size.
std::vector<std::string> AwkwardHosts() {
  std::vector<std::string> hosts = {"we\"ird", "back\\slash", "tab\there", "ctl\x01", "",
                                    "\xc3\xbc" "n\xc3\xaf" "code", "bad-\xff-utf8", "new\nline"};
  for (int i = 0; i < 3000; ++i) {
    hosts.push_back(StrCat(i % 7 == 0 ? "esc\"aped-" : "gke-prod-pool-", i, "-x7k2"));
  }
  return hosts;
}

// The JSON text of `s` as AppendJsonString writes it: the answers' strings must read back so.
std::string Quoted(std::string_view s) {
  std::string out;
  extender::AppendJsonString(&out, s);
  return out;
}

TEST_CASE("answers write every host name and message as JSON strings, however many and long",
          "[protocol][answers]") {
  const std::vector<std::string> owned = AwkwardHosts();
  const std::vector<std::string_view> hosts(owned.begin(), owned.end());
  std::vector<int64_t> scores;
  for (size_t i = 0; i < hosts.size(); ++i) {
    scores.push_back(i == 1 ? INT64_MIN : i == 2 ? INT64_MAX : static_cast<int64_t>(i % 11) - 1);
  }
  std::string want = "[";
  for (size_t i = 0; i < hosts.size(); ++i) {
    want += StrCat(i == 0 ? "" : ",", R"({"Host":)", Quoted(hosts[i]));
    if (scores[i] != 0) want += StrCat(R"(,"Score":)", scores[i]);
    want += "}";
  }
  want += "]";
  const std::string prioritize = extender::EncodePriorityList(hosts, scores);
  CHECK(prioritize == want);
  CHECK_NOTHROW(Json::parse(prioritize));

  extender::ExtenderArgs args;
  args.node_names = hosts;
  std::vector<policy::NodeVerdict> verdicts(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i % 3 == 1) {
      verdicts[i] = {.fit = policy::Fit::kUnschedulable, .reason = policy::Reason::kInsufficientResource,
                     .message = StrCat("berth: \"insufficient\"\n", std::string(200, 'm'), i)};
    } else if (i % 3 == 2) {
      verdicts[i] = {.fit = policy::Fit::kUnresolvable, .reason = policy::Reason::kExceedsAllocatable,
                     .message = StrCat("too small \t", i)};
    }
  }
  for (AnswerForm form : {AnswerForm::kShort, AnswerForm::kLong}) {
    const std::string filter = extender::EncodeFilterResult(args, verdicts, form);
    std::string passed;
    std::string failed[2];
    for (size_t i = 0; i < hosts.size(); ++i) {
      const auto& v = verdicts[i];
      if (v.ok()) {
        passed += StrCat(passed.empty() ? "" : ",", Quoted(hosts[i]));
        continue;
      }
      std::string& list = failed[v.fit == policy::Fit::kUnschedulable ? 0 : 1];
      const std::string_view text = form == AnswerForm::kShort ? policy::ReasonSummary(v.reason)
                                                               : std::string_view(v.message);
      list += StrCat(list.empty() ? "" : ",", Quoted(hosts[i]), ":", Quoted(text));
    }
    CHECK(filter == StrCat(R"({"Nodes":null,"NodeNames":[)", passed, R"(],"FailedNodes":{)", failed[0],
                           R"(},"FailedAndUnresolvableNodes":{)", failed[1], R"(},"Error":""})"));
    CHECK_NOTHROW(Json::parse(filter));
  }
}

TEST_CASE("prioritize through the service: hosts berth scores 0 are named without a score",
          "[protocol][answers]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("gpu-1").Cpu("96").Memory("680Gi").Gpu(8).Obj()),
                       Event("ADDED", MakeNode("gpu-2").Cpu("96").Memory("680Gi").Gpu(8).Obj()),
                       Event("ADDED", MakeNode("cpu-1").Cpu("32").Memory("128Gi").Obj())}));
  // A small CPU-only pod: GPU nodes are the last place for it (score 0), the CPU node is not.
  const MakePod pod = MakePod("etl").Cpu("1").Memory("1Gi");
  const extender::Reply r = h.service().Prioritize(ArgsNames(pod.Obj(), {"gpu-1", "cpu-1", "gpu-2"}).dump());
  REQUIRE(r.status == 200);
  INFO(r.body);
  CHECK_FALSE(Contains(r.body, R"("Score":0)"));
  CHECK(Contains(r.body, R"({"Host":"gpu-1"})"));
  CHECK(Contains(r.body, R"({"Host":"gpu-2"})"));
  const auto scores = ScoresOf(ParseReply(r));
  CHECK(scores.size() == 3);
  CHECK(scores.at("gpu-1") == 0);
  CHECK(scores.at("gpu-2") == 0);
  CHECK(scores.at("cpu-1") > 0);
}

// Nodes that reject a 6-cpu, 30Gi pod for each resource set, and one that takes it.
Json RejectingCluster() {
  return Json::array(
      {Event("ADDED", MakeNode("cpu-short").Cpu("8").Memory("64Gi").Obj()),
       Event("ADDED", MakeNode("mem-short").Cpu("32").Memory("64Gi").Obj()),
       Event("ADDED", MakeNode("both-short").Cpu("32").Memory("64Gi").Obj()),
       Event("ADDED", MakeNode("tiny").Cpu("2").Memory("4Gi").Obj()),
       Event("ADDED", MakeNode("small").Cpu("4").Memory("64Gi").Obj()),
       Event("ADDED", MakeNode("roomy").Cpu("64").Memory("256Gi").Obj()),
       Event("ADDED", MakePod("a").Cpu("4").Node("cpu-short").Phase("Running").Obj()),
       Event("ADDED", MakePod("b").Memory("40Gi").Node("mem-short").Phase("Running").Obj()),
       Event("ADDED", MakePod("c").Cpu("28").Memory("40Gi").Node("both-short").Phase("Running").Obj())});
}
const MakePod kRejected = MakePod("p").Cpu("6").Memory("30Gi");
const std::vector<std::string> kRejecting = {"cpu-short", "mem-short", "both-short", "tiny", "small", "roomy"};

TEST_CASE("filter answers give each rejected node its reason's short summary, one text per reason",
          "[protocol][answers]") {
  Harness h;
  h.Apply(RejectingCluster());
  const MakePod& pod = kRejected;
  const std::vector<std::string>& nodes = kRejecting;
  const Verdicts v = FilterPod(h, pod, nodes);  // checks each text is its reason's summary
  CHECK(v.fit == std::vector<std::string>{"roomy"});
  // Short of cpu, of memory, of both: one reason, one text, so kube-scheduler's event counts 3.
  CHECK(v.failed == std::map<std::string, std::string>{{"cpu-short", "berth: insufficient free resources"},
                                                       {"mem-short", "berth: insufficient free resources"},
                                                       {"both-short", "berth: insufficient free resources"}});
  CHECK(v.unresolvable == std::map<std::string, std::string>{{"tiny", "berth: node too small for the pod"},
                                                             {"small", "berth: node too small for the pod"}});
  // The verdicts still say which resource, for /debug/explain and berth's Events.
  CHECK(Contains(v.Why("cpu-short"), "insufficient cpu"));
  CHECK(Contains(v.Why("mem-short"), "insufficient memory"));
  CHECK(Contains(v.Why("both-short"), "insufficient cpu, memory"));
  CHECK(Contains(v.Why("tiny"), "node too small for the pod's cpu, memory"));
  CHECK(Contains(v.Why("small"), "node too small for the pod's cpu"));

  // The same verdicts in the long form: the messages berth sent before, one per resource set.
  std::vector<policy::NodeVerdict> verdicts;
  const Json args = ArgsNames(pod.Obj(), nodes);
  h.Filter(args, &verdicts);
  const std::string body = args.dump();
  absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
  REQUIRE(el.ok());
  absl::StatusOr<extender::ExtenderArgs> decoded = extender::DecodeExtenderArgs(*el, h.model().resources());
  REQUIRE(decoded.ok());
  const Json now = Json::parse(extender::EncodeFilterResult(*decoded, verdicts));
  const Json before = Json::parse(extender::EncodeFilterResult(*decoded, verdicts, AnswerForm::kLong));
  std::set<std::string> texts_now, texts_before;
  for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    CHECK(Keys(now[map]) == Keys(before[map]));
    for (const auto& [node, text] : now[map].items()) texts_now.insert(text.get<std::string>());
    for (const auto& [node, text] : before[map].items()) texts_before.insert(text.get<std::string>());
  }
  CHECK(now["NodeNames"] == before["NodeNames"]);
  CHECK(texts_now.size() == 2);
  CHECK(texts_before.size() == 5);
  CHECK(now.dump().size() < before.dump().size());
}

TEST_CASE("filter answers in the long form give every rejected node its own message",
          "[protocol][answers]") {
  // The short form's verdicts carry words on the first node of each reason only; the long form
  // names every node's own.
  Harness h({}, extender::Mode::kStandalone,
            [](extender::ServiceOptions& o) { o.answers = AnswerForm::kLong; });
  h.Apply(RejectingCluster());
  const Json answer = h.Filter(ArgsNames(kRejected.Obj(), kRejecting));
  CHECK(answer["NodeNames"] == Json::array({"roomy"}));
  const std::map<std::string, std::string> expected = {
      {"cpu-short", "berth: insufficient cpu (pod requests 6 cpu)"},
      {"mem-short", "berth: insufficient memory (pod requests 30Gi memory)"},
      {"both-short", "berth: insufficient cpu, memory (pod requests 6 cpu, 30Gi memory)"},
      {"tiny", "berth: node too small for the pod's cpu, memory (pod requests 6 cpu, 30Gi memory)"},
      {"small", "berth: node too small for the pod's cpu (pod requests 6 cpu)"}};
  std::map<std::string, std::string> texts;
  for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    for (const auto& [node, text] : answer[map].items()) texts[node] = text.get<std::string>();
  }
  CHECK(texts == expected);
}

TEST_CASE("every reason has its own short summary", "[protocol][answers]") {
  std::set<std::string_view> seen;
  for (int r = 0; r <= static_cast<int>(policy::Reason::kQueueBudget); ++r) {
    const auto reason = static_cast<policy::Reason>(r);
    const std::string_view summary = policy::ReasonSummary(reason);
    INFO(policy::ReasonCode(reason) << ": " << summary);
    CHECK(seen.insert(summary).second);
    CHECK(summary.size() <= 50);
    if (reason == policy::Reason::kUnknownNode) {
      CHECK(summary == "unknown node");  // SPEC 3.1
    } else {
      CHECK(summary.starts_with("berth: "));
    }
  }
}

// ---- kube-scheduler's decoding, as the simulator models it --------------------------------------

absl::StatusOr<std::vector<HostScore>> ReadList(const std::string& body) {
  absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
  REQUIRE(el.ok());
  return extender::sim::ReadPriorityList(*el);
}

TEST_CASE("the simulator reads a prioritize answer as Go's decoder does", "[sim][answers]") {
  SECTION("a missing or null Score is 0, and the host is named") {
    auto l = ReadList(R"([{"Host":"a"},{"Host":"b","Score":null},{"Host":"c","Score":3}])");
    REQUIRE(l.ok());
    REQUIRE(l->size() == 3);
    CHECK((*l)[0].host == "a");
    CHECK((*l)[0].score == 0);
    CHECK((*l)[1].score == 0);
    CHECK((*l)[2].score == 3);
  }
  SECTION("keys match whatever their case; the last of a repeated key wins") {
    auto l = ReadList(R"([{"host":"a","SCORE":4,"score":5,"Other":1}])");
    REQUIRE(l.ok());
    REQUIRE(l->size() == 1);
    CHECK((*l)[0].host == "a");
    CHECK((*l)[0].score == 5);
  }
  SECTION("null is an empty list; a null entry names no host") {
    auto empty = ReadList("null");
    REQUIRE(empty.ok());
    CHECK(empty->empty());
    auto l = ReadList(R"([null,{"Host":"a","Score":2}])");
    REQUIRE(l.ok());
    REQUIRE(l->size() == 2);
    CHECK((*l)[0].host.empty());
    CHECK(extender::sim::ExtenderScores(*l, std::vector<std::string_view>{"a"}, 1) ==
          std::vector<int64_t>{20});
  }
  SECTION("a Score that is not an int64 fails the whole answer") {
    for (const char* body : {R"([{"Host":"a","Score":1},{"Host":"b","Score":5.0}])",
                             R"([{"Host":"a","Score":"5"}])", R"([{"Host":"a","Score":9223372036854775808}])",
                             R"([{"Host":1}])", R"([1])", R"({"Host":"a"})"}) {
      INFO(body);
      CHECK_FALSE(ReadList(body).ok());
    }
  }
  SECTION("candidates no entry names get 0; entries naming other hosts add nothing; twice adds twice") {
    auto l = ReadList(R"([{"Host":"x","Score":9},{"Host":"b","Score":1},{"Host":"b","Score":2}])");
    REQUIRE(l.ok());
    CHECK(extender::sim::ExtenderScores(*l, std::vector<std::string_view>{"a", "b"}, 20) ==
          std::vector<int64_t>{0, 600});
  }
}

TEST_CASE("the simulator reads a filter answer as Go's decoder does", "[sim][answers]") {
  auto read = [](const std::string& body) {
    absl::StatusOr<simdjson::dom::element> el = extender::ParseReused(body);
    REQUIRE(el.ok());
    return extender::sim::ReadFilterAnswer(*el);
  };
  SECTION("names, failures and the error") {
    auto a = read(R"({"Nodes":null,"NodeNames":["a"],"FailedNodes":{"b":"x"},)"
                  R"("FailedAndUnresolvableNodes":{"c":"y","b":"z"},"Error":""})");
    REQUIRE(a.ok());
    CHECK(a->names_given);
    CHECK(a->names == std::vector<std::string_view>{"a"});
    CHECK(a->failed == std::vector<std::string_view>{"b"});
    CHECK(a->unresolvable == std::vector<std::string_view>{"c", "b"});
    CHECK(a->error.empty());
  }
  SECTION("NodeNames absent or null passes no node; lowercase keys are read") {
    auto absent = read(R"({"failednodes":{"a":"x"},"error":"boom"})");
    REQUIRE(absent.ok());
    CHECK_FALSE(absent->names_given);
    CHECK(absent->failed == std::vector<std::string_view>{"a"});
    CHECK(absent->error == "boom");
    auto null_names = read(R"({"NodeNames":["a"],"NodeNames":null})");
    REQUIRE(null_names.ok());
    CHECK_FALSE(null_names->names_given);
  }
  SECTION("a repeated map adds to the first; null empties it") {
    auto merged = read(R"({"FailedNodes":{"a":"x"},"FailedNodes":{"b":"y","a":"z"}})");
    REQUIRE(merged.ok());
    CHECK(merged->failed == std::vector<std::string_view>{"a", "b"});
    auto emptied = read(R"({"FailedNodes":{"a":"x"},"FailedNodes":null})");
    REQUIRE(emptied.ok());
    CHECK(emptied->failed.empty());
  }
  SECTION("values of the wrong type fail the answer") {
    for (const char* body : {R"([])", R"({"NodeNames":"a"})", R"({"NodeNames":[1]})",
                             R"({"FailedNodes":{"a":1}})", R"({"Error":false})", R"({"Nodes":[]})"}) {
      INFO(body);
      CHECK_FALSE(read(body).ok());
    }
  }
}

TEST_CASE("the simulator's kube-scheduler places every pod the same on both forms of answer",
          "[sim][answers]") {
  absl::StatusOr<extender::sim::Generated> g =
      extender::sim::Generate({.profile = "seed-stories", .jobs = 120, .seed = 3});
  REQUIRE(g.ok());
  auto run = [&](AnswerForm form) {
    return SimulateGenerated(*g, [&](extender::sim::SimOptions& o) { o.answers = form; });
  };
  const extender::sim::RunMetrics now = run(AnswerForm::kShort);
  const extender::sim::RunMetrics before = run(AnswerForm::kLong);
  REQUIRE(now.jobs.size() == before.jobs.size());
  size_t placed = 0;
  for (size_t i = 0; i < now.jobs.size(); ++i) {
    INFO(now.jobs[i].name);
    CHECK(now.jobs[i].name == before.jobs[i].name);
    CHECK(now.jobs[i].nodes == before.jobs[i].nodes);
    CHECK(now.jobs[i].start == before.jobs[i].start);
    CHECK(now.jobs[i].end == before.jobs[i].end);
    CHECK(now.jobs[i].restarts == before.jobs[i].restarts);
    placed += now.jobs[i].start >= 0 ? 1 : 0;
  }
  CHECK(placed > 0);
  CHECK(now.pods_started == before.pods_started);
  CHECK(now.scheduling_attempts == before.scheduling_attempts);
  CHECK(now.verb_calls == before.verb_calls);
  CHECK(now.makespan == before.makespan);
}

}  // namespace
}  // namespace berth::testing
