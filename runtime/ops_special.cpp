// runtime/ops_special.cpp — lgamma, digamma, polygamma and mvlgamma (ferry/ops_special.hpp),
// composed of element-wise ops.
//
// Note [The gamma functions as compositions]
// Each function is evaluated where it is smooth and its asymptotic series converges fast, and
// brought back from there with exact identities, all as element-wise tensor ops:
//  - recurrence: for y < N, lgamma(y) = lgamma(y + N) - log(y (y + 1) ... (y + N - 1)) and
//    psi_n(y) = psi_n(y + N) + (-1)^(n+1) n! sum_k (y + k)^-(n+1), N = 16 (16 + 2n for psi_n,
//    whose series needs a larger argument as n grows);
//  - the asymptotic series at z >= N: Stirling's for lgamma (to z^-13), and
//    psi_n(z) ~ (-1)^(n+1) [(n-1)!/z^n + n!/(2 z^(n+1)) + sum_k B_2k (2k+n-1)!/((2k)! z^(2k+n))]
//    (log z - 1/(2z) - sum_k B_2k/(2k z^2k) for n = 0), ten Bernoulli terms: at z >= 16 the
//    first term left out is below 1e-20 of the result;
//  - reflection for x < 0: lgamma(x) = log(pi) - log|sin(pi x)| - lgamma(1 - x), and
//    psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) cot^(n)(pi x), the n-th derivative of cot being a
//    polynomial in cot (D_0 = c, D_(m+1) = -(1 + c^2) D_m'(c)) whose coefficients the host
//    computes for the call's n. sin and cot are taken of x - round(x), which is exact.
// The poles (0, the negative integers, the infinities) are set by `where`, and every branch
// is evaluated on inputs made safe first, so the branch not taken puts no NaN into a gradient.
// 16-bit inputs are computed in f32: the recurrence's product reaches 31^16. Near a zero of
// the function (lgamma at 1 and 2, digamma at 1.4616...) the error is absolute, about the
// compute dtype's epsilon, as for most libms' float versions.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::as_floating;
using detail::check_defined;
using detail::check_dtype;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// B_2, B_4, ..., B_20.
constexpr std::array<double, 10> kBernoulli = {
    1.0 / 6,       -1.0 / 30, 1.0 / 42,      -1.0 / 30,     5.0 / 66,
    -691.0 / 2730, 7.0 / 6,   -3617.0 / 510, 43867.0 / 798, -174611.0 / 330};

// x in the dtype the composition computes in: f64 for f64, f32 for everything else.
Tensor computing(const Tensor& x) {
  const Tensor f = as_floating(x);
  return f.dtype() == DType::f64 ? f : f.to(DType::f32);
}
// The result's dtype: x's for floats, f32 for integers and bool.
Tensor as_result(const Tensor& r, const Tensor& x) {
  return is_floating(x.dtype()) ? r.to(x.dtype()) : r;
}

// Horner's rule over tensors: c[0] + t (c[1] + t (c[2] + ...)).
Tensor horner(const Tensor& t, const std::vector<double>& c) {
  Tensor acc = full_like(t, c.back());
  for (auto i = c.size() - 1; i-- > 0;) acc = acc * t + c[i];
  return acc;
}

double factorial(std::int64_t n) {
  double f = 1;
  for (std::int64_t i = 2; i <= n; ++i) f *= double(i);
  return f;
}

// x <= 0 and a whole number (-inf included): the poles of the gamma functions.
Tensor poles(const Tensor& x) { return logical_and(le(x, 0), eq(x, floor(x))); }

// lgamma of y > 0 (finite): Stirling's series at z = y + 16 (or y), brought back.
Tensor lgamma_positive(const Tensor& y) {
  constexpr double kShift = 16;
  const Tensor small = lt(y, kShift);
  const Tensor ys = where(small, y, Scalar(1.0));
  Tensor product = ys;
  for (int k = 1; k < int(kShift); ++k) product = product * (ys + double(k));
  const Tensor z = where(small, y + kShift, y);
  const Tensor r = reciprocal(z);
  // 1/(12z) - 1/(360z^3) + 1/(1260z^5) - 1/(1680z^7) + 1/(1188z^9) - 691/(360360z^11) + 1/(156z^13)
  const Tensor series = r * horner(r * r, {1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680,
                                           1.0 / 1188, -691.0 / 360360, 1.0 / 156});
  const Tensor stirling = (z - 0.5) * log(z) - z + (0.5 * std::log(2 * std::numbers::pi)) + series;
  return stirling - where(small, log(product), Scalar(0.0));
}

// psi_n of y > 0 (finite): the asymptotic series at z = y + N (or y), brought back.
Tensor polygamma_positive(std::int64_t n, const Tensor& y) {
  const double shift = 16.0 + 2.0 * double(n);
  const Tensor small = lt(y, shift);
  const Tensor ys = where(small, y, Scalar(1.0));
  Tensor sum = zeros_like(ys);
  for (int k = 0; k < int(shift); ++k)
    sum = sum + (n == 0 ? reciprocal(ys + double(k)) : pow(ys + double(k), -double(n + 1)));
  const Tensor z = where(small, y + shift, y);
  const Tensor r = reciprocal(z), r2 = r * r;
  const double sign = n % 2 == 1 ? 1.0 : -1.0;  // (-1)^(n+1)
  Tensor asymptotic;
  if (n == 0) {
    std::vector<double> c = {0.0};
    for (std::size_t k = 1; k <= kBernoulli.size(); ++k)
      c.push_back(-kBernoulli[k - 1] / (2.0 * double(k)));
    asymptotic = log(z) - r * 0.5 + horner(r2, c);
  } else {
    // r^n [(n-1)! + n!/2 r + sum_k B_2k (2k+n-1)!/(2k)! r^2k]
    std::vector<double> c = {0.0};
    for (std::size_t k = 1; k <= kBernoulli.size(); ++k) {
      double ratio = 1;  // (2k+n-1)! / (2k)!
      for (std::int64_t i = 2 * std::int64_t(k) + 1; i <= 2 * std::int64_t(k) + n - 1; ++i)
        ratio *= double(i);
      c.push_back(kBernoulli[k - 1] * ratio);
    }
    const Tensor bracket = r * (factorial(n) / 2) + horner(r2, c) + factorial(n - 1);
    asymptotic = pow(r, double(n)) * bracket * sign;
  }
  return asymptotic + where(small, sum, Scalar(0.0)) * (sign * factorial(n));
}

// The coefficients of cot's n-th derivative as a polynomial in c = cot (lowest first).
std::vector<double> cot_derivative(std::int64_t n) {
  std::vector<double> d = {0.0, 1.0};  // D_0 = c
  for (std::int64_t m = 0; m < n; ++m) {
    std::vector<double> derivative(d.size() > 1 ? d.size() - 1 : 1, 0.0);
    for (std::size_t i = 1; i < d.size(); ++i) derivative[i - 1] = double(i) * d[i];
    std::vector<double> next(derivative.size() + 2, 0.0);  // -(1 + c^2) D'
    for (std::size_t i = 0; i < derivative.size(); ++i) {
      next[i] -= derivative[i];
      next[i + 2] -= derivative[i];
    }
    d = std::move(next);
  }
  return d;
}

// x - round(x), in [-1/2, 1/2]: sin and cot of pi times it are those of pi x up to sign.
Tensor reduced(const Tensor& x) { return x - round(x); }

}  // namespace

Tensor lgamma(const Tensor& x) {
  check_defined("lgamma", {&x});
  check_dtype(OpId::lgamma, x);
  const Tensor xf = computing(x);
  const Tensor pole = logical_or(poles(xf), eq(xf, kInf));
  const Tensor reflect = logical_and(lt(xf, 0), logical_not(pole));
  const Tensor arg = where(reflect, 1.0 - xf, where(pole, Scalar(1.0), xf));
  const Tensor main = lgamma_positive(arg);
  const Tensor xr = where(reflect, xf, Scalar(0.25));
  const Tensor reflected =
      std::log(std::numbers::pi) - log(abs(sin(reduced(xr) * std::numbers::pi))) - main;
  const Tensor r = where(pole, Scalar(kInf), where(reflect, reflected, main));
  return as_result(r, x);
}

Tensor polygamma(std::int64_t n, const Tensor& x) {
  const char* name = n == 0 ? "digamma" : "polygamma";
  check_defined(name, {&x});
  check_dtype(n == 0 ? OpId::digamma : OpId::polygamma, x);
  if (n < 0)
    throw ValueError(fmt::format("polygamma(n, x) does not support negative n, got {}", n));
  const Tensor xf = computing(x);
  const Tensor pole = poles(xf), pos_inf = eq(xf, kInf);
  const Tensor special = logical_or(pole, pos_inf);
  const Tensor reflect = logical_and(lt(xf, 0), logical_not(pole));
  const Tensor arg = where(reflect, 1.0 - xf, where(special, Scalar(1.0), xf));
  const Tensor main = polygamma_positive(n, arg);
  const Tensor xr = where(reflect, xf, Scalar(0.25));
  const Tensor cot = reciprocal(tan(reduced(xr) * std::numbers::pi));
  const Tensor reflected = main * (n % 2 == 0 ? 1.0 : -1.0) -
                           horner(cot, cot_derivative(n)) * std::pow(std::numbers::pi, n + 1);
  Tensor r = where(reflect, reflected, main);
  if (n == 0) {
    // 0 gives -inf (+inf at -0), as C's and PyTorch's; the negative integers and -inf NaN.
    const Tensor at_zero = copysign(full_like(xf, kInf), neg(xf));
    r = where(pole, where(eq(xf, 0), at_zero, full_like(xf, kNaN)), r);
    r = where(pos_inf, Scalar(kInf), r);
  } else {
    r = where(pole, Scalar(n % 2 == 1 ? kInf : -kInf), r);
    r = where(eq(xf, -kInf), Scalar(kNaN), where(pos_inf, Scalar(0.0), r));
  }
  return as_result(r, x);
}

Tensor digamma(const Tensor& x) { return polygamma(0, x); }

Tensor mvlgamma(const Tensor& x, std::int64_t p) {
  check_defined("mvlgamma", {&x});
  check_dtype(OpId::mvlgamma, x);
  if (p < 1)
    throw ValueError(fmt::format("mvlgamma: p has to be greater than or equal to 1, got {}", p));
  const Tensor xf = as_floating(x);
  // x - j/2 for j = p - 1, ..., 0 along a new last dim, as PyTorch's arange(-(p-1)/2, 1/2, 1/2).
  const Tensor offsets =
      arange(-0.5 * double(p - 1), 0.25, 0.5, {.dtype = xf.dtype(), .device = xf.device()});
  const Tensor terms = lgamma(xf.unsqueeze(-1) + offsets);
  return sum(terms, {-1}) + double(p) * double(p - 1) / 4 * std::log(std::numbers::pi);
}

}  // namespace ferry
