#include "core/node_directory.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "core/strings.h"

namespace berth::core {
namespace {

using Slot = NodeDirectory::Slot;

// Every name of `reference` found with its slot, one by one and all at once, and names that are
// not there not found.
void CheckAgainst(const NodeDirectory& d, const std::map<std::string, Slot>& reference,
                  const std::vector<std::string>& absent) {
  REQUIRE(d.size() == reference.size());
  std::vector<std::string_view> names;
  std::vector<Slot> want;
  for (const auto& [name, slot] : reference) {
    INFO("name " << name);
    CHECK(d.Find(name) == slot);
    CHECK(d.Contains(name));
    names.push_back(name);
    want.push_back(slot);
  }
  for (const std::string& name : absent) {
    if (reference.count(name) != 0) continue;
    INFO("absent name " << name);
    CHECK(d.Find(name) == NodeDirectory::kNone);
    names.push_back(name);
    want.push_back(NodeDirectory::kNone);
  }
  std::vector<Slot> got(names.size(), 12345);
  d.FindMany(names, got.data());
  CHECK(got == want);
  std::map<std::string, Slot> listed;
  d.ForEach([&](std::string_view name, Slot slot) { listed.emplace(std::string(name), slot); });
  CHECK(listed == reference);
}

TEST_CASE("NodeDirectory: an empty directory finds nothing") {
  NodeDirectory d;
  CHECK(d.size() == 0);
  CHECK(d.Find("n1") == NodeDirectory::kNone);
  CHECK_FALSE(d.Erase("n1"));
  std::vector<std::string_view> names = {"a", "", "b"};
  std::vector<Slot> out(3, 7);
  d.FindMany(names, out.data());
  CHECK(out == std::vector<Slot>(3, NodeDirectory::kNone));
}

TEST_CASE("NodeDirectory: names of every length, empty included, are found exactly") {
  NodeDirectory d;
  std::map<std::string, Slot> ref;
  // Names that share prefixes, differ in length only, and run past any inline limit.
  std::vector<std::string> names = {"", "a", "ab", "abc", "gke-prod-pool-3-1a2b3c4d-x7k2",
                                    "gke-prod-pool-3-1a2b3c4d-x7k3", std::string(253, 'n'),
                                    std::string(252, 'n'), std::string(70000, 'x')};
  Slot next = 0;
  for (const std::string& n : names) {
    d.Insert(n, next);
    ref[n] = next++;
  }
  CheckAgainst(d, ref, {"abcd", "gke-prod-pool-3-1a2b3c4d-x7k", std::string(254, 'n'), "A"});
}

TEST_CASE("NodeDirectory: random inserts and erases agree with a map, through growth and copies") {
  std::mt19937 rng(7);
  NodeDirectory d;
  std::map<std::string, Slot> ref;
  std::vector<std::string> universe;
  for (int i = 0; i < 3000; ++i) universe.push_back(StrCat("gke-bench-pool-", i % 10, "-", i * 7919));
  for (int step = 0; step < 20000; ++step) {
    const std::string& name = universe[rng() % universe.size()];
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      if (ref.count(name) == 0) {
        const Slot slot = static_cast<Slot>(rng() % 100000);
        d.Insert(name, slot);
        ref[name] = slot;
      }
    } else if (op < 9) {
      CHECK(d.Erase(name) == (ref.erase(name) == 1));
    } else {
      // The model's way of growing: a compact copy with room, swapped in.
      NodeDirectory copy(d, rng() % 200);
      CHECK(copy.room() > 0);
      d.swap(copy);
    }
    if (step % 2500 == 0) CheckAgainst(d, ref, {universe[rng() % universe.size()], "not-a-node"});
  }
  CheckAgainst(d, ref, universe);
}

TEST_CASE("NodeDirectory: erasing every entry of a probe run leaves the others findable") {
  // Many names, few of them: a small table with long runs that wrap around its end.
  NodeDirectory d;
  std::map<std::string, Slot> ref;
  for (Slot i = 0; i < 7; ++i) {
    d.Insert(StrCat("n", i), i);
    ref[StrCat("n", i)] = i;
  }
  for (Slot i : {3u, 0u, 6u}) {
    CHECK(d.Erase(StrCat("n", i)));
    ref.erase(StrCat("n", i));
    CheckAgainst(d, ref, {StrCat("n", i)});
  }
}

TEST_CASE("NodeDirectory: room counts down with inserts, and a copy gives back erased names' bytes") {
  NodeDirectory d(NodeDirectory(), 100);
  const size_t room = d.room();
  REQUIRE(room >= 100);
  for (Slot i = 0; i < 10; ++i) d.Insert(StrCat("node-", i), i);
  CHECK(d.room() == room - 10);
  // Erased names' bytes stay in the chunks until a copy: past 64 KiB, and past the live bytes,
  // room() says 0 so that the model's next write makes the copy.
  NodeDirectory churn(NodeDirectory(), 5000);
  for (Slot i = 0; i < 3000; ++i) {
    const std::string name = StrCat(std::string(40, 'c'), i);
    churn.Insert(name, i);
    churn.Erase(name);
  }
  CHECK(churn.size() == 0);
  CHECK(churn.room() == 0);
  NodeDirectory compact(churn, 10);
  CHECK(compact.room() >= 10);
}

}  // namespace
}  // namespace berth::core
