#include "policy/forecast/run_time.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "policy/queue/queue.h"

namespace berth::policy {

std::string_view RunTimeSourceName(RunTimeSource source) {
  switch (source) {
    case RunTimeSource::kAnnotation: return "annotation";
    case RunTimeSource::kActiveDeadline: return "activeDeadlineSeconds";
    case RunTimeSource::kQueueMedian: return "queueMedian";
    case RunTimeSource::kUnknown: break;
  }
  return "unknown";
}

std::optional<absl::Duration> ParseExpectedDuration(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec == std::errc() && end == text.data() + text.size()) {
    if (seconds <= 0) return std::nullopt;
    return absl::Seconds(seconds);
  }
  // absl::ParseDuration reads Go's time.ParseDuration syntax ("1h30m", "90m", "2.5h").
  absl::Duration d;
  if (!absl::ParseDuration(absl::string_view(text.data(), text.size()), &d) || d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return std::nullopt;
  }
  return d;
}

RunTimeBook RunTimeBook::FromModel(const core::ClusterState& state) {
  RunTimeBook book;
  state.ForEachFinishedRun([&](const core::FinishedRun& r) { book.Add(QueueNameOf(r.pod), r.ran); });
  return book;
}

void RunTimeBook::Add(std::string_view queue, absl::Duration ran) {
  auto it = runs_.find(queue);
  if (it == runs_.end()) it = runs_.emplace(std::string(queue), QueueRuns{}).first;
  QueueRuns& q = it->second;
  if (q.ring.size() < kRunsPerQueue) {
    q.ring.push_back(ran);
  } else {
    q.ring[q.next] = ran;
    q.next = (q.next + 1) % kRunsPerQueue;
  }
}

std::optional<absl::Duration> RunTimeBook::QueueMedian(std::string_view queue) const {
  auto it = runs_.find(queue);
  if (it == runs_.end() || it->second.ring.size() < kMinRunsForMedian) return std::nullopt;
  std::vector<absl::Duration> v = it->second.ring;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const absl::Duration upper = v[mid];
  const absl::Duration lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

size_t RunTimeBook::Runs(std::string_view queue) const {
  auto it = runs_.find(queue);
  return it == runs_.end() ? 0 : it->second.ring.size();
}

RunTime RunTimeBook::Expected(const core::Pod& pod) const {
  if (std::optional<std::string_view> text = pod.annotations.Get(kExpectedDurationKey)) {
    if (std::optional<absl::Duration> d = ParseExpectedDuration(*text)) {
      return RunTime{.duration = *d, .source = RunTimeSource::kAnnotation};
    }
  }
  if (pod.active_deadline_seconds > 0) {
    return RunTime{.duration = absl::Seconds(pod.active_deadline_seconds),
                   .source = RunTimeSource::kActiveDeadline};
  }
  if (std::optional<absl::Duration> d = QueueMedian(QueueNameOf(pod))) {
    return RunTime{.duration = *d, .source = RunTimeSource::kQueueMedian};
  }
  return RunTime{};
}

}  // namespace berth::policy
