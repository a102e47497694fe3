// runtime/cpu/cpu_vector_math.cpp — which width of Note [CPU vector math] this CPU runs.
#include "cpu/cpu_vector_math.hpp"

#include <string>

#include "ferry/kit/env.hpp"

namespace ferry::cpu {

#ifdef FERRY_HAVE_LIBMVEC
int vector_width() {
  static const int width = [] {
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    // AVX2 where the CPU has it, AVX-512 only when asked (Note [CPU vector math]).
    const int want =
        std::stoi(kit::env::choice("FERRY_CPU_VECTOR_WIDTH", {"4", "8", "16"}, "8", "(floats)"));
    return want == 16 && avx512 ? 16 : want >= 8 && avx2 ? 8 : 4;
  }();
  return width;
}
#endif

}  // namespace ferry::cpu
