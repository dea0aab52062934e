#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/pipeline.h"
#include "policy/policy.h"

namespace berth::policy {

/// What a module factory may use to build its module.
struct BuildContext {
  const PolicyConfig& config;
  core::ResourceNames& resources;
  /// The gang planner every gang module of one pipeline shares.
  std::shared_ptr<const GangPlanner> gangs;
  /// The fair-share book of the "queue" module.
  std::shared_ptr<FairShare> fair_share;
};

template <class T>
using Factory = std::function<absl::StatusOr<std::unique_ptr<T>>(const BuildContext&)>;

/// Name -> factory, one table per kind of policy. Registering a name twice is an error, so two
/// modules can never silently shadow each other.
class Registry {
 public:
  absl::Status RegisterFilter(std::string name, Factory<FilterPolicyInterface> f);
  absl::Status RegisterScore(std::string name, Factory<ScorePolicyInterface> f);
  absl::Status RegisterPreempt(std::string name, Factory<PreemptPolicyInterface> f);
  absl::Status RegisterAdmission(std::string name, Factory<AdmissionPolicyInterface> f);
  absl::Status RegisterOrder(std::string name, Factory<OrderPolicyInterface> f);
  absl::Status RegisterReclaim(std::string name, Factory<ReclaimPolicyInterface> f);

  /// Builds the pipeline `config` asks for. Unknown or repeated module names are errors that
  /// name the module and list the known ones.
  absl::StatusOr<std::unique_ptr<Pipeline>> Build(const PolicyConfig& config,
                                                  core::ResourceNames& resources) const;

  /// Names of the registered modules of each kind, for --help and error messages.
  std::vector<std::string> FilterNames() const;
  std::vector<std::string> ScoreNames() const;

 private:
  std::map<std::string, Factory<FilterPolicyInterface>> filters_;
  std::map<std::string, Factory<ScorePolicyInterface>> scores_;
  std::map<std::string, Factory<PreemptPolicyInterface>> preempt_;
  std::map<std::string, Factory<AdmissionPolicyInterface>> admission_;
  std::map<std::string, Factory<OrderPolicyInterface>> order_;
  std::map<std::string, Factory<ReclaimPolicyInterface>> reclaim_;
};

/// The one place that lists every policy module berth has.
Registry BuildDefaultRegistry();

}  // namespace berth::policy
