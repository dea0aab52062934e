#pragma once

#include <catch2/catch.hpp>

#include "core/objects.h"
#include "core/placement.h"

namespace berth::extender {

// Field by field, what berth keeps of a pod and of a node, each field a check of its own.
inline void CheckSamePod(const core::Pod& a, const core::Pod& b) {
  CHECK(a.uid == b.uid);
  CHECK(a.ns == b.ns);
  CHECK(a.name == b.name);
  CHECK(a.scheduler_name == b.scheduler_name);
  CHECK(a.node_name == b.node_name);
  CHECK(a.nominated_node == b.nominated_node);
  CHECK(a.phase == b.phase);
  CHECK(a.priority == b.priority);
  CHECK(a.priority_class == b.priority_class);
  CHECK(a.creation == b.creation);
  CHECK(a.terminating == b.terminating);
  CHECK(a.labels == b.labels);
  CHECK(a.annotations == b.annotations);
  CHECK(a.request == b.request);
  REQUIRE((a.placement == nullptr) == (b.placement == nullptr));
  if (a.placement != nullptr) CHECK(*a.placement == *b.placement);
}

inline void CheckSameNode(const core::Node& a, const core::Node& b) {
  CHECK(a.name == b.name);
  CHECK(a.labels == b.labels);
  CHECK(a.capacity == b.capacity);
  CHECK(a.allocatable == b.allocatable);
  CHECK(a.unschedulable == b.unschedulable);
  CHECK(a.taints == b.taints);
  CHECK(a.creation == b.creation);
}

}  // namespace berth::extender
