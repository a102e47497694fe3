// softmax, log_softmax, layer_norm and embedding against formulas computed here
// in double: every dim, strided inputs, extreme values, NaN, every dtype,
// empty tensors, and the typed errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "ops_internal.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;
using ferry_test::sample_tensor;

namespace {

// softmax (or log_softmax) of row-major `x` of `shape` along `dim`, in double.
std::vector<double> softmax_ref(const std::vector<double>& x, const Shape& shape, std::int64_t dim,
                                bool log) {
  const auto nd = std::int64_t(shape.size());
  if (dim < 0) dim += nd;
  std::int64_t inner = 1;
  for (std::int64_t d = dim + 1; d < nd; ++d) inner *= shape[std::size_t(d)];
  const std::int64_t n = shape[std::size_t(dim)];
  const std::int64_t outer = std::int64_t(x.size()) / (n * inner);
  std::vector<double> y(x.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t k) { return std::size_t((o * n + k) * inner + i); };
      double m = -INFINITY, s = 0;
      for (std::int64_t k = 0; k < n; ++k) m = std::max(m, x[at(k)]);
      for (std::int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
      for (std::int64_t k = 0; k < n; ++k)
        y[at(k)] = log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
    }
  return y;
}

// layer_norm over the last `n` elements of each row, biased variance.
std::vector<double> layer_norm_ref(const std::vector<double>& x, std::int64_t n,
                                   const std::vector<double>& w, const std::vector<double>& b,
                                   double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / std::size_t(n); ++r) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < n; ++i) mean += x[r * std::size_t(n) + std::size_t(i)] / double(n);
    for (std::int64_t i = 0; i < n; ++i) {
      double d = x[r * std::size_t(n) + std::size_t(i)] - mean;
      var += d * d / double(n);
    }
    for (std::int64_t i = 0; i < n; ++i) {
      std::size_t k = r * std::size_t(n) + std::size_t(i);
      y[k] = (x[k] - mean) / std::sqrt(var + eps) * (w.empty() ? 1 : w[std::size_t(i)]) +
             (b.empty() ? 0 : b[std::size_t(i)]);
    }
  }
  return y;
}

}  // namespace

TEST(Softmax, EveryDimMatchesReference) {
  Tensor x = sample_tensor({5, 7, 13}, -4, 4);
  for (std::int64_t dim : {0, 1, 2, -1, -3}) {
    Tensor y = ferry::softmax(x, dim);
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_EQ(y.dtype(), DType::f32);
    expect_close(as_double(y), softmax_ref(as_double(x), x.sizes(), dim, false), 1e-5, 1e-7,
                 fmt::format("softmax dim {}", dim));
    expect_close(as_double(ferry::log_softmax(x, dim)),
                 softmax_ref(as_double(x), x.sizes(), dim, true), 1e-5, 1e-5,
                 fmt::format("log_softmax dim {}", dim));
    // Rows sum to 1.
    std::vector<double> sums = as_double(ferry::sum(y, {dim}));
    expect_close(sums, std::vector<double>(sums.size(), 1.0), 0, 1e-5, "row sums");
  }
}

TEST(Softmax, OddAndEmptySizes) {
  for (std::int64_t n : {1, 7, 13, 127, 1023}) {
    Tensor x = sample_tensor({3, n}, -10, 10, int(n));
    expect_close(as_double(ferry::softmax(x, 1)), softmax_ref(as_double(x), x.sizes(), 1, false),
                 1e-5, 1e-7, fmt::format("n {}", n));
  }
  Tensor one = ferry::softmax(ferry::ones({4, 1}), 1);
  EXPECT_EQ(one.to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(ferry::softmax(ferry::zeros({0, 5}), 1).sizes(), (Shape{0, 5}));
  EXPECT_EQ(ferry::log_softmax(ferry::zeros({3, 0}), 1).sizes(), (Shape{3, 0}));
  EXPECT_EQ(ferry::softmax(ferry::scalar_tensor(3.0), 0).item<float>(), 1.0f);
  EXPECT_EQ(ferry::log_softmax(ferry::scalar_tensor(3.0), -1).item<float>(), 0.0f);
}

TEST(Softmax, StridedInputs) {
  Tensor base = sample_tensor({8, 12});
  for (const Tensor& x :
       {base.t(), base.slice(1, 0, 12, 3), sample_tensor({1, 12}).expand({5, 12})})
    for (std::int64_t dim : {0, 1}) {
      expect_close(as_double(ferry::softmax(x, dim)),
                   softmax_ref(as_double(x), x.sizes(), dim, false), 1e-5, 1e-7, "strided softmax");
      expect_close(as_double(ferry::log_softmax(x, dim)),
                   softmax_ref(as_double(x), x.sizes(), dim, true), 1e-5, 1e-5,
                   "strided log_softmax");
    }
}

TEST(Softmax, ExtremeValues) {
  // Large logits: subtracting the row max keeps exp finite.
  Tensor x = ferry::tensor(std::vector<float>{1000, 1001, 1002, -1000, 0, 1000}, {2, 3});
  expect_close(as_double(ferry::softmax(x, 1)), softmax_ref(as_double(x), {2, 3}, 1, false), 1e-6,
               1e-7, "large");
  expect_close(as_double(ferry::log_softmax(x, 1)), softmax_ref(as_double(x), {2, 3}, 1, true),
               1e-6, 1e-5, "large log");
  // -inf gives probability 0 (log: -inf); a NaN makes its whole row NaN.
  Tensor y = ferry::tensor(std::vector<float>{-INFINITY, 0, 0, 1, NAN, 2}, {2, 3});
  std::vector<float> p = ferry::softmax(y, 1).to_vector<float>();
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_FLOAT_EQ(p[1], 0.5f);
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(p[std::size_t(i)]));
  EXPECT_EQ(ferry::log_softmax(y, 1).to_vector<float>()[0], -INFINITY);
}

TEST(Softmax, Dtypes) {
  Tensor x = sample_tensor({4, 33}, -5, 5);
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor xd = x.to(dt);
    const double tol = dt == DType::f16 ? 2e-3 : 1e-2;
    EXPECT_EQ(ferry::softmax(xd, 1).dtype(), dt);
    expect_close(as_double(ferry::softmax(xd, 1)), softmax_ref(as_double(xd), {4, 33}, 1, false),
                 tol, 1e-4, "16");
    expect_close(as_double(ferry::log_softmax(xd, 0)), softmax_ref(as_double(xd), {4, 33}, 0, true),
                 tol, tol, "16 log");
  }
  // Integer inputs compute in f32.
  Tensor i = ferry::arange(6.0, {.dtype = DType::i64}).reshape({2, 3});
  Tensor yi = ferry::softmax(i, 1);
  EXPECT_EQ(yi.dtype(), DType::f32);
  expect_close(as_double(yi), softmax_ref({0, 1, 2, 3, 4, 5}, {2, 3}, 1, false), 1e-6, 1e-7, "int");
  EXPECT_EQ(ferry::log_softmax(ferry::ones({3}, {.dtype = DType::boolean}), 0).dtype(), DType::f32);
}

TEST(Softmax, Errors) {
  EXPECT_FERRY_ERROR(ferry::softmax(ferry::ones({2, 3}), 2), ferry::ShapeError, "softmax");
  EXPECT_FERRY_ERROR(ferry::log_softmax(ferry::ones({2, 3}), -3), ferry::ShapeError, "log_softmax");
}

TEST(LayerNorm, NormalizesRows) {
  for (std::int64_t n : {1, 7, 13, 127, 1023}) {
    Tensor x = sample_tensor({5, n}, -3, 7, int(n));
    Tensor y = ferry::layer_norm(x, {n});
    EXPECT_EQ(y.sizes(), x.sizes());
    expect_close(as_double(y), layer_norm_ref(as_double(x), n, {}, {}, 1e-5), 1e-4, 1e-4,
                 fmt::format("n {}", n));
    if (n > 1) {
      expect_close(as_double(ferry::mean(y, {1})), std::vector<double>(5, 0.0), 0, 1e-5, "mean 0");
      // var(y) = var / (var + eps): 1 up to eps.
      expect_close(as_double(ferry::var(y, {1}, 0)), std::vector<double>(5, 1.0), 0, 1e-3, "var 1");
    }
  }
}

TEST(LayerNorm, WeightBiasAndTrailingDims) {
  Tensor x = sample_tensor({2, 3, 4, 5});
  Tensor w = sample_tensor({4, 5}, 0.5, 2, 1), b = sample_tensor({4, 5}, -1, 1, 2);
  std::vector<double> wv = as_double(w), bv = as_double(b);
  expect_close(as_double(ferry::layer_norm(x, {4, 5}, w, b, 1e-3)),
               layer_norm_ref(as_double(x), 20, wv, bv, 1e-3), 1e-4, 1e-4, "weight and bias");
  expect_close(as_double(ferry::layer_norm(x, {4, 5}, w)),
               layer_norm_ref(as_double(x), 20, wv, {}, 1e-5), 1e-4, 1e-4, "weight only");
  expect_close(as_double(ferry::layer_norm(x, {4, 5}, {}, b)),
               layer_norm_ref(as_double(x), 20, {}, bv, 1e-5), 1e-4, 1e-4, "bias only");
  // Strided input and parameters of another dtype (cast to x's).
  Tensor xt = sample_tensor({6, 4}).t();  // [4, 6]
  Tensor w16 = sample_tensor({6}, 0.5, 2, 3).to(DType::f16);
  expect_close(as_double(ferry::layer_norm(xt, {6}, w16)),
               layer_norm_ref(as_double(xt), 6, as_double(w16), {}, 1e-5), 1e-4, 1e-4,
               "transposed input");
  // Large offsets do not cancel the variance (two passes).
  Tensor shifted = ferry::add(sample_tensor({3, 16}), 1e4);
  expect_close(as_double(ferry::layer_norm(shifted, {16})),
               layer_norm_ref(as_double(shifted), 16, {}, {}, 1e-5), 0, 5e-3, "offset 1e4");
}

TEST(LayerNorm, StatisticsForBackward) {
  Tensor x = sample_tensor({3, 10});
  auto r = ferry::detail::layer_norm_forward(x, {10}, {}, {}, 1e-5);
  EXPECT_EQ(r.mean.sizes(), (Shape{3}));
  EXPECT_EQ(r.rstd.dtype(), DType::f32);
  std::vector<double> xv = as_double(x), mean = as_double(r.mean), rstd = as_double(r.rstd);
  for (std::size_t row = 0; row < 3; ++row) {
    double m = 0, v = 0;
    for (std::size_t i = 0; i < 10; ++i) m += xv[row * 10 + i] / 10;
    for (std::size_t i = 0; i < 10; ++i) v += (xv[row * 10 + i] - m) * (xv[row * 10 + i] - m) / 10;
    EXPECT_NEAR(mean[row], m, 1e-6);
    EXPECT_NEAR(rstd[row], 1 / std::sqrt(v + 1e-5), 1e-5);
  }
}

TEST(LayerNorm, DtypesAndEmpty) {
  Tensor x = sample_tensor({4, 32});
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor xd = x.to(dt);
    Tensor y = ferry::layer_norm(xd, {32});
    EXPECT_EQ(y.dtype(), dt);
    const double tol = dt == DType::f16 ? 3e-3 : 2e-2;
    expect_close(as_double(y), layer_norm_ref(as_double(xd), 32, {}, {}, 1e-5), tol, tol, "16-bit");
  }
  EXPECT_EQ(ferry::layer_norm(ferry::zeros({0, 8}), {8}).sizes(), (Shape{0, 8}));
}

// layer_norm's gradients in double: dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) with ĝ = g w per
// row, dweight = Σ g x̂ and dbias = Σ g over the rows.
struct LayerNormGrads {
  std::vector<double> dx, dw, db;
};
LayerNormGrads layer_norm_grads_ref(const std::vector<double>& x, const std::vector<double>& g,
                                    std::int64_t n, const std::vector<double>& w, double eps) {
  const std::size_t un = std::size_t(n), rows = x.size() / un;
  LayerNormGrads r{std::vector<double>(x.size()), std::vector<double>(un), std::vector<double>(un)};
  for (std::size_t row = 0; row < rows; ++row) {
    const double* xr = x.data() + row * un;
    const double* gr = g.data() + row * un;
    double m = 0, v = 0, c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < un; ++i) m += xr[i] / double(n);
    for (std::size_t i = 0; i < un; ++i) v += (xr[i] - m) * (xr[i] - m) / double(n);
    const double rstd = 1 / std::sqrt(v + eps);
    for (std::size_t i = 0; i < un; ++i) {
      const double xh = (xr[i] - m) * rstd, gh = gr[i] * (w.empty() ? 1.0 : w[i]);
      c1 += gh / double(n);
      c2 += gh * xh / double(n);
      r.dw[i] += gr[i] * xh;
      r.db[i] += gr[i];
    }
    for (std::size_t i = 0; i < un; ++i) {
      const double xh = (xr[i] - m) * rstd, gh = gr[i] * (w.empty() ? 1.0 : w[i]);
      r.dx[row * un + i] = rstd * (gh - c1 - xh * c2);
    }
  }
  return r;
}

std::vector<double> doubles(const Tensor& t) {  // as_double goes through f32
  return t.to(DType::f64).to_vector<double>();
}

// The CPU runs layer_norm's backward as one layer_norm_backward kernel (Note [layer_norm's
// backward on the CPU], and shaders/layer_norm_backward.comp on vulkan:0 where it runs): held to
// the closed form in every float dtype, with more rows than one thread's part, a transposed
// input, and no weight, and to zeros with no rows; under debug::CompositesOnly the composition
// runs instead, and the profiler sees which.
TEST(LayerNorm, BackwardKernelAgainstTheClosedForm) {
  std::vector<ferry::Device> devices{ferry::Device::cpu()};
  if (ferry::is_available("vulkan:0")) devices.emplace_back("vulkan:0");
  for (const ferry::Device& dev : devices) {
    ASSERT_TRUE(ferry::device_impl(dev).supports(ferry::OpId::layer_norm_backward, DType::f32));
    const std::int64_t n = 301;
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
      for (const bool transposed : {false, true})
        for (const bool affine : {true, false}) {
          const std::string what =
              fmt::format("{} {}{}{}", dev.str(), ferry::dtype_name(dt),
                          transposed ? " transposed" : "", affine ? " affine" : " no weight");
          Tensor x = (transposed ? sample_tensor({n, 257}, -3, 7, 5).t()
                                 : sample_tensor({257, n}, -3, 7, 5))
                         .to(dt)
                         .to(dev)
                         .requires_grad_();
          Tensor w = sample_tensor({n}, 0.5, 2, 6).to(dt).to(dev).requires_grad_();
          Tensor b = sample_tensor({n}, -1, 1, 7).to(dt).to(dev).requires_grad_();
          const Tensor g = sample_tensor({257, n}, -1, 1, 8).to(dt).to(dev);
          EXPECT_EQ(ferry_test::kernel_calls("layer_norm_backward",
                                             [&] {
                                               const Tensor y =
                                                   affine ? ferry::layer_norm(x, {n}, w, b)
                                                          : ferry::layer_norm(x, {n});
                                               y.backward(g);
                                             }),
                    1u)
              << what;
          const LayerNormGrads want =
              layer_norm_grads_ref(doubles(x.detach()), doubles(g), n,
                                   affine ? doubles(w.detach()) : std::vector<double>{}, 1e-5);
          const double tol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-4 : 3e-2;
          expect_close(doubles(x.grad()), want.dx, tol, tol, what + " dx");
          if (affine) {
            expect_close(doubles(w.grad()), want.dw, tol, tol * 16, what + " dweight");
            expect_close(doubles(b.grad()), want.db, tol, tol * 16, what + " dbias");
          }
        }
    // No rows: no kernel runs, and the parameters' gradients are zeros. Empty rows: empty
    // gradients, fused and composed.
    {
      Tensor x = ferry::empty({0, 5}, {.device = dev}).requires_grad_();
      Tensor w = ferry::ones({5}, {.device = dev}).requires_grad_();
      Tensor b = ferry::zeros({5}, {.device = dev}).requires_grad_();
      ferry::sum(ferry::layer_norm(x, {5}, w, b)).backward();
      EXPECT_EQ(x.grad().sizes(), (Shape{0, 5}));
      EXPECT_EQ(doubles(w.grad()), std::vector<double>(5, 0.0)) << dev.str();
      EXPECT_EQ(doubles(b.grad()), std::vector<double>(5, 0.0)) << dev.str();
      for (const bool composed : {false, true}) {
        std::optional<ferry::debug::CompositesOnly> only;
        if (composed) only.emplace();
        Tensor e = ferry::empty({3, 2, 0}, {.device = dev}).requires_grad_();
        Tensor ew = ferry::ones({0}, {.device = dev}).requires_grad_();
        ferry::sum(ferry::layer_norm(e, {0}, ew)).backward();
        EXPECT_EQ(e.grad().sizes(), (Shape{3, 2, 0})) << dev.str();
        EXPECT_EQ(ew.grad().sizes(), (Shape{0})) << dev.str();
      }
    }
    // The composition, asked for, runs no such kernel and gives the same gradients.
    Tensor x = sample_tensor({9, 31}).to(dev).requires_grad_();
    Tensor w = sample_tensor({31}, 0.5, 2, 1).to(dev).requires_grad_();
    const Tensor g = sample_tensor({9, 31}, -1, 1, 2).to(dev);
    ferry::layer_norm(x, {31}, w).backward(g);
    const std::vector<double> fused = doubles(x.grad()), fused_w = doubles(w.grad());
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    EXPECT_EQ(ferry_test::kernel_calls("layer_norm_backward",
                                       [&] {
                                         ferry::debug::CompositesOnly composition;
                                         ferry::layer_norm(x, {31}, w).backward(g);
                                       }),
              0u);
    expect_close(doubles(x.grad()), fused, 1e-5, 1e-5, dev.str() + " composition dx");
    expect_close(doubles(w.grad()), fused_w, 1e-5, 1e-5, dev.str() + " composition dweight");
    // The kernel called with operands that disagree is a typed error, not a read past them.
    const ferry::TensorOptions f64{.dtype = DType::f64, .device = dev};
    const Tensor x64 = ferry::ones({4, 8}, f64);
    const Tensor s64 = ferry::ones({4}, f64);
    const Tensor d64 = ferry::empty({4, 8}, f64);
    const Tensor p64 = ferry::empty({8}, f64);
    const ferry::Attrs no_weight{{"has_weight", false}};
    EXPECT_FERRY_ERROR(
        ferry::detail::run_kernel(ferry::OpId::layer_norm_backward,
                                  {ferry::ones({4, 8}, {.device = dev}), x64, s64, s64},
                                  {d64, p64, p64}, no_weight),
        ferry::DTypeError, "layer_norm_backward", "f64", "f32");
    EXPECT_FERRY_ERROR(
        ferry::detail::run_kernel(ferry::OpId::layer_norm_backward, {x64, x64, s64, s64},
                                  {d64, ferry::empty({7}, f64), p64}, no_weight),
        ferry::ShapeError, "layer_norm_backward");
  }
}

TEST(LayerNorm, Errors) {
  Tensor x = ferry::ones({2, 3, 4});
  EXPECT_FERRY_ERROR(ferry::layer_norm(x, {3}), ferry::ShapeError, "layer_norm", "[3]",
                     "[2, 3, 4]");
  EXPECT_FERRY_ERROR(ferry::layer_norm(x, {}), ferry::ShapeError, "layer_norm");
  EXPECT_FERRY_ERROR(ferry::layer_norm(x, {1, 2, 3, 4}), ferry::ShapeError, "layer_norm");
  EXPECT_FERRY_ERROR(ferry::layer_norm(x, {4}, ferry::ones({5})), ferry::ShapeError, "layer_norm",
                     "weight", "[5]");
  EXPECT_FERRY_ERROR(ferry::layer_norm(x, {3, 4}, {}, ferry::ones({4})), ferry::ShapeError,
                     "layer_norm", "bias");
  EXPECT_FERRY_ERROR(ferry::layer_norm(ferry::ones({2, 4}, {.dtype = DType::i32}), {4}),
                     ferry::DTypeError, "layer_norm", "i32");
}

TEST(Embedding, LooksUpRows) {
  Tensor weight = ferry::arange(20.0).reshape({5, 4});
  for (DType it : {DType::i64, DType::i32}) {
    Tensor idx = ferry::tensor(std::vector<std::int64_t>{4, 0, 2, 2, 1, 3}, {2, 3}).to(it);
    Tensor e = ferry::embedding(weight, idx);
    EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
    std::vector<float> got = e.to_vector<float>();
    std::vector<std::int64_t> iv = {4, 0, 2, 2, 1, 3};
    for (std::size_t k = 0; k < 6; ++k)
      for (std::size_t j = 0; j < 4; ++j)
        EXPECT_EQ(got[k * 4 + j], float(iv[k] * 4 + std::int64_t(j)));
  }
  // A 0-d index gives one row; an empty index gives [0, D]; a strided weight works.
  EXPECT_EQ(ferry::embedding(weight, ferry::scalar_tensor(3)).to_vector<float>(),
            (std::vector<float>{12, 13, 14, 15}));
  EXPECT_EQ(ferry::embedding(weight, ferry::zeros({0}, {.dtype = DType::i64})).sizes(),
            (Shape{0, 4}));
  Tensor wt = ferry::arange(20.0).reshape({4, 5}).t();  // [5, 4], column-major
  EXPECT_EQ(ferry::embedding(wt, ferry::scalar_tensor(1)).to_vector<float>(),
            (std::vector<float>{1, 6, 11, 16}));
  // Many lookups into a wider table (row copies).
  Tensor big = sample_tensor({300, 64});
  Tensor ids = ferry::tensor(std::vector<std::int64_t>{299, 0, 150, 7});
  expect_close(as_double(ferry::embedding(big, ids).select(0, 2)), as_double(big.select(0, 150)), 0,
               0, "row 150");
}

TEST(Embedding, Errors) {
  Tensor weight = ferry::ones({5, 4});
  EXPECT_FERRY_ERROR(ferry::embedding(ferry::ones({5}), ferry::scalar_tensor(1)), ferry::ShapeError,
                     "embedding", "[5]");
  EXPECT_FERRY_ERROR(ferry::embedding(weight, ferry::ones({2})), ferry::DTypeError, "embedding",
                     "f32");
  EXPECT_FERRY_ERROR(ferry::embedding(weight, ferry::tensor(std::vector<std::int64_t>{1, 5})),
                     ferry::ShapeError, "embedding", "5");
  EXPECT_FERRY_ERROR(ferry::embedding(weight, ferry::tensor(std::vector<std::int64_t>{-1})),
                     ferry::ShapeError, "embedding", "-1");
}
