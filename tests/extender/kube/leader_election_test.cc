// Leader election on a coordination.k8s.io/v1 Lease, against the fake API server.

#include <chrono>
#include <string>

#include "catch2/catch.hpp"
#include "extender/kube/leader.h"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"

namespace berth::testing {
namespace {

using extender::kube::KubeClient;
using extender::kube::LeaderElectionConfig;
using extender::kube::LeaderElector;

std::string MicroNow() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
}

Json Lease(const std::string& holder, int duration_seconds) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", "berth"}, {"namespace", "berth-system"}}},
          {"spec",
           {{"holderIdentity", holder},
            {"leaseDurationSeconds", duration_seconds},
            {"renewTime", MicroNow()},
            {"leaseTransitions", 0}}}};
}

std::string Holder(FakeApiServer& api, const std::string& name = "berth") {
  std::optional<Json> l = api.Get("leases", "berth-system", name);
  if (!l) return "";
  return (*l)["spec"].value("holderIdentity", "");
}

TEST_CASE("leader election: one leader among replicas; followers refuse bind",
          "[leader][concurrency]") {
  FakeApiServer api;
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("4").Pods(110).Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("a").Namespace("ml").Cpu("1").Obj()).ok());
  KubeBerth one(api, FastOptions(true), "replica-1");
  KubeBerth two(api, FastOptions(true), "replica-2");
  one.Start();
  REQUIRE(one.WaitFor([&] { return one.runtime().elector()->IsLeader(); }));
  two.Start();
  REQUIRE(one.WaitReady());
  REQUIRE(two.WaitReady());
  // Several renew rounds later, still exactly one leader.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(one.runtime().elector()->IsLeader());
  CHECK_FALSE(two.runtime().elector()->IsLeader());
  CHECK(Holder(api) == "replica-1");

  // The follower answers verbs from its own model ...
  const Json pod = api.Get("pods", "ml", "a").value();
  const Json filtered = Json::parse(two.service().Filter(ArgsNames(pod, {"n1"}).dump()).body);
  CHECK(filtered["NodeNames"] == Json::array({"n1"}));
  // ... but refuses to bind, naming the leader, and changes nothing.
  const Json bind = {{"PodName", "a"}, {"PodNamespace", "ml"},
                     {"PodUID", pod["metadata"]["uid"]}, {"Node", "n1"}};
  const Json refused = Json::parse(two.service().Bind(bind.dump()).body);
  CHECK_THAT(refused["Error"].get<std::string>(),
             Catch::Contains("not the leader") && Catch::Contains("replica-1"));
  CHECK(api.bindings().empty());
  CHECK(two.NodeCpuMilli("n1") == 0);
  // Evictions are the leader's too.
  CHECK(two.runtime().writer().Evict("ml", "a", "").code() == absl::StatusCode::kFailedPrecondition);

  // The leader binds.
  const Json bound = Json::parse(one.service().Bind(bind.dump()).body);
  CHECK(bound["Error"] == "");
  CHECK(api.bindings().size() == 1);

  // A leader that stops releases the Lease: the follower takes over without waiting for expiry.
  const auto stopped = std::chrono::steady_clock::now();
  one.Stop();
  REQUIRE(two.WaitFor([&] { return two.runtime().elector()->IsLeader(); }));
  CHECK(std::chrono::steady_clock::now() - stopped < std::chrono::milliseconds(900));
  CHECK(Holder(api) == "replica-2");
  // The new leader wrote an Event on the Lease.
  CHECK(api.WaitFor([](FakeApiServer& s) {
    for (const Json& e : s.events()) {
      if (e.value("reason", "") == "LeaderElection" &&
          e.value("note", "").find("replica-2 became leader") != std::string::npos) {
        return true;
      }
    }
    return false;
  }));
}

TEST_CASE("leader election: a Lease held by a live holder is respected until it expires",
          "[leader]") {
  FakeApiServer api;
  REQUIRE(api.Create("leases", "berth-system", Lease("ghost", 1)).ok());
  auto client = KubeClient::Create(FakeClientConfig(api));
  REQUIRE(client.ok());
  LeaderElectionConfig config = FastOptions(true).leader_election;
  config.identity = "me";
  LeaderElector elector(client->get(), config);

  // The ghost stops renewing now. Expiry is judged from when *this* replica first saw the
  // record, on its own clock: not before one lease duration has passed.
  const auto first_seen = std::chrono::steady_clock::now();
  REQUIRE(elector.TryAcquireOrRenew().ok());
  CHECK_FALSE(elector.IsLeader());
  CHECK(elector.holder() == "ghost");
  while (!elector.IsLeader() && std::chrono::steady_clock::now() - first_seen < std::chrono::seconds(3)) {
    REQUIRE(elector.TryAcquireOrRenew().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(elector.IsLeader());
  CHECK(std::chrono::steady_clock::now() - first_seen >= std::chrono::milliseconds(950));
  const Json lease = api.Get("leases", "berth-system", "berth").value();
  CHECK(lease["spec"]["holderIdentity"] == "me");
  CHECK(lease["spec"]["leaseTransitions"] == 1);
  CHECK(lease["spec"].contains("acquireTime"));

  // A holder that keeps renewing is never displaced.
  Json renewed = lease;
  renewed["spec"]["holderIdentity"] = "other";
  REQUIRE(api.Update("leases", "berth-system", renewed).ok());
  for (int i = 0; i < 10; ++i) {
    Json again = api.Get("leases", "berth-system", "berth").value();
    again["spec"]["renewTime"] = MicroNow();
    REQUIRE(api.Update("leases", "berth-system", again).ok());
    REQUIRE(elector.TryAcquireOrRenew().ok());
    CHECK_FALSE(elector.IsLeader());
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  CHECK(Holder(api) == "other");
}

TEST_CASE("leader election: a conflicting write loses the round", "[leader]") {
  FakeApiServer api;
  auto client = KubeClient::Create(FakeClientConfig(api));
  REQUIRE(client.ok());
  LeaderElectionConfig config = FastOptions(true).leader_election;
  config.identity = "me";
  LeaderElector elector(client->get(), config);
  // Someone else creates the Lease between our GET (404) and our POST: 409, not leader.
  api.InjectFailure({.method = "POST", .path_prefix = "/apis/coordination.k8s.io/v1/namespaces/berth-system/leases",
                     .code = 409, .reason = "AlreadyExists"});
  CHECK(elector.TryAcquireOrRenew().code() == absl::StatusCode::kAborted);
  CHECK_FALSE(elector.IsLeader());
  REQUIRE(elector.TryAcquireOrRenew().ok());
  CHECK(elector.IsLeader());
  // A renewal that conflicts (the Lease changed since it was read) is refused by the server.
  api.InjectFailure({.method = "PUT", .path_prefix = "/apis/coordination.k8s.io/v1/namespaces/berth-system/leases/berth",
                     .code = 409, .reason = "Conflict"});
  CHECK(elector.TryAcquireOrRenew().code() == absl::StatusCode::kAborted);
  // Without a successful renewal the leader steps down once renewDeadline has passed.
  api.InjectFailure({.method = "", .path_prefix = "/apis/coordination.k8s.io", .code = 503, .times = -1});
  std::this_thread::sleep_for(std::chrono::milliseconds(650));
  CHECK_FALSE(elector.IsLeader());
}

TEST_CASE("leader election: follow mode tracks the co-located kube-scheduler's Lease",
          "[leader]") {
  FakeApiServer api;
  auto client = KubeClient::Create(FakeClientConfig(api));
  REQUIRE(client.ok());
  LeaderElectionConfig config = FastOptions(true).leader_election;
  config.mode = LeaderElectionConfig::Mode::kFollow;
  config.lease_name = "berth-scheduler";
  config.identity = "berth-7d9f-abcde_";  // this pod's name, as kube-scheduler prefixes it
  LeaderElector elector(client->get(), config);

  REQUIRE(elector.TryAcquireOrRenew().ok());  // no Lease yet
  CHECK_FALSE(elector.IsLeader());
  Json lease = Lease("berth-7d9f-abcde_0f3c1c7a-1111-2222-3333-444455556666", 15);
  lease["metadata"]["name"] = "berth-scheduler";
  REQUIRE(api.Create("leases", "berth-system", lease).ok());
  REQUIRE(elector.TryAcquireOrRenew().ok());
  CHECK(elector.IsLeader());
  // berth never writes the Lease in follow mode.
  CHECK(api.CountCalls("PUT", "/apis/coordination.k8s.io") == 0);
  CHECK(api.CountCalls("POST", "/apis/coordination.k8s.io") == 0);

  // Another pod's kube-scheduler takes over.
  lease = api.Get("leases", "berth-system", "berth-scheduler").value();
  lease["spec"]["holderIdentity"] = "berth-7d9f-zzzzz_aaaa";
  lease["spec"]["renewTime"] = MicroNow();
  REQUIRE(api.Update("leases", "berth-system", lease).ok());
  REQUIRE(elector.TryAcquireOrRenew().ok());
  CHECK_FALSE(elector.IsLeader());
  CHECK(elector.Describe().find("berth-7d9f-zzzzz_aaaa") != std::string::npos);
}

// Follow mode at start-up: kube-scheduler takes its Lease and binds within a second, before
// berth's next round of reading the Lease. berth reads it again before refusing a bind.
TEST_CASE("leader election: a bind right after kube-scheduler took the Lease is not refused",
          "[leader]") {
  FakeApiServer api;
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("4").Pods(110).Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("a").Namespace("ml").Cpu("1").Obj()).ok());
  extender::kube::KubernetesOptions options = FastOptions(true);
  options.leader_election.mode = LeaderElectionConfig::Mode::kFollow;
  options.leader_election.lease_name = "berth-scheduler";
  // Rounds far apart: the elector's own loop does not read the Lease again during the test.
  options.leader_election.lease_duration = absl::Seconds(60);
  options.leader_election.renew_deadline = absl::Seconds(50);
  options.leader_election.retry_period = absl::Seconds(40);
  KubeBerth berth(api, options, "berth-0_");
  REQUIRE(berth.StartReady());  // the Lease is known: absent
  CHECK(berth.runtime().elector()->Describe().find("held by nobody") != std::string::npos);
  const int reads_before = api.CountCalls("GET", "/apis/coordination.k8s.io");

  Json lease = Lease("berth-0_6a1f0c2e-aaaa-bbbb-cccc-ddddeeeeffff", 15);
  lease["metadata"]["name"] = "berth-scheduler";
  REQUIRE(api.Create("leases", "berth-system", lease).ok());
  const Json pod = api.Get("pods", "ml", "a").value();
  const Json bind = {{"PodName", "a"}, {"PodNamespace", "ml"},
                     {"PodUID", pod["metadata"]["uid"]}, {"Node", "n1"}};
  const Json bound = Json::parse(berth.service().Bind(bind.dump()).body);
  CHECK(bound["Error"] == "");
  CHECK(api.bindings().size() == 1);
  CHECK(api.CountCalls("GET", "/apis/coordination.k8s.io") == reads_before + 1);

  CHECK(api.bindings().size() == 1);
}

// berth answers ready only once it knows who leads: with the Lease unreadable, never, however
// long ago its watches listed everything.
TEST_CASE("leader election: not ready before the Lease has been read", "[leader]") {
  FakeApiServer api;
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("4").Pods(110).Obj()).ok());
  api.InjectFailure({.method = "", .path_prefix = "/apis/coordination.k8s.io", .code = 503, .times = -1});
  KubeBerth berth(api, FastOptions(true), "replica-1");
  berth.Start();
  REQUIRE(berth.WaitFor([&] { return berth.runtime().synced(); }));
  REQUIRE(berth.WaitFor([&] { return api.CountCalls("GET", "/apis/coordination.k8s.io") >= 3; }));
  CHECK_FALSE(berth.runtime().elector()->Known());
  const extender::Reply not_ready = berth.service().Readyz();
  CHECK(not_ready.status == 503);
  CHECK_THAT(not_ready.body, Catch::Contains("the Lease read"));
  api.ClearFailures();
  CHECK(berth.WaitReady());
  CHECK(berth.runtime().elector()->Known());
}

TEST_CASE("leader election: invalid timings are refused", "[leader]") {
  LeaderElectionConfig c;
  c.renew_deadline = c.lease_duration;
  CHECK_FALSE(LeaderElector::Validate(c).ok());
  c = LeaderElectionConfig{};
  c.retry_period = c.renew_deadline;
  CHECK_FALSE(LeaderElector::Validate(c).ok());
  c = LeaderElectionConfig{};
  c.lease_name.clear();
  CHECK_FALSE(LeaderElector::Validate(c).ok());
  CHECK(LeaderElector::Validate(LeaderElectionConfig{}).ok());
}

}  // namespace
}  // namespace berth::testing
