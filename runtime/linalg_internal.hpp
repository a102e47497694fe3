// runtime/linalg_internal.hpp — what the compositions of ferry/ops_linalg.hpp share
// (runtime/ops_factorize.cpp: the triangular solvers and Gaussian elimination, and the solvers
// and determinants made of them; runtime/ops_lu.cpp: the LU factorization itself;
// runtime/ops_orthogonal.cpp: QR and the symmetric eigendecomposition): the dtype they compute
// in, PyTorch's shape checks and messages, the batch-element prefix of their errors, and the two
// loops the solvers share (Note [Linear algebra as compositions] in runtime/ops_factorize.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// T's triangle that solve_triangular reads (unit: without the diagonal).
inline Tensor triangle(const Tensor& t, bool upper, bool unit) {
  return upper ? triu(t, unit ? 1 : 0) : tril(t, unit ? -1 : 0);
}

// X with T X = B for T upper or lower triangular (its other triangle already zero), B [..., n, k]
// with T's batch dims broadcast; unit: T's diagonal taken as ones (and already zeroed).
Tensor substitute(const Tensor& t, const Tensor& b, bool upper, bool unit);

// Whether the core cuts a ([..., m, n]) in blocks for the device's factorization and triangular-
// solve kernels: min(m, n) above 64 on a device whose kernels do not block themselves (Note
// [Blocked factorizations and solves] in runtime/ops_factorize.cpp).
bool cut_in_blocks(const Tensor& a);

// X with T X = B (left) or X T = B, T's `upper` triangle read (its diagonal as ones for unit),
// by the device's solve_triangular kernel, whole or in blocks (the same Note). T and B in the
// computing dtype, shapes checked by the caller; untracked.
Tensor kernel_solve_triangular(const Tensor& t, const Tensor& b, bool upper, bool left, bool unit);

// What eliminate computes besides the reduced rows.
struct EliminationOptions {
  bool sign = false;         // the sign of the row permutation
  bool multipliers = false;  // L's multipliers
  bool pivots = false;       // the row swapped in at each step
  bool pivot = true;         // false: no row swaps (LU without pivoting)
};

struct Elimination {
  Tensor u;            // the reduced rows: U is its upper triangle (below it: rounding, not zeros)
  Tensor b;            // b with the same row operations
  Tensor sign;         // [...], -1 or 1, when asked
  Tensor multipliers;  // [..., m, n], L's strictly lower part (zero elsewhere), when asked
  Tensor pivots;       // [..., min(m, n)] i64, 0-based, LAPACK's ipiv less one, when asked
};

// Gaussian elimination of u ([..., m, n], computing dtype) over its first min(m, n) columns, with
// partial pivoting as LAPACK's getrf does it (each matrix of the batch swaps in its own rows),
// applying the same row operations to b ([..., m, r], batch dims already u's) when given.
Elimination eliminate(Tensor u, Tensor b, const EliminationOptions& want);

// linalg::lu_solve less the range check of the pivots, the one read back to the host it makes:
// for pivots this runtime's lu_factor_ex made (int32, 1-based, in range by construction), in
// solve and in det's and slogdet's gradients (Note [LU's pivots as a permutation] in
// runtime/ops_lu.cpp). lu and b as lu_solve takes them, checked by the caller.
Tensor lu_solve_factored(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left = true,
                         bool adjoint = false);

// P X, for P of A = P L U as lu_factor_ex's pivots ([..., k], in range by construction) make it
// of X's m rows ([..., m, c], the pivots' batch shape): X's rows gathered, no dense P, nothing
// read back (LU's gradient).
Tensor lu_permute_rows(const Tensor& pivots, const Tensor& x);

// partner[r][i]: index i's partner in round r of a round-robin tournament of n players (the
// circle method; with n odd, each round one index sits out and is its own partner): the n - 1
// rounds of disjoint pairs a sweep of Jacobi rotations makes at once (ops_orthogonal.cpp's eigh,
// ops_svd.cpp's SVD).
std::vector<std::vector<std::int64_t>> rounds_of(std::int64_t n);
// The sweeps of rotations after which they give up (a LinAlgError): generous, generic matrices
// converge in under ten.
inline constexpr int kMaxSweeps = 60;

}  // namespace ferry::linalg_detail
