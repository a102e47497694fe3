// runtime/compile_error.hpp — the one CompileError every backend raises for a
// custom kernel that does not compile (Note [Custom kernels]): each backend
// finds the first error's line and message in its compiler's log (glslang's
// "ERROR: name:12: ...", NVRTC's "name.cu(12): error: ..."), this says it the
// same way for all of them, with the offending line of source.
#pragma once

#include <fmt/format.h>

#include <sstream>
#include <string>
#include <string_view>

#include "ferry/error.hpp"

namespace ferry::detail {

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
  throw CompileError(
      fmt::format("custom kernel '{}' ({}) does not compile: line {}: {}{}", kernel, language, line,
                  message, source.empty() ? "" : fmt::format("\n  {} | {}", line, source)),
      line, std::move(log));
}

}  // namespace ferry::detail
