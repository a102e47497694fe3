// Element-wise ops against closed forms computed here in double, across
// shapes (odd, empty, broadcast, non-contiguous, > 2^24 elements) and dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>

#include "ferry/ferry.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;

namespace {

std::vector<float> sample(std::int64_t n, float lo, float hi) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[std::size_t(i)] = lo + (hi - lo) * float((i * 7919) % 1000) / 999.0f;
  return v;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Each unary row of the op table (Note [The op table]) with a closed form
// from libm, independent of ferry's functors; the op runs through
// unary_op(its id), and EveryUnaryAndBinaryRowHasAClosedForm fails when a
// row is added without one here.
struct UnaryCase {
  const char* name;
  std::function<double(double)> ref;
  float lo, hi;
  DType dtype = DType::f32;  // of the input: the ref takes it as a double
  Tensor op(const Tensor& x) const { return ferry::unary_op(*ferry::op_from_name(name), x); }
  bool gives_bool() const {
    return ferry::op_info(*ferry::op_from_name(name)).result == ferry::OpResult::bool_;
  }
};

double erfinv_ref(double y) {
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](double x) { return -x; }, -5, 5},
      {"abs", [](double x) { return std::fabs(x); }, -5, 5},
      {"relu", [](double x) { return x > 0 ? x : 0; }, -5, 5},
      {"exp", [](double x) { return std::exp(x); }, -10, 10},
      {"expm1", [](double x) { return std::expm1(x); }, -5, 5},
      {"log", [](double x) { return std::log(x); }, 1e-3f, 100},
      {"log1p", [](double x) { return std::log1p(x); }, -0.99f, 100},
      {"log2", [](double x) { return std::log2(x); }, 1e-3f, 100},
      {"floor", [](double x) { return std::floor(x); }, -50, 50},
      {"ceil", [](double x) { return std::ceil(x); }, -50, 50},
      {"trunc", [](double x) { return std::trunc(x); }, -50, 50},
      {"round", [](double x) { return std::nearbyint(x); }, -50, 50},
      {"frac", [](double x) { return x - std::trunc(x); }, -50, 50},
      {"sign", [](double x) { return double((0 < x) - (x < 0)); }, -5, 5},
      {"reciprocal", [](double x) { return 1 / x; }, 0.01f, 100},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 100},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 1e-2f, 100},
      {"sin", [](double x) { return std::sin(x); }, -6, 6},
      {"cos", [](double x) { return std::cos(x); }, -6, 6},
      {"tanh", [](double x) { return std::tanh(x); }, -6, 6},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20},
      {"gelu", gelu_ref, -6, 6},
      {"gelu_tanh", gelu_tanh_ref, -6, 6},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -20, 20},
      {"square", [](double x) { return x * x; }, -5, 5},
      {"log10", [](double x) { return std::log10(x); }, 1e-3f, 100},
      {"exp2", [](double x) { return std::exp2(x); }, -10, 10},
      {"erf", [](double x) { return std::erf(x); }, -4, 4},
      {"erfc", [](double x) { return std::erfc(x); }, -4, 4},
      // erfinv by bisection of erf, the closed form it inverts.
      {"erfinv", erfinv_ref, -0.99f, 0.99f},
      {"tan", [](double x) { return std::tan(x); }, -1.5f, 1.5f},
      {"asin", [](double x) { return std::asin(x); }, -1, 1},
      {"acos", [](double x) { return std::acos(x); }, -1, 1},
      {"atan", [](double x) { return std::atan(x); }, -20, 20},
      {"sinh", [](double x) { return std::sinh(x); }, -10, 10},
      {"cosh", [](double x) { return std::cosh(x); }, -10, 10},
      {"asinh", [](double x) { return std::asinh(x); }, -100, 100},
      {"acosh", [](double x) { return std::acosh(x); }, 1, 100},
      {"atanh", [](double x) { return std::atanh(x); }, -0.99f, 0.99f},
      {"selu",
       [](double x) {
         return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * std::expm1(x));
       },
       -5, 5},
      {"hardsigmoid", [](double x) { return std::clamp(x + 3, 0.0, 6.0) / 6; }, -5, 5},
      {"hardswish", [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }, -5, 5},
      {"mish", [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, -10, 10},
      {"logsigmoid", [](double x) { return -std::log1p(std::exp(-x)); }, -20, 20},
      // The composite rows at the defaults unary_op calls them with.
      {"softplus", [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }, -30, 30},
      {"elu", [](double x) { return x > 0 ? x : std::expm1(x); }, -5, 5},
      {"celu", [](double x) { return x > 0 ? x : std::expm1(x); }, -5, 5},
      {"leaky_relu", [](double x) { return x > 0 ? x : 0.01 * x; }, -5, 5},
      {"hardtanh", [](double x) { return std::clamp(x, -1.0, 1.0); }, -5, 5},
      {"relu6", [](double x) { return std::clamp(x, 0.0, 6.0); }, -10, 10},
      {"nan_to_num", [](double x) { return x; }, -5, 5},
      // PyTorch's round(x, decimals=1), in float as it computes.
      {"round_decimals", [](double x) { return double(std::nearbyint(float(x) * 10.0f) / 10.0f); },
       -50, 50},
      {"isnan", [](double) { return 0.0; }, -5, 5},
      {"isinf", [](double) { return 0.0; }, -5, 5},
      {"isfinite", [](double) { return 1.0; }, -5, 5},
      {"logical_not", [](double x) { return double(x == 0); }, -5, 5},
      {"bitwise_not", [](double x) { return double(~std::int32_t(x)); }, -1000, 1000, DType::i32},
  };
}

// Each binary row with its closed form (as unary_cases()).
struct BinaryForm {
  std::string name;
  std::function<double(double, double)> ref;
  DType dtype = DType::f32;  // of the inputs: i32 for the bitwise rows
};

std::int32_t i32_of(double v) { return std::int32_t(v); }

std::vector<BinaryForm> binary_closed_forms() {
  return {
      {"add", [](double x, double y) { return x + y; }},
      {"sub", [](double x, double y) { return x - y; }},
      {"mul", [](double x, double y) { return x * y; }},
      {"div", [](double x, double y) { return x / y; }},
      {"pow", [](double x, double y) { return std::pow(x, y); }},
      {"maximum", [](double x, double y) { return std::max(x, y); }},
      {"minimum", [](double x, double y) { return std::min(x, y); }},
      {"atan2", [](double x, double y) { return std::atan2(x, y); }},
      {"remainder", [](double x, double y) { return x - std::floor(x / y) * y; }},
      {"fmod", [](double x, double y) { return std::fmod(x, y); }},
      {"floor_divide", [](double x, double y) { return std::floor(x / y); }},
      {"hypot", [](double x, double y) { return std::sqrt(x * x + y * y); }},
      {"copysign", [](double x, double y) { return std::copysign(x, y); }},
      {"xlogy", [](double x, double y) { return x * std::log(y); }},
      {"logical_and", [](double x, double y) { return double(x != 0 && y != 0); }},
      {"logical_or", [](double x, double y) { return double(x != 0 || y != 0); }},
      {"logical_xor", [](double x, double y) { return double((x != 0) != (y != 0)); }},
      {"bitwise_and", [](double x, double y) { return double(i32_of(x) & i32_of(y)); }, DType::i32},
      {"bitwise_or", [](double x, double y) { return double(i32_of(x) | i32_of(y)); }, DType::i32},
      {"bitwise_xor", [](double x, double y) { return double(i32_of(x) ^ i32_of(y)); }, DType::i32},
      // Counts of 32 and more: 0 to the left, the sign to the right.
      {"bitwise_left_shift",
       [](double x, double y) {
         return y >= 32 ? 0.0 : double(std::int32_t(std::uint32_t(i32_of(x)) << int(y)));
       },
       DType::i32},
      {"bitwise_right_shift",
       [](double x, double y) { return double(i32_of(x) >> std::min(int(y), 31)); }, DType::i32}};
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
  }
}

}  // namespace

TEST(Unary, EveryUnaryAndBinaryRowHasAClosedForm) {
  std::set<std::string> unary, binary;
  for (const auto& c : unary_cases()) unary.insert(c.name);
  for (const auto& f : binary_closed_forms()) binary.insert(f.name);
  for (const ferry::OpInfo& info : ferry::op_table()) {
    if (info.kind == ferry::OpKind::unary)
      EXPECT_TRUE(unary.erase(std::string(info.name))) << info.name << " has no closed form here";
    if (info.kind == ferry::OpKind::binary)
      EXPECT_TRUE(binary.erase(std::string(info.name))) << info.name << " has no closed form here";
  }
  EXPECT_TRUE(unary.empty() && binary.empty()) << "closed forms of ops not in the table";
}

TEST(Unary, MatchesClosedFormsAtOddSizes) {
  for (const auto& c : unary_cases())
    for (std::int64_t n : {1, 7, 13, 127, 1023, 70001}) {
      auto in = sample(n, c.lo, c.hi);
      std::vector<double> want;
      for (float v : in) want.push_back(c.ref(v));
      expect_close(c.op(ferry::tensor(in).to(c.dtype)).to(DType::f32).to_vector<float>(), want,
                   2e-6, 1e-6, std::string(c.name) + " n=" + std::to_string(n));
    }
}

TEST(Unary, HalfAndBFloat16ComputeInFloatAndRound) {
  for (const auto& c : unary_cases()) {
    if (c.dtype != DType::f32) continue;  // the integer-only rows
    auto in = sample(257, c.lo, c.hi);
    for (DType dt : {DType::f16, DType::bf16}) {
      Tensor x = ferry::tensor(in).to(dt);
      Tensor y = c.op(x);
      EXPECT_EQ(y.dtype(), c.gives_bool() ? DType::boolean : dt) << c.name;
      y = y.to(DType::f32);
      auto xr = x.to_vector<float>();  // the rounded inputs
      std::vector<double> want;
      for (float v : xr) want.push_back(c.ref(v));
      double rtol = dt == DType::f16 ? 1e-3 : 8e-3;
      expect_close(y.to_vector<float>(), want, rtol, rtol * 1e-2,
                   std::string(c.name) + " " + std::string(ferry::dtype_name(dt)));
    }
  }
}

TEST(Unary, NonContiguousAndEmptyInputs) {
  Tensor t = ferry::tensor(sample(60, -3, 3), {6, 10});
  Tensor v = t.t().slice(0, 1, 10, 3);  // transposed and stepped
  auto want = v.contiguous().to_vector<float>();
  auto got = ferry::exp(v).to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], std::exp(want[i]));
  EXPECT_EQ(ferry::exp(ferry::empty({0, 4})).sizes(), (Shape{0, 4}));
  EXPECT_EQ(ferry::exp(ferry::scalar_tensor(0.0)).item<float>(), 1.0f);
}

TEST(Unary, SpecialValuesPropagate) {
  Tensor x = ferry::tensor(std::vector<float>{NAN, INFINITY, -INFINITY, -0.0f});
  auto e = ferry::exp(x).to_vector<float>();
  EXPECT_TRUE(std::isnan(e[0]));
  EXPECT_EQ(e[1], INFINITY);
  EXPECT_EQ(e[2], 0.0f);
  auto r = ferry::relu(x).to_vector<float>();
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_EQ(r[1], INFINITY);
  EXPECT_EQ(r[2], 0.0f);
  EXPECT_TRUE(std::isnan(ferry::log(ferry::tensor(std::vector<float>{-1})).item<float>()));
  EXPECT_EQ(ferry::log(ferry::tensor(std::vector<float>{0})).item<float>(), -INFINITY);
  EXPECT_EQ(ferry::sigmoid(ferry::tensor(std::vector<float>{-INFINITY})).item<float>(), 0.0f);
}

TEST(Unary, IntegerInputsFollowPyTorch) {
  Tensor i = ferry::tensor(std::vector<std::int32_t>{-3, 0, 4, INT32_MIN});
  EXPECT_EQ(ferry::neg(i).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{3, 0, -4, INT32_MIN}));
  EXPECT_EQ(ferry::abs(i).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{3, 0, 4, INT32_MIN}));
  EXPECT_EQ(ferry::relu(i).to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, 0, 4, 0}));
  Tensor e = ferry::exp(i.slice(0, 0, 3));
  EXPECT_EQ(e.dtype(), DType::f32);  // floating ops promote integers
  EXPECT_FLOAT_EQ(e.to_vector<float>()[2], std::exp(4.0f));
  EXPECT_THROW(ferry::neg(ferry::tensor(std::vector<bool>{true})), ferry::DTypeError);
  EXPECT_THROW(ferry::gelu(ferry::zeros({1}), "fast"), ferry::Error);
}

TEST(Binary, BroadcastsInEachOperand) {
  Tensor a = ferry::tensor(std::vector<float>{1, 2, 3}, {3, 1});
  Tensor b = ferry::tensor(std::vector<float>{10, 20, 30, 40}, {1, 4});
  Tensor c = a + b;
  EXPECT_EQ(c.sizes(), (Shape{3, 4}));
  EXPECT_EQ(c.to_vector<float>(),
            (std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
  EXPECT_EQ((b - a).to_vector<float>()[4], 8.0f);
  Tensor x = ferry::tensor(sample(24, -2, 2), {2, 3, 4});
  Tensor y = ferry::tensor(std::vector<float>{1, 2, 3, 4});
  auto xv = x.to_vector<float>();
  auto got = (x * y).to_vector<float>();
  for (std::size_t i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(got[i], xv[i] * float(i % 4 + 1));
  EXPECT_EQ((ferry::scalar_tensor(2.0) * y).sizes(), (Shape{4}));
  EXPECT_THROW(ferry::add(ferry::zeros({2, 3}), ferry::zeros({3, 2})), ferry::ShapeError);
  try {
    ferry::mul(ferry::zeros({2, 3}), ferry::zeros({4}));
  } catch (const ferry::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

TEST(Binary, AllOpsAgainstClosedFormsOnStridedInputs) {
  Tensor a = ferry::tensor(sample(91, 0.5f, 3), {7, 13}).t();  // [13, 7], non-contiguous
  Tensor b = ferry::tensor(sample(91, -2, 2), {13, 7}).slice(1, 0, 7, 1);
  auto av = a.contiguous().to_vector<float>(), bv = b.contiguous().to_vector<float>();
  struct Case {
    std::string name;
    Tensor got;
    std::function<double(std::size_t)> ref;
  };
  // The integer rows: values of both signs, shift counts from 1 to 40.
  Tensor ai = ferry::tensor(sample(91, -1000, 1000), {7, 13}).to(DType::i32).t();
  Tensor bi = ferry::tensor(sample(91, 1, 40), {13, 7}).to(DType::i32).slice(1, 0, 7, 1);
  auto aiv = ai.contiguous().to(DType::f32).to_vector<float>();
  auto biv = bi.contiguous().to(DType::f32).to_vector<float>();
  std::vector<Case> cases;
  for (const auto& f : binary_closed_forms()) {
    const bool ints = f.dtype == DType::i32;
    cases.push_back({f.name,
                     ferry::binary_op(*ferry::op_from_name(f.name), ints ? ai : a, ints ? bi : b),
                     [f, ints, &av, &bv, &aiv, &biv](std::size_t i) {
                       return ints ? f.ref(aiv[i], biv[i]) : f.ref(av[i], bv[i]);
                     }});
  }
  for (auto& c : cases) {
    std::vector<double> want;
    for (std::size_t i = 0; i < av.size(); ++i) want.push_back(c.ref(i));
    expect_close(c.got.to(DType::f32).to_vector<float>(), want, 2e-6, 1e-6, c.name);
  }
}

TEST(Binary, ScalarOperandsAndPromotion) {
  Tensor i = ferry::tensor(std::vector<std::int32_t>{1, 2, 3});
  EXPECT_EQ((i + 1).dtype(), DType::i32);    // an int scalar keeps i32
  EXPECT_EQ((i * 1.5).dtype(), DType::f32);  // a float scalar makes it f32
  EXPECT_EQ((i * 1.5).to_vector<float>(), (std::vector<float>{1.5f, 3, 4.5f}));
  EXPECT_EQ((i / i).dtype(), DType::f32);  // true division
  EXPECT_EQ((1 - i).to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, -1, -2}));
  EXPECT_EQ((6.0 / ferry::tensor(std::vector<float>{2, 3})).to_vector<float>(),
            (std::vector<float>{3, 2}));
  Tensor h = ferry::ones({2}, {.dtype = DType::f16});
  EXPECT_EQ((h + 1).dtype(), DType::f16);
  EXPECT_EQ((h + 2.5).dtype(), DType::f16);  // same category: the tensor's dtype wins
  EXPECT_EQ((h + ferry::ones({2}, {.dtype = DType::bf16})).dtype(), DType::f32);
  Tensor u = ferry::tensor(std::vector<std::uint8_t>{250, 3});
  EXPECT_EQ((u + ferry::tensor(std::vector<std::int32_t>{10, -5})).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{260, -2}));
  EXPECT_EQ((u + std::uint8_t(10)).dtype(), DType::u8);
  EXPECT_EQ((u + 10).to_vector<std::int64_t>(), (std::vector<std::int64_t>{4, 13}));  // u8 wraps
  Tensor l = ferry::tensor(std::vector<std::int64_t>{INT64_MAX, 3});
  EXPECT_EQ((l + 1).to_vector<std::int64_t>()[0], INT64_MIN);  // wraps, no UB
  EXPECT_EQ(ferry::pow(ferry::tensor(std::vector<std::int64_t>{3, 2, -1, 5}),
                       ferry::tensor(std::vector<std::int64_t>{4, 10, -3, -1}))
                .to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{81, 1024, -1, 0}));
  Tensor bt = ferry::tensor(std::vector<bool>{true, false}),
         bf = ferry::tensor(std::vector<bool>{true, true});
  EXPECT_EQ((bt + bf).dtype(), DType::boolean);
  EXPECT_EQ((bt * bf).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_THROW(bt - bf, ferry::DTypeError);
  EXPECT_EQ((bt + 1).dtype(), DType::i64);
}

TEST(Binary, NanPropagatesThroughMaximumAndMinimum) {
  Tensor a = ferry::tensor(std::vector<float>{NAN, 1, 2, -INFINITY});
  Tensor b = ferry::tensor(std::vector<float>{0, NAN, 3, 1});
  auto mx = ferry::maximum(a, b).to_vector<float>(), mn = ferry::minimum(a, b).to_vector<float>();
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mx[2], 3.0f);
  EXPECT_EQ(mn[3], -INFINITY);
  auto q = (ferry::tensor(std::vector<float>{1, -1, 0}) / 0.0).to_vector<float>();
  EXPECT_EQ(q[0], INFINITY);
  EXPECT_EQ(q[1], -INFINITY);
  EXPECT_TRUE(std::isnan(q[2]));
}

TEST(Compare, GiveBoolAndBroadcast) {
  Tensor a = ferry::tensor(std::vector<float>{1, 2, 3, NAN});
  Tensor b = ferry::tensor(std::vector<float>{2});
  EXPECT_EQ(ferry::lt(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(ferry::le(a, b).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(ferry::gt(a, 2).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(ferry::ge(a, 2).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(ferry::eq(a, 2).to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(ferry::ne(a, a).to_vector<bool>(),
            (std::vector<bool>{false, false, false, true}));  // NaN != NaN
  EXPECT_EQ(ferry::eq(ferry::tensor(std::vector<std::int32_t>{1, 2}), 1.0).dtype(), DType::boolean);
  EXPECT_EQ(ferry::lt(ferry::tensor(std::vector<std::int32_t>{1, 2}), 1.5).to_vector<bool>(),
            (std::vector<bool>{true, false}));
}

TEST(Where, SelectsWithBroadcastingAndPromotion) {
  Tensor cond = ferry::tensor(std::vector<bool>{true, false, true}, {3, 1});
  Tensor a = ferry::tensor(std::vector<std::int32_t>{1, 2});
  Tensor b = ferry::tensor(std::vector<float>{-1});
  Tensor r = ferry::where(cond, a, b);
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_EQ(r.sizes(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 2, -1, -1, 1, 2}));
  EXPECT_EQ(ferry::where(cond, a, 0).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{1, 2, 0, 0, 1, 2}));
  EXPECT_THROW(ferry::where(ferry::ones({3}), a.slice(0, 0, 1), b), ferry::DTypeError);
}

TEST(Elementwise, LargeTensorsBeyond2Pow24) {
  const std::int64_t n = (std::int64_t(1) << 24) + 3;
  Tensor a = ferry::arange(0, double(n), 1, {.dtype = DType::i32});
  Tensor b = ferry::full({n}, 2, {.dtype = DType::i32});
  auto v = (a * b + 1).to_vector<std::int32_t>();
  for (std::int64_t i : {std::int64_t(0), std::int64_t(1) << 20, n - 1})
    ASSERT_EQ(v[std::size_t(i)], 2 * i + 1);
  Tensor f = ferry::full({n}, 1.5);
  auto s = ferry::sqrt(f * f).to_vector<float>();
  for (std::int64_t i : {std::int64_t(0), n / 2, n - 1}) ASSERT_EQ(s[std::size_t(i)], 1.5f);
}

TEST(Elementwise, EveryDtypeThroughAddAndCopy) {
  for (DType dt : ferry::kAllDTypes) {
    Tensor x = ferry::tensor(std::vector<float>{0, 1, 2, 1}).to(dt);
    Tensor y = x + x;
    EXPECT_EQ(y.dtype(), dt) << ferry::dtype_name(dt);
    auto v = y.to_vector<float>();
    if (dt == DType::boolean)
      EXPECT_EQ(v, (std::vector<float>{0, 1, 1, 1}));
    else
      EXPECT_EQ(v, (std::vector<float>{0, 2, 4, 2})) << ferry::dtype_name(dt);
    EXPECT_EQ(x.t().contiguous().to_vector<float>(), x.to_vector<float>());
  }
}

// Outputs past kStreamBytes (32 MiB) are written with streaming stores in
// blocks (Note [Streaming stores] in runtime/cpu/cpu_loops.hpp): every element
// of each contiguous form (unary, binary with either side a scalar, where,
// clamp's fused kernel) and of an in-place op on a view that starts off the
// 16-byte grid, so the block edges and the unaligned head are all checked.
TEST(Elementwise, OutputsPastTheCacheAreWrittenInFull) {
  const std::int64_t n = (std::int64_t(9) << 20) + 5;  // 36 MiB of f32
  Tensor x = ferry::arange(0, double(n), 1);           // exact in f32 below 2^24
  auto expect_all = [&](const Tensor& t, const std::function<float(std::int64_t)>& f,
                        const char* what) {
    ASSERT_EQ(t.numel(), n) << what;
    const std::vector<float> v = t.to_vector<float>();
    for (std::int64_t i = 0; i < n; ++i)
      if (v[std::size_t(i)] != f(i))
        FAIL() << what << ": element " << i << " is " << v[std::size_t(i)];
  };
  expect_all(
      ferry::neg(x), [](std::int64_t i) { return -float(i); }, "neg");
  expect_all(
      x + x, [](std::int64_t i) { return 2 * float(i); }, "x + x");
  expect_all(
      x - 1.0, [](std::int64_t i) { return float(i) - 1; }, "x - 1");
  expect_all(
      ferry::sub(ferry::scalar_tensor(1.0), x), [](std::int64_t i) { return 1 - float(i); },
      "1 - x");
  const Tensor odd = ferry::eq(ferry::remainder(x, 2.0), 1.0);
  expect_all(
      ferry::masked_fill(x, odd, -1.0), [](std::int64_t i) { return i % 2 ? -1.0f : float(i); },
      "masked_fill");
  expect_all(
      ferry::clamp(x, 100.0, double(n - 100)),
      [n](std::int64_t i) { return float(std::clamp<std::int64_t>(i, 100, n - 100)); }, "clamp");
  Tensor y = x.clone();
  Tensor tail = y.narrow(0, 1, n - 1);  // 4 bytes past the allocation's alignment
  tail.mul_(2.0);
  expect_all(
      y, [](std::int64_t i) { return i == 0 ? 0.0f : 2 * float(i); }, "narrow().mul_()");
  // 1-byte elements: the head walks to the 16-byte grid one element at a time.
  const std::int64_t m = (std::int64_t(33) << 20) + 7;
  Tensor b = ferry::full({m}, 0x5A, {.dtype = DType::u8}).narrow(0, 3, m - 3);
  const std::vector<std::uint8_t> bv = ferry::bitwise_not(b).to_vector<std::uint8_t>();
  ASSERT_EQ(std::count(bv.begin(), bv.end(), std::uint8_t(0xA5)), m - 3);
}
