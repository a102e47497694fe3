// include/ferry/kit/math/scalar_ops.hpp — the per-element math of every element-wise op,
// written once for the host and (under nvcc) the GPU.
//
// Floating ops compute in float for f32, f16 and bf16 (the 16-bit types are
// widened on load and rounded on store) and in double for f64: each formula is
// a template over its compute type F, instantiated with float or double. Every
// constant is written as a double literal and converted with F(...); the
// static_asserts below check that the conversion gives exactly the float
// literal the float-only code used, so f32 results did not change. Integer
// arithmetic wraps modulo 2^n like PyTorch's, through unsigned arithmetic so
// that overflow is defined.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ferry/config.hpp"
#include "ferry/dtype.hpp"

namespace ferry::math {

// The type a kernel computes in for an element type: float for the 16-bit
// floats, the type itself otherwise (float for f32, double for f64: an f64
// kernel never rounds through float). Every backend uses this one rule.
template <typename T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <typename T> using compute_t = typename compute_type<T>::type;

// ---- unary (F is float or double) ----
inline constexpr double kSqrtHalf = 0.70710678118654752;     // 1 / sqrt(2)
inline constexpr double kSqrt2OverPi = 0.79788456080286536;  // sqrt(2 / pi)
inline constexpr double kGeluTanhCubic = 0.044715;
static_assert(float(kSqrtHalf) == 0.70710678118654752f &&
                  float(kSqrt2OverPi) == 0.79788456080286536f && float(kGeluTanhCubic) == 0.044715f,
              "the float instantiations must use the constants the f32 kernels always used");

template <typename F> FERRY_HD F sigmoid(F x) { return F(1) / (F(1) + std::exp(-x)); }
// Exact GELU: x * Phi(x), Phi the standard normal CDF.
// x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2: PyTorch's 1 + erf(x / sqrt 2)
// cancels for x below -3, where two correct erfs then give gelus a few percent
// apart (cuda:0 and the CPU did on an H100); erfc keeps the tail's precision.
template <typename F> FERRY_HD F gelu_erf(F x) { return F(0.5) * x * std::erfc(x * F(-kSqrtHalf)); }
// PyTorch's approximate="tanh" form, 0.5 x (1 + tanh(u)), evaluated as
// x / (1 + exp(-2u)), the same function: 1 + tanh(u) cancels to few correct
// bits for u < -4 (gelu_tanh(-5) would be off by a factor of 2 in f32).
template <typename F> FERRY_HD F gelu_tanh(F x) {
  const F u = F(kSqrt2OverPi) * (x + F(kGeluTanhCubic) * x * x * x);
  return x / (F(1) + std::exp(F(-2) * u));
}
template <typename F> FERRY_HD F silu(F x) { return x / (F(1) + std::exp(-x)); }
template <typename F> FERRY_HD F rsqrt(F x) { return F(1) / std::sqrt(x); }
template <typename F> FERRY_HD F relu(F x) {
  return x > F(0) ? x : (x != x ? x : F(0));  // NaN stays NaN
}

// SELU's constants (Klambauer et al.), as PyTorch writes them.
inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;
template <typename F> FERRY_HD F selu(F x) {
  return x > F(0) ? F(kSeluScale) * x : F(kSeluScale) * F(kSeluAlpha) * std::expm1(x);
}
// min(max(x + 3, 0), 6) with comparisons that keep a NaN (as std::min/max do).
template <typename F> FERRY_HD F relu6_of_shifted(F x) {
  F t = x + F(3);
  t = t < F(0) ? F(0) : t;
  return t > F(6) ? F(6) : t;
}
template <typename F> FERRY_HD F hardsigmoid(F x) { return relu6_of_shifted(x) / F(6); }
template <typename F> FERRY_HD F hardswish(F x) { return x * relu6_of_shifted(x) / F(6); }
// x tanh(softplus(x)), PyTorch's formula: for large x, exp overflows to inf
// and tanh(inf) is 1.
template <typename F> FERRY_HD F mish(F x) { return x * std::tanh(std::log1p(std::exp(x))); }
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): neither term overflows.
template <typename F> FERRY_HD F logsigmoid(F x) {
  return (x < F(0) ? x : F(0)) - std::log1p(std::exp(-std::fabs(x)));
}

// erfinv in double: M. Giles' single-precision approximation ("Approximating
// the erfinv function", 2010) as the start where it was fitted (1 - |y| above
// ~1e-7), erfc's asymptote exp(-x^2) / (x sqrt(pi)) beyond, then Newton steps
// on erf(x) = y until they stop moving x (two or three from Giles' start).
// Near |y| = 1 the residual is taken as (1 - |y|) - erfc(|x|): 1 - |y| is
// exact there, where erf(x) - y would cancel to nothing. The Vulkan f64 shader
// (shaders/transcendentals_f64.glsl) iterates the same way, from the float
// erfinv's result. Host only: CUDA
// has its own erfinv.
inline double erfinv_newton(double y) {
  if (y != y || y < -1.0 || y > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1.0 || y == -1.0) return y * std::numeric_limits<double>::infinity();
  if (y == 0.0) return y;
  const double a = std::fabs(y);
  double w = -std::log((1.0 - a) * (1.0 + a)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
  } else if (w < 16.0) {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
  } else {
    const double l = -std::log(1.0 - a);
    p = std::sqrt(l - std::log(std::sqrt(l) * 1.7724538509055160)) / a;  // sqrt(pi)
  }
  double x = p * a;
  for (int step = 0; step < 8; ++step) {
    const double r = a < 0.5 ? std::erf(x) - a : (1.0 - a) - std::erfc(x);
    const double delta = r / (1.1283791670955126 * std::exp(-x * x));  // 2/sqrt(pi)
    x -= delta;
    if (std::fabs(delta) <= 1e-15 * x) break;  // the next step is below rounding
  }
  return y < 0 ? -x : x;
}
template <typename F> FERRY_HD F erfinv(F y) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<F, float>)
    return ::erfinvf(y);
  else
    return ::erfinv(y);
#else
  return F(erfinv_newton(double(y)));
#endif
}

// a + b * c with two roundings, as the CPU backend computes it. nvcc fuses a
// multiply and an add into one FMA (one rounding) by default; where every
// backend must give the same bits (random draws, arange), device code uses the
// round-to-nearest intrinsics, which are never fused.
FERRY_HD float add_mul_unfused(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, __fmul_rn(b, c));
#else
  return a + b * c;
#endif
}
FERRY_HD double add_mul_unfused(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, __dmul_rn(b, c));
#else
  return a + b * c;
#endif
}

// ---- binary helpers ----
// PyTorch's floor division of floats (div_floor_floating): through fmod, so
// that a / b's rounding cannot move the quotient across an integer.
template <typename F> FERRY_HD F floor_divide(F a, F b) {
  if (b == F(0)) return a / b;
  const F mod = std::fmod(a, b);
  F div = (a - mod) / b;
  if (mod != F(0) && (b < F(0)) != (mod < F(0))) div -= F(1);
  if (div == F(0)) return std::copysign(F(0), a / b);
  F floordiv = std::floor(div);
  if (div - floordiv > F(0.5)) floordiv += F(1);
  return floordiv;
}
// maximum/minimum propagate NaN (IEEE fmax would drop it): a NaN a, else a
// NaN b. On the host one unordered test guards both: a single compare and a
// branch ordinary data never takes, where two tests cost scatter_reduce's amax
// fold a quarter of its speed; the result is the same.
#if defined(__CUDA_ARCH__)
#define FERRY_NAN_FIRST(a, b) \
  if (a != a) return a;       \
  if (b != b) return b;
#else
#define FERRY_NAN_FIRST(a, b)                   \
  if (__builtin_isunordered(a, b)) [[unlikely]] \
    return a != a ? a : b;
#endif
template <typename T> FERRY_HD T maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    FERRY_NAN_FIRST(a, b)
  }
  return a > b ? a : b;
}
template <typename T> FERRY_HD T minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    FERRY_NAN_FIRST(a, b)
  }
  return a < b ? a : b;
}
#undef FERRY_NAN_FIRST

template <typename T> FERRY_HD T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <typename T> FERRY_HD T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) - U(b));
}
template <typename T> FERRY_HD T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if constexpr (sizeof(T) < sizeof(unsigned)) {
    return T(unsigned(U(a)) * unsigned(U(b)));  // avoid int promotion overflow
  } else {
    return T(U(a) * U(b));
  }
}
template <typename T> FERRY_HD T wrap_neg(T a) { return wrap_sub(T(0), a); }
template <typename T> FERRY_HD T int_abs(T a) {
  if constexpr (std::is_signed_v<T>)
    return a < 0 ? wrap_neg(a) : a;
  else
    return a;  // u8 (nvcc warns of `a < 0` on an unsigned type)
}

// Integer power by squaring; negative exponents give 0 except for bases 1 and -1.
template <typename T> FERRY_HD T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == T(-1)) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp = T(exp >> 1);
  }
  return result;
}

// float or double -> integer: truncates toward zero, NaN gives 0, out-of-range
// values saturate (C++ leaves those undefined; GPUs saturate). The bounds are
// the integer limits rounded to F; a value at or beyond them saturates, and
// every value strictly inside converts exactly by truncation.
template <typename I, typename F> FERRY_HD I float_to_int(F f) {
  if (f != f) return 0;
  const F lo = F(std::numeric_limits<I>::min());
  const F hi = F(std::numeric_limits<I>::max());
  if (f <= lo) return std::numeric_limits<I>::min();
  if (f >= hi) return std::numeric_limits<I>::max();
  return I(f);
}

// The value of any element type as float / as int64, and back: the one place
// element conversions are defined (cast, copy, fill).
template <typename T> FERRY_HD float to_float(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return float(v);
  else
    return float(v);
}
template <typename T> inline constexpr bool kIsNarrowFloat =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, float>;

// double -> f16/bf16 goes through float (two roundings), as PyTorch's
// c10::Half(double) and c10::BFloat16(double) do.
template <typename To, typename From> FERRY_HD To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_integral_v<From>)
      return v != 0;
    else if constexpr (std::is_same_v<From, double>)
      return v != 0.0;  // not through float: 1e-300 is true
    else
      return float(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, double>) {
    if constexpr (std::is_same_v<From, bool>)
      return v ? 1.0 : 0.0;
    else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
      return double(float(v));
    else
      return double(v);  // exact from float and the 32-bit integers; i64 rounds to nearest
  } else if constexpr (kIsNarrowFloat<To>) {
    if constexpr (std::is_same_v<From, bool>)
      return To(v ? 1.0f : 0.0f);
    else
      return To(float(v));
  } else {  // integer destination
    if constexpr (std::is_same_v<From, double>) {
      return float_to_int<To>(v);  // in double: 2^24 + 1 stays exact
    } else if constexpr (kIsNarrowFloat<From>) {
      return float_to_int<To>(float(v));
    } else {
      return To(std::make_unsigned_t<To>(v));  // modular, like a C cast, but defined
    }
  }
}

}  // namespace ferry::math
