#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "extender/kube/client.h"

namespace berth::extender {
class Journal;  // extender/journal.h
}  // namespace berth::extender

namespace simdjson::dom {  // simdjson.h, which only the sources that parse need
class element;
class parser;
}  // namespace simdjson::dom

namespace berth::extender::kube {

/// Splits a byte stream into top-level JSON values, as a watch response is: one event object
/// after another, usually newline-separated, arriving in arbitrary chunks. Tracks strings and
/// escapes, so braces inside values do not confuse it; resumes scanning where the previous
/// chunk ended.
class JsonStreamSplitter {
 public:
  explicit JsonStreamSplitter(size_t max_value_bytes = 64u << 20) : max_(max_value_bytes) {}
  /// Appends `data` and calls `fn` with each complete value. \return an error when the stream
  /// is not a sequence of JSON objects/arrays, or a value exceeds the limit; false from `fn`
  /// stops early with Cancelled.
  absl::Status Feed(std::string_view data, const std::function<bool(std::string_view)>& fn);
  /// Feed, with each value parsed by `parser` and handed to `fn` with its text (the root is valid
  /// until `fn` returns). kube-apiserver writes one watch event per chunk, as JSON and a newline:
  /// when nothing is buffered and `data` is one line that starts an object, it is parsed as it
  /// stands, and if it is one valid value the scan is skipped (a value parses only if it is
  /// whole, so that is exactly the value the scan would have found). Anything else is scanned.
  /// \return Feed's errors, or DataLoss for a value that is not valid JSON.
  absl::Status FeedParsed(std::string_view data, simdjson::dom::parser& parser,
                          const std::function<bool(std::string_view, simdjson::dom::element)>& fn);
  void Reset();
  size_t buffered() const { return buf_.size(); }
  /// Values FeedParsed took whole from their chunk, without the scan.
  int64_t whole_lines() const { return whole_lines_; }

 private:
  size_t max_;
  std::string buf_;
  size_t scan_ = 0;      ///< next byte of buf_ to scan
  size_t start_ = 0;     ///< start of the value being scanned
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  int64_t whole_lines_ = 0;
};

/// A collection berth lists and watches.
struct ResourceSpec {
  std::string name;            ///< "pods": for logs
  std::string path;            ///< collection path, e.g. "/api/v1/pods"
  std::string kind;            ///< item kind ("Pod"): list items may omit it
  std::string api_version;     ///< item apiVersion ("v1")
  std::string field_selector;  ///< optional
  /// A custom resource whose CRD may not be installed: a 404 counts as an empty, synced
  /// collection (berth works without it) and is retried every `absent_retry`.
  bool optional = false;
  /// Pods only, with a field selector that leaves finished pods out: a pod that finishes is
  /// reported DELETED carrying its last state that matched (still Running), as kube-apiserver
  /// does for an object that stops matching a watch's selector, so the event cannot tell a
  /// success from a failure or a deletion. For a bound gang member that was not being deleted,
  /// the reflector then GETs the pod; if it Succeeded, the delete says so
  /// (core::PodDelete::succeeded) and the model keeps a tombstone counting it for its gang.
  bool resolve_finished_gang_members = false;
};

struct ReflectorOptions {
  int64_t page_size = 500;
  /// Watches ask the server to end after a random time in [watch_timeout, 2 * watch_timeout),
  /// so the replicas' watches do not all restart at once (client-go does the same).
  absl::Duration watch_timeout = absl::Minutes(5);
  absl::Duration min_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(30);
  absl::Duration absent_retry = absl::Seconds(30);
  /// `berth serve --journal`: every batch of changes is recorded before the model takes it.
  Journal* journal = nullptr;
};

struct ReflectorStats {
  int64_t lists = 0;          ///< complete lists (the first one and every relist)
  int64_t watches = 0;        ///< watch requests opened
  int64_t events = 0;         ///< watch events applied
  int64_t bookmarks = 0;
  int64_t gone = 0;           ///< 410 answers (each leads to a relist)
  int64_t errors = 0;         ///< failed requests and broken streams
  int64_t decode_errors = 0;  ///< objects the API server sent that berth could not read
  /// Objects the model refused (a resource name that did not fit in the full table, a node
  /// total past the int64 range); berth keeps its last accepted state of each.
  int64_t refused = 0;
  int64_t gang_members_succeeded = 0;  ///< gang members that left because they Succeeded
  std::string resource_version;
};

/// Keeps one kind of the model equal to the API server's collection: list (paginated), then
/// watch from the list's resourceVersion; re-watch from the last resourceVersion seen when a
/// stream ends or breaks; relist on 410 Gone (replacing the collection: objects absent from the
/// new list are deleted from the model); back off exponentially on errors, at least as long as
/// a 429's Retry-After asks. Runs on its own thread.
class Reflector {
 public:
  Reflector(KubeClient* client, ResourceSpec spec, core::ClusterModel* model,
            ReflectorOptions options = {});
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  /// Called (on the reflector's thread) when the first list is in the model. Set before Start().
  void set_on_synced(std::function<void()> fn) { on_synced_ = std::move(fn); }
  void Start();
  /// Stops the thread promptly (an open watch is cut). Idempotent.
  void Stop();

  /// True once the first list has been applied (or an optional collection was found absent).
  bool synced() const { return synced_.load(); }
  ReflectorStats stats() const;
  const ResourceSpec& spec() const { return spec_; }

 private:
  enum class WatchEnd { kEnded, kGone, kError, kStopped };

  void Run();
  /// Lists the whole collection and replaces the model's objects of this kind with it.
  absl::Status ListAndReplace();
  WatchEnd WatchOnce();
  /// Applies `batch` (after ResolveFinishedGangMembers) and clears it.
  /// Applies events to the model, logging and counting what it refuses.
  void ApplyToModel(std::span<const core::ModelEvent> events);
  void ApplyBatch(std::vector<core::ModelEvent>* batch);
  /// Sets PodDelete::succeeded on the deletes of `events` whose pod is a bound gang member, not
  /// being deleted, that the API server now shows Succeeded (see
  /// ResourceSpec::resolve_finished_gang_members).
  void ResolveFinishedGangMembers(std::vector<core::ModelEvent>* events);
  /// Sleeps, waking early on Stop(). \return false when stopping.
  bool Sleep(absl::Duration d);
  absl::Duration NextBackoff();

  KubeClient* client_;
  ResourceSpec spec_;
  core::ClusterModel* model_;
  ReflectorOptions options_;

  std::thread thread_;
  StreamHandle stream_;
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::atomic<bool> synced_{false};
  std::function<void()> on_synced_;

  // Used by the reflector's thread only.
  std::string rv_;
  absl::Duration backoff_ = absl::ZeroDuration();
  std::optional<int> retry_after_;
  std::mt19937_64 rng_{std::random_device{}()};

  mutable absl::Mutex stats_mu_;
  ReflectorStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

/// The identity of an object as the model keys it, read from raw JSON metadata even when the
/// object itself does not decode: a pod's uid, a node's or cluster-scoped object's name, a
/// namespaced object's "namespace/name". Empty when absent.
std::string ObjectKey(std::string_view kind, std::string_view uid, std::string_view ns,
                      std::string_view name);
/// The key of a decoded event's object (see ObjectKey).
std::string EventKey(const core::ModelEvent& event);
/// Deletes for every object of `kind` in the model whose key is not in `keep`.
std::vector<core::ModelEvent> StaleDeletes(const core::ClusterState& state, std::string_view kind,
                                           const absl::flat_hash_set<std::string>& keep);

}  // namespace berth::extender::kube
