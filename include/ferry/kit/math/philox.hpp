// include/ferry/kit/math/philox.hpp — Philox-4x32-10 and the distributions built on it,
// shared by every backend (see Note [Counter-based RNG] in ferry/random.hpp).
//
// Element i of a draw with (seed, offset) uses its own 128-bit counter
// {lo(offset+i), hi(offset+i), 0, 0}
// and the key {lo(seed), hi(seed)}; a uniform takes the first output word, a
// normal takes the first two (Box-Muller, cosine branch). One element, one
// counter: any split of the work gives the same numbers.
//
// Note [f64 draws]
// f64 draws use the same counter per element but all four output words, for
// 53 random bits where f32 has 24. The f64 uniform's bits are the top 53 of
// (word0 << 32 | word1), so its leading 24 bits are the f32 uniform's: an f64
// draw is the f32 draw with 29 more bits. The f64 normal is the same
// Box-Muller (cosine branch) in double, u1 from words 0 and 2 and u2 from
// words 1 and 3, so its leading bits again extend the f32 normal's inputs.
#pragma once

#include <cmath>
#include <cstdint>

#include "ferry/config.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::math {

struct Philox4 {
  std::uint32_t v[4];
};

FERRY_HD void philox_mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                             std::uint32_t& lo) {
  std::uint64_t p = std::uint64_t(a) * b;
  hi = std::uint32_t(p >> 32);
  lo = std::uint32_t(p);
}

// The full 128-bit-counter form (checked against Random123's known answers).
FERRY_HD Philox4 philox4x32_10_raw(Philox4 ctr, std::uint32_t k0, std::uint32_t k1) {
  std::uint32_t c0 = ctr.v[0], c1 = ctr.v[1], c2 = ctr.v[2], c3 = ctr.v[3];
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c0, hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

FERRY_HD Philox4 philox4x32_10(std::uint64_t counter, std::uint64_t seed) {
  return philox4x32_10_raw(Philox4{{std::uint32_t(counter), std::uint32_t(counter >> 32), 0, 0}},
                           std::uint32_t(seed), std::uint32_t(seed >> 32));
}

// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
FERRY_HD float philox_uniform01(std::uint32_t bits) {
  return float(bits >> 8) * (1.0f / 16777216.0f);
}

FERRY_HD float philox_uniform(std::uint64_t seed, std::uint64_t counter, float low, float high) {
  float u = philox_uniform01(philox4x32_10(counter, seed).v[0]);
  float r = add_mul_unfused(low, high - low, u);  // never an FMA: every backend rounds twice
  return r < high ? r : low;                      // rounding must not reach `high`
}

FERRY_HD float philox_normal(std::uint64_t seed, std::uint64_t counter) {
  Philox4 r = philox4x32_10(counter, seed);
  // u1 in (0, 1] so log(u1) is finite.
  float u1 = (float(r.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);
  float u2 = philox_uniform01(r.v[1]);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
}

// Note [f64 draws]: 53 random bits, high word first.
FERRY_HD double philox_bits53(std::uint32_t hi, std::uint32_t lo) {
  return double(((std::uint64_t(hi) << 32) | lo) >> 11);
}
inline constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;

// Uniform in [low, high) in double (Note [f64 draws]).
FERRY_HD double philox_uniform_f64(std::uint64_t seed, std::uint64_t counter, double low,
                                   double high) {
  Philox4 r = philox4x32_10(counter, seed);
  double u = philox_bits53(r.v[0], r.v[1]) * kTwoPowMinus53;
  double x = add_mul_unfused(low, high - low, u);
  return x < high ? x : low;  // rounding must not reach `high`
}

// Standard normal in double (Note [f64 draws]).
FERRY_HD double philox_normal_f64(std::uint64_t seed, std::uint64_t counter) {
  Philox4 r = philox4x32_10(counter, seed);
  // u1 in (0, 1] so log(u1) is finite.
  double u1 = (philox_bits53(r.v[0], r.v[2]) + 1.0) * kTwoPowMinus53;
  double u2 = philox_bits53(r.v[1], r.v[3]) * kTwoPowMinus53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586477 * u2);
}

// Uniform integer in [low, low + range) from 64 random bits; the modulo bias
// is below 2^-32 for ranges under 2^32.
FERRY_HD std::int64_t philox_randint(std::uint64_t seed, std::uint64_t counter, std::int64_t low,
                                     std::uint64_t range) {
  Philox4 r = philox4x32_10(counter, seed);
  std::uint64_t bits = (std::uint64_t(r.v[1]) << 32) | r.v[0];
  return std::int64_t(std::uint64_t(low) + bits % range);
}

}  // namespace ferry::math
