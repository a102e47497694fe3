// runtime/distributions.cpp — the base of torch.distributions (ferry/distributions.hpp) and
// its continuous distributions: Normal, Uniform, Exponential and Laplace, composed of ferry's
// ops. The formulas are PyTorch's (torch/distributions/*.py), written in the same order so
// that results and gradients carry over.
#include <fmt/format.h>

#include "distributions_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/random.hpp"

namespace ferry::distributions {

using namespace detail;

// ---- Distribution

void Distribution::set_shapes(Shape batch_shape, Shape event_shape) {
  batch_shape_ = std::move(batch_shape);
  event_shape_ = std::move(event_shape);
}

Shape Distribution::extended_shape(const Shape& sample_shape) const {
  return concat(concat(sample_shape, batch_shape_), event_shape_);
}

Tensor Distribution::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  return rsample(sample_shape).detach();
}

Tensor Distribution::rsample(const Shape&) const {
  throw UnsupportedError(
      fmt::format("{} has no reparameterized sample (rsample): use sample()", str()));
}

Tensor Distribution::cdf(const Tensor&) const {
  throw UnsupportedError(fmt::format("{} has no cdf", str()));
}
Tensor Distribution::icdf(const Tensor&) const {
  throw UnsupportedError(fmt::format("{} has no icdf", str()));
}
Tensor Distribution::entropy() const {
  throw UnsupportedError(fmt::format("{} has no entropy", str()));
}
Tensor Distribution::mean() const { throw UnsupportedError(fmt::format("{} has no mean", str())); }
Tensor Distribution::variance() const {
  throw UnsupportedError(fmt::format("{} has no variance", str()));
}
Tensor Distribution::stddev() const { return sqrt(variance()); }

void Distribution::check_parameter(const Tensor& ok, const char* what, const Tensor& parameter,
                                   const char* constraint) const {
  if (!validate_args_ || all_true(ok)) return;
  throw ValueError(fmt::format(
      "Expected parameter {} (tensor of shape {}) of distribution {} to satisfy the constraint "
      "{}, but found invalid values",
      what, shape_str(parameter.sizes()), str(), constraint));
}

void Distribution::check_value(const Tensor& value) const {
  if (!value.defined())
    throw ValueError(fmt::format("{}: the value is an undefined tensor", str()));
  if (!validate_args_) return;
  const Shape& v = value.sizes();
  const std::size_t ev = event_shape_.size();
  if (v.size() < ev || !std::equal(event_shape_.begin(), event_shape_.end(), v.end() - long(ev)))
    throw ShapeError(
        fmt::format("{}: the right-most sizes of the value must match event_shape: "
                    "{} vs {}",
                    str(), shape_str(v), shape_str(event_shape_)));
  const Shape expected = extended_shape();
  for (auto i = v.rbegin(), j = expected.rbegin(); i != v.rend() && j != expected.rend(); ++i, ++j)
    if (*i != 1 && *j != 1 && *i != *j)
      throw ShapeError(
          fmt::format("{}: the value is not broadcastable with batch_shape + event_shape: {} vs {}",
                      str(), shape_str(v), shape_str(expected)));
  if (!all_true(in_support(value)))
    throw ValueError(fmt::format(
        "Expected value argument (tensor of shape {}) to be within the support ({}) of the "
        "distribution {}, but found invalid values",
        shape_str(v), support_str(), str()));
}

// ---- Normal

Normal::Normal(const Tensor& loc, const Tensor& scale, bool validate_args)
    : Distribution(validate_args) {
  std::tie(loc_, scale_) = broadcast_pair("Normal", loc, scale);
  set_shapes(loc_.sizes(), {});
  check_parameter(logical_not(isnan(loc_)), "loc", loc_, "real");
  check_parameter(gt(scale_, Scalar(0)), "scale", scale_, "positive (> 0)");
}

Tensor Normal::rsample(const Shape& sample_shape) const {
  const Tensor eps =
      randn(extended_shape(sample_shape), {.dtype = loc_.dtype(), .device = loc_.device()});
  return loc_ + eps * scale_;
}

Tensor Normal::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor var = scale_ * scale_;
  const Tensor d = value - loc_;
  return neg(d * d) / (var * 2) - log(scale_) - kLogSqrt2Pi;
}

Tensor Normal::cdf(const Tensor& value) const {
  check_value(value);
  return (erf((value - loc_) * reciprocal(scale_) / std::sqrt(2.0)) + 1) * 0.5;
}

Tensor Normal::icdf(const Tensor& value) const {
  return loc_ + scale_ * erfinv(value * 2 - 1) * std::sqrt(2.0);
}

Tensor Normal::entropy() const { return log(scale_) + (0.5 + kLogSqrt2Pi); }
Tensor Normal::variance() const { return scale_ * scale_; }
Tensor Normal::in_support(const Tensor& value) const { return logical_not(isnan(value)); }
std::string Normal::str() const {
  return fmt::format("Normal(loc: {}, scale: {})", param_str(loc_), param_str(scale_));
}

// ---- Uniform

Uniform::Uniform(const Tensor& low, const Tensor& high, bool validate_args)
    : Distribution(validate_args) {
  std::tie(low_, high_) = broadcast_pair("Uniform", low, high);
  set_shapes(low_.sizes(), {});
  if (validate_args && !all_true(lt(low_, high_)))
    throw ValueError(fmt::format("{} is not defined where low >= high", str()));
}

Tensor Uniform::rsample(const Shape& sample_shape) const {
  const Tensor u =
      rand(extended_shape(sample_shape), {.dtype = low_.dtype(), .device = low_.device()});
  return low_ + u * (high_ - low_);
}

Tensor Uniform::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor lb = le(low_, value).to(low_.dtype());
  const Tensor ub = gt(high_, value).to(low_.dtype());
  return log(lb * ub) - log(high_ - low_);
}

Tensor Uniform::cdf(const Tensor& value) const {
  check_value(value);
  return clamp((value - low_) / (high_ - low_), 0, 1);
}

Tensor Uniform::icdf(const Tensor& value) const { return value * (high_ - low_) + low_; }
Tensor Uniform::entropy() const { return log(high_ - low_); }
Tensor Uniform::mean() const { return (high_ + low_) / 2; }
Tensor Uniform::variance() const {
  const Tensor w = high_ - low_;
  return w * w / 12;
}
Tensor Uniform::in_support(const Tensor& value) const {
  return logical_and(le(low_, value), le(value, high_));
}
std::string Uniform::str() const {
  return fmt::format("Uniform(low: {}, high: {})", param_str(low_), param_str(high_));
}

// ---- Exponential

Exponential::Exponential(const Tensor& rate, bool validate_args) : Distribution(validate_args) {
  if (!rate.defined()) throw ValueError("Exponential: rate must be a defined tensor");
  rate_ = rate;
  set_shapes(rate_.sizes(), {});
  check_parameter(gt(rate_, Scalar(0)), "rate", rate_, "positive (> 0)");
}

// PyTorch's exponential_ draw divided by the rate: -log(1 - u) / rate, u uniform on [0, 1).
Tensor Exponential::rsample(const Shape& sample_shape) const {
  const Tensor u =
      rand(extended_shape(sample_shape), {.dtype = rate_.dtype(), .device = rate_.device()});
  return neg(log1p(neg(u))) / rate_;
}

Tensor Exponential::log_prob(const Tensor& value) const {
  check_value(value);
  return log(rate_) - rate_ * value;
}
Tensor Exponential::cdf(const Tensor& value) const {
  check_value(value);
  return neg(exp(neg(rate_) * value)) + 1;
}
Tensor Exponential::icdf(const Tensor& value) const { return neg(log1p(neg(value))) / rate_; }
Tensor Exponential::entropy() const { return neg(log(rate_)) + 1; }
Tensor Exponential::mean() const { return reciprocal(rate_); }
Tensor Exponential::variance() const { return pow(rate_, -2); }
Tensor Exponential::in_support(const Tensor& value) const { return ge(value, Scalar(0)); }
std::string Exponential::str() const {
  return fmt::format("Exponential(rate: {})", param_str(rate_));
}

// ---- Laplace

Laplace::Laplace(const Tensor& loc, const Tensor& scale, bool validate_args)
    : Distribution(validate_args) {
  std::tie(loc_, scale_) = broadcast_pair("Laplace", loc, scale);
  set_shapes(loc_.sizes(), {});
  check_parameter(logical_not(isnan(loc_)), "loc", loc_, "real");
  check_parameter(gt(scale_, Scalar(0)), "scale", scale_, "positive (> 0)");
}

// PyTorch's: u uniform on [eps - 1, 1), loc - scale sign(u) log1p(-|u|).
Tensor Laplace::rsample(const Shape& sample_shape) const {
  const double eps = machine_eps(loc_.dtype());
  const Tensor u =
      rand(extended_shape(sample_shape), {.dtype = loc_.dtype(), .device = loc_.device()}) *
          (2 - eps) +
      (eps - 1);
  return loc_ - scale_ * sign(u) * log1p(neg(abs(u)));
}

Tensor Laplace::log_prob(const Tensor& value) const {
  check_value(value);
  return neg(log(scale_ * 2)) - abs(value - loc_) / scale_;
}
Tensor Laplace::cdf(const Tensor& value) const {
  check_value(value);
  const Tensor d = value - loc_;
  return neg(sign(d) * expm1(neg(abs(d)) / scale_)) * 0.5 + 0.5;
}
Tensor Laplace::icdf(const Tensor& value) const {
  const Tensor term = value - 0.5;
  return loc_ - scale_ * sign(term) * log1p(abs(term) * -2);
}
Tensor Laplace::entropy() const { return log(scale_ * 2) + 1; }
Tensor Laplace::variance() const { return scale_ * scale_ * 2; }
Tensor Laplace::in_support(const Tensor& value) const { return logical_not(isnan(value)); }
std::string Laplace::str() const {
  return fmt::format("Laplace(loc: {}, scale: {})", param_str(loc_), param_str(scale_));
}

}  // namespace ferry::distributions
