#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "extender/kube/http_client.h"
#include "extender/kube/kubeconfig.h"

namespace berth::extender::kube {

/// One answer of the API server. A transport failure (refused, reset, timeout, TLS) is not a
/// Response but an Unavailable status from the call.
struct Response {
  int status = 0;
  std::string body;
  /// Seconds from a `Retry-After` header (429, 503), or nullopt.
  std::optional<int> retry_after;

  bool ok() const { return status >= 200 && status < 300; }
};

/// The Kubernetes `Status` an error response carries, read leniently: any body gives at least
/// the HTTP code and some text.
struct ApiStatus {
  int code = 0;
  std::string reason;   ///< NotFound, Conflict, Expired, TooManyRequests, ...
  std::string message;
};
ApiStatus ParseApiStatus(const Response& response);

/// A failed call as an absl::Status that keeps the HTTP code in its message, e.g.
/// "POST /api/v1/namespaces/ml/pods/a/binding: 409 Conflict: pod a is already assigned to node
/// \"n1\"". Codes map to absl codes (404 NotFound, 409 AlreadyExists/Aborted, 403
/// PermissionDenied, 401 Unauthenticated, 429 ResourceExhausted, 410 OutOfRange, others Unknown/
/// Unavailable).
absl::Status ApiError(std::string_view method, std::string_view path, const Response& response);

struct ClientOptions {
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(30);
  /// How often a token file is re-read (projected service-account tokens rotate; client-go
  /// re-reads every minute).
  absl::Duration token_reload = absl::Minutes(1);
  std::string user_agent = "berth";
};

/// A handle to stop a streaming call from another thread.
class StreamHandle {
 public:
  /// Makes the stream's call return soon (its socket is shut down). Idempotent; later streams
  /// attached to this handle stop at once.
  void Stop();
  bool stopped() const { return stopped_.load(); }

 private:
  friend class KubeClient;
  void Attach(ApiConnection* connection);
  void Detach();

  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  ApiConnection* connection_ = nullptr;
};

/// A client of the Kubernetes REST API: TLS verified against the configured CA, bearer token
/// (re-read from its file) or client certificate, JSON only (`Accept: application/json`: berth
/// never asks for protobuf). Unary calls reuse keep-alive connections from a small pool, so
/// concurrent binds do not each pay a TLS handshake; each stream (watch) has its own connection.
/// HTTP/1.1 over berth's own connection (extender/kube/http_client.h). Thread-safe.
class KubeClient {
 public:
  static absl::StatusOr<std::unique_ptr<KubeClient>> Create(ClientConfig config,
                                                            ClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  /// One request. \param path_and_query absolute path under the server's base path, with its
  /// query string. \return the response whatever its status, or Unavailable for a transport
  /// failure.
  absl::StatusOr<Response> Call(std::string_view method, std::string_view path_and_query,
                                std::string_view body = {},
                                std::string_view content_type = "application/json",
                                std::optional<absl::Duration> timeout = std::nullopt);

  /// Streams the body of a GET (a watch) to `on_data` chunk by chunk as it arrives; `on_data`
  /// returns false to stop. \param idle_timeout how long the stream may stay silent before it is
  /// considered dead. \return the response status and, for a non-2xx answer, its body; the call
  /// returns when the server ends the stream, the connection drops (Unavailable), on_data
  /// returns false, or `handle` is stopped (Cancelled).
  absl::StatusOr<Response> Stream(std::string_view path_and_query,
                                  const std::function<bool(std::string_view)>& on_data,
                                  absl::Duration idle_timeout, StreamHandle* handle);

  /// "https://host:port" (for logs and errors).
  const std::string& server() const { return server_; }
  const ClientConfig& config() const { return config_; }

 private:
  KubeClient(ClientConfig config, ClientOptions options);
  absl::Status Init();
  absl::StatusOr<std::unique_ptr<ApiConnection>> NewConnection() const;
  /// An idle kept-alive connection the server has not closed, or a new one.
  absl::StatusOr<std::unique_ptr<ApiConnection>> TakeConnection();
  void ReturnConnection(std::unique_ptr<ApiConnection> connection);
  /// Request line and header fields, blank line included.
  std::string RequestHead(std::string_view method, std::string_view path_and_query,
                          std::string_view body, std::string_view content_type, bool close);
  /// The current bearer token (re-reading the token file when due); empty for none.
  std::string Token();
  std::string FullPath(std::string_view path_and_query) const;

  ClientConfig config_;
  ClientOptions options_;
  std::string server_;
  ApiEndpoint endpoint_;     ///< where to connect, the name to verify, the TLS context
  std::string host_header_;  ///< "name:port"

  absl::Mutex token_mu_;
  std::string token_ ABSL_GUARDED_BY(token_mu_);
  absl::Time token_read_ ABSL_GUARDED_BY(token_mu_) = absl::InfinitePast();

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<ApiConnection>> idle_ ABSL_GUARDED_BY(pool_mu_);
};

/// A time in the API's MicroTime format ("2026-11-21T08:30:00.123456Z").
std::string MicroTime(absl::Time t);

/// Percent-encodes a query parameter value.
std::string UrlEncode(std::string_view value);

}  // namespace berth::extender::kube
