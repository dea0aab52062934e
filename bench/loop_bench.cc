#include "bench/loop_bench.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench/cluster_profiles.h"
#include "bench/loadgen.h"
#include "core/quantity.h"
#include "core/strings.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/testing/fake_apiserver.h"

extern char** environ;

namespace berth::bench {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

struct LoopOptions {
  std::vector<int> sizes = {500, 2000, 5000};
  int pods = 2000;
  std::vector<int> percentages = {100, 0};
  int rounds = 1;
  std::string berth;
  std::string before;
  std::string perf_out;
  /// --perf-freq=N: samples a second for --perf-out (default 499, with DWARF call graphs);
  /// --perf-flat: no call graphs, so that a high rate costs berth little.
  int perf_freq = 499;
  bool perf_flat = false;
  /// --syscalls: count berth's system calls in the window, by thread (`perf stat` of the
  /// raw_syscalls:sys_enter tracepoint; needs perf and access to tracepoints).
  bool syscalls = false;
  bool quick = false;
  /// --pin: berth on the last CPU, this process (kube-scheduler and the API server) on the
  /// others, so that neither's caches and run queue mix with the other's.
  bool pin = false;
  /// --pace=N: start at most N scheduling attempts a second, as a real kube-scheduler does (its
  /// own work is milliseconds a pod); 0, the default, as fast as berth answers. berth's periodic
  /// work (the admission tick, admission plans remade as they age, housekeeping) costs the same
  /// per second at any pace, so per pod it weighs more the slower the pods come.
  int pace = 0;
  /// --bind=inline|beside: when the bench's kube-scheduler binds.
  /// - `inline` (the default): the bind is answered before the next pod's filter goes out, one
  ///   call at a time on one connection. kube-scheduler 1.26 runs the binding cycle on its own
  ///   goroutine, but its next scheduling cycle spends milliseconds in its own plugins before it
  ///   calls the extender's filter; berth answers a bind in a fraction of that, so the calls
  ///   reach berth one after the other, as here.
  /// - `beside`: the bind goes out beside the next pod's filter, over a second connection, as
  ///   they would from a kube-scheduler whose own work took no time. The filter then sees the
  ///   cluster before the bind's pod is counted, and the two calls share berth's CPU.
  bool bind_beside = false;
  /// --config=FILE: berth's configuration file for the runs of both binaries (default:
  /// schedulerName berth-scheduler, leader election off; a file must say the same).
  std::string config;
  /// --before-config=FILE: the --before binary's configuration instead (default: --config), so
  /// one binary can run against itself under two settings (--before=BINARY of the same build).
  std::string before_config;
};

// Lines (or fields) of `text` split at `sep`.
std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool ParseInts(std::string_view text, std::vector<int>* out) {
  out->clear();
  for (std::string_view part : Split(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(ToAbsl(part), &v) || v < 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

std::string SelfDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::optional<LoopOptions> ParseLoopArgs(int argc, char** argv) {
  LoopOptions o;
  bool sizes_set = false, pods_set = false, pct_set = false;
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    auto value = [&](std::string_view name, std::string* v) {
      if (arg.substr(0, name.size()) != name || arg.size() <= name.size() ||
          arg[name.size()] != '=') {
        return false;
      }
      *v = std::string(arg.substr(name.size() + 1));
      return true;
    };
    std::string v;
    if (arg == "--loop") {
    } else if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--syscalls") {
      o.syscalls = true;
    } else if (arg == "--pin") {
      o.pin = true;
    } else if (value("--sizes", &v)) {
      if (!ParseInts(v, &o.sizes)) {
        std::fprintf(stderr, "--sizes: expected node counts such as 500,2000, got \"%s\"\n", v.c_str());
        return std::nullopt;
      }
      sizes_set = true;
    } else if (value("--config", &v)) {
      o.config = v;
    } else if (value("--before-config", &v)) {
      o.before_config = v;
    } else if (value("--bind", &v)) {
      if (v != "beside" && v != "inline") {
        std::fprintf(stderr, "--bind: expected beside or inline, got \"%s\"\n", v.c_str());
        return std::nullopt;
      }
      o.bind_beside = v == "beside";
    } else if (value("--pace", &v)) {
      if (!absl::SimpleAtoi(v, &o.pace) || o.pace < 0) {
        std::fprintf(stderr, "--pace: expected scheduling attempts per second (0: no limit), got \"%s\"\n", v.c_str());
        return std::nullopt;
      }
    } else if (value("--pods", &v)) {
      if (!absl::SimpleAtoi(v, &o.pods) || o.pods < 1) {
        std::fprintf(stderr, "--pods: expected a positive count, got \"%s\"\n", v.c_str());
        return std::nullopt;
      }
      pods_set = true;
    } else if (value("--percentages", &v)) {
      if (!ParseInts(v, &o.percentages) ||
          std::any_of(o.percentages.begin(), o.percentages.end(), [](int p) { return p > 100; })) {
        std::fprintf(stderr, "--percentages: expected 0..100 (0: kube-scheduler's adaptive default), got \"%s\"\n",
                     v.c_str());
        return std::nullopt;
      }
      pct_set = true;
    } else if (value("--rounds", &v)) {
      if (!absl::SimpleAtoi(v, &o.rounds) || o.rounds < 1) {
        std::fprintf(stderr, "--rounds: expected a positive count, got \"%s\"\n", v.c_str());
        return std::nullopt;
      }
    } else if (value("--berth", &v)) {
      o.berth = v;
    } else if (value("--before", &v)) {
      o.before = v;
    } else if (value("--perf-out", &v)) {
      o.perf_out = v;
    } else if (value("--perf-freq", &v)) {
      if (!absl::SimpleAtoi(v, &o.perf_freq) || o.perf_freq < 1 || o.perf_freq > 20000) {
        std::fprintf(stderr, "--perf-freq: expected samples a second (1..20000), got \"%s\"\n", v.c_str());
        return std::nullopt;
      }
    } else if (arg == "--perf-flat") {
      o.perf_flat = true;
    } else {
      std::fprintf(stderr,
                   "berth_bench --loop: unknown argument \"%s\"\n"
                   "usage: berth_bench --loop [--sizes=500,2000,5000] [--pods=2000] "
                   "[--percentages=100,0] [--rounds=1] [--berth=BINARY] [--before=BINARY] "
                   "[--config=FILE] [--before-config=FILE] [--pace=N] [--bind=inline|beside] "
                   "[--perf-out=PREFIX] [--perf-freq=N] [--perf-flat] [--syscalls] [--pin] [--quick]\n",
                   std::string(arg).c_str());
      return std::nullopt;
    }
  }
  if (o.quick) {
    if (!sizes_set) o.sizes = {150};
    if (!pods_set) o.pods = 200;
    if (!pct_set) o.percentages = {100, 0};
  }
  if (o.berth.empty()) o.berth = SelfDir() + "/berth";
  return o;
}

// ---- berth's CPU, per thread ------------------------------------------------------------------

struct ThreadSample {
  std::string name;  ///< "berth" for the main thread, whatever the binary is called
  int64_t cpu_ns = 0;
  int64_t switch_ins = 0;  ///< times the thread was put on a CPU (schedstat's third field)
};
using CpuSnapshot = std::map<int, ThreadSample>;  // tid -> sample

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// schedstat's first and third fields: CPU time used (ns), and times put on a CPU.
bool ReadSchedstat(const std::string& path, int64_t* cpu_ns, int64_t* switch_ins) {
  const std::string text = ReadSmallFile(path);
  const std::vector<std::string_view> fields = Split(text, ' ');
  std::string_view third = fields.size() >= 3 ? fields[2] : std::string_view();
  while (!third.empty() && (third.back() == '\n' || third.back() == ' ')) third.remove_suffix(1);
  return fields.size() >= 3 && absl::SimpleAtoi(ToAbsl(fields[0]), cpu_ns) &&
         absl::SimpleAtoi(ToAbsl(third), switch_ins);
}

// Every thread of `pid`: its name, the CPU time it has used and the times it was put on a CPU.
CpuSnapshot ReadCpu(pid_t pid) {
  CpuSnapshot out;
  const std::string dir = StrCat("/proc/", pid, "/task");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    int tid = 0;
    if (!absl::SimpleAtoi(e->d_name, &tid)) continue;
    const std::string base = StrCat(dir, "/", tid);
    std::string name = ReadSmallFile(base + "/comm");
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    // The main thread takes the binary's name (a copy under another name for --before).
    if (tid == pid) name = "berth";
    ThreadSample sample{.name = std::move(name)};
    if (!ReadSchedstat(base + "/schedstat", &sample.cpu_ns, &sample.switch_ins)) continue;
    out[tid] = std::move(sample);
  }
  ::closedir(d);
  return out;
}

// The role of a thread, from its name (the main thread runs the verb server's event loop).
std::string Role(const std::string& name) {
  if (name == "berth") return "main (HTTP I/O loop)";
  if (name.rfind("http-worker", 0) == 0) return "http-worker (verbs)";
  return name;
}

// Whether a role is the ETA forecast's ("eta", "eta-pass"): its CPU is printed apart from the
// per-pod figure (RunFigures::forecast_ns).
bool IsForecastRole(const std::string& role) { return role.rfind("eta", 0) == 0; }

// CPU used (or, with &ThreadSample::switch_ins, switch-ins) between two snapshots, by role;
// threads gone by `after` are counted up to `before`'s figure only (none of berth's threads end
// while it serves).
std::map<std::string, int64_t> CpuDelta(const CpuSnapshot& before, const CpuSnapshot& after,
                                        int64_t ThreadSample::*field = &ThreadSample::cpu_ns) {
  std::map<std::string, int64_t> out;
  for (const auto& [tid, s] : after) {
    auto it = before.find(tid);
    out[Role(s.name)] += s.*field - (it == before.end() ? 0 : it->second.*field);
  }
  return out;
}

// ---- what the host charges for a wake-up -------------------------------------------------------

// With --pin on two CPUs or more, berth's CPU is the last one: this thread moves there (berth,
// and the echo below, start from it and inherit it). Nothing without --pin.
void PinToBerthCpu(const LoopOptions& o, int cpus) {
  if (!o.pin || cpus < 2) return;
  cpu_set_t last;
  CPU_ZERO(&last);
  CPU_SET(cpus - 1, &last);
  ::sched_setaffinity(0, sizeof(last), &last);
}


// An echo process, alone on berth's CPU under --pin, answers 1 KB requests over loopback TCP from
// this process at the loop's pace. It does nothing else: the CPU it is charged per round trip is
// what any extender pays this host to be woken, read and answer one request at that pace. On a
// virtual machine whose host does not report stolen time, a thread woken on an idle virtual CPU
// may be charged for time it never ran; the figure varies with the host's load from one minute
// to the next, so it is measured in every round, beside berth.
struct WakeCharge {
  bool ok = false;
  int64_t trips = 0;
  int64_t cpu_ns = 0;
  int64_t switch_ins = 0;
};

constexpr size_t kEchoBytes = 1024;

// Reads exactly `n` bytes; false on EOF or an error.
bool ReadFully(int fd, char* buf, size_t n) {
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::read(fd, buf + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool WriteFully(int fd, const char* buf, size_t n) {
  for (size_t put = 0; put < n;) {
    const ssize_t w = ::write(fd, buf + put, n - put);
    if (w <= 0) return false;
    put += static_cast<size_t>(w);
  }
  return true;
}

WakeCharge MeasureWakeCharge(const LoopOptions& o, int cpus) {
  WakeCharge out;
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return out;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return out;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(listener);
    return out;
  }
  if (child == 0) {
    // System calls only from here: the bench's other threads are not in this process.
    PinToBerthCpu(o, cpus);
    const int conn = ::accept(listener, nullptr, nullptr);
    if (conn < 0) ::_exit(1);
    const int one = 1;
    ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[kEchoBytes];
    while (ReadFully(conn, buf, sizeof(buf)) && WriteFully(conn, buf, sizeof(buf))) {
    }
    ::_exit(0);
  }
  ::close(listener);
  const int conn = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  bool ok = conn >= 0 && ::connect(conn, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
  std::vector<char> buf(kEchoBytes, 'x');
  // A few trips first, so that the child has accepted and pinned itself.
  for (int i = 0; ok && i < 20; ++i) ok = WriteFully(conn, buf.data(), buf.size()) && ReadFully(conn, buf.data(), buf.size());
  const std::string stat = StrCat("/proc/", child, "/task/", child, "/schedstat");
  int64_t cpu0 = 0, in0 = 0, cpu1 = 0, in1 = 0;
  ok = ok && ReadSchedstat(stat, &cpu0, &in0);
  const double seconds = o.quick ? 0.5 : 3;
  const int64_t trips = o.pace > 0 ? std::max<int64_t>(20, static_cast<int64_t>(o.pace * seconds)) : 5000;
  const auto start = SteadyClock::now();
  for (int64_t i = 0; ok && i < trips; ++i) {
    if (o.pace > 0) std::this_thread::sleep_until(start + std::chrono::microseconds(i * 1'000'000 / o.pace));
    ok = WriteFully(conn, buf.data(), buf.size()) && ReadFully(conn, buf.data(), buf.size());
  }
  ok = ok && ReadSchedstat(stat, &cpu1, &in1);
  if (conn >= 0) ::close(conn);
  // An echo never reached still waits in accept.
  if (!ok) ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (ok) out = {.ok = true, .trips = trips, .cpu_ns = cpu1 - cpu0, .switch_ins = in1 - in0};
  return out;
}

// ---- berth as a child process ------------------------------------------------------------------

class BerthProcess {
 public:
  ~BerthProcess() { Stop(); }

  absl::Status Start(const std::string& binary, const std::vector<std::string>& args,
                     const std::string& stderr_path) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> all = {binary};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      pid_ = -1;
      return absl::InternalError(StrCat("cannot start ", binary, ": ", std::strerror(rc)));
    }
    out_fd_ = out[0];
    return absl::OkStatus();
  }

  // The port from berth's "listening on http://HOST:PORT" line.
  absl::StatusOr<int> WaitListening(std::chrono::seconds timeout) {
    const auto deadline = SteadyClock::now() + timeout;
    std::string text;
    while (SteadyClock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      const size_t at = text.find("listening on http://");
      if (at == std::string::npos) continue;
      const size_t end = text.find(' ', at + 20);
      if (end == std::string::npos) continue;
      const std::string url = text.substr(at + 20, end - at - 20);
      int port = 0;
      if (!absl::SimpleAtoi(url.substr(url.rfind(':') + 1), &port)) break;
      return port;
    }
    return absl::DeadlineExceededError(StrCat("berth did not say where it listens; it printed: \"", text, "\""));
  }

  pid_t pid() const { return pid_; }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (out_fd_ >= 0) ::close(out_fd_);
    out_fd_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
};

// `perf record -g` of one process, while it lives.
class PerfRecord {
 public:
  void Start(pid_t pid, const std::string& out, int freq, bool flat) {
    std::vector<std::string> all = {"perf", "record", "-q", "-F", std::to_string(freq)};
    if (!flat) all.insert(all.end(), {"--call-graph", "dwarf,16384"});
    all.insert(all.end(), {"-p", std::to_string(pid), "-o", out});
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawnp(&pid_, "perf", nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  ~PerfRecord() { Stop(); }

 private:
  pid_t pid_ = -1;
};

// `perf stat --per-thread` of the raw_syscalls:sys_enter tracepoint of one process: its system
// calls by thread, from Start to Stop.
class SyscallCount {
 public:
  void Start(pid_t pid, const std::string& out) {
    out_ = out;
    std::vector<std::string> all = {"perf", "stat", "--per-thread", "-x", ",", "-e", "raw_syscalls:sys_enter",
                                    "-p", std::to_string(pid), "-o", out};
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawnp(&pid_, "perf", nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  /// Stops counting. \return the count by thread name (the main thread as "berth"), or nothing
  /// when perf could not count (not installed, tracepoints not readable).
  std::optional<std::map<std::string, int64_t>> Stop(pid_t pid) {
    if (pid_ <= 0) return std::nullopt;
    ::kill(pid_, SIGINT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    // Lines of "NAME-TID,COUNT,,raw_syscalls:sys_enter,..." (the name may hold '-').
    std::map<std::string, int64_t> out;
    const std::string text = ReadSmallFile(out_);
    std::remove(out_.c_str());
    for (std::string_view line : Split(text, '\n')) {
      const std::vector<std::string_view> fields = Split(line, ',');
      if (fields.size() < 4 || fields[3] != "raw_syscalls:sys_enter") continue;
      const size_t dash = fields[0].rfind('-');
      int64_t count = 0;
      int tid = 0;
      if (dash == std::string_view::npos || !absl::SimpleAtoi(ToAbsl(fields[1]), &count) ||
          !absl::SimpleAtoi(ToAbsl(fields[0].substr(dash + 1)), &tid)) {
        continue;
      }
      out[tid == pid ? std::string("berth") : std::string(fields[0].substr(0, dash))] += count;
    }
    if (out.empty()) return std::nullopt;
    return out;
  }
  ~SyscallCount() {
    if (pid_ > 0) Stop(-1);
  }

 private:
  pid_t pid_ = -1;
  std::string out_;
};

// ---- the scheduler's side -----------------------------------------------------------------------

// kube-scheduler's numFeasibleNodesToFind (1.26): every node below 100 nodes or at 100 %;
// otherwise the percentage (0: the adaptive 50 - nodes/125, at least 5) of the nodes, at least 100.
int FeasibleToFind(int nodes, int percentage) {
  if (nodes < 100 || percentage >= 100) return nodes;
  int pct = percentage;
  if (pct <= 0) pct = std::max(5, 50 - nodes / 125);
  return std::max(100, nodes * pct / 100);
}

struct NodeRoom {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory = 0;
};

int64_t Milli(const Json& q) {
  auto v = core::Quantity::Parse(q.is_string() ? q.get<std::string>() : q.dump());
  return v.ok() ? v->MilliValue() : 0;
}
int64_t Units(const Json& q) {
  auto v = core::Quantity::Parse(q.is_string() ? q.get<std::string>() : q.dump());
  return v.ok() ? v->Value() : 0;
}

struct RunFigures {
  bool ok = true;
  std::string error;
  int pods = 0;
  int bound = 0;
  int attempts = 0;      // filter calls
  int prioritizes = 0;   // prioritize calls (none when the filter passed one node)
  int parked = 0;        // filter answers with no node (kube-scheduler parks the pod)
  double wall_s = 0;
  // berth's CPU in the window, all threads but the ETA forecast's: what scheduling the pods cost.
  int64_t cpu_ns = 0;
  // The ETA forecast's threads ("eta", "eta-pass"). Their passes run on a timer (eta.intervalSeconds)
  // at nice 19, whatever the pods: a pass lands in some windows and not in others, and at 5,000
  // nodes with a thousand jobs waiting one is worth several ms per pod of a 6 s window. Printed
  // apart; `berth_bench --eta` measures a pass.
  int64_t forecast_ns = 0;
  // The bench's own /metrics reads in the window, and the CPU berth's workers spent on them;
  // left out of cpu_ns and cpu_by_role.
  int probes = 0;
  int64_t probe_ns = 0, probe_switch_ins = 0;
  std::map<std::string, int64_t> cpu_by_role;
  // Times berth's threads (all but the ETA forecast's) were put on a CPU in the window, by role:
  // each one after a sleep is a wake-up, which some hosts charge far more for than others.
  int64_t switch_ins = 0;
  std::map<std::string, int64_t> switch_ins_by_role;
  // What berth asked of the API server in the window.
  int api_calls = 0;
  std::map<std::string, int> api_by_kind;  // "POST pods/binding", "PATCH pods", ...
  int64_t api_bytes_sent = 0;       // request bodies
  int64_t api_bytes_received = 0;   // answer bodies and watch events
  int64_t watch_bytes = 0;
  int64_t verb_bytes_sent = 0;      // kube-scheduler to berth
  int64_t verb_bytes_received = 0;  // berth to kube-scheduler
  int nudges = 0;                   // pods patched with berth.io/admitted
  // Admission plans berth made in the window and their wall time (-1: berth does not count them).
  double plans = -1, plan_s = 0;
  // Times the HTTP loop moved to another thread in the window, because something came while the
  // loop's thread waited on a bind (0 also for a berth that does not count them). After one, the
  // thread that runs the loop is one named for a worker, and the CPU by thread says so.
  double loop_handoffs = 0;
  // Wall time inside each verb's handler in the window (berth_request_duration_seconds), from
  // the request's decoding to its encoded answer: what of the CPU per pod is deciding rather
  // than moving bytes. Empty for a berth without the metric.
  std::map<std::string, double> handler_s;
  // --syscalls: berth's system calls in the window, all threads but the ETA forecast's, and by
  // role; -1 when perf could not count them.
  int64_t syscalls = -1;
  std::map<std::string, int64_t> syscalls_by_role;
};

std::string KindOf(const testing::RecordedCall& c) {
  std::string what = c.resource.empty() ? c.path : c.resource;
  if (!c.subresource.empty()) what += "/" + c.subresource;
  return StrCat(c.verb.empty() ? c.method : c.verb, " ", what);
}

// The sum of a metric's samples whose labels contain `labels` (all of them when it is empty).
double MetricValue(const std::string& metrics, std::string_view name, std::string_view labels = {}) {
  double total = 0;
  for (std::string_view line : Split(metrics, '\n')) {
    if (line.empty() || line[0] == '#' || line.substr(0, name.size()) != name) continue;
    const std::string_view rest = line.substr(name.size());
    if (!rest.empty() && rest[0] != ' ' && rest[0] != '{') continue;
    if (!labels.empty() && rest.substr(0, rest.find(' ')).find(labels) == std::string_view::npos) continue;
    double v = 0;
    if (absl::SimpleAtod(ToAbsl(line.substr(line.rfind(' ') + 1)), &v)) total += v;
  }
  return total;
}

// Whether a bind call succeeded: HTTP 200 and an answer without an Error.
absl::Status BindAnswered(const absl::StatusOr<int>& code, const std::string& answer) {
  if (!code.ok() || *code != 200) {
    return absl::UnavailableError(
        StrCat("bind: ", code.ok() ? StrCat("HTTP ", *code) : std::string(code.status().message())));
  }
  Json br = Json::parse(answer, nullptr, false);
  if (br.is_discarded() || (br.contains("Error") && !br["Error"].get<std::string>().empty())) {
    return absl::UnavailableError(StrCat("bind answered: ", answer.substr(0, 300)));
  }
  return absl::OkStatus();
}

// kube-scheduler's binding cycles, beside its scheduling loop: the binds go out in the order
// submitted, one at a time, over their own connection to berth.
class Binder {
 public:
  explicit Binder(int port) : port_(port), thread_([this] { Run(); }) {}
  ~Binder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;

  void Submit(std::string body) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(body));
    }
    cv_.notify_all();
  }

  /// Waits until every bind submitted is answered; the first failure, if any.
  absl::Status Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || !error_.ok(); });
    return error_;
  }

  int64_t bytes_sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  int64_t bytes_received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  void Run() {
    HttpConnection conn;
    std::string answer;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      std::string body = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      absl::Status failed;
      if (!conn.connected()) failed = conn.Connect("127.0.0.1", port_);
      absl::StatusOr<int> code = failed.ok() ? conn.Post("/bind", body, &answer) : absl::StatusOr<int>(failed);
      failed = BindAnswered(code, answer);
      lock.lock();
      busy_ = false;
      sent_ += static_cast<int64_t>(body.size());
      if (code.ok()) received_ += static_cast<int64_t>(answer.size());
      if (error_.ok()) error_ = failed;
      cv_.notify_all();
    }
  }

  const int port_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool busy_ = false;
  bool stop_ = false;
  absl::Status error_;
  int64_t sent_ = 0, received_ = 0;
  std::thread thread_;  // last: starts once the members above are built
};

RunFigures RunOnce(const LoopOptions& o, const std::string& binary, const std::string& config_file,
                   int nodes, int percentage, const std::string& perf_out) {
  RunFigures f;
  f.pods = o.pods;
  auto fail = [&](std::string why) {
    f.ok = false;
    f.error = std::move(why);
    return f;
  };

  testing::FakeApiServerOptions api_options;
  api_options.threads = 48;
  testing::FakeApiServer api(api_options);
  if (!api.start_status().ok()) return fail(StrCat("fake API server: ", api.start_status().message()));

  // The cluster: nodes of the filter bench's 1k profile shape, one Pool over all of them (the
  // pods' home pool), and the Queue the pending pods name (berth.io/queue: q-1).
  ClusterProfile profile;
  profile.name = "loop";
  profile.nodes = nodes;
  profile.pods_per_node = 0;
  std::vector<NodeRoom> room;
  for (int i = 0; i < nodes; ++i) {
    Json n = Json::parse(NodeJson(profile, i, false));
    n["metadata"]["labels"]["pool"] = "bench";
    n["metadata"].erase("resourceVersion");
    n["metadata"].erase("uid");
    const Json& alloc = n["status"]["allocatable"];
    room.push_back({n["metadata"]["name"].get<std::string>(), Milli(alloc.at("cpu")), Units(alloc.at("memory"))});
    if (auto s = api.Create("nodes", "", std::move(n)); !s.ok()) return fail(StrCat("node: ", s.status().message()));
  }
  if (auto s = api.Create("pools", "", Json{{"apiVersion", "berth.io/v1alpha1"}, {"kind", "Pool"},
                                            {"metadata", {{"name", "bench"}}},
                                            {"spec", {{"nodeSelector", {{"matchLabels", {{"pool", "bench"}}}}}}}});
      !s.ok()) {
    return fail(StrCat("pool: ", s.status().message()));
  }
  if (auto s = api.Create("queues", "", Json{{"apiVersion", "berth.io/v1alpha1"}, {"kind", "Queue"},
                                             {"metadata", {{"name", "q-1"}}}, {"spec", {{"weight", 1}}}});
      !s.ok()) {
    return fail(StrCat("queue: ", s.status().message()));
  }

  char dir_template[] = "/tmp/berth-loop-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) return fail("mkdtemp failed");
  const std::string kubeconfig = StrCat(dir, "/kubeconfig");
  const std::string config = StrCat(dir, "/berth.json");
  std::ofstream(kubeconfig) << api.Kubeconfig();
  if (config_file.empty()) {
    std::ofstream(config) << R"({"schedulerName": "berth-scheduler", "kubernetes": {"leaderElection": {"enabled": false}}})";
  } else {
    std::ifstream in(config_file);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) return fail(StrCat("--config: cannot read ", config_file));
    std::ofstream(config) << text.str();
  }

  BerthProcess berth;
  // With --pin, berth is started from this thread while it runs on the last CPU only: the
  // child and every thread it makes inherit that. This thread then goes back to the others.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (o.pin && cpus >= 2) ::sched_getaffinity(0, sizeof(mine), &mine);
  PinToBerthCpu(o, cpus);
  const absl::Status started = berth.Start(binary,
                           {"serve", "--kubeconfig", kubeconfig, "--config", config, "--listen",
                            "127.0.0.1:0", "--log-level", "warn"},
                           StrCat(dir, "/berth.log"));
  if (o.pin && cpus >= 2) ::sched_setaffinity(0, sizeof(mine), &mine);
  if (!started.ok()) return fail(std::string(started.message()));
  absl::StatusOr<int> port = berth.WaitListening(std::chrono::seconds(30));
  if (!port.ok()) return fail(std::string(port.status().message()));
  httplib::Client ops("127.0.0.1", *port);
  ops.set_read_timeout(10, 0);
  auto metrics = [&]() -> std::string {
    auto r = ops.Get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
  };
  // The bench reads /metrics in the window to know when berth has every pod and has confirmed
  // every binding. kube-scheduler makes no such reads, and one costs berth a few ms at these
  // sizes (it makes an admission plan for the queue gauges): the CPU berth's workers spend on
  // them is measured around each read and left out of the per-pod figure. Nothing else runs on
  // a worker during those reads (no verb is in flight before the first filter or after the
  // last bind's answer); the loop's share of reading the request stays in.
  auto probe = [&]() -> std::string {
    const CpuSnapshot before = ReadCpu(berth.pid());
    std::string body = metrics();
    const CpuSnapshot after = ReadCpu(berth.pid());
    const std::map<std::string, int64_t> used = CpuDelta(before, after);
    if (auto it = used.find(Role("http-worker")); it != used.end()) f.probe_ns += it->second;
    const std::map<std::string, int64_t> woken = CpuDelta(before, after, &ThreadSample::switch_ins);
    if (auto it = woken.find(Role("http-worker")); it != woken.end()) f.probe_switch_ins += it->second;
    ++f.probes;
    return body;
  };
  {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    bool ready = false;
    while (!ready && SteadyClock::now() < deadline) {
      auto r = ops.Get("/readyz");
      ready = r && r->status == 200;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!ready) return fail(StrCat("berth did not become ready; see ", dir, "/berth.log"));
    // Ready comes with the first lists; each collection's watch opens just after. The window
    // starts once the watches are all open and the lists' work is done.
    int open = -1, same = 0;
    while (same < 3 && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int now = api.open_watches();
      same = now == open && now > 0 ? same + 1 : 0;
      open = now;
    }
  }

  HttpConnection verbs;
  if (auto s = verbs.Connect("127.0.0.1", *port); !s.ok()) return fail(std::string(s.message()));

  // ---- the window: from the pods' creation to the last binding on berth's watch ----
  const std::string metrics_before = metrics();
  api.ClearCalls();
  const auto watch_before = api.watch_bytes();
  const CpuSnapshot cpu_before = ReadCpu(berth.pid());
  PerfRecord perf;
  if (!perf_out.empty()) perf.Start(berth.pid(), perf_out, o.perf_freq, o.perf_flat);
  SyscallCount syscalls;
  if (o.syscalls) syscalls.Start(berth.pid(), StrCat(dir, "/syscalls.csv"));
  const auto t0 = SteadyClock::now();

  struct Pending {
    std::string name, uid, json;
    int64_t cpu_milli = 0, memory = 0;
  };
  std::vector<Pending> pending;
  for (int i = 0; i < o.pods; ++i) {
    PendingPodSpec spec = PendingPodSpecOf(PendingKind::kFits);
    spec.name = StrCat("bench-", i);
    spec.ns = "bench";
    Json pod = Json::parse(PendingPodJson(spec));
    pod["metadata"].erase("uid");
    pod["metadata"].erase("resourceVersion");
    pod["metadata"].erase("creationTimestamp");
    pod["spec"].erase("nodeName");
    pod["metadata"]["annotations"]["berth.io/pool"] = "bench";  // its home pool: no borrowing
    absl::StatusOr<Json> made = api.Create("pods", "bench", std::move(pod));
    if (!made.ok()) return fail(StrCat("pod: ", made.status().message()));
    Pending p;
    p.name = spec.name;
    p.uid = (*made)["metadata"]["uid"].get<std::string>();
    for (const Json& c : (*made)["spec"]["containers"]) {
      const Json& req = c["resources"]["requests"];
      if (req.contains("cpu")) p.cpu_milli += Milli(req["cpu"]);
      if (req.contains("memory")) p.memory += Units(req["memory"]);
    }
    p.json = made->dump();
    pending.push_back(std::move(p));
  }
  // kube-scheduler's informer and berth's watch see the pods at about the same time; the loop
  // starts once berth has them all, as a scheduler starting on a backlog would.
  {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (MetricValue(probe(), "berth_pods") < o.pods) {
      if (SteadyClock::now() > deadline) return fail("berth did not see every pod within 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  const int want = FeasibleToFind(nodes, percentage);
  int next_start = 0;
  std::mt19937_64 rng(42);
  std::vector<int> queue(static_cast<size_t>(o.pods));
  for (int i = 0; i < o.pods; ++i) queue[static_cast<size_t>(i)] = i;
  struct Parked {
    int pod;
    SteadyClock::time_point retry;
  };
  std::vector<Parked> parked;
  std::string answer;
  std::optional<Binder> binder;
  if (o.bind_beside) binder.emplace(*port);
  const auto loop_start = SteadyClock::now();
  const auto loop_deadline = loop_start + std::chrono::minutes(10);
  size_t head = 0;
  while (head < queue.size() || !parked.empty()) {
    if (SteadyClock::now() > loop_deadline) return fail("pods still unbound after 10 minutes");
    if (head == queue.size()) {
      // kube-scheduler's backoff: a parked pod comes back after its second (or on a nudge; the
      // bench retries on the timer only).
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const auto now = SteadyClock::now();
      for (auto it = parked.begin(); it != parked.end();) {
        if (it->retry <= now) {
          queue.push_back(it->pod);
          it = parked.erase(it);
        } else {
          ++it;
        }
      }
      continue;
    }
    if (o.pace > 0) {
      std::this_thread::sleep_until(loop_start + std::chrono::microseconds(int64_t{f.attempts} * 1'000'000 / o.pace));
    }
    const int pi = queue[head++];
    Pending& p = pending[static_cast<size_t>(pi)];
    // kube-scheduler's own filters (resource fit) over its rotating sample.
    std::vector<int> feasible;
    int processed = 0;
    for (; processed < nodes && static_cast<int>(feasible.size()) < want; ++processed) {
      const int n = (next_start + processed) % nodes;
      const NodeRoom& r = room[static_cast<size_t>(n)];
      if (r.cpu_milli >= p.cpu_milli && r.memory >= p.memory) feasible.push_back(n);
    }
    next_start = (next_start + processed) % nodes;
    if (feasible.empty()) return fail("the cluster is full: more nodes or fewer pods");
    std::string body = StrCat(R"({"Pod":)", p.json, R"(,"Nodes":null,"NodeNames":[)");
    for (size_t k = 0; k < feasible.size(); ++k) {
      StrAppend(&body, k ? "," : "", "\"", room[static_cast<size_t>(feasible[k])].name, "\"");
    }
    body += "]}";
    ++f.attempts;
    f.verb_bytes_sent += static_cast<int64_t>(body.size());
    absl::StatusOr<int> code = verbs.Post("/filter", body, &answer);
    if (!code.ok() || *code != 200) return fail(StrCat("filter: ", code.ok() ? StrCat("HTTP ", *code) : std::string(code.status().message())));
    f.verb_bytes_received += static_cast<int64_t>(answer.size());
    Json fr = Json::parse(answer, nullptr, false);
    if (fr.is_discarded() || (fr.contains("Error") && !fr["Error"].get<std::string>().empty())) {
      return fail(StrCat("filter answered: ", answer.substr(0, 300)));
    }
    std::vector<std::string> passed;
    if (fr["NodeNames"].is_array()) {
      for (const Json& n : fr["NodeNames"]) passed.push_back(n.get<std::string>());
    }
    if (passed.empty()) {
      ++f.parked;
      parked.push_back({pi, SteadyClock::now() + std::chrono::seconds(1)});
      continue;
    }
    std::string chosen = passed[0];
    if (passed.size() > 1) {
      body = StrCat(R"({"Pod":)", p.json, R"(,"Nodes":null,"NodeNames":[)");
      for (size_t k = 0; k < passed.size(); ++k) StrAppend(&body, k ? "," : "", "\"", passed[k], "\"");
      body += "]}";
      f.verb_bytes_sent += static_cast<int64_t>(body.size());
      ++f.prioritizes;
      code = verbs.Post("/prioritize", body, &answer);
      if (!code.ok() || *code != 200) return fail(StrCat("prioritize: ", code.ok() ? StrCat("HTTP ", *code) : std::string(code.status().message())));
      f.verb_bytes_received += static_cast<int64_t>(answer.size());
      Json pr = Json::parse(answer, nullptr, false);
      if (!pr.is_array()) return fail(StrCat("prioritize answered: ", answer.substr(0, 300)));
      // Hosts left out score 0; the best score wins, ties drawn at random (kube-scheduler's
      // selectHost samples among equal scores).
      std::map<std::string, int64_t> score;
      for (const Json& h : pr) score[h.value("Host", "")] = h.value("Score", int64_t{0});
      int64_t best = -1;
      int ties = 0;
      for (const std::string& n : passed) {
        auto it = score.find(n);
        const int64_t s = it == score.end() ? 0 : it->second;
        if (s > best) {
          best = s;
          chosen = n;
          ties = 1;
        } else if (s == best && std::uniform_int_distribution<int>(0, ties++)(rng) == 0) {
          chosen = n;
        }
      }
    }
    // kube-scheduler assumes the pod on its node, then binds.
    for (NodeRoom& r : room) {
      if (r.name == chosen) {
        r.cpu_milli -= p.cpu_milli;
        r.memory -= p.memory;
        break;
      }
    }
    body = StrCat(R"({"PodName":")", p.name, R"(","PodNamespace":"bench","PodUID":")", p.uid,
                  R"(","Node":")", chosen, R"("})");
    if (binder) {
      binder->Submit(std::move(body));
      continue;
    }
    f.verb_bytes_sent += static_cast<int64_t>(body.size());
    code = verbs.Post("/bind", body, &answer);
    if (code.ok() && *code == 200) f.verb_bytes_received += static_cast<int64_t>(answer.size());
    if (absl::Status s = BindAnswered(code, answer); !s.ok()) return fail(std::string(s.message()));
  }
  if (binder) {
    if (absl::Status s = binder->Drain(); !s.ok()) return fail(std::string(s.message()));
    f.verb_bytes_sent += binder->bytes_sent();
    f.verb_bytes_received += binder->bytes_received();
  }
  // Every binding in the API server, and berth has seen each come back on its watch.
  std::string metrics_after;
  {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (true) {
      metrics_after = probe();
      if (static_cast<int>(api.bindings().size()) >= o.pods && MetricValue(metrics_after, "berth_binds_in_flight") == 0) break;
      if (SteadyClock::now() > deadline) return fail("bindings not confirmed within 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const auto t1 = SteadyClock::now();
  const CpuSnapshot cpu_after = ReadCpu(berth.pid());
  perf.Stop();
  if (std::optional<std::map<std::string, int64_t>> counted = syscalls.Stop(berth.pid())) {
    f.syscalls = 0;
    for (const auto& [name, count] : *counted) {
      const std::string role = Role(name);
      if (IsForecastRole(role)) continue;
      f.syscalls += count;
      f.syscalls_by_role[role] += count;
    }
  }
  f.wall_s = std::chrono::duration<double>(t1 - t0).count();
  if (metrics_after.find("berth_admission_plans_total") != std::string::npos) {
    f.plans = MetricValue(metrics_after, "berth_admission_plans_total") -
              MetricValue(metrics_before, "berth_admission_plans_total");
    f.plan_s = MetricValue(metrics_after, "berth_admission_plan_seconds_total") -
               MetricValue(metrics_before, "berth_admission_plan_seconds_total");
  }
  f.loop_handoffs = MetricValue(metrics_after, "berth_http_loop_handoffs_total") -
                    MetricValue(metrics_before, "berth_http_loop_handoffs_total");
  for (const char* verb : {"filter", "prioritize", "bind"}) {
    const std::string label = StrCat("verb=\"", verb, "\"");
    const double s = MetricValue(metrics_after, "berth_request_duration_seconds_sum", label) -
                     MetricValue(metrics_before, "berth_request_duration_seconds_sum", label);
    if (metrics_after.find("berth_request_duration_seconds_sum") != std::string::npos) f.handler_s[verb] = s;
  }
  f.cpu_by_role = CpuDelta(cpu_before, cpu_after);
  f.cpu_by_role[Role("http-worker")] -= f.probe_ns;
  for (const auto& [role, ns] : f.cpu_by_role) (IsForecastRole(role) ? f.forecast_ns : f.cpu_ns) += ns;
  for (const auto& [role, n] : CpuDelta(cpu_before, cpu_after, &ThreadSample::switch_ins)) {
    if (IsForecastRole(role)) continue;
    const int64_t counted = role == Role("http-worker") ? n - f.probe_switch_ins : n;
    f.switch_ins_by_role[role] = counted;
    f.switch_ins += counted;
  }
  f.bound = static_cast<int>(api.bindings().size());
  for (const testing::RecordedCall& c : api.calls()) {
    // The bench's own metric reads go to berth, not the API server: every recorded call is berth's.
    ++f.api_calls;
    ++f.api_by_kind[KindOf(c)];
    f.api_bytes_sent += static_cast<int64_t>(c.body.size());
    f.api_bytes_received += static_cast<int64_t>(c.response_bytes);
    if (c.method == "PATCH" && c.resource == "pods" && c.body.find("berth.io/admitted") != std::string::npos) ++f.nudges;
  }
  for (const auto& [res, bytes] : api.watch_bytes()) {
    auto it = watch_before.find(res);
    f.watch_bytes += static_cast<int64_t>(bytes - (it == watch_before.end() ? 0 : it->second));
  }
  f.api_bytes_received += f.watch_bytes;
  berth.Stop();
  std::remove(kubeconfig.c_str());
  std::remove(config.c_str());
  std::remove(StrCat(dir, "/berth.log").c_str());
  ::rmdir(dir);
  return f;
}

// "ROLE FIGURE, ..." per pod, largest first, leaving out the ETA forecast's threads and those
// below 0.5 % of `total`; each figure divided by `unit` (1e3: ns to us).
std::string PerPodByRole(const std::map<std::string, int64_t>& by_role, int64_t total, int pods, double unit) {
  std::vector<std::pair<int64_t, std::string>> roles;
  for (const auto& [role, value] : by_role) {
    if (!IsForecastRole(role)) roles.push_back({value, role});
  }
  std::sort(roles.rbegin(), roles.rend());
  std::string out;
  for (const auto& [value, role] : roles) {
    if (value * 200 < total) continue;
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s %.1f", role.c_str(), value / unit / pods);
    StrAppend(&out, out.empty() ? "" : ", ", buf);
  }
  return out;
}

std::string Ratio(double now, double before) {
  if (before <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", now / before);
  return buf;
}

}  // namespace

int RunLoopBench(int argc, char** argv) {
  std::optional<LoopOptions> parsed = ParseLoopArgs(argc, argv);
  if (!parsed) return 2;
  const LoopOptions& o = *parsed;
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (o.pin && cpus >= 2) {
    cpu_set_t rest;
    CPU_ZERO(&rest);
    for (int c = 0; c < cpus - 1; ++c) CPU_SET(c, &rest);
    ::sched_setaffinity(0, sizeof(rest), &rest);
  }
  std::printf("\nloop: berth as kube-scheduler's extender, %d pending pods (4 cpu, 16Gi) bound one at a time%s; "
              "berth %s%s%s\n",
              o.pods, o.pace > 0 ? StrCat(", at most ", o.pace, " attempts a second").c_str() : "", o.berth.c_str(),
              o.before.empty() ? "" : ", before: ", o.before.c_str());
  std::printf("per scheduled pod: berth's CPU (all its threads but the ETA forecast's), API calls and bytes (bodies and watch events), "
              "verb bytes (kube-scheduler <-> berth)\n");
  int rc = 0;
  for (int nodes : o.sizes) {
    for (int pct : o.percentages) {
      const int sample = FeasibleToFind(nodes, pct);
      std::vector<RunFigures> now_runs, before_runs;
      std::vector<WakeCharge> charges;
      for (int round = 0; round < o.rounds; ++round) {
        if (WakeCharge c = MeasureWakeCharge(o, cpus); c.ok && c.trips > 0) {
          charges.push_back(c);
        } else {
          std::printf("  %d nodes, pct %d: FAILED: the echo process that measures this host's charge for a "
                      "wake-up did not answer\n", nodes, pct);
          rc = 1;
        }
        // Alternated, so a slow moment of the machine does not fall on one binary only.
        if (!o.before.empty()) {
          before_runs.push_back(
              RunOnce(o, o.before, o.before_config.empty() ? o.config : o.before_config, nodes, pct, ""));
        }
        const std::string perf =
            o.perf_out.empty() || round > 0 ? "" : StrCat(o.perf_out, "-", nodes, "-", pct, ".data");
        now_runs.push_back(RunOnce(o, o.berth, o.config, nodes, pct, perf));
      }
      // Each round runs the two binaries back to back, so the ratio within a round is less
      // exposed to the host's drift than the ratio of the two medians (on a shared host one
      // build's runs differ by a third): both are printed.
      std::vector<double> round_ratios;
      for (size_t i = 0; i < now_runs.size() && i < before_runs.size(); ++i) {
        const RunFigures& a = now_runs[i];
        const RunFigures& b = before_runs[i];
        if (a.ok && b.ok && a.pods > 0 && b.pods > 0 && b.cpu_ns > 0) {
          round_ratios.push_back((static_cast<double>(a.cpu_ns) / a.pods) / (static_cast<double>(b.cpu_ns) / b.pods));
        }
      }
      std::sort(round_ratios.begin(), round_ratios.end());
      auto median = [](std::vector<RunFigures>& runs) -> const RunFigures* {
        if (runs.empty()) return nullptr;
        for (const RunFigures& r : runs) {
          if (!r.ok) return &r;
        }
        std::sort(runs.begin(), runs.end(), [](const RunFigures& a, const RunFigures& b) { return a.cpu_ns < b.cpu_ns; });
        return &runs[runs.size() / 2];
      };
      const RunFigures* now = median(now_runs);
      const RunFigures* before = median(before_runs);
      for (const RunFigures* r : {before, now}) {
        if (r != nullptr && (!r->ok || r->bound < r->pods)) {
          std::printf("  %d nodes, pct %d: FAILED (%s): %s\n", nodes, pct, r == now ? "berth" : "before",
                      r->ok ? StrCat(r->bound, " of ", r->pods, " pods bound").c_str() : r->error.c_str());
          rc = 1;
        }
      }
      if (rc != 0) continue;
      const double n = now->pods;
      const double cpu = now->cpu_ns / 1e3 / n, calls = now->api_calls / n,
                   api_kb = (now->api_bytes_sent + now->api_bytes_received) / 1024.0 / n,
                   verb_kb = (now->verb_bytes_sent + now->verb_bytes_received) / 1024.0 / n;
      std::printf("%5d nodes, percentageOfNodesToScore %3d (%4d candidates): CPU %7.1f us/pod, API calls %.2f/pod, "
                  "API %.1f KB/pod, verbs %.1f KB/pod, %.1f filters/pod, %.2f prioritizes/pod, %.2f s",
                  nodes, pct, sample, cpu, calls, api_kb, verb_kb, now->attempts / n, now->prioritizes / n,
                  now->wall_s);
      if (now->syscalls >= 0) std::printf(", syscalls %.1f/pod", now->syscalls / n);
      if (before != nullptr) {
        const double bn = before->pods;
        std::printf("\n%5s  before (same run):%27s CPU %7.1f us/pod (%s), API calls %.2f/pod (%s), API %.1f KB/pod (%s), "
                    "verbs %.1f KB/pod (%s)",
                    "", "", before->cpu_ns / 1e3 / bn, Ratio(cpu, before->cpu_ns / 1e3 / bn).c_str(),
                    before->api_calls / bn, Ratio(calls, before->api_calls / bn).c_str(),
                    (before->api_bytes_sent + before->api_bytes_received) / 1024.0 / bn,
                    Ratio(api_kb, (before->api_bytes_sent + before->api_bytes_received) / 1024.0 / bn).c_str(),
                    (before->verb_bytes_sent + before->verb_bytes_received) / 1024.0 / bn,
                    Ratio(verb_kb, (before->verb_bytes_sent + before->verb_bytes_received) / 1024.0 / bn).c_str());
        if (now->syscalls >= 0 && before->syscalls >= 0) {
          std::printf(", syscalls %.1f/pod (%s)", before->syscalls / bn,
                      Ratio(now->syscalls / n, before->syscalls / bn).c_str());
        }
        if (round_ratios.size() > 1) {
          std::printf("\n%5s  CPU ratio within each round: median %.2fx (%.2fx to %.2fx over %zu rounds)", "",
                      round_ratios[round_ratios.size() / 2], round_ratios.front(), round_ratios.back(),
                      round_ratios.size());
        }
      }
      std::printf("\n");
      std::string calls_detail;
      for (const auto& [kind, count] : now->api_by_kind) StrAppend(&calls_detail, calls_detail.empty() ? "" : ", ", kind, " ", count);
      auto cpu_by_thread = [](const RunFigures& r) { return PerPodByRole(r.cpu_by_role, r.cpu_ns, r.pods, 1e3); };
      const std::string cpu_detail = cpu_by_thread(*now);
      std::printf("         API calls: %s; nudges %d; pods parked %d; watch %.1f KB/pod\n", calls_detail.c_str(),
                  now->nudges, now->parked, now->watch_bytes / 1024.0 / n);
      auto plans = [](const RunFigures& r) {
        return r.plans < 0 ? std::string("not counted")
                           : absl::StrFormat("%.0f in %.1f s, %.1f ms each, %.1f us/pod", r.plans, r.wall_s, r.plan_s * 1e3 / std::max(r.plans, 1.0),
                                             r.plan_s * 1e6 / r.pods);
      };
      std::printf("         admission plans: %s\n", plans(*now).c_str());
      std::printf("         CPU us/pod by thread: %s; not counted above: ETA forecast %.1f, the bench's %d /metrics reads %.1f\n",
                  cpu_detail.c_str(), now->forecast_ns / 1e3 / n, now->probes, now->probe_ns / 1e3 / n);
      auto woken = [](const RunFigures& r) {
        return absl::StrFormat("%.1f a pod (%s)", static_cast<double>(r.switch_ins) / r.pods,
                               PerPodByRole(r.switch_ins_by_role, r.switch_ins, r.pods, 1));
      };
      std::printf("         switch-ins (a thread put on a CPU, most after a sleep): %s\n", woken(*now).c_str());
      auto handlers = [](const RunFigures& r) {
        std::string out;
        for (const char* verb : {"filter", "prioritize", "bind"}) {
          auto it = r.handler_s.find(verb);
          if (it == r.handler_s.end()) continue;
          StrAppend(&out, out.empty() ? "" : ", ", verb, " ", absl::StrFormat("%.1f", it->second * 1e6 / r.pods));
        }
        return out;
      };
      if (!now->handler_s.empty()) {
        std::printf("         wall time in the verbs' handlers, us/pod (decode, decide, encode; a bind's includes its "
                    "wait for the API server): %s\n",
                    handlers(*now).c_str());
      }
      if (now->loop_handoffs > 0) {
        std::printf("         the HTTP loop moved to another thread %.0f times (a bind waited while something came): "
                    "its CPU is then counted under a thread named for a worker\n",
                    now->loop_handoffs);
      }
      if (!charges.empty()) {
        // The echo's CPU per round trip: the median round, and the range over the rounds.
        auto per_trip = [](const WakeCharge& c) { return c.cpu_ns / 1e3 / c.trips; };
        std::sort(charges.begin(), charges.end(),
                  [&](const WakeCharge& a, const WakeCharge& b) { return per_trip(a) < per_trip(b); });
        const WakeCharge& mid = charges[charges.size() / 2];
        std::printf("         this host's charge, same rounds: an echo process answering 1 KB over loopback TCP %s "
                    "used %.1f us of CPU a round trip (%.1f to %.1f over %zu rounds), %.2f switch-ins each\n",
                    o.pace > 0 ? StrCat("at ", o.pace, " a second").c_str() : "back to back", per_trip(mid),
                    per_trip(charges.front()), per_trip(charges.back()), charges.size(),
                    static_cast<double>(mid.switch_ins) / mid.trips);
      }
      auto by_thread = [](const RunFigures& r) { return PerPodByRole(r.syscalls_by_role, r.syscalls, r.pods, 1); };
      if (now->syscalls >= 0) std::printf("         syscalls/pod by thread: %s\n", by_thread(*now).c_str());
      if (o.syscalls && now->syscalls < 0) std::printf("         syscalls: perf could not count them\n");
      if (before != nullptr) {
        std::string bcalls;
        for (const auto& [kind, count] : before->api_by_kind) StrAppend(&bcalls, bcalls.empty() ? "" : ", ", kind, " ", count);
        std::printf("         before: API calls: %s; nudges %d; pods parked %d\n", bcalls.c_str(), before->nudges,
                    before->parked);
        std::printf("         before: CPU us/pod by thread: %s; not counted above: the bench's %d /metrics reads %.1f\n",
                    cpu_by_thread(*before).c_str(), before->probes, before->probe_ns / 1e3 / before->pods);
        std::printf("         before: admission plans: %s\n", plans(*before).c_str());
        std::printf("         before: switch-ins: %s\n", woken(*before).c_str());
        if (!before->handler_s.empty()) std::printf("         before: handlers us/pod: %s\n", handlers(*before).c_str());
        if (before->syscalls >= 0) std::printf("         before: syscalls/pod by thread: %s\n", by_thread(*before).c_str());
      }
      std::fflush(stdout);
    }
  }
  return rc;
}

}  // namespace berth::bench
