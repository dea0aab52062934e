#include "bench/loadgen.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <latch>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth::bench {
namespace {

/// Largest accepted status line plus headers.
constexpr size_t kMaxHeaderBytes = 64 * 1024;
/// Largest accepted chunk-size or trailer line.
constexpr size_t kMaxLineBytes = 8 * 1024;
/// Largest accepted response body.
constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 30;
/// Initial read buffer size; the buffer grows when a header needs more.
constexpr size_t kInitialBufferBytes = 64 * 1024;
/// Free space below which the read buffer is compacted or grown.
constexpr size_t kMinReadRoom = 4096;

// absl::string_view is a distinct type from std::string_view in this abseil
// build, so the helpers below work on std::string_view directly.

/// ASCII case-insensitive equality.
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) !=
        absl::ascii_tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

/// Removes leading and trailing spaces and tabs.
std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

/// Returns whether the comma-separated header `value` holds `token`,
/// compared case-insensitively.
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    if (EqualsIgnoreCase(TrimSpace(value.substr(0, comma)), token)) {
      return true;
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

/// Parses a non-negative decimal integer that spans all of `s`.
bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 10);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

// ---------------------------------------------------------------------------
// HttpConnection
// ---------------------------------------------------------------------------

HttpConnection::HttpConnection() {
  buf_.resize(kInitialBufferBytes);
  request_head_.reserve(512);
}

HttpConnection::~HttpConnection() { Close(); }

void HttpConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  begin_ = 0;
  end_ = 0;
  requests_on_connection_ = 0;
}

absl::Status HttpConnection::Connect(std::string host, int port) {
  Close();
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port ", port));
  }
  in_addr addr{};
  if (::inet_pton(AF_INET, host.c_str(), &addr) != 1) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || res == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc)));
    }
    addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
  }
  addr_be_ = addr.s_addr;
  port_ = port;
  host_header_ = absl::StrCat(host, ":", port);
  host_ = std::move(host);
  absl::Status status = OpenSocket();
  if (status.ok()) ever_connected_ = true;
  return status;
}

absl::Status HttpConnection::OpenSocket() {
  Close();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, "socket");
  }
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, "setsockopt(TCP_NODELAY)");
  }
  timeval tv = absl::ToTimeval(io_timeout_);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port_));
  sa.sin_addr.s_addr = addr_be_;
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("connect ", host_header_));
  }
  fd_ = fd;
  begin_ = 0;
  end_ = 0;
  requests_on_connection_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<int> HttpConnection::Post(std::string_view path,
                                         std::string_view body,
                                         std::string* response_body) {
  if (begin_ != end_) {
    // Bytes that belong to no request: drop the connection so that they can
    // never be taken for the next response.
    Close();
  }
  bool retryable = false;
  absl::StatusOr<int> result = PostOnce(path, body, response_body, &retryable);
  if (result.ok() || !retryable) return result;
  return PostOnce(path, body, response_body, &retryable);
}

absl::StatusOr<int> HttpConnection::PostOnce(std::string_view path,
                                             std::string_view body,
                                             std::string* response_body,
                                             bool* retryable) {
  *retryable = false;
  if (fd_ < 0) {
    if (host_.empty()) {
      return absl::FailedPreconditionError("Post before Connect");
    }
    if (ever_connected_) ++reconnects_;
    absl::Status status = OpenSocket();
    if (!status.ok()) return status;
    ever_connected_ = true;
  }
  const bool reused = requests_on_connection_ > 0;

  char length[24];
  auto [length_end, ec] =
      std::to_chars(length, length + sizeof(length), body.size());
  (void)ec;
  request_head_.clear();
  request_head_.append("POST ");
  request_head_.append(path);
  request_head_.append(" HTTP/1.1\r\nHost: ");
  request_head_.append(host_header_);
  request_head_.append(
      "\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: ");
  request_head_.append(length, length_end);
  request_head_.append(
      "\r\nContent-Type: application/json\r\n"
      "Accept-Encoding: identity\r\n\r\n");

  iovec iov[2];
  iov[0].iov_base = request_head_.data();
  iov[0].iov_len = request_head_.size();
  iov[1].iov_base = const_cast<char*>(body.data());
  iov[1].iov_len = body.size();
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = body.empty() ? 1 : 2;
  size_t remaining = request_head_.size() + body.size();
  // One sendmsg call carries the whole request; the loop only continues
  // after a partial write (signal or send timeout).
  while (remaining > 0) {
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      Close();
      *retryable = reused && (err == EPIPE || err == ECONNRESET);
      return absl::ErrnoToStatus(err, "send");
    }
    remaining -= static_cast<size_t>(n);
    size_t advance = static_cast<size_t>(n);
    while (advance > 0 && msg.msg_iovlen > 0) {
      if (advance >= msg.msg_iov[0].iov_len) {
        advance -= msg.msg_iov[0].iov_len;
        ++msg.msg_iov;
        --msg.msg_iovlen;
      } else {
        msg.msg_iov[0].iov_base =
            static_cast<char*>(msg.msg_iov[0].iov_base) + advance;
        msg.msg_iov[0].iov_len -= advance;
        advance = 0;
      }
    }
  }
  ++requests_on_connection_;
  bool eof_before_reply = false;
  absl::StatusOr<int> status = ReadResponse(response_body, &eof_before_reply);
  if (!status.ok()) {
    *retryable = reused && eof_before_reply;
    Close();
  }
  return status;
}

HttpConnection::ReadResult HttpConnection::ReadMore() {
  if (begin_ == end_) {
    begin_ = 0;
    end_ = 0;
  }
  if (buf_.size() - end_ < kMinReadRoom) {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < kMinReadRoom) {
      buf_.resize(buf_.size() * 2);
    }
  }
  ssize_t n;
  do {
    n = ::recv(fd_, buf_.data() + end_, buf_.size() - end_, 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    end_ += static_cast<size_t>(n);
    return ReadResult::kOk;
  }
  if (n == 0) return ReadResult::kEof;
  last_errno_ = errno;
  return ReadResult::kError;
}

absl::Status HttpConnection::ReadError(ReadResult r,
                                       std::string_view where) const {
  if (r == ReadResult::kEof) {
    return absl::UnavailableError(absl::StrCat(
        "connection closed by peer while reading ", std::string(where)));
  }
  if (last_errno_ == EAGAIN || last_errno_ == EWOULDBLOCK) {
    return absl::DeadlineExceededError(
        absl::StrCat("timeout while reading ", std::string(where)));
  }
  return absl::ErrnoToStatus(last_errno_,
                             absl::StrCat("recv ", std::string(where)));
}

absl::Status HttpConnection::EnsureBuffered(size_t n) {
  while (end_ - begin_ < n) {
    ReadResult r = ReadMore();
    if (r != ReadResult::kOk) return ReadError(r, "body");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> HttpConnection::ReadResponse(std::string* response_body,
                                                 bool* eof_before_reply) {
  *eof_before_reply = false;
  std::string* out = response_body != nullptr ? response_body : &scratch_body_;
  out->clear();
  bool first_message = true;
  for (;;) {
    // Locate the end of the status line and headers.
    size_t scanned = 0;  // Bytes after begin_ already searched.
    size_t head_len = 0;
    for (;;) {
      std::string_view pending(buf_.data() + begin_, end_ - begin_);
      size_t pos = pending.find("\r\n\r\n", scanned);
      if (pos != std::string_view::npos) {
        head_len = pos + 4;
        break;
      }
      scanned = pending.size() >= 3 ? pending.size() - 3 : 0;
      if (pending.size() > kMaxHeaderBytes) {
        return absl::ResourceExhaustedError("response header too large");
      }
      ReadResult r = ReadMore();
      if (r != ReadResult::kOk) {
        *eof_before_reply =
            first_message && begin_ == end_ &&
            (r == ReadResult::kEof || last_errno_ == ECONNRESET);
        return ReadError(r, "response header");
      }
    }
    std::string_view head(buf_.data() + begin_, head_len - 4);

    // Status line: HTTP/1.x NNN reason
    size_t line_end = head.find("\r\n");
    std::string_view status_line = head.substr(0, line_end);
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." ||
        status_line[8] != ' ' || !absl::ascii_isdigit(status_line[9]) ||
        !absl::ascii_isdigit(status_line[10]) ||
        !absl::ascii_isdigit(status_line[11]) ||
        (status_line.size() > 12 && status_line[12] != ' ')) {
      return absl::DataLossError(absl::StrCat(
          "bad status line: ", std::string(status_line.substr(0, 80))));
    }
    const bool http10 = status_line[7] == '0';
    const int status = (status_line[9] - '0') * 100 +
                       (status_line[10] - '0') * 10 + (status_line[11] - '0');

    bool has_length = false;
    uint64_t content_length = 0;
    bool chunked = false;
    bool close_token = false;
    bool keep_alive_token = false;
    std::string_view rest = line_end == std::string_view::npos
                                ? std::string_view()
                                : head.substr(line_end + 2);
    while (!rest.empty()) {
      size_t eol = rest.find("\r\n");
      std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view()
                                           : rest.substr(eol + 2);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view name = line.substr(0, colon);
      std::string_view value = TrimSpace(line.substr(colon + 1));
      if (EqualsIgnoreCase(name, "content-length")) {
        if (!ParseDecimal(value, &content_length)) {
          return absl::DataLossError(absl::StrCat(
              "bad Content-Length: ", std::string(value.substr(0, 40))));
        }
        has_length = true;
      } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
        if (HasToken(value, "chunked")) chunked = true;
      } else if (EqualsIgnoreCase(name, "connection")) {
        if (HasToken(value, "close")) close_token = true;
        if (HasToken(value, "keep-alive")) keep_alive_token = true;
      }
    }
    begin_ += head_len;

    if (status >= 100 && status < 200 && status != 101) {
      // Interim response: the final one follows on the same connection.
      first_message = false;
      continue;
    }
    bool keep_alive =
        http10 ? (keep_alive_token && !close_token) : !close_token;

    absl::Status body_status;
    if (status == 204 || status == 304) {
      // No body by definition.
    } else if (chunked) {
      body_status = ReadChunkedBody(out);
    } else if (has_length) {
      if (content_length > kMaxBodyBytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("response body too large: ", content_length));
      }
      body_status = ReadExactly(static_cast<size_t>(content_length), out);
    } else {
      body_status = ReadBodyToEof(out);
      keep_alive = false;
    }
    if (!body_status.ok()) return body_status;
    if (!keep_alive) Close();
    return status;
  }
}

absl::Status HttpConnection::ReadExactly(size_t n, std::string* out) {
  const size_t base = out->size();
  out->resize(base + n);
  char* dst = out->data() + base;
  size_t have = std::min(n, end_ - begin_);
  std::memcpy(dst, buf_.data() + begin_, have);
  begin_ += have;
  // The remainder goes straight from the socket into the caller's string.
  while (have < n) {
    ssize_t r = ::recv(fd_, dst + have, n - have, 0);
    if (r > 0) {
      have += static_cast<size_t>(r);
    } else if (r == 0) {
      return ReadError(ReadResult::kEof, "body");
    } else if (errno != EINTR) {
      last_errno_ = errno;
      return ReadError(ReadResult::kError, "body");
    }
  }
  return absl::OkStatus();
}

absl::Status HttpConnection::ReadBodyToEof(std::string* out) {
  for (;;) {
    out->append(buf_.data() + begin_, end_ - begin_);
    begin_ = end_;
    if (out->size() > kMaxBodyBytes) {
      return absl::ResourceExhaustedError("response body too large");
    }
    ReadResult r = ReadMore();
    if (r == ReadResult::kEof) return absl::OkStatus();
    if (r == ReadResult::kError) return ReadError(r, "body");
  }
}

absl::Status HttpConnection::ReadChunkedBody(std::string* out) {
  // Reads one CRLF-terminated line and returns its length (without CRLF);
  // the line starts at begin_.
  auto read_line = [this](size_t* len) -> absl::Status {
    size_t scanned = 0;
    for (;;) {
      std::string_view pending(buf_.data() + begin_, end_ - begin_);
      size_t pos = pending.find("\r\n", scanned);
      if (pos != std::string_view::npos) {
        *len = pos;
        return absl::OkStatus();
      }
      if (pending.size() > kMaxLineBytes) {
        return absl::ResourceExhaustedError("chunk line too long");
      }
      scanned = pending.empty() ? 0 : pending.size() - 1;
      ReadResult r = ReadMore();
      if (r != ReadResult::kOk) return ReadError(r, "chunk");
    }
  };

  for (;;) {
    size_t len = 0;
    if (absl::Status s = read_line(&len); !s.ok()) return s;
    const char* line = buf_.data() + begin_;
    uint64_t size = 0;
    auto [ptr, ec] = std::from_chars(line, line + len, size, 16);
    if (ec != std::errc() ||
        (ptr != line + len && *ptr != ';' && *ptr != ' ' && *ptr != '\t')) {
      return absl::DataLossError(absl::StrCat(
          "bad chunk size: ", std::string(line, std::min<size_t>(len, 40))));
    }
    begin_ += len + 2;
    if (size == 0) {
      // Trailer section ends with an empty line.
      for (;;) {
        if (absl::Status s = read_line(&len); !s.ok()) return s;
        begin_ += len + 2;
        if (len == 0) return absl::OkStatus();
      }
    }
    if (out->size() + size > kMaxBodyBytes) {
      return absl::ResourceExhaustedError("response body too large");
    }
    if (absl::Status s = ReadExactly(static_cast<size_t>(size), out); !s.ok()) {
      return s;
    }
    if (absl::Status s = EnsureBuffered(2); !s.ok()) return s;
    if (buf_[begin_] != '\r' || buf_[begin_ + 1] != '\n') {
      return absl::DataLossError("chunk not followed by CRLF");
    }
    begin_ += 2;
  }
}

// ---------------------------------------------------------------------------
// LatencyStats
// ---------------------------------------------------------------------------

void LatencyStats::Merge(const LatencyStats& other) {
  samples_ns.insert(samples_ns.end(), other.samples_ns.begin(),
                    other.samples_ns.end());
}

std::vector<int64_t> LatencyStats::Percentiles(
    const std::vector<double>& ps) const {
  std::vector<int64_t> result(ps.size(), 0);
  if (samples_ns.empty()) return result;
  std::vector<int64_t> sorted = samples_ns;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  for (size_t k = 0; k < ps.size(); ++k) {
    double p = std::clamp(ps[k], 0.0, 100.0);
    auto rank = static_cast<int64_t>(std::ceil(p / 100.0 * n));
    rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
    result[k] = sorted[static_cast<size_t>(rank - 1)];
  }
  return result;
}

int64_t LatencyStats::Percentile(double p) const { return Percentiles({p})[0]; }

double LatencyStats::Mean() const {
  if (samples_ns.empty()) return 0.0;
  long double sum = 0;
  for (int64_t v : samples_ns) sum += static_cast<long double>(v);
  return static_cast<double>(sum / static_cast<long double>(samples_ns.size()));
}

int64_t LatencyStats::Max() const {
  if (samples_ns.empty()) return 0;
  return *std::max_element(samples_ns.begin(), samples_ns.end());
}

// ---------------------------------------------------------------------------
// Closed-loop drivers
// ---------------------------------------------------------------------------

RunResult RunSequenceClosedLoop(int port, int connections,
                                const std::vector<RequestStep>& steps,
                                absl::Duration warmup,
                                absl::Duration duration) {
  using Clock = std::chrono::steady_clock;
  struct PerThread {
    LatencyStats latency;
    int64_t requests = 0;
    int64_t errors = 0;
    int64_t warmup_errors = 0;
    int reconnects = 0;
    Clock::time_point last_end{};
    std::string first_error;
  };

  RunResult result;
  if (connections <= 0 || steps.empty()) {
    result.first_error = "no connections or no steps";
    result.errors = 1;
    return result;
  }

  // Room for an aggregate 200k units/s, so the vectors rarely grow while
  // recording.
  const double secs = absl::ToDoubleSeconds(duration);
  const size_t expected = static_cast<size_t>(
      std::min(16.0e6, secs * 200000.0 / connections + 1024.0));

  std::vector<PerThread> per(static_cast<size_t>(connections));
  std::latch ready(connections);
  std::latch go(1);
  Clock::time_point record_start;
  Clock::time_point end;

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(connections));
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      PerThread& me = per[static_cast<size_t>(c)];
      me.latency.Reserve(expected);
      HttpConnection conn;
      absl::Status connected = conn.Connect("127.0.0.1", port);
      std::string reply;
      reply.reserve(64 * 1024);
      ready.count_down();
      go.wait();
      if (!connected.ok()) {
        ++me.errors;
        me.first_error = connected.ToString();
        return;
      }
      for (int64_t i = 0;; ++i) {
        const Clock::time_point t0 = Clock::now();
        if (t0 >= end) break;
        const bool record = t0 >= record_start;
        bool ok = true;
        bool transport_error = false;
        std::string error;
        for (const RequestStep& step : steps) {
          const std::string& body = step.body_for(c, i);
          absl::StatusOr<int> status = conn.Post(step.path, body, &reply);
          if (!status.ok()) {
            ok = false;
            transport_error = true;
            error = absl::StrCat(step.path, ": ", status.status().ToString());
            break;
          }
          bool good = step.check ? step.check(*status, reply) : *status == 200;
          if (!good) {
            ok = false;
            error = absl::StrCat(step.path, ": status ", *status, " body ",
                                 reply.substr(0, 200));
            break;
          }
        }
        const Clock::time_point t1 = Clock::now();
        if (record) {
          ++me.requests;
          if (!transport_error) {
            me.latency.Add(
                std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0)
                    .count());
          }
          if (!ok) ++me.errors;
          me.last_end = t1;
        } else if (!ok) {
          ++me.warmup_errors;
        }
        if (!ok && me.first_error.empty()) me.first_error = std::move(error);
        if (transport_error) {
          // Keeps a dead server from turning the loop into a busy spin.
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      me.reconnects = conn.reconnects();
    });
  }

  ready.wait();
  record_start = Clock::now() + absl::ToChronoNanoseconds(warmup);
  end = record_start + absl::ToChronoNanoseconds(duration);
  go.count_down();
  for (std::thread& t : threads) t.join();

  size_t total = 0;
  for (const PerThread& p : per) total += p.latency.samples_ns.size();
  result.latency.Reserve(total);
  Clock::time_point last_end = record_start;
  for (PerThread& p : per) {
    result.latency.Merge(p.latency);
    result.requests += p.requests;
    result.errors += p.errors;
    result.warmup_errors += p.warmup_errors;
    result.reconnects += p.reconnects;
    if (p.requests > 0) last_end = std::max(last_end, p.last_end);
    if (result.first_error.empty()) result.first_error = p.first_error;
  }
  result.seconds =
      result.requests > 0
          ? std::chrono::duration<double>(last_end - record_start).count()
          : secs;
  return result;
}

RunResult RunClosedLoop(int port, int connections, BodyFn body_for,
                        std::string path, absl::Duration warmup,
                        absl::Duration duration, CheckFn check) {
  std::vector<RequestStep> steps(1);
  steps[0].path = std::move(path);
  steps[0].body_for = std::move(body_for);
  steps[0].check = std::move(check);
  return RunSequenceClosedLoop(port, connections, steps, warmup, duration);
}

RunResult RunPairClosedLoop(int port, std::string path_a, std::string body_a,
                            std::string path_b, std::string body_b,
                            absl::Duration warmup, absl::Duration duration,
                            CheckFn check) {
  std::vector<RequestStep> steps(2);
  steps[0].path = std::move(path_a);
  steps[0].body_for = [body = std::move(body_a)](
                          int, int64_t) -> const std::string& { return body; };
  steps[0].check = check;
  steps[1].path = std::move(path_b);
  steps[1].body_for = [body = std::move(body_b)](
                          int, int64_t) -> const std::string& { return body; };
  steps[1].check = std::move(check);
  return RunSequenceClosedLoop(port, 1, steps, warmup, duration);
}

// ---------------------------------------------------------------------------
// Process memory and formatting
// ---------------------------------------------------------------------------

int64_t PeakRssKiB() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  // ru_maxrss is in KiB on Linux. The kernel updates its high-water mark
  // lazily, so the current figure can be slightly above it.
  return std::max(static_cast<int64_t>(usage.ru_maxrss), CurrentRssKiB());
}

int64_t ProcStatusKiB(std::string_view field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) == 0 && line.size() > field.size() &&
        line[field.size()] == ':') {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

int64_t CurrentRssKiB() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size_pages = 0;
  long long resident_pages = 0;
  int n = std::fscanf(f, "%lld %lld", &size_pages, &resident_pages);
  std::fclose(f);
  if (n != 2) return -1;
  long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return -1;
  return static_cast<int64_t>(resident_pages * page / 1024);
}

std::string Describe(const RunResult& result) {
  std::vector<int64_t> p = result.latency.Percentiles({50, 99});
  return absl::StrFormat("p50 %.1f us p99 %.1f us, %.0f req/s, %d errors",
                         static_cast<double>(p[0]) / 1e3,
                         static_cast<double>(p[1]) / 1e3,
                         result.RequestsPerSecond(), result.errors);
}

std::string FormatHeader() {
  return absl::StrFormat("%-32s %5s %10s %10s %9s %9s %9s %9s %7s %5s", "case",
                         "conns", "requests", "req/s", "p50 us", "p90 us",
                         "p99 us", "max us", "errors", "recon");
}

std::string FormatRow(std::string_view label, int connections,
                      const RunResult& result) {
  std::vector<int64_t> p = result.latency.Percentiles({50, 90, 99});
  return absl::StrFormat(
      "%-32s %5d %10d %10.0f %9.1f %9.1f %9.1f %9.1f %7d %5d", label,
      connections, result.requests, result.RequestsPerSecond(),
      static_cast<double>(p[0]) / 1e3, static_cast<double>(p[1]) / 1e3,
      static_cast<double>(p[2]) / 1e3,
      static_cast<double>(result.latency.Max()) / 1e3, result.errors,
      result.reconnects);
}

}  // namespace berth::bench
