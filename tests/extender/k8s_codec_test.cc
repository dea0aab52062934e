// Tests of extender/k8s_codec: Kubernetes Pod and Node JSON into berth's objects and back, watch
// events and lists, and the error messages for bad input.

#include "extender/k8s_codec.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "core/objects.h"
#include "core/placement.h"
#include "core/resources.h"
#include "core/strings.h"
#include "extender/json.h"
#include "nlohmann/json.hpp"
#include "tests/testing/builders.h"
#include "tests/testing/files.h"
#include "tests/testing/same_objects.h"
#include "tests/testing/text.h"

namespace berth::extender {
namespace {

using berth::testing::Contains;

using berth::testing::Json;
using berth::testing::MakeNode;
using berth::testing::MakePod;
using berth::testing::ReadFixture;
using core::kCpu;
using core::kEphemeralStorage;
using core::kMemory;
using core::kNvidiaGpu;
using core::kPods;

constexpr int64_t kKi = 1024;
constexpr int64_t kMi = 1024 * kKi;
constexpr int64_t kGi = 1024 * kMi;


// Decodes `text` as a pod found at top-level key "Pod" (so paths read "Pod.spec...").
absl::StatusOr<core::Pod> PodFromText(const std::string& text, core::ResourceNames& names) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
  if (!doc.ok()) return doc.status();
  const JsonPath top;
  const JsonPath path = top.Field("Pod");
  absl::StatusOr<simdjson::dom::object> obj = AsObject(doc->root(), path);
  if (!obj.ok()) return obj.status();
  // Decoding adds no name; the test then commits the pod's new names as the model would.
  core::ResourceNameScope scope(names);
  absl::StatusOr<core::Pod> pod = DecodePod(*obj, scope, path);
  if (!pod.ok()) return pod.status();
  core::ResourceVector* vectors[] = {&pod->request};
  REQUIRE(core::ResolveProvisionalIds(names, scope.provisional(), vectors).ok());
  return pod;
}
absl::StatusOr<core::Pod> PodFrom(const Json& j, core::ResourceNames& names) {
  return PodFromText(j.dump(), names);
}

absl::StatusOr<core::Node> NodeFromText(const std::string& text, core::ResourceNames& names) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
  if (!doc.ok()) return doc.status();
  const JsonPath top;
  const JsonPath path = top.Field("Node");
  absl::StatusOr<simdjson::dom::object> obj = AsObject(doc->root(), path);
  if (!obj.ok()) return obj.status();
  core::ResourceNameScope scope(names);
  absl::StatusOr<core::Node> node = DecodeNode(*obj, scope, path);
  if (!node.ok()) return node.status();
  core::ResourceVector* vectors[] = {&node->capacity, &node->allocatable};
  REQUIRE(core::ResolveProvisionalIds(names, scope.provisional(), vectors).ok());
  return node;
}
absl::StatusOr<core::Node> NodeFrom(const Json& j, core::ResourceNames& names) {
  return NodeFromText(j.dump(), names);
}

core::Pod MustPod(const Json& j, core::ResourceNames& names) {
  absl::StatusOr<core::Pod> pod = PodFrom(j, names);
  INFO("pod: " << j.dump() << "\nstatus: " << pod.status().ToString());
  REQUIRE(pod.ok());
  return *pod;
}
core::Node MustNode(const Json& j, core::ResourceNames& names) {
  absl::StatusOr<core::Node> node = NodeFrom(j, names);
  INFO("node: " << j.dump() << "\nstatus: " << node.status().ToString());
  REQUIRE(node.ok());
  return *node;
}

// The error message of decoding a pod that must fail.
std::string PodError(const Json& j) {
  core::ResourceNames names;
  absl::StatusOr<core::Pod> pod = PodFrom(j, names);
  INFO("pod: " << j.dump());
  REQUIRE_FALSE(pod.ok());
  CHECK(pod.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(pod.status().message());
}
std::string NodeError(const Json& j) {
  core::ResourceNames names;
  absl::StatusOr<core::Node> node = NodeFrom(j, names);
  INFO("node: " << j.dump());
  REQUIRE_FALSE(node.ok());
  CHECK(node.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(node.status().message());
}

int64_t Res(const core::ResourceVector& v, core::ResourceNames& names, std::string_view name) {
  std::optional<core::ResourceId> id = names.Find(name);
  return id ? v.Get(*id) : 0;
}

absl::Time T(std::string_view text) {
  absl::Time t;
  std::string err;
  REQUIRE(absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &err));
  return t;
}

// A minimal pod with one container whose resources are `resources`.
Json PodWithResources(const Json& resources) {
  return {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
          {"spec", {{"containers", {{{"name", "c"}, {"resources", resources}}}}}}};
}

// ---- DecodePod on builder output -------------------------------------------------------------

TEST_CASE("DecodePod reads identity - placement - priority and requests", "[codec]") {
  core::ResourceNames names;
  const core::Pod pod = MustPod(MakePod("train-0")
                                    .Namespace("ml")
                                    .Uid("6f1c2d9e")
                                    .Cpu("500m")
                                    .Memory("1Gi")
                                    .Gpu(2)
                                    .Priority(1000)
                                    .Node("gpu-a")
                                    .Phase("Running")
                                    .Obj(),
                                names);
  CHECK(pod.name == "train-0");
  CHECK(pod.ns == "ml");
  CHECK(pod.uid == "6f1c2d9e");
  CHECK(pod.scheduler_name == "berth-scheduler");
  CHECK(pod.node_name == "gpu-a");
  CHECK(pod.phase == core::PodPhase::kRunning);
  CHECK(pod.priority == 1000);
  CHECK(pod.creation == T("2026-01-01T00:00:00Z"));
  CHECK_FALSE(pod.terminating);
  CHECK(pod.request.Get(kCpu) == 500);
  CHECK(pod.request.Get(kMemory) == kGi);
  CHECK(pod.request.Get(kNvidiaGpu) == 2);
  CHECK(pod.request.Get(kPods) == 1);
  CHECK(pod.request.Get(kEphemeralStorage) == 0);
}

TEST_CASE("DecodePod defaults: namespace - uid - scheduler - phase - priority", "[codec]") {
  core::ResourceNames names;
  const core::Pod pod = MustPod({{"metadata", {{"name", "bare"}}}}, names);
  CHECK(pod.ns == "default");
  CHECK(pod.uid == "generated:default/bare");
  CHECK(pod.scheduler_name == "default-scheduler");
  CHECK(pod.phase == core::PodPhase::kPending);
  CHECK(pod.priority == 0);
  CHECK(pod.node_name.empty());
  CHECK(pod.creation == absl::InfinitePast());
  // Even a pod without containers takes one pod slot.
  CHECK(pod.request.Get(kPods) == 1);
  CHECK(pod.request.Get(kCpu) == 0);

  // Explicit nulls and empty strings behave like absent fields.
  const core::Pod nulls = MustPod(
      {{"metadata",
        {{"name", "n"}, {"namespace", ""}, {"uid", ""}, {"labels", nullptr}, {"creationTimestamp", nullptr}}},
       {"spec", {{"schedulerName", ""}, {"priority", nullptr}, {"containers", nullptr}}},
       {"status", {{"phase", ""}}}},
      names);
  CHECK(nulls.ns == "default");
  CHECK(nulls.uid == "generated:default/n");
  CHECK(nulls.scheduler_name == "default-scheduler");
  CHECK(nulls.phase == core::PodPhase::kPending);
}

TEST_CASE("DecodePod reads every phase - nominated node and deletionTimestamp", "[codec]") {
  core::ResourceNames names;
  const std::vector<std::pair<std::string, core::PodPhase>> phases = {
      {"Pending", core::PodPhase::kPending},
      {"Running", core::PodPhase::kRunning},
      {"Succeeded", core::PodPhase::kSucceeded},
      {"Failed", core::PodPhase::kFailed},
      {"Unknown", core::PodPhase::kUnknown}};
  for (const auto& [text, phase] : phases) {
    CHECK(MustPod(MakePod("p").Phase(text).Obj(), names).phase == phase);
  }
  Json j = MakePod("p").Obj();
  j["status"]["nominatedNodeName"] = "node-7";
  j["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z";
  const core::Pod pod = MustPod(j, names);
  CHECK(pod.nominated_node == "node-7");
  CHECK(pod.terminating);
}

TEST_CASE("DecodePod keeps only berth's label and annotation keys", "[codec]") {
  core::ResourceNames names;
  const core::Pod pod = MustPod(MakePod("p")
                                    .Label("app", "web")
                                    .Label("berth.io/queue", "research")
                                    .Label("scheduling.x-k8s.io/pod-group", "gang-1")
                                    .Label("job-name", "j")
                                    .Annotation("berth.io/pool", "gpu-large")
                                    .Annotation("scheduling.k8s.io/group-name", "vg")
                                    .Annotation("scheduling.volcano.sh/queue-name", "vq")
                                    .Annotation("resource.aibee.cn/pool", "seed")
                                    .Annotation("kubectl.kubernetes.io/last-applied-configuration", "{}")
                                    .Obj(),
                                names);
  CHECK(pod.labels.size() == 2);
  CHECK(pod.labels.Get("berth.io/queue") == std::optional<std::string_view>("research"));
  CHECK(pod.labels.Get("scheduling.x-k8s.io/pod-group") == std::optional<std::string_view>("gang-1"));
  CHECK_FALSE(pod.labels.Has("app"));
  CHECK_FALSE(pod.labels.Has("job-name"));
  CHECK(pod.annotations.size() == 4);
  CHECK(pod.annotations.Get("berth.io/pool") == std::optional<std::string_view>("gpu-large"));
  CHECK(pod.annotations.Has("scheduling.k8s.io/group-name"));
  CHECK(pod.annotations.Has("scheduling.volcano.sh/queue-name"));
  CHECK(pod.annotations.Has("resource.aibee.cn/pool"));
  CHECK_FALSE(pod.annotations.Has("kubectl.kubernetes.io/last-applied-configuration"));
}

TEST_CASE("DecodePod accepts every quantity form", "[codec]") {
  core::ResourceNames names;
  struct Case {
    Json cpu;
    Json memory;
    int64_t milli_cpu;
    int64_t memory_bytes;
  };
  const std::vector<Case> cases = {
      {"2", "1Gi", 2000, kGi},
      {"500m", "512Mi", 500, 512 * kMi},
      {"1.5", "1.5Gi", 1500, 1536 * kMi},
      {"0.5", "1e3", 500, 1000},
      {"1E3", "100M", 1000000, 100000000},
      {"250u", "1k", 1, 1000},
      {" 2 ", "125952Ki", 2000, 128974848},
      {".5", "5.", 500, 5},
      {2, 1073741824, 2000, kGi},  // bare JSON integers
      {0.5, 1.5, 500, 2},          // bare JSON fractions: cpu in millis, memory rounded up
      {0, 0, 0, 0},
  };
  for (const Case& c : cases) {
    INFO("cpu " << c.cpu.dump() << " memory " << c.memory.dump());
    const core::Pod pod =
        MustPod(PodWithResources({{"requests", {{"cpu", c.cpu}, {"memory", c.memory}}}}), names);
    CHECK(pod.request.Get(kCpu) == c.milli_cpu);
    CHECK(pod.request.Get(kMemory) == c.memory_bytes);
  }
  // A bare JSON number for an extended resource.
  const core::Pod gpu = MustPod(PodWithResources({{"requests", {{"nvidia.com/gpu", 2}}}}), names);
  CHECK(gpu.request.Get(kNvidiaGpu) == 2);
}

TEST_CASE("DecodePod: a container with only limits requests its limits", "[codec]") {
  core::ResourceNames names;
  const core::Pod limits_only = MustPod(
      PodWithResources({{"limits", {{"cpu", "2"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "1"}}}}),
      names);
  CHECK(limits_only.request.Get(kCpu) == 2000);
  CHECK(limits_only.request.Get(kMemory) == kGi);
  CHECK(limits_only.request.Get(kNvidiaGpu) == 1);

  // An explicit request wins over the limit; only missing requests are defaulted.
  const core::Pod mixed = MustPod(
      PodWithResources({{"requests", {{"cpu", "1"}}}, {"limits", {{"cpu", "4"}, {"memory", "2Gi"}}}}),
      names);
  CHECK(mixed.request.Get(kCpu) == 1000);
  CHECK(mixed.request.Get(kMemory) == 2 * kGi);

  // A request of 0 is a request: it is not replaced by the limit.
  const core::Pod zero = MustPod(
      PodWithResources({{"requests", {{"cpu", "0"}}}, {"limits", {{"cpu", "4"}}}}), names);
  CHECK(zero.request.Get(kCpu) == 0);

  // The fixtures' GPU pods request and limit the same count: not doubled.
  const core::Pod both = MustPod(PodWithResources({{"requests", {{"nvidia.com/gpu", "2"}}},
                                                   {"limits", {{"nvidia.com/gpu", "2"}}}}),
                                 names);
  CHECK(both.request.Get(kNvidiaGpu) == 2);
}

TEST_CASE("DecodePod: containers add up - init containers take the max", "[codec]") {
  core::ResourceNames names;
  // Containers: cpu 1 + 1 = 2. Init container: 3. Effective: max(2, 3) = 3.
  const core::Pod init = MustPod(MakePod("p")
                                     .Cpu("1")
                                     .Container("second", "cpu", "1")
                                     .InitContainer("setup", "cpu", "3")
                                     .Obj(),
                                 names);
  CHECK(init.request.Get(kCpu) == 3000);

  // Init container smaller than the sum: the sum wins (2 > 1.5).
  const core::Pod small_init = MustPod(MakePod("p")
                                           .Cpu("1")
                                           .Container("second", "cpu", "1")
                                           .InitContainer("setup", "cpu", "1500m")
                                           .Obj(),
                                       names);
  CHECK(small_init.request.Get(kCpu) == 2000);
}

TEST_CASE("DecodePod: sidecars run beside the containers and later init containers", "[codec]") {
  core::ResourceNames names;
  // Containers 1 + 1 = 2; sidecar 500m joins them: 2.5. The init container after the sidecar
  // runs next to it: 3 + 0.5 = 3.5, which is the larger. Overhead 250m on top: 3.75.
  const core::Pod pod = MustPod(MakePod("p")
                                    .Cpu("1")
                                    .Container("second", "cpu", "1")
                                    .InitContainer("proxy", "cpu", "500m", /*sidecar=*/true)
                                    .InitContainer("setup", "cpu", "3")
                                    .Overhead("cpu", "250m")
                                    .Overhead("memory", "64Mi")
                                    .Obj(),
                                names);
  CHECK(pod.request.Get(kCpu) == 3750);
  CHECK(pod.request.Get(kMemory) == 64 * kMi);

  // A sidecar only: 1 + 2 = 3 (not max).
  const core::Pod sidecar_only =
      MustPod(MakePod("p").Cpu("1").InitContainer("log", "cpu", "2", true).Obj(), names);
  CHECK(sidecar_only.request.Get(kCpu) == 3000);
}

TEST_CASE("DecodePod: pod-level requests replace the container sum", "[codec]") {
  core::ResourceNames names;
  Json j = MakePod("p").Cpu("1").Memory("1Gi").Container("b", "cpu", "1").Obj();
  j["spec"]["resources"] = {{"requests", {{"cpu", "4"}}}};
  const core::Pod pod = MustPod(j, names);
  CHECK(pod.request.Get(kCpu) == 4000);
  CHECK(pod.request.Get(kMemory) == kGi);
}

// ---- DecodePod on the fixtures' pods ---------------------------------------------------------

TEST_CASE("DecodePod reads the pods kube-scheduler 1.26 sent", "[codec][fixtures]") {
  core::ResourceNames names;
  const Json filter1 = Json::parse(ReadFixture("filter-request-1.json"));
  const core::Pod gpu2 = MustPod(filter1["Pod"], names);
  CHECK(gpu2.name == "gpu-2");
  CHECK(gpu2.ns == "batch");
  CHECK(gpu2.uid == "fe3aa193-359c-4d98-a491-10221e71ac8f");
  CHECK(gpu2.scheduler_name == "batch-scheduler");
  CHECK(gpu2.priority == 0);
  CHECK(gpu2.phase == core::PodPhase::kPending);
  CHECK(gpu2.node_name.empty());
  CHECK(gpu2.request.Get(kCpu) == 1000);
  CHECK(gpu2.request.Get(kMemory) == 256 * kMi);
  CHECK(gpu2.request.Get(kNvidiaGpu) == 2);
  CHECK(gpu2.request.Get(kPods) == 1);
  CHECK(gpu2.labels.empty());  // app and job-name are not berth's keys

  const Json filter2 = Json::parse(ReadFixture("filter-request-2.json"));
  const core::Pod large = MustPod(filter2["Pod"], names);
  CHECK(large.name == "gpu-large-only");
  CHECK(large.priority == 100);
  CHECK(large.priority_class == "batch-low");
  CHECK(large.creation == T("2026-11-21T05:38:00Z"));
  CHECK(large.request.Get(kMemory) == kGi);
  CHECK(large.request.Get(kNvidiaGpu) == 1);

  const Json filter3 = Json::parse(ReadFixture("filter-request-3.json"));
  const core::Pod high = MustPod(filter3["Pod"], names);
  CHECK(high.name == "high-1");
  CHECK(high.priority == 100000);
  CHECK(high.nominated_node == "node-b");

  const Json nc = Json::parse(ReadFixture("filter-request-nodecache-1.json"));
  const core::Pod nc1 = MustPod(nc["Pod"], names);
  CHECK(nc1.request.Get(kCpu) == 500);
  CHECK(nc1.request.Get(kNvidiaGpu) == 1);
}

TEST_CASE("DecodePod reads the full victim pods of a preempt request", "[codec][fixtures]") {
  core::ResourceNames names;
  const Json preempt = Json::parse(ReadFixture("preempt-request-1.json"));
  const Json& victims = preempt["NodeNameToVictims"];
  REQUIRE(victims.size() == 3);
  const core::Pod low2 = MustPod(victims["node-a"]["Pods"][0], names);
  CHECK(low2.name == "low-2");
  CHECK(low2.uid == "655b0cb9-064e-42a9-b7de-fe036021f817");
  CHECK(low2.node_name == "node-a");
  CHECK(low2.priority == 100);
  CHECK(low2.request.Get(kNvidiaGpu) == 2);
  const core::Pod low5 = MustPod(victims["node-c"]["Pods"][0], names);
  CHECK(low5.uid == "e170c292-bfe2-47cb-8155-defd65db3261");
  CHECK(low5.node_name == "node-c");

  const Json preempt2 = Json::parse(ReadFixture("preempt-request-2.json"));
  int count = 0;
  for (const auto& [node, v] : preempt2["NodeNameToVictims"].items()) {
    for (const Json& p : v["Pods"]) {
      const core::Pod victim = MustPod(p, names);
      CHECK(victim.node_name == node);
      CHECK(victim.request.Get(kNvidiaGpu) == 1);
      ++count;
    }
  }
  CHECK(count == 6);
}

TEST_CASE("DecodeNode reads the fixtures' nodes as README.md lists them", "[codec][fixtures]") {
  core::ResourceNames names;
  const Json filter1 = Json::parse(ReadFixture("filter-request-1.json"));
  const Json& items = filter1["Nodes"]["items"];
  REQUIRE(items.size() == 3);
  struct Want {
    std::string name, zone, pool;
    int64_t cpu_milli, memory, gpu;
  };
  const std::vector<Want> want = {{"node-a", "zone-1", "gpu-large", 16000, 64 * kGi, 4},
                                  {"node-b", "zone-2", "gpu-large", 16000, 64 * kGi, 4},
                                  {"node-c", "zone-1", "gpu-small", 8000, 32 * kGi, 2}};
  for (size_t i = 0; i < want.size(); ++i) {
    const core::Node node = MustNode(items[i], names);
    INFO(node.name);
    CHECK(node.name == want[i].name);
    CHECK(node.labels.Get("topology.kubernetes.io/zone") == std::optional<std::string_view>(want[i].zone));
    CHECK(node.labels.Get("pool") == std::optional<std::string_view>(want[i].pool));
    CHECK(node.labels.Get("kubernetes.io/hostname") == std::optional<std::string_view>(want[i].name));
    CHECK(node.labels.size() == 7);  // node labels are all kept
    CHECK(node.allocatable.Get(kCpu) == want[i].cpu_milli);
    CHECK(node.allocatable.Get(kMemory) == want[i].memory);
    CHECK(node.allocatable.Get(kNvidiaGpu) == want[i].gpu);
    CHECK(node.allocatable.Get(kPods) == 110);
    CHECK(node.allocatable.Get(kEphemeralStorage) == 100 * kGi);
    CHECK(node.capacity == node.allocatable);
    CHECK_FALSE(node.unschedulable);
    CHECK(node.taints.empty());
    CHECK(node.creation == T("2026-11-21T05:35:20Z"));
  }
}

// ---- DecodeNode on builder output -------------------------------------------------------------

TEST_CASE("DecodeNode reads labels - taints - unschedulable and resources", "[codec]") {
  core::ResourceNames names;
  const core::Node node = MustNode(MakeNode("gpu-1")
                                       .Cpu("64")
                                       .Memory("256Gi")
                                       .Gpu(8)
                                       .Allocatable("example.com/fpga", "2")
                                       .Label("topology.kubernetes.io/zone", "z1")
                                       .Unschedulable()
                                       .Taint("nvidia.com/gpu", "present", "NoSchedule")
                                       .Taint("dedicated", "", "NoExecute")
                                       .Obj(),
                                   names);
  CHECK(node.name == "gpu-1");
  CHECK(node.labels.size() == 2);
  CHECK(node.labels.Get("topology.kubernetes.io/zone") == std::optional<std::string_view>("z1"));
  CHECK(node.unschedulable);
  REQUIRE(node.taints.size() == 2);
  CHECK(node.taints[0] == core::Taint{"nvidia.com/gpu", "present", "NoSchedule"});
  CHECK(node.taints[1] == core::Taint{"dedicated", "", "NoExecute"});
  CHECK(node.allocatable.Get(kCpu) == 64000);
  CHECK(node.allocatable.Get(kMemory) == 256 * kGi);
  CHECK(node.allocatable.Get(kNvidiaGpu) == 8);
  CHECK(node.allocatable.Get(kPods) == 110);
  CHECK(Res(node.allocatable, names, "example.com/fpga") == 2);
}

TEST_CASE("DecodeNode: allocatable defaults to capacity", "[codec]") {
  core::ResourceNames names;
  const core::Node node = MustNode(
      {{"metadata", {{"name", "n"}}},
       {"status", {{"capacity", {{"cpu", "8"}, {"memory", "32Gi"}}}}}},
      names);
  CHECK(node.capacity.Get(kCpu) == 8000);
  CHECK(node.allocatable.Get(kCpu) == 8000);
  CHECK(node.allocatable.Get(kMemory) == 32 * kGi);

  const core::Node differ = MustNode(
      {{"metadata", {{"name", "n"}}},
       {"status", {{"capacity", {{"cpu", "8"}}}, {"allocatable", {{"cpu", "7500m"}}}}}},
      names);
  CHECK(differ.capacity.Get(kCpu) == 8000);
  CHECK(differ.allocatable.Get(kCpu) == 7500);

  const core::Node empty = MustNode({{"metadata", {{"name", "n"}}}}, names);
  CHECK(empty.allocatable.IsZero());
  CHECK_FALSE(empty.unschedulable);
}

// ---- invalid input ---------------------------------------------------------------------------

TEST_CASE("DecodePod errors name the path of a bad quantity", "[codec][errors]") {
  const std::string msg = PodError(PodWithResources({{"requests", {{"cpu", "abc"}}}}));
  CHECK(Contains(msg, "Pod.spec.containers[0].resources.requests.cpu: invalid quantity \"abc\""));
  CHECK(msg.rfind("Pod.spec.containers[0].resources.requests.cpu: ", 0) == 0);

  for (const char* bad : {"2 GPUs", "1K", "1ki", "1e", "0x10", ""}) {
    INFO("quantity \"" << bad << "\"");
    const std::string m = PodError(PodWithResources({{"requests", {{"nvidia.com/gpu", bad}}}}));
    CHECK(m.rfind("Pod.spec.containers[0].resources.requests.nvidia.com/gpu: ", 0) == 0);
    CHECK(Contains(m, "invalid quantity"));
  }

  // In a limit, in the second container, in an init container, in the overhead.
  CHECK(PodError(PodWithResources({{"limits", {{"memory", "lots"}}}}))
            .rfind("Pod.spec.containers[0].resources.limits.memory: invalid quantity", 0) == 0);
  CHECK(PodError(MakePod("p").Container("b", "memory", "1Gb").Obj())
            .rfind("Pod.spec.containers[1].resources.requests.memory: invalid quantity", 0) == 0);
  CHECK(PodError(MakePod("p").InitContainer("i", "cpu", "x").Obj())
            .rfind("Pod.spec.initContainers[0].resources.requests.cpu: invalid quantity", 0) == 0);
  CHECK(PodError(MakePod("p").Overhead("cpu", "?").Obj())
            .rfind("Pod.spec.overhead.cpu: invalid quantity", 0) == 0);
}

TEST_CASE("DecodePod rejects negative and out-of-range quantities", "[codec][errors]") {
  const std::string neg = PodError(PodWithResources({{"requests", {{"cpu", "-1"}}}}));
  CHECK(neg.rfind("Pod.spec.containers[0].resources.requests.cpu: must not be negative", 0) == 0);
  const std::string neg_num = PodError(PodWithResources({{"requests", {{"memory", -5}}}}));
  CHECK(neg_num.rfind("Pod.spec.containers[0].resources.requests.memory: must not be negative", 0) == 0);
  const std::string neg_milli = PodError(PodWithResources({{"limits", {{"cpu", "-500m"}}}}));
  CHECK(Contains(neg_milli, "must not be negative"));
  // 2^64 - 1 does not fit.
  const std::string huge =
      PodError(PodWithResources({{"requests", {{"memory", 18446744073709551615ull}}}}));
  CHECK(huge.rfind("Pod.spec.containers[0].resources.requests.memory: ", 0) == 0);
  CHECK(PodError(PodWithResources({{"requests", {{"memory", "9Ei"}}}}))
            .rfind("Pod.spec.containers[0].resources.requests.memory: ", 0) == 0);
}

TEST_CASE("DecodePod rejects wrong JSON types - naming the field", "[codec][errors]") {
  CHECK(PodError(PodWithResources({{"requests", {{"cpu", true}}}})) ==
        "Pod.spec.containers[0].resources.requests.cpu: expected a quantity (string or number), "
        "got a boolean");
  CHECK(PodError(PodWithResources({{"requests", {{"cpu", {{"v", 1}}}}}})) ==
        "Pod.spec.containers[0].resources.requests.cpu: expected a quantity (string or number), "
        "got an object");
  CHECK(PodError(PodWithResources({{"requests", Json::array({1})}})) ==
        "Pod.spec.containers[0].resources.requests: expected an object, got an array");
  CHECK(PodError(PodWithResources("lots")) ==
        "Pod.spec.containers[0].resources: expected an object, got a string");

  Json j = MakePod("p").Obj();
  j["spec"]["priority"] = "high";
  CHECK(PodError(j) == "Pod.spec.priority: expected an integer, got a string");
  j["spec"]["priority"] = 1.5;
  CHECK(PodError(j) == "Pod.spec.priority: expected an integer, got a number");
  j["spec"]["priority"] = int64_t{3000000000};
  CHECK(PodError(j) == "Pod.spec.priority: out of the int32 range");

  j = MakePod("p").Obj();
  j["spec"]["containers"] = {{"name", "c"}};
  CHECK(PodError(j) == "Pod.spec.containers: expected an array, got an object");
  j["spec"]["containers"] = Json::array({Json::object(), "c"});
  CHECK(PodError(j) == "Pod.spec.containers[1]: expected an object, got a string");

  j = MakePod("p").Obj();
  j["spec"]["nodeName"] = 7;
  CHECK(PodError(j) == "Pod.spec.nodeName: expected a string, got a number");
  j = MakePod("p").Obj();
  j["spec"] = "none";
  CHECK(PodError(j) == "Pod.spec: expected an object, got a string");
  j = MakePod("p").Obj();
  j["metadata"]["labels"] = Json::array({"a"});
  CHECK(PodError(j) == "Pod.metadata.labels: expected an object, got an array");
  j = MakePod("p").Obj();
  j["metadata"]["labels"] = {{"berth.io/queue", 5}};
  CHECK(PodError(j) == "Pod.metadata.labels.berth.io/queue: expected a string, got a number");
  // A non-berth label of the wrong type is still an error: the object is malformed.
  j = MakePod("p").Obj();
  j["metadata"]["labels"] = {{"app", false}};
  CHECK(PodError(j) == "Pod.metadata.labels.app: expected a string, got a boolean");
  j = MakePod("p").Obj();
  j["status"] = {{"nominatedNodeName", Json::array()}};
  CHECK(PodError(j) == "Pod.status.nominatedNodeName: expected a string, got an array");
}

TEST_CASE("DecodePod rejects a bad phase - a bad timestamp and a missing name", "[codec][errors]") {
  CHECK(PodError(MakePod("p").Phase("Runing").Obj()) ==
        "Pod.status.phase: expected Pending, Running, Succeeded, Failed or Unknown, got \"Runing\"");
  CHECK(PodError(MakePod("p").Phase("running").Obj())
            .rfind("Pod.status.phase: expected Pending", 0) == 0);

  Json j = MakePod("p").Obj();
  j["metadata"]["creationTimestamp"] = "yesterday";
  CHECK(PodError(j) ==
        "Pod.metadata.creationTimestamp: expected an RFC 3339 time such as 2025-03-01T10:00:00Z, "
        "got \"yesterday\"");
  j["metadata"]["creationTimestamp"] = "2026-13-01T00:00:00Z";
  CHECK(PodError(j).rfind("Pod.metadata.creationTimestamp: expected an RFC 3339 time", 0) == 0);
  j["metadata"]["creationTimestamp"] = 1700000000;
  CHECK(PodError(j) == "Pod.metadata.creationTimestamp: expected a string, got a number");

  j = MakePod("p").Obj();
  j["metadata"].erase("name");
  CHECK(PodError(j) == "Pod.metadata.name: required: expected a non-empty string");
  j["metadata"]["name"] = "";
  CHECK(PodError(j) == "Pod.metadata.name: required: expected a non-empty string");
  j["metadata"]["name"] = std::string(254, 'a');
  CHECK(PodError(j) == "Pod.metadata.name: longer than 253 characters");
  CHECK(PodError({{"spec", Json::object()}}) == "Pod.metadata: required: expected an object");
  CHECK(PodError({{"metadata", "x"}}) == "Pod.metadata: expected an object, got a string");
}

TEST_CASE("DecodePod: an invalid resource name is an error naming it", "[codec][errors]") {
  const std::string msg = PodError(PodWithResources({{"requests", {{"my gpu", "1"}}}}));
  CHECK(msg.rfind("Pod.spec.containers[0].resources.requests.my gpu: invalid resource name", 0) == 0);
}

TEST_CASE("DecodeNode errors name the path", "[codec][errors]") {
  Json j = MakeNode("n").Obj();
  j["status"]["allocatable"]["memory"] = "64 GB";
  CHECK(NodeError(j).rfind("Node.status.allocatable.memory: invalid quantity \"64 GB\"", 0) == 0);
  j = MakeNode("n").Obj();
  j["status"]["capacity"]["nvidia.com/gpu"] = "-2";
  CHECK(NodeError(j).rfind("Node.status.capacity.nvidia.com/gpu: must not be negative", 0) == 0);
  j = MakeNode("n").Obj();
  j["spec"]["unschedulable"] = "yes";
  CHECK(NodeError(j) == "Node.spec.unschedulable: expected true or false, got a string");
  j = MakeNode("n").Obj();
  j["spec"]["taints"] = Json::array({{{"key", "a"}, {"effect", "NoSchedule"}}, "b"});
  CHECK(NodeError(j) == "Node.spec.taints[1]: expected an object, got a string");
  j = MakeNode("n").Obj();
  j["spec"]["taints"] = Json::array({{{"key", 1}}});
  CHECK(NodeError(j) == "Node.spec.taints[0].key: expected a string, got a number");
  j = MakeNode("n").Obj();
  j["metadata"]["labels"]["zone"] = nullptr;
  CHECK(NodeError(j) == "Node.metadata.labels.zone: expected a string, got null");
  j = MakeNode("n").Obj();
  j["metadata"].erase("name");
  CHECK(NodeError(j) == "Node.metadata.name: required: expected a non-empty string");
  j = MakeNode("n").Obj();
  j["metadata"]["creationTimestamp"] = "2026-01-01";
  CHECK(NodeError(j).rfind("Node.metadata.creationTimestamp: expected an RFC 3339 time", 0) == 0);
}

// ---- watch events and lists ------------------------------------------------------------------

// Decoded events with their new resource names added to `names`, as the model adds them when
// it commits the events.
absl::StatusOr<std::vector<core::ModelEvent>> Committed(
    absl::StatusOr<std::vector<core::ModelEvent>> events, core::ResourceNames& names) {
  if (!events.ok()) return events;
  for (core::ModelEvent& e : *events) REQUIRE(core::ResolveEventResources(names, e).ok());
  return events;
}

absl::StatusOr<std::vector<core::ModelEvent>> Events(const Json& j, core::ResourceNames& names) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(j.dump());
  REQUIRE(doc.ok());
  return Committed(DecodeWatchEvents(doc->root(), names), names);
}
absl::StatusOr<std::vector<core::ModelEvent>> ListEvents(const Json& j, core::ResourceNames& names) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(j.dump());
  REQUIRE(doc.ok());
  return Committed(DecodeList(doc->root(), names), names);
}

TEST_CASE("DecodeWatchEvents: a single event object", "[codec][events]") {
  core::ResourceNames names;
  auto events = Events(testing::Event("ADDED", MakeNode("n1").Cpu("4").Obj()), names);
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  const auto* up = std::get_if<core::NodeUpsert>(&(*events)[0]);
  REQUIRE(up != nullptr);
  CHECK(up->node.name == "n1");
  CHECK(up->node.allocatable.Get(kCpu) == 4000);
}

TEST_CASE("DecodeWatchEvents: an array of events - in order", "[codec][events]") {
  core::ResourceNames names;
  auto events = Events(Json::array({testing::Event("ADDED", MakePod("a").Obj()),
                                    testing::Event("MODIFIED", MakePod("b").Phase("Succeeded").Obj()),
                                    testing::Event("DELETED", MakePod("c").Namespace("x").Obj()),
                                    testing::Event("DELETED", MakeNode("n9").Obj())}),
                       names);
  REQUIRE(events.ok());
  REQUIRE(events->size() == 4);
  const auto* a = std::get_if<core::PodUpsert>(&(*events)[0]);
  REQUIRE(a != nullptr);
  CHECK(a->pod.name == "a");
  // A pod moved to Succeeded is an upsert (it frees resources but still exists).
  const auto* b = std::get_if<core::PodUpsert>(&(*events)[1]);
  REQUIRE(b != nullptr);
  CHECK(b->pod.phase == core::PodPhase::kSucceeded);
  const auto* c = std::get_if<core::PodDelete>(&(*events)[2]);
  REQUIRE(c != nullptr);
  CHECK(c->uid == "uid-c");
  CHECK(c->ns == "x");
  CHECK(c->name == "c");
  const auto* n = std::get_if<core::NodeDelete>(&(*events)[3]);
  REQUIRE(n != nullptr);
  CHECK(n->name == "n9");

  auto empty = Events(Json::array(), names);
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("DecodeWatchEvents: unknown type - unsupported kind - missing fields", "[codec][events]") {
  core::ResourceNames names;
  auto bad_type = Events(testing::Event("BOOKMARK", MakePod("a").Obj()), names);
  REQUIRE_FALSE(bad_type.ok());
  CHECK(std::string(bad_type.status().message()) ==
        "type: expected ADDED, MODIFIED or DELETED, got \"BOOKMARK\"");

  auto lower = Events(testing::Event("added", MakePod("a").Obj()), names);
  REQUIRE_FALSE(lower.ok());

  Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "x"}}}};
  auto bad_kind = Events(testing::Event("ADDED", cm), names);
  REQUIRE_FALSE(bad_kind.ok());
  const std::string kind_msg(bad_kind.status().message());
  CHECK(kind_msg.rfind("object.kind: unsupported kind \"ConfigMap\"", 0) == 0);

  Json no_kind = MakePod("a").Obj();
  no_kind.erase("kind");
  auto missing_kind = Events(testing::Event("ADDED", no_kind), names);
  REQUIRE_FALSE(missing_kind.ok());
  CHECK(std::string(missing_kind.status().message()).rfind("object.kind: required", 0) == 0);

  auto no_type = Events({{"object", MakePod("a").Obj()}}, names);
  REQUIRE_FALSE(no_type.ok());
  CHECK(std::string(no_type.status().message()).rfind("type: required", 0) == 0);

  auto no_object = Events({{"type", "ADDED"}}, names);
  REQUIRE_FALSE(no_object.ok());
  CHECK(std::string(no_object.status().message()).rfind("object: required", 0) == 0);

  auto not_object = Events("ADDED", names);
  REQUIRE_FALSE(not_object.ok());
  CHECK(std::string(not_object.status().message()) == "(document): expected an object, got a string");
}

TEST_CASE("DecodeWatchEvents: one bad event fails the whole array - naming its index", "[codec][events]") {
  core::ResourceNames names;
  Json bad_pod = MakePod("c").Cpu("lots").Obj();
  auto events = Events(Json::array({testing::Event("ADDED", MakeNode("n1").Obj()),
                                    testing::Event("ADDED", MakePod("a").Obj()),
                                    testing::Event("ADDED", bad_pod)}),
                       names);
  REQUIRE_FALSE(events.ok());
  CHECK(std::string(events.status().message())
            .rfind("[2].object.spec.containers[0].resources.requests.cpu: invalid quantity", 0) == 0);

  auto bad_type = Events(Json::array({testing::Event("ADDED", MakeNode("n1").Obj()),
                                      testing::Event("UPSERT", MakeNode("n2").Obj())}),
                         names);
  REQUIRE_FALSE(bad_type.ok());
  CHECK(std::string(bad_type.status().message()).rfind("[1].type: expected ADDED", 0) == 0);
}

TEST_CASE("DecodeList: List - NodeList and PodList", "[codec][list]") {
  core::ResourceNames names;
  auto list = ListEvents(testing::List({MakeNode("n1").Obj(), MakePod("a").Node("n1").Obj()}), names);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 2);
  CHECK(std::holds_alternative<core::NodeUpsert>((*list)[0]));
  CHECK(std::holds_alternative<core::PodUpsert>((*list)[1]));

  // Typed lists, as `kubectl get nodes -o json` prints them: items without kind.
  Json node = MakeNode("n2").Cpu("2").Obj();
  node.erase("kind");
  node.erase("apiVersion");
  auto nodes = ListEvents({{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", {node, node}}}, names);
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 2);
  const auto* n = std::get_if<core::NodeUpsert>(&(*nodes)[0]);
  REQUIRE(n != nullptr);
  CHECK(n->node.allocatable.Get(kCpu) == 2000);

  Json pod = MakePod("p").Obj();
  pod.erase("kind");
  auto pods = ListEvents({{"kind", "PodList"}, {"items", {pod}}}, names);
  REQUIRE(pods.ok());
  REQUIRE(pods->size() == 1);
  const auto* p = std::get_if<core::PodUpsert>(&(*pods)[0]);
  REQUIRE(p != nullptr);
  CHECK(p->pod.name == "p");

  // No items, or null items: nothing to load.
  auto none = ListEvents({{"kind", "List"}, {"items", nullptr}}, names);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("DecodeList errors", "[codec][list]") {
  core::ResourceNames names;
  Json pod = MakePod("p").Obj();
  pod.erase("kind");
  auto kindless = ListEvents(testing::List({MakeNode("n").Obj(), pod}), names);
  REQUIRE_FALSE(kindless.ok());
  CHECK(std::string(kindless.status().message()).rfind("items[1].kind: required", 0) == 0);

  auto wrong_list = ListEvents({{"kind", "ConfigMapList"}, {"items", Json::array()}}, names);
  REQUIRE_FALSE(wrong_list.ok());
  CHECK(std::string(wrong_list.status().message()) ==
        "kind: expected \"List\" or a typed list of a kind berth ingests (NodeList, PodList, "
        "PoolList, QueueList, PodGroupList, PriorityClassList)");
  auto no_kind = ListEvents({{"items", Json::array()}}, names);
  REQUIRE_FALSE(no_kind.ok());
  auto array = ListEvents(Json::array(), names);
  REQUIRE_FALSE(array.ok());
  CHECK(std::string(array.status().message()) == "(document): expected an object, got an array");
  // The builder writes the quantity into capacity and allocatable; capacity is read first.
  auto bad_item = ListEvents(testing::List({MakeNode("n").Cpu("x").Obj()}), names);
  REQUIRE_FALSE(bad_item.ok());
  CHECK(std::string(bad_item.status().message()).rfind("items[0].status.capacity.cpu: invalid quantity", 0) == 0);
  auto items_obj = ListEvents({{"kind", "List"}, {"items", Json::object()}}, names);
  REQUIRE_FALSE(items_obj.ok());
  CHECK(std::string(items_obj.status().message()) == "items: expected an array, got an object");
}

// ---- encode/decode round trip ----------------------------------------------------------------

// Encodes, prints as JSON text, parses and decodes again.
core::Pod PodRoundTrip(const core::Pod& pod, core::ResourceNames& names) {
  const Json j = EncodePod(pod, names);
  INFO("encoded: " << j.dump());
  CHECK(j["kind"] == "Pod");
  CHECK(j["apiVersion"] == "v1");
  return MustPod(Json::parse(j.dump()), names);
}
core::Node NodeRoundTrip(const core::Node& node, core::ResourceNames& names) {
  const Json j = EncodeNode(node, names);
  INFO("encoded: " << j.dump());
  CHECK(j["kind"] == "Node");
  return MustNode(Json::parse(j.dump()), names);
}

TEST_CASE("EncodePod round trip: decode(encode(pod)) == pod", "[codec][roundtrip]") {
  core::ResourceNames names;
  std::vector<core::Pod> pods;
  pods.push_back(MustPod(MakePod("full")
                             .Namespace("ml")
                             .Uid("6f1c2d9e-3b7a-4c55-9a0e-1f2b3c4d5e6f")
                             .Cpu("1500m")
                             .Memory("1000")
                             .Gpu(8)
                             .Request("ephemeral-storage", "10Gi")
                             .Request("example.com/fpga", "3")
                             .Priority(-5)
                             .Node("gpu-a")
                             .Phase("Running")
                             .Label("berth.io/queue", "research")
                             .Label("scheduling.x-k8s.io/pod-group", "g")
                             .Annotation("berth.io/pool", "gpu-large")
                             .Annotation("berth.io/lifetime", "0s")
                             .Obj(),
                         names));
  Json pending = MakePod("pending").Scheduler("default-scheduler").Memory("1536Mi").Obj();
  pending["spec"]["priorityClassName"] = "berth-production";
  pending["spec"]["priority"] = 10000;
  pending["status"]["nominatedNodeName"] = "gpu-b";
  pods.push_back(MustPod(pending, names));
  Json terminating = MakePod("terminating").Phase("Succeeded").Obj();
  terminating["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z";
  pods.push_back(MustPod(terminating, names));
  pods.push_back(MustPod({{"metadata", {{"name", "generated"}}}}, names));  // no uid, no time
  // The most cpu berth can hold (whole cores that many would not fit: refused, see DecodePod).
  pods.push_back(MustPod(MakePod("failed").Phase("Failed").Cpu("9223372036854775807m").Obj(), names));
  pods.push_back(MustPod(MakePod("unknown").Phase("Unknown").Memory("7Ei").Obj(), names));
  Json offset = MakePod("offset").Obj();
  offset["metadata"]["creationTimestamp"] = "2026-01-01T02:00:00+02:00";
  pods.push_back(MustPod(offset, names));

  for (const core::Pod& pod : pods) {
    INFO("pod " << pod.Key());
    CheckSamePod(PodRoundTrip(pod, names), pod);
  }
  // Hand-checked values of the first one, so the round trip cannot pass by losing fields.
  const core::Pod back = PodRoundTrip(pods[0], names);
  CHECK(back.request.Get(kCpu) == 1500);
  CHECK(back.request.Get(kMemory) == 1000);
  CHECK(back.request.Get(kNvidiaGpu) == 8);
  CHECK(back.request.Get(kEphemeralStorage) == 10 * kGi);
  CHECK(Res(back.request, names, "example.com/fpga") == 3);
  CHECK(back.request.Get(kPods) == 1);
  CHECK(back.priority == -5);
  CHECK(back.labels.size() == 2);
  CHECK(back.annotations.size() == 2);
  CHECK(pods[6].creation == T("2026-01-01T00:00:00Z"));
}

TEST_CASE("EncodePod keeps a fractional creation time", "[codec][roundtrip]") {
  core::ResourceNames names;
  Json j = MakePod("frac").Obj();
  j["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00.25Z";
  const core::Pod pod = MustPod(j, names);
  CHECK(pod.creation == T("2026-01-01T00:00:00.25Z"));
  CheckSamePod(PodRoundTrip(pod, names), pod);
  // Whole seconds are printed without a fraction, as the API server does.
  CHECK(EncodeTime(T("2026-01-01T00:00:00Z")) == "2026-01-01T00:00:00Z");
  CHECK(EncodeTime(absl::InfinitePast()).is_null());
}

TEST_CASE("EncodePod round trip of the fixtures' pods", "[codec][roundtrip][fixtures]") {
  core::ResourceNames names;
  for (const char* file : {"filter-request-1.json", "filter-request-3.json", "preempt-request-2.json"}) {
    const Json req = Json::parse(ReadFixture(file));
    const core::Pod pod = MustPod(req["Pod"], names);
    INFO(file);
    CheckSamePod(PodRoundTrip(pod, names), pod);
  }
}

TEST_CASE("EncodeNode round trip: decode(encode(node)) == node", "[codec][roundtrip]") {
  core::ResourceNames names;
  std::vector<core::Node> nodes;
  nodes.push_back(MustNode(MakeNode("gpu-1")
                               .Cpu("63500m")
                               .Memory("257000Mi")
                               .Gpu(8)
                               .Allocatable("example.com/fpga", "1")
                               .Allocatable("hugepages-2Mi", "1Gi")
                               .Topology("z1", "s1", "l1")
                               .Unschedulable()
                               .Taint("nvidia.com/gpu", "present", "NoSchedule")
                               .Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
                               .Obj(),
                           names));
  Json differ = {{"metadata", {{"name", "cap"}, {"creationTimestamp", "2026-11-21T05:35:20Z"}}},
                 {"status",
                  {{"capacity", {{"cpu", "8"}, {"memory", "32Gi"}}},
                   {"allocatable", {{"cpu", "7900m"}, {"memory", "31Gi"}}}}}};
  nodes.push_back(MustNode(differ, names));
  nodes.push_back(MustNode({{"metadata", {{"name", "empty"}}}}, names));
  const Json filter1 = Json::parse(ReadFixture("filter-request-1.json"));
  for (const Json& item : filter1["Nodes"]["items"]) nodes.push_back(MustNode(item, names));

  for (const core::Node& node : nodes) {
    INFO("node " << node.name);
    CheckSameNode(NodeRoundTrip(node, names), node);
  }
  const core::Node back = NodeRoundTrip(nodes[0], names);
  CHECK(back.allocatable.Get(kCpu) == 63500);
  CHECK(back.allocatable.Get(kMemory) == 257000 * kMi);
  CHECK(back.allocatable.Get(kNvidiaGpu) == 8);
  CHECK(Res(back.allocatable, names, "hugepages-2Mi") == kGi);
  CHECK(back.unschedulable);
  REQUIRE(back.taints.size() == 2);
  CHECK(back.taints[1].key == "node.kubernetes.io/unschedulable");
  CHECK(back.labels.Get("berth.io/leaf") == std::optional<std::string_view>("l1"));
  const core::Node cap = NodeRoundTrip(nodes[1], names);
  CHECK(cap.capacity.Get(kCpu) == 8000);
  CHECK(cap.allocatable.Get(kCpu) == 7900);
}

TEST_CASE("EncodeResourceList prints Kubernetes quantities and omits zeros", "[codec]") {
  core::ResourceNames names;
  core::ResourceVector v;
  v.Set(kCpu, 1500);
  v.Set(kMemory, 64 * kGi);
  v.Set(kNvidiaGpu, 4);
  v.Set(kEphemeralStorage, 0);
  v.Set(kPods, 110);
  const Json j = EncodeResourceList(v, names);
  CHECK(j == Json({{"cpu", "1500m"}, {"memory", "64Gi"}, {"nvidia.com/gpu", "4"}, {"pods", "110"}}));
  CHECK(EncodeResourceList(core::ResourceVector(), names) == Json::object());
}

// ---- Pools, Queues, PodGroups, PriorityClasses ----------------------------------------------

using berth::testing::MakePodGroup;
using berth::testing::MakePool;
using berth::testing::MakePriorityClass;
using berth::testing::MakeQueue;

// Decodes `j` as a watch event's object (paths read "object...").
absl::StatusOr<core::ModelEvent> ObjectEvent(const Json& j, core::ResourceNames& names,
                                             bool deleted = false, std::string_view kind_hint = {},
                                             std::string_view version_hint = {}) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(j.dump());
  REQUIRE(doc.ok());
  const JsonPath top;
  const JsonPath path = top.Field("object");
  absl::StatusOr<simdjson::dom::object> obj = AsObject(doc->root(), path);
  if (!obj.ok()) return obj.status();
  absl::StatusOr<core::ModelEvent> e =
      DecodeObjectEvent(*obj, deleted, names, path, kind_hint, version_hint);
  if (e.ok()) REQUIRE(core::ResolveEventResources(names, *e).ok());
  return e;
}

// The event `j` decodes to, which must be a T.
template <class T>
T MustEvent(const Json& j, bool deleted = false, std::string_view kind_hint = {},
            std::string_view version_hint = {}) {
  core::ResourceNames names;
  absl::StatusOr<core::ModelEvent> e = ObjectEvent(j, names, deleted, kind_hint, version_hint);
  INFO("object: " << j.dump() << "\nstatus: " << e.status().ToString());
  REQUIRE(e.ok());
  REQUIRE(std::holds_alternative<T>(*e));
  return std::get<T>(*e);
}

// The error message of an object that must not decode.
std::string ObjectError(const Json& j, bool deleted = false) {
  core::ResourceNames names;
  absl::StatusOr<core::ModelEvent> e = ObjectEvent(j, names, deleted);
  INFO("object: " << j.dump());
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(e.status().message());
}

core::Labels LabelSet(std::initializer_list<std::pair<std::string, std::string>> kv) {
  core::Labels l;
  for (const auto& [k, v] : kv) l.Set(k, v);
  return l;
}

// The seed's two Pool examples (seeds/004), as kubectl would send them converted to JSON.
Json SeedDemoPool(const std::string& api_version) {
  Json j = Json::parse(R"({
    "apiVersion": "resource.aibee.cn/v1alpha1",
    "kind": "Pool",
    "metadata": {"name": "demo"},
    "spec": {
      "nodeSelector": {"matchLabels": {"pool": "demo"}},
      "disablePreemption": false,
      "disableBorrowing": false,
      "disableSharing": false
    }
  })");
  j["apiVersion"] = api_version;
  return j;
}
Json SeedMastersPool(const std::string& api_version) {
  Json j = Json::parse(R"({
    "apiVersion": "resource.aibee.cn/v1alpha1",
    "kind": "Pool",
    "metadata": {"name": "masters"},
    "spec": {
      "nodeSelector": {"matchLabels": {"kubernetes.io/role": "master"}},
      "disablePreemption": true,
      "disableBorrowing": true,
      "disableSharing": true
    }
  })");
  j["apiVersion"] = api_version;
  return j;
}

TEST_CASE("DecodeObjectEvent: the seed's Pools under either apiVersion", "[codec][kinds]") {
  for (const std::string version : {"resource.aibee.cn/v1alpha1", "berth.io/v1alpha1"}) {
    INFO("apiVersion " << version);
    const core::Pool demo = MustEvent<core::PoolUpsert>(SeedDemoPool(version)).pool;
    CHECK(demo.name == "demo");
    CHECK(demo.node_selector.match_labels == LabelSet({{"pool", "demo"}}));
    CHECK(demo.node_selector.match_expressions.empty());
    CHECK_FALSE(demo.disable_preemption);
    CHECK_FALSE(demo.disable_borrowing);
    CHECK_FALSE(demo.disable_sharing);
    CHECK(demo.creation == absl::InfinitePast());
    CHECK(demo.node_selector.Matches(LabelSet({{"pool", "demo"}, {"zone", "a"}})));
    CHECK_FALSE(demo.node_selector.Matches(LabelSet({{"pool", "other"}})));

    const core::Pool masters = MustEvent<core::PoolUpsert>(SeedMastersPool(version)).pool;
    CHECK(masters.name == "masters");
    CHECK(masters.disable_preemption);
    CHECK(masters.disable_borrowing);
    CHECK(masters.disable_sharing);
    CHECK(masters.node_selector.Matches(LabelSet({{"kubernetes.io/role", "master"}})));
    CHECK_FALSE(masters.node_selector.Matches(LabelSet({{"kubernetes.io/role", "worker"}})));
  }
}

TEST_CASE("DecodePool: expressions - absent selector and absent spec", "[codec][kinds]") {
  Json j = MakePool("gpu")
               .Label("berth.io/node-pool", "gpu-large")
               .Expression("nvidia.com/gpu.product", "In", {"A100", "H100"})
               .Expression("tier", "NotIn", {"spot"})
               .Expression("nvidia.com/gpu.present", "Exists")
               .Expression("maintenance", "DoesNotExist")
               .NoSharing()
               .Obj();
  j["metadata"]["creationTimestamp"] = "2025-03-01T10:00:00Z";
  const core::Pool p = MustEvent<core::PoolUpsert>(j).pool;
  CHECK(p.creation == T("2025-03-01T10:00:00Z"));
  CHECK(p.disable_sharing);
  CHECK_FALSE(p.disable_borrowing);
  REQUIRE(p.node_selector.match_expressions.size() == 4);
  CHECK(p.node_selector.match_expressions[0] == core::SelectorRequirement{"nvidia.com/gpu.product",
                                                                          core::SelectorOp::kIn,
                                                                          {"A100", "H100"}});
  CHECK(p.node_selector.match_expressions[1].op == core::SelectorOp::kNotIn);
  CHECK(p.node_selector.match_expressions[2].op == core::SelectorOp::kExists);
  CHECK(p.node_selector.match_expressions[2].values.empty());
  CHECK(p.node_selector.match_expressions[3].op == core::SelectorOp::kDoesNotExist);
  CHECK(p.node_selector.Matches(LabelSet({{"berth.io/node-pool", "gpu-large"},
                                          {"nvidia.com/gpu.product", "H100"},
                                          {"nvidia.com/gpu.present", "true"}})));
  CHECK_FALSE(p.node_selector.Matches(LabelSet({{"berth.io/node-pool", "gpu-large"},
                                                {"nvidia.com/gpu.product", "H100"},
                                                {"nvidia.com/gpu.present", "true"},
                                                {"maintenance", "yes"}})));

  // No selector at all: the empty selector, which selects every node.
  const core::Pool all = MustEvent<core::PoolUpsert>(MakePool("all").Obj()).pool;
  CHECK(all.node_selector.empty());
  CHECK(all.node_selector.Matches(LabelSet({{"anything", "x"}})));
  Json bare = MakePool("bare").Obj();
  bare.erase("spec");
  CHECK(MustEvent<core::PoolUpsert>(bare).pool == core::Pool{.name = "bare"});
  Json empty_selector = MakePool("e").Obj();
  empty_selector["spec"]["nodeSelector"] = Json::object();
  CHECK(MustEvent<core::PoolUpsert>(empty_selector).pool.node_selector.empty());
}

TEST_CASE("DecodeQueue: weight - limits and defaults", "[codec][kinds]") {
  const core::Queue q =
      MustEvent<core::QueueUpsert>(
          MakeQueue("team-a").Weight(2.5).NonPreemptibleLimitFactor(0.2).ExcessBudget(600).Obj())
          .queue;
  CHECK(q.name == "team-a");
  CHECK(q.weight == 2.5);
  CHECK(q.non_preemptible_limit_factor == 0.2);
  CHECK(q.excess_budget == 600.0);

  // An integer weight is a number too; absent fields keep their defaults.
  Json j = MakeQueue("team-b").Obj();
  j["spec"]["weight"] = 3;
  const core::Queue b = MustEvent<core::QueueUpsert>(j).queue;
  CHECK(b.weight == 3);
  CHECK_FALSE(b.non_preemptible_limit_factor.has_value());
  CHECK_FALSE(b.excess_budget.has_value());
  const core::Queue c = MustEvent<core::QueueUpsert>(MakeQueue("team-c").Obj()).queue;
  CHECK(c.weight == 1);
  // Zero limits are allowed: no non-preemptible excess, no budget.
  const core::Queue z = MustEvent<core::QueueUpsert>(
                            MakeQueue("z").NonPreemptibleLimitFactor(0).ExcessBudget(0).Obj())
                            .queue;
  CHECK(z.non_preemptible_limit_factor == 0.0);
  CHECK(z.excess_budget == 0.0);
}

TEST_CASE("DecodePodGroup: scheduler-plugins PodGroup", "[codec][kinds]") {
  const Json j = Json::parse(R"({
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "job-7", "namespace": "ml", "uid": "5c1d", "resourceVersion": "1042",
                 "creationTimestamp": "2025-03-01T10:00:00Z"},
    "spec": {"minMember": 8, "scheduleTimeoutSeconds": 300,
             "minResources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}},
    "status": {"phase": "Pending", "running": 0, "occupiedBy": "ml/job-7"}
  })");
  core::ResourceNames names;
  absl::StatusOr<core::ModelEvent> e = ObjectEvent(j, names);
  REQUIRE(e.ok());
  const core::PodGroup g = std::get<core::PodGroupUpsert>(*e).podgroup;
  CHECK(g.ns == "ml");
  CHECK(g.name == "job-7");
  CHECK(g.Key() == "ml/job-7");
  CHECK(g.min_member == 8);
  CHECK(g.schedule_timeout_seconds == 300);
  CHECK(g.source == core::PodGroupSource::kSchedulerPlugins);
  CHECK(g.creation == T("2025-03-01T10:00:00Z"));
  CHECK(g.min_resources.Get(kCpu) == 64000);
  CHECK(g.min_resources.Get(kMemory) == 512 * kGi);
  CHECK(g.min_resources.Get(kNvidiaGpu) == 8);

  // Defaults: namespace "default", minMember 1, no timeout, no minimum resources.
  Json bare = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
               {"kind", "PodGroup"},
               {"metadata", {{"name", "solo"}}}};
  const core::PodGroup d = MustEvent<core::PodGroupUpsert>(bare).podgroup;
  CHECK(d.ns == "default");
  CHECK(d.min_member == 1);
  CHECK_FALSE(d.schedule_timeout_seconds.has_value());
  CHECK(d.min_resources.IsZero());
  bare["spec"] = Json::object();
  CHECK(MustEvent<core::PodGroupUpsert>(bare).podgroup.min_member == 1);
  // An explicit 0 is kept as 0.
  CHECK(MustEvent<core::PodGroupUpsert>(MakePodGroup("z").MinMember(0).Obj()).podgroup.min_member ==
        0);
}

TEST_CASE("DecodePodGroup: Volcano PodGroup", "[codec][kinds]") {
  const Json j = Json::parse(R"({
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "tf-job-1", "namespace": "research",
                 "annotations": {"scheduling.k8s.io/group-name": "tf-job-1"},
                 "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                      "name": "tf-job-1", "uid": "0a1b", "controller": true}]},
    "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}, "queue": "research",
             "priorityClassName": "berth-normal",
             "minResources": {"cpu": "3", "nvidia.com/gpu": "2"},
             "scheduleTimeoutSeconds": 99},
    "status": {"phase": "Inqueue", "conditions": [{"type": "Scheduled", "status": "False"}]}
  })");
  const core::PodGroup g = MustEvent<core::PodGroupUpsert>(j).podgroup;
  CHECK(g.source == core::PodGroupSource::kVolcano);
  CHECK(g.ns == "research");
  CHECK(g.name == "tf-job-1");
  CHECK(g.min_member == 3);
  CHECK(g.min_resources.Get(kCpu) == 3000);
  CHECK(g.min_resources.Get(kNvidiaGpu) == 2);
  // Volcano's CRD has no scheduleTimeoutSeconds: a stray one is not read.
  CHECK_FALSE(g.schedule_timeout_seconds.has_value());
}

TEST_CASE("DecodePriorityClass: value - policy - global default", "[codec][kinds]") {
  const Json j = Json::parse(R"({
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "berth-production", "creationTimestamp": "2025-01-02T03:04:05Z"},
    "value": 10000,
    "globalDefault": false,
    "description": "production work: never preempted by berth"
  })");
  const core::PriorityClass pc = MustEvent<core::PriorityClassUpsert>(j).priority_class;
  CHECK(pc.name == "berth-production");
  CHECK(pc.value == 10000);
  CHECK_FALSE(pc.global_default);
  CHECK(pc.preemption_policy == "PreemptLowerPriority");
  CHECK(pc.creation == T("2025-01-02T03:04:05Z"));

  const core::PriorityClass never =
      MustEvent<core::PriorityClassUpsert>(MakePriorityClass("berth-experiment", -10)
                                               .GlobalDefault()
                                               .PreemptionPolicy("Never")
                                               .Obj())
          .priority_class;
  CHECK(never.value == -10);
  CHECK(never.global_default);
  CHECK(never.preemption_policy == "Never");
  // The int32 extremes are values like any other.
  CHECK(MustEvent<core::PriorityClassUpsert>(MakePriorityClass("max", INT32_MAX).Obj())
            .priority_class.value == INT32_MAX);
  CHECK(MustEvent<core::PriorityClassUpsert>(MakePriorityClass("min", INT32_MIN).Obj())
            .priority_class.value == INT32_MIN);
}

TEST_CASE("DecodeObjectEvent: deletes of the new kinds read only the identity", "[codec][kinds]") {
  // The last state of a deleted object need not be valid: only its name (and namespace) matter.
  Json pool = MakePool("p").Expression("k", "Gt", {"1"}).Obj();
  CHECK(MustEvent<core::PoolDelete>(pool, /*deleted=*/true).name == "p");
  Json queue = MakeQueue("q").Weight(0).Obj();
  CHECK(MustEvent<core::QueueDelete>(queue, true).name == "q");
  Json group = MakePodGroup("g").Namespace("ml").MinMember(-1).Obj();
  const core::PodGroupDelete gd = MustEvent<core::PodGroupDelete>(group, true);
  CHECK(gd.ns == "ml");
  CHECK(gd.name == "g");
  Json volcano = MakePodGroup("v").Volcano().Obj();
  volcano["metadata"].erase("namespace");
  const core::PodGroupDelete vd = MustEvent<core::PodGroupDelete>(volcano, true);
  CHECK(vd.ns == "default");
  CHECK(vd.name == "v");
  Json pc = {{"apiVersion", "scheduling.k8s.io/v1"},
             {"kind", "PriorityClass"},
             {"metadata", {{"name", "c"}}}};  // no value
  CHECK(MustEvent<core::PriorityClassDelete>(pc, true).name == "c");
  // The identity itself is still required.
  Json nameless = MakeQueue("q").Obj();
  nameless["metadata"].erase("name");
  CHECK(ObjectError(nameless, true) ==
        "object.metadata.name: required: expected a non-empty string");
  // And the kind and apiVersion still decide what is deleted.
  Json volcano_queue = MakeQueue("q").Obj();
  volcano_queue["apiVersion"] = "scheduling.volcano.sh/v1beta1";
  CHECK(ObjectError(volcano_queue, true).rfind("object.apiVersion: expected", 0) == 0);
}

TEST_CASE("DecodeObjectEvent: kind and apiVersion hints of typed list items", "[codec][kinds]") {
  Json pool = MakePool("p").Label("pool", "p").Obj();
  pool.erase("kind");
  pool.erase("apiVersion");
  CHECK(MustEvent<core::PoolUpsert>(pool, false, "Pool", "berth.io/v1alpha1").pool.name == "p");
  CHECK(MustEvent<core::PoolUpsert>(pool, false, "Pool", "resource.aibee.cn/v1alpha1").pool.name ==
        "p");
  CHECK(MustEvent<core::PoolUpsert>(pool, false, "Pool").pool.name == "p");  // no version hint

  Json group = MakePodGroup("g").TimeoutSeconds(5).Obj();
  group.erase("kind");
  group.erase("apiVersion");
  const core::PodGroup volcano =
      MustEvent<core::PodGroupUpsert>(group, false, "PodGroup", "scheduling.volcano.sh/v1beta1")
          .podgroup;
  CHECK(volcano.source == core::PodGroupSource::kVolcano);
  CHECK_FALSE(volcano.schedule_timeout_seconds.has_value());
  const core::PodGroup plugins = MustEvent<core::PodGroupUpsert>(group, false, "PodGroup").podgroup;
  CHECK(plugins.source == core::PodGroupSource::kSchedulerPlugins);
  CHECK(plugins.schedule_timeout_seconds == 5);

  // An object's own kind and apiVersion win over the hints; the version hint is for objects of
  // the hinted kind only.
  CHECK(MustEvent<core::QueueUpsert>(MakeQueue("q").Obj(), false, "Pool",
                                     "resource.aibee.cn/v1alpha1")
            .queue.name == "q");
  Json queue = MakeQueue("q").Obj();
  queue.erase("apiVersion");
  CHECK(MustEvent<core::QueueUpsert>(queue, false, "PodGroup", "scheduling.volcano.sh/v1beta1")
            .queue.name == "q");
  Json hinted_wrong = MakePool("p").Obj();
  hinted_wrong.erase("apiVersion");
  core::ResourceNames names;
  auto wrong = ObjectEvent(hinted_wrong, names, false, "Pool", "v1");
  REQUIRE_FALSE(wrong.ok());
  CHECK(std::string(wrong.status().message()) ==
        "object.apiVersion: expected \"berth.io/v1alpha1\" or \"resource.aibee.cn/v1alpha1\" for "
        "kind Pool, got \"v1\"");
}

TEST_CASE("DecodeObjectEvent: apiVersion must belong to the kind", "[codec][kinds][errors]") {
  Json volcano_queue = MakeQueue("q").Weight(2).Obj();
  volcano_queue["apiVersion"] = "scheduling.volcano.sh/v1beta1";
  CHECK(ObjectError(volcano_queue) ==
        "object.apiVersion: expected \"berth.io/v1alpha1\" for kind Queue, got "
        "\"scheduling.volcano.sh/v1beta1\"");
  CHECK(ObjectError(MakePool("p").ApiVersion("berth.io/v1").Obj()) ==
        "object.apiVersion: expected \"berth.io/v1alpha1\" or \"resource.aibee.cn/v1alpha1\" for "
        "kind Pool, got \"berth.io/v1\"");
  Json old_group = MakePodGroup("g").Obj();
  old_group["apiVersion"] = "scheduling.sigs.k8s.io/v1alpha1";
  CHECK(ObjectError(old_group) ==
        "object.apiVersion: expected \"scheduling.x-k8s.io/v1alpha1\" or "
        "\"scheduling.volcano.sh/v1beta1\" for kind PodGroup, got "
        "\"scheduling.sigs.k8s.io/v1alpha1\"");
  Json beta = MakePriorityClass("c", 1).Obj();
  beta["apiVersion"] = "scheduling.k8s.io/v1beta1";
  CHECK(ObjectError(beta) ==
        "object.apiVersion: expected \"scheduling.k8s.io/v1\" for kind PriorityClass, got "
        "\"scheduling.k8s.io/v1beta1\"");
  Json pod = MakePod("p").Obj();
  pod["apiVersion"] = "apps/v1";
  CHECK(ObjectError(pod) == "object.apiVersion: expected \"v1\" for kind Pod, got \"apps/v1\"");
  Json number = MakeNode("n").Obj();
  number["apiVersion"] = 1;
  CHECK(ObjectError(number) == "object.apiVersion: expected a string, got a number");
  // Without apiVersion, each kind's first version is assumed.
  Json bare = MakePodGroup("g").TimeoutSeconds(7).Obj();
  bare.erase("apiVersion");
  CHECK(MustEvent<core::PodGroupUpsert>(bare).podgroup.schedule_timeout_seconds == 7);
}

TEST_CASE("DecodeObjectEvent: an unknown kind names the kinds berth ingests",
          "[codec][kinds][errors]") {
  CHECK(ObjectError({{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", {{"name", "j"}}}}) ==
        "object.kind: unsupported kind \"Job\"; berth ingests Node (v1), Pod (v1), Pool "
        "(berth.io/v1alpha1 or resource.aibee.cn/v1alpha1), Queue (berth.io/v1alpha1), PodGroup "
        "(scheduling.x-k8s.io/v1alpha1 or scheduling.volcano.sh/v1beta1), PriorityClass "
        "(scheduling.k8s.io/v1)");
  CHECK(ObjectError({{"metadata", {{"name", "x"}}}}) ==
        "object.kind: required: expected one of Node, Pod, Pool, Queue, PodGroup, PriorityClass");
  CHECK(ObjectError({{"kind", ""}, {"metadata", {{"name", "x"}}}})
            .rfind("object.kind: required", 0) == 0);
  CHECK(ObjectError({{"kind", "pool"}, {"metadata", {{"name", "x"}}}})
            .rfind("object.kind: unsupported kind \"pool\"", 0) == 0);
}

TEST_CASE("Decode errors of the new kinds name the path and what was expected",
          "[codec][kinds][errors]") {
  struct Case {
    const char* what;
    Json object;
    std::string error;
  };
  auto pool = [] { return MakePool("p"); };
  Json selector_array = pool().Obj();
  selector_array["spec"]["nodeSelector"] = Json::array();
  Json match_label_number = pool().Obj();
  match_label_number["spec"]["nodeSelector"]["matchLabels"]["pool"] = 5;
  Json no_operator = pool().Obj();
  no_operator["spec"]["nodeSelector"]["matchExpressions"] = {{{"key", "k"}}};
  Json no_key = pool().Obj();
  no_key["spec"]["nodeSelector"]["matchExpressions"] = {{{"operator", "Exists"}}};
  Json values_string = pool().Obj();
  values_string["spec"]["nodeSelector"]["matchExpressions"] = {
      {{"key", "k"}, {"operator", "In"}, {"values", "a"}}};
  Json value_number = pool().Obj();
  value_number["spec"]["nodeSelector"]["matchExpressions"] = {
      {{"key", "k"}, {"operator", "In"}, {"values", {"a", 1}}}};
  Json expression_string = pool().Obj();
  expression_string["spec"]["nodeSelector"]["matchExpressions"] = {"k in (a)"};
  Json flag_string = pool().Obj();
  flag_string["spec"]["disableBorrowing"] = "yes";
  Json weight_string = MakeQueue("q").Obj();
  weight_string["spec"]["weight"] = "2";
  Json group_fraction = MakePodGroup("g").Obj();
  group_fraction["spec"]["minMember"] = 1.5;
  Json group_huge = MakePodGroup("g").Obj();
  group_huge["spec"]["minMember"] = int64_t{1} << 31;
  Json no_value = MakePriorityClass("c", 0).Obj();
  no_value.erase("value");
  Json huge_value = MakePriorityClass("c", 0).Obj();
  huge_value["value"] = int64_t{3'000'000'000};
  Json string_value = MakePriorityClass("c", 0).Obj();
  string_value["value"] = "high";
  Json global_string = MakePriorityClass("c", 0).Obj();
  global_string["globalDefault"] = "true";
  Json spec_array = MakeQueue("q").Obj();
  spec_array["spec"] = Json::array();

  const std::vector<Case> cases = {
      {"selector not an object", selector_array,
       "object.spec.nodeSelector: expected an object, got an array"},
      {"matchLabels value", match_label_number,
       "object.spec.nodeSelector.matchLabels.pool: expected a string, got a number"},
      {"unknown operator", pool().Expression("cpu", "Gt", {"4"}).Obj(),
       "object.spec.nodeSelector.matchExpressions[0].operator: unsupported operator \"Gt\"; "
       "expected In, NotIn, Exists or DoesNotExist"},
      {"missing operator", no_operator,
       "object.spec.nodeSelector.matchExpressions[0].operator: required: expected In, NotIn, "
       "Exists or DoesNotExist"},
      {"missing key", no_key,
       "object.spec.nodeSelector.matchExpressions[0].key: required: expected a non-empty label "
       "key"},
      {"In without values", pool().Expression("a", "Exists").Expression("k", "In").Obj(),
       "object.spec.nodeSelector.matchExpressions[1].values: operator In needs at least one value"},
      {"NotIn without values", pool().Expression("k", "NotIn").Obj(),
       "object.spec.nodeSelector.matchExpressions[0].values: operator NotIn needs at least one "
       "value"},
      {"Exists with values", pool().Expression("k", "Exists", {"a"}).Obj(),
       "object.spec.nodeSelector.matchExpressions[0].values: operator Exists takes no values, got "
       "1"},
      {"DoesNotExist with values", pool().Expression("k", "DoesNotExist", {"a", "b"}).Obj(),
       "object.spec.nodeSelector.matchExpressions[0].values: operator DoesNotExist takes no "
       "values, got 2"},
      {"values not an array", values_string,
       "object.spec.nodeSelector.matchExpressions[0].values: expected an array, got a string"},
      {"value not a string", value_number,
       "object.spec.nodeSelector.matchExpressions[0].values[1]: expected a string, got a number"},
      {"expression not an object", expression_string,
       "object.spec.nodeSelector.matchExpressions[0]: expected an object, got a string"},
      {"flag not a boolean", flag_string,
       "object.spec.disableBorrowing: expected true or false, got a string"},
      {"weight zero", MakeQueue("q").Weight(0).Obj(),
       "object.spec.weight: must be greater than 0, got 0"},
      {"weight negative", MakeQueue("q").Weight(-1.5).Obj(),
       "object.spec.weight: must be greater than 0, got -1.5"},
      {"weight a string", weight_string, "object.spec.weight: expected a number, got a string"},
      {"limit factor negative", MakeQueue("q").NonPreemptibleLimitFactor(-0.1).Obj(),
       "object.spec.nonPreemptibleLimitFactor: must not be negative, got -0.1"},
      {"budget negative", MakeQueue("q").ExcessBudget(-60).Obj(),
       "object.spec.excessBudget: must not be negative, got -60"},
      {"queue spec an array", spec_array, "object.spec: expected an object, got an array"},
      {"minMember negative", MakePodGroup("g").MinMember(-1).Obj(),
       "object.spec.minMember: must not be negative, got -1"},
      {"minMember fraction", group_fraction,
       "object.spec.minMember: expected an integer, got a number"},
      {"minMember beyond int32", group_huge,
       "object.spec.minMember: out of the int32 range, got 2147483648"},
      {"timeout negative", MakePodGroup("g").TimeoutSeconds(-5).Obj(),
       "object.spec.scheduleTimeoutSeconds: must not be negative, got -5"},
      {"minResources bad quantity", MakePodGroup("g").MinResource("nvidia.com/gpu", "8 GPUs").Obj(),
       "object.spec.minResources.nvidia.com/gpu: invalid quantity \"8 GPUs\""},
      {"minResources negative", MakePodGroup("g").MinResource("cpu", "-1").Obj(),
       "object.spec.minResources.cpu: must not be negative"},
      {"Volcano minResources bad quantity",
       MakePodGroup("g").Volcano().MinResource("cpu", "x").Obj(),
       "object.spec.minResources.cpu: invalid quantity \"x\""},
      {"PodGroup name too long", MakePodGroup(std::string(254, 'g')).Obj(),
       "object.metadata.name: longer than 253 characters"},
      {"priority value missing", no_value, "object.value: required: expected an int32"},
      {"priority value beyond int32", huge_value,
       "object.value: out of the int32 range, got 3000000000"},
      {"priority value a string", string_value, "object.value: expected an integer, got a string"},
      {"globalDefault a string", global_string,
       "object.globalDefault: expected true or false, got a string"},
      {"unknown preemption policy", MakePriorityClass("c", 1).PreemptionPolicy("Sometimes").Obj(),
       "object.preemptionPolicy: expected PreemptLowerPriority or Never, got \"Sometimes\""},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string error = ObjectError(c.object);
    // Quantity errors go on to explain the syntax; the rest must match exactly.
    if (c.error.find("quantity") != std::string::npos ||
        c.error.ends_with("must not be negative")) {
      CHECK(error.rfind(c.error, 0) == 0);
    } else {
      CHECK(error == c.error);
    }
  }
}

TEST_CASE("DecodeList: typed lists of the new kinds and a mixed List", "[codec][list][kinds]") {
  core::ResourceNames names;
  auto strip = [](Json j) {
    j.erase("kind");
    j.erase("apiVersion");
    return j;
  };
  auto pools = ListEvents({{"apiVersion", "resource.aibee.cn/v1alpha1"},
                           {"kind", "PoolList"},
                           {"items", {strip(SeedDemoPool("x")), strip(SeedMastersPool("x"))}}},
                          names);
  REQUIRE(pools.ok());
  REQUIRE(pools->size() == 2);
  CHECK(std::get<core::PoolUpsert>((*pools)[1]).pool.disable_sharing);

  auto groups = ListEvents({{"apiVersion", "scheduling.volcano.sh/v1beta1"},
                            {"kind", "PodGroupList"},
                            {"metadata", {{"resourceVersion", "77"}}},
                            {"items", {strip(MakePodGroup("a").MinMember(2).Obj())}}},
                           names);
  REQUIRE(groups.ok());
  REQUIRE(groups->size() == 1);
  CHECK(std::get<core::PodGroupUpsert>((*groups)[0]).podgroup.source ==
        core::PodGroupSource::kVolcano);

  for (const auto& [list, item] :
       {std::pair<std::string, Json>{"QueueList", strip(MakeQueue("q").Weight(4).Obj())},
        {"PriorityClassList", strip(MakePriorityClass("c", 5).Obj())},
        {"NodeList", strip(MakeNode("n").Obj())},
        {"PodList", strip(MakePod("p").Obj())}}) {
    INFO(list);
    auto events = ListEvents({{"kind", list}, {"items", {item}}}, names);
    REQUIRE(events.ok());
    CHECK(events->size() == 1);
  }
  // A typed list whose apiVersion does not fit its kind is refused at the item.
  auto wrong = ListEvents(
      {{"apiVersion", "v1"}, {"kind", "QueueList"}, {"items", {strip(MakeQueue("q").Obj())}}},
      names);
  REQUIRE_FALSE(wrong.ok());
  CHECK(std::string(wrong.status().message()) ==
        "items[0].apiVersion: expected \"berth.io/v1alpha1\" for kind Queue, got \"v1\"");

  auto mixed = ListEvents(
      testing::List({MakeNode("n1").Obj(), MakePod("a").Obj(),
                     MakePool("p").Label("pool", "p").Obj(), MakeQueue("q").Obj(),
                     MakePodGroup("g").Volcano().Obj(), MakePriorityClass("c", 1).Obj()}),
      names);
  REQUIRE(mixed.ok());
  REQUIRE(mixed->size() == 6);
  CHECK(std::holds_alternative<core::PoolUpsert>((*mixed)[2]));
  CHECK(std::holds_alternative<core::QueueUpsert>((*mixed)[3]));
  CHECK(std::holds_alternative<core::PodGroupUpsert>((*mixed)[4]));
  CHECK(std::holds_alternative<core::PriorityClassUpsert>((*mixed)[5]));

  auto bad =
      ListEvents(testing::List({MakePool("p").Obj(), MakeQueue("q").Weight(0).Obj()}), names);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) ==
        "items[1].spec.weight: must be greater than 0, got 0");
  // "List" itself is no kind of object, and a list of an unknown kind is refused.
  auto unknown = ListEvents({{"kind", "JobList"}, {"items", Json::array()}}, names);
  REQUIRE_FALSE(unknown.ok());
  CHECK(
      std::string(unknown.status().message()).rfind("kind: expected \"List\" or a typed list", 0) ==
      0);
  CHECK_FALSE(ListEvents({{"kind", "ListList"}, {"items", Json::array()}}, names).ok());
}

// Encodes, prints as JSON text, parses and decodes the object again through DecodeObjectEvent.
template <class Upsert, class Encode>
Upsert KindRoundTrip(const Encode& encode, core::ResourceNames& names) {
  const Json j = encode();
  INFO("encoded: " << j.dump());
  absl::StatusOr<core::ModelEvent> e = ObjectEvent(Json::parse(j.dump()), names);
  INFO("status: " << e.status().ToString());
  REQUIRE(e.ok());
  REQUIRE(std::holds_alternative<Upsert>(*e));
  return std::get<Upsert>(*e);
}

TEST_CASE("Encode round trips of the new kinds: decode(encode(x)) == x",
          "[codec][roundtrip][kinds]") {
  core::ResourceNames names;
  SECTION("Pool") {
    core::Pool p{.name = "gpu"};
    CHECK(KindRoundTrip<core::PoolUpsert>([&] { return EncodePool(p); }, names).pool == p);
    p.node_selector.match_labels.Set("pool", "gpu");
    p.node_selector.match_labels.Set("berth.io/node-pool", "gpu-large");
    p.node_selector.match_expressions = {{"gpu", core::SelectorOp::kIn, {"a100", "h100"}},
                                         {"tier", core::SelectorOp::kNotIn, {"spot"}},
                                         {"present", core::SelectorOp::kExists, {}},
                                         {"maintenance", core::SelectorOp::kDoesNotExist, {}}};
    p.disable_preemption = true;
    p.disable_sharing = true;
    p.creation = T("2025-03-01T10:00:00.25Z");
    CHECK(KindRoundTrip<core::PoolUpsert>([&] { return EncodePool(p); }, names).pool == p);
    // A Pool read as the seed's apiVersion is written as berth's.
    const core::Pool seed =
        MustEvent<core::PoolUpsert>(SeedMastersPool("resource.aibee.cn/v1alpha1")).pool;
    CHECK(EncodePool(seed)["apiVersion"] == "berth.io/v1alpha1");
    CHECK(KindRoundTrip<core::PoolUpsert>([&] { return EncodePool(seed); }, names).pool == seed);
  }
  SECTION("Queue") {
    core::Queue q{.name = "team-a"};
    CHECK(KindRoundTrip<core::QueueUpsert>([&] { return EncodeQueue(q); }, names).queue == q);
    q.weight = 0.1;  // not exact in binary: must still come back bit for bit
    q.non_preemptible_limit_factor = 0.2;
    q.excess_budget = 1e-9;
    q.creation = T("2024-12-31T23:59:59Z");
    CHECK(KindRoundTrip<core::QueueUpsert>([&] { return EncodeQueue(q); }, names).queue == q);
    q.weight = 1e6;
    q.non_preemptible_limit_factor = 0;
    q.excess_budget.reset();
    CHECK(KindRoundTrip<core::QueueUpsert>([&] { return EncodeQueue(q); }, names).queue == q);
  }
  SECTION("PodGroup") {
    core::PodGroup g{.ns = "ml", .name = "job-7"};
    CHECK(KindRoundTrip<core::PodGroupUpsert>([&] { return EncodePodGroup(g, names); }, names)
              .podgroup == g);
    g.min_member = 0;
    g.schedule_timeout_seconds = 0;
    g.min_resources.Set(kCpu, 1500);
    g.min_resources.Set(kMemory, 64 * kGi);
    g.min_resources.Set(kNvidiaGpu, 8);
    g.creation = T("2025-03-01T10:00:00Z");
    CHECK(KindRoundTrip<core::PodGroupUpsert>([&] { return EncodePodGroup(g, names); }, names)
              .podgroup == g);
    g.source = core::PodGroupSource::kVolcano;
    g.schedule_timeout_seconds.reset();
    g.min_member = 16;
    const Json v = EncodePodGroup(g, names);
    CHECK(v["apiVersion"] == "scheduling.volcano.sh/v1beta1");
    CHECK(KindRoundTrip<core::PodGroupUpsert>([&] { return v; }, names).podgroup == g);
    // Volcano's CRD has no timeout field: none is written even if one was set in core.
    g.schedule_timeout_seconds = 30;
    CHECK_FALSE(EncodePodGroup(g, names)["spec"].contains("scheduleTimeoutSeconds"));
  }
  SECTION("PriorityClass") {
    core::PriorityClass c{.name = "berth-normal", .value = 1000};
    CHECK(KindRoundTrip<core::PriorityClassUpsert>([&] { return EncodePriorityClass(c); }, names)
              .priority_class == c);
    c.value = INT32_MIN;
    c.global_default = true;
    c.preemption_policy = "Never";
    c.creation = T("2025-03-01T10:00:00Z");
    CHECK(KindRoundTrip<core::PriorityClassUpsert>([&] { return EncodePriorityClass(c); }, names)
              .priority_class == c);
  }
}

TEST_CASE("EncodeLabelSelector writes Kubernetes' LabelSelector", "[codec][kinds]") {
  core::LabelSelector s;
  CHECK(EncodeLabelSelector(s) == Json::object());
  s.match_labels.Set("pool", "demo");
  s.match_expressions = {{"gpu", core::SelectorOp::kIn, {"a"}},
                         {"spot", core::SelectorOp::kDoesNotExist, {}}};
  CHECK(EncodeLabelSelector(s) == Json::parse(R"({"matchLabels": {"pool": "demo"},
                        "matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a"]},
                                             {"key": "spot", "operator": "DoesNotExist"}]})"));
}


// ---- placement: nodeSelector, required node affinity, tolerations -----------------------------

// A pod whose spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution is
// {"nodeSelectorTerms": terms}.
Json PodWithTerms(const Json& terms) {
  Json j = MakePod("p").Obj();
  j["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
      {"nodeSelectorTerms", terms}};
  return j;
}
// A pod with one term holding one matchExpressions (or matchFields) entry.
Json PodWithRequirement(const Json& req, const std::string& list = "matchExpressions") {
  return PodWithTerms(Json::array({{{list, Json::array({req})}}}));
}
Json PodWithTolerations(const Json& tolerations) {
  Json j = MakePod("p").Obj();
  j["spec"]["tolerations"] = tolerations;
  return j;
}

constexpr std::string_view kTermsPath =
    "Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";

TEST_CASE("DecodePod reads nodeSelector - required node affinity and tolerations", "[codec][placement]") {
  core::ResourceNames names;
  Json j = PodWithTerms(Json::array(
      {{{"matchExpressions",
         Json::array({{{"key", "zone"}, {"operator", "In"}, {"values", {"z1", "z2"}}},
                      {{"key", "cores"}, {"operator", "Gt"}, {"values", {"-8"}}},
                      {{"key", "spot"}, {"operator", "DoesNotExist"}}})}},
       {{"matchFields", Json::array({{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {"bad"}}}})},
        {"matchExpressions", Json::array({{{"key", "gpu"}, {"operator", "Exists"}},
                                          {{"key", "mem"}, {"operator", "Lt"}, {"values", {"+64"}}},
                                          {{"key", "arch"}, {"operator", "NotIn"}, {"values", {"arm"}}}})}},
       Json::object()}));
  j["spec"]["nodeSelector"] = {{"pool", "gpu-large"}, {"disk", "ssd"}};
  j["spec"]["tolerations"] = Json::array(
      {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
       {{"key", "dedicated"}, {"value", "ml"}},  // operator defaults to Equal, effect to every effect
       {{"key", "node.kubernetes.io/not-ready"}, {"operator", "Exists"}, {"effect", "NoExecute"},
        {"tolerationSeconds", 300}},
       {{"operator", "Exists"}},
       {{"key", "team"}, {"operator", "Equal"}, {"value", "a"}, {"effect", "PreferNoSchedule"}}});
  // Other affinity kinds are not read (and not refused).
  j["spec"]["affinity"]["podAntiAffinity"] = {{"requiredDuringSchedulingIgnoredDuringExecution", Json::array()}};
  j["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = Json::array(
      {{{"weight", 1}, {"preference", {{"matchExpressions", Json::array()}}}}});

  const core::Pod pod = MustPod(j, names);
  REQUIRE(pod.placement != nullptr);
  const core::PodPlacement& p = *pod.placement;
  CHECK(p.node_selector.size() == 2);
  CHECK(p.node_selector.Get("pool") == std::optional<std::string_view>("gpu-large"));
  CHECK(p.node_selector.Get("disk") == std::optional<std::string_view>("ssd"));

  REQUIRE(p.required_terms.has_value());
  REQUIRE(p.required_terms->size() == 3);
  const core::NodeSelectorTerm& t0 = (*p.required_terms)[0];
  REQUIRE(t0.match_expressions.size() == 3);
  CHECK(t0.match_fields.empty());
  CHECK(t0.match_expressions[0] == core::NodeSelectorRequirement{.key = "zone",
                                                                 .op = core::NodeSelectorOp::kIn,
                                                                 .values = {"z1", "z2"}});
  CHECK(t0.match_expressions[1].op == core::NodeSelectorOp::kGt);
  CHECK(t0.match_expressions[1].number == -8);
  CHECK(t0.match_expressions[2].op == core::NodeSelectorOp::kDoesNotExist);
  CHECK(t0.match_expressions[2].values.empty());
  const core::NodeSelectorTerm& t1 = (*p.required_terms)[1];
  REQUIRE(t1.match_fields.size() == 1);
  CHECK(t1.match_fields[0].key == "metadata.name");
  CHECK(t1.match_fields[0].op == core::NodeSelectorOp::kNotIn);
  CHECK(t1.match_fields[0].values == std::vector<std::string>{"bad"});
  REQUIRE(t1.match_expressions.size() == 3);
  CHECK(t1.match_expressions[0].op == core::NodeSelectorOp::kExists);
  CHECK(t1.match_expressions[1].op == core::NodeSelectorOp::kLt);
  CHECK(t1.match_expressions[1].number == 64);
  CHECK(t1.match_expressions[2].op == core::NodeSelectorOp::kNotIn);
  CHECK((*p.required_terms)[2].empty());  // kept: an empty term matches nothing

  REQUIRE(p.tolerations.size() == 5);
  CHECK(p.tolerations[0] == core::Toleration{.key = "nvidia.com/gpu",
                                             .op = core::TolerationOp::kExists,
                                             .effect = "NoSchedule"});
  CHECK(p.tolerations[1] == core::Toleration{.key = "dedicated", .op = core::TolerationOp::kEqual, .value = "ml"});
  CHECK(p.tolerations[2].effect == "NoExecute");
  CHECK(p.tolerations[3] == core::Toleration{.op = core::TolerationOp::kExists});
  CHECK(p.tolerations[4].effect == "PreferNoSchedule");
  CHECK(p.tolerations[4].op == core::TolerationOp::kEqual);

  // What the decoded placement means, on two nodes.
  core::Node good;
  good.name = "good";
  for (auto [k, v] : {std::pair{"pool", "gpu-large"}, {"disk", "ssd"}, {"zone", "z2"}, {"cores", "-7"}}) {
    good.labels.Set(k, v);
  }
  CHECK(core::PlacementAllows(pod, good));
  core::Node bad = good;
  bad.labels.Set("cores", "-9");  // first term fails; the second needs gpu
  std::string why;
  CHECK_FALSE(core::PlacementAllows(pod, bad, &why));
  CHECK(why == "required node affinity does not match");
}

TEST_CASE("DecodePod: a pod that says nothing of placement keeps none", "[codec][placement]") {
  core::ResourceNames names;
  CHECK(MustPod(MakePod("p").Obj(), names).placement == nullptr);
  Json j = MakePod("p").Obj();
  j["spec"]["nodeSelector"] = Json::object();
  j["spec"]["tolerations"] = Json::array();
  j["spec"]["affinity"] = {{"nodeAffinity", {{"preferredDuringSchedulingIgnoredDuringExecution", Json::array()}}}};
  CHECK(MustPod(j, names).placement == nullptr);
  // JSON null is absent, as everywhere in the decoder.
  j["spec"]["nodeSelector"] = nullptr;
  j["spec"]["tolerations"] = nullptr;
  j["spec"]["affinity"] = {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", nullptr}}}};
  CHECK(MustPod(j, names).placement == nullptr);
}

TEST_CASE("DecodePod: required node affinity without terms is kept and matches nothing", "[codec][placement]") {
  core::ResourceNames names;
  core::Node node;
  node.name = "n";
  for (const Json& required : {Json::object(), Json{{"nodeSelectorTerms", Json::array()}},
                               Json{{"nodeSelectorTerms", nullptr}}}) {
    INFO(required.dump());
    Json j = MakePod("p").Obj();
    j["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = required;
    const core::Pod pod = MustPod(j, names);
    REQUIRE(pod.placement != nullptr);
    REQUIRE(pod.placement->required_terms.has_value());
    CHECK(pod.placement->required_terms->empty());
    CHECK_FALSE(core::PlacementAllows(pod, node));
  }
}

TEST_CASE("DecodePod: Gt or Lt with a value that is not an integer is kept and matches nothing",
          "[codec][placement]") {
  // The API server accepts it (one value is all it checks); kube-scheduler cannot parse it, so
  // the term matches no node. berth keeps such a pod in its model rather than refusing it.
  core::ResourceNames names;
  core::Node node;
  node.name = "n";
  node.labels.Set("cores", "64");
  for (const char* value : {"ten", "1.5", "99999999999999999999"}) {
    INFO(value);
    const core::Pod pod = MustPod(
        PodWithRequirement({{"key", "cores"}, {"operator", "Gt"}, {"values", {value}}}), names);
    REQUIRE(pod.placement != nullptr);
    CHECK_FALSE(core::PlacementAllows(pod, node));
  }
  const core::Pod ok = MustPod(
      PodWithRequirement({{"key", "cores"}, {"operator", "Gt"}, {"values", {"8"}}}), names);
  CHECK(core::PlacementAllows(ok, node));
}

TEST_CASE("DecodePod: pods with equal placements share one", "[codec][placement]") {
  core::ResourceNames names;
  // What the API server's DefaultTolerationSeconds admission adds to every pod.
  const Json defaults = Json::array(
      {{{"key", "node.kubernetes.io/not-ready"}, {"operator", "Exists"}, {"effect", "NoExecute"},
        {"tolerationSeconds", 300}},
       {{"key", "node.kubernetes.io/unreachable"}, {"operator", "Exists"}, {"effect", "NoExecute"},
        {"tolerationSeconds", 300}}});
  Json a = MakePod("a").Obj();
  a["spec"]["tolerations"] = defaults;
  Json b = MakePod("b").Uid("other").Obj();
  b["spec"]["tolerations"] = defaults;
  const core::Pod pa = MustPod(a, names);
  const core::Pod pb = MustPod(b, names);
  REQUIRE(pa.placement != nullptr);
  CHECK(pa.placement.get() == pb.placement.get());
  // A different placement is not shared.
  b["spec"]["tolerations"][1]["effect"] = "NoSchedule";
  const core::Pod pc = MustPod(b, names);
  REQUIRE(pc.placement != nullptr);
  CHECK(pc.placement.get() != pa.placement.get());
  CHECK(pc.placement->tolerations[1].effect == "NoSchedule");
}

TEST_CASE("DecodePod: placement errors name the path and what was expected", "[codec][placement][errors]") {
  const std::string terms(kTermsPath);
  const std::string expr0 = terms + "[0].matchExpressions[0]";
  const std::string field0 = terms + "[0].matchFields[0]";
  struct Case {
    Json pod;
    std::string error;
  };
  Json selector_array = MakePod("p").Obj();
  selector_array["spec"]["nodeSelector"] = Json::array({"pool=a"});
  Json selector_value = MakePod("p").Obj();
  selector_value["spec"]["nodeSelector"] = {{"pool", 1}};
  Json affinity_string = MakePod("p").Obj();
  affinity_string["spec"]["affinity"] = "none";
  Json node_affinity_array = MakePod("p").Obj();
  node_affinity_array["spec"]["affinity"]["nodeAffinity"] = Json::array();
  Json required_array = MakePod("p").Obj();
  required_array["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      Json::array();
  const std::vector<Case> cases = {
      {selector_array, "Pod.spec.nodeSelector: expected an object, got an array"},
      {selector_value, "Pod.spec.nodeSelector.pool: expected a string, got a number"},
      {affinity_string, "Pod.spec.affinity: expected an object, got a string"},
      {node_affinity_array, "Pod.spec.affinity.nodeAffinity: expected an object, got an array"},
      {required_array,
       "Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: expected an "
       "object, got an array"},
      {PodWithTerms({{"matchExpressions", Json::array()}}), terms + ": expected an array, got an object"},
      {PodWithTerms(Json::array({Json::object(), "zone=a"})), terms + "[1]: expected an object, got a string"},
      {PodWithTerms(Json::array({{{"matchExpressions", {{"key", "a"}}}}})),
       terms + "[0].matchExpressions: expected an array, got an object"},
      {PodWithRequirement("zone"), expr0 + ": expected an object, got a string"},
      {PodWithRequirement({{"operator", "Exists"}}), expr0 + ".key: required: expected a non-empty label key"},
      {PodWithRequirement({{"key", ""}, {"operator", "Exists"}}),
       expr0 + ".key: required: expected a non-empty label key"},
      {PodWithRequirement({{"key", 5}, {"operator", "Exists"}}), expr0 + ".key: expected a string, got a number"},
      {PodWithRequirement({{"key", "zone"}}),
       expr0 + ".operator: required: expected In, NotIn, Exists, DoesNotExist, Gt or Lt"},
      {PodWithRequirement({{"key", "zone"}, {"operator", "Near"}, {"values", {"a"}}}),
       expr0 + ".operator: unsupported operator \"Near\"; expected In, NotIn, Exists, DoesNotExist, Gt or Lt"},
      {PodWithRequirement({{"key", "zone"}, {"operator", "in"}, {"values", {"a"}}}),
       expr0 + ".operator: unsupported operator \"in\"; expected In, NotIn, Exists, DoesNotExist, Gt or Lt"},
      {PodWithRequirement({{"key", "zone"}, {"operator", "In"}}), expr0 + ".values: operator In needs at least one value"},
      {PodWithRequirement({{"key", "zone"}, {"operator", "NotIn"}, {"values", Json::array()}}),
       expr0 + ".values: operator NotIn needs at least one value"},
      {PodWithRequirement({{"key", "zone"}, {"operator", "In"}, {"values", "z1"}}),
       expr0 + ".values: expected an array, got a string"},
      {PodWithRequirement({{"key", "zone"}, {"operator", "In"}, {"values", {"z1", 2}}}),
       expr0 + ".values[1]: expected a string, got a number"},
      {PodWithRequirement({{"key", "gpu"}, {"operator", "Exists"}, {"values", {"yes"}}}),
       expr0 + ".values: operator Exists takes no values, got 1"},
      {PodWithRequirement({{"key", "gpu"}, {"operator", "DoesNotExist"}, {"values", {"a", "b"}}}),
       expr0 + ".values: operator DoesNotExist takes no values, got 2"},
      {PodWithRequirement({{"key", "cores"}, {"operator", "Gt"}, {"values", {"1", "2"}}}),
       expr0 + ".values: operator Gt needs exactly one value, got 2"},
      {PodWithRequirement({{"key", "cores"}, {"operator", "Lt"}}), expr0 + ".values: operator Lt needs exactly one value, got 0"},
      {PodWithRequirement({{"key", "spec.nodeName"}, {"operator", "In"}, {"values", {"n1"}}}, "matchFields"),
       field0 + ".key: unsupported field \"spec.nodeName\"; matchFields may only select metadata.name"},
      {PodWithRequirement({{"operator", "In"}, {"values", {"n1"}}}, "matchFields"),
       field0 + ".key: required: expected metadata.name"},
      {PodWithRequirement({{"key", "metadata.name"}, {"operator", "Exists"}}, "matchFields"),
       field0 + ".operator: unsupported operator \"Exists\"; expected In or NotIn"},
      {PodWithRequirement({{"key", "metadata.name"}, {"operator", "In"}, {"values", {"n1", "n2"}}}, "matchFields"),
       field0 + ".values: operator In on a field needs exactly one value, got 2"},
      {PodWithRequirement({{"key", "metadata.name"}, {"operator", "NotIn"}}, "matchFields"),
       field0 + ".values: operator NotIn on a field needs exactly one value, got 0"},
      {PodWithTolerations({{"key", "gpu"}}), "Pod.spec.tolerations: expected an array, got an object"},
      {PodWithTolerations(Json::array({{{"operator", "Exists"}}, "gpu"})),
       "Pod.spec.tolerations[1]: expected an object, got a string"},
      {PodWithTolerations(Json::array({{{"key", "gpu"}, {"operator", "Equals"}}})),
       "Pod.spec.tolerations[0].operator: unsupported operator \"Equals\"; expected Equal or Exists"},
      {PodWithTolerations(Json::array({{{"key", "gpu"}, {"operator", true}}})),
       "Pod.spec.tolerations[0].operator: expected a string, got a boolean"},
      {PodWithTolerations(Json::array({{{"key", "gpu"}, {"operator", "Exists"}, {"effect", "NoScheduling"}}})),
       "Pod.spec.tolerations[0].effect: unsupported effect \"NoScheduling\"; expected NoSchedule, "
       "PreferNoSchedule or NoExecute (or none for every effect)"},
      {PodWithTolerations(Json::array({{{"value", "x"}}})),
       "Pod.spec.tolerations[0].operator: must be Exists when the key is empty (which tolerates every taint)"},
      {PodWithTolerations(Json::array({{{"key", "gpu"}, {"operator", "Exists"}, {"value", "x"}}})),
       "Pod.spec.tolerations[0].value: must be empty when the operator is Exists"},
      {PodWithTolerations(Json::array({{{"key", 1}, {"operator", "Exists"}}})),
       "Pod.spec.tolerations[0].key: expected a string, got a number"},
      {PodWithTolerations(Json::array({{{"key", "gpu"}, {"value", Json::array()}}})),
       "Pod.spec.tolerations[0].value: expected a string, got an array"},
  };
  for (const Case& c : cases) {
    INFO("pod spec: " << c.pod["spec"].dump());
    CHECK(PodError(c.pod) == c.error);
  }
}

TEST_CASE("DecodePod: placement errors fail verb requests too - without crashing", "[codec][placement][errors]") {
  // NameMode::kLookup is what the verbs use on untrusted input.
  core::ResourceNames names;
  for (const Json& spec_part :
       {Json{{"tolerations", Json::array({nullptr})}}, Json{{"tolerations", Json::array({Json::array()})}},
        Json{{"affinity", {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution",
                                              {{"nodeSelectorTerms", Json::array({nullptr})}}}}}}}},
        Json{{"nodeSelector", {{"a", nullptr}}}}}) {
    Json j = MakePod("p").Obj();
    for (const auto& [k, v] : spec_part.items()) j["spec"][k] = v;
    INFO(j["spec"].dump());
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(j.dump());
    REQUIRE(doc.ok());
    const JsonPath top;
    const JsonPath path = top.Field("Pod");
    absl::StatusOr<simdjson::dom::object> obj = AsObject(doc->root(), path);
    REQUIRE(obj.ok());
    core::ResourceNameScope scope(names);
    absl::StatusOr<core::Pod> pod = DecodePod(*obj, scope, path, NameMode::kLookup);
    REQUIRE_FALSE(pod.ok());
    CHECK(Contains(ToStd(pod.status().message()), "Pod.spec."));
  }
}

TEST_CASE("EncodePod round trip keeps the placement", "[codec][roundtrip][placement]") {
  core::ResourceNames names;
  Json j = PodWithTerms(Json::array(
      {{{"matchExpressions", Json::array({{{"key", "zone"}, {"operator", "In"}, {"values", {"z1", "z2"}}},
                                          {{"key", "cores"}, {"operator", "Gt"}, {"values", {"+08"}}},
                                          {{"key", "spot"}, {"operator", "DoesNotExist"}}})},
        {"matchFields", Json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"n1"}}}})}},
       Json::object(),
       {{"matchFields", Json::array({{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {"n2"}}}})}}}));
  j["spec"]["nodeSelector"] = {{"pool", "a"}};
  j["spec"]["tolerations"] = Json::array({{{"operator", "Exists"}},
                                          {{"key", "gpu"}, {"value", "true"}, {"effect", "NoSchedule"}},
                                          {{"key", "spot"}, {"operator", "Exists"}, {"effect", "NoExecute"}}});
  std::vector<core::Pod> pods;
  pods.push_back(MustPod(j, names));
  Json only_terms_empty = MakePod("empty-terms").Obj();
  only_terms_empty["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      Json::object();
  pods.push_back(MustPod(only_terms_empty, names));
  pods.push_back(MustPod(PodWithTolerations(Json::array({{{"key", "k"}, {"operator", "Equal"}}})), names));
  Json only_selector = MakePod("sel").Obj();
  only_selector["spec"]["nodeSelector"] = {{"kubernetes.io/arch", "amd64"}};
  pods.push_back(MustPod(only_selector, names));

  for (const core::Pod& pod : pods) {
    INFO("pod " << pod.Key());
    REQUIRE(pod.placement != nullptr);
    CheckSamePod(PodRoundTrip(pod, names), pod);
  }
  // Hand-checked, so the round trip cannot pass by losing the placement on both sides.
  const core::Pod back = PodRoundTrip(pods[0], names);
  REQUIRE(back.placement != nullptr);
  CHECK(back.placement->node_selector.Get("pool") == std::optional<std::string_view>("a"));
  REQUIRE(back.placement->required_terms.has_value());
  REQUIRE(back.placement->required_terms->size() == 3);
  CHECK((*back.placement->required_terms)[0].match_expressions[1].number == 8);
  CHECK((*back.placement->required_terms)[0].match_fields.size() == 1);
  CHECK((*back.placement->required_terms)[1].empty());
  CHECK(back.placement->tolerations.size() == 3);
  const core::Pod empty_back = PodRoundTrip(pods[1], names);
  REQUIRE(empty_back.placement != nullptr);
  CHECK(empty_back.placement->required_terms.has_value());
  // The encoded JSON is what Kubernetes writes.
  const Json encoded = EncodePod(pods[0], names);
  CHECK(encoded["spec"]["nodeSelector"] == Json{{"pool", "a"}});
  CHECK(encoded["spec"]["tolerations"][1] ==
        Json{{"key", "gpu"}, {"operator", "Equal"}, {"value", "true"}, {"effect", "NoSchedule"}});
  CHECK(encoded["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
               ["nodeSelectorTerms"][1] == Json::object());
  // A pod without placement writes none of these fields.
  const Json plain = EncodePod(MustPod(MakePod("plain").Obj(), names), names);
  CHECK_FALSE(plain["spec"].contains("nodeSelector"));
  CHECK_FALSE(plain["spec"].contains("affinity"));
  CHECK_FALSE(plain["spec"].contains("tolerations"));
}

TEST_CASE("DecodePod reads the placement of the fixtures' pods", "[codec][placement][fixtures]") {
  core::ResourceNames names;
  const Json req = Json::parse(ReadFixture("filter-request-2.json"));
  const core::Pod pod = MustPod(req["Pod"], names);
  REQUIRE(pod.placement != nullptr);
  CHECK(pod.placement->node_selector.Get("pool") == std::optional<std::string_view>("gpu-large"));
  CHECK_FALSE(pod.placement->required_terms.has_value());
  REQUIRE(pod.placement->tolerations.size() == 3);
  CHECK(pod.placement->tolerations[0] == core::Toleration{.key = "nvidia.com/gpu",
                                                          .op = core::TolerationOp::kExists,
                                                          .effect = "NoSchedule"});
  CheckSamePod(PodRoundTrip(pod, names), pod);
}

}  // namespace
}  // namespace berth::extender
