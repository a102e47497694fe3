// tests/test_sort_ops.cpp — prod, the scans and the sort (ferry/ops_sort.hpp),
// and the scatters and searches made of the sort (ferry/ops_shape.hpp),
// beyond the conformance suite's device-against-CPU cases: every gradient
// against finite differences (zeros in products included), the CPU kernels'
// long-row paths (radix sort, chunked scans) against plain sequential
// references written here, the accelerators' long rows against the CPU, and
// the typed errors where PyTorch refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::grad_input;
using ferry_test::gradcheck;
using In = std::vector<Tensor>;

Tensor f64(std::vector<double> v, ferry::Shape shape) {
  return ferry::tensor(v, shape).to(DType::f64);
}

TEST(SortOps, ProductAndScanGradients) {
  Tensor a = grad_input({3, 4}, 0.5, 2, 1);
  for (std::vector<std::int64_t> dims : {std::vector<std::int64_t>{}, {1}, {0}, {0, 1}})
    for (bool keepdim : {false, true})
      EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::prod(in[0], dims, keepdim); }, {a}));
  // One zero, two zeros and no zero in a row; a zero first and last.
  Tensor z = f64({1.5, 0, 2, -1, 0.5, 0, 3, 0, 1.25, -2, 2, 0.75, 0, 1.5, -0.5}, {3, 5});
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::prod(in[0], {1}); }, {z}));
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::prod(in[0]); }, {z}));
  for (std::int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::cumsum(in[0], dim); }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::cumprod(in[0], dim); }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::cumprod(in[0], dim); }, {z}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::cummax(in[0], dim).values; }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::cummin(in[0], dim).values; }, {a}));
  }
}

TEST(SortOps, SelectionGradients) {
  Tensor a = grad_input({4, 7}, -2, 2, 3);  // distinct values: no tie within epsilon
  for (std::int64_t dim : {0, 1}) {
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::sort(in[0], dim).values; }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::sort(in[0], dim, true).values; }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::topk(in[0], 3, dim).values; }, {a}));
    EXPECT_TRUE(
        gradcheck([&](const In& in) { return ferry::kthvalue(in[0], 2, dim, true).values; }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::median(in[0], dim).values; }, {a}));
    EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::mode(in[0], dim).values; }, {a}));
  }
  EXPECT_TRUE(gradcheck([](const In& in) { return ferry::median(in[0]); }, {a}));
}

// The CPU's radix sort (rows of 256 and more) and std::sort (shorter rows)
// against std::stable_sort, with many ties, NaNs and signed zeros.
TEST(SortOps, CpuSortIsTheStableSort) {
  for (std::int64_t n : {37, 255, 256, 5000}) {
    ferry::manual_seed(std::uint64_t(n));
    Tensor x = ferry::floor(ferry::uniform({3, n}, -4, 4)) * 0.5;
    x = ferry::where(ferry::gt(ferry::rand({3, n}), 0.9), std::numeric_limits<double>::quiet_NaN(),
                     x);
    x = ferry::where(ferry::gt(ferry::rand({3, n}), 0.9), -0.0, x);
    const std::vector<float> xv = x.to_vector<float>();
    for (bool descending : {false, true}) {
      auto [values, indices] = ferry::sort(x, 1, descending);
      const std::vector<std::int64_t> got = indices.to_vector<std::int64_t>();
      const std::vector<float> got_values = values.to_vector<float>();
      for (std::int64_t r = 0; r < 3; ++r) {
        std::vector<std::int64_t> want(static_cast<std::size_t>(n));
        std::iota(want.begin(), want.end(), 0);
        const float* row = xv.data() + r * n;
        // NaN above every number; -0 == +0.
        auto less = [&](std::int64_t i, std::int64_t j) {
          const float a = row[i], b = row[j];
          if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
          return a < b;
        };
        std::stable_sort(want.begin(), want.end(), [&](std::int64_t i, std::int64_t j) {
          return descending ? less(j, i) : less(i, j);
        });
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(got[std::size_t(r * n + i)], want[std::size_t(i)])
              << "n=" << n << " row " << r << " position " << i << " descending=" << descending;
          const float v = got_values[std::size_t(r * n + i)], w = row[want[std::size_t(i)]];
          ASSERT_TRUE((std::isnan(v) && std::isnan(w)) || std::signbit(v) == std::signbit(w));
        }
      }
    }
  }
  // 64-bit keys: i64 beyond 2^32, both signs.
  Tensor big = ferry::tensor(std::vector<std::int64_t>{5000000000, -3, -5000000000, 7, -3, 0});
  EXPECT_EQ(ferry::argsort(big).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{2, 1, 4, 5, 3, 0}));
}

// A line longer than two of the CPU's scan chunks, scanned in parallel
// pieces: the same as one sequential pass.
TEST(SortOps, CpuLongScansAreSequential) {
  const std::int64_t n = 300001;
  ferry::manual_seed(7);
  Tensor xi = ferry::randint(-3, 4, {n}, {.dtype = DType::i32});
  const std::vector<std::int32_t> v = xi.to_vector<std::int32_t>();
  std::vector<std::int64_t> sum(v.size()), max_index(v.size());
  std::int64_t s = 0, best = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    s += v[i];
    sum[i] = s;
    if (v[i] >= v[std::size_t(best)]) best = std::int64_t(i);
    max_index[i] = best;
  }
  EXPECT_EQ(ferry::cumsum(xi, 0).to_vector<std::int64_t>(), sum);
  EXPECT_EQ(ferry::cummax(xi, 0).indices.to_vector<std::int64_t>(), max_index);
  Tensor ones = ferry::ones({n}, {.dtype = DType::f32});
  EXPECT_EQ(ferry::cumsum(ones, 0).to_vector<float>().back(), float(n));  // exact: double sums
}

// Long rows on each accelerator against the CPU: the Vulkan sort's global
// merge levels, the scans' workgroup-per-line schedule.
TEST(SortOps, AcceleratorLongRowsAreTheCpus) {
  for (const std::string& name : ferry_test::accelerator_names()) {
    if (!ferry::is_available(name)) continue;
    const ferry::Device dev(name);
    ferry::manual_seed(11);
    Tensor x = ferry::floor(ferry::uniform({2, 20000}, -50, 50));
    for (bool descending : {false, true}) {
      auto got = ferry::sort(x.to(dev), 1, descending);
      auto want = ferry::sort(x, 1, descending);
      EXPECT_TRUE(ferry::equal(got.indices.cpu(), want.indices)) << name;
      EXPECT_TRUE(ferry::equal(got.values.cpu(), want.values)) << name;
    }
    Tensor line = ferry::uniform({1, 50000}, -1, 1);
    EXPECT_TRUE(
        ferry::allclose(ferry::cumsum(line.to(dev), 1).cpu(), ferry::cumsum(line, 1), 1e-5, 1e-4))
        << name;
    auto got = ferry::cummax(x.to(dev), 1);
    EXPECT_TRUE(ferry::equal(got.indices.cpu(), ferry::cummax(x, 1).indices)) << name;
    // A scatter of more values than one fold call takes (ops_scatter.cpp, kFoldPiece): the
    // columns fold in pieces, each target in one of them; the CPU folds it whole.
    Tensor src = ferry::floor(ferry::uniform({3, 100000}, -50, 50));
    Tensor index = ferry::randint(0, 1000, {3, 100000});
    Tensor base = ferry::zeros({3, 1000});
    Tensor want_sum = ferry::scatter_reduce(base, 1, index, src, "sum");
    EXPECT_TRUE(ferry::equal(
        ferry::scatter_reduce(base.to(dev), 1, index.to(dev), src.to(dev), "sum").cpu(), want_sum))
        << name;
  }
}

// Note [Running products in float] (shaders/common.glsl): products of many factors near 1, cut
// into pieces, lost their cross terms in float on Vulkan: 10^6 factors 1 + U(0, 1e-5) came out
// 0.3% low through prod along a row and 1.2% low down a column, and cumprod of 70,000 factors
// 1 + U(0, 1e-4) 0.1% low at the end, where the CPU's double products are within an ulp or two
// of the float result. Each accelerator is held to the CPU within a few ulp.
TEST(SortOps, AcceleratorProductsOfFactorsNearOneAreTheCpus) {
  const auto near_one = [](ferry::Shape shape, double spread) {
    return ferry::add(ferry::mul(ferry::rand(shape), spread), 1.0);
  };
  const auto expect_near = [](const Tensor& got, const Tensor& want, const std::string& what) {
    const std::vector<double> g = got.cpu().to(DType::f64).to_vector<double>();
    const std::vector<double> w = want.to(DType::f64).to_vector<double>();
    ASSERT_EQ(g.size(), w.size()) << what;
    for (std::size_t i = 0; i < w.size(); ++i)
      ASSERT_NEAR(g[i], w[i], 5e-7 * std::fabs(w[i])) << what << " at " << i;
  };
  for (const std::string& name : ferry_test::accelerator_names()) {
    if (!ferry::is_available(name)) continue;
    const ferry::Device dev(name);
    ferry::manual_seed(12);
    const Tensor row = near_one({1, 1000000}, 1e-5);
    expect_near(ferry::prod(row.to(dev), {1}), ferry::prod(row, {1}), name + " prod of a row");
    const Tensor cols = near_one({1000000, 4}, 1e-5);
    expect_near(ferry::prod(cols.to(dev), {0}), ferry::prod(cols, {0}),
                name + " prod down columns");
    const Tensor lines = near_one({70000, 3}, 1e-4);
    expect_near(ferry::cumprod(lines.to(dev), 0), ferry::cumprod(lines, 0), name + " cumprod");
    const Tensor long_row = near_one({2, 70000}, 1e-4);
    expect_near(ferry::cumprod(long_row.to(dev), 1), ferry::cumprod(long_row, 1),
                name + " cumprod of rows");
  }
}

TEST(SortOps, ScatterGradients) {
  Tensor x = grad_input({5, 4}, 0.5, 2, 5), src = grad_input({3, 4}, 0.5, 2, 6);
  Tensor index =
      ferry::tensor(std::vector<std::int64_t>{0, 2, 2, 4, 0, 2, 1, 2, 0, 0, 3, 2}, {3, 4});
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (bool self : {true, false})
      EXPECT_TRUE(gradcheck(
          [&](const In& in) { return ferry::scatter_reduce(in[0], 0, index, in[1], reduce, self); },
          {x, src}))
          << reduce << " include_self=" << self;
  // Zeros among a product's factors: in x, alone and in pairs among the sources.
  Tensor xz = x * ferry::gt(x, 0.8), sz = src * ferry::gt(src, 1.0);
  for (bool self : {true, false})
    EXPECT_TRUE(gradcheck(
        [&](const In& in) { return ferry::scatter_reduce(in[0], 0, index, in[1], "prod", self); },
        {xz, sz}))
        << "zeros, include_self=" << self;
  // Distinct targets for the plain scatter and index_put: with duplicates
  // PyTorch (and ferry) give every source the gradient of its target, where
  // the derivative of the losing ones is 0 (SortOps.ScatterDuplicatesTakeTheGradient).
  Tensor distinct = ferry::tensor(std::vector<std::int64_t>{3, 0, 1, 2, 2, 3}, {3, 2});
  EXPECT_TRUE(
      gradcheck([&](const In& in) { return ferry::scatter(in[0], 1, distinct, in[1]); }, {x, src}));
  Tensor rows = ferry::tensor(std::vector<std::int64_t>{0, 3, -1});
  Tensor dup_rows = ferry::tensor(std::vector<std::int64_t>{0, 3, 3, -1});
  EXPECT_TRUE(gradcheck(
      [&](const In& in) { return ferry::index_put(in[0], {rows}, in[1].narrow(0, 0, 1)); },
      {x, src}));
  EXPECT_TRUE(gradcheck(
      [&](const In& in) {
        return ferry::index_put(in[0], {dup_rows}, in[1].narrow(0, 0, 1), true);
      },
      {x, src}));
  Tensor mask = ferry::tensor(std::vector<bool>{true, false, true, true});
  EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::masked_select(in[0], mask); }, {x}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::masked_scatter(in[0], mask, in[1]); },
                        {x, grad_input({4, 4}, -1, 1, 7)}));
  Tensor reps = ferry::tensor(std::vector<std::int64_t>{2, 0, 1, 3, 1});
  EXPECT_TRUE(
      gradcheck([&](const In& in) { return ferry::repeat_interleave(in[0], reps, 0); }, {x}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return ferry::rot90(in[0], 3); }, {x}));
}

// PyTorch's scatter backward: each source gets grad.gather(dim, index), the
// duplicates that lost the write included.
TEST(SortOps, ScatterDuplicatesTakeTheGradient) {
  Tensor src = ferry::tensor(std::vector<double>{1, 2, 3}).requires_grad_();
  Tensor out = ferry::scatter(ferry::zeros({2}, {.dtype = DType::f64}), 0,
                              ferry::tensor(std::vector<std::int64_t>{1, 1, 0}), src);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{3, 2}));  // the last write wins
  ferry::sum(out * ferry::tensor(std::vector<double>{10, 20})).backward();
  EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{20, 20, 10}));
}

TEST(SortOps, ScatterRefusesWhatPyTorchRefuses) {
  Tensor x = ferry::zeros({3, 4});
  Tensor idx = ferry::tensor(std::vector<std::int64_t>{0, 1, 2, 3}, {1, 4});
  EXPECT_THROW(ferry::scatter_reduce(x, 0, idx, ferry::ones({1, 4}), "max"), ferry::ValueError);
  EXPECT_THROW(ferry::scatter(x, 1, idx, ferry::ones({1, 4}), "subtract"), ferry::ValueError);
  EXPECT_THROW(ferry::scatter(x, 0, idx, ferry::ones({1, 4})), ferry::ShapeError);  // 3 >= 3
  EXPECT_THROW(ferry::scatter(x, 1, idx, ferry::ones({1, 4}, {.dtype = DType::f16})),
               ferry::DTypeError);
  EXPECT_THROW(ferry::scatter(x, 1, idx, ferry::ones({1, 2})), ferry::ShapeError);
  EXPECT_THROW(ferry::scatter(x, 1, idx.to(DType::f32), ferry::ones({1, 4})), ferry::DTypeError);
  EXPECT_THROW(ferry::index_put(x, {ferry::tensor(std::vector<std::int64_t>{3})}, ferry::ones({4})),
               ferry::ShapeError);
  EXPECT_THROW(ferry::masked_select(x, ferry::ones({4})), ferry::DTypeError);
  EXPECT_THROW(ferry::masked_scatter(x, ferry::gt(ferry::ones({4}), 0), ferry::ones({5})),
               ferry::ShapeError);
  EXPECT_THROW(ferry::searchsorted(ferry::zeros({2, 3}), ferry::zeros({3, 3})), ferry::ShapeError);
  EXPECT_THROW(
      ferry::repeat_interleave(ferry::ones({2}), ferry::tensor(std::vector<std::int64_t>{1, -1})),
      ferry::ShapeError);
  EXPECT_THROW(ferry::rot90(x, 1, {1, -1}), ferry::ShapeError);
  // Nothing half-written: x is unchanged after a refused call.
  EXPECT_EQ(ferry::sum(x).item<float>(), 0.0f);
}

TEST(SortOps, ResultsPyTorchDefines) {
  Tensor x = ferry::tensor(std::vector<float>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(ferry::cumsum(ferry::tensor(std::vector<std::int32_t>{1, 2}), 0).dtype(), DType::i64);
  EXPECT_EQ(ferry::cumprod(ferry::tensor(std::vector<bool>{true, false}), 0).dtype(), DType::i64);
  EXPECT_EQ(ferry::cumsum(x, 1, DType::f64).dtype(), DType::f64);
  EXPECT_EQ(ferry::prod(ferry::tensor(std::vector<std::uint8_t>{200, 2})).item<std::int64_t>(),
            400);
  EXPECT_EQ(ferry::prod(ferry::zeros({0, 3}), {0}).to_vector<float>(),
            (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(ferry::cumsum(ferry::zeros({0, 3}), 0).sizes(), (ferry::Shape{0, 3}));
  Tensor s = ferry::full({}, 2.5);
  EXPECT_EQ(ferry::sort(s).values.item<float>(), 2.5f);
  EXPECT_EQ(ferry::sort(s).indices.item<std::int64_t>(), 0);
  EXPECT_EQ(ferry::cumsum(s, 0).item<float>(), 2.5f);
  EXPECT_TRUE(std::isnan(ferry::median(ferry::zeros({0})).item<float>()));
  EXPECT_EQ(ferry::topk(x, 0, 1).values.sizes(), (ferry::Shape{2, 0}));
  // Data-dependent sizes at their edges.
  EXPECT_EQ(ferry::nonzero(ferry::zeros({2, 3})).sizes(), (ferry::Shape{0, 2}));
  EXPECT_EQ(ferry::nonzero(ferry::full({}, 3.0)).sizes(), (ferry::Shape{1, 0}));
  EXPECT_EQ(ferry::unique(ferry::zeros({0})).values.numel(), 0);
  auto w = ferry::where(ferry::gt(x, 2));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(w[1].to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(ferry::bucketize(ferry::tensor(std::vector<float>{1, 5}),
                             ferry::tensor(std::vector<float>{1, 2}), false, true)
                .dtype(),
            DType::i32);
}

TEST(SortOps, RefusedInputsAreTyped) {
  Tensor x = ferry::rand({3, 4});
  EXPECT_THROW(ferry::topk(x, 5, 1), ferry::ShapeError);
  EXPECT_THROW(ferry::topk(x, -1, 1), ferry::ShapeError);
  EXPECT_THROW(ferry::kthvalue(x, 0, 1), ferry::ShapeError);
  EXPECT_THROW(ferry::kthvalue(x, 5, 1), ferry::ShapeError);
  EXPECT_THROW(ferry::median(ferry::zeros({2, 0}), 1), ferry::ShapeError);
  EXPECT_THROW(ferry::mode(ferry::zeros({0}), 0), ferry::ShapeError);
  EXPECT_THROW(ferry::cumsum(x, 2), ferry::ShapeError);
  EXPECT_THROW(ferry::sort(x, -3), ferry::ShapeError);
}

}  // namespace

// The CPU's index-form scatter (Note [CPU scatter_reduce]) against a plain
// sequential fold written here: every reduction, with and without self, along
// each dim of a 3-D input whose index is smaller than it outside dim (so each
// column's offsets are mapped), long dims (one column per block), many columns
// (split over threads), integer means (floor division) and the error that
// names an index out of range.
TEST(SortOps, CpuScatterIndexFormIsTheSequentialFold) {
  struct Shape3 {
    ferry::Shape x, index;
    std::int64_t dim;
  };
  const std::vector<Shape3> shapes = {{{4, 30, 5}, {3, 40, 4}, 1},
                                      {{6, 7, 9}, {5, 7, 8}, 0},
                                      {{3, 4, 50}, {2, 4, 70}, 2},
                                      {{40000, 3, 1}, {300, 2, 1}, 0},
                                      {{2, 64, 1}, {2, 5000, 1}, 1}};
  std::mt19937 gen(7);
  for (const Shape3& s : shapes)
    for (DType dt : {DType::f64, DType::i32})
      for (const char* reduce : {"sum", "prod", "mean", "amax", "amin", "assign"})
        for (bool self : {true, false}) {
          auto numel = [](const ferry::Shape& sh) { return sh[0] * sh[1] * sh[2]; };
          const std::int64_t n_index = numel(s.index), size = s.x[std::size_t(s.dim)];
          std::vector<std::int64_t> idx(static_cast<std::size_t>(n_index));
          std::vector<double> src(idx.size()), x(static_cast<std::size_t>(numel(s.x)));
          for (auto& i : idx) i = std::int64_t(gen() % std::uint32_t(size));
          for (auto& v : src) v = double(int(gen() % 7) - 3);
          for (auto& v : x) v = double(int(gen() % 5) - 2);
          // The reference: each index element in order, folded into its target.
          const std::string r = reduce;
          const bool with_self = self && r != "assign";
          std::vector<double> want = x, acc(x.size());
          std::vector<std::int64_t> hits(x.size(), 0);
          for (std::int64_t e = 0; e < n_index; ++e) {
            std::int64_t c[3] = {e / (s.index[1] * s.index[2]), e / s.index[2] % s.index[1],
                                 e % s.index[2]};
            c[s.dim] = idx[std::size_t(e)];
            const std::size_t t = std::size_t((c[0] * s.x[1] + c[1]) * s.x[2] + c[2]);
            const double v = src[std::size_t(e)];
            if (hits[t]++ == 0 && !with_self) {
              acc[t] = v;
              continue;
            }
            const double a = hits[t] == 1 ? x[t] : acc[t];
            acc[t] = r == "sum" || r == "mean" ? a + v
                     : r == "prod"             ? a * v
                     : r == "amax"             ? std::max(a, v)
                     : r == "amin"             ? std::min(a, v)
                                               : v;
          }
          for (std::size_t t = 0; t < x.size(); ++t) {
            if (hits[t] == 0) continue;
            double v = acc[t];
            if (r == "mean") {
              const double count = double(hits[t] + (self ? 1 : 0));
              v = dt == DType::f64 ? v / count : std::floor(v / count);
            }
            want[t] = v;
          }
          Tensor xt = ferry::tensor(x, s.x).to(dt);
          Tensor it = ferry::tensor(idx, s.index);
          Tensor st = ferry::tensor(src, s.index).to(dt);
          Tensor got = r == "assign" ? ferry::scatter(xt, s.dim, it, st)
                                     : ferry::scatter_reduce(xt, s.dim, it, st, r, self);
          ASSERT_EQ(got.to(DType::f64).to_vector<double>(), want)
              << ferry::shape_str(s.x) << " dim " << s.dim << " " << r << " self " << self << " "
              << ferry::dtype_name(dt);
        }
  Tensor x = ferry::zeros({3, 5});
  Tensor bad = ferry::tensor(std::vector<std::int64_t>{0, 4, 7, 1}, {2, 2});
  try {
    ferry::scatter_reduce(x, 1, bad, ferry::ones({2, 2}), "amax");
    ADD_FAILURE() << "an index of 7 for a dim of 5 was taken";
  } catch (const ferry::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("index 7 is out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ferry::scatter(x, 1, ferry::neg(bad), ferry::ones({2, 2})), ferry::ShapeError);
  EXPECT_THROW(
      ferry::scatter_reduce(ferry::zeros({3, 0}), 1, ferry::zeros({3, 1}, {.dtype = DType::i64}),
                            ferry::ones({3, 1}), "sum"),
      ferry::ShapeError);  // a dim of size 0 takes no index
}
