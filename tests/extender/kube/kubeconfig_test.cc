// Kubeconfig and in-cluster configuration loading: every field berth reads from a kubeconfig,
// relative files, context resolution, server URL forms, the errors for what berth refuses
// (naming the file and the field), and robustness on truncated or mistyped documents.

#include "extender/kube/kubeconfig.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "core/strings.h"
#include "tests/testing/files.h"
#include "tests/testing/text.h"

namespace berth::testing {
namespace {

using extender::kube::ClientConfig;
using extender::kube::InCluster;
using extender::kube::InClusterConfig;
using extender::kube::InClusterEnv;
using extender::kube::InClusterEnvFromProcess;
using extender::kube::LoadKubeconfig;
using extender::kube::ParseKubeconfig;
using extender::kube::ParseServerUrl;
using extender::kube::ServerUrl;

constexpr std::string_view kCaPem =
    "-----BEGIN CERTIFICATE-----\nMIIBcaCertificateForTests\n-----END CERTIFICATE-----\n";
constexpr std::string_view kCertPem =
    "-----BEGIN CERTIFICATE-----\nMIIBclientCertificateForTests\n-----END CERTIFICATE-----\n";
constexpr std::string_view kKeyPem =
    "-----BEGIN EC PRIVATE KEY-----\nMHcclientKeyForTests\n-----END EC PRIVATE KEY-----\n";

std::string B64(std::string_view s) { return absl::Base64Escape(ToAbsl(s)); }


// A kubeconfig with one context "ctx" -> cluster "c1", user "u1"; the cluster and user bodies
// are given as YAML block text indented by four spaces.
std::string Kubeconfig(std::string_view cluster_body, std::string_view user_body,
                       std::string_view extra_top = "") {
  return StrCat(
      "apiVersion: v1\n"
      "kind: Config\n"
      "current-context: ctx\n",
      extra_top,
      "contexts:\n"
      "- name: ctx\n"
      "  context:\n"
      "    cluster: c1\n"
      "    user: u1\n"
      "    namespace: team-a\n"
      "clusters:\n"
      "- name: c1\n"
      "  cluster:\n",
      cluster_body,
      "users:\n"
      "- name: u1\n"
      "  user:\n",
      user_body);
}

constexpr std::string_view kServer = "    server: https://10.0.0.10:6443\n";

// Loads `text` written as `dir/name`.
absl::StatusOr<ClientConfig> LoadText(const TempDir& dir, std::string_view text,
                                      std::string_view context = "",
                                      const std::string& name = "config") {
  return LoadKubeconfig(dir.Write(name, text), context);
}

// The error message of a load that must fail.
std::string LoadError(const TempDir& dir, std::string_view text, std::string_view context = "") {
  absl::StatusOr<ClientConfig> c = LoadText(dir, text, context);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(ToStd(c.status().message()));
}

TEST_CASE("kubeconfig: token user with CA data and current-context", "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.Write(
      "config", Kubeconfig(StrCat(kServer, "    certificate-authority-data: ", B64(kCaPem), "\n"),
                           "    token: abc.def-ghi\n"));
  absl::StatusOr<ClientConfig> c = LoadKubeconfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->scheme == "https");
  CHECK(c->host == "10.0.0.10");
  CHECK(c->port == 6443);
  CHECK(c->base_path.empty());
  CHECK(c->ca_pem == kCaPem);
  CHECK_FALSE(c->insecure_skip_verify);
  CHECK(c->tls_server_name.empty());
  CHECK(c->token == "abc.def-ghi");
  CHECK(c->token_file.empty());
  CHECK(c->client_cert_pem.empty());
  CHECK(c->client_key_pem.empty());
  CHECK(c->default_namespace == "team-a");
  CHECK(c->source == StrCat("kubeconfig ", path, ", context ctx"));
}

TEST_CASE("kubeconfig: tokenFile is resolved against the kubeconfig directory", "[kubeconfig]") {
  TempDir dir;
  SECTION("relative path, kept as a path so the client re-reads it") {
    const std::string token_path = dir.Write("kube/secrets/token", "tok-123\n");
    const std::string path =
        dir.Write("kube/config", Kubeconfig(kServer, "    tokenFile: secrets/token\n"));
    absl::StatusOr<ClientConfig> c = LoadKubeconfig(path);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->token_file == token_path);
    CHECK(std::filesystem::path(c->token_file).is_absolute());
    CHECK(c->token.empty());
  }
  SECTION("absolute path, with a static token too (the file wins in the client)") {
    const std::string token_path = dir.Write("elsewhere/tok", "tok-456");
    absl::StatusOr<ClientConfig> c = LoadText(
        dir, Kubeconfig(kServer, StrCat("    token: static\n    tokenFile: ", token_path, "\n")));
    REQUIRE(c.ok());
    CHECK(c->token_file == token_path);
    CHECK(c->token == "static");
  }
  SECTION("missing file: the error names the kubeconfig, the field and the file") {
    const std::string path = dir.Write("config", Kubeconfig(kServer, "    tokenFile: nope\n"));
    absl::StatusOr<ClientConfig> c = LoadKubeconfig(path);
    REQUIRE_FALSE(c.ok());
    const std::string msg(ToStd(c.status().message()));
    CHECK(Contains(msg, path));
    CHECK(Contains(msg, "users[0].user.tokenFile"));
    CHECK(Contains(msg, (dir.path() / "nope").string()));
  }
  SECTION("empty file") {
    dir.Write("empty-token", " \n");
    const std::string msg = LoadError(dir, Kubeconfig(kServer, "    tokenFile: empty-token\n"));
    CHECK(Contains(msg, "users[0].user.tokenFile"));
    CHECK(Contains(msg, "is empty"));
  }
  SECTION("a directory is not a token file") {
    std::filesystem::create_directories(dir.path() / "adir");
    const std::string msg = LoadError(dir, Kubeconfig(kServer, "    tokenFile: adir\n"));
    CHECK(Contains(msg, "users[0].user.tokenFile"));
    CHECK(Contains(msg, "not a regular file"));
  }
}

TEST_CASE("kubeconfig: client certificate and key from data and from files", "[kubeconfig]") {
  TempDir dir;
  SECTION("base64 data") {
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(kServer, StrCat("    client-certificate-data: ", B64(kCertPem),
                                                 "\n    client-key-data: ", B64(kKeyPem), "\n")));
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->client_cert_pem == kCertPem);
    CHECK(c->client_key_pem == kKeyPem);
    CHECK(c->token.empty());
  }
  SECTION("relative files") {
    dir.Write("pki/client.crt", kCertPem);
    dir.Write("pki/client.key", kKeyPem);
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(kServer,
                                 "    client-certificate: pki/client.crt\n"
                                 "    client-key: pki/client.key\n"));
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->client_cert_pem == kCertPem);
    CHECK(c->client_key_pem == kKeyPem);
  }
  SECTION("data wins over a file") {
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(kServer, StrCat("    client-certificate-data: ", B64(kCertPem),
                                                 "\n    client-certificate: /nonexistent/x.crt\n"
                                                 "    client-key-data: ",
                                                 B64(kKeyPem), "\n")));
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->client_cert_pem == kCertPem);
  }
  SECTION("a certificate without a key") {
    const std::string msg = LoadError(
        dir, Kubeconfig(kServer, StrCat("    client-certificate-data: ", B64(kCertPem), "\n")));
    CHECK(Contains(msg, "users[0].user"));
    CHECK(Contains(msg, "client-certificate without client-key"));
  }
  SECTION("a key without a certificate") {
    const std::string msg =
        LoadError(dir, Kubeconfig(kServer, StrCat("    client-key-data: ", B64(kKeyPem), "\n")));
    CHECK(Contains(msg, "client-key without client-certificate"));
  }
  SECTION("unreadable key file") {
    dir.Write("client.crt", kCertPem);
    const std::string msg = LoadError(
        dir, Kubeconfig(kServer, "    client-certificate: client.crt\n    client-key: gone.key\n"));
    CHECK(Contains(msg, (dir.path() / "config").string()));
    CHECK(Contains(msg, "users[0].user.client-key"));
    CHECK(Contains(msg, (dir.path() / "gone.key").string()));
  }
  SECTION("key data that is not PEM: the field is named, the content is not quoted") {
    const std::string msg = LoadError(
        dir, Kubeconfig(kServer, StrCat("    client-certificate-data: ", B64(kCertPem),
                                        "\n    client-key-data: ", B64("secret-material"), "\n")));
    CHECK(Contains(msg, "users[0].user.client-key-data"));
    CHECK(Contains(msg, "PEM"));
    CHECK_FALSE(Contains(msg, "secret-material"));
  }
  SECTION("bad base64 names the field") {
    const std::string msg =
        LoadError(dir, Kubeconfig(kServer,
                                  "    client-certificate-data: '***not base64***'\n"
                                  "    client-key-data: abc\n"));
    CHECK(Contains(msg, "users[0].user.client-certificate-data"));
    CHECK(Contains(msg, "base64"));
  }
}

TEST_CASE("kubeconfig: certificate authority from data or from a file", "[kubeconfig]") {
  TempDir dir;
  SECTION("file, relative to the kubeconfig") {
    dir.Write("ca/ca.crt", kCaPem);
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(StrCat(kServer, "    certificate-authority: ca/ca.crt\n"), ""));
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->ca_pem == kCaPem);
  }
  SECTION("data wins over the file") {
    dir.Write("other.crt", "-----BEGIN CERTIFICATE-----\nother\n-----END CERTIFICATE-----\n");
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(StrCat(kServer, "    certificate-authority: other.crt\n",
                                        "    certificate-authority-data: ", B64(kCaPem), "\n"),
                                 ""));
    REQUIRE(c.ok());
    CHECK(c->ca_pem == kCaPem);
  }
  SECTION("base64 folded over several lines") {
    const std::string b64 = B64(kCaPem);
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(StrCat(kServer, "    certificate-authority-data: >-\n      ",
                                        b64.substr(0, 20), "\n      ", b64.substr(20), "\n"),
                                 ""));
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->ca_pem == kCaPem);
  }
  SECTION("missing file") {
    const std::string msg =
        LoadError(dir, Kubeconfig(StrCat(kServer, "    certificate-authority: nope.crt\n"), ""));
    CHECK(Contains(msg, "clusters[0].cluster.certificate-authority"));
    CHECK(Contains(msg, (dir.path() / "nope.crt").string()));
  }
  SECTION("bad base64") {
    const std::string msg =
        LoadError(dir, Kubeconfig(StrCat(kServer, "    certificate-authority-data: '%%%'\n"), ""));
    CHECK(Contains(msg, "clusters[0].cluster.certificate-authority-data: invalid base64"));
  }
  SECTION("PEM text pasted where base64 belongs") {
    const std::string msg = LoadError(
        dir,
        Kubeconfig(StrCat(kServer, "    certificate-authority-data: '-----BEGIN CERT'\n"), ""));
    CHECK(Contains(msg, "certificate-authority-data"));
  }
}

TEST_CASE("kubeconfig: insecure-skip-tls-verify, tls-server-name and proxy-url", "[kubeconfig]") {
  TempDir dir;
  SECTION("insecure") {
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(StrCat(kServer, "    insecure-skip-tls-verify: true\n"), ""));
    REQUIRE(c.ok());
    CHECK(c->insecure_skip_verify);
    CHECK(c->ca_pem.empty());
  }
  SECTION("insecure: false") {
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig(StrCat(kServer, "    insecure-skip-tls-verify: false\n"), ""));
    REQUIRE(c.ok());
    CHECK_FALSE(c->insecure_skip_verify);
  }
  SECTION("insecure with a CA is contradictory") {
    const std::string msg =
        LoadError(dir, Kubeconfig(StrCat(kServer, "    insecure-skip-tls-verify: true\n",
                                         "    certificate-authority-data: ", B64(kCaPem), "\n"),
                                  ""));
    CHECK(Contains(msg, "clusters[0].cluster.insecure-skip-tls-verify"));
  }
  SECTION("not a boolean") {
    const std::string msg =
        LoadError(dir, Kubeconfig(StrCat(kServer, "    insecure-skip-tls-verify: maybe\n"), ""));
    CHECK(Contains(msg, "clusters[0].cluster.insecure-skip-tls-verify: expected true or false"));
  }
  SECTION("tls-server-name") {
    absl::StatusOr<ClientConfig> c = LoadText(
        dir, Kubeconfig(StrCat(kServer, "    tls-server-name: kubernetes.default.svc\n"), ""));
    REQUIRE(c.ok());
    CHECK(c->tls_server_name == "kubernetes.default.svc");
  }
  SECTION("proxy-url is refused and says so") {
    const std::string msg =
        LoadError(dir, Kubeconfig(StrCat(kServer, "    proxy-url: http://proxy:3128\n"), ""));
    CHECK(Contains(msg, "clusters[0].cluster.proxy-url"));
    CHECK(Contains(msg, "not supported"));
  }
}

// Three contexts over two clusters and two users.
constexpr std::string_view kMultiContext = R"(apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: dev-cluster, user: dev-user, namespace: dev}
- name: prod
  context: {cluster: prod-cluster, user: prod-user}
- name: dangling
  context: {cluster: nowhere, user: dev-user}
- name: no-user
  context: {cluster: dev-cluster, user: ghost}
clusters:
- name: dev-cluster
  cluster: {server: "https://dev.example.com"}
- name: prod-cluster
  cluster: {server: "https://prod.example.com:8443/k8s/clusters/c-1/"}
users:
- name: dev-user
  user: {token: dev-token}
- name: prod-user
  user: {token: prod-token}
- name: sso-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: some-login-helper
)";

TEST_CASE("kubeconfig: an explicit context wins over current-context", "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.Write("config", kMultiContext);
  absl::StatusOr<ClientConfig> dev = LoadKubeconfig(path);
  REQUIRE(dev.ok());
  CHECK(dev->host == "dev.example.com");
  CHECK(dev->port == 443);
  CHECK(dev->token == "dev-token");
  CHECK(dev->default_namespace == "dev");
  CHECK(dev->source == StrCat("kubeconfig ", path, ", context dev"));

  absl::StatusOr<ClientConfig> prod = LoadKubeconfig(path, "prod");
  INFO(prod.status().ToString());
  REQUIRE(prod.ok());
  CHECK(prod->host == "prod.example.com");
  CHECK(prod->port == 8443);
  CHECK(prod->base_path == "/k8s/clusters/c-1");
  CHECK(prod->token == "prod-token");
  CHECK(prod->default_namespace.empty());
  CHECK(prod->source == StrCat("kubeconfig ", path, ", context prod"));
}

TEST_CASE("kubeconfig: a missing context, cluster or user is named", "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.Write("config", kMultiContext);
  SECTION("context") {
    absl::StatusOr<ClientConfig> c = LoadKubeconfig(path, "staging");
    REQUIRE_FALSE(c.ok());
    const std::string msg(ToStd(c.status().message()));
    CHECK(Contains(msg, path));
    CHECK(Contains(msg, "context \"staging\""));
    CHECK(Contains(msg, "not found in contexts"));
    CHECK(Contains(msg, "\"prod\""));
  }
  SECTION("current-context names a missing context") {
    const std::string msg = LoadError(
        dir,
        "current-context: other\ncontexts:\n- name: ctx\n  context: {cluster: c1, user: u1}\n");
    CHECK(
        Contains(msg, "context \"other\" (current-context) not found in contexts (have: \"ctx\")"));
  }
  SECTION("cluster") {
    absl::StatusOr<ClientConfig> c = LoadKubeconfig(path, "dangling");
    REQUIRE_FALSE(c.ok());
    const std::string msg(ToStd(c.status().message()));
    CHECK(Contains(msg, "contexts[2].context.cluster"));
    CHECK(Contains(msg, "cluster \"nowhere\" of context \"dangling\" not found in clusters"));
  }
  SECTION("user") {
    absl::StatusOr<ClientConfig> c = LoadKubeconfig(path, "no-user");
    REQUIRE_FALSE(c.ok());
    const std::string msg(ToStd(c.status().message()));
    CHECK(Contains(msg, "contexts[3].context.user"));
    CHECK(Contains(msg, "user \"ghost\" of context \"no-user\" not found in users"));
  }
  SECTION("no context given and no current-context") {
    const std::string msg =
        LoadError(dir, "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n");
    CHECK(Contains(msg, "current-context is not set"));
  }
  SECTION("a context without a user") {
    const std::string msg =
        LoadError(dir,
                  "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
                  "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n");
    CHECK(Contains(msg, "contexts[0].context.user"));
    CHECK(Contains(msg, "names no user"));
  }
  SECTION("a context whose namespace is not a name") {
    const std::string msg =
        LoadError(dir,
                  "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u, "
                  "namespace: Bad_NS}\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
                  "users:\n- name: u\n  user: {}\n");
    CHECK(Contains(msg, "contexts[0].context.namespace"));
  }
  SECTION("two clusters with the same name") {
    const std::string msg =
        LoadError(dir, StrCat(Kubeconfig(kServer, "    token: t\n"),
                              "clusters:\n- name: c1\n  cluster: {server: 'https://a'}\n"));
    CHECK(Contains(msg, "clusters: duplicate key"));
    const std::string msg2 =
        LoadError(dir,
                  "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
                  "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
                  "- name: c\n  cluster: {server: 'https://g'}\nusers:\n- name: u\n  user: {}\n");
    CHECK(Contains(msg2, "clusters[1]: a second entry named \"c\" (first: clusters[0].cluster)"));
  }
}

TEST_CASE("kubeconfig: unsupported authentication is refused with a hint", "[kubeconfig]") {
  TempDir dir;
  const std::string hint = "use a token or a client certificate";
  SECTION("exec") {
    const std::string msg = LoadError(
        dir, Kubeconfig(kServer, "    exec:\n      command: aws\n      args: [eks, get-token]\n"));
    CHECK(Contains(msg, "users[0].user.exec"));
    CHECK(Contains(msg, "not supported by berth"));
    CHECK(Contains(msg, hint));
  }
  SECTION("auth-provider") {
    const std::string msg = LoadError(
        dir, Kubeconfig(kServer, "    auth-provider:\n      name: oidc\n      config: {}\n"));
    CHECK(Contains(msg, "users[0].user.auth-provider"));
    CHECK(Contains(msg, "not supported by berth"));
    CHECK(Contains(msg, hint));
  }
  SECTION("basic authentication") {
    const std::string msg =
        LoadError(dir, Kubeconfig(kServer, "    username: admin\n    password: hunter2\n"));
    CHECK(Contains(msg, "users[0].user.username"));
    CHECK(Contains(msg, "not supported by berth"));
    CHECK_FALSE(Contains(msg, "hunter2"));
  }
  SECTION("impersonation") {
    const std::string msg = LoadError(dir, Kubeconfig(kServer, "    token: t\n    as: root\n"));
    CHECK(Contains(msg, "users[0].user.as: impersonation is not supported"));
  }
  SECTION("an exec user the context does not use is fine") {
    TempDir d2;
    const std::string path = d2.Write("config", kMultiContext);
    CHECK(LoadKubeconfig(path, "prod").ok());
  }
  SECTION("a user without credentials is anonymous") {
    absl::StatusOr<ClientConfig> c = LoadText(dir, Kubeconfig(kServer, "    {}\n"));
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->token.empty());
    CHECK(c->token_file.empty());
    CHECK(c->client_cert_pem.empty());
  }
  SECTION("a null user is anonymous too") {
    const std::string text = StrCat(Kubeconfig(kServer, ""), "    \n");
    absl::StatusOr<ClientConfig> c = LoadText(dir, text);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->token.empty());
  }
}

TEST_CASE("ParseServerUrl: accepted forms", "[kubeconfig]") {
  struct Case {
    std::string_view url;
    std::string_view scheme;
    std::string_view host;
    int port;
    std::string_view base_path;
  };
  const Case cases[] = {
      {"https://10.0.0.10:6443", "https", "10.0.0.10", 6443, ""},
      {"https://10.0.0.10", "https", "10.0.0.10", 443, ""},
      {"http://10.0.0.10", "http", "10.0.0.10", 80, ""},
      {"http://localhost:8001/", "http", "localhost", 8001, ""},
      {"HTTPS://api.example.com", "https", "api.example.com", 443, ""},
      {"https://api.my-cluster.example.com:443/", "https", "api.my-cluster.example.com", 443, ""},
      {"https://[::1]:6443", "https", "::1", 6443, ""},
      {"https://[fd00:10:96::1]", "https", "fd00:10:96::1", 443, ""},
      {"http://[2001:db8::7]/prefix", "http", "2001:db8::7", 80, "/prefix"},
      {"https://rancher.example.com/k8s/clusters/c-m-abc//", "https", "rancher.example.com", 443,
       "/k8s/clusters/c-m-abc"},
      {"https://h:1", "https", "h", 1, ""},
      {"https://h:65535/a/b", "https", "h", 65535, "/a/b"},
  };
  for (const Case& c : cases) {
    INFO(c.url);
    absl::StatusOr<ServerUrl> u = ParseServerUrl(c.url);
    INFO(u.status().ToString());
    REQUIRE(u.ok());
    CHECK(u->scheme == c.scheme);
    CHECK(u->host == c.host);
    CHECK(u->port == c.port);
    CHECK(u->base_path == c.base_path);
  }
}

TEST_CASE("ParseServerUrl: rejected forms say why", "[kubeconfig]") {
  struct Case {
    std::string_view url;
    std::string_view why;
  };
  const Case cases[] = {
      {"", "expected http:// or https://"},
      {"10.0.0.10:6443", "expected http:// or https://"},
      {"ftp://h", "expected http or https"},
      {"https://", "missing host"},
      {"https:///path", "missing host"},
      {"https://:6443", "missing host"},
      {"https://h:", "expected a number 1..65535"},
      {"https://h:0", "expected a number 1..65535"},
      {"https://h:65536", "expected a number 1..65535"},
      {"https://h:-1", "expected a number 1..65535"},
      {"https://h:64x", "expected a number 1..65535"},
      {"https://::1:6443", "must be in brackets"},
      {"https://[::1", "without ']'"},
      {"https://[::1]x", "after ']'"},
      {"https://[not-ipv6]:443", "invalid IPv6 address"},
      {"https://300.1.1.1", "invalid IPv4 address"},
      {"https://user:pw@h", "user information"},
      {"https://h/p?x=1", "query or fragment"},
      {"https://h#frag", "query or fragment"},
      {"https://h st", "space or a control character"},
      {"https://h!x", "invalid character"},
  };
  for (const Case& c : cases) {
    INFO(c.url);
    absl::StatusOr<ServerUrl> u = ParseServerUrl(c.url);
    REQUIRE_FALSE(u.ok());
    INFO(u.status().message());
    CHECK(Contains(ToStd(u.status().message()), c.why));
  }
}

TEST_CASE("kubeconfig: the server URL is required and checked", "[kubeconfig]") {
  TempDir dir;
  SECTION("IPv6 server") {
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig("    server: 'https://[fd00::10]:6443'\n", ""));
    REQUIRE(c.ok());
    CHECK(c->host == "fd00::10");
    CHECK(c->port == 6443);
  }
  SECTION("http server") {
    absl::StatusOr<ClientConfig> c =
        LoadText(dir, Kubeconfig("    server: http://127.0.0.1:8001/api-proxy/\n", ""));
    REQUIRE(c.ok());
    CHECK(c->scheme == "http");
    CHECK(c->port == 8001);
    CHECK(c->base_path == "/api-proxy");
  }
  SECTION("bad URL") {
    const std::string msg = LoadError(dir, Kubeconfig("    server: https://h:99999\n", ""));
    CHECK(Contains(msg, "clusters[0].cluster.server: invalid server URL"));
  }
  SECTION("missing") {
    const std::string msg = LoadError(dir, Kubeconfig("    insecure-skip-tls-verify: true\n", ""));
    CHECK(Contains(msg, "clusters[0].cluster.server: required"));
  }
}

TEST_CASE("kubeconfig: a YAML syntax error names the line and column", "[kubeconfig]") {
  TempDir dir;
  const std::string path =
      dir.Write("config", "apiVersion: v1\nclusters:\n- name: c1\n  cluster: {server: x\n");
  absl::StatusOr<ClientConfig> c = LoadKubeconfig(path);
  REQUIRE_FALSE(c.ok());
  const std::string msg(ToStd(c.status().message()));
  INFO(msg);
  CHECK(Contains(msg, path));
  CHECK(Contains(msg, "invalid YAML"));
  CHECK(Contains(msg, "line 5,"));
  CHECK(Contains(msg, "column "));

  const std::string msg2 = LoadError(dir, "a: 1\nb: c: d\n");
  CHECK(Contains(msg2, "line 2, column 5"));
}

TEST_CASE("kubeconfig: a JSON kubeconfig", "[kubeconfig]") {
  TempDir dir;
  const std::string json = StrCat(R"({
  "apiVersion": "v1",
  "kind": "Config",
  "current-context": "kind-dev",
  "contexts": [{"name": "kind-dev",
                "context": {"cluster": "kind", "user": "admin", "namespace": "ml"}}],
  "clusters": [{"name": "kind", "cluster": {"server": "https://127.0.0.1:41235",
                 "certificate-authority-data": ")",
                                  B64(kCaPem), R"(", "insecure-skip-tls-verify": false}}],
  "users": [{"name": "admin", "user": {"client-certificate-data": ")",
                                  B64(kCertPem), R"(", "client-key-data": ")", B64(kKeyPem),
                                  R"("}}]
})");
  absl::StatusOr<ClientConfig> c = LoadText(dir, json, "", "config.json");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->host == "127.0.0.1");
  CHECK(c->port == 41235);
  CHECK(c->ca_pem == kCaPem);
  CHECK(c->client_cert_pem == kCertPem);
  CHECK(c->client_key_pem == kKeyPem);
  CHECK(c->default_namespace == "ml");
}

TEST_CASE("kubeconfig: wrong node types name the field", "[kubeconfig]") {
  TempDir dir;
  struct Case {
    std::string text;
    std::string_view want;
  };
  const std::string ctx =
      "current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c1, "
      "user: u1}\n";
  const std::string cluster = "clusters:\n- name: c1\n  cluster: {server: 'https://h'}\n";
  const std::string user = "users:\n- name: u1\n  user: {token: t}\n";
  const Case cases[] = {
      {"[1, 2]", "expected a mapping"},
      {"just a string", "expected a mapping"},
      {StrCat(ctx, "clusters: 5\n", user), "clusters: expected a list, got a scalar"},
      {StrCat(ctx, cluster, "users: [1, 2]\n"), "users[0]: expected a mapping with name and user"},
      {StrCat(ctx, cluster, "users: {u1: {}}\n"), "users: expected a list, got a mapping"},
      {StrCat(ctx, "clusters:\n- name: c1\n  cluster: {server: [a]}\n", user),
       "clusters[0].cluster.server: expected a string, got a list"},
      {StrCat(ctx, "clusters:\n- name: c1\n  cluster: [server]\n", user),
       "clusters[0].cluster: expected a mapping, got a list"},
      {StrCat(ctx, "clusters:\n- name: [c1]\n  cluster: {}\n", user),
       "clusters[0].name: expected a string"},
      {StrCat("current-context: [x]\n", cluster, user), "current-context: expected a string"},
      {StrCat("current-context: ctx\ncontexts:\n- name: ctx\n  context: 7\n", cluster, user),
       "contexts[0].context: expected a mapping, got a scalar"},
      {StrCat(ctx, cluster, "users:\n- name: u1\n  user: {token: {a: b}}\n"),
       "users[0].user.token: expected a string, got a mapping"},
      {StrCat(ctx, "clusters:\n- name: c1\n  cluster: {server: 'https://h', server: 'https://g'}\n",
              user),
       "clusters[0].cluster.server: duplicate key"},
      {StrCat("kind: KubeSchedulerConfiguration\n", ctx, cluster, user), "kind: expected Config"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const std::string msg = LoadError(dir, c.text);
    INFO(msg);
    CHECK(Contains(msg, c.want));
  }
}

TEST_CASE("kubeconfig: unreadable kubeconfig file", "[kubeconfig]") {
  TempDir dir;
  const std::string missing = (dir.path() / "absent").string();
  absl::StatusOr<ClientConfig> c = LoadKubeconfig(missing);
  REQUIRE_FALSE(c.ok());
  CHECK(Contains(ToStd(c.status().message()), missing));
  CHECK(Contains(ToStd(c.status().message()), "No such file"));

  absl::StatusOr<ClientConfig> d = LoadKubeconfig(dir.path().string());
  REQUIRE_FALSE(d.ok());
  CHECK(Contains(ToStd(d.status().message()), "not a regular file"));
}

TEST_CASE("kubeconfig: truncated or mangled documents never crash", "[kubeconfig]") {
  TempDir dir;
  dir.Write("tok", "t\n");
  dir.Write("ca.crt", kCaPem);
  const std::string full = StrCat(
      "apiVersion: v1\nkind: Config\ncurrent-context: \"ctx\"\n"
      "contexts:\n- name: ctx\n  context: &c {cluster: c1, user: u1, namespace: ns}\n"
      "- name: other\n  context: *c\n"
      "clusters:\n- name: c1\n  cluster:\n    server: 'https://[::1]:6443/p'\n"
      "    certificate-authority: ca.crt\n    tls-server-name: k\n"
      "users:\n- name: u1\n  user:\n    tokenFile: tok\n    client-certificate-data: ",
      B64(kCertPem), "\n    client-key-data: ", B64(kKeyPem), "\n");
  const std::string path = (dir.path() / "config").string();
  absl::StatusOr<ClientConfig> whole = ParseKubeconfig(full, path);
  INFO(whole.status().ToString());
  REQUIRE(whole.ok());
  CHECK(whole->ca_pem == kCaPem);

  size_t ok = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    absl::StatusOr<ClientConfig> c = ParseKubeconfig(std::string_view(full).substr(0, n), path);
    if (c.ok()) ++ok;
  }
  // Short prefixes cannot name a server; a prefix cut inside the key data is not PEM.
  CHECK(ok < full.size());
  const char replacements[] = {'[', '{', ':', '\'', '"', '\0', '-', '&', '*', '\n', '\t'};
  constexpr size_t kReplacements = sizeof(replacements);
  // Two replacements per offset, varied along the text, keeps the test fast.
  for (size_t n = 0; n < full.size(); ++n) {
    for (char r : {replacements[n % kReplacements], replacements[(n * 7 + 3) % kReplacements]}) {
      std::string mangled = full;
      mangled[n] = r;
      (void)ParseKubeconfig(mangled, path);
    }
  }
  // Deep nesting stays within the parser's depth limit.
  CHECK_FALSE(ParseKubeconfig(std::string(100000, '['), path).ok());
  CHECK_FALSE(ParseKubeconfig(StrCat("clusters:\n", std::string(5000, '-')), path).ok());
}

// A complete service-account directory.
void WriteAccount(const TempDir& dir, bool token = true, bool ca = true, bool ns = true) {
  if (token) dir.Write("sa/token", "eyJhbGciOi.payload.sig");
  if (ca) dir.Write("sa/ca.crt", kCaPem);
  if (ns) dir.Write("sa/namespace", "berth-system\n");
}

TEST_CASE("InClusterConfig: a service-account directory", "[kubeconfig]") {
  TempDir dir;
  InClusterEnv env;
  env.service_host = "10.96.0.1";
  env.service_port = "443";
  env.account_dir = (dir.path() / "sa").string();
  CHECK(InCluster(env));

  SECTION("all files") {
    WriteAccount(dir);
    absl::StatusOr<ClientConfig> c = InClusterConfig(env);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->scheme == "https");
    CHECK(c->host == "10.96.0.1");
    CHECK(c->port == 443);
    CHECK(c->base_path.empty());
    CHECK(c->ca_pem == kCaPem);
    CHECK(c->token.empty());
    CHECK(c->token_file == (dir.path() / "sa" / "token").string());
    CHECK(c->default_namespace == "berth-system");
    CHECK(c->source == StrCat("in-cluster service account (", env.account_dir, ")"));
  }
  SECTION("IPv6 service host") {
    WriteAccount(dir);
    env.service_host = "fd00:10:96::1";
    env.service_port = "6443";
    absl::StatusOr<ClientConfig> c = InClusterConfig(env);
    REQUIRE(c.ok());
    CHECK(c->host == "fd00:10:96::1");
    CHECK(c->port == 6443);
  }
  SECTION("no namespace file") {
    WriteAccount(dir, true, true, false);
    absl::StatusOr<ClientConfig> c = InClusterConfig(env);
    REQUIRE(c.ok());
    CHECK(c->default_namespace.empty());
  }
  SECTION("missing token") {
    WriteAccount(dir, false, true, true);
    absl::StatusOr<ClientConfig> c = InClusterConfig(env);
    REQUIRE_FALSE(c.ok());
    CHECK(Contains(ToStd(c.status().message()), (dir.path() / "sa" / "token").string()));
  }
  SECTION("missing ca.crt") {
    WriteAccount(dir, true, false, true);
    absl::StatusOr<ClientConfig> c = InClusterConfig(env);
    REQUIRE_FALSE(c.ok());
    CHECK(Contains(ToStd(c.status().message()), (dir.path() / "sa" / "ca.crt").string()));
  }
  SECTION("missing variables") {
    WriteAccount(dir);
    InClusterEnv no_host = env;
    no_host.service_host.clear();
    CHECK_FALSE(InCluster(no_host));
    absl::StatusOr<ClientConfig> c = InClusterConfig(no_host);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message() == "not running in a cluster: KUBERNETES_SERVICE_HOST is not set");

    InClusterEnv no_port = env;
    no_port.service_port.clear();
    CHECK_FALSE(InCluster(no_port));
    absl::StatusOr<ClientConfig> d = InClusterConfig(no_port);
    REQUIRE_FALSE(d.ok());
    CHECK(Contains(ToStd(d.status().message()), "KUBERNETES_SERVICE_PORT is not set"));
  }
  SECTION("bad port") {
    WriteAccount(dir);
    for (std::string_view port : {"0", "65536", "https", "-1", "44 3", "4430000"}) {
      INFO(port);
      env.service_port = std::string(port);
      absl::StatusOr<ClientConfig> c = InClusterConfig(env);
      REQUIRE_FALSE(c.ok());
      CHECK(Contains(ToStd(c.status().message()), "KUBERNETES_SERVICE_PORT"));
    }
  }
  SECTION("bad host") {
    WriteAccount(dir);
    env.service_host = "10.96.0.1/x";
    absl::StatusOr<ClientConfig> c = InClusterConfig(env);
    REQUIRE_FALSE(c.ok());
    CHECK(Contains(ToStd(c.status().message()), "KUBERNETES_SERVICE_HOST"));
  }
}

TEST_CASE("InClusterEnvFromProcess reads the service variables", "[kubeconfig]") {
  auto saved = [](const char* name) -> std::optional<std::string> {
    const char* v = ::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const std::optional<std::string> host = saved("KUBERNETES_SERVICE_HOST");
  const std::optional<std::string> port = saved("KUBERNETES_SERVICE_PORT");
  auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v.has_value()) {
      ::setenv(name, v->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  };

  ::setenv("KUBERNETES_SERVICE_HOST", "10.43.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "8443", 1);
  const InClusterEnv set = InClusterEnvFromProcess();
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  const InClusterEnv unset = InClusterEnvFromProcess();
  restore("KUBERNETES_SERVICE_HOST", host);
  restore("KUBERNETES_SERVICE_PORT", port);

  CHECK(set.service_host == "10.43.0.1");
  CHECK(set.service_port == "8443");
  CHECK(set.account_dir == "/var/run/secrets/kubernetes.io/serviceaccount");
  CHECK(InCluster(set));
  CHECK(unset.service_host.empty());
  CHECK_FALSE(InCluster(unset));
}

}  // namespace
}  // namespace berth::testing
