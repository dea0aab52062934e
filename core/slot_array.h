#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <memory>
#include <vector>

namespace berth::core {

/// Slots that never move (references and views into them stay valid while the array grows),
/// stored in chunks of `kChunk` default-constructed slots, with a list of the slots freed for
/// reuse. What std::deque and a std::vector of free slots gave the model, but with room made
/// ahead: std::deque allocates as slots are added and, when its block map is full, copies the
/// whole map, and a vector copies itself when it grows, all inside the model's exclusive lock.
/// Here the writer makes room before it takes the lock (Grow, which only reads the array) and
/// puts it in place under the lock (Adopt, which moves pointers).
///
/// Slots past size() exist (default-constructed, in the last chunk) but are not yet in use;
/// the slots below size() are in use or on the free list.
template <class T, size_t kChunk>
class SlotArray {
  static_assert(kChunk > 0 && (kChunk & (kChunk - 1)) == 0, "kChunk must be a power of two");

 public:
  using Chunk = std::unique_ptr<T[]>;

  /// Room for more slots, made off the lock by Grow and put in place by Adopt.
  struct Growth {
    std::vector<Chunk> chunks;
    std::vector<uint32_t> free;  ///< a copy of the free list with room for every slot; or empty
    bool has_free = false;       ///< whether `free` replaces the free list
  };

  SlotArray() = default;
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;

  /// One past the highest slot ever taken: slots [0, size()) are in use or free.
  size_t size() const { return size_; }
  /// Slots there is memory for.
  size_t capacity() const { return chunks_.size() * kChunk; }
  /// Slots freed and not taken again.
  size_t free_count() const { return free_.size(); }
  /// How many slots the free list holds without allocating: at least capacity(), so Free never
  /// allocates.
  size_t free_capacity() const { return free_.capacity(); }

  T& operator[](size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  const T& operator[](size_t i) const { return chunks_[i / kChunk][i % kChunk]; }

  /// A slot to use: the one freed last, or the next one past size(). Its content is what
  /// Free() left there, or default-constructed. Allocates only when Grow did not make room.
  uint32_t Take() {
    if (!free_.empty()) {
      const uint32_t slot = free_.back();
      free_.pop_back();
      return slot;
    }
    if (size_ == capacity()) {
      chunks_.push_back(std::make_unique<T[]>(kChunk));
      free_.reserve(capacity());
    }
    return static_cast<uint32_t>(size_++);
  }
  /// Puts slot `i` on the free list. Never allocates: the free list has room for every slot.
  void Free(uint32_t i) { free_.push_back(i); }

  /// The room for `n` more Take()s than there are free slots now: the chunks they need beyond
  /// capacity(), and a copy of the free list with room for every slot when the new chunks add
  /// slots the list has no room for. Reads the array only (its size, its capacity and the free
  /// list), so it may run beside readers of the array, and beside nothing that changes it.
  Growth Grow(size_t n) const {
    Growth g;
    const size_t room = free_.size() + (capacity() - size_);
    size_t capacity_after = capacity();
    for (size_t r = room; r < n; r += kChunk) {
      g.chunks.push_back(std::make_unique<T[]>(kChunk));
      capacity_after += kChunk;
    }
    if (free_.capacity() < capacity_after) {
      g.free.reserve(capacity_after);
      g.free.assign(free_.begin(), free_.end());
      g.has_free = true;
    }
    return g;
  }
  /// Makes this a copy of `other` (every slot, in use or free, and the free list), with chunks
  /// of its own. T must be copy-assignable.
  void CopyFrom(const SlotArray& other) {
    chunks_.clear();
    for (const Chunk& c : other.chunks_) {
      Chunk mine = std::make_unique<T[]>(kChunk);
      for (size_t i = 0; i < kChunk; ++i) mine[i] = c[i];
      chunks_.push_back(std::move(mine));
    }
    size_ = other.size_;
    free_.reserve(std::max(other.free_.capacity(), capacity()));
    free_.assign(other.free_.begin(), other.free_.end());
  }
  /// Puts room from Grow in place: appends its chunks (moves pointers, one per chunk) and swaps
  /// in the larger free list. `growth` then holds the free list replaced, to be freed later.
  void Adopt(Growth& growth) {
    for (Chunk& c : growth.chunks) chunks_.push_back(std::move(c));
    growth.chunks.clear();
    if (growth.has_free) free_.swap(growth.free);
  }

 private:
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
  std::vector<uint32_t> free_;  // capacity() >= capacity() of the array, so Free never allocates
};

}  // namespace berth::core
