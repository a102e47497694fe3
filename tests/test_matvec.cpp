// matmul's matrix-vector shapes — one side of 1 to 8 rows against a weight, the way a linear
// layer meets one token (x · Wᵀ) and the way W · x reads — in f32, f16 and bf16, batched,
// with a strided vector side and a K that is not a multiple of the vector width, against the
// products computed in double on the host from the same (rounded) values. On the CPU these
// take the matrix-vector path (Note [Matrix-vector products on the CPU]); every device runs
// them; on Vulkan they take shaders/matvec.comp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;

// c = a · b in double from the tensors' own values; a [B, M, K], b [B, K, N]. The loops run
// along b's rows (k outside n), so that the reference reads memory in order (under ASan
// Matvec.WeightsAlongTheOutputInEveryFloatDtype took 34.0 s with n outside k, 32.4 s so: the
// products themselves take the rest).
std::vector<double> reference(const Tensor& a, const Tensor& b, std::vector<double>& scale) {
  const auto av = a.to(DType::f64).contiguous().to_vector<double>();
  const auto bv = b.to(DType::f64).contiguous().to_vector<double>();
  const std::int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  std::vector<double> c(std::size_t(B * M * N), 0.0);
  scale.assign(c.size(), 0.0);
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t m = 0; m < M; ++m) {
      double* s = c.data() + (i * M + m) * N;
      double* mag = scale.data() + (i * M + m) * N;
      for (std::int64_t k = 0; k < K; ++k) {
        const double x = av[std::size_t((i * M + m) * K + k)];
        const double* row = bv.data() + (i * K + k) * N;
        for (std::int64_t n = 0; n < N; ++n) {
          const double t = x * row[n];
          s[n] += t;
          mag[n] += std::fabs(t);
        }
      }
    }
  return c;
}

void expect_product(const Tensor& a, const Tensor& b, const std::string& what) {
  SCOPED_TRACE(what);
  const Tensor c = ferry::matmul(a, b);
  ASSERT_EQ(c.sizes(), (ferry::Shape{a.size(0), a.size(1), b.size(2)}));
  std::vector<double> scale;
  const auto want = reference(a.to(ferry::Device::cpu()), b.to(ferry::Device::cpu()), scale);
  const auto got = c.to(DType::f64).to_vector<double>();
  // f32 sums in another order; 16-bit results also round once to their 8 or 11 bits.
  const double rel = c.dtype() == DType::f32 ? 1e-5 : c.dtype() == DType::f16 ? 2e-3 : 1.6e-2;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * (scale[i] + std::fabs(want[i])) + 1e-6) << "element " << i;
}

TEST(Matvec, FewRowsAgainstAWeightInEveryFloatDtype) {
  for (const std::string& name : ferry_test::available_device_names()) {
    const ferry::Device dev(name);
    for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
      if (!ferry::device_impl(dev).supports(ferry::OpId::matmul, dt)) continue;
      ferry::manual_seed(11);
      // K = 1031: no row starts at a multiple of 8 elements. K = 1035 in rows of 1040: every
      // row does, and the last 3 elements follow the 8-element chunks (the Vulkan shader's two
      // loops, shaders/matvec.comp).
      for (const std::int64_t K : {1031, 1035}) {
        const std::int64_t G = 300, row = K == 1031 ? K : 1040;
        const Tensor w = ferry::randn({2, G, row}).to(dt).to(dev).narrow(2, 0, K);
        for (const std::int64_t S : {1, 3, 8}) {
          const std::string tag = dev.str() + " " + std::string(ferry::dtype_name(dt)) +
                                  " K=" + std::to_string(K) + " S=" + std::to_string(S);
          const Tensor x = ferry::randn({2, S, row}).to(dt).to(dev).narrow(2, 0, K);
          expect_product(x, w.transpose(1, 2), "x · Wᵀ " + tag);
          expect_product(w, x.transpose(1, 2), "W · x " + tag);
          // A strided vector side: every other column of a wider tensor.
          const Tensor wide = ferry::randn({2, S, 2 * K}).to(dt).to(dev);
          const Tensor strided = wide.narrow(2, 0, 2 * K - 1).slice(2, 0, 2 * K - 1, 2);
          expect_product(strided, w.transpose(1, 2), "strided x · Wᵀ " + tag);
        }
      }
    }
    // The products took the matrix-vector shader, not the GEMM tiles.
    if (dev.type() == "vulkan") {
      const auto props = ferry::device_impl(dev).info().properties;
      EXPECT_NE(props.at("shaders_used").find("matvec"), std::string::npos)
          << props.at("shaders_used");
    }
  }
}

// The weight's other layout (Note [Weights along the output on the CPU]): its K rows contiguous
// along the output, as x · W with W [K, G] (a GPT-2 checkpoint's Conv1D weights) and W · x with
// W seen transposed, in rows padded past G (a row stride that is not G), over more columns than
// one block takes (1100: a block and a remainder not a multiple of 8), and batched like
// attention's probabilities times V (16 heads of [1, 4096] x [4096, 64]).
TEST(Matvec, WeightsAlongTheOutputInEveryFloatDtype) {
  for (const std::string& name : ferry_test::available_device_names()) {
    const ferry::Device dev(name);
    for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
      if (!ferry::device_impl(dev).supports(ferry::OpId::matmul, dt)) continue;
      ferry::manual_seed(12);
      const std::int64_t K = 1031;
      for (const std::int64_t G : {300, 1100}) {
        const Tensor w = ferry::randn({2, K, G + 5}).to(dt).to(dev).narrow(2, 0, G);
        for (const std::int64_t S : {1, 3, 8}) {
          const std::string tag = dev.str() + " " + std::string(ferry::dtype_name(dt)) +
                                  " G=" + std::to_string(G) + " S=" + std::to_string(S);
          const Tensor x = ferry::randn({2, S, K}).to(dt).to(dev);
          expect_product(x, w, "x · W " + tag);
          expect_product(w.transpose(1, 2), x.transpose(1, 2), "Wᵀ · x " + tag);
          const Tensor wide = ferry::randn({2, S, 2 * K}).to(dt).to(dev);
          expect_product(wide.slice(2, 0, 2 * K, 2), w, "strided x · W " + tag);
        }
      }
      const Tensor p = ferry::softmax(ferry::randn({16, 1, 4096}), 2).to(dt).to(dev);
      const Tensor v = ferry::randn({16, 4096, 64}).to(dt).to(dev);
      expect_product(p, v, dev.str() + " " + std::string(ferry::dtype_name(dt)) + " heads");
    }
  }
}

}  // namespace
