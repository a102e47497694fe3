// The layers beyond their PyTorch reference numbers (test_nn_reference.cpp): Dropout's mask
// (seeded, the same on every device, scaled, off in eval), nn::init's distributions, the
// layers' initialisation, typed errors for bad input, and a small model that trains.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

namespace nn = ferry::nn;
namespace F = ferry::nn::functional;
using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;

// ------------------------------------------------------------------ Dropout

TEST(NnDropout, MaskIsSeededAndScaled) {
  const Tensor x = ferry::full({64, 33}, 2.0f);
  ferry::manual_seed(7);
  const std::vector<double> a = as_double(F::dropout(x, 0.25));
  ferry::manual_seed(7);
  const std::vector<double> b = as_double(F::dropout(x, 0.25));
  EXPECT_EQ(a, b);
  const std::vector<double> c = as_double(F::dropout(x, 0.25));  // the generator moved on
  EXPECT_NE(a, c);
  std::size_t kept = 0;
  for (double v : a) {
    EXPECT_TRUE(v == 0.0 || std::fabs(v - 2.0 / 0.75) < 1e-6) << v;
    kept += v != 0.0;
  }
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, a.size());
}

TEST(NnDropout, SameMaskOnVulkan) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const ferry::Device gpu("vulkan:0");
  const Tensor x = ferry_test::sample_tensor({17, 29});
  ferry::manual_seed(99);
  const Tensor on_cpu = F::dropout(x, 0.4);
  ferry::manual_seed(99);
  nn::Dropout drop(0.4);
  const Tensor on_gpu = drop.forward(x.to(gpu));
  EXPECT_EQ(on_gpu.device(), gpu);
  const std::vector<double> c = as_double(on_cpu), g = as_double(on_gpu);
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i] == 0.0, g[i] == 0.0) << "mask differs at " << i;
    EXPECT_NEAR(c[i], g[i], 1e-6 * std::fabs(c[i])) << i;
  }
}

TEST(NnDropout, KeepsAboutOneMinusPOfALargeTensor) {
  ferry::manual_seed(1234);
  for (double p : {0.1, 0.5, 0.9}) {
    const Tensor y = F::dropout(ferry::ones({1 << 18}), p);
    // Each element is 0 or 1/(1-p): the mean of y·(1-p) is the kept fraction.
    const double kept = ferry::mean(y).item<float>() * (1.0 - p);
    EXPECT_NEAR(kept, 1.0 - p, 0.005) << "p=" << p;
  }
}

TEST(NnDropout, EvalZeroAndOneAndBadP) {
  const Tensor x = ferry_test::sample_tensor({4, 5});
  nn::Dropout drop(0.5);
  drop.eval();
  EXPECT_TRUE(drop.forward(x).is_same(x));
  EXPECT_TRUE(F::dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(F::dropout(x, 0.0).is_same(x));
  expect_close(as_double(F::dropout(x, 1.0)), std::vector<double>(20, 0.0), 0, 0);
  EXPECT_FERRY_ERROR(nn::Dropout(1.5), ferry::Error, "Dropout", "[0, 1]", "1.5");
  EXPECT_FERRY_ERROR(nn::Dropout(-0.1), ferry::Error, "Dropout");
  EXPECT_FERRY_ERROR(F::dropout(x, std::nan("")), ferry::Error, "dropout", "[0, 1]");
  EXPECT_FERRY_ERROR(F::dropout(ferry::ones({3}, {.dtype = DType::i32}), 0.5), ferry::DTypeError,
                     "dropout", "i32");
}

TEST(NnDropout, GradientIsTheScaledMask) {
  ferry::manual_seed(3);
  const Tensor x = ferry::ones({200}).requires_grad_();
  const Tensor y = F::dropout(x, 0.3);
  ferry::sum(y).backward();
  expect_close(as_double(x.grad()), as_double(y), 1e-6, 0);  // x is 1: y is the scaled mask
}

// ------------------------------------------------------------------ init

TEST(NnInit, LinearUsesKaimingUniformAndIsReproducible) {
  ferry::manual_seed(5);
  nn::Linear a(50, 40);
  ferry::manual_seed(5);
  nn::Linear b(50, 40);
  EXPECT_EQ(as_double(a.weight), as_double(b.weight));
  EXPECT_EQ(as_double(a.bias), as_double(b.bias));
  nn::Linear c(50, 40);
  EXPECT_NE(as_double(a.weight), as_double(c.weight));
  const double bound = 1.0 / std::sqrt(50.0);
  double lo = 1, hi = -1;
  for (double v : as_double(a.weight)) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);  // 2000 draws reach close to both ends
  EXPECT_GT(hi, 0.9 * bound);
  for (double v : as_double(a.bias)) EXPECT_LE(std::fabs(v), bound);
  EXPECT_TRUE(a.weight.requires_grad());
  EXPECT_TRUE(a.weight.is_leaf());
}

TEST(NnInit, DistributionsAndBounds) {
  ferry::manual_seed(8);
  nn::Embedding e(400, 50);  // N(0, 1)
  EXPECT_NEAR(ferry::mean(e.weight).item<float>(), 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(ferry::var(e.weight).item<float>()), 1.0, 0.02);

  Tensor w = ferry::empty({30, 20}).requires_grad_();  // in place on a leaf that needs grad
  nn::init::xavier_uniform_(w, 2.0);
  const double xb = 2.0 * std::sqrt(6.0 / 50.0);
  for (double v : as_double(w)) EXPECT_LE(std::fabs(v), xb);
  EXPECT_TRUE(w.requires_grad());
  nn::init::kaiming_uniform_(w, 0.0, "fan_out", "relu");
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 30.0);
  for (double v : as_double(w)) EXPECT_LE(std::fabs(v), kb);
  nn::init::normal_(w, 3.0, 0.5);
  EXPECT_NEAR(ferry::mean(w).item<float>(), 3.0, 0.1);
  nn::init::uniform_(w, 2.0, 2.5);
  for (double v : as_double(w)) EXPECT_TRUE(v >= 2.0 && v < 2.5);
  nn::init::constant_(w, -1.5);
  expect_close(as_double(w), std::vector<double>(600, -1.5), 0, 0);
  nn::init::zeros_(w);
  EXPECT_EQ(ferry::sum(w).item<float>(), 0.0f);
  nn::init::ones_(w);
  EXPECT_EQ(ferry::sum(w).item<float>(), 600.0f);

  Tensor conv = ferry::empty({8, 4, 3, 3});
  EXPECT_EQ(nn::init::calculate_fans(conv).fan_in, 36);
  EXPECT_EQ(nn::init::calculate_fans(conv).fan_out, 72);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  Tensor vec = ferry::empty({5});
  EXPECT_FERRY_ERROR(nn::init::kaiming_uniform_(vec), ferry::ShapeError, "at least 2 dims", "[5]");
  EXPECT_FERRY_ERROR(nn::init::kaiming_uniform_(w, 0, "fan_sideways"), ferry::Error, "fan_in");
  EXPECT_FERRY_ERROR(nn::init::calculate_gain("swish"), ferry::Error, "swish");
  Tensor ints = ferry::zeros({2, 2}, {.dtype = DType::i32});
  EXPECT_FERRY_ERROR(nn::init::normal_(ints), ferry::DTypeError, "normal_", "i32");
  Tensor empty = ferry::empty({0, 3});
  nn::init::kaiming_uniform_(empty);  // no elements: nothing to do
}

TEST(NnInit, LayersOnADeviceAndDType) {
  nn::Linear h(4, 3, true, {.dtype = DType::f64});
  EXPECT_EQ(h.weight.dtype(), DType::f64);
  EXPECT_EQ(h.forward(ferry::ones({2, 4}, {.dtype = DType::f64})).dtype(), DType::f64);
  EXPECT_FERRY_ERROR(nn::Linear(2, 2, true, {.dtype = DType::i32}), ferry::DTypeError, "Linear",
                     "i32");
  nn::BatchNorm1d bn(3, 1e-5, 0.1, true, true, {.dtype = DType::f64});
  EXPECT_EQ(bn.running_var.dtype(), DType::f64);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::i64);
  if (!ferry::is_available("vulkan:0")) return;
  const ferry::Device gpu("vulkan:0");
  ferry::manual_seed(21);
  nn::Linear on_gpu(6, 5, true, {.device = gpu});
  ferry::manual_seed(21);
  nn::Linear on_cpu(6, 5);
  EXPECT_EQ(on_gpu.weight.device(), gpu);
  expect_close(as_double(on_gpu.weight), as_double(on_cpu.weight), 1e-6, 1e-7);
}

// ------------------------------------------------------------------ bad input

TEST(NnBadInput, LayersNameWhatTheyExpect) {
  nn::Linear fc(4, 3);
  EXPECT_FERRY_ERROR(fc.forward(ferry::ones({2, 5})), ferry::ShapeError, "Linear", "4", "[2, 5]");
  EXPECT_FERRY_ERROR(fc.forward(ferry::scalar_tensor(1.0f)), ferry::ShapeError, "Linear");
  EXPECT_FERRY_ERROR(F::linear(ferry::ones({2, 4}), ferry::ones({3, 4}), ferry::ones({4})),
                     ferry::ShapeError, "linear", "bias", "[3]");
  EXPECT_FERRY_ERROR(F::linear(ferry::ones({2, 4}), ferry::ones({4})), ferry::ShapeError, "linear",
                     "2-D");
  EXPECT_FERRY_ERROR(nn::Linear(-1, 3), ferry::ShapeError, "in_features", "-1");

  nn::LayerNorm ln(Shape{3, 4});
  EXPECT_FERRY_ERROR(ln.forward(ferry::ones({2, 4, 3})), ferry::ShapeError, "LayerNorm", "[3, 4]",
                     "[2, 4, 3]");
  EXPECT_FERRY_ERROR(ln.forward(ferry::ones({4})), ferry::ShapeError, "LayerNorm");
  EXPECT_FERRY_ERROR(nn::LayerNorm(Shape{}), ferry::ShapeError, "normalized_shape");

  nn::BatchNorm1d bn(3);
  EXPECT_FERRY_ERROR(bn.forward(ferry::ones({4, 2})), ferry::ShapeError, "BatchNorm1d", "[4, 2]");
  EXPECT_FERRY_ERROR(bn.forward(ferry::ones({4, 3, 2, 2})), ferry::ShapeError, "2-D", "3-D",
                     "[4, 3, 2, 2]");
  EXPECT_FERRY_ERROR(bn.forward(ferry::ones({3})), ferry::ShapeError, "BatchNorm1d");
  EXPECT_FERRY_ERROR(bn.forward(ferry::ones({1, 3})), ferry::ShapeError, "more than 1 value");
  EXPECT_FERRY_ERROR(bn.forward(ferry::ones({4, 3}, {.dtype = DType::i32})), ferry::DTypeError,
                     "BatchNorm1d", "i32");
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 0) << "a refused batch was counted";
  bn.eval();
  EXPECT_EQ(bn.forward(ferry::ones({1, 3})).sizes(), (Shape{1, 3}));  // fine in eval
  EXPECT_FERRY_ERROR(F::batch_norm(ferry::ones({4, 3}), Tensor(), Tensor()), ferry::Error,
                     "running_mean");
  EXPECT_FERRY_ERROR(F::batch_norm(ferry::ones({4, 3}), ferry::zeros({2}), ferry::ones({2})),
                     ferry::ShapeError, "running_mean", "[3]", "[2]");

  nn::Embedding emb(5, 2);
  EXPECT_FERRY_ERROR(emb.forward(ferry::ones({3})), ferry::DTypeError, "Embedding", "f32");
  EXPECT_FERRY_ERROR(emb.forward(ferry::tensor(std::vector<std::int64_t>{1, 5})), ferry::ShapeError,
                     "embedding", "5");
  EXPECT_FERRY_ERROR(nn::GELU("fast"), ferry::Error, "GELU", "fast");
  EXPECT_FERRY_ERROR(F::mse_loss(ferry::ones({2, 3}), ferry::ones({3})), ferry::ShapeError,
                     "mse_loss", "[2, 3]", "[3]");
  EXPECT_FERRY_ERROR(
      F::mse_loss(ferry::ones({2}, {.dtype = DType::i32}), ferry::ones({2}, {.dtype = DType::i32})),
      ferry::DTypeError, "mse_loss");
}

TEST(NnBadInput, CrossEntropyTargets) {
  const Tensor logits = ferry_test::sample_tensor({3, 4});
  auto idx = [](std::vector<std::int64_t> v, Shape s = {}) { return ferry::tensor(v, s); };
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, ferry::ones({3})), ferry::DTypeError, "cross_entropy",
                     "f32", "class-index", "i64");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, ferry::ones({3}, {.dtype = DType::u8})),
                     ferry::DTypeError, "cross_entropy", "u8");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, 1, 2, 3})), ferry::ShapeError,
                     "cross_entropy", "[3]", "[4]");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, 1, 2}, {3, 1})), ferry::ShapeError, "[3, 1]");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, 4, 1})), ferry::ShapeError,
                     "target 4 is out of range", "4 classes", "[0, 3]");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, -3, 1})), ferry::ShapeError, "target -3",
                     "ignore_index (-100)");
  EXPECT_FERRY_ERROR(F::cross_entropy(ferry::scalar_tensor(1.0f), idx({0}, {1}).reshape({})),
                     ferry::ShapeError, "0-d");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits.to(DType::i32), idx({0, 1, 2})), ferry::DTypeError,
                     "logits");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, 1, 2}), {.weight = ferry::ones({3})}),
                     ferry::ShapeError, "weight", "[4]");
  EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, 1, 2}), {.label_smoothing = 1.5}),
                     ferry::Error, "label_smoothing");
  // An ignored target may be anything; -100 by default, or the index asked for.
  EXPECT_NO_THROW(F::cross_entropy(logits, idx({0, -100, 1})));
  EXPECT_NO_THROW(F::cross_entropy(logits, idx({0, 9, 1}), {.ignore_index = 9}));
  if (ferry::is_available("vulkan:0")) {
    EXPECT_FERRY_ERROR(F::cross_entropy(logits, idx({0, 1, 2}).to(ferry::Device("vulkan:0"))),
                       ferry::DeviceMismatchError, "cross_entropy", "vulkan:0");
  }
}

TEST(NnLoss, CrossEntropyClosedForm) {
  // Two classes, logits (0, log 3): p = (1/4, 3/4). Targets 1 and 0.
  const Tensor logits =
      ferry::tensor(std::vector<float>{0, std::log(3.0f), 0, std::log(3.0f)}, {2, 2});
  const Tensor t = ferry::tensor(std::vector<std::int64_t>{1, 0});
  const double l1 = -std::log(0.75), l0 = -std::log(0.25);
  EXPECT_NEAR(F::cross_entropy(logits, t).item<float>(), (l1 + l0) / 2, 1e-6);
  EXPECT_NEAR(F::cross_entropy(logits, t, {.reduction = nn::Reduction::sum}).item<float>(), l1 + l0,
              1e-6);
  const Tensor w = ferry::tensor(std::vector<float>{1, 3});
  // Weighted mean: (3 l1 + 1 l0) / (3 + 1).
  EXPECT_NEAR(F::cross_entropy(logits, t, {.weight = w}).item<float>(), (3 * l1 + l0) / 4, 1e-6);
  const Tensor ignored = ferry::tensor(std::vector<std::int64_t>{-100, -100});
  EXPECT_TRUE(std::isnan(F::cross_entropy(logits, ignored).item<float>()));
  EXPECT_EQ(F::cross_entropy(logits, ignored, {.reduction = nn::Reduction::sum}).item<float>(), 0);
  expect_close(as_double(F::cross_entropy(logits, t, {.reduction = nn::Reduction::none})), {l1, l0},
               1e-6, 0);
  // i32 targets are the same classes.
  EXPECT_NEAR(F::cross_entropy(logits, t.to(DType::i32)).item<float>(), (l1 + l0) / 2, 1e-6);
}

// ------------------------------------------------------------------ training

TEST(NnTraining, LinearRegressionConverges) {
  // y = x · [2, -1]ᵀ + 0.5, learned by a Sequential of two Linears with plain SGD.
  ferry::manual_seed(0);
  nn::Sequential model(std::make_shared<nn::Linear>(2, 4), std::make_shared<nn::Linear>(4, 1));
  nn::MSELoss loss_fn;
  const Tensor x = ferry::randn({64, 2});
  const Tensor y = ferry::matmul(x, ferry::tensor(std::vector<float>{2, -1}, {2, 1})) + 0.5f;
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    model.zero_grad();
    Tensor loss = loss_fn.forward(model.forward(x), y);
    loss.backward();
    {
      ferry::NoGradGuard no_grad;
      for (Tensor& p : model.parameters()) p.copy_(p - p.grad() * 0.05f);
    }
    (step == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_LT(last, first * 1e-3) << "first " << first << ", last " << last;
}

}  // namespace
