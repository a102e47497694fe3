// ferry/version.hpp
#pragma once

namespace ferry {
inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 1;
inline constexpr int kVersionPatch = 0;
const char* version();  // "0.1.0"
}  // namespace ferry
