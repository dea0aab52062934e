#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/resources.h"
#include "policy/config.h"
#include "policy/pipeline.h"
#include "policy/policy.h"
#include "policy/settings.h"

namespace berth::policy {

/// What a module factory may use to build its module. The settings travel as one struct
/// (`config`), so how they reach the factories can change in one place.
struct BuildContext {
  const PolicyConfig& config;
  core::ResourceNames& resources;
  /// The gang planner every gang module of one pipeline shares (null unless "gang" or
  /// "gang-topology" is configured).
  std::shared_ptr<const GangPlanner> gangs;
  /// The fair-share book of the "queue" module (null unless it is configured).
  std::shared_ptr<FairShare> fair_share;
};

/// Builds one module; called at most once per pipeline, whatever the number of its points.
using Factory = std::function<absl::StatusOr<std::unique_ptr<Module>>(const BuildContext&)>;

/// Reads one section of the configuration file into the config (a module's settings).
using SettingsParser = std::function<absl::Status(const Settings& section, PolicyConfig& config)>;

/// The points a module type implements, read from its base classes.
template <class T>
constexpr PointMask PointsOfType() {
  PointMask m = 0;
  if constexpr (std::is_base_of_v<PreFilterPlugin, T>) m |= Bit(Point::kPreFilter);
  if constexpr (std::is_base_of_v<FilterPlugin, T>) m |= Bit(Point::kFilter);
  if constexpr (std::is_base_of_v<PostFilterPlugin, T>) m |= Bit(Point::kPostFilter);
  if constexpr (std::is_base_of_v<PreemptionReviewPlugin, T>) m |= Bit(Point::kPreemptionReview);
  if constexpr (std::is_base_of_v<ScorePlugin, T>) m |= Bit(Point::kScore);
  if constexpr (std::is_base_of_v<PermitPlugin, T>) m |= Bit(Point::kPermit);
  if constexpr (std::is_base_of_v<ReservePlugin, T>) m |= Bit(Point::kReserve);
  if constexpr (std::is_base_of_v<QueueSortPlugin, T>) m |= Bit(Point::kQueueSort);
  return m;
}

/// Name -> factory, one table for every module (kube-scheduler's registry). A module is
/// registered once, whatever the number of points it implements; Build places its one instance
/// at every point the configuration lists it for. Registering a name twice is an error, so two
/// modules can never silently shadow each other.
class Registry {
 public:
  /// Registers module type T under `name`. `make(const BuildContext&)` returns a
  /// std::unique_ptr<T> or an absl::StatusOr of one (an error names the bad setting).
  template <class T, class Make>
  absl::Status Register(std::string name, Make make) {
    static_assert(std::is_base_of_v<Module, T>, "a module derives from the point interfaces");
    static_assert(PointsOfType<T>() != 0, "a module implements at least one point");
    return Add(std::move(name), PointsOfType<T>(),
               [make = std::move(make)](const BuildContext& ctx)
                   -> absl::StatusOr<std::unique_ptr<Module>> {
                 absl::StatusOr<std::unique_ptr<T>> m = make(ctx);
                 if (!m.ok()) return m.status();
                 return std::unique_ptr<Module>(*std::move(m));
               });
  }

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

  /// Builds the pipeline `config` asks for. Errors name the configuration list and the module:
  /// an unknown name (listing the modules that have that point), a name listed twice in one
  /// list, a module listed at a point it does not implement (naming the points it does), and a
  /// factory's refusal of its settings.
  absl::StatusOr<std::unique_ptr<Pipeline>> Build(const PolicyConfig& config,
                                                  core::ResourceNames& resources) const;

  /// Every registered name, in name order (for --help and error messages).
  std::vector<std::string> Names() const;
  /// The registered modules that implement `point`, in name order.
  std::vector<std::string> NamesAt(Point point) const;
  /// The points of the module registered as `name` (0 for none).
  PointMask PointsOf(std::string_view name) const;

 private:
  struct Entry {
    PointMask points;
    Factory make;
  };
  absl::Status Add(std::string name, PointMask points, Factory make);
  std::map<std::string, Entry, std::less<>> modules_;
  absl::Status AddSettings(std::string section, SettingsParser parse);
  std::map<std::string, SettingsParser, std::less<>> settings_;
};

/// The one place that lists every policy module berth has.
Registry BuildDefaultRegistry();

}  // namespace berth::policy
