// Exact accounting, as a property: whatever sequence of pod adds, modifies (requests and node
// change), binds and deletes the model is given, including amounts at the edge of the int64
// range, a change whose totals would not fit is refused and changes nothing, every node's
// totals are always exactly the sum of what it holds, and once every pod is gone every node is
// back to its original totals.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "core/resources.h"
#include "core/strings.h"
#include "tests/testing/core_builders.h"

namespace berth::core {
namespace {

using testing::kGi;
using testing::kInt64Max;

__extension__ typedef __int128 Int128;

constexpr int64_t kEi = int64_t{1} << 60;
constexpr ResourceId kResources[] = {kCpu, kMemory, kNvidiaGpu, kPods};

// What the test expects of one pod the model accepted.
struct Expected {
  std::string node;  // empty: not placed
  PodPhase phase = PodPhase::kPending;
  ResourceVector request;
  bool counted() const { return !node.empty() && !IsTerminal(phase); }
};

// A bind in flight, as the test expects it.
struct ExpectedBind {
  std::string node;
  ResourceVector request;
};

class Property {
 public:
  explicit Property(uint64_t seed) : rng_(seed) {}

  // Amounts near the edges of the range as often as ordinary ones.
  int64_t Amount() {
    static constexpr int64_t kEdges[] = {0,       1,           1000,         kGi,
                                         kEi,     7 * kEi,     kInt64Max / 3,     kInt64Max / 2,
                                         kInt64Max / 2 + 1, kInt64Max - 1, kInt64Max};
    if (Pick(3) == 0) return std::uniform_int_distribution<int64_t>(0, kInt64Max)(rng_);
    return kEdges[Pick(std::size(kEdges))];
  }
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

Node MakeNode(const std::string& name, int64_t cpu, int64_t memory, int64_t gpus) {
  Node n;
  n.name = name;
  n.allocatable.Set(kCpu, cpu);
  n.allocatable.Set(kMemory, memory);
  n.allocatable.Set(kNvidiaGpu, gpus);
  n.allocatable.Set(kPods, 110);
  n.capacity = n.allocatable;
  return n;
}

// The exact (128-bit) total the test expects on `node` for resource `id`, leaving out `skip_uid`.
Int128 ExpectedTotal(const std::map<std::string, Expected>& pods,
                     const std::map<std::string, ExpectedBind>& binds, const std::string& node,
                     ResourceId id, const std::string& skip_uid, bool skip_bind) {
  Int128 total = 0;
  for (const auto& [uid, e] : pods) {
    if (uid != skip_uid && e.counted() && e.node == node) total += e.request.Get(id);
  }
  for (const auto& [uid, b] : binds) {
    if (b.node == node && !(skip_bind && uid == skip_uid)) total += b.request.Get(id);
  }
  return total;
}

// Checks every node against the test's own books. \return the first breach, or "".
std::string CheckNodes(const ClusterModel& model, const std::vector<std::string>& node_names,
                       const std::map<std::string, Expected>& pods,
                       const std::map<std::string, ExpectedBind>& binds) {
  auto view = model.Read();
  for (const std::string& name : node_names) {
    const NodeState* n = view->FindNode(name);
    if (n == nullptr) return StrCat("node ", name, " missing");
    for (ResourceId id : kResources) {
      const int64_t requested = n->requested.Get(id);
      const int64_t assumed = n->assumed.Get(id);
      if (requested < 0 || assumed < 0 || n->reserved.Get(id) < 0) {
        return StrCat("node ", name, ": negative usage of resource ", id);
      }
      if (n->FreeOf(id) > n->node.allocatable.Get(id)) {
        return StrCat("node ", name, ": free above allocatable for resource ", id);
      }
      if (n->Free().Get(id) != n->FreeOf(id)) return StrCat("node ", name, ": Free != FreeOf");
      Int128 want_requested = 0;
      for (const auto& [uid, e] : pods) {
        if (e.counted() && e.node == name) want_requested += e.request.Get(id);
      }
      Int128 want_assumed = 0;
      for (const auto& [uid, b] : binds) {
        if (b.node == name) want_assumed += b.request.Get(id);
      }
      if (Int128{requested} != want_requested || Int128{assumed} != want_assumed) {
        return StrCat("node ", name, ": totals of resource ", id, " are not the exact sums");
      }
      if (Int128{requested} + assumed + n->reserved.Get(id) > kInt64Max) {
        return StrCat("node ", name, ": total past INT64_MAX");
      }
    }
  }
  return "";
}

TEST_CASE("Accounting property: random pod events always leave exact totals and return every "
          "node to its original totals",
          "[accounting][property]") {
  constexpr uint64_t kSeed = 0x5eed'acc7;
  constexpr int kRuns = 40;
  constexpr int kSteps = 300;
  Property gen(kSeed);
  int refused_upserts = 0;
  int refused_binds = 0;
  int accepted_upserts = 0;
  for (int run = 0; run < kRuns; ++run) {
    INFO("run " << run << " (seed " << kSeed << ")");
    FakeClock clock;
    ClusterModel model(&clock);
    // Three present nodes (one as large as the range allows) and a name no Node has: pods
    // bound to it are counted on a slot of their own.
    const std::vector<std::string> node_names = {"n0", "n1", "n2"};
    const std::vector<Node> nodes = {MakeNode("n0", kInt64Max, kInt64Max, kInt64Max),
                                     MakeNode("n1", 64'000, 7 * kEi, 8),
                                     MakeNode("n2", gen.Amount(), gen.Amount(), gen.Amount())};
    for (const Node& n : nodes) REQUIRE(model.Apply(NodeUpsert{n}).refused.empty());
    const std::vector<std::string> targets = {"n0", "n1", "n2", "ghost", ""};
    std::map<std::string, ResourceVector> original;
    {
      auto view = model.Read();
      for (const std::string& name : node_names) original[name] = view->FindNode(name)->Free();
    }

    std::map<std::string, Expected> pods;
    std::map<std::string, ExpectedBind> binds;
    int next_uid = 0;
    for (int step = 0; step < kSteps; ++step) {
      INFO("step " << step);
      const size_t op = gen.Pick(10);
      if (op <= 5 || pods.empty()) {
        // Add (a new uid) or modify (an existing one: new requests, node, phase).
        std::string uid;
        if (op <= 2 || pods.empty()) {
          uid = StrCat("u", next_uid++);
        } else {
          auto it = pods.begin();
          std::advance(it, gen.Pick(pods.size()));
          uid = it->first;
        }
        Pod pod;
        pod.uid = uid;
        pod.ns = "default";
        pod.name = StrCat("pod-", uid);
        const std::string node = targets[gen.Pick(targets.size())];
        pod.node_name = node;
        pod.phase = node.empty() ? PodPhase::kPending
                                 : (gen.Pick(8) == 0 ? PodPhase::kSucceeded : PodPhase::kRunning);
        for (ResourceId id : {kCpu, kMemory, kNvidiaGpu}) pod.request.Set(id, gen.Amount());
        pod.request.Set(kPods, 1);
        Expected want{node, pod.phase, pod.request};
        // The upsert releases this pod's bind when it is placed or finished.
        const bool drops_bind = !node.empty() || IsTerminal(pod.phase);
        bool fits = true;
        if (want.counted()) {
          for (ResourceId id : kResources) {
            if (ExpectedTotal(pods, binds, node, id, uid, drops_bind) + want.request.Get(id) >
                kInt64Max) {
              fits = false;
            }
          }
        }
        uint64_t generation;
        ResourceVector before;
        {
          auto view = model.Read();
          generation = view->generation();
          if (const PodState* p = view->FindPod(uid)) before = p->pod.request;
        }
        const ApplyStats stats = model.Apply(PodUpsert{pod});
        if (fits) {
          INFO((stats.refused.empty() ? std::string() : stats.refused[0]));
          REQUIRE(stats.refused.empty());
          pods[uid] = want;
          if (drops_bind) binds.erase(uid);
          ++accepted_upserts;
        } else {
          REQUIRE(stats.refused.size() == 1);
          CHECK_THAT(stats.refused[0], Catch::Contains(StrCat("pod default/pod-", uid)) &&
                                           Catch::Contains("requests.") &&
                                           Catch::Contains(StrCat("node ", node)));
          auto view = model.Read();
          CHECK(view->generation() == generation);
          const PodState* p = view->FindPod(uid);
          CHECK((p == nullptr) == !pods.contains(uid));
          if (p != nullptr) CHECK(p->pod.request == before);
          ++refused_upserts;
        }
      } else if (op == 6) {
        // Bind a pending pod (in flight on the node until confirmed or forgotten).
        std::vector<std::string> pending;
        for (const auto& [uid, e] : pods) {
          if (e.node.empty() && !IsTerminal(e.phase) && !binds.contains(uid)) {
            pending.push_back(uid);
          }
        }
        if (pending.empty()) continue;
        const std::string uid = pending[gen.Pick(pending.size())];
        const std::string node = node_names[gen.Pick(node_names.size())];
        bool fits = true;
        for (ResourceId id : kResources) {
          const Int128 total = ExpectedTotal(pods, binds, node, id, "", false);
          if (total + pods[uid].request.Get(id) > kInt64Max) {
            fits = false;
          }
        }
        absl::StatusOr<bool> held = model.Assume(uid, node, nullptr);
        if (fits) {
          INFO(held.status().ToString());
          REQUIRE(held.ok());
          binds[uid] = ExpectedBind{node, pods[uid].request};
        } else {
          REQUIRE_FALSE(held.ok());
          CHECK(held.status().code() == absl::StatusCode::kOutOfRange);
          CHECK_THAT(std::string(held.status().message()),
                     Catch::Contains(StrCat("node ", node)) && Catch::Contains("requests."));
          ++refused_binds;
        }
      } else if (op == 7) {
        // Confirm or drop a bind in flight.
        if (binds.empty()) continue;
        auto it = binds.begin();
        std::advance(it, gen.Pick(binds.size()));
        const std::string uid = it->first;
        if (gen.Pick(2) == 0) {
          // The room the bind holds becomes the pod's own; refused (and then forgotten, as the
          // bind's caller does) when a modify since Assume changed the pod's requests.
          const absl::Status confirmed = model.ConfirmBindLocally(uid);
          if (pods[uid].request == it->second.request) {
            INFO(confirmed.ToString());
            REQUIRE(confirmed.ok());
            pods[uid].node = it->second.node;
            pods[uid].phase = PodPhase::kRunning;
          } else {
            REQUIRE(confirmed.code() == absl::StatusCode::kFailedPrecondition);
            model.Forget(uid);
          }
        } else {
          model.Forget(uid);
        }
        binds.erase(uid);
      } else {
        // Delete.
        auto it = pods.begin();
        std::advance(it, gen.Pick(pods.size()));
        const std::string uid = it->first;
        REQUIRE(model.Apply(PodDelete{.uid = uid}).refused.empty());
        pods.erase(uid);
        binds.erase(uid);
      }
      const std::string breach = CheckNodes(model, node_names, pods, binds);
      INFO(breach);
      REQUIRE(breach.empty());
    }

    // Every pod leaves, in random order: every node is back where it started, exactly.
    std::vector<std::string> uids;
    for (const auto& [uid, e] : pods) uids.push_back(uid);
    std::shuffle(uids.begin(), uids.end(), gen.rng());
    for (const std::string& uid : uids) {
      REQUIRE(model.Apply(PodDelete{.uid = uid}).refused.empty());
      pods.erase(uid);
      binds.erase(uid);
    }
    auto view = model.Read();
    for (const std::string& name : node_names) {
      INFO("node " << name);
      const NodeState* n = view->FindNode(name);
      REQUIRE(n != nullptr);
      CHECK(n->requested.IsZero());
      CHECK(n->assumed.IsZero());
      CHECK(n->reserved.IsZero());
      CHECK(n->Free() == original[name]);
      CHECK(n->Free() == n->node.allocatable);
    }
    CHECK(view->pod_count() == 0);
    CHECK(view->binds_in_flight() == 0);
  }
  // The sequences did reach the edge: both outcomes happened many times.
  CHECK(refused_upserts > 100);
  CHECK(refused_binds > 10);
  CHECK(accepted_upserts > 1000);
}

TEST_CASE("Accounting: two 7Ei pods on one node: the second is refused, removal is exact",
          "[accounting]") {
  FakeClock clock;
  ClusterModel model(&clock);
  REQUIRE(model.Apply(NodeUpsert{MakeNode("big", 64'000, 7 * kEi, 0)}).refused.empty());
  auto pod = [](std::string uid) {
    Pod p;
    p.uid = uid;
    p.ns = "default";
    p.name = uid;
    p.node_name = "big";
    p.phase = PodPhase::kRunning;
    p.request.Set(kMemory, 7 * kEi);
    p.request.Set(kPods, 1);
    return p;
  };
  CHECK(model.Apply(PodUpsert{pod("a")}).refused.empty());
  const ApplyStats second = model.Apply(PodUpsert{pod("b")});
  REQUIRE(second.refused.size() == 1);
  CHECK_THAT(second.refused[0], Catch::StartsWith("pod default/b: requests.memory: node big") &&
                                    Catch::Contains("9223372036854775807"));
  {
    auto view = model.Read();
    CHECK(view->FindPod("b") == nullptr);
    CHECK(view->FindNode("big")->requested.Get(kMemory) == 7 * kEi);
    CHECK(view->FindNode("big")->FreeOf(kMemory) == 0);
  }
  model.Apply(PodDelete{.uid = "a"});
  model.Apply(PodDelete{.uid = "b"});
  auto view = model.Read();
  CHECK(view->FindNode("big")->requested.IsZero());
  CHECK(view->FindNode("big")->FreeOf(kMemory) == 7 * kEi);
}

TEST_CASE("Accounting: reservations that would overflow a node are refused whole",
          "[accounting]") {
  FakeClock clock;
  ClusterModel model(&clock);
  REQUIRE(model.Apply(NodeUpsert{MakeNode("n", kInt64Max, kInt64Max, 8)}).refused.empty());
  for (const char* uid : {"a", "b"}) {
    Pod p;
    p.uid = uid;
    p.ns = "default";
    p.name = uid;
    p.request.Set(kMemory, kInt64Max / 2 + 1);
    REQUIRE(model.Apply(PodUpsert{p}).refused.empty());
  }
  Reservation r;
  r.request.Set(kMemory, kInt64Max / 2 + 1);
  r.expires = clock.Now() + absl::Minutes(1);
  std::vector<ReservationRequest> both = {{"a", "n", r}, {"b", "n", r}};
  const absl::Status s = model.ReserveAll(both);
  CHECK(s.code() == absl::StatusCode::kOutOfRange);
  {
    auto view = model.Read();
    CHECK(view->reservation_count() == 0);
    CHECK(view->FindNode("n")->reserved.IsZero());
  }
  // One fits; the same pod's reservation moved within one call is counted once.
  std::vector<ReservationRequest> moved = {{"a", "n", r}, {"a", "n", r}};
  CHECK(model.ReserveAll(moved).ok());
  CHECK(model.Reserve("b", "n", r).code() == absl::StatusCode::kOutOfRange);
  CHECK(model.Reserve("a", "n", r).ok());  // replaces its own: still fits
  auto view = model.Read();
  CHECK(view->FindNode("n")->reserved.Get(kMemory) == kInt64Max / 2 + 1);
}

}  // namespace
}  // namespace berth::core
