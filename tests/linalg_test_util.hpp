// Helpers shared by the linear-algebra tests (test_linalg.cpp, test_linalg_orthogonal.cpp,
// test_linalg_lu.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ferry/ferry.hpp"
#include "ferry/profiler.hpp"
#include "gradcheck.hpp"

namespace ferry_test {

inline std::vector<double> values(const ferry::Tensor& t) {
  return t.to(ferry::DType::f64).to_vector<double>();
}

inline double max_abs(const ferry::Tensor& t) {
  return ferry::amax(ferry::abs(t)).to(ferry::DType::f64).item<double>();
}

// An f64 matrix (or batch) on dev, uniform in [-1, 1].
inline ferry::Tensor random_matrix(const ferry::Shape& shape, std::uint64_t seed,
                                   const ferry::Device& dev) {
  return grad_input(shape, -1, 1, seed).to(dev);
}

inline ferry::Tensor identity(std::int64_t n, const ferry::Device& dev) {
  return ferry::eye(n, std::nullopt, {.dtype = ferry::DType::f64, .device = dev});
}

// Eigenvectors (columns of v) with each sign chosen so that the column's entry of largest
// magnitude is positive: the sign LAPACK and ferry give is arbitrary, and
// tools/gen_linalg_reference.py fixes PyTorch's the same way.
inline ferry::Tensor sign_fixed(const ferry::Tensor& v) {
  const ferry::Tensor at = ferry::argmax(ferry::abs(v), -2, true);
  return v * ferry::sign(ferry::gather(v, -2, at));
}

// How many calls of the op `name` a profile recorded (the blocked factorizations' matmuls).
inline std::size_t op_calls(const ferry::profiler::Profile& p, std::string_view name) {
  std::size_t calls = 0;
  for (const ferry::profiler::Event& e : p.events())
    calls += e.kind == ferry::profiler::EventKind::op && e.name == name;
  return calls;
}

}  // namespace ferry_test
