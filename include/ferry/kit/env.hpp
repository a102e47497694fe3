// include/ferry/kit/env.hpp — reading ferry's FERRY_* environment variables, one way for all:
// the runtime's, its backends' and their vendor libraries' switches (kit/optional_library.hpp).
//
// Note [Environment variables]
// A variable that is unset or set to the empty string is not there: its default holds. A
// value is read whole (no trailing text, no sign where none is allowed) and a value that is
// not one the variable takes is a ValueError naming the variable, what it takes and what it
// got ("FERRY_CPU_SGEMM must be auto, openblas or onednn, got 'mkl'"), never a silent
// fallback (FERRY_LOG alone warns instead: a log setting should not stop a program). README.md
// lists the variables; each is read where the setting it makes is decided.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::kit::env {

// The value of `name`; nullopt where it is unset or empty.
std::optional<std::string> value(const char* name);

// One of `choices`, or `fallback` where `name` is not there. `unit`, when given, follows the
// choices in the error ("4, 8 or 16 (floats)").
std::string choice(const char* name, std::initializer_list<std::string_view> choices,
                   std::string_view fallback, std::string_view unit = {});

// choice() of a value already read (nullptr or empty: `fallback`), for a policy function that
// takes the variable's value as an argument so that a test can call it without the environment
// (runtime/vulkan/vk_policy.cpp).
std::string choice_of(const char* name, const char* value,
                      std::initializer_list<std::string_view> choices, std::string_view fallback,
                      std::string_view unit = {});

// A whole number in [min, max]; nullopt where `name` is not there. `what` says what it must be
// ("a whole number of bytes (0: no chunks)").
std::optional<std::int64_t> whole_number(const char* name, std::int64_t min, std::int64_t max,
                                         std::string_view what);

// A switch: "1" on, "0" (or not there) off, anything else refused.
bool flag(const char* name);

// A finite number above zero; nullopt where `name` is not there.
std::optional<double> positive_number(const char* name, std::string_view what);

}  // namespace ferry::kit::env
