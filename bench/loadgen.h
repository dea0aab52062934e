#pragma once

/// Client side of berth's load generator: a minimal blocking HTTP/1.1 client
/// on POSIX sockets, latency statistics and closed-loop drivers that imitate
/// kube-scheduler calling a scheduler extender over loopback.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::bench {

/// One persistent (keep-alive) HTTP/1.1 connection over IPv4 TCP with
/// TCP_NODELAY set. Not thread-safe: use one instance per thread.
///
/// Each Post writes the whole request with a single sendmsg call and reads
/// exactly one response from an internal read buffer, so responses that
/// arrive split across several reads are reassembled and bytes of different
/// responses are never mixed. When the server closes the connection
/// (`Connection: close`, HTTP/1.0 without keep-alive, or EOF) the next Post
/// reconnects transparently and the reconnect is counted. A request that
/// fails on a reused connection before any response byte arrived (a stale
/// keep-alive connection) is retried once on a fresh connection.
class HttpConnection {
 public:
  HttpConnection();
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  /// Connects to `host` (dotted IPv4 address or a name resolved to IPv4)
  /// on `port`. Closes any previous connection first.
  absl::Status Connect(std::string host, int port);

  /// Sends `POST path` with `body` as `application/json` and reads the
  /// response. Stores the (de-chunked) response body in `*response_body`
  /// when it is not null. Returns the HTTP status code, or an error status
  /// on a transport or protocol failure (the connection is then closed and
  /// the next Post reconnects).
  absl::StatusOr<int> Post(std::string_view path, std::string_view body,
                           std::string* response_body);

  /// Closes the socket; the next Post reconnects.
  void Close();

  /// Whether a socket is currently open.
  bool connected() const { return fd_ >= 0; }

  /// Number of connections opened after the first one (by Post).
  int reconnects() const { return reconnects_; }

  /// Receive and send timeout applied to the socket (default 10 s).
  void set_io_timeout(absl::Duration timeout) { io_timeout_ = timeout; }

 private:
  enum class ReadResult { kOk, kEof, kError };

  absl::Status OpenSocket();
  absl::StatusOr<int> PostOnce(std::string_view path, std::string_view body,
                               std::string* response_body, bool* retryable);
  absl::StatusOr<int> ReadResponse(std::string* response_body, bool* retryable);
  absl::Status ReadChunkedBody(std::string* out);
  absl::Status ReadBodyToEof(std::string* out);
  absl::Status ReadExactly(size_t n, std::string* out);
  /// Ensures at least `n` unread bytes are buffered.
  absl::Status EnsureBuffered(size_t n);
  /// Reads once from the socket, appending to the buffer.
  ReadResult ReadMore();
  absl::Status ReadError(ReadResult r, std::string_view where) const;

  int fd_ = -1;
  std::string host_;
  uint32_t addr_be_ = 0;  ///< Resolved IPv4 address, network byte order.
  int port_ = 0;
  std::string host_header_;
  bool ever_connected_ = false;
  int reconnects_ = 0;
  int64_t requests_on_connection_ = 0;
  absl::Duration io_timeout_ = absl::Seconds(10);

  std::string request_head_;  ///< Reused request line and headers.
  std::string scratch_body_;  ///< Sink for bodies the caller discards.
  std::string buf_;           ///< Read buffer; unread bytes are [begin_, end_).
  size_t begin_ = 0;
  size_t end_ = 0;
  int last_errno_ = 0;
};

/// Latency samples in nanoseconds.
struct LatencyStats {
  std::vector<int64_t> samples_ns;

  LatencyStats() = default;
  /// Reserves room for `expected` samples up front.
  explicit LatencyStats(size_t expected) { samples_ns.reserve(expected); }

  void Reserve(size_t expected) { samples_ns.reserve(expected); }
  void Add(int64_t ns) { samples_ns.push_back(ns); }
  void Merge(const LatencyStats& other);

  /// Nearest-rank percentile, `p` in [0, 100], computed on a sorted copy.
  /// Returns 0 when there are no samples.
  int64_t Percentile(double p) const;
  /// Several nearest-rank percentiles computed with a single sort.
  std::vector<int64_t> Percentiles(const std::vector<double>& ps) const;
  double Mean() const;
  int64_t Count() const { return static_cast<int64_t>(samples_ns.size()); }
  int64_t Max() const;
};

/// Outcome of one measured run. Only the recording window counts toward
/// `requests`, `errors` and `latency`; warm-up errors are reported apart.
struct RunResult {
  /// Latency of every recorded unit (one request, or one sequence of
  /// requests) that completed without a transport error.
  LatencyStats latency;
  /// Units started inside the recording window.
  int64_t requests = 0;
  /// Units that had a transport error, a non-200 status or a failed check.
  int64_t errors = 0;
  /// Errors seen during warm-up (not included in `errors`).
  int64_t warmup_errors = 0;
  /// From the start of the recording window to the last recorded completion.
  double seconds = 0;
  /// Connections reopened during the whole run, warm-up included.
  int reconnects = 0;
  /// Description of the first error, empty when there was none.
  std::string first_error;

  double RequestsPerSecond() const {
    return seconds > 0 ? static_cast<double>(requests) / seconds : 0.0;
  }
};

/// Returns the body of request number `i` (counted from 0, warm-up included)
/// on connection `conn`. The referenced string must stay valid until the
/// request has been sent.
using BodyFn = std::function<const std::string&(int conn, int64_t i)>;

/// Validates a reply; returning false counts the unit as an error.
using CheckFn = std::function<bool(int status, const std::string& body)>;

/// One request of a sequence sent back-to-back on the same connection.
struct RequestStep {
  std::string path;
  BodyFn body_for;
  /// Optional. Without it any status other than 200 is an error.
  CheckFn check;
};

/// Runs `connections` threads, each with its own HttpConnection to
/// 127.0.0.1:`port`, each sending the `steps` in order, back-to-back
/// (closed loop), and timing the whole sequence as one unit. Connections
/// are opened before the clock starts; then every thread warms up for
/// `warmup` without recording and records for `duration`.
RunResult RunSequenceClosedLoop(int port, int connections,
                                const std::vector<RequestStep>& steps,
                                absl::Duration warmup, absl::Duration duration);

/// Closed loop of single POSTs to `path` on `connections` connections.
/// `check`, if given, validates each reply in place of the status-200 test.
RunResult RunClosedLoop(int port, int connections, BodyFn body_for,
                        std::string path, absl::Duration warmup,
                        absl::Duration duration, CheckFn check = nullptr);

/// On one connection, sends A then B back-to-back and records the latency
/// of the pair (as kube-scheduler calls filter then prioritize for one pod).
/// `requests` counts pairs. `check`, if given, validates both replies.
RunResult RunPairClosedLoop(int port, std::string path_a, std::string body_a,
                            std::string path_b, std::string body_b,
                            absl::Duration warmup, absl::Duration duration,
                            CheckFn check = nullptr);

/// Peak resident set size of this process in KiB: getrusage ru_maxrss, or
/// the current size when that is larger (ru_maxrss is updated lazily).
int64_t PeakRssKiB();

/// Current resident set size of this process in KiB (/proc/self/statm),
/// or -1 when it cannot be read.
int64_t CurrentRssKiB();

/// A field of /proc/self/status in KiB (VmRSS, VmHWM), or -1.
int64_t ProcStatusKiB(std::string_view field);

/// Resets the kernel's RSS high-water mark (VmHWM), so it reports the peak from now on.
void ResetPeakRss();

/// CPU time this process has used (user and system), in seconds.
double CpuSeconds();

/// The load averages over 1, 5 and 15 minutes, as /proc/loadavg gives them ("0.52 0.61 0.70").
std::string LoadAverage();

/// "p50 X us p99 Y us, Z req/s, N errors".
std::string Describe(const RunResult& result);

/// Column titles matching FormatRow.
std::string FormatHeader();

/// One fixed-width table row: label, connections, requests, req/s, p50,
/// p90, p99, max (microseconds), errors, reconnects.
std::string FormatRow(std::string_view label, int connections,
                      const RunResult& result);

}  // namespace berth::bench
