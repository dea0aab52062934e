// The word-at-a-time byte tests that the request reader, the answer writer and the watch
// splitter stand on: each must say exactly whether a word holds a byte it marks, and its lowest
// mark must be the first such byte, whatever the bytes after it are.

#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "extender/byte_scan.h"

namespace berth::extender {
namespace {

// Bytes at the edges of every class, and plain ones, drawn often enough that words mix them.
constexpr std::array<unsigned char, 14> kEdges = {0x00, 0x01, 0x1f, 0x20, 0x21, '"',  '\\',
                                                  0x5b, 0x5d, 0x7f, 0x80, 0xa0, 0xff, 'a'};

uint64_t WordOf(const std::array<unsigned char, 8>& bytes) {
  uint64_t w;
  std::memcpy(&w, bytes.data(), 8);
  return w;
}

// The first byte the predicate marks, counted the slow way.
template <typename Pred>
std::optional<int> FirstMarked(const std::array<unsigned char, 8>& bytes, Pred marked) {
  for (int i = 0; i < 8; ++i) {
    if (marked(static_cast<char>(bytes[i]))) return i;
  }
  return std::nullopt;
}

void CheckMask(uint64_t mask, std::optional<int> first) {
  CHECK((mask != 0) == first.has_value());
  if (first) CHECK(std::countr_zero(mask) / 8 == *first);
}

TEST_CASE("byte scan: the masks mark exactly the bytes they name, first byte first",
          "[protocol][json]") {
  std::mt19937_64 rng(20261128);
  std::uniform_int_distribution<int> edge(0, static_cast<int>(kEdges.size()) - 1);
  std::uniform_int_distribution<int> any(0, 255);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int round = 0; round < 200'000; ++round) {
    std::array<unsigned char, 8> bytes;
    for (unsigned char& b : bytes) {
      b = coin(rng) != 0 ? kEdges[static_cast<size_t>(edge(rng))]
                         : static_cast<unsigned char>(any(rng));
    }
    const uint64_t w = WordOf(bytes);
    INFO("word " << std::hex << w);
    CheckMask(SpecialBytes(w), FirstMarked(bytes, IsSpecialByte));
    CheckMask(HasByte(w, '"'), FirstMarked(bytes, [](char c) { return c == '"'; }));
    CheckMask(StringStops(w), FirstMarked(bytes, [](char c) { return c == '"' || c == '\\'; }));
  }
  // Every byte value alone in a plain word, at every place.
  for (int value = 0; value < 256; ++value) {
    for (int at = 0; at < 8; ++at) {
      std::array<unsigned char, 8> bytes;
      bytes.fill('a');
      bytes[static_cast<size_t>(at)] = static_cast<unsigned char>(value);
      const bool special = value < 0x20 || value >= 0x80 || value == '"' || value == '\\';
      CHECK(IsSpecialByte(static_cast<char>(value)) == special);
      CheckMask(SpecialBytes(WordOf(bytes)), special ? std::optional<int>(at) : std::nullopt);
    }
  }
}

TEST_CASE("byte scan: NextStop finds the first marked byte, or leaves the short tail",
          "[protocol][json]") {
  const std::string text = "node-0001-abcdefgh\"rest-of-it";
  CHECK(NextStop<SpecialBytes>(text.data(), 0, text.size()) == 18);
  CHECK(NextStop<SpecialBytes>(text.data(), 3, text.size()) == 18);
  // Fewer than eight bytes after the last whole word without a mark: the first of them.
  const std::string plain = "node-0001-abc";
  CHECK(NextStop<SpecialBytes>(plain.data(), 0, plain.size()) == 8);
  CHECK(NextStop<SpecialBytes>(plain.data(), 8, plain.size()) == 8);
  CHECK(NextStop<SpecialBytes>(plain.data(), 13, plain.size()) == 13);
}

}  // namespace
}  // namespace berth::extender
