#pragma once

// The error a configuration document is refused with, for the config tests.

#include <string>

namespace berth::testing {

/// Parses `text` as a configuration file "c.json"; REQUIREs that it is refused and returns the
/// message.
std::string ConfigError(const std::string& text);

}  // namespace berth::testing
