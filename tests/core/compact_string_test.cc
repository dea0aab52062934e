#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "core/compact_string.h"

namespace berth::core {
namespace {

TEST_CASE("CompactString holds 15 characters inline and longer ones on the heap") {
  const std::string fifteen(15, 'a');
  const std::string sixteen(16, 'b');
  CompactString a(fifteen), b(sixteen), e;
  CHECK(a.view() == fifteen);
  CHECK(b.view() == sixteen);
  CHECK(a.size() == 15);
  CHECK(b.size() == 16);
  CHECK(e.empty());
  CHECK(e.view().empty());
  // Inline strings live inside the object; heap strings do not.
  const char* obj = reinterpret_cast<const char*>(&a);
  CHECK((a.data() >= obj && a.data() < obj + sizeof(a)));
  const char* objb = reinterpret_cast<const char*>(&b);
  CHECK_FALSE((b.data() >= objb && b.data() < objb + sizeof(b)));
  const std::string big(100000, 'x');
  CHECK(CompactString(big).view() == big);
  CHECK(sizeof(CompactString) == 16);
}

TEST_CASE("CompactString copies, moves and assigns") {
  for (const std::string& text : {std::string("short"), std::string(40, 'q')}) {
    CompactString a(text);
    CompactString copy = a;
    CHECK(copy == text);
    CHECK(a == text);
    CompactString moved = std::move(a);
    CHECK(moved == text);
    CHECK(a.empty());  // NOLINT: a moved-from CompactString is empty
    CompactString assigned;
    assigned = moved;
    CHECK(assigned == text);
    assigned = std::string(20, 'z');
    CHECK(assigned == std::string(20, 'z'));
    assigned = "lit";
    CHECK(assigned == "lit");
    assigned = std::move(moved);
    CHECK(assigned == text);
    assigned.clear();
    CHECK(assigned.empty());
  }
}

TEST_CASE("CompactString assigned a view of itself keeps the right text") {
  CompactString heap(std::string(30, 'a') + "tail");
  heap = heap.view().substr(26);  // points into its own heap block
  CHECK(heap == "aaaatail");
  CompactString inline_str("abcdefgh");
  inline_str = inline_str.view().substr(2, 4);  // points into its own inline bytes
  CHECK(inline_str == "cdef");
  CompactString self("same-text-that-is-long-enough");
  self = self;  // NOLINT: self-assignment is harmless
  CHECK(self == "same-text-that-is-long-enough");
}

// An empty std::string_view has no buffer (data() is null); copying none of its bytes must not
// read through it. Only UndefinedBehaviorSanitizer sees the difference (the asan_ubsan test).
TEST_CASE("CompactString takes an empty view with no buffer") {
  const std::string_view none;
  REQUIRE(none.data() == nullptr);
  CompactString a(none);
  CHECK(a.empty());
  CompactString b("some text");
  b = none;
  CHECK(b.empty());
  CompactString c(std::string(40, 'h'));
  c = none;
  CHECK(c.empty());
}

TEST_CASE("CompactString compares and orders like its text") {
  CompactString a("apple"), b("banana"), a2(std::string("apple"));
  CHECK(a == a2);
  CHECK(a != b);
  CHECK(a < b);
  CHECK(a == std::string_view("apple"));
  CHECK(std::string("apple") == a);
  CHECK("banana" == b);
  std::map<CompactString, int> m{{b, 2}, {a, 1}};
  CHECK(m.begin()->first == "apple");
  std::ostringstream os;
  os << b;
  CHECK(os.str() == "banana");
  std::string_view v = b;
  CHECK(v == "banana");
}

}  // namespace
}  // namespace berth::core
