// nn::init's normal-family, truncated, orthogonal, identity and sparse initialisers, on every
// device, against closed forms: the moments of the (truncated) normal they draw from, the
// defining property of the Q factor (orthonormal, and the draw's R upper triangular with a
// positive diagonal), a convolution with dirac_'s weight returning its input, and sparse_'s
// count of zeros per column. The draws are ferry's own (Note [Counter-based RNG]), so PyTorch's
// numbers cannot be compared; its formulas can. uniform_/xavier_uniform_/kaiming_uniform_:
// test_nn_layers.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::as_double;
namespace init = ferry::nn::init;

struct Moments {
  double mean, std;
};
Moments moments(const Tensor& t) {
  const std::vector<double> v = as_double(t);
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / double(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / double(v.size() - 1))};
}

Tensor param(const ferry::Shape& shape, const ferry::Device& dev, DType dtype = DType::f32) {
  return ferry::empty(shape, {.dtype = dtype, .device = dev}).requires_grad_();
}

// 32768 draws: the sample standard deviation is within 1.5% of the true one at 3.8 sigma.
void normal_families_draw_with_their_standard_deviation(const ferry::Device& dev) {
  ferry::manual_seed(7);
  Tensor w = param({256, 128}, dev);
  init::kaiming_normal_(w, 0.0, "fan_in", "relu");
  Moments m = moments(w);
  EXPECT_NEAR(m.std, std::sqrt(2.0 / 128.0), 0.015 * std::sqrt(2.0 / 128.0));
  EXPECT_NEAR(m.mean, 0.0, 0.003);
  EXPECT_TRUE(w.requires_grad() && w.is_leaf()) << "initialisation is not recorded by autograd";

  Tensor conv = param({64, 32, 4, 4}, dev);  // torchvision's ResNet: fan_out, relu
  init::kaiming_normal_(conv, 0.0, "fan_out", "relu");
  EXPECT_NEAR(moments(conv).std, std::sqrt(2.0 / (64 * 16)), 0.015 * std::sqrt(2.0 / (64 * 16)));
  init::kaiming_normal_(conv, std::sqrt(5.0));  // leaky_relu, fan_in: gain √(1/3)
  const double leaky = std::sqrt(1.0 / 3.0) / std::sqrt(32.0 * 16);
  EXPECT_NEAR(moments(conv).std, leaky, 0.015 * leaky);

  init::xavier_normal_(w, 2.0);
  const double xavier = 2.0 * std::sqrt(2.0 / (256.0 + 128.0));
  EXPECT_NEAR(moments(w).std, xavier, 0.015 * xavier);

  Tensor none = param({0, 5}, dev);  // nothing to draw
  init::kaiming_normal_(none);
  init::xavier_normal_(none);
  Tensor vec = param({5}, dev);
  EXPECT_FERRY_ERROR(init::kaiming_normal_(vec), ferry::ShapeError, "at least 2 dims", "[5]");
  EXPECT_FERRY_ERROR(init::kaiming_normal_(w, 0, "fan"), ferry::Error, "kaiming_normal_", "fan_in");
  EXPECT_FERRY_ERROR(init::xavier_normal_(vec), ferry::ShapeError, "[5]");
}
FERRY_TEST_ON_EACH_DEVICE(NnInit, NormalFamiliesDrawWithTheirStandardDeviation,
                          normal_families_draw_with_their_standard_deviation)

// N(0.5, 2²) truncated to [-1, 3]: every draw inside, and the truncated normal's closed-form
// mean and standard deviation, μ + σ(φ(α) - φ(β))/Z and σ√(1 + (αφ(α) - βφ(β))/Z - ((φ(α) -
// φ(β))/Z)²) with α, β the standardised bounds and Z = Φ(β) - Φ(α).
void trunc_normal_draws_inside_the_bounds_with_their_moments(const ferry::Device& dev) {
  ferry::manual_seed(7);
  const double mu = 0.5, sigma = 2.0, a = -1.0, b = 3.0;
  const double al = (a - mu) / sigma, be = (b - mu) / sigma;
  const auto pdf = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); };
  const auto cdf = [](double x) { return (1 + std::erf(x / std::numbers::sqrt2)) / 2; };
  const double z = cdf(be) - cdf(al), shift = (pdf(al) - pdf(be)) / z;
  const double mean = mu + sigma * shift;
  const double std = sigma * std::sqrt(1 + (al * pdf(al) - be * pdf(be)) / z - shift * shift);

  Tensor w = param({128, 256}, dev);
  init::trunc_normal_(w, mu, sigma, a, b);
  const std::vector<double> v = as_double(w);
  for (double x : v) ASSERT_TRUE(x >= a && x <= b) << x;
  const Moments m = moments(w);
  EXPECT_NEAR(m.mean, mean, 0.025);
  EXPECT_NEAR(m.std, std, 0.02 * std);

  // ViT's: std 0.02 within ±2 (far outside: a plain normal), and a 16-bit weight.
  Tensor vit = param({64, 512}, dev, DType::bf16);
  init::trunc_normal_(vit, 0.0, 0.02);
  EXPECT_NEAR(moments(vit).std, 0.02, 0.0005);
  Tensor narrow = param({4096}, dev, DType::f16);
  init::trunc_normal_(narrow, 0.0, 1.0, 0.25, 0.5);
  for (double x : as_double(narrow)) ASSERT_TRUE(x >= 0.25 && x <= 0.5) << x;

  EXPECT_FERRY_ERROR(init::trunc_normal_(w, 0, 1, 2, 2), ferry::ValueError, "a < b");
  EXPECT_FERRY_ERROR(init::trunc_normal_(w, 0, 0), ferry::ValueError, "std");
  Tensor ints = ferry::zeros({3}, {.dtype = DType::i64, .device = dev});
  EXPECT_FERRY_ERROR(init::trunc_normal_(ints), ferry::DTypeError, "trunc_normal_", "i64");
}
FERRY_TEST_ON_EACH_DEVICE(NnInit, TruncNormalDrawsInsideTheBoundsWithItsMoments,
                          trunc_normal_draws_inside_the_bounds_with_their_moments)

// The Q of the draw's QR decomposition is determined by two properties: its columns are
// orthonormal, and R = Qᵀ·draw is upper triangular with a positive diagonal. The draw is
// replayed from the same seed; a wide weight is the transposed case.
void check_orthogonal(const ferry::Device& dev, const ferry::Shape& shape, double gain, DType dtype,
                      double tol) {
  SCOPED_TRACE(ferry::shape_str(shape));
  std::int64_t rows = shape[0], cols = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) cols *= shape[d];
  ferry::manual_seed(1234);
  Tensor draw = ferry::empty({rows, cols}, {.dtype = dtype, .device = dev});
  ferry::normal_(draw);
  ferry::manual_seed(1234);
  Tensor w = param(shape, dev, dtype);
  init::orthogonal_(w, gain);
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());

  const Tensor q = w.detach().reshape({rows, cols}).to(ferry::Device::cpu(), DType::f64) / gain;
  const Tensor d = draw.to(ferry::Device::cpu(), DType::f64);
  const bool wide = rows < cols;
  const Tensor qm = wide ? q.transpose(0, 1) : q;  // the tall factor, m x n
  const Tensor m = wide ? d.transpose(0, 1) : d;
  const std::int64_t n = qm.size(1);
  ferry_test::expect_close(as_double(ferry::matmul(qm.transpose(0, 1), qm)),
                           as_double(ferry::eye(n, n, {.dtype = DType::f64})), tol, tol);
  const std::vector<double> r = as_double(ferry::matmul(qm.transpose(0, 1), m));
  for (std::int64_t i = 0; i < n; ++i) {
    EXPECT_GT(r[std::size_t(i * n + i)], 0.0) << "R's diagonal at " << i;
    for (std::int64_t j = 0; j < i; ++j)
      EXPECT_NEAR(r[std::size_t(i * n + j)], 0.0, 10 * tol)
          << "R below its diagonal at " << i << ", " << j;
  }
}

void orthogonal_is_the_q_factor_of_its_draw(const ferry::Device& dev) {
  check_orthogonal(dev, {10, 6}, 1.0, DType::f32, 2e-5);
  check_orthogonal(dev, {6, 10}, 2.0, DType::f32, 2e-5);
  check_orthogonal(dev, {8, 4, 3}, 0.5, DType::f32, 2e-5);  // a conv1d weight: 8 x 12
  check_orthogonal(dev, {16, 16}, 1.0, DType::f64, 1e-12);
  check_orthogonal(dev, {1, 5}, 1.0, DType::f32, 2e-5);

  Tensor vec = param({5}, dev);
  EXPECT_FERRY_ERROR(init::orthogonal_(vec), ferry::ShapeError, "2 or more dimensions", "[5]");
  Tensor none = param({0, 4}, dev);
  init::orthogonal_(none);
}
FERRY_TEST_ON_EACH_DEVICE(NnInit, OrthogonalIsTheQFactorOfItsDraw,
                          orthogonal_is_the_q_factor_of_its_draw)

// eye_ is the identity; a convolution with dirac_'s weight returns its input's channels.
void eye_and_dirac_are_identities(const ferry::Device& dev) {
  Tensor e = param({3, 5}, dev);
  init::eye_(e);
  ferry_test::expect_close(as_double(e), as_double(ferry::eye(3, 5)), 0, 0);
  Tensor ints = ferry::full({2, 2}, 7, {.dtype = DType::i32, .device = dev});
  init::eye_(ints);
  EXPECT_EQ(ints.to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 0, 0, 1}));

  ferry::manual_seed(5);
  const Tensor x2 = ferry::randn({2, 4, 5, 6}, {.device = dev});
  Tensor w2 = param({4, 4, 3, 3}, dev);
  init::dirac_(w2);
  ferry_test::expect_close(as_double(ferry::conv2d(x2, w2, {}, {1}, 1)), as_double(x2), 1e-6, 1e-6);
  // Groups: each group's outputs copy that group's inputs.
  const Tensor x6 = ferry::randn({2, 6, 5, 5}, {.device = dev});
  Tensor wg = param({6, 3, 3, 3}, dev);
  init::dirac_(wg, 2);
  ferry_test::expect_close(as_double(ferry::conv2d(x6, wg, {}, {1}, 1, {1}, 2)), as_double(x6),
                           1e-6, 1e-6);
  // More outputs than inputs (1-D, kernel 5): the extra channels are 0.
  const Tensor x1 = ferry::randn({2, 3, 9}, {.device = dev});
  Tensor w1 = param({5, 3, 5}, dev);
  init::dirac_(w1);
  const Tensor y1 = ferry::conv1d(x1, w1, {}, {1}, 2);
  ferry_test::expect_close(as_double(y1.narrow(1, 0, 3)), as_double(x1), 1e-6, 1e-6);
  ferry_test::expect_close(as_double(y1.narrow(1, 3, 2)), std::vector<double>(36, 0.0), 0, 0);
  const Tensor x3 = ferry::randn({1, 2, 3, 4, 5}, {.device = dev});
  Tensor w3 = param({2, 2, 3, 3, 3}, dev);
  init::dirac_(w3);
  ferry_test::expect_close(as_double(ferry::conv3d(x3, w3, {}, {1}, 1)), as_double(x3), 1e-6, 1e-6);
  EXPECT_TRUE(w3.is_leaf());

  EXPECT_FERRY_ERROR(init::eye_(w2), ferry::ShapeError, "2 dimensions", "[4, 4, 3, 3]");
  EXPECT_FERRY_ERROR(init::dirac_(e), ferry::ShapeError, "3, 4, or 5", "[3, 5]");
  EXPECT_FERRY_ERROR(init::dirac_(wg, 4), ferry::ValueError, "divisible by groups");
}
FERRY_TEST_ON_EACH_DEVICE(NnInit, EyeAndDiracAreIdentities, eye_and_dirac_are_identities)

// ceil(0.3 · 20) = 6 zeros in every column, at places that differ between columns, the rest
// N(0, 0.5²).
void sparse_zeroes_a_fixed_share_of_every_column(const ferry::Device& dev) {
  ferry::manual_seed(7);
  Tensor w = param({20, 300}, dev);
  init::sparse_(w, 0.3, 0.5);
  const std::vector<double> v = as_double(w);
  std::vector<double> kept;
  std::vector<int> zero_rows_of_first(20, 0);
  int columns_like_the_first = 0;
  for (std::int64_t c = 0; c < 300; ++c) {
    int zeros = 0;
    bool same = true;
    for (std::int64_t r = 0; r < 20; ++r) {
      const double x = v[std::size_t(r * 300 + c)];
      if (c == 0) zero_rows_of_first[std::size_t(r)] = x == 0;
      same = same && (x == 0) == bool(zero_rows_of_first[std::size_t(r)]);
      if (x == 0)
        ++zeros;
      else
        kept.push_back(x);
    }
    ASSERT_EQ(zeros, 6) << "column " << c;
    columns_like_the_first += same;
  }
  EXPECT_LT(columns_like_the_first, 10) << "the zeros are placed per column, at random";
  double sq = 0;
  for (double x : kept) sq += x * x;
  EXPECT_NEAR(std::sqrt(sq / double(kept.size())), 0.5, 0.025);
  EXPECT_TRUE(w.is_leaf());

  init::sparse_(w, 0.0);
  for (double x : as_double(w)) ASSERT_NE(x, 0.0);
  init::sparse_(w, 1.0);
  for (double x : as_double(w)) ASSERT_EQ(x, 0.0);
  Tensor cube = param({2, 2, 2}, dev);
  EXPECT_FERRY_ERROR(init::sparse_(cube, 0.5), ferry::ShapeError, "2 dimensions");
  EXPECT_FERRY_ERROR(init::sparse_(w, 1.5), ferry::ValueError, "sparsity", "1.5");
}
FERRY_TEST_ON_EACH_DEVICE(NnInit, SparseZeroesAFixedShareOfEveryColumn,
                          sparse_zeroes_a_fixed_share_of_every_column)

}  // namespace
