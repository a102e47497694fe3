// shaders/random.comp — random_uniform, random_normal and random_int: Philox-4x32-10 exactly
// as include/ferry/kit/math/philox.hpp, so that every backend draws the same numbers for the same seed.
// Element i uses the 64-bit counter offset + i, added with carry in 32-bit words (the base
// variant has no int64), under the key seed.
//
// The CPU reference calls logf and cosf, which are correctly rounded in practice; GLSL's log
// and cos are only required to be accurate to 2^-21 and 2^-11 absolute, which would put a
// normal draw visibly off the CPU's. So log and cos are computed here (fdlibm's logf,
// Cody-Waite reduction with cephes' polynomials), to a few ulp, and the arithmetic the CPU
// does in float is marked precise so the compiler cannot fuse or reorder it.
//
// random_int is low + bits % range with 64-bit bits and range. The full variant does that in
// int64; the base variant only supports ranges below 2^32 (the host checks), doing the
// 64-by-32-bit remainder by shift-and-subtract.
//
// The f64 modules (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp) draw as
// philox.hpp's Note [f64 draws]: 53 bits from two words, in double; the uniform is the CPU's
// bit for bit, the normal within an ulp or two (transcendentals_f64.glsl's log and cos
// against the C library's).
// ferry-f64-ops: random_uniform random_normal random_int
//
// Specialization and push constants: shaders/abi/random.h. Grid-stride loop over the
// output's elements (the output is contiguous).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FERRY_F64
#include "transcendentals_f64.glsl"
#endif
#include "abi/random.h"  // spec and push constants, codes: shared with the host

#include "ferry_ops.glsl"  // OP_RANDOM_*: ferry::OpId
#ifdef FERRY_FIXED_OP
#define OP FERRY_FIXED_OP  // a module of one op (Note [Per-op shader modules])
#endif

FERRY_TENSOR(0, o)

// Philox-4x32-10 of the 128-bit counter {ctr.x, ctr.y, 0, 0} under key {key.x, key.y}.
uvec4 philox(uvec2 ctr, uvec2 key) {
  uint c0 = ctr.x, c1 = ctr.y, c2 = 0u, c3 = 0u, k0 = key.x, k1 = key.y;
  for (int round = 0; round < 10; ++round) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return uvec4(c0, c1, c2, c3);
}

// log(x) for normal x > 0 (fdlibm's logf, < 1 ulp on the host).
float log_accurate(float x) {
  uint ix = floatBitsToUint(x);
  if (ix == 0x3f800000u) return 0.0;
  ix += 0x3f800000u - 0x3f3504f3u;  // reduce x into [sqrt(2)/2, sqrt(2)] times 2^k
  int k = int(ix >> 23) - 0x7f;
  float m = uintBitsToFloat((ix & 0x007fffffu) + 0x3f3504f3u);
  precise float f = m - 1.0;
  precise float s = f / (2.0 + f);
  precise float z = s * s;
  precise float w = z * z;
  precise float t1 = w * (0.40000972152 + w * 0.24279078841);
  precise float t2 = z * (0.66666662693 + w * 0.28498786688);
  precise float R = t2 + t1;
  precise float hfsq = 0.5 * f * f;
  float dk = float(k);
  precise float r = s * (hfsq + R) + dk * 9.0580006145e-06 - hfsq + f + dk * 6.9313812256e-01;
  return r;
}

// cos(t) for 0 <= t < 8: t = q pi/2 + r, |r| <= pi/4, with pi/2 in three parts whose products
// with q are exact; then cephes' cosf/sinf polynomials on r.
float cos_accurate(float t) {
  float q = roundEven(t * 0.63661977236758134);
  precise float r = ((t - q * 1.5703125) - q * 4.837512969970703125e-4) - q * 7.54978995489188216e-8;
  precise float z = r * r;
  precise float c =
      ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z -
      0.5 * z + 1.0;
  precise float s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
  uint quadrant = uint(q) & 3u;  // cos(r + q pi/2)
  return quadrant == 0u ? c : (quadrant == 1u ? -s : (quadrant == 2u ? -c : s));
}

float uniform01(uint bits) { return float(bits >> 8) * (1.0 / 16777216.0); }
#ifdef FERRY_F64
// Note [f64 draws]: the top 53 bits of (hi << 32 | lo), exact in a double.
double bits53(uint hi, uint lo) { return double(((uint64_t(hi) << 32) | uint64_t(lo)) >> 11); }
const double TWO_POW_MINUS_53 = 1.0lf / 9007199254740992.0lf;
#endif

// The int64 {lo, hi} as the nearest float (one rounding, like the host's conversion).
float int64_to_float(uint lo, uint hi) {
  bool neg = (hi & 0x80000000u) != 0u;
  if (neg) {  // two's-complement negation; -2^63 stays 2^63 as a magnitude
    lo = ~lo + 1u;
    hi = ~hi + (lo == 0u ? 1u : 0u);
  }
  float mag;
  if (hi == 0u) {
    mag = float(lo);
  } else {
    // The top 32 bits, with any lower one bit folded into bit 0 ("sticky"), round like the
    // whole: float keeps 24 bits, so bit 0 is far below the rounding position.
    int lz = 31 - findMSB(hi);
    uint top = lz == 0 ? hi : (hi << lz) | (lo >> (32 - lz));
    uint rest = lo << lz;
    top |= rest != 0u ? 1u : 0u;
    mag = float(top) * exp2(float(32 - lz));
  }
  return neg ? -mag : mag;
}

// (hi * 2^32 + lo) % d for d > 0, in 32-bit words: shift-and-subtract over lo's bits.
uint mod64by32(uint hi, uint lo, uint d) {
  uint rem = hi % d;
  for (int b = 31; b >= 0; --b) {
    bool over = (rem & 0x80000000u) != 0u;  // 2 * rem + bit does not fit: it exceeds d
    rem = (rem << 1) | ((lo >> b) & 1u);
    if (over || rem >= d) rem -= d;  // wraps to the right value when `over`
  }
  return rem;
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    uint carry;
    uint ctr_lo = uaddCarry(p.offset.x, i, carry);
    uvec4 r = philox(uvec2(ctr_lo, p.offset.y + carry), p.seed);
    uint oi = p.o_off + i;
#ifdef FERRY_F64
    if (DT == DT_F64 && OP != OP_RANDOM_INT) {
      const double lo = packDouble2x32(p.d0), hi = packDouble2x32(p.d1);
      if (OP == OP_RANDOM_UNIFORM) {
        precise double v = lo + (hi - lo) * (bits53(r.x, r.y) * TWO_POW_MINUS_53);
        STORE_F(o, DT, oi, v < hi ? v : lo)
      } else {  // lo, hi: mean, std
        double u1 = (bits53(r.x, r.z) + 1.0lf) * TWO_POW_MINUS_53;  // (0, 1]: log(u1) is finite
        double u2 = bits53(r.y, r.w) * TWO_POW_MINUS_53;
        precise double z = sqrt(-2.0lf * log_f(u1)) * cos_f(6.283185307179586477lf * u2);
        precise double v = lo + hi * z;
        STORE_F(o, DT, oi, v)
      }
      continue;
    }
#endif
    if (OP == OP_RANDOM_UNIFORM) {
      precise float v = p.p0 + (p.p1 - p.p0) * uniform01(r.x);
      STORE_F(o, DT, oi, v < p.p1 ? v : p.p0)
    } else if (OP == OP_RANDOM_NORMAL) {
      float u1 = (float(r.x >> 8) + 1.0) * (1.0 / 16777216.0);  // (0, 1]: log(u1) is finite
      precise float angle = 6.2831853071795864 * uniform01(r.y);
      precise float z = sqrt(-2.0 * log_accurate(u1)) * cos_accurate(angle);
      precise float v = p.p0 + p.p1 * z;
      STORE_F(o, DT, oi, v)
    } else {
#ifdef FERRY_FULL
      uint64_t bits = (uint64_t(r.y) << 32) | uint64_t(r.x);
      uint64_t range = (uint64_t(p.range.y) << 32) | uint64_t(p.range.x);
      uint64_t low = (uint64_t(p.low.y) << 32) | uint64_t(p.low.x);
      int64_t v = int64_t(low + bits % range);
      if (IS_FLOAT_DT(DT)) {
        STORE_F(o, DT, oi, FTYPE(v))
      } else {
        STORE_I(o, DT, oi, v)
      }
#else
      uint rem = mod64by32(r.y, r.x, p.range.x);  // the host made sure range < 2^32
      uint c2;
      uint lo = uaddCarry(p.low.x, rem, c2);
      uint hi = p.low.y + c2;
      if (IS_FLOAT_DT(DT)) {
        STORE_F(o, DT, oi, int64_to_float(lo, hi))
      } else {
        STORE_I(o, DT, oi, int(lo))  // i32 keeps the low word, like the host's wrapping
      }
#endif
    }
  }
}
