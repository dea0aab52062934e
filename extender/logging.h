#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace berth::extender {

/// Sets up spdlog on stderr. \param level trace, debug, info, warn, error or off.
/// \param format "text" (human) or "json" (one JSON object per line, for log shippers).
absl::Status SetupLogging(std::string_view level, std::string_view format);

}  // namespace berth::extender
