// Logging setup: spdlog to stderr, as text or as JSON lines
// (--log-format json) for journald and log shippers.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace ductus {

enum class LogFormat { Text, Json };

// Installs the default logger. Safe to call again (replaces it).
void setupLogging(LogFormat format, spdlog::level::level_enum level = spdlog::level::info);

// Parses "text" / "json"; false for anything else.
bool parseLogFormat(std::string_view s, LogFormat& out);

}  // namespace ductus
