// Autograd's machinery (Note [Autograd] in ferry/autograd.hpp): leaves,
// accumulation, retain_graph, detach, grad mode, in-place safety, the engine's
// order and autograd::grad. Each gradient is checked against a closed form;
// the formulas of every op are checked by finite differences in
// test_gradcheck.cpp.
#include <gtest/gtest.h>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;

Tensor vec(std::vector<float> v, ferry::Shape shape = {}) {
  return ferry::tensor(std::move(v), shape);
}

TEST(Autograd, SquareSumGivesTwoX) {
  Tensor x = vec({1, -2, 3}).requires_grad_();
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  Tensor loss = ferry::sum(x * x);
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_FALSE(loss.is_leaf());
  EXPECT_EQ(loss.grad_fn_name(), "sumBackward");
  loss.backward();
  expect_close(as_double(x.grad()), {2, -4, 6}, 0, 0);
}

TEST(Autograd, GradientsAccumulateUntilCleared) {
  Tensor x = vec({1, 2}).requires_grad_();
  ferry::sum(x * 3.0f).backward();
  ferry::sum(x * 3.0f).backward();
  expect_close(as_double(x.grad()), {6, 6}, 0, 0);
  Tensor g = x.grad();
  ferry::sum(x).backward();  // later gradients add in place: the same tensor
  expect_close(as_double(g), {7, 7}, 0, 0);
  x.set_grad({});
  EXPECT_FALSE(x.grad().defined());
  ferry::sum(x).backward();
  expect_close(as_double(x.grad()), {1, 1}, 0, 0);
}

TEST(Autograd, AUseTwiceAddsBothPaths) {
  Tensor x = vec({2}).requires_grad_();
  Tensor y = x * x * x + x * 4.0f;  // dy/dx = 3x^2 + 4 = 16
  y.backward();
  expect_close(as_double(x.grad()), {16}, 0, 0);
}

TEST(Autograd, BroadcastGradientsAreSummedToTheInputShape) {
  Tensor a = vec({1, 2, 3}, {3, 1}).requires_grad_();
  Tensor b = vec({10, 20, 30, 40}, {4}).requires_grad_();
  ferry::sum(a * b).backward();
  expect_close(as_double(a.grad()), {100, 100, 100}, 0, 0);  // Σ b
  expect_close(as_double(b.grad()), {6, 6, 6, 6}, 0, 0);     // Σ a
  EXPECT_EQ(a.grad().sizes(), (ferry::Shape{3, 1}));
  EXPECT_EQ(b.grad().sizes(), (ferry::Shape{4}));
}

TEST(Autograd, ScalarOperandsAndPromotion) {
  Tensor x = vec({1, 4}).requires_grad_();
  Tensor h = x.to(ferry::DType::f16);  // the gradient comes back as f32
  ferry::sum((2.0f / h) + (h - 1) * 3).to(ferry::DType::f32).backward();
  EXPECT_EQ(x.grad().dtype(), ferry::DType::f32);
  expect_close(as_double(x.grad()), {-2 + 3, -2.0 / 16 + 3}, 1e-3, 0);
}

TEST(Autograd, NonScalarNeedsAGradient) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0f;
  EXPECT_FERRY_ERROR(y.backward(), ferry::Error, "3 elements", "ones_like");
  EXPECT_FERRY_ERROR(y.backward(vec({1, 1})), ferry::ShapeError, "shape [2]", "[3]");
  y.backward(vec({1, 10, 100}));
  expect_close(as_double(x.grad()), {2, 20, 200}, 0, 0);
}

TEST(Autograd, BackwardTwiceNeedsRetainGraph) {
  Tensor x = vec({3}).requires_grad_();
  Tensor y = ferry::exp(x);
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  expect_close(as_double(x.grad()), {2 * std::exp(3.0)}, 1e-6, 0);
  EXPECT_FERRY_ERROR(y.backward(), ferry::Error, "second time", "retain_graph");
}

TEST(Autograd, DetachAndNoGradStopHistory) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.storage(), x.storage());  // same memory
  {
    ferry::NoGradGuard no_grad;
    EXPECT_FALSE(ferry::is_grad_enabled());
    Tensor y = x * 2.0f;
    EXPECT_FALSE(y.requires_grad());
    {
      ferry::EnableGradGuard grad;
      EXPECT_TRUE((x * 2.0f).requires_grad());
    }
  }
  EXPECT_TRUE(ferry::is_grad_enabled());
  ferry::sum(x * d).backward();  // d is a constant
  expect_close(as_double(x.grad()), {1, 2}, 0, 0);
  EXPECT_FERRY_ERROR(ferry::sum(d).backward(), ferry::Error, "does not require grad");
}

TEST(Autograd, OnlyFloatingTensorsRequireGrad) {
  Tensor i = ferry::tensor(std::vector<std::int32_t>{1, 2});
  EXPECT_FERRY_ERROR(i.requires_grad_(), ferry::DTypeError, "i32", "floating");
  Tensor x = vec({1.5f, -2.5f}).requires_grad_();
  EXPECT_FALSE(x.to(ferry::DType::i32).requires_grad());
  EXPECT_FALSE(ferry::gt(x, 0).requires_grad());
  EXPECT_FALSE(ferry::argmax(x).requires_grad());
  Tensor y = x * 2.0f;
  EXPECT_FERRY_ERROR(y.requires_grad_(false), ferry::Error, "not a leaf", "detach");
  x.requires_grad_(false);
  EXPECT_FALSE(x.requires_grad());
}

TEST(Autograd, InPlaceWritesAreRefusedOnLeavesAndRecordedElsewhere) {
  Tensor w = vec({1, 2}).requires_grad_();
  EXPECT_FERRY_ERROR(w.fill_(0), ferry::Error, "fill_", "NoGradGuard");
  EXPECT_FERRY_ERROR(w.narrow(0, 0, 1).copy_(vec({3})), ferry::Error, "copy_", "view of a leaf");
  // A copy from a tensor that requires grad is recorded, as in PyTorch: the
  // destination takes the copy's place in the graph.
  Tensor plain = vec({0, 0});
  plain.copy_(w * 2.0f);
  EXPECT_TRUE(plain.requires_grad());
  ferry::sum(plain * vec({3, 4})).backward();
  expect_close(as_double(w.grad()), {6, 8}, 0, 0);
  w.set_grad(Tensor());
  {
    ferry::NoGradGuard no_grad;  // how optimizers update parameters
    w.fill_(5);
  }
  expect_close(as_double(w), {5, 5}, 0, 0);
}

TEST(Autograd, ModifyingASavedTensorIsCaught) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y = ferry::exp(x);  // saves its output
  Tensor loss = ferry::sum(y);
  {
    ferry::NoGradGuard no_grad;
    y.fill_(0);
  }
  // (Asserted once: a failed backward has already freed the part of the graph it ran.)
  ferry_test::expect_error<ferry::Error>([&] { loss.backward(); },
                                         {"modified in place", "clone()"});
  // The same through a view: one storage, one version counter.
  Tensor p = vec({1, 2, 3, 4}).requires_grad_();
  Tensor q = p * 1.0f;
  Tensor r = ferry::sum(q * q);  // saves q
  {
    ferry::NoGradGuard no_grad;
    q.narrow(0, 3, 1).fill_(7);
  }
  ferry_test::expect_error<ferry::Error>([&] { r.backward(); }, {"modified in place"});
}

TEST(Autograd, RetainGradKeepsAnIntermediateGradient) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 3.0f;
  h.retain_grad();
  ferry::sum(h * h).backward();
  expect_close(as_double(h.grad()), {6, 12}, 0, 0);  // 2h
  expect_close(as_double(x.grad()), {18, 36}, 0, 0);
  Tensor k = x * 2.0f;  // not retained
  ferry::sum(k).backward();
  EXPECT_FALSE(k.grad().defined());
}

TEST(Autograd, GradReturnsWithoutAccumulating) {
  Tensor a = vec({1, 2}).requires_grad_();
  Tensor b = vec({3, 4}).requires_grad_();
  Tensor h = a * b;
  Tensor y = ferry::sum(h * h);
  std::vector<Tensor> g = ferry::autograd::grad({y}, {a, h}, {}, /*retain_graph=*/true);
  expect_close(as_double(g[0]), {2 * 3 * 3, 2 * 2 * 4 * 4}, 0, 0);  // 2 a b^2
  expect_close(as_double(g[1]), {6, 16}, 0, 0);                     // 2 h
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  Tensor c = vec({1}).requires_grad_();
  EXPECT_FERRY_ERROR(ferry::autograd::grad({y}, {c}, {}, true), ferry::Error, "do not depend",
                     "allow_unused");
  EXPECT_FALSE(ferry::autograd::grad({y}, {c}, {}, true, /*allow_unused=*/true)[0].defined());
}

TEST(Autograd, BackwardFromSeveralRoots) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y = x * 2.0f;
  Tensor z = ferry::sum(y * y);  // z depends on y, which is also a root
  ferry::autograd::backward({y, z}, {vec({1, 1}), Tensor()});
  // dz/dx = 8x, plus dy/dx · 1 = 2
  expect_close(as_double(x.grad()), {10, 18}, 0, 0);
}

TEST(Autograd, MatmulMatchesTheClosedForm) {
  // L = Σ (A B) ∘ R  =>  dA = R Bᵀ, dB = Aᵀ R.
  Tensor A = ferry_test::sample_tensor({2, 3}, -1, 1, 1).requires_grad_();
  Tensor B = ferry_test::sample_tensor({3, 4}, -1, 1, 2).requires_grad_();
  Tensor R = ferry_test::sample_tensor({2, 4}, -1, 1, 3);
  ferry::sum(ferry::matmul(A, B) * R).backward();
  auto a = as_double(A), b = as_double(B), r = as_double(R);
  std::vector<double> da(6, 0), db(12, 0);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 4; ++j) {
        da[std::size_t(i * 3 + k)] += r[std::size_t(i * 4 + j)] * b[std::size_t(k * 4 + j)];
        db[std::size_t(k * 4 + j)] += a[std::size_t(i * 3 + k)] * r[std::size_t(i * 4 + j)];
      }
  expect_close(as_double(A.grad()), da, 1e-5, 1e-6);
  expect_close(as_double(B.grad()), db, 1e-5, 1e-6);
}

TEST(Autograd, LinearWeightGradientIsContiguous) {
  // Note [Matmul gradient layout]: x · wᵀ gives w a contiguous gradient.
  Tensor w = ferry_test::sample_tensor({5, 3}, -1, 1, 1).requires_grad_();
  Tensor x = ferry_test::sample_tensor({4, 3}, -1, 1, 2);
  ferry::sum(ferry::matmul(x, w.t())).backward();
  EXPECT_TRUE(w.grad().is_contiguous());
  std::vector<double> want(15);
  auto xv = as_double(x);
  for (int o = 0; o < 5; ++o)
    for (int i = 0; i < 3; ++i)
      for (int n = 0; n < 4; ++n) want[std::size_t(o * 3 + i)] += xv[std::size_t(n * 3 + i)];
  expect_close(as_double(w.grad()), want, 1e-6, 1e-6);
}

TEST(Autograd, ViewsRouteGradientsBack) {
  Tensor x = ferry_test::sample_tensor({2, 3}, -1, 1).requires_grad_();
  Tensor y = ferry::cat({x.t().reshape({6}), x.select(1, 2) * 10.0f, x.narrow(0, 1, 1).flatten()});
  ferry::sum(y * ferry::arange(11)).backward();
  // y = [x00 x10 x01 x11 x02 x12 | 10 x02, 10 x12 | x10 x11 x12] weighted by 0..10
  expect_close(as_double(x.grad()), {0, 2, 4 + 60, 1 + 8, 3 + 9, 5 + 70 + 10}, 0, 0);
}

// Note [Gradients of parts]: the parts' gradients add into one buffer of the input's size,
// which the engine makes and owns. Overlapping parts add up; a part meeting a gradient that a
// formula handed over as it is (here the caller's own, through reshape) adds into a copy,
// leaving the caller's tensor alone, in either order; grad() and a retained intermediate
// gradient see the same sums; on every device.
TEST(Autograd, PartsOfATensorAddIntoOneBuffer) {
  for (const ferry::Device& dev : ferry_test::devices()) {
    SCOPED_TRACE(dev.str());
    Tensor x = vec({1, 2, 3, 4, 5}).to(dev).requires_grad_();
    const std::vector<Tensor> parts = ferry::chunk(x, 3);  // [0, 2), [2, 4), [4, 5)
    Tensor loss = ferry::sum(parts[0] * 2.0f) + ferry::sum(parts[2] * 3.0f) +
                  ferry::sum(x.narrow(0, 1, 3)) + ferry::sum(x.select(0, 3) * 10.0f);
    loss.backward();
    expect_close(as_double(x.grad()), {2, 3, 1, 11, 3}, 0, 0);

    for (const bool part_first : {true, false}) {
      SCOPED_TRACE(part_first ? "part first" : "whole first");
      Tensor y = vec({1, 2, 3, 4}).to(dev).requires_grad_();
      Tensor mid = y * 1.0f;
      mid.retain_grad();
      // The engine runs later nodes first: the view made last hands its gradient over first.
      Tensor whole, part;
      if (part_first) {
        whole = mid.reshape({2, 2});
        part = mid.narrow(0, 1, 2);
      } else {
        part = mid.narrow(0, 1, 2);
        whole = mid.reshape({2, 2});
      }
      const Tensor g_whole = vec({1, 1, 1, 1}, {2, 2}).to(dev), g_part = vec({5, 7}).to(dev);
      ferry::autograd::backward({whole, part}, {g_whole, g_part});
      expect_close(as_double(y.grad()), {1, 6, 8, 1}, 0, 0);
      expect_close(as_double(mid.grad()), {1, 6, 8, 1}, 0, 0);
      expect_close(as_double(g_whole), {1, 1, 1, 1}, 0, 0);  // the caller's, untouched
    }

    Tensor z = vec({1, 2, 3}).to(dev).requires_grad_();
    Tensor s = ferry::sum(z.narrow(0, 0, 2) * 4.0f) + ferry::sum(z.narrow(0, 1, 2));
    const std::vector<Tensor> g = ferry::autograd::grad({s}, {z});
    expect_close(as_double(g[0]), {4, 5, 1}, 0, 0);
    EXPECT_FALSE(z.grad().defined());
  }
}

// A view written in place takes its gradient as a part of its base's, cut at the view's
// offset and strides within a contiguous tensor of the base's shape (Note [In-place through a
// view]): the base's buffer must be that even when a transposed gradient reached it first.
TEST(Autograd, AViewWrittenInPlaceTakesItsPartOfATransposedGradient) {
  Tensor x = vec({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor base = x * 1.0f;
  Tensor v = base.narrow(0, 0, 1);
  v.mul_(2.0f);  // base is now CopySlices; v's node cuts its part out of base's gradient
  const Tensor wv = vec({1, 10, 100}, {1, 3});
  Tensor a = ferry::sum(v * wv);
  // Made last, so run first: base's gradient starts as a transposed view of [3, 2] ones.
  Tensor b = ferry::sum(base.t() * vec({1, 1, 1, 1, 1, 1}, {3, 2}));
  (a + b).backward();
  // d/dx: row 0 through v (x 2 from the write) and through base (x 2, the write); row 1: 1.
  expect_close(as_double(x.grad()), {2 * (1 + 1), 2 * (10 + 1), 2 * (100 + 1), 1, 1, 1}, 0, 0);

  // The same in 4-D, where the first gradient is channels-last: permute's, undone.
  Tensor x4 = ferry::arange(8).to(ferry::DType::f32).reshape({1, 2, 2, 2}).requires_grad_();
  Tensor base4 = x4 * 1.0f;
  Tensor v4 = base4.narrow(1, 0, 1);  // channel 0
  v4.mul_(2.0f);
  Tensor a4 = ferry::sum(v4 * vec({1, 10, 100, 1000}, {1, 1, 2, 2}));
  Tensor b4 = ferry::sum(base4.permute({0, 2, 3, 1}) * ferry::ones({1, 2, 2, 2}));
  (a4 + b4).backward();
  expect_close(as_double(x4.grad()), {4, 22, 202, 2002, 1, 1, 1, 1}, 0, 0);
}

TEST(Autograd, ADeepChainDoesNotOverflowTheStack) {
  Tensor x = vec({1}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y + 1.0f;
  y.backward();
  expect_close(as_double(x.grad()), {1}, 0, 0);
}

TEST(Autograd, GradientsStayOnTheTensorsDevice) {
  if (!ferry::is_available("vulkan"))
    GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices();
  ferry::Device dev("vulkan:0");
  Tensor w = ferry_test::sample_tensor({3, 4}, -1, 1).to(dev).requires_grad_();
  Tensor x = ferry_test::sample_tensor({5, 3}, -1, 1).to(dev);
  Tensor loss = ferry::mean(ferry::softmax(ferry::matmul(x, w), 1) * ferry::matmul(x, w));
  std::vector<std::string> lines;
  static std::vector<std::string>* sink = nullptr;
  sink = &lines;
  ferry::set_log_sink([](ferry::LogLevel, std::string_view m) { sink->emplace_back(m); });
  const ferry::LogLevel saved = ferry::log_level();
  ferry::set_log_level(ferry::LogLevel::debug);
  loss.backward();
  ferry::set_log_level(saved);
  ferry::set_log_sink(nullptr);
  ASSERT_EQ(w.grad().device(), dev);
  for (const std::string& l : lines) EXPECT_EQ(l.find("download"), std::string::npos) << l;
  // The same on the CPU.
  Tensor wc = w.detach().cpu().requires_grad_();
  Tensor xc = x.cpu();
  ferry::mean(ferry::softmax(ferry::matmul(xc, wc), 1) * ferry::matmul(xc, wc)).backward();
  expect_close(as_double(w.grad()), as_double(wc.grad()), 1e-5, 1e-6);
}

}  // namespace
