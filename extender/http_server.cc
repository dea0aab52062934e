// berth's HTTP/1.1 server: one epoll I/O thread, a pool of workers, and the routes onto Service.
//
// The I/O thread owns every connection. It accepts, reads (edge-triggered, non-blocking),
// parses heads, takes bodies (Content-Length, chunked, gzip or deflate decoded in bounded
// steps), enforces the deadlines and limits of HttpServerOptions, and writes what the workers
// could not. A complete request goes to a worker, which runs the handler, writes the reply
// itself when the socket takes it, and hands the connection back. While a worker holds a
// connection the I/O thread only notes events on it. Bytes move only through
// http::ConnectionIo, so a TLS layer can take the place of the plain socket.
//
// Each connection is in one state; the states that wait on the client have a deadline, and the
// connections in such a state sit in a list ordered by deadline (every deadline of a list is the
// same timeout added to the time of entry, so appending keeps the order): the loop looks only at
// the head of each list.
#include "extender/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/strings.h"
#include "extender/http_io.h"
#include "extender/http_wire.h"
#include "extender/thread_name.h"
#include "extender/wait_escape.h"
#include "extender/worker_bell.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

using Clock = std::chrono::steady_clock;
using Closed = ListenerMetrics::Closed;

// JSON replies carry a charset; replies are never compressed whatever the client accepts.
constexpr char kJsonType[] = "application/json; charset=utf-8";

// Work the I/O thread does for one connection before it turns to the others: bytes read, and
// bytes a compressed body expands to.
constexpr size_t kReadPerTurn = 256u << 10;
constexpr size_t kInflatePerTurn = 1u << 20;
// Bodies of unknown size (chunked, compressed) take room under the in-flight limit in steps.
constexpr size_t kChargeStep = 256u << 10;
// Bodies up to this size may use the part of the in-flight limit kept for small requests.
constexpr size_t kSmallBody = 1u << 20;
// After an error reply with Connection: close, the request's remaining bytes are read and
// dropped for at most this long, so the client reads the reply rather than a reset.
constexpr auto kLinger = std::chrono::seconds(2);
constexpr size_t kScratchBytes = 64u << 10;

std::string_view LastSegment(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsVerbPath(std::string_view path) {
  const std::string_view last = LastSegment(path);
  return last == "filter" || last == "prioritize" || last == "bind" || last == "preempt";
}

/// The error body of a route: {"Error": ...} on the verbs (the protocol's field), {"error": ...}
/// elsewhere.
Reply RouteError(std::string_view path, int status, std::string_view message) {
  return IsVerbPath(path) ? VerbErrorReply(status, message) : ErrorReply(status, message);
}

/// A query parameter given a value it does not take is refused by name (400), not read as its
/// default as if it had not been asked. Absent (empty) is always allowed; `said` is how the
/// error names the `allowed` values.
std::optional<Reply> BadQueryValue(std::string_view name, std::string_view value,
                                   std::initializer_list<std::string_view> allowed,
                                   std::string_view said) {
  if (value.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return std::nullopt;
  return ErrorReply(400, StrCat(name, ": expected ", said, ", got \"", value.substr(0, 64), "\""));
}

/// `?format=` is json (the default) or text. (/metrics has one format, Prometheus text, and
/// ignores it.)
std::optional<Reply> BadFormat(std::string_view format) {
  return BadQueryValue("format", format, {"json", "text"}, "json or text");
}

int SocketPort(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return -1;
}

/// A client address as a map key: 4 bytes for IPv4 (IPv4-mapped IPv6 included), 16 for IPv6.
std::string PeerKey(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    return std::string(reinterpret_cast<const char*>(&a->sin_addr), 4);
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      return std::string(reinterpret_cast<const char*>(&a->sin6_addr) + 12, 4);
    }
    return std::string(reinterpret_cast<const char*>(&a->sin6_addr), 16);
  }
  return std::string();
}

/// Raises RLIMIT_NOFILE's soft limit to its hard limit (once per process). \return the soft
/// limit in force.
rlim_t RaiseDescriptorLimit() {
  static const rlim_t limit = [] {
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return rlim_t{1024};
    if (r.rlim_cur < r.rlim_max) {
      rlimit raised = r;
      raised.rlim_cur = r.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
    }
    return r.rlim_cur;
  }();
  return limit;
}

/// Large request bodies, and the parser buffers and replies they lead to, are allocated with
/// mmap and given back to the system when freed: glibc would otherwise raise its mmap threshold
/// after the first large free (up to 32 MiB), and keep later buffers of that size in its heaps.
/// Smaller blocks stay in the heaps: setting the mmap threshold also fixes glibc's trim threshold
/// at its 128 KiB default, and a verb's answers and candidate tables at a few thousand nodes
/// (60-200 KiB) would then be given back after every verb and page-faulted in again by the next
/// (3-4% of berth's CPU per pod at 2,000 nodes). Free memory at the top of a heap is kept up to
/// 16 MiB; what the heaps hold is bounded by the peak of blocks under 256 KiB in use at once.
void ReturnLargeBuffersToTheSystem() {
  static const bool done = [] {
    ::mallopt(M_MMAP_THRESHOLD, 256 << 10);
    ::mallopt(M_TRIM_THRESHOLD, 16 << 20);
    return true;
  }();
  (void)done;
}

/// A request or decoded body: a buffer that grows without zero-filling (a 60 MiB body is
/// received straight into it) and is freed as a whole.
class Body {
 public:
  std::string_view view() const { return std::string_view(data_.get(), size_); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  /// Makes room for `n` bytes in all (copying what is there).
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    std::unique_ptr<char[]> bigger(new char[n]);
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = n;
  }
  char* spare() { return data_.get() + size_; }
  size_t spare_bytes() const { return capacity_ - size_; }
  void Commit(size_t n) { size_ += n; }
  void Append(std::string_view s) {
    if (s.size() > spare_bytes()) Reserve(std::max(size_ + s.size(), capacity_ * 2));
    std::memcpy(spare(), s.data(), s.size());
    size_ += s.size();
  }
  void Free() {
    data_.reset();
    size_ = capacity_ = 0;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

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

// ---- the server ---------------------------------------------------------------------------------

class HttpServer::Impl {
 public:
  Impl(Service* service, HttpServerOptions options)
      : service_(service),
        options_(std::move(options)),
        metrics_(&service->transport_metrics().listeners[options_.read_only ? TransportMetrics::kOps
                                                                            : TransportMetrics::kVerbs]) {
    worker_share_ = options_.max_workers_per_peer > 0
                        ? options_.max_workers_per_peer
                        : std::max(1, options_.threads - options_.threads / 4);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~Impl() {
    CloseListener();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  absl::StatusOr<int> Bind(const std::string& host, int port);
  void Run();
  const std::string& thread_name() const { return options_.thread_name; }
  /// Thread-safe: asks Run() to finish.
  void RequestStop();
  void CloseListener() {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
  }

 private:
  enum class State : uint8_t {
    kHead,          ///< reading a request head (header deadline)
    kBody,          ///< reading a body (body deadline)
    kMemoryWait,    ///< a body waiting for room under the in-flight limit (body deadline)
    kDispatchWait,  ///< complete, waiting for a worker
    kInWorker,      ///< a worker answers it; the I/O thread only notes events
    kWriting,       ///< a reply the socket did not take at once (write deadline)
    kIdle,          ///< kept alive between requests (idle deadline)
    kLinger,        ///< after an error reply: dropping what the client still sends
    kClosed,
  };
  struct Conn;
  /// Connections in one waiting state, in the order of their deadlines.
  struct TimerList {
    Conn* head = nullptr;
    Conn* tail = nullptr;
    Clock::duration timeout{};
  };
  struct Conn {
    int fd = -1;
    std::unique_ptr<http::ConnectionIo> io;
    std::string peer;
    State state = State::kHead;
    TimerList* list = nullptr;
    Conn* prev = nullptr;
    Conn* next = nullptr;
    Clock::time_point deadline;
    // Input.
    std::string in;          ///< received and not consumed yet
    size_t head_scan = 0;    ///< where the search for the end of the head goes on
    bool readable = false;   ///< the socket may have bytes (edge-triggered)
    bool read_wants_write = false;  ///< a read waits for the socket to take the layer's output
    bool hangup = false;     ///< the client shut down its side: read until EOF
    bool eof = false;        ///< a read returned EOF
    bool in_work_list = false;
    // The request.
    http::RequestHead head;
    Body body;
    uint64_t length_left = 0;  ///< Content-Length framing: bytes still to come
    std::unique_ptr<http::ChunkedDecoder> chunked;
    std::unique_ptr<http::Inflater> inflater;
    size_t charged = 0;        ///< bytes this connection holds of the in-flight limit
    size_t memory_wanted = 0;  ///< kMemoryWait: the charge it waits for
    size_t requests = 0;
    // The reply.
    std::string out_head, out_body;
    size_t out_off = 0;  ///< bytes of out_head + out_body written
    bool keep_alive = true;
    bool head_only = false;   ///< HEAD: the head is written, the body is not
    bool write_failed = false;
    bool loop_verb = false;  ///< in a worker: a filter or prioritize (verbs_in_workers_)
    /// An epoll event came for the connection while a worker had it (guarded by mu_): the
    /// loop must take it back at once, since that event will not come again.
    bool event_in_worker = false;
    Closed close_reason = Closed::kDone;
    size_t out_size() const { return out_head.size() + (head_only ? 0 : out_body.size()); }
  };

  // Loop. Any of the server's threads may run it, one at a time (SettleVerbs).
  enum class LoopEnd : uint8_t { kStopped, kHandedOff };
  /// The thread's life: the loop while it leads, a worker otherwise, until the server stops.
  void Serve(bool leading);
  LoopEnd Loop();
  void Accept();
  void Refuse(int fd, ListenerMetrics::Refused reason, std::string_view why);
  bool EvictIdle();
  void OnEvent(Conn* c, uint32_t events);
  void Drive(Conn* c);
  void AddToWorkList(Conn* c);
  void ExpireTimers(Clock::time_point now);
  int NextTimeoutMs(Clock::time_point now) const;
  // Input.
  void ReadAndProcess(Conn* c);
  void Feed(Conn* c, std::string_view data);
  void ProcessBuffered(Conn* c);
  size_t Consume(Conn* c, std::string_view data);
  void OnHead(Conn* c);
  void StartBody(Conn* c);
  size_t ConsumeBody(Conn* c, std::string_view data, size_t* work);
  size_t TakePayload(Conn* c, std::string_view payload, size_t* work, bool* blocked);
  void FinishBody(Conn* c);
  void OnEof(Conn* c);
  // In-flight bytes.
  bool TryCharge(Conn* c, size_t n);
  void Release(Conn* c);
  void WaitForMemory(Conn* c, size_t n);
  void WakeMemoryWaiters();
  // Requests and replies.
  void RequestReady(Conn* c);
  /// \return true when the loop went to another thread while a bind waited (this thread then
  /// finished the bind as a worker, and must leave the loop).
  bool SettleVerbs();
  void AnswerOnLoop(Conn* c);
  bool AnswerWaitingOnLoop(Conn* c);
  void HandLoopOff(Conn* c);
  Clock::time_point NextDeadline() const;
  Reply Handle(Conn* c, std::string* extra);
  void TryDispatch();
  /// \return true when this thread is to lead the loop, false when the server stops.
  bool WorkerMain();
  void Answer(Conn* c);
  /// A worker's finished request goes back to the loop (waking it when something waits on it).
  void Complete(Conn* c);
  void ProcessCompletions();
  void OnWorkerDone(Conn* c);
  void SetReply(Conn* c, int status, std::string_view content_type, std::string body,
                std::string_view extra = "");
  void SetReply(Conn* c, Reply r, std::string_view extra) {
    SetReply(c, r.status, r.content_type == "application/json" ? kJsonType : r.content_type,
             std::move(r.body), extra);
  }
  void RespondError(Conn* c, int status, std::string_view message, Closed reason,
                    std::string_view extra = "");
  void StartWriting(Conn* c);
  void Flush(Conn* c);
  bool WriteSome(Conn* c);  // any thread owning c: false on a socket error
  void ResponseDone(Conn* c);
  void ResetRequest(Conn* c);
  void Close(Conn* c, Closed reason);
  // Timers.
  void Enter(Conn* c, State state, TimerList* list);
  void Unlink(Conn* c);
  // Routes (workers; /healthz, /readyz, /version and a lone filter or prioritize on the I/O
  // thread).
  static bool InlineRoute(const http::RequestHead& head);
  bool LoopVerb(const http::RequestHead& head) const;
  bool WaitingVerb(const http::RequestHead& head) const;
  Reply Route(const http::RequestHead& head, std::string_view body, std::string* extra);

  Service* service_;
  HttpServerOptions options_;
  ListenerMetrics* metrics_;
  int worker_share_ = 1;

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int spare_fd_ = -1;  ///< given up to accept and close a connection when out of descriptors
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopping_{false};  ///< the loop has seen stop_ (workers read it)

  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> closed_;  ///< freed after the events of one turn
  struct PeerState {
    int connections = 0;
    int busy = 0;  ///< requests in workers
  };
  std::unordered_map<std::string, PeerState> peers_;
  int open_ = 0;
  TimerList head_list_, body_list_, write_list_, idle_list_, linger_list_;
  std::vector<Conn*> work_list_;
  std::deque<Conn*> memory_waiters_;
  std::deque<Conn*> dispatch_waiters_;
  /// Filter and prioritize requests completed in this turn of the loop (SettleVerbs).
  std::vector<Conn*> verbs_ready_;
  size_t in_flight_ = 0;
  int busy_ = 0;
  int verbs_in_workers_ = 0;  ///< filter and prioritize requests in workers
  char scratch_[kScratchBytes];

  // Workers.
  std::vector<std::thread> workers_;
  std::mutex mu_;
  WorkerBell bell_;              // wakes workers for jobs_
  std::deque<Conn*> jobs_;       // guarded by mu_
  bool workers_stop_ = false;    // guarded by mu_
  /// The loop's thread left it while a bind waited: the next worker to look takes it over
  /// (guarded by mu_).
  bool loop_vacant_ = false;
  std::vector<Conn*> done_;      // guarded by mu_
  std::atomic<bool> io_sleeping_{false};
  /// Whether the sleeping loop has work that waits on any completion (guarded by mu_, set as
  /// it goes to sleep): requests waiting for a worker or for memory, or a stop.
  bool wake_on_completion_ = true;
  /// A worker's finished request that needs nothing more of the loop until its client's next
  /// event: the reply is written whole and the connection stays open with nothing buffered.
  static bool QuietCompletion(const Conn* c);
};

// ---- setup --------------------------------------------------------------------------------------

absl::StatusOr<int> HttpServer::Impl::Bind(const std::string& host, int port) {
  const rlim_t fds = RaiseDescriptorLimit();
  if (static_cast<rlim_t>(options_.max_connections) + 64 > fds) {
    spdlog::warn("open-descriptor limit {} is below max_connections {}: connections past it are "
                 "refused (raise the hard limit, e.g. ulimit -Hn)",
                 static_cast<uint64_t>(fds), options_.max_connections);
  }
  ReturnLargeBuffersToTheSystem();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = StrCat(port);
  const auto unavailable = [&] {
    return absl::UnavailableError(StrCat("cannot listen on ", host, ":", port,
                                         " (address in use or not available)"));
  };
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0) {
    return unavailable();
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR allows a quick restart; no SO_REUSEPORT, with which a second berth would bind
    // the same port without an error and take half of kube-scheduler's connections.
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return unavailable();
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  CloseListener();
  listen_fd_ = fd;
  return SocketPort(addr);
}

void HttpServer::Impl::RequestStop() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
}

void HttpServer::Impl::Run() {
  if (listen_fd_ < 0) return;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  head_list_.timeout = std::chrono::seconds(options_.header_timeout_seconds);
  body_list_.timeout = std::chrono::seconds(options_.read_timeout_seconds);
  write_list_.timeout = std::chrono::seconds(options_.read_timeout_seconds);
  idle_list_.timeout = std::chrono::seconds(options_.keep_alive_seconds);
  linger_list_.timeout = kLinger;
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: accepts resume next turn when one turn stops early
  ev.data.u64 = 0;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = 1;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_stop_ = false;
  }
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    workers_.emplace_back([this] {
      NameThisThread(options_.thread_name + "-worker");
      Serve(/*leading=*/false);
    });
  }
  Serve(/*leading=*/true);
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  closed_.clear();
  ::close(epoll_fd_);
  if (spare_fd_ >= 0) ::close(spare_fd_);
  epoll_fd_ = spare_fd_ = -1;
}

// ---- the loop -----------------------------------------------------------------------------------

// Threads keep their names when the loop moves (the process's main thread cannot be renamed
// without renaming the process): after a hand-off a thread named "-worker" may run the loop,
// and berth_http_loop_handoffs_total says how often that happened.
void HttpServer::Impl::Serve(bool leading) {
  for (;;) {
    if (leading && Loop() == LoopEnd::kStopped) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        workers_stop_ = true;
      }
      bell_.RingAll();
      return;
    }
    if (!WorkerMain()) return;
    leading = true;
  }
}

HttpServer::Impl::LoopEnd HttpServer::Impl::Loop() {
  std::vector<epoll_event> events(256);
  for (;;) {
    if (stop_.load() && !stopping_) {
      stopping_ = true;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      CloseListener();
      std::vector<Conn*> all;
      for (auto& [p, c] : conns_) all.push_back(p);
      for (Conn* c : all) {
        if (c->state != State::kInWorker) Close(c, Closed::kShutdown);
      }
    }
    if (stopping_ && busy_ == 0 && conns_.empty()) return LoopEnd::kStopped;
    if (stopping_ && busy_ == 0) {
      // Replies of the last requests not taken at once: one more try each, then closed.
      std::vector<Conn*> all;
      for (auto& [p, c] : conns_) all.push_back(p);
      for (Conn* c : all) Close(c, Closed::kShutdown);
      continue;
    }
    const Clock::time_point now = Clock::now();
    int timeout = work_list_.empty() && verbs_ready_.empty() ? NextTimeoutMs(now) : 0;
    io_sleeping_.store(true);
    {
      // Completions that arrived before io_sleeping_ was set did not wake the eventfd.
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_.empty()) timeout = 0;
      wake_on_completion_ = stopping_ || !dispatch_waiters_.empty() || !memory_waiters_.empty();
    }
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout);
    io_sleeping_.store(false);
    for (int i = 0; i < n; ++i) {
      const epoll_event& e = events[static_cast<size_t>(i)];
      if (e.data.u64 == 0) {
        if (!stopping_) Accept();
      } else if (e.data.u64 == 1) {
        uint64_t drained;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &drained, sizeof(drained));
      } else {
        OnEvent(reinterpret_cast<Conn*>(e.data.ptr), e.events);
      }
    }
    ProcessCompletions();
    std::vector<Conn*> work;
    work.swap(work_list_);
    for (Conn* c : work) {
      c->in_work_list = false;
      if (c->state != State::kClosed) Drive(c);
    }
    if (SettleVerbs()) return LoopEnd::kHandedOff;
    ExpireTimers(Clock::now());
    closed_.clear();
  }
}

int HttpServer::Impl::NextTimeoutMs(Clock::time_point now) const {
  const Clock::time_point next =
      std::min(now + std::chrono::milliseconds(std::max(1, options_.loop_max_sleep_ms)), NextDeadline());
  if (next <= now) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next - now).count());
}

void HttpServer::Impl::Enter(Conn* c, State state, TimerList* list) {
  Unlink(c);
  c->state = state;
  if (list == nullptr) return;
  c->list = list;
  c->deadline = Clock::now() + list->timeout;
  c->prev = list->tail;
  c->next = nullptr;
  if (list->tail != nullptr) list->tail->next = c;
  list->tail = c;
  if (list->head == nullptr) list->head = c;
}

void HttpServer::Impl::Unlink(Conn* c) {
  TimerList* l = c->list;
  if (l == nullptr) return;
  (c->prev != nullptr ? c->prev->next : l->head) = c->next;
  (c->next != nullptr ? c->next->prev : l->tail) = c->prev;
  c->prev = c->next = nullptr;
  c->list = nullptr;
}

void HttpServer::Impl::ExpireTimers(Clock::time_point now) {
  auto expired = [now](TimerList& l) -> Conn* {
    return l.head != nullptr && l.head->deadline <= now ? l.head : nullptr;
  };
  while (Conn* c = expired(head_list_)) {
    if (c->in.empty()) {
      Close(c, Closed::kHeaderTimeout);  // not a byte of a request: nothing to answer
    } else {
      RespondError(c, 408,
                   StrCat("request head not received within ", options_.header_timeout_seconds, " s"),
                   Closed::kHeaderTimeout);
    }
  }
  while (Conn* c = expired(body_list_)) {
    if (c->state == State::kMemoryWait) {
      RespondError(c, 503,
                   StrCat("server busy: no room for the request body within ",
                          options_.read_timeout_seconds, " s; retry later"),
                   Closed::kBusy, "Retry-After: 1\r\n");
    } else {
      RespondError(c, 408,
                   StrCat("request body not received within ", options_.read_timeout_seconds, " s"),
                   Closed::kBodyTimeout);
    }
  }
  while (Conn* c = expired(write_list_)) Close(c, Closed::kWriteTimeout);
  while (Conn* c = expired(idle_list_)) Close(c, Closed::kIdleTimeout);
  while (Conn* c = expired(linger_list_)) Close(c, c->close_reason);
}

void HttpServer::Impl::Accept() {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of descriptors: the listening socket would stay readable and the loop spin.
        // Give up the spare descriptor to take the connection, answer it and close it.
        ::close(spare_fd_);
        spare_fd_ = -1;
        const int extra = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (extra >= 0) Refuse(extra, ListenerMetrics::Refused::kFdLimit, "out of file descriptors");
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return;
    }
    if (open_ >= options_.max_connections && !EvictIdle()) {
      Refuse(fd, ListenerMetrics::Refused::kMaxConnections,
             StrCat("too many connections (", options_.max_connections, ")"));
      continue;
    }
    std::string peer = PeerKey(addr);
    PeerState& ps = peers_[peer];
    if (ps.connections >= options_.max_connections_per_peer) {
      if (ps.connections == 0 && ps.busy == 0) peers_.erase(peer);
      Refuse(fd, ListenerMetrics::Refused::kPerPeer,
             StrCat("too many connections from this address (", options_.max_connections_per_peer, ")"));
      continue;
    }
    ++ps.connections;
    if (options_.tcp_nodelay) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    auto owned = std::make_unique<Conn>();
    Conn* c = owned.get();
    c->fd = fd;
    if (options_.tls) {
      c->io = options_.tls->NewConnection(fd, options_.tls_verify_client);
    } else {
      c->io = std::make_unique<http::PlainSocketIo>(fd);
    }
    c->peer = std::move(peer);
    if (!c->io) {
      --ps.connections;
      metrics_->Refuse(ListenerMetrics::Refused::kFdLimit);
      ::close(fd);
      continue;
    }
    conns_.emplace(c, std::move(owned));
    ++open_;
    ++metrics_->accepted;
    metrics_->open.store(open_);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    Enter(c, State::kHead, &head_list_);
  }
}

void HttpServer::Impl::Refuse(int fd, ListenerMetrics::Refused reason, std::string_view why) {
  metrics_->Refuse(reason);
  if (options_.tls) {  // a 503 in plain text would not reach a TLS client
    ::close(fd);
    return;
  }
  const Reply r = ErrorReply(503, StrCat("server busy: ", why, "; retry later"));
  const std::string bytes = StrCat(http::ResponseHead(503, kJsonType, r.body.size(), false, 0, false,
                                                      "Retry-After: 1\r\n"),
                                   r.body);
  [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

bool HttpServer::Impl::EvictIdle() {
  if (idle_list_.head == nullptr) return false;
  Close(idle_list_.head, Closed::kEvicted);
  return true;
}

void HttpServer::Impl::OnEvent(Conn* c, uint32_t events) {
  if (c->state == State::kClosed) return;
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) c->readable = true;
  if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) c->hangup = true;
  if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0 && c->read_wants_write) {
    c->read_wants_write = false;
    c->readable = true;
  }
  switch (c->state) {
    case State::kWriting:
      if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0) Flush(c);
      break;
    case State::kHead:
    case State::kBody:
    case State::kIdle:
    case State::kLinger:
      if (c->readable) ReadAndProcess(c);
      break;
    case State::kInWorker: {
      // Remembered; and the worker, if it has not finished yet, must wake the loop when it does.
      std::lock_guard<std::mutex> lock(mu_);
      c->event_in_worker = true;
      break;
    }
    default:  // kMemoryWait, kDispatchWait: `readable` is remembered
      break;
  }
}

void HttpServer::Impl::AddToWorkList(Conn* c) {
  if (c->in_work_list) return;
  c->in_work_list = true;
  work_list_.push_back(c);
}

void HttpServer::Impl::Drive(Conn* c) {
  switch (c->state) {
    case State::kHead:
    case State::kBody:
    case State::kIdle:
      ProcessBuffered(c);
      if (c->state == State::kClosed) return;
      if ((c->state == State::kHead || c->state == State::kBody || c->state == State::kIdle) &&
          c->readable) {
        ReadAndProcess(c);
      }
      break;
    case State::kLinger:
      if (c->readable) ReadAndProcess(c);
      break;
    case State::kWriting:
      Flush(c);
      break;
    default:
      break;
  }
}

// ---- input --------------------------------------------------------------------------------------

void HttpServer::Impl::ReadAndProcess(Conn* c) {
  size_t budget = kReadPerTurn;
  while (budget > 0 && c->readable) {
    const State s = c->state;
    if (s != State::kHead && s != State::kBody && s != State::kIdle && s != State::kLinger) return;
    http::IoResult r;
    size_t asked;
    const bool direct = s == State::kBody && c->head.content_length && !c->inflater && c->in.empty();
    if (direct) {
      // The body straight into its buffer, never past its end (the next request stays in the
      // socket).
      asked = static_cast<size_t>(std::min<uint64_t>(c->length_left, budget));
      r = c->io->Read(c->body.spare(), asked);
    } else {
      asked = std::min(budget, sizeof(scratch_));
      r = c->io->Read(scratch_, asked);
    }
    if (r.kind == http::IoResult::kWantRead || r.kind == http::IoResult::kWantWrite) {
      c->readable = false;
      c->read_wants_write = r.kind == http::IoResult::kWantWrite;
      break;
    }
    if (r.kind == http::IoResult::kEof) {
      c->readable = false;
      c->eof = true;
      OnEof(c);
      return;
    }
    if (r.kind == http::IoResult::kError) {
      Close(c, c->state == State::kLinger      ? c->close_reason
               : c->io->HandshakeFailed() ? Closed::kTlsHandshake
                                          : Closed::kError);
      return;
    }
    budget -= r.bytes;
    // A short read took what the socket had: the next bytes come with a new event (but after
    // the client's FIN none comes: then read on to the EOF).
    if (r.bytes < asked && !c->hangup && !c->io->MoreToRead()) c->readable = false;
    if (s == State::kLinger) continue;  // dropped
    if (direct) {
      c->body.Commit(r.bytes);
      c->length_left -= r.bytes;
      if (c->length_left == 0) {
        FinishBody(c);
        if (c->state == State::kDispatchWait) RequestReady(c);
      }
      continue;
    }
    Feed(c, std::string_view(scratch_, r.bytes));
    if (c->state == State::kClosed) return;
  }
  if (c->readable && budget == 0) AddToWorkList(c);
}

void HttpServer::Impl::Feed(Conn* c, std::string_view data) {
  if (!c->in.empty()) {
    c->in.append(data);
    ProcessBuffered(c);
    return;
  }
  const size_t n = Consume(c, data);
  if (c->state == State::kClosed || c->close_reason != Closed::kDone) return;  // refused
  if (n < data.size()) c->in.append(data.substr(n));
  if (c->state == State::kDispatchWait) RequestReady(c);
}

void HttpServer::Impl::ProcessBuffered(Conn* c) {
  if (c->in.empty()) return;
  const State s = c->state;
  if (s != State::kHead && s != State::kBody && s != State::kIdle) return;
  const size_t n = Consume(c, c->in);
  if (c->state == State::kClosed) return;
  if (c->close_reason != Closed::kDone) {
    c->in.clear();  // refused: the rest of the input is dropped
    return;
  }
  c->in.erase(0, n);
  if (c->head_scan > c->in.size()) c->head_scan = 0;
  if (c->state == State::kDispatchWait) RequestReady(c);
}

size_t HttpServer::Impl::Consume(Conn* c, std::string_view data) {
  size_t pos = 0;
  if (c->state == State::kIdle) {
    if (data.empty()) return 0;
    Enter(c, State::kHead, &head_list_);  // the first byte of the next request starts its clock
  }
  if (c->state == State::kHead) {
    http::WireError error;
    const http::HeadParse p = http::ParseRequestHead(
        data, options_.max_header_bytes, options_.max_body_bytes, &c->head, &error, c->head_scan);
    if (p == http::HeadParse::kIncomplete) {
      c->head_scan = data.size() >= 3 ? data.size() - 3 : 0;
      return 0;
    }
    c->head_scan = 0;
    if (p == http::HeadParse::kError) {
      RespondError(c, error.status, error.message,
                   error.status == 413 ? Closed::kTooLarge : Closed::kBadRequest);
      return data.size();
    }
    pos = c->head.head_bytes;
    OnHead(c);
    if (c->state != State::kBody) return pos;
  }
  if (c->state == State::kBody) {
    size_t work = kInflatePerTurn;
    pos += ConsumeBody(c, data.substr(pos), &work);
  }
  return pos;
}

void HttpServer::Impl::OnHead(Conn* c) {
  ++c->requests;
  const http::RequestHead& h = c->head;
  if (!h.content_length && !h.chunked) {
    if (h.method == "POST" || h.method == "PUT" || h.method == "PATCH") {
      RespondError(c, 411, "Content-Length required (or Transfer-Encoding: chunked)",
                   Closed::kBadRequest);
      return;
    }
    Enter(c, State::kDispatchWait, nullptr);
    return;
  }
  if (h.content_length && *h.content_length == 0) {
    Enter(c, State::kDispatchWait, nullptr);
    return;
  }
  if (h.content_length && h.coding == http::ContentCoding::kIdentity) {
    // The whole body is admitted at once, or waits unread.
    const size_t n = static_cast<size_t>(*h.content_length);
    if (!TryCharge(c, n)) {
      WaitForMemory(c, n);
      return;
    }
  }
  StartBody(c);
}

void HttpServer::Impl::StartBody(Conn* c) {
  const http::RequestHead& h = c->head;
  if (h.content_length) {
    c->length_left = *h.content_length;
    if (h.coding == http::ContentCoding::kIdentity) c->body.Reserve(static_cast<size_t>(*h.content_length));
  } else {
    c->chunked = std::make_unique<http::ChunkedDecoder>();
  }
  if (h.coding != http::ContentCoding::kIdentity) c->inflater = std::make_unique<http::Inflater>(h.coding);
  if (c->state != State::kBody) Enter(c, State::kBody, &body_list_);
  if (h.expect_continue) {
    static constexpr char k100[] = "HTTP/1.1 100 Continue\r\n\r\n";
    iovec iov{const_cast<char*>(k100), sizeof(k100) - 1};
    c->io->Write(&iov, 1);  // best effort: a client that did not get it sends the body anyway
  }
}

size_t HttpServer::Impl::ConsumeBody(Conn* c, std::string_view data, size_t* work) {
  size_t pos = 0;
  for (;;) {
    std::string_view payload;
    if (c->chunked) {
      size_t used = 0;
      const http::ChunkedDecoder::Step step = c->chunked->Next(data.substr(pos), &used, &payload);
      pos += used;
      if (step == http::ChunkedDecoder::Step::kNeedMore) return pos;
      if (step == http::ChunkedDecoder::Step::kError) {
        RespondError(c, 400, "malformed chunked request body", Closed::kBadRequest);
        return data.size();
      }
      if (step == http::ChunkedDecoder::Step::kDone) {
        FinishBody(c);
        return pos;
      }
    } else {
      if (c->length_left == 0) {
        FinishBody(c);
        return pos;
      }
      payload = data.substr(pos, static_cast<size_t>(std::min<uint64_t>(c->length_left, data.size() - pos)));
      if (payload.empty()) return pos;
    }
    bool blocked = false;
    const size_t took = TakePayload(c, payload, work, &blocked);
    if (c->state != State::kBody) return data.size();  // refused
    pos += took;
    if (c->chunked) {
      c->chunked->Took(took);
    } else {
      c->length_left -= took;
    }
    if (took < payload.size()) {
      if (blocked) {
        WaitForMemory(c, kChargeStep);
      } else {
        AddToWorkList(c);  // this turn's work is done; the rest next turn
      }
      return pos;
    }
  }
}

size_t HttpServer::Impl::TakePayload(Conn* c, std::string_view payload, size_t* work, bool* blocked) {
  const size_t max_body = options_.max_body_bytes;
  auto too_large = [&] {
    RespondError(c, 413,
                 c->inflater ? StrCat("request body exceeds the limit of ", max_body,
                                      " bytes once decompressed (Content-Encoding ",
                                      c->head.coding == http::ContentCoding::kGzip ? "gzip" : "deflate",
                                      ")")
                             : StrCat("request body exceeds the limit of ", max_body, " bytes"),
                 Closed::kTooLarge);
    return size_t{0};
  };
  // Room for `total` body bytes under the in-flight limit, taken in steps that double, and the
  // buffer grown to what is charged (so the charge is what the body holds).
  auto room_for = [&](size_t total) {
    if (total <= c->charged) return true;
    const size_t step = std::min(std::max({total - c->charged, kChargeStep, c->charged}),
                                 max_body - c->charged);
    if (!TryCharge(c, step)) return false;
    c->body.Reserve(c->charged);
    return true;
  };
  if (!c->inflater) {
    if (c->body.size() + payload.size() > max_body) return too_large();
    if (!room_for(c->body.size() + payload.size())) {
      *blocked = true;
      return 0;
    }
    c->body.Append(payload);
    return payload.size();
  }
  size_t consumed = 0;
  while (*work > 0) {
    if (c->body.size() >= max_body) {
      // Full: one more byte of output would be over the limit.
      char probe;
      size_t produced = 0, used = 0;
      const http::Inflater::Result r =
          c->inflater->Inflate(payload.substr(consumed), &probe, 1, &produced, &used);
      if (produced > 0) return too_large();
      if (r == http::Inflater::Result::kError) {
        RespondError(c, 400, "corrupt gzip or deflate request body", Closed::kBadRequest);
        return 0;
      }
      consumed += used;
      return consumed;
    }
    if (c->body.size() == c->charged && !room_for(c->body.size() + 1)) {
      *blocked = true;
      return consumed;
    }
    c->body.Reserve(c->charged);
    const size_t max_out = std::min({c->body.spare_bytes(), c->charged - c->body.size(), *work});
    size_t produced = 0, used = 0;
    const http::Inflater::Result r =
        c->inflater->Inflate(payload.substr(consumed), c->body.spare(), max_out, &produced, &used);
    c->body.Commit(produced);
    *work -= std::min(*work, produced);
    consumed += used;
    if (r == http::Inflater::Result::kError) {
      RespondError(c, 400, "corrupt gzip or deflate request body", Closed::kBadRequest);
      return 0;
    }
    if (r == http::Inflater::Result::kEnd) return consumed;
    if (produced == 0 && used == 0) {
      if (consumed < payload.size()) {  // input and room, and no progress: never a valid stream
        RespondError(c, 400, "corrupt gzip or deflate request body", Closed::kBadRequest);
      }
      return consumed;
    }
    if (consumed == payload.size() && produced < max_out) return consumed;
  }
  return consumed;
}

void HttpServer::Impl::FinishBody(Conn* c) {
  if (c->inflater && !c->inflater->ended()) {
    // Output zlib still holds, then the end of the stream must be there.
    size_t work = kInflatePerTurn;
    bool blocked = false;
    while (!c->inflater->ended() && c->state == State::kBody) {
      const size_t before = c->body.size();
      TakePayload(c, std::string_view(), &work, &blocked);
      if (c->state != State::kBody) return;
      if (c->body.size() == before) break;
    }
    if (c->state != State::kBody) return;
    if (!c->inflater->ended()) {
      RespondError(c, 400, "truncated gzip or deflate request body", Closed::kBadRequest);
      return;
    }
  }
  c->chunked.reset();
  c->inflater.reset();
  Enter(c, State::kDispatchWait, nullptr);
}

void HttpServer::Impl::OnEof(Conn* c) {
  switch (c->state) {
    case State::kIdle:
      Close(c, Closed::kPeer);
      return;
    case State::kHead:
      if (c->in.empty()) {
        Close(c, Closed::kPeer);
      } else {
        RespondError(c, 400, "incomplete request head", Closed::kBadRequest);
      }
      return;
    case State::kBody:
      RespondError(c, 400, "request body incomplete or malformed (truncated, or bad chunked encoding)",
                   Closed::kBadRequest);
      return;
    case State::kLinger:
      Close(c, c->close_reason);
      return;
    default:
      return;  // a request is complete; its reply closes the connection
  }
}

// ---- in-flight bytes ----------------------------------------------------------------------------

bool HttpServer::Impl::TryCharge(Conn* c, size_t n) {
  const size_t limit = options_.max_bytes_in_flight;
  const size_t cap = c->charged + n <= kSmallBody ? limit + limit / 8 : limit;
  // A body larger than the whole limit is still served, alone.
  if (in_flight_ + n > cap && in_flight_ > 0) return false;
  in_flight_ += n;
  c->charged += n;
  metrics_->bytes_in_flight.store(static_cast<int64_t>(in_flight_));
  return true;
}

void HttpServer::Impl::Release(Conn* c) {
  if (c->charged == 0) return;
  in_flight_ -= c->charged;
  c->charged = 0;
  metrics_->bytes_in_flight.store(static_cast<int64_t>(in_flight_));
  WakeMemoryWaiters();
  if (!dispatch_waiters_.empty()) TryDispatch();
}

void HttpServer::Impl::WaitForMemory(Conn* c, size_t n) {
  c->memory_wanted = n;
  ++metrics_->waited_for_memory;
  // The body deadline keeps running (from the end of the head).
  if (c->state == State::kBody) {
    c->state = State::kMemoryWait;
  } else {
    Enter(c, State::kMemoryWait, &body_list_);
  }
  memory_waiters_.push_back(c);
}

void HttpServer::Impl::WakeMemoryWaiters() {
  for (auto it = memory_waiters_.begin(); it != memory_waiters_.end();) {
    Conn* c = *it;
    if (c->state != State::kMemoryWait) {
      it = memory_waiters_.erase(it);
      continue;
    }
    if (!TryCharge(c, c->memory_wanted)) {
      ++it;
      continue;
    }
    it = memory_waiters_.erase(it);
    if (c->chunked || c->inflater) {
      c->state = State::kBody;  // still in the body list
    } else {
      StartBody(c);
    }
    AddToWorkList(c);
  }
}

// ---- requests and replies -----------------------------------------------------------------------

void HttpServer::Impl::RequestReady(Conn* c) {
  if (InlineRoute(c->head)) {
    AnswerOnLoop(c);
    return;
  }
  if (LoopVerb(c->head) || WaitingVerb(c->head)) {
    verbs_ready_.push_back(c);  // SettleVerbs, once every event of this turn is read
    return;
  }
  dispatch_waiters_.push_back(c);
  TryDispatch();
}

// Filter and prioritize are short and bounded (no API call, no wait but the model's lock), and
// kube-scheduler asks them one pod at a time. Handing one to a worker and its reply back costs
// two thread wake-ups, a condition variable and an eventfd write: at a few hundred candidates a
// sixth of berth's CPU per pod (docs/performance.md). So when one such request is all the loop
// has (none other ready in this turn, none in a worker, none waiting for one), the loop answers
// it itself, unless its body is large. Anything more goes to the workers as before, so
// concurrent callers still get both cores, and probes wait at most one filter.
//
// A bind is answered the same way when it is all there is, and nothing is in a worker either
// (so every worker is free). Unlike filter, it waits: for the API server's answer to the
// binding. A worker would cost the same two wake-ups as above; so the loop's thread binds, and
// while it waits it watches the loop's epoll descriptor and its next timer (WaitEscape). If
// either comes first (kube-scheduler's next request, a probe, a timeout due), the loop is handed
// to a worker, which runs it from then on, and this thread finishes the bind as a worker
// (docs/decisions.md, "HTTP").
bool HttpServer::Impl::SettleVerbs() {
  if (verbs_ready_.empty()) return false;
  std::vector<Conn*> ready;
  ready.swap(verbs_ready_);
  std::erase_if(ready, [](const Conn* c) { return c->state != State::kDispatchWait; });
  // Names-mode calls are tens of KB up to 5,000 candidates; a body over this (full Node
  // objects, MBs) takes long enough to decode that other connections should not wait for it.
  constexpr size_t kLoopBodyLimit = 1u << 20;
  if (ready.size() == 1 && ready.front()->body.size() <= kLoopBodyLimit && verbs_in_workers_ == 0 &&
      dispatch_waiters_.empty() && !stopping_) {
    Conn* c = ready.front();
    if (!WaitingVerb(c->head)) {
      ++metrics_->answered_on_loop;
      AnswerOnLoop(c);
      return false;
    }
    if (busy_ == 0) {
      ++metrics_->answered_on_loop;
      return AnswerWaitingOnLoop(c);
    }
  }
  for (Conn* c : ready) dispatch_waiters_.push_back(c);
  TryDispatch();
  return false;
}

// The earliest deadline of any connection's timer (none: time_point::max()).
Clock::time_point HttpServer::Impl::NextDeadline() const {
  Clock::time_point next = Clock::time_point::max();
  for (const TimerList* l : {&head_list_, &body_list_, &write_list_, &idle_list_, &linger_list_}) {
    if (l->head != nullptr) next = std::min(next, l->head->deadline);
  }
  return next;
}

bool HttpServer::Impl::AnswerWaitingOnLoop(Conn* c) {
  std::string extra;
  Reply r;
  bool handed_off = false;
  {
    WaitEscape escape(epoll_fd_, NextDeadline(), [this, c] { HandLoopOff(c); });
    r = Handle(c, &extra);
    handed_off = escape.fired();
  }
  c->body.Free();
  if (!handed_off) {
    Release(c);
    SetReply(c, std::move(r), extra);
    StartWriting(c);
    return false;
  }
  // As a worker: the loop's state is another thread's now.
  SetReply(c, std::move(r), extra);
  c->write_failed = !WriteSome(c);
  Complete(c);
  return true;
}

// Still the loop's thread: the request becomes one in a worker (this thread), and the loop is
// left for the next worker to take.
void HttpServer::Impl::HandLoopOff(Conn* c) {
  ++peers_[c->peer].busy;
  ++busy_;
  c->state = State::kInWorker;
  ++metrics_->loop_handoffs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->event_in_worker = false;
    loop_vacant_ = true;
  }
  bell_.RingOne();
}

// On the I/O thread: the handler, then the reply.
void HttpServer::Impl::AnswerOnLoop(Conn* c) {
  std::string extra;
  Reply r = Handle(c, &extra);
  c->body.Free();
  Release(c);
  SetReply(c, std::move(r), extra);
  StartWriting(c);
}

void HttpServer::Impl::TryDispatch() {
  for (auto it = dispatch_waiters_.begin();
       it != dispatch_waiters_.end() && busy_ < options_.threads;) {
    Conn* c = *it;
    if (c->state != State::kDispatchWait) {
      it = dispatch_waiters_.erase(it);
      continue;
    }
    PeerState& ps = peers_[c->peer];
    // GET requests bring no body but may bring large replies: none starts while replies and
    // bodies fill the in-flight limit.
    if (ps.busy >= worker_share_ ||
        (c->head.method != "POST" && in_flight_ > options_.max_bytes_in_flight)) {
      ++it;
      continue;
    }
    it = dispatch_waiters_.erase(it);
    ++ps.busy;
    ++busy_;
    c->loop_verb = LoopVerb(c->head);
    if (c->loop_verb) ++verbs_in_workers_;
    c->state = State::kInWorker;
    {
      std::lock_guard<std::mutex> lock(mu_);
      c->event_in_worker = false;
      jobs_.push_back(c);
    }
    bell_.RingOne();
  }
}

bool HttpServer::Impl::WorkerMain() {
  for (;;) {
    Conn* c = nullptr;
    uint32_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (loop_vacant_) {
        loop_vacant_ = false;
        return true;
      }
      if (!jobs_.empty()) {
        c = jobs_.front();
        jobs_.pop_front();
      } else if (workers_stop_) {
        return false;
      } else {
        ticket = bell_.Prepare();
      }
    }
    if (c == nullptr) {
      bell_.Wait(ticket);
      continue;
    }
    Answer(c);
    Complete(c);
  }
}

// A quiet completion does not wake a sleeping loop: the client's next request (or its close)
// wakes it, and the loop takes every completion back before it reads anything new. That saves
// the loop a wake-up and an eventfd read, and this thread the write, for every request a worker
// answers whole (docs/decisions.md, "HTTP"). The loop never sleeps longer than
// loop_max_sleep_ms.
void HttpServer::Impl::Complete(Conn* c) {
  const bool quiet = QuietCompletion(c);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back(c);
    wake = io_sleeping_.load() && (!quiet || wake_on_completion_ || c->event_in_worker);
  }
  if (wake) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
}

// A reply not written whole would be resumed by its socket's EPOLLOUT edge anyway (the
// worker's write stopped at EAGAIN); it still counts as not quiet, so that no reply rests on
// that edge alone.
bool HttpServer::Impl::QuietCompletion(const Conn* c) {
  return !c->write_failed && c->keep_alive && !c->eof && c->in.empty() &&
         c->out_off >= c->out_size() && !c->io->HasPendingOutput();
}

// On a worker: the handler, then as much of the reply as the socket takes.
void HttpServer::Impl::Answer(Conn* c) {
  std::string extra;
  Reply r = Handle(c, &extra);
  c->body.Free();
  SetReply(c, std::move(r), extra);
  c->write_failed = !WriteSome(c);
}

Reply HttpServer::Impl::Handle(Conn* c, std::string* extra) {
  try {
    return Route(c->head, c->body.view(), extra);
  } catch (const std::exception& e) {
    spdlog::error("internal error serving {} {}: {}", c->head.method, c->head.path, e.what());
    return RouteError(c->head.path, 500, StrCat("internal error: ", e.what()));
  } catch (...) {
    return RouteError(c->head.path, 500, "internal error");
  }
}

void HttpServer::Impl::ProcessCompletions() {
  std::vector<Conn*> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.empty()) return;
    done.swap(done_);
  }
  for (Conn* c : done) OnWorkerDone(c);
  TryDispatch();
}

void HttpServer::Impl::OnWorkerDone(Conn* c) {
  --busy_;
  if (c->loop_verb) --verbs_in_workers_;
  c->loop_verb = false;
  auto it = peers_.find(c->peer);
  if (it != peers_.end()) --it->second.busy;
  Release(c);
  if (c->write_failed) {
    Close(c, Closed::kError);
    return;
  }
  if (stopping_) c->keep_alive = false;
  StartWriting(c);
}

void HttpServer::Impl::SetReply(Conn* c, int status, std::string_view content_type, std::string body,
                                std::string_view extra) {
  if (options_.max_requests_per_connection > 0 &&
      c->requests >= options_.max_requests_per_connection) {
    c->keep_alive = false;
  }
  if (!c->head.keep_alive || stopping_.load()) c->keep_alive = false;
  c->head_only = c->head.method == "HEAD";
  c->out_head = http::ResponseHead(status, content_type, body.size(), c->keep_alive,
                                   options_.keep_alive_seconds, c->head.minor_version == 0, extra);
  c->out_body = std::move(body);
  c->out_off = 0;
}

void HttpServer::Impl::RespondError(Conn* c, int status, std::string_view message, Closed reason,
                                    std::string_view extra) {
  // The request's body is not wanted any more.
  c->body.Free();
  c->chunked.reset();
  c->inflater.reset();
  Release(c);
  c->keep_alive = false;
  c->close_reason = reason;
  const Reply r = RouteError(c->head.path, status, message);
  SetReply(c, status, kJsonType, r.body, extra);
  c->head_only = false;
  StartWriting(c);
}

void HttpServer::Impl::StartWriting(Conn* c) {
  Enter(c, State::kWriting, &write_list_);
  Flush(c);
}

bool HttpServer::Impl::WriteSome(Conn* c) {
  for (;;) {
    iovec iov[2];
    int n = 0;
    if (c->out_off >= c->out_size()) {
      if (!c->io->HasPendingOutput()) return true;
      // n == 0: the layer's own output (TLS records) is still to go.
    } else if (c->out_off < c->out_head.size()) {
      iov[n++] = {c->out_head.data() + c->out_off, c->out_head.size() - c->out_off};
      if (!c->head_only && !c->out_body.empty()) iov[n++] = {c->out_body.data(), c->out_body.size()};
    } else {
      const size_t off = c->out_off - c->out_head.size();
      iov[n++] = {c->out_body.data() + off, c->out_body.size() - off};
    }
    const http::IoResult r = c->io->Write(iov, n);
    if (r.kind == http::IoResult::kOk) {
      c->out_off += r.bytes;
      continue;
    }
    return r.kind == http::IoResult::kWantWrite || r.kind == http::IoResult::kWantRead;
  }
}

void HttpServer::Impl::Flush(Conn* c) {
  const size_t before = c->out_off;
  if (!WriteSome(c)) {
    Close(c, Closed::kError);
    return;
  }
  if (c->out_off < c->out_size() || c->io->HasPendingOutput()) {
    // The reply waits for its client; its bytes count as in flight until it takes them.
    const size_t pending = c->out_size() - c->out_off;
    if (c->charged < pending) {
      in_flight_ += pending - c->charged;
      c->charged = pending;
      metrics_->bytes_in_flight.store(static_cast<int64_t>(in_flight_));
    }
    if (c->out_off > before) Enter(c, State::kWriting, &write_list_);  // progress: a new deadline
    return;
  }
  ResponseDone(c);
}

void HttpServer::Impl::ResponseDone(Conn* c) {
  std::string().swap(c->out_body);
  c->out_head.clear();
  c->out_off = 0;
  Release(c);
  if (!c->keep_alive) {
    if (c->close_reason == Closed::kDone || c->eof) {
      Close(c, c->eof && c->close_reason == Closed::kDone ? Closed::kPeer : c->close_reason);
      return;
    }
    // An error reply: read and drop what the client still sends for a while, so that it reads
    // the reply instead of a reset.
    c->io->ShutdownWrite();
    Enter(c, State::kLinger, &linger_list_);
    if (c->readable) AddToWorkList(c);
    return;
  }
  ResetRequest(c);
  if (c->eof && c->in.empty()) {
    Close(c, Closed::kPeer);
    return;
  }
  Enter(c, State::kIdle, &idle_list_);
  if (!c->in.empty() || c->readable) AddToWorkList(c);
}

void HttpServer::Impl::ResetRequest(Conn* c) {
  c->head = http::RequestHead{};
  c->body.Free();
  c->chunked.reset();
  c->inflater.reset();
  c->length_left = 0;
  c->memory_wanted = 0;
  c->head_scan = 0;
  c->keep_alive = true;
  c->head_only = false;
  c->close_reason = Closed::kDone;
}

void HttpServer::Impl::Close(Conn* c, Closed reason) {
  if (c->state == State::kClosed) return;
  Unlink(c);
  c->state = State::kClosed;
  Release(c);
  auto drop = [c](auto& seq) { seq.erase(std::remove(seq.begin(), seq.end(), c), seq.end()); };
  if (c->in_work_list) drop(work_list_);
  drop(memory_waiters_);
  drop(dispatch_waiters_);
  // Counted before the close, so a client that sees its connection end sees it counted.
  metrics_->Close(reason);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  c->fd = -1;
  --open_;
  metrics_->open.store(open_);
  auto p = peers_.find(c->peer);
  if (p != peers_.end() && --p->second.connections <= 0 && p->second.busy <= 0) peers_.erase(p);
  auto it = conns_.find(c);
  if (it != conns_.end()) {
    closed_.push_back(std::move(it->second));
    conns_.erase(it);
  }
}

// ---- routes -------------------------------------------------------------------------------------

bool HttpServer::Impl::InlineRoute(const http::RequestHead& head) {
  if (head.method != "GET" && head.method != "HEAD") return false;
  return head.path == "/healthz" || head.path == "/readyz" || head.path == "/version";
}

bool HttpServer::Impl::LoopVerb(const http::RequestHead& head) const {
  if (options_.read_only || head.method != "POST" || !IsVerbPath(head.path)) return false;
  const std::string_view last = LastSegment(head.path);
  return last == "filter" || last == "prioritize";
}

bool HttpServer::Impl::WaitingVerb(const http::RequestHead& head) const {
  return !options_.read_only && head.method == "POST" && LastSegment(head.path) == "bind";
}

Reply HttpServer::Impl::Route(const http::RequestHead& head, std::string_view body,
                              std::string* extra) {
  const std::string_view path = head.path;
  const bool verb = IsVerbPath(path);
  if (head.method == "POST" && path == "/v1/whatif") {
    // It changes nothing (a copy of the state decides), so the read-only port serves it too.
    const std::string format = http::QueryParam(head.query, "format");
    if (std::optional<Reply> bad = BadFormat(format)) return *std::move(bad);
    return service_->WhatIf(body, format == "text");
  }
  if (head.method == "POST") {
    if (options_.read_only) {
      return RouteError(path, 403, StrCat("POST ", path, " is not served on this port: it serves only "
                                          "the read-only operations endpoints (see --ops-listen)"));
    }
    if (verb) {
      const std::string_view last = LastSegment(path);
      if (last == "filter") return service_->Filter(body);
      if (last == "prioritize") return service_->Prioritize(body);
      if (last == "bind") return service_->Bind(body);
      return service_->Preempt(body);
    }
    if (path == "/v1/events") return service_->Events(body);
    if (auto it = options_.extra_post_routes.find(std::string(path));
        it != options_.extra_post_routes.end()) {
      return it->second(body);
    }
    return ErrorReply(404, StrCat("no such endpoint: POST ", path,
                                  " (POST .../filter, .../prioritize, .../bind, .../preempt, "
                                  "/v1/events, /v1/whatif)"));
  }
  if (head.method != "GET" && head.method != "HEAD") {
    *extra = "Allow: GET, HEAD, POST\r\n";
    return RouteError(path, 405, StrCat("method ", head.method, " not allowed (GET, HEAD and POST are)"));
  }
  if (path == "/metrics") return service_->Metrics();
  static constexpr std::string_view kGetPaths[] = {
      "/healthz",     "/readyz",      "/version",      "/debug/nodes",   "/debug/pods",
      "/debug/pools", "/debug/gangs", "/debug/queues", "/debug/explain", "/debug/snapshot"};
  if (std::find(std::begin(kGetPaths), std::end(kGetPaths), path) == std::end(kGetPaths)) {
    std::string known = "GET /metrics";
    for (std::string_view p : kGetPaths) StrAppend(&known, ", ", p);
    return ErrorReply(404, StrCat("no such endpoint: ", head.method, " ", path, " (", known, ")"));
  }
  const std::string format = http::QueryParam(head.query, "format");
  if (std::optional<Reply> bad = BadFormat(format)) return *std::move(bad);
  const bool text = format == "text";
  if (path == "/healthz") return service_->Healthz(text);
  if (path == "/readyz") return service_->Readyz(text);
  if (path == "/version") return service_->Version(text);
  if (path == "/debug/nodes") return service_->DebugNodes(text);
  if (path == "/debug/pods") {
    const std::string all = http::QueryParam(head.query, "all");
    if (std::optional<Reply> bad = BadQueryValue("all", all, {"1", "true", "0", "false"}, "1, true, 0 or false")) {
      return *std::move(bad);
    }
    return service_->DebugPods(text, all == "1" || all == "true");
  }
  if (path == "/debug/pools") return service_->DebugPools(text);
  if (path == "/debug/gangs") return service_->DebugGangs(text);
  if (path == "/debug/queues") return service_->DebugQueues(text);
  if (path == "/debug/explain") return service_->DebugExplain(http::QueryParam(head.query, "pod"), text);
  return service_->DebugSnapshot(text);
}

// ---- HttpServer ---------------------------------------------------------------------------------

HttpServerOptions OpsServerOptions() {
  // Bodies only for POST /v1/whatif (a PodGroup and its pods); every other POST is refused.
  return HttpServerOptions{.max_body_bytes = 1u << 20,
                           .threads = 8,
                           .read_only = true,
                           .thread_name = "ops",
                           .max_connections_per_peer = 64,
                           .max_bytes_in_flight = 64u << 20};
}

HttpServer::HttpServer(Service* service, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Bind(const std::string& host, int port) { return impl_->Bind(host, port); }

void HttpServer::Run() {
  running_ = true;
  impl_->Run();
  running_ = false;
}

absl::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  absl::StatusOr<int> bound = Bind(host, port);
  if (!bound.ok()) return bound;
  running_ = true;  // before the thread starts, so a Stop() right away waits for it
  // The socket listens already: clients can connect before the loop runs.
  thread_ = std::thread([this] {
    NameThisThread(impl_->thread_name() + "-loop");
    Run();
  });
  return bound;
}

void HttpServer::Stop() {
  impl_->RequestStop();
  while (running_.load()) {
    impl_->RequestStop();  // Run() may have set up its wake-up after the first request
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (thread_.joinable()) thread_.join();
  impl_->CloseListener();
}

}  // namespace berth::extender
