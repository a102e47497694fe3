// sum, mean, max, min, var and argmax against closed forms and a reference
// reducer written here in double: every dim set, keepdim, negative dims,
// non-contiguous views, odd and empty sizes, NaN, every dtype, a > 2^24
// element reduction, and the typed errors.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;
using ferry_test::sample_tensor;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Op { sum, max, min, argmax };

// Reduces row-major `data` of `shape` over `dims` (empty: all), in double.
// argmax gives the index of the first maximum within the reduced sub-space,
// NaN counting as the maximum.
std::vector<double> reference(const std::vector<double>& data, const Shape& shape,
                              std::vector<std::int64_t> dims, Op op) {
  const auto nd = std::int64_t(shape.size());
  std::set<std::int64_t> red;
  if (dims.empty())
    for (std::int64_t d = 0; d < nd; ++d) red.insert(d);
  for (auto d : dims) red.insert(d < 0 ? d + nd : d);
  std::int64_t n_out = 1;
  for (std::int64_t d = 0; d < nd; ++d)
    if (!red.count(d)) n_out *= shape[std::size_t(d)];
  std::vector<double> acc(std::size_t(n_out), op == Op::sum ? 0.0 : kNaN);
  std::vector<double> best(std::size_t(n_out), 0.0);
  std::vector<bool> seen(std::size_t(n_out), false);
  std::vector<std::int64_t> idx(std::size_t(nd), 0);
  for (std::size_t i = 0; i < data.size(); ++i) {
    std::int64_t o = 0, r = 0;
    for (std::int64_t d = 0; d < nd; ++d) {
      if (red.count(d))
        r = r * shape[std::size_t(d)] + idx[std::size_t(d)];
      else
        o = o * shape[std::size_t(d)] + idx[std::size_t(d)];
    }
    const double v = data[i];
    auto& a = acc[std::size_t(o)];
    auto& b = best[std::size_t(o)];
    const bool first = !seen[std::size_t(o)];
    seen[std::size_t(o)] = true;
    switch (op) {
      case Op::sum:
        a += v;
        break;
      case Op::max:
        a = first || std::isnan(v) || (!std::isnan(a) && v > a) ? v : a;
        break;
      case Op::min:
        a = first || std::isnan(v) || (!std::isnan(a) && v < a) ? v : a;
        break;
      case Op::argmax:
        if (first || (!std::isnan(b) && (std::isnan(v) || v > b))) {
          b = v;
          a = double(r);
        }
        break;
    }
    for (std::int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[std::size_t(d)] < shape[std::size_t(d)]) break;
      idx[std::size_t(d)] = 0;
    }
  }
  return acc;
}

Shape kept_shape(const Shape& shape, std::vector<std::int64_t> dims, bool keepdim) {
  const auto nd = std::int64_t(shape.size());
  std::set<std::int64_t> red;
  if (dims.empty())
    for (std::int64_t d = 0; d < nd; ++d) red.insert(d);
  for (auto d : dims) red.insert(d < 0 ? d + nd : d);
  Shape out;
  for (std::int64_t d = 0; d < nd; ++d) {
    if (!red.count(d))
      out.push_back(shape[std::size_t(d)]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

Tensor run(Op op, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  switch (op) {
    case Op::sum:
      return ferry::sum(x, dims, keepdim);
    case Op::max:
      return ferry::max(x, dims, keepdim);
    case Op::min:
      return ferry::min(x, dims, keepdim);
    case Op::argmax:
      return ferry::argmax(x, dims.empty() ? std::nullopt : std::optional(dims[0]), keepdim);
  }
  return {};
}

// Checks op(x, dims, keepdim) against the reference on x's values.
void check(Op op, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
           const std::string& what) {
  Tensor y = run(op, x, dims, keepdim);
  Shape want_shape = op == Op::argmax && dims.empty()
                         ? (keepdim ? Shape(x.sizes().size(), 1) : Shape{})
                         : kept_shape(x.sizes(), dims, keepdim);
  EXPECT_EQ(y.sizes(), want_shape) << what;
  EXPECT_EQ(y.dtype(), op == Op::argmax ? DType::i64 : x.dtype()) << what;
  std::vector<double> want = reference(as_double(x), x.sizes(), dims, op);
  expect_close(as_double(y), want, 1e-6, 1e-4, what);
}

}  // namespace

TEST(Reduce, SumOfArangeIsClosedForm) {
  for (std::int64_t n : {1, 7, 13, 127, 1023, 4097}) {
    double want = double(n) * double(n - 1) / 2;
    EXPECT_EQ(ferry::sum(ferry::arange(double(n))).item<float>(), float(want)) << n;
    EXPECT_EQ(ferry::sum(ferry::arange(double(n), {.dtype = DType::i64})).item<std::int64_t>(),
              std::int64_t(want));
    EXPECT_EQ(ferry::sum(ferry::arange(double(n), {.dtype = DType::i32})).dtype(), DType::i64);
  }
}

TEST(Reduce, EveryDimSetMatchesReference) {
  Tensor x = sample_tensor({3, 5, 7});
  const std::vector<std::vector<std::int64_t>> dim_sets = {{},     {0},    {1},      {2},      {-1},
                                                           {0, 2}, {2, 0}, {-3, -2}, {0, 1, 2}};
  for (Op op : {Op::sum, Op::max, Op::min})
    for (const auto& dims : dim_sets)
      for (bool keepdim : {false, true})
        check(op, x, dims, keepdim,
              fmt::format("op {} dims [{}] keepdim {}", int(op), fmt::join(dims, ","), keepdim));
  for (std::int64_t d : {0, 1, 2, -1, -2})
    for (bool keepdim : {false, true})
      check(Op::argmax, x, {d}, keepdim, fmt::format("argmax dim {}", d));
  check(Op::argmax, x, {}, false, "argmax flat");
  check(Op::argmax, x, {}, true, "argmax flat keepdim");
}

TEST(Reduce, OddSizes) {
  for (std::int64_t n : {1, 7, 13, 127, 1023}) {
    Tensor x = sample_tensor({n, 3}, -5, 5, int(n));
    for (Op op : {Op::sum, Op::max, Op::min, Op::argmax}) {
      check(op, x, {0}, false, fmt::format("[{},3] dim 0", n));
      check(op, x, {1}, false, fmt::format("[{},3] dim 1", n));
      Tensor v = sample_tensor({n}, -5, 5, int(n));
      check(op, v, {0}, false, fmt::format("[{}]", n));
    }
  }
}

TEST(Reduce, NonContiguousInputs) {
  Tensor base = sample_tensor({12, 40});
  Tensor transposed = base.t();                            // [40, 12], strides (1, 40)
  Tensor stepped = base.slice(1, 1, 40, 3);                // [12, 13], inner stride 3
  Tensor expanded = sample_tensor({1, 9}).expand({6, 9});  // stride 0
  Tensor permuted = sample_tensor({4, 5, 6}).permute({2, 0, 1});
  for (Op op : {Op::sum, Op::max, Op::min, Op::argmax})
    for (const Tensor& x : {transposed, stepped, expanded})
      for (std::int64_t d : {0, 1})
        check(op, x, {d}, false, fmt::format("op {} dim {} view {}", int(op), d, x.str()));
  for (Op op : {Op::sum, Op::max, Op::min}) {
    check(op, transposed, {}, false, "transposed all");
    check(op, permuted, {0, 2}, true, "permuted");
  }
}

// Reducing a leading dim of a row-major matrix accumulates neighbouring
// outputs together ("outer" schedule); columns wider than one block.
TEST(Reduce, LeadingDimOfWideMatrix) {
  Tensor x = sample_tensor({301, 150});
  for (Op op : {Op::sum, Op::max, Op::min, Op::argmax})
    check(op, x, {0}, false, "dim 0 of [301, 150]");
  // Ties and NaN in one column: the first maximum, then the first NaN wins.
  std::vector<float> v(64 * 10, 0.0f);
  v[3 * 10 + 2] = 5;
  v[7 * 10 + 2] = 5;
  v[5 * 10 + 4] = NAN;
  v[9 * 10 + 4] = NAN;
  Tensor t = ferry::tensor(v, {64, 10});
  std::vector<std::int64_t> am = ferry::argmax(t, 0).to_vector<std::int64_t>();
  EXPECT_EQ(am[2], 3);
  EXPECT_EQ(am[4], 5);
  EXPECT_EQ(am[0], 0);
  EXPECT_TRUE(std::isnan(ferry::max(t, {0}).to_vector<float>()[4]));
  EXPECT_TRUE(std::isnan(ferry::min(t, {0}).to_vector<float>()[4]));
  EXPECT_EQ(ferry::max(t, {0}).to_vector<float>()[2], 5.0f);
}

// More than 2^24 ones: an f32 accumulator would stop at 2^24; the double
// accumulator gives the count exactly, rounded once to f32.
TEST(Reduce, LargeFullReductionIsExact) {
  const std::int64_t n = (std::int64_t(1) << 24) + 3;
  Tensor ones = ferry::ones({n});
  EXPECT_EQ(ferry::sum(ones).item<float>(), float(double(n)));
  EXPECT_EQ(ferry::sum(ferry::ones({n}, {.dtype = DType::u8})).item<std::int64_t>(), n);
  EXPECT_FLOAT_EQ(ferry::mean(ones).item<float>(), 1.0f);
}

TEST(Reduce, LongSlicesAcrossChunks) {
  const std::int64_t n = 200003;
  std::vector<float> v(std::size_t(n), 1.0f);
  v[70000] = 9;
  v[150000] = 9;  // a later tie: argmax keeps the first
  v[123] = -4;
  Tensor x = ferry::tensor(v);
  EXPECT_EQ(ferry::argmax(x).item<std::int64_t>(), 70000);
  EXPECT_EQ(ferry::max(x).item<float>(), 9.0f);
  EXPECT_EQ(ferry::min(x).item<float>(), -4.0f);
  EXPECT_EQ(ferry::sum(x).item<float>(), float(n - 3 + 9 + 9 - 4));
  v[180000] = NAN;
  v[190000] = NAN;
  Tensor y = ferry::tensor(v);
  EXPECT_EQ(ferry::argmax(y).item<std::int64_t>(), 180000);
  EXPECT_TRUE(std::isnan(ferry::max(y).item<float>()));
  EXPECT_TRUE(std::isnan(ferry::min(y).item<float>()));
  // Two rows of long slices.
  Tensor two = ferry::stack({x, y});
  std::vector<std::int64_t> am = ferry::argmax(two, 1).to_vector<std::int64_t>();
  EXPECT_EQ(am, (std::vector<std::int64_t>{70000, 180000}));
}

TEST(Reduce, NaNPropagates) {
  Tensor x = ferry::tensor(std::vector<float>{1, NAN, 3, -1, 2, 7}, {2, 3});
  std::vector<float> mx = ferry::max(x, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], 7.0f);
  std::vector<float> mn = ferry::min(x, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], -1.0f);
  EXPECT_EQ(ferry::argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(ferry::argmax(x).item<std::int64_t>(), 1);
  EXPECT_TRUE(std::isnan(ferry::sum(x).item<float>()));
  Tensor inf = ferry::tensor(std::vector<float>{-INFINITY, -INFINITY});
  EXPECT_EQ(ferry::max(inf).item<float>(), -INFINITY);
  EXPECT_EQ(ferry::argmax(inf).item<std::int64_t>(), 0);
}

TEST(Reduce, EmptyTensors) {
  Tensor e = ferry::zeros({0, 3});
  EXPECT_EQ(ferry::sum(e).item<float>(), 0.0f);
  Tensor s0 = ferry::sum(e, {0});
  EXPECT_EQ(s0.sizes(), (Shape{3}));
  EXPECT_EQ(s0.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(ferry::sum(e, {1}).sizes(), (Shape{0}));
  EXPECT_EQ(ferry::max(e, {1}).sizes(), (Shape{0}));  // nothing reduced over an empty dim
  EXPECT_EQ(ferry::argmax(e, 1).sizes(), (Shape{0}));
  EXPECT_TRUE(std::isnan(ferry::mean(e).item<float>()));
  EXPECT_EQ(ferry::sum(ferry::zeros({0}, {.dtype = DType::i32})).item<std::int64_t>(), 0);
  EXPECT_FERRY_ERROR(ferry::max(e), ferry::ShapeError, "max", "size 0");
  EXPECT_FERRY_ERROR(ferry::min(e, {0}), ferry::ShapeError, "min", "[0, 3]");
  EXPECT_FERRY_ERROR(ferry::argmax(e), ferry::ShapeError, "argmax");
  EXPECT_FERRY_ERROR(ferry::argmax(e, 0), ferry::ShapeError, "argmax");
}

TEST(Reduce, KeepdimAndNegativeDims) {
  Tensor x = sample_tensor({2, 3, 4});
  EXPECT_EQ(ferry::sum(x, {1}, true).sizes(), (Shape{2, 1, 4}));
  EXPECT_EQ(ferry::sum(x, {}, true).sizes(), (Shape{1, 1, 1}));
  EXPECT_EQ(ferry::max(x, {-1, 0}, true).sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(ferry::argmax(x, -2, true).sizes(), (Shape{2, 1, 4}));
  EXPECT_EQ(ferry::argmax(x, std::nullopt, true).sizes(), (Shape{1, 1, 1}));
  expect_close(as_double(ferry::sum(x, {-1})), as_double(ferry::sum(x, {2})), 0, 0,
               "dim -1 == dim 2");
}

TEST(Reduce, ZeroDimInputs) {
  Tensor s = ferry::scalar_tensor(2.5);
  EXPECT_EQ(ferry::sum(s).sizes(), Shape{});
  EXPECT_EQ(ferry::sum(s).item<float>(), 2.5f);
  EXPECT_EQ(ferry::sum(s, {0}).item<float>(), 2.5f);
  EXPECT_EQ(ferry::max(s, {-1}, true).sizes(), Shape{});
  EXPECT_EQ(ferry::mean(s).item<float>(), 2.5f);
  EXPECT_EQ(ferry::argmax(s).item<std::int64_t>(), 0);
  EXPECT_EQ(ferry::argmax(s, 0).item<std::int64_t>(), 0);
  EXPECT_FERRY_ERROR(ferry::sum(s, {1}), ferry::ShapeError, "sum");
}

TEST(Reduce, EveryDtype) {
  std::vector<std::int64_t> vals = {3, 200, 0, 17, 200, 5};
  for (DType dt : {DType::u8, DType::i32, DType::i64}) {
    Tensor x = ferry::tensor(vals, {2, 3}).to(dt);
    Tensor s = ferry::sum(x, {1});
    EXPECT_EQ(s.dtype(), DType::i64);
    EXPECT_EQ(s.to_vector<std::int64_t>(), (std::vector<std::int64_t>{203, 222}));
    EXPECT_EQ(ferry::max(x).dtype(), dt);
    EXPECT_EQ(ferry::max(x).item<std::int64_t>(), 200);
    EXPECT_EQ(ferry::min(x, {0}).to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 200, 0}));
    EXPECT_EQ(ferry::argmax(x).item<std::int64_t>(), 1);
    EXPECT_EQ(ferry::argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1}));
  }
  Tensor b = ferry::tensor(std::vector<bool>{true, false, true, true, false, false}, {2, 3});
  EXPECT_EQ(ferry::sum(b).dtype(), DType::i64);
  EXPECT_EQ(ferry::sum(b).item<std::int64_t>(), 3);
  EXPECT_EQ(ferry::sum(b, {0}).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0, 1}));
  EXPECT_EQ(ferry::max(b, {1}).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(ferry::min(b, {1}).to_vector<bool>(), (std::vector<bool>{false, false}));
  EXPECT_EQ(ferry::argmax(b, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0}));
  // i64 beyond 2^53 stays exact; the sum wraps like PyTorch's.
  Tensor big = ferry::tensor(std::vector<std::int64_t>{(std::int64_t(1) << 60) + 1, 1});
  EXPECT_EQ(ferry::sum(big).item<std::int64_t>(), (std::int64_t(1) << 60) + 2);

  Tensor xf = sample_tensor({6, 50});
  std::vector<double> want = reference(as_double(xf), {6, 50}, {1}, Op::sum);
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor x = xf.to(dt);
    const double tol = dt == DType::f16 ? 2e-3 : 1e-2;
    EXPECT_EQ(ferry::sum(x, {1}).dtype(), dt);
    expect_close(as_double(ferry::sum(x, {1})), reference(as_double(x), {6, 50}, {1}, Op::sum), tol,
                 tol, "sum 16");
    expect_close(as_double(ferry::sum(x, {1})), want, 2 * tol, 0.3, "sum 16 vs f32");
    check(Op::max, x, {0}, false, "max 16-bit");
    check(Op::min, x, {1}, true, "min 16-bit");
    check(Op::argmax, x, {1}, false, "argmax 16-bit");
    EXPECT_EQ(ferry::mean(x).dtype(), dt);
  }
}

TEST(Mean, MatchesSumOverCount) {
  Tensor x = sample_tensor({4, 6, 5});
  for (const auto& dims : std::vector<std::vector<std::int64_t>>{{}, {1}, {0, 2}, {-1}}) {
    std::vector<double> want = reference(as_double(x), x.sizes(), dims, Op::sum);
    double count = double(x.numel()) / double(want.size());
    for (auto& w : want) w /= count;
    expect_close(as_double(ferry::mean(x, dims)), want, 1e-6, 1e-6, "mean");
  }
  EXPECT_EQ(ferry::mean(x, {1}, true).sizes(), (Shape{4, 1, 5}));
  // f16's sum of 1000 x 1000 overflows f16 (max 65504); the mean must not.
  EXPECT_EQ(ferry::mean(ferry::full({1000}, 1000.0, {.dtype = DType::f16})).item<float>(), 1000.0f);
}

TEST(Mean, NeedsFloatingInput) {
  EXPECT_FERRY_ERROR(ferry::mean(ferry::ones({3}, {.dtype = DType::i32})), ferry::DTypeError,
                     "mean", "i32", "cast");
  EXPECT_FERRY_ERROR(ferry::mean(ferry::ones({3}, {.dtype = DType::boolean})), ferry::DTypeError,
                     "mean", "bool");
}

TEST(Var, ClosedForms) {
  for (std::int64_t n : {2, 7, 13, 127, 1023}) {
    Tensor x = ferry::arange(double(n));
    double nn = double(n);
    EXPECT_NEAR(ferry::var(x).item<float>(), nn * (nn + 1) / 12, 1e-5 * nn * nn) << n;
    EXPECT_NEAR(ferry::var(x, {}, 0).item<float>(), (nn * nn - 1) / 12, 1e-5 * nn * nn) << n;
  }
  // Two passes: a large mean does not cancel the variance away.
  Tensor shifted = ferry::add(ferry::arange(7.0), 1e4);
  EXPECT_NEAR(ferry::var(shifted).item<float>(), 7.0 * 8 / 12, 1e-3);
  // Over dims, keepdim, against the reference.
  Tensor m = sample_tensor({3, 8});
  std::vector<double> v = as_double(m);
  std::vector<float> got = ferry::var(m, {1}, 1, true).to_vector<float>();
  EXPECT_EQ(ferry::var(m, {1}, 1, true).sizes(), (Shape{3, 1}));
  for (int r = 0; r < 3; ++r) {
    double mean = 0, ss = 0;
    for (int c = 0; c < 8; ++c) mean += v[std::size_t(r * 8 + c)] / 8;
    for (int c = 0; c < 8; ++c)
      ss += (v[std::size_t(r * 8 + c)] - mean) * (v[std::size_t(r * 8 + c)] - mean);
    EXPECT_NEAR(got[std::size_t(r)], ss / 7, 1e-5);
  }
  // One element with Bessel's correction: 0 / 0.
  EXPECT_TRUE(std::isnan(ferry::var(ferry::ones({1})).item<float>()));
  EXPECT_NEAR(ferry::var(ferry::arange(5.0).to(DType::f16)).item<float>(), 2.5, 1e-2);
  EXPECT_EQ(ferry::var(ferry::arange(5.0).to(DType::bf16)).dtype(), DType::bf16);
  EXPECT_FERRY_ERROR(ferry::var(ferry::ones({3}, {.dtype = DType::i64})), ferry::DTypeError, "var",
                     "i64");
}

TEST(Reduce, BadDims) {
  Tensor x = ferry::ones({2, 3});
  EXPECT_FERRY_ERROR(ferry::sum(x, {0, -2}), ferry::ShapeError, "sum", "more than once");
  EXPECT_FERRY_ERROR(ferry::max(x, {2}), ferry::ShapeError, "max");
  EXPECT_FERRY_ERROR(ferry::mean(x, {-3}), ferry::ShapeError, "mean");
  EXPECT_FERRY_ERROR(ferry::var(x, {1, 1}), ferry::ShapeError, "var");
  EXPECT_FERRY_ERROR(ferry::argmax(x, 5), ferry::ShapeError, "argmax");
}
