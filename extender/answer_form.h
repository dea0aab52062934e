#pragma once

#include <cstdint>

namespace berth::extender {

/// How the filter and prioritize answers are written. kube-scheduler decides exactly the same on
/// both (docs/decisions.md, "What kube-scheduler reads from an answer"); kShort is what berth
/// sends. kLong, berth's earlier answers, is there for benches and tests to compare with.
enum class AnswerForm : uint8_t {
  /// A rejected node's message is ReasonSummary(reason); a host scored 0 is `{"Host": name}`
  /// (Go decodes the missing Score as 0, and the host is still in the list).
  kShort,
  /// Each verdict's own message; every score written out.
  kLong,
};

/// Which fitting nodes the filter answer names (config `filterAnswer`; docs/decisions.md, "The
/// filter answer names berth's best nodes").
enum class FilterAnswer : uint8_t {
  /// Every candidate that fits: kube-scheduler then scores them all and calls prioritize.
  kAll,
  /// Only the fitting candidates with berth's highest score (what prioritize would answer). The
  /// others are left out of both lists: kube-scheduler drops them without a status. When one
  /// node is left, kube-scheduler takes it without scoring and without calling prioritize.
  kBest,
};

}  // namespace berth::extender
