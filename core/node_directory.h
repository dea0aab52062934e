#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace berth::core {

/// The model's index of node slots by node name, built for how the verbs use it.
///
/// kube-scheduler names every candidate node in every filter and prioritize call: thousands of
/// names a call, with the index cold in cache (calls come milliseconds apart, and one call's
/// node states alone outgrow L2). An absl::flat_hash_map<std::string, slot> costs a cache miss
/// on its slot and another on the key's heap block for each name (cloud node names are over 15
/// bytes: "gke-prod-pool-3-1a2b3c4d-x7k2"), and its lookups run one after another, so the misses
/// queue: at 2,000 candidates they were a fifth of berth's CPU per scheduled pod
/// (docs/performance.md, "What a scheduled pod costs berth").
///
/// Here an entry is 16 bytes (32 bits of the name's hash, the slot, and a pointer to the name's
/// bytes, kept in large chunks that never move), in a linear-probing table at most half full:
/// a call's lookups touch tens of kilobytes. FindMany hashes names ahead of the lookup and
/// prefetches each name's entry, then its bytes, several names before it is compared, so the
/// misses overlap. A lookup always compares the whole name: a hash never decides alone.
///
/// kube-scheduler names the candidates in the same order every call (its node tree's, from a
/// rotating start), so FindMany first tries the slot that followed the previous name in the
/// last call: one comparison with that slot's name, whose bytes lie in the order the names were
/// inserted, so that consecutive hits read memory in a few sequential runs the hardware
/// prefetches, with no hashing and no table entry. Only a name whose guess is wrong is hashed.
/// The guesses are hints, written with relaxed atomics by readers under the shared lock; a
/// wrong or stale one costs one comparison and never changes an answer.
///
/// Not thread-safe by itself: the model reads it under its shared lock and changes it under its
/// exclusive lock. Insert never reallocates the table while the room asked for with Reserve
/// lasts (the model grows it off the exclusive lock); it may take a new chunk for name bytes.
class NodeDirectory {
 public:
  using Slot = uint32_t;
  static constexpr Slot kNone = UINT32_MAX;

  NodeDirectory() = default;
  /// A copy of `live` (names copied into chunks of its own) with room for `room` more entries.
  NodeDirectory(const NodeDirectory& live, size_t room);
  NodeDirectory(NodeDirectory&&) noexcept = default;
  NodeDirectory& operator=(NodeDirectory&&) noexcept = default;
  NodeDirectory(const NodeDirectory&) = delete;
  NodeDirectory& operator=(const NodeDirectory&) = delete;

  size_t size() const { return size_; }
  /// Entries that can still be inserted before the table grows; 0 also once the bytes of erased
  /// names outweigh the live ones, so that the model's next write that adds a node makes a
  /// compact copy (erased names' bytes are only given back by a copy).
  size_t room() const;

  /// The slot of `name`, or kNone.
  Slot Find(std::string_view name) const;
  bool Contains(std::string_view name) const { return Find(name) != kNone; }
  /// out[i] = Find(names[i]) for every i, with the memory of later names fetched while earlier
  /// ones are compared. `out` has names.size() elements.
  /// Consecutive names are tried first against the slot that followed the one before in the
  /// previous call (see above); \return how many were found that way.
  size_t FindMany(std::span<const std::string_view> names, Slot* out) const;

  /// Adds `name` -> `slot`; `name` must not be in the directory. Grows the table when it has no
  /// room left (the model never lets it come to that under its lock).
  void Insert(std::string_view name, Slot slot);
  /// Removes `name` if present. \return whether it was.
  bool Erase(std::string_view name);

  /// Calls fn(name, slot) for every entry, in no particular order.
  template <class Fn>
  void ForEach(Fn&& fn) const {
    for (const Entry& e : table_) {
      if (e.name != nullptr) fn(NameOf(e), e.slot);
    }
  }

  void swap(NodeDirectory& o) noexcept;

 private:
  struct Entry {
    uint32_t tag = 0;          ///< high 32 bits of the name's hash
    Slot slot = kNone;
    const char* name = nullptr;  ///< null: empty; else a 4-byte length, then the bytes
  };
  static_assert(sizeof(Entry) == 16);

  /// What the directory knows of one slot: the bytes of its name (null: no entry has this
  /// slot), and the slot that followed it in the last FindMany call (a hint, read and written
  /// with relaxed atomics; kNone: none yet).
  struct SlotInfo {
    const char* name = nullptr;
    mutable Slot next = kNone;
  };

  static uint64_t Hash(std::string_view name);
  static std::string_view NameAt(const char* at);
  static std::string_view NameOf(const Entry& e) { return NameAt(e.name); }
  /// The slot of names[i] by its hint after `prev`, or kNone when the hint is absent or wrong.
  Slot Guess(Slot prev, std::string_view name) const;
  /// FindMany's hashed lookups, pipelined, for names[from..].
  void FindHashed(std::span<const std::string_view> names, size_t from, Slot* out) const;
  size_t Mask() const { return table_.size() - 1; }
  /// Index of `name`'s entry, or SIZE_MAX.
  size_t Locate(std::string_view name, uint64_t hash) const;
  void Rehash(size_t capacity);
  /// Copies `name` into the chunks; \return where its length prefix is.
  const char* Keep(std::string_view name);

  std::vector<Entry> table_;  ///< power-of-two size, at most half full; empty until first use
  /// Indexed by slot. The model's slots are dense (a new one is at most the highest so far plus
  /// one), so a copy reserves the room asked for and inserts do not reallocate it either.
  std::vector<SlotInfo> slots_;
  size_t size_ = 0;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_used_ = 0;     ///< bytes used in chunks_.back()
  size_t chunk_size_ = 0;     ///< size of chunks_.back()
  size_t live_bytes_ = 0;     ///< name bytes of the entries
  size_t erased_bytes_ = 0;   ///< name bytes of erased entries, still in the chunks
};

}  // namespace berth::core
