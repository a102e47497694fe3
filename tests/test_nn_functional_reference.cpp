// F.lp_pool1d/2d, F.multilabel_margin_loss, F.triplet_margin_with_distance_loss and the eval
// forms of F.rrelu and F.alpha_dropout against PyTorch's
// (tests/data/pytorch_nn_functional_reference.json, written by
// tools/gen_nn_functional_reference.py) on every device: outputs and gradients. Then the random
// ones in training against their closed forms (alpha dropout's two values and kept moments,
// rrelu's slopes, gumbel_softmax's simplex and straight-through gradient), the modules' reprs
// and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::as_double;
using nlohmann::json;
namespace nn = ferry::nn;
namespace F = ferry::nn::functional;

nn::Reduction reduction_of(const json& a) {
  const std::string r = a.value("reduction", std::string("mean"));
  return r == "sum" ? nn::Reduction::sum : r == "none" ? nn::Reduction::none : nn::Reduction::mean;
}

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  const auto sizes = [&](const char* name) {
    return a.contains(name) ? a[name].get<ferry::ConvSizes>() : ferry::ConvSizes{};
  };
  if (op == "lp_pool1d")
    return ferry::lp_pool1d(in[0], a["norm_type"], sizes("kernel_size"), sizes("stride"),
                            a.value("ceil_mode", false));
  if (op == "lp_pool2d")
    return ferry::lp_pool2d(in[0], a["norm_type"], sizes("kernel_size"), sizes("stride"),
                            a.value("ceil_mode", false));
  if (op == "multilabel_margin_loss")
    return F::multilabel_margin_loss(in[0], in[1], reduction_of(a));
  if (op == "triplet_margin_with_distance_loss") {
    F::DistanceFunction d;
    if (a["distance"] == "cosine")
      d = [](const Tensor& x, const Tensor& y) { return 1.0 - F::cosine_similarity(x, y); };
    return F::triplet_margin_with_distance_loss(in[0], in[1], in[2], d, a["margin"], a["swap"],
                                                reduction_of(a));
  }
  if (op == "rrelu") return F::rrelu(in[0], a["lower"], a["upper"], false);
  if (op == "alpha_dropout") return F::alpha_dropout(in[0], a["p"], false);
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_nn_functional_reference.json", dev, 12, run_case);
}
FERRY_TEST_ON_EACH_DEVICE(NnFunctional, PyTorchReference, run_reference)

// Every output of alpha dropout is a·x + λα·a·p (kept) or λα·a·(p - 1) (dropped), a share p of
// them dropped; an input of mean 0 and variance 1 keeps both. Feature alpha dropout drops whole
// channels.
void alpha_dropout_keeps_selus_moments(const ferry::Device& dev) {
  ferry::manual_seed(11);
  const double p = 0.2, sat = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((sat * sat * p + 1) * (1 - p));
  const Tensor x = ferry::randn({64, 512}, {.device = dev});
  const Tensor y = F::alpha_dropout(x, p, true);
  const std::vector<double> xs = as_double(x), ys = as_double(y);
  std::size_t dropped = 0;
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double kept = a * xs[i] + sat * a * p, gone = sat * a * (p - 1);
    const bool is_dropped = std::fabs(ys[i] - gone) < 1e-6;
    ASSERT_TRUE(is_dropped || std::fabs(ys[i] - kept) < 1e-5) << i << ": " << ys[i];
    dropped += is_dropped;
    sum += ys[i];
    sq += ys[i] * ys[i];
  }
  const double n = double(xs.size());
  EXPECT_NEAR(double(dropped) / n, p, 0.01);
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sq / n - (sum / n) * (sum / n), 1.0, 0.03);
  EXPECT_TRUE(F::alpha_dropout(x, p).is_same(x)) << "training defaults to false";

  const Tensor img = ferry::randn({4, 6, 3, 3}, {.device = dev});
  const double a5 = 1.0 / std::sqrt((sat * sat * 0.5 + 1) * 0.5);
  const std::vector<double> in = as_double(img),
                            f = as_double(F::feature_alpha_dropout(img, 0.5, true));
  int channels_dropped = 0;
  for (std::size_t c = 0; c < 24; ++c) {
    int gone = 0, kept = 0;
    for (std::size_t k = 0; k < 9; ++k) {
      const std::size_t i = c * 9 + k;
      gone += std::fabs(f[i] - sat * a5 * (0.5 - 1)) < 1e-6;
      kept += std::fabs(f[i] - (a5 * in[i] + sat * a5 * 0.5)) < 1e-5;
    }
    EXPECT_TRUE(gone == 9 || kept == 9) << "channel " << c << " is dropped or kept whole";
    channels_dropped += gone == 9;
  }
  EXPECT_GT(channels_dropped, 3);
  EXPECT_LT(channels_dropped, 21);
  nn::AlphaDropout layer(0.3);
  layer.eval();
  EXPECT_TRUE(layer.forward(x).is_same(x));
  EXPECT_EQ(layer.str(), "AlphaDropout(p=0.3, inplace=false)");
  EXPECT_FERRY_ERROR(F::alpha_dropout(x, 1.5, true), ferry::Error, "[0, 1]");
  EXPECT_FERRY_ERROR(F::feature_alpha_dropout(ferry::ones({3}, {.device = dev}), 0.5, true),
                     ferry::ShapeError, "at least 2 dims");
}
FERRY_TEST_ON_EACH_DEVICE(NnFunctional, AlphaDropoutKeepsSelusMoments,
                          alpha_dropout_keeps_selus_moments)

// In training each negative input is scaled by its own slope in [lower, upper], which is its
// gradient; positive inputs pass with gradient 1. Evaluation is leaky_relu at the mean slope.
void rrelu_draws_a_slope_per_element(const ferry::Device& dev) {
  ferry::manual_seed(12);
  Tensor x = ferry::randn({40, 50}, {.device = dev}).requires_grad_();
  const Tensor y = F::rrelu(x, 0.1, 0.4, true);
  ferry::sum(y).backward();
  const std::vector<double> xs = as_double(x), ys = as_double(y), g = as_double(x.grad());
  double slopes = 0;
  int negatives = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] > 0) {
      EXPECT_EQ(ys[i], xs[i]);
      EXPECT_EQ(g[i], 1.0);
      continue;
    }
    const double slope = ys[i] / xs[i];
    ASSERT_TRUE(slope >= 0.1 - 1e-6 && slope <= 0.4 + 1e-6) << slope;
    EXPECT_NEAR(g[i], slope, 1e-6);
    slopes += slope;
    ++negatives;
  }
  EXPECT_NEAR(slopes / negatives, 0.25, 0.01);
  nn::RReLU layer;
  layer.eval();
  ferry_test::expect_close(as_double(layer.forward(x.detach())),
                           as_double(ferry::leaky_relu(x.detach(), (1.0 / 8 + 1.0 / 3) / 2)), 1e-7,
                           0);
  EXPECT_EQ(layer.str(), "RReLU(lower=0.125, upper=0.3333333333333333)");
  EXPECT_FERRY_ERROR(nn::RReLU(0.5, 0.1), ferry::ValueError, "lower");
}
FERRY_TEST_ON_EACH_DEVICE(NnFunctional, RreluDrawsASlopePerElement, rrelu_draws_a_slope_per_element)

// The soft sample is a point of the simplex; the hard one its argmax's one-hot, whose gradient
// is the soft sample's (straight-through). Low temperature on distinct logits picks the argmax
// of logits + noise, so with logits far apart, the largest.
void gumbel_softmax_samples_the_simplex(const ferry::Device& dev) {
  ferry::manual_seed(13);
  Tensor logits = ferry::randn({8, 5}, {.device = dev}).requires_grad_();
  const Tensor soft = F::gumbel_softmax(logits, 0.5);
  ferry_test::expect_close(as_double(ferry::sum(soft, {1})), std::vector<double>(8, 1.0), 1e-6,
                           1e-6);
  ferry::manual_seed(14);
  const Tensor hard = F::gumbel_softmax(logits, 0.5, true);
  ferry::manual_seed(14);
  const Tensor same_soft = F::gumbel_softmax(logits, 0.5, false);
  const std::vector<double> h = as_double(hard);
  for (std::int64_t r = 0; r < 8; ++r) {
    int ones = 0;
    // one_hot - soft + soft: 1 and 0 up to the rounding of that sum, as PyTorch's.
    for (std::int64_t c = 0; c < 5; ++c) {
      const double v = h[std::size_t(r * 5 + c)];
      ones += std::fabs(v - 1.0) < 1e-6;
      EXPECT_TRUE(std::fabs(v - 1.0) < 1e-6 || std::fabs(v) < 1e-6) << v;
    }
    EXPECT_EQ(ones, 1) << "row " << r;
  }
  EXPECT_EQ(ferry::argmax(hard, 1).to_vector<std::int64_t>(),
            ferry::argmax(same_soft, 1).to_vector<std::int64_t>());
  const Tensor w = ferry::randn({8, 5}, {.device = dev});
  const std::vector<Tensor> g_hard = ferry::autograd::grad({ferry::sum(hard * w)}, {logits});
  const std::vector<Tensor> g_soft = ferry::autograd::grad({ferry::sum(same_soft * w)}, {logits});
  ferry_test::expect_close(as_double(g_hard[0]), as_double(g_soft[0]), 1e-5, 1e-6);
  const Tensor far = ferry::tensor(std::vector<float>{0, 40, 0, 0}).to(dev);
  EXPECT_EQ(ferry::argmax(F::gumbel_softmax(far, 0.1, true)).item<std::int64_t>(), 1);
  EXPECT_FERRY_ERROR(F::gumbel_softmax(far, 0.0), ferry::ValueError, "tau");
}
FERRY_TEST_ON_EACH_DEVICE(NnFunctional, GumbelSoftmaxSamplesTheSimplex,
                          gumbel_softmax_samples_the_simplex)

TEST(NnFunctional, ModulesAndErrors) {
  ferry::manual_seed(15);
  const Tensor img = ferry::rand({1, 2, 6, 6});
  nn::LPPool2d pool(2, {3}, {}, false);
  EXPECT_EQ(pool.str(), "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=false)");
  ferry_test::expect_close(as_double(pool.forward(img)), as_double(ferry::lp_pool2d(img, 2, {3})),
                           0, 0);
  // p = 1 of non-negative inputs: the window sums.
  ferry_test::expect_close(as_double(ferry::lp_pool2d(img, 1, {2})),
                           as_double(ferry::avg_pool2d(img, {2}) * 4.0), 1e-6, 1e-6);
  EXPECT_EQ(nn::LPPool1d(3, {4}, {2}, true).str(),
            "LPPool1d(norm_type=3, kernel_size=4, stride=2, ceil_mode=true)");
  EXPECT_EQ(nn::FeatureAlphaDropout(0.2).str(), "FeatureAlphaDropout(p=0.2, inplace=false)");

  const Tensor x = ferry::randn({2, 4});
  const Tensor y = ferry::tensor(std::vector<std::int64_t>{1, -1, 0, 0, 3, 2, -1, 5}, {2, 4});
  EXPECT_FERRY_ERROR(F::multilabel_margin_loss(x, y), ferry::ValueError, "5", "[-1, 4)");
  EXPECT_FERRY_ERROR(F::multilabel_margin_loss(x, y.narrow(1, 0, 3)), ferry::ShapeError, "[2, 4]",
                     "[2, 3]");
  EXPECT_FERRY_ERROR(F::multilabel_margin_loss(x, y.to(DType::i32)), ferry::DTypeError, "i64");
  nn::MultiLabelMarginLoss mlm;
  const Tensor fine = ferry::tensor(std::vector<std::int64_t>{1, -1, 0, 0, 3, 2, -1, 0}, {2, 4});
  ferry_test::expect_close(as_double(mlm.forward(x, fine)),
                           as_double(F::multilabel_margin_loss(x, fine)), 0, 0);
  // A target list that starts with -1 names no class: a loss of 0.
  EXPECT_EQ(F::multilabel_margin_loss(x.select(0, 0),
                                      ferry::tensor(std::vector<std::int64_t>{-1, 1, 2, 3}))
                .item<float>(),
            0.0f);

  const Tensor a = ferry::randn({3, 4}), p = ferry::randn({3, 4}), n = ferry::randn({3, 4});
  nn::TripletMarginWithDistanceLoss triplet;
  ferry_test::expect_close(as_double(triplet.forward(a, p, n)),
                           as_double(F::triplet_margin_loss(a, p, n)), 1e-6, 1e-7);
  EXPECT_FERRY_ERROR(nn::TripletMarginWithDistanceLoss({}, 0.0), ferry::ValueError, "margin");
  EXPECT_FERRY_ERROR(F::triplet_margin_with_distance_loss(a, p, n.select(0, 0)), ferry::ShapeError,
                     "same number of dims");
}

}  // namespace
