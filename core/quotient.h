#pragma once

#include <cstdint>

namespace berth::core {

/// floor(num / den), given an estimate `q` within one of it: the exact remainder, computed in
/// 128 bits, moves it by one where it is off.
inline int64_t CorrectedQuotient(int64_t num, int64_t den, int64_t q) {
  __extension__ typedef __int128 Int128;
  const Int128 r = Int128(num) - Int128(q) * den;
  if (r < 0) return q - 1;
  if (r >= den) return q + 1;
  return q;
}

/// floor(num / den), exactly, for 0 <= num and 0 < den whose quotient is below 2^50.
///
/// For the per-candidate scores (binpack's shares, the weighted mean of the score modules),
/// which divide once or more for every node of every prioritize call. A 64-bit `idiv` takes
/// 40-90 cycles on the Xeons berth runs on and was half of binpack's samples; a double division
/// and two multiplications take a fraction of that. The double quotient is within one of the
/// true one (its relative error is a few units of 2^-53, and the quotient is below 2^50), and
/// CorrectedQuotient corrects it.
inline int64_t SmallQuotient(int64_t num, int64_t den) {
  const double estimate = static_cast<double>(num) / static_cast<double>(den);
  return CorrectedQuotient(num, den, static_cast<int64_t>(estimate));
}

/// 1 / den rounded to float, for QuotientByInverse (0 for den <= 0, which it does not take).
inline float Inverse(int64_t den) {
  return den > 0 ? static_cast<float>(1.0 / static_cast<double>(den)) : 0.0f;
}

/// floor(num / den), exactly, for 0 <= num and 0 < den whose quotient is below 2^20, given
/// `inverse` = Inverse(den). A multiplication where SmallQuotient divides, for loops that
/// divide by the same denominators again and again (binpack's shares: every candidate's
/// allocatable, kept with the node). The estimate's relative error is below 2^-23 (the float's
/// rounding; the double product adds a few units of 2^-53), so for a quotient below 2^20 it is
/// within 1/8 of the true one, and CorrectedQuotient corrects the truncation.
inline int64_t QuotientByInverse(int64_t num, int64_t den, float inverse) {
  const double estimate = static_cast<double>(num) * static_cast<double>(inverse);
  return CorrectedQuotient(num, den, static_cast<int64_t>(estimate));
}

}  // namespace berth::core
