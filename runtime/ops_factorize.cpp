// runtime/ops_factorize.cpp — the compositions of ferry/ops_linalg.hpp (matmul's front-end is
// runtime/ops_linalg.cpp).
//
// Note [Linear algebra as compositions]
// Each factorization is a loop over the n columns of the [..., n, n] operands in which every
// step is a few batched ops over all of them: a matrix-vector product against what is already
// factored, and element-wise updates. The factor grows in a tensor of its final shape, column
// by column (L + col * e_j^T), so that the part not yet computed is exactly zero and the
// products in each step need no slicing of the factor; the triangles the algorithm does not
// own are zeroed once, up front, so that an inf or NaN there does not reach the result through
// 0 * inf. The products against the factor are multiplies and sums, not matmuls: for a batch
// of many small matrices (a MultivariateNormal's 80,000 3 x 3 solves) a batched matmul is as many
// tiny GEMMs, which took lavapipe 14 s where the element-wise form takes milliseconds, and for one
// matrix they are the same O(n^2) work. Nothing is read back to the host but the check of the
// finished factorization (cholesky's diagonal, solve's pivots), one read per call, which PyTorch's
// linalg.cholesky and linalg.solve make too (their _ex forms do not; ferry has none). Pivoting
// (solve, det) is per matrix: the row of largest magnitude in column j is found with argmax and
// swapped in with a gather, for every matrix of the batch in the same ops. cholesky,
// solve_triangular and lu_factor_ex run their steps (or a fused kernel) untracked and record
// PyTorch's closed-form gradient (Note [Closed-form gradients of the factorizations] in
// runtime/autograd/formulas_linalg.cpp); solve and inv go through lu_factor_ex and lu_solve where
// the device fuses those. The others' gradients are those of the steps, which for an invertible A
// are the closed forms PyTorch uses (A^-T for det, ...), to rounding.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "linalg_internal.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::check_defined;
using detail::check_dtype;
using detail::gather_in_range;
using linalg_detail::batch_of;
using linalg_detail::batch_prefix;
using linalg_detail::check_matrix;
using linalg_detail::check_square;
using linalg_detail::computing;
using linalg_detail::cut_in_blocks;
using linalg_detail::eliminate;
using linalg_detail::Elimination;
using linalg_detail::kernel_solve_triangular;
using linalg_detail::positions;
using linalg_detail::substitute;
using linalg_detail::triangle;

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw DTypeError(
        fmt::format("linalg.{}: Expected A and B to have the same dtype, but found A "
                    "of type {} and B of type {} instead",
                    op, dtype_name(a.dtype()), dtype_name(b.dtype())));
}

// The first (matrix, column) where `bad` ([..., n], bool) holds, read back once.
std::optional<std::pair<std::int64_t, std::int64_t>> first_bad(const Tensor& bad) {
  if (bad.numel() == 0 || !any(bad).item<bool>()) return std::nullopt;
  const std::int64_t n = bad.size(-1);
  const std::vector<std::uint8_t> flags = bad.to(DType::u8).to_vector<std::uint8_t>();
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (flags[i]) return std::pair{std::int64_t(i) / n, std::int64_t(i) % n};
  return std::nullopt;
}

// Lower Cholesky factor of a (computing dtype), reading its lower triangle.
Tensor cholesky_lower(const Tensor& a) {
  const std::int64_t n = a.size(-1);
  const Tensor at = positions(a, n, a.dtype());
  Tensor l = zeros_like(a);
  for (std::int64_t j = 0; j < n; ++j) {
    // v = A[:, j] - L[:, :j] L[j, :j]^T; the columns of L from j on are still zero.
    Tensor v = a.select(-1, j);
    if (j > 0) v = v - sum(l * l.select(-2, j).unsqueeze(-2), {-1});
    // Rows j.. of column j: v / sqrt(v_j) (row j is sqrt(v_j) itself); rows above are zero.
    const Tensor col = where(ge(at, double(j)), v * rsqrt(v.narrow(-1, j, 1)), Scalar(0.0));
    l = l + col.unsqueeze(-1) * eq(at, double(j)).to(a.dtype());
  }
  return l;
}

}  // namespace

namespace linalg_detail {

Tensor substitute(const Tensor& t, const Tensor& b, bool upper, bool unit) {
  const std::int64_t n = t.size(-1);
  Shape shape = broadcast_shapes(batch_of(t, 2), batch_of(b, 2));
  shape.push_back(n);
  shape.push_back(b.size(-1));
  const Tensor at = positions(t, n, t.dtype()).unsqueeze(-1);
  const Tensor diag = unit ? Tensor() : diagonal(t, 0, -2, -1);
  Tensor x = zeros(shape, {.dtype = t.dtype(), .device = t.device()});
  for (std::int64_t step = 0; step < n; ++step) {
    const std::int64_t i = upper ? n - 1 - step : step;
    // Row i: b_i - T[i, :] X, where the rows of X not yet solved are zero.
    Tensor r = b.select(-2, i);
    if (step > 0) r = r - sum(t.select(-2, i).unsqueeze(-1) * x, {-2});
    if (!unit) r = r / diag.narrow(-1, i, 1);
    x = x + eq(at, double(i)).to(t.dtype()) * r.unsqueeze(-2);
  }
  return x;
}

Elimination eliminate(Tensor u, Tensor b, const EliminationOptions& want) {
  const std::int64_t m = u.size(-2), n = u.size(-1), k = std::min(m, n);
  const Tensor at = positions(u, m, u.dtype());
  const Tensor rows = positions(u, m, DType::i64);
  const Tensor columns = want.multipliers ? positions(u, n, u.dtype()) : Tensor();
  const Shape batch = batch_of(u, 2);
  Tensor sign, l;
  std::vector<Tensor> pivots;
  if (want.sign) sign = ones(batch, {.dtype = u.dtype(), .device = u.device()});
  if (want.multipliers) l = zeros_like(u);
  for (std::int64_t j = 0; j < k; ++j) {
    Tensor p;  // the row swapped into row j ([..., 1]), where one is searched for
    if (want.pivot && j + 1 < m) {
      // The pivot: the largest |U[i, j]| for i >= j (the first of equals, as LAPACK's idamax),
      // swapped into row j; the multipliers already found move with their rows, as in getrf.
      p = (argmax(abs(u.select(-1, j).narrow(-1, j, m - j)), -1) + j).unsqueeze(-1);
      const Tensor order = where(eq(rows, double(j)), p, where(eq(rows, p), Scalar(j), rows));
      const Tensor index = order.unsqueeze(-1);
      u = gather_in_range(u, -2, index.expand(u.sizes()).contiguous());
      if (b.defined()) b = gather_in_range(b, -2, index.expand(b.sizes()).contiguous());
      if (l.defined()) l = gather_in_range(l, -2, index.expand(l.sizes()).contiguous());
      if (want.sign) sign = where(ne(p.squeeze(-1), double(j)), -sign, sign);
    }
    if (want.pivots) {
      Shape one = batch;
      one.push_back(1);
      pivots.push_back(
          p.defined() ? p : full(one, Scalar(j), {.dtype = DType::i64, .device = u.device()}));
    }
    if (j + 1 == m) break;  // no rows below
    // Rows below j lose their multiple of row j. A zero pivot (the column is zero from row j
    // down) takes nothing off them, as in LAPACK's getf2, and is kept out of the division so
    // that neither the value nor the gradient meets 0 / 0.
    const Tensor pivot = u.select(-2, j).narrow(-1, j, 1);
    const Tensor safe = where(eq(pivot, 0.0), Scalar(1.0), pivot);
    const Tensor factor = where(gt(at, double(j)), u.select(-1, j) / safe, Scalar(0.0));
    u = u - factor.unsqueeze(-1) * u.select(-2, j).unsqueeze(-2);
    if (b.defined()) b = b - factor.unsqueeze(-1) * b.select(-2, j).unsqueeze(-2);
    if (l.defined()) l = l + factor.unsqueeze(-1) * eq(columns, double(j)).to(u.dtype());
  }
  Tensor pivot_rows;
  if (want.pivots) {
    Shape none = batch;
    none.push_back(0);
    pivot_rows =
        pivots.empty() ? zeros(none, {.dtype = DType::i64, .device = u.device()}) : cat(pivots, -1);
  }
  return {u, b, sign, l, pivot_rows};
}

}  // namespace linalg_detail

namespace {

// solve_triangular by the device's kernel (the CPU: BLAS's trsm), A's and B's batch dims
// broadcast: B's expanded, A's too unless it is one matrix, which the kernel applies to each of
// B's (docs/kernel-contract.md, "solve_triangular").
Tensor fused_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left, bool unit) {
  const std::int64_t n = a.size(-1);
  const Shape batch = broadcast_shapes(batch_of(a, 2), batch_of(b, 2));
  Shape as = batch, bs = batch;
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {b.size(-2), b.size(-1)});
  const Tensor t = a.numel() == n * n ? a.reshape({n, n}).contiguous() : a.expand(as).contiguous();
  const Tensor rhs = b.expand(bs).contiguous();
  Tensor x = detail::new_tensor(bs, b.dtype(), detail::impl_of(rhs));
  detail::run_kernel(OpId::solve_triangular, {t, rhs}, {x},
                     {{"upper", upper}, {"left", left}, {"unitriangular", unit}});
  return x;
}

// Note [Blocked factorizations and solves]
// A solve_triangular kernel that substitutes (Vulkan's: a thread or a workgroup a column of B)
// walks the n rows of a column one after another: n dependent steps whatever the device's width.
// A cholesky or lu_factor_ex kernel that runs potf2 or getf2 (Vulkan's: one workgroup a matrix)
// takes n steps over one workgroup. Where the device's kernels do not block themselves
// (DeviceCapabilities::blocked_linalg; LAPACK's potrf and getrf and BLAS's trsm on the CPU do),
// the core cuts a matrix of more than kWholeMatrix rows and columns in halves, again and again
// down to leaves of at most kTriangleLeaf rows (a solve), kCholeskyLeaf (Cholesky) or kLUPanel
// columns (LU, in runtime/ops_lu.cpp), which the kernel takes:
//   T X = B, T lower: X1 = T11^-1 B1, then X2 = T22^-1 (B2 - T21 X1), the update a matmul
//   (upper: X2 first, then X1 = T11^-1 (B1 - T12 X2)); X A = B is solved as A^T X^T = B^T.
//   A = L L^T: L11 = chol(A11), L21 = A21 L11^-T (a blocked solve), L22 = chol(A22 - L21 L21^T).
//   P A = L U (m x n, halves of the k = min(m, n) first columns, Toledo's recursive LU): the
//   left half factored with its pivots P1, the right half swapped by them, U12 = L11^-1 A12 (a
//   blocked unit-lower solve), the Schur complement A22 - L21 U12 factored with its pivots P2,
//   which swap L21's rows too (blocked_lu_into).
// Only the triangle each op reads is read (T21 lies below the diagonal, T12 above it; A21 below),
// the unit diagonal goes to the leaves, a leading minor that is not positive-definite still
// leaves its order's diagonal entry NaN with the ones before it valid, and LU's pivots are the
// rows unblocked partial pivoting picks with info U's first zero pivot, so the core's checks
// name the same order. Most of the work becomes matmul, which every device runs at its best, and
// the dependent steps fall to the leaves'. On lavapipe (docs/vulkan.md), ferry-bench's
// solve_triangular [256, 256] against 256 columns took 81 ms whole and 42 in halves; cholesky
// [256, 256] takes 54 ms in halves (a throwaway timing of the whole kernel: 88), lu_factor
// [256, 256] 77 (the whole kernel 187 in a throwaway timing; at order 512, 1,527 against 333).
// Order 64 cut once was slower than whole (a solve against one column: 0.69 against 0.42 ms),
// hence no cut up to order 64; leaves of 32 rows served solves best, of 64 Cholesky (throwaway
// timings, orders 128 to 1024), and panels of 32 columns LU (16, 32 and 64 columns: 68, 72 and
// 77 ms at order 256; 341, 333 and 391 at 512; throwaway timings).
constexpr std::int64_t kWholeMatrix = 64, kTriangleLeaf = 32, kCholeskyLeaf = 64;

}  // namespace

bool linalg_detail::cut_in_blocks(const Tensor& a) {
  return std::min(a.size(-2), a.size(-1)) > kWholeMatrix &&
         !detail::impl_of(a).capabilities().blocked_linalg;
}

namespace {

// T X = B (T [..., n, n], B [..., n, c]) by halves (the Note) into x (X's shape, a view of one
// preallocated result, so that no level copies its halves together), the leaves by the kernel.
void blocked_solve_triangular_into(const Tensor& t, const Tensor& b, bool upper, bool unit,
                                   Tensor x) {
  const std::int64_t n = t.size(-1);
  if (n <= kTriangleLeaf) {
    x.copy_(fused_solve_triangular(t, b, upper, /*left=*/true, unit));
    return;
  }
  // The half solved first (lower: the leading one, upper: the trailing one) and the other, whose
  // right-hand side the first's solution updates through T's block between them.
  const std::int64_t h = n / 2;
  const std::int64_t first = upper ? h : 0, first_n = upper ? n - h : h;
  const std::int64_t second = upper ? 0 : h, second_n = n - first_n;
  const auto block = [&t](std::int64_t row, std::int64_t rows, std::int64_t col,
                          std::int64_t cols) {
    return t.narrow(-2, row, rows).narrow(-1, col, cols);
  };
  const Tensor x_first = x.narrow(-2, first, first_n);
  blocked_solve_triangular_into(block(first, first_n, first, first_n), b.narrow(-2, first, first_n),
                                upper, unit, x_first);
  const Tensor b_second =
      b.narrow(-2, second, second_n) - matmul(block(second, second_n, first, first_n), x_first);
  blocked_solve_triangular_into(block(second, second_n, second, second_n), b_second, upper, unit,
                                x.narrow(-2, second, second_n));
}

Tensor blocked_solve_triangular(const Tensor& t, const Tensor& b, bool upper, bool unit) {
  Shape bs = broadcast_shapes(batch_of(t, 2), batch_of(b, 2));
  bs.insert(bs.end(), {b.size(-2), b.size(-1)});
  const Tensor x = detail::new_tensor(bs, b.dtype(), detail::impl_of(b));
  blocked_solve_triangular_into(t, b.expand(bs), upper, unit, x);
  return x;
}

}  // namespace

Tensor linalg_detail::kernel_solve_triangular(const Tensor& t, const Tensor& b, bool upper,
                                              bool left, bool unit) {
  if (!cut_in_blocks(t)) return fused_solve_triangular(t, b, upper, left, unit);
  if (left) return blocked_solve_triangular(t, b, upper, unit);
  return blocked_solve_triangular(t.transpose(-2, -1), b.transpose(-2, -1), !upper, unit)
      .transpose(-2, -1);
}

namespace {

Tensor fused_cholesky(const Tensor& a) {
  const Tensor in = a.contiguous();
  Tensor out = detail::new_tensor(in.sizes(), in.dtype(), detail::impl_of(in));
  detail::run_kernel(OpId::cholesky, {in}, {out});
  return out;
}

// L with A = L L^T, A's lower triangle read, by halves (the Note) into l (A's shape, a view of
// one result whose upper triangle is zero), the leaves by the kernel.
void blocked_cholesky_into(const Tensor& a, Tensor l) {
  const std::int64_t n = a.size(-1);
  if (n <= kCholeskyLeaf) {
    l.copy_(fused_cholesky(a));
    return;
  }
  const std::int64_t h = n / 2, r = n - h;
  const Tensor l11 = l.narrow(-2, 0, h).narrow(-1, 0, h);
  blocked_cholesky_into(a.narrow(-2, 0, h).narrow(-1, 0, h), l11);
  Tensor l21 = l.narrow(-2, h, r).narrow(-1, 0, h);
  l21.copy_(kernel_solve_triangular(l11, a.narrow(-2, h, r).narrow(-1, 0, h).transpose(-2, -1),
                                    /*upper=*/false, /*left=*/true, /*unit=*/false)
                .transpose(-2, -1));
  blocked_cholesky_into(a.narrow(-2, h, r).narrow(-1, h, r) - matmul(l21, l21.transpose(-2, -1)),
                        l.narrow(-2, h, r).narrow(-1, h, r));
}

Tensor blocked_cholesky(const Tensor& a) {
  const Tensor l = zeros(a.sizes(), {.dtype = a.dtype(), .device = a.device()});
  blocked_cholesky_into(a, l);
  return l;
}

// A LinAlgError where a pivot of U is exactly zero (LAPACK's getrf reports the same).
void check_pivots(const char* op, const Tensor& a, const Tensor& u, bool name_element) {
  const auto bad = first_bad(eq(diagonal(u, 0, -2, -1), 0.0));
  if (!bad) return;
  if (name_element)
    throw LinAlgError(
        fmt::format("linalg.{}: {}The diagonal element {} is zero, the inversion "
                    "could not be completed because the input matrix is singular.",
                    op, batch_prefix(a, bad->first), bad->second + 1));
  throw LinAlgError(
      fmt::format("torch.linalg.{}: {}The solver failed because the input matrix "
                  "is singular.",
                  op, batch_prefix(a, bad->first)));
}

// X with A X = B (A [..., n, n], B [..., n, k], same dtype, computing): B's rows eliminated
// with A's, then back substitution.
Tensor solve_by_elimination(const char* op, const Tensor& a, const Tensor& b, bool name_element) {
  const Shape batch = broadcast_shapes(batch_of(a, 2), batch_of(b, 2));  // ShapeError first
  if (a.numel() > 0 && detail::use_fused_kernel(OpId::lu_factor_ex, a, a.dtype()) &&
      detail::use_fused_kernel(OpId::solve_triangular, a, a.dtype())) {
    // getrf and two trsm on the CPU, with or without a gradient (both record closed forms).
    const linalg::LUFactorization f = linalg::lu_factor_ex(a);
    check_pivots(op, a, f.LU, name_element);
    return linalg_detail::lu_solve_factored(f.LU, f.pivots, b);
  }
  const std::int64_t n = a.size(-1);
  Shape as = batch, bs = batch;
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {n, b.size(-1)});
  const Elimination e = eliminate(a.expand(as), b.expand(bs), {});
  check_pivots(op, a, e.u, name_element);
  // Back substitution by the device's kernel where it has one (Vulkan), else the steps.
  return linalg::solve_triangular(e.u, e.b, /*upper=*/true);
}

}  // namespace

namespace linalg {

Tensor cholesky(const Tensor& a, bool upper) {
  check_defined("cholesky", {&a});
  check_dtype(OpId::cholesky, a);
  check_square("cholesky", "A", a);
  const Tensor af = computing(upper ? a.transpose(-2, -1) : a);
  // LAPACK's potrf on the CPU (Note [LAPACK through OpenBLAS]), a device's kernel (in blocks above
  // order 64: Note [Blocked factorizations and solves]), or the steps; either way untracked, the
  // gradient recorded in closed form below.
  const Tensor l = autograd::untracked([&] {
    if (af.numel() == 0 || !detail::use_fused_kernel(OpId::cholesky, af, af.dtype()))
      return cholesky_lower(tril(af));
    if (cut_in_blocks(af) && detail::use_fused_kernel(OpId::solve_triangular, af, af.dtype()))
      return blocked_cholesky(af);
    return fused_cholesky(af);
  });
  // A leading minor that is not positive-definite makes its diagonal entry NaN (sqrt of a
  // negative, or the kernel's mark) or not positive, and every column after it NaN.
  const Tensor d = diagonal(l, 0, -2, -1);
  if (const auto bad = first_bad(logical_not(gt(d, 0.0))))
    throw LinAlgError(
        fmt::format("linalg.cholesky: {}The factorization could not be completed "
                    "because the input is not positive-definite (the leading minor "
                    "of order {} is not positive-definite).",
                    batch_prefix(a, bad->first), bad->second + 1));
  autograd::record_cholesky(af, l);
  return (upper ? l.transpose(-2, -1) : l).to(a.dtype());
}

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                        bool unitriangular) {
  check_defined("solve_triangular", {&a, &b});
  check_dtype(OpId::solve_triangular, a);
  check_dtype(OpId::solve_triangular, b);
  check_same_dtype("solve_triangular", a, b);
  check_square("solve_triangular", "A", a);
  check_matrix("solve_triangular", "B", b);
  const std::int64_t n = a.size(-1);
  const std::int64_t along = left ? b.size(-2) : b.size(-1);
  if (along != n)
    throw ShapeError(
        fmt::format("linalg.solve_triangular: Incompatible shapes of A and B for the "
                    "equation {} ({}x{} and {}x{})",
                    left ? "AX = B" : "XA = B", n, n, b.size(-2), b.size(-1)));
  const Tensor af = computing(a), bf = computing(b);
  const Tensor x = autograd::untracked([&] {
    if (bf.numel() > 0 && detail::use_fused_kernel(OpId::solve_triangular, af, af.dtype()))
      return kernel_solve_triangular(af, bf, upper, left, unitriangular);
    const Tensor t = triangle(af, upper, unitriangular);
    // X A = B is A^T X^T = B^T, with the triangle flipped.
    return left ? substitute(t, bf, upper, unitriangular)
                : substitute(t.transpose(-2, -1), bf.transpose(-2, -1), !upper, unitriangular)
                      .transpose(-2, -1);
  });
  autograd::record_solve_triangular(af, bf, upper, left, unitriangular, x);
  return x.to(a.dtype());
}

Tensor solve(const Tensor& a, const Tensor& b, bool left) {
  check_defined("solve", {&a, &b});
  check_dtype(OpId::solve, a);
  check_dtype(OpId::solve, b);
  check_same_dtype("solve", a, b);
  check_square("solve", "A", a);
  const std::int64_t n = a.size(-1);
  // PyTorch's rule: B is a vector when it has one dim, or A's batch dims and n.
  const bool vector = b.dim() == 1 || (b.dim() == a.dim() - 1 && b.sizes() == batch_of(a, 1));
  if (!vector && b.dim() < 2)
    throw ShapeError("linalg.solve: The input tensor B must have at least 1 dimensions.");
  const Tensor bm = vector ? b.unsqueeze(-1) : b;
  const std::int64_t along = left || vector ? bm.size(-2) : bm.size(-1);
  if (along != n)
    throw ShapeError(
        fmt::format("linalg.solve: Incompatible shapes of A and B for the equation "
                    "{} ({}x{} and {}x{})",
                    left || vector ? "AX = B" : "XA = B", n, n, bm.size(-2), bm.size(-1)));
  const Tensor af = computing(a), bf = computing(bm);
  Tensor x;
  if (left || vector) {
    x = solve_by_elimination("solve", af, bf, false);
  } else {
    x = solve_by_elimination("solve", af.transpose(-2, -1), bf.transpose(-2, -1), false)
            .transpose(-2, -1);
  }
  return (vector ? x.squeeze(-1) : x).to(a.dtype());
}

Tensor inv(const Tensor& a) {
  check_defined("inv", {&a});
  check_dtype(OpId::inv, a);
  check_square("inv", "A", a);
  const Tensor af = computing(a);
  const Tensor identity =
      eye(a.size(-1), std::nullopt, {.dtype = af.dtype(), .device = a.device()});
  return solve_by_elimination("inv", af, identity, true).to(a.dtype());
}

}  // namespace linalg

namespace {

// det's and slogdet's A = P L U: the sign of its row permutation ([...]), U's diagonal
// ([..., n]), and lu_factor_ex's factors where a gradient is recorded. Those take lu_factor_ex
// (the device's getrf, or its composition) run untracked, for the closed-form gradient
// (formulas_linalg.cpp). Without a gradient: the device's fused getrf where it has one, else
// the elimination, which skips the pivots' bookkeeping. An empty A differentiates through the
// elimination's parts.
struct DetFactors {
  Tensor sign;
  Tensor diagonal;
  linalg::LUFactorization lu;
};

DetFactors det_factors(const Tensor& af) {
  const bool recorded = af.numel() > 0 && autograd::should_record({&af});
  if (recorded ||
      (af.numel() > 0 && detail::use_fused_kernel(OpId::lu_factor_ex, af, af.dtype()))) {
    NoGradGuard untracked;
    linalg::LUFactorization f = linalg::lu_factor_ex(af);
    const Tensor unswapped = positions(af, af.size(-1), DType::i32) + 1;
    const Tensor flips = ne(f.pivots, unswapped).to(af.dtype());
    DetFactors out{prod(1.0 - flips * 2.0, {-1}), diagonal(f.LU, 0, -2, -1), {}};
    if (recorded) out.lu = std::move(f);
    return out;
  }
  const Elimination e = eliminate(af, Tensor(), {.sign = true});
  return {e.sign, diagonal(e.u, 0, -2, -1), {}};
}

}  // namespace

namespace linalg {

std::pair<Tensor, Tensor> slogdet(const Tensor& a) {
  check_defined("slogdet", {&a});
  check_dtype(OpId::slogdet, a);
  check_square("slogdet", "A", a);
  const Tensor af = computing(a);
  const DetFactors f = det_factors(af);
  const Tensor sign = f.sign * prod(ferry::sign(f.diagonal), {-1});
  const Tensor logabsdet = sum(log(abs(f.diagonal)), {-1});
  if (f.lu.LU.defined()) autograd::record_slogdet(af, f.lu.LU, f.lu.pivots, logabsdet);
  return {sign.to(a.dtype()), logabsdet.to(a.dtype())};
}

Tensor det(const Tensor& a) {
  check_defined("det", {&a});
  check_dtype(OpId::det, a);
  check_square("det", "A", a);
  const Tensor af = computing(a);
  const DetFactors f = det_factors(af);
  const Tensor d = f.sign * prod(f.diagonal, {-1});
  if (f.lu.LU.defined()) autograd::record_det(af, f.lu.LU, f.lu.pivots, f.sign, d);
  return d.to(a.dtype());
}

}  // namespace linalg

Tensor logdet(const Tensor& a) {
  check_defined("logdet", {&a});
  check_dtype(OpId::logdet, a);
  check_square("logdet", "A", a);
  const auto [sign, logabsdet] = linalg::slogdet(a);
  return where(lt(sign, 0.0), Scalar(std::numeric_limits<double>::quiet_NaN()), logabsdet);
}

Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper) {
  check_defined("cholesky_solve", {&b, &l});
  check_dtype(OpId::cholesky_solve, b);
  check_dtype(OpId::cholesky_solve, l);
  if (b.dtype() != l.dtype())
    throw DTypeError(
        fmt::format("cholesky_solve: Expected b and A to have the same dtype, but "
                    "found b of type {} and A of type {} instead.",
                    dtype_name(b.dtype()), dtype_name(l.dtype())));
  if (b.dim() < 2 || l.dim() < 2)
    throw ShapeError(
        fmt::format("cholesky_solve: b should have at least 2 dimensions, but has {} "
                    "dimensions instead; A should have at least 2, but has {}",
                    b.dim(), l.dim()));
  check_square("cholesky_solve", "A", l);
  if (b.size(-2) != l.size(-1))
    throw ShapeError(
        fmt::format("cholesky_solve: Incompatible matrix sizes for cholesky_solve: "
                    "each A matrix is {} by {} but each b matrix is {} by {}",
                    l.size(-2), l.size(-1), b.size(-2), b.size(-1)));
  const Tensor lower = computing(upper ? l.transpose(-2, -1) : l);
  // A = L L^T: L Y = B, then L^T X = Y (trsm on the CPU).
  const Tensor y = linalg::solve_triangular(lower, computing(b), false);
  return linalg::solve_triangular(lower.transpose(-2, -1), y, true).to(b.dtype());
}

}  // namespace ferry
