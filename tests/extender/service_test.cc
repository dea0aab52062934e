// Behaviour of berth through its request/response interface (Service): verdicts with reasons,
// the bind ledger in both modes, POST /v1/events, the snapshot round trip, the demo cluster,
// the operations endpoints, and bad input that must be refused without changing anything.

#include "extender/service.h"

#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <thread>
#include <atomic>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/resources.h"
#include "core/strings.h"
#include "extender/demo_cluster.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "nlohmann/json.hpp"
#include "policy/registry.h"
#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/text.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

using extender::Reply;
using extender::Service;

std::set<std::string> Keys(const Json& obj) {
  std::set<std::string> keys;
  for (const auto& [k, v] : obj.items()) keys.insert(k);
  return keys;
}

Json Ok(const Reply& r) {
  INFO("status " << r.status << " body: " << r.body.substr(0, 2000));
  REQUIRE(r.status == 200);
  return ParseReply(r);
}

Json DebugNode(Service& s, const std::string& name) {
  const Json nodes = Ok(s.DebugNodes(false));
  for (const Json& n : nodes["nodes"]) {
    if (n["name"] == name) return n;
  }
  FAIL("node " << name << " missing from /debug/nodes");
  return Json();
}

bool HasNode(Service& s, const std::string& name) {
  const Json nodes = Ok(s.DebugNodes(false));
  for (const Json& n : nodes["nodes"]) {
    if (n["name"] == name) return true;
  }
  return false;
}

// Everything a client can see of the model, to prove a refused request changed nothing.
struct Observed {
  std::string snapshot;
  std::string nodes;
  std::string pods;
  uint64_t generation = 0;
  size_t binds_in_flight = 0;
  friend bool operator==(const Observed&, const Observed&) = default;
};
Observed Observe(Service& s) {
  Observed o;
  o.snapshot = s.DebugSnapshot(false).body;
  o.nodes = s.DebugNodes(false).body;
  o.pods = s.DebugPods(false, true).body;
  auto view = s.model().Read();
  o.generation = view->generation();
  o.binds_in_flight = view->binds_in_flight();
  return o;
}

void CheckUnchanged(const Observed& before, const Observed& after) {
  CHECK(after.generation == before.generation);
  CHECK(after.binds_in_flight == before.binds_in_flight);
  CHECK(after.snapshot == before.snapshot);
  CHECK(after.nodes == before.nodes);
  CHECK(after.pods == before.pods);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// ---- Kubernetes mode with a binder that succeeds without the watch confirming ----------------

class FakeBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod& pod, std::string_view node) override {
    calls.emplace_back(pod.Key(), std::string(node));
    return result;
  }
  absl::Status result = absl::OkStatus();
  std::vector<std::pair<std::string, std::string>> calls;
};

// A Service wired for Kubernetes mode: objects come from lists and watch events fed straight to
// the model (as the watcher does), binds go to FakeBinder.
class KubeBerth {
 public:
  KubeBerth() {
    auto pipeline = policy::BuildDefaultRegistry().Build({}, model.resources());
    REQUIRE(pipeline.ok());
    extender::ServiceOptions options;
    options.mode = extender::Mode::kKubernetes;
    service = std::make_unique<Service>(options, &model, *std::move(pipeline), &binder, &clock);
    service->SetReady(true);
  }
  void Load(const std::vector<Json>& objects) {
    absl::StatusOr<size_t> n = service->LoadList(List(objects).dump(), "test list");
    INFO(n.status().ToString());
    REQUIRE(n.ok());
    CHECK(*n == objects.size());
  }
  // The watcher's path: decode watch events, apply them to the model.
  core::ApplyStats Watch(const Json& events) {
    absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(events.dump());
    REQUIRE(doc.ok());
    auto decoded = extender::DecodeWatchEvents(doc->root(), model.resources());
    INFO(decoded.status().ToString());
    REQUIRE(decoded.ok());
    return model.Apply(*decoded);
  }
  Json Filter(const Json& args) { return Ok(service->Filter(args.dump())); }
  std::string Bind(const MakePod& pod, const std::string& node) {
    const Json r = Ok(service->Bind(BindArgs(pod, node).dump()));
    REQUIRE(r["Error"].is_string());
    return r["Error"];
  }

  core::FakeClock clock;
  core::ClusterModel model{&clock};
  FakeBinder binder;
  std::unique_ptr<Service> service;
};

// ---- verdicts --------------------------------------------------------------------------------

TEST_CASE("service: a pod too big for a node is rejected there with a reason and fits elsewhere") {
  Harness h;
  const MakeNode small = MakeNode("small").Cpu("8").Memory("32Gi").Gpu(2);
  const MakeNode big = MakeNode("big").Cpu("64").Memory("256Gi").Gpu(8);
  const MakeNode busy = MakeNode("busy").Cpu("64").Memory("256Gi").Gpu(8);
  h.Apply(Json::array({Event("ADDED", small.Obj()), Event("ADDED", big.Obj()), Event("ADDED", busy.Obj()),
                       Event("ADDED", MakePod("hog").Gpu(6).Node("busy").Phase("Running").Obj())}));
  const MakePod pod = MakePod("train").Cpu("1").Gpu(4);

  SECTION("name mode") {
    std::vector<policy::NodeVerdict> v;
    const Json r = h.Filter(ArgsNames(pod.Obj(), {"small", "big", "busy"}), &v);
    CHECK(r["NodeNames"] == Json::array({"big"}));
    CHECK(r["Nodes"].is_null());
    // 4 GPUs > small's 2 allocatable: evicting pods cannot help.
    CHECK(Keys(r["FailedAndUnresolvableNodes"]) == std::set<std::string>{"small"});
    CHECK(r["FailedAndUnresolvableNodes"]["small"] == "berth: node too small for the pod");
    // busy has 8 but only 2 free: preemption may help.
    CHECK(Keys(r["FailedNodes"]) == std::set<std::string>{"busy"});
    CHECK(r["FailedNodes"]["busy"] == "berth: insufficient free resources");
    CHECK(r["Error"] == "");
    // The verdicts behind the answer name the resource.
    REQUIRE(v.size() == 3);
    CHECK(Contains(v[0].message, "nvidia.com/gpu"));
    CHECK(Contains(v[2].message, "insufficient nvidia.com/gpu"));
  }
  SECTION("full-object mode") {
    const Json r = h.Filter(ArgsNodes(pod.Obj(), {small.Obj(), big.Obj(), busy.Obj()}));
    REQUIRE(r["Nodes"]["items"].size() == 1);
    CHECK(r["Nodes"]["items"][0] == big.Obj());
    CHECK(r["NodeNames"].is_null());
    CHECK(Keys(r["FailedAndUnresolvableNodes"]) == std::set<std::string>{"small"});
    CHECK(Keys(r["FailedNodes"]) == std::set<std::string>{"busy"});
  }
  SECTION("memory above allocatable is named") {
    std::vector<policy::NodeVerdict> v;
    const Json r = h.Filter(ArgsNames(MakePod("mem").Memory("48Gi").Obj(), {"small", "big"}), &v);
    CHECK(r["NodeNames"] == Json::array({"big"}));
    CHECK(r["FailedAndUnresolvableNodes"]["small"] == "berth: node too small for the pod");
    CHECK(r["FailedNodes"] == Json::object());
    REQUIRE(v.size() == 2);
    CHECK(Contains(v[0].message, "memory"));
  }
}

TEST_CASE("decoded pod cache: a value that begins with the remembered object is that object") {
  core::FakeClock clock;
  core::ClusterModel model{&clock};
  core::ClusterModel other{&clock};
  extender::DecodedPodCache cache;
  core::Pod pod;
  pod.name = "p";
  CHECK_FALSE(cache.Find(R"({"a":1})", model.resources()).has_value());
  cache.Remember(R"({"a":1})", model.resources(), pod);
  const std::optional<core::Pod> hit = cache.Find(R"({"a":1},"NodeNames":["n"]})", model.resources());
  REQUIRE(hit.has_value());
  CHECK(hit->name == "p");
  CHECK_FALSE(cache.Find(R"({"a":12},"NodeNames":["n"]})", model.resources()).has_value());
  CHECK_FALSE(cache.Find(R"({"a":1)", model.resources()).has_value());
  CHECK_FALSE(cache.Find("", model.resources()).has_value());
  CHECK_FALSE(cache.Find(R"({"a":1})", other.resources()).has_value());
  CHECK(cache.hits() == 1);
}

TEST_CASE("service: a verb takes the previous verb's pod only when the pod's text is the same") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("small").Cpu("8").Memory("32Gi").Obj()),
                       Event("ADDED", MakeNode("big").Cpu("64").Memory("256Gi").Obj())}));
  // As kube-scheduler writes it: the pod first, then the names.
  auto body = [](const Json& pod, std::string_view names = R"(["small","big"])") {
    return StrCat(R"({"Pod":)", pod.dump(), R"(,"NodeNames":)", names, "}");
  };
  auto reused = [&] {
    const std::string text = h.service().Metrics().body;
    const std::string key = "\nberth_verb_pods_reused_total ";
    const size_t at = text.find(key);
    REQUIRE(at != std::string::npos);
    return std::stoll(text.substr(at + key.size()));
  };
  auto passed = [&](const Reply& r) {
    const Json j = Ok(r);
    REQUIRE(j["NodeNames"].is_array());
    return j["NodeNames"].get<std::vector<std::string>>();
  };
  const MakePod fits_both = MakePod("train").Uid("u-1").Cpu("4");
  const MakePod big_only = MakePod("train").Uid("u-1").Cpu("16");
  const int64_t before = reused();

  // kube-scheduler's prioritize repeats its filter's pod: decoded once.
  CHECK(passed(h.service().Filter(body(fits_both.Obj()))) == std::vector<std::string>{"small", "big"});
  const Json scores = Ok(h.service().Prioritize(body(fits_both.Obj())));
  REQUIRE(scores.is_array());
  CHECK(scores.size() == 2);
  CHECK(reused() == before + 1);

  // The same pod (same uid and name) with another request is decoded again, not taken.
  CHECK(passed(h.service().Filter(body(big_only.Obj()))) == std::vector<std::string>{"big"});
  CHECK(reused() == before + 1);
  CHECK(passed(h.service().Filter(body(fits_both.Obj()))) == std::vector<std::string>{"small", "big"});

  // Two members named "pod" (in any case): the text found first is not necessarily the one
  // decoded, so neither is remembered by its text.
  const std::string twice = StrCat(R"({"pod":)", fits_both.Obj().dump(), R"(,"Pod":)",
                                   big_only.Obj().dump(), R"(,"NodeNames":["small","big"]})");
  CHECK(passed(h.service().Filter(twice)) == std::vector<std::string>{"big"});
  const std::string first_only = StrCat(R"({"pod":)", fits_both.Obj().dump(), R"(,"NodeNames":["small","big"]})");
  // This one is the pod the filter before `twice` remembered (the key's case is not part of
  // the pod's text): taken, and the answer is that pod's.
  CHECK(passed(h.service().Filter(first_only)) == std::vector<std::string>{"small", "big"});
  CHECK(reused() == before + 2);

  // A resource name the table learns after a decode changes what a decode gives: a pod asking
  // for it fits nowhere while no node has it, and fits once one does.
  const MakePod wants_fpga = MakePod("fpga").Uid("u-2").Cpu("1").Request("example.com/fpga", "1");
  CHECK(passed(h.service().Filter(body(wants_fpga.Obj()))).empty());
  h.Apply(Json::array({Event("ADDED", MakeNode("fpga-node").Cpu("8").Memory("32Gi")
                                          .Allocatable("example.com/fpga", "2").Obj())}));
  CHECK(passed(h.service().Filter(body(wants_fpga.Obj(), R"(["small","fpga-node"])"))) ==
        std::vector<std::string>{"fpga-node"});
}

// ---- the bind ledger -------------------------------------------------------------------------

TEST_CASE("service: after Bind the next filter sees the room held before any confirmation") {
  KubeBerth k;
  const MakePod a = MakePod("a").Cpu("2").Gpu(2);
  const MakePod b = MakePod("b").Cpu("1").Gpu(3);
  // c is older than b: it goes first in their queue, so b (next to start) keeps no room from it.
  const MakePod c = MakePod("c").Cpu("1").Gpu(2).Created("2025-12-31T00:00:00Z");
  k.Load({MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj(), a.Obj(), b.Obj(), c.Obj()});

  CHECK(k.Filter(ArgsNames(a.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));
  CHECK(k.Bind(a, "gpu-a") == "");
  REQUIRE(k.binder.calls.size() == 1);
  CHECK(k.binder.calls[0] == std::make_pair(std::string("default/a"), std::string("gpu-a")));
  {
    auto view = k.model.Read();
    const core::LedgerEntry* e = view->FindBind("uid-a");
    REQUIRE(e != nullptr);
    CHECK(e->state == core::BindState::kBound);  // bound, the watch has not confirmed it
  }
  Json n = DebugNode(*k.service, "gpu-a");
  CHECK(n["reserved"]["nvidia.com/gpu"] == "2");
  CHECK(n["reserved"]["cpu"] == "2");
  CHECK_FALSE(n["used"].contains("nvidia.com/gpu"));
  CHECK(n["free"]["nvidia.com/gpu"] == "2");
  CHECK(n["free"]["cpu"] == "14");

  // 3 GPUs no longer fit (4 allocatable, 2 held): FailedNodes, as preemption could help.
  Json r = k.Filter(ArgsNames(b.Obj(), {"gpu-a"}));
  CHECK(r["NodeNames"] == Json::array());
  CHECK(r["FailedNodes"]["gpu-a"] == "berth: insufficient free resources");
  // Exactly the remaining 2 fit.
  CHECK(k.Filter(ArgsNames(c.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));

  // The pod watch confirms the binding: the ledger hands over to the pod's own accounting,
  // the room is not counted twice.
  const core::ApplyStats stats =
      k.Watch(Event("MODIFIED", MakePod("a").Cpu("2").Gpu(2).Node("gpu-a").Phase("Running").Obj()));
  CHECK(stats.binds_confirmed == 1);
  n = DebugNode(*k.service, "gpu-a");
  CHECK(n["used"]["nvidia.com/gpu"] == "2");
  CHECK(n["reserved"] == Json::object());
  CHECK(n["free"]["nvidia.com/gpu"] == "2");
  CHECK(n["free"]["cpu"] == "14");
  CHECK(n["pods"] == 1);
  CHECK(k.model.Read()->binds_in_flight() == 0);
  r = k.Filter(ArgsNames(b.Obj(), {"gpu-a"}));
  CHECK(Keys(r["FailedNodes"]) == std::set<std::string>{"gpu-a"});
  CHECK(k.Filter(ArgsNames(c.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));

  // The same event again (a resync) changes nothing either.
  CHECK(k.Watch(Event("MODIFIED", MakePod("a").Cpu("2").Gpu(2).Node("gpu-a").Phase("Running").Obj()))
            .binds_confirmed == 0);
  CHECK(DebugNode(*k.service, "gpu-a")["free"]["nvidia.com/gpu"] == "2");
}

TEST_CASE("service: a bind that no longer fits gets an Error and changes nothing") {
  SECTION("Kubernetes mode") {
    KubeBerth k;
    const MakePod a = MakePod("a").Gpu(3);
    const MakePod b = MakePod("b").Gpu(3);
    k.Load({MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj(), a.Obj(), b.Obj()});
    // Both filters pass on the empty node, then both race to bind.
    CHECK(k.Filter(ArgsNames(a.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));
    CHECK(k.Filter(ArgsNames(b.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));
    CHECK(k.Bind(a, "gpu-a") == "");
    const Observed before = Observe(*k.service);
    const std::string error = k.Bind(b, "gpu-a");
    CHECK(Contains(error, "gpu-a"));
    CHECK(Contains(error, "nvidia.com/gpu"));
    CheckUnchanged(before, Observe(*k.service));
    CHECK(k.binder.calls.size() == 1);  // the binder never saw b
    CHECK(k.model.Read()->FindBind("uid-b") == nullptr);
    CHECK(DebugNode(*k.service, "gpu-a")["free"]["nvidia.com/gpu"] == "1");
  }
  SECTION("standalone mode") {
    Harness h;
    const MakePod a = MakePod("a").Gpu(3);
    const MakePod b = MakePod("b").Gpu(3);
    h.Apply(Event("ADDED", MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj()));
    CHECK(h.Filter(ArgsNames(a.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));
    CHECK(h.Filter(ArgsNames(b.Obj(), {"gpu-a"}))["NodeNames"] == Json::array({"gpu-a"}));
    CHECK(BindError(h, a, "gpu-a") == "");
    const Observed before = Observe(h.service());
    CHECK(Contains(BindError(h, b, "gpu-a"), "nvidia.com/gpu"));
    CheckUnchanged(before, Observe(h.service()));
  }
}

TEST_CASE("service: bind is idempotent when repeated") {
  SECTION("Kubernetes mode") {
    KubeBerth k;
    const MakePod a = MakePod("a").Cpu("2").Gpu(2);
    k.Load({MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj(),
            MakeNode("gpu-b").Cpu("16").Memory("64Gi").Gpu(4).Obj(), a.Obj()});
    CHECK(k.Bind(a, "gpu-a") == "");
    const Observed before = Observe(*k.service);
    CHECK(k.Bind(a, "gpu-a") == "");  // kube-scheduler retrying after a timeout
    CheckUnchanged(before, Observe(*k.service));
    CHECK(k.binder.calls.size() == 1);
    CHECK(DebugNode(*k.service, "gpu-a")["reserved"]["nvidia.com/gpu"] == "2");
    // Still in flight: a bind of the same pod to another node is refused.
    CHECK(Contains(k.Bind(a, "gpu-b"), "already being bound to node gpu-a"));

    k.Watch(Event("MODIFIED", MakePod("a").Cpu("2").Gpu(2).Node("gpu-a").Phase("Running").Obj()));
    const Observed confirmed = Observe(*k.service);
    CHECK(k.Bind(a, "gpu-a") == "");
    CheckUnchanged(confirmed, Observe(*k.service));
    CHECK(k.binder.calls.size() == 1);
    CHECK(Contains(k.Bind(a, "gpu-b"), "already bound to node gpu-a"));
    CheckUnchanged(confirmed, Observe(*k.service));
  }
  SECTION("standalone mode") {
    Harness h;
    const MakePod a = MakePod("a").Cpu("2").Gpu(2);
    h.Apply(Event("ADDED", MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj()));
    h.Filter(ArgsNames(a.Obj(), {"gpu-a"}));
    CHECK(BindError(h, a, "gpu-a") == "");
    const Observed before = Observe(h.service());
    CHECK(BindError(h, a, "gpu-a") == "");
    CheckUnchanged(before, Observe(h.service()));
    const Json n = DebugNode(h.service(), "gpu-a");
    CHECK(n["used"]["nvidia.com/gpu"] == "2");
    CHECK(n["reserved"] == Json::object());
  }
}

TEST_CASE("service: a failing binder makes Bind answer Error and releases the held room") {
  KubeBerth k;
  const MakePod a = MakePod("a").Cpu("2").Gpu(2);
  k.Load({MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj(), a.Obj()});
  k.binder.result = absl::UnavailableError("POST pods/a/binding: connection refused");
  const std::string error = k.Bind(a, "gpu-a");
  CHECK(Contains(error, "connection refused"));
  CHECK(Contains(error, "default/a"));
  CHECK(Contains(error, "gpu-a"));
  CHECK(k.binder.calls.size() == 1);
  Json n = DebugNode(*k.service, "gpu-a");
  CHECK(n["reserved"] == Json::object());
  CHECK(n["free"]["nvidia.com/gpu"] == "4");
  CHECK(k.model.Read()->FindBind("uid-a") == nullptr);
  // The room is really free: another pod's filter passes and the retry succeeds.
  CHECK(k.Filter(ArgsNames(MakePod("big").Gpu(4).Obj(), {"gpu-a"}))["NodeNames"] ==
        Json::array({"gpu-a"}));
  k.binder.result = absl::OkStatus();
  CHECK(k.Bind(a, "gpu-a") == "");
  CHECK(DebugNode(*k.service, "gpu-a")["reserved"]["nvidia.com/gpu"] == "2");
}

TEST_CASE("service: Bind of an unknown pod or node answers an Error with HTTP 200") {
  KubeBerth k;
  const MakePod a = MakePod("a").Gpu(1);
  k.Load({MakeNode("gpu-a").Gpu(4).Obj(), a.Obj()});
  const Observed before = Observe(*k.service);
  CHECK(Contains(k.Bind(MakePod("ghost"), "gpu-a"), "default/ghost is not known to berth"));
  CHECK(Contains(k.Bind(a, "gpu-z"), "node gpu-z is not known to berth"));
  // A uid that belongs to another pod.
  CHECK(Contains(k.Bind(MakePod("impostor").Uid("uid-a"), "gpu-a"), "belongs to default/a"));
  CheckUnchanged(before, Observe(*k.service));
  CHECK(k.binder.calls.empty());
}

// ---- POST /v1/events -------------------------------------------------------------------------

TEST_CASE("service: POST /v1/events changes /debug/nodes as expected") {
  Harness h;
  Service& s = h.service();
  Json reply = h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Gpu(4).Obj()));
  CHECK(reply["applied"] == 1);
  CHECK(reply["nodesUpserted"] == 1);
  Json n = DebugNode(s, "n1");
  CHECK(n["allocatable"]["cpu"] == "8");
  CHECK(n["free"]["cpu"] == "8");
  CHECK(n["free"]["nvidia.com/gpu"] == "4");
  CHECK(n["pods"] == 0);

  // A running pod bound to n1, a pending pod, a pod bound but not running yet.
  reply = h.Apply(Json::array(
      {Event("ADDED", MakePod("run").Cpu("2").Memory("4Gi").Gpu(1).Node("n1").Phase("Running").Obj()),
       Event("ADDED", MakePod("wait").Cpu("1").Obj()),
       Event("ADDED", MakePod("bound").Cpu("1").Node("n1").Phase("Pending").Obj())}));
  CHECK(reply["applied"] == 3);
  CHECK(reply["podsUpserted"] == 3);
  n = DebugNode(s, "n1");
  CHECK(n["used"]["cpu"] == "3");
  CHECK(n["used"]["memory"] == "4Gi");
  CHECK(n["used"]["nvidia.com/gpu"] == "1");
  CHECK(n["free"]["cpu"] == "5");
  CHECK(n["free"]["memory"] == "28Gi");
  CHECK(n["free"]["nvidia.com/gpu"] == "3");
  CHECK(n["pods"] == 2);

  // The running pod succeeds: its room is free again.
  h.Apply(Event("MODIFIED", MakePod("run").Cpu("2").Memory("4Gi").Gpu(1).Node("n1").Phase("Succeeded").Obj()));
  n = DebugNode(s, "n1");
  CHECK(n["used"]["cpu"] == "1");
  CHECK_FALSE(n["used"].contains("nvidia.com/gpu"));
  CHECK(n["free"]["nvidia.com/gpu"] == "4");
  CHECK(n["pods"] == 1);

  // The bound pod fails.
  h.Apply(Event("MODIFIED", MakePod("bound").Cpu("1").Node("n1").Phase("Failed").Obj()));
  n = DebugNode(s, "n1");
  CHECK(n["used"] == Json::object());
  CHECK(n["free"]["cpu"] == "8");
  CHECK(n["pods"] == 0);

  // Added, then deleted.
  h.Apply(Event("ADDED", MakePod("short").Cpu("4").Node("n1").Phase("Running").Obj()));
  CHECK(DebugNode(s, "n1")["used"]["cpu"] == "4");
  reply = h.Apply(Event("DELETED", MakePod("short").Cpu("4").Node("n1").Phase("Running").Obj()));
  CHECK(reply["podsDeleted"] == 1);
  CHECK(DebugNode(s, "n1")["free"]["cpu"] == "8");
  // Deleting it again is harmless.
  CHECK(h.Apply(Event("DELETED", MakePod("short").Obj()))["podsDeleted"] == 0);

  // A node update (resized) keeps the usage of its pods.
  h.Apply(Event("ADDED", MakePod("big").Cpu("6").Node("n1").Phase("Running").Obj()));
  h.Apply(Event("MODIFIED", MakeNode("n1").Cpu("16").Memory("32Gi").Gpu(4).Obj()));
  n = DebugNode(s, "n1");
  CHECK(n["allocatable"]["cpu"] == "16");
  CHECK(n["free"]["cpu"] == "10");

  // The node goes away.
  reply = h.Apply(Event("DELETED", MakeNode("n1").Obj()));
  CHECK(reply["nodesDeleted"] == 1);
  CHECK_FALSE(HasNode(s, "n1"));
  // Its pods are still known; they count again if the node comes back.
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Obj()));
  CHECK(DebugNode(s, "n1")["free"]["cpu"] == "2");
}

TEST_CASE("service: Kubernetes mode answers 403 to POST /v1/events") {
  KubeBerth k;
  k.Load({MakeNode("n1").Cpu("8").Obj()});
  const Observed before = Observe(*k.service);
  const Reply r = k.service->Events(Event("ADDED", MakeNode("n2").Cpu("8").Obj()).dump());
  CHECK(r.status == 403);
  const Json body = ParseReply(r);
  CHECK(Keys(body) == std::set<std::string>{"error"});
  CHECK(Contains(body["error"].get<std::string>(), "Kubernetes mode"));
  CheckUnchanged(before, Observe(*k.service));
  // Even an undecodable body is refused as forbidden, not parsed.
  CHECK(k.service->Events("{").status == 403);
}

// ---- snapshot round trip ---------------------------------------------------------------------

std::vector<Json> RichCluster() {
  Json terminating = MakePod("leaving").Cpu("1").Node("n1").Phase("Running").Obj();
  terminating["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z";
  Json nominated = MakePod("preemptor").Gpu(2).Priority(100000).Obj();
  nominated["spec"]["priorityClassName"] = "berth-production";
  nominated["status"]["nominatedNodeName"] = "n1";
  return {MakeNode("n1")
              .Cpu("64")
              .Memory("512Gi")
              .Gpu(8)
              .Allocatable("ephemeral-storage", "800Gi")
              .Topology("zone-a", "spine-1", "leaf-1")
              .Label("berth.io/node-pool", "gpu-large")
              .Taint("nvidia.com/gpu", "present", "NoSchedule")
              .Obj(),
          MakeNode("n2").Cpu("32").Memory("128Gi").Unschedulable().Taint(
              "node.kubernetes.io/unschedulable", "", "NoSchedule").Obj(),
          MakeNode("n3").Cpu("16").Memory("64Gi").Obj(),
          MakePod("train-0")
              .Namespace("ml")
              .Uid("1d484bd1-959f-4a4f-943a-209591b647e1")
              .Cpu("8")
              .Memory("64Gi")
              .Gpu(4)
              .Priority(1000)
              .Node("n1")
              .Phase("Running")
              .Label("berth.io/queue", "research")
              .Label("scheduling.x-k8s.io/pod-group", "train")
              .Label("app", "trainer")
              .Annotation("berth.io/pool", "gpu-large")
              .Obj(),
          MakePod("sidecar").Cpu("1").InitContainer("proxy", "cpu", "500m", true).Overhead("memory", "64Mi")
              .Node("n3").Phase("Running").Obj(),
          MakePod("web").Scheduler("default-scheduler").Cpu("4").Node("n2").Phase("Running").Obj(),
          MakePod("done").Cpu("2").Node("n1").Phase("Succeeded").Obj(),
          MakePod("waiting").Cpu("2").Memory("1Gi").Obj(),
          terminating,
          nominated};
}

Json ItemsOf(Service& s) { return Ok(s.DebugSnapshot(false))["items"]; }

TEST_CASE("service: /debug/snapshot loads back into a fresh service unchanged") {
  Harness first;
  first.Apply(Json::array());  // an empty batch is fine
  std::vector<Json> events;
  for (const Json& o : RichCluster()) events.push_back(Event("ADDED", o));
  first.Apply(events);
  const Json snap1 = Ok(first.service().DebugSnapshot(false));
  CHECK(snap1["kind"] == "List");
  CHECK(snap1["apiVersion"] == "v1");
  REQUIRE(snap1["items"].size() == 10);

  auto round_trip = [](Harness& from) {
    const std::string body = from.service().DebugSnapshot(false).body;
    Harness to;
    absl::StatusOr<size_t> loaded = to.service().LoadList(body, "snapshot");
    INFO(loaded.status().ToString());
    REQUIRE(loaded.ok());
    const Json a = ParseReply(from.service().DebugSnapshot(false));
    const Json b = ParseReply(to.service().DebugSnapshot(false));
    CHECK(*loaded == a["items"].size());
    // metadata.resourceVersion is the model generation, which counts events, not objects.
    CHECK(a["items"] == b["items"]);
    CHECK(a["kind"] == b["kind"]);
    // What the model computes from them agrees too.
    CHECK(Ok(from.service().DebugNodes(false))["nodes"] == Ok(to.service().DebugNodes(false))["nodes"]);
    CHECK(Ok(from.service().DebugPods(false, true))["pods"] ==
          Ok(to.service().DebugPods(false, true))["pods"]);
    // And a second round trip is a fixed point, byte for byte.
    Harness third;
    REQUIRE(third.service().LoadList(to.service().DebugSnapshot(false).body, "snapshot 2").ok());
    CHECK(third.service().DebugSnapshot(false).body == to.service().DebugSnapshot(false).body);
  };
  round_trip(first);

  // Hand-checked: the snapshot carries what berth keeps.
  const Json& items = snap1["items"];
  CHECK(items[0]["metadata"]["name"] == "n1");
  CHECK(items[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8");
  CHECK(items[0]["spec"]["taints"][0]["key"] == "nvidia.com/gpu");
  CHECK(items[1]["spec"]["unschedulable"] == true);

  // After binds: the pending pods get placed, and the snapshot still round-trips.
  const MakePod waiting = MakePod("waiting").Cpu("2").Memory("1Gi");
  CHECK(first.Filter(ArgsNames(waiting.Obj(), {"n3"}))["NodeNames"] == Json::array({"n3"}));
  CHECK(BindError(first, waiting, "n3") == "");
  const MakePod fresh = MakePod("fresh").Namespace("ml").Cpu("1").Gpu(1);
  CHECK(first.Filter(ArgsNodes(fresh.Obj(), {MakeNode("n4").Cpu("8").Memory("32Gi").Gpu(2).Obj()}))
            ["Nodes"]["items"].size() == 1);
  CHECK(BindError(first, fresh, "n4") == "");
  const Json snap2 = Ok(first.service().DebugSnapshot(false));
  REQUIRE(snap2["items"].size() == 12);
  bool saw_waiting = false;
  for (const Json& item : snap2["items"]) {
    if (item["metadata"]["name"] == "waiting") {
      saw_waiting = true;
      CHECK(item["spec"]["nodeName"] == "n3");
      CHECK(item["status"]["phase"] == "Running");
    }
  }
  CHECK(saw_waiting);
  round_trip(first);
}

// ---- the embedded demo cluster ---------------------------------------------------------------

TEST_CASE("service: the embedded demo cluster loads with pools of GPU and CPU nodes and running pods") {
  Harness h;
  absl::StatusOr<size_t> loaded = h.service().LoadList(extender::kDemoClusterJson, "demo cluster");
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  const Json items = ItemsOf(h.service());
  CHECK(*loaded == items.size());

  std::set<std::string> pools;
  int gpu_nodes = 0, nodes = 0, running = 0, podgroups = 0, queues = 0;
  std::set<std::string> used_nodes;
  for (const Json& item : items) {
    if (item["kind"] == "Node") {
      ++nodes;
      const Json& labels = item["metadata"]["labels"];
      if (labels.contains("berth.io/node-pool")) pools.insert(labels["berth.io/node-pool"].get<std::string>());
      if (item["status"]["allocatable"].contains("nvidia.com/gpu")) {
        ++gpu_nodes;
        INFO("GPU node " << item["metadata"]["name"]);
        CHECK(labels.contains("topology.kubernetes.io/zone"));
        CHECK(labels.contains("berth.io/spine"));
        CHECK(labels.contains("berth.io/leaf"));
      }
    } else if (item["kind"] == "PodGroup") {
      ++podgroups;
    } else if (item["kind"] == "Queue") {
      ++queues;
    } else {
      REQUIRE(item["kind"] == "Pod");
      if (item["status"]["phase"] == "Running" && item["spec"].contains("nodeName")) {
        ++running;
        used_nodes.insert(item["spec"]["nodeName"].get<std::string>());
      }
    }
  }
  CHECK(pools.size() >= 3);
  CHECK(nodes >= 6);
  CHECK(gpu_nodes >= 2);
  CHECK(running >= 3);
  CHECK(podgroups >= 1);  // the running gang has its PodGroup
  CHECK(queues >= 3);     // every queue its pods name exists
  // Running pods take room on their nodes.
  for (const std::string& node : used_nodes) {
    INFO("node " << node);
    CHECK_FALSE(DebugNode(h.service(), node)["used"].empty());
  }
  // /debug/nodes shows a full topology path for every GPU node.
  const Json debug_nodes = Ok(h.service().DebugNodes(false));
  for (const Json& n : debug_nodes["nodes"]) {
    if (!n["allocatable"].contains("nvidia.com/gpu")) continue;
    for (const Json& level : n["topology"]) CHECK(level != "-");
  }
}

// ---- operations endpoints --------------------------------------------------------------------

TEST_CASE("service: every /debug endpoint answers valid JSON and a text table with ?format=text") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Gpu(4)
                                          .Topology("z1", "s1", "l1").Obj()),
                       Event("ADDED", MakeNode("n2").Cpu("4").Memory("16Gi").Obj()),
                       Event("ADDED", MakePod("p1").Cpu("1").Gpu(1).Node("n1").Phase("Running").Obj()),
                       Event("ADDED", MakePod("p2").Cpu("1").Obj()),
                       Event("ADDED", MakePod("web").Scheduler("default-scheduler").Cpu("1")
                                          .Node("n2").Phase("Running").Obj())}));
  Service& s = h.service();

  SECTION("nodes") {
    const Json j = Ok(s.DebugNodes(false));
    REQUIRE(j["nodes"].size() == 2);
    CHECK(j["nodes"][0]["name"] == "n1");
    CHECK(j["nodes"][0]["topology"] == Json::array({"z1", "s1", "l1"}));
    CHECK(j["nodes"][1]["topology"] == Json::array({"-", "-", "-"}));
    for (const char* key : {"name", "pool", "topology", "allocatable", "used", "reserved", "free", "pods"}) {
      CHECK(j["nodes"][0].contains(key));
    }
    CHECK(j["generation"].is_number_integer());
    const Reply t = s.DebugNodes(true);
    CHECK(t.status == 200);
    CHECK(t.content_type.rfind("text/plain", 0) == 0);
    const std::vector<std::string> lines = Lines(t.body);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].rfind("NODE", 0) == 0);
    for (const char* col : {"POOL", "TOPOLOGY", "CPU FREE/ALLOC", "GPU FREE/ALLOC", "IN-FLIGHT"}) {
      CHECK(Contains(lines[0], col));
    }
    CHECK(lines[1].rfind("n1 ", 0) == 0);
    CHECK(lines[2].rfind("n2 ", 0) == 0);
    // Columns are aligned: each row's topology starts under the header's.
    const size_t col = lines[0].find("TOPOLOGY");
    CHECK(lines[1].substr(col, 8) == "z1/s1/l1");
    CHECK(lines[2].substr(col, 5) == "-/-/-");
    CHECK(Contains(lines[1], "7/8"));  // cpu free/allocatable
    CHECK(Contains(lines[1], "3/4"));  // gpus
  }
  SECTION("pods") {
    const Json berth_pods = Ok(s.DebugPods(false, false));
    CHECK(berth_pods["pods"].size() == 2);  // only berth-scheduler's
    const Json all = Ok(s.DebugPods(false, true));
    REQUIRE(all["pods"].size() == 3);
    CHECK(all["pods"][0]["name"] == "p1");
    CHECK(all["pods"][0]["node"] == "n1");
    CHECK(all["pods"][0]["phase"] == "Running");
    CHECK(all["pods"][0]["request"]["nvidia.com/gpu"] == "1");
    const Reply t = s.DebugPods(true, false);
    CHECK(t.content_type.rfind("text/plain", 0) == 0);
    const std::vector<std::string> lines = Lines(t.body);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].rfind("NAMESPACE", 0) == 0);
    for (const char* col : {"NAME", "PHASE", "NODE", "QUEUE", "PRIORITY", "REQUEST"}) {
      CHECK(Contains(lines[0], col));
    }
    CHECK(lines[1].rfind("default", 0) == 0);
    const size_t name_col = lines[0].find("NAME", 1);
    CHECK(lines[1].substr(name_col, 2) == "p1");
    CHECK(lines[2].substr(name_col, 2) == "p2");
    CHECK(Lines(s.DebugPods(true, true).body).size() == 4);
  }
  SECTION("snapshot") {
    const Json j = Ok(s.DebugSnapshot(false));
    CHECK(j["items"].size() == 5);
    const Reply t = s.DebugSnapshot(true);
    CHECK(t.content_type.rfind("text/plain", 0) == 0);
    const std::vector<std::string> lines = Lines(t.body);
    REQUIRE(lines.size() == 6);
    CHECK(lines[0].rfind("KIND", 0) == 0);
    for (const char* col : {"NAMESPACE", "NAME", "NODE", "PHASE"}) CHECK(Contains(lines[0], col));
    int node_rows = 0, pod_rows = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      if (lines[i].rfind("Node ", 0) == 0) ++node_rows;
      if (lines[i].rfind("Pod ", 0) == 0) ++pod_rows;
    }
    CHECK(node_rows == 2);
    CHECK(pod_rows == 3);
  }
  SECTION("version, healthz, readyz") {
    const Json v = Ok(s.Version(false));
    CHECK(Keys(v) == std::set<std::string>{"version", "gitCommit", "buildType", "mode"});
    CHECK(v["mode"] == "standalone");
    const Reply vt = s.Version(true);
    CHECK(vt.status == 200);
    CHECK(vt.content_type.rfind("text/plain", 0) == 0);
    CHECK(vt.body.rfind("berth " + v["version"].get<std::string>(), 0) == 0);
    CHECK(Ok(s.Healthz()) == Json({{"status", "ok"}}));
    CHECK(Ok(s.Readyz()) == Json({{"ready", true}}));
    s.SetReady(false);
    const Reply not_ready = s.Readyz();
    CHECK(not_ready.status == 503);
    CHECK(Keys(ParseReply(not_ready)) == std::set<std::string>{"error"});
    CHECK(Ok(s.Healthz()) == Json({{"status", "ok"}}));  // alive though not ready
  }
}

// ---- bad input -------------------------------------------------------------------------------

enum class Endpoint { kFilter, kPrioritize, kBind, kPreempt, kEvents };

struct BadCase {
  std::string name;
  Endpoint endpoint;
  std::string body;
  std::string expect;  // part of the error message
};

Reply Call(Service& s, Endpoint e, const std::string& body) {
  switch (e) {
    case Endpoint::kFilter: return s.Filter(body);
    case Endpoint::kPrioritize: return s.Prioritize(body);
    case Endpoint::kBind: return s.Bind(body);
    case Endpoint::kPreempt: return s.Preempt(body);
    case Endpoint::kEvents: return s.Events(body);
  }
  return Reply{};
}

std::string Dump(const Json& j) { return j.dump(); }

std::vector<BadCase> BadCases() {
  const MakePod pod = MakePod("p").Cpu("1").Gpu(1);
  const std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');  // 2 MiB
  const std::string long_name(10000, 'x');
  const std::string bad_utf8_pod =
      R"({"Pod": {"metadata": {"name": "bad-)" + std::string("\xff\xfe\xc0\xaf") +
      R"("}}, "Nodes": null, "NodeNames": ["n1"]})";

  auto with = [&](const std::string& path_key, const Json& value) {
    Json j = ArgsNames(pod.Obj(), {"n1", "n2"});
    j[path_key] = value;
    return Dump(j);
  };
  auto pod_with = [&](auto&& edit) {
    Json p = pod.Obj();
    edit(p);
    return Dump(ArgsNames(p, {"n1", "n2"}));
  };
  auto event_pod = [&](auto&& edit) {
    Json p = MakePod("e").Cpu("1").Obj();
    edit(p);
    return Dump(Event("ADDED", p));
  };
  Json bad_second_node = ArgsNodes(pod.Obj(), {MakeNode("fresh-1").Cpu("8").Obj(),
                                               MakeNode("fresh-2").Cpu("8").Obj()});
  bad_second_node["Nodes"]["items"][1]["status"]["capacity"]["cpu"] = "eight";

  std::vector<BadCase> cases = {
      // filter
      {"malformed JSON", Endpoint::kFilter, R"({"Pod": {"metadata": )", "invalid JSON at line 1, column"},
      {"malformed JSON over lines", Endpoint::kFilter, "{\n\"Pod\": {,\n}}", "line 2, column 9"},
      {"empty body", Endpoint::kFilter, "", "empty body"},
      {"blank body", Endpoint::kFilter, " \n", "empty body"},
      {"array instead of object", Endpoint::kFilter, "[1, 2]",
       "ExtenderArgs: expected an object, got an array"},
      {"NodeNames as a string", Endpoint::kFilter, with("NodeNames", "n1"),
       "NodeNames: expected an array of node names, got a string"},
      {"NodeNames with a number", Endpoint::kFilter, with("NodeNames", Json::array({"n1", 7})),
       "NodeNames[1]: expected a string, got a number"},
      {"Nodes as an array", Endpoint::kFilter,
       Dump({{"Pod", pod.Obj()}, {"Nodes", Json::array()}, {"NodeNames", nullptr}}),
       "Nodes: expected an object, got an array"},
      {"neither Nodes nor NodeNames", Endpoint::kFilter,
       Dump({{"Pod", pod.Obj()}, {"Nodes", nullptr}, {"NodeNames", nullptr}}), "NodeNames"},
      {"Pod as a number", Endpoint::kFilter, with("Pod", 5), "Pod: expected an object, got a number"},
      {"missing Pod", Endpoint::kFilter, Dump({{"NodeNames", {"n1"}}}), "Pod: required"},
      {"null Pod", Endpoint::kFilter, Dump({{"Pod", nullptr}, {"NodeNames", {"n1"}}}), "Pod: required"},
      {"priority as a string", Endpoint::kFilter, pod_with([](Json& p) { p["spec"]["priority"] = "high"; }),
       "Pod.spec.priority: expected an integer, got a string"},
      {"quantity 2 GPUs", Endpoint::kFilter,
       pod_with([](Json& p) { p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2 GPUs"; }),
       "Pod.spec.containers[0].resources.requests.nvidia.com/gpu: invalid quantity \"2 GPUs\""},
      {"quantity 1K", Endpoint::kFilter,
       pod_with([](Json& p) { p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1K"; }),
       "Pod.spec.containers[0].resources.requests.cpu: invalid quantity \"1K\""},
      {"quantity -1", Endpoint::kFilter,
       pod_with([](Json& p) { p["spec"]["containers"][0]["resources"]["requests"]["memory"] = "-1"; }),
       "Pod.spec.containers[0].resources.requests.memory: must not be negative"},
      {"2 MB of nested arrays", Endpoint::kFilter, deep, "nested too deeply"},
      {"2 MB of nested arrays as the Pod", Endpoint::kFilter, R"({"Pod": )" + deep + "}",
       "nested too deeply"},
      {"10000-character pod name", Endpoint::kFilter,
       pod_with([&](Json& p) { p["metadata"]["name"] = long_name; }),
       "Pod.metadata.name: longer than 253 characters"},
      {"invalid UTF-8", Endpoint::kFilter, bad_utf8_pod, "invalid JSON"},
      {"second full node undecodable", Endpoint::kFilter, Dump(bad_second_node),
       "Nodes.items[1].status.capacity.cpu: invalid quantity \"eight\""},
      // prioritize
      {"prioritize malformed", Endpoint::kPrioritize, "{", "invalid JSON"},
      {"prioritize Pod as a number", Endpoint::kPrioritize, with("Pod", 1.5),
       "Pod: expected an object, got a number"},
      {"prioritize NodeNames as a string", Endpoint::kPrioritize, with("NodeNames", "n1"),
       "NodeNames: expected an array of node names, got a string"},
      {"prioritize bad quantity", Endpoint::kPrioritize,
       pod_with([](Json& p) { p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1K"; }),
       "Pod.spec.containers[0].resources.requests.cpu: invalid quantity"},
      // bind
      {"bind empty body", Endpoint::kBind, "", "empty body"},
      {"bind array", Endpoint::kBind, "[]", "ExtenderBindingArgs: expected an object, got an array"},
      {"bind missing PodName", Endpoint::kBind, Dump({{"PodNamespace", "default"}, {"Node", "n1"}}),
       "PodName: required"},
      {"bind empty Node", Endpoint::kBind, Dump({{"PodName", "p"}, {"Node", ""}}), "Node: required"},
      {"bind Node as a number", Endpoint::kBind, Dump({{"PodName", "p"}, {"Node", 3}}),
       "Node: expected a string, got a number"},
      {"bind invalid UTF-8", Endpoint::kBind, "{\"PodName\": \"\xff\", \"Node\": \"n1\"}", "invalid JSON"},
      // preempt
      {"preempt malformed", Endpoint::kPreempt, "{\"Pod\":", "invalid JSON"},
      {"preempt missing Pod", Endpoint::kPreempt, Dump({{"NodeNameToMetaVictims", Json::object()}}),
       "Pod: required"},
      {"preempt victims as an array", Endpoint::kPreempt,
       Dump({{"Pod", pod.Obj()}, {"NodeNameToMetaVictims", Json::array()}}),
       "NodeNameToMetaVictims: expected an object, got an array"},
      {"preempt NumPDBViolations as a string", Endpoint::kPreempt,
       Dump({{"Pod", pod.Obj()},
             {"NodeNameToMetaVictims", {{"n1", {{"Pods", {{{"UID", "uid-r"}}}}, {"NumPDBViolations", "1"}}}}}}),
       "NodeNameToMetaVictims.n1.NumPDBViolations: expected an integer, got a string"},
      {"preempt victim without UID", Endpoint::kPreempt,
       Dump({{"Pod", pod.Obj()},
             {"NodeNameToMetaVictims", {{"n1", {{"Pods", {Json::object()}}, {"NumPDBViolations", 0}}}}}}),
       "NodeNameToMetaVictims.n1.Pods[0].UID: required"},
      {"preempt Pods as an object", Endpoint::kPreempt,
       Dump({{"Pod", pod.Obj()},
             {"NodeNameToMetaVictims", {{"n1", {{"Pods", Json::object()}, {"NumPDBViolations", 0}}}}}}),
       "NodeNameToMetaVictims.n1.Pods: expected an array, got an object"},
      {"preempt full victim with a bad quantity", Endpoint::kPreempt,
       Dump({{"Pod", pod.Obj()},
             {"NodeNameToMetaVictims", nullptr},
             {"NodeNameToVictims",
              {{"n1", {{"Pods", {MakePod("r").Cpu("lots").Node("n1").Obj()}}, {"NumPDBViolations", 0}}}}}}),
       "NodeNameToVictims.n1.Pods[0].spec.containers[0].resources.requests.cpu: invalid quantity"},
      // events
      {"events malformed", Endpoint::kEvents, R"({"type": "ADDED", "object": {)", "invalid JSON"},
      {"events empty body", Endpoint::kEvents, "", "empty body"},
      {"events bad type", Endpoint::kEvents, Dump(Event("UPSERT", MakeNode("x").Obj())),
       "type: expected ADDED, MODIFIED or DELETED, got \"UPSERT\""},
      {"events object as a number", Endpoint::kEvents, Dump({{"type", "ADDED"}, {"object", 5}}),
       "object: expected an object, got a number"},
      {"events unsupported kind", Endpoint::kEvents,
       Dump(Event("ADDED", {{"kind", "Secret"}, {"metadata", {{"name", "s"}}}})),
       "object.kind: unsupported kind \"Secret\""},
      {"events array of numbers", Endpoint::kEvents, "[1]", "[0]: expected an object, got a number"},
      {"events bare object", Endpoint::kEvents, Dump(Json::array({MakeNode("bare").Cpu("8").Obj()})),
       "[0]: expected a watch event {\"type\": ADDED, MODIFIED or DELETED, \"object\": ...}, got a bare "
       "Node object; wrap it: {\"type\":\"ADDED\",\"object\":{...}}"},
      {"events without a type", Endpoint::kEvents, R"({"object": {}})",
       "type: required: expected ADDED, MODIFIED or DELETED"},
      {"events 3rd event bad", Endpoint::kEvents,
       Dump(Json::array({Event("ADDED", MakeNode("new-node").Cpu("8").Obj()),
                         Event("ADDED", MakePod("new-pod").Cpu("1").Node("n1").Phase("Running").Obj()),
                         Event("ADDED", MakePod("bad").Cpu("1K").Obj())})),
       "[2].object.spec.containers[0].resources.requests.cpu: invalid quantity \"1K\""},
      {"events bad quantity", Endpoint::kEvents,
       event_pod([](Json& p) { p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"; }),
       "object.spec.containers[0].resources.requests.cpu: must not be negative"},
      {"events priority as a string", Endpoint::kEvents,
       event_pod([](Json& p) { p["spec"]["priority"] = "1000"; }),
       "object.spec.priority: expected an integer, got a string"},
      {"events 2 MB of nested arrays", Endpoint::kEvents, deep, "nested too deeply"},
      {"events 10000-character name", Endpoint::kEvents,
       event_pod([&](Json& p) { p["metadata"]["name"] = long_name; }),
       "object.metadata.name: longer than 253 characters"},
      {"events invalid UTF-8", Endpoint::kEvents,
       "{\"type\": \"ADDED\", \"object\": {\"kind\": \"Node\", \"metadata\": {\"name\": \"n\xc3\x28\"}}}",
       "invalid JSON"},
  };
  return cases;
}

TEST_CASE("service: bad input gets 400 naming the problem and changes nothing") {
  for (const BadCase& c : BadCases()) {
    SECTION(c.name) {
      Harness h;
      h.Apply(Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Gpu(4).Obj()),
                           Event("ADDED", MakeNode("n2").Cpu("8").Memory("32Gi").Obj()),
                           Event("ADDED", MakePod("r").Cpu("2").Gpu(1).Node("n1").Phase("Running").Obj())}));
      Service& s = h.service();
      const Observed before = Observe(s);

      const Reply r = Call(s, c.endpoint, c.body);
      INFO("case: " << c.name << "\nreply " << r.status << ": " << r.body.substr(0, 1000));
      CHECK(r.status == 400);
      const Json body = ParseReply(r);
      const std::string key = c.endpoint == Endpoint::kEvents ? "error" : "Error";
      REQUIRE(Keys(body) == std::set<std::string>{key});
      REQUIRE(body[key].is_string());
      const std::string message = body[key];
      CHECK(Contains(message, c.expect));
      CHECK(message.size() < 2000);  // the error names the problem; it does not echo the body

      CheckUnchanged(before, Observe(s));
      CHECK_FALSE(HasNode(s, "new-node"));
      CHECK_FALSE(HasNode(s, "fresh-1"));

      // Still answering.
      CHECK(Ok(s.Healthz())["status"] == "ok");
      const Json f = Ok(s.Filter(ArgsNames(MakePod("after").Cpu("1").Obj(), {"n1", "n2"}).dump()));
      // n1's 6 free cpu are kept for its 3 free GPUs (gpu-reserve): the CPU-only pod fits n2.
      CHECK(f["NodeNames"] == Json::array({"n2"}));
      CHECK(f["FailedNodes"].contains("n1"));
    }
  }
}

TEST_CASE("service: refused requests do not leak partial state into later requests") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Gpu(4).Obj()));
  Service& s = h.service();
  // A bad filter for a pod must not leave the pod half-learned: the later bind of the same pod
  // name is refused as unknown.
  Json bad = MakePod("p").Gpu(1).Obj();
  bad["status"]["phase"] = "Sleeping";
  CHECK(s.Filter(ArgsNames(bad, {"n1"}).dump()).status == 400);
  CHECK(Contains(BindError(h, MakePod("p"), "n1"), "not known to berth"));
  CHECK(DebugNode(s, "n1")["free"]["nvidia.com/gpu"] == "4");
  // The same pod, well-formed, is then learned and bound normally.
  const MakePod good = MakePod("p").Gpu(1);
  CHECK(h.Filter(ArgsNames(good.Obj(), {"n1"}))["NodeNames"] == Json::array({"n1"}));
  CHECK(BindError(h, good, "n1") == "");
  CHECK(DebugNode(s, "n1")["free"]["nvidia.com/gpu"] == "3");
}

TEST_CASE("service: refused requests with new resource names do not use up the name table") {
  Harness h;
  h.Apply(Event("ADDED", MakeNode("n1").Cpu("8").Obj()));
  Service& s = h.service();
  // More distinct names than the table holds (core::ResourceNames::kMaxResources), each in a
  // request refused for its quantity.
  for (int i = 0; i < 300; ++i) {
    const Json p = MakePod("p").Request("junk.example/r" + std::to_string(i), "bad!").Obj();
    REQUIRE(s.Filter(ArgsNames(p, {"n1"}).dump()).status == 400);
    const Json e = Event("ADDED", MakeNode("x").Allocatable("junk.example/n" + std::to_string(i), "-1").Obj());
    REQUIRE(s.Events(e.dump()).status == 400);
  }
  // A real new resource still works afterwards.
  h.Apply(Event("ADDED", MakeNode("fpga-1").Cpu("8").Allocatable("example.com/fpga", "2").Obj()));
  CHECK(DebugNode(s, "fpga-1")["allocatable"]["example.com/fpga"] == "2");
  const Json r = h.Filter(ArgsNames(MakePod("q").Request("example.com/fpga", "1").Obj(), {"fpga-1", "n1"}));
  CHECK(r["NodeNames"] == Json::array({"fpga-1"}));
  CHECK(Keys(r["FailedAndUnresolvableNodes"]) == std::set<std::string>{"n1"});
}

// Bind against MODIFIED events (issue: a 4-GPU pod seen on a 0-GPU node). While one thread
// binds a pending pod to a node without GPUs, another keeps changing the pod's request between
// none and four GPUs through POST /v1/events, as a watch might. Whatever the interleaving, the
// pod is never bound with GPUs on that node, and the node never counts any: the bind's check
// and its commit are one step.
TEST_CASE("service: bind against pod events never places a pod where its current spec does not fit",
          "[concurrency]") {
  Harness h;
  h.Apply(Json::array({Event("ADDED", MakeNode("cpu-only").Cpu("64").Memory("64Gi").Pods(5000).Obj()),
                       Event("ADDED", MakeNode("gpu").Cpu("64").Memory("64Gi").Gpu(8).Obj())}));
  const core::ResourceId gpu = *h.model().resources().Find("nvidia.com/gpu");
  constexpr int kRounds = 300;
  int bound = 0;
  int violations = 0;
  for (int i = 0; i < kRounds; ++i) {
    const std::string name = "p" + std::to_string(i);
    const MakePod small = MakePod(name).Uid("u-" + name).Cpu("10m");
    const MakePod big = MakePod(name).Uid("u-" + name).Cpu("10m").Gpu(4);
    h.Apply(Json::array({Event("ADDED", small.Obj())}));
    const std::string bind_body = BindArgs(small, "cpu-only").dump();
    const std::string to_big = Json::array({Event("MODIFIED", big.Obj())}).dump();
    const std::string to_small = Json::array({Event("MODIFIED", small.Obj())}).dump();
    std::atomic<bool> done{false};
    std::thread modifier([&] {
      for (int n = 0; !done.load(std::memory_order_acquire); ++n) {
        (void)h.service().Events(n % 2 == 0 ? to_big : to_small);
      }
    });
    const Reply r = h.service().Bind(bind_body);
    {
      // Read at once: a later event could only unbind the pod (it says nodeName is empty).
      auto view = h.model().Read();
      const core::PodState* p = view->FindPod("u-" + name);
      const core::NodeState* n = view->FindNode("cpu-only");
      if (p != nullptr && p->pod.node_name == "cpu-only") {
        ++bound;
        if (p->pod.request.Get(gpu) != 0) ++violations;
      }
      if (n->requested.Get(gpu) != 0 || n->assumed.Get(gpu) != 0) ++violations;
    }
    done.store(true, std::memory_order_release);
    modifier.join();
    INFO("round " << i << ": " << r.body);
    REQUIRE(r.status == 200);
    (void)h.service().Events(Json::array({Event("DELETED", small.Obj())}).dump());
  }
  CHECK(violations == 0);
  // The race is real: some binds won it, and some were refused or rolled back.
  CHECK(bound > 0);
}

}  // namespace
}  // namespace berth::testing
