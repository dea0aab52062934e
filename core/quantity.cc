#include "core/quantity.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace berth::core {
namespace {

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

constexpr Int128 kNanosPerUnit = 1'000'000'000;
constexpr Int128 kNanosPerMilli = 1'000'000;
constexpr Int128 kNanosPerMicro = 1'000;
constexpr int kNanoExponent = 9;  // 1 unit = 10^9 nano-units.

// Largest accepted magnitude: INT64_MAX whole units, in nano-units (about 9.22e27).
constexpr Int128 kMaxNanos =
    static_cast<Int128>(std::numeric_limits<int64_t>::max()) * kNanosPerUnit;
// Decimal digits of kMaxNanos; any integer with more digits is out of range.
constexpr size_t kMaxNanosDigits = 28;

constexpr size_t kMaxInputLength = 128;
// Number of leading characters of an over-long input quoted in its error message.
constexpr size_t kQuotedPrefixLength = 32;
// Exponents are clamped to this magnitude; beyond it every non-zero value is out of range (large
// positive) or rounds to 1n (large negative), and the clamp keeps exponent arithmetic in `int`.
constexpr int kMaxExponentMagnitude = 10000;

constexpr std::string_view kExpectedSuffixes =
    "expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent e<int>";

// absl in this toolchain has its own string_view type, distinct from std::string_view.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

/// Trims leading and trailing ASCII whitespace.
std::string_view TrimAsciiWhitespace(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

/// A suffix multiplier: 10^decimal_exponent * 2^binary_exponent.
struct Multiplier {
  int decimal_exponent = 0;
  int binary_exponent = 0;
};

std::optional<int> ParseExponent(std::string_view digits_with_sign) {
  std::string_view s = digits_with_sign;
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  int value = 0;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    if (value < kMaxExponentMagnitude) value = value * 10 + (c - '0');
  }
  if (value > kMaxExponentMagnitude) value = kMaxExponentMagnitude;
  return negative ? -value : value;
}

/// Looks the suffix up as decimal SI, then binary SI, then as a decimal exponent.
std::optional<Multiplier> LookupSuffix(std::string_view suffix) {
  struct Entry {
    std::string_view name;
    Multiplier multiplier;
  };
  static constexpr Entry kTable[] = {
      // Decimal SI.
      {"n", {-9, 0}},
      {"u", {-6, 0}},
      {"m", {-3, 0}},
      {"", {0, 0}},
      {"k", {3, 0}},
      {"M", {6, 0}},
      {"G", {9, 0}},
      {"T", {12, 0}},
      {"P", {15, 0}},
      {"E", {18, 0}},
      // Binary SI.
      {"Ki", {0, 10}},
      {"Mi", {0, 20}},
      {"Gi", {0, 30}},
      {"Ti", {0, 40}},
      {"Pi", {0, 50}},
      {"Ei", {0, 60}},
  };
  for (const Entry& entry : kTable) {
    if (entry.name == suffix) return entry.multiplier;
  }
  if (suffix.size() > 1 && (suffix.front() == 'e' || suffix.front() == 'E')) {
    std::optional<int> exponent = ParseExponent(suffix.substr(1));
    if (exponent.has_value()) return Multiplier{*exponent, 0};
  }
  return std::nullopt;
}

/// Multiplies a big-endian string of decimal digits in place by a small factor.
void MultiplyDigits(std::string& digits, int factor) {
  int carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    int product = (digits[i] - '0') * factor + carry;
    digits[i] = static_cast<char>('0' + product % 10);
    carry = product / 10;
  }
  std::string prefix;
  while (carry > 0) {
    prefix.insert(prefix.begin(), static_cast<char>('0' + carry % 10));
    carry /= 10;
  }
  digits.insert(0, prefix);
}

/// Converts at most kMaxNanosDigits decimal digits (no sign) to an integer; cannot overflow.
Int128 DigitsToInt(std::string_view digits) {
  Int128 value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

std::string Int128ToString(Int128 value) {
  if (value == 0) return "0";
  UInt128 magnitude = value < 0 ? -static_cast<UInt128>(value) : static_cast<UInt128>(value);
  std::string out;
  while (magnitude > 0) {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  }
  if (value < 0) out.insert(out.begin(), '-');
  return out;
}

/// ceil(numerator / denominator) for denominator > 0, saturated to int64.
Int128 CeilDiv(Int128 numerator, Int128 denominator) {
  Int128 quotient = numerator / denominator;
  if (numerator % denominator > 0) ++quotient;
  return quotient;
}

int64_t CeilDivSaturated(Int128 numerator, Int128 denominator) {
  const Int128 quotient = CeilDiv(numerator, denominator);
  if (quotient > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (quotient < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(quotient);
}

std::optional<int64_t> CeilDivExact(Int128 numerator, Int128 denominator) {
  const Int128 quotient = CeilDiv(numerator, denominator);
  if (quotient > std::numeric_limits<int64_t>::max() ||
      quotient < std::numeric_limits<int64_t>::min()) {
    return std::nullopt;
  }
  return static_cast<int64_t>(quotient);
}

std::string Quote(std::string_view text) {
  if (text.size() > kMaxInputLength) {
    return absl::StrCat("\"", absl::CEscape(AsAbsl(text.substr(0, kQuotedPrefixLength))), "...\"");
  }
  return absl::StrCat("\"", absl::CEscape(AsAbsl(text)), "\"");
}

absl::Status Invalid(std::string_view text, std::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid quantity ", Quote(text), ": ", AsAbsl(reason)));
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(std::string_view text) {
  if (text.size() > kMaxInputLength) {
    return Invalid(text, absl::StrCat("input is ", text.size(), " characters long, more than the ",
                                      kMaxInputLength, "-character limit"));
  }
  std::string_view s = TrimAsciiWhitespace(text);
  if (s.empty()) {
    return Invalid(text, "empty string (expected a number such as \"1\", \"500m\" or \"1Gi\")");
  }

  // [+-]? digits [. digits]?
  size_t pos = 0;
  bool negative = false;
  if (s[pos] == '+' || s[pos] == '-') {
    negative = s[pos] == '-';
    ++pos;
  }
  size_t integer_start = pos;
  while (pos < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  std::string_view integer_digits = s.substr(integer_start, pos - integer_start);
  std::string_view fraction_digits;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t fraction_start = pos;
    while (pos < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
    fraction_digits = s.substr(fraction_start, pos - fraction_start);
  }
  if (integer_digits.empty() && fraction_digits.empty()) {
    return Invalid(text,
                   "expected a number: an optional sign, digits with an optional decimal point, "
                   "then an optional suffix");
  }
  std::string_view suffix = s.substr(pos);
  std::optional<Multiplier> multiplier = LookupSuffix(suffix);
  if (!multiplier.has_value()) {
    return Invalid(
        text, absl::StrCat("unknown suffix ", Quote(suffix), " (", AsAbsl(kExpectedSuffixes), ")"));
  }

  // The magnitude in nano-units is mantissa * 10^exponent10 * 2^binary_exponent, where the mantissa
  // is the digit string I followed by F.
  std::string mantissa = absl::StrCat(AsAbsl(integer_digits), AsAbsl(fraction_digits));
  size_t first_nonzero = mantissa.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return Quantity(0);
  mantissa.erase(0, first_nonzero);
  int exponent10 =
      kNanoExponent - static_cast<int>(fraction_digits.size()) + multiplier->decimal_exponent;
  for (int shift = 0; shift < multiplier->binary_exponent; shift += 10) {
    MultiplyDigits(mantissa, 1024);
  }

  const std::string out_of_range =
      absl::StrCat("out of range (the magnitude must be at most ",
                   std::numeric_limits<int64_t>::max(), " whole units)");
  std::string_view whole;  // Whole nano-units, as decimal digits.
  bool round_up = false;
  if (exponent10 >= 0) {
    if (mantissa.size() + static_cast<size_t>(exponent10) > kMaxNanosDigits) {
      return Invalid(text, out_of_range);
    }
    mantissa.append(static_cast<size_t>(exponent10), '0');
    whole = mantissa;
  } else {
    // Below 1n: keep the whole nano-units and round any non-zero remainder up, away from zero.
    size_t dropped = static_cast<size_t>(-exponent10);
    if (dropped >= mantissa.size()) {
      whole = std::string_view();
      round_up = true;  // The mantissa has a non-zero leading digit.
    } else {
      whole = std::string_view(mantissa).substr(0, mantissa.size() - dropped);
      round_up = std::string_view(mantissa).substr(whole.size()).find_first_not_of('0') !=
                 std::string_view::npos;
    }
    if (whole.size() > kMaxNanosDigits) return Invalid(text, out_of_range);
  }
  Int128 nanos = DigitsToInt(whole) + (round_up ? 1 : 0);
  if (nanos > kMaxNanos) return Invalid(text, out_of_range);
  return Quantity(negative ? -nanos : nanos);
}

Quantity Quantity::FromValue(int64_t units) {
  return Quantity(static_cast<Int128>(units) * kNanosPerUnit);
}

Quantity Quantity::FromMilli(int64_t milli) {
  return Quantity(static_cast<Int128>(milli) * kNanosPerMilli);
}

int64_t Quantity::MilliValue() const { return CeilDivSaturated(nanos_, kNanosPerMilli); }

int64_t Quantity::Value() const { return CeilDivSaturated(nanos_, kNanosPerUnit); }

std::optional<int64_t> Quantity::ExactMilliValue() const {
  return CeilDivExact(nanos_, kNanosPerMilli);
}

std::optional<int64_t> Quantity::ExactValue() const { return CeilDivExact(nanos_, kNanosPerUnit); }

bool Quantity::IsNegative() const { return nanos_ < 0; }

bool Quantity::IsZero() const { return nanos_ == 0; }

bool Quantity::IsInteger() const { return nanos_ % kNanosPerUnit == 0; }

std::string Quantity::DebugString() const {
  if (nanos_ % kNanosPerUnit == 0) return Int128ToString(nanos_ / kNanosPerUnit);
  if (nanos_ % kNanosPerMilli == 0)
    return absl::StrCat(Int128ToString(nanos_ / kNanosPerMilli), "m");
  if (nanos_ % kNanosPerMicro == 0)
    return absl::StrCat(Int128ToString(nanos_ / kNanosPerMicro), "u");
  return absl::StrCat(Int128ToString(nanos_), "n");
}

std::string FormatMilli(int64_t milli) {
  if (milli % 1000 == 0) return absl::StrCat(milli / 1000);
  return absl::StrCat(milli, "m");
}

std::string FormatUnits(int64_t units) {
  static constexpr std::string_view kBinarySuffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (units == 0) return "0";
  for (int i = 6; i >= 1; --i) {
    const int64_t scale = int64_t{1} << (10 * i);
    if (units % scale == 0) return absl::StrCat(units / scale, AsAbsl(kBinarySuffixes[i - 1]));
  }
  return absl::StrCat(units);
}

}  // namespace berth::core
