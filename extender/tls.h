#pragma once

// HTTPS for berth's listeners (`berth serve --tls-cert-file --tls-key-file`): a server
// certificate that is re-read when its files change, and the TLS layer of one accepted
// connection (an http::ConnectionIo for extender/http_server.cc). OpenSSL, TLS 1.2 and 1.3.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/http_io.h"
#include "extender/metrics.h"

using SSL_CTX = struct ssl_ctx_st;

namespace berth::extender {

struct TlsOptions {
  /// PEM: the server certificate, then any intermediates (the chain is sent as it is).
  std::string cert_file;
  /// PEM: its private key (PKCS#8, PKCS#1 or SEC1; not encrypted).
  std::string key_file;
  /// PEM: CAs whose client certificates are accepted where a listener asks for one (mutual
  /// TLS on the verbs port: kube-scheduler's `tlsConfig.certFile`/`keyFile`). Empty: none asked.
  std::string client_ca_file;
  /// The files are looked at (stat) at most this often, when a connection is accepted.
  absl::Duration check_interval = absl::Seconds(1);
};

/// The server side of TLS, shared by both listeners. Thread-safe.
///
/// Reload: when a connection is accepted and `check_interval` has passed since the last look,
/// the files' identity (device, inode, size, modification time; symlinks followed, so a
/// Kubernetes Secret volume's atomic swap counts) is compared with what was loaded. On a
/// change the whole set is loaded again; new connections get the new certificate, open ones
/// keep theirs. A set that does not load (a half-written file, a key that does not match the
/// certificate yet) is logged and counted once per change, and the previous certificate is
/// served until the files change again.
class TlsServerContext {
 public:
  /// Loads the files; an error names the file and what is wrong with it.
  static absl::StatusOr<std::shared_ptr<TlsServerContext>> Create(TlsOptions options,
                                                                  TlsMetrics* metrics = nullptr);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  /// The TLS layer of accepted non-blocking socket `fd` (not owned), server side. With
  /// `verify_client` and a client CA, the handshake fails unless the client presents a
  /// certificate that CA signed. The handshake runs within the first Read calls.
  std::unique_ptr<http::ConnectionIo> NewConnection(int fd, bool verify_client);

  /// Looks at the files now (whatever the interval) and reloads them if they changed.
  /// \return true if a new certificate was taken.
  bool CheckNow();

  bool has_client_ca() const { return !options_.client_ca_file.empty(); }
  const TlsOptions& options() const { return options_; }

 private:
  struct Stamp;
  struct Loaded;
  TlsServerContext(TlsOptions options, TlsMetrics* metrics);
  static absl::StatusOr<Loaded> Load(const TlsOptions& options);
  bool CheckLocked(absl::Time now);

  const TlsOptions options_;
  TlsMetrics* const metrics_;
  std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;          // guarded by mu_
  std::unique_ptr<Stamp> loaded_stamp_;   // guarded by mu_: the files ctx_ came from
  std::unique_ptr<Stamp> failed_stamp_;   // guarded by mu_: files that did not load
  absl::Time last_check_;                 // guarded by mu_
};

}  // namespace berth::extender
