#pragma once

// Reading JSON text eight bytes at a time: which bytes of a word are a given byte, and where the
// next byte that matters is. Shared by the watch stream's splitter and the verbs' codec.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace berth::extender {

inline constexpr uint64_t kOnes = 0x0101010101010101ULL;
inline constexpr uint64_t kHigh = 0x8080808080808080ULL;

inline uint64_t Word(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}

// The high bit of each byte of `w` (read little-endian) that is `c`, and possibly of bytes above
// such a byte: the borrow of the subtraction only runs upward from a byte that really is `c`.
// So the mask is exact as a yes or no, and its lowest set bit marks the first `c`.
constexpr uint64_t HasByte(uint64_t w, char c) {
  const uint64_t x = w ^ (kOnes * static_cast<uint8_t>(c));
  return (x - kOnes) & ~x & kHigh;
}

/// The bytes that can end or escape inside a JSON string.
constexpr uint64_t StringStops(uint64_t w) { return HasByte(w, '"') | HasByte(w, '\\'); }

/// The bytes a JSON string cannot carry as they are: below 0x20, the quote, the backslash, and
/// from 0x80 up (those need a look as UTF-8). Like HasByte, exact as a yes or no, and its lowest
/// set bit marks the first such byte (a borrow runs upward only from a byte below 0x20).
constexpr uint64_t SpecialBytes(uint64_t w) {
  const uint64_t control = (w - 0x2020202020202020ULL) & ~w & kHigh;  // bytes < 0x20
  return (w & kHigh) | control | StringStops(w);
}

/// SpecialBytes of one byte.
constexpr bool IsSpecialByte(char c) {
  const auto b = static_cast<unsigned char>(c);
  return b < 0x20 || b >= 0x80 || c == '"' || c == '\\';
}

/// The index of the first byte at or after `at` that `Stops` marks, read eight bytes at a time.
/// When fewer than eight bytes remain unread and none was marked, the index of the first of
/// them (`size` if none remain): the caller reads those one by one.
template <uint64_t (*Stops)(uint64_t)>
size_t NextStop(const char* buf, size_t at, size_t size) {
  for (; at + 8 <= size; at += 8) {
    if (const uint64_t m = Stops(Word(buf + at)); m != 0) return at + (std::countr_zero(m) >> 3);
  }
  return at;
}

}  // namespace berth::extender
