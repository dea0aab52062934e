// PoolStatusWriter against the fake API server: what it writes to Pool.status, when (leader only,
// at most once per interval, only what changed), and how it copes with failures.

#include "extender/kube/pool_status.h"

#include <memory>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/extender/kube/kube_test_env.h"
#include "tests/testing/builders.h"

namespace berth::testing {
namespace {

using extender::kube::PoolStatusWriter;

constexpr char kPoolsPath[] = "/apis/berth.io/v1alpha1/pools/";

/// Leadership a test switches by hand.
class FakeLeadership final : public extender::kube::LeadershipInterface {
 public:
  bool IsLeader() const override { return leader; }
  std::string Describe() const override { return leader ? "test (leader)" : "test (follower)"; }
  bool leader = true;
};

/// Two pools: "train" (n1, n2) and "infer" (n3). In "train": a bound pod, a pod of another
/// scheduler, a pending pod, and a borrower running on n3.
void Populate(FakeApiServer& api) {
  for (const char* n : {"n1", "n2"}) {
    REQUIRE(api.Create("nodes", "", MakeNode(n).Cpu("8").Memory("32Gi").Gpu(4).Label("pool", "train")
                                        .Obj()).ok());
  }
  REQUIRE(api.Create("nodes", "", MakeNode("n3").Cpu("4").Memory("16Gi").Label("pool", "infer")
                                      .Obj()).ok());
  REQUIRE(api.Create("pools", "", MakePool("train").Label("pool", "train").Obj()).ok());
  REQUIRE(api.Create("pools", "", MakePool("infer").Label("pool", "infer").NoPreemption().Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("bound").Namespace("ml").Cpu("2").Memory("4Gi").Gpu(1)
                                       .Annotation("berth.io/pool", "train").Node("n1")
                                       .Phase("Running").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("other").Namespace("ml").Scheduler("default-scheduler")
                                       .Cpu("1").Memory("1Gi").Node("n2").Phase("Running")
                                       .Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("waiting").Namespace("ml").Cpu("3").Gpu(2)
                                       .Annotation("berth.io/pool", "train").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("borrower").Namespace("ml").Cpu("1")
                                       .Annotation("berth.io/pool", "train").Node("n3")
                                       .Phase("Running").Obj()).ok());
}

Json Row(const std::string& cpu, const std::string& gpu, const std::string& memory, int nodes,
         int pods) {
  return {{"cpu", cpu}, {"nvidia.com/gpu", gpu}, {"memory", memory}, {"ephemeral-storage", "0"},
          {"nodes", nodes}, {"pods", pods}};
}

/// What Populate's "train" pool's status must say (without lastUpdateTime).
Json TrainStatus() {
  return {{"flags", "pbs"},
          {"nodes", 2},
          {"capacity", Row("16", "8", "64Gi", 2, 220)},
          {"allocatable", Row("16", "8", "64Gi", 2, 220)},
          {"used", Row("3", "1", "5Gi", 2, 2)},
          {"shared", Row("0", "0", "0", 0, 0)},
          {"borrowed", Row("1", "0", "0", 0, 1)},
          {"pending", Row("3", "2", "0", 0, 1)}};
}

/// The Pool status writes the server answered, in order.
std::vector<RecordedCall> StatusWrites(const FakeApiServer& api) {
  std::vector<RecordedCall> out;
  for (RecordedCall& c : api.calls()) {
    if (c.method == "PATCH" && c.resource == "pools" && c.subresource == "status") {
      out.push_back(std::move(c));
    }
  }
  return out;
}

/// Names of the pools written, in order.
std::vector<std::string> Written(const FakeApiServer& api) {
  std::vector<std::string> out;
  for (const RecordedCall& c : StatusWrites(api)) out.push_back(c.name);
  return out;
}

using Names = std::vector<std::string>;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);  // 2027-01-15T08:00:00Z

/// The fake API server holding Populate's objects, and a berth in Kubernetes mode that has
/// listed them; each test makes its own writer over that berth.
class PoolStatusTest {
 protected:
  PoolStatusTest() { Populate(api); }
  KubeBerth& StartBerth() {
    berth_ = std::make_unique<KubeBerth>(api);
    berth_->Start();
    REQUIRE(berth_->WaitReady());
    return *berth_;
  }
  std::unique_ptr<PoolStatusWriter> Writer(absl::Duration interval,
                                           const extender::kube::LeadershipInterface* leadership) {
    return std::make_unique<PoolStatusWriter>(&berth_->runtime().client(), leadership,
                                              &berth_->model(), "berth-scheduler", interval);
  }

  FakeApiServer api;

 private:
  std::unique_ptr<KubeBerth> berth_;
};

TEST_CASE_METHOD(PoolStatusTest, "pool status: the statistics of every Pool object go to its status subresource",
          "[kube][pools]") {
  StartBerth();
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::Seconds(10), nullptr);
  PoolStatusWriter& writer = *owned;
  writer.Tick(kT0);

  const std::vector<RecordedCall> writes = StatusWrites(api);
  REQUIRE(writes.size() == 2);  // no Pool object "default": the default pool is not written
  CHECK(writes[0].path == std::string(kPoolsPath) + "infer/status");
  CHECK(writes[1].path == std::string(kPoolsPath) + "train/status");
  for (const RecordedCall& c : writes) {
    CHECK(c.status == 200);
    CHECK(c.content_type == "application/merge-patch+json");
  }
  Json expected = TrainStatus();
  expected["lastUpdateTime"] = "2027-01-15T08:00:00Z";
  CHECK(Json::parse(writes[1].body) == Json{{"status", expected}});

  const Json infer = Json::parse(writes[0].body)["status"];
  CHECK(infer["flags"] == "-bs");
  CHECK(infer["nodes"] == 1);
  CHECK(infer["allocatable"] == Row("4", "0", "16Gi", 1, 110));
  CHECK(infer["used"] == Row("1", "0", "0", 1, 1));
  CHECK(infer["shared"] == Row("1", "0", "0", 0, 1));  // the borrower from "train"
  CHECK(infer["pending"] == Row("0", "0", "0", 0, 0));

  // The stored Pool carries the status; its spec is as created.
  const Json stored = api.Get("pools", "", "train").value();
  CHECK(stored["status"] == expected);
  CHECK(stored["spec"] == MakePool("train").Label("pool", "train").Obj()["spec"]);
}

TEST_CASE_METHOD(PoolStatusTest, "pool status: the default pool is written only when a Pool object names it",
          "[kube][pools]") {
  REQUIRE(api.Create("nodes", "", MakeNode("n4").Cpu("2").Obj()).ok());  // in no pool
  REQUIRE(api.Create("pods", "ml", MakePod("homeless").Namespace("ml").Cpu("500m").Obj()).ok());
  KubeBerth& berth = StartBerth();
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::Seconds(10), nullptr);
  PoolStatusWriter& writer = *owned;
  writer.Tick(kT0);
  CHECK(Written(api) == Names{"infer", "train"});

  // A Pool named "default" sets the default pool's flags (its selector means nothing): now the
  // default pool, the nodes no other pool selects, is written too.
  REQUIRE(api.Create("pools", "", MakePool("default").NoBorrowing().Obj()).ok());
  REQUIRE(berth.WaitFor([&] { return berth.model().Read()->FindPool("default") != nullptr; }));
  writer.Tick(kT0 + absl::Seconds(10));
  REQUIRE(Written(api) == Names{"infer", "train", "default"});
  const Json status = api.Get("pools", "", "default").value()["status"];
  CHECK(status["flags"] == "p-s");
  CHECK(status["nodes"] == 1);
  CHECK(status["allocatable"] == Row("2", "0", "0", 1, 110));
  CHECK(status["pending"] == Row("500m", "0", "0", 0, 1));
}

TEST_CASE_METHOD(PoolStatusTest, "pool status: only the leader writes, and a new leader writes every pool again",
          "[kube][pools]") {
  StartBerth();
  FakeLeadership leadership;
  leadership.leader = false;
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::Seconds(10), &leadership);
  PoolStatusWriter& writer = *owned;

  writer.Tick(kT0);
  writer.Tick(kT0 + absl::Seconds(30));
  CHECK(Written(api).empty());
  CHECK_FALSE(api.Get("pools", "", "train").value().contains("status"));

  leadership.leader = true;
  writer.Tick(kT0 + absl::Seconds(31));
  CHECK(Written(api) == Names{"infer", "train"});
  writer.Tick(kT0 + absl::Seconds(41));  // nothing changed
  CHECK(Written(api).size() == 2);

  leadership.leader = false;
  writer.Tick(kT0 + absl::Seconds(51));
  CHECK(Written(api).size() == 2);
  // Leading again: another replica may have written meanwhile, so every pool is written, even
  // though nothing changed here.
  leadership.leader = true;
  writer.Tick(kT0 + absl::Seconds(61));
  CHECK(Written(api) == Names{"infer", "train", "infer", "train"});
  const Json status = api.Get("pools", "", "train").value()["status"];
  CHECK(status["lastUpdateTime"] == "2027-01-15T08:01:01Z");
}

TEST_CASE_METHOD(PoolStatusTest, "pool status: at most one pass per interval, writing only the pools that changed",
          "[kube][pools]") {
  KubeBerth& berth = StartBerth();
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::Seconds(10), nullptr);
  PoolStatusWriter& writer = *owned;

  writer.Tick(kT0);
  writer.Tick(kT0 + absl::Seconds(1));
  CHECK(Written(api) == Names{"infer", "train"});
  writer.Tick(kT0 + absl::Seconds(10));  // a pass, but nothing changed
  CHECK(Written(api).size() == 2);

  REQUIRE(api.Create("pods", "ml", MakePod("waiting-2").Namespace("ml").Cpu("2")
                                       .Annotation("berth.io/pool", "train").Obj()).ok());
  REQUIRE(berth.WaitFor([&] { return berth.HasPod("uid-waiting-2"); }));
  writer.Tick(kT0 + absl::Seconds(15));  // within the interval of the last pass
  CHECK(Written(api).size() == 2);
  writer.Tick(kT0 + absl::Seconds(20));
  REQUIRE(Written(api) == Names{"infer", "train", "train"});
  const Json status = api.Get("pools", "", "train").value()["status"];
  CHECK(status["pending"] == Row("5", "2", "0", 0, 2));
  CHECK(status["lastUpdateTime"] == "2027-01-15T08:00:20Z");
  CHECK(api.Get("pools", "", "infer").value()["status"]["lastUpdateTime"] ==
        "2027-01-15T08:00:00Z");
}

TEST_CASE_METHOD(PoolStatusTest, "pool status: an interval of zero turns the writer off", "[kube][pools]") {
  StartBerth();
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::ZeroDuration(), nullptr);
  PoolStatusWriter& writer = *owned;
  writer.Tick(kT0);
  writer.Tick(kT0 + absl::Hours(1));
  CHECK(Written(api).empty());
}

TEST_CASE_METHOD(PoolStatusTest, "pool status: a deleted Pool is forgotten, and a 404 is no error", "[kube][pools]") {
  KubeBerth& berth = StartBerth();
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::Seconds(10), nullptr);
  PoolStatusWriter& writer = *owned;
  writer.Tick(kT0);
  REQUIRE(Written(api) == Names{"infer", "train"});

  REQUIRE(api.Delete("pools", "", "infer").ok());
  REQUIRE(berth.WaitFor([&] { return berth.model().Read()->FindPool("infer") == nullptr; }));
  writer.Tick(kT0 + absl::Seconds(10));
  CHECK(Written(api).size() == 2);
  // Created again with the same statistics: written, since the old status was forgotten.
  REQUIRE(api.Create("pools", "", MakePool("infer").Label("pool", "infer").NoPreemption().Obj()).ok());
  REQUIRE(berth.WaitFor([&] { return berth.model().Read()->FindPool("infer") != nullptr; }));
  writer.Tick(kT0 + absl::Seconds(20));
  CHECK(Written(api) == Names{"infer", "train", "infer"});

  // Deleted on the server while the model still has it (the watches are stopped): the API
  // server answers 404, the other pools are written all the same, and nothing is re-created.
  berth.Stop();
  REQUIRE(api.Delete("pools", "", "infer").ok());
  api.ClearCalls();
  PoolStatusWriter fresh(&berth.runtime().client(), nullptr, &berth.model(), "berth-scheduler",
                         absl::Seconds(10));
  fresh.Tick(kT0);
  std::vector<RecordedCall> writes = StatusWrites(api);
  REQUIRE(writes.size() == 2);
  CHECK(writes[0].name == "infer");
  CHECK(writes[0].status == 404);
  CHECK(writes[1].name == "train");
  CHECK(writes[1].status == 200);
  CHECK_FALSE(api.Get("pools", "", "infer").has_value());
  fresh.Tick(kT0 + absl::Seconds(10));  // the model still has "infer"; "train" is done
  CHECK(Written(api) == Names{"infer", "train", "infer"});
}

TEST_CASE_METHOD(PoolStatusTest, "pool status: failed writes are made again on the next pass, not in a loop",
          "[kube][pools]") {
  StartBerth();
  const std::unique_ptr<PoolStatusWriter> owned = Writer(absl::Seconds(10), nullptr);
  PoolStatusWriter& writer = *owned;

  SECTION("a 500 fails one pool; the others are written") {
    extender::ApiWriteMetrics counted;
    writer.set_metrics(&counted);
    api.InjectFailure({.method = "PATCH",
                       .path_prefix = std::string(kPoolsPath) + "train/status",
                       .code = 500});
    writer.Tick(kT0);
    // Counted for /metrics (berth_pool_status_writes_total).
    CHECK(counted.pool_status_written == 1);
    CHECK(counted.pool_status_failed == 1);
    std::vector<RecordedCall> writes = StatusWrites(api);
    REQUIRE(writes.size() == 2);
    CHECK(writes[0].name == "infer");
    CHECK(writes[0].status == 200);
    CHECK(writes[1].name == "train");
    CHECK(writes[1].status == 500);
    CHECK_FALSE(api.Get("pools", "", "train").value().contains("status"));
    writer.Tick(kT0 + absl::Seconds(5));  // no retry before the next pass
    CHECK(Written(api).size() == 2);
    writer.Tick(kT0 + absl::Seconds(10));
    writes = StatusWrites(api);
    REQUIRE(writes.size() == 3);
    CHECK(writes[2].name == "train");
    CHECK(writes[2].status == 200);
    Json expected = TrainStatus();
    expected["lastUpdateTime"] = "2027-01-15T08:00:10Z";
    CHECK(api.Get("pools", "", "train").value()["status"] == expected);
  }

  SECTION("a 429 ends the pass; every pool is written on the next") {
    api.InjectFailure({.method = "PATCH", .path_prefix = kPoolsPath, .code = 429,
                       .retry_after_seconds = 1});
    writer.Tick(kT0);
    std::vector<RecordedCall> writes = StatusWrites(api);
    REQUIRE(writes.size() == 1);
    CHECK(writes[0].status == 429);
    writer.Tick(kT0 + absl::Seconds(10));
    CHECK(Written(api) == Names{"infer", "infer", "train"});
    CHECK(api.Get("pools", "", "infer").value().contains("status"));
    CHECK(api.Get("pools", "", "train").value().contains("status"));
  }

  SECTION("an unreachable API server ends the pass; the next pass writes") {
    api.Stop();
    writer.Tick(kT0);
    REQUIRE(api.Start().ok());
    CHECK(Written(api).empty());
    writer.Tick(kT0 + absl::Seconds(10));
    CHECK(Written(api) == Names{"infer", "train"});
  }
}

}  // namespace
}  // namespace berth::testing
