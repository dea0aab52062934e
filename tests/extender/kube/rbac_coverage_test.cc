// The RBAC in manifests/ grants exactly what berth uses: every API call berth makes in a run
// that exercises all of its Kubernetes features is allowed by berth's ClusterRole and Role, and
// every permission they grant was used.

#include <set>
#include <string>
#include <tuple>

#include "catch2/catch.hpp"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"
#include "tests/testing/manifests.h"

namespace berth::testing {
namespace {

TEST_CASE("RBAC in manifests/ covers every API call berth makes, and nothing more", "[rbac]") {
  const RbacPolicy policy = LoadBerthRbac();
  REQUIRE_FALSE(policy.cluster_rules.empty());

  FakeApiServer api;
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("8").Pods(110).Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("a").Namespace("ml").Cpu("1").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("victim").Namespace("ml").Cpu("1").Node("n1")
                                       .Phase("Running").Obj()).ok());
  REQUIRE(api.Create("pools", "", MakePool("train").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("member").Namespace("ml").Cpu("1").Node("n1")
                                       .Label("scheduling.x-k8s.io/pod-group", "g")
                                       .Phase("Running").Obj()).ok());
  {
    // Leader election as a Deployment runs it: the Role's namespace.
    extender::kube::KubernetesOptions options = FastOptions(/*elect=*/true);
    options.leader_election.lease_namespace = policy.ns;
    options.pool_status_interval = absl::Milliseconds(100);
    KubeBerth berth(api, options, "berth-0_abc");
    REQUIRE(berth.StartReady());
    REQUIRE(berth.WaitFor([&] { return berth.runtime().elector()->IsLeader(); }));
    // Every collection is watched once its list is in (the watch opens just after).
    REQUIRE(api.WaitFor([](FakeApiServer& s) {
      for (const char* r : {"nodes", "pods", "podgroups", "pools", "queues", "priorityclasses"}) {
        if (s.open_watches(r) < 1) return false;
      }
      return true;
    }));
    // Renewals (update) after the creation.
    REQUIRE(api.WaitFor([&](FakeApiServer& s) {
      return s.CountCalls("PUT", "/apis/coordination.k8s.io/v1/namespaces/" + policy.ns) >= 2;
    }));
    // A gang member that finishes: berth asks whether it succeeded.
    Json member = api.Get("pods", "ml", "member").value();
    member["status"]["phase"] = "Succeeded";
    REQUIRE(api.Update("pods", "ml", member).ok());
    REQUIRE(berth.WaitFor([&] { return !berth.HasPod(member["metadata"]["uid"]); }));
    const Json pod = api.Get("pods", "ml", "a").value();
    const Json bind = {{"PodName", "a"}, {"PodNamespace", "ml"},
                       {"PodUID", pod["metadata"]["uid"]}, {"Node", "n1"}};
    REQUIRE(Json::parse(berth.service().Bind(bind.dump()).body)["Error"] == "");
    auto& writer = berth.runtime().writer();
    REQUIRE(writer.Evict("ml", "victim", "").ok());
    REQUIRE(writer.RecordEvent({.regarding = {.ns = "ml", .name = "a"}, .reason = "Test",
                                .action = "Test", .note = "n"}).ok());
    api.SetInstalled("events.k8s.io", false);
    REQUIRE(writer.RecordEvent({.regarding = {.ns = "ml", .name = "a"}, .reason = "Test",
                                .action = "Test", .note = "n"}).ok());
    REQUIRE(writer.PatchPodAnnotations("ml", "a", {{"berth.io/retry", "1"}}).ok());
    // Pool statistics, as main's housekeeping thread writes them.
    berth.runtime().pool_status().Tick(absl::Now());
    REQUIRE(api.CountCalls("PATCH", "/apis/berth.io/v1alpha1/pools/train/status") == 1);
    berth.Stop();
  }

  std::set<std::tuple<std::string, std::string, std::string>> used;  // verb, group, resource
  int checked = 0;
  for (const RecordedCall& c : api.calls()) {
    if (c.verb.empty()) continue;
    const std::string resource = c.subresource.empty() ? c.resource : c.resource + "/" + c.subresource;
    INFO(c.method << " " << c.path << " -> " << c.verb << " " << c.api_group << "/" << resource
                  << " ns=" << c.ns << " name=" << c.name);
    CHECK(RbacAllows(policy, c.verb, c.api_group, resource, c.ns, c.name));
    used.emplace(c.verb, c.api_group, resource);
    ++checked;
  }
  CHECK(checked > 20);

  // Nothing granted that berth did not use.
  auto check_rules = [&](const std::vector<RbacRule>& rules) {
    for (const RbacRule& rule : rules) {
      for (const std::string& group : rule.api_groups) {
        for (const std::string& resource : rule.resources) {
          for (const std::string& verb : rule.verbs) {
            INFO("granted but never used: " << verb << " " << group << "/" << resource);
            CHECK(used.count({verb, group, resource}) == 1);
          }
        }
      }
    }
  };
  check_rules(policy.cluster_rules);
  check_rules(policy.namespace_rules);
}

}  // namespace
}  // namespace berth::testing
