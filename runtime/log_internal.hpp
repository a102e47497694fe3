// runtime/log_internal.hpp — formatting log macros; the message is only built
// when the level is on.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ferry/log.hpp"

#define FERRY_LOG_AT(level, ...)                                                              \
  do {                                                                                        \
    if (::ferry::log_enabled(level)) ::ferry::log_message(level, ::fmt::format(__VA_ARGS__)); \
  } while (0)
#define FERRY_DEBUG(...) FERRY_LOG_AT(::ferry::LogLevel::debug, __VA_ARGS__)
#define FERRY_INFO(...) FERRY_LOG_AT(::ferry::LogLevel::info, __VA_ARGS__)
#define FERRY_WARN(...) FERRY_LOG_AT(::ferry::LogLevel::warn, __VA_ARGS__)
