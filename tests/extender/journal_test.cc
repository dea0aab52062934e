// The decision journal and `berth replay` (extender/journal.h, extender/replay.h): a service's
// journal replays with no difference; a changed setting reports the differences with the explain
// of both; node lists are written once; files rotate and the oldest go, each file replayable on
// its own; refused binds come back in a replay; a broken journal is named by file and line.

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "core/strings.h"
#include "extender/journal.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/replay.h"
#include "policy/registry.h"
#include "tests/testing/builders.h"
#include "tests/testing/files.h"
#include "tests/testing/harness.h"
#include "tests/testing/verbs.h"

namespace berth::testing {
namespace {

using extender::Journal;
using extender::JournalHeader;
using extender::JournalOptions;
using extender::ReplayOptions;
using extender::ReplayResult;

std::unique_ptr<Journal> OpenJournal(const TempDir& dir, std::string mode = "standalone",
                                     int64_t max_file = int64_t{64} << 20, int64_t max_total = int64_t{1} << 30) {
  absl::StatusOr<std::unique_ptr<Journal>> j =
      Journal::Open(JournalOptions{.dir = (dir.path() / "journal").string(), .max_file_bytes = max_file,
                                   .max_total_bytes = max_total},
                    JournalHeader{.mode = std::move(mode), .scheduler_name = "berth-scheduler", .version = "test"});
  REQUIRE(j.ok());
  return *std::move(j);
}

ReplayResult ReplayOf(const TempDir& dir, std::optional<std::string> config = std::nullopt) {
  ReplayOptions o{.dir = (dir.path() / "journal").string()};
  if (config) {
    o.config_json = *config;
    o.config_source = "changed.json";
  }
  absl::StatusOr<ReplayResult> r = extender::Replay(o);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *std::move(r);
}

std::vector<std::string> Lines(const std::filesystem::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

Json Nodes() {
  return Json::array({Event("ADDED", MakeNode("n1").Cpu("8").Memory("32Gi").Pods(110).Obj()),
                      Event("ADDED", MakeNode("n2").Cpu("8").Memory("32Gi").Pods(110).Obj()),
                      Event("ADDED", MakeNode("n3").Cpu("16").Memory("64Gi").Pods(110).Obj())});
}

// kube-scheduler's cycle for one pod: filter over every node, prioritize over those that fit,
// bind the best. \return the node, or "" when none fits.
std::string Schedule(Harness& h, const MakePod& pod) {
  const std::vector<std::string> all = {"n1", "n2", "n3"};
  const Verdicts v = FilterPod(h, pod, all);
  if (v.fit.empty()) return "";
  const std::map<std::string, int64_t> scores =
      ScoresOf(h.Prioritize({{"Pod", pod.Obj()}, {"NodeNames", v.fit}}));
  std::string best = v.fit[0];
  for (const std::string& n : v.fit) {
    auto it = scores.find(n);
    if (it != scores.end() && it->second > scores.at(best)) best = n;
  }
  BindOk(h, pod, best);
  return best;
}

// A standalone service's morning: nodes arrive, pods are scheduled one by one with ticks
// between, one finishes.
void Morning(Harness& h) {
  h.Apply(Nodes());
  for (int i = 0; i < 6; ++i) {
    const MakePod pod = MakePod(StrCat("p", i)).Namespace("ml").Uid(StrCat("u", i)).Cpu("3").Memory("4Gi");
    h.Apply(Json::array({Event("ADDED", pod.Obj())}));
    Schedule(h, pod);
    h.clock().Advance(absl::Seconds(1));
    h.Tick();
  }
  h.Apply(Json::array({Event("DELETED", MakePod("p0").Namespace("ml").Uid("u0").Cpu("3").Memory("4Gi").Obj())}));
  h.clock().Advance(absl::Seconds(5));
  CHECK(h.service().Housekeeping() == 0);
}

// Scores without binpack: the nodes' fill no longer counts.
constexpr char kWithoutBinpack[] =
    R"({"policies": {"scores": [{"name": "gpu-affinity", "weight": 1}, {"name": "gang-topology", "weight": 2}]}})";

// Morning() on a standalone service journaling into `dir`. \return the journal's figures.
extender::JournalStats RecordMorning(const TempDir& dir) {
  Harness h;
  std::unique_ptr<Journal> journal = OpenJournal(dir);
  h.service().SetJournal(journal.get());
  Morning(h);
  journal->Flush();
  return journal->stats();
}

TEST_CASE("journal: a service's journal replays with no difference", "[journal]") {
  TempDir dir;
  const extender::JournalStats stats = RecordMorning(dir);
  CHECK(stats.files == 1);
  CHECK(stats.write_errors == 0);
  CHECK(stats.entries > 20);
  CHECK(stats.bytes == std::filesystem::file_size(dir.path() / "journal" / "journal-000001.jsonl"));
  const ReplayResult r = ReplayOf(dir);
  CHECK(r.files == std::vector<std::string>{"journal-000001.jsonl"});
  CHECK(r.starts == 1);
  CHECK(r.verbs == 18);  // six pods: filter, prioritize, bind
  CHECK(r.ticks == 7);   // six admission ticks, one housekeeping pass
  CHECK(r.events == 10);  // three nodes, six pods, one delete
  CHECK(r.decisions == 25);
  CHECK(r.differing == 0);
  CHECK(r.diffs.empty());
  CHECK(extender::ReplayReport(r).find("25 decisions compared: 0 differ") != std::string::npos);
}

TEST_CASE("journal: a changed setting reports each differing decision with the explain of both", "[journal]") {
  TempDir dir;
  RecordMorning(dir);
  const ReplayResult r = ReplayOf(dir, kWithoutBinpack);
  REQUIRE(r.differing > 0);
  CHECK(r.diffs.size() == r.differing);  // fewer than 20: all in full
  const extender::ReplayDiff& d = r.diffs[0];
  CHECK(d.kind == "prioritize");
  CHECK(d.pod == "ml/p0");
  CHECK(d.where.starts_with("journal-000001.jsonl:"));
  CHECK(d.recorded != d.replayed);
  CHECK(d.replayed == "best n1 (10), n2 (10), n3 (10)");  // no fill counted: all alike
  // The explain under the journal's configuration and under the changed one, at that moment.
  CHECK(d.explain_recorded.find("ml/p0") != std::string::npos);
  CHECK(d.explain_replayed.find("ml/p0") != std::string::npos);
  CHECK(r.config == "changed.json");
  const std::string report = extender::ReplayReport(r);
  CHECK(report.find("#1 journal-000001.jsonl:") != std::string::npos);
  CHECK(report.find("  then:\n") != std::string::npos);
  CHECK(report.find("  now:\n") != std::string::npos);

  // Only the first 20 in full; the rest are counted.
  absl::StatusOr<ReplayResult> few = extender::Replay(ReplayOptions{
      .dir = (dir.path() / "journal").string(), .config_json = kWithoutBinpack, .max_full = 1});
  REQUIRE(few.ok());
  CHECK(few->differing == r.differing);
  CHECK(few->diffs.size() == 1);
}

TEST_CASE("journal: a node list is written once per file and requests come back byte for byte", "[journal]") {
  const std::string request = R"({"Pod": {"metadata": {"name": "x", "labels": {"nodenames": "[not]"}}}, "nodenames" : ["a", "b\"]"], "x": 1})";
  const auto [at, len] = extender::FindNodeNameList(request);
  REQUIRE(at != std::string::npos);
  CHECK(request.substr(at, len) == R"(["a", "b\"]"])");
  CHECK(extender::FindNodeNameList(R"({"NodeNames": null, "Nodes": {"items": []}})").first == std::string::npos);
  CHECK(extender::FindNodeNameList(R"({"NodeNames": ["a", )").first == std::string::npos);  // cut short

  TempDir dir;
  {
    Harness h;
    std::unique_ptr<Journal> journal = OpenJournal(dir);
    h.service().SetJournal(journal.get());
    h.Apply(Nodes());
    for (int i = 0; i < 3; ++i) {
      const MakePod pod = MakePod(StrCat("p", i)).Namespace("ml").Uid(StrCat("u", i)).Cpu("1");
      h.Apply(Json::array({Event("ADDED", pod.Obj())}));
      // A list long enough to be worth naming (longer than 64 bytes).
      FilterPod(h, pod, {"n1", "n2", "n3", "node-that-is-not-there-0", "node-that-is-not-there-1",
                         "node-that-is-not-there-2"});
    }
    // Every node fits: the answer carries the request's list, written as it was the first time.
    h.Apply(Json::array({Event("ADDED", MakeNode("node-with-a-long-name-1").Cpu("8").Memory("32Gi").Pods(110).Obj()),
                         Event("ADDED", MakeNode("node-with-a-long-name-2").Cpu("8").Memory("32Gi").Pods(110).Obj()),
                         Event("ADDED", MakeNode("node-with-a-long-name-3").Cpu("8").Memory("32Gi").Pods(110).Obj())}));
    const Verdicts v = FilterPod(h, MakePod("p0").Namespace("ml").Uid("u0").Cpu("1"),
                                 {"node-with-a-long-name-1", "node-with-a-long-name-2", "node-with-a-long-name-3"});
    CHECK(v.fit.size() == 3);
  }
  const std::vector<std::string> lines = Lines(dir.path() / "journal" / "journal-000001.jsonl");
  int lists = 0, filters = 0;
  for (const std::string& line : lines) {
    const Json e = Json::parse(line);
    if (e["k"] == "nodes") ++lists;
    if (e["k"] != "filter") continue;
    ++filters;
    if (filters <= 3) {
      CHECK(e["reqNodes"] == 1);
      CHECK(e["req"].get<std::string>().find("node-that-is-not-there") == std::string::npos);
      CHECK_FALSE(e.contains("ansNodes"));  // three short names: not worth a number
    } else {
      CHECK(e["reqNodes"] == 2);
      CHECK(e["ansNodes"] == 2);
      CHECK(e["ans"].get<std::string>().find("node-with-a-long-name") == std::string::npos);
    }
  }
  CHECK(lists == 2);
  CHECK(filters == 4);
  CHECK(ReplayOf(dir).differing == 0);  // the requests rebuilt give the same answers
}

TEST_CASE("journal: its figures are on /metrics", "[journal]") {
  TempDir dir;
  Harness h;
  CHECK(Metric(h, "berth_journal_entries_total") == 0);  // no journal: no series
  std::unique_ptr<Journal> journal = OpenJournal(dir);
  h.service().SetJournal(journal.get());
  h.Apply(Nodes());
  journal->Flush();
  const extender::JournalStats stats = journal->stats();
  CHECK(stats.entries == 3);  // header, snapshot, and one line for the three nodes
  CHECK(Metric(h, "berth_journal_entries_total") == 3);
  CHECK(Metric(h, "berth_journal_bytes_total") == static_cast<double>(stats.bytes));
  CHECK(Metric(h, "berth_journal_files_total") == 1);
  CHECK(Metric(h, "berth_journal_write_errors_total") == 0);
  CHECK(Metric(h, "berth_journal_queued") == 0);
  CHECK(h.service().Metrics().body.find("# TYPE berth_journal_files_deleted_total counter") != std::string::npos);
}

TEST_CASE("journal: files rotate past their cap and the oldest go, each file replayable from its snapshot",
          "[journal]") {
  TempDir dir;
  constexpr int64_t kFile = int64_t{64} << 10;
  {
    Harness h;
    std::unique_ptr<Journal> journal = OpenJournal(dir, "standalone", kFile, 3 * kFile);
    h.service().SetJournal(journal.get());
    h.Apply(Nodes());
    for (int i = 0; i < 400; ++i) {
      const MakePod pod = MakePod(StrCat("p", i)).Namespace("ml").Uid(StrCat("u", i)).Cpu("100m");
      h.Apply(Json::array({Event("ADDED", pod.Obj())}));
      Schedule(h, pod);
      if (i >= 100) h.Apply(Json::array({Event("DELETED", MakePod(StrCat("p", i - 100)).Namespace("ml").Uid(StrCat("u", i - 100)).Cpu("100m").Obj())}));
      h.clock().Advance(absl::Seconds(1));
      h.Tick();
    }
    journal->Flush();
    CHECK(journal->stats().files > 3);
    CHECK(journal->stats().files_deleted > 0);
  }
  const std::vector<std::string> files = extender::JournalFiles((dir.path() / "journal").string());
  REQUIRE(files.size() >= 2);
  CHECK(files.front() != "journal-000001.jsonl");  // deleted past the total cap
  int64_t total = 0;
  for (const std::string& f : files) {
    const std::vector<std::string> lines = Lines(dir.path() / "journal" / f);
    REQUIRE(lines.size() >= 2);
    const Json header = Json::parse(lines[0]);
    CHECK(header["k"] == "header");
    CHECK(header["start"] == false);  // begun by rotation, not by a process start
    CHECK(Json::parse(lines[1])["k"] == "snapshot");
    total += static_cast<int64_t>(std::filesystem::file_size(dir.path() / "journal" / f));
  }
  // The cap holds, give or take the file being written when the last was deleted.
  CHECK(total <= 4 * kFile);
  // The oldest file kept starts from its snapshot.
  const ReplayResult r = ReplayOf(dir);
  CHECK(r.verbs > 100);
  CHECK(r.differing == 0);
}

TEST_CASE("journal: a snapshot larger than the file cap does not begin a file at every tick", "[journal]") {
  TempDir dir;
  constexpr int64_t kFile = int64_t{64} << 10;
  Harness h;
  Json nodes = Json::array();
  for (int i = 0; i < 300; ++i) {
    nodes.push_back(Event("ADDED", MakeNode(StrCat("node-", i)).Cpu("8").Memory("32Gi").Pods(110).Obj()));
  }
  h.Apply(nodes);
  std::unique_ptr<Journal> journal = OpenJournal(dir, "standalone", kFile, 16 * kFile);
  h.service().SetJournal(journal.get());  // a snapshot of 300 nodes: more than 64 KiB
  for (int i = 0; i < 5; ++i) {
    h.clock().Advance(absl::Seconds(1));
    h.Tick();
    journal->Flush();
  }
  CHECK(journal->stats().bytes > static_cast<uint64_t>(kFile));
  CHECK(journal->stats().files == 1);
}

// A binder that refuses one pod, as an API server that answers 409.
class RefusingBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod& pod, std::string_view) override {
    if (pod.name.view() == "refused") return absl::AlreadyExistsError("pods \"refused\" is already bound");
    return absl::OkStatus();
  }
};

TEST_CASE("journal: in Kubernetes mode a bind the API server refused is refused again in the replay", "[journal]") {
  TempDir dir;
  {
    core::FakeClock clock;
    core::ClusterModel model(&clock);
    policy::PolicyConfig pc;
    auto pipeline = policy::BuildDefaultRegistry().Build(pc, model.resources());
    REQUIRE(pipeline.ok());
    std::unique_ptr<Journal> journal = OpenJournal(dir, "kubernetes");
    RefusingBinder refusing;
    extender::JournalingBinder binder(&refusing, journal.get(), &clock);
    extender::ServiceOptions options{.mode = extender::Mode::kKubernetes};
    extender::Service service(options, &model, *std::move(pipeline), &binder, &clock);
    service.SetJournal(journal.get());
    // The watches' events, journaled before the model takes them (as the reflector does).
    auto watch = [&](const Json& events) {
      const std::string text = events.dump();
      absl::StatusOr<extender::JsonDocument> doc = extender::JsonDocument::Parse(text);
      REQUIRE(doc.ok());
      absl::StatusOr<std::vector<core::ModelEvent>> decoded = extender::DecodeWatchEvents(doc->root(), model.resources());
      REQUIRE(decoded.ok());
      journal->ModelEvents(clock.Now(), *decoded, model.resources());
      REQUIRE(model.Apply(*decoded).refused.empty());
    };
    watch(Nodes());
    for (const std::string name : {"fine", "refused"}) {
      const MakePod pod = MakePod(name).Namespace("ml").Uid(name).Cpu("1");
      watch(Json::array({Event("ADDED", pod.Obj())}));
      const extender::Reply r = service.Bind(
          Json{{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", name}, {"Node", "n1"}}.dump());
      CHECK(r.status == 200);
      CHECK((Json::parse(r.body)["Error"] == "") == (name == "fine"));
    }
  }
  CHECK(ReplayOf(dir).differing == 0);

  // Without the refusal recorded, the replay's bind succeeds where the real one failed.
  const std::filesystem::path file = dir.path() / "journal" / "journal-000001.jsonl";
  std::string kept;
  for (const std::string& line : Lines(file)) {
    if (Json::parse(line)["k"] != "bindFailure") kept += line + "\n";
  }
  dir.Write("journal/journal-000001.jsonl", kept);
  const ReplayResult r = ReplayOf(dir);
  REQUIRE(r.differing == 1);
  CHECK(r.diffs[0].kind == "bind");
  CHECK(r.diffs[0].pod == "ml/refused");
  CHECK(r.diffs[0].recorded.find("already bound") != std::string::npos);
  CHECK(r.diffs[0].replayed == "bound");
}

TEST_CASE("replay: a broken journal is named by file and line; a last line cut short is left out", "[journal]") {
  TempDir dir;
  {
    Harness h;
    std::unique_ptr<Journal> journal = OpenJournal(dir);
    h.service().SetJournal(journal.get());
    h.Apply(Nodes());
  }
  const std::filesystem::path file = dir.path() / "journal" / "journal-000001.jsonl";
  const std::string good = ReadTestFile(file);
  const size_t good_lines = Lines(file).size();

  dir.Write("journal/journal-000001.jsonl", good + R"({"t":1,"k":"tick","acted":0)");  // killed mid-write
  ReplayResult cut = ReplayOf(dir);
  CHECK(cut.partial_last_line);
  CHECK(cut.differing == 0);
  CHECK(extender::ReplayReport(cut).find("cut short") != std::string::npos);

  auto error_of = [&](const std::string& content) {
    dir.Write("journal/journal-000001.jsonl", content);
    absl::StatusOr<ReplayResult> r = extender::Replay(ReplayOptions{.dir = (dir.path() / "journal").string()});
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  CHECK(error_of(good + "garbage\n" + R"({"t":1,"k":"tick","acted":0})" + "\n") ==
        StrCat("journal-000001.jsonl:", good_lines + 1, ": not a journal entry (not a JSON object)"));
  CHECK(error_of(good + R"({"t":1,"k":"launch"})" + "\n") ==
        StrCat("journal-000001.jsonl:", good_lines + 1, ": unknown entry kind \"launch\""));
  CHECK(error_of(R"({"t":1,"k":"tick","acted":0})" "\n") ==
        "journal-000001.jsonl:1: a journal file begins with its header");
  CHECK(error_of(good + R"({"t":1,"k":"filter","status":200,"reqNodes":7,"reqAt":3,"req":"{}","ans":"{}"})" + "\n")
            .ends_with("a request naming a node list its file does not hold"));
  CHECK(error_of(good + R"({"t":1,"k":"filter","status":200,"req":"{}","ansNodes":7,"ansAt":1,"ans":"{}"})" + "\n")
            .ends_with("an answer naming a node list its file does not hold"));
  absl::StatusOr<ReplayResult> none = extender::Replay(ReplayOptions{.dir = dir.path().string()});
  REQUIRE_FALSE(none.ok());
  CHECK(std::string(none.status().message()).find("no journal files") != std::string::npos);
}

}  // namespace
}  // namespace berth::testing
