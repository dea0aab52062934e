#pragma once

// A module's section of berth's configuration as a tree of plain values, without any wire
// format: extender/ turns the file into this tree, and each policy module reads its own section
// from it with the readers below. Every value knows where it sits ("gangs.scheduleTimeoutSeconds",
// "binpack.weights.nvidia.com/gpu"), so errors name the field however the file was written.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/quantity.h"

namespace berth::policy {

/// One value of a settings tree: null, a boolean, an integer, a fraction, a string, a list or a
/// map (keys in the order written). Build a tree in code with the constructors, List and Map,
/// then place it with At, which gives every value its path.
class Settings {
 public:
  enum class Kind : uint8_t { kNull, kBool, kInt, kDouble, kString, kList, kMap };
  using Entry = std::pair<std::string, Settings>;

  Settings() = default;
  Settings(bool b) : kind_(Kind::kBool), int_(b ? 1 : 0) {}  // NOLINT(google-explicit-constructor)
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  Settings(T i) : kind_(Kind::kInt), int_(static_cast<int64_t>(i)) {}  // NOLINT
  Settings(double d) : kind_(Kind::kDouble), double_(d) {}             // NOLINT
  Settings(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}  // NOLINT
  Settings(const char* s) : Settings(std::string(s)) {}                     // NOLINT
  static Settings List(std::vector<Settings> items);
  static Settings Map(std::vector<Entry> entries);

  /// This tree placed at `path` (a section's name, "gangs"): every value below gets its path.
  Settings At(std::string path) &&;

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kDouble; }
  /// Where the value sits, e.g. "gangs.freezeWindowSeconds" or "policies.scores[1]".
  const std::string& path() const { return path_; }

  bool bool_value() const { return int_ != 0; }
  int64_t int_value() const { return int_; }
  /// A number of either kind as a double.
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(int_) : double_; }
  const std::string& string_value() const { return string_; }
  const std::vector<Settings>& items() const { return items_; }
  const std::vector<Entry>& entries() const { return entries_; }

  /// The value under `key` of a map, or nullptr when it is absent or null (an optional field
  /// written as null counts as absent).
  const Settings* Find(std::string_view key) const;
  /// A copy of this map without `key`, for a reader that takes one field of a section and hands
  /// the rest on; CheckKeys still lists `key` as known.
  Settings Without(std::string_view key) const;
  /// Keys another reader took from this map (Without).
  const std::vector<std::string>& taken() const { return taken_; }

  /// The kind in words, as errors say it: "a string", "an object", "a number", ...
  std::string_view TypeName() const;
  /// The value as written, for errors ("-1", "true", "\"x\"").
  std::string Written() const;
  /// InvalidArgument "PATH: what".
  absl::Status Error(std::string_view what) const;
  /// InvalidArgument "PATH.key: what", for a field of this map that is missing or wrong as a
  /// whole ("policies.scores[0].name: required").
  absl::Status ErrorAt(std::string_view key, std::string_view what) const;

 private:
  Kind kind_ = Kind::kNull;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  std::vector<Settings> items_;
  std::vector<Entry> entries_;
  /// Keys of this map another reader took (Without).
  std::vector<std::string> taken_;
  std::string path_;
};

// Readers. Each takes a map and a key; an absent or null field leaves *out as it is (the
// default), a present one must have the right type and range, else the error names the field.

/// Fails unless `section` is a map; null counts as an empty map.
absl::Status ExpectMap(const Settings& section);
/// Fails on the first key of `map` that is not in `known`, listing the known ones.
absl::Status CheckKeys(const Settings& map, std::initializer_list<std::string_view> known);

absl::Status ReadBool(const Settings& map, std::string_view key, bool* out);
absl::Status ReadInt(const Settings& map, std::string_view key, std::optional<int64_t>* out);
absl::Status ReadString(const Settings& map, std::string_view key,
                        std::optional<std::string>* out);
/// A number (integer or fraction) within [min, max].
absl::Status ReadNumber(const Settings& map, std::string_view key, double min, double max,
                        double* out);
/// A number of seconds (integer or fraction) within [min, max].
absl::Status ReadSeconds(const Settings& map, std::string_view key, double min, double max,
                         absl::Duration* out);
/// As ReadSeconds, and 0 turns the feature off (*out becomes zero).
absl::Status ReadSecondsOrZero(const Settings& map, std::string_view key, double min, double max,
                               absl::Duration* out);
/// A list of strings.
absl::Status ReadStringList(const Settings& map, std::string_view key,
                            std::vector<std::string>* out);
/// A Kubernetes quantity ("2", "500m", "8Gi") written as a string or a number, 0 or more.
absl::Status ReadNonNegativeQuantity(const Settings& map, std::string_view key,
                                     std::optional<core::Quantity>* out);
/// A map (or absent: nullptr).
absl::StatusOr<const Settings*> ReadMap(const Settings& map, std::string_view key);
/// One of `choices`, by name; the error lists them ("expected \"warn\" or \"reject\"").
template <class T>
absl::Status ReadChoice(const Settings& map, std::string_view key,
                        std::initializer_list<std::pair<std::string_view, T>> choices, T* out);

/// The error ReadChoice gives for a value not among `names`.
absl::Status ChoiceError(const Settings& value, const std::vector<std::string_view>& names);

template <class T>
absl::Status ReadChoice(const Settings& map, std::string_view key,
                        std::initializer_list<std::pair<std::string_view, T>> choices, T* out) {
  std::optional<std::string> name;
  if (absl::Status s = ReadString(map, key, &name); !s.ok() || !name) return s;
  std::vector<std::string_view> names;
  for (const auto& [n, value] : choices) {
    if (n == *name) {
      *out = value;
      return absl::OkStatus();
    }
    names.push_back(n);
  }
  return ChoiceError(*map.Find(key), names);
}

}  // namespace berth::policy
