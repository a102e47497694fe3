// Tensor::register_hook (Note [Gradient hooks] in ferry/autograd.hpp), PyTorch's semantics, each
// gradient against a closed form: a hook on a result sees its whole gradient once (the sum over
// its uses) and may replace what flows on; a leaf's runs before the gradient is added into grad()
// (and before the post-accumulate hooks); hooks chain in registration order; retain_grad() and
// autograd::grad() see the hooked gradient; remove_hook; hooks in a create_graph pass are
// differentiated through; a hook's bad return and a hook on a tensor without grad are typed
// errors. On every device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;

Tensor vec(const ferry::Device& dev, std::vector<float> v) {
  return ferry::tensor(std::move(v)).to(dev);
}

void check_hooks_on_results(const ferry::Device& dev) {
  // y = 3x is used twice (y*y and y): its hook runs once, with d/dy (y^2 + y) = 2y + 1.
  Tensor x = vec(dev, {1, -2}).requires_grad_();
  Tensor y = x * 3.0f;
  std::vector<std::vector<double>> seen;
  y.register_hook([&](const Tensor& g) { seen.push_back(as_double(g)); });
  // The next hook doubles what flows on to x; the one after sees the doubled gradient.
  y.register_hook([](const Tensor& g) { return g * 2.0f; });
  y.register_hook([&](const Tensor& g) { seen.push_back(as_double(g)); });
  y.retain_grad();
  ferry::sum(y * y + y).backward();
  ASSERT_EQ(seen.size(), 2u);
  expect_close(seen[0], {7, -11}, 0, 0);
  expect_close(seen[1], {14, -22}, 0, 0);
  expect_close(as_double(y.grad()), {14, -22}, 0, 0);  // retain_grad keeps the hooked gradient
  expect_close(as_double(x.grad()), {42, -66}, 0, 0);  // 3 * 2 * (2y + 1)

  // A gradient-reversal layer (domain adaptation's): identity forward, -lambda g backward.
  Tensor w = vec(dev, {0.5f, 2}).requires_grad_();
  Tensor h = w * 1.0f;
  h.register_hook([](const Tensor& g) { return -0.25f * g; });
  ferry::sum(h * h).backward();
  expect_close(as_double(w.grad()), {-0.25, -1}, 0, 0);
}
FERRY_TEST_ON_EACH_DEVICE(GradientHooks, OnResultsSeeTheWholeGradientAndReplaceIt,
                          check_hooks_on_results)

void check_hooks_on_leaves(const ferry::Device& dev) {
  // A leaf's hook runs before accumulation: grad() holds its result, and the post-accumulate
  // hook (DistributedDataParallel's) sees that; across two backward passes the hooked
  // gradients add up.
  Tensor x = vec(dev, {1, 2, 3}).requires_grad_();
  int calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    return ferry::clamp(g, -1.0, 1.0);  // per-tensor gradient clipping
  });
  std::vector<double> after;
  ferry::autograd::register_post_accumulate_grad_hook(
      x, [&](const Tensor& g) { after = as_double(g); });
  ferry::sum(x * x).backward();  // 2x = 2, 4, 6, clipped to 1
  EXPECT_EQ(calls, 1);
  expect_close(as_double(x.grad()), {1, 1, 1}, 0, 0);
  expect_close(after, {1, 1, 1}, 0, 0);
  ferry::sum(x * -0.5f).backward();
  expect_close(as_double(x.grad()), {0.5, 0.5, 0.5}, 0, 0);

  // autograd::grad: the hooks of an input and of a result on the way run, and the returned
  // gradient is the hooked one; the leaf's grad() is left alone.
  Tensor a = vec(dev, {2, -1}).requires_grad_();
  Tensor b = a * a;
  b.register_hook([](const Tensor& g) { return g * 10.0f; });
  a.register_hook([](const Tensor& g) { return g + 1.0f; });
  const std::vector<Tensor> ga = ferry::autograd::grad({ferry::sum(b)}, {a});
  expect_close(as_double(ga[0]), {41, -19}, 0, 0);  // 10 * 2a + 1
  EXPECT_FALSE(a.grad().defined());

  // remove_hook: the hook no longer runs; an unknown id does nothing.
  Tensor z = vec(dev, {1}).requires_grad_();
  const std::uint64_t id = z.register_hook([](const Tensor& g) { return g * 100.0f; });
  Tensor r = z * 2.0f;
  const std::uint64_t rid = r.register_hook([](const Tensor& g) { return g * 100.0f; });
  z.remove_hook(id);
  r.remove_hook(rid);
  r.remove_hook(12345);
  ferry::sum(r).backward();
  expect_close(as_double(z.grad()), {2}, 0, 0);
}
FERRY_TEST_ON_EACH_DEVICE(GradientHooks, OnLeavesRunBeforeAccumulation, check_hooks_on_leaves)

// A hook's ops in a create_graph pass are recorded: with y = x^2 and a hook multiplying y's
// gradient by y itself, dL/dx = y * 2x = 2x^3, whose derivative is 6x^2 once the hook is removed;
// left in place, the second pass runs through y's node, and so the hook, again (PyTorch 1.13
// gives the same: 13.5, 24 and 24.75, 72 at x = 1.5, -2). A hook that holds its own tensor keeps
// that tensor's graph alive (a reference cycle) until it is removed, which the test does.
TEST(GradientHooks, CreateGraphDifferentiatesThroughAHook) {
  for (const bool remove : {true, false}) {
    SCOPED_TRACE(remove ? "removed" : "kept");
    Tensor x = vec(ferry::Device::cpu(), {1.5f, -2}).requires_grad_();
    Tensor y = x * x;
    const std::uint64_t id = y.register_hook([y](const Tensor& g) { return g * y; });
    const Tensor gx = ferry::autograd::grad({ferry::sum(y)}, {x}, {}, false, false, true)[0];
    expect_close(as_double(gx), {6.75, -16}, 1e-6, 0);
    if (remove) y.remove_hook(id);
    ferry::sum(gx).backward();
    expect_close(as_double(x.grad()),
                 remove ? std::vector<double>{13.5, 24} : std::vector<double>{24.75, 72}, 1e-6, 0);
    y.remove_hook(id);  // (again, where removed already: nothing)
  }
}

// A hook registered on a result that is then written in place stays with the gradient of the
// value it was registered on (its grad_fn then), as PyTorch's; remove_hook still finds it.
TEST(GradientHooks, InPlaceWritesKeepTheHookOnTheValueBefore) {
  Tensor x = vec(ferry::Device::cpu(), {1, 2}).requires_grad_();
  Tensor y = x * 2.0f;
  std::vector<double> seen;
  const std::uint64_t id = y.register_hook([&](const Tensor& g) { seen = as_double(g); });
  ferry::mul_(y, 3.0f);  // y := 3 (2x); the hook's value is 2x, whose gradient is 3
  ferry::sum(y).backward(Tensor(), true);
  expect_close(seen, {3, 3}, 0, 0);
  seen.clear();
  y.remove_hook(id);
  ferry::sum(y).backward();
  EXPECT_TRUE(seen.empty());
}

TEST(GradientHooks, BadHooksAreTypedErrors) {
  using ferry_test::expect_error;
  const Tensor plain = ferry::ones({2});
  expect_error<ferry::Error>([&] { plain.register_hook([](const Tensor& g) { return g; }); },
                             {"cannot register a hook on a tensor that doesn't require gradient"});
  const auto run = [](Tensor::GradHook hook) {
    Tensor x = ferry::ones({2}).requires_grad_();
    Tensor y = x * 2.0f;
    y.register_hook(std::move(hook));
    ferry::sum(y).backward();
  };
  expect_error<ferry::ShapeError>([&] { run([](const Tensor&) { return ferry::ones({3}); }); },
                                  {"register_hook", "shape [3]", "has shape [2]"});
  expect_error<ferry::DTypeError>(
      [&] { run([](const Tensor& g) { return g.to(ferry::DType::f64); }); },
      {"register_hook", "dtype f64"});
  // A leaf's hook too; nothing was added into its grad().
  Tensor x = ferry::ones({2}).requires_grad_();
  x.register_hook([](const Tensor&) { return ferry::ones({2, 1}); });
  expect_error<ferry::ShapeError>([&] { ferry::sum(x).backward(); }, {"a leaf's gradient"});
  EXPECT_FALSE(x.grad().defined());
}

}  // namespace
