// shaders/elementwise.comp — every element-wise op over strided tensors of up
// to 4 (coalesced) dims: unary, binary, comparisons, activation backward, where,
// copy/cast, fill and arange. OP, the dtypes and the dim count are specialization constants, so
// each pipeline holds one op's code (and the build also makes a module per op: Note [Per-op
// shader modules] in runtime/vulkan/vk_pipelines.cpp). The host (vk_kernels_elementwise.cpp)
// coalesces dims, loops over dims beyond 4 and splits huge tensors.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "transcendentals.glsl"
#ifdef FERRY_F64
#include "transcendentals_f64.glsl"
#endif
#include "abi/elementwise.h"  // spec and push constants, codes: shared with the host
#ifdef FERRY_F64
#define LOAD_FILL_F64_ packDouble2x32(uvec2(p.s[1], p.s[2]))
#else
#define LOAD_FILL_F64_ 0.0  // never taken: no DT_F64 reaches these modules
#endif
#ifdef FERRY_FIXED_OP
// A module of one op (Note [Per-op shader modules] in runtime/vulkan/vk_pipelines.cpp): OP
// is this constant from here on, not the specialization constant declared above, so the
// build's spirv-opt removes the other ops' code.
#define OP FERRY_FIXED_OP
#endif

#include "ferry_ops.glsl"  // OP_<NAME> = ferry::OpId, generated from ops/ops.table

FERRY_TENSOR(0, o)
FERRY_TENSOR(1, a)
FERRY_TENSOR(2, b)
FERRY_TENSOR(3, c)

bool is_unary() { return op_is_unary(OP); }
bool is_binary() { return op_is_binary(OP); }
bool is_compare() { return op_is_compare(OP); }
bool is_grad() { return op_is_activation_backward(OP); }

// min(max(x + 3, 0), 6), a NaN kept: tested first, as NVIDIA's compiler turns
// the selects below into a max and a min that drop it.
FTYPE relu6_of_shifted(FTYPE x) {
  if (isnan(x)) return x;
  FTYPE t = x + 3.0;
  t = t < 0.0 ? 0.0 : t;
  return t > 6.0 ? 6.0 : t;
}

// The float dtypes' math, in FTYPE: float in the other modules, double in the f64 ones (whose
// overloads of exp_f, erfc_f, ... are transcendentals_f64.glsl's); a literal float does not
// hold exactly is a FLIT, so that the f64 modules get all its digits.
FTYPE unary_f(FTYPE x) {
  switch (OP) {
    case OP_NEG: return -x;
    case OP_ABS: return abs(x);
    case OP_RELU: return relu_f(x);
    case OP_SQUARE: return x * x;
    case OP_EXP: return safe_exp(x);
    case OP_EXPM1: return expm1_f(x);
    case OP_LOG: return safe_log(x);
    case OP_LOG1P: return log1p_f(x);
    case OP_LOG2: return log2_f(x);
    // IEEE's rounding functions keep x's sign (trunc(-0.3) is -0), which a driver need not:
    // lavapipe's f64 trunc and roundEven on an AVX2 CPU (AMD EPYC, Mesa 22.3) return +0 there.
    // The sign bit is put back by hand; every result of these four has the sign of x.
    case OP_FLOOR: return copysign_of(floor(x), x);
    case OP_CEIL: return copysign_of(ceil(x), x);
    case OP_TRUNC: return copysign_of(trunc(x), x);
    case OP_ROUND: return copysign_of(roundEven(x), x);
    case OP_FRAC: return x - trunc(x);
    case OP_SIGN: return FTYPE(0.0 < x) - FTYPE(x < 0.0);  // 0 for NaN, as the CPU
    case OP_RECIPROCAL: return 1.0 / x;
    case OP_SQRT: return safe_sqrt(x);
    case OP_RSQRT: return 1.0 / safe_sqrt(x);
    case OP_SIN: return sin_f(x);
    case OP_COS: return cos_f(x);
    case OP_TANH: return safe_tanh(x);
    case OP_SIGMOID: return sigmoid_f(x);
    // x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2: 1 + erf(x / sqrt 2) cancels for x < -3.
    case OP_GELU: return 0.5 * x * erfc_f(x * FLIT(-0.70710678118654752lf));
    case OP_GELU_TANH:
      return x / (1.0 + safe_exp(-2.0 * (FLIT(0.79788456080286536lf) * (x + FLIT(0.044715lf) * x * x * x))));
    case OP_SILU: return x / (1.0 + safe_exp(-x));
    case OP_LOG10: return log10_f(x);
    case OP_EXP2: return exp2_f(x);
    case OP_ERF: return safe_erf(x);
    case OP_ERFC: return erfc_f(x);
    case OP_ERFINV: return erfinv_f(x);
    case OP_TAN: return tan_f(x);
    case OP_ASIN: return asin_f(x);
    case OP_ACOS: return acos_f(x);
    case OP_ATAN: return atan_f(x);
    case OP_SINH: return sinh_f(x);
    case OP_COSH: return cosh_f(x);
    case OP_ASINH: return asinh_f(x);
    case OP_ACOSH: return acosh_f(x);
    case OP_ATANH: return atanh_f(x);
    // The activations' formulas are kit/math/scalar_ops.hpp's.
    case OP_SELU: return x > 0.0 ? FLIT(1.0507009873554804934lf) * x
                                 : FLIT(1.0507009873554804934lf) * FLIT(1.6732632423543772848lf) * expm1_f(x);
    case OP_HARDSIGMOID: return relu6_of_shifted(x) / 6.0;
    case OP_HARDSWISH: return x * relu6_of_shifted(x) / 6.0;
    case OP_MISH: return x * safe_tanh(log1p_f(safe_exp(x)));
    case OP_LOGSIGMOID: return (x < 0.0 ? x : 0.0) - log1p_f(safe_exp(-abs(x)));
  }
  return x;
}

ITYPE ipow(ITYPE base, ITYPE e) {
  if (e < 0) {
    if (base == 1) return ITYPE(1);
    if (base == -1) return (e & 1) != 0 ? ITYPE(-1) : ITYPE(1);
    return ITYPE(0);
  }
  ITYPE r = ITYPE(1);
  while (e != 0) {
    if ((e & 1) != 0) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

ITYPE unary_i(ITYPE x) {
  switch (OP) {
    case OP_NEG: return -x;
    case OP_ABS: {
#ifdef FERRY_FULL
      // Narrow types take abs in 32 bits: llvmpipe (LLVM 15) miscompiles the 64-bit select of a
      // sign-extended i32 into the unchanged value.
      if (IN_DT != DT_I64) {
        int v = int(x);
        return ITYPE(v < 0 ? -v : v);
      }
#endif
      return x < ITYPE(0) ? -x : x;
    }
    case OP_RELU: return x > 0 ? x : ITYPE(0);
    case OP_SQUARE: return x * x;
    case OP_SIGN: {
#ifdef FERRY_FULL
      if (IN_DT != DT_I64) {  // in 32 bits, as abs above
        int v = int(x);
        return ITYPE(v > 0 ? 1 : (v < 0 ? -1 : 0));
      }
#endif
      return x > ITYPE(0) ? ITYPE(1) : (x < ITYPE(0) ? ITYPE(-1) : ITYPE(0));
    }
  }
  return x;  // floor, ceil, trunc and round keep integers as they are
}

FTYPE binary_f(FTYPE x, FTYPE y) {
  switch (OP) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    case OP_DIV: return x / y;
    case OP_POW: return pow_f(x, y);
    case OP_MAXIMUM: return max_f(x, y);
    case OP_MINIMUM: return min_f(x, y);
    case OP_ATAN2: return atan2_f(x, y);
    case OP_FMOD: return fmod_f(x, y);
    case OP_REMAINDER: {  // fmod moved to y's sign (kit/math/elementwise_ops.hpp)
      FTYPE r = fmod_f(x, y);
      return (r != 0.0 && (r < 0.0) != (y < 0.0)) ? r + y : r;
    }
    case OP_FLOOR_DIVIDE: {  // PyTorch's div_floor_floating (kit/math/scalar_ops.hpp)
      if (y == 0.0) return x / y;
      FTYPE m = fmod_f(x, y);
      FTYPE d = (x - m) / y;
      if (m != 0.0 && (y < 0.0) != (m < 0.0)) d -= 1.0;
      if (d == 0.0) return sign_bit_of(x) != sign_bit_of(y) ? -FTYPE(0.0) : FTYPE(0.0);
      FTYPE f = floor(d);
      return d - f > 0.5 ? f + 1.0 : f;
    }
    case OP_HYPOT: return hypot_f(x, y);
    case OP_COPYSIGN: return copysign_of(x, y);
    case OP_XLOGY: return isnan(y) ? y : (x == 0.0 ? 0.0 : x * log_f(y));
  }
  return x;
}

// The derivative of an activation times g, the gradient of its output; z is the forward
// output y for relu, sigmoid and tanh, the forward input x for the gelus and silu. The
// formulas and their operation order are include/ferry/kit/math/grad_ops.hpp's (PyTorch's).
FTYPE grad_f(FTYPE g, FTYPE z) {
  switch (OP) {
    case OP_RELU_BACKWARD: return z <= 0.0 ? 0.0 : g;  // a NaN z passes the gradient
    case OP_SIGMOID_BACKWARD: return g * (1.0 - z) * z;
    case OP_TANH_BACKWARD: return g * (1.0 - z * z);
    case OP_GELU_BACKWARD: {
      FTYPE cdf = 0.5 * erfc_f(z * FLIT(-0.70710678118654752lf));
      FTYPE pdf = FLIT(0.39894228040143268lf) * safe_exp(z * z * -0.5);  // 1/sqrt(2 pi) exp(-z^2/2)
      return g * (cdf + z * pdf);
    }
    case OP_GELU_TANH_BACKWARD: {
      const FTYPE k = FLIT(0.79788456080286536lf), c = FLIT(0.044715lf);  // sqrt(2/pi), the cubic term
      FTYPE z_sq = z * z;
      FTYPE t = safe_tanh(k * (z + c * (z_sq * z)));
      FTYPE inner_derivative = k * (1.0 + 3.0 * c * z_sq);
      return g * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * inner_derivative);
    }
    case OP_SILU_BACKWARD: {
      FTYPE s = sigmoid_f(z);
      return g * s * (1.0 + z * (1.0 - s));
    }
  }
  return g;
}

// The ops the f64 modules compute (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp):
// every op of the float dtypes. shaders/shaders.cmake reads these lines.
// ferry-f64-ops: neg abs relu floor ceil trunc round frac sign reciprocal sqrt rsqrt square
// ferry-f64-ops: exp expm1 log log1p log2 log10 exp2 sin cos tan asin acos atan sinh cosh tanh
// ferry-f64-ops: asinh acosh atanh erf erfc erfinv sigmoid silu gelu gelu_tanh selu
// ferry-f64-ops: hardsigmoid hardswish mish logsigmoid
// ferry-f64-ops: add sub mul div pow maximum minimum atan2 fmod remainder floor_divide hypot
// ferry-f64-ops: copysign xlogy eq ne lt le gt ge
// ferry-f64-ops: relu_backward sigmoid_backward tanh_backward gelu_backward
// ferry-f64-ops: gelu_tanh_backward silu_backward where copy fill arange clamp

// The divisions with rounding (kit/math/elementwise_ops.hpp): the front-end
// refuses a zero divisor. Division truncates (OpSDiv); the remainders are
// made from it, as GLSL leaves % of negatives undefined.
#define FERRY_DIVIDE(T)                                        \
  {                                                            \
    T q = x / y, r = x - q * y;                                \
    bool signs_differ = (x < T(0)) != (y < T(0));              \
    if (OP == OP_FMOD) return r;                               \
    if (OP == OP_REMAINDER)                                    \
      return (r != T(0) && (r < T(0)) != (y < T(0))) ? r + y : r; \
    return (signs_differ && r != T(0)) ? q - T(1) : q;         \
  }
int divide_i32(int x, int y) FERRY_DIVIDE(int)
#ifdef FERRY_FULL
int64_t divide_i64(int64_t x, int64_t y) FERRY_DIVIDE(int64_t)
#endif
#undef FERRY_DIVIDE

// Shift counts outside [0, bits) as PyTorch: 0 to the left, the sign to the right.
int shift_i32(int x, int y) {
  int bits = dt_bits(IN_DT);
  if (OP == OP_BITWISE_LEFT_SHIFT) return (y < 0 || y >= bits) ? 0 : x << y;
  int max_shift = IN_DT == DT_U8 ? bits : bits - 1;
  return x >> ((y < 0 || y >= max_shift) ? max_shift : y);
}
#ifdef FERRY_FULL
int64_t shift_i64(int64_t x, int64_t y) {
  if (OP == OP_BITWISE_LEFT_SHIFT) return (y < 0 || y >= 64) ? int64_t(0) : x << y;
  return x >> ((y < 0 || y >= 63) ? int64_t(63) : y);
}
#endif

ITYPE binary_i(ITYPE x, ITYPE y) {
  bool bool_out = OUT_DT == DT_BOOL;
  switch (OP) {
    case OP_ADD: return bool_out ? ITYPE((x | y) != 0 ? 1 : 0) : x + y;
    case OP_SUB: return bool_out ? ITYPE(x != y ? 1 : 0) : x - y;
    case OP_MUL: return bool_out ? ITYPE((x & y) != 0 ? 1 : 0) : x * y;
    case OP_POW: return bool_out ? ITYPE((x != 0 || y == 0) ? 1 : 0) : ipow(x, y);
    case OP_MAXIMUM: return max(x, y);
    case OP_MINIMUM: return min(x, y);
    case OP_FMOD:
    case OP_REMAINDER:
    case OP_FLOOR_DIVIDE:
#ifdef FERRY_FULL
      // Narrow types divide in 32 bits: llvmpipe (LLVM 15) gets the sign tests wrong in 64
      // bits for a sign-extended i32 (as abs above).
      if (IN_DT != DT_I64) return ITYPE(divide_i32(int(x), int(y)));
      return divide_i64(x, y);
#else
      return divide_i32(x, y);
#endif
    case OP_BITWISE_AND: return x & y;
    case OP_BITWISE_OR: return x | y;
    case OP_BITWISE_XOR: return x ^ y;
    case OP_BITWISE_LEFT_SHIFT:
    case OP_BITWISE_RIGHT_SHIFT: {
#ifdef FERRY_FULL
      // Narrow types shift in 32 bits: llvmpipe (LLVM 15) takes the range test below wrongly
      // in 64 bits for a sign-extended i32 (as abs above).
      if (IN_DT != DT_I64) return ITYPE(shift_i32(int(x), int(y)));
      return shift_i64(x, y);
#else
      return shift_i32(x, y);
#endif
    }
  }
  return x;
}

bool compare_f(FTYPE x, FTYPE y) {
  switch (OP) {
    case OP_EQ: return x == y;
    case OP_NE: return x != y;  // true when either is NaN
    case OP_LT: return x < y;
    case OP_LE: return x <= y;
    case OP_GT: return x > y;
    case OP_GE: return x >= y;
  }
  return false;
}

bool compare_i(ITYPE x, ITYPE y) {
  switch (OP) {
    case OP_EQ: return x == y;
    case OP_NE: return x != y;
    case OP_LT: return x < y;
    case OP_LE: return x <= y;
    case OP_GT: return x > y;
    case OP_GE: return x >= y;
  }
  return false;
}

// clamp's bounds (s0, s1: lo; s2, s3: hi; s4 bit 0: lo given, bit 1: hi given), rounded to x's
// dtype by the host: a float's bits in the first word, a double's or an int64's in both.
#ifdef FERRY_F64
FTYPE clamp_bound_f(uint w0, uint w1) {
  return IN_DT == DT_F64 ? packDouble2x32(uvec2(w0, w1)) : FTYPE(uintBitsToFloat(w0));
}
#else
FTYPE clamp_bound_f(uint w0, uint w1) { return uintBitsToFloat(w0); }
#endif
FTYPE clamp_f(FTYPE v) {
  if (isnan(v)) return v;
  if ((p.s[4] & 1u) != 0u) {
    const FTYPE lo = clamp_bound_f(p.s[0], p.s[1]);
    v = v < lo ? lo : v;
  }
  if ((p.s[4] & 2u) != 0u) {
    const FTYPE hi = clamp_bound_f(p.s[2], p.s[3]);
    v = v > hi ? hi : v;
  }
  return v;
}
// Narrow integers compare in 32 bits (llvmpipe miscompiles 64-bit sign tests of sign-extended
// values: OP_ABS above).
ITYPE clamp_i(ITYPE v) {
#ifdef FERRY_FULL
  const ITYPE lo = ITYPE(p.s[0]) | (ITYPE(p.s[1]) << 32), hi = ITYPE(p.s[2]) | (ITYPE(p.s[3]) << 32);
  if (IN_DT != DT_I64) {
    int w = int(v);
    if ((p.s[4] & 1u) != 0u && w < int(lo)) w = int(lo);
    if ((p.s[4] & 2u) != 0u && w > int(hi)) w = int(hi);
    return ITYPE(w);
  }
#else
  const ITYPE lo = ITYPE(p.s[0]), hi = ITYPE(p.s[2]);
#endif
  if ((p.s[4] & 1u) != 0u && v < lo) v = lo;
  if ((p.s[4] & 2u) != 0u && v > hi) v = hi;
  return v;
}

uint offset_of(uint t, uvec4 coord) {
  if (CONTIGUOUS) return p.off[t] + coord.x;
  uvec4 s = p.stride[t];
  uint r = p.off[t];
  if (NDIM >= 1) r += coord.x * s.x;
  if (NDIM >= 2) r += coord.y * s.y;
  if (NDIM >= 3) r += coord.z * s.z;
  if (NDIM >= 4) r += coord.w * s.w;
  return r;
}

// Linear index -> coordinates over the first NDIM dims (row-major).
uvec4 coords_of(uint i) {
  uvec4 c = uvec4(0);
  if (NDIM == 1) {
    c.x = i;
  } else if (NDIM == 2) {
    c.y = i % p.size.y;
    c.x = i / p.size.y;
  } else if (NDIM == 3) {
    c.z = i % p.size.z;
    i /= p.size.z;
    c.y = i % p.size.y;
    c.x = i / p.size.y;
  } else {
    c.w = i % p.size.w;
    i /= p.size.w;
    c.z = i % p.size.z;
    i /= p.size.z;
    c.y = i % p.size.y;
    c.x = i / p.size.y;
  }
  return c;
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    uvec4 coord = coords_of(i);
    uint oi = offset_of(0, coord);
    if (OP == OP_FILL) {
      // s0: the value as float bits; s1, s2: the exact integer value (lo, hi), or the
      // double's bits for f64.
      if (OUT_DT == DT_F64) {
        STORE_F(o, OUT_DT, oi, LOAD_FILL_F64_)
      } else if (IS_FLOAT_DT(OUT_DT)) {
        STORE_F(o, OUT_DT, oi, uintBitsToFloat(p.s[0]))
      } else {
#ifdef FERRY_FULL
        STORE_I(o, OUT_DT, oi, int64_t(p.s[1]) | (int64_t(p.s[2]) << 32))
#else
        STORE_I(o, OUT_DT, oi, int(p.s[1]))
#endif
      }
    } else if (OP == OP_ARANGE) {
      // s4: the index of this dispatch's first element (a long arange comes in parts). f64:
      // s0, s1 start and s2, s3 step as a double's words, start + k step as the CPU computes it
      // (unfused). Else s0: start, s1: step as floats; s2 != 0: both are integers (exact for
      // ints).
      const uint k = i + p.s[4];
      bool done = false;
#ifdef FERRY_F64
      if (OUT_DT == DT_F64) {
        precise double v = packDouble2x32(uvec2(p.s[0], p.s[1])) +
                           double(k) * packDouble2x32(uvec2(p.s[2], p.s[3]));
        STORE_F(o, OUT_DT, oi, v)
        done = true;
      }
#endif
      if (done) {
      } else if (p.s[2] != 0u && !IS_FLOAT_DT(OUT_DT)) {
        STORE_I(o, OUT_DT, oi, ITYPE(int(uintBitsToFloat(p.s[0]))) + ITYPE(k) * ITYPE(int(uintBitsToFloat(p.s[1]))))
      } else {
        float v = uintBitsToFloat(p.s[0]) + float(k) * uintBitsToFloat(p.s[1]);
        if (IS_FLOAT_DT(OUT_DT)) {
          STORE_F(o, OUT_DT, oi, v)
        } else {
          STORE_I(o, OUT_DT, oi, float_to_itype(roundEven(v), OUT_DT))
        }
      }
    } else if (OP == OP_COPY) {
      uint ai = offset_of(1, coord);
      if (IS_FLOAT_DT(IN_DT)) {
        FTYPE v = LOAD_F(a, IN_DT, ai);
        if (IS_FLOAT_DT(OUT_DT)) {
          STORE_F(o, OUT_DT, oi, v)
        } else {
          STORE_I(o, OUT_DT, oi, float_to_itype(v, OUT_DT))
        }
      } else {
        ITYPE v = LOAD_I(a, IN_DT, ai);
        if (OUT_DT == DT_BOOL) v = ITYPE(v != 0 ? 1 : 0);
        STORE_I(o, OUT_DT, oi, v)
      }
    } else if (OP == OP_WHERE) {
      uint ci = offset_of(1, coord), ai = offset_of(2, coord), bi = offset_of(3, coord);
#ifdef FERRY_FULL
      bool cond = uint(a_u8[ci]) != 0u;
#else
      bool cond = a_u32[ci] != 0u;
#endif
      if (IS_FLOAT_DT(OUT_DT)) {
        STORE_F(o, OUT_DT, oi, cond ? LOAD_F(b, IN_DT, ai) : LOAD_F(c, IN_DT, bi))
      } else {
        STORE_I(o, OUT_DT, oi, cond ? LOAD_I(b, IN_DT, ai) : LOAD_I(c, IN_DT, bi))
      }
    } else if (OP == OP_CLAMP) {
      // x into [lo, hi], the CPU's clamp_loop: a NaN x stays, a NaN bound is never taken.
      uint ai = offset_of(1, coord);
      if (IS_FLOAT_DT(IN_DT)) {
        STORE_F(o, OUT_DT, oi, clamp_f(LOAD_F(a, IN_DT, ai)))
      } else {
        STORE_I(o, OUT_DT, oi, clamp_i(LOAD_I(a, IN_DT, ai)))
      }
    } else if (is_unary()) {
      uint ai = offset_of(1, coord);
      if (IS_FLOAT_DT(IN_DT)) {
        STORE_F(o, OUT_DT, oi, unary_f(LOAD_F(a, IN_DT, ai)))
      } else {
        STORE_I(o, OUT_DT, oi, unary_i(LOAD_I(a, IN_DT, ai)))
      }
    } else {
      uint ai = offset_of(1, coord), bi = offset_of(2, coord);
      if (is_compare()) {
        bool r = IS_FLOAT_DT(IN_DT) ? compare_f(LOAD_F(a, IN_DT, ai), LOAD_F(b, IN_DT, bi))
                                    : compare_i(LOAD_I(a, IN_DT, ai), LOAD_I(b, IN_DT, bi));
        STORE_I(o, OUT_DT, oi, ITYPE(r ? 1 : 0))
      } else if (is_grad()) {
        STORE_F(o, OUT_DT, oi, grad_f(LOAD_F(a, IN_DT, ai), LOAD_F(b, IN_DT, bi)))
      } else if (IS_FLOAT_DT(IN_DT)) {
        STORE_F(o, OUT_DT, oi, binary_f(LOAD_F(a, IN_DT, ai), LOAD_F(b, IN_DT, bi)))
      } else {
        STORE_I(o, OUT_DT, oi, binary_i(LOAD_I(a, IN_DT, ai), LOAD_I(b, IN_DT, bi)))
      }
    }
  }
}
