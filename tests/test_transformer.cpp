// MultiheadAttention, TransformerEncoderLayer and TransformerDecoderLayer against PyTorch's
// (tests/data/pytorch_transformer_reference.json, written by tools/gen_transformer_reference.py)
// on every device: each case's PyTorch state_dict loads by name, and the outputs, the attention
// weights and the gradients of the inputs and of every parameter match; the layers' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_transformer_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using ferry_test::from_json;
using nlohmann::json;
namespace nn = ferry::nn;

Tensor mask_from_json(const json& j, const ferry::Device& dev) {
  if (j.value("dtype", std::string()) == "bool")
    return ferry::tensor(j["data"].get<std::vector<std::int64_t>>())
        .reshape(j["shape"].get<ferry::Shape>())
        .to(DType::boolean)
        .to(dev);
  return from_json(j).to(dev);
}

nn::TransformerLayerOptions layer_options(const json& c) {
  nn::TransformerLayerOptions o;
  o.dim_feedforward = c.value("dim_feedforward", std::int64_t(2048));
  o.dropout = c.value("dropout", 0.1);
  o.activation = c.value("activation", std::string("relu"));
  o.layer_norm_eps = c.value("layer_norm_eps", 1e-5);
  o.batch_first = c.value("batch_first", false);
  o.norm_first = c.value("norm_first", false);
  return o;
}

void run_reference(const ferry::Device& dev) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/pytorch_transformer_reference.json");
  ASSERT_TRUE(f) << "missing tests/data/pytorch_transformer_reference.json";
  const json doc = json::parse(f);
  ASSERT_GE(doc["cases"].size(), 10u);
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"], kind = c["module"];
    SCOPED_TRACE(name + " on " + dev.str());
    const json& cfg = c["config"];
    const ferry::TensorOptions on{.device = dev};
    std::shared_ptr<nn::Module> module;
    std::shared_ptr<nn::MultiheadAttention> mha;
    std::shared_ptr<nn::TransformerEncoderLayer> encoder;
    std::shared_ptr<nn::TransformerDecoderLayer> decoder;
    std::shared_ptr<nn::Transformer> transformer;
    if (kind == "mha") {
      module = mha = std::make_shared<nn::MultiheadAttention>(
          8, 2,
          nn::MultiheadAttentionOptions{.bias = cfg.value("bias", true),
                                        .batch_first = cfg.value("batch_first", false)},
          on);
    } else if (kind == "encoder") {
      module = encoder =
          std::make_shared<nn::TransformerEncoderLayer>(8, 2, layer_options(cfg), on);
    } else if (kind == "transformer") {
      module = transformer = std::make_shared<nn::Transformer>(
          8, 2, cfg["num_encoder_layers"], cfg["num_decoder_layers"], layer_options(cfg), on);
    } else {
      module = decoder =
          std::make_shared<nn::TransformerDecoderLayer>(8, 2, layer_options(cfg), on);
    }
    ferry::StateDict state;
    for (const auto& [key, t] : c["state"].items()) state.insert(key, from_json(t).to(dev));
    module->load_state_dict(state);
    module->eval();
    std::vector<Tensor> in;
    for (const json& t : c["inputs"]) in.push_back(from_json(t).to(dev).requires_grad_());
    const json& m = c["masks"];
    auto mask = [&](const char* key) {
      return m.contains(key) ? mask_from_json(m[key], dev) : Tensor();
    };
    Tensor out, weights;
    if (mha) {
      std::tie(out, weights) = mha->forward(
          in[0], in[1], in[2],
          {.key_padding_mask = mask("key_padding_mask"), .attn_mask = mask("attn_mask")},
          cfg["need_weights"], cfg.value("average_attn_weights", true));
    } else if (transformer) {
      out = transformer->forward(
          in[0], in[1],
          {.key_padding_mask = mask("src_key_padding_mask"), .attn_mask = mask("src_mask")},
          {.key_padding_mask = mask("tgt_key_padding_mask"), .attn_mask = mask("tgt_mask")},
          {.key_padding_mask = mask("memory_key_padding_mask"), .attn_mask = mask("memory_mask")});
    } else if (encoder) {
      out = encoder->forward(
          in[0], {.key_padding_mask = mask("src_key_padding_mask"), .attn_mask = mask("src_mask")});
    } else {
      out = decoder->forward(
          in[0], in[1],
          {.key_padding_mask = mask("tgt_key_padding_mask"), .attn_mask = mask("tgt_mask")},
          {.key_padding_mask = mask("memory_key_padding_mask"), .attn_mask = mask("memory_mask")});
    }
    const double rtol = c["tol"]["rtol"], atol = c["tol"]["atol"];
    ASSERT_EQ(out.device(), dev);
    expect_close(out, from_json(c["output"]), rtol, atol, "output");
    EXPECT_EQ(weights.defined(), c.contains("weights"));
    if (c.contains("weights"))
      expect_close(weights, from_json(c["weights"]), rtol, atol, "weights");
    out.backward(from_json(c["upstream"]).to(dev));
    for (std::size_t i = 0; i < in.size(); ++i)
      expect_close(in[i].grad(), from_json(c["grads"][i]), rtol, atol,
                   "grad of input " + std::to_string(i));
    ferry_test::expect_param_grads(*module, c["param_grads"], rtol, atol);
  }
}

FERRY_TEST_ON_EACH_DEVICE(Transformer, PyTorchReference, run_reference)

// Dropout is on in training and off in eval; the two paths of MultiheadAttention (with and
// without the weights) agree.
TEST(Transformer, TrainingDropoutAndBothAttentionPaths) {
  ferry::manual_seed(4);
  nn::TransformerEncoderLayer layer(16, 4, {.dim_feedforward = 32, .dropout = 0.5});
  const Tensor x = ferry::randn({6, 3, 16});
  layer.eval();
  const auto a = layer.forward(x).to_vector<float>(), b = layer.forward(x).to_vector<float>();
  EXPECT_EQ(a, b);
  layer.train();
  EXPECT_NE(layer.forward(x).to_vector<float>(), a);
  nn::MultiheadAttention mha(16, 4);
  const auto [with_weights, w] = mha.forward(x, x, x, {.is_causal = true}, true);
  const auto [fused, none] = mha.forward(x, x, x, {.is_causal = true}, false);
  EXPECT_FALSE(none.defined());
  EXPECT_EQ(w.sizes(), (ferry::Shape{3, 6, 6}));
  expect_close(fused, with_weights, 1e-5, 1e-6, "sdpa path vs weights path");
}

// TransformerEncoder and TransformerDecoder: PyTorch's state names (layers.<i>.…, norm.…),
// every copy starting with the prototype's values (PyTorch deep-copies the layer), and the
// forward the layers applied in turn, then the norm.
TEST(Transformer, EncoderAndDecoderStacksAreTheirLayersInTurn) {
  ferry::manual_seed(5);
  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  nn::TransformerEncoder enc(layer, 3, std::make_shared<nn::LayerNorm>(ferry::Shape{8}));
  const ferry::StateDict sd = enc.state_dict();
  EXPECT_EQ(sd.size(), 3 * layer.state_dict().size() + 2);
  for (const char* key : {"layers.0.self_attn.in_proj_weight", "layers.2.linear2.bias",
                          "layers.1.norm1.weight", "norm.weight", "norm.bias"})
    EXPECT_TRUE(sd.contains(key)) << key;
  for (const auto& [name, value] : layer.state_dict())
    EXPECT_TRUE(ferry::equal(sd.at("layers.2." + name), value)) << name;
  // Different values per layer, then the forward against the layers by hand.
  for (auto& [name, p] : enc.named_parameters()) {
    ferry::NoGradGuard no_grad;
    p.copy_(ferry::randn(p.sizes()) * 0.3);
  }
  const Tensor x = ferry::randn({5, 2, 8});
  const nn::AttentionMasks causal{.is_causal = true};
  Tensor want = x;
  for (const auto& m : *enc.layers)
    want = static_cast<nn::TransformerEncoderLayer&>(*m).forward(want, causal);
  want = enc.norm->forward(want);
  EXPECT_TRUE(ferry::equal(enc.forward(x, causal), want));

  nn::TransformerDecoderLayer dlayer(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  nn::TransformerDecoder dec(dlayer, 2);
  EXPECT_FALSE(dec.norm);
  EXPECT_TRUE(dec.state_dict().contains("layers.1.multihead_attn.out_proj.weight"));
  const Tensor memory = enc.forward(x), tgt = ferry::randn({4, 2, 8});
  Tensor dwant = tgt;
  for (const auto& m : *dec.layers)
    dwant = static_cast<nn::TransformerDecoderLayer&>(*m).forward(dwant, memory, causal);
  EXPECT_TRUE(ferry::equal(dec.forward(tgt, memory, causal), dwant));
  EXPECT_THROW(nn::TransformerEncoder(layer, 0), ferry::ValueError);
}

TEST(Transformer, BadArgumentsAreTyped) {
  EXPECT_THROW(nn::MultiheadAttention(10, 3), ferry::ValueError);
  EXPECT_THROW(nn::TransformerEncoderLayer(8, 2, {.activation = "tanh"}), ferry::ValueError);
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = ferry::zeros({5, 2, 8});
  EXPECT_THROW(mha.forward(x, ferry::zeros({5, 2, 6}), x), ferry::ShapeError);
  EXPECT_THROW(mha.forward(x, x, x, {.key_padding_mask = ferry::zeros({2, 4})}), ferry::ShapeError);
  EXPECT_THROW(mha.forward(x, x, x, {.attn_mask = ferry::zeros({3, 5, 5})}), ferry::ShapeError);
  EXPECT_THROW(mha.forward(x, Tensor(), x), ferry::Error);
}

// RMSNorm against its closed form, computed in double on the host, on every device; the
// default eps is the dtype's machine epsilon; the weight's gradient is Σ g · x / rms.
TEST(Transformer, RMSNormIsItsClosedForm) {
  ferry::manual_seed(2);
  const Tensor x = ferry::randn({3, 2, 5}) * 3.0;
  const Tensor w = ferry::rand({2, 5}) + 0.5;
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>();
  for (const std::string dev : {"cpu", "vulkan:0"}) {
    if (!ferry::is_available(dev)) continue;
    SCOPED_TRACE(dev);
    nn::RMSNorm norm({2, 5}, 1e-3, true, {.device = ferry::Device(dev)});
    {
      ferry::NoGradGuard no_grad;
      norm.weight.copy_(w.to(ferry::Device(dev)));
    }
    const Tensor y = norm.forward(x.to(ferry::Device(dev)));
    ferry::sum(y).backward();
    const auto yv = y.to_vector<float>(), gw = norm.weight.grad().to_vector<float>();
    std::vector<double> want_gw(10, 0.0);
    for (int r = 0; r < 3; ++r) {
      double ms = 0;
      for (int i = 0; i < 10; ++i) ms += double(xv[r * 10 + i]) * xv[r * 10 + i] / 10.0;
      const double inv = 1.0 / std::sqrt(ms + 1e-3);
      for (int i = 0; i < 10; ++i) {
        EXPECT_NEAR(yv[r * 10 + i], xv[r * 10 + i] * inv * wv[i], 1e-5);
        want_gw[i] += xv[r * 10 + i] * inv;
      }
    }
    for (int i = 0; i < 10; ++i) EXPECT_NEAR(gw[i], want_gw[i], 1e-4);
  }
  // eps unset: f32's epsilon, so a zero row stays finite (0 / sqrt(eps)).
  const auto z = nn::functional::rms_norm(ferry::zeros({2, 4}), {4}).to_vector<float>();
  for (float v : z) EXPECT_EQ(v, 0.0f);
  EXPECT_THROW(nn::functional::rms_norm(x, {4}), ferry::ShapeError);
  EXPECT_THROW(nn::RMSNorm(ferry::Shape{}), ferry::ShapeError);
}

// Rotary embedding: each pair (i, i + D/2) turned by position · base^(-2i/D), so lengths are
// kept and a query-key product depends only on the distance between their positions.
TEST(Transformer, RotaryEmbeddingRotatesPairsByPosition) {
  const std::int64_t D = 8;
  const auto tables = nn::functional::rotary_tables(D, 32, 100.0);
  ferry::manual_seed(5);
  const Tensor x = ferry::randn({2, 6, D});
  const Tensor r = nn::functional::apply_rotary(x, tables, 3);
  const auto xv = x.to_vector<float>(), rv = r.to_vector<float>();
  for (int b = 0; b < 2; ++b)
    for (int l = 0; l < 6; ++l)
      for (int i = 0; i < D / 2; ++i) {
        const double angle = double(l + 3) * std::pow(100.0, -2.0 * i / double(D));
        const double x0 = xv[(b * 6 + l) * D + i], x1 = xv[(b * 6 + l) * D + i + D / 2];
        EXPECT_NEAR(rv[(b * 6 + l) * D + i], x0 * std::cos(angle) - x1 * std::sin(angle), 1e-5);
        EXPECT_NEAR(rv[(b * 6 + l) * D + i + D / 2], x1 * std::cos(angle) + x0 * std::sin(angle),
                    1e-5);
      }
  // Relative: q at 7, k at 2 gives the product q at 12, k at 7 gives.
  const Tensor q = ferry::randn({1, D}), k = ferry::randn({1, D});
  auto dot = [&](std::int64_t pq, std::int64_t pk) {
    return ferry::sum(nn::functional::apply_rotary(q, tables, pq) *
                      nn::functional::apply_rotary(k, tables, pk))
        .item<float>();
  };
  EXPECT_NEAR(dot(7, 2), dot(12, 7), 1e-4);
  EXPECT_THROW(nn::functional::rotary_tables(7, 4), ferry::ShapeError);
  EXPECT_THROW(nn::functional::apply_rotary(x, tables, 30), ferry::ShapeError);
  EXPECT_THROW(nn::functional::apply_rotary(ferry::zeros({3, 6}), tables), ferry::ShapeError);
}

}  // namespace
