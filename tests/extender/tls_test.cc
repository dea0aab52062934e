// HTTPS on berth's listeners (extender/tls.h): HttpServer with a TlsServerContext on a real
// socket, driven by a blocking OpenSSL client that checks the server's certificate against the
// CA that signed it, as kube-scheduler does with `tlsConfig.caFile`.

#include "extender/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "extender/http_server.h"
#include "nlohmann/json.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/files.h"
#include "tests/testing/harness.h"
#include "tests/testing/sockets.h"
#include "tests/testing/tls_certs.h"

namespace berth::extender {
namespace {

namespace fs = std::filesystem;
using berth::testing::Event;
using berth::testing::Harness;
using berth::testing::Json;
using berth::testing::MakeNode;
using berth::testing::MakePod;
using berth::testing::ConnectLoopback;
using berth::testing::ReadTestFile;
using berth::testing::SharedTlsMaterial;
using berth::testing::TlsMaterial;
using Closed = ListenerMetrics::Closed;

void WriteAll(const std::string& path, const std::string& text) {
  // As a Secret volume does: a new file put in place with a rename, so a reader never sees half.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  fs::rename(tmp, path);
}

struct ClientOptions {
  std::string ca_file;  ///< verify the server against this CA (empty: no verification)
  std::string cert_file, key_file;  ///< a client certificate for mutual TLS
  std::vector<std::string> alpn;    ///< protocols offered, e.g. {"h2", "http/1.1"} as Go does
  /// A slow reader: a small socket receive buffer, and a pause after every read.
  int receive_buffer = 0;
  int pause_ms = 0;
};

struct Response {
  int status = 0;
  std::string head, body;
};

/// One TLS connection over a blocking socket with a receive timeout.
class TlsClient {
 public:
  TlsClient(int port, const ClientOptions& o) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    REQUIRE(ctx_ != nullptr);
    if (!o.ca_file.empty()) {
      REQUIRE(SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr) == 1);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    if (!o.cert_file.empty()) {
      REQUIRE(SSL_CTX_use_certificate_chain_file(ctx_, o.cert_file.c_str()) == 1);
      REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) == 1);
    }
    fd_ = ConnectLoopback(port, {.receive_buffer = o.receive_buffer});
    pause_ms_ = o.pause_ms;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    SSL_set1_host(ssl_, "127.0.0.1");
    if (!o.alpn.empty()) {
      std::string wire;
      for (const std::string& p : o.alpn) wire += static_cast<char>(p.size()) + p;
      SSL_set_alpn_protos(ssl_, reinterpret_cast<const unsigned char*>(wire.data()),
                          static_cast<unsigned>(wire.size()));
    }
    ERR_clear_error();
    handshake_ok_ = SSL_connect(ssl_) == 1;
    if (!handshake_ok_) error_ = Errors();
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  bool handshake_ok() const { return handshake_ok_; }
  const std::string& error() const { return error_; }
  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl_, &p, &len);
    return std::string(reinterpret_cast<const char*>(p), len);
  }
  /// The common name of the certificate the server presented.
  std::string PeerCommonName() const {
    X509* cert = SSL_get1_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
    X509_free(cert);
    return cn;
  }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      size_t n = 0;
      if (SSL_write_ex(ssl_, bytes.data(), bytes.size(), &n) != 1) {
        error_ = "write failed: " + Errors();
        return false;
      }
      bytes.remove_prefix(n);
    }
    return true;
  }

  /// One response with a Content-Length body; nullopt on EOF, timeout or TLS error.
  std::optional<Response> Read() {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    Response r;
    r.head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    r.status = std::stoi(r.head.substr(9, 3));
    const size_t cl = r.head.find("Content-Length: ");
    size_t length = 0;
    if (cl != std::string::npos) length = std::stoul(r.head.substr(cl + 16));
    while (buf_.size() < length) {
      if (!Fill()) return std::nullopt;
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  std::optional<Response> Request(std::string_view method, std::string_view path,
                                  std::string_view body = "") {
    if (!Send(Format(method, path, body))) return std::nullopt;
    return Read();
  }

  static std::string Format(std::string_view method, std::string_view path, std::string_view body) {
    std::string req = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n";
    if (method != "GET") req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    return req + "\r\n" + std::string(body);
  }

 private:
  bool Fill() {
    char chunk[16384];
    size_t n = 0;
    ERR_clear_error();
    if (SSL_read_ex(ssl_, chunk, sizeof(chunk), &n) == 1) {
      buf_.append(chunk, n);
      if (pause_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_));
      return true;
    }
    error_ = "read failed: " + Errors();
    return false;
  }
  static std::string Errors() {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
      char b[256];
      ERR_error_string_n(e, b, sizeof(b));
      out += std::string(out.empty() ? "" : "; ") + b;
    }
    return out.empty() ? std::string("connection closed") : out;
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool handshake_ok_ = false;
  int pause_ms_ = 0;
  std::string buf_;
  std::string error_;
};

Response MustRequest(TlsClient& c, std::string_view method, std::string_view path,
                     std::string_view body = "") {
  INFO("handshake: " << c.handshake_ok() << " " << c.error());
  REQUIRE(c.handshake_ok());
  std::optional<Response> r = c.Request(method, path, body);
  INFO(method << " " << path << ": " << c.error());
  REQUIRE(r.has_value());
  return *std::move(r);
}

/// Certificate files of its own in a temporary directory (copies of `m`'s, so a test may
/// replace them), and a server on 127.0.0.1 serving a Harness with two nodes over HTTPS.
class TlsServed {
 public:
  explicit TlsServed(const TlsMaterial& m, bool client_ca = false, bool verify_client = false,
                     HttpServerOptions options = {}) {
    REQUIRE(m.ok());
    dir_ = fs::temp_directory_path() / ("berth-tls-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(counter_++));
    fs::create_directories(dir_);
    cert_ = (dir_ / "tls.crt").string();
    key_ = (dir_ / "tls.key").string();
    WriteAll(cert_, ReadTestFile(m.server_cert_file));
    WriteAll(key_, ReadTestFile(m.server_key_file));
    TlsOptions t{.cert_file = cert_, .key_file = key_, .check_interval = absl::ZeroDuration()};
    if (client_ca) t.client_ca_file = m.ca_cert_file;
    absl::StatusOr<std::shared_ptr<TlsServerContext>> ctx =
        TlsServerContext::Create(t, &harness_.service().transport_metrics().tls);
    INFO(ctx.status().ToString());
    REQUIRE(ctx.ok());
    options.tls = *ctx;
    options.tls_verify_client = verify_client;
    server_ = std::make_unique<HttpServer>(&harness_.service(), options);
    Json events = Json::array();
    for (const char* n : {"n1", "n2"}) {
      events.push_back(Event("ADDED", MakeNode(n).Cpu("16").Memory("64Gi").Pods(110).Obj()));
    }
    harness_.Apply(events);
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    REQUIRE(port.ok());
    port_ = *port;
  }
  ~TlsServed() {
    server_->Stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  int port() const { return port_; }
  Harness& harness() { return harness_; }
  const std::string& cert() const { return cert_; }
  const std::string& key() const { return key_; }
  uint64_t closed(Closed why) {
    return harness_.service().transport_metrics().listeners[0].closed[static_cast<size_t>(why)].load();
  }
  const TlsMetrics& tls() { return harness_.service().transport_metrics().tls; }

 private:
  static inline int counter_ = 0;
  Harness harness_;
  fs::path dir_;
  std::string cert_, key_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

ClientOptions Trusting(const TlsMaterial& m) { return ClientOptions{.ca_file = m.ca_cert_file}; }

std::string FilterBody() {
  return Json{{"Pod", MakePod("p").Cpu("1").Memory("1Gi").Obj()}, {"NodeNames", {"n1", "n2"}}}.dump();
}

// ---- serving ------------------------------------------------------------------------------------

TEST_CASE("https: verbs and operations endpoints answer over TLS, with HTTP/1.1 by ALPN") {
  const TlsMaterial& m = SharedTlsMaterial();
  TlsServed s(m);
  ClientOptions o = Trusting(m);
  o.alpn = {"h2", "http/1.1"};  // what Go offers for an https urlPrefix
  TlsClient c(s.port(), o);
  INFO(c.error());
  REQUIRE(c.handshake_ok());
  CHECK(c.alpn() == "http/1.1");
  Response health = MustRequest(c, "GET", "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body.find("ok") != std::string::npos);
  // The same connection carries the verbs: filter answers with both nodes.
  Response filter = MustRequest(c, "POST", "/scheduler/filter", FilterBody());
  REQUIRE(filter.status == 200);
  const Json j = Json::parse(filter.body);
  CHECK(j["NodeNames"].size() == 2);
  CHECK(s.tls().enabled);
  CHECK(s.tls().not_after_seconds > 0);
}

TEST_CASE("https: a client that offers only h2 still gets HTTP/1.1") {
  const TlsMaterial& m = SharedTlsMaterial();
  TlsServed s(m);
  ClientOptions o = Trusting(m);
  o.alpn = {"h2"};
  TlsClient c(s.port(), o);
  REQUIRE(c.handshake_ok());
  CHECK(c.alpn().empty());
  CHECK(MustRequest(c, "GET", "/version").status == 200);
}

TEST_CASE("https: plain HTTP on an HTTPS port gets no HTTP answer and is counted") {
  const TlsMaterial& m = SharedTlsMaterial();
  TlsServed s(m);
  const int fd = ConnectLoopback(s.port());
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  CHECK(got.find("HTTP/1.1 200") == std::string::npos);
  CHECK(got.find("status") == std::string::npos);
  // The server closed it (the loop above ended), as a failed handshake.
  for (int i = 0; i < 100 && s.closed(Closed::kTlsHandshake) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(s.closed(Closed::kTlsHandshake) == 1);
  // The port still serves TLS clients.
  TlsClient c(s.port(), Trusting(m));
  CHECK(MustRequest(c, "GET", "/healthz").status == 200);
}

TEST_CASE("https: pipelined requests are all answered, in order") {
  const TlsMaterial& m = SharedTlsMaterial();
  TlsServed s(m);
  TlsClient c(s.port(), Trusting(m));
  REQUIRE(c.handshake_ok());
  // Three requests, in one TLS record or in three that arrive together: the server must
  // decrypt all of them without waiting for another readiness event of the socket.
  const bool one_record = GENERATE(true, false);
  const std::string reqs[] = {TlsClient::Format("GET", "/healthz", ""), TlsClient::Format("GET", "/version", ""),
                              TlsClient::Format("POST", "/scheduler/filter", FilterBody())};
  if (one_record) {
    REQUIRE(c.Send(reqs[0] + reqs[1] + reqs[2]));
  } else {
    for (const std::string& r : reqs) REQUIRE(c.Send(r));
  }
  std::optional<Response> a = c.Read(), b = c.Read(), f = c.Read();
  INFO(c.error());
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(f);
  CHECK(a->body.find("ok") != std::string::npos);
  CHECK(b->body.find("version") != std::string::npos);
  CHECK(Json::parse(f->body)["NodeNames"].size() == 2);
}

TEST_CASE("https: large bodies and replies cross TLS whole, also to a slow reader") {
  const TlsMaterial& m = SharedTlsMaterial();
  HttpServerOptions options;
  constexpr size_t kBig = 3u << 20;
  options.extra_post_routes["/echo-size"] = [](std::string_view body) {
    // Replies with as many bytes as it got, a pattern that shows misordered or lost records.
    std::string out(body.size(), '\0');
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>('a' + (i * 7 + i / 16384) % 26);
    return Reply{200, std::move(out), "text/plain"};
  };
  // Nothing is left to the loop's longest sleep: a reply that waits in the TLS layer, and every
  // worker's reply after it, is carried on by a wake-up (the client gives up after 5 s).
  options.loop_max_sleep_ms = 60000;
  TlsServed s(m, false, false, options);
  ClientOptions o = Trusting(m);
  // The reply's last bytes wait in the server's TLS layer after its HTTP layer has handed
  // them over: the reply is only done once they are sent.
  o.receive_buffer = 4096;
  o.pause_ms = 1;
  TlsClient c(s.port(), o);
  REQUIRE(c.handshake_ok());
  const std::string body(kBig, 'x');
  REQUIRE(c.Send(TlsClient::Format("POST", "/echo-size", body)));
  // Read only after a while: the reply fills the socket and waits in the server's TLS layer.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::optional<Response> r = c.Read();
  INFO(c.error());
  REQUIRE(r);
  REQUIRE(r->status == 200);
  REQUIRE(r->body.size() == kBig);
  size_t wrong = 0;
  for (size_t i = 0; i < kBig; ++i) wrong += r->body[i] != static_cast<char>('a' + (i * 7 + i / 16384) % 26);
  CHECK(wrong == 0);
  // The connection is still usable afterwards, for the loop and for the workers in turn.
  for (int i = 0; i < 5; ++i) {
    CHECK(MustRequest(c, "GET", "/healthz").status == 200);
    const Response small = MustRequest(c, "POST", "/echo-size", "0123456789");
    CHECK(small.status == 200);
    CHECK(small.body.size() == 10);
  }
}

TEST_CASE("https: the TLS layer holds what its socket did not take, and says so until it is sent") {
  // The contract the HTTP server relies on to finish a reply (HasPendingOutput), checked on a
  // socket pair with small buffers, where the socket takes less than one write's records.
  const TlsMaterial& m = SharedTlsMaterial();
  absl::StatusOr<std::shared_ptr<TlsServerContext>> ctx =
      TlsServerContext::Create({.cert_file = m.server_cert_file, .key_file = m.server_key_file});
  REQUIRE(ctx.ok());
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  const int small = 4096;
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  ::setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  REQUIRE(::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK) == 0);
  std::unique_ptr<http::ConnectionIo> io = (*ctx)->NewConnection(sv[0], false);
  REQUIRE(io != nullptr);

  std::string reply(256 * 1024, '\0');
  for (size_t i = 0; i < reply.size(); ++i) reply[i] = static_cast<char>(i * 31 % 251);
  std::atomic<bool> go{false};
  std::string received, client_error;
  std::thread client([&] {
    SSL_CTX* cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(cctx, m.ca_cert_file.c_str(), nullptr);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, nullptr);
    SSL* ssl = SSL_new(cctx);
    SSL_set_fd(ssl, sv[1]);
    if (SSL_connect(ssl) != 1 || SSL_write(ssl, "hi", 2) != 2) {
      client_error = "handshake failed";
    } else {
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      char buf[16384];
      while (received.size() < reply.size()) {
        const int n = SSL_read(ssl, buf, sizeof(buf));
        if (n <= 0) {
          client_error = "read failed after " + std::to_string(received.size()) + " bytes";
          break;
        }
        received.append(buf, static_cast<size_t>(n));
      }
    }
    SSL_free(ssl);
    SSL_CTX_free(cctx);
  });
  auto wait_for = [&](short events) {
    pollfd p{.fd = sv[0], .events = events};
    return ::poll(&p, 1, 5000) > 0;
  };
  // The handshake runs within Read, until the client's "hi" arrives.
  std::string got;
  while (got.size() < 2) {
    char buf[64];
    const http::IoResult r = io->Read(buf, sizeof(buf));
    if (r.kind == http::IoResult::kOk) {
      got.append(buf, r.bytes);
    } else if (r.kind == http::IoResult::kWantRead || r.kind == http::IoResult::kWantWrite) {
      REQUIRE(wait_for(r.kind == http::IoResult::kWantRead ? POLLIN : POLLOUT));
    } else {
      FAIL("read failed during the handshake");
    }
  }
  CHECK(got == "hi");
  // The first write is taken whole into the layer, more than the socket holds.
  size_t off = 0;
  iovec iov{reply.data(), reply.size()};
  http::IoResult r = io->Write(&iov, 1);
  REQUIRE(r.kind == http::IoResult::kOk);
  off += r.bytes;
  CHECK(off > 2u * small);
  CHECK(io->HasPendingOutput());
  // While the client does not read, nothing more is taken.
  iov = {reply.data() + off, reply.size() - off};
  CHECK(io->Write(&iov, 1).kind == http::IoResult::kWantWrite);
  go = true;
  while (off < reply.size() || io->HasPendingOutput()) {
    iov = {reply.data() + off, reply.size() - off};
    r = io->Write(&iov, off < reply.size() ? 1 : 0);
    if (r.kind == http::IoResult::kOk) {
      off += r.bytes;
    } else {
      REQUIRE(r.kind == http::IoResult::kWantWrite);
      REQUIRE(wait_for(POLLOUT));
    }
  }
  client.join();
  ::close(sv[0]);
  ::close(sv[1]);
  CHECK(client_error.empty());
  CHECK(received == reply);
}

// ---- certificates -------------------------------------------------------------------------------

TEST_CASE("https: a changed certificate is served to new connections; open ones keep theirs") {
  const TlsMaterial& first = SharedTlsMaterial();
  TlsMaterial second = berth::testing::MakeTlsMaterial();
  REQUIRE(second.ok());
  TlsServed s(first);
  TlsClient before(s.port(), Trusting(first));
  REQUIRE(MustRequest(before, "GET", "/healthz").status == 200);

  SECTION("a certificate whose key has not arrived yet is not taken") {
    WriteAll(s.cert(), ReadTestFile(second.server_cert_file));
    TlsClient still_first(s.port(), Trusting(first));
    CHECK(MustRequest(still_first, "GET", "/healthz").status == 200);
    CHECK(s.tls().reload_failures == 1);
    CHECK(s.tls().reloads == 0);
    // Then the key arrives: the pair is taken.
    WriteAll(s.key(), ReadTestFile(second.server_key_file));
    TlsClient now_second(s.port(), Trusting(second));
    CHECK(MustRequest(now_second, "GET", "/healthz").status == 200);
    CHECK(s.tls().reloads == 1);
    TlsClient old_ca(s.port(), Trusting(first));
    CHECK_FALSE(old_ca.handshake_ok());
  }
  SECTION("a garbled file keeps the previous certificate, and is reported once") {
    WriteAll(s.cert(), "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n");
    for (int i = 0; i < 3; ++i) {
      TlsClient c(s.port(), Trusting(first));
      CHECK(MustRequest(c, "GET", "/healthz").status == 200);
    }
    CHECK(s.tls().reload_failures == 1);
    // Fixed: both files of the second set.
    WriteAll(s.key(), ReadTestFile(second.server_key_file));
    WriteAll(s.cert(), ReadTestFile(second.server_cert_file));
    TlsClient c(s.port(), Trusting(second));
    CHECK(MustRequest(c, "GET", "/healthz").status == 200);
    CHECK(s.tls().reloads == 1);
  }
  // The connection made before the change still works with the first certificate.
  CHECK(MustRequest(before, "GET", "/version").status == 200);
  berth::testing::RemoveTlsMaterial(second);
}

TEST_CASE("https: bad certificate files are refused with a message naming the file") {
  const TlsMaterial& m = SharedTlsMaterial();
  auto error_of = [](TlsOptions o) {
    absl::StatusOr<std::shared_ptr<TlsServerContext>> ctx = TlsServerContext::Create(std::move(o));
    REQUIRE_FALSE(ctx.ok());
    return std::string(ctx.status().message());
  };
  const std::string missing = "/nonexistent/berth/tls.crt";
  CHECK_THAT(error_of({.cert_file = missing, .key_file = m.server_key_file}),
             Catch::Contains("cannot read certificate file \"" + missing + "\"") &&
                 Catch::Contains("No such file"));
  CHECK_THAT(error_of({.cert_file = m.server_cert_file, .key_file = m.server_cert_file}),
             Catch::Contains("key file \"" + m.server_cert_file + "\" holds no usable"));
  CHECK_THAT(error_of({.cert_file = m.server_key_file, .key_file = m.server_key_file}),
             Catch::Contains("certificate file \"" + m.server_key_file + "\" holds no usable"));
  CHECK_THAT(error_of({.cert_file = m.server_cert_file, .key_file = m.client_key_file}),
             Catch::Contains("does not belong to the certificate in \"" + m.server_cert_file));
  CHECK_THAT(error_of({.cert_file = m.server_cert_file,
                       .key_file = m.server_key_file,
                       .client_ca_file = m.server_key_file}),
             Catch::Contains("client CA file \"" + m.server_key_file + "\" holds no usable"));
  // And the good set loads.
  CHECK(TlsServerContext::Create({.cert_file = m.server_cert_file, .key_file = m.server_key_file}).ok());
}

// ---- mutual TLS ---------------------------------------------------------------------------------

TEST_CASE("https: with a client CA, the verb port takes only clients it signed") {
  const TlsMaterial& m = SharedTlsMaterial();
  TlsServed s(m, /*client_ca=*/true, /*verify_client=*/true);
  SECTION("a client without a certificate is refused in the handshake") {
    TlsClient c(s.port(), Trusting(m));
    // TLS 1.3: the client may finish its side before the server's alert arrives; then its
    // first request fails instead.
    const bool served = c.handshake_ok() && c.Request("GET", "/healthz").has_value();
    CHECK_FALSE(served);
    for (int i = 0; i < 100 && s.closed(Closed::kTlsHandshake) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(s.closed(Closed::kTlsHandshake) == 1);
  }
  SECTION("a certificate of another CA is refused") {
    TlsMaterial other = berth::testing::MakeTlsMaterial();
    REQUIRE(other.ok());
    ClientOptions o = Trusting(m);
    o.cert_file = other.client_cert_file;
    o.key_file = other.client_key_file;
    TlsClient c(s.port(), o);
    CHECK_FALSE((c.handshake_ok() && c.Request("GET", "/healthz").has_value()));
    berth::testing::RemoveTlsMaterial(other);
  }
  SECTION("a client with a certificate the CA signed is served") {
    ClientOptions o = Trusting(m);
    o.cert_file = m.client_cert_file;
    o.key_file = m.client_key_file;
    TlsClient c(s.port(), o);
    CHECK(MustRequest(c, "POST", "/scheduler/filter", FilterBody()).status == 200);
  }
}

TEST_CASE("https: a listener that does not verify clients asks none for a certificate") {
  // The operations port shares the context (client CA included) but the kubelet's probes
  // present no certificate.
  const TlsMaterial& m = SharedTlsMaterial();
  TlsServed s(m, /*client_ca=*/true, /*verify_client=*/false);
  TlsClient c(s.port(), Trusting(m));
  CHECK(MustRequest(c, "GET", "/healthz").status == 200);
}

// ---- hostile clients ----------------------------------------------------------------------------

TEST_CASE("https: connections that never finish a handshake are closed at the header deadline") {
  const TlsMaterial& m = SharedTlsMaterial();
  HttpServerOptions options;
  options.header_timeout_seconds = 1;
  TlsServed s(m, false, false, options);
  // 50 that send nothing, 50 that send half a ClientHello.
  std::vector<int> fds;
  const std::string partial("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  for (int i = 0; i < 100; ++i) {
    const int fd = ConnectLoopback(s.port());
    if (i % 2 == 1) REQUIRE(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL) > 0);
    fds.push_back(fd);
  }
  // Meanwhile a real client is served.
  TlsClient c(s.port(), Trusting(m));
  CHECK(MustRequest(c, "GET", "/healthz").status == 200);
  // Every stalled one is closed by the server.
  size_t closed = 0;
  for (int fd : fds) {
    pollfd p{.fd = fd, .events = POLLIN};
    if (::poll(&p, 1, 4000) > 0) {
      char b;
      if (::recv(fd, &b, 1, 0) <= 0) ++closed;
    }
    ::close(fd);
  }
  CHECK(closed == fds.size());
  CHECK(s.closed(Closed::kHeaderTimeout) == fds.size());
}

}  // namespace
}  // namespace berth::extender
