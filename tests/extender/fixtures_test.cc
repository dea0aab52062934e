// Every request body a real kube-scheduler 1.26 sent (BERTH_FIXTURES_DIR), fed to berth's verbs
// through Service, with the answers checked against the extender protocol
// (extender-protocol.md sections 1 and 2).

#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/cluster_model.h"
#include "core/resources.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/files.h"
#include "tests/testing/harness.h"

namespace berth::testing {
namespace {

/// berth configured as in the capture: its kube-scheduler profile was `batch-scheduler`, so the
/// fixtures' pods are berth's own (pool and preemption rules apply to them).
policy::PolicyConfig CaptureConfig() {
  policy::PolicyConfig c;
  c.scheduler_name = "batch-scheduler";
  return c;
}

namespace fs = std::filesystem;
using extender::Reply;

struct Fixture {
  std::string file;
  std::string verb;  // filter, prioritize, bind or preempt
  bool nodecache = false;
  std::string body;  // exactly the bytes in the file
  Json json;
  int seq = -1;  // capture order (index.json capture_seq)
};


// Every *-request-*.json in the fixtures directory, in capture order.
std::vector<Fixture> LoadFixtures() {
  const fs::path dir(BERTH_FIXTURES_DIR);
  REQUIRE(fs::is_directory(dir));
  const Json index = Json::parse(ReadTestFile(dir / "index.json"));
  std::map<std::string, Json> by_file;
  for (const Json& entry : index) by_file[entry["fixture"].get<std::string>()] = entry;

  static const std::regex kName(R"(^([a-z]+)-request-(nodecache-)?[0-9]+\.json$)");
  std::vector<Fixture> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find("-request-") == std::string::npos) continue;
    std::smatch m;
    INFO("fixture file " << name);
    REQUIRE(std::regex_match(name, m, kName));
    Fixture f;
    f.file = name;
    f.verb = m[1].str();
    f.nodecache = m[2].matched;
    REQUIRE((f.verb == "filter" || f.verb == "prioritize" || f.verb == "bind" || f.verb == "preempt"));
    f.body = ReadTestFile(e.path());
    f.json = Json::parse(f.body);
    REQUIRE(by_file.count(name) == 1);
    CHECK(by_file[name]["verb"] == f.verb);
    CHECK(by_file[name]["scheduler_config"] ==
          (f.nodecache ? "nodeCacheCapable=true" : "nodeCacheCapable=false"));
    f.seq = by_file[name]["capture_seq"].get<int>();
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.seq < b.seq; });
  return out;
}

Reply Send(Harness& h, const Fixture& f) {
  if (f.verb == "filter") return h.service().Filter(f.body);
  if (f.verb == "prioritize") return h.service().Prioritize(f.body);
  if (f.verb == "bind") return h.service().Bind(f.body);
  return h.service().Preempt(f.body);
}

std::set<std::string> Keys(const Json& obj) {
  std::set<std::string> keys;
  for (const auto& [k, v] : obj.items()) keys.insert(k);
  return keys;
}

// The candidate node names of an ExtenderArgs request, in input order.
std::vector<std::string> InputNames(const Json& req) {
  std::vector<std::string> names;
  if (!req["NodeNames"].is_null()) {
    for (const Json& n : req["NodeNames"]) names.push_back(n.get<std::string>());
  } else {
    for (const Json& item : req["Nodes"]["items"]) names.push_back(item["metadata"]["name"]);
  }
  return names;
}

// Checks a filter answer against the protocol; returns the pass list.
std::vector<std::string> CheckFilter(const Json& req, const Reply& reply, Json* decoded = nullptr) {
  INFO("filter reply: " << reply.body.substr(0, 2000));
  REQUIRE(reply.status == 200);
  const Json r = ParseReply(reply);
  if (decoded != nullptr) *decoded = r;
  REQUIRE(r.is_object());
  CHECK(Keys(r) == std::set<std::string>{"Nodes", "NodeNames", "FailedNodes",
                                         "FailedAndUnresolvableNodes", "Error"});
  REQUIRE(r["Error"].is_string());
  CHECK(r["Error"] == "");

  const std::vector<std::string> input = InputNames(req);
  std::vector<std::string> passed;
  if (!req["NodeNames"].is_null()) {
    // Name mode: NodeNames answers, Nodes is null.
    CHECK(r["Nodes"].is_null());
    REQUIRE(r["NodeNames"].is_array());
    for (const Json& n : r["NodeNames"]) {
      REQUIRE(n.is_string());
      passed.push_back(n.get<std::string>());
    }
  } else {
    // Full-object mode: Nodes is a NodeList of the request's own node objects.
    CHECK(r["NodeNames"].is_null());
    REQUIRE(r["Nodes"].is_object());
    CHECK(Keys(r["Nodes"]) == std::set<std::string>{"metadata", "items"});
    CHECK(r["Nodes"]["metadata"] == Json::object());
    REQUIRE(r["Nodes"]["items"].is_array());
    for (const Json& item : r["Nodes"]["items"]) {
      REQUIRE(item.is_object());
      const std::string name = item["metadata"]["name"];
      passed.push_back(name);
      const Json* original = nullptr;
      for (const Json& in : req["Nodes"]["items"]) {
        if (in["metadata"]["name"] == name) original = &in;
      }
      REQUIRE(original != nullptr);
      CHECK(item["metadata"]["labels"] == (*original)["metadata"]["labels"]);
      CHECK(item == *original);  // copied whole, not rebuilt
    }
  }
  // The pass list is a subsequence of the input (same order, no strangers).
  size_t pos = 0;
  for (const std::string& p : passed) {
    while (pos < input.size() && input[pos] != p) ++pos;
    INFO("passed node " << p);
    REQUIRE(pos < input.size());
    ++pos;
  }
  // Every input node appears exactly once across the pass list and the two failure maps.
  std::map<std::string, int> seen;
  for (const std::string& p : passed) ++seen[p];
  for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    REQUIRE(r[map].is_object());
    for (const auto& [node, why] : r[map].items()) {
      INFO(map << "[" << node << "]");
      REQUIRE(why.is_string());
      CHECK_FALSE(why.get<std::string>().empty());
      ++seen[node];
    }
  }
  for (const std::string& n : input) {
    INFO("input node " << n);
    CHECK(seen[n] == 1);
  }
  CHECK(seen.size() == input.size());
  return passed;
}

// Checks a prioritize answer; returns host -> score.
std::map<std::string, int64_t> CheckPrioritize(const Json& req, const Reply& reply) {
  INFO("prioritize reply: " << reply.body);
  REQUIRE(reply.status == 200);
  // Scores are plain integers on the wire: Go's int64 decoder rejects 5.0 and 5e0.
  CHECK_FALSE(std::regex_search(reply.body, std::regex(R"("Score"\s*:\s*-?[0-9]+[.eE])")));
  const Json r = ParseReply(reply);
  REQUIRE(r.is_array());
  const std::vector<std::string> input = InputNames(req);
  CHECK(r.size() == input.size());
  std::map<std::string, int64_t> scores;
  for (const Json& hp : r) {
    REQUIRE(hp.is_object());
    REQUIRE(hp.contains("Host"));
    REQUIRE(hp["Host"].is_string());
    // Score 0 is left out (Go's decoder gives the missing field 0); any other is written.
    int64_t score = 0;
    if (Keys(hp) == std::set<std::string>{"Host", "Score"}) {
      REQUIRE(hp["Score"].is_number_integer());
      score = hp["Score"].get<int64_t>();
      CHECK(score != 0);
    } else {
      CHECK(Keys(hp) == std::set<std::string>{"Host"});
    }
    CHECK(score >= 0);
    CHECK(score <= 10);
    CHECK(scores.count(hp["Host"]) == 0);
    scores[hp["Host"]] = score;
  }
  for (const std::string& n : input) CHECK(scores.count(n) == 1);
  return scores;
}

// Checks a bind answer: HTTP 200 and {"Error": ...}; returns the error text.
std::string CheckBind(const Reply& reply) {
  INFO("bind reply: " << reply.body);
  REQUIRE(reply.status == 200);
  const Json r = ParseReply(reply);
  REQUIRE(r.is_object());
  REQUIRE(r.contains("Error"));
  REQUIRE(r["Error"].is_string());
  return r["Error"];
}

// Checks a preempt answer; returns node -> victim uids.
std::map<std::string, std::vector<std::string>> CheckPreempt(const Json& req, const Reply& reply,
                                                            Harness& h) {
  INFO("preempt reply: " << reply.body);
  REQUIRE(reply.status == 200);
  const Json r = ParseReply(reply);
  REQUIRE(r.is_object());
  REQUIRE(r.contains("NodeNameToMetaVictims"));
  REQUIRE(r["NodeNameToMetaVictims"].is_object());
  // node -> input victim uids (either form)
  std::map<std::string, std::set<std::string>> input;
  const bool meta = !req["NodeNameToMetaVictims"].is_null();
  const Json& in_map = meta ? req["NodeNameToMetaVictims"] : req["NodeNameToVictims"];
  for (const auto& [node, victims] : in_map.items()) {
    auto& uids = input[node];
    for (const Json& p : victims["Pods"]) {
      uids.insert(meta ? p["UID"].get<std::string>() : p["metadata"]["uid"].get<std::string>());
    }
  }
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [node, mv] : r["NodeNameToMetaVictims"].items()) {
    INFO("node " << node);
    CHECK(input.count(node) == 1);
    REQUIRE(mv.is_object());
    REQUIRE(mv["Pods"].is_array());
    CHECK_FALSE(mv["Pods"].empty());
    REQUIRE(mv["NumPDBViolations"].is_number_integer());
    for (const Json& p : mv["Pods"]) {
      REQUIRE(p["UID"].is_string());
      const std::string uid = p["UID"];
      bool known_here = false;
      {
        auto view = h.model().Read();
        const core::PodState* pod = view->FindPod(uid);
        known_here = pod != nullptr && pod->pod.node_name == node;
      }
      INFO("victim " << uid);
      CHECK((input[node].count(uid) == 1 || known_here));
      out[node].push_back(uid);
    }
  }
  return out;
}

std::string PodUid(const Json& req) { return req["Pod"]["metadata"]["uid"]; }

Json DebugNode(Harness& h, const std::string& name) {
  const Json nodes = ParseReply(h.service().DebugNodes(false));
  for (const Json& n : nodes["nodes"]) {
    if (n["name"] == name) return n;
  }
  FAIL("node " << name << " missing from /debug/nodes");
  return Json();
}

// ---- the tests -------------------------------------------------------------------------------

TEST_CASE("fixtures: all 17 request files are there - one group per verb", "[fixtures]") {
  const std::vector<Fixture> fixtures = LoadFixtures();
  std::map<std::string, int> per_verb;
  for (const Fixture& f : fixtures) ++per_verb[f.verb];
  CHECK(fixtures.size() == 17);
  CHECK(per_verb["filter"] == 6);
  CHECK(per_verb["prioritize"] == 3);
  CHECK(per_verb["bind"] == 5);
  CHECK(per_verb["preempt"] == 3);
  CHECK(per_verb.size() == 4);
  // index.json describes exactly these files.
  const Json index = Json::parse(ReadTestFile(fs::path(BERTH_FIXTURES_DIR) / "index.json"));
  CHECK(index.size() == 17);
}

TEST_CASE("fixtures: each request alone - on a fresh service - gets a protocol-correct answer",
          "[fixtures]") {
  for (const Fixture& f : LoadFixtures()) {
    SECTION(f.file) {
      Harness h(CaptureConfig());
      const Reply reply = Send(h, f);
      if (f.verb == "filter") {
        const std::vector<std::string> passed = CheckFilter(f.json, reply);
        if (!f.nodecache) {
          // Standalone berth learns the full nodes and the pod, so every node has room.
          CHECK(passed == InputNames(f.json));
        } else {
          // It has never seen these nodes: each is an unknown node, which preemption may fix.
          CHECK(passed.empty());
          const Json r = ParseReply(reply);
          for (const std::string& n : InputNames(f.json)) CHECK(r["FailedNodes"][n] == "unknown node");
        }
      } else if (f.verb == "prioritize") {
        CheckPrioritize(f.json, reply);
      } else if (f.verb == "bind") {
        // A pod berth never saw: refused with a message, not an HTTP error.
        const std::string error = CheckBind(reply);
        CHECK_FALSE(error.empty());
        CHECK(error.find(f.json["PodName"].get<std::string>()) != std::string::npos);
      } else {
        const auto kept = CheckPreempt(f.json, reply, h);
        // Berth knows none of the nodes: nothing to offer.
        CHECK(kept.empty());
      }
    }
  }
}

TEST_CASE("fixtures: replayed in capture order on one service - as kube-scheduler sent them",
          "[fixtures]") {
  // Without the queue module: the capture's later requests follow from kube-scheduler's own
  // order (gpu-large-only took the GPU high-3gpu waited for), which berth's queue would change.
  policy::PolicyConfig config = CaptureConfig();
  config.admission = {"gpu-min-cpu", "gang"};
  Harness h(config);
  std::set<std::string> filtered_uids;  // pods berth has seen in a filter
  // Hand-derived from README.md's scenario: each pod's GPUs against the nodes' 4/4/2 GPUs.
  const std::map<std::string, std::vector<std::string>> want_pass = {
      {"filter-request-1.json", {"node-a", "node-b", "node-c"}},
      {"filter-request-4.json", {"node-c"}},
      {"filter-request-3.json", {"node-b"}},
      {"filter-request-nodecache-1.json", {"node-a"}},  // node-b 4/4 and node-c 2/2 used by then
      {"filter-request-nodecache-2.json", {"node-a"}},
      {"filter-request-2.json", {"node-a"}},  // node-b is full
  };
  const std::map<std::string, std::set<std::string>> want_preempt = {
      {"preempt-request-1.json", {"node-a", "node-b", "node-c"}},
      {"preempt-request-nodecache-1.json", {"node-a"}},
      {"preempt-request-2.json", {"node-a"}},
  };
  int binds = 0;
  for (const Fixture& f : LoadFixtures()) {
    INFO("fixture " << f.file << " (capture_seq " << f.seq << ")");
    const Reply reply = Send(h, f);
    if (f.verb == "filter") {
      const std::vector<std::string> passed = CheckFilter(f.json, reply);
      CHECK(passed == want_pass.at(f.file));
      filtered_uids.insert(PodUid(f.json));
    } else if (f.verb == "prioritize") {
      CheckPrioritize(f.json, reply);
    } else if (f.verb == "bind") {
      // Every bind in the capture follows a filter of the same pod.
      REQUIRE(filtered_uids.count(f.json["PodUID"].get<std::string>()) == 1);
      CHECK(CheckBind(reply) == "");
      ++binds;
    } else {
      const auto kept = CheckPreempt(f.json, reply, h);
      std::set<std::string> nodes;
      for (const auto& [node, uids] : kept) nodes.insert(node);
      CHECK(nodes == want_preempt.at(f.file));
      if (f.file == "preempt-request-2.json") {
        // Berth knows no PodDisruptionBudget: it keeps the scheduler's count, and the victims.
        const Json answer = ParseReply(reply);
        const Json& mv = answer["NodeNameToMetaVictims"]["node-a"];
        CHECK(mv["NumPDBViolations"] == 3);
        const std::set<std::string> uids(kept.at("node-a").begin(), kept.at("node-a").end());
        CHECK(uids == std::set<std::string>{"ce792ec9-4f1c-4b72-960e-226a78e30b39",
                                            "63130ab2-a0c8-4918-ba7d-9efe4b9d41ae",
                                            "0625cc4c-6a6d-4cfa-83b4-0306fa488bba"});
      }
    }
  }
  CHECK(binds == 5);

  // What berth now holds, by hand: node-a nc-gpu-1 (500m, 256Mi, 1 GPU) + gpu-large-only
  // (1, 1Gi, 1 GPU); node-b gpu-2 + high-1 (1, 256Mi, 2 GPUs each); node-c low-5 (same).
  const Json a = DebugNode(h, "node-a");
  CHECK(a["used"]["nvidia.com/gpu"] == "2");
  CHECK(a["used"]["cpu"] == "1500m");
  CHECK(a["used"]["memory"] == "1280Mi");
  CHECK(a["free"]["nvidia.com/gpu"] == "2");
  CHECK(a["pods"] == 2);
  const Json b = DebugNode(h, "node-b");
  CHECK(b["used"]["nvidia.com/gpu"] == "4");
  CHECK(b["used"]["cpu"] == "2");
  CHECK(b["used"]["memory"] == "512Mi");
  CHECK(b["pods"] == 2);
  const Json c = DebugNode(h, "node-c");
  CHECK(c["used"]["nvidia.com/gpu"] == "2");
  CHECK(c["free"]["cpu"] == "7");
  CHECK(c["pods"] == 1);
  for (const Json* n : {&a, &b, &c}) CHECK((*n)["reserved"] == Json::object());

  // Binding the same pods again changes nothing and still succeeds.
  for (const Fixture& f : LoadFixtures()) {
    if (f.verb != "bind") continue;
    INFO("repeated " << f.file);
    CHECK(CheckBind(Send(h, f)) == "");
  }
  CHECK(DebugNode(h, "node-b")["used"]["nvidia.com/gpu"] == "4");
}

TEST_CASE("fixtures: filter-request-1 decodes to README.md's pod and nodes", "[fixtures]") {
  Harness h(CaptureConfig());
  Fixture filter1;
  for (Fixture& f : LoadFixtures()) {
    if (f.file == "filter-request-1.json") filter1 = std::move(f);
  }
  REQUIRE(filter1.verb == "filter");
  CheckFilter(filter1.json, h.service().Filter(filter1.body));

  struct Want {
    const char* name;
    const char* cpu;
    const char* memory;
    const char* gpu;
    const char* zone;
  };
  for (const Want& w : {Want{"node-a", "16", "64Gi", "4", "zone-1"},
                        Want{"node-b", "16", "64Gi", "4", "zone-2"},
                        Want{"node-c", "8", "32Gi", "2", "zone-1"}}) {
    INFO(w.name);
    const Json n = DebugNode(h, w.name);
    CHECK(n["allocatable"]["cpu"] == w.cpu);
    CHECK(n["allocatable"]["memory"] == w.memory);
    CHECK(n["allocatable"]["nvidia.com/gpu"] == w.gpu);
    CHECK(n["allocatable"]["pods"] == "110");
    CHECK(n["allocatable"]["ephemeral-storage"] == "100Gi");
    CHECK(n["topology"][0] == w.zone);
    CHECK(n["used"] == Json::object());
  }

  // The pod: 1 cpu, 256Mi, 2 GPUs (the limit equals the request and is not added to it).
  const Json pods = ParseReply(h.service().DebugPods(false, /*all=*/true));
  REQUIRE(pods["pods"].size() == 1);
  const Json& pod = pods["pods"][0];
  CHECK(pod["name"] == "gpu-2");
  CHECK(pod["namespace"] == "batch");
  CHECK(pod["uid"] == "fe3aa193-359c-4d98-a491-10221e71ac8f");
  CHECK(pod["request"]["nvidia.com/gpu"] == "2");
  CHECK(pod["request"]["cpu"] == "1");
  CHECK(pod["request"]["memory"] == "256Mi");
  auto view = h.model().Read();
  const core::PodState* state = view->FindPod("fe3aa193-359c-4d98-a491-10221e71ac8f");
  REQUIRE(state != nullptr);
  CHECK(state->pod.request.Get(core::kNvidiaGpu) == 2);
  CHECK(state->pod.request.Get(core::kCpu) == 1000);
  CHECK(state->pod.scheduler_name == "batch-scheduler");
  CHECK(view->node_count() == 3);
}

TEST_CASE("fixtures: request keys are matched case-insensitively - as Go does", "[fixtures]") {
  Harness h(CaptureConfig());
  Fixture filter1;
  for (Fixture& f : LoadFixtures()) {
    if (f.file == "filter-request-1.json") filter1 = std::move(f);
  }
  REQUIRE(filter1.verb == "filter");
  // The very first releases sent lowercase keys.
  Json lower = {{"pod", filter1.json["Pod"]}, {"nodes", filter1.json["Nodes"]}};
  const std::vector<std::string> passed = CheckFilter(filter1.json, h.service().Filter(lower.dump()));
  CHECK(passed.size() == 3);
  Json bind = {{"podname", "gpu-2"}, {"podNamespace", "batch"},
               {"PODUID", "fe3aa193-359c-4d98-a491-10221e71ac8f"}, {"node", "node-c"}};
  CHECK(CheckBind(h.service().Bind(bind.dump())) == "");
  CHECK(DebugNode(h, "node-c")["used"]["nvidia.com/gpu"] == "2");
}

}  // namespace
}  // namespace berth::testing
