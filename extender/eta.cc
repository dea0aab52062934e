#include "extender/eta.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "nlohmann/json.hpp"

namespace berth::extender {

policy::RunTimeSource JobEta::Basis() const {
  policy::RunTimeSource basis = policy::RunTimeSource::kAnnotation;
  if (after.empty()) return policy::RunTimeSource::kUnknown;
  for (const After& a : after) basis = std::max(basis, a.source);
  return basis;
}

const JobEta* Forecast::ForPod(std::string_view key) const {
  auto it = by_pod.find(absl::string_view(key.data(), key.size()));
  return it == by_pod.end() ? nullptr : &jobs[it->second];
}

const JobEta* Forecast::ForJob(std::string_view key) const {
  auto it = by_job.find(absl::string_view(key.data(), key.size()));
  return it == by_job.end() ? nullptr : &jobs[it->second];
}

std::string AboutFromNow(absl::Duration d) {
  if (d < absl::Minutes(1)) return "now";
  const int64_t minutes = static_cast<int64_t>(std::llround(absl::ToDoubleMinutes(d)));
  if (minutes < 60) return StrCat("in about ", minutes, " min");
  const int64_t hours = minutes / 60, rest = minutes % 60;
  if (hours >= 48) return StrCat("in about ", (hours + 12) / 24, " days");
  return rest == 0 ? StrCat("in about ", hours, " h") : StrCat("in about ", hours, " h ", rest, " min");
}

namespace {

std::string ShortLevel(std::string_view key) {
  const size_t slash = key.rfind('/');
  return std::string(slash == std::string_view::npos ? key : key.substr(slash + 1));
}

// "a", "a and b", "a, b and c": each item as `name` words it.
template <class T, class Name>
std::string JobList(const std::vector<T>& items, Name name) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    StrAppend(&out, i == 0 ? "" : i + 1 == items.size() ? " and " : ", ", name(items[i]));
  }
  return out;
}

}  // namespace

std::string EtaSentence(const JobEta& eta, absl::Time now) {
  if (!eta.start) return StrCat("no start time can be given: ", eta.unknown);
  std::string s = StrCat("expected to start ", AboutFromNow(*eta.start - now));
  std::vector<std::string> placed;
  for (const std::string& n : eta.nodes) {
    if (!n.empty() && std::find(placed.begin(), placed.end(), n) == placed.end()) placed.push_back(n);
  }
  if (!eta.domain.empty() && placed.size() > 1) {
    StrAppend(&s, ", on ", ShortLevel(eta.domain_level), " ", eta.domain);
  } else if (placed.size() == 1) {
    StrAppend(&s, ", on node ", placed[0]);
  } else if (!placed.empty()) {
    StrAppend(&s, ", on ", placed.size(), " nodes");
  }
  if (!eta.after.empty()) {
    StrAppend(&s, ", after ", eta.after.size() == 1 ? "job " : "jobs ", JobList(eta.after, [](const JobEta::After& a) { return a.job; }),
              eta.after.size() == 1 ? " finishes" : " finish", " (expected ends from: ",
              policy::RunTimeSourceName(eta.Basis()), ")");
  }
  if (!eta.evicts.empty()) {
    StrAppend(&s, eta.after.empty() ? ", after " : ", and ", "evicting ",
              JobList(eta.evicts, [](const JobEta::Evicted& e) { return StrCat(e.job, " (", e.cause, ")"); }));
  }
  return s;
}

nlohmann::json EtaJson(const JobEta& eta, absl::Time now) {
  nlohmann::json j = {{"job", eta.job}, {"gang", eta.gang}, {"running", eta.running}, {"queue", eta.queue}};
  if (eta.start) {
    j["start"] = absl::FormatTime(absl::RFC3339_sec, *eta.start, absl::UTCTimeZone());
    j["waitSeconds"] = std::max(0.0, absl::ToDoubleSeconds(*eta.start - now));
    j["nodes"] = eta.nodes;
    if (!eta.domain.empty()) j["domain"] = {{"level", eta.domain_level}, {"path", eta.domain}};
    nlohmann::json after = nlohmann::json::array();
    for (const JobEta::After& a : eta.after) {
      after.push_back({{"job", a.job},
                       {"end", absl::FormatTime(absl::RFC3339_sec, a.end, absl::UTCTimeZone())},
                       {"source", policy::RunTimeSourceName(a.source)}});
    }
    j["after"] = std::move(after);
    nlohmann::json evicts = nlohmann::json::array();
    for (const JobEta::Evicted& v : eta.evicts) {
      evicts.push_back({{"job", v.job},
                        {"at", absl::FormatTime(absl::RFC3339_sec, v.at, absl::UTCTimeZone())},
                        {"cause", v.cause}});
    }
    j["evicts"] = std::move(evicts);
    if (!eta.after.empty()) j["basis"] = policy::RunTimeSourceName(eta.Basis());
  } else {
    j["start"] = nullptr;
    j["unknown"] = eta.unknown;
  }
  j["runTime"] = {{"source", policy::RunTimeSourceName(eta.run.source)}};
  if (eta.run.duration != absl::InfiniteDuration()) j["runTime"]["seconds"] = absl::ToDoubleSeconds(eta.run.duration);
  j["text"] = EtaSentence(eta, now);
  return j;
}

}  // namespace berth::extender
