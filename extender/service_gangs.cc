// The gang side of the Service (SPEC 6.2, 6.3, 6.6): admission of whole gangs into model
// reservations, elastic growth, re-planning of one member, timeouts and /debug/gangs.
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

absl::Duration TimeoutOf(const policy::GangView& g, const policy::GangConfig& config) {
  if (g.group != nullptr && g.group->schedule_timeout_seconds.has_value() &&
      *g.group->schedule_timeout_seconds > 0) {
    return absl::Seconds(*g.group->schedule_timeout_seconds);
  }
  return config.schedule_timeout;
}

// Under the model's write lock: every planned node still has the room the plan counted on
// (victims still there count as leaving), and no planned pod got room meanwhile.
absl::Status CheckStillFits(const core::ClusterState& state,
                            const std::vector<core::ReservationRequest>& requests,
                            const std::vector<core::Pod>& victims) {
  std::map<std::string, core::ResourceVector> need;
  for (const core::ReservationRequest& r : requests) {
    if (state.FindReservation(r.uid) != nullptr) {
      return absl::AbortedError(StrCat("pod uid ", r.uid, " got room meanwhile"));
    }
    need[r.node].Add(r.reservation.request);
  }
  for (const core::Pod& v : victims) {
    const core::PodState* now = state.FindPod(v.uid.view());
    if (now == nullptr || now->pod.terminating || now->pod.node_name != v.node_name) {
      return absl::AbortedError(StrCat("victim ", v.Key(), " changed meanwhile"));
    }
    if (auto it = need.find(v.node_name.str()); it != need.end()) it->second.Sub(v.request);
  }
  for (const auto& [node, want] : need) {
    const core::NodeState* n = state.FindNode(node);
    if (n == nullptr) return absl::AbortedError(StrCat("node ", node, " is gone"));
    for (size_t i = 0; i < want.size(); ++i) {
      const auto id = static_cast<core::ResourceId>(i);
      if (want.Get(id) > 0 && want.Get(id) > n->FreeOf(id)) {
        return absl::AbortedError(StrCat("node ", node, " no longer has the room"));
      }
    }
  }
  return absl::OkStatus();
}

std::string GangState(const policy::GangView& g) {
  if (g.group == nullptr) return "NoPodGroup";
  if (g.total() < g.min_member) return "WaitingForMembers";
  if (!g.admitted()) return g.record != nullptr && g.record->incomplete ? "Incomplete" : "Waiting";
  if (!g.reserved.empty()) return "Reserved";
  return "Running";
}

}  // namespace

std::optional<policy::NodeVerdict> Service::PrepareGang(const core::Pod& pod) {
  const policy::GangPlanner* planner = pipeline_->gangs();
  auto key = policy::GangOf(pod);
  if (planner == nullptr || !key) return std::nullopt;
  const std::string ns(key->first), name(key->second);
  // Another filter may change the model between planning and reserving; the reservation's
  // check then refuses and the gang is planned again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<core::ReservationRequest> requests;
    std::vector<core::Pod> victims;
    std::set<std::pair<std::string, std::string>> grown;  // gangs given elastic members
    bool admission = false;
    absl::Duration timeout;
    std::string summary;
    const absl::Time now = clock_->Now();
    {
      auto view = model_->Read();
      const core::PodState* p = view->FindPod(pod.uid.view());
      if (p == nullptr || !p->pod.node_name.empty()) return std::nullopt;
      if (const core::Reservation* r = view->FindReservation(pod.uid.view());
          r != nullptr && !r->gang.empty()) {
        return std::nullopt;
      }
      const policy::GangView g = policy::ViewGang(*view, ns, name, planner->config());
      if (g.group == nullptr || g.total() < g.min_member) return std::nullopt;
      const policy::EligibleFn eligible = pipeline_->Eligibility(*view, now);
      timeout = TimeoutOf(g, planner->config());
      if (!g.admitted()) {
        admission = true;
        const policy::CycleContext ctx{.state = *view,
                                       .pod = p->pod,
                                       .now = now,
                                       .explain = false,
                                       .pipeline = pipeline_.get()};
        policy::GangOutcome o = planner->PlanAdmission(ctx, g, eligible);
        if (!o.plan) return o.why;
        std::vector<std::string> evicted;
        for (const core::PodState* v : o.plan->victims) {
          victims.push_back(v->pod);
          evicted.push_back(v->pod.Key());
        }
        for (const policy::GangPlacement& pl : o.plan->placements) {
          requests.push_back(core::ReservationRequest{
              .uid = pl.member->pod.uid.str(),
              .node = view->node(pl.node).node.name,
              .reservation = core::Reservation{.request = pl.member->pod.request,
                                               .expires = now + timeout,
                                               .purpose = StrCat("gang ", g.Key()),
                                               .evicted = evicted,
                                               .gang = g.Key()}});
        }
        summary = StrCat(requests.size(), " members in ",
                         o.plan->domain.empty() ? "the whole cluster" : o.plan->domain,
                         ", max ", o.plan->max_hops, " hops");
      } else {
        for (const policy::GangPlacement& pl : planner->PlanElastic(*view, now, eligible, pipeline_.get())) {
          auto mk = policy::GangOf(pl.member->pod);
          if (!mk) continue;
          const policy::GangView mg = policy::ViewGang(*view, mk->first, mk->second, planner->config());
          grown.emplace(std::string(mk->first), std::string(mk->second));
          requests.push_back(core::ReservationRequest{
              .uid = pl.member->pod.uid.str(),
              .node = view->node(pl.node).node.name,
              .reservation = core::Reservation{.request = pl.member->pod.request,
                                               .expires = now + TimeoutOf(mg, planner->config()),
                                               .purpose = StrCat("gang ", mg.Key(), " (elastic)"),
                                               .gang = mg.Key()}});
        }
        if (requests.empty()) return std::nullopt;
      }
    }
    if (!victims.empty() && (evictor_ == nullptr || !evictor_->CanEvict().ok())) {
      // Evicting (elastic members of other gangs, borrowers of its pool) needs the evictor (the
      // leader, in Kubernetes mode).
      return policy::NodeVerdict{
          .fit = policy::Fit::kUnresolvable,
          .reason = policy::Reason::kGangNotPlaceable,
          .message = StrCat("berth: gang ", ns, "/", name,
                            ": fits only after evicting other pods, which this replica does not "
                            "do (not the leader)")};
    }
    const absl::Status held = model_->ReserveAll(
        requests, [&](const core::ClusterState& state) {
          return CheckStillFits(state, requests, victims);
        });
    if (absl::IsAborted(held)) {
      spdlog::debug("gang {}/{}: plan outdated ({}); planning again", ns, name, ToStd(held.message()));
      continue;
    }
    if (!held.ok()) {
      spdlog::info("gang {}/{}: reservation refused: {}", ns, name, ToStd(held.message()));
      return std::nullopt;
    }
    // Members other than this one may sit in kube-scheduler's backoff: have them tried again.
    QueueNudges(requests, pod.uid.view(), "room reserved for its gang");
    if (admission) {
      model_->UpdateGangRecord(ns, name, [&](core::GangRecord& r) {
        r.admitted = now;
        r.deadline = now + timeout;
        r.incomplete = false;
      });
      spdlog::info("gang {}/{} admitted: room reserved for {}", ns, name, summary);
      metrics_.gang_admissions.fetch_add(1, std::memory_order_relaxed);
      // An eviction refused for good undoes the admission: the room reserved for the members
      // is released and the gang is planned again at its next member's filter.
      std::vector<std::string> members;
      for (const core::ReservationRequest& r : requests) members.push_back(r.uid);
      auto undo = [this, ns, name, members](const absl::Status& s) {
        spdlog::warn("gang {}/{}: taking back elastic room failed ({}); its reservations are "
                     "released and it waits whole again", ns, name, ToStd(s.message()));
        for (const std::string& uid : members) model_->Unreserve(uid);
      };
      auto cancelled = std::make_shared<std::atomic<bool>>(false);
      for (const core::Pod& v : victims) {
        if (auto vk = policy::GangOf(v)) {
          model_->UpdateGangRecord(vk->first, vk->second, [&](core::GangRecord& r) { r.resized = now; });
        }
        const bool elastic = policy::GangOf(v).has_value();
        intents_.Record(Intent{.kind = IntentKind::kEviction,
                               .pod = v,
                               .for_pod = pod,
                               .why = StrCat("gang ", ns, "/", name,
                                             elastic ? " takes back elastic room" : " reclaims its pool"),
                               .cause = elastic ? "gang-elastic" : "reclaim",
                               .undo = undo,
                               .cancelled = cancelled});
      }
    } else {
      for (const auto& [gns, gname] : grown) {
        model_->UpdateGangRecord(gns, gname, [&](core::GangRecord& r) { r.resized = now; });
      }
      spdlog::info("elastic members placed: {} reservation(s) for {} gang(s)", requests.size(),
                   grown.size());
    }
    return std::nullopt;
  }
  return std::nullopt;
}

bool Service::ReplanGangMember(const core::Pod& pod, std::span<const std::string_view> candidates) {
  const policy::GangPlanner* planner = pipeline_->gangs();
  auto key = policy::GangOf(pod);
  if (planner == nullptr || !key) return false;
  core::Reservation moved;
  std::string node;
  {
    auto view = model_->Read();
    const core::PodState* p = view->FindPod(pod.uid.view());
    const core::Reservation* r = view->FindReservation(pod.uid.view());
    if (p == nullptr || r == nullptr || r->gang.empty()) return false;
    const policy::GangView g = policy::ViewGang(*view, key->first, key->second, planner->config());
    std::vector<core::NodeSlot> allowed;
    for (std::string_view c : candidates) {
      const core::NodeSlot s = view->FindNodeSlot(c);
      if (s != core::kNoNode && s != r->node) allowed.push_back(s);
    }
    const std::optional<core::NodeSlot> to = planner->ReplanMember(
        *view, g, *p, allowed, pipeline_->Eligibility(*view, clock_->Now()), clock_->Now(),
        pipeline_.get());
    if (!to) return false;
    moved = *r;
    node = view->node(*to).node.name;
    spdlog::info("gang {}/{}: member {} re-planned from node {} to node {} (not offered)",
                 key->first, key->second, pod.Key(), view->node(r->node).node.name, node);
  }
  const core::Reservation before = moved;
  const absl::Status s = model_->Reserve(
      pod.uid.view(), node, std::move(moved), [&](const core::ClusterState& state) -> absl::Status {
        const core::Reservation* r = state.FindReservation(pod.uid.view());
        if (r == nullptr || r->node != before.node) return absl::AbortedError("reservation changed");
        const core::NodeState* n = state.FindNode(node);
        for (size_t i = 0; n != nullptr && i < pod.request.size(); ++i) {
          const auto id = static_cast<core::ResourceId>(i);
          if (pod.request.Get(id) > 0 && pod.request.Get(id) > n->FreeOf(id)) {
            return absl::AbortedError("no room any more");
          }
        }
        return absl::OkStatus();
      });
  return s.ok();
}

void Service::GangHousekeeping(absl::Time now, const std::vector<std::string>& expired_gangs) {
  const policy::GangPlanner* planner = pipeline_->gangs();
  if (planner == nullptr) return;
  for (const std::string& key : expired_gangs) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos) continue;
    spdlog::warn("gang {}: its members did not bind before the reserved room ran out; it waits "
                 "whole again", key);
    model_->UpdateGangRecord(key.substr(0, slash), key.substr(slash + 1),
                             [](core::GangRecord& r) { ++r.timeouts; });
    metrics_.gang_timeouts.fetch_add(1, std::memory_order_relaxed);
  }
  struct Incomplete {
    std::string ns, name;
    std::vector<core::Pod> bound;
    int min = 0;
  };
  std::vector<Incomplete> incomplete;
  {
    auto view = model_->Read();
    view->ForEachGang([&](std::string_view ns, std::string_view name) {
      const policy::GangView g = policy::ViewGang(*view, ns, name, planner->config());
      if (g.record == nullptr || g.record->incomplete || now < g.record->deadline ||
          g.admitted() || g.bound.empty()) {
        return;
      }
      Incomplete inc{.ns = g.ns, .name = g.name, .min = g.min_member};
      for (const core::PodState* p : g.bound) inc.bound.push_back(p->pod);
      incomplete.push_back(std::move(inc));
    });
  }
  for (Incomplete& inc : incomplete) {
    model_->UpdateGangRecord(inc.ns, inc.name, [](core::GangRecord& r) { r.incomplete = true; });
    const bool release = planner->config().release_incomplete && evictor_ != nullptr &&
                         evictor_->CanEvict().ok();
    spdlog::warn("gang {}/{} is incomplete: {} of {} members bound when its time ran out{}",
                 inc.ns, inc.name, inc.bound.size(), inc.min,
                 release ? "; releasing the bound members" : "");
    if (!release) continue;
    // Nothing to take back when a release fails: the member keeps running, and the log and
    // berth_intents_total say so.
    for (const core::Pod& p : inc.bound) {
      intents_.Record(Intent{.kind = IntentKind::kEviction,
                             .pod = p,
                             .for_pod = p,
                             .why = StrCat("gang ", inc.ns, "/", inc.name, " could not complete in time"),
                             .cause = "gang-incomplete"});
    }
  }
}

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
  auto timeout_of = [&](const policy::GangView& g) { return TimeoutOf(g, config); };
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
