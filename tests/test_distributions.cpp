// ferry::distributions (torch.distributions) against PyTorch's
// (tests/data/pytorch_distributions_reference.json, written by
// tools/gen_distributions_reference.py) on every device: log_prob, cdf, icdf, entropy and KL
// divergences with their gradients (Normal to OneHotCategorical; MultivariateNormal's own draws
// and checks are in test_multivariate_normal.cpp). Then the draws against their closed forms
// (moments, frequencies, shapes, the reparameterized gradient), and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/distributions.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::as_double;
using nlohmann::json;
namespace D = ferry::distributions;

// A value PyTorch has no gradient through, from the case's attrs, on the inputs' device.
Tensor value_of(const json& a, const Tensor& like) {
  return ferry::tensor(a["value"].get<std::vector<float>>(), a["value_shape"].get<Shape>())
      .to(like.device());
}

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  const bool logits = a.value("param", std::string("probs")) == "logits";
  auto bernoulli = [&](const Tensor& p) { return logits ? D::Bernoulli({}, p) : D::Bernoulli(p); };
  auto categorical = [&](const Tensor& p) {
    return logits ? D::Categorical({}, p) : D::Categorical(p);
  };
  if (op == "normal_log_prob") return D::Normal(in[0], in[1]).log_prob(in[2]);
  if (op == "normal_cdf") return D::Normal(in[0], in[1]).cdf(in[2]);
  if (op == "normal_icdf") return D::Normal(in[0], in[1]).icdf(in[2]);
  if (op == "normal_entropy") return D::Normal(ferry::zeros_like(in[0]), in[0]).entropy();
  if (op == "uniform_log_prob") return D::Uniform(in[0], in[1]).log_prob(value_of(a, in[0]));
  if (op == "uniform_cdf") return D::Uniform(in[0], in[1], a.value("validate", true)).cdf(in[2]);
  if (op == "uniform_icdf") return D::Uniform(in[0], in[1]).icdf(in[2]);
  if (op == "uniform_entropy") return D::Uniform(in[0], in[1]).entropy();
  if (op == "bernoulli_log_prob") return bernoulli(in[0]).log_prob(value_of(a, in[0]));
  if (op == "bernoulli_entropy") return bernoulli(in[0]).entropy();
  if (op == "categorical_log_prob") return categorical(in[0]).log_prob(in[1]);
  if (op == "categorical_entropy") return categorical(in[0]).entropy();
  if (op == "exponential_log_prob") return D::Exponential(in[0]).log_prob(in[1]);
  if (op == "exponential_cdf") return D::Exponential(in[0]).cdf(in[1]);
  if (op == "exponential_icdf") return D::Exponential(in[0]).icdf(in[1]);
  if (op == "exponential_entropy") return D::Exponential(in[0]).entropy();
  if (op == "exponential_moments") {
    const D::Exponential e(in[0]);
    return ferry::stack({e.mean(), e.variance()});
  }
  if (op == "laplace_log_prob") return D::Laplace(in[0], in[1]).log_prob(in[2]);
  if (op == "laplace_cdf") return D::Laplace(in[0], in[1]).cdf(in[2]);
  if (op == "laplace_icdf") return D::Laplace(in[0], in[1]).icdf(in[2]);
  if (op == "laplace_entropy") return D::Laplace(ferry::zeros_like(in[0]), in[0]).entropy();
  if (op == "gamma_log_prob") return D::Gamma(in[0], in[1]).log_prob(in[2]);
  if (op == "gamma_entropy") return D::Gamma(in[0], in[1]).entropy();
  if (op == "gamma_moments") {
    const D::Gamma g(in[0], in[1]);
    return ferry::stack({g.mean(), g.variance()});
  }
  if (op == "chi2_log_prob") return D::Chi2(in[0]).log_prob(in[1]);
  if (op == "chi2_entropy") return D::Chi2(in[0]).entropy();
  if (op == "studentt_log_prob") return D::StudentT(in[0], in[1], in[2]).log_prob(in[3]);
  if (op == "studentt_entropy")
    return D::StudentT(in[0], ferry::zeros_like(in[1]), in[1]).entropy();
  if (op == "studentt_moments") {
    const Tensor df = ferry::tensor(a["df"].get<std::vector<float>>()).to(in[0].device());
    const D::StudentT t(df, in[0], in[1]);
    return ferry::stack({t.mean(), t.variance()});
  }
  if (op == "beta_log_prob") return D::Beta(in[0], in[1]).log_prob(in[2]);
  if (op == "beta_entropy") return D::Beta(in[0], in[1]).entropy();
  if (op == "beta_moments") {
    const D::Beta b(in[0], in[1]);
    return ferry::stack({b.mean(), b.variance()});
  }
  if (op == "dirichlet_log_prob") return D::Dirichlet(in[0]).log_prob(in[1]);
  if (op == "dirichlet_entropy") return D::Dirichlet(in[0]).entropy();
  if (op == "dirichlet_moments") {
    const D::Dirichlet d(in[0]);
    return ferry::stack({d.mean(), d.variance()});
  }
  if (op == "poisson_log_prob") return D::Poisson(in[0]).log_prob(value_of(a, in[0]));
  if (op.rfind("mixture_", 0) == 0) {
    auto weights = std::make_shared<D::Categorical>(Tensor(), in[0]);
    std::shared_ptr<const D::Distribution> comp = std::make_shared<D::Normal>(in[1], in[2]);
    if (op.find("independent") != std::string::npos)
      comp = std::make_shared<D::Independent>(comp, 1);
    const D::MixtureSameFamily mix(weights, comp);
    if (op.ends_with("log_prob")) return mix.log_prob(in[3]);
    if (op.ends_with("cdf")) return mix.cdf(in[3]);
    return ferry::stack({mix.mean(), mix.variance()});
  }
  // Cauchy, LogNormal, Gumbel (loc, scale, value) and HalfNormal (scale, value).
  const auto two = [&](const std::string& kind) -> std::unique_ptr<D::Distribution> {
    if (kind == "cauchy") return std::make_unique<D::Cauchy>(in[0], in[1]);
    if (kind == "lognormal") return std::make_unique<D::LogNormal>(in[0], in[1]);
    if (kind == "gumbel") return std::make_unique<D::Gumbel>(in[0], in[1]);
    if (kind == "halfnormal") return std::make_unique<D::HalfNormal>(in[0]);
    return nullptr;
  };
  if (const auto cut = op.find('_'); cut != std::string::npos) {
    const std::string kind = op.substr(0, cut), method = op.substr(cut + 1);
    const bool known =
        method == "log_prob" || method == "cdf" || method == "icdf" || method == "entropy_moments";
    if (auto d = known ? two(kind) : nullptr) {
      const Tensor& value = in[kind == "halfnormal" ? 1 : 2];
      if (method == "log_prob") return d->log_prob(value);
      if (method == "cdf") return d->cdf(value);
      if (method == "icdf") return d->icdf(value);
      if (method == "entropy_moments")
        return ferry::stack({d->entropy(), d->mean(), d->variance()});
    }
  }
  if (op == "cauchy_entropy") return D::Cauchy(ferry::zeros_like(in[0]), in[0]).entropy();
  auto geometric = [&](const Tensor& p) { return logits ? D::Geometric({}, p) : D::Geometric(p); };
  if (op == "geometric_log_prob") return geometric(in[0]).log_prob(value_of(a, in[0]));
  if (op == "geometric_entropy_moments") {
    const D::Geometric g = geometric(in[0]);
    return ferry::stack({g.entropy(), g.mean(), g.variance()});
  }
  auto onehot = [&](const Tensor& p) {
    return logits ? D::OneHotCategorical({}, p) : D::OneHotCategorical(p);
  };
  if (op == "onehot_log_prob") return onehot(in[0]).log_prob(value_of(a, in[0]));
  if (op == "onehot_entropy_moments") {
    const D::OneHotCategorical c = onehot(in[0]);
    return ferry::cat({c.entropy(), c.mean().reshape({-1}), c.variance().reshape({-1})});
  }
  if (op == "kl_lognormal")
    return D::kl_divergence(D::LogNormal(in[0], in[1]), D::LogNormal(in[2], in[3]));
  if (op == "kl_gumbel") return D::kl_divergence(D::Gumbel(in[0], in[1]), D::Gumbel(in[2], in[3]));
  if (op == "kl_halfnormal") return D::kl_divergence(D::HalfNormal(in[0]), D::HalfNormal(in[1]));
  if (op == "kl_geometric") return D::kl_divergence(geometric(in[0]), geometric(in[1]));
  if (op == "kl_onehot") return D::kl_divergence(onehot(in[0]), onehot(in[1]));
  if (op.rfind("mvn_", 0) == 0) {
    const std::string m = a.value("matrix", "covariance_matrix");
    D::MultivariateNormalMatrix matrix;
    // (entropy and the matrices take the matrix alone, loc zeros: PyTorch gives loc no gradient.)
    const bool with_loc = op == "mvn_log_prob";
    const Tensor& given = in[with_loc ? 1 : 0];
    (m == "scale_tril"         ? matrix.scale_tril
     : m == "precision_matrix" ? matrix.precision_matrix
                               : matrix.covariance_matrix) = given;
    const D::MultivariateNormal d(with_loc ? in[0] : ferry::zeros_like(given.select(-1, 0)),
                                  matrix);
    if (op == "mvn_log_prob") return d.log_prob(in[2]);
    if (op == "mvn_covariance") return d.covariance_matrix();
    return ferry::cat(
        {d.entropy(), d.variance().reshape({-1}), d.precision_matrix().reshape({-1})});
  }
  if (op == "kl_mvn")
    return D::kl_divergence(D::MultivariateNormal(in[0], {.covariance_matrix = in[1]}),
                            D::MultivariateNormal(in[2], {.scale_tril = in[3]}));
  const std::int64_t n = a.value("ndims", 0);
  auto independent = [&](const Tensor& m, const Tensor& s) {
    return D::Independent(std::make_shared<D::Normal>(m, s), n);
  };
  if (op == "independent_normal_log_prob") return independent(in[0], in[1]).log_prob(in[2]);
  if (op == "independent_normal_entropy")
    return independent(ferry::zeros_like(in[0]), in[0]).entropy();
  if (op == "kl_normal_normal")
    return D::kl_divergence(D::Normal(in[0], in[1]), D::Normal(in[2], in[3]));
  if (op == "kl_uniform_uniform")
    return D::kl_divergence(D::Uniform(in[0], in[1]), D::Uniform(in[2], in[3]));
  if (op == "kl_bernoulli") return D::kl_divergence(bernoulli(in[0]), bernoulli(in[1]));
  if (op == "kl_categorical") return D::kl_divergence(categorical(in[0]), categorical(in[1]));
  if (op == "kl_exponential") return D::kl_divergence(D::Exponential(in[0]), D::Exponential(in[1]));
  if (op == "kl_laplace")
    return D::kl_divergence(D::Laplace(in[0], in[1]), D::Laplace(in[2], in[3]));
  if (op == "kl_gamma") return D::kl_divergence(D::Gamma(in[0], in[1]), D::Gamma(in[2], in[3]));
  if (op == "kl_beta") return D::kl_divergence(D::Beta(in[0], in[1]), D::Beta(in[2], in[3]));
  if (op == "kl_dirichlet") return D::kl_divergence(D::Dirichlet(in[0]), D::Dirichlet(in[1]));
  if (op == "kl_poisson") return D::kl_divergence(D::Poisson(in[0]), D::Poisson(in[1]));
  if (op == "kl_independent_normal")
    return D::kl_divergence(independent(in[0], in[1]), independent(in[2], in[3]));
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_distributions_reference.json", dev, 95, run_case);
}
FERRY_TEST_ON_EACH_DEVICE(Distributions, PyTorchReference, run_reference)

// The column means and standard deviations of x [n, k].
void column_moments(const Tensor& x, std::vector<double>& mean, std::vector<double>& sd) {
  const std::vector<double> v = as_double(x);
  const auto k = std::size_t(x.size(1)), n = v.size() / k;
  mean.assign(k, 0);
  sd.assign(k, 0);
  for (std::size_t i = 0; i < v.size(); ++i) mean[i % k] += v[i] / double(n);
  for (std::size_t i = 0; i < v.size(); ++i)
    sd[i % k] += (v[i] - mean[i % k]) * (v[i] - mean[i % k]) / double(n - 1);
  for (double& s : sd) s = std::sqrt(s);
}

// Normal and Uniform draws have their closed-form moments; rsample's gradient is 1 in loc and
// the standardized draw (x - loc) / scale in scale; sample() is outside the graph.
void draws_have_their_moments(const ferry::Device& dev) {
  ferry::manual_seed(5);
  const Tensor loc = ferry::tensor(std::vector<float>{0.0f, 3.0f}).to(dev).requires_grad_();
  const Tensor scale = ferry::tensor(std::vector<float>{1.0f, 0.5f}).to(dev).requires_grad_();
  const D::Normal normal(loc, scale);
  const std::int64_t n = 40000;
  const Tensor x = normal.rsample({n});
  ASSERT_EQ(x.sizes(), (Shape{n, 2}));
  std::vector<double> mean, sd;
  column_moments(x, mean, sd);
  EXPECT_NEAR(mean[0], 0.0, 0.02);
  EXPECT_NEAR(mean[1], 3.0, 0.01);
  EXPECT_NEAR(sd[0], 1.0, 0.015);
  EXPECT_NEAR(sd[1], 0.5, 0.008);
  ferry::sum(x).backward();
  EXPECT_EQ(as_double(loc.grad()), (std::vector<double>{double(n), double(n)}));
  const std::vector<double> z = as_double((x.detach() - loc.detach()) / scale.detach());
  double z0 = 0, z1 = 0;
  for (std::size_t i = 0; i < z.size(); ++i) (i % 2 ? z1 : z0) += z[i];
  const std::vector<double> gs = as_double(scale.grad());
  EXPECT_NEAR(gs[0], z0, 1e-3 * n);
  EXPECT_NEAR(gs[1], z1, 1e-3 * n);
  EXPECT_FALSE(normal.sample({3}).requires_grad());

  const D::Uniform uniform(ferry::tensor(std::vector<float>{-1.0f, 2.0f}).to(dev),
                           ferry::tensor(std::vector<float>{1.0f, 2.5f}).to(dev));
  const Tensor u = uniform.sample({n});
  const std::vector<double> uv = as_double(u);
  for (std::size_t i = 0; i < uv.size(); ++i) {
    ASSERT_GE(uv[i], i % 2 ? 2.0 : -1.0);
    ASSERT_LT(uv[i], i % 2 ? 2.5 : 1.0);
  }
  column_moments(u, mean, sd);
  EXPECT_NEAR(mean[0], 0.0, 0.015);
  EXPECT_NEAR(mean[1], 2.25, 0.004);
  EXPECT_NEAR(sd[0], 2 / std::sqrt(12.0), 0.01);
  EXPECT_NEAR(as_double(uniform.stddev())[1], 0.5 / std::sqrt(12.0), 1e-6);
}
FERRY_TEST_ON_EACH_DEVICE(Distributions, DrawsHaveTheirMoments, draws_have_their_moments)

// Exponential, Laplace and mixture draws against their distributions' own moments (the
// closed forms PyTorch's reference cases hold), and the Exponential's median at log 2 / rate.
void more_draws_have_their_moments(const ferry::Device& dev) {
  ferry::manual_seed(7);
  const std::int64_t n = 40000;
  auto on = [&](std::vector<float> v) { return ferry::tensor(v).to(dev); };
  std::vector<double> mean, sd;
  const D::Exponential e(on({0.5f, 4.0f}));
  const Tensor es = e.sample({n});
  column_moments(es, mean, sd);
  EXPECT_NEAR(mean[0], 2.0, 0.04);
  EXPECT_NEAR(mean[1], 0.25, 0.005);
  EXPECT_NEAR(sd[0], 2.0, 0.05);
  const std::vector<double> ev = as_double(es);
  std::size_t below = 0;
  for (std::size_t i = 0; i < ev.size(); i += 2) {
    ASSERT_GE(ev[i], 0.0);
    below += ev[i] < std::log(2.0) / 0.5;
  }
  EXPECT_NEAR(double(below) / double(n), 0.5, 0.01);

  const D::Laplace l(on({1.0f, -2.0f}), on({0.5f, 2.0f}));
  column_moments(l.sample({n}), mean, sd);
  EXPECT_NEAR(mean[0], 1.0, 0.01);
  EXPECT_NEAR(mean[1], -2.0, 0.04);
  EXPECT_NEAR(sd[0], 0.5 * std::sqrt(2.0), 0.015);
  EXPECT_NEAR(sd[1], 2.0 * std::sqrt(2.0), 0.06);

  // Two well-separated components, weights 0.25 and 0.75, batch [2].
  const D::MixtureSameFamily mix(
      std::make_shared<D::Categorical>(
          ferry::tensor(std::vector<float>{1, 3, 3, 1}, {2, 2}).to(dev)),
      std::make_shared<D::Normal>(
          ferry::tensor(std::vector<float>{-5, 5, 0, 10}, {2, 2}).to(dev),
          ferry::tensor(std::vector<float>{1, 1, 2, 0.5f}, {2, 2}).to(dev)));
  EXPECT_EQ(mix.batch_shape(), (Shape{2}));
  const Tensor ms = mix.sample({n});
  ASSERT_EQ(ms.sizes(), (Shape{n, 2}));
  column_moments(ms, mean, sd);
  const std::vector<double> want_mean = as_double(mix.mean()), want_sd = as_double(mix.stddev());
  EXPECT_NEAR(want_mean[0], 2.5, 1e-5);  // 0.25 (-5) + 0.75 (5)
  for (std::size_t j = 0; j < 2; ++j) {
    EXPECT_NEAR(mean[j], want_mean[j], 0.05) << j;
    EXPECT_NEAR(sd[j], want_sd[j], 0.05) << j;
  }
}
FERRY_TEST_ON_EACH_DEVICE(Distributions, MoreDrawsHaveTheirMoments, more_draws_have_their_moments)

// The rejection samplers (Note [Gamma draws]) against the moments: Gamma on both sides of
// alpha = 1 (the boosted draw below), Beta, Dirichlet on the simplex, Chi2, StudentT, and
// Poisson on both
// sides of rate 10 (Knuth's below, PTRS above), integers all.
void gamma_family_draws_have_their_moments(const ferry::Device& dev) {
  ferry::manual_seed(9);
  const std::int64_t n = 40000;
  auto on = [&](std::vector<float> v) { return ferry::tensor(v).to(dev); };
  std::vector<double> mean, sd;
  const D::Gamma g(on({0.3f, 2.5f, 12.0f}), on({2.0f, 2.0f, 0.5f}));
  const Tensor gs = g.sample({n});
  ASSERT_EQ(gs.sizes(), (Shape{n, 3}));
  column_moments(gs, mean, sd);
  const std::vector<double> alpha = {0.3, 2.5, 12}, beta = {2, 2, 0.5};
  for (std::size_t j = 0; j < 3; ++j) {
    const double m = alpha[j] / beta[j], s = std::sqrt(alpha[j]) / beta[j];
    EXPECT_NEAR(mean[j], m, 4 * s / std::sqrt(double(n))) << j;
    EXPECT_NEAR(sd[j], s, 0.03 * s) << j;
  }
  for (double v : as_double(gs)) ASSERT_GT(v, 0.0);

  const D::Beta b(on({2.0f, 0.5f}), on({5.0f, 0.5f}));
  column_moments(b.sample({n}), mean, sd);
  const std::vector<double> bm = as_double(b.mean()), bs = as_double(b.stddev());
  for (std::size_t j = 0; j < 2; ++j) {
    EXPECT_NEAR(mean[j], bm[j], 4 * bs[j] / std::sqrt(double(n))) << j;
    EXPECT_NEAR(sd[j], bs[j], 0.03 * bs[j]) << j;
  }

  const D::Dirichlet d(on({1.0f, 2.0f, 3.0f}));
  const Tensor ds = d.sample({n});
  ASSERT_EQ(ds.sizes(), (Shape{n, 3}));
  EXPECT_TRUE(ferry::allclose(ferry::sum(ds, {-1}), ferry::ones({n}, {.device = dev}), 0, 1e-5));
  column_moments(ds, mean, sd);
  for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(mean[j], double(j + 1) / 6, 0.005) << j;

  const D::Chi2 chi2(on({3.0f}));
  column_moments(chi2.sample({n}), mean, sd);
  EXPECT_NEAR(mean[0], 3.0, 4 * std::sqrt(6.0 / double(n)));
  EXPECT_NEAR(sd[0] * sd[0], 6.0, 0.3);
  const D::StudentT t(on({5.0f}), on({1.0f}), on({2.0f}));
  column_moments(t.sample({n}), mean, sd);
  EXPECT_NEAR(mean[0], 1.0, 4 * std::sqrt(20.0 / 3 / double(n)));
  EXPECT_NEAR(sd[0] * sd[0], 20.0 / 3, 0.6);  // the fourth moment is large at df 5

  const std::vector<float> rates = {0.0f, 0.7f, 4.0f, 15.0f, 250.0f};
  const D::Poisson p(on(rates));
  const Tensor ps = p.sample({n});
  const std::vector<double> pv = as_double(ps);
  for (double v : pv) ASSERT_TRUE(v >= 0 && v == std::floor(v)) << v;
  column_moments(ps, mean, sd);
  for (std::size_t j = 0; j < rates.size(); ++j) {
    const double r = rates[j];
    EXPECT_NEAR(mean[j], r, 4 * std::sqrt(r / double(n)) + 1e-9) << r;
    EXPECT_NEAR(sd[j] * sd[j], r, 0.04 * r + 1e-9) << r;
  }
}
FERRY_TEST_ON_EACH_DEVICE(Distributions, GammaFamilyDrawsHaveTheirMoments,
                          gamma_family_draws_have_their_moments)

// Bernoulli's ones and Categorical's categories come at their probabilities, in
// sample_shape + batch_shape; Independent keeps the base's draws and moves dims to the event.
void discrete_draws_follow_their_probabilities(const ferry::Device& dev) {
  ferry::manual_seed(6);
  const std::int64_t n = 20000;
  const D::Bernoulli b(ferry::tensor(std::vector<float>{0.1f, 0.5f, 0.9f}).to(dev));
  const Tensor bs = b.sample({n});
  ASSERT_EQ(bs.sizes(), (Shape{n, 3}));
  EXPECT_EQ(bs.dtype(), DType::f32);
  std::vector<double> mean, sd;
  column_moments(bs, mean, sd);
  for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(mean[j], 0.1 + 0.4 * double(j), 0.01) << j;

  // Unnormalized probabilities, two batch rows.
  const Tensor probs = ferry::tensor(std::vector<float>{1, 2, 7, 0, 5, 0, 0, 5}, {2, 4}).to(dev);
  const D::Categorical c(probs);
  EXPECT_EQ(c.batch_shape(), (Shape{2}));
  EXPECT_EQ(c.num_events(), 4);
  const Tensor cs = c.sample({n / 2, 2});
  ASSERT_EQ(cs.sizes(), (Shape{n / 2, 2, 2}));
  EXPECT_EQ(cs.dtype(), DType::i64);
  const std::vector<std::int64_t> v = cs.to_vector<std::int64_t>();
  std::vector<double> freq(8, 0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_GE(v[i], 0);
    ASSERT_LT(v[i], 4);
    freq[(i % 2) * 4 + std::size_t(v[i])] += 2.0 / double(v.size());
  }
  const std::vector<double> want = {0.1, 0.2, 0.7, 0, 0.5, 0, 0, 0.5};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_NEAR(freq[i], want[i], 0.012) << i;
  EXPECT_EQ(c.sample().sizes(), (Shape{2}));
  EXPECT_TRUE(std::isnan(as_double(c.mean())[0]));

  const D::Independent ind(std::make_shared<D::Normal>(ferry::zeros({4, 3}, {.device = dev}),
                                                       ferry::ones({4, 3}, {.device = dev})),
                           1);
  EXPECT_EQ(ind.batch_shape(), (Shape{4}));
  EXPECT_EQ(ind.event_shape(), (Shape{3}));
  EXPECT_EQ(ind.sample({5}).sizes(), (Shape{5, 4, 3}));
  EXPECT_EQ(ind.log_prob(ferry::zeros({5, 4, 3}, {.device = dev})).sizes(), (Shape{5, 4}));
  EXPECT_TRUE(ind.has_rsample());
  // The density of a standard normal vector of 3 at 0: -3/2 log(2 pi).
  EXPECT_NEAR(as_double(ind.log_prob(ferry::zeros({3}, {.device = dev})))[0],
              -1.5 * std::log(2 * M_PI), 1e-5);
}
FERRY_TEST_ON_EACH_DEVICE(Distributions, DiscreteDrawsFollowTheirProbabilities,
                          discrete_draws_follow_their_probabilities)

// Cauchy by its quartiles (it has no moments), HalfNormal, LogNormal (through log x), Gumbel and
// Geometric by theirs, OneHotCategorical by its frequencies, 40,000 draws of a batch of two.
void heavy_tailed_and_transformed_draws(const ferry::Device& dev) {
  ferry::manual_seed(9);
  const std::int64_t n = 40000;
  auto on = [&](std::vector<float> v) { return ferry::tensor(v).to(dev); };
  std::vector<double> mean, sd;
  const std::vector<double> c = as_double(D::Cauchy(on({0, 5}), on({1, 2})).sample({n}));
  double below_loc = 0, below_upper_quartile = 0;
  for (std::size_t i = 1; i < c.size(); i += 2) {
    below_loc += c[i] < 5;
    below_upper_quartile += c[i] < 7;
  }
  EXPECT_NEAR(below_loc / double(n), 0.5, 0.01);
  EXPECT_NEAR(below_upper_quartile / double(n), 0.75, 0.01);

  const Tensor h = D::HalfNormal(on({1, 3})).sample({n});
  EXPECT_GE(ferry::amin(h).item<double>(), 0.0);
  column_moments(h, mean, sd);
  EXPECT_NEAR(mean[1], 3 * std::sqrt(2 / M_PI), 0.03);
  EXPECT_NEAR(sd[1], 3 * std::sqrt(1 - 2 / M_PI), 0.03);

  column_moments(ferry::log(D::LogNormal(on({0.5f, -1}), on({0.25f, 1})).sample({n})), mean, sd);
  EXPECT_NEAR(mean[0], 0.5, 0.005);
  EXPECT_NEAR(sd[1], 1.0, 0.015);

  const D::Gumbel g(on({1, -2}), on({2, 0.5f}));
  column_moments(g.sample({n}), mean, sd);
  EXPECT_NEAR(mean[0], as_double(g.mean())[0], 0.04);
  EXPECT_NEAR(sd[1], std::sqrt(as_double(g.variance())[1]), 0.01);

  const Tensor k = D::Geometric(on({0.2f, 0.7f})).sample({n});
  EXPECT_TRUE(ferry::equal(k, ferry::floor(k)));
  column_moments(k, mean, sd);
  EXPECT_NEAR(mean[0], 4.0, 0.1);  // (1 - p) / p; sd sqrt(1 - p) / p = 4.5
  EXPECT_NEAR(mean[1], 3.0 / 7, 0.015);

  const Tensor hot = D::OneHotCategorical(on({0.1f, 0.2f, 0.7f})).sample({n});
  EXPECT_EQ(hot.sizes(), (Shape{n, 3}));
  EXPECT_TRUE(ferry::equal(ferry::sum(hot, {-1}), ferry::ones({n}, {.device = dev})));
  column_moments(hot, mean, sd);
  EXPECT_NEAR(mean[0], 0.1, 0.006);
  EXPECT_NEAR(mean[2], 0.7, 0.009);
}
FERRY_TEST_ON_EACH_DEVICE(Distributions, HeavyTailedAndTransformedDraws,
                          heavy_tailed_and_transformed_draws)

Tensor t1(std::vector<float> v) { return ferry::tensor(v); }

TEST(Distributions, ArgumentsAreCheckedAsPyTorchDoes) {
  EXPECT_FERRY_ERROR(D::Normal(t1({0, 1}), t1({1, 0})), ferry::ValueError, "scale", "positive",
                     "Normal");
  EXPECT_NO_THROW(D::Normal(t1({0, 1}), t1({1, 0}), /*validate_args=*/false));
  EXPECT_FERRY_ERROR(D::Normal(t1({0, 1, 2}), t1({1, 1})), ferry::ShapeError);
  EXPECT_FERRY_ERROR(D::Uniform(t1({0, 1}), t1({1, 1})), ferry::ValueError, "low >= high");
  EXPECT_FERRY_ERROR(D::Bernoulli(t1({0.5f}), t1({0.0f})), ferry::ValueError, "not both");
  EXPECT_FERRY_ERROR(D::Bernoulli(Tensor()), ferry::ValueError, "neither");
  EXPECT_FERRY_ERROR(D::Bernoulli(t1({1.5f})), ferry::ValueError, "probs", "[0, 1]");
  EXPECT_FERRY_ERROR(D::Categorical(ferry::scalar_tensor(1.0)), ferry::ValueError,
                     "one-dimensional");
  EXPECT_FERRY_ERROR(D::Categorical(t1({0.5f, -0.1f, 0.6f})), ferry::ValueError, "simplex");
  EXPECT_FERRY_ERROR(D::Categorical(t1({0, 0})), ferry::ValueError, "simplex");  // 0 / 0

  // Values outside the support, or of shapes that do not broadcast.
  const D::Bernoulli b(t1({0.3f, 0.6f}));
  EXPECT_FERRY_ERROR(b.log_prob(t1({0.5f, 1})), ferry::ValueError, "support", "{0, 1}");
  EXPECT_FERRY_ERROR(b.log_prob(t1({0, 1, 1})), ferry::ShapeError, "[3]", "[2]");
  const D::Categorical c(t1({0.2f, 0.3f, 0.5f}));
  EXPECT_FERRY_ERROR(c.log_prob(ferry::tensor(std::vector<std::int64_t>{3})), ferry::ValueError,
                     "integers in [0, 2]");
  EXPECT_FERRY_ERROR(c.log_prob(t1({1.5f})), ferry::ValueError, "support");
  const D::Uniform u(t1({0}), t1({1}));
  EXPECT_FERRY_ERROR(u.log_prob(t1({2})), ferry::ValueError, "support");
  const D::Uniform unchecked(t1({0}), t1({1}), false);
  EXPECT_EQ(as_double(unchecked.log_prob(t1({2})))[0], -INFINITY);

  // What a distribution does not have.
  EXPECT_FERRY_ERROR(b.rsample(), ferry::UnsupportedError, "rsample", "Bernoulli");
  EXPECT_FERRY_ERROR(c.cdf(t1({1})), ferry::UnsupportedError, "cdf");
  EXPECT_FERRY_ERROR(D::kl_divergence(D::Normal(t1({0}), t1({1})), u), ferry::UnsupportedError,
                     "Normal", "Uniform");
  const auto base = std::make_shared<D::Normal>(t1({0, 0}), t1({1, 1}));
  EXPECT_FERRY_ERROR(D::Independent(base, 2), ferry::ValueError, "reinterpreted_batch_ndims");
  EXPECT_FERRY_ERROR(D::Independent(nullptr, 0), ferry::ValueError, "null");
  EXPECT_FERRY_ERROR(D::kl_divergence(D::Independent(base, 1), D::Independent(base, 0)),
                     ferry::UnsupportedError, "reinterpreted_batch_ndims");

  EXPECT_FERRY_ERROR(D::Exponential(t1({1, -1})), ferry::ValueError, "rate", "positive");
  EXPECT_FERRY_ERROR(D::Exponential(t1({1})).log_prob(t1({-0.5f})), ferry::ValueError, "support");
  EXPECT_FERRY_ERROR(D::Laplace(t1({0}), t1({0})), ferry::ValueError, "scale");
  const auto weights = std::make_shared<D::Categorical>(t1({0.5f, 0.5f}));
  EXPECT_FERRY_ERROR(
      D::MixtureSameFamily(weights, std::make_shared<D::Normal>(t1({0, 1, 2}), t1({1, 1, 1}))),
      ferry::ShapeError, "2 categories", "3 components");
  EXPECT_FERRY_ERROR(D::MixtureSameFamily(weights, std::make_shared<D::Normal>(
                                                       ferry::zeros({3, 2}), ferry::ones({3, 2}))),
                     ferry::ShapeError, "batch_shape");
  EXPECT_FERRY_ERROR(D::MixtureSameFamily(weights, nullptr), ferry::ValueError, "null");
  EXPECT_FERRY_ERROR(D::MixtureSameFamily(weights, base).rsample(), ferry::UnsupportedError,
                     "rsample");

  EXPECT_FERRY_ERROR(D::Gamma(t1({1}), t1({0})), ferry::ValueError, "rate");
  EXPECT_FERRY_ERROR(D::Beta(t1({-1}), t1({1})), ferry::ValueError, "concentration1");
  EXPECT_FERRY_ERROR(D::Dirichlet(ferry::scalar_tensor(1.0)), ferry::ValueError, "dimension");
  EXPECT_FERRY_ERROR(D::Dirichlet(t1({1, 2})).log_prob(t1({0.3f, 0.3f})), ferry::ValueError,
                     "simplex");
  EXPECT_FERRY_ERROR(D::Poisson(t1({-1})), ferry::ValueError, "rate");
  EXPECT_FERRY_ERROR(D::Poisson(t1({2})).log_prob(t1({1.5f})), ferry::ValueError, "integers >= 0");
  EXPECT_FERRY_ERROR(D::Gamma(t1({1}), t1({1})).rsample(), ferry::UnsupportedError, "rsample");
  EXPECT_EQ(D::Dirichlet(ferry::ones({2, 3})).event_shape(), (Shape{3}));

  EXPECT_FERRY_ERROR(D::Cauchy(t1({0}), t1({-1})), ferry::ValueError, "scale", "Cauchy");
  EXPECT_FERRY_ERROR(D::HalfNormal(t1({0})), ferry::ValueError, "scale", "HalfNormal(scale: 0)");
  EXPECT_FERRY_ERROR(D::LogNormal(t1({0}), t1({-1})), ferry::ValueError, "scale", "LogNormal");
  EXPECT_FERRY_ERROR(D::HalfNormal(t1({1})).log_prob(t1({-1})), ferry::ValueError, "support");
  EXPECT_FERRY_ERROR(D::LogNormal(t1({0}), t1({1})).log_prob(t1({0})), ferry::ValueError, "support",
                     "(0, inf)");
  EXPECT_FERRY_ERROR(D::Gumbel(t1({0}), t1({0})), ferry::ValueError, "scale");
  EXPECT_FERRY_ERROR(D::Geometric(t1({0})), ferry::ValueError, "probs", "(0, 1]");
  EXPECT_FERRY_ERROR(D::Geometric(t1({0.5f})).log_prob(t1({1.5f})), ferry::ValueError, "support");
  EXPECT_FERRY_ERROR(D::OneHotCategorical(t1({0.5f, 0.5f})).log_prob(t1({1, 1})), ferry::ValueError,
                     "one-hot");
  EXPECT_EQ(D::OneHotCategorical(t1({0.5f, 0.5f})).event_shape(), (Shape{2}));
  EXPECT_TRUE(D::HalfNormal(t1({1}), false).log_prob(t1({-1})).item<float>() == -INFINITY);

  // PyTorch's reprs: a one-element parameter by value, a larger one by shape.
  EXPECT_EQ(D::Normal(ferry::scalar_tensor(0.5), ferry::scalar_tensor(2.0)).str(),
            "Normal(loc: 0.5, scale: 2)");
  EXPECT_EQ(D::Independent(base, 1).str(), "Independent(Normal(loc: [2], scale: [2]), 1)");
}

// KL(p || p) is 0, and KL of Normals matches the Monte Carlo mean of log p - log q.
TEST(Distributions, KlDivergenceIsItsExpectation) {
  ferry::manual_seed(8);
  const D::Normal p(t1({0.5f}), t1({0.8f})), q(t1({-0.3f}), t1({1.4f}));
  EXPECT_NEAR(as_double(D::kl_divergence(p, p))[0], 0.0, 1e-7);
  const Tensor x = p.sample({200000});
  const double mc = ferry::mean(p.log_prob(x) - q.log_prob(x)).item<double>();
  EXPECT_NEAR(as_double(D::kl_divergence(p, q))[0], mc, 0.01);
  const D::Categorical a(t1({0.2f, 0.0f, 0.8f})), b(t1({0.5f, 0.5f, 0.0f}));
  EXPECT_EQ(as_double(D::kl_divergence(a, b))[0], INFINITY);  // b gives 0 to what a does not
  EXPECT_NEAR(as_double(D::kl_divergence(b, D::Categorical(t1({0.25f, 0.25f, 0.5f}))))[0],
              std::log(2.0), 1e-6);  // a zero of p contributes nothing
}

}  // namespace
