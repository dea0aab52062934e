// The queue side of the Service (SPEC 6.4, 6.5): the admission tick (nudges, fair-share
// evictions) and /debug/queues.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/strings.h"
#include "extender/eta.h"
#include "extender/service.h"
#include "extender/text_table.h"
#include "nlohmann/json.hpp"
#include "policy/queue/queue.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

std::string Percent(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.1f%%", 100.0 * part / whole) : std::string("-");
}

}  // namespace

AdmissionTickStats Service::RunAdmissionTick() {
  AdmissionTickStats stats;
  policy::FairShare* book = pipeline_->fair_share();
  // (uid, why): the pod itself is copied only if it is nudged, which few newly admitted pods
  // are (only those berth answered as waiting).
  std::vector<std::pair<std::string, std::string>> nudges;
  std::vector<policy::FairShareVictim> victims;
  core::Pod head;
  {
    auto view = model_->Read();
    // The plan first: filters that ask for nudges (gang reservations) do not wait for it.
    std::shared_ptr<const policy::AdmissionPlan> plan =
        book != nullptr ? book->Replan(*view, clock_->Now()) : nullptr;
    // Views of the uids in `plan`, which is kept with them until the next tick.
    absl::flat_hash_set<std::string_view> admitted;
    absl::MutexLock lock(&nudge_mu_);
    if (plan != nullptr) {
      for (const policy::PlannedJob& job : plan->jobs) {
        if (!policy::PassesAdmission(job.state)) continue;
        for (const std::string& uid : job.pods) {
          admitted.insert(uid);
          if (admitted_at_last_tick_.contains(uid)) continue;
          if (view->FindPod(uid) != nullptr) nudges.emplace_back(uid, StrCat("admitted by queue ", job.queue));
        }
      }
      victims = plan->victims;
      if (plan->head && !plan->jobs[*plan->head].pods.empty()) {
        if (const core::PodState* p = view->FindPod(plan->jobs[*plan->head].pods.front())) {
          head = p->pod;
        }
      }
    }
    admitted_at_last_tick_ = std::move(admitted);
    admitted_plan_ = plan;
    for (auto& [uid, why] : pending_nudges_) {
      const core::PodState* p = view->FindPod(uid);
      if (p != nullptr && p->pod.node_name.empty()) nudges.emplace_back(std::move(uid), std::move(why));
    }
    pending_nudges_.clear();
  }
  // Recorded, not carried out: the tick never waits on the API server. A failed nudge or
  // fair-share eviction has nothing to take back; the next plan decides anew.
  if (nudger_ != nullptr && nudger_->CanNudge().ok()) {
    std::vector<std::pair<std::string, std::string>> deferred;
    {
      auto view = model_->Read();
      absl::MutexLock lock(&answered_waiting_mu_);
      for (auto& [uid, why] : nudges) {
        // Only a pod kube-scheduler holds back for berth's answer needs telling. Its nudge is
        // spent here: the retry's filter notes its answer again.
        auto it = answered_waiting_.find(uid);
        if (it == answered_waiting_.end()) {
          metrics_.nudges_not_needed.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        if (stats.nudged >= options_.nudges.max_per_tick) {
          deferred.emplace_back(std::move(uid), std::move(why));
          continue;
        }
        // Bound or gone since the plan: nothing to tell (and forgotten just below).
        const core::PodState* p = view->FindPod(uid);
        if (p == nullptr || !p->pod.node_name.empty()) continue;
        answered_waiting_.erase(it);
        spdlog::debug("nudging pod {}: {}", p->pod.Key(), why);
        intents_.Record(Intent{.kind = IntentKind::kNudge, .pod = p->pod, .why = std::move(why)});
        ++stats.nudged;
      }
      // Forget pods that are bound or gone.
      absl::erase_if(answered_waiting_, [&](const std::string& uid) {
        const core::PodState* p = view->FindPod(uid);
        return p == nullptr || !p->pod.node_name.empty();
      });
    }
    if (!deferred.empty()) {
      stats.deferred = static_cast<int>(deferred.size());
      metrics_.nudges_deferred.fetch_add(deferred.size(), std::memory_order_relaxed);
      absl::MutexLock lock(&nudge_mu_);
      for (auto& d : deferred) pending_nudges_.push_back(std::move(d));
    }
  }
  if (evictor_ != nullptr && !victims.empty() && evictor_->CanEvict().ok()) {
    for (const policy::FairShareVictim& v : victims) {
      spdlog::info("evicting {} of queue {}: {}", v.pod.Key(), v.queue, v.why);
      intents_.Record(Intent{.kind = IntentKind::kEviction,
                             .pod = v.pod,
                             .for_pod = head,
                             .why = v.why,
                             .cause = "fair-share"});
      ++stats.evicted;
    }
  }
  stats.events = WriteWaitingEvents(clock_->Now());
  return stats;
}

namespace {

// The latest forecast's ETA of a job the admission plan lists (by any of its pods).
const JobEta* EtaOfJob(const Forecast* forecast, const policy::PlannedJob& job) {
  return forecast == nullptr ? nullptr : forecast->ForJob(job.key);
}

std::string EtaCell(const Forecast* forecast, const policy::PlannedJob& job, absl::Time now) {
  const JobEta* eta = EtaOfJob(forecast, job);
  if (eta == nullptr) return "-";
  if (!eta->start) return "unknown";
  const std::string about = AboutFromNow(*eta->start - now);
  return about.starts_with("in about ") ? about.substr(9) : about;
}

}  // namespace

Reply Service::DebugQueues(bool text) const {
  policy::FairShare* book = pipeline_->fair_share();
  if (book == nullptr) {
    return ErrorReply(404, "queues are not enabled: admission module \"queue\" is not configured");
  }
  std::shared_ptr<const policy::AdmissionPlan> plan;
  {
    auto view = model_->Read();
    plan = book->Published(*view, clock_->Now());
  }
  const double cap = plan->capacity;
  const std::shared_ptr<const Forecast> forecast = this->forecast();
  const absl::Time now = clock_->Now();
  if (text) {
    TextTable q({"QUEUE", "WEIGHT", "FAIR-SHARE", "FLOW", "USAGE", "NON-PREEMPTIBLE", "LIMIT",
                 "BUDGET-LEFT", "RUNNING", "WAITING", "ADMITTED"});
    for (const policy::QueueFigures& f : plan->queues) {
      if (!f.exists && !f.has_pods) continue;
      q.AddRow({f.exists ? f.name : StrCat(f.name, " (unknown)"), absl::StrFormat("%g", f.weight),
                absl::StrFormat("%.1f%%", 100 * f.fair_share), Percent(f.flow, cap),
                Percent(f.usage, cap), Percent(f.usage_nonpreemptible, cap),
                Percent((1 + f.limit_factor) * f.fair_share * cap, cap),
                absl::StrFormat("%.0f", std::max(f.budget - f.budget_used, 0.0)),
                StrCat(f.running_pods), StrCat(f.waiting_jobs), StrCat(f.admitted_jobs)});
    }
    TextTable j({"ORDER", "JOB", "QUEUE", "POSITION", "STATE", "PRIORITY", "PODS", "USAGE", "ETA", "WHY"});
    for (const policy::PlannedJob& job : plan->jobs) {
      j.AddRow({StrCat(job.order + 1), job.key, job.queue,
                job.position > 0 ? StrCat(job.position) : std::string("-"),
                std::string(policy::JobStateName(job.state)),
                StrCat(policy::LevelName(job.effective), job.effective != job.level ? " (aged)" : ""),
                StrCat(job.pods.size()), absl::StrFormat("%.1f", job.usage), EtaCell(forecast.get(), job, now),
                !job.why.empty() ? job.why : (!job.warning.empty() ? job.warning : std::string("-"))});
    }
    return TextReply(absl::StrFormat("capacity %.1f (usage units: cpu + %g x gpu + %g x memory GiB)\n\n",
                                     cap, book->config().gpu_weight,
                                     book->config().memory_weight_per_gib) +
                     q.Render() + "\n" + j.Render());
  }
  nlohmann::json queues = nlohmann::json::array();
  for (const policy::QueueFigures& f : plan->queues) {
    if (!f.exists && !f.has_pods) continue;
    queues.push_back({{"name", f.name},
                      {"exists", f.exists},
                      {"weight", f.weight},
                      {"fairShare", f.fair_share},
                      {"flow", f.flow},
                      {"flowShare", cap > 0 ? f.flow / cap : 0.0},
                      {"usage", f.usage},
                      {"share", cap > 0 ? f.usage / cap : 0.0},
                      {"usagePreemptible", f.usage_preemptible},
                      {"usageNonPreemptible", f.usage_nonpreemptible},
                      {"nonPreemptibleLimitFactor", f.limit_factor},
                      {"nonPreemptibleLimit", (1 + f.limit_factor) * f.fair_share * cap},
                      {"excessBudget", f.budget},
                      {"excessBudgetUsed", f.budget_used},
                      {"runningPods", f.running_pods},
                      {"waitingJobs", f.waiting_jobs},
                      {"admittedJobs", f.admitted_jobs}});
  }
  nlohmann::json jobs = nlohmann::json::array();
  for (const policy::PlannedJob& job : plan->jobs) {
    nlohmann::json j = {{"order", job.order + 1},
                        {"job", job.key},
                        {"gang", job.gang},
                        {"queue", job.queue},
                        {"state", policy::JobStateName(job.state)},
                        {"position", job.position},
                        {"pods", job.pods.size()},
                        {"startPods", job.start_pods},
                        {"priority", job.priority},
                        {"level", policy::LevelName(job.level)},
                        {"effectiveLevel", policy::LevelName(job.effective)},
                        {"usage", job.usage},
                        {"request", job.request.DebugString(model_->resources())},
                        {"why", job.why}};
    if (job.lifetime) j["lifetime"] = absl::FormatDuration(*job.lifetime);
    if (job.charge > 0) j["budgetCharge"] = job.charge;
    if (!job.warning.empty()) j["warning"] = job.warning;
    if (const JobEta* eta = EtaOfJob(forecast.get(), job)) {
      j["eta"] = EtaJson(*eta, now);
      j["eta"]["forecastAt"] = absl::FormatTime(absl::RFC3339_sec, forecast->at, absl::UTCTimeZone());
    }
    jobs.push_back(std::move(j));
  }
  nlohmann::json victims = nlohmann::json::array();
  for (const policy::FairShareVictim& v : plan->victims) {
    victims.push_back({{"pod", v.pod.Key()}, {"queue", v.queue}, {"why", v.why}});
  }
  nlohmann::json out = {{"capacity", cap},
                        {"usageWeights",
                         {{"gpu", book->config().gpu_weight},
                          {"memoryGiB", book->config().memory_weight_per_gib}}},
                        {"halfTimeSeconds", absl::ToDoubleSeconds(book->config().half_time)},
                        {"queues", std::move(queues)},
                        {"jobs", std::move(jobs)},
                        {"fairShareVictims", std::move(victims)}};
  if (plan->head) out["next"] = plan->jobs[*plan->head].key;
  return JsonReply(200, out);
}

}  // namespace berth::extender
