// include/ferry/kit/math/elementwise_ops.hpp — every element-wise op as a functor, the
// one definition the CPU kernels (runtime/cpu/cpu_kernels_{elementwise,grad}.cpp)
// and the CUDA kernels (cuda/cuda_kernels_{elementwise,grad}.cu) both call.
//
// Note [Element-wise functors]
// A functor takes values of the op's compute type, math::compute_t<T>: float
// for f32, f16 and bf16 (the kernel widens on load and rounds on store), double
// for f64, and the integer or bool type itself otherwise, and returns the result
// in that type (bool for comparisons). The formulas are in scalar_ops.hpp and
// grad_ops.hpp; here each op picks the right one for integers, bools and
// floats. The functors are empty structs with a templated operator(), so a
// kernel instantiates one per dtype, inlines it, and (on CUDA) passes it to a
// __global__ function by value.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ferry/config.hpp"
#include "ferry/kit/math/grad_ops.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::math {

// i8, i16, i32, i64 and u8 (bool is neither an integer nor a float here).
template <typename T> inline constexpr bool kIsInteger =
    std::is_integral_v<T> && !std::is_same_v<T, bool>;

// A double from an attribute (fill's value, arange's element) as element type
// T: f64 keeps it, the narrower floats round (through float), integers take
// `exact` and wrap (the same rule as int64 -> int casts), bool is d != 0.
template <typename T> FERRY_HD T from_double(double d, std::int64_t exact) {
  if constexpr (std::is_same_v<T, bool>)
    return d != 0.0;
  else if constexpr (kIsInteger<T>)
    return convert<T>(exact);
  else if constexpr (std::is_same_v<T, double>)
    return d;
  else
    return T(float(d));
}

// Element i of arange(start, step): start + i * step in double, two roundings
// (add_mul_unfused), integers from the value rounded to nearest.
template <typename T> FERRY_HD T arange_element(double start, double step, std::int64_t i) {
  const double v = add_mul_unfused(start, double(i), step);
#ifdef __CUDA_ARCH__
  return from_double<T>(v, std::int64_t(::llround(v)));
#else
  return from_double<T>(v, std::int64_t(std::llround(v)));
#endif
}

namespace ops {

// ---- unary: neg, abs and relu take every numeric type, the rest floats ----
struct Neg {
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return wrap_neg(x);
    else
      return -x;
  }
};
struct Abs {
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return int_abs(x);
    else
      return std::fabs(x);
  }
};
struct Relu {
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return x > 0 ? x : T(0);
    else
      return relu(x);
  }
};
struct Exp {
  template <typename T> FERRY_HD T operator()(T x) const { return std::exp(x); }
};
struct Expm1 {  // exp(x) - 1 without the cancellation near 0
  template <typename T> FERRY_HD T operator()(T x) const { return std::expm1(x); }
};
struct Log {
  template <typename T> FERRY_HD T operator()(T x) const { return std::log(x); }
};
struct Log1p {  // log(1 + x) without the rounding of 1 + x near 0
  template <typename T> FERRY_HD T operator()(T x) const { return std::log1p(x); }
};
struct Log2 {
  template <typename T> FERRY_HD T operator()(T x) const { return std::log2(x); }
};
// Rounding: integers are already whole (PyTorch returns them as they are).
struct Floor {
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return x;
    else
      return std::floor(x);
  }
};
struct Ceil {
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return x;
    else
      return std::ceil(x);
  }
};
struct Trunc {
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return x;
    else
      return std::trunc(x);
  }
};
struct Round {  // half to even, as PyTorch (rint in the default rounding mode)
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (kIsInteger<T>)
      return x;
    else
      return std::rint(x);
  }
};
struct Frac {  // x - trunc(x): the sign of x, NaN for infinities
  template <typename T> FERRY_HD T operator()(T x) const { return x - std::trunc(x); }
};
struct Sign {  // -1, 0 or 1; 0 for NaN (PyTorch 1.13's CPU); a bool stays itself
  template <typename T> FERRY_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>)
      return x;
    else if constexpr (std::is_unsigned_v<T>)
      return T(x != 0);
    else
      return T((T(0) < x) - (x < T(0)));
  }
};
struct Reciprocal {
  template <typename T> FERRY_HD T operator()(T x) const { return T(1) / x; }
};
struct Sqrt {
  template <typename T> FERRY_HD T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  template <typename T> FERRY_HD T operator()(T x) const { return rsqrt(x); }
};
struct Sin {
  template <typename T> FERRY_HD T operator()(T x) const { return std::sin(x); }
};
struct Cos {
  template <typename T> FERRY_HD T operator()(T x) const { return std::cos(x); }
};
struct Tanh {
  template <typename T> FERRY_HD T operator()(T x) const { return std::tanh(x); }
};
struct Sigmoid {
  template <typename T> FERRY_HD T operator()(T x) const { return sigmoid(x); }
};
struct Gelu {
  template <typename T> FERRY_HD T operator()(T x) const { return gelu_erf(x); }
};
struct GeluTanh {
  template <typename T> FERRY_HD T operator()(T x) const { return gelu_tanh(x); }
};
struct Silu {
  template <typename T> FERRY_HD T operator()(T x) const { return silu(x); }
};
// The rest of the transcendentals (floats; integers and bool come as f32) and
// the activations without parameters (floats only).
struct Log10 {
  template <typename T> FERRY_HD T operator()(T x) const { return std::log10(x); }
};
struct Exp2 {
  template <typename T> FERRY_HD T operator()(T x) const { return std::exp2(x); }
};
struct Erf {
  template <typename T> FERRY_HD T operator()(T x) const { return std::erf(x); }
};
struct Erfc {
  template <typename T> FERRY_HD T operator()(T x) const { return std::erfc(x); }
};
struct Erfinv {
  template <typename T> FERRY_HD T operator()(T x) const { return erfinv(x); }
};
struct Tan {
  template <typename T> FERRY_HD T operator()(T x) const { return std::tan(x); }
};
struct Asin {
  template <typename T> FERRY_HD T operator()(T x) const { return std::asin(x); }
};
struct Acos {
  template <typename T> FERRY_HD T operator()(T x) const { return std::acos(x); }
};
struct Atan {
  template <typename T> FERRY_HD T operator()(T x) const { return std::atan(x); }
};
struct Sinh {
  template <typename T> FERRY_HD T operator()(T x) const { return std::sinh(x); }
};
struct Cosh {
  template <typename T> FERRY_HD T operator()(T x) const { return std::cosh(x); }
};
struct Asinh {
  template <typename T> FERRY_HD T operator()(T x) const { return std::asinh(x); }
};
struct Acosh {
  template <typename T> FERRY_HD T operator()(T x) const { return std::acosh(x); }
};
struct Atanh {
  template <typename T> FERRY_HD T operator()(T x) const { return std::atanh(x); }
};
struct Selu {
  template <typename T> FERRY_HD T operator()(T x) const { return selu(x); }
};
struct Hardsigmoid {
  template <typename T> FERRY_HD T operator()(T x) const { return hardsigmoid(x); }
};
struct Hardswish {
  template <typename T> FERRY_HD T operator()(T x) const { return hardswish(x); }
};
struct Mish {
  template <typename T> FERRY_HD T operator()(T x) const { return mish(x); }
};
struct Logsigmoid {
  template <typename T> FERRY_HD T operator()(T x) const { return logsigmoid(x); }
};

// ---- binary arithmetic: every dtype but div (floats only). Integers wrap;
// the front-end refuses bool for sub and pow, which still get a defined answer.
struct Add {
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else if constexpr (kIsInteger<T>)
      return wrap_add(a, b);
    else
      return a + b;
  }
};
struct Sub {
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a != b;
    else if constexpr (kIsInteger<T>)
      return wrap_sub(a, b);
    else
      return a - b;
  }
};
struct Mul {
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else if constexpr (kIsInteger<T>)
      return wrap_mul(a, b);
    else
      return a * b;
  }
};
struct Square {  // the fused kernel of the composite op square (x * x)
  template <typename T> FERRY_HD T operator()(T x) const { return Mul{}(x, x); }
};
struct Div {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return a / b; }
};
struct Pow {
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || !b;
    else if constexpr (kIsInteger<T>)
      return int_pow(a, b);
    else
      return std::pow(a, b);
  }
};
struct Maximum {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return maximum(a, b); }
};
struct Minimum {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return minimum(a, b); }
};
// Division-like ops: PyTorch's definitions (the front-end refuses an integer
// divisor of 0, which C++ leaves undefined).
struct Atan2 {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return std::atan2(a, b); }
};
struct Fmod {  // the remainder of truncated division: the sign of a
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (kIsInteger<T>)
      return T(a % b);
    else
      return std::fmod(a, b);
  }
};
struct Remainder {  // the remainder of floor division (Python's %): the sign of b
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    T r = Fmod{}(a, b);
    if (r != T(0) && (r < T(0)) != (b < T(0))) r = T(r + b);
    return r;
  }
};
struct FloorDivide {
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (kIsInteger<T>) {
      const T q = T(a / b);
      return ((a < T(0)) != (b < T(0)) && T(q * b) != a) ? T(q - 1) : q;
    } else {
      return floor_divide(a, b);
    }
  }
};
struct Hypot {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return std::hypot(a, b); }
};
struct Copysign {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return std::copysign(a, b); }
};
struct Xlogy {  // x log(y), 0 where x is 0 (unless y is NaN)
  template <typename T> FERRY_HD T operator()(T x, T y) const {
    if (y != y) return y;
    return x == T(0) ? T(0) : x * std::log(y);
  }
};
// Bitwise ops: integers and bool (and, or, xor); the shifts integers only,
// with PyTorch's answers for counts outside [0, bits).
struct BitwiseAnd {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return T(a & b); }
};
struct BitwiseOr {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return T(a | b); }
};
struct BitwiseXor {
  template <typename T> FERRY_HD T operator()(T a, T b) const { return T(a ^ b); }
};
struct BitwiseLeftShift {
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (kIsInteger<T>) {
      using U = std::make_unsigned_t<T>;
      constexpr T kBits = T(sizeof(T) * 8);
      if (std::make_signed_t<T>(b) < 0 || b >= kBits) return T(0);
      return T(U(U(a) << b));
    } else {
      return a;  // the row takes integers only
    }
  }
};
struct BitwiseRightShift {  // arithmetic for the signed types
  template <typename T> FERRY_HD T operator()(T a, T b) const {
    if constexpr (kIsInteger<T>) {
      constexpr T kMaxShift = T(sizeof(T) * 8 - (std::is_signed_v<T> ? 1 : 0));
      if (std::make_signed_t<T>(b) < 0 || b >= kMaxShift) return T(a >> kMaxShift);
      return T(a >> b);
    } else {
      return a;
    }
  }
};

// ---- comparisons: every dtype, a bool result ----
struct Eq {
  template <typename T> FERRY_HD bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  template <typename T> FERRY_HD bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  template <typename T> FERRY_HD bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  template <typename T> FERRY_HD bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  template <typename T> FERRY_HD bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  template <typename T> FERRY_HD bool operator()(T a, T b) const { return a >= b; }
};

// ---- activation backward (grad, z) -> grad_in, floats only: z is the
// forward output for relu, sigmoid and tanh, the forward input for the others
// (docs/kernel-contract.md, "Activation backward").
struct ReluBackward {
  template <typename T> FERRY_HD T operator()(T g, T z) const { return relu_backward(g, z); }
};
struct GeluBackward {
  template <typename T> FERRY_HD T operator()(T g, T z) const { return gelu_backward(g, z); }
};
struct GeluTanhBackward {
  template <typename T> FERRY_HD T operator()(T g, T z) const { return gelu_tanh_backward(g, z); }
};
struct SiluBackward {
  template <typename T> FERRY_HD T operator()(T g, T z) const { return silu_backward(g, z); }
};
struct SigmoidBackward {
  template <typename T> FERRY_HD T operator()(T g, T z) const { return sigmoid_backward(g, z); }
};
struct TanhBackward {
  template <typename T> FERRY_HD T operator()(T g, T z) const { return tanh_backward(g, z); }
};

}  // namespace ops
}  // namespace ferry::math
