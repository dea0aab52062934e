#include "extender/kube/client.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "core/strings.h"
#include "extender/config.h"
#include "nlohmann/json.hpp"

namespace berth::extender::kube {
namespace {

constexpr size_t kMaxIdleConnections = 8;
/// Unary answers larger than this are refused (lists are paged far below it).
constexpr uint64_t kMaxResponseBytes = 1ull << 30;
/// Of an error answer to a stream, this much is kept (a Status is a few hundred bytes).
constexpr uint64_t kMaxStreamErrorBytes = 1 << 20;

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
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
  // Shutting the socket down is the one thread-safe way to interrupt a blocked read.
  if (connection_ != nullptr) connection_->Interrupt();
}

void StreamHandle::Attach(ApiConnection* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  connection_ = connection;
}

void StreamHandle::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  connection_ = nullptr;
}

// ---------------------------------------------------------------------------------------------
// KubeClient

KubeClient::KubeClient(ClientConfig config, ClientOptions options)
    : config_(std::move(config)), options_(std::move(options)) {}

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
  endpoint_.connect_host = config_.host;
  endpoint_.port = config_.port;
  endpoint_.server_name = config_.tls_server_name.empty() ? config_.host : config_.tls_server_name;
  const bool name_v6 = endpoint_.server_name.find(':') != std::string::npos;
  host_header_ = StrCat(name_v6 ? "[" : "", endpoint_.server_name, name_v6 ? "]" : "", ":", config_.port);
  if (config_.scheme == "https") {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> tls =
        NewApiTlsContext(config_.ca_pem, config_.insecure_skip_verify, config_.client_cert_pem,
                         config_.client_key_pem, config_.source);
    if (!tls.ok()) return tls.status();
    endpoint_.tls = *std::move(tls);
  }
  if (!config_.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadFile(config_.token_file);
    if (!t.ok()) return absl::InvalidArgumentError(StrCat(config_.source, ": bearer token file: ", t.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ApiConnection>> KubeClient::NewConnection() const {
  return ApiConnection::Open(endpoint_, options_.connect_timeout);
}

absl::StatusOr<std::unique_ptr<ApiConnection>> KubeClient::TakeConnection() {
  for (;;) {
    std::unique_ptr<ApiConnection> c;
    {
      absl::MutexLock lock(&pool_mu_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (c->Reusable()) return c;
  }
  return NewConnection();
}

void KubeClient::ReturnConnection(std::unique_ptr<ApiConnection> connection) {
  absl::MutexLock lock(&pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
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

std::string KubeClient::RequestHead(std::string_view method, std::string_view path_and_query,
                                    std::string_view body, std::string_view content_type, bool close) {
  const std::string token = Token();
  std::string head;
  head.reserve(160 + config_.base_path.size() + path_and_query.size() + token.size() +
               options_.user_agent.size());
  StrAppend(&head, method, " ", config_.base_path, path_and_query, " HTTP/1.1\r\nHost: ", host_header_,
            "\r\nAccept: application/json\r\nUser-Agent: ", options_.user_agent, "\r\n");
  if (!token.empty()) StrAppend(&head, "Authorization: Bearer ", token, "\r\n");
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    StrAppend(&head, "Content-Type: ", content_type, "\r\nContent-Length: ", body.size(), "\r\n");
  }
  if (close) head += "Connection: close\r\n";
  head += "\r\n";
  return head;
}

namespace {

absl::Status TransportError(std::string_view method, std::string_view what, const std::string& server,
                            const absl::Status& cause) {
  return absl::UnavailableError(
      StrCat(method, " ", what, ": cannot reach the API server ", server, ": ", cause.message()));
}

}  // namespace

absl::StatusOr<Response> KubeClient::Call(std::string_view method, std::string_view path_and_query,
                                          std::string_view body, std::string_view content_type,
                                          std::optional<absl::Duration> timeout) {
  const std::string head = RequestHead(method, path_and_query, body, content_type, /*close=*/false);
  const absl::Duration wait = timeout.value_or(options_.request_timeout);
  // A kept-alive connection the server closed just as it was taken fails before any answer; a
  // read (GET) is then sent again on a new connection. Writes are not: the caller decides.
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<std::unique_ptr<ApiConnection>> made = TakeConnection();
    if (!made.ok()) return TransportError(method, path_and_query, server_, made.status());
    std::unique_ptr<ApiConnection> c = *std::move(made);
    const bool reused = c->used();
    absl::Status sent = c->Send(head, body, options_.request_timeout);
    absl::StatusOr<ApiResponseHead> answer =
        sent.ok() ? c->ReadHead(wait) : absl::StatusOr<ApiResponseHead>(sent);
    if (!answer.ok()) {
      const bool retry = reused && attempt == 0 && (!sent.ok() || method == "GET");
      if (retry) continue;
      return TransportError(method, path_and_query, server_, answer.status());
    }
    Response out{.status = answer->status, .retry_after = answer->retry_after};
    if (answer->content_length) out.body.reserve(static_cast<size_t>(std::min<uint64_t>(*answer->content_length, 64 << 20)));
    absl::Status read = c->ReadBody(
        *answer,
        [&](std::string_view data) {
          out.body.append(data);
          return true;
        },
        wait, kMaxResponseBytes);
    if (!read.ok()) return TransportError(method, path_and_query, server_, read);
    // Whether the socket is still open is asked when the connection is taken again (it may
    // close while idle anyway): here only whether the exchange left it reusable.
    if (c->KeptAlive()) ReturnConnection(std::move(c));
    return out;
  }
}

absl::StatusOr<Response> KubeClient::Stream(std::string_view path_and_query,
                                            const std::function<bool(std::string_view)>& on_data,
                                            absl::Duration idle_timeout, StreamHandle* handle) {
  if (handle != nullptr && handle->stopped()) return absl::CancelledError("stream stopped");
  absl::StatusOr<std::unique_ptr<ApiConnection>> made = NewConnection();
  if (!made.ok()) return TransportError("GET", path_and_query, server_, made.status());
  std::unique_ptr<ApiConnection> c = *std::move(made);
  if (handle != nullptr) {
    handle->Attach(c.get());
    if (handle->stopped()) {
      handle->Detach();
      return absl::CancelledError("stream stopped");
    }
  }
  struct DetachOnExit {
    StreamHandle* h;
    ~DetachOnExit() {
      if (h != nullptr) h->Detach();
    }
  } detach{handle};
  auto stopped = [&] { return handle != nullptr && handle->stopped(); };

  const std::string head = RequestHead("GET", path_and_query, {}, {}, /*close=*/true);
  absl::Status sent = c->Send(head, {}, options_.request_timeout);
  absl::StatusOr<ApiResponseHead> answer =
      sent.ok() ? c->ReadHead(idle_timeout) : absl::StatusOr<ApiResponseHead>(sent);
  if (stopped()) return absl::CancelledError("stream stopped");
  if (!answer.ok()) return TransportError("GET", path_and_query, server_, answer.status());
  Response out{.status = answer->status, .retry_after = answer->retry_after};
  const bool streaming = answer->status >= 200 && answer->status < 300;
  absl::Status read;
  if (streaming) {
    // The stream's reads mostly wait for the next event: in the read itself, one system call
    // per event instead of a poll() and a read. Should the socket refuse the settings, the
    // reads poll as before, which works as well.
    c->WaitInReads(idle_timeout).IgnoreError();
    read = c->ReadBody(*answer, on_data, idle_timeout, UINT64_MAX);
  } else {
    read = c->ReadBody(
        *answer,
        [&](std::string_view data) {
          out.body.append(data);  // an error Status
          return true;
        },
        idle_timeout, kMaxStreamErrorBytes);
  }
  if (stopped()) return absl::CancelledError("stream stopped");
  // The reader stopping the stream, or the server ending it, is a normal end.
  if (read.ok() || absl::IsCancelled(read)) return out;
  if (!streaming) return out;  // the error body was cut short; keep the code
  return TransportError("GET", path_and_query, server_, read);
}

}  // namespace berth::extender::kube
