// runtime/cpu/cpu_vector_math.hpp — glibc's libmvec (4-wide SSE forms of libm's
// float functions) for the element-wise functors that are those functions.
//
// Note [CPU vector math]
// An f32 contiguous run of exp, log, sin, erf, atan2, ... calls libm once per
// element through the shared functor (include/ferry/kit/math/elementwise_ops.hpp),
// which the compiler cannot vectorize. Where the build found libmvec
// (FERRY_HAVE_LIBMVEC, runtime/CMakeLists.txt), VectorForm<Functor> names the
// libmvec function that computes the same function four floats at a time (or, for
// GELU and its derivative, the functor's own steps over four floats with libmvec's erfc
// and exp); the CPU loops, the activations' backward among them, use it for whole groups
// of four and the functor for the rest.
// libmvec's float functions are within a few ulp of libm's (glibc's tests
// hold them to that); the conformance suite holds the other devices to the
// CPU within kMaxUlp on its special-value grid either way.
#pragma once

#include "ferry/kit/math/elementwise_ops.hpp"
#include "ferry/kit/math/grad_ops.hpp"

#ifdef FERRY_HAVE_LIBMVEC
#include <immintrin.h>
extern "C" {
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_expm1f(__m128);
__m128 _ZGVbN4v_logf(__m128);
__m128 _ZGVbN4v_log1pf(__m128);
__m128 _ZGVbN4v_sinf(__m128);
__m128 _ZGVbN4v_cosf(__m128);
__m128 _ZGVbN4v_tanhf(__m128);
__m128 _ZGVbN4v_atanf(__m128);
__m128 _ZGVbN4v_erff(__m128);
__m128 _ZGVbN4v_erfcf(__m128);
__m128 _ZGVbN4vv_atan2f(__m128, __m128);
}
#endif

namespace ferry::cpu {

// VectorForm<F>::apply(x) (or (a, b)): F of four floats; `exists` says whether there is one.
template <typename F> struct VectorForm { static constexpr bool exists = false; };

#ifdef FERRY_HAVE_LIBMVEC
#define FERRY_VECTOR_FORM(Functor, fn)                                        \
  template <> struct VectorForm<math::ops::Functor> {                         \
    static constexpr bool exists = true;                                      \
    template <typename... V> static __m128 apply(V... v) { return fn(v...); } \
  };
FERRY_VECTOR_FORM(Exp, _ZGVbN4v_expf)
FERRY_VECTOR_FORM(Expm1, _ZGVbN4v_expm1f)
FERRY_VECTOR_FORM(Log, _ZGVbN4v_logf)
FERRY_VECTOR_FORM(Log1p, _ZGVbN4v_log1pf)
FERRY_VECTOR_FORM(Sin, _ZGVbN4v_sinf)
FERRY_VECTOR_FORM(Cos, _ZGVbN4v_cosf)
FERRY_VECTOR_FORM(Tanh, _ZGVbN4v_tanhf)
FERRY_VECTOR_FORM(Atan, _ZGVbN4v_atanf)
FERRY_VECTOR_FORM(Erf, _ZGVbN4v_erff)
FERRY_VECTOR_FORM(Atan2, _ZGVbN4vv_atan2f)
#undef FERRY_VECTOR_FORM

// The exact GELU and its derivative, the activations of every GPT MLP: gelu_erf and
// gelu_backward (include/ferry/kit/math/) step for step, the same operations in the same
// order, with libmvec's erfc and exp.
template <> struct VectorForm<math::ops::Gelu> {
  static constexpr bool exists = true;
  static __m128 apply(__m128 x) {
    const __m128 t = _mm_mul_ps(x, _mm_set1_ps(float(-math::kSqrtHalf)));
    return _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(0.5f), x), _ZGVbN4v_erfcf(t));
  }
};
template <> struct VectorForm<math::ops::GeluBackward> {
  static constexpr bool exists = true;
  static __m128 apply(__m128 g, __m128 x) {
    const __m128 cdf = _mm_mul_ps(
        _mm_set1_ps(0.5f), _ZGVbN4v_erfcf(_mm_mul_ps(x, _mm_set1_ps(float(-math::kSqrtHalf)))));
    const __m128 pdf = _mm_mul_ps(_mm_set1_ps(float(math::kInvSqrt2Pi)),
                                  _ZGVbN4v_expf(_mm_mul_ps(_mm_mul_ps(x, x), _mm_set1_ps(-0.5f))));
    return _mm_mul_ps(g, _mm_add_ps(cdf, _mm_mul_ps(x, pdf)));
  }
};

// o[i] = F(a[i]) (or F(a[i], b[i])) for i < n, four at a time; returns how many it wrote.
template <typename F>
std::int64_t vector_unary(float* __restrict o, const float* __restrict a, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(o + i, VectorForm<F>::apply(_mm_loadu_ps(a + i)));
  return i;
}
template <typename F> std::int64_t vector_binary(float* __restrict o, const float* __restrict a,
                                                 const float* __restrict b, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(o + i, VectorForm<F>::apply(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
  return i;
}
#endif

}  // namespace ferry::cpu
