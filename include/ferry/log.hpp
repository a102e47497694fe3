// ferry/log.hpp — the one logging facility.
//
// FERRY_LOG=error|warn|info|debug sets the level (default: warn, so a normal
// run prints nothing). At debug every op logs the device and kernel it ran on
// and every host<->device copy logs its bytes. Messages go to stderr, one line
// each, prefixed "[ferry <level>]".
#pragma once

#include <string>
#include <string_view>

namespace ferry {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
void log_message(LogLevel level, std::string_view message);
// Where messages go (tests capture them); nullptr restores stderr.
using LogSink = void (*)(LogLevel, std::string_view);
void set_log_sink(LogSink sink);

}  // namespace ferry
