// scaled_dot_product_attention's forward pass on cooperative matrices (Note [Attention on
// cooperative matrices] in runtime/vulkan/vk_kernels_attention.cpp), through the kernel's
// scalar emulation on vulkan:0 (ctest's coopmat_vulkan_emulated, FERRY_VULKAN_COOPMAT=emulate):
// the heads it takes and the ones it leaves to attention.comp, against the CPU's f32 attention
// rounded once; and the backward pass's gradients.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "coopmat_test_util.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn/attention.hpp"

namespace {

using namespace ferry_test::coopmat;
namespace F = ferry::nn::functional;

constexpr const char* kOp = "scaled_dot_product_attention";

struct Heads {
  std::int64_t B, Hq, Hk, L, S, E, Ev;
};

// q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev] of `dt`, scaled so that the scores spread
// over several units (the softmax far from uniform).
std::vector<Tensor> heads(const Heads& h, DType dt) {
  return {(ferry::randn({h.B, h.Hq, h.L, h.E}) * 2.0).to(dt),
          ferry::randn({h.B, h.Hk, h.S, h.E}).to(dt), ferry::randn({h.B, h.Hk, h.S, h.Ev}).to(dt)};
}

struct Case {
  Heads h;
  bool causal, mask;
  const char* module;  // the kernel's name holds it; empty: attention.comp
  const char* what;
};

// The case's additive mask over [L, S] for every head, f16 (undefined where it has none): -inf
// on a few keys and on the whole of row 3 (its output and gradients 0, as PyTorch's fused
// kernels give).
Tensor mask_for(const Case& k) {
  if (!k.mask) return {};
  std::vector<float> m(std::size_t(k.h.L * k.h.S));
  for (std::int64_t i = 0; i < k.h.L; ++i)
    for (std::int64_t j = 0; j < k.h.S; ++j)
      m[std::size_t(i * k.h.S + j)] = (i == 3 || (i + j) % 7 == 0)
                                          ? -std::numeric_limits<float>::infinity()
                                          : float((i * 3 + j) % 5) * 0.25f;
  return ferry::tensor(m).reshape({1, 1, k.h.L, k.h.S}).to(DType::f16);
}

TEST(CoopmatAttention, ForwardPassesRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  ferry::manual_seed(23);
  for (const Case& k : std::vector<Case>{
           {{2, 3, 3, 70, 50, 64, 64},
            false,
            false,
            "attention_coopmat_d64",
            "d64, ragged rows and keys"},
           {{1, 2, 2, 100, 100, 64, 64}, true, false, "attention_coopmat_d64", "d64, causal"},
           {{2, 4, 2, 33, 77, 128, 128},
            false,
            true,
            "attention_coopmat_d128",
            "d128, grouped, mask"},
           {{1, 2, 1, 20, 45, 128, 128},
            true,
            false,
            "attention_coopmat_d128",
            "d128, causal, L < S"},
           {{1, 1, 1, 40, 24, 64, 64}, false, true, "attention_coopmat_d64", "d64, mask, L > S"},
           // Smaller head dims, multiples of 8, on the modules of the next dim up.
           {{1, 2, 2, 30, 20, 32, 32}, false, false, "attention_coopmat_d64", "d32"},
           {{2, 2, 1, 45, 33, 80, 80}, true, false, "attention_coopmat_d128", "d80, causal"},
           {{1, 1, 1, 17, 29, 8, 8}, false, true, "attention_coopmat_d64", "d8, mask"},
           // Head dims that are not, larger ones and unequal ones: attention.comp.
           {{1, 2, 2, 30, 20, 20, 20}, false, false, "", "d20"},
           {{1, 2, 2, 30, 20, 160, 160}, false, false, "", "d160"},
           {{1, 2, 2, 30, 20, 64, 128}, false, false, "", "E != Ev"}}) {
    const std::vector<Tensor> in = heads(k.h, DType::f16);
    const Tensor mask = mask_for(k);
    expect_module_matches_cpu(
        kOp, k.module,
        [&](const Place& at) {
          return F::scaled_dot_product_attention(at(in[0]), at(in[1]), at(in[2]),
                                                 k.mask ? at(mask) : Tensor(), 0.0, k.causal,
                                                 std::nullopt, k.h.Hq != k.h.Hk);
        },
        k.what, 4e-3);
  }
}

TEST(CoopmatAttention, Bf16HeadsRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  if (coopmat_property().find("bf16 matmul") == std::string::npos)
    GTEST_SKIP() << "no bf16 on the path: " << coopmat_property();
  ferry::manual_seed(29);
  const std::vector<Tensor> in = heads({2, 2, 2, 40, 72, 64, 64}, DType::bf16);
  expect_module_matches_cpu(
      kOp, "attention_coopmat_d64 _bf16",
      [&](const Place& at) {
        return F::scaled_dot_product_attention(at(in[0]), at(in[1]), at(in[2]), {}, 0.0, true);
      },
      "bf16, causal", 2e-2);
}

// dq, dk and dv of attention over `in` (and `mask`) at `at`, the upstream gradient `g`, in one
// flat tensor.
Tensor gradients(const std::vector<Tensor>& in, const Tensor& mask, const Tensor& g, bool causal,
                 bool grouped, const Place& at) {
  std::vector<Tensor> x = {at(in[0]), at(in[1]), at(in[2])};
  for (Tensor& t : x) t.requires_grad_();
  const Tensor y = F::scaled_dot_product_attention(
      x[0], x[1], x[2], mask.defined() ? at(mask) : Tensor(), 0.0, causal, std::nullopt, grouped);
  std::vector<Tensor> d = ferry::autograd::grad({y}, x, {at(g)});
  for (Tensor& t : d) t = t.reshape({-1});
  return ferry::cat(d);
}

// The backward's DQ and DKV passes (attention_backward_coopmat.slang) after the STATS pass:
// every gradient against the CPU's f32 ones, from the forward's logsumexp of either kernel.
TEST(CoopmatAttention, BackwardPassesRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  ferry::manual_seed(31);
  for (const Case& k : std::vector<Case>{
           {{2, 2, 2, 37, 45, 64, 64}, false, false, "attention_dkv_coopmat_d64", "d64, ragged"},
           {{1, 2, 2, 70, 70, 64, 64}, true, false, "attention_dkv_coopmat_d64", "d64, causal"},
           {{1, 4, 2, 33, 50, 128, 128},
            false,
            true,
            "attention_dkv_coopmat_d128",
            "d128, grouped, mask"},
           {{1, 2, 1, 20, 45, 128, 128},
            true,
            false,
            "attention_dq_coopmat_d128",
            "d128, grouped, causal, L < S"},
           {{1, 1, 1, 40, 24, 64, 64}, false, true, "attention_dq_coopmat_d64", "d64, mask, L > S"},
           {{1, 2, 2, 30, 20, 32, 32}, false, false, "attention_dkv_coopmat_d64", "d32"},
           {{1, 1, 1, 75, 21, 64, 64}, true, false, "attention_dkv_coopmat_d64", "causal, L > S"},
           {{1, 1, 1, 1, 1, 64, 64}, false, false, "attention_dq_coopmat_d64", "one row, one key"},
           {{1, 4, 2, 26, 35, 96, 96},
            false,
            true,
            "attention_dq_coopmat_d128",
            "d96, grouped, mask"},
           {{1, 2, 2, 30, 20, 12, 12}, false, false, "", "d12"}}) {
    const std::vector<Tensor> in = heads(k.h, DType::f16);
    const Tensor g = halves({k.h.B, k.h.Hq, k.h.L, k.h.Ev});
    const Tensor mask = mask_for(k);
    expect_module_matches_cpu(
        "scaled_dot_product_attention_backward", k.module,
        [&](const Place& at) { return gradients(in, mask, g, k.causal, k.h.Hq != k.h.Hk, at); },
        k.what, 1e-2);
  }
}

TEST(CoopmatAttention, Bf16BackwardRunsOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  if (coopmat_property().find("bf16 matmul") == std::string::npos)
    GTEST_SKIP() << "no bf16 on the path: " << coopmat_property();
  ferry::manual_seed(37);
  const std::vector<Tensor> in = heads({1, 2, 2, 40, 40, 64, 64}, DType::bf16);
  const Tensor g = ferry::randn({1, 2, 40, 64}).to(DType::bf16);
  expect_module_matches_cpu(
      "scaled_dot_product_attention_backward", "attention_dq_coopmat_d64 _bf16",
      [&](const Place& at) { return gradients(in, Tensor(), g, true, false, at); }, "bf16, causal",
      5e-2);
}

// With FERRY_VULKAN_COOPMAT_TUNE=1 (ctest's coopmat_vulkan_tiles, through
// tests/vulkan_coopmat_tiles.sh: twice, the second run with FERRY_TEST_TILES_SAVED=1 and the
// first run's FERRY_CACHE_DIR): head dim 64 has two forward modules and two of each backward
// pass that fit lavapipe, so each pass is measured once per geometry, and the winners are
// read back from beside the pipeline cache.
TEST(CoopmatAttention, TilesAreMeasuredOncePerGeometryAndKept) {
  if (!path_is_on() || vulkan_property("coopmat_tiles") != "measured per shape")
    GTEST_SKIP() << "run by ctest's coopmat_vulkan_tiles (FERRY_VULKAN_COOPMAT_TUNE=1)";
  const bool saved = std::getenv("FERRY_TEST_TILES_SAVED") != nullptr;
  ferry::manual_seed(41);
  const Heads h{1, 2, 2, 40, 56, 64, 64};
  const std::vector<Tensor> in = heads(h, DType::f16);
  const Tensor g = halves({h.B, h.Hq, h.L, h.Ev});
  const std::uint64_t before = std::stoull(vulkan_property("coopmat_tiles_measured"));
  std::string kernels[2];
  for (std::string& kernel : kernels) {
    Tensor got;
    kernel = op_kernel(
        "scaled_dot_product_attention_backward",
        [&] {
          return gradients(in, Tensor(), g, false, false,
                           [](const Tensor& t) { return t.to(ferry::Device("vulkan:0")); });
        },
        &got);
    const Tensor want = gradients(in, Tensor(), g, false, false, [](const Tensor& t) {
                          return t.to(DType::f32);
                        }).to(DType::f16);
    ferry_test::expect_close(ferry_test::as_double(got), ferry_test::as_double(want), 1e-2, 1e-2,
                             kernel);
  }
  // The first call measures both passes (unless an earlier run did), the second reads them.
  const std::string first_how = saved ? "(measured earlier)" : "(measured)";
  for (const char* pass : {"attention_dq_coopmat_d64", "attention_dkv_coopmat_d64"})
    EXPECT_NE(kernels[0].find(std::string(pass)), std::string::npos) << kernels[0];
  EXPECT_EQ(kernels[0].find(saved ? "(measured)" : "(measured earlier)"), std::string::npos)
      << kernels[0];
  EXPECT_NE(kernels[0].find(first_how), std::string::npos) << kernels[0];
  EXPECT_EQ(kernels[1].find("(measured)"), std::string::npos) << kernels[1];
  EXPECT_NE(kernels[1].find("(measured earlier)"), std::string::npos) << kernels[1];
  // The forward of the first call was measured too: three measurements at most, once.
  EXPECT_EQ(std::stoull(vulkan_property("coopmat_tiles_measured")), before + (saved ? 0 : 3));
}

}  // namespace
