// runtime/distributions_internal.hpp — what the distributions' files share
// (ferry/distributions.hpp): shape helpers, PyTorch's broadcast_all and _sum_rightmost, and
// the repr of a parameter.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dtype_limits.hpp"
#include "ferry/distributions.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry::distributions {
namespace detail {

inline constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 pi))

inline Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// PyTorch's broadcast_all for two tensors: both expanded to their broadcast shape.
inline std::pair<Tensor, Tensor> broadcast_pair(const char* who, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined())
    throw ValueError(fmt::format("{}: both parameters must be defined tensors", who));
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes());
  return {a.expand(shape), b.expand(shape)};
}

// The sum over the n rightmost dims (PyTorch's _sum_rightmost).
inline Tensor sum_rightmost(const Tensor& t, std::int64_t n) {
  if (n == 0) return t;
  std::vector<std::int64_t> dims;
  for (std::int64_t d = t.dim() - n; d < t.dim(); ++d) dims.push_back(d);
  return sum(t, dims);
}

// A parameter as PyTorch's repr shows it: its value when it has one element, else its shape.
inline std::string param_str(const Tensor& t) {
  return t.numel() == 1 ? fmt::format("{}", t.to(DType::f64).to(Device::cpu()).item<double>())
                        : shape_str(t.sizes());
}

// The parameter the caller gave of probs and logits: exactly one must be defined.
inline void check_one_of(const char* who, const Tensor& probs, const Tensor& logits) {
  if (probs.defined() == logits.defined())
    throw ValueError(fmt::format("{}: either probs or logits must be given, but not both (got {})",
                                 who, probs.defined() ? "both" : "neither"));
}

inline bool all_true(const Tensor& ok) { return ok.numel() == 0 || all(ok).item<bool>(); }

// torch.finfo's eps and tiny (runtime/dtype_limits.hpp): clamp_probs keeps probabilities eps
// away from 0 and 1; the inversion samplers (Geometric, Gumbel) keep their uniform draws above
// tiny so that log u stays finite.
using ferry::detail::machine_eps;
using ferry::detail::smallest_normal;

// A tensor of NaN shaped like t (the undefined moments).
inline Tensor nan_like(const Tensor& t) {
  return full_like(t, std::numeric_limits<double>::quiet_NaN());
}

}  // namespace detail

// The KL divergences kl_divergence takes from the other files: (distributions_gamma.cpp)
Tensor kl_gamma_gamma(const Gamma& p, const Gamma& q);
Tensor kl_beta_beta(const Beta& p, const Beta& q);
Tensor kl_dirichlet_dirichlet(const Dirichlet& p, const Dirichlet& q);
Tensor kl_poisson_poisson(const Poisson& p, const Poisson& q);
// (distributions_multivariate.cpp)
Tensor kl_mvn_mvn(const MultivariateNormal& p, const MultivariateNormal& q);
// (distributions_continuous.cpp)
Tensor kl_gumbel_gumbel(const Gumbel& p, const Gumbel& q);

}  // namespace ferry::distributions
