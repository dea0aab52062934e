#pragma once

// Text helpers for tests of every layer; nothing here depends on berth.

#include <string_view>

namespace berth::testing {

/// Whether `needle` occurs in `haystack`.
inline bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace berth::testing
