// POST /v1/whatif (issue 18 part 2): the objects a user would apply, decided as the verbs would
// decide them next, on a copy of berth's state that is thrown away.
//
// The copy is exact: ClusterModel::Fork copies every object, the bind ledger, the reservations
// and the gang records; the fair-share book's memory (flows, charges, the last plan) is copied
// into the copy's pipeline, which is built from the same policy configuration. Then the copy
// runs what kube-scheduler would run, through the copy's own Service and its real verbs:
//   1. kube-scheduler's own filters: nodes that are present, schedulable, allowed by the pod's
//      node selector, affinity and tolerations, and with room by kube-scheduler's accounting
//      (bound pods and binds in flight; not berth's reservations, which kube-scheduler does not
//      know); every such node is a candidate (percentageOfNodesToScore: 100, as the manifests
//      ship);
//   2. berth's filter on them; if some fit, berth's prioritize, the best score wins (ties: the
//      first by name; kube-scheduler draws at random among them, so all of them are named),
//      and the bind, so the next pod of the request sees it;
//   3. if none fit: the reclaim berth's filter started (its evictions, carried out on the copy
//      by an evictor that only records them), or else kube-scheduler's preemption as it
//      chooses victims (on each node, the lower-priority pods it must remove, fewest by
//      priority), reviewed by berth's preempt verb, and the candidate kube-scheduler would
//      pick (lowest highest victim priority, then lowest sum of priorities, then fewest); or,
//      in Kubernetes mode, for a pod kube-scheduler's own checks keep from berth's filter, the
//      reclaim berth's housekeeping starts for it a few seconds later;
//   4. otherwise the reasons berth's filter gave, by reason code (the codes of
//      /debug/explain).
// A gang needs nothing special: its first member's filter admits it whole (plans and reserves
// every member), and each member's filter then answers its reserved node.

#include <algorithm>
#include <map>
#include <set>

#include "core/placement.h"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/eta.h"
#include "extender/protocol.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "policy/queue/queue.h"
#include "policy/registry.h"
#include "policy/topology/topology.h"
#include "spdlog/spdlog.h"
#include "yaml-cpp/yaml.h"

namespace berth::extender {
namespace {

using Json = nlohmann::json;

/// Objects in one what-if at most: each pod costs a scheduling cycle over every node.
constexpr size_t kMaxWhatIfObjects = 1000;

Reply WhatIfError(int status, std::string_view message) {
  return Reply{.status = status, .body = Json{{"error", message}}.dump() + "\n"};
}

// A YAML scalar as sigs.k8s.io/yaml reads it into JSON: plain true/false, null and numbers are
// typed; everything quoted, and every other plain scalar, is a string.
Json ScalarToJson(const YAML::Node& n) {
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted
  if (v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "false" || v == "False" || v == "FALSE") return false;
  if (v.empty() || v == "null" || v == "Null" || v == "NULL" || v == "~") return nullptr;
  Json number = Json::parse(v, nullptr, /*allow_exceptions=*/false);
  if (number.is_number()) return number;
  return v;
}

absl::StatusOr<Json> YamlToJson(const YAML::Node& n, int depth = 0) {
  if (depth > 64) return absl::InvalidArgumentError("YAML nested deeper than 64 levels");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return Json(nullptr);
    case YAML::NodeType::Scalar: return ScalarToJson(n);
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const YAML::Node& e : n) {
        absl::StatusOr<Json> v = YamlToJson(e, depth + 1);
        if (!v.ok()) return v;
        a.push_back(*std::move(v));
      }
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) return absl::InvalidArgumentError("a YAML map key is not a scalar");
        absl::StatusOr<Json> v = YamlToJson(kv.second, depth + 1);
        if (!v.ok()) return v;
        o[kv.first.Scalar()] = *std::move(v);
      }
      return o;
    }
  }
  return Json(nullptr);
}

// The objects of the body: one JSON object, a JSON array, or YAML documents; a List's items
// count as objects of their own.
absl::StatusOr<std::vector<Json>> ReadObjects(std::string_view body) {
  std::vector<Json> docs;
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return absl::InvalidArgumentError("the body is empty: expected pods (JSON or YAML)");
  if (body[first] == '{' || body[first] == '[') {
    Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON");
    if (j.is_array()) {
      for (Json& e : j) docs.push_back(std::move(e));
    } else {
      docs.push_back(std::move(j));
    }
  } else {
    try {
      for (const YAML::Node& doc : YAML::LoadAll(std::string(body))) {
        if (doc.IsNull()) continue;  // "---" with nothing after it
        absl::StatusOr<Json> j = YamlToJson(doc);
        if (!j.ok()) return j.status();
        docs.push_back(*std::move(j));
      }
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(StrCat("the body is neither JSON nor valid YAML: line ",
                                               e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
    }
  }
  std::vector<Json> out;
  for (Json& d : docs) {
    if (d.is_object() && d.value("kind", "") == "List" && d.contains("items") && d["items"].is_array()) {
      for (Json& e : d["items"]) out.push_back(std::move(e));
    } else {
      out.push_back(std::move(d));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("the body holds no object: expected pods (JSON or YAML)");
  if (out.size() > kMaxWhatIfObjects) {
    return absl::InvalidArgumentError(StrCat("the body holds ", out.size(), " objects; a what-if takes at most ",
                                             kMaxWhatIfObjects));
  }
  return out;
}

// An evictor that carries nothing out: it records what the copy's decisions would evict.
class RecordingEvictor final : public EvictorInterface {
 public:
  absl::Status Evict(const core::Pod& victim, const core::Pod& for_pod, std::string_view why) override {
    evicted.push_back({victim, for_pod.Key(), std::string(why)});
    return absl::OkStatus();
  }
  struct Eviction {
    core::Pod victim;
    std::string for_pod, why;
  };
  std::vector<Eviction> evicted;
};

// Binds on the copy only, as standalone mode does.
class ForkBinder final : public BinderInterface {
 public:
  explicit ForkBinder(core::ClusterModel* model) : model_(model) {}
  absl::Status Bind(const core::Pod& pod, std::string_view) override {
    return model_->ConfirmBindLocally(pod.uid);
  }

 private:
  core::ClusterModel* model_;
};

// The work a victim has done so far: its requests times how long it has run, from its
// status.startTime, or its creation when the start is not known.
Json VictimJson(const core::Pod& v, absl::Time now, std::string_view node, std::string_view queue,
                double* gpu_hours, double* cpu_hours) {
  const absl::Time since = v.started != absl::InfinitePast() ? v.started : v.creation;
  const char* source = v.started != absl::InfinitePast() ? "startTime"
                       : v.creation != absl::InfinitePast() ? "creationTimestamp"
                                                            : "unknown";
  const double hours = since == absl::InfinitePast() ? 0 : std::max(0.0, absl::ToDoubleHours(now - since));
  const double gpus = static_cast<double>(v.request.Get(core::kNvidiaGpu));
  const double cpus = static_cast<double>(v.request.Get(core::kCpu)) / 1000.0;
  *gpu_hours += gpus * hours;
  *cpu_hours += cpus * hours;
  return {{"pod", v.Key()},
          {"node", node},
          {"queue", queue},
          {"priority", v.priority},
          {"priorityClass", v.priority_class.str()},
          {"ranHours", hours},
          {"ranSince", source},
          {"gpuHoursLost", gpus * hours},
          {"cpuHoursLost", cpus * hours}};
}

}  // namespace

Reply Service::WhatIf(std::string_view body, bool text) const {
  if (options_.policy == nullptr) {
    return WhatIfError(503, "what-ifs are not available: this service was built without its policy configuration");
  }
  if (whatif_running_.exchange(true)) {
    return WhatIfError(429, "another what-if is running; ask again when it is done (they copy the whole model)");
  }
  struct Done {
    std::atomic<bool>* running;
    ~Done() { running->store(false); }
  } done{&whatif_running_};

  absl::StatusOr<std::vector<Json>> objects = ReadObjects(body);
  if (!objects.ok()) return WhatIfError(400, ToStd(objects.status().message()));

  // ---- the copy: model, pipeline (with the book's memory), service ----------------------------
  const absl::Time now = clock_->Now();
  core::FakeClock clock(now);
  std::unique_ptr<core::ClusterModel> model = model_->Fork(&clock);
  absl::StatusOr<std::unique_ptr<policy::Pipeline>> pipeline =
      policy::BuildDefaultRegistry().Build(*options_.policy, model->resources());
  if (!pipeline.ok()) return WhatIfError(500, StrCat("what-if: policies: ", pipeline.status().message()));
  if (policy::FairShare* mine = (*pipeline)->fair_share(); mine != nullptr && pipeline_->fair_share() != nullptr) {
    mine->CopyBookFrom(*pipeline_->fair_share());
  }
  ServiceOptions fork_options = options_;
  fork_options.intents = {};
  // The what-if reads every verdict and asks prioritize itself (the best-scored nodes are then
  // its answer, as filterAnswer "best" would name them): the fork's filter need not score.
  fork_options.filter_answer = FilterAnswer::kAll;
  ForkBinder binder(model.get());
  RecordingEvictor evictor;
  Service fork(fork_options, model.get(), *std::move(pipeline), &binder, &clock);
  fork.SetEvictor(&evictor);
  fork.SetReady(true);

  // ---- the objects, as the API server would store them ----------------------------------------
  Json events = Json::array();
  std::vector<std::pair<std::string, std::string>> pod_keys;  // (namespace, name), in order
  for (size_t i = 0; i < objects->size(); ++i) {
    Json& o = (*objects)[i];
    const std::string where = StrCat("object ", i + 1);
    if (!o.is_object()) return WhatIfError(400, StrCat(where, ": expected an object, got ", o.type_name()));
    const std::string kind = o.value("kind", "");
    if (kind != "Pod" && kind != "PodGroup") {
      return WhatIfError(400, StrCat(where, ": kind \"", kind.substr(0, 64),
                                     "\": a what-if takes Pods and PodGroups (scheduling.x-k8s.io/v1alpha1)"));
    }
    if (!o.contains("metadata") || !o["metadata"].is_object()) o["metadata"] = Json::object();
    Json& meta = o["metadata"];
    if (!meta.contains("name") || !meta["name"].is_string() || meta["name"].get<std::string>().empty()) {
      return WhatIfError(400, StrCat(where, " (", kind, "): metadata.name: required"));
    }
    if (!meta.contains("namespace") || !meta["namespace"].is_string()) meta["namespace"] = "default";
    if (kind == "Pod") {
      const std::string ns = meta["namespace"], name = meta["name"];
      if (!o.contains("spec") || !o["spec"].is_object()) o["spec"] = Json::object();
      Json& spec = o["spec"];
      if (!spec.contains("schedulerName")) spec["schedulerName"] = options_.scheduler_name;
      if (spec["schedulerName"] != options_.scheduler_name) {
        return WhatIfError(400, StrCat(where, " (pod ", ns, "/", name, "): spec.schedulerName is not \"",
                                       options_.scheduler_name, "\": berth decides only for its own pods"));
      }
      if (spec.contains("nodeName") && spec["nodeName"].is_string() && !spec["nodeName"].get<std::string>().empty()) {
        return WhatIfError(400, StrCat(where, " (pod ", ns, "/", name, "): spec.nodeName is set: the pod is placed already"));
      }
      // The uid the API server would give; one the user set is kept (a pod submitted again).
      if (!meta.contains("uid") || !meta["uid"].is_string()) meta["uid"] = StrCat("whatif:", ns, "/", name);
      meta.erase("creationTimestamp");  // it is created now
      if (o.contains("status")) o.erase("status");
      pod_keys.emplace_back(ns, name);
    }
    events.push_back({{"type", "ADDED"}, {"object", o}});
  }
  if (pod_keys.empty()) return WhatIfError(400, "the body holds no Pod: a PodGroup alone places nothing");
  {
    const std::string text_events = events.dump();
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text_events);
    if (!doc.ok()) return WhatIfError(400, ToStd(doc.status().message()));
    absl::StatusOr<std::vector<core::ModelEvent>> decoded = DecodeWatchEvents(doc->root(), model->resources());
    if (!decoded.ok()) return WhatIfError(400, ToStd(decoded.status().message()));
    fork.StampCreation(&*decoded);
    const core::ApplyStats stats = model->Apply(*decoded);
    if (!stats.refused.empty()) return WhatIfError(400, stats.refused.front());
  }

  // ---- one scheduling cycle per pod, in order ----------------------------------------------
  std::shared_ptr<const policy::Topology> topology;
  {
    auto view = model->Read();
    topology = policy::Topology::Build(*view, options_.topology_levels);
  }
  Json pods = Json::array();
  std::vector<core::NodeSlot> placed_slots;
  double gpu_hours = 0, cpu_hours = 0;
  bool all_placed = true, needs_room = false;
  for (const auto& key : pod_keys) {
    const std::string& ns = key.first;
    const std::string& name = key.second;
    core::Pod pod;
    std::vector<std::string> candidates;
    std::vector<std::string> allowed;  // where kube-scheduler's placement filters let it go
    {
      auto view = model->Read();
      const core::PodState* p = view->FindPodByName(ns, name);
      if (p == nullptr) return WhatIfError(500, StrCat("what-if: pod ", ns, "/", name, " was not stored"));
      pod = p->pod;
      view->ForEachNode([&](core::NodeSlot, const core::NodeState& n) {
        if (n.node.unschedulable || !core::PlacementAllows(pod, n.node)) return;
        allowed.push_back(n.node.name);
        // kube-scheduler's NodeResourcesFit: bound pods and binds in flight, not berth's holds.
        for (size_t r = 0; r < pod.request.size(); ++r) {
          const auto id = static_cast<core::ResourceId>(r);
          const int64_t want = pod.request.Get(id);
          if (want > 0 && want > n.node.allocatable.Get(id) - n.requested.Get(id) - n.assumed.Get(id)) return;
        }
        candidates.push_back(n.node.name);
      });
    }
    std::sort(candidates.begin(), candidates.end());
    std::sort(allowed.begin(), allowed.end());
    const std::string pod_json = [&] {
      for (const Json& e : events) {
        const Json& o = e["object"];
        if (o["kind"] == "Pod" && o["metadata"]["namespace"] == ns && o["metadata"]["name"] == name) return o.dump();
      }
      return std::string("{}");
    }();
    Json row = {{"pod", StrCat(ns, "/", name)}};
    std::vector<policy::NodeVerdict> verdicts;
    std::vector<std::string> fit;
    if (!candidates.empty()) {
      std::string args = StrCat(R"({"Pod":)", pod_json, R"(,"NodeNames":[)");
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (i > 0) args.push_back(',');
        AppendJsonString(&args, candidates[i]);
      }
      args += "]}";
      const Reply filtered = fork.Filter(args, &verdicts);
      if (filtered.status != 200) return WhatIfError(500, StrCat("what-if: filter: ", filtered.body));
      for (size_t i = 0; i < verdicts.size() && i < candidates.size(); ++i) {
        if (verdicts[i].ok()) fit.push_back(candidates[i]);
      }
    }
    if (!fit.empty()) {
      std::vector<int64_t> scores(fit.size(), 0);
      if (fit.size() > 1) {
        std::string args = StrCat(R"({"Pod":)", pod_json, R"(,"NodeNames":[)");
        for (size_t i = 0; i < fit.size(); ++i) {
          if (i > 0) args.push_back(',');
          AppendJsonString(&args, fit[i]);
        }
        args += "]}";
        const Reply scored = fork.Prioritize(args);
        const Json list = Json::parse(scored.body, nullptr, false);
        if (scored.status != 200 || !list.is_array() || list.size() != fit.size()) {
          return WhatIfError(500, StrCat("what-if: prioritize: ", scored.body));
        }
        for (size_t i = 0; i < fit.size(); ++i) scores[i] = list[i].value("Score", int64_t{0});
      }
      const int64_t best = *std::max_element(scores.begin(), scores.end());
      Json tied = Json::array();
      for (size_t i = 0; i < fit.size(); ++i) {
        if (scores[i] == best) tied.push_back(fit[i]);
      }
      const std::string node = tied[0];
      const Reply bound = fork.Bind(Json{{"PodName", name}, {"PodNamespace", ns}, {"PodUID", pod.uid.str()},
                                         {"Node", node}}.dump());
      const Json br = Json::parse(bound.body, nullptr, false);
      if (bound.status != 200 || !br.is_object() || br.value("Error", "x") != "") {
        return WhatIfError(500, StrCat("what-if: bind of ", ns, "/", name, " to ", node, ": ", bound.body));
      }
      {
        auto view = model->Read();
        placed_slots.push_back(view->FindNodeSlot(node));
      }
      row["decision"] = "runs now";
      row["node"] = node;
      row["nodesThatFit"] = fit.size();
      row["bestScore"] = best;
      row["bestNodes"] = std::move(tied);
      pods.push_back(std::move(row));
      continue;
    }
    all_placed = false;
    // ---- no node: a reclaim berth started, kube-scheduler's preemption, or a reason --------
    // A reclaim berth started: its evictions, carried out (recorded) now.
    auto reclaimed = [&]() {
      fork.DrainIntents();
      if (evictor.evicted.empty()) return false;
      needs_room = true;
      Json victims = Json::array();
      for (const RecordingEvictor::Eviction& e : evictor.evicted) {
        victims.push_back(VictimJson(e.victim, now, e.victim.node_name.view(), policy::QueueNameOf(e.victim),
                                     &gpu_hours, &cpu_hours));
      }
      auto view = model->Read();
      row["decision"] = "starts after a reclaim";
      row["why"] = evictor.evicted.front().why;
      row["victims"] = std::move(victims);
      if (const core::Reservation* r = view->FindReservation(pod.uid)) row["node"] = view->node(r->node).node.name;
      pods.push_back(std::move(row));
      return true;
    };
    evictor.evicted.clear();
    if (reclaimed()) continue;
    // kube-scheduler preempts when a node failed for room (FailedNodes) or its own fit failed.
    const bool may_preempt =
        candidates.empty() || std::any_of(verdicts.begin(), verdicts.end(), [](const policy::NodeVerdict& v) {
          return v.fit == policy::Fit::kUnschedulable;
        });
    Json preemption;
    if (may_preempt) {
      struct Candidate {
        std::string node;
        std::vector<const core::PodState*> victims;  // highest priority first
      };
      std::vector<Candidate> found;
      // Victims are chosen on one view; the preempt verb below reads the model itself.
      {
      auto view = model->Read();
      for (const std::string& node_name : allowed) {
        const core::NodeState* n = view->FindNode(node_name);
        if (n == nullptr) continue;
        std::vector<const core::PodState*> lower;
        for (core::PodSlot s : n->pods) {
          const core::PodState& o = view->pod(s);
          if (!o.pod.terminating && o.pod.priority < pod.priority) lower.push_back(&o);
        }
        if (lower.empty()) continue;
        core::ResourceVector freed;
        for (const core::PodState* o : lower) freed.Add(o->pod.request);
        auto fits_with = [&](const core::ResourceVector& extra) {
          for (size_t r = 0; r < pod.request.size(); ++r) {
            const auto id = static_cast<core::ResourceId>(r);
            const int64_t want = pod.request.Get(id);
            if (want > 0 && want > n->node.allocatable.Get(id) - n->requested.Get(id) - n->assumed.Get(id) + extra.Get(id)) {
              return false;
            }
          }
          return true;
        };
        if (!fits_with(freed)) continue;
        // Put back as many as still let it fit, the most important first (SelectVictimsOnNode).
        std::sort(lower.begin(), lower.end(), [](const core::PodState* a, const core::PodState* b) {
          if (a->pod.priority != b->pod.priority) return a->pod.priority > b->pod.priority;
          return a->pod.started < b->pod.started;
        });
        Candidate c{node_name, {}};
        for (const core::PodState* o : lower) {
          core::ResourceVector without = freed;
          without.Sub(o->pod.request);
          if (fits_with(without)) {
            freed = std::move(without);
          } else {
            c.victims.push_back(o);
          }
        }
        if (!c.victims.empty()) found.push_back(std::move(c));
      }
      }
      if (!found.empty()) {
        std::string args = StrCat(R"({"Pod":)", pod_json, R"(,"NodeNameToVictims":null,"NodeNameToMetaVictims":{)");
        for (size_t i = 0; i < found.size(); ++i) {
          if (i > 0) args.push_back(',');
          AppendJsonString(&args, found[i].node);
          args += R"(:{"Pods":[)";
          for (size_t k = 0; k < found[i].victims.size(); ++k) {
            if (k > 0) args.push_back(',');
            args += R"({"UID":)";
            AppendJsonString(&args, found[i].victims[k]->pod.uid.view());
            args.push_back('}');
          }
          args += R"(],"NumPDBViolations":0})";
        }
        args += "}}";
        const Reply reviewed = fork.Preempt(args);
        const Json kept = Json::parse(reviewed.body, nullptr, false);
        if (reviewed.status == 200 && kept.is_object() && kept["NodeNameToMetaVictims"].is_object()) {
          // kube-scheduler's pick: lowest highest victim priority, lowest sum, fewest victims.
          std::optional<std::tuple<int64_t, int64_t, size_t, std::string>> best;
          auto again = model->Read();
          std::vector<const core::PodState*> chosen;
          for (const auto& [node, mv] : kept["NodeNameToMetaVictims"].items()) {
            std::vector<const core::PodState*> vs;
            int64_t top = INT64_MIN, sum = 0;
            for (const Json& v : mv.value("Pods", Json::array())) {
              const core::PodState* p = again->FindPod(v.value("UID", ""));
              if (p == nullptr) continue;
              vs.push_back(p);
              top = std::max<int64_t>(top, p->pod.priority);
              sum += p->pod.priority;
            }
            if (vs.empty()) continue;
            auto key = std::make_tuple(top, sum, vs.size(), node);
            if (!best || key < *best) {
              best = key;
              chosen = vs;
            }
          }
          if (best) {
            Json victims = Json::array();
            for (const core::PodState* v : chosen) {
              victims.push_back(VictimJson(v->pod, now, std::get<3>(*best), policy::QueueNameOf(v->pod), &gpu_hours,
                                           &cpu_hours));
            }
            preemption = {{"node", std::get<3>(*best)}, {"victims", std::move(victims)}};
          }
        }
      }
    }
    if (preemption.is_null() && candidates.empty() && options_.mode == Mode::kKubernetes) {
      // Nothing to preempt, and kube-scheduler's own checks keep the pod from berth's filter:
      // berth's housekeeping starts the reclaim a few seconds later (Framework::Housekeeping).
      if (fork.framework_->ReclaimForPending(pod) && reclaimed()) continue;
    }
    if (!preemption.is_null()) {
      needs_room = true;
      row["decision"] = "starts after preemption";
      row["node"] = preemption["node"];
      row["victims"] = preemption["victims"];
      pods.push_back(std::move(row));
      continue;
    }
    // The rules that hold it back, by reason code, most nodes first.
    std::map<std::string, std::pair<int, std::string>> reasons;
    for (const policy::NodeVerdict& v : verdicts) {
      if (v.ok()) continue;
      auto& r = reasons[std::string(policy::ReasonCode(v.reason))];
      if (r.first++ == 0) r.second = v.message;
    }
    Json held = Json::array();
    std::vector<std::pair<std::string, std::pair<int, std::string>>> sorted(reasons.begin(), reasons.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    for (const auto& [code, r] : sorted) held.push_back({{"reason", code}, {"nodes", r.first}, {"message", r.second}});
    if (candidates.empty()) {
      held.push_back({{"reason", "KubeSchedulerFilters"},
                      {"nodes", static_cast<int64_t>(allowed.size())},
                      {"message", allowed.empty()
                                      ? "no node allows the pod (node selector, affinity, taints, cordons)"
                                      : "kube-scheduler's own resource fit leaves no node to ask berth about, "
                                        "and preempting lower-priority pods would not make room"}});
    }
    row["decision"] = "waits";
    row["heldBackBy"] = std::move(held);
    pods.push_back(std::move(row));
  }

  int max_hops = 0;
  for (size_t i = 0; i < placed_slots.size(); ++i) {
    for (size_t k = i + 1; k < placed_slots.size(); ++k) {
      if (placed_slots[i] != core::kNoNode && placed_slots[k] != core::kNoNode) {
        max_hops = std::max(max_hops, topology->Hops(placed_slots[i], placed_slots[k]));
      }
    }
  }
  // When the pods that wait would start: the forecast from the copy as the what-if left it.
  std::optional<Forecast> forecast;
  if (forecaster_ && !all_placed && !needs_room) {
    absl::StatusOr<Forecast> f = forecaster_(*model, fork.fair_share(), now);
    if (f.ok()) {
      forecast = *std::move(f);
    } else {
      spdlog::warn("what-if: ETA forecast failed: {}", ToStd(f.status().message()));
    }
  }
  if (forecast) {
    for (Json& row : pods) {
      if (row.value("decision", "") != "waits") continue;
      if (const JobEta* eta = forecast->ForPod(row.value("pod", ""))) row["eta"] = EtaJson(*eta, now);
    }
  }
  const std::string decision = all_placed ? "runs now" : needs_room ? "starts only by taking room" : "waits";
  Json out = {{"decision", decision},
              {"pods", std::move(pods)},
              {"generation", model_->Read()->generation()},
              {"time", absl::FormatTime(absl::RFC3339_sec, now, absl::UTCTimeZone())}};
  if (all_placed) out["maxHops"] = max_hops;
  if (needs_room) out["workLost"] = {{"gpuHours", gpu_hours}, {"cpuHours", cpu_hours}};
  if (!text) return JsonReply(200, out);

  // ---- the page for people ------------------------------------------------------------------
  std::string page = StrCat("what-if at ", out["time"].get<std::string>(), ": ", decision);
  if (all_placed && out["pods"].size() == 1) page += " (1 pod)";
  if (all_placed && out["pods"].size() > 1) {
    StrAppend(&page, " (", out["pods"].size(), " pods, at most ", max_hops, " hops apart)");
  }
  page += "\n";
  for (const Json& p : out["pods"]) {
    StrAppend(&page, "  ", p["pod"].get<std::string>(), ": ", p["decision"].get<std::string>());
    if (p.contains("node")) StrAppend(&page, " on ", p["node"].get<std::string>());
    if (p.contains("bestNodes") && p["bestNodes"].size() > 1) {
      StrAppend(&page, " (or any of ", p["bestNodes"].size() - 1, " other nodes with the same score)");
    }
    page += "\n";
    for (const Json& v : p.value("victims", Json::array())) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f GPU-hours, %.1f CPU-hours", v["gpuHoursLost"].get<double>(),
                    v["cpuHoursLost"].get<double>());
      StrAppend(&page, "      evicts ", v["pod"].get<std::string>(), " (queue ", v["queue"].get<std::string>(),
                ", priority ", v["priority"].get<int64_t>(), ") on ", v["node"].get<std::string>(), ": loses ", buf, "\n");
    }
    for (const Json& h : p.value("heldBackBy", Json::array())) {
      StrAppend(&page, "      ", h["reason"].get<std::string>(), " on ", h["nodes"].get<int64_t>(), " nodes: ",
                h["message"].get<std::string>(), "\n");
    }
    if (p.contains("eta")) StrAppend(&page, "      eta: ", p["eta"]["text"].get<std::string>(), "\n");
  }
  if (needs_room) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "work lost: %.1f GPU-hours, %.1f CPU-hours\n", gpu_hours, cpu_hours);
    page += buf;
  }
  return TextReply(std::move(page));
}

}  // namespace berth::extender
