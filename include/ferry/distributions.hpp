// ferry/distributions.hpp — torch.distributions for C++: probability distributions that draw
// samples (reparameterized where PyTorch's are, so gradients flow through rsample), score them
// (log_prob, cdf, icdf), and give their entropy, moments and KL divergences, with PyTorch's
// names, shapes, formulas and argument checks. Every method composes ferry's ops, so a
// distribution runs on its parameters' device and differentiates through its parameters.
//
// Note [Distribution shapes]
// As in PyTorch, a distribution has a batch shape (independent, differently parameterized
// distributions: the parameters' broadcast shape) and an event shape (the shape of one draw:
// [] for the scalar distributions here). sample(sample_shape) returns
// sample_shape + batch_shape + event_shape; log_prob(value) takes a value that broadcasts with
// batch_shape + event_shape and returns one log-density per event (the event dims summed
// away). Independent reinterprets the rightmost batch dims as event dims (a diagonal Gaussian
// over a vector: Independent(Normal(mu, sigma), 1)).
//
// Note [Validating distribution arguments]
// PyTorch checks arguments by default (torch.distributions.Distribution's validate_args): the
// parameters against their constraints when a distribution is made, and a value against the
// support in log_prob (and cdf, icdf). ferry does the same with validate_args = true, the
// default: a ValueError names the parameter or the value, the constraint and the distribution;
// a value that does not broadcast with batch_shape + event_shape is a ShapeError. The checks
// read a bool back to the host (as PyTorch's do); validate_args = false skips them and gives
// PyTorch's unchecked results (log_prob of a Uniform outside its interval: -inf).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/tensor.hpp"

namespace ferry::distributions {

class Distribution {
 public:
  virtual ~Distribution() = default;

  const Shape& batch_shape() const { return batch_shape_; }
  const Shape& event_shape() const { return event_shape_; }
  // sample_shape + batch_shape + event_shape (Note [Distribution shapes]).
  Shape extended_shape(const Shape& sample_shape = {}) const;

  // A draw of extended_shape(sample_shape), outside the autograd graph.
  virtual Tensor sample(const Shape& sample_shape = {}) const;
  // A reparameterized draw: differentiable in the parameters. UnsupportedError for a
  // distribution without one (has_rsample() false: Bernoulli, Categorical).
  virtual Tensor rsample(const Shape& sample_shape = {}) const;
  virtual bool has_rsample() const { return false; }

  // The log of the probability density (or mass) at value (Note [Validating distribution
  // arguments]).
  virtual Tensor log_prob(const Tensor& value) const = 0;
  // The cumulative distribution function and its inverse; UnsupportedError where PyTorch's
  // distribution has none.
  virtual Tensor cdf(const Tensor& value) const;
  virtual Tensor icdf(const Tensor& value) const;
  // Per batch element, in nats.
  virtual Tensor entropy() const;
  virtual Tensor mean() const;
  virtual Tensor variance() const;
  Tensor stddev() const;

  // "Normal(loc: [3], scale: [3])" (a one-element parameter prints its value, as PyTorch's).
  virtual std::string str() const = 0;
  bool validate_args() const { return validate_args_; }

 protected:
  explicit Distribution(bool validate_args) : validate_args_(validate_args) {}
  // Set once by the constructor, from the parameters it was given.
  void set_shapes(Shape batch_shape, Shape event_shape);
  // PyTorch's _validate_sample: the value's rightmost dims are event_shape, it broadcasts with
  // batch_shape + event_shape (ShapeError), and in_support(value) holds everywhere
  // (ValueError). Nothing is checked without validate_args.
  void check_value(const Tensor& value) const;
  // Where value lies in the support (a bool tensor), for check_value.
  virtual Tensor in_support(const Tensor& value) const = 0;
  // What the support is, for the messages: "real", "[0, 1]", ...
  virtual std::string support_str() const = 0;
  // A ValueError unless `ok` (a bool tensor) holds everywhere: parameter `what` of this
  // distribution must satisfy `constraint`.
  void check_parameter(const Tensor& ok, const char* what, const Tensor& parameter,
                       const char* constraint) const;

 private:
  Shape batch_shape_, event_shape_;
  bool validate_args_;
};

// Normal(loc, scale): loc and scale broadcast; scale > 0. Reparameterized.
class Normal : public Distribution {
 public:
  Normal(const Tensor& loc, const Tensor& scale, bool validate_args = true);
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override { return loc_; }
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "real"; }

 private:
  Tensor loc_, scale_;
};

// Uniform(low, high) on [low, high): low and high broadcast; low < high. Reparameterized.
class Uniform : public Distribution {
 public:
  Uniform(const Tensor& low, const Tensor& high, bool validate_args = true);
  const Tensor& low() const { return low_; }
  const Tensor& high() const { return high_; }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "[low, high]"; }

 private:
  Tensor low_, high_;
};

// Bernoulli(probs) or Bernoulli({}, logits): exactly one given (ValueError otherwise), as
// PyTorch's probs= / logits=; probs in [0, 1]. The other is derived (logits from probs clamped
// to [eps, 1 - eps], PyTorch's probs_to_logits). Values are 0 or 1, of the parameter's dtype.
class Bernoulli : public Distribution {
 public:
  explicit Bernoulli(const Tensor& probs, const Tensor& logits = {}, bool validate_args = true);
  const Tensor& probs() const { return probs_; }
  const Tensor& logits() const { return logits_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override { return probs_; }
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "{0, 1}"; }

 private:
  Tensor probs_, logits_;
};

// Categorical(probs) or Categorical({}, logits) over the last dim's K categories (at least
// one dim; ValueError otherwise). probs are normalized to sum to 1 and logits to
// logsumexp 0, as PyTorch's; probs must be non-negative. batch_shape is the parameter's
// shape without its last dim; values are category indices (i64) in [0, K).
class Categorical : public Distribution {
 public:
  explicit Categorical(const Tensor& probs, const Tensor& logits = {}, bool validate_args = true);
  const Tensor& probs() const { return probs_; }
  const Tensor& logits() const { return logits_; }
  std::int64_t num_events() const { return num_events_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;      // undefined: NaN, as PyTorch's
  Tensor variance() const override;  // undefined: NaN
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override;

 private:
  Tensor probs_, logits_;
  std::int64_t num_events_ = 0;
};

// Exponential(rate): rate > 0, values >= 0. Reparameterized.
class Exponential : public Distribution {
 public:
  explicit Exponential(const Tensor& rate, bool validate_args = true);
  const Tensor& rate() const { return rate_; }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "[0, inf)"; }

 private:
  Tensor rate_;
};

// Laplace(loc, scale): loc and scale broadcast; scale > 0. Reparameterized.
class Laplace : public Distribution {
 public:
  Laplace(const Tensor& loc, const Tensor& scale, bool validate_args = true);
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override { return loc_; }
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "real"; }

 private:
  Tensor loc_, scale_;
};

// Cauchy(loc, scale): loc and scale broadcast; scale > 0. Mean NaN and variance inf, as
// PyTorch's. Reparameterized (loc + scale tan(pi (u - 1/2))).
class Cauchy : public Distribution {
 public:
  Cauchy(const Tensor& loc, const Tensor& scale, bool validate_args = true);
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "real"; }

 private:
  Tensor loc_, scale_;
};

// HalfNormal(scale): |x| for x ~ Normal(0, scale); scale > 0, values >= 0. LogNormal(loc,
// scale): exp(x) for x ~ Normal(loc, scale); values > 0. Gumbel(loc, scale): loc - scale
// log(-log u). PyTorch's TransformedDistributions of these names, with their formulas; all
// three reparameterized.
class HalfNormal : public Distribution {
 public:
  explicit HalfNormal(const Tensor& scale, bool validate_args = true);
  const Tensor& scale() const { return base_.scale(); }
  const Normal& base_dist() const { return base_; }  // Normal(0, scale)
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "[0, inf)"; }

 private:
  Normal base_;
};
class LogNormal : public Distribution {
 public:
  LogNormal(const Tensor& loc, const Tensor& scale, bool validate_args = true);
  const Tensor& loc() const { return base_.loc(); }
  const Tensor& scale() const { return base_.scale(); }
  const Normal& base_dist() const { return base_; }  // Normal(loc, scale)
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "(0, inf)"; }

 private:
  Normal base_;
};
class Gumbel : public Distribution {
 public:
  Gumbel(const Tensor& loc, const Tensor& scale, bool validate_args = true);
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "real"; }

 private:
  Tensor loc_, scale_;
};

// Geometric(probs) or Geometric({}, logits): the number of failures before the first success,
// values 0, 1, 2, ...; probs in (0, 1].
class Geometric : public Distribution {
 public:
  explicit Geometric(const Tensor& probs, const Tensor& logits = {}, bool validate_args = true);
  const Tensor& probs() const { return probs_; }
  const Tensor& logits() const { return logits_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "integers >= 0"; }

 private:
  Tensor probs_, logits_;
};

// OneHotCategorical(probs) or OneHotCategorical({}, logits): a Categorical whose values are
// one-hot vectors of its parameter's dtype, event_shape [K].
class OneHotCategorical : public Distribution {
 public:
  explicit OneHotCategorical(const Tensor& probs, const Tensor& logits = {},
                             bool validate_args = true);
  const Categorical& categorical() const { return categorical_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override { return categorical_.entropy(); }
  Tensor mean() const override { return categorical_.probs(); }
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "one-hot vectors"; }

 private:
  Categorical categorical_;
};

// Note [Gamma draws]
// The Gamma family (Gamma, Beta, Dirichlet) draws with Marsaglia and Tsang's rejection method
// (2000; alpha < 1 boosted from alpha + 1 by u^(1/alpha)) and Poisson with Knuth's product of
// uniforms below rate 10 and Hoermann's transformed rejection (PTRS, 1993) above, PyTorch's
// choices, as element-wise tensor ops repeated until every element is accepted (a bool read
// back per round; each element is accepted with probability above 0.9 per round). PyTorch's
// Gamma, Beta and Dirichlet also have rsample, through implicit reparameterization of its
// gamma draw; ferry's do not (has_rsample() false: UnsupportedError).

// Gamma(concentration, rate): both broadcast and > 0; values >= 0.
class Gamma : public Distribution {
 public:
  Gamma(const Tensor& concentration, const Tensor& rate, bool validate_args = true);
  const Tensor& concentration() const { return concentration_; }
  const Tensor& rate() const { return rate_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "[0, inf)"; }

 private:
  Tensor concentration_, rate_;
};

// Chi2(df): Gamma(df / 2, 1 / 2); df > 0.
class Chi2 : public Gamma {
 public:
  explicit Chi2(const Tensor& df, bool validate_args = true);
  Tensor df() const;
  std::string str() const override;
};

// StudentT(df, loc, scale): the three broadcast; df > 0, scale > 0. The mean is NaN where
// df <= 1, the variance inf where 1 < df <= 2 and NaN where df <= 1, as PyTorch's.
class StudentT : public Distribution {
 public:
  StudentT(const Tensor& df, const Tensor& loc, const Tensor& scale, bool validate_args = true);
  const Tensor& df() const { return df_; }
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "real"; }

 private:
  Tensor df_, loc_, scale_;
};

// Dirichlet(concentration [..., K]): K > 0 categories, concentration > 0; event_shape [K],
// values on the simplex (non-negative, summing to 1 within 1e-6).
class Dirichlet : public Distribution {
 public:
  explicit Dirichlet(const Tensor& concentration, bool validate_args = true);
  const Tensor& concentration() const { return concentration_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "the simplex"; }

 private:
  Tensor concentration_;
};

// Beta(concentration1, concentration0): both broadcast and > 0; values in [0, 1]. As
// PyTorch's, the Dirichlet of [concentration1, concentration0] seen through its first entry.
class Beta : public Distribution {
 public:
  Beta(const Tensor& concentration1, const Tensor& concentration0, bool validate_args = true);
  const Tensor& concentration1() const { return concentration1_; }
  const Tensor& concentration0() const { return concentration0_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "[0, 1]"; }

 private:
  Tensor concentration1_, concentration0_;
  std::shared_ptr<Dirichlet> dirichlet_;
};

// Poisson(rate): rate >= 0; values are the non-negative integers, of rate's dtype.
class Poisson : public Distribution {
 public:
  explicit Poisson(const Tensor& rate, bool validate_args = true);
  const Tensor& rate() const { return rate_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor mean() const override { return rate_; }
  Tensor variance() const override { return rate_; }
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "integers >= 0"; }

 private:
  Tensor rate_;
};

// Independent(base, n): the base distribution's n rightmost batch dims become event dims, so
// log_prob and entropy sum over them. n at most the base's batch rank (ValueError).
class Independent : public Distribution {
 public:
  Independent(std::shared_ptr<const Distribution> base, std::int64_t reinterpreted_batch_ndims,
              bool validate_args = true);
  const Distribution& base_dist() const { return *base_; }
  std::int64_t reinterpreted_batch_ndims() const { return ndims_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return base_->has_rsample(); }
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override { return base_->mean(); }
  Tensor variance() const override { return base_->variance(); }
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override;

 private:
  std::shared_ptr<const Distribution> base_;
  std::int64_t ndims_;
};

// MixtureSameFamily(mixture, components): a mixture whose k components are the last batch dim
// of one distribution (Normal [B..., k], or Independent(Normal [B..., k, E], 1) for vectors),
// weighted by a Categorical of batch shape B... over k (ShapeError where the shapes or k do
// not match). log_prob is the logsumexp over components of log weight + component log_prob;
// mean and variance by the laws of total expectation and variance; cdf the weighted sum of
// the components' (scalar events). Drawn by picking a component per draw (no rsample).
class MixtureSameFamily : public Distribution {
 public:
  MixtureSameFamily(std::shared_ptr<const Categorical> mixture,
                    std::shared_ptr<const Distribution> components, bool validate_args = true);
  const Categorical& mixture_distribution() const { return *mixture_; }
  const Distribution& component_distribution() const { return *components_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor mean() const override;
  Tensor variance() const override;
  std::string str() const override;

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "the components'"; }

 private:
  // x with a component dim inserted before its event dims, so it broadcasts with the
  // components' batch.
  Tensor pad(const Tensor& x) const;
  // The mixture's probabilities shaped to broadcast with the components' moments.
  Tensor padded_weights() const;
  std::shared_ptr<const Categorical> mixture_;
  std::shared_ptr<const Distribution> components_;
  std::int64_t event_ndims_;
};

// MultivariateNormal(loc [..., k], and one of covariance_matrix, precision_matrix or scale_tril
// [..., k, k]): event_shape [k], batch_shape the broadcast of loc's and the matrix's batch dims.
// As PyTorch's, it keeps scale_tril, the lower Cholesky factor of the covariance
// (linalg::cholesky of covariance_matrix; of precision_matrix, through PyTorch's flips), and
// computes from it: rsample is loc + L eps, log_prob solves L y = value - loc. With
// validate_args, a covariance or precision matrix must be symmetric and positive-definite, a
// scale_tril lower triangular with a positive diagonal (ValueError); without, a matrix that is not
// positive-definite is still a LinAlgError (PyTorch's cholesky raises too). Reparameterized.
struct MultivariateNormalMatrix {
  // Exactly one of these (a ValueError otherwise).
  Tensor covariance_matrix, precision_matrix, scale_tril;
};
class MultivariateNormal : public Distribution {
 public:
  MultivariateNormal(const Tensor& loc, const MultivariateNormalMatrix& matrix,
                     bool validate_args = true);
  const Tensor& loc() const { return loc_; }
  // batch_shape + [k, k].
  Tensor scale_tril() const;
  Tensor covariance_matrix() const;
  Tensor precision_matrix() const;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  Tensor log_prob(const Tensor& value) const override;
  Tensor entropy() const override;
  Tensor mean() const override { return loc_; }
  Tensor variance() const override;
  std::string str() const override;
  // scale_tril as given or factored, without the batch dims it was broadcast to (PyTorch's
  // _unbroadcasted_scale_tril): what the formulas use, so that a shared matrix is solved once.
  const Tensor& unbroadcasted_scale_tril() const { return scale_tril_; }

 protected:
  Tensor in_support(const Tensor& value) const override;
  std::string support_str() const override { return "real vectors"; }

 private:
  // The half log-determinant of the covariance, sum(log(diag(L))), over scale_tril's batch dims.
  Tensor half_log_det() const;
  Tensor loc_, scale_tril_;
  const char* given_;  // the matrix's name, for str()
  Tensor matrix_;      // the matrix as given, for str()
};

// KL(p || q) per batch element, PyTorch's closed forms: Normal–Normal, Uniform–Uniform (inf
// where q's interval does not hold p's), Exponential–Exponential, Laplace–Laplace,
// Gamma–Gamma, Beta–Beta, Dirichlet–Dirichlet, Poisson–Poisson, Bernoulli–Bernoulli,
// MultivariateNormal–MultivariateNormal (of the same event shape, a ValueError otherwise),
// LogNormal–LogNormal and HalfNormal–HalfNormal (their Normals'), Gumbel–Gumbel,
// Geometric–Geometric, OneHotCategorical–OneHotCategorical (their Categoricals'),
// Categorical–Categorical (inf where q gives 0 to what p does not; 0 terms where p gives 0), and
// Independent–Independent with the same reinterpreted dims (the base pair's, summed). Another pair
// is an UnsupportedError naming both, as PyTorch's NotImplementedError.
Tensor kl_divergence(const Distribution& p, const Distribution& q);

}  // namespace ferry::distributions
