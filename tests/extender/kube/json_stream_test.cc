#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "extender/kube/reflector.h"
#include "simdjson.h"

namespace berth::extender::kube {
namespace {

std::vector<std::string> SplitAll(JsonStreamSplitter& s, std::string_view data, absl::Status* status) {
  std::vector<std::string> out;
  *status = s.Feed(data, [&](std::string_view v) {
    out.emplace_back(v);
    return true;
  });
  return out;
}

// The values of `data` fed to a new splitter in two chunks, cut at `cut`; checks that neither
// chunk is an error.
std::vector<std::string> SplitInTwo(std::string_view data, size_t cut) {
  JsonStreamSplitter s;
  absl::Status st;
  std::vector<std::string> got = SplitAll(s, data.substr(0, cut), &st);
  CHECK(st.ok());
  std::vector<std::string> rest = SplitAll(s, data.substr(cut), &st);
  CHECK(st.ok());
  got.insert(got.end(), rest.begin(), rest.end());
  return got;
}

// Three watch events as the API server writes them, with braces, brackets, quotes and
// backslashes inside strings that a naive splitter would miscount.
const std::string kEvents =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a{b\",\"annotations\":{\"x\":\"}]\\\"{\"}}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"c\\\\\"},\"spec\":[1,[2,{}]]}}\n"
    "  {\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}";

TEST_CASE("watch stream: values split correctly whatever the chunking", "[json-stream]") {
  const std::vector<std::string> expected = {
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a{b\",\"annotations\":{\"x\":\"}]\\\"{\"}}}}",
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"c\\\\\"},\"spec\":[1,[2,{}]]}}",
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}"};
  SECTION("one chunk") {
    JsonStreamSplitter s;
    absl::Status st;
    CHECK(SplitAll(s, kEvents, &st) == expected);
    CHECK(st.ok());
    CHECK(s.buffered() == 0);
  }
  SECTION("every split point, two chunks") {
    for (size_t cut = 0; cut <= kEvents.size(); ++cut) {
      INFO("cut at " << cut);
      CHECK(SplitInTwo(kEvents, cut) == expected);
    }
  }
  SECTION("byte by byte") {
    JsonStreamSplitter s;
    std::vector<std::string> got;
    for (char c : kEvents) {
      absl::Status st;
      std::vector<std::string> part = SplitAll(s, std::string_view(&c, 1), &st);
      REQUIRE(st.ok());
      got.insert(got.end(), part.begin(), part.end());
    }
    CHECK(got == expected);
  }
}

// Events as the API server sends them are mostly long runs of plain text, which the splitter
// skips eight bytes at a time: quotes, backslashes, braces and brackets at every offset of such
// a run, and every split point, must still split exactly where the values end.
TEST_CASE("watch stream: long events split correctly with special bytes at every offset",
          "[json-stream]") {
  std::vector<std::string> expected;
  for (size_t at = 0; at < 24; ++at) {
    std::string text(40, 'x');
    std::string escaped = text;
    escaped.replace(at, 1, at % 2 == 0 ? "\\\"" : "\\\\");  // an escaped quote or backslash
    std::string filler(at, 'y');
    expected.push_back("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"" + escaped +
                       "\",\"n\":" + std::to_string(12345678901LL * static_cast<int64_t>(at + 1)) +
                       ",\"" + filler + "\":[{\"k\":\"" + text.substr(at) + "}]{[\"}]}," +
                       std::string(at, ' ') + "\"nums\":" + std::string(at, ' ') +
                       "[1234567890123,1234567890123,[1234567890123,{}]],\"last\":true}}");
  }
  std::string stream;
  for (const std::string& e : expected) stream += e + "\n";
  SECTION("one chunk") {
    JsonStreamSplitter s;
    absl::Status st;
    CHECK(SplitAll(s, stream, &st) == expected);
    CHECK(st.ok());
  }
  SECTION("every split point, two chunks") {
    for (size_t cut = 0; cut <= stream.size(); cut += 3) {
      INFO("cut at " << cut);
      CHECK(SplitInTwo(stream, cut) == expected);
    }
  }
}

TEST_CASE("watch stream: garbage, oversized values and early stop are errors", "[json-stream]") {
  absl::Status st;
  SECTION("not JSON") {
    JsonStreamSplitter s;
    SplitAll(s, "<html>502 Bad Gateway</html>", &st);
    CHECK(st.code() == absl::StatusCode::kDataLoss);
    CHECK(std::string(st.message()).find("expected a JSON object") != std::string::npos);
  }
  SECTION("a value over the limit") {
    JsonStreamSplitter s(64);
    SplitAll(s, "{\"a\":\"" + std::string(100, 'x'), &st);
    CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  }
  SECTION("the consumer stops") {
    JsonStreamSplitter s;
    int seen = 0;
    st = s.Feed("{}{}{}", [&](std::string_view) { return ++seen < 2; });
    CHECK(st.code() == absl::StatusCode::kCancelled);
    CHECK(seen == 2);
  }
}

// FeedParsed's values: each value's text, or "!" and the error that ended the feed.
std::vector<std::string> ParseAll(JsonStreamSplitter& s, simdjson::dom::parser& parser,
                                  const std::vector<std::string>& chunks) {
  std::vector<std::string> out;
  for (const std::string& chunk : chunks) {
    absl::Status st = s.FeedParsed(chunk, parser, [&](std::string_view text, simdjson::dom::element root) {
      out.emplace_back(text);
      CHECK(simdjson::to_string(root) == simdjson::to_string(parser.parse(std::string(text)).value()));
      return true;
    });
    if (!st.ok()) {
      out.push_back("!" + std::string(st.message()));
      break;
    }
  }
  return out;
}

TEST_CASE("watch stream: parsed values are Feed's values, one event a chunk taken whole", "[json-stream]") {
  const std::vector<std::string> events = {
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a{b\\n\",\"x\":\"}]\\\"{\"}}}",
      "{\"type\":\"MODIFIED\",\"object\":{\"spec\":[1,[2,{}]]}}",
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}"};
  simdjson::dom::parser parser;
  SECTION("one event and its newline a chunk, as kube-apiserver writes them: no scan") {
    std::vector<std::string> chunks;
    for (const std::string& e : events) chunks.push_back(e + "\n");
    JsonStreamSplitter s;
    CHECK(ParseAll(s, parser, chunks) == events);
    CHECK(s.whole_lines() == 3);
    CHECK(s.buffered() == 0);
  }
  SECTION("every split of the stream in two chunks gives the same values") {
    std::string stream;
    for (const std::string& e : events) stream += e + "\n";
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      INFO("cut at " << cut);
      JsonStreamSplitter s;
      CHECK(ParseAll(s, parser, {stream.substr(0, cut), stream.substr(cut)}) == events);
      CHECK(s.whole_lines() <= 1);
    }
  }
  SECTION("an event pretty-printed over several lines, a line a chunk, is scanned") {
    JsonStreamSplitter s;
    CHECK(ParseAll(s, parser, {"{\n", "  \"type\": \"ADDED\",\n", "  \"object\": {}\n", "}\n", events[1] + "\n"}) ==
          std::vector<std::string>{"{\n  \"type\": \"ADDED\",\n  \"object\": {}\n}", events[1]});
    CHECK(s.whole_lines() == 1);
  }
  SECTION("two events on one line are both read") {
    JsonStreamSplitter s;
    CHECK(ParseAll(s, parser, {events[0] + events[1] + "\n"}) ==
          std::vector<std::string>{events[0], events[1]});
    CHECK(s.whole_lines() == 0);
  }
  SECTION("a balanced value that is not JSON, and bytes after a value, are the errors Feed gives") {
    JsonStreamSplitter a;
    CHECK(ParseAll(a, parser, {"{\"a\":tru}\n"}) ==
          std::vector<std::string>{"!watch stream: an event is not valid JSON"});
    JsonStreamSplitter b;
    CHECK(ParseAll(b, parser, {"{}x\n"}) ==
          std::vector<std::string>{"{}", "!watch stream: expected a JSON object, found 'x'"});
    JsonStreamSplitter c;
    int seen = 0;
    CHECK(c.FeedParsed(events[0] + "\n", parser, [&](std::string_view, simdjson::dom::element) {
             return ++seen > 1;
           }).code() == absl::StatusCode::kCancelled);
  }
}

TEST_CASE("object keys follow the model's identities", "[json-stream]") {
  CHECK(ObjectKey("Pod", "uid-1", "ns", "a") == "uid-1");
  CHECK(ObjectKey("Node", "", "", "n1") == "n1");
  CHECK(ObjectKey("PodGroup", "u", "ml", "train") == "ml/train");
  CHECK(ObjectKey("Pool", "u", "", "gpu") == "gpu");
}

}  // namespace
}  // namespace berth::extender::kube
