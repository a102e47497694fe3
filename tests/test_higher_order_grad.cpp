// Higher-order gradients (create_graph, Note [Higher-order gradients] in
// runtime/autograd/graph.hpp): closed forms, every op family's second derivatives against finite
// differences of its first (tests/gradcheck.hpp's gradgradcheck, f64 on the CPU), PyTorch's
// second-order numbers (tests/data/pytorch_double_backward_reference.json, written by
// tools/gen_double_backward_reference.py) on every device, and the ops that have no second
// derivative saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "grad_reference_cases.hpp"
#include "gradcheck.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::Shape;
using ferry::Tensor;
using ferry_test::grad_input;
using ferry_test::gradgradcheck;
using In = std::vector<Tensor>;
namespace F = ferry::nn::functional;

std::vector<double> values(const Tensor& t) { return t.to(ferry::DType::f64).to_vector<double>(); }

// d/dx, d2/dx2 and d3/dx3 of x^3 + 2x^2 at x = 1.5: each grad() of the last, with create_graph.
TEST(HigherOrderGrad, DerivativesOfAPolynomial) {
  Tensor x = ferry::tensor<double>({1.5}).requires_grad_();
  Tensor y = ferry::sum(x * x * x + x * x * 2.0);
  Tensor d1 = ferry::autograd::grad({y}, {x}, {}, false, false, true)[0];
  ASSERT_TRUE(d1.requires_grad());
  Tensor d2 = ferry::autograd::grad({ferry::sum(d1)}, {x}, {}, false, false, true)[0];
  Tensor d3 = ferry::autograd::grad({ferry::sum(d2)}, {x})[0];
  EXPECT_DOUBLE_EQ(values(d1)[0], 3 * 1.5 * 1.5 + 4 * 1.5);
  EXPECT_DOUBLE_EQ(values(d2)[0], 6 * 1.5 + 4);
  EXPECT_DOUBLE_EQ(values(d3)[0], 6);
  EXPECT_FALSE(d3.requires_grad());  // no create_graph: a plain gradient
}

// backward(create_graph) leaves a gradient with a graph in grad(), and keeps the forward graph.
TEST(HigherOrderGrad, BackwardKeepsTheGradientsGraph) {
  Tensor x = ferry::tensor<double>({1.0, -2.0, 0.5}).requires_grad_();
  Tensor y = ferry::sum(ferry::exp(x) * x);
  y.backward({}, false, /*create_graph=*/true);
  const Tensor g = x.grad();
  ASSERT_TRUE(g.defined());
  EXPECT_TRUE(g.requires_grad());
  const std::vector<double> xv{1.0, -2.0, 0.5};
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(values(g)[i], std::exp(xv[i]) * (xv[i] + 1), 1e-12);
  // d/dx of sum(g) = e^x (x + 2), through exp's saved output and the product's saved inputs.
  // (retain_graph: the second backward goes through the forward graph's nodes too, and would
  // free them, as in PyTorch.)
  const Tensor h = ferry::autograd::grad({ferry::sum(g)}, {x}, {}, /*retain_graph=*/true)[0];
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(values(h)[i], std::exp(xv[i]) * (xv[i] + 2), 1e-12);
  // The forward graph was kept: a plain backward through it again gives the same gradient.
  x.set_grad({});
  y.backward();
  EXPECT_NEAR(values(x.grad())[0], std::exp(1.0) * 2, 1e-12);
}

// Hessian-vector products of f(x) = 1/2 x'Ax + Σ sin(x): H v = (A + A')/2 v - sin(x) v.
class HigherOrderGradDevices : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { FERRY_SKIP_UNLESS_DEVICE(GetParam()); }
  ferry::Device dev() const { return ferry::Device(GetParam()); }
};

TEST_P(HigherOrderGradDevices, HessianVectorProductOfAQuadraticForm) {
  const std::int64_t n = 6;
  ferry::manual_seed(3);
  const Tensor a = ferry::uniform({n, n}, -1, 1);
  const Tensor x0 = ferry::uniform({n}, -1, 1), v = ferry::uniform({n}, -1, 1);
  Tensor x = x0.to(dev()).requires_grad_();
  const Tensor ad = a.to(dev());
  const Tensor f =
      ferry::sum(ferry::matmul(x, ferry::matmul(ad, x))) * 0.5 + ferry::sum(ferry::sin(x));
  const Tensor g = ferry::autograd::grad({f}, {x}, {}, false, false, true)[0];
  const Tensor hv = ferry::autograd::grad({ferry::sum(g * v.to(dev()))}, {x})[0];
  ASSERT_EQ(hv.device(), dev());
  const Tensor want = ferry::matmul((a + a.t()) * 0.5, v) - ferry::sin(x0) * v;
  const std::vector<double> got = values(hv.cpu()), w = values(want);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-5) << i;
}

// PyTorch's second-order numbers: Hessian-vector products of the first-order reference's
// functions, and a critic's gradient penalty (WGAN-GP) differentiated for its weights.
TEST_P(HigherOrderGradDevices, AgainstPyTorch) {
  std::ifstream file(std::string(FERRY_TEST_DATA_DIR) + "/pytorch_double_backward_reference.json");
  ASSERT_TRUE(file) << "missing tests/data/pytorch_double_backward_reference.json "
                       "(tools/gen_double_backward_reference.py)";
  const nlohmann::json doc = nlohmann::json::parse(file);
  using ferry_test::from_json;
  int cases = 0;
  for (const nlohmann::json& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name + " on " + GetParam());
    const double rtol = c["tol"]["rtol"], atol = c["tol"]["atol"];
    In in;
    for (const nlohmann::json& t : c["inputs"]) {
      Tensor x = from_json(t).to(dev());
      in.push_back(ferry::is_floating(x.dtype()) ? x.requires_grad_() : x);
    }
    In floating;
    for (const Tensor& x : in)
      if (ferry::is_floating(x.dtype())) floating.push_back(x);
    if (c["kind"] == "penalty") {
      // The critics of tools/gen_double_backward_reference.py.
      Tensor d;
      if (name == "gradient_penalty") {
        Tensor h = ferry::tanh(ferry::matmul(in[0], in[1].t()) + in[2]);
        h = ferry::silu(ferry::matmul(h, in[3].t()) + in[4]);
        h = ferry::gelu(h) + ferry::sigmoid(h) + ferry::relu(h - 0.1);
        d = ferry::matmul(h, in[5].t()) + in[6];
      } else {
        ASSERT_EQ(name, "cnn_gradient_penalty");
        Tensor h = ferry::tanh(ferry::conv2d(in[0], in[1], in[2], {1}, {1}));
        h = ferry::max_pool2d(h, {2}, {1});
        h = ferry::conv2d(h, in[3], in[4], {2}, {1});
        h = F::batch_norm(h, {}, {}, in[5], in[6], true);
        h = ferry::silu(
            ferry::interpolate(h, {.size = {3, 4}, .mode = "bilinear", .align_corners = false}));
        h = ferry::layer_norm(ferry::avg_pool2d(h, {2}, {1}, {1}), {4, 5});
        d = ferry::matmul(ferry::adaptive_avg_pool2d(h, {1}).flatten(1), in[7].t()) + in[8];
      }
      const Tensor gx = ferry::autograd::grad({ferry::sum(d)}, {in[0]}, {}, false, false, true)[0];
      const Tensor out =
          ferry::mean(ferry::pow(ferry::norm(gx.reshape({gx.size(0), -1}), 2.0, {1}) - 1.0, 2.0));
      ferry_test::expect_close(out, from_json(c["output"]), rtol, atol, "penalty");
      const In grads = ferry::autograd::grad({out}, in, {}, false, /*allow_unused=*/true);
      for (std::size_t i = 0; i < in.size(); ++i) {
        if (c["grads"][i].is_null()) continue;
        ferry_test::expect_close(grads[i], from_json(c["grads"][i]), rtol, atol,
                                 "grad of input " + std::to_string(i));
      }
      ++cases;
      continue;
    }
    const auto fn = ferry_test::grad_reference_cases().find(name);
    ASSERT_NE(fn, ferry_test::grad_reference_cases().end()) << "no ferry definition";
    const Tensor out = fn->second(in);
    const Tensor loss = ferry::sum(out * from_json(c["upstream"]).to(dev()));
    const In first = ferry::autograd::grad({loss}, floating, {}, false, true, true);
    Tensor s;
    for (std::size_t k = 0; k < first.size(); ++k) {
      if (!first[k].defined()) continue;
      const Tensor term = ferry::sum(first[k] * from_json(c["directions"][k]).to(dev()));
      s = s.defined() ? s + term : term;
    }
    const In second = ferry::autograd::grad({s}, floating, {}, false, true);
    std::size_t k = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (!ferry::is_floating(in[i].dtype())) continue;
      const std::string what = " of input " + std::to_string(i);
      if (!c["first"][i].is_null())
        ferry_test::expect_close(first[k], from_json(c["first"][i]), rtol, atol, "first" + what);
      if (!c["second"][i].is_null())
        ferry_test::expect_close(second[k], from_json(c["second"][i]), rtol, atol, "second" + what);
      ++k;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 12);
}

INSTANTIATE_TEST_SUITE_P(Devices, HigherOrderGradDevices,
                         ::testing::ValuesIn(ferry_test::all_device_names()),
                         [](const auto& info) { return ferry_test::backend_of(info.param); });

bool twice_differentiable(const ferry::OpInfo& op) {
  return op.grad == ferry::OpGrad::formula || op.grad == ferry::OpGrad::parts;
}

// Every differentiable unary and binary row of the op table, second order.
TEST(HigherOrderGrad, UnaryAndBinaryOps) {
  int checked = 0;
  for (const ferry::OpInfo& op : ferry::op_table()) {
    if (!twice_differentiable(op)) continue;
    const double lo = op.test_lo >= 0 ? std::max(op.test_lo, 0.5) : op.test_lo;
    const double hi = op.test_hi;
    if (op.kind == ferry::OpKind::unary) {
      EXPECT_TRUE(gradgradcheck([&](const In& in) { return ferry::unary_op(op.id, in[0]); },
                                {grad_input({3, 4}, lo, hi)}))
          << op.name;
      ++checked;
    } else if (op.kind == ferry::OpKind::binary) {
      EXPECT_TRUE(gradgradcheck([&](const In& in) { return ferry::binary_op(op.id, in[0], in[1]); },
                                {grad_input({3, 4}, std::max(lo, -2.0), std::min(hi, 2.0), 1),
                                 grad_input({4}, std::max(lo, -2.0), std::min(hi, 2.0), 2)}))
          << op.name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 25);
  for (const char* form : {"none", "tanh"})
    EXPECT_TRUE(gradgradcheck([&](const In& in) { return ferry::gelu(in[0], form); },
                              {grad_input({4, 5}, -3, 3)}))
        << "gelu " << form;
}

TEST(HigherOrderGrad, ReductionsProductsAndRows) {
  const std::vector<std::pair<const char*, ferry_test::GradFn>> fns = {
      {"sum and mean",
       [](const In& in) { return ferry::sum(in[0] * in[0], {1}) + ferry::mean(in[0]); }},
      {"prod", [](const In& in) { return ferry::prod(in[0], {1}); }},
      {"var", [](const In& in) { return ferry::var(in[0], {1}); }},
      {"norm", [](const In& in) { return ferry::norm(in[0], 2.0, {1}); }},
      {"logsumexp", [](const In& in) { return ferry::logsumexp(in[0], {1}); }},
      {"amax", [](const In& in) { return ferry::amax(in[0] * in[0], {1}); }},
      {"matmul", [](const In& in) { return ferry::matmul(in[0], in[0].t()); }},
      {"softmax", [](const In& in) { return ferry::softmax(in[0], 1); }},
      {"log_softmax", [](const In& in) { return ferry::log_softmax(in[0], 0); }},
      {"cumsum", [](const In& in) { return ferry::cumsum(in[0] * in[0], 1); }},
      {"mse_loss",
       [](const In& in) { return F::mse_loss(in[0] * in[0], ferry::flip(in[0], {0})); }},
      {"slices and cat",
       [](const In& in) {
         return ferry::cat({in[0].slice(1, 0, 2) * in[0].slice(1, 2, 4),
                            in[0].select(0, 1).slice(0, 1, 3).unsqueeze(0)},
                           0);
       }},
      {"in place through a view",
       [](const In& in) {
         Tensor y = in[0] * 2.0;
         y.slice(1, 0, 2).mul_(ferry::sin(in[0].slice(1, 2, 4)));
         return ferry::exp(y);
       }},
      {"a view read after its base was written",
       [](const In& in) {
         Tensor y = in[0] * 2.0;
         const Tensor head = y.slice(1, 0, 2);
         y.slice(1, 1, 3).mul_(ferry::cos(in[0].slice(1, 2, 4)));
         return ferry::cat({head * head, y.slice(1, 2, 4)}, 1);
       }},
      {"chunks",
       [](const In& in) {
         const auto parts = ferry::chunk(in[0], 2, 1);
         return ferry::exp(parts[0]) * parts[1];
       }},
  };
  for (const auto& [name, fn] : fns)
    EXPECT_TRUE(gradgradcheck(fn, {grad_input({3, 4}, -1.5, 1.5)})) << name;
}

TEST(HigherOrderGrad, NnAndIndexing) {
  const Tensor target = ferry::tensor<std::int64_t>({2, 0, 1});
  const Tensor idx = ferry::tensor<std::int64_t>({3, 0, 3, 1});
  EXPECT_TRUE(gradgradcheck(
      [&](const In& in) { return F::cross_entropy(ferry::matmul(in[0], in[1]), target); },
      {grad_input({3, 4}, -1, 1, 1), grad_input({4, 3}, -1, 1, 2)}))
      << "cross_entropy";
  EXPECT_TRUE(gradgradcheck(
      [&](const In& in) { return ferry::tanh(F::linear(in[0], in[1], in[2])); },
      {grad_input({2, 4}, -1, 1, 1), grad_input({3, 4}, -1, 1, 2), grad_input({3}, -1, 1, 3)}))
      << "linear";
  EXPECT_TRUE(gradgradcheck(
      [&](const In& in) { return ferry::sigmoid(ferry::index_select(in[0], 0, idx)) * in[1]; },
      {grad_input({4, 3}, -1, 1, 1), grad_input({4, 3}, -1, 1, 2)}))
      << "index_select";
  EXPECT_TRUE(gradgradcheck(
      [&](const In& in) {
        return ferry::silu(ferry::gather(
                   in[0], 1, ferry::tensor<std::int64_t>({2, 0, 1, 1}).reshape({2, 2}))) *
               in[0].slice(1, 0, 2);
      },
      {grad_input({2, 3}, -1, 1, 1)}))
      << "gather";
  EXPECT_TRUE(gradgradcheck(
      [](const In& in) {
        return F::kl_div(ferry::log_softmax(in[0], 1), ferry::softmax(in[0] * 0.5, 1)) +
               F::binary_cross_entropy_with_logits(in[0], ferry::sigmoid(in[0].t())) +
               F::smooth_l1_loss(in[0] * in[0], in[0].t()) +
               ferry::sum(ferry::softplus(in[0]) * ferry::elu(in[0]));
      },
      {grad_input({4, 4}, -1, 1, 4)}))
      << "losses";
  EXPECT_TRUE(gradgradcheck(
      [&](const In& in) {
        return ferry::relu(F::embedding(idx, in[0])) * F::embedding(idx, in[0]);
      },
      {grad_input({4, 3}, 0.2, 1, 1)}))
      << "embedding";
}

// The CNN layers' kernels, second order: their backward kernels' own derivatives (the
// convolutions', the pools', interpolate's) and the norms' composition in a graph-building
// backward.
TEST(HigherOrderGrad, CnnLayers) {
  const auto square = [](const Tensor& t) { return t * t; };
  const std::vector<std::pair<const char*, std::function<Tensor(const In&)>>> fns = {
      {"conv2d stride 2, padding 1, bias",
       [&](const In& in) { return square(ferry::conv2d(in[0], in[1], in[2], {2}, {1})); }},
      {"conv2d groups 2, dilation 2",
       [&](const In& in) {
         return ferry::tanh(ferry::conv2d(in[0], in[1].slice(1, 0, 1), {}, {1}, {2}, {2}, 2));
       }},
      {"conv1d",
       [&](const In& in) {
         return square(ferry::conv1d(in[0].select(3, 1), in[1].select(3, 0), in[2], {1}, {1}));
       }},
      {"conv_transpose2d",
       [&](const In& in) {
         return square(ferry::conv_transpose2d(in[0], in[1].transpose(0, 1), {}, {2}, {1}, {1}));
       }},
  };
  // x [2, 2, 5, 5], w [2, 2, 3, 3] (groups take one input channel each), b [2].
  for (const auto& [name, fn] : fns)
    EXPECT_TRUE(gradgradcheck(fn, {grad_input({2, 2, 5, 5}, -1, 1, 1),
                                   grad_input({2, 2, 3, 3}, -1, 1, 2), grad_input({2}, -1, 1, 3)}))
        << name;
  const std::vector<std::pair<const char*, ferry_test::GradFn>> layers = {
      {"max_pool2d", [&](const In& in) { return square(ferry::max_pool2d(in[0], {2}, {1})); }},
      {"avg_pool2d",
       [&](const In& in) {
         return square(ferry::avg_pool2d(in[0], {3}, {2}, {1}, /*ceil_mode=*/true, false));
       }},
      {"adaptive_avg_pool2d",
       [&](const In& in) {
         return square(ferry::adaptive_avg_pool2d(in[0], {3, 2}));
       }},
      {"interpolate bilinear",
       [&](const In& in) {
         return square(ferry::interpolate(
             in[0], {.size = {7, 4}, .mode = "bilinear", .align_corners = false}));
       }},
      {"batch_norm, training",
       [&](const In& in) {
         return square(
             F::batch_norm(in[0], {}, {}, in[1].slice(0, 0, 2), in[1].slice(0, 2, 4), true));
       }},
      {"batch_norm, eval",
       [&](const In& in) {
         const Tensor stats = ferry::tensor<double>({0.1, -0.2});
         return square(F::batch_norm(in[0], stats, ferry::abs(stats) + 0.5, in[1].slice(0, 0, 2),
                                     in[1].slice(0, 2, 4), false));
       }},
      {"layer_norm",
       [&](const In& in) {
         return square(
             ferry::layer_norm(in[0], {5}, in[1].slice(0, 0, 5) * 0 + in[1].slice(0, 0, 1), {}));
       }},
      {"group_norm", [&](const In& in) { return square(F::group_norm(in[0], 1)); }},
  };
  for (const auto& [name, fn] : layers)
    EXPECT_TRUE(
        gradgradcheck(fn, {grad_input({2, 2, 4, 5}, -1, 1, 4), grad_input({5}, 0.5, 1.5, 5)}))
        << name;
  // The CPU's kernels ran these layers, forward and backward (not a composition, which any op
  // sequence passes).
  const In x{grad_input({2, 2, 5, 5}, -1, 1, 1).requires_grad_(),
             grad_input({2, 2, 3, 3}, -1, 1, 2).requires_grad_(), grad_input({2}, -1, 1, 3)};
  for (const char* kernel : {"conv2d", "conv_backward_input", "conv_backward_weight"})
    EXPECT_GT(ferry_test::kernel_calls(kernel,
                                       [&] {
                                         const Tensor g = ferry::autograd::grad(
                                             {ferry::sum(fns[0].second(x))}, {x[0]}, {}, false,
                                             false, true)[0];
                                         (void)ferry::autograd::grad({ferry::sum(g * g)}, {x[1]});
                                       }),
              0u)
        << kernel;
}

// The factorizations' closed forms, second order: their saved factors come back with their
// history (qr's and eigh's as views of the node's output, det's and slogdet's LU made again).
TEST(HigherOrderGrad, LinearAlgebra) {
  namespace L = ferry::linalg;
  const auto shifted = [](const Tensor& a, double by) {
    return a + ferry::eye(a.size(-1)).to(ferry::DType::f64) * by;
  };
  const auto spd = [&](const Tensor& a) { return shifted(ferry::matmul(a, a.t()), 4.0); };
  const std::vector<std::pair<const char*, ferry_test::GradFn>> fns = {
      {"det", [&](const In& in) { return L::det(shifted(in[0], 2.0)); }},
      {"slogdet", [&](const In& in) { return L::slogdet(shifted(in[0], 3.0)).second; }},
      {"inv", [&](const In& in) { return L::inv(shifted(in[0], 3.0)); }},
      {"solve", [&](const In& in) { return L::solve(shifted(in[0], 3.0), in[0].slice(1, 0, 2)); }},
      {"cholesky", [&](const In& in) { return L::cholesky(spd(in[0])); }},
      {"qr",
       [&](const In& in) {
         const auto [q, r] = L::qr(shifted(in[0], 2.0));
         return q * r;
       }},
      {"eigh",
       [&](const In& in) {
         const auto [values, vectors] = L::eigh(spd(in[0]));
         return vectors * vectors * values.unsqueeze(0);
       }},
      {"eigvalsh", [&](const In& in) { return L::eigvalsh(spd(in[0])); }},
      {"lu_factor and lu_solve",
       [&](const In& in) {
         const auto [lu, pivots] = L::lu_factor(shifted(in[0], 3.0));
         return L::lu_solve(lu, pivots, in[0]);
       }},
  };
  for (const auto& [name, fn] : fns)
    EXPECT_TRUE(gradgradcheck(fn, {grad_input({4, 4}, -1, 1, 7)})) << name;
}

// The fused attention's backward kernel, second order: its composition in a graph-building
// backward, with a causal mask, an additive mask, and grouped-query heads.
TEST(HigherOrderGrad, ScaledDotProductAttention) {
  const Tensor mask =
      ferry::gt(grad_input({3, 5}, -1, 1, 9), 0.6).to(ferry::DType::f64) * -1e9 + 0.3;
  const std::vector<std::pair<const char*, ferry_test::GradFn>> fns = {
      {"plain", [](const In& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2]); }},
      {"causal, scale 0.7",
       [](const In& in) {
         return F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, 0.7);
       }},
      {"additive mask",
       [&](const In& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], mask); }},
      {"grouped-query heads",
       [](const In& in) {
         return F::scaled_dot_product_attention(in[0], in[1].slice(1, 0, 1), in[2].slice(1, 0, 1),
                                                {}, 0.0, false, std::nullopt, true);
       }},
  };
  // q [1, 2, 3, 4], k and v [1, 2, 5, 4].
  for (const auto& [name, fn] : fns)
    EXPECT_TRUE(
        gradgradcheck(fn, {grad_input({1, 2, 3, 4}, -1, 1, 1), grad_input({1, 2, 5, 4}, -1, 1, 2),
                           grad_input({1, 2, 5, 4}, -1, 1, 3)}))
        << name;
  // The CPU's fused kernel ran these calls (not the composition, which any op sequence passes).
  EXPECT_GT(ferry_test::kernel_calls("scaled_dot_product_attention",
                                     [&] {
                                       (void)fns[0].second({grad_input({1, 2, 3, 4}),
                                                            grad_input({1, 2, 5, 4}),
                                                            grad_input({1, 2, 5, 4})});
                                     }),
            0u);
}

// Kernels with no second derivative: the first gradient (with create_graph) is right, and a
// second backward through it raises UnsupportedError naming the kernel, never a silent zero.
TEST(HigherOrderGrad, KernelsWithoutASecondDerivativeSaySo) {
  ferry::manual_seed(5);
  const Tensor grid = ferry::uniform({1, 3, 3, 2}, -1, 1);
  struct Case {
    const char* kernel;
    std::function<Tensor(const Tensor&)> fn;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"grid_sample_backward",
       [&](const Tensor& x) { return ferry::grid_sample(x * x, grid); },
       {1, 2, 4, 4}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kernel);
    Tensor x = ferry::uniform(c.shape, -1, 1).requires_grad_();
    const Tensor r = ferry::uniform(c.fn(x).sizes(), -1, 1);
    const Tensor plain = ferry::autograd::grad({ferry::sum(c.fn(x) * r)}, {x})[0];
    const Tensor g =
        ferry::autograd::grad({ferry::sum(c.fn(x) * r)}, {x}, {}, false, false, true)[0];
    ferry_test::expect_close(g, plain, 0, 0, "first gradient with create_graph");
    ferry_test::expect_error<ferry::UnsupportedError>(
        [&] { ferry::autograd::grad({ferry::sum(g * g)}, {x}); }, {c.kernel, "create_graph"});
  }
}

TEST(HigherOrderGrad, CheckpointRefusesASecondBackward) {
  Tensor x = ferry::tensor<double>({0.5, -1.0}).requires_grad_();
  const Tensor y = ferry::checkpoint([](const In& in) { return ferry::exp(in[0]) * in[0]; }, {x});
  const Tensor g = ferry::autograd::grad({ferry::sum(y)}, {x})[0];  // first order: fine
  EXPECT_NEAR(values(g)[0], std::exp(0.5) * 1.5, 1e-12);
  const Tensor y2 = ferry::checkpoint([](const In& in) { return ferry::exp(in[0]) * in[0]; }, {x});
  ferry_test::expect_error<ferry::UnsupportedError>(
      [&] {
        const Tensor g2 = ferry::autograd::grad({ferry::sum(y2)}, {x}, {}, false, false, true)[0];
        ferry::autograd::grad({ferry::sum(g2)}, {x});
      },
      {"checkpoint", "create_graph"});
}

}  // namespace
