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
#include "policy/settings.h"

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

/// Reads one section of the configuration file into the config (a module's settings).
using SettingsParser = std::function<absl::Status(const Settings& section, PolicyConfig& config)>;

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

  /// Registers `parse` as the reader of configuration section `section` (its top-level key in
  /// the file), whose settings have the field `field` in PolicyConfig.
  template <class T>
  absl::Status RegisterSettings(std::string section, T PolicyConfig::*field,
                                absl::StatusOr<T> (*parse)(const Settings&)) {
    return AddSettings(std::move(section),
                       [field, parse](const Settings& tree, PolicyConfig& config) {
                         absl::StatusOr<T> value = parse(tree);
                         if (!value.ok()) return value.status();
                         config.*field = *std::move(value);
                         return absl::OkStatus();
                       });
  }
  /// Registers `parse` as the reader of section `section` of a module PolicyConfig has no field
  /// for: what it reads is kept in PolicyConfig::sections, where the module's factory finds it
  /// (ctx.config.Section<T>(section)).
  template <class T>
  absl::Status RegisterSettings(std::string section, absl::StatusOr<T> (*parse)(const Settings&)) {
    return AddSettings(section, [section, parse](const Settings& tree, PolicyConfig& config) {
      absl::StatusOr<T> value = parse(tree);
      if (!value.ok()) return value.status();
      config.sections[section] = *std::move(value);
      return absl::OkStatus();
    });
  }

  /// Reads section `section` of the configuration file (`tree`, placed at its path) into
  /// `config` with the parser registered for it; NotFound when no module reads that section.
  absl::Status ParseSettings(std::string_view section, const Settings& tree,
                             PolicyConfig* config) const;
  /// The sections modules read, for the configuration file's unknown-field check.
  std::vector<std::string> SettingsNames() const;

  /// Builds the pipeline `config` asks for. Unknown or repeated module names are errors that
  /// name the module and list the known ones.
  absl::StatusOr<std::unique_ptr<Pipeline>> Build(const PolicyConfig& config,
                                                  core::ResourceNames& resources) const;

  /// Names of the registered modules of each kind, for --help and error messages.
  std::vector<std::string> FilterNames() const;
  std::vector<std::string> ScoreNames() const;

 private:
  absl::Status AddSettings(std::string section, SettingsParser parse);

  std::map<std::string, SettingsParser, std::less<>> settings_;
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
