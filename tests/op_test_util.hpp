// Small helpers shared by the op tests (test_reduce, test_matmul, test_nn_ops,
// test_index_ops): deterministic sample data and checks on typed errors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

// n values spread over [lo, hi] in a scrambled but fixed order.
inline std::vector<float> sample(std::int64_t n, float lo, float hi, int seed = 0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[std::size_t(i)] = lo + (hi - lo) * float(((i + seed) * 7919 + seed * 104729) % 1000) / 999.0f;
  return v;
}

inline ferry::Tensor sample_tensor(const ferry::Shape& shape, float lo = -3, float hi = 3,
                                   int seed = 0) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return ferry::tensor(sample(n, lo, hi, seed), shape);
}

inline std::vector<double> as_double(const ferry::Tensor& t) {
  std::vector<float> f = t.to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

// Elementwise |got - want| <= atol + rtol * |want|, NaN only where want is NaN.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double rtol, double atol, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i << ": got " << got[i] << ", want NaN";
    } else {
      ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
    }
  }
}

// Runs `f`, expecting an exception of type E whose message contains every
// string in `needles` (the op's name at least).
template <typename E, typename F>
void expect_error(F f, const std::vector<std::string>& needles, const std::string& what = "") {
  try {
    f();
    ADD_FAILURE() << what << ": expected an exception, none was thrown";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos)
          << what << ": message lacks \"" << n << "\": " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw the wrong type: " << e.what();
  }
}

// How many kernel calls named `op` `f` made: the profiler's op events (a fused kernel that
// ran, or a composition that did not call it).
inline std::size_t kernel_calls(std::string_view op, const std::function<void()>& f) {
  ferry::profiler::Scope scope;
  f();
  std::size_t n = 0;
  for (const ferry::profiler::Event& e : scope.stop().events())
    n += e.kind == ferry::profiler::EventKind::op && e.name == op;
  return n;
}

}  // namespace ferry_test

// EXPECT_THROW plus a check that the message names the op (and any other needles).
#define EXPECT_FERRY_ERROR(stmt, type, ...)                                      \
  do {                                                                           \
    EXPECT_THROW((void)(stmt), type);                                            \
    ferry_test::expect_error<type>([&] { (void)(stmt); }, {__VA_ARGS__}, #stmt); \
  } while (0)
