#pragma once

// String helpers that work with std::string_view. Debian's abseil is built with its own
// absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0), so absl::StrCat and abseil's
// heterogeneous hash lookup do not accept std::string_view; berth uses these instead.

#include <charconv>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace berth {

inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }
inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }

namespace strings_internal {
inline void AppendOne(std::string* out, std::string_view s) { out->append(s); }
inline void AppendOne(std::string* out, const std::string& s) { out->append(s); }
inline void AppendOne(std::string* out, const char* s) { out->append(s); }
inline void AppendOne(std::string* out, absl::string_view s) { out->append(s.data(), s.size()); }
inline void AppendOne(std::string* out, char c) { out->push_back(c); }
inline void AppendOne(std::string* out, bool b) { out->append(b ? "true" : "false"); }
template <class T>
  requires(std::integral<T> && !std::same_as<T, char> && !std::same_as<T, bool>)
void AppendOne(std::string* out, T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}
inline void AppendOne(std::string* out, double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}
}  // namespace strings_internal

/// Appends every argument's text to `*out`.
template <class... Args>
void StrAppend(std::string* out, const Args&... args) {
  (strings_internal::AppendOne(out, args), ...);
}

/// Concatenates the text of every argument.
template <class... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  StrAppend(&out, args...);
  return out;
}

/// Transparent hash and equality for std::string keys looked up by std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const {
    return absl::Hash<absl::string_view>{}(ToAbsl(s));
  }
};
struct StringEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

/// Hash of a pair of string views (namespace, name).
struct StringPairHash {
  size_t operator()(const std::pair<std::string_view, std::string_view>& p) const {
    return absl::HashOf(ToAbsl(p.first), ToAbsl(p.second));
  }
};

}  // namespace berth
