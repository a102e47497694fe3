// shaders/transcendentals_f64.glsl — double overloads of the float math in common.glsl and
// transcendentals.glsl, for the f64 modules (Note [f64 on Vulkan] in
// runtime/vulkan/vk_pipelines.cpp). GLSL has double arithmetic, sqrt, floor and friends but no
// double exp, log, sin or pow (GLSL.std.450 takes them at 16 and 32 bits only), so they are
// written here from IEEE arithmetic and bit manipulation, as the float ones are (Note
// [Transcendentals in GLSL] in common.glsl), within a few ulp of the CPU's libm:
//  - products and sums carried exactly (Dekker's split, Knuth's two-sum), never fma: its
//    fusion is not guaranteed (lavapipe does not fuse);
//  - exp: Cody-Waite reduction by ln 2, exp(r) - 1 by its Taylor series to r^13 on
//    |r| <= ln2/2, scaled by 2^k in one rounding (denormal results included);
//  - log: x = 2^k m, log(m) = 2 atanh(s) with s = (m - 1) / (m + 1) carried in two doubles,
//    so that pow, log1p, log2 and log10 get log to ~2^-100;
//  - sin, cos, tan: Payne-Hanek reduction (1280 bits of 2/pi, integer arithmetic) to
//    |r| <= pi/4 in two doubles, Taylor kernels;
//  - atan: reduced to |u| <= 1/16 around atan(k/8), a Taylor series; asin, acos and atan2
//    from it on ratios that do not cancel;
//  - erf, erfc: a Taylor series below 1/2, exp(-x^2) g(x) beyond, with g fitted piecewise
//    (tools/gen_f64_tables.py); erfinv: Newton's method on erf/erfc from the float guess;
//  - fmod exactly, by long division of the mantissas.
// The constants that are not plain literals are generated: f64_tables.glsl.
// Requires common.glsl compiled with FERRY_F64.
#ifndef FERRY_TRANSCENDENTALS_F64_GLSL
#define FERRY_TRANSCENDENTALS_F64_GLSL
#include "transcendentals.glsl"  // erfinv's first guess is the float one
#include "f64_tables.glsl"

#define D_NAN packDouble2x32(uvec2(0u, 0x7ff80000u))
#define D_INF packDouble2x32(uvec2(0u, 0x7ff00000u))
// p = the polynomial in z with coefficients C (a const array, highest power first), by Horner.
#define HORNER_D(p, C, z)                                          \
  {                                                                \
    p = C[0];                                                      \
    for (int i_ = 1; i_ < C.length(); ++i_) p = p * (z) + C[i_];  \
  }

// ---- exact building blocks ----
bool sign_bit_of(double x) { return (unpackDouble2x32(x).y & 0x80000000u) != 0u; }
double copysign_of(double x, double y) {
  uvec2 bx = unpackDouble2x32(x), by = unpackDouble2x32(y);
  return packDouble2x32(uvec2(bx.x, (bx.y & 0x7fffffffu) | (by.y & 0x80000000u)));
}
// 2^n for a normal exponent n in [-1022, 1023].
double pow2_d(int n) { return packDouble2x32(uvec2(0u, uint(n + 1023) << 20)); }
// y 2^k for y in [0.5, 2] and k in [-1075, 1024], rounded once (a denormal result too).
double scale_d(double y, int k) {
  if (k > 1023) return y * 2.0lf * pow2_d(k - 1);
  if (k < -1021) return (y * pow2_d(k + 54)) * pow2_d(-54);
  return y * pow2_d(k);
}
// a + b = s + e exactly.
dvec2 two_sum_d(double a, double b) {
  precise double s = a + b;
  precise double bb = s - a;
  precise double e = (a - (s - bb)) + (b - bb);
  return dvec2(s, e);
}
// a + b = s + e exactly, for |a| >= |b|.
dvec2 fast_two_sum_d(double a, double b) {
  precise double s = a + b;
  precise double e = b - (s - a);
  return dvec2(s, e);
}
// a * b = p + e exactly (Dekker; |a|, |b| below 2^996).
dvec2 two_prod_d(double a, double b) {
  precise double p = a * b;
  precise double ca = 134217729.0lf * a;
  precise double ah = ca - (ca - a);
  precise double al = a - ah;
  precise double cb = 134217729.0lf * b;
  precise double bh = cb - (cb - b);
  precise double bl = b - bh;
  precise double e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return dvec2(p, e);
}

// ---- exp and log ----
// exp(r) - 1 for |r| <= 0.35: Taylor to r^13 / 13! (the rest is below 2^-60 relative).
const double EXPM1_C[12] = double[12](
    1.0lf / 6227020800.0lf, 1.0lf / 479001600.0lf, 1.0lf / 39916800.0lf, 1.0lf / 3628800.0lf,
    1.0lf / 362880.0lf, 1.0lf / 40320.0lf, 1.0lf / 5040.0lf, 1.0lf / 720.0lf, 1.0lf / 120.0lf,
    1.0lf / 24.0lf, 1.0lf / 6.0lf, 0.5lf);
double expm1_kernel(double r) {
  precise double p;
  HORNER_D(p, EXPM1_C, r)
  precise double e = r + r * r * p;
  return e;
}
// exp(x + lo) = y 2^k with y in [0.7, 1.5], for x in exp's finite range and |lo| tiny.
// ln 2 = LN2_A + LN2_B with LN2_A's last 32 bits zero, so k LN2_A is exact and x - k LN2_A
// too (Sterbenz).
const double LN2_A = 6.93147180369123816490e-01lf, LN2_B = 1.90821492927058770002e-10lf;
double exp_parts(double x, double lo, out int k) {
  precise double kd = roundEven(x * D_INV_LN2_HI);
  precise double hi = x - kd * LN2_A;
  precise double r = hi - (kd * LN2_B - lo);
  k = int(kd);
  precise double y = 1.0lf + expm1_kernel(r);
  return y;
}
double exp_f(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893383973096lf) return D_INF;
  if (x < -745.13321910194110842lf) return 0.0lf;
  int k;
  double y = exp_parts(x, 0.0lf, k);
  return scale_d(y, k);
}
double safe_exp(double x) { return exp_f(x); }

// log(x) = hi + lo, |lo| <= ulp(hi) / 2, accurate to ~2^-100 relative, for finite x > 0.
const double LOG_R_C[11] = double[11](
    2.0lf / 23.0lf, 2.0lf / 21.0lf, 2.0lf / 19.0lf, 2.0lf / 17.0lf, 2.0lf / 15.0lf,
    2.0lf / 13.0lf, 2.0lf / 11.0lf, 2.0lf / 9.0lf, 2.0lf / 7.0lf, 2.0lf / 5.0lf, 2.0lf / 3.0lf);
dvec2 log_dd(double x) {
  uvec2 w = unpackDouble2x32(x);
  int k;
  if ((w.y & 0x7ff00000u) == 0u) {  // denormal: normalise the mantissa in integers
    uint mh = w.y & 0xfffffu;
    int msb = mh != 0u ? findMSB(mh) + 32 : findMSB(w.x);
    uint64_t m = ((uint64_t(mh) << 32) | uint64_t(w.x)) << uint(52 - msb);
    w = uvec2(uint(m), (uint(m >> 32) & 0xfffffu) | 0x3ff00000u);
    k = msb - 1074;
  } else {
    k = int(w.y >> 20) - 1023;
    w.y = (w.y & 0xfffffu) | 0x3ff00000u;
  }
  if (w.y > 0x3ff6a09eu) {  // m > sqrt(2) (to 20 bits): use m / 2
    w.y -= 0x00100000u;
    k += 1;
  }
  precise double f = packDouble2x32(w) - 1.0lf;  // exact: m in [0.707, 1.415)
  // s = f / (2 + f) in two doubles: 2 + f = d + dl exactly, then the division's remainder.
  precise double d = 2.0lf + f;
  precise double dl = f - (d - 2.0lf);
  precise double s = f / d;
  dvec2 sd = two_prod_d(s, d);
  precise double sl = (((f - sd.x) - sd.y) - s * dl) / d;
  // 2 atanh(s) = 2 s + s R(z), z = s^2 <= 0.0295; terms to z^11 (the rest below 2^-62).
  precise double z = s * s;
  precise double r;
  HORNER_D(r, LOG_R_C, z)
  precise double tail = s * (r * z) + 2.0lf * sl * (1.0lf + z);
  precise double kd = double(k);
  dvec2 h = two_sum_d(kd * LN2_A, 2.0lf * s);  // both terms exact
  precise double lo = h.y + (kd * LN2_B + tail);
  return fast_two_sum_d(h.x, lo);
}
double log_f(double x) {
  if (isnan(x) || x < 0.0lf) return D_NAN;
  if (x == 0.0lf) return -D_INF;
  if (isinf(x)) return x;
  return log_dd(x).x;
}
double safe_log(double x) { return log_f(x); }

// exp(x) - 1: the series below ln2/2; beyond, 2^k (1 + e) - 1 = 2^k e + (2^k - 1), whose
// terms do not cancel for the k in between (2^k - 1 is exact up to 2^53).
double expm1_f(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a <= 0.34657359027997264lf) return a < 5.551115123125783e-17lf ? x : expm1_kernel(x);
  if (x > 709.782712893383973096lf) return D_INF;
  if (x < -40.0lf) return -1.0lf;
  precise double kd = roundEven(x * D_INV_LN2_HI);
  precise double hi = x - kd * LN2_A;
  precise double r = hi - kd * LN2_B;
  int k = int(kd);
  precise double e = expm1_kernel(r);
  if (k <= -2 || k > 56) return scale_d(1.0lf + e, k) - 1.0lf;
  precise double p = pow2_d(k);
  precise double res = p * e + (p - 1.0lf);
  return res;
}

// log(1 + x) as log(u) of u = 1 + x rounded, plus the rounding error c over u.
double log1p_f(double x) {
  if (isnan(x) || x < -1.0lf) return D_NAN;
  if (x == -1.0lf) return -D_INF;
  if (isinf(x)) return x;
  precise double u = 1.0lf + x;
  if (u == 1.0lf) return x;
  dvec2 l = log_dd(u);
  precise double c = u >= 2.0lf ? 1.0lf - (u - x) : x - (u - 1.0lf);
  precise double res = l.x + (l.y + c / u);
  return res;
}

// log(x) times a constant held in two doubles (1/ln 2, 1/ln 10).
double log_times(double x, double c_hi, double c_lo) {
  dvec2 l = log_dd(x);
  dvec2 p = two_prod_d(l.x, c_hi);
  precise double res = p.x + (p.y + (l.x * c_lo + l.y * c_hi));
  return res;
}
double log2_f(double x) {
  if (isnan(x) || x < 0.0lf) return D_NAN;
  if (x == 0.0lf) return -D_INF;
  if (isinf(x)) return x;
  uvec2 w = unpackDouble2x32(x);
  if (w.x == 0u && (w.y & 0xfffffu) == 0u && (w.y >> 20) != 0u) return double(int(w.y >> 20) - 1023);
  return log_times(x, D_INV_LN2_HI, D_INV_LN2_LO);
}
double log10_f(double x) {
  if (isnan(x) || x < 0.0lf) return D_NAN;
  if (x == 0.0lf) return -D_INF;
  if (isinf(x)) return x;
  if (x == 1.0lf) return 0.0lf;
  return log_times(x, D_INV_LN10_HI, D_INV_LN10_LO);
}

// 2^x = 2^k exp(f ln 2), x = k + f exactly, f ln 2 carried in two doubles.
double exp2_f(double x) {
  if (isnan(x)) return x;
  if (x >= 1024.0lf) return D_INF;
  if (x < -1075.0lf) return 0.0lf;
  precise double kd = roundEven(x);
  precise double f = x - kd;
  dvec2 p = two_prod_d(f, D_LN2_HI);
  precise double lo = p.y + f * D_LN2_LO;
  precise double e = expm1_kernel(p.x);
  precise double y = 1.0lf + (e + lo * (1.0lf + e));
  return scale_d(y, int(kd));
}

// pow as C99's (the special cases of pow_f), the rest exp(y log|x|) with y log|x| in two doubles.
double pow_f(double x, double y) {
  if (y == 0.0lf || x == 1.0lf) return 1.0lf;
  if (isnan(x) || isnan(y)) return D_NAN;
  double ay = abs(y);
  bool y_int = floor(y) == y;
  bool y_odd = y_int && ay < 9007199254740992.0lf && floor(ay * 0.5lf) * 2.0lf != ay;
  if (x == 0.0lf) {
    double r = y > 0.0lf ? 0.0lf : D_INF;
    return (sign_bit_of(x) && y_odd) ? -r : r;
  }
  if (isinf(y)) {
    double ax = abs(x);
    if (ax == 1.0lf) return 1.0lf;
    return (ax > 1.0lf) == (y > 0.0lf) ? D_INF : 0.0lf;
  }
  if (isinf(x)) {
    double r = y > 0.0lf ? D_INF : 0.0lf;
    return (x < 0.0lf && y_odd) ? -r : r;
  }
  if (x < 0.0lf && !y_int) return D_NAN;
  if (x == -1.0lf) return y_odd ? -1.0lf : 1.0lf;
  dvec2 l = log_dd(abs(x));
  double r;
  if (ay > 1e300lf) {  // beyond two_prod_d's range: |y log|x|| is far past exp's
    r = (l.x > 0.0lf) == (y > 0.0lf) ? D_INF : 0.0lf;
  } else {
    dvec2 t = two_prod_d(y, l.x);
    precise double tl = t.y + y * l.y;
    if (t.x > 709.782712893383973096lf) {
      r = D_INF;
    } else if (t.x < -745.13321910194110842lf) {
      r = 0.0lf;
    } else {
      int k;
      double m = exp_parts(t.x, tl, k);
      r = scale_d(m, k);
    }
  }
  return (x < 0.0lf && y_odd) ? -r : r;
}

// ---- sin, cos, tan ----
// 32 bits of 2/pi from bit `pos` (0 = the first bit after the point; the bits before are 0).
uint two_over_pi_bits_d(int pos) {
  if (pos <= -32) return 0u;
  if (pos < 0) return D_TWO_OVER_PI[0] >> uint(-pos);
  int i = pos >> 5, e = pos & 31;
  return e == 0 ? D_TWO_OVER_PI[i] : (D_TWO_OVER_PI[i] << uint(e)) | (D_TWO_OVER_PI[i + 1] >> uint(32 - e));
}
// x = (r.x + r.y) + q pi/2, |r| <= pi/4, for finite x: x 2/pi mod 4 from the mantissa times
// 192 bits of 2/pi (enough for every double: the closest to a multiple of pi/2 leaves ~2^-61).
dvec2 reduce_pio2(double x, out int q) {
  q = 0;
  if (abs(x) <= 0.78539816339744828lf) return dvec2(x, 0.0lf);
  uvec2 w = unpackDouble2x32(x);
  uint m[2] = uint[2](w.x, (w.y & 0xfffffu) | 0x100000u);  // |x| = m 2^e
  int e = int((w.y >> 20) & 0x7ffu) - 1075;
  uint win[6];  // the window from bit e - 2, least significant word first
  for (int i = 0; i < 6; ++i) win[5 - i] = two_over_pi_bits_d(e - 2 + 32 * i);
  // The product's low 192 bits: 2 integer bits (the quadrant) and 190 of fraction.
  uint prod[6];
  uint64_t carry = 0ul;
  for (int c = 0; c < 6; ++c) {
    uint64_t p0 = uint64_t(m[0]) * uint64_t(win[c]);
    uint64_t lo = carry + (p0 & 0xfffffffful), hi = p0 >> 32;
    if (c > 0) {
      uint64_t p1 = uint64_t(m[1]) * uint64_t(win[c - 1]);
      lo += p1 & 0xfffffffful;
      hi += p1 >> 32;
    }
    prod[c] = uint(lo);
    carry = (lo >> 32) + hi;
  }
  q = int(prod[5] >> 30);
  prod[5] &= 0x3fffffffu;
  bool negative = (prod[5] & 0x20000000u) != 0u;  // fraction >= 1/2: the next quadrant
  if (negative) {
    q += 1;
    uint borrow = 1u;  // 2^190 - fraction, word by word
    for (int c = 0; c < 6; ++c) {
      uint v = ~prod[c] + borrow;
      borrow = (borrow == 1u && v == 0u) ? 1u : 0u;
      prod[c] = v;
    }
    prod[5] &= 0x3fffffffu;
  }
  // The fraction in two doubles: each word is exact, summed from the top.
  double s = double(prod[5]) * 9.313225746154785e-10lf;  // 2^-30
  double lo = 0.0lf;
  double scale = 9.313225746154785e-10lf;
  for (int c = 4; c >= 0; --c) {
    scale *= 2.3283064365386963e-10lf;  // 2^-32
    dvec2 t = two_sum_d(s, double(prod[c]) * scale);
    s = t.x;
    lo += t.y;
  }
  dvec2 sh = fast_two_sum_d(s, lo);
  dvec2 p = two_prod_d(sh.x, D_PIO2_HI);
  precise double pl = p.y + (sh.x * D_PIO2_LO + sh.y * D_PIO2_HI);
  dvec2 r = fast_two_sum_d(p.x, pl);
  if (negative) r = -r;
  if (x < 0.0lf) {
    r = -r;
    q = -q;
  }
  return r;
}
// sin(r + rl) for |r| <= pi/4: Taylor to r^17 / 17!.
const double SIN_C[8] = double[8](
    1.0lf / 355687428096000.0lf, -1.0lf / 1307674368000.0lf, 1.0lf / 6227020800.0lf,
    -1.0lf / 39916800.0lf, 1.0lf / 362880.0lf, -1.0lf / 5040.0lf, 1.0lf / 120.0lf, -1.0lf / 6.0lf);
double sin_kernel_d(double r, double rl) {
  precise double z = r * r;
  precise double p;
  HORNER_D(p, SIN_C, z)
  precise double res = r + (r * z * p + rl * (1.0lf - 0.5lf * z));
  return res;
}
// cos(r + rl) for |r| <= pi/4: Taylor to r^18 / 18!, 1 - z/2 split so that it loses nothing.
const double COS_C[8] = double[8](
    1.0lf / 6402373705728000.0lf, -1.0lf / 20922789888000.0lf, 1.0lf / 87178291200.0lf,
    -1.0lf / 479001600.0lf, 1.0lf / 3628800.0lf, -1.0lf / 40320.0lf, 1.0lf / 720.0lf,
    -1.0lf / 24.0lf);
double cos_kernel_d(double r, double rl) {
  precise double z = r * r;
  precise double p;
  HORNER_D(p, COS_C, z)
  precise double hz = 0.5lf * z;
  precise double w = 1.0lf - hz;
  precise double res = w + (((1.0lf - w) - hz) + (z * z * -p - r * rl));
  return res;
}
double sin_f(double x) {
  if (isinf(x) || isnan(x)) return D_NAN;
  if (abs(x) < 7.450580596923828e-09lf) return x;
  int q;
  dvec2 r = reduce_pio2(x, q);
  switch (q & 3) {
    case 0: return sin_kernel_d(r.x, r.y);
    case 1: return cos_kernel_d(r.x, r.y);
    case 2: return -sin_kernel_d(r.x, r.y);
  }
  return -cos_kernel_d(r.x, r.y);
}
double cos_f(double x) {
  if (isinf(x) || isnan(x)) return D_NAN;
  int q;
  dvec2 r = reduce_pio2(x, q);
  switch (q & 3) {
    case 0: return cos_kernel_d(r.x, r.y);
    case 1: return -sin_kernel_d(r.x, r.y);
    case 2: return -cos_kernel_d(r.x, r.y);
  }
  return sin_kernel_d(r.x, r.y);
}
double tan_f(double x) {
  if (isinf(x) || isnan(x)) return D_NAN;
  if (abs(x) < 7.450580596923828e-09lf) return x;
  int q;
  dvec2 r = reduce_pio2(x, q);
  double s = sin_kernel_d(r.x, r.y), c = cos_kernel_d(r.x, r.y);
  return (q & 1) == 0 ? s / c : -c / s;
}

// ---- atan and the inverse trigonometric functions ----
// atan(t) = hi + lo for t in [0, 1]: atan(k/8) + atan(u), u = (t - k/8) / (1 + t k/8) in
// [-1/16, 1/16] (t - k/8 exact), atan(u) by its Taylor series to u^17.
const double ATAN_C[8] = double[8](
    1.0lf / 17.0lf, -1.0lf / 15.0lf, 1.0lf / 13.0lf, -1.0lf / 11.0lf, 1.0lf / 9.0lf,
    -1.0lf / 7.0lf, 1.0lf / 5.0lf, -1.0lf / 3.0lf);
dvec2 atan_dd(double t) {
  int k = int(roundEven(t * 8.0lf));
  double c = double(k) * 0.125lf;
  precise double u = (t - c) / (1.0lf + t * c);
  precise double z = u * u;
  precise double p;
  HORNER_D(p, ATAN_C, z)
  precise double au = u + u * (z * p);
  dvec2 s = two_sum_d(D_ATAN_K8_HI[k], au);
  return fast_two_sum_d(s.x, s.y + D_ATAN_K8_LO[k]);
}
// pi/2 - (a.x + a.y) in two doubles.
dvec2 pio2_minus(dvec2 a) {
  dvec2 s = two_sum_d(D_PIO2_HI, -a.x);
  return fast_two_sum_d(s.x, s.y + (D_PIO2_LO - a.y));
}
// atan(y / x) for y, x >= 0 (not both 0, neither NaN), in two doubles: the ratio taken
// as the one of y/x, x/y that is at most 1 (no overflow, no loss where it is tiny).
dvec2 atan_ratio(double y, double x) {
  if (y <= x) return atan_dd(y / x);
  return pio2_minus(atan_dd(x / y));
}
double atan_f(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a < 7.450580596923828e-09lf) return x;
  dvec2 r = a <= 1.0lf ? atan_dd(a) : (isinf(a) ? dvec2(D_PIO2_HI, D_PIO2_LO) : pio2_minus(atan_dd(1.0lf / a)));
  double res = r.x + r.y;
  return x < 0.0lf ? -res : res;
}
// asin(x) = atan(|x| / sqrt(1 - x^2)), acos(x) = atan(sqrt(1 - x^2) / x) (pi minus it for
// x < 0), with 1 - x^2 = (1 - |x|)(1 + |x|): neither ratio cancels.
double asin_f(double x) {
  double a = abs(x);
  if (isnan(x) || a > 1.0lf) return D_NAN;
  if (a < 7.450580596923828e-09lf) return x;
  precise double d = sqrt((1.0lf - a) * (1.0lf + a));
  dvec2 r = atan_ratio(a, d);
  double res = r.x + r.y;
  return x < 0.0lf ? -res : res;
}
double acos_f(double x) {
  double a = abs(x);
  if (isnan(x) || a > 1.0lf) return D_NAN;
  precise double d = sqrt((1.0lf - a) * (1.0lf + a));
  if (a == 0.0lf) return D_PIO2_HI;
  dvec2 r = atan_ratio(d, a);
  if (x > 0.0lf) return r.x + r.y;
  dvec2 s = two_sum_d(D_PI_HI, -r.x);
  return s.x + (s.y + (D_PI_LO - r.y));
}
// atan2(y, x): C99's special cases (signed zeros, infinities), then atan_ratio placed in
// its quadrant.
double atan2_f(double y, double x) {
  if (isnan(x) || isnan(y)) return D_NAN;
  bool y_neg = sign_bit_of(y), x_neg = sign_bit_of(x);
  double r;
  if (y == 0.0lf) {
    if (!x_neg) return y;
    r = D_PI_HI;
  } else if (x == 0.0lf) {
    r = D_PIO2_HI;
  } else if (isinf(x)) {
    if (isinf(y)) r = x_neg ? 2.356194490192345lf : 0.7853981633974483lf;
    else r = x_neg ? D_PI_HI : 0.0lf;
  } else if (isinf(y)) {
    r = D_PIO2_HI;
  } else {
    dvec2 z = atan_ratio(abs(y), abs(x));
    if (x_neg) {
      dvec2 s = two_sum_d(D_PI_HI, -z.x);
      r = s.x + (s.y + (D_PI_LO - z.y));
    } else {
      r = z.x + z.y;
    }
  }
  return y_neg ? -r : r;
}

// ---- hyperbolic functions and their inverses (fdlibm's range splits) ----
double sinh_f(double x) {
  if (isnan(x) || isinf(x)) return x;
  double a = abs(x), h = x < 0.0lf ? -0.5lf : 0.5lf;
  if (a < 7.450580596923828e-09lf) return x;
  if (a < 22.0lf) {
    double t = expm1_f(a);
    if (a < 1.0lf) return h * (2.0lf * t - t * t / (t + 1.0lf));
    return h * (t + t / (t + 1.0lf));
  }
  if (a < 709.782712893383973096lf) return h * exp_f(a);
  if (a <= 710.4758600739439lf) {  // exp(a) alone overflows: exp(a/2)^2 / 2
    double w = exp_f(0.5lf * a);
    precise double hw = h * w;
    precise double r = hw * w;
    return r;
  }
  return x * D_INF;
}
double cosh_f(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a < 0.34657359027997264lf) {
    if (a < 5.551115123125783e-17lf) return 1.0lf;
    double t = expm1_f(a), w = 1.0lf + t;
    return 1.0lf + (t * t) / (w + w);
  }
  if (a < 22.0lf) {
    double t = exp_f(a);
    return 0.5lf * t + 0.5lf / t;
  }
  if (a < 709.782712893383973096lf) return 0.5lf * exp_f(a);
  if (a <= 710.4758600739439lf) {
    double w = exp_f(0.5lf * a);
    precise double hw = 0.5lf * w;
    precise double r = hw * w;
    return r;
  }
  return D_INF;
}
double safe_tanh(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a > 22.0lf) return x < 0.0lf ? -1.0lf : 1.0lf;
  if (a < 7.450580596923828e-09lf) return x;
  double r;
  if (a < 1.0lf) {
    double t = expm1_f(-2.0lf * a);
    r = -t / (t + 2.0lf);
  } else {
    double t = expm1_f(2.0lf * a);
    r = 1.0lf - 2.0lf / (t + 2.0lf);
  }
  return x < 0.0lf ? -r : r;
}
// log(a) + ln 2, for a > 2^28 (where 2a would lose the sum's low part).
double log_plus_ln2(double a) {
  dvec2 l = log_dd(a);
  dvec2 s = two_sum_d(l.x, D_LN2_HI);
  return s.x + (s.y + (l.y + D_LN2_LO));
}
double asinh_f(double x) {
  if (isnan(x) || isinf(x)) return x;
  double a = abs(x), w;
  if (a < 7.450580596923828e-09lf) return x;
  if (a > 268435456.0lf) {
    w = log_plus_ln2(a);
  } else if (a > 2.0lf) {
    w = log_f(2.0lf * a + 1.0lf / (sqrt(a * a + 1.0lf) + a));
  } else {
    double t = a * a;
    w = log1p_f(a + t / (1.0lf + sqrt(1.0lf + t)));
  }
  return x < 0.0lf ? -w : w;
}
double acosh_f(double x) {
  if (isnan(x) || x < 1.0lf) return D_NAN;
  if (x == 1.0lf) return 0.0lf;
  if (isinf(x)) return x;
  if (x > 268435456.0lf) return log_plus_ln2(x);
  if (x > 2.0lf) return log_f(2.0lf * x - 1.0lf / (x + sqrt(x * x - 1.0lf)));
  double t = x - 1.0lf;
  return log1p_f(t + sqrt(2.0lf * t + t * t));
}
double atanh_f(double x) {
  double a = abs(x);
  if (isnan(x) || a > 1.0lf) return D_NAN;
  if (a == 1.0lf) return x * D_INF;
  if (a < 7.450580596923828e-09lf) return x;
  double t;
  if (a < 0.5lf) {
    double s = a + a;
    t = 0.5lf * log1p_f(s + s * a / (1.0lf - a));
  } else {
    t = 0.5lf * log1p_f((a + a) / (1.0lf - a));
  }
  return x < 0.0lf ? -t : t;
}

// ---- erf, erfc, erfinv ----
// erf(x) for |x| < 1/2: 2/sqrt(pi) times the Taylor series of x e^{-t^2} integrated, to x^27
// (the rest is below 2^-60 relative); the coefficients are (-1)^n / (n! (2n + 1)).
const double ERF_C[13] = double[13](
    -1.0lf / 168129561600.0lf, 1.0lf / 11975040000.0lf, -1.0lf / 918086400.0lf,
    1.0lf / 76204800.0lf, -1.0lf / 6894720.0lf, 1.0lf / 685440.0lf, -1.0lf / 75600.0lf,
    1.0lf / 9360.0lf, -1.0lf / 1320.0lf, 1.0lf / 216.0lf, -1.0lf / 42.0lf, 1.0lf / 10.0lf,
    -1.0lf / 3.0lf);
double erf_series(double x) {
  precise double z = x * x;
  precise double p;
  HORNER_D(p, ERF_C, z)
  precise double s = x * (z * p);
  precise double res = D_TWO_OVER_SQRTPI_HI * x + (D_TWO_OVER_SQRTPI_LO * x + D_TWO_OVER_SQRTPI_HI * s);
  return res;
}
// erfc(a) for 1/2 <= a: exp(-a^2) g(a), g(a) = exp(a^2) erfc(a) from the fitted polynomials
// (f64_tables.glsl), a^2 in two doubles and the scaling by 2^k done once, so that the
// denormal results near a = 27 round once.
double erfc_tail_d(double a) {
  if (a >= 27.3lf) return 0.0lf;
  double g;
  if (a < 4.0lf) {
    int k = int((a - 0.5lf) * 2.0lf);
    precise double t = 4.0lf * (a - (0.75lf + 0.5lf * double(k)));
    int base = k * (ERFC_G_DEG + 1);
    precise double p = ERFC_G[base];
    for (int i = 1; i <= ERFC_G_DEG; ++i) p = p * t + ERFC_G[base + i];
    g = p;
  } else {
    precise double t = (1.0lf / (a * a) - ERFC_S_C) / ERFC_S_W;
    precise double p = ERFC_S[0];
    for (int i = 1; i < ERFC_S.length(); ++i) p = p * t + ERFC_S[i];
    g = p / a;
  }
  dvec2 sq = two_prod_d(a, a);
  int k;
  double y = exp_parts(-sq.x, -sq.y, k);
  return scale_d(y * g, k);
}
double erfc_f(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a < 0.5lf) return 1.0lf - erf_series(x);
  if (x < 0.0lf) return a >= 6.0lf ? 2.0lf : 2.0lf - erfc_tail_d(a);
  return erfc_tail_d(a);
}
double safe_erf(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a < 0.5lf) return erf_series(x);
  double r = a >= 6.0lf ? 1.0lf : 1.0lf - erfc_tail_d(a);
  return x < 0.0lf ? -r : r;
}
// erfinv as the CPU's (kit/math/scalar_ops.hpp): a first guess (the float erfinv while
// 1 - |y| is within float's range of it, else from erfc's asymptote erfc(x) ~ exp(-x^2) /
// (x sqrt(pi))), then Newton's method on erf(x) = |y| until it stops moving x, its residual
// (1 - |y|) - erfc(x) from |y| = 1/2 on (1 - |y| is exact there; erf(x) - y would cancel).
double erfinv_f(double y) {
  double a = abs(y);
  if (isnan(y) || a > 1.0lf) return D_NAN;
  if (a == 1.0lf) return y * D_INF;
  if (y == 0.0lf) return y;
  double x;
  if (a < 0.9999999lf) {
    x = double(erfinv_f(float(a)));
  } else {
    double l = -log_f(1.0lf - a);
    x = sqrt(l);
    x = sqrt(l - log_f(x * 1.7724538509055160lf));
  }
  for (int i = 0; i < 8; ++i) {
    precise double r = a < 0.5lf ? safe_erf(x) - a : (1.0lf - a) - erfc_f(x);
    precise double step = r / (D_TWO_OVER_SQRTPI_HI * exp_f(-x * x));
    x -= step;
    if (abs(step) <= 1e-15lf * x) break;  // the next step is below rounding
  }
  return y < 0.0lf ? -x : x;
}

// ---- the rest ----
// fmod(x, y) exactly, as C's: the mantissas' long division in integers, one bit of x's
// exponent above y's per step, so no rounding.
double fmod_f(double x, double y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0lf) return D_NAN;
  double ax = abs(x), ay = abs(y);
  if (isinf(y) || ax < ay) return x;
  uvec2 bx = unpackDouble2x32(ax), by = unpackDouble2x32(ay);
  int ex = int(bx.y >> 20), ey = int(by.y >> 20);
  uint64_t mx = (uint64_t(bx.y & 0xfffffu) << 32) | uint64_t(bx.x);
  uint64_t my = (uint64_t(by.y & 0xfffffu) << 32) | uint64_t(by.x);
  if (ex == 0) ex = 1; else mx |= 0x10000000000000ul;  // a denormal's exponent is the smallest normal's
  if (ey == 0) ey = 1; else my |= 0x10000000000000ul;
  uint64_t m = mx % my;  // y's mantissa is below 2^52 when y is denormal
  for (int i = ex - ey; i > 0; --i) {
    m <<= 1;
    if (m >= my) m -= my;
  }
  // m 2^(ey - 1075): exact (a multiple of y's last place), m < 2^53.
  double r = ey - 1075 >= -1022 ? double(m) * pow2_d(ey - 1075) : (double(m) * pow2_d(ey - 1075 + 54)) * pow2_d(-54);
  return x < 0.0lf ? -r : r;
}
// hypot: the larger magnitude times sqrt(1 + r^2), r the ratio; infinite when either is.
double hypot_f(double a, double b) {
  if (isinf(a) || isinf(b)) return D_INF;
  if (isnan(a) || isnan(b)) return D_NAN;
  double m = max(abs(a), abs(b)), n = min(abs(a), abs(b));
  if (m == 0.0lf) return 0.0lf;
  double r = n / m;
  return m * sqrt(1.0lf + r * r);
}
double sigmoid_f(double x) { return 1.0lf / (1.0lf + safe_exp(-x)); }
double relu_f(double x) { return x > 0.0lf ? x : (isnan(x) ? x : 0.0lf); }
#endif  // FERRY_TRANSCENDENTALS_F64_GLSL
