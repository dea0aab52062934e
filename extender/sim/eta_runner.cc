#include "extender/sim/eta_runner.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <thread>

#include "core/strings.h"
#include "extender/sim/forecast.h"
#include "extender/thread_name.h"
#include "spdlog/spdlog.h"

namespace berth::extender::sim {
namespace {

// The pod named "namespace/name", or null.
const core::PodState* FindByKey(const core::ClusterState& state, std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return nullptr;
  return state.FindPodByName(key.substr(0, slash), key.substr(slash + 1));
}

// A job no node could ever take (its admission plan says so) starts in no forecast, however
// far ahead it looks: say that, rather than that nothing within the horizon makes room.
void NameUnplaceable(Service& service, absl::Time now, Forecast* f) {
  policy::FairShare* book = service.fair_share();
  if (book == nullptr) return;
  const bool any = std::any_of(f->jobs.begin(), f->jobs.end(), [](const JobEta& e) { return !e.start; });
  if (!any) return;
  auto view = service.model().Read();
  const std::shared_ptr<const policy::AdmissionPlan> plan = book->Published(*view, now);
  for (JobEta& e : f->jobs) {
    if (e.start || e.pods.empty()) continue;
    const core::PodState* p = FindByKey(*view, e.pods.front());
    const policy::PlannedJob* job = p != nullptr ? plan->JobOf(p->pod.uid.view()) : nullptr;
    if (job == nullptr || job->state != policy::JobState::kUnplaceable) continue;
    e.unknown = std::string(policy::kUnplaceableWhy);
  }
}

}  // namespace

EtaRunner::EtaRunner(Service* service, const core::Clock* clock, Config config)
    : service_(service), clock_(clock), config_(std::move(config)) {}

bool EtaRunner::Step() {
  if (config_.eta_interval <= absl::ZeroDuration()) return false;
  const absl::Time now = clock_->Now();
  bool ran = false;
  if (now - last_pass_ >= config_.eta_interval) {
    uint64_t generation;
    {
      auto view = service_->model().Read();
      generation = view->generation();
    }
    // Recomputed only when the model changed: nothing else moves a start.
    if (generation != last_generation_) {
      if (absl::Status s = RunPass(); !s.ok()) spdlog::warn("ETA forecast failed: {}", ToStd(s.message()));
      ran = true;
    }
  }
  WriteAnnotations();
  return ran;
}

absl::Status EtaRunner::RunPass() {
  ForecastOptions o{.model = &service_->model(),
                    .book = service_->fair_share(),
                    .config = config_,
                    .now = clock_->Now(),
                    .horizon = config_.eta_horizon,
                    .max_wall = config_.eta_max_pass,
                    .stop = stop_};
  last_pass_ = o.now;
  absl::StatusOr<Forecast> f = absl::UnknownError("the forecast did not run");
  auto run = [&] {
    f = RunForecast(o);
    errno = 0;
    last_pass_nice_ = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  };
  if (low_priority_) {
    // Not the calling thread: an unprivileged thread cannot take its priority back, and the
    // next pass's copy must not crawl while it holds the live model's reader lock.
    o.after_copy = [] { (void)LowerThisThreadPriority(); };
    std::thread pass([&] {
      NameThisThread("eta-pass");
      run();
    });
    pass.join();
  } else {
    run();
  }
  ForecastMetrics& m = service_->forecast_metrics();
  if (!f.ok()) {
    m.failed.fetch_add(1);
    return f.status();
  }
  last_generation_ = f->generation;
  const uint64_t micros = static_cast<uint64_t>(f->wall_seconds * 1e6);
  m.passes.fetch_add(1);
  m.pass_micros_total.fetch_add(micros);
  m.pass_micros_last.store(micros);
  if (f->truncated) {
    m.truncated.fetch_add(1);
    spdlog::warn("ETA forecast cut short by eta.maxPassSeconds ({}) {:.1f}h ahead; jobs not started by then get no time",
                 absl::FormatDuration(config_.eta_max_pass), f->simulated_seconds / 3600);
  }
  spdlog::debug("ETA forecast: {} waiting jobs, {} running ({} of unknown duration), {:.3f}s",
                f->jobs.size(), f->running_jobs, f->running_unknown, f->wall_seconds);
  NameUnplaceable(*service_, o.now, &*f);
  if (annotator_ != nullptr) PlanAnnotations(*f);
  service_->SetForecast(std::make_shared<const Forecast>(*std::move(f)));
  return absl::OkStatus();
}

void EtaRunner::PlanAnnotations(const Forecast& f) {
  due_.clear();
  auto view = service_->model().Read();
  for (const JobEta& e : f.jobs) {
    // A pod that starts within one interval of arriving is never written: most pods start at
    // once, and each write costs the API server a write and kube-scheduler a retry.
    if (f.at - e.waiting_since < config_.eta_interval) continue;
    const std::string value =
        e.start ? absl::FormatTime(absl::RFC3339_sec, *e.start, absl::UTCTimeZone()) : std::string("unknown");
    for (const std::string& key : e.pods) {
      const core::PodState* p = FindByKey(*view, key);
      if (p == nullptr) continue;
      const std::optional<std::string_view> written = p->pod.annotations.Get(kEtaAnnotation);
      if (written && *written == value) continue;
      absl::Time before;
      std::string error;
      if (written && e.start && absl::ParseTime(absl::RFC3339_full, std::string(*written), &before, &error)) {
        // Rewritten only when it moved by more than 5 minutes and a fifth of the wait left.
        const absl::Duration moved = absl::AbsDuration(*e.start - before);
        if (moved <= std::max(absl::Minutes(5), (*e.start - f.at) / 5)) continue;
      }
      due_[key] = value;
    }
  }
}

int EtaRunner::WriteAnnotations() {
  if (annotator_ == nullptr || due_.empty() || config_.eta_annotations_per_second <= 0) return 0;
  if (!annotator_->CanWrite().ok()) return 0;  // a follower: the leader writes them
  const absl::Time now = clock_->Now();
  const double rate = config_.eta_annotations_per_second;
  if (last_refill_ == absl::InfinitePast()) {
    tokens_ = rate;
  } else {
    tokens_ = std::min(rate, tokens_ + rate * absl::ToDoubleSeconds(now - last_refill_));
  }
  last_refill_ = now;
  ApiWriteMetrics& m = service_->api_write_metrics();
  int written = 0;
  while (tokens_ >= 1 && !due_.empty()) {
    auto it = due_.begin();
    const std::string key = it->first, value = it->second;
    due_.erase(it);
    core::Pod pod;
    {
      auto view = service_->model().Read();
      const core::PodState* p = FindByKey(*view, key);
      if (p == nullptr || !p->pod.node_name.empty()) continue;  // gone, or started meanwhile
      pod = p->pod;
    }
    tokens_ -= 1;
    if (absl::Status s = annotator_->Annotate(pod, value); !s.ok()) {
      m.eta_annotations_failed.fetch_add(1);
      spdlog::debug("berth.io/eta on {} not written: {}", key, ToStd(s.message()));
      continue;
    }
    m.eta_annotations_written.fetch_add(1);
    ++written;
  }
  return written;
}

}  // namespace berth::extender::sim
