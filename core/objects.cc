#include "core/objects.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/placement.h"
#include "core/strings.h"

namespace berth::core {

namespace {

uint32_t ReadLength(std::string_view data, size_t at) {
  uint32_t n;
  std::memcpy(&n, data.data() + at, sizeof(n));
  return n;
}

void AppendField(std::string* out, std::string_view s) {
  const auto n = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(s);
}

}  // namespace

template <class Fn>
void Labels::Scan(Fn fn) const {
  const std::string_view data = data_.view();
  size_t at = 0;
  while (at < data.size()) {
    const size_t begin = at;
    const uint32_t klen = ReadLength(data, at);
    const std::string_view key(data.data() + at + 4, klen);
    at += 4 + klen;
    const uint32_t vlen = ReadLength(data, at);
    const std::string_view value(data.data() + at + 4, vlen);
    at += 4 + vlen;
    if (!fn(Entry{key, value, begin, at})) return;
  }
}

void Labels::Set(std::string_view key, std::string_view value) {
  size_t insert_at = data_.size();
  bool replace = false;
  size_t replace_end = 0;
  Scan([&](const Entry& e) {
    if (e.key < key) return true;
    insert_at = e.begin;
    if (e.key == key) {
      replace = true;
      replace_end = e.end;
    }
    return false;
  });
  // Rebuilt at its exact size: labels are written once per object and kept, so no slack.
  const std::string_view data = data_.view();
  const size_t tail = replace ? replace_end : insert_at;
  std::string next;
  next.reserve(insert_at + 8 + key.size() + value.size() + (data.size() - tail));
  next.append(data.substr(0, insert_at));
  AppendField(&next, key);
  AppendField(&next, value);
  next.append(data.substr(tail));
  data_ = next;
}

size_t Labels::size() const {
  size_t n = 0;
  Scan([&](const Entry&) {
    ++n;
    return true;
  });
  return n;
}

std::optional<std::string_view> Labels::Get(std::string_view key) const {
  std::optional<std::string_view> found;
  Scan([&](const Entry& e) {
    if (e.key == key) found = e.value;
    return e.key < key;
  });
  return found;
}

std::vector<std::pair<std::string_view, std::string_view>> Labels::items() const {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  Scan([&](const Entry& e) {
    out.emplace_back(e.key, e.value);
    return true;
  });
  return out;
}

std::string_view PodPhaseName(PodPhase phase) {
  switch (phase) {
    case PodPhase::kPending: return "Pending";
    case PodPhase::kRunning: return "Running";
    case PodPhase::kSucceeded: return "Succeeded";
    case PodPhase::kFailed: return "Failed";
    case PodPhase::kUnknown: return "Unknown";
  }
  return "Unknown";
}

std::optional<PodPhase> ParsePodPhase(std::string_view text) {
  static constexpr std::array<PodPhase, 5> kAll = {PodPhase::kPending, PodPhase::kRunning,
                                                   PodPhase::kSucceeded, PodPhase::kFailed,
                                                   PodPhase::kUnknown};
  for (PodPhase p : kAll) {
    if (PodPhaseName(p) == text) return p;
  }
  return std::nullopt;
}

bool operator==(const Pod& a, const Pod& b) {
  const bool same_placement = a.placement == b.placement ||
                              (a.placement != nullptr && b.placement != nullptr && *a.placement == *b.placement);
  return same_placement && a.uid == b.uid && a.ns == b.ns && a.name == b.name &&
         a.scheduler_name == b.scheduler_name && a.node_name == b.node_name &&
         a.nominated_node == b.nominated_node && a.phase == b.phase && a.priority == b.priority &&
         a.priority_class == b.priority_class && a.creation == b.creation && a.started == b.started &&
         a.active_deadline_seconds == b.active_deadline_seconds && a.terminating == b.terminating &&
         a.labels == b.labels && a.annotations == b.annotations && a.request == b.request &&
         a.unknown_requests == b.unknown_requests;
}

std::string Pod::Key() const {
  std::string key;
  key.reserve(ns.size() + 1 + name.size());
  key.append(ns.view()).append("/").append(name.view());
  return key;
}

std::string_view SelectorOpName(SelectorOp op) {
  switch (op) {
    case SelectorOp::kIn: return "In";
    case SelectorOp::kNotIn: return "NotIn";
    case SelectorOp::kExists: return "Exists";
    case SelectorOp::kDoesNotExist: return "DoesNotExist";
  }
  return "Exists";
}

std::optional<SelectorOp> ParseSelectorOp(std::string_view text) {
  static constexpr std::array<SelectorOp, 4> kAll = {SelectorOp::kIn, SelectorOp::kNotIn,
                                                     SelectorOp::kExists,
                                                     SelectorOp::kDoesNotExist};
  for (SelectorOp op : kAll) {
    if (SelectorOpName(op) == text) return op;
  }
  return std::nullopt;
}

bool SelectorRequirement::Matches(const Labels& labels) const {
  const std::optional<std::string_view> value = labels.Get(key);
  const bool listed =
      value.has_value() && std::find(values.begin(), values.end(), *value) != values.end();
  switch (op) {
    case SelectorOp::kIn: return listed;
    case SelectorOp::kNotIn: return !listed;  // an absent key is in no set
    case SelectorOp::kExists: return value.has_value();
    case SelectorOp::kDoesNotExist: return !value.has_value();
  }
  return false;
}

absl::Status ValidateRequirement(const SelectorRequirement& req) {
  if (req.key.empty()) return absl::InvalidArgumentError("the key is required");
  const bool takes_values = req.op == SelectorOp::kIn || req.op == SelectorOp::kNotIn;
  if (takes_values && req.values.empty()) {
    return absl::InvalidArgumentError(
        StrCat("operator ", SelectorOpName(req.op), " needs at least one value"));
  }
  if (!takes_values && !req.values.empty()) {
    return absl::InvalidArgumentError(StrCat("operator ", SelectorOpName(req.op),
                                             " takes no values, got ", req.values.size()));
  }
  return absl::OkStatus();
}

bool LabelSelector::Matches(const Labels& labels) const {
  for (const auto& [key, value] : match_labels.items()) {
    const std::optional<std::string_view> have = labels.Get(key);
    if (!have || *have != value) return false;
  }
  return std::all_of(match_expressions.begin(), match_expressions.end(),
                     [&](const SelectorRequirement& r) { return r.Matches(labels); });
}

absl::Status LabelSelector::Validate() const {
  for (size_t i = 0; i < match_expressions.size(); ++i) {
    if (absl::Status s = ValidateRequirement(match_expressions[i]); !s.ok()) {
      return absl::InvalidArgumentError(StrCat("matchExpressions[", i, "]: ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::string LabelSelector::DebugString() const {
  std::string out;
  for (const auto& [key, value] : match_labels.items()) {
    StrAppend(&out, out.empty() ? "" : ",", key, "=", value);
  }
  for (const SelectorRequirement& r : match_expressions) {
    if (!out.empty()) out.push_back(',');
    switch (r.op) {
      case SelectorOp::kExists: StrAppend(&out, r.key); break;
      case SelectorOp::kDoesNotExist: StrAppend(&out, "!", r.key); break;
      case SelectorOp::kIn:
      case SelectorOp::kNotIn:
        StrAppend(&out, r.key, r.op == SelectorOp::kIn ? " in (" : " notin (");
        for (size_t i = 0; i < r.values.size(); ++i) {
          StrAppend(&out, i == 0 ? "" : ",", r.values[i]);
        }
        out.push_back(')');
        break;
    }
  }
  return out;
}

std::string PodGroup::Key() const { return StrCat(ns, "/", name); }

bool IsBerthKey(std::string_view key) {
  static constexpr std::array<std::string_view, 5> kPrefixes = {
      "berth.io/", "scheduling.x-k8s.io/", "scheduling.k8s.io/", "scheduling.volcano.sh/",
      "resource.aibee.cn/"};
  return std::any_of(kPrefixes.begin(), kPrefixes.end(),
                     [key](std::string_view p) { return key.substr(0, p.size()) == p; });
}

absl::StatusOr<ResourceVector> EffectiveRequest(const PodResourceSpec& spec,
                                                const ResourceNameScope* names) {
  ResourceId at = 0;
  auto overflow = [&](std::string_view sum) {
    const std::string resource =
        names != nullptr ? std::string(names->Name(at)) : StrCat("resource #", at);
    return absl::OutOfRangeError(StrCat("the ", sum, " requests of ", resource,
                                        " do not fit (more than 9223372036854775807 ",
                                        at == kCpu ? "millicores" : "units", ")"));
  };
  ResourceVector regular;
  for (const ResourceVector& c : spec.containers) {
    if (!regular.TryAdd(c, &at)) return overflow("sum of the containers'");
  }
  ResourceVector sidecars_so_far;
  ResourceVector init_max;
  for (const ContainerRequest& c : spec.init_containers) {
    if (c.sidecar) {
      if (!regular.TryAdd(c.requests, &at)) return overflow("sum of the containers' and sidecars'");
      if (!sidecars_so_far.TryAdd(c.requests, &at)) return overflow("sum of the sidecars'");
      init_max.MaxWith(sidecars_so_far);
    } else {
      ResourceVector with_sidecars = c.requests;
      if (!with_sidecars.TryAdd(sidecars_so_far, &at)) {
        return overflow("sum of an init container's and the sidecars'");
      }
      init_max.MaxWith(with_sidecars);
    }
  }
  ResourceVector effective = regular;
  effective.MaxWith(init_max);
  for (const auto& [id, amount] : spec.pod_level) effective.Set(id, amount);
  if (!effective.TryAdd(spec.overhead, &at)) return overflow("sum of the pod's and its overhead's");
  effective.Set(kPods, 1);
  return effective;
}

}  // namespace berth::core
