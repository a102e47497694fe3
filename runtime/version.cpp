// runtime/version.cpp
#include "ferry/version.hpp"

namespace ferry {
const char* version() { return "0.1.0"; }
}  // namespace ferry
