#include "core/quantity.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/text.h"
#include "tests/testing/core_builders.h"

namespace berth::core {
namespace {

using testing::kInt64Max;
using testing::kInt64Min;

using berth::testing::Contains;

// Parses `text` and fails the test if it is not accepted.
Quantity MustParse(std::string_view text) {
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  INFO("input: \"" << std::string(text) << "\" status: " << q.status().ToString());
  REQUIRE(q.ok());
  return *q;
}

// Parses `text`, requires an InvalidArgument error and returns its message.
std::string MustFail(std::string_view text) {
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  INFO("input: \"" << std::string(text) << "\"");
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(q.status().message());
}

struct ValueCase {
  std::string_view text;
  int64_t milli;
  int64_t value;
};

TEST_CASE("Quantity::Parse reference table", "[quantity]") {
  const std::vector<ValueCase> cases = {
      {"500m", 500, 1},
      {"1.5", 1500, 2},
      {"2", 2000, 2},
      {"100M", 100000000000, 100000000},
      {"1Gi", 1073741824000, 1073741824},
      {"1.5Gi", 1610612736000, 1610612736},
      {"125952Ki", 128974848000, 128974848},
      {"1e3", 1000000, 1000},
      {"1E3", 1000000, 1000},
      {"250u", 1, 1},
      {"0.1n", 1, 1},
      {"-1", -1000, -1},
      {"-500m", -500, 0},
      {"+3", 3000, 3},
      {".5", 500, 1},
      {"5.", 5000, 5},
      {"1.G", 1000000000000, 1000000000},
      {"0", 0, 0},
      {"12e-1", 1200, 2},
  };
  for (const ValueCase& c : cases) {
    SECTION(std::string(c.text)) {
      Quantity q = MustParse(c.text);
      CHECK(q.MilliValue() == c.milli);
      CHECK(q.Value() == c.value);
    }
  }
}

TEST_CASE("Quantity::Parse decimal SI suffixes", "[quantity]") {
  CHECK(MustParse("1n").DebugString() == "1n");
  CHECK(MustParse("1u").DebugString() == "1u");
  CHECK(MustParse("1m").MilliValue() == 1);
  CHECK(MustParse("1").Value() == 1);
  CHECK(MustParse("1k").Value() == 1000);
  CHECK(MustParse("1M").Value() == 1000000);
  CHECK(MustParse("1G").Value() == 1000000000);
  CHECK(MustParse("1T").Value() == 1000000000000);
  CHECK(MustParse("1P").Value() == 1000000000000000);
  CHECK(MustParse("1E").Value() == 1000000000000000000);
  CHECK(MustParse("9E").Value() == 9000000000000000000);
  CHECK(MustParse("1n").MilliValue() == 1);
  CHECK(MustParse("1n").Value() == 1);
  CHECK(MustParse("999999999n").Value() == 1);
  CHECK(MustParse("1000000000n").Value() == 1);
  CHECK(MustParse("1000000001n").Value() == 2);
  CHECK(MustParse("1500000u").MilliValue() == 1500);
}

TEST_CASE("Quantity::Parse binary SI suffixes", "[quantity]") {
  CHECK(MustParse("1Ki").Value() == 1024);
  CHECK(MustParse("1Mi").Value() == 1048576);
  CHECK(MustParse("1Gi").Value() == 1073741824);
  CHECK(MustParse("1Ti").Value() == 1099511627776);
  CHECK(MustParse("1Pi").Value() == 1125899906842624);
  CHECK(MustParse("1Ei").Value() == 1152921504606846976);
  CHECK(MustParse("7Ei").Value() == 8070450532247928832);
  CHECK(MustParse("0.5Ki").Value() == 512);
  CHECK(MustParse("0.1Ki").MilliValue() == 102400);
  CHECK(MustParse("0.1Ki").Value() == 103);
  CHECK(MustParse("0.001Ki").MilliValue() == 1024);
  // 1e-12 * 1024 = 1.024n, rounded up to 2n.
  CHECK(MustParse("0.000000000001Ki").DebugString() == "2n");
  CHECK(MustParse("-0.000000000001Ki").DebugString() == "-2n");
  CHECK(MustParse("1.5Mi") == MustParse("1536Ki"));
}

TEST_CASE("Quantity::Parse decimal exponents", "[quantity]") {
  CHECK(MustParse("1e0").Value() == 1);
  CHECK(MustParse("1e+3").Value() == 1000);
  CHECK(MustParse("1E+3").Value() == 1000);
  CHECK(MustParse("1e-3").MilliValue() == 1);
  CHECK(MustParse("1E-3").DebugString() == "1m");
  CHECK(MustParse("1e18") == MustParse("1E"));
  CHECK(MustParse("1e3") == MustParse("1k"));
  CHECK(MustParse("1e9").Value() == 1000000000);
  CHECK(MustParse("15e-1").MilliValue() == 1500);
  CHECK(MustParse("00.5e1").Value() == 5);
  CHECK(MustParse("1e003").Value() == 1000);
  CHECK(MustParse("1e-9").DebugString() == "1n");

  SECTION("tiny exponents round up to 1n away from zero") {
    CHECK(MustParse("1e-30").DebugString() == "1n");
    CHECK(MustParse("-1e-30").DebugString() == "-1n");
    CHECK(MustParse("1e-10").DebugString() == "1n");
    CHECK(MustParse("1e-99999999999999999999").DebugString() == "1n");
    CHECK(MustParse("1e-30").MilliValue() == 1);
    CHECK(MustParse("1e-30").Value() == 1);
    CHECK(MustParse("-1e-30").Value() == 0);
    CHECK(MustParse("-1e-30").MilliValue() == 0);
  }
  SECTION("zero with any exponent is zero") {
    CHECK(MustParse("0e999999").IsZero());
    CHECK(MustParse("0e-999999").IsZero());
    CHECK(MustParse("0.000e30").IsZero());
  }
  SECTION("huge exponents are out of range") {
    CHECK(Contains(MustFail("1e30"), "out of range"));
    CHECK(Contains(MustFail("1e19"), "out of range"));
    CHECK(Contains(MustFail("-1e30"), "out of range"));
    CHECK(Contains(MustFail("1e99999999999999999999999"), "out of range"));
    CHECK(Contains(MustFail("0.000000001e28"), "out of range"));
  }
}

TEST_CASE("Quantity::Parse rounding below 1n", "[quantity]") {
  CHECK(MustParse("0.1n").DebugString() == "1n");
  CHECK(MustParse("-0.1n").DebugString() == "-1n");
  CHECK(MustParse("-0.1n").IsNegative());
  CHECK(MustParse("-0.1n").MilliValue() == 0);
  CHECK(MustParse("-0.1n").Value() == 0);
  CHECK(MustParse("0.0000000001").DebugString() == "1n");
  CHECK(MustParse("0.000000001").DebugString() == "1n");
  CHECK(MustParse("0.0000000011").DebugString() == "2n");
  CHECK(MustParse("1.1n").DebugString() == "2n");
  CHECK(MustParse("1.0n").DebugString() == "1n");
  CHECK(MustParse("1.0000000001").DebugString() == "1000000001n");
  CHECK(MustParse("0.5u").DebugString() == "500n");
  CHECK(MustParse("0.0000005u").DebugString() == "1n");
  CHECK(MustParse("0.0n").IsZero());
}

TEST_CASE("Quantity::Parse accepts leading zeros and surrounding whitespace", "[quantity]") {
  CHECK(MustParse("007").Value() == 7);
  CHECK(MustParse("0.500").MilliValue() == 500);
  CHECK(MustParse("000.000").IsZero());
  CHECK(MustParse("00001Gi").Value() == 1073741824);
  CHECK(MustParse(" 1Gi ").Value() == 1073741824);
  CHECK(MustParse("  500m").MilliValue() == 500);
  CHECK(MustParse("\t500m\n").MilliValue() == 500);
  CHECK(MustParse("2 ") == MustParse("2"));
}

TEST_CASE("Quantity::Parse range limits", "[quantity]") {
  SECTION("INT64_MAX whole units is accepted") {
    Quantity q = MustParse("9223372036854775807");
    CHECK(q.Value() == kInt64Max);
    CHECK(q.MilliValue() == kInt64Max);  // Saturated.
    CHECK(q.DebugString() == "9223372036854775807");
  }
  SECTION("negative INT64_MAX whole units is accepted") {
    Quantity q = MustParse("-9223372036854775807");
    CHECK(q.Value() == -9223372036854775807);
    CHECK(q.MilliValue() == kInt64Min);  // Saturated.
    CHECK(q.DebugString() == "-9223372036854775807");
  }
  SECTION("exact limit written with other suffixes") {
    CHECK(MustParse("9223372036854775807000m").Value() == kInt64Max);
    CHECK(MustParse("9223372036854775806.5").Value() == kInt64Max);
    CHECK(MustParse("9223372036854775806.000000001").Value() == kInt64Max);
  }
  SECTION("just above the limit is rejected") {
    CHECK(Contains(MustFail("9223372036854775808"), "out of range"));
    CHECK(Contains(MustFail("-9223372036854775808"), "out of range"));
    CHECK(Contains(MustFail("9223372036854775807.000000001"), "out of range"));
    CHECK(Contains(MustFail("9223372036854775807001m"), "out of range"));
    CHECK(Contains(MustFail("9223372036854775807.0000000001"), "out of range"));
    CHECK(Contains(MustFail("9.223372036854775808E"), "out of range"));
    CHECK(Contains(MustFail("10E"), "out of range"));
  }
  SECTION("binary suffixes") {
    CHECK(MustParse("1Ei").Value() == 1152921504606846976);
    CHECK(MustParse("1Ei").MilliValue() == kInt64Max);  // Saturated.
    CHECK(MustParse("-7Ei").Value() == -8070450532247928832);
    CHECK(Contains(MustFail("8Ei"), "out of range"));
    CHECK(Contains(MustFail("-8Ei"), "out of range"));
    CHECK(Contains(MustFail("8192Pi"), "out of range"));
    CHECK(MustParse("8191Pi").Value() == 9222246136947933184);
  }
  SECTION("1E saturates MilliValue") {
    Quantity q = MustParse("1E");
    CHECK(q.Value() == 1000000000000000000);
    CHECK(q.MilliValue() == kInt64Max);
    CHECK(MustParse("-1E").MilliValue() == kInt64Min);
  }
  SECTION("out-of-range message names the input") {
    std::string message = MustFail("8Ei");
    CHECK(Contains(message, "\"8Ei\""));
    CHECK(Contains(message, "9223372036854775807"));
  }
}

TEST_CASE("Quantity::Parse length limit", "[quantity]") {
  SECTION("200 characters are rejected") {
    std::string message = MustFail(std::string(200, '1'));
    CHECK(Contains(message, "200 characters"));
    CHECK(Contains(message, "128"));
    CHECK(Contains(message, std::string(32, '1') + "...\""));
    CHECK_FALSE(Contains(message, std::string(33, '1')));
  }
  SECTION("10000 fraction digits are rejected") {
    std::string text = "0." + std::string(10000, '0') + "1";
    CHECK(Contains(MustFail(text), "128-character limit"));
  }
  SECTION("129 characters are rejected") {
    std::string text = "1." + std::string(127, '0');
    REQUIRE(text.size() == 129);
    CHECK(Contains(MustFail(text), "128-character limit"));
  }
  SECTION("128 characters are accepted") {
    std::string whole = "1." + std::string(126, '0');
    REQUIRE(whole.size() == 128);
    CHECK(MustParse(whole).Value() == 1);
    CHECK(MustParse(whole).IsInteger());

    std::string tiny = "0." + std::string(125, '0') + "1";
    REQUIRE(tiny.size() == 128);
    CHECK(MustParse(tiny).DebugString() == "1n");

    std::string tiny_binary = "0." + std::string(123, '0') + "1Ei";
    REQUIRE(tiny_binary.size() == 128);
    CHECK(MustParse(tiny_binary).DebugString() == "1n");
  }
  SECTION("128 digits are parsed but out of range") {
    CHECK(Contains(MustFail(std::string(128, '9')), "out of range"));
  }
}

TEST_CASE("Quantity::Parse rejects invalid forms", "[quantity]") {
  const std::vector<std::string_view> invalid = {
      "",     "1K",   "1ki", "1KI", "1e",  "1.2.3", "abc",  "--1",  "1 G",    "0x10",
      "1Gi5", "e3",   ".",   "+",   "NaN", "inf",   "1e+",  "1E+",  "1e-",    "1e3.5",
      "1m5",  "++1",  "+-1", "-",   "-.",  "1,000", "Ki",   "1i",   "1e3e3",  "- 1",
      "1.5.", "1KiB", "1mi", "1gi", "1EE", "1ee3",  "1e 3", "1 Gi", "1Gi Gi", "m",
  };
  for (std::string_view text : invalid) {
    SECTION("input \"" + std::string(text) + "\"") {
      std::string message = MustFail(text);
      INFO("message: " << message);
      CHECK(Contains(message, "invalid quantity \"" + std::string(text) + "\""));
    }
  }
}

TEST_CASE("Quantity::Parse error messages", "[quantity]") {
  CHECK(MustFail("1K") ==
        "invalid quantity \"1K\": unknown suffix \"K\" (expected one of n u m k M G T P E Ki Mi Gi "
        "Ti Pi Ei or an exponent e<int>)");
  CHECK(Contains(MustFail("1e"), "unknown suffix \"e\""));
  CHECK(Contains(MustFail("1.2.3"), "unknown suffix \".3\""));
  CHECK(Contains(MustFail("1 G"), "unknown suffix \" G\""));
  CHECK(Contains(MustFail("abc"), "expected a number"));
  CHECK(Contains(MustFail("."), "expected a number"));
  CHECK(Contains(MustFail(""), "empty"));
  CHECK(Contains(MustFail("   "), "empty"));
  // Control and non-ASCII characters are escaped so the message stays on one line.
  CHECK(Contains(MustFail("1\t2"), "\"1\\t2\""));
  CHECK(Contains(MustFail("\xef\xbc\x91"), "\"\\357\\274\\221\""));  // Fullwidth 1.
}

TEST_CASE("Quantity::IsInteger, IsZero and IsNegative", "[quantity]") {
  CHECK(MustParse("2").IsInteger());
  CHECK(MustParse("1Gi").IsInteger());
  CHECK(MustParse("0.5Ki").IsInteger());
  CHECK(MustParse("1E").IsInteger());
  CHECK(MustParse("-3").IsInteger());
  CHECK(MustParse("0").IsInteger());
  CHECK(MustParse("2000m").IsInteger());
  CHECK_FALSE(MustParse("1.5").IsInteger());
  CHECK_FALSE(MustParse("1n").IsInteger());
  CHECK_FALSE(MustParse("-500m").IsInteger());
  CHECK_FALSE(MustParse("1.000000001").IsInteger());
  CHECK_FALSE(MustParse("0.1Ki").IsInteger());

  CHECK(MustParse("0").IsZero());
  CHECK(MustParse("-0").IsZero());
  CHECK(MustParse("0Gi").IsZero());
  CHECK_FALSE(MustParse("-0").IsNegative());
  CHECK(MustParse("-0") == MustParse("0"));
  CHECK_FALSE(MustParse("1n").IsZero());
  CHECK(MustParse("-1n").IsNegative());
  CHECK(MustParse("-1").IsNegative());
  CHECK_FALSE(MustParse("1").IsNegative());
  CHECK_FALSE(MustParse("0").IsNegative());
}

TEST_CASE("Quantity::DebugString", "[quantity]") {
  CHECK(MustParse("1500m").DebugString() == "1500m");
  CHECK(MustParse("1.5").DebugString() == "1500m");
  CHECK(MustParse("500m").DebugString() == "500m");
  CHECK(MustParse("-500m").DebugString() == "-500m");
  CHECK(MustParse("2").DebugString() == "2");
  CHECK(MustParse("2000m").DebugString() == "2");
  CHECK(MustParse("-3").DebugString() == "-3");
  CHECK(MustParse("0").DebugString() == "0");
  CHECK(MustParse("-0").DebugString() == "0");
  CHECK(MustParse("250u").DebugString() == "250u");
  CHECK(MustParse("0.0015").DebugString() == "1500u");
  CHECK(MustParse("1.000001").DebugString() == "1000001u");
  CHECK(MustParse("1n").DebugString() == "1n");
  CHECK(MustParse("1Gi").DebugString() == "1073741824");
  CHECK(MustParse("1.5Ki").DebugString() == "1536");
  CHECK(MustParse("1E").DebugString() == "1000000000000000000");
  CHECK(MustParse("100M").DebugString() == "100000000");
  CHECK(MustParse("9223372036854775806.5").DebugString() == "9223372036854775806500m");
}

TEST_CASE("Quantity::FromValue and FromMilli", "[quantity]") {
  SECTION("FromValue") {
    CHECK(Quantity::FromValue(5).Value() == 5);
    CHECK(Quantity::FromValue(5).MilliValue() == 5000);
    CHECK(Quantity::FromValue(-7).Value() == -7);
    CHECK(Quantity::FromValue(-7).MilliValue() == -7000);
    CHECK(Quantity::FromValue(0).IsZero());
    CHECK(Quantity::FromValue(2) == MustParse("2"));
    CHECK(Quantity::FromValue(1073741824) == MustParse("1Gi"));
    CHECK(Quantity::FromValue(1000) == MustParse("1k"));
    CHECK(Quantity::FromValue(3).DebugString() == "3");
    CHECK(Quantity::FromValue(3).IsInteger());
    CHECK(Quantity::FromValue(kInt64Max).Value() == kInt64Max);
    CHECK(Quantity::FromValue(kInt64Max).MilliValue() == kInt64Max);
    CHECK(Quantity::FromValue(kInt64Max) == MustParse("9223372036854775807"));
    CHECK(Quantity::FromValue(kInt64Min).Value() == kInt64Min);
    CHECK(Quantity::FromValue(kInt64Min).MilliValue() == kInt64Min);
    CHECK(Quantity::FromValue(kInt64Min).DebugString() == "-9223372036854775808");
  }
  SECTION("FromMilli") {
    CHECK(Quantity::FromMilli(1500).MilliValue() == 1500);
    CHECK(Quantity::FromMilli(1500).Value() == 2);
    CHECK(Quantity::FromMilli(-1500).MilliValue() == -1500);
    CHECK(Quantity::FromMilli(-1500).Value() == -1);
    CHECK(Quantity::FromMilli(1500) == MustParse("1500m"));
    CHECK(Quantity::FromMilli(1500) == MustParse("1.5"));
    CHECK(Quantity::FromMilli(2000) == Quantity::FromValue(2));
    CHECK_FALSE(Quantity::FromMilli(2001) == Quantity::FromValue(2));
    CHECK(Quantity::FromMilli(1).DebugString() == "1m");
    CHECK(Quantity::FromMilli(kInt64Max).MilliValue() == kInt64Max);
    CHECK(Quantity::FromMilli(kInt64Max).Value() == 9223372036854776);
    CHECK(Quantity::FromMilli(kInt64Min).MilliValue() == kInt64Min);
    CHECK(Quantity::FromMilli(kInt64Min).Value() == -9223372036854775);
  }
  SECTION("round trips through text") {
    for (int64_t milli : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{999}, int64_t{1500},
                          int64_t{-2500}, int64_t{123456789}, kInt64Max, kInt64Min}) {
      INFO("milli: " << milli);
      Quantity q = Quantity::FromMilli(milli);
      CHECK(MustParse(FormatMilli(milli)) == q);
      CHECK(MustParse(q.DebugString()) == q);
    }
    for (int64_t units : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{1000}, int64_t{1024},
                          int64_t{1610612736}, int64_t{-2048}, kInt64Max}) {
      INFO("units: " << units);
      Quantity q = Quantity::FromValue(units);
      CHECK(MustParse(FormatUnits(units)) == q);
      CHECK(MustParse(q.DebugString()) == q);
    }
  }
}

TEST_CASE("FormatMilli", "[quantity]") {
  CHECK(FormatMilli(1500) == "1500m");
  CHECK(FormatMilli(2000) == "2");
  CHECK(FormatMilli(0) == "0");
  CHECK(FormatMilli(1) == "1m");
  CHECK(FormatMilli(999) == "999m");
  CHECK(FormatMilli(-500) == "-500m");
  CHECK(FormatMilli(-2000) == "-2");
  CHECK(FormatMilli(100000) == "100");
  CHECK(FormatMilli(kInt64Max) == "9223372036854775807m");
  CHECK(FormatMilli(kInt64Min) == "-9223372036854775808m");
}

TEST_CASE("FormatUnits", "[quantity]") {
  CHECK(FormatUnits(1073741824) == "1Gi");
  CHECK(FormatUnits(1536LL * 1048576) == "1536Mi");
  CHECK(FormatUnits(1000) == "1000");
  CHECK(FormatUnits(0) == "0");
  CHECK(FormatUnits(1) == "1");
  CHECK(FormatUnits(512) == "512");
  CHECK(FormatUnits(1023) == "1023");
  CHECK(FormatUnits(1024) == "1Ki");
  CHECK(FormatUnits(1536) == "1536");
  CHECK(FormatUnits(2048) == "2Ki");
  CHECK(FormatUnits(1048576) == "1Mi");
  CHECK(FormatUnits(128974848) == "123Mi");
  CHECK(FormatUnits(1048576000) == "1000Mi");
  CHECK(FormatUnits(1099511627776) == "1Ti");
  CHECK(FormatUnits(3298534883328) == "3Ti");
  CHECK(FormatUnits(1125899906842624) == "1Pi");
  CHECK(FormatUnits(1152921504606846976) == "1Ei");
  CHECK(FormatUnits(4611686018427387904) == "4Ei");
  CHECK(FormatUnits(-2048) == "-2Ki");
  CHECK(FormatUnits(-1000) == "-1000");
  CHECK(FormatUnits(kInt64Max) == "9223372036854775807");
  CHECK(FormatUnits(kInt64Min) == "-8Ei");
}

}  // namespace
}  // namespace berth::core
