// Tests of core::LabelSelector: Kubernetes' metav1.LabelSelector semantics over berth's Labels.

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/objects.h"

namespace berth::core {
namespace {

Labels L(std::initializer_list<std::pair<std::string, std::string>> kv) {
  Labels l;
  for (const auto& [k, v] : kv) l.Set(k, v);
  return l;
}

SelectorRequirement Req(std::string key, SelectorOp op, std::vector<std::string> values = {}) {
  return SelectorRequirement{.key = std::move(key), .op = op, .values = std::move(values)};
}

LabelSelector Expr(SelectorRequirement r) {
  LabelSelector s;
  s.match_expressions.push_back(std::move(r));
  return s;
}

TEST_CASE("LabelSelector: the empty selector matches every label set", "[selector]") {
  const LabelSelector empty;
  CHECK(empty.empty());
  CHECK(empty.Matches(Labels{}));
  CHECK(empty.Matches(L({{"pool", "demo"}, {"gpu", "a100"}})));
  CHECK(empty.DebugString().empty());
  CHECK(empty.Validate().ok());
}

TEST_CASE("LabelSelector: matchLabels needs every key with exactly its value", "[selector]") {
  LabelSelector s;
  s.match_labels.Set("pool", "demo");
  s.match_labels.Set("gpu", "a100");
  CHECK_FALSE(s.empty());
  CHECK(s.Matches(L({{"pool", "demo"}, {"gpu", "a100"}})));
  CHECK(s.Matches(L({{"pool", "demo"}, {"gpu", "a100"}, {"zone", "a"}})));  // extra labels ok
  CHECK_FALSE(s.Matches(L({{"pool", "demo"}})));                            // key absent
  CHECK_FALSE(s.Matches(L({{"pool", "demo"}, {"gpu", "h100"}})));           // other value
  CHECK_FALSE(s.Matches(L({{"pool", "Demo"}, {"gpu", "a100"}})));           // case matters
  CHECK_FALSE(s.Matches(Labels{}));
  // An empty value must be present as an empty value, not absent.
  LabelSelector blank;
  blank.match_labels.Set("role", "");
  CHECK(blank.Matches(L({{"role", ""}})));
  CHECK_FALSE(blank.Matches(Labels{}));
}

TEST_CASE("LabelSelector: In matches a present key with a listed value", "[selector]") {
  const LabelSelector s = Expr(Req("gpu", SelectorOp::kIn, {"a100", "h100"}));
  CHECK(s.Matches(L({{"gpu", "a100"}})));
  CHECK(s.Matches(L({{"gpu", "h100"}})));
  CHECK_FALSE(s.Matches(L({{"gpu", "v100"}})));
  CHECK_FALSE(s.Matches(Labels{}));  // absent key: not in the set
  CHECK_FALSE(s.Matches(L({{"gpux", "a100"}})));
}

TEST_CASE("LabelSelector: NotIn matches an absent key or an unlisted value", "[selector]") {
  const LabelSelector s = Expr(Req("tier", SelectorOp::kNotIn, {"spot", "preemptible"}));
  CHECK(s.Matches(Labels{}));  // as Kubernetes does: absent is "not in"
  CHECK(s.Matches(L({{"tier", "reserved"}})));
  CHECK_FALSE(s.Matches(L({{"tier", "spot"}})));
  CHECK_FALSE(s.Matches(L({{"tier", "preemptible"}})));
}

TEST_CASE("LabelSelector: Exists and DoesNotExist look only at the key", "[selector]") {
  const LabelSelector exists = Expr(Req("gpu", SelectorOp::kExists));
  CHECK(exists.Matches(L({{"gpu", ""}})));
  CHECK(exists.Matches(L({{"gpu", "anything"}})));
  CHECK_FALSE(exists.Matches(L({{"cpu", "true"}})));
  const LabelSelector absent = Expr(Req("gpu", SelectorOp::kDoesNotExist));
  CHECK(absent.Matches(L({{"cpu", "true"}})));
  CHECK(absent.Matches(Labels{}));
  CHECK_FALSE(absent.Matches(L({{"gpu", ""}})));
}

TEST_CASE("LabelSelector: all requirements must hold together", "[selector]") {
  LabelSelector s;
  s.match_labels.Set("pool", "train");
  s.match_expressions = {Req("gpu", SelectorOp::kIn, {"a100", "h100"}),
                         Req("spot", SelectorOp::kDoesNotExist),
                         Req("zone", SelectorOp::kNotIn, {"c"})};
  CHECK(s.Matches(L({{"pool", "train"}, {"gpu", "h100"}, {"zone", "a"}})));
  CHECK(s.Matches(L({{"pool", "train"}, {"gpu", "a100"}})));
  CHECK_FALSE(s.Matches(L({{"pool", "infer"}, {"gpu", "h100"}})));                 // matchLabels
  CHECK_FALSE(s.Matches(L({{"pool", "train"}, {"gpu", "t4"}})));                   // In
  CHECK_FALSE(s.Matches(L({{"pool", "train"}, {"gpu", "a100"}, {"spot", "1"}})));  // DoesNotExist
  CHECK_FALSE(s.Matches(L({{"pool", "train"}, {"gpu", "a100"}, {"zone", "c"}})));  // NotIn
  CHECK(s.DebugString() == "pool=train,gpu in (a100,h100),!spot,zone notin (c)");
  CHECK(s.Validate().ok());
}

TEST_CASE("LabelSelector: operator names parse exactly", "[selector]") {
  for (SelectorOp op :
       {SelectorOp::kIn, SelectorOp::kNotIn, SelectorOp::kExists, SelectorOp::kDoesNotExist}) {
    CHECK(ParseSelectorOp(SelectorOpName(op)) == op);
  }
  CHECK(ParseSelectorOp("in") == std::nullopt);  // Kubernetes' operators are case-sensitive
  CHECK(ParseSelectorOp("Gt") == std::nullopt);  // node selectors only
  CHECK(ParseSelectorOp("") == std::nullopt);
}

TEST_CASE("LabelSelector: validation of requirements", "[selector]") {
  CHECK(ValidateRequirement(Req("k", SelectorOp::kIn, {"a"})).ok());
  CHECK(ValidateRequirement(Req("k", SelectorOp::kNotIn, {"a", "b"})).ok());
  CHECK(ValidateRequirement(Req("k", SelectorOp::kExists)).ok());
  CHECK(ValidateRequirement(Req("k", SelectorOp::kDoesNotExist)).ok());

  const absl::Status no_values = ValidateRequirement(Req("k", SelectorOp::kIn));
  CHECK(no_values.code() == absl::StatusCode::kInvalidArgument);
  CHECK(no_values.message() == "operator In needs at least one value");
  CHECK(ValidateRequirement(Req("k", SelectorOp::kNotIn)).message() ==
        "operator NotIn needs at least one value");
  CHECK(ValidateRequirement(Req("k", SelectorOp::kExists, {"a"})).message() ==
        "operator Exists takes no values, got 1");
  CHECK(ValidateRequirement(Req("k", SelectorOp::kDoesNotExist, {"a", "b"})).message() ==
        "operator DoesNotExist takes no values, got 2");
  CHECK(ValidateRequirement(Req("", SelectorOp::kExists)).message() == "the key is required");

  LabelSelector s;
  s.match_expressions = {Req("ok", SelectorOp::kExists), Req("bad", SelectorOp::kIn)};
  CHECK(s.Validate().message() == "matchExpressions[1]: operator In needs at least one value");
}

TEST_CASE("LabelSelector: equality compares labels and expressions", "[selector]") {
  LabelSelector a;
  a.match_labels.Set("x", "1");
  a.match_expressions = {Req("k", SelectorOp::kIn, {"a"})};
  LabelSelector b = a;
  CHECK(a == b);
  b.match_expressions[0].values.push_back("b");
  CHECK_FALSE(a == b);
  b = a;
  b.match_labels.Set("x", "2");
  CHECK_FALSE(a == b);
}

}  // namespace
}  // namespace berth::core
