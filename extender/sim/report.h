#pragma once

// The report of a `berth simulate` run: a summary table for the terminal, report.json (schema
// version SimInfo::schema_version), plots as SVG and PNG drawn by gnuplot, and an index.html
// that shows them. docs/simulate.md explains how to read each.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "extender/sim/result.h"

namespace berth::extender::sim {

/// The headline figures of one world, as the summary and report.json give them.
struct Summary {
  double utilisation_cpu = 0, utilisation_memory = 0, utilisation_gpu = 0;  ///< time-averaged
  double useful_utilisation_gpu = 0;  ///< the same, less gangs short of minMember
  double fairness_error = 0;  ///< see docs/simulate.md
  /// Time-averaged fragmentation index (policy/fragmentation): the share of the free GPUs that
  /// pods of the workload's most common request could not use.
  double fragmentation = 0;
  double wait_p50 = 0, wait_p90 = 0, wait_p99 = 0;  ///< seconds, over jobs that started
  double longest_wait = 0;    ///< seconds; jobs never started count up to the end
  std::string longest_wait_job;
  double pods_per_second = 0, jobs_per_second = 0;
  double makespan = 0;
  int64_t jobs_completed = 0, jobs_never_started = 0;
  int64_t partial_gangs_stuck = 0;
  int64_t evicted_pods = 0;
  double gpu_hours_lost = 0, cpu_hours_lost = 0;
  int64_t invariant_violations = 0;
  /// While work waits (RunMetrics::gpu_demand): the share of the run it does, and the GPU
  /// utilisation, raw and useful, averaged over those samples.
  double waiting_share = 0;
  double utilisation_gpu_waiting = 0, useful_utilisation_gpu_waiting = 0;
  /// Room berth held for pods not bound yet, as a share of the GPUs, while work waits.
  double held_gpu_waiting = 0;
  /// Goodput: GPU-hours of completed work per hour of the makespan.
  double goodput_gpu = 0;
};

/// How long a queue takes to reach its fair share: its share counts as reached at a sample when
/// it is at least 90% of the fair share due to it then (RunMetrics::queue_fair_share); an
/// episode below starts when it falls short and ends when it reaches it again.
struct FairShareReach {
  double first = -1;   ///< seconds from the queue's first demand to its first reach; -1 never
  double longest = 0;  ///< the longest episode below, seconds (one still open counts to the end)
  double mean = 0;     ///< mean episode length, seconds
  int64_t episodes = 0;
};
/// Per queue that had demand.
std::map<std::string, FairShareReach> FairShareReaches(const RunMetrics& m, double end);

/// Computes one world's headline figures. docs/simulate-report.md defines each.
Summary Summarize(const RunMetrics& m, const SimInfo& info);

/// Wait percentiles of a group of jobs (a queue, a priority class).
struct WaitStats {
  double p50 = 0, p90 = 0, p99 = 0;  ///< seconds, over the group's jobs that started
  int64_t count = 0;                 ///< jobs of the group that started
  int64_t never_started = 0;         ///< jobs of the group that never started
};

/// Nearest-rank percentile (p in (0, 100]) of `values`: the smallest value such that at least
/// p% of the values are at most it, i.e. sorted[ceil(p/100 * n) - 1]. 0 when empty.
double Percentile(std::vector<double> values, double p);

/// Wait statistics per queue (`by_queue`) or per priority class ("" reads "(none)").
std::map<std::string, WaitStats> WaitsBy(const RunMetrics& m, bool by_queue);

/// "45s", "2m 05s", "1h 23m", "3d 4h": a duration in human units.
std::string HumanDuration(double seconds);

/// The summary table: one row per figure, columns berth, baseline, ratio.
/// The ETA accuracy study's table (empty when the study did not run).
std::string EtaStudyText(const EtaStudy& e);
std::string SummaryTable(const SimResult& r);
/// The work evictions threw away, by cause, for both worlds.
std::string EvictionsText(const SimResult& r);
/// FairShareReaches for both worlds, per queue: a header row, then a row per queue.
std::vector<std::vector<std::string>> FairShareRows(const SimResult& r);
/// FairShareRows as a text table.
std::string FairShareText(const SimResult& r);

/// report.json as text.
std::string ReportJson(const SimResult& r);

/// Creates `dir` and checks that files can be written there: asked before a simulation runs, so
/// that a run of hours is not lost to an output directory it could never write.
absl::Status PrepareReportDir(const std::string& dir);

/// Writes report.json, the plots (*.svg and *.png, when gnuplot is installed; otherwise the
/// error says so and report.json is still written) and index.html into `dir` (created).
absl::Status WriteReport(const SimResult& r, const std::string& dir);

}  // namespace berth::extender::sim
