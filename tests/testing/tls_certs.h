#pragma once

// TLS material for tests that talk HTTPS to an in-process server (the fake API server): a CA, a
// server certificate for the loopback addresses and a client certificate, generated in process with
// OpenSSL (no `openssl` binary, nothing checked in that could expire).

#include <string>

namespace berth::testing {

/// One CA and the certificates it signed, as files in `dir` and, for what a client needs, as PEM
/// text. All keys are EC P-256, unencrypted PKCS#8 PEM.
struct TlsMaterial {
  std::string dir;               ///< the temporary directory holding the files
  std::string ca_cert_file;      ///< self-signed CA (basicConstraints CA:TRUE)
  std::string server_cert_file;  ///< SAN IP:127.0.0.1, IP:::1, DNS:localhost; serverAuth
  std::string server_key_file;
  std::string client_cert_file;  ///< CN "berth-client", O "berth"; clientAuth
  std::string client_key_file;
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  /// Empty on success; otherwise what failed (the other fields may then be empty).
  std::string error;

  bool ok() const { return error.empty(); }
};

/// A set generated once per test process (thread-safe) and reused; its directory is removed at
/// exit.
const TlsMaterial& SharedTlsMaterial();

/// A fresh set with its own CA (e.g. a CA the servers of SharedTlsMaterial() do not trust). The
/// caller owns the directory; RemoveTlsMaterial deletes it.
TlsMaterial MakeTlsMaterial();

/// Deletes the directory of a set made by MakeTlsMaterial.
void RemoveTlsMaterial(const TlsMaterial& material);

}  // namespace berth::testing
