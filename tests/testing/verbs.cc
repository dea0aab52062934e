#include "tests/testing/verbs.h"

#include <sstream>

#include "absl/status/statusor.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"

namespace berth::testing {

std::string Verdicts::Why(const std::string& node) const {
  auto it = messages.find(node);
  return it == messages.end() ? "" : it->second;
}

Verdicts FilterPod(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes) {
  std::vector<policy::NodeVerdict> verdicts;
  const Json r = h.Filter(ArgsNames(pod.Obj(), nodes), &verdicts);
  INFO("filter reply: " << r.dump());
  REQUIRE((!r.contains("Error") || r["Error"].is_null() || r["Error"] == ""));
  REQUIRE(verdicts.size() == nodes.size());
  Verdicts v;
  if (r.contains("NodeNames") && r["NodeNames"].is_array()) {
    for (const Json& n : r["NodeNames"]) v.fit.push_back(n.get<std::string>());
  }
  if (r.contains("FailedNodes") && r["FailedNodes"].is_object()) {
    for (const auto& [n, why] : r["FailedNodes"].items()) v.failed[n] = why.get<std::string>();
  }
  if (r.contains("FailedAndUnresolvableNodes") && r["FailedAndUnresolvableNodes"].is_object()) {
    for (const auto& [n, why] : r["FailedAndUnresolvableNodes"].items()) {
      v.unresolvable[n] = why.get<std::string>();
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (verdicts[i].ok()) continue;
    INFO("node " << nodes[i] << ": " << verdicts[i].message);
    v.messages[nodes[i]] = verdicts[i].message;
    const auto& written = verdicts[i].fit == policy::Fit::kUnresolvable ? v.unresolvable : v.failed;
    const auto it = written.find(nodes[i]);
    REQUIRE(it != written.end());
    CHECK(it->second == policy::ReasonSummary(verdicts[i].reason));
  }
  return v;
}

std::map<std::string, int64_t> ScoresOf(const Json& answer) {
  INFO("prioritize answer: " << answer.dump());
  REQUIRE(answer.is_array());
  std::map<std::string, int64_t> out;
  for (const Json& e : answer) {
    REQUIRE(e.is_object());
    REQUIRE(e.contains("Host"));
    REQUIRE(e["Host"].is_string());
    out[e["Host"].get<std::string>()] = e.value("Score", int64_t{0});
  }
  return out;
}

Verdicts FilterSettled(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes) {
  Verdicts v = FilterPod(h, pod, nodes);
  for (int round = 0; round < 3 && h.service().DrainIntents() > 0; ++round) {
    v = FilterPod(h, pod, nodes);
  }
  return v;
}

std::string HeldCpu(Harness& h, const std::string& node) {
  const Json nodes = ParseReply(h.service().DebugNodes(false))["nodes"];
  for (const Json& n : nodes) {
    if (n["name"] == node) return n["held"].value("cpu", "");
  }
  FAIL("no node " << node);
  return "";
}

std::string BindError(Harness& h, const MakePod& pod, const std::string& node) {
  const Json r = h.Bind(BindArgs(pod, node));
  if (!r.contains("Error") || r["Error"].is_null()) return "";
  return r["Error"].get<std::string>();
}

void BindOk(Harness& h, const MakePod& pod, const std::string& node) {
  const std::string error = BindError(h, pod, node);
  INFO("bind " << pod.Obj()["metadata"]["name"] << " to " << node << ": " << error);
  CHECK(error.empty());
}

uint64_t Generation(Harness& h) { return h.model().Read()->generation(); }

void ApplyToModel(Harness& h, const Json& events) {
  const std::string text = events.dump();
  absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(text);
  REQUIRE(doc.ok());
  absl::StatusOr<std::vector<core::ModelEvent>> decoded =
      extender::DecodeWatchEvents(doc->root(), h.model().resources());
  REQUIRE(decoded.ok());
  REQUIRE(h.model().Apply(*decoded).refused.empty());
}

void AddObjects(Harness& h, const std::vector<Json>& objects) {
  Json events = Json::array();
  for (const Json& o : objects) events.push_back(Event("ADDED", o));
  h.Apply(events);
}

void SettleSideEffects(Harness& h) { h.service().DrainIntents(); }

namespace {
// /debug/pods answers an array or {"pods": [...]}.
Json DebugPodList(Harness& h) {
  const Json pods = ParseReply(h.service().DebugPods(false, true));
  return pods.is_array() ? pods : pods["pods"];
}

// The element of `list` whose `field` is `value`, or null.
Json Find(const Json& list, const char* field, const std::string& value) {
  for (const Json& e : list) {
    if (e.contains(field) && e[field] == value) return e;
  }
  return Json();
}
}  // namespace

std::set<std::string> PodKeys(Harness& h) {
  std::set<std::string> out;
  for (const Json& p : DebugPodList(h)) {
    out.insert(p["namespace"].get<std::string>() + "/" + p["name"].get<std::string>());
  }
  return out;
}

std::set<std::string> EvictedSince(Harness& h, const std::set<std::string>& before) {
  SettleSideEffects(h);
  const std::set<std::string> now = PodKeys(h);
  std::set<std::string> gone;
  for (const std::string& k : before) {
    if (!now.contains(k)) gone.insert(k);
  }
  return gone;
}

Json PodInfo(Harness& h, const std::string& key) {
  for (const Json& p : DebugPodList(h)) {
    if (p["namespace"].get<std::string>() + "/" + p["name"].get<std::string>() == key) return p;
  }
  FAIL("no pod " << key << " in /debug/pods");
  return Json();
}

Json GangInfo(Harness& h, const std::string& name) {
  const Json all = ParseReply(h.service().DebugGangs(false));
  const Json g = Find(all["gangs"], "name", name);
  if (g.is_null()) FAIL("no gang " << name << " in " << all.dump());
  return g;
}

Json QueueJobs(Harness& h) { return ParseReply(h.service().DebugQueues(false))["jobs"]; }

Json JobInfo(Harness& h, const std::string& key) {
  const Json jobs = QueueJobs(h);
  const Json j = Find(jobs, "job", key);
  if (j.is_null()) FAIL("no job " << key << " in /debug/queues: " << jobs.dump());
  return j;
}

Json ExplainJson(Harness& h, const std::string& key) {
  const extender::Reply r = h.service().DebugExplain(key, false);
  INFO("explain " << key << ": " << r.body);
  REQUIRE(r.status == 200);
  return ParseReply(r);
}

double Metric(Harness& h, const std::string& series) {
  std::istringstream in(h.service().Metrics().body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return 0;
}

absl::Status RecordingNudger::Nudge(const core::Pod& pod, std::string_view why) {
  nudged.push_back(StrCat(pod.Key(), " (", why, ")"));
  return absl::OkStatus();
}

}  // namespace berth::testing
