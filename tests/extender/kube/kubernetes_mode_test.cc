// berth's Kubernetes mode against the in-process fake API server: list then watch, resilience
// (bookmarks, 410, 429, dropped streams, restarts), bind, evictions, events, patches, TLS.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "catch2/catch.hpp"
#include "extender/journal.h"
#include "extender/kube/client.h"
#include "extender/replay.h"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"
#include "tests/testing/files.h"

namespace berth::testing {
namespace {

using extender::kube::ClientConfig;
using extender::kube::KubeClient;

void Seed(FakeApiServer& api) {
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("4").Memory("16Gi").Pods(110).Obj()).ok());
  REQUIRE(api.Create("nodes", "", MakeNode("n2").Cpu("8").Memory("32Gi").Pods(110).Obj()).ok());
  // A pod of another scheduler, running on n1: its request counts as used capacity.
  REQUIRE(api.Create("pods", "web",
                     MakePod("frontend").Namespace("web").Scheduler("default-scheduler")
                         .Cpu("3").Node("n1").Phase("Running").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("train-0").Namespace("ml").Cpu("2").Obj()).ok());
}

Json Parse(const extender::Reply& r) { return Json::parse(r.body); }

std::string UidOf(FakeApiServer& api, const std::string& ns, const std::string& name) {
  return api.Get("pods", ns, name).value()["metadata"]["uid"];
}

TEST_CASE("kubernetes mode: lists, then watches; ready only after every first list",
          "[kubernetes][concurrency]") {
  FakeApiServer api;
  REQUIRE(api.start_status().ok());
  Seed(api);
  // The first list of nodes fails: berth must not report ready before it has them.
  api.InjectFailure({.method = "GET", .path_prefix = "/api/v1/nodes", .code = 503, .times = 3});
  KubeBerth berth(api);
  CHECK(berth.service().Readyz().status == 503);
  REQUIRE(berth.StartReady());
  CHECK(berth.reflector("nodes").stats().errors >= 1);
  CHECK(berth.NodeCpuMilli("n1") == 3000);  // the default-scheduler pod counts
  CHECK(berth.HasPod(UidOf(api, "ml", "train-0")));

  // The CRDs of pools, queues and podgroups are absent here only if uninstalled; the
  // priorityclasses collection is listed too.
  for (const std::string r : {"nodes", "pods", "podgroups", "pools", "queues", "priorityclasses"}) {
    INFO(r);
    CHECK(berth.reflector(r).synced());
  }
  // Pods are listed with kube-scheduler's field selector: finished pods hold no capacity.
  bool selector_seen = false;
  for (const RecordedCall& c : api.calls()) {
    if (c.resource == "pods" && c.verb == "list") {
      selector_seen = c.query.count("fieldSelector") &&
                      c.query.at("fieldSelector") == "status.phase!=Succeeded,status.phase!=Failed";
    }
  }
  CHECK(selector_seen);

  // Filter: n1 has 1 CPU free, the pending pod asks 2.
  const Json pod = api.Get("pods", "ml", "train-0").value();
  const Json result = Parse(berth.service().Filter(ArgsNames(pod, {"n1", "n2"}).dump()));
  CHECK(result["NodeNames"] == Json::array({"n2"}));
  CHECK(result["FailedNodes"].contains("n1"));

  // Live changes arrive through the watch.
  REQUIRE(api.Create("pods", "web",
                     MakePod("api").Namespace("web").Scheduler("default-scheduler").Cpu("1")
                         .Node("n2").Phase("Running").Obj()).ok());
  CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n2") == 1000; }));
  // A pod that finishes leaves the field selector: the watch says DELETED, capacity is freed.
  Json finished = api.Get("pods", "web", "api").value();
  finished["status"]["phase"] = "Succeeded";
  REQUIRE(api.Update("pods", "web", finished).ok());
  CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n2") == 0; }));
  REQUIRE(api.Delete("nodes", "", "n2").ok());
  CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n2") == -1; }));
}

TEST_CASE("kubernetes mode: watches resume from bookmarks and after dropped streams",
          "[kubernetes][concurrency]") {
  FakeApiServer api;
  Seed(api);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.open_watches("pods") == 1; }));

  SECTION("a bookmark moves the resourceVersion the next watch starts from") {
    // Unrelated writes (another resource) advance the RV; the pod watch learns it by bookmark.
    REQUIRE(api.Create("leases", "x", Json{{"metadata", {{"name", "l"}}}, {"spec", Json::object()}}).ok());
    const std::string rv = std::to_string(api.current_rv());
    api.SendBookmarks();
    REQUIRE(berth.WaitFor([&] { return berth.reflector("pods").stats().resource_version == rv; }));
    CHECK(berth.reflector("pods").stats().bookmarks >= 1);
    api.ClearCalls();
    api.EndWatches();  // as at the end of timeoutSeconds
    // The ended watch is recorded too (when it ends); the new one is the last pod watch.
    auto last_pod_watch = [&] {
      std::optional<RecordedCall> last;
      for (const RecordedCall& c : api.calls()) {
        if (c.resource == "pods" && c.verb == "watch" && c.query.count("resourceVersion") &&
            c.query.at("resourceVersion") == rv) {
          last = c;
        }
      }
      return last;
    };
    REQUIRE(api.WaitFor([&](FakeApiServer&) { return last_pod_watch().has_value(); }));
    const RecordedCall rewatch = *last_pod_watch();
    CHECK(rewatch.verb == "watch");
    CHECK(rewatch.query.at("resourceVersion") == rv);
    CHECK(rewatch.query.at("allowWatchBookmarks") == "true");
    CHECK(berth.reflector("pods").stats().lists == 1);  // resumed, not relisted
  }
  SECTION("a dropped stream is re-opened and no event is lost") {
    api.DropWatches();
    REQUIRE(api.Create("pods", "web",
                       MakePod("late").Namespace("web").Scheduler("default-scheduler").Cpu("1")
                           .Node("n1").Phase("Running").Obj()).ok());
    CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n1") == 4000; }));
    CHECK(berth.reflector("pods").stats().lists == 1);
    CHECK(berth.reflector("pods").stats().errors >= 1);
  }
  SECTION("the API server restarts") {
    api.Stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(api.Create("pods", "web",
                       MakePod("during").Namespace("web").Scheduler("default-scheduler").Cpu("500m")
                           .Node("n1").Phase("Running").Obj()).ok());
    REQUIRE(api.Start().ok());
    CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n1") == 3500; }));
    CHECK(berth.service().Readyz().status == 200);
  }
}

TEST_CASE("kubernetes mode: 410 Gone relists and drops objects deleted meanwhile",
          "[kubernetes]") {
  for (const bool as_http_status : {false, true}) {
    DYNAMIC_SECTION("410 as " << (as_http_status ? "HTTP status" : "ERROR event")) {
      FakeApiServer api({.watch_410_as_http_status = as_http_status});
      Seed(api);
      REQUIRE(api.Create("pods", "web",
                         MakePod("old").Namespace("web").Scheduler("default-scheduler").Cpu("1")
                             .Node("n2").Phase("Running").Obj()).ok());
      KubeBerth berth(api);
      REQUIRE(berth.StartReady());
      REQUIRE(berth.NodeCpuMilli("n2") == 1000);
      // The pod watch cannot reconnect while the pod is deleted and history compacted.
      api.InjectFailure({.method = "GET", .path_prefix = "/api/v1/pods", .code = 503, .times = -1});
      api.DropWatches();
      REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.open_watches("pods") == 0; }));
      REQUIRE(api.Delete("pods", "web", "old").ok());
      api.CompactHistory();
      api.ClearFailures();
      CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n2") == 0; }));
      CHECK(berth.reflector("pods").stats().lists == 2);
      CHECK(berth.reflector("pods").stats().gone >= 1);
      CHECK(berth.NodeCpuMilli("n1") == 3000);  // the rest is intact
    }
  }
  SECTION("a 410 ERROR event on an open watch") {
    FakeApiServer api;
    Seed(api);
    KubeBerth berth(api);
    REQUIRE(berth.StartReady());
    REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.open_watches("nodes") == 1; }));
    api.InjectWatchError("nodes", 410);
    CHECK(berth.WaitFor([&] { return berth.reflector("nodes").stats().lists == 2; }));
  }
}

TEST_CASE("kubernetes mode: 429 answers are waited out as Retry-After asks", "[kubernetes]") {
  FakeApiServer api;
  Seed(api);
  api.InjectFailure({.method = "GET", .path_prefix = "/api/v1/nodes", .code = 429,
                     .retry_after_seconds = 1, .times = 1});
  KubeBerth berth(api);
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(berth.StartReady());
  // The reflector's own backoff is 10 ms here; only Retry-After explains a second's wait.
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(950));
  CHECK(api.CountCalls("GET", "/api/v1/nodes") >= 2);
}

TEST_CASE("kubernetes mode: berth works without its optional CRDs", "[kubernetes]") {
  FakeApiServer api;
  Seed(api);
  api.SetInstalled("podgroups", false);
  api.SetInstalled("pools", false);
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  // Installed later: picked up by the periodic retry.
  api.SetInstalled("pools", true);
  REQUIRE(api.Create("pools", "", MakePool("gpu").Label("pool", "gpu").Obj()).ok());
  CHECK(berth.WaitFor([&] {
    auto view = berth.model().Read();
    return view->FindPool("gpu") != nullptr;
  }));
}

TEST_CASE("kubernetes mode: bindings go over one kept-alive TLS connection", "[kubernetes]") {
  FakeApiServer api;  // HTTPS, as FakeApiServerOptions serves by default
  Seed(api);
  for (int i = 1; i < 6; ++i) {
    REQUIRE(api.Create("pods", "ml", MakePod(StrCat("train-", i)).Namespace("ml").Cpu("1").Obj()).ok());
  }
  KubeBerth berth(api);
  REQUIRE(berth.StartReady());
  api.ClearCalls();
  for (int i = 0; i < 6; ++i) {
    const std::string name = StrCat("train-", i);
    REQUIRE(berth.WaitFor([&] { return berth.HasPod(UidOf(api, "ml", name)); }));
    const Json bind = {{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", UidOf(api, "ml", name)},
                       {"Node", "n2"}};
    REQUIRE(Parse(berth.service().Bind(bind.dump()))["Error"] == "");
  }
  // One connection, reused for every binding: no TLS handshake per request. Each answer is read
  // whole (and the reads that follow it wait on the socket), so the connection goes back to the
  // pool and is taken again.
  std::set<int> ports;
  int bindings = 0;
  for (const auto& c : api.calls()) {
    if (c.subresource != "binding") continue;
    ++bindings;
    CHECK(c.remote_port > 0);
    ports.insert(c.remote_port);
  }
  CHECK(bindings == 6);
  CHECK(ports.size() == 1);
}

TEST_CASE("kubernetes mode: bind creates pods/binding; failures forget the placement",
          "[kubernetes][concurrency]") {
  FakeApiServer api;
  Seed(api);
  KubeBerth berth(api);  // leader election off: this replica binds and evicts
  REQUIRE(berth.StartReady());
  const std::string uid = UidOf(api, "ml", "train-0");
  const Json bind = {{"PodName", "train-0"}, {"PodNamespace", "ml"}, {"PodUID", uid}, {"Node", "n2"}};

  SECTION("success") {
    const Json r = Parse(berth.service().Bind(bind.dump()));
    CHECK(r["Error"] == "");
    REQUIRE(api.bindings().size() == 1);
    const Json b = api.bindings()[0];
    CHECK(b["kind"] == "Binding");
    CHECK(b["metadata"]["name"] == "train-0");
    CHECK(b["metadata"]["uid"] == uid);
    CHECK(b["target"]["name"] == "n2");
    CHECK(b["target"]["kind"] == "Node");
    CHECK(api.Get("pods", "ml", "train-0").value()["spec"]["nodeName"] == "n2");
    // Held at once, then confirmed by the watch: counted exactly once.
    CHECK(berth.WaitFor([&] {
      auto view = berth.model().Read();
      return view->FindBind(uid) == nullptr;
    }));
    CHECK(berth.NodeCpuMilli("n2") == 2000);
  }
  SECTION("409 Conflict") {
    api.InjectFailure({.method = "POST", .path_prefix = "/api/v1/namespaces/ml/pods/train-0/binding",
                       .code = 409, .message = "pod train-0 is already assigned to node \"n1\""});
    const Json r = Parse(berth.service().Bind(bind.dump()));
    CHECK_THAT(r["Error"].get<std::string>(),
               Catch::Contains("409") && Catch::Contains("already assigned to node"));
    auto view = berth.model().Read();
    CHECK(view->FindBind(uid) == nullptr);
    CHECK(view->FindNode("n2")->assumed.Get(core::kCpu) == 0);
  }
  SECTION("a persistent 500 is retried, then reported") {
    api.InjectFailure({.method = "POST", .path_prefix = "/api/v1/namespaces/ml/pods/train-0/binding",
                       .code = 500, .times = -1});
    const Json r = Parse(berth.service().Bind(bind.dump()));
    CHECK_THAT(r["Error"].get<std::string>(), Catch::Contains("500"));
    CHECK(api.CountCalls("POST", "/api/v1/namespaces/ml/pods/train-0/binding") >= 2);
    CHECK(berth.NodeCpuMilli("n2") == 0);
  }
  SECTION("the pod was deleted and re-created: the uid precondition refuses") {
    REQUIRE(api.Delete("pods", "ml", "train-0").ok());
    Json again = MakePod("train-0").Namespace("ml").Uid("uid-new").Cpu("2").Obj();
    REQUIRE(api.Create("pods", "ml", again).ok());
    // berth has not necessarily seen the new pod yet; either way the old uid is refused.
    const Json r = Parse(berth.service().Bind(bind.dump()));
    CHECK(r["Error"] != "");
    CHECK(api.bindings().empty());
  }
}

TEST_CASE("kubernetes mode: evictions, events and annotation patches", "[kubernetes]") {
  FakeApiServer api;
  Seed(api);
  KubeBerth berth(api);  // leader election off: this replica binds and evicts
  REQUIRE(berth.StartReady());
  auto& writer = berth.runtime().writer();
  const std::string uid = UidOf(api, "web", "frontend");

  SECTION("eviction") {
    REQUIRE(writer.Evict("web", "frontend", uid, /*grace_seconds=*/1).ok());
    REQUIRE(api.evictions().size() == 1);
    const Json e = api.evictions()[0];
    CHECK(e["apiVersion"] == "policy/v1");
    CHECK(e["kind"] == "Eviction");
    CHECK(e["deleteOptions"]["preconditions"]["uid"] == uid);
    CHECK(e["deleteOptions"]["gracePeriodSeconds"] == 1);
    // Terminating for its grace period, its request still counted; then gone.
    CHECK(berth.WaitFor([&] {
      auto view = berth.model().Read();
      const core::PodState* p = view->FindPod(uid);
      return p != nullptr && p->pod.terminating;
    }));
    CHECK(berth.NodeCpuMilli("n1") == 3000);
    CHECK(berth.WaitFor([&] { return berth.NodeCpuMilli("n1") == 0; }));
  }
  SECTION("an eviction a disruption budget forbids") {
    api.SetEvictionBlocked("web", "frontend", true);
    absl::Status s = writer.Evict("web", "frontend", uid);
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("429"));
    CHECK_THAT(std::string(s.message()), Catch::Contains("disruption budget"));
    CHECK(api.Get("pods", "web", "frontend").has_value());
  }
  SECTION("events: events.k8s.io, or core Events when it is not served") {
    extender::kube::EventRecord ev{.regarding = {.ns = "ml", .name = "train-0", .uid = "u1"},
                                   .type = "Warning",
                                   .reason = "Waiting",
                                   .action = "Schedule",
                                   .note = "gang 3 of 4 placeable"};
    REQUIRE(writer.RecordEvent(ev).ok());
    api.SetInstalled("events.k8s.io", false);
    REQUIRE(writer.RecordEvent(ev).ok());
    const std::vector<Json> events = api.events();
    REQUIRE(events.size() == 2);
    CHECK(events[0]["apiVersion"] == "events.k8s.io/v1");
    CHECK(events[0]["regarding"]["name"] == "train-0");
    CHECK(events[0]["note"] == "gang 3 of 4 placeable");
    CHECK(events[1]["apiVersion"] == "v1");
    CHECK(events[1]["involvedObject"]["uid"] == "u1");
    CHECK(events[1]["message"] == "gang 3 of 4 placeable");
  }
  SECTION("annotation patch, with deletion") {
    REQUIRE(writer.PatchPodAnnotations("ml", "train-0", {{"berth.io/retry", "1"}}).ok());
    CHECK(api.Get("pods", "ml", "train-0").value()["metadata"]["annotations"]["berth.io/retry"] == "1");
    REQUIRE(writer.PatchPodAnnotations("ml", "train-0", {{"berth.io/retry", std::nullopt}}).ok());
    const Json after = api.Get("pods", "ml", "train-0").value()["metadata"];
    CHECK((!after.contains("annotations") || !after["annotations"].contains("berth.io/retry")));
    // The last PATCH (a watch may reconnect meanwhile, and its GET come after it).
    const std::vector<RecordedCall> calls = api.calls();
    auto patch = std::find_if(calls.rbegin(), calls.rend(), [](const auto& c) { return c.method == "PATCH"; });
    REQUIRE(patch != calls.rend());
    CHECK(patch->content_type == "application/merge-patch+json");
    absl::Status missing = writer.PatchPodAnnotations("ml", "nope", {{"a", "b"}});
    CHECK(missing.code() == absl::StatusCode::kNotFound);
  }
}

// A watch waits in its reads (ApiConnection::WaitInReads): over TLS, its events still arrive as
// they happen, a silent watch ends at its idle limit, and a stop ends a blocked read.
TEST_CASE("kubernetes mode: a TLS watch gets its events, times out when silent, and stops when asked",
          "[kubernetes]") {
  FakeApiServer api;
  auto client = KubeClient::Create(FakeClientConfig(api));
  REQUIRE(client.ok());
  const Json pod = {{"metadata", {{"name", "w-1"}, {"namespace", "ml"}}},
                    {"spec", {{"containers", Json::array({{{"name", "main"}, {"image", "busybox"}}})}}},
                    {"status", {{"phase", "Pending"}}}};
  for (const bool stop : {false, true}) {
    INFO((stop ? "stopped" : "silent"));
    extender::kube::StreamHandle handle;
    std::mutex mu;
    std::string got;
    std::atomic<bool> first{false};
    const auto t0 = std::chrono::steady_clock::now();
    std::thread watcher;
    absl::StatusOr<extender::kube::Response> ended;
    watcher = std::thread([&] {
      ended = (*client)->Stream(
          "/api/v1/namespaces/ml/pods?watch=true",
          [&](std::string_view data) {
            std::lock_guard<std::mutex> lock(mu);
            got.append(data);
            first.store(true);
            return true;
          },
          stop ? absl::Seconds(60) : absl::Milliseconds(400), &handle);
    });
    // The event of a pod made once the watch is open.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (api.open_watches() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    Json made = pod;
    made["metadata"]["name"] = stop ? "w-2" : "w-1";
    REQUIRE(api.Create("pods", "ml", made).ok());
    while (!first.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      handle.Stop();
    }
    watcher.join();
    {
      std::lock_guard<std::mutex> lock(mu);
      CHECK_THAT(got, Catch::Contains("\"type\":\"ADDED\"") && Catch::Contains(made["metadata"]["name"].get<std::string>()));
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
    if (stop) {
      CHECK(absl::IsCancelled(ended.status()));
    } else {
      REQUIRE_FALSE(ended.ok());
      CHECK(absl::IsUnavailable(ended.status()));
      CHECK_THAT(std::string(ended.status().message()), Catch::Contains("timed out"));
    }
  }
}

TEST_CASE("kubernetes mode: TLS verification, client certificates and token rotation",
          "[kubernetes]") {
  SECTION("a server signed by another CA is refused") {
    FakeApiServer api;
    ClientConfig c = FakeClientConfig(api);
    const TlsMaterial other = MakeTlsMaterial();
    REQUIRE(other.ok());
    c.ca_pem = other.ca_pem;
    auto client = KubeClient::Create(c);
    REQUIRE(client.ok());
    auto r = (*client)->Call("GET", "/api/v1/nodes");
    CHECK(r.status().code() == absl::StatusCode::kUnavailable);
    RemoveTlsMaterial(other);
  }
  SECTION("client certificate authentication") {
    FakeApiServer api({.require_client_cert = true});
    ClientConfig c = FakeClientConfig(api);
    c.token.clear();
    c.client_cert_pem = api.tls().client_cert_pem;
    c.client_key_pem = api.tls().client_key_pem;
    auto client = KubeClient::Create(c);
    REQUIRE(client.ok());
    auto r = (*client)->Call("GET", "/api/v1/nodes");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK(api.calls().back().user == "berth-client");
  }
  SECTION("a rotated token file is re-read") {
    FakeApiServer api;
    const std::string file = api.tls().dir + "/token-rotation";
    {
      std::ofstream(file) << api.token() << "\n";
    }
    ClientConfig c = FakeClientConfig(api);
    c.token.clear();
    c.token_file = file;
    auto client = KubeClient::Create(c, {.token_reload = absl::Milliseconds(20)});
    REQUIRE(client.ok());
    CHECK((*client)->Call("GET", "/api/v1/nodes")->status == 200);
    api.SetToken("rotated");
    CHECK((*client)->Call("GET", "/api/v1/nodes")->status == 401);
    {
      std::ofstream(file) << "rotated\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK((*client)->Call("GET", "/api/v1/nodes")->status == 200);
  }
}

TEST_CASE("kubernetes mode: the journal records what the watches delivered, and replays with no difference",
          "[kubernetes]") {
  FakeApiServer api;
  Seed(api);
  TempDir dir;
  const std::string journal_dir = (dir.path() / "journal").string();
  // Opened first: the reflectors' threads write to it until the runtime stops.
  absl::StatusOr<std::unique_ptr<extender::Journal>> journal = extender::Journal::Open(
      extender::JournalOptions{.dir = journal_dir},
      extender::JournalHeader{.mode = "kubernetes", .scheduler_name = "berth-scheduler", .version = "test"});
  REQUIRE(journal.ok());
  extender::kube::KubernetesOptions options = FastOptions();
  options.reflector.journal = journal->get();
  {
    KubeBerth berth(api, options);
    berth.service().SetJournal(journal->get());
    REQUIRE(berth.StartReady());
    const std::string uid = UidOf(api, "ml", "train-0");
    const Json filter = {{"Pod", api.Get("pods", "ml", "train-0").value()}, {"NodeNames", {"n1", "n2"}}};
    const Json answer = Parse(berth.service().Filter(filter.dump()));
    CHECK(answer["NodeNames"] == Json::array({"n2"}));  // n1 has 1 CPU left of 4
    CHECK(Parse(berth.service().Bind(
              Json{{"PodName", "train-0"}, {"PodNamespace", "ml"}, {"PodUID", uid}, {"Node", "n2"}}.dump()))["Error"] == "");
    // The binding comes back through the pod watch, and is journaled with it.
    REQUIRE(berth.WaitFor([&] { return berth.model().Read()->FindBind(uid) == nullptr; }));
    REQUIRE(api.Create("pods", "ml", MakePod("train-1").Namespace("ml").Cpu("2").Obj()).ok());
    REQUIRE(berth.WaitFor([&] { return berth.model().Read()->FindPod(UidOf(api, "ml", "train-1")) != nullptr; }));
    // n1 still has 1 CPU free; n2 has 6 beside train-0.
    const Json again = {{"Pod", api.Get("pods", "ml", "train-1").value()}, {"NodeNames", {"n1", "n2"}}};
    CHECK(Parse(berth.service().Filter(again.dump()))["NodeNames"] == Json::array({"n2"}));
    berth.Stop();
  }
  (*journal)->Flush();
  absl::StatusOr<extender::ReplayResult> r = extender::Replay(extender::ReplayOptions{.dir = journal_dir});
  REQUIRE(r.ok());
  CHECK(r->verbs == 3);
  CHECK(r->events >= 6);  // two nodes and two pods listed, the binding, the new pod
  CHECK(r->differing == 0);
}

}  // namespace
}  // namespace berth::testing
