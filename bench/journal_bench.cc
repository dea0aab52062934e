// The decision journal's cost on the filter path (docs/performance.md, "Decision journal"):
// the verb copies its request and answer into the journal's queue; the writer thread formats
// and writes them. Measured in one process, calls to a Service without a journal and to one
// with it alternating, so both see the same machine state.
#include "bench/journal_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_service.h"
#include "bench/cluster_profiles.h"
#include "core/strings.h"
#include "extender/journal.h"
#include "extender/service.h"

namespace berth::bench {
namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int RunJournalBench(bool quick) {
  const std::vector<int> sizes = quick ? std::vector<int>{300} : std::vector<int>{500, 2000, 5000};
  const int rounds = quick ? 2 : 10;
  char tmpl[] = "/tmp/berth-journal-bench-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir == nullptr) {
    std::fprintf(stderr, "FAIL: cannot make a directory for the journal\n");
    return 1;
  }
  int failures = 0;
  std::printf("decision journal: filter latency off and on (every node a candidate; calls alternate between the two)\n");
  std::printf("%-6s %12s %12s %8s %12s %12s %8s %14s\n", "nodes", "p50 off us", "p50 on us", "ratio",
              "p99 off us", "p99 on us", "ratio", "bytes/call");
  for (int size : sizes) {
    ClusterProfile p = Profile1k();
    p.nodes = size;
    p.name = StrCat(size);
    // Two services over two copies of the cluster, one journaled from the start (its snapshot
    // written before the first call), so calls switch between them without a new snapshot.
    std::unique_ptr<BenchService> plain = MakeBenchService(p);
    std::unique_ptr<BenchService> journaled_service = MakeBenchService(p);
    absl::StatusOr<std::unique_ptr<extender::Journal>> journal = extender::Journal::Open(
        extender::JournalOptions{.dir = StrCat(dir, "/", size)},
        extender::JournalHeader{.mode = "kubernetes", .scheduler_name = "berth-scheduler", .version = "bench"});
    if (!journal.ok()) {
      std::fprintf(stderr, "FAIL: %s\n", std::string(journal.status().message()).c_str());
      return 1;
    }
    journaled_service->service->SetJournal(journal->get());
    (*journal)->Flush();
    const uint64_t bytes_before = (*journal)->stats().bytes;
    const std::vector<int> all = CandidateIndices(p, p.nodes, 1);
    std::vector<std::string> bodies;
    for (int k = 0; k < 16; ++k) {
      PendingPodSpec spec = PendingPodSpecOf(PendingKind::kFits);
      spec.name = StrCat("journal-bench-", k);
      spec.uid = StrCat("journal-bench-uid-", k);
      bodies.push_back(ArgsNamesJson(p, PendingPodJson(spec), all));
    }
    const int calls = std::max(50, 400'000 / size);
    std::vector<double> off, on;
    uint64_t calls_on = 0;
    // Each iteration calls both, in turns of order, so that both see the same moment of a noisy
    // machine (rounds of one then the other differed by up to 30% with no journal on either).
    for (int c = 0; c < calls * rounds; ++c) {
      const std::string& body = bodies[static_cast<size_t>(c) % bodies.size()];
      for (int k = 0; k < 2; ++k) {
        const bool journaled = (k + c) % 2 == 1;
        extender::Service& service = journaled ? *journaled_service->service : *plain->service;
        const auto start = std::chrono::steady_clock::now();
        const extender::Reply reply = service.Filter(body);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        if (reply.status != 200) ++failures;
        (journaled ? on : off).push_back(us);
        if (journaled) ++calls_on;
      }
    }
    (*journal)->Flush();
    // Per call, the one node list written once included.
    const double per_call =
        static_cast<double>((*journal)->stats().bytes - bytes_before) / static_cast<double>(calls_on);
    const double p50_off = Percentile(off, 0.5), p50_on = Percentile(on, 0.5);
    const double p99_off = Percentile(off, 0.99), p99_on = Percentile(on, 0.99);
    std::printf("%-6d %12.1f %12.1f %7.3fx %12.1f %12.1f %7.3fx %14.0f\n", size, p50_off, p50_on, p50_on / p50_off,
                p99_off, p99_on, p99_on / p99_off, per_call);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (failures > 0) std::fprintf(stderr, "FAIL: %d filter calls did not answer 200\n", failures);
  return failures > 0 ? 1 : 0;
}

}  // namespace berth::bench
