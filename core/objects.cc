#include "core/objects.h"

#include <algorithm>
#include <array>

namespace berth::core {

void Labels::Set(std::string key, std::string value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& kv, const std::string& k) { return kv.first < k; });
  if (it != items_.end() && it->first == key) {
    it->second = std::move(value);
    return;
  }
  items_.insert(it, {std::move(key), std::move(value)});
}

std::optional<std::string_view> Labels::Get(std::string_view key) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& kv, std::string_view k) { return kv.first < k; });
  if (it != items_.end() && it->first == key) return std::string_view(it->second);
  return std::nullopt;
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

bool IsBerthKey(std::string_view key) {
  static constexpr std::array<std::string_view, 5> kPrefixes = {
      "berth.io/", "scheduling.x-k8s.io/", "scheduling.k8s.io/", "scheduling.volcano.sh/",
      "resource.aibee.cn/"};
  return std::any_of(kPrefixes.begin(), kPrefixes.end(),
                     [key](std::string_view p) { return key.substr(0, p.size()) == p; });
}

ResourceVector EffectiveRequest(const PodResourceSpec& spec) {
  ResourceVector regular;
  for (const ResourceVector& c : spec.containers) regular.Add(c);
  ResourceVector sidecars_so_far;
  ResourceVector init_max;
  for (const ContainerRequest& c : spec.init_containers) {
    if (c.sidecar) {
      regular.Add(c.requests);
      sidecars_so_far.Add(c.requests);
      init_max.MaxWith(sidecars_so_far);
    } else {
      ResourceVector with_sidecars = c.requests;
      with_sidecars.Add(sidecars_so_far);
      init_max.MaxWith(with_sidecars);
    }
  }
  ResourceVector effective = regular;
  effective.MaxWith(init_max);
  for (const auto& [id, amount] : spec.pod_level) effective.Set(id, amount);
  effective.Add(spec.overhead);
  effective.Set(kPods, 1);
  return effective;
}

}  // namespace berth::core
