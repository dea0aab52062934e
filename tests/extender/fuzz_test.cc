// Seeded mutation fuzzing of every verb with the real kube-scheduler fixtures as seeds: whatever
// the bytes, berth answers 200 or 400 with valid JSON, never crashes, and a refused request
// changes nothing. Bounded and deterministic (fixed seed), so it runs in every test pass; run
// the test binary under -DBERTH_SANITIZE=address,undefined to catch memory errors too.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/builders.h"
#include "tests/testing/files.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

// One random edit of a JSON text: flip a byte, delete or duplicate a span, truncate, or splice
// in a token that changes a value's type or adds nesting.
std::string Mutate(std::string s, std::mt19937_64& rng) {
  static const std::vector<std::string> kTokens = {
      "null", "true", "-1", "1e999", "\"\"", "[]", "{}", "\"1K\"", "\"-5\"", "\"\\u0000\"",
      "[[[[[[[[[[", "}}}}", "\"\xff\xfe\"", ",", ":", "\"9223372036854775808\"", "0.5",
      "{\"a\":", "\"nvidia.com/gpu\""};
  if (s.empty()) return kTokens[rng() % kTokens.size()];
  std::uniform_int_distribution<size_t> pos(0, s.size() - 1);
  switch (rng() % 6) {
    case 0: s[pos(rng)] = static_cast<char>(rng() & 0xff); break;
    case 1: {
      const size_t at = pos(rng);
      s.erase(at, std::min<size_t>(s.size() - at, 1 + rng() % 64));
      break;
    }
    case 2: {
      const size_t at = pos(rng);
      s.insert(at, s.substr(at, std::min<size_t>(s.size() - at, 1 + rng() % 64)));
      break;
    }
    case 3: s.resize(pos(rng)); break;
    default: {
      // Replace the value after a random ':' with a token.
      const size_t colon = s.find(':', pos(rng));
      if (colon == std::string::npos) return s + kTokens[rng() % kTokens.size()];
      const size_t end = s.find_first_of(",}]", colon + 1);
      s.replace(colon + 1, (end == std::string::npos ? s.size() : end) - colon - 1,
                kTokens[rng() % kTokens.size()]);
    }
  }
  return s;
}

std::string Snapshot(Harness& h) { return h.service().DebugSnapshot(false).body; }

// The model before a request: its generation (every write bumps it) and, every 25th request,
// the whole snapshot as a second, independent check.
struct Before {
  uint64_t generation;
  std::string snapshot;
};

Before Capture(Harness& h, int i) {
  return {Generation(h), i % 25 == 0 ? Snapshot(h) : std::string()};
}

void RequireUnchanged(Harness& h, const Before& before) {
  REQUIRE(Generation(h) == before.generation);
  if (!before.snapshot.empty()) REQUIRE(Snapshot(h) == before.snapshot);
}

TEST_CASE("mutated fixture requests get 200 or a clear 400 and a refused one changes nothing") {
  const std::filesystem::path dir = BERTH_FIXTURES_DIR;
  struct Seed {
    std::string verb;
    std::string body;
  };
  std::vector<Seed> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find("-request-") == std::string::npos) continue;
    seeds.push_back({name.substr(0, name.find('-')), ReadTestFile(entry.path())});
  }
  REQUIRE(seeds.size() == 17);

  Harness h;
  std::mt19937_64 rng(20261121);
  int ok = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const Seed& seed = seeds[rng() % seeds.size()];
    std::string body = seed.body;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) body = Mutate(std::move(body), rng);
    const Before before = Capture(h, i);
    extender::Reply r;
    if (seed.verb == "filter") r = h.service().Filter(body);
    else if (seed.verb == "prioritize") r = h.service().Prioritize(body);
    else if (seed.verb == "bind") r = h.service().Bind(body);
    else r = h.service().Preempt(body);
    INFO("iteration " << i << " verb " << seed.verb << " body: " << body.substr(0, 400));
    REQUIRE((r.status == 200 || r.status == 400));
    REQUIRE(nlohmann::json::accept(r.body));
    if (r.status == 400) {
      ++refused;
      const auto j = nlohmann::json::parse(r.body);
      REQUIRE(j.contains("Error"));
      REQUIRE(!j["Error"].get<std::string>().empty());
      RequireUnchanged(h, before);
    } else {
      ++ok;
    }
  }
  // Both outcomes must have been exercised, or the mutations are not doing their job.
  CHECK(ok > 100);
  CHECK(refused > 100);
  // And berth still answers a good request correctly afterwards.
  const auto reply = h.Filter(ArgsNames(MakePod("after").Cpu("1").Obj(), {"nowhere"}));
  CHECK(reply["FailedNodes"]["nowhere"] == "unknown node");
}

TEST_CASE("mutated watch events are applied whole or refused whole") {
  Harness h;
  std::vector<nlohmann::json> objs = {MakeNode("n1").Cpu("4").Memory("8Gi").Gpu(2).Obj(),
                                      MakePod("p1").Cpu("1").Node("n1").Phase("Running").Obj(),
                                      MakePod("p2").Gpu(1).Obj()};
  nlohmann::json events = nlohmann::json::array();
  for (const auto& o : objs) events.push_back(Event("ADDED", o));
  const std::string seed = events.dump();
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string body = Mutate(seed, rng);
    const Before before = Capture(h, i);
    extender::Reply r = h.service().Events(body);
    INFO("iteration " << i << " body: " << body.substr(0, 400));
    REQUIRE((r.status == 200 || r.status == 400));
    REQUIRE(nlohmann::json::accept(r.body));
    if (r.status == 400) {
      ++refused;
      REQUIRE(nlohmann::json::parse(r.body).contains("error"));
      RequireUnchanged(h, before);
    }
  }
  CHECK(refused > 100);
}

}  // namespace
}  // namespace berth::testing
