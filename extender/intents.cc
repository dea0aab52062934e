#include "extender/intents.h"

#include <algorithm>
#include <utility>

#include "core/strings.h"
#include "extender/service.h"
#include "extender/thread_name.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

size_t Index(IntentKind k) { return static_cast<size_t>(k); }

// What an intent is, for logs: "eviction of ml/a (reclaim in pool gpu)".
std::string Describe(const Intent& i) {
  switch (i.kind) {
    case IntentKind::kEviction: return StrCat("eviction of ", i.pod.Key(), " (", i.why, ")");
    case IntentKind::kNudge: return StrCat("nudge of ", i.pod.Key(), " (", i.why, ")");
    case IntentKind::kEvent: return StrCat("event ", i.reason, " on ", i.pod.Key());
  }
  return "intent";
}

}  // namespace

bool RetryableIntentError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

IntentQueue::IntentQueue(const core::Clock* clock, Metrics* metrics, IntentOptions options)
    : clock_(clock), metrics_(metrics), options_(options) {}

IntentQueue::~IntentQueue() { Stop(); }

void IntentQueue::SetEvictor(EvictorInterface* evictor) { evictor_.store(evictor); }
void IntentQueue::SetNudger(NudgerInterface* nudger) { nudger_.store(nudger); }
void IntentQueue::SetPodEventSink(PodEventSinkInterface* sink) { events_.store(sink); }

void IntentQueue::Record(Intent intent) {
  pending_[Index(intent.kind)].fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  queue_.push_back(Entry{.intent = std::move(intent), .attempts = 0, .due = clock_->Now()});
  wake_.Signal();
}

bool IntentQueue::PopDue(absl::Time now, Entry* out) {
  // Recorded order among the due ones: a reclaim's victims go in the order it chose them.
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.due <= now; });
  if (it == queue_.end()) return false;
  *out = std::move(*it);
  queue_.erase(it);
  return true;
}

int IntentQueue::Drain() {
  int attempts = 0;
  // The clock is read once: a retry due after this drain began waits for the next one.
  const absl::Time now = clock_->Now();
  while (true) {
    Entry e;
    {
      absl::MutexLock lock(&mu_);
      if (!PopDue(now, &e)) break;
    }
    Attempt(std::move(e));
    ++attempts;
  }
  return attempts;
}

absl::Status IntentQueue::Execute(const Intent& i) {
  switch (i.kind) {
    case IntentKind::kEviction: {
      EvictorInterface* evictor = evictor_.load();
      if (evictor == nullptr) return absl::FailedPreconditionError("no evictor is set");
      return evictor->Evict(i.pod, i.for_pod, i.why);
    }
    case IntentKind::kNudge: {
      NudgerInterface* nudger = nudger_.load();
      if (nudger == nullptr) return absl::FailedPreconditionError("no nudger is set");
      return nudger->Nudge(i.pod, i.why);
    }
    case IntentKind::kEvent: {
      PodEventSinkInterface* sink = events_.load();
      if (sink == nullptr) return absl::FailedPreconditionError("no Event sink is set");
      return sink->Record(i.pod, i.type, i.reason, i.note);
    }
  }
  return absl::InternalError("unknown intent kind");
}

void IntentQueue::Count(IntentKind kind, IntentOutcome outcome) {
  outcomes_[Index(kind)][static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
}

void IntentQueue::Attempt(Entry e) {
  Intent& i = e.intent;
  const size_t k = Index(i.kind);
  if (i.cancelled != nullptr && i.cancelled->load()) {
    spdlog::info("{} dropped: the decision it served was undone", Describe(i));
    Count(i.kind, IntentOutcome::kUndone);
    pending_[k].fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  ++e.attempts;
  const absl::Status s = Execute(i);
  if (s.ok()) {
    Count(i.kind, IntentOutcome::kDone);
    pending_[k].fetch_sub(1, std::memory_order_relaxed);
    if (i.kind == IntentKind::kEviction) {
      metrics_->evictions.Add(i.cause);
    } else if (i.kind == IntentKind::kNudge) {
      metrics_->nudges.fetch_add(1, std::memory_order_relaxed);
    }
    spdlog::debug("{} done", Describe(i));
    return;
  }
  if (RetryableIntentError(s) && e.attempts < options_.max_attempts) {
    absl::Duration backoff = options_.initial_backoff;
    for (int n = 1; n < e.attempts && backoff < options_.max_backoff; ++n) backoff *= 2;
    backoff = std::min(backoff, options_.max_backoff);
    spdlog::info("{} failed (attempt {} of {}): {}; retrying in {}", Describe(i), e.attempts,
                 options_.max_attempts, ToStd(s.message()), absl::FormatDuration(backoff));
    Count(i.kind, IntentOutcome::kRetried);
    e.due = clock_->Now() + backoff;
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(e));
    wake_.Signal();
    return;
  }
  spdlog::warn("{} failed{}: {}{}", Describe(i),
               RetryableIntentError(s) ? StrCat(" after ", e.attempts, " attempts") : std::string(),
               ToStd(s.message()), i.undo ? "; undoing it" : "");
  Count(i.kind, IntentOutcome::kFailed);
  if (i.cancelled != nullptr) i.cancelled->store(true);
  if (i.undo) {
    i.undo(s);
    Count(i.kind, IntentOutcome::kUndone);
  }
  pending_[k].fetch_sub(1, std::memory_order_relaxed);
}

void IntentQueue::Start() {
  absl::MutexLock lock(&mu_);
  if (worker_.joinable()) return;
  stopping_ = false;
  worker_ = std::thread([this] {
    NameThisThread("intents");
    Run();
  });
}

void IntentQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!worker_.joinable()) return;
    stopping_ = true;
    wake_.Signal();
  }
  worker_.join();
  absl::MutexLock lock(&mu_);
  worker_ = std::thread();
  // Left queued: a later Drain (or Start) carries them out; at shutdown they are said.
  for (const Entry& e : queue_) spdlog::info("worker stopped before: {}", Describe(e.intent));
}

void IntentQueue::Run() {
  // The longest the worker sleeps without looking at the clock: a retry's due time is on the
  // service's clock, which a test may move without waking the worker.
  constexpr absl::Duration kMaxSleep = absl::Seconds(1);
  while (true) {
    Entry e;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && !PopDue(clock_->Now(), &e)) {
        absl::Duration wait = kMaxSleep;
        for (const Entry& q : queue_) wait = std::min(wait, q.due - clock_->Now());
        wake_.WaitWithTimeout(&mu_, std::max(wait, absl::Milliseconds(1)));
      }
      if (stopping_) return;
    }
    Attempt(std::move(e));
  }
}

int64_t IntentQueue::pending(IntentKind kind) const {
  return pending_[Index(kind)].load(std::memory_order_relaxed);
}

uint64_t IntentQueue::count(IntentKind kind, IntentOutcome outcome) const {
  return outcomes_[Index(kind)][static_cast<size_t>(outcome)].load(std::memory_order_relaxed);
}

void IntentQueue::WriteMetrics(PromWriter& w) const {
  w.Family("berth_intents_total", "counter",
           "Side effects (evictions, nudges, Events) carried out off the request path, by kind "
           "and outcome: done, retried (an attempt failed and will be tried again), failed (for "
           "good), undone (the decision that made it was taken back).");
  for (size_t k = 0; k < kIntentKindNames.size(); ++k) {
    for (size_t o = 0; o < kIntentOutcomeNames.size(); ++o) {
      w.Sample("berth_intents_total", {{"kind", kIntentKindNames[k]}, {"outcome", kIntentOutcomeNames[o]}},
               static_cast<double>(outcomes_[k][o].load(std::memory_order_relaxed)));
    }
  }
  w.Family("berth_intents_pending", "gauge",
           "Side effects recorded and not carried out yet (waiting retries included), by kind.");
  for (size_t k = 0; k < kIntentKindNames.size(); ++k) {
    w.Sample("berth_intents_pending", {{"kind", kIntentKindNames[k]}},
             static_cast<double>(pending_[k].load(std::memory_order_relaxed)));
  }
}

}  // namespace berth::extender
