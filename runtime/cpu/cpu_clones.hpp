// runtime/cpu/cpu_clones.hpp — FERRY_CPU_CLONES: a hot CPU loop compiled for x86-64-v4
// (AVX-512) and x86-64-v3 (AVX2, FMA, F16C) besides the baseline, the loader picking one by
// the CPU's features at run time (GCC's function multiversioning): the baseline x86-64 has
// 4-wide vectors and no FMA. Named CPUs (arch=skylake-avx512) would match that model only,
// which left a Sapphire Rapids VM on the baseline. The sanitized builds keep the baseline:
// their run-time libraries start after the loader resolves the clones. FERRY_CPU_FEATURE_PATHS
// says whether code may also pick paths by __builtin_cpu_supports and x86 intrinsics.
// Internal to the CPU backend.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define FERRY_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define FERRY_CPU_FEATURE_PATHS 1
#include <immintrin.h>
namespace ferry::cpu {
// Whether the CPU converts halves in hardware (F16C, with AVX2 and FMA as x86-64-v3 has them),
// for the paths that convert by vcvtph2ps.
inline bool cpu_has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return yes;
}
}  // namespace ferry::cpu
#else
#define FERRY_CPU_CLONES
#endif
