#include "extender/kube/reflector.h"

#include "extender/journal.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/strings.h"
#include "extender/byte_scan.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/thread_name.h"
#include "spdlog/spdlog.h"

namespace berth::extender::kube {

// ---------------------------------------------------------------------------------------------
// JsonStreamSplitter

namespace {

constexpr uint64_t ValueStops(uint64_t w) {
  return HasByte(w, '"') | HasByte(w, '{') | HasByte(w, '}') | HasByte(w, '[') | HasByte(w, ']');
}

}  // namespace

void JsonStreamSplitter::Reset() {
  buf_.clear();
  scan_ = start_ = 0;
  depth_ = 0;
  in_string_ = escape_ = false;
}

absl::Status JsonStreamSplitter::Feed(std::string_view data,
                                      const std::function<bool(std::string_view)>& fn) {
  buf_.append(data);
  const size_t size = buf_.size();
  for (; scan_ < size; ++scan_) {
    // Only a quote or backslash in a string, or a quote, brace or bracket inside a value, can
    // change the state: jump straight to the next one, eight bytes at a time. Keys and short
    // values put one every few bytes, so reading on byte by byte within a word that holds one
    // would read most bytes one at a time.
    if (in_string_ && !escape_) {
      scan_ = NextStop<StringStops>(buf_.data(), scan_, size);
      if (scan_ >= size) break;
    } else if (!in_string_ && depth_ > 0) {
      scan_ = NextStop<ValueStops>(buf_.data(), scan_, size);
      if (scan_ >= size) break;
    }
    const char c = buf_[scan_];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (depth_ == 0) {
      if (IsJsonSpace(c)) continue;
      if (c != '{' && c != '[') {
        return absl::DataLossError(StrCat("watch stream: expected a JSON object, found '",
                                          std::string_view(&c, 1), "'"));
      }
      start_ = scan_;
    }
    switch (c) {
      case '"': in_string_ = true; break;
      case '{': case '[': ++depth_; break;
      case '}': case ']':
        if (--depth_ == 0) {
          if (!fn(std::string_view(buf_).substr(start_, scan_ + 1 - start_))) {
            return absl::CancelledError("stopped");
          }
          start_ = scan_ + 1;
        }
        break;
      default: break;
    }
  }
  // Drop what has been handed out; keep the partial value.
  const size_t keep_from = depth_ == 0 && !in_string_ ? scan_ : start_;
  buf_.erase(0, keep_from);
  scan_ -= keep_from;
  start_ = depth_ == 0 ? 0 : start_ - keep_from;
  if (buf_.size() > max_) {
    return absl::ResourceExhaustedError(StrCat("watch stream: one event exceeds ", max_, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status JsonStreamSplitter::FeedParsed(
    std::string_view data, simdjson::dom::parser& parser,
    const std::function<bool(std::string_view, simdjson::dom::element)>& fn) {
  simdjson::dom::element root;
  if (buf_.empty() && data.size() >= 2 && data.front() == '{' && data.back() == '\n' &&
      std::memchr(data.data(), '\n', data.size() - 1) == nullptr &&
      parser.parse(data.data(), data.size(), true).get(root) == simdjson::SUCCESS) {
    ++whole_lines_;
    return fn(data.substr(0, data.size() - 1), root) ? absl::OkStatus() : absl::CancelledError("stopped");
  }
  bool invalid = false;
  absl::Status s = Feed(data, [&](std::string_view text) {
    if (parser.parse(text.data(), text.size(), true).get(root) != simdjson::SUCCESS) {
      invalid = true;
      return false;
    }
    return fn(text, root);
  });
  if (invalid) return absl::DataLossError("watch stream: an event is not valid JSON");
  return s;
}

// ---------------------------------------------------------------------------------------------
// Keys

std::string ObjectKey(std::string_view kind, std::string_view uid, std::string_view ns,
                      std::string_view name) {
  if (kind == "Pod") return std::string(uid);
  if (ns.empty()) return std::string(name);
  return StrCat(ns, "/", name);
}

std::string EventKey(const core::ModelEvent& event) {
  return std::visit(
      [](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, core::NodeUpsert>) return e.node.name;
        else if constexpr (std::is_same_v<T, core::NodeDelete>) return e.name;
        else if constexpr (std::is_same_v<T, core::PodUpsert>) return e.pod.uid.str();
        else if constexpr (std::is_same_v<T, core::PodDelete>) return e.uid;
        else if constexpr (std::is_same_v<T, core::PoolUpsert>) return e.pool.name;
        else if constexpr (std::is_same_v<T, core::PoolDelete>) return e.name;
        else if constexpr (std::is_same_v<T, core::QueueUpsert>) return e.queue.name;
        else if constexpr (std::is_same_v<T, core::QueueDelete>) return e.name;
        else if constexpr (std::is_same_v<T, core::PodGroupUpsert>) return StrCat(e.podgroup.ns, "/", e.podgroup.name);
        else if constexpr (std::is_same_v<T, core::PodGroupDelete>) return StrCat(e.ns, "/", e.name);
        else if constexpr (std::is_same_v<T, core::PriorityClassUpsert>) return e.priority_class.name;
        else if constexpr (std::is_same_v<T, core::PriorityClassDelete>) return e.name;
        else return "";
      },
      event);
}

std::vector<core::ModelEvent> StaleDeletes(const core::ClusterState& state, std::string_view kind,
                                           const absl::flat_hash_set<std::string>& keep) {
  std::vector<core::ModelEvent> out;
  if (kind == "Node") {
    state.ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
      if (!keep.contains(ToAbsl(n.node.name))) out.push_back(core::NodeDelete{n.node.name});
    });
  } else if (kind == "Pod") {
    state.ForEachPod([&](core::PodSlot, const core::PodState& p) {
      if (!keep.contains(ToAbsl(p.pod.uid.view()))) {
        out.push_back(core::PodDelete{p.pod.uid.str(), p.pod.ns.str(), p.pod.name.str()});
      }
    });
  } else if (kind == "Pool") {
    state.ForEachPool([&](const core::Pool& p) {
      if (!keep.contains(p.name)) out.push_back(core::PoolDelete{p.name});
    });
  } else if (kind == "Queue") {
    state.ForEachQueue([&](const core::Queue& q) {
      if (!keep.contains(q.name)) out.push_back(core::QueueDelete{q.name});
    });
  } else if (kind == "PodGroup") {
    state.ForEachPodGroup([&](const core::PodGroup& g) {
      if (!keep.contains(StrCat(g.ns, "/", g.name))) out.push_back(core::PodGroupDelete{g.ns, g.name});
    });
  } else if (kind == "PriorityClass") {
    state.ForEachPriorityClass([&](const core::PriorityClass& c) {
      if (!keep.contains(c.name)) out.push_back(core::PriorityClassDelete{c.name});
    });
  }
  return out;
}

namespace {

/// metadata.{uid,namespace,name,resourceVersion} of a raw object; empty where absent.
struct RawMeta {
  std::string_view uid, ns, name, rv;
};

RawMeta ReadMeta(simdjson::dom::object obj) {
  RawMeta m;
  simdjson::dom::object meta;
  if (obj["metadata"].get_object().get(meta) != simdjson::SUCCESS) return m;
  auto str = [&](const char* key) {
    std::string_view v;
    return meta[key].get_string().get(v) == simdjson::SUCCESS ? v : std::string_view();
  };
  m.uid = str("uid");
  m.ns = str("namespace");
  m.name = str("name");
  m.rv = str("resourceVersion");
  return m;
}

/// A delete event from identity alone, for an object whose last state does not decode.
std::optional<core::ModelEvent> DeleteFromMeta(std::string_view kind, const RawMeta& m) {
  if (kind == "Node" && !m.name.empty()) return core::ModelEvent(core::NodeDelete{std::string(m.name)});
  if (kind == "Pod" && !m.uid.empty()) {
    return core::ModelEvent(core::PodDelete{std::string(m.uid), std::string(m.ns), std::string(m.name)});
  }
  if (m.name.empty()) return std::nullopt;
  if (kind == "Pool") return core::ModelEvent(core::PoolDelete{std::string(m.name)});
  if (kind == "Queue") return core::ModelEvent(core::QueueDelete{std::string(m.name)});
  if (kind == "PodGroup") return core::ModelEvent(core::PodGroupDelete{std::string(m.ns), std::string(m.name)});
  if (kind == "PriorityClass") return core::ModelEvent(core::PriorityClassDelete{std::string(m.name)});
  return std::nullopt;
}

std::string Query(const ResourceSpec& spec, std::string_view rest) {
  std::string q = StrCat(spec.path, "?", rest);
  if (!spec.field_selector.empty()) StrAppend(&q, "&fieldSelector=", UrlEncode(spec.field_selector));
  return q;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reflector

Reflector::Reflector(KubeClient* client, ResourceSpec spec, core::ClusterModel* model,
                     ReflectorOptions options)
    : client_(client), spec_(std::move(spec)), model_(model), options_(options) {}

Reflector::~Reflector() { Stop(); }

void Reflector::Start() {
  thread_ = std::thread([this] {
    NameThisThread("watch-" + spec_.name);
    Run();
  });
}

void Reflector::Stop() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stream_.Stop();
  if (thread_.joinable()) thread_.join();
}

ReflectorStats Reflector::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

bool Reflector::Sleep(absl::Duration d) {
  absl::MutexLock lock(&stop_mu_);
  stop_mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

absl::Duration Reflector::NextBackoff() {
  backoff_ = backoff_ == absl::ZeroDuration() ? options_.min_backoff
                                              : std::min(backoff_ * 2, options_.max_backoff);
  // Jitter in [0.5, 1.0) of the step, so replicas that failed together do not retry together.
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  absl::Duration wait = backoff_ * jitter(rng_);
  if (retry_after_) wait = std::max(wait, absl::Seconds(*retry_after_));
  retry_after_.reset();
  return wait;
}

void Reflector::Run() {
  bool need_list = true;
  while (true) {
    {
      absl::MutexLock lock(&stop_mu_);
      if (stopping_) return;
    }
    if (need_list) {
      absl::Status listed = ListAndReplace();
      if (listed.ok()) {
        need_list = false;
        backoff_ = absl::ZeroDuration();
      } else if (listed.code() == absl::StatusCode::kNotFound && spec_.optional) {
        if (!synced_.exchange(true)) {
          spdlog::warn("kubernetes: {} not served by the API server ({}); continuing without "
                       "them, retrying every {}", spec_.name, ToStd(listed.message()),
                       absl::FormatDuration(options_.absent_retry));
          if (on_synced_) on_synced_();
        }
        if (!Sleep(options_.absent_retry)) return;
        continue;
      } else if (listed.code() == absl::StatusCode::kCancelled) {
        return;
      } else {
        {
          absl::MutexLock lock(&stats_mu_);
          ++stats_.errors;
        }
        const absl::Duration wait = NextBackoff();
        spdlog::warn("kubernetes: listing {} failed: {}; retrying in {}", spec_.name,
                     ToStd(listed.message()), absl::FormatDuration(wait));
        if (!Sleep(wait)) return;
        continue;
      }
    }
    switch (WatchOnce()) {
      case WatchEnd::kEnded:
        break;  // the server's timeout: re-watch from the last resourceVersion at once
      case WatchEnd::kGone:
        need_list = true;
        break;
      case WatchEnd::kError: {
        const absl::Duration wait = NextBackoff();
        if (!Sleep(wait)) return;
        break;
      }
      case WatchEnd::kStopped:
        return;
    }
  }
}

absl::Status Reflector::ListAndReplace() {
  absl::flat_hash_set<std::string> seen;
  std::string cont;
  std::string rv;
  int restarts = 0;
  while (true) {
    {
      absl::MutexLock lock(&stop_mu_);
      if (stopping_) return absl::CancelledError("stopping");
    }
    std::string q = StrCat("limit=", options_.page_size);
    if (!cont.empty()) StrAppend(&q, "&continue=", UrlEncode(cont));
    const std::string path = Query(spec_, q);
    absl::StatusOr<Response> res = client_->Call("GET", path);
    if (!res.ok()) return res.status();
    if (res->status == 410 && !cont.empty() && restarts++ < 3) {
      // The continue token expired mid-list: start again from the first page.
      spdlog::info("kubernetes: list of {} expired between pages; listing again", spec_.name);
      cont.clear();
      seen.clear();
      continue;
    }
    if (!res->ok()) {
      retry_after_ = res->retry_after;
      return ApiError("GET", path, *res);
    }
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(res->body);
    if (!doc.ok()) return absl::DataLossError(StrCat("GET ", path, ": ", doc.status().message()));
    simdjson::dom::object root;
    if (doc->root().get_object().get(root) != simdjson::SUCCESS) {
      return absl::DataLossError(StrCat("GET ", path, ": the answer is not a JSON object"));
    }
    const RawMeta list_meta = ReadMeta(root);
    rv = std::string(list_meta.rv);
    std::string_view next;
    simdjson::dom::object meta;
    if (root["metadata"].get_object().get(meta) == simdjson::SUCCESS) {
      if (meta["continue"].get_string().get(next) != simdjson::SUCCESS) next = {};
    }
    cont = std::string(next);

    std::vector<core::ModelEvent> events;
    simdjson::dom::array items;
    if (root["items"].get_array().get(items) == simdjson::SUCCESS) {
      const JsonPath top;
      const JsonPath items_path = top.Field("items");
      int64_t i = 0;
      for (simdjson::dom::element el : items) {
        const JsonPath item_path = items_path.Element(i++);
        simdjson::dom::object obj;
        if (el.get_object().get(obj) != simdjson::SUCCESS) continue;
        const RawMeta m = ReadMeta(obj);
        seen.insert(ObjectKey(spec_.kind, m.uid, m.ns, m.name));
        absl::StatusOr<core::ModelEvent> e = DecodeObjectEvent(
            obj, false, model_->resources(), item_path, spec_.kind, spec_.api_version);
        if (!e.ok()) {
          // The API server accepted it, so berth keeps its last known state of the object (the
          // key is in `seen`) rather than dropping capacity it may hold.
          spdlog::warn("kubernetes: skipping {} {}/{}: {}", spec_.kind, m.ns, m.name, ToStd(e.status().message()));
          absl::MutexLock lock(&stats_mu_);
          ++stats_.decode_errors;
          continue;
        }
        events.push_back(*std::move(e));
      }
    }
    // Each page is applied at once so that the write lock is held briefly even for a list of
    // 150,000 pods; readers see every object either in its old or in its new state.
    if (!events.empty()) ApplyToModel(events);
    if (cont.empty()) break;
  }
  std::vector<core::ModelEvent> stale;
  {
    auto view = model_->Read();
    stale = StaleDeletes(*view, spec_.kind, seen);
  }
  if (!stale.empty()) {
    spdlog::info("kubernetes: relist of {} removed {} objects deleted (or finished) meanwhile",
                 spec_.name, stale.size());
    ApplyBatch(&stale);
  }
  rv_ = rv;
  {
    absl::MutexLock lock(&stats_mu_);
    ++stats_.lists;
    stats_.resource_version = rv_;
  }
  if (!synced_.exchange(true)) {
    spdlog::info("kubernetes: {} synced: {} objects at resourceVersion {}", spec_.name, seen.size(), rv_);
    if (on_synced_) on_synced_();
  }
  return absl::OkStatus();
}

void Reflector::ApplyBatch(std::vector<core::ModelEvent>* batch) {
  if (batch->empty()) return;
  ResolveFinishedGangMembers(batch);
  ApplyToModel(*batch);
  batch->clear();
}

void Reflector::ApplyToModel(std::span<const core::ModelEvent> events) {
  if (options_.journal != nullptr) options_.journal->ModelEvents(absl::Now(), events, model_->resources());
  const core::ApplyStats stats = model_->Apply(events);
  if (stats.refused.empty()) return;
  for (const std::string& why : stats.refused) {
    spdlog::warn("kubernetes: {} refused by the model, its last accepted state is kept: {}",
                 spec_.kind, why);
  }
  absl::MutexLock lock(&stats_mu_);
  stats_.refused += static_cast<int64_t>(stats.refused.size());
}

void Reflector::ResolveFinishedGangMembers(std::vector<core::ModelEvent>* events) {
  if (!spec_.resolve_finished_gang_members) return;
  // The deletes whose pod, as the model last saw it, could have finished on its own.
  std::vector<core::PodDelete*> candidates;
  {
    auto view = model_->Read();
    for (core::ModelEvent& e : *events) {
      auto* del = std::get_if<core::PodDelete>(&e);
      if (del == nullptr || del->uid.empty()) continue;
      const core::PodState* p = view->FindPod(del->uid);
      if (p == nullptr || core::GangNameOf(p->pod).empty() || p->pod.node_name.empty() ||
          p->pod.terminating) {
        continue;
      }
      candidates.push_back(del);
    }
  }
  for (core::PodDelete* del : candidates) {
    const std::string path = StrCat("/api/v1/namespaces/", del->ns, "/pods/", del->name);
    absl::StatusOr<Response> res =
        client_->Call("GET", path, {}, "application/json", absl::Seconds(10));
    if (res.ok() && res->status == 404) continue;  // really deleted
    if (!res.ok() || !res->ok()) {
      spdlog::warn("kubernetes: gang member {}/{} left the pod watch and berth could not learn "
                   "whether it succeeded ({}); it no longer counts for its gang", del->ns,
                   del->name,
                   ToStd(res.ok() ? ApiError("GET", path, *res).message() : res.status().message()));
      continue;
    }
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(res->body);
    simdjson::dom::object obj;
    if (!doc.ok() || doc->root().get_object().get(obj) != simdjson::SUCCESS) continue;
    absl::StatusOr<core::ModelEvent> e =
        DecodeObjectEvent(obj, false, model_->resources(), JsonPath(), "Pod", "v1");
    const auto* now = e.ok() ? std::get_if<core::PodUpsert>(&*e) : nullptr;
    // Same pod (not a new one under the name), finished on its own (not deleted).
    if (now == nullptr || now->pod.uid.view() != del->uid ||
        now->pod.phase != core::PodPhase::kSucceeded || now->pod.terminating) {
      continue;
    }
    del->succeeded = true;
    absl::MutexLock lock(&stats_mu_);
    ++stats_.gang_members_succeeded;
  }
}

Reflector::WatchEnd Reflector::WatchOnce() {
  std::uniform_real_distribution<double> spread(1.0, 2.0);
  const int64_t timeout_s =
      std::max<int64_t>(1, static_cast<int64_t>(absl::ToDoubleSeconds(options_.watch_timeout) * spread(rng_)));
  const std::string path =
      Query(spec_, StrCat("watch=1&allowWatchBookmarks=true&resourceVersion=", UrlEncode(rv_),
                          "&timeoutSeconds=", timeout_s));
  {
    absl::MutexLock lock(&stats_mu_);
    ++stats_.watches;
  }
  JsonStreamSplitter splitter;
  simdjson::dom::parser parser;
  std::vector<core::ModelEvent> batch;
  WatchEnd end = WatchEnd::kEnded;
  bool events_seen = false;
  absl::Status stream_error;

  auto on_event = [&](std::string_view, simdjson::dom::element root) -> bool {
    simdjson::dom::object ev;
    std::string_view type;
    simdjson::dom::object obj;
    if (root.get_object().get(ev) != simdjson::SUCCESS ||
        ev["type"].get_string().get(type) != simdjson::SUCCESS ||
        ev["object"].get_object().get(obj) != simdjson::SUCCESS) {
      stream_error = absl::DataLossError("watch stream: an event lacks type or object");
      return false;
    }
    const RawMeta m = ReadMeta(obj);
    if (type == "ERROR") {
      int64_t code = 0;
      if (obj["code"].get_int64().get(code) != simdjson::SUCCESS) code = 0;
      std::string_view message;
      if (obj["message"].get_string().get(message) != simdjson::SUCCESS) message = {};
      if (code == 410) {
        end = WatchEnd::kGone;
        spdlog::info("kubernetes: watch of {} expired ({}); relisting", spec_.name, message);
      } else {
        end = WatchEnd::kError;
        stream_error = absl::UnknownError(StrCat("watch ERROR event ", code, ": ", message));
      }
      return false;
    }
    if (type == "BOOKMARK") {
      if (!m.rv.empty()) rv_ = std::string(m.rv);
      absl::MutexLock lock(&stats_mu_);
      ++stats_.bookmarks;
      stats_.resource_version = rv_;
      return true;
    }
    const bool deleted = type == "DELETED";
    if (!deleted && type != "ADDED" && type != "MODIFIED") {
      stream_error = absl::DataLossError(StrCat("watch stream: unknown event type ", type.substr(0, 32)));
      return false;
    }
    events_seen = true;
    const JsonPath top;
    absl::StatusOr<core::ModelEvent> e =
        DecodeObjectEvent(obj, deleted, model_->resources(), top.Field("object"), spec_.kind,
                          spec_.api_version);
    if (e.ok()) {
      batch.push_back(*std::move(e));
    } else if (std::optional<core::ModelEvent> del = deleted ? DeleteFromMeta(spec_.kind, m) : std::nullopt) {
      batch.push_back(*std::move(del));
    } else {
      spdlog::warn("kubernetes: skipping {} event for {} {}/{}: {}", type, spec_.kind, m.ns, m.name,
                   ToStd(e.status().message()));
      absl::MutexLock lock(&stats_mu_);
      ++stats_.decode_errors;
    }
    if (!m.rv.empty()) rv_ = std::string(m.rv);
    return true;
  };

  absl::StatusOr<Response> res = client_->Stream(
      path,
      [&](std::string_view chunk) {
        absl::Status s = splitter.FeedParsed(chunk, parser, on_event);
        // Apply what this chunk completed in one write, so a burst of events costs one lock.
        const size_t n = batch.size();
        ApplyBatch(&batch);
        if (n > 0) {
          absl::MutexLock lock(&stats_mu_);
          stats_.events += static_cast<int64_t>(n);
          stats_.resource_version = rv_;
        }
        if (!s.ok() && s.code() != absl::StatusCode::kCancelled) stream_error = s;
        return s.ok();
      },
      absl::Seconds(timeout_s) + absl::Seconds(30), &stream_);
  ApplyBatch(&batch);

  if (!res.ok()) {
    if (res.status().code() == absl::StatusCode::kCancelled) return WatchEnd::kStopped;
    if (end != WatchEnd::kEnded) return end;  // an ERROR event ended it (the receiver stopped)
    if (!stream_error.ok()) {
      spdlog::warn("kubernetes: watch of {}: {}", spec_.name, ToStd(stream_error.message()));
    } else {
      spdlog::info("kubernetes: watch of {} broke: {}; resuming from resourceVersion {}",
                   spec_.name, ToStd(res.status().message()), rv_);
    }
    absl::MutexLock lock(&stats_mu_);
    ++stats_.errors;
    return WatchEnd::kError;
  }
  if (res->status == 410) {
    absl::MutexLock lock(&stats_mu_);
    ++stats_.gone;
    return WatchEnd::kGone;
  }
  if (!res->ok()) {
    retry_after_ = res->retry_after;
    spdlog::warn("kubernetes: watch of {}: {}", spec_.name, ToStd(ApiError("GET", path, *res).message()));
    absl::MutexLock lock(&stats_mu_);
    ++stats_.errors;
    return WatchEnd::kError;
  }
  if (end == WatchEnd::kGone) {
    absl::MutexLock lock(&stats_mu_);
    ++stats_.gone;
    return end;
  }
  if (end == WatchEnd::kError || !stream_error.ok()) {
    absl::MutexLock lock(&stats_mu_);
    ++stats_.errors;
    if (!stream_error.ok()) spdlog::warn("kubernetes: watch of {}: {}", spec_.name, ToStd(stream_error.message()));
    return WatchEnd::kError;
  }
  if (events_seen) backoff_ = absl::ZeroDuration();
  return WatchEnd::kEnded;
}

}  // namespace berth::extender::kube
