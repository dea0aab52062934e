#include "extender/kube/leader.h"

#include <unistd.h>

#include <cstdlib>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "core/strings.h"
#include "extender/thread_name.h"
#include "extender/wait_escape.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace berth::extender::kube {
namespace {

std::string RandomSuffix() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back("0123456789abcdef"[hex(rd)]);
  return s;
}

/// The fields of a Lease berth reads.
struct LeaseRecord {
  std::string holder;
  std::string renew_time;
  int64_t duration_seconds = 0;
  int64_t transitions = 0;
  std::string resource_version;
  nlohmann::json object;
};

std::optional<LeaseRecord> ParseLease(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  LeaseRecord r;
  const nlohmann::json& meta = j.contains("metadata") ? j["metadata"] : nlohmann::json::object();
  const nlohmann::json& spec = j.contains("spec") ? j["spec"] : nlohmann::json::object();
  if (!meta.is_object() || !spec.is_object()) return std::nullopt;
  auto str = [](const nlohmann::json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [](const nlohmann::json& o, const char* k) -> int64_t {
    auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  r.holder = str(spec, "holderIdentity");
  r.renew_time = str(spec, "renewTime");
  r.duration_seconds = num(spec, "leaseDurationSeconds");
  r.transitions = num(spec, "leaseTransitions");
  r.resource_version = str(meta, "resourceVersion");
  r.object = std::move(j);
  return r;
}

int64_t CeilSeconds(absl::Duration d) {
  return std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))));
}

}  // namespace

std::string DefaultPodName() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
  return "berth";
}

absl::Status LeaderElector::Validate(const LeaderElectionConfig& c) {
  if (c.lease_name.empty()) return absl::InvalidArgumentError("leaderElection.leaseName is empty");
  if (c.renew_deadline >= c.lease_duration) {
    return absl::InvalidArgumentError(
        "leaderElection.renewDeadlineSeconds must be less than leaseDurationSeconds: a leader "
        "must stop acting before another replica may take the lease over");
  }
  if (c.retry_period <= absl::ZeroDuration() || c.retry_period >= c.renew_deadline) {
    return absl::InvalidArgumentError(
        "leaderElection.retryPeriodSeconds must be positive and less than renewDeadlineSeconds");
  }
  return absl::OkStatus();
}

LeaderElector::LeaderElector(KubeClient* client, LeaderElectionConfig config,
                             std::function<void(bool)> on_change)
    : client_(client), config_(std::move(config)), on_change_(std::move(on_change)) {
  if (config_.identity.empty()) {
    config_.identity = config_.mode == LeaderElectionConfig::Mode::kAcquire
                           ? StrCat(DefaultPodName(), "_", RandomSuffix())
                           : StrCat(DefaultPodName(), "_");
  }
  lease_ns_ = !config_.lease_namespace.empty()         ? config_.lease_namespace
              : !client_->config().default_namespace.empty() ? client_->config().default_namespace
                                                        : "default";
}

LeaderElector::~LeaderElector() { Stop(); }

std::string LeaderElector::LeasePath(bool item) const {
  std::string p = StrCat("/apis/coordination.k8s.io/v1/namespaces/", lease_ns_, "/leases");
  if (item) StrAppend(&p, "/", config_.lease_name);
  return p;
}

void LeaderElector::Start() {
  spdlog::info("leader election: {} lease {}/{} as {}",
               config_.mode == LeaderElectionConfig::Mode::kAcquire ? "acquiring" : "following",
               lease_ns_, config_.lease_name, config_.identity);
  thread_ = std::thread([this] {
    NameThisThread("leader");
    Run();
  });
}

void LeaderElector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  bool was_leader;
  {
    absl::MutexLock lock(&mu_);
    was_leader = leader_;
  }
  if (was_leader && config_.mode == LeaderElectionConfig::Mode::kAcquire) {
    if (absl::Status s = Release(); !s.ok()) {
      spdlog::warn("leader election: releasing lease {}/{}: {}", lease_ns_, config_.lease_name, ToStd(s.message()));
    }
  }
  SetLeader(false);
}

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  // Checked against the clock, not only the flag: a replica whose renew loop is stalled must
  // stop acting before the lease can expire for the others.
  return leader_ && absl::Now() - last_renew_ < config_.renew_deadline;
}

bool LeaderElector::Known() const { return known_.load(std::memory_order_acquire); }

absl::Status LeaderElector::Round() {
  absl::Status s;
  {
    absl::MutexLock lock(&round_mu_);
    rounds_begun_.store(++rounds_started_, std::memory_order_release);
    s = TryAcquireOrRenew();
  }
  // A round that got an answer from the API server about the Lease (found, or absent) makes its
  // state known, even when this replica then lost a write (409).
  if (lease_read_.load(std::memory_order_acquire) && !known_.exchange(true)) {
    spdlog::info("leader election: lease {}/{} read: {}", lease_ns_, config_.lease_name,
                 Describe());
    if (on_known_) on_known_();
  }
  return s;
}

bool LeaderElector::RecheckLeader() {
  if (IsLeader()) return true;
  // round_mu_ may be held across a Lease read by the election's own thread.
  WaitEscape::BeforeBlindWait();
  const uint64_t seen = rounds_begun_.load(std::memory_order_acquire);
  {
    // A round that began after this call did, and has ended (round_mu_ is free), read the Lease
    // late enough: share its answer.
    absl::MutexLock lock(&round_mu_);
    if (rounds_started_ > seen) return IsLeader();
  }
  if (absl::Status s = Round(); !s.ok()) {
    spdlog::debug("leader election: reading lease {}/{} again: {}", lease_ns_, config_.lease_name,
                  ToStd(s.message()));
  }
  return IsLeader();
}

std::string LeaderElector::holder() const {
  absl::MutexLock lock(&mu_);
  return holder_;
}

std::string LeaderElector::Describe() const {
  const bool leader = IsLeader();
  absl::MutexLock lock(&mu_);
  if (leader) return StrCat(config_.identity, " (leader of lease ", lease_ns_, "/", config_.lease_name, ")");
  return StrCat(config_.identity, " (follower; lease ", lease_ns_, "/", config_.lease_name,
                " is held by ", holder_.empty() ? "nobody" : holder_, ")");
}

void LeaderElector::SetLeader(bool leader) {
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    changed = leader_ != leader;
    leader_ = leader;
  }
  if (!changed) return;
  spdlog::info("leader election: {} {} leadership of {}/{}", config_.identity,
               leader ? "gained" : "lost", lease_ns_, config_.lease_name);
  if (on_change_) on_change_(leader);
}

void LeaderElector::Run() {
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  while (true) {
    absl::Status s = Round();
    if (!s.ok()) spdlog::debug("leader election: {}", ToStd(s.message()));
    bool expired;
    {
      absl::MutexLock lock(&mu_);
      expired = leader_ && absl::Now() - last_renew_ >= config_.renew_deadline;
    }
    if (expired) {
      spdlog::warn("leader election: could not renew lease {}/{} within {}; stepping down",
                   lease_ns_, config_.lease_name, absl::FormatDuration(config_.renew_deadline));
      SetLeader(false);
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), config_.retry_period * jitter(rng));
    if (stopping_) return;
  }
}

absl::Status LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = absl::Now();
  const std::string item = LeasePath(true);
  absl::StatusOr<Response> got = client_->Call("GET", item);
  if (!got.ok()) return got.status();
  const bool acquire = config_.mode == LeaderElectionConfig::Mode::kAcquire;

  if (got->status == 404) {
    lease_read_.store(true, std::memory_order_release);
    {
      absl::MutexLock lock(&mu_);
      holder_.clear();
    }
    if (!acquire) {
      SetLeader(false);
      return absl::OkStatus();
    }
    nlohmann::json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", lease_ns_}}},
        {"spec",
         {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds", CeilSeconds(config_.lease_duration)},
          {"acquireTime", MicroTime(now)},
          {"renewTime", MicroTime(now)},
          {"leaseTransitions", 0}}}};
    absl::StatusOr<Response> created = client_->Call("POST", LeasePath(false), lease.dump());
    if (!created.ok()) return created.status();
    if (!created->ok()) return ApiError("POST", LeasePath(false), *created);  // 409: lost the race
    {
      absl::MutexLock lock(&mu_);
      last_renew_ = now;
      holder_ = config_.identity;
    }
    SetLeader(true);
    return absl::OkStatus();
  }
  if (!got->ok()) return ApiError("GET", item, *got);
  std::optional<LeaseRecord> rec = ParseLease(got->body);
  if (!rec) return absl::DataLossError(StrCat("GET ", item, ": not a Lease object"));
  lease_read_.store(true, std::memory_order_release);

  bool held_by_other;
  {
    absl::MutexLock lock(&mu_);
    holder_ = rec->holder;
    const std::string record = StrCat(rec->holder, "|", rec->renew_time, "|", rec->transitions);
    if (record != observed_record_) {
      // Expiry is judged from when *this* replica saw the record change, not from renewTime,
      // so replicas need no synchronised clocks.
      observed_record_ = record;
      observed_at_ = now;
      observed_duration_ = absl::Seconds(rec->duration_seconds > 0 ? rec->duration_seconds : 15);
    }
    const bool live = observed_at_ + observed_duration_ > now;
    if (!acquire) {
      const bool ours = !rec->holder.empty() && absl::StartsWith(rec->holder, config_.identity) && live;
      if (ours) last_renew_ = now;
      held_by_other = !ours;
    } else {
      held_by_other = !rec->holder.empty() && rec->holder != config_.identity && live;
    }
  }
  if (!acquire || held_by_other) {
    SetLeader(!held_by_other);
    return absl::OkStatus();
  }

  nlohmann::json& lease = rec->object;
  nlohmann::json& spec = lease["spec"];
  if (!spec.is_object()) spec = nlohmann::json::object();
  if (rec->holder != config_.identity) {
    spec["acquireTime"] = MicroTime(now);
    spec["leaseTransitions"] = rec->transitions + 1;
  }
  spec["holderIdentity"] = config_.identity;
  spec["leaseDurationSeconds"] = CeilSeconds(config_.lease_duration);
  spec["renewTime"] = MicroTime(now);
  // The resourceVersion read above is sent back: if anyone wrote the Lease since, the API
  // server answers 409 and this round is lost.
  absl::StatusOr<Response> put = client_->Call("PUT", item, lease.dump());
  if (!put.ok()) return put.status();
  if (!put->ok()) return ApiError("PUT", item, *put);
  {
    absl::MutexLock lock(&mu_);
    last_renew_ = now;
    holder_ = config_.identity;
    if (std::optional<LeaseRecord> mine = ParseLease(put->body)) {
      observed_record_ = StrCat(mine->holder, "|", mine->renew_time, "|", mine->transitions);
      observed_at_ = now;
    }
  }
  SetLeader(true);
  return absl::OkStatus();
}

absl::Status LeaderElector::Release() {
  const std::string item = LeasePath(true);
  absl::StatusOr<Response> got = client_->Call("GET", item);
  if (!got.ok()) return got.status();
  if (!got->ok()) return ApiError("GET", item, *got);
  std::optional<LeaseRecord> rec = ParseLease(got->body);
  if (!rec) return absl::DataLossError(StrCat("GET ", item, ": not a Lease object"));
  if (rec->holder != config_.identity) return absl::OkStatus();
  nlohmann::json& spec = rec->object["spec"];
  const absl::Time now = absl::Now();
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = MicroTime(now);
  spec["acquireTime"] = MicroTime(now);
  absl::StatusOr<Response> put = client_->Call("PUT", item, rec->object.dump());
  if (!put.ok()) return put.status();
  if (!put->ok()) return ApiError("PUT", item, *put);
  spdlog::info("leader election: released lease {}/{}", lease_ns_, config_.lease_name);
  return absl::OkStatus();
}

}  // namespace berth::extender::kube
