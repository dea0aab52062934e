#pragma once

#include <string_view>

#include "yaml-cpp/yaml.h"

namespace berth::extender {

/// The YAML type of a node, in words ("a scalar", "a list", ...), for error messages about
/// hand-written files (kubeconfigs, workloads).
inline std::string_view YamlTypeName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

}  // namespace berth::extender
