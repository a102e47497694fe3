// runtime/cpu/cpu_vector_math.cpp — which width of Note [CPU vector math] this CPU runs.
#include "cpu/cpu_vector_math.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "ferry/error.hpp"

namespace ferry::cpu {

#ifdef FERRY_HAVE_LIBMVEC
int vector_width() {
  static const int width = [] {
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    int want = 8;  // AVX2 where the CPU has it, AVX-512 only when asked (Note [CPU vector math])
    const char* env = std::getenv("FERRY_CPU_VECTOR_WIDTH");
    if (env && *env) {
      const std::string v = env;
      if (v != "4" && v != "8" && v != "16")
        throw ValueError(
            fmt::format("FERRY_CPU_VECTOR_WIDTH must be 4, 8 or 16 (floats), got '{}'", v));
      want = std::stoi(v);
    }
    return want == 16 && avx512 ? 16 : want >= 8 && avx2 ? 8 : 4;
  }();
  return width;
}
#endif

}  // namespace ferry::cpu
