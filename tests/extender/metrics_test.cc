// GET /metrics over a real socket (SPEC 7): the body is valid Prometheus text format (checked by
// a strict parser below, not by string matching), names follow Prometheus conventions, and the
// counters move with the verbs: requests, errors, latency, rejections by reason code, binds,
// reclaim evictions; pool and queue gauges read the model.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "extender/http_server.h"
#include "httplib.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"

namespace berth::testing {
namespace {

// One scrape, parsed. Every sample is keyed by `name{label="value",...}` with labels sorted.
struct Scrape {
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram
  std::map<std::string, double> samples;
  double Get(const std::string& key) const {
    auto it = samples.find(key);
    return it == samples.end() ? 0 : it->second;
  }
};

// The family a sample belongs to: histogram samples carry _bucket, _sum or _count.
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

// Parses the text format strictly: HELP then TYPE before a family's samples, valid metric and
// label names, quoted and escaped label values, a number as the value, no duplicate series,
// counters named _total, histogram buckets cumulative and ending in +Inf == _count.
Scrape Parse(const std::string& body) {
  Scrape s;
  static const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  static const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? ([-+0-9.eE]+|\+Inf|-Inf|NaN)$)");
  static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\")");
  std::istringstream in(body);
  std::string line, helped;
  int n = 0;
  REQUIRE(!body.empty());
  REQUIRE(body.back() == '\n');
  while (std::getline(in, line)) {
    ++n;
    INFO("line " << n << ": " << line);
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      CHECK(m[1].str().rfind("berth_", 0) == 0);
      helped = m[1];
      continue;
    }
    if (std::regex_match(line, m, type)) {
      CHECK(m[1] == helped);  // HELP comes right before TYPE
      CHECK(s.types.count(m[1]) == 0);
      s.types[m[1]] = m[2];
      if (m[2] == "counter") CHECK(m[1].str().size() > 6);
      if (m[2] == "counter") CHECK(m[1].str().substr(m[1].str().size() - 6) == "_total");
      continue;
    }
    REQUIRE(std::regex_match(line, m, sample));
    const std::string name = m[1];
    REQUIRE(s.types.count(FamilyOf(name, s.types)) == 1);  // TYPE came first
    std::vector<std::pair<std::string, std::string>> labels;
    const std::string block = m[2];
    for (auto it = std::sregex_iterator(block.begin(), block.end(), label); it != std::sregex_iterator(); ++it) {
      labels.emplace_back((*it)[1], (*it)[2]);
    }
    std::sort(labels.begin(), labels.end());
    std::string key = name;
    if (!labels.empty()) {
      key += "{";
      for (size_t i = 0; i < labels.size(); ++i) {
        key += (i ? "," : "") + labels[i].first + "=\"" + labels[i].second + "\"";
      }
      key += "}";
    }
    CHECK(s.samples.count(key) == 0);
    const std::string v = m[3];
    s.samples[key] = v == "+Inf" ? INFINITY : v == "-Inf" ? -INFINITY : std::stod(v);
  }
  return s;
}

// Checks the histogram series of `family` with label `verb` (with no other label when `verb` is
// empty): buckets never decrease, and the +Inf bucket equals _count.
void CheckHistogram(const Scrape& s, const std::string& family, const std::string& verb) {
  // Walk the bounds in order (the keys sort as strings, not numbers).
  std::vector<std::pair<double, double>> by_le;
  static const std::regex le(R"(le="([^"]+)\")");
  const std::string selector = verb.empty() ? "" : "verb=\"" + verb + "\"";
  for (const auto& [key, v] : s.samples) {
    if (key.rfind(family + "_bucket{", 0) != 0 || key.find(selector) == std::string::npos) continue;
    std::smatch m;
    REQUIRE(std::regex_search(key, m, le));
    by_le.emplace_back(m[1] == "+Inf" ? INFINITY : std::stod(m[1]), v);
  }
  CHECK(by_le.size() > 1);
  std::sort(by_le.begin(), by_le.end());
  for (size_t i = 1; i < by_le.size(); ++i) CHECK(by_le[i].second >= by_le[i - 1].second);
  REQUIRE(std::isinf(by_le.back().first));
  CHECK(by_le.back().second ==
        s.Get(family + "_count" + (selector.empty() ? "" : "{" + selector + "}")));
}

class Served {
 public:
  Served() : server_(&harness_.service(), {}) {
    absl::StatusOr<int> port = server_.Start("127.0.0.1", 0);
    REQUIRE(port.ok());
    port_ = *port;
  }
  ~Served() { server_.Stop(); }
  Harness& h() { return harness_; }
  Scrape Metrics() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    CHECK(r->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0) == 0);
    return Parse(r->body);
  }
  int Post(const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Post(path.c_str(), body, "application/json");
    REQUIRE(r);
    return r->status;
  }

 private:
  Harness harness_;
  extender::HttpServer server_;
  int port_ = 0;
};

TEST_CASE("metrics: /metrics parses as Prometheus text and the counters move", "[metrics]") {
  Served s;
  s.h().Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("4").Memory("8Gi").Pods(110).Obj()),
                           Event("ADDED", MakeQueue("team").Weight(2).Obj())}));
  const Scrape before = s.Metrics();
  CHECK(before.types.at("berth_requests_total") == "counter");
  CHECK(before.types.at("berth_request_duration_seconds") == "histogram");
  CHECK(before.types.at("berth_pool_capacity") == "gauge");
  CHECK(before.Get(R"(berth_requests_total{verb="filter"})") == 0);
  CHECK(before.Get(R"(berth_pool_capacity{pool="default",resource="cpu"})") == 4);
  CHECK(before.Get(R"(berth_pool_capacity{pool="default",resource="memory"})") == 8.0 * (1 << 30));
  CHECK(before.Get(R"(berth_queue_weight{queue="team"})") == 2);
  CHECK(before.Get("berth_nodes") == 1);

  // Three filters (one fits, one is too big, one undecodable) and a bind.
  const MakePod fits = MakePod("fits").Cpu("1").Label("berth.io/queue", "team");
  const MakePod big = MakePod("big").Cpu("64");
  CHECK(s.Post("/filter", ArgsNames(fits.Obj(), {"n1"}).dump()) == 200);
  CHECK(s.Post("/filter", ArgsNames(big.Obj(), {"n1"}).dump()) == 200);
  CHECK(s.Post("/filter", "{not json") == 400);
  CHECK(s.Post("/bind", BindArgs(fits, "n1").dump()) == 200);
  CHECK(s.Post("/bind", BindArgs(fits, "nope").dump()) == 200);  // refused: Error in the body

  const Scrape after = s.Metrics();
  CHECK(after.Get(R"(berth_requests_total{verb="filter"})") == 3);
  CHECK(after.Get(R"(berth_request_errors_total{verb="filter"})") == 1);
  CHECK(after.Get(R"(berth_requests_total{verb="bind"})") == 2);
  CHECK(after.Get(R"(berth_binds_total{result="bound"})") == 1);
  CHECK(after.Get(R"(berth_binds_total{result="refused"})") == 1);
  CHECK(after.Get(R"(berth_filter_rejections_total{reason="ExceedsAllocatable"})") == 1);
  CHECK(after.Get(R"(berth_request_duration_seconds_count{verb="filter"})") == 3);
  CHECK(after.Get(R"(berth_request_duration_seconds_sum{verb="filter"})") > 0);
  CheckHistogram(after, "berth_request_duration_seconds", "filter");
  CheckHistogram(after, "berth_request_duration_seconds", "bind");
  // Gauges follow the model: the bound pod is used capacity of its pool and its queue.
  CHECK(after.Get(R"(berth_pool_used{pool="default",resource="cpu"})") == 1);
  CHECK(after.Get(R"(berth_queue_usage{queue="team"})") == Approx(1));
  CHECK(after.Get(R"(berth_queue_running_pods{queue="team"})") == 1);
  // team (weight 2) and default (the big pod waits there) have pods: 2/3 and 1/3.
  CHECK(after.Get(R"(berth_queue_fair_share{queue="team"})") == Approx(2.0 / 3));
  CHECK(after.Get(R"(berth_queue_fair_share{queue="default"})") == Approx(1.0 / 3));
  CHECK(after.Get("berth_pods") == 2);
  // The filters' admission plans are counted, with their time.
  CHECK(before.types.at("berth_admission_plans_total") == "counter");
  CHECK(after.Get("berth_admission_plans_total") > before.Get("berth_admission_plans_total"));
  CHECK(after.Get("berth_admission_plan_seconds_total") > before.Get("berth_admission_plan_seconds_total"));
}

TEST_CASE("metrics: the model's exclusive lock holds are a histogram and a max", "[metrics]") {
  Served s;
  const Scrape before = s.Metrics();
  CHECK(before.types.at("berth_model_write_lock_hold_seconds") == "histogram");
  CHECK(before.types.at("berth_model_write_lock_hold_max_seconds") == "gauge");
  const double writes0 = before.Get("berth_model_write_lock_hold_seconds_count");

  // Two event calls and a bind: three writes. A filter only reads.
  const MakePod pod = MakePod("p").Cpu("1");
  s.h().Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("4").Memory("8Gi").Pods(110).Obj())}));
  s.h().Apply(Json::array({Event("ADDED", pod.Obj())}));
  CHECK(s.Post("/filter", ArgsNames(pod.Obj(), {"n1"}).dump()) == 200);
  CHECK(s.Post("/bind", BindArgs(pod, "n1").dump()) == 200);

  const Scrape after = s.Metrics();
  CHECK(after.Get("berth_model_write_lock_hold_seconds_count") >= writes0 + 3);
  CheckHistogram(after, "berth_model_write_lock_hold_seconds", "");
  const double max = after.Get("berth_model_write_lock_hold_max_seconds");
  CHECK(max > 0);
  CHECK(max <= after.Get("berth_model_write_lock_hold_seconds_sum"));
  // The buckets start at a microsecond (a model write takes microseconds) and end at 1 s.
  std::vector<double> bounds;
  static const std::regex le(R"re(^berth_model_write_lock_hold_seconds_bucket\{le="([^"+]+)"\}$)re");
  for (const auto& [key, v] : after.samples) {
    std::smatch m;
    if (std::regex_match(key, m, le)) bounds.push_back(std::stod(m[1]));
  }
  std::sort(bounds.begin(), bounds.end());
  REQUIRE(bounds.size() == core::HoldTimes::kBoundsNs.size());
  CHECK(bounds.front() == Approx(1e-6));
  CHECK(bounds.back() == Approx(1));
}

TEST_CASE("metrics: label values are escaped", "[metrics]") {
  std::string out;
  extender::PromWriter w(&out);
  w.Family("berth_x_total", "counter", "A help text with a \\ and\na newline.");
  w.Sample("berth_x_total", {{"reason", "say \"hi\"\\\n"}}, 3);
  CHECK(out == "# HELP berth_x_total A help text with a \\\\ and\\na newline.\n"
               "# TYPE berth_x_total counter\n"
               "berth_x_total{reason=\"say \\\"hi\\\"\\\\\\n\"} 3\n");
  const Scrape s = Parse(out);
  CHECK(s.samples.size() == 1);
}

TEST_CASE("metrics: evictions of a reclaim are counted by cause", "[metrics]") {
  Served s;
  s.h().Apply(Json::array({Event("ADDED", MakePool("a").Label("pool", "a").Obj()),
                           Event("ADDED", MakePool("b").Label("pool", "b").Obj()),
                           Event("ADDED", MakeNode("a1").Cpu("8").Memory("8Gi").Pods(110).Label("pool", "a").Obj()),
                           Event("ADDED", MakeNode("b1").Cpu("8").Memory("8Gi").Pods(110).Label("pool", "b").Obj()),
                           Event("ADDED", MakePod("a-own").Cpu("8").Annotation("berth.io/pool", "a")
                                              .Node("a1").Phase("Running").Obj()),
                           Event("ADDED", MakePod("borrower").Cpu("8").Annotation("berth.io/pool", "a")
                                              .Node("b1").Phase("Running").Obj())}));
  const MakePod mine = MakePod("b-job").Cpu("4").Annotation("berth.io/pool", "b");
  s.h().Apply(Json::array({Event("ADDED", mine.Obj())}));
  CHECK(s.Post("/filter", ArgsNames(mine.Obj(), {"a1", "b1"}).dump()) == 200);
  // Counted when carried out, not when the filter recorded it.
  CHECK(s.Metrics().Get(R"(berth_evictions_total{cause="reclaim"})") == 0);
  CHECK(s.Metrics().Get(R"(berth_intents_pending{kind="eviction"})") == 1);
  s.h().service().DrainIntents();
  const Scrape m = s.Metrics();
  CHECK(m.Get(R"(berth_evictions_total{cause="reclaim"})") == 1);
  CHECK(m.Get(R"(berth_intents_total{kind="eviction",outcome="done"})") == 1);
  CHECK(m.Get(R"(berth_intents_pending{kind="eviction"})") == 0);
  CHECK(m.Get("berth_reclaims_total") == 1);
  CHECK(m.Get(R"(berth_pool_borrowed{pool="a",resource="cpu"})") == 0);  // the borrower is gone
}

}  // namespace
}  // namespace berth::testing
