// einsum, tensordot and the named matrix products against PyTorch's
// (tests/data/pytorch_products_reference.json, written by tools/gen_products_reference.py) on
// every device: outputs and every operand's gradient. Then beta = 0, autocast, and the errors.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_products_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using nlohmann::json;

Tensor run_case(const std::string& op, const json& c, const std::vector<Tensor>& in) {
  if (op == "einsum") return ferry::einsum(c["equation"].get<std::string>(), in);
  if (op == "tensordot") {
    const json& d = c["dims"];
    if (d.is_number_integer()) return ferry::tensordot(in[0], in[1], d.get<std::int64_t>());
    return ferry::tensordot(in[0], in[1], d[0].get<std::vector<std::int64_t>>(),
                            d[1].get<std::vector<std::int64_t>>());
  }
  if (op == "outer") return ferry::outer(in[0], in[1]);
  if (op == "dot") return ferry::dot(in[0], in[1]);
  if (op == "mm") return ferry::mm(in[0], in[1]);
  if (op == "bmm") return ferry::bmm(in[0], in[1]);
  if (op == "mv") return ferry::mv(in[0], in[1]);
  const double beta = c["beta"], alpha = c["alpha"];
  if (op == "addmm") return ferry::addmm(in[0], in[1], in[2], beta, alpha);
  if (op == "addmv") return ferry::addmv(in[0], in[1], in[2], beta, alpha);
  if (op == "baddbmm") return ferry::baddbmm(in[0], in[1], in[2], beta, alpha);
  if (op == "addbmm") return ferry::addbmm(in[0], in[1], in[2], beta, alpha);
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_products_reference.json", dev, 35, run_case);
}

FERRY_TEST_ON_EACH_DEVICE(Products, PyTorchReference, run_reference)

// einsum against the same product spelled in ops, in f64 with gradchecks: a contraction with a
// label summed early (in one operand only), a broadcast ellipsis and a diagonal.
TEST(Products, EinsumGradcheck) {
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        return ferry::einsum("...ij,jk,kk->...ik", {in[0], in[1], in[2]});
      },
      {ferry_test::grad_input({2, 3, 4}, -1, 1, 1), ferry_test::grad_input({4, 5}, -1, 1, 2),
       ferry_test::grad_input({5, 5}, -1, 1, 3)}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        return ferry::einsum("abc,cd->b", {in[0], in[1]});
      },
      {ferry_test::grad_input({2, 3, 4}, -1, 1, 4), ferry_test::grad_input({4, 2}, -1, 1, 5)}));
}

// With beta 0 the input is not read: its NaN does not reach the result, as PyTorch's.
TEST(Products, BetaZeroIgnoresTheInput) {
  const Tensor nan = ferry::full({2, 2}, std::numeric_limits<float>::quiet_NaN());
  const Tensor a = ferry::eye(2), b = ferry::ones({2, 2});
  expect_close(ferry::addmm(nan, a, b, 0.0, 3.0), ferry::full({2, 2}, 3.0f), 0, 0, "addmm");
  expect_close(ferry::baddbmm(nan.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 0.0),
               ferry::ones({1, 2, 2}), 0, 0, "baddbmm");
}

// The rows' autocast policies are PyTorch's: einsum and the add* forms compute in the low
// dtype, dot and tensordot in the widest of their inputs.
TEST(Products, AutocastPolicies) {
  const Tensor a = ferry::randn({3, 4}), b = ferry::randn({4, 5});
  ferry::Autocast amp("cpu", DType::bf16);
  EXPECT_EQ(ferry::einsum("ij,jk->ik", {a, b}).dtype(), DType::bf16);
  EXPECT_EQ(ferry::addmm(ferry::zeros({5}), a, b).dtype(), DType::bf16);
  EXPECT_EQ(ferry::mm(a, b).dtype(), DType::bf16);  // matmul's row
  EXPECT_EQ(ferry::dot(ferry::ones({3}).to(DType::bf16), ferry::ones({3})).dtype(), DType::f32);
  EXPECT_EQ(ferry::tensordot(a.to(DType::bf16), b, 1).dtype(), DType::f32);
}

TEST(Products, BadInputIsRefused) {
  const Tensor m = ferry::zeros({3, 4}), v = ferry::zeros({4});
  EXPECT_THROW(ferry::einsum("ij,jk->ik", {m}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("ij->ik", {m}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("ij->ii", {m}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("i1->i", {m}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("i..j->i", {m}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("ij->i->j", {m}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("", {}), ferry::ValueError);
  EXPECT_THROW(ferry::einsum("ijk->i", {m}), ferry::ShapeError);
  EXPECT_THROW(ferry::einsum("ii->i", {m}), ferry::ShapeError);
  EXPECT_THROW(ferry::einsum("ij,jk->ik", {m, ferry::zeros({3, 2})}), ferry::ShapeError);
  EXPECT_THROW(ferry::tensordot(m, m, 1), ferry::ShapeError);
  EXPECT_THROW(ferry::tensordot(m, m, {0}, {0, 1}), ferry::ShapeError);
  EXPECT_THROW(ferry::tensordot(m, m, 3), ferry::ShapeError);
  EXPECT_THROW(ferry::outer(m, v), ferry::ShapeError);
  EXPECT_THROW(ferry::dot(v, ferry::zeros({5})), ferry::ShapeError);
  EXPECT_THROW(ferry::dot(v, v.to(DType::f64)), ferry::DTypeError);
  EXPECT_THROW(ferry::mm(m, m), ferry::ShapeError);
  EXPECT_THROW(ferry::mm(v, m), ferry::ShapeError);
  EXPECT_THROW(ferry::bmm(ferry::zeros({2, 3, 4}), ferry::zeros({1, 4, 3})), ferry::ShapeError);
  EXPECT_THROW(ferry::mv(m, ferry::zeros({3})), ferry::ShapeError);
  EXPECT_THROW(ferry::addmm(ferry::zeros({2}), m, m.t()), ferry::ShapeError);
  EXPECT_THROW(ferry::addmm(Tensor(), m, m.t()), ferry::Error);
  try {
    ferry::mm(m, m);
    ADD_FAILURE() << "no error";
  } catch (const ferry::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(3x4 and 3x4)"), std::string::npos) << e.what();
  }
}

}  // namespace
