#include "core/node_directory.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/hash/hash.h"

namespace berth::core {
namespace {

constexpr size_t kMinCapacity = 16;
constexpr size_t kChunkBytes = 64 << 10;
constexpr size_t kLengthBytes = sizeof(uint32_t);
/// Erased names' bytes are given back (by a compact copy) past this much, and past the live ones.
constexpr size_t kErasedSlack = 64 << 10;

size_t CapacityFor(size_t entries) {
  size_t c = kMinCapacity;
  while (c < 2 * entries) c *= 2;
  return c;
}

inline void Prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

}  // namespace

uint64_t NodeDirectory::Hash(std::string_view name) {
  return absl::Hash<absl::string_view>{}(absl::string_view(name.data(), name.size()));
}

std::string_view NodeDirectory::NameAt(const char* at) {
  uint32_t n;
  std::memcpy(&n, at, sizeof(n));
  return {at + kLengthBytes, n};
}

NodeDirectory::NodeDirectory(const NodeDirectory& live, size_t room) {
  Rehash(CapacityFor(live.size_ + room));
  slots_.reserve(live.slots_.size() + room);
  live.ForEach([&](std::string_view name, Slot slot) { Insert(name, slot); });
  // The hints too: the copy replaces the live directory, and kube-scheduler's order stays.
  for (size_t s = 0; s < slots_.size(); ++s) {
    slots_[s].next = std::atomic_ref<Slot>(live.slots_[s].next).load(std::memory_order_relaxed);
  }
}

size_t NodeDirectory::room() const {
  if (erased_bytes_ > kErasedSlack && erased_bytes_ > live_bytes_) return 0;
  return table_.size() / 2 - size_;
}

size_t NodeDirectory::Locate(std::string_view name, uint64_t hash) const {
  if (table_.empty()) return SIZE_MAX;
  const auto tag = static_cast<uint32_t>(hash >> 32);
  for (size_t i = hash & Mask();; i = (i + 1) & Mask()) {
    const Entry& e = table_[i];
    if (e.name == nullptr) return SIZE_MAX;
    if (e.tag == tag && NameOf(e) == name) return i;
  }
}

NodeDirectory::Slot NodeDirectory::Find(std::string_view name) const {
  const size_t i = Locate(name, Hash(name));
  return i == SIZE_MAX ? kNone : table_[i].slot;
}

NodeDirectory::Slot NodeDirectory::Guess(Slot prev, std::string_view name) const {
  if (prev >= slots_.size()) return kNone;
  const Slot guess = std::atomic_ref<Slot>(slots_[prev].next).load(std::memory_order_relaxed);
  if (guess >= slots_.size()) return kNone;
  const char* at = slots_[guess].name;
  return at != nullptr && NameAt(at) == name ? guess : kNone;
}

size_t NodeDirectory::FindMany(std::span<const std::string_view> names, Slot* out) const {
  const size_t n = names.size();
  if (table_.empty()) {
    std::fill(out, out + n, kNone);
    return 0;
  }
  size_t hits = 0;
  size_t misses = 0;
  size_t i = 0;
  Slot prev = kNone;
  for (; i < n; ++i) {
    Slot slot = Guess(prev, names[i]);
    if (slot != kNone) {
      ++hits;
    } else {
      // More wrong guesses than a few, and over a quarter of the names so far: no hints yet
      // (the first call) or a new order. The rest is looked up by hash, pipelined.
      if (++misses > 8 && 4 * misses > i + 1) break;
      slot = Find(names[i]);
    }
    out[i] = slot;
    prev = slot;
  }
  if (i < n) FindHashed(names, i, out);
  // This call's order is the next call's guesses. A hint is written only where it changes.
  for (size_t j = 1; j < n; ++j) {
    if (out[j - 1] == kNone || out[j] == kNone) continue;
    std::atomic_ref<Slot> next(slots_[out[j - 1]].next);
    if (next.load(std::memory_order_relaxed) != out[j]) next.store(out[j], std::memory_order_relaxed);
  }
  return hits;
}

void NodeDirectory::FindHashed(std::span<const std::string_view> all, size_t from, Slot* out) const {
  const std::span<const std::string_view> names = all.subspan(from);
  out += from;
  const size_t n = names.size();
  // Three stages, `kAhead` names apart: hash a name and prefetch its home entry; two stages
  // later, read that entry (in cache by now) and prefetch the bytes of the name it points to;
  // then compare. Misses of 2 * kAhead names are in flight at once instead of one.
  constexpr size_t kAhead = 8;
  constexpr size_t kRing = 2 * kAhead + 1;
  uint64_t hashes[kRing];
  auto hash_at = [&](size_t i) {
    const uint64_t h = Hash(names[i]);
    hashes[i % kRing] = h;
    Prefetch(&table_[h & Mask()]);
  };
  auto peek_at = [&](size_t i) {
    const Entry& e = table_[hashes[i % kRing] & Mask()];
    if (e.name != nullptr) Prefetch(e.name);
  };
  for (size_t i = 0; i < std::min(n, 2 * kAhead); ++i) hash_at(i);
  for (size_t i = 0; i < std::min(n, kAhead); ++i) peek_at(i);
  for (size_t i = 0; i < n; ++i) {
    if (i + 2 * kAhead < n) hash_at(i + 2 * kAhead);
    if (i + kAhead < n) peek_at(i + kAhead);
    const size_t at = Locate(names[i], hashes[i % kRing]);
    out[i] = at == SIZE_MAX ? kNone : table_[at].slot;
  }
}

const char* NodeDirectory::Keep(std::string_view name) {
  const size_t need = kLengthBytes + name.size();
  if (chunks_.empty() || chunk_size_ - chunk_used_ < need) {
    chunk_size_ = std::max(kChunkBytes, need);
    chunks_.push_back(std::make_unique<char[]>(chunk_size_));
    chunk_used_ = 0;
  }
  char* at = chunks_.back().get() + chunk_used_;
  const auto len = static_cast<uint32_t>(name.size());
  std::memcpy(at, &len, sizeof(len));
  if (!name.empty()) std::memcpy(at + kLengthBytes, name.data(), name.size());
  chunk_used_ += need;
  return at;
}

void NodeDirectory::Rehash(size_t capacity) {
  std::vector<Entry> old = std::move(table_);
  table_.assign(capacity, Entry{});
  for (const Entry& e : old) {
    if (e.name == nullptr) continue;
    size_t i = Hash(NameOf(e)) & Mask();
    while (table_[i].name != nullptr) i = (i + 1) & Mask();
    table_[i] = e;
  }
}

void NodeDirectory::Insert(std::string_view name, Slot slot) {
  if (table_.empty() || size_ + 1 > table_.size() / 2) Rehash(CapacityFor(size_ + 1));
  const uint64_t h = Hash(name);
  size_t i = h & Mask();
  while (table_[i].name != nullptr) i = (i + 1) & Mask();
  table_[i] = Entry{.tag = static_cast<uint32_t>(h >> 32), .slot = slot, .name = Keep(name)};
  if (slot != kNone) {
    if (slot >= slots_.size()) slots_.resize(size_t{slot} + 1);
    slots_[slot].name = table_[i].name;
  }
  ++size_;
  live_bytes_ += name.size();
}

bool NodeDirectory::Erase(std::string_view name) {
  size_t hole = Locate(name, Hash(name));
  if (hole == SIZE_MAX) return false;
  if (const Entry& gone = table_[hole]; gone.slot < slots_.size() && slots_[gone.slot].name == gone.name) {
    slots_[gone.slot].name = nullptr;
  }
  live_bytes_ -= name.size();
  erased_bytes_ += name.size();
  --size_;
  // Backward-shift deletion: move later entries of the probe run into the hole when their home
  // is at or before it, so lookups never need tombstones.
  for (size_t j = (hole + 1) & Mask();; j = (j + 1) & Mask()) {
    const Entry& e = table_[j];
    if (e.name == nullptr) break;
    const size_t home = Hash(NameOf(e)) & Mask();
    // Is `home` cyclically outside (hole, j]? Then the entry may move back to the hole.
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      table_[hole] = e;
      hole = j;
    }
  }
  table_[hole] = Entry{};
  return true;
}

void NodeDirectory::swap(NodeDirectory& o) noexcept {
  std::swap(table_, o.table_);
  std::swap(slots_, o.slots_);
  std::swap(size_, o.size_);
  std::swap(chunks_, o.chunks_);
  std::swap(chunk_used_, o.chunk_used_);
  std::swap(chunk_size_, o.chunk_size_);
  std::swap(live_bytes_, o.live_bytes_);
  std::swap(erased_bytes_, o.erased_bytes_);
}

}  // namespace berth::core
