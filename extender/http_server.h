#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string_view>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "extender/service.h"
#include "extender/tls.h"

namespace berth::extender {

/// Calls `fn(fd, peer_port)` for every connected socket of this process whose local port is
/// `port`, i.e. the connections a server on that port accepted, until `fn` returns false.
/// Servers that do not hand out their sockets (cpp-httplib's, in the tests' fake API server) use
/// it to cut idle kept-alive connections when they stop; tests use it to look at berth's own.
void ForEachAcceptedSocket(int port, const std::function<bool(int fd, int peer_port)>& fn);

struct HttpServerOptions {
  /// Request bodies above this are refused with 413: at once when Content-Length says so, as
  /// soon as a chunked or compressed body grows past it otherwise (decoded size).
  size_t max_body_bytes = 64u << 20;
  /// Worker threads: requests answered at once. Connections hold no worker while idle or
  /// while their request arrives; one I/O thread reads, parses and writes for all of them.
  int threads = 64;
  /// Idle keep-alive connections are kept longer than Go's 90 s idle timeout, so kube-scheduler
  /// never sends a request on a socket berth is closing (extender-protocol.md, pitfall 15).
  int keep_alive_seconds = 120;
  /// How long a request's body may take to arrive after its head (408 after it), and how long a
  /// reply may wait for its client to take more of it.
  int read_timeout_seconds = 10;
  /// Further POST routes (exact path -> handler of the body), served on the same transport path
  /// as the verbs. Benchmarks use it for a do-nothing baseline route.
  std::map<std::string, std::function<Reply(std::string_view body)>> extra_post_routes;
  /// Serve only the GET operations endpoints (health, readiness, version, metrics, debug) and
  /// POST /v1/whatif, which changes nothing: every other POST is refused with 403. `--ops-listen` uses it to expose probes and debug output
  /// on the pod network while the verbs, bind included, stay on loopback.
  bool read_only = false;
  /// Its threads are named "<name>-worker" and, when Start() runs the loop on a thread of its
  /// own, "<name>-loop" (the main thread, running Run(), keeps the process's name).
  std::string thread_name = "http";

  /// Connections open at once. At the limit, the connection idle longest is closed to make
  /// room; with none idle, a new connection gets 503 and is closed.
  int max_connections = 4096;
  /// Connections open at once from one client address; more get 503 and are closed.
  int max_connections_per_peer = 256;
  /// Requests of one client address answered by workers at once; 0: three quarters of
  /// `threads` (at least 1), so no client can take every worker. Its other requests wait.
  int max_workers_per_peer = 0;
  /// A request head (request line and header fields) must arrive within this many seconds of
  /// the connection's accept, or of the first byte of a later request on a kept-alive
  /// connection: 408 if some of it came, closed silently if none did.
  int header_timeout_seconds = 5;
  /// Longest request head; longer ones get 431 (414 for the request line alone).
  size_t max_header_bytes = 32u << 10;
  /// Bytes of request bodies held at once over all connections, from the moment a body is
  /// admitted until its handler returns, and of replies their clients have not taken yet. A
  /// body that does not fit waits, unread (TCP flow control holds its client back), until
  /// room frees; after `read_timeout_seconds` it gets 503. The last eighth is kept for
  /// bodies up to 1 MiB (kube-scheduler's names-mode calls), so a few large bodies never hold
  /// the verbs back; GET requests wait while replies fill the limit.
  size_t max_bytes_in_flight = 256u << 20;
  /// At most this many requests per connection (0: no limit); the last reply says
  /// Connection: close.
  size_t max_requests_per_connection = 0;
  /// HTTPS: every connection speaks TLS with this certificate (re-read when its files change;
  /// extender/tls.h); null: plain HTTP. A connection refused at accept is closed without a
  /// 503 (no handshake is made for it).
  std::shared_ptr<TlsServerContext> tls;
  /// With `tls` and its client CA: clients must present a certificate that CA signed (mutual
  /// TLS; berth's verb port when `--tls-client-ca-file` is given).
  bool tls_verify_client = false;
  /// TCP_NODELAY on accepted sockets (replies are one write each, but a client's delayed ACK
  /// must never hold one back).
  bool tcp_nodelay = true;
  /// The longest the event loop sleeps when no timer is due sooner. Nothing depends on it: a
  /// worker's finished request wakes the loop whenever anything waits on it, and otherwise the
  /// client's next event does (HttpServer::Impl::QuietCompletion). Tests raise it to prove that.
  int loop_max_sleep_ms = 1000;
};

/// The options of the read-only operations port (`berth serve --ops-listen`): the kubelet's
/// probes, Prometheus and `curl` from the pod network. Bodies up to 1 MiB (every POST but
/// /v1/whatif, which changes nothing, is refused), 8 workers, at most 64 connections per client
/// address, and 64 MiB of replies in flight.
HttpServerOptions OpsServerOptions();

/// Serves Service over HTTP/1.1 with berth's own event loop (extender/http_server.cc).
///
/// Routes: POST .../filter, .../prioritize, .../bind, .../preempt (any path prefix, so any
/// `urlPrefix` works), POST /v1/events, POST /v1/whatif, and GET (and HEAD) /healthz, /readyz, /version,
/// /metrics, /debug/nodes, /debug/pods, /debug/pools, /debug/gangs, /debug/queues,
/// /debug/explain, /debug/snapshot (JSON, or text with ?format=text).
///
/// One I/O thread accepts connections and reads, parses and decodes every request (chunked
/// bodies; gzip or deflate bodies in bounded steps) on non-blocking sockets; complete requests
/// go to `threads` workers that run the handlers and write the reply; /healthz, /readyz and
/// /version are answered on the I/O thread itself, so probes never wait for a worker. So is a
/// filter or prioritize that is the only compute-bound request at the time (none other became
/// ready in the same turn of the loop, none is in a worker or waiting for one) and whose body
/// is at most 1 MiB (kube-scheduler's names-mode calls; not full Node objects): kube-scheduler
/// asks them one pod at a time, and the hand-off to a worker and back would cost more than many
/// a filter (berth_http_requests_answered_on_loop_total counts them). A lone bind, when no
/// request is in a worker either, is taken by the I/O thread too: it binds, and if anything
/// else needs the loop while the binding waits for the API server (an event on any connection,
/// a deadline), the loop moves to a worker thread, which runs it from then on, and the bind's
/// thread finishes as a worker (WaitEscape; berth_http_loop_handoffs_total counts these).
/// HTTP/1.1 keep-alive with pipelined requests answered in order; replies are never
/// compressed. The limits are HttpServerOptions'; connections refused or closed are counted by
/// reason on GET /metrics (berth_http_connections_*).
class HttpServer {
 public:
  HttpServer(Service* service, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds `host:port` (port 0 picks a free port) and listens. Raises the soft limit on open
  /// descriptors (RLIMIT_NOFILE) to the hard limit, as `max_connections` needs one each.
  /// \return the bound port.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  /// Serves until Stop(); blocks the calling thread.
  void Run();
  /// Bind, then Run on a background thread. \return the bound port.
  absl::StatusOr<int> Start(const std::string& host, int port);
  /// Stops serving: closes the listening socket and every connection not in a handler, lets
  /// requests in handlers finish and writes their replies, and waits until Run() has returned
  /// (joining the background thread, if any). Idempotent; callable from any thread but a request
  /// handler.
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  std::atomic<bool> running_{false};  ///< Run() has not returned yet
};

}  // namespace berth::extender
