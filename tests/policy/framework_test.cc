// The framework's bind cycle at the policy level: Permit before the commit, Reserve after it,
// Unreserve when the binder fails, and the do-nothing defaults of Reserve/Unreserve.
#include "policy/framework.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/objects.h"
#include "policy/pipeline.h"
#include "policy/policy.h"

namespace berth::policy {
namespace {

// Records the points it is called at, as "point:pod@node"; refuses Permit when told to.
class Recorder final : public PermitPlugin, public ReservePlugin {
 public:
  Recorder(std::vector<std::string>* calls, bool refuse) : calls_(calls), refuse_(refuse) {}
  std::string_view Name() const override { return "recorder"; }
  NodeVerdict Permit(const CycleContext& ctx, const core::NodeState& node) const override {
    calls_->push_back("permit:" + ctx.pod.name.str() + "@" + node.node.name);
    if (!refuse_) return NodeVerdict::Ok();
    return NodeVerdict{.fit = Fit::kUnresolvable, .reason = Reason::kGangNotPlaceable,
                       .message = "recorder says wait"};
  }
  void Reserve(const CycleContext& ctx, const core::NodeState& node) const override {
    calls_->push_back("reserve:" + ctx.pod.name.str() + "@" + node.node.name);
  }
  void Unreserve(const CycleContext& ctx, const core::NodeState& node) const override {
    calls_->push_back("unreserve:" + ctx.pod.name.str() + "@" + node.node.name);
  }

 private:
  std::vector<std::string>* calls_;
  bool refuse_;
};

// Implements Reserve and keeps its defaults.
class Defaults final : public ReservePlugin {
 public:
  std::string_view Name() const override { return "defaults"; }
};

class FrameworkTest {
 protected:
  FrameworkTest() {
    core::Node n;
    n.name = "n1";
    n.allocatable.Set(core::kCpu, 4000);
    n.allocatable.Set(core::kPods, 110);
    model_.Apply(core::NodeUpsert{std::move(n)});
    pod_.uid = "p-uid";
    pod_.ns = "default";
    pod_.name = "p";
    pod_.request.Set(core::kCpu, 1000);
    pod_.request.Set(core::kPods, 1);
    model_.Apply(core::PodUpsert{pod_});
  }

  Framework Make(bool refuse) {
    auto recorder = std::make_shared<Recorder>(&calls_, refuse);
    Pipeline::Points points;
    points.permit.push_back(recorder);
    points.reserve.push_back(recorder);
    points.reserve.push_back(std::make_shared<Defaults>());
    return Framework(std::make_unique<Pipeline>(std::move(points)), FrameworkOptions{}, &model_,
                     &clock_);
  }

  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};
  core::Pod pod_;
  std::vector<std::string> calls_;
};

TEST_CASE_METHOD(FrameworkTest, "Framework::Bind: Permit, commit, Reserve, binder", "[framework]") {
  Framework f = Make(/*refuse=*/false);
  int binds = 0;
  const BindResult r = f.Bind(pod_, "n1", [&](const core::Pod& p, std::string_view node) {
    ++binds;
    CHECK(p.uid == pod_.uid);
    CHECK(node == "n1");
    // Reserve ran before the binder, after the commit.
    CHECK(calls_ == std::vector<std::string>{"permit:p@n1", "reserve:p@n1"});
    CHECK(model_.Read()->FindBind("p-uid") != nullptr);
    return absl::OkStatus();
  });
  CHECK(r.outcome == BindResult::Outcome::kBound);
  CHECK(binds == 1);
  CHECK(calls_ == std::vector<std::string>{"permit:p@n1", "reserve:p@n1"});
}

TEST_CASE_METHOD(FrameworkTest, "Framework::Bind: a binder failure is rolled back with Unreserve",
                 "[framework]") {
  Framework f = Make(/*refuse=*/false);
  const BindResult r = f.Bind(pod_, "n1", [](const core::Pod&, std::string_view) {
    return absl::UnavailableError("api server away");
  });
  CHECK(r.outcome == BindResult::Outcome::kBinderFailed);
  CHECK(r.status.message() == "api server away");
  CHECK(calls_ == std::vector<std::string>{"permit:p@n1", "reserve:p@n1", "unreserve:p@n1"});
  CHECK(model_.Read()->FindBind("p-uid") == nullptr);  // the model forgot the bind
}

// Standalone mode's binder commits the bind in the model (ConfirmBindLocally). A pod event that
// grows the pod's requests while it is bound voids the check: the bind fails and is rolled back,
// and the node holds nothing of it.
TEST_CASE_METHOD(FrameworkTest, "Framework::Bind: a pod grown during its local bind is not bound",
                 "[framework]") {
  Framework f = Make(/*refuse=*/false);
  const BindResult r = f.Bind(pod_, "n1", [&](const core::Pod& p, std::string_view) {
    core::Pod grown = pod_;
    grown.request.Set(core::kCpu, 8000);  // more than n1 has
    model_.Apply(core::PodUpsert{grown});
    return model_.ConfirmBindLocally(p.uid);
  });
  CHECK(r.outcome == BindResult::Outcome::kBinderFailed);
  CHECK(r.status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(calls_ == std::vector<std::string>{"permit:p@n1", "reserve:p@n1", "unreserve:p@n1"});
  auto view = model_.Read();
  CHECK(view->FindBind("p-uid") == nullptr);
  CHECK(view->FindPod("p-uid")->pod.node_name.empty());
  const core::NodeState* n = view->FindNode("n1");
  CHECK(n->requested.IsZero());
  CHECK(n->assumed.IsZero());
}

TEST_CASE_METHOD(FrameworkTest, "Framework::Bind: a Permit refusal commits nothing",
                 "[framework]") {
  Framework f = Make(/*refuse=*/true);
  int binds = 0;
  const BindResult r = f.Bind(pod_, "n1", [&](const core::Pod&, std::string_view) {
    ++binds;
    return absl::OkStatus();
  });
  CHECK(r.outcome == BindResult::Outcome::kRefused);
  CHECK(r.status.message() == "node n1 cannot take pod default/p: recorder says wait");
  CHECK(binds == 0);
  CHECK(calls_ == std::vector<std::string>{"permit:p@n1"});
  CHECK(model_.Read()->FindBind("p-uid") == nullptr);
}

// Reserve and Unreserve have default bodies (a module may implement either alone); a module that
// derives from ReservePlugin has the Reserve point and no other, whichever it overrides. (The
// defaults see the model through a const view only, so they cannot change it; no check of the
// model's generation could fail here.)
TEST_CASE_METHOD(FrameworkTest, "a ReservePlugin with default bodies has the Reserve point alone", "[framework]") {
  const Defaults d;
  CHECK(PointsOf(d) == Bit(Point::kReserve));
  auto view = model_.Read();
  const CycleContext ctx{.state = *view, .pod = pod_, .now = clock_.Now()};
  d.Reserve(ctx, *view->FindNode("n1"));
  d.Unreserve(ctx, *view->FindNode("n1"));
}

}  // namespace
}  // namespace berth::policy
