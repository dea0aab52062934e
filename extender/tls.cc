#include "extender/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include "core/strings.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

// What OpenSSL's error queue says, oldest first, and the queue emptied.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? std::string("no detail from OpenSSL") : out;
}

// A file that cannot be opened is named with the system's reason, before OpenSSL gives a
// less readable one.
absl::Status Readable(std::string_view role, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(StrCat("no ", role, " file given"));
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        StrCat("cannot read ", role, " file \"", path, "\": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// berth speaks HTTP/1.1 only. A client that offers ALPN (Go offers h2 and http/1.1 for
// https URLs) gets http/1.1; one that offers only other protocols gets no ALPN answer and
// may go on with HTTP/1.1 or close.
int SelectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void* /*arg*/) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

int64_t NotAfterSeconds(SSL_CTX* ctx) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr) return 0;
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

constexpr size_t kRecordBytes = 16384;      // TLS's largest record payload
constexpr size_t kWriteChunkBytes = 65536;  // plaintext taken per Write (bounds held ciphertext)

/// TLS on one accepted socket. Reads go through OpenSSL's socket BIO; writes go to a memory BIO
/// and from there to the socket, so that Write never has to be retried with the same bytes
/// (OpenSSL's rule for a socket BIO) and the HTTP server may stop writing at any point.
class TlsSocketIo final : public http::ConnectionIo {
 public:
  TlsSocketIo(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {
    BIO* rbio = BIO_new_socket(fd, BIO_NOCLOSE);
    wbio_ = BIO_new(BIO_s_mem());
    if (rbio == nullptr || wbio_ == nullptr) {
      if (rbio != nullptr) BIO_free(rbio);
      if (wbio_ != nullptr) BIO_free(wbio_);
      wbio_ = nullptr;
      failed_ = true;
      return;
    }
    SSL_set_bio(ssl_, rbio, wbio_);  // the SSL owns both
    SSL_set_accept_state(ssl_);
  }
  ~TlsSocketIo() override { SSL_free(ssl_); }

  http::IoResult Read(char* buf, size_t len) override {
    if (failed_) return {http::IoResult::kError, 0};
    size_t got = 0;
    bool want_write = false;
    while (got < len && !eof_ && !failed_) {
      ERR_clear_error();
      size_t n = 0;
      const int rc = SSL_read_ex(ssl_, buf + got, len - got, &n);
      if (rc == 1) {
        got += n;
        continue;
      }
      const int err = SSL_get_error(ssl_, rc);
      if (err == SSL_ERROR_WANT_READ) break;
      if (err == SSL_ERROR_WANT_WRITE) {  // not with a memory BIO; handled all the same
        want_write = true;
        break;
      }
      if (err == SSL_ERROR_ZERO_RETURN) {
        eof_ = true;  // close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) the TCP stream's end
      } else {
        failed_ = true;
        if (!SSL_is_init_finished(ssl_)) handshake_failed_ = true;
        ERR_clear_error();
      }
    }
    // Handshake messages and alerts the calls above made.
    const bool sent = SendOut();
    if (got > 0) return {http::IoResult::kOk, got};
    if (failed_) return {http::IoResult::kError, 0};
    if (eof_) return {http::IoResult::kEof, 0};
    if (!sent || want_write) return {http::IoResult::kWantWrite, 0};
    return {http::IoResult::kWantRead, 0};
  }

  http::IoResult Write(const iovec* iov, int count) override {
    if (failed_) return {http::IoResult::kError, 0};
    if (!SendOut()) return {failed_ ? http::IoResult::kError : http::IoResult::kWantWrite, 0};
    if (count <= 0) return {http::IoResult::kOk, 0};
    const char* data = static_cast<const char*>(iov[0].iov_base);
    size_t len = std::min(iov[0].iov_len, kWriteChunkBytes);
    if (count > 1 && iov[0].iov_len < kRecordBytes) {
      // A reply's head and the start of its body in one record.
      thread_local std::array<char, kRecordBytes> staging;
      len = 0;
      for (int i = 0; i < count && len < staging.size(); ++i) {
        const size_t take = std::min(iov[i].iov_len, staging.size() - len);
        std::memcpy(staging.data() + len, iov[i].iov_base, take);
        len += take;
      }
      data = staging.data();
    }
    if (len == 0) return {http::IoResult::kOk, 0};
    ERR_clear_error();
    size_t n = 0;
    if (SSL_write_ex(ssl_, data, len, &n) != 1) {
      ERR_clear_error();
      failed_ = true;
      return {http::IoResult::kError, 0};
    }
    SendOut();  // what the socket does not take now goes before the next Write's bytes
    if (failed_) return {http::IoResult::kError, 0};
    return {http::IoResult::kOk, n};
  }

  void ShutdownWrite() override {
    if (!failed_ && SSL_is_init_finished(ssl_)) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // close_notify
      ERR_clear_error();
      SendOut();
    }
    ::shutdown(fd_, SHUT_WR);
  }

  bool HasPendingOutput() const override {
    return out_off_ < out_.size() || (wbio_ != nullptr && BIO_ctrl_pending(wbio_) > 0);
  }
  bool MoreToRead() const override { return eof_ || failed_ || SSL_has_pending(ssl_) == 1; }
  bool HandshakeFailed() const override { return handshake_failed_; }

 private:
  // Sends what the memory BIO holds. \return true when nothing is left (false: the socket is
  // full, or broken, which sets failed_).
  bool SendOut() {
    if (wbio_ == nullptr) return true;
    if (const size_t avail = BIO_ctrl_pending(wbio_); avail > 0) {
      if (out_off_ == out_.size()) {
        out_.clear();
        out_off_ = 0;
      }
      const size_t old = out_.size();
      out_.resize(old + avail);
      const int n = BIO_read(wbio_, out_.data() + old, static_cast<int>(avail));
      out_.resize(old + static_cast<size_t>(std::max(n, 0)));
    }
    while (out_off_ < out_.size()) {
      const ssize_t n = ::send(fd_, out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
      if (n > 0) {
        out_off_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      failed_ = true;
      return false;
    }
    // All sent: an idle connection keeps no large buffer.
    if (out_.capacity() > kRecordBytes + 1024) {
      std::string().swap(out_);
    } else {
      out_.clear();
    }
    out_off_ = 0;
    return true;
  }

  SSL* ssl_;
  int fd_;
  BIO* wbio_ = nullptr;  // owned by ssl_
  std::string out_;      // ciphertext taken from wbio_ and not sent yet, from out_off_
  size_t out_off_ = 0;
  bool eof_ = false;
  bool failed_ = false;
  bool handshake_failed_ = false;
};

struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  int64_t mtime_ns = 0;
  int error = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp StampOf(const std::string& path) {
  FileStamp s;
  if (path.empty()) return s;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    s.error = errno;
    return s;
  }
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return s;
}

}  // namespace

struct TlsServerContext::Stamp {
  std::array<FileStamp, 3> files;
  bool operator==(const Stamp&) const = default;
  static Stamp Of(const TlsOptions& o) {
    return Stamp{{StampOf(o.cert_file), StampOf(o.key_file), StampOf(o.client_ca_file)}};
  }
};

struct TlsServerContext::Loaded {
  std::shared_ptr<SSL_CTX> ctx;
  int64_t not_after = 0;
};

absl::StatusOr<TlsServerContext::Loaded> TlsServerContext::Load(const TlsOptions& o) {
  if (absl::Status s = Readable("certificate", o.cert_file); !s.ok()) return s;
  if (absl::Status s = Readable("key", o.key_file); !s.ok()) return s;
  if (!o.client_ca_file.empty()) {
    if (absl::Status s = Readable("client CA", o.client_ca_file); !s.ok()) return s;
  }
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (raw == nullptr) return absl::InternalError(StrCat("TLS: cannot make a context: ", OpenSslErrors()));
  Loaded out;
  out.ctx.reset(raw, SSL_CTX_free);
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  // No renegotiation; no session resumption (Go's client keeps no sessions unless asked, and
  // kube-scheduler keeps its connections open); an end of stream without close_notify is an
  // ordinary end (HTTP framing tells complete requests apart).
  SSL_CTX_set_options(raw, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET |
                               SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(raw, 0);
  SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(raw, SSL_MODE_RELEASE_BUFFERS);  // idle connections keep no record buffers
  SSL_CTX_set_alpn_select_cb(raw, SelectAlpn, nullptr);
  // The key first: a certificate set after it only drops a key that does not match it (the
  // check below then says so), where a key set after the certificate fails with OpenSSL's
  // "key values mismatch".
  if (SSL_CTX_use_PrivateKey_file(raw, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InvalidArgumentError(StrCat("key file \"", o.key_file,
                                             "\" holds no usable unencrypted PEM private key: ",
                                             OpenSslErrors()));
  }
  if (SSL_CTX_use_certificate_chain_file(raw, o.cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(StrCat("certificate file \"", o.cert_file,
                                             "\" holds no usable PEM certificate: ", OpenSslErrors()));
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(StrCat("the key in \"", o.key_file,
                                             "\" does not belong to the certificate in \"",
                                             o.cert_file, "\""));
  }
  if (!o.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, o.client_ca_file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(StrCat("client CA file \"", o.client_ca_file,
                                               "\" holds no usable PEM certificate: ", OpenSslErrors()));
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str());
    if (names == nullptr) {
      return absl::InvalidArgumentError(StrCat("client CA file \"", o.client_ca_file,
                                               "\" holds no usable PEM certificate: ", OpenSslErrors()));
    }
    SSL_CTX_set_client_CA_list(raw, names);  // takes ownership
  }
  ERR_clear_error();
  out.not_after = NotAfterSeconds(raw);
  return out;
}

TlsServerContext::TlsServerContext(TlsOptions options, TlsMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

TlsServerContext::~TlsServerContext() = default;

absl::StatusOr<std::shared_ptr<TlsServerContext>> TlsServerContext::Create(TlsOptions options,
                                                                           TlsMetrics* metrics) {
  const Stamp stamp = Stamp::Of(options);
  absl::StatusOr<Loaded> loaded = Load(options);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<TlsServerContext> ctx(new TlsServerContext(std::move(options), metrics));
  ctx->ctx_ = std::move(loaded->ctx);
  ctx->loaded_stamp_ = std::make_unique<Stamp>(stamp);
  ctx->last_check_ = absl::Now();
  if (metrics != nullptr) {
    metrics->enabled = true;
    metrics->not_after_seconds = loaded->not_after;
  }
  if (loaded->not_after != 0 && absl::FromUnixSeconds(loaded->not_after) < absl::Now()) {
    spdlog::warn("TLS: the certificate in {} expired at {}", ctx->options_.cert_file,
                 absl::FormatTime(absl::FromUnixSeconds(loaded->not_after), absl::UTCTimeZone()));
  }
  return ctx;
}

bool TlsServerContext::CheckLocked(absl::Time now) {
  last_check_ = now;
  const Stamp stamp = Stamp::Of(options_);
  if (stamp == *loaded_stamp_) return false;
  if (failed_stamp_ != nullptr && stamp == *failed_stamp_) return false;  // told once already
  absl::StatusOr<Loaded> loaded = Load(options_);
  if (!loaded.ok()) {
    failed_stamp_ = std::make_unique<Stamp>(stamp);
    if (metrics_ != nullptr) ++metrics_->reload_failures;
    spdlog::error("TLS: the changed certificate files do not load; the previous certificate is "
                  "served until they change again: {}",
                  ToStd(loaded.status().message()));
    return false;
  }
  ctx_ = std::move(loaded->ctx);
  *loaded_stamp_ = stamp;
  failed_stamp_.reset();
  if (metrics_ != nullptr) {
    ++metrics_->reloads;
    metrics_->not_after_seconds = loaded->not_after;
  }
  spdlog::info("TLS: certificate reloaded from {} (valid until {})", options_.cert_file,
               absl::FormatTime(absl::FromUnixSeconds(loaded->not_after), absl::UTCTimeZone()));
  return true;
}

bool TlsServerContext::CheckNow() {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckLocked(absl::Now());
}

std::unique_ptr<http::ConnectionIo> TlsServerContext::NewConnection(int fd, bool verify_client) {
  std::shared_ptr<SSL_CTX> ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time now = absl::Now();
    if (now - last_check_ >= options_.check_interval) CheckLocked(now);
    ctx = ctx_;
  }
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx.get());  // holds its own reference to the context
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  if (verify_client && has_client_ca()) {
    SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  } else {
    SSL_set_verify(ssl, SSL_VERIFY_NONE, nullptr);
  }
  return std::make_unique<TlsSocketIo>(ssl, fd);
}

}  // namespace berth::extender
