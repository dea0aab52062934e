#pragma once

// Verb calls as kube-scheduler makes them, with their answers decoded for assertions.

#include <map>
#include <string>
#include <vector>

#include "tests/testing/builders.h"
#include "tests/testing/harness.h"

namespace berth::testing {

/// A filter answer, node by node.
struct Verdicts {
  /// The reason given for `node`, fit or not ("" when it fits or was not asked about).
  std::string Why(const std::string& node) const;
  std::vector<std::string> fit;
  std::map<std::string, std::string> failed;        // FailedNodes
  std::map<std::string, std::string> unresolvable;  // FailedAndUnresolvableNodes
};

/// POST /filter for `pod` over node names; REQUIREs an answer without Error.
Verdicts FilterPod(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes);

/// FilterPod as kube-scheduler retries it while berth's side effects land: after each answer the
/// intents it recorded (a reclaim's evictions) are carried out, and the pod is filtered again,
/// until an answer records none (at most a few rounds). \return the last answer.
Verdicts FilterSettled(Harness& h, const MakePod& pod, const std::vector<std::string>& nodes);

/// POST /bind; CHECKs that it succeeded.
void BindOk(Harness& h, const MakePod& pod, const std::string& node);

/// POST /bind; \return the Error ("" on success).
std::string BindError(Harness& h, const MakePod& pod, const std::string& node);

/// The room /debug/nodes shows held on a node (reclaims, gang reservations), in CPUs; "" when
/// none. FAILs for a node berth does not know.
std::string HeldCpu(Harness& h, const std::string& node);

bool Contains(const std::string& haystack, const std::string& needle);

}  // namespace berth::testing
