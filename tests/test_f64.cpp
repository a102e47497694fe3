// f64 as a full CPU dtype, part 1: the dtype itself (name, size, promotion,
// Scalars), element-wise ops, casts, fill/arange, random draws, host I/O and
// printing. Every op is held to a double reference computed here with <cmath>,
// to ~1e-12 relative or better: f64 exists for double-precision gradient
// checks, so a result that went through float anywhere (rel. error ~1e-8)
// must fail these tests. Part 2 (test_f64_ops.cpp): reductions, matmul, nn,
// indexing, and the backends that refuse f64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;

namespace {

constexpr double kRel = 1e-12;

// n doubles in [lo, hi] that float cannot hold exactly (an irrational step).
std::vector<double> doubles(std::size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    double u = std::fmod(double(i) * 0.6180339887498949 + 0.1234567890123, 1.0);
    v[i] = lo + (hi - lo) * u;
  }
  return v;
}

Tensor f64(const std::vector<double>& v, const Shape& shape = {}) {
  return ferry::tensor(v, shape);
}

// |got - want| <= rel * |want| + abs, NaN only where want is NaN.
void expect_rel(const std::vector<double>& got, const std::vector<double>& want, double rel,
                double abs, const std::string& what) {
  ferry_test::expect_close(got, want, rel, abs, what);
}

std::uint64_t bits_of(double d) {
  std::uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

}  // namespace

// ---- the dtype ----

TEST(F64DType, NameSizeAndTraits) {
  EXPECT_EQ(ferry::dtype_size(DType::f64), 8u);
  EXPECT_EQ(ferry::dtype_name(DType::f64), "f64");
  EXPECT_EQ(ferry::dtype_from_name("f64"), DType::f64);
  EXPECT_TRUE(ferry::is_floating(DType::f64));
  EXPECT_FALSE(ferry::is_integral(DType::f64));
  EXPECT_EQ(ferry::dtype_of<double>(), DType::f64);
  static_assert(std::is_same_v<ferry::dtype_cpp_t<DType::f64>, double>);
  // Appended: the other dtypes keep their values (and i8, i16 came after it).
  EXPECT_EQ(int(DType::f32), 0);
  EXPECT_EQ(int(DType::boolean), 6);
  EXPECT_EQ(int(DType::f64), 7);
  EXPECT_EQ(int(DType::i16), 9);
  EXPECT_EQ(std::size(ferry::kAllDTypes), 10u);
  EXPECT_EQ(ferry::kAllDTypes[9], DType::f64);
  EXPECT_FERRY_ERROR(ferry::dtype_from_name("float64"), ferry::DTypeError, "float64", "f64");
}

TEST(F64DType, PromotionFollowsPyTorch) {
  using ferry::promote_types;
  for (DType t : ferry::kAllDTypes) {
    EXPECT_EQ(promote_types(DType::f64, t), DType::f64) << ferry::dtype_name(t);
    EXPECT_EQ(promote_types(t, DType::f64), DType::f64) << ferry::dtype_name(t);
  }
  EXPECT_EQ(promote_types(DType::f16, DType::bf16), DType::f32);  // unchanged
  EXPECT_EQ(promote_types(DType::i64, DType::f32), DType::f32);   // unchanged
  // Tensors of two dtypes.
  Tensor d = f64({1.5, 2.5}), s = ferry::tensor(std::vector<float>{1, 2});
  EXPECT_EQ((d + s).dtype(), DType::f64);
  EXPECT_EQ((s * d).dtype(), DType::f64);
  EXPECT_EQ((d + ferry::tensor(std::vector<std::int64_t>{1, 2})).dtype(), DType::f64);
  EXPECT_EQ((d + s.to(DType::bf16)).dtype(), DType::f64);
  EXPECT_EQ(ferry::where(ferry::gt(d, 2.0), d, s).dtype(), DType::f64);
}

TEST(F64DType, FloatScalarsStayF32AloneAndKeepPrecisionBesideF64) {
  // A Python-like float makes f32 on its own (PyTorch's default dtype) ...
  EXPECT_EQ(ferry::scalar_tensor(1.5).dtype(), DType::f32);
  EXPECT_EQ(ferry::full({2}, 0.1).dtype(), DType::f32);
  EXPECT_EQ((ferry::tensor(std::vector<std::int64_t>{1}) * 1.5).dtype(), DType::f32);
  EXPECT_EQ((ferry::tensor(std::vector<float>{1}) * 0.1).dtype(), DType::f32);
  // ... and beside an f64 tensor it keeps f64 and all of its digits.
  Tensor x = f64({3.0, 7.0});
  Tensor y = x * 0.1;
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{3.0 * 0.1, 7.0 * 0.1}));
  EXPECT_EQ((0.1 + x).to_vector<double>(), (std::vector<double>{0.1 + 3.0, 0.1 + 7.0}));
  EXPECT_EQ((x + 1).dtype(), DType::f64);  // an integer scalar never changes the dtype
  EXPECT_EQ(ferry::div(1.0, x).to_vector<double>(), (std::vector<double>{1.0 / 3.0, 1.0 / 7.0}));
}

TEST(F64DType, HostValuesRoundTrip) {
  std::vector<double> v = {0.1, -1e-300, 1e300, 4.9e-324, -0.0, 1.0 / 3.0};
  Tensor t = f64(v, {2, 3});
  EXPECT_EQ(t.dtype(), DType::f64);
  EXPECT_EQ(t.element_size(), 8u);
  std::vector<double> back = t.to_vector<double>();
  ASSERT_EQ(back.size(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(bits_of(back[i]), bits_of(v[i]));
  EXPECT_EQ(t.select(0, 1).select(0, 2).item<double>(), 1.0 / 3.0);
  EXPECT_EQ(t.t().contiguous().to_vector<double>()[1], v[3]);
  // Other element types read as double, and f64 read as other types.
  EXPECT_EQ(ferry::tensor(std::vector<float>{0.1f}).item<double>(), double(0.1f));
  EXPECT_EQ(f64({0.1}).item<float>(), 0.1f);
  EXPECT_EQ(f64({-2.75}).item<std::int64_t>(), -2);
  EXPECT_FERRY_ERROR(t.item<double>(), ferry::ShapeError, "item");
}

TEST(F64DType, Printing) {
  Tensor t = f64({1.0 / 3.0, -2.5, 1e-9, NAN}, {2, 2});
  const std::string s = t.str();
  EXPECT_NE(s.find("dtype=f64"), std::string::npos) << s;
  EXPECT_NE(s.find("0.3333"), std::string::npos) << s;
  EXPECT_NE(s.find("-2.5000"), std::string::npos) << s;
  EXPECT_NE(s.find("nan"), std::string::npos) << s;
  // Beyond float's range.
  EXPECT_NE(f64({1e300}).str().find("1.0000e+300"), std::string::npos) << f64({1e300}).str();
  EXPECT_EQ(ferry::empty({0}, {.dtype = DType::f64}).str(), "tensor([], size=[0], dtype=f64)");
}

// ---- element-wise ----

TEST(F64Elementwise, UnaryMatchesCmath) {
  const std::vector<double> x = doubles(257, -4, 4);
  const std::vector<double> pos = doubles(257, 1e-3, 50);
  struct U {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
    bool positive;
  };
  const U ops[] = {
      {"neg", [](const Tensor& t) { return ferry::neg(t); }, [](double v) { return -v; }, false},
      {"abs", [](const Tensor& t) { return ferry::abs(t); }, [](double v) { return std::fabs(v); },
       false},
      {"relu", [](const Tensor& t) { return ferry::relu(t); },
       [](double v) { return v > 0 ? v : 0.0; }, false},
      {"exp", [](const Tensor& t) { return ferry::exp(t); }, [](double v) { return std::exp(v); },
       false},
      {"log", [](const Tensor& t) { return ferry::log(t); }, [](double v) { return std::log(v); },
       true},
      {"sqrt", [](const Tensor& t) { return ferry::sqrt(t); },
       [](double v) { return std::sqrt(v); }, true},
      {"rsqrt", [](const Tensor& t) { return ferry::rsqrt(t); },
       [](double v) { return 1 / std::sqrt(v); }, true},
      {"sin", [](const Tensor& t) { return ferry::sin(t); }, [](double v) { return std::sin(v); },
       false},
      {"cos", [](const Tensor& t) { return ferry::cos(t); }, [](double v) { return std::cos(v); },
       false},
      {"tanh", [](const Tensor& t) { return ferry::tanh(t); },
       [](double v) { return std::tanh(v); }, false},
      {"sigmoid", [](const Tensor& t) { return ferry::sigmoid(t); },
       [](double v) { return 1 / (1 + std::exp(-v)); }, false},
      {"silu", [](const Tensor& t) { return ferry::silu(t); },
       [](double v) { return v / (1 + std::exp(-v)); }, false},
      {"gelu", [](const Tensor& t) { return ferry::gelu(t); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, false},
      {"gelu_tanh", [](const Tensor& t) { return ferry::gelu(t, "tanh"); },
       [](double v) {
         const double k = std::sqrt(2 / M_PI);
         return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v)));
       },
       false},
  };
  for (const U& u : ops) {
    const std::vector<double>& in = u.positive ? pos : x;
    std::vector<double> want(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) want[i] = u.ref(in[i]);
    Tensor y = u.op(f64(in));
    EXPECT_EQ(y.dtype(), DType::f64) << u.name;
    // 1e-15 absolute: where 1 + erf(x) cancels, one ulp of erf is ~1e-12 relative.
    expect_rel(y.to_vector<double>(), want, kRel, 1e-15, u.name);
    // Strided input: every other element of an interleaved buffer.
    std::vector<double> interleaved(2 * in.size(), 99.0);
    for (std::size_t i = 0; i < in.size(); ++i) interleaved[2 * i] = in[i];
    Tensor strided = f64(interleaved, {std::int64_t(in.size()), 2}).select(1, 0);
    ASSERT_FALSE(strided.is_contiguous());
    expect_rel(u.op(strided).to_vector<double>(), want, kRel, 1e-15,
               std::string(u.name) + " strided");
  }
  // Beyond float: exp(0.1) to the last bits, a NaN stays NaN, relu keeps it.
  EXPECT_NEAR(ferry::exp(f64({0.1})).item<double>(), std::exp(0.1), 1e-16);
  EXPECT_TRUE(std::isnan(ferry::relu(f64({NAN})).item<double>()));
  EXPECT_EQ(ferry::exp(f64({710.0})).item<double>(), std::exp(710.0));  // inf in float
}

TEST(F64Elementwise, BinaryBroadcastAndCompares) {
  const std::vector<double> a = doubles(6 * 5, -3, 3), b = doubles(5, 0.5, 2.5);
  Tensor ta = f64(a, {6, 5}), tb = f64(b, {5});
  auto ref = [&](auto f) {
    std::vector<double> r(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) r[i] = f(a[i], b[i % 5]);
    return r;
  };
  expect_rel((ta + tb).to_vector<double>(), ref([](double x, double y) { return x + y; }), 0, 0,
             "add");
  expect_rel((ta - tb).to_vector<double>(), ref([](double x, double y) { return x - y; }), 0, 0,
             "sub");
  expect_rel((ta * tb).to_vector<double>(), ref([](double x, double y) { return x * y; }), 0, 0,
             "mul");
  expect_rel((ta / tb).to_vector<double>(), ref([](double x, double y) { return x / y; }), 0, 0,
             "div");
  expect_rel(ferry::pow(ferry::abs(ta), tb).to_vector<double>(),
             ref([](double x, double y) { return std::pow(std::fabs(x), y); }), kRel, 0, "pow");
  expect_rel(ferry::maximum(ta, tb).to_vector<double>(),
             ref([](double x, double y) { return std::max(x, y); }), 0, 0, "maximum");
  expect_rel(ferry::minimum(tb, ta).to_vector<double>(),
             ref([](double x, double y) { return std::min(x, y); }), 0, 0, "minimum");
  // Transposed operands take the strided path.
  expect_rel((ta.t() * 2.0).t().contiguous().to_vector<double>(),
             ref([](double x, double) { return x * 2.0; }), 0, 0, "strided mul");
  EXPECT_TRUE(std::isnan(ferry::maximum(f64({NAN}), f64({1.0})).item<double>()));
  // Compares resolve differences float cannot see.
  Tensor one = f64({1.0}), near = f64({1.0 + 1e-12});
  EXPECT_TRUE(ferry::lt(one, near).item<bool>());
  EXPECT_TRUE(ferry::ne(one, near).item<bool>());
  EXPECT_FALSE(ferry::eq(one, near).item<bool>());
  EXPECT_TRUE(ferry::ge(near, one).item<bool>());
  EXPECT_TRUE(ferry::le(one, one).item<bool>());
  EXPECT_FALSE(ferry::gt(one, near).item<bool>());
  EXPECT_EQ(ferry::eq(one, near).dtype(), DType::boolean);
  Tensor w = ferry::where(ferry::lt(ta, 0.0), ta, tb);
  EXPECT_EQ(w.dtype(), DType::f64);
  expect_rel(w.to_vector<double>(), ref([](double x, double y) { return x < 0 ? x : y; }), 0, 0,
             "where");
  EXPECT_EQ(ferry::where(ferry::gt(one, 0.0), one, 0.1).dtype(), DType::f64);
}

TEST(F64Elementwise, FillAndArangeAreExactDoubles) {
  Tensor t = ferry::full({3}, 0.1, {.dtype = DType::f64});
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>(3, 0.1)));
  EXPECT_EQ(ferry::ones({2}, {.dtype = DType::f64}).to_vector<double>(),
            (std::vector<double>{1, 1}));
  Tensor z = ferry::zeros({2, 3}, {.dtype = DType::f64});
  z.slice(1, 0, 3, 2).fill_(1.0 / 3.0);
  EXPECT_EQ(z.to_vector<double>(),
            (std::vector<double>{1.0 / 3.0, 0, 1.0 / 3.0, 1.0 / 3.0, 0, 1.0 / 3.0}));
  Tensor r = ferry::arange(0.0, 1.0, 0.1, {.dtype = DType::f64});
  ASSERT_EQ(r.numel(), 10);
  std::vector<double> v = r.to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 0.0 + double(i) * 0.1) << i;
  // Integers beyond 2^24 survive (they would not through float).
  EXPECT_EQ(ferry::arange(16777217.0, 16777219.0, 1.0, {.dtype = DType::f64}).to_vector<double>(),
            (std::vector<double>{16777217.0, 16777218.0}));
}

// ---- casts ----

TEST(F64Cast, ToAndFromEveryDtype) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {0.1,    -2.75,  1e300,  -1e300, NAN,   16777217.0,
                                 300.0,  -5.0,   1e-300, 0.0,    -0.0,  2.5e9,
                                 -2.5e9, 9.5e18, -inf,   inf,    65520, 1e-8};
  Tensor x = f64(v);
  // -> f32: round to nearest (IEEE), NaN and inf kept.
  std::vector<float> f = x.to(DType::f32).to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i]))
      EXPECT_TRUE(std::isnan(f[i]));
    else
      EXPECT_EQ(f[i], float(v[i])) << v[i];
  }
  // -> f16/bf16: through float, as PyTorch.
  std::vector<float> h = x.to(DType::f16).to_vector<float>();
  std::vector<float> bh = x.to(DType::bf16).to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) continue;
    EXPECT_EQ(h[i], float(ferry::Half(float(v[i])))) << v[i];
    EXPECT_EQ(bh[i], float(ferry::BFloat16(float(v[i])))) << v[i];
  }
  // -> integers: truncate toward zero, saturate, NaN -> 0; exact beyond 2^24.
  auto i64 = x.to(DType::i64).to_vector<std::int64_t>();
  auto i32 = x.to(DType::i32).to_vector<std::int32_t>();
  auto u8 = x.to(DType::u8).to_vector<std::uint8_t>();
  constexpr auto kMax64 = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin64 = std::numeric_limits<std::int64_t>::min();
  constexpr auto kMax32 = std::numeric_limits<std::int32_t>::max();
  constexpr auto kMin32 = std::numeric_limits<std::int32_t>::min();
  const std::vector<std::int64_t> want64 = {
      0,      -2,     kMax64, kMin64, 0, 16777217, 300, -5, 0, 0, 0, 2500000000, -2500000000,
      kMax64,  // 9.5e18 > 2^63 - 1: saturates
      kMin64, kMax64, 65520,  0};
  EXPECT_EQ(i64, want64);
  const std::vector<std::int32_t> want32 = {0,      -2,     kMax32, kMin32, 0,     16777217,
                                            300,    -5,     0,      0,      0,     kMax32,
                                            kMin32, kMax32, kMin32, kMax32, 65520, 0};
  EXPECT_EQ(i32, want32);
  const std::vector<std::uint8_t> want8 = {0, 0, 255, 0, 0,   255, 255, 0,   0,
                                           0, 0, 255, 0, 255, 0,   255, 255, 0};
  EXPECT_EQ(u8, want8);
  // -> bool: nonzero is true (1e-300 too, which float would flush to 0), NaN is true.
  auto b = x.to(DType::boolean).to_vector<bool>();
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(b[i], v[i] != 0.0) << v[i];
  // Into f64: exact from f32, f16, bf16, i32, bool; i64 rounds to nearest.
  EXPECT_EQ(ferry::tensor(std::vector<float>{0.1f}).to(DType::f64).item<double>(), double(0.1f));
  EXPECT_EQ(ferry::tensor(std::vector<float>{0.1f}).to(DType::f16).to(DType::f64).item<double>(),
            double(float(ferry::Half(0.1f))));
  EXPECT_EQ(ferry::tensor(std::vector<std::int32_t>{-2147483647}).to(DType::f64).item<double>(),
            -2147483647.0);
  EXPECT_EQ(ferry::tensor(std::vector<std::int64_t>{(std::int64_t(1) << 53) + 1})
                .to(DType::f64)
                .item<double>(),
            9007199254740992.0);
  EXPECT_EQ(ferry::tensor(std::vector<std::int64_t>{(std::int64_t(1) << 40) + 1})
                .to(DType::f64)
                .to(DType::i64)
                .item<std::int64_t>(),
            (std::int64_t(1) << 40) + 1);
  EXPECT_EQ(ferry::tensor(std::vector<bool>{true, false}).to(DType::f64).to_vector<double>(),
            (std::vector<double>{1, 0}));
  EXPECT_EQ(ferry::tensor(std::vector<std::uint8_t>{255}).to(DType::f64).item<double>(), 255.0);
  // A strided f32 view converts element by element.
  Tensor m = ferry::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).t();
  EXPECT_EQ(m.to(DType::f64).to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

// ---- random ----

TEST(F64Random, UniformHas53BitsAndExtendsTheF32Draw) {
  const std::int64_t n = 200000;
  ferry::manual_seed(7);
  std::vector<double> u = ferry::rand({n}, {.dtype = DType::f64}).to_vector<double>();
  ferry::manual_seed(7);
  std::vector<float> uf = ferry::rand({n}).to_vector<float>();
  double s = 0, ss = 0;
  bool fine_bits = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = u[std::size_t(i)];
    ASSERT_TRUE(v >= 0.0 && v < 1.0) << v;
    s += v;
    ss += v * v;
    // The leading 24 bits are the f32 draw's (Note [f64 draws] in ferry/kit/math/philox.hpp).
    ASSERT_EQ(std::floor(v * 16777216.0), double(uf[std::size_t(i)]) * 16777216.0) << i;
    fine_bits = fine_bits || v * 16777216.0 != std::floor(v * 16777216.0);
  }
  EXPECT_TRUE(fine_bits) << "no draw has more than 24 random bits";
  const double mean = s / double(n), var = ss / double(n) - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(std::sqrt(var), std::sqrt(1.0 / 12.0), 0.005);
  // uniform(low, high) stays in [low, high).
  ferry::manual_seed(8);
  for (double v : ferry::uniform({10000}, -2.0, -1.5, {.dtype = DType::f64}).to_vector<double>())
    ASSERT_TRUE(v >= -2.0 && v < -1.5) << v;
}

TEST(F64Random, NormalHasTheRightMomentsAndIsReproducible) {
  const std::int64_t n = 200000;
  ferry::manual_seed(11);
  Tensor x = ferry::normal({n}, 3.0, 2.0, {.dtype = DType::f64});
  EXPECT_EQ(x.dtype(), DType::f64);
  std::vector<double> v = x.to_vector<double>();
  double s = 0, ss = 0;
  for (double e : v) {
    ASSERT_TRUE(std::isfinite(e));
    s += e;
    ss += e * e;
  }
  const double mean = s / double(n), var = ss / double(n) - mean * mean;
  EXPECT_NEAR(mean, 3.0, 0.03);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.03);
  ferry::manual_seed(11);
  EXPECT_EQ(ferry::normal({n}, 3.0, 2.0, {.dtype = DType::f64}).to_vector<double>(), v);
  // randn in f64 draws from the same counters as in f32: close, not equal.
  ferry::manual_seed(12);
  std::vector<double> d = ferry::randn({1000}, {.dtype = DType::f64}).to_vector<double>();
  ferry::manual_seed(12);
  std::vector<float> f = ferry::randn({1000}).to_vector<float>();
  int close = 0;
  for (std::size_t i = 0; i < d.size(); ++i) close += std::fabs(d[i] - double(f[i])) < 1e-4;
  EXPECT_GT(close, 990);
  // randint in f64 gives integers in range.
  for (double e : ferry::randint(-3, 4, {1000}, {.dtype = DType::f64}).to_vector<double>())
    ASSERT_TRUE(e == std::floor(e) && e >= -3 && e < 4) << e;
}
