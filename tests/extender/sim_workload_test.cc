// Tests of extender/sim/workload and extender/sim/generate: the workload file format of
// `berth simulate` (parsing, errors that name file, job and field, the YAML round trip), the
// synthetic profiles (deterministic, exact job counts, clusters berth can load) and the
// workloads shipped in bench/workloads.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "core/resources.h"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/sim/generate.h"
#include "extender/sim/workload.h"
#include "tests/testing/files.h"
#include "tests/testing/text.h"

namespace berth::extender::sim {
namespace {

using berth::testing::Contains;

constexpr char kExample[] = R"(kind: Workload
name: example
description: one of everything
jobs:
- name: train-1
  namespace: ml
  submit: 90s
  duration: 2h30m
  queue: research
  priorityClass: berth-normal
  pool: gpu
  lifetime: 1.5h
  gang: {minMember: 3, maxMember: 4, maxHops: 4, scheduleTimeoutSeconds: 600}
  pods:
  - name: launcher
    requests: {cpu: 500m, memory: 1Gi}
  - count: 3
    requests: {cpu: "32", memory: 256Gi, nvidia.com/gpu: 8}
    nodeSelector: {berth.io/node-pool: gpu}
    tolerations: [nvidia.com/gpu]
- name: prep-2
  submit: 0
  duration: 600
  pods:
  - requests: {cpu: 2}
nodeEvents:
- at: 1h
  action: add
  node: gpu-9
  allocatable: {cpu: "96", nvidia.com/gpu: "8"}
  labels: {berth.io/node-pool: gpu}
- at: 2h
  action: drain
  node: gpu-1
- {at: 3h, action: fail, node: gpu-2}
- {at: 4h, action: restore, node: gpu-2}
)";

// The same workload written as JSON.
constexpr char kExampleJson[] = R"({
  "kind": "Workload", "name": "example", "description": "one of everything",
  "jobs": [
    {"name": "train-1", "namespace": "ml", "submit": "90s", "duration": "2h30m",
     "queue": "research", "priorityClass": "berth-normal", "pool": "gpu", "lifetime": "1.5h",
     "gang": {"minMember": 3, "maxMember": 4, "maxHops": 4, "scheduleTimeoutSeconds": 600},
     "pods": [
       {"name": "launcher", "requests": {"cpu": "500m", "memory": "1Gi"}},
       {"count": 3, "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": 8},
        "nodeSelector": {"berth.io/node-pool": "gpu"}, "tolerations": ["nvidia.com/gpu"]}]},
    {"name": "prep-2", "submit": 0, "duration": 600, "pods": [{"requests": {"cpu": 2}}]}],
  "nodeEvents": [
    {"at": "1h", "action": "add", "node": "gpu-9",
     "allocatable": {"cpu": "96", "nvidia.com/gpu": "8"},
     "labels": {"berth.io/node-pool": "gpu"}},
    {"at": "2h", "action": "drain", "node": "gpu-1"},
    {"at": "3h", "action": "fail", "node": "gpu-2"},
    {"at": "4h", "action": "restore", "node": "gpu-2"}]
})";

void CheckExample(const Workload& w) {
  CHECK(w.name == "example");
  CHECK(w.description == "one of everything");
  REQUIRE(w.jobs.size() == 2);
  const Job& a = w.jobs[0];
  CHECK(a.name == "train-1");
  CHECK(a.ns == "ml");
  CHECK(a.submit == absl::Seconds(90));
  CHECK(a.duration == absl::Minutes(150));
  CHECK(a.queue == "research");
  CHECK(a.priority_class == "berth-normal");
  CHECK(a.pool == "gpu");
  CHECK(a.lifetime == absl::Minutes(90));
  CHECK(a.min_member == 3);
  CHECK(a.max_hops == 4);
  CHECK(a.schedule_timeout_seconds == 600);
  REQUIRE(a.pods.size() == 2);
  CHECK(a.pods[0].name == "launcher");
  CHECK(a.pods[0].count == 1);
  CHECK(a.pods[0].requests ==
        std::map<std::string, std::string>{{"cpu", "500m"}, {"memory", "1Gi"}});
  CHECK(a.pods[1].name == "worker");
  CHECK(a.pods[1].count == 3);
  CHECK(a.pods[1].requests.at("nvidia.com/gpu") == "8");
  CHECK(a.pods[1].node_selector.at("berth.io/node-pool") == "gpu");
  CHECK(a.pods[1].tolerations == std::vector<std::string>{"nvidia.com/gpu"});
  CHECK(a.PodCount() == 4);

  const Job& b = w.jobs[1];
  CHECK(b.ns == "default");
  CHECK(b.submit == absl::ZeroDuration());
  CHECK(b.duration == absl::Minutes(10));  // a bare number is seconds
  CHECK(b.queue.empty());
  CHECK(!b.lifetime.has_value());
  CHECK(!b.min_member.has_value());
  CHECK(b.pods[0].requests.at("cpu") == "2");
  CHECK(w.PodCount() == 5);
  CHECK(w.Horizon() == absl::Seconds(90) + absl::Minutes(150));

  REQUIRE(w.node_events.size() == 4);
  CHECK(w.node_events[0].action == NodeEvent::Action::kAdd);
  CHECK(w.node_events[0].at == absl::Hours(1));
  CHECK(w.node_events[0].node == "gpu-9");
  CHECK(w.node_events[0].allocatable.at("cpu") == "96");
  CHECK(w.node_events[0].labels.at("berth.io/node-pool") == "gpu");
  CHECK(w.node_events[1].action == NodeEvent::Action::kDrain);
  CHECK(w.node_events[2].action == NodeEvent::Action::kFail);
  CHECK(w.node_events[3].action == NodeEvent::Action::kRestore);
  CHECK(w.node_events[3].allocatable.empty());
}

TEST_CASE("workload: a full example in YAML", "[sim][workload]") {
  absl::StatusOr<Workload> w = ParseWorkload(kExample, "w.yaml");
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  CheckExample(*w);
}

TEST_CASE("workload: the same example in JSON reads the same", "[sim][workload]") {
  absl::StatusOr<Workload> json = ParseWorkload(kExampleJson, "w.json");
  INFO(json.status().ToString());
  REQUIRE(json.ok());
  CheckExample(*json);
  absl::StatusOr<Workload> yaml = ParseWorkload(kExample, "w.yaml");
  REQUIRE(yaml.ok());
  CHECK(*json == *yaml);
}

TEST_CASE("workload: defaults of a minimal job", "[sim][workload]") {
  absl::StatusOr<Workload> w = ParseWorkload(
      "jobs: [{name: a, submit: 0s, duration: 1m, pods: [{requests: {cpu: 1}}], "
      "gang: {}}]",
      "w.yaml");
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  CHECK(w->name.empty());
  CHECK(w->node_events.empty());
  // A gang without minMember needs all of its pods.
  CHECK(w->jobs[0].min_member == 1);
  CHECK(!w->jobs[0].max_hops.has_value());
}

// The refusal of `text`, read as "w.yaml".
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<Workload> w = ParseWorkload(text, "w.yaml");
  INFO(text);
  REQUIRE_FALSE(w.ok());
  return std::string(w.status().message());
}

// One valid job, as a flow mapping with `extra` fields added (or replacing, for `submit` etc.).
std::string J(const std::string& name, const std::string& fields) {
  return StrCat("{name: ", name, ", ", fields, "}");
}
std::string Js(const std::vector<std::string>& jobs) {
  std::string out = "jobs:\n";
  for (const std::string& j : jobs) StrAppend(&out, "- ", j, "\n");
  return out;
}
const std::string kOk = "submit: 0s, duration: 1h, pods: [{requests: {cpu: 1}}]";

TEST_CASE("workload: errors name the file, the job and the field", "[sim][workload][errors]") {
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      // A bad quantity: the message names file, job (index and name) and the field path.
      {Js({J("a", kOk), J("b", kOk), J("c", kOk),
           J("train-7", "submit: 0s, duration: 1h, pods: [{requests: {cpu: lots}}]")}),
       R"(w.yaml: jobs[3] (train-7): pods[0].requests.cpu: "lots" is not a Kubernetes quantity)"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: [{requests: {memory: -1Gi}}]")}),
       R"(w.yaml: jobs[0] (a): pods[0].requests.memory: "-1Gi" is negative)"},
      {Js({J("a", "submit: 0s, pods: [{requests: {cpu: 1}}]")}),
       "w.yaml: jobs[0] (a): duration: required field is missing"},
      {Js({J("a", "submit: 0s, duration: 0s, pods: [{requests: {cpu: 1}}]")}),
       "w.yaml: jobs[0] (a): duration: 0 must be above 0"},
      {Js({J("a", "submit: 1h, duration: soon, pods: [{requests: {cpu: 1}}]")}),
       R"(w.yaml: jobs[0] (a): duration: "soon" is not a duration)"},
      {Js({J("a", "submit: -5s, duration: 1h, pods: [{requests: {cpu: 1}}]")}),
       "w.yaml: jobs[0] (a): submit: -5s is negative"},
      {Js({J("a", "submit: -5, duration: 1h, pods: [{requests: {cpu: 1}}]")}),
       "w.yaml: jobs[0] (a): submit: -5s is negative"},
      {Js({J("a", kOk), J("a", kOk)}),
       R"(w.yaml: jobs[1] (a): name: duplicate job name "a" in namespace "default")"},
      {Js({J("a", kOk + ", queu: x")}),
       "w.yaml: jobs[0] (a): queu: unknown field (known: name, namespace, submit, duration"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: [{requests: {cpu: 1}, replicas: 2}]")}),
       "w.yaml: jobs[0] (a): pods[0].replicas: unknown field"},
      {Js({J("a", kOk + ", gang: {minMember: 1, maxhops: 2}")}),
       "w.yaml: jobs[0] (a): gang.maxhops: unknown field"},
      {"jobs: []\nkindd: Workload\n", "w.yaml: kindd: unknown field (known: kind, name"},
      {Js({J("a",
             "submit: 0s, duration: 1h, gang: {minMember: 5}, "
             "pods: [{count: 4, requests: {cpu: 1}}]")}),
       "w.yaml: jobs[0] (a): gang.minMember: 5 is more than the job's 4 pods"},
      {Js({J("a", kOk + ", gang: {minMember: 0}")}),
       "w.yaml: jobs[0] (a): gang.minMember: 0 is out of range"},
      {Js({J("a", kOk + ", gang: {maxMember: 3}")}),
       "w.yaml: jobs[0] (a): gang.maxMember: 3 differs from the job's 1 pods"},
      {Js({J("a", kOk + ", gang: {maxHops: -1}")}),
       "w.yaml: jobs[0] (a): gang.maxHops: -1 is out of range"},
      {Js({J("a", kOk + ", gang: {scheduleTimeoutSeconds: 0}")}),
       "w.yaml: jobs[0] (a): gang.scheduleTimeoutSeconds: 0 is out of range"},
      {Js({J("a", kOk + ", gang: {minMember: two}")}),
       R"(w.yaml: jobs[0] (a): gang.minMember: "two" is not an integer)"},
      {Js({J("Train_1", kOk)}),
       R"(w.yaml: jobs[0] (Train_1): name: "Train_1" is not a DNS-1123 label)"},
      {Js({"{submit: 0s, duration: 1h, pods: [{requests: {cpu: 1}}]}"}),
       "w.yaml: jobs[0]: name: required field is missing"},
      {Js({J("a", "submit: 0s, duration: 1h")}),
       "w.yaml: jobs[0] (a): pods: required field is missing"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: []")}),
       "w.yaml: jobs[0] (a): pods: at least one pod template is required"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: [{requests: {}}]")}),
       "w.yaml: jobs[0] (a): pods[0].requests: at least one resource is required"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: [{count: 0, requests: {cpu: 1}}]")}),
       "w.yaml: jobs[0] (a): pods[0].count: 0 is out of range (1 to 10000)"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: [{requests: {cpu: 1}}, {requests: {cpu: 1}}]")}),
       R"(w.yaml: jobs[0] (a): pods[1].name: duplicate pod template name "worker")"},
      {Js({J("a", kOk + ", lifetime: -1m")}), "w.yaml: jobs[0] (a): lifetime: -1m is negative"},
      {Js({J("a", kOk + ", queue: [x]")}),
       "w.yaml: jobs[0] (a): queue: expected a string, got a list"},
      {Js({J("a", "submit: 0s, duration: 1h, pods: [{requests: {cpu: 1}, tolerations: x}]")}),
       "w.yaml: jobs[0] (a): pods[0].tolerations: expected a list, got a scalar"},
      {"kind: Job\njobs: []\n", R"(w.yaml: kind: "Job": expected "Workload")"},
      {"name: x\n", "w.yaml: jobs: required field is missing"},
      {"jobs: []\n", "w.yaml: jobs: at least one job is required"},
      {"", "w.yaml: the workload is empty"},
      {"- a\n- b\n", "w.yaml: expected a mapping, got a list"},
      {Js({J("a", kOk + ", namespace: a, name: b")}), "name: duplicate key"},
      // YAML syntax errors give the line and column.
      {"name: x\njobs:\n  - {name: a, submit: 0s\n",
       "w.yaml: line 4, column 1: invalid YAML: end of map flow not found"},
      {"{\"jobs\": [}", "w.yaml: line 1, column "},
      // Node events.
      {Js({J("a", kOk)}) + "nodeEvents:\n- {at: 1h, action: reboot, node: n1}\n",
       R"(w.yaml: nodeEvents[0] (n1): action: "reboot": expected add, drain, fail or restore)"},
      {Js({J("a", kOk)}) + "nodeEvents:\n- {at: 1h, action: add, node: n1}\n",
       "w.yaml: nodeEvents[0] (n1): allocatable: required field is missing (action add)"},
      {Js({J("a", kOk)}) + "nodeEvents:\n- {at: 1h, action: drain, node: n1, labels: {a: b}}\n",
       "w.yaml: nodeEvents[0] (n1): labels: only an add gives labels"},
      {Js({J("a", kOk)}) +
           "nodeEvents:\n- {at: 1h, action: add, node: n1, allocatable: {cpu: x}}\n",
       R"(w.yaml: nodeEvents[0] (n1): allocatable.cpu: "x" is not a Kubernetes quantity)"},
      {Js({J("a", kOk)}) + "nodeEvents:\n- {at: -1h, action: fail, node: n1}\n",
       "w.yaml: nodeEvents[0] (n1): at: -1h is negative"},
      {Js({J("a", kOk)}) + "nodeEvents:\n- {at: 1h, action: fail, node: N_1}\n",
       R"(w.yaml: nodeEvents[0] (N_1): node: "N_1" is not a valid node name)"},
      {Js({J("a", kOk)}) + "nodeEvents:\n- {at: 1h, action: fail, node: n1, when: now}\n",
       "w.yaml: nodeEvents[0] (n1): when: unknown field"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf(c.text);
    INFO("input:\n" << c.text << "\nerror: " << error << "\nwanted: " << c.want);
    CHECK(Contains(error, c.want));
  }
}

TEST_CASE("workload: the total pod count is capped", "[sim][workload][errors]") {
  std::string text = "jobs:\n";
  for (int i = 0; i < 201; ++i) {
    StrAppend(&text, "- {name: j", i,
              ", submit: 0s, duration: 1h, pods: [{count: 10000, "
              "requests: {cpu: 1}}]}\n");
  }
  const std::string error = ErrorOf(text);
  CHECK(Contains(error, "w.yaml: jobs[200] (j200): the workload has more than 2000000 pods"));
}

TEST_CASE("workload: WorkloadToYaml reads back to an equal workload", "[sim][workload][yaml]") {
  absl::StatusOr<Workload> w = ParseWorkload(kExample, "w.yaml");
  REQUIRE(w.ok());
  // Values that YAML would read as null, and sub-second durations, survive too.
  w->jobs[1].queue = "null";
  w->jobs[1].pods[0].node_selector["~"] = "";
  w->jobs[1].duration = absl::Milliseconds(1500);
  w->jobs[1].lifetime = absl::ZeroDuration();
  const std::string yaml = WorkloadToYaml(*w);
  absl::StatusOr<Workload> back = ParseWorkload(yaml, "out.yaml");
  INFO(yaml);
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  CHECK(*back == *w);
  CHECK(WorkloadToYaml(*back) == yaml);
  CHECK(Contains(yaml, "duration: 2h30m"));
}

TEST_CASE("workload: LoadWorkloadFile names a missing file", "[sim][workload]") {
  absl::StatusOr<Workload> w = LoadWorkloadFile("/nonexistent/w.yaml");
  REQUIRE_FALSE(w.ok());
  CHECK(Contains(std::string(w.status().message()), "/nonexistent/w.yaml"));
}

// --- The generator ----------------------------------------------------------------------------

Generated Gen(const std::string& profile, int jobs, uint64_t seed, int nodes = 0) {
  absl::StatusOr<Generated> g =
      Generate({.profile = profile, .jobs = jobs, .nodes = nodes, .seed = seed});
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  return *std::move(g);
}

struct ClusterCounts {
  int nodes = 0;
  int gpus = 0;
  std::set<std::string> pools, queues, priority_classes;
};

// Loads a cluster file as `berth serve --cluster` does (DecodeList) and counts what is in it.
ClusterCounts LoadCluster(const std::string& json) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(json);
  REQUIRE(doc.ok());
  core::ResourceNames names;
  absl::StatusOr<std::vector<core::ModelEvent>> events = DecodeList(doc->root(), names);
  INFO(events.status().ToString());
  REQUIRE(events.ok());
  ClusterCounts c;
  for (const core::ModelEvent& e : *events) {
    if (const auto* n = std::get_if<core::NodeUpsert>(&e)) {
      ++c.nodes;
      c.gpus += static_cast<int>(n->node.allocatable.Get(core::kNvidiaGpu));
      CHECK(n->node.labels.Has("topology.kubernetes.io/zone"));
      CHECK(n->node.labels.Has("berth.io/spine"));
      CHECK(n->node.labels.Has("berth.io/leaf"));
    } else if (const auto* p = std::get_if<core::PoolUpsert>(&e)) {
      c.pools.insert(p->pool.name);
    } else if (const auto* q = std::get_if<core::QueueUpsert>(&e)) {
      c.queues.insert(q->queue.name);
    } else if (const auto* pc = std::get_if<core::PriorityClassUpsert>(&e)) {
      c.priority_classes.insert(pc->priority_class.name);
    }
  }
  return c;
}

const std::set<std::string> kPriorityClasses = {"berth-experiment", "berth-offline", "berth-normal",
                                                "berth-production"};

TEST_CASE("generate: every profile is deterministic, exact in jobs, and reads back",
          "[sim][generate]") {
  for (const std::string& profile : ProfileNames()) {
    for (int jobs : {1, 7, 250}) {
      INFO(profile << " jobs " << jobs);
      const Generated a = Gen(profile, jobs, 42);
      const Generated b = Gen(profile, jobs, 42);
      CHECK(a.workload.jobs.size() == static_cast<size_t>(jobs));
      const std::string yaml = WorkloadToYaml(a.workload);
      CHECK(yaml == WorkloadToYaml(b.workload));
      CHECK(a.cluster_json == b.cluster_json);
      absl::StatusOr<Workload> back = ParseWorkload(yaml, profile + ".yaml");
      INFO(back.status().ToString());
      REQUIRE(back.ok());
      CHECK(*back == a.workload);
    }
    const std::string a = WorkloadToYaml(Gen(profile, 250, 1).workload);
    const std::string b = WorkloadToYaml(Gen(profile, 250, 2).workload);
    CHECK(a != b);
  }
}

TEST_CASE("generate: clusters load as berth reads them", "[sim][generate]") {
  {
    const ClusterCounts c = LoadCluster(Gen("gpu-mix", 10, 1).cluster_json);
    CHECK(c.nodes == 72);
    CHECK(c.gpus == 64 * 8);
    CHECK(c.queues == std::set<std::string>{"research", "product", "dev", "batch"});
    CHECK(c.priority_classes == kPriorityClasses);
    CHECK(LoadCluster(Gen("gpu-mix", 10, 1, 900).cluster_json).nodes == 900);
  }
  {
    const ClusterCounts c = LoadCluster(Gen("seed-stories", 10, 1).cluster_json);
    CHECK(c.nodes == 18);
    CHECK(c.pools == std::set<std::string>{"gpu", "cpu", "infer"});
    CHECK(c.queues == std::set<std::string>{"team-a", "team-b", "team-c"});
    CHECK(c.priority_classes == kPriorityClasses);
  }
  {
    const ClusterCounts c = LoadCluster(Gen("gang-fat-tree", 10, 1).cluster_json);
    CHECK(c.nodes == 128);
    CHECK(c.gpus == 128 * 8);
    CHECK(c.priority_classes == kPriorityClasses);
    CHECK(LoadCluster(Gen("gang-fat-tree", 10, 1, 1).cluster_json).nodes == 1);
  }
}

TEST_CASE("generate: gpu-mix shape", "[sim][generate]") {
  const Generated g = Gen("gpu-mix", 4000, 7);
  int one_gpu = 0, gangs = 0;
  double gpu_seconds = 0, gang_gpu_seconds = 0;
  std::set<std::string> priorities;
  for (const Job& j : g.workload.jobs) {
    priorities.insert(j.priority_class);
    const auto& r = j.pods[0].requests;
    const int gpus = r.contains("nvidia.com/gpu") ? std::stoi(r.at("nvidia.com/gpu")) : 0;
    const int total = gpus * j.pods[0].count;
    CHECK((total == 0 || (total & (total - 1)) == 0));  // powers of two
    CHECK(total <= 64);
    if (total == 1) ++one_gpu;
    const double work = total * absl::ToDoubleSeconds(j.duration);
    gpu_seconds += work;
    if (j.min_member) {
      ++gangs;
      CHECK(*j.min_member == j.PodCount());
      gang_gpu_seconds += work;
    }
    CHECK(j.duration <= absl::Hours(72));
  }
  CHECK(one_gpu > 2000);                        // most jobs take one GPU...
  CHECK(gangs < 500);                           // ...few are multi-node gangs...
  CHECK(gang_gpu_seconds > 0.3 * gpu_seconds);  // ...which hold a large share of GPU time
  CHECK(priorities == kPriorityClasses);
  // The span is chosen for an offered load of 1.0 of the GPUs.
  const double capacity = 512 * absl::ToDoubleSeconds(g.workload.jobs.back().submit);
  CHECK(gpu_seconds / capacity == Approx(1.0).epsilon(0.02));
}

TEST_CASE("generate: a lower load spreads the same jobs over a longer span", "[sim][generate]") {
  for (const std::string profile : {"gpu-mix", "gang-fat-tree"}) {
    INFO(profile);
    const absl::StatusOr<Generated> full =
        Generate({.profile = profile, .jobs = 3000, .seed = 5, .load = 1.0});
    const absl::StatusOr<Generated> half =
        Generate({.profile = profile, .jobs = 3000, .seed = 5, .load = 0.5});
    REQUIRE(full.ok());
    REQUIRE(half.ok());
    const double a = absl::ToDoubleSeconds(full->workload.jobs.back().submit);
    const double b = absl::ToDoubleSeconds(half->workload.jobs.back().submit);
    CHECK(b / a == Approx(2.0).epsilon(0.01));
    for (size_t i = 0; i < 3000; ++i) {  // the same jobs, later
      CHECK(full->workload.jobs[i].duration == half->workload.jobs[i].duration);
    }
  }
}

TEST_CASE("generate: gang-fat-tree hop limits fit the tree", "[sim][generate]") {
  const Generated g = Gen("gang-fat-tree", 2000, 3);
  int gangs = 0, elastic = 0, hops = 0;
  for (const Job& j : g.workload.jobs) {
    if (!j.min_member) continue;
    ++gangs;
    if (*j.min_member < j.PodCount()) ++elastic;
    if (j.max_hops) {
      ++hops;
      const int gpus = j.PodCount() * std::stoi(j.pods[0].requests.at("nvidia.com/gpu"));
      const int limit = *j.max_hops == 2 ? 4 : *j.max_hops == 4 ? 16 : 64;
      CHECK(gpus <= limit * 8);
    }
  }
  CHECK(gangs > 1400);
  CHECK(elastic > 100);
  CHECK(hops > 700);
}

TEST_CASE("generate: saturated offers more than the cluster, every queue more than its share",
          "[sim][generate]") {
  for (const std::string profile : {"saturated", "saturated-pools"}) {
    INFO(profile);
    const Generated g = Gen(profile, 3000, 11);
    const ClusterCounts c = LoadCluster(g.cluster_json);
    const bool pools = profile == "saturated-pools";
    CHECK(c.nodes == (pools ? 108 : 144));
    CHECK(c.gpus == (pools ? 96 : 128) * 8);
    CHECK(c.queues == std::set<std::string>{"team-a", "team-b", "team-c"});
    CHECK(c.pools == (pools ? std::set<std::string>{"team-a", "team-b", "team-c"} : std::set<std::string>{}));
    std::map<std::string, double> work;  // GPU-seconds by queue
    double total = 0;
    int offline = 0, gangs = 0, named = 0, gpu_jobs = 0;
    for (const Job& j : g.workload.jobs) {
      const auto& r = j.pods[0].requests;
      const int gpus = r.contains("nvidia.com/gpu") ? std::stoi(r.at("nvidia.com/gpu")) : 0;
      const double w = gpus * j.pods[0].count * absl::ToDoubleSeconds(j.duration);
      work[j.queue] += w;
      total += w;
      if (j.priority_class == "berth-offline") ++offline;
      CHECK((j.priority_class == "berth-offline" || j.priority_class == "berth-normal"));
      if (gpus > 0) ++gpu_jobs;
      if (!j.pool.empty()) {
        ++named;
        CHECK(j.pool == j.queue);  // a team's jobs name the team's pool
      }
      if (j.min_member) {
        ++gangs;
        CHECK(gpus == 8);
        CHECK((j.PodCount() == 2 || j.PodCount() == 4 || j.PodCount() == 8));
        CHECK(*j.min_member == j.PodCount());
        CHECK(j.max_hops == std::optional<int>(4));
      } else {
        CHECK(j.PodCount() <= 4);
        CHECK(gpus <= 8);
      }
      CHECK(j.duration <= absl::Hours(24));
    }
    CHECK(offline == Approx(0.2 * 3000).margin(90));
    CHECK(gangs > 500);
    if (pools) {
      CHECK(named == Approx(0.6 * gpu_jobs).margin(120));
    } else {
      CHECK(named == 0);
    }
    // Load 1.25 over the span: each queue asks for more than its weighted share (1:1:2).
    const double span = absl::ToDoubleSeconds(g.workload.jobs.back().submit);
    CHECK(total / (c.gpus * span) == Approx(1.25).epsilon(0.02));
    for (auto [queue, share] : {std::pair{"team-a", 0.25}, std::pair{"team-b", 0.25}, std::pair{"team-c", 0.5}}) {
      INFO(queue);
      CHECK(work[queue] / (c.gpus * span) > share);
    }
  }
}

TEST_CASE("generate: option errors name the option", "[sim][generate]") {
  auto error = [](const GenerateOptions& o) {
    absl::StatusOr<Generated> g = Generate(o);
    REQUIRE_FALSE(g.ok());
    return std::string(g.status().message());
  };
  const std::string unknown = error({.profile = "philly", .jobs = 10});
  CHECK(Contains(unknown, R"(profile: unknown profile "philly")"));
  CHECK(Contains(unknown, "gpu-mix, seed-stories, gang-fat-tree"));
  CHECK(Contains(error({.profile = "gpu-mix", .jobs = 0}), "jobs: 0 is out of range"));
  CHECK(
      Contains(error({.profile = "gpu-mix", .jobs = 5, .nodes = -1}), "nodes: -1 is out of range"));
  CHECK(Contains(error({.profile = "seed-stories", .jobs = 5, .nodes = 2}), "nodes: "));
  CHECK(Contains(error({.profile = "gpu-mix", .jobs = 5, .load = -1}), "load: -1 is out of range"));
  CHECK(Contains(error({.profile = "seed-stories", .jobs = 5, .load = 0.5}),
                 "load: the seed-stories profile"));
  for (const std::string& p : ProfileNames()) CHECK(Contains(DescribeProfiles(), p));
}

// --- The shipped workloads --------------------------------------------------------------------

// What bench/workloads/README.md says each shipped file was generated with.
struct Shipped {
  std::string profile;
  int jobs;
  uint64_t seed;
};
const std::vector<Shipped> kShipped = {
    {"gpu-mix", 1000, 1},   {"seed-stories", 300, 1},      {"gang-fat-tree", 500, 1},
    {"saturated", 3200, 1}, {"saturated-pools", 2400, 1}};

std::filesystem::path WorkloadsDir() {
  return std::filesystem::path(BERTH_SOURCE_DIR) / "bench" / "workloads";
}

TEST_CASE("shipped workloads parse and are what the generator makes", "[sim][generate][bench]") {
  for (const Shipped& s : kShipped) {
    INFO(s.profile);
    const std::filesystem::path yaml = WorkloadsDir() / (s.profile + ".yaml");
    absl::StatusOr<Workload> w = LoadWorkloadFile(yaml.string());
    INFO(w.status().ToString());
    REQUIRE(w.ok());
    CHECK(w->jobs.size() == static_cast<size_t>(s.jobs));
    const std::string cluster =
        testing::ReadTestFile(WorkloadsDir() / (s.profile + ".cluster.json"));
    CHECK(LoadCluster(cluster).nodes > 0);
    // Regenerate with `berth simulate --generate` (see the README) when the generator changes.
    const Generated g = Gen(s.profile, s.jobs, s.seed);
    CHECK(*w == g.workload);
    CHECK(testing::ReadTestFile(yaml) == WorkloadToYaml(g.workload));
    CHECK(cluster == g.cluster_json);
  }
}

// Rewrites the shipped files; run by hand: berth_extender_tests "[.regenerate]".
TEST_CASE("regenerate the shipped workloads", "[.regenerate]") {
  std::filesystem::create_directories(WorkloadsDir());
  for (const Shipped& s : kShipped) {
    const Generated g = Gen(s.profile, s.jobs, s.seed);
    std::ofstream(WorkloadsDir() / (s.profile + ".yaml")) << WorkloadToYaml(g.workload);
    std::ofstream(WorkloadsDir() / (s.profile + ".cluster.json")) << g.cluster_json;
  }
}

}  // namespace
}  // namespace berth::extender::sim
