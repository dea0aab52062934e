#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/slot_array.h"

namespace berth::core {
namespace {

struct Item {
  std::string text = "fresh";
  int value = 0;
};

using Slots = SlotArray<Item, 4>;

TEST_CASE("SlotArray: slots never move as the array grows") {
  Slots slots;
  CHECK(slots.size() == 0);
  CHECK(slots.capacity() == 0);
  std::vector<const Item*> where;
  for (int i = 0; i < 50; ++i) {
    const uint32_t slot = slots.Take();
    CHECK(slot == static_cast<uint32_t>(i));
    Item& item = slots[slot];
    CHECK(item.text == "fresh");  // default-constructed
    item.value = i;
    where.push_back(&item);
  }
  CHECK(slots.size() == 50);
  CHECK(slots.capacity() == 52);  // 13 chunks of 4
  CHECK(slots.free_capacity() >= slots.capacity());
  for (int i = 0; i < 50; ++i) {
    CHECK(&slots[i] == where[i]);
    CHECK(slots[i].value == i);
  }
}

TEST_CASE("SlotArray: freed slots are taken again, the last freed first") {
  Slots slots;
  for (int i = 0; i < 6; ++i) slots[slots.Take()].value = i;
  slots.Free(1);
  slots.Free(4);
  CHECK(slots.free_count() == 2);
  CHECK(slots.Take() == 4);
  CHECK(slots.Take() == 1);
  CHECK(slots.free_count() == 0);
  CHECK(slots.Take() == 6);  // then past size()
  CHECK(slots.size() == 7);
  CHECK(slots[1].value == 1);  // Take leaves the content as Free left it
}

TEST_CASE("SlotArray: room made by Grow lets Take and Free run without allocating") {
  Slots slots;
  slots.Take();
  CHECK(slots.capacity() == 4);
  // Room already there for 3 more: nothing to allocate, the free list needs no copy.
  Slots::Growth none = slots.Grow(3);
  CHECK(none.chunks.empty());
  CHECK_FALSE(none.has_free);
  // 10 more need two chunks beyond the room of 3, and a free list with room for 12 slots.
  Slots::Growth growth = slots.Grow(10);
  CHECK(growth.chunks.size() == 2);
  CHECK(growth.has_free);
  CHECK(slots.capacity() == 4);  // Grow changes nothing in the array
  slots.Adopt(growth);
  CHECK(growth.chunks.empty());
  CHECK(slots.capacity() == 12);
  CHECK(slots.free_capacity() >= 12);
  CHECK(slots.size() == 1);
  for (int i = 0; i < 10; ++i) slots[slots.Take()].value = i;
  CHECK(slots.capacity() == 12);  // Take allocated nothing
  CHECK(slots.size() == 11);
  CHECK(slots[10].value == 9);
  // Every slot freed fits the free list as it is.
  const size_t free_room = slots.free_capacity();
  for (uint32_t i = 0; i < 11; ++i) slots.Free(i);
  CHECK(slots.free_capacity() == free_room);
  CHECK(slots.free_count() == 11);
}

TEST_CASE("SlotArray: Grow counts free slots as room") {
  Slots slots;
  for (int i = 0; i < 8; ++i) slots.Take();
  for (uint32_t i = 0; i < 5; ++i) slots.Free(i);
  // 5 free slots and no spare ones: 5 Takes need nothing, a sixth needs a chunk.
  CHECK(slots.Grow(5).chunks.empty());
  Slots::Growth growth = slots.Grow(6);
  REQUIRE(growth.chunks.size() == 1);
  REQUIRE(growth.has_free);
  CHECK(growth.free.size() == 5);  // a copy of the free list
  slots.Adopt(growth);
  CHECK(growth.free.capacity() < slots.free_capacity());  // the old list, freed by the caller
  CHECK(slots.free_count() == 5);
  for (int i = 0; i < 6; ++i) slots.Take();
  CHECK(slots.capacity() == 12);
  CHECK(slots.size() == 9);
}

}  // namespace
}  // namespace berth::core
