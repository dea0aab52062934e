#include "policy/settings.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "core/strings.h"

namespace berth::policy {

Settings Settings::List(std::vector<Settings> items) {
  Settings s;
  s.kind_ = Kind::kList;
  s.items_ = std::move(items);
  return s;
}

Settings Settings::Map(std::vector<Entry> entries) {
  Settings s;
  s.kind_ = Kind::kMap;
  s.entries_ = std::move(entries);
  return s;
}

Settings Settings::At(std::string path) && {
  path_ = std::move(path);
  for (size_t i = 0; i < items_.size(); ++i) {
    items_[i] = std::move(items_[i]).At(StrCat(path_, "[", i, "]"));
  }
  for (auto& [key, value] : entries_) {
    value = std::move(value).At(path_.empty() ? key : StrCat(path_, ".", key));
  }
  return std::move(*this);
}

const Settings* Settings::Find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return v.is_null() ? nullptr : &v;
  }
  return nullptr;
}

Settings Settings::Without(std::string_view key) const {
  Settings out = *this;
  std::erase_if(out.entries_, [&](const Entry& e) { return e.first == key; });
  out.taken_.emplace_back(key);
  return out;
}

std::string_view Settings::TypeName() const {
  switch (kind_) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "a boolean";
    case Kind::kInt:
    case Kind::kDouble: return "a number";
    case Kind::kString: return "a string";
    case Kind::kList: return "an array";
    case Kind::kMap: return "an object";
  }
  return "an unknown value";
}

std::string Settings::Written() const {
  switch (kind_) {
    case Kind::kNull: return "null";
    case Kind::kBool: return bool_value() ? "true" : "false";
    case Kind::kInt: return StrCat(int_);
    case Kind::kDouble: return StrCat(double_);
    case Kind::kString: return string_;
    case Kind::kList: return StrCat("[", items_.size(), " items]");
    case Kind::kMap: return StrCat("{", entries_.size(), " fields}");
  }
  return "";
}

absl::Status Settings::Error(std::string_view what) const {
  return absl::InvalidArgumentError(StrCat(path_.empty() ? "(document)" : path_, ": ", what));
}

absl::Status Settings::ErrorAt(std::string_view key, std::string_view what) const {
  return absl::InvalidArgumentError(StrCat(path_, path_.empty() ? "" : ".", key, ": ", what));
}

namespace {

/// The field `key` of `map` with the expected kind, or nullptr when it is absent.
absl::StatusOr<const Settings*> Field(const Settings& map, std::string_view key,
                                      Settings::Kind kind, std::string_view expected) {
  const Settings* v = map.Find(key);
  if (v == nullptr || v->kind() == kind) return v;
  return v->Error(StrCat("expected ", expected, ", got ", v->TypeName()));
}

}  // namespace

absl::Status ExpectMap(const Settings& section) {
  if (section.kind() == Settings::Kind::kMap || section.is_null()) return absl::OkStatus();
  return section.Error(StrCat("expected an object, got ", section.TypeName()));
}

absl::Status CheckKeys(const Settings& map, std::initializer_list<std::string_view> known) {
  if (absl::Status s = ExpectMap(map); !s.ok()) return s;
  std::set<std::string_view> all(known);
  for (const std::string& key : map.taken()) all.insert(key);
  for (const auto& [key, value] : map.entries()) {
    if (all.contains(key)) continue;
    std::string list;
    for (std::string_view k : all) StrAppend(&list, list.empty() ? "" : ", ", k);
    return value.Error(StrCat("unknown field (known: ", list, ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadBool(const Settings& map, std::string_view key, bool* out) {
  absl::StatusOr<const Settings*> v = Field(map, key, Settings::Kind::kBool, "true or false");
  if (!v.ok()) return v.status();
  if (*v != nullptr) *out = (*v)->bool_value();
  return absl::OkStatus();
}

absl::Status ReadInt(const Settings& map, std::string_view key, std::optional<int64_t>* out) {
  absl::StatusOr<const Settings*> v = Field(map, key, Settings::Kind::kInt, "an integer");
  if (!v.ok()) return v.status();
  if (*v != nullptr) *out = (*v)->int_value();
  return absl::OkStatus();
}

absl::Status ReadString(const Settings& map, std::string_view key,
                        std::optional<std::string>* out) {
  absl::StatusOr<const Settings*> v = Field(map, key, Settings::Kind::kString, "a string");
  if (!v.ok()) return v.status();
  if (*v != nullptr) *out = (*v)->string_value();
  return absl::OkStatus();
}

absl::Status ReadNumber(const Settings& map, std::string_view key, double min, double max,
                        double* out) {
  const Settings* v = map.Find(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number()) return v->Error("expected a number");
  const double d = v->number();
  if (!(d >= min && d <= max)) return v->Error(StrCat("expected ", min, "..", max, ", got ", v->Written()));
  *out = d;
  return absl::OkStatus();
}

absl::Status ReadSeconds(const Settings& map, std::string_view key, double min, double max,
                         absl::Duration* out) {
  const Settings* v = map.Find(key);
  if (v == nullptr) return absl::OkStatus();
  double seconds = 0;
  if (!ReadNumber(map, key, min, max, &seconds).ok()) {
    return v->Error(v->is_number() ? StrCat("expected ", min, "..", max, " seconds, got ", v->Written())
                                   : std::string("expected a number of seconds"));
  }
  *out = absl::Seconds(seconds);
  return absl::OkStatus();
}

absl::Status ReadSecondsOrZero(const Settings& map, std::string_view key, double min, double max,
                               absl::Duration* out) {
  const Settings* v = map.Find(key);
  if (v != nullptr && v->is_number() && v->number() == 0) {
    *out = absl::ZeroDuration();
    return absl::OkStatus();
  }
  return ReadSeconds(map, key, min, max, out);
}

absl::Status ReadStringList(const Settings& map, std::string_view key,
                            std::vector<std::string>* out) {
  absl::StatusOr<const Settings*> v = Field(map, key, Settings::Kind::kList, "an array");
  if (!v.ok()) return v.status();
  if (*v == nullptr) return absl::OkStatus();
  std::vector<std::string> list;
  for (const Settings& item : (*v)->items()) {
    if (item.kind() != Settings::Kind::kString) {
      return item.Error(StrCat("expected a string, got ", item.TypeName()));
    }
    list.push_back(item.string_value());
  }
  *out = std::move(list);
  return absl::OkStatus();
}

absl::Status ReadNonNegativeQuantity(const Settings& map, std::string_view key,
                                     std::optional<core::Quantity>* out) {
  const Settings* v = map.Find(key);
  if (v == nullptr) return absl::OkStatus();
  if (v->kind() != Settings::Kind::kString && !v->is_number()) {
    return v->Error(StrCat("expected a quantity (string or number), got ", v->TypeName()));
  }
  // A number reads as the quantity it spells: the shortest text that gives the same double.
  const std::string text = v->Written();
  absl::StatusOr<core::Quantity> q = core::Quantity::Parse(text);
  if (!q.ok()) return v->Error(ToStd(q.status().message()));
  if (q->IsNegative()) return v->Error(StrCat("expected 0 (off) or more, got ", text));
  *out = *q;
  return absl::OkStatus();
}

absl::StatusOr<const Settings*> ReadMap(const Settings& map, std::string_view key) {
  return Field(map, key, Settings::Kind::kMap, "an object");
}

absl::Status ChoiceError(const Settings& value, const std::vector<std::string_view>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    StrAppend(&list, i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", "\"", names[i], "\"");
  }
  return value.Error(StrCat("expected ", list));
}

}  // namespace berth::policy
