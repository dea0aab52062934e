#pragma once

// An in-process fake of kube-apiserver for the tests of berth's Kubernetes mode. It speaks the real
// REST protocol over HTTPS on 127.0.0.1 (an ephemeral port): bearer-token or client certificate
// authentication, lists with limit/continue pagination on a consistent snapshot, chunked watch
// streams (history replay from a resourceVersion, bookmarks, 410 Expired after compaction, field
// selectors with objects entering and leaving them), the pods/binding, pods/eviction and
// pods/status subresources, merge and JSON patches, Leases with optimistic concurrency, Events, and
// every error as a `Status` object. Tests drive its state directly (Create/Update/Delete emit watch
// events like real writes), inject failures (status codes with Retry-After, dropped or failed
// watches, a restart on the same port) and read back every request it served.
//
// Resources, by the names the methods below take:
//   "nodes"            /api/v1/nodes                                        (cluster-scoped)
//   "pods"             /api/v1/[namespaces/{ns}/]pods, subresources binding, eviction, status
//   "events"           /api/v1/namespaces/{ns}/events                       (core Event)
//   "events.k8s.io"    /apis/events.k8s.io/v1/namespaces/{ns}/events
//   "leases"           /apis/coordination.k8s.io/v1/namespaces/{ns}/leases
//   "podgroups"        /apis/scheduling.x-k8s.io/v1alpha1/[namespaces/{ns}/]podgroups, status
//   "pools", "queues"  /apis/berth.io/v1alpha1/{pools,queues}              (cluster-scoped), status
//   "priorityclasses"  /apis/scheduling.k8s.io/v1/priorityclasses           (cluster-scoped)
// Every resource supports get, list, watch, create, update (PUT), patch and delete; namespaced
// resources list and watch across all namespaces without the namespaces/{ns} segment. Discovery
// (/api, /api/v1, /apis, /apis/{group}[/{version}]) lists what is installed.
//
// What it answers is checked against responses captured from kube-apiserver 1.26
// (../shared/fixtures/kube-apiserver-1.26, tests/extender/kube/fake_apiserver_fixtures_test.cc):
// Status bodies, the binding and eviction answers, list metadata and watch framing byte for byte.
// - Graceful deletion as 1.26 does it: a DELETE or an eviction of a pod bound to a node sets
//   metadata.deletionTimestamp and deletionGracePeriodSeconds (MODIFIED) and the pod stays; an
//   unbound or finished pod, or grace 0, goes at once (MODIFIED, then DELETED). An object with
//   finalizers stays, terminating, until a write clears them (then only DELETED). The fake also
//   plays every node's kubelet (Options::kubelet): a terminating bound pod is removed when its
//   grace period ends.
// - Lists honour resourceVersion and resourceVersionMatch (NotOlderThan from the current state,
//   Exact or a paginated list with a resourceVersion from the state at that version; 410 once
//   compacted); a resourceVersion newer than the server's waits, then answers 504 "Too large
//   resource version" (a plain list or get) or etcd's 500 (Exact or with a limit); a watch from one
//   is silent until the server gets there.
// - Strategic merge patches merge the lists kube-apiserver merges by key (conditions by type,
//   containers by name, ...) and take the $patch, $deleteFromPrimitiveList and $retainKeys
//   directives; custom resources refuse them with 415, as kube-apiserver does.
//
// Deliberate simplifications (what a test cannot observe here but could on a real cluster):
// - Fields below metadata (spec, status) serialize in sorted key order, not Go struct order.
// - Label selectors support =, ==, !=, in, notin, exists and !exists.
// - Unauthenticated requests answer 401 (a cluster with anonymous authentication off); there is no
//   authorization (every authenticated identity may do everything).
// - Only responses of 128 KiB or more are compressed, with gzip, and never watch streams, as
//   kube-apiserver does.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/testing/tls_certs.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace berth::testing {

using Json = nlohmann::json;

struct FakeApiServerOptions {
  /// HTTPS (with SharedTlsMaterial() unless `tls_material` is set); false: plain HTTP.
  bool tls = true;
  /// Only clients presenting a certificate signed by the CA complete the TLS handshake; such a
  /// certificate authenticates the client (a bearer token is then optional).
  bool require_client_cert = false;
  /// The accepted bearer token (SetToken changes it at runtime).
  std::string token = "test-token";
  /// A watch from a compacted resourceVersion answers an HTTP 410 Status instead of the default 200
  /// with a single ERROR event (code 410, reason Expired).
  bool watch_410_as_http_status = false;
  /// Watches that asked for bookmarks get one this often; 0: only on SendBookmarks() and about
  /// two seconds before their timeout (if events of their resource happened), as 1.26 sends them.
  int64_t bookmark_interval_ms = 0;
  /// The fake plays the kubelet of every node: a terminating pod bound to a node is removed
  /// (DELETED) once its grace period has passed and it has no finalizers. false: it stays
  /// terminating for ever, as on a cluster without kubelets (where the captures were made).
  bool kubelet = true;
  /// A list or get with a resourceVersion newer than the server's waits this long for it, then
  /// answers 504 (kube-apiserver 1.26: 3 s).
  int64_t too_large_rv_wait_ms = 3000;
  /// Watches without timeoutSeconds end cleanly after this long (kube-apiserver: 30 to 60 min).
  int64_t default_watch_timeout_seconds = 1800;
  /// Worker threads: each open watch and each kept-alive connection holds one.
  int threads = 32;
  /// The certificates to serve with; null: SharedTlsMaterial(). Must outlive the server.
  const TlsMaterial* tls_material = nullptr;
};

/// One request the server answered.
struct RecordedCall {
  std::string method;                        ///< GET, POST, PUT, PATCH, DELETE
  std::string path;                          ///< without the query
  std::map<std::string, std::string> query;  ///< decoded query parameters (first value of each)
  /// The RBAC verb kube-apiserver's authorizer would check: get, list, watch, create, update,
  /// patch, delete, deletecollection; empty for a path that is no resource.
  std::string verb;
  std::string api_group;    ///< "" for core
  std::string resource;     ///< plural as in the URL ("pods", "events", "leases")
  std::string subresource;  ///< "binding", "eviction", "status" or ""
  std::string ns;
  std::string name;
  int status = 0;  ///< the HTTP status answered (200 for a watch that started)
  std::string content_type;
  std::string body;
  /// Bytes of the answer's body before compression (0 for a watch: see watch_bytes()).
  size_t response_bytes = 0;
  /// Who it was: the client certificate's CN, "token" for the bearer token, "" if unauthenticated.
  std::string user;
  /// The client's TCP port: calls with the same port came over one connection.
  int remote_port = 0;
};

/// A failure InjectFailure makes the server answer instead of serving the request, or a delay
/// before it answers (a slow etcd write).
struct InjectedFailure {
  std::string method;  ///< "" matches any method
  /// Matched against the path without the query; "" matches any.
  std::string path_prefix;
  /// The status answered; 0: the request is served as usual (after `delay_ms`).
  int code = 500;
  int delay_ms = 0;  ///< how long the request waits before it is answered
  int retry_after_seconds = -1;  ///< >= 0: a `Retry-After` header with this value
  int times = 1;                 ///< how many requests fail; < 0: until ClearFailures()
  std::string reason;            ///< Status reason; "" derives it from the code
  std::string message;           ///< Status message; "" derives it from the code
};

/// `patch` applied to `target` as a strategic merge patch on a built-in type (what the fake does
/// with application/strategic-merge-patch+json).
Json StrategicMerge(Json target, const Json& patch);

class FakeApiServer {
 public:
  using Options = FakeApiServerOptions;

  /// Starts serving at once; start_status() tells whether that worked.
  explicit FakeApiServer(Options options = {});
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // ---- lifecycle --------------------------------------------------------------------------------

  /// The result of the constructor's Start().
  const absl::Status& start_status() const { return start_status_; }
  /// Serves again after Stop(), on the same port, with the state (objects, resourceVersion,
  /// history) kept, as an API server comes back after a restart. OK if already running.
  absl::Status Start();
  /// The server goes away: the listener closes (connections are refused), every connection is cut
  /// and open watches end without their terminating chunk. Returns promptly.
  void Stop();
  bool running() const;
  int port() const { return port_; }
  /// "https://127.0.0.1:PORT" (or http://).
  std::string url() const;
  /// The certificates served (CA, client certificate and key for clients).
  const TlsMaterial& tls() const { return *tls_; }
  /// A kubeconfig (YAML) for this server with the CA inlined, authenticating with the bearer token
  /// or, if `client_cert`, with the client certificate and key inlined.
  std::string Kubeconfig(bool client_cert = false) const;

  // ---- authentication ---------------------------------------------------------------------------

  /// Replaces the accepted bearer token (as when a service-account token rotates).
  void SetToken(std::string token);
  std::string token() const;

  // ---- objects (as real writes: each bumps the resourceVersion and emits a ----------------------
  // watch event) -------

  /// Adds an object. Fills metadata.uid and metadata.creationTimestamp when absent and the
  /// namespace from `ns` for namespaced resources. Returns the stored object. Errors: unknown
  /// resource, missing name, already exists.
  absl::StatusOr<Json> Create(const std::string& resource, const std::string& ns, Json object);
  /// Replaces an existing object (MODIFIED event), keeping uid and creationTimestamp when the new
  /// one has none. Always writes, even when nothing changed.
  absl::StatusOr<Json> Update(const std::string& resource, const std::string& ns, Json object);
  /// Create, or Update if the object exists.
  absl::StatusOr<Json> Apply(const std::string& resource, const std::string& ns, Json object);
  /// Removes an object at once, finalizers and grace period notwithstanding (DELETED event
  /// carrying its last state); returns that state.
  absl::StatusOr<Json> Delete(const std::string& resource, const std::string& ns,
                              const std::string& name);
  /// Deletes as a DELETE request does (graceful for pods bound to a node, held by finalizers);
  /// `grace_seconds` as DeleteOptions.gracePeriodSeconds (unset: the pod's
  /// terminationGracePeriodSeconds, 30 if it has none). Returns the object as the DELETE answers.
  absl::StatusOr<Json> DeleteGracefully(const std::string& resource, const std::string& ns,
                                        const std::string& name,
                                        std::optional<int64_t> grace_seconds = std::nullopt);
  /// The object as GET returns it (with kind and apiVersion), if it exists.
  std::optional<Json> Get(const std::string& resource, const std::string& ns,
                          const std::string& name) const;
  /// Every object of a resource (all namespaces, in namespace/name order), with kind and
  /// apiVersion.
  std::vector<Json> List(const std::string& resource) const;
  /// The current resourceVersion (the last write's).
  int64_t current_rv() const;

  // ---- lists and watches ------------------------------------------------------------------------

  /// Drops the watch history up to now: a watch from an older resourceVersion gets 410 Expired, and
  /// so does an open watch that has not delivered it all yet.
  void CompactHistory();
  /// Outstanding continue tokens answer 410 Expired, as after kube-apiserver's ~5 minutes.
  void ExpireContinueTokens();
  /// Every open watch that asked for bookmarks gets a BOOKMARK at the current resourceVersion.
  void SendBookmarks();
  /// Every open watch is cut: the connection closes without the terminating chunk.
  void DropWatches();
  /// Every open watch ends cleanly (terminating chunk), as after its timeout.
  void EndWatches();
  /// Open watches of `resource` get an ERROR event with a Status of `code` (410: reason Expired;
  /// 500: InternalError; others from the code) and end.
  void InjectWatchError(const std::string& resource, int code);
  /// Open watch streams, of one resource or ("") of all.
  int open_watches(const std::string& resource = "") const;

  // ---- failure injection ------------------------------------------------------------------------

  /// The next `failure.times` requests that match answer `failure.code` with a Status (after
  /// authentication, as kube-apiserver's priority and fairness does). Failures are matched in the
  /// order they were injected.
  void InjectFailure(InjectedFailure failure);
  void ClearFailures();
  /// While blocked, an eviction of the pod answers 429 as a PodDisruptionBudget would (pods that
  /// are Succeeded or Failed are evicted anyway, as kube-apiserver does).
  void SetEvictionBlocked(const std::string& ns, const std::string& name, bool blocked);
  /// A resource that is not installed (a CRD that does not exist) answers every request with 404.
  /// Open watches of it end.
  void SetInstalled(const std::string& resource, bool installed);

  // ---- what clients did -------------------------------------------------------------------------

  std::vector<RecordedCall> calls() const;
  void ClearCalls();
  /// Bodies (parsed) of the successful requests of each kind, in order.
  std::vector<Json> bindings() const;   ///< POST pods/binding
  std::vector<Json> evictions() const;  ///< POST pods/eviction
  std::vector<Json> events() const;     ///< POST of a core or events.k8s.io Event
  std::vector<Json> patches() const;    ///< PATCH of any resource or subresource
  /// Recorded calls with this method ("" any) whose path starts with `path_prefix`.
  int CountCalls(const std::string& method, const std::string& path_prefix) const;
  /// Bytes written to watch streams so far (event lines, before any compression), per resource
  /// (the names above); ClearCalls() does not reset them.
  std::map<std::string, uint64_t> watch_bytes() const;

  /// Polls `predicate` (every 5 ms) until it holds or `timeout` passes; returns whether it held.
  bool WaitFor(const std::function<bool(FakeApiServer&)>& predicate,
               std::chrono::milliseconds timeout = std::chrono::seconds(5));

  /// The resource names the methods above take.
  static std::vector<std::string> ResourceNames();

  // Implementation types, defined in fake_apiserver.cc (public only so its helpers can name them).
  struct ResourceInfo;
  struct Watcher;
  struct Route;
  struct Reply;

 private:
  using Clock = std::chrono::steady_clock;
  struct HistoryEvent {
    int64_t rv = 0;
    const ResourceInfo* res = nullptr;
    std::string type;  // ADDED, MODIFIED, DELETED
    Json object;       // with kind and apiVersion
    Json prev;         // the state before (MODIFIED, DELETED), or null
  };
  struct ContinueToken {
    std::shared_ptr<const std::vector<Json>> items;  // the snapshot, without kind/apiVersion
    size_t offset = 0;
    int64_t rv = 0;
    std::string scope;  // the resource and namespace it was issued for
  };

  void Install(httplib::Server& server);
  void Handle(const httplib::Request& req, httplib::Response& res);
  Reply Serve(const httplib::Request& req, httplib::Response& res, const Route& route,
              bool* streaming);
  Reply ServeDiscovery(const std::string& path);
  Reply ServeList(const httplib::Request& req, const Route& route);
  Reply StartWatch(const httplib::Request& req, httplib::Response& res, const Route& route,
                   bool* streaming);
  Reply ServeCreate(const Route& route, const std::string& body);
  Reply ServeUpdate(const Route& route, const std::string& body);
  Reply ServePatch(const Route& route, const std::string& content_type, const std::string& body);
  Reply ServeDelete(const Route& route, const std::string& body);
  Reply ServeBinding(const Route& route, const std::string& body);
  Reply ServeEviction(const Route& route, const std::string& body);
  bool WatchStep(Watcher& w, std::vector<std::string>* chunks, bool* finish);
  std::string Authenticate(const httplib::Request& req) const;

  // With mu_ held.
  int64_t CommitLocked(const ResourceInfo& res, const std::string& type, Json* object,
                       const Json* prev);
  absl::StatusOr<Json> CreateLocked(const ResourceInfo& res, const std::string& ns, Json object);
  absl::StatusOr<Json> UpdateLocked(const ResourceInfo& res, const std::string& ns, Json object);
  // Deletes as DELETE with these DeleteOptions does; the object as the DELETE answers, or an
  // error reply.
  Reply DeleteLocked(const ResourceInfo& res, const std::string& ns, const std::string& name,
                     const Json& options);
  // A write replaced an object by `next`: when it is terminating, has no finalizers left and its
  // grace period is over, it is removed instead (DELETED carrying `prev`) and true returned.
  bool FinishDeletionLocked(const ResourceInfo& res, const std::string& key, const Json& next,
                            const Json& prev);
  void RemoveLocked(const ResourceInfo& res, std::string key, Json last);
  void KubeletLoop();
  // A read from resourceVersion `want`: waits for the server to get there, else the 504.
  std::optional<Reply> WaitForRvLocked(std::unique_lock<std::mutex>& lk, int64_t want);
  bool HasWorkLocked(const Watcher& w) const;

  const Options options_;
  const TlsMaterial* tls_;
  absl::Status start_status_;
  int port_ = 0;

  mutable std::mutex lifecycle_mu_;  // Start/Stop
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};

  mutable std::mutex mu_;  // everything below
  std::condition_variable cv_;
  bool stopping_ = false;
  std::string token_;
  std::map<std::string, std::map<std::string, Json>> store_;  // resource -> "ns/name" -> object
  int64_t rv_ = 1000;
  int64_t compacted_rv_ = 1000;
  std::deque<HistoryEvent> history_;
  std::map<std::string, ContinueToken> continues_;
  int64_t continues_issued_ = 0;
  std::set<std::shared_ptr<Watcher>> watchers_;
  uint64_t bookmark_seq_ = 0;
  std::vector<InjectedFailure> failures_;
  std::set<std::string> blocked_evictions_;  // "ns/name"
  std::set<std::string> uninstalled_;
  std::vector<RecordedCall> calls_;
  std::map<std::string, uint64_t> watch_bytes_;  // resource -> bytes streamed to its watches
  // Terminating pods ("ns/name") and when their grace period ends (a kubelet is done with them).
  std::map<std::string, Clock::time_point> grace_ends_;
  std::thread kubelet_;
  bool closing_ = false;  // the destructor runs: the kubelet thread ends
};

}  // namespace berth::testing
