#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "simdjson.h"

namespace berth::extender {

/// Where a value sits in a document, kept as a chain of stack frames so the hot path builds no
/// strings: the text ("Pod.spec.containers[0].resources.requests.cpu") is made only for errors.
///
/// A child frame points at its parent, so a parent must outlive its children: calling Field(),
/// Element() or Item() on a temporary does not compile (a stored child would dangle). To name
/// "containers[3]" in one frame use Item("containers", 3).
struct JsonPath {
  const JsonPath* parent = nullptr;
  std::string_view key;  ///< field name (may be empty)
  int64_t index = -1;    ///< array index after `key`, or -1

  JsonPath Field(std::string_view k) const& { return JsonPath{this, k, -1}; }
  JsonPath Element(int64_t i) const& { return JsonPath{this, {}, i}; }
  JsonPath Item(std::string_view k, int64_t i) const& { return JsonPath{this, k, i}; }
  JsonPath Field(std::string_view k) && = delete;
  JsonPath Element(int64_t i) && = delete;
  JsonPath Item(std::string_view k, int64_t i) && = delete;
  std::string ToString() const;
};

/// An InvalidArgument error "PATH: what".
absl::Status FieldError(const JsonPath& path, std::string_view what);

/// The JSON type of an element, in words ("a string", "an object", ...), for error messages.
std::string_view TypeName(simdjson::dom::element el);

/// How deep a parsed document may nest, unless a caller asks otherwise.
inline constexpr size_t kDefaultMaxDepth = 256;

/// Texts above this are parsed with a parser of their own (JsonDocument), so the per-thread
/// parsers that serve the hot verbs (ParseReused) stay small.
inline constexpr size_t kReusedParserLimit = size_t{1} << 20;

/// JSON's whitespace: space, tab, line feed, carriage return.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/// A parsed JSON document. Owns its parser, so the DOM stays valid while the document lives.
/// Syntax errors name the line, column and problem ("line 3, column 14: syntax error while
/// parsing object - unexpected '}'; expected string literal").
class JsonDocument {
 public:
  /// Parses `text`. \param max_depth nesting limit (deeper documents are rejected, not recursed).
  static absl::StatusOr<JsonDocument> Parse(std::string_view text, size_t max_depth = kDefaultMaxDepth);
  simdjson::dom::element root() const { return root_; }

 private:
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
};

/// Parses with a parser reused by the calling thread (no allocation once warm). The element is
/// valid only until the same thread parses again: decode it fully before the next call. Each
/// thread keeps one parser for the default depth and one for any other, so that alternating
/// between the default and one other depth does not reallocate.
absl::StatusOr<simdjson::dom::element> ParseReused(std::string_view text, size_t max_depth = kDefaultMaxDepth);

/// The first member of the JSON object `text`: its key, when written without escapes, and the
/// text from its value to the end of `text`. nullopt when `text` does not begin that way.
std::optional<std::pair<std::string_view, std::string_view>> FirstMember(std::string_view text);
/// The JSON object `text` begins with, up to its closing brace; empty if `text` does not begin
/// with '{' or ends first. It checks only what it must to find the end: call it on text that
/// parsed.
std::string_view LeadingObject(std::string_view text);

/// True when every byte of `s` can stand in a JSON string as it is and needs no look as UTF-8:
/// ASCII from the space up, but the quote and the backslash.
bool PlainJsonText(std::string_view s);

/// Describes a JSON syntax error in `text` with line and column; used once a fast parse failed.
std::string DescribeSyntaxError(std::string_view text);

// Typed field access. Each returns an error naming the path when the value has the wrong type.
// "Optional" getters treat a missing field and JSON null alike as absent.
std::optional<simdjson::dom::element> OptionalField(simdjson::dom::object obj, std::string_view key);
absl::StatusOr<std::optional<std::string_view>> OptionalString(simdjson::dom::object obj,
                                                               std::string_view key,
                                                               const JsonPath& path);
absl::StatusOr<std::optional<simdjson::dom::object>> OptionalObject(simdjson::dom::object obj,
                                                                    std::string_view key,
                                                                    const JsonPath& path);
absl::StatusOr<std::optional<simdjson::dom::array>> OptionalArray(simdjson::dom::object obj,
                                                                  std::string_view key,
                                                                  const JsonPath& path);
absl::StatusOr<std::optional<int64_t>> OptionalInt(simdjson::dom::object obj, std::string_view key,
                                                   const JsonPath& path);
absl::StatusOr<std::optional<bool>> OptionalBool(simdjson::dom::object obj, std::string_view key,
                                                 const JsonPath& path);
absl::StatusOr<simdjson::dom::object> AsObject(simdjson::dom::element el, const JsonPath& path);
absl::StatusOr<std::string_view> AsString(simdjson::dom::element el, const JsonPath& path);

/// Appends JSON text to a string. No DOM: the hot verbs write their replies through this.
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  /// Inserts already-serialised JSON as one value.
  JsonWriter& Raw(std::string_view json);

 private:
  void Separate();
  std::string* out_;
  bool need_comma_ = false;
};

/// Appends `s` as a quoted JSON string with escapes.
void AppendJsonString(std::string* out, std::string_view s);
/// Appends `s`, which the caller checked to be PlainJsonText, between quotes as it is (what
/// AppendJsonString writes for it, without the check).
void AppendPlainJsonString(std::string* out, std::string_view s);

}  // namespace berth::extender
