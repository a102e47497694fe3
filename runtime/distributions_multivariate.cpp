// runtime/distributions_multivariate.cpp — MultivariateNormal (ferry/distributions.hpp) and its
// KL divergence, PyTorch's formulas on the lower Cholesky factor of the covariance, through
// ferry/ops_linalg.hpp.
#include <numbers>

#include "distributions_internal.hpp"
#include "ferry/random.hpp"

namespace ferry::distributions {

using detail::concat;
using detail::kLogSqrt2Pi;
using detail::param_str;

namespace {

Shape drop_last(const Shape& s, std::size_t n) { return Shape(s.begin(), s.end() - long(n)); }

// PyTorch's _batch_mahalanobis: |L^-1 x|^2 over the last dim, x [..., k] broadcasting with L's
// batch dims.
Tensor mahalanobis(const Tensor& l, const Tensor& x) {
  const Tensor y = linalg::solve_triangular(l, x.unsqueeze(-1), false).squeeze(-1);
  return sum(y * y, {-1});
}

// PyTorch's _precision_to_scale_tril: the lower factor of P^-1 without inverting P, from the
// Cholesky factor of P with its rows and columns reversed.
Tensor precision_to_scale_tril(const Tensor& p) {
  const Tensor lf = linalg::cholesky(flip(p, {-2, -1}));
  const Tensor l_inv = flip(lf, {-2, -1}).transpose(-2, -1);
  const Tensor id = eye(p.size(-1), std::nullopt, {.dtype = p.dtype(), .device = p.device()});
  return linalg::solve_triangular(l_inv, id, false);
}

}  // namespace

MultivariateNormal::MultivariateNormal(const Tensor& loc, const MultivariateNormalMatrix& m,
                                       bool validate_args)
    : Distribution(validate_args) {
  const int given = int(m.covariance_matrix.defined()) + int(m.precision_matrix.defined()) +
                    int(m.scale_tril.defined());
  if (given != 1)
    throw ValueError(
        "MultivariateNormal: Exactly one of covariance_matrix or precision_matrix or scale_tril "
        "may be specified.");
  if (!loc.defined()) throw ValueError("MultivariateNormal: loc must be a defined tensor");
  if (loc.dim() < 1) throw ValueError("MultivariateNormal: loc must be at least one-dimensional.");
  given_ = m.scale_tril.defined()          ? "scale_tril"
           : m.covariance_matrix.defined() ? "covariance_matrix"
                                           : "precision_matrix";
  matrix_ = m.scale_tril.defined()          ? m.scale_tril
            : m.covariance_matrix.defined() ? m.covariance_matrix
                                            : m.precision_matrix;
  if (matrix_.dim() < 2)
    throw ValueError(
        fmt::format("MultivariateNormal: {} matrix must be at least two-dimensional, "
                    "with optional leading batch dimensions",
                    given_));
  const std::int64_t k = loc.size(-1);
  if (matrix_.size(-1) != k || matrix_.size(-2) != k)
    throw ShapeError(
        fmt::format("MultivariateNormal: loc has {} dims per event, so {} must be "
                    "{} x {}, not {}",
                    k, given_, k, k, shape_str(matrix_.sizes())));
  if (matrix_.dtype() != loc.dtype())
    throw DTypeError(fmt::format("MultivariateNormal: loc is {} but {} is {}",
                                 dtype_name(loc.dtype()), given_, dtype_name(matrix_.dtype())));
  const Shape batch = broadcast_shapes(drop_last(matrix_.sizes(), 2), drop_last(loc.sizes(), 1));
  loc_ = loc.expand(concat(batch, {k}));
  set_shapes(batch, {k});
  check_parameter(all(logical_not(isnan(loc_)), {-1}), "loc", loc_,
                  "IndependentConstraint(Real(), 1)");
  if (m.scale_tril.defined()) {
    const Tensor d = diagonal(matrix_, 0, -2, -1);
    check_parameter(logical_and(all(eq(tril(matrix_), matrix_), {-2, -1}), all(gt(d, 0.0), {-1})),
                    "scale_tril", matrix_, "LowerCholesky()");
    scale_tril_ = matrix_;
    return;
  }
  // Positive-definite: symmetric (to PyTorch's isclose, atol 1e-6), and its Cholesky factor
  // exists. Without validate_args the factorization's own LinAlgError is what the caller sees.
  check_parameter(all(isclose(matrix_, matrix_.transpose(-2, -1), 1e-5, 1e-6), {-2, -1}), given_,
                  matrix_, "PositiveDefinite()");
  try {
    scale_tril_ = m.covariance_matrix.defined() ? linalg::cholesky(matrix_)
                                                : precision_to_scale_tril(matrix_);
  } catch (const LinAlgError&) {
    if (!validate_args) throw;
    check_parameter(zeros({}, {.dtype = DType::boolean}), given_, matrix_, "PositiveDefinite()");
    throw;
  }
}

Tensor MultivariateNormal::scale_tril() const {
  return scale_tril_.expand(concat(batch_shape(), {event_shape()[0], event_shape()[0]}));
}

Tensor MultivariateNormal::covariance_matrix() const {
  return matmul(scale_tril_, scale_tril_.transpose(-2, -1))
      .expand(concat(batch_shape(), {event_shape()[0], event_shape()[0]}));
}

Tensor MultivariateNormal::precision_matrix() const {
  // PyTorch's cholesky_inverse: (L L^T)^-1 from L alone.
  const Tensor id = eye(scale_tril_.size(-1), std::nullopt,
                        {.dtype = scale_tril_.dtype(), .device = scale_tril_.device()});
  return cholesky_solve(id, scale_tril_)
      .expand(concat(batch_shape(), {event_shape()[0], event_shape()[0]}));
}

Tensor MultivariateNormal::rsample(const Shape& sample_shape) const {
  const Tensor eps =
      randn(extended_shape(sample_shape), {.dtype = loc_.dtype(), .device = loc_.device()});
  // L eps as a multiply and a sum over L's rows: a batched matmul would be one tiny GEMM per
  // draw (Note [Linear algebra as compositions] in runtime/ops_factorize.cpp).
  return loc_ + sum(scale_tril_ * eps.unsqueeze(-2), {-1});
}

Tensor MultivariateNormal::half_log_det() const {
  return sum(log(diagonal(scale_tril_, 0, -2, -1)), {-1});
}

Tensor MultivariateNormal::log_prob(const Tensor& value) const {
  check_value(value);
  const double k = double(event_shape()[0]);
  const Tensor m = mahalanobis(scale_tril_, value - loc_);
  return (k * kLogSqrt2Pi * 2 + m) * -0.5 - half_log_det();
}

Tensor MultivariateNormal::entropy() const {
  const double k = double(event_shape()[0]);
  const Tensor h = half_log_det() + 0.5 * k * (1.0 + 2 * kLogSqrt2Pi);
  return h.expand(batch_shape());
}

Tensor MultivariateNormal::variance() const {
  return sum(scale_tril_ * scale_tril_, {-1}).expand(concat(batch_shape(), event_shape()));
}

std::string MultivariateNormal::str() const {
  return fmt::format("MultivariateNormal(loc: {}, {}: {})", param_str(loc_), given_,
                     param_str(matrix_));
}

Tensor MultivariateNormal::in_support(const Tensor& value) const {
  return all(logical_not(isnan(value)), {-1});
}

Tensor kl_mvn_mvn(const MultivariateNormal& p, const MultivariateNormal& q) {
  if (p.event_shape() != q.event_shape())
    throw ValueError(
        "KL-divergence between two Multivariate Normals with different event shapes cannot be "
        "computed");
  const Tensor& pl = p.unbroadcasted_scale_tril();
  const Tensor& ql = q.unbroadcasted_scale_tril();
  const auto half_log_det = [](const Tensor& l) { return sum(log(diagonal(l, 0, -2, -1)), {-1}); };
  const Tensor half_term1 = half_log_det(ql) - half_log_det(pl);
  const std::int64_t n = p.event_shape()[0];
  const Shape batch = broadcast_shapes(drop_last(ql.sizes(), 2), drop_last(pl.sizes(), 2));
  // trace(Sq^-1 Sp) = |Lq^-1 Lp|_F^2.
  const Tensor x = linalg::solve_triangular(ql.expand(concat(batch, {n, n})),
                                            pl.expand(concat(batch, {n, n})), false);
  const Tensor term2 = sum(x * x, {-2, -1});
  const Tensor term3 = mahalanobis(ql, q.loc() - p.loc());
  return half_term1 + (term2 + term3 - double(n)) * 0.5;
}

}  // namespace ferry::distributions
