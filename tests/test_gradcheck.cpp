// Every backward formula against central finite differences in double
// precision on the CPU (tests/gradcheck.hpp). Each case names the op and the
// shapes; inputs are kept away from kinks (relu, abs, max ties) and from the
// edges of a function's domain (log, sqrt, pow, division).
#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/ferry.hpp"
#include "gradcheck.hpp"

namespace {

using ferry::Shape;
using ferry::Tensor;
using ferry_test::grad_input;
using ferry_test::gradcheck;
using In = std::vector<Tensor>;

Tensor positive(const Shape& s, std::uint64_t seed = 1) { return grad_input(s, 0.5, 2.0, seed); }

// Each differentiable unary and binary row of the op table, on its row's
// input range (Note [The op table]); a domain that starts at 0 (log, sqrt,
// pow, div) is entered half a unit in.
std::pair<double, double> grad_range(const ferry::OpInfo& op) {
  return {op.test_lo >= 0 ? std::max(op.test_lo, 0.5) : op.test_lo, op.test_hi};
}
bool differentiable(const ferry::OpInfo& op) {
  return op.grad == ferry::OpGrad::formula || op.grad == ferry::OpGrad::parts;
}

TEST(Gradcheck, Unary) {
  int checked = 0;
  for (const ferry::OpInfo& op : ferry::op_table()) {
    if (op.kind != ferry::OpKind::unary || !differentiable(op)) continue;
    const auto [lo, hi] = grad_range(op);
    for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 4}}) {
      Tensor x = grad_input(s, lo, hi);
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::unary_op(op.id, in[0]); }, {x}))
          << op.name << " " << ferry::shape_str(s);
    }
    ++checked;
  }
  EXPECT_GE(checked, 17);
  for (const char* form : {"none", "tanh"})
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::gelu(in[0], form); },
                          {grad_input({4, 5}, -4, 4)}))
        << "gelu " << form;
  // A non-contiguous input: the gradient comes back in the input's layout.
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::tanh(in[0].t()); }, {grad_input({3, 5})}))
      << "tanh of a transposed view";
}

TEST(Gradcheck, BinaryWithBroadcasting) {
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {3, 4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{}, {2, 3}}, {{5}, {}}};
  int checked = 0;
  for (const ferry::OpInfo& op : ferry::op_table()) {
    if (op.kind != ferry::OpKind::binary || !differentiable(op)) continue;
    const auto [lo, hi] = grad_range(op);
    for (const auto& [sa, sb] : shapes) {
      Tensor a = grad_input(sa, std::max(lo, -2.0), std::min(hi, 2.0), 1);
      Tensor b = grad_input(sb, std::max(lo, -2.0), std::min(hi, 2.0), 2);
      EXPECT_TRUE(
          gradcheck([&](const In& in) { return ferry::binary_op(op.id, in[0], in[1]); }, {a, b}))
          << op.name << " " << ferry::shape_str(sa) << " x " << ferry::shape_str(sb);
    }
    ++checked;
  }
  EXPECT_GE(checked, 7);
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::pow(in[0], in[1]); },
                        {positive({3, 4}, 1), grad_input({4}, -2, 2, 2)}))
      << "pow tensor^tensor";
}

TEST(Gradcheck, ScalarOperands) {
  Tensor x = positive({2, 3});
  const std::vector<std::pair<const char*, ferry_test::GradFn>> fns = {
      {"x + 2", [](const In& in) { return in[0] + 2.0; }},
      {"x - 2", [](const In& in) { return in[0] - 2.0; }},
      {"2 - x", [](const In& in) { return 2.0 - in[0]; }},
      {"x * 3", [](const In& in) { return in[0] * 3.0; }},
      {"x / 3", [](const In& in) { return in[0] / 3.0; }},
      {"3 / x", [](const In& in) { return 3.0 / in[0]; }},
      {"x ^ 2.5", [](const In& in) { return ferry::pow(in[0], 2.5); }},
      {"x ^ 0", [](const In& in) { return ferry::pow(in[0], 0.0); }},
      {"2.5 ^ x", [](const In& in) { return ferry::pow(2.5, in[0]); }},
      {"maximum(x, 1)", [](const In& in) { return ferry::maximum(in[0], 1.03); }},
      {"minimum(x, 1)", [](const In& in) { return ferry::minimum(in[0], 1.03); }},
  };
  for (const auto& [name, fn] : fns) EXPECT_TRUE(gradcheck(fn, {x})) << name;
}

TEST(Gradcheck, WhereAndCasts) {
  Tensor a = grad_input({3, 4}, -2, 2, 1), b = grad_input({4}, -2, 2, 2);
  EXPECT_TRUE(gradcheck(
      [](const In& in) { return ferry::where(ferry::gt(in[0], 0), in[0], in[1]); }, {a, b}))
      << "where";
  EXPECT_TRUE(
      gradcheck([](const In& in) { return ferry::where(ferry::gt(in[0], 0), in[0], 0.5); }, {a}))
      << "where with a scalar";
  // Through f32 and back: the gradient is cast back. f32 rounding of x±ε
  // bounds the difference quotient's error (about 2^-24·|x| / ε).
  EXPECT_TRUE(gradcheck(
      [](const In& in) { return in[0].to(ferry::DType::f32).to(ferry::DType::f64) * 3.0; }, {a},
      {.eps = 1e-2, .atol = 1e-5, .rtol = 1e-5}))
      << "cast f64 -> f32 -> f64";
}

TEST(Gradcheck, Reductions) {
  Tensor x = grad_input({3, 4, 5}, -2, 2);
  const std::vector<std::vector<std::int64_t>> dim_sets = {{}, {0}, {1}, {-1}, {0, 2}};
  for (const auto& dims : dim_sets)
    for (bool keep : {false, true}) {
      const std::string label = fmt::format("dims [{}] keepdim {}", fmt::join(dims, ","), keep);
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::sum(in[0], dims, keep); }, {x}))
          << "sum " << label;
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::mean(in[0], dims, keep); }, {x}))
          << "mean " << label;
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::max(in[0], dims, keep); }, {x}))
          << "max " << label;
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::min(in[0], dims, keep); }, {x}))
          << "min " << label;
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::var(in[0], dims, 1, keep); }, {x}))
          << "var " << label;
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::var(in[0], dims, 0, keep); }, {x}))
          << "var correction 0 " << label;
    }
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::sum(in[0]); }, {grad_input({})}))
      << "sum of a 0-d";
}

// Ties share the gradient evenly (PyTorch's amax/amin): not a finite-difference
// question (max is not differentiable there), so a closed form.
TEST(Gradcheck, MaxTiesShareTheGradient) {
  Tensor x = ferry::tensor(std::vector<double>{1, 3, 3, 2, 3, 0}, {2, 3}).requires_grad_();
  ferry::sum(ferry::max(x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(),
            (std::vector<double>{0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0}));
  Tensor y = ferry::tensor(std::vector<double>{1, 3, 3, 2, 3, 0}, {2, 3}).requires_grad_();
  ferry::sum(ferry::max(y, {1})).backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0, 1, 0}));
  Tensor a = ferry::tensor(std::vector<double>{1, 2}).requires_grad_();
  Tensor b = ferry::tensor(std::vector<double>{1, 3}).requires_grad_();
  ferry::sum(ferry::maximum(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0.5, 0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0.5, 1}));
}

TEST(Gradcheck, Matmul) {
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {4, 5}},
      {{4}, {4}},
      {{4}, {4, 5}},
      {{3, 4}, {4}},
      {{2, 3, 4}, {4, 5}},
      {{2, 3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {2, 4, 3}},
      {{2, 3, 4}, {4}},
  };
  for (const auto& [sa, sb] : shapes)
    EXPECT_TRUE(gradcheck([](const In& in) { return ferry::matmul(in[0], in[1]); },
                          {grad_input(sa, -1, 1, 1), grad_input(sb, -1, 1, 2)}))
        << "matmul " << ferry::shape_str(sa) << " x " << ferry::shape_str(sb);
  // Transposed operands (a Linear layer's weight.t(), Note [Matmul gradient layout]).
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::matmul(in[0], in[1].t()); },
                        {grad_input({3, 4}, -1, 1, 1), grad_input({5, 4}, -1, 1, 2)}))
      << "x . w.t()";
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::matmul(in[0].t(), in[1]); },
                        {grad_input({4, 3}, -1, 1, 1), grad_input({4, 5}, -1, 1, 2)}))
      << "a.t() . b";
}

TEST(Gradcheck, SoftmaxAndLayerNorm) {
  Tensor x = grad_input({3, 4, 5}, -2, 2);
  for (std::int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::softmax(in[0], dim); }, {x}))
        << "softmax " << dim;
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::log_softmax(in[0], dim); }, {x}))
        << "log_softmax " << dim;
  }
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::layer_norm(in[0], {5}); }, {x}))
      << "layer_norm";
  EXPECT_TRUE(gradcheck(
      [](const In& in) {
        return ferry::layer_norm(in[0], {4, 5}, in[1], in[2]);
      },
      {x, grad_input({4, 5}, 0.5, 1.5, 2), grad_input({4, 5}, -1, 1, 3)}))
      << "layer_norm affine over two dims";
  EXPECT_TRUE(
      gradcheck([](const In& in) { return ferry::layer_norm(in[0].transpose(0, 2), {3}, in[1]); },
                {x, grad_input({3}, 0.5, 1.5, 2)}))
      << "layer_norm of a non-contiguous input, weight only";
}

TEST(Gradcheck, Indexing) {
  Tensor idx = ferry::tensor(std::vector<std::int64_t>{2, 0, 2, 4, 1, 2});  // repeats add up
  EXPECT_TRUE(gradcheck(
      [&](const In& in) {
        return ferry::embedding(in[0], idx.view({2, 3}));
      },
      {grad_input({5, 3})}))
      << "embedding";
  EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::index_select(in[0], 1, idx); },
                        {grad_input({3, 5})}))
      << "index_select dim 1";
  EXPECT_TRUE(
      gradcheck([&](const In& in) { return ferry::index_select(in[0], 0, idx.narrow(0, 0, 4)); },
                {grad_input({5})}))
      << "index_select 1-D";
  Tensor gidx = ferry::tensor(std::vector<std::int64_t>{0, 2, 2, 1, 0, 0, 3, 3}, {2, 4});
  EXPECT_TRUE(
      gradcheck([&](const In& in) { return ferry::gather(in[0], 1, gidx); }, {grad_input({2, 5})}))
      << "gather dim 1";
  EXPECT_TRUE(
      gradcheck([&](const In& in) { return ferry::gather(in[0], 0, gidx); }, {grad_input({4, 4})}))
      << "gather dim 0";
}

TEST(Gradcheck, CatStackAndViews) {
  Tensor a = grad_input({2, 3}, -2, 2, 1), b = grad_input({4, 3}, -2, 2, 2),
         c = grad_input({2, 3}, -2, 2, 3);
  EXPECT_TRUE(gradcheck(
      [](const In& in) {
        return ferry::cat({in[0], in[1]}, 0);
      },
      {a, b}))
      << "cat dim 0";
  EXPECT_TRUE(gradcheck(
      [](const In& in) {
        return ferry::cat({in[0], in[1].t()}, 1);
      },
      {a, grad_input({3, 2})}))
      << "cat dim 1 of a view";
  EXPECT_TRUE(gradcheck(
      [](const In& in) {
        return ferry::stack({in[0], in[1]}, 1);
      },
      {a, c}))
      << "stack";
  const std::vector<std::pair<const char*, ferry_test::GradFn>> views = {
      {"view",
       [](const In& in) {
         return in[0].view({6, 2});
       }},
      {"reshape of a transpose", [](const In& in) { return in[0].t().reshape({12}); }},
      {"permute",
       [](const In& in) {
         return in[0].view({2, 3, 2}).permute({2, 0, 1});
       }},
      {"transpose", [](const In& in) { return in[0].transpose(0, 1); }},
      {"narrow", [](const In& in) { return in[0].narrow(1, 1, 2); }},
      {"slice with a step", [](const In& in) { return in[0].slice(0, 0, 4, 2); }},
      {"select", [](const In& in) { return in[0].select(0, 2); }},
      {"expand",
       [](const In& in) {
         return in[0].narrow(0, 0, 1).expand({3, 4, 3});
       }},
      {"squeeze/unsqueeze",
       [](const In& in) { return in[0].unsqueeze(1).narrow(2, 1, 1).squeeze(); }},
      {"flatten",
       [](const In& in) {
         return in[0].view({2, 2, 3}).flatten(1);
       }},
      {"contiguous", [](const In& in) { return in[0].t().contiguous(); }},
      {"clone", [](const In& in) { return in[0].clone() * in[0]; }},
  };
  for (const auto& [name, fn] : views) EXPECT_TRUE(gradcheck(fn, {b})) << name;
}

}  // namespace
