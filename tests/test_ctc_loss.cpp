// The CTC loss against PyTorch's (tests/data/pytorch_ctc_reference.json, written by
// tools/gen_ctc_reference.py) on every device: the loss of log_softmax(logits) and the logits'
// gradient; a closed form; an f64 gradcheck; the module; the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_ctc_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using ferry_test::from_json;
using nlohmann::json;
namespace F = ferry::nn::functional;
using ferry::nn::Reduction;

Reduction reduction_of(const std::string& r) {
  return r == "none" ? Reduction::none : r == "sum" ? Reduction::sum : Reduction::mean;
}

void run_reference(const ferry::Device& dev) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/pytorch_ctc_reference.json");
  ASSERT_TRUE(f) << "missing tests/data/pytorch_ctc_reference.json";
  const json doc = json::parse(f);
  ASSERT_GE(doc["cases"].size(), 6u);
  for (const json& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + " on " + dev.str());
    const Tensor logits = from_json(c["logits"]).to(dev).requires_grad_();
    const Tensor loss = F::ctc_loss(ferry::log_softmax(logits, -1), from_json(c["targets"]).to(dev),
                                    c["input_lengths"].get<std::vector<std::int64_t>>(),
                                    c["target_lengths"].get<std::vector<std::int64_t>>(),
                                    c["blank"], reduction_of(c["reduction"]), c["zero_infinity"]);
    const double rtol = c["tol"]["rtol"], atol = c["tol"]["atol"];
    expect_close(loss, from_json(c["loss"]), rtol, atol, "loss");
    loss.backward(from_json(c["upstream"]).to(dev));
    expect_close(logits.grad(), from_json(c["grad"]), rtol, atol, "grad of the logits");
  }
}

FERRY_TEST_ON_EACH_DEVICE(CtcLoss, PyTorchReference, run_reference)

// Two frames, one label, uniform over 2 classes: the alignments of "1" are (1, 1), (0, 1)
// and (1, 0), each of probability 1/4: the loss is -log(3/4). With a repeated label (1, 1)
// and two frames there is no alignment: inf, or 0 with zero_infinity.
TEST(CtcLoss, ClosedForms) {
  const Tensor lp = ferry::full({2, 1, 2}, std::log(0.5));
  const Tensor one = ferry::tensor(std::vector<std::int64_t>{1}, {1, 1});
  EXPECT_NEAR(F::ctc_loss(lp, one, {2}, {1}, 0, Reduction::sum).item<double>(), -std::log(0.75),
              1e-6);
  const Tensor twice = ferry::tensor(std::vector<std::int64_t>{1, 1}, {1, 2});
  EXPECT_TRUE(std::isinf(F::ctc_loss(lp, twice, {2}, {2}, 0, Reduction::sum).item<double>()));
  EXPECT_EQ(F::ctc_loss(lp, twice, {2}, {2}, 0, Reduction::sum, true).item<double>(), 0.0);
  // An empty target: every frame blank.
  EXPECT_NEAR(F::ctc_loss(lp, one, {2}, {0}, 0, Reduction::sum).item<double>(), -2 * std::log(0.5),
              1e-6);
  // The module, with the lengths as tensors; 16-bit input computes in f32, returns its dtype.
  ferry::nn::CTCLoss ctc(0, Reduction::none);
  const Tensor l16 =
      ctc.forward(lp.to(DType::bf16), one, ferry::tensor(std::vector<std::int64_t>{2}),
                  ferry::tensor(std::vector<std::int64_t>{1}));
  EXPECT_EQ(l16.dtype(), DType::bf16);
  EXPECT_NEAR(l16.to(DType::f32).reshape({}).item<double>(), -std::log(0.75), 1e-2);
}

TEST(CtcLoss, GradcheckF64) {
  const Tensor targets = ferry::tensor(std::vector<std::int64_t>{1, 2, 2, 3, 1, 1}, {2, 3});
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return F::ctc_loss(ferry::log_softmax(in[0], -1), targets, {7, 6}, {3, 2}, 0,
                           Reduction::none);
      },
      {ferry_test::grad_input({7, 2, 4}, -2, 2, 8)}));
}

TEST(CtcLoss, BadInputIsRefused) {
  const Tensor lp = ferry::log_softmax(ferry::randn({5, 2, 4}), -1);
  const Tensor t = ferry::tensor(std::vector<std::int64_t>{1, 2, 3, 1}, {2, 2});
  EXPECT_THROW(F::ctc_loss(lp, t, {5, 5}, {2, 2}, 4), ferry::ValueError);            // blank
  EXPECT_THROW(F::ctc_loss(lp, t, {6, 5}, {2, 2}), ferry::ValueError);               // > T
  EXPECT_THROW(F::ctc_loss(lp, t, {5, 5}, {3, 2}), ferry::ShapeError);               // > S
  EXPECT_THROW(F::ctc_loss(lp, t, {5}, {2, 2}), ferry::ShapeError);                  // count
  EXPECT_THROW(F::ctc_loss(lp, t * 2, {5, 5}, {2, 2}), ferry::ValueError);           // label 6
  EXPECT_THROW(F::ctc_loss(lp, t.reshape({4}), {5, 5}, {2, 1}), ferry::ShapeError);  // sum 3
  EXPECT_THROW(F::ctc_loss(lp, t.to(DType::f32), {5, 5}, {2, 2}), ferry::DTypeError);
  EXPECT_THROW(F::ctc_loss(lp.reshape({5, 8}).unsqueeze(0).unsqueeze(0), t, {5, 5}, {2, 2}),
               ferry::ShapeError);
  EXPECT_THROW(F::ctc_loss(lp, t, ferry::tensor(std::vector<float>{5, 5}),
                           ferry::tensor(std::vector<std::int64_t>{2, 2})),
               ferry::DTypeError);
}

}  // namespace
