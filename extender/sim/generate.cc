#include "extender/sim/generate.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "core/strings.h"
#include "nlohmann/json.hpp"

namespace berth::extender::sim {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxJobs = 1'000'000;
constexpr int kMaxNodes = 100'000;
constexpr double kPi = 3.14159265358979323846;

// Random numbers whose sequence is the same with every standard library: std::mt19937_64's
// output is fixed by the standard, but std::*_distribution algorithms are not, so the
// distributions below are written out (inverse CDF where one exists in closed form).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  /// Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [lo, hi].
  int Between(int lo, int hi) {
    return lo + static_cast<int>(Uniform() * static_cast<double>(hi - lo + 1));
  }
  bool Chance(double p) { return Uniform() < p; }
  /// Standard normal, by Box-Muller (the normal has no closed-form inverse CDF).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]: log is finite
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
  }
  /// Log-normal with the given median and shape sigma, clamped to [lo, hi] seconds.
  double LogNormal(double median, double sigma, double lo, double hi) {
    return std::clamp(median * std::exp(sigma * Normal()), lo, hi);
  }
  /// One of the values, chosen with probability proportional to its weight.
  template <typename T>
  T Pick(std::initializer_list<std::pair<T, double>> weights) {
    double total = 0;
    for (const auto& [v, w] : weights) total += w;
    double x = Uniform() * total;
    for (const auto& [v, w] : weights) {
      if (x < w) return v;
      x -= w;
    }
    return std::prev(weights.end())->first;
  }

 private:
  std::mt19937_64 engine_;
};

std::string Padded(int n, int width) {
  std::string s = std::to_string(n);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return s;
}

// Whole seconds, so that files show "25m13s" rather than nanosecond fractions.
absl::Duration Secs(double s) { return absl::Seconds(std::llround(s)); }

std::string Gi(int n) { return StrCat(n, "Gi"); }

// --- The cluster file -------------------------------------------------------------------------

struct NodeShape {
  int cpu = 0;
  int memory_gi = 0;
  int gpus = 0;
};

// The fat-tree position of the index-th node: `per_leaf` nodes per leaf switch,
// `leaves` leaves per spine, `spines` spines per zone (labels as in SPEC section 4).
void AddTopology(Json& labels, int index, int per_leaf, int leaves, int spines) {
  const int leaf = index / per_leaf;
  const int spine = leaf / leaves;
  const int zone = spine / spines;
  const std::string z = StrCat("zone-", zone + 1);
  const std::string s = StrCat("spine-", zone + 1, "-", spine % spines + 1);
  labels["topology.kubernetes.io/zone"] = z;
  labels["berth.io/spine"] = s;
  labels["berth.io/leaf"] =
      StrCat("leaf-", zone + 1, "-", spine % spines + 1, "-", leaf % leaves + 1);
}

Json NodeJson(const std::string& name, Json labels, const NodeShape& shape) {
  labels["kubernetes.io/hostname"] = name;
  labels["kubernetes.io/os"] = "linux";
  labels["kubernetes.io/arch"] = "amd64";
  Json resources = {
      {"cpu", std::to_string(shape.cpu)}, {"memory", Gi(shape.memory_gi)}, {"pods", "110"}};
  if (shape.gpus > 0) resources["nvidia.com/gpu"] = std::to_string(shape.gpus);
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
              {"spec", Json::object()},
              {"status", {{"capacity", resources}, {"allocatable", resources}}}};
}

Json PoolJson(const std::string& name, const std::string& node_pool_label, bool no_preemption,
              bool no_borrowing, bool no_sharing) {
  return Json{{"apiVersion", "berth.io/v1alpha1"},
              {"kind", "Pool"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"nodeSelector", {{"matchLabels", {{"berth.io/node-pool", node_pool_label}}}}},
                {"disablePreemption", no_preemption},
                {"disableBorrowing", no_borrowing},
                {"disableSharing", no_sharing}}}};
}

Json QueueJson(const std::string& name, int weight) {
  return Json{{"apiVersion", "berth.io/v1alpha1"},
              {"kind", "Queue"},
              {"metadata", {{"name", name}}},
              {"spec", {{"weight", weight}}}};
}

// The seed's four priority levels (SPEC section 4), in every generated cluster.
void AddPriorityClasses(Json& items) {
  for (auto [name, value] :
       {std::pair{"berth-experiment", 10}, std::pair{"berth-offline", 100},
        std::pair{"berth-normal", 1000}, std::pair{"berth-production", 10000}}) {
    items.push_back(Json{{"apiVersion", "scheduling.k8s.io/v1"},
                         {"kind", "PriorityClass"},
                         {"metadata", {{"name", name}}},
                         {"value", value},
                         {"preemptionPolicy", "PreemptLowerPriority"}});
  }
}

std::string ListJson(Json items) {
  Json list = {{"apiVersion", "v1"},
               {"kind", "List"},
               {"metadata", {{"resourceVersion", ""}}},
               {"items", std::move(items)}};
  return list.dump(2) + "\n";
}

// --- Job building blocks ----------------------------------------------------------------------

PodTemplate Pods(int count, int cpu, int memory_gi, int gpus) {
  PodTemplate t;
  t.count = count;
  t.requests["cpu"] = std::to_string(cpu);
  t.requests["memory"] = Gi(memory_gi);
  if (gpus > 0) t.requests["nvidia.com/gpu"] = std::to_string(gpus);
  return t;
}

Job MakeJob(std::string name, std::string queue, std::string priority, absl::Duration submit,
            absl::Duration duration, PodTemplate pods) {
  Job j;
  j.name = std::move(name);
  j.ns = queue.empty() ? "default" : queue;
  j.queue = std::move(queue);
  j.priority_class = std::move(priority);
  j.submit = submit;
  j.duration = duration;
  j.pods.push_back(std::move(pods));
  return j;
}

double GpuSeconds(const Job& j) {
  double gpus = 0;
  for (const PodTemplate& t : j.pods) {
    auto it = t.requests.find("nvidia.com/gpu");
    if (it != t.requests.end()) gpus += t.count * std::stod(it->second);
  }
  return gpus * absl::ToDoubleSeconds(j.duration);
}

int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// --- gpu-mix ----------------------------------------------------------------------------------

// Arrival-rate shape: 1 + A sin(2 pi t / day), so with t = 0 at 08:00 the rate peaks at 14:00
// (1 + A times the mean) and bottoms out at 02:00 (1 - A).
constexpr double kDiurnalAmplitude = 0.6;
constexpr double kDay = 86400.0;

// Integral of the rate shape from 0 to t, which is increasing, so it can be inverted by bisection.
double CumulativeRate(double t) {
  return t + kDiurnalAmplitude * kDay / (2 * kPi) * (1 - std::cos(2 * kPi * t / kDay));
}

// A time in [0, span] drawn with density proportional to the diurnal rate (inverse CDF).
double DiurnalArrival(Rng& rng, double span) {
  const double target = rng.Uniform() * CumulativeRate(span);
  double lo = 0, hi = span;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (CumulativeRate(mid) < target ? lo : hi) = mid;
  }
  return lo;
}

// Gives the jobs, generated with submit 0, sorted submit times over a span chosen so that the
// GPU work they offer is `load` times the cluster's GPU capacity over that span.
void SpreadArrivals(std::vector<Job>& jobs, Rng& rng, int total_gpus, double load, bool diurnal) {
  double work = 0;
  for (const Job& j : jobs) work += GpuSeconds(j);
  const double span = std::max(600.0, work / (total_gpus * load));
  std::vector<double> at;
  at.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    at.push_back(diurnal ? DiurnalArrival(rng, span) : rng.Uniform() * span);
  }
  std::sort(at.begin(), at.end());
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].submit = Secs(at[i]);
}

Generated GpuMix(const GenerateOptions& o) {
  const int nodes = o.nodes > 0 ? o.nodes : 72;
  const int cpu_nodes = nodes / 9;
  const int gpu_nodes = nodes - cpu_nodes;
  const int total_gpus = gpu_nodes * 8;
  const int max_gpus = std::min(64, LargestPowerOfTwoAtMost(total_gpus));
  Rng rng(o.seed);

  Generated g;
  Json items = Json::array();
  for (int i = 0; i < nodes; ++i) {
    const bool gpu = i < gpu_nodes;
    Json labels = {{"berth.io/node-pool", gpu ? "gpu" : "cpu"}};
    AddTopology(labels, i, 8, 4, 4);
    const std::string name =
        gpu ? StrCat("gpu-", Padded(i + 1, 4)) : StrCat("cpu-", Padded(i - gpu_nodes + 1, 4));
    items.push_back(
        NodeJson(name, std::move(labels), gpu ? NodeShape{96, 1024, 8} : NodeShape{64, 256, 0}));
  }
  for (auto [name, weight] : {std::pair{"research", 3}, std::pair{"product", 2},
                              std::pair{"dev", 1}, std::pair{"batch", 1}}) {
    items.push_back(QueueJson(name, weight));
  }
  AddPriorityClasses(items);
  g.cluster_json = ListJson(std::move(items));

  std::vector<Job>& jobs = g.workload.jobs;
  jobs.reserve(o.jobs);
  for (int i = 0; i < o.jobs; ++i) {
    // 0 GPUs: CPU-only data preparation. Most GPU jobs take one GPU; few are large.
    int gpus = rng.Pick<int>({{0, 5}, {1, 58}, {2, 10}, {4, 9}, {8, 9}, {16, 5}, {32, 3}, {64, 1}});
    gpus = std::min(gpus, max_gpus);
    const std::string queue =
        gpus == 0 ? rng.Pick<std::string>({{"batch", 0.7}, {"research", 0.3}})
                  : rng.Pick<std::string>(
                        {{"research", 0.4}, {"product", 0.25}, {"dev", 0.2}, {"batch", 0.15}});
    std::string priority;
    if (queue == "product") {
      priority = rng.Pick<std::string>({{"berth-production", 0.2}, {"berth-normal", 0.8}});
    } else if (queue == "dev") {
      priority = rng.Pick<std::string>({{"berth-experiment", 0.4}, {"berth-normal", 0.6}});
    } else {
      priority = rng.Pick<std::string>(
          {{"berth-normal", 0.7}, {"berth-offline", 0.2}, {"berth-experiment", 0.1}});
    }

    Job job;
    if (gpus == 0) {
      const int cpu = rng.Pick<int>({{2, 1}, {4, 1}, {8, 1}, {16, 1}});
      const double seconds = rng.LogNormal(15 * 60, 1.2, 60, 12 * 3600);
      job = MakeJob(StrCat("prep-", Padded(i + 1, 6)), queue, priority, absl::ZeroDuration(),
                    Secs(seconds), Pods(rng.Between(1, 8), cpu, cpu * 4, 0));
    } else {
      const int cpu_per_gpu = rng.Between(4, 12);
      const int mem_per_gpu = rng.Pick<int>({{32, 1}, {48, 1}, {64, 1}, {96, 1}});
      // Larger jobs run somewhat longer: median 25 min for 1 GPU, 62.5 min for 64.
      const double median = 25 * 60 * (1 + 0.25 * std::log2(gpus));
      const double seconds = rng.LogNormal(median, 1.6, 60, 3 * kDay);
      const int per_pod = std::min(gpus, 8);
      const int count = gpus / per_pod;
      job = MakeJob(StrCat("train-", Padded(i + 1, 6)), queue, priority, absl::ZeroDuration(),
                    Secs(seconds),
                    Pods(count, per_pod * cpu_per_gpu, per_pod * mem_per_gpu, per_pod));
      if (count > 1) job.min_member = count;  // data-parallel training needs every worker
    }
    // Lifetimes: most low-priority work agrees to be preempted for fair share after a while.
    if (priority == "berth-offline" || priority == "berth-experiment") {
      if (rng.Chance(0.6)) {
        job.lifetime = rng.Pick<absl::Duration>({{absl::ZeroDuration(), 1},
                                                 {absl::Minutes(30), 1},
                                                 {absl::Hours(1), 1},
                                                 {absl::Hours(2), 1}});
      }
    } else if (priority == "berth-normal" && rng.Chance(0.1)) {
      job.lifetime = rng.Pick<absl::Duration>({{absl::Hours(1), 1}, {absl::Hours(4), 1}});
    }
    jobs.push_back(std::move(job));
  }
  SpreadArrivals(jobs, rng, total_gpus, o.load > 0 ? o.load : 1.0, /*diurnal=*/true);
  g.workload.name = "gpu-mix";
  g.workload.description =
      StrCat("GPU-cluster mix shaped on published trace statistics (Philly, PAI): ", o.jobs,
             " jobs, seed ", o.seed, ", ", gpu_nodes, " 8-GPU nodes and ", cpu_nodes,
             " CPU nodes; diurnal arrivals, offered GPU load ", o.load > 0 ? o.load : 1.0);
  return g;
}

// --- seed-stories -----------------------------------------------------------------------------

absl::StatusOr<Generated> SeedStories(const GenerateOptions& o) {
  const int nodes = o.nodes > 0 ? o.nodes : 18;
  if (nodes < 3) return absl::InvalidArgumentError("nodes: seed-stories needs at least 3 nodes");
  const int infer_nodes = std::max(1, nodes / 9);
  const int gpu_nodes = (nodes - infer_nodes + 1) / 2;
  const int cpu_nodes = nodes - infer_nodes - gpu_nodes;
  Rng rng(o.seed);

  Generated g;
  Json items = Json::array();
  int index = 0;
  auto add_nodes = [&](const std::string& pool, int n, NodeShape shape) {
    for (int i = 0; i < n; ++i, ++index) {
      Json labels = {{"berth.io/node-pool", pool}};
      AddTopology(labels, index, 4, 4, 4);
      items.push_back(NodeJson(StrCat(pool, "-", Padded(i + 1, 3)), std::move(labels), shape));
    }
  };
  add_nodes("gpu", gpu_nodes, {96, 1024, 8});
  add_nodes("cpu", cpu_nodes, {64, 256, 0});
  add_nodes("infer", infer_nodes, {48, 512, 4});
  // gpu and cpu lend and borrow; infer (serving) neither lends nor borrows.
  items.push_back(PoolJson("gpu", "gpu", false, false, false));
  items.push_back(PoolJson("cpu", "cpu", false, false, false));
  items.push_back(PoolJson("infer", "infer", true, true, true));
  for (auto [name, weight] :
       {std::pair{"team-a", 2}, std::pair{"team-b", 1}, std::pair{"team-c", 1}}) {
    items.push_back(QueueJson(name, weight));
  }
  AddPriorityClasses(items);
  g.cluster_json = ListJson(std::move(items));

  // One episode of three hours tells the three stories in turn; episodes repeat, with jittered
  // sizes and durations, until there are enough jobs.
  constexpr double kEpisode = 3 * 3600.0;
  std::vector<Job>& jobs = g.workload.jobs;
  auto jitter = [&](double seconds) { return Secs(seconds * (0.75 + 0.5 * rng.Uniform())); };
  for (int e = 0; static_cast<int>(jobs.size()) < o.jobs; ++e) {
    const std::string p = StrCat("e", Padded(e + 1, 3), "-");
    const double t0 = e * kEpisode;
    auto at = [&](double minutes) { return Secs(t0 + minutes * 60); };
    // Adds a job of `pool`, a gang of `min_member` when that is above 0.
    auto add = [&](Job j, const char* pool, int min_member = 0) {
      if (min_member > 0) j.min_member = min_member;
      j.pool = pool;
      jobs.push_back(std::move(j));
    };
    // Adds a rigid gang of whole gpu nodes for team-a.
    auto add_whole_node_gang = [&](const std::string& name, double minute, double minutes,
                                   int members) {
      add(MakeJob(p + name, "team-a", "berth-normal", at(minute), jitter(minutes * 60),
                  Pods(members, 64, 512, 8)),
          "gpu", members);
    };

    // Seed 004, pools. (1) CPU work of pool cpu fills half its home and is placed there.
    add(MakeJob(p + "pool-home", "team-c", "berth-normal", at(0), jitter(40 * 60),
                Pods(cpu_nodes, 32, 64, 0)),
        "cpu");
    // (2) A burst twice the room left: half of it borrows CPU on the gpu pool's idle nodes.
    add(MakeJob(p + "pool-borrow", "team-c", "berth-offline", at(5), jitter(60 * 60),
                Pods(2 * cpu_nodes, 32, 64, 0)),
        "cpu");
    // (3) The gpu pool's own jobs arrive and need the CPU the borrowers hold: they reclaim it.
    for (int i = 0; i < gpu_nodes; ++i) {
      add(MakeJob(StrCat(p, "pool-reclaim-", i + 1), "team-a", "berth-normal", at(15),
                  jitter(30 * 60), Pods(1, 64, 512, 8)),
          "gpu");
    }
    // (4) Serving in the infer pool, placed at home; that pool never lends or borrows.
    add(MakeJob(p + "infer-serve", "team-b", "berth-production", at(10), jitter(50 * 60),
                Pods(infer_nodes, 16, 128, 2)),
        "infer");

    // Seed 001, fair share with backfill and lifetimes. Two queues flood the gpu pool with
    // small jobs; team-a's big gang comes next and must not starve; short jobs backfill.
    for (const char* team : {"team-b", "team-c"}) {
      for (int i = 0; i < 3 * gpu_nodes; ++i) {
        const bool offline = rng.Chance(0.3);
        Job j = MakeJob(StrCat(p, "flood-", team[5], "-", i + 1), team,
                        offline ? "berth-offline" : "berth-normal", at(60 + rng.Uniform() * 5),
                        jitter(15 * 60), Pods(1, 8, 64, rng.Pick<int>({{1, 3}, {2, 1}})));
        if (offline) {
          j.lifetime =
              rng.Pick<absl::Duration>({{absl::ZeroDuration(), 1}, {absl::Minutes(10), 1}});
        }
        add(std::move(j), "gpu");
      }
    }
    // team-a's big gang.
    add_whole_node_gang("head", 62, 45, std::max(1, gpu_nodes / 2));
    for (int i = 0; i < 4; ++i) {
      add(MakeJob(StrCat(p, "backfill-", i + 1), "team-a", "berth-normal", at(64 + i),
                  jitter(5 * 60), Pods(1, 4, 32, 1)),
          "gpu");
    }

    // Seed 002, elastic jobs: three gangs that run with half their workers and grow into free
    // room, then a rigid gang whose arrival makes them give back their elastic members.
    const int elastic = std::max(2, gpu_nodes / 2);
    int k = 0;
    for (const char* team : {"team-a", "team-b", "team-c"}) {
      add(MakeJob(StrCat(p, "elastic-", team[5]), team, "berth-normal", at(120 + 5 * k++),
                  jitter(40 * 60), Pods(elastic, 32, 256, 4)),
          "gpu", elastic / 2);
    }
    // The rigid gang.
    add_whole_node_gang("rigid", 140, 30, std::max(1, gpu_nodes / 4));
  }
  jobs.resize(o.jobs);
  g.workload.name = "seed-stories";
  g.workload.description = StrCat(
      "The seeds' stories (004 pools, 001 fair share and backfill, 002 elastic gangs) in "
      "3-hour episodes: ",
      o.jobs, " jobs, seed ", o.seed, ", pools gpu (", gpu_nodes, " nodes), cpu (", cpu_nodes,
      "), infer (", infer_nodes, ")");
  return g;
}

// --- gang-fat-tree ----------------------------------------------------------------------------

Generated GangFatTree(const GenerateOptions& o) {
  // 4 nodes per leaf, 4 leaves per spine, 4 spines per zone: 64 nodes per zone, and by default
  // two zones. Hops (SPEC 6.3): same leaf 2, same spine 4, same zone 6.
  constexpr int kPerLeaf = 4, kLeaves = 4, kSpines = 4;
  const int nodes = o.nodes > 0 ? o.nodes : 128;
  Rng rng(o.seed);

  Generated g;
  Json items = Json::array();
  for (int i = 0; i < nodes; ++i) {
    Json labels = Json::object();
    AddTopology(labels, i, kPerLeaf, kLeaves, kSpines);
    items.push_back(NodeJson(StrCat("node-", Padded(i + 1, 4)), std::move(labels), {96, 1024, 8}));
  }
  for (auto [name, weight] : {std::pair{"team-a", 1}, std::pair{"team-b", 1}}) {
    items.push_back(QueueJson(name, weight));
  }
  AddPriorityClasses(items);
  g.cluster_json = ListJson(std::move(items));

  std::vector<Job>& jobs = g.workload.jobs;
  for (int i = 0; i < o.jobs; ++i) {
    const std::string queue = rng.Chance(0.5) ? "team-a" : "team-b";
    if (rng.Chance(0.2)) {  // filler: one small, short pod
      const int gpus = rng.Pick<int>({{1, 2}, {2, 1}, {4, 1}});
      jobs.push_back(MakeJob(StrCat("fill-", Padded(i + 1, 6)), queue, "berth-offline",
                             absl::ZeroDuration(), Secs(rng.LogNormal(10 * 60, 0.8, 60, 4 * 3600)),
                             Pods(1, 8 * gpus, 64 * gpus, gpus)));
      continue;
    }
    int member_gpus = rng.Chance(0.7) ? 8 : 4;
    int members = rng.Pick<int>({{2, 30}, {4, 30}, {8, 20}, {16, 13}, {32, 7}});
    // A gang must fit the cluster: at most `nodes` whole nodes' worth of GPUs.
    while (members > 2 && members * member_gpus > nodes * 8) members /= 2;
    if (members * member_gpus > nodes * 8) member_gpus = 4;  // a one-node cluster
    const int nodes_needed = (members * member_gpus + 7) / 8;
    // A hop limit the gang can meet: leaf (2) up to 4 nodes, spine (4) up to 16, zone (6) up
    // to 64. A drawn limit too tight for the gang's size is loosened to the next level.
    int hops = rng.Pick<int>({{0, 40}, {2, 20}, {4, 20}, {6, 20}});
    if (hops == 2 && nodes_needed > kPerLeaf) hops = 4;
    if (hops == 4 && nodes_needed > kPerLeaf * kLeaves) hops = 6;
    if (hops == 6 && nodes_needed > kPerLeaf * kLeaves * kSpines) hops = 0;
    Job j = MakeJob(StrCat("gang-", Padded(i + 1, 6)), queue,
                    rng.Chance(0.85) ? "berth-normal" : "berth-offline", absl::ZeroDuration(),
                    Secs(rng.LogNormal(40 * 60, 1.1, 120, kDay)),
                    Pods(members, 8 * member_gpus, 64 * member_gpus, member_gpus));
    j.min_member = members;
    if (members >= 4 && rng.Chance(0.25)) j.min_member = members / 2;  // elastic
    if (hops > 0) j.max_hops = hops;
    if (rng.Chance(0.2)) j.schedule_timeout_seconds = 600;
    jobs.push_back(std::move(j));
  }
  SpreadArrivals(jobs, rng, nodes * 8, o.load > 0 ? o.load : 0.95, /*diurnal=*/false);
  g.workload.name = "gang-fat-tree";
  g.workload.description = StrCat(
      "Gang-heavy mix on a fat tree (4 nodes per leaf, 4 leaves per spine, 4 spines per "
      "zone): ",
      o.jobs, " jobs, seed ", o.seed, ", ", nodes, " 8-GPU nodes; offered GPU load ",
      o.load > 0 ? o.load : 0.95);
  return g;
}

// --- saturated and saturated-pools --------------------------------------------------------------

// A GPU cluster where work always waits: arrivals above capacity for a day, then a drain. Three
// queues weighted 1:1:2, each asking for more than its share; single pods of 1-8 GPUs and gangs
// of 2, 4 and 8 whole nodes within one spine (maxHops 4); log-normal run times, median 45 min.
// `with_pools` puts every GPU node in one of three team Pools, and has some jobs name their
// team's pool while the rest name none and borrow.
Generated Saturated(const GenerateOptions& o, bool with_pools) {
  constexpr int kPerLeaf = 4, kLeaves = 4, kSpines = 4;
  const int nodes = o.nodes > 0 ? o.nodes : (with_pools ? 108 : 144);
  const int cpu_nodes = nodes / 9;
  const int gpu_nodes = std::max(1, nodes - cpu_nodes);
  const int total_gpus = gpu_nodes * 8;
  const double load = o.load > 0 ? o.load : 1.25;
  const std::vector<std::string> teams = {"team-a", "team-b", "team-c"};
  Rng rng(o.seed);

  Generated g;
  Json items = Json::array();
  for (int i = 0; i < gpu_nodes; ++i) {
    // Team pools are contiguous blocks of the tree, so each holds whole spines where it can.
    const std::string pool =
        with_pools ? teams[std::min<size_t>(2, static_cast<size_t>(i) * 3 / gpu_nodes)] : "gpu";
    Json labels = {{"berth.io/node-pool", pool}};
    AddTopology(labels, i, kPerLeaf, kLeaves, kSpines);
    items.push_back(NodeJson(StrCat("gpu-", Padded(i + 1, 4)), std::move(labels), {96, 1024, 8}));
  }
  for (int i = 0; i < cpu_nodes; ++i) {
    Json labels = {{"berth.io/node-pool", "cpu"}};
    AddTopology(labels, gpu_nodes + i, kPerLeaf, kLeaves, kSpines);
    items.push_back(NodeJson(StrCat("cpu-", Padded(i + 1, 4)), std::move(labels), {64, 256, 0}));
  }
  if (with_pools) {
    for (const std::string& team : teams) items.push_back(PoolJson(team, team, false, false, false));
  }
  for (auto [name, weight] : {std::pair{"team-a", 1}, std::pair{"team-b", 1}, std::pair{"team-c", 2}}) {
    items.push_back(QueueJson(name, weight));
  }
  AddPriorityClasses(items);
  g.cluster_json = ListJson(std::move(items));

  // Each queue asks for more than its share at load 1.25: 28% of the work against a share of
  // 25% for team-a and team-b, 44% against 50% x 1.25 > 1 for team-c.
  const int gang_cap = std::min(8, LargestPowerOfTwoAtMost(std::min(gpu_nodes, kPerLeaf * kLeaves)));
  std::vector<Job>& jobs = g.workload.jobs;
  jobs.reserve(o.jobs);
  for (int i = 0; i < o.jobs; ++i) {
    const std::string queue = rng.Pick<std::string>({{"team-a", 0.28}, {"team-b", 0.28}, {"team-c", 0.44}});
    const std::string priority = rng.Chance(0.2) ? "berth-offline" : "berth-normal";
    // 0: CPU-only preparation; 1-8: one pod; 16-64: a gang of 8-GPU pods.
    int gpus = rng.Pick<int>({{0, 6}, {1, 34}, {2, 12}, {4, 12}, {8, 14}, {16, 11}, {32, 7}, {64, 4}});
    if (gpus > 8) gpus = std::min(gpus, 8 * gang_cap);
    const double seconds = rng.LogNormal(45 * 60, 1.0, 120, kDay);
    Job job;
    if (gpus == 0) {
      const int cpu = rng.Pick<int>({{4, 1}, {8, 1}, {16, 1}});
      job = MakeJob(StrCat("prep-", Padded(i + 1, 6)), queue, priority, absl::ZeroDuration(),
                    Secs(seconds), Pods(rng.Between(1, 4), cpu, cpu * 4, 0));
    } else {
      const int per_pod = std::min(gpus, 8);
      const int count = gpus / per_pod;
      job = MakeJob(StrCat(count > 1 ? "gang-" : "train-", Padded(i + 1, 6)), queue, priority,
                    absl::ZeroDuration(), Secs(seconds), Pods(count, per_pod * 8, per_pod * 64, per_pod));
      if (count > 1) {
        job.min_member = count;
        if (gpu_nodes >= kPerLeaf * kLeaves) job.max_hops = 4;  // within one spine
      }
      // A team's GPU jobs name its pool three times in five; the rest name none and borrow.
      if (with_pools && rng.Chance(0.6)) job.pool = queue;
    }
    jobs.push_back(std::move(job));
  }
  SpreadArrivals(jobs, rng, total_gpus, load, /*diurnal=*/false);
  g.workload.name = with_pools ? "saturated-pools" : "saturated";
  g.workload.description = StrCat(
      with_pools ? "A saturated GPU cluster in three team pools (some jobs name their team's "
                   "pool, the rest borrow): "
                 : "A saturated GPU cluster on a fat tree: ",
      o.jobs, " jobs, seed ", o.seed, ", ", gpu_nodes, " 8-GPU nodes and ", cpu_nodes,
      " CPU nodes; queues weighted 1:1:2, each asking for more than its share; offered GPU load ",
      load);
  return g;
}

}  // namespace

std::vector<std::string> ProfileNames() {
  return {"gpu-mix", "seed-stories", "gang-fat-tree", "saturated", "saturated-pools"};
}

std::string DescribeProfiles() {
  return "  gpu-mix        GPU jobs of 1-64 GPUs shaped on Philly/PAI trace statistics: "
         "power-of-two sizes, log-normal durations, diurnal arrivals (72 nodes)\n"
         "  seed-stories   the seeds' stories: pools lending and reclaiming (004), fair share "
         "with backfill and lifetimes (001), elastic gangs (002) (18 nodes, 3 pools)\n"
         "  gang-fat-tree  gangs of 2-32 members with max-hops limits on a fat tree, with "
         "small filler pods (128 nodes)\n"
         "  saturated      a day of arrivals at 1.25x the GPU capacity, then a drain: pods of "
         "1-8 GPUs and gangs of 2-8 nodes, queues 1:1:2 (144 nodes)\n"
         "  saturated-pools  the same load on GPU nodes in three team pools; some jobs name "
         "their pool, the rest borrow (108 nodes)\n";
}

absl::StatusOr<Generated> Generate(const GenerateOptions& options) {
  if (options.jobs < 1 || options.jobs > kMaxJobs) {
    return absl::InvalidArgumentError(
        StrCat("jobs: ", options.jobs, " is out of range (1 to ", kMaxJobs, ")"));
  }
  if (options.nodes < 0 || options.nodes > kMaxNodes) {
    return absl::InvalidArgumentError(StrCat("nodes: ", options.nodes, " is out of range (0 for ",
                                             "the profile's default, up to ", kMaxNodes, ")"));
  }
  if (!(options.load >= 0 && options.load <= 100)) {
    return absl::InvalidArgumentError(StrCat(
        "load: ", options.load, " is out of range (0 for the profile's default, up to 100)"));
  }
  if (options.load > 0 && options.profile == "seed-stories") {
    return absl::InvalidArgumentError(
        "load: the seed-stories profile follows a fixed timeline and takes no load");
  }
  if (options.profile == "gpu-mix") return GpuMix(options);
  if (options.profile == "seed-stories") return SeedStories(options);
  if (options.profile == "gang-fat-tree") return GangFatTree(options);
  if (options.profile == "saturated") return Saturated(options, /*with_pools=*/false);
  if (options.profile == "saturated-pools") return Saturated(options, /*with_pools=*/true);
  std::string known;
  for (const std::string& p : ProfileNames()) StrAppend(&known, known.empty() ? "" : ", ", p);
  return absl::InvalidArgumentError(
      StrCat("profile: unknown profile \"", options.profile, "\" (known: ", known, ")"));
}

}  // namespace berth::extender::sim
