#include "extender/config.h"

#include <cmath>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <algorithm>
#include <iterator>

#include "core/strings.h"
#include "extender/json.h"
#include "policy/settings.h"

namespace berth::extender {
namespace {

using policy::CheckKeys;
using policy::ReadSeconds;
using policy::Settings;

/// A JSON value as a settings tree (paths are set by Settings::At).
Settings ToSettings(simdjson::dom::element el) {
  switch (el.type()) {
    case simdjson::dom::element_type::NULL_VALUE: return Settings();
    case simdjson::dom::element_type::BOOL: return Settings(el.get_bool().value_unsafe());
    case simdjson::dom::element_type::INT64: return Settings(el.get_int64().value_unsafe());
    // Beyond int64: a number, not an integer (as simdjson's get_int64 refuses it).
    case simdjson::dom::element_type::UINT64:
      return Settings(static_cast<double>(el.get_uint64().value_unsafe()));
    case simdjson::dom::element_type::DOUBLE: return Settings(el.get_double().value_unsafe());
    case simdjson::dom::element_type::STRING:
      return Settings(std::string(el.get_string().value_unsafe()));
    case simdjson::dom::element_type::ARRAY: {
      std::vector<Settings> items;
      simdjson::dom::array array;
      if (el.get_array().get(array) != simdjson::SUCCESS) return Settings();
      for (simdjson::dom::element item : array) {
        items.push_back(ToSettings(item));
      }
      return Settings::List(std::move(items));
    }
    case simdjson::dom::element_type::OBJECT: {
      std::vector<Settings::Entry> entries;
      simdjson::dom::object object;
      if (el.get_object().get(object) != simdjson::SUCCESS) return Settings();
      for (auto [key, value] : object) {
        entries.emplace_back(std::string(key), ToSettings(value));
      }
      return Settings::Map(std::move(entries));
    }
  }
  return Settings();
}

/// The map under `key`, or an empty map placed where it would be when the field is absent.
absl::StatusOr<Settings> Section(const Settings& parent, std::string_view key) {
  absl::StatusOr<const Settings*> section = policy::ReadMap(parent, key);
  if (!section.ok()) return section.status();
  if (*section != nullptr) return **section;
  return Settings::Map({}).At(parent.path().empty() ? std::string(key)
                                                    : StrCat(parent.path(), ".", key));
}

absl::Status ParsePolicies(const Settings& obj, policy::PolicyConfig* out) {
  if (auto s = CheckKeys(obj, {"filters", "scores", "preempt", "admission", "order", "reclaim"});
      !s.ok()) {
    return s;
  }
  for (auto [key, target] :
       {std::pair<std::string_view, std::vector<std::string>*>{"filters", &out->filters},
        {"preempt", &out->preempt},
        {"admission", &out->admission},
        {"order", &out->order},
        {"reclaim", &out->reclaim}}) {
    if (auto s = policy::ReadStringList(obj, key, target); !s.ok()) return s;
  }
  const Settings* scores = obj.Find("scores");
  if (scores == nullptr) return absl::OkStatus();
  if (scores->kind() != Settings::Kind::kList) {
    return scores->Error(StrCat("expected an array, got ", scores->TypeName()));
  }
  out->scores.clear();
  for (const Settings& item : scores->items()) {
    if (item.is_null()) return item.Error("expected an object, got null");
    if (auto s = CheckKeys(item, {"name", "weight"}); !s.ok()) return s;
    std::optional<std::string> name;
    if (auto s = policy::ReadString(item, "name", &name); !s.ok()) return s;
    if (!name) return item.ErrorAt("name", "required");
    std::optional<int64_t> weight;
    if (auto s = policy::ReadInt(item, "weight", &weight); !s.ok()) return s;
    out->scores.emplace_back(*std::move(name), weight.value_or(1));
  }
  return absl::OkStatus();
}

absl::Status ParseLeaderElection(const Settings& obj, kube::LeaderElectionConfig* out) {
  if (auto s = CheckKeys(obj, {"enabled", "mode", "leaseName", "leaseNamespace", "identity",
                               "leaseDurationSeconds", "renewDeadlineSeconds",
                               "retryPeriodSeconds"});
      !s.ok()) {
    return s;
  }
  if (auto s = policy::ReadBool(obj, "enabled", &out->enabled); !s.ok()) return s;
  using Mode = kube::LeaderElectionConfig::Mode;
  if (auto s = policy::ReadChoice<Mode>(obj, "mode",
                                        {{"acquire", Mode::kAcquire}, {"follow", Mode::kFollow}},
                                        &out->mode);
      !s.ok()) {
    return s;
  }
  for (auto [key, target] : {std::pair<std::string_view, std::string*>{"leaseName", &out->lease_name},
                             {"leaseNamespace", &out->lease_namespace},
                             {"identity", &out->identity}}) {
    std::optional<std::string> v;
    if (auto s = policy::ReadString(obj, key, &v); !s.ok()) return s;
    if (v) *target = *std::move(v);
  }
  if (out->lease_name.empty()) {
    return obj.ErrorAt("leaseName", "must not be empty");
  }
  for (auto [key, target] :
       {std::pair<std::string_view, absl::Duration*>{"leaseDurationSeconds", &out->lease_duration},
        {"renewDeadlineSeconds", &out->renew_deadline},
        {"retryPeriodSeconds", &out->retry_period}}) {
    if (auto s = ReadSeconds(obj, key, 0.01, 3600, target); !s.ok()) return s;
  }
  if (absl::Status s = kube::LeaderElector::Validate(*out); !s.ok()) {
    return obj.Error(ToStd(s.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseKubernetes(const Settings& obj, Config* c) {
  if (auto s = CheckKeys(obj, {"watchTimeoutSeconds", "leaderElection"}); !s.ok()) return s;
  if (auto s = ReadSeconds(obj, "watchTimeoutSeconds", 0.1, 3600, &c->watch_timeout); !s.ok()) {
    return s;
  }
  absl::StatusOr<const Settings*> le = policy::ReadMap(obj, "leaderElection");
  if (!le.ok()) return le.status();
  if (*le != nullptr) return ParseLeaderElection(**le, &c->leader_election);
  return absl::OkStatus();
}

/// The "events" section: how often Events about waiting pods are written.
absl::Status ParseEvents(const Settings& obj, Config* c) {
  if (auto s = CheckKeys(obj, {"repeatAfterSeconds", "minIntervalSeconds", "maxPerSecond",
                               "nudgesPerSecond"});
      !s.ok()) {
    return s;
  }
  if (auto s = ReadSeconds(obj, "repeatAfterSeconds", 1, 86400, &c->events_repeat_after); !s.ok()) {
    return s;
  }
  if (auto s = ReadSeconds(obj, "minIntervalSeconds", 0, 86400, &c->events_min_interval); !s.ok()) {
    return s;
  }
  double per_second = c->events_max_per_second;
  if (auto s = policy::ReadNumber(obj, "maxPerSecond", 0, 10000, &per_second); !s.ok()) return s;
  c->events_max_per_second = static_cast<int>(per_second);
  double nudges = c->nudges_per_second;
  if (auto s = policy::ReadNumber(obj, "nudgesPerSecond", 1, 10000, &nudges); !s.ok()) return s;
  c->nudges_per_second = static_cast<int>(nudges);
  return absl::OkStatus();
}

/// The "eta" section: the ETA forecast's interval and horizon, and its annotation rate.
absl::Status ParseEta(const Settings& obj, Config* c) {
  if (auto s = CheckKeys(obj, {"intervalSeconds", "horizonHours", "annotationsPerSecond", "maxPassSeconds"});
      !s.ok()) {
    return s;
  }
  if (auto s = policy::ReadSecondsOrZero(obj, "intervalSeconds", 1, 86400, &c->eta_interval); !s.ok()) {
    return s;
  }
  double hours = absl::ToDoubleHours(c->eta_horizon);
  if (auto s = policy::ReadNumber(obj, "horizonHours", 1, 8760, &hours); !s.ok()) return s;
  c->eta_horizon = absl::Seconds(std::round(hours * 3600));
  double per_second = c->eta_annotations_per_second;
  if (auto s = policy::ReadNumber(obj, "annotationsPerSecond", 0, 1000, &per_second); !s.ok()) return s;
  c->eta_annotations_per_second = static_cast<int>(per_second);
  if (auto s = ReadSeconds(obj, "maxPassSeconds", 1, 3600, &c->eta_max_pass); !s.ok()) return s;
  return absl::OkStatus();
}

/// The top-level fields that are the extender's own; every other section belongs to a policy
/// module (Registry::SettingsNames).
constexpr std::string_view kOwnFields[] = {
    "schedulerName", "topologyLevels", "maxRequestBytes", "httpThreads",
    "bindConfirmTimeoutSeconds", "filterAnswer", "policies", "kubernetes", "topology", "events", "eta"};

/// An optional integer field within [min, max]; the error gives the range.
absl::Status ReadIntRange(const Settings& obj, std::string_view key, int64_t min, int64_t max,
                          std::optional<int64_t>* out) {
  if (auto s = policy::ReadInt(obj, key, out); !s.ok()) return s;
  if (*out && (**out < min || **out > max)) {
    return obj.Find(key)->Error(StrCat("expected ", min, "..", max, ", got ", **out));
  }
  return absl::OkStatus();
}

absl::Status ParseTop(const Settings& top, const policy::Registry& registry, Config* c) {
  if (auto s = policy::ExpectMap(top); !s.ok()) return s;
  if (top.is_null()) return top.Error("expected an object, got null");
  std::set<std::string, std::less<>> known(std::begin(kOwnFields), std::end(kOwnFields));
  for (std::string& name : registry.SettingsNames()) known.insert(std::move(name));
  for (const auto& [key, value] : top.entries()) {
    if (known.contains(key)) continue;
    std::string list;
    for (std::string_view k : known) StrAppend(&list, list.empty() ? "" : ", ", k);
    return value.Error(StrCat("unknown field (known: ", list, ")"));
  }
  std::optional<std::string> name;
  if (auto s = policy::ReadString(top, "schedulerName", &name); !s.ok()) return s;
  if (name) {
    if (name->empty()) return top.Find("schedulerName")->Error("must not be empty");
    c->scheduler_name = *std::move(name);
  }
  if (auto s = policy::ReadStringList(top, "topologyLevels", &c->topology_levels); !s.ok()) {
    return s;
  }
  // "topology": {"levels": [...]} is the documented spelling (SPEC 4); "topologyLevels" stays
  // accepted. Both at once is ambiguous.
  absl::StatusOr<const Settings*> topology = policy::ReadMap(top, "topology");
  if (!topology.ok()) return topology.status();
  if (*topology != nullptr) {
    if (top.Find("topologyLevels") != nullptr) {
      return (*topology)->Error("give either topology.levels or topologyLevels, not both");
    }
    if (auto s = CheckKeys(**topology, {"levels"}); !s.ok()) return s;
    if (auto s = policy::ReadStringList(**topology, "levels", &c->topology_levels); !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < c->topology_levels.size(); ++i) {
    if (c->topology_levels[i].empty()) {
      return top.ErrorAt("topology.levels", StrCat("level ", i, " is an empty label key"));
    }
  }
  std::optional<int64_t> max_bytes;
  if (auto s = ReadIntRange(top, "maxRequestBytes", 1024, int64_t{1} << 32, &max_bytes); !s.ok()) {
    return s;
  }
  if (max_bytes) c->max_request_bytes = static_cast<size_t>(*max_bytes);
  std::optional<int64_t> threads;
  if (auto s = ReadIntRange(top, "httpThreads", 2, 1024, &threads); !s.ok()) return s;
  if (threads) c->http_threads = static_cast<int>(*threads);
  std::optional<int64_t> timeout;
  if (auto s = ReadIntRange(top, "bindConfirmTimeoutSeconds", 1, 86400, &timeout); !s.ok()) {
    return s;
  }
  if (timeout) c->bind_confirm_timeout = absl::Seconds(*timeout);
  if (auto s = policy::ReadChoice<FilterAnswer>(
          top, "filterAnswer", {{"all", FilterAnswer::kAll}, {"best", FilterAnswer::kBest}},
          &c->filter_answer);
      !s.ok()) {
    return s;
  }
  using SectionParser = absl::Status (*)(const Settings&, Config*);
  for (auto [key, parse] : {std::pair<std::string_view, SectionParser>{
                                "policies",
                                [](const Settings& s, Config* c) {
                                  return ParsePolicies(s, &c->policy);
                                }},
                            {"kubernetes", &ParseKubernetes},
                            {"events", &ParseEvents},
                            {"eta", &ParseEta}}) {
    absl::StatusOr<const Settings*> section = policy::ReadMap(top, key);
    if (!section.ok()) return section.status();
    if (*section == nullptr) continue;
    if (auto s = parse(**section, c); !s.ok()) return s;
  }
  // "pools": statusIntervalSeconds is the Pool.status writer's (0 turns it off); the rest
  // belongs to the pools module.
  absl::StatusOr<Settings> pools = Section(top, "pools");
  if (!pools.ok()) return pools.status();
  if (auto s = policy::ReadSecondsOrZero(*pools, "statusIntervalSeconds", 0.1, 3600,
                                         &c->pool_status_interval);
      !s.ok()) {
    return s;
  }
  // Every module section the file has, each read by its own module.
  for (const auto& [key, value] : top.entries()) {
    if (std::find(std::begin(kOwnFields), std::end(kOwnFields), key) != std::end(kOwnFields) ||
        value.is_null()) {
      continue;
    }
    const Settings section = key == "pools" ? pools->Without("statusIntervalSeconds") : value;
    if (auto s = policy::ExpectMap(section); !s.ok()) return s;
    if (auto s = registry.ParseSettings(key, section, &c->policy); !s.ok()) return s;
  }
  // The fabric's levels are the top-level "topology" section's.
  c->policy.gangs.topology_levels = c->topology_levels;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view json, std::string_view source,
                                   const policy::Registry& registry) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(json);
  Config c;
  absl::Status s = doc.ok() ? ParseTop(ToSettings(doc->root()).At(""), registry, &c) : doc.status();
  if (!s.ok()) return absl::InvalidArgumentError(StrCat(source, ": ", s.message()));
  return c;
}

absl::StatusOr<Config> ParseConfig(std::string_view json, std::string_view source) {
  return ParseConfig(json, source, policy::BuildDefaultRegistry());
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
