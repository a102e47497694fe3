// Memory formats (ferry/memory_format.hpp, Note [Memory formats]): PyTorch's strides and
// predicates for channels_last and channels_last_3d, its errors, and the ops that keep a
// channels-last input's layout (element-wise ops and casts, moves between devices,
// convolution, batch_norm, pooling, interpolate) giving the values and gradients of the same
// ops on contiguous inputs, on every device; Module::to(MemoryFormat), and optimizers' fused
// updates of a channels-last model.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/backend.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/optim.hpp"
#include "ferry/profiler.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::DType;
using ferry::MemoryFormat;
using ferry::Shape;
using ferry::Tensor;

using ferry_test::devices;

TEST(MemoryFormat, StridesAndPredicatesArePyTorchs) {
  const Tensor x = ferry::arange(120).reshape({2, 3, 4, 5});
  const Tensor cl = x.contiguous(MemoryFormat::channels_last);
  EXPECT_EQ(cl.sizes(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(cl.strides(), (Shape{60, 1, 15, 3}));  // torch: x.to(memory_format=channels_last)
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::channels_last));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_FALSE(x.is_contiguous(MemoryFormat::channels_last));
  EXPECT_EQ(cl.suggest_memory_format(), MemoryFormat::channels_last);
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::contiguous);
  EXPECT_EQ(cl.to_vector<float>(), x.to_vector<float>());
  EXPECT_TRUE(cl.contiguous(MemoryFormat::channels_last).is_same(cl));
  EXPECT_EQ(cl.contiguous().strides(), (Shape{60, 20, 5, 1}));

  const Tensor v = ferry::arange(240).reshape({2, 3, 2, 4, 5});
  const Tensor cl3 = v.contiguous(MemoryFormat::channels_last_3d);
  EXPECT_EQ(cl3.strides(), (Shape{120, 1, 60, 15, 3}));
  EXPECT_TRUE(cl3.is_contiguous(MemoryFormat::channels_last_3d));
  EXPECT_FALSE(cl3.is_contiguous(MemoryFormat::channels_last));  // a 5-D tensor is not NHWC
  EXPECT_EQ(cl3.suggest_memory_format(), MemoryFormat::channels_last_3d);
  EXPECT_EQ(cl3.to_vector<float>(), v.to_vector<float>());

  // Size-1 dims have any stride: one channel is both layouts at once, and stays contiguous.
  const Tensor one = ferry::ones({2, 1, 4, 5});
  EXPECT_TRUE(one.is_contiguous(MemoryFormat::channels_last));
  EXPECT_EQ(one.suggest_memory_format(), MemoryFormat::contiguous);

  EXPECT_FERRY_ERROR(ferry::ones({2, 3, 4}).contiguous(MemoryFormat::channels_last),
                     ferry::ShapeError, "channels_last", "4-D", "[2, 3, 4]");
  EXPECT_FERRY_ERROR(x.contiguous(MemoryFormat::channels_last_3d), ferry::ShapeError,
                     "channels_last_3d", "5-D", "[2, 3, 4, 5]");
  EXPECT_FERRY_ERROR(x.contiguous(MemoryFormat::preserve), ferry::ValueError, "preserve");
  EXPECT_FALSE(ferry::ones({3, 4}).is_contiguous(MemoryFormat::channels_last));

  // A kernel's view asks the same rule (ferry::is_dense_in).
  for (const Tensor& t : {x, cl, v, cl3, one, x.transpose(2, 3), cl.narrow(3, 0, 2),
                          ferry::ones({0, 3, 4, 5}), ferry::ones({3, 4})})
    for (MemoryFormat f :
         {MemoryFormat::contiguous, MemoryFormat::channels_last, MemoryFormat::channels_last_3d})
      EXPECT_EQ(ferry::tensor_arg(t).is_contiguous(f), t.is_contiguous(f))
          << ferry::shape_str(t.strides()) << " " << ferry::memory_format_name(f);
  EXPECT_TRUE(ferry::ones({0, 3, 4, 5}).is_contiguous(MemoryFormat::channels_last));
}

// f(channels-last x) is channels-last and equals f(x); so do the gradients.
void expect_keeps_layout(const ferry::Device& dev, const std::string& what,
                         const std::function<Tensor(const Tensor&)>& f, const Shape& shape,
                         double tol = 1e-5, bool check_grad = true) {
  const std::string where = what + " on " + dev.str();
  const Tensor base = ferry_test::sample_tensor(shape, -2, 2, 7).to(dev);
  const Tensor x = base.detach().requires_grad_();
  const Tensor x_cl = base.contiguous(MemoryFormat::channels_last).detach().requires_grad_();
  ASSERT_TRUE(x_cl.is_contiguous(MemoryFormat::channels_last)) << where;
  const Tensor y = f(x), y_cl = f(x_cl);
  EXPECT_TRUE(y_cl.is_contiguous(MemoryFormat::channels_last))
      << where << ": strides " << ferry::shape_str(y_cl.strides());
  ferry_test::expect_close(ferry_test::as_double(y_cl.cpu()), ferry_test::as_double(y.cpu()), tol,
                           tol, where);
  if (!check_grad) return;
  const Tensor g = ferry_test::sample_tensor(y.sizes(), -1, 1, 3).to(dev);
  const Tensor gx = ferry::autograd::grad({y}, {x}, {g})[0];
  const Tensor gx_cl = ferry::autograd::grad({y_cl}, {x_cl}, {g})[0];
  ferry_test::expect_close(ferry_test::as_double(gx_cl.cpu()), ferry_test::as_double(gx.cpu()), tol,
                           tol, where + " (gradient)");
}

TEST(MemoryFormat, ElementWiseOpsAndCastsKeepChannelsLast) {
  const Shape s{2, 3, 5, 4};
  for (const ferry::Device& dev : devices()) {
    const Tensor bias = ferry_test::sample_tensor({1, 3, 1, 1}, -1, 1, 2).to(dev);
    const Tensor other = ferry_test::sample_tensor(s, -1, 1, 5).to(dev);
    expect_keeps_layout(
        dev, "relu", [](const Tensor& x) { return ferry::relu(x); }, s);
    expect_keeps_layout(
        dev, "exp", [](const Tensor& x) { return ferry::exp(x); }, s, 1e-5);
    expect_keeps_layout(
        dev, "x * 2 + 1", [](const Tensor& x) { return x * 2.0 + 1.0; }, s);
    expect_keeps_layout(
        dev, "x + bias", [&](const Tensor& x) { return x + bias; }, s);
    expect_keeps_layout(
        dev, "x * contiguous", [&](const Tensor& x) { return x * other; }, s);
    expect_keeps_layout(
        dev, "clone", [](const Tensor& x) { return x.clone(); }, s);
    expect_keeps_layout(
        dev, "cast to f16 and back",
        [](const Tensor& x) { return x.to(DType::f16).to(DType::f32); }, s, 1e-3);
    // The first operand of the result's shape decides, as in PyTorch.
    const Tensor cl = other.contiguous(MemoryFormat::channels_last);
    EXPECT_TRUE((other + cl).is_contiguous()) << dev.str();
    EXPECT_TRUE((cl + other).is_contiguous(MemoryFormat::channels_last)) << dev.str();
    EXPECT_TRUE((bias + cl).is_contiguous(MemoryFormat::channels_last)) << dev.str();
  }
}

TEST(MemoryFormat, MovesBetweenDevicesKeepChannelsLast) {
  const Tensor x = ferry::arange(120).reshape({2, 3, 4, 5}).contiguous(MemoryFormat::channels_last);
  for (const ferry::Device& dev : devices()) {
    const Tensor there = x.to(dev);
    EXPECT_TRUE(there.is_contiguous(MemoryFormat::channels_last)) << dev.str();
    const Tensor back = there.cpu();
    EXPECT_EQ(back.strides(), x.strides()) << dev.str();
    EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>()) << dev.str();
  }
}

TEST(MemoryFormat, CnnLayersKeepChannelsLast) {
  namespace F = ferry::nn::functional;
  const Shape s{2, 4, 9, 8};
  for (const ferry::Device& dev : devices()) {
    const Tensor w = ferry_test::sample_tensor({6, 4, 3, 3}, -0.5, 0.5, 1).to(dev);
    const Tensor dw = ferry_test::sample_tensor({8, 1, 3, 3}, -0.5, 0.5, 2).to(dev);
    const Tensor b = ferry_test::sample_tensor({6}, -0.5, 0.5, 3).to(dev);
    const Tensor gamma = ferry_test::sample_tensor({4}, 0.5, 1.5, 4).to(dev);
    const Tensor beta = ferry_test::sample_tensor({4}, -0.5, 0.5, 5).to(dev);
    expect_keeps_layout(
        dev, "conv2d",
        [&](const Tensor& x) {
          return ferry::conv2d(x, w, b, {2, 1}, 1);
        },
        s, 1e-4);
    expect_keeps_layout(
        dev, "depthwise conv2d",
        [&](const Tensor& x) { return ferry::conv2d(x, dw, {}, {1}, 1, {1}, 4); }, s, 1e-4);
    expect_keeps_layout(
        dev, "conv_transpose2d",
        [&](const Tensor& x) { return ferry::conv_transpose2d(x, w, {}, {2}, {1}); },
        Shape{2, 6, 5, 4}, 1e-4);
    expect_keeps_layout(
        dev, "batch_norm (training)",
        [&](const Tensor& x) { return F::batch_norm(x, {}, {}, gamma, beta, true); }, s, 1e-4);
    expect_keeps_layout(
        dev, "max_pool2d", [](const Tensor& x) { return ferry::max_pool2d(x, {3}, {2}, {1}); }, s);
    expect_keeps_layout(
        dev, "avg_pool2d", [](const Tensor& x) { return ferry::avg_pool2d(x, {2}); }, s);
    expect_keeps_layout(
        dev, "adaptive_avg_pool2d",
        [](const Tensor& x) {
          return ferry::adaptive_avg_pool2d(x, {3, 2});
        },
        s);
    expect_keeps_layout(
        dev, "interpolate (bilinear)",
        [](const Tensor& x) {
          return ferry::interpolate(x, {.size = {12, 7}, .mode = "bilinear"});
        },
        s, 1e-5);
    // A channels-last weight alone makes the output channels-last too (PyTorch's rule).
    const Tensor x = ferry_test::sample_tensor(s, -1, 1, 6).to(dev);
    const Tensor y = ferry::conv2d(x, w.contiguous(MemoryFormat::channels_last), b);
    EXPECT_TRUE(y.is_contiguous(MemoryFormat::channels_last)) << dev.str();
    ferry_test::expect_close(ferry_test::as_double(y.cpu()),
                             ferry_test::as_double(ferry::conv2d(x, w, b).cpu()), 1e-4, 1e-4,
                             "conv2d with a channels-last weight on " + dev.str());
  }
}

// A device whose convolution kernels take channels-last activations (the CPU's:
// DeviceCapabilities::channels_last_cnn) computes a channels-last convolution in that layout,
// as PyTorch's oneDNN path does: the profile shows no layout copy, each convolution kernel
// says it ran channels-last, and the values and every gradient are the contiguous
// convolution's, the weight's gradient in the weight's layout (contiguous, or channels-last as
// in a converted model). f32 runs oneDNN where it loads (ferry's im2col path under
// FERRY_ONEDNN=0, the sanitized variant); f64 runs the im2col path, which transposes into its
// own order.
TEST(MemoryFormat, ConvolutionsRunChannelsLastWithoutLayoutCopies) {
  namespace prof = ferry::profiler;
  ASSERT_TRUE(ferry::device_impl(ferry::Device::cpu()).capabilities().channels_last_cnn);
  struct Case {
    std::string what;
    Shape x, w;
    std::int64_t stride, padding, groups;
  };
  const std::vector<Case> cases{
      {"3x3", {2, 6, 9, 8}, {4, 6, 3, 3}, 1, 1, 1},
      {"3x3 stride 2, 2 groups", {3, 6, 9, 7}, {4, 3, 3, 3}, 2, 1, 2},
      {"1x1", {2, 6, 5, 4}, {8, 6, 1, 1}, 1, 0, 1},
      {"1x1 stride 2", {2, 6, 5, 4}, {8, 6, 1, 1}, 2, 0, 1},
      {"3x3x3, channels_last_3d", {2, 4, 5, 4, 6}, {3, 4, 3, 3, 3}, 1, 1, 1},
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases)
      for (const bool weight_cl : {false, true}) {
        const std::string where = c.what + ", " + std::string(ferry::dtype_name(dt)) +
                                  (weight_cl ? ", channels-last weight" : "");
        const bool two_d = c.x.size() == 4;
        const MemoryFormat f = two_d ? MemoryFormat::channels_last : MemoryFormat::channels_last_3d;
        const Tensor base = ferry_test::sample_tensor(c.x, -1, 1, 5).to(dt);
        const Tensor w = ferry_test::sample_tensor(c.w, -0.5, 0.5, 6).to(dt).requires_grad_();
        const Tensor b = ferry_test::sample_tensor({c.w[0]}, -0.5, 0.5, 7).to(dt).requires_grad_();
        const auto conv = [&](const Tensor& x, const Tensor& w) {
          return two_d ? ferry::conv2d(x, w, b, {c.stride}, c.padding, {1}, c.groups)
                       : ferry::conv3d(x, w, b, {c.stride}, c.padding, {1}, c.groups);
        };
        const Tensor x = base.detach().requires_grad_();
        const Tensor y = conv(x, w);
        const Tensor g = ferry_test::sample_tensor(y.sizes(), -1, 1, 8).to(dt);
        const auto grads = ferry::autograd::grad({y}, {x, w, b}, {g});

        const Tensor x_cl = base.contiguous(f).detach().requires_grad_();
        const Tensor g_cl = g.contiguous(f);
        const Tensor w2 = weight_cl ? w.detach().contiguous(f).requires_grad_() : w;
        prof::Scope scope;
        const Tensor y_cl = conv(x_cl, w2);
        const auto grads_cl = ferry::autograd::grad({y_cl}, {x_cl, w2, b}, {g_cl});
        const prof::Profile& p = scope.stop();
        EXPECT_TRUE(y_cl.is_contiguous(f)) << where;
        EXPECT_TRUE(grads_cl[0].is_contiguous(f)) << where;
        EXPECT_TRUE(grads_cl[1].is_contiguous(weight_cl ? f : MemoryFormat::contiguous)) << where;
        int convs = 0;
        for (const prof::Event& e : p.events()) {
          if (e.kind != prof::EventKind::op) continue;
          EXPECT_NE(e.name, "copy") << where << ": a layout copy of " << e.inputs;
          if (e.name.rfind("conv", 0) != 0) continue;
          ++convs;
          EXPECT_NE(e.detail.find("channels-last"), std::string::npos)
              << where << ": " << e.name << " ran " << e.detail;
        }
        EXPECT_EQ(convs, 3) << where << ": the forward and both gradients' kernels";
        const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
        ferry_test::expect_close(ferry_test::as_double(y_cl), ferry_test::as_double(y), tol, tol,
                                 where);
        const char* names[] = {"input", "weight", "bias"};
        for (std::size_t i = 0; i < 3; ++i)
          ferry_test::expect_close(ferry_test::as_double(grads_cl[i]),
                                   ferry_test::as_double(grads[i]), tol, tol,
                                   where + ": the " + names[i] + "'s gradient");
      }
}

// The CPU's batch_norm, max_pool2d, avg_pool2d and interpolate kernels
// (DeviceCapabilities::channels_last_cnn)
// compute a channels-last input in that layout: the profile of the forward and the backward
// shows no layout copy, the results and the input's gradient are channels-last, and they are
// the composition's (ferry::debug::CompositesOnly, on contiguous inputs): batch_norm's values,
// gradients and running statistics in training and eval, max pooling's values, indices (ties
// and a NaN included: the first maximum, a NaN taking over) and gradient, average pooling's
// values and gradient (padding counted or not, a divisor_override), interpolate's values and
// gradient (bilinear, bicubic). f32 and f64; 4-D and
// (batch_norm) 5-D. Over 2 threads the results are those of 1 thread, bit for bit (batch_norm's
// sums go over blocks of rows fixed by the channels alone).
TEST(MemoryFormat, BatchNormAndPoolsRunChannelsLastWithoutLayoutCopies) {
  namespace prof = ferry::profiler;
  namespace F = ferry::nn::functional;
  ASSERT_TRUE(ferry::device_impl(ferry::Device::cpu()).capabilities().channels_last_cnn);
  struct Case {
    std::string what;
    Shape x;
    // The op on x; r holds what else it returns (running statistics, indices) to compare.
    std::function<Tensor(const Tensor& x, std::vector<Tensor>& r)> f;
  };
  const auto bn = [](bool training) {
    return [training](const Tensor& x, std::vector<Tensor>& r) {
      const std::int64_t c = x.size(1);
      const DType dt = x.dtype();
      const Tensor w = ferry_test::sample_tensor({c}, 0.5, 1.5, 4).to(dt);
      const Tensor b = ferry_test::sample_tensor({c}, -0.5, 0.5, 5).to(dt);
      r = {ferry_test::sample_tensor({c}, -0.2, 0.2, 6).to(dt),
           ferry_test::sample_tensor({c}, 0.5, 2, 7).to(dt)};
      return F::batch_norm(x, r[0], r[1], w, b, training, 0.1, 1e-5);
    };
  };
  const auto pool = [](ferry::ConvSizes k, ferry::ConvSizes s, ferry::ConvSizes p,
                       ferry::ConvSizes d, bool ceil) {
    return [=](const Tensor& x, std::vector<Tensor>& r) {
      const ferry::ValuesIndices v = ferry::max_pool2d_with_indices(x, k, s, p, d, ceil);
      r = {v.indices};
      return v.values;
    };
  };
  const auto avg = [](ferry::ConvSizes k, ferry::ConvSizes s, ferry::ConvSizes p, bool ceil,
                      bool include_pad, std::optional<std::int64_t> divisor) {
    return [=](const Tensor& x, std::vector<Tensor>&) {
      return ferry::avg_pool2d(x, k, s, p, ceil, include_pad, divisor);
    };
  };
  const std::vector<Case> cases{
      {"batch_norm, training", {3, 5, 7, 6}, bn(true)},
      {"batch_norm, eval", {3, 5, 7, 6}, bn(false)},
      {"batch_norm, training, channels_last_3d", {2, 3, 4, 5, 3}, bn(true)},
      {"batch_norm, training, 40 channels over 3 blocks of rows", {2, 40, 30, 31}, bn(true)},
      {"max_pool2d 3x3/2, padding 1", {2, 5, 9, 8}, pool({3}, {2}, {1}, {1}, false)},
      // One image: on 2 threads the backward splits its channels (3 and 2).
      {"max_pool2d 3x3/2, padding 1, one image", {1, 5, 9, 8}, pool({3}, {2}, {1}, {1}, false)},
      {"max_pool2d 2x3/(1, 2), dilation 2, ceil_mode",
       {2, 3, 8, 9},
       pool({2, 3}, {1, 2}, {1}, {2}, true)},
      {"avg_pool2d 3x3/2, padding 1 not counted, one image",
       {1, 5, 9, 8},
       avg({3}, {2}, {1}, false, false, std::nullopt)},
      {"avg_pool2d 2x3/(2, 1), ceil_mode, divisor_override 5",
       {2, 3, 8, 9},
       avg({2, 3}, {2, 1}, {1}, true, true, 5)},
      {"interpolate bilinear, scale (1.5, 2)",
       {2, 3, 5, 4},
       [](const Tensor& x, std::vector<Tensor>&) {
         return ferry::interpolate(x, {.scale_factor = {1.5, 2.0}, .mode = "bilinear"});
       }},
      {"interpolate bicubic to (3, 7), align_corners",
       {1, 4, 6, 5},
       [](const Tensor& x, std::vector<Tensor>&) {
         return ferry::interpolate(x, {.size = {3, 7}, .mode = "bicubic", .align_corners = true});
       }},
  };
  struct Run {
    Tensor y, gx;
    std::vector<Tensor> extra;
  };
  // The op on `input` and its gradient for g.
  const auto run = [](const Case& c, const Tensor& input, const Tensor& g) {
    Run r;
    const Tensor x = input.detach().requires_grad_();
    r.y = c.f(x, r.extra);
    r.gx = ferry::autograd::grad({r.y}, {x}, {g})[0];
    return r;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases) {
      const std::string where = c.what + ", " + std::string(ferry::dtype_name(dt));
      const MemoryFormat f =
          c.x.size() == 4 ? MemoryFormat::channels_last : MemoryFormat::channels_last_3d;
      // Steps of 1/4, so every pooling window has ties; one NaN for the pools.
      std::vector<float> v = ferry_test::sample_tensor(c.x, -2, 2, 5).to_vector<float>();
      for (float& e : v) e = std::round(e * 4) / 4;
      if (c.what.rfind("max_pool", 0) == 0) v[7] = NAN;
      const Tensor base = ferry::tensor(v, c.x).to(dt), base_cl = base.contiguous(f);
      std::vector<Tensor> unused;
      const Tensor g = ferry_test::sample_tensor(c.f(base, unused).sizes(), -1, 1, 8).to(dt);
      const Tensor g_cl = g.contiguous(f);
      Run want;
      {
        ferry::debug::CompositesOnly composites;
        want = run(c, base, g);
      }
      prof::Scope scope;
      const Run got = run(c, base_cl, g_cl);
      const prof::Profile& p = scope.stop();
      for (const prof::Event& e : p.events())  // the [C] statistics' copies aside
        if (e.kind == prof::EventKind::op && e.name == "copy")
          EXPECT_EQ(std::count(e.inputs.begin(), e.inputs.end(), ','), 0)
              << where << ": a layout copy of " << e.inputs;
      EXPECT_TRUE(got.y.is_contiguous(f)) << where;
      EXPECT_TRUE(got.gx.is_contiguous(f)) << where;
      const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
      ferry_test::expect_close(ferry_test::as_double(got.y), ferry_test::as_double(want.y), tol,
                               tol, where);
      ferry_test::expect_close(ferry_test::as_double(got.gx), ferry_test::as_double(want.gx), tol,
                               tol, where + ": the input's gradient");
      for (std::size_t i = 0; i < want.extra.size(); ++i)
        ferry_test::expect_close(ferry_test::as_double(got.extra[i]),
                                 ferry_test::as_double(want.extra[i]), tol, tol,
                                 where + ": result " + std::to_string(i + 1));
      // Threads: 1, then 2, bit for bit.
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      const Run one = run(c, base_cl, g_cl);
      omp_set_num_threads(2);
      const Run two = run(c, base_cl, g_cl);
      omp_set_num_threads(threads);
      for (const auto& [a, b] : {std::pair{one.y, two.y}, std::pair{one.gx, two.gx}}) {
        const std::vector<double> va = a.to(DType::f64).to_vector<double>(),
                                  vb = b.to(DType::f64).to_vector<double>();
        for (std::size_t i = 0; i < va.size(); ++i)
          ASSERT_TRUE(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i])))
              << where << ": 1 thread against 2 at " << i << ": " << va[i] << " " << vb[i];
      }
    }
}

// The gradients of a channels-last input come back channels-last where the gradient flowing in
// is: the activations' fused backward kernels compute in that layout, and an op that computes
// on its input's contiguous copy (pooling, batch_norm) hands the gradient back converted, so
// that the ops before it never mix layouts (which walks one operand strided, element by
// element).
TEST(MemoryFormat, GradientsOfAChannelsLastInputAreChannelsLast) {
  namespace F = ferry::nn::functional;
  const Shape s{2, 4, 6, 5};
  const Tensor gamma = ferry_test::sample_tensor({4}, 0.5, 1.5, 4);
  const Tensor beta = ferry_test::sample_tensor({4}, -0.5, 0.5, 5);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops{
      {"relu", [](const Tensor& x) { return ferry::relu(x); }},
      {"sigmoid", [](const Tensor& x) { return ferry::sigmoid(x); }},
      {"gelu", [](const Tensor& x) { return F::gelu(x); }},
      {"max_pool2d", [](const Tensor& x) { return ferry::max_pool2d(x, {3}, {1}, {1}); }},
      {"batch_norm", [&](const Tensor& x) { return F::batch_norm(x, {}, {}, gamma, beta, true); }},
  };
  for (const auto& [what, f] : ops) {
    const Tensor base = ferry_test::sample_tensor(s, -2, 2, 7);
    const Tensor x = base.detach().requires_grad_();
    const Tensor x_cl = base.contiguous(MemoryFormat::channels_last).detach().requires_grad_();
    const Tensor y = f(x), y_cl = f(x_cl);
    const Tensor g = ferry_test::sample_tensor(y.sizes(), -1, 1, 3);
    const Tensor gx = ferry::autograd::grad({y}, {x}, {g})[0];
    const Tensor gx_cl =
        ferry::autograd::grad({y_cl}, {x_cl}, {g.contiguous(MemoryFormat::channels_last)})[0];
    EXPECT_TRUE(gx_cl.is_contiguous(MemoryFormat::channels_last))
        << what << ": strides " << ferry::shape_str(gx_cl.strides());
    ferry_test::expect_close(ferry_test::as_double(gx_cl), ferry_test::as_double(gx), 1e-5, 1e-5,
                             what);
  }
}

namespace nn = ferry::nn;

// A small CNN whose second convolution shares the first's weight (a tied 4-D parameter).
std::shared_ptr<nn::Sequential> small_cnn() {
  auto c1 = std::make_shared<nn::Conv2d>(4, 4, ferry::ConvSizes{3}, ferry::ConvSizes{1}, 1);
  auto c2 = std::make_shared<nn::Conv2d>(4, 4, ferry::ConvSizes{3}, ferry::ConvSizes{1}, 1);
  c2->weight = c2->replace_parameter("weight", c1->weight);
  auto head = std::make_shared<nn::Conv2d>(4, 3, ferry::ConvSizes{3}, ferry::ConvSizes{1}, 1);
  return std::make_shared<nn::Sequential>(c1, std::make_shared<nn::BatchNorm2d>(4),
                                          std::make_shared<nn::ReLU>(), c2, head);
}

Tensor loss_of(nn::Module& m, const Tensor& x) {
  const Tensor y = m.forward(x);
  return ferry::mean(y * y);
}

TEST(MemoryFormat, ModuleToConvertsItsFourDimTensorsInPlace) {
  ferry::manual_seed(11);
  auto m = small_cnn();
  const Tensor x = ferry_test::sample_tensor({2, 4, 6, 5}, -1, 1, 7);
  loss_of(*m, x).backward();  // gradients exist, and are converted too
  const Tensor before = m->forward(x).detach();
  std::vector<std::pair<std::string, Tensor>> tensors = m->named_tensors();
  std::vector<std::vector<float>> values;
  for (const auto& [name, t] : tensors) values.push_back(t.to(DType::f32).to_vector<float>());
  const Tensor w = m->parameters()[0];  // a handle an optimizer would hold

  EXPECT_EQ(&m->to(MemoryFormat::channels_last), m.get());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    EXPECT_EQ(t.is_contiguous(MemoryFormat::channels_last), t.dim() == 4) << name;
    EXPECT_EQ(t.is_contiguous(), t.dim() != 4) << name;  // 1-D bias and running stats stay
    EXPECT_EQ(t.to(DType::f32).to_vector<float>(), values[i]) << name;
  }
  EXPECT_TRUE(w.is_contiguous(MemoryFormat::channels_last));
  EXPECT_TRUE(w.grad().is_contiguous(MemoryFormat::channels_last));
  // The tie holds: one tensor under both names.
  const auto tied = std::dynamic_pointer_cast<nn::Conv2d>(m->child("3"));
  EXPECT_TRUE(tied->weight.is_same(w));
  EXPECT_TRUE(tied->parameter("weight").is_contiguous(MemoryFormat::channels_last));
  const Tensor after = m->forward(x.contiguous(MemoryFormat::channels_last));
  EXPECT_TRUE(after.is_contiguous(MemoryFormat::channels_last));
  ferry_test::expect_close(ferry_test::as_double(after), ferry_test::as_double(before), 1e-5, 1e-5,
                           "forward after to(channels_last)");

  // And back: contiguous converts 4-D and 5-D tensors; preserve changes nothing.
  m->to(MemoryFormat::preserve);
  EXPECT_TRUE(w.is_contiguous(MemoryFormat::channels_last));
  m->to(MemoryFormat::contiguous);
  EXPECT_TRUE(w.is_contiguous());
  EXPECT_TRUE(w.grad().is_contiguous());
  EXPECT_EQ(w.to_vector<float>(), values[0]);
}

TEST(MemoryFormat, ModuleToRefusesATensorOfTheWrongRankAndChangesNothing) {
  // PyTorch: nn.Conv3d(...).to(memory_format=torch.channels_last) raises "required rank 4
  // tensor to use channels_last format"; ferry checks every tensor before converting any.
  nn::Sequential m(std::make_shared<nn::Conv2d>(2, 2, ferry::ConvSizes{3}),
                   std::make_shared<nn::Conv3d>(2, 2, ferry::ConvSizes{3}));
  EXPECT_FERRY_ERROR(m.to(MemoryFormat::channels_last), ferry::ShapeError, "'1.weight'",
                     "[2, 2, 3, 3, 3]", "channels_last takes 4-D", "nothing was converted");
  EXPECT_TRUE(m.parameters()[0].is_contiguous());  // the 4-D weight listed first is untouched
  EXPECT_FERRY_ERROR(m.to(MemoryFormat::channels_last_3d), ferry::ShapeError, "'0.weight'",
                     "channels_last_3d takes 5-D");
  EXPECT_TRUE(m.parameters()[2].is_contiguous());
}

// A channels-last model trains as the contiguous one does, through the fused kernels
// (fused = true raises UnsupportedError where they cannot run), with channels-last state.
TEST(MemoryFormat, OptimizersUpdateAChannelsLastModelFused) {
  for (const ferry::Device& dev : devices()) {
    for (const bool adam : {false, true}) {
      ferry::manual_seed(5);
      auto plain = small_cnn();
      auto cl = small_cnn();
      cl->load_state_dict(plain->state_dict());
      plain->to(dev);
      cl->to(dev);
      cl->to(MemoryFormat::channels_last);
      const auto make = [&](nn::Module& m) -> std::unique_ptr<ferry::optim::Optimizer> {
        if (adam)
          return std::make_unique<ferry::optim::Adam>(
              m.parameters(), ferry::optim::AdamOptions{.lr = 1e-2, .fused = true});
        return std::make_unique<ferry::optim::SGD>(
            m.parameters(), ferry::optim::SGDOptions{.lr = 1e-2, .momentum = 0.9, .fused = true});
      };
      auto opt_plain = make(*plain), opt_cl = make(*cl);
      const Tensor x = ferry_test::sample_tensor({2, 4, 6, 5}, -1, 1, 9).to(dev);
      for (int step = 0; step < 3; ++step) {
        opt_plain->zero_grad();
        opt_cl->zero_grad();
        loss_of(*plain, x).backward();
        loss_of(*cl, x.contiguous(MemoryFormat::channels_last)).backward();
        opt_plain->step();
        ASSERT_NO_THROW(opt_cl->step()) << dev.str() << (adam ? " Adam" : " SGD");
      }
      const std::string what = dev.str() + (adam ? " Adam" : " SGD");
      const auto a = plain->named_parameters(), b = cl->named_parameters();
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i].second.is_contiguous(MemoryFormat::channels_last), b[i].second.dim() == 4)
            << what << " " << b[i].first;
        ferry_test::expect_close(ferry_test::as_double(b[i].second.cpu()),
                                 ferry_test::as_double(a[i].second.cpu()), 1e-5, 1e-5,
                                 what + " " + b[i].first);
      }
      // Made at the first step, or loaded from a saved (contiguous) state: the parameter's layout.
      auto reloaded = make(*cl);
      reloaded->load_state_dict(opt_cl->state_dict());
      for (const auto* opt : {opt_cl.get(), reloaded.get()})
        for (const auto& [name, t] : opt->named_state())
          EXPECT_EQ(t.is_contiguous(MemoryFormat::channels_last), t.dim() == 4)
              << what << " " << name;
    }
  }
}

}  // namespace
