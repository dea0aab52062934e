// berth's API client transport (extender/kube/http_client.h) against a scripted server: every
// framing kube-apiserver and the proxies in front of it use, byte splits at every awkward place,
// kept-alive connections the server closes, and interruption from another thread. TLS,
// certificates and tokens are covered against the fake API server (fake_apiserver_test.cc,
// kubernetes_mode_test.cc).

#include "extender/kube/http_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "catch2/catch.hpp"
#include "core/strings.h"
#include "extender/kube/client.h"

namespace berth::extender::kube {
namespace {

// A loopback server that runs `script` for each accepted connection, each on a thread of its own.
class ScriptedServer {
 public:
  using Script = std::function<void(int fd, int connection)>;
  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(::listen(listen_, 16) == 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (int n = 0;; ++n) {
        const int fd = ::accept(listen_, nullptr, nullptr);
        if (fd < 0) return;
        accepted_.fetch_add(1);
        connections_.emplace_back([this, fd, n] {
          script_(fd, n);
          ::close(fd);
        });
      }
    });
  }
  ~ScriptedServer() {
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    thread_.join();
    for (std::thread& t : connections_) t.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  Script script_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> connections_;  // the accepting thread's own
};

// Reads one request head (and a Content-Length body) from `fd`; "" when the client closed.
std::string ReadRequest(int fd) {
  std::string in;
  char buf[4096];
  while (in.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    in.append(buf, static_cast<size_t>(n));
  }
  const size_t cl = in.find("Content-Length: ");
  if (cl != std::string::npos) {
    const size_t len = std::stoul(in.substr(cl + 16));
    const size_t body_at = in.find("\r\n\r\n") + 4;
    while (in.size() < body_at + len) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
  }
  return in;
}

// Sends `text` in pieces of `step` bytes with a pause between them, so the client reads the
// framing split at every position.
void SendSlowly(int fd, std::string_view text, size_t step) {
  for (size_t i = 0; i < text.size(); i += step) {
    ::send(fd, text.data() + i, std::min(step, text.size() - i), MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ApiEndpoint Plain(int port) { return ApiEndpoint{.connect_host = "127.0.0.1", .port = port, .server_name = "127.0.0.1"}; }

std::string ReadAll(ApiConnection& c, const ApiResponseHead& head, absl::Status* status) {
  std::string body;
  *status = c.ReadBody(head, [&](std::string_view d) { body.append(d); return true; }, absl::Seconds(5), 1 << 20);
  return body;
}

// A new connection to `port` that has sent "GET /" and read the answer's head and body (into
// `*head`, `*read` and the result).
std::unique_ptr<ApiConnection> GetOnce(int port, ApiResponseHead* head, absl::Status* read, std::string* body) {
  auto c = ApiConnection::Open(Plain(port), absl::Seconds(5));
  REQUIRE(c.ok());
  REQUIRE((*c)->Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "", absl::Seconds(5)).ok());
  absl::StatusOr<ApiResponseHead> h = (*c)->ReadHead(absl::Seconds(5));
  REQUIRE(h.ok());
  *head = *h;
  *body = ReadAll(**c, *h, read);
  return *std::move(c);
}

TEST_CASE("API client: Content-Length, chunked and close-delimited bodies, split anywhere") {
  const std::string chunked =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
      "5\r\n{\"a\":\r\n1;ext=1\r\n1\r\n3\r\n,\"b\r\n4\r\n\":2}\r\n0\r\nX-Trailer: t\r\n\r\n";
  const std::string sized = "HTTP/1.1 201 Created\r\nContent-Length: 13\r\nRetry-After: 3\r\n\r\n{\"a\":1,\"b\":2}";
  const std::string until_close = "HTTP/1.0 200 OK\r\n\r\n{\"a\":1,\"b\":2}";
  for (size_t step : {1u, 2u, 7u, 4096u}) {
    for (const std::string* answer : {&chunked, &sized, &until_close}) {
      INFO("step " << step << ", answer " << answer->substr(0, 30));
      ScriptedServer server([&](int fd, int) {
        if (ReadRequest(fd).empty()) return;
        SendSlowly(fd, *answer, step);
        // Keep the connection open until the client is done with it: a close that arrived before
        // the client asked whether it may reuse the connection would rightly make it say no.
        // Only the body that ends with the connection ends here.
        if (answer != &until_close) ReadRequest(fd);
      });
      ApiResponseHead head;
      absl::Status read;
      std::string body;
      std::unique_ptr<ApiConnection> c = GetOnce(server.port(), &head, &read, &body);
      CHECK(body == R"({"a":1,"b":2})");
      CHECK(read.ok());
      if (answer == &sized) {
        CHECK(head.status == 201);
        CHECK(head.retry_after == 3);
        CHECK(c->Reusable());
      }
      if (answer == &chunked) CHECK(c->Reusable());
      if (answer == &until_close) CHECK_FALSE(c->Reusable());  // the body ended the connection
      CHECK(c->KeptAlive() == (answer != &until_close));
    }
  }
}

TEST_CASE("API client: a connection kept alive is not reusable once the server closed it") {
  ScriptedServer server([&](int fd, int) {
    if (ReadRequest(fd).empty()) return;
    const std::string a = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
  });  // and closes it
  ApiResponseHead head;
  absl::Status read;
  std::string body;
  std::unique_ptr<ApiConnection> c = GetOnce(server.port(), &head, &read, &body);
  CHECK(body == "ok");
  CHECK(read.ok());
  // The exchange left it fit for another request; only the socket says the server is gone.
  CHECK(c->KeptAlive());
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (c->Reusable() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  CHECK_FALSE(c->Reusable());
  CHECK(c->KeptAlive());
}

TEST_CASE("API client: 100 Continue is skipped, 204 has no body, bad heads are errors") {
  ScriptedServer server([&](int fd, int n) {
    if (ReadRequest(fd).empty()) return;
    if (n == 0) {
      const std::string a = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
      ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
    } else if (n == 1) {
      const std::string a = "SSH-2.0-OpenSSH_9.2\r\n\r\n";
      ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
    } else {
      const std::string a = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!";
      ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
    }
  });
  for (int n = 0; n < 3; ++n) {
    auto c = ApiConnection::Open(Plain(server.port()), absl::Seconds(5));
    REQUIRE(c.ok());
    REQUIRE((*c)->Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "", absl::Seconds(5)).ok());
    absl::StatusOr<ApiResponseHead> head = (*c)->ReadHead(absl::Seconds(5));
    if (n == 0) {
      REQUIRE(head.ok());
      CHECK(head->status == 204);
      absl::Status read;
      CHECK(ReadAll(**c, *head, &read).empty());
      CHECK(read.ok());
    } else {
      REQUIRE_FALSE(head.ok());
      CHECK_THAT(std::string(head.status().message()),
                 Catch::Contains(n == 1 ? "not an HTTP/1.x status line" : "bad Content-Length"));
    }
  }
}

TEST_CASE("API client: a body over the limit and a broken chunk size are refused") {
  ScriptedServer server([&](int fd, int n) {
    if (ReadRequest(fd).empty()) return;
    const std::string a = n == 0 ? "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'x')
                                 : "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n";
    ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
  });
  for (int n = 0; n < 2; ++n) {
    auto c = ApiConnection::Open(Plain(server.port()), absl::Seconds(5));
    REQUIRE(c.ok());
    REQUIRE((*c)->Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "", absl::Seconds(5)).ok());
    absl::StatusOr<ApiResponseHead> head = (*c)->ReadHead(absl::Seconds(5));
    REQUIRE(head.ok());
    absl::Status read = (*c)->ReadBody(*head, [](std::string_view) { return true; }, absl::Seconds(5), 1000);
    CHECK((n == 0 ? absl::IsResourceExhausted(read) : absl::IsDataLoss(read)));
    CHECK_FALSE((*c)->Reusable());
  }
}

TEST_CASE("API client: a silent server times out, and Interrupt stops a blocked read") {
  std::atomic<bool> release{false};
  ScriptedServer server([&](int fd, int) {
    ReadRequest(fd);
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  auto c = ApiConnection::Open(Plain(server.port()), absl::Seconds(5));
  REQUIRE(c.ok());
  REQUIRE((*c)->Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "", absl::Seconds(5)).ok());
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<ApiResponseHead> head = (*c)->ReadHead(absl::Milliseconds(100));
  CHECK(absl::IsDeadlineExceeded(head.status()));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));

  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*c)->Interrupt();
  });
  head = (*c)->ReadHead(absl::Seconds(30));
  stopper.join();
  CHECK(absl::IsCancelled(head.status()));
  CHECK((*c)->interrupted());
  release.store(true);
}

TEST_CASE("API client: with reads waiting in the read, a stream's events arrive, silence times out, and Interrupt stops it") {
  // A chunked stream: two events, then silence until released.
  std::atomic<bool> release{false};
  ScriptedServer server([&](int fd, int) {
    ReadRequest(fd);
    const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    for (std::string_view event : {std::string_view("{\"n\":1}\n"), std::string_view("{\"n\":2}\n")}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      const std::string chunk = absl::StrFormat("%x\r\n%s\r\n", event.size(), event);
      ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    }
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  for (const bool interrupt : {false, true}) {
    INFO((interrupt ? "interrupted" : "timed out"));
    auto c = ApiConnection::Open(Plain(server.port()), absl::Seconds(5));
    REQUIRE(c.ok());
    REQUIRE((*c)->Send("GET /watch HTTP/1.1\r\nHost: x\r\n\r\n", "", absl::Seconds(5)).ok());
    absl::StatusOr<ApiResponseHead> head = (*c)->ReadHead(absl::Seconds(5));
    REQUIRE(head.ok());
    const absl::Duration idle = interrupt ? absl::Seconds(30) : absl::Milliseconds(200);
    REQUIRE((*c)->WaitInReads(idle).ok());
    std::thread stopper;
    std::string got;
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status read = (*c)->ReadBody(
        *head,
        [&](std::string_view data) {
          got.append(data);
          if (interrupt && got.size() == 16 && !stopper.joinable()) {
            stopper = std::thread([&] {
              std::this_thread::sleep_for(std::chrono::milliseconds(100));
              (*c)->Interrupt();
            });
          }
          return true;
        },
        idle, 1 << 20);
    if (stopper.joinable()) stopper.join();
    CHECK(got == "{\"n\":1}\n{\"n\":2}\n");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    if (interrupt) {
      CHECK(absl::IsCancelled(read));
    } else {
      CHECK(absl::IsDeadlineExceeded(read));
    }
    CHECK_FALSE((*c)->KeptAlive());
  }
  release.store(true);
}

TEST_CASE("API client: a kept-alive connection the server closes: a GET is sent again, a write is not") {
  // Each connection answers `answers[n]` requests, then reads one more and closes without an
  // answer, as a server's idle timeout closes a connection a request is just arriving on.
  const int answers[] = {1, 2};
  ScriptedServer server([&](int fd, int n) {
    for (int i = 0; i < (n < 2 ? answers[n] : 100); ++i) {
      if (ReadRequest(fd).empty()) return;
      const std::string body = StrCat("{\"connection\":", n, "}");
      const std::string a = StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
      ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
    }
    ReadRequest(fd);
  });
  ClientConfig config;
  config.scheme = "http";
  config.host = "127.0.0.1";
  config.port = server.port();
  absl::StatusOr<std::unique_ptr<KubeClient>> client = KubeClient::Create(config);
  REQUIRE(client.ok());
  absl::StatusOr<Response> r = (*client)->Call("GET", "/api/v1/nodes");
  REQUIRE(r.ok());
  CHECK(r->body == R"({"connection":0})");
  // Connection 0 is kept alive, reused, and closed under this GET: it goes again on a new one.
  r = (*client)->Call("GET", "/api/v1/nodes");
  REQUIRE(r.ok());
  CHECK(r->body == R"({"connection":1})");
  r = (*client)->Call("POST", "/api/v1/namespaces/a/pods/b/binding", "{}");
  REQUIRE(r.ok());
  CHECK(r->body == R"({"connection":1})");  // kept alive and reused
  // Closed under a write: not sent again (the server may have acted on it); the caller decides.
  r = (*client)->Call("POST", "/api/v1/namespaces/a/pods/c/binding", "{}");
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsUnavailable(r.status()));
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("closed the kept-alive connection"));
  CHECK(server.accepted() == 2);
  // A connection the server closed while it sat idle is noticed before it is used.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  r = (*client)->Call("GET", "/api/v1/nodes");
  REQUIRE(r.ok());
  CHECK(r->body == R"({"connection":2})");
}

TEST_CASE("API client: requests carry the host, token, body length and Connection: close for streams") {
  std::vector<std::string> seen;
  std::mutex mu;
  ScriptedServer server([&](int fd, int) {
    for (;;) {
      std::string req = ReadRequest(fd);
      if (req.empty()) return;
      const bool watch = req.find("watch=1") != std::string::npos;
      {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(req);
      }
      const std::string a = watch ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                    "6\r\n{\"x\":1\r\n2\r\n}\n\r\n0\r\n\r\n"
                                  : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
      ::send(fd, a.data(), a.size(), MSG_NOSIGNAL);
      if (watch) return;
    }
  });
  ClientConfig config;
  config.scheme = "http";
  config.host = "127.0.0.1";
  config.port = server.port();
  config.base_path = "/k8s/clusters/c1";
  config.token = "secret-token";
  absl::StatusOr<std::unique_ptr<KubeClient>> client = KubeClient::Create(config);
  REQUIRE(client.ok());
  REQUIRE((*client)->Call("PATCH", "/api/v1/namespaces/a/pods/b", R"({"metadata":{}})",
                          "application/merge-patch+json").ok());
  std::string streamed;
  absl::StatusOr<Response> s = (*client)->Stream(
      "/api/v1/pods?watch=1", [&](std::string_view d) { streamed.append(d); return true; },
      absl::Seconds(5), nullptr);
  REQUIRE(s.ok());
  CHECK(s->status == 200);
  CHECK(streamed == "{\"x\":1}\n");
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(seen.size() == 2);
  CHECK_THAT(seen[0], Catch::StartsWith("PATCH /k8s/clusters/c1/api/v1/namespaces/a/pods/b HTTP/1.1\r\n"));
  CHECK_THAT(seen[0], Catch::Contains(StrCat("Host: 127.0.0.1:", server.port(), "\r\n")));
  CHECK_THAT(seen[0], Catch::Contains("Authorization: Bearer secret-token\r\n"));
  CHECK_THAT(seen[0], Catch::Contains("Content-Type: application/merge-patch+json\r\nContent-Length: 15\r\n"));
  CHECK_THAT(seen[0], Catch::EndsWith("\r\n\r\n{\"metadata\":{}}"));
  CHECK_THAT(seen[1], Catch::StartsWith("GET /k8s/clusters/c1/api/v1/pods?watch=1 HTTP/1.1\r\n"));
  CHECK_THAT(seen[1], Catch::Contains("Connection: close\r\n"));
}

}  // namespace
}  // namespace berth::extender::kube
