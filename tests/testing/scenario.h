#pragma once

// Declarative scenarios: objects in; expected verdicts, scores, binds and victims out. Every
// step goes through berth's real request/response interface (Service, with JSON bodies built
// as kube-scheduler and the API server send them).

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nlohmann/json.hpp"
#include "policy/config.h"
#include "tests/testing/builders.h"

namespace berth::testing {

enum class Expect { kFit, kFailed, kUnresolvable };

/// What one node's filter verdict must be; `contains` (if set) must appear in the verdict's
/// message (the answer carries the reason's summary, which is checked too).
struct NodeExpect {
  std::string node;
  Expect verdict;
  std::string contains;
};

/// POST /filter for `pod` over `nodes` (names, or full objects when `full_nodes`).
struct FilterStep {
  MakePod pod;
  std::vector<std::string> nodes;
  std::vector<NodeExpect> expect;
  bool full_nodes = false;
};

/// POST /prioritize: `ranking` lists nodes from best to worst, each strictly better than the
/// next; `exact` pins scores.
struct PrioritizeStep {
  MakePod pod;
  std::vector<std::string> nodes;
  std::vector<std::string> ranking;
  std::map<std::string, int> exact;
};

/// POST /bind: success when `error_contains` is empty, else an Error containing it.
struct BindStep {
  MakePod pod;
  std::string node;
  std::string error_contains;
};

/// POST /v1/events with one event or an array.
struct EventsStep {
  nlohmann::json events;
};

/// POST /preempt (name form): `expect` is the exact answer, node -> victim uids (order kept).
struct PreemptStep {
  MakePod pod;
  std::vector<std::pair<std::string, std::vector<std::string>>> proposal;
  std::map<std::string, std::vector<std::string>> expect;
};

/// /debug/nodes: the node's free amount of a resource, as Kubernetes prints it ("2", "500m").
struct FreeStep {
  std::string node;
  std::string resource;
  std::string free;
};

using Step = std::variant<FilterStep, PrioritizeStep, BindStep, EventsStep, PreemptStep, FreeStep>;

struct Scenario {
  std::string name;
  /// Nodes and pods loaded first (ADDED events).
  std::vector<nlohmann::json> objects;
  std::vector<Step> steps;
  policy::PolicyConfig policies;
};

/// Runs every step in order on a fresh standalone berth; fails the running Catch2 test at the
/// first step that does not match, naming the scenario and the step.
void RunScenario(const Scenario& scenario);

}  // namespace berth::testing
