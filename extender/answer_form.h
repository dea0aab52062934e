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

}  // namespace berth::extender
