// runtime/cpu/cpu_vector_math.hpp — glibc's libmvec (the SSE, AVX2 and AVX-512 forms of
// libm's float functions) for the element-wise functors that are those functions.
//
// Note [CPU vector math]
// An f32 contiguous run of exp, log, sin, erf, atan2, ... calls libm once per
// element through the shared functor (include/ferry/kit/math/elementwise_ops.hpp),
// which the compiler cannot vectorize. Where the build found libmvec
// (FERRY_HAVE_LIBMVEC, runtime/CMakeLists.txt), Form<Functor> names the
// libmvec function that computes the same function several floats at a time (or, for
// GELU and its derivative, the functor's own steps with libmvec's erfc and exp);
// the CPU loops, the activations' backward among them, use it for whole vectors and
// the functor for the rest.
// The forms are written once (cpu_vector_forms.inc) and compiled three times: 4 floats
// (SSE, every x86-64), 8 (AVX2 + FMA) and 16 (AVX-512), the last two under their ISA's
// target pragma. vector_unary and the rest take 8 where the CPU has AVX2, else 4, found once;
// FERRY_CPU_VECTOR_WIDTH=4, 8 or 16 asks for another (where the CPU has it), so that a test
// can hold each form to the functor on one machine (tests/CMakeLists.txt). Not 16 by default:
// on a 2-core AMD EPYC with AVX-512, GELU's forward and backward over [256, 4096] took 1.55
// ms at 4 floats, 0.74 at 8 and 0.93 at 16 (`ops/gelu fwd+bwd`, docs/benchmarks-cpu.md);
// no Intel CPU with AVX-512 has been measured.
// libmvec's float functions are within a few ulp of libm's (glibc's tests
// hold them to that); the conformance suite holds the other devices to the
// CPU within kMaxUlp on its special-value grid either way.
#pragma once

#include <cstdint>

#include "ferry/kit/math/elementwise_ops.hpp"
#include "ferry/kit/math/grad_ops.hpp"

#ifdef FERRY_HAVE_LIBMVEC
#include <immintrin.h>

// libm's float functions that libmvec has (one argument; atan2f takes two).
#define FERRY_LIBMVEC_UNARY(X) \
  X(expf) X(expm1f) X(logf) X(log1pf) X(sinf) X(cosf) X(tanhf) X(atanf) X(erff) X(erfcf)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // the wide forms are called only under their ISA
extern "C" {
#define FERRY_DECLARE(fn)       \
  __m128 _ZGVbN4v_##fn(__m128); \
  __m256 _ZGVdN8v_##fn(__m256); \
  __m512 _ZGVeN16v_##fn(__m512);
FERRY_LIBMVEC_UNARY(FERRY_DECLARE)
#undef FERRY_DECLARE
__m128 _ZGVbN4vv_atan2f(__m128, __m128);
__m256 _ZGVdN8vv_atan2f(__m256, __m256);
__m512 _ZGVeN16vv_atan2f(__m512, __m512);
}
#pragma GCC diagnostic pop
#endif

namespace ferry::cpu {

#ifdef FERRY_HAVE_LIBMVEC
// The vector form's width on this CPU, 4, 8 or 16 floats (above). The CPU device reads it
// when it is made (cpu_device.cpp), so that a bad FERRY_CPU_VECTOR_WIDTH is refused at ferry's
// first use, never first inside a kernel's OpenMP region, where an exception ends the process.
int vector_width();

// Each width: its vector type, its intrinsics' prefix and libmvec's name prefix
// (cpu_vector_forms.inc builds its lanes from them).
namespace w4 {
#define FERRY_LANE_TYPE __m128
#define FERRY_LANE_WIDTH 4
#define FERRY_LANE_MM _mm_
#define FERRY_LANE_MVEC _ZGVbN4
#include "cpu/cpu_vector_forms.inc"
}  // namespace w4

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace w8 {
#define FERRY_LANE_TYPE __m256
#define FERRY_LANE_WIDTH 8
#define FERRY_LANE_MM _mm256_
#define FERRY_LANE_MVEC _ZGVdN8
#include "cpu/cpu_vector_forms.inc"
}  // namespace w8
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f")
namespace w16 {
#define FERRY_LANE_TYPE __m512
#define FERRY_LANE_WIDTH 16
#define FERRY_LANE_MM _mm512_
#define FERRY_LANE_MVEC _ZGVeN16
#include "cpu/cpu_vector_forms.inc"
}  // namespace w16
#pragma GCC pop_options

// Whether functor F has a vector form (the same at every width).
template <typename F> inline constexpr bool has_vector_form = w4::Form<F>::exists;

// run(Loops, i) from element 0 at vector_width(), then from where that stopped 4 at a time;
// returns how many elements were written (the rest is the caller's, through the functor).
template <typename Run> std::int64_t at_vector_width(const Run& run) {
  const int w = vector_width();
  const std::int64_t i = w == 16 ? run(w16::Loops{}, 0) : w == 8 ? run(w8::Loops{}, 0) : 0;
  return i + run(w4::Loops{}, i);
}
// o[i] = F(a[i]) (or F(a[i], b[i])) for i < n.
template <typename F>
std::int64_t vector_unary(float* __restrict o, const float* __restrict a, std::int64_t n) {
  return at_vector_width([&](auto loops, std::int64_t i) {
    return loops.template unary<F>(o + i, a + i, n - i);
  });
}
template <typename F> std::int64_t vector_binary(float* __restrict o, const float* __restrict a,
                                                 const float* __restrict b, std::int64_t n) {
  return at_vector_width([&](auto loops, std::int64_t i) {
    return loops.template binary<F>(o + i, a + i, b + i, n - i);
  });
}
// v[i] = exp(v[i] - m) for i < n.
inline std::int64_t vector_exp_shifted(float* v, std::int64_t n, float m) {
  return at_vector_width(
      [&](auto loops, std::int64_t i) { return loops.exp_shifted(v + i, n - i, m); });
}
#undef FERRY_LIBMVEC_UNARY
#endif

}  // namespace ferry::cpu
