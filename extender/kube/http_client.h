#pragma once

// berth's HTTP/1.1 client for the Kubernetes API: one connection per object, plain or TLS
// (OpenSSL), non-blocking sockets driven with poll() so that every step has a deadline, and a
// response reader that takes the socket's bytes in 16 KiB reads and frames them with the
// server's own ChunkedDecoder (extender/http_wire.h).
//
// Why not cpp-httplib's client, as before: it reads a response's head, and the size line of
// every chunk of a watch stream, one byte per read call (each a poll() and an SSL_read), and it
// builds maps of headers per request. For a binding that was a third of the bind verb's CPU,
// and the pod watch spent as much in httplib as in decoding its events (docs/performance.md,
// "What a scheduled pod costs berth").

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/http_wire.h"

namespace berth::extender::kube {

/// What berth needs to reach one API server: where it is, the name its certificate must carry,
/// and the TLS context (CA bundle, client certificate) every connection shares.
struct ApiEndpoint {
  std::string connect_host;  ///< DNS name or IP to connect to (IPv6 without brackets)
  int port = 443;
  /// The name the server's certificate is verified against (tls-server-name, or the host), also
  /// sent as SNI when it is a DNS name; and the Host header.
  std::string server_name;
  /// Null for plain HTTP. Shared by every connection (SSL_CTX is reference counted).
  std::shared_ptr<SSL_CTX> tls;
};

/// The head of one response: status and the header fields berth acts on.
struct ApiResponseHead {
  int status = 0;
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;       ///< HTTP/1.1 without `Connection: close`
  std::optional<int> retry_after;  ///< `Retry-After` in seconds (429, 503)
};

/// One connection to the API server. Not thread-safe, except Interrupt(), which any thread may
/// call while another reads or writes.
class ApiConnection {
 public:
  /// Connects (each address the host resolves to, in turn) and, over TLS, completes the
  /// handshake and verifies the server's certificate, all within `timeout`.
  static absl::StatusOr<std::unique_ptr<ApiConnection>> Open(const ApiEndpoint& endpoint,
                                                             absl::Duration timeout);
  ~ApiConnection();
  ApiConnection(const ApiConnection&) = delete;
  ApiConnection& operator=(const ApiConnection&) = delete;

  /// Sends one request: `head` (request line and header fields, blank line included), then
  /// `body`, in one write when they fit one TLS record.
  absl::Status Send(std::string_view head, std::string_view body, absl::Duration timeout);
  /// Reads the next response's head. Each read may wait up to `timeout`.
  absl::StatusOr<ApiResponseHead> ReadHead(absl::Duration timeout);
  /// Reads the body of the response whose head was just read, handing its bytes to `on_data`
  /// as they arrive (decoded from chunked framing); `on_data` returns false to stop (the
  /// connection is then not reused). Each read may wait up to `idle_timeout` (a watch's
  /// silence limit). Bodies over `max_bytes` fail with ResourceExhausted.
  absl::Status ReadBody(const ApiResponseHead& head,
                        const std::function<bool(std::string_view)>& on_data,
                        absl::Duration idle_timeout, uint64_t max_bytes);

  /// From now on, a read waits in the read itself rather than in a poll() before it: the socket
  /// becomes blocking, with `idle_timeout` as its receive timeout (each read may wait that long,
  /// as ReadBody's reads do). For a stream, whose reads mostly wait for the next event: one
  /// system call per wait instead of two. Interrupt still ends a blocked read. The connection
  /// is not reused afterwards. An error (the socket refused a setting) leaves it as it was.
  absl::Status WaitInReads(absl::Duration idle_timeout);

  /// Whether another request may go on this connection: KeptAlive(), and the server has not
  /// closed its side (nor sent anything unasked) since. One poll() of the socket.
  bool Reusable() const;
  /// Whether the last exchange left the connection fit for another request: its response
  /// allowed keep-alive and was read whole, nothing more was read, and it was not interrupted.
  /// No system call: the pool asks it when a connection comes back, Reusable() when one is taken.
  bool KeptAlive() const;
  /// Makes a read or write blocked in another thread return soon (the socket is shut down).
  /// Safe from any thread while the connection exists.
  void Interrupt();
  bool interrupted() const { return interrupted_.load(); }
  /// Whether the connection has carried a complete request and response before.
  bool used() const { return used_; }

 private:
  ApiConnection(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  enum class Io : uint8_t { kOk, kEof, kTimeout, kError };
  /// Reads at least one byte into in_ (or meets the end of the stream).
  Io Fill(absl::Time deadline);
  Io WaitFor(short events, absl::Time deadline);
  absl::Status IoError(Io io, std::string_view what) const;

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  /// Bytes read: [pos_, len_) are not consumed yet. Grown, never zero-filled.
  std::unique_ptr<char[]> in_;
  size_t cap_ = 0, len_ = 0, pos_ = 0;
  std::string_view Unread() const { return {in_.get() + pos_, len_ - pos_}; }
  bool reusable_ = false;
  bool used_ = false;
  /// The last read returned less than it asked for: the next one waits for the socket first.
  bool drained_ = false;
  /// WaitInReads: the socket is blocking, and a read that finds nothing is a timeout.
  bool wait_in_reads_ = false;
  std::atomic<bool> interrupted_{false};
};

/// A TLS client context for the API server: TLS 1.2 or newer; the server verified against
/// `ca_pem` (empty: the system's CAs) unless `insecure_skip_verify`; the client certificate and
/// key (PEM, both or neither). Errors name `source` (the kubeconfig) and what is wrong.
absl::StatusOr<std::shared_ptr<SSL_CTX>> NewApiTlsContext(const std::string& ca_pem,
                                                          bool insecure_skip_verify,
                                                          const std::string& client_cert_pem,
                                                          const std::string& client_key_pem,
                                                          const std::string& source);

}  // namespace berth::extender::kube
