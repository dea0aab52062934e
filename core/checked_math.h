#pragma once

#include <cstdint>
#include <limits>

namespace berth::core {

/// Adds `a` and `b` into `*out`. \return false (and leaves `*out` unspecified) on overflow.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

/// Subtracts `b` from `a` into `*out`. \return false on overflow.
inline bool CheckedSub(int64_t a, int64_t b, int64_t* out) { return !__builtin_sub_overflow(a, b, out); }

/// Multiplies `a` by `b` into `*out`. \return false on overflow.
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

/// `a + b`, clamped to the int64 range. Model accounting uses saturating arithmetic so that a
/// quantity capped at the int64 range (as Kubernetes caps it) behaves as "unbounded" instead of
/// wrapping around (a wrapped sum once let a job past a quota check in another scheduler).
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

/// `a - b`, clamped to the int64 range.
inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) {
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

/// `a * b`, clamped to the int64 range.
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    return ((a < 0) != (b < 0)) ? std::numeric_limits<int64_t>::min()
                                : std::numeric_limits<int64_t>::max();
  }
  return r;
}

}  // namespace berth::core
