#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/objects.h"
#include "core/resources.h"

namespace berth::extender {

/// The last pod a verb decoded, and the exact text it was decoded from: kube-scheduler sends the
/// same pod to prioritize that it sent to filter a moment before, and one decode of a pod as
/// kube-scheduler sends it was 2.6% of berth's CPU per scheduled pod (2,000 nodes, 680
/// candidates; docs/performance.md). A pod is taken from here only for the same
/// bytes and the same size of the name table (a decode looks resource names up in it, and the
/// table only grows), so the answer is the decode's. Thread-safe.
class DecodedPodCache {
 public:
  /// The pod remembered, if `rest` begins with its text and `names` has the size it had. A
  /// remembered text is a whole JSON object, so a value that begins with it is exactly it:
  /// `rest` runs from the pod's first byte to the end of the request, and is not scanned.
  /// `text_size`, when given, is set to the remembered text's size on a hit.
  std::optional<core::Pod> Find(std::string_view rest, const core::ResourceNames& names,
                                size_t* text_size = nullptr) const;
  /// Remembers `pod`, decoded from the JSON object `text` while `names` had its present size.
  void Remember(std::string_view text, const core::ResourceNames& names, const core::Pod& pod);
  /// How many Find calls returned a pod.
  int64_t hits() const;

 private:
  mutable absl::Mutex mu_;
  std::string text_ ABSL_GUARDED_BY(mu_);
  const core::ResourceNames* names_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t names_size_ ABSL_GUARDED_BY(mu_) = 0;
  core::Pod pod_ ABSL_GUARDED_BY(mu_);
  mutable int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace berth::extender
