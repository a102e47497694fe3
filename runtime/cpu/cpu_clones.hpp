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

#include <cstdint>

#include "ferry/dtype.hpp"
namespace ferry::cpu {
// Whether the CPU converts halves in hardware (F16C, with AVX2 and FMA as x86-64-v3 has them),
// for the paths that convert by vcvtph2ps.
inline bool cpu_has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return yes;
}
// n halves into floats, eight at a time by vcvtph2ps (where cpu_has_f16c()): the portable
// conversion's bit operations left a decoding step over an f16 cache at 1.9 GB/s, where f32
// reads 20 to 30 (ferry-bench attention/decode S8192/forward f16).
__attribute__((target("avx2,f16c"))) inline void halves_to_floats_f16c(const Half* src,
                                                                       std::int64_t n, float* dst) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = float(src[i]);
}
}  // namespace ferry::cpu
#else
#define FERRY_CPU_CLONES
#endif
