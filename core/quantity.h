#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace berth::core {

/// An exact Kubernetes `resource.Quantity`, held as a signed count of nano-units (1e-9), with
/// 128-bit arithmetic. Values whose magnitude does not fit are rejected at parse time (see Parse).
///
/// The representable range from Parse is |value| <= 9223372036854775807 whole units, so Value()
/// of a parsed quantity always fits an int64; FromValue() additionally accepts INT64_MIN.
class Quantity {
 public:
  /// Parses the Kubernetes quantity grammar: [+-]? digits [. digits]? suffix, also ".5", "5." and
  /// "1.G".
  ///
  /// Suffixes (case-sensitive): decimal SI n u m "" k M G T P E; binary SI Ki Mi Gi Ti Pi Ei;
  /// decimal exponent e<int>/E<int> (optionally signed integer exponent, e.g. "1e3", "12e-1",
  /// "1E+2"). The suffix is looked up as decimal SI first, then binary SI, then as an exponent, so
  /// "1E" is 10^18 but "1E3" is 1000. Exponents beyond +-10000 are clamped to +-10000, which does
  /// not change the outcome (any non-zero value is then out of range or rounds to 1n).
  ///
  /// Invalid: "", "1K", "1ki", "1KI", "1e", "1.2.3", "abc", "--1", "1 G", "0x10", "1Gi5", "e3",
  /// ".", "+", "NaN", "inf".
  ///
  /// Leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r) is trimmed first, as
  /// Kubernetes does when decoding JSON; whitespace inside the text is an error.
  ///
  /// Precision is 1n: anything finer is rounded up away from zero ("0.1n" -> 1n, "-0.1n" -> -1n).
  /// Magnitudes above 2^63-1 whole units (Value() would not fit int64) are rejected with an
  /// "out of range" error. Inputs longer than 128 characters (counted before trimming) are
  /// rejected up front, so parsing cost is bounded.
  ///
  /// Errors are absl::InvalidArgumentError with a message that quotes the input (C-escaped, and
  /// cut to its first 32 characters for over-long inputs) and says what was expected, e.g.
  /// `invalid quantity "1K": unknown suffix "K" (expected one of n u m k M G T P E Ki Mi Gi Ti Pi
  /// Ei or an exponent e<int>)`.
  static absl::StatusOr<Quantity> Parse(std::string_view text);

  /// Builds a quantity from an integer number of whole units.
  static Quantity FromValue(int64_t units);
  /// Builds a quantity from an integer number of milli-units (1e-3).
  static Quantity FromMilli(int64_t milli);

  /// ceil(value * 1000), rounded toward +infinity (so "-0.5m" gives 0, "0.25m" gives 1);
  /// saturates to INT64_MAX / INT64_MIN if the result does not fit.
  int64_t MilliValue() const;
  /// ceil(value), rounded toward +infinity (so "-500m" gives 0, "1.5" gives 2); saturates
  /// likewise. This is what kube-scheduler uses for memory, storage, pods and extended resources.
  int64_t Value() const;
  /// MilliValue() and Value() when the result fits an int64 (no saturation); nullopt otherwise,
  /// so that a caller can refuse a value it would otherwise hold 1000x too small
  /// ("9223372036854775807" cores is 1000x more millicores than an int64 holds).
  std::optional<int64_t> ExactMilliValue() const;
  std::optional<int64_t> ExactValue() const;
  /// True when the value is strictly below zero.
  bool IsNegative() const;
  /// True when the value is exactly zero.
  bool IsZero() const;
  /// True when the exact value is a whole number.
  bool IsInteger() const;
  /// Canonical text, for logs and tests: whole numbers as plain integers ("2", "1073741824",
  /// "-3"); otherwise the decimal form with the largest exact suffix among m, u, n ("1500m",
  /// "250u", "1n", "-500m"). Binary suffixes are never produced.
  std::string DebugString() const;

  friend bool operator==(const Quantity&, const Quantity&) = default;

 private:
  // `__int128` spelled through `__extension__` so that -Wpedantic builds accept it.
  __extension__ typedef __int128 Int128;

  explicit Quantity(Int128 nanos) : nanos_(nanos) {}

  /// Signed count of nano-units.
  Int128 nanos_ = 0;
};

/// Kubernetes text for an amount of milli-units: "1500m", or "2" when it is whole ("2000" -> "2").
std::string FormatMilli(int64_t milli);

/// Kubernetes text for an amount of whole units: the largest binary suffix that is exact when the
/// magnitude is a multiple of 1Ki (1073741824 -> "1Gi", 1536*1048576 -> "1536Mi",
/// -2048 -> "-2Ki"), otherwise the plain integer (1000 -> "1000", 0 -> "0").
std::string FormatUnits(int64_t units);

}  // namespace berth::core
