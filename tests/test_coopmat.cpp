// matmul's cooperative-matrix path on Vulkan (Note [Cooperative-matrix GEMM] in
// runtime/vulkan/vk_kernels_coopmat.cpp): the choices it makes without a device (the mode from
// FERRY_VULKAN_COOPMAT, the device's matrix shapes, the tile per problem), and on vulkan:0 with
// FERRY_VULKAN_COOPMAT=emulate (ctest's coopmat_vulkan_emulated) the products it takes and
// the ones it leaves to the GLSL tiles, against the CPU. The emulation runs the kernel's own
// staging, offsets and barriers with scalar fragments, so a wrong index shows here; the
// tensor-core instructions themselves need a GPU (tools/gpu_check.sh).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "coopmat_test_util.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"
#include "vulkan/vk_policy.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry::vulkan::choose_coopmat_tile;
using ferry::vulkan::CoopmatMode;
using ferry::vulkan::CoopmatShape;
using ferry::vulkan::CoopmatTile;
using namespace ferry_test::coopmat;

TEST(CoopmatPolicy, ModeFromTheEnvironment) {
  using ferry::vulkan::coopmat_mode;
  EXPECT_EQ(coopmat_mode(nullptr, true, true), CoopmatMode::off);  // off by default
  EXPECT_EQ(coopmat_mode("", true, true), CoopmatMode::off);
  EXPECT_EQ(coopmat_mode("0", true, true), CoopmatMode::off);
  EXPECT_EQ(coopmat_mode("1", true, true), CoopmatMode::on);
  EXPECT_EQ(coopmat_mode("1", true, false), CoopmatMode::off);  // the device cannot
  EXPECT_EQ(coopmat_mode("1", false, true), CoopmatMode::off);  // the build made no modules
  EXPECT_EQ(coopmat_mode("emulate", true, false), CoopmatMode::emulated);
  EXPECT_EQ(coopmat_mode("emulate", false, false), CoopmatMode::off);
  try {
    coopmat_mode("yes", true, true);
    FAIL() << "no error";
  } catch (const ferry::Error& e) {
    EXPECT_NE(std::string(e.what()).find("FERRY_VULKAN_COOPMAT"), std::string::npos) << e.what();
  }
}

TEST(CoopmatPolicy, NeedsTheShapeAtSubgroupScope) {
  using ferry::vulkan::has_coopmat_shape;
  using ferry::vulkan::kComponentBF16;
  using ferry::vulkan::kComponentF16;
  // As an NVIDIA driver lists some of its shapes (VkComponentTypeKHR: 0 f16, 1 f32, 3 s8, 5 s32).
  const CoopmatShape f16{16, 16, 16, 0, 0, 1, 1, true};
  const CoopmatShape f16_acc16{16, 16, 16, 0, 0, 0, 0, true};
  const CoopmatShape int8{16, 16, 32, 3, 3, 5, 5, true};
  const CoopmatShape f16_16x8{16, 8, 16, 0, 0, 1, 1, true};
  CoopmatShape workgroup = f16;
  workgroup.subgroup_scope = false;
  EXPECT_TRUE(has_coopmat_shape(std::vector{int8, f16_acc16, f16}, kComponentF16));
  EXPECT_FALSE(has_coopmat_shape(std::vector{int8, f16_acc16, f16_16x8}, kComponentF16));
  EXPECT_FALSE(has_coopmat_shape(std::vector{workgroup}, kComponentF16));
  EXPECT_FALSE(has_coopmat_shape(std::vector<CoopmatShape>{}, kComponentF16));
  // bf16 (VK_KHR_shader_bfloat16's component type) is asked for separately.
  const CoopmatShape bf16{16, 16, 16, kComponentBF16, kComponentBF16, 1, 1, true};
  EXPECT_FALSE(has_coopmat_shape(std::vector{int8, f16}, kComponentBF16));
  EXPECT_TRUE(has_coopmat_shape(std::vector{f16, bf16}, kComponentBF16));
  EXPECT_FALSE(has_coopmat_shape(std::vector{bf16}, kComponentF16));
}

TEST(CoopmatPolicy, TileWastesLeastAndKeepsTheDeviceBusy) {
  // The two tiles the build makes: 128x128 (4 subgroups of 4x4 fragments) and 64x64.
  // (Their shared memory: two stages of the A and B tiles, rows padded by 8 halves.)
  const std::vector<CoopmatTile> tiles{{128, 128, 32, 128, 37888}, {64, 64, 32, 128, 19456}};
  const std::uint32_t smem = 49152, inv = 1024;
  // Large: the big tile gives enough workgroups.
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 4096, 4096, 4096, smem, inv), 0);
  // Of two tiles with the same blocks, the first listed (the build lists the fastest first).
  const std::vector<CoopmatTile> same{{128, 128, 32, 128, 37888}, {128, 128, 16, 128, 20992}};
  EXPECT_EQ(choose_coopmat_tile(same, 1, 4096, 4096, 4096, smem, inv), 0);
  EXPECT_EQ(choose_coopmat_tile(same, 1, 4096, 4096, 4096, 32768, inv), 1);  // 37 KiB do not fit
  EXPECT_EQ(choose_coopmat_tile(same, 1, 4096, 4096, 48, smem, inv), 1);     // BK 16 pads K less
  // 1024^2 gives 64 big tiles, 256 small ones: the small tile keeps more of the GPU busy.
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 1024, 1024, 1024, smem, inv), 1);
  // ... unless batches make up the count.
  EXPECT_EQ(choose_coopmat_tile(tiles, 2, 1024, 1024, 1024, smem, inv), 0);
  // Too small for either count: the one giving the most workgroups.
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 128, 128, 64, smem, inv), 1);
  // Only the small tile divides M: the big one would compute 256 rows for 192.
  EXPECT_EQ(choose_coopmat_tile(tiles, 64, 192, 4096, 64, smem, inv), 1);
  // The big tile pads 1000 rows to 1024, the small one to 1024 too: the big one.
  EXPECT_EQ(choose_coopmat_tile(tiles, 16, 1000, 1000, 64, smem, inv), 0);
  // Sizes no block divides still get a tile (edge blocks); an empty product gets none.
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 100, 128, 64, smem, inv), 1);
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 128, 128, 48, smem, inv), 1);
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 128, 128, 0, smem, inv), -1);
  EXPECT_EQ(choose_coopmat_tile(tiles, 1, 0, 128, 64, smem, inv), -1);
  // The big tile's shared memory does not fit a 32 KiB device; nor 128 threads a 64-thread one.
  EXPECT_EQ(choose_coopmat_tile(tiles, 8, 4096, 4096, 64, 32768, inv), 1);
  EXPECT_EQ(choose_coopmat_tile(tiles, 8, 4096, 4096, 64, smem, 64), -1);
}

// ---- on vulkan:0

TEST(Coopmat, DeviceSaysWhetherItIsOnAndWhy) {
  const std::string p = coopmat_property();
  if (p.empty()) GTEST_SKIP() << "no vulkan:0";
  const char* env = std::getenv("FERRY_VULKAN_COOPMAT");
  if (!env || !*env || std::string(env) == "0") {
    EXPECT_EQ(p.rfind("off (", 0), 0u) << p;  // off by default, with the reason
  } else if (std::string(env) == "emulate") {
    // Where the build made the modules (a build without Slang says so instead).
    EXPECT_TRUE(p == "emulated (f16 and bf16 matmul)" || p.find("Slang") != std::string::npos) << p;
  }
}

// The kernel the matmul on `dev` chose.
std::string matmul_kernel(const Tensor& a, const Tensor& b, Tensor* out) {
  return op_kernel(
      "matmul", [&] { return ferry::matmul(a, b); }, out);
}

using Views = std::function<std::pair<Tensor, Tensor>(const Tensor&, const Tensor&)>;

// matmul(views(a, b)) on vulkan:0 against the CPU: the views are taken on the device (moving a
// view makes it contiguous). `coopmat`: whether the product must take the path; `tol`: relative
// and absolute.
void expect_matches_cpu(const Tensor& a, const Tensor& b, bool coopmat, const std::string& what,
                        const Views& views = {}, double tol = 2e-3) {
  const ferry::Device dev("vulkan:0");
  auto [da, db] = views ? views(a.to(dev), b.to(dev)) : std::pair{a.to(dev), b.to(dev)};
  auto [ca, cb] = views ? views(a, b) : std::pair{a, b};
  Tensor got;
  const std::string kernel = matmul_kernel(da, db, &got);
  EXPECT_EQ(kernel.find("coopmat") != std::string::npos, coopmat) << what << ": " << kernel;
  // Both round the f32 sum once to f16; the orders of the sums differ.
  const Tensor want = ferry::matmul(ca, cb);
  ferry_test::expect_close(ferry_test::as_double(got), ferry_test::as_double(want), tol, tol, what);
}

TEST(Coopmat, ProductsMatchTheCpu) {
  if (!path_is_on())
    GTEST_SKIP() << "run by ctest's coopmat_vulkan_emulated (FERRY_VULKAN_COOPMAT=emulate): "
                 << coopmat_property();
  ferry::manual_seed(7);
  // One 64x64 tile; a row of them with K over several steps of 32; the 128x128 blocks once
  // there are 128 of their workgroups (BK = 16 where 37 KiB of shared memory do not fit).
  expect_matches_cpu(halves({64, 32}), halves({32, 64}), true, "[64, 32] x [32, 64]");
  expect_matches_cpu(halves({128, 96}), halves({96, 192}), true, "[128, 96] x [96, 192]");
  const ferry::Device dev("vulkan:0");
  Tensor c;
  EXPECT_NE(matmul_kernel(halves({32, 256, 48}).to(dev), halves({32, 48, 256}).to(dev), &c)
                .find("block 128x128"),
            std::string::npos);
  expect_matches_cpu(halves({32, 256, 48}), halves({32, 48, 256}), true,
                     "[32, 256, 48] x [32, 48, 256] (128x128 blocks)");
  // A batch of one weight (batch stride 0), and operands cut from larger tensors: row strides
  // and offsets multiples of 8 elements.
  expect_matches_cpu(halves({3, 64, 64}), halves({64, 128}), true, "[3, 64, 64] x [64, 128]");
  expect_matches_cpu(halves({2, 72, 200}), halves({2, 64, 64}), true, "a narrowed [2, 64, 64] view",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.narrow(1, 8, 64).narrow(2, 16, 64), b};
                     });
  expect_matches_cpu(halves({64, 64}), halves({4, 64, 64}), true, "batches of B, one A",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.expand({4, 64, 64}), b};
                     });
  // Sizes no block divides: edge blocks load zeros past A and B and store only inside C, in
  // every direction, batched, with B as it is or transposed, one row or one 8-column strip.
  expect_matches_cpu(halves({100, 64}), halves({64, 64}), true, "M = 100");
  expect_matches_cpu(halves({64, 40}), halves({40, 64}), true, "K = 40");
  expect_matches_cpu(halves({3, 77, 120}), halves({3, 120, 136}), true,
                     "[3, 77, 120] x [3, 120, 136]");
  expect_matches_cpu(halves({1, 8}), halves({8, 8}), true, "[1, 8] x [8, 8]");
  expect_matches_cpu(halves({200, 264}), halves({264, 72}), true, "[200, 264] x [264, 72]");
  expect_matches_cpu(halves({2, 130, 24}), halves({136, 24}), true, "[2, 130, 24] x [136, 24]^T",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a, b.transpose(-1, -2)};
                     });
  {  // 128x128 blocks (enough of them) with ragged edges: 250 and 200 pad to 256 either way
    const ferry::Device dev("vulkan:0");
    Tensor c;
    EXPECT_NE(matmul_kernel(halves({32, 250, 40}).to(dev), halves({32, 40, 200}).to(dev), &c)
                  .find("block 128x128"),
              std::string::npos);
    expect_matches_cpu(halves({32, 250, 40}), halves({32, 40, 200}), true,
                       "[32, 250, 40] x [32, 40, 200] (128x128 blocks, ragged)");
  }
  // N or K not a multiple of 8: those operands load half by half, zeros past the edge, and C
  // stores element by element; every size odd; a Linear of 65 outputs (a character
  // vocabulary), its weight transposed.
  expect_matches_cpu(halves({64, 64}), halves({64, 60}), true, "N = 60");
  expect_matches_cpu(halves({64, 36}), halves({36, 64}), true, "K = 36");
  expect_matches_cpu(halves({3, 77, 37}), halves({3, 37, 61}), true, "[3, 77, 37] x [3, 37, 61]");
  expect_matches_cpu(halves({2, 130, 45}), halves({65, 45}), true, "[2, 130, 45] x [65, 45]^T",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a, b.transpose(-1, -2)};
                     });
  expect_matches_cpu(halves({1, 1}), halves({1, 3}), true, "[1, 1] x [1, 3]");
  // A Linear's weight, transposed: the B_TRANS modules, batched or folded into the rows.
  auto b_transposed = [](const Tensor& a, const Tensor& b) {
    return std::pair{a, b.transpose(-1, -2)};
  };
  expect_matches_cpu(halves({5, 64, 96}), halves({128, 96}), true, "[5, 64, 96] x [128, 96]^T",
                     b_transposed);
  expect_matches_cpu(halves({2, 64, 64}), halves({2, 64, 64}), true, "batched, B transposed",
                     b_transposed);
  expect_matches_cpu(halves({64, 64}), halves({64, 72}), true,
                     "a transposed B cut from a wider one", [](const Tensor& a, const Tensor& b) {
                       return std::pair{a, b.narrow(1, 8, 64).transpose(0, 1)};
                     });
  // Rows and operands off 8-element boundaries: a row stride of 68 (and of 66 for C's rows
  // through a narrowed output is not reachable from matmul), offsets of 4 and 3 elements.
  expect_matches_cpu(halves({64, 68}), halves({64, 64}), true, "row stride 68",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.narrow(1, 0, 64), b};
                     });
  expect_matches_cpu(halves({4 + 64 * 64}), halves({64, 64}), true, "an offset of 4 elements",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.narrow(0, 4, 64 * 64).view({64, 64}), b};
                     });
  expect_matches_cpu(halves({64, 64}), halves({3 + 64 * 72}), true, "B at 3, row stride 72",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a, b.narrow(0, 3, 64 * 72).view({64, 72}).narrow(1, 0, 64)};
                     });
  // A transposed (a Linear's weight gradient: grad_yᵀ x), batched, ragged, or with no unit
  // stride at all: gathered half by half.
  expect_matches_cpu(halves({64, 64}), halves({64, 64}), true, "A transposed",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.transpose(0, 1), b};
                     });
  expect_matches_cpu(halves({3, 45, 70}), halves({3, 45, 33}), true,
                     "A transposed, batched, ragged", [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.transpose(-1, -2), b};
                     });
  expect_matches_cpu(halves({72, 40, 2}), halves({40, 24}), true, "A of strides (80, 2)",
                     [](const Tensor& a, const Tensor& b) {
                       return std::pair{a.select(2, 1), b};
                     });
  // f32 keeps the GLSL tiles.
  expect_matches_cpu(ferry::randn({64, 64}), ferry::randn({64, 64}), false, "f32");
}

// bf16 operands and result (the "_bf16" modules, where the device takes them; always in the
// emulation): the kernel differs from f16's only in the fragments' type and the rounding, so
// a few shapes cover it. One bf16 ulp is 2^-8 of the value, and the two sums' orders may round
// either way.
TEST(Coopmat, Bf16ProductsMatchTheCpu) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  if (coopmat_property().find("bf16 matmul") == std::string::npos)
    GTEST_SKIP() << "no bf16 on the path: " << coopmat_property();
  ferry::manual_seed(11);
  auto bf = [](const ferry::Shape& shape) { return ferry::randn(shape).to(DType::bf16); };
  const ferry::Device dev("vulkan:0");
  Tensor c;
  EXPECT_NE(matmul_kernel(bf({64, 32}).to(dev), bf({32, 64}).to(dev), &c).find("_bf16"),
            std::string::npos);
  auto b_transposed = [](const Tensor& a, const Tensor& b) {
    return std::pair{a, b.transpose(-1, -2)};
  };
  const double tol = 1e-2;
  expect_matches_cpu(bf({64, 32}), bf({32, 64}), true, "bf16 [64, 32] x [32, 64]", {}, tol);
  expect_matches_cpu(bf({3, 77, 37}), bf({3, 37, 61}), true, "bf16 [3, 77, 37] x [3, 37, 61]", {},
                     tol);
  expect_matches_cpu(bf({2, 130, 45}), bf({65, 45}), true, "bf16 [2, 130, 45] x [65, 45]^T",
                     b_transposed, tol);
  expect_matches_cpu(bf({32, 250, 40}), bf({32, 40, 200}), true,
                     "bf16 [32, 250, 40] x [32, 40, 200] (128x128 blocks, ragged)", {}, tol);
  expect_matches_cpu(
      bf({3, 45, 70}), bf({3, 45, 33}), true, "bf16, A transposed",
      [](const Tensor& a, const Tensor& b) {
        return std::pair{a.transpose(-1, -2), b};
      },
      tol);
  // Large and tiny magnitudes keep bf16's range (f16 would overflow at 65504).
  expect_matches_cpu(bf({64, 64}) * 1e4, bf({64, 64}) * 1e4, true, "bf16 beyond f16's range", {},
                     tol);
}

// Note [f32 products on cooperative matrices]: with reduced-precision f32 products allowed, an
// f32 matmul runs as bf16 x 3 with an f32 result, about 1e-5 off the CPU's f32 product, where
// one bf16 product would be some 1e-2 off; without, it keeps the GLSL tiles.
TEST(Coopmat, F32ProductsRunAsBf16TimesThreeWhenAllowed) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  if (coopmat_property().find("bf16 matmul") == std::string::npos)
    GTEST_SKIP() << "no bf16 on the path: " << coopmat_property();
  ferry::manual_seed(13);
  const ferry::Device dev("vulkan:0");
  const Tensor a = ferry::randn({2, 70, 45}), b = ferry::randn({2, 45, 50});
  struct Tf32Restore {
    bool saved = ferry::matmul_allow_tf32();
    ~Tf32Restore() { ferry::set_matmul_allow_tf32(saved); }
  } restore;
  Tensor got;
  ferry::set_matmul_allow_tf32(false);
  EXPECT_EQ(matmul_kernel(a.to(dev), b.to(dev), &got).find("coopmat"), std::string::npos);
  ferry::set_matmul_allow_tf32(true);
  EXPECT_NE(matmul_kernel(a.to(dev), b.to(dev), &got).find("_f32out"), std::string::npos);
  // The error against the CPU's f32 product, relative to the largest result.
  auto error = [](const Tensor& x, const Tensor& want) {
    const std::vector<double> g = ferry_test::as_double(x), w = ferry_test::as_double(want);
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::abs(g[i] - w[i])), scale = std::max(scale, std::abs(w[i]));
    return worst / scale;
  };
  EXPECT_LT(error(got, ferry::matmul(a, b)), 1e-4);
  const Tensor one_bf16 = ferry::matmul(a.to(DType::bf16), b.to(DType::bf16)).to(DType::f32);
  EXPECT_GT(error(one_bf16, ferry::matmul(a, b)), 1e-3);  // what the split buys
  // Ragged sizes, K not a multiple of 8, B transposed and A transposed (both gathered by the
  // split), several batches; 5e-4 absolute on sums of 40 terms of about 1 (one bf16 product:
  // some 1e-2).
  expect_matches_cpu(ferry::randn({33, 37}), ferry::randn({37, 19}), true,
                     "f32 [33, 37] x [37, 19]", {}, 5e-4);
  expect_matches_cpu(
      ferry::randn({3, 40, 64}), ferry::randn({3, 50, 40}), true, "f32, A and B transposed",
      [](const Tensor& x, const Tensor& y) {
        return std::pair{x.transpose(-1, -2), y.transpose(-1, -2)};
      },
      5e-4);
  expect_matches_cpu(ferry::randn({32, 250, 40}), ferry::randn({32, 40, 200}), true,
                     "f32 [32, 250, 40] x [32, 40, 200]", {}, 5e-4);
}

TEST(Coopmat, ResultsRoundToF16AsACastDoes) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  // C[i][j] = x_j + s_i * y_j, all f16 values, exact in f32, so the only rounding is the
  // kernel's to f16:
  // ties to even, overflow to infinity, subnormals, infinities and NaNs, against the CPU's
  // cast of the exact f32 product.
  const std::vector<std::pair<float, float>> xy{
      {1.0f, 0x1p-11f},  {1.0f, 0x3p-12f},    {1.0f + 0x1p-10f, 0x1p-11f}, {65504.0f, 8.0f},
      {65504.0f, 16.0f}, {-65504.0f, -32.0f}, {0x1p-14f, -0x1p-15f},       {0.0f, 0x1p-24f},
      {0.0f, 0x3p-24f},  {1.0f, 0x1p-10f},    {0.0f, -0x5p-24f},           {-1.0f, 0x1p-12f},
      {INFINITY, 1.0f},  {NAN, 0.0f},         {INFINITY, -INFINITY},       {3.0f, 0x1p-10f}};
  std::vector<float> av(64 * 32, 0.0f), bv(32 * 64, 0.0f);
  for (int i = 0; i < 64; ++i) {
    av[std::size_t(i) * 32] = 1.0f;
    av[std::size_t(i) * 32 + 1] = i % 2 ? 0.5f : 1.0f;  // s_i
  }
  for (int j = 0; j < 64; ++j) {
    bv[std::size_t(j)] = xy[std::size_t(j) % xy.size()].first;
    bv[std::size_t(64 + j)] = xy[std::size_t(j) % xy.size()].second;
  }
  const Tensor a = ferry::tensor(av, {64, 32}).to(DType::f16);
  const Tensor b = ferry::tensor(bv, {32, 64}).to(DType::f16);
  Tensor got;
  ASSERT_NE(matmul_kernel(a.to(ferry::Device("vulkan:0")), b.to(ferry::Device("vulkan:0")), &got)
                .find("coopmat"),
            std::string::npos);
  const std::vector<double> g = ferry_test::as_double(got),
                            w = ferry_test::as_double(
                                ferry::matmul(a.to(DType::f32), b.to(DType::f32)).to(DType::f16));
  ASSERT_EQ(g.size(), w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]))
      EXPECT_TRUE(std::isnan(g[i])) << "C[" << i / 64 << "][" << i % 64 << "]";
    else
      EXPECT_EQ(g[i], w[i]) << "C[" << i / 64 << "][" << i % 64 << "]";
  }
}

TEST(CoopmatPolicy, TileTableRoundTripsAndIgnoresWhatItCannotRead) {
  using ferry::vulkan::TileKey;
  using ferry::vulkan::TileTable;
  const TileTable table{
      {TileKey{1, 4096, 4096, 4096, 0, false}, "gemm_coopmat_w2x2_t4x4_k32"},
      {TileKey{1, 4096, 4096, 4096, 0, false, true}, "gemm_coopmat_w2x2_t4x4_k16_bf16"},
      {TileKey{32, 250, 200, 40, 1, true}, "gemm_coopmat_w2x2_t2x2_k32_bt_emulated"},
      {TileKey{1, 64, 6272, 576, 2, false}, "gemm_coopmat_w2x2_t4x4_k32_conv"},
      {TileKey{16, 64, 576, 100352, 4, false}, "gemm_coopmat_w2x2_t4x4_k32_conv_wgrad"},
      {TileKey{8, 2048, 2048, 64, 0, false, false, 1}, "attention_coopmat_d64_w4_k32"},
      {TileKey{8, 2048, 2048, 128, 0, false, true, 4}, "attention_dkv_coopmat_d128_w2_k32_bf16"},
      {TileKey{1, 4096, 4096, 12288, 0, false, 2}, "gemm_coopmat_w2x2_t4x4_k32_f32out_bf16"}};
  EXPECT_EQ(ferry::vulkan::read_tile_table(ferry::vulkan::write_tile_table(table)), table);
  EXPECT_TRUE(ferry::vulkan::read_tile_table("").empty());
  EXPECT_TRUE(
      ferry::vulkan::read_tile_table("1 2 3 4 0 0 0 0 gemm_coopmat_x\n").empty());  // no header
  EXPECT_TRUE(ferry::vulkan::read_tile_table("FERRYTILES2\n1 2 3 4 0 0 0 gemm_coopmat_x\n")
                  .empty());  // the format before attention: measured again
  const TileTable got = ferry::vulkan::read_tile_table(
      "FERRYTILES3\n"
      "1 64 64 64 0 0 1 0 gemm_coopmat_a\n"         // kept
      "2 64 64 64 0 0 0 1 attention_coopmat_d64\n"  // kept
      "1 64 64 0 0 0 0 gemm_coopmat_b\n"            // a field short
      "1 64 64 64 5 0 0 0 gemm_coopmat_c\n"         // not a layout
      "1 64 64 64 0 0 3 0 gemm_coopmat_f\n"         // not an operands' type
      "1 64 64 64 0 2 0 0 gemm_coopmat_j\n"         // not a flag
      "1 64 64 64 0 0 0 5 attention_coopmat_g\n"    // not a pass
      "1 64 64 64 0 0 0 1 gemm_coopmat_h\n"         // a GEMM for an attention pass
      "1 64 64 64 0 0 0 0 attention_coopmat_i\n"    // and the other way round
      "1 64 64 64 0 0 0 0 matmul\n"                 // not a coopmat module
      "1 64 64 64 0 0 0 0 gemm_coopmat_d x\n"       // a field too many
      "-1 64 64 64 0 0 0 0 gemm_coopmat_e\n");      // not a count
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got.begin()->second, "gemm_coopmat_a");
  EXPECT_EQ(got.begin()->first.operands, 1u);
  EXPECT_EQ(got.rbegin()->second, "attention_coopmat_d64");
  EXPECT_EQ(got.rbegin()->first.attention, 1u);
}

TEST(CoopmatPolicy, TuningFromTheEnvironment) {
  using ferry::vulkan::coopmat_tuning;
  EXPECT_TRUE(coopmat_tuning(nullptr, CoopmatMode::on));  // measured on the GPU path
  EXPECT_FALSE(coopmat_tuning(nullptr, CoopmatMode::emulated));
  EXPECT_TRUE(coopmat_tuning("1", CoopmatMode::emulated));
  EXPECT_FALSE(coopmat_tuning("1", CoopmatMode::off));
  EXPECT_FALSE(coopmat_tuning("0", CoopmatMode::on));
  EXPECT_THROW(coopmat_tuning("yes", CoopmatMode::on), ferry::Error);
}

// With FERRY_VULKAN_COOPMAT_TUNE=1 (ctest's coopmat_vulkan_tiles, through
// tests/vulkan_coopmat_tiles.sh: twice, the second run with FERRY_TEST_TILES_SAVED=1 and the
// first run's FERRY_CACHE_DIR).
TEST(Coopmat, TilesAreMeasuredOncePerShapeAndKept) {
  if (!path_is_on() || vulkan_property("coopmat_tiles") != "measured per shape")
    GTEST_SKIP() << "run by ctest's coopmat_vulkan_tiles (FERRY_VULKAN_COOPMAT_TUNE=1)";
  const bool saved = std::getenv("FERRY_TEST_TILES_SAVED") != nullptr;
  const ferry::Device dev("vulkan:0");
  ferry::manual_seed(11);
  const std::uint64_t before = std::stoull(vulkan_property("coopmat_tiles_measured"));
  // Several tiles can take it (ragged edges); the products are right whichever wins. Four
  // batches: each measured tile runs the product four times, and through the emulation on
  // lavapipe 32 batches (Coopmat.ProductsMatchTheCpu's) made this test's two runs 146 s of CI.
  const Tensor a = halves({4, 250, 40}), b = halves({4, 40, 200});
  Tensor got;
  const std::string first = matmul_kernel(a.to(dev), b.to(dev), &got);
  EXPECT_NE(first.find(saved ? "(measured earlier)" : "(measured)"), std::string::npos) << first;
  ferry_test::expect_close(ferry_test::as_double(got), ferry_test::as_double(ferry::matmul(a, b)),
                           2e-3, 2e-3, "measured");
  const std::string second = matmul_kernel(a.to(dev), b.to(dev), &got);
  EXPECT_NE(second.find("(measured earlier)"), std::string::npos) << second;
  // The same module both times, and one measurement at most.
  EXPECT_EQ(first.substr(0, first.find(" (")), second.substr(0, second.find(" (")));
  EXPECT_EQ(std::stoull(vulkan_property("coopmat_tiles_measured")), before + (saved ? 0 : 1));
  ferry_test::expect_close(ferry_test::as_double(got), ferry_test::as_double(ferry::matmul(a, b)),
                           2e-3, 2e-3, "measured earlier");
}
}  // namespace
