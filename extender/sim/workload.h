#pragma once

// The workload `berth simulate` replays: jobs with a submit time and a run duration, each made of
// pods, and changes to nodes at given times. Read from YAML or JSON (docs/simulate-workloads.md
// has the format); written back as YAML by the generator.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::extender::sim {

/// A group of identical pods of one job.
struct PodTemplate {
  /// Pod name prefix inside the job (pods are named JOB-NAME-INDEX across the job's templates).
  std::string name = "worker";
  int count = 1;  ///< >= 1
  /// Resource name -> Kubernetes quantity text ("500m", "8Gi", "4"), as in
  /// `resources.requests`. Validated as quantities when read.
  std::map<std::string, std::string> requests;
  /// Node labels the pod requires (spec.nodeSelector).
  std::map<std::string, std::string> node_selector;
  /// Taint keys the pod tolerates (operator Exists, any effect).
  std::vector<std::string> tolerations;

  friend bool operator==(const PodTemplate&, const PodTemplate&) = default;
};

/// One job: a batch of pods submitted together.
struct Job {
  std::string name;                  ///< unique in the workload, a DNS-1123 label
  std::string ns = "default";        ///< namespace
  absl::Duration submit;             ///< since the start of the simulation, >= 0
  absl::Duration duration;           ///< run time once started, > 0
  std::string queue;                 ///< berth.io/queue label; empty: none (queue `default`)
  std::string priority_class;        ///< a PriorityClass name; empty: none (priority 0)
  std::string pool;                  ///< berth.io/pool annotation; empty: none (pool `default`)
  std::optional<absl::Duration> lifetime;  ///< berth.io/lifetime annotation
  /// Gang: a PodGroup (scheduling.x-k8s.io/v1alpha1) named like the job is created with the
  /// job, with this minMember; every pod of the job is a member. Members beyond minMember are
  /// elastic. Unset: no gang (every pod independent).
  std::optional<int> min_member;
  /// berth.io/max-hops on every member (gangs only).
  std::optional<int> max_hops;
  /// spec.scheduleTimeoutSeconds of the PodGroup; unset: berth's configured default.
  std::optional<int> schedule_timeout_seconds;
  std::vector<PodTemplate> pods;     ///< at least one

  int PodCount() const;
  friend bool operator==(const Job&, const Job&) = default;
};

/// A change to the cluster's nodes at a given time.
struct NodeEvent {
  enum class Action { kAdd, kDrain, kFail, kRestore };
  absl::Duration at;  ///< since the start, >= 0
  Action action = Action::kAdd;
  /// kDrain, kFail, kRestore: the node's name. kAdd: the new node's name.
  std::string node;
  /// kAdd only: allocatable (resource -> quantity text) and labels of the new node.
  std::map<std::string, std::string> allocatable;
  std::map<std::string, std::string> labels;

  friend bool operator==(const NodeEvent&, const NodeEvent&) = default;
};

std::string_view NodeActionName(NodeEvent::Action a);

struct Workload {
  std::string name;         ///< free text, shown in the report
  std::string description;  ///< free text, shown in the report
  std::vector<Job> jobs;    ///< in any order; the simulator orders by submit time
  std::vector<NodeEvent> node_events;

  int PodCount() const;
  /// The last submit time plus that job's duration (a lower bound of the makespan).
  absl::Duration Horizon() const;
  friend bool operator==(const Workload&, const Workload&) = default;
};

/// Parses a workload from YAML or JSON text (JSON is read as YAML). Every error names `source`
/// (the file), the job (by index and name) and the field:
///   "w.yaml: jobs[3] (train-7): pods[0].requests.cpu: \"lots\" is not a quantity".
/// Unknown fields are errors, as in berth's configuration.
absl::StatusOr<Workload> ParseWorkload(std::string_view text, std::string_view source);
/// Reads and parses a workload file.
absl::StatusOr<Workload> LoadWorkloadFile(const std::string& path);
/// The workload as YAML that ParseWorkload reads back to an equal workload.
std::string WorkloadToYaml(const Workload& w);

}  // namespace berth::extender::sim
