#pragma once

// Verb calls as kube-scheduler makes them, with their answers decoded for assertions.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/builders.h"
#include "tests/testing/harness.h"
#include "tests/testing/text.h"

namespace berth::testing {

/// A filter answer, node by node.
struct Verdicts {
  /// What berth says of a node it rejects: the verdict's message, which /debug/explain and
  /// berth's Events give ("" when it fits or was not asked about). The answer itself carries
  /// only the reason's short summary (`failed`, `unresolvable`).
  std::string Why(const std::string& node) const;
  std::vector<std::string> fit;
  std::map<std::string, std::string> failed;        // FailedNodes, as written
  std::map<std::string, std::string> unresolvable;  // FailedAndUnresolvableNodes, as written
  std::map<std::string, std::string> messages;      // rejected node -> its verdict's message
};

/// POST /filter for `pod` over node names; REQUIREs an answer without Error, and CHECKs that the
/// answer gives each rejected node its reason's summary (policy::ReasonSummary).
Verdicts FilterPod(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes);

/// Records nudges ("ns/name (why)") instead of patching pods; set with
/// h.service().SetNudger(&nudger).
class RecordingNudger final : public extender::NudgerInterface {
 public:
  absl::Status Nudge(const core::Pod& pod, std::string_view why) override;
  std::vector<std::string> nudged;
};

/// Records evictions ("ns/name") without carrying them out: the victims stay, as they would
/// while they exit. Set with h.service().SetEvictor(&evictor).
class RecordingEvictor final : public extender::EvictorInterface {
 public:
  absl::Status Evict(const core::Pod& victim, const core::Pod&, std::string_view) override {
    evicted.push_back(victim.Key());
    return absl::OkStatus();
  }
  std::vector<std::string> evicted;
};

/// FilterPod as kube-scheduler retries it while berth's side effects land: after each answer the
/// intents it recorded (a reclaim's evictions) are carried out, and the pod is filtered again,
/// until an answer records none (at most a few rounds). \return the last answer.
Verdicts FilterSettled(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes);

/// host -> score of a prioritize answer, read as kube-scheduler reads it: an entry written
/// without "Score" scored 0. REQUIREs an array of objects with string hosts.
std::map<std::string, int64_t> ScoresOf(const Json& answer);

/// POST /bind; CHECKs that it succeeded.
void BindOk(Harness& h, const MakePod& pod, const std::string& node);

/// POST /bind; \return the Error ("" on success).
std::string BindError(Harness& h, const MakePod& pod, const std::string& node);

/// The room /debug/nodes shows held on a node (reclaims, gang reservations), in CPUs; "" when
/// none. FAILs for a node berth does not know.
std::string HeldCpu(Harness& h, const std::string& node);

/// One sample of GET /metrics, e.g. `berth_intents_total{kind="eviction",outcome="done"}`; 0
/// when the series is absent.
double Metric(Harness& h, const std::string& series);

/// The model's generation: it moves with every change the model accepts.
uint64_t Generation(Harness& h);

/// POSTs an ADDED event for every object, in one request.
void AddObjects(Harness& h, const std::vector<Json>& objects);

/// Watch events straight into the model, as the Kubernetes watches feed it (POST /v1/events is
/// refused in Kubernetes mode). REQUIREs that every event decodes and that the model takes it.
void ApplyToModel(Harness& h, const Json& events);

// ---- side effects ----------------------------------------------------------------------------

/// Lets the side effects the verbs decided so far (evictions) be carried out. Standalone
/// berth evicts before the verb answers, so there is nothing to wait for today; should the
/// Service hand them to a worker, this is where a test drains it. Tests that expect
/// evictions to have happened read them through EvictedSince, which calls this.
void SettleSideEffects(Harness& h);

/// "ns/name" of every pod berth's model holds (GET /debug/pods?all).
std::set<std::string> PodKeys(Harness& h);

/// The pods of `before` (PodKeys taken earlier) that are gone once side effects settle.
std::set<std::string> EvictedSince(Harness& h, const std::set<std::string>& before);

// ---- what the debug endpoints show -----------------------------------------------------------

/// The pod as GET /debug/pods shows it ("ns/name"); FAILs when it is not there.
Json PodInfo(Harness& h, const std::string& key);

/// The gang as GET /debug/gangs shows it (by name); FAILs when it is not there.
Json GangInfo(Harness& h, const std::string& name);

/// The waiting jobs of GET /debug/queues, in admission order.
Json QueueJobs(Harness& h);

/// The job ("ns/name" of a pod or gang) as GET /debug/queues lists it; FAILs when absent.
Json JobInfo(Harness& h, const std::string& key);

/// GET /debug/explain?pod=KEY as JSON; REQUIREs a 200.
Json ExplainJson(Harness& h, const std::string& key);

}  // namespace berth::testing
