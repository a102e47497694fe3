// tests/test_ops_surface.cpp — issue 21's composite ops beyond what the
// table-driven tests reach: the gradients of the ternary and reduction
// composites against finite differences, PyTorch's gradients at the points
// where a composition could differ (zeros, bounds, overflow), and the typed
// errors where PyTorch refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ferry/ferry.hpp"
#include "gradcheck.hpp"

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::grad_input;
using ferry_test::gradcheck;
using In = std::vector<Tensor>;

std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, std::vector<double> x) {
  Tensor leaf = ferry::tensor(x).to(DType::f64).requires_grad_();
  ferry::sum(f(leaf)).backward();
  return leaf.grad().to_vector<double>();
}

TEST(OpsSurface, TernaryAndReductionGradients) {
  Tensor a = grad_input({3, 4}, -2, 2, 1), b = grad_input({4}, -2, 2, 2);
  Tensor w = grad_input({3, 1}, -0.5, 1.5, 3), d = grad_input({3, 1}, 0.5, 2, 4);
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::lerp(in[0], in[1], in[2]); }, {a, b, w}));
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::lerp(in[0], in[1], 0.75); }, {a, b}));
  EXPECT_TRUE(
      gradcheck([](const In& in) { return ferry::addcmul(in[0], in[1], in[2], 0.5); }, {a, b, w}));
  EXPECT_TRUE(
      gradcheck([](const In& in) { return ferry::addcdiv(in[0], in[1], in[2], -2); }, {a, b, d}));
  for (std::vector<std::int64_t> dims : {std::vector<std::int64_t>{}, {1}, {0}}) {
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::std(in[0], dims); }, {a}));
    EXPECT_TRUE(gradcheck(
        [&](const In& in) {
          auto [v, m] = ferry::var_mean(in[0], dims, 0, true);
          return v + m * 3.0;
        },
        {a}));
    EXPECT_TRUE(gradcheck(
        [&](const In& in) {
          auto [s, m] = ferry::std_mean(in[0], dims);
          return s * m;
        },
        {a}));
    for (double p : {2.0, 1.0, 3.0, 0.5, -1.5, double(INFINITY), -double(INFINITY)})
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::norm(in[0], p, dims); }, {a}))
          << "p=" << p;
  }
}

// Where PyTorch's backward formula and the derivative of a naive composition
// part: the values at the kinks, zeros and overflow that PyTorch 1.13 gives.
TEST(OpsSurface, GradientsAtTheEdgesArePyTorchs) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::softplus(x); }, {0.0, 100.0, 1000.0}),
            (std::vector<double>{0.5, 1.0, 1.0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::elu(x, 2.0); }, {0.0, 1000.0, -1.0})[0],
            2.0);  // x <= 0 takes the exponential branch: alpha e^0
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::elu(x); }, {1000.0})[0], 1.0);
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::hardtanh(x); }, {-1.0, 1.0, 0.0, 2.0}),
            (std::vector<double>{0, 0, 1, 0}));  // 0 at the bounds themselves
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::clamp(x, -1, 1); }, {-1.0, 1.0}),
            (std::vector<double>{1, 1}));  // clamp passes it there
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::nan_to_num(x); }, {NAN, inf, -inf, 3.0}),
            (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::norm(x); }, {0.0, 0.0}),
            (std::vector<double>{0, 0}));  // not 0 / 0
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::norm(x, 3.0); }, {0.0, 0.0}),
            (std::vector<double>{0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::round(x, 2); }, {0.123}),
            (std::vector<double>{0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return ferry::copysign(x, -1.0); }, {2.0, 0.0}),
            (std::vector<double>{-1, 0}));
}

TEST(OpsSurface, IntegerDivisionByZeroIsAValueError) {
  Tensor a = ferry::tensor(std::vector<std::int32_t>{5, -5, 7});
  Tensor b = ferry::tensor(std::vector<std::int32_t>{2, 0, 3});
  using TT = Tensor (*)(const Tensor&, const Tensor&);
  for (TT tt : {TT(&ferry::remainder), TT(&ferry::fmod), TT(&ferry::floor_divide)})
    EXPECT_THROW(tt(a, b), ferry::ValueError);
  EXPECT_THROW(ferry::remainder(a, 0), ferry::ValueError);
  // Floats divide by zero as IEEE says.
  Tensor r = ferry::fmod(a.to(DType::f32), b.to(DType::f32));
  EXPECT_TRUE(std::isnan(r.to_vector<float>()[1]));
  EXPECT_EQ(ferry::floor_divide(a.to(DType::f32), b.to(DType::f32)).to_vector<float>()[1],
            -INFINITY);
}

TEST(OpsSurface, RefusedInputsAreTyped) {
  Tensor f = ferry::ones({3});
  Tensor i = ferry::ones({3}, {.dtype = DType::i32});
  Tensor u = ferry::ones({3}, {.dtype = DType::u8});
  EXPECT_THROW(ferry::elu(i), ferry::DTypeError);  // PyTorch: not implemented for Int
  EXPECT_THROW(ferry::selu(i), ferry::DTypeError);
  EXPECT_THROW(ferry::bitwise_not(f), ferry::DTypeError);
  EXPECT_THROW(ferry::bitwise_and(f, f), ferry::DTypeError);
  Tensor bools = ferry::ones({2}, {.dtype = DType::boolean});
  EXPECT_THROW(ferry::bitwise_left_shift(bools, bools), ferry::DTypeError);
  EXPECT_EQ(ferry::bitwise_left_shift(bools, 1).dtype(), DType::i64);  // as PyTorch promotes
  EXPECT_THROW(ferry::hardtanh(u, -1, 1), ferry::DTypeError);          // negative bounds on u8
  EXPECT_EQ(ferry::relu6(u).dtype(), DType::u8);
  EXPECT_THROW(ferry::celu(f, 0), ferry::Error);
  EXPECT_THROW(ferry::round(i, 1), ferry::DTypeError);
  EXPECT_THROW(ferry::lerp(f, f.to(DType::f16), 0.5), ferry::DTypeError);
  EXPECT_THROW(ferry::isclose(f, f.to(DType::f16)), ferry::DTypeError);
  EXPECT_THROW(ferry::isclose(f, f, -1), ferry::ValueError);
  EXPECT_THROW(ferry::addcdiv(f, i, i), ferry::DTypeError);
  EXPECT_THROW(ferry::addcmul(i, i, i, 0.5), ferry::DTypeError);
  EXPECT_THROW(ferry::norm(f, "nuc"), ferry::ValueError);
  EXPECT_THROW(ferry::norm(i), ferry::DTypeError);
  EXPECT_THROW(ferry::argmin(ferry::zeros({0})), ferry::Error);  // an empty argmin
}

TEST(OpsSurface, ValuesPyTorchDefines) {
  // hardtanh on integers truncates its bounds to the dtype.
  Tensor x = ferry::tensor(std::vector<std::int64_t>{-5, 1, 7});
  EXPECT_EQ(ferry::hardtanh(x, -1.5, 1.5).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{-1, 1, 1}));
  // ~x on every integer dtype, and on bool.
  EXPECT_EQ(ferry::bitwise_not(ferry::tensor(std::vector<std::uint8_t>{0, 5, 255}))
                .to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{255, 250, 0}));
  EXPECT_EQ(ferry::bitwise_not(ferry::tensor(std::vector<std::int64_t>{INT64_MIN, -1}))
                .to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{INT64_MAX, 0}));
  // The shift counts outside [0, bits).
  Tensor v = ferry::tensor(std::vector<std::int32_t>{-8, 8, 1, -1});
  Tensor s = ferry::tensor(std::vector<std::int32_t>{32, -1, 31, 40});
  EXPECT_EQ(ferry::bitwise_left_shift(v, s).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{0, 0, INT32_MIN, 0}));
  EXPECT_EQ(ferry::bitwise_right_shift(v, s).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{-1, 0, 0, -1}));
  // argmin of the most negative integer (which negation would overflow).
  EXPECT_EQ(
      ferry::argmin(ferry::tensor(std::vector<std::int32_t>{3, INT32_MIN, 7})).item<std::int64_t>(),
      1);
  // all and any of nothing; allclose and equal.
  EXPECT_TRUE(ferry::all(ferry::zeros({0})).item<bool>());
  EXPECT_FALSE(ferry::any(ferry::zeros({0})).item<bool>());
  EXPECT_TRUE(ferry::allclose(ferry::ones({3}), ferry::ones({3}) + 1e-7));
  EXPECT_FALSE(ferry::equal(ferry::ones({3}), ferry::ones({4})));
  EXPECT_EQ(ferry::count_nonzero(ferry::tensor(std::vector<float>{0, NAN, -0.0f, 2}))
                .item<std::int64_t>(),
            2);
}

// The view functions: the pieces share x's memory and have PyTorch's shapes.
TEST(OpsSurface, ShapeViews) {
  Tensor x = ferry::arange(24.0).reshape({2, 3, 4});
  auto parts = ferry::split(x, 3, 2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(parts[1].storage(), x.storage());
  EXPECT_EQ(ferry::split(x, std::vector<std::int64_t>{1, 2}, 1)[1].sizes(), (Shape{2, 2, 4}));
  EXPECT_EQ(ferry::chunk(x, 3, -1).size(), 2u);  // 4 in chunks of 2, as PyTorch
  EXPECT_EQ(ferry::unbind(x, 1).size(), 3u);
  EXPECT_EQ(ferry::movedim(x, 0, -1).sizes(), (Shape{3, 4, 2}));
  EXPECT_EQ(ferry::swapaxes(x, 0, 2).sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(ferry::unflatten(x, -1, {2, -1}).sizes(), (Shape{2, 3, 2, 2}));
  auto grids = ferry::meshgrid({ferry::arange(3.0), ferry::arange(2.0)}, "xy");
  EXPECT_EQ(grids[0].sizes(), (Shape{2, 3}));
  EXPECT_EQ(grids[1].to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(ferry::narrow_copy(x, 2, 1, 2).sizes(), (Shape{2, 3, 2}));
}

TEST(OpsSurface, ShapeOpsRefuseWhatPyTorchRefuses) {
  Tensor x = ferry::zeros({2, 3});
  EXPECT_THROW(ferry::pad(x, {3, 0}, "reflect"), ferry::ShapeError);  // pad >= size
  EXPECT_THROW(ferry::pad(x, {1}, "constant"), ferry::ShapeError);    // not pairs
  EXPECT_THROW(ferry::pad(x, {1, 1}, "wrap"), ferry::ValueError);
  EXPECT_THROW(ferry::masked_fill(x, ferry::ones({3}), 1), ferry::DTypeError);  // not bool
  EXPECT_THROW(ferry::masked_fill(x, ferry::ones({2, 3, 1}, {.dtype = DType::boolean}), 1),
               ferry::ShapeError);  // would grow x
  EXPECT_THROW(ferry::one_hot(ferry::tensor(std::vector<std::int64_t>{-1})), ferry::ValueError);
  EXPECT_THROW(ferry::one_hot(ferry::tensor(std::vector<std::int64_t>{5}), 3), ferry::ValueError);
  EXPECT_THROW(ferry::one_hot(ferry::zeros({2})), ferry::DTypeError);
  EXPECT_THROW(ferry::repeat(x, {2}), ferry::ShapeError);
  EXPECT_THROW(ferry::flip(x, {0, -2}), ferry::ShapeError);  // a dim twice
  EXPECT_THROW(ferry::split(x, std::vector<std::int64_t>{1, 1}, 1), ferry::ShapeError);
  EXPECT_THROW(ferry::triu(ferry::zeros({3})), ferry::ShapeError);
  EXPECT_THROW(ferry::trace(ferry::zeros({2, 2, 2})), ferry::ShapeError);
  EXPECT_THROW(ferry::index_fill(x, 1, ferry::tensor(std::vector<std::int64_t>{3}), 1.0),
               ferry::ShapeError);
  EXPECT_THROW(ferry::meshgrid({x}), ferry::ShapeError);
}

TEST(OpsSurface, Factories) {
  EXPECT_EQ(ferry::eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(ferry::sum(ferry::eye(3, std::nullopt, {.dtype = DType::i64})).item<std::int64_t>(), 3);
  // PyTorch's linspace: both ends exact, each value within an ulp of start + i step.
  auto v = ferry::linspace(-3, 7.5, 1001).to_vector<float>();
  ASSERT_EQ(v.size(), 1001u);
  EXPECT_EQ(v.front(), -3.0f);
  EXPECT_EQ(v.back(), 7.5f);
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(v[i], -3.0 + double(i) * 10.5 / 1000, 1e-6) << i;
  // torch.linspace(0, 1, 5) and torch.logspace(0, 2, 3).
  EXPECT_EQ(ferry::linspace(0, 1, 5).to_vector<float>(),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(ferry::linspace(2, 9, 1).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(ferry::linspace(0, 10, 4, {.dtype = DType::i64}).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{0, 3, 6, 10}));
  EXPECT_EQ(ferry::logspace(0, 2, 3).to_vector<float>(), (std::vector<float>{1, 10, 100}));
  EXPECT_THROW(ferry::linspace(0, 1, -1), ferry::ShapeError);
  EXPECT_THROW(ferry::eye(-1), ferry::ShapeError);
}

TEST(OpsSurface, DrawsAndPermutations) {
  ferry::manual_seed(3);
  auto p = ferry::randperm(1000).to_vector<std::int64_t>();
  std::vector<std::int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[std::size_t(i)], i);
  EXPECT_NE(p, sorted);
  ferry::manual_seed(3);
  EXPECT_EQ(ferry::randperm(1000).to_vector<std::int64_t>(), p);  // the seed decides it
  EXPECT_EQ(ferry::randperm(0).numel(), 0);
  Tensor probs = ferry::tensor(std::vector<float>{0, 1, 0, 1});
  EXPECT_EQ(ferry::bernoulli(probs).to_vector<float>(), (std::vector<float>{0, 1, 0, 1}));
  EXPECT_NEAR(ferry::mean(ferry::bernoulli(ferry::zeros({100000}), 0.3)).item<float>(), 0.3, 0.01);
  EXPECT_THROW(ferry::bernoulli(ferry::full({2}, 1.5)), ferry::ValueError);
  Tensor x = ferry::empty({200000});
  ferry::exponential_(x, 4.0);
  EXPECT_NEAR(ferry::mean(x).item<float>(), 0.25, 0.005);
  EXPECT_GE(ferry::min(x).item<float>(), 0.0f);
  ferry::uniform_(x, 2, 3);
  EXPECT_GE(ferry::min(x).item<float>(), 2.0f);
  EXPECT_EQ(ferry::randn_like(x).sizes(), x.sizes());
  EXPECT_EQ(ferry::randint_like(ferry::zeros({3}, {.dtype = DType::i32}), 0, 5).dtype(),
            DType::i32);
  // A leaf that requires grad is refused outside NoGradGuard, as PyTorch's.
  Tensor w = ferry::zeros({3}).requires_grad_();
  EXPECT_THROW(ferry::normal_(w), ferry::Error);
  EXPECT_NO_THROW(ferry::nn::init::normal_(w));
  Tensor ints = ferry::zeros({2}, {.dtype = DType::i32});
  EXPECT_THROW(ferry::uniform_(ints, 0, 1), ferry::DTypeError);
}

}  // namespace
