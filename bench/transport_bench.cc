// The transport under hostile clients (issue 16, points 1 and 6).
//
// 1. Connection exhaustion. berth's two servers as `berth serve` runs them (the verb port and the
//    read-only operations port), over a 5,000-node model in Kubernetes mode. On each port a probe
//    calls what must never wait: filter (500 candidate names, as kube-scheduler sends it) on the
//    verb port, GET /healthz (as the kubelet's liveness probe) on the operations port, every
//    10 ms, alternately on one kept-alive connection and on a new connection per call, each call
//    given kube-scheduler's 5 s httpTimeout. Three phases per port, of the same length:
//      alone;
//      while 2,000 idle connections (connected, never a byte) and 200 slow-header clients (one
//      header byte a second, never the blank line) hold sockets, from 100 loopback addresses
//      (127.0.0.2 ..), reconnecting whenever the server closes them;
//      the same 2,200 clients from one address (127.0.0.2).
//    The probe itself connects from 127.0.0.1. It prints p50, p99 and max of the calls answered,
//    how many were not answered within 5 s, and the p99 against the phase alone.
// 2. Memory under large bodies. 16 concurrent 60 MiB full-Node filter requests, then gzip bombs
//    (50 MB and 512 MiB of spaces, compressed), on the verb port: peak RSS of the process (the
//    model, the client's one copy of each body, and the server), RSS a second afterwards, CPU time
//    and the answers. Then how long refused requests wait for their answer: a POST without
//    Content-Length, a Content-Length of 1 TiB, a negative one.
#include "bench/transport_bench.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/bench_service.h"
#include "bench/cluster_profiles.h"
#include "bench/loadgen.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/http_server.h"
#include "extender/service.h"
#include "policy/registry.h"

namespace berth::bench {
namespace {

using Clock = std::chrono::steady_clock;

int g_failures = 0;

void Fail(const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string MiB(int64_t kib) { return absl::StrFormat("%.0f MiB", static_cast<double>(kib) / 1024); }

/// 2,200 clients on each side of loopback need more descriptors than a default soft limit.
void RaiseFdLimit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

uint32_t LoopbackAddress(int host) {  // 127.0.0.host, network byte order
  return htonl((127u << 24) | static_cast<uint32_t>(host));
}

/// A non-blocking socket connecting from `source` (network byte order; 0: any) to
/// 127.0.0.1:`port`; -1 when the connect failed at once.
int StartConnect(int port, uint32_t source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (source != 0) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = source;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = LoopbackAddress(1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

// ---- a client that gives up at a deadline ---------------------------------------------------

struct CallResult {
  bool ok = false;  ///< a complete response arrived in time
  int status = 0;
  double ms = 0;
  std::string error;
};

/// One HTTP/1.1 client connection with deadlines on connect, send and receive; reconnects when
/// the server closed it, or after every call when not kept alive.
class DeadlineClient {
 public:
  DeadlineClient(int port, bool keep_alive) : port_(port), keep_alive_(keep_alive) {}
  ~DeadlineClient() { Close(); }

  CallResult Call(std::string_view request, std::chrono::milliseconds timeout) {
    CallResult r;
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + timeout;
    if (fd_ < 0) {
      fd_ = StartConnect(port_, 0);
      if (fd_ < 0 || !WaitFor(fd_, POLLOUT, deadline) || SocketError() != 0) {
        r.error = "connect";
        Close();
        return r;
      }
    }
    if (!SendAll(request, deadline)) {
      r.error = "send";
      Close();
      return r;
    }
    bool close_after = false;
    if (!ReadResponse(deadline, &r.status, &close_after)) {
      r.error = Clock::now() >= deadline ? "no answer within the timeout" : "connection closed";
      Close();
      return r;
    }
    r.ok = true;
    r.ms = MsSince(start);
    if (close_after || !keep_alive_) Close();
    return r;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    buf_.clear();
  }

 private:
  int SocketError() const {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
  }

  bool SendAll(std::string_view data, Clock::time_point deadline) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!WaitFor(fd_, POLLOUT, deadline)) return false;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return false;
      }
    }
    return true;
  }

  bool Fill(Clock::time_point deadline) {
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!WaitFor(fd_, POLLIN, deadline)) return false;
    }
  }

  bool ReadResponse(Clock::time_point deadline, int* status, bool* close_after) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return false;
    }
    const std::string head = buf_.substr(0, end);
    if (head.size() < 12 || head.compare(0, 7, "HTTP/1.") != 0) return false;
    *status = std::atoi(head.c_str() + 9);
    size_t length = 0;
    bool has_length = false;
    for (size_t pos = head.find("\r\n"); pos != std::string::npos;) {
      const size_t start = pos + 2;
      pos = head.find("\r\n", start);
      const std::string line = head.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
      if (line.size() > 15 && ::strncasecmp(line.c_str(), "content-length:", 15) == 0) {
        length = std::strtoull(line.c_str() + 15, nullptr, 10);
        has_length = true;
      } else if (line.size() >= 17 && ::strncasecmp(line.c_str(), "connection:", 11) == 0 &&
                 line.find("close") != std::string::npos) {
        *close_after = true;
      }
    }
    buf_.erase(0, end + 4);
    if (!has_length) {  // to the end of the connection
      while (Fill(deadline)) {
      }
      *close_after = true;
      buf_.clear();
      return true;
    }
    while (buf_.size() < length) {
      if (!Fill(deadline)) return false;
    }
    buf_.erase(0, length);
    return true;
  }

  int port_;
  bool keep_alive_;
  int fd_ = -1;
  std::string buf_;
};

// ---- attackers --------------------------------------------------------------------------------

struct AttackSpec {
  int idle = 2000;    ///< connect and never send a byte
  int slow = 200;     ///< send a request head one byte a second, never ending it
  int addresses = 100;  ///< spread over 127.0.0.2 .. 127.0.0.(1 + addresses)
};

/// Holds `idle + slow` client sockets open against a port from one epoll thread; whenever the
/// server closes one, it connects again 100 ms later.
class Attack {
 public:
  Attack(int port, AttackSpec spec) : port_(port), spec_(spec) {}
  ~Attack() { Stop(); }

  void Start() {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    socks_.resize(static_cast<size_t>(spec_.idle + spec_.slow));
    for (size_t i = 0; i < socks_.size(); ++i) {
      socks_[i].slow = static_cast<int>(i) >= spec_.idle;
      socks_[i].source = LoopbackAddress(2 + static_cast<int>(i) % spec_.addresses);
      // Slow clients send their next byte at staggered times.
      socks_[i].next_byte = Clock::now() + std::chrono::milliseconds(static_cast<int>(i % 1000));
      Connect(i);
    }
    thread_ = std::thread([this] { Loop(); });
  }

  void Stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    for (Sock& s : socks_) {
      if (s.fd >= 0) ::close(s.fd);
      s.fd = -1;
    }
    ::close(epoll_);
  }

  int open() const { return open_.load(); }
  uint64_t closed_by_server() const { return closed_by_server_.load(); }
  uint64_t connects() const { return connects_.load(); }
  uint64_t failed_connects() const { return failed_.load(); }

 private:
  struct Sock {
    int fd = -1;
    bool slow = false;
    bool connected = false;
    uint32_t source = 0;
    size_t sent = 0;
    Clock::time_point next_byte;
    Clock::time_point reconnect_at;
  };

  void Connect(size_t i) {
    Sock& s = socks_[i];
    s.connected = false;
    s.sent = 0;
    s.fd = StartConnect(port_, s.source);
    if (s.fd < 0) {
      ++failed_;
      s.reconnect_at = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    ++connects_;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = i;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, s.fd, &ev);
  }

  void Lost(size_t i, bool was_connected) {
    Sock& s = socks_[i];
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s.fd, nullptr);
    ::close(s.fd);
    s.fd = -1;
    if (was_connected) {
      --open_;
      ++closed_by_server_;
    } else {
      ++failed_;
    }
    s.connected = false;
    s.reconnect_at = Clock::now() + std::chrono::milliseconds(100);
  }

  void Loop() {
    static constexpr std::string_view kSlowHead =
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\nX-Slow: ";
    std::vector<epoll_event> events(256);
    Clock::time_point next_tick = Clock::now();
    while (!stop_) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 20);
      for (int e = 0; e < n; ++e) {
        const size_t i = events[static_cast<size_t>(e)].data.u64;
        Sock& s = socks_[i];
        if (s.fd < 0) continue;
        const uint32_t ev = events[static_cast<size_t>(e)].events;
        if (!s.connected) {
          int err = 0;
          socklen_t len = sizeof(err);
          ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0 || (ev & (EPOLLERR | EPOLLHUP)) != 0) {
            Lost(i, false);
            continue;
          }
          if ((ev & EPOLLOUT) != 0) {
            s.connected = true;
            ++open_;
            epoll_event mod{};
            mod.events = EPOLLIN | EPOLLRDHUP;
            mod.data.u64 = i;
            ::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &mod);
          }
        }
        if (s.connected && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
          char sink[4096];
          ssize_t r;
          while ((r = ::recv(s.fd, sink, sizeof(sink), 0)) > 0) {
          }
          if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) Lost(i, true);
        }
      }
      const Clock::time_point now = Clock::now();
      if (now < next_tick) continue;
      next_tick = now + std::chrono::milliseconds(50);
      for (size_t i = 0; i < socks_.size(); ++i) {
        Sock& s = socks_[i];
        if (s.fd < 0) {
          if (now >= s.reconnect_at) Connect(i);
          continue;
        }
        if (!s.slow || !s.connected || now < s.next_byte) continue;
        const char c = s.sent < kSlowHead.size() ? kSlowHead[s.sent] : 'a';
        if (::send(s.fd, &c, 1, MSG_NOSIGNAL) == 1) ++s.sent;
        s.next_byte = now + std::chrono::seconds(1);
      }
    }
  }

  int port_;
  AttackSpec spec_;
  int epoll_ = -1;
  std::vector<Sock> socks_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> open_{0};
  std::atomic<uint64_t> closed_by_server_{0}, connects_{0}, failed_{0};
};

// ---- the probes -------------------------------------------------------------------------------

struct ProbeStats {
  std::vector<double> ms;  ///< answered calls
  int calls = 0;
  int unanswered = 0;  ///< no complete answer within the timeout (or the connection failed)
  int wrong = 0;       ///< answered with another status than expected
  std::string first_error;

  double Percentile(double q) const {
    if (ms.empty()) return 0;
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  }
  double Max() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }
};

/// Calls `request` every `pace` for `seconds`, alternately on one kept-alive connection and on
/// a new connection; each call waits at most kube-scheduler's 5 s httpTimeout.
void Probe(int port, const std::string& request, int expect_status, double seconds,
           ProbeStats* kept, ProbeStats* fresh) {
  constexpr auto kTimeout = std::chrono::milliseconds(5000);
  constexpr auto kPace = std::chrono::milliseconds(10);
  DeadlineClient keep_alive(port, true);
  std::string close_request = request;
  close_request.insert(close_request.find("\r\n") + 2, "Connection: close\r\n");
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(seconds));
  for (int i = 0; Clock::now() < end; ++i) {
    const bool use_kept = i % 2 == 0;
    ProbeStats* s = use_kept ? kept : fresh;
    CallResult r;
    if (use_kept) {
      r = keep_alive.Call(request, kTimeout);
    } else {
      DeadlineClient once(port, false);
      r = once.Call(close_request, kTimeout);
    }
    ++s->calls;
    if (!r.ok) {
      ++s->unanswered;
      if (s->first_error.empty()) s->first_error = r.error;
    } else {
      s->ms.push_back(r.ms);
      if (r.status != expect_status) {
        ++s->wrong;
        if (s->first_error.empty()) s->first_error = StrCat("status ", r.status);
      }
    }
    std::this_thread::sleep_for(kPace);
  }
}

struct PhaseRow {
  std::string port, phase, probe;
  ProbeStats stats;
  int open_before = 0, open_after = 0;
  uint64_t server_closed = 0, failed_connects = 0;
  std::string load;
};

void PrintRows(const std::vector<PhaseRow>& rows) {
  std::printf(
      "\n| port | clients holding sockets | probe | calls | not answered in 5 s | p50 ms | p99 ms | "
      "max ms | p99 / alone | attackers connected (start, end) | closed by the server | "
      "connects refused | load average |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const PhaseRow& r : rows) {
    double alone = 0;
    for (const PhaseRow& a : rows) {
      if (a.port == r.port && a.probe == r.probe && a.phase == "none") alone = a.stats.Percentile(0.99);
    }
    const double p99 = r.stats.Percentile(0.99);
    const std::string ratio = r.phase == "none" || r.stats.ms.empty() || alone <= 0
                                  ? "-"
                                  : absl::StrFormat("%.2fx", p99 / alone);
    std::printf("| %s | %s | %s | %d | %d | %.2f | %.2f | %.2f | %s | %d, %d | %llu | %llu | %s |\n",
                r.port.c_str(), r.phase.c_str(), r.probe.c_str(), r.stats.calls, r.stats.unanswered,
                r.stats.Percentile(0.5), p99, r.stats.Max(), ratio.c_str(), r.open_before,
                r.open_after, static_cast<unsigned long long>(r.server_closed),
                static_cast<unsigned long long>(r.failed_connects), r.load.c_str());
  }
  std::fflush(stdout);
}

std::string PostRequest(std::string_view path, std::string_view body, std::string_view extra = "") {
  return StrCat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Go-http-client/1.1\r\n",
                "Content-Type: application/json\r\nAccept-Encoding: gzip\r\n", extra,
                "Content-Length: ", body.size(), "\r\n\r\n", body);
}

// ---- bodies -----------------------------------------------------------------------------------

/// `size` bytes of spaces, gzip-compressed at level 9 (a valid gzip stream).
std::string GzipSpaces(size_t size) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  const std::string block(1 << 20, ' ');
  std::string out;
  char buf[1 << 16];
  size_t left = size;
  int flush = Z_NO_FLUSH;
  do {
    const size_t n = std::min(left, block.size());
    left -= n;
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(block.data()));
    z.avail_in = static_cast<uInt>(n);
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      deflate(&z, flush);
      out.append(buf, sizeof(buf) - z.avail_out);
    } while (z.avail_out == 0);
  } while (flush != Z_FINISH);
  deflateEnd(&z);
  return out;
}

/// Sends one request on a new blocking connection and reads its answer, or gives up at `timeout`.
CallResult OneShot(int port, const std::string& request, std::chrono::milliseconds timeout) {
  DeadlineClient c(port, false);
  return c.Call(request, timeout);
}

struct MemoryFigures {
  int64_t before_kib = 0, peak_kib = 0, after_kib = 0;
  double seconds = 0, cpu_seconds = 0;
};

/// Runs `fn`, sampling the process's RSS: before, peak (VmHWM) and a second after.
template <class Fn>
MemoryFigures Measure(Fn&& fn) {
  MemoryFigures m;
  ::malloc_trim(0);
  m.before_kib = ProcStatusKiB("VmRSS");
  ResetPeakRss();
  const double cpu0 = CpuSeconds();
  const Clock::time_point t0 = Clock::now();
  fn();
  m.seconds = MsSince(t0) / 1000;
  m.cpu_seconds = CpuSeconds() - cpu0;
  m.peak_kib = std::max(ProcStatusKiB("VmHWM"), ProcStatusKiB("VmRSS"));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  m.after_kib = ProcStatusKiB("VmRSS");
  return m;
}

void Bodies(int port, bool quick) {
  const ClusterProfile p = Profile5k();
  // About 60 MiB of fat Node objects (~14.8 KB each), as kube-scheduler sends with
  // nodeCacheCapable: false.
  const int nodes = quick ? 400 : 4250;
  const int clients = quick ? 4 : 16;
  const std::string body =
      ArgsNodesJson(p, PendingPodJson(PendingKind::kFits), CandidateIndices(p, nodes, 11), true);
  const std::string request = PostRequest("/scheduler/filter", body);
  std::printf("\nLarge bodies on the verb port (load average %s)\n\n", LoadAverage().c_str());
  std::printf("| what | answers | seconds | CPU seconds | RSS before | peak RSS | RSS 1 s after |\n"
              "|---|---|---|---|---|---|---|\n");
  auto row = [](const std::string& what, const std::string& answers, const MemoryFigures& m) {
    std::printf("| %s | %s | %.2f | %.2f | %s | %s | %s |\n", what.c_str(), answers.c_str(),
                m.seconds, m.cpu_seconds, MiB(m.before_kib).c_str(), MiB(m.peak_kib).c_str(),
                MiB(m.after_kib).c_str());
    std::fflush(stdout);
  };
  {
    std::vector<CallResult> results(static_cast<size_t>(clients));
    const MemoryFigures m = Measure([&] {
      std::vector<std::thread> threads;
      for (int i = 0; i < clients; ++i) {
        threads.emplace_back([&, i] {
          results[static_cast<size_t>(i)] = OneShot(port, request, std::chrono::seconds(120));
        });
      }
      for (std::thread& t : threads) t.join();
    });
    std::map<std::string, int> answers;
    for (const CallResult& r : results) {
      ++answers[r.ok ? StrCat(r.status) : r.error];
      if (r.ok && r.status != 200 && r.status != 503) Fail(StrCat("large body: status ", r.status));
    }
    std::string text;
    for (const auto& [what, n] : answers) StrAppend(&text, text.empty() ? "" : ", ", n, " x ", what);
    row(absl::StrFormat("%d concurrent filter requests of %.1f MiB (full Nodes)", clients,
                        static_cast<double>(body.size()) / (1 << 20)),
        text, m);
  }
  for (const size_t expanded : {size_t{50'000'000}, quick ? size_t{80} << 20 : size_t{512} << 20}) {
    const std::string bomb = GzipSpaces(expanded);
    const std::string req = PostRequest("/scheduler/filter", bomb, "Content-Encoding: gzip\r\n");
    CallResult r;
    const MemoryFigures m = Measure([&] { r = OneShot(port, req, std::chrono::seconds(60)); });
    row(absl::StrFormat("gzip bomb: %.0f KB expanding to %.0f MB", static_cast<double>(bomb.size()) / 1e3,
                        static_cast<double>(expanded) / 1e6),
        r.ok ? StrCat(r.status) : r.error, m);
    if (r.ok && r.status == 200) Fail("a gzip bomb was answered 200");
  }

  std::printf("\nHow long a refused request waits for its answer (verb port)\n\n"
              "| request | answer | ms |\n|---|---|---|\n");
  struct Refusal {
    std::string what, request;
  };
  const std::vector<Refusal> refusals = {
      {"POST without Content-Length",
       "POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n{}"},
      {"Content-Length: 1099511627776 (1 TiB)",
       "POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1099511627776\r\n\r\n{}"},
      {"Content-Length: -1",
       "POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n{}"},
  };
  std::vector<CallResult> results(refusals.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < refusals.size(); ++i) {
    threads.emplace_back([&, i] {
      const Clock::time_point t0 = Clock::now();
      results[i] = OneShot(port, refusals[i].request, std::chrono::seconds(20));
      results[i].ms = MsSince(t0);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < refusals.size(); ++i) {
    std::printf("| %s | %s | %.1f |\n", refusals[i].what.c_str(),
                results[i].ok ? StrCat(results[i].status).c_str() : results[i].error.c_str(),
                results[i].ms);
  }
  std::fflush(stdout);
}

}  // namespace

int RunTransportBench(bool quick, double seconds) {
  RaiseFdLimit();
  if (seconds <= 0) seconds = quick ? 0.5 : 10;
  const AttackSpec attack = quick ? AttackSpec{.idle = 200, .slow = 20, .addresses = 10} : AttackSpec{};
  ClusterProfile p = Profile5k();
  if (quick) p.nodes = 300;
  const std::unique_ptr<BenchService> served = MakeBenchService(p);
  extender::Service& service = *served->service;

  // The two servers as `berth serve --listen ... --ops-listen ...` runs them.
  extender::HttpServer verbs(&service, extender::HttpServerOptions{.max_body_bytes = 64u << 20,
                                                                   .threads = 64});
  extender::HttpServer ops(&service, extender::OpsServerOptions());
  absl::StatusOr<int> verbs_port = verbs.Start("127.0.0.1", 0);
  absl::StatusOr<int> ops_port = ops.Start("0.0.0.0", 0);
  if (!verbs_port.ok() || !ops_port.ok()) {
    std::fprintf(stderr, "cannot start the servers\n");
    return 2;
  }

  std::printf("berth_bench --transport%s: %d nodes, %d pods; %.1f s per phase; load average %s\n",
              quick ? " --quick (smoke run: figures are not meaningful)" : "", p.nodes,
              p.PodCount(), seconds, LoadAverage().c_str());
  const std::string filter = PostRequest(
      "/scheduler/filter",
      ArgsNamesJson(p, PendingPodJson(PendingKind::kFits), CandidateIndices(p, p.CandidateCount(), 42)));
  const std::string healthz =
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\n\r\n";

  struct Port {
    std::string name;
    int port;
    const std::string* request;
  };
  std::vector<PhaseRow> rows;
  for (const Port& port : {Port{"verbs: POST /scheduler/filter", *verbs_port, &filter},
                           Port{"ops: GET /healthz", *ops_port, &healthz}}) {
    struct Phase {
      std::string name;
      std::optional<AttackSpec> attack;
    };
    const std::string many = StrCat(attack.idle, " idle + ", attack.slow, " slow-header from ",
                                    attack.addresses, " addresses");
    const std::string one = StrCat(attack.idle, " idle + ", attack.slow, " slow-header from 1 address");
    for (const Phase& phase :
         {Phase{"none", std::nullopt},
          Phase{many, attack},
          Phase{one, AttackSpec{.idle = attack.idle, .slow = attack.slow, .addresses = 1}}}) {
      std::unique_ptr<Attack> attackers;
      PhaseRow kept{.port = port.name, .phase = phase.name, .probe = "kept-alive connection"};
      PhaseRow fresh{.port = port.name, .phase = phase.name, .probe = "new connection per call"};
      if (phase.attack) {
        attackers = std::make_unique<Attack>(port.port, *phase.attack);
        attackers->Start();
        // Let the connections establish (a listen backlog may hold some back).
        for (int i = 0; i < 60 && attackers->open() < phase.attack->idle + phase.attack->slow; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        kept.open_before = fresh.open_before = attackers->open();
      }
      kept.load = fresh.load = LoadAverage();
      Probe(port.port, *port.request, 200, seconds, &kept.stats, &fresh.stats);
      if (attackers) {
        kept.open_after = fresh.open_after = attackers->open();
        kept.server_closed = fresh.server_closed = attackers->closed_by_server();
        kept.failed_connects = fresh.failed_connects = attackers->failed_connects();
        attackers->Stop();
      }
      for (PhaseRow* r : {&kept, &fresh}) {
        if (r->stats.wrong > 0) Fail(StrCat(port.name, ", ", phase.name, ": ", r->stats.first_error));
        if (!phase.attack && r->stats.unanswered > 0) {
          Fail(StrCat(port.name, " alone: ", r->stats.unanswered, " calls unanswered: ", r->stats.first_error));
        }
      }
      rows.push_back(std::move(kept));
      rows.push_back(std::move(fresh));
      // Let the server drop what the attackers left before the next phase.
      std::this_thread::sleep_for(std::chrono::milliseconds(quick ? 100 : 500));
    }
  }
  PrintRows(rows);

  Bodies(*verbs_port, quick);

  ops.Stop();
  verbs.Stop();
  std::printf("\nload average at end: %s\n", LoadAverage().c_str());
  if (g_failures > 0) {
    std::printf("\n%d check(s) FAILED: see stderr\n", g_failures);
    return 1;
  }
  return 0;
}

}  // namespace berth::bench
