#include "extender/sim/workload.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <exception>
#include <initializer_list>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "core/quantity.h"
#include "core/strings.h"
#include "extender/config.h"
#include "extender/yaml_names.h"

namespace berth::extender::sim {
namespace {

// Bounds that keep a mistaken file (a count typed with extra zeros) from exhausting memory in
// the simulator; a week of a 5,000-node cluster is far below them.
constexpr int kMaxPodsPerTemplate = 10000;
constexpr int64_t kMaxPodsTotal = 2'000'000;
constexpr size_t kMaxFileBytes = 1u << 30;

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// A DNS-1123 subdomain (node names): dot-separated labels, 253 characters at most.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view label =
        s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (!IsDnsLabel(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}


std::string Join(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : StrCat(parent, ".", key);
}

// Reads one workload document. Every error reads "SOURCE: [CONTEXT: ]FIELD: what", where the
// context names the job or node event being read ("jobs[3] (train-7)"). Accessors check node
// types before looking inside, since yaml-cpp's operator[] throws on scalars.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  void SetContext(std::string context) { context_ = std::move(context); }

  absl::Status Error(std::string_view field, std::string_view what) const {
    std::string msg = StrCat(source_, ": ");
    if (!context_.empty()) StrAppend(&msg, context_, ": ");
    if (!field.empty()) StrAppend(&msg, field, ": ");
    StrAppend(&msg, what);
    return absl::InvalidArgumentError(msg);
  }

  // Checks that `map` is a mapping whose keys are all in `known`, each once.
  absl::Status CheckMap(const YAML::Node& map, std::string_view path,
                        std::initializer_list<std::string_view> known) const {
    if (!map.IsMap()) return Error(path, StrCat("expected a mapping, got ", YamlTypeName(map)));
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) return Error(path, "keys must be strings");
      const std::string& key = it->first.Scalar();
      bool ok = false;
      for (std::string_view k : known) ok = ok || k == key;
      if (!ok) {
        std::string list;
        for (std::string_view k : known) StrAppend(&list, list.empty() ? "" : ", ", k);
        return Error(Join(path, key), StrCat("unknown field (known: ", list, ")"));
      }
      if (!seen.insert(key).second) return Error(Join(path, key), "duplicate key");
    }
    return absl::OkStatus();
  }

  // The value of `key` in a mapping already checked by CheckMap; nullopt when absent or null.
  static std::optional<YAML::Node> Get(const YAML::Node& map, std::string_view key) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (it->first.Scalar() != key) continue;
      if (it->second.IsNull() || !it->second.IsDefined()) return std::nullopt;
      return it->second;
    }
    return std::nullopt;
  }

  absl::StatusOr<std::string> Scalar(const YAML::Node& n, std::string_view path) const {
    if (!n.IsScalar()) return Error(path, StrCat("expected a string, got ", YamlTypeName(n)));
    return n.Scalar();
  }

  // An optional string field; "" when absent.
  absl::StatusOr<std::string> String(const YAML::Node& map, std::string_view key,
                                     std::string_view parent) const {
    std::optional<YAML::Node> v = Get(map, key);
    if (!v) return std::string();
    return Scalar(*v, Join(parent, key));
  }

  absl::StatusOr<int64_t> Int(const YAML::Node& n, std::string_view path, int64_t lo,
                              int64_t hi) const {
    absl::StatusOr<std::string> s = Scalar(n, path);
    if (!s.ok()) return s.status();
    int64_t v = 0;
    if (!absl::SimpleAtoi(*s, &v)) return Error(path, StrCat("\"", *s, "\" is not an integer"));
    if (v < lo || v > hi) {
      return Error(path, StrCat(v, " is out of range (", lo, " to ", hi, ")"));
    }
    return v;
  }

  // A Go/Kubernetes duration ("90s", "2h30m", "1.5h") or a bare number of seconds.
  absl::StatusOr<absl::Duration> Duration(const YAML::Node& n, std::string_view path) const {
    absl::StatusOr<std::string> s = Scalar(n, path);
    if (!s.ok()) return s.status();
    absl::Duration d;
    double seconds = 0;
    if (absl::ParseDuration(*s, &d)) {
      if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
        return Error(path, "must be finite");
      }
      return d;
    }
    if (absl::SimpleAtod(*s, &seconds) && std::isfinite(seconds) && std::abs(seconds) < 1e12) {
      return absl::Seconds(seconds);
    }
    return Error(path, StrCat("\"", *s,
                              "\" is not a duration (write e.g. 90s, 2h30m, 1.5h, or "
                              "a number of seconds)"));
  }

  absl::StatusOr<std::map<std::string, std::string>> StringMap(const YAML::Node& n,
                                                               std::string_view path) const {
    if (!n.IsMap()) return Error(path, StrCat("expected a mapping, got ", YamlTypeName(n)));
    std::map<std::string, std::string> out;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar().empty()) {
        return Error(path, "keys must be non-empty strings");
      }
      const std::string field = Join(path, it->first.Scalar());
      absl::StatusOr<std::string> v = Scalar(it->second, field);
      if (!v.ok()) return v.status();
      if (!out.emplace(it->first.Scalar(), *v).second) return Error(field, "duplicate key");
    }
    return out;
  }

  // Resource name -> quantity text, each checked as a Kubernetes quantity (and not negative).
  absl::StatusOr<std::map<std::string, std::string>> Quantities(const YAML::Node& n,
                                                                std::string_view path) const {
    absl::StatusOr<std::map<std::string, std::string>> m = StringMap(n, path);
    if (!m.ok()) return m.status();
    for (const auto& [name, text] : *m) {
      absl::StatusOr<core::Quantity> q = core::Quantity::Parse(text);
      if (!q.ok()) {
        return Error(Join(path, name), StrCat("\"", text, "\" is not a Kubernetes quantity"));
      }
      if (q->IsNegative()) return Error(Join(path, name), StrCat("\"", text, "\" is negative"));
    }
    return m;
  }

  // The value of `key` in a mapping already checked by CheckMap (at `path`), which must be there.
  absl::StatusOr<YAML::Node> Required(const YAML::Node& map, std::string_view key,
                                      std::string_view path) const {
    std::optional<YAML::Node> v = Get(map, key);
    if (!v) return Error(path, "required field is missing");
    return *v;
  }

  // A list with at least one item; `empty` is the error without one.
  absl::Status NonEmptyList(const YAML::Node& n, std::string_view path,
                            std::string_view empty) const {
    if (absl::Status s = List(n, path); !s.ok()) return s;
    if (n.size() == 0) return Error(path, empty);
    return absl::OkStatus();
  }

  absl::Status List(const YAML::Node& n, std::string_view path) const {
    if (!n.IsSequence()) return Error(path, StrCat("expected a list, got ", YamlTypeName(n)));
    return absl::OkStatus();
  }

  // A DNS-1123 label; `rule` is added to the error for one that is not.
  absl::StatusOr<std::string> DnsLabel(const YAML::Node& n, std::string_view path,
                                       std::string_view rule = "") const {
    absl::StatusOr<std::string> s = Scalar(n, path);
    if (!s.ok()) return s;
    if (!IsDnsLabel(*s)) return Error(path, StrCat("\"", *s, "\" is not a DNS-1123 label", rule));
    return s;
  }

  // A duration of at least 0.
  absl::StatusOr<absl::Duration> NonNegativeDuration(const YAML::Node& n,
                                                     std::string_view path) const {
    absl::StatusOr<absl::Duration> d = Duration(n, path);
    if (!d.ok()) return d;
    if (*d < absl::ZeroDuration()) {
      return Error(path, StrCat(absl::FormatDuration(*d), " is negative"));
    }
    return d;
  }

  // Sets `out` to the integer in [lo, hi] at `key` of the mapping `map` (at `path`), if present.
  absl::Status OptionalInt(const YAML::Node& map, std::string_view key, std::string_view path,
                           int64_t lo, int64_t hi, std::optional<int>& out) const {
    std::optional<YAML::Node> v = Get(map, key);
    if (!v) return absl::OkStatus();
    absl::StatusOr<int64_t> i = Int(*v, Join(path, key), lo, hi);
    if (!i.ok()) return i.status();
    out = static_cast<int>(*i);
    return absl::OkStatus();
  }

  absl::StatusOr<Workload> Read(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) return Error("", "the workload is empty");
    if (absl::Status s = CheckMap(root, "", {"kind", "name", "description", "jobs", "nodeEvents"});
        !s.ok()) {
      return s;
    }
    Workload w;
    absl::StatusOr<std::string> kind = String(root, "kind", "");
    if (!kind.ok()) return kind.status();
    if (!kind->empty() && *kind != "Workload") {
      return Error("kind", StrCat("\"", *kind, "\": expected \"Workload\""));
    }
    absl::StatusOr<std::string> name = String(root, "name", "");
    if (!name.ok()) return name.status();
    w.name = *name;
    absl::StatusOr<std::string> description = String(root, "description", "");
    if (!description.ok()) return description.status();
    w.description = *description;

    absl::StatusOr<YAML::Node> jobs = Required(root, "jobs", "jobs");
    if (!jobs.ok()) return jobs.status();
    if (absl::Status s = NonEmptyList(*jobs, "jobs", "at least one job is required"); !s.ok()) {
      return s;
    }
    std::set<std::pair<std::string, std::string>> names;
    int64_t pods = 0;
    for (size_t i = 0; i < jobs->size(); ++i) {
      absl::StatusOr<Job> job = ReadJob((*jobs)[i], i);
      if (!job.ok()) return job.status();
      if (!names.emplace(job->ns, job->name).second) {
        return Error("name", StrCat("duplicate job name \"", job->name, "\" in namespace \"",
                                    job->ns, "\""));
      }
      pods += job->PodCount();
      if (pods > kMaxPodsTotal) {
        return Error("", StrCat("the workload has more than ", kMaxPodsTotal,
                                " pods in all; split it or lower the counts"));
      }
      w.jobs.push_back(*std::move(job));
    }
    SetContext("");

    if (std::optional<YAML::Node> events = Get(root, "nodeEvents")) {
      if (absl::Status s = List(*events, "nodeEvents"); !s.ok()) return s;
      for (size_t i = 0; i < events->size(); ++i) {
        absl::StatusOr<NodeEvent> e = ReadNodeEvent((*events)[i], i);
        if (!e.ok()) return e.status();
        w.node_events.push_back(*std::move(e));
      }
      SetContext("");
    }
    return w;
  }

 private:
  absl::StatusOr<Job> ReadJob(const YAML::Node& n, size_t index) {
    SetContext(StrCat("jobs[", index, "]"));
    // The name comes first so that every later error can name the job.
    if (n.IsMap()) {
      if (std::optional<YAML::Node> name = Get(n, "name"); name && name->IsScalar()) {
        SetContext(StrCat("jobs[", index, "] (", name->Scalar(), ")"));
      }
    }
    if (absl::Status s = CheckMap(n, "",
                                  {"name", "namespace", "submit", "duration", "queue",
                                   "priorityClass", "pool", "lifetime", "gang", "pods"});
        !s.ok()) {
      return s;
    }
    Job job;
    absl::StatusOr<YAML::Node> name = Required(n, "name", "name");
    if (!name.ok()) return name.status();
    absl::StatusOr<std::string> name_text =
        DnsLabel(*name, "name", " (lower-case letters, digits and '-', at most 63)");
    if (!name_text.ok()) return name_text.status();
    job.name = *name_text;

    if (std::optional<YAML::Node> ns = Get(n, "namespace")) {
      absl::StatusOr<std::string> text = DnsLabel(*ns, "namespace");
      if (!text.ok()) return text.status();
      job.ns = *text;
    }

    absl::StatusOr<YAML::Node> submit = Required(n, "submit", "submit");
    if (!submit.ok()) return submit.status();
    absl::StatusOr<absl::Duration> submit_d = NonNegativeDuration(*submit, "submit");
    if (!submit_d.ok()) return submit_d.status();
    job.submit = *submit_d;

    absl::StatusOr<YAML::Node> duration = Required(n, "duration", "duration");
    if (!duration.ok()) return duration.status();
    absl::StatusOr<absl::Duration> duration_d = Duration(*duration, "duration");
    if (!duration_d.ok()) return duration_d.status();
    if (*duration_d <= absl::ZeroDuration()) {
      return Error("duration", StrCat(absl::FormatDuration(*duration_d), " must be above 0"));
    }
    job.duration = *duration_d;

    for (auto [key, field] :
         {std::pair{"queue", &job.queue}, std::pair{"priorityClass", &job.priority_class},
          std::pair{"pool", &job.pool}}) {
      absl::StatusOr<std::string> text = String(n, key, "");
      if (!text.ok()) return text.status();
      *field = *text;
    }

    if (std::optional<YAML::Node> lifetime = Get(n, "lifetime")) {
      absl::StatusOr<absl::Duration> d = NonNegativeDuration(*lifetime, "lifetime");
      if (!d.ok()) return d.status();
      job.lifetime = *d;
    }

    absl::StatusOr<YAML::Node> pods = Required(n, "pods", "pods");
    if (!pods.ok()) return pods.status();
    if (absl::Status s = NonEmptyList(*pods, "pods", "at least one pod template is required");
        !s.ok()) {
      return s;
    }
    std::set<std::string> template_names;
    for (size_t i = 0; i < pods->size(); ++i) {
      absl::StatusOr<PodTemplate> t = ReadTemplate((*pods)[i], StrCat("pods[", i, "]"));
      if (!t.ok()) return t.status();
      if (!template_names.insert(t->name).second) {
        return Error(StrCat("pods[", i, "].name"),
                     StrCat("duplicate pod template name \"", t->name, "\""));
      }
      job.pods.push_back(*std::move(t));
    }

    if (std::optional<YAML::Node> gang = Get(n, "gang")) {
      if (absl::Status s = ReadGang(*gang, job); !s.ok()) return s;
    }
    return job;
  }

  absl::Status ReadGang(const YAML::Node& g, Job& job) const {
    if (absl::Status s =
            CheckMap(g, "gang", {"minMember", "maxMember", "maxHops", "scheduleTimeoutSeconds"});
        !s.ok()) {
      return s;
    }
    const int count = job.PodCount();
    job.min_member = count;  // a gang without minMember needs all its pods
    if (absl::Status s = OptionalInt(g, "minMember", "gang", 1, kMaxPodsTotal, job.min_member);
        !s.ok()) {
      return s;
    }
    if (*job.min_member > count) {
      return Error("gang.minMember",
                   StrCat(*job.min_member, " is more than the job's ", count, " pods"));
    }
    // maxMember is the vocabulary for "every pod of the job"; it is accepted so files
    // can say it, and must then agree with the pod count (the gang's members are its pods).
    std::optional<int> max_member;
    if (absl::Status s = OptionalInt(g, "maxMember", "gang", 1, kMaxPodsTotal, max_member);
        !s.ok()) {
      return s;
    }
    if (max_member && *max_member != count) {
      return Error("gang.maxMember", StrCat(*max_member, " differs from the job's ", count,
                                            " pods (every pod is a member; omit maxMember)"));
    }
    if (absl::Status s = OptionalInt(g, "maxHops", "gang", 0, 1000, job.max_hops); !s.ok()) {
      return s;
    }
    return OptionalInt(g, "scheduleTimeoutSeconds", "gang", 1, INT32_MAX,
                       job.schedule_timeout_seconds);
  }

  absl::StatusOr<PodTemplate> ReadTemplate(const YAML::Node& n, const std::string& path) const {
    if (absl::Status s =
            CheckMap(n, path, {"name", "count", "requests", "nodeSelector", "tolerations"});
        !s.ok()) {
      return s;
    }
    PodTemplate t;
    if (std::optional<YAML::Node> v = Get(n, "name")) {
      absl::StatusOr<std::string> name = DnsLabel(*v, Join(path, "name"));
      if (!name.ok()) return name.status();
      t.name = *name;
    }
    std::optional<int> count;
    if (absl::Status s = OptionalInt(n, "count", path, 1, kMaxPodsPerTemplate, count); !s.ok()) {
      return s;
    }
    t.count = count.value_or(t.count);
    absl::StatusOr<YAML::Node> requests = Required(n, "requests", Join(path, "requests"));
    if (!requests.ok()) return requests.status();
    absl::StatusOr<std::map<std::string, std::string>> r =
        Quantities(*requests, Join(path, "requests"));
    if (!r.ok()) return r.status();
    if (r->empty()) return Error(Join(path, "requests"), "at least one resource is required");
    t.requests = *std::move(r);
    if (std::optional<YAML::Node> v = Get(n, "nodeSelector")) {
      absl::StatusOr<std::map<std::string, std::string>> m =
          StringMap(*v, Join(path, "nodeSelector"));
      if (!m.ok()) return m.status();
      t.node_selector = *std::move(m);
    }
    if (std::optional<YAML::Node> v = Get(n, "tolerations")) {
      const std::string field = Join(path, "tolerations");
      if (absl::Status s = List(*v, field); !s.ok()) return s;
      for (size_t i = 0; i < v->size(); ++i) {
        absl::StatusOr<std::string> key = Scalar((*v)[i], StrCat(field, "[", i, "]"));
        if (!key.ok()) return key.status();
        if (key->empty()) return Error(StrCat(field, "[", i, "]"), "empty taint key");
        t.tolerations.push_back(*key);
      }
    }
    return t;
  }

  absl::StatusOr<NodeEvent> ReadNodeEvent(const YAML::Node& n, size_t index) {
    SetContext(StrCat("nodeEvents[", index, "]"));
    if (n.IsMap()) {
      if (std::optional<YAML::Node> node = Get(n, "node"); node && node->IsScalar()) {
        SetContext(StrCat("nodeEvents[", index, "] (", node->Scalar(), ")"));
      }
    }
    if (absl::Status s = CheckMap(n, "", {"at", "action", "node", "allocatable", "labels"});
        !s.ok()) {
      return s;
    }
    NodeEvent e;
    absl::StatusOr<YAML::Node> at = Required(n, "at", "at");
    if (!at.ok()) return at.status();
    absl::StatusOr<absl::Duration> at_d = NonNegativeDuration(*at, "at");
    if (!at_d.ok()) return at_d.status();
    e.at = *at_d;

    absl::StatusOr<YAML::Node> action = Required(n, "action", "action");
    if (!action.ok()) return action.status();
    absl::StatusOr<std::string> action_text = Scalar(*action, "action");
    if (!action_text.ok()) return action_text.status();
    bool known = false;
    for (NodeEvent::Action a : {NodeEvent::Action::kAdd, NodeEvent::Action::kDrain,
                                NodeEvent::Action::kFail, NodeEvent::Action::kRestore}) {
      if (NodeActionName(a) == *action_text) {
        e.action = a;
        known = true;
      }
    }
    if (!known) {
      return Error("action",
                   StrCat("\"", *action_text, "\": expected add, drain, fail or restore"));
    }

    absl::StatusOr<YAML::Node> node = Required(n, "node", "node");
    if (!node.ok()) return node.status();
    absl::StatusOr<std::string> node_name = Scalar(*node, "node");
    if (!node_name.ok()) return node_name.status();
    if (!IsDnsSubdomain(*node_name)) {
      return Error("node", StrCat("\"", *node_name, "\" is not a valid node name"));
    }
    e.node = *node_name;

    std::optional<YAML::Node> allocatable = Get(n, "allocatable");
    std::optional<YAML::Node> labels = Get(n, "labels");
    if (e.action != NodeEvent::Action::kAdd) {
      if (allocatable) return Error("allocatable", "only an add gives allocatable");
      if (labels) return Error("labels", "only an add gives labels");
      return e;
    }
    if (!allocatable) return Error("allocatable", "required field is missing (action add)");
    absl::StatusOr<std::map<std::string, std::string>> a = Quantities(*allocatable, "allocatable");
    if (!a.ok()) return a.status();
    if (a->empty()) return Error("allocatable", "at least one resource is required");
    e.allocatable = *std::move(a);
    if (labels) {
      absl::StatusOr<std::map<std::string, std::string>> l = StringMap(*labels, "labels");
      if (!l.ok()) return l.status();
      e.labels = *std::move(l);
    }
    return e;
  }

  std::string source_;
  std::string context_;
};

// Plain YAML scalars that would read back as null (or as nothing) must be quoted.
bool NeedsQuotes(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

void EmitString(YAML::Emitter& out, const std::string& s) {
  if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
  out << s;
}

// "0s", "25m", "1h30m", "1.5s": what absl::ParseDuration reads back to the same value.
std::string DurationText(absl::Duration d) {
  if (d == absl::ZeroDuration()) return "0s";
  return absl::FormatDuration(d);
}

void EmitStringMap(YAML::Emitter& out, const std::map<std::string, std::string>& m) {
  out << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : m) {
    out << YAML::Key;
    EmitString(out, k);
    out << YAML::Value;
    EmitString(out, v);
  }
  out << YAML::EndMap;
}

}  // namespace

int Job::PodCount() const {
  int n = 0;
  for (const PodTemplate& t : pods) n += t.count;
  return n;
}

int Workload::PodCount() const {
  int n = 0;
  for (const Job& j : jobs) n += j.PodCount();
  return n;
}

absl::Duration Workload::Horizon() const {
  const Job* last = nullptr;
  for (const Job& j : jobs) {
    if (last == nullptr || j.submit > last->submit ||
        (j.submit == last->submit && j.duration > last->duration)) {
      last = &j;
    }
  }
  return last == nullptr ? absl::ZeroDuration() : last->submit + last->duration;
}

std::string_view NodeActionName(NodeEvent::Action a) {
  switch (a) {
    case NodeEvent::Action::kAdd:
      return "add";
    case NodeEvent::Action::kDrain:
      return "drain";
    case NodeEvent::Action::kFail:
      return "fail";
    case NodeEvent::Action::kRestore:
      return "restore";
  }
  return "unknown";
}

absl::StatusOr<Workload> ParseWorkload(std::string_view text, std::string_view source) {
  Reader reader(source);
  try {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(StrCat(source, ": line ", e.mark.line + 1, ", column ",
                                               e.mark.column + 1, ": invalid YAML: ", e.msg));
    }
    return reader.Read(root);
  } catch (const std::exception& e) {
    // yaml-cpp may throw while walking a document too; no exception leaves.
    return absl::InvalidArgumentError(StrCat(source, ": ", e.what()));
  }
}

absl::StatusOr<Workload> LoadWorkloadFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  if (text->size() > kMaxFileBytes) return absl::InvalidArgumentError(StrCat(path, ": larger than 1 GiB"));
  return ParseWorkload(*text, path);
}

std::string WorkloadToYaml(const Workload& w) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << "Workload";
  if (!w.name.empty()) {
    out << YAML::Key << "name" << YAML::Value;
    EmitString(out, w.name);
  }
  if (!w.description.empty()) {
    out << YAML::Key << "description" << YAML::Value;
    EmitString(out, w.description);
  }
  out << YAML::Key << "jobs" << YAML::Value << YAML::BeginSeq;
  for (const Job& j : w.jobs) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value;
    EmitString(out, j.name);
    if (j.ns != "default") {
      out << YAML::Key << "namespace" << YAML::Value;
      EmitString(out, j.ns);
    }
    out << YAML::Key << "submit" << YAML::Value << DurationText(j.submit);
    out << YAML::Key << "duration" << YAML::Value << DurationText(j.duration);
    for (auto [key, value] :
         {std::pair{"queue", &j.queue}, std::pair{"priorityClass", &j.priority_class},
          std::pair{"pool", &j.pool}}) {
      if (value->empty()) continue;
      out << YAML::Key << key << YAML::Value;
      EmitString(out, *value);
    }
    if (j.lifetime) out << YAML::Key << "lifetime" << YAML::Value << DurationText(*j.lifetime);
    if (j.min_member) {
      out << YAML::Key << "gang" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "minMember" << YAML::Value << *j.min_member;
      if (j.max_hops) out << YAML::Key << "maxHops" << YAML::Value << *j.max_hops;
      if (j.schedule_timeout_seconds) {
        out << YAML::Key << "scheduleTimeoutSeconds" << YAML::Value << *j.schedule_timeout_seconds;
      }
      out << YAML::EndMap;
    }
    out << YAML::Key << "pods" << YAML::Value << YAML::BeginSeq;
    for (const PodTemplate& t : j.pods) {
      out << YAML::BeginMap;
      if (t.name != "worker") {
        out << YAML::Key << "name" << YAML::Value;
        EmitString(out, t.name);
      }
      if (t.count != 1) out << YAML::Key << "count" << YAML::Value << t.count;
      out << YAML::Key << "requests" << YAML::Value;
      EmitStringMap(out, t.requests);
      if (!t.node_selector.empty()) {
        out << YAML::Key << "nodeSelector" << YAML::Value;
        EmitStringMap(out, t.node_selector);
      }
      if (!t.tolerations.empty()) {
        out << YAML::Key << "tolerations" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const std::string& k : t.tolerations) EmitString(out, k);
        out << YAML::EndSeq;
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!w.node_events.empty()) {
    out << YAML::Key << "nodeEvents" << YAML::Value << YAML::BeginSeq;
    for (const NodeEvent& e : w.node_events) {
      out << YAML::BeginMap;
      out << YAML::Key << "at" << YAML::Value << DurationText(e.at);
      out << YAML::Key << "action" << YAML::Value << std::string(NodeActionName(e.action));
      out << YAML::Key << "node" << YAML::Value;
      EmitString(out, e.node);
      if (!e.allocatable.empty()) {
        out << YAML::Key << "allocatable" << YAML::Value;
        EmitStringMap(out, e.allocatable);
      }
      if (!e.labels.empty()) {
        out << YAML::Key << "labels" << YAML::Value;
        EmitStringMap(out, e.labels);
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return StrCat(out.c_str(), "\n");
}

}  // namespace berth::extender::sim
