// End-to-end scenarios of the foundation: resource fit on berth's own accounting, binds seen by
// the next filter, capacity of other schedulers' pods, finished pods, bin packing, preemption.

#include <catch2/catch.hpp>

#include "tests/testing/scenario.h"

namespace berth::testing {
namespace {

std::vector<nlohmann::json> TwoGpuNodes() {
  return {MakeNode("gpu-a").Cpu("16").Memory("64Gi").Gpu(4).Obj(),
          MakeNode("gpu-b").Cpu("8").Memory("32Gi").Gpu(2).Obj(),
          MakeNode("cpu-a").Cpu("32").Memory("128Gi").Obj()};
}

TEST_CASE("a pod too big for a node is rejected there with a reason, and fits elsewhere") {
  RunScenario({.name = "too big",
               .objects = TwoGpuNodes(),
               .steps = {FilterStep{
                   .pod = MakePod("train").Cpu("4").Memory("8Gi").Gpu(3),
                   .nodes = {"gpu-a", "gpu-b", "cpu-a"},
                   .expect = {{"gpu-a", Expect::kFit, ""},
                              {"gpu-b", Expect::kUnresolvable, "nvidia.com/gpu"},
                              {"cpu-a", Expect::kUnresolvable, "nvidia.com/gpu"}}}}});
}

TEST_CASE("after a bind, the next filter sees the node's capacity reduced") {
  MakePod first = MakePod("first").Cpu("2").Gpu(3);
  MakePod second = MakePod("second").Cpu("2").Gpu(2);
  RunScenario({.name = "bind then filter",
               .objects = TwoGpuNodes(),
               .steps = {
                   // berth learns the pod from the filter request (standalone mode).
                   FilterStep{.pod = first, .nodes = {"gpu-a"}, .expect = {{"gpu-a", Expect::kFit, ""}}},
                   BindStep{.pod = first, .node = "gpu-a"},
                   FreeStep{.node = "gpu-a", .resource = "nvidia.com/gpu", .free = "1"},
                   FilterStep{.pod = second,
                              .nodes = {"gpu-a", "gpu-b"},
                              .expect = {{"gpu-a", Expect::kFailed, "insufficient nvidia.com/gpu"},
                                         {"gpu-b", Expect::kFit, ""}}},
                   // The first pod finishes: its GPUs are free again.
                   EventsStep{Event("MODIFIED", MakePod("first").Cpu("2").Gpu(3).Node("gpu-a")
                                                    .Phase("Succeeded").Obj())},
                   FreeStep{.node = "gpu-a", .resource = "nvidia.com/gpu", .free = "4"},
                   FilterStep{.pod = second, .nodes = {"gpu-a"}, .expect = {{"gpu-a", Expect::kFit, ""}}},
               }});
}

TEST_CASE("a bind that no longer fits is refused and changes nothing") {
  MakePod a = MakePod("a").Gpu(2);
  MakePod b = MakePod("b").Gpu(1);
  RunScenario({.name = "racing binds",
               .objects = {MakeNode("gpu-b").Cpu("8").Memory("32Gi").Gpu(2).Obj(),
                           MakeNode("gpu-a").Cpu("8").Memory("32Gi").Gpu(2).Obj()},
               .steps = {
                   FilterStep{.pod = a, .nodes = {"gpu-b"}, .expect = {{"gpu-b", Expect::kFit, ""}}},
                   FilterStep{.pod = b, .nodes = {"gpu-b"}, .expect = {{"gpu-b", Expect::kFit, ""}}},
                   BindStep{.pod = a, .node = "gpu-b"},
                   BindStep{.pod = b, .node = "gpu-b", .error_contains = "insufficient nvidia.com/gpu"},
                   FreeStep{.node = "gpu-b", .resource = "nvidia.com/gpu", .free = "0"},
                   // Binding the same pod to the same node again is harmless.
                   BindStep{.pod = a, .node = "gpu-b"},
                   BindStep{.pod = a, .node = "gpu-a", .error_contains = "already bound to node gpu-b"},
               }});
}

TEST_CASE("pods of other schedulers count as used capacity, pending and finished pods do not") {
  RunScenario({.name = "other schedulers",
               .objects = {MakeNode("n1").Cpu("8").Memory("16Gi").Obj(),
                           MakePod("web").Scheduler("default-scheduler").Cpu("6").Node("n1")
                               .Phase("Running").Obj(),
                           MakePod("waiting").Cpu("7").Obj(),
                           MakePod("done").Cpu("7").Node("n1").Phase("Failed").Obj()},
               // (small is asked first: a pod that waits for room keeps it from later ones.)
               .steps = {FreeStep{.node = "n1", .resource = "cpu", .free = "2"},
                         FilterStep{.pod = MakePod("small").Cpu("1500m"),
                                    .nodes = {"n1"},
                                    .expect = {{"n1", Expect::kFit, ""}}},
                         FilterStep{.pod = MakePod("batch").Cpu("3"),
                                    .nodes = {"n1"},
                                    .expect = {{"n1", Expect::kFailed, "insufficient cpu"}}}}});
}

TEST_CASE("init containers, sidecars and overhead are part of the request") {
  // Regular 1 cpu + sidecar 1 cpu = 2; the init container needs 3 + the sidecar started
  // before it? No: it runs before the sidecar, so init max = 3; effective = max(2, 3) = 3,
  // plus 500m overhead = 3500m.
  MakePod pod = MakePod("p").Cpu("1").InitContainer("setup", "cpu", "3")
                    .InitContainer("proxy", "cpu", "1", /*sidecar=*/true).Overhead("cpu", "500m");
  RunScenario({.name = "effective request",
               .objects = {MakeNode("small").Cpu("3").Memory("8Gi").Obj(),
                           MakeNode("big").Cpu("4").Memory("8Gi").Obj()},
               .steps = {FilterStep{.pod = pod,
                                    .nodes = {"small", "big"},
                                    .expect = {{"small", Expect::kUnresolvable, "cpu"},
                                               {"big", Expect::kFit, ""}}},
                         BindStep{.pod = pod, .node = "big"},
                         FreeStep{.node = "big", .resource = "cpu", .free = "500m"}}});
}

TEST_CASE("unknown nodes are rejected as unknown, and full Node objects teach standalone berth") {
  RunScenario({.name = "unknown nodes",
               .objects = {MakeNode("known").Cpu("4").Obj()},
               .steps = {FilterStep{.pod = MakePod("p").Cpu("1"),
                                    .nodes = {"known", "ghost"},
                                    .expect = {{"known", Expect::kFit, ""},
                                               {"ghost", Expect::kFailed, "unknown node"}}},
                         FilterStep{.pod = MakePod("q"),
                                    .nodes = {"ghost"},
                                    .expect = {{"ghost", Expect::kFit, ""}},
                                    .full_nodes = true}}});
}

TEST_CASE("bin packing prefers the node the pod fills best, and CPU pods avoid GPU nodes") {
  RunScenario({.name = "binpack",
               .objects = {MakeNode("half-full").Cpu("16").Memory("64Gi").Obj(),
                           MakeNode("empty").Cpu("16").Memory("64Gi").Obj(),
                           MakeNode("gpu").Cpu("16").Memory("64Gi").Gpu(8).Obj(),
                           MakePod("resident").Scheduler("default-scheduler").Cpu("8")
                               .Memory("32Gi").Node("half-full").Phase("Running").Obj()},
               .steps = {PrioritizeStep{.pod = MakePod("cpu-job").Cpu("8").Memory("32Gi"),
                                        .nodes = {"half-full", "empty", "gpu"},
                                        .ranking = {"half-full", "empty", "gpu"},
                                        // binpack, then the mean with gpu-affinity (10 on
                                        // nodes without GPUs, 0 on GPU nodes for this pod):
                                        // half-full: cpu 16/16, memory 64/64 -> 10 -> 10.
                                        // empty: 8/16 and 32/64 -> 5 -> 7.5 -> 8.
                                        // gpu: (1*0.5 + 1*0.5 + 4*0) / 6 -> 1.67 -> 2 -> 1.
                                        .exact = {{"half-full", 10}, {"empty", 8}, {"gpu", 1}}}}});
}

TEST_CASE("preempt keeps victims that make room on berth's accounting and drops the rest") {
  std::vector<nlohmann::json> objects = {
      MakeNode("n1").Cpu("4").Memory("8Gi").Obj(),
      MakeNode("n2").Cpu("4").Memory("8Gi").Obj(),
      MakePod("low-1").Cpu("3").Priority(10).Node("n1").Phase("Running").Obj(),
      MakePod("low-2").Cpu("1").Priority(20).Node("n2").Phase("Running").Obj(),
      // On n2 a pod of another scheduler holds 3 cpu that kube-scheduler did not propose.
      MakePod("other").Scheduler("default-scheduler").Cpu("3").Priority(1000).Node("n2")
          .Phase("Running").Obj()};
  RunScenario({.name = "preempt review",
               .objects = objects,
               .steps = {PreemptStep{.pod = MakePod("urgent").Cpu("3").Priority(100),
                                     .proposal = {{"n1", {"uid-low-1"}},
                                                  {"n2", {"uid-low-2"}},
                                                  {"ghost", {"uid-x"}}},
                                     .expect = {{"n1", {"uid-low-1"}}}}}});
}

}  // namespace
}  // namespace berth::testing
