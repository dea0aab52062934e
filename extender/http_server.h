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

namespace httplib {
class Server;
}

namespace berth::extender {

/// Calls `fn(fd, peer_port)` for every connected socket of this process whose local port is
/// `port`, i.e. the connections a server on that port accepted, until `fn` returns false.
/// cpp-httplib does not hand out its sockets, so they are found among the process's descriptors
/// (/proc/self/fd); servers use it to cut idle kept-alive connections when they stop.
void ForEachAcceptedSocket(int port, const std::function<bool(int fd, int peer_port)>& fn);

struct HttpServerOptions {
  /// Request bodies above this are refused with 413 before they are parsed.
  size_t max_body_bytes = 64u << 20;
  /// Worker threads. cpp-httplib gives each open connection a thread while it is kept alive, so
  /// this bounds the connections served at once (kube-scheduler opens more for concurrent binds).
  int threads = 64;
  /// Idle keep-alive connections are kept longer than Go's 90 s idle timeout, so kube-scheduler
  /// never sends a request on a socket berth is closing (extender-protocol.md, pitfall 15).
  int keep_alive_seconds = 120;
  /// How long a started request may take to arrive.
  int read_timeout_seconds = 10;
  /// Further POST routes (exact path -> handler of the body), served on the same transport path
  /// as the verbs. Benchmarks use it for a do-nothing baseline route.
  std::map<std::string, std::function<Reply(std::string_view body)>> extra_post_routes;
  /// Serve only the GET operations endpoints (health, readiness, version, metrics, debug):
  /// every POST is refused with 403. `--ops-listen` uses it to expose probes and debug output
  /// on the pod network while the verbs, bind included, stay on loopback.
  bool read_only = false;
};

/// Serves Service over HTTP/1.1 with cpp-httplib.
///
/// Routes: POST .../filter, .../prioritize, .../bind, .../preempt (any path prefix, so any
/// `urlPrefix` works), POST /v1/events, and GET /healthz, /readyz, /version, /debug/nodes,
/// /debug/pods, /debug/snapshot (JSON, or text with ?format=text).
///
/// Transport settings that decide latency: TCP_NODELAY on (with Nagle's algorithm a reply
/// written in two pieces waits ~40 ms for the client's delayed ACK); no limit on requests per
/// kept-alive connection (cpp-httplib's default closes it every 5 requests); JSON replies are
/// never compressed (kube-scheduler asks for gzip, which would cost more CPU than the wire saves
/// on loopback).
class HttpServer {
 public:
  HttpServer(Service* service, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds `host:port` (port 0 picks a free port). \return the bound port.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  /// Serves until Stop(); blocks the calling thread.
  void Run();
  /// Bind, then Run on a background thread. \return the bound port.
  absl::StatusOr<int> Start(const std::string& host, int port);
  /// Stops serving: closes the listening socket, ends idle kept-alive connections, lets requests
  /// in progress finish, and waits until Run() has returned (joining the background thread, if
  /// any). Idempotent; callable from any thread but a request handler.
  void Stop();

  /// The underlying server, for benchmarks that add a do-nothing route beside the real ones.
  httplib::Server& raw() { return *server_; }

 private:
  void Install();

  Service* service_;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;                     ///< the bound port, once Bind() succeeded
  std::atomic<bool> running_{false};  ///< Run() has not returned yet
};

}  // namespace berth::extender
