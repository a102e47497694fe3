// RNN, LSTM, GRU and their cells against PyTorch's (tests/data/pytorch_rnn_reference.json,
// written by tools/gen_rnn_reference.py) on every device: each case's PyTorch state_dict loads
// by name, and the outputs, the final states and the gradients of the input, the starting
// states and every parameter match, over padded, unbatched and packed sequences. Then the
// packing utilities, dropout between layers, f64 gradchecks and the layers' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_rnn_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using ferry_test::from_json;
using nlohmann::json;
namespace nn = ferry::nn;
namespace rnn = ferry::nn::utils::rnn;

nn::RNNOptions rnn_options(const json& c) {
  nn::RNNOptions o;
  o.num_layers = c.value("num_layers", std::int64_t(1));
  o.nonlinearity = c.value("nonlinearity", std::string("tanh"));
  o.bias = c.value("bias", true);
  o.batch_first = c.value("batch_first", false);
  o.bidirectional = c.value("bidirectional", false);
  o.proj_size = c.value("proj_size", std::int64_t(0));
  return o;
}

using ferry_test::devices;

// The case's module, built with its options on `dev`.
std::shared_ptr<nn::Module> make_module(const json& c, const ferry::Device& dev) {
  const std::string kind = c["module"];
  const json& cfg = c["config"];
  const std::int64_t in = c["input_size"], hidden = c["hidden_size"];
  const ferry::TensorOptions on{.device = dev};
  const bool bias = cfg.value("bias", true);
  if (kind == "RNNCell")
    return std::make_shared<nn::RNNCell>(in, hidden, bias,
                                         cfg.value("nonlinearity", std::string("tanh")), on);
  if (kind == "GRUCell") return std::make_shared<nn::GRUCell>(in, hidden, bias, on);
  if (kind == "LSTMCell") return std::make_shared<nn::LSTMCell>(in, hidden, bias, on);
  if (kind == "LSTM") return std::make_shared<nn::LSTM>(in, hidden, rnn_options(cfg), on);
  if (kind == "GRU") return std::make_shared<nn::GRU>(in, hidden, rnn_options(cfg), on);
  return std::make_shared<nn::RNN>(in, hidden, rnn_options(cfg), on);
}

void run_reference(const ferry::Device& dev) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/pytorch_rnn_reference.json");
  ASSERT_TRUE(f) << "missing tests/data/pytorch_rnn_reference.json";
  const json doc = json::parse(f);
  ASSERT_GE(doc["cases"].size(), 18u);
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"], kind = c["module"];
    SCOPED_TRACE(name + " on " + dev.str());
    const std::shared_ptr<nn::Module> module = make_module(c, dev);
    const Tensor x = from_json(c["x"]).to(dev).requires_grad_();
    const Tensor h0 = c.contains("h0") ? from_json(c["h0"]).to(dev).requires_grad_() : Tensor();
    const Tensor c0 = c.contains("c0") ? from_json(c["c0"]).to(dev).requires_grad_() : Tensor();
    ferry::StateDict state;
    for (const auto& [key, t] : c["state"].items()) state.insert(key, from_json(t).to(dev));
    module->load_state_dict(state);
    module->eval();
    std::vector<Tensor> outs;
    const bool batch_first = c["config"].value("batch_first", false);
    if (auto* m = dynamic_cast<nn::RNNCell*>(module.get())) {
      outs = {m->forward(x, h0)};
    } else if (auto* m = dynamic_cast<nn::GRUCell*>(module.get())) {
      outs = {m->forward(x, h0)};
    } else if (auto* m = dynamic_cast<nn::LSTMCell*>(module.get())) {
      auto [h, cc] = m->forward(x, {h0, c0});
      outs = {h, cc};
    } else if (c.contains("packed")) {
      const auto packed =
          rnn::pack_padded_sequence(x, c["packed"]["lengths"].get<std::vector<std::int64_t>>(),
                                    batch_first, c["packed"]["enforce_sorted"]);
      nn::PackedSequence out;
      if (auto* m = dynamic_cast<nn::LSTM*>(module.get())) {
        auto [o, hc] = m->forward(packed, {h0, c0});
        out = o;
        outs = {Tensor(), std::get<0>(hc), std::get<1>(hc)};
      } else if (auto* m = dynamic_cast<nn::GRU*>(module.get())) {
        std::tie(out, outs.emplace_back()) = m->forward(packed, h0);
        outs.insert(outs.begin(), Tensor());
      } else {
        auto* r = dynamic_cast<nn::RNN*>(module.get());
        std::tie(out, outs.emplace_back()) = r->forward(packed, h0);
        outs.insert(outs.begin(), Tensor());
      }
      outs[0] = std::get<0>(rnn::pad_packed_sequence(out, batch_first));
    } else if (auto* m = dynamic_cast<nn::LSTM*>(module.get())) {
      auto [o, hc] = m->forward(x, {h0, c0});
      outs = {o, std::get<0>(hc), std::get<1>(hc)};
    } else if (auto* m = dynamic_cast<nn::GRU*>(module.get())) {
      auto [o, h] = m->forward(x, h0);
      outs = {o, h};
    } else {
      auto [o, h] = dynamic_cast<nn::RNN*>(module.get())->forward(x, h0);
      outs = {o, h};
    }
    const double rtol = c["tol"]["rtol"], atol = c["tol"]["atol"];
    ASSERT_EQ(outs.size(), c["outputs"].size());
    std::vector<Tensor> upstream;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      ASSERT_EQ(outs[i].device(), dev);
      expect_close(outs[i], from_json(c["outputs"][i]), rtol, atol, "output " + std::to_string(i));
      upstream.push_back(from_json(c["upstream"][i]).to(dev));
    }
    ferry::autograd::backward(outs, upstream);
    expect_close(x.grad(), from_json(c["grads"]["x"]), rtol, atol, "grad of x");
    if (h0.defined())
      expect_close(h0.grad(), from_json(c["grads"]["h0"]), rtol, atol, "grad of h0");
    if (c0.defined())
      expect_close(c0.grad(), from_json(c["grads"]["c0"]), rtol, atol, "grad of c0");
    ferry_test::expect_param_grads(*module, c["param_grads"], rtol, atol);
  }
}

FERRY_TEST_ON_EACH_DEVICE(Rnn, PyTorchReference, run_reference)

TEST(Rnn, ParametersAreNamedOrderedAndDrawnAsPyTorchs) {
  nn::LSTM lstm(3, 8, {.num_layers = 2, .bidirectional = true, .proj_size = 4});
  std::vector<std::string> names;
  for (const auto& [name, p] : lstm.named_parameters()) {
    names.push_back(name);
    // U(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter.
    EXPECT_LE(ferry::amax(ferry::abs(p)).item<double>(), 1 / std::sqrt(8.0)) << name;
  }
  std::vector<std::string> want;
  for (const char* layer : {"l0", "l1"})
    for (const char* dir : {"", "_reverse"})
      for (const char* w : {"weight_ih_", "weight_hh_", "bias_ih_", "bias_hh_", "weight_hr_"})
        want.push_back(std::string(w) + layer + dir);
  EXPECT_EQ(names, want);
  const auto weights = lstm.all_weights();
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_EQ(weights[0][0].sizes(), (ferry::Shape{32, 3}));  // 4 gates x 8, input 3
  EXPECT_EQ(weights[0][1].sizes(), (ferry::Shape{32, 4}));  // the projected state
  EXPECT_EQ(weights[2][0].sizes(), (ferry::Shape{32, 8}));  // both directions' outputs
  EXPECT_EQ(weights[3][4].sizes(), (ferry::Shape{4, 8}));   // weight_hr_l1_reverse
  EXPECT_EQ(lstm.str(), "LSTM(3, 8, proj_size=4, num_layers=2, bidirectional=true)");
  EXPECT_EQ(nn::GRU(3, 5, {.bias = false, .batch_first = true, .dropout = 0.5}).str(),
            "GRU(3, 5, bias=false, batch_first=true, dropout=0.5)");
  EXPECT_EQ(nn::RNNCell(3, 5, false, "relu").str(), "RNNCell(3, 5, bias=false, nonlinearity=relu)");
  nn::GRUCell cell(4, 2);
  EXPECT_EQ(cell.weight_ih.sizes(), (ferry::Shape{6, 4}));
  EXPECT_EQ(cell.named_parameters().size(), 4u);
}

// A layer reads its parameters by name on each forward, so a replaced parameter (a weight
// shared with another layer) is the one used and the one that receives the gradient.
TEST(Rnn, ReplacedParametersAreTheOnesUsed) {
  ferry::manual_seed(4);
  nn::GRU a(3, 4, {.num_layers = 2}), b(3, 4, {.num_layers = 2});
  for (const auto& [name, p] : a.named_parameters()) b.replace_parameter(name, p);
  EXPECT_TRUE(b.all_weights()[1][0].is_same(a.parameter("weight_ih_l1")));
  const Tensor x = ferry::randn({5, 2, 3});
  const auto [ya, ha] = a.forward(x);
  const auto [yb, hb] = b.forward(x);
  expect_close(yb, ya, 0, 0, "output");
  ferry::sum(yb).backward();
  for (const auto& [name, p] : a.named_parameters())
    EXPECT_TRUE(p.grad().defined()) << name << " took no gradient through the sharing layer";
}

TEST(Rnn, PackingRoundTrips) {
  ferry::manual_seed(3);
  const Tensor x = ferry::randn({5, 3, 2}).requires_grad_();
  const std::vector<std::int64_t> lengths{2, 5, 3};
  const nn::PackedSequence p = rnn::pack_padded_sequence(x, lengths, false, false);
  EXPECT_EQ(p.batch_sizes, (std::vector<std::int64_t>{3, 3, 2, 1, 1}));
  EXPECT_EQ(p.sorted_indices.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 0}));
  EXPECT_EQ(p.unsorted_indices.to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0, 1}));
  ASSERT_EQ(p.data.sizes(), (ferry::Shape{10, 2}));
  // Step 0 of sequences 1, 2, 0; ...; step 4 of sequence 1.
  EXPECT_TRUE(ferry::equal(p.data.narrow(0, 0, 1), x.select(0, 0).narrow(0, 1, 1)));
  EXPECT_TRUE(ferry::equal(p.data.narrow(0, 2, 1), x.select(0, 0).narrow(0, 0, 1)));
  EXPECT_TRUE(ferry::equal(p.data.narrow(0, 9, 1), x.select(0, 4).narrow(0, 1, 1)));
  const auto [padded, back] = rnn::pad_packed_sequence(p, false, 7.0, 6);
  EXPECT_EQ(back.to_vector<std::int64_t>(), lengths);
  ASSERT_EQ(padded.sizes(), (ferry::Shape{6, 3, 2}));
  const std::vector<float> px = x.to_vector<float>(), pp = padded.to_vector<float>();
  for (std::int64_t t = 0; t < 6; ++t)
    for (std::int64_t n = 0; n < 3; ++n)
      for (std::int64_t k = 0; k < 2; ++k)
        EXPECT_EQ(pp[(t * 3 + n) * 2 + k], t < lengths[n] ? px[(t * 3 + n) * 2 + k] : 7.0f);
  // The gradient reaches exactly the packed positions.
  ferry::sum(padded).backward();
  const std::vector<float> g = x.grad().to_vector<float>();
  for (std::int64_t t = 0; t < 5; ++t)
    for (std::int64_t n = 0; n < 3; ++n)
      EXPECT_EQ(g[(t * 3 + n) * 2], t < lengths[n] ? 1.0f : 0.0f);
  // batch_first both ways, and sorted lengths keep no indices.
  const nn::PackedSequence q =
      rnn::pack_padded_sequence(x.detach().transpose(0, 1).contiguous(),
                                ferry::tensor(std::vector<std::int64_t>{5, 3, 2}), true);
  EXPECT_FALSE(q.sorted_indices.defined());
  EXPECT_EQ(q.batch_sizes, (std::vector<std::int64_t>{3, 3, 2, 1, 1}));
  EXPECT_EQ(std::get<0>(rnn::pad_packed_sequence(q, true)).sizes(), (ferry::Shape{3, 5, 2}));
  // pad_sequence and pack_sequence.
  const std::vector<Tensor> seqs{ferry::ones({3, 2}), ferry::ones({1, 2}), ferry::ones({2, 2})};
  const Tensor ps = rnn::pad_sequence(seqs, true, -1.0);
  EXPECT_EQ(ps.sizes(), (ferry::Shape{3, 3, 2}));
  EXPECT_EQ(ferry::sum(ps).item<double>(), 12.0 - 6.0);
  EXPECT_EQ(rnn::pack_sequence(seqs, false).batch_sizes, (std::vector<std::int64_t>{3, 2, 1}));
  EXPECT_THROW(rnn::pack_sequence(seqs), ferry::ValueError);
}

// Packed sequences of different lengths give what each sequence gives alone, unbatched and cut
// to its length: outputs and final states (both directions, two layers).
TEST(Rnn, PackedBatchIsEachSequenceAlone) {
  for (const ferry::Device& dev : devices()) {
    SCOPED_TRACE(dev.str());
    ferry::manual_seed(5);
    nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2}, {.device = dev});
    const Tensor x = ferry::randn({6, 3, 3}).to(dev);
    const std::vector<std::int64_t> lengths{4, 6, 1};
    auto [out, hc] = lstm.forward(rnn::pack_padded_sequence(x, lengths, false, false));
    const Tensor padded = std::get<0>(rnn::pad_packed_sequence(out));
    for (std::int64_t n = 0; n < 3; ++n) {
      auto [o1, hc1] = lstm.forward(x.select(1, n).narrow(0, 0, lengths[n]));
      expect_close(padded.select(1, n).narrow(0, 0, lengths[n]), o1, 1e-5, 1e-6, "output");
      expect_close(std::get<0>(hc).select(1, n), std::get<0>(hc1), 1e-5, 1e-6, "h_n");
      expect_close(std::get<1>(hc).select(1, n), std::get<1>(hc1), 1e-5, 1e-6, "c_n");
    }
  }
}

// With dropout = 1 in training the second layer sees zeros: it is a one-layer RNN with the
// second layer's weights run on zeros. In eval, dropout is off.
TEST(Rnn, DropoutBetweenLayersOnlyInTraining) {
  ferry::manual_seed(9);
  nn::RNN two(3, 4, {.num_layers = 2, .dropout = 1.0});
  nn::RNN second(4, 4);
  ferry::StateDict s;
  for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
    s.insert(std::string(w) + "_l0", two.state_dict().at(std::string(w) + "_l1"));
  second.load_state_dict(s);
  const Tensor x = ferry::randn({5, 2, 3});
  auto [out, h] = two.forward(x);
  auto [want, hw] = second.forward(ferry::zeros({5, 2, 4}));
  EXPECT_TRUE(ferry::allclose(out, want, 1e-6, 1e-7));
  two.eval();
  nn::RNN plain(3, 4, {.num_layers = 2});
  plain.load_state_dict(two.state_dict());
  EXPECT_TRUE(ferry::equal(std::get<0>(two.forward(x)), std::get<0>(plain.forward(x))));
}

TEST(Rnn, GradcheckF64) {
  ferry::manual_seed(2);
  auto lstm =
      std::make_shared<nn::LSTM>(2, 3, nn::RNNOptions{.bidirectional = true, .proj_size = 2},
                                 ferry::TensorOptions{.dtype = DType::f64});
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [o, hc] = lstm->forward(rnn::pack_padded_sequence(in[0], {2, 4, 3}, false, false),
                                     {in[1], in[2]});
        return ferry::cat({std::get<0>(rnn::pad_packed_sequence(o)).reshape({-1}),
                           std::get<0>(hc).reshape({-1}), std::get<1>(hc).reshape({-1})});
      },
      {ferry_test::grad_input({4, 3, 2}, -1, 1, 1), ferry_test::grad_input({2, 3, 2}, -1, 1, 2),
       ferry_test::grad_input({2, 3, 3}, -1, 1, 3)}));
  nn::GRUCell gru(3, 2, true, {.dtype = DType::f64});
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) { return gru.forward(in[0], in[1]); },
      {ferry_test::grad_input({4, 3}, -1, 1, 4), ferry_test::grad_input({4, 2}, -1, 1, 5)}));
}

// The cell modules are the functional cell ops over their parameters; under autocast the
// layers and cells compute in the low dtype, as their rows say (PyTorch's lstm_cell, gru_cell,
// rnn_*_cell policy; its cuDNN RNN), near the f32 result, with f32 gradients for the f32
// parameters.
TEST(Rnn, FunctionalCellsAndAutocast) {
  namespace F = nn::functional;
  ferry::manual_seed(4);
  nn::LSTMCell lc(3, 4);
  nn::GRUCell gc(3, 4);
  nn::RNNCell rc(3, 4, true, "relu");
  const Tensor x = ferry::randn({2, 3}), h = ferry::randn({2, 4}), c = ferry::randn({2, 4});
  const auto [h1, c1] = F::lstm_cell(x, {h, c}, lc.weight_ih, lc.weight_hh, lc.bias_ih, lc.bias_hh);
  const auto [h2, c2] = lc.forward(x, {h, c});
  EXPECT_TRUE(ferry::equal(h1, h2));
  EXPECT_TRUE(ferry::equal(c1, c2));
  EXPECT_TRUE(ferry::equal(F::gru_cell(x, h, gc.weight_ih, gc.weight_hh, gc.bias_ih, gc.bias_hh),
                           gc.forward(x, h)));
  EXPECT_TRUE(
      ferry::equal(F::rnn_relu_cell(x, h, rc.weight_ih, rc.weight_hh, rc.bias_ih, rc.bias_hh),
                   rc.forward(x, h)));
  EXPECT_THROW(F::gru_cell(x, Tensor(), gc.weight_ih, gc.weight_hh), ferry::Error);
  EXPECT_THROW(F::gru_cell(x, h, gc.weight_ih.narrow(0, 0, 6), gc.weight_hh), ferry::ShapeError);
  EXPECT_THROW(F::rnn_tanh_cell(x, h, gc.weight_ih, gc.weight_hh), ferry::ShapeError);

  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  const Tensor seq = ferry::randn({5, 2, 3});
  auto [want, want_state] = lstm.forward(seq);
  {
    ferry::Autocast amp("cpu", DType::bf16);
    auto [out, state] = lstm.forward(seq);
    EXPECT_EQ(out.dtype(), DType::bf16);
    EXPECT_EQ(std::get<1>(state).dtype(), DType::bf16);
    EXPECT_TRUE(ferry::allclose(out.to(DType::f32), want, 0.05, 0.02));
    const auto [hb, cb] = lc.forward(x, {h, c});
    EXPECT_EQ(hb.dtype(), DType::bf16);
    EXPECT_TRUE(ferry::allclose(hb.to(DType::f32), h1, 0.05, 0.02));
    ferry::sum(out.to(DType::f32)).backward();
  }
  for (const auto& [name, p] : lstm.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), DType::f32) << name;
  }
}

TEST(Rnn, EmptyBatch) {
  nn::LSTM lstm(3, 4);
  auto [out, hc] = lstm.forward(ferry::zeros({2, 0, 3}));
  EXPECT_EQ(out.sizes(), (ferry::Shape{2, 0, 4}));
  EXPECT_EQ(std::get<0>(hc).sizes(), (ferry::Shape{1, 0, 4}));
  EXPECT_EQ(std::get<1>(hc).sizes(), (ferry::Shape{1, 0, 4}));
}

TEST(Rnn, BadInputIsRefusedAsPyTorchRefusesIt) {
  EXPECT_THROW(nn::LSTM(3, 4, {.dropout = 1.5}), ferry::ValueError);
  EXPECT_THROW(nn::LSTM(3, 0), ferry::ValueError);
  EXPECT_THROW(nn::LSTM(3, 4, {.num_layers = 0}), ferry::ValueError);
  EXPECT_THROW(nn::LSTM(3, 4, {.proj_size = 4}), ferry::ValueError);
  EXPECT_THROW(nn::LSTM(3, 4, {.proj_size = -1}), ferry::ValueError);
  EXPECT_THROW(nn::GRU(3, 4, {.proj_size = 2}), ferry::ValueError);
  EXPECT_THROW(nn::RNN(3, 4, {.nonlinearity = "gelu"}), ferry::ValueError);
  EXPECT_THROW(nn::RNNCell(3, 4, true, "sigmoid"), ferry::ValueError);
  EXPECT_THROW(nn::RNN(3, 4, {}, {.dtype = DType::i32}), ferry::DTypeError);

  nn::LSTM lstm(3, 4, {.num_layers = 2});
  const Tensor x = ferry::zeros({5, 2, 3});
  EXPECT_THROW(lstm.forward(ferry::zeros({5, 2, 3, 1})), ferry::ShapeError);
  EXPECT_THROW(lstm.forward(ferry::zeros({5, 2, 4})), ferry::ShapeError);
  EXPECT_THROW(lstm.forward(ferry::zeros({0, 2, 3})), ferry::ShapeError);
  EXPECT_THROW(lstm.forward(x, {ferry::zeros({2, 3, 4}), ferry::zeros({2, 2, 4})}),
               ferry::ShapeError);
  EXPECT_THROW(lstm.forward(x, {ferry::zeros({2, 2, 4}), ferry::zeros({2, 2, 5})}),
               ferry::ShapeError);
  EXPECT_THROW(lstm.forward(x, {ferry::zeros({2, 4}), ferry::zeros({2, 4})}), ferry::ShapeError);
  EXPECT_THROW(lstm.forward(x, {ferry::zeros({2, 2, 4}), Tensor()}), ferry::Error);
  EXPECT_THROW(lstm.forward(Tensor()), ferry::Error);
  // A Module reference has no single-output forward for a recurrent layer.
  nn::Module& as_module = lstm;
  EXPECT_THROW(as_module.forward(x), ferry::UnsupportedError);

  nn::GRUCell cell(3, 4);
  EXPECT_THROW(cell.forward(ferry::zeros({2, 5})), ferry::ShapeError);
  EXPECT_THROW(cell.forward(ferry::zeros({2, 3}), ferry::zeros({3, 4})), ferry::ShapeError);
  EXPECT_THROW(cell.forward(ferry::zeros({2, 3}), ferry::zeros({2, 5})), ferry::ShapeError);
  EXPECT_THROW(cell.forward(ferry::zeros({3}), ferry::zeros({1, 4})), ferry::ShapeError);
  EXPECT_THROW(cell.forward(ferry::zeros({1, 2, 3})), ferry::ShapeError);
  nn::LSTMCell lcell(3, 4);
  EXPECT_THROW(lcell.forward(ferry::zeros({2, 3}), {ferry::zeros({2, 4}), Tensor()}), ferry::Error);

  nn::PackedSequence bad = rnn::pack_padded_sequence(x, {5, 4});
  bad.batch_sizes = {1, 2, 2, 2, 2};  // growing
  EXPECT_THROW(lstm.forward(bad), ferry::ShapeError);
  bad.batch_sizes = {2, 2, 2};  // fewer rows than the data's 9
  EXPECT_THROW(lstm.forward(bad), ferry::ShapeError);
  EXPECT_THROW(rnn::pack_padded_sequence(x, {5}), ferry::ShapeError);
  EXPECT_THROW(rnn::pack_padded_sequence(x, {5, 0}), ferry::ValueError);
  EXPECT_THROW(rnn::pack_padded_sequence(x, {3, 5}), ferry::ValueError);
  EXPECT_THROW(rnn::pack_padded_sequence(x, {6, 5}), ferry::ValueError);
  EXPECT_THROW(rnn::pack_padded_sequence(x, ferry::tensor(std::vector<float>{5, 4})),
               ferry::DTypeError);
  EXPECT_THROW(rnn::pad_packed_sequence(rnn::pack_padded_sequence(x, {5, 4}), false, 0.0, 4),
               ferry::ValueError);
  EXPECT_THROW(rnn::pad_sequence({}), ferry::ValueError);
  EXPECT_THROW(rnn::pad_sequence({ferry::zeros({2, 3}), ferry::zeros({2, 4})}), ferry::ShapeError);
}

}  // namespace
