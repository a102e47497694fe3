// Vulkan's convolution kernels (runtime/vulkan/vk_kernels_conv.cpp, Note [Vulkan convolution])
// at geometries that take each of their paths: the implicit GEMM on 32, 64 and 128 tiles, the
// input gradient by stride phases, the weight gradient cut into pieces, the direct kernels for
// depthwise and single-channel inputs, 1-D and 3-D. Forward and the three gradients, in every float
// dtype the device takes, against the CPU computing in f64 on the same (rounded) inputs. With a
// storage-buffer range small enough to cut the batch (CTest's conv_vulkan_split), the chunked sums
// once more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "training_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using training_test::vulkan;
using training_test::vulkan_float_dtypes;
using training_test::vulkan_storage_range;
using training_test::vulkan_takes;

struct Case {
  std::string name;
  Shape x, w;
  bool bias;
  std::vector<std::int64_t> stride, pad, dilation;
  std::int64_t groups;
};

Tensor conv(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  switch (c.x.size()) {
    case 3:
      return ferry::conv1d(x, w, b, c.stride, c.pad, c.dilation, c.groups);
    case 4:
      return ferry::conv2d(x, w, b, c.stride, c.pad, c.dilation, c.groups);
    default:
      return ferry::conv3d(x, w, b, c.stride, c.pad, c.dilation, c.groups);
  }
}

Tensor values(const Shape& s, std::uint64_t seed, DType dt) {
  ferry::manual_seed(seed);
  return (ferry::rand(s, {.dtype = DType::f64}) * 2.0 - 1.0).to(dt);
}

// |got - want| <= tol * max |want|, element by element.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  const std::vector<double> g = got.cpu().to(DType::f64).to_vector<double>();
  const std::vector<double> w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size()) << what;
  double scale = 0;
  for (double v : w) scale = std::max(scale, std::abs(v));
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= tol * scale) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << g.size() << " elements off, first ["
                     << first << "] " << (g.empty() ? 0 : g[first]) << " vs "
                     << (w.empty() ? 0 : w[first]) << " (scale " << scale << ")";
}

double tolerance(DType dt) {
  switch (dt) {
    case DType::f64:
      return 1e-12;
    case DType::f32:
      return 2e-5;
    case DType::f16:
      return 4e-3;
    default:
      return 3e-2;  // bf16
  }
}

// y and the gradients of x, w and b on `dev` in `dt`, against the CPU in f64 on the same
// inputs rounded to `dt`.
void check(const Case& c, const ferry::Device& dev, DType dt) {
  const std::string what = c.name + " " + std::string(ferry::dtype_name(dt));
  ASSERT_TRUE(ferry::device_impl(dev).supports(ferry::OpId::conv2d, dt)) << what;
  const Tensor x = values(c.x, 1, dt), w = values(c.w, 2, dt) * 0.5;
  const Tensor b = c.bias ? values({c.w[0]}, 3, dt) : Tensor();
  auto run = [&](const ferry::Device& d, DType t) {
    const Tensor xd = x.to(d, t).requires_grad_(), wd = w.to(d, t).requires_grad_();
    const Tensor bd = c.bias ? b.to(d, t).requires_grad_() : Tensor();
    const Tensor y = conv(c, xd, wd, bd);
    const Tensor gy = values(y.sizes(), 4, dt).to(d, t);
    std::vector<Tensor> in{xd, wd};
    if (c.bias) in.push_back(bd);
    std::vector<Tensor> out = ferry::autograd::grad({y}, in, {gy});
    out.insert(out.begin(), y.detach());
    return out;
  };
  const std::vector<Tensor> want = run(ferry::Device::cpu(), DType::f64);
  const std::vector<Tensor> got = run(dev, dt);
  const char* names[] = {"y", "grad x", "grad w", "grad b"};
  for (std::size_t i = 0; i < want.size(); ++i)
    expect_close(got[i], want[i], tolerance(dt), what + " " + names[i]);
}

TEST(VulkanConv, KernelsMatchTheCpu) {
  SKIP_WITHOUT_VULKAN();
  if (vulkan_storage_range() < (1u << 24))
    GTEST_SKIP() << "the storage-buffer range is cut to " << vulkan_storage_range()
                 << " bytes; VulkanConv.SplitBatchesMatchTheCpu runs in that setting";
  const std::vector<Case> cases = {
      {"GEMM, groups 2, stride (2, 1)", {3, 4, 9, 7}, {6, 2, 3, 3}, true, {2, 1}, {1}, {1}, 2},
      {"GEMM, 1x1 stride 2", {2, 16, 14, 14}, {32, 16, 1, 1}, false, {2}, {0}, {1}, 1},
      // Input-gradient phases: 3 x 2 of them; along W every other one gets no tap (gcd 2).
      {"GEMM, stride (3, 2), dilation 2",
       {2, 8, 13, 11},
       {8, 8, 3, 3},
       false,
       {3, 2},
       {2, 1},
       {2},
       1},
      {"conv3d GEMM, stride (2, 2, 1)",
       {2, 8, 5, 6, 5},
       {8, 8, 2, 3, 2},
       true,
       {2, 2, 1},
       {1, 0, 1},
       {1, 1, 2},
       1},
      {"GEMM, weight gradient in pieces", {4, 8, 40, 40}, {8, 8, 3, 3}, true, {1}, {2}, {2}, 1},
      {"GEMM, 64x64 tiles", {3, 8, 32, 32}, {64, 8, 3, 3}, false, {1}, {1}, {1}, 1},
      {"GEMM, 128x128 tiles", {6, 2, 64, 64}, {128, 2, 3, 3}, true, {1}, {1}, {1}, 1},
      {"depthwise x2, stride 2, dilation 2", {2, 4, 11, 9}, {8, 1, 3, 3}, true, {2}, {2}, {2}, 4},
      {"one input channel (conv1d)", {3, 1, 20}, {5, 1, 4}, true, {3}, {1}, {1}, 1},
      {"conv3d, groups 2",
       {2, 4, 5, 6, 5},
       {6, 2, 2, 3, 2},
       false,
       {1, 2, 1},
       {1, 0, 1},
       {2, 1, 1},
       2},
  };
  for (DType dt : vulkan_float_dtypes())
    for (const Case& c : cases) {
      if (dt != DType::f32 && c.x[0] == 6) continue;  // the large one once
      check(c, vulkan(), dt);
    }
}

// A batch cut into chunks that each fit one binding: the weight and bias gradients add the
// chunks' sums (each, for the GEMM, in pieces), the depthwise one's too.
TEST(VulkanConv, SplitBatchesMatchTheCpu) {
  SKIP_WITHOUT_VULKAN();
  const std::uint64_t range = vulkan_storage_range();
  if (range > (1u << 16))
    GTEST_SKIP() << "the storage-buffer range is " << range
                 << " bytes; CTest's conv_vulkan_split runs this with "
                    "FERRY_VULKAN_MAX_STORAGE_RANGE=65536";
  const std::vector<Case> cases = {
      // 32 KiB per sample of x and of y: one sample per chunk, 4096 terms in 4 pieces.
      {"GEMM over chunks of one sample", {4, 2, 64, 64}, {2, 2, 3, 3}, true, {1}, {1}, {1}, 1},
      {"depthwise over chunks of three", {5, 3, 40, 40}, {3, 1, 3, 3}, true, {1}, {1}, {1}, 3},
  };
  for (const Case& c : cases) {
    std::uint64_t bytes = 4;
    for (std::int64_t s : c.x) bytes *= std::uint64_t(s);
    ASSERT_GT(bytes, range) << c.name << ": the batch must not fit one binding";
    for (DType dt : {DType::f32, DType::f16})
      if (vulkan_takes(dt)) check(c, vulkan(), dt);
  }
}

}  // namespace
