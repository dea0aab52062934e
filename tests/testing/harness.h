#pragma once

#include <functional>

// A berth service wired as `berth serve` wires it (standalone mode, default policies), on a
// fake clock, for tests that go through the real request/response interface without HTTP.

#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_model.h"
#include "extender/service.h"
#include "nlohmann/json.hpp"
#include "policy/config.h"

namespace berth::testing {

class Harness {
 public:
  /// `tune`, if given, changes the service's options before the service is made.
  explicit Harness(policy::PolicyConfig config = {},
                   extender::Mode mode = extender::Mode::kStandalone,
                   const std::function<void(extender::ServiceOptions&)>& tune = nullptr);

  extender::Service& service() { return *service_; }
  core::ClusterModel& model() { return model_; }
  core::FakeClock& clock() { return clock_; }

  /// POSTs watch events; REQUIREs a 200.
  nlohmann::json Apply(const nlohmann::json& events);
  /// Verb calls with a JSON body; REQUIRE a 200 and valid JSON, return the decoded reply.
  /// `verdicts`: as Service::Filter, the verdicts behind the answer (their messages).
  nlohmann::json Filter(const nlohmann::json& args,
                        std::vector<policy::NodeVerdict>* verdicts = nullptr);
  nlohmann::json Prioritize(const nlohmann::json& args);
  nlohmann::json Bind(const nlohmann::json& args);
  nlohmann::json Preempt(const nlohmann::json& args);
  /// The admission tick as `berth serve` runs it, with the intents it recorded (nudges,
  /// evictions, Events) carried out before it returns.
  extender::AdmissionTickStats Tick();
  /// The model as /debug/snapshot prints it (a List).
  nlohmann::json Snapshot();

 private:
  core::FakeClock clock_;
  core::ClusterModel model_{&clock_};
  std::unique_ptr<extender::LocalBinder> binder_;
  std::unique_ptr<extender::Service> service_;
};

/// Parses a reply body; fails the test if it is not JSON.
nlohmann::json ParseReply(const extender::Reply& reply);

}  // namespace berth::testing
