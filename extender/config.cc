#include "extender/config.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "core/quantity.h"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"

namespace berth::extender {
namespace {

absl::Status CheckKnown(simdjson::dom::object obj, const std::set<std::string_view>& known,
                        const JsonPath& path) {
  for (auto [key, value] : obj) {
    if (!known.contains(key)) {
      std::string list;
      for (std::string_view k : known) StrAppend(&list, list.empty() ? "" : ", ", k);
      return FieldError(path.Field(key), StrCat("unknown field (known: ", list, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> StringList(simdjson::dom::object obj, std::string_view key,
                                                    const JsonPath& path,
                                                    std::vector<std::string> dflt) {
  auto arr = OptionalArray(obj, key, path);
  if (!arr.ok()) return arr.status();
  if (!arr->has_value()) return dflt;
  std::vector<std::string> out;
  int64_t i = 0;
  for (simdjson::dom::element el : **arr) {
    auto s = AsString(el, path.Item(key, i++));
    if (!s.ok()) return s.status();
    out.emplace_back(*s);
  }
  return out;
}

absl::Status ParsePolicies(simdjson::dom::object obj, const JsonPath& path,
                           policy::PolicyConfig* out) {
  if (auto s = CheckKnown(obj, {"filters", "scores", "preempt", "admission", "order", "reclaim"},
                          path);
      !s.ok()) {
    return s;
  }
  for (auto [key, target] :
       {std::pair<std::string_view, std::vector<std::string>*>{"filters", &out->filters},
        {"preempt", &out->preempt},
        {"admission", &out->admission},
        {"order", &out->order},
        {"reclaim", &out->reclaim}}) {
    auto list = StringList(obj, key, path, *target);
    if (!list.ok()) return list.status();
    *target = *std::move(list);
  }
  auto scores = OptionalArray(obj, "scores", path);
  if (!scores.ok()) return scores.status();
  if (scores->has_value()) {
    out->scores.clear();
    int64_t i = 0;
    for (simdjson::dom::element el : **scores) {
      const JsonPath spath = path.Item("scores", i++);
      auto sobj = AsObject(el, spath);
      if (!sobj.ok()) return sobj.status();
      if (auto s = CheckKnown(*sobj, {"name", "weight"}, spath); !s.ok()) return s;
      auto name = OptionalString(*sobj, "name", spath);
      if (!name.ok()) return name.status();
      if (!name->has_value()) return FieldError(spath.Field("name"), "required");
      auto weight = OptionalInt(*sobj, "weight", spath);
      if (!weight.ok()) return weight.status();
      out->scores.emplace_back(std::string(**name), weight->value_or(1));
    }
  }
  return absl::OkStatus();
}

/// An optional number (integer or fraction) within [min, max].
absl::Status OptionalNumber(simdjson::dom::object obj, std::string_view key, const JsonPath& path,
                            double min, double max, double* out) {
  std::optional<simdjson::dom::element> el = OptionalField(obj, key);
  if (!el) return absl::OkStatus();
  double v;
  if (el->get_double().get(v) != simdjson::SUCCESS) {
    int64_t i;
    if (el->get_int64().get(i) != simdjson::SUCCESS) return FieldError(path.Field(key), "expected a number");
    v = static_cast<double>(i);
  }
  if (!(v >= min && v <= max)) {
    return FieldError(path.Field(key), StrCat("expected ", min, "..", max, ", got ", simdjson::minify(*el)));
  }
  *out = v;
  return absl::OkStatus();
}

/// An optional number of seconds (integer or fraction) within [min, max].
absl::Status OptionalSeconds(simdjson::dom::object obj, std::string_view key, const JsonPath& path,
                             double min, double max, absl::Duration* out) {
  std::optional<simdjson::dom::element> el = OptionalField(obj, key);
  if (!el) return absl::OkStatus();
  double seconds = 0;
  if (auto s = OptionalNumber(obj, key, path, min, max, &seconds); !s.ok()) {
    return FieldError(path.Field(key), el->is_number() ? StrCat("expected ", min, "..", max, " seconds")
                                                       : std::string("expected a number of seconds"));
  }
  *out = absl::Seconds(seconds);
  return absl::OkStatus();
}

absl::Status ParseLeaderElection(simdjson::dom::object obj, const JsonPath& path,
                                 kube::LeaderElectionConfig* out) {
  if (auto s = CheckKnown(obj,
                          {"enabled", "mode", "leaseName", "leaseNamespace", "identity",
                           "leaseDurationSeconds", "renewDeadlineSeconds", "retryPeriodSeconds"},
                          path);
      !s.ok()) {
    return s;
  }
  auto enabled = OptionalBool(obj, "enabled", path);
  if (!enabled.ok()) return enabled.status();
  out->enabled = enabled->value_or(out->enabled);
  auto mode = OptionalString(obj, "mode", path);
  if (!mode.ok()) return mode.status();
  if (mode->has_value()) {
    if (**mode == "acquire") {
      out->mode = kube::LeaderElectionConfig::Mode::kAcquire;
    } else if (**mode == "follow") {
      out->mode = kube::LeaderElectionConfig::Mode::kFollow;
    } else {
      return FieldError(path.Field("mode"), "expected \"acquire\" or \"follow\"");
    }
  }
  for (auto [key, target] : {std::pair<std::string_view, std::string*>{"leaseName", &out->lease_name},
                             {"leaseNamespace", &out->lease_namespace},
                             {"identity", &out->identity}}) {
    auto v = OptionalString(obj, key, path);
    if (!v.ok()) return v.status();
    if (v->has_value()) *target = std::string(**v);
  }
  if (out->lease_name.empty()) return FieldError(path.Field("leaseName"), "must not be empty");
  for (auto [key, target] :
       {std::pair<std::string_view, absl::Duration*>{"leaseDurationSeconds", &out->lease_duration},
        {"renewDeadlineSeconds", &out->renew_deadline},
        {"retryPeriodSeconds", &out->retry_period}}) {
    if (auto s = OptionalSeconds(obj, key, path, 0.01, 3600, target); !s.ok()) return s;
  }
  if (absl::Status s = kube::LeaderElector::Validate(*out); !s.ok()) {
    return FieldError(path, ToStd(s.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseKubernetes(simdjson::dom::object obj, const JsonPath& path, Config* c) {
  if (auto s = CheckKnown(obj, {"watchTimeoutSeconds", "leaderElection"}, path); !s.ok()) return s;
  if (auto s = OptionalSeconds(obj, "watchTimeoutSeconds", path, 0.1, 3600, &c->watch_timeout);
      !s.ok()) {
    return s;
  }
  auto le = OptionalObject(obj, "leaderElection", path);
  if (!le.ok()) return le.status();
  if (le->has_value()) {
    return ParseLeaderElection(**le, path.Field("leaderElection"), &c->leader_election);
  }
  return absl::OkStatus();
}

/// The "pools" section: reclaim and Pool.status settings.
absl::Status ParsePools(simdjson::dom::object obj, const JsonPath& path, Config* c) {
  if (auto s = CheckKnown(obj, {"reclaimTimeoutSeconds", "statusIntervalSeconds"}, path); !s.ok()) {
    return s;
  }
  if (auto s = OptionalSeconds(obj, "reclaimTimeoutSeconds", path, 0.1, 86400,
                               &c->policy.pools.reclaim_timeout);
      !s.ok()) {
    return s;
  }
  // 0 turns status writes off.
  std::optional<simdjson::dom::element> interval = OptionalField(obj, "statusIntervalSeconds");
  double zero;
  if (interval && interval->get_double().get(zero) == simdjson::SUCCESS && zero == 0) {
    c->pool_status_interval = absl::ZeroDuration();
    return absl::OkStatus();
  }
  return OptionalSeconds(obj, "statusIntervalSeconds", path, 0.1, 3600, &c->pool_status_interval);
}

/// The "gangs" section: reservation timeout, freezing window, release of incomplete gangs.
absl::Status ParseGangs(simdjson::dom::object obj, const JsonPath& path, policy::GangConfig* g) {
  if (auto s = CheckKnown(obj, {"scheduleTimeoutSeconds", "freezeWindowSeconds", "releaseIncomplete"},
                          path);
      !s.ok()) {
    return s;
  }
  if (auto s = OptionalSeconds(obj, "scheduleTimeoutSeconds", path, 0.1, 86400, &g->schedule_timeout);
      !s.ok()) {
    return s;
  }
  // 0: no freezing window.
  std::optional<simdjson::dom::element> freeze = OptionalField(obj, "freezeWindowSeconds");
  double zero;
  if (freeze && freeze->get_double().get(zero) == simdjson::SUCCESS && zero == 0) {
    g->freeze_window = absl::ZeroDuration();
  } else if (auto s = OptionalSeconds(obj, "freezeWindowSeconds", path, 0.1, 86400,
                                      &g->freeze_window);
             !s.ok()) {
    return s;
  }
  auto release = OptionalBool(obj, "releaseIncomplete", path);
  if (!release.ok()) return release.status();
  if (release->has_value()) g->release_incomplete = **release;
  return absl::OkStatus();
}

/// The "queues" section (SPEC 6.4): usage weights, flow half-life, limits, aging.
absl::Status ParseQueues(simdjson::dom::object obj, const JsonPath& path, policy::QueueConfig* q) {
  if (auto s = CheckKnown(obj,
                          {"gpuWeight", "memoryWeightPerGiB", "halfTimeSeconds",
                           "nonPreemptibleLimitFactor", "excessBudget", "agingIntervalSeconds",
                           "planReuseMilliseconds"},
                          path);
      !s.ok()) {
    return s;
  }
  for (auto [key, max, out] : {std::tuple{"gpuWeight", 1e6, &q->gpu_weight},
                               std::tuple{"memoryWeightPerGiB", 1e6, &q->memory_weight_per_gib},
                               std::tuple{"nonPreemptibleLimitFactor", 1e3, &q->non_preemptible_limit_factor},
                               std::tuple{"excessBudget", 1e15, &q->excess_budget}}) {
    if (auto s = OptionalNumber(obj, key, path, 0, max, out); !s.ok()) return s;
  }
  if (auto s = OptionalSeconds(obj, "halfTimeSeconds", path, 1, 30 * 86400, &q->half_time); !s.ok()) {
    return s;
  }
  // 0: no aging.
  if (auto s = OptionalSeconds(obj, "agingIntervalSeconds", path, 0, 30 * 86400, &q->aging_interval);
      !s.ok()) {
    return s;
  }
  double reuse_ms = absl::ToDoubleMilliseconds(q->plan_reuse);
  if (auto s = OptionalNumber(obj, "planReuseMilliseconds", path, 0, 10000, &reuse_ms); !s.ok()) {
    return s;
  }
  q->plan_reuse = absl::Milliseconds(reuse_ms);
  return absl::OkStatus();
}

/// The "events" section: how often Events about waiting pods are written.
absl::Status ParseEvents(simdjson::dom::object obj, const JsonPath& path, Config* c) {
  if (auto s = CheckKnown(obj, {"repeatAfterSeconds", "minIntervalSeconds", "maxPerSecond"}, path);
      !s.ok()) {
    return s;
  }
  if (auto s = OptionalSeconds(obj, "repeatAfterSeconds", path, 1, 86400, &c->events_repeat_after);
      !s.ok()) {
    return s;
  }
  if (auto s = OptionalSeconds(obj, "minIntervalSeconds", path, 0, 86400, &c->events_min_interval);
      !s.ok()) {
    return s;
  }
  double per_second = c->events_max_per_second;
  if (auto s = OptionalNumber(obj, "maxPerSecond", path, 0, 10000, &per_second); !s.ok()) return s;
  c->events_max_per_second = static_cast<int>(per_second);
  return absl::OkStatus();
}

/// An optional Kubernetes quantity: a string ("2", "500m", "8Gi") or a JSON number.
absl::StatusOr<std::optional<core::Quantity>> OptionalQuantity(simdjson::dom::object obj,
                                                               std::string_view key,
                                                               const JsonPath& path) {
  std::optional<simdjson::dom::element> el = OptionalField(obj, key);
  if (!el) return std::optional<core::Quantity>();
  const JsonPath field = path.Field(key);
  absl::StatusOr<core::Quantity> q = DecodeQuantity(*el, field);
  if (!q.ok()) return q.status();
  if (q->IsNegative()) {
    const std::string written = el->is_string() ? std::string(el->get_string().value_unsafe())
                                                : simdjson::minify(*el);
    return FieldError(field, StrCat("expected 0 (off) or more, got ", written));
  }
  return std::optional<core::Quantity>(*q);
}

/// The "gpu" section: settings of the GPU placement modules (policy/gpu).
absl::Status ParseGpu(simdjson::dom::object obj, const JsonPath& path, policy::GpuConfig* out) {
  if (auto s = CheckKnown(obj,
                          {"reservedCpuPerGpu", "reservedMemoryPerGpu", "minCpuPerGpu",
                           "minCpuPerGpuAction"},
                          path);
      !s.ok()) {
    return s;
  }
  // Bounds far above any real machine; they keep per-node products far from the int64 range.
  constexpr int64_t kMaxCpuMilli = int64_t{1000000} * 1000;  // a million cores
  constexpr int64_t kMaxMemory = int64_t{1} << 50;           // 1Pi
  for (auto [key, target] :
       {std::pair<std::string_view, int64_t*>{"reservedCpuPerGpu",
                                              &out->reserved_cpu_per_gpu_milli},
        {"minCpuPerGpu", &out->min_cpu_per_gpu_milli}}) {
    auto q = OptionalQuantity(obj, key, path);
    if (!q.ok()) return q.status();
    if (!q->has_value()) continue;
    const int64_t milli = (*q)->MilliValue();
    if (milli > kMaxCpuMilli) return FieldError(path.Field(key), "expected at most 1000000 cores");
    *target = milli;
  }
  auto memory = OptionalQuantity(obj, "reservedMemoryPerGpu", path);
  if (!memory.ok()) return memory.status();
  if (memory->has_value()) {
    const int64_t bytes = (*memory)->Value();
    if (bytes > kMaxMemory) {
      return FieldError(path.Field("reservedMemoryPerGpu"), "expected at most 1Pi");
    }
    out->reserved_memory_per_gpu = bytes;
  }
  auto action = OptionalString(obj, "minCpuPerGpuAction", path);
  if (!action.ok()) return action.status();
  if (action->has_value()) {
    if (**action == "warn") {
      out->min_cpu_action = policy::GpuConfig::MinCpuAction::kWarn;
    } else if (**action == "reject") {
      out->min_cpu_action = policy::GpuConfig::MinCpuAction::kReject;
    } else {
      return FieldError(path.Field("minCpuPerGpuAction"), "expected \"warn\" or \"reject\"");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view json, std::string_view source) {
  auto fail = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(StrCat(source, ": ", s.message()));
  };
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(json);
  if (!doc.ok()) return fail(doc.status());
  const JsonPath top;
  auto obj = AsObject(doc->root(), top);
  if (!obj.ok()) return fail(obj.status());
  if (auto s = CheckKnown(*obj,
                          {"schedulerName", "topologyLevels", "maxRequestBytes", "httpThreads",
                           "bindConfirmTimeoutSeconds", "policies", "binpack", "kubernetes", "gpu",
                           "pools", "topology", "gangs", "queues", "events"},
                          top);
      !s.ok()) {
    return fail(s);
  }
  Config c;
  auto name = OptionalString(*obj, "schedulerName", top);
  if (!name.ok()) return fail(name.status());
  if (name->has_value()) {
    if ((*name)->empty()) return fail(FieldError(top.Field("schedulerName"), "must not be empty"));
    c.scheduler_name = std::string(**name);
  }
  auto levels = StringList(*obj, "topologyLevels", top, c.topology_levels);
  if (!levels.ok()) return fail(levels.status());
  c.topology_levels = *std::move(levels);
  // "topology": {"levels": [...]} is the documented spelling (SPEC 4); "topologyLevels" stays
  // accepted. Both at once is ambiguous.
  auto topology = OptionalObject(*obj, "topology", top);
  if (!topology.ok()) return fail(topology.status());
  if (topology->has_value()) {
    const JsonPath tpath = top.Field("topology");
    if (OptionalField(*obj, "topologyLevels")) {
      return fail(FieldError(tpath, "give either topology.levels or topologyLevels, not both"));
    }
    if (auto s = CheckKnown(**topology, {"levels"}, tpath); !s.ok()) return fail(s);
    auto tl = StringList(**topology, "levels", tpath, c.topology_levels);
    if (!tl.ok()) return fail(tl.status());
    c.topology_levels = *std::move(tl);
  }
  for (size_t i = 0; i < c.topology_levels.size(); ++i) {
    if (c.topology_levels[i].empty()) {
      const JsonPath tpath = top.Field("topology");
      return fail(FieldError(tpath.Field("levels"),
                             StrCat("level ", i, " is an empty label key")));
    }
  }
  c.policy.gangs.topology_levels = c.topology_levels;
  auto max_bytes = OptionalInt(*obj, "maxRequestBytes", top);
  if (!max_bytes.ok()) return fail(max_bytes.status());
  if (max_bytes->has_value()) {
    if (**max_bytes < 1024 || **max_bytes > (int64_t{1} << 32)) {
      return fail(FieldError(top.Field("maxRequestBytes"), "expected 1024..4294967296"));
    }
    c.max_request_bytes = static_cast<size_t>(**max_bytes);
  }
  auto threads = OptionalInt(*obj, "httpThreads", top);
  if (!threads.ok()) return fail(threads.status());
  if (threads->has_value()) {
    if (**threads < 2 || **threads > 1024) {
      return fail(FieldError(top.Field("httpThreads"), "expected 2..1024"));
    }
    c.http_threads = static_cast<int>(**threads);
  }
  auto timeout = OptionalInt(*obj, "bindConfirmTimeoutSeconds", top);
  if (!timeout.ok()) return fail(timeout.status());
  if (timeout->has_value()) {
    if (**timeout < 1 || **timeout > 86400) {
      return fail(FieldError(top.Field("bindConfirmTimeoutSeconds"), "expected 1..86400"));
    }
    c.bind_confirm_timeout = absl::Seconds(**timeout);
  }
  auto policies = OptionalObject(*obj, "policies", top);
  if (!policies.ok()) return fail(policies.status());
  if (policies->has_value()) {
    if (auto s = ParsePolicies(**policies, top.Field("policies"), &c.policy); !s.ok()) return fail(s);
  }
  auto binpack = OptionalObject(*obj, "binpack", top);
  if (!binpack.ok()) return fail(binpack.status());
  if (binpack->has_value()) {
    const JsonPath bpath = top.Field("binpack");
    if (auto s = CheckKnown(**binpack, {"weights"}, bpath); !s.ok()) return fail(s);
    auto weights = OptionalObject(**binpack, "weights", bpath);
    if (!weights.ok()) return fail(weights.status());
    if (weights->has_value()) {
      c.policy.binpack.weights.clear();
      for (auto [res, w] : **weights) {
        int64_t v;
        if (w.get_int64().get(v) != simdjson::SUCCESS) {
          const JsonPath wpath = bpath.Field("weights");
          return fail(FieldError(wpath.Field(res), "expected an integer"));
        }
        c.policy.binpack.weights.emplace_back(std::string(res), v);
      }
    }
  }
  auto kubernetes = OptionalObject(*obj, "kubernetes", top);
  if (!kubernetes.ok()) return fail(kubernetes.status());
  if (kubernetes->has_value()) {
    if (auto s = ParseKubernetes(**kubernetes, top.Field("kubernetes"), &c); !s.ok()) return fail(s);
  }
  auto gpu = OptionalObject(*obj, "gpu", top);
  if (!gpu.ok()) return fail(gpu.status());
  if (gpu->has_value()) {
    if (auto s = ParseGpu(**gpu, top.Field("gpu"), &c.policy.gpu); !s.ok()) return fail(s);
  }
  auto pools = OptionalObject(*obj, "pools", top);
  if (!pools.ok()) return fail(pools.status());
  if (pools->has_value()) {
    if (auto s = ParsePools(**pools, top.Field("pools"), &c); !s.ok()) return fail(s);
  }
  auto gangs = OptionalObject(*obj, "gangs", top);
  if (!gangs.ok()) return fail(gangs.status());
  if (gangs->has_value()) {
    if (auto s = ParseGangs(**gangs, top.Field("gangs"), &c.policy.gangs); !s.ok()) return fail(s);
  }
  auto events = OptionalObject(*obj, "events", top);
  if (!events.ok()) return fail(events.status());
  if (events->has_value()) {
    if (auto s = ParseEvents(**events, top.Field("events"), &c); !s.ok()) return fail(s);
  }
  auto queues = OptionalObject(*obj, "queues", top);
  if (!queues.ok()) return fail(queues.status());
  if (queues->has_value()) {
    if (auto s = ParseQueues(**queues, top.Field("queues"), &c.policy.queues); !s.ok()) return fail(s);
  }
  return c;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(StrCat(path, ": read error"));
  return ss.str();
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

}  // namespace berth::extender
