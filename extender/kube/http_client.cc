#include "extender/kube/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/strings.h"
#include "extender/wait_escape.h"

namespace berth::extender::kube {
namespace {

constexpr size_t kReadBytes = 16 << 10;
constexpr size_t kMaxHeadBytes = 64 << 10;

std::string OpenSslError() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

bool IsIpAddress(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

int PollMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  const int64_t ms = absl::ToInt64Milliseconds(left + absl::Milliseconds(1) - absl::Nanoseconds(1));
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// A header value without its optional whitespace (RFC 9110), and a status line without its CR.
std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool HasToken(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (EqualsIgnoreCase(TrimOws(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

std::optional<uint64_t> Digits(std::string_view v, size_t max_digits) {
  if (v.empty() || v.size() > max_digits) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// Parses a response head (status line and fields, up to and without the blank line).
absl::StatusOr<ApiResponseHead> ParseHead(std::string_view text) {
  ApiResponseHead head;
  const size_t eol = text.find('\n');
  const std::string_view status_line = TrimOws(text.substr(0, eol));
  // "HTTP/1.1 200 OK"
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ') {
    return absl::DataLossError(StrCat("not an HTTP/1.x status line: \"", status_line.substr(0, 64), "\""));
  }
  const bool http10 = status_line[7] == '0';
  const std::optional<uint64_t> code = Digits(status_line.substr(9, 3), 3);
  if (!code || *code < 100) {
    return absl::DataLossError(StrCat("bad status code in \"", status_line.substr(0, 64), "\""));
  }
  head.status = static_cast<int>(*code);
  head.keep_alive = !http10;
  std::string_view rest = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = TrimOws(line.substr(colon + 1));
    if (EqualsIgnoreCase(name, "Content-Length")) {
      const std::optional<uint64_t> n = Digits(value, 18);
      if (!n || (head.content_length && *head.content_length != *n)) {
        return absl::DataLossError(StrCat("bad Content-Length \"", value.substr(0, 32), "\""));
      }
      head.content_length = n;
    } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
      head.chunked = HasToken(value, "chunked");
    } else if (EqualsIgnoreCase(name, "Connection")) {
      if (HasToken(value, "close")) head.keep_alive = false;
      if (http10 && HasToken(value, "keep-alive")) head.keep_alive = true;
    } else if (EqualsIgnoreCase(name, "Retry-After")) {
      if (const std::optional<uint64_t> s = Digits(value, 6)) head.retry_after = static_cast<int>(*s);
    }
  }
  if (head.chunked) head.content_length.reset();  // RFC 9112 6.3: chunked wins
  return head;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// TLS context

absl::StatusOr<std::shared_ptr<SSL_CTX>> NewApiTlsContext(const std::string& ca_pem,
                                                          bool insecure_skip_verify,
                                                          const std::string& client_cert_pem,
                                                          const std::string& client_key_pem,
                                                          const std::string& source) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError(StrCat("TLS context: ", OpenSslError()));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // A body read to the end of the stream ends where the TCP stream does.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
  // Records are read with as much as the socket holds, not a 5-byte header and then the rest:
  // a watch event (one record, or two) costs one read, not two or four.
  SSL_CTX_set_read_ahead(ctx.get(), 1);
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof(kAlpn));
  SSL_CTX_set_verify(ctx.get(), insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  auto bio_of = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  };
  if (!ca_pem.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    auto bio = bio_of(ca_pem);
    int n = 0;
    while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, cert);
      X509_free(cert);
      ++n;
    }
    ERR_clear_error();  // the loop ends on "no start line", which is not an error
    if (n == 0) return absl::InvalidArgumentError(StrCat(source, ": the CA data holds no PEM certificate"));
  } else if (!insecure_skip_verify) {
    SSL_CTX_set_default_verify_paths(ctx.get());
  }
  if (!client_cert_pem.empty() || !client_key_pem.empty()) {
    auto cert_bio = bio_of(client_cert_pem);
    X509* leaf = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
    if (leaf == nullptr) {
      ERR_clear_error();
      return absl::InvalidArgumentError(StrCat(source, ": the client certificate is not a PEM certificate"));
    }
    const int used = SSL_CTX_use_certificate(ctx.get(), leaf);
    X509_free(leaf);
    // Intermediates after the leaf go with it.
    while (X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
      if (SSL_CTX_add_extra_chain_cert(ctx.get(), extra) != 1) X509_free(extra);
    }
    ERR_clear_error();
    auto key_bio = bio_of(client_key_pem);
    EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
    if (key == nullptr) {
      ERR_clear_error();
      return absl::InvalidArgumentError(StrCat(source, ": the client key is not a PEM private key"));
    }
    const int key_used = SSL_CTX_use_PrivateKey(ctx.get(), key);
    EVP_PKEY_free(key);
    if (used != 1 || key_used != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          StrCat(source, ": the client certificate and key do not form a usable TLS identity"));
    }
  }
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// ApiConnection

absl::StatusOr<std::unique_ptr<ApiConnection>> ApiConnection::Open(const ApiEndpoint& endpoint,
                                                                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string where = StrCat(endpoint.connect_host, ":", endpoint.port);
  // The name lookup may wait on DNS, which no descriptor of ours shows.
  WaitEscape::BeforeBlindWait();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = StrCat(endpoint.port);
  if (int rc = getaddrinfo(endpoint.connect_host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(StrCat("cannot resolve ", endpoint.connect_host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addrs(found, &freeaddrinfo);
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(s, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      rc = WaitEscape::Poll(&p, 1, PollMs(deadline));
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc == 1 && ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : (err != 0 ? err : errno);
        rc = -1;
      }
    }
    if (rc != 0) {
      why = std::strerror(errno);
      ::close(s);
      continue;
    }
    fd = s;
  }
  if (fd < 0) return absl::UnavailableError(StrCat("cannot connect to ", where, ": ", why));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (endpoint.tls == nullptr) return std::unique_ptr<ApiConnection>(new ApiConnection(fd, nullptr));

  SSL* ssl = SSL_new(endpoint.tls.get());
  std::unique_ptr<ApiConnection> c(new ApiConnection(fd, ssl));  // owns fd and ssl from here
  if (ssl == nullptr) return absl::InternalError(StrCat("TLS to ", where, ": ", OpenSslError()));
  SSL_set_fd(ssl, fd);
  const std::string& name = endpoint.server_name;
  if (IsIpAddress(name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, name.c_str());
    SSL_set1_host(ssl, name.c_str());
  }
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl);
    if (rc == 1) break;
    const int err = SSL_get_error(ssl, rc);
    Io io = Io::kError;
    if (err == SSL_ERROR_WANT_READ) io = c->WaitFor(POLLIN, deadline);
    if (err == SSL_ERROR_WANT_WRITE) io = c->WaitFor(POLLOUT, deadline);
    if (io == Io::kOk) continue;
    if (io == Io::kTimeout) return absl::UnavailableError(StrCat("TLS handshake with ", where, ": timed out"));
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return absl::UnavailableError(StrCat("TLS handshake with ", where, ": the server certificate is not trusted: ",
                                           X509_verify_cert_error_string(verify)));
    }
    return absl::UnavailableError(StrCat("TLS handshake with ", where, ": ", OpenSslError()));
  }
  return c;
}

ApiConnection::~ApiConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

void ApiConnection::Interrupt() {
  interrupted_.store(true);
  ::shutdown(fd_, SHUT_RDWR);
}

ApiConnection::Io ApiConnection::WaitFor(short events, absl::Time deadline) {
  for (;;) {
    if (interrupted_.load()) return Io::kError;
    pollfd p{fd_, events, 0};
    const int rc = WaitEscape::Poll(&p, 1, PollMs(deadline));
    if (rc > 0) return Io::kOk;  // readable, writable, or an error the next call reports
    if (rc == 0) return Io::kTimeout;
    if (errno != EINTR) return Io::kError;
  }
}

absl::Status ApiConnection::IoError(Io io, std::string_view what) const {
  switch (io) {
    case Io::kTimeout: return absl::DeadlineExceededError(StrCat(what, ": timed out"));
    case Io::kEof: return absl::UnavailableError(StrCat(what, ": the server closed the connection"));
    default:
      if (interrupted_.load()) return absl::CancelledError(StrCat(what, ": stopped"));
      return absl::UnavailableError(StrCat(what, ": connection failed"));
  }
}

absl::Status ApiConnection::Send(std::string_view head, std::string_view body, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  reusable_ = false;
  if (ssl_ == nullptr) {
    iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                    {const_cast<char*>(body.data()), body.size()}};
    size_t done = 0;
    const size_t total = head.size() + body.size();
    while (done < total) {
      msghdr msg{};
      iovec part[2];
      int count = 0;
      size_t skip = done;
      for (const iovec& v : iov) {
        if (skip >= v.iov_len) {
          skip -= v.iov_len;
          continue;
        }
        part[count++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
        skip = 0;
      }
      msg.msg_iov = part;
      msg.msg_iovlen = static_cast<size_t>(count);
      const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (Io io = WaitFor(POLLOUT, deadline); io != Io::kOk) return IoError(io, "sending the request");
        continue;
      }
      return IoError(Io::kError, "sending the request");
    }
    return absl::OkStatus();
  }
  // One buffer, so a small request goes out as one TLS record.
  std::string joined;
  std::string_view out = head;
  if (!body.empty()) {
    joined.reserve(head.size() + body.size());
    joined.append(head).append(body);
    out = joined;
  }
  while (!out.empty()) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, out.data(), static_cast<int>(std::min<size_t>(out.size(), 1 << 30)));
    if (n > 0) {
      out.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    const int err = SSL_get_error(ssl_, n);
    Io io = Io::kError;
    if (err == SSL_ERROR_WANT_WRITE) io = WaitFor(POLLOUT, deadline);
    if (err == SSL_ERROR_WANT_READ) io = WaitFor(POLLIN, deadline);
    if (io != Io::kOk) return IoError(io, "sending the request");
  }
  return absl::OkStatus();
}

ApiConnection::Io ApiConnection::Fill(absl::Time deadline) {
  if (pos_ == len_) {
    pos_ = len_ = 0;
  } else if (pos_ >= kReadBytes && pos_ * 2 >= len_) {
    std::memmove(in_.get(), in_.get() + pos_, len_ - pos_);
    len_ -= pos_;
    pos_ = 0;
  }
  if (cap_ - len_ < kReadBytes) {
    const size_t cap = std::max(2 * cap_, len_ + kReadBytes);
    std::unique_ptr<char[]> grown(new char[cap]);
    if (len_ > 0) std::memcpy(grown.get(), in_.get(), len_);
    in_ = std::move(grown);
    cap_ = cap;
  }
  char* const at = in_.get() + len_;
  for (;;) {
    if (interrupted_.load()) return Io::kError;
    // The last read took less than it asked for: it emptied the socket. Waiting first saves
    // the read that would only say "nothing yet" (a watch waits like this for every event),
    // unless OpenSSL holds bytes the socket no longer has. A wait that fails leaves the socket
    // as empty as it was, and the flag as it is.
    if (drained_ && !wait_in_reads_ && (ssl_ == nullptr || SSL_has_pending(ssl_) == 0)) {
      if (Io io = WaitFor(POLLIN, deadline); io != Io::kOk) return io;
    }
    drained_ = false;
    if (ssl_ == nullptr) {
      const ssize_t n = ::recv(fd_, at, kReadBytes, 0);
      if (n > 0) {
        len_ += static_cast<size_t>(n);
        drained_ = static_cast<size_t>(n) < kReadBytes;
        return Io::kOk;
      }
      if (n == 0) return interrupted_.load() ? Io::kError : Io::kEof;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // A blocking read that found nothing waited the receive timeout.
        if (wait_in_reads_) return interrupted_.load() ? Io::kError : Io::kTimeout;
        if (Io io = WaitFor(POLLIN, deadline); io != Io::kOk) return io;
        continue;
      }
      return Io::kError;
    }
    ERR_clear_error();
    const int n = SSL_read(ssl_, at, static_cast<int>(kReadBytes));
    if (n > 0) {
      len_ += static_cast<size_t>(n);
      drained_ = static_cast<size_t>(n) < kReadBytes;
      return Io::kOk;
    }
    const int err = SSL_get_error(ssl_, n);
    Io io = Io::kError;
    if (err == SSL_ERROR_ZERO_RETURN) io = Io::kEof;
    if (err == SSL_ERROR_WANT_READ) io = wait_in_reads_ ? Io::kTimeout : WaitFor(POLLIN, deadline);
    if (err == SSL_ERROR_WANT_WRITE) io = WaitFor(POLLOUT, deadline);
    if (err == SSL_ERROR_SYSCALL && n == 0) io = Io::kEof;
    if (io == Io::kOk) continue;
    return io;
  }
}

absl::StatusOr<ApiResponseHead> ApiConnection::ReadHead(absl::Duration timeout) {
  for (;;) {
    size_t scanned = 0;  // bytes of Unread() searched without finding the blank line
    size_t end = std::string_view::npos;
    for (;;) {
      end = Unread().find("\r\n\r\n", scanned > 3 ? scanned - 3 : 0);
      if (end != std::string_view::npos) break;
      if (len_ - pos_ > kMaxHeadBytes) {
        return absl::DataLossError(StrCat("response head over ", kMaxHeadBytes, " bytes"));
      }
      scanned = len_ - pos_;
      const bool nothing_yet = scanned == 0;
      if (Io io = Fill(absl::Now() + timeout); io != Io::kOk) {
        if (io == Io::kEof && nothing_yet && used_) {
          return absl::UnavailableError("reading the response: the server closed the kept-alive connection");
        }
        return IoError(io, "reading the response");
      }
    }
    absl::StatusOr<ApiResponseHead> head = ParseHead(Unread().substr(0, end));
    pos_ += end + 4;
    if (!head.ok()) return head.status();
    // 1xx answers (100 Continue) come before the real one.
    if (head->status >= 100 && head->status < 200) continue;
    return head;
  }
}

absl::Status ApiConnection::ReadBody(const ApiResponseHead& head,
                                     const std::function<bool(std::string_view)>& on_data,
                                     absl::Duration idle_timeout, uint64_t max_bytes) {
  reusable_ = false;
  uint64_t total = 0;
  auto deliver = [&](std::string_view data) -> absl::Status {
    total += data.size();
    if (total > max_bytes) return absl::ResourceExhaustedError(StrCat("response body over ", max_bytes, " bytes"));
    if (!on_data(data)) return absl::CancelledError("stopped by the reader");
    return absl::OkStatus();
  };
  auto more = [&]() -> absl::Status {
    const Io io = Fill(absl::Now() + idle_timeout);
    return io == Io::kOk ? absl::OkStatus() : IoError(io, "reading the response body");
  };
  if (head.status == 204 || head.status == 304) {
    // no body
  } else if (head.chunked) {
    http::ChunkedDecoder decoder;
    for (bool done = false; !done;) {
      size_t consumed = 0;
      std::string_view data;
      switch (decoder.Next(Unread(), &consumed, &data)) {
        case http::ChunkedDecoder::Step::kNeedMore:
          pos_ += consumed;
          if (absl::Status s = more(); !s.ok()) return s;
          break;
        case http::ChunkedDecoder::Step::kData:
          pos_ += consumed + data.size();
          decoder.Took(data.size());
          if (absl::Status s = deliver(data); !s.ok()) return s;
          break;
        case http::ChunkedDecoder::Step::kDone:
          pos_ += consumed;
          done = true;
          break;
        case http::ChunkedDecoder::Step::kError:
          return absl::DataLossError("malformed chunked response body");
      }
    }
  } else if (head.content_length) {
    if (*head.content_length > max_bytes) {
      return absl::ResourceExhaustedError(StrCat("response body of ", *head.content_length, " bytes, over ", max_bytes));
    }
    uint64_t left = *head.content_length;
    while (left > 0) {
      if (pos_ == len_) {
        if (absl::Status s = more(); !s.ok()) return s;
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, len_ - pos_));
      const std::string_view data(in_.get() + pos_, n);
      pos_ += n;
      left -= n;
      if (absl::Status s = deliver(data); !s.ok()) return s;
    }
  } else {
    // Delimited by the end of the connection.
    for (;;) {
      if (pos_ < len_) {
        const std::string_view data = Unread();
        pos_ = len_;
        if (absl::Status s = deliver(data); !s.ok()) return s;
      }
      const Io io = Fill(absl::Now() + idle_timeout);
      if (io == Io::kEof) return absl::OkStatus();
      if (io != Io::kOk) return IoError(io, "reading the response body");
    }
  }
  reusable_ = head.keep_alive && (head.chunked || head.content_length.has_value() ||
                                  head.status == 204 || head.status == 304);
  used_ = true;
  return absl::OkStatus();
}

absl::Status ApiConnection::WaitInReads(absl::Duration idle_timeout) {
  timeval tv{};
  if (idle_timeout != absl::InfiniteDuration() && idle_timeout > absl::ZeroDuration()) {
    const int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(idle_timeout), 1);
    tv.tv_sec = static_cast<time_t>(us / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  }
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    return absl::InternalError(StrCat("SO_RCVTIMEO: ", std::strerror(errno)));
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return absl::InternalError(StrCat("blocking mode: ", std::strerror(errno)));
  }
  wait_in_reads_ = true;
  reusable_ = false;
  return absl::OkStatus();
}

bool ApiConnection::KeptAlive() const {
  if (wait_in_reads_) return false;
  if (!reusable_ || interrupted_.load() || pos_ != len_) return false;
  // Bytes OpenSSL holds, read ahead from the socket or not yet decrypted: something nobody asked
  // for (a close_notify alert, say).
  return ssl_ == nullptr || SSL_has_pending(ssl_) == 0;
}

bool ApiConnection::Reusable() const {
  if (!KeptAlive()) return false;
  // Readable while idle: the server closed its side (or sent what nobody asked for).
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace berth::extender::kube
