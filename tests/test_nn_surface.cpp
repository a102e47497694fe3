// tests/test_nn_surface.cpp — the parts of torch.nn that ported code names beyond the layers:
// the containers ModuleDict, ParameterList and ParameterDict; Unfold and Fold; ChannelShuffle;
// Dropout1d and Dropout3d; Bilinear's initialization; the shrink activations at their bounds;
// and the new losses' modules, printing and typed errors. Their numbers against PyTorch are
// NnReference's (tests/test_nn_reference.cpp); here, closed forms and identities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ferry/ferry.hpp"
#include "gradcheck.hpp"

namespace {

namespace nn = ferry::nn;
namespace F = ferry::nn::functional;
using ferry::Tensor;

std::vector<float> values(const Tensor& t) { return t.to(ferry::DType::f32).to_vector<float>(); }

TEST(NnSurface, ModuleDictHoldsChildrenByNameInOrder) {
  nn::ModuleDict d(
      {{"encoder", std::make_shared<nn::Linear>(3, 4)}, {"act", std::make_shared<nn::ReLU>()}});
  d.insert("head", std::make_shared<nn::Linear>(4, 2));
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"encoder", "act", "head"}));
  EXPECT_TRUE(d.contains("head"));
  EXPECT_FALSE(d.contains("decoder"));
  std::vector<std::string> names;
  for (const auto& [name, p] : d.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"encoder.weight", "encoder.bias", "head.weight",
                                             "head.bias"}));
  const Tensor x = ferry::randn({5, 3});
  Tensor y = x;
  for (const auto& [name, m] : d) y = m->forward(y);
  EXPECT_EQ(y.sizes(), (ferry::Shape{5, 2}));
  EXPECT_TRUE(d["act"].get() == d.child("act").get());
  try {
    d["decoder"];
    FAIL() << "a missing key must throw";
  } catch (const ferry::Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder, act, head"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.insert("head", std::make_shared<nn::ReLU>()), ferry::Error);  // taken
  EXPECT_THROW(d.insert("a.b", std::make_shared<nn::ReLU>()), ferry::Error);   // dotted
  EXPECT_EQ(d.size(), 3u);
  // A state_dict round trip by name.
  nn::ModuleDict e({{"encoder", std::make_shared<nn::Linear>(3, 4)},
                    {"act", std::make_shared<nn::ReLU>()},
                    {"head", std::make_shared<nn::Linear>(4, 2)}});
  e.load_state_dict(d.state_dict());
  Tensor z = x;
  for (const auto& [name, m] : e) z = m->forward(z);
  EXPECT_TRUE(ferry::equal(y, z));
}

TEST(NnSurface, ParameterListAndDictRegisterTrainableTensors) {
  nn::ParameterList list({ferry::zeros({2}), ferry::ones({3})});
  list.push_back(ferry::full({1}, 7.0));
  ASSERT_EQ(list.size(), 3u);
  EXPECT_TRUE(list[2].requires_grad());
  EXPECT_EQ(list.named_parameters().at(2).first, "2");
  EXPECT_TRUE(list.named_parameters().at(1).second.is_same(list[1]));
  EXPECT_THROW(list[3], ferry::Error);

  nn::ParameterDict dict({{"scale", ferry::ones({4})}});
  dict.insert("shift", ferry::zeros({4}));
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"scale", "shift"}));
  EXPECT_TRUE(dict["shift"].requires_grad());
  EXPECT_THROW(dict["bias"], ferry::Error);
  EXPECT_THROW(dict.insert("scale", ferry::ones({1})), ferry::Error);
  // An optimizer trains them like any parameter.
  ferry::optim::SGD sgd(dict.parameters(), {.lr = 0.5});
  ferry::sum(dict["scale"] * 2.0 + dict["shift"]).backward();
  sgd.step();
  EXPECT_EQ(values(dict["scale"]), std::vector<float>(4, 0.0f));
  EXPECT_EQ(values(dict["shift"]), std::vector<float>(4, -0.5f));
}

TEST(NnSurface, UnfoldAndFoldModulesAreTheOps) {
  const Tensor x = ferry::randn({2, 3, 5, 6});
  nn::Unfold unfold({2, 3}, {1}, {1}, {2});
  const Tensor cols = unfold.forward(x);
  EXPECT_TRUE(ferry::equal(cols, ferry::unfold(x, {2, 3}, {1}, {1}, {2})));
  EXPECT_EQ(unfold.str(), "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=2)");
  nn::Fold fold({5, 6}, {2, 3}, {1}, {1}, {2});
  EXPECT_TRUE(ferry::equal(fold.forward(cols), ferry::fold(cols, {5, 6}, {2, 3}, {1}, {1}, {2})));
  EXPECT_EQ(fold.str(),
            "Fold(output_size=(5, 6), kernel_size=(2, 3), dilation=1, padding=1, stride=2)");
  // Non-overlapping windows: fold undoes unfold.
  nn::Unfold tiles({2, 3}, {1}, {0}, {2, 3});
  const Tensor y = ferry::randn({1, 2, 4, 6});
  EXPECT_TRUE(
      ferry::equal(nn::Fold({4, 6}, {2, 3}, {1}, {0}, {2, 3}).forward(tiles.forward(y)), y));
}

TEST(NnSurface, ChannelShuffleInterleavesTheGroups) {
  // Channel g * (C / groups) + i goes to i * groups + g: [0 1 2 3 4 5] in 2 groups -> [0 3 1 4 2
  // 5].
  const Tensor x = ferry::arange(6.0).reshape({1, 6, 1, 1});
  nn::ChannelShuffle shuffle(2);
  EXPECT_EQ(values(shuffle.forward(x)), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(F::channel_shuffle(x, 3)), (std::vector<float>{0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(shuffle.str(), "ChannelShuffle(groups=2)");
  // Shuffling by g then by C / g is the identity.
  const Tensor z = ferry::randn({2, 12, 3});
  EXPECT_TRUE(ferry::equal(F::channel_shuffle(F::channel_shuffle(z, 3), 4), z));
  EXPECT_THROW(F::channel_shuffle(x, 4), ferry::ShapeError);
  EXPECT_THROW(F::channel_shuffle(ferry::randn({6, 2}), 2), ferry::ShapeError);
  EXPECT_THROW(nn::ChannelShuffle(0), ferry::Error);
}

TEST(NnSurface, ChannelDropoutsDropWholeChannels) {
  ferry::manual_seed(3);
  const Tensor x1 = ferry::ones({4, 16, 7}), x3 = ferry::ones({2, 16, 3, 4, 5});
  const Tensor y1 = nn::Dropout1d(0.5).forward(x1), y3 = nn::Dropout3d(0.5).forward(x3);
  // Every channel is all zeros or all 2 = 1 / (1 - p), and both kinds occur.
  for (const auto& [y, per_channel] : {std::pair{y1, 7}, std::pair{y3, 60}}) {
    const std::vector<float> v = values(y);
    int dropped = 0, kept = 0;
    for (std::size_t c = 0; c < v.size(); c += std::size_t(per_channel)) {
      for (int i = 0; i < per_channel; ++i) ASSERT_EQ(v[c + std::size_t(i)], v[c]);
      ASSERT_TRUE(v[c] == 0.0f || v[c] == 2.0f) << v[c];
      (v[c] == 0.0f ? dropped : kept)++;
    }
    EXPECT_GT(dropped, 0);
    EXPECT_GT(kept, 0);
  }
  nn::Dropout1d eval_mode(0.5);
  eval_mode.eval();
  EXPECT_TRUE(ferry::equal(eval_mode.forward(x1), x1));
  EXPECT_EQ(nn::Dropout3d(0.2).str(), "Dropout3d(p=0.2, inplace=false)");
  EXPECT_THROW(F::dropout1d(ferry::ones({2, 3, 4, 5})), ferry::ShapeError);
  EXPECT_THROW(F::dropout3d(ferry::ones({2, 3, 4})), ferry::ShapeError);
  EXPECT_THROW(nn::Dropout1d(1.5), ferry::Error);
}

TEST(NnSurface, BilinearStartsInItsBoundAndChecksShapes) {
  ferry::manual_seed(5);
  nn::Bilinear m(16, 3, 4);
  EXPECT_EQ(m.weight.sizes(), (ferry::Shape{4, 16, 3}));
  const double bound = 1.0 / 4.0;  // 1 / sqrt(in1_features)
  for (float v : values(m.weight)) ASSERT_LE(std::fabs(v), bound);
  for (float v : values(m.bias)) ASSERT_LE(std::fabs(v), bound);
  EXPECT_EQ(m.str(), "Bilinear(in1_features=16, in2_features=3, out_features=4, bias=true)");
  std::vector<std::string> names;
  for (const auto& [name, t] : m.state_dict()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  // Against its definition, element by element, in f64 with finite differences.
  const Tensor w = ferry::randn({2, 3, 2}, {.dtype = ferry::DType::f64});
  const Tensor a = ferry::randn({4, 3}, {.dtype = ferry::DType::f64}),
               b = ferry::randn({4, 2}, {.dtype = ferry::DType::f64});
  const Tensor y = F::bilinear(a, b, w);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>(), wv = w.to_vector<double>();
  const auto yv = y.to_vector<double>();
  for (int n = 0; n < 4; ++n)
    for (int o = 0; o < 2; ++o) {
      double want = 0;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) want += av[n * 3 + i] * wv[(o * 3 + i) * 2 + j] * bv[n * 2 + j];
      EXPECT_NEAR(yv[std::size_t(n * 2 + o)], want, 1e-12);
    }
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) { return F::bilinear(in[0], in[1], in[2], in[3]); },
      {a, b, w, ferry::randn({2}, {.dtype = ferry::DType::f64})}));
  EXPECT_THROW(m.forward(ferry::randn({2, 15}), ferry::randn({2, 3})), ferry::ShapeError);
  EXPECT_THROW(m.forward(ferry::randn({2, 16}), ferry::randn({3, 3})), ferry::ShapeError);
  EXPECT_THROW(F::bilinear(a, b, ferry::randn({2, 3})), ferry::ShapeError);
}

TEST(NnSurface, ShrinksAndThresholdAtTheirBounds) {
  const Tensor x =
      ferry::tensor(std::vector<double>{-2, -0.5, -0.25, 0, 0.5, 1.5}).requires_grad_();
  // At exactly lambd the inner side: 0, with a zero gradient.
  const Tensor h = nn::Hardshrink(0.5).forward(x);
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{-2, 0, 0, 0, 0, 1.5}));
  ferry::sum(h).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(F::softshrink(x, 0.5).to_vector<double>(), (std::vector<double>{-1.5, 0, 0, 0, 0, 1}));
  EXPECT_EQ(nn::Threshold(0, -1).forward(x).to_vector<double>(),
            (std::vector<double>{-1, -1, -1, -1, 0.5, 1.5}));
  const auto s = F::softsign(x).to_vector<double>();
  EXPECT_DOUBLE_EQ(s[0], -2.0 / 3.0);
  EXPECT_DOUBLE_EQ(F::tanhshrink(x).to_vector<double>()[5], 1.5 - std::tanh(1.5));
  EXPECT_THROW(F::softshrink(x, -0.1), ferry::ValueError);
  EXPECT_THROW(nn::Softshrink(-1), ferry::ValueError);
  EXPECT_EQ(nn::Hardshrink(0.5).str(), "Hardshrink(0.5)");
  EXPECT_EQ(nn::Threshold(0.1, 20).str(), "Threshold(threshold=0.1, value=20)");
  EXPECT_EQ(nn::Softsign().str(), "Softsign()");
}

TEST(NnSurface, NewLossesRefuseWhatPyTorchRefuses) {
  const Tensor x = ferry::randn({4, 3}), y = ferry::sign(ferry::randn({4, 3}));
  // Integer ±1 labels are taken, as PyTorch's promotion does.
  const Tensor yi = y.to(ferry::DType::i64);
  EXPECT_TRUE(ferry::allclose(F::soft_margin_loss(x, yi), F::soft_margin_loss(x, y)));
  EXPECT_TRUE(ferry::allclose(F::hinge_embedding_loss(x, yi), F::hinge_embedding_loss(x, y)));
  // soft_margin does not overflow where log1p(exp(-y x)) would.
  const Tensor big = ferry::full({1}, -200.0);
  EXPECT_FLOAT_EQ(F::soft_margin_loss(big, ferry::ones({1})).item<float>(), 200.0f);
  EXPECT_THROW(F::soft_margin_loss(x, ferry::ones({3})), ferry::ShapeError);
  EXPECT_THROW(F::triplet_margin_loss(x, x, x.select(0, 0)), ferry::ShapeError);
  EXPECT_THROW(F::gaussian_nll_loss(x, x, ferry::ones({3})), ferry::ValueError);  // wrong size
  EXPECT_THROW(F::gaussian_nll_loss(x, x, ferry::full({4, 3}, -1.0)), ferry::ValueError);
  const Tensor cls = ferry::tensor(std::vector<std::int64_t>{0, 2, 1, 2});
  EXPECT_THROW(F::multi_margin_loss(x, cls, 3), ferry::ValueError);
  EXPECT_THROW(F::multi_margin_loss(x, ferry::tensor(std::vector<std::int64_t>{0, 3, 1, 2})),
               ferry::ShapeError);  // class 3 of 3
  EXPECT_THROW(F::multi_margin_loss(x, cls.to(ferry::DType::f32)), ferry::DTypeError);
  EXPECT_THROW(F::multi_margin_loss(x, cls, 1, 1.0, ferry::ones({4})), ferry::ShapeError);
  // poisson_nll's full form at targets 0 and 1 adds nothing, and its gradient stays finite.
  const Tensor rate = ferry::tensor(std::vector<float>{0.3f, -0.2f}).requires_grad_();
  const Tensor counts = ferry::tensor(std::vector<float>{0, 1});
  const Tensor full_loss = F::poisson_nll_loss(rate, counts, true, true);
  EXPECT_FLOAT_EQ(full_loss.item<float>(), F::poisson_nll_loss(rate, counts).item<float>());
  full_loss.backward();
  for (float g : values(rate.grad())) EXPECT_TRUE(std::isfinite(g));
  // The modules print as PyTorch's and keep their weights as buffers.
  nn::MultiMarginLoss mm(2, 0.5, ferry::ones({3}));
  EXPECT_EQ(mm.str(), "MultiMarginLoss()");
  EXPECT_EQ(mm.named_buffers().at(0).first, "weight");
  EXPECT_EQ(nn::MultiLabelSoftMarginLoss(ferry::ones({3})).state_dict().size(), 1u);
  EXPECT_EQ(nn::TripletMarginLoss().str(), "TripletMarginLoss()");
}

// Under autocast the new loss rows widen 16-bit inputs to f32, and bilinear promotes, as
// PyTorch's policy lists them.
TEST(NnSurface, AutocastPolicyOfTheNewRows) {
  const Tensor h = ferry::randn({3, 4}, {.dtype = ferry::DType::f16}), f = ferry::randn({3, 4});
  ferry::Autocast amp("cpu", ferry::DType::f16);
  EXPECT_EQ(F::soft_margin_loss(h, ferry::sign(h)).dtype(), ferry::DType::f32);
  EXPECT_EQ(F::triplet_margin_loss(h, h, h).dtype(), ferry::DType::f32);
  EXPECT_EQ(F::poisson_nll_loss(h, ferry::abs(h)).dtype(), ferry::DType::f32);
  EXPECT_EQ(F::bilinear(h, f, ferry::randn({2, 4, 4}, {.dtype = ferry::DType::f16})).dtype(),
            ferry::DType::f32);
  EXPECT_EQ(F::bilinear(h, h, ferry::randn({2, 4, 4}, {.dtype = ferry::DType::f16})).dtype(),
            ferry::DType::f16);
}

// The 3-D pools (the n-dimensional composition on every device): the modules are their ops,
// print as PyTorch's, keep a channels_last_3d input's layout, and differentiate in f64.
TEST(NnSurface, ThreeDimensionalPools) {
  ferry::manual_seed(11);
  const Tensor x = ferry::randn({2, 3, 6, 5, 7});
  nn::MaxPool3d mp({2});
  EXPECT_EQ(mp.str(), "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)");
  const auto [v, i] = mp.forward_with_indices(x);
  EXPECT_EQ(v.sizes(), (ferry::Shape{2, 3, 3, 2, 3}));
  EXPECT_TRUE(ferry::equal(v, ferry::max_pool3d(x, {2})));
  // Each index is d * H * W + h * W + w within its channel's volume, and reads the maximum.
  EXPECT_TRUE(ferry::equal(ferry::gather(x.reshape({2, 3, -1}), 2, i.reshape({2, 3, -1})),
                           v.reshape({2, 3, -1})));
  nn::AvgPool3d ap({3, 2, 3}, {2}, {1}, true, false, 7);
  EXPECT_EQ(ap.str(), "AvgPool3d(kernel_size=(3, 2, 3), stride=2, padding=1)");
  EXPECT_TRUE(
      ferry::equal(ap.forward(x), ferry::avg_pool3d(x, {3, 2, 3}, {2}, {1}, true, false, 7)));
  EXPECT_EQ(nn::AdaptiveAvgPool3d({1}).forward(x).sizes(), (ferry::Shape{2, 3, 1, 1, 1}));
  EXPECT_TRUE(ferry::allclose(nn::AdaptiveAvgPool3d({1}).forward(x).reshape({2, 3}),
                              ferry::mean(x, {2, 3, 4}), 1e-5, 1e-6));
  EXPECT_EQ(nn::AdaptiveMaxPool3d({2, 3, 4}).str(), "AdaptiveMaxPool3d(output_size=(2, 3, 4))");
  // A global max is the max over the volume.
  EXPECT_TRUE(ferry::equal(nn::AdaptiveMaxPool3d({1}).forward(x).reshape({2, 3}),
                           ferry::amax(x.reshape({2, 3, -1}), {2})));
  // channels_last_3d in, channels_last_3d out (PyTorch keeps it), with the same values.
  const Tensor cl = x.contiguous(ferry::MemoryFormat::channels_last_3d);
  const Tensor y = ferry::avg_pool3d(cl, {2});
  EXPECT_TRUE(y.is_contiguous(ferry::MemoryFormat::channels_last_3d));
  EXPECT_TRUE(ferry::allclose(y, ferry::avg_pool3d(x, {2})));
  EXPECT_THROW(ferry::max_pool3d(ferry::randn({2, 3, 4}), {2}), ferry::ShapeError);
  EXPECT_THROW(ferry::avg_pool3d(x, {2}, {0}), ferry::ShapeError);
  EXPECT_THROW(ferry::adaptive_avg_pool3d(x, {2, 0, 1}), ferry::ShapeError);
  const Tensor x64 = ferry_test::grad_input({1, 2, 4, 3, 5});
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        return ferry::max_pool3d(in[0], {2, 2, 3}, {1}, {1});
      },
      {x64}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        return ferry::avg_pool3d(in[0], {3}, {2}, {1}, true, false);
      },
      {x64}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        return ferry::adaptive_max_pool3d(in[0], {3, 2, 2});
      },
      {x64}));
}

// MaxUnpool puts each pooled value back where max pooling found it: unpooling a max pool of
// non-overlapping windows keeps exactly the maxima, zeros elsewhere.
TEST(NnSurface, MaxUnpoolUndoesMaxPoolOnItsMaxima) {
  ferry::manual_seed(21);
  const Tensor x = ferry::randn({2, 3, 6, 8});
  nn::MaxPool2d pool({2});
  nn::MaxUnpool2d unpool({2});
  EXPECT_EQ(unpool.str(), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))");
  const auto [v, i] = pool.forward_with_indices(x);
  const Tensor y = unpool.forward(v, i);
  ASSERT_EQ(y.sizes(), x.sizes());
  const Tensor kept = ne(y, 0);
  EXPECT_EQ(ferry::sum(kept).item<std::int64_t>(), v.numel());
  EXPECT_TRUE(ferry::equal(ferry::where(kept, x, ferry::Scalar(0)), y));
  // The same in 3-D, and an output_size one larger than the default (with N and C).
  const Tensor x3 = ferry::randn({1, 2, 4, 4, 6});
  const auto [v3, i3] = ferry::max_pool3d_with_indices(x3, {2});
  EXPECT_EQ(nn::MaxUnpool3d({2}).forward(v3, i3, {1, 2, 5, 4, 7}).sizes(),
            (ferry::Shape{1, 2, 5, 4, 7}));
  EXPECT_THROW(ferry::max_unpool2d(v, i, {2}, {}, {0}, {9, 8}), ferry::ValueError);  // too big
  EXPECT_THROW(ferry::max_unpool2d(v, i, {2}, {}, {0}, {6}), ferry::ValueError);
  EXPECT_THROW(ferry::max_unpool2d(v, i + 100, {2}), ferry::ValueError);  // past the plane
  EXPECT_THROW(ferry::max_unpool2d(v, i.to(ferry::DType::i32), {2}), ferry::ShapeError);
  EXPECT_THROW(ferry::max_unpool2d(v, i.narrow(0, 0, 1), {2}), ferry::ShapeError);
}

// cdist against the definition, both of p = 2's forms, and PyTorch's refusals.
TEST(NnSurface, CdistIsEveryPairsDistance) {
  ferry::manual_seed(22);
  const Tensor a = ferry::randn({30, 4}, {.dtype = ferry::DType::f64});
  const Tensor b = ferry::randn({3, 4}, {.dtype = ferry::DType::f64});
  const Tensor want = ferry::norm(a.unsqueeze(1) - b.unsqueeze(0), 2, {-1});
  EXPECT_TRUE(ferry::allclose(ferry::cdist(a, b), want, 1e-12, 1e-12));  // the matrix product
  EXPECT_TRUE(ferry::allclose(ferry::cdist(a, b, 2, "donot_use_mm_for_euclid_dist"), want));
  EXPECT_TRUE(ferry::allclose(ferry::cdist(a, b, 0),
                              ferry::sum(ne(a.unsqueeze(1), b.unsqueeze(0)), {-1}).to(a.dtype())));
  for (const char* mode : {"use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"})
    EXPECT_TRUE(ferry_test::gradcheck(
        [mode](const std::vector<Tensor>& in) { return ferry::cdist(in[0], in[1], 2, mode); },
        {a.narrow(0, 0, 5), b}))
        << mode;
  EXPECT_THROW(ferry::cdist(a, b, -1), ferry::ValueError);
  EXPECT_THROW(ferry::cdist(a, b, 2, "fast"), ferry::ValueError);
  EXPECT_THROW(ferry::cdist(a, b.narrow(1, 0, 3)), ferry::ShapeError);
  EXPECT_THROW(ferry::cdist(a.select(0, 0), b), ferry::ShapeError);
}

// nn.Transformer: PyTorch's state names and initialization, its causal mask, its checks.
TEST(NnSurface, TransformerIsTheEncoderAndDecoderStacks) {
  ferry::manual_seed(23);
  nn::Transformer t(16, 4, 2, 1, {.dim_feedforward = 32, .dropout = 0.0});
  std::vector<std::string> names;
  for (const auto& [name, p] : t.state_dict()) names.push_back(name);
  for (const char* want : {"encoder.layers.0.self_attn.in_proj_weight",
                           "encoder.layers.1.linear2.bias", "encoder.norm.weight",
                           "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.norm.bias"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(t.encoder->num_layers, 2);
  EXPECT_EQ(t.decoder->num_layers, 1);
  // Every matrix re-drawn Xavier-uniform: linear1's weight [32, 16] within sqrt(6 / 48).
  const double bound = std::sqrt(6.0 / 48.0);
  for (const auto& [name, p] : t.named_parameters())
    if (name.find("linear1.weight") != std::string::npos)
      for (float v : values(p)) ASSERT_LE(std::fabs(v), bound) << name;
  const Tensor mask = nn::Transformer::generate_square_subsequent_mask(3);
  const float inf = INFINITY;
  EXPECT_EQ(values(mask), (std::vector<float>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}));
  t.eval();
  const Tensor src = ferry::randn({5, 2, 16}), tgt = ferry::randn({4, 2, 16});
  const Tensor out =
      t.forward(src, tgt, {}, {.attn_mask = nn::Transformer::generate_square_subsequent_mask(4)});
  EXPECT_EQ(out.sizes(), (ferry::Shape{4, 2, 16}));
  // The decoder sees the encoder's output: a different source changes the result.
  EXPECT_FALSE(ferry::allclose(out, t.forward(src * 2.0, tgt)));
  EXPECT_THROW(t.forward(src, ferry::randn({4, 3, 16})), ferry::ShapeError);  // batch 2 vs 3
  EXPECT_THROW(t.forward(src, ferry::randn({4, 2, 8})), ferry::ShapeError);   // not d_model
}

// EmbeddingBag's refusals (PyTorch's), its printing, and a bag's sum against the rows.
TEST(NnSurface, EmbeddingBagChecksItsBags) {
  nn::EmbeddingBag bag(10, 4, {.mode = "sum", .padding_idx = -1});
  EXPECT_EQ(bag.str(), "EmbeddingBag(10, 4, mode='sum', padding_idx=9)");
  EXPECT_EQ(values(bag.weight.select(0, 9)), std::vector<float>(4, 0.0f));
  const auto i64 = [](std::vector<std::int64_t> v) { return ferry::tensor(v); };
  const Tensor input = i64({2, 9, 5, 5}), offsets = i64({0, 1});
  const Tensor out = bag.forward(input, offsets);
  EXPECT_TRUE(ferry::equal(out.select(0, 0), bag.weight.select(0, 2)));
  EXPECT_TRUE(ferry::allclose(out.select(0, 1), bag.weight.select(0, 5) * 2.0));
  EXPECT_THROW(bag.forward(input), ferry::ShapeError);                  // 1-D without offsets
  EXPECT_THROW(bag.forward(input, i64({1, 2})), ferry::ValueError);     // offsets[0] != 0
  EXPECT_THROW(bag.forward(input, i64({0, 3, 2})), ferry::ValueError);  // decreasing
  EXPECT_THROW(bag.forward(input, i64({0, 5})), ferry::ValueError);     // past the input
  EXPECT_THROW(bag.forward(input.reshape({2, 2}), offsets), ferry::ValueError);
  EXPECT_THROW(bag.forward(input, offsets, ferry::ones({3})), ferry::ShapeError);
  EXPECT_THROW(bag.forward(input.to(ferry::DType::f32), offsets), ferry::DTypeError);
  EXPECT_THROW(bag.forward(i64({2, 10}), i64({0})), ferry::ShapeError);  // index 10 of 10
  // A bag of nothing but padding is empty: zeros in every mode (PyTorch's), and no gradient.
  for (const char* mode : {"sum", "mean", "max"}) {
    nn::EmbeddingBag m(10, 4, {.mode = mode, .padding_idx = 1});
    const Tensor y = m.forward(i64({1, 1, 2, 3}), i64({0, 2}));
    EXPECT_EQ(values(y.select(0, 0)), std::vector<float>(4, 0.0f)) << mode;
    ferry::sum(y).backward();
    EXPECT_EQ(values(m.weight.grad().select(0, 1)), std::vector<float>(4, 0.0f)) << mode;
  }
  nn::EmbeddingBag mean(10, 4);
  EXPECT_THROW(mean.forward(input, offsets, ferry::ones({4})), ferry::ValueError);  // sum only
  EXPECT_THROW(F::embedding_bag(input, bag.weight, offsets, {.mode = "median"}), ferry::ValueError);
}

}  // namespace
