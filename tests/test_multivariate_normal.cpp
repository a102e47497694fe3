// distributions::MultivariateNormal beyond PyTorch's reference cases (those are in
// test_distributions.cpp): draws with the mean and covariance they were given on every device,
// the reparameterized gradient, the three matrices giving one distribution, KL against its
// Monte Carlo estimate, and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

namespace D = ferry::distributions;
using ferry::DType;
using ferry::Tensor;

std::vector<double> values(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }
double max_abs(const Tensor& t) { return ferry::amax(ferry::abs(t)).to(DType::f64).item<double>(); }

Tensor on(const ferry::Device& dev, std::vector<double> v, ferry::Shape shape = {}) {
  return ferry::tensor(v, shape).to(DType::f32).to(dev);
}

// A 3-dimensional normal with correlated components, batch [2] through loc.
void draws_have_their_covariance(const ferry::Device& dev) {
  ferry::manual_seed(11);
  const Tensor loc = on(dev, {1, -2, 0.5, 0, 0, 0}, {2, 3});
  const Tensor cov = on(dev, {2.0, 0.6, -0.4, 0.6, 1.0, 0.3, -0.4, 0.3, 0.5}, {3, 3});
  const D::MultivariateNormal mvn(loc, {.covariance_matrix = cov});
  EXPECT_EQ(mvn.batch_shape(), (ferry::Shape{2}));
  EXPECT_EQ(mvn.event_shape(), (ferry::Shape{3}));
  const std::int64_t n = 40000;
  const Tensor x = mvn.sample({n});
  ASSERT_EQ(x.sizes(), (ferry::Shape{n, 2, 3}));
  // Sample mean within 4 standard errors; sample covariance within 0.05 (its standard error
  // is about sqrt(2 / n) * 2 = 0.014 for the largest entry).
  const Tensor mean = ferry::mean(x, {0});
  const std::vector<double> m = values(mean), want = values(loc), c = values(cov);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(m[i], want[i], 4 * std::sqrt(c[(i % 3) * 4] / n));
  const Tensor centered = x - mean;
  const Tensor sample_cov =
      ferry::matmul(centered.permute({1, 2, 0}), centered.permute({1, 0, 2})) / double(n - 1);
  EXPECT_LT(max_abs(sample_cov - cov), 0.05);
  // variance() is the covariance's diagonal; entropy 0.5 log det(2 pi e cov).
  EXPECT_LT(max_abs(mvn.variance() - ferry::diagonal(cov, 0, -2, -1)), 1e-6);
  const double det = ferry::linalg::det(cov.to(DType::f64)).item<double>();
  const double h = 0.5 * std::log(std::pow(2 * std::numbers::pi * std::numbers::e, 3) * det);
  for (double e : values(mvn.entropy())) EXPECT_NEAR(e, h, 1e-5);
}
FERRY_TEST_ON_EACH_DEVICE(MultivariateNormal, DrawsHaveTheirCovariance, draws_have_their_covariance)

// The covariance, its inverse and its Cholesky factor describe the same distribution.
void three_matrices_agree(const ferry::Device& dev) {
  const Tensor loc = on(dev, {0.5, -1});
  const Tensor cov = on(dev, {1.5, -0.7, -0.7, 0.9}, {2, 2});
  const D::MultivariateNormal by_cov(loc, {.covariance_matrix = cov});
  const D::MultivariateNormal by_precision(loc, {.precision_matrix = ferry::linalg::inv(cov)});
  const D::MultivariateNormal by_tril(loc, {.scale_tril = ferry::linalg::cholesky(cov)});
  const Tensor value = on(dev, {0.1, 0.2, -1, 3, 2, -2}, {3, 2});
  const Tensor want = by_cov.log_prob(value);
  EXPECT_LT(max_abs(by_precision.log_prob(value) - want), 1e-5);
  EXPECT_LT(max_abs(by_tril.log_prob(value) - want), 1e-5);
  EXPECT_LT(max_abs(by_precision.covariance_matrix() - cov), 1e-5);
  EXPECT_LT(max_abs(by_tril.precision_matrix() - ferry::linalg::inv(cov)), 1e-5);
  EXPECT_LT(max_abs(by_precision.scale_tril() - by_cov.scale_tril()), 1e-5);
  // KL of a distribution against itself is 0, however it was given.
  EXPECT_LT(max_abs(D::kl_divergence(by_cov, by_precision)), 1e-5);
}
FERRY_TEST_ON_EACH_DEVICE(MultivariateNormal, ThreeMatricesAgree, three_matrices_agree)

// rsample's gradient: d E[f(x)] / d loc for f = sum(x^2) is 2 loc; d/d scale_tril is 2 L
// (E[x x^T] = L L^T + loc loc^T), both at Monte Carlo accuracy.
TEST(MultivariateNormal, RsampleCarriesTheGradient) {
  ferry::manual_seed(3);
  const Tensor loc = ferry::tensor(std::vector<float>{0.5f, -1.0f}).requires_grad_();
  const Tensor tril =
      ferry::tensor(std::vector<float>{1.0f, 0.0f, 0.5f, 0.8f}, {2, 2}).requires_grad_();
  const D::MultivariateNormal mvn(loc, {.scale_tril = tril});
  const std::int64_t n = 80000;
  const Tensor x = mvn.rsample({n});
  ferry::sum(x * x / double(n)).backward();
  const std::vector<double> gl = values(loc.grad()), gt = values(tril.grad());
  EXPECT_NEAR(gl[0], 1.0, 0.05);
  EXPECT_NEAR(gl[1], -2.0, 0.05);
  EXPECT_NEAR(gt[0], 2.0, 0.05);
  EXPECT_NEAR(gt[2], 1.0, 0.05);
  EXPECT_NEAR(gt[3], 1.6, 0.05);
}

// KL(p || q) = E_p[log p(x) - log q(x)], estimated from 200,000 draws.
TEST(MultivariateNormal, KlDivergenceIsItsExpectation) {
  ferry::manual_seed(5);
  const ferry::Device cpu = ferry::Device::cpu();
  const D::MultivariateNormal p(
      on(cpu, {0, 1, -1}),
      {.covariance_matrix = on(cpu, {1, 0.3, 0, 0.3, 2, 0.5, 0, 0.5, 1}, {3, 3})});
  const D::MultivariateNormal q(
      on(cpu, {0.5, 0, -1}),
      {.scale_tril = on(cpu, {1.2, 0, 0, -0.3, 1, 0, 0.2, 0.4, 0.9}, {3, 3})});
  const Tensor x = p.sample({200000});
  const double mc = ferry::mean(p.log_prob(x) - q.log_prob(x)).item<double>();
  const double kl = D::kl_divergence(p, q).item<double>();
  EXPECT_NEAR(kl, mc, 0.02);
}

TEST(MultivariateNormal, ArgumentsAreCheckedAsPyTorchDoes) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor loc = on(cpu, {0, 0});
  const Tensor eye = ferry::eye(2, std::nullopt, {.dtype = DType::f32});
  EXPECT_FERRY_ERROR(D::MultivariateNormal(loc, {}), ferry::ValueError,
                     "Exactly one of covariance_matrix or precision_matrix or scale_tril");
  EXPECT_FERRY_ERROR(D::MultivariateNormal(loc, {.covariance_matrix = eye, .scale_tril = eye}),
                     ferry::ValueError, "Exactly one");
  EXPECT_FERRY_ERROR(D::MultivariateNormal(ferry::scalar_tensor(0.0f), {.covariance_matrix = eye}),
                     ferry::ValueError, "loc must be at least one-dimensional");
  EXPECT_FERRY_ERROR(D::MultivariateNormal(loc, {.covariance_matrix = on(cpu, {1, 1})}),
                     ferry::ValueError, "at least two-dimensional");
  EXPECT_FERRY_ERROR(D::MultivariateNormal(on(cpu, {0, 0, 0}), {.covariance_matrix = eye}),
                     ferry::ShapeError, "3 x 3");
  // Not symmetric; not positive-definite; a scale_tril that is not lower triangular, or has a
  // diagonal entry that is not positive.
  EXPECT_FERRY_ERROR(
      D::MultivariateNormal(loc, {.covariance_matrix = on(cpu, {1, 0.5, 0, 1}, {2, 2})}),
      ferry::ValueError, "covariance_matrix", "PositiveDefinite()");
  const Tensor indefinite = on(cpu, {1, 2, 2, 1}, {2, 2});
  EXPECT_FERRY_ERROR(D::MultivariateNormal(loc, {.precision_matrix = indefinite}),
                     ferry::ValueError, "precision_matrix", "PositiveDefinite()");
  EXPECT_THROW(D::MultivariateNormal(loc, {.covariance_matrix = indefinite}, false),
               ferry::LinAlgError);
  EXPECT_FERRY_ERROR(D::MultivariateNormal(loc, {.scale_tril = on(cpu, {1, 1, 0, 1}, {2, 2})}),
                     ferry::ValueError, "scale_tril", "LowerCholesky()");
  EXPECT_FERRY_ERROR(D::MultivariateNormal(loc, {.scale_tril = on(cpu, {1, 0, 0, -1}, {2, 2})}),
                     ferry::ValueError, "LowerCholesky()");
  // Values: real vectors of the event shape.
  const D::MultivariateNormal mvn(loc, {.covariance_matrix = eye});
  EXPECT_FERRY_ERROR(mvn.log_prob(on(cpu, {0, 0, 0})), ferry::ShapeError);
  EXPECT_FERRY_ERROR(mvn.log_prob(on(cpu, {0, NAN})), ferry::ValueError, "support");
  EXPECT_FERRY_ERROR(
      D::kl_divergence(
          mvn, D::MultivariateNormal(on(cpu, {0, 0, 0}), {.covariance_matrix = ferry::eye(3)})),
      ferry::ValueError, "different event shapes");
  EXPECT_EQ(mvn.str(), "MultivariateNormal(loc: [2], covariance_matrix: [2, 2])");
}

}  // namespace
