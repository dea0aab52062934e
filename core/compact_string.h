#pragma once

#include <compare>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>

namespace berth::core {

/// An immutable-size string in 16 bytes: up to 15 characters are stored inline, longer ones in
/// one exact-size heap block. std::string takes 32 bytes plus a heap block for anything over 15
/// characters; the model holds hundreds of thousands of pods with seven strings each, most of
/// them short (namespaces, scheduler, node and priority class names), so this halves their cost.
///
/// Converts implicitly to std::string_view; compares with strings of any kind.
class CompactString {
 public:
  CompactString() noexcept { SetInline(0); }
  CompactString(std::string_view s) { Assign(s); }  // NOLINT: implicit by design
  CompactString(const char* s) { Assign(s); }       // NOLINT
  CompactString(const std::string& s) { Assign(s); }  // NOLINT
  CompactString(const CompactString& o) { Assign(o.view()); }
  CompactString(CompactString&& o) noexcept {
    std::memcpy(buf_, o.buf_, sizeof(buf_));
    tag_ = o.tag_;
    o.SetInline(0);
  }
  ~CompactString() { Release(); }

  CompactString& operator=(const CompactString& o) {
    if (this != &o) Reset(o.view());
    return *this;
  }
  CompactString& operator=(CompactString&& o) noexcept {
    if (this != &o) {
      Release();
      std::memcpy(buf_, o.buf_, sizeof(buf_));
      tag_ = o.tag_;
      o.SetInline(0);
    }
    return *this;
  }
  CompactString& operator=(std::string_view s) { return Reset(s); }
  CompactString& operator=(const char* s) { return Reset(s); }
  CompactString& operator=(const std::string& s) { return Reset(s); }

  const char* data() const { return IsHeap() ? HeapPtr() : buf_; }
  size_t size() const { return IsHeap() ? HeapSize() : tag_; }
  bool empty() const { return size() == 0; }
  void clear() { Reset({}); }
  std::string_view view() const { return {data(), size()}; }
  operator std::string_view() const { return view(); }  // NOLINT: implicit by design
  std::string str() const { return std::string(view()); }

  friend bool operator==(const CompactString& a, const CompactString& b) { return a.view() == b.view(); }
  friend bool operator==(const CompactString& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const CompactString& a, const char* b) { return a.view() == b; }
  friend bool operator==(const CompactString& a, const std::string& b) { return a.view() == b; }
  friend std::strong_ordering operator<=>(const CompactString& a, const CompactString& b) {
    return a.view() <=> b.view();
  }
  friend std::ostream& operator<<(std::ostream& os, const CompactString& s) { return os << s.view(); }

 private:
  static constexpr uint8_t kHeapTag = 0xFF;

  bool IsHeap() const { return tag_ == kHeapTag; }
  const char* HeapPtr() const {
    const char* p;
    std::memcpy(&p, buf_, sizeof(p));
    return p;
  }
  uint32_t HeapSize() const {
    uint32_t n;
    std::memcpy(&n, buf_ + sizeof(char*), sizeof(n));
    return n;
  }
  void SetInline(uint8_t n) { tag_ = n; }
  void Assign(std::string_view s) {
    if (s.size() <= sizeof(buf_)) {
      // s may be a view of this very buffer. An empty view may have no buffer at all (a null
      // data()), and memmove from a null pointer is undefined even for zero bytes.
      if (!s.empty()) std::memmove(buf_, s.data(), s.size());
      SetInline(static_cast<uint8_t>(s.size()));
      return;
    }
    char* p = new char[s.size()];
    std::memcpy(p, s.data(), s.size());
    const auto n = static_cast<uint32_t>(s.size());
    std::memcpy(buf_, &p, sizeof(p));
    std::memcpy(buf_ + sizeof(char*), &n, sizeof(n));
    tag_ = kHeapTag;
  }
  CompactString& Reset(std::string_view s) {
    if (IsHeap() && s.data() >= HeapPtr() && s.data() < HeapPtr() + HeapSize()) {
      // Assigning a view of ourselves: copy before releasing.
      const std::string copy(s);
      Release();
      Assign(copy);
      return *this;
    }
    Release();
    Assign(s);
    return *this;
  }
  void Release() {
    if (IsHeap()) delete[] HeapPtr();
    SetInline(0);
  }

  char buf_[15] = {};  // zeroed so copies of the unused inline bytes are defined
  uint8_t tag_;  ///< inline length (0..15), or kHeapTag
};

static_assert(sizeof(CompactString) == 16);

}  // namespace berth::core
