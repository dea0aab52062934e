// Events about waiting pods (SPEC 6.8, 7): in Kubernetes mode the reason a pod waits is written
// as an Event on the pod, deduplicated and rate-limited, so that `kubectl describe pod` says why
// without a pod retried every second flooding the API server.
#include <algorithm>
#include <tuple>
#include <utility>

#include "core/strings.h"
#include "extender/service.h"
#include "spdlog/spdlog.h"

namespace berth::extender {

void Service::NoteAnswer(std::string_view uid, bool none_fit) {
  if (nudger_ == nullptr) return;  // standalone: no kube-scheduler to nudge
  absl::MutexLock lock(&answered_waiting_mu_);
  if (none_fit) {
    answered_waiting_.emplace(uid);
  } else if (!answered_waiting_.empty()) {
    answered_waiting_.erase(ToAbsl(uid));
  }
}

void Service::NoteWaiting(const core::Pod& pod, const std::vector<policy::NodeVerdict>& verdicts,
                          const std::vector<std::pair<policy::Reason, int>>& reasons) {
  if (pod_events_ == nullptr) return;
  // The reason most nodes gave (berth's own decisions, such as a queue position, are the same
  // on every node), with how many nodes gave it when not all did.
  auto rank = [](const std::pair<policy::Reason, int>& r) {
    return r.first == policy::Reason::kUnknownNode ? -1 : r.second;
  };
  auto top = std::max_element(reasons.begin(), reasons.end(),
                              [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  if (top == reasons.end() || top->first == policy::Reason::kUnknownNode) return;
  auto first = std::find_if(verdicts.begin(), verdicts.end(),
                            [&](const policy::NodeVerdict& v) { return !v.ok() && v.reason == top->first; });
  if (first == verdicts.end()) return;
  const policy::NodeVerdict& v = *first;
  const int count = top->second;
  std::string message = v.message;
  if (count < static_cast<int>(verdicts.size())) {
    StrAppend(&message, " (", count, " of ", verdicts.size(), " nodes)");
  }
  absl::MutexLock lock(&waiting_mu_);
  WaitingNote& note = waiting_[std::string(pod.uid.view())];
  note.pod = pod;
  note.reason = std::string(policy::ReasonCode(v.reason));
  note.message = std::move(message);
  note.seen = clock_->Now();
}

int Service::WriteWaitingEvents(absl::Time now) {
  if (pod_events_ == nullptr || !pod_events_->CanRecord().ok()) return 0;
  const PodEventOptions& o = options_.pod_events;
  struct Due {
    std::string uid;
    core::Pod pod;
    std::string reason, message;
    std::string sent_reason, sent_message;  ///< what was told before
    absl::Time sent;
  };
  std::vector<Due> due;
  {
    auto view = model_->Read();
    absl::MutexLock lock(&waiting_mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      WaitingNote& n = it->second;
      const core::PodState* p = view->FindPod(it->first);
      // Forget pods that are placed or gone, and pods no filter has asked about for a while.
      if (p == nullptr || !p->pod.node_name.empty() || now - n.seen > o.repeat_after) {
        it = waiting_.erase(it);
        continue;
      }
      const bool changed = n.reason != n.sent_reason || n.message != n.sent_message;
      const bool asked_since = n.seen > n.sent;
      if (asked_since && ((changed && now - n.sent >= o.min_interval) ||
                          (!changed && now - n.sent >= o.repeat_after))) {
        due.push_back({it->first, n.pod, n.reason, n.message, n.sent_reason, n.sent_message, n.sent});
      }
      ++it;
    }
  }
  // The pods told longest ago first; the rest wait for the next tick.
  std::sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.sent < b.sent; });
  if (static_cast<int>(due.size()) > o.max_per_tick) due.resize(static_cast<size_t>(o.max_per_tick));
  // Counted as told when recorded; an Event that fails for good is due again at the next tick
  // (its undo puts back what was told before).
  int recorded = 0;
  for (Due& d : due) {
    {
      absl::MutexLock lock(&waiting_mu_);
      auto it = waiting_.find(d.uid);
      if (it == waiting_.end()) continue;
      it->second.sent_reason = d.reason;
      it->second.sent_message = d.message;
      it->second.sent = now;
    }
    auto undo = [this, uid = d.uid, reason = d.reason, message = d.message, now,
                 before = std::make_tuple(d.sent_reason, d.sent_message, d.sent)](const absl::Status&) {
      absl::MutexLock lock(&waiting_mu_);
      auto it = waiting_.find(uid);
      if (it == waiting_.end() || it->second.sent != now || it->second.sent_reason != reason ||
          it->second.sent_message != message) {
        return;  // told again since
      }
      std::tie(it->second.sent_reason, it->second.sent_message, it->second.sent) = before;
    };
    intents_.Record(Intent{.kind = IntentKind::kEvent,
                           .pod = std::move(d.pod),
                           .type = "Warning",
                           .reason = std::move(d.reason),
                           .note = std::move(d.message),
                           .undo = std::move(undo)});
    ++recorded;
  }
  return recorded;
}

}  // namespace berth::extender
