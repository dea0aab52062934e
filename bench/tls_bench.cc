/// berth_bench --tls: what HTTPS costs per call (bench/tls_bench.h).
///
/// Both servers are berth's own HttpServer in front of one Service on a 5,000-node model; the
/// TLS one has a P-256 certificate (TLS 1.3, as Go's client negotiates). The client is a
/// blocking OpenSSL or plain socket on loopback that sends one request and reads its answer
/// before the next, as kube-scheduler's extender client does for one pod.

#include "bench/tls_bench.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bench/bench_service.h"
#include "bench/cluster_profiles.h"
#include "bench/loadgen.h"
#include "core/strings.h"
#include "extender/http_server.h"
#include "extender/service.h"
#include "extender/tls.h"
#include "tests/testing/tls_certs.h"

namespace berth::bench {
namespace {

using Clock = std::chrono::steady_clock;

/// One blocking connection, TLS when `ctx` is given.
class Conn {
 public:
  Conn(int port, SSL_CTX* ctx) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
    if (ctx == nullptr) {
      ok_ = true;
      return;
    }
    ssl_ = SSL_new(ctx);
    SSL_set_fd(ssl_, fd_);
    SSL_set1_host(ssl_, "127.0.0.1");
    ok_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~Conn() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool ok() const { return ok_; }

  /// Sends `request` and reads one answer; false on any error or a status other than 200.
  bool Call(std::string_view request) {
    if (!ok_ || !Send(request)) return false;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return false;
    }
    const bool status_ok = buf_.compare(0, 12, "HTTP/1.1 200") == 0;
    const size_t cl = buf_.find("Content-Length: ");
    if (cl == std::string::npos || cl > end) return false;
    const size_t want = end + 4 + std::stoul(buf_.substr(cl + 16, 20));
    while (buf_.size() < want) {
      if (!Fill()) return false;
    }
    buf_.erase(0, want);
    return status_ok;
  }

 private:
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n;
      if (ssl_ != nullptr) {
        size_t w = 0;
        n = SSL_write_ex(ssl_, bytes.data(), bytes.size(), &w) == 1 ? static_cast<ssize_t>(w) : -1;
      } else {
        n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      }
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool Fill() {
    char chunk[65536];
    ssize_t n;
    if (ssl_ != nullptr) {
      size_t r = 0;
      n = SSL_read_ex(ssl_, chunk, sizeof(chunk), &r) == 1 ? static_cast<ssize_t>(r) : -1;
    } else {
      n = ::recv(fd_, chunk, sizeof(chunk), 0);
    }
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool ok_ = false;
  std::string buf_;
};

struct Figures {
  LatencyStats latency;
  int64_t failures = 0;
  double seconds = 0;
  double PerSecond() const { return seconds > 0 ? static_cast<double>(latency.Count()) / seconds : 0; }
};

/// Calls for `seconds`: on one kept-alive connection, or (`reconnect`) each on a new one.
Figures Measure(int port, SSL_CTX* ctx, const std::string& request, double seconds, bool reconnect) {
  Figures f;
  std::unique_ptr<Conn> conn;
  // Warm-up: a connection and a few calls.
  for (int i = 0; i < 20; ++i) {
    Conn warm(port, ctx);
    warm.Call(request);
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    const Clock::time_point t = Clock::now();
    if (reconnect || !conn) conn = std::make_unique<Conn>(port, ctx);
    const bool ok = conn->Call(request);
    if (reconnect) conn.reset();
    if (!ok) {
      ++f.failures;
      conn.reset();
      continue;
    }
    f.latency.Add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
  }
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return f;
}

std::string Post(std::string_view path, std::string_view body) {
  return StrCat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Go-http-client/1.1\r\n",
                "Content-Type: application/json\r\nAccept-Encoding: gzip\r\nContent-Length: ",
                body.size(), "\r\n\r\n", body);
}

}  // namespace

int RunTlsBench(bool quick, double seconds) {
  if (seconds <= 0) seconds = quick ? 0.3 : 5;
  const testing::TlsMaterial m = testing::MakeTlsMaterial();
  if (!m.ok()) {
    std::fprintf(stderr, "cannot make certificates: %s\n", m.error.c_str());
    return 2;
  }
  ClusterProfile p = Profile5k();
  if (quick) p.nodes = 300;
  const std::unique_ptr<BenchService> served = MakeBenchService(p);
  extender::Service& service = *served->service;

  absl::StatusOr<std::shared_ptr<extender::TlsServerContext>> tls = extender::TlsServerContext::Create(
      {.cert_file = m.server_cert_file, .key_file = m.server_key_file});
  if (!tls.ok()) {
    std::fprintf(stderr, "%s\n", tls.status().ToString().c_str());
    return 2;
  }
  auto options = [&](bool https) {
    extender::HttpServerOptions o{.threads = 64};
    o.extra_post_routes["/noop"] = [](std::string_view) { return extender::Reply{200, "{}"}; };
    if (https) o.tls = *tls;
    return o;
  };
  extender::HttpServer plain(&service, options(false));
  extender::HttpServer https(&service, options(true));
  absl::StatusOr<int> plain_port = plain.Start("127.0.0.1", 0);
  absl::StatusOr<int> https_port = https.Start("127.0.0.1", 0);
  if (!plain_port.ok() || !https_port.ok()) return 2;

  SSL_CTX* client = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(client, m.ca_cert_file.c_str(), nullptr);
  SSL_CTX_set_verify(client, SSL_VERIFY_PEER, nullptr);

  std::printf("berth_bench --tls%s: %d nodes; %.1f s per row; P-256 certificate, TLS 1.3; load average %s\n",
              quick ? " --quick (smoke run: figures are not meaningful)" : "", p.nodes, seconds,
              LoadAverage().c_str());
  std::printf("%-44s %10s %10s %10s %12s %12s\n", "call", "calls/s", "p50 us", "p99 us", "p50 vs http",
              "p99 vs http");
  const std::string noop = Post("/noop", "{}");
  const std::string filter = Post(
      "/scheduler/filter",
      ArgsNamesJson(p, PendingPodJson(PendingKind::kFits), CandidateIndices(p, p.CandidateCount(), 42)));
  struct Row {
    const char* name;
    const std::string* request;
    bool reconnect;
  };
  int failures = 0;
  for (const Row& row : {Row{"noop, kept-alive connection", &noop, false},
                         Row{"filter (names, all nodes), kept-alive", &filter, false},
                         Row{"noop, a new connection per call", &noop, true}}) {
    const Figures h = Measure(*plain_port, nullptr, *row.request, seconds, row.reconnect);
    const Figures s = Measure(*https_port, client, *row.request, seconds, row.reconnect);
    failures += static_cast<int>(h.failures + s.failures);
    const auto hp = h.latency.Percentiles({50, 99});
    const auto sp = s.latency.Percentiles({50, 99});
    auto ratio = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
    std::printf("%-44s %10.0f %10.1f %10.1f %12s %12s\n", (std::string("http  ") + row.name).c_str(),
                h.PerSecond(), static_cast<double>(hp[0]) / 1e3, static_cast<double>(hp[1]) / 1e3, "1.00x",
                "1.00x");
    std::printf("%-44s %10.0f %10.1f %10.1f %11.2fx %11.2fx\n", (std::string("https ") + row.name).c_str(),
                s.PerSecond(), static_cast<double>(sp[0]) / 1e3, static_cast<double>(sp[1]) / 1e3,
                ratio(sp[0], hp[0]), ratio(sp[1], hp[1]));
    if (h.latency.Count() == 0 || s.latency.Count() == 0) ++failures;
  }
  std::fflush(stdout);
  SSL_CTX_free(client);
  plain.Stop();
  https.Stop();
  testing::RemoveTlsMaterial(m);
  if (failures > 0) {
    std::printf("FAILED: %d call(s) failed\n", failures);
    return 1;
  }
  return 0;
}

}  // namespace berth::bench
