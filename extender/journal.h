#pragma once

// The decision journal (`berth serve --journal DIR`, `berth simulate --journal DIR`): every verb
// request and answer, every change the model took from outside (watch events, POST /v1/events,
// the --cluster file), every admission tick and housekeeping pass, and every bind the API server
// refused, in the order berth saw them, with the service clock's time. `berth replay`
// (extender/replay.h) runs a journal again through the current code. The format is in
// docs/decisions.md ("Journal and replay").
//
// Files: DIR/journal-NNNNNN.jsonl, one JSON object per line. Each file begins with a header (how
// to rebuild the service that wrote it) and a snapshot of the model's objects, so the oldest file
// kept can be replayed without the ones deleted before it. A file is closed once it holds
// max_file_bytes of entries besides its snapshot (checked at each tick against what the writer
// has written, so the next snapshot is taken off the verbs' path); the oldest files are deleted
// while the directory holds more than max_total_bytes.
//
// The verbs only copy their request and answer into a queue; a writer thread, which wakes every
// 20 ms (or when 64 entries wait), formats and writes them. The node-name list of a filter or
// prioritize request or of a filter's answer (40 KB at 2,000 nodes) is written once per file and
// referred to by number when a later request or answer carries the same list.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cluster_model.h"
#include "extender/metrics.h"
#include "extender/service.h"

namespace berth::extender {

struct JournalOptions {
  std::string dir;
  /// A file is closed (and the next begun) once it holds this much after its header and
  /// snapshot.
  int64_t max_file_bytes = int64_t{64} << 20;
  /// The oldest files are deleted while the directory's journal files hold more than this.
  int64_t max_total_bytes = int64_t{1} << 30;
};

/// How to rebuild the service that wrote a journal: written at the top of every file.
struct JournalHeader {
  std::string mode;            ///< "standalone" or "kubernetes"
  std::string scheduler_name;
  std::string config_json;     ///< the configuration file's text; empty: the defaults
  std::string config_source;   ///< its name, for errors
  std::string version;         ///< berth's version and commit
};

struct JournalStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t files = 0;          ///< files begun by this process
  uint64_t files_deleted = 0;  ///< past max_total_bytes
  uint64_t write_errors = 0;
};

/// The journal's line kinds.
inline constexpr std::string_view kJournalHeader = "header";
inline constexpr std::string_view kJournalSnapshot = "snapshot";
inline constexpr std::string_view kJournalEvents = "events";
inline constexpr std::string_view kJournalNodeList = "nodes";
inline constexpr std::string_view kJournalTick = "tick";
inline constexpr std::string_view kJournalHousekeeping = "housekeeping";
inline constexpr std::string_view kJournalBindFailure = "bindFailure";

class Journal {
 public:
  /// Creates DIR if needed and begins a new file after the last one there (a process start:
  /// replay begins a fresh service at it).
  static absl::StatusOr<std::unique_ptr<Journal>> Open(JournalOptions options, JournalHeader header);
  /// Writes what is queued and closes the file.
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  /// The model's objects as a Kubernetes List (what /debug/snapshot prints): written after the
  /// header of every file. The service sets it (Service::SetJournal) and writes the first.
  void SetSnapshotSource(std::function<std::string()> source);
  void Snapshot(absl::Time t);

  /// One verb call: its request body and the answer given.
  void Verb(VerbKind verb, absl::Time t, std::string_view request, int status, std::string_view answer);
  /// Changes the model takes from outside, recorded before they are applied (so every change a
  /// verb saw comes before the verb in the journal).
  ///
  /// Names of resources new to `names` are interned here, as Apply would a moment later.
  void ModelEvents(absl::Time t, std::span<const core::ModelEvent> events, core::ResourceNames& names);
  /// An admission tick or a housekeeping pass (kJournalTick, kJournalHousekeeping), and what it
  /// did (compared by replay). Checks the file's size: the tick's thread takes the snapshot
  /// that begins the next file.
  void Tick(std::string_view kind, absl::Time t, int64_t acted);
  /// The API server refused a bind berth had decided (the binder's error, not the verb's).
  void BindFailure(absl::Time t, std::string_view uid, std::string_view error);

  /// Returns once everything queued before the call is written and flushed.
  void Flush();
  JournalStats stats() const;
  const JournalOptions& options() const { return options_; }
  /// berth_journal_* on GET /metrics: entries, bytes, files begun and deleted, write errors,
  /// entries waiting for the writer.
  void WriteMetrics(PromWriter& w) const;

 private:
  struct Item {
    enum Kind : uint8_t { kLine, kVerb, kRotate } kind = kLine;
    bool snapshot = false;  // kLine: a snapshot, which does not count toward the file's cap
    VerbKind verb = VerbKind::kFilter;
    int status = 0;
    int64_t t = 0;      // microseconds since the Unix epoch
    std::string a, b;   // kLine: the line; kVerb: request, answer; kRotate: the snapshot line
  };
  Journal(JournalOptions options, JournalHeader header, int64_t next_file);
  void Push(Item item);
  void WriterLoop();
  bool OpenNextFile(std::string_view snapshot_line, bool start);
  void WriteVerb(const Item& item);
  /// Appends `"field": body` to line_, the body's node-name list (if long) replaced by the
  /// number of a list written once (`fieldNodes`, `fieldAt`).
  void AppendBody(std::string_view field, std::string_view body);
  uint64_t InternList(std::string_view list);
  /// \param counts whether the line counts toward max_file_bytes (a header and a snapshot
  /// do not: a snapshot larger than the cap would otherwise begin a new file at every tick).
  void WriteLine(std::string_view line, bool counts = true);
  void DeleteOldest();
  std::string HeaderLine(bool start) const;

  const JournalOptions options_;
  const JournalHeader header_;
  std::function<std::string()> snapshot_source_;

  mutable std::mutex mu_;
  std::condition_variable cv_, flushed_cv_;
  std::deque<Item> queue_;
  uint64_t pushed_ = 0, written_ = 0;
  uint64_t file_bytes_ = 0;        // written to the current file (the rotation check)
  bool rotate_pending_ = false;    // a rotation is queued and the writer has not begun it
  bool stop_ = false;
  bool flush_wanted_ = false;
  uint64_t errors_logged_at_ = 0;  // write_errors when the current file began
  JournalStats stats_;

  // Writer thread only.
  std::FILE* file_ = nullptr;
  int64_t next_file_ = 1;
  std::string line_;
  /// The node lists written to the current file, newest last (a few: the adaptive sample
  /// of percentageOfNodesToScore makes most lists differ).
  struct KnownList {
    uint64_t id;
    size_t hash;
    std::string text;
  };
  std::vector<KnownList> lists_;
  uint64_t next_list_ = 1;
  std::thread writer_;
};

/// Records the binds the API server refused (Kubernetes mode), so that a replay's binds fail
/// where the real ones did.
class JournalingBinder final : public BinderInterface {
 public:
  JournalingBinder(BinderInterface* inner, Journal* journal, const core::Clock* clock)
      : inner_(inner), journal_(journal), clock_(clock) {}
  absl::Status CanBind() const override { return inner_->CanBind(); }
  absl::Status Bind(const core::Pod& pod, std::string_view node) override;

 private:
  BinderInterface* inner_;
  Journal* journal_;
  const core::Clock* clock_;
};

/// The file names of a journal directory's files, oldest first.
std::vector<std::string> JournalFiles(const std::string& dir);

/// Where a request's node-name list is (the value of its "NodeNames" field, brackets included),
/// or {npos, 0}. Matched on the raw text, so the request is written back byte for byte.
std::pair<size_t, size_t> FindNodeNameList(std::string_view request);

std::string_view ModeName(Mode mode);

}  // namespace berth::extender
