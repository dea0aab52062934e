#include "extender/sim/answers.h"

#include <strings.h>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "core/strings.h"

namespace berth::extender::sim {

namespace {

using simdjson::SUCCESS;
using simdjson::dom::element;
using simdjson::dom::element_type;

/// Go matches a key to a field name exactly or, failing that, ignoring case.
bool KeyIs(std::string_view key, std::string_view field) {
  return key.size() == field.size() && ::strncasecmp(key.data(), field.data(), key.size()) == 0;
}

absl::Status TypeError(std::string_view field, std::string_view want) {
  return absl::InvalidArgumentError(StrCat("cannot unmarshal ", field, ": expected ", want));
}

/// A string field: null leaves it as it was (Go's decoder does nothing for null).
absl::Status ReadString(element value, std::string_view field, std::string_view* out) {
  if (value.is_null()) return absl::OkStatus();
  if (value.get(*out) != SUCCESS) return TypeError(field, "a string");
  return absl::OkStatus();
}

/// A map[string]string: null empties it; an object adds its keys (Go decodes into the map it
/// already has), each once.
absl::Status ReadMapKeys(element value, std::string_view field, std::vector<std::string_view>* keys,
                         absl::flat_hash_set<std::string_view>* seen) {
  if (value.is_null()) {
    keys->clear();
    seen->clear();
    return absl::OkStatus();
  }
  simdjson::dom::object map;
  if (value.get(map) != SUCCESS) return TypeError(field, "an object");
  for (auto entry : map) {
    if (!entry.value.is_null() && entry.value.type() != element_type::STRING) {
      return TypeError(field, "string values");
    }
    if (seen->insert(entry.key).second) keys->push_back(entry.key);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FilterAnswer> ReadFilterAnswer(element root) {
  FilterAnswer out;
  if (root.is_null()) return out;
  simdjson::dom::object obj;
  if (root.get(obj) != SUCCESS) return TypeError("the answer", "an object");
  absl::flat_hash_set<std::string_view> failed_seen, unresolvable_seen;
  for (auto field : obj) {
    const std::string_view key = field.key;
    const element value = field.value;
    if (KeyIs(key, "Error")) {
      if (absl::Status s = ReadString(value, "Error", &out.error); !s.ok()) return s;
    } else if (KeyIs(key, "NodeNames")) {
      out.names.clear();
      out.names_given = !value.is_null();
      if (!out.names_given) continue;
      simdjson::dom::array names;
      if (value.get(names) != SUCCESS) return TypeError("NodeNames", "an array");
      for (element n : names) {
        std::string_view name;
        if (absl::Status s = ReadString(n, "NodeNames", &name); !s.ok()) return s;
        out.names.push_back(name);
      }
    } else if (KeyIs(key, "FailedNodes")) {
      if (absl::Status s = ReadMapKeys(value, "FailedNodes", &out.failed, &failed_seen); !s.ok()) {
        return s;
      }
    } else if (KeyIs(key, "FailedAndUnresolvableNodes")) {
      if (absl::Status s = ReadMapKeys(value, "FailedAndUnresolvableNodes", &out.unresolvable,
                                       &unresolvable_seen);
          !s.ok()) {
        return s;
      }
    } else if (KeyIs(key, "Nodes")) {
      // Full node objects (nodeCacheCapable: false), which the simulator never asks for.
      if (!value.is_null() && value.type() != element_type::OBJECT) return TypeError("Nodes", "an object");
    }
  }
  return out;
}

absl::StatusOr<std::vector<HostScore>> ReadPriorityList(element root) {
  std::vector<HostScore> out;
  if (root.is_null()) return out;
  simdjson::dom::array list;
  if (root.get(list) != SUCCESS) return TypeError("the answer", "an array");
  for (element e : list) {
    HostScore hs;
    if (!e.is_null()) {
      simdjson::dom::object obj;
      if (e.get(obj) != SUCCESS) return TypeError("an entry", "an object");
      for (auto field : obj) {
        if (KeyIs(field.key, "Host")) {
          if (absl::Status s = ReadString(field.value, "Host", &hs.host); !s.ok()) return s;
        } else if (KeyIs(field.key, "Score") && !field.value.is_null()) {
          // Go parses the literal as an int64: 5.0, 5e0 and values past int64 are errors.
          if (field.value.type() != element_type::INT64 || field.value.get(hs.score) != SUCCESS) {
            return TypeError("Score", "an integer");
          }
        }
      }
    }
    out.push_back(hs);
  }
  return out;
}

std::vector<int64_t> ExtenderScores(std::span<const HostScore> list,
                                    std::span<const std::string_view> candidates, int64_t weight) {
  std::vector<int64_t> out(candidates.size(), 0);
  if (candidates.empty()) return out;
  // kube-scheduler keys the extender's scores by node name; the search starts after the last
  // match, so an answer in the order of the question costs one comparison per entry.
  size_t from = 0;
  for (const HostScore& hs : list) {
    for (size_t k = 0; k < candidates.size(); ++k) {
      const size_t i = (from + k) % candidates.size();
      if (candidates[i] != hs.host) continue;
      const uint64_t part = static_cast<uint64_t>(hs.score) * static_cast<uint64_t>(weight) * 10u;
      out[i] = static_cast<int64_t>(static_cast<uint64_t>(out[i]) + part);
      from = i + 1;
      break;
    }
  }
  return out;
}

}  // namespace berth::extender::sim
