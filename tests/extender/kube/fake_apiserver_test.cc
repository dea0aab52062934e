// Self-tests of the fake API server (tests/testing/fake_apiserver.h): driven by cpp-httplib's own
// HTTPS client, with server verification on, they pin the protocol behaviour berth's Kubernetes
// client is tested against (authentication, pagination, watch streams and their failure modes, the
// pod subresources, patches, Leases, injected failures, restarts).

#include "tests/testing/fake_apiserver.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/testing/files.h"
#include "tests/testing/tls_certs.h"

namespace berth::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kToken[] = "test-token";

std::unique_ptr<httplib::SSLClient> Client(const FakeApiServer& server,
                                           const std::string& token = kToken) {
  auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", server.port());
  c->set_ca_cert_path(server.tls().ca_cert_file);
  c->enable_server_certificate_verification(true);
  if (!token.empty()) c->set_bearer_token_auth(token);
  c->set_connection_timeout(2, 0);
  c->set_read_timeout(5, 0);
  c->set_tcp_nodelay(true);  // a POST's headers and body go out in two writes
  return c;
}

Json Body(const httplib::Result& res) {
  REQUIRE(res);
  Json j = Json::parse(res->body, nullptr, false);
  INFO(res->body);
  REQUIRE(!j.is_discarded());
  return j;
}

// Asserts a Status error: HTTP code, the Status's own code and reason.
Json RequireStatus(const httplib::Result& res, int code, const std::string& reason) {
  REQUIRE(res);
  INFO(res->body);
  CHECK(res->status == code);
  Json s = Body(res);
  CHECK(s["kind"] == "Status");
  CHECK(s["apiVersion"] == "v1");
  CHECK(s["status"] == "Failure");
  CHECK(s["code"] == code);
  CHECK(s["reason"] == reason);
  return s;
}

Json Pod(const std::string& name, const std::string& ns, const std::string& node = "",
         const std::string& phase = "Pending") {
  Json spec = {{"schedulerName", "berth-scheduler"},
               {"containers", Json::array({{{"name", "main"}, {"image", "busybox"}}})}};
  if (!node.empty()) spec["nodeName"] = node;
  return {{"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", spec},
          {"status", {{"phase", phase}}}};
}

std::vector<std::string> Names(const Json& items) {
  std::vector<std::string> out;
  for (const Json& i : items) out.push_back(i["metadata"]["name"].get<std::string>());
  return out;
}

// A watch request on its own connection and thread, collecting the events it receives.
class WatchStream {
 public:
  WatchStream(const FakeApiServer& server, const std::string& path, httplib::Headers headers = {})
      : client_(Client(server)) {
    client_->set_default_headers(std::move(headers));
    thread_ = std::thread([this, path] {
      auto res = client_->Get(
          path,
          [this](const httplib::Response& r) {
            std::lock_guard<std::mutex> lk(mu_);
            status_ = r.status;
            content_type_ = r.get_header_value("Content-Type");
            content_encoding_ = r.get_header_value("Content-Encoding");
            transfer_encoding_ = r.get_header_value("Transfer-Encoding");
            return true;
          },
          [this](const char* data, size_t n) {
            std::lock_guard<std::mutex> lk(mu_);
            received_ += n;
            buffer_.append(data, n);
            for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
              events_.push_back(Json::parse(buffer_.substr(0, nl), nullptr, false));
              buffer_.erase(0, nl + 1);
            }
            cv_.notify_all();
            return true;
          });
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
      error_ = res.error();
      if (res) body_ = res->body;
      cv_.notify_all();
    });
  }
  ~WatchStream() {
    client_->stop();
    thread_.join();
  }

  /// Bytes of event lines received so far (after de-chunking).
  size_t received() {
    std::lock_guard<std::mutex> lk(mu_);
    return received_;
  }
  /// Waits until at least `n` events arrived; returns all of them so far.
  std::vector<Json> WaitEvents(size_t n, milliseconds timeout = milliseconds(3000)) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return events_.size() >= n || done_; });
    return events_;
  }
  /// Waits for the stream to end; returns whether it did.
  bool WaitDone(milliseconds timeout = milliseconds(3000)) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return done_; });
  }
  std::vector<Json> events() {
    std::lock_guard<std::mutex> lk(mu_);
    return events_;
  }
  httplib::Error error() {
    std::lock_guard<std::mutex> lk(mu_);
    return error_;
  }
  int status() {
    std::lock_guard<std::mutex> lk(mu_);
    return status_;
  }
  std::string content_type() {
    std::lock_guard<std::mutex> lk(mu_);
    return content_type_;
  }
  std::string content_encoding() {
    std::lock_guard<std::mutex> lk(mu_);
    return content_encoding_;
  }
  std::string transfer_encoding() {
    std::lock_guard<std::mutex> lk(mu_);
    return transfer_encoding_;
  }
  std::string body() {
    std::lock_guard<std::mutex> lk(mu_);
    return body_;
  }

 private:
  std::unique_ptr<httplib::SSLClient> client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;
  size_t received_ = 0;
  std::vector<Json> events_;
  bool done_ = false;
  httplib::Error error_ = httplib::Error::Success;
  int status_ = 0;
  std::string content_type_, content_encoding_, transfer_encoding_, body_;
};

bool WaitWatches(FakeApiServer& server, int n, const std::string& resource = "") {
  return server.WaitFor([&](FakeApiServer& s) { return s.open_watches(resource) == n; });
}

TEST_CASE("fake apiserver: TLS verifies with its CA and fails with another CA",
          "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  REQUIRE(server.port() > 0);
  CHECK(server.url() == "https://127.0.0.1:" + std::to_string(server.port()));

  auto res = Client(server)->Get("/api/v1/nodes", {{"Accept-Encoding", "br, gzip"}});
  Json list = Body(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type") == "application/json");
  CHECK_FALSE(res->has_header("Content-Encoding"));  // small replies are never compressed
  CHECK(list["kind"] == "NodeList");
  CHECK(list["items"] == Json::array());

  TlsMaterial other = MakeTlsMaterial();
  REQUIRE(other.ok());
  httplib::SSLClient untrusting("127.0.0.1", server.port());
  untrusting.set_ca_cert_path(other.ca_cert_file);
  untrusting.enable_server_certificate_verification(true);
  untrusting.set_bearer_token_auth(kToken);
  auto refused = untrusting.Get("/api/v1/nodes");
  CHECK_FALSE(refused);
  CHECK(refused.error() == httplib::Error::SSLServerVerification);
  RemoveTlsMaterial(other);
}

TEST_CASE("fake apiserver: bearer tokens are checked and can rotate", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());

  Json s = RequireStatus(Client(server, "")->Get("/api/v1/nodes"), 401, "Unauthorized");
  CHECK(s["message"] == "Unauthorized");
  RequireStatus(Client(server, "wrong")->Get("/api/v1/nodes"), 401, "Unauthorized");
  CHECK(Client(server)->Get("/api/v1/nodes")->status == 200);

  server.SetToken("rotated");
  RequireStatus(Client(server, kToken)->Get("/api/v1/nodes"), 401, "Unauthorized");
  CHECK(Client(server, "rotated")->Get("/api/v1/nodes")->status == 200);

  const auto calls = server.calls();
  REQUIRE(calls.size() == 5);
  CHECK(calls[0].user.empty());
  CHECK(calls[0].status == 401);
  CHECK(calls[2].user == "token");
  CHECK(calls[2].status == 200);
}

TEST_CASE("fake apiserver: client certificates authenticate when required", "[fake-apiserver]") {
  FakeApiServer::Options options;
  options.require_client_cert = true;
  FakeApiServer server(options);
  REQUIRE(server.start_status().ok());
  const TlsMaterial& tls = server.tls();

  httplib::SSLClient with_cert("127.0.0.1", server.port(), tls.client_cert_file,
                               tls.client_key_file);
  with_cert.set_ca_cert_path(tls.ca_cert_file);
  with_cert.enable_server_certificate_verification(true);
  auto ok = with_cert.Get("/api/v1/nodes");  // no token: the certificate is the identity
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(server.calls().back().user == "berth-client");

  auto no_cert = Client(server)->Get("/api/v1/nodes");
  CHECK_FALSE(no_cert);

  TlsMaterial other = MakeTlsMaterial();
  REQUIRE(other.ok());
  httplib::SSLClient foreign_cert("127.0.0.1", server.port(), other.client_cert_file,
                                  other.client_key_file);
  foreign_cert.set_ca_cert_path(tls.ca_cert_file);
  foreign_cert.enable_server_certificate_verification(true);
  CHECK_FALSE(foreign_cert.Get("/api/v1/nodes"));
  RemoveTlsMaterial(other);
  CHECK(server.calls().size() == 1);

  const std::string kubeconfig = server.Kubeconfig(true);
  CHECK(kubeconfig.find("server: " + server.url()) != std::string::npos);
  CHECK(kubeconfig.find("client-key-data: ") != std::string::npos);
}

TEST_CASE(
    "fake apiserver: lists paginate on one snapshot; expired continue "
    "tokens get 410",
    "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  for (const char* name : {"p1", "p2", "p3"})
    REQUIRE(server.Create("pods", "a", Pod(name, "a")).ok());
  for (const char* name : {"q1", "q2"}) REQUIRE(server.Create("pods", "b", Pod(name, "b")).ok());
  auto client = Client(server);

  Json page1 = Body(client->Get("/api/v1/pods?limit=2"));
  CHECK(page1["kind"] == "PodList");
  CHECK(page1["apiVersion"] == "v1");
  CHECK(Names(page1["items"]) == std::vector<std::string>{"p1", "p2"});
  CHECK_FALSE(page1["items"][0].contains("kind"));
  const std::string rv = page1["metadata"]["resourceVersion"];
  CHECK(rv == std::to_string(server.current_rv()));
  CHECK(page1["metadata"]["remainingItemCount"] == 3);
  const std::string token1 = page1["metadata"]["continue"];

  // Writes between pages do not show: the pages come from the first page's snapshot.
  REQUIRE(server.Delete("pods", "b", "q1").ok());
  REQUIRE(server.Create("pods", "a", Pod("p4", "a")).ok());

  Json page2 = Body(client->Get("/api/v1/pods?limit=2&continue=" + token1));
  CHECK(Names(page2["items"]) == std::vector<std::string>{"p3", "q1"});
  CHECK(page2["metadata"]["resourceVersion"] == rv);
  Json page3 = Body(client->Get("/api/v1/pods?limit=2&continue=" +
                                page2["metadata"]["continue"].get<std::string>()));
  CHECK(Names(page3["items"]) == std::vector<std::string>{"q2"});
  CHECK_FALSE(page3["metadata"].contains("continue"));

  // A fresh list sees the writes; a namespaced list only its namespace.
  Json fresh = Body(client->Get("/api/v1/pods"));
  CHECK(Names(fresh["items"]) == std::vector<std::string>{"p1", "p2", "p3", "p4", "q2"});
  CHECK(std::stoll(fresh["metadata"]["resourceVersion"].get<std::string>()) > std::stoll(rv));
  CHECK(Names(Body(client->Get("/api/v1/namespaces/b/pods"))["items"]) ==
        std::vector<std::string>{"q2"});

  Json again = Body(client->Get("/api/v1/pods?limit=1"));
  const std::string token = again["metadata"]["continue"];
  server.ExpireContinueTokens();
  Json expired =
      RequireStatus(client->Get("/api/v1/pods?limit=1&continue=" + token), 410, "Expired");
  CHECK(expired["message"].get<std::string>().find("continue parameter is too old") !=
        std::string::npos);
  RequireStatus(client->Get("/api/v1/pods?limit=1&continue=garbage"), 400, "BadRequest");
}

TEST_CASE(
    "fake apiserver: watch replays history from a resourceVersion, then "
    "streams live",
    "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  REQUIRE(server.Create("pods", "ml", Pod("a", "ml")).ok());
  const int64_t after_a = server.current_rv();
  REQUIRE(server.Create("pods", "ml", Pod("b", "ml")).ok());
  Json a_running = Pod("a", "ml", "n1", "Running");
  REQUIRE(server.Update("pods", "ml", a_running).ok());
  REQUIRE(server.Create("nodes", "", {{"metadata", {{"name", "n1"}}}}).ok());  // another resource

  // A client offering compression still gets each event as it happens (never compressed).
  WatchStream watch(server, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(after_a),
                    {{"Accept-Encoding", "br, gzip, deflate"}});
  auto replay = watch.WaitEvents(2);
  REQUIRE(replay.size() == 2);
  CHECK(watch.status() == 200);
  CHECK(watch.content_type() == "application/json");
  CHECK(watch.transfer_encoding() == "chunked");
  CHECK(watch.content_encoding().empty());
  CHECK(replay[0]["type"] == "ADDED");
  CHECK(replay[0]["object"]["metadata"]["name"] == "b");
  CHECK(replay[1]["type"] == "MODIFIED");
  CHECK(replay[1]["object"]["spec"]["nodeName"] == "n1");

  REQUIRE(WaitWatches(server, 1, "pods"));
  REQUIRE(server.Create("pods", "ml", Pod("c", "ml")).ok());
  REQUIRE(server.Update("pods", "ml", Pod("c", "ml", "n1", "Running")).ok());
  auto deleted = server.Delete("pods", "ml", "c");
  REQUIRE(deleted.ok());
  auto events = watch.WaitEvents(5);
  REQUIRE(events.size() == 5);
  CHECK(events[2]["type"] == "ADDED");
  CHECK(events[3]["type"] == "MODIFIED");
  CHECK(events[4]["type"] == "DELETED");
  CHECK(events[4]["object"]["status"]["phase"] == "Running");  // the last state
  CHECK(events[4]["object"]["metadata"]["resourceVersion"] == std::to_string(server.current_rv()));
  int64_t last = after_a;
  for (const Json& e : events) {
    CHECK(e["object"]["kind"] == "Pod");
    CHECK(e["object"]["apiVersion"] == "v1");
    const int64_t rv = std::stoll(e["object"]["metadata"]["resourceVersion"].get<std::string>());
    CHECK(rv > last);
    last = rv;
  }

  // Every byte streamed is counted under the watch's resource (the node written above went to no
  // watch, so nodes count nothing).
  // (The server counts a chunk after writing it, so the client may see it first: wait for the
  // count to catch up.)
  CHECK(watch.received() > 0);
  const uint64_t received = watch.received();
  server.WaitFor([&](FakeApiServer& s) { return s.watch_bytes()["pods"] >= received; });
  CHECK(server.watch_bytes()["pods"] == received);
  CHECK(server.watch_bytes().count("nodes") == 0);

  // resourceVersion 0: the current state as ADDED events first.
  WatchStream from_zero(server, "/api/v1/namespaces/ml/pods?watch=true&resourceVersion=0");
  auto initial = from_zero.WaitEvents(2);
  REQUIRE(initial.size() == 2);
  CHECK(initial[0]["type"] == "ADDED");
  CHECK(initial[1]["type"] == "ADDED");
  CHECK(Names(Json::array({initial[0]["object"], initial[1]["object"]})) ==
        std::vector<std::string>{"a", "b"});
  server.EndWatches();
  CHECK(watch.WaitDone());
  CHECK(from_zero.WaitDone());
}

TEST_CASE("fake apiserver: bookmarks go only to watches that ask for them", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  const std::string rv = std::to_string(server.current_rv());
  WatchStream with(server, "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv);
  WatchStream without(server, "/api/v1/pods?watch=1&resourceVersion=" + rv);
  REQUIRE(WaitWatches(server, 2));
  server.SendBookmarks();
  auto events = with.WaitEvents(1);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["type"] == "BOOKMARK");
  CHECK(events[0]["object"]["kind"] == "Pod");
  // Only the resourceVersion, and the zero values a Pod cannot omit, as kube-apiserver sends it.
  CHECK(events[0]["object"]["metadata"] ==
        Json({{"resourceVersion", rv}, {"creationTimestamp", nullptr}}));
  REQUIRE(server.Create("pods", "ml", Pod("a", "ml")).ok());
  auto plain = without.WaitEvents(1);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0]["type"] == "ADDED");  // no bookmark before it

  FakeApiServer::Options options;
  options.bookmark_interval_ms = 50;
  FakeApiServer periodic(options);
  REQUIRE(periodic.start_status().ok());
  WatchStream timed(periodic, "/api/v1/nodes?watch=1&allowWatchBookmarks=1");
  auto ticks = timed.WaitEvents(2);
  REQUIRE(ticks.size() >= 2);
  CHECK(ticks[0]["type"] == "BOOKMARK");
  CHECK(ticks[1]["type"] == "BOOKMARK");
  CHECK(ticks[1]["object"]["kind"] == "Node");
  server.EndWatches();
  periodic.EndWatches();
}

TEST_CASE("fake apiserver: a watch from a compacted resourceVersion gets 410 Expired",
          "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  const int64_t old_rv = server.current_rv();
  REQUIRE(server.Create("pods", "ml", Pod("a", "ml")).ok());
  REQUIRE(server.Create("pods", "ml", Pod("b", "ml")).ok());
  server.CompactHistory();

  WatchStream watch(server, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(old_rv));
  REQUIRE(watch.WaitDone());
  CHECK(watch.error() == httplib::Error::Success);  // ended cleanly after the event
  CHECK(watch.status() == 200);
  auto events = watch.events();
  REQUIRE(events.size() == 1);
  CHECK(events[0]["type"] == "ERROR");
  const Json& status = events[0]["object"];
  CHECK(status["kind"] == "Status");
  CHECK(status["code"] == 410);
  CHECK(status["reason"] == "Expired");
  CHECK(status["message"] == "too old resource version: " + std::to_string(old_rv) + " (" +
                                 std::to_string(server.current_rv()) + ")");

  // From the compaction point on, a watch works.
  WatchStream current(
      server, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(server.current_rv()));
  REQUIRE(WaitWatches(server, 1));
  server.EndWatches();
  REQUIRE(current.WaitDone());
  CHECK(current.events().empty());

  FakeApiServer::Options options;
  options.watch_410_as_http_status = true;
  FakeApiServer strict(options);
  REQUIRE(strict.start_status().ok());
  REQUIRE(strict.Create("pods", "ml", Pod("a", "ml")).ok());
  strict.CompactHistory();
  RequireStatus(Client(strict)->Get("/api/v1/pods?watch=1&resourceVersion=1000"), 410, "Expired");
}

TEST_CASE("fake apiserver: timeoutSeconds ends a watch cleanly", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  const auto start = Clock::now();
  WatchStream watch(server, "/api/v1/nodes?watch=1&timeoutSeconds=1");
  REQUIRE(watch.WaitDone(milliseconds(4000)));
  CHECK(Clock::now() - start >= milliseconds(500));
  CHECK(watch.error() == httplib::Error::Success);
  CHECK(watch.status() == 200);
  CHECK(watch.events().empty());
  CHECK(WaitWatches(server, 0));
}

TEST_CASE("fake apiserver: watches are cut, ended or failed on demand", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());

  SECTION("DropWatches cuts the stream without its terminating chunk") {
    WatchStream watch(server, "/api/v1/pods?watch=1");
    REQUIRE(WaitWatches(server, 1));
    server.DropWatches();
    REQUIRE(watch.WaitDone());
    CHECK(watch.error() != httplib::Error::Success);
  }
  SECTION("EndWatches ends it cleanly") {
    WatchStream watch(server, "/api/v1/pods?watch=1");
    REQUIRE(WaitWatches(server, 1));
    server.EndWatches();
    REQUIRE(watch.WaitDone());
    CHECK(watch.error() == httplib::Error::Success);
  }
  SECTION("InjectWatchError sends an ERROR event to that resource's watches only") {
    WatchStream pods(server, "/api/v1/pods?watch=1");
    WatchStream nodes(server, "/api/v1/nodes?watch=1");
    REQUIRE(WaitWatches(server, 2));
    server.InjectWatchError("pods", 500);
    REQUIRE(pods.WaitDone());
    auto events = pods.events();
    REQUIRE(events.size() == 1);
    CHECK(events[0]["type"] == "ERROR");
    CHECK(events[0]["object"]["code"] == 500);
    CHECK(events[0]["object"]["reason"] == "InternalError");
    CHECK(server.open_watches("nodes") == 1);
    server.EndWatches();
    CHECK(nodes.WaitDone());
  }
  SECTION("a client that goes away frees its watch") {
    {
      WatchStream watch(server, "/api/v1/pods?watch=1");
      REQUIRE(WaitWatches(server, 1));
    }
    CHECK(WaitWatches(server, 0));
  }
}

TEST_CASE("fake apiserver: plain HTTP mode serves the same protocol", "[fake-apiserver]") {
  FakeApiServer::Options options;
  options.tls = false;
  FakeApiServer server(options);
  REQUIRE(server.start_status().ok());
  CHECK(server.url() == "http://127.0.0.1:" + std::to_string(server.port()));
  httplib::Client client("127.0.0.1", server.port());
  client.set_tcp_nodelay(true);
  RequireStatus(client.Get("/api/v1/nodes"), 401, "Unauthorized");
  client.set_bearer_token_auth(kToken);
  REQUIRE(server.Create("nodes", "", {{"metadata", {{"name", "n1"}}}}).ok());
  CHECK(Names(Body(client.Get("/api/v1/nodes"))["items"]) == std::vector<std::string>{"n1"});
  CHECK(server.Kubeconfig().find("certificate-authority-data") == std::string::npos);

  // A watch whose client leaves is noticed without an event to write.
  auto watcher = std::make_unique<httplib::Client>("127.0.0.1", server.port());
  watcher->set_bearer_token_auth(kToken);
  std::thread t(
      [&] { watcher->Get("/api/v1/nodes?watch=1", [](const char*, size_t) { return true; }); });
  REQUIRE(WaitWatches(server, 1));
  watcher->stop();
  t.join();
  CHECK(WaitWatches(server, 0));
}

TEST_CASE("fake apiserver: pods/binding binds once", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  auto created = server.Create("pods", "ml", Pod("train-0", "ml"));
  REQUIRE(created.ok());
  const std::string uid = (*created)["metadata"]["uid"];
  CHECK(uid.size() == 36);
  auto client = Client(server);
  const std::string path = "/api/v1/namespaces/ml/pods/train-0/binding";
  Json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata",
                   {{"name", "train-0"},
                    {"namespace", "ml"},
                    {"uid", uid},
                    {"annotations", {{"berth.io/gpu-ids", "2,3"}}}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "gpu-a"}}}};

  auto res = client->Post(path, binding.dump(), "application/json");
  Json ok = Body(res);
  CHECK(res->status == 201);
  CHECK(ok == Json({{"kind", "Status"},
                    {"apiVersion", "v1"},
                    {"metadata", Json::object()},
                    {"status", "Success"},
                    {"code", 201}}));
  auto pod = server.Get("pods", "ml", "train-0");
  REQUIRE(pod);
  CHECK((*pod)["spec"]["nodeName"] == "gpu-a");
  CHECK((*pod)["metadata"]["annotations"]["berth.io/gpu-ids"] == "2,3");
  CHECK((*pod)["status"]["conditions"][0]["type"] == "PodScheduled");
  CHECK((*pod)["status"]["conditions"][0]["status"] == "True");

  binding["target"]["name"] = "gpu-b";
  Json again =
      RequireStatus(client->Post(path, binding.dump(), "application/json"), 409, "Conflict");
  CHECK(again["message"].get<std::string>().find(
            "pod train-0 is already assigned to node \"gpu-a\"") != std::string::npos);
  CHECK(again["details"]["kind"] == "pods/binding");

  Json stranger = binding;
  stranger["metadata"]["name"] = "ghost";
  Json missing = RequireStatus(
      client->Post("/api/v1/namespaces/ml/pods/ghost/binding", stranger.dump(), "application/json"),
      404, "NotFound");
  CHECK(missing["message"] == "pods \"ghost\" not found");

  REQUIRE(server.Create("pods", "ml", Pod("train-1", "ml")).ok());
  const std::string path1 = "/api/v1/namespaces/ml/pods/train-1/binding";
  Json b1 = binding;
  b1["metadata"]["name"] = "train-1";
  RequireStatus(client->Post(path1, binding.dump(), "application/json"), 400, "BadRequest");
  Json no_target = b1;
  no_target["target"].erase("name");
  RequireStatus(client->Post(path1, no_target.dump(), "application/json"), 422, "Invalid");
  RequireStatus(client->Post(path1, b1.dump(), "application/json"), 409,
                "Conflict");  // uid

  CHECK(server.bindings().size() == 1);
  CHECK(server.bindings()[0]["target"]["name"] == "gpu-a");
}

TEST_CASE(
    "fake apiserver: pods/eviction deletes unless a disruption budget "
    "blocks it",
    "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  // Grace period 0: the (fake) kubelet removes it as soon as it is evicted.
  Json victim = Pod("victim", "ml", "n1", "Running");
  victim["spec"]["terminationGracePeriodSeconds"] = 0;
  REQUIRE(server.Create("pods", "ml", victim).ok());
  auto client = Client(server);
  const std::string path = "/api/v1/namespaces/ml/pods/victim/eviction";
  const Json eviction = {{"apiVersion", "policy/v1"},
                         {"kind", "Eviction"},
                         {"metadata", {{"name", "victim"}, {"namespace", "ml"}}}};

  server.SetEvictionBlocked("ml", "victim", true);
  Json blocked = RequireStatus(client->Post(path, eviction.dump(), "application/json"), 429,
                               "TooManyRequests");
  CHECK(blocked["message"] == "Cannot evict pod as it would violate the pod's disruption budget.");
  CHECK(server.Get("pods", "ml", "victim"));

  Json old_version = eviction;
  old_version["apiVersion"] = "policy/v1beta2";
  RequireStatus(client->Post(path, old_version.dump(), "application/json"), 400, "BadRequest");

  server.SetEvictionBlocked("ml", "victim", false);
  auto res = client->Post(path, eviction.dump(), "application/json");
  Json ok = Body(res);
  CHECK(res->status == 201);
  CHECK(ok["status"] == "Success");
  CHECK_FALSE(server.Get("pods", "ml", "victim"));
  RequireStatus(client->Post(path, eviction.dump(), "application/json"), 404, "NotFound");
  CHECK(server.evictions().size() == 1);
}

TEST_CASE("fake apiserver: merge patches apply; other content types get 415", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  Json pod = Pod("a", "ml");
  pod["metadata"]["annotations"] = {{"keep", "1"}, {"stale", "x"}};
  REQUIRE(server.Create("pods", "ml", pod).ok());
  const int64_t before = server.current_rv();
  auto client = Client(server);
  const std::string path = "/api/v1/namespaces/ml/pods/a";
  const Json patch = {
      {"metadata", {{"annotations", {{"berth.io/queue", "q1"}, {"stale", nullptr}}}}}};

  auto res = client->Patch(path, patch.dump(), "application/merge-patch+json");
  Json patched = Body(res);
  CHECK(res->status == 200);
  CHECK(patched["kind"] == "Pod");
  CHECK(patched["metadata"]["annotations"] == Json({{"keep", "1"}, {"berth.io/queue", "q1"}}));
  CHECK(patched["metadata"]["resourceVersion"] == std::to_string(before + 1));
  CHECK((*server.Get("pods", "ml", "a"))["metadata"]["annotations"].size() == 2);

  CHECK(client->Patch(path, patch.dump(), "application/strategic-merge-patch+json")->status == 200);
  CHECK(server.current_rv() == before + 1);  // nothing changed: no write

  Json s = RequireStatus(client->Patch(path, patch.dump(), "application/json"), 415,
                         "UnsupportedMediaType");
  const Json stale = {
      {"metadata", {{"resourceVersion", std::to_string(before)}, {"labels", {{"x", "y"}}}}}};
  RequireStatus(client->Patch(path, stale.dump(), "application/merge-patch+json"), 409, "Conflict");
  CHECK(server.patches().size() == 2);
}

TEST_CASE("fake apiserver: leases are created once and updated optimistically",
          "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  auto client = Client(server);
  const std::string collection = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
  const std::string path = collection + "/berth";
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "berth"}, {"namespace", "kube-system"}}},
                {"spec", {{"holderIdentity", "replica-a"}, {"leaseDurationSeconds", 15}}}};

  Json missing = RequireStatus(client->Get(path), 404, "NotFound");
  CHECK(missing["message"] == "leases.coordination.k8s.io \"berth\" not found");
  auto created = client->Post(collection, lease.dump(), "application/json");
  Json stored = Body(created);
  CHECK(created->status == 201);
  CHECK(stored["kind"] == "Lease");
  RequireStatus(client->Post(collection, lease.dump(), "application/json"), 409, "AlreadyExists");

  Json renew = stored;
  renew["spec"]["renewTime"] = "2030-01-01T00:00:00.000000Z";
  auto updated = client->Put(path, renew.dump(), "application/json");
  Json after = Body(updated);
  CHECK(updated->status == 200);
  CHECK(after["spec"]["renewTime"] == "2030-01-01T00:00:00.000000Z");
  CHECK(after["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]);

  renew["spec"]["holderIdentity"] = "replica-b";  // still carries the old resourceVersion
  Json conflict =
      RequireStatus(client->Put(path, renew.dump(), "application/json"), 409, "Conflict");
  CHECK(conflict["message"] ==
        "Operation cannot be fulfilled on leases.coordination.k8s.io "
        "\"berth\": the object has "
        "been modified; please apply your changes to the latest version and "
        "try again");
  renew["metadata"].erase("resourceVersion");
  RequireStatus(client->Put(path, renew.dump(), "application/json"), 422, "Invalid");
  CHECK((*server.Get("leases", "kube-system", "berth"))["spec"]["holderIdentity"] == "replica-a");
}

TEST_CASE("fake apiserver: injected failures answer their code with Retry-After",
          "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  InjectedFailure failure;
  failure.method = "GET";
  failure.path_prefix = "/api/v1/nodes";
  failure.code = 429;
  failure.retry_after_seconds = 3;
  failure.times = 2;
  server.InjectFailure(failure);
  auto client = Client(server);

  CHECK(client->Get("/api/v1/pods")->status == 200);  // another path
  CHECK(client->Post("/api/v1/nodes", R"({"metadata":{"name":"n1"}})",
                     "application/json")
            ->status == 201);  // another method
  for (int i = 0; i < 2; ++i) {
    auto res = client->Get("/api/v1/nodes");
    RequireStatus(res, 429, "TooManyRequests");
    CHECK(res->get_header_value("Retry-After") == "3");
  }
  CHECK(client->Get("/api/v1/nodes")->status == 200);

  failure = InjectedFailure{};
  failure.code = 503;
  failure.times = -1;
  server.InjectFailure(failure);
  RequireStatus(client->Get("/api/v1/nodes/n1"), 503, "ServiceUnavailable");
  RequireStatus(client->Get("/api/v1/pods"), 503, "ServiceUnavailable");
  server.ClearFailures();
  CHECK(client->Get("/api/v1/nodes/n1")->status == 200);
}

TEST_CASE("fake apiserver: Stop and Start keep the state on the same port", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  REQUIRE(server.Create("pods", "ml", Pod("a", "ml")).ok());
  const int port = server.port();
  const int64_t rv = server.current_rv();
  WatchStream watch(server, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(rv));
  REQUIRE(WaitWatches(server, 1));
  {
    auto idle = Client(server);  // a kept-alive idle connection must not hold Stop up
    idle->set_keep_alive(true);
    REQUIRE(idle->Get("/api/v1/nodes"));
    const auto start = Clock::now();
    server.Stop();
    CHECK(Clock::now() - start < std::chrono::seconds(2));
  }
  CHECK_FALSE(server.running());
  REQUIRE(watch.WaitDone());
  CHECK(watch.error() != httplib::Error::Success);
  auto refused = Client(server)->Get("/api/v1/pods");
  CHECK_FALSE(refused);
  CHECK(refused.error() == httplib::Error::Connection);

  REQUIRE(server.Create("pods", "ml", Pod("b", "ml")).ok());  // state changes while down
  REQUIRE(server.Start().ok());
  CHECK(server.port() == port);
  CHECK(server.current_rv() == rv + 1);
  Json list = Body(Client(server)->Get("/api/v1/pods"));
  CHECK(Names(list["items"]) == std::vector<std::string>{"a", "b"});
  WatchStream resumed(server, "/api/v1/pods?watch=1&resourceVersion=" + std::to_string(rv));
  auto events = resumed.WaitEvents(1);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["object"]["metadata"]["name"] == "b");
  server.EndWatches();
}

TEST_CASE("fake apiserver: field selectors filter lists and watches", "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  REQUIRE(server.Create("pods", "ml", Pod("running", "ml", "n1", "Running")).ok());
  REQUIRE(server.Create("pods", "ml", Pod("done", "ml", "n1", "Succeeded")).ok());
  REQUIRE(server.Create("pods", "ml", Pod("pending", "ml")).ok());
  REQUIRE(server.Create("pods", "ml", Pod("failed", "ml", "n2", "Failed")).ok());
  auto client = Client(server);

  // status.phase!=Succeeded,status.phase!=Failed, URL-encoded as a client sends it.
  const std::string active = "status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed";
  CHECK(Names(Body(client->Get("/api/v1/pods?fieldSelector=" + active))["items"]) ==
        std::vector<std::string>{"pending", "running"});
  CHECK(Names(Body(client->Get("/api/v1/pods?fieldSelector=spec.nodeName%3D"))["items"]) ==
        std::vector<std::string>{"pending"});
  CHECK(Names(Body(client->Get("/api/v1/"
                               "pods?fieldSelector=spec.nodeName%3D%3Dn1%2Cspec."
                               "schedulerName%3Dberth-scheduler"))["items"]) ==
        std::vector<std::string>{"done", "running"});
  Json bad =
      RequireStatus(client->Get("/api/v1/pods?fieldSelector=spec.foo%3Dx"), 400, "BadRequest");
  CHECK(bad["message"] == "field label not supported: spec.foo");

  REQUIRE(server.Create("nodes", "", {{"metadata", {{"name", "n1"}}}}).ok());
  REQUIRE(server
              .Create("nodes", "",
                      {{"metadata", {{"name", "n2"}}}, {"spec", {{"unschedulable", true}}}})
              .ok());
  CHECK(
      Names(Body(client->Get("/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse"))["items"]) ==
      std::vector<std::string>{"n1"});

  WatchStream watch(server, "/api/v1/pods?watch=1&fieldSelector=" + active +
                                "&resourceVersion=" + std::to_string(server.current_rv()));
  REQUIRE(WaitWatches(server, 1, "pods"));
  REQUIRE(server.Update("pods", "ml", Pod("running", "ml", "n1", "Succeeded")).ok());  // leaves
  REQUIRE(server.Update("pods", "ml", Pod("failed", "ml", "n2", "Running")).ok());     // enters
  REQUIRE(server.Update("pods", "ml", Pod("done", "ml", "n1", "Failed")).ok());        // never in
  REQUIRE(server.Update("pods", "ml", Pod("pending", "ml", "n3", "Pending")).ok());    // stays
  auto events = watch.WaitEvents(3);
  REQUIRE(events.size() == 3);
  CHECK(events[0]["type"] == "DELETED");
  CHECK(events[0]["object"]["metadata"]["name"] == "running");
  CHECK(events[0]["object"]["status"]["phase"] == "Running");  // its last matching state
  CHECK(events[1]["type"] == "ADDED");
  CHECK(events[1]["object"]["metadata"]["name"] == "failed");
  CHECK(events[2]["type"] == "MODIFIED");
  CHECK(events[2]["object"]["metadata"]["name"] == "pending");
  server.EndWatches();
  REQUIRE(watch.WaitDone());
  CHECK(watch.events().size() == 3);
}

TEST_CASE("fake apiserver: the phase field selector lists what kube-apiserver 1.26 listed",
          "[fake-apiserver][fixtures]") {
  // The capture: four Pending pods listed, the Succeeded pod train-done left out.
  const Json capture = Json::parse(ReadTestFile(
      std::string(BERTH_FIXTURES_DIR) +
      "/../kube-apiserver-1.26/01-list-pods-fieldselector-not-finished.json"));
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  std::vector<std::string> listed;
  for (Json item : capture["response"]["body"]["items"]) {
    listed.push_back(item["metadata"]["name"]);
    item["metadata"].erase("resourceVersion");
    REQUIRE(server.Create("pods", item["metadata"]["namespace"], item).ok());
  }
  REQUIRE(listed.size() == 4);
  REQUIRE(server.Create("pods", "team-a", Pod("train-done", "team-a", "node-1", "Succeeded")).ok());
  REQUIRE(server.Create("pods", "team-a", Pod("train-failed", "team-a", "node-1", "Failed")).ok());
  auto client = Client(server);
  // The query exactly as captured: the selector unescaped.
  const std::string path = capture["request"]["path"];
  CHECK(Names(Body(client->Get(path))["items"]) == listed);
}

TEST_CASE("fake apiserver: calls record the RBAC verb, resource and subresource",
          "[fake-apiserver]") {
  FakeApiServer server;
  REQUIRE(server.start_status().ok());
  REQUIRE(server.Create("pods", "ml", Pod("a", "ml")).ok());
  REQUIRE(server.Create("pods", "ml", Pod("b", "ml")).ok());
  auto client = Client(server);
  const std::string pods = "/api/v1/namespaces/ml/pods";
  const Json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"generateName", "a."}, {"namespace", "ml"}}},
                      {"reason", "Scheduled"}};
  const Json new_event = {{"apiVersion", "events.k8s.io/v1"},
                          {"kind", "Event"},
                          {"metadata", {{"name", "a.1"}}},
                          {"reason", "Scheduled"}};

  client->Get("/api/v1/pods?limit=500");
  client->Get(pods + "/a");
  client->Post(pods + "/a/binding",
               R"({"metadata":{"name":"a"},"target":{"kind":"Node","name":"n1"}})",
               "application/json");
  client->Patch(pods + "/a/status", R"({"status":{"nominatedNodeName":"n1"}})",
                "application/merge-patch+json");
  client->Post(pods + "/b/eviction",
               R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"b"}})",
               "application/json");
  auto created_event =
      client->Post("/api/v1/namespaces/ml/events", event.dump(), "application/json");
  client->Post("/apis/events.k8s.io/v1/namespaces/ml/events", new_event.dump(), "application/json");
  client->Put("/apis/coordination.k8s.io/v1/namespaces/ml/leases/x", "{}", "application/json");
  client->Delete(pods + "/a");
  client->Get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups");
  server.SetInstalled("podgroups", false);
  client->Get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups");
  client->Get("/apis/example.com/v1/widgets");
  {
    WatchStream watch(server, "/api/v1/nodes?watch=1&resourceVersion=0");
    REQUIRE(WaitWatches(server, 1));
    server.EndWatches();
    REQUIRE(watch.WaitDone());
  }

  Json ev = Body(created_event);
  CHECK(created_event->status == 201);
  CHECK(ev["metadata"]["name"].get<std::string>().rfind("a.", 0) == 0);
  CHECK(ev["metadata"]["name"].get<std::string>().size() == 7);

  struct Expect {
    const char* method;
    const char* verb;
    const char* group;
    const char* resource;
    const char* subresource;
    const char* ns;
    const char* name;
    int status;
  };
  const std::vector<Expect> expected = {
      {"GET", "list", "", "pods", "", "", "", 200},
      {"GET", "get", "", "pods", "", "ml", "a", 200},
      {"POST", "create", "", "pods", "binding", "ml", "a", 201},
      {"PATCH", "patch", "", "pods", "status", "ml", "a", 200},
      {"POST", "create", "", "pods", "eviction", "ml", "b", 201},
      {"POST", "create", "", "events", "", "ml", "", 201},
      {"POST", "create", "events.k8s.io", "events", "", "ml", "", 201},
      {"PUT", "update", "coordination.k8s.io", "leases", "", "ml", "x", 400},
      {"DELETE", "delete", "", "pods", "", "ml", "a", 200},
      {"GET", "list", "scheduling.x-k8s.io", "podgroups", "", "", "", 200},
      {"GET", "list", "scheduling.x-k8s.io", "podgroups", "", "", "", 404},
      {"GET", "list", "example.com", "widgets", "", "", "", 404},
      {"GET", "watch", "", "nodes", "", "", "", 200},
  };
  const auto calls = server.calls();
  REQUIRE(calls.size() == expected.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    INFO("call " << i << ": " << calls[i].method << " " << calls[i].path);
    CHECK(calls[i].method == expected[i].method);
    CHECK(calls[i].verb == expected[i].verb);
    CHECK(calls[i].api_group == expected[i].group);
    CHECK(calls[i].resource == expected[i].resource);
    CHECK(calls[i].subresource == expected[i].subresource);
    CHECK(calls[i].ns == expected[i].ns);
    CHECK(calls[i].name == expected[i].name);
    CHECK(calls[i].status == expected[i].status);
  }
  CHECK(calls[0].query.at("limit") == "500");
  CHECK(calls.back().query.at("watch") == "1");
  CHECK(calls[3].content_type == "application/merge-patch+json");
  CHECK(calls[5].response_bytes == created_event->body.size());  // the answer the client read
  CHECK(calls.back().response_bytes == 0);                       // a watch: see watch_bytes()
  CHECK(server.events().size() == 2);
  CHECK(server.bindings().size() == 1);
  CHECK(server.evictions().size() == 1);
  CHECK(server.patches().size() == 1);
  CHECK(server.CountCalls("GET", "/apis/scheduling.x-k8s.io/") == 2);
  CHECK(server.CountCalls("", "/api/v1/namespaces/ml/pods") == 5);
  server.ClearCalls();
  CHECK(server.calls().empty());

  // Discovery lists what is installed.
  Json core = Body(client->Get("/api/v1"));
  CHECK(core["kind"] == "APIResourceList");
  std::set<std::string> names;
  for (const Json& r : core["resources"]) names.insert(r["name"].get<std::string>());
  CHECK(names.count("pods/binding") == 1);
  CHECK(names.count("nodes") == 1);
  Json groups = Body(client->Get("/apis"));
  std::set<std::string> group_names;
  for (const Json& g : groups["groups"]) group_names.insert(g["name"].get<std::string>());
  CHECK(group_names.count("coordination.k8s.io") == 1);
  CHECK(group_names.count("scheduling.x-k8s.io") == 0);  // podgroups not installed
  RequireStatus(client->Get("/apis/scheduling.x-k8s.io/v1alpha1"), 404, "NotFound");
  server.SetInstalled("podgroups", true);
  Json podgroups = Body(client->Get("/apis/scheduling.x-k8s.io/v1alpha1"));
  CHECK(podgroups["resources"][0]["name"] == "podgroups");
  CHECK(podgroups["resources"][0]["namespaced"] == true);
}

}  // namespace
}  // namespace berth::testing
