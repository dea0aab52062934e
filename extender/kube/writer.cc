#include "extender/kube/writer.h"

#include <optional>
#include <random>
#include <thread>

#include "core/strings.h"
#include "extender/json.h"
#include "extender/wait_escape.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace berth::extender::kube {
namespace {

std::string PodPath(std::string_view ns, std::string_view name) {
  return StrCat("/api/v1/namespaces/", ns, "/pods/", name);
}

bool Retryable(const absl::StatusOr<Response>& r) {
  if (!r.ok()) return r.status().code() == absl::StatusCode::kUnavailable;
  return r->status == 429 || r->status == 500 || r->status == 502 || r->status == 503 ||
         r->status == 504;
}

// Whether a refused eviction names a PodDisruptionBudget among its causes (the API server's
// 429 then means "not while the budget forbids it", not "too many requests").
bool DisruptionBudgetRefusal(const Response& r) {
  if (r.status != 429) return false;
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto details = j.find("details");
  if (details == j.end() || !details->is_object()) return false;
  auto causes = details->find("causes");
  if (causes == details->end() || !causes->is_array()) return false;
  for (const nlohmann::json& c : *causes) {
    if (c.is_object() && c.value("reason", "") == "DisruptionBudget") return true;
  }
  return false;
}

std::string EventName(std::string_view object_name, absl::Time now) {
  // The API server requires unique names; client-go's recorder uses "<object>.<hex time>".
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(absl::ToUnixNanos(now)));
  return StrCat(object_name, ".", hex);
}

}  // namespace

KubeWriter::KubeWriter(KubeClient* client, LeadershipInterface* leadership,
                       WriterOptions options)
    : client_(client), leadership_(leadership), options_(std::move(options)) {}

absl::Status KubeWriter::CheckLeader(bool recheck) const {
  if (leadership_ == nullptr || leadership_->IsLeader()) return absl::OkStatus();
  // The state of the last round may be stale: read the Lease once more before refusing.
  if (recheck && leadership_->RecheckLeader()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat("this berth replica is not the leader, only the leader binds and evicts: ",
             leadership_->Describe()));
}

absl::StatusOr<Response> KubeWriter::CallWithRetry(std::string_view method, const std::string& path,
                                                   const std::string& body,
                                                   std::string_view content_type,
                                                   absl::Duration budget) {
  const absl::Time deadline = absl::Now() + budget;
  absl::Duration backoff = absl::Milliseconds(100);
  // Seeded only when a retry needs jitter: most writes succeed at once, and a random_device and
  // a Mersenne Twister per binding cost more than the binding's own JSON.
  std::optional<std::mt19937_64> rng;
  while (true) {
    absl::StatusOr<Response> r = client_->Call(method, path, body, content_type);
    if (!Retryable(r)) return r;
    if (!rng) rng.emplace(std::random_device{}());
    absl::Duration wait = backoff * std::uniform_real_distribution<double>(0.5, 1.0)(*rng);
    if (r.ok() && r->retry_after) wait = std::max(wait, absl::Seconds(*r->retry_after));
    if (absl::Now() + wait >= deadline) return r;
    spdlog::debug("kubernetes: {} {} answered {}; retrying in {}", method, path,
                  r.ok() ? StrCat(r->status) : std::string(r.status().message()),
                  absl::FormatDuration(wait));
    WaitEscape::BeforeBlindWait();
    absl::SleepFor(wait);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::Status KubeWriter::Bind(const core::Pod& pod, std::string_view node) {
  if (absl::Status s = CheckLeader(); !s.ok()) return s;
  // One per scheduled pod: written straight to its text.
  std::string binding;
  JsonWriter w(&binding);
  w.BeginObject().Key("apiVersion").String("v1").Key("kind").String("Binding");
  w.Key("metadata").BeginObject().Key("name").String(pod.name).Key("namespace").String(pod.ns);
  // The uid precondition: a pod deleted and re-created under the same name since berth
  // decided is not bound by mistake (the API server answers 409).
  if (!pod.uid.empty() && !pod.uid.view().starts_with("generated:")) w.Key("uid").String(pod.uid);
  w.EndObject();
  w.Key("target").BeginObject().Key("apiVersion").String("v1").Key("kind").String("Node");
  w.Key("name").String(node).EndObject().EndObject();
  const std::string path = StrCat(PodPath(pod.ns.view(), pod.name.view()), "/binding");
  absl::StatusOr<Response> r =
      CallWithRetry("POST", path, binding, "application/json", options_.bind_retry_budget);
  if (!r.ok()) return r.status();
  if (!r->ok()) return ApiError("POST", path, *r);
  return absl::OkStatus();
}

absl::Status KubeWriter::Evict(std::string_view ns, std::string_view name, std::string_view uid,
                               std::optional<int64_t> grace_seconds) {
  if (absl::Status s = CheckLeader(); !s.ok()) return s;
  nlohmann::json options = nlohmann::json::object();
  if (grace_seconds) options["gracePeriodSeconds"] = *grace_seconds;
  if (!uid.empty()) options["preconditions"] = {{"uid", uid}};
  const nlohmann::json eviction = {{"apiVersion", "policy/v1"},
                                   {"kind", "Eviction"},
                                   {"metadata", {{"name", name}, {"namespace", ns}}},
                                   {"deleteOptions", std::move(options)}};
  const std::string path = StrCat(PodPath(ns, name), "/eviction");
  // Not retried here: the intent worker retries what may pass. A disruption budget's 429 is
  // reported as FailedPrecondition, as waiting does not clear it; another 429 (API priority and
  // fairness) stays ResourceExhausted.
  absl::StatusOr<Response> r = client_->Call("POST", path, eviction.dump());
  if (!r.ok()) return r.status();
  if (DisruptionBudgetRefusal(*r)) {
    const absl::Status api = ApiError("POST", path, *r);
    return absl::FailedPreconditionError(api.message());
  }
  if (!r->ok()) return ApiError("POST", path, *r);
  return absl::OkStatus();
}

absl::Status KubeWriter::RecordEvent(const EventRecord& e) {
  const absl::Time now = absl::Now();
  const std::string name = EventName(e.regarding.name, now);
  const std::string ns = e.regarding.ns.empty() ? "default" : e.regarding.ns;
  nlohmann::json ref = {{"apiVersion", e.regarding.api_version},
                        {"kind", e.regarding.kind},
                        {"name", e.regarding.name}};
  if (!e.regarding.ns.empty()) ref["namespace"] = e.regarding.ns;
  if (!e.regarding.uid.empty()) ref["uid"] = e.regarding.uid;

  if (!core_events_only_.load()) {
    const nlohmann::json event = {
        {"apiVersion", "events.k8s.io/v1"},
        {"kind", "Event"},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"eventTime", MicroTime(now)},
        {"reportingController", "berth.io/berth"},
        {"reportingInstance", options_.reporting_instance},
        {"action", e.action},
        {"reason", e.reason},
        {"type", e.type},
        {"note", e.note.substr(0, 1024)},  // the API server rejects notes over 1 kB
        {"regarding", ref}};
    const std::string path = StrCat("/apis/events.k8s.io/v1/namespaces/", ns, "/events");
    absl::StatusOr<Response> r = client_->Call("POST", path, event.dump());
    if (!r.ok()) return r.status();
    if (r->ok()) return absl::OkStatus();
    if (r->status != 404) return ApiError("POST", path, *r);
    spdlog::info("kubernetes: events.k8s.io/v1 is not served; writing core v1 Events");
    core_events_only_.store(true);
  }
  const std::string stamp = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  const nlohmann::json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"involvedObject", ref},
      {"reason", e.reason},
      {"message", e.note},
      {"type", e.type},
      {"action", e.action},
      {"source", {{"component", "berth"}}},
      {"reportingComponent", "berth.io/berth"},
      {"reportingInstance", options_.reporting_instance},
      {"firstTimestamp", stamp},
      {"lastTimestamp", stamp},
      {"count", 1}};
  const std::string path = StrCat("/api/v1/namespaces/", ns, "/events");
  absl::StatusOr<Response> r = client_->Call("POST", path, event.dump());
  if (!r.ok()) return r.status();
  if (!r->ok()) return ApiError("POST", path, *r);
  return absl::OkStatus();
}

absl::Status KubeWriter::PatchPodAnnotations(
    std::string_view ns, std::string_view name,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& annotations) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [key, value] : annotations) {
    values[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  }
  const nlohmann::json patch = {{"metadata", {{"annotations", std::move(values)}}}};
  const std::string path = PodPath(ns, name);
  absl::StatusOr<Response> r = CallWithRetry("PATCH", path, patch.dump(),
                                             "application/merge-patch+json", absl::Seconds(5));
  if (!r.ok()) return r.status();
  if (!r->ok()) return ApiError("PATCH", path, *r);
  return absl::OkStatus();
}

absl::Status KubeEvictor::Evict(const core::Pod& victim, const core::Pod& for_pod,
                                std::string_view why) {
  if (absl::Status s = writer_->Evict(victim.ns, victim.name, victim.uid); !s.ok()) return s;
  absl::Status event = writer_->RecordEvent(EventRecord{
      .regarding = ObjectRef{.ns = victim.ns.str(), .name = victim.name.str(), .uid = victim.uid.str()},
      .type = "Normal",
      .reason = "Reclaimed",
      .action = "Evict",
      .note = StrCat("Evicted by berth (", why, ") to make room for ", for_pod.Key())});
  if (!event.ok()) {
    spdlog::warn("event for the eviction of {} not recorded: {}", victim.Key(), ToStd(event.message()));
  }
  return absl::OkStatus();
}

absl::Status KubeNudger::Nudge(const core::Pod& pod, std::string_view why) {
  (void)why;
  return writer_->PatchPodAnnotations(
      pod.ns, pod.name,
      {{"berth.io/admitted", absl::FormatTime(absl::RFC3339_sec, clock_->Now(), absl::UTCTimeZone())}});
}

}  // namespace berth::extender::kube
