// runtime/distributions_discrete.cpp — torch.distributions' Bernoulli and Categorical, the
// distributions made of others (Independent, MixtureSameFamily) and kl_divergence
// (ferry/distributions.hpp), with PyTorch's formulas.
#include <fmt/format.h>

#include "distributions_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/random.hpp"

namespace ferry::distributions {

using namespace detail;

// ---- Bernoulli

namespace {
// PyTorch's clamp_probs then probs_to_logits(is_binary=True): log(p) - log1p(-p) with p kept
// one machine epsilon inside (0, 1).
Tensor binary_logits(const Tensor& probs) {
  const double eps = machine_eps(probs.dtype());
  const Tensor p = clamp(probs, eps, 1 - eps);
  return log(p) - log1p(neg(p));
}

// (probs, logits) of a two-outcome distribution (Bernoulli, Geometric) from the one the caller
// gave: exactly one of them (check_one_of), the other derived.
std::pair<Tensor, Tensor> binary_parameters(const char* who, const Tensor& probs,
                                            const Tensor& logits) {
  check_one_of(who, probs, logits);
  if (probs.defined()) return {probs, binary_logits(probs)};
  return {sigmoid(logits), logits};
}
}  // namespace

Bernoulli::Bernoulli(const Tensor& probs, const Tensor& logits, bool validate_args)
    : Distribution(validate_args) {
  std::tie(probs_, logits_) = binary_parameters("Bernoulli", probs, logits);
  set_shapes(probs_.sizes(), {});
  if (probs.defined())
    check_parameter(logical_and(ge(probs_, Scalar(0)), le(probs_, Scalar(1))), "probs", probs_,
                    "unit interval [0, 1]");
  else
    check_parameter(logical_not(isnan(logits_)), "logits", logits_, "real");
}

Tensor Bernoulli::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  return bernoulli(probs_.detach().expand(extended_shape(sample_shape)).contiguous());
}

Tensor Bernoulli::log_prob(const Tensor& value) const {
  check_value(value);
  auto [l, v] = broadcast_pair("Bernoulli", logits_, value.to(logits_.dtype()));
  return neg(nn::functional::binary_cross_entropy_with_logits(l, v, {}, {}, nn::Reduction::none));
}

Tensor Bernoulli::entropy() const {
  return nn::functional::binary_cross_entropy_with_logits(logits_, probs_, {}, {},
                                                          nn::Reduction::none);
}
Tensor Bernoulli::variance() const { return probs_ * (neg(probs_) + 1); }
Tensor Bernoulli::in_support(const Tensor& value) const {
  return logical_or(eq(value, Scalar(0)), eq(value, Scalar(1)));
}
std::string Bernoulli::str() const {
  return fmt::format("Bernoulli(probs: {})", param_str(probs_));
}

// ---- Categorical

Categorical::Categorical(const Tensor& probs, const Tensor& logits, bool validate_args)
    : Distribution(validate_args) {
  check_one_of("Categorical", probs, logits);
  const Tensor& given = probs.defined() ? probs : logits;
  if (given.dim() < 1)
    throw ValueError(fmt::format("Categorical: the {} parameter must be at least one-dimensional",
                                 probs.defined() ? "probs" : "logits"));
  if (probs.defined()) {
    probs_ = probs / sum(probs, {-1}, /*keepdim=*/true);
    // PyTorch's probs_to_logits: log of the probabilities clamped one epsilon inside (0, 1).
    const double eps = machine_eps(probs_.dtype());
    logits_ = log(clamp(probs_, eps, 1 - eps));
  } else {
    logits_ = logits - logsumexp(logits, {-1}, /*keepdim=*/true);
    probs_ = softmax(logits_, -1);
  }
  num_events_ = given.size(-1);
  Shape batch = given.sizes();
  batch.pop_back();
  set_shapes(std::move(batch), {});
  if (probs.defined())  // PyTorch's simplex constraint, on the normalized probabilities
    check_parameter(
        logical_and(all(ge(probs_, Scalar(0)), {-1}), lt(abs(sum(probs_, {-1}) - 1), Scalar(1e-6))),
        "probs", probs_, "simplex (non-negative, summing to 1)");
  else
    check_parameter(logical_not(isnan(logits)), "logits", logits, "real");
}

Tensor Categorical::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  std::int64_t n = 1;
  for (std::int64_t s : sample_shape) n *= s;
  const Tensor probs_2d = probs_.detach().reshape({-1, num_events_});
  if (n == 0 || probs_2d.size(0) == 0)
    return zeros(extended_shape(sample_shape), {.dtype = DType::i64, .device = probs_.device()});
  const Tensor samples_2d = multinomial(probs_2d, n, /*replacement=*/true).t();
  return samples_2d.contiguous().reshape(extended_shape(sample_shape));
}

Tensor Categorical::log_prob(const Tensor& value) const {
  check_value(value);
  Tensor v = value.to(DType::i64).unsqueeze(-1);
  const Shape shape = broadcast_shapes(v.sizes(), logits_.sizes());
  Shape one = shape;
  one.back() = 1;
  v = v.expand(one);
  return gather(logits_.expand(shape), -1, v.contiguous()).squeeze(-1);
}

Tensor Categorical::entropy() const {
  const double min_real = logits_.dtype() == DType::f64   ? std::numeric_limits<double>::lowest()
                          : logits_.dtype() == DType::f16 ? -65504.0
                          : logits_.dtype() == DType::bf16
                              ? -3.3895313892515355e38
                              : double(std::numeric_limits<float>::lowest());
  const Tensor p_log_p = clamp_min(logits_, min_real) * probs_;
  return neg(sum(p_log_p, {-1}));
}

Tensor Categorical::mean() const { return nan_like(probs_.select(-1, 0)); }
Tensor Categorical::variance() const { return nan_like(probs_.select(-1, 0)); }
Tensor Categorical::in_support(const Tensor& value) const {
  return logical_and(
      logical_and(ge(value, Scalar(0)), lt(value, Scalar(num_events_))),
      is_floating(value.dtype()) ? eq(value, floor(value)) : ones_like(value).to(DType::boolean));
}
std::string Categorical::support_str() const {
  return fmt::format("integers in [0, {}]", num_events_ - 1);
}
std::string Categorical::str() const {
  return fmt::format("Categorical(probs: {})", param_str(probs_));
}

// ---- Geometric

Geometric::Geometric(const Tensor& probs, const Tensor& logits, bool validate_args)
    : Distribution(validate_args) {
  std::tie(probs_, logits_) = binary_parameters("Geometric", probs, logits);
  set_shapes(probs_.sizes(), {});
  if (probs.defined())
    check_parameter(logical_and(gt(probs_, Scalar(0)), le(probs_, Scalar(1))), "probs", probs_,
                    "half-open interval (0, 1]");
  else
    check_parameter(logical_not(isnan(logits_)), "logits", logits_, "real");
}

// PyTorch's inversion: floor(log u / log(1 - p)), u kept above the dtype's smallest normal.
Tensor Geometric::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  const DType dt = probs_.dtype();
  const Tensor u =
      clamp(rand(extended_shape(sample_shape), {.dtype = dt, .device = probs_.device()}),
            smallest_normal(dt), std::nullopt);
  return floor(log(u) / log1p(neg(probs_.detach())));
}

// value log(1 - p) + log p, with 0 log(1 - 1) taken as 0 (PyTorch sets p to 0 there).
Tensor Geometric::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor p = where(logical_and(eq(probs_, 1.0), eq(value, 0.0)), Scalar(0.0), probs_);
  return value * log1p(neg(p)) + log(probs_);
}
// binary_cross_entropy_with_logits(logits, probs) / probs.
Tensor Geometric::entropy() const { return (softplus(logits_) - logits_ * probs_) / probs_; }
Tensor Geometric::mean() const { return reciprocal(probs_) - 1; }
Tensor Geometric::variance() const { return (reciprocal(probs_) - 1) / probs_; }
Tensor Geometric::in_support(const Tensor& value) const {
  return logical_and(ge(value, Scalar(0)), eq(value, floor(value)));
}
std::string Geometric::str() const {
  return fmt::format("Geometric(probs: {})", param_str(probs_));
}

// ---- OneHotCategorical

OneHotCategorical::OneHotCategorical(const Tensor& probs, const Tensor& logits, bool validate_args)
    : Distribution(validate_args), categorical_(probs, logits, validate_args) {
  set_shapes(categorical_.batch_shape(), {categorical_.num_events()});
}
Tensor OneHotCategorical::sample(const Shape& sample_shape) const {
  return one_hot(categorical_.sample(sample_shape), categorical_.num_events())
      .to(categorical_.probs().dtype());
}
Tensor OneHotCategorical::log_prob(const Tensor& value) const {
  check_value(value);
  return categorical_.log_prob(argmax(value, -1));
}
Tensor OneHotCategorical::variance() const {
  return categorical_.probs() * (neg(categorical_.probs()) + 1);
}
Tensor OneHotCategorical::in_support(const Tensor& value) const {
  const Tensor binary = logical_or(eq(value, Scalar(0)), eq(value, Scalar(1)));
  return logical_and(all(binary, {-1}), eq(sum(value, {-1}), Scalar(1)));
}
std::string OneHotCategorical::str() const {
  return fmt::format("OneHotCategorical(probs: {})", param_str(categorical_.probs()));
}

// ---- Independent

namespace {
std::pair<Shape, Shape> independent_shapes(const Distribution& base, std::int64_t n) {
  const Shape& batch = base.batch_shape();
  if (n < 0 || n > std::int64_t(batch.size()))
    throw ValueError(fmt::format(
        "Independent: expected reinterpreted_batch_ndims <= the base distribution's batch rank "
        "(and >= 0), actual {} vs {} (batch_shape {})",
        n, batch.size(), shape_str(batch)));
  const Shape shape = concat(batch, base.event_shape());
  const auto event_dim = std::size_t(n) + base.event_shape().size();
  const auto split = shape.begin() + long(shape.size() - event_dim);
  return {Shape(shape.begin(), split), Shape(split, shape.end())};
}
}  // namespace

Independent::Independent(std::shared_ptr<const Distribution> base,
                         std::int64_t reinterpreted_batch_ndims, bool validate_args)
    : Distribution(validate_args), base_(std::move(base)), ndims_(reinterpreted_batch_ndims) {
  if (!base_) throw ValueError("Independent: the base distribution is null");
  auto [batch, event] = independent_shapes(*base_, ndims_);
  set_shapes(std::move(batch), std::move(event));
}

Tensor Independent::sample(const Shape& sample_shape) const { return base_->sample(sample_shape); }
Tensor Independent::rsample(const Shape& sample_shape) const {
  return base_->rsample(sample_shape);
}
Tensor Independent::log_prob(const Tensor& value) const {
  check_value(value);  // the shapes; the base checks the support
  return sum_rightmost(base_->log_prob(value), ndims_);
}
Tensor Independent::entropy() const { return sum_rightmost(base_->entropy(), ndims_); }
// The base checks the value against its support in its own log_prob.
Tensor Independent::in_support(const Tensor& value) const {
  return ones_like(value).to(DType::boolean);
}
std::string Independent::support_str() const { return "the base distribution's"; }
std::string Independent::str() const {
  return fmt::format("Independent({}, {})", base_->str(), ndims_);
}

// ---- MixtureSameFamily

MixtureSameFamily::MixtureSameFamily(std::shared_ptr<const Categorical> mixture,
                                     std::shared_ptr<const Distribution> components,
                                     bool validate_args)
    : Distribution(validate_args),
      mixture_(std::move(mixture)),
      components_(std::move(components)) {
  if (!mixture_ || !components_)
    throw ValueError("MixtureSameFamily: the mixture and component distributions must not be null");
  Shape batch = components_->batch_shape();
  if (batch.empty())
    throw ShapeError(fmt::format(
        "MixtureSameFamily: the component distribution needs a batch dim of components (its "
        "batch_shape is {})",
        shape_str(batch)));
  const std::int64_t k = batch.back();
  batch.pop_back();
  if (mixture_->batch_shape() != batch)
    throw ShapeError(fmt::format(
        "MixtureSameFamily: the mixture's batch_shape {} is not the components' batch_shape {} "
        "without its last dim",
        shape_str(mixture_->batch_shape()), shape_str(components_->batch_shape())));
  if (mixture_->num_events() != k)
    throw ShapeError(
        fmt::format("MixtureSameFamily: the mixture has {} categories but there are {} components",
                    mixture_->num_events(), k));
  event_ndims_ = std::int64_t(components_->event_shape().size());
  set_shapes(std::move(batch), components_->event_shape());
}

Tensor MixtureSameFamily::pad(const Tensor& x) const { return x.unsqueeze(-1 - event_ndims_); }

Tensor MixtureSameFamily::padded_weights() const {
  Tensor w = mixture_->probs();
  for (std::int64_t i = 0; i < event_ndims_; ++i) w = w.unsqueeze(-1);
  return w;
}

Tensor MixtureSameFamily::log_prob(const Tensor& value) const {
  check_value(value);
  const Tensor log_prob_x = components_->log_prob(pad(value));  // [S, B, k]
  const Tensor log_mix_prob = log_softmax(mixture_->logits(), -1);
  return logsumexp(log_prob_x + log_mix_prob, {-1});
}

Tensor MixtureSameFamily::cdf(const Tensor& value) const {
  check_value(value);
  return sum(components_->cdf(pad(value)) * mixture_->probs(), {-1});
}

Tensor MixtureSameFamily::mean() const {
  return sum(padded_weights() * components_->mean(), {-1 - event_ndims_});
}

// Var = E[Var(X | component)] + Var(E[X | component]).
Tensor MixtureSameFamily::variance() const {
  const Tensor w = padded_weights(), m = components_->mean();
  const std::int64_t dim = -1 - event_ndims_;
  const Tensor mean_cond_var = sum(w * components_->variance(), {dim});
  const Tensor d = m - pad(mean());
  return mean_cond_var + sum(w * d * d, {dim});
}

Tensor MixtureSameFamily::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  const Tensor picks = mixture_->sample(sample_shape);     // [S, B]
  const Tensor drawn = components_->sample(sample_shape);  // [S, B, k, E]
  Shape index_shape = picks.sizes();
  index_shape.push_back(1);
  for (std::int64_t e : event_shape()) index_shape.push_back(e);
  Tensor index = picks;
  for (std::int64_t i = 0; i <= event_ndims_; ++i) index = index.unsqueeze(-1);
  index = index.expand(index_shape).contiguous();
  return gather(drawn, -1 - event_ndims_, index).squeeze(-1 - event_ndims_);
}

// The components check the value against their support in their log_prob.
Tensor MixtureSameFamily::in_support(const Tensor& value) const {
  return ones_like(value).to(DType::boolean);
}
std::string MixtureSameFamily::str() const {
  return fmt::format("MixtureSameFamily(\n  {},\n  {})", mixture_->str(), components_->str());
}

// ---- kl_divergence

namespace {

// inf where `cond` holds, t elsewhere; then 0 where `zero` holds (PyTorch's in-place masks).
Tensor mask_inf_then_zero(const Tensor& t, const Tensor& inf_where, const Tensor& zero_where) {
  Tensor r = where(inf_where.expand(t.sizes()), Scalar(std::numeric_limits<double>::infinity()), t);
  return where(zero_where.expand(t.sizes()), Scalar(0), r);
}

Tensor kl_normal_normal(const Normal& p, const Normal& q) {
  Tensor var_ratio = p.scale() / q.scale();
  var_ratio = var_ratio * var_ratio;
  Tensor t1 = (p.loc() - q.loc()) / q.scale();
  t1 = t1 * t1;
  return (var_ratio + t1 - 1 - log(var_ratio)) * 0.5;
}

Tensor kl_uniform_uniform(const Uniform& p, const Uniform& q) {
  const Tensor result = log((q.high() - q.low()) / (p.high() - p.low()));
  const Tensor outside = logical_or(gt(q.low(), p.low()), lt(q.high(), p.high()));
  return where(outside, Scalar(std::numeric_limits<double>::infinity()), result);
}

Tensor kl_exponential_exponential(const Exponential& p, const Exponential& q) {
  const Tensor rate_ratio = q.rate() / p.rate();
  return neg(log(rate_ratio)) + rate_ratio - 1;
}

Tensor kl_laplace_laplace(const Laplace& p, const Laplace& q) {
  const Tensor scale_ratio = p.scale() / q.scale();
  const Tensor loc_abs_diff = abs(p.loc() - q.loc());
  const Tensor t1 = neg(log(scale_ratio));
  const Tensor t2 = loc_abs_diff / q.scale();
  const Tensor t3 = scale_ratio * exp(neg(loc_abs_diff) / p.scale());
  return t1 + t2 + t3 - 1;
}

Tensor kl_bernoulli_bernoulli(const Bernoulli& p, const Bernoulli& q) {
  Tensor t1 = p.probs() * (softplus(neg(q.logits())) - softplus(neg(p.logits())));
  t1 = mask_inf_then_zero(t1, eq(q.probs(), Scalar(0)), eq(p.probs(), Scalar(0)));
  Tensor t2 = (neg(p.probs()) + 1) * (softplus(q.logits()) - softplus(p.logits()));
  t2 = mask_inf_then_zero(t2, eq(q.probs(), Scalar(1)), eq(p.probs(), Scalar(1)));
  return t1 + t2;
}

Tensor kl_categorical_categorical(const Categorical& p, const Categorical& q) {
  Tensor t = p.probs() * (p.logits() - q.logits());
  t = mask_inf_then_zero(t, eq(q.probs(), Scalar(0)), eq(p.probs(), Scalar(0)));
  return sum(t, {-1});
}

}  // namespace

Tensor kl_divergence(const Distribution& p, const Distribution& q) {
  if (auto* a = dynamic_cast<const Normal*>(&p))
    if (auto* b = dynamic_cast<const Normal*>(&q)) return kl_normal_normal(*a, *b);
  if (auto* a = dynamic_cast<const Uniform*>(&p))
    if (auto* b = dynamic_cast<const Uniform*>(&q)) return kl_uniform_uniform(*a, *b);
  if (auto* a = dynamic_cast<const Exponential*>(&p))
    if (auto* b = dynamic_cast<const Exponential*>(&q)) return kl_exponential_exponential(*a, *b);
  if (auto* a = dynamic_cast<const Laplace*>(&p))
    if (auto* b = dynamic_cast<const Laplace*>(&q)) return kl_laplace_laplace(*a, *b);
  if (auto* a = dynamic_cast<const Gamma*>(&p))
    if (auto* b = dynamic_cast<const Gamma*>(&q)) return kl_gamma_gamma(*a, *b);
  if (auto* a = dynamic_cast<const Beta*>(&p))
    if (auto* b = dynamic_cast<const Beta*>(&q)) return kl_beta_beta(*a, *b);
  if (auto* a = dynamic_cast<const Dirichlet*>(&p))
    if (auto* b = dynamic_cast<const Dirichlet*>(&q)) return kl_dirichlet_dirichlet(*a, *b);
  if (auto* a = dynamic_cast<const Poisson*>(&p))
    if (auto* b = dynamic_cast<const Poisson*>(&q)) return kl_poisson_poisson(*a, *b);
  if (auto* a = dynamic_cast<const Bernoulli*>(&p))
    if (auto* b = dynamic_cast<const Bernoulli*>(&q)) return kl_bernoulli_bernoulli(*a, *b);
  if (auto* a = dynamic_cast<const OneHotCategorical*>(&p))
    if (auto* b = dynamic_cast<const OneHotCategorical*>(&q))
      return kl_categorical_categorical(a->categorical(), b->categorical());
  if (auto* a = dynamic_cast<const LogNormal*>(&p))
    if (auto* b = dynamic_cast<const LogNormal*>(&q))
      return kl_normal_normal(a->base_dist(), b->base_dist());
  if (auto* a = dynamic_cast<const HalfNormal*>(&p))
    if (auto* b = dynamic_cast<const HalfNormal*>(&q))
      return kl_normal_normal(a->base_dist(), b->base_dist());
  if (auto* a = dynamic_cast<const Gumbel*>(&p))
    if (auto* b = dynamic_cast<const Gumbel*>(&q)) return kl_gumbel_gumbel(*a, *b);
  if (auto* a = dynamic_cast<const Geometric*>(&p))
    if (auto* b = dynamic_cast<const Geometric*>(&q))  // PyTorch's _kl_geometric_geometric
      return neg(a->entropy()) - log1p(neg(b->probs())) / a->probs() - b->logits();
  if (auto* a = dynamic_cast<const MultivariateNormal*>(&p))
    if (auto* b = dynamic_cast<const MultivariateNormal*>(&q)) return kl_mvn_mvn(*a, *b);
  if (auto* a = dynamic_cast<const Categorical*>(&p))
    if (auto* b = dynamic_cast<const Categorical*>(&q)) return kl_categorical_categorical(*a, *b);
  if (auto* a = dynamic_cast<const Independent*>(&p))
    if (auto* b = dynamic_cast<const Independent*>(&q)) {
      if (a->reinterpreted_batch_ndims() != b->reinterpreted_batch_ndims())
        throw UnsupportedError(fmt::format(
            "kl_divergence: Independents of different reinterpreted_batch_ndims ({} and {})",
            a->reinterpreted_batch_ndims(), b->reinterpreted_batch_ndims()));
      return sum_rightmost(kl_divergence(a->base_dist(), b->base_dist()),
                           a->reinterpreted_batch_ndims());
    }
  throw UnsupportedError(
      fmt::format("kl_divergence: no closed form for {} against {}", p.str(), q.str()));
}

}  // namespace ferry::distributions
