#pragma once

#include <cstdint>

namespace berth::core {

/// floor(num / den), exactly, for 0 <= num and 0 < den whose quotient is below 2^50.
///
/// For the per-candidate scores (binpack's shares, the weighted mean of the score modules),
/// which divide once or more for every node of every prioritize call. A 64-bit `idiv` takes
/// 40-90 cycles on the Xeons berth runs on and was half of binpack's samples; a double division
/// and two multiplications take a fraction of that. The double quotient is within one of the
/// true one (its relative error is a few units of 2^-53, and the quotient is below 2^50), and
/// the exact remainder, computed in 128 bits, corrects it.
inline int64_t SmallQuotient(int64_t num, int64_t den) {
  __extension__ typedef __int128 Int128;
  int64_t q = static_cast<int64_t>(static_cast<double>(num) / static_cast<double>(den));
  const Int128 r = Int128(num) - Int128(q) * den;
  if (r < 0) {
    --q;
  } else if (r >= den) {
    ++q;
  }
  return q;
}

}  // namespace berth::core
