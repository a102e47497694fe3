// include/ferry/kit/compile_error.hpp — the one CompileError every backend raises for a
// custom kernel that does not compile (Note [Custom kernels]): each backend
// finds the first error's line and message in its compiler's log (glslang's
// "ERROR: name:12: ...", NVRTC's "name.cu(12): error: ..."), this says it the
// same way for all of them, with the offending line of source.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/error.hpp"

namespace ferry::detail {

// The log's lines. (The logs are parsed by hand: GCC 12 warns inside
// <regex> at -O2, and the formats are simple.)
inline std::vector<std::string_view> log_lines(std::string_view log) {
  std::vector<std::string_view> lines;
  while (!log.empty()) {
    const std::size_t nl = log.find('\n');
    lines.push_back(log.substr(0, nl));
    log = nl == std::string_view::npos ? std::string_view{} : log.substr(nl + 1);
  }
  return lines;
}

// `s` as a line number: 1 to 9 decimal digits and nothing else.
inline std::optional<int> parse_line_number(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

[[noreturn]] inline void throw_kernel_compile_error(std::string_view kernel,
                                                    std::string_view language,
                                                    std::string_view code, int line,
                                                    std::string_view message, std::string log) {
  while (!message.empty() && (message.back() == ' ' || message.back() == '\r'))
    message.remove_suffix(1);
  std::string source;
  std::istringstream in{std::string(code)};
  std::string s;
  for (int i = 1; std::getline(in, s); ++i)
    if (i == line) source = s;
  // Plain strings, not fmt: this header is installed, and fmt is a private dependency.
  std::string what = "custom kernel '" + std::string(kernel) + "' (" + std::string(language) +
                     ") does not compile: line " + std::to_string(line) + ": " +
                     std::string(message);
  if (!source.empty()) what += "\n  " + std::to_string(line) + " | " + source;
  throw CompileError(std::move(what), line, std::move(log));
}

}  // namespace ferry::detail
