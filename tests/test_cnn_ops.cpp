// The CNN ops beyond convolution — conv_transpose, pooling, batch/group/instance/local
// response normalisation, interpolate, pixel_shuffle — against PyTorch's results, gradients,
// max pooling's indices and the running statistics they update
// (tests/data/pytorch_cnn_reference.json, written by tools/gen_cnn_reference.py) on every
// device; finite differences in f64 on the CPU; PyTorch's errors, typed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/backend.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "ferry/kit/pool_windows.hpp"
#include "gradcheck.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_cnn_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::sizes;
using nlohmann::json;
namespace F = ferry::nn::functional;

using Result = ferry_test::ReferenceResult;

Tensor at(const std::vector<Tensor>& v, std::size_t i) { return i < v.size() ? v[i] : Tensor(); }

// The op as tools/gen_cnn_reference.py's call() runs it in PyTorch.
Result call(const std::string& op, const json& a, const std::vector<Tensor>& in,
            const std::vector<Tensor>& buf) {
  const auto stride = sizes(a, "stride", 1), padding = sizes(a, "padding", 0),
             dilation = sizes(a, "dilation", 1);
  const bool ceil = a.value("ceil_mode", false);
  if (op == "conv_transpose1d" || op == "conv_transpose2d") {
    const auto out_pad = sizes(a, "output_padding", 0);
    const std::int64_t groups = a.value("groups", std::int64_t(1));
    auto f = op == "conv_transpose1d" ? ferry::conv_transpose1d : ferry::conv_transpose2d;
    return {f(in[0], in[1], at(in, 2), stride, padding, out_pad, groups, dilation)};
  }
  const auto kernel = sizes(a, "kernel_size", 1);
  const auto pool_stride = a.contains("stride") ? stride : ferry::ConvSizes{};
  if (op == "max_pool1d" || op == "max_pool2d" || op == "max_pool3d") {
    auto f = op == "max_pool1d"   ? ferry::max_pool1d_with_indices
             : op == "max_pool2d" ? ferry::max_pool2d_with_indices
                                  : ferry::max_pool3d_with_indices;
    auto [v, i] = f(in[0], kernel, pool_stride, padding, dilation, ceil);
    return {v, i};
  }
  if (op.rfind("max_unpool", 0) == 0) {  // unpooling what max_poolNd gives, as the generator
    const char n = op.back() == 'd' ? op[op.size() - 2] : '2';
    auto pool = n == '1'   ? ferry::max_pool1d_with_indices
                : n == '2' ? ferry::max_pool2d_with_indices
                           : ferry::max_pool3d_with_indices;
    auto unpool = n == '1'   ? ferry::max_unpool1d
                  : n == '2' ? ferry::max_unpool2d
                             : ferry::max_unpool3d;
    auto [v, i] = pool(in[0], kernel, pool_stride, padding, {1}, false);
    const auto out = a.contains("output_size") ? sizes(a, "output_size", 1) : ferry::ConvSizes{};
    return {unpool(v, i, kernel, pool_stride, padding, out)};
  }
  const bool include_pad = a.value("count_include_pad", true);
  if (op == "avg_pool1d")
    return {ferry::avg_pool1d(in[0], kernel, pool_stride, padding, ceil, include_pad)};
  if (op == "avg_pool2d" || op == "avg_pool3d") {
    std::optional<std::int64_t> divisor;
    if (a.contains("divisor_override")) divisor = a["divisor_override"].get<std::int64_t>();
    auto f = op == "avg_pool2d" ? ferry::avg_pool2d : ferry::avg_pool3d;
    return {f(in[0], kernel, pool_stride, padding, ceil, include_pad, divisor)};
  }
  const auto out_size = sizes(a, "output_size", 1);
  if (op == "adaptive_avg_pool1d") return {ferry::adaptive_avg_pool1d(in[0], out_size)};
  if (op == "adaptive_avg_pool2d") return {ferry::adaptive_avg_pool2d(in[0], out_size)};
  if (op == "adaptive_avg_pool3d") return {ferry::adaptive_avg_pool3d(in[0], out_size)};
  if (op == "adaptive_max_pool1d" || op == "adaptive_max_pool2d" || op == "adaptive_max_pool3d") {
    auto f = op == "adaptive_max_pool1d"   ? ferry::adaptive_max_pool1d_with_indices
             : op == "adaptive_max_pool2d" ? ferry::adaptive_max_pool2d_with_indices
                                           : ferry::adaptive_max_pool3d_with_indices;
    auto [v, i] = f(in[0], out_size);
    return {v, i};
  }
  const double eps = a.value("eps", 1e-5), momentum = a.value("momentum", 0.1);
  if (op == "batch_norm")
    return {F::batch_norm(in[0], at(buf, 0), at(buf, 1), at(in, 1), at(in, 2),
                          a.value("training", false), momentum, eps)};
  if (op == "instance_norm")
    return {F::instance_norm(in[0], at(buf, 0), at(buf, 1), at(in, 1), at(in, 2),
                             a.value("use_input_stats", true), momentum, eps)};
  if (op == "group_norm")
    return {F::group_norm(in[0], a["num_groups"].get<std::int64_t>(), at(in, 1), at(in, 2), eps)};
  if (op == "local_response_norm")
    return {F::local_response_norm(in[0], a["size"].get<std::int64_t>(), a["alpha"], a["beta"],
                                   a["k"])};
  if (op == "pixel_shuffle") return {ferry::pixel_shuffle(in[0], a["upscale_factor"])};
  if (op == "pixel_unshuffle") return {ferry::pixel_unshuffle(in[0], a["downscale_factor"])};
  EXPECT_EQ(op, "interpolate");
  ferry::InterpolateOptions o;
  const std::string mode = a["mode"];
  o.mode = mode;
  if (a.contains("size")) o.size = sizes(a, "size", 1);
  if (a.contains("scale_factor")) {
    const json& f = a["scale_factor"];
    o.scale_factor = f.is_array() ? f.get<std::vector<double>>() : std::vector{f.get<double>()};
  }
  if (a.contains("align_corners")) o.align_corners = a["align_corners"].get<bool>();
  o.recompute_scale_factor = a.value("recompute_scale_factor", false);
  return {ferry::interpolate(in[0], o)};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_reference_file("pytorch_cnn_reference.json", dev, 71, call);
}

FERRY_TEST_ON_EACH_DEVICE(CnnOps, PyTorchReference, run_reference)

Tensor f64_input(const ferry::Shape& s, std::uint64_t seed) {
  ferry::manual_seed(seed);
  return ferry::rand(s, {.dtype = DType::f64}) * 2.0 - 1.0;
}

// Finite differences in double through every op's gradient.
TEST(CnnOps, GradcheckInDouble) {
  using In = std::vector<Tensor>;
  auto check = [](const char* what, const std::function<Tensor(const In&)>& f, const In& in) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(ferry_test::gradcheck(f, in));
  };
  check("conv_transpose2d",
        [](const In& in) {
          return ferry::conv_transpose2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2});
        },
        {f64_input({2, 4, 3, 4}, 1), f64_input({4, 1, 3, 2}, 2), f64_input({2}, 3)});
  // distinct values (no ties), so the maximum does not move under a small step
  const Tensor distinct =
      (ferry::randperm(2 * 2 * 6 * 5).to(DType::f64) * 0.1).reshape({2, 2, 6, 5});
  check("max_pool2d",
        [](const In& in) { return ferry::max_pool2d(in[0], {3}, {2}, {1}, {1}, true); },
        {distinct});
  check("adaptive_max_pool2d",
        [](const In& in) {
          return ferry::adaptive_max_pool2d(in[0], {4, 3});
        },
        {distinct});
  check("adaptive_max_pool2d, dividing sizes (the pool kernel)",
        [](const In& in) {
          return ferry::adaptive_max_pool2d(in[0], {3, 5});
        },
        {distinct});
  check("adaptive_avg_pool2d, global (a mean)",
        [](const In& in) { return ferry::adaptive_avg_pool2d(in[0], {1}); },
        {f64_input({2, 3, 4, 5}, 20)});
  check("adaptive_avg_pool2d, uneven and larger sizes (the kernel's adaptive windows)",
        [](const In& in) {
          return ferry::adaptive_avg_pool2d(in[0], {4, 7});
        },
        {f64_input({2, 2, 6, 5}, 21)});
  check("adaptive_avg_pool2d, dividing sizes (the pool kernel)",
        [](const In& in) {
          return ferry::adaptive_avg_pool2d(in[0], {2, 1});
        },
        {f64_input({2, 2, 6, 5}, 19)});
  check("avg_pool2d",
        [](const In& in) {
          return ferry::avg_pool2d(in[0], {3, 2}, {2}, {1}, true, false);
        },
        {f64_input({2, 2, 6, 5}, 4)});
  check("adaptive_avg_pool1d", [](const In& in) { return ferry::adaptive_avg_pool1d(in[0], {4}); },
        {f64_input({2, 3, 7}, 5)});
  check("group_norm", [](const In& in) { return F::group_norm(in[0], 2, in[1], in[2]); },
        {f64_input({2, 4, 3, 2}, 6), f64_input({4}, 7), f64_input({4}, 8)});
  check("batch_norm", [](const In& in) { return F::batch_norm(in[0], {}, {}, in[1], in[2], true); },
        {f64_input({3, 2, 2, 3}, 9), f64_input({2}, 10), f64_input({2}, 11)});
  check("instance_norm", [](const In& in) { return F::instance_norm(in[0]); },
        {f64_input({2, 2, 3, 3}, 12)});
  check("local_response_norm",
        [](const In& in) { return F::local_response_norm(in[0], 3, 0.5, 0.75, 1.0); },
        {f64_input({2, 4, 2, 2}, 13)});
  check("interpolate bicubic",
        [](const In& in) {
          return ferry::interpolate(in[0], {.size = {5, 6}, .mode = "bicubic"});
        },
        {f64_input({1, 2, 3, 4}, 14)});
  check("interpolate bilinear, down, align_corners",
        [](const In& in) {
          return ferry::interpolate(in[0],
                                    {.size = {3, 2}, .mode = "bilinear", .align_corners = true});
        },
        {f64_input({2, 2, 5, 4}, 16)});
  check("interpolate linear 1-D, align_corners",
        [](const In& in) {
          return ferry::interpolate(in[0], {.size = {7}, .mode = "linear", .align_corners = true});
        },
        {f64_input({2, 2, 4}, 17)});
  check("interpolate trilinear",
        [](const In& in) {
          return ferry::interpolate(in[0], {.size = {3, 4, 5}, .mode = "trilinear"});
        },
        {f64_input({1, 2, 2, 3, 3}, 18)});
  check("pixel_shuffle", [](const In& in) { return ferry::pixel_shuffle(in[0], 2); },
        {f64_input({1, 8, 2, 3}, 15)});
}

// PyTorch's checks, typed, naming the sizes.
TEST(CnnOps, BadInputIsTypedAndNamesTheSizes) {
  const Tensor x = ferry::ones({2, 3, 5, 5});
  EXPECT_FERRY_ERROR(ferry::max_pool2d(x, {2}, {0}), ferry::ShapeError, "stride");
  EXPECT_FERRY_ERROR(ferry::max_pool2d(x, {3}, {1}, {2}), ferry::ShapeError, "half of kernel");
  EXPECT_FERRY_ERROR(ferry::max_pool2d(ferry::ones({1, 1, 2, 2}), {3}), ferry::ShapeError, "2x2",
                     "too small");
  EXPECT_FERRY_ERROR(ferry::max_pool2d(ferry::ones({5, 5}), {2}), ferry::ShapeError, "[5, 5]");
  EXPECT_FERRY_ERROR(ferry::max_pool2d(ferry::ones({1, 0, 4, 4}), {2}), ferry::ShapeError,
                     "non-zero size");
  EXPECT_FERRY_ERROR(ferry::avg_pool2d(x, {2}, {}, {0}, false, true, 0), ferry::ValueError,
                     "divisor_override");
  EXPECT_FERRY_ERROR(ferry::adaptive_avg_pool2d(x, {0, 2}), ferry::ShapeError, "output_size");
  EXPECT_FERRY_ERROR(ferry::max_pool2d(ferry::ones({1, 1, 4, 4}, {.dtype = DType::i32}), {2}),
                     ferry::DTypeError, "max_pool2d");
  EXPECT_FERRY_ERROR(ferry::conv_transpose2d(x, ferry::ones({4, 2, 3, 3})), ferry::ShapeError,
                     "[4, 2, 3, 3]", "3 channels");
  EXPECT_FERRY_ERROR(ferry::conv_transpose2d(x, ferry::ones({3, 2, 3, 3}), {}, {1}, {0}, {1}),
                     ferry::ShapeError, "output padding must be smaller");
  EXPECT_FERRY_ERROR(
      ferry::conv_transpose2d(ferry::ones({1, 3, 1, 1}), ferry::ones({3, 2, 1, 1}), {}, {1}, {1}),
      ferry::ShapeError, "too small");
  EXPECT_FERRY_ERROR(F::group_norm(x, 2), ferry::ShapeError, "divisible by num_groups",
                     "[2, 3, 5, 5]");
  EXPECT_FERRY_ERROR(F::batch_norm(x, {}, {}, ferry::ones({2})), ferry::ShapeError, "weight",
                     "[3]");
  EXPECT_FERRY_ERROR(F::instance_norm(ferry::ones({2, 3})), ferry::ShapeError, "[2, 3]");
  EXPECT_FERRY_ERROR(F::local_response_norm(ferry::ones({2, 3}), 2), ferry::ShapeError, "3D");
  EXPECT_FERRY_ERROR(ferry::interpolate(x, {.size = {3}, .mode = "linear"}), ferry::ShapeError,
                     "linear", "3-D");
  EXPECT_FERRY_ERROR(ferry::interpolate(x, {.mode = "bilinear"}), ferry::ValueError,
                     "either size or scale_factor");
  EXPECT_FERRY_ERROR(ferry::interpolate(x, {.size = {3}, .mode = "nearest", .align_corners = true}),
                     ferry::ValueError, "align_corners");
  EXPECT_FERRY_ERROR(ferry::interpolate(x, {.size = {3}, .mode = "cubic"}), ferry::ValueError,
                     "'cubic'");
  EXPECT_FERRY_ERROR(ferry::pixel_shuffle(x, 2), ferry::ShapeError, "divisible", "4");
  EXPECT_FERRY_ERROR(ferry::pixel_unshuffle(x, 2), ferry::ShapeError, "divisible");
  EXPECT_FERRY_ERROR(F::dropout2d(ferry::ones({2, 3}), 0.5), ferry::ShapeError, "[2, 3]");
}

// Max pooling's gradient goes to the first maximum of a window alone (PyTorch's), NaN
// propagates, and an empty batch gives an empty result.
TEST(CnnOps, MaxPoolTiesNaNAndEmptyBatches) {
  Tensor x = ferry::ones({1, 1, 2, 2}).requires_grad_();
  Tensor y = ferry::max_pool2d(x, {2});
  y.backward(ferry::ones({1, 1, 1, 1}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 0, 0, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor n = ferry::tensor(std::vector<float>{1, nan, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(ferry::max_pool2d(n, {2}).item<float>()));
  EXPECT_EQ(ferry::max_pool2d(ferry::ones({0, 2, 4, 4}), {2}).sizes(), (ferry::Shape{0, 2, 2, 2}));
  EXPECT_EQ(ferry::avg_pool2d(ferry::ones({0, 2, 4, 4}), {2}).sizes(), (ferry::Shape{0, 2, 2, 2}));
}

// The CPU's fused batch_norm and max pooling (Note [Fused CNN layers on the CPU]) against
// their compositions at a size whose planes are not a multiple of the kernels' lanes, on a
// contiguous and a channels-last input: the outputs, max pooling's indices, the gradients of
// the input and the parameters, and the running statistics.
TEST(CnnOps, FusedCpuKernelsMatchTheComposition) {
  const ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  for (ferry::OpId op : {ferry::OpId::batch_norm, ferry::OpId::batch_norm_backward,
                         ferry::OpId::max_pool2d, ferry::OpId::max_pool_backward})
    ASSERT_TRUE(cpu.supports(op, DType::f32)) << ferry::op_name(op);
  struct Run {
    std::vector<Tensor> out, grads;
  };
  ferry::manual_seed(21);
  const Tensor x0 = ferry::randn({4, 5, 13, 11}), w0 = ferry::rand({5}), b0 = ferry::randn({5});
  const Tensor g0 = ferry::randn({4, 5, 13, 11}), gp = ferry::randn({4, 5, 7, 6});
  for (const bool channels_last : {false, true}) {
    auto run = [&](bool composed) {
      std::optional<ferry::debug::CompositesOnly> only;
      if (composed) only.emplace();
      Tensor x = (channels_last ? x0.contiguous(ferry::MemoryFormat::channels_last) : x0.clone())
                     .requires_grad_();
      Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
      Tensor rm = ferry::zeros({5}), rv = ferry::ones({5});
      Run r;
      const Tensor y = F::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
      EXPECT_EQ(y.is_contiguous(ferry::MemoryFormat::channels_last), channels_last);
      const Tensor ye = F::batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
      const auto [pooled, indices] = ferry::max_pool2d_with_indices(x, {3}, {2}, {1});
      (ferry::sum(y * g0) + ferry::sum(ye) + ferry::sum(pooled * gp)).backward();
      r.out = {y, ye, pooled, indices.to(DType::f32), rm, rv};
      r.grads = {x.grad(), w.grad(), b.grad()};
      return r;
    };
    const Run fused = run(false), composed = run(true);
    const char* names[] = {"train y", "eval y",       "max_pool2d",
                           "indices", "running_mean", "running_var"};
    for (std::size_t i = 0; i < fused.out.size(); ++i)
      ferry_test::expect_close(ferry_test::as_double(fused.out[i]),
                               ferry_test::as_double(composed.out[i]), 1e-5, 1e-5,
                               std::string(names[i]) + (channels_last ? " channels-last" : ""));
    for (std::size_t i = 0; i < fused.grads.size(); ++i)
      ferry_test::expect_close(ferry_test::as_double(fused.grads[i]),
                               ferry_test::as_double(composed.grads[i]), 1e-4, 1e-4,
                               "gradient " + std::to_string(i));
  }
}

// The CPU's average pooling kernels (cpu_kernels_pool.cpp) against the composition, forward
// and the input's gradient, in f32 and f64, at geometries with padding counted and not, a
// divisor_override, ceil_mode, 1-D; and channels-last against contiguous bit for bit (both
// add each window's taps, and each input's shares, in the same order).
TEST(CnnOps, AvgPoolKernelsMatchTheCompositionInBothLayouts) {
  const ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  for (ferry::OpId op :
       {ferry::OpId::avg_pool1d, ferry::OpId::avg_pool2d, ferry::OpId::avg_pool_backward})
    ASSERT_TRUE(cpu.supports(op, DType::f32)) << ferry::op_name(op);
  struct Case {
    std::string name;
    ferry::Shape x;
    std::vector<std::int64_t> kernel, stride, padding;
    bool ceil_mode, include_pad;
    std::optional<std::int64_t> divisor;
  };
  const std::vector<Case> cases = {
      {"3x3/2 padding 1", {3, 5, 13, 11}, {3}, {2}, {1}, false, true, {}},
      {"3x3/1 padding 1, padding not counted", {2, 6, 9, 10}, {3}, {1}, {1}, false, false, {}},
      {"(2, 3)/(2, 1) ceil_mode, not counted",
       {2, 3, 7, 8},
       {2, 3},
       {2, 1},
       {1, 0},
       true,
       false,
       {}},
      {"2x2/2 divisor_override 3", {2, 4, 6, 7}, {2}, {2}, {0}, false, true, 3},
      // windows wider than their rows' count (the contiguous kernels' window-by-window walk)
      {"(5, 7)/(2, 3) padding (2, 3), not counted",
       {2, 3, 9, 10},
       {5, 7},
       {2, 3},
       {2, 3},
       false,
       false,
       {}},
      {"(8, 5)/(1, 4): a row of two", {2, 3, 8, 9}, {8, 5}, {1, 4}, {0}, false, true, {}},
      {"1-D kernel 4 stride 3 padding 2 ceil_mode", {3, 4, 17}, {4}, {3}, {2}, true, false, {}},
  };
  for (const DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases) {
      ferry::manual_seed(8);
      const Tensor x0 = ferry::randn(c.x, {.dtype = dt});
      auto run = [&](bool composed, bool channels_last) {
        std::optional<ferry::debug::CompositesOnly> only;
        if (composed) only.emplace();
        Tensor x = (channels_last ? x0.contiguous(ferry::MemoryFormat::channels_last) : x0.clone())
                       .requires_grad_();
        const Tensor y = c.x.size() == 3 ? ferry::avg_pool1d(x, c.kernel, c.stride, c.padding,
                                                             c.ceil_mode, c.include_pad)
                                         : ferry::avg_pool2d(x, c.kernel, c.stride, c.padding,
                                                             c.ceil_mode, c.include_pad, c.divisor);
        EXPECT_EQ(y.is_contiguous(ferry::MemoryFormat::channels_last) && !y.is_contiguous(),
                  channels_last)
            << c.name;
        ferry::manual_seed(9);
        ferry::sum(y * ferry::randn(y.sizes(), {.dtype = dt})).backward();
        return std::vector<Tensor>{y, x.grad()};
      };
      const std::string at = c.name + " " + std::string(ferry::dtype_name(dt));
      const auto fused = run(false, false), composed = run(true, false);
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      for (std::size_t i = 0; i < 2; ++i)
        ferry_test::expect_close(ferry_test::as_double(fused[i]),
                                 ferry_test::as_double(composed[i]), tol, tol,
                                 at + (i == 0 ? " y" : " dx"));
      if (c.x.size() == 3) continue;
      const auto last = run(false, true);
      for (std::size_t i = 0; i < 2; ++i)
        EXPECT_EQ(ferry_test::as_double(last[i]), ferry_test::as_double(fused[i]))
            << at << (i == 0 ? " y" : " dx") << ": channels-last against contiguous";
    }
}

// The CPU's interpolate kernels (cpu_kernels_resample.cpp) against the composition, forward
// and the input's gradient, in f32 and f64: every mode, up and down, by size and by
// scale_factor, align_corners both ways, a channels-last input (its result channels-last),
// and 1-D and 3-D inputs (one and two passes of the 2-D kernels).
TEST(CnnOps, InterpolateKernelsMatchTheComposition) {
  const ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  for (ferry::OpId op : {ferry::OpId::interpolate, ferry::OpId::interpolate_backward})
    ASSERT_TRUE(cpu.supports(op, DType::f32)) << ferry::op_name(op);
  struct Case {
    std::string name;
    ferry::InterpolateOptions o;
    bool channels_last = false;
    ferry::Shape x = {2, 3, 7, 6};
  };
  const std::vector<Case> cases = {
      {"nearest x2", {.scale_factor = {2.0}, .mode = "nearest"}},
      {"nearest to (5, 13)", {.size = {5, 13}, .mode = "nearest"}},
      {"nearest-exact scale 1.7", {.scale_factor = {1.7}, .mode = "nearest-exact"}},
      {"bilinear x2", {.scale_factor = {2.0}, .mode = "bilinear"}},
      {"bilinear to (4, 3), align_corners",
       {.size = {4, 3}, .mode = "bilinear", .align_corners = true}},
      {"bilinear scale (1.5, 0.6) channels-last",
       {.scale_factor = {1.5, 0.6}, .mode = "bilinear"},
       true},
      {"bicubic to (15, 9)", {.size = {15, 9}, .mode = "bicubic"}},
      {"bicubic x2 align_corners",
       {.scale_factor = {2.0}, .mode = "bicubic", .align_corners = true}},
      {"linear 1-D to 11", {.size = {11}, .mode = "linear"}, false, {2, 3, 7}},
      {"nearest 1-D scale 2.5", {.scale_factor = {2.5}, .mode = "nearest"}, false, {2, 3, 7}},
      {"trilinear to (4, 5, 9)", {.size = {4, 5, 9}, .mode = "trilinear"}, false, {2, 2, 3, 7, 6}},
      {"trilinear x2 align_corners channels-last",
       {.scale_factor = {2.0}, .mode = "trilinear", .align_corners = true},
       true,
       {1, 3, 3, 4, 5}},
      {"nearest 3-D to (5, 2, 8)", {.size = {5, 2, 8}, .mode = "nearest"}, false, {2, 2, 3, 7, 6}},
  };
  for (const DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases) {
      ferry::manual_seed(12);
      const Tensor x0 = ferry::randn(c.x, {.dtype = dt});
      const auto layout = c.x.size() == 5 ? ferry::MemoryFormat::channels_last_3d
                                          : ferry::MemoryFormat::channels_last;
      auto run = [&](bool composed) {
        std::optional<ferry::debug::CompositesOnly> only;
        if (composed) only.emplace();
        Tensor x = (c.channels_last ? x0.contiguous(layout) : x0.clone()).requires_grad_();
        std::vector<Tensor> r;
        // one forward kernel call per 2-D pass
        const std::size_t calls = ferry_test::kernel_calls("interpolate", [&] {
          const Tensor y = ferry::interpolate(x, c.o);
          EXPECT_EQ(y.is_contiguous(layout) && !y.is_contiguous(), c.channels_last) << c.name;
          ferry::manual_seed(13);
          ferry::sum(y * ferry::randn(y.sizes(), {.dtype = dt})).backward();
          r = {y, x.grad()};
        });
        EXPECT_EQ(calls, composed ? 0u : c.x.size() == 5 ? 2u : 1u) << c.name;
        return r;
      };
      const auto fused = run(false), composed = run(true);
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      for (std::size_t i = 0; i < 2; ++i)
        ferry_test::expect_close(
            ferry_test::as_double(fused[i]), ferry_test::as_double(composed[i]), tol, tol,
            c.name + " " + std::string(ferry::dtype_name(dt)) + (i == 0 ? " y" : " dx"));
    }
}

// The nearest modes pick their source pixels in float whatever the dtype, as PyTorch does
// (UpSample.h's nearest_idx: compute_scales_value<float>), so an f64 input reads the pixels an
// f32 one does. The indices below are what PyTorch 1.13 (Debian's python3-torch) printed for
// F.interpolate(torch.arange(19.).reshape(1, 1, 19, 1), scale_factor=(2.7, 1),
// mode="nearest-exact") in float32 and in float64 alike; in double arithmetic output 41 would
// read input 15.
TEST(CnnOps, NearestModesPickThePixelsOfPyTorchInEveryDtype) {
  const std::vector<double> pytorch = {0,  0,  0,  1,  1,  2,  2,  2,  3,  3,  3,  4,  4,
                                       5,  5,  5,  6,  6,  6,  7,  7,  7,  8,  8,  9,  9,
                                       9,  10, 10, 10, 11, 11, 12, 12, 12, 13, 13, 13, 14,
                                       14, 14, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18};
  for (const DType dt : {DType::f32, DType::f64}) {
    const Tensor x = ferry::arange(0, 19, 1, {.dtype = dt}).reshape({1, 1, 19, 1});
    const Tensor y = ferry::interpolate(x, {.scale_factor = {2.7, 1.0}, .mode = "nearest-exact"});
    EXPECT_EQ(ferry_test::as_double(y), pytorch) << ferry::dtype_name(dt);
  }
  // Every scale from 0.3 to 3.1 in both modes: f64 picks what f32 picks.
  for (const char* mode : {"nearest", "nearest-exact"})
    for (int tenths = 3; tenths <= 31; ++tenths) {
      const ferry::InterpolateOptions o{.scale_factor = {tenths / 10.0}, .mode = mode};
      const Tensor x = ferry::arange(0, 37, 1, {.dtype = DType::f64}).reshape({1, 1, 37});
      EXPECT_EQ(ferry_test::as_double(ferry::interpolate(x, o)),
                ferry_test::as_double(ferry::interpolate(x.to(DType::f32), o)))
          << mode << " scale " << tenths / 10.0;
    }
}

// ferry/kit/pool_windows.hpp's rules, which the kernels and the shader share, against their
// definitions by brute force: an adaptive window is [floor(o·in/out), ceil((o+1)·in/out)) (in
// exact rationals: o·in and out), and the covering windows of a position are exactly those
// whose span holds it, for adaptive and regular (padded, strided, dilated) windows.
TEST(CnnOps, PoolWindowRules) {
  using ferry::PoolDim;
  const auto check_covering = [](const PoolDim& d, const std::string& what) {
    for (std::int64_t i = 0; i < d.extent; ++i) {
      std::vector<std::int64_t> want;
      for (std::int64_t o = 0; o < d.windows; ++o) {
        const std::int64_t start = ferry::pool_tap_start(d, o);
        const std::int64_t last = start + d.dilation * (ferry::pool_tap_count(d, o) - 1);
        if (start <= i && i <= last) want.push_back(o);
      }
      std::vector<std::int64_t> got;
      for (std::int64_t o = ferry::pool_covering_first(d, i); o < ferry::pool_covering_end(d, i);
           ++o)
        got.push_back(o);
      if (d.dilation == 1) {
        EXPECT_EQ(got, want) << what << " i=" << i;
      } else {  // dilated windows in the range may step over i, but none outside it covers i
        for (std::int64_t o : want)
          EXPECT_TRUE(std::find(got.begin(), got.end(), o) != got.end()) << what << " i=" << i;
      }
    }
  };
  for (std::int64_t in = 1; in <= 23; ++in)
    for (std::int64_t out = 1; out <= 29; ++out) {
      const PoolDim d{in, out, 1, 1, 0, 1, true};
      const std::string what = fmt::format("adaptive {} to {}", in, out);
      for (std::int64_t o = 0; o < out; ++o) {
        const std::int64_t first = ferry::pool_window_first(d, o);
        const std::int64_t end = ferry::pool_window_end(d, o);
        // first = floor(o·in/out): first·out <= o·in < (first+1)·out; end = ceil(...) alike
        EXPECT_TRUE(first * out <= o * in && o * in < (first + 1) * out) << what << " o=" << o;
        EXPECT_TRUE((end - 1) * out < (o + 1) * in && (o + 1) * in <= end * out)
            << what << " o=" << o;
        EXPECT_EQ(ferry::pool_tap_count(d, o), end - first) << what;
        EXPECT_EQ(ferry::avg_pool_window_count(d, o, true), end - first) << what;
      }
      check_covering(d, what);
    }
  for (std::int64_t in = 1; in <= 12; ++in)
    for (std::int64_t kernel = 1; kernel <= 4; ++kernel)
      for (std::int64_t stride = 1; stride <= 3; ++stride)
        for (std::int64_t padding = 0; padding <= kernel / 2; ++padding)
          for (std::int64_t dilation = 1; dilation <= 2; ++dilation) {
            const std::int64_t span = dilation * (kernel - 1) + 1;
            if (in + 2 * padding < span) continue;
            const std::int64_t out = (in + 2 * padding - span) / stride + 1;
            check_covering(PoolDim{in, out, kernel, stride, padding, dilation, false},
                           fmt::format("in {} kernel {} stride {} padding {} dilation {}", in,
                                       kernel, stride, padding, dilation));
          }
}

// Adaptive pooling runs as the pooling kernels, against the composition: the values, max
// pooling's indices and the input's gradient, 1-D and 2-D, contiguous and channels-last. Output
// sizes that divide the input's are a plain pool's geometry (kernel = stride = in / out);
// others, larger ones too, the kernels' adaptive windows. A global pool is a mean.
TEST(CnnOps, AdaptivePoolsRunThePoolKernels) {
  struct Case {
    std::string name;
    ferry::Shape x, out;
    bool max, channels_last;
    const char* kernel;  // the kernel it runs, or nullptr: none (an empty input composes)
  };
  const std::vector<Case> cases = {
      {"avg 2-D (1, 2)", {2, 5, 7, 6}, {1, 2}, false, false, "avg_pool2d"},
      {"avg 2-D (7, 3) channels-last", {2, 5, 7, 6}, {7, 3}, false, true, "avg_pool2d"},
      {"max 2-D (4, 3)", {2, 3, 8, 6}, {4, 3}, true, false, "max_pool2d"},
      {"max 2-D (2, 1) channels-last", {2, 3, 8, 6}, {2, 1}, true, true, "max_pool2d"},
      {"avg 1-D 12 to 4", {3, 4, 12}, {4}, false, false, "avg_pool1d"},
      {"max 1-D unbatched 12 to 3", {4, 12}, {3}, true, false, "max_pool1d"},
      {"avg 2-D uneven (3, 4)", {2, 3, 7, 6}, {3, 4}, false, false, "avg_pool2d"},
      {"avg 2-D uneven (5, 4) channels-last", {2, 5, 7, 6}, {5, 4}, false, true, "avg_pool2d"},
      {"max 2-D uneven (4, 5)", {2, 3, 7, 6}, {4, 5}, true, false, "max_pool2d"},
      {"max 2-D uneven (3, 4) channels-last", {2, 5, 7, 6}, {3, 4}, true, true, "max_pool2d"},
      {"avg 2-D larger (9, 8)", {2, 3, 4, 5}, {9, 8}, false, false, "avg_pool2d"},
      {"max 2-D larger (5, 11) channels-last", {1, 4, 4, 5}, {5, 11}, true, true, "max_pool2d"},
      {"avg 1-D uneven 13 to 5", {3, 4, 13}, {5}, false, false, "avg_pool1d"},
      {"max 1-D unbatched uneven 10 to 7", {4, 10}, {7}, true, false, "max_pool1d"},
      {"avg 2-D empty batch (3, 4)", {0, 3, 7, 6}, {3, 4}, false, false, nullptr},
  };
  for (const Case& c : cases) {
    ferry::manual_seed(31);
    const Tensor x0 = ferry::randn(c.x);
    const bool two_d = c.out.size() == 2;
    auto run = [&](bool composed) {
      std::optional<ferry::debug::CompositesOnly> only;
      if (composed) only.emplace();
      Tensor x = (c.channels_last ? x0.contiguous(ferry::MemoryFormat::channels_last) : x0.clone())
                     .requires_grad_();
      std::vector<Tensor> r;
      const std::size_t calls = ferry_test::kernel_calls(c.kernel ? c.kernel : "avg_pool2d", [&] {
        ferry::ValuesIndices y;
        if (c.max)
          y = two_d ? ferry::adaptive_max_pool2d_with_indices(x, c.out)
                    : ferry::adaptive_max_pool1d_with_indices(x, c.out);
        else
          y.values =
              two_d ? ferry::adaptive_avg_pool2d(x, c.out) : ferry::adaptive_avg_pool1d(x, c.out);
        EXPECT_EQ(
            y.values.is_contiguous(ferry::MemoryFormat::channels_last) && !y.values.is_contiguous(),
            c.channels_last)
            << c.name;
        ferry::manual_seed(32);
        ferry::sum(y.values * ferry::randn(y.values.sizes())).backward();
        r = {y.values, x.grad()};
        if (c.max) r.push_back(y.indices.to(DType::f64));
      });
      EXPECT_EQ(calls, !composed && c.kernel ? 1u : 0u) << c.name;
      return r;
    };
    const auto fused = run(false), composed = run(true);
    const char* what[] = {" y", " dx", " indices"};
    for (std::size_t i = 0; i < fused.size(); ++i)
      ferry_test::expect_close(ferry_test::as_double(fused[i]), ferry_test::as_double(composed[i]),
                               1e-5, 1e-5, c.name + what[i]);
  }
  // A global pool is the mean over the spatial dims (PyTorch's rule): the sum kernel, no pool.
  const Tensor x = ferry::randn({2, 5, 7, 6});
  for (const std::string kernel : {"sum", "avg_pool2d"})
    EXPECT_EQ(ferry_test::kernel_calls(kernel, [&] { ferry::adaptive_avg_pool2d(x, {1}); }),
              kernel == "sum" ? 1u : 0u)
        << kernel;
}

// The batch statistics keep their digits when the mean is far larger than the spread (the
// fused kernel sums around each channel's first value), against the variance in double.
TEST(CnnOps, BatchNormVarianceOfALargeMean) {
  ferry::manual_seed(5);
  const Tensor d = ferry::randn({8, 2, 9, 9}, {.dtype = DType::f64}) * 0.01;
  const Tensor x = (d + 1000.0).to(DType::f32);
  Tensor rm = ferry::zeros({2}), rv = ferry::zeros({2});
  (void)F::batch_norm(x, rm, rv, {}, {}, true, 1.0, 1e-5);
  const Tensor want = ferry::var(x.to(DType::f64), {0, 2, 3}, 1.0);  // unbiased, as stored
  ferry_test::expect_close(ferry_test::as_double(rv), ferry_test::as_double(want), 1e-4, 0,
                           "running_var");
}

// Dropout2d zeroes whole channels and scales the rest, with one draw per channel.
TEST(CnnOps, Dropout2dDropsWholeChannels) {
  ferry::manual_seed(3);
  const Tensor x = ferry::ones({4, 8, 3, 3});
  const Tensor y = F::dropout2d(x, 0.5, true);
  const auto v = y.to_vector<float>();
  int dropped = 0;
  for (std::size_t ch = 0; ch < 32; ++ch) {
    const float first = v[ch * 9];
    EXPECT_TRUE(first == 0.0f || first == 2.0f);
    for (std::size_t i = 1; i < 9; ++i) EXPECT_EQ(v[ch * 9 + i], first);
    dropped += first == 0.0f;
  }
  EXPECT_GT(dropped, 4);
  EXPECT_LT(dropped, 28);
  EXPECT_EQ(F::dropout2d(x, 0.5, false).to_vector<float>(), x.to_vector<float>());
}

}  // namespace
