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
};

/// The one place that lists every policy module berth has.
Registry BuildDefaultRegistry();

}  // namespace berth::policy
