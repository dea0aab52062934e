// Tests of extender/json: the JSON writer the verbs answer through, the parse entry points and
// their error messages, and the typed field getters.

#include "extender/json.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/strings.h"
#include "nlohmann/json.hpp"
#include "tests/testing/text.h"

namespace berth::extender {
namespace {

using berth::testing::Contains;

std::string Quoted(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// ---- JsonWriter ---------------------------------------------------------------------------------

TEST_CASE("AppendJsonString escapes quotes - backslashes and control characters", "[json]") {
  CHECK(Quoted("plain") == R"("plain")");
  CHECK(Quoted("") == R"("")");
  CHECK(Quoted(R"(say "hi")") == R"("say \"hi\"")");
  CHECK(Quoted(R"(C:\dir\file)") == R"("C:\\dir\\file")");
  CHECK(Quoted("a\nb\rc\td") == R"("a\nb\rc\td")");
  CHECK(Quoted(std::string_view("\x01", 1)) == R"("\u0001")");
  CHECK(Quoted(std::string_view("\x1f", 1)) == R"("\u001f")");
  CHECK(Quoted(std::string_view("\b\f", 2)) == R"("\u0008\u000c")");
  // NUL inside the text is escaped, not a terminator.
  CHECK(Quoted(std::string_view("a\0b", 3)) == R"("a\u0000b")");
  // 0x7f and all of 0x20..0x7e except " and \ need no escape.
  CHECK(Quoted("\x7f ~/<>") == "\"\x7f ~/<>\"");
  // Escapes at the very start and end of the text.
  CHECK(Quoted("\"x\"") == R"("\"x\"")");
  CHECK(Quoted("\\") == R"("\\")");
}

TEST_CASE("AppendJsonString passes UTF-8 through unchanged", "[json]") {
  // "é", "日本", and U+1F680 (a 4-byte sequence), written as bytes.
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x9A\x80";
  CHECK(Quoted(text) == "\"" + text + "\"");
  // A JSON parser reads back exactly the original bytes.
  CHECK(nlohmann::json::parse(Quoted(text)).get<std::string>() == text);
}

TEST_CASE("AppendJsonString replaces invalid UTF-8 so the output stays valid JSON", "[json]") {
  // Error messages quote untrusted input: a stray byte must not make the whole reply invalid.
  CHECK(Quoted("a\xff" "b") == R"("a\ufffdb")");
  CHECK(Quoted("\xc3") == R"("\ufffd")");  // truncated 2-byte sequence at the end
  for (std::string_view bad : {std::string_view("\xc0\xaf"),           // overlong '/'
                               std::string_view("\xed\xa0\x80"),       // UTF-16 surrogate
                               std::string_view("\xf4\x90\x80\x80"),  // above U+10FFFF
                               std::string_view("\xe6\x97"),            // truncated
                               std::string_view("\x80")}) {             // lone continuation
    const std::string q = Quoted(bad);
    INFO(q);
    CHECK(Contains(q, "\\ufffd"));
    CHECK(nlohmann::json::accept(q));
  }
  // Valid sequences around an invalid byte are kept.
  CHECK(Quoted("\xc3\xa9\xff\xc3\xa9") == "\"\xc3\xa9\\ufffd\xc3\xa9\"");
}

TEST_CASE("AppendJsonString output is read back as the same string", "[json]") {
  std::string all;
  for (int c = 1; c < 128; ++c) all.push_back(static_cast<char>(c));
  const std::string q = Quoted(all);
  REQUIRE(nlohmann::json::accept(q));
  CHECK(nlohmann::json::parse(q).get<std::string>() == all);
}

TEST_CASE("AppendJsonString escapes a special byte at every position of every length", "[json]") {
  // Plain text is checked eight bytes at a time, the last word overlapping and short text
  // padded: a special byte must be found wherever it sits.
  for (size_t len = 1; len <= 25; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (char special : {'"', '\\', '\n', '\x01'}) {
        std::string text(len, 'n');
        text[at] = special;
        const std::string q = Quoted(text);
        INFO("length " << len << ", special byte at " << at);
        REQUIRE(nlohmann::json::accept(q));
        CHECK(nlohmann::json::parse(q).get<std::string>() == text);
        CHECK(q.size() > text.size() + 2);
      }
    }
    const std::string plain(len, 'n');
    CHECK(Quoted(plain) == "\"" + plain + "\"");
  }
}

TEST_CASE("AppendJsonString appends to what is already there", "[json]") {
  std::string out = "[";
  AppendJsonString(&out, "gpu-node-0001.zone-a.example.internal");
  out.push_back(',');
  AppendJsonString(&out, "n1");
  CHECK(out == R"(["gpu-node-0001.zone-a.example.internal","n1")");
}

// The object that is the value of the first member, when that member is `key`.
std::string_view FirstObject(std::string_view text, std::string_view key) {
  const auto first = FirstMember(text);
  return first && first->first == key ? LeadingObject(first->second) : std::string_view();
}

TEST_CASE("FirstMember and LeadingObject find the text of the first member's object", "[json]") {
  CHECK(FirstObject(R"({"Pod":{"a":1},"NodeNames":["x"]})", "Pod") == R"({"a":1})");
  // Whitespace anywhere JSON allows it.
  CHECK(FirstObject(" {\n \"Pod\" :\t{ \"a\" : [1, {\"b\":2}] } , \"x\":1}", "Pod") ==
        R"({ "a" : [1, {"b":2}] })");
  // Braces, brackets and escaped quotes inside strings do not end it.
  CHECK(FirstObject(R"({"Pod":{"m":"} ] \" }","n":{}},"x":{}})", "Pod") ==
        R"({"m":"} ] \" }","n":{}})");
  CHECK(FirstObject(R"({"Pod":{"m":"a\\"},"x":1})", "Pod") == R"({"m":"a\\"})");
  // The key as written, and the rest of the text from the value on.
  const auto first = FirstMember(R"({ "nodenames" : [], "pod":{}})");
  REQUIRE(first.has_value());
  CHECK(first->first == "nodenames");
  CHECK(first->second == R"([], "pod":{}})");
  // Not an object where one is needed, an escaped key, truncated, not an object at all.
  CHECK(FirstObject(R"({"Pod":null})", "Pod").empty());
  CHECK(FirstObject(R"({"Pod":[{}]})", "Pod").empty());
  CHECK(FirstObject(R"({"Pod":{"a":{})", "Pod").empty());
  CHECK_FALSE(FirstMember(R"({"P\u006fd":{}})").has_value());
  CHECK_FALSE(FirstMember(R"([{"Pod":{}}])").has_value());
  CHECK_FALSE(FirstMember(R"({"Pod")").has_value());
  CHECK_FALSE(FirstMember("").has_value());
}

TEST_CASE("LeadingObject ends at the right brace wherever the special bytes sit", "[json]") {
  // The scan jumps eight bytes at a time: braces, brackets, quotes and backslashes inside
  // strings, at every offset, must neither end the object early nor be missed.
  for (size_t pad = 0; pad < 20; ++pad) {
    const std::string filler(pad, 'x');
    for (std::string_view inside : {R"(})", R"(])", R"({)", R"(\")", R"(\\)", R"(\\\")"}) {
      const std::string object = StrCat(R"({"a":")", filler, inside, filler, R"(","b":[1,{"c":"}"}],)",
                                        R"("d":{}})");
      REQUIRE(nlohmann::json::accept(object));
      INFO(object);
      CHECK(LeadingObject(StrCat(object, R"(,"NodeNames":["n"]})")) == object);
      CHECK(LeadingObject(object) == object);
      CHECK(LeadingObject(object.substr(0, object.size() - 1)).empty());
    }
  }
  CHECK(LeadingObject("").empty());
  CHECK(LeadingObject(R"([{}])").empty());
  CHECK(LeadingObject(R"( {})").empty());
}

TEST_CASE("JsonWriter builds objects and arrays with the right separators", "[json]") {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject()
      .Key("a")
      .Int(1)
      .Key("b")
      .BeginArray()
      .Int(1)
      .String("x")
      .Bool(true)
      .Bool(false)
      .Null()
      .BeginObject()
      .EndObject()
      .BeginArray()
      .EndArray()
      .EndArray()
      .Key("c")
      .Raw(R"({"k":[1,2]})")
      .Key("d")
      .String("")
      .EndObject();
  CHECK(out == R"({"a":1,"b":[1,"x",true,false,null,{},[]],"c":{"k":[1,2]},"d":""})");
}

TEST_CASE("JsonWriter keys are escaped like values", "[json]") {
  std::string out;
  JsonWriter(&out).BeginObject().Key("we\"ird\\key\n").Int(0).EndObject();
  CHECK(out == R"({"we\"ird\\key\n":0})");
}

TEST_CASE("JsonWriter writes the int64 extremes exactly", "[json]") {
  std::string out;
  JsonWriter(&out)
      .BeginArray()
      .Int(std::numeric_limits<int64_t>::min())
      .Int(std::numeric_limits<int64_t>::max())
      .Int(0)
      .Int(-1)
      .EndArray();
  CHECK(out == "[-9223372036854775808,9223372036854775807,0,-1]");
}

TEST_CASE("JsonWriter appends to what the string already holds", "[json]") {
  std::string out = "prefix:";
  JsonWriter(&out).BeginArray().Int(7).EndArray();
  CHECK(out == "prefix:[7]");
}

// ---- DescribeSyntaxError ----------------------------------------------------------------------

TEST_CASE("DescribeSyntaxError names line and column of the problem", "[json]") {
  // The '}' is the 8th character of the 3rd line.
  const std::string text = "{\n  \"a\": 1,\n  \"b\": }";
  const std::string msg = DescribeSyntaxError(text);
  INFO(msg);
  CHECK(Contains(msg, "line 3, column 8"));
  CHECK(Contains(msg, "'}'"));
  // nlohmann's "[json.exception...]" prefix is not shown.
  CHECK_FALSE(Contains(msg, "json.exception"));
}

TEST_CASE("DescribeSyntaxError at the end of the input", "[json]") {
  const std::string msg = DescribeSyntaxError("[1,2");
  INFO(msg);
  CHECK(Contains(msg, "line 1, column 5"));
}

TEST_CASE("DescribeSyntaxError on the first character", "[json]") {
  const std::string msg = DescribeSyntaxError("x");
  INFO(msg);
  CHECK(Contains(msg, "line 1, column 1"));
}

TEST_CASE("DescribeSyntaxError survives 100000 unclosed arrays", "[json]") {
  const std::string msg = DescribeSyntaxError(std::string(100000, '['));
  INFO(msg.substr(0, 200));
  CHECK(Contains(msg, "line 1, column"));
}

// ---- JsonDocument and ParseReused ------------------------------------------------------------

TEST_CASE("JsonDocument::Parse gives a usable root", "[json]") {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(R"({"a": [1, 2, 3], "b": "x"})");
  REQUIRE(doc.ok());
  simdjson::dom::object obj;
  REQUIRE(doc->root().get_object().get(obj) == simdjson::SUCCESS);
  simdjson::dom::array arr;
  REQUIRE(obj["a"].get_array().get(arr) == simdjson::SUCCESS);
  CHECK(arr.size() == 3);
  // The document can be moved and still be read (it owns its parser).
  JsonDocument moved = *std::move(doc);
  std::string_view b;
  REQUIRE(moved.root()["b"].get_string().get(b) == simdjson::SUCCESS);
  CHECK(b == "x");
}

TEST_CASE("JsonDocument::Parse reports syntax errors with position", "[json]") {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse("{\"a\": tru}");
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.status().code() == absl::StatusCode::kInvalidArgument);
  INFO(doc.status().ToString());
  CHECK(Contains(ToStd(doc.status().message()), "line 1, column"));
}

TEST_CASE("JsonDocument::Parse rejects an empty or blank body", "[json]") {
  for (std::string_view text : {"", "   ", "\n\t\r "}) {
    absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(text);
    REQUIRE_FALSE(doc.ok());
    CHECK(Contains(ToStd(doc.status().message()), "empty body"));
  }
}

TEST_CASE("JsonDocument::Parse rejects trailing garbage", "[json]") {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse("{} x");
  REQUIRE_FALSE(doc.ok());
  INFO(doc.status().ToString());
  CHECK(Contains(ToStd(doc.status().message()), "line 1, column"));
}

TEST_CASE("JsonDocument::Parse rejects invalid UTF-8", "[json]") {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse("{\"name\": \"a\xff\xfe\"}");
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.status().code() == absl::StatusCode::kInvalidArgument);
  // Overlong encoding of '/' and a lone continuation byte.
  CHECK_FALSE(JsonDocument::Parse("\"\xC0\xAF\"").ok());
  CHECK_FALSE(JsonDocument::Parse("\"\x80\"").ok());
}

TEST_CASE("JsonDocument::Parse enforces its depth limit", "[json]") {
  CHECK(JsonDocument::Parse(Nested(4), 4).ok());
  absl::StatusOr<JsonDocument> deep = JsonDocument::Parse(Nested(5), 4);
  REQUIRE_FALSE(deep.ok());
  CHECK(Contains(ToStd(deep.status().message()), "nested too deeply"));
  // Objects count as levels too.
  CHECK_FALSE(JsonDocument::Parse(R"({"a":{"b":{"c":{"d":{}}}}})", 4).ok());
  CHECK(JsonDocument::Parse(R"({"a":{"b":{"c":{}}}})", 4).ok());
  // Default limit: modest nesting is fine.
  CHECK(JsonDocument::Parse(Nested(200)).ok());
}

TEST_CASE("JsonDocument::Parse rejects 100000 nested arrays without crashing", "[json]") {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(Nested(100000));
  REQUIRE_FALSE(doc.ok());
  CHECK(Contains(ToStd(doc.status().message()), "nested too deeply"));
  // Unclosed: a structure error, still no crash.
  CHECK_FALSE(JsonDocument::Parse(std::string(100000, '[')).ok());
  // Through the per-thread parser as well.
  absl::StatusOr<simdjson::dom::element> el = ParseReused(Nested(100000));
  REQUIRE_FALSE(el.ok());
  CHECK(Contains(ToStd(el.status().message()), "nested too deeply"));
}

std::string IntArray(size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) StrAppend(&s, i == 0 ? "" : ",", i);
  s += "]";
  return s;
}

int64_t ArraySize(const simdjson::dom::element& el) {
  simdjson::dom::array arr;
  REQUIRE(el.get_array().get(arr) == simdjson::SUCCESS);
  return static_cast<int64_t>(arr.size());
}

TEST_CASE("ParseReused parses documents of growing and shrinking size in turn", "[json]") {
  // Sizes chosen to force the thread's parser to grow twice and then serve smaller documents.
  for (size_t n : {3, 100000, 10, 300000, 1, 0, 50000}) {
    const std::string text = IntArray(n);
    absl::StatusOr<simdjson::dom::element> el = ParseReused(text);
    INFO("n = " << n);
    REQUIRE(el.ok());
    CHECK(ArraySize(*el) == static_cast<int64_t>(n));
    if (n > 0) {
      int64_t last = -1;
      REQUIRE(el->at(n - 1).get_int64().get(last) == simdjson::SUCCESS);
      CHECK(last == static_cast<int64_t>(n - 1));
    }
  }
}

TEST_CASE("ParseReused keeps working after errors and depth changes", "[json]") {
  CHECK_FALSE(ParseReused("{\"a\":").ok());
  absl::StatusOr<simdjson::dom::element> ok = ParseReused(R"({"a": 1})");
  REQUIRE(ok.ok());
  int64_t a = 0;
  REQUIRE((*ok)["a"].get_int64().get(a) == simdjson::SUCCESS);
  CHECK(a == 1);

  // A smaller depth limit for one call, then the default again.
  absl::StatusOr<simdjson::dom::element> shallow = ParseReused(Nested(3), 2);
  REQUIRE_FALSE(shallow.ok());
  CHECK(Contains(ToStd(shallow.status().message()), "nested too deeply"));
  CHECK(ParseReused(Nested(3), 3).ok());
  CHECK(ParseReused(Nested(100)).ok());

  CHECK_FALSE(ParseReused("").ok());
  absl::StatusOr<simdjson::dom::element> again = ParseReused(IntArray(5));
  REQUIRE(again.ok());
  CHECK(ArraySize(*again) == 5);
}

// ---- paths and typed getters -----------------------------------------------------------------

TEST_CASE("JsonPath::ToString names nested fields and elements", "[json]") {
  const JsonPath top;
  CHECK(top.ToString() == "(document)");
  const JsonPath pod = top.Field("Pod");
  const JsonPath spec = pod.Field("spec");
  const JsonPath containers = spec.Field("containers");
  const JsonPath c0 = containers.Element(0);
  const JsonPath resources = c0.Field("resources");
  const JsonPath requests = resources.Field("requests");
  const JsonPath cpu = requests.Field("cpu");
  CHECK(cpu.ToString() == "Pod.spec.containers[0].resources.requests.cpu");
  const JsonPath e3 = top.Element(3);
  const JsonPath type = e3.Field("type");
  CHECK(type.ToString() == "[3].type");
  const JsonPath nested = e3.Element(12);
  CHECK(nested.ToString() == "[3][12]");
  CHECK(std::string(FieldError(cpu, "bad").message()) ==
        "Pod.spec.containers[0].resources.requests.cpu: bad");
  CHECK(FieldError(cpu, "bad").code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Typed getters: missing and null are absent - wrong types name the path", "[json]") {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(
      R"({"s": "x", "n": 5, "d": 2.5, "b": true, "o": {}, "a": [1], "z": null, "big": 18446744073709551615})");
  REQUIRE(doc.ok());
  simdjson::dom::object obj;
  REQUIRE(doc->root().get_object().get(obj) == simdjson::SUCCESS);
  const JsonPath top;
  const JsonPath here = top.Field("spec");

  auto s = OptionalString(obj, "s", here);
  REQUIRE(s.ok());
  REQUIRE(s->has_value());
  CHECK(**s == "x");
  for (std::string_view absent : {"missing", "z"}) {
    auto a = OptionalString(obj, absent, here);
    REQUIRE(a.ok());
    CHECK_FALSE(a->has_value());
    auto i = OptionalInt(obj, absent, here);
    REQUIRE(i.ok());
    CHECK_FALSE(i->has_value());
  }
  auto wrong = OptionalString(obj, "n", here);
  REQUIRE_FALSE(wrong.ok());
  CHECK(std::string(wrong.status().message()) == "spec.n: expected a string, got a number");

  auto n = OptionalInt(obj, "n", here);
  REQUIRE(n.ok());
  CHECK(**n == 5);
  auto d = OptionalInt(obj, "d", here);
  REQUIRE_FALSE(d.ok());
  CHECK(std::string(d.status().message()) == "spec.d: expected an integer, got a number");
  auto big = OptionalInt(obj, "big", here);
  REQUIRE_FALSE(big.ok());
  auto istr = OptionalInt(obj, "s", here);
  REQUIRE_FALSE(istr.ok());
  CHECK(std::string(istr.status().message()) == "spec.s: expected an integer, got a string");

  auto b = OptionalBool(obj, "b", here);
  REQUIRE(b.ok());
  CHECK(**b == true);
  auto bs = OptionalBool(obj, "s", here);
  REQUIRE_FALSE(bs.ok());
  CHECK(std::string(bs.status().message()) == "spec.s: expected true or false, got a string");

  auto o = OptionalObject(obj, "o", here);
  REQUIRE(o.ok());
  CHECK(o->has_value());
  auto oa = OptionalObject(obj, "a", here);
  REQUIRE_FALSE(oa.ok());
  CHECK(std::string(oa.status().message()) == "spec.a: expected an object, got an array");

  auto a = OptionalArray(obj, "a", here);
  REQUIRE(a.ok());
  CHECK((*a)->size() == 1);
  auto ab = OptionalArray(obj, "b", here);
  REQUIRE_FALSE(ab.ok());
  CHECK(std::string(ab.status().message()) == "spec.b: expected an array, got a boolean");

  simdjson::dom::element z;
  REQUIRE(obj["z"].get(z) == simdjson::SUCCESS);
  auto as_obj = AsObject(z, here);
  REQUIRE_FALSE(as_obj.ok());
  CHECK(std::string(as_obj.status().message()) == "spec: expected an object, got null");
  auto as_str = AsString(z, here);
  REQUIRE_FALSE(as_str.ok());
  CHECK(std::string(as_str.status().message()) == "spec: expected a string, got null");
}

// A request with no body may reach the parser as a view with no buffer (a null data()). It is
// refused as empty, without handing simdjson a null pointer (the asan_ubsan test sees that).
TEST_CASE("JSON parsers refuse an empty view with no buffer as an empty body", "[json]") {
  const std::string_view none;
  REQUIRE(none.data() == nullptr);
  absl::StatusOr<simdjson::dom::element> reused = ParseReused(none);
  REQUIRE_FALSE(reused.ok());
  CHECK(reused.status().message() == "empty body: expected a JSON document");
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(none);
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.status().message() == "empty body: expected a JSON document");
}

}  // namespace
}  // namespace berth::extender
