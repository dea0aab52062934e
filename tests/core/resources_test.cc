#include "core/resources.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/checked_math.h"
#include "core/quotient.h"
#include "core/quantity.h"
#include "core/strings.h"
#include "tests/testing/core_builders.h"

namespace berth::core {
namespace {

using testing::kGi;
using testing::kInt64Max;
using testing::kInt64Min;

ResourceId MustIntern(ResourceNames& names, std::string_view name) {
  absl::StatusOr<ResourceId> id = names.Intern(name);
  INFO("name: " << std::string(name) << " status: " << id.status().ToString());
  REQUIRE(id.ok());
  return *id;
}

// ---- ResourceNames ------------------------------------------------------------------------

TEST_CASE("ResourceNames pins the well-known resources at fixed ids", "[resources]") {
  ResourceNames names;
  CHECK(names.size() == 5);
  CHECK(kNumWellKnownResources == 5);

  CHECK(names.Name(kCpu) == "cpu");
  CHECK(names.Name(kMemory) == "memory");
  CHECK(names.Name(kEphemeralStorage) == "ephemeral-storage");
  CHECK(names.Name(kPods) == "pods");
  CHECK(names.Name(kNvidiaGpu) == "nvidia.com/gpu");

  CHECK(names.Find("cpu") == std::optional<ResourceId>(0));
  CHECK(names.Find("memory") == std::optional<ResourceId>(1));
  CHECK(names.Find("ephemeral-storage") == std::optional<ResourceId>(2));
  CHECK(names.Find("pods") == std::optional<ResourceId>(3));
  CHECK(names.Find("nvidia.com/gpu") == std::optional<ResourceId>(4));

  // Interning a well-known name gives its pinned id and adds nothing.
  CHECK(MustIntern(names, "nvidia.com/gpu") == 4);
  CHECK(MustIntern(names, "cpu") == 0);
  CHECK(names.size() == 5);
}

TEST_CASE("ResourceNames interns new names with dense, stable ids", "[resources]") {
  ResourceNames names;
  CHECK_FALSE(names.Find("example.com/foo").has_value());

  CHECK(MustIntern(names, "example.com/foo") == 5);
  CHECK(MustIntern(names, "hugepages-2Mi") == 6);
  CHECK(MustIntern(names, "example.com/foo") == 5);  // same name, same id
  CHECK(names.size() == 7);

  CHECK(names.Find("example.com/foo") == std::optional<ResourceId>(5));
  CHECK(names.Find("hugepages-2Mi") == std::optional<ResourceId>(6));
  CHECK(names.Name(5) == "example.com/foo");
  CHECK(names.Name(6) == "hugepages-2Mi");
  // Names are case-sensitive.
  CHECK_FALSE(names.Find("CPU").has_value());
  CHECK(MustIntern(names, "CPU") == 7);
}

TEST_CASE("ResourceNames: an unknown id has a placeholder name", "[resources]") {
  ResourceNames names;
  CHECK(names.Name(5) == "<unknown-resource>");
  CHECK(names.Name(ResourceNames::kMaxResources) == "<unknown-resource>");
  CHECK(names.Name(UINT16_MAX) == "<unknown-resource>");
}

TEST_CASE("ResourceNames: cpu is milli-scaled, everything else whole units", "[resources]") {
  ResourceNames names;
  const ResourceId foo = MustIntern(names, "example.com/foo");
  CHECK(names.Scale(kCpu) == ResourceScale::kMilli);
  CHECK(names.Scale(kMemory) == ResourceScale::kUnit);
  CHECK(names.Scale(kEphemeralStorage) == ResourceScale::kUnit);
  CHECK(names.Scale(kPods) == ResourceScale::kUnit);
  CHECK(names.Scale(kNvidiaGpu) == ResourceScale::kUnit);
  CHECK(names.Scale(foo) == ResourceScale::kUnit);
}

TEST_CASE("ResourceNames rejects invalid names", "[resources]") {
  ResourceNames names;
  const std::string too_long(254, 'a');
  for (const std::string& bad : {std::string(""), std::string("a b"), std::string("tab\tname"),
                                 std::string("new\nline"), std::string("cr\rname"),
                                 std::string("quo\"te"), too_long}) {
    INFO("name: \"" << bad << "\"");
    absl::StatusOr<ResourceId> id = names.Intern(bad);
    REQUIRE_FALSE(id.ok());
    CHECK(id.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(id.status().message()),
               Catch::Matchers::StartsWith("invalid resource name \""));
  }
  CHECK(names.size() == 5);  // nothing was added

  // The longest valid name is 253 characters.
  const std::string longest(253, 'b');
  CHECK(MustIntern(names, longest) == 5);
  // The error quotes at most 64 characters of the bad name.
  absl::StatusOr<ResourceId> id = names.Intern(too_long);
  REQUIRE_FALSE(id.ok());
  CHECK(std::string(id.status().message()) ==
        StrCat("invalid resource name \"", std::string(64, 'a'), "\""));
}

TEST_CASE("ResourceNames is capped at kMaxResources with a clear error", "[resources]") {
  ResourceNames names;
  REQUIRE(ResourceNames::kMaxResources == 256);
  for (size_t i = names.size(); i < ResourceNames::kMaxResources; ++i) {
    const std::string name = StrCat("example.com/r", i);
    REQUIRE(MustIntern(names, name) == i);
  }
  CHECK(names.size() == 256);
  CHECK(names.Name(255) == "example.com/r255");

  absl::StatusOr<ResourceId> over = names.Intern("example.com/one-too-many");
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(over.status().message()) ==
        "resource name \"example.com/one-too-many\" cannot be added: berth's table of resource "
        "names is full (256 distinct names, the limit)");
  CHECK(names.refusals() == 1);
  CHECK(names.size() == 256);
  CHECK_FALSE(names.Find("example.com/one-too-many").has_value());

  // Names already known still resolve once the table is full.
  CHECK(MustIntern(names, "example.com/r100") == 100);
  CHECK(MustIntern(names, "cpu") == kCpu);
}

TEST_CASE("ResourceNames::InternAll adds every new name or none", "[resources]") {
  ResourceNames names;
  for (size_t i = names.size(); i < ResourceNames::kMaxResources - 2; ++i) {
    REQUIRE(names.Intern(StrCat("example.com/r", i)).ok());
  }
  REQUIRE(names.size() == 254);
  // Three new names (one repeated) do not fit in the two free slots: nothing is added.
  const std::vector<std::string> three = {"example.com/a", "cpu", "example.com/b",
                                          "example.com/a", "example.com/c"};
  absl::StatusOr<std::vector<ResourceId>> refused = names.InternAll(three);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("\"example.com/c\"") && Catch::Contains("full"));
  CHECK(names.size() == 254);
  CHECK_FALSE(names.Find("example.com/a").has_value());
  CHECK(names.refusals() == 1);
  // Two new names (one repeated) fit, with known ones among them, in order.
  const std::vector<std::string> two = {"example.com/a", "cpu", "example.com/b", "example.com/a"};
  absl::StatusOr<std::vector<ResourceId>> ids = names.InternAll(two);
  REQUIRE(ids.ok());
  CHECK(*ids == std::vector<ResourceId>{254, kCpu, 255, 254});
  CHECK(names.size() == 256);
  CHECK(names.refusals() == 1);
  // An invalid name refuses the call whatever the room, and is no refusal for a full table.
  const std::vector<std::string> bad = {"cpu", "a b"};
  CHECK(names.InternAll(bad).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(names.refusals() == 1);
}

TEST_CASE("ResourceNameScope gives provisional ids and never changes the table", "[resources]") {
  ResourceNames table;
  REQUIRE(table.Intern("example.com/known").ok());
  const size_t before = table.size();
  ResourceNameScope scope(table);
  CHECK(*scope.Resolve("memory") == kMemory);
  CHECK(*scope.Resolve("example.com/known") == 5);
  const ResourceId fpga = *scope.Resolve("example.com/fpga");
  CHECK(IsProvisional(fpga));
  CHECK(fpga == ResourceNameScope::kFirstProvisional);
  CHECK(*scope.Resolve("example.com/fpga") == fpga);  // one id per name
  CHECK(*scope.Find("example.com/fpga") == fpga);
  CHECK(scope.Name(fpga) == "example.com/fpga");
  CHECK_FALSE(scope.Find("example.com/other").has_value());
  CHECK(scope.Resolve("bad name").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(table.size() == before);
  CHECK_FALSE(table.Find("example.com/fpga").has_value());
  CHECK(scope.provisional() == std::vector<std::string>{"example.com/fpga"});

  // More new names than a table could ever hold are refused in the scope already.
  ResourceNameScope many(table);
  for (size_t i = 0; i < ResourceNameScope::kMaxProvisional; ++i) {
    REQUIRE(many.Resolve(StrCat("example.com/n", i)).ok());
  }
  CHECK_FALSE(many.Resolve("example.com/one-more").ok());
  CHECK(table.size() == before);
}

TEST_CASE("ResolveProvisionalIds: all or nothing, zero amounts add no name", "[resources]") {
  ResourceNames table;
  ResourceNameScope scope(table);
  const ResourceId a = *scope.Resolve("example.com/a");
  const ResourceId zero = *scope.Resolve("example.com/zero");
  ResourceVector capacity;
  capacity.Set(kCpu, 4000);
  capacity.Set(a, 3);
  capacity.Set(zero, 0);
  ResourceVector allocatable;
  allocatable.Set(a, 2);
  ResourceVector* vectors[] = {&capacity, &allocatable};
  REQUIRE(ResolveProvisionalIds(table, scope.provisional(), vectors).ok());
  const std::optional<ResourceId> real = table.Find("example.com/a");
  REQUIRE(real.has_value());
  CHECK_FALSE(IsProvisional(*real));
  CHECK(capacity.Get(*real) == 3);
  CHECK(capacity.Get(kCpu) == 4000);
  CHECK(allocatable.Get(*real) == 2);
  CHECK(capacity.size() <= table.size());
  CHECK_FALSE(table.Find("example.com/zero").has_value());

  // A full table: the vectors and the table stay as they were.
  ResourceNames full;
  for (size_t i = full.size(); i < ResourceNames::kMaxResources; ++i) {
    REQUIRE(full.Intern(StrCat("example.com/r", i)).ok());
  }
  ResourceNameScope late(full);
  ResourceVector v;
  v.Set(*late.Resolve("example.com/r9"), 1);  // known: no new name needed
  v.Set(*late.Resolve("example.com/fpga"), 1);
  const ResourceVector kept = v;
  ResourceVector* one[] = {&v};
  const absl::Status s = ResolveProvisionalIds(full, late.provisional(), one);
  CHECK(s.code() == absl::StatusCode::kResourceExhausted);
  CHECK(v == kept);
  CHECK(full.size() == ResourceNames::kMaxResources);
  CHECK(full.refusals() == 1);
}

TEST_CASE("AmountOf refuses what an int64 cannot hold instead of saturating", "[resources]") {
  auto amount = [](std::string_view text, ResourceScale scale) {
    absl::StatusOr<Quantity> q = Quantity::Parse(text);
    REQUIRE(q.ok());
    return AmountOf(*q, scale);
  };
  CHECK(*amount("9223372036854775807m", ResourceScale::kMilli) == INT64_MAX);
  CHECK(*amount("9223372036854775", ResourceScale::kMilli) == 9223372036854775000);
  CHECK(*amount("9223372036854775807", ResourceScale::kUnit) == INT64_MAX);
  CHECK(*amount("7Ei", ResourceScale::kUnit) == 7 * (int64_t{1} << 60));
  for (const char* text : {"9223372036854775807", "9223372036854776"}) {
    INFO(text);
    absl::StatusOr<int64_t> cpu = amount(text, ResourceScale::kMilli);
    REQUIRE_FALSE(cpu.ok());
    CHECK(cpu.status().code() == absl::StatusCode::kOutOfRange);
    CHECK_THAT(std::string(cpu.status().message()), Catch::StartsWith("out of range"));
  }
}

TEST_CASE("ResourceNames::Name is safe while other threads intern", "[resources][concurrency]") {
  ResourceNames names;
  constexpr int kWriters = 2;
  constexpr int kPerWriter = 100;  // 5 + 2*100 < kMaxResources
  std::atomic<bool> go{false};
  std::atomic<int> writers_done{0};
  std::atomic<int> bad{0};
  std::atomic<int> passes{0};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerWriter; ++i) {
        absl::StatusOr<ResourceId> id = names.Intern(StrCat("example.com/w", w, "-", i));
        if (!id.ok() || names.Name(*id) != StrCat("example.com/w", w, "-", i)) ++bad;
      }
      ++writers_done;
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int pass = 0; pass < 20 || writers_done.load() < kWriters; ++pass) {
        ++passes;
        const size_t n = names.size();
        for (size_t id = 0; id < n; ++id) {
          std::string_view name = names.Name(static_cast<ResourceId>(id));
          // Every published id has its final name: never empty, never the placeholder.
          if (name.empty() || name == "<unknown-resource>") ++bad;
          if (id >= kNumWellKnownResources && name.substr(0, 13) != "example.com/w") ++bad;
        }
      }
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  CHECK(bad.load() == 0);
  CHECK(passes.load() >= 40);
  CHECK(names.size() == 5 + kWriters * kPerWriter);
  // Every name got exactly one id, and Find agrees with Name.
  for (size_t id = 0; id < names.size(); ++id) {
    CHECK(names.Find(names.Name(static_cast<ResourceId>(id))) ==
          std::optional<ResourceId>(static_cast<ResourceId>(id)));
  }
}

// ---- ResourceVector -----------------------------------------------------------------------

TEST_CASE("ResourceVector: absent entries are zero; Set and Get", "[resources]") {
  ResourceVector v;
  CHECK(v.size() == 0);
  CHECK(v.IsZero());
  CHECK(v.Get(kCpu) == 0);
  CHECK(v.Get(200) == 0);

  v.Set(kNvidiaGpu, 0);  // setting zero past the end stores nothing
  CHECK(v.size() == 0);

  v.Set(kMemory, 2 * kGi);
  CHECK(v.size() == 2);
  CHECK(v.Get(kMemory) == 2 * kGi);
  CHECK(v.Get(kCpu) == 0);
  CHECK_FALSE(v.IsZero());

  v.Set(kNvidiaGpu, 8);
  CHECK(v.size() == 5);
  CHECK(v.Get(kNvidiaGpu) == 8);
  v.Set(kNvidiaGpu, 3);  // overwrite
  CHECK(v.Get(kNvidiaGpu) == 3);

  v.Set(kNvidiaGpu, 0);
  v.Set(kMemory, 0);
  CHECK(v.IsZero());
  CHECK(v.size() == 5);  // trailing zero slots remain
}

TEST_CASE("ResourceVector: Add, Sub and MaxWith work per resource", "[resources]") {
  ResourceVector a;
  a.Set(kCpu, 1500);
  a.Set(kMemory, kGi);
  ResourceVector b;
  b.Set(kCpu, 500);
  b.Set(kNvidiaGpu, 2);

  SECTION("Add") {
    a.Add(b);
    CHECK(a.Get(kCpu) == 2000);
    CHECK(a.Get(kMemory) == kGi);
    CHECK(a.Get(kNvidiaGpu) == 2);
    CHECK(a.size() == 5);
  }
  SECTION("Sub, going negative") {
    a.Sub(b);
    CHECK(a.Get(kCpu) == 1000);
    CHECK(a.Get(kMemory) == kGi);
    CHECK(a.Get(kNvidiaGpu) == -2);
    CHECK(a.AnyNegative());
  }
  SECTION("Sub from a shorter vector") {
    b.Sub(a);
    CHECK(b.Get(kCpu) == -1000);
    CHECK(b.Get(kMemory) == -kGi);
    CHECK(b.Get(kNvidiaGpu) == 2);
  }
  SECTION("MaxWith") {
    ResourceVector c;
    c.Set(kCpu, 700);
    c.Set(kMemory, 2 * kGi);
    a.MaxWith(b);
    CHECK(a.Get(kCpu) == 1500);
    CHECK(a.Get(kMemory) == kGi);
    CHECK(a.Get(kNvidiaGpu) == 2);
    a.MaxWith(c);
    CHECK(a.Get(kCpu) == 1500);
    CHECK(a.Get(kMemory) == 2 * kGi);
    CHECK(a.Get(kNvidiaGpu) == 2);
  }
  SECTION("MaxWith keeps a zero over a negative entry of the other") {
    ResourceVector neg;
    neg.Set(kCpu, -5);
    ResourceVector zero;
    zero.MaxWith(neg);
    CHECK(zero.Get(kCpu) == 0);
    CHECK_FALSE(zero.AnyNegative());
  }
  CHECK_FALSE(ResourceVector().AnyNegative());
}

TEST_CASE("ResourceVector arithmetic saturates at the int64 range", "[resources]") {
  ResourceVector big;
  big.Set(kCpu, kInt64Max);
  big.Set(kMemory, kInt64Min);
  ResourceVector one;
  one.Set(kCpu, 1);
  one.Set(kMemory, 1);

  SECTION("Add past the top stays at the top") {
    ResourceVector v = big;
    v.Add(one);
    CHECK(v.Get(kCpu) == kInt64Max);
    CHECK(v.Get(kMemory) == kInt64Min + 1);
    v.Add(big);
    CHECK(v.Get(kCpu) == kInt64Max);
    CHECK(v.Get(kMemory) == kInt64Min);  // (kInt64Min + 1) + kInt64Min saturates low
  }
  SECTION("Sub past the bottom stays at the bottom") {
    ResourceVector v = big;
    v.Sub(one);
    CHECK(v.Get(kCpu) == kInt64Max - 1);
    CHECK(v.Get(kMemory) == kInt64Min);
  }
  SECTION("0 - INT64_MIN saturates to INT64_MAX") {
    ResourceVector zero;
    ResourceVector min;
    min.Set(kCpu, kInt64Min);
    zero.Sub(min);
    CHECK(zero.Get(kCpu) == kInt64Max);
  }
  SECTION("an unbounded amount minus a usage stays huge instead of wrapping") {
    ResourceVector free;
    free.Set(kNvidiaGpu, kInt64Max);
    ResourceVector used;
    used.Set(kNvidiaGpu, -3);  // a negative entry must not wrap the sum to negative
    free.Sub(used);
    CHECK(free.Get(kNvidiaGpu) == kInt64Max);
    CHECK_FALSE(free.AnyNegative());
  }
}

TEST_CASE("ResourceVector equality ignores trailing zeros", "[resources]") {
  ResourceVector a;
  a.Set(kCpu, 100);
  ResourceVector b;
  b.Set(kCpu, 100);
  b.Set(kNvidiaGpu, 7);
  b.Set(kNvidiaGpu, 0);
  REQUIRE(a.size() == 1);
  REQUIRE(b.size() == 5);
  CHECK(a == b);
  CHECK(b == a);

  b.Set(kMemory, 1);
  CHECK_FALSE(a == b);
  CHECK_FALSE(b == a);

  ResourceVector c;
  c.Set(kCpu, 99);
  CHECK_FALSE(a == c);

  ResourceVector empty;
  ResourceVector zeros;
  zeros.Set(kPods, 1);
  zeros.Set(kPods, 0);
  CHECK(empty == zeros);
}

TEST_CASE("ResourceVector::DebugString prints non-zero entries in Kubernetes units",
          "[resources]") {
  ResourceNames names;
  const ResourceId foo = MustIntern(names, "example.com/foo");

  CHECK(ResourceVector().DebugString(names) == "none");

  ResourceVector v;
  v.Set(kCpu, 500);
  v.Set(kMemory, kGi);
  v.Set(kNvidiaGpu, 2);
  CHECK(v.DebugString(names) == "cpu=500m memory=1Gi nvidia.com/gpu=2");

  ResourceVector w;
  w.Set(kCpu, 2000);
  w.Set(kEphemeralStorage, 1000);
  w.Set(kPods, 1);
  w.Set(foo, 3);
  CHECK(w.DebugString(names) == "cpu=2 ephemeral-storage=1000 pods=1 example.com/foo=3");

  ResourceVector z;
  z.Set(kNvidiaGpu, 1);
  z.Set(kNvidiaGpu, 0);
  CHECK(z.DebugString(names) == "none");

  CHECK(FormatAmount(names, kCpu, 1500) == "1500m");
  CHECK(FormatAmount(names, kMemory, 64 * kGi) == "64Gi");
  CHECK(FormatAmount(names, kNvidiaGpu, 8) == "8");
}

// ---- checked_math -------------------------------------------------------------------------

TEST_CASE("Checked arithmetic reports overflow", "[checked_math]") {
  int64_t out = 0;
  CHECK(CheckedAdd(2, 3, &out));
  CHECK(out == 5);
  CHECK(CheckedAdd(kInt64Max - 1, 1, &out));
  CHECK(out == kInt64Max);
  CHECK_FALSE(CheckedAdd(kInt64Max, 1, &out));
  CHECK_FALSE(CheckedAdd(kInt64Min, -1, &out));

  CHECK(CheckedSub(3, 5, &out));
  CHECK(out == -2);
  CHECK_FALSE(CheckedSub(kInt64Min, 1, &out));
  CHECK_FALSE(CheckedSub(0, kInt64Min, &out));
  CHECK(CheckedSub(-1, kInt64Min, &out));
  CHECK(out == kInt64Max);

  CHECK(CheckedMul(-4, 5, &out));
  CHECK(out == -20);
  CHECK_FALSE(CheckedMul(kInt64Max, 2, &out));
  CHECK_FALSE(CheckedMul(kInt64Min, -1, &out));
  CHECK(CheckedMul(int64_t{1} << 31, int64_t{1} << 31, &out));
  CHECK(out == int64_t{1} << 62);
  CHECK_FALSE(CheckedMul(int64_t{1} << 32, int64_t{1} << 31, &out));
}

// expect(num, den) for every num within 2 of q * den, for each divisor and quotient, where a
// rounded estimate lands on the wrong side: those that fit int64 and whose quotient is below
// `below`.
template <typename Expect>
void NearMultiples(std::initializer_list<int64_t> dens, std::initializer_list<int64_t> quotients,
                   int64_t below, Expect&& expect) {
  for (int64_t den : dens) {
    for (int64_t q : quotients) {
      if (q != 0 && den > kInt64Max / q) continue;
      const int64_t at = q * den;
      for (int64_t d = -2; d <= 2; ++d) {
        if ((d < 0 && at < -d) || (d > 0 && at > kInt64Max - d)) continue;
        if ((at + d) / den >= below) continue;
        expect(at + d, den);
      }
    }
  }
}

// A share as binpack divides it: (used * 10000, allocatable) with used below allocatable, and
// allocatables of every magnitude.
std::pair<int64_t, int64_t> BinpackShare(std::mt19937_64& gen) {
  const int64_t alloc =
      std::max<int64_t>(std::uniform_int_distribution<int64_t>(1, kInt64Max / 10000)(gen) >>
                            std::uniform_int_distribution<int>(0, 60)(gen),
                        1);
  const int64_t used = std::uniform_int_distribution<int64_t>(0, alloc - 1)(gen);
  return {used * 10000, alloc};
}

TEST_CASE("SmallQuotient is floor division wherever the double quotient rounds", "[checked_math]") {
  size_t checked = 0;
  auto expect = [&](int64_t num, int64_t den) {
    INFO(num << " / " << den);
    CHECK(SmallQuotient(num, den) == num / den);
    ++checked;
  };
  // Around every multiple of the divisor, where a rounded double lands on the wrong side.
  NearMultiples({1, 3, 7, 10, 1000, 64000, 10007, int64_t{1} << 32, 68719476736 + 1,
                 (int64_t{1} << 53) + 1, 999999999999999989, kInt64Max / 3, kInt64Max - 1, kInt64Max},
                {0, 1, 2, 9999, 100000}, kInt64Max, expect);
  // Shares as binpack takes them: used * 10000 / allocatable with used below allocatable.
  std::mt19937_64 gen(17);
  for (int i = 0; i < 200000; ++i) {
    const auto [num, den] = BinpackShare(gen);
    expect(num, den);
  }
  // Quotients up to 2^50.
  for (int i = 0; i < 200000; ++i) {
    const int64_t den = std::uniform_int_distribution<int64_t>(1, kInt64Max)(gen) >>
                        std::uniform_int_distribution<int>(0, 62)(gen);
    const int64_t most = den > kInt64Max >> 50 ? kInt64Max : den << 50;
    expect(std::uniform_int_distribution<int64_t>(0, most)(gen), std::max<int64_t>(den, 1));
  }
  CHECK(checked > 400000);
}

TEST_CASE("QuotientByInverse is floor division for quotients below 2^20", "[checked_math]") {
  size_t checked = 0;
  auto expect = [&](int64_t num, int64_t den) {
    INFO(num << " / " << den);
    CHECK(QuotientByInverse(num, den, Inverse(den)) == num / den);
    ++checked;
  };
  // Around every multiple of the divisor, up to the largest quotient it takes.
  NearMultiples({1, 2, 3, 6, 7, 10, 1000, 64000, 10007, 16777217, int64_t{1} << 32, 68719476736 + 1,
                 (int64_t{1} << 53) + 1, 999999999999, kInt64Max >> 20, kInt64Max / 3, kInt64Max - 1,
                 kInt64Max},
                {0, 1, 2, 9999, 10000, 99999, 100000, (int64_t{1} << 20) - 1}, int64_t{1} << 20, expect);
  // Shares as binpack takes them: used * 10000 / allocatable with used below allocatable, and
  // the weighted mean's (share sum * 10) / total weight.
  std::mt19937_64 gen(23);
  for (int i = 0; i < 200000; ++i) {
    const auto [num, den] = BinpackShare(gen);
    expect(num, den);
    const int64_t total = std::uniform_int_distribution<int64_t>(1, 3000)(gen);
    expect(std::uniform_int_distribution<int64_t>(0, 10000 * total)(gen) * 10, total);
  }
  // Any quotient below 2^20.
  for (int i = 0; i < 200000; ++i) {
    const int64_t den = std::max<int64_t>(std::uniform_int_distribution<int64_t>(1, kInt64Max)(gen) >>
                                              std::uniform_int_distribution<int>(0, 62)(gen),
                                          1);
    const int64_t most = den > kInt64Max >> 20 ? kInt64Max : (den << 20) - 1;
    expect(std::uniform_int_distribution<int64_t>(0, most)(gen), den);
  }
  CHECK(checked > 600000);
}

TEST_CASE("Saturating arithmetic clamps to the int64 range", "[checked_math]") {
  CHECK(SaturatingAdd(2, 3) == 5);
  CHECK(SaturatingAdd(kInt64Max, 1) == kInt64Max);
  CHECK(SaturatingAdd(kInt64Max, kInt64Max) == kInt64Max);
  CHECK(SaturatingAdd(kInt64Min, -1) == kInt64Min);
  CHECK(SaturatingAdd(kInt64Min, kInt64Max) == -1);

  CHECK(SaturatingSub(2, 3) == -1);
  CHECK(SaturatingSub(kInt64Min, 1) == kInt64Min);
  CHECK(SaturatingSub(kInt64Max, -1) == kInt64Max);
  CHECK(SaturatingSub(0, kInt64Min) == kInt64Max);
  CHECK(SaturatingSub(-1, kInt64Min) == kInt64Max);

  CHECK(SaturatingMul(6, 7) == 42);
  CHECK(SaturatingMul(kInt64Max, 2) == kInt64Max);
  CHECK(SaturatingMul(kInt64Max, -2) == kInt64Min);
  CHECK(SaturatingMul(-2, kInt64Max) == kInt64Min);
  CHECK(SaturatingMul(kInt64Min, -1) == kInt64Max);
  CHECK(SaturatingMul(kInt64Min, kInt64Min) == kInt64Max);
  CHECK(SaturatingMul(kInt64Min, 0) == 0);
}

}  // namespace
}  // namespace berth::core
