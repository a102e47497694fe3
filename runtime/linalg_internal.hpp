// runtime/linalg_internal.hpp — what the compositions of ferry/ops_linalg.hpp share
// (runtime/ops_factorize.cpp: the triangular and LU family; runtime/ops_orthogonal.cpp: QR and
// the symmetric eigendecomposition): the dtype they compute in, PyTorch's shape checks and
// messages, and the batch-element prefix of their errors.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry::linalg_detail {

// f16 and bf16 in f32 (ferry/ops_linalg.hpp says why); f32 and f64 as they are.
inline Tensor computing(const Tensor& x) {
  return x.dtype() == DType::f64 || x.dtype() == DType::f32 ? x : x.to(DType::f32);
}

// x's sizes without its last `matrix_dims`.
inline Shape batch_of(const Tensor& x, std::int64_t matrix_dims) {
  const Shape& s = x.sizes();
  return Shape(s.begin(), s.end() - matrix_dims);
}

inline void check_matrix(const char* op, const char* name, const Tensor& x) {
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("linalg.{}: The input tensor {} must have at least 2 dimensions.", op, name));
}

inline void check_square(const char* op, const char* name, const Tensor& a) {
  check_matrix(op, name, a);
  if (a.size(-1) != a.size(-2))
    throw ShapeError(
        fmt::format("linalg.{}: {} must be batches of square matrices, but they are "
                    "{} by {} matrices",
                    op, name, a.size(-2), a.size(-1)));
}

// 0, 1, ..., n - 1 on x's device, in `dtype` (masks and one-hot vectors are compared against it
// there).
inline Tensor positions(const Tensor& x, std::int64_t n, DType dtype) {
  return arange(double(n), {.dtype = dtype, .device = x.device()});
}

// "(Batch element 3): " where x has batch dims, PyTorch's prefix, for the flat index `at`.
inline std::string batch_prefix(const Tensor& x, std::int64_t at) {
  return x.dim() > 2 ? fmt::format("(Batch element {}): ", at) : std::string();
}

}  // namespace ferry::linalg_detail
