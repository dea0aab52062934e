#include "tests/testing/harness.h"

#include <catch2/catch.hpp>

#include "policy/registry.h"

namespace berth::testing {

Harness::Harness(policy::PolicyConfig config, extender::Mode mode,
                 const std::function<void(extender::ServiceOptions&)>& tune) {
  auto pipeline = policy::BuildDefaultRegistry().Build(config, model_.resources());
  REQUIRE(pipeline.ok());
  binder_ = std::make_unique<extender::LocalBinder>(&model_);
  extender::ServiceOptions options;
  options.mode = mode;
  options.scheduler_name = config.scheduler_name;  // as main.cc wires both from one setting
  options.reclaim_timeout = config.pools.reclaim_timeout;
  options.policy = std::make_shared<const policy::PolicyConfig>(config);  // for what-ifs
  if (tune) tune(options);
  service_ = std::make_unique<extender::Service>(options, &model_, *std::move(pipeline),
                                                 binder_.get(), &clock_);
  service_->SetReady(true);
}

nlohmann::json ParseReply(const extender::Reply& reply) {
  INFO("reply body: " << reply.body);
  REQUIRE(nlohmann::json::accept(reply.body));
  return nlohmann::json::parse(reply.body);
}

namespace {
nlohmann::json Ok(const extender::Reply& r) {
  INFO("status " << r.status << " body: " << r.body);
  REQUIRE(r.status == 200);
  return ParseReply(r);
}
}  // namespace

nlohmann::json Harness::Apply(const nlohmann::json& events) { return Ok(service_->Events(events.dump())); }
nlohmann::json Harness::Filter(const nlohmann::json& args,
                               std::vector<policy::NodeVerdict>* verdicts) {
  return Ok(service_->Filter(args.dump(), verdicts));
}
nlohmann::json Harness::Prioritize(const nlohmann::json& args) {
  return Ok(service_->Prioritize(args.dump()));
}
nlohmann::json Harness::Bind(const nlohmann::json& args) { return Ok(service_->Bind(args.dump())); }
nlohmann::json Harness::Preempt(const nlohmann::json& args) { return Ok(service_->Preempt(args.dump())); }
extender::AdmissionTickStats Harness::Tick() {
  const extender::AdmissionTickStats stats = service_->AdmissionTick();
  service_->DrainIntents();
  return stats;
}

nlohmann::json Harness::Snapshot() { return Ok(service_->DebugSnapshot(false)); }

}  // namespace berth::testing
