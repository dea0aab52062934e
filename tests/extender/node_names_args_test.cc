// DecodeNodeNamesArgs: kube-scheduler's node-name form of ExtenderArgs, read without a parse of
// the whole body, must give exactly what the general decoder gives, and leave every other body to it.

#include <catch2/catch.hpp>

#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_replace.h"
#include "core/resources.h"
#include "core/strings.h"
#include "extender/decoded_pod_cache.h"
#include "extender/json.h"
#include "extender/protocol.h"
#include "policy/verdict.h"
#include "tests/testing/files.h"
#include "tests/testing/same_objects.h"

namespace berth::extender {
namespace {

// The general way: the whole body parsed, then decoded. The names point into `doc`.
struct General {
  std::optional<JsonDocument> doc;
  absl::StatusOr<ExtenderArgs> args = absl::UnknownError("not decoded");
};

General DecodeGenerally(std::string_view body, const core::ResourceNames& names) {
  General g;
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(body);
  if (!doc.ok()) {
    g.args = doc.status();
    return g;
  }
  g.doc = *std::move(doc);
  g.args = DecodeExtenderArgs(g.doc->root(), names);
  return g;
}

void CheckSameArgs(const ExtenderArgs& fast, const ExtenderArgs& general) {
  CheckSamePod(fast.pod, general.pod);
  CHECK(fast.pod.started == general.pod.started);
  CHECK(fast.pod.active_deadline_seconds == general.pod.active_deadline_seconds);
  CHECK(fast.pod.unknown_requests == general.pod.unknown_requests);
  CHECK(fast.full_nodes == general.full_nodes);
  CHECK(fast.node_names == general.node_names);
  CHECK(fast.node_objects.empty());
  // The names were checked as they were read: the answers copy them as they are, and say
  // exactly what the general decoder's args (names looked at again) make them say.
  REQUIRE(fast.names_plain);
  CHECK_FALSE(general.names_plain);
  std::vector<policy::NodeVerdict> verdicts(fast.node_names.size());
  std::vector<int64_t> scores(fast.node_names.size());
  for (size_t i = 0; i < verdicts.size(); ++i) {
    CHECK(PlainJsonText(fast.node_names[i]));
    if (i % 3 == 1) verdicts[i] = {.fit = policy::Fit::kUnschedulable, .message = "no room"};
    if (i % 3 == 2) verdicts[i] = {.fit = policy::Fit::kUnresolvable, .message = "never"};
    scores[i] = static_cast<int64_t>(i % 4);
  }
  for (AnswerForm form : {AnswerForm::kShort, AnswerForm::kLong}) {
    CHECK(EncodeFilterResult(fast, verdicts, form) == EncodeFilterResult(general, verdicts, form));
    CHECK(EncodePriorityList(fast.node_names, scores, form, /*hosts_plain=*/true) ==
          EncodePriorityList(general.node_names, scores, form));
  }
}

// The fixture's text with its whitespace taken out, members in their order (as on the wire).
std::string Compact(const std::string& text) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
  REQUIRE(doc.ok());
  return simdjson::to_string(doc->root());
}

core::ResourceNames& Names() {
  static core::ResourceNames names;
  return names;
}

// A small body in kube-scheduler's form around `pod_extra` (members added to the pod's object).
std::string SmallBody(std::string_view pod_extra = "") {
  return StrCat(R"({"Pod":{"metadata":{"name":"p","namespace":"ns","uid":"u-1")", pod_extra,
                R"(},"spec":{"schedulerName":"berth","containers":[{"name":"c","resources":{"requests":)",
                R"({"cpu":"1","memory":"1Gi"}}}]}},"Nodes":null,"NodeNames":["node-a","node-b","node-c"]})");
}

TEST_CASE("node-name args: kube-scheduler's requests are read as the general decoder reads them",
          "[protocol]") {
  for (const char* file : {"filter-request-nodecache-1.json", "filter-request-nodecache-2.json",
                           "prioritize-request-nodecache-1.json"}) {
    const std::string captured = testing::ReadFixture(std::string("") + file);
    for (const std::string& body : {captured, Compact(captured), Compact(captured) + "\n"}) {
      INFO(file << ": " << body.substr(0, 60));
      const General general = DecodeGenerally(body, Names());
      REQUIRE(general.args.ok());
      REQUIRE_FALSE(general.args->node_names.empty());
      std::optional<ExtenderArgs> fast = DecodeNodeNamesArgs(body, Names(), nullptr);
      REQUIRE(fast.has_value());
      CheckSameArgs(*fast, *general.args);
      // With a cache: the first read decodes the pod and remembers it, the second takes it.
      DecodedPodCache cache;
      fast = DecodeNodeNamesArgs(body, Names(), &cache);
      REQUIRE(fast.has_value());
      CHECK(cache.hits() == 0);
      fast = DecodeNodeNamesArgs(body, Names(), &cache);
      REQUIRE(fast.has_value());
      CHECK(cache.hits() == 1);
      CheckSameArgs(*fast, *general.args);
    }
  }
}

TEST_CASE("node-name args: other forms are left to the general decoder", "[protocol]") {
  const std::string base = SmallBody();
  REQUIRE(DecodeNodeNamesArgs(base, Names(), nullptr).has_value());
  // Without "Nodes": still read, and the same.
  const std::string no_nodes = absl::StrReplaceAll(base, {{R"("Nodes":null,)", ""}});
  std::optional<ExtenderArgs> fast = DecodeNodeNamesArgs(no_nodes, Names(), nullptr);
  REQUIRE(fast.has_value());
  CheckSameArgs(*fast, *DecodeGenerally(no_nodes, Names()).args);

  struct Case {
    std::string what;
    std::string body;
    std::string error;  // the general decoder's, when it refuses the body
  };
  const std::vector<Case> cases = {
      {"members in another order",
       absl::StrReplaceAll(base, {{R"("Nodes":null,"NodeNames":["node-a","node-b","node-c"])",
                             R"("NodeNames":["node-a","node-b","node-c"],"Nodes":null)"}}), ""},
      {"the pod's key in lower case", absl::StrReplaceAll(base, {{R"({"Pod":)", R"({"pod":)"}}), ""},
      {"a name with an escape", absl::StrReplaceAll(base, {{R"("node-b")", R"("node\u002db")"}}), ""},
      {"a name beyond ASCII", absl::StrReplaceAll(base, {{R"("node-b")", "\"n\xc3\xb6" "de-b\""}}), ""},
      {"Nodes not null", absl::StrReplaceAll(base, {{R"("Nodes":null)", R"("Nodes":{})"}}), ""},
      {"a member more", absl::StrReplaceAll(base, {{R"("Nodes":null,)", R"("Nodes":null,"X":1,)"}}), ""},
      {"bytes after the object", base + "x", "JSON"},
      {"a number for a name", absl::StrReplaceAll(base, {{R"("node-b")", "7"}}), "NodeNames[1]"},
      {"a name not ended", base.substr(0, base.size() - 10), "JSON"},
      {"names not ended", absl::StrReplaceAll(base, {{"]}", "}"}}), "JSON"},
      {"a pod that is not an object", StrCat(R"({"Pod":[],"Nodes":null,"NodeNames":["a"]})"), "Pod"},
      {"a pod with a bad request", absl::StrReplaceAll(base, {{R"("cpu":"1")", R"("cpu":"one")"}}), "cpu"},
      {"a raw control byte in a name", absl::StrReplaceAll(base, {{R"("node-b")", "\"node\x01-b\""}}), "JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.what << ": " << c.body);
    CHECK_FALSE(DecodeNodeNamesArgs(c.body, Names(), nullptr).has_value());
    const General general = DecodeGenerally(c.body, Names());
    if (c.error.empty()) {
      CHECK(general.args.ok());
    } else {
      REQUIRE_FALSE(general.args.ok());
      CHECK_THAT(std::string(general.args.status().message()), Catch::Contains(c.error));
    }
  }
  // The full-object form (nodeCacheCapable: false), as captured.
  const std::string full = testing::ReadFixture("filter-request-1.json");
  CHECK_FALSE(DecodeNodeNamesArgs(full, Names(), nullptr).has_value());
  CHECK(DecodeGenerally(full, Names()).args.ok());
}

TEST_CASE("node-name args: the pod ends where its value ends, whatever follows a brace inside it",
          "[protocol]") {
  // The reader takes the first `},"Nodes":` as the pod's end only if the pod parses there; in
  // these pods it comes first inside the pod, where the text up to it is not a whole value.
  for (const std::string& body :
       {SmallBody(R"(,"x":{"y":{},"Nodes":null,"NodeNames":["node-z"]})"),
        SmallBody(R"(,"x":[{},"Nodes"],"y":{"a":{},"Nodes":1})"),
        SmallBody(R"(,"annotations":{"a":"},\"Nodes\":null,\"NodeNames\":[\"node-z\"]}"})")}) {
    INFO(body);
    const General general = DecodeGenerally(body, Names());
    REQUIRE(general.args.ok());
    DecodedPodCache cache;
    std::optional<ExtenderArgs> fast = DecodeNodeNamesArgs(body, Names(), &cache);
    REQUIRE(fast.has_value());
    CheckSameArgs(*fast, *general.args);
    CHECK(fast->node_names == std::vector<std::string_view>{"node-a", "node-b", "node-c"});
    // The same pod with other names: taken from the cache, and the names after it read.
    const std::string other = absl::StrReplaceAll(body, {{R"(["node-a","node-b","node-c"])", R"(["node-q"])"}});
    fast = DecodeNodeNamesArgs(other, Names(), &cache);
    REQUIRE(fast.has_value());
    CHECK(cache.hits() == 1);
    CheckSameArgs(*fast, *DecodeGenerally(other, Names()).args);
  }
}

TEST_CASE("node-name args: every edited body the fast reader takes, the general decoder reads the same",
          "[protocol]") {
  const std::string bytes = "\"\\,:[]{} \n\tanN0-\x01\x80\xc3";
  std::mt19937 rng(11);
  int taken = 0;
  int refused_by_both = 0;
  // The second pod holds `},"Nodes":` in its own structure, before the real one.
  for (const std::string& base : {SmallBody(R"(,"labels":{"berth.io/queue":"q"})"),
                                  SmallBody(R"(,"x":{"y":{},"Nodes":null})")})
  for (int round = 0; round < 20000; ++round) {
    std::string body = base;
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      const size_t at = rng() % body.size();
      const char b = bytes[rng() % bytes.size()];
      switch (rng() % 3) {
        case 0: body[at] = b; break;
        case 1: body.insert(body.begin() + static_cast<std::ptrdiff_t>(at), b); break;
        default: body.erase(at, 1);
      }
    }
    const std::optional<ExtenderArgs> fast = DecodeNodeNamesArgs(body, Names(), nullptr);
    const General general = DecodeGenerally(body, Names());
    if (!fast) {
      refused_by_both += general.args.ok() ? 0 : 1;
      continue;
    }
    INFO("body: " << body);
    ++taken;
    REQUIRE(general.args.ok());
    CheckSameArgs(*fast, *general.args);
  }
  // Edits inside names and the pod's strings keep the body readable both ways.
  CHECK(taken > 2000);
  CHECK(refused_by_both > 2000);
}

TEST_CASE("node-name args: a pod nested to the parser's limit is read only where the whole body is",
          "[protocol]") {
  for (size_t depth = kDefaultMaxDepth - 6; depth <= kDefaultMaxDepth + 2; ++depth) {
    // An unknown member of the pod, arrays `depth` deep, which the pod decoder skips.
    const std::string body = SmallBody(StrCat(R"(,"x":)", std::string(depth, '['), std::string(depth, ']')));
    INFO("depth " << depth);
    const bool general_ok = DecodeGenerally(body, Names()).args.ok();
    CHECK(DecodeNodeNamesArgs(body, Names(), nullptr).has_value() == general_ok);
    if (depth == kDefaultMaxDepth - 6) CHECK(general_ok);
    if (depth == kDefaultMaxDepth + 2) CHECK_FALSE(general_ok);
  }
}

}  // namespace
}  // namespace berth::extender
