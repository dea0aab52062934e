#include "core/objects.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/resources.h"
#include "tests/testing/core_builders.h"

namespace berth::core {
namespace {

using testing::kGi;
using testing::Vec;

constexpr int64_t kMi = int64_t{1} << 20;

ContainerRequest Init(ResourceVector r) { return ContainerRequest{.requests = std::move(r)}; }
ContainerRequest Sidecar(ResourceVector r) {
  return ContainerRequest{.requests = std::move(r), .sidecar = true};
}

// The effective request of a spec whose sums fit.
ResourceVector Req(const PodResourceSpec& spec) {
  absl::StatusOr<ResourceVector> r = EffectiveRequest(spec);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *std::move(r);
}

// ---- EffectiveRequest (extender-protocol.md 5.1) ----------------------------------------------

TEST_CASE("EffectiveRequest of an empty pod is one pod slot", "[objects][request]") {
  const ResourceVector r = Req(PodResourceSpec{});
  CHECK(r == Vec({{kPods, 1}}));
  CHECK(r.Get(kCpu) == 0);
  CHECK(r.Get(kMemory) == 0);
}

TEST_CASE("EffectiveRequest sums the containers", "[objects][request]") {
  PodResourceSpec spec;
  spec.containers = {Vec({{kCpu, 100}, {kMemory, 200 * kMi}}), Vec({{kCpu, 300}}),
                     Vec({{kNvidiaGpu, 2}, {kMemory, 56 * kMi}})};
  CHECK(Req(spec) ==
        Vec({{kCpu, 400}, {kMemory, 256 * kMi}, {kNvidiaGpu, 2}, {kPods, 1}}));
}

TEST_CASE("EffectiveRequest takes the max with each init container, per resource",
          "[objects][request]") {
  PodResourceSpec spec;
  spec.containers = {Vec({{kCpu, 200}, {kMemory, kGi}}), Vec({{kCpu, 200}})};  // 400m, 1Gi

  SECTION("a bigger init container raises the request") {
    spec.init_containers = {Init(Vec({{kCpu, 500}}))};
    CHECK(Req(spec) == Vec({{kCpu, 500}, {kMemory, kGi}, {kPods, 1}}));
  }
  SECTION("a smaller init container changes nothing") {
    spec.init_containers = {Init(Vec({{kCpu, 300}, {kMemory, 512 * kMi}}))};
    CHECK(Req(spec) == Vec({{kCpu, 400}, {kMemory, kGi}, {kPods, 1}}));
  }
  SECTION("init containers are not summed with each other") {
    spec.init_containers = {Init(Vec({{kCpu, 600}})), Init(Vec({{kCpu, 700}}))};
    CHECK(Req(spec) == Vec({{kCpu, 700}, {kMemory, kGi}, {kPods, 1}}));
  }
  SECTION("the max is taken per resource, not per container") {
    spec.init_containers = {Init(Vec({{kCpu, 100}, {kMemory, 3 * kGi}})),
                            Init(Vec({{kCpu, 900}, {kMemory, 0}}))};
    CHECK(Req(spec) == Vec({{kCpu, 900}, {kMemory, 3 * kGi}, {kPods, 1}}));
  }
  SECTION("an init container requesting a resource no container uses") {
    spec.init_containers = {Init(Vec({{kEphemeralStorage, 5 * kGi}}))};
    CHECK(Req(spec) ==
          Vec({{kCpu, 400}, {kMemory, kGi}, {kEphemeralStorage, 5 * kGi}, {kPods, 1}}));
  }
}

TEST_CASE("EffectiveRequest: sidecars add to the sum and to later init containers",
          "[objects][request]") {
  PodResourceSpec spec;
  spec.containers = {Vec({{kCpu, 100}})};

  SECTION("a sidecar adds to the running sum") {
    spec.init_containers = {Sidecar(Vec({{kCpu, 50}, {kMemory, 64 * kMi}}))};
    // regular = 100 + 50; initMax = 50.
    CHECK(Req(spec) == Vec({{kCpu, 150}, {kMemory, 64 * kMi}, {kPods, 1}}));
  }
  SECTION("an init container after a sidecar runs alongside it") {
    spec.init_containers = {Sidecar(Vec({{kCpu, 50}})), Init(Vec({{kCpu, 200}}))};
    // regular = 150; initMax = max(50, 200 + 50) = 250.
    CHECK(Req(spec) == Vec({{kCpu, 250}, {kPods, 1}}));
  }
  SECTION("an init container before a sidecar does not") {
    spec.init_containers = {Init(Vec({{kCpu, 200}})), Sidecar(Vec({{kCpu, 50}}))};
    // regular = 150; initMax = max(200, 50) = 200.
    CHECK(Req(spec) == Vec({{kCpu, 200}, {kPods, 1}}));
  }
  SECTION("only the sidecars started so far count") {
    spec.init_containers = {Sidecar(Vec({{kCpu, 30}})), Init(Vec({{kCpu, 170}})),
                            Sidecar(Vec({{kCpu, 500}})), Init(Vec({{kCpu, 200}}))};
    // regular = 100 + 30 + 500 = 630; initMax = max(30, 170+30, 530, 200+530) = 730.
    CHECK(Req(spec) == Vec({{kCpu, 730}, {kPods, 1}}));
  }
  SECTION("the sidecars alone can set the init peak") {
    spec.containers = {};
    spec.init_containers = {Sidecar(Vec({{kCpu, 40}})), Sidecar(Vec({{kCpu, 60}})),
                            Init(Vec({{kCpu, 50}}))};
    // regular = 100; initMax = max(40, 100, 50 + 100) = 150.
    CHECK(Req(spec) == Vec({{kCpu, 150}, {kPods, 1}}));
  }
}

TEST_CASE("EffectiveRequest: pod-level requests replace the container aggregate",
          "[objects][request]") {
  PodResourceSpec spec;
  spec.containers = {Vec({{kCpu, 1000}, {kMemory, 2 * kGi}})};
  spec.init_containers = {Init(Vec({{kCpu, 3000}}))};

  SECTION("only the resources the pod level sets are replaced") {
    spec.pod_level = {{kCpu, 500}};
    CHECK(Req(spec) == Vec({{kCpu, 500}, {kMemory, 2 * kGi}, {kPods, 1}}));
  }
  SECTION("a pod-level value may be larger than the containers' sum") {
    spec.pod_level = {{kCpu, 4000}, {kMemory, 3 * kGi}};
    CHECK(Req(spec) == Vec({{kCpu, 4000}, {kMemory, 3 * kGi}, {kPods, 1}}));
  }
  SECTION("overhead is added on top of a pod-level request") {
    spec.pod_level = {{kCpu, 500}};
    spec.overhead = Vec({{kCpu, 250}, {kMemory, 120 * kMi}});
    CHECK(Req(spec) ==
          Vec({{kCpu, 750}, {kMemory, 2 * kGi + 120 * kMi}, {kPods, 1}}));
  }
}

TEST_CASE("EffectiveRequest adds the overhead", "[objects][request]") {
  PodResourceSpec spec;
  spec.containers = {Vec({{kCpu, 100}, {kMemory, 100 * kMi}})};
  spec.init_containers = {Init(Vec({{kCpu, 400}}))};
  spec.overhead = Vec({{kCpu, 250}, {kMemory, 120 * kMi}});
  // max(100, 400) + 250 = 650 cpu; 100Mi + 120Mi memory.
  CHECK(Req(spec) == Vec({{kCpu, 650}, {kMemory, 220 * kMi}, {kPods, 1}}));
}

TEST_CASE("EffectiveRequest always holds exactly one pod slot", "[objects][request]") {
  PodResourceSpec spec;
  spec.containers = {Vec({{kCpu, 100}}), Vec({{kCpu, 100}}), Vec({{kCpu, 100}})};
  spec.init_containers = {Sidecar(Vec({{kCpu, 1}}))};
  const ResourceVector r = Req(spec);
  CHECK(r.Get(kPods) == 1);
  CHECK(r.Get(kCpu) == 301);
}

TEST_CASE("EffectiveRequest keeps extended resources", "[objects][request]") {
  ResourceNames names;
  const ResourceId foo = *names.Intern("example.com/foo");
  PodResourceSpec spec;
  spec.containers = {Vec({{foo, 2}}), Vec({{kNvidiaGpu, 1}, {foo, 1}})};
  spec.init_containers = {Init(Vec({{foo, 5}}))};
  ResourceVector want;
  want.Set(kPods, 1);
  want.Set(kNvidiaGpu, 1);
  want.Set(foo, 5);
  CHECK(Req(spec) == want);
}

// ---- Labels -------------------------------------------------------------------------------------

TEST_CASE("Labels keep keys sorted and unique", "[objects][labels]") {
  Labels l;
  CHECK(l.empty());
  CHECK_FALSE(l.Get("a").has_value());

  l.Set("zone", "a");
  l.Set("berth.io/queue", "research");
  l.Set("app", "trainer");
  REQUIRE(l.size() == 3);
  CHECK(l.items()[0].first == "app");
  CHECK(l.items()[1].first == "berth.io/queue");
  CHECK(l.items()[2].first == "zone");

  CHECK(l.Get("zone") == std::optional<std::string_view>("a"));
  CHECK(l.Has("app"));
  CHECK_FALSE(l.Has("ap"));
  CHECK_FALSE(l.Has("apps"));
  CHECK_FALSE(l.Has(""));

  l.Set("zone", "b");  // replaces, does not add
  CHECK(l.size() == 3);
  CHECK(*l.Get("zone") == "b");

  l.Set("", "empty-key");
  CHECK(l.size() == 4);
  CHECK(l.items()[0].first == "");
  CHECK(*l.Get("") == "empty-key");
}

TEST_CASE("Labels compare equal regardless of insertion order", "[objects][labels]") {
  Labels a;
  a.Set("x", "1");
  a.Set("y", "2");
  Labels b;
  b.Set("y", "2");
  b.Set("x", "1");
  CHECK(a == b);
  b.Set("x", "3");
  CHECK_FALSE(a == b);
}

// ---- PodPhase -----------------------------------------------------------------------------------

TEST_CASE("PodPhase parses the Kubernetes phase names", "[objects][phase]") {
  CHECK(ParsePodPhase("Pending") == std::optional<PodPhase>(PodPhase::kPending));
  CHECK(ParsePodPhase("Running") == std::optional<PodPhase>(PodPhase::kRunning));
  CHECK(ParsePodPhase("Succeeded") == std::optional<PodPhase>(PodPhase::kSucceeded));
  CHECK(ParsePodPhase("Failed") == std::optional<PodPhase>(PodPhase::kFailed));
  CHECK(ParsePodPhase("Unknown") == std::optional<PodPhase>(PodPhase::kUnknown));

  CHECK_FALSE(ParsePodPhase("").has_value());
  CHECK_FALSE(ParsePodPhase("running").has_value());
  CHECK_FALSE(ParsePodPhase("RUNNING").has_value());
  CHECK_FALSE(ParsePodPhase("Running ").has_value());
  CHECK_FALSE(ParsePodPhase("Completed").has_value());

  CHECK(PodPhaseName(PodPhase::kPending) == "Pending");
  CHECK(PodPhaseName(PodPhase::kSucceeded) == "Succeeded");
  CHECK(PodPhaseName(PodPhase::kUnknown) == "Unknown");
}

TEST_CASE("Only Succeeded and Failed are terminal", "[objects][phase]") {
  CHECK_FALSE(IsTerminal(PodPhase::kPending));
  CHECK_FALSE(IsTerminal(PodPhase::kRunning));
  CHECK_FALSE(IsTerminal(PodPhase::kUnknown));
  CHECK(IsTerminal(PodPhase::kSucceeded));
  CHECK(IsTerminal(PodPhase::kFailed));
}

// ---- IsBerthKey ---------------------------------------------------------------------------------

TEST_CASE("IsBerthKey keeps only the prefixes berth reads", "[objects][labels]") {
  CHECK(IsBerthKey("berth.io/queue"));
  CHECK(IsBerthKey("berth.io/"));
  CHECK(IsBerthKey("scheduling.x-k8s.io/pod-group"));
  CHECK(IsBerthKey("scheduling.k8s.io/group-name"));
  CHECK(IsBerthKey("scheduling.volcano.sh/queue-name"));
  CHECK(IsBerthKey("resource.aibee.cn/pool"));

  CHECK_FALSE(IsBerthKey(""));
  CHECK_FALSE(IsBerthKey("app"));
  CHECK_FALSE(IsBerthKey("berth.io"));
  CHECK_FALSE(IsBerthKey("xberth.io/queue"));
  CHECK_FALSE(IsBerthKey("Berth.io/queue"));
  CHECK_FALSE(IsBerthKey("kubernetes.io/hostname"));
  CHECK_FALSE(IsBerthKey("k8s.io/scheduling.k8s.io/x"));
}

TEST_CASE("Pod::Key is namespace/name", "[objects]") {
  Pod p;
  p.ns = "team-a";
  p.name = "trainer-0";
  CHECK(p.Key() == "team-a/trainer-0");
  CHECK(p.scheduler_name == "default-scheduler");
  CHECK(p.phase == PodPhase::kPending);
}

TEST_CASE("EffectiveRequest refuses a sum that does not fit, naming the sum and resource",
          "[objects][request][accounting]") {
  constexpr int64_t kMax = INT64_MAX;
  {
    PodResourceSpec spec;
    spec.containers = {Vec({{kMemory, kMax / 2 + 1}}), Vec({{kMemory, kMax / 2 + 1}})};
    absl::StatusOr<ResourceVector> r = EffectiveRequest(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kOutOfRange);
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("containers'") && Catch::Contains("resource #1"));
  }
  {
    ResourceNames table;
    ResourceNameScope names(table);
    PodResourceSpec spec;
    spec.containers = {Vec({{kCpu, kMax}})};
    spec.overhead = Vec({{kCpu, 1}});
    absl::StatusOr<ResourceVector> r = EffectiveRequest(spec, &names);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("overhead") && Catch::Contains("of cpu"));
  }
  {
    PodResourceSpec spec;  // the largest sum that fits is kept exactly
    spec.containers = {Vec({{kMemory, kMax - 10}}), Vec({{kMemory, 10}})};
    CHECK(Req(spec).Get(kMemory) == kMax);
  }
}

}  // namespace
}  // namespace berth::core
