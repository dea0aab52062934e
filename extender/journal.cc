#include "extender/journal.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/hash/hash.h"
#include "core/strings.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFilePrefix = "journal-";
constexpr std::string_view kFileSuffix = ".jsonl";
constexpr size_t kKnownLists = 8;
constexpr size_t kWakeWriterAt = 64;
constexpr auto kWriterPeriod = std::chrono::milliseconds(20);

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

std::string FileName(int64_t n) {
  std::string digits = std::to_string(n);
  if (digits.size() < 6) digits.insert(0, 6 - digits.size(), '0');
  return StrCat(kFilePrefix, digits, kFileSuffix);
}

// The number of a journal file's name, or -1 for any other file.
int64_t FileNumber(std::string_view name) {
  if (!name.starts_with(kFilePrefix) || !name.ends_with(kFileSuffix)) return -1;
  const std::string_view digits =
      name.substr(kFilePrefix.size(), name.size() - kFilePrefix.size() - kFileSuffix.size());
  if (digits.empty() || digits.size() > 12) return -1;
  int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

// A delete is written with the identity the model keys on (and a finished pod's flag); an
// upsert as the Kubernetes object the codec reads back to the same value (the snapshot's form).
nlohmann::json EncodeModelEvent(const core::ModelEvent& e, const core::ResourceNames& names) {
  using nlohmann::json;
  auto added = [](json object) { return json{{"type", "ADDED"}, {"object", std::move(object)}}; };
  auto deleted = [](std::string_view kind, json identity) {
    identity["type"] = "DELETED";
    identity["kind"] = kind;
    return identity;
  };
  return std::visit(
      [&](const auto& ev) -> json {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, core::NodeUpsert>) return added(EncodeNode(ev.node, names));
        if constexpr (std::is_same_v<T, core::PodUpsert>) return added(EncodePod(ev.pod, names));
        if constexpr (std::is_same_v<T, core::PoolUpsert>) return added(EncodePool(ev.pool));
        if constexpr (std::is_same_v<T, core::QueueUpsert>) return added(EncodeQueue(ev.queue));
        if constexpr (std::is_same_v<T, core::PodGroupUpsert>) return added(EncodePodGroup(ev.podgroup, names));
        if constexpr (std::is_same_v<T, core::PriorityClassUpsert>) {
          return added(EncodePriorityClass(ev.priority_class));
        }
        if constexpr (std::is_same_v<T, core::NodeDelete>) return deleted("Node", {{"name", ev.name}});
        if constexpr (std::is_same_v<T, core::PodDelete>) {
          json id = {{"uid", ev.uid}, {"namespace", ev.ns}, {"name", ev.name}};
          if (ev.succeeded) id["succeeded"] = true;
          return deleted("Pod", std::move(id));
        }
        if constexpr (std::is_same_v<T, core::PoolDelete>) return deleted("Pool", {{"name", ev.name}});
        if constexpr (std::is_same_v<T, core::QueueDelete>) return deleted("Queue", {{"name", ev.name}});
        if constexpr (std::is_same_v<T, core::PodGroupDelete>) {
          return deleted("PodGroup", {{"namespace", ev.ns}, {"name", ev.name}});
        }
        if constexpr (std::is_same_v<T, core::PriorityClassDelete>) {
          return deleted("PriorityClass", {{"name", ev.name}});
        }
      },
      e);
}

// Skips a JSON string starting at its opening quote; returns the index after its closing quote,
// or npos.
size_t SkipString(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The event with the provisional resource ids of names new to the table turned into the
// table's (as ClusterModel::Apply does before committing it), so the encoders can name them.
// Interns those names now, a moment before Apply would. nullopt when they do not fit: Apply
// refuses the object as well.
std::optional<core::ModelEvent> Resolved(const core::ModelEvent& e, core::ResourceNames& names) {
  auto resolve = [&](std::span<const std::string> provisional,
                     std::initializer_list<core::ResourceVector*> vectors) {
    return core::ResolveProvisionalIds(
               names, provisional, std::span<core::ResourceVector* const>(vectors.begin(), vectors.size()))
        .ok();
  };
  if (const auto* n = std::get_if<core::NodeUpsert>(&e); n != nullptr && !n->new_resources.empty()) {
    core::NodeUpsert copy = *n;
    if (!resolve(n->new_resources, {&copy.node.capacity, &copy.node.allocatable})) return std::nullopt;
    copy.new_resources.clear();
    return core::ModelEvent(std::move(copy));
  }
  if (const auto* p = std::get_if<core::PodUpsert>(&e); p != nullptr && !p->new_resources.empty()) {
    core::PodUpsert copy = *p;
    if (!resolve(p->new_resources, {&copy.pod.request})) return std::nullopt;
    copy.new_resources.clear();
    return core::ModelEvent(std::move(copy));
  }
  if (const auto* g = std::get_if<core::PodGroupUpsert>(&e); g != nullptr && !g->new_resources.empty()) {
    core::PodGroupUpsert copy = *g;
    if (!resolve(g->new_resources, {&copy.podgroup.min_resources})) return std::nullopt;
    copy.new_resources.clear();
    return core::ModelEvent(std::move(copy));
  }
  return e;
}

}  // namespace

std::string_view ModeName(Mode mode) { return mode == Mode::kStandalone ? "standalone" : "kubernetes"; }

std::pair<size_t, size_t> FindNodeNameList(std::string_view request) {
  constexpr std::pair<size_t, size_t> kNone{std::string_view::npos, 0};
  constexpr std::string_view kKey = "\"nodenames\"";
  // The key as kube-scheduler writes it ("nodenames") or as tests do ("NodeNames"): Go matches
  // request keys without regard to case.
  size_t at = 0;
  while (true) {
    const size_t found = std::search(request.begin() + static_cast<std::ptrdiff_t>(at), request.end(),
                                     kKey.begin(), kKey.end(),
                                     [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; }) -
                         request.begin();
    if (found >= request.size()) return kNone;
    size_t i = found + kKey.size();
    while (i < request.size() && std::isspace(static_cast<unsigned char>(request[i]))) ++i;
    if (i < request.size() && request[i] == ':') {
      ++i;
      while (i < request.size() && std::isspace(static_cast<unsigned char>(request[i]))) ++i;
      if (i >= request.size() || request[i] != '[') {  // null, or a key of the same name elsewhere
        at = found + 1;
        continue;
      }
      const size_t begin = i;
      for (++i; i < request.size();) {
        if (request[i] == '"') {
          i = SkipString(request, i);
          if (i == std::string_view::npos) return kNone;
        } else if (request[i] == ']') {
          return {begin, i + 1 - begin};
        } else if (request[i] == '[' || request[i] == '{') {
          return kNone;  // not a list of names
        } else {
          ++i;
        }
      }
      return kNone;
    }
    at = found + 1;  // the text inside a string value, not the key
  }
}

std::vector<std::string> JournalFiles(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (const int64_t n = FileNumber(name); n >= 0 && e.is_regular_file(ec)) found.emplace_back(n, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [n, name] : found) out.push_back(std::move(name));
  return out;
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(JournalOptions options, JournalHeader header) {
  if (options.dir.empty()) return absl::InvalidArgumentError("--journal: no directory given");
  if (options.max_file_bytes < (int64_t{1} << 16)) {
    return absl::InvalidArgumentError("journal: the file size cap must be at least 64 KiB");
  }
  if (options.max_total_bytes < options.max_file_bytes) {
    return absl::InvalidArgumentError("journal: the total size cap must be at least one file's");
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return absl::InvalidArgumentError(StrCat("--journal ", options.dir, ": cannot create: ", ec.message()));
  int64_t next = 1;
  for (const std::string& name : JournalFiles(options.dir)) next = std::max(next, FileNumber(name) + 1);
  std::unique_ptr<Journal> j(new Journal(std::move(options), std::move(header), next));
  if (!j->OpenNextFile({}, /*start=*/true)) {
    return absl::InvalidArgumentError(
        StrCat("--journal ", j->options_.dir, ": cannot write ", FileName(next), ": ", std::strerror(errno)));
  }
  j->writer_ = std::thread([p = j.get()] { p->WriterLoop(); });
  return j;
}

Journal::Journal(JournalOptions options, JournalHeader header, int64_t next_file)
    : options_(std::move(options)), header_(std::move(header)), next_file_(next_file) {}

Journal::~Journal() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (file_ != nullptr) std::fclose(file_);
}

void Journal::SetSnapshotSource(std::function<std::string()> source) {
  std::lock_guard<std::mutex> lk(mu_);
  snapshot_source_ = std::move(source);
}

void Journal::Snapshot(absl::Time t) {
  std::function<std::string()> source;
  {
    std::lock_guard<std::mutex> lk(mu_);
    source = snapshot_source_;
  }
  if (!source) return;
  std::string line = StrCat("{\"t\":", Micros(t), ",\"k\":\"", kJournalSnapshot, "\",\"list\":", source(), "}");
  Push(Item{.kind = Item::kLine, .snapshot = true, .t = Micros(t), .a = std::move(line)});
}

void Journal::Push(Item item) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(item));
    ++pushed_;
    // The writer wakes on its own every kWriterPeriod; a verb wakes it only when much is
    // waiting, so most verbs pay no futex call.
    if (queue_.size() < kWakeWriterAt) return;
  }
  cv_.notify_one();
}

void Journal::Verb(VerbKind verb, absl::Time t, std::string_view request, int status,
                   std::string_view answer) {
  Push(Item{.kind = Item::kVerb, .verb = verb, .status = status, .t = Micros(t),
            .a = std::string(request), .b = std::string(answer)});
}

void Journal::ModelEvents(absl::Time t, std::span<const core::ModelEvent> events,
                          core::ResourceNames& names) {
  if (events.empty()) return;
  nlohmann::json list = nlohmann::json::array();
  for (const core::ModelEvent& e : events) {
    if (std::optional<core::ModelEvent> r = Resolved(e, names)) list.push_back(EncodeModelEvent(*r, names));
  }
  std::string line = StrCat("{\"t\":", Micros(t), ",\"k\":\"", kJournalEvents, "\",\"events\":", list.dump(), "}");
  Push(Item{.kind = Item::kLine, .t = Micros(t), .a = std::move(line)});
}

void Journal::Tick(std::string_view kind, absl::Time t, int64_t acted) {
  std::string line = StrCat("{\"t\":", Micros(t), ",\"k\":\"", kind, "\",\"acted\":", acted, "}");
  Push(Item{.kind = Item::kLine, .t = Micros(t), .a = std::move(line)});
  bool rotate = false;
  std::function<std::string()> source;
  {
    std::lock_guard<std::mutex> lk(mu_);
    // What the writer has written to the file (it runs at most 20 ms behind), not what is
    // queued: node lists are written once, so a queued filter is far larger than its line.
    rotate = !rotate_pending_ && file_bytes_ >= static_cast<uint64_t>(options_.max_file_bytes);
    rotate_pending_ = rotate_pending_ || rotate;
    source = snapshot_source_;
  }
  if (!rotate) return;
  // The snapshot is taken here, in the journal's order: the next file begins with it.
  std::string snapshot = StrCat("{\"t\":", Micros(t), ",\"k\":\"", kJournalSnapshot, "\",\"list\":",
                                source ? source() : std::string("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[]}"), "}");
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(Item{.kind = Item::kRotate, .t = Micros(t), .a = std::move(snapshot)});
    ++pushed_;
  }
  cv_.notify_one();
}

void Journal::BindFailure(absl::Time t, std::string_view uid, std::string_view error) {
  std::string line = StrCat("{\"t\":", Micros(t), ",\"k\":\"", kJournalBindFailure, "\",\"uid\":");
  AppendJsonString(&line, uid);
  line.append(",\"error\":");
  AppendJsonString(&line, error);
  line.push_back('}');
  Push(Item{.kind = Item::kLine, .t = Micros(t), .a = std::move(line)});
}

absl::Status JournalingBinder::Bind(const core::Pod& pod, std::string_view node) {
  absl::Status s = inner_->Bind(pod, node);
  if (!s.ok()) journal_->BindFailure(clock_->Now(), pod.uid.view(), ToStd(s.message()));
  return s;
}

void Journal::Flush() {
  std::unique_lock<std::mutex> lk(mu_);
  const uint64_t target = pushed_;
  flush_wanted_ = true;
  cv_.notify_one();
  flushed_cv_.wait(lk, [&] { return written_ >= target || stop_; });
}

JournalStats Journal::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void Journal::WriteMetrics(PromWriter& w) const {
  JournalStats s;
  size_t queued = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    s = stats_;
    queued = queue_.size();
  }
  auto one = [&](std::string_view name, std::string_view type, std::string_view help, double v) {
    w.Family(name, type, help);
    w.Sample(name, {}, v);
  };
  one("berth_journal_entries_total", "counter", "Lines written to the decision journal (--journal).",
      static_cast<double>(s.entries));
  one("berth_journal_bytes_total", "counter", "Bytes written to the decision journal.", static_cast<double>(s.bytes));
  one("berth_journal_files_total", "counter", "Journal files begun by this process (the first, and each rotation).",
      static_cast<double>(s.files));
  one("berth_journal_files_deleted_total", "counter",
      "Oldest journal files deleted to keep the journal under --journal-max-total-mb.",
      static_cast<double>(s.files_deleted));
  one("berth_journal_write_errors_total", "counter",
      "Journal lines that could not be written (a full or failing disk); the journal has a gap.",
      static_cast<double>(s.write_errors));
  one("berth_journal_queued", "gauge", "Entries waiting for the journal's writer thread.", static_cast<double>(queued));
}

std::string Journal::HeaderLine(bool start) const {
  nlohmann::json h = {{"k", kJournalHeader},
                      {"format", 1},
                      {"start", start},
                      {"mode", header_.mode},
                      {"schedulerName", header_.scheduler_name},
                      {"config", header_.config_json},
                      {"configSource", header_.config_source},
                      {"version", header_.version}};
  return h.dump();
}

bool Journal::OpenNextFile(std::string_view snapshot_line, bool start) {
  if (file_ != nullptr) std::fclose(file_);
  const std::string path = (fs::path(options_.dir) / FileName(next_file_++)).string();
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) return false;
  lists_.clear();
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.files;
    errors_logged_at_ = stats_.write_errors;
    file_bytes_ = 0;
    rotate_pending_ = false;
  }
  WriteLine(HeaderLine(start), /*counts=*/false);
  if (!snapshot_line.empty()) WriteLine(snapshot_line, /*counts=*/false);
  DeleteOldest();
  return true;
}

void Journal::DeleteOldest() {
  std::vector<std::string> files = JournalFiles(options_.dir);
  std::vector<int64_t> sizes;
  int64_t total = 0;
  std::error_code ec;
  for (const std::string& f : files) {
    const auto size = fs::file_size(fs::path(options_.dir) / f, ec);
    sizes.push_back(ec ? 0 : static_cast<int64_t>(size));
    total += sizes.back();
  }
  // Never the file being written (the last).
  for (size_t i = 0; i + 1 < files.size() && total > options_.max_total_bytes; ++i) {
    if (fs::remove(fs::path(options_.dir) / files[i], ec)) {
      total -= sizes[i];
      std::lock_guard<std::mutex> lk(mu_);
      ++stats_.files_deleted;
    }
  }
}

void Journal::WriteLine(std::string_view line, bool counts) {
  if (file_ == nullptr) return;
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fputc('\n', file_) != EOF;
  std::lock_guard<std::mutex> lk(mu_);
  if (!ok) {
    // Logged once per file (the counter has every one): a full disk fails every line.
    if (stats_.write_errors++ == errors_logged_at_) {
      spdlog::error("journal: cannot write to {}: {}; lines are lost until it can", options_.dir, std::strerror(errno));
    }
    return;
  }
  ++stats_.entries;
  stats_.bytes += line.size() + 1;
  if (counts) file_bytes_ += line.size() + 1;
}

uint64_t Journal::InternList(std::string_view list) {
  const size_t hash = absl::HashOf(list);
  for (const KnownList& k : lists_) {
    if (k.hash == hash && k.text == list) return k.id;
  }
  const uint64_t id = next_list_++;
  line_.clear();
  StrAppend(&line_, "{\"k\":\"", kJournalNodeList, "\",\"id\":", id, ",\"list\":");
  AppendJsonString(&line_, list);
  line_.push_back('}');
  WriteLine(line_);
  if (lists_.size() == kKnownLists) lists_.erase(lists_.begin());
  lists_.push_back(KnownList{id, hash, std::string(list)});
  return id;
}

void Journal::AppendBody(std::string_view field, std::string_view body) {
  const auto [at, len] = FindNodeNameList(body);
  if (at == std::string_view::npos || len <= 64) {
    StrAppend(&line_, ",\"", field, "\":");
    AppendJsonString(&line_, body);
    return;
  }
  // InternList may write a line of its own first: the entry is built apart meanwhile.
  std::string entry = std::move(line_);
  const uint64_t id = InternList(body.substr(at, len));
  line_ = std::move(entry);
  std::string without(body.substr(0, at));
  without.append(body.substr(at + len));
  StrAppend(&line_, ",\"", field, "Nodes\":", id, ",\"", field, "At\":", at, ",\"", field, "\":");
  AppendJsonString(&line_, without);
}

void Journal::WriteVerb(const Item& item) {
  line_.clear();
  StrAppend(&line_, "{\"t\":", item.t, ",\"k\":\"", kVerbNames[static_cast<size_t>(item.verb)],
            "\",\"status\":", item.status);
  AppendBody("req", item.a);
  AppendBody("ans", item.b);
  line_.push_back('}');
  WriteLine(line_);
}

void Journal::WriterLoop() {
  while (true) {
    std::deque<Item> batch;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, kWriterPeriod,
                   [&] { return stop_ || flush_wanted_ || queue_.size() >= kWakeWriterAt; });
      flush_wanted_ = false;
      if (queue_.empty() && stop_) break;
      if (queue_.empty()) continue;
      batch.swap(queue_);
    }
    for (const Item& item : batch) {
      switch (item.kind) {
        case Item::kLine:
          WriteLine(item.a, /*counts=*/!item.snapshot);
          break;
        case Item::kVerb:
          WriteVerb(item);
          break;
        case Item::kRotate:
          if (!OpenNextFile(item.a, /*start=*/false)) {
            spdlog::error("journal: cannot begin the next file in {}: {}", options_.dir, std::strerror(errno));
          }
          break;
      }
    }
    if (file_ != nullptr) std::fflush(file_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      written_ += batch.size();
    }
    flushed_cv_.notify_all();
  }
  if (file_ != nullptr) std::fflush(file_);
  flushed_cv_.notify_all();
}

}  // namespace berth::extender
