#include "tests/testing/tls_certs.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/strings.h"

namespace berth::testing {
namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

// The oldest OpenSSL error of this thread, as text (clears the queue).
std::string OpenSslError(const char* what) {
  std::string out = StrCat(what, " failed");
  if (const unsigned long code = ERR_get_error(); code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    StrAppend(&out, ": ", buf);
  }
  ERR_clear_error();
  return out;
}

KeyPtr NewKey(std::string* error) {
  // EVP_EC_gen is a macro over this variadic call; the curve name is read as a char*.
  char curve[] = "P-256";
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve), &EVP_PKEY_free);
  if (!key) *error = OpenSslError("generating an EC P-256 key");
  return key;
}

struct Extension {
  int nid;
  const char* value;
};

struct CertSpec {
  std::vector<std::pair<const char*, std::string>> subject;  // ("CN", "..."), ("O", "...")
  std::vector<Extension> extensions;                         // in the order they are added
};

// A certificate for `key`, signed by `issuer_key` (self-signed when `issuer` is null), valid from
// an hour ago (clock skew) for ten years.
CertPtr NewCert(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                std::string* error) {
  CertPtr cert(X509_new(), &X509_free);
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    *error = OpenSslError("X509_new");
    return {nullptr, &X509_free};
  }
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), &BN_free);
  if (!serial || BN_rand(serial.get(), 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    *error = OpenSslError("setting the serial number");
    return {nullptr, &X509_free};
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    *error = OpenSslError("setting validity and public key");
    return {nullptr, &X509_free};
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& [field, value] : spec.subject) {
    if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                   0) != 1) {
      *error = OpenSslError(StrCat("adding subject ", field).c_str());
      return {nullptr, &X509_free};
    }
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    *error = OpenSslError("setting the issuer");
    return {nullptr, &X509_free};
  }
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, signer, cert.get(), nullptr, nullptr, 0);
  for (const Extension& ext : spec.extensions) {
    X509_EXTENSION* e = X509V3_EXT_nconf_nid(nullptr, &ctx, ext.nid, ext.value);
    if (e == nullptr) {
      *error =
          OpenSslError(StrCat("building extension ", OBJ_nid2sn(ext.nid), "=", ext.value).c_str());
      return {nullptr, &X509_free};
    }
    const int added = X509_add_ext(cert.get(), e, -1);
    X509_EXTENSION_free(e);
    if (added != 1) {
      *error = OpenSslError("adding an extension");
      return {nullptr, &X509_free};
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    *error = OpenSslError("signing the certificate");
    return {nullptr, &X509_free};
  }
  return cert;
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

std::string CertPem(X509* cert, std::string* error) {
  BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    *error = OpenSslError("writing a certificate as PEM");
    return {};
  }
  return BioText(bio.get());
}

std::string KeyPem(EVP_PKEY* key, std::string* error) {
  BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    *error = OpenSslError("writing a private key as PEM");
    return {};
  }
  return BioText(bio.get());
}

bool WriteFile(const std::string& path, const std::string& text, bool secret, std::string* error) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.good()) {
      *error = StrCat("cannot write ", path);
      return false;
    }
  }
  if (secret) ::chmod(path.c_str(), 0600);
  return true;
}

TlsMaterial Generate() {
  TlsMaterial m;
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  std::string templ = (tmp / "berth-tls-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) {
    m.error = StrCat("cannot create a temporary directory from ", templ);
    return m;
  }
  m.dir = templ;

  std::string& err = m.error;
  KeyPtr ca_key = NewKey(&err);
  KeyPtr server_key = ca_key ? NewKey(&err) : KeyPtr(nullptr, &EVP_PKEY_free);
  KeyPtr client_key = server_key ? NewKey(&err) : KeyPtr(nullptr, &EVP_PKEY_free);
  if (!client_key) return m;

  // The subject key identifier goes first: the authority key identifier of a self-signed
  // certificate is read from it.
  const CertSpec ca_spec{{{"CN", "berth-test-ca"}, {"O", "berth"}},
                         {{NID_basic_constraints, "critical,CA:TRUE"},
                          {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
                          {NID_subject_key_identifier, "hash"},
                          {NID_authority_key_identifier, "keyid:always"}}};
  CertPtr ca = NewCert(ca_spec, ca_key.get(), nullptr, ca_key.get(), &err);
  if (!ca) return m;

  const CertSpec server_spec{{{"CN", "berth-test-apiserver"}},
                             {{NID_basic_constraints, "critical,CA:FALSE"},
                              {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                              {NID_ext_key_usage, "serverAuth"},
                              {NID_subject_key_identifier, "hash"},
                              {NID_authority_key_identifier, "keyid:always"},
                              {NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost"}}};
  CertPtr server = NewCert(server_spec, server_key.get(), ca.get(), ca_key.get(), &err);
  if (!server) return m;

  const CertSpec client_spec{{{"CN", "berth-client"}, {"O", "berth"}},
                             {{NID_basic_constraints, "critical,CA:FALSE"},
                              {NID_key_usage, "critical,digitalSignature"},
                              {NID_ext_key_usage, "clientAuth"},
                              {NID_subject_key_identifier, "hash"},
                              {NID_authority_key_identifier, "keyid:always"}}};
  CertPtr client = NewCert(client_spec, client_key.get(), ca.get(), ca_key.get(), &err);
  if (!client) return m;

  m.ca_pem = CertPem(ca.get(), &err);
  const std::string server_pem = CertPem(server.get(), &err);
  const std::string server_key_pem = KeyPem(server_key.get(), &err);
  m.client_cert_pem = CertPem(client.get(), &err);
  m.client_key_pem = KeyPem(client_key.get(), &err);
  if (!err.empty()) return m;

  const std::filesystem::path dir(m.dir);
  m.ca_cert_file = (dir / "ca.crt").string();
  m.server_cert_file = (dir / "server.crt").string();
  m.server_key_file = (dir / "server.key").string();
  m.client_cert_file = (dir / "client.crt").string();
  m.client_key_file = (dir / "client.key").string();
  if (!WriteFile(m.ca_cert_file, m.ca_pem, false, &err) ||
      !WriteFile(m.server_cert_file, server_pem, false, &err) ||
      !WriteFile(m.server_key_file, server_key_pem, true, &err) ||
      !WriteFile(m.client_cert_file, m.client_cert_pem, false, &err) ||
      !WriteFile(m.client_key_file, m.client_key_pem, true, &err)) {
    return m;
  }
  return m;
}

// Owns the shared set; its destructor (at exit) removes the directory.
struct SharedMaterial {
  TlsMaterial material = Generate();
  ~SharedMaterial() { RemoveTlsMaterial(material); }
};

}  // namespace

const TlsMaterial& SharedTlsMaterial() {
  static SharedMaterial shared;  // thread-safe initialisation (C++11 magic statics)
  return shared.material;
}

TlsMaterial MakeTlsMaterial() { return Generate(); }

void RemoveTlsMaterial(const TlsMaterial& material) {
  if (material.dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(material.dir, ec);
}

}  // namespace berth::testing
