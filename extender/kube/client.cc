#include "extender/kube/client.h"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "core/strings.h"
#include "extender/config.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace berth::extender::kube {
namespace {

constexpr size_t kMaxIdleConnections = 8;

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

void SetTimeout(httplib::ClientImpl& c, void (httplib::ClientImpl::*setter)(time_t, time_t),
                absl::Duration d) {
  const int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);
  (c.*setter)(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
}

absl::StatusCode CodeForHttp(int status) {
  switch (status) {
    case 400: case 422: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 409: return absl::StatusCode::kAborted;
    case 410: return absl::StatusCode::kOutOfRange;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 500: return absl::StatusCode::kInternal;
    case 502: case 503: case 504: return absl::StatusCode::kUnavailable;
    default: return absl::StatusCode::kUnknown;
  }
}

}  // namespace

ApiStatus ParseApiStatus(const Response& response) {
  ApiStatus s;
  s.code = response.status;
  nlohmann::json j = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (auto it = j.find("reason"); it != j.end() && it->is_string()) s.reason = it->get<std::string>();
    if (auto it = j.find("message"); it != j.end() && it->is_string()) s.message = it->get<std::string>();
    if (auto it = j.find("code"); it != j.end() && it->is_number_integer()) s.code = it->get<int>();
  }
  if (s.message.empty()) {
    // Not a Status (a proxy's HTML page, plain text): keep a bounded excerpt.
    s.message = Trim(response.body.substr(0, 200));
  }
  return s;
}

absl::Status ApiError(std::string_view method, std::string_view path, const Response& response) {
  const ApiStatus s = ParseApiStatus(response);
  std::string text = StrCat(method, " ", path, ": ", response.status);
  if (!s.reason.empty()) StrAppend(&text, " ", s.reason);
  if (!s.message.empty()) StrAppend(&text, ": ", s.message);
  return absl::Status(CodeForHttp(response.status), text);
}

std::string MicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

std::string UrlEncode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// StreamHandle

void StreamHandle::Stop() {
  stopped_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  // ClientImpl::stop() only shuts the socket down while a request is in flight, which is the
  // one thread-safe way to interrupt a blocked read.
  if (client_ != nullptr) client_->stop();
}

void StreamHandle::Attach(httplib::ClientImpl* client) {
  std::lock_guard<std::mutex> lock(mu_);
  client_ = client;
}

void StreamHandle::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  client_ = nullptr;
}

// ---------------------------------------------------------------------------------------------
// KubeClient

struct KubeClient::Tls {
  X509* client_cert = nullptr;
  EVP_PKEY* client_key = nullptr;
  std::vector<X509*> ca;  // the CA bundle; a fresh X509_STORE is built per connection, because
                          // an SSL_CTX takes ownership of the store it is given

  ~Tls() {
    if (client_cert) X509_free(client_cert);
    if (client_key) EVP_PKEY_free(client_key);
    for (X509* c : ca) X509_free(c);
  }
};

namespace {

std::unique_ptr<BIO, decltype(&BIO_free)> MemBio(const std::string& pem) {
  return {BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free};
}

}  // namespace

KubeClient::KubeClient(ClientConfig config, ClientOptions options)
    : config_(std::move(config)), options_(std::move(options)), tls_(std::make_unique<Tls>()) {}

KubeClient::~KubeClient() = default;

absl::StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(ClientConfig config,
                                                               ClientOptions options) {
  std::unique_ptr<KubeClient> client(new KubeClient(std::move(config), std::move(options)));
  if (absl::Status s = client->Init(); !s.ok()) return s;
  return client;
}

absl::Status KubeClient::Init() {
  if (config_.host.empty()) return absl::InvalidArgumentError("API server host is empty");
  if (config_.scheme != "https" && config_.scheme != "http") {
    return absl::InvalidArgumentError(StrCat("API server scheme must be https or http, not '",
                                             config_.scheme, "'"));
  }
  const bool v6 = config_.host.find(':') != std::string::npos;
  server_ = StrCat(config_.scheme, "://", v6 ? "[" : "", config_.host, v6 ? "]" : "", ":",
                   config_.port, config_.base_path);
  connect_host_ = config_.tls_server_name.empty() ? config_.host : config_.tls_server_name;

  if (!config_.client_cert_pem.empty() || !config_.client_key_pem.empty()) {
    auto cert_bio = MemBio(config_.client_cert_pem);
    tls_->client_cert = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
    if (tls_->client_cert == nullptr) {
      return absl::InvalidArgumentError(StrCat(config_.source, ": the client certificate is not a PEM certificate"));
    }
    auto key_bio = MemBio(config_.client_key_pem);
    tls_->client_key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
    if (tls_->client_key == nullptr) {
      return absl::InvalidArgumentError(StrCat(config_.source, ": the client key is not a PEM private key"));
    }
  }
  if (!config_.ca_pem.empty()) {
    auto bio = MemBio(config_.ca_pem);
    while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      tls_->ca.push_back(cert);
    }
    ERR_clear_error();  // the loop ends on "no start line", which is not an error
    if (tls_->ca.empty()) {
      return absl::InvalidArgumentError(StrCat(config_.source, ": the CA data holds no PEM certificate"));
    }
  }
  if (!config_.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadFile(config_.token_file);
    if (!t.ok()) return absl::InvalidArgumentError(StrCat(config_.source, ": bearer token file: ", t.status().message()));
  }
  // A first connection proves the TLS material is usable (e.g. a key that does not match its
  // certificate) before berth reports itself started.
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> first = NewConnection();
  if (!first.ok()) return first.status();
  ReturnConnection(*std::move(first));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> KubeClient::NewConnection() const {
  std::unique_ptr<httplib::ClientImpl> c;
  if (config_.scheme == "https") {
    auto ssl = std::make_unique<httplib::SSLClient>(connect_host_, config_.port, tls_->client_cert,
                                                    tls_->client_key);
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(StrCat(config_.source,
                                               ": the client certificate and key do not form a usable TLS identity"));
    }
    if (!tls_->ca.empty()) {
      X509_STORE* store = X509_STORE_new();
      for (X509* cert : tls_->ca) X509_STORE_add_cert(store, cert);
      ssl->set_ca_cert_store(store);  // the SSL_CTX owns it from here
    }
    ssl->enable_server_certificate_verification(!config_.insecure_skip_verify);
    c = std::move(ssl);
  } else {
    c = std::make_unique<httplib::ClientImpl>(connect_host_, config_.port);
  }
  if (connect_host_ != config_.host) {
    // Verify (and send SNI for) tls-server-name while connecting to the configured address.
    c->set_hostname_addr_map({{connect_host_, config_.host}});
  }
  c->set_keep_alive(true);
  // cpp-httplib writes a request's headers and body separately; with Nagle's algorithm the body
  // would wait for the server's delayed ACK (~40 ms) on every bind.
  c->set_tcp_nodelay(true);
  SetTimeout(*c, &httplib::ClientImpl::set_connection_timeout, options_.connect_timeout);
  SetTimeout(*c, &httplib::ClientImpl::set_read_timeout, options_.request_timeout);
  SetTimeout(*c, &httplib::ClientImpl::set_write_timeout, options_.request_timeout);
  return c;
}

std::unique_ptr<httplib::ClientImpl> KubeClient::TakeConnection() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!idle_.empty()) {
      std::unique_ptr<httplib::ClientImpl> c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> c = NewConnection();
  return c.ok() ? *std::move(c) : nullptr;  // Init() proved it works; failure here is transient
}

void KubeClient::ReturnConnection(std::unique_ptr<httplib::ClientImpl> client) {
  absl::MutexLock lock(&pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(client));
}

std::string KubeClient::Token() {
  if (config_.token_file.empty()) return config_.token;
  absl::MutexLock lock(&token_mu_);
  const absl::Time now = absl::Now();
  if (now - token_read_ >= options_.token_reload) {
    absl::StatusOr<std::string> t = ReadFile(config_.token_file);
    // A failed re-read keeps the last token: the file is replaced atomically by the kubelet,
    // and a transient failure must not drop authentication.
    if (t.ok()) token_ = Trim(*std::move(t));
    token_read_ = now;
  }
  return token_;
}

std::string KubeClient::FullPath(std::string_view path_and_query) const {
  return StrCat(config_.base_path, path_and_query);
}

namespace {

httplib::Headers BaseHeaders(const std::string& token, const std::string& user_agent) {
  httplib::Headers h{{"Accept", "application/json"}, {"User-Agent", user_agent}};
  if (!token.empty()) h.emplace("Authorization", StrCat("Bearer ", token));
  return h;
}

std::optional<int> RetryAfter(const httplib::Response& res) {
  if (!res.has_header("Retry-After")) return std::nullopt;
  const std::string v = res.get_header_value("Retry-After");
  int seconds = 0;
  if (v.empty() || v.size() > 6) return std::nullopt;
  for (char ch : v) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
    seconds = seconds * 10 + (ch - '0');
  }
  return seconds;
}

absl::Status TransportError(std::string_view method, std::string_view what, const std::string& server,
                            httplib::Error error) {
  return absl::UnavailableError(
      StrCat(method, " ", what, ": cannot reach the API server ", server, ": ", httplib::to_string(error)));
}

}  // namespace

absl::StatusOr<Response> KubeClient::Call(std::string_view method, std::string_view path_and_query,
                                          std::string_view body, std::string_view content_type,
                                          std::optional<absl::Duration> timeout) {
  std::unique_ptr<httplib::ClientImpl> c = TakeConnection();
  if (c == nullptr) {
    return absl::UnavailableError(StrCat(method, " ", path_and_query, ": cannot create a connection to ", server_));
  }
  if (timeout) SetTimeout(*c, &httplib::ClientImpl::set_read_timeout, *timeout);
  httplib::Request req;
  req.method = std::string(method);
  req.path = FullPath(path_and_query);
  req.headers = BaseHeaders(Token(), options_.user_agent);
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    req.body = std::string(body);
    req.headers.emplace("Content-Type", std::string(content_type));
  }
  httplib::Result result = c->send(req);
  if (timeout) SetTimeout(*c, &httplib::ClientImpl::set_read_timeout, options_.request_timeout);
  if (!result) return TransportError(method, path_and_query, server_, result.error());
  Response out{.status = result->status, .body = std::move(result->body),
               .retry_after = RetryAfter(*result)};
  ReturnConnection(std::move(c));
  return out;
}

absl::StatusOr<Response> KubeClient::Stream(std::string_view path_and_query,
                                            const std::function<bool(std::string_view)>& on_data,
                                            absl::Duration idle_timeout, StreamHandle* handle) {
  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> made = NewConnection();
  if (!made.ok()) return made.status();
  std::unique_ptr<httplib::ClientImpl> c = *std::move(made);
  c->set_keep_alive(false);
  SetTimeout(*c, &httplib::ClientImpl::set_read_timeout, idle_timeout);

  Response out;
  bool streaming = false;
  httplib::Request req;
  req.method = "GET";
  req.path = FullPath(path_and_query);
  req.headers = BaseHeaders(Token(), options_.user_agent);
  req.response_handler = [&](const httplib::Response& res) {
    out.status = res.status;
    out.retry_after = RetryAfter(res);
    streaming = res.status >= 200 && res.status < 300;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (!streaming) {
      if (out.body.size() < (1u << 20)) out.body.append(data, len);  // an error Status
      return true;
    }
    return on_data(std::string_view(data, len));
  };

  if (handle != nullptr) {
    handle->Attach(c.get());
    if (handle->stopped()) {
      handle->Detach();
      return absl::CancelledError("stream stopped");
    }
  }
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = c->send(req, res, error);
  if (handle != nullptr) handle->Detach();
  if (handle != nullptr && handle->stopped()) return absl::CancelledError("stream stopped");
  if (!sent && error != httplib::Error::Canceled) {
    if (out.status != 0 && !streaming) return out;  // the error body was cut short; keep the code
    return TransportError("GET", path_and_query, server_, error);
  }
  return out;
}

}  // namespace berth::extender::kube
