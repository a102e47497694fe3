// runtime/distributions_gamma.cpp — torch.distributions' Gamma, Dirichlet, Beta and Poisson
// (ferry/distributions.hpp): PyTorch's formulas over lgamma and digamma
// (ferry/ops_special.hpp), and their draws (Note [Gamma draws]).
#include <fmt/format.h>

#include <numbers>

#include "distributions_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/random.hpp"

namespace ferry::distributions {

using namespace detail;

namespace {

// Repeats `round` (which updates the pending mask) until no element is pending.
template <typename Round> void until_accepted(const char* what, Tensor& pending, Round round) {
  for (int i = 0; any(pending).item<bool>(); ++i) {
    if (i == 10000)  // each element leaves with probability > 0.9 per round
      throw Error(fmt::format("{}: rejection sampling did not finish (a bug in ferry)", what));
    round();
  }
}

// f32 for the 16-bit floats, whose draws would lose the acceptance tests' precision.
Tensor sampling_dtype(const Tensor& t) { return t.dtype() == DType::f64 ? t : t.to(DType::f32); }

// Gamma(alpha, 1) draws of alpha's shape (Marsaglia and Tsang), clamped to the smallest
// normal number as PyTorch's, in alpha's dtype.
Tensor standard_gamma(const Tensor& alpha_in) {
  NoGradGuard no_grad;
  const Tensor alpha = sampling_dtype(alpha_in.detach()).contiguous();
  const Tensor boosted = lt(alpha, Scalar(1));
  const Tensor a = where(boosted, alpha + 1, alpha);
  const Tensor d = a - 1.0 / 3;
  const Tensor c = rsqrt(d * 9);
  Tensor result = zeros_like(a);
  Tensor pending = ones_like(a).to(DType::boolean);
  until_accepted("Gamma", pending, [&] {
    const Tensor z = randn_like(a), u = rand_like(a);
    const Tensor t = c * z + 1;
    const Tensor v = t * t * t;
    // log u < z^2/2 + d - d v + d log v, for v > 0 (log v is NaN below, and NaN compares false).
    const Tensor ok =
        logical_and(gt(v, Scalar(0)), lt(log(u), z * z * 0.5 + d - d * v + d * log(v)));
    result = where(logical_and(pending, ok), d * v, result);
    pending = logical_and(pending, logical_not(ok));
  });
  result = where(boosted, result * pow(rand_like(a), reciprocal(alpha)), result);
  return clamp_min(result, smallest_normal(alpha.dtype())).to(alpha_in.dtype());
}

// Poisson draws of rate's shape: Knuth's below 10, PTRS from 10 (Note [Gamma draws]).
Tensor poisson_draws(const Tensor& rate_in) {
  NoGradGuard no_grad;
  const Tensor rate = sampling_dtype(rate_in.detach()).contiguous();
  const Tensor large = ge(rate, Scalar(10));
  Tensor result = zeros_like(rate);
  // Knuth: the number of uniforms whose product stays above exp(-rate), less one.
  const Tensor limit = exp(neg(rate));
  Tensor product = ones_like(rate);
  Tensor pending = logical_not(large);
  until_accepted("Poisson", pending, [&] {
    product = product * rand_like(rate);
    const Tensor more = gt(product, limit);
    result = where(logical_and(pending, more), result + 1, result);
    pending = logical_and(pending, more);
  });
  // Hoermann's PTRS, on a rate of at least 10 (the small rates' lanes compute on 10).
  const Tensor lam = where(large, rate, Scalar(10.0));
  const Tensor slam = sqrt(lam), loglam = log(lam);
  const Tensor b = slam * 2.53 + 0.931;
  const Tensor a = b * 0.02483 - 0.059;
  const Tensor inv_alpha = reciprocal(b - 3.4) * 1.1328 + 1.1239;
  const Tensor vr = reciprocal(b - 2) * -3.6224 + 0.9277;
  pending = large;
  until_accepted("Poisson", pending, [&] {
    const Tensor u = rand_like(lam) - 0.5, v = rand_like(lam);
    const Tensor us = neg(abs(u)) + 0.5;
    const Tensor k = floor((a * 2 / us + b) * u + lam + 0.43);
    const Tensor quick = logical_and(ge(us, Scalar(0.07)), le(v, vr));
    const Tensor rejected =
        logical_or(lt(k, Scalar(0)), logical_and(lt(us, Scalar(0.013)), gt(v, us)));
    const Tensor ks = where(lt(k, Scalar(0)), Scalar(0.0), k);  // lgamma(k + 1) stays finite
    const Tensor slow = le(log(v) + log(inv_alpha) - log(a / (us * us) + b),
                           neg(lam) + ks * loglam - lgamma(ks + 1));
    const Tensor ok = logical_or(quick, logical_and(logical_not(rejected), slow));
    result = where(logical_and(pending, ok), k, result);
    pending = logical_and(pending, logical_not(ok));
  });
  return result.to(rate_in.dtype());
}

}  // namespace

// ---- Gamma

Gamma::Gamma(const Tensor& concentration, const Tensor& rate, bool validate_args)
    : Distribution(validate_args) {
  std::tie(concentration_, rate_) = broadcast_pair("Gamma", concentration, rate);
  set_shapes(concentration_.sizes(), {});
  check_parameter(gt(concentration_, Scalar(0)), "concentration", concentration_, "positive (> 0)");
  check_parameter(gt(rate_, Scalar(0)), "rate", rate_, "positive (> 0)");
}

Tensor Gamma::sample(const Shape& sample_shape) const {
  const Shape shape = extended_shape(sample_shape);
  NoGradGuard no_grad;
  return standard_gamma(concentration_.expand(shape)) / rate_.detach().expand(shape);
}

Tensor Gamma::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor v = value.to(rate_.dtype());
  return xlogy(concentration_, rate_) + xlogy(concentration_ - 1, v) - rate_ * v -
         lgamma(concentration_);
}

Tensor Gamma::entropy() const {
  return concentration_ - log(rate_) + lgamma(concentration_) +
         (neg(concentration_) + 1) * digamma(concentration_);
}
Tensor Gamma::mean() const { return concentration_ / rate_; }
Tensor Gamma::variance() const { return concentration_ / (rate_ * rate_); }
Tensor Gamma::in_support(const Tensor& value) const { return ge(value, Scalar(0)); }
std::string Gamma::str() const {
  return fmt::format("Gamma(concentration: {}, rate: {})", param_str(concentration_),
                     param_str(rate_));
}

// ---- Chi2 and StudentT

namespace {
Tensor half_df(const Tensor& df) {
  if (!df.defined()) throw ValueError("Chi2: df must be a defined tensor");
  return df * 0.5;
}
}  // namespace

Chi2::Chi2(const Tensor& df, bool validate_args)
    : Gamma(half_df(df), full_like(half_df(df), 0.5), validate_args) {}
Tensor Chi2::df() const { return concentration() * 2; }
std::string Chi2::str() const { return fmt::format("Chi2(df: {})", param_str(df())); }

StudentT::StudentT(const Tensor& df, const Tensor& loc, const Tensor& scale, bool validate_args)
    : Distribution(validate_args) {
  if (!df.defined() || !loc.defined() || !scale.defined())
    throw ValueError("StudentT: df, loc and scale must be defined tensors");
  const Shape shape = broadcast_shapes(broadcast_shapes(df.sizes(), loc.sizes()), scale.sizes());
  df_ = df.expand(shape);
  loc_ = loc.expand(shape);
  scale_ = scale.expand(shape);
  set_shapes(shape, {});
  check_parameter(gt(df_, Scalar(0)), "df", df_, "positive (> 0)");
  check_parameter(logical_not(isnan(loc_)), "loc", loc_, "real");
  check_parameter(gt(scale_, Scalar(0)), "scale", scale_, "positive (> 0)");
}

// PyTorch's: a standard normal over the square root of a chi-squared of df over df.
Tensor StudentT::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  const Shape shape = extended_shape(sample_shape);
  const Tensor x = randn(shape, {.dtype = loc_.dtype(), .device = loc_.device()});
  const Tensor z = standard_gamma(df_.detach().expand(shape) * 0.5) * 2;
  const Tensor y = x * rsqrt(z / df_.detach());
  return loc_.detach() + scale_.detach() * y;
}

Tensor StudentT::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor y = (value - loc_) / scale_;
  const Tensor z = log(scale_) + log(df_) * 0.5 + 0.5 * std::log(std::numbers::pi) +
                   lgamma(df_ * 0.5) - lgamma((df_ + 1) * 0.5);
  return (df_ + 1) * -0.5 * log1p(y * y / df_) - z;
}

Tensor StudentT::entropy() const {
  const Tensor lbeta = lgamma(df_ * 0.5) + std::lgamma(0.5) - lgamma((df_ + 1) * 0.5);
  return log(scale_) + (df_ + 1) * 0.5 * (digamma((df_ + 1) * 0.5) - digamma(df_ * 0.5)) +
         log(df_) * 0.5 + lbeta;
}

Tensor StudentT::mean() const {
  return where(gt(df_, Scalar(1)), loc_, full_like(loc_, std::numeric_limits<double>::quiet_NaN()));
}
Tensor StudentT::variance() const {
  // Computed on df > 2 alone: the other lanes' quotient would put inf into the gradient.
  const Tensor df = where(gt(df_, Scalar(2)), df_, Scalar(3.0));
  const Tensor finite = scale_ * scale_ * df / (df - 2);
  const Tensor v =
      where(gt(df_, Scalar(2)), finite, full_like(finite, std::numeric_limits<double>::infinity()));
  return where(le(df_, Scalar(1)), Scalar(std::numeric_limits<double>::quiet_NaN()), v);
}
Tensor StudentT::in_support(const Tensor& value) const { return logical_not(isnan(value)); }
std::string StudentT::str() const {
  return fmt::format("StudentT(df: {}, loc: {}, scale: {})", param_str(df_), param_str(loc_),
                     param_str(scale_));
}

// ---- Dirichlet

Dirichlet::Dirichlet(const Tensor& concentration, bool validate_args)
    : Distribution(validate_args), concentration_(concentration) {
  if (!concentration.defined() || concentration.dim() < 1)
    throw ValueError(
        "Dirichlet: the concentration parameter must be a tensor of at least one dimension");
  Shape batch = concentration.sizes();
  const std::int64_t k = batch.back();
  batch.pop_back();
  set_shapes(std::move(batch), {k});
  check_parameter(gt(concentration_, Scalar(0)), "concentration", concentration_, "positive (> 0)");
}

Tensor Dirichlet::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  const Tensor g = standard_gamma(concentration_.expand(extended_shape(sample_shape)));
  return g / sum(g, {-1}, /*keepdim=*/true);
}

Tensor Dirichlet::log_prob(const Tensor& value) const {
  check_value(value);
  return sum(log(value) * (concentration_ - 1.0), {-1}) + lgamma(sum(concentration_, {-1})) -
         sum(lgamma(concentration_), {-1});
}

Tensor Dirichlet::entropy() const {
  const double k = double(concentration_.size(-1));
  const Tensor a0 = sum(concentration_, {-1});
  return sum(lgamma(concentration_), {-1}) - lgamma(a0) - (k - a0) * digamma(a0) -
         sum((concentration_ - 1.0) * digamma(concentration_), {-1});
}

Tensor Dirichlet::mean() const {
  return concentration_ / sum(concentration_, {-1}, /*keepdim=*/true);
}
Tensor Dirichlet::variance() const {
  const Tensor a0 = sum(concentration_, {-1}, /*keepdim=*/true);
  return concentration_ * (a0 - concentration_) / (a0 * a0 * (a0 + 1));
}
Tensor Dirichlet::in_support(const Tensor& value) const {
  return logical_and(all(ge(value, Scalar(0)), {-1}), lt(abs(sum(value, {-1}) - 1), Scalar(1e-6)));
}
std::string Dirichlet::str() const {
  return fmt::format("Dirichlet(concentration: {})", param_str(concentration_));
}

// ---- Beta

Beta::Beta(const Tensor& concentration1, const Tensor& concentration0, bool validate_args)
    : Distribution(validate_args) {
  std::tie(concentration1_, concentration0_) =
      broadcast_pair("Beta", concentration1, concentration0);
  set_shapes(concentration1_.sizes(), {});
  check_parameter(gt(concentration1_, Scalar(0)), "concentration1", concentration1_,
                  "positive (> 0)");
  check_parameter(gt(concentration0_, Scalar(0)), "concentration0", concentration0_,
                  "positive (> 0)");
  dirichlet_ = std::make_shared<Dirichlet>(stack({concentration1_, concentration0_}, -1),
                                           /*validate_args=*/false);
}

Tensor Beta::sample(const Shape& sample_shape) const {
  return dirichlet_->sample(sample_shape).select(-1, 0);
}
Tensor Beta::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor v = value.to(concentration1_.dtype());
  return dirichlet_->log_prob(stack({v, 1.0 - v}, -1));
}
Tensor Beta::entropy() const { return dirichlet_->entropy(); }
Tensor Beta::mean() const { return concentration1_ / (concentration1_ + concentration0_); }
Tensor Beta::variance() const {
  const Tensor total = concentration1_ + concentration0_;
  return concentration1_ * concentration0_ / (total * total * (total + 1));
}
Tensor Beta::in_support(const Tensor& value) const {
  return logical_and(ge(value, Scalar(0)), le(value, Scalar(1)));
}
std::string Beta::str() const {
  return fmt::format("Beta(concentration1: {}, concentration0: {})", param_str(concentration1_),
                     param_str(concentration0_));
}

// ---- Poisson

Poisson::Poisson(const Tensor& rate, bool validate_args)
    : Distribution(validate_args), rate_(rate) {
  if (!rate.defined()) throw ValueError("Poisson: rate must be a defined tensor");
  set_shapes(rate_.sizes(), {});
  check_parameter(ge(rate_, Scalar(0)), "rate", rate_, "non-negative (>= 0)");
}

Tensor Poisson::sample(const Shape& sample_shape) const {
  return poisson_draws(rate_.expand(extended_shape(sample_shape)));
}

Tensor Poisson::log_prob(const Tensor& value) const {
  check_value(value);
  auto [rate, v] = broadcast_pair("Poisson", rate_, value.to(rate_.dtype()));
  return xlogy(v, rate) - rate - lgamma(v + 1);
}

Tensor Poisson::in_support(const Tensor& value) const {
  return is_floating(value.dtype()) ? logical_and(ge(value, Scalar(0)), eq(value, floor(value)))
                                    : ge(value, Scalar(0));
}
std::string Poisson::str() const { return fmt::format("Poisson(rate: {})", param_str(rate_)); }

// ---- their KL divergences (kl_divergence in distributions_discrete.cpp)

Tensor kl_gamma_gamma(const Gamma& p, const Gamma& q) {
  const Tensor t1 = q.concentration() * log(p.rate() / q.rate());
  const Tensor t2 = lgamma(q.concentration()) - lgamma(p.concentration());
  const Tensor t3 = (p.concentration() - q.concentration()) * digamma(p.concentration());
  const Tensor t4 = (q.rate() - p.rate()) * (p.concentration() / p.rate());
  return t1 + t2 + t3 + t4;
}

Tensor kl_beta_beta(const Beta& p, const Beta& q) {
  const Tensor &p1 = p.concentration1(), &p0 = p.concentration0();
  const Tensor &q1 = q.concentration1(), &q0 = q.concentration0();
  const Tensor sum_p = p1 + p0, sum_q = q1 + q0;
  const Tensor t1 = lgamma(q1) + lgamma(q0) + lgamma(sum_p);
  const Tensor t2 = lgamma(p1) + lgamma(p0) + lgamma(sum_q);
  const Tensor t3 = (p1 - q1) * digamma(p1);
  const Tensor t4 = (p0 - q0) * digamma(p0);
  const Tensor t5 = (sum_q - sum_p) * digamma(sum_p);
  return t1 - t2 + t3 + t4 + t5;
}

Tensor kl_dirichlet_dirichlet(const Dirichlet& p, const Dirichlet& q) {
  const Tensor &pc = p.concentration(), &qc = q.concentration();
  const Tensor sum_p = sum(pc, {-1}), sum_q = sum(qc, {-1});
  const Tensor t1 = lgamma(sum_p) - lgamma(sum_q);
  const Tensor t2 = sum(lgamma(pc) - lgamma(qc), {-1});
  const Tensor t3 = pc - qc;
  const Tensor t4 = digamma(pc) - digamma(sum_p).unsqueeze(-1);
  return t1 - t2 + sum(t3 * t4, {-1});
}

Tensor kl_poisson_poisson(const Poisson& p, const Poisson& q) {
  return p.rate() * (log(p.rate()) - log(q.rate())) - (p.rate() - q.rate());
}

}  // namespace ferry::distributions
