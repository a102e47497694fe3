// shaders/transcendentals.glsl — the rest of the float transcendentals, written
// as common.glsl's exp_f, log_f and sin_f are (Note [Transcendentals in GLSL]
// there): from arithmetic, sqrt and bit manipulation, no GLSL builtin whose
// precision Vulkan leaves loose, `precise` where an error term is carried.
// Each is within 4 ulp of the CPU's libm on the conformance suite's
// special-value grid. The algorithms are FreeBSD msun's float ones (the
// s_atanf, e_asinf, e_acosf, e_sinhf, e_coshf, s_asinhf, e_acoshf, e_atanhf
// and s_erff range splits and coefficients), M. Giles' erfinv, and
// Cody-Waite exp2.
// Requires common.glsl.
#ifndef FERRY_TRANSCENDENTALS_GLSL
#define FERRY_TRANSCENDENTALS_GLSL

// 2^x: x = k + f with |f| <= 1/2 exact, 2^f = exp(f ln 2) by exp_f's series
// (|f ln 2| <= ln2 / 2, its range), scaled by 2^k. Integers give exact powers.
float exp2_f(float x) {
  if (isnan(x)) return x;
  if (x >= 128.0) return F_INF;
  if (x < -150.0) return 0.0;
  precise float k = roundEven(x);
  precise float r = (x - k) * 0.693147180559945309;
  precise float p = (((((1.0 / 5040.0) * r + 1.0 / 720.0) * r + 1.0 / 120.0) * r + 1.0 / 24.0) * r +
                     1.0 / 6.0) * r + 0.5;
  precise float y = 1.0 + (p * r * r + r);
  int ki = int(k);
  if (ki > 127) return y * 2.0 * uintBitsToFloat(uint(ki - 1 + 127) << 23);
  if (ki < -126) return y * uintBitsToFloat(uint(ki + 64 + 127) << 23) * 5.42101086242752217e-20;
  return y * uintBitsToFloat(uint(ki + 127) << 23);
}

// log10(x) as log(x) / ln 10, both in two floats (log2_f's scheme); the
// powers of ten come out exact.
float log10_f(float x) {
  if (isnan(x) || x < 0.0) return F_NAN;
  if (x == 0.0) return -F_INF;
  if (isinf(x)) return x;
  if (x == 1.0) return 0.0;
  vec2 l = log_f2(x);
  vec2 p = two_prod(l.x, 0.4342944920063019);  // 1 / ln 10 = this - 1.0103050e-8
  precise float lo = p.y + (l.x * -1.0103050118726031e-08 + l.y * 0.4342944920063019);
  return p.x + lo;
}

// tan on the reduced argument: sin/cos of r, or -cos/sin in the odd quadrants.
float tan_f(float x) {
  if (isinf(x) || isnan(x)) return F_NAN;
  int q;
  float r = reduce_pio2(x, q);
  float s = sin_kernel(r), c = cos_kernel(r);
  return (q & 1) == 0 ? s / c : -c / s;
}

// atan: |x| mapped into [-7/16, 7/16] around one of atan(1/2), atan(1),
// atan(3/2), pi/2 (each in two floats), then an odd polynomial.
float atan_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a >= 67108864.0) return x < 0.0 ? -1.5707963267948966 : 1.5707963267948966;
  int id = -1;
  float t = x;
  if (a >= 0.4375) {
    if (a < 1.1875) {
      if (a < 0.6875) {
        id = 0;
        t = (2.0 * a - 1.0) / (2.0 + a);
      } else {
        id = 1;
        t = (a - 1.0) / (a + 1.0);
      }
    } else if (a < 2.4375) {
      id = 2;
      t = (a - 1.5) / (1.0 + 1.5 * a);
    } else {
      id = 3;
      t = -1.0 / a;
    }
  } else if (a < 2.44140625e-4) {
    return x;
  }
  precise float z = t * t;
  precise float w = z * z;
  precise float s1 = z * (3.3333328366e-01 + w * (1.4253635705e-01 + w * 6.1687607318e-02));
  precise float s2 = w * (-1.9999158382e-01 + w * -1.0648017377e-01);
  if (id < 0) return t - t * (s1 + s2);
  const float HI[4] = float[4](4.6364760399e-01, 7.8539812565e-01, 9.8279368877e-01, 1.5707962513e+00);
  const float LO[4] = float[4](5.0121582440e-09, 3.7748947079e-08, 3.4473217170e-08, 7.5497894159e-08);
  precise float r = HI[id] - ((t * (s1 + s2) - LO[id]) - t);
  return x < 0.0 ? -r : r;
}

// asin and acos share a rational approximation R(t) of (asin(sqrt t) - sqrt t) / sqrt t.
float asin_rational(float t) {
  precise float p = t * (1.6666586697e-01 + t * (-4.2743422091e-02 + t * -8.6563630030e-03));
  precise float q = 1.0 + t * -7.0662963390e-01;
  return p / q;
}

// asin: x + x R(x^2) below 1/2; above, pi/2 - 2 asin(sqrt((1 - |x|) / 2)),
// with sqrt split into a short head and its remainder so that the
// subtraction from pi/2 loses nothing.
float asin_f(float x) {
  float a = abs(x);
  if (isnan(x) || a > 1.0) return F_NAN;
  if (a == 1.0) return x * 1.5707963267948966;
  if (a < 0.5) return a < 2.44140625e-4 ? x : x + x * asin_rational(x * x);
  precise float t = (1.0 - a) * 0.5;
  float s = sqrt(t), r = asin_rational(t);
  precise float res;
  if (a >= 0.975) {
    res = 1.5707962513e+00 - (2.0 * (s + s * r) - 7.5497894159e-08);
  } else {
    precise float df = uintBitsToFloat(floatBitsToUint(s) & 0xfffff000u);
    precise float c = (t - df * df) / (s + df);
    precise float p = 2.0 * s * r - (7.5497894159e-08 - 2.0 * c);
    precise float q = 7.8539812565e-01 - 2.0 * df;
    res = 7.8539812565e-01 - (p - q);
  }
  return x < 0.0 ? -res : res;
}

// acos: pi/2 - asin(x) below 1/2; above, 2 asin(sqrt((1 - |x|) / 2)) (or pi
// minus it for x < 0), the same split of sqrt as asin.
float acos_f(float x) {
  float a = abs(x);
  if (isnan(x) || a > 1.0) return F_NAN;
  if (a == 1.0) return x > 0.0 ? 0.0 : 3.1415926535897932;
  if (a < 0.5) {
    if (a <= 1.4901161e-08) return 1.5707963267948966;
    precise float r = asin_rational(x * x);
    return 1.5707962513e+00 - (x - (7.5497894159e-08 - x * r));
  }
  if (x < 0.0) {
    precise float z = (1.0 + x) * 0.5;
    float s = sqrt(z);
    precise float w = asin_rational(z) * s - 7.5497894159e-08;
    return 3.1415925026e+00 - 2.0 * (s + w);
  }
  precise float z = (1.0 - x) * 0.5;
  float s = sqrt(z);
  precise float df = uintBitsToFloat(floatBitsToUint(s) & 0xfffff000u);
  precise float c = (z - df * df) / (s + df);
  precise float w = asin_rational(z) * s + c;
  return 2.0 * (df + w);
}

// sinh and cosh from expm1 near 0 (no cancellation), exp below 9, exp / 2
// up to float's largest exp, and exp(|x| / 2)^2 / 2 in the last stretch
// before they overflow.
float sinh_f(float x) {
  if (isnan(x) || isinf(x)) return x;
  float a = abs(x), h = x < 0.0 ? -0.5 : 0.5;
  if (a < 9.0) {
    if (a < 2.44140625e-4) return x;
    float t = expm1_f(a);
    if (a < 1.0) return h * (2.0 * t - t * t / (t + 1.0));
    return h * (t + t / (t + 1.0));
  }
  if (a < 88.7216796875) return h * exp_f(a);
  if (a <= 89.41598629223294) {  // precise: w * w alone overflows
    float w = exp_f(0.5 * a);
    precise float hw = h * w;
    precise float r = hw * w;
    return r;
  }
  return x * F_INF;
}
float cosh_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a < 0.3465735912) {
    if (a < 2.44140625e-4) return 1.0;
    float t = expm1_f(a), w = 1.0 + t;
    return 1.0 + (t * t) / (w + w);
  }
  if (a < 9.0) {
    float t = exp_f(a);
    return 0.5 * t + 0.5 / t;
  }
  if (a < 88.7216796875) return 0.5 * exp_f(a);
  if (a <= 89.41598629223294) {
    float w = exp_f(0.5 * a);
    precise float hw = 0.5 * w;
    precise float r = hw * w;
    return r;
  }
  return F_INF;
}

// asinh, acosh and atanh as logarithms written to avoid cancellation: log1p
// near the origin (and near 1 for acosh), log(2x) + ... above 2, log(x) + ln 2
// where x^2 would overflow.
float asinh_f(float x) {
  if (isnan(x) || isinf(x)) return x;
  float a = abs(x), w;
  if (a < 3.7252903e-09) return x;
  if (a > 268435456.0) {
    vec2 l = log_f2(a);
    w = l.x + (l.y + 0.6931471824645996);
  } else if (a > 2.0) {
    w = log_f(2.0 * a + 1.0 / (sqrt(a * a + 1.0) + a));
  } else {
    float t = a * a;
    w = log1p_f(a + t / (1.0 + sqrt(1.0 + t)));
  }
  return x < 0.0 ? -w : w;
}
float acosh_f(float x) {
  if (isnan(x) || x < 1.0) return F_NAN;
  if (x == 1.0) return 0.0;
  if (isinf(x)) return x;
  if (x >= 268435456.0) {
    vec2 l = log_f2(x);
    return l.x + (l.y + 0.6931471824645996);
  }
  if (x > 2.0) return log_f(2.0 * x - 1.0 / (x + sqrt(x * x - 1.0)));
  float t = x - 1.0;
  return log1p_f(t + sqrt(2.0 * t + t * t));
}
float atanh_f(float x) {
  float a = abs(x);
  if (isnan(x) || a > 1.0) return F_NAN;
  if (a == 1.0) return x * F_INF;
  if (a < 3.7252903e-09) return x;
  float t;
  if (a < 0.5) {
    float s = a + a;
    t = 0.5 * log1p_f(s + s * a / (1.0 - a));
  } else {
    t = 0.5 * log1p_f((a + a) / (1.0 - a));
  }
  return x < 0.0 ? -t : t;
}

// erfc on common.glsl's rational forms of erf: 1 - erf where that does not
// cancel, the tail itself beyond 1.25 (which erf's 1 - tail throws away).
float erfc_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a < 0.84375) {
    if (x < 0.25) return 1.0 - safe_erf(x);
    precise float r = x * erf_small_ratio(x) + (x - 0.5);
    return 0.5 - r;
  }
  if (a < 1.25) {
    float r = erf_mid_ratio(a);
    return x > 0.0 ? 1.5493708849e-01 - r : 1.0 + (8.45062911e-01 + r);
  }
  if (x <= -6.0) return 2.0;
  if (a >= 28.0) return 0.0;
  float t = erfc_tail(a);
  return x > 0.0 ? t : 2.0 - t;
}

// erfinv: Giles' single-precision approximation, then one Newton step on
// erf(x) = y, its residual taken as (1 - |y|) - erfc(|x|) from |y| = 1/2 on
// (1 - |y| is exact there; erf(x) - y would cancel).
float erfinv_f(float y) {
  float a = abs(y);
  if (isnan(y) || a > 1.0) return F_NAN;
  if (a == 1.0) return y * F_INF;
  if (y == 0.0) return y;
  float w = -log_f((1.0 - a) * (1.0 + a)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  float x = p * a;
  precise float r = a < 0.5 ? safe_erf(x) - a : (1.0 - a) - erfc_f(x);
  precise float corrected = x - r / (1.1283791670955126 * exp_f(-x * x));
  return y < 0.0 ? -corrected : corrected;
}

// atan2(y, x): C99's special cases (signed zeros, infinities), then atan of
// |y / x| placed in its quadrant with pi in two floats.
float atan2_f(float y, float x) {
  if (isnan(x) || isnan(y)) return F_NAN;
  const float PI = 3.1415927410e+00, PI_LO = -8.7422776573e-08, PI_2 = 1.5707963705e+00;
  bool y_neg = (floatBitsToUint(y) & 0x80000000u) != 0u;
  bool x_neg = (floatBitsToUint(x) & 0x80000000u) != 0u;
  if (y == 0.0) return x_neg ? (y_neg ? -PI : PI) : y;
  if (x == 0.0) return y_neg ? -PI_2 : PI_2;
  if (isinf(x)) {
    float r = isinf(y) ? (x_neg ? 2.3561944902 : 0.7853981634) : (x_neg ? PI : 0.0);
    return y_neg ? -r : r;
  }
  if (isinf(y)) return y_neg ? -PI_2 : PI_2;
  int k = int((floatBitsToUint(y) >> 23) & 0xffu) - int((floatBitsToUint(x) >> 23) & 0xffu);
  float z;
  if (k > 26) {
    z = PI_2;
    x_neg = false;  // |y / x| > 2^26: pi/2 with y's sign
  } else if (k < -26 && x_neg) {
    z = 0.0;
  } else {
    z = atan_f(abs(y / x));
  }
  if (!x_neg) return y_neg ? -z : z;
  precise float r = PI - (z - PI_LO);
  return y_neg ? -r : r;
}

// fmod(x, y) exactly, as C's: the mantissas' long division in integers, one
// bit of x's exponent above y's per step (at most 277 steps), so no rounding.
float fmod_f(float x, float y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0) return F_NAN;
  float ax = abs(x), ay = abs(y);
  if (isinf(y) || ax < ay) return x;
  uint bx = floatBitsToUint(ax), by = floatBitsToUint(ay);
  int ex = int(bx >> 23), ey = int(by >> 23);
  uint mx = bx & 0x7fffffu, my = by & 0x7fffffu;
  if (ex == 0) {  // denormal: its exponent is that of the smallest normal
    ex = 1;
  } else {
    mx |= 0x800000u;
  }
  if (ey == 0) {
    ey = 1;
  } else {
    my |= 0x800000u;
  }
  uint m = mx % my;  // y's mantissa is below 2^23 when y is denormal
  for (int i = ex - ey; i > 0; --i) {
    m <<= 1;
    if (m >= my) m -= my;
  }
  // m * 2^e, e = ey - 150 in [-149, 104]: exact (a multiple of y's last
  // place); below 2^-126 in two steps, so that no operand is denormal.
  int e = ey - 150;
  float r = e >= -126 ? float(m) * uintBitsToFloat(uint(e + 127) << 23)
                      : float(m) * uintBitsToFloat(uint(e + 64 + 127) << 23) * 5.42101086242752217e-20;
  return x < 0.0 ? -r : r;
}

// hypot: the larger magnitude times sqrt(1 + r^2), r the ratio (no overflow
// or underflow in between); infinite when either is, even beside a NaN.
float hypot_f(float a, float b) {
  if (isinf(a) || isinf(b)) return F_INF;
  if (isnan(a) || isnan(b)) return F_NAN;
  float m = max(abs(a), abs(b)), n = min(abs(a), abs(b));
  if (m == 0.0) return 0.0;
  float r = n / m;
  return m * sqrt(1.0 + r * r);
}
#endif  // FERRY_TRANSCENDENTALS_GLSL
