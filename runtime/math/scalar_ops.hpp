// runtime/math/scalar_ops.hpp — the per-element math of every element-wise op,
// written once for the host and (under nvcc) the GPU.
//
// Floating ops compute in float for f32, f16 and bf16 (the 16-bit types are
// widened on load and rounded on store). Integer arithmetic wraps modulo 2^n
// like PyTorch's, through unsigned arithmetic so that overflow is defined.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ferry/config.hpp"
#include "ferry/dtype.hpp"

namespace ferry::math {

// ---- unary (float) ----
FERRY_HD float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// Exact GELU: x * Phi(x), Phi the standard normal CDF.
FERRY_HD float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
// PyTorch's approximate="tanh" form.
FERRY_HD float gelu_tanh(float x) {
  const float k = 0.79788456080286536f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
FERRY_HD float silu(float x) { return x / (1.0f + std::exp(-x)); }
FERRY_HD float rsqrt(float x) { return 1.0f / std::sqrt(x); }
FERRY_HD float relu(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }  // NaN stays NaN

// ---- binary helpers ----
// maximum/minimum propagate NaN (IEEE fmax would drop it).
template <typename T> FERRY_HD T maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename T> FERRY_HD T minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

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
template <typename T> FERRY_HD T int_abs(T a) { return a < 0 ? wrap_neg(a) : a; }

// Integer power by squaring; negative exponents give 0 except for bases 1 and -1.
template <typename T> FERRY_HD T int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == T(-1)) return (exp & 1) ? T(-1) : T(1);
    return 0;
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp = T(exp >> 1);
  }
  return result;
}

// float -> integer: truncates toward zero, NaN gives 0, out-of-range values
// saturate (C++ leaves those undefined; GPUs saturate).
template <typename I> FERRY_HD I float_to_int(float f) {
  if (f != f) return 0;
  const float lo = float(std::numeric_limits<I>::min());
  const float hi = float(std::numeric_limits<I>::max());
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
template <typename To, typename From> FERRY_HD To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_integral_v<From>)
      return v != 0;
    else
      return float(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16> ||
                       std::is_same_v<To, float>) {
    if constexpr (std::is_same_v<From, bool>)
      return To(v ? 1.0f : 0.0f);
    else
      return To(float(v));
  } else {  // integer destination
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16> ||
                  std::is_same_v<From, float>) {
      return float_to_int<To>(float(v));
    } else {
      return To(std::make_unsigned_t<To>(v));  // modular, like a C cast, but defined
    }
  }
}

}  // namespace ferry::math
