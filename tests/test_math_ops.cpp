// logaddexp, logit, sinc, kron, diff, nansum, nanmean, bincount, histc, dist, pdist, renorm and
// the products cross, vdot, vecdot, addr, multi_dot and chain_matmul against PyTorch's
// (tests/data/pytorch_math_reference.json, written by tools/gen_math_reference.py) on every
// device: outputs and every floating input's gradient. Then f64 gradchecks, the edges PyTorch
// defines (infinities, all-NaN slices, zero), autocast and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_math_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using nlohmann::json;

std::vector<std::int64_t> dims_of(const json& a) {
  return a.contains("dim") ? a["dim"].get<std::vector<std::int64_t>>()
                           : std::vector<std::int64_t>{};
}

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  if (op == "logaddexp") return ferry::logaddexp(in[0], in[1]);
  if (op == "logaddexp2") return ferry::logaddexp2(in[0], in[1]);
  if (op == "logit")
    return a.contains("eps") ? ferry::logit(in[0], a["eps"].get<double>()) : ferry::logit(in[0]);
  if (op == "sinc") return ferry::sinc(in[0]);
  if (op == "kron") return ferry::kron(in[0], in[1]);
  if (op == "diff")
    return ferry::diff(in[0], a["n"], a["dim"], in.size() > 1 ? in[1] : Tensor(),
                       in.size() > 2 ? in[2] : Tensor());
  if (op == "nansum") return ferry::nansum(in[0], dims_of(a), a.value("keepdim", false));
  if (op == "nanmean") return ferry::nanmean(in[0], dims_of(a), a.value("keepdim", false));
  if (op == "bincount")
    return ferry::bincount(in[0], in.size() > 1 ? in[1] : Tensor(), a["minlength"]);
  if (op == "histc") return ferry::histc(in[0], a["bins"], a["min"], a["max"]);
  if (op == "dist") return ferry::dist(in[0], in[1], a["p"]);
  if (op == "pdist") return ferry::pdist(in[0], a["p"]);
  if (op == "renorm") return ferry::renorm(in[0], a["p"], a["dim"], a["maxnorm"]);
  if (op == "cross")
    return a.contains("dim") ? ferry::cross(in[0], in[1], a["dim"].get<std::int64_t>())
                             : ferry::cross(in[0], in[1]);
  if (op == "linalg_cross") return ferry::linalg_cross(in[0], in[1], a["dim"]);
  if (op == "vdot") return ferry::vdot(in[0], in[1]);
  if (op == "vecdot") return ferry::vecdot(in[0], in[1], a["dim"]);
  if (op == "addr") return ferry::addr(in[0], in[1], in[2], a["beta"], a["alpha"]);
  if (op == "multi_dot") return ferry::multi_dot(in);
  if (op == "chain_matmul") return ferry::chain_matmul(in);
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_math_reference.json", dev, 38, run_case);
}

FERRY_TEST_ON_EACH_DEVICE(MathOps, PyTorchReference, run_reference)

TEST(MathOps, Gradcheck) {
  using ferry_test::grad_input;
  using In = const std::vector<Tensor>&;
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::logaddexp(in[0], in[1]); },
                                    {grad_input({3, 4}, -3, 3, 1), grad_input({4}, -3, 3, 2)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::logaddexp2(in[0], in[1]); },
                                    {grad_input({5}, -3, 3, 3), grad_input({5}, -3, 3, 4)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::logit(in[0]); },
                                    {grad_input({6}, 0.1, 0.9, 5)}));
  EXPECT_TRUE(
      ferry_test::gradcheck([](In in) { return ferry::sinc(in[0]); }, {grad_input({7}, -2, 2, 6)}));
  EXPECT_TRUE(
      ferry_test::gradcheck([](In in) { return ferry::kron(in[0], in[1]); },
                            {grad_input({2, 3}, -1, 1, 7), grad_input({2, 1, 2}, -1, 1, 8)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::cross(in[0], in[1], -1); },
                                    {grad_input({4, 3}, -1, 1, 9), grad_input({4, 3}, -1, 1, 10)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::pdist(in[0], 3.0); },
                                    {grad_input({4, 3}, -1, 1, 11)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::renorm(in[0], 2.0, 1, 1.0); },
                                    {grad_input({3, 4}, -1, 1, 12)}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](In in) {
        return ferry::multi_dot({in[0], in[1], in[2]});
      },
      {grad_input({2, 5}, -1, 1, 13), grad_input({5, 3}, -1, 1, 14), grad_input({3}, -1, 1, 15)}));
}

// The values PyTorch defines at the edges.
TEST(MathOps, EdgesArePyTorchs) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto f = [](std::vector<float> v) { return ferry::tensor(v); };
  // Equal infinities give themselves; a term far below the other does not drown it.
  expect_close(ferry::logaddexp(f({inf, -inf, 1, -inf}), f({inf, -inf, -1e8f, 2})),
               f({inf, -inf, 1, 2}), 0, 0, "logaddexp");
  // logit of 0 and 1 is -inf and inf; sinc(0) is 1, and its gradient there 0.
  expect_close(ferry::logit(f({0, 1})), f({-inf, inf}), 0, 0, "logit");
  Tensor zero = f({0}).requires_grad_();
  ferry::sum(ferry::sinc(zero)).backward();
  expect_close(zero.grad(), f({0}), 0, 0, "sinc'(0)");
  // A slice of NaN only: nansum 0, nanmean NaN.
  const Tensor x = f({nan, nan, 1, 3}).reshape({2, 2});
  expect_close(ferry::nansum(x, {1}), f({0, 4}), 0, 0, "nansum");
  const auto m = ferry::nanmean(x, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 2.0f);
  // Integer inputs: nansum is sum (i64); logit computes in f32.
  EXPECT_EQ(ferry::nansum(ferry::tensor(std::vector<std::int32_t>{1, 2})).dtype(), DType::i64);
  EXPECT_EQ(ferry::logit(ferry::tensor(std::vector<std::int64_t>{0})).dtype(), DType::f32);
  // bincount of nothing: minlength zeros; histc of one value: a range of +-1 around it.
  EXPECT_EQ(
      ferry::bincount(ferry::zeros({0}, {.dtype = DType::i64}), {}, 3).to_vector<std::int64_t>(),
      (std::vector<std::int64_t>{0, 0, 0}));
  expect_close(ferry::histc(f({2, 2}), 4), f({0, 0, 2, 0}), 0, 0, "histc of one value");
  // NaN falls in no bin (pytorch/pytorch#85853: PyTorch 1.13's CPU counted it in the first).
  expect_close(ferry::histc(f({nan, 0.6f, -1}), 4, -1, 1), f({1, 0, 0, 1}), 0, 0, "histc NaN");
  // diff of bool is !=, and n = 0 gives the input back.
  EXPECT_EQ(ferry::diff(ferry::tensor(std::vector<std::uint8_t>{0, 1, 1}).to(DType::boolean))
                .to(DType::i64)
                .to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, 0}));
  expect_close(ferry::diff(f({1, 4}), 0), f({1, 4}), 0, 0, "diff n=0");
  // pdist of one row: no pairs.
  EXPECT_EQ(ferry::pdist(ferry::ones({1, 3})).sizes(), (ferry::Shape{0}));
}

// Their rows' policies are PyTorch's: cross and vdot meet at the widest input, vecdot, addr and
// multi_dot compute in the low dtype, dist, pdist and renorm in f32.
TEST(MathOps, AutocastPolicies) {
  const Tensor a = ferry::randn({4, 3}), b = ferry::randn({4, 3}).to(DType::bf16);
  ferry::Autocast amp("cpu", DType::bf16);
  EXPECT_EQ(ferry::cross(a, b, 1).dtype(), DType::f32);
  EXPECT_EQ(ferry::vdot(a.select(1, 0), b.select(1, 0)).dtype(), DType::f32);
  EXPECT_EQ(ferry::vecdot(a, a).dtype(), DType::bf16);
  EXPECT_EQ(ferry::addr(ferry::zeros({4, 3}), a.select(1, 0), a.select(0, 0)).dtype(), DType::bf16);
  EXPECT_EQ(ferry::multi_dot({a, a.t(), a}).dtype(), DType::bf16);
  EXPECT_EQ(ferry::dist(b, b).dtype(), DType::f32);
  EXPECT_EQ(ferry::pdist(b).dtype(), DType::f32);
  EXPECT_EQ(ferry::renorm(b, 2, 0, 1).dtype(), DType::f32);
}

TEST(MathOps, BadInputIsRefused) {
  const Tensor m = ferry::zeros({3, 4}), v = ferry::zeros({4});
  const Tensor ints = ferry::tensor(std::vector<std::int64_t>{1, 2});
  EXPECT_FERRY_ERROR(ferry::logaddexp(ints, ints), ferry::DTypeError, "logaddexp");
  EXPECT_FERRY_ERROR(ferry::nanmean(ints), ferry::DTypeError, "nanmean");
  EXPECT_FERRY_ERROR(ferry::histc(ints), ferry::DTypeError, "histc");
  EXPECT_FERRY_ERROR(ferry::histc(v, 0), ferry::ValueError, "bins");
  EXPECT_FERRY_ERROR(ferry::histc(v, 2, 2, 1), ferry::ValueError, "max must be larger");
  EXPECT_FERRY_ERROR(ferry::bincount(v), ferry::DTypeError, "bincount");
  EXPECT_FERRY_ERROR(ferry::bincount(ints.reshape({1, 2})), ferry::ShapeError, "1-d", "[1, 2]");
  EXPECT_FERRY_ERROR(ferry::bincount(ferry::tensor(std::vector<std::int64_t>{1, -1})),
                     ferry::ValueError, "non-negative", "-1");
  EXPECT_FERRY_ERROR(ferry::bincount(ints, {}, -1), ferry::ValueError, "minlength");
  EXPECT_FERRY_ERROR(ferry::bincount(ints, ferry::ones({3})), ferry::ShapeError, "weights");
  EXPECT_FERRY_ERROR(ferry::diff(ferry::scalar_tensor(1.0)), ferry::ShapeError, "one-dimensional");
  EXPECT_FERRY_ERROR(ferry::diff(v, -1), ferry::ValueError, "non-negative");
  EXPECT_FERRY_ERROR(ferry::diff(m, 1, -1, v), ferry::ShapeError, "prepend");
  EXPECT_FERRY_ERROR(ferry::pdist(v), ferry::ShapeError, "2D", "[4]");
  EXPECT_FERRY_ERROR(ferry::pdist(m, -1), ferry::ValueError, "non-negative");
  EXPECT_FERRY_ERROR(ferry::renorm(v, 2, 0, 1), ferry::ShapeError, "2 dimensions");
  EXPECT_FERRY_ERROR(ferry::renorm(m, 0, 0, 1), ferry::ValueError, "non-positive");
  EXPECT_FERRY_ERROR(ferry::renorm(m, 2, 0, -1), ferry::ValueError, "maxnorm");
  EXPECT_FERRY_ERROR(ferry::cross(ferry::zeros({2, 4}), ferry::zeros({2, 4})), ferry::ShapeError,
                     "size 3", "[2, 4]");
  EXPECT_FERRY_ERROR(ferry::cross(m, m, 1), ferry::ShapeError, "length 3");
  EXPECT_FERRY_ERROR(ferry::cross(ferry::zeros({2, 3}), ferry::zeros({3})), ferry::ShapeError,
                     "number of dimensions");
  EXPECT_FERRY_ERROR(ferry::vdot(v, ferry::zeros({5})), ferry::ShapeError, "vdot");
  EXPECT_FERRY_ERROR(ferry::vecdot(m, m.to(DType::f64)), ferry::DTypeError, "vecdot");
  EXPECT_FERRY_ERROR(ferry::multi_dot({m}), ferry::ValueError, "at least 2");
  EXPECT_FERRY_ERROR(ferry::multi_dot({m, m}), ferry::ShapeError, "cannot be multiplied");
  EXPECT_FERRY_ERROR(ferry::multi_dot({m, ferry::zeros({4, 2, 1}), v}), ferry::ShapeError,
                     "tensor 1 must be 2D");
  EXPECT_FERRY_ERROR(ferry::multi_dot({m, m.t().to(DType::f64)}), ferry::DTypeError, "dtype");
  EXPECT_FERRY_ERROR(ferry::chain_matmul({}), ferry::ValueError, "one or more");
  EXPECT_FERRY_ERROR(ferry::addr(m, v, v), ferry::ShapeError, "[3, 4]", "[4, 4]");
}

}  // namespace
