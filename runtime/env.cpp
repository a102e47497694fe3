// runtime/env.cpp — Note [Environment variables] in ferry/kit/env.hpp.
#include "ferry/kit/env.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "ferry/error.hpp"

namespace ferry::kit::env {
namespace {

[[noreturn]] void refuse(const char* name, std::string_view what, const std::string& got) {
  throw ValueError(fmt::format("{} must be {}, got '{}'", name, what, got));
}

}  // namespace

std::optional<std::string> value(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::string choice_of(const char* name, const char* value,
                      std::initializer_list<std::string_view> choices, std::string_view fallback,
                      std::string_view unit) {
  if (!value || !*value) return std::string(fallback);
  const std::string v = value;
  for (std::string_view c : choices)
    if (v == c) return v;
  std::string what;
  std::size_t i = 0;
  for (std::string_view c : choices) {
    if (i > 0) what += i + 1 == choices.size() ? " or " : ", ";
    what += c;
    ++i;
  }
  if (!unit.empty()) what += fmt::format(" {}", unit);
  refuse(name, what, v);
}

std::string choice(const char* name, std::initializer_list<std::string_view> choices,
                   std::string_view fallback, std::string_view unit) {
  return choice_of(name, std::getenv(name), choices, fallback, unit);
}

bool flag(const char* name) { return choice(name, {"0", "1"}, "0") == "1"; }

std::optional<std::int64_t> whole_number(const char* name, std::int64_t min, std::int64_t max,
                                         std::string_view what) {
  const std::optional<std::string> v = value(name);
  if (!v) return std::nullopt;
  const char* s = v->c_str();
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(s, &end, 10);
  // Digits only: strtoll would take leading blanks and a '+'.
  if (!(std::isdigit(static_cast<unsigned char>(s[0])) || (s[0] == '-' && min < 0)) ||
      *end != '\0' || errno != 0 || n < min || n > max)
    refuse(name, what, *v);
  return std::int64_t(n);
}

std::optional<double> positive_number(const char* name, std::string_view what) {
  const std::optional<std::string> v = value(name);
  if (!v) return std::nullopt;
  const char* s = v->c_str();
  char* end = nullptr;
  const double x = std::strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(x) || !(x > 0)) refuse(name, what, *v);
  return x;
}

}  // namespace ferry::kit::env
