#include "extender/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "core/strings.h"
#include "httplib.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

// Replies are labelled with a charset: cpp-httplib compresses exactly "application/json"
// when the client accepts gzip, and kube-scheduler always does.
constexpr char kJsonType[] = "application/json; charset=utf-8";

void Send(httplib::Response& res, Reply reply) {
  res.status = reply.status;
  const bool json = reply.content_type == "application/json";
  res.set_content(std::move(reply.body), json ? kJsonType : reply.content_type.c_str());
}

int SocketPort(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return -1;
}

// cpp-httplib 0.11.4 waits on an idle kept-alive connection until a request comes or the
// keep-alive timeout (120 s) passes, and only then looks at the stop flag: stop() alone leaves
// Stop() and Run() blocked for up to two minutes while kube-scheduler holds an idle connection
// (and Kubernetes kills the pod after its 30 s grace period). Shutting down the read side of
// the connections this server accepted wakes those waits: the worker reads EOF and closes the
// connection, while a request already read still gets its reply (the write side stays open).
void ShutdownAcceptedConnections(int port) {
  ForEachAcceptedSocket(port, [](int fd, int) {
    ::shutdown(fd, SHUT_RD);
    return true;
  });
}

std::string_view LastSegment(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsVerbPath(std::string_view path) {
  const std::string_view last = LastSegment(path);
  return last == "filter" || last == "prioritize" || last == "bind" || last == "preempt";
}

}  // namespace

void ForEachAcceptedSocket(int port, const std::function<bool(int fd, int peer_port)>& fn) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int dir_fd = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dir_fd) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (SocketPort(addr) != port) continue;
    len = sizeof(addr);
    // The listening socket has no peer.
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (!fn(static_cast<int>(fd), SocketPort(addr))) break;
  }
  ::closedir(dir);
}

HttpServer::HttpServer(Service* service, HttpServerOptions options)
    : service_(service), options_(options), server_(std::make_unique<httplib::Server>()) {
  Install();
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Install() {
  httplib::Server& s = *server_;
  const int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_tcp_nodelay(true);
  // cpp-httplib's default socket options set SO_REUSEPORT, with which a second berth (or anything
  // else) binds the same port without an error and the kernel splits kube-scheduler's
  // connections between the two. SO_REUSEADDR alone still allows a quick restart.
  s.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_keep_alive_max_count(std::numeric_limits<size_t>::max());
  s.set_keep_alive_timeout(options_.keep_alive_seconds);
  s.set_read_timeout(options_.read_timeout_seconds, 0);
  s.set_write_timeout(options_.read_timeout_seconds, 0);
  s.set_payload_max_length(options_.max_body_bytes);

  const size_t max_body = options_.max_body_bytes;
  s.Post(R"(/.*)", [this, max_body](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
    const std::string_view path = req.path;
    const bool verb = IsVerbPath(path);
    if (options_.read_only) {
      const std::string msg = StrCat("POST ", path, " is not served on this port: it serves only "
                                     "the read-only operations endpoints (see --ops-listen)");
      Send(res, verb ? VerbErrorReply(403, msg) : ErrorReply(403, msg));
      return;
    }
    std::string body;
    bool too_big = false;
    const bool read = reader([&](const char* data, size_t n) {
      if (body.size() + n > max_body) {
        too_big = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    // A Content-Length over the limit never reaches the receiver: cpp-httplib skips the body
    // and sets 413 itself.
    if (too_big || (!read && res.status == 413)) {
      const std::string msg = StrCat("request body exceeds the limit of ", max_body, " bytes");
      Send(res, verb ? VerbErrorReply(413, msg) : ErrorReply(413, msg));
      res.set_header("Connection", "close");
      return;
    }
    if (!read) {
      const std::string msg = "request body incomplete or malformed (truncated, or bad chunked encoding)";
      Send(res, verb ? VerbErrorReply(400, msg) : ErrorReply(400, msg));
      res.set_header("Connection", "close");
      return;
    }
    if (verb) {
      const std::string_view last = LastSegment(path);
      if (last == "filter") return Send(res, service_->Filter(body));
      if (last == "prioritize") return Send(res, service_->Prioritize(body));
      if (last == "bind") return Send(res, service_->Bind(body));
      return Send(res, service_->Preempt(body));
    }
    if (path == "/v1/events") return Send(res, service_->Events(body));
    if (auto it = options_.extra_post_routes.find(req.path); it != options_.extra_post_routes.end()) {
      return Send(res, it->second(body));
    }
    Send(res, ErrorReply(404, StrCat("no such endpoint: POST ", path,
                                     " (POST .../filter, .../prioritize, .../bind, .../preempt, "
                                     "/v1/events)")));
  });

  s.Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string_view path = req.path;
    const bool text = req.get_param_value("format") == "text";
    if (path == "/healthz") return Send(res, service_->Healthz(text));
    if (path == "/readyz") return Send(res, service_->Readyz(text));
    if (path == "/version") return Send(res, service_->Version(text));
    if (path == "/metrics") return Send(res, service_->Metrics());
    if (path == "/debug/nodes") return Send(res, service_->DebugNodes(text));
    if (path == "/debug/pods") {
      const std::string all = req.get_param_value("all");
      return Send(res, service_->DebugPods(text, all == "1" || all == "true"));
    }
    if (path == "/debug/pools") return Send(res, service_->DebugPools(text));
    if (path == "/debug/gangs") return Send(res, service_->DebugGangs(text));
    if (path == "/debug/queues") return Send(res, service_->DebugQueues(text));
    if (path == "/debug/explain") return Send(res, service_->DebugExplain(req.get_param_value("pod"), text));
    if (path == "/debug/snapshot") return Send(res, service_->DebugSnapshot(text));
    Send(res, ErrorReply(404, StrCat("no such endpoint: GET ", path,
                                     " (GET /healthz, /readyz, /version, /metrics, /debug/nodes, "
                                     "/debug/pods, /debug/pools, /debug/gangs, /debug/queues, /debug/explain, /debug/snapshot)")));
  });

  // Errors cpp-httplib raises itself (unsupported method, 413 from Content-Length, 400 for a
  // malformed request line) get a JSON body too.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg;
    switch (res.status) {
      case 413: msg = "request body exceeds the size limit"; break;
      case 404: msg = StrCat("no such endpoint: ", req.method, " ", req.path); break;
      case 405: msg = StrCat("method ", req.method, " not allowed"); break;
      default: msg = StrCat("HTTP error ", res.status);
    }
    Reply r = IsVerbPath(req.path) ? VerbErrorReply(res.status, msg) : ErrorReply(res.status, msg);
    res.set_content(std::move(r.body), kJsonType);
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                             std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("internal error serving {} {}: {}", req.method, req.path, what);
    res.status = 500;
    Reply r = IsVerbPath(req.path) ? VerbErrorReply(500, StrCat("internal error: ", what))
                                   : ErrorReply(500, StrCat("internal error: ", what));
    res.set_content(std::move(r.body), kJsonType);
  });
}

absl::StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = server_->bind_to_any_port(host);
  } else if (!server_->bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return absl::UnavailableError(StrCat("cannot listen on ", host, ":", port,
                                         " (address in use or not available)"));
  }
  port_ = bound;
  return bound;
}

void HttpServer::Run() {
  running_ = true;
  server_->listen_after_bind();
  running_ = false;
}

absl::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  absl::StatusOr<int> bound = Bind(host, port);
  if (!bound.ok()) return bound;
  running_ = true;  // before the thread starts, so a Stop() right away waits for it
  thread_ = std::thread([this] { Run(); });
  // listen_after_bind sets is_running before it accepts; wait for it so callers can connect.
  for (int i = 0; i < 2000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return bound;
}

void HttpServer::Stop() {
  server_->stop();
  // Run() returns once every connection's worker is done; wake idle ones until it has (a
  // connection accepted just before stop() may show up after a first pass).
  while (running_.load()) {
    ShutdownAcceptedConnections(port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace berth::extender
