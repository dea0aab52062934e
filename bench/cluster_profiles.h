#pragma once

/// Synthetic clusters for berth_bench: small profile structs expanded into core objects (fast,
/// for loading the model as events) or Kubernetes JSON (Node/Pod objects, List documents and
/// ExtenderArgs bodies shaped like what kube-scheduler and the API server send).
///
/// Everything is deterministic: the same profile always yields the same objects and bytes.

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"

namespace berth::bench {

/// The shape of a synthetic cluster.
struct ClusterProfile {
  std::string name = "1k";
  int nodes = 1000;
  /// Running pods bound to every node.
  int pods_per_node = 10;
  /// Candidate nodes per filter/prioritize call; 0 = kube-scheduler's default sample for `nodes`.
  int candidates = 0;
  /// Every `gpu_every`-th node is a GPU node (a2-highgpu-8g-like: 96 cpu, 680Gi, 8 GPUs).
  int gpu_every = 8;
  int gpus_per_gpu_node = 8;
  /// Fabric: nodes per leaf, leaves per spine; spines are spread over `zones` zones.
  int nodes_per_leaf = 16;
  int leaves_per_spine = 8;
  int zones = 3;
  /// Node labels: 20 (a GKE-like node: kubernetes.io/*, cloud provider, topology) or, when
  /// false, only hostname and the three topology levels.
  bool realistic_labels = true;

  int CandidateCount() const;
  int PodCount() const { return nodes * pods_per_node; }
};

/// kube-scheduler's default number of nodes to find feasible before scoring
/// (`numFeasibleNodesToFind`, percentageOfNodesToScore unset): max(100, N * max(5, 50 - N/125) %).
int DefaultSampleSize(int nodes);

/// 1,000 nodes / 10,000 pods, 420 candidates.
ClusterProfile Profile1k();
/// 5,000 nodes / 50,000 pods, 500 candidates.
ClusterProfile Profile5k();
/// 15,000 nodes / 150,000 pods, 750 candidates (the model-size target).
ClusterProfile Profile15k();

/// Name of node `i` ("gke-bench-pool-2-5f3a9c1e-00042", 31 characters).
std::string NodeName(const ClusterProfile& p, int i);
bool IsGpuNode(const ClusterProfile& p, int i);

/// Node `i` as berth keeps it (what DecodeNode would produce from NodeJson).
core::Node MakeNode(const ClusterProfile& p, int i);
/// Running pod `k` of node `i` as berth keeps it (what DecodePod would produce from
/// RunningPodJson). Requests: a share of the node that depends on the node's load class, so
/// some nodes are nearly empty and some nearly full; pods on GPU nodes take 1 GPU each up to a
/// per-node GPU load.
core::Pod MakeRunningPod(const ClusterProfile& p, int i, int k);
/// A fresh pod bound to node `i` that none of the generated pods collides with (for churn).
core::Pod MakeChurnPod(const ClusterProfile& p, int i, int64_t serial);

/// Appends NodeUpsert events for nodes [begin, end).
void AppendNodeEvents(const ClusterProfile& p, int begin, int end,
                      std::vector<core::ModelEvent>* out);
/// Appends PodUpsert events for the running pods of nodes [begin, end).
void AppendPodEvents(const ClusterProfile& p, int begin, int end,
                     std::vector<core::ModelEvent>* out);
/// Applies the whole cluster to `model` in batches; \return the number of events applied.
size_t LoadModel(const ClusterProfile& p, core::ClusterModel* model);

/// v1.Node JSON of node `i`. `fat`: the full object kube-scheduler sends with
/// nodeCacheCapable false (~14 KB: 20 labels, 5 annotations, 5 conditions, addresses,
/// nodeInfo, 50 container images); otherwise a lean object (~2.5 KB, no images).
std::string NodeJson(const ClusterProfile& p, int i, bool fat);
/// v1.Pod JSON of running pod `k` on node `i` (~1.3 KB: owner, labels, one container with
/// requests and limits, status Running).
std::string RunningPodJson(const ClusterProfile& p, int i, int k);

/// The pending pods the verbs are asked about.
enum class PendingKind {
  kFits,    ///< cpu 4, memory 16Gi: every generated node has room
  kRejects  ///< cpu 40, memory 64Gi: 32-core nodes are too small, busy nodes are short of cpu
};
/// v1.Pod JSON of a pending pod as kube-scheduler sends it in ExtenderArgs (~4 KB: managedFields,
/// a last-applied-configuration annotation, projected service-account volume, tolerations).
std::string PendingPodJson(PendingKind kind);

/// What varies between pending pods of the shape PendingPodJson writes.
struct PendingPodSpec {
  std::string name;
  std::string generate_name;
  std::string ns = "team-01";
  std::string uid;
  std::string creation = "2026-01-02T03:04:05Z";
  /// Quantities as written in the pod spec ("4", "16Gi").
  std::string cpu;
  std::string memory;
  std::string memory_limit;
  /// nvidia.com/gpu in requests and limits when > 0.
  int gpus = 0;
  /// The label scheduling.x-k8s.io/pod-group when not empty.
  std::string pod_group;
};
/// The spec of PendingPodJson(kind).
PendingPodSpec PendingPodSpecOf(PendingKind kind);
/// A pending pod of the same shape as PendingPodJson(kind) (same size give or take the names).
std::string PendingPodJson(const PendingPodSpec& spec);

// ---- the gang benchmark's cluster (docs/performance.md, "Gang admission (issue 5)") ------------

/// A GPU cluster on a three-level fabric: `zones` x `spines_per_zone` x `leaves_per_spine` x
/// `nodes_per_leaf` a2-highgpu-8g-like nodes (96 cpu, 680Gi, 8 GPUs, 20 labels as
/// MakeNode writes them). Background load: every node runs `system_pods` small pods
/// (250m, 512Mi); about half the nodes also run 1-7 one-GPU training pods (10 cpu, 80Gi
/// each), and one in eight of those a CPU-only data loader (40 cpu, 64Gi), so free room varies
/// from node to node and the GPU or the CPU may be what runs out.
struct GangCluster {
  int zones = 4;
  int spines_per_zone = 5;
  int leaves_per_spine = 10;
  int nodes_per_leaf = 25;
  int system_pods = 2;

  int Nodes() const { return zones * spines_per_zone * leaves_per_spine * nodes_per_leaf; }
  /// The profile whose MakeNode / NodeName / CandidateIndices / ArgsNamesJson give this
  /// cluster's nodes and requests (every node a GPU node; spine s in zone s % zones).
  ClusterProfile Profile() const;
  /// GPUs the background pods of node `i` take (0 for an idle node).
  int BusyGpus(int i) const;
  /// Whether node `i` runs the CPU-only data loader.
  bool HasLoader(int i) const;
};

/// The background pods of node `i` of `c`, bound and Running (not berth's).
std::vector<core::Pod> GangClusterPods(const GangCluster& c, int i);
/// Applies the nodes and background pods of `c` to `model`; \return the number of events.
size_t LoadGangCluster(const GangCluster& c, core::ClusterModel* model);

/// The candidate node indices of one call: `count` distinct nodes from a deterministic pseudo-
/// random offset, stepping through the cluster the way kube-scheduler's rotating search does.
std::vector<int> CandidateIndices(const ClusterProfile& p, int count, uint64_t seed);

/// ExtenderArgs with `NodeNames` (nodeCacheCapable: true), compact JSON.
std::string ArgsNamesJson(const ClusterProfile& p, const std::string& pod_json,
                          const std::vector<int>& candidates);
/// ExtenderArgs with full `Nodes` (nodeCacheCapable: false), compact JSON.
std::string ArgsNodesJson(const ClusterProfile& p, const std::string& pod_json,
                          const std::vector<int>& candidates, bool fat);

/// The Queue objects of the profiles (q-0 .. q-6, the queues their pods name): LoadModel and
/// LoadGangCluster apply them, ClusterListJson lists them first.
inline constexpr int kBenchQueues = 7;

/// A Kubernetes `List` of every node (lean) and every running pod of the profile.
std::string ClusterListJson(const ClusterProfile& p);

}  // namespace berth::bench
