#include "policy/fragmentation/fragmentation.h"

#include <vector>

#include "catch2/catch.hpp"

namespace berth::policy {
namespace {

core::ResourceVector Vec(int64_t cpu_milli, int64_t memory, int64_t gpus, int64_t pods = 1) {
  core::ResourceVector v;
  v.Set(core::kCpu, cpu_milli);
  v.Set(core::kMemory, memory);
  v.Set(core::kPods, pods);
  v.Set(core::kNvidiaGpu, gpus);
  return v;
}

constexpr int64_t kGi = int64_t{1} << 30;

NodeRoom Node(int64_t free_gpus, int64_t free_cpu = 64000, int64_t free_mem = 512 * kGi, bool schedulable = true) {
  return NodeRoom{.allocatable = Vec(64000, 512 * kGi, 8, 110),
                  .free = Vec(free_cpu, free_mem, free_gpus, 100),
                  .schedulable = schedulable};
}

TEST_CASE("fragmentation: figures of a hand-built set of GPU nodes") {
  const core::ResourceVector two_gpus = Vec(8000, 64 * kGi, 2);
  // 2, 3, 8 and 1 GPUs free; the third node is whole; the last cannot take a 2-GPU pod.
  const std::vector<NodeRoom> nodes = {Node(2), Node(3), Node(8), Node(1)};
  const Fragmentation f = MeasureFragmentation(nodes, two_gpus);
  CHECK(f.resource == core::kNvidiaGpu);
  CHECK(f.nodes == 4);
  CHECK(f.whole_nodes == 1);
  CHECK(f.free == 14);
  CHECK(f.fits == 1 + 1 + 4 + 0);
  CHECK(f.stranded == 1);
  CHECK(f.index == Approx(1.0 - 12.0 / 14.0));
}

TEST_CASE("fragmentation: every resource of the request limits what fits; unschedulable nodes do not count") {
  const core::ResourceVector two_gpus = Vec(8000, 64 * kGi, 2);
  // 8 GPUs free but only 4 cpu: not one pod fits, so its GPUs are stranded.
  const std::vector<NodeRoom> nodes = {Node(8, 4000), Node(8, 64000, 100 * kGi), Node(8, 64000, 512 * kGi, false)};
  const Fragmentation f = MeasureFragmentation(nodes, two_gpus);
  CHECK(f.nodes == 2);
  CHECK(f.free == 16);
  CHECK(f.fits == 0 + 1);  // 100Gi of memory takes one 64Gi pod
  CHECK(f.stranded == 8);
  CHECK(f.whole_nodes == 2);
  CHECK(f.index == Approx(1.0 - 2.0 / 16.0));
}

TEST_CASE("fragmentation: nothing free is no fragmentation; CPU shapes count CPU") {
  CHECK(MeasureFragmentation(std::vector<NodeRoom>{Node(0), Node(0)}, Vec(8000, 64 * kGi, 2)).index == 0);
  const core::ResourceVector cpu_pod = Vec(3000, kGi, 0);
  const Fragmentation f = MeasureFragmentation(std::vector<NodeRoom>{Node(0, 4000), Node(0, 2000)}, cpu_pod);
  CHECK(f.resource == core::kCpu);
  CHECK(f.free == 6000);
  CHECK(f.fits == 1);
  CHECK(f.stranded == 2000);
  CHECK(f.index == Approx(0.5));
}

TEST_CASE("fragmentation: the most common request prefers GPU requests, then more GPUs on a tie") {
  const core::ResourceVector a = Vec(8000, 64 * kGi, 2), b = Vec(4000, 32 * kGi, 1), cpu = Vec(1000, kGi, 0);
  CHECK(MostCommonRequest(std::vector<core::ResourceVector>{a, b, b, cpu, cpu, cpu}) == b);
  CHECK(MostCommonRequest(std::vector<core::ResourceVector>{a, b}) == a);  // a tie: more GPUs
  CHECK(MostCommonRequest(std::vector<core::ResourceVector>{cpu, cpu, Vec(2000, kGi, 0)}) == cpu);
  CHECK_FALSE(MostCommonRequest({}).has_value());
  CHECK_FALSE(MostCommonRequest(std::vector<core::ResourceVector>{core::ResourceVector()}).has_value());
  CHECK(DefaultRequest(true) == Vec(0, 0, 1));
  CHECK(DefaultRequest(false) == Vec(1000, 0, 0));
}

}  // namespace
}  // namespace berth::policy
