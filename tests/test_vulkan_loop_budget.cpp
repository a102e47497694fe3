// Note [Loop budget] (runtime/vulkan/vk_kernels.hpp): lavapipe's compiler ends all the loops of
// a shader invocation after 65,535 iterations, silently. These calls each ran past it before
// their kernels counted their loops, and gave wrong results on lavapipe (the figures in the
// comments); each is held to a closed form or to the CPU. On a device without the limit they
// run as they always did. Attention's own cases are in test_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ferry/ferry.hpp"
#include "vulkan/vk_gemm_tiles.hpp"
#include "vulkan/vk_kernels.hpp"

using namespace ferry;
namespace F = ferry::nn::functional;

namespace {

#define REQUIRE_VULKAN()                                                                       \
  do {                                                                                         \
    if (!is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device: " << describe_devices(); \
  } while (0)

// Every element of t, on the CPU as f64.
std::vector<double> values(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::f64).to_vector<double>();
}

}  // namespace

TEST(VulkanLoopBudget, TripsPerInvocation) {
  vulkan::KernelLimits lim;
  EXPECT_EQ(vulkan::loop_trips_per_invocation(lim, 1u << 30, 100, 5), 1u << 30);  // no budget
  lim.loop_budget = 65535;
  EXPECT_EQ(vulkan::loop_trips_per_invocation(lim, 10, 100, 5), 10u);
  EXPECT_EQ(vulkan::loop_trips_per_invocation(lim, 1000, 100, 35), 655u);
  EXPECT_EQ(vulkan::loop_trips_per_invocation(lim, 1000, 100, 65535), 0u);
  // The 32 x 32 tile (64 threads, slices of 8): 2 loads a thread and 8 x (1 + 1 + 1 + 4 x 2).
  const vulkan::Tile t{32, 32, 8, 4, 4};
  EXPECT_EQ(t.loads_per_slice(), 2u);
  EXPECT_EQ(t.loop_iterations_per_slice(), 1u + 4u + 88u);
}

// [8, K] x [K, 9] and [1, K] x [K, 1] of ones, K = 2^20 and 2^22: lavapipe's GEMM summed half
// of K (one counted trip per slice of 8), its matrix-vector kernel a quarter. Both are exact
// in f32 (integers below 2^24). Both now walk K in pieces, each adding to C.
TEST(VulkanLoopBudget, MatmulCutsLongSums) {
  REQUIRE_VULKAN();
  const Device gpu("vulkan:0");
  for (auto [M, N, K] :
       {std::array<std::int64_t, 3>{8, 9, 1 << 20}, std::array<std::int64_t, 3>{1, 1, 1 << 22}}) {
    const Tensor c = matmul(ones({M, K}, {DType::f32, gpu}), ones({K, N}, {DType::f32, gpu}));
    for (double v : values(c)) ASSERT_EQ(v, double(K)) << M << "x" << N << " K=" << K;
  }
  // Integers take the kernel's plain loop, one k a trip.
  const Tensor ci =
      matmul(ones({3, 1 << 18}, {DType::i32, gpu}), ones({1 << 18, 5}, {DType::i32, gpu}));
  for (double v : values(ci)) ASSERT_EQ(v, double(1 << 18));
}

// Four output channels from 8,192 input channels (K = 73,728 products an output): the direct
// kernel's thread per output stopped after some 65,000 (11% off); now the GEMM takes it.
TEST(VulkanLoopBudget, ConvWithFewOutputChannelsAndManyInputs) {
  REQUIRE_VULKAN();
  manual_seed(5);
  const Tensor x = randn({1, 8192, 6, 6}), w = randn({4, 8192, 3, 3}), b = randn({4});
  const std::vector<double> want = values(conv2d(x, w, b, {1}, {1}));
  const Device gpu("vulkan:0");
  const std::vector<double> got = values(conv2d(x.to(gpu), w.to(gpu), b.to(gpu), {1}, {1}));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-3 * (1 + std::fabs(want[i]))) << i;
}

// 512 input channels of 3 x 3 taps: 4,608 terms a sum, past the 3,336 that the conservative
// count lets one invocation of the GEMM walk on lavapipe, so the forward pass (with its bias)
// and the input gradient (stride 2: four phases) run in two ranges, the second adding to the
// first; the weight gradient's pieces are as short. All three against the CPU.
TEST(VulkanLoopBudget, ConvSumsInRanges) {
  REQUIRE_VULKAN();
  manual_seed(3);
  const Tensor x = randn({2, 512, 12, 12}), w = randn({64, 512, 3, 3}), b = randn({64});
  auto run = [&](const Device& d) {
    const Tensor xd = x.to(d).detach().requires_grad_(true),
                 wd = w.to(d).detach().requires_grad_(true),
                 bd = b.to(d).detach().requires_grad_(true);
    const Tensor y = conv2d(xd, wd, bd, {2}, {1});
    sum(mul(y, y)).backward();
    return std::vector<std::vector<double>>{values(y), values(xd.grad()), values(wd.grad()),
                                            values(bd.grad())};
  };
  const auto want = run(Device::cpu()), got = run(Device("vulkan:0"));
  for (std::size_t t = 0; t < want.size(); ++t) {
    ASSERT_EQ(got[t].size(), want[t].size());
    double scale = 0;
    for (double v : want[t]) scale = std::max(scale, std::fabs(v));
    for (std::size_t i = 0; i < want[t].size(); ++i)
      ASSERT_NEAR(got[t][i], want[t][i], 1e-5 * scale) << "output " << t << " element " << i;
  }
}

// The bias's and the (direct) weight's gradients of a 1 x 1 convolution, one channel, over
// 9 samples of 1024 x 1024: a workgroup's thread walks 8,192 positions of every sample, 73,728
// in all. (32 samples of 2 x 512 x 512 gave a bias gradient 98% off on lavapipe.) Now the
// batch comes in chunks; ones make the sums exact.
TEST(VulkanLoopBudget, ConvBatchSumsInChunks) {
  REQUIRE_VULKAN();
  const Device gpu("vulkan:0");
  const Tensor w = ones({1, 1, 1, 1}, {DType::f32, gpu}).requires_grad_(true),
               b = zeros({1}, {DType::f32, gpu}).requires_grad_(true);
  sum(conv2d(ones({9, 1, 1024, 1024}, {DType::f32, gpu}), w, b)).backward();
  EXPECT_EQ(values(b.grad()), std::vector<double>{9.0 * 1024 * 1024});
  EXPECT_EQ(values(w.grad()), std::vector<double>{9.0 * 1024 * 1024});
}

// 2^18 values into 2 elements, runs of 131,072: index_add (and so embedding's and
// index_put's sums, which compose through the same sorted fold) summed 65,536 of 2^20 such
// values on lavapipe; scatter_reduce's folds the same. Now the values come in ranges, a run
// continuing from the partial fold the last range stored; a mean divides once, by its whole
// run. Against the CPU, whose fold order the kernel keeps.
TEST(VulkanLoopBudget, ScatterFoldsLongRuns) {
  REQUIRE_VULKAN();
  const std::int64_t n = 1 << 18;
  const Tensor index = div(arange(0, n, 1, {DType::i64}), n / 2).to(DType::i64);
  const Tensor src = remainder(arange(0, n, 1), 7.0);
  const Device gpu("vulkan:0");
  EXPECT_EQ(values(index_add(zeros({2}, {DType::f32, gpu}), 0, index.to(gpu), src.to(gpu))),
            values(index_add(zeros({2}), 0, index, src)));
  for (auto [reduce, self] : {std::pair<const char*, bool>{"mean", true},
                              {"mean", false},
                              {"amax", false},
                              {"sum", true}}) {
    const Tensor x = arange(1, 3);
    const std::vector<double> want = values(scatter_reduce(x, 0, index, src, reduce, self));
    const std::vector<double> got =
        values(scatter_reduce(x.to(gpu), 0, index.to(gpu), src.to(gpu), reduce, self));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i])) << reduce << " " << self << " " << i;
  }
}

// Pooling and resampling give a thread 1,024 positions on lavapipe (Note [Row kernel
// geometry]): an 8 x 8 window at stride 1 over a 2048 x 2048 plane ran 1,024 x 73 iterations a
// thread and was wrong forward and backward (this test's 1024 x 1024 plane gives a thread as
// many positions), a bilinear upsampling by 32 wrong backward. Now a thread takes as many
// positions as its windows fit in the budget; a window that alone does not fit is refused.
// Against the CPU.
TEST(VulkanLoopBudget, PoolingAndResamplingFitTheirThreads) {
  REQUIRE_VULKAN();
  const Device gpu("vulkan:0");
  auto both = [&](const std::function<std::vector<Tensor>(const Device&)>& f) {
    const std::vector<Tensor> want = f(Device::cpu()), got = f(gpu);
    for (std::size_t t = 0; t < want.size(); ++t) {
      const std::vector<double> a = values(want[t]), b = values(got[t]);
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(b[i], a[i], 1e-4 * (1 + std::fabs(a[i]))) << "output " << t << " at " << i;
    }
  };
  both([](const Device& d) {
    const Tensor x = remainder(arange(0, 1024 * 1024, 1, {DType::f32, d}), 1009.0)
                         .reshape({1, 1, 1024, 1024})
                         .requires_grad_(true);
    const Tensor avg = avg_pool2d(x, {8, 8}, {1, 1}), max = max_pool2d(x, {8, 8}, {1, 1});
    sum(add(avg, max)).backward();
    return std::vector<Tensor>{avg, max, x.grad()};
  });
  both([](const Device& d) {
    const Tensor x = remainder(arange(0, 64 * 64, 1, {DType::f32, d}), 13.0)
                         .reshape({1, 1, 64, 64})
                         .requires_grad_(true);
    const Tensor y = interpolate(x, InterpolateOptions{.size = {2048, 2048}, .mode = "bilinear"});
    sum(mul(y, y)).backward();
    return std::vector<Tensor>{x.grad()};
  });
  bool budget = false;
  for (const DeviceInfo& d : devices())
    if (d.device == "vulkan:0") budget = d.properties.at("loop_budget") != "none";
  if (budget)
    EXPECT_THROW(avg_pool2d(ones({1, 1, 512, 512}, {DType::f32, gpu}), {512, 512}),
                 UnsupportedError);
}

// A layer_norm row of 2^23 elements: each of 256 lanes walks 32,768 of them twice. The kernel
// cannot cut a row, so where the device has a budget it says so instead of normalising half.
TEST(VulkanLoopBudget, LayerNormRowPastTheBudgetIsRefused) {
  REQUIRE_VULKAN();
  const Device gpu("vulkan:0");
  const Tensor x = ones({1, 1 << 23}, {DType::f32, gpu});
  bool budget = false;
  for (const DeviceInfo& d : devices())
    if (d.device == "vulkan:0") budget = d.properties.at("loop_budget") != "none";
  if (!budget) {
    for (double v : values(F::layer_norm(x, {1 << 23}))) ASSERT_EQ(v, 0.0);
    return;
  }
  try {
    F::layer_norm(x, {1 << 23});
    FAIL() << "a row past the loop budget was accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("Loop budget"), std::string::npos) << e.what();
  }
}

// layer_norm's weight and bias gradients over 2^21 rows of 4: a column thread walks its
// chunk's rows, and the chunks the device's threads alone ask for (16 on lavapipe) left
// 131,072 rows a thread. Now no chunk is longer than the budget allows. Every row is
// (0, 1, 2, 3): the bias gradient is exact, the weight's 2^21 times the normalised row.
TEST(VulkanLoopBudget, LayerNormBackwardChunksItsColumns) {
  REQUIRE_VULKAN();
  const Device gpu("vulkan:0");
  const std::int64_t rows = 1 << 21;
  const Tensor x =
      mul(ones({rows, 1}, {DType::f32, gpu}), arange(0, 4, 1, {DType::f32, gpu}).reshape({1, 4}));
  const Tensor w = ones({4}, {DType::f32, gpu}).requires_grad_(true),
               b = zeros({4}, {DType::f32, gpu}).requires_grad_(true);
  sum(F::layer_norm(x, {4}, w, b)).backward();
  EXPECT_EQ(values(b.grad()), std::vector<double>(4, double(rows)));
  const std::vector<double> dw = values(w.grad());
  for (int j = 0; j < 4; ++j)
    EXPECT_NEAR(dw[j], double(rows) * (j - 1.5) / std::sqrt(1.25 + 1e-5), 1e-4 * rows) << j;
}
