// tests/test_cpu_vector_math.cpp — the CPU's vector forms of libm's float functions (Note
// [CPU vector math] in runtime/cpu/cpu_vector_math.hpp) against the functors they stand for:
// a contiguous f32 run takes the vector form, the same values every other element of a
// tensor twice as long take the functor (the strided loop), and the two agree within a few
// ulp. The CTest entries cpu_vector_math_width_{4,16} run these again at the other widths
// (FERRY_CPU_VECTOR_WIDTH); a machine without libmvec takes the functor both ways.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

using ferry::Tensor;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Special values, then a grid over [-12, 12] with a length that leaves a tail for every width.
std::vector<float> inputs() {
  std::vector<float> xs = {std::nanf(""), kInf,  -kInf,  -0.0f,  0.0f,    1e-30f, -1e-30f,
                           1e-8f,         88.0f, -88.0f, 100.0f, -100.0f, 1.0f,   -1.0f};
  for (int i = 0; i <= 2400; ++i) xs.push_back(-12.0f + 0.01f * float(i));
  return xs;
}

// The values of xs at every other element of a tensor twice as long: a strided view.
Tensor strided(const std::vector<float>& xs) {
  std::vector<float> twice;
  for (float x : xs) twice.insert(twice.end(), {x, 0.5f});
  return ferry::tensor(twice).slice(0, 0, std::int64_t(twice.size()), 2);
}

// Within `ulps` float ulps of the functor's value (of 1 where that is smaller, as near a root
// of sin the absolute error is what libm's and libmvec's bounds keep small).
void expect_near(const std::string& what, const std::vector<float>& xs,
                 const std::vector<float>& got, const std::vector<float>& want, float ulps) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      EXPECT_TRUE(std::isnan(got[i]) == std::isnan(want[i]) &&
                  (std::isnan(want[i]) || got[i] == want[i]))
          << what << " at x = " << xs[i] << ": " << got[i] << " vs " << want[i];
      continue;
    }
    const float scale = std::max(std::fabs(want[i]), 1.0f);
    EXPECT_LE(std::fabs(got[i] - want[i]), ulps * std::numeric_limits<float>::epsilon() * scale)
        << what << " at x = " << xs[i] << ": " << got[i] << " vs " << want[i];
  }
}

TEST(CpuVectorMath, RunsAgreeWithTheFunctor) {
  const std::vector<float> xs = inputs();
  const Tensor run = ferry::tensor(xs), one_by_one = strided(xs);
  ASSERT_FALSE(one_by_one.is_contiguous());
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> unary = {
      {"exp", [](const Tensor& x) { return ferry::exp(x); }},
      {"expm1", [](const Tensor& x) { return ferry::expm1(x); }},
      {"log", [](const Tensor& x) { return ferry::log(x); }},
      {"log1p", [](const Tensor& x) { return ferry::log1p(x); }},
      {"sin", [](const Tensor& x) { return ferry::sin(x); }},
      {"cos", [](const Tensor& x) { return ferry::cos(x); }},
      {"tanh", [](const Tensor& x) { return ferry::tanh(x); }},
      {"atan", [](const Tensor& x) { return ferry::atan(x); }},
      {"erf", [](const Tensor& x) { return ferry::erf(x); }},
      {"gelu", [](const Tensor& x) { return ferry::gelu(x); }},
      {"atan2(x, 0.75)",
       [](const Tensor& x) { return ferry::atan2(x, ferry::full_like(x, 0.75)); }},
  };
  for (const auto& [name, fn] : unary)
    expect_near(name, xs, fn(run).to_vector<float>(), fn(one_by_one).to_vector<float>(), 4);
}

// A run long enough to be split over the CPU's threads. With a bad FERRY_CPU_VECTOR_WIDTH the
// CTest entry cpu_vector_math_bad_width runs it for the ValueError the CPU device raises when
// it is made, at ferry's first use; read first inside the split, the value ended the process.
TEST(CpuVectorMath, LongRunsSplitOverThreadsAgree) {
  std::vector<float> xs;
  for (int i = 0; i < (1 << 20) + 3; ++i) xs.push_back(-8.0f + 16.0f * float(i % 4093) / 4093.0f);
  const Tensor run = ferry::tensor(xs);
  const std::vector<float> got = ferry::gelu(run).to_vector<float>();
  const std::vector<float> want = ferry::gelu(strided(xs)).to_vector<float>();
  std::size_t far = 0;
  for (std::size_t i = 0; i < xs.size(); ++i)
    far += std::fabs(got[i] - want[i]) >
           4 * std::numeric_limits<float>::epsilon() * std::max(std::fabs(want[i]), 1.0f);
  EXPECT_EQ(far, 0u);
}

// softmax's rows take exp(x - max) through the vector form (cpu_kernels_nn.cpp), and rows of
// one element cannot: the two against each other, one row laid out both ways.
TEST(CpuVectorMath, SoftmaxRowsAgreeWithTheFunctor) {
  std::vector<float> xs;
  for (int i = 0; i < 1001; ++i) xs.push_back(std::sin(0.37f * float(i)) * 9.0f);
  const Tensor row = ferry::tensor(xs).reshape({1, -1});
  const std::vector<float> got = ferry::softmax(row, 1).to_vector<float>();
  const float m = *std::max_element(xs.begin(), xs.end());
  std::vector<float> shifted;
  for (float x : xs) shifted.push_back(x - m);
  const Tensor e = ferry::exp(strided(shifted));
  const std::vector<float> want = (e / ferry::sum(e)).to_vector<float>();
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 8 * std::numeric_limits<float>::epsilon() * want[i] + 1e-9)
        << "at " << i;
  // log_softmax's exps go through the vector forms too (beside the row, which it keeps).
  const std::vector<float> got_log = ferry::log_softmax(row, 1).to_vector<float>();
  double sum = 0;
  for (float v : e.to_vector<float>()) sum += double(v);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float want_log = shifted[i] - float(std::log(sum));
    EXPECT_NEAR(got_log[i], want_log,
                4 * std::numeric_limits<float>::epsilon() * std::max(1.0f, std::abs(want_log)))
        << "at " << i;
  }
}

}  // namespace
