// The gang side of the Service (SPEC 6.2, 6.3, 6.6): /debug/gangs. Admission of whole gangs,
// elastic growth, re-planning and timeouts are the framework's (policy/framework.cc).
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_format.h"
#include "core/strings.h"
#include "extender/service.h"
#include "extender/text_table.h"
#include "nlohmann/json.hpp"
#include "policy/gang/gang.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

std::string GangState(const policy::GangView& g) {
  if (g.group == nullptr) return "NoPodGroup";
  if (g.total() < g.min_member) return "WaitingForMembers";
  if (!g.admitted()) return g.record != nullptr && g.record->incomplete ? "Incomplete" : "Waiting";
  if (!g.reserved.empty()) return "Reserved";
  return "Running";
}

}  // namespace

Reply Service::DebugGangs(bool text) const {
  const policy::GangPlanner* planner = pipeline_->gangs();
  auto view = model_->Read();
  const absl::Time now = clock_->Now();
  policy::GangConfig defaults;
  const policy::GangConfig& config = planner != nullptr ? planner->config() : defaults;
  std::set<std::pair<std::string, std::string>> keys;
  view->ForEachGang([&](std::string_view ns, std::string_view name) {
    keys.emplace(std::string(ns), std::string(name));
  });
  view->ForEachPodGroup([&](const core::PodGroup& g) { keys.emplace(g.ns, g.name); });
  struct Row {
    policy::GangView g;
    std::string state;
    std::vector<std::string> nodes;
    std::string domain;
    int max_hops = 0;
  };
  std::vector<Row> rows;
  for (const auto& [ns, name] : keys) {
    Row r{.g = policy::ViewGang(*view, ns, name, config)};
    r.state = GangState(r.g);
    const std::vector<core::NodeSlot> slots = policy::PlacedNodes(*view, r.g);
    for (core::NodeSlot s : slots) r.nodes.push_back(view->node(s).node.name);
    std::sort(r.nodes.begin(), r.nodes.end());
    r.nodes.erase(std::unique(r.nodes.begin(), r.nodes.end()), r.nodes.end());
    if (planner != nullptr && !slots.empty()) {
      std::shared_ptr<const policy::Topology> topo = planner->topology(*view);
      const int depth = topo->CommonDepth(slots);
      r.max_hops = planner->MaxHops(*view, slots);
      if (depth == topo->levels() + 1) {
        r.domain = view->node(slots[0]).node.name;
      } else if (depth > 0) {
        r.domain = topo->domain(topo->DomainOf(slots[0], depth)).path;
      }
    }
    rows.push_back(std::move(r));
  }
  auto timeout_of = [&](const policy::GangView& g) { return policy::GangTimeout(g, config); };
  auto remaining = [&](const policy::GangView& g) -> std::optional<absl::Duration> {
    if (g.record == nullptr || g.reserved.empty() || g.record->deadline == absl::InfiniteFuture()) {
      return std::nullopt;
    }
    return std::max(absl::ZeroDuration(), absl::Trunc(g.record->deadline - now, absl::Seconds(1)));
  };
  if (text) {
    TextTable t({"NAMESPACE", "NAME", "STATE", "MIN", "BOUND", "RESERVED", "PENDING", "FULFILLMENT",
                 "TIMEOUT", "PLACEMENT", "MAX-HOPS"});
    for (const Row& r : rows) {
      const std::optional<absl::Duration> left = remaining(r.g);
      std::vector<std::string> cells = {r.g.ns, r.g.name, r.state};
      cells.push_back(StrCat(r.g.min_member));
      cells.push_back(StrCat(r.g.bound.size()));
      cells.push_back(StrCat(r.g.reserved.size()));
      cells.push_back(StrCat(r.g.pending.size()));
      cells.push_back(absl::StrFormat("%.2f", r.g.Fulfillment()));
      cells.push_back(left ? StrCat(absl::FormatDuration(*left), " left")
                           : absl::FormatDuration(timeout_of(r.g)));
      cells.push_back(r.nodes.empty() ? std::string("-")
                                      : (r.domain.empty() ? std::string("(cluster)") : r.domain));
      cells.push_back(r.nodes.empty() ? std::string("-") : StrCat(r.max_hops));
      t.AddRow(std::move(cells));
    }
    return TextReply(t.Render());
  }
  nlohmann::json arr = nlohmann::json::array();
  for (const Row& r : rows) {
    const std::optional<absl::Duration> left = remaining(r.g);
    nlohmann::json j = {
        {"namespace", r.g.ns},
        {"name", r.g.name},
        {"podGroup", r.g.group != nullptr},
        {"state", r.state},
        {"minMember", r.g.min_member},
        {"members", r.g.total()},
        {"bound", r.g.bound.size()},
        {"reserved", r.g.reserved.size()},
        {"pending", r.g.pending.size()},
        {"succeeded", r.g.succeeded},
        {"fulfillment", r.g.Fulfillment()},
        {"timeoutSeconds", absl::ToInt64Seconds(timeout_of(r.g))},
        {"timeouts", r.g.record != nullptr ? r.g.record->timeouts : 0},
        {"frozen", r.g.Frozen(now)},
        {"placement", {{"domain", r.domain}, {"nodes", r.nodes}, {"maxHops", r.max_hops}}}};
    if (left) j["secondsLeft"] = absl::ToInt64Seconds(*left);
    if (r.g.max_hops) j["maxHopsLimit"] = *r.g.max_hops;
    arr.push_back(std::move(j));
  }
  return JsonReply(200, {{"generation", view->generation()}, {"gangs", std::move(arr)}});
}

}  // namespace berth::extender
