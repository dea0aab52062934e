#include "policy/fragmentation/fragmentation.h"

#include <algorithm>
#include <map>

#include "core/strings.h"

namespace berth::policy {
namespace {

// How many pods of `request` fit in `free` (every resource it asks for); INT64_MAX when it
// asks for nothing.
int64_t PodsThatFit(const core::ResourceVector& free, const core::ResourceVector& request) {
  int64_t n = INT64_MAX;
  for (size_t i = 0; i < request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    const int64_t want = request.Get(id);
    if (want <= 0) continue;
    n = std::min(n, std::max<int64_t>(0, free.Get(id)) / want);
  }
  return n;
}

}  // namespace

Fragmentation MeasureFragmentation(std::span<const NodeRoom> nodes, const core::ResourceVector& request) {
  Fragmentation f;
  f.request = request;
  f.resource = request.Get(core::kNvidiaGpu) > 0 ? core::kNvidiaGpu : core::kCpu;
  const int64_t per_pod = request.Get(f.resource);
  for (const NodeRoom& n : nodes) {
    if (!n.schedulable) continue;
    ++f.nodes;
    const int64_t alloc = n.allocatable.Get(f.resource);
    const int64_t free = std::clamp<int64_t>(n.free.Get(f.resource), 0, std::max<int64_t>(alloc, 0));
    f.free += free;
    if (alloc > 0 && free == alloc) ++f.whole_nodes;
    const int64_t fit = PodsThatFit(n.free, request);
    if (fit == INT64_MAX) continue;  // a request of nothing: no figure to count
    f.fits += fit;
    if (fit == 0) f.stranded += free;
  }
  if (f.free > 0 && per_pod > 0) {
    const double usable = static_cast<double>(f.fits) * static_cast<double>(per_pod);
    f.index = std::clamp(1.0 - usable / static_cast<double>(f.free), 0.0, 1.0);
  }
  return f;
}

Fragmentation MeasureFragmentation(const core::ClusterState& state, std::span<const core::NodeSlot> nodes,
                                   const core::ResourceVector& request) {
  std::vector<NodeRoom> rooms;
  rooms.reserve(nodes.size());
  for (core::NodeSlot slot : nodes) {
    const core::NodeState& n = state.node(slot);
    if (!n.present) continue;
    rooms.push_back(NodeRoom{.allocatable = n.node.allocatable, .free = n.Free(), .schedulable = !n.node.unschedulable});
  }
  return MeasureFragmentation(rooms, request);
}

core::ResourceVector DefaultRequest(bool gpu_nodes) {
  core::ResourceVector out;
  out.Set(gpu_nodes ? core::kNvidiaGpu : core::kCpu, gpu_nodes ? 1 : 1000);
  out.Set(core::kPods, 1);
  return out;
}

std::optional<core::ResourceVector> MostCommonRequest(std::span<const core::ResourceVector> requests) {
  // Keyed by the vector's entries, so equal requests count together and the order is stable.
  std::map<std::vector<int64_t>, int64_t> counts;
  const bool any_gpu = std::any_of(requests.begin(), requests.end(),
                                   [](const core::ResourceVector& r) { return r.Get(core::kNvidiaGpu) > 0; });
  for (const core::ResourceVector& r : requests) {
    if (any_gpu && r.Get(core::kNvidiaGpu) <= 0) continue;
    std::vector<int64_t> key(r.size());
    for (size_t i = 0; i < r.size(); ++i) key[i] = r.Get(static_cast<core::ResourceId>(i));
    while (!key.empty() && key.back() == 0) key.pop_back();
    if (key.empty()) continue;
    ++counts[key];
  }
  const std::vector<int64_t>* best = nullptr;
  int64_t best_count = 0;
  auto gpus = [](const std::vector<int64_t>& k) { return k.size() > core::kNvidiaGpu ? k[core::kNvidiaGpu] : 0; };
  for (const auto& [key, count] : counts) {
    // Map order visits smaller vectors first, so a later one wins only when strictly better.
    if (best == nullptr || count > best_count || (count == best_count && gpus(key) > gpus(*best))) {
      best = &key;
      best_count = count;
    }
  }
  if (best == nullptr) return std::nullopt;
  core::ResourceVector out;
  for (size_t i = 0; i < best->size(); ++i) out.Set(static_cast<core::ResourceId>(i), (*best)[i]);
  return out;
}

FragmentationReport MeasureFragmentation(const core::ClusterState& state, const PoolMap& pools,
                                         const Topology& topology, std::string_view scheduler_name) {
  std::vector<std::vector<core::ResourceVector>> by_pool(pools.pools().size());
  std::vector<core::ResourceVector> all;
  state.ForEachPod([&](core::PodSlot, const core::PodState& p) {
    if (p.pod.scheduler_name != scheduler_name || core::IsTerminal(p.pod.phase) || p.pod.terminating) return;
    all.push_back(p.pod.request);
    if (std::optional<PoolId> home = pools.Find(HomePoolName(p.pod))) by_pool[*home].push_back(p.pod.request);
  });
  auto has_gpus = [&](const std::vector<core::NodeSlot>& nodes) {
    return std::any_of(nodes.begin(), nodes.end(), [&](core::NodeSlot s) {
      return state.node(s).node.allocatable.Get(core::kNvidiaGpu) > 0;
    });
  };
  const std::optional<core::ResourceVector> everyone = MostCommonRequest(all);
  FragmentationReport out;
  for (size_t id = 0; id < pools.pools().size(); ++id) {
    const PoolMap::Entry& pool = pools.pools()[id];
    const core::ResourceVector request =
        MostCommonRequest(by_pool[id]).value_or(everyone.value_or(DefaultRequest(has_gpus(pool.nodes))));
    out.pools.push_back({.level = "pool", .name = pool.name, .figures = MeasureFragmentation(state, pool.nodes, request)});
  }
  const core::ResourceVector common =
      everyone.value_or(DefaultRequest(has_gpus(topology.domain(Topology::kRoot).nodes)));
  for (int depth = 1; depth <= topology.levels(); ++depth) {
    for (Topology::DomainId d : topology.at_depth(depth)) {
      const Topology::Domain& domain = topology.domain(d);
      out.domains.push_back({.level = topology.level_names()[static_cast<size_t>(depth - 1)],
                             .name = domain.path,
                             .depth = depth,
                             .figures = MeasureFragmentation(state, domain.nodes, common)});
    }
  }
  return out;
}

std::string DescribeRequest(const core::ResourceNames& names, const core::ResourceVector& request) {
  std::string out;
  for (size_t i = 0; i < request.size(); ++i) {
    const auto id = static_cast<core::ResourceId>(i);
    if (id == core::kPods || request.Get(id) == 0) continue;
    StrAppend(&out, out.empty() ? "" : ", ", core::FormatAmount(names, id, request.Get(id)), " ", names.Name(id));
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace berth::policy
