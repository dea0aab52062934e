// Tests of core::PlacementAllows: kube-scheduler's NodeUnschedulable, TaintToleration and
// NodeAffinity filters (nodeSelector and required node affinity) over berth's Pod and Node.

#include "core/placement.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/objects.h"

namespace berth::core {
namespace {

Node MakeNode(std::string name, std::initializer_list<std::pair<std::string, std::string>> labels = {}) {
  Node n;
  n.name = std::move(name);
  for (const auto& [k, v] : labels) n.labels.Set(k, v);
  return n;
}

Pod WithPlacement(PodPlacement p) {
  Pod pod;
  pod.name = "p";
  pod.placement = std::make_shared<const PodPlacement>(std::move(p));
  return pod;
}

NodeSelectorRequirement Req(std::string key, NodeSelectorOp op, std::vector<std::string> values = {}) {
  NodeSelectorRequirement r{.key = std::move(key), .op = op, .values = std::move(values)};
  if ((op == NodeSelectorOp::kGt || op == NodeSelectorOp::kLt) && !r.values.empty()) {
    r.number = *ParseGoInt64(r.values[0]);
  }
  return r;
}

// A pod whose required node affinity is `terms`.
Pod Affinity(std::vector<NodeSelectorTerm> terms) {
  PodPlacement p;
  p.required_terms = std::move(terms);
  return WithPlacement(std::move(p));
}

// A pod with one affinity term made of `exprs`.
Pod OneTerm(std::vector<NodeSelectorRequirement> exprs) {
  return Affinity({NodeSelectorTerm{.match_expressions = std::move(exprs)}});
}

Pod Tolerating(std::vector<Toleration> tolerations) {
  PodPlacement p;
  p.tolerations = std::move(tolerations);
  return WithPlacement(std::move(p));
}

Node Tainted(std::string key, std::string value, std::string effect) {
  Node n = MakeNode("t");
  n.taints.push_back(Taint{.key = std::move(key), .value = std::move(value), .effect = std::move(effect)});
  return n;
}

std::string Why(const Pod& pod, const Node& node) {
  std::string why;
  CHECK_FALSE(PlacementAllows(pod, node, &why));
  return why;
}

TEST_CASE("placement: a pod without placement goes on any schedulable untainted node", "[placement]") {
  const Pod plain;
  REQUIRE(plain.placement == nullptr);
  CHECK(PlacementAllows(plain, MakeNode("n", {{"pool", "a"}})));
  CHECK(PlacementAllows(plain, MakeNode("n")));
  std::string why = "untouched";
  CHECK(PlacementAllows(plain, MakeNode("n"), &why));
  CHECK(why == "untouched");  // set only on refusal
  // The fast path must not skip the node's own constraints.
  Node cordoned = MakeNode("c");
  cordoned.unschedulable = true;
  CHECK(Why(plain, cordoned) == "node is cordoned");
  CHECK(Why(plain, Tainted("gpu", "true", "NoSchedule")) == "untolerated taint gpu=true:NoSchedule");
  // An empty placement object behaves like none.
  CHECK(PlacementAllows(WithPlacement(PodPlacement{}), MakeNode("n")));
  CHECK(PodPlacement{}.empty());
}

TEST_CASE("placement: nodeSelector needs every key=value as a node label", "[placement]") {
  PodPlacement p;
  p.node_selector.Set("pool", "a");
  p.node_selector.Set("zone", "z1");
  const Pod pod = WithPlacement(std::move(p));
  CHECK(PlacementAllows(pod, MakeNode("n", {{"pool", "a"}, {"zone", "z1"}, {"extra", "x"}})));
  CHECK(Why(pod, MakeNode("n", {{"pool", "b"}, {"zone", "z1"}})) == "node selector pool=a does not match");
  CHECK(Why(pod, MakeNode("n", {{"pool", "a"}})) == "node selector zone=z1 does not match");
  CHECK(Why(pod, MakeNode("n")) == "node selector pool=a does not match");
}

TEST_CASE("placement: matchExpressions operators In - NotIn - Exists - DoesNotExist", "[placement]") {
  const Node a100 = MakeNode("n", {{"gpu", "a100"}});
  const Node h100 = MakeNode("n", {{"gpu", "h100"}});
  const Node none = MakeNode("n");

  const Pod in = OneTerm({Req("gpu", NodeSelectorOp::kIn, {"a100", "v100"})});
  CHECK(PlacementAllows(in, a100));
  CHECK(Why(in, h100) == "required node affinity does not match");
  CHECK_FALSE(PlacementAllows(in, none));

  const Pod not_in = OneTerm({Req("gpu", NodeSelectorOp::kNotIn, {"a100"})});
  CHECK_FALSE(PlacementAllows(not_in, a100));
  CHECK(PlacementAllows(not_in, h100));
  CHECK(PlacementAllows(not_in, none));  // an absent key is in no set

  const Pod exists = OneTerm({Req("gpu", NodeSelectorOp::kExists)});
  CHECK(PlacementAllows(exists, a100));
  CHECK_FALSE(PlacementAllows(exists, none));

  const Pod absent = OneTerm({Req("gpu", NodeSelectorOp::kDoesNotExist)});
  CHECK_FALSE(PlacementAllows(absent, a100));
  CHECK(PlacementAllows(absent, none));
}

TEST_CASE("placement: Gt and Lt compare integer label values", "[placement]") {
  const Pod gt = OneTerm({Req("cores", NodeSelectorOp::kGt, {"8"})});
  const Pod lt = OneTerm({Req("cores", NodeSelectorOp::kLt, {"-2"})});
  CHECK(PlacementAllows(gt, MakeNode("n", {{"cores", "16"}})));
  CHECK(PlacementAllows(gt, MakeNode("n", {{"cores", "+9"}})));  // Go's ParseInt takes a sign
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n", {{"cores", "8"}})));  // strictly greater
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n", {{"cores", "7"}})));
  // Compared as numbers, not text: "10" > "8" although "10" < "8" as strings.
  CHECK(PlacementAllows(gt, MakeNode("n", {{"cores", "10"}})));
  // A node value that is no integer, or no value at all, never matches.
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n", {{"cores", "many"}})));
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n", {{"cores", "9.5"}})));
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n", {{"cores", ""}})));
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n")));
  CHECK_FALSE(PlacementAllows(gt, MakeNode("n", {{"cores", "99999999999999999999"}})));  // > int64

  CHECK(PlacementAllows(lt, MakeNode("n", {{"cores", "-3"}})));
  CHECK_FALSE(PlacementAllows(lt, MakeNode("n", {{"cores", "-2"}})));
  CHECK_FALSE(PlacementAllows(lt, MakeNode("n", {{"cores", "0"}})));
}

TEST_CASE("placement: ParseGoInt64 reads what strconv.ParseInt(s, 10, 64) reads", "[placement]") {
  CHECK(ParseGoInt64("0") == 0);
  CHECK(ParseGoInt64("-17") == -17);
  CHECK(ParseGoInt64("+17") == 17);
  CHECK(ParseGoInt64("007") == 7);
  CHECK(ParseGoInt64("9223372036854775807") == INT64_MAX);
  CHECK(ParseGoInt64("-9223372036854775808") == INT64_MIN);
  for (const char* bad : {"", "+", "-", "+-1", "9223372036854775808", "1e3", "0x10", " 1", "1 ",
                          "1_000", "1.0"}) {
    INFO(bad);
    CHECK_FALSE(ParseGoInt64(bad).has_value());
  }
}

TEST_CASE("placement: matchFields selects the node by metadata.name", "[placement]") {
  const Pod in = Affinity({NodeSelectorTerm{
      .match_fields = {Req(std::string(kNodeNameField), NodeSelectorOp::kIn, {"n1"})}}});
  CHECK(PlacementAllows(in, MakeNode("n1")));
  CHECK(Why(in, MakeNode("n2")) == "required node affinity does not match");
  const Pod not_in = Affinity({NodeSelectorTerm{
      .match_fields = {Req(std::string(kNodeNameField), NodeSelectorOp::kNotIn, {"n1"})}}});
  CHECK_FALSE(PlacementAllows(not_in, MakeNode("n1")));
  CHECK(PlacementAllows(not_in, MakeNode("n2")));
  // Fields and expressions of one term must both hold.
  const Pod both = Affinity({NodeSelectorTerm{
      .match_expressions = {Req("zone", NodeSelectorOp::kIn, {"z1"})},
      .match_fields = {Req(std::string(kNodeNameField), NodeSelectorOp::kIn, {"n1"})}}});
  CHECK(PlacementAllows(both, MakeNode("n1", {{"zone", "z1"}})));
  CHECK_FALSE(PlacementAllows(both, MakeNode("n1", {{"zone", "z2"}})));
  CHECK_FALSE(PlacementAllows(both, MakeNode("n2", {{"zone", "z1"}})));
}

TEST_CASE("placement: terms are ORed - requirements within a term ANDed", "[placement]") {
  const Pod pod = Affinity({
      NodeSelectorTerm{.match_expressions = {Req("zone", NodeSelectorOp::kIn, {"z1"}),
                                             Req("gpu", NodeSelectorOp::kExists)}},
      NodeSelectorTerm{.match_expressions = {Req("zone", NodeSelectorOp::kIn, {"z2"})}},
  });
  CHECK(PlacementAllows(pod, MakeNode("n", {{"zone", "z1"}, {"gpu", "a100"}})));
  CHECK_FALSE(PlacementAllows(pod, MakeNode("n", {{"zone", "z1"}})));  // first term half true
  CHECK(PlacementAllows(pod, MakeNode("n", {{"zone", "z2"}})));         // second term
  CHECK_FALSE(PlacementAllows(pod, MakeNode("n", {{"zone", "z3"}, {"gpu", "a100"}})));
}

TEST_CASE("placement: an empty term matches nothing - an empty term list too", "[placement]") {
  const Node node = MakeNode("n", {{"zone", "z1"}});
  // Kubernetes: "nil or empty term selects no objects".
  CHECK(Why(Affinity({NodeSelectorTerm{}}), node) == "required node affinity does not match");
  // ... but does not spoil another term that matches.
  CHECK(PlacementAllows(
      Affinity({NodeSelectorTerm{}, NodeSelectorTerm{.match_expressions = {Req("zone", NodeSelectorOp::kExists)}}}),
      node));
  // A required node affinity that is present without terms matches no node either.
  CHECK(Why(Affinity({}), node) == "required node affinity does not match");
  // Absent required affinity (nullopt) constrains nothing.
  PodPlacement none;
  none.tolerations.push_back(Toleration{.key = "k", .op = TolerationOp::kExists});
  CHECK(PlacementAllows(WithPlacement(none), node));
}

TEST_CASE("placement: nodeSelector and required affinity must both hold", "[placement]") {
  PodPlacement p;
  p.node_selector.Set("pool", "a");
  p.required_terms = std::vector<NodeSelectorTerm>{
      NodeSelectorTerm{.match_expressions = {Req("zone", NodeSelectorOp::kIn, {"z1"})}}};
  const Pod pod = WithPlacement(std::move(p));
  CHECK(PlacementAllows(pod, MakeNode("n", {{"pool", "a"}, {"zone", "z1"}})));
  CHECK(Why(pod, MakeNode("n", {{"pool", "a"}, {"zone", "z2"}})) == "required node affinity does not match");
  CHECK(Why(pod, MakeNode("n", {{"pool", "b"}, {"zone", "z1"}})) == "node selector pool=a does not match");
}

TEST_CASE("placement: NoSchedule and NoExecute taints need a toleration", "[placement]") {
  const Pod plain;
  CHECK(Why(plain, Tainted("gpu", "true", "NoSchedule")) == "untolerated taint gpu=true:NoSchedule");
  CHECK(Why(plain, Tainted("dedicated", "", "NoExecute")) == "untolerated taint dedicated:NoExecute");
  // PreferNoSchedule is a preference no filter reads.
  CHECK(PlacementAllows(plain, Tainted("gpu", "true", "PreferNoSchedule")));

  const Pod equal = Tolerating({Toleration{.key = "gpu", .op = TolerationOp::kEqual, .value = "true",
                                           .effect = "NoSchedule"}});
  CHECK(PlacementAllows(equal, Tainted("gpu", "true", "NoSchedule")));
  CHECK(Why(equal, Tainted("gpu", "false", "NoSchedule")) == "untolerated taint gpu=false:NoSchedule");
  CHECK_FALSE(PlacementAllows(equal, Tainted("gpu", "true", "NoExecute")));  // other effect
  CHECK_FALSE(PlacementAllows(equal, Tainted("tpu", "true", "NoSchedule")));  // other key

  // Exists matches every value of the key.
  const Pod exists = Tolerating({Toleration{.key = "gpu", .op = TolerationOp::kExists, .effect = "NoExecute"}});
  CHECK(PlacementAllows(exists, Tainted("gpu", "anything", "NoExecute")));
  CHECK(PlacementAllows(exists, Tainted("gpu", "", "NoExecute")));
  CHECK_FALSE(PlacementAllows(exists, Tainted("gpu", "x", "NoSchedule")));

  // No effect: every effect of the key=value.
  const Pod any_effect = Tolerating({Toleration{.key = "gpu", .op = TolerationOp::kEqual, .value = "true"}});
  CHECK(PlacementAllows(any_effect, Tainted("gpu", "true", "NoSchedule")));
  CHECK(PlacementAllows(any_effect, Tainted("gpu", "true", "NoExecute")));
  CHECK_FALSE(PlacementAllows(any_effect, Tainted("gpu", "false", "NoExecute")));

  // Empty key with Exists tolerates everything.
  const Pod all = Tolerating({Toleration{.op = TolerationOp::kExists}});
  CHECK(PlacementAllows(all, Tainted("gpu", "true", "NoSchedule")));
  CHECK(PlacementAllows(all, Tainted("anything", "", "NoExecute")));
  // ... and with an effect, every taint of that effect only.
  const Pod all_no_schedule = Tolerating({Toleration{.op = TolerationOp::kExists, .effect = "NoSchedule"}});
  CHECK(PlacementAllows(all_no_schedule, Tainted("x", "y", "NoSchedule")));
  CHECK_FALSE(PlacementAllows(all_no_schedule, Tainted("x", "y", "NoExecute")));
}

TEST_CASE("placement: every taint of the node must be tolerated", "[placement]") {
  Node node = Tainted("gpu", "true", "NoSchedule");
  node.taints.push_back(Taint{.key = "spot", .value = "", .effect = "NoExecute"});
  node.taints.push_back(Taint{.key = "soft", .value = "", .effect = "PreferNoSchedule"});
  const Pod one = Tolerating({Toleration{.key = "gpu", .op = TolerationOp::kExists}});
  CHECK(Why(one, node) == "untolerated taint spot:NoExecute");
  const Pod both = Tolerating({Toleration{.key = "gpu", .op = TolerationOp::kExists},
                               Toleration{.key = "spot", .op = TolerationOp::kExists}});
  CHECK(PlacementAllows(both, node));
}

TEST_CASE("placement: a cordoned node only for pods tolerating the unschedulable taint", "[placement]") {
  Node cordoned = MakeNode("c");
  cordoned.unschedulable = true;
  CHECK(Why(Pod{}, cordoned) == "node is cordoned");
  // Some other toleration does not help.
  CHECK_FALSE(PlacementAllows(Tolerating({Toleration{.key = "gpu", .op = TolerationOp::kExists}}), cordoned));
  // Other constraints of the pod do not either.
  PodPlacement selector;
  selector.node_selector.Set("pool", "a");
  cordoned.labels.Set("pool", "a");
  CHECK(Why(WithPlacement(selector), cordoned) == "node is cordoned");

  const Pod tolerates = Tolerating({Toleration{.key = std::string(kUnschedulableTaintKey),
                                               .op = TolerationOp::kExists,
                                               .effect = "NoSchedule"}});
  CHECK(PlacementAllows(tolerates, cordoned));
  // Without effect it tolerates every effect, NoSchedule included; Equal with no value matches
  // the taint's empty value.
  CHECK(PlacementAllows(Tolerating({Toleration{.key = std::string(kUnschedulableTaintKey),
                                               .op = TolerationOp::kExists}}),
                        cordoned));
  CHECK(PlacementAllows(Tolerating({Toleration{.key = std::string(kUnschedulableTaintKey),
                                               .op = TolerationOp::kEqual}}),
                        cordoned));
  // A NoExecute-only toleration does not cover NoSchedule.
  CHECK_FALSE(PlacementAllows(Tolerating({Toleration{.key = std::string(kUnschedulableTaintKey),
                                                     .op = TolerationOp::kExists,
                                                     .effect = "NoExecute"}}),
                              cordoned));
  // Tolerate-everything covers the cordon too.
  CHECK(PlacementAllows(Tolerating({Toleration{.op = TolerationOp::kExists}}), cordoned));
}

TEST_CASE("placement: the checks come in kube-scheduler's filter order", "[placement]") {
  Node node = Tainted("gpu", "true", "NoSchedule");
  node.unschedulable = true;
  PodPlacement p;
  p.node_selector.Set("pool", "a");
  const Pod pod = WithPlacement(p);
  CHECK(Why(pod, node) == "node is cordoned");
  node.unschedulable = false;
  CHECK(Why(pod, node) == "untolerated taint gpu=true:NoSchedule");
  node.taints.clear();
  CHECK(Why(pod, node) == "node selector pool=a does not match");
}

}  // namespace
}  // namespace berth::core
