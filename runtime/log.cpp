// runtime/log.cpp — FERRY_LOG levels and the sink.
#include "ferry/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ferry {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("FERRY_LOG");
  if (!v) return LogLevel::warn;
  if (!std::strcmp(v, "error")) return LogLevel::error;
  if (!std::strcmp(v, "info")) return LogLevel::info;
  if (!std::strcmp(v, "debug")) return LogLevel::debug;
  if (std::strcmp(v, "warn") != 0)
    std::fprintf(stderr,
                 "[ferry warn] FERRY_LOG='%s' is not one of error, warn, info, debug; using warn\n",
                 v);
  return LogLevel::warn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{int(level_from_env())};
  return level;
}
std::atomic<LogSink> g_sink{nullptr};
std::mutex g_write_mutex;

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::error:
      return "error";
    case LogLevel::warn:
      return "warn";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
  }
  return "?";
}

}  // namespace

LogLevel log_level() { return LogLevel(level_storage().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_storage().store(int(level)); }
bool log_enabled(LogLevel level) {
  return int(level) <= level_storage().load(std::memory_order_relaxed);
}
void set_log_sink(LogSink sink) { g_sink.store(sink); }

void log_message(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  if (LogSink sink = g_sink.load()) {
    sink(level, message);
    return;
  }
  std::lock_guard<std::mutex> lock(g_write_mutex);
  std::fprintf(stderr, "[ferry %s] %.*s\n", level_name(level), int(message.size()), message.data());
}

}  // namespace ferry
