#include "extender/sim/report.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "extender/text_table.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace berth::extender::sim {
namespace {

using nlohmann::json;

constexpr const char* kGpu = "nvidia.com/gpu";
constexpr const char* kBerthColour = "#1f77b4";     // blue
constexpr const char* kBaselineColour = "#ff7f0e";  // orange
// Colours for series that are not worlds (queues, gang states), berth's and the baseline's
// colours left out so that they never read as a world.
constexpr const char* kSeriesColours[] = {"#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                          "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
constexpr size_t kMaxPlotPoints = 2000;  // series are averaged into at most this many points
constexpr size_t kMaxQueuesPlotted = 8;
constexpr size_t kMaxPoolsPlotted = 4;

// When a job that never started stops waiting: the end of the simulation.
double EndOfRun(const RunMetrics& m, const SimInfo& info) {
  double end = info.simulated_seconds;
  end = std::max(end, m.makespan);
  if (!m.times.empty()) end = std::max(end, m.times.back());
  for (const auto& j : m.jobs) end = std::max({end, j.submit, j.end});
  return end;
}

// The time-weighted mean of a sampled series over [times[0], until]: each sample holds until the
// next one (the last one until `until`); samples after `until` are left out. When `until` is not
// after the first sample, the plain mean of all samples.
double TimeAverage(const std::vector<double>& times, const std::vector<double>& values,
                   double until) {
  const size_t n = std::min(times.size(), values.size());
  if (n == 0) return 0;
  if (until <= times[0]) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += values[i];
    return sum / static_cast<double>(n);
  }
  double weighted = 0, total = 0;
  for (size_t i = 0; i < n && times[i] < until; ++i) {
    const double next = i + 1 < n ? std::min(times[i + 1], until) : until;
    const double w = std::max(0.0, next - times[i]);
    weighted += w * values[i];
    total += w;
  }
  return total > 0 ? weighted / total : 0;
}

double FairnessError(const RunMetrics& m) {
  size_t n = m.times.size();
  for (const auto& [q, v] : m.queue_fair_share) n = std::max(n, v.size());
  double sum = 0;
  int64_t samples = 0;
  for (size_t i = 0; i < n; ++i) {
    double err = 0;
    int queues = 0;
    for (const auto& [q, fair] : m.queue_fair_share) {
      if (i >= fair.size() || fair[i] <= 0) continue;
      double share = 0;
      auto it = m.queue_share.find(q);
      if (it != m.queue_share.end() && i < it->second.size()) share = it->second[i];
      err += std::abs(share - fair[i]);
      ++queues;
    }
    if (queues >= 2) {
      sum += err / queues;
      ++samples;
    }
  }
  return samples > 0 ? sum / static_cast<double>(samples) : 0;
}

std::optional<double> Ratio(double berth, double baseline) {
  if (baseline == 0 || !std::isfinite(berth) || !std::isfinite(baseline)) return std::nullopt;
  return berth / baseline;
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", fraction * 100); }

std::string Rate(double v) {
  if (v == 0) return "0";
  if (std::abs(v) >= 100) return absl::StrFormat("%.0f", v);
  if (std::abs(v) >= 1) return absl::StrFormat("%.2f", v);
  return absl::StrFormat("%.3g", v);
}

std::string RatioText(double berth, double baseline) {
  auto r = Ratio(berth, baseline);
  return r ? absl::StrFormat("%.2fx", *r) : "-";
}

// One figure of the summary, as text for both worlds and as numbers for the ratio.
struct Row {
  std::string label;
  std::string key;  // report.json's key
  double berth = 0, baseline = 0;
  std::string berth_text, baseline_text;
};

std::vector<Row> SummaryRows(const Summary& b, const Summary& k) {
  std::vector<Row> rows;
  auto add = [&](std::string label, std::string key, double vb, double vk,
                 const std::function<std::string(double)>& fmt) {
    rows.push_back({std::move(label), std::move(key), vb, vk, fmt(vb), fmt(vk)});
  };
  auto count = [](double v) { return absl::StrCat(static_cast<int64_t>(v)); };
  add("utilisation cpu", "utilisationCpu", b.utilisation_cpu, k.utilisation_cpu, Percent);
  add("utilisation memory", "utilisationMemory", b.utilisation_memory, k.utilisation_memory,
      Percent);
  add("utilisation nvidia.com/gpu", "utilisationGpu", b.utilisation_gpu, k.utilisation_gpu,
      Percent);
  add("useful utilisation nvidia.com/gpu", "usefulUtilisationGpu", b.useful_utilisation_gpu,
      k.useful_utilisation_gpu, Percent);
  add("share of the run work waits", "waitingShare", b.waiting_share, k.waiting_share, Percent);
  add("GPU utilisation while work waits", "utilisationGpuWaiting", b.utilisation_gpu_waiting,
      k.utilisation_gpu_waiting, Percent);
  add("useful GPU utilisation while work waits", "usefulUtilisationGpuWaiting",
      b.useful_utilisation_gpu_waiting, k.useful_utilisation_gpu_waiting, Percent);
  add("GPUs held for unbound pods while work waits", "heldGpuWaiting", b.held_gpu_waiting,
      k.held_gpu_waiting, Percent);
  add("goodput GPU-hours/h", "goodputGpu", b.goodput_gpu, k.goodput_gpu,
      [](double v) { return absl::StrFormat("%.1f", v); });
  add("fairness error", "fairnessError", b.fairness_error, k.fairness_error,
      [](double v) { return absl::StrFormat("%.3f", v); });
  add("fragmentation index", "fragmentation", b.fragmentation, k.fragmentation,
      [](double v) { return absl::StrFormat("%.3f", v); });
  add("wait p50", "waitP50", b.wait_p50, k.wait_p50, HumanDuration);
  add("wait p90", "waitP90", b.wait_p90, k.wait_p90, HumanDuration);
  add("wait p99", "waitP99", b.wait_p99, k.wait_p99, HumanDuration);
  // The longest wait names its job: "2h 05m (train-17)".
  auto longest = [](const Summary& s) {
    return s.longest_wait_job.empty()
               ? HumanDuration(s.longest_wait)
               : absl::StrCat(HumanDuration(s.longest_wait), " (", s.longest_wait_job, ")");
  };
  rows.push_back({"longest wait", "longestWait", b.longest_wait, k.longest_wait, longest(b),
                  longest(k)});
  add("jobs completed", "jobsCompleted", static_cast<double>(b.jobs_completed),
      static_cast<double>(k.jobs_completed), count);
  add("jobs never started", "jobsNeverStarted", static_cast<double>(b.jobs_never_started),
      static_cast<double>(k.jobs_never_started), count);
  add("throughput pods/s", "podsPerSecond", b.pods_per_second, k.pods_per_second, Rate);
  add("throughput jobs/s", "jobsPerSecond", b.jobs_per_second, k.jobs_per_second, Rate);
  add("makespan", "makespan", b.makespan, k.makespan, HumanDuration);
  add("partial gangs stuck", "partialGangsStuck", static_cast<double>(b.partial_gangs_stuck),
      static_cast<double>(k.partial_gangs_stuck), count);
  add("evicted pods", "evictedPods", static_cast<double>(b.evicted_pods),
      static_cast<double>(k.evicted_pods), count);
  add("GPU-hours lost", "gpuHoursLost", b.gpu_hours_lost, k.gpu_hours_lost,
      [](double v) { return absl::StrFormat("%.1f", v); });
  add("CPU-hours lost", "cpuHoursLost", b.cpu_hours_lost, k.cpu_hours_lost,
      [](double v) { return absl::StrFormat("%.1f", v); });
  add("invariant violations", "invariantViolations", static_cast<double>(b.invariant_violations),
      static_cast<double>(k.invariant_violations), count);
  return rows;
}

std::string ClassLabel(const std::string& c) { return c.empty() ? "(none)" : c; }

json SummaryJson(const Summary& s) {
  return json{{"utilisationCpu", s.utilisation_cpu},
              {"utilisationMemory", s.utilisation_memory},
              {"utilisationGpu", s.utilisation_gpu},
              {"usefulUtilisationGpu", s.useful_utilisation_gpu},
              {"fairnessError", s.fairness_error},
              {"fragmentation", s.fragmentation},
              {"waitP50", s.wait_p50},
              {"waitP90", s.wait_p90},
              {"waitP99", s.wait_p99},
              {"longestWait", s.longest_wait},
              {"longestWaitJob", s.longest_wait_job},
              {"podsPerSecond", s.pods_per_second},
              {"jobsPerSecond", s.jobs_per_second},
              {"makespan", s.makespan},
              {"jobsCompleted", s.jobs_completed},
              {"jobsNeverStarted", s.jobs_never_started},
              {"partialGangsStuck", s.partial_gangs_stuck},
              {"evictedPods", s.evicted_pods},
              {"gpuHoursLost", s.gpu_hours_lost},
              {"cpuHoursLost", s.cpu_hours_lost},
              {"invariantViolations", s.invariant_violations},
              {"waitingShare", s.waiting_share},
              {"utilisationGpuWaiting", s.utilisation_gpu_waiting},
              {"usefulUtilisationGpuWaiting", s.useful_utilisation_gpu_waiting},
              {"heldGpuWaiting", s.held_gpu_waiting},
              {"goodputGpu", s.goodput_gpu}};
}

// Rounds for report.json's series: enough digits to plot, far fewer bytes.
double Round(double v, double unit) { return std::round(v / unit) * unit; }

json Rounded(const std::vector<double>& v, double unit) {
  json a = json::array();
  for (double x : v) a.push_back(Round(x, unit));
  return a;
}

json WaitsJson(const std::map<std::string, WaitStats>& waits) {
  json o = json::object();
  for (const auto& [k, w] : waits) {
    o[k] = {{"p50", w.p50}, {"p90", w.p90}, {"p99", w.p99}, {"count", w.count},
            {"neverStarted", w.never_started}};
  }
  return o;
}

json SeriesJson(const RunMetrics& m) {
  json s;
  s["times"] = Rounded(m.times, 1e-3);
  auto map_json = [](const std::map<std::string, std::vector<double>>& in, double unit) {
    json o = json::object();
    for (const auto& [k, v] : in) o[k] = Rounded(v, unit);
    return o;
  };
  s["utilisation"] = map_json(m.utilisation, 1e-4);
  s["usefulUtilisation"] = map_json(m.useful_utilisation, 1e-4);
  s["queueShare"] = map_json(m.queue_share, 1e-4);
  s["queueFairShare"] = map_json(m.queue_fair_share, 1e-4);
  json g = {{"waiting", json::array()}, {"reserved", json::array()}, {"partial", json::array()},
            {"running", json::array()}};
  for (const auto& c : m.gangs) {
    g["waiting"].push_back(c.waiting);
    g["reserved"].push_back(c.reserved);
    g["partial"].push_back(c.partial);
    g["running"].push_back(c.running);
  }
  s["gangs"] = g;
  s["poolLent"] = map_json(m.pool_lent, 1e-3);
  s["poolBorrowed"] = map_json(m.pool_borrowed, 1e-3);
  s["pendingPods"] = m.pending_pods;
  s["gpuDemand"] = Rounded(m.gpu_demand, 1e-4);
  s["heldGpus"] = Rounded(m.held_gpus, 1e-4);
  s["fragmentationIndex"] = Rounded(m.fragmentation_index, 1e-4);
  s["podsThatFit"] = m.pods_that_fit;
  return s;
}

json EvictionsJson(const RunMetrics& m) {
  json a = json::array();
  for (const auto& e : m.evictions) {
    a.push_back({{"cause", e.cause},
                 {"pods", e.pods},
                 {"gpuHoursLost", e.gpu_hours_lost},
                 {"cpuHoursLost", e.cpu_hours_lost}});
  }
  return a;
}

json InvariantsJson(const RunMetrics& m) {
  json a = json::array();
  for (const auto& i : m.invariants) {
    json o = {{"name", i.name}, {"description", i.description}, {"violations", i.violations}};
    if (i.violations > 0 || !i.first_example.empty()) {
      o["firstExample"] = i.first_example;
      o["firstTime"] = i.first_time;
    }
    a.push_back(std::move(o));
  }
  return a;
}

json CostJson(const RunMetrics& m, const SimInfo& info) {
  json micros = json::object();
  for (const auto& [verb, calls] : m.verb_calls) {
    auto it = m.verb_seconds.find(verb);
    const double secs = it == m.verb_seconds.end() ? 0 : it->second;
    micros[verb] = calls > 0 ? secs * 1e6 / static_cast<double>(calls) : 0.0;
  }
  json o = {{"verbCalls", m.verb_calls},
            {"verbSeconds", m.verb_seconds},
            {"verbMicrosPerCall", micros},
            {"schedulingAttempts", m.scheduling_attempts},
            {"wallSeconds", m.wall_seconds}};
  o["simulatedToWall"] =
      m.wall_seconds > 0 ? json(info.simulated_seconds / m.wall_seconds) : json(nullptr);
  return o;
}

// Jobs as columns and rows: a week of jobs is tens of thousands of them.
json JobsJson(const RunMetrics& m) {
  json rows = json::array();
  for (const auto& j : m.jobs) {
    rows.push_back(json::array({j.name, j.queue, j.priority_class, j.pods, j.gang ? 1 : 0,
                                Round(j.submit, 1e-3), Round(j.start, 1e-3), Round(j.end, 1e-3),
                                j.restarts}));
  }
  return rows;
}

json RatioJson(const Summary& b, const Summary& k) {
  json o = json::object();
  for (const auto& row : SummaryRows(b, k)) {
    auto r = Ratio(row.berth, row.baseline);
    o[row.key] = r ? json(*r) : json(nullptr);
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Plots.

struct Plot {
  std::string name;     // file stem
  std::string title;
  std::string caption;  // how to read it (HTML-safe text)
  std::string data;     // <name>.dat
  std::string script;   // <name>.gp, drawn once per terminal
  int width = 1000, height = 500;
  std::string skipped;  // why it was not drawn; empty when drawn
};

std::string GpString(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else out += c;
  }
  return out + "'";
}

// Averages a series into at most kMaxPlotPoints buckets of consecutive samples.
std::vector<size_t> Buckets(size_t n) {
  std::vector<size_t> starts;
  const size_t per = n <= kMaxPlotPoints ? 1 : (n + kMaxPlotPoints - 1) / kMaxPlotPoints;
  for (size_t i = 0; i < n; i += per) starts.push_back(i);
  starts.push_back(n);
  return starts;
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "NaN";
  return absl::StrFormat("%.6g", v);
}

// A block of a .dat file: time in hours, then each column times `scale` (NaN where a column is
// short).
std::string DataBlock(const std::vector<double>& times,
                      const std::vector<const std::vector<double>*>& columns,
                      double scale, const std::string& header) {
  std::string out = absl::StrCat("# ", header, "\n");
  const auto b = Buckets(times.size());
  for (size_t k = 0; k + 1 < b.size(); ++k) {
    const size_t lo = b[k], hi = b[k + 1];
    double t = 0;
    for (size_t i = lo; i < hi; ++i) t += times[i];
    absl::StrAppend(&out, Num(t / static_cast<double>(hi - lo) / 3600));
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto* col = columns[c];
      double sum = 0;
      size_t cnt = 0;
      for (size_t i = lo; i < hi; ++i) {
        if (col != nullptr && i < col->size()) {
          sum += (*col)[i];
          ++cnt;
        }
      }
      absl::StrAppend(&out, " ",
                      cnt > 0 ? Num(sum / static_cast<double>(cnt) * scale) : "NaN");
    }
    out += "\n";
  }
  return out + "\n\n";
}

std::vector<double> ToDoubles(const std::vector<int>& v) { return {v.begin(), v.end()}; }

bool AnyNonZero(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return x != 0; });
}

const std::string kCommon =
    "set encoding utf8\n"
    "set grid lc rgb '#d0d0d0'\n"
    "set border lc rgb '#404040'\n"
    "set key outside right top vertical Left reverse box lc rgb '#c0c0c0'\n"
    "set xrange [0:*]\n"
    "set lmargin 12\n";

// Room on the right for the key (outside the plot), from its longest label.
std::string KeyMargin(size_t longest_label) {
  return absl::StrCat("set rmargin ", longest_label + 9, "\n");
}

// One line of a plot command: column `col` of block `index` of `file` against the hours (or
// whatever column 1 holds), drawn with `style` ("lines", "steps").
std::string Line(const std::string& file, int index, int col, const char* colour,
                 const std::string& title, int dash = 1, double width = 2,
                 const char* style = "lines") {
  return absl::StrFormat("%s index %d using 1:%d with %s lw %g dt %d lc rgb '%s' title %s",
                         GpString(file), index, col, style, width, dash, colour,
                         GpString(title));
}

// "plot" and its lines, one to a script line.
std::string PlotCommand(const std::vector<std::string>& lines) {
  return absl::StrCat("plot ", absl::StrJoin(lines, ", \\\n  "), "\n");
}

struct PlottedWorld {
  const RunMetrics* m;
  const char* label;
  const char* colour;
};

// The two worlds, in the order of their blocks in every .dat file: berth (index 0, blue), then
// the baseline (index 1, orange).
std::array<PlottedWorld, 2> Worlds(const SimResult& r) {
  return {PlottedWorld{&r.berth, "berth", kBerthColour},
          PlottedWorld{&r.baseline, "baseline", kBaselineColour}};
}

// A world's line from column `col` of its block, in its colour, for each world in `drawn`.
std::vector<std::string> WorldLines(const std::string& file,
                                    const std::array<PlottedWorld, 2>& worlds,
                                    const std::vector<int>& drawn, int col,
                                    const char* style = "lines") {
  std::vector<std::string> lines;
  for (int w : drawn) {
    lines.push_back(Line(file, w, col, worlds[w].colour, worlds[w].label, 1, 2, style));
  }
  return lines;
}

// What a plot compares, for its title: "berth vs baseline" when both worlds are drawn, else the
// one world drawn (`berth simulate --baseline=false` runs berth's world alone).
std::string Compared(const std::array<PlottedWorld, 2>& worlds, const std::vector<int>& drawn) {
  if (drawn.size() == 1) return worlds[drawn[0]].label;
  return absl::StrCat(worlds[0].label, " vs ", worlds[1].label);
}

// A world's series by name (resource, queue, pool), one value per sample.
using SeriesMap = std::map<std::string, std::vector<double>>;

// The columns of one world's block of a .dat file; nullptr is a column of NaN.
using Columns = std::vector<const std::vector<double>*>;

// `key`'s series in `series`, or nullptr when the world has none.
const std::vector<double>* Series(const SeriesMap& series, const std::string& key) {
  auto it = series.find(key);
  return it == series.end() ? nullptr : &it->second;
}

// Appends a block per world to the plot's data (berth at index 0, the baseline at 1): the hours
// of the world's samples, then the columns `columns` fills in, times `scale`, under the header
// "<world>: <header>". `columns` returns whether they hold anything to draw; its columns may
// point into storage it reuses, since each block is written before the next world is asked.
// Returns the worlds that have samples and something to draw.
std::vector<int> WorldBlocks(Plot& p, const std::array<PlottedWorld, 2>& worlds, double scale,
                             const std::string& header,
                             const std::function<bool(const RunMetrics&, Columns&)>& columns) {
  std::vector<int> drawn;
  for (int w = 0; w < 2; ++w) {
    const RunMetrics& m = *worlds[w].m;
    Columns cols;
    const bool any = columns(m, cols);
    p.data += DataBlock(m.times, cols, scale, absl::StrCat(worlds[w].label, ": ", header));
    if (any && !m.times.empty()) drawn.push_back(w);
  }
  return drawn;
}

// A score per key of the `series` of both worlds: `fold` takes in each value, from 0.
std::map<std::string, double> Scores(const std::array<PlottedWorld, 2>& worlds,
                                     std::initializer_list<SeriesMap RunMetrics::*> series,
                                     double (*fold)(double score, double value)) {
  std::map<std::string, double> scores;
  for (const PlottedWorld& w : worlds) {
    for (SeriesMap RunMetrics::*s : series) {
      for (const auto& [key, v] : w.m->*s) {
        double& score = scores[key];
        for (double x : v) score = fold(score, x);
      }
    }
  }
  return scores;
}

// The keys scored above 0, by name; of more than `most`, only the `most` that score highest
// (ties: the first by name), and `note` added to the plot's caption to say so.
std::vector<std::string> Busiest(Plot& p, const std::map<std::string, double>& scores,
                                 size_t most, const std::string& note) {
  std::vector<std::string> keys;
  for (const auto& [key, score] : scores) {
    if (score > 0) keys.push_back(key);
  }
  if (keys.size() > most) {
    std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
      return scores.at(a) > scores.at(b);
    });
    p.caption += note;
    keys.resize(most);
    std::sort(keys.begin(), keys.end());
  }
  return keys;
}

// A panel of a multiplot: its title, y label (unset: the multiplot's own) and lines.
struct Panel {
  std::string title;
  std::optional<std::string> ylabel;
  std::vector<std::string> lines;
  /// gnuplot settings for this panel; they stay for the panels after it.
  std::string settings = "";
};

// A multiplot of `panels`, `columns` to a row, under `title`; `settings` hold for every panel.
// Only the bottom row labels the x axis (simulated time).
std::string Multiplot(const std::string& title, size_t columns, const std::string& settings,
                      const std::vector<Panel>& panels) {
  const size_t rows = (panels.size() + columns - 1) / columns;
  std::string s = absl::StrCat("set multiplot layout ", rows, ",", columns, " title ",
                               GpString(title), " font ',14'\n", settings);
  for (size_t i = 0; i < panels.size(); ++i) {
    const Panel& panel = panels[i];
    absl::StrAppend(&s, "set title ", GpString(panel.title), "\n");
    if (panel.ylabel) absl::StrAppend(&s, "set ylabel ", GpString(*panel.ylabel), "\n");
    s += panel.settings;
    absl::StrAppend(&s, "set xlabel ",
                    GpString(i / columns + 1 == rows ? "simulated time (hours)" : ""), "\n",
                    PlotCommand(panel.lines));
  }
  return s + "unset multiplot\n";
}

Plot UtilisationPlot(const SimResult& r) {
  Plot p{"utilisation", "Utilisation over time",
         "Share of the cluster's schedulable allocatable that bound pods request, per resource "
         "(one panel each), over simulated hours. Blue is berth, orange the baseline "
         "(kube-scheduler alone). Higher is better while work is waiting."};
  const auto worlds = Worlds(r);
  std::vector<std::string> resources;
  for (const char* res : {"cpu", "memory", kGpu}) {
    for (const PlottedWorld& w : worlds) {
      const auto* series = Series(w.m->utilisation, res);
      if (series != nullptr && !series->empty()) {
        resources.push_back(res);
        break;
      }
    }
  }
  if (resources.empty()) {
    p.skipped = "no utilisation samples";
    return p;
  }
  const std::vector<int> drawn =
      WorldBlocks(p, worlds, 100, absl::StrCat("hours ", absl::StrJoin(resources, " ")),
                  [&](const RunMetrics& m, Columns& cols) {
                    for (const auto& res : resources) cols.push_back(Series(m.utilisation, res));
                    return true;
                  });
  if (drawn.empty()) {
    p.skipped = "no samples";
    return p;
  }
  std::vector<Panel> panels;
  for (size_t i = 0; i < resources.size(); ++i) {
    panels.push_back({resources[i], resources[i] + " requested (%)",
                      WorldLines("utilisation.dat", worlds, drawn, static_cast<int>(i) + 2)});
  }
  p.height = 150 + 260 * static_cast<int>(panels.size());
  p.script = kCommon + KeyMargin(8) +
             Multiplot(absl::StrCat("Utilisation over time: ", Compared(worlds, drawn)), 1, "set yrange [0:105]\n",
                       panels);
  return p;
}

Plot QueueSharePlot(const SimResult& r) {
  Plot p{"queue-shares", "Queue shares against fair shares",
         "Each queue's share of the usage of all queues (solid) against its fair share (dashed, "
         "its weight over the weights of the queues that have pods), over simulated hours; one "
         "panel per world, one colour per queue. Where the solid line sits on its dashed line the "
         "queue gets what its weight promises. The baseline has no queues: its panel shows what "
         "kube-scheduler alone happens to give each queue's pods."};
  const auto worlds = Worlds(r);
  // Queues by peak share in either world, at most kMaxQueuesPlotted.
  const std::vector<std::string> queues = Busiest(
      p,
      Scores(worlds, {&RunMetrics::queue_share, &RunMetrics::queue_fair_share},
             [](double peak, double x) { return std::max(peak, x); }),
      kMaxQueuesPlotted,
      absl::StrFormat(" Only the %d queues with the highest peak share are drawn.",
                      kMaxQueuesPlotted));
  if (queues.empty()) {
    p.skipped = "no queue had usage";
    return p;
  }
  const std::vector<int> drawn = WorldBlocks(
      p, worlds, 100,
      absl::StrCat("hours, then share and fair share of ", absl::StrJoin(queues, " ")),
      [&](const RunMetrics& m, Columns& cols) {
        bool any = false;
        for (const auto& q : queues) {
          const auto* share = Series(m.queue_share, q);
          cols.push_back(share);
          cols.push_back(Series(m.queue_fair_share, q));
          any = any || (share != nullptr && AnyNonZero(*share));
        }
        return any;
      });
  if (drawn.empty()) {
    p.skipped = "no queue had usage";
    return p;
  }
  size_t longest = 0;
  for (const auto& q : queues) longest = std::max(longest, q.size() + 6);
  std::vector<Panel> panels;
  for (int w : drawn) {
    // Shares first, then the fair shares on top of them, so that a share that tracks its
    // fair share does not hide it.
    std::vector<std::string> lines;
    for (const bool fair : {false, true}) {
      for (size_t q = 0; q < queues.size(); ++q) {
        lines.push_back(Line("queue-shares.dat", w, static_cast<int>(2 + 2 * q + (fair ? 1 : 0)),
                             kSeriesColours[q % std::size(kSeriesColours)],
                             queues[q] + (fair ? " fair" : " share"), fair ? 2 : 1,
                             fair ? 2.5 : 1.5));
      }
    }
    panels.push_back({worlds[w].label, std::nullopt, std::move(lines)});
  }
  p.height = 150 + 330 * static_cast<int>(panels.size());
  p.script = kCommon + KeyMargin(longest) +
             Multiplot("Queue shares (solid) against fair shares (dashed)", 1,
                       "set yrange [0:105]\nset ylabel 'share of all queues'' usage (%)'\n",
                       panels);
  return p;
}

Plot WaitCdfPlot(const SimResult& r) {
  Plot p{"wait-cdf", "Wait from submission to start (CDF)",
         "For each wait on the x axis (log scale), the share of all submitted jobs that started "
         "within it; each curve runs on at its final level to the right edge. Further left and "
         "higher is better. A curve that ends below 100% has jobs that never started. Waits "
         "under one second are drawn at one second (the tick reads ≤1 s)."};
  const auto worlds = Worlds(r);
  std::vector<double> waits[2];
  double max_wait = 1;
  for (int w = 0; w < 2; ++w) {
    for (const auto& j : worlds[w].m->jobs) {
      if (j.start >= 0) waits[w].push_back(std::max(1.0, j.start - j.submit));
    }
    std::sort(waits[w].begin(), waits[w].end());
    if (!waits[w].empty()) max_wait = std::max(max_wait, waits[w].back());
  }
  const double x_max = std::max(10.0, max_wait * 1.5);
  std::vector<int> drawn;
  for (int w = 0; w < 2; ++w) {
    const std::vector<double>& v = waits[w];
    absl::StrAppend(&p.data, "# ", worlds[w].label, ": wait (s), jobs started within it (%)\n");
    const double total = static_cast<double>(worlds[w].m->jobs.size());
    const size_t step = v.size() <= kMaxPlotPoints ? 1 : v.size() / kMaxPlotPoints + 1;
    if (!v.empty()) {
      // From 0% left of the axis, up at each wait, and on at the final level to the right edge.
      absl::StrAppend(&p.data, "0.5 0\n");
      for (size_t i = 0; i < v.size(); ++i) {
        // The last of a run of equal waits carries the step; thin out the rest.
        const bool last_of_run = i + 1 == v.size() || v[i + 1] != v[i];
        if (!last_of_run) continue;
        if (i % step != 0 && i + 1 != v.size()) continue;
        absl::StrAppend(&p.data, Num(v[i]), " ", Num(static_cast<double>(i + 1) / total * 100),
                        "\n");
      }
      absl::StrAppend(&p.data, Num(x_max), " ",
                      Num(static_cast<double>(v.size()) / total * 100), "\n");
      drawn.push_back(w);
    }
    p.data += "\n\n";
  }
  if (drawn.empty()) {
    p.skipped = "no job started";
    return p;
  }
  p.script = kCommon + KeyMargin(8);
  absl::StrAppend(
      &p.script, "set title 'Wait from submission to start: ", Compared(worlds, drawn), "' font ',14'\n",
      "set logscale x\n", "set xrange [0.7:", Num(x_max), "]\n",
      "set xtics ('≤1 s' 1, '10 s' 10, '1 min' 60, '10 min' 600, '1 h' 3600, '10 h' 36000, "
      "'1 d' 86400, '1 w' 604800)\n",
      "set yrange [0:105]\n", "set xlabel 'wait from submission to start (log scale)'\n",
      "set ylabel 'jobs started within the wait (% of all jobs)'\n",
      PlotCommand(WorldLines("wait-cdf.dat", worlds, drawn, 2, "steps")));
  return p;
}

Plot GangPlot(const SimResult& r) {
  Plot p{"gangs", "Gang states over time",
         "How many gangs are waiting (no member bound, no room reserved), reserved (berth holds "
         "room, none bound), partial (some members bound, fewer than minMember) and running (at "
         "least minMember bound), over simulated hours; berth above, the baseline below. Partial "
         "gangs hold resources without doing work: the red line should stay near zero."};
  const auto worlds = Worlds(r);
  std::vector<double> counts[4];  // the world's gangs in each state, per sample
  const std::vector<int> drawn = WorldBlocks(
      p, worlds, 1, "hours waiting reserved partial running",
      [&](const RunMetrics& m, Columns& cols) {
        bool any = false;
        for (auto& c : counts) c.clear();
        for (const auto& g : m.gangs) {
          counts[0].push_back(g.waiting);
          counts[1].push_back(g.reserved);
          counts[2].push_back(g.partial);
          counts[3].push_back(g.running);
          any = any || g.waiting || g.reserved || g.partial || g.running;
        }
        cols = {&counts[0], &counts[1], &counts[2], &counts[3]};
        return any;
      });
  if (drawn.empty()) {
    p.skipped = "the workload has no gangs";
    return p;
  }
  const char* state_colours[] = {"#7f7f7f", "#9467bd", "#d62728", "#2ca02c"};
  const char* states[] = {"waiting", "reserved", "partial", "running"};
  std::vector<Panel> panels;
  for (int w : drawn) {
    std::vector<std::string> lines;
    for (int s = 0; s < 4; ++s) {
      lines.push_back(Line("gangs.dat", w, s + 2, state_colours[s], states[s]));
    }
    panels.push_back({worlds[w].label, std::nullopt, std::move(lines)});
  }
  p.height = 150 + 300 * static_cast<int>(panels.size());
  p.script = kCommon + KeyMargin(8) +
             Multiplot("Gang states over time", 1, "set yrange [0:*]\nset ylabel 'gangs'\n",
                       panels);
  return p;
}

Plot PoolPlot(const SimResult& r) {
  Plot p{"pools", "Pool capacity lent and borrowed",
         "One row per pool: on the left, usage units (cpu + 8 x gpu + 0.25 x GiB) that other "
         "pools' pods hold on the pool's nodes (lent); on the right, units that the pool's own "
         "pods hold on other pools' nodes (borrowed), over simulated hours. Blue is berth, "
         "orange the baseline; the baseline knows no pools, so its lines show where its pods "
         "happened to land."};
  const auto worlds = Worlds(r);
  // Pools by capacity lent and borrowed in either world, at most kMaxPoolsPlotted.
  const std::vector<std::string> pools = Busiest(
      p,
      Scores(worlds, {&RunMetrics::pool_lent, &RunMetrics::pool_borrowed},
             [](double activity, double x) { return activity + std::abs(x); }),
      kMaxPoolsPlotted,
      absl::StrFormat(" Only the %d pools that lent or borrowed most are drawn.",
                      kMaxPoolsPlotted));
  if (pools.empty()) {
    p.skipped = "no pool lent or borrowed capacity";
    return p;
  }
  const std::vector<int> drawn = WorldBlocks(
      p, worlds, 1, absl::StrCat("hours, then lent and borrowed of ", absl::StrJoin(pools, " ")),
      [&](const RunMetrics& m, Columns& cols) {
        for (const auto& pool : pools) {
          cols.push_back(Series(m.pool_lent, pool));
          cols.push_back(Series(m.pool_borrowed, pool));
        }
        return true;
      });
  if (drawn.empty()) {
    p.skipped = "no samples";
    return p;
  }
  // One row per pool, lent on the left and borrowed on the right; each panel has only berth
  // (blue) and the baseline (orange), the key above it.
  std::vector<Panel> panels;
  for (size_t i = 0; i < pools.size(); ++i) {
    for (int side = 0; side < 2; ++side) {
      panels.push_back({absl::StrCat("pool ", pools[i],
                                     side == 0 ? ": lent to other pools' pods"
                                               : ": its pods on other pools' nodes (borrowed)"),
                        side == 0 ? "usage units" : "",
                        WorldLines("pools.dat", worlds, drawn,
                                   static_cast<int>(2 + 2 * i) + side)});
    }
  }
  p.height = 150 + 270 * static_cast<int>(pools.size());
  p.script = kCommon + Multiplot("Pool capacity lent and borrowed", 2,
                                 "set key outside top center horizontal noreverse Right nobox\n"
                                 "set yrange [0:*]\nset lmargin 10\nset rmargin 3\n",
                                 panels);
  return p;
}

Plot PendingPlot(const SimResult& r) {
  Plot p{"pending", "Pending pods over time",
         "Pods submitted and not running, over simulated hours. Blue is berth, orange the "
         "baseline. Lower is better; a line that does not come back to zero at the end has work "
         "that never started."};
  const auto worlds = Worlds(r);
  std::vector<double> pending;
  const std::vector<int> drawn =
      WorldBlocks(p, worlds, 1, "hours pending_pods", [&](const RunMetrics& m, Columns& cols) {
        pending = ToDoubles(m.pending_pods);
        cols = {&pending};
        return !pending.empty();
      });
  if (drawn.empty()) {
    p.skipped = "no pending-pod samples";
    return p;
  }
  p.script = kCommon + KeyMargin(8);
  absl::StrAppend(&p.script, "set title 'Pending pods: ", Compared(worlds, drawn), "' font ',14'\n",
                  "set yrange [0:*]\nset xlabel 'simulated time (hours)'\nset ylabel 'pods'\n",
                  PlotCommand(WorldLines("pending.dat", worlds, drawn, 2)));
  return p;
}

Plot FragmentationPlot(const SimResult& r) {
  Plot p{"fragmentation", "Fragmentation over time",
         "Above: the share of the free GPUs (CPU, for a workload without GPUs) that pods of the "
         "workload's most common request cannot use, 0 to 1 (docs/decisions.md, "
         "Fragmentation). Below: how many such pods fit at once, the largest gang of them. "
         "Blue is berth, orange the baseline. Lower above and higher below are better while "
         "work waits."};
  const auto worlds = Worlds(r);
  std::vector<double> frag, fits;
  const std::vector<int> drawn = WorldBlocks(
      p, worlds, 1, "hours fragmentation_index pods_that_fit", [&](const RunMetrics& m, Columns& cols) {
        frag = m.fragmentation_index;
        fits.assign(m.pods_that_fit.begin(), m.pods_that_fit.end());
        cols = {&frag, &fits};
        return !frag.empty() && frag.size() == m.times.size();
      });
  if (drawn.empty()) {
    p.skipped = "no fragmentation samples";
    return p;
  }
  p.height = 620;
  p.script = kCommon + Multiplot(absl::StrCat("Fragmentation: ", Compared(worlds, drawn)), 1,
                                 "set key outside top center horizontal noreverse Right nobox\n"
                                 "set lmargin 10\nset rmargin 3\n",
                                 {{"fragmentation index", "index", WorldLines("fragmentation.dat", worlds, drawn, 2),
                                   // The index is in [0, 1]: a constant 0 must not be drawn on -1 to 1.
                                   "set yrange [0:1]\n"},
                                  {"pods of the most common request that fit now", "pods",
                                   WorldLines("fragmentation.dat", worlds, drawn, 3), "set yrange [0:*]\n"}});
  return p;
}

std::vector<Plot> Plots(const SimResult& r) {
  return {UtilisationPlot(r), QueueSharePlot(r), WaitCdfPlot(r),
          GangPlot(r),        PoolPlot(r),       PendingPlot(r), FragmentationPlot(r)};
}

std::optional<std::string> FindGnuplot() {
  const char* path = std::getenv("PATH");
  for (const auto dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/gnuplot");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

absl::Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

std::string ReadTail(const std::filesystem::path& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > max) s = "..." + s.substr(s.size() - max);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs gnuplot in `dir` with a setup command and a script; its output goes to gnuplot.log.
absl::Status RunGnuplot(const std::string& gnuplot, const std::filesystem::path& dir,
                        const std::string& setup, const std::string& script) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string dir_s = dir.string();
  posix_spawn_file_actions_addchdir_np(&actions, dir_s.c_str());
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "gnuplot.log", O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> args = {gnuplot, "-e", setup, script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot run ", gnuplot, ": ", std::strerror(rc)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed for gnuplot");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat("gnuplot failed on ", script, " (", dir_s, "/gnuplot.log): ",
                     ReadTail(dir / "gnuplot.log", 600)));
  }
  return absl::OkStatus();
}

std::string Html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string HtmlTable(const std::vector<std::string>& headers,
                      const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table>\n<tr>";
  for (const auto& h : headers) absl::StrAppend(&out, "<th>", Html(h), "</th>");
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "<td>" : "<td class=n>", Html(row[i]), "</td>");
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

struct WaitTables {
  std::vector<std::string> queue_headers, class_headers;
  std::vector<std::vector<std::string>> queue_rows, class_rows;
};

WaitTables MakeWaitTables(const SimResult& r) {
  WaitTables t;
  t.queue_headers = {"queue",        "jobs",          "berth p50",  "berth p99",
                     "baseline p50", "baseline p99",  "ratio p99"};
  t.class_headers = {"priority class", "jobs", "berth p99", "baseline p99", "ratio p99"};
  for (int by_queue = 1; by_queue >= 0; --by_queue) {
    auto b = WaitsBy(r.berth, by_queue == 1);
    auto k = WaitsBy(r.baseline, by_queue == 1);
    std::set<std::string> keys;
    for (const auto& [key, w] : b) keys.insert(key);
    for (const auto& [key, w] : k) keys.insert(key);
    for (const auto& key : keys) {
      const WaitStats wb = b.count(key) ? b[key] : WaitStats{};
      const WaitStats wk = k.count(key) ? k[key] : WaitStats{};
      const std::string jobs = absl::StrCat(std::max(wb.count + wb.never_started,
                                                     wk.count + wk.never_started));
      if (by_queue == 1) {
        t.queue_rows.push_back({key, jobs, HumanDuration(wb.p50), HumanDuration(wb.p99),
                                HumanDuration(wk.p50), HumanDuration(wk.p99),
                                RatioText(wb.p99, wk.p99)});
      } else {
        t.class_rows.push_back({ClassLabel(key), jobs, HumanDuration(wb.p99),
                                HumanDuration(wk.p99), RatioText(wb.p99, wk.p99)});
      }
    }
  }
  return t;
}

std::string IndexHtml(const SimResult& r, const std::vector<Plot>& plots,
                      const std::string& plot_problem) {
  const Summary b = Summarize(r.berth, r.info);
  const Summary k = Summarize(r.baseline, r.info);
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>berth simulate: " +
      Html(r.info.workload_name.empty() ? r.info.workload_file : r.info.workload_name) +
      "</title>\n<style>\n"
      "body{font-family:sans-serif;max-width:1060px;margin:2em auto;padding:0 1em;color:#222}\n"
      "table{border-collapse:collapse;margin:1em 0}\n"
      "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\n"
      "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
      "th{background:#f0f0f0}\nimg{max-width:100%;border:1px solid #ddd}\n"
      "pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap}\n"
      ".berth{color:#1f77b4;font-weight:bold}.baseline{color:#ff7f0e;font-weight:bold}\n"
      ".bad{color:#b00;font-weight:bold}\n"
      "</style>\n</head>\n<body>\n";
  absl::StrAppend(
      &h, "<h1>berth simulate: ",
      Html(r.info.workload_name.empty() ? r.info.workload_file : r.info.workload_name), "</h1>\n",
      "<p><span class=berth>berth</span> is kube-scheduler with berth as its extender; the "
      "<span class=baseline>baseline</span> is kube-scheduler alone on the same workload. "
      "Ratios are berth / baseline. The figures are defined in docs/simulate-report.md; all "
      "numbers are in <a href=\"report.json\">report.json</a> (plain text: "
      "<a href=\"summary.txt\">summary.txt</a>).</p>\n");
  absl::StrAppend(&h, "<table>\n");
  auto info_row = [&](const std::string& k2, const std::string& v) {
    absl::StrAppend(&h, "<tr><th>", Html(k2), "</th><td>", Html(v), "</td></tr>\n");
  };
  info_row("cluster", r.info.cluster_file);
  info_row("workload", r.info.workload_file);
  info_row("config", r.info.config_file.empty() ? "berth's defaults" : r.info.config_file);
  info_row("seed", absl::StrCat(r.info.seed));
  info_row("nodes / jobs / pods",
           absl::StrCat(r.info.nodes, " / ", r.info.jobs, " / ", r.info.pods));
  info_row("simulated", HumanDuration(r.info.simulated_seconds));
  info_row("wall", absl::StrFormat("%.2f s", r.info.wall_seconds));
  if (!r.info.berth_version.empty()) info_row("berth version", r.info.berth_version);
  absl::StrAppend(&h, "</table>\n<h2>Summary</h2>\n");
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : SummaryRows(b, k)) {
    rows.push_back({row.label, row.berth_text, row.baseline_text,
                    RatioText(row.berth, row.baseline)});
  }
  h += HtmlTable({"figure", "berth", "baseline", "ratio"}, rows);
  const WaitTables wt = MakeWaitTables(r);
  absl::StrAppend(&h, "<h3>Wait by queue</h3>\n", HtmlTable(wt.queue_headers, wt.queue_rows),
                  "<h3>Wait by priority class</h3>\n",
                  HtmlTable(wt.class_headers, wt.class_rows));
  if (std::vector<std::vector<std::string>> fair = FairShareRows(r); fair.size() > 1) {
    const std::vector<std::string> headers = fair.front();
    fair.erase(fair.begin());
    absl::StrAppend(&h, "<h3>Time to fair share (at least 90% of the share due)</h3>\n",
                    HtmlTable(headers, fair));
  }

  absl::StrAppend(&h, "<h2>Plots</h2>\n");
  if (!plot_problem.empty()) {
    absl::StrAppend(&h, "<p class=bad>Plots not drawn: ", Html(plot_problem), "</p>\n");
  }
  for (const auto& p : plots) {
    absl::StrAppend(&h, "<h3>", Html(p.title), "</h3>\n");
    if (!p.skipped.empty()) {
      absl::StrAppend(&h, "<p><em>Not drawn: ", Html(p.skipped), ".</em></p>\n");
      continue;
    }
    absl::StrAppend(&h, "<figure>\n<img src=\"", p.name, ".svg\" alt=\"", Html(p.title),
                    "\">\n<figcaption>", Html(p.caption), " (<a href=\"", p.name,
                    ".png\">PNG</a>, <a href=\"", p.name, ".dat\">data</a>)</figcaption>\n",
                    "</figure>\n");
  }

  absl::StrAppend(&h, "<h2>Evictions</h2>\n");
  for (const PlottedWorld& w : Worlds(r)) {
    std::vector<std::vector<std::string>> er;
    for (const auto& e : w.m->evictions) {
      er.push_back({e.cause, absl::StrCat(e.pods), absl::StrFormat("%.1f", e.gpu_hours_lost),
                    absl::StrFormat("%.1f", e.cpu_hours_lost)});
    }
    absl::StrAppend(&h, "<h3>", w.label, "</h3>\n");
    if (er.empty()) {
      h += "<p>No pod was evicted or preempted.</p>\n";
    } else {
      h += HtmlTable({"cause", "pods", "GPU-hours lost", "CPU-hours lost"}, er);
    }
  }

  absl::StrAppend(&h, "<h2>Invariants</h2>\n");
  for (const PlottedWorld& w : Worlds(r)) {
    absl::StrAppend(&h, "<h3>", w.label, "</h3>\n");
    if (w.m->invariants.empty()) {
      h += "<p>No invariant was checked.</p>\n";
      continue;
    }
    h += "<table>\n<tr><th>invariant</th><th>rule</th><th>violations</th></tr>\n";
    for (const auto& inv : w.m->invariants) {
      absl::StrAppend(&h, "<tr><td>", Html(inv.name), "</td><td>", Html(inv.description),
                      "</td><td class=\"n", inv.violations > 0 ? " bad" : "", "\">",
                      inv.violations, "</td></tr>\n");
    }
    h += "</table>\n";
    for (const auto& inv : w.m->invariants) {
      if (inv.violations == 0) continue;
      absl::StrAppend(&h, "<p>First <b>", Html(inv.name), "</b> violation, at ",
                      HumanDuration(inv.first_time), ":</p>\n<pre>", Html(inv.first_example),
                      "</pre>\n");
    }
  }

  absl::StrAppend(&h, "<h2>Partial gangs stuck</h2>\n");
  for (const PlottedWorld& w : Worlds(r)) {
    absl::StrAppend(&h, "<p>", w.label, ": ", w.m->partial_gangs_stuck, "</p>\n");
    if (!w.m->partial_gang_examples.empty()) {
      absl::StrAppend(&h, "<pre>", Html(absl::StrJoin(w.m->partial_gang_examples, "\n")),
                      "</pre>\n");
    }
  }

  absl::StrAppend(&h, "<h2>Cost</h2>\n");
  std::vector<std::vector<std::string>> cost;
  for (const PlottedWorld& w : Worlds(r)) {
    std::vector<std::string> verbs;
    for (const auto& [verb, calls] : w.m->verb_calls) {
      auto it = w.m->verb_seconds.find(verb);
      const double secs = it == w.m->verb_seconds.end() ? 0 : it->second;
      verbs.push_back(absl::StrFormat("%s %d (%.1f us/call)", verb, calls,
                                      calls > 0 ? secs * 1e6 / static_cast<double>(calls) : 0));
    }
    cost.push_back({w.label, absl::StrCat(w.m->scheduling_attempts),
                    absl::StrFormat("%.2f", w.m->wall_seconds),
                    w.m->wall_seconds > 0
                        ? absl::StrFormat("%.0fx", r.info.simulated_seconds / w.m->wall_seconds)
                        : "-",
                    verbs.empty() ? "-" : absl::StrJoin(verbs, ", ")});
  }
  h += HtmlTable({"world", "scheduling attempts", "wall seconds", "simulated / wall", "verb calls"},
                 cost);
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::vector<double> FairShares(const std::vector<double>& weights, const std::vector<double>& demands,
                               double pie) {
  const size_t n = std::min(weights.size(), demands.size());
  std::vector<double> due(weights.size(), 0.0);
  if (pie <= 0) return due;
  std::vector<bool> open(n, false);
  double open_weight = 0;
  for (size_t q = 0; q < n; ++q) {
    if (weights[q] > 0 && demands[q] > 0) {
      open[q] = true;
      open_weight += weights[q];
    }
  }
  // Raise a common level (share per unit of weight) until the pie is used up; a queue whose
  // demand is below its part at that level takes its demand and leaves the rest to the others.
  double left = pie;
  for (bool capped = true; capped && open_weight > 0;) {
    capped = false;
    const double level = left / open_weight;
    for (size_t q = 0; q < n; ++q) {
      if (!open[q] || demands[q] > level * weights[q]) continue;
      due[q] = demands[q];
      left -= demands[q];
      open_weight -= weights[q];
      open[q] = false;
      capped = true;
    }
  }
  if (open_weight > 0) {
    for (size_t q = 0; q < n; ++q) {
      if (open[q]) due[q] = left * weights[q] / open_weight;
    }
  }
  for (double& d : due) d /= pie;
  return due;
}

std::string HumanDuration(double s) {
  if (!std::isfinite(s)) return "-";
  if (s < 0) return "-" + HumanDuration(-s);
  if (s == 0) return "0s";
  if (s < 10) return absl::StrFormat("%.1fs", s);
  const int64_t t = static_cast<int64_t>(std::llround(s));
  if (t < 60) return absl::StrFormat("%ds", t);
  if (t < 3600) return absl::StrFormat("%dm %02ds", t / 60, t % 60);
  if (t < 86400) return absl::StrFormat("%dh %02dm", t / 3600, (t % 3600) / 60);
  return absl::StrFormat("%dd %dh", t / 86400, (t % 86400) / 3600);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  // A small tolerance so that 0.99 * 100 counts as 99, not 99.00000000000001.
  size_t rank = static_cast<size_t>(std::ceil(p / 100 * n - 1e-9));
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

std::map<std::string, WaitStats> WaitsBy(const RunMetrics& m, bool by_queue) {
  std::map<std::string, std::vector<double>> waits;
  std::map<std::string, WaitStats> out;
  for (const auto& j : m.jobs) {
    const std::string& key = by_queue ? j.queue : j.priority_class;
    WaitStats& w = out[key];
    if (j.start >= 0) {
      waits[key].push_back(j.start - j.submit);
      ++w.count;
    } else {
      ++w.never_started;
    }
  }
  for (auto& [key, v] : waits) {
    out[key].p50 = Percentile(v, 50);
    out[key].p90 = Percentile(v, 90);
    out[key].p99 = Percentile(v, 99);
  }
  return out;
}

Summary Summarize(const RunMetrics& m, const SimInfo& info) {
  Summary s;
  auto util = [&](const std::map<std::string, std::vector<double>>& series, const char* res) {
    auto it = series.find(res);
    return it == series.end() ? 0.0 : TimeAverage(m.times, it->second, m.makespan);
  };
  s.utilisation_cpu = util(m.utilisation, "cpu");
  s.utilisation_memory = util(m.utilisation, "memory");
  s.utilisation_gpu = util(m.utilisation, kGpu);
  s.useful_utilisation_gpu = util(m.useful_utilisation, kGpu);
  s.fairness_error = FairnessError(m);
  s.fragmentation = m.fragmentation_index.size() == m.times.size()
                        ? TimeAverage(m.times, m.fragmentation_index, m.makespan)
                        : 0;

  const double end = EndOfRun(m, info);
  std::vector<double> waits;
  double pods_done = 0;
  for (const auto& j : m.jobs) {
    double wait = 0;
    if (j.start >= 0) {
      wait = j.start - j.submit;
      waits.push_back(wait);
    } else {
      wait = std::max(0.0, end - j.submit);
      ++s.jobs_never_started;
    }
    if (j.end >= 0) pods_done += j.pods;
    if (wait > s.longest_wait) {
      s.longest_wait = wait;
      s.longest_wait_job = j.name;
    }
  }
  s.wait_p50 = Percentile(waits, 50);
  s.wait_p90 = Percentile(waits, 90);
  s.wait_p99 = Percentile(waits, 99);

  s.makespan = m.makespan;
  s.jobs_completed = m.jobs_completed;
  if (m.makespan > 0) {
    s.pods_per_second = pods_done / m.makespan;
    s.jobs_per_second = static_cast<double>(m.jobs_completed) / m.makespan;
  }
  s.partial_gangs_stuck = m.partial_gangs_stuck;
  for (const auto& e : m.evictions) {
    s.evicted_pods += e.pods;
    s.gpu_hours_lost += e.gpu_hours_lost;
    s.cpu_hours_lost += e.cpu_hours_lost;
  }
  for (const auto& i : m.invariants) s.invariant_violations += i.violations;
  if (m.makespan > 0) s.goodput_gpu = m.gpu_hours_completed / (m.makespan / 3600.0);
  // While work waits: the samples with pods waiting and a GPU demand of at least the cluster.
  auto gpu_series = [&](const std::map<std::string, std::vector<double>>& series) {
    auto it = series.find(kGpu);
    return it == series.end() ? nullptr : &it->second;
  };
  const std::vector<double>* util_gpu = gpu_series(m.utilisation);
  const std::vector<double>* useful_gpu = gpu_series(m.useful_utilisation);
  double waiting = 0, total = 0, busy = 0, useful = 0, held = 0;
  // Each sample holds until the next one, the last until the makespan (TimeAverage's weights).
  for (size_t i = 0; i < m.times.size() && m.times[i] < m.makespan; ++i) {
    const double next = i + 1 < m.times.size() ? std::min(m.times[i + 1], m.makespan) : m.makespan;
    const double w = std::max(0.0, next - m.times[i]);
    total += w;
    const bool waits = i < m.pending_pods.size() && m.pending_pods[i] > 0 && i < m.gpu_demand.size() &&
                       m.gpu_demand[i] >= 1.0;
    if (!waits) continue;
    waiting += w;
    if (util_gpu != nullptr && i < util_gpu->size()) busy += w * (*util_gpu)[i];
    if (useful_gpu != nullptr && i < useful_gpu->size()) useful += w * (*useful_gpu)[i];
    if (i < m.held_gpus.size()) held += w * m.held_gpus[i];
  }
  if (total > 0) s.waiting_share = waiting / total;
  if (waiting > 0) {
    s.utilisation_gpu_waiting = busy / waiting;
    s.useful_utilisation_gpu_waiting = useful / waiting;
    s.held_gpu_waiting = held / waiting;
  }
  return s;
}

std::map<std::string, FairShareReach> FairShareReaches(const RunMetrics& m, double end) {
  std::map<std::string, FairShareReach> out;
  for (const auto& [q, fair] : m.queue_fair_share) {
    auto it = m.queue_share.find(q);
    if (it == m.queue_share.end()) continue;
    const std::vector<double>& share = it->second;
    const size_t n = std::min({fair.size(), share.size(), m.times.size()});
    FairShareReach r;
    double demand_since = -1, below_since = -1, episodes_total = 0;
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      const double t = m.times[i];
      if (fair[i] <= 0) {  // no demand: nothing is due, any episode ends
        below_since = -1;
        continue;
      }
      any = true;
      if (demand_since < 0) demand_since = t;
      const bool reached = share[i] >= 0.9 * fair[i];
      if (reached) {
        if (r.first < 0) r.first = t - demand_since;
        if (below_since >= 0) {
          r.longest = std::max(r.longest, t - below_since);
          episodes_total += t - below_since;
          ++r.episodes;
          below_since = -1;
        }
      } else if (below_since < 0) {
        below_since = t;
      }
    }
    if (!any) continue;
    if (below_since >= 0) {
      const double last = std::max(end, n > 0 ? m.times[n - 1] : 0.0);
      r.longest = std::max(r.longest, last - below_since);
      episodes_total += last - below_since;
      ++r.episodes;
    }
    if (r.episodes > 0) r.mean = episodes_total / static_cast<double>(r.episodes);
    out[q] = r;
  }
  return out;
}

std::string SummaryTable(const SimResult& r) {
  const Summary b = Summarize(r.berth, r.info);
  const Summary k = Summarize(r.baseline, r.info);
  TextTable t({"figure", "berth", "baseline", "ratio"});
  for (const auto& row : SummaryRows(b, k)) {
    t.AddRow({row.label, row.berth_text, row.baseline_text, RatioText(row.berth, row.baseline)});
  }
  std::string out = t.Render();
  const WaitTables wt = MakeWaitTables(r);
  TextTable q(wt.queue_headers);
  for (const auto& row : wt.queue_rows) q.AddRow(row);
  TextTable c(wt.class_headers);
  for (const auto& row : wt.class_rows) c.AddRow(row);
  absl::StrAppend(&out, "\nwait by queue\n", q.Render(), "\nwait by priority class\n",
                  c.Render());
  absl::StrAppend(&out, "\nwork thrown away by evictions\n", EvictionsText(r));
  absl::StrAppend(&out, "\ntime to fair share (at least 90% of the share due)\n", FairShareText(r));
  absl::StrAppend(&out, EtaStudyText(r.eta));
  return out;
}

std::string EvictionsText(const SimResult& r) {
  TextTable t({"cause", "berth pods", "berth GPU-h", "berth CPU-h", "baseline pods",
               "baseline GPU-h", "baseline CPU-h"});
  std::map<std::string, std::pair<const EvictionCount*, const EvictionCount*>> causes;
  for (const auto& e : r.berth.evictions) causes[e.cause].first = &e;
  for (const auto& e : r.baseline.evictions) causes[e.cause].second = &e;
  auto cells = [](const EvictionCount* e, std::vector<std::string>& row) {
    row.push_back(e != nullptr ? absl::StrCat(e->pods) : "0");
    row.push_back(absl::StrFormat("%.1f", e != nullptr ? e->gpu_hours_lost : 0.0));
    row.push_back(absl::StrFormat("%.1f", e != nullptr ? e->cpu_hours_lost : 0.0));
  };
  for (const auto& [cause, pair] : causes) {
    std::vector<std::string> row = {cause};
    cells(pair.first, row);
    cells(pair.second, row);
    t.AddRow(row);
  }
  return causes.empty() ? std::string("none\n") : t.Render();
}

// The time-to-fair-share table of both worlds: headers, then one row per queue.
std::vector<std::vector<std::string>> FairShareRows(const SimResult& r) {
  const auto b = FairShareReaches(r.berth, EndOfRun(r.berth, r.info));
  const auto k = FairShareReaches(r.baseline, EndOfRun(r.baseline, r.info));
  std::vector<std::vector<std::string>> rows = {
      {"queue", "berth first", "berth longest below", "berth mean below", "baseline first",
       "baseline longest below", "baseline mean below", "ratio longest"}};
  std::set<std::string> queues;
  for (const auto& [q, v] : b) queues.insert(q);
  for (const auto& [q, v] : k) queues.insert(q);
  auto first = [](const FairShareReach* x) {
    return x == nullptr ? std::string("-") : x->first < 0 ? std::string("never") : HumanDuration(x->first);
  };
  auto dur = [](const FairShareReach* x, double FairShareReach::*f) {
    return x == nullptr ? std::string("-") : HumanDuration(x->*f);
  };
  for (const std::string& q : queues) {
    const FairShareReach* x = b.contains(q) ? &b.at(q) : nullptr;
    const FairShareReach* y = k.contains(q) ? &k.at(q) : nullptr;
    rows.push_back({q, first(x), dur(x, &FairShareReach::longest), dur(x, &FairShareReach::mean), first(y),
                    dur(y, &FairShareReach::longest), dur(y, &FairShareReach::mean),
                    x != nullptr && y != nullptr ? RatioText(x->longest, y->longest) : "-"});
  }
  return rows;
}

std::string FairShareText(const SimResult& r) {
  const std::vector<std::vector<std::string>> rows = FairShareRows(r);
  if (rows.size() == 1) return "no queue had demand\n";
  TextTable t(rows[0]);
  for (size_t i = 1; i < rows.size(); ++i) t.AddRow(rows[i]);
  return t.Render();
}

std::string EtaStudyText(const EtaStudy& e) {
  if (!e.enabled) return "";
  auto minutes = [](double s) { return absl::StrFormat("%.1f min", s / 60); };
  TextTable t({"ETA accuracy", "every prediction", "first prediction"});
  t.AddRow({"median |error|", minutes(e.median_error), minutes(e.first_median_error)});
  t.AddRow({"p90 |error|", minutes(e.p90_error), minutes(e.first_p90_error)});
  t.AddRow({"median predicted - actual", minutes(e.median_signed_error), "-"});
  t.AddRow({"median / mean wait", absl::StrFormat("%.3f", e.mean_wait > 0 ? e.median_error / e.mean_wait : 0),
            absl::StrFormat("%.3f", e.mean_wait > 0 ? e.first_median_error / e.mean_wait : 0)});
  TextTable lead({"lead (prediction to start)", "predictions", "median |error|", "median predicted - actual"});
  double from = 0;
  for (const EtaStudy::Lead& l : e.by_lead) {
    auto bound = [](double s) { return s >= 3600 ? absl::StrFormat("%g h", s / 3600) : absl::StrFormat("%g min", s / 60); };
    lead.AddRow({std::isinf(l.below_seconds) ? absl::StrCat(bound(from), " or more")
                                              : absl::StrCat(from == 0 ? "0" : bound(from), " to ", bound(l.below_seconds)),
                 absl::StrCat(l.predictions), l.predictions > 0 ? minutes(l.median_error) : "-",
                 l.predictions > 0 ? minutes(l.median_signed_error) : "-"});
    from = l.below_seconds;
  }
  return absl::StrFormat(
      "\nETA accuracy (durations %s; %sa pass at most every %gs when the model changed)\n%s"
      "jobs predicted %d, mean wait %s; predictions compared %d, without a start %d, for jobs "
      "that never started %d\npasses %d, %.3fs of wall time each on average, %.3fs at most\n"
      "\nETA error by lead (%s)\n%s",
      e.noise > 0 ? absl::StrFormat("known to +-%.0f%%", 100 * e.noise) : std::string("known exactly"),
      e.knows_arrivals ? "every later arrival told to each pass; " : "", e.every_seconds, t.Render(),
      e.jobs, minutes(e.mean_wait), e.predictions, e.no_start, e.never_started, e.passes,
      e.passes > 0 ? e.pass_wall_seconds / static_cast<double>(e.passes) : 0, e.pass_wall_seconds_max,
      e.knows_arrivals ? "each pass told every later arrival" : "the forecast assumes no new work arrives",
      lead.Render());
}

std::string ReportJson(const SimResult& r) {
  const Summary b = Summarize(r.berth, r.info);
  const Summary k = Summarize(r.baseline, r.info);
  json j;
  j["schemaVersion"] = r.info.schema_version;
  j["info"] = {{"clusterFile", r.info.cluster_file},
               {"workloadFile", r.info.workload_file},
               {"workloadName", r.info.workload_name},
               {"configFile", r.info.config_file},
               {"seed", r.info.seed},
               {"nodes", r.info.nodes},
               {"jobs", r.info.jobs},
               {"pods", r.info.pods},
               {"sampleSeconds", r.info.sample_seconds},
               {"simulatedSeconds", r.info.simulated_seconds},
               {"wallSeconds", r.info.wall_seconds},
               {"berthVersion", r.info.berth_version},
               {"queueWeights", r.info.queue_weights}};
  j["summary"] = {{"berth", SummaryJson(b)}, {"baseline", SummaryJson(k)},
                  {"ratio", RatioJson(b, k)}};
  auto waits = [](const RunMetrics& m) {
    return json{{"byQueue", WaitsJson(WaitsBy(m, true))},
                {"byPriorityClass", WaitsJson(WaitsBy(m, false))}};
  };
  j["waits"] = {{"berth", waits(r.berth)}, {"baseline", waits(r.baseline)}};
  j["series"] = {{"berth", SeriesJson(r.berth)}, {"baseline", SeriesJson(r.baseline)}};
  j["evictions"] = {{"berth", EvictionsJson(r.berth)}, {"baseline", EvictionsJson(r.baseline)}};
  auto reach = [](const std::map<std::string, FairShareReach>& in) {
    json o = json::object();
    for (const auto& [q, x] : in) {
      o[q] = {{"firstSeconds", x.first < 0 ? json(nullptr) : json(x.first)},
              {"longestBelowSeconds", x.longest},
              {"meanBelowSeconds", x.mean},
              {"episodesBelow", x.episodes}};
    }
    return o;
  };
  j["fairShareReach"] = {{"berth", reach(FairShareReaches(r.berth, EndOfRun(r.berth, r.info)))},
                         {"baseline", reach(FairShareReaches(r.baseline, EndOfRun(r.baseline, r.info)))}};
  j["invariants"] = {{"berth", InvariantsJson(r.berth)},
                     {"baseline", InvariantsJson(r.baseline)}};
  j["partialGangs"] = {
      {"berth", {{"stuck", r.berth.partial_gangs_stuck},
                 {"examples", r.berth.partial_gang_examples}}},
      {"baseline", {{"stuck", r.baseline.partial_gangs_stuck},
                    {"examples", r.baseline.partial_gang_examples}}}};
  j["cost"] = {{"berth", CostJson(r.berth, r.info)}, {"baseline", CostJson(r.baseline, r.info)}};
  if (r.eta.enabled) {
    const EtaStudy& e = r.eta;
    j["eta"] = {{"everySeconds", e.every_seconds},     {"noise", e.noise},
                {"knowsArrivals", e.knows_arrivals},
                {"passes", e.passes},                  {"passWallSeconds", e.pass_wall_seconds},
                {"passWallSecondsMax", e.pass_wall_seconds_max},
                {"predictions", e.predictions},        {"noStart", e.no_start},
                {"neverStarted", e.never_started},     {"jobs", e.jobs},
                {"meanWaitSeconds", e.mean_wait},      {"medianErrorSeconds", e.median_error},
                {"p90ErrorSeconds", e.p90_error},      {"firstMedianErrorSeconds", e.first_median_error},
                {"firstP90ErrorSeconds", e.first_p90_error},
                {"medianSignedErrorSeconds", e.median_signed_error}};
    json leads = json::array();
    for (const EtaStudy::Lead& l : e.by_lead) {
      leads.push_back({{"belowSeconds", std::isinf(l.below_seconds) ? json(nullptr) : json(l.below_seconds)},
                       {"predictions", l.predictions},
                       {"medianErrorSeconds", l.median_error},
                       {"medianSignedErrorSeconds", l.median_signed_error}});
    }
    j["eta"]["byLead"] = std::move(leads);
  }
  j["jobs"] = {{"columns", {"name", "queue", "priorityClass", "pods", "gang", "submit", "start",
                            "end", "restarts"}},
               {"berth", JobsJson(r.berth)},
               {"baseline", JobsJson(r.baseline)}};
  return j.dump() + "\n";
}

absl::Status PrepareReportDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  const fs::path probe = fs::path(dir) / ".berth-write-check";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write in ", dir, ": ", std::strerror(errno)));
  ::close(fd);
  fs::remove(probe, ec);
  return absl::OkStatus();
}

absl::Status WriteReport(const SimResult& r, const std::string& dir) {
  namespace fs = std::filesystem;
  if (absl::Status s = PrepareReportDir(dir); !s.ok()) return s;
  std::error_code ec;
  const fs::path d(dir);
  if (auto s = WriteFile(d / "report.json", ReportJson(r)); !s.ok()) return s;
  if (auto s = WriteFile(d / "summary.txt", SummaryTable(r)); !s.ok()) return s;

  std::vector<Plot> plots = Plots(r);
  absl::Status plot_status = absl::OkStatus();
  std::string plot_problem;
  const auto gnuplot = FindGnuplot();
  if (!gnuplot) {
    plot_problem = "gnuplot not found: install gnuplot-nox";
    plot_status = absl::FailedPreconditionError(
        "gnuplot not found: install gnuplot-nox; report.json and index.html were written");
  } else {
    fs::remove(d / "gnuplot.log", ec);
    for (auto& p : plots) {
      if (!p.skipped.empty()) continue;
      if (auto s = WriteFile(d / (p.name + ".dat"), p.data); !s.ok()) return s;
      if (auto s = WriteFile(d / (p.name + ".gp"), p.script); !s.ok()) return s;
      const std::string terms[2] = {
          absl::StrFormat("set terminal svg size %d,%d dynamic noenhanced font 'Sans,12' "
                          "background '#ffffff'; set output '%s.svg'",
                          p.width, p.height, p.name),
          absl::StrFormat("set terminal pngcairo size %d,%d noenhanced font 'Sans,10' "
                          "background '#ffffff'; set output '%s.png'",
                          p.width, p.height, p.name)};
      for (const auto& term : terms) {
        if (auto s = RunGnuplot(*gnuplot, d, term, p.name + ".gp"); !s.ok()) {
          if (plot_status.ok()) plot_status = s;
          plot_problem = std::string(s.message());
        }
      }
    }
  }
  if (auto s = WriteFile(d / "index.html", IndexHtml(r, plots, plot_problem)); !s.ok()) return s;
  return plot_status;
}

}  // namespace berth::extender::sim
