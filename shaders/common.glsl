// shaders/common.glsl — what every ferry compute shader shares: dtype codes,
// tensors bound as storage buffers under several element types, loads and
// stores of any dtype, and the float math GLSL leaves undefined.
//
// Every shader is compiled twice (shaders/CMakeLists.txt): with FERRY_FULL
// (i64, f16/bf16/i16 as 16-bit storage, u8/i8/bool as 8-bit storage; the device needs
// shaderInt64 and 8/16-bit storage-buffer access) and without (f32 and i32
// only, for devices that lack those). The backend picks the variant per device.
// The f64 modules of some ops (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp)
// are full ones compiled with FERRY_F64 too: f64 tensors bound as doubles, and the float
// dtypes loaded into, computed in and stored from FTYPE = double (the device needs
// shaderFloat64).
//
// Conventions (runtime/vulkan/vk_kernels.hpp; what a shader shares with its
// host code is declared once, in shaders/abi/<name>.h, Note [Shader interfaces]
// in abi/abi.h): descriptor set 0, binding i is
// the i-th buffer the kernel binds; constant_id 0 is the workgroup size; push
// constants hold shapes, strides and each tensor's element offset within its
// binding (binding offsets are aligned down to minStorageBufferOffsetAlignment,
// so a tensor rarely starts at element 0 of its binding).
#extension GL_EXT_shader_16bit_storage : enable
#extension GL_EXT_shader_8bit_storage : enable
#ifdef FERRY_FULL
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif

#include "abi/abi.h"  // the dtype codes DT_*, shared with the host
#define IS_FLOAT_DT(dt) ((dt) <= DT_BF16 || (dt) == DT_F64)

// The type the float dtypes are loaded into and computed in.
#ifdef FERRY_F64
#define FTYPE double
#else
#define FTYPE float
#endif

// The integer type integer ops compute in: 64-bit where the device has it, so
// one code path serves i8, i16, i32, i64, u8 and bool (narrower results wrap on store).
#ifdef FERRY_FULL
#define ITYPE int64_t
#else
#define ITYPE int
#endif

// A tensor at binding B, visible as N_f32[], N_u32[] (and, in the full
// variant, N_u16[], N_u8[], N_i64[]; in the f64 modules N_f64[]): aliases of one buffer.
#ifdef FERRY_F64
#define FERRY_TENSOR_F64_(B, N) \
  layout(set = 0, binding = B, std430) buffer N##_f64_t { double N##_f64[]; };
#define LOAD_F64_(N, i) N##_f64[i]
#define STORE_F64_(N, i, v) N##_f64[i] = v;
#else
#define FERRY_TENSOR_F64_(B, N)
#define LOAD_F64_(N, i) 0.0  // never taken: no DT_F64 reaches these modules
#define STORE_F64_(N, i, v)
#endif
#ifdef FERRY_FULL
#define FERRY_TENSOR(B, N)                                                           \
  layout(set = 0, binding = B, std430) buffer N##_f32_t { float N##_f32[]; };       \
  layout(set = 0, binding = B, std430) buffer N##_u32_t { uint N##_u32[]; };        \
  layout(set = 0, binding = B, std430) buffer N##_u16_t { uint16_t N##_u16[]; };    \
  layout(set = 0, binding = B, std430) buffer N##_u8_t { uint8_t N##_u8[]; };       \
  layout(set = 0, binding = B, std430) buffer N##_i64_t { int64_t N##_i64[]; };     \
  FERRY_TENSOR_F64_(B, N)
#else
#define FERRY_TENSOR(B, N)                                                           \
  layout(set = 0, binding = B, std430) buffer N##_f32_t { float N##_f32[]; };       \
  layout(set = 0, binding = B, std430) buffer N##_u32_t { uint N##_u32[]; };
#endif

// ---- conversions (the same rules as include/ferry/kit/math/scalar_ops.hpp) ----
float bf16_to_float(uint b) { return uintBitsToFloat(b << 16); }
uint float_to_bf16(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;  // quiet NaN
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
uint float_to_f16(float f) { return packHalf2x16(vec2(f, 0.0)) & 0xffffu; }
float f16_to_float(uint h) { return unpackHalf2x16(h).x; }

// The bits of an integer dtype (the shifts' range).
int dt_bits(uint dt) {
  return dt == DT_I64 ? 64 : (dt == DT_U8 || dt == DT_I8) ? 8 : dt == DT_I16 ? 16 : 32;
}

// 8 and 16 stored bits of a signed integer, sign-extended (through 32-bit arithmetic: the
// 8/16-bit storage extensions give storage types, not arithmetic on them).
int sext8(uint b) { return int(b << 24) >> 24; }
int sext16(uint b) { return int(b << 16) >> 16; }

// float -> integer: truncate toward zero, NaN gives 0, saturate out of range.
// float -> bool: anything but zero is true, NaN too (as in PyTorch and C++);
// `f == 0.0` is false for NaN, so the test cannot depend on how the compiler
// orders a NaN comparison.
ITYPE float_to_itype(float f, uint dt) {
  if (dt == DT_BOOL) return ITYPE(f == 0.0 ? 0 : 1);
  if (isnan(f)) return ITYPE(0);
  if (dt == DT_U8) return ITYPE(clamp(f, 0.0, 255.0));
  if (dt == DT_I8) return ITYPE(clamp(f, -128.0, 127.0));
  if (dt == DT_I16) return ITYPE(clamp(f, -32768.0, 32767.0));
#ifdef FERRY_FULL
  if (dt == DT_I64) {
    if (f <= -9223372036854775808.0) return ITYPE(0x8000000000000000l);
    if (f >= 9223372036854775808.0) return ITYPE(0x7fffffffffffffffl);
    return ITYPE(f);
  }
#endif
  if (f <= -2147483648.0) return ITYPE(-2147483647 - 1);
  if (f >= 2147483648.0) return ITYPE(2147483647);
  return ITYPE(int(f));
}
#ifdef FERRY_F64
// The same rules from double, whose bounds are the integer limits rounded to double
// (kit/math/scalar_ops.hpp's float_to_int): 2^24 + 1 stays exact.
ITYPE float_to_itype(double f, uint dt) {
  if (dt == DT_BOOL) return ITYPE(f == 0.0 ? 0 : 1);  // not through float: 1e-300 is true
  if (isnan(f)) return ITYPE(0);
  if (dt == DT_U8) return ITYPE(clamp(f, 0.0, 255.0));
  if (dt == DT_I8) return ITYPE(clamp(f, -128.0, 127.0));
  if (dt == DT_I16) return ITYPE(clamp(f, -32768.0, 32767.0));
  if (dt == DT_I64) {
    if (f <= -9223372036854775808.0lf) return ITYPE(0x8000000000000000l);
    if (f >= 9223372036854775808.0lf) return ITYPE(0x7fffffffffffffffl);
    return ITYPE(f);
  }
  if (f <= -2147483648.0lf) return ITYPE(-2147483647 - 1);
  if (f >= 2147483647.0lf) return ITYPE(2147483647);
  return ITYPE(int(f));
}
#endif

// Loads element i of tensor N as float / as ITYPE. DT is a specialization
// constant, so the driver keeps one branch.
#ifdef FERRY_FULL
#define LOAD_F(N, DT, i)                                                                    \
  ((DT) == DT_F32    ? FTYPE(N##_f32[i])                                                    \
   : (DT) == DT_F16  ? FTYPE(f16_to_float(uint(N##_u16[i])))                                \
   : (DT) == DT_BF16 ? FTYPE(bf16_to_float(uint(N##_u16[i])))                               \
   : (DT) == DT_F64  ? FTYPE(LOAD_F64_(N, i))                                               \
   : (DT) == DT_I32  ? FTYPE(int(N##_u32[i]))                                               \
   : (DT) == DT_I64  ? FTYPE(N##_i64[i])                                                    \
   : (DT) == DT_I8   ? FTYPE(sext8(uint(N##_u8[i])))                                        \
   : (DT) == DT_I16  ? FTYPE(sext16(uint(N##_u16[i])))                                      \
                     : FTYPE(uint(N##_u8[i])))
#define LOAD_I(N, DT, i)                                                                    \
  ((DT) == DT_I64    ? N##_i64[i]                                                           \
   : (DT) == DT_I32  ? int64_t(int(N##_u32[i]))                                             \
   : (DT) == DT_U8 || (DT) == DT_BOOL ? int64_t(uint(N##_u8[i]))                            \
   : (DT) == DT_I8   ? int64_t(sext8(uint(N##_u8[i])))                                      \
   : (DT) == DT_I16  ? int64_t(sext16(uint(N##_u16[i])))                                    \
                     : float_to_itype(LOAD_F(N, DT, i), DT_I64))
// A double goes to f16 and bf16 through float (two roundings), as PyTorch's c10::Half(double).
#define STORE_F(N, DT, i, v)                                                                \
  {                                                                                         \
    FTYPE v_ = (v);                                                                         \
    uint i_ = (i);                                                                          \
    if ((DT) == DT_F32) N##_f32[i_] = float(v_);                                            \
    else if ((DT) == DT_F16) N##_u16[i_] = uint16_t(float_to_f16(float(v_)));               \
    else if ((DT) == DT_BF16) N##_u16[i_] = uint16_t(float_to_bf16(float(v_)));             \
    else if ((DT) == DT_F64) { STORE_F64_(N, i_, v_) }                                      \
    else if ((DT) == DT_I32) N##_u32[i_] = uint(int(float_to_itype(v_, DT_I32)));           \
    else if ((DT) == DT_I64) N##_i64[i_] = float_to_itype(v_, DT_I64);                      \
    else if ((DT) == DT_I16) N##_u16[i_] = uint16_t(uint(int(float_to_itype(v_, DT))) & 0xffffu); \
    else N##_u8[i_] = uint8_t(uint(int(float_to_itype(v_, DT))) & 0xffu);                  \
  }
#define STORE_I(N, DT, i, v)                                                                \
  {                                                                                         \
    int64_t v_ = (v);                                                                       \
    uint i_ = (i);                                                                          \
    if ((DT) == DT_I64) N##_i64[i_] = v_;                                                   \
    else if ((DT) == DT_I32) N##_u32[i_] = uint(v_);                                        \
    else if ((DT) == DT_U8 || (DT) == DT_I8) N##_u8[i_] = uint8_t(uint(v_) & 0xffu);        \
    else if ((DT) == DT_I16) N##_u16[i_] = uint16_t(uint(v_) & 0xffffu);                    \
    else if ((DT) == DT_BOOL) N##_u8[i_] = uint8_t(v_ != 0 ? 1u : 0u);                      \
    else STORE_F(N, DT, i_, FTYPE(v_))                                                      \
  }
#else
#define LOAD_F(N, DT, i) ((DT) == DT_F32 ? N##_f32[i] : float(int(N##_u32[i])))
#define LOAD_I(N, DT, i) ((DT) == DT_I32 ? int(N##_u32[i]) : float_to_itype(N##_f32[i], DT_I32))
#define STORE_F(N, DT, i, v)                                                                \
  {                                                                                         \
    float v_ = (v);                                                                         \
    if ((DT) == DT_F32) N##_f32[i] = v_;                                                    \
    else N##_u32[i] = uint(float_to_itype(v_, DT_I32));                                     \
  }
#define STORE_I(N, DT, i, v)                                                                \
  {                                                                                         \
    int v_ = (v);                                                                           \
    if ((DT) == DT_I32) N##_u32[i] = uint(v_);                                              \
    else N##_f32[i] = float(v_);                                                            \
  }
#endif

// ---- plane_grid's walk (runtime/vulkan/vk_kernels.hpp) ----
// visit(q, r) for element r < area of each plane q < planes: workgroup (x, y) takes a piece of
// plane y (and of y + the grid's height...), or, where a plane is smaller than a workgroup, the
// planes' elements run as one range.
#define FOR_EACH_PLANE_ELEMENT(planes, area, visit)                                      \
  {                                                                                      \
    const uint step_ = gl_NumWorkGroups.x * gl_WorkGroupSize.x;                          \
    if ((area) >= gl_WorkGroupSize.x) {                                                  \
      for (uint q_ = gl_WorkGroupID.y; q_ < (planes); q_ += gl_NumWorkGroups.y)          \
        for (uint r_ = gl_GlobalInvocationID.x; r_ < (area); r_ += step_) visit(q_, r_); \
    } else {                                                                             \
      for (uint e_ = gl_GlobalInvocationID.x; e_ < (planes) * (area); e_ += step_)       \
        visit(e_ / (area), e_ - (e_ / (area)) * (area));                                 \
    }                                                                                    \
  }

// ---- float math with the edge cases GLSL leaves undefined ----
// hi += v with the rounding error kept in lo (TwoSum: hi + lo is the exact sum of what was
// added, to the working precision twice over, while no term is infinite or NaN; `precise`
// keeps the compiler from simplifying it away). The sums of layer_norm's and batch_norm's
// statistics and gradients, and reduce.comp's and scan.comp's float sums.
void add_exact(inout FTYPE hi, inout FTYPE lo, FTYPE v) {
  precise FTYPE s = hi + v;
  precise FTYPE bv = s - hi;
  precise FTYPE err = (hi - (s - bv)) + (v - bv);
  hi = s;
  lo += err;
}

#define F_NAN uintBitsToFloat(0x7fc00000u)
#define F_INF uintBitsToFloat(0x7f800000u)
// A literal of the FTYPE math that float does not hold exactly, written with the lf suffix:
// glslang folds the conversion, so a float module holds a float constant and needs no doubles.
#define FLIT(x) FTYPE(x)
bool sign_bit_of(float x) { return (floatBitsToUint(x) & 0x80000000u) != 0u; }
float copysign_of(float x, float y) {
  return uintBitsToFloat((floatBitsToUint(x) & 0x7fffffffu) | (floatBitsToUint(y) & 0x80000000u));
}

// Note [Transcendentals in GLSL]
// GLSL's exp, log, pow and tanh have implementation-defined precision (the
// Vulkan spec allows exp 3 + 2|x| ulp, log 3 ulp only outside [0.5, 2]) and
// pow is undefined for x < 0 and for x = 0, y <= 0; on lavapipe exp was ~30
// ulp off for large inputs and log of a denormal gave -88.03. So these are
// written out, within 4 ulp of the CPU's libm (the conformance suite's
// special-value grids check it on every device), from arithmetic and bit
// manipulation only:
//  - exp_f: x = k ln2 + r (Cody-Waite, ln2 in two parts, |r| <= ln2/2), exp(r)
//    by its Taylor series to r^7 (truncation < 0.1 ulp), scaled by 2^k;
//  - no fma: lavapipe does not fuse it, and rewrote an unobserved chain of
//    them into a 67-ulp exp; `precise` keeps the evaluation order;
//  - log_f: x = 2^k m, m in [sqrt(2)/2, sqrt(2)), log(m) by fdlibm's logf
//    kernel; denormal inputs are normalised in integer arithmetic (the
//    tests before it compare floats, which a device that flushes denormal
//    operands answers as for 0, as NVIDIA's driver does: docs/kernel-contract.md,
//    "Denormals");
//  - log_f2: the same as an unevaluated sum hi + lo, for pow;
//  - pow_f: exp(y log|x|) with y log|x| carried in two floats, after C99's
//    special cases.
// Denormal results (exp(x) for x < -87.3) are made by multiplication and
// survive where the device preserves denormals (shaderDenormPreserveFloat32);
// a device that flushes them gives 0 there (docs/kernel-contract.md).
float exp_f(float x) {
  if (isnan(x)) return x;
  if (x > 88.72283935546875) return F_INF;
  if (x < -103.97208404541015625) return 0.0;
  precise float k = roundEven(x * 1.44269504088896341);
  precise float hi = x - k * 0.693145751953125;  // ln2's high part has 16 bits: exact
  precise float r = hi - k * 1.428606765330187045e-06;
  precise float p = (((((1.0 / 5040.0) * r + 1.0 / 720.0) * r + 1.0 / 120.0) * r + 1.0 / 24.0) * r +
                     1.0 / 6.0) * r + 0.5;
  precise float y = 1.0 + (p * r * r + r);
  int ki = int(k);
  // 2^k as one or two normal powers of two (k runs from -150 to 128).
  if (ki > 127) return y * 2.0 * uintBitsToFloat(uint(ki - 1 + 127) << 23);
  if (ki < -126) return y * uintBitsToFloat(uint(ki + 64 + 127) << 23) * 5.42101086242752217e-20;
  return y * uintBitsToFloat(uint(ki + 127) << 23);
}

// a * b = p + e exactly (Dekker's product with Veltkamp's split): without
// fma, which lavapipe does not fuse (and rewrites when unobserved).
vec2 two_prod(float a, float b) {
  precise float p = a * b;
  precise float ca = 4097.0 * a;
  precise float ah = ca - (ca - a);
  precise float al = a - ah;
  precise float cb = 4097.0 * b;
  precise float bh = cb - (cb - b);
  precise float bl = b - bh;
  precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return vec2(p, e);
}

// Note [Running products in float]
// Factors near 1 lose in a float product: while the product is near 1 too, each step's cross
// term (the product's excess times the factor's) lies below half an ulp and is rounded away,
// always downwards. A pieced reduction keeps every piece's product near 1, so on lavapipe
// 10^6 factors 1 + U(0, 1e-5) came out 0.3% low through prod (1.2% down a column) and 70,000
// factors 1 + U(0, 1e-4) 0.1% low through cumprod, where the CPU's and CUDA's running double
// products are within an ulp or two of the float result. So reduce.comp's prod and
// scan.comp's cumprod carry each product's rounding error in lo, as their sums carry theirs
// (add_exact): (hi + lo) v = hi v + lo v, hi v = p + e exactly (two_prod), lo becoming lo v + e;
// the result is hi + lo wherever hi is finite. two_prod's split overflows past 2^115 and
// loses exactness below 2^-100, so operands or products outside [1e-30, 1e30] multiply
// plainly (there a product is no longer a run of factors near 1). The f64 modules multiply
// plain doubles, as the CPU does.
void mul_carried(inout FTYPE hi, inout FTYPE lo, FTYPE v) {
#ifdef FERRY_F64
  hi *= v;
#else
  precise float p = hi * v;
  float e = 0.0;
  const float ap = abs(p);
  if (abs(hi) < 1e30 && abs(v) < 1e30 && ap < 1e30 && ap > 1e-30) e = two_prod(hi, v).y;
  lo = lo * v + e;
  hi = p;
#endif
}

// (hi + lo) (bhi + blo) = hi bhi + lo bhi + (hi + lo) blo, carried as mul_carried carries one
// factor, then renormalized (hi the rounded product, lo what it leaves). Steps leave lo well
// above an ulp of hi (hi is the plain float product, lo all it lost), so neither lo blo nor
// the renormalization may be left out: without them 10^6 factors combined by pieces in a tree
// came out 4e-5 low (a C++ model of it; 5e-9 with them).
void mul_carried_pair(inout FTYPE hi, inout FTYPE lo, FTYPE bhi, FTYPE blo) {
#ifdef FERRY_F64
  hi *= bhi;
#else
  const float cross = (hi + lo) * blo;
  mul_carried(hi, lo, bhi);
  lo += cross;
  precise float s = hi + lo;
  if (!isinf(s) && !isnan(s)) {
    precise float moved = s - hi;  // fast two-sum: |hi| >= |lo| here
    lo -= moved;
    hi = s;
  }
#endif
}

// log(x) = hi + lo (|lo| well below ulp(hi)), for finite x > 0.
vec2 log_f2(float x) {
  uint b = floatBitsToUint(x);
  int k = 0;
  if ((b & 0x7f800000u) == 0u) {  // denormal: normalise the mantissa in integers
    int msb = findMSB(b);
    b = (b << uint(23 - msb)) & 0x007fffffu | 0x3f800000u;
    k = msb - 149;
  } else {
    k = int(b >> 23) - 127;
    b = (b & 0x007fffffu) | 0x3f800000u;
  }
  if (b > 0x3fb504f3u) {  // m > sqrt(2): use m / 2
    b -= 0x00800000u;
    k += 1;
  }
  precise float f = uintBitsToFloat(b) - 1.0;  // exact: m in [sqrt(2)/2, sqrt(2))
  precise float s = f / (2.0 + f);
  precise float z = s * s;
  precise float w = z * z;
  precise float t1 = w * (0.40000972152 + w * 0.24279078841);
  precise float t2 = z * (0.66666662693 + w * 0.28498786688);
  vec2 hf = two_prod(0.5 * f, f);  // f^2 / 2 and its rounding error
  precise float hfsq = hf.x;
  precise float dk = float(k);
  // log = dk ln2_hi + f - hfsq + (s (hfsq + R) + dk ln2_lo): the first
  // product is exact (ln2_hi has 16 bits), the two sums and hfsq carry their
  // rounding errors into lo (two-sum, two_prod), the bracket is small.
  precise float a = dk * 6.9313812256e-01;
  precise float h1 = a + f;
  precise float e1 = abs(a) >= abs(f) ? (a - h1) + f : (f - h1) + a;
  precise float hi = h1 - hfsq;
  precise float e2 = abs(h1) >= hfsq ? (h1 - hi) - hfsq : (-hfsq - hi) + h1;
  precise float lo = e1 + e2 - hf.y + (s * (hfsq + t2 + t1) + dk * 9.0580006145e-06);
  precise float h2 = hi + lo;
  return vec2(h2, lo - (h2 - hi));
}

float log_f(float x) {
  if (isnan(x) || x < 0.0) return F_NAN;
  if (x == 0.0) return -F_INF;
  if (isinf(x)) return x;
  if (x == 1.0) return 0.0;
  vec2 l = log_f2(x);
  return l.x + l.y;
}

float safe_log(float x) { return log_f(x); }
float safe_sqrt(float x) { return x < 0.0 || isnan(x) ? F_NAN : sqrt(x); }
float safe_exp(float x) { return exp_f(x); }

// exp(x) - 1: a polynomial where exp(x) - 1 would cancel (|x| < 0.5; the
// Taylor terms to x^9/9! leave less than 2^-26 relative), else from exp_f.
float expm1_f(float x) {
  if (isnan(x)) return x;
  if (abs(x) >= 0.5) return x < -20.0 ? -1.0 : exp_f(x) - 1.0;
  precise float p = ((((((((1.0 / 362880.0) * x + 1.0 / 40320.0) * x + 1.0 / 5040.0) * x +
                          1.0 / 720.0) * x + 1.0 / 120.0) * x + 1.0 / 24.0) * x + 1.0 / 6.0) * x +
                     0.5);
  return x * p * x + x;
}

// log(1 + x) as log(u) * (x / (u - 1)) with u = 1 + x rounded (Goldberg's
// trick): u - 1 is exact, so the ratio undoes the rounding of 1 + x and the
// result keeps log_f's few ulp, down to the x whose 1 + x rounds to 1.
float log1p_f(float x) {
  if (isnan(x) || x < -1.0) return F_NAN;
  if (x == -1.0) return -F_INF;
  if (isinf(x)) return x;
  precise float u = 1.0 + x;
  if (u == 1.0) return x;  // |x| below half an ulp of 1: log1p(x) is x in float
  vec2 l = log_f2(u);
  precise float d = u - 1.0;
  if (d == x) return l.x + l.y;  // 1 + x was exact (every x from 2^24 up, among others)
  precise float r = x / d;
  return (l.x + l.y) * r;
}

// log2(x) as log(x) / ln 2, log(x) and 1 / ln 2 each carried in two floats
// (within about an ulp); exact at the powers of two, as libm is.
float log2_f(float x) {
  if (isnan(x) || x < 0.0) return F_NAN;
  if (x == 0.0) return -F_INF;
  if (isinf(x)) return x;
  uint b = floatBitsToUint(x);
  if ((b & 0x007fffffu) == 0u) return float(int(b >> 23) - 127);  // a normal power of two
  vec2 l = log_f2(x);
  vec2 p = two_prod(l.x, 1.44269502162933349609375);  // 1 / ln 2 = this + 1.92596299e-8
  precise float lo = p.y + (l.x * 1.9259629911266175e-08 + l.y * 1.44269502162933349609375);
  return p.x + lo;
}

// tanh(|x|): -expm1(-2|x|) / (expm1(-2|x|) + 2) below 0.55 (no cancellation
// at small |x|), 1 - 2 / (exp(2|x|) + 1) above (the subtracted term is small,
// so its error is), +-1 in float beyond 9.1; then the sign.
float safe_tanh(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a > 9.1) return sign(x);
  if (a < 1e-30) return x;
  float r;
  if (a < 0.55) {
    float t = expm1_f(-2.0 * a);
    r = -t / (t + 2.0);
  } else {
    r = 1.0 - 2.0 / (exp_f(2.0 * a) + 1.0);
  }
  return x < 0.0 ? -r : r;
}
// erf and erfc (transcendentals.glsl): FreeBSD msun's s_erff.c, its rational
// forms on three ranges of |x|, accurate to ~1 ulp in float (Abramowitz &
// Stegun 7.1.26 is only 1.5e-7 absolute).
// (erf(x) - x) / x = P/Q(x^2) for |x| < 0.84375.
float erf_small_ratio(float x) {
  float z = x * x;
  float p = 1.28379166e-01 + z * (-3.25042108e-01 + z * (-2.84817495e-02 + z * (-5.77027029e-03 + z * -2.37630166e-05)));
  float q = 1.0 + z * (3.97917223e-01 + z * (6.50222499e-02 + z * (5.08130628e-03 + z * (1.32494738e-04 + z * -3.96022827e-06))));
  return p / q;
}
// erf(|x|) - 0.845062911 = P/Q(|x| - 1) for 0.84375 <= |x| < 1.25.
float erf_mid_ratio(float a) {
  float s = a - 1.0;
  float p = -2.36211856e-03 + s * (4.14856118e-01 + s * (-3.72207874e-01 + s * (3.18346619e-01 + s * (-1.10894694e-01 + s * (3.54783043e-02 + s * -2.16637559e-03)))));
  float q = 1.0 + s * (1.06420880e-01 + s * (5.40397918e-01 + s * (7.18286544e-02 + s * (1.26171219e-01 + s * (1.36370839e-02 + s * 1.19844998e-02)))));
  return p / q;
}
// erfc(a) for 1.25 <= a < 28: exp(-a^2 - 0.5625 + R/S(1/a^2)) / a, the
// exponential split at z = a's top 11 bits so that z^2 (22 bits) + 0.5625 is
// exact: the first exp's argument carries no rounding (at a = 8 it would cost
// 30 ulp).
float erfc_tail(float a) {
  float s = 1.0 / (a * a);
  float ra, sa;
  if (a < 2.85714285) {
    ra = -9.86494403e-03 + s * (-6.93858572e-01 + s * (-1.05586262e+01 + s * (-6.23753324e+01 + s * (-1.62396669e+02 + s * (-1.84605092e+02 + s * (-8.12874355e+01 + s * -9.81432934e+00))))));
    sa = 1.0 + s * (1.96512716e+01 + s * (1.37657754e+02 + s * (4.34565877e+02 + s * (6.45387271e+02 + s * (4.29008140e+02 + s * (1.08635005e+02 + s * (6.57024977e+00 + s * -6.04244152e-02)))))));
  } else {
    ra = -9.86494292e-03 + s * (-7.99283237e-01 + s * (-1.77579549e+01 + s * (-1.60636384e+02 + s * (-6.37566443e+02 + s * (-1.02509513e+03 + s * -4.83519191e+02)))));
    sa = 1.0 + s * (3.03380607e+01 + s * (3.25792512e+02 + s * (1.53672958e+03 + s * (3.19985821e+03 + s * (2.55305040e+03 + s * (4.74528541e+02 + s * -2.24409524e+01))))));
  }
  float z = uintBitsToFloat(floatBitsToUint(a) & 0xffffe000u);
  return exp_f(-z * z - 0.5625) * exp_f((z - a) * (z + a) + ra / sa) / a;
}
float safe_erf(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a < 0.84375) return x + x * erf_small_ratio(x);
  float r = a < 1.25 ? 8.45062911e-01 + erf_mid_ratio(a) : (a < 6.0 ? 1.0 - erfc_tail(a) : 1.0);
  return x < 0.0 ? -r : r;
}
// sin and cos: GPU sin/cos are accurate only near [-pi, pi], so the argument
// is reduced exactly (Payne-Hanek, 96 bits of 2/pi, integer arithmetic only)
// to r in [-pi/4, pi/4] and a quadrant, then evaluated with fdlibm's float
// kernels (k_sinf.c, k_cosf.c; error below 1e-10 on that interval).
const uint TWO_OVER_PI[8] = uint[8](0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                    0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u);
// 32 bits of 2/pi starting at bit `pos` (0 = the first bit after the point; bits before are 0).
uint two_over_pi_bits(int pos) {
  if (pos <= -32) return 0u;
  if (pos < 0) return TWO_OVER_PI[0] >> uint(-pos);
  int i = pos >> 5, e = pos & 31;
  return e == 0 ? TWO_OVER_PI[i] : (TWO_OVER_PI[i] << uint(e)) | (TWO_OVER_PI[i + 1] >> uint(32 - e));
}
// x = r + q * pi/2 with |r| <= pi/4, for finite x.
float reduce_pio2(float x, out int q) {
  float ax = abs(x);
  q = 0;
  if (ax <= 0.78539816) return x;
  uint bits = floatBitsToUint(ax);
  uint m = (bits & 0x7fffffu) | 0x800000u;  // ax = m * 2^e
  int e = int(bits >> 23) - 150;
  // x * 2/pi mod 4 = m * W / 2^94, W = the 96 bits of 2/pi from bit e - 2.
  uint w0 = two_over_pi_bits(e - 2), w1 = two_over_pi_bits(e + 30), w2 = two_over_pi_bits(e + 62);
  uint hi1, lo1, hi2, lo2;
  umulExtended(m, w1, hi1, lo1);
  umulExtended(m, w2, hi2, lo2);
  uint mid = lo1 + hi2;
  uint top = m * w0 + hi1 + (mid < lo1 ? 1u : 0u);
  q = int(top >> 30);
  uint fhi = top & 0x3fffffffu, flo = mid;  // the fraction, in units of 2^-62
  float f;
  if ((fhi & 0x20000000u) != 0u) {  // fraction >= 1/2: take the next quadrant, r < 0
    q += 1;
    flo = ~flo + 1u;
    fhi = (~fhi & 0x3fffffffu) + (flo == 0u ? 1u : 0u);
    f = -(float(fhi) * 9.3132257e-10 + float(flo) * 2.1684043e-19);
  } else {
    f = float(fhi) * 9.3132257e-10 + float(flo) * 2.1684043e-19;
  }
  float r = f * 1.5707963267948966;
  if (x < 0.0) {
    r = -r;
    q = -q;
  }
  return r;
}
float sin_kernel(float x) {
  float z = x * x;
  return x + x * z * (-0.166666666416265235595 + z * (0.0083333293858894631756 +
                      z * (-0.000198393348360966317347 + z * 0.0000027183114939898219064)));
}
float cos_kernel(float x) {
  float z = x * x, w = z * z;
  float r = -0.00138867637746099294692 + z * 0.0000243904487962774090654;
  return ((1.0 + z * -0.499999997251031003120) + w * 0.0416666233237390631894) + (w * z) * r;
}
float sin_f(float x) {
  if (isinf(x) || isnan(x)) return F_NAN;
  int q;
  float r = reduce_pio2(x, q);
  switch (q & 3) {
    case 0: return sin_kernel(r);
    case 1: return cos_kernel(r);
    case 2: return -sin_kernel(r);
  }
  return -cos_kernel(r);
}
float cos_f(float x) {
  if (isinf(x) || isnan(x)) return F_NAN;
  int q;
  float r = reduce_pio2(x, q);
  switch (q & 3) {
    case 0: return cos_kernel(r);
    case 1: return -sin_kernel(r);
    case 2: return -cos_kernel(r);
  }
  return sin_kernel(r);
}
float sigmoid_f(float x) { return 1.0 / (1.0 + safe_exp(-x)); }
float relu_f(float x) { return x > 0.0 ? x : (isnan(x) ? x : 0.0); }
float max_f(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : (a > b ? a : b)); }
float min_f(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }
#ifdef FERRY_F64
double max_f(double a, double b) { return isnan(a) ? a : (isnan(b) ? b : (a > b ? a : b)); }
double min_f(double a, double b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }
double safe_sqrt(double x) { return x < 0.0lf || isnan(x) ? double(F_NAN) : sqrt(x); }
#endif

// C's pow: the special cases (0, +-inf, NaN, negative bases with integral
// exponents) defined as in C99 Annex F, the rest as exp(y log|x|) with
// y log|x| in two floats (Note [Transcendentals in GLSL]).
float pow_f(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return F_NAN;
  bool y_int = floor(y) == y;
  bool y_odd = y_int && abs(y) < 16777216.0 && (int(abs(y)) & 1) == 1;
  if (x == 0.0) {
    bool neg_zero = (floatBitsToUint(x) & 0x80000000u) != 0u;
    float r = y > 0.0 ? 0.0 : F_INF;
    return (neg_zero && y_odd) ? -r : r;
  }
  if (isinf(y)) {
    float ax = abs(x);
    if (ax == 1.0) return 1.0;
    return (ax > 1.0) == (y > 0.0) ? F_INF : 0.0;
  }
  if (isinf(x)) {  // +-inf: inf or 0 by y's sign, negative for -inf and an odd y
    float r = y > 0.0 ? F_INF : 0.0;
    return (x < 0.0 && y_odd) ? -r : r;
  }
  if (x < 0.0 && !y_int) return F_NAN;
  if (x == -1.0) return y_odd ? -1.0 : 1.0;  // (and log|x| = 0 below would meet a huge y)
  vec2 l = log_f2(abs(x));
  vec2 t = two_prod(y, l.x);
  precise float th = t.x;
  precise float tl = t.y + y * l.y;
  float r;
  if (th > 88.72283935546875) r = F_INF;
  else if (th < -103.97208404541015625) r = 0.0;
  else r = exp_f(th) * (1.0 + tl);  // exp(th + tl), |tl| tiny
  return (x < 0.0 && y_odd) ? -r : r;
}
