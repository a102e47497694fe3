// Vulkan's batch_norm and pooling kernels (runtime/vulkan/vk_kernels_batch_norm.cpp, Note
// [Vulkan batch_norm]; vk_kernels_pool.cpp, Note [Vulkan pooling]) at geometries that take
// each of their paths, against the CPU's fused kernels:
// - batch_norm: few channels over many chunks of samples, many channels in one chunk, a
//   spatial size of one, and a mean far larger than the spread (the chunks' shifts merged);
//   training and eval, forward (y and the running statistics) and backward (the input's,
//   weight's and bias's gradients), within a tolerance of the CPU's double sums.
// - max pooling: planes larger and smaller than a workgroup, 1-D and 2-D, overlapping and
//   dilated windows, ties and NaNs: the values, the indices and the input's gradient bit for
//   bit (the backward adds in the CPU's order).
// - average pooling: the same geometries (no dilation), with and without count_include_pad,
//   with a divisor_override: y and the input's gradient, the CPU's terms in the CPU's order,
//   within a few ulps of the device's division.
// - interpolate (2-D): every mode, up and down, by size and by scale_factor, align_corners,
//   planes larger and smaller than a workgroup: y and the input's gradient, the CPU's terms in
//   the CPU's order, within a few ulps (the device may fuse a multiply and an add).
// With a storage-buffer range small enough to cut the tensors between samples and between
// channels (CTest's cnn_layers_vulkan_split), once more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "training_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using training_test::vulkan;
using training_test::vulkan_float_dtypes;
using training_test::vulkan_storage_range;
namespace F = ferry::nn::functional;

struct Case {
  std::string name;
  Shape x;
  double mean = 0.0;  // added to x
  bool affine = true;
};

struct Result {
  std::vector<Tensor> values;  // y (training), y (eval), running mean, running var, dx, dw, db
};

Result run(const Case& c, const ferry::Device& dev, DType dt) {
  ferry::manual_seed(11);
  const std::int64_t C = c.x[1];
  const Tensor x0 = (ferry::randn(c.x, {.dtype = DType::f64}) * 2.0 + c.mean).to(dt);
  const Tensor g0 = ferry::randn(c.x, {.dtype = DType::f64}).to(dt);
  const Tensor w0 = ferry::rand({C}).to(dt), b0 = ferry::randn({C}).to(dt);
  Tensor x = x0.to(dev).requires_grad_();
  Tensor w = c.affine ? w0.to(dev).requires_grad_() : Tensor();
  Tensor b = c.affine ? b0.to(dev).requires_grad_() : Tensor();
  const DType stats = dt == DType::f64 ? DType::f64 : DType::f32;
  Tensor rm = ferry::zeros({C}, {.dtype = stats, .device = dev});
  Tensor rv = ferry::ones({C}, {.dtype = stats, .device = dev});
  const Tensor y = F::batch_norm(x, rm, rv, w, b, true, 0.5, 1e-5);
  const Tensor ye = F::batch_norm(x, rm, rv, w, b, false, 0.5, 1e-5);
  (ferry::sum(y * g0.to(dev)) + ferry::sum(ye * ye)).backward();
  Result r{{y, ye, rm, rv, x.grad()}};
  if (c.affine) r.values.insert(r.values.end(), {w.grad(), b.grad()});
  return r;
}

void check(const Case& c, DType dt) {
  const Result got = run(c, vulkan(), dt), want = run(c, ferry::Device::cpu(), dt);
  const char* names[] = {"train y", "eval y", "running mean", "running var", "dx", "dw", "db"};
  // f32: the sums in f32 with their errors kept against the CPU's double sums; 16-bit: a
  // rounding of y or dx apart.
  const double tol = dt == DType::f64 ? 1e-12 : dt == DType::f32 ? 1e-4 : 2e-2;
  for (std::size_t i = 0; i < want.values.size(); ++i)
    ferry_test::expect_close(ferry_test::as_double(got.values[i]),
                             ferry_test::as_double(want.values[i]), tol, tol,
                             c.name + " " + std::string(ferry::dtype_name(dt)) + " " + names[i]);
}

TEST(VulkanBatchNorm, KernelsMatchTheCpu) {
  SKIP_WITHOUT_VULKAN();
  const ferry::DeviceImpl& impl = ferry::device_impl(vulkan());
  for (ferry::OpId op : {ferry::OpId::batch_norm, ferry::OpId::batch_norm_backward})
    ASSERT_TRUE(impl.supports(op, DType::f32)) << ferry::op_name(op);
  if (vulkan_storage_range() < (1u << 24))
    GTEST_SKIP() << "the storage-buffer range is cut to " << vulkan_storage_range()
                 << " bytes; VulkanBatchNorm.SplitMatchesTheCpu runs in that setting";
  const std::vector<Case> cases = {
      {"3 channels over chunks of samples", {48, 3, 17, 19}},
      {"48 channels, one chunk each", {4, 48, 5, 6}},
      {"[N, C], no affine", {300, 7}, 0.0, false},
      {"a mean of 1000 over chunks", {64, 2, 24, 24}, 1000.0},
  };
  for (DType dt : vulkan_float_dtypes())
    for (const Case& c : cases)
      if (c.mean == 0.0 || dt == DType::f32 || dt == DType::f64)  // 16-bit: its gradients overflow
        check(c, dt);
}

// Tensors cut between samples (48 KiB a sample of [4, 3, 64, 64] f32) and between one sample's
// channels (100 KiB a sample of [2, 4, 80, 80]) by a 64 KiB binding.
TEST(VulkanBatchNorm, SplitMatchesTheCpu) {
  SKIP_WITHOUT_VULKAN();
  if (vulkan_storage_range() > (1u << 16))
    GTEST_SKIP() << "the storage-buffer range is " << vulkan_storage_range()
                 << " bytes; CTest's cnn_layers_vulkan_split runs this with "
                    "FERRY_VULKAN_MAX_STORAGE_RANGE=65536";
  for (const Case& c : {Case{"cut between samples", {4, 3, 64, 64}, 5.0},
                        Case{"cut between channels", {2, 4, 80, 80}, 5.0}})
    check(c, DType::f32);
}

// The kernels' operand checks (ferry/kit/batch_norm_args.hpp), the same on both devices: a
// statistics vector of the wrong dtype or length, and a gradient of another shape, are typed
// errors, never a read past a tensor.
TEST(VulkanBatchNorm, KernelsRefuseMismatchedOperands) {
  SKIP_WITHOUT_VULKAN();
  const ferry::Attrs train = {
      {"training", true}, {"eps", 1e-5}, {"has_weight", false}, {"has_bias", false}};
  for (const ferry::Device& dev : {ferry::Device::cpu(), vulkan()}) {
    const ferry::TensorOptions on{.device = dev};
    const Tensor x = ferry::randn({2, 3, 4}, on), y = ferry::empty({2, 3, 4}, on);
    EXPECT_THROW(training_test::call(dev, "batch_norm", {x},
                                     {y, ferry::empty({3}, {.dtype = DType::f64, .device = dev}),
                                      ferry::empty({3}, on)},
                                     train),
                 ferry::DTypeError)
        << dev.str();
    EXPECT_THROW(training_test::call(dev, "batch_norm", {x},
                                     {y, ferry::empty({4}, on), ferry::empty({4}, on)}, train),
                 ferry::ShapeError)
        << dev.str();
    EXPECT_THROW(training_test::call(
                     dev, "batch_norm_backward",
                     {ferry::randn({2, 3, 5}, on), x, ferry::zeros({3}, on), ferry::ones({3}, on)},
                     {y, ferry::empty({3}, on), ferry::empty({3}, on)}, train),
                 ferry::ShapeError)
        << dev.str();
  }
}

// ---- pooling ----

struct PoolCase {
  std::string name;
  Shape x;
  std::vector<std::int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
  bool ties = false;  // x rounded to multiples of 0.5, with NaNs at some positions
  // Average pooling (no dilation) with these arguments, in place of max pooling.
  bool avg = false, count_include_pad = true;
  std::optional<std::int64_t> divisor_override = std::nullopt;
  // Adaptive pooling to this output size, in place of the window arguments.
  std::vector<std::int64_t> adaptive = {};
};

std::vector<Tensor> pool(const PoolCase& c, const ferry::Device& dev, DType dt) {
  ferry::manual_seed(13);
  Tensor x0 = ferry::randn(c.x, {.dtype = DType::f64});
  if (c.ties) {
    x0 = ferry::round(x0 * 2.0) / 2.0;
    const Tensor nan_at = ferry::lt(ferry::rand(c.x, {.dtype = DType::f64}), 0.02);
    x0 = ferry::where(nan_at, std::nan(""), x0);
  }
  Tensor x = x0.to(dt).to(dev).requires_grad_();
  const bool one_d = c.x.size() == 3;
  if (c.avg) {
    const Tensor y = !c.adaptive.empty() ? (one_d ? ferry::adaptive_avg_pool1d(x, c.adaptive)
                                                  : ferry::adaptive_avg_pool2d(x, c.adaptive))
                     : one_d ? ferry::avg_pool1d(x, c.kernel, c.stride, c.padding, c.ceil_mode,
                                                 c.count_include_pad)
                             : ferry::avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode,
                                                 c.count_include_pad, c.divisor_override);
    const Tensor g = ferry::randn(y.sizes(), {.dtype = DType::f64}).to(dt).to(dev);
    ferry::sum(y * g).backward();
    return {y, x.grad()};
  }
  const auto [values, indices] =
      !c.adaptive.empty() ? (one_d ? ferry::adaptive_max_pool1d_with_indices(x, c.adaptive)
                                   : ferry::adaptive_max_pool2d_with_indices(x, c.adaptive))
      : one_d ? ferry::max_pool1d_with_indices(x, c.kernel, c.stride, c.padding, c.dilation,
                                               c.ceil_mode)
              : ferry::max_pool2d_with_indices(x, c.kernel, c.stride, c.padding, c.dilation,
                                               c.ceil_mode);
  const Tensor g = ferry::randn(values.sizes(), {.dtype = DType::f64}).to(dt).to(dev);
  ferry::sum(values * g).backward();
  return {values, indices, x.grad()};
}

// c pooling to adaptive windows of `size`.
PoolCase adaptive(PoolCase c, std::vector<std::int64_t> size) {
  c.adaptive = std::move(size);
  return c;
}

// Max pooling bit for bit; average pooling within `ulps` of the dtype's precision (relative,
// or absolute below 1), the device's division apart.
void check_pool(const PoolCase& c, DType dt, double ulps = 8) {
  const std::vector<Tensor> got = pool(c, vulkan(), dt), want = pool(c, ferry::Device::cpu(), dt);
  const std::vector<const char*> names = c.avg
                                             ? std::vector<const char*>{"y", "dx"}
                                             : std::vector<const char*>{"values", "indices", "dx"};
  const double tol = c.avg ? ulps * training_test::eps_of(dt) : 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::vector<double> g = ferry_test::as_double(got[i]), w = ferry_test::as_double(want[i]);
    ASSERT_EQ(g.size(), w.size());
    std::size_t bad = 0;
    for (std::size_t k = 0; k < g.size(); ++k)
      if (!(std::abs(g[k] - w[k]) <= tol * std::max(1.0, std::abs(w[k])) ||
            (std::isnan(g[k]) && std::isnan(w[k]))) &&
          bad++ == 0)
        ADD_FAILURE() << c.name << " " << ferry::dtype_name(dt) << " " << names[i] << " at " << k
                      << ": " << g[k] << " against the CPU's " << w[k];
    EXPECT_EQ(bad, 0u) << c.name << " " << ferry::dtype_name(dt) << " " << names[i];
  }
}

TEST(VulkanPool, MaxPoolMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_VULKAN();
  const ferry::DeviceImpl& impl = ferry::device_impl(vulkan());
  for (ferry::OpId op :
       {ferry::OpId::max_pool1d, ferry::OpId::max_pool2d, ferry::OpId::max_pool_backward})
    ASSERT_TRUE(impl.supports(op, DType::f32)) << ferry::op_name(op);
  if (vulkan_storage_range() < (1u << 24))
    GTEST_SKIP() << "the storage-buffer range is cut to " << vulkan_storage_range()
                 << " bytes; VulkanPool.SplitMatchesTheCpu runs in that setting";
  const std::vector<PoolCase> cases = {
      {"ResNet's 3x3/2, planes above a workgroup", {2, 3, 40, 40}, {3}, {2}, {1}, {1}},
      {"overlapping (2, 3) windows, stride 1, dilation (2, 1)",
       {2, 2, 30, 31},
       {2, 3},
       {1},
       {1},
       {2, 1}},
      {"1-D, dilation 2, ceil_mode", {4, 5, 33}, {4}, {3}, {2}, {2}, true},
      {"ties and NaNs", {3, 2, 20, 21}, {3}, {1}, {1}, {1}, false, true},
      adaptive({"adaptive (5, 3) of 17 x 13, planes above a workgroup", {2, 3, 17, 13}}, {5, 3}),
      adaptive({"adaptive (9, 7) of 4 x 5, larger", {2, 2, 4, 5}, {}, {}, {}, {}, false, true},
               {9, 7}),
      adaptive({"adaptive 1-D 33 to 7", {4, 5, 33}}, {7}),
  };
  for (DType dt : vulkan_float_dtypes())
    for (const PoolCase& c : cases) check_pool(c, dt);
}

TEST(VulkanPool, AvgPoolMatchesTheCpu) {
  SKIP_WITHOUT_VULKAN();
  const ferry::DeviceImpl& impl = ferry::device_impl(vulkan());
  for (ferry::OpId op :
       {ferry::OpId::avg_pool1d, ferry::OpId::avg_pool2d, ferry::OpId::avg_pool_backward})
    ASSERT_TRUE(impl.supports(op, DType::f32)) << ferry::op_name(op);
  if (vulkan_storage_range() < (1u << 24))
    GTEST_SKIP() << "the storage-buffer range is cut to " << vulkan_storage_range()
                 << " bytes; VulkanPool.SplitMatchesTheCpu runs in that setting";
  const auto avg = [](PoolCase c, bool include_pad = true,
                      std::optional<std::int64_t> divisor = std::nullopt) {
    c.avg = true;
    c.count_include_pad = include_pad;
    c.divisor_override = divisor;
    return c;
  };
  const std::vector<PoolCase> cases = {
      avg({"3x3/2, planes above a workgroup", {2, 3, 40, 40}, {3}, {2}, {1}, {}}),
      avg({"3x3/2 ceil_mode, padding not counted", {2, 3, 17, 16}, {3}, {2}, {1}, {}, true}, false),
      avg({"(2, 3) windows, stride 1, padding (1, 0)", {2, 2, 30, 31}, {2, 3}, {1}, {1, 0}, {}}),
      avg({"2x2/2 with divisor_override -3", {3, 4, 9, 8}, {2}, {2}, {0}, {}}, true, -3),
      avg({"1-D, kernel 4 stride 3 padding 2 ceil_mode", {4, 5, 33}, {4}, {3}, {2}, {}, true},
          false),
      avg(adaptive({"adaptive (5, 3) of 17 x 13", {2, 3, 17, 13}}, {5, 3})),
      avg(adaptive({"adaptive (9, 7) of 4 x 5, larger", {2, 2, 4, 5}}, {9, 7})),
      avg(adaptive({"adaptive 1-D 33 to 7", {4, 5, 33}}, {7})),
  };
  for (DType dt : vulkan_float_dtypes())
    for (const PoolCase& c : cases) check_pool(c, dt);
}

// Indices that are not i64 of the gradient's shape are a ShapeError on both devices.
TEST(VulkanPool, BackwardRefusesMismatchedIndices) {
  SKIP_WITHOUT_VULKAN();
  const ferry::Attrs pool = {{"kernel_size", std::vector<std::int64_t>{2, 2}},
                             {"stride", std::vector<std::int64_t>{2, 2}},
                             {"padding", std::vector<std::int64_t>{0, 0}},
                             {"dilation", std::vector<std::int64_t>{1, 1}}};
  for (const ferry::Device& dev : {ferry::Device::cpu(), vulkan()}) {
    const ferry::TensorOptions on{.device = dev};
    const Tensor g = ferry::randn({1, 2, 3, 3}, on), dx = ferry::empty({1, 2, 6, 6}, on);
    for (const Tensor& idx : {ferry::zeros({1, 2, 3, 3}, {.dtype = DType::i32, .device = dev}),
                              ferry::zeros({1, 2, 3, 2}, {.dtype = DType::i64, .device = dev})})
      EXPECT_THROW(training_test::call(dev, "max_pool_backward", {g, idx}, {dx}, pool),
                   ferry::ShapeError)
          << dev.str() << " " << ferry::dtype_name(idx.dtype());
  }
}

// Cut between samples ([6, 2, 40, 40]: 12.5 KiB a sample) and between one sample's channels
// ([3, 4, 64, 64]: 64 KiB a sample) by a 64 KiB binding.
TEST(VulkanPool, SplitMatchesTheCpu) {
  SKIP_WITHOUT_VULKAN();
  if (vulkan_storage_range() > (1u << 16))
    GTEST_SKIP() << "the storage-buffer range is " << vulkan_storage_range()
                 << " bytes; CTest's cnn_layers_vulkan_split runs this with "
                    "FERRY_VULKAN_MAX_STORAGE_RANGE=65536";
  for (const bool avg : {false, true})
    for (PoolCase c : {PoolCase{"cut between samples", {6, 2, 40, 40}, {3}, {2}, {1}, {1}},
                       PoolCase{"cut between channels", {3, 4, 64, 64}, {3}, {2}, {1}, {1}},
                       adaptive({"adaptive, cut between channels", {3, 4, 64, 64}}, {9, 7})}) {
      c.avg = avg;
      check_pool(c, DType::f32);
    }
}

// ---- interpolate ----

struct ResampleCase {
  std::string name;
  Shape x;
  ferry::InterpolateOptions o;
};

std::vector<Tensor> resample(const ResampleCase& c, const ferry::Device& dev, DType dt) {
  ferry::manual_seed(17);
  Tensor x = ferry::randn(c.x, {.dtype = DType::f64}).to(dt).to(dev).requires_grad_();
  const Tensor y = ferry::interpolate(x, c.o);
  const Tensor g = ferry::randn(y.sizes(), {.dtype = DType::f64}).to(dt).to(dev);
  ferry::sum(y * g).backward();
  return {y, x.grad()};
}

// y and dx within `ulps` of the dtype's precision of the CPU's (relative, or absolute below 1).
void check_resample(const ResampleCase& c, DType dt, double ulps = 8) {
  const std::vector<Tensor> got = resample(c, vulkan(), dt),
                            want = resample(c, ferry::Device::cpu(), dt);
  const double tol = ulps * training_test::eps_of(dt);
  for (std::size_t i = 0; i < want.size(); ++i)
    ferry_test::expect_close(
        ferry_test::as_double(got[i]), ferry_test::as_double(want[i]), tol, tol,
        c.name + " " + std::string(ferry::dtype_name(dt)) + (i == 0 ? " y" : " dx"));
}

TEST(VulkanResample, InterpolateMatchesTheCpu) {
  SKIP_WITHOUT_VULKAN();
  const ferry::DeviceImpl& impl = ferry::device_impl(vulkan());
  for (ferry::OpId op : {ferry::OpId::interpolate, ferry::OpId::interpolate_backward})
    ASSERT_TRUE(impl.supports(op, DType::f32)) << ferry::op_name(op);
  if (vulkan_storage_range() < (1u << 24))
    GTEST_SKIP() << "the storage-buffer range is cut to " << vulkan_storage_range()
                 << " bytes; VulkanResample.SplitMatchesTheCpu runs in that setting";
  const std::vector<ResampleCase> cases = {
      {"bilinear x2, planes above a workgroup",
       {2, 3, 20, 24},
       {.scale_factor = {2.0}, .mode = "bilinear"}},
      {"bilinear down to (5, 3), align_corners",
       {2, 2, 11, 9},
       {.size = {5, 3}, .mode = "bilinear", .align_corners = true}},
      {"bilinear scale (1.5, 0.6)",
       {1, 3, 7, 10},
       {.scale_factor = {1.5, 0.6}, .mode = "bilinear"}},
      {"nearest x2", {2, 3, 9, 8}, {.scale_factor = {2.0}, .mode = "nearest"}},
      {"nearest to (5, 13)", {3, 2, 7, 6}, {.size = {5, 13}, .mode = "nearest"}},
      {"nearest-exact scale 1.7", {2, 2, 6, 7}, {.scale_factor = {1.7}, .mode = "nearest-exact"}},
      {"bicubic to (15, 9)", {2, 3, 7, 6}, {.size = {15, 9}, .mode = "bicubic"}},
      {"bicubic x2 align_corners, one row",
       {2, 2, 1, 9},
       {.scale_factor = {2.0}, .mode = "bicubic", .align_corners = true}},
      // the 2-D kernels over planes of height 1, and in two passes (height and width, depth)
      {"linear 1-D to 19", {2, 3, 8}, {.size = {19}, .mode = "linear"}},
      {"trilinear to (5, 7, 4), align_corners",
       {2, 2, 3, 5, 6},
       {.size = {5, 7, 4}, .mode = "trilinear", .align_corners = true}},
      {"nearest 3-D x2", {1, 3, 2, 3, 4}, {.scale_factor = {2.0}, .mode = "nearest"}},
  };
  for (DType dt : vulkan_float_dtypes())
    for (const ResampleCase& c : cases) check_resample(c, dt);
}

// Tables of another dtype or shape than the contract's (ferry/kit/resample_args.hpp) are a
// ShapeError on both devices: f64 weights for an f32 tensor, a table one output short.
TEST(VulkanResample, KernelsRefuseMismatchedTables) {
  SKIP_WITHOUT_VULKAN();
  for (const ferry::Device& dev : {ferry::Device::cpu(), vulkan()}) {
    const ferry::TensorOptions on{.device = dev};
    const Tensor x = ferry::randn({1, 2, 3, 3}, on), y = ferry::empty({1, 2, 6, 6}, on);
    // Made on the CPU and moved (a device with the base shaders fills no i64 or f64).
    const Tensor index = ferry::zeros({2, 6}, {.dtype = DType::i64}).to(dev);
    const Tensor short_index = ferry::zeros({2, 5}, {.dtype = DType::i64}).to(dev);
    const Tensor w32 = ferry::ones({2, 6}, on),
                 w64 = ferry::ones({2, 6}, {.dtype = DType::f64}).to(dev);
    EXPECT_NO_THROW(training_test::call(dev, "interpolate", {x, index, w32, index, w32}, {y}, {}))
        << dev.str();
    EXPECT_THROW(training_test::call(dev, "interpolate", {x, index, w64, index, w64}, {y}, {}),
                 ferry::ShapeError)
        << dev.str();
    EXPECT_THROW(training_test::call(dev, "interpolate_backward", {y, index, w32, short_index, w32},
                                     {x}, {}),
                 ferry::ShapeError)
        << dev.str();
  }
}

// Cut between samples ([6, 2, 40, 40] f32 upsampled x2: 50 KiB a sample of y) and between one
// sample's channels ([2, 4, 48, 48] x2: 144 KiB a sample of y, 36 KiB a plane) by a 64 KiB
// binding.
TEST(VulkanResample, SplitMatchesTheCpu) {
  SKIP_WITHOUT_VULKAN();
  if (vulkan_storage_range() > (1u << 16))
    GTEST_SKIP() << "the storage-buffer range is " << vulkan_storage_range()
                 << " bytes; CTest's cnn_layers_vulkan_split runs this with "
                    "FERRY_VULKAN_MAX_STORAGE_RANGE=65536";
  for (const ResampleCase& c :
       {ResampleCase{
            "cut between samples", {6, 2, 40, 40}, {.scale_factor = {2.0}, .mode = "bilinear"}},
        ResampleCase{
            "cut between channels", {2, 4, 48, 48}, {.scale_factor = {2.0}, .mode = "bicubic"}}})
    check_resample(c, DType::f32);
}

}  // namespace
