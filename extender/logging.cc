#include "extender/logging.h"

#include <memory>

#include "core/strings.h"
#include "extender/json.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

// One JSON object per line: {"time": ..., "level": ..., "logger": ..., "msg": ...}; the message
// is escaped properly, which a pattern string cannot do.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    JsonWriter w(&line);
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                            msg.time.time_since_epoch())
                            .count();
    const std::time_t secs = static_cast<std::time_t>(micros / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[40];
    const size_t n = std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    std::string time = StrCat(std::string_view(ts, n), ".");
    const std::string frac = std::to_string(1000000 + micros % 1000000);
    StrAppend(&time, std::string_view(frac).substr(1), "Z");
    const auto level = spdlog::level::to_string_view(msg.level);
    w.BeginObject()
        .Key("time").String(time)
        .Key("level").String(std::string_view(level.data(), level.size()))
        .Key("msg").String(std::string_view(msg.payload.data(), msg.payload.size()))
        .EndObject();
    line.push_back('\n');
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

absl::Status SetupLogging(std::string_view level, std::string_view format) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        StrCat("--log-level: expected trace, debug, info, warn, error or off, got \"", level, "\""));
  }
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        StrCat("--log-format: expected text or json, got \"", format, "\""));
  }
  auto logger = spdlog::stderr_logger_mt("berth");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace berth::extender
