// The fake API server against kube-apiserver 1.26 itself: responses captured from a real server
// (../shared/fixtures/kube-apiserver-1.26, described in its README) are compared with what the fake
// answers to the same requests, byte for byte where the shape is what clients parse (Status bodies,
// the binding and eviction answers, list metadata, watch framing and bookmarks), and its graceful
// deletion, list resourceVersion semantics and strategic merge patches are checked against what
// the captures show.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/testing/fake_apiserver.h"
#include "tests/testing/files.h"

namespace berth::testing {
namespace {

using Clock = std::chrono::steady_clock;

Json Capture(const std::string& name) {
  return Json::parse(ReadTestFile(std::string(BERTH_FIXTURES_DIR) + "/../kube-apiserver-1.26/" +
                                  name));
}

/// The captured response body, exactly as the server sent it.
std::string RawBody(const Json& capture) { return capture["response"]["bodyRaw"]; }

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

/// The fake in plain HTTP, so that a test can read its bytes off the socket.
FakeApiServerOptions Plain(bool kubelet = true, int64_t too_large_rv_wait_ms = 3000) {
  FakeApiServerOptions o;
  o.tls = false;
  o.kubelet = kubelet;
  o.too_large_rv_wait_ms = too_large_rv_wait_ms;
  return o;
}

std::unique_ptr<httplib::Client> Client(const FakeApiServer& api) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", api.port());
  c->set_bearer_token_auth("test-token");
  c->set_read_timeout(10, 0);
  return c;
}

Json Pod(const std::string& name, const std::string& node = "", int64_t grace = -1) {
  Json spec = {{"containers", Json::array({{{"name", "main"}, {"image", "busybox"}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  if (grace >= 0) spec["terminationGracePeriodSeconds"] = grace;
  return {{"metadata", {{"name", name}, {"namespace", "team-a"}, {"labels", {{"app", "train"}}}}},
          {"spec", spec},
          {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

Json Binding(const std::string& pod, const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Binding"},
          {"metadata", {{"name", pod}, {"namespace", "team-a"}}},
          {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
}

Json Eviction(const std::string& pod) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "Eviction"},
          {"metadata", {{"name", pod}, {"namespace", "team-a"}}}};
}

const std::string kPods = "/api/v1/namespaces/team-a/pods/";

/// One HTTP/1.1 request on a raw socket; the response's chunks as they arrived.
struct RawResponse {
  int status = 0;
  std::string headers;
  std::vector<std::string> chunks;
  std::vector<double> at;  // seconds after the headers
  bool terminated = false;  // the zero-length chunk came
  double ended_at = 0;
};

RawResponse RawGet(int port, const std::string& path) {
  RawResponse out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const std::string req = "GET " + path +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token\r\n"
                          "Connection: close\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
  std::string buf;
  Clock::time_point start;
  bool have_headers = false;
  size_t pos = 0;
  char tmp[65536];
  while (true) {
    // Parse whatever is complete.
    if (!have_headers) {
      const size_t end = buf.find("\r\n\r\n");
      if (end != std::string::npos) {
        have_headers = true;
        start = Clock::now();
        out.headers = buf.substr(0, end);
        out.status = std::stoi(out.headers.substr(9, 3));
        pos = end + 4;
      }
    }
    while (have_headers) {
      const size_t line = buf.find("\r\n", pos);
      if (line == std::string::npos) break;
      const size_t size = std::stoul(buf.substr(pos, line - pos), nullptr, 16);
      if (buf.size() < line + 2 + size + 2) break;
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      if (size == 0) {
        out.terminated = true;
        out.ended_at = t;
        ::close(fd);
        return out;
      }
      out.chunks.push_back(buf.substr(line + 2, size));
      out.at.push_back(t);
      pos = line + 2 + size + 2;
    }
    const ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  out.ended_at = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  return out;
}

std::string EventType(const std::string& chunk) {
  const Json j = Json::parse(chunk, nullptr, false);
  return j.is_object() ? j.value("type", "") : "";
}

TEST_CASE("fake apiserver fixtures: Status bodies are kube-apiserver 1.26's, byte for byte",
          "[fake-apiserver][fixtures]") {
  FakeApiServer api(Plain(/*kubelet=*/true, /*too_large_rv_wait_ms=*/300));
  REQUIRE(api.start_status().ok());
  auto c = Client(api);
  auto same = [](const httplib::Result& res, const Json& capture, const std::string& expected) {
    REQUIRE(res);
    INFO(res->body);
    CHECK(res->status == capture["response"]["status"].get<int>());
    CHECK(res->body == expected);
  };

  SECTION("404 NotFound") {
    Json cap = Capture("10-get-missing-pod-404.json");
    same(c->Get(kPods + "train-missing"), cap, RawBody(cap));
    cap = Capture("07-patch-missing-pod-404.json");
    same(c->Patch(kPods + "train-missing", R"({"metadata":{"annotations":{"a":"b"}}})",
                  "application/merge-patch+json"),
         cap, RawBody(cap));
    cap = Capture("04-binding-missing-pod.json");
    same(c->Post(kPods + "train-missing/binding", Binding("train-missing", "node-1").dump(),
                 "application/json"),
         cap, RawBody(cap));
  }
  SECTION("binding: 201 Success, then 409 already assigned; a wrong uid is a StorageError 409") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-1")).ok());
    REQUIRE(api.Create("pods", "team-a", Pod("train-2")).ok());
    Json cap = Capture("04-binding-created.json");
    same(c->Post(kPods + "train-1/binding", Binding("train-1", "node-1").dump(),
                 "application/json"),
         cap, RawBody(cap));
    cap = Capture("04-binding-already-assigned.json");
    same(c->Post(kPods + "train-1/binding", Binding("train-1", "node-2").dump(),
                 "application/json"),
         cap, RawBody(cap));
    cap = Capture("04-binding-wrong-uid-precondition.json");
    Json wrong = Binding("train-2", "node-1");
    wrong["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000";
    const std::string uid = api.Get("pods", "team-a", "train-2").value()["metadata"]["uid"];
    same(c->Post(kPods + "train-2/binding", wrong.dump(), "application/json"), cap,
         Replace(RawBody(cap), "d2696523-73e9-4332-b93e-1206b9eb9571", uid));
  }
  SECTION("eviction: 201 Success; a disruption budget's 429") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-e0")).ok());
    REQUIRE(api.Create("pods", "team-a", Pod("train-e2", "node-1")).ok());
    Json cap = Capture("05-eviction-created.json");
    same(c->Post(kPods + "train-e0/eviction", Eviction("train-e0").dump(), "application/json"),
         cap, RawBody(cap));
    api.SetEvictionBlocked("team-a", "train-e2", true);
    cap = Capture("05-eviction-pdb-blocked-429.json");
    auto res = c->Post(kPods + "train-e2/eviction", Eviction("train-e2").dump(),
                       "application/json");
    same(res, cap, Replace(RawBody(cap), "train-pdb", "fake-pdb"));
    CHECK_FALSE(res->has_header("Retry-After"));
  }
  SECTION("409 AlreadyExists, a stale Lease update, 415 for a PATCH in application/json") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-0")).ok());
    Json cap = Capture("10-create-duplicate-pod-409.json");
    same(c->Post("/api/v1/namespaces/team-a/pods", Pod("train-0").dump(), "application/json"),
         cap, RawBody(cap));
    cap = Capture("07-patch-pod-unsupported-content-type-415.json");
    same(c->Patch(kPods + "train-0", R"({"metadata":{"annotations":{"a":"b"}}})",
                  "application/json"),
         cap, RawBody(cap));
    cap = Capture("09-lease-update-stale-rv-409.json");
    Json lease = cap["request"]["body"];
    lease["metadata"].erase("uid");
    lease["metadata"].erase("resourceVersion");
    const Json created = api.Create("leases", "team-a", lease).value();
    Json stale = created;
    stale["spec"]["holderIdentity"] = "replica-1";
    REQUIRE(api.Update("leases", "team-a", stale).ok());  // the version `created` is stale now
    same(c->Put("/apis/coordination.k8s.io/v1/namespaces/team-a/leases/scheduler-lock",
                created.dump(), "application/json"),
         cap, RawBody(cap));
  }
  SECTION("410 for an Exact or paginated list from a compacted resourceVersion") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-0")).ok());
    const std::string old = std::to_string(api.current_rv());
    REQUIRE(api.Create("pods", "team-a", Pod("train-1")).ok());
    api.CompactHistory();
    Json cap = Capture("03-list-compacted-rv-exact-410.json");
    same(c->Get("/api/v1/pods?resourceVersion=" + old + "&resourceVersionMatch=Exact"), cap,
         RawBody(cap));
    cap = Capture("03-list-compacted-rv-limit-410.json");
    same(c->Get("/api/v1/pods?resourceVersion=" + old + "&limit=2"), cap, RawBody(cap));
    // Without a limit or Exact the watch cache answers, at its current resourceVersion.
    auto res = c->Get("/api/v1/pods?resourceVersion=" + old);
    REQUIRE(res);
    CHECK(res->status == 200);
  }
  SECTION("a resourceVersion newer than the server's: 500 from etcd, or 504 after waiting") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-0")).ok());
    const int64_t now = api.current_rv();
    const std::string future = std::to_string(now + 100000);
    Json cap = Capture("03-list-future-rv-exact.json");
    same(c->Get("/api/v1/pods?resourceVersion=" + future + "&resourceVersionMatch=Exact"), cap,
         RawBody(cap));
    cap = Capture("03-list-future-rv-limit.json");
    same(c->Get("/api/v1/pods?resourceVersion=" + future + "&limit=2"), cap, RawBody(cap));
    for (const char* name : {"03-list-future-rv-504.json", "03-get-future-rv.json"}) {
      cap = Capture(name);
      const std::string path =
          std::string(name).find("get") != std::string::npos
              ? kPods + "train-0?resourceVersion=" + future
              : "/api/v1/pods?resourceVersion=" + future;
      const auto start = Clock::now();
      auto res = c->Get(path);
      CHECK(Clock::now() - start >= std::chrono::milliseconds(300));  // it waited first
      same(res, cap,
           Replace(Replace(RawBody(cap), "100302", future), "current: 299",
                   "current: " + std::to_string(now)));
      CHECK(res->get_header_value("Retry-After") == "1");
    }
  }
}

TEST_CASE("fake apiserver fixtures: list metadata is laid out as kube-apiserver 1.26 lays it out",
          "[fake-apiserver][fixtures]") {
  FakeApiServer api(Plain());
  REQUIRE(api.start_status().ok());
  for (const char* name : {"train-0", "train-1", "train-2", "train-3", "train-done"}) {
    REQUIRE(api.Create("pods", "team-a", Pod(name)).ok());
  }
  Json pool = Capture("12-crd-pool-create.json")["response"]["body"];
  pool["metadata"].erase("resourceVersion");
  REQUIRE(api.Create("pools", "", pool).ok());
  auto c = Client(api);
  // The envelope before the items, with the resourceVersion and continue token normalised.
  auto envelope = [](const std::string& body) {
    std::string head = body.substr(0, body.find("\"items\":"));
    head = std::regex_replace(head, std::regex("\"resourceVersion\":\"[0-9]+\""),
                              "\"resourceVersion\":\"RV\"");
    return std::regex_replace(head, std::regex("\"continue\":\"[^\"]+\""), "\"continue\":\"C\"");
  };
  auto first = c->Get("/api/v1/pods?limit=2");
  REQUIRE(first);
  CHECK(envelope(first->body) == envelope(RawBody(Capture("01-list-pods-limit2.json"))));
  const std::string token = Json::parse(first->body)["metadata"]["continue"];
  auto second = c->Get("/api/v1/pods?limit=2&continue=" + token);
  REQUIRE(second);
  CHECK(envelope(second->body) ==
        envelope(RawBody(Capture("01-list-pods-limit2-continue-page2.json"))));
  const std::string token2 = Json::parse(second->body)["metadata"]["continue"];
  auto last = c->Get("/api/v1/pods?limit=2&continue=" + token2);
  REQUIRE(last);
  CHECK(envelope(last->body) ==
        envelope(RawBody(Capture("01-list-pods-limit2-continue-last-page.json"))));
  CHECK(last->body.substr(last->body.size() - 3) == "]}\n");
  // A custom resource's list: sorted keys, an empty continue on the last page.
  auto pools = c->Get("/apis/berth.io/v1alpha1/pools");
  REQUIRE(pools);
  auto tail = [](const std::string& body) {
    return std::regex_replace(body.substr(body.rfind("],\"kind\"")),
                              std::regex("\"resourceVersion\":\"[0-9]+\""),
                              "\"resourceVersion\":\"RV\"");
  };
  const std::string captured = RawBody(Capture("12-crd-pool-list.json"));
  CHECK(tail(pools->body) == tail(captured));
  // Items of a custom resource list carry their kind and apiVersion.
  auto head = [](const std::string& body) { return body.substr(0, body.find("\"metadata\"")); };
  CHECK(head(pools->body) == head(captured));
}

TEST_CASE("fake apiserver fixtures: watch framing, bookmarks and timeouts as kube-apiserver 1.26's",
          "[fake-apiserver][fixtures]") {
  FakeApiServer api(Plain());
  REQUIRE(api.start_status().ok());
  REQUIRE(api.Create("pods", "team-a", Pod("train-0")).ok());
  const std::string rv = std::to_string(api.current_rv());
  const Json cap = Capture("02-watch-pods-create-patch-bind-delete.json");

  // The capture's watch (3 s instead of 5), an idle one, and one from a future resourceVersion.
  RawResponse busy, idle, future;
  std::thread t1([&] {
    busy = RawGet(api.port(),
                  "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv +
                      "&timeoutSeconds=3");
  });
  std::thread t2([&] {
    idle = RawGet(api.port(),
                  "/apis/coordination.k8s.io/v1/leases?watch=1&allowWatchBookmarks=true&"
                  "resourceVersion=" + rv + "&timeoutSeconds=3");
  });
  std::thread t3([&] {
    future = RawGet(api.port(), "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" +
                                    std::to_string(api.current_rv() + 100000) +
                                    "&timeoutSeconds=3");
  });
  REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.open_watches() == 3; }));
  // As captured: created, annotated, bound, deleted with grace 0.
  auto c = Client(api);
  Json pod = Pod("train-5");
  REQUIRE(c->Post("/api/v1/namespaces/team-a/pods", pod.dump(), "application/json")->status == 201);
  REQUIRE(c->Patch(kPods + "train-5", R"({"metadata":{"annotations":{"example.com/a":"b"}}})",
                   "application/merge-patch+json")
              ->status == 200);
  REQUIRE(c->Post(kPods + "train-5/binding", Binding("train-5", "node-1").dump(),
                  "application/json")
              ->status == 201);
  REQUIRE(c->Delete(kPods + "train-5", R"({"kind":"DeleteOptions","apiVersion":"v1",
                                          "gracePeriodSeconds":0})",
                    "application/json")
              ->status == 200);
  const int64_t last_rv = api.current_rv();
  t1.join();
  t2.join();
  t3.join();

  // One chunk per event, each one JSON document and a newline, the same events as captured.
  std::vector<std::string> captured_types, types;
  for (const Json& chunk : cap["response"]["chunks"]) captured_types.push_back(EventType(chunk));
  for (const std::string& chunk : busy.chunks) {
    types.push_back(EventType(chunk));
    CHECK(chunk.find('\n') == chunk.size() - 1);
  }
  CHECK(types == captured_types);
  // The bookmark: the capture's object, about two seconds before the timeout.
  REQUIRE(!busy.chunks.empty());
  const std::string captured_bookmark = cap["response"]["chunks"].back();
  CHECK(busy.chunks.back() == std::regex_replace(captured_bookmark,
                                                 std::regex("\"resourceVersion\":\"[0-9]+\""),
                                                 "\"resourceVersion\":\"" +
                                                     std::to_string(last_rv) + "\""));
  CHECK(busy.at.back() > 0.7);
  CHECK(busy.at.back() < 2.5);
  // At the timeout only the zero-length chunk: no final event, no Status.
  CHECK(busy.terminated);
  CHECK(busy.ended_at > 2.7);
  // An idle watch, and one from a resourceVersion the server has not reached, get nothing.
  CHECK(idle.status == 200);
  CHECK(idle.chunks.empty());
  CHECK(idle.terminated);
  CHECK(idle.ended_at > 2.7);
  CHECK(future.status == 200);
  CHECK(future.chunks.empty());
  CHECK(future.terminated);
}

TEST_CASE("fake apiserver fixtures: graceful deletion and finalizers as kube-apiserver 1.26's",
          "[fake-apiserver][fixtures]") {
  // No kubelet, as where the captures were made: nothing finishes a bound pod's deletion.
  FakeApiServer api(Plain(/*kubelet=*/false));
  REQUIRE(api.start_status().ok());
  auto c = Client(api);
  const std::string grace30 = R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":30})";
  const std::string grace0 = R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0})";

  SECTION("a bound pod gets deletionTimestamp (MODIFIED) and stays") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-g1", "node-1")).ok());
    const std::string rv = std::to_string(api.current_rv());
    RawResponse watch;
    std::thread t([&] {
      watch = RawGet(api.port(),
                     "/api/v1/namespaces/team-a/pods?watch=1&fieldSelector=metadata.name%3D"
                     "train-g1&resourceVersion=" + rv + "&timeoutSeconds=1");
    });
    REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.open_watches() == 1; }));
    const time_t before = ::time(nullptr);
    auto res = c->Delete(kPods + "train-g1", grace30, "application/json");
    t.join();
    REQUIRE(res);
    CHECK(res->status == 200);
    const Json body = Json::parse(res->body);
    CHECK(body["kind"] == "Pod");  // the pod, not a Status
    CHECK(body["metadata"]["deletionGracePeriodSeconds"] == 30);
    std::tm tm{};
    const std::string stamp = body["metadata"]["deletionTimestamp"];
    REQUIRE(::strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) != nullptr);
    const time_t at = ::timegm(&tm);
    CHECK(at >= before + 29);
    CHECK(at <= before + 32);
    // In the captured order: ... creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
    // labels ...
    CHECK(std::regex_search(res->body,
                            std::regex("\"creationTimestamp\":\"[^\"]+\",\"deletionTimestamp\":"
                                       "\"[^\"]+\",\"deletionGracePeriodSeconds\":30,\"labels\"")));
    REQUIRE(watch.chunks.size() == 1);
    CHECK(EventType(watch.chunks[0]) == "MODIFIED");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto still = c->Get(kPods + "train-g1");
    REQUIRE(still);
    CHECK(still->status == 200);
    REQUIRE(api.Create("pods", "team-a", Pod("train-g2")).ok());
    REQUIRE(c->Delete(kPods + "train-g2", grace30, "application/json")->status == 200);
    CHECK(c->Get(kPods + "train-g2")->status == 404);  // unbound: gone at once
  }
  SECTION("an unbound pod goes at once whatever its grace period") {
    REQUIRE(api.Create("pods", "team-a", Pod("train-g0")).ok());
    const Json cap = Capture("06-delete-unbound-pod-grace30-immediate.json");
    auto res = c->Delete(kPods + "train-g0", grace30, "application/json");
    REQUIRE(res);
    CHECK(res->status == cap["response"]["status"].get<int>());
    const Json body = Json::parse(res->body);
    CHECK(body["metadata"]["deletionGracePeriodSeconds"] ==
          cap["response"]["body"]["metadata"]["deletionGracePeriodSeconds"]);
    CHECK(body["metadata"].contains("deletionTimestamp"));
    CHECK(c->Get(kPods + "train-g0")->status == cap["after"]["response"]["status"].get<int>());
  }
  SECTION("finalizers hold a deleted pod; clearing them deletes it (only DELETED)") {
    const Json cap = Capture("06-delete-pod-with-finalizer-grace0.json");
    Json pod = Pod("train-f0");
    pod["metadata"]["finalizers"] = Json::array({"example.com/hold"});
    REQUIRE(api.Create("pods", "team-a", pod).ok());
    const std::string rv = std::to_string(api.current_rv());
    RawResponse watch;
    std::thread t([&] {
      watch = RawGet(api.port(),
                     "/api/v1/namespaces/team-a/pods?watch=1&fieldSelector=metadata.name%3D"
                     "train-f0&resourceVersion=" + rv + "&timeoutSeconds=1");
    });
    REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.open_watches() == 1; }));
    auto res = c->Delete(kPods + "train-f0", grace0, "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    const Json deleted = Json::parse(res->body);
    CHECK(deleted["metadata"]["finalizers"] == Json::array({"example.com/hold"}));
    CHECK(deleted["metadata"]["deletionGracePeriodSeconds"] == 0);
    CHECK(c->Get(kPods + "train-f0")->status == cap["afterDelete"]["response"]["status"].get<int>());
    auto removed = c->Patch(kPods + "train-f0",
                            cap["removeFinalizer"]["request"]["bodyRaw"].get<std::string>(),
                            "application/merge-patch+json");
    REQUIRE(removed);
    CHECK(removed->status == 200);
    const Json after = Json::parse(removed->body);
    CHECK_FALSE(after["metadata"].contains("finalizers"));
    // The answer is the object as the write left it, at the version before the deletion.
    CHECK(after["metadata"]["resourceVersion"] == deleted["metadata"]["resourceVersion"]);
    CHECK(c->Get(kPods + "train-f0")->status == cap["afterRemove"]["response"]["status"].get<int>());
    t.join();
    std::vector<std::string> types, captured;
    for (const std::string& chunk : watch.chunks) types.push_back(EventType(chunk));
    for (const Json& chunk : cap["watch"]["response"]["chunks"]) captured.push_back(EventType(chunk));
    CHECK(types == captured);
    REQUIRE(watch.chunks.size() == 2);
    // The DELETED event still lists the finalizer.
    CHECK(Json::parse(watch.chunks[1])["object"]["metadata"]["finalizers"] ==
          Json::array({"example.com/hold"}));
  }
}

TEST_CASE("fake apiserver fixtures: its kubelet ends a terminating pod after its grace period",
          "[fake-apiserver]") {
  FakeApiServer api(Plain(/*kubelet=*/true));
  REQUIRE(api.start_status().ok());
  auto c = Client(api);
  REQUIRE(api.Create("pods", "team-a", Pod("victim", "node-1", /*grace=*/1)).ok());
  Json held = Pod("held", "node-1", /*grace=*/0);
  held["metadata"]["finalizers"] = Json::array({"example.com/hold"});
  REQUIRE(api.Create("pods", "team-a", held).ok());
  const auto start = Clock::now();
  auto res = c->Post(kPods + "victim/eviction", Eviction("victim").dump(), "application/json");
  REQUIRE(res);
  CHECK(res->status == 201);
  // Evicted pods do not vanish at once: terminating for their grace period.
  const std::optional<Json> terminating = api.Get("pods", "team-a", "victim");
  REQUIRE(terminating.has_value());
  CHECK((*terminating)["metadata"]["deletionGracePeriodSeconds"] == 1);
  REQUIRE(api.WaitFor([](FakeApiServer& s) { return !s.Get("pods", "team-a", "victim"); },
                      std::chrono::seconds(3)));
  CHECK(Clock::now() - start >= std::chrono::milliseconds(900));
  // A finalizer holds a pod whose containers are gone; clearing it deletes the pod.
  REQUIRE(api.DeleteGracefully("pods", "team-a", "held").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(api.Get("pods", "team-a", "held").has_value());
  REQUIRE(c->Patch(kPods + "held", R"({"metadata":{"finalizers":null}})",
                   "application/merge-patch+json")
              ->status == 200);
  CHECK_FALSE(api.Get("pods", "team-a", "held").has_value());
}

TEST_CASE("fake apiserver fixtures: lists honour resourceVersion and resourceVersionMatch",
          "[fake-apiserver]") {
  FakeApiServer api(Plain(true, /*too_large_rv_wait_ms=*/2000));
  REQUIRE(api.start_status().ok());
  auto c = Client(api);
  Json a = Pod("a");
  a["metadata"]["annotations"] = {{"v", "1"}};
  REQUIRE(api.Create("pods", "team-a", a).ok());
  const int64_t after_a = api.current_rv();
  a = api.Get("pods", "team-a", "a").value();
  a["metadata"]["annotations"]["v"] = "2";
  REQUIRE(api.Update("pods", "team-a", a).ok());
  REQUIRE(api.Create("pods", "team-a", Pod("b")).ok());
  const std::string at = std::to_string(after_a);

  for (const std::string& query : {"resourceVersion=" + at + "&resourceVersionMatch=Exact",
                                   "resourceVersion=" + at + "&limit=10"}) {
    INFO(query);
    const Json exact = Json::parse(c->Get("/api/v1/pods?" + query)->body);
    CHECK(exact["metadata"]["resourceVersion"] == at);
    REQUIRE(exact["items"].size() == 1);
    CHECK(exact["items"][0]["metadata"]["annotations"]["v"] == "1");
  }
  const Json newer =
      Json::parse(c->Get("/api/v1/pods?resourceVersion=" + at + "&resourceVersionMatch=NotOlderThan")
                      ->body);
  CHECK(newer["metadata"]["resourceVersion"] == std::to_string(api.current_rv()));
  CHECK(newer["items"].size() == 2);

  // Combinations kube-apiserver's validation refuses.
  for (const std::string& query : std::vector<std::string>{
           "resourceVersionMatch=Exact", "resourceVersion=0&resourceVersionMatch=Exact",
           "resourceVersion=" + at + "&resourceVersionMatch=Newest",
           "resourceVersionMatch=NotOlderThan&resourceVersion=1&continue=x"}) {
    INFO(query);
    auto res = c->Get("/api/v1/pods?" + query);
    REQUIRE(res);
    CHECK(res->status == 422);
    const Json s = Json::parse(res->body);
    CHECK(s["reason"] == "Invalid");
    CHECK(s["details"]["kind"] == "ListOptions");
    CHECK(s["details"]["group"] == "meta.k8s.io");
    CHECK(s["details"]["causes"][0]["field"] == "resourceVersionMatch");
  }

  // A list from a version the server reaches while it waits is served.
  const int64_t want = api.current_rv() + 1;
  bool created = false;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    created = api.Create("pods", "team-a", Pod("c")).ok();
  });
  auto res = c->Get("/api/v1/pods?resourceVersion=" + std::to_string(want));
  writer.join();
  CHECK(created);
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(Json::parse(res->body)["items"].size() == 3);
}

TEST_CASE("fake apiserver fixtures: strategic merge patches merge lists by key",
          "[fake-apiserver]") {
  FakeApiServer api(Plain());
  REQUIRE(api.start_status().ok());
  auto c = Client(api);
  const Json cap = Capture("11-patch-node-status-strategic.json");
  Json node = {{"metadata", {{"name", "node-1"}}},
               {"status",
                {{"conditions",
                  Json::array({{{"type", "MemoryPressure"}, {"status", "False"}},
                               {{"type", "Ready"},
                                {"status", "False"},
                                {"lastTransitionTime", "2026-11-24T09:11:42Z"}}})}}}};
  REQUIRE(api.Create("nodes", "", node).ok());
  auto res = c->Patch("/api/v1/nodes/node-1/status", cap["request"]["bodyRaw"].get<std::string>(),
                      "application/strategic-merge-patch+json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const Json conditions = Json::parse(res->body)["status"]["conditions"];
  REQUIRE(conditions.size() == 2);  // merged by type, not replaced
  CHECK(conditions[0]["type"] == "MemoryPressure");
  // Ready as the capture has it: patched fields, lastTransitionTime kept.
  CHECK(conditions[1] == cap["response"]["body"]["status"]["conditions"][0]);

  // Annotations (what the capture patched) and the directives.
  Json pod = Pod("train-0");
  pod["metadata"]["finalizers"] = Json::array({"a/x", "b/y"});
  pod["spec"]["containers"].push_back({{"name", "side"}, {"image", "busybox"}});
  REQUIRE(api.Create("pods", "team-a", pod).ok());
  const Json smp = Capture("07-patch-pod-strategic-merge.json");
  res = c->Patch(kPods + "train-0", smp["request"]["bodyRaw"].get<std::string>(),
                 "application/strategic-merge-patch+json");
  REQUIRE(res);
  CHECK(Json::parse(res->body)["metadata"]["annotations"] ==
        smp["response"]["body"]["metadata"]["annotations"]);
  res = c->Patch(kPods + "train-0",
                 R"({"metadata":{"finalizers":["c/z"],"$deleteFromPrimitiveList/finalizers":["a/x"]},
                     "spec":{"containers":[{"name":"side","image":"alpine"}]}})",
                 "application/strategic-merge-patch+json");
  REQUIRE(res);
  const Json patched = Json::parse(res->body);
  CHECK(patched["metadata"]["finalizers"] == Json::array({"b/y", "c/z"}));
  REQUIRE(patched["spec"]["containers"].size() == 2);
  CHECK(patched["spec"]["containers"][0]["image"] == "busybox");
  CHECK(patched["spec"]["containers"][1]["image"] == "alpine");
  // The merge patch berth sends: one annotation added, one removed with null, as captured.
  const Json merge = Capture("07-patch-pod-merge-patch.json");
  res = c->Patch(kPods + "train-0", merge["request"]["bodyRaw"].get<std::string>(),
                 "application/merge-patch+json");
  REQUIRE(res);
  CHECK(Json::parse(res->body)["metadata"]["annotations"] ==
        merge["response"]["body"]["metadata"]["annotations"]);
  // Custom resources take no strategic merge patch.
  Json pool = Capture("12-crd-pool-create.json")["response"]["body"];
  pool["metadata"].erase("resourceVersion");
  REQUIRE(api.Create("pools", "", pool).ok());
  const std::string name = pool["metadata"]["name"];
  res = c->Patch("/apis/berth.io/v1alpha1/pools/" + name, R"({"spec":{}})",
                 "application/strategic-merge-patch+json");
  REQUIRE(res);
  CHECK(res->status == 415);
}

}  // namespace
}  // namespace berth::testing
