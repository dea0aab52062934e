#include "core/node_directory.h"

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
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
  // Again, now with the hints the first call left (and whatever stale ones came before it).
  std::fill(got.begin(), got.end(), 12345);
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

// `count` names, slot i for name i.
std::vector<std::string> FillDense(NodeDirectory& d, int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.push_back(StrCat("gke-prod-pool-", i % 3, "-", int64_t{1000003} * i % 999983, "-x7k2"));
    d.Insert(names.back(), static_cast<Slot>(i));
  }
  return names;
}

// names[start], names[start + step], ... (count of them, wrapping), as kube-scheduler's rotating
// sample takes them.
std::vector<std::string_view> Window(const std::vector<std::string>& names, size_t start, size_t count,
                                     size_t step = 1) {
  std::vector<std::string_view> out;
  for (size_t k = 0; k < count; ++k) out.push_back(names[(start + k * step) % names.size()]);
  return out;
}

// FindMany's answer, checked against Find name by name; \return its hits.
size_t FindManyExact(const NodeDirectory& d, const std::vector<std::string_view>& names) {
  std::vector<Slot> got(names.size(), 12345);
  const size_t hits = d.FindMany(names, got.data());
  for (size_t i = 0; i < names.size(); ++i) {
    INFO("name " << names[i]);
    REQUIRE(got[i] == d.Find(names[i]));
  }
  return hits;
}

TEST_CASE("NodeDirectory: names in the last call's order are found by their hints") {
  NodeDirectory d;
  const std::vector<std::string> names = FillDense(d, 2000);
  // The first call has no hints: a few wrong guesses, then every name by hash.
  CHECK(FindManyExact(d, Window(names, 0, 2000)) == 0);
  // The same order from a rotating start: every name but the first follows its predecessor of
  // the last call.
  CHECK(FindManyExact(d, Window(names, 700, 680)) == 679);
  // Around the end: the step from the last name to the first was never seen, then it was.
  CHECK(FindManyExact(d, Window(names, 1700, 680)) == 678);
  CHECK(FindManyExact(d, Window(names, 1700, 680)) == 679);
  // kube-scheduler skips nodes its own filters reject: the name after each skip is guessed
  // wrong (678 names: the first and two after skips).
  std::vector<std::string_view> skipping = Window(names, 0, 680);
  skipping.erase(skipping.begin() + 100);
  skipping.erase(skipping.begin() + 400);
  CHECK(FindManyExact(d, skipping) == 675);
  // That call taught the hints its steps: asked again, only the first name is guessed wrong.
  CHECK(FindManyExact(d, skipping) == 677);
  // A name that is no node, and a node out of its place: each is guessed wrong, and so is the
  // name after it (after a name not found there is no guess).
  std::vector<std::string_view> odd = Window(names, 10, 50);
  odd.insert(odd.begin() + 20, "not-a-node");
  odd.insert(odd.begin() + 30, names[12]);
  CHECK(FindManyExact(d, odd) == 47);
  // Another order altogether (every seventh name): the wrong guesses give way to hashed
  // lookups, and the order is learnt for the next call.
  CHECK(FindManyExact(d, Window(names, 3, 600, 7)) == 0);
  CHECK(FindManyExact(d, Window(names, 3, 600, 7)) == 599);
}

TEST_CASE("NodeDirectory: stale hints never change an answer") {
  NodeDirectory d;
  const std::vector<std::string> old = FillDense(d, 500);
  CHECK(FindManyExact(d, Window(old, 0, 500)) == 0);
  CHECK(FindManyExact(d, Window(old, 0, 500)) == 499);
  // Every tenth node leaves, and a node of another name takes its slot.
  std::vector<std::string> names = old;
  for (size_t i = 10; i < names.size(); i += 10) {
    REQUIRE(d.Erase(names[i]));
    names[i] = StrCat("replacement-", i);
    d.Insert(names[i], static_cast<Slot>(i));
  }
  // The old names: the hint into each such slot now meets another name, so the old one is not
  // found, and the name after it is looked up without a guess (49 of each).
  CHECK(FindManyExact(d, Window(old, 0, 500)) == 499 - 2 * 49);
  // The new names follow the same hints into the same slots.
  CHECK(FindManyExact(d, Window(names, 0, 500)) == 499);
  // The new nodes move to other slots: the hints into the old slots meet no name at all.
  for (size_t i = 10; i < names.size(); i += 10) {
    REQUIRE(d.Erase(names[i]));
    d.Insert(names[i], static_cast<Slot>(1000 + i));
  }
  CHECK(FindManyExact(d, Window(names, 0, 500)) == 499 - 2 * 49);
  CHECK(FindManyExact(d, Window(names, 0, 500)) == 499);
  // A compact copy, which the model swaps in when it grows the directory, keeps the hints.
  NodeDirectory copy(d, 10);
  CHECK(FindManyExact(copy, Window(names, 0, 500)) == 499);
}

TEST_CASE("NodeDirectory: readers sharing it find every name while their hints cross", "[concurrency]") {
  NodeDirectory d;
  const std::vector<std::string> names = FillDense(d, 3000);
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (int call = 0; call < 40; ++call) {
        // Different strides: each reader's order rewrites the others' hints.
        const std::vector<std::string_view> w = Window(names, static_cast<size_t>(call * 97), 700,
                                                       static_cast<size_t>(1 + 2 * t));
        std::vector<Slot> got(w.size());
        d.FindMany(w, got.data());
        for (size_t i = 0; i < w.size(); ++i) wrong += got[i] == d.Find(w[i]) ? 0 : 1;
      }
    });
  }
  for (std::thread& r : readers) r.join();
  CHECK(wrong == 0);
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
