// linalg::matrix_exp and matrix_power (ferry/ops_linalg.hpp): PyTorch 1.13's values and gradients
// (tests/data/pytorch_matrix_functions_reference.json, written by
// tools/gen_matrix_functions_reference.py) on every device; in f64 on every device what they are
// defined by (closed forms: diagonal, nilpotent, rotations; exp(A) exp(-A) = I, det exp(A) =
// exp(tr A), a batch of mixed norms matrix by matrix; integer powers of the Fibonacci matrix);
// gradients and second-order gradients against finite differences; empty and f16 inputs; the
// errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "linalg_test_util.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace linalg = ferry::linalg;
using ferry_test::identity;
using ferry_test::max_abs;
using ferry_test::random_matrix;
using nlohmann::json;

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  if (op == "matrix_exp") return linalg::matrix_exp(in[0]);
  if (op == "matrix_power") return linalg::matrix_power(in[0], a["n"].get<std::int64_t>());
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_matrix_functions_reference.json", dev, 13,
                                        run_case);
}
FERRY_TEST_ON_EACH_DEVICE(MatrixFunctions, PyTorchReference, run_reference)

Tensor f64(std::vector<double> v, ferry::Shape shape, const ferry::Device& dev) {
  return ferry::tensor(std::move(v), std::move(shape)).to(dev);
}

// The largest entry of |x - want| over that of |want|.
double relative(const Tensor& x, const Tensor& want) { return max_abs(x - want) / max_abs(want); }

void check_closed_forms(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f64, .device = dev};
  EXPECT_LT(max_abs(linalg::matrix_exp(ferry::zeros({3, 3}, o)) - identity(3, dev)), 1e-15);
  // Diagonal: the exponentials of the diagonal, from 1e-3 to 40 (squarings). (Some 160 ulps of
  // exp(40): the approximant at a 1-norm near theta_13 sums terms that cancel, and each squaring
  // doubles what is left; PyTorch's Taylor terms gave 3e-15 here.)
  const Tensor d = f64({1e-3, -2, 7, 40}, {4}, dev);
  EXPECT_LT(relative(linalg::matrix_exp(ferry::diag(d)), ferry::diag(ferry::exp(d))), 1e-13);
  // Nilpotent N (strictly upper triangular, N^3 = 0): exp(N) = I + N + N^2 / 2.
  const Tensor n = ferry::triu(random_matrix({3, 3}, 1, dev), 1);
  EXPECT_LT(max_abs(linalg::matrix_exp(n) - (identity(3, dev) + n + ferry::matmul(n, n) * 0.5)),
            1e-15);
  // Rotations: exp(t [[0, -1], [1, 0]]) = [[cos t, -sin t], [sin t, cos t]], t = 0.5 and 30.
  for (const double t : {0.5, 30.0}) {
    SCOPED_TRACE(t);
    const Tensor r = linalg::matrix_exp(f64({0, -t, t, 0}, {2, 2}, dev));
    EXPECT_LT(max_abs(r - f64({std::cos(t), -std::sin(t), std::sin(t), std::cos(t)}, {2, 2}, dev)),
              1e-13);
  }
  // exp(A) exp(-A) = I and det exp(A) = exp(tr A) where they are well-conditioned (1-norms
  // under 4: one squaring at most); a batch of mixed norms, to some 30, is each matrix's own.
  const Tensor a = random_matrix({3, 4, 4}, 2, dev) * f64({0.01, 1, 8}, {3, 1, 1}, dev);
  const Tensor e = linalg::matrix_exp(a);
  const Tensor small = a.narrow(0, 0, 2), e_small = e.narrow(0, 0, 2);
  EXPECT_LT(max_abs(ferry::matmul(e_small, linalg::matrix_exp(-small)) - identity(4, dev)), 1e-14);
  EXPECT_LT(relative(linalg::det(e_small),
                     ferry::exp(ferry::sum(ferry::diagonal(small, 0, -2, -1), {-1}))),
            1e-14);
  for (std::int64_t i = 0; i < 3; ++i)
    EXPECT_LT(relative(linalg::matrix_exp(a.select(0, i)), e.select(0, i)), 1e-14) << i;
  // A 1 x 1 is the scalar exponential.
  EXPECT_LT(
      relative(linalg::matrix_exp(f64({3.5}, {1, 1}, dev)), f64({std::exp(3.5)}, {1, 1}, dev)),
      1e-15);

  // matrix_power: the products, PyTorch's order; the identity at 0; inverse powers.
  const Tensor b = random_matrix({2, 3, 3}, 3, dev) + identity(3, dev) * 2.0;
  EXPECT_EQ(max_abs(linalg::matrix_power(b, 0) - identity(3, dev).expand({2, 3, 3})), 0.0);
  EXPECT_EQ(max_abs(linalg::matrix_power(b, 1) - b), 0.0);
  EXPECT_EQ(max_abs(linalg::matrix_power(b, 3) - ferry::matmul(b, ferry::matmul(b, b))), 0.0);
  const Tensor bi = linalg::inv(b);
  EXPECT_LT(max_abs(linalg::matrix_power(b, -3) - ferry::matmul(bi, ferry::matmul(bi, bi))), 1e-13);
  // Integers, n >= 0: the Fibonacci matrix to the 30th, exactly.
  const Tensor fib = ferry::tensor(std::vector<std::int64_t>{1, 1, 1, 0}, {2, 2}).to(dev);
  const Tensor f30 = linalg::matrix_power(fib, 30);
  EXPECT_EQ(f30.dtype(), DType::i64);
  EXPECT_EQ(f30.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1346269, 832040, 832040, 514229}));
}
FERRY_TEST_ON_EACH_DEVICE(MatrixFunctions, ClosedForms, check_closed_forms)

TEST(MatrixFunctions, GradientsMatchFiniteDifferences) {
  using ferry_test::gradcheck;
  using ferry_test::gradgradcheck;
  using V = std::vector<Tensor>;
  const ferry::Device cpu = ferry::Device::cpu();
  // A batch whose second matrix is squared (1-norm past 5.4) and whose first is not.
  const Tensor a = random_matrix({2, 3, 3}, 4, cpu) * f64({0.5, 4}, {2, 1, 1}, cpu);
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::matrix_exp(in[0]); }, {a}));
  EXPECT_TRUE(gradgradcheck([](const V& in) { return linalg::matrix_exp(in[0]); },
                            {random_matrix({3, 3}, 5, cpu)}));
  const Tensor b = random_matrix({3, 3}, 6, cpu) + identity(3, cpu) * 2.0;
  for (const std::int64_t n : {0, 1, 2, 5, -1, -2}) {
    SCOPED_TRACE(n);
    EXPECT_TRUE(gradcheck([n](const V& in) { return linalg::matrix_power(in[0], n); }, {b}));
  }
}

void check_empty_half_and_errors(const ferry::Device& dev) {
  using ferry_test::expect_error;
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  EXPECT_EQ(linalg::matrix_exp(ferry::zeros({2, 0, 0}, o)).sizes(), (ferry::Shape{2, 0, 0}));
  EXPECT_EQ(linalg::matrix_power(ferry::zeros({0, 3, 3}, o), 4).sizes(), (ferry::Shape{0, 3, 3}));
  // f16 is computed in f32 and rounded back.
  const Tensor h = (random_matrix({3, 3}, 7, dev) * 2.0).to(DType::f16);
  const Tensor eh = linalg::matrix_exp(h);
  EXPECT_EQ(eh.dtype(), DType::f16);
  EXPECT_EQ(ferry_test::values(eh),
            ferry_test::values(linalg::matrix_exp(h.to(DType::f32)).to(DType::f16)));
  expect_error<ferry::ShapeError>([&] { linalg::matrix_exp(ferry::ones({3}, o)); },
                                  {"linalg.matrix_exp: The input tensor A must have at least 2 "
                                   "dimensions"});
  expect_error<ferry::ShapeError>(
      [&] {
        linalg::matrix_exp(ferry::ones({2, 3}, o));
      },
      {"linalg.matrix_exp: A must be batches of square matrices, but they are 2 by 3 matrices"});
  expect_error<ferry::ShapeError>(
      [&] {
        linalg::matrix_power(ferry::ones({2, 3}, o), 2);
      },
      {"linalg.matrix_power", "square"});
  expect_error<ferry::DTypeError>(
      [&] {
        linalg::matrix_power(ferry::ones({2, 2}, {.dtype = DType::i64, .device = dev}), -1);
      },
      {"linalg.matrix_power", "i64"});
  expect_error<ferry::DTypeError>(
      [&] {
        linalg::matrix_exp(ferry::ones({2, 2}, {.dtype = DType::i32, .device = dev}));
      },
      {});
}
FERRY_TEST_ON_EACH_DEVICE(MatrixFunctions, EmptyHalfAndErrors, check_empty_half_and_errors)

}  // namespace
