// f64 as a full CPU dtype, part 2: reductions, matmul, softmax, layer_norm and
// the index ops against double references computed here, to ~1e-12 relative;
// typed errors on f64 input; and the Vulkan backend computing it (its
// transcendentals' accuracy: tests/test_f64_vulkan_math.cpp) and moving its
// bytes exactly (the test-only plugin refuses f64: tests/test_plugin.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "ops_internal.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::expect_close;

namespace {

constexpr double kRel = 1e-12;

std::vector<double> doubles(std::size_t n, double lo, double hi, double phase = 0.123456789) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * std::fmod(double(i) * 0.6180339887498949 + phase, 1.0);
  return v;
}

Tensor f64(const std::vector<double>& v, const Shape& shape = {}) {
  return ferry::tensor(v, shape);
}

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Neumaier's compensated sum: a reference more exact than the kernel's.
double exact_sum(const std::vector<double>& v) {
  double s = 0, c = 0;
  for (double x : v) {
    double t = s + x;
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  return s + c;
}

}  // namespace

// ---- reductions ----

TEST(F64Reduce, SumOfAMillionElements) {
  const std::vector<double> v = doubles(1000000, 0, 1);
  Tensor x = f64(v);
  Tensor s = ferry::sum(x);
  EXPECT_EQ(s.dtype(), DType::f64);
  const double want = exact_sum(v);
  EXPECT_NEAR(s.item<double>(), want, kRel * want);
  // Tiny terms beside a large one survive (they would vanish in float).
  std::vector<double> w(1000, 1e-10);
  w[0] = 1.0;
  EXPECT_NEAR(ferry::sum(f64(w)).item<double>(), 1.0 + 999e-10, 1e-15);
  // Integer sums stay i64; a bool sum too (unchanged by f64).
  EXPECT_EQ(ferry::sum(f64({1.5}).to(DType::i64)).dtype(), DType::i64);
}

TEST(F64Reduce, SumMeanVarOverDims) {
  const Shape shape = {7, 13, 11};
  const std::vector<double> v = doubles(std::size_t(numel(shape)), -3, 3);
  Tensor x = f64(v, shape);
  // Over dim 1 (the kernel's "outer" schedule) and over dims {0, 2} (strided slices).
  std::vector<double> s1(7 * 11, 0), s02(13, 0);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 13; ++j)
      for (int k = 0; k < 11; ++k) {
        const double e = v[std::size_t((i * 13 + j) * 11 + k)];
        s1[std::size_t(i * 11 + k)] += e;
        s02[std::size_t(j)] += e;
      }
  expect_close(ferry::sum(x, {1}).to_vector<double>(), s1, kRel, 1e-14, "sum dim 1");
  expect_close(ferry::sum(x, {0, 2}).to_vector<double>(), s02, kRel, 1e-14, "sum dims 0, 2");
  std::vector<double> m02(13), var02(13, 0);
  for (int j = 0; j < 13; ++j) m02[std::size_t(j)] = s02[std::size_t(j)] / 77.0;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 13; ++j)
      for (int k = 0; k < 11; ++k) {
        const double d = v[std::size_t((i * 13 + j) * 11 + k)] - m02[std::size_t(j)];
        var02[std::size_t(j)] += d * d / 76.0;
      }
  Tensor m = ferry::mean(x, {0, 2});
  EXPECT_EQ(m.dtype(), DType::f64);
  expect_close(m.to_vector<double>(), m02, kRel, 1e-15, "mean");
  Tensor var = ferry::var(x, {0, 2});
  EXPECT_EQ(var.dtype(), DType::f64);
  expect_close(var.to_vector<double>(), var02, kRel, 0, "var");
  // A large mean does not cancel the variance away: values 1e6 + k/1024 are
  // exact in double (float's spacing at 1e6 is 1/16).
  std::vector<double> big(64);
  for (std::size_t k = 0; k < big.size(); ++k) big[k] = 1e6 + double(k) / 1024.0;
  double want_var = 0;
  for (std::size_t k = 0; k < big.size(); ++k) {
    const double d = double(k) / 1024.0 - 31.5 / 1024.0;
    want_var += d * d / 63.0;
  }
  EXPECT_NEAR(ferry::var(f64(big)).item<double>(), want_var, kRel * want_var);
}

TEST(F64Reduce, MaxMinArgmaxSeeBeyondFloat) {
  // Neighbours 1e-12 apart: equal in float, ordered in double.
  std::vector<double> v = {1.0, 1.0 + 3e-12, 1.0 + 1e-12, 1.0 - 1e-12, 1.0 + 2e-12};
  Tensor x = f64(v);
  EXPECT_EQ(ferry::max(x).item<double>(), 1.0 + 3e-12);
  EXPECT_EQ(ferry::min(x).item<double>(), 1.0 - 1e-12);
  EXPECT_EQ(ferry::argmax(x).item<std::int64_t>(), 1);
  EXPECT_EQ(ferry::max(x).dtype(), DType::f64);
  // Over a dim, a long row (vectorized lanes), and NaN propagation.
  const std::vector<double> r = doubles(5 * 1000, -1, 1);
  Tensor m = f64(r, {5, 1000});
  std::vector<double> want_max(5, -INFINITY);
  std::vector<std::int64_t> want_arg(5, 0);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 1000; ++j)
      if (r[i * 1000 + j] > want_max[i]) {
        want_max[i] = r[i * 1000 + j];
        want_arg[i] = std::int64_t(j);
      }
  EXPECT_EQ(ferry::max(m, {1}).to_vector<double>(), want_max);
  EXPECT_EQ(ferry::argmax(m, 1).to_vector<std::int64_t>(), want_arg);
  v[2] = NAN;
  EXPECT_TRUE(std::isnan(ferry::max(f64(v)).item<double>()));
  EXPECT_TRUE(std::isnan(ferry::min(f64(v)).item<double>()));
  EXPECT_EQ(ferry::argmax(f64(v)).item<std::int64_t>(), 2);
}

// ---- matmul ----

namespace {

// C = A · B in long double, with the bound sum_k |a||b| for the tolerance.
void naive_matmul(const std::vector<double>& a, const std::vector<double>& b, std::int64_t M,
                  std::int64_t K, std::int64_t N, std::vector<double>& c,
                  std::vector<double>& bound) {
  c.assign(std::size_t(M * N), 0);
  bound.assign(std::size_t(M * N), 0);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      long double s = 0, m = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const long double p = (long double)a[std::size_t(i * K + k)] * b[std::size_t(k * N + j)];
        s += p;
        m += p < 0 ? -p : p;
      }
      c[std::size_t(i * N + j)] = double(s);
      bound[std::size_t(i * N + j)] = double(m);
    }
}

void expect_matmul(const Tensor& got, const std::vector<double>& want,
                   const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::f64) << what;
  std::vector<double> g = got.contiguous().to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], kRel * bound[i] + 1e-300) << what << " at " << i;
}

}  // namespace

TEST(F64Matmul, DgemmAndLoopsMatchANaiveProduct) {
  const std::int64_t M = 67, K = 45, N = 31;
  const std::vector<double> a = doubles(std::size_t(M * K), -2, 2, 0.1);
  const std::vector<double> b = doubles(std::size_t(K * N), -2, 2, 0.7);
  std::vector<double> c, bound;
  naive_matmul(a, b, M, K, N, c, bound);
  Tensor A = f64(a, {M, K}), B = f64(b, {K, N});
  expect_matmul(ferry::matmul(A, B), c, bound, "dgemm");
  // Transposed views go to dgemm as CblasTrans.
  Tensor At = f64(a, {M, K}).t().contiguous().t(), Bt = f64(b, {K, N}).t().contiguous().t();
  ASSERT_FALSE(At.is_contiguous());
  expect_matmul(ferry::matmul(At, Bt), c, bound, "transposed");
  // No unit stride: packed first.
  std::vector<double> a2(std::size_t(2 * M * K), 0);
  for (std::size_t i = 0; i < a.size(); ++i) a2[2 * i] = a[i];
  Tensor Astep = f64(a2, {M, 2 * K}).slice(1, 0, 2 * K, 2);
  expect_matmul(ferry::matmul(Astep, B), c, bound, "strided");
  // A batch with a broadcast operand, and many small products (the loop path).
  Tensor A3 = A.unsqueeze(0).expand({3, M, K});
  Tensor C3 = ferry::matmul(A3, B);
  for (std::int64_t i = 0; i < 3; ++i)
    expect_matmul(C3.select(0, i), c, bound, fmt::format("batch {}", i));
  const std::int64_t m = 5, k = 7, n = 3;
  std::vector<double> sa = doubles(std::size_t(4 * m * k), -1, 1, 0.3);
  std::vector<double> sb = doubles(std::size_t(4 * k * n), -1, 1, 0.9);
  Tensor S = ferry::matmul(f64(sa, {4, m, k}), f64(sb, {4, k, n}));
  for (std::int64_t i = 0; i < 4; ++i) {
    std::vector<double> ai(sa.begin() + i * m * k, sa.begin() + (i + 1) * m * k);
    std::vector<double> bi(sb.begin() + i * k * n, sb.begin() + (i + 1) * k * n);
    std::vector<double> ci, bi_bound;
    naive_matmul(ai, bi, m, k, n, ci, bi_bound);
    expect_matmul(S.select(0, i), ci, bi_bound, fmt::format("small batch {}", i));
  }
  // Vectors, promotion from integers and f32, K = 0.
  std::vector<double> a_row(a.begin(), a.begin() + K);
  std::vector<double> c_row(c.begin(), c.begin() + N), bound_row(bound.begin(), bound.begin() + N);
  expect_matmul(ferry::matmul(f64(a_row), B), c_row, bound_row, "vector x matrix");
  Tensor ints = ferry::tensor(std::vector<std::int64_t>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(ferry::matmul(ints, f64({0.5, 0.25, 0.125, 1.0 / 3.0}, {2, 2})).to_vector<double>(),
            (std::vector<double>{0.5 + 0.25, 0.25 + 2.0 / 3.0, 1.5 + 0.5, 0.75 + 4.0 / 3.0}));
  EXPECT_EQ(ferry::matmul(ints.to(DType::f32), f64({1, 0, 0, 1}, {2, 2})).dtype(), DType::f64);
  EXPECT_EQ(ferry::matmul(ferry::zeros({2, 0}, {.dtype = DType::f64}),
                          ferry::ones({0, 3}, {.dtype = DType::f64}))
                .to_vector<double>(),
            std::vector<double>(6, 0.0));
}

// ---- nn ----

TEST(F64NN, SoftmaxAndLogSoftmax) {
  const Shape shape = {6, 9};
  const std::vector<double> v = doubles(54, -5, 5);
  for (std::int64_t dim : {0, 1}) {
    Tensor x = f64(v, shape);
    std::vector<double> soft(v.size()), logsoft(v.size());
    const std::int64_t n = shape[std::size_t(dim)], other = 54 / n;
    for (std::int64_t o = 0; o < other; ++o) {
      auto at = [&](std::int64_t k) { return std::size_t(dim == 1 ? o * 9 + k : k * 9 + o); };
      double m = -INFINITY, s = 0;
      for (std::int64_t k = 0; k < n; ++k) m = std::max(m, v[at(k)]);
      for (std::int64_t k = 0; k < n; ++k) s += std::exp(v[at(k)] - m);
      for (std::int64_t k = 0; k < n; ++k) {
        soft[at(k)] = std::exp(v[at(k)] - m) / s;
        logsoft[at(k)] = v[at(k)] - m - std::log(s);
      }
    }
    Tensor y = ferry::softmax(x, dim);
    EXPECT_EQ(y.dtype(), DType::f64);
    expect_close(y.to_vector<double>(), soft, kRel, 1e-16, fmt::format("softmax dim {}", dim));
    expect_close(ferry::log_softmax(x, dim).to_vector<double>(), logsoft, kRel, 1e-15,
                 fmt::format("log_softmax dim {}", dim));
  }
  // Logits ~1e-9 apart around 1000: float sees one value, double sees the difference.
  const double d = (1000.0 + 1e-9) - 1000.0;  // exact: the gap as stored
  Tensor big = f64({1000.0, 1000.0 + d});
  std::vector<double> p = ferry::softmax(big, 0).to_vector<double>();
  EXPECT_NEAR(p[1] - p[0], std::tanh(d / 2), 1e-15);
  EXPECT_NEAR(ferry::log_softmax(big, 0).to_vector<double>()[0], -std::log1p(std::exp(d)), 1e-14);
  EXPECT_TRUE(std::isnan(ferry::softmax(f64({1.0, NAN}), 0).to_vector<double>()[0]));
}

TEST(F64NN, LayerNormComputesAndKeepsItsStatisticsInDouble) {
  const std::int64_t rows = 6, n = 17;
  const std::vector<double> v = doubles(std::size_t(rows * n), -3, 3);
  const std::vector<double> w = doubles(std::size_t(n), 0.5, 1.5, 0.4);
  const std::vector<double> b = doubles(std::size_t(n), -1, 1, 0.8);
  const double eps = 1e-5;
  std::vector<double> y(v.size()), mean(rows), rstd(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0, ss = 0;
    for (std::int64_t i = 0; i < n; ++i) s += v[std::size_t(r * n + i)];
    mean[std::size_t(r)] = s / double(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = v[std::size_t(r * n + i)] - mean[std::size_t(r)];
      ss += d * d;
    }
    rstd[std::size_t(r)] = 1 / std::sqrt(ss / double(n) + eps);
    for (std::int64_t i = 0; i < n; ++i)
      y[std::size_t(r * n + i)] = (v[std::size_t(r * n + i)] - mean[std::size_t(r)]) *
                                      rstd[std::size_t(r)] * w[std::size_t(i)] +
                                  b[std::size_t(i)];
  }
  Tensor x = f64(v, {2, 3, n});
  Tensor out = ferry::layer_norm(x, {n}, f64(w), f64(b), eps);
  EXPECT_EQ(out.dtype(), DType::f64);
  EXPECT_EQ(out.sizes(), (Shape{2, 3, n}));
  expect_close(out.to_vector<double>(), y, kRel, 1e-14, "layer_norm");
  auto r = ferry::detail::layer_norm_forward(x, {n}, f64(w), f64(b), eps);
  EXPECT_EQ(r.mean.dtype(), DType::f64);
  EXPECT_EQ(r.rstd.dtype(), DType::f64);
  expect_close(r.mean.to_vector<double>(), mean, kRel, 1e-15, "mean");
  expect_close(r.rstd.to_vector<double>(), rstd, kRel, 0, "rstd");
  // Without affine parameters; f32 parameters are cast to x's dtype.
  Tensor plain = ferry::layer_norm(x, {n});
  std::vector<double> want_plain(v.size());
  for (std::size_t k = 0; k < v.size(); ++k)
    want_plain[k] = (v[k] - mean[k / std::size_t(n)]) * rstd[k / std::size_t(n)];
  expect_close(plain.to_vector<double>(), want_plain, kRel, 1e-14, "no affine");
  EXPECT_EQ(ferry::layer_norm(x, {n}, f64(w).to(DType::f32)).dtype(), DType::f64);
  // The other floating dtypes keep f32 statistics.
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    auto s = ferry::detail::layer_norm_forward(x.to(dt), {n}, Tensor(), Tensor(), eps);
    EXPECT_EQ(s.mean.dtype(), DType::f32) << ferry::dtype_name(dt);
    EXPECT_EQ(s.rstd.dtype(), DType::f32) << ferry::dtype_name(dt);
  }
  // A large offset: exact deviations in double, all lost in float.
  std::vector<double> big(64);
  for (std::size_t k = 0; k < big.size(); ++k) big[k] = 1e6 + double(k) / 1024.0;
  std::vector<double> yb =
      ferry::layer_norm(f64(big), {64}, Tensor(), Tensor(), 0.0).to_vector<double>();
  double var = 0;
  for (std::size_t k = 0; k < 64; ++k) var += std::pow((double(k) - 31.5) / 1024.0, 2) / 64.0;
  for (std::size_t k = 0; k < 64; ++k)
    ASSERT_NEAR(yb[k], (double(k) - 31.5) / 1024.0 / std::sqrt(var), 1e-12) << k;
}

// ---- indexing ----

TEST(F64Index, SelectGatherEmbeddingCatStackMoveExactBits) {
  const std::vector<double> v = doubles(12, -1, 1);
  Tensor x = f64(v, {3, 4});
  Tensor idx = ferry::tensor(std::vector<std::int64_t>{2, 0, 3});
  EXPECT_EQ(ferry::index_select(x, 1, idx).to_vector<double>(),
            (std::vector<double>{v[2], v[0], v[3], v[6], v[4], v[7], v[10], v[8], v[11]}));
  Tensor g = ferry::tensor(std::vector<std::int64_t>{3, 1, 0, 0, 2, 2}, {3, 2});
  EXPECT_EQ(ferry::gather(x, 1, g).to_vector<double>(),
            (std::vector<double>{v[3], v[1], v[4], v[4], v[10], v[10]}));
  Tensor emb = ferry::embedding(x, ferry::tensor(std::vector<std::int64_t>{2, 2, 0}, {3, 1}));
  EXPECT_EQ(emb.sizes(), (Shape{3, 1, 4}));
  EXPECT_EQ(emb.dtype(), DType::f64);
  EXPECT_EQ(emb.to_vector<double>()[4], v[8]);
  Tensor c = ferry::cat({x, x.slice(0, 0, 1)}, 0);
  EXPECT_EQ(c.sizes(), (Shape{4, 4}));
  std::vector<double> want_c = v;
  want_c.insert(want_c.end(), v.begin(), v.begin() + 4);
  EXPECT_EQ(c.to_vector<double>(), want_c);
  // Mixed with f32: promoted to f64, the f32 values widened exactly.
  Tensor mixed = ferry::cat({x, ferry::tensor(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}, {1, 4})});
  EXPECT_EQ(mixed.dtype(), DType::f64);
  EXPECT_EQ(mixed.to_vector<double>()[12], double(0.1f));
  Tensor st = ferry::stack({x.t(), x.t()}, 1);
  EXPECT_EQ(st.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(st.to_vector<double>()[0 * 6 + 1 * 3 + 2], v[8]);
}

TEST(F64Errors, BadInputStillGetsTypedErrors) {
  Tensor x = f64(doubles(12, -1, 1), {3, 4});
  EXPECT_FERRY_ERROR(ferry::matmul(x, x), ferry::ShapeError, "matmul", "[3, 4]");
  EXPECT_FERRY_ERROR(ferry::layer_norm(x, {3}), ferry::ShapeError, "layer_norm");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 1, ferry::tensor(std::vector<std::int64_t>{4})),
                     ferry::ShapeError, "index_select", "4");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 1, f64({1.0})), ferry::DTypeError, "index_select",
                     "f64");
  EXPECT_FERRY_ERROR(ferry::max(ferry::zeros({0}, {.dtype = DType::f64})), ferry::ShapeError,
                     "max");
  EXPECT_FERRY_ERROR(ferry::where(x, x, x), ferry::DTypeError, "where", "f64");
  EXPECT_FERRY_ERROR(ferry::add(x, f64({1, 2, 3})), ferry::ShapeError, "[3, 4]", "[3]");
  EXPECT_FERRY_ERROR(ferry::rand({2}, {.dtype = DType::i32}), ferry::DTypeError, "f64");
}

// ---- backends without f64 ----

namespace {

#define REQUIRE_VULKAN()                                                       \
  do {                                                                         \
    if (!ferry::is_available("vulkan:0")) {                                    \
      std::string why = "no Vulkan device";                                    \
      for (const ferry::DeviceInfo& d : ferry::devices())                      \
        if (d.backend == "vulkan" && !d.available) why = d.unavailable_reason; \
      GTEST_SKIP() << why;                                                     \
    }                                                                          \
  } while (0)

// Bit patterns a value-converting path would change: NaN payloads, -0,
// subnormals, the extremes.
std::vector<std::uint64_t> special_bits() {
  return {0x7ff8000000000001ull, 0xfff4000000000123ull, 0x8000000000000000ull,
          0x0000000000000001ull, 0x7fefffffffffffffull, 0x3fb999999999999aull,
          0xfff0000000000000ull, 0x000fffffffffffffull};
}

}  // namespace

TEST(F64Vulkan, BytesRoundTripExactly) {
  REQUIRE_VULKAN();
  const ferry::Device vk("vulkan:0");
  std::vector<std::uint64_t> bits = special_bits();
  Tensor x = ferry::tensor_from_bytes(bits.data(), bits.size() * 8, DType::f64,
                                      {std::int64_t(bits.size())}, ferry::Device::cpu());
  Tensor on = x.to(vk);
  EXPECT_EQ(on.dtype(), DType::f64);
  EXPECT_EQ(on.device(), vk);
  Tensor back = on.to(ferry::Device::cpu());
  ASSERT_TRUE(back.is_contiguous());
  EXPECT_EQ(std::memcmp(back.storage()->buffer().host_ptr(), bits.data(), bits.size() * 8), 0);
  // A CPU view leaves compact; values read on the host, as f64 or converted there.
  Tensor big = f64(doubles(1000, -1e3, 1e3), {10, 100});
  EXPECT_EQ(big.t().to(vk).to_vector<double>(), big.t().contiguous().to_vector<double>());
  EXPECT_EQ(big.to(vk).to_vector<float>(), big.to_vector<float>());
  EXPECT_EQ(big.to(vk).to(ferry::Device::cpu(), DType::f32).to_vector<float>(),
            big.to_vector<float>());
  EXPECT_EQ(
      ferry::ones({3}, {.device = vk}).to(ferry::Device::cpu(), DType::f64).to_vector<double>(),
      (std::vector<double>{1, 1, 1}));
  EXPECT_NE(f64({0.5}).to(vk).str().find("dtype=f64"), std::string::npos);
}

// The ops with an f64 module (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp) compute
// in double: the results equal the CPU's bit for bit, on values that f32 would round.
TEST(F64Vulkan, ArithmeticComparisonsCastsFillAndReductionsComputeInDouble) {
  REQUIRE_VULKAN();
  const ferry::Device vk("vulkan:0");
  if (!ferry::device_impl(vk).supports(ferry::OpId::add, DType::f64))
    GTEST_SKIP() << "vulkan:0 lacks shaderFloat64";
  const ferry::Device cpu = ferry::Device::cpu();
  std::vector<double> xv = doubles(12, -3, 3), yv = doubles(12, -2, 2, 0.7);
  for (double& v : xv) v += 1e-12;  // below f32's resolution
  xv[0] = std::numeric_limits<double>::quiet_NaN();
  yv[1] = -0.0;
  yv[2] = xv[2];
  const Tensor x = f64(xv, {3, 4}), y = f64(yv, {3, 4});
  const Tensor cond = ferry::gt(x, y);
  using Fn = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"neg", [](auto& a, auto&, auto&) { return ferry::neg(a); }},
      {"abs", [](auto& a, auto&, auto&) { return ferry::abs(a); }},
      {"relu", [](auto& a, auto&, auto&) { return ferry::relu(a); }},
      {"floor", [](auto& a, auto&, auto&) { return ferry::floor(a); }},
      {"ceil", [](auto& a, auto&, auto&) { return ferry::ceil(a); }},
      {"trunc", [](auto& a, auto&, auto&) { return ferry::trunc(a); }},
      {"round", [](auto& a, auto&, auto&) { return ferry::round(a); }},
      {"frac", [](auto& a, auto&, auto&) { return ferry::frac(a); }},
      {"sign", [](auto& a, auto&, auto&) { return ferry::sign(a); }},
      {"reciprocal", [](auto& a, auto&, auto&) { return ferry::reciprocal(a); }},
      {"sqrt", [](auto& a, auto&, auto&) { return ferry::sqrt(ferry::abs(a)); }},
      {"rsqrt", [](auto& a, auto&, auto&) { return ferry::rsqrt(ferry::abs(a)); }},
      {"square", [](auto& a, auto&, auto&) { return ferry::square(a); }},
      {"add", [](auto& a, auto& b, auto&) { return ferry::add(a, b); }},
      {"sub", [](auto& a, auto& b, auto&) { return ferry::sub(a, b); }},
      {"mul", [](auto& a, auto& b, auto&) { return ferry::mul(a, b); }},
      {"div", [](auto& a, auto& b, auto&) { return ferry::div(a, b); }},
      {"maximum", [](auto& a, auto& b, auto&) { return ferry::maximum(a, b); }},
      {"minimum", [](auto& a, auto& b, auto&) { return ferry::minimum(a, b); }},
      {"copysign", [](auto& a, auto& b, auto&) { return ferry::copysign(a, b); }},
      {"scalar", [](auto& a, auto&, auto&) { return a * 3.0000000001; }},  // fill, then mul
      {"lt", [](auto& a, auto& b, auto&) { return ferry::lt(a, b).to(DType::f64); }},
      {"eq", [](auto& a, auto& b, auto&) { return ferry::eq(a, b).to(DType::f64); }},
      {"where", [](auto& a, auto& b, auto& c) { return ferry::where(c, a, b); }},
      {"transpose copy", [](auto& a, auto&, auto&) { return a.t().contiguous(); }},
      {"cast to f32 and back",
       [](auto& a, auto&, auto&) { return a.to(DType::f32).to(DType::f64); }},
      {"cast to i64",
       [](auto& a, auto&, auto&) { return (a * 1e6).to(DType::i64).to(DType::f64); }},
      {"cat",
       [](auto& a, auto& b, auto&) {
         return ferry::cat({a, b});
       }},
      {"index_select",
       [](auto& a, auto&, auto&) {
         return ferry::index_select(
             a, 1, ferry::tensor(std::vector<std::int64_t>{3, 0, 3}).to(a.device()));
       }},
      {"gather",
       [](auto& a, auto&, auto&) {
         return ferry::gather(
             a, 0, ferry::tensor(std::vector<std::int64_t>{2, 0, 1, 1}, {1, 4}).to(a.device()));
       }},
      {"flip",
       [](auto& a, auto&, auto&) {
         return ferry::flip(a, {0, 1});
       }},
  };
  for (const auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    const Tensor want = fn(x, y, cond);
    const Tensor got = fn(x.to(vk), y.to(vk), cond.to(vk));
    EXPECT_EQ(got.device(), vk);
    ASSERT_EQ(got.dtype(), DType::f64);
    const std::vector<double> g = got.to(cpu).to_vector<double>(), w = want.to_vector<double>();
    ASSERT_EQ(g.size(), w.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(std::memcmp(&g[i], &w[i], 8) == 0 || (std::isnan(g[i]) && std::isnan(w[i])))
          << "element " << i << ": vulkan " << g[i] << ", cpu " << w[i];
  }
  // The reductions: max, min and argmax exact; sums and means to double rounding (their order
  // of additions differs from the CPU's), on values whose f32 sum would be off by 1e-8.
  for (int dim : {0, 1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const Tensor xs = f64(doubles(12, -3, 3), {3, 4}) + 1e-9, on = xs.to(vk);
    EXPECT_EQ(ferry::amax(on, {dim}).to(cpu).to_vector<double>(),
              ferry::amax(xs, {dim}).to_vector<double>());
    EXPECT_EQ(ferry::amin(on, {dim}).to(cpu).to_vector<double>(),
              ferry::amin(xs, {dim}).to_vector<double>());
    EXPECT_EQ(ferry::argmax(on, dim).to(cpu).to_vector<std::int64_t>(),
              ferry::argmax(xs, dim).to_vector<std::int64_t>());
    for (const auto& [got, want] : {std::pair{ferry::sum(on, {dim}), ferry::sum(xs, {dim})},
                                    std::pair{ferry::mean(on, {dim}), ferry::mean(xs, {dim})},
                                    std::pair{ferry::prod(on, {dim}), ferry::prod(xs, {dim})}}) {
      const std::vector<double> g = got.to(cpu).to_vector<double>(), w = want.to_vector<double>();
      ASSERT_EQ(g.size(), w.size());
      for (std::size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(g[i], w[i], 1e-14 * (1 + std::abs(w[i])));
    }
  }
  // A fill's value is the double itself.
  EXPECT_EQ(ferry::full({2}, 0.1, {.dtype = DType::f64, .device = vk}).to(cpu).to_vector<double>(),
            (std::vector<double>{0.1, 0.1}));
}

// Every Vulkan kernel computes f64 where the device runs the full shader variant and has
// shaderFloat64 (lavapipe does): supports() says so for each op of the table that takes a
// float, and a sample of kernels of every shader family runs on f64 without an error. Where
// the device lacks them, the conformance suite's base_shaders run sees every f64 case refused.
TEST(F64Vulkan, EveryKernelTakesF64WithShaderFloat64) {
  REQUIRE_VULKAN();
  const ferry::Device vk("vulkan:0");
  ferry::DeviceImpl& impl = ferry::device_impl(vk);
  if (!impl.supports(ferry::OpId::add, DType::f64)) GTEST_SKIP() << "vulkan:0 lacks shaderFloat64";
  for (const ferry::OpInfo& info : ferry::op_table()) {
    if (!(info.builtin_backends & ferry::kOpOn_vulkan) || info.impl != ferry::OpImpl::kernel ||
        !info.kernel_dtypes().has(DType::f64))
      continue;
    EXPECT_TRUE(impl.supports(info.id, DType::f64)) << info.name;
  }
  Tensor x = f64(doubles(12, -1, 1), {3, 4}).to(vk);
  const ferry::TensorOptions on_vk = {.dtype = DType::f64, .device = vk};
  EXPECT_EQ(ferry::arange(5.0, on_vk).to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4}));
  for (const Tensor& t :
       {ferry::exp(x), ferry::matmul(x, x.t()), ferry::softmax(x, 1), ferry::layer_norm(x, {4}),
        ferry::cumsum(x, 1), ferry::rand({3}, on_vk), ferry::randn({3}, on_vk),
        ferry::randint(0, 5, {3}, on_vk), ferry::sort(x, 1).values}) {
    EXPECT_EQ(t.dtype(), DType::f64);
    EXPECT_EQ(t.device(), vk);
  }
}

// Where the device cannot compute f64 (no shaderFloat64, or the base shader variant: the ctest
// entry f64_refused_on_base_shaders runs this with FERRY_VULKAN_BASE_SHADERS=1), the kernels
// refuse it with UnsupportedError naming op, dtype and device, f64 tensors still move there
// and back, and the device works afterwards.
TEST(F64Vulkan, RefusedWhereTheDeviceCannotComputeIt) {
  REQUIRE_VULKAN();
  const ferry::Device vk("vulkan:0");
  if (ferry::device_impl(vk).supports(ferry::OpId::add, DType::f64))
    GTEST_SKIP() << "vulkan:0 computes f64; the ctest entry f64_refused_on_base_shaders runs "
                    "this with FERRY_VULKAN_BASE_SHADERS=1";
  const Tensor host = f64(doubles(12, -1, 1), {3, 4});
  const Tensor x = host.to(vk);
  const ferry::TensorOptions on_vk = {.dtype = DType::f64, .device = vk};
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"exp", [&] { (void)ferry::exp(x); }},
      {"add", [&] { (void)ferry::add(x, x); }},
      {"pow", [&] { (void)ferry::pow(x, x); }},
      {"arange", [&] { (void)ferry::arange(5.0, on_vk); }},
      {"random_normal", [&] { (void)ferry::randn({3}, on_vk); }},
      {"matmul", [&] { (void)ferry::matmul(x, x.t()); }},
      {"softmax", [&] { (void)ferry::softmax(x, 1); }},
      {"layer_norm", [&] { (void)ferry::layer_norm(x, {4}); }},
      {"cumsum", [&] { (void)ferry::cumsum(x, 1); }},
      {"sort", [&] { (void)ferry::sort(x, 1); }},
  };
  for (const auto& [op, call] : calls) {
    try {
      call();
      ADD_FAILURE() << op << " on f64 should throw UnsupportedError on vulkan:0";
    } catch (const ferry::UnsupportedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(op), std::string::npos) << op << ": " << msg;
      EXPECT_NE(msg.find("f64"), std::string::npos) << op << ": " << msg;
      EXPECT_NE(msg.find("vulkan:0"), std::string::npos) << op << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << op << " threw the wrong type: " << e.what();
    }
  }
  EXPECT_EQ(x.to_vector<double>(), host.to_vector<double>());  // the bytes still move
  ferry::synchronize(vk);
  EXPECT_EQ(ferry::add(ferry::ones({2}, {.device = vk}), 1.0).to_vector<float>(),
            (std::vector<float>{2, 2}));
}
