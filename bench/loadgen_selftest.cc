/// Self-check of the load generator client: protocol handling against a
/// scripted raw-socket server that fragments its replies, reconnects against
/// an httplib server with a small keep-alive limit, and closed-loop figures
/// against an httplib server in a thread of this process. Exits non-zero on
/// any failure or when the 1-connection /echo p50 exceeds 5 ms.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/loadgen.h"
#include "httplib.h"

namespace {

using berth::bench::Describe;
using berth::bench::FormatHeader;
using berth::bench::FormatRow;
using berth::bench::HttpConnection;
using berth::bench::RunResult;

int g_failures = 0;

void Expect(bool condition, const std::string& what) {
  if (!condition) {
    ++g_failures;
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  }
}

// ---------------------------------------------------------------------------
// Scripted raw server: each connection answers a fixed list of requests with
// replies written in separate fragments, then closes.
// ---------------------------------------------------------------------------

using Reply = std::vector<std::string>;  ///< Fragments written one by one.
using ConnectionScript = std::vector<Reply>;

/// Reads one request (headers plus Content-Length body) from `fd`.
bool ReadRequest(int fd, std::string* pending) {
  for (;;) {
    size_t head_end = pending->find("\r\n\r\n");
    if (head_end != std::string::npos) {
      size_t length = 0;
      size_t pos = pending->find("Content-Length: ");
      if (pos != std::string::npos && pos < head_end) {
        length = std::stoul(pending->substr(pos + 16));
      }
      size_t total = head_end + 4 + length;
      if (pending->size() >= total) {
        pending->erase(0, total);
        return true;
      }
    }
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    pending->append(buf, static_cast<size_t>(n));
  }
}

void ServeScript(int listen_fd, std::vector<ConnectionScript> scripts) {
  for (const ConnectionScript& script : scripts) {
    int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string pending;
    for (const Reply& reply : script) {
      if (!ReadRequest(fd, &pending)) break;
      for (const std::string& fragment : reply) {
        (void)!::send(fd, fragment.data(), fragment.size(), MSG_NOSIGNAL);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    ::close(fd);
  }
}

void TestProtocol() {
  int listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::listen(listen_fd, 16) != 0) {
    Expect(false, "raw server bind/listen");
    return;
  }
  socklen_t len = sizeof(sa);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);

  std::string big(100000, 'x');
  std::vector<ConnectionScript> scripts = {
      {
          // Content-Length with mixed-case name, body split over reads.
          {"HTTP/1.1 200 OK\r\nconTent-LENGTH: 5\r\n",
           "Content-Type: text/plain\r\n\r\nhe", "l", "lo"},
          // Interim 100 and a chunked reply in the same write, then the
          // remaining chunks, an extension and a trailer.
          {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
           "transfer-encoding: Chunked\r\n\r\n3;ext=1\r\nabc\r\n",
           "A\r\n0123", "456789\r", "\n0\r\nX-Trailer: y\r\n", "\r\n"},
          // Large Content-Length body in two writes.
          {"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" +
               big.substr(0, 30000),
           big.substr(30000)},
          // Connection: close.
          {"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n"
           "Connection: close\r\n\r\nbusy"},
      },
      {
          // HTTP/1.0 body delimited by EOF.
          {"HTTP/1.0 200 OK\r\nContent-Type: x\r\n\r\nuntil-", "eof"},
      },
      {
          // Empty body, then the server drops the keep-alive connection.
          {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
      },
      {
          {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
      },
  };
  std::thread server(ServeScript, listen_fd, scripts);

  HttpConnection conn;
  absl::Status st = conn.Connect("127.0.0.1", port);
  Expect(st.ok(), absl::StrCat("connect: ", st.ToString()));
  std::string body;
  struct Case {
    int status;
    std::string body;
    int reconnects;
  };
  std::vector<Case> cases = {
      {200, "hello", 0}, {201, "abc0123456789", 0}, {200, big, 0},
      {503, "busy", 0},  {200, "until-eof", 1},     {200, "", 2},
      {200, "ok", 3},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    absl::StatusOr<int> status = conn.Post("/filter", R"({"pod":"p"})", &body);
    if (!status.ok()) {
      Expect(false, absl::StrCat("protocol case ", i, ": ",
                                 status.status().ToString()));
      continue;
    }
    Expect(*status == cases[i].status,
           absl::StrCat("protocol case ", i, " status ", *status));
    Expect(body == cases[i].body, absl::StrCat("protocol case ", i, " body '",
                                               body.substr(0, 40), "'"));
    Expect(
        conn.reconnects() == cases[i].reconnects,
        absl::StrCat("protocol case ", i, " reconnects ", conn.reconnects()));
  }
  server.join();
  ::close(listen_fd);
  std::printf("protocol cases: %zu run, reconnects %d\n", cases.size(),
              conn.reconnects());
}

// ---------------------------------------------------------------------------
// httplib server in a thread of this process.
// ---------------------------------------------------------------------------

const char kEchoReply[] =
    R"({"nodenames":["node-1"],"failedNodes":{},"error":""})";

std::string ChunkedReply() {
  std::string s = R"({"items":[)";
  for (int i = 0; i < 2000; ++i) s += absl::StrCat(i == 0 ? "" : ",", i);
  s += "]}";
  return s;
}

struct TestServer {
  httplib::Server server;
  std::thread thread;
  int port = -1;

  explicit TestServer(size_t keep_alive_max) {
    server.set_tcp_nodelay(true);
    server.set_keep_alive_max_count(keep_alive_max);
    server.Post("/echo", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(kEchoReply, "application/json");
    });
    server.Post(
        "/chunked", [](const httplib::Request&, httplib::Response& res) {
          res.set_chunked_content_provider(
              "application/json", [](size_t, httplib::DataSink& sink) {
                static const std::string reply = ChunkedReply();
                size_t third = reply.size() / 3;
                sink.write(reply.data(), third);
                sink.write(reply.data() + third, third);
                sink.write(reply.data() + 2 * third, reply.size() - 2 * third);
                sink.done();
                return true;
              });
        });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~TestServer() {
    server.stop();
    thread.join();
  }
};

void Report(const char* label, int connections, const RunResult& r) {
  std::printf("%s\n", FormatRow(label, connections, r).c_str());
  std::printf("    %s\n", Describe(r).c_str());
  Expect(r.errors == 0 && r.warmup_errors == 0,
         absl::StrCat(label, ": ", r.errors, " errors, ", r.warmup_errors,
                      " warm-up errors; first: ", r.first_error));
  Expect(r.requests > 0, absl::StrCat(label, ": no requests"));
}

}  // namespace

int main() {
  TestProtocol();

  const std::string small_body =
      R"({"pod":{"metadata":{"name":"p","namespace":"default"}},)"
      R"("nodenames":["node-1"]})";
  const std::string chunked_expected = ChunkedReply();
  auto body_for = [&small_body](int, int64_t) -> const std::string& {
    return small_body;
  };
  auto echo_check = [](int status, const std::string& body) {
    return status == 200 && body == kEchoReply;
  };
  auto chunked_check = [&chunked_expected](int status,
                                           const std::string& body) {
    return status == 200 && body == chunked_expected;
  };
  const absl::Duration warmup = absl::Milliseconds(200);
  const absl::Duration duration = absl::Seconds(1);

  {
    // Reconnects: the server closes every connection after 3 requests.
    TestServer server(3);
    RunResult r = berth::bench::RunClosedLoop(
        server.port, 2, body_for, "/echo", absl::ZeroDuration(),
        absl::Milliseconds(200), echo_check);
    Report("echo keep-alive max 3", 2, r);
    Expect(r.reconnects > 0, "expected reconnects with keep-alive max 3");
  }

  TestServer server(100000);
  std::printf("%s\n", FormatHeader().c_str());

  RunResult echo1 = berth::bench::RunClosedLoop(
      server.port, 1, body_for, "/echo", warmup, duration, echo_check);
  Report("echo", 1, echo1);
  const int64_t echo1_p50 = echo1.latency.Percentile(50);
  Expect(echo1_p50 <= 5'000'000,
         absl::StrCat("echo p50 at 1 connection is ", echo1_p50,
                      " ns (Nagle / delayed ACK?)"));

  RunResult echo4 = berth::bench::RunClosedLoop(
      server.port, 4, body_for, "/echo", warmup, duration, echo_check);
  Report("echo", 4, echo4);

  RunResult chunked1 = berth::bench::RunClosedLoop(
      server.port, 1, body_for, "/chunked", warmup, duration, chunked_check);
  Report("chunked", 1, chunked1);

  RunResult chunked4 = berth::bench::RunClosedLoop(
      server.port, 4, body_for, "/chunked", warmup, duration, chunked_check);
  Report("chunked", 4, chunked4);

  RunResult pair = berth::bench::RunPairClosedLoop(
      server.port, "/echo", small_body, "/chunked", small_body, warmup,
      duration, [&](int status, const std::string& body) {
        return status == 200 &&
               (body == kEchoReply || body == chunked_expected);
      });
  Report("pair echo+chunked", 1, pair);

  const int64_t current_rss = berth::bench::CurrentRssKiB();
  const int64_t peak_rss = berth::bench::PeakRssKiB();
  std::printf("rss: current %lld KiB, peak %lld KiB\n",
              static_cast<long long>(current_rss),
              static_cast<long long>(peak_rss));
  if (g_failures > 0) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
