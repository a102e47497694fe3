// runtime/distributions_continuous.cpp — Cauchy, HalfNormal, LogNormal and Gumbel
// (ferry/distributions.hpp), PyTorch's formulas (the last three are TransformedDistributions of
// Normal and Uniform there, whose log_prob, cdf and icdf come out as these closed forms), and
// their KL divergences.
#include <numbers>

#include "distributions_internal.hpp"
#include "ferry/random.hpp"

namespace ferry::distributions {

using detail::broadcast_pair;
using detail::nan_like;
using detail::param_str;

namespace {
constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kPi = std::numbers::pi;
}  // namespace

// ---- Cauchy

Cauchy::Cauchy(const Tensor& loc, const Tensor& scale, bool validate_args)
    : Distribution(validate_args) {
  std::tie(loc_, scale_) = broadcast_pair("Cauchy", loc, scale);
  set_shapes(loc_.sizes(), {});
  check_parameter(logical_not(isnan(loc_)), "loc", loc_, "real");
  check_parameter(gt(scale_, Scalar(0)), "scale", scale_, "positive (> 0)");
}

// PyTorch's cauchy_ draw: tan(pi (u - 1/2)).
Tensor Cauchy::rsample(const Shape& sample_shape) const {
  const Tensor u =
      rand(extended_shape(sample_shape), {.dtype = loc_.dtype(), .device = loc_.device()});
  return loc_ + tan((u - 0.5) * kPi) * scale_;
}
Tensor Cauchy::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor z = (value - loc_) / scale_;
  return neg(log(scale_)) - std::log(kPi) - log1p(z * z);
}
Tensor Cauchy::cdf(const Tensor& value) const {
  check_value(value);
  return atan((value - loc_) / scale_) / kPi + 0.5;
}
Tensor Cauchy::icdf(const Tensor& value) const { return tan((value - 0.5) * kPi) * scale_ + loc_; }
Tensor Cauchy::entropy() const { return log(scale_) + std::log(4 * kPi); }
Tensor Cauchy::mean() const { return nan_like(loc_); }
Tensor Cauchy::variance() const { return full_like(loc_, std::numeric_limits<double>::infinity()); }
Tensor Cauchy::in_support(const Tensor& value) const { return logical_not(isnan(value)); }
std::string Cauchy::str() const {
  return fmt::format("Cauchy(loc: {}, scale: {})", param_str(loc_), param_str(scale_));
}

// ---- HalfNormal: |x|, x ~ Normal(0, scale)

// (The base Normal checks nothing itself: this distribution checks its parameters and values,
// so that a message names it, as PyTorch's does.)
HalfNormal::HalfNormal(const Tensor& scale, bool validate_args)
    : Distribution(validate_args),
      base_(scale.defined() ? zeros_like(scale) : Tensor(), scale, /*validate_args=*/false) {
  set_shapes(base_.batch_shape(), {});
  check_parameter(gt(base_.scale(), Scalar(0)), "scale", base_.scale(), "positive (> 0)");
}
Tensor HalfNormal::rsample(const Shape& sample_shape) const {
  return abs(base_.rsample(sample_shape));
}
Tensor HalfNormal::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor lp = base_.log_prob(value) + std::log(2.0);
  return where(ge(value, 0.0), lp, Scalar(-std::numeric_limits<double>::infinity()));
}
Tensor HalfNormal::cdf(const Tensor& value) const {
  check_value(value);
  return base_.cdf(value) * 2 - 1;
}
Tensor HalfNormal::icdf(const Tensor& value) const { return base_.icdf((value + 1) * 0.5); }
Tensor HalfNormal::entropy() const { return base_.entropy() - std::log(2.0); }
Tensor HalfNormal::mean() const { return base_.scale() * std::sqrt(2 / kPi); }
Tensor HalfNormal::variance() const { return base_.scale() * base_.scale() * (1 - 2 / kPi); }
Tensor HalfNormal::in_support(const Tensor& value) const { return ge(value, 0.0); }
std::string HalfNormal::str() const {
  return fmt::format("HalfNormal(scale: {})", param_str(base_.scale()));
}

// ---- LogNormal: exp(x), x ~ Normal(loc, scale)

LogNormal::LogNormal(const Tensor& loc, const Tensor& scale, bool validate_args)
    : Distribution(validate_args), base_(loc, scale, /*validate_args=*/false) {
  set_shapes(base_.batch_shape(), {});
  check_parameter(logical_not(isnan(base_.loc())), "loc", base_.loc(), "real");
  check_parameter(gt(base_.scale(), Scalar(0)), "scale", base_.scale(), "positive (> 0)");
}
Tensor LogNormal::rsample(const Shape& sample_shape) const {
  return exp(base_.rsample(sample_shape));
}
// The base's density at log(value), less log|d exp(x)/dx| = log(value).
Tensor LogNormal::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor x = log(value);
  return base_.log_prob(x) - x;
}
Tensor LogNormal::cdf(const Tensor& value) const {
  check_value(value);
  return base_.cdf(log(value));
}
Tensor LogNormal::icdf(const Tensor& value) const { return exp(base_.icdf(value)); }
Tensor LogNormal::entropy() const { return base_.entropy() + base_.loc(); }
Tensor LogNormal::mean() const { return exp(base_.loc() + base_.scale() * base_.scale() * 0.5); }
Tensor LogNormal::variance() const {
  const Tensor s2 = base_.scale() * base_.scale();
  return expm1(s2) * exp(base_.loc() * 2 + s2);
}
Tensor LogNormal::in_support(const Tensor& value) const { return gt(value, 0.0); }
std::string LogNormal::str() const {
  return fmt::format("LogNormal(loc: {}, scale: {})", param_str(base_.loc()),
                     param_str(base_.scale()));
}

// ---- Gumbel: loc - scale log(-log u)

Gumbel::Gumbel(const Tensor& loc, const Tensor& scale, bool validate_args)
    : Distribution(validate_args) {
  std::tie(loc_, scale_) = broadcast_pair("Gumbel", loc, scale);
  set_shapes(loc_.sizes(), {});
  check_parameter(logical_not(isnan(loc_)), "loc", loc_, "real");
  check_parameter(gt(scale_, Scalar(0)), "scale", scale_, "positive (> 0)");
}
// PyTorch's base: Uniform(tiny, 1 - eps), so that neither logarithm meets 0.
Tensor Gumbel::rsample(const Shape& sample_shape) const {
  const DType dt = loc_.dtype();
  const Tensor u = clamp(rand(extended_shape(sample_shape), {.dtype = dt, .device = loc_.device()}),
                         detail::smallest_normal(dt), 1 - detail::machine_eps(dt));
  return loc_ - scale_ * log(neg(log(u)));
}
Tensor Gumbel::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor y = (loc_ - value) / scale_;
  return y - exp(y) - log(scale_);
}
Tensor Gumbel::cdf(const Tensor& value) const {
  check_value(value);
  return exp(neg(exp((loc_ - value) / scale_)));
}
Tensor Gumbel::icdf(const Tensor& value) const { return loc_ - scale_ * log(neg(log(value))); }
Tensor Gumbel::entropy() const { return log(scale_) + (1 + kEulerGamma); }
Tensor Gumbel::mean() const { return loc_ + scale_ * kEulerGamma; }
Tensor Gumbel::variance() const { return scale_ * scale_ * (kPi * kPi / 6); }
Tensor Gumbel::in_support(const Tensor& value) const { return logical_not(isnan(value)); }
std::string Gumbel::str() const {
  return fmt::format("Gumbel(loc: {}, scale: {})", param_str(loc_), param_str(scale_));
}

Tensor kl_gumbel_gumbel(const Gumbel& p, const Gumbel& q) {
  const Tensor ct1 = p.scale() / q.scale(), ct2 = q.loc() / q.scale(), ct3 = p.loc() / q.scale();
  const Tensor t1 = neg(log(ct1)) - ct2 + ct3;
  const Tensor t2 = ct1 * kEulerGamma;
  const Tensor t3 = exp(ct2 + lgamma(ct1 + 1) - ct3);
  return t1 + t2 + t3 - (1 + kEulerGamma);
}

}  // namespace ferry::distributions
