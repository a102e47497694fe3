// scaled_dot_product_attention: PyTorch's results and gradients
// (tests/data/pytorch_attention_reference.json, written by tools/gen_attention_reference.py) on
// every device; the fused kernels' peak memory (CPU and Vulkan), linear in the sequence where the
// composition's is quadratic; dropout; PyTorch's errors, typed. The fused kernels are held to
// the composition case by case in the conformance suite (tests/conformance/cases_attention.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_attention_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using nlohmann::json;
namespace F = ferry::nn::functional;

// The call of tools/gen_attention_reference.py's case(): an additive mask is the fourth
// input, a bool mask an attribute.
ferry_test::ReferenceResult call(const std::string& op, const json& a,
                                 const std::vector<Tensor>& in, const std::vector<Tensor>&) {
  EXPECT_EQ(op, "scaled_dot_product_attention");
  Tensor mask = in.size() > 3 ? in[3] : Tensor();
  if (a.contains("bool_mask")) {
    const json& m = a["bool_mask"];
    mask = ferry::tensor(m["data"].get<std::vector<std::int64_t>>())
               .reshape(m["shape"].get<ferry::Shape>())
               .to(DType::boolean)
               .to(in[0].device());
  }
  std::optional<double> scale;
  if (a.contains("scale")) scale = a["scale"].get<double>();
  return {F::scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, a["is_causal"], scale,
                                          a["enable_gqa"])};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_reference_file("pytorch_attention_reference.json", dev, 14, call);
}

TEST(Attention, PyTorchReferenceCpu) { run_reference(ferry::Device::cpu()); }

TEST(Attention, PyTorchReferenceCpuComposition) {
  ferry::debug::CompositesOnly composition;
  run_reference(ferry::Device::cpu());
}

TEST(Attention, PyTorchReferenceVulkan) {
  if (!ferry::is_available("vulkan:0"))
    GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices();
  run_reference(ferry::Device("vulkan:0"));
}

TEST(Attention, PyTorchReferenceCuda) {
  if (!ferry::is_available("cuda:0"))
    GTEST_SKIP() << "no CUDA device: " << ferry::describe_devices();
  run_reference(ferry::Device("cuda:0"));
}

// The most bytes allocated on `dev` over a causal attention's forward and backward, past what
// the inputs hold.
std::uint64_t attention_peak(const ferry::Device& dev, std::int64_t L) {
  ferry::manual_seed(3);
  Tensor q = ferry::randn({1, 2, L, 16}).to(dev).requires_grad_();
  Tensor k = ferry::randn({1, 2, L, 16}).to(dev).requires_grad_();
  Tensor v = ferry::randn({1, 2, L, 16}).to(dev).requires_grad_();
  ferry::synchronize(dev);
  ferry::reset_peak_memory_stats(dev);
  const std::uint64_t base = ferry::memory_stats(dev).allocated;
  Tensor y = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  ferry::sum(y).backward();
  EXPECT_TRUE(q.grad().defined() && k.grad().defined() && v.grad().defined());
  return ferry::memory_stats(dev).peak_allocated - base;
}

// FlashAttention's promise: the fused kernels hold O(L) bytes (the output, the logsumexp and
// the gradients), the composition the [2, L, L] scores and probabilities.
void expect_linear_peak(const ferry::Device& dev, std::int64_t L) {
  const std::uint64_t scores = 2ull * L * L * 4;  // one f32 [1, 2, L, L]
  const std::uint64_t fused = attention_peak(dev, L), fused_half = attention_peak(dev, L / 2);
  std::uint64_t composed = 0;
  {
    ferry::debug::CompositesOnly composition;
    composed = attention_peak(dev, L);
  }
  EXPECT_GE(composed, scores) << "the composition holds the scores";
  EXPECT_LT(fused, scores / 8) << "fused peak " << fused << " bytes";
  // Linear: twice the sequence, at most about twice the bytes (the allocator's rounding aside).
  EXPECT_LE(fused, 2 * fused_half + 4096) << fused << " vs " << fused_half;
}

TEST(Attention, FusedCpuPeakMemoryIsLinearInTheSequence) {
  expect_linear_peak(ferry::Device::cpu(), 2048);
}

TEST(Attention, FusedVulkanPeakMemoryIsLinearInTheSequence) {
  if (!ferry::is_available("vulkan:0"))
    GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices();
  expect_linear_peak(ferry::Device("vulkan:0"), 1024);
}

TEST(Attention, FusedCudaPeakMemoryIsLinearInTheSequence) {
  if (!ferry::is_available("cuda:0"))
    GTEST_SKIP() << "no CUDA device: " << ferry::describe_devices();
  expect_linear_peak(ferry::Device("cuda:0"), 4096);
}

TEST(Attention, DropoutIsReproducibleAndScales) {
  ferry::manual_seed(1);
  const Tensor q = ferry::randn({2, 2, 6, 4}), k = ferry::randn({2, 2, 7, 4}),
               v = ferry::randn({2, 2, 7, 4});
  ferry::manual_seed(9);
  const Tensor a = F::scaled_dot_product_attention(q, k, v, {}, 0.5);
  ferry::manual_seed(9);
  const Tensor b = F::scaled_dot_product_attention(q, k, v, {}, 0.5);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  const Tensor plain = F::scaled_dot_product_attention(q, k, v);
  EXPECT_NE(a.to_vector<float>(), plain.to_vector<float>());
  const auto zero = F::scaled_dot_product_attention(q, k, v, {}, 1.0).to_vector<float>();
  for (float x : zero) EXPECT_EQ(x, 0.0f);
}

TEST(Attention, BadInputIsTyped) {
  const Tensor q = ferry::zeros({2, 4, 5, 8}), k = ferry::zeros({2, 4, 6, 8}),
               v = ferry::zeros({2, 4, 6, 8});
  EXPECT_THROW(F::scaled_dot_product_attention(q, k.to(DType::f64), v), ferry::DTypeError);
  EXPECT_THROW(
      F::scaled_dot_product_attention(q.to(DType::i32), k.to(DType::i32), v.to(DType::i32)),
      ferry::DTypeError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, ferry::zeros({2, 4, 6, 7}), v),
               ferry::ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, ferry::zeros({2, 4, 5, 8})),
               ferry::ShapeError);
  EXPECT_THROW(
      F::scaled_dot_product_attention(q, ferry::zeros({2, 3, 6, 8}), ferry::zeros({2, 3, 6, 8}), {},
                                      0.0, false, std::nullopt, true),
      ferry::ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(ferry::zeros({5}), k, v), ferry::ShapeError);
  const Tensor bool_mask = ferry::ones({5, 6}).to(DType::boolean);
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, v, bool_mask, 0.0, true), ferry::Error);
  EXPECT_THROW(
      F::scaled_dot_product_attention(q, k, v, ferry::zeros({5, 6}, {.dtype = DType::f64})),
      ferry::DTypeError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, v, ferry::zeros({5, 7})), ferry::ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, v, ferry::zeros({3, 4, 5, 6})),
               ferry::ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, v, {}, 1.5), ferry::ValueError);
  EXPECT_THROW(F::scaled_dot_product_attention(q, Tensor(), v), ferry::Error);
}

}  // namespace
