// tests/test_nn_utils.cpp — ferry/nn/utils.hpp (gradient clipping, parameter
// vectors) against closed forms, and the losses' typed errors.
#include <gtest/gtest.h>

#include <cmath>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"

namespace {

using ferry::Tensor;
namespace utils = ferry::nn::utils;
namespace F = ferry::nn::functional;

// Two parameters with set gradients: 3, 4 and 12 (total 2-norm 13).
std::vector<Tensor> params_with_grads() {
  Tensor a = ferry::zeros({2}).requires_grad_(), b = ferry::zeros({1}).requires_grad_();
  a.set_grad(ferry::tensor(std::vector<float>{3, 4}));
  b.set_grad(ferry::tensor(std::vector<float>{12}));
  return {a, b, ferry::zeros({3}).requires_grad_()};  // the last has no gradient
}

TEST(NnUtils, ClipGradNormScalesEveryGradientByOneFactor) {
  auto ps = params_with_grads();
  Tensor total = utils::clip_grad_norm_(ps, 6.5);
  EXPECT_FLOAT_EQ(total.item<float>(), 13.0f);
  const double coef = 6.5 / (13.0 + 1e-6);
  EXPECT_NEAR(ps[0].grad().to_vector<float>()[1], 4 * coef, 1e-6);
  EXPECT_NEAR(ps[1].grad().to_vector<float>()[0], 12 * coef, 1e-6);
  // Below the limit nothing changes; the infinity norm is the largest magnitude.
  ps = params_with_grads();
  EXPECT_FLOAT_EQ(utils::clip_grad_norm_(ps, 20).item<float>(), 13.0f);
  EXPECT_EQ(ps[0].grad().to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_FLOAT_EQ(utils::clip_grad_norm_(ps, 100, INFINITY).item<float>(), 12.0f);
  EXPECT_FLOAT_EQ(utils::clip_grad_norm_(ps, 100, 1).item<float>(), 19.0f);
  ps[0].grad().fill_(NAN);
  EXPECT_THROW(utils::clip_grad_norm_(ps, 1, 2, /*error_if_nonfinite=*/true), ferry::ValueError);
}

// A NaN total makes every gradient NaN (PyTorch's clamp keeps the NaN factor); and on a GPU the
// clipping never reads the norm back, so the host does not wait for the device there.
TEST(NnUtils, ClipGradNormOfANanTotalAndWithoutAHostWait) {
  auto ps = params_with_grads();
  ps[1].grad().fill_(NAN);
  EXPECT_TRUE(std::isnan(utils::clip_grad_norm_(ps, 1).item<float>()));
  EXPECT_TRUE(std::isnan(ps[0].grad().to_vector<float>()[0]));
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const ferry::Device gpu("vulkan:0");
  std::vector<Tensor> on_gpu;
  for (const Tensor& p : params_with_grads()) {
    Tensor q = p.detach().to(gpu).requires_grad_();
    if (p.grad().defined()) q.set_grad(p.grad().to(gpu));
    on_gpu.push_back(q);
  }
  ferry::synchronize(gpu);
  ferry::profiler::start();
  const Tensor total = utils::clip_grad_norm_(on_gpu, 6.5);
  const ferry::profiler::Profile profile = ferry::profiler::stop();
  for (const auto& e : profile.events())
    EXPECT_NE(e.kind, ferry::profiler::EventKind::wait) << e.name << " on " << e.device;
  EXPECT_FLOAT_EQ(total.item<float>(), 13.0f);
  const float coef = 6.5f / (13.0f + 1e-6f);
  EXPECT_FLOAT_EQ(on_gpu[1].grad().item<float>(), 12 * coef);
}

TEST(NnUtils, ClipGradValueAndParameterVectors) {
  auto ps = params_with_grads();
  utils::clip_grad_value_(ps, 3.5);
  EXPECT_EQ(ps[0].grad().to_vector<float>(), (std::vector<float>{3, 3.5f}));
  EXPECT_EQ(ps[1].grad().to_vector<float>(), (std::vector<float>{3.5f}));
  ferry::nn::Linear layer(3, 2);
  Tensor v = utils::parameters_to_vector(layer.parameters());
  EXPECT_EQ(v.sizes(), (ferry::Shape{8}));
  utils::vector_to_parameters(ferry::arange(8.0), layer.parameters());
  EXPECT_EQ(layer.weight.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(layer.bias.to_vector<float>(), (std::vector<float>{6, 7}));
  EXPECT_THROW(utils::vector_to_parameters(ferry::zeros({7}), layer.parameters()),
               ferry::ShapeError);
}

TEST(NnUtils, LossesRefuseWhatPyTorchRefuses) {
  Tensor x = ferry::zeros({2, 3}), t = ferry::zeros({3, 2});
  EXPECT_THROW(F::l1_loss(x, t), ferry::ShapeError);
  EXPECT_THROW(F::smooth_l1_loss(x, x, ferry::nn::Reduction::mean, -1), ferry::ValueError);
  EXPECT_THROW(F::huber_loss(x, x, ferry::nn::Reduction::mean, 0), ferry::ValueError);
  EXPECT_THROW(F::kl_div(x, x, "avg"), ferry::ValueError);
  EXPECT_THROW(F::binary_cross_entropy(ferry::full({2}, 1.5), ferry::zeros({2})),
               ferry::ValueError);
  EXPECT_THROW(F::glu(x, 1), ferry::ShapeError);  // odd size
  EXPECT_THROW(F::nll_loss(x, ferry::tensor(std::vector<std::int64_t>{0, 3})), ferry::ShapeError);
  // A floating target of another shape than the input's is read as class indices, as PyTorch.
  EXPECT_THROW(F::cross_entropy(x, ferry::zeros({2, 2})), ferry::DTypeError);
  // binary_cross_entropy clamps its logs at -100, as PyTorch: 0 and 1 give finite losses.
  EXPECT_FLOAT_EQ(F::binary_cross_entropy(ferry::zeros({1}), ferry::ones({1})).item<float>(), 100);
  // with_logits does not overflow at large logits.
  EXPECT_FLOAT_EQ(
      F::binary_cross_entropy_with_logits(ferry::full({1}, -200.0), ferry::ones({1})).item<float>(),
      200);
}

// binary_cross_entropy's gradients are PyTorch's formulas, not the chain rule through its
// clamped logs, which gave NaN where the input is 0 or 1: for x, (x - t) / max(x (1 - x),
// 1e-12); for the target, -logit(x). The values are what PyTorch 1.13 (Debian's python3-torch)
// printed for these inputs in float64, reduction "sum"; every device, f32 and f64 where it
// takes them. Inside (0, 1), finite differences in f64, the weight's gradient too.
TEST(NnUtils, BinaryCrossEntropyGradientsArePyTorchsAtZeroAndOne) {
  const std::vector<double> xs = {1.0, 0.0, 0.5, 1.0, 0.0, 0.999},
                            ts = {1.0, 0.0, 0.5, 0.3, 0.6, 0.2};
  const std::vector<double> dx = {0, 0, 0, 700000002797.0619, -600000002397.4817, 799.799799799799};
  const double inf = INFINITY;
  const std::vector<double> dt = {-inf, inf, 0, -inf, inf, -6.906754778648552};
  for (const std::string device : {"cpu", "vulkan:0", "cuda:0"}) {
    if (!ferry::is_available(device)) continue;
    for (const ferry::DType type : {ferry::DType::f32, ferry::DType::f64}) {
      if (!ferry::device_impl(ferry::Device(device)).supports(ferry::OpId::log, type)) continue;
      SCOPED_TRACE(device + " " + std::string(ferry::dtype_name(type)));
      Tensor x = ferry::tensor(xs).to(type).to(ferry::Device(device)).requires_grad_();
      Tensor t = ferry::tensor(ts).to(type).to(ferry::Device(device)).requires_grad_();
      const Tensor loss = F::binary_cross_entropy(x, t, {}, ferry::nn::Reduction::sum);
      EXPECT_NEAR(loss.item<double>(), 136.21955150381237, 136.2 * 1e-6);  // the clamped logs
      loss.backward();
      const std::vector<double> gx = x.grad().to(ferry::DType::f64).to_vector<double>(),
                                gt = t.grad().to(ferry::DType::f64).to_vector<double>();
      // 0.999 in f32 is 0.99900001: 1 / (1 - x) amplifies that to 1.3e-5 of dx.
      const double rel = type == ferry::DType::f64 ? 1e-9 : 1e-4;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        EXPECT_NEAR(gx[i], dx[i], std::abs(dx[i]) * rel) << "dx " << i;
        if (std::isinf(dt[i]))
          EXPECT_EQ(gt[i], dt[i]) << "dt " << i;
        else
          EXPECT_NEAR(gt[i], dt[i], std::abs(dt[i]) * rel) << "dt " << i;
      }
    }
  }
  const Tensor x = ferry_test::grad_input({3, 4}, 0.05, 0.95, 1);
  const Tensor t = ferry_test::grad_input({3, 4}, 0, 1, 2),
               w = ferry_test::grad_input({4}, 0.5, 2, 3);
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        return F::binary_cross_entropy(in[0], in[1], in[2], ferry::nn::Reduction::mean);
      },
      {x, t, w}));
}

// cosine_similarity divides each vector by its norm (clamped at eps) before the dot product,
// as PyTorch does: two short vectors whose norms multiply to less than eps still get their
// cosine (dividing the dot product by max(|x1| |x2|, eps) gave 0.01 here, not 0.707).
TEST(NnUtils, CosineSimilarityOfShortVectors) {
  const Tensor x1 = ferry::tensor(std::vector<double>{1e-5, 0}),
               x2 = ferry::tensor(std::vector<double>{1e-5, 1e-5});
  EXPECT_NEAR(F::cosine_similarity(x1, x2, 0).item<double>(), std::sqrt(0.5), 1e-12);
  // A zero vector: 0, as PyTorch (its norm clamps to eps).
  EXPECT_EQ(
      F::cosine_similarity(ferry::zeros({2}, {.dtype = ferry::DType::f64}), x2, 0).item<double>(),
      0.0);
}

// padding_idx, as PyTorch's: the module's row starts at zeros, lookups of it return the row as
// it is, and its gradient stays zero (the other rows get theirs); negative counts from the end.
TEST(NnUtils, EmbeddingPaddingIdxGetsNoGradient) {
  ferry::nn::Embedding emb(5, 3, {}, -2);
  ASSERT_EQ(emb.padding_idx, 3);
  EXPECT_EQ(emb.weight.select(0, 3).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(emb.extra_repr(), "5, 3, padding_idx=3");
  EXPECT_THROW(ferry::nn::Embedding(5, 3, {}, 5), ferry::ValueError);
  for (const std::string device : {"cpu", "vulkan:0"}) {
    if (!ferry::is_available(device)) continue;
    SCOPED_TRACE(device);
    const ferry::Device dev(device);
    ferry::manual_seed(3);
    Tensor w = ferry::randn({5, 3}).to(dev).requires_grad_();
    const Tensor idx = ferry::tensor(std::vector<std::int64_t>{3, 1, 3, 0}).to(dev);
    const Tensor up = ferry::randn({4, 3}).to(dev);
    const Tensor y = ferry::embedding(w, idx, 3);
    EXPECT_TRUE(ferry::equal(y, ferry::index_select(w.detach(), 0, idx)));
    ferry::sum(y * up).backward();
    const Tensor g = w.grad().to(ferry::Device::cpu()), u = up.to(ferry::Device::cpu());
    EXPECT_TRUE(ferry::equal(g.select(0, 3), ferry::zeros({3})));
    EXPECT_TRUE(ferry::equal(g.select(0, 1), u.select(0, 1)));
    EXPECT_TRUE(ferry::equal(g.select(0, 0), u.select(0, 3)));
    EXPECT_TRUE(ferry::equal(g.select(0, 2), ferry::zeros({3})));
    EXPECT_THROW(ferry::embedding(w, idx, -6), ferry::ValueError);
  }
}

// The loss modules are their functional forms with the options they hold; class weights and
// pos_weight are buffers under PyTorch's names; they print as PyTorch's do.
TEST(NnUtils, LossModulesAreTheirFunctions) {
  namespace nn = ferry::nn;
  ferry::manual_seed(8);
  const Tensor x = ferry::randn({6, 4}), y = ferry::randn({6, 4});
  const Tensor p = ferry::sigmoid(x), t = ferry::rand({6, 4}), w = ferry::rand({4}) + 0.5;
  const Tensor cls = ferry::tensor(std::vector<std::int64_t>{0, 3, 1, 1, 2, 0});
  const Tensor sign = ferry::sign(ferry::randn({6}));
  const auto same = [](nn::Module& m, const Tensor& got, const Tensor& want, const char* text) {
    EXPECT_TRUE(ferry::equal(got, want)) << m.str();
    EXPECT_EQ(m.str(), text);
  };
  {
    F::NllLossOptions o;
    o.weight = w;
    o.ignore_index = 2;
    nn::NLLLoss m(o);
    same(m, m.forward(ferry::log_softmax(x, 1), cls), F::nll_loss(ferry::log_softmax(x, 1), cls, o),
         "NLLLoss()");
    EXPECT_EQ(m.state_dict().size(), 1u);
  }
  {
    nn::L1Loss m(nn::Reduction::sum);
    same(m, m.forward(x, y), F::l1_loss(x, y, nn::Reduction::sum), "L1Loss()");
  }
  {
    nn::SmoothL1Loss m(nn::Reduction::mean, 0.5);
    same(m, m.forward(x, y), F::smooth_l1_loss(x, y, nn::Reduction::mean, 0.5), "SmoothL1Loss()");
  }
  {
    nn::HuberLoss m(nn::Reduction::none, 2.0);
    same(m, m.forward(x, y), F::huber_loss(x, y, nn::Reduction::none, 2.0), "HuberLoss()");
  }
  {
    nn::KLDivLoss m("batchmean", true);
    const Tensor lp = ferry::log_softmax(x, 1), lq = ferry::log_softmax(y, 1);
    same(m, m.forward(lp, lq), F::kl_div(lp, lq, "batchmean", true), "KLDivLoss()");
  }
  {
    nn::BCELoss m(w);
    same(m, m.forward(p, t), F::binary_cross_entropy(p, t, w), "BCELoss()");
    EXPECT_EQ(m.named_buffers().at(0).first, "weight");
  }
  {
    nn::BCEWithLogitsLoss m({}, nn::Reduction::sum, w);
    same(m, m.forward(x, t), F::binary_cross_entropy_with_logits(x, t, {}, w, nn::Reduction::sum),
         "BCEWithLogitsLoss()");
    ASSERT_EQ(m.named_buffers().size(), 1u);
    EXPECT_EQ(m.named_buffers().at(0).first, "pos_weight");
  }
  {
    nn::MarginRankingLoss m(0.3);
    same(m, m.forward(x.select(1, 0), y.select(1, 0), sign),
         F::margin_ranking_loss(x.select(1, 0), y.select(1, 0), sign, 0.3), "MarginRankingLoss()");
  }
  {
    nn::CosineEmbeddingLoss m(0.1, nn::Reduction::none);
    same(m, m.forward(x, y, sign), F::cosine_embedding_loss(x, y, sign, 0.1, nn::Reduction::none),
         "CosineEmbeddingLoss()");
  }
}

// PReLU: x where x > 0, the slope times x elsewhere (at 0 too, whose gradient is the slope's
// side, as PyTorch's); one slope or one per channel; its weight's gradient is the sum of the
// non-positive inputs times the upstream, per channel. Finite differences in f64.
TEST(NnUtils, PReLUIsItsClosedForm) {
  ferry::nn::PReLU shared;
  EXPECT_EQ(shared.weight.to_vector<float>(), (std::vector<float>{0.25f}));
  EXPECT_EQ(shared.str(), "PReLU(num_parameters=1)");
  ferry::nn::PReLU per_channel(3, 0.1);
  const Tensor x = ferry::tensor(std::vector<float>{-2, 0, 3, -1, 4, -0.5}).reshape({1, 3, 2});
  const Tensor y = per_channel.forward(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-0.2f, 0, 3, -0.1f, 4, -0.05f}));
  ferry::sum(y).backward();
  EXPECT_EQ(per_channel.weight.grad().to_vector<float>(), (std::vector<float>{-2, -1, -0.5f}));
  EXPECT_THROW(F::prelu(x, ferry::ones({2})), ferry::ShapeError);
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) { return F::prelu(in[0], in[1]); },
      {ferry_test::grad_input({2, 3, 4}, -2, 2, 1), ferry_test::grad_input({3}, 0, 1, 2)}));
}

// The padding modules are ferry::pad of the last N dims with their mode; one size pads every
// side; they print as PyTorch's do.
TEST(NnUtils, PaddingModulesAreTheirPads) {
  namespace nn = ferry::nn;
  ferry::manual_seed(6);
  const Tensor x = ferry::randn({2, 3, 5, 6, 7});
  const auto same = [&](nn::Module& m, const Tensor& want, const std::string& text) {
    EXPECT_TRUE(ferry::equal(m.forward(x), want)) << text;
    EXPECT_EQ(m.str(), text);
    EXPECT_TRUE(m.state_dict().empty());
  };
  nn::ZeroPad2d zero({1, 2, 0, 3});
  same(zero, ferry::pad(x, {1, 2, 0, 3}), "ZeroPad2d((1, 2, 0, 3))");
  nn::ConstantPad1d constant(2, 3.5);
  same(constant, ferry::pad(x, {2, 2}, "constant", 3.5),
       "ConstantPad1d(padding=(2, 2), value=3.5)");
  nn::ReflectionPad2d reflect(2);
  same(reflect, ferry::pad(x, {2, 2, 2, 2}, "reflect"), "ReflectionPad2d((2, 2, 2, 2))");
  nn::ReplicationPad3d replicate({1, 0, 2, 1, 0, 3});
  same(replicate, ferry::pad(x, {1, 0, 2, 1, 0, 3}, "replicate"),
       "ReplicationPad3d((1, 0, 2, 1, 0, 3))");
  nn::CircularPad1d circular({3, 1});
  same(circular, ferry::pad(x, {3, 1}, "circular"), "CircularPad1d((3, 1))");
  EXPECT_THROW(nn::ZeroPad2d({1, 2, 3}), ferry::ShapeError);
}

// Each module is its op, with PyTorch's defaults.
TEST(NnUtils, ActivationAndShapeModules) {
  Tensor x = ferry::linspace(-4, 4, 12).reshape({3, 4});
  auto same = [&](ferry::nn::Module& m, const Tensor& want) {
    EXPECT_TRUE(ferry::equal(m.forward(x), want)) << m.name();
  };
  ferry::nn::ELU elu(0.5);
  same(elu, ferry::elu(x, 0.5));
  ferry::nn::LeakyReLU lrelu;
  same(lrelu, ferry::leaky_relu(x, 0.01));
  ferry::nn::Softplus sp(2.0, 5.0);
  same(sp, ferry::softplus(x, 2.0, 5.0));
  ferry::nn::Hardtanh ht;
  same(ht, ferry::hardtanh(x));
  ferry::nn::Mish mish;
  same(mish, ferry::mish(x));
  ferry::nn::Softmin smin(1);
  same(smin, ferry::softmax(-x, 1));
  ferry::nn::GLU glu;
  same(glu, F::glu(x, -1));
  ferry::nn::Identity id;
  same(id, x);
  ferry::nn::Flatten flat(0);
  EXPECT_EQ(flat.forward(x).sizes(), (ferry::Shape{12}));
  ferry::nn::Unflatten unflat(1, {2, 2});
  EXPECT_EQ(unflat.forward(x).sizes(), (ferry::Shape{3, 2, 2}));
  EXPECT_EQ(elu.extra_repr(), "alpha=0.5");
  EXPECT_EQ(sp.extra_repr(), "beta=2, threshold=5");
  EXPECT_THROW(ferry::nn::GELU("fast"), ferry::Error);
}

}  // namespace
