#include "bench/cluster_profiles.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string_view>

#include "absl/time/time.h"
#include "core/strings.h"
#include "extender/json.h"

namespace berth::bench {
namespace {

using extender::JsonWriter;

constexpr int64_t kBaseUnixSeconds = 1'767'225'600;  // 2026-01-01T00:00:00Z
constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kMi = int64_t{1} << 20;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string Hex(uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%0*llx", digits, static_cast<unsigned long long>(v));
  std::string s(buf);
  return s.substr(s.size() - static_cast<size_t>(digits));
}

std::string Pad(int64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%0*lld", digits, static_cast<long long>(v));
  return buf;
}

/// A UUID-shaped string derived from `a`, `b`.
std::string Uuid(uint64_t a, uint64_t b) {
  const uint64_t h1 = SplitMix64(a * 1'000'003 + b);
  const uint64_t h2 = SplitMix64(h1 ^ (b + 0x5bd1e995));
  return StrCat(Hex(h1 >> 32, 8), "-", Hex(h1 >> 16, 4), "-4", Hex(h1, 3), "-a", Hex(h2 >> 48, 3),
                "-", Hex(h2, 12));
}

std::string Rfc3339(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

/// Per-node shape.
struct NodeShape {
  bool gpu;
  int64_t cpu_cores;       // capacity
  int64_t cpu_alloc_milli; // allocatable
  int64_t mem_cap_ki;
  int64_t mem_alloc_ki;
  int64_t gpus;
  const char* instance_type;
  const char* machine_family;
};

NodeShape ShapeOf(const ClusterProfile& p, int i) {
  NodeShape s{};
  s.gpu = IsGpuNode(p, i);
  if (s.gpu) {
    s.cpu_cores = 96;
    s.mem_cap_ki = 680 * 1024 * 1024;
    s.gpus = p.gpus_per_gpu_node;
    s.instance_type = "a2-highgpu-8g";
    s.machine_family = "a2";
  } else if (i % 3 == 0) {
    s.cpu_cores = 32;
    s.mem_cap_ki = 128 * 1024 * 1024;
    s.instance_type = "n2-standard-32";
    s.machine_family = "n2";
  } else {
    s.cpu_cores = 64;
    s.mem_cap_ki = 256 * 1024 * 1024;
    s.instance_type = "n2-standard-64";
    s.machine_family = "n2";
  }
  s.cpu_alloc_milli = s.cpu_cores * 1000 - 230;
  s.mem_alloc_ki = s.mem_cap_ki / 100 * 94;
  return s;
}

/// Share of the node (percent of allocatable cpu and memory) its running pods request.
int LoadPercent(int i) {
  static constexpr int kLoad[4] = {15, 35, 55, 75};
  return kLoad[(i * 7 + i / 5) % 4];
}

/// GPUs the running pods of a GPU node take.
int GpuLoad(const ClusterProfile& p, int i) {
  const int g = (i / std::max(1, p.gpu_every)) % (p.gpus_per_gpu_node + 1);
  return std::min(g, p.pods_per_node);
}

struct PodShape {
  int64_t cpu_milli;
  int64_t mem_mi;
  int64_t gpus;
};

PodShape PodShapeOf(const ClusterProfile& p, int i, int k) {
  const NodeShape n = ShapeOf(p, i);
  int total_weight = 0;
  for (int j = 0; j < p.pods_per_node; ++j) total_weight += (j % 4) + 1;
  const int w = (k % 4) + 1;
  const int load = LoadPercent(i);
  PodShape s{};
  s.cpu_milli = n.cpu_alloc_milli * load / 100 * w / total_weight / 10 * 10;
  s.mem_mi = n.mem_alloc_ki / 1024 * load / 100 * w / total_weight;
  s.gpus = (n.gpu && k < GpuLoad(p, i)) ? 1 : 0;
  return s;
}

std::string PodNamespace(int i) { return StrCat("team-", Pad(i % 20, 2)); }
std::string PodName(int i, int k) { return StrCat("train-", Pad(i, 5), "-worker-", k); }
std::string PodUid(int i, int k) { return Uuid(static_cast<uint64_t>(i) + 17, static_cast<uint64_t>(k)); }
const char* PodScheduler(int k) { return k % 2 == 0 ? "berth-scheduler" : "default-scheduler"; }
std::string PodQueue(int i) { return StrCat("q-", i % kBenchQueues); }

std::string Zone(const ClusterProfile& p, int i) {
  const int spine = i / p.nodes_per_leaf / p.leaves_per_spine;
  static constexpr char kLetters[] = "abcdefgh";
  return StrCat("us-central1-", std::string(1, kLetters[spine % std::max(1, p.zones) % 8]));
}
std::string Spine(const ClusterProfile& p, int i) {
  return StrCat("spine-", Pad(i / p.nodes_per_leaf / p.leaves_per_spine, 3));
}
std::string Leaf(const ClusterProfile& p, int i) {
  return StrCat("leaf-", Pad(i / p.nodes_per_leaf, 4));
}

/// The node's labels, sorted by key as core::Labels keeps them.
std::vector<std::pair<std::string, std::string>> NodeLabels(const ClusterProfile& p, int i) {
  const NodeShape s = ShapeOf(p, i);
  const std::string name = NodeName(p, i);
  std::vector<std::pair<std::string, std::string>> l;
  l.emplace_back("kubernetes.io/hostname", name);
  l.emplace_back("topology.kubernetes.io/zone", Zone(p, i));
  l.emplace_back("berth.io/spine", Spine(p, i));
  l.emplace_back("berth.io/leaf", Leaf(p, i));
  if (p.realistic_labels) {
    const std::string pool = StrCat("pool-", (i / 500) % 10);
    l.emplace_back("beta.kubernetes.io/arch", "amd64");
    l.emplace_back("beta.kubernetes.io/instance-type", s.instance_type);
    l.emplace_back("beta.kubernetes.io/os", "linux");
    l.emplace_back("cloud.google.com/gke-boot-disk", "pd-balanced");
    l.emplace_back("cloud.google.com/gke-container-runtime", "containerd");
    l.emplace_back("cloud.google.com/gke-nodepool", pool);
    l.emplace_back("cloud.google.com/gke-os-distribution", "cos");
    l.emplace_back("cloud.google.com/machine-family", s.machine_family);
    l.emplace_back("failure-domain.beta.kubernetes.io/region", "us-central1");
    l.emplace_back("failure-domain.beta.kubernetes.io/zone", Zone(p, i));
    l.emplace_back("kubernetes.io/arch", "amd64");
    l.emplace_back("kubernetes.io/os", "linux");
    l.emplace_back("node.kubernetes.io/instance-type", s.instance_type);
    l.emplace_back("topology.kubernetes.io/region", "us-central1");
    l.emplace_back("cloud.google.com/gke-max-pods-per-node", "110");
    l.emplace_back(s.gpu ? "cloud.google.com/gke-accelerator" : "cloud.google.com/gke-spot",
                   s.gpu ? "nvidia-tesla-a100" : "false");
  }
  std::sort(l.begin(), l.end());
  return l;
}

void WriteResources(JsonWriter& w, const NodeShape& s, bool allocatable) {
  w.BeginObject();
  w.Key("cpu").String(allocatable ? StrCat(s.cpu_alloc_milli, "m") : StrCat(s.cpu_cores));
  w.Key("ephemeral-storage").String(allocatable ? "90Gi" : "100Gi");
  w.Key("hugepages-1Gi").String("0");
  w.Key("hugepages-2Mi").String("0");
  w.Key("memory").String(StrCat(allocatable ? s.mem_alloc_ki : s.mem_cap_ki, "Ki"));
  if (s.gpu) w.Key("nvidia.com/gpu").String(StrCat(s.gpus));
  w.Key("pods").String("110");
  w.EndObject();
}

void WriteNode(JsonWriter& w, const ClusterProfile& p, int i, bool fat) {
  const NodeShape s = ShapeOf(p, i);
  const std::string name = NodeName(p, i);
  const std::string created = Rfc3339(kBaseUnixSeconds + i);
  w.BeginObject();
  w.Key("kind").String("Node");
  w.Key("apiVersion").String("v1");
  w.Key("metadata").BeginObject();
  w.Key("name").String(name);
  w.Key("uid").String(Uuid(static_cast<uint64_t>(i), 99));
  w.Key("resourceVersion").String(StrCat(1'000'000 + i * 13));
  w.Key("creationTimestamp").String(created);
  w.Key("labels").BeginObject();
  for (const auto& [k, v] : NodeLabels(p, i)) w.Key(k).String(v);
  w.EndObject();
  w.Key("annotations").BeginObject();
  w.Key("container.googleapis.com/instance_id").String(StrCat(SplitMix64(i) % 10'000'000'000'000'000ULL));
  w.Key("csi.volume.kubernetes.io/nodeid")
      .String(StrCat("{\"pd.csi.storage.gke.io\":\"projects/bench/zones/", Zone(p, i), "/instances/",
                     name, "\"}"));
  w.Key("node.alpha.kubernetes.io/ttl").String("0");
  w.Key("node.gke.io/last-applied-node-labels")
      .String(StrCat("cloud.google.com/gke-boot-disk=pd-balanced,cloud.google.com/gke-container-runtime="
                     "containerd,cloud.google.com/gke-nodepool=pool-", (i / 500) % 10,
                     ",cloud.google.com/gke-os-distribution=cos,cloud.google.com/machine-family=",
                     s.machine_family));
  w.Key("volumes.kubernetes.io/controller-managed-attach-detach").String("true");
  w.EndObject();
  w.EndObject();  // metadata
  w.Key("spec").BeginObject();
  w.Key("podCIDR").String(StrCat("10.", 64 + i / 256 % 64, ".", i % 256, ".0/24"));
  w.Key("podCIDRs").BeginArray().String(StrCat("10.", 64 + i / 256 % 64, ".", i % 256, ".0/24")).EndArray();
  w.Key("providerID").String(StrCat("gce://bench/", Zone(p, i), "/", name));
  w.EndObject();
  w.Key("status").BeginObject();
  w.Key("capacity");
  WriteResources(w, s, false);
  w.Key("allocatable");
  WriteResources(w, s, true);
  w.Key("conditions").BeginArray();
  struct Cond {
    const char* type;
    const char* status;
    const char* reason;
    const char* message;
  };
  static constexpr Cond kConds[] = {
      {"NetworkUnavailable", "False", "RouteCreated", "NodeController create implicit route"},
      {"MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
      {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
      {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
      {"Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"},
  };
  for (const Cond& c : kConds) {
    w.BeginObject();
    w.Key("type").String(c.type);
    w.Key("status").String(c.status);
    w.Key("lastHeartbeatTime").String(Rfc3339(kBaseUnixSeconds + 86400 + i));
    w.Key("lastTransitionTime").String(created);
    w.Key("reason").String(c.reason);
    w.Key("message").String(c.message);
    w.EndObject();
  }
  w.EndArray();
  w.Key("addresses").BeginArray();
  w.BeginObject().Key("type").String("InternalIP").Key("address").String(StrCat("10.128.", i / 256 % 256, ".", i % 256)).EndObject();
  w.BeginObject().Key("type").String("ExternalIP").Key("address").String(StrCat("34.", 100 + i / 65536 % 100, ".", i / 256 % 256, ".", i % 256)).EndObject();
  w.BeginObject().Key("type").String("Hostname").Key("address").String(name).EndObject();
  w.EndArray();
  w.Key("daemonEndpoints").BeginObject().Key("kubeletEndpoint").BeginObject().Key("Port").Int(10250).EndObject().EndObject();
  w.Key("nodeInfo").BeginObject();
  w.Key("machineID").String(Hex(SplitMix64(i * 3 + 1), 16) + Hex(SplitMix64(i * 3 + 2), 16));
  w.Key("systemUUID").String(Uuid(static_cast<uint64_t>(i), 7));
  w.Key("bootID").String(Uuid(static_cast<uint64_t>(i), 8));
  w.Key("kernelVersion").String("6.1.85+");
  w.Key("osImage").String("Container-Optimized OS from Google");
  w.Key("containerRuntimeVersion").String("containerd://1.7.15");
  w.Key("kubeletVersion").String("v1.29.6-gke.1254000");
  w.Key("kubeProxyVersion").String("v1.29.6-gke.1254000");
  w.Key("operatingSystem").String("linux");
  w.Key("architecture").String("amd64");
  w.EndObject();
  if (fat) {
    w.Key("images").BeginArray();
    for (int m = 0; m < 50; ++m) {
      const uint64_t h = SplitMix64(static_cast<uint64_t>(m) * 7919 + 3);
      const std::string repo = StrCat("us-docker.pkg.dev/bench-project/ml-images/component-", Pad(m, 2));
      w.BeginObject();
      w.Key("names").BeginArray();
      w.String(StrCat(repo, "@sha256:", Hex(h, 16), Hex(SplitMix64(h + 1), 16), Hex(SplitMix64(h + 2), 16),
                      Hex(SplitMix64(h + 3), 16)));
      w.String(StrCat(repo, ":v1.", m % 17, ".", m % 5));
      w.EndArray();
      w.Key("sizeBytes").Int(static_cast<int64_t>(20'000'000 + h % 2'000'000'000));
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();  // status
  w.EndObject();
}

void WriteRunningPod(JsonWriter& w, const ClusterProfile& p, int i, int k) {
  const PodShape s = PodShapeOf(p, i, k);
  const std::string name = PodName(i, k);
  w.BeginObject();
  w.Key("kind").String("Pod");
  w.Key("apiVersion").String("v1");
  w.Key("metadata").BeginObject();
  w.Key("name").String(name);
  w.Key("generateName").String(StrCat("train-", Pad(i, 5), "-worker-"));
  w.Key("namespace").String(PodNamespace(i));
  w.Key("uid").String(PodUid(i, k));
  w.Key("resourceVersion").String(StrCat(2'000'000 + i * 10 + k));
  w.Key("creationTimestamp").String(Rfc3339(kBaseUnixSeconds + 3600 + i));
  w.Key("labels").BeginObject();
  w.Key("app").String("trainer");
  w.Key("batch.kubernetes.io/job-name").String(StrCat("train-", Pad(i, 5)));
  w.Key("berth.io/queue").String(PodQueue(i));
  w.EndObject();
  w.Key("ownerReferences").BeginArray().BeginObject();
  w.Key("apiVersion").String("batch/v1");
  w.Key("kind").String("Job");
  w.Key("name").String(StrCat("train-", Pad(i, 5)));
  w.Key("uid").String(Uuid(static_cast<uint64_t>(i), 5));
  w.Key("controller").Bool(true);
  w.Key("blockOwnerDeletion").Bool(true);
  w.EndObject().EndArray();
  w.EndObject();  // metadata
  w.Key("spec").BeginObject();
  w.Key("containers").BeginArray().BeginObject();
  w.Key("name").String("main");
  w.Key("image").String("us-docker.pkg.dev/bench-project/ml-images/trainer:v3.2.1");
  w.Key("resources").BeginObject();
  if (s.gpus > 0) w.Key("limits").BeginObject().Key("nvidia.com/gpu").String(StrCat(s.gpus)).EndObject();
  w.Key("requests").BeginObject();
  w.Key("cpu").String(StrCat(s.cpu_milli, "m"));
  w.Key("memory").String(StrCat(s.mem_mi, "Mi"));
  if (s.gpus > 0) w.Key("nvidia.com/gpu").String(StrCat(s.gpus));
  w.EndObject();
  w.EndObject();  // resources
  w.Key("terminationMessagePath").String("/dev/termination-log");
  w.Key("imagePullPolicy").String("IfNotPresent");
  w.EndObject().EndArray();
  w.Key("restartPolicy").String("Never");
  w.Key("nodeName").String(NodeName(p, i));
  w.Key("schedulerName").String(PodScheduler(k));
  w.Key("priority").Int(0);
  w.EndObject();  // spec
  w.Key("status").BeginObject();
  w.Key("phase").String("Running");
  w.Key("hostIP").String(StrCat("10.128.", i / 256 % 256, ".", i % 256));
  w.Key("podIP").String(StrCat("10.", 64 + i / 256 % 64, ".", i % 256, ".", k + 2));
  w.Key("startTime").String(Rfc3339(kBaseUnixSeconds + 3600 + i));
  w.Key("qosClass").String("Burstable");
  w.EndObject();
  w.EndObject();
}

// managedFields of a pending Job pod, as the API server records them (kube-controller-manager).
constexpr std::string_view kManagedFields = R"([{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:batch.kubernetes.io/controller-uid":{},"f:batch.kubernetes.io/job-name":{},"f:berth.io/queue":{},"f:controller-uid":{},"f:job-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0b7c3e52-1f4a-4c1e-9d2b-6a1f0e8c7d31\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:args":{},"f:command":{},"f:env":{".":{},"k:{\"name\":\"MASTER_ADDR\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"MASTER_PORT\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"NCCL_DEBUG\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"WORLD_SIZE\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:tolerations":{}}}}])";

}  // namespace

int ClusterProfile::CandidateCount() const {
  return std::min(nodes, candidates > 0 ? candidates : DefaultSampleSize(nodes));
}

int DefaultSampleSize(int nodes) {
  if (nodes <= 100) return nodes;
  const int percent = std::max(5, 50 - nodes / 125);
  return std::max(100, static_cast<int>(int64_t{nodes} * percent / 100));
}

ClusterProfile Profile1k() {
  ClusterProfile p;
  p.name = "1k";
  p.nodes = 1000;
  return p;
}

ClusterProfile Profile5k() {
  ClusterProfile p;
  p.name = "5k";
  p.nodes = 5000;
  return p;
}

ClusterProfile Profile15k() {
  ClusterProfile p;
  p.name = "15k";
  p.nodes = 15000;
  return p;
}

std::string NodeName(const ClusterProfile& p, int i) {
  (void)p;
  const int pool = (i / 500) % 10;
  return StrCat("gke-bench-pool-", pool, "-", Hex(SplitMix64(static_cast<uint64_t>(pool) + 1000), 8),
                "-", Pad(i, 5));
}

bool IsGpuNode(const ClusterProfile& p, int i) { return p.gpu_every > 0 && i % p.gpu_every == 0; }

core::Node MakeNode(const ClusterProfile& p, int i) {
  const NodeShape s = ShapeOf(p, i);
  core::Node n;
  n.name = NodeName(p, i);
  for (auto& [k, v] : NodeLabels(p, i)) n.labels.Set(std::move(k), std::move(v));
  auto fill = [&](core::ResourceVector* r, bool alloc) {
    r->Set(core::kCpu, alloc ? s.cpu_alloc_milli : s.cpu_cores * 1000);
    r->Set(core::kMemory, (alloc ? s.mem_alloc_ki : s.mem_cap_ki) * 1024);
    r->Set(core::kEphemeralStorage, (alloc ? 90 : 100) * kGi);
    r->Set(core::kPods, 110);
    if (s.gpu) r->Set(core::kNvidiaGpu, s.gpus);
  };
  fill(&n.capacity, false);
  fill(&n.allocatable, true);
  n.creation = absl::FromUnixSeconds(kBaseUnixSeconds + i);
  return n;
}

core::Pod MakeRunningPod(const ClusterProfile& p, int i, int k) {
  const PodShape s = PodShapeOf(p, i, k);
  core::Pod pod;
  pod.uid = PodUid(i, k);
  pod.ns = PodNamespace(i);
  pod.name = PodName(i, k);
  pod.scheduler_name = PodScheduler(k);
  pod.node_name = NodeName(p, i);
  pod.phase = core::PodPhase::kRunning;
  pod.creation = absl::FromUnixSeconds(kBaseUnixSeconds + 3600 + i);
  pod.labels.Set("berth.io/queue", PodQueue(i));
  pod.request.Set(core::kCpu, s.cpu_milli);
  pod.request.Set(core::kMemory, s.mem_mi * kMi);
  pod.request.Set(core::kPods, 1);
  if (s.gpus > 0) pod.request.Set(core::kNvidiaGpu, s.gpus);
  return pod;
}

core::Pod MakeChurnPod(const ClusterProfile& p, int i, int64_t serial) {
  core::Pod pod;
  pod.uid = Uuid(static_cast<uint64_t>(serial) + 0x100000000ULL, 77);
  pod.ns = PodNamespace(i);
  pod.name = StrCat("churn-", Pad(serial, 7));
  pod.scheduler_name = "berth-scheduler";
  pod.node_name = NodeName(p, i);
  pod.phase = core::PodPhase::kRunning;
  pod.creation = absl::FromUnixSeconds(kBaseUnixSeconds + 7200);
  pod.labels.Set("berth.io/queue", PodQueue(i));
  pod.request.Set(core::kCpu, 100);
  pod.request.Set(core::kMemory, 128 * kMi);
  pod.request.Set(core::kPods, 1);
  return pod;
}

void AppendNodeEvents(const ClusterProfile& p, int begin, int end,
                      std::vector<core::ModelEvent>* out) {
  for (int i = begin; i < end; ++i) out->emplace_back(core::NodeUpsert{MakeNode(p, i)});
}

void AppendPodEvents(const ClusterProfile& p, int begin, int end,
                     std::vector<core::ModelEvent>* out) {
  for (int i = begin; i < end; ++i) {
    for (int k = 0; k < p.pods_per_node; ++k) {
      out->emplace_back(core::PodUpsert{MakeRunningPod(p, i, k)});
    }
  }
}

void AppendQueueEvents(std::vector<core::ModelEvent>* out) {
  for (int q = 0; q < kBenchQueues; ++q) {
    core::Queue queue;
    queue.name = PodQueue(q);
    queue.weight = 1 + q % 3;
    out->emplace_back(core::QueueUpsert{std::move(queue)});
  }
}

size_t LoadModel(const ClusterProfile& p, core::ClusterModel* model) {
  constexpr int kBatchNodes = 1000;
  std::vector<core::ModelEvent> batch;
  AppendQueueEvents(&batch);
  model->Apply(batch);
  size_t applied = batch.size();
  for (int b = 0; b < p.nodes; b += kBatchNodes) {
    batch.clear();
    AppendNodeEvents(p, b, std::min(p.nodes, b + kBatchNodes), &batch);
    model->Apply(batch);
    applied += batch.size();
  }
  for (int b = 0; b < p.nodes; b += kBatchNodes) {
    batch.clear();
    AppendPodEvents(p, b, std::min(p.nodes, b + kBatchNodes), &batch);
    model->Apply(batch);
    applied += batch.size();
  }
  return applied;
}

ClusterProfile GangCluster::Profile() const {
  ClusterProfile p;
  p.name = "gang";
  p.nodes = Nodes();
  p.pods_per_node = system_pods;
  p.gpu_every = 1;
  p.gpus_per_gpu_node = 8;
  p.nodes_per_leaf = nodes_per_leaf;
  p.leaves_per_spine = leaves_per_spine;
  p.zones = zones;
  return p;
}

int GangCluster::BusyGpus(int i) const {
  const uint64_t h = SplitMix64(static_cast<uint64_t>(i) ^ 0x6a09e667ULL);
  if ((h & 1) == 0) return 0;
  return 1 + static_cast<int>((h >> 8) % 7);
}

bool GangCluster::HasLoader(int i) const {
  const uint64_t h = SplitMix64(static_cast<uint64_t>(i) ^ 0x6a09e667ULL);
  const int busy = BusyGpus(i);
  return busy > 0 && busy <= 4 && (h >> 20) % 8 == 0;
}

std::vector<core::Pod> GangClusterPods(const GangCluster& c, int i) {
  const ClusterProfile p = c.Profile();
  std::vector<core::Pod> out;
  auto make = [&](int k, std::string_view kind, const char* scheduler, int64_t cpu_milli,
                  int64_t mem, int64_t gpus) {
    core::Pod pod;
    pod.uid = Uuid(static_cast<uint64_t>(i) + 2'000'003, static_cast<uint64_t>(k));
    pod.ns = PodNamespace(i);
    pod.name = StrCat(kind, "-", Pad(i, 5), "-", k);
    pod.scheduler_name = scheduler;
    pod.node_name = NodeName(p, i);
    pod.phase = core::PodPhase::kRunning;
    pod.creation = absl::FromUnixSeconds(kBaseUnixSeconds + 3600 + i);
    pod.labels.Set("berth.io/queue", PodQueue(i));
    pod.request.Set(core::kCpu, cpu_milli);
    pod.request.Set(core::kMemory, mem);
    pod.request.Set(core::kPods, 1);
    if (gpus > 0) pod.request.Set(core::kNvidiaGpu, gpus);
    out.push_back(std::move(pod));
  };
  int k = 0;
  for (int j = 0; j < c.system_pods; ++j) make(k++, "node-agent", "default-scheduler", 250, 512 * kMi, 0);
  for (int j = 0; j < c.BusyGpus(i); ++j) make(k++, "train", "berth-scheduler", 10'000, 80 * kGi, 1);
  if (c.HasLoader(i)) make(k++, "loader", "berth-scheduler", 40'000, 64 * kGi, 0);
  return out;
}

size_t LoadGangCluster(const GangCluster& c, core::ClusterModel* model) {
  const ClusterProfile p = c.Profile();
  std::vector<core::ModelEvent> events;
  AppendQueueEvents(&events);
  AppendNodeEvents(p, 0, p.nodes, &events);
  size_t applied = events.size();
  model->Apply(events);
  events.clear();
  for (int i = 0; i < p.nodes; ++i) {
    for (core::Pod& pod : GangClusterPods(c, i)) events.emplace_back(core::PodUpsert{std::move(pod)});
  }
  applied += events.size();
  model->Apply(events);
  return applied;
}

std::string NodeJson(const ClusterProfile& p, int i, bool fat) {
  std::string out;
  out.reserve(fat ? 16384 : 4096);
  JsonWriter w(&out);
  WriteNode(w, p, i, fat);
  return out;
}

std::string RunningPodJson(const ClusterProfile& p, int i, int k) {
  std::string out;
  out.reserve(1536);
  JsonWriter w(&out);
  WriteRunningPod(w, p, i, k);
  return out;
}

PendingPodSpec PendingPodSpecOf(PendingKind kind) {
  const bool fits = kind == PendingKind::kFits;
  PendingPodSpec s;
  s.name = fits ? "train-bench-fits-0" : "train-bench-big-0";
  s.generate_name = fits ? "train-bench-fits-" : "train-bench-big-";
  s.uid = fits ? "6f1d2c3b-4a59-4e68-b7a6-958473625140" : "7a2e3d4c-5b6a-4f79-a8b7-a69584736251";
  s.cpu = fits ? "4" : "40";
  s.memory = fits ? "16Gi" : "64Gi";
  s.memory_limit = fits ? "24Gi" : "96Gi";
  return s;
}

std::string PendingPodJson(PendingKind kind) { return PendingPodJson(PendingPodSpecOf(kind)); }

std::string PendingPodJson(const PendingPodSpec& spec) {
  const std::string& name = spec.name;
  const std::string& cpu = spec.cpu;
  const std::string& mem = spec.memory;
  const std::string& mem_limit = spec.memory_limit;
  const std::string gpus = spec.gpus > 0 ? StrCat(spec.gpus) : std::string();
  const std::string job_uid = "0b7c3e52-1f4a-4c1e-9d2b-6a1f0e8c7d31";

  std::string last_applied;
  {
    JsonWriter a(&last_applied);
    a.BeginObject();
    a.Key("apiVersion").String("v1").Key("kind").String("Pod");
    a.Key("metadata").BeginObject().Key("annotations").BeginObject().EndObject();
    a.Key("labels").BeginObject().Key("app").String("trainer").Key("berth.io/queue").String("q-1");
    if (!spec.pod_group.empty()) a.Key("scheduling.x-k8s.io/pod-group").String(spec.pod_group);
    a.EndObject();
    a.Key("name").String(name).Key("namespace").String(spec.ns).EndObject();
    a.Key("spec").BeginObject();
    a.Key("containers").BeginArray().BeginObject();
    a.Key("args").BeginArray().String("--config=/etc/train/config.yaml").String("--epochs=90").EndArray();
    a.Key("command").BeginArray().String("python3").String("-m").String("trainer.main").EndArray();
    a.Key("image").String("us-docker.pkg.dev/bench-project/ml-images/trainer:v3.2.1");
    a.Key("name").String("main");
    a.Key("resources").BeginObject();
    a.Key("limits").BeginObject().Key("memory").String(mem_limit);
    if (!gpus.empty()) a.Key("nvidia.com/gpu").String(gpus);
    a.EndObject();
    a.Key("requests").BeginObject().Key("cpu").String(cpu).Key("memory").String(mem);
    if (!gpus.empty()) a.Key("nvidia.com/gpu").String(gpus);
    a.EndObject();
    a.EndObject().EndObject().EndArray();
    a.Key("restartPolicy").String("Never").Key("schedulerName").String("berth-scheduler");
    a.EndObject().EndObject();
    last_applied += "\n";
  }

  std::string out;
  out.reserve(6000);
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("metadata").BeginObject();
  w.Key("name").String(name);
  w.Key("generateName").String(spec.generate_name);
  w.Key("namespace").String(spec.ns);
  w.Key("uid").String(spec.uid);
  w.Key("resourceVersion").String("98765432");
  w.Key("creationTimestamp").String(spec.creation);
  w.Key("labels").BeginObject();
  w.Key("app").String("trainer");
  w.Key("batch.kubernetes.io/controller-uid").String(job_uid);
  w.Key("batch.kubernetes.io/job-name").String("train-bench");
  w.Key("berth.io/queue").String("q-1");
  w.Key("controller-uid").String(job_uid);
  w.Key("job-name").String("train-bench");
  if (!spec.pod_group.empty()) w.Key("scheduling.x-k8s.io/pod-group").String(spec.pod_group);
  w.EndObject();
  w.Key("annotations").BeginObject();
  w.Key("kubectl.kubernetes.io/last-applied-configuration").String(last_applied);
  w.EndObject();
  w.Key("ownerReferences").BeginArray().BeginObject();
  w.Key("apiVersion").String("batch/v1").Key("kind").String("Job").Key("name").String("train-bench");
  w.Key("uid").String(job_uid).Key("controller").Bool(true).Key("blockOwnerDeletion").Bool(true);
  w.EndObject().EndArray();
  w.Key("managedFields").Raw(kManagedFields);
  w.EndObject();  // metadata
  w.Key("spec").BeginObject();
  w.Key("volumes").Raw(
      R"([{"name":"kube-api-access-7xk2p","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}])");
  w.Key("containers").BeginArray().BeginObject();
  w.Key("name").String("main");
  w.Key("image").String("us-docker.pkg.dev/bench-project/ml-images/trainer:v3.2.1");
  w.Key("command").BeginArray().String("python3").String("-m").String("trainer.main").EndArray();
  w.Key("args").BeginArray().String("--config=/etc/train/config.yaml").String("--epochs=90").EndArray();
  w.Key("env").BeginArray();
  w.BeginObject().Key("name").String("MASTER_ADDR").Key("value").String("train-bench-0.train-bench").EndObject();
  w.BeginObject().Key("name").String("MASTER_PORT").Key("value").String("29500").EndObject();
  w.BeginObject().Key("name").String("WORLD_SIZE").Key("value").String("64").EndObject();
  w.BeginObject().Key("name").String("NCCL_DEBUG").Key("value").String("WARN").EndObject();
  w.EndArray();
  w.Key("resources").BeginObject();
  w.Key("limits").BeginObject().Key("memory").String(mem_limit);
  if (!gpus.empty()) w.Key("nvidia.com/gpu").String(gpus);
  w.EndObject();
  w.Key("requests").BeginObject().Key("cpu").String(cpu).Key("memory").String(mem);
  if (!gpus.empty()) w.Key("nvidia.com/gpu").String(gpus);
  w.EndObject();
  w.EndObject();
  w.Key("volumeMounts").Raw(
      R"([{"name":"kube-api-access-7xk2p","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}])");
  w.Key("terminationMessagePath").String("/dev/termination-log");
  w.Key("terminationMessagePolicy").String("File");
  w.Key("imagePullPolicy").String("IfNotPresent");
  w.EndObject().EndArray();
  w.Key("restartPolicy").String("Never");
  w.Key("terminationGracePeriodSeconds").Int(30);
  w.Key("dnsPolicy").String("ClusterFirst");
  w.Key("serviceAccountName").String("default");
  w.Key("serviceAccount").String("default");
  w.Key("securityContext").BeginObject().EndObject();
  w.Key("schedulerName").String("berth-scheduler");
  w.Key("tolerations").Raw(
      R"([{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}])");
  w.Key("priority").Int(0);
  w.Key("enableServiceLinks").Bool(true);
  w.Key("preemptionPolicy").String("PreemptLowerPriority");
  w.EndObject();  // spec
  w.Key("status").BeginObject().Key("phase").String("Pending").Key("qosClass").String("Burstable").EndObject();
  w.EndObject();
  return out;
}

std::vector<int> CandidateIndices(const ClusterProfile& p, int count, uint64_t seed) {
  count = std::min(count, p.nodes);
  const int start = static_cast<int>(SplitMix64(seed) % static_cast<uint64_t>(p.nodes));
  int stride = 7;
  while (std::gcd(stride, p.nodes) != 1) ++stride;
  std::vector<int> out;
  out.reserve(static_cast<size_t>(count));
  for (int j = 0; j < count; ++j) {
    out.push_back(static_cast<int>((start + int64_t{j} * stride) % p.nodes));
  }
  return out;
}

std::string ArgsNamesJson(const ClusterProfile& p, const std::string& pod_json,
                          const std::vector<int>& candidates) {
  std::string out;
  out.reserve(pod_json.size() + 64 + candidates.size() * 40);
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("Pod").Raw(pod_json);
  w.Key("Nodes").Null();
  w.Key("NodeNames").BeginArray();
  for (int i : candidates) w.String(NodeName(p, i));
  w.EndArray();
  w.EndObject();
  return out;
}

std::string ArgsNodesJson(const ClusterProfile& p, const std::string& pod_json,
                          const std::vector<int>& candidates, bool fat) {
  std::string out;
  out.reserve(pod_json.size() + 64 + candidates.size() * (fat ? 15000 : 4000));
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("Pod").Raw(pod_json);
  w.Key("Nodes").BeginObject();
  w.Key("metadata").BeginObject().EndObject();
  w.Key("items").BeginArray();
  for (int i : candidates) WriteNode(w, p, i, fat);
  w.EndArray();
  w.EndObject();
  w.Key("NodeNames").Null();
  w.EndObject();
  return out;
}

std::string ClusterListJson(const ClusterProfile& p) {
  std::string out;
  out.reserve(static_cast<size_t>(p.nodes) * 2600 + static_cast<size_t>(p.PodCount()) * 1300);
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("apiVersion").String("v1");
  w.Key("kind").String("List");
  w.Key("metadata").BeginObject().Key("resourceVersion").String("").EndObject();
  w.Key("items").BeginArray();
  for (int q = 0; q < kBenchQueues; ++q) {
    w.BeginObject();
    w.Key("apiVersion").String("berth.io/v1alpha1").Key("kind").String("Queue");
    w.Key("metadata").BeginObject().Key("name").String(PodQueue(q)).EndObject();
    w.Key("spec").BeginObject().Key("weight").Int(1 + q % 3).EndObject();
    w.EndObject();
  }
  for (int i = 0; i < p.nodes; ++i) WriteNode(w, p, i, /*fat=*/false);
  for (int i = 0; i < p.nodes; ++i) {
    for (int k = 0; k < p.pods_per_node; ++k) WriteRunningPod(w, p, i, k);
  }
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace berth::bench
