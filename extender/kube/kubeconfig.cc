#include "extender/kube/kubeconfig.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "core/strings.h"
#include "extender/yaml_names.h"

namespace berth::extender::kube {
namespace {

// Certificates, keys, tokens and kubeconfigs are small; the bound keeps a mistaken path
// (a device, a huge log) from eating memory.
constexpr size_t kMaxFileBytes = 16u << 20;

// Reads a whole regular file. O_NONBLOCK so that a FIFO named by mistake fails the regular-file
// check instead of blocking the open. Errors read "cannot read FILE: reason".
absl::StatusOr<std::string> ReadSmallFile(const std::string& file) {
  auto fail = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("cannot read ", file, ": ", why));
  };
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    return fail(StrCat("larger than ", kMaxFileBytes >> 20, " MiB"));
  }
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::strerror(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxFileBytes)
      return fail(StrCat("larger than ", kMaxFileBytes >> 20, " MiB"));
  }
  return out;
}

bool LooksLikePem(std::string_view s) { return s.find("-----BEGIN") != std::string_view::npos; }

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A port number 1..65535 written as plain decimal digits.
std::optional<int> ParsePort(std::string_view s) {
  if (!IsDigits(s) || s.size() > 5) return std::nullopt;
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  if (v < 1 || v > 65535) return std::nullopt;
  return v;
}

// Checks a host outside brackets: an IPv4 address or a DNS name. Returns the problem, or "".
std::string CheckPlainHost(std::string_view host) {
  if (host.empty()) return "missing host";
  bool dots_and_digits = true;
  for (char c : host) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && c != '-' && c != '.' && c != '_') {
      return StrCat("invalid character '", c, "' in host \"", host, "\"");
    }
    if (!(c >= '0' && c <= '9') && c != '.') dots_and_digits = false;
  }
  if (dots_and_digits) {
    in_addr addr{};
    const std::string h(host);
    if (::inet_pton(AF_INET, h.c_str(), &addr) != 1) {
      return StrCat("invalid IPv4 address \"", host, "\"");
    }
  }
  return "";
}

bool IsIpv6(std::string_view host) {
  in6_addr addr{};
  const std::string h(host);
  return ::inet_pton(AF_INET6, h.c_str(), &addr) == 1;
}

// A Kubernetes namespace name: an RFC 1123 label.
bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}


// Reads one kubeconfig document. Every accessor checks the node type before looking inside
// (yaml-cpp's operator[] throws on scalars and returns zombies elsewhere), rejects duplicate
// keys (which value would win is not obvious to whoever wrote the file), and reports errors as
// "kubeconfig PATH: FIELD: what".
class KubeconfigReader {
 public:
  KubeconfigReader(std::string path, std::filesystem::path dir)
      : path_(std::move(path)), dir_(std::move(dir)) {}

  absl::Status Error(std::string_view field, std::string_view what) const {
    if (field.empty()) return absl::InvalidArgumentError(StrCat("kubeconfig ", path_, ": ", what));
    return absl::InvalidArgumentError(StrCat("kubeconfig ", path_, ": ", field, ": ", what));
  }

  static std::string Join(std::string_view parent, std::string_view key) {
    return parent.empty() ? std::string(key) : StrCat(parent, ".", key);
  }

  // The value of `key` in `map` (which must be a mapping), or nullopt when absent or null.
  absl::StatusOr<std::optional<YAML::Node>> Get(const YAML::Node& map, std::string_view key,
                                                std::string_view parent) const {
    std::optional<YAML::Node> found;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
      if (found.has_value()) return Error(Join(parent, key), "duplicate key");
      found = it->second;
    }
    if (found.has_value() && (found->IsNull() || !found->IsDefined())) return std::nullopt;
    return found;
  }

  // A scalar as a string; "" when absent or null.
  absl::StatusOr<std::string> GetString(const YAML::Node& map, std::string_view key,
                                        std::string_view parent) const {
    auto v = Get(map, key, parent);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return std::string();
    if (!(*v)->IsScalar()) {
      return Error(Join(parent, key), StrCat("expected a string, got ", YamlTypeName(**v)));
    }
    return (*v)->Scalar();
  }

  // A YAML boolean (true/false, and YAML 1.1's yes/no/on/off as Kubernetes' YAML reader
  // accepts them); false when absent. A quoted "true" is a string, as it is for kubectl.
  absl::StatusOr<bool> GetBool(const YAML::Node& map, std::string_view key,
                               std::string_view parent) const {
    auto v = Get(map, key, parent);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return false;
    bool b = false;
    if (!(*v)->IsScalar() || (*v)->Tag() == "!" || !YAML::convert<bool>::decode(**v, b)) {
      return Error(Join(parent, key), StrCat("expected true or false, got ",
                                             (*v)->IsScalar() ? StrCat("\"", (*v)->Scalar(), "\"")
                                                              : std::string(YamlTypeName(**v))));
    }
    return b;
  }

  // A mapping; an empty mapping when absent or null.
  absl::StatusOr<YAML::Node> GetMap(const YAML::Node& map, std::string_view key,
                                    std::string_view parent) const {
    auto v = Get(map, key, parent);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return YAML::Node(YAML::NodeType::Map);
    if (!(*v)->IsMap()) {
      return Error(Join(parent, key), StrCat("expected a mapping, got ", YamlTypeName(**v)));
    }
    return **v;
  }

  // True when `key` has a value that is not empty (a non-empty string, list or mapping).
  absl::StatusOr<bool> HasValue(const YAML::Node& map, std::string_view key,
                                std::string_view parent) const {
    auto v = Get(map, key, parent);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return false;
    if ((*v)->IsScalar()) return !(*v)->Scalar().empty();
    return (*v)->size() > 0;
  }

  // One entry of a named list (`clusters`, `users`, `contexts`): the body under `body_key` and
  // the field path naming it ("clusters[2].cluster").
  struct Entry {
    YAML::Node body;
    std::string field;
  };

  // Finds the entry called `name` in the list `list_key`. Every entry is checked for shape (a
  // mapping with a string `name`), but only the one found is read further: a kubeconfig often
  // holds users berth cannot use (exec plugins) next to the one it is told to use.
  absl::StatusOr<std::optional<Entry>> FindNamed(const YAML::Node& root, std::string_view list_key,
                                                 std::string_view body_key, std::string_view name,
                                                 std::vector<std::string>* names) const {
    auto list = Get(root, list_key, "");
    if (!list.ok()) return list.status();
    if (!list->has_value()) return std::optional<Entry>();
    if (!(*list)->IsSequence()) {
      return Error(list_key, StrCat("expected a list, got ", YamlTypeName(**list)));
    }
    std::optional<Entry> found;
    size_t i = 0;
    for (auto it = (*list)->begin(); it != (*list)->end(); ++it, ++i) {
      const std::string item = StrCat(list_key, "[", i, "]");
      const YAML::Node& e = *it;
      if (!e.IsMap()) {
        return Error(
            item, StrCat("expected a mapping with name and ", body_key, ", got ", YamlTypeName(e)));
      }
      auto n = GetString(e, "name", item);
      if (!n.ok()) return n.status();
      names->push_back(*n);
      if (*n != name) continue;
      if (found.has_value()) {
        return Error(item,
                     StrCat("a second entry named \"", name, "\" (first: ", found->field, ")"));
      }
      const std::string body_field = Join(item, body_key);
      auto body = GetMap(e, body_key, item);
      if (!body.ok()) return body.status();
      found = Entry{*body, body_field};
    }
    return found;
  }

  // Makes a path from the kubeconfig absolute: relative paths are relative to its directory.
  std::string Resolve(std::string_view file) const {
    std::filesystem::path p(file);
    if (p.is_relative()) p = dir_ / p;
    return p.lexically_normal().string();
  }

  // Reads a file a field names; the error names the kubeconfig, the field and the file.
  absl::StatusOr<std::string> ReadReferenced(std::string_view field, std::string_view file) const {
    auto content = ReadSmallFile(Resolve(file));
    if (!content.ok()) return Error(field, ToStd(content.status().message()));
    return content;
  }

  // PEM text from `data_key` (base64, wins) or `file_key` (a file); "" when neither is set.
  absl::StatusOr<std::string> GetPem(const YAML::Node& map, std::string_view data_key,
                                     std::string_view file_key, std::string_view parent) const {
    auto data = GetString(map, data_key, parent);
    if (!data.ok()) return data.status();
    std::string pem;
    std::string field;
    if (!data->empty()) {
      field = Join(parent, data_key);
      // Base64 in YAML is often folded over lines; whitespace is not part of the encoding.
      std::string compact;
      for (char c : *data) {
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') compact.push_back(c);
      }
      if (!absl::Base64Unescape(ToAbsl(compact), &pem)) {
        return Error(field, "invalid base64 (expected the base64 encoding of a PEM file)");
      }
    } else {
      auto file = GetString(map, file_key, parent);
      if (!file.ok()) return file.status();
      if (file->empty()) return std::string();
      field = Join(parent, file_key);
      auto content = ReadReferenced(field, *file);
      if (!content.ok()) return content.status();
      pem = *std::move(content);
    }
    // Never quote the content: it may be a private key.
    if (!LooksLikePem(pem)) return Error(field, "expected PEM data (-----BEGIN ...)");
    return pem;
  }

  absl::Status ReadCluster(const Entry& cluster, ClientConfig* out) const {
    const YAML::Node& c = cluster.body;
    const std::string& f = cluster.field;
    auto server = GetString(c, "server", f);
    if (!server.ok()) return server.status();
    if (server->empty()) return Error(Join(f, "server"), "required (the API server's URL)");
    auto url = ParseServerUrl(*server);
    if (!url.ok()) return Error(Join(f, "server"), ToStd(url.status().message()));
    out->scheme = url->scheme;
    out->host = url->host;
    out->port = url->port;
    out->base_path = url->base_path;

    auto proxy = HasValue(c, "proxy-url", f);
    if (!proxy.ok()) return proxy.status();
    if (*proxy) {
      return Error(Join(f, "proxy-url"),
                   "connecting through a proxy is not supported by berth; reach the API server "
                   "directly");
    }
    auto ca = GetPem(c, "certificate-authority-data", "certificate-authority", f);
    if (!ca.ok()) return ca.status();
    out->ca_pem = *std::move(ca);
    auto insecure = GetBool(c, "insecure-skip-tls-verify", f);
    if (!insecure.ok()) return insecure.status();
    out->insecure_skip_verify = *insecure;
    if (out->insecure_skip_verify && !out->ca_pem.empty()) {
      // kubectl refuses this combination too: which one the operator meant is unclear.
      return Error(Join(f, "insecure-skip-tls-verify"),
                   "cannot be combined with a certificate authority");
    }
    auto sni = GetString(c, "tls-server-name", f);
    if (!sni.ok()) return sni.status();
    out->tls_server_name = *std::move(sni);
    return absl::OkStatus();
  }

  absl::Status ReadUser(const Entry& user, std::string_view name, ClientConfig* out) const {
    const YAML::Node& u = user.body;
    const std::string& f = user.field;
    const std::string hint =
        "use a token or a client certificate (e.g. a ServiceAccount token) instead";
    struct Unsupported {
      std::string_view key;
      std::string_view what;
    };
    for (const Unsupported& x : {Unsupported{"exec", "an exec credential plugin"},
                                 Unsupported{"auth-provider", "an auth-provider plugin"},
                                 Unsupported{"username", "basic authentication (username)"},
                                 Unsupported{"password", "basic authentication (password)"}}) {
      auto has = HasValue(u, x.key, f);
      if (!has.ok()) return has.status();
      if (*has) {
        return Error(Join(f, x.key), StrCat("user \"", name, "\" authenticates with ", x.what,
                                            ", which is not supported by berth; ", hint));
      }
    }
    // Acting as someone else would silently change what berth is allowed to do.
    for (std::string_view key : {"as", "as-uid", "as-groups", "as-user-extra"}) {
      auto has = HasValue(u, key, f);
      if (!has.ok()) return has.status();
      if (*has) return Error(Join(f, key), "impersonation is not supported by berth");
    }

    auto token = GetString(u, "token", f);
    if (!token.ok()) return token.status();
    for (char c : *token) {
      // The token goes into an HTTP header; never quote it.
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return Error(Join(f, "token"), "contains a control character");
      }
    }
    out->token = *std::move(token);
    auto token_file = GetString(u, "tokenFile", f);
    if (!token_file.ok()) return token_file.status();
    if (!token_file->empty()) {
      const std::string field = Join(f, "tokenFile");
      // The client re-reads the file while berth runs; checking it now makes a typo fail at
      // start-up rather than at the first request.
      auto content = ReadReferenced(field, *token_file);
      if (!content.ok()) return content.status();
      if (absl::StripAsciiWhitespace(*content).empty()) {
        return Error(field, StrCat("token file ", Resolve(*token_file), " is empty"));
      }
      out->token_file = Resolve(*token_file);
    }

    auto cert = GetPem(u, "client-certificate-data", "client-certificate", f);
    if (!cert.ok()) return cert.status();
    auto key = GetPem(u, "client-key-data", "client-key", f);
    if (!key.ok()) return key.status();
    if (cert->empty() != key->empty()) {
      return Error(f, cert->empty()
                          ? "client-key without client-certificate (set both or neither)"
                          : "client-certificate without client-key (set both or neither)");
    }
    out->client_cert_pem = *std::move(cert);
    out->client_key_pem = *std::move(key);
    return absl::OkStatus();
  }

  absl::StatusOr<ClientConfig> Read(const YAML::Node& root, std::string_view context) const {
    if (root.IsNull() || !root.IsDefined()) {
      return Error("",
                   "the file is empty (expected a kubeconfig with clusters, users and contexts)");
    }
    if (!root.IsMap()) {
      return Error("", StrCat("expected a mapping (a kubeconfig with clusters, users and "
                              "contexts), got ",
                              YamlTypeName(root)));
    }
    auto kind = GetString(root, "kind", "");
    if (!kind.ok()) return kind.status();
    if (!kind->empty() && *kind != "Config") {
      return Error("kind", StrCat("expected Config, got \"", *kind, "\""));
    }

    std::string ctx_name(context);
    std::string_view ctx_origin = "the context asked for";
    if (ctx_name.empty()) {
      auto current = GetString(root, "current-context", "");
      if (!current.ok()) return current.status();
      if (current->empty()) {
        return Error("", "no context given and current-context is not set");
      }
      ctx_name = *std::move(current);
      ctx_origin = "current-context";
    }

    std::vector<std::string> names;
    auto ctx = FindNamed(root, "contexts", "context", ctx_name, &names);
    if (!ctx.ok()) return ctx.status();
    if (!ctx->has_value()) {
      return Error("", StrCat("context \"", ctx_name, "\" (", ctx_origin, ") not found in contexts",
                              NameList(names)));
    }
    const Entry& ce = **ctx;
    auto cluster_name = GetString(ce.body, "cluster", ce.field);
    if (!cluster_name.ok()) return cluster_name.status();
    if (cluster_name->empty()) {
      return Error(Join(ce.field, "cluster"),
                   StrCat("context \"", ctx_name, "\" names no cluster"));
    }
    auto user_name = GetString(ce.body, "user", ce.field);
    if (!user_name.ok()) return user_name.status();
    if (user_name->empty()) {
      return Error(Join(ce.field, "user"), StrCat("context \"", ctx_name, "\" names no user"));
    }
    auto ns = GetString(ce.body, "namespace", ce.field);
    if (!ns.ok()) return ns.status();
    if (!ns->empty() && !IsDnsLabel(*ns)) {
      return Error(Join(ce.field, "namespace"),
                   StrCat("\"", *ns,
                          "\" is not a namespace name (lower-case letters, digits and "
                          "'-', at most 63)"));
    }

    names.clear();
    auto cluster = FindNamed(root, "clusters", "cluster", *cluster_name, &names);
    if (!cluster.ok()) return cluster.status();
    if (!cluster->has_value()) {
      return Error(Join(ce.field, "cluster"),
                   StrCat("cluster \"", *cluster_name, "\" of context \"", ctx_name,
                          "\" not found in clusters", NameList(names)));
    }
    names.clear();
    auto user = FindNamed(root, "users", "user", *user_name, &names);
    if (!user.ok()) return user.status();
    if (!user->has_value()) {
      return Error(Join(ce.field, "user"),
                   StrCat("user \"", *user_name, "\" of context \"", ctx_name,
                          "\" not found in users", NameList(names)));
    }

    ClientConfig out;
    if (auto s = ReadCluster(**cluster, &out); !s.ok()) return s;
    if (auto s = ReadUser(**user, *user_name, &out); !s.ok()) return s;
    out.default_namespace = *std::move(ns);
    out.source = StrCat("kubeconfig ", path_, ", context ", ctx_name);
    return out;
  }

 private:
  // " (have: a, b)" for not-found errors, a few names at most.
  static std::string NameList(const std::vector<std::string>& names) {
    if (names.empty()) return " (the list is empty)";
    std::string out = " (have: ";
    for (size_t i = 0; i < names.size() && i < 10; ++i) {
      StrAppend(&out, i ? ", " : "", "\"", names[i], "\"");
    }
    if (names.size() > 10) StrAppend(&out, ", ...");
    out += ")";
    return out;
  }

  std::string path_;
  std::filesystem::path dir_;
};

}  // namespace

absl::StatusOr<ServerUrl> ParseServerUrl(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("invalid server URL \"", url, "\": ", why));
  };
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return bad("contains a space or a control character");
    }
  }
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("expected http:// or https:// and a host");
  ServerUrl out;
  for (char c : url.substr(0, sep)) {
    out.scheme.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  if (out.scheme != "https" && out.scheme != "http") {
    return bad(StrCat("scheme \"", url.substr(0, sep), "\": expected http or https"));
  }
  out.port = out.scheme == "https" ? 443 : 80;

  const std::string_view rest = url.substr(sep + 3);
  const size_t authority_end = std::min(rest.find_first_of("/?#"), rest.size());
  const std::string_view authority = rest.substr(0, authority_end);
  const std::string_view path = rest.substr(authority_end);
  if (path.find_first_of("?#") != std::string_view::npos) {
    return bad("a query or fragment is not allowed");
  }
  if (authority.find('@') != std::string_view::npos) {
    return bad("user information is not supported (credentials belong in the kubeconfig user)");
  }
  if (authority.empty()) return bad("missing host");

  std::string_view port_text;
  bool has_port = false;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("'[' without ']' around an IPv6 address");
    const std::string_view host = authority.substr(1, close - 1);
    if (!IsIpv6(host)) return bad(StrCat("invalid IPv6 address \"", host, "\""));
    out.host = std::string(host);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("expected ':' and a port after ']'");
      has_port = true;
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    const std::string_view host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      if (authority.find(':', colon + 1) != std::string_view::npos) {
        return bad("an IPv6 address must be in brackets, e.g. https://[fd00::1]:6443");
      }
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
    if (std::string problem = CheckPlainHost(host); !problem.empty()) return bad(problem);
    out.host = std::string(host);
  }
  if (has_port) {
    std::optional<int> port = ParsePort(port_text);
    if (!port.has_value()) {
      return bad(StrCat("port \"", port_text, "\": expected a number 1..65535"));
    }
    out.port = *port;
  }
  std::string_view base = path;
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  out.base_path = std::string(base);
  return out;
}

absl::StatusOr<ClientConfig> ParseKubeconfig(std::string_view text, const std::string& path,
                                             std::string_view context) {
  try {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    // Absolute, so that the token file the client re-reads later does not depend on the
    // working directory.
    std::filesystem::path abs_dir = std::filesystem::absolute(dir.empty() ? "." : dir, ec);
    if (ec) abs_dir = dir;
    const KubeconfigReader reader(path, abs_dir.lexically_normal());
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(StrCat("kubeconfig ", path, ": line ", e.mark.line + 1,
                                               ", column ", e.mark.column + 1,
                                               ": invalid YAML: ", e.msg));
    }
    return reader.Read(root, context);
  } catch (const std::exception& e) {
    // yaml-cpp may throw while walking a document too (e.g. on odd keys); no exception leaves.
    return absl::InvalidArgumentError(StrCat("kubeconfig ", path, ": ", e.what()));
  }
}

absl::StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, std::string_view context) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok())
    return absl::InvalidArgumentError(StrCat("kubeconfig: ", ToStd(text.status().message())));
  return ParseKubeconfig(*text, path, context);
}

InClusterEnv InClusterEnvFromProcess() {
  InClusterEnv env;
  if (const char* h = std::getenv("KUBERNETES_SERVICE_HOST")) env.service_host = h;
  if (const char* p = std::getenv("KUBERNETES_SERVICE_PORT")) env.service_port = p;
  return env;
}

absl::StatusOr<ClientConfig> InClusterConfig(const InClusterEnv& env) {
  if (env.service_host.empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST is not set");
  }
  if (env.service_port.empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_PORT is not set");
  }
  ClientConfig out;
  out.scheme = "https";
  std::string_view host = env.service_host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.find(':') != std::string_view::npos) {
    if (!IsIpv6(host)) {
      return absl::InvalidArgumentError(
          StrCat("KUBERNETES_SERVICE_HOST: invalid IPv6 address \"", env.service_host, "\""));
    }
  } else if (std::string problem = CheckPlainHost(host); !problem.empty()) {
    return absl::InvalidArgumentError(StrCat("KUBERNETES_SERVICE_HOST: ", problem));
  }
  out.host = std::string(host);
  std::optional<int> port = ParsePort(env.service_port);
  if (!port.has_value()) {
    return absl::InvalidArgumentError(
        StrCat("KUBERNETES_SERVICE_PORT: expected a number "
               "1..65535, got \"",
               env.service_port, "\""));
  }
  out.port = *port;

  const std::string source = StrCat("in-cluster service account (", env.account_dir, ")");
  auto fail = [&](std::string_view what) {
    return absl::InvalidArgumentError(StrCat(source, ": ", what));
  };
  const std::filesystem::path dir(env.account_dir);
  const std::string token_file = (dir / "token").string();
  // Read now only to fail early; the client re-reads it as the kubelet rotates it.
  auto token = ReadSmallFile(token_file);
  if (!token.ok()) return fail(ToStd(token.status().message()));
  if (absl::StripAsciiWhitespace(*token).empty()) {
    return fail(StrCat("token file ", token_file, " is empty"));
  }
  out.token_file = token_file;

  const std::string ca_file = (dir / "ca.crt").string();
  auto ca = ReadSmallFile(ca_file);
  if (!ca.ok()) return fail(ToStd(ca.status().message()));
  if (!LooksLikePem(*ca)) return fail(StrCat(ca_file, ": expected PEM data (-----BEGIN ...)"));
  out.ca_pem = *std::move(ca);

  // The namespace file is optional: without it berth has no default namespace.
  const std::string ns_file = (dir / "namespace").string();
  std::error_code ec;
  if (std::filesystem::exists(ns_file, ec)) {
    auto ns = ReadSmallFile(ns_file);
    if (!ns.ok()) return fail(ToStd(ns.status().message()));
    out.default_namespace = std::string(absl::StripAsciiWhitespace(*ns));
  }
  out.source = source;
  return out;
}

}  // namespace berth::extender::kube
