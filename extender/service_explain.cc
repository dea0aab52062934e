// GET /debug/explain?pod=NS/NAME (SPEC 6.8): why a pod is (not) placed, node by node (grouped
// by verdict), and the smallest changes that would let it run.
#include <string>

#include "absl/strings/str_format.h"
#include "core/strings.h"
#include "extender/eta.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "policy/explain/explain.h"

namespace berth::extender {
namespace {

constexpr size_t kNodesListed = 10;

std::string_view FitName(policy::Fit f) {
  switch (f) {
    case policy::Fit::kFit: return "fit";
    case policy::Fit::kUnschedulable: return "unschedulable";
    case policy::Fit::kUnresolvable: return "unresolvable";
  }
  return "fit";
}

std::string ListNodes(const std::vector<std::string>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size() && i < kNodesListed; ++i) {
    StrAppend(&out, i ? ", " : "", nodes[i]);
  }
  if (nodes.size() > kNodesListed) StrAppend(&out, ", ... (", nodes.size() - kNodesListed, " more)");
  return out;
}

}  // namespace

nlohmann::json Service::EtaOf(std::string_view key, std::string* sentence) const {
  if (options_.eta_interval <= absl::ZeroDuration()) {
    *sentence = "off (eta.intervalSeconds is 0)";
    return {{"start", nullptr}, {"unknown", *sentence}};
  }
  std::shared_ptr<const Forecast> f = forecast();
  const JobEta* eta = f ? f->ForPod(key) : nullptr;
  if (eta == nullptr) {
    *sentence = StrCat("not forecast yet: the forecast runs at most every ",
                       absl::FormatDuration(options_.eta_interval), " when the cluster changed",
                       f ? StrCat(", and its latest pass (",
                                  absl::FormatTime(absl::RFC3339_sec, f->at, absl::UTCTimeZone()),
                                  ") came before this pod waited")
                         : "");
    return {{"start", nullptr}, {"unknown", *sentence}};
  }
  const absl::Time now = clock_->Now();
  *sentence = StrCat(EtaSentence(*eta, now), " [forecast of ",
                     absl::FormatTime(absl::RFC3339_sec, f->at, absl::UTCTimeZone()), "]");
  nlohmann::json j = EtaJson(*eta, now);
  j["forecastAt"] = absl::FormatTime(absl::RFC3339_sec, f->at, absl::UTCTimeZone());
  return j;
}

Reply Service::DebugExplain(std::string_view pod_param, bool text) const {
  const size_t slash = pod_param.find('/');
  if (pod_param.empty() || slash == std::string_view::npos || slash == 0 ||
      slash + 1 == pod_param.size() || pod_param.find('/', slash + 1) != std::string_view::npos) {
    return ErrorReply(400, StrCat("expected ?pod=NAMESPACE/NAME, got \"", pod_param.substr(0, 256), "\""));
  }
  const std::string_view ns = pod_param.substr(0, slash), name = pod_param.substr(slash + 1);
  auto view = model_->Read();
  const core::PodState* p = view->FindPodByName(ns, name);
  if (p == nullptr) {
    return ErrorReply(404, StrCat("pod ", ns, "/", name, " is not in berth's model (", 
                                  options_.mode == Mode::kKubernetes ? "not listed or watched yet, or deleted"
                                                                     : "post it to /v1/events first",
                                  ")"));
  }
  const policy::Explanation e =
      policy::Explain(*pipeline_, *view, p->pod, clock_->Now(), options_.scheduler_name);
  std::string state;
  if (!e.managed) {
    state = StrCat("not berth's (schedulerName ", p->pod.scheduler_name.view(), ")");
  } else if (!e.node.empty()) {
    state = StrCat("placed on ", e.node);
  } else if (!e.admission.ok()) {
    state = "waiting (not admitted)";
  } else if (e.job && (e.job->state == policy::JobState::kHead ||
                        e.job->state == policy::JobState::kMayPreempt)) {
    state = StrCat("next to start in queue ", e.job->queue,
                   e.fits.empty() ? "; no node takes it now"
                                  : " (the room it fits now is planned for jobs ahead of it)");
  } else if (e.fits.empty()) {
    state = "admitted; no node takes it now";
  } else {
    state = StrCat("admitted; ", e.fits.size(), " node", e.fits.size() == 1 ? " takes" : "s take", " it now");
  }
  if (text) {
    std::string out;
    StrAppend(&out, "pod       ", e.pod, "\n", "state     ", state, "\n", "pool      ", e.pool, "\n",
              "queue     ", e.queue, "\n", "gang      ", e.gang.empty() ? "-" : e.gang, "\n",
              "priority  ", e.priority, " (", policy::LevelName(e.level), ")\n");
    if (e.job) {
      StrAppend(&out, "admission ", policy::JobStateName(e.job->state));
      if (e.job->position > 0) StrAppend(&out, ", position ", e.job->position, " in queue ", e.job->queue);
      StrAppend(&out, ", ", e.waiting_ahead, " waiting job(s) ahead\n");
    }
    if (!e.admission.ok()) {
      StrAppend(&out, "waits     ", policy::ReasonCode(e.admission.reason), ": ", e.admission.message, "\n");
    }
    if (!e.fits.empty()) StrAppend(&out, "fits on   ", ListNodes(e.fits), "\n");
    if (!e.rejected.empty() && e.admission.ok()) {
      out += "\nnodes that do not take it:\n";
      for (const policy::NodeGroup& g : e.rejected) {
        StrAppend(&out, "  ", g.nodes.size(), " node", g.nodes.size() == 1 ? "" : "s", " ",
                  policy::ReasonCode(g.verdict.reason), ": ", g.verdict.message, "\n");
        if (!g.verdict.detail.empty()) StrAppend(&out, "      ", g.nodes[0], ": ", g.verdict.detail, "\n");
        StrAppend(&out, "      ", ListNodes(g.nodes), "\n");
      }
    }
    if (!e.would_run_if.empty()) {
      out += "\nwould run if:\n";
      for (const std::string& c : e.would_run_if) StrAppend(&out, "  - ", c, "\n");
    }
    if (e.managed && e.node.empty()) {
      std::string sentence;
      (void)EtaOf(e.pod, &sentence);
      StrAppend(&out, "\neta       ", sentence, "\n");
    }
    return TextReply(std::move(out));
  }
  nlohmann::json j = {{"pod", e.pod},
                      {"managed", e.managed},
                      {"state", state},
                      {"pool", e.pool},
                      {"queue", e.queue},
                      {"gang", e.gang},
                      {"priority", e.priority},
                      {"level", policy::LevelName(e.level)}};
  if (!e.node.empty()) j["node"] = e.node;
  if (e.managed && e.node.empty()) {
    j["admission"] = {{"admitted", e.admission.ok()}};
    if (!e.admission.ok()) {
      j["admission"]["reason"] = policy::ReasonCode(e.admission.reason);
      j["admission"]["message"] = e.admission.message;
    }
    if (e.job) {
      j["admission"]["job"] = e.job->key;
      j["admission"]["state"] = policy::JobStateName(e.job->state);
      j["admission"]["position"] = e.job->position;
      j["admission"]["waitingAhead"] = e.waiting_ahead;
      j["admission"]["waitingAheadInQueue"] = e.waiting_ahead_in_queue;
      j["admission"]["why"] = e.job->why;
    }
    j["fits"] = {{"count", e.fits.size()}, {"nodes", nlohmann::json::array()}};
    for (size_t i = 0; i < e.fits.size() && i < kNodesListed; ++i) j["fits"]["nodes"].push_back(e.fits[i]);
    nlohmann::json groups = nlohmann::json::array();
    for (const policy::NodeGroup& g : e.rejected) {
      nlohmann::json nodes = nlohmann::json::array();
      for (size_t i = 0; i < g.nodes.size() && i < kNodesListed; ++i) nodes.push_back(g.nodes[i]);
      nlohmann::json group = {{"reason", policy::ReasonCode(g.verdict.reason)},
                              {"verdict", FitName(g.verdict.fit)},
                              {"message", g.verdict.message},
                              {"count", g.nodes.size()},
                              {"nodes", std::move(nodes)}};
      if (!g.verdict.detail.empty()) group["detail"] = StrCat(g.nodes[0], ": ", g.verdict.detail);
      groups.push_back(std::move(group));
    }
    j["rejected"] = std::move(groups);
    j["wouldRunIf"] = e.would_run_if;
    std::string sentence;
    j["eta"] = EtaOf(e.pod, &sentence);
  }
  return JsonReply(200, j);
}

}  // namespace berth::extender
