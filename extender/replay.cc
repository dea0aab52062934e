#include "extender/replay.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/config.h"
#include "extender/journal.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "policy/registry.h"

namespace berth::extender {
namespace {

using nlohmann::json;

// Binds succeed, save those the API server refused when the journal was written.
class ReplayBinder final : public BinderInterface {
 public:
  absl::Status Bind(const core::Pod& pod, std::string_view) override {
    auto it = failures_.find(pod.uid.str());
    if (it == failures_.end() || it->second.empty()) return absl::OkStatus();
    std::string error = std::move(it->second.front());
    it->second.erase(it->second.begin());
    return absl::UnavailableError(error);
  }
  void Fail(std::string uid, std::string error) { failures_[std::move(uid)].push_back(std::move(error)); }

 private:
  std::map<std::string, std::vector<std::string>> failures_;
};

// Kubernetes mode: evictions and nudges went to the API server; what they changed comes back
// through the journal's events, as it came through the watches.
class ReplayEvictor final : public EvictorInterface {
 public:
  absl::Status Evict(const core::Pod&, const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};
class ReplayNudger final : public NudgerInterface {
 public:
  absl::Status Nudge(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

// One service rebuilt from a journal's header, on a clock of its own.
struct World {
  core::FakeClock clock{absl::UnixEpoch()};
  core::ClusterModel model{&clock};
  ReplayBinder binder;
  LocalBinder local{&model};
  ReplayEvictor evictor;
  ReplayNudger nudger;
  std::unique_ptr<Service> service;
  bool fresh = true;  // nothing applied yet: a snapshot loads into it

  void MoveTo(absl::Time t) {
    const absl::Time now = clock.Now();
    if (t > now) clock.Advance(t - now);  // never back (threads journal a moment out of order)
  }
};

absl::StatusOr<std::unique_ptr<World>> MakeWorld(const Config& config, Mode mode) {
  auto w = std::make_unique<World>();
  policy::Registry registry = policy::BuildDefaultRegistry();
  policy::PolicyConfig pc = config.policy;
  pc.scheduler_name = config.scheduler_name;
  absl::StatusOr<std::unique_ptr<policy::Pipeline>> pipeline = registry.Build(pc, w->model.resources());
  if (!pipeline.ok()) return absl::InvalidArgumentError(StrCat("policies: ", pipeline.status().message()));
  ServiceOptions options = ServiceOptionsFor(config, mode);
  BinderInterface* binder = mode == Mode::kKubernetes ? static_cast<BinderInterface*>(&w->binder) : &w->local;
  w->service = std::make_unique<Service>(std::move(options), &w->model, *std::move(pipeline), binder, &w->clock);
  if (mode == Mode::kKubernetes) {
    w->service->SetEvictor(&w->evictor);
    w->service->SetNudger(&w->nudger);
  }
  w->service->SetReady(true);
  return w;
}

// A journal's events line back into model events: upserts through the Kubernetes codec, deletes
// from the identity written.
absl::StatusOr<std::vector<core::ModelEvent>> DecodeJournalEvents(const json& events, core::ResourceNames& names) {
  std::vector<core::ModelEvent> out;
  if (!events.is_array()) return absl::InvalidArgumentError("\"events\" is not an array");
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string type = e.value("type", "");
    if (type == "DELETED") {
      const std::string kind = e.value("kind", "");
      const std::string name = e.value("name", "");
      const std::string ns = e.value("namespace", "");
      if (kind == "Node") out.emplace_back(core::NodeDelete{name});
      else if (kind == "Pod") out.emplace_back(core::PodDelete{e.value("uid", ""), ns, name, e.value("succeeded", false)});
      else if (kind == "Pool") out.emplace_back(core::PoolDelete{name});
      else if (kind == "Queue") out.emplace_back(core::QueueDelete{name});
      else if (kind == "PodGroup") out.emplace_back(core::PodGroupDelete{ns, name});
      else if (kind == "PriorityClass") out.emplace_back(core::PriorityClassDelete{name});
      else return absl::InvalidArgumentError(StrCat("events[", i, "]: a delete of unknown kind \"", kind, "\""));
      continue;
    }
    if (type != "ADDED" || !e.contains("object")) {
      return absl::InvalidArgumentError(StrCat("events[", i, "]: expected ADDED with an object, or DELETED"));
    }
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(e["object"].dump());
    if (!doc.ok()) return doc.status();
    simdjson::dom::object obj;
    if (doc->root().get_object().get(obj) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(StrCat("events[", i, "]: the object is not an object"));
    }
    const JsonPath top;
    const JsonPath item = top.Item("events", static_cast<int64_t>(i));
    const JsonPath path = item.Field("object");
    absl::StatusOr<core::ModelEvent> ev = DecodeObjectEvent(obj, /*deleted=*/false, names, path);
    if (!ev.ok()) return ev.status();
    out.push_back(*std::move(ev));
  }
  return out;
}

// A field of a kube-scheduler request, its name matched without regard to case (as Go does).
const json* Field(const json& obj, std::string_view name) {
  if (!obj.is_object()) return nullptr;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (absl::EqualsIgnoreCase(it.key(), ToAbsl(name))) return &it.value();
  }
  return nullptr;
}

std::string Str(const json* j) { return j != nullptr && j->is_string() ? j->get<std::string>() : std::string(); }

// The pod a verb request is about, as namespace/name.
std::string PodOf(std::string_view kind, const json& request) {
  if (kind == "bind") {
    return StrCat(Str(Field(request, "PodNamespace")), "/", Str(Field(request, "PodName")));
  }
  const json* pod = Field(request, "Pod");
  const json* meta = pod != nullptr ? Field(*pod, "metadata") : nullptr;
  if (meta == nullptr) return "";
  return StrCat(Str(Field(*meta, "namespace")), "/", Str(Field(*meta, "name")));
}

std::string Listed(const std::vector<std::string>& names, size_t shown = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) StrAppend(&out, i == 0 ? "" : ", ", names[i]);
  if (names.size() > shown) StrAppend(&out, " (+", names.size() - shown, " more)");
  return out;
}

std::vector<std::string> Keys(const json* obj) {
  std::vector<std::string> out;
  if (obj != nullptr && obj->is_object()) {
    for (auto it = obj->begin(); it != obj->end(); ++it) out.push_back(it.key());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A verb's answer reduced to the decision it carries: `key` compares, `summary` is read.
struct Decision {
  std::string key;
  std::string summary;
};

Decision DecisionOf(std::string_view kind, int status, std::string_view answer) {
  const json a = json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (status != 200 || a.is_discarded()) {
    const std::string text = StrCat("HTTP ", status, ": ", answer.substr(0, 200));
    return {text, text};
  }
  const std::string error = Str(Field(a, "Error"));
  if (!error.empty()) return {StrCat("error:", error), StrCat("error: ", error)};
  if (kind == "filter") {
    std::vector<std::string> fit;
    if (const json* names = Field(a, "NodeNames"); names != nullptr && names->is_array()) {
      for (const json& n : *names) fit.push_back(n.is_string() ? n.get<std::string>() : n.dump());
    }
    std::sort(fit.begin(), fit.end());
    const std::vector<std::string> failed = Keys(Field(a, "FailedNodes"));
    const std::vector<std::string> unresolvable = Keys(Field(a, "FailedAndUnresolvableNodes"));
    std::string key = StrCat("fit:", absl::StrJoin(fit, ","), "|failed:", absl::StrJoin(failed, ","),
                             "|unresolvable:", absl::StrJoin(unresolvable, ","));
    std::string summary = fit.empty() ? "no node fits" : StrCat("fits ", fit.size(), " node(s): ", Listed(fit));
    if (!failed.empty()) StrAppend(&summary, "; ", failed.size(), " failed");
    if (!unresolvable.empty()) StrAppend(&summary, "; ", unresolvable.size(), " unresolvable");
    return {std::move(key), std::move(summary)};
  }
  if (kind == "prioritize") {
    // Hosts left out score 0 (the short answers omit them).
    std::vector<std::pair<int64_t, std::string>> scores;
    if (a.is_array()) {
      for (const json& h : a) {
        const json* score = Field(h, "Score");
        const int64_t s = score != nullptr && score->is_number() ? score->get<int64_t>() : 0;
        if (s != 0) scores.emplace_back(-s, Str(Field(h, "Host")));
      }
    }
    std::sort(scores.begin(), scores.end());
    std::string key, summary;
    for (const auto& [s, host] : scores) StrAppend(&key, host, "=", -s, ",");
    for (size_t i = 0; i < scores.size() && i < 3; ++i) {
      StrAppend(&summary, i == 0 ? "best " : ", ", scores[i].second, " (", -scores[i].first, ")");
    }
    if (summary.empty()) summary = "every node scores 0";
    return {std::move(key), std::move(summary)};
  }
  if (kind == "preempt") {
    std::vector<std::string> per_node;
    if (const json* m = Field(a, "NodeNameToMetaVictims"); m != nullptr && m->is_object()) {
      for (auto it = m->begin(); it != m->end(); ++it) {
        std::vector<std::string> uids;
        if (const json* pods = Field(it.value(), "Pods"); pods != nullptr && pods->is_array()) {
          for (const json& p : *pods) uids.push_back(Str(Field(p, "UID")));
        }
        std::sort(uids.begin(), uids.end());
        per_node.push_back(StrCat(it.key(), ":", absl::StrJoin(uids, "+")));
      }
    }
    std::sort(per_node.begin(), per_node.end());
    return {absl::StrJoin(per_node, ","),
            per_node.empty() ? "no candidate kept" : StrCat("victims on ", per_node.size(), " node(s): ", Listed(per_node, 3))};
  }
  return {"bound", "bound"};  // bind without an error
}

// The reasons a recorded filter answer gave, grouped: the journal's side of an explain when no
// second configuration runs.
std::string RecordedReasons(std::string_view kind, std::string_view answer) {
  const json a = json::parse(answer, nullptr, false);
  if (kind != "filter" || a.is_discarded()) return StrCat("the answer recorded: ", answer.substr(0, 400), "\n");
  std::map<std::string, int> by_reason;
  for (const char* field : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    if (const json* m = Field(a, field); m != nullptr && m->is_object()) {
      for (auto it = m->begin(); it != m->end(); ++it) {
        ++by_reason[it.value().is_string() ? it.value().get<std::string>() : it.value().dump()];
      }
    }
  }
  std::string out = "the reasons the recorded answer gave:\n";
  if (by_reason.empty()) out.append("  (none: every node asked about fit)\n");
  for (const auto& [reason, n] : by_reason) StrAppend(&out, "  ", n, " node(s): ", reason, "\n");
  return out;
}

std::string Explain(World& w, const std::string& pod) {
  if (pod.empty()) return "";
  return w.service->DebugExplain(pod, /*text=*/true).body;
}

absl::StatusOr<Config> ConfigFrom(const std::string& text, const std::string& source) {
  if (text.empty()) return Config{};
  return ParseConfig(text, source.empty() ? "the journal's configuration" : source);
}

class Replayer {
 public:
  Replayer(const ReplayOptions& options, ReplayResult* result) : o_(options), r_(result) {}

  absl::Status Run() {
    r_->files = JournalFiles(o_.dir);
    if (r_->files.empty()) {
      return absl::NotFoundError(StrCat("--journal ", o_.dir, ": no journal files (journal-NNNNNN.jsonl) there"));
    }
    for (size_t f = 0; f < r_->files.size(); ++f) {
      if (absl::Status s = RunFile(r_->files[f], f + 1 == r_->files.size()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status RunFile(const std::string& name, bool last_file) {
    std::ifstream in(StrCat(o_.dir, "/", name), std::ios::binary);
    if (!in) return absl::NotFoundError(StrCat(o_.dir, "/", name, ": cannot read"));
    lists_.clear();
    std::string line;
    uint64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      const std::string where = StrCat(name, ":", n);
      json e = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (e.is_discarded() || !e.is_object()) {
        if (last_file && in.peek() == std::char_traits<char>::eof() && !line.ends_with("}")) {
          r_->partial_last_line = true;  // cut short by a process killed mid-write
          break;
        }
        return absl::InvalidArgumentError(StrCat(where, ": not a journal entry (not a JSON object)"));
      }
      if (absl::Status s = Entry(e, where, n == 1); !s.ok()) {
        return absl::InvalidArgumentError(StrCat(where, ": ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Entry(const json& e, const std::string& where, bool first_line) {
    const std::string kind = e.value("k", "");
    if (first_line && kind != kJournalHeader) return absl::InvalidArgumentError("a journal file begins with its header");
    ++r_->entries;
    if (kind == kJournalHeader) return Header(e);
    if (worlds_.empty()) return absl::InvalidArgumentError("an entry before any header");
    const absl::Time t = absl::FromUnixMicros(e.value("t", int64_t{0}));
    if (kind != kJournalNodeList) {
      if (r_->first == absl::InfinitePast()) r_->first = t;
      r_->last = std::max(r_->last, t);
      for (auto& w : worlds_) w->MoveTo(t);
    }
    if (kind == kJournalNodeList) {
      lists_[e.value("id", uint64_t{0})] = e.value("list", "");
      return absl::OkStatus();
    }
    if (kind == kJournalSnapshot) {
      if (!e.contains("list")) return absl::InvalidArgumentError("a snapshot without its list");
      for (auto& w : worlds_) {
        if (!w->fresh) continue;  // a later file's snapshot: the state is carried on instead
        absl::StatusOr<size_t> loaded = w->service->LoadList(e["list"].dump(), "snapshot");
        if (!loaded.ok()) return loaded.status();
      }
      return absl::OkStatus();
    }
    for (auto& w : worlds_) w->fresh = false;
    if (kind == kJournalEvents) {
      size_t applied = 0;
      for (auto& w : worlds_) {
        absl::StatusOr<std::vector<core::ModelEvent>> events =
            DecodeJournalEvents(e.value("events", json::array()), w->model.resources());
        if (!events.ok()) return events.status();
        w->model.Apply(*events);
        applied = events->size();
      }
      r_->events += applied;
      return absl::OkStatus();
    }
    if (kind == kJournalBindFailure) {
      for (auto& w : worlds_) w->binder.Fail(e.value("uid", ""), e.value("error", ""));
      return absl::OkStatus();
    }
    if (kind == kJournalTick || kind == kJournalHousekeeping) {
      ++r_->ticks;
      const int64_t recorded = e.value("acted", int64_t{0});
      std::vector<int64_t> now;
      for (auto& w : worlds_) {
        now.push_back(kind == kJournalTick ? w->service->AdmissionTick().evicted : w->service->Housekeeping());
        w->service->DrainIntents();
      }
      ++r_->decisions;
      if (now.back() != recorded) {
        const std::string what = kind == kJournalTick ? "pods evicted for fair share" : "reclaims started";
        AddDiff(where, absl::FromUnixMicros(e.value("t", int64_t{0})), kind, "", StrCat(recorded, " ", what),
                StrCat(now.back(), " ", what), "", "");
      }
      return absl::OkStatus();
    }
    for (size_t v = 0; v < kVerbNames.size(); ++v) {
      if (kind == kVerbNames[v]) return Verb(static_cast<VerbKind>(v), e, where, t);
    }
    return absl::InvalidArgumentError(StrCat("unknown entry kind \"", kind, "\""));
  }

  absl::Status Header(const json& e) {
    const bool start = e.value("start", true);
    if (!start && !worlds_.empty()) return absl::OkStatus();  // the next file of a run
    ++r_->starts;
    const std::string mode_name = e.value("mode", "");
    if (mode_name != "standalone" && mode_name != "kubernetes") {
      return absl::InvalidArgumentError(StrCat("header: unknown mode \"", mode_name, "\""));
    }
    const Mode mode = mode_name == "standalone" ? Mode::kStandalone : Mode::kKubernetes;
    r_->recorded_version = e.value("version", "");
    const std::string scheduler_name = e.value("schedulerName", "berth-scheduler");
    absl::StatusOr<Config> recorded = ConfigFrom(e.value("config", ""), e.value("configSource", ""));
    if (!recorded.ok()) return recorded.status();
    recorded->scheduler_name = scheduler_name;
    worlds_.clear();
    if (o_.config_json) {
      absl::StatusOr<Config> chosen = ConfigFrom(*o_.config_json, o_.config_source);
      if (!chosen.ok()) return chosen.status();
      chosen->scheduler_name = scheduler_name;  // the pods name the journal's scheduler
      absl::StatusOr<std::unique_ptr<World>> a = MakeWorld(*recorded, mode);
      if (!a.ok()) return a.status();
      worlds_.push_back(*std::move(a));
      absl::StatusOr<std::unique_ptr<World>> b = MakeWorld(*chosen, mode);
      if (!b.ok()) return b.status();
      worlds_.push_back(*std::move(b));
      r_->config = o_.config_source;
    } else {
      absl::StatusOr<std::unique_ptr<World>> w = MakeWorld(*recorded, mode);
      if (!w.ok()) return w.status();
      worlds_.push_back(*std::move(w));
      const std::string source = e.value("configSource", "");
      r_->config = StrCat("the journal's (", source.empty() ? "defaults" : source, ")");
    }
    return absl::OkStatus();
  }

  absl::Status Verb(VerbKind verb, const json& e, const std::string& where, absl::Time t) {
    const std::string kind(kVerbNames[static_cast<size_t>(verb)]);
    absl::StatusOr<std::string> request = Body(e, "req");
    if (!request.ok()) return request.status();
    absl::StatusOr<std::string> answer = Body(e, "ans");
    if (!answer.ok()) return answer.status();
    ++r_->verbs;
    ++r_->decisions;
    std::vector<Reply> replies;
    for (auto& w : worlds_) {
      switch (verb) {
        case VerbKind::kFilter: replies.push_back(w->service->Filter(*request)); break;
        case VerbKind::kPrioritize: replies.push_back(w->service->Prioritize(*request)); break;
        case VerbKind::kBind: replies.push_back(w->service->Bind(*request)); break;
        case VerbKind::kPreempt: replies.push_back(w->service->Preempt(*request)); break;
      }
      w->service->DrainIntents();
    }
    const Decision recorded = DecisionOf(kind, e.value("status", 200), *answer);
    const Decision now = DecisionOf(kind, replies.back().status, replies.back().body);
    if (recorded.key == now.key) return absl::OkStatus();
    const std::string pod = PodOf(kind, json::parse(*request, nullptr, false));
    if (r_->differing >= o_.max_full) {
      ++r_->differing;
      return absl::OkStatus();
    }
    const std::string explain_recorded =
        worlds_.size() > 1 ? Explain(*worlds_.front(), pod) : RecordedReasons(kind, *answer);
    AddDiff(where, t, kind, pod, recorded.summary, now.summary, explain_recorded, Explain(*worlds_.back(), pod));
    return absl::OkStatus();
  }

  // A request or answer as it was sent: its node list put back where the journal took it out.
  absl::StatusOr<std::string> Body(const json& e, const std::string& field) const {
    std::string body = e.value(field, "");
    if (!e.contains(field + "Nodes")) return body;
    auto it = lists_.find(e.value(field + "Nodes", uint64_t{0}));
    const size_t at = e.value(field + "At", size_t{0});
    if (it == lists_.end() || at > body.size()) {
      return absl::InvalidArgumentError(StrCat(field == "req" ? "a request" : "an answer",
                                               " naming a node list its file does not hold"));
    }
    body.insert(at, it->second);
    return body;
  }

  void AddDiff(const std::string& where, absl::Time t, const std::string& kind, const std::string& pod,
               std::string recorded, std::string replayed, std::string explain_recorded,
               std::string explain_replayed) {
    ++r_->differing;
    if (r_->diffs.size() >= o_.max_full) return;
    r_->diffs.push_back(ReplayDiff{.where = where, .time = t, .kind = kind, .pod = pod,
                                   .recorded = std::move(recorded), .replayed = std::move(replayed),
                                   .explain_recorded = std::move(explain_recorded),
                                   .explain_replayed = std::move(explain_replayed)});
  }

  const ReplayOptions& o_;
  ReplayResult* r_;
  // worlds_.back() runs under the chosen configuration; with --config, worlds_.front() under
  // the journal's, for the explain of both.
  std::vector<std::unique_ptr<World>> worlds_;
  std::map<uint64_t, std::string> lists_;
};

std::string Indented(std::string_view text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(ToAbsl(text), '\n', absl::SkipEmpty())) {
    StrAppend(&out, "      ", ToStd(line), "\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<ReplayResult> Replay(const ReplayOptions& options) {
  ReplayResult result;
  Replayer replayer(options, &result);
  if (absl::Status s = replayer.Run(); !s.ok()) return s;
  return result;
}

std::string ReplayReport(const ReplayResult& r) {
  auto when = [](absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone()); };
  std::string out = StrCat("replayed ", r.files.size(), " file(s), ", r.entries, " entries (", r.verbs,
                           " verb calls, ", r.ticks, " ticks, ", r.events, " model changes)");
  if (r.first != absl::InfinitePast()) StrAppend(&out, " from ", when(r.first), " to ", when(r.last));
  StrAppend(&out, "\nrecorded by berth ", r.recorded_version.empty() ? "?" : r.recorded_version,
            "; replayed under the configuration ", r.config, "\n");
  if (r.partial_last_line) out.append("the last line was cut short (the process stopped mid-write) and is left out\n");
  StrAppend(&out, r.decisions, " decisions compared: ", r.differing, r.differing == 1 ? " differs" : " differ", "\n");
  for (size_t i = 0; i < r.diffs.size(); ++i) {
    const ReplayDiff& d = r.diffs[i];
    StrAppend(&out, "\n#", i + 1, " ", d.where, " at ", when(d.time), ": ", d.kind,
              d.pod.empty() ? "" : StrCat(" pod ", d.pod), "\n", "  recorded: ", d.recorded, "\n",
              "  replayed: ", d.replayed, "\n");
    if (!d.explain_recorded.empty()) StrAppend(&out, "  then:\n", Indented(d.explain_recorded));
    if (!d.explain_replayed.empty()) StrAppend(&out, "  now:\n", Indented(d.explain_replayed));
  }
  if (r.differing > r.diffs.size()) {
    StrAppend(&out, "\n... and ", r.differing - r.diffs.size(), " more differences (the first ", r.diffs.size(),
              " are shown in full)\n");
  }
  return out;
}

}  // namespace berth::extender
