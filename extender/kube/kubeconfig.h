#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace berth::extender::kube {

/// How to reach and authenticate to one API server: what a kubeconfig context or the pod's
/// service account resolves to. Files named by a kubeconfig are read at load time, except the
/// token file, which is re-read while berth runs (projected service-account tokens rotate).
struct ClientConfig {
  std::string scheme = "https";  ///< "https" or "http"
  std::string host;              ///< DNS name or IP; an IPv6 address without brackets
  int port = 443;
  std::string base_path;         ///< path prefix of the server URL ("" or e.g. "/k8s/clusters/c1")
  std::string ca_pem;            ///< PEM bundle to verify the server; empty: the system's CAs
  bool insecure_skip_verify = false;
  std::string tls_server_name;   ///< name to verify the server certificate against, if not host
  std::string client_cert_pem;   ///< client certificate authentication (with client_key_pem)
  std::string client_key_pem;
  std::string token;             ///< static bearer token
  std::string token_file;        ///< bearer token file, re-read periodically; wins over `token`
  std::string default_namespace; ///< the context's namespace, or the service account's
  std::string source;            ///< where this came from, for logs ("kubeconfig F, context C")
};

/// Reads a kubeconfig file (YAML or JSON) and resolves `context` (empty: `current-context`) to
/// a ClientConfig: server URL, CA (`certificate-authority-data` or `certificate-authority`),
/// `insecure-skip-tls-verify`, `tls-server-name`, the user's `token`/`tokenFile` or
/// `client-certificate(-data)`/`client-key(-data)`. Relative file paths are resolved against the
/// kubeconfig's directory. Unsupported authentication (`exec`, `auth-provider`, basic auth) is
/// an error that says so. Every error names the file and the field.
///
/// One file only: berth's flag names the kubeconfig, so `$KUBECONFIG` lists of several files
/// (merged by kubectl) are not read here.
absl::StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, std::string_view context = "");

/// LoadKubeconfig on text already read: `path` names the file in errors and its directory
/// resolves relative file paths (referenced files are still read from disk).
absl::StatusOr<ClientConfig> ParseKubeconfig(std::string_view text, const std::string& path,
                                             std::string_view context = "");

/// The parts of an API server URL.
struct ServerUrl {
  std::string scheme;     ///< "https" or "http" (lower case)
  std::string host;       ///< DNS name or IP; an IPv6 address without brackets
  int port = 443;         ///< explicit, or 443 for https and 80 for http
  std::string base_path;  ///< path prefix without trailing slash; "" for none
};

/// Parses a kubeconfig `server` URL: http:// or https://, a DNS name, an IPv4 address or an
/// IPv6 address in brackets (`https://[::1]:6443`), an optional port 1..65535 and an optional
/// path prefix. User information, a query or a fragment is an error.
absl::StatusOr<ServerUrl> ParseServerUrl(std::string_view url);

/// The environment of a pod, as client-go's InClusterConfig reads it.
struct InClusterEnv {
  std::string service_host;  ///< $KUBERNETES_SERVICE_HOST
  std::string service_port;  ///< $KUBERNETES_SERVICE_PORT
  std::string account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

/// The process's environment variables.
InClusterEnv InClusterEnvFromProcess();

/// True when the process runs in a pod (both variables set).
inline bool InCluster(const InClusterEnv& env) {
  return !env.service_host.empty() && !env.service_port.empty();
}

/// The service-account configuration: https://HOST:PORT, `ca.crt`, `token` (as token_file, so
/// it is re-read), `namespace` (optional). Errors name the missing variable or file; a missing
/// variable is FailedPrecondition (not in a cluster), everything else InvalidArgument.
absl::StatusOr<ClientConfig> InClusterConfig(const InClusterEnv& env);

}  // namespace berth::extender::kube
