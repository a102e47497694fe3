// scaled_dot_product_attention: PyTorch's results and gradients
// (tests/data/pytorch_attention_reference.json, written by tools/gen_attention_reference.py) on
// every device; the fused kernels' peak memory (CPU and Vulkan), linear in the sequence where the
// composition's is quadratic; dropout; PyTorch's errors, typed. The fused kernels are held to
// the composition case by case in the conformance suite (tests/conformance/cases_attention.cpp).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices.hpp"
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

TEST(Attention, PyTorchReferenceCpuComposition) {
  ferry::debug::CompositesOnly composition;
  run_reference(ferry::Device::cpu());
}

FERRY_TEST_ON_EACH_DEVICE(Attention, PyTorchReference, run_reference)

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

// Each of `got` (on any device) against `want` (the CPU's) within `tolerance`, relative to
// 1 + |want|; `names` says which is which.
void expect_matches(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                    const std::vector<const char*>& names, double tolerance) {
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::vector<float> a = want[i].to_vector<float>(),
                             b = got[i].to(ferry::Device::cpu()).to_vector<float>();
    ASSERT_EQ(a.size(), b.size()) << names[i];
    double worst = 0.0;
    for (std::size_t j = 0; j < a.size(); ++j)
      worst = std::max(worst, std::abs(double(a[j]) - double(b[j])) / (1.0 + std::abs(a[j])));
    EXPECT_LT(worst, tolerance) << names[i];
  }
}

// Attention's output and its gradients {out, dq, dk, dv} on `dev` for upstream gradient `g`;
// `route` gets the profiler's note of the forward's kernel where given.
std::vector<Tensor> attention_and_grads(const ferry::Device& dev, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& mask, bool causal, bool gqa,
                                        const Tensor& g, std::string* route = nullptr) {
  std::vector<Tensor> x = {q.to(dev), k.to(dev), v.to(dev)};
  for (Tensor& t : x) t.requires_grad_();
  ferry::profiler::Scope scope;
  const Tensor y = F::scaled_dot_product_attention(
      x[0], x[1], x[2], mask.defined() ? mask.to(dev) : Tensor(), 0.0, causal, std::nullopt, gqa);
  std::vector<Tensor> d = ferry::autograd::grad({y}, x, {g.to(dev)});
  d.insert(d.begin(), y);
  for (const ferry::profiler::Event& e : scope.stop().events())
    if (route && e.kind == ferry::profiler::EventKind::op &&
        e.name == "scaled_dot_product_attention")
      *route = e.detail;
  return d;
}

// Note [Split-key attention on Vulkan]: a decoding step's query rows (at most
// kSplitKeyRows per head) take the split-key kernels, its keys spread over several workgroups
// and merged. Each case against the CPU, forward and (through the backward's kernels, from the
// split kernels' logsumexp) gradients, with the route the profiler recorded; ctest's
// conformance_vulkan_attention_split runs the conformance suite's cases through them too.
TEST(Attention, VulkanDecodingSplitsTheKeys) {
  if (!ferry::is_available("vulkan:0"))
    GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices();
  struct Case {
    const char* what;
    ferry::Shape q, k, v;
    bool causal, gqa, mask;
    const char* route;  // the start of the profiler's note
  };
  // clang-format off
  const std::vector<Case> cases{
      {"one row, 8 heads", {1, 8, 1, 64}, {1, 8, 1000, 64}, {1, 8, 1000, 64},
       false, false, false, "split-key attention, 4 splits of 256 keys"},
      {"grouped query heads, v's head dim 48, a mask that leaves out whole splits",
       {2, 4, 1, 64}, {2, 2, 700, 64}, {2, 2, 700, 48},
       false, true, true, "split-key attention, 3 splits of 256 keys"},
      {"3 rows, head dims past one pass (80)", {1, 2, 3, 80}, {1, 2, 600, 80}, {1, 2, 600, 80},
       false, false, false, "split-key attention, 3 splits of 256 keys"},
      {"causal: a row sees the keys up to its own", {1, 3, 2, 16}, {1, 3, 300, 16},
       {1, 3, 300, 16}, true, false, false, "split-key attention, 2 splits of 256 keys"},
      {"few keys: one workgroup a row", {2, 3, 1, 32}, {2, 3, 37, 32}, {2, 3, 37, 32},
       false, false, false, "split-key attention, 1 split of 256 keys"}};
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ferry::manual_seed(17);
    const Tensor q = ferry::randn(c.q) * 2.0, k = ferry::randn(c.k), v = ferry::randn(c.v);
    Tensor mask;
    if (c.mask) {  // keys 0-299 left out for batch item 0, the last 200 for item 1
      const std::int64_t S = c.k[2];
      std::vector<float> m(std::size_t(2 * S), 0.0f);
      for (std::int64_t j = 0; j < 300; ++j) m[std::size_t(j)] = -INFINITY;
      for (std::int64_t j = S - 200; j < S; ++j) m[std::size_t(S + j)] = -INFINITY;
      mask = ferry::tensor(m).reshape({2, 1, 1, S});
    }
    const Tensor g = ferry::randn({c.q[0], c.q[1], c.q[2], c.v[3]});
    std::string route;
    const std::vector<Tensor> got =
        attention_and_grads(ferry::Device("vulkan:0"), q, k, v, mask, c.causal, c.gqa, g, &route);
    EXPECT_EQ(route.rfind(c.route, 0), 0u) << route;
    expect_matches(attention_and_grads(ferry::Device::cpu(), q, k, v, mask, c.causal, c.gqa, g),
                   got, {"out", "dq", "dk", "dv"}, 2e-5);
  }
}

// Note [Fused attention on the CPU]: blocks of at most four query rows (a decoding step's)
// take their scores as dot products of the keys' rows where they lie and their outputs from
// the values' rows, with no transposed copy. Each case, in every floating dtype, against the
// composition (matmul, softmax, matmul) in f32 on the same rounded inputs: several key blocks,
// head dims that are no multiple of a vector, masks, causal rows, grouped query heads, and the
// last rows of a longer sequence's blocks.
TEST(Attention, CpuDecodingStepsMatchTheComposition) {
  struct Case {
    const char* what;
    ferry::Shape q, k, v;
    bool causal, gqa, mask;
  };
  // clang-format off
  const std::vector<Case> cases{
      {"one row, 8 heads, 3 key blocks and a piece", {1, 8, 1, 64}, {1, 8, 200, 64},
       {1, 8, 200, 64}, false, false, false},
      {"grouped query heads, head dims 20 and 12, a mask", {2, 4, 1, 20}, {2, 2, 150, 20},
       {2, 2, 150, 12}, false, true, true},
      {"4 rows, causal", {1, 3, 4, 16}, {1, 3, 300, 16}, {1, 3, 300, 16}, true, false, false},
      {"35 rows: a block of 32, then one of 3", {1, 2, 35, 24}, {1, 2, 35, 24}, {1, 2, 35, 24},
       true, false, false}};
  // clang-format on
  const ferry::Device cpu = ferry::Device::cpu();
  for (const DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.what) + ", " + std::string(ferry::dtype_name(dt)));
      ferry::manual_seed(23);
      const Tensor q = (ferry::randn(c.q) * 2.0).to(dt), k = ferry::randn(c.k).to(dt),
                   v = ferry::randn(c.v).to(dt);
      Tensor mask;
      if (c.mask) {  // keys 0-69 left out for batch item 0, the last 40 for item 1
        const std::int64_t S = c.k[2];
        std::vector<float> m(std::size_t(2 * S), 0.0f);
        for (std::int64_t j = 0; j < 70; ++j) m[std::size_t(j)] = -INFINITY;
        for (std::int64_t j = S - 40; j < S; ++j) m[std::size_t(S + j)] = -INFINITY;
        mask = ferry::tensor(m).reshape({2, 1, 1, S});
      }
      const Tensor g = ferry::randn({c.q[0], c.q[1], c.q[2], c.v[3]}).to(dt);
      std::vector<Tensor> got =
                              attention_and_grads(cpu, q, k, v, mask.defined() ? mask.to(dt) : mask,
                                                  c.causal, c.gqa, g),
                          want;
      {
        ferry::debug::CompositesOnly composition;
        auto f32 = [](const Tensor& t) { return t.defined() ? t.to(DType::f32) : t; };
        want = attention_and_grads(cpu, f32(q), f32(k), f32(v), f32(mask), c.causal, c.gqa, f32(g));
      }
      for (Tensor& t : got) t = t.to(DType::f32);
      const double tolerance = dt == DType::f16 ? 1e-2 : dt == DType::bf16 ? 6e-2 : 2e-5;
      expect_matches(want, got, {"out", "dq", "dk", "dv"}, tolerance);
    }
}

// Note [Split keys on the CPU]: a decoding step with fewer heads than threads cuts each head's
// keys into pieces, a thread each, and merges them. Four threads here whatever the machine
// has; each case against the composition in f32, with the route the profiler recorded. The
// first case's first piece has every key masked.
TEST(Attention, CpuDecodingSplitsTheKeysOverIdleThreads) {
  struct Case {
    const char* what;
    ferry::Shape q, k, v;
    bool mask;
    DType dtype;
    const char* route;
  };
  // clang-format off
  const std::vector<Case> cases{
      {"one head, one row, the first piece masked", {1, 1, 1, 64}, {1, 1, 5000, 64},
       {1, 1, 5000, 64}, true, DType::f32, "split-key attention, 4 pieces of 1250 keys"},
      {"grouped query heads, 3 rows, v's head dim 48", {1, 2, 3, 32}, {1, 1, 3000, 32},
       {1, 1, 3000, 48}, false, DType::f32, "split-key attention, 2 pieces of 1500 keys"},
      {"f16", {1, 1, 2, 64}, {1, 1, 2100, 64}, {1, 1, 2100, 64}, false, DType::f16,
       "split-key attention, 2 pieces of 1050 keys"}};
  // clang-format on
  const int threads = omp_get_max_threads();
  omp_set_num_threads(4);
  const ferry::Device cpu = ferry::Device::cpu();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ferry::manual_seed(29);
    const Tensor q = (ferry::randn(c.q) * 2.0).to(c.dtype), k = ferry::randn(c.k).to(c.dtype),
                 v = ferry::randn(c.v).to(c.dtype);
    Tensor mask;
    if (c.mask) {  // the first 1,300 keys left out
      std::vector<float> m(std::size_t(c.k[2]), 0.0f);
      std::fill(m.begin(), m.begin() + 1300, -INFINITY);
      mask = ferry::tensor(m).reshape({1, 1, 1, c.k[2]});
    }
    const Tensor g = ferry::randn({c.q[0], c.q[1], c.q[2], c.v[3]}).to(c.dtype);
    const bool gqa = c.q[1] != c.k[1];
    std::string route;
    std::vector<Tensor> got = attention_and_grads(cpu, q, k, v, mask, false, gqa, g, &route), want;
    EXPECT_EQ(route, c.route);
    {
      ferry::debug::CompositesOnly composition;
      auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
      want = attention_and_grads(cpu, f32(q), f32(k), f32(v), mask, false, gqa, f32(g));
    }
    for (Tensor& t : got) t = t.to(DType::f32);
    expect_matches(want, got, {"out", "dq", "dk", "dv"}, c.dtype == DType::f16 ? 1e-2 : 2e-5);
  }
  omp_set_num_threads(threads);
}

// Note [Loop budget] (runtime/vulkan/vk_kernels.hpp): lavapipe ends an invocation's loops after
// 65,535 iterations, where the thread-per-query-row kernels used to stop short from some 850
// keys of head dim 64 on, silently. Past that length the forward takes the split kernels and
// the backward walks its keys and query rows in ranges: both against the CPU.
TEST(Attention, VulkanLongSequencesStayWithinTheLoopBudget) {
  if (!ferry::is_available("vulkan:0"))
    GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices();
  ferry::manual_seed(23);
  const Tensor q = ferry::randn({1, 1, 900, 64}), k = ferry::randn({1, 1, 900, 64}),
               v = ferry::randn({1, 1, 900, 64}), g = ferry::randn({1, 1, 900, 64});
  expect_matches(attention_and_grads(ferry::Device::cpu(), q, k, v, {}, true, false, g),
                 attention_and_grads(ferry::Device("vulkan:0"), q, k, v, {}, true, false, g),
                 {"out", "dq", "dk", "dv"}, 2e-5);
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
