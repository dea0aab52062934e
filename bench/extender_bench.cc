/// berth_bench: berth's extender benchmark.
///
/// Runs an in-process berth HttpServer (Kubernetes mode, the production path) over synthetic
/// clusters and drives it over loopback with the keep-alive client of bench/loadgen.h, as
/// kube-scheduler does. Every cell is measured together with two baselines that carry exactly
/// the same bytes in both directions, interleaved round by round in the same run:
///   noop  - a do-nothing POST route on berth's own server (same transport path as the verbs)
///           that returns a canned copy of the verb's reply;
///   raw   - a minimal blocking-socket HTTP/1.1 server in this process (one thread per
///           connection, one send per reply): the transport floor on this machine.
/// Then it measures the cluster model: load time, bytes per node and per pod, event cost.
/// Last, gangs (issue 5): the filter call that admits a whole gang (plans and reserves room for
/// every member), and the filter of a reserved member, against a plain pod's filter measured
/// in the same run (`--gangs` runs only this section).
///
/// Usage: berth_bench [--quick] [--sizes=1000,5000] [--rounds=3] [--seconds=1]
///                    [--full-seconds=1.5] [--no-full] [--no-model] [--no-raw]
///                    [--model-nodes=15000] [--events=50000] [--dump-replies=DIR]
///                    [--probe=noop|filter|prioritize|noop-prioritize|raw|inproc-filter|
///                             inproc-prioritize|inproc-reject|inproc-filter-full|
///                             inproc-prioritize-full --probe-calls=N]
///                    [--gangs] [--no-gangs] [--gang-sizes=8,64,512] [--gang-rounds=N]
///                    [--probe=inproc-gang-admit|inproc-gang-member|inproc-gang-plain
///                     --gang-size=512]
///                    [--lock-hold[=SECONDS]]  (the model's exclusive lock: bench/lock_bench.cc)
///                    [--transport[=SECONDS]]  (hostile clients, large bodies: bench/transport_bench.cc)
///                    [--tls[=SECONDS]]  (what HTTPS costs per call: bench/tls_bench.cc)
///                    [--answers]  (bytes of the filter and prioritize answers: bench/answer_bench.cc)
///                    [--journal]  (filter latency with the decision journal off and on: bench/journal_bench.cc)
///                    [--eta]  (the ETA forecast's pass cost and its effect on filter latency: bench/eta_bench.cc)
///                    [--loop ...]  (berth's CPU, API calls and bytes per scheduled pod, berth as a
///                     process against the fake API server: bench/loop_bench.h for its flags)
/// Latency runs: `taskset -c 0 berth_bench` (see docs/performance.md, "Method").
/// Exits non-zero when any request failed or any reply was wrong (never on timing).

#include <arpa/inet.h>
#include <malloc.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/answer_bench.h"
#include "bench/eta_bench.h"
#include "bench/journal_bench.h"
#include "bench/cluster_profiles.h"
#include "bench/lock_bench.h"
#include "bench/loop_bench.h"
#include "bench/queue_bench.h"
#include "bench/sim_bench.h"
#include "bench/tls_bench.h"
#include "bench/transport_bench.h"
#include "bench/loadgen.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/http_server.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/protocol.h"
#include "extender/service.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "policy/registry.h"
#include "simdjson.h"
#include "spdlog/spdlog.h"

#define BERTH_BENCH_STR2(x) #x
#define BERTH_BENCH_STR(x) BERTH_BENCH_STR2(x)

#ifndef BERTH_BENCH_BUILD_TYPE
#define BERTH_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef BERTH_BENCH_CXX_FLAGS
#define BERTH_BENCH_CXX_FLAGS ""
#endif

namespace berth::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

int g_failures = 0;

void Fail(const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

void Expect(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

double Us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

struct Options {
  bool quick = false;
  std::vector<int> sizes = {1000, 5000};
  int rounds = 3;
  double seconds = 1.0;       // per round, per variant, names mode
  double full_seconds = 1.5;  // per round, per variant, full-node mode
  double warmup = 0.2;
  bool full = true;
  bool model = true;
  bool raw = true;
  int model_nodes = 15000;
  int events = 50000;  // pod events per kind (add, update, delete)
  std::string probe;
  int64_t probe_calls = 20000;
  int probe_candidates = 0;   // --probe-candidates: names per call (0: the profile's sample)
  bool probe_best = false;    // --probe-best: filterAnswer "best" (the filter scores its passes)
  std::string dump_replies;  // directory: write each captured request and reply there
  bool gangs = true;          // the gang section (issue 5) in a full run
  bool gangs_only = false;    // --gangs: only the gang section
  bool queues_only = false;   // --queues: only the queue section (issue 6)
  bool simulate_only = false; // --simulate: only the simulator section (issue 14)
  bool lock_only = false;     // --lock-hold: only the model-lock section (issue 15)
  bool transport_only = false;  // --transport: only the transport section (issue 16)
  bool tls_only = false;        // --tls: only the HTTPS section (issue 16 point 7)
  double tls_seconds = 0;       // --tls=SECONDS per row; 0: 5 (0.3 with --quick)
  bool answers_only = false;    // --answers: only the answer-size section
  bool journal_only = false;    // --journal: only the decision journal's cost
  bool eta_only = false;        // --eta: only the ETA forecast's cost
  double transport_seconds = 0; // --transport=SECONDS per phase; 0: 10 (0.5 with --quick)
  double lock_seconds = 0;    // --lock-hold=SECONDS per phase; 0: 5 (0.3 with --quick)
  std::string simulate_size;  // --simulate=NODExJOBS, e.g. 5000x50000
  std::vector<int> gang_sizes = {8, 64, 512};
  bool gang_sizes_set = false;
  int gang_rounds = 0;  // admissions per gang size; 0: 40, 20, 10 for 8, 64, 512 members
  int gang_size = 512;  // --probe=inproc-gang-*
};

bool ParseFlag(std::string_view arg, std::string_view name, std::string* value) {
  if (arg.substr(0, name.size()) != name) return false;
  if (arg.size() == name.size()) {
    value->clear();
    return true;
  }
  if (arg[name.size()] != '=') return false;
  *value = std::string(arg.substr(name.size() + 1));
  return true;
}

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options o;
  bool sizes_set = false, rounds_set = false, seconds_set = false, full_seconds_set = false,
       model_nodes_set = false, events_set = false;
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    std::string v;
    if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--no-full") {
      o.full = false;
    } else if (arg == "--no-model") {
      o.model = false;
    } else if (arg == "--no-raw") {
      o.raw = false;
    } else if (arg == "--gangs") {
      o.gangs_only = true;
    } else if (arg == "--queues") {
      o.queues_only = true;
    } else if (arg == "--simulate") {
      o.simulate_only = true;
    } else if (ParseFlag(arg, "--simulate", &o.simulate_size)) {
      o.simulate_only = true;
    } else if (ParseFlag(arg, "--lock-hold", &v)) {
      o.lock_only = true;
      if (!v.empty()) o.lock_seconds = std::stod(v);
    } else if (ParseFlag(arg, "--tls", &v)) {
      o.tls_only = true;
      if (!v.empty()) o.tls_seconds = std::atof(v.c_str());
    } else if (arg == "--answers") {
      o.answers_only = true;
    } else if (arg == "--journal") {
      o.journal_only = true;
    } else if (arg == "--eta") {
      o.eta_only = true;
    } else if (arg == "--transport") {
      o.transport_only = true;
    } else if (ParseFlag(arg, "--transport", &v)) {
      o.transport_only = true;
      o.transport_seconds = std::atof(v.c_str());
    } else if (arg == "--no-gangs") {
      o.gangs = false;
    } else if (ParseFlag(arg, "--gang-sizes", &v)) {
      o.gang_sizes.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!item.empty()) o.gang_sizes.push_back(std::max(1, std::stoi(item)));
      }
      o.gang_sizes_set = true;
    } else if (ParseFlag(arg, "--gang-rounds", &v)) {
      o.gang_rounds = std::max(1, std::stoi(v));
    } else if (ParseFlag(arg, "--gang-size", &v)) {
      o.gang_size = std::max(1, std::stoi(v));
    } else if (arg == "--no-http") {
      o.sizes.clear();
      sizes_set = true;
    } else if (ParseFlag(arg, "--sizes", &v)) {
      o.sizes.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!item.empty()) o.sizes.push_back(std::stoi(item));
      }
      sizes_set = true;
    } else if (ParseFlag(arg, "--rounds", &v)) {
      o.rounds = std::max(1, std::stoi(v));
      rounds_set = true;
    } else if (ParseFlag(arg, "--seconds", &v)) {
      o.seconds = std::stod(v);
      seconds_set = true;
    } else if (ParseFlag(arg, "--full-seconds", &v)) {
      o.full_seconds = std::stod(v);
      full_seconds_set = true;
    } else if (ParseFlag(arg, "--warmup", &v)) {
      o.warmup = std::stod(v);
    } else if (ParseFlag(arg, "--model-nodes", &v)) {
      o.model_nodes = std::stoi(v);
      model_nodes_set = true;
    } else if (ParseFlag(arg, "--events", &v)) {
      o.events = std::stoi(v);
      events_set = true;
    } else if (ParseFlag(arg, "--probe", &v)) {
      o.probe = v;
    } else if (ParseFlag(arg, "--dump-replies", &v)) {
      o.dump_replies = v;
    } else if (ParseFlag(arg, "--probe-calls", &v)) {
      o.probe_calls = std::stoll(v);
    } else if (ParseFlag(arg, "--probe-candidates", &v)) {
      o.probe_candidates = std::stoi(v);
    } else if (arg == "--probe-best") {
      o.probe_best = true;
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: berth_bench [--quick] [--sizes=1000,5000] [--rounds=3] [--seconds=1]\n"
          "                   [--full-seconds=1.5] [--warmup=0.2] [--no-full] [--no-model]\n"
          "                   [--no-raw] [--no-http] [--model-nodes=15000] [--events=50000]\n"
          "                   [--dump-replies=DIR] [--probe=KIND] [--probe-calls=20000]\n"
          "                   [--probe-candidates=N] [--probe-best]\n"
          "                   [--gangs] [--no-gangs] [--gang-sizes=8,64,512] [--gang-rounds=N]\n"
          "                   [--queues] [--simulate[=NODESxJOBS]] [--lock-hold[=SECONDS]]\n"
          "                   [--transport[=SECONDS]] [--tls[=SECONDS]] [--answers] [--journal] [--eta]\n"
          "                   [--loop [--sizes=500,2000,5000] [--pods=2000] [--percentages=100,0]\n"
          "                    [--rounds=1] [--berth=BINARY] [--before=BINARY] [--perf-out=PREFIX]\n"
          "                    [--syscalls] [--pin] [--pace=N] [--config=FILE]]\n"
          "                   [--gang-size=512]\n"
          "  probe kinds: noop filter prioritize noop-prioritize raw inproc-filter\n"
          "               inproc-prioritize inproc-reject inproc-filter-full inproc-prioritize-full\n"
          "               inproc-gang-admit inproc-gang-member inproc-gang-plain (with --gang-size)\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "unknown argument: %s (try --help)\n", argv[a]);
      return std::nullopt;
    }
  }
  if (o.quick) {
    if (!sizes_set) o.sizes = {300};
    if (!rounds_set) o.rounds = 1;
    if (!seconds_set) o.seconds = 0.03;
    if (!full_seconds_set) o.full_seconds = 0.05;
    o.warmup = std::min(o.warmup, 0.01);
    if (!model_nodes_set) o.model_nodes = 1500;
    if (!events_set) o.events = 5000;
  }
  return o;
}

// ---------------------------------------------------------------------------
// Process figures
// ---------------------------------------------------------------------------

/// Bytes the allocator has handed out and not taken back (all arenas, mmapped chunks too).
int64_t HeapInUse() {
  struct mallinfo2 mi = ::mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

int64_t PeakRssSinceResetKiB() { return std::max(ProcStatusKiB("VmHWM"), CurrentRssKiB()); }

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

int AllowedCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

/// The CPUs this process may run on, as a list ("0", "0-1"); taskset changes it.
std::string AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return "unknown";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) StrAppend(&out, out.empty() ? "" : ",", c);
  }
  return StrCat(out, " (", CPU_COUNT(&set), " of ", std::thread::hardware_concurrency(), ")");
}

std::string Mib(int64_t kib) { return absl::StrFormat("%.1f MiB", static_cast<double>(kib) / 1024); }

// ---------------------------------------------------------------------------
// Raw floor server: the least an HTTP/1.1 keep-alive server can do on this machine.
// ---------------------------------------------------------------------------

/// Parts of cpp-httplib 0.11.4's per-request socket pattern (seen with strace) that the raw
/// server can imitate, to price each one without httplib's user-space work.
struct Emulation {
  bool keepalive_poll = false;  ///< keep-alive wait: poll(POLLIN, 10 ms), sleep 1 ms on timeout
  bool small_reads = false;     ///< 4 KiB recv calls, each after a poll(POLLIN)
  bool addr_calls = false;      ///< getpeername + getsockname per request
  bool split_write = false;     ///< headers and body in two sends, each after poll(POLLOUT) +
                                ///< poll(POLLIN, 0)
};

class RawServer {
 public:
  /// `bodies`: path -> reply body.
  explicit RawServer(const std::map<std::string, std::string>& bodies, Emulation emulation = {})
      : emu_(emulation) {
    for (const auto& [path, body] : bodies) {
      responses_[path] = StrCat(
          "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ",
          body.size(), "\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=120\r\n\r\n", body);
    }
  }
  ~RawServer() { Stop(); }

  int Start() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      return -1;
    }
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return ntohs(addr.sin_port);
  }

  void Stop() {
    if (listen_fd_ < 0) return;
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    ::close(listen_fd_);
    listen_fd_ = -1;
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        if (stopping_) return;
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string buf;
    buf.reserve(1 << 16);
    size_t used = 0;  // bytes of buf holding data
    const size_t chunk = emu_.small_reads ? 4096 : 65536;
    auto poll_one = [fd](short events, int timeout_ms) {
      pollfd pfd{fd, events, 0};
      return ::poll(&pfd, 1, timeout_ms);
    };
    auto read_more = [&]() -> bool {
      if (buf.size() - used < chunk) buf.resize(used + chunk);
      if (emu_.small_reads) poll_one(POLLIN, 10000);
      const ssize_t n = ::recv(fd, buf.data() + used, std::min(chunk, buf.size() - used), 0);
      if (n <= 0) return false;
      used += static_cast<size_t>(n);
      return true;
    };
    for (;;) {
      if (emu_.keepalive_poll && used == 0) {
        // httplib's keep_alive(): poll 10 ms; on a timeout sleep 1 ms and poll again.
        for (;;) {
          const int r = poll_one(POLLIN, 10);
          if (r > 0) break;
          if (r < 0) return Close(fd);
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      size_t head_end;
      while ((head_end = std::string_view(buf.data(), used).find("\r\n\r\n")) ==
             std::string_view::npos) {
        if (!read_more()) return Close(fd);
      }
      const std::string_view head(buf.data(), head_end);
      size_t length = 0;
      for (size_t pos = 0; pos < head.size();) {
        size_t eol = head.find("\r\n", pos);
        if (eol == std::string_view::npos) eol = head.size();
        const std::string_view line = head.substr(pos, eol - pos);
        if (line.size() > 15 && ::strncasecmp(line.data(), "content-length:", 15) == 0) {
          length = std::strtoull(std::string(line.substr(15)).c_str(), nullptr, 10);
        }
        pos = eol + 2;
      }
      const size_t sp1 = head.find(' ');
      const size_t sp2 = head.find(' ', sp1 + 1);
      const std::string path(head.substr(sp1 + 1, sp2 - sp1 - 1));
      const size_t total = head_end + 4 + length;
      while (used < total) {
        if (buf.size() < total) buf.resize(total);
        if (!read_more()) return Close(fd);
      }
      auto it = responses_.find(path);
      static const std::string kNotFound =
          "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n";
      const std::string& out = it == responses_.end() ? kNotFound : it->second;
      if (emu_.addr_calls) {
        sockaddr_storage a{};
        socklen_t alen = sizeof(a);
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &alen);
        alen = sizeof(a);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen);
      }
      auto send_all = [&](const char* data, size_t size) {
        if (emu_.split_write) {
          poll_one(POLLOUT, 10000);
          poll_one(POLLIN, 0);
        }
        size_t sent = 0;
        while (sent < size) {
          const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
          if (n <= 0) return false;
          sent += static_cast<size_t>(n);
        }
        return true;
      };
      const size_t split = emu_.split_write ? out.find("\r\n\r\n") + 4 : out.size();
      if (!send_all(out.data(), split)) return Close(fd);
      if (split < out.size() && !send_all(out.data() + split, out.size() - split)) return Close(fd);
      std::memmove(buf.data(), buf.data() + total, used - total);
      used -= total;
    }
  }

  void Close(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
    ::close(fd);
  }

  Emulation emu_;
  std::map<std::string, std::string> responses_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------

class OkBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

/// One request of a cell: the verb path, its noop twin and the canned expected reply.
struct Call {
  std::string verb_path;  // "/scheduler/filter"
  std::string noop_path;  // "/bench/noop/<key>"
  std::shared_ptr<const std::string> body;
  std::shared_ptr<const std::string> expected;  // the verb's reply, captured in-process
};

/// One benchmark cluster: model, service, berth's server and the raw floor server.
struct Bench {
  ClusterProfile profile;
  core::RealClock clock;
  std::unique_ptr<core::ClusterModel> model;
  OkBinder binder;
  std::unique_ptr<extender::Service> service;
  std::unique_ptr<extender::HttpServer> server;
  std::unique_ptr<RawServer> raw;
  int port = 0;
  int raw_port = 0;
  std::map<std::string, std::string> canned;  // noop path -> reply body
  std::map<std::string, Call> calls;          // key -> call
};

std::unique_ptr<policy::Pipeline> MakePipeline(core::ClusterModel& model) {
  absl::StatusOr<std::unique_ptr<policy::Pipeline>> p =
      policy::BuildDefaultRegistry().Build(policy::PolicyConfig{}, model.resources());
  if (!p.ok()) {
    std::fprintf(stderr, "cannot build the default pipeline: %s\n", p.status().ToString().c_str());
    std::exit(2);
  }
  return *std::move(p);
}

/// Validates a reply byte-for-byte against the captured one (size, head and tail always; the
/// whole body when `full`).
CheckFn MakeCheck(std::shared_ptr<const std::string> expected, bool full) {
  return [expected, full](int status, const std::string& body) {
    if (status != 200 || body.size() != expected->size()) return false;
    const size_t n = std::min<size_t>(48, body.size());
    if (body.compare(0, n, *expected, 0, n) != 0) return false;
    if (body.compare(body.size() - n, n, *expected, expected->size() - n, n) != 0) return false;
    return !full || body == *expected;
  };
}

// ---------------------------------------------------------------------------
// Matrix
// ---------------------------------------------------------------------------

struct Triple {
  RunResult verb, noop, raw;
  double verb_cpu = 0, noop_cpu = 0, raw_cpu = 0;  // process CPU seconds during each
};

void Accumulate(RunResult* into, const RunResult& r) {
  into->latency.Merge(r.latency);
  into->requests += r.requests;
  into->errors += r.errors + r.warmup_errors;
  into->seconds += r.seconds;
  into->reconnects += r.reconnects;
  if (into->first_error.empty()) into->first_error = r.first_error;
}

struct CellSpec {
  std::string label;
  std::string group;  // "names", "full"
  int connections = 1;
  std::vector<std::string> keys;  // calls, in order (1 = single verb, 2 = pair)
  bool full_mode = false;
};

struct CellResult {
  CellSpec spec;
  Triple t;
  size_t bytes_in = 0, bytes_out = 0;
};

std::vector<RequestStep> Steps(const Bench& b, const std::vector<std::string>& keys, int variant,
                               bool full_check) {
  std::vector<RequestStep> steps;
  for (const std::string& key : keys) {
    const Call& c = b.calls.at(key);
    RequestStep s;
    s.path = variant == 0 ? c.verb_path : c.noop_path;
    auto body = c.body;
    s.body_for = [body](int, int64_t) -> const std::string& { return *body; };
    s.check = MakeCheck(c.expected, full_check);
    steps.push_back(std::move(s));
  }
  return steps;
}

CellResult RunCell(const Bench& b, const CellSpec& spec, const Options& o) {
  CellResult out;
  out.spec = spec;
  for (const std::string& key : spec.keys) {
    out.bytes_in += b.calls.at(key).body->size();
    out.bytes_out += b.calls.at(key).expected->size();
  }
  const double secs = spec.full_mode ? o.full_seconds : o.seconds;
  const absl::Duration warmup =
      absl::Seconds(spec.full_mode && !o.quick ? std::max(o.warmup, 0.1) : o.warmup);
  const absl::Duration duration = absl::Seconds(secs);
  const int variants = (o.raw && b.raw) ? 3 : 2;
  for (int r = 0; r < o.rounds; ++r) {
    for (int v = 0; v < variants; ++v) {
      // Alternate the order each round so neither side always runs first.
      const int variant = (r % 2 == 0) ? v : (variants - 1 - v);
      const int port = variant == 2 ? b.raw_port : b.port;
      // The raw server answers on the noop paths.
      std::vector<RequestStep> steps = Steps(b, spec.keys, variant == 2 ? 1 : variant, o.quick);
      const double cpu0 = CpuSeconds();
      RunResult res = RunSequenceClosedLoop(port, spec.connections, steps, warmup, duration);
      const double cpu = CpuSeconds() - cpu0;
      RunResult* into = variant == 0 ? &out.t.verb : variant == 1 ? &out.t.noop : &out.t.raw;
      double* cpu_into = variant == 0 ? &out.t.verb_cpu : variant == 1 ? &out.t.noop_cpu : &out.t.raw_cpu;
      Accumulate(into, res);
      *cpu_into += cpu;
      if (res.errors + res.warmup_errors > 0) {
        Fail(StrCat(spec.label, " (", variant == 0 ? "berth" : variant == 1 ? "noop" : "raw",
                    "): ", res.errors + res.warmup_errors, " errors; first: ", res.first_error));
      }
    }
  }
  std::printf("  %s\n", FormatRow(StrCat(spec.label, " berth"), spec.connections, out.t.verb).c_str());
  std::printf("  %s\n", FormatRow(StrCat(spec.label, " noop"), spec.connections, out.t.noop).c_str());
  if (out.t.raw.requests > 0) {
    std::printf("  %s\n", FormatRow(StrCat(spec.label, " raw"), spec.connections, out.t.raw).c_str());
  }
  std::fflush(stdout);
  return out;
}

std::string Bytes(size_t n) {
  if (n >= (1u << 20)) return absl::StrFormat("%.1f MB", static_cast<double>(n) / (1 << 20));
  if (n >= 1024) return absl::StrFormat("%.1f KB", static_cast<double>(n) / 1024);
  return StrCat(n, " B");
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

void PrintCellTable(const std::string& title, const std::vector<CellResult>& cells) {
  std::printf("\n%s\n\n", title.c_str());
  std::printf(
      "| cell | conns | req / reply | berth p50 us | berth p99 us | berth req/s | noop p50 us | noop p99 us | "
      "noop req/s | p50 x | p99 x | req/s x | raw p50 us | raw p99 us | raw req/s | cpu us/req berth / noop | errors |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const CellResult& c : cells) {
    const auto vp = c.t.verb.latency.Percentiles({50, 99});
    const auto np = c.t.noop.latency.Percentiles({50, 99});
    const auto rp = c.t.raw.latency.Percentiles({50, 99});
    const double vr = c.t.verb.RequestsPerSecond(), nr = c.t.noop.RequestsPerSecond();
    const double vcpu = c.t.verb.requests > 0 ? c.t.verb_cpu / static_cast<double>(c.t.verb.requests) * 1e6 : 0;
    const double ncpu = c.t.noop.requests > 0 ? c.t.noop_cpu / static_cast<double>(c.t.noop.requests) * 1e6 : 0;
    std::string raw = "- | - | -";
    if (c.t.raw.requests > 0) {
      raw = absl::StrFormat("%.1f | %.1f | %.0f", Us(rp[0]), Us(rp[1]), c.t.raw.RequestsPerSecond());
    }
    std::printf("| %s | %d | %s / %s | %.1f | %.1f | %.0f | %.1f | %.1f | %.0f | %.2f | %.2f | %.2f | %s | %.1f / %.1f | %lld |\n",
                c.spec.label.c_str(), c.spec.connections, Bytes(c.bytes_in).c_str(),
                Bytes(c.bytes_out).c_str(), Us(vp[0]), Us(vp[1]), vr, Us(np[0]), Us(np[1]), nr,
                Ratio(static_cast<double>(vp[0]), static_cast<double>(np[0])),
                Ratio(static_cast<double>(vp[1]), static_cast<double>(np[1])), Ratio(vr, nr),
                raw.c_str(), vcpu, ncpu,
                static_cast<long long>(c.t.verb.errors + c.t.noop.errors + c.t.raw.errors));
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Reply verification (before the run, with a DOM parser; not timed)
// ---------------------------------------------------------------------------

void VerifyReplies(const ClusterProfile& p, const std::vector<int>& cand,
                   const std::map<std::string, Call>& calls) {
  const size_t n = cand.size();
  auto parse = [](const std::string& s) { return nlohmann::json::parse(s, nullptr, false); };
  {
    nlohmann::json j = parse(*calls.at("filter-names").expected);
    Expect(!j.is_discarded() && j["Nodes"].is_null() && j["NodeNames"].size() == n &&
               j["FailedNodes"].empty() && j["FailedAndUnresolvableNodes"].empty() && j["Error"] == "",
           "filter (names, fitting pod) must pass every candidate");
    if (!j.is_discarded() && j["NodeNames"].size() == n) {
      for (size_t i = 0; i < n; ++i) {
        Expect(j["NodeNames"][i] == NodeName(p, cand[i]), "filter keeps the candidate order");
      }
    }
  }
  {
    nlohmann::json j = parse(*calls.at("filter-names-reject").expected);
    const size_t pass = j.is_discarded() ? 0 : j["NodeNames"].size();
    const size_t failed = j.is_discarded() ? 0 : j["FailedNodes"].size();
    const size_t unres = j.is_discarded() ? 0 : j["FailedAndUnresolvableNodes"].size();
    Expect(pass > 0 && failed > 0 && unres > 0 && pass + failed + unres == n,
           StrCat("filter (names, big pod) must pass some nodes and fail others both ways: pass ",
                  pass, " failed ", failed, " unresolvable ", unres, " of ", n));
    if (failed > 0) {
      Expect(j["FailedNodes"].begin().value().get<std::string>().rfind("berth:", 0) == 0,
             "failure messages start with berth:");
    }
    std::printf("  big pod: %zu of %zu candidates pass, %zu short of room, %zu too small\n", pass, n,
                failed, unres);
  }
  for (const char* key : {"prioritize-names", "prioritize-full"}) {
    if (!calls.count(key)) continue;
    nlohmann::json j = parse(*calls.at(key).expected);
    bool ok = !j.is_discarded() && j.is_array() && j.size() == n;
    for (size_t i = 0; ok && i < n; ++i) {
      // A score of 0 is written as no "Score" at all (kube-scheduler decodes it as 0).
      const bool scored = j[i].contains("Score");
      ok = j[i]["Host"] == NodeName(p, cand[i]) && (!scored || j[i]["Score"].is_number_integer());
      const int64_t score = scored && ok ? j[i]["Score"].get<int64_t>() : 0;
      ok = ok && (!scored || score != 0) && score >= 0 && score <= policy::kMaxScore;
    }
    Expect(ok, StrCat(key, ": one score in 0..", policy::kMaxScore, " per candidate, in order"));
  }
  if (calls.count("prioritize-full")) {
    Expect(*calls.at("prioritize-full").expected == *calls.at("prioritize-names").expected,
           "prioritize gives the same scores for full nodes and for names");
  }
  if (calls.count("filter-full")) {
    nlohmann::json j = parse(*calls.at("filter-full").expected);
    Expect(!j.is_discarded() && j["Nodes"]["items"].size() == n && j["NodeNames"].is_null(),
           "filter (full nodes) returns every candidate node object");
  }
}

/// The generated JSON decodes to the same objects the fast generator builds.
void VerifyGenerators(const ClusterProfile& p) {
  core::ResourceNames table;
  core::ResourceNameScope names(table);
  auto same_resources = [](const core::ResourceVector& a, const core::ResourceVector& b) {
    for (core::ResourceId id = 0; id < core::kNumWellKnownResources; ++id) {
      if (a.Get(id) != b.Get(id)) return false;
    }
    return true;
  };
  for (int i : {0, 1, 2, 3, 8, 17, p.nodes - 1}) {
    if (i < 0 || i >= p.nodes) continue;
    for (bool fat : {false, true}) {
      const std::string json = NodeJson(p, i, fat);
      absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(json);
      if (!doc.ok()) {
        Fail(StrCat("node JSON does not parse: ", doc.status().ToString()));
        continue;
      }
      absl::StatusOr<core::Node> n =
          extender::DecodeNode(doc->root().get_object().value(), names, extender::JsonPath{});
      const core::Node want = MakeNode(p, i);
      Expect(n.ok() && n->name == want.name && n->labels == want.labels &&
                 same_resources(n->allocatable, want.allocatable) &&
                 same_resources(n->capacity, want.capacity) && n->creation == want.creation,
             StrCat("NodeJson(", i, ") decodes to MakeNode(", i, ")"));
    }
    for (int k : {0, 1, p.pods_per_node - 1}) {
      const std::string json = RunningPodJson(p, i, k);
      absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(json);
      if (!doc.ok()) {
        Fail("pod JSON does not parse");
        continue;
      }
      absl::StatusOr<core::Pod> d =
          extender::DecodePod(doc->root().get_object().value(), names, extender::JsonPath{});
      const core::Pod want = MakeRunningPod(p, i, k);
      Expect(d.ok() && d->uid == want.uid && d->ns == want.ns && d->name == want.name &&
                 d->scheduler_name == want.scheduler_name && d->node_name == want.node_name &&
                 d->phase == want.phase && d->priority == want.priority &&
                 d->labels == want.labels && d->annotations == want.annotations &&
                 same_resources(d->request, want.request) && d->creation == want.creation,
             StrCat("RunningPodJson(", i, ",", k, ") decodes to MakeRunningPod"));
    }
  }
}

// ---------------------------------------------------------------------------
// In-process cost of the verbs (no HTTP), and where it goes
// ---------------------------------------------------------------------------

struct Dist {
  int64_t p50 = 0, p99 = 0;
  double mean = 0;
  int64_t count = 0;
};

template <class Fn>
Dist Time(Fn&& fn, double seconds, int64_t max_iters) {
  LatencyStats s;
  const int64_t end = NowNs() + static_cast<int64_t>(seconds * 1e9);
  for (int i = 0; i < 3; ++i) fn();  // warm
  for (int64_t i = 0; i < max_iters && NowNs() < end; ++i) {
    const int64_t t0 = NowNs();
    fn();
    s.Add(NowNs() - t0);
  }
  auto p = s.Percentiles({50, 99});
  return Dist{p[0], p[1], s.Mean(), s.Count()};
}

std::string FormatDist(const Dist& d) {
  return absl::StrFormat("p50 %8.1f us  p99 %8.1f us  mean %8.1f us  (%lld calls)", Us(d.p50),
                         Us(d.p99), d.mean / 1e3, static_cast<long long>(d.count));
}

void InProcess(Bench& b, const Options& o) {
  std::printf("\n  In-process (Service called directly, no HTTP), %s cluster:\n", b.profile.name.c_str());
  const double secs = o.quick ? 0.05 : 0.5;
  for (const char* key : {"filter-names", "prioritize-names", "filter-names-reject", "filter-full", "prioritize-full"}) {
    if (!b.calls.count(key)) continue;
    const Call& c = b.calls.at(key);
    const bool filter = c.verb_path.ends_with("/filter");
    const bool full = std::string_view(key).ends_with("-full");
    size_t bad = 0;
    Dist d = Time(
        [&] {
          extender::Reply r = filter ? b.service->Filter(*c.body) : b.service->Prioritize(*c.body);
          if (r.status != 200 || r.body.size() != c.expected->size()) ++bad;
        },
        full ? secs * 4 : secs, full ? 200 : 1'000'000);
    Expect(bad == 0, StrCat("in-process ", key, ": wrong replies"));
    std::printf("    %-22s %s\n", key, FormatDist(d).c_str());
  }

  // Where the names-mode time goes, step by step, through the same public functions.
  std::unique_ptr<policy::Pipeline> pipeline = MakePipeline(*b.model);
  for (const char* key : {"filter-names", "prioritize-names"}) {
    const Call& c = b.calls.at(key);
    const bool filter = std::string_view(key).starts_with("filter");
    int64_t t_copy = 0, t_parse = 0, t_decode = 0, t_policy = 0, t_encode = 0;
    int64_t iters = o.quick ? 200 : 5000;
    for (int64_t i = 0; i < iters; ++i) {
      int64_t t0 = NowNs();
      std::string body(*c.body);  // what the HTTP handler does with the request bytes
      int64_t t1 = NowNs();
      absl::StatusOr<simdjson::dom::element> root = extender::ParseReused(body);
      int64_t t2 = NowNs();
      absl::StatusOr<extender::ExtenderArgs> args =
          extender::DecodeExtenderArgs(*root, b.model->resources());
      int64_t t3 = NowNs();
      std::string out;
      int64_t t4, t5;
      {
        auto view = b.model->Read();
        const policy::CycleContext ctx{.state = *view, .pod = args->pod, .now = b.clock.Now()};
        if (filter) {
          std::vector<policy::NodeVerdict> v = pipeline->Filter(ctx, args->node_names);
          t4 = NowNs();
          out = extender::EncodeFilterResult(*args, v);
        } else {
          std::vector<int64_t> s = pipeline->Score(ctx, args->node_names);
          t4 = NowNs();
          out = extender::EncodePriorityList(args->node_names, s);
        }
        t5 = NowNs();
      }
      if (i >= iters / 10) {  // skip warm-up
        t_copy += t1 - t0;
        t_parse += t2 - t1;
        t_decode += t3 - t2;
        t_policy += t4 - t3;
        t_encode += t5 - t4;
      }
      if (out != *c.expected) Fail(StrCat("breakdown of ", key, " produced a different reply"));
    }
    const double n = static_cast<double>(iters - iters / 10);
    std::printf(
        "    %-22s breakdown (mean): body copy %.1f us, simdjson parse %.1f us, decode args %.1f us, "
        "policy %.1f us, encode reply %.1f us\n",
        key, t_copy / n / 1e3, t_parse / n / 1e3, t_decode / n / 1e3, t_policy / n / 1e3,
        t_encode / n / 1e3);
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Cluster setup
// ---------------------------------------------------------------------------

void AddCall(Bench& b, const std::string& key, const std::string& verb, std::string body) {
  Call c;
  c.verb_path = StrCat("/scheduler/", verb);
  c.noop_path = StrCat("/bench/noop/", key);
  c.body = std::make_shared<const std::string>(std::move(body));
  extender::Reply r = verb == "filter" ? b.service->Filter(*c.body) : b.service->Prioritize(*c.body);
  Expect(r.status == 200, StrCat(key, ": status ", r.status, " ", r.body.substr(0, 300)));
  c.expected = std::make_shared<const std::string>(std::move(r.body));
  b.canned[c.noop_path] = *c.expected;
  b.calls[key] = std::move(c);
}

std::unique_ptr<Bench> SetUp(const ClusterProfile& p, const Options& o) {
  auto b = std::make_unique<Bench>();
  b->profile = p;
  b->model = std::make_unique<core::ClusterModel>(&b->clock);
  ::malloc_trim(0);
  const int64_t heap0 = HeapInUse();
  const int64_t t0 = NowNs();
  const size_t events = LoadModel(p, b->model.get());
  const int64_t t1 = NowNs();
  std::printf("  model: %d nodes, %d pods (%zu events) generated and applied in %.0f ms; heap +%s\n",
              p.nodes, p.PodCount(), events, (t1 - t0) / 1e6, Mib((HeapInUse() - heap0) / 1024).c_str());

  extender::ServiceOptions so;
  so.mode = extender::Mode::kKubernetes;
  so.build_type = BERTH_BENCH_BUILD_TYPE;
  if (o.probe_best) so.filter_answer = extender::FilterAnswer::kBest;
  b->service = std::make_unique<extender::Service>(so, b->model.get(), MakePipeline(*b->model),
                                                   &b->binder, &b->clock);
  b->service->SetReady(true);

  const int n = p.CandidateCount();
  const std::vector<int> cand = CandidateIndices(p, n, 42);
  const std::string fits = PendingPodJson(PendingKind::kFits);
  const std::string big = PendingPodJson(PendingKind::kRejects);
  const std::string names_body = ArgsNamesJson(p, fits, cand);
  AddCall(*b, "filter-names", "filter", names_body);
  AddCall(*b, "prioritize-names", "prioritize", names_body);
  AddCall(*b, "filter-names-reject", "filter", ArgsNamesJson(p, big, cand));
  if (o.full) {
    const std::string full_body = ArgsNodesJson(p, fits, cand, /*fat=*/true);
    AddCall(*b, "filter-full", "filter", full_body);
    AddCall(*b, "prioritize-full", "prioritize", full_body);
  }
  std::printf("  %d candidates; pod JSON %s; names request %s; ", n, Bytes(fits.size()).c_str(),
              Bytes(names_body.size()).c_str());
  if (o.full) {
    std::printf("full-node request %s (%s per node)",
                Bytes(b->calls.at("filter-full").body->size()).c_str(),
                Bytes((b->calls.at("filter-full").body->size() - fits.size()) / static_cast<size_t>(n)).c_str());
  }
  std::printf("\n");
  VerifyReplies(p, cand, b->calls);
  if (!o.dump_replies.empty()) {
    for (const auto& [key, call] : b->calls) {
      std::ofstream(StrCat(o.dump_replies, "/", p.name, "-", key, ".request.json")) << *call.body;
      std::ofstream(StrCat(o.dump_replies, "/", p.name, "-", key, ".reply.json")) << *call.expected;
    }
  }

  extender::HttpServerOptions ho;
  for (const auto& [path, reply] : b->canned) {
    auto canned = std::make_shared<const std::string>(reply);
    ho.extra_post_routes[path] = [canned](std::string_view) {
      return extender::Reply{.status = 200, .body = *canned};
    };
  }
  b->server = std::make_unique<extender::HttpServer>(b->service.get(), ho);
  absl::StatusOr<int> port = b->server->Start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "cannot start berth's server: %s\n", port.status().ToString().c_str());
    std::exit(2);
  }
  b->port = *port;
  if (o.raw) {
    b->raw = std::make_unique<RawServer>(b->canned);
    b->raw_port = b->raw->Start();
    if (b->raw_port <= 0) {
      std::fprintf(stderr, "cannot start the raw server\n");
      std::exit(2);
    }
  }
  return b;
}

void TearDown(Bench& b) {
  if (b.server) b.server->Stop();
  if (b.raw) b.raw->Stop();
}

// ---------------------------------------------------------------------------
// Prototype: cpp-httplib's Server with its socket layer replaced through the public Stream
// interface (docs/performance.md, "What berth can change"). Same parsing, routing and handler
// as berth's server; measured in the transport study beside the stock server.
// ---------------------------------------------------------------------------

// One kept-alive connection with a 64 KiB read buffer and write coalescing: the request usually
// arrives in one recv, and the status line + headers go out in the same send as the body.
// cpp-httplib 0.11.4's own SocketStream polls before every recv and send, reads 4 KiB at a time
// and writes headers and body separately.
class BufferedStream final : public httplib::Stream {
 public:
  BufferedStream(int fd, time_t read_timeout_sec, time_t write_timeout_sec)
      : fd_(fd), read_timeout_(std::chrono::seconds(read_timeout_sec)),
        write_timeout_ms_(static_cast<int>(write_timeout_sec * 1000)) {
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // recv wakes at least every 200 ms, so a stopping server is noticed promptly.
    timeval tv{.tv_sec = 0, .tv_usec = 200000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    timeval wtv{.tv_sec = write_timeout_sec, .tv_usec = 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &wtv, sizeof(wtv));
    buf_.resize(64 * 1024);
  }

  bool is_readable() const override {
    if (begin_ < end_) return true;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(read_timeout_.count() * 1000)) > 0;
  }
  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    return ::poll(&p, 1, write_timeout_ms_) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!Flush()) return -1;
      if (size >= buf_.size()) return Recv(ptr, size, read_timeout_, nullptr);
      const ssize_t n = Recv(buf_.data(), buf_.size(), read_timeout_, nullptr);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (out_.size() + size <= kCoalesceBytes) {
      out_.append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    // Large piece: send what is pending and this piece together, without copying it.
    iovec iov[2] = {{out_.data(), out_.size()}, {const_cast<char*>(ptr), size}};
    if (!SendAll(iov, 2)) return -1;
    out_.clear();
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (!have_remote_) {
      Describe(false, &remote_ip_, &remote_port_);
      have_remote_ = true;
    }
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (!have_local_) {
      Describe(true, &local_ip_, &local_port_);
      have_local_ = true;
    }
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return fd_; }

  bool Flush() {
    if (out_.empty()) return true;
    iovec iov[1] = {{out_.data(), out_.size()}};
    const bool ok = SendAll(iov, 1);
    out_.clear();
    return ok;
  }

  /// Waits for the first bytes of the next request. False on EOF, error, keep-alive timeout, or
  /// when `running` turns false.
  bool WaitForRequest(const std::atomic<socket_t>& svr_sock, time_t keep_alive_sec) {
    if (begin_ < end_) return true;
    const ssize_t n = Recv(buf_.data(), buf_.size(), std::chrono::seconds(keep_alive_sec), &svr_sock);
    if (n <= 0) return false;
    begin_ = 0;
    end_ = static_cast<size_t>(n);
    return true;
  }

 private:
  static constexpr size_t kCoalesceBytes = 16 * 1024;

  ssize_t Recv(char* ptr, size_t size, std::chrono::milliseconds timeout,
               const std::atomic<socket_t>* svr_sock) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (svr_sock != nullptr && *svr_sock == INVALID_SOCKET) return -1;
      if (std::chrono::steady_clock::now() >= deadline) return -1;
    }
  }

  bool SendAll(iovec* iov, int count) {
    while (count > 0) {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(count);
      const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      size_t left = static_cast<size_t>(n);
      while (count > 0 && left >= iov->iov_len) {
        left -= iov->iov_len;
        ++iov;
        --count;
      }
      if (count > 0) {
        iov->iov_base = static_cast<char*>(iov->iov_base) + left;
        iov->iov_len -= left;
      }
    }
    return true;
  }

  void Describe(bool local, std::string* ip, int* port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int rc = local ? ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len)
                         : ::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    if (rc != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
      *port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
      *port = ntohs(a->sin6_port);
    }
    *ip = text;
  }

  int fd_;
  std::chrono::milliseconds read_timeout_;
  int write_timeout_ms_;
  std::string buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
  std::string out_;
  mutable bool have_remote_ = false, have_local_ = false;
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = 0, local_port_ = 0;
};

// cpp-httplib's Server with berth's connection loop: same parsing, routing and handlers
// (process_request), but BufferedStream for the socket and no 10 ms poll / 1 ms sleep loop
// between kept-alive requests.
class BufferedServer final : public httplib::Server {
 private:
  bool process_and_close_socket(socket_t sock) override {
    bool ret = false;
    {
      BufferedStream strm(sock, read_timeout_sec_, write_timeout_sec_);
      size_t count = keep_alive_max_count_;
      while (svr_sock_ != INVALID_SOCKET && count > 0 &&
             strm.WaitForRequest(svr_sock_, keep_alive_timeout_sec_)) {
        const bool close_connection = count == 1;
        bool connection_closed = false;
        ret = process_request(strm, close_connection, connection_closed, nullptr);
        if (!strm.Flush()) ret = false;
        if (!ret || connection_closed) break;
        --count;
      }
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
  }
};


/// A BufferedServer with berth's POST handler shape (catch-all regex, ContentReader appended to
/// a string) answering the canned replies.
std::unique_ptr<httplib::Server> MakeBufferedNoopServer(const std::map<std::string, std::string>& canned) {
  auto s = std::make_unique<BufferedServer>();
  s->new_task_queue = [] { return new httplib::ThreadPool(64); };
  s->set_tcp_nodelay(true);
  s->set_keep_alive_max_count(std::numeric_limits<size_t>::max());
  s->set_keep_alive_timeout(120);
  s->set_read_timeout(10, 0);
  s->set_write_timeout(10, 0);
  auto replies = std::make_shared<const std::map<std::string, std::string>>(canned);
  s->Post(R"(/.*)", [replies](const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader& reader) {
    std::string body;
    reader([&](const char* data, size_t n) {
      body.append(data, n);
      return true;
    });
    auto it = replies->find(req.path);
    if (it == replies->end()) {
      res.status = 404;
      return;
    }
    res.set_content(it->second, "application/json; charset=utf-8");
  });
  return s;
}

// ---------------------------------------------------------------------------
// Transport study: which parts of cpp-httplib's socket pattern cost what
// ---------------------------------------------------------------------------

struct StudyRow {
  std::string label;
  RunResult closed;       // back-to-back calls on one connection
  LatencyStats paced;     // calls spaced 2-20 ms apart (kube-scheduler at a few hundred pods/s)
};

LatencyStats Paced(int port, const std::string& path, const Call& c, int calls, uint64_t seed) {
  LatencyStats s(static_cast<size_t>(calls));
  HttpConnection conn;
  if (!conn.Connect("127.0.0.1", port).ok()) {
    Fail("paced: cannot connect");
    return s;
  }
  std::string reply;
  uint64_t x = seed;
  for (int i = 0; i < calls; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + (x >> 33) % 18000));
    const int64_t t0 = NowNs();
    absl::StatusOr<int> st = conn.Post(path, *c.body, &reply);
    const int64_t t1 = NowNs();
    if (!st.ok() || *st != 200 || reply != *c.expected) {
      Fail(StrCat("paced call to ", path, " failed"));
      continue;
    }
    s.Add(t1 - t0);
  }
  conn.Close();
  return s;
}

void TransportStudy(Bench& b, const Options& o) {
  const Call& c = b.calls.at("filter-names");
  struct Variant {
    std::string label;
    std::optional<Emulation> emu;  // nullopt: berth's httplib server (noop route)
  };
  std::vector<Variant> variants = {
      {"berth's server, noop route", std::nullopt},
      {"httplib + buffered Stream (prototype)", std::nullopt},
      {"raw: 1 recv loop, 1 send", Emulation{}},
      {"raw + keep-alive wait (poll 10 ms, sleep 1 ms)", Emulation{.keepalive_poll = true}},
      {"raw + 4 KiB reads, poll before each", Emulation{.small_reads = true}},
      {"raw + getpeername/getsockname", Emulation{.addr_calls = true}},
      {"raw + split write, 2 polls per write", Emulation{.split_write = true}},
      {"raw + all four (httplib's syscalls)",
       Emulation{.keepalive_poll = true, .small_reads = true, .addr_calls = true, .split_write = true}},
  };
  std::vector<std::unique_ptr<RawServer>> servers;
  std::vector<int> ports;
  std::unique_ptr<httplib::Server> buffered = MakeBufferedNoopServer(b.canned);
  const int buffered_port = buffered->bind_to_any_port("127.0.0.1");
  std::thread buffered_thread([&] { buffered->listen_after_bind(); });
  for (int i = 0; i < 2000 && !buffered->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (const Variant& v : variants) {
    if (!v.emu) {
      servers.push_back(nullptr);
      ports.push_back(ports.empty() ? b.port : buffered_port);
      continue;
    }
    servers.push_back(std::make_unique<RawServer>(b.canned, *v.emu));
    ports.push_back(servers.back()->Start());
  }
  std::vector<StudyRow> rows(variants.size());
  const absl::Duration warmup = absl::Seconds(o.warmup);
  const absl::Duration duration = absl::Seconds(o.seconds);
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t i = 0; i < variants.size(); ++i) {
      const size_t v = (r % 2 == 0) ? i : variants.size() - 1 - i;
      std::vector<RequestStep> steps = Steps(b, {"filter-names"}, 1, o.quick);
      RunResult res = RunSequenceClosedLoop(ports[v], 1, steps, warmup, duration);
      if (res.errors + res.warmup_errors > 0) Fail(StrCat("transport study: ", variants[v].label, ": ", res.first_error));
      Accumulate(&rows[v].closed, res);
    }
  }
  const int paced_calls = o.quick ? 5 : 250;
  for (size_t v = 0; v < variants.size(); ++v) {
    if (v > 3) continue;  // the idle wait between requests matters only for these
    rows[v].paced = Paced(ports[v], c.noop_path, c, paced_calls, 7 + v);
  }
  for (auto& srv : servers) {
    if (srv) srv->Stop();
  }
  buffered->stop();
  buffered_thread.join();
  std::printf("\nTransport study, %s cluster: the filter request (%s in, %s out), 1 connection\n\n",
              b.profile.name.c_str(), Bytes(c.body->size()).c_str(), Bytes(c.expected->size()).c_str());
  std::printf("| server | p50 us | p99 us | req/s | p50 - raw p50 | paced p50 us | paced p99 us | paced max us |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const int64_t raw_p50 = rows[2].closed.latency.Percentile(50);
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto p = rows[v].closed.latency.Percentiles({50, 99});
    std::string paced = "- | - | -";
    if (rows[v].paced.Count() > 0) {
      const auto q = rows[v].paced.Percentiles({50, 99});
      paced = absl::StrFormat("%.1f | %.1f | %.1f", Us(q[0]), Us(q[1]), Us(rows[v].paced.Max()));
    }
    std::printf("| %s | %.1f | %.1f | %.0f | %+.1f | %s |\n", variants[v].label.c_str(), Us(p[0]), Us(p[1]),
                rows[v].closed.RequestsPerSecond(), Us(p[0] - raw_p50), paced.c_str());
  }
  std::fflush(stdout);
}

struct ClusterSummary {
  std::string name;
  std::vector<CellResult> cells;
  int64_t model_rss_kib = 0;
  int64_t peak_rss_kib = 0;
};

ClusterSummary RunCluster(const ClusterProfile& p, const Options& o) {
  ClusterSummary sum;
  sum.name = p.name;
  std::printf("\n== Cluster %s: %d nodes, %d running pods, %d candidates per call ==\n", p.name.c_str(),
              p.nodes, p.PodCount(), p.CandidateCount());
  ResetPeakRss();
  ::malloc_trim(0);
  const int64_t heap_before = HeapInUse();
  std::unique_ptr<Bench> b = SetUp(p, o);
  sum.model_rss_kib = (HeapInUse() - heap_before) / 1024;
  InProcess(*b, o);

  std::printf("\n  Over HTTP (%d round(s); each round runs berth, noop and raw back to back):\n  %s\n",
              o.rounds, FormatHeader().c_str());
  std::vector<CellSpec> specs = {
      {"filter names", "names", 1, {"filter-names"}},
      {"prioritize names", "names", 1, {"prioritize-names"}},
      {"filter+prioritize names", "names", 1, {"filter-names", "prioritize-names"}},
      {"filter names, big pod", "names", 1, {"filter-names-reject"}},
      {"filter names", "names", 8, {"filter-names"}},
      {"prioritize names", "names", 8, {"prioritize-names"}},
      {"filter+prioritize names", "names", 8, {"filter-names", "prioritize-names"}},
  };
  if (o.full) {
    specs.push_back({"filter full", "full", 1, {"filter-full"}, true});
    specs.push_back({"prioritize full", "full", 1, {"prioritize-full"}, true});
    if (!o.quick) {  // the smoke run keeps to one connection with the multi-megabyte bodies
      specs.push_back({"filter full", "full", 8, {"filter-full"}, true});
      specs.push_back({"prioritize full", "full", 8, {"prioritize-full"}, true});
    }
  }
  for (const CellSpec& s : specs) sum.cells.push_back(RunCell(*b, s, o));
  sum.peak_rss_kib = PeakRssSinceResetKiB();
  if (o.raw && (p.nodes == 5000 || o.quick)) TransportStudy(*b, o);
  TearDown(*b);
  PrintCellTable(StrCat("Cluster ", p.name, " (", p.nodes, " nodes, ", p.PodCount(), " pods, ",
                        p.CandidateCount(), " candidates): latency per unit (a pair counts as one unit)"),
                 sum.cells);
  std::printf("\n  heap for the model, server and request bodies: +%s; peak RSS of this stage (model, server, client, "
              "request bodies): %s\n",
              Mib(sum.model_rss_kib).c_str(), Mib(sum.peak_rss_kib).c_str());
  return sum;
}

// ---------------------------------------------------------------------------
// Model figures
// ---------------------------------------------------------------------------

struct ModelFigures {
  int nodes = 0, pods = 0;
  double gen_ms = 0, apply_nodes_ms = 0, apply_pods_ms = 0;
  double bytes_per_node = 0, bytes_per_pod = 0;
  double rss_per_node = 0, rss_per_pod = 0;
  double lean_bytes_per_node = 0;
  Dist pod_add, pod_update, pod_delete, node_update;
  double list_mb = 0, list_gen_ms = 0, list_parse_ms = 0, list_decode_ms = 0, list_apply_ms = 0,
         list_load_ms = 0;
  int64_t peak_kib = 0;
  Dist filter15k, prioritize15k;
};

Dist Summarize(const LatencyStats& s) {
  auto p = s.Percentiles({50, 99});
  return Dist{p[0], p[1], s.Mean(), s.Count()};
}

ModelFigures RunModel(const Options& o) {
  ModelFigures f;
  ClusterProfile p = Profile15k();
  p.nodes = o.model_nodes;
  f.nodes = p.nodes;
  f.pods = p.PodCount();
  std::printf("\n== Model: %d nodes + %d pods ==\n", p.nodes, p.PodCount());
  ResetPeakRss();
  core::RealClock clock;

  // Lean labels first: what a node costs without its 16 provider labels.
  {
    ClusterProfile lean = p;
    lean.realistic_labels = false;
    ::malloc_trim(0);
    const int64_t h0 = HeapInUse();
    auto model = std::make_unique<core::ClusterModel>(&clock);
    std::vector<core::ModelEvent> batch;
    for (int b0 = 0; b0 < lean.nodes; b0 += 1000) {
      batch.clear();
      AppendNodeEvents(lean, b0, std::min(lean.nodes, b0 + 1000), &batch);
      model->Apply(batch);
    }
    batch = {};
    f.lean_bytes_per_node = static_cast<double>(HeapInUse() - h0) / lean.nodes;
  }

  ::malloc_trim(0);
  const int64_t heap0 = HeapInUse();
  const int64_t rss0 = CurrentRssKiB();
  auto model = std::make_unique<core::ClusterModel>(&clock);
  int64_t gen = 0, apply_nodes = 0, apply_pods = 0;
  {
    std::vector<core::ModelEvent> batch;
    for (int b0 = 0; b0 < p.nodes; b0 += 1000) {
      batch.clear();
      const int64_t t0 = NowNs();
      AppendNodeEvents(p, b0, std::min(p.nodes, b0 + 1000), &batch);
      const int64_t t1 = NowNs();
      model->Apply(batch);
      gen += t1 - t0;
      apply_nodes += NowNs() - t1;
    }
  }
  ::malloc_trim(0);
  const int64_t heap1 = HeapInUse();
  const int64_t rss1 = CurrentRssKiB();
  {
    std::vector<core::ModelEvent> batch;
    for (int b0 = 0; b0 < p.nodes; b0 += 500) {
      batch.clear();
      const int64_t t0 = NowNs();
      AppendPodEvents(p, b0, std::min(p.nodes, b0 + 500), &batch);
      const int64_t t1 = NowNs();
      model->Apply(batch);
      gen += t1 - t0;
      apply_pods += NowNs() - t1;
    }
  }
  ::malloc_trim(0);
  const int64_t heap2 = HeapInUse();
  const int64_t rss2 = CurrentRssKiB();
  f.gen_ms = gen / 1e6;
  f.apply_nodes_ms = apply_nodes / 1e6;
  f.apply_pods_ms = apply_pods / 1e6;
  f.bytes_per_node = static_cast<double>(heap1 - heap0) / p.nodes;
  f.bytes_per_pod = static_cast<double>(heap2 - heap1) / p.PodCount();
  f.rss_per_node = static_cast<double>(rss1 - rss0) * 1024 / p.nodes;
  f.rss_per_pod = static_cast<double>(rss2 - rss1) * 1024 / p.PodCount();
  {
    auto view = model->Read();
    Expect(view->node_count() == static_cast<size_t>(p.nodes) &&
               view->pod_count() == static_cast<size_t>(p.PodCount()),
           "model holds every generated node and pod");
  }
  std::printf("  apply as events: nodes %.0f ms, pods %.0f ms, total %.0f ms (generating the core "
              "objects took a further %.0f ms)\n",
              f.apply_nodes_ms, f.apply_pods_ms, f.apply_nodes_ms + f.apply_pods_ms, f.gen_ms);
  std::printf("  heap per node %.0f B (20 labels; %.0f B with 4 labels), per pod %.0f B; RSS per "
              "node %.0f B, per pod %.0f B\n",
              f.bytes_per_node, f.lean_bytes_per_node, f.bytes_per_pod, f.rss_per_node, f.rss_per_pod);

  // Pod events on existing nodes, one Apply per event as the watch delivers them.
  {
    const int m = o.events;
    std::vector<core::ModelEvent> adds, updates, deletes;
    adds.reserve(m);
    updates.reserve(m);
    deletes.reserve(m);
    for (int j = 0; j < m; ++j) {
      core::Pod pod = MakeChurnPod(p, (j * 37) % p.nodes, j);
      core::Pod upd = pod;
      upd.phase = core::PodPhase::kRunning;
      upd.request.Set(core::kCpu, 200);  // a resize: the node's usage changes
      deletes.emplace_back(core::PodDelete{std::string(std::string_view(pod.uid)),
                                           std::string(std::string_view(pod.ns)),
                                           std::string(std::string_view(pod.name))});
      adds.emplace_back(core::PodUpsert{std::move(pod)});
      updates.emplace_back(core::PodUpsert{std::move(upd)});
    }
    auto run = [&](const std::vector<core::ModelEvent>& events) {
      LatencyStats s(events.size());
      for (const core::ModelEvent& e : events) {
        const int64_t t0 = NowNs();
        model->Apply(e);
        s.Add(NowNs() - t0);
      }
      return Summarize(s);
    };
    f.pod_add = run(adds);
    f.pod_update = run(updates);
    f.pod_delete = run(deletes);
    {
      auto view = model->Read();
      Expect(view->pod_count() == static_cast<size_t>(p.PodCount()), "churn leaves the pod count unchanged");
    }
    std::vector<core::ModelEvent> nodes;
    AppendNodeEvents(p, 0, std::min(p.nodes, 10000), &nodes);
    f.node_update = run(nodes);
    std::printf("  pod add    %s\n  pod update %s\n  pod delete %s\n  node update %s\n",
                FormatDist(f.pod_add).c_str(), FormatDist(f.pod_update).c_str(),
                FormatDist(f.pod_delete).c_str(), FormatDist(f.node_update).c_str());
  }

  // Verbs against the full-size model, in-process: cost must not grow with the pod count.
  {
    extender::ServiceOptions so;
    so.mode = extender::Mode::kKubernetes;
    OkBinder binder;
    extender::Service service(so, model.get(), MakePipeline(*model), &binder, &clock);
    const std::vector<int> cand = CandidateIndices(p, p.CandidateCount(), 42);
    const std::string body = ArgsNamesJson(p, PendingPodJson(PendingKind::kFits), cand);
    const double secs = o.quick ? 0.05 : 0.5;
    f.filter15k = Time([&] { (void)service.Filter(body); }, secs, 1'000'000);
    f.prioritize15k = Time([&] { (void)service.Prioritize(body); }, secs, 1'000'000);
    std::printf("  in-process, %d candidates: filter %s\n                             prioritize %s\n",
                p.CandidateCount(), FormatDist(f.filter15k).c_str(), FormatDist(f.prioritize15k).c_str());
  }
  model.reset();

  // The same cluster from a Kubernetes List document (what `kubectl get nodes,pods -o json`
  // prints; lean nodes without images), through Service::LoadList.
  {
    int64_t t0 = NowNs();
    std::string list = ClusterListJson(p);
    f.list_gen_ms = (NowNs() - t0) / 1e6;
    f.list_mb = static_cast<double>(list.size()) / (1 << 20);
    {
      // Step by step with the same public functions LoadList uses.
      core::ClusterModel m(&clock);
      t0 = NowNs();
      absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(list);
      const int64_t t1 = NowNs();
      absl::StatusOr<std::vector<core::ModelEvent>> events =
          doc.ok() ? extender::DecodeList(doc->root(), m.resources())
                   : absl::StatusOr<std::vector<core::ModelEvent>>(doc.status());
      const int64_t t2 = NowNs();
      if (events.ok()) m.Apply(*events);
      const int64_t t3 = NowNs();
      Expect(events.ok(), StrCat("the List decodes: ", events.ok() ? "" : events.status().ToString()));
      f.list_parse_ms = (t1 - t0) / 1e6;
      f.list_decode_ms = (t2 - t1) / 1e6;
      f.list_apply_ms = (t3 - t2) / 1e6;
    }
    {
      core::ClusterModel m(&clock);
      extender::ServiceOptions so;
      so.mode = extender::Mode::kKubernetes;
      OkBinder binder;
      extender::Service service(so, &m, MakePipeline(m), &binder, &clock);
      t0 = NowNs();
      absl::StatusOr<size_t> loaded = service.LoadList(list, "bench-list.json");
      f.list_load_ms = (NowNs() - t0) / 1e6;
      Expect(loaded.ok() && *loaded == static_cast<size_t>(p.nodes + p.PodCount() + kBenchQueues),
             StrCat("LoadList loads every object: ", loaded.ok() ? StrCat(*loaded) : loaded.status().ToString()));
      auto view = m.Read();
      Expect(view->node_count() == static_cast<size_t>(p.nodes) &&
                 view->pod_count() == static_cast<size_t>(p.PodCount()),
             "LoadList: model holds every node and pod");
    }
    std::printf("  List JSON %.0f MB (generated in %.0f ms): Service::LoadList %.0f ms "
                "(simdjson parse %.0f ms, decode %.0f ms, apply %.0f ms when run step by step)\n",
                f.list_mb, f.list_gen_ms, f.list_load_ms, f.list_parse_ms, f.list_decode_ms,
                f.list_apply_ms);
  }
  f.peak_kib = PeakRssSinceResetKiB();
  std::printf("  peak RSS of this stage (incl. the List text and its DOM): %s\n", Mib(f.peak_kib).c_str());
  std::fflush(stdout);
  return f;
}

// ---------------------------------------------------------------------------
// Gangs (issue 5): admitting a whole gang, and the filter of its reserved members. In-process:
// Service::Filter called directly, as kube-scheduler's filter would reach it.
// ---------------------------------------------------------------------------

constexpr char kGangNamespace[] = "team-07";

Dist DistOf(const LatencyStats& s) {
  auto p = s.Percentiles({50, 99});
  return Dist{p[0], p[1], s.Mean(), s.Count()};
}

/// One gang: its members' pods (as the model holds them and as kube-scheduler sends them) and
/// its PodGroup.
struct GangPods {
  std::string name;
  int size = 0;
  std::vector<std::string> uids;
  std::vector<std::string> pod_json;  // member m's pod as it appears in ExtenderArgs
  std::vector<core::ModelEvent> add;  // PodUpsert per member, then the PodGroupUpsert
  std::vector<core::ModelEvent> remove;
};

/// The fabric cluster with a Kubernetes-mode Service over it.
class GangBench {
 public:
  explicit GangBench(const GangCluster& c) : cluster_(c), p_(c.Profile()) {
    model_ = std::make_unique<core::ClusterModel>(&clock_);
    const int64_t t0 = NowNs();
    events_ = LoadGangCluster(cluster_, model_.get());
    load_ms_ = (NowNs() - t0) / 1e6;
    extender::ServiceOptions so;
    so.mode = extender::Mode::kKubernetes;
    so.build_type = BERTH_BENCH_BUILD_TYPE;
    service_ = std::make_unique<extender::Service>(so, model_.get(), MakePipeline(*model_),
                                                   &binder_, &clock_);
    service_->SetReady(true);
    for (int i = 0; i < p_.nodes; ++i) index_[NodeName(p_, i)] = i;
    base_ = CandidateIndices(p_, p_.CandidateCount(), 42);
    all_.resize(static_cast<size_t>(p_.nodes));
    for (int i = 0; i < p_.nodes; ++i) all_[static_cast<size_t>(i)] = i;
    // The plain pod: a member's shape without the gang label.
    PendingPodSpec plain = MemberSpec("", 0);
    plain.name = "train-plain-0";
    plain.generate_name = "train-plain-";
    plain.uid = "5e0c1b2a-3948-4d57-a695-847362514039";
    plain_json_ = PendingPodJson(plain);
    absl::StatusOr<core::Pod> pod = DecodePodJson(plain_json_);
    if (pod.ok()) model_->Apply(core::PodUpsert{*std::move(pod)});
  }

  const ClusterProfile& profile() const { return p_; }
  extender::Service& service() { return *service_; }
  size_t events() const { return events_; }
  double load_ms() const { return load_ms_; }
  const std::vector<int>& base() const { return base_; }
  const std::vector<int>& all() const { return all_; }
  const std::string& plain_json() const { return plain_json_; }
  size_t pod_count() const { return model_->Read()->pod_count(); }

  /// Member `m` of gang `gang`: 8 cpu, 64Gi, 1 GPU, schedulerName berth-scheduler.
  PendingPodSpec MemberSpec(const std::string& gang, int m) {
    PendingPodSpec s;
    s.ns = kGangNamespace;
    s.name = StrCat(gang, "-worker-", absl::StrFormat("%04d", m));
    s.generate_name = StrCat(gang, "-worker-");
    s.uid = absl::StrFormat("9a7e%04x-%04x-4000-a000-%012x", static_cast<unsigned>(m & 0xffff),
                            static_cast<unsigned>(serial_ >> 48), serial_ & 0xffffffffffffULL);
    ++serial_;
    s.cpu = "8";
    s.memory = "64Gi";
    s.memory_limit = "64Gi";
    s.gpus = 1;
    s.pod_group = gang;
    return s;
  }

  GangPods MakeGang(const std::string& name, int size) {
    GangPods g;
    g.name = name;
    g.size = size;
    for (int m = 0; m < size; ++m) {
      const PendingPodSpec spec = MemberSpec(name, m);
      std::string json = PendingPodJson(spec);
      absl::StatusOr<core::Pod> pod = DecodePodJson(json);
      if (!pod.ok()) {
        Fail(StrCat("gang member pod JSON does not decode: ", pod.status().ToString()));
        continue;
      }
      Expect(core::GangNameOf(*pod) == name && pod->request.Get(core::kNvidiaGpu) == 1 &&
                 pod->request.Get(core::kCpu) == 8000,
             "gang member pod decodes with its gang label and request");
      g.uids.push_back(spec.uid);
      g.remove.emplace_back(core::PodDelete{spec.uid, spec.ns, spec.name});
      g.add.emplace_back(core::PodUpsert{*std::move(pod)});
      g.pod_json.push_back(std::move(json));
    }
    core::PodGroup group;
    group.ns = kGangNamespace;
    group.name = name;
    group.min_member = size;
    group.creation = absl::FromUnixSeconds(1'767'225'600 + 86400);
    g.add.emplace_back(core::PodGroupUpsert{std::move(group)});
    g.remove.emplace_back(core::PodGroupDelete{kGangNamespace, name});
    return g;
  }

  void Add(const GangPods& g) { model_->Apply(g.add); }
  /// Adds a gang about to be admitted. On a cluster of more than 10,000 pods the queue's plan
  /// does not cover a pod added within its reuse time (FairShare::PlanFor): the member would
  /// wait for the next plan, as kube-scheduler's retry would. The clock moves past that time, so
  /// the admission makes the plan, as on a smaller cluster.
  void NewGang(const GangPods& g) {
    clock_.Advance(absl::Seconds(1));
    Add(g);
  }
  /// Deletes the gang's pods and PodGroup: its reservations go with its pods.
  void Release(const GangPods& g) { model_->Apply(g.remove); }

  /// The node index of the room reserved for pod `uid`, or -1.
  int ReservedNode(std::string_view uid) const {
    auto view = model_->Read();
    const core::Reservation* r = view->FindReservation(uid);
    if (r == nullptr || r->gang.empty()) return -1;
    auto it = index_.find(view->node(r->node).node.name);
    return it == index_.end() ? -1 : it->second;
  }

  /// `base` with node `x` in it (in place of its last node when it is missing).
  std::vector<int> With(const std::vector<int>& base, int x) const {
    std::vector<int> c = base;
    if (std::find(c.begin(), c.end(), x) == c.end()) c.back() = x;
    return c;
  }
  /// `base` without node `x` (another node not in `base` takes its place).
  std::vector<int> Without(const std::vector<int>& base, int x) const {
    std::vector<int> c = base;
    auto it = std::find(c.begin(), c.end(), x);
    if (it == c.end()) return c;
    for (int y = (x + 1) % p_.nodes; y != x; y = (y + 1) % p_.nodes) {
      if (std::find(c.begin(), c.end(), y) == c.end()) {
        *it = y;
        break;
      }
    }
    return c;
  }

  std::string Body(const std::string& pod_json, const std::vector<int>& cand) const {
    return ArgsNamesJson(p_, pod_json, cand);
  }

  /// The smallest fabric domain holding every node of `nodes`: 0 one node, 1 one leaf, 2 one
  /// spine, 3 one zone, 4 the whole cluster. Hops between members: 2 x this.
  int Level(const std::vector<int>& nodes) const {
    if (nodes.empty()) return 0;
    auto same = [&](auto key) {
      return std::all_of(nodes.begin(), nodes.end(), [&](int n) { return key(n) == key(nodes[0]); });
    };
    const int npl = cluster_.nodes_per_leaf, nps = npl * cluster_.leaves_per_spine;
    if (same([](int n) { return n; })) return 0;
    if (same([&](int n) { return n / npl; })) return 1;
    if (same([&](int n) { return n / nps; })) return 2;
    if (same([&](int n) { return (n / nps) % cluster_.zones; })) return 3;
    return 4;
  }

 private:
  absl::StatusOr<core::Pod> DecodePodJson(const std::string& json) {
    absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(json);
    if (!doc.ok()) return doc.status();
    core::ResourceNameScope names(model_->resources());
    absl::StatusOr<core::Pod> pod =
        extender::DecodePod(doc->root().get_object().value(), names, extender::JsonPath{});
    if (!pod.ok()) return pod.status();
    core::ResourceVector* request[] = {&pod->request};
    if (absl::Status s = core::ResolveProvisionalIds(model_->resources(), names.provisional(), request);
        !s.ok()) {
      return s;
    }
    return pod;
  }

  GangCluster cluster_;
  ClusterProfile p_;
  // A clock the bench moves: nothing expires while a figure is taken, and a gang added for an
  // admission is never left to the queue's last plan (NewGang).
  core::FakeClock clock_;
  std::unique_ptr<core::ClusterModel> model_;
  OkBinder binder_;
  std::unique_ptr<extender::Service> service_;
  size_t events_ = 0;
  double load_ms_ = 0;
  std::map<std::string, int, std::less<>> index_;
  std::vector<int> base_, all_;
  std::string plain_json_;
  uint64_t serial_ = 1;
};

const char* LevelName(int level) {
  static constexpr const char* kNames[] = {"one node", "one leaf", "one spine", "one zone",
                                           "whole cluster"};
  return kNames[std::clamp(level, 0, 4)];
}

/// Whether a filter reply passes exactly node `name`.
bool PassesOnly(const std::string& reply, const std::string& name) {
  return reply.find(StrCat("\"NodeNames\":[\"", name, "\"]")) != std::string::npos;
}

/// The nodes a filter reply passes (a DOM parse; not timed).
std::vector<std::string> PassedNodes(const std::string& reply) {
  std::vector<std::string> out;
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j["NodeNames"].is_array()) return out;
  for (const auto& n : j["NodeNames"]) out.push_back(n.get<std::string>());
  return out;
}

/// Admits a gang through the first member's filter with every node a candidate (what
/// kube-scheduler sends with percentageOfNodesToScore: 100; timed into `timing` when given),
/// and \return the node planned for member 0 (-1 when the gang was not admitted). The gang is
/// then deleted, which releases its room: the state is as before, and planning the next gang
/// of the same shape yields the same nodes.
int PlannedNodeOfFirst(GangBench& b, const GangPods& probe, LatencyStats* timing = nullptr) {
  b.NewGang(probe);
  const std::string body = b.Body(probe.pod_json[0], b.all());
  const int64_t t0 = NowNs();
  extender::Reply r = b.service().Filter(body);
  if (timing != nullptr) timing->Add(NowNs() - t0);
  const int x = b.ReservedNode(probe.uids[0]);
  Expect(r.status == 200 && x >= 0,
         StrCat("gang ", probe.name, " (", probe.size, " members) is admitted: ", r.body.substr(0, 400)));
  b.Release(probe);
  return x;
}

struct GangFigures {
  int size = 0;
  LatencyStats admit;        // first member's filter: plans and reserves the gang
  LatencyStats admit_all;    // the same with every node a candidate
  LatencyStats member;       // a reserved member's filter, 500 candidates including its node
  LatencyStats plain;        // the plain pod, the same candidates, interleaved with `member`
  LatencyStats plain_empty;  // the plain pod before any gang holds room (500 candidates)
  LatencyStats member_all;   // every node a candidate
  LatencyStats plain_all;
  LatencyStats replan;       // 500 candidates without the member's node: its room is moved
  int replan_failed = 0;
  std::map<int, int> placed;        // level -> admissions placed there
  std::map<int, int> after_replan;  // level of the gang once one member moved
  size_t member_reply = 0, plain_reply = 0;
  size_t events = 0;  // nodes and background pods applied to the model
  double load_ms = 0;
};

GangFigures RunGangSize(const GangCluster& c, int size, int rounds, int max_member_calls,
                        int max_all_calls, int max_replans) {
  GangFigures f;
  f.size = size;
  GangBench b(c);
  const ClusterProfile& p = b.profile();
  f.events = b.events();
  f.load_ms = b.load_ms();
  {
    const std::string body = b.Body(b.plain_json(), b.base());
    for (int i = 0; i < max_member_calls / 2 + 3; ++i) {
      const int64_t t0 = NowNs();
      extender::Reply r = b.service().Filter(body);
      if (i >= 3) f.plain_empty.Add(NowNs() - t0);
      if (r.status != 200) Fail(StrCat("plain filter: ", r.body.substr(0, 300)));
    }
  }

  // Admissions: each gang is admitted twice against the same state. First with every node a
  // candidate, which shows the node planned for its first member; that gang is deleted (its
  // room released). Then a twin gang is admitted with 500 candidates that include that node
  // (kube-scheduler offers only nodes that passed its own filters; the planned node passes
  // them), and kept, so later rounds plan in a fuller cluster.
  std::vector<GangPods> kept;
  for (int r = 0; r < rounds; ++r) {
    const int x = PlannedNodeOfFirst(b, b.MakeGang(StrCat("probe-", size, "-", r), size), &f.admit_all);
    if (x < 0) break;
    GangPods g = b.MakeGang(StrCat("gang-", size, "-", r), size);
    b.NewGang(g);
    const std::string body = b.Body(g.pod_json[0], b.With(b.base(), x));
    const int64_t t0 = NowNs();
    extender::Reply reply = b.service().Filter(body);
    f.admit.Add(NowNs() - t0);
    std::vector<int> nodes;
    for (const std::string& uid : g.uids) nodes.push_back(b.ReservedNode(uid));
    const int unreserved = static_cast<int>(std::count(nodes.begin(), nodes.end(), -1));
    Expect(reply.status == 200 && PassesOnly(reply.body, NodeName(p, x)) && nodes[0] == x &&
               unreserved == 0,
           StrCat("gang ", g.name, ": admission reserves every member and passes only the ",
                  "first member's planned node ", NodeName(p, x), " (", unreserved,
                  " members without room; first member on ", nodes[0], "): ",
                  reply.body.substr(0, 300)));
    ++f.placed[b.Level(nodes)];
    kept.push_back(std::move(g));
  }

  // Reserved members 2..n, each with 500 candidates that include its node, interleaved with
  // the plain pod on the very same candidates; the order alternates.
  struct Member {
    const GangPods* gang;
    int m;
  };
  std::vector<Member> members;
  for (const GangPods& g : kept) {
    for (int m = 1; m < g.size; ++m) members.push_back({&g, m});
  }
  auto pick = [&](int limit) {
    std::vector<Member> out;
    if (members.empty() || limit <= 0) return out;
    const size_t n = std::min(members.size(), static_cast<size_t>(limit));
    for (size_t k = 0; k < n; ++k) out.push_back(members[k * members.size() / n]);
    return out;
  };
  auto time_pair = [&](const Member& mb, const std::vector<int>& base, LatencyStats* ms,
                       LatencyStats* ps, bool first) {
    const int x = b.ReservedNode(mb.gang->uids[static_cast<size_t>(mb.m)]);
    if (x < 0) {
      Fail(StrCat("member ", mb.m, " of gang ", mb.gang->name, " has no reservation"));
      return;
    }
    const std::vector<int> cand = b.With(base, x);
    const std::string member_body = b.Body(mb.gang->pod_json[static_cast<size_t>(mb.m)], cand);
    const std::string plain_body = b.Body(b.plain_json(), cand);
    extender::Reply mr, pr;
    auto run_member = [&] {
      const int64_t t0 = NowNs();
      mr = b.service().Filter(member_body);
      ms->Add(NowNs() - t0);
    };
    auto run_plain = [&] {
      const int64_t t0 = NowNs();
      pr = b.service().Filter(plain_body);
      ps->Add(NowNs() - t0);
    };
    if (first) {
      run_member();
      run_plain();
    } else {
      run_plain();
      run_member();
    }
    Expect(mr.status == 200 && PassesOnly(mr.body, NodeName(p, x)),
           StrCat("a reserved member's filter passes only its node: ", mr.body.substr(0, 300)));
    Expect(pr.status == 200 && pr.body.find("\"NodeNames\":[\"") != std::string::npos,
           StrCat("the plain pod fits some candidates: ", pr.body.substr(0, 300)));
    if (ms == &f.member && f.member_reply == 0) {
      f.member_reply = mr.body.size();
      f.plain_reply = pr.body.size();
    }
  };
  {
    const std::vector<Member> sample = pick(max_member_calls);
    const int passes = sample.empty() ? 0 : std::max<int>(1, static_cast<int>(max_member_calls / sample.size()));
    for (int pass = 0; pass < passes; ++pass) {
      for (size_t k = 0; k < sample.size(); ++k) {
        time_pair(sample[k], b.base(), &f.member, &f.plain, (k + static_cast<size_t>(pass)) % 2 == 0);
      }
    }
  }
  {
    const std::vector<Member> sample = pick(max_all_calls);
    for (size_t k = 0; k < sample.size(); ++k) {
      time_pair(sample[k], b.all(), &f.member_all, &f.plain_all, k % 2 == 0);
    }
  }
  // Reserved node not offered: berth moves the member's room to the candidate nearest the rest
  // of its gang (Service::ReplanGangMember). Each member once; this changes the reservations,
  // so it runs last.
  for (const Member& mb : pick(max_replans)) {
    const std::string& uid = mb.gang->uids[static_cast<size_t>(mb.m)];
    const int x = b.ReservedNode(uid);
    if (x < 0) continue;
    const std::vector<int> cand = b.Without(b.base(), x);
    const std::string body = b.Body(mb.gang->pod_json[static_cast<size_t>(mb.m)], cand);
    const int64_t t0 = NowNs();
    extender::Reply r = b.service().Filter(body);
    f.replan.Add(NowNs() - t0);
    const int y = b.ReservedNode(uid);
    const std::vector<std::string> passed = PassedNodes(r.body);
    if (passed.empty()) {
      ++f.replan_failed;
      continue;
    }
    Expect(r.status == 200 && passed.size() == 1 && y >= 0 && y != x &&
               passed[0] == NodeName(p, y) && std::find(cand.begin(), cand.end(), y) != cand.end(),
           StrCat("a member whose node is not offered is moved to a candidate: ", r.body.substr(0, 300)));
    std::vector<int> nodes;
    for (const std::string& u : mb.gang->uids) nodes.push_back(b.ReservedNode(u));
    ++f.after_replan[b.Level(nodes)];
  }
  for (const GangPods& g : kept) b.Release(g);
  return f;
}

std::string Ms(const Dist& d) {
  return absl::StrFormat("%.2f / %.2f / %.2f", d.p50 / 1e6, d.mean / 1e6, d.p99 / 1e6);
}
std::string UsCell(const Dist& d) {
  return absl::StrFormat("%.1f / %.1f / %.1f", Us(d.p50), d.mean / 1e3, Us(d.p99));
}

std::string Levels(const std::map<int, int>& m) {
  std::string out;
  for (const auto& [level, n] : m) {
    StrAppend(&out, out.empty() ? "" : ", ", n, " x ", LevelName(level), " (", 2 * level, " hops)");
  }
  return out.empty() ? "-" : out;
}

int RunGangs(const Options& o) {
  GangCluster c;
  if (o.quick) {
    c.zones = 2;
    c.spines_per_zone = 2;
    c.leaves_per_spine = 4;
    c.nodes_per_leaf = 10;
  }
  const ClusterProfile p = c.Profile();
  int busy = 0, loaders = 0, free_slots = 0;
  for (int i = 0; i < p.nodes; ++i) {
    busy += c.BusyGpus(i) > 0;
    loaders += c.HasLoader(i);
    // 8 cpu / 64Gi / 1 GPU members on a 95.77-cpu, 639Gi, 8-GPU node.
    const int64_t cpu = 95'770 - 250 * c.system_pods - 10'000 * c.BusyGpus(i) - (c.HasLoader(i) ? 40'000 : 0);
    free_slots += static_cast<int>(std::min<int64_t>(8 - c.BusyGpus(i), cpu / 8000));
  }
  std::printf("\nGang admission (issue 5): in-process Service::Filter, %d nodes = %d zones x %d spines x "
              "%d leaves x %d nodes\n",
              p.nodes, c.zones, c.spines_per_zone, c.leaves_per_spine, c.nodes_per_leaf);
  std::printf("  nodes: 96 cpu (95770m allocatable), 680Gi, 8 GPUs each; %d idle apart from %d node "
              "agents, %d running 1-7 one-GPU pods (%d of them also a 40-cpu loader)\n",
              p.nodes - busy, c.system_pods, busy, loaders);
  std::printf("  members and the plain pod: 8 cpu, 64Gi, 1 GPU; room for %d such pods in the empty "
              "cluster; %d candidates\n",
              free_slots, p.CandidateCount());
  std::fflush(stdout);
  std::vector<int> sizes = o.gang_sizes;
  if (o.quick && !o.gang_sizes_set) sizes = {8, 64};
  std::vector<GangFigures> all;
  for (int size : sizes) {
    const int rounds = o.gang_rounds > 0 ? o.gang_rounds
                       : o.quick         ? 2
                       : size <= 8       ? 40
                       : size <= 64      ? 20
                                         : 10;
    const int64_t t0 = NowNs();
    GangFigures f = RunGangSize(c, size, rounds, o.quick ? 40 : 2000, o.quick ? 4 : 100,
                                o.quick ? 8 : 200);
    const Dist a = DistOf(f.admit), m = DistOf(f.member), pl = DistOf(f.plain);
    std::printf("  gang of %d: %lld admissions, placed in %s; first filter %s ms (p50 / mean / p99); "
                "member %s us, plain %s us (p50 / mean / p99); model of %zu events loaded in %.0f ms; "
                "stage %.1f s\n",
                size, static_cast<long long>(a.count), Levels(f.placed).c_str(), Ms(a).c_str(),
                UsCell(m).c_str(), UsCell(pl).c_str(), f.events, f.load_ms, (NowNs() - t0) / 1e9);
    std::fflush(stdout);
    all.push_back(std::move(f));
  }
  std::printf("\nGang admission: the first member's filter plans and reserves the whole gang "
              "(%d candidates, its planned node among them)\n\n",
              p.CandidateCount());
  std::printf("| gang | admissions | placed in | admission p50 ms | mean ms | max ms | per member us (mean / n) "
              "| plain filter p50 us | admission / plain (p50) | admission, all %d nodes offered: p50 / mean ms |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n", p.nodes);
  for (const GangFigures& f : all) {
    const Dist a = DistOf(f.admit), pl = DistOf(f.plain), aa = DistOf(f.admit_all);
    std::printf("| %d | %lld | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.0fx | %.2f / %.2f |\n", f.size,
                static_cast<long long>(a.count), Levels(f.placed).c_str(), a.p50 / 1e6, a.mean / 1e6,
                f.admit.Max() / 1e6, a.mean / 1e3 / f.size, Us(pl.p50),
                Ratio(static_cast<double>(a.p50), static_cast<double>(pl.p50)), aa.p50 / 1e6, aa.mean / 1e6);
  }
  std::printf("\nReserved members (2..n) against the plain pod (same shape, no gang), interleaved, "
              "same candidates; p50 / mean / p99 us\n\n");
  std::printf("| gang | candidates | member calls | reserved member | plain pod | member / plain (p50) "
              "| member / plain (mean) | reply bytes member / plain |\n|---|---|---|---|---|---|---|---|\n");
  for (const GangFigures& f : all) {
    for (int which = 0; which < 2; ++which) {
      const LatencyStats& ms = which == 0 ? f.member : f.member_all;
      const LatencyStats& ps = which == 0 ? f.plain : f.plain_all;
      if (ms.Count() == 0) continue;
      const Dist m = DistOf(ms), pl = DistOf(ps);
      std::printf("| %d | %d | %lld | %s | %s | %.2f | %.2f | %s |\n", f.size,
                  which == 0 ? p.CandidateCount() : p.nodes, static_cast<long long>(m.count),
                  UsCell(m).c_str(), UsCell(pl).c_str(),
                  Ratio(static_cast<double>(m.p50), static_cast<double>(pl.p50)), Ratio(m.mean, pl.mean),
                  which == 0 ? StrCat(Bytes(f.member_reply), " / ", Bytes(f.plain_reply)).c_str() : "-");
    }
  }
  std::printf("\nThe plain pod before any gang holds room (no reservations in the model), same cluster: ");
  for (const GangFigures& f : all) {
    std::printf("%s%s us", &f == &all.front() ? "" : "; ", UsCell(DistOf(f.plain_empty)).c_str());
  }
  std::printf(" (p50 / mean / p99, one figure per gang size's fresh cluster)\n");
  std::printf("\nReserved node not offered (%d candidates without it): berth moves the member's room "
              "to the candidate nearest its gang\n\n| gang | calls | filter p50 / mean / p99 us | "
              "/ plain (p50) | no room found | gang's domain afterwards |\n|---|---|---|---|---|---|\n",
              p.CandidateCount());
  for (const GangFigures& f : all) {
    const Dist r = DistOf(f.replan), pl = DistOf(f.plain);
    std::printf("| %d | %lld | %s | %.1fx | %d | %s |\n", f.size, static_cast<long long>(r.count),
                UsCell(r).c_str(), Ratio(static_cast<double>(r.p50), static_cast<double>(pl.p50)),
                f.replan_failed, Levels(f.after_replan).c_str());
  }
  std::fflush(stdout);
  return g_failures == 0 ? 0 : 1;
}

/// --probe=inproc-gang-admit / inproc-gang-member / inproc-gang-plain: a fixed number of
/// admissions (the gang is released after each, so every one plans against the same state),
/// reserved-member filters, or plain-pod filters on the same candidates while the gang holds
/// room, for perf.
int RunGangProbe(const Options& o) {
  GangCluster c;
  if (o.quick) {
    c.zones = 2;
    c.spines_per_zone = 2;
    c.leaves_per_spine = 4;
    c.nodes_per_leaf = 10;
  }
  GangBench b(c);
  const int size = o.gang_size;
  const int x = PlannedNodeOfFirst(b, b.MakeGang("probe", size));
  if (x < 0) return 1;
  GangPods g = b.MakeGang("gang", size);
  const std::string first_body = b.Body(g.pod_json[0], b.With(b.base(), x));
  int64_t bad = 0;
  if (o.probe == "inproc-gang-admit") {
    std::printf("PROBE-START %s size %d, %lld calls\n", o.probe.c_str(), size,
                static_cast<long long>(o.probe_calls));
    std::fflush(stdout);
    int64_t timed = 0;
    for (int64_t i = 0; i < o.probe_calls; ++i) {
      b.NewGang(g);
      const int64_t t0 = NowNs();
      extender::Reply r = b.service().Filter(first_body);
      timed += NowNs() - t0;
      if (!PassesOnly(r.body, NodeName(b.profile(), x))) ++bad;
      b.Release(g);
    }
    std::printf("PROBE-END %.3f ms/admission (filter calls only), %lld bad\n",
                timed / 1e6 / static_cast<double>(std::max<int64_t>(1, o.probe_calls)),
                static_cast<long long>(bad));
    return bad == 0 ? 0 : 1;
  }
  if (o.probe != "inproc-gang-member" && o.probe != "inproc-gang-plain") {
    std::fprintf(stderr, "unknown --probe=%s\n", o.probe.c_str());
    return 2;
  }
  b.NewGang(g);
  (void)b.service().Filter(first_body);
  const bool plain = o.probe == "inproc-gang-plain";
  std::vector<std::string> bodies;
  std::vector<std::string> want;  // the reply must pass only this node ("": any)
  for (int m = 1; m < size; ++m) {
    const int n = b.ReservedNode(g.uids[static_cast<size_t>(m)]);
    if (n < 0) return 1;
    const std::vector<int> cand = b.With(b.base(), n);
    bodies.push_back(b.Body(plain ? b.plain_json() : g.pod_json[static_cast<size_t>(m)], cand));
    want.push_back(plain ? std::string() : NodeName(b.profile(), n));
  }
  if (bodies.empty()) return 1;
  std::printf("PROBE-START %s size %d, %lld calls\n", o.probe.c_str(), size,
              static_cast<long long>(o.probe_calls));
  std::fflush(stdout);
  const int64_t t0 = NowNs();
  for (int64_t i = 0; i < o.probe_calls; ++i) {
    const size_t k = static_cast<size_t>(i) % bodies.size();
    extender::Reply r = b.service().Filter(bodies[k]);
    if (r.status != 200 || (!want[k].empty() && !PassesOnly(r.body, want[k]))) ++bad;
  }
  std::printf("PROBE-END %.2f us/call, %lld bad\n",
              (NowNs() - t0) / 1e3 / static_cast<double>(std::max<int64_t>(1, o.probe_calls)),
              static_cast<long long>(bad));
  return bad == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------
// Probe: a fixed number of calls on one connection, for strace / perf.
// ---------------------------------------------------------------------------

int RunProbe(const Options& o) {
  ClusterProfile p = Profile5k();
  if (o.quick) p.nodes = 300;
  if (o.probe_candidates > 0) p.candidates = o.probe_candidates;
  Options so = o;
  so.full = o.probe == "inproc-filter-full" || o.probe == "inproc-prioritize-full";
  std::unique_ptr<Bench> b = SetUp(p, so);
  if (o.probe.starts_with("inproc-")) {
    // In-process loop over one verb, for perf: no HTTP at all.
    const std::map<std::string, std::string> keys = {
        {"inproc-filter", "filter-names"},          {"inproc-prioritize", "prioritize-names"},
        {"inproc-reject", "filter-names-reject"},   {"inproc-filter-full", "filter-full"},
        {"inproc-prioritize-full", "prioritize-full"}};
    auto it = keys.find(o.probe);
    if (it == keys.end()) {
      std::fprintf(stderr, "unknown --probe=%s\n", o.probe.c_str());
      return 2;
    }
    const Call& c = b->calls.at(it->second);
    const bool filter = c.verb_path.ends_with("/filter");
    std::printf("PROBE-START %s %lld calls\n", o.probe.c_str(), static_cast<long long>(o.probe_calls));
    std::fflush(stdout);
    int64_t bad = 0;
    const int64_t t0 = NowNs();
    for (int64_t i = 0; i < o.probe_calls; ++i) {
      extender::Reply r = filter ? b->service->Filter(*c.body) : b->service->Prioritize(*c.body);
      if (r.body.size() != c.expected->size()) ++bad;
    }
    std::printf("PROBE-END %.2f us/call, %lld bad\n", (NowNs() - t0) / 1e3 / static_cast<double>(o.probe_calls),
                static_cast<long long>(bad));
    TearDown(*b);
    return bad == 0 ? 0 : 1;
  }
  std::string path;
  std::string key = "filter-names";
  int port = b->port;
  if (o.probe == "noop") path = b->calls.at(key).noop_path;
  else if (o.probe == "filter") path = b->calls.at(key).verb_path;
  else if (o.probe == "prioritize") { key = "prioritize-names"; path = b->calls.at(key).verb_path; }
  else if (o.probe == "noop-prioritize") { key = "prioritize-names"; path = b->calls.at(key).noop_path; }
  else if (o.probe == "raw") { path = b->calls.at(key).noop_path; port = b->raw_port; }
  else {
    std::fprintf(stderr, "unknown --probe=%s\n", o.probe.c_str());
    return 2;
  }
  const Call& c = b->calls.at(key);
  HttpConnection conn;
  if (!conn.Connect("127.0.0.1", port).ok()) return 2;
  std::string reply;
  LatencyStats s(static_cast<size_t>(o.probe_calls));
  std::printf("PROBE-START %s %lld calls\n", path.c_str(), static_cast<long long>(o.probe_calls));
  std::fflush(stdout);
  const double cpu0 = CpuSeconds();
  const int64_t t0 = NowNs();
  int64_t errors = 0;
  for (int64_t i = 0; i < o.probe_calls; ++i) {
    const int64_t a = NowNs();
    absl::StatusOr<int> st = conn.Post(path, *c.body, &reply);
    s.Add(NowNs() - a);
    if (!st.ok() || *st != 200 || reply != *c.expected) ++errors;
  }
  const int64_t t1 = NowNs();
  const double cpu = CpuSeconds() - cpu0;
  // cpp-httplib's Stop waits for idle kept-alive connections to time out: close ours first.
  conn.Close();
  std::printf("PROBE-END %lld calls in %.3f s: %.1f us/call, p50 %.1f us, p99 %.1f us, process CPU %.1f us/call, "
              "%lld errors\n",
              static_cast<long long>(o.probe_calls), (t1 - t0) / 1e9,
              (t1 - t0) / 1e3 / static_cast<double>(o.probe_calls), Us(s.Percentile(50)),
              Us(s.Percentile(99)), cpu * 1e6 / static_cast<double>(o.probe_calls),
              static_cast<long long>(errors));
  TearDown(*b);
  return errors == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

void PrintEnvironment(const Options& o) {
  utsname u{};
  ::uname(&u);
  extender::HttpServerOptions ho;
  std::printf("berth_bench%s\n", o.quick ? " --quick (smoke run: figures are not meaningful)" : "");
  std::printf("  CPU: %s, %u hardware threads; kernel %s %s\n", CpuModel().c_str(),
              std::thread::hardware_concurrency(), u.sysname, u.release);
  std::printf("  compiler: g++ %s; build type %s; flags: %s\n", __VERSION__, BERTH_BENCH_BUILD_TYPE,
              BERTH_BENCH_CXX_FLAGS);
  std::printf("  cpp-httplib %s (system shared library, CPPHTTPLIB_RECV_BUFSIZ %zu: the transport "
              "study's prototype row only); simdjson %s; nlohmann_json %d.%d.%d\n",
              CPPHTTPLIB_VERSION, static_cast<size_t>(CPPHTTPLIB_RECV_BUFSIZ),
              BERTH_BENCH_STR(SIMDJSON_VERSION), NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
              NLOHMANN_JSON_VERSION_PATCH);
  std::printf("  berth's server: its own epoll loop (extender/http_server.cc), one I/O thread and %d "
              "workers, TCP_NODELAY on, keep-alive timeout %d s, header deadline %d s, body timeout "
              "%d s, body limit %zu MiB, %zu MiB in flight, no compression\n",
              ho.threads, ho.keep_alive_seconds, ho.header_timeout_seconds, ho.read_timeout_seconds,
              ho.max_body_bytes >> 20, ho.max_bytes_in_flight >> 20);
  std::printf("  client: bench/loadgen.h keep-alive HTTP/1.1 client, TCP_NODELAY, one sendmsg per "
              "request, same process and same cores as the server\n");
  std::printf("  CPUs this run may use: %s%s\n", AllowedCpus().c_str(),
              AllowedCpuCount() == 1 ? " - client and server share one CPU (taskset)" : "");
  std::printf("  load average at start: %s\n", LoadAverage().c_str());
  std::fflush(stdout);
}

void Verdict(const std::string& what, bool met, const std::string& figure) {
  std::printf("| %s | %s | %s |\n", what.c_str(), figure.c_str(), met ? "met" : "NOT met");
}

void PrintTargets(const std::vector<ClusterSummary>& clusters, const std::optional<ModelFigures>& m) {
  std::printf("\nTargets (5,000-node names-mode cells and the model)\n\n| target | measured | verdict |\n|---|---|---|\n");
  for (const ClusterSummary& c : clusters) {
    if (c.name != "5k") continue;
    for (const CellResult& r : c.cells) {
      const auto vp = r.t.verb.latency.Percentiles({50, 99});
      const auto np = r.t.noop.latency.Percentiles({50, 99});
      const double p50x = Ratio(static_cast<double>(vp[0]), static_cast<double>(np[0]));
      const double p99x = Ratio(static_cast<double>(vp[1]), static_cast<double>(np[1]));
      if (r.spec.group != "names") continue;
      if (r.spec.connections == 1 && r.spec.keys.size() == 1 && r.spec.keys[0] != "filter-names-reject") {
        Verdict(StrCat(r.spec.label, ": p50 <= 1.5x noop"), p50x <= 1.5,
                absl::StrFormat("%.1f vs %.1f us = %.2fx", Us(vp[0]), Us(np[0]), p50x));
        Verdict(StrCat(r.spec.label, ": p99 <= 2x noop"), p99x <= 2.0,
                absl::StrFormat("%.1f vs %.1f us = %.2fx", Us(vp[1]), Us(np[1]), p99x));
      }
      if (r.spec.connections == 1 && r.spec.keys.size() == 2) {
        Verdict("filter then prioritize, one pod: p99 <= 400 us", Us(vp[1]) <= 400,
                absl::StrFormat("p99 %.1f us (p50 %.1f us)", Us(vp[1]), Us(vp[0])));
      }
      if (r.spec.connections == 8) {
        const double verbs = r.t.verb.RequestsPerSecond() * static_cast<double>(r.spec.keys.size());
        Verdict(StrCat(r.spec.label, ", 8 connections: >= 10,000 verbs/s",
                       AllowedCpuCount() == 1 ? " (this run has 1 vCPU; the target assumes 2)" : ""),
                verbs >= 10000,
                absl::StrFormat("%.0f verbs/s", verbs));
      }
    }
  }
  if (m) {
    const double load_ms = m->apply_nodes_ms + m->apply_pods_ms;
    Verdict(StrCat(m->nodes, " nodes + ", m->pods, " pods applied as events in <= 2 s"), load_ms <= 2000,
            absl::StrFormat("%.0f ms", load_ms));
    Verdict(StrCat(m->nodes, " nodes + ", m->pods, " pods from a List via LoadList in <= 2 s"),
            m->list_load_ms <= 2000, absl::StrFormat("%.0f ms (%.0f MB of JSON)", m->list_load_ms, m->list_mb));
    Verdict("<= 2 KB per node", m->bytes_per_node <= 2048, absl::StrFormat("%.0f B", m->bytes_per_node));
    Verdict("<= 0.5 KB per pod", m->bytes_per_pod <= 512, absl::StrFormat("%.0f B", m->bytes_per_pod));
    Verdict("pod event applied in <= 2 us (mean of add, update, delete)",
            (m->pod_add.mean + m->pod_update.mean + m->pod_delete.mean) / 3 <= 2000,
            absl::StrFormat("add %.2f, update %.2f, delete %.2f us mean; p99 %.1f / %.1f / %.1f us",
                            m->pod_add.mean / 1e3, m->pod_update.mean / 1e3, m->pod_delete.mean / 1e3,
                            Us(m->pod_add.p99), Us(m->pod_update.p99), Us(m->pod_delete.p99)));
  }
  std::fflush(stdout);
}

// The run's closing lines and exit status: 1 when any reply check failed.
int FinishRun() {
  std::printf("\nload average at end: %s; peak RSS of the whole run: %s\n", LoadAverage().c_str(),
              Mib(PeakRssKiB()).c_str());
  if (g_failures > 0) {
    std::printf("\n%d check(s) FAILED: see stderr\n", g_failures);
    return 1;
  }
  std::printf("\nall replies checked: no errors\n");
  return 0;
}


int Main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    if (std::string_view(argv[a]) == "--loop") {
      spdlog::set_level(spdlog::level::warn);
      return RunLoopBench(argc, argv);
    }
  }
  std::optional<Options> o = ParseArgs(argc, argv);
  if (!o) return 2;
  spdlog::set_level(spdlog::level::warn);
  if (o->probe.starts_with("inproc-gang")) return RunGangProbe(*o);
  if (o->queues_only) return RunQueueBench(o->quick);
  if (o->simulate_only) return RunSimBench(o->quick, o->simulate_size);
  if (o->lock_only) return RunLockBench(o->quick, o->lock_seconds);
  if (o->transport_only) return RunTransportBench(o->quick, o->transport_seconds);
  if (o->tls_only) return RunTlsBench(o->quick, o->tls_seconds);
  if (o->answers_only) return RunAnswerBench(o->quick);
  if (o->journal_only) return RunJournalBench(o->quick);
  if (o->eta_only) return RunEtaBench(o->quick);
  if (!o->probe.empty()) return RunProbe(*o);
  PrintEnvironment(*o);
  if (o->gangs_only) {
    RunGangs(*o);
    return FinishRun();
  }

  {
    ClusterProfile check = Profile1k();
    check.nodes = 64;
    VerifyGenerators(check);
  }
  std::vector<ClusterSummary> clusters;
  for (int size : o->sizes) {
    ClusterProfile p = size == 1000 ? Profile1k() : size == 5000 ? Profile5k() : Profile1k();
    p.nodes = size;
    if (size != 1000 && size != 5000) p.name = StrCat(size);
    clusters.push_back(RunCluster(p, *o));
  }
  std::optional<ModelFigures> model;
  if (o->model) model = RunModel(*o);
  if (o->gangs) RunGangs(*o);
  PrintTargets(clusters, model);
  return FinishRun();
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) { return berth::bench::Main(argc, argv); }
