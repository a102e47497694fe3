// runtime/ops_lu.cpp — torch.linalg's LU family (ferry/ops_linalg.hpp): lu_factor_ex, lu_factor,
// lu, lu_solve and torch.lu_unpack, composed as the other factorizations are (Note [Linear algebra
// as compositions] in runtime/ops_factorize.cpp) from the elimination solve and det use.
//
// Note [LU's pivots as a permutation]
// LAPACK's pivots are a sequence of swaps: at step i, row i and row pivots[i] - 1 traded places.
// Each matrix of a batch has its own, so they are turned into a permutation on the device: perm
// starts as 0..m-1 and each step gathers it by the swap's order (the same where-and-gather that
// eliminate's row swaps are), min(m, n) steps of four ops. That composition is the op table's
// lu_pivots_to_permutation, which a device may fuse (the CPU does: a loop of swaps per matrix,
// where the steps cost a solve of 4,096 4 x 4 systems two thirds of its time; so does Vulkan, an
// invocation per matrix, where they cost a dispatch each). Row i of P^T A is
// then row perm[i] of A (P^T A = L U), and P itself is the one-hot matrix P[perm[i], i] = 1.
// Nothing is read back but the range check of pivots a caller passes in, which PyTorch makes too
// (pivots out of range would otherwise make gather read out of bounds). The runtime's own callers
// (solve, det's and slogdet's gradients) pass lu_factor_ex's pivots, in range by construction,
// through linalg_detail::lu_solve_factored, which skips it, and LU's own gradient applies P
// through linalg_detail::lu_permute_rows, a gather where the dense P would be a product: a
// gradient then never waits for the device, and solve reads back once (its singularity check),
// not twice.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/formulas.hpp"
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
using linalg_detail::eliminate;
using linalg_detail::positions;

// The permutation ([..., m] i64) that 0-based pivots ([..., k] i64, in range) make of m rows
// (the Note): one kernel call where the device has lu_pivots_to_permutation's (CPU, Vulkan), else
// the steps.
Tensor permutation(const Tensor& pivots, std::int64_t m) {
  if (pivots.numel() > 0 &&
      detail::use_fused_kernel(OpId::lu_pivots_to_permutation, pivots, pivots.dtype())) {
    const Tensor in = pivots.contiguous();
    Shape shape = batch_of(pivots, 1);
    shape.push_back(m);
    Tensor out = detail::new_tensor(shape, DType::i64, detail::impl_of(in));
    detail::run_kernel(OpId::lu_pivots_to_permutation, {in}, {out}, Attrs{{"rows", m}});
    return out;
  }
  const Tensor rows = positions(pivots, m, DType::i64);
  Shape shape = batch_of(pivots, 1);
  shape.push_back(m);
  Tensor perm = rows.expand(shape).contiguous();
  for (std::int64_t i = 0; i < pivots.size(-1); ++i) {
    const Tensor p = pivots.narrow(-1, i, 1);
    const Tensor order = where(eq(rows, double(i)), p, where(eq(rows, p), Scalar(i), rows));
    perm = gather_in_range(perm, -1, order);
  }
  return perm;
}

// The permutation of m rows that pivots this runtime's lu_factor_ex made (int32, 1-based, in
// range by construction) stand for: no range check.
Tensor factored_permutation(const Tensor& pivots, std::int64_t m) {
  return permutation(pivots.to(DType::i64) - 1, m);
}

// Caller's pivots: int32, [batch..., k], each in 1..m; returned 0-based, i64. PyTorch's messages.
Tensor checked_pivots(const char* op, const Tensor& pivots, const Shape& batch, std::int64_t k,
                      std::int64_t m) {
  if (pivots.dtype() != DType::i32)
    throw DTypeError(fmt::format("{}: pivots should be a Tensor of scalar type torch.int32, not {}",
                                 op, dtype_name(pivots.dtype())));
  Shape want = batch;
  want.push_back(k);
  if (pivots.sizes() != want)
    throw ShapeError(
        fmt::format("{}: Expected pivots of shape {} (the factorization's batch dims "
                    "and min(m, n)), but got pivots with shape {} instead",
                    op, shape_str(want), shape_str(pivots.sizes())));
  const Tensor p = pivots.to(DType::i64);
  if (p.numel() > 0) {
    const std::vector<std::int64_t> range = stack({amin(p), amax(p)}).to_vector<std::int64_t>();
    const std::int64_t lo = range[0], hi = range[1];  // one read back
    if (lo < 1 || hi > m)
      throw ValueError(
          fmt::format("{}: pivots must all be between 1 and LU.size(-2) = {} "
                      "inclusive, but one is {}. Did you properly pass the result "
                      "of lu_factor?",
                      op, m, lo < 1 ? lo : hi));
  }
  return p - 1;
}

// Rows of x ([..., r, c]) in perm's order ([..., r] i64): row i of the result is x's perm[i].
Tensor rows_in_order(const Tensor& perm, const Tensor& x) {
  return gather_in_range(x, -2, perm.unsqueeze(-1).expand(x.sizes()).contiguous());
}

// P X for P's permutation perm ([..., m] i64, the Note) and X [..., m, c] of the same batch
// shape: P puts X's row i at row perm[i], so row r of P X is X's row inverse[r], one gather by the
// inverse permutation (argsort of perm) where a product with the dense P would cost m^2 c.
Tensor permute_rows(const Tensor& perm, const Tensor& x) {
  return rows_in_order(argsort(perm, -1), x);
}

// P from a permutation: P[perm[i], i] = 1, so that A = P L U.
Tensor permutation_matrix(const Tensor& perm, std::int64_t m, DType dtype) {
  const Tensor rows = positions(perm, m, DType::i64).unsqueeze(-1);
  return eq(perm.unsqueeze(-2), rows).to(dtype);
}

// L [..., m, k] and U [..., k, n] from the packed LU.
std::pair<Tensor, Tensor> unpack_data(const Tensor& lu) {
  const std::int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
  const Tensor l =
      tril(lu, -1).narrow(-1, 0, k) + eye(m, k, {.dtype = lu.dtype(), .device = lu.device()});
  return {l, triu(lu.narrow(-2, 0, k))};
}

// X with A X = B (left) or X A = B, or with A's adjoint, for A = P L U packed in lu ([..., n, n])
// and P's permutation perm ([..., n] i64, the Note); lu and b of one dtype, their shapes checked.
Tensor solve_permuted(const Tensor& lu, const Tensor& perm, const Tensor& b, bool left,
                      bool adjoint) {
  const std::int64_t n = lu.size(-1);
  const Tensor luf = computing(lu);
  // X A = B is A^T X^T = B^T: the left solve of the other adjointness, on B^T.
  const bool transposed = left ? adjoint : !adjoint;
  const Tensor bl = computing(left ? b : b.transpose(-2, -1));
  Shape batch = broadcast_shapes(batch_of(lu, 2), batch_of(bl, 2));
  Shape bs = batch;  // B's shape and the row indices' alike
  bs.insert(bs.end(), {n, bl.size(-1)});
  // The triangular solves read LU's triangles (L's diagonal taken as ones), through the
  // device's fused kernel where it has one (the CPU's trsm, Vulkan's shader).
  const auto solve = [](const Tensor& t, const Tensor& rhs, bool upper, bool unit) {
    return linalg::solve_triangular(t, rhs, upper, /*left=*/true, unit);
  };
  Tensor x;
  if (!transposed) {
    // A = P L U: X = U^-1 L^-1 P^T B, P^T B being B's rows in perm's order.
    const Tensor permuted = rows_in_order(perm, bl.expand(bs));
    x = solve(luf, solve(luf, permuted, false, true), true, false);
  } else {
    // A^T = U^T L^T P^T: X = P L^-T U^-T B, P W putting W's row i at row perm[i].
    const Tensor lut = luf.transpose(-2, -1);
    const Tensor w = solve(lut, solve(lut, bl, false, false), true, true);
    x = permute_rows(perm, w.expand(bs));
  }
  return (left ? x : x.transpose(-2, -1)).to(b.dtype());
}

// LAPACK's info from U (the upper triangle of u, [..., m, n]): its first exact zero pivot,
// 1-based, or 0 where there is none (argmax takes the first of equals).
Tensor zero_pivot_info(const Tensor& u) {
  const Tensor zero = eq(diagonal(u, 0, -2, -1), 0.0).to(DType::i32);
  if (zero.size(-1) == 0) return zeros(batch_of(u, 2), {.dtype = DType::i32, .device = u.device()});
  return ((argmax(zero, -1) + 1) * amax(zero, {-1}).to(DType::i64)).to(DType::i32);
}

// lu_factor_ex's three results from the device's kernel, on a ([..., m, n], computing dtype).
linalg::LUFactorization fused_lu(const Tensor& a) {
  const Tensor in = a.contiguous();
  Shape pivots = batch_of(a, 2);
  pivots.push_back(std::min(a.size(-2), a.size(-1)));
  DeviceImpl& impl = detail::impl_of(in);
  linalg::LUFactorization f{detail::new_tensor(in.sizes(), in.dtype(), impl),
                            detail::new_tensor(pivots, DType::i32, impl),
                            detail::new_tensor(batch_of(a, 2), DType::i32, impl)};
  detail::run_kernel(OpId::lu_factor_ex, {in}, {f.LU, f.pivots, f.info});
  return f;
}

// P A = L U by halves of the columns (Note [Blocked factorizations and solves] in
// runtime/ops_factorize.cpp) into lu (a's shape, a view of one result); returns the pivots. The
// right half's pivots are moved down h rows after the left's: LAPACK's getrf form (a sequence of
// swaps). A zero pivot leaves its column's multipliers zero (getf2's rule, the kernel's too) and
// nothing divides by it, so the caller reads info off the whole U once.
constexpr std::int64_t kLUPanel = 32;  // the widest panel the kernel takes (the Note)

Tensor blocked_lu_into(const Tensor& a, Tensor lu) {
  const std::int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  if (k <= kLUPanel) {
    const linalg::LUFactorization f = fused_lu(a);
    lu.copy_(f.LU);
    return f.pivots;
  }
  const std::int64_t h = k / 2;
  const Tensor pivots1 = blocked_lu_into(a.narrow(-1, 0, h), lu.narrow(-1, 0, h));
  const Tensor right = rows_in_order(factored_permutation(pivots1, m), a.narrow(-1, h, n - h));
  Tensor u12 = lu.narrow(-2, 0, h).narrow(-1, h, n - h);
  u12.copy_(linalg_detail::kernel_solve_triangular(lu.narrow(-2, 0, h).narrow(-1, 0, h),
                                                   right.narrow(-2, 0, h), /*upper=*/false,
                                                   /*left=*/true, /*unit=*/true));
  Tensor l21 = lu.narrow(-2, h, m - h).narrow(-1, 0, h);
  const Tensor pivots2 = blocked_lu_into(right.narrow(-2, h, m - h) - matmul(l21, u12),
                                         lu.narrow(-2, h, m - h).narrow(-1, h, n - h));
  l21.copy_(rows_in_order(factored_permutation(pivots2, m - h), l21));
  return cat({pivots1, pivots2 + Scalar(h)}, -1).to(DType::i32);
}

// lu_factor_ex's results in the computing dtype, and U's diagonal's zeros as info.
// Untracked: the caller records LU's gradient in closed form.
linalg::LUFactorization factor_untracked(const Tensor& a, bool pivot) {
  if (pivot && a.numel() > 0 && detail::use_fused_kernel(OpId::lu_factor_ex, a, a.dtype())) {
    // LAPACK's getrf on the CPU (Note [LAPACK through OpenBLAS]), shaders/lu_factor.comp on
    // Vulkan, in blocks above order 64 there (blocked_lu_into) where it has the triangular solve.
    if (linalg_detail::cut_in_blocks(a) &&
        detail::use_fused_kernel(OpId::solve_triangular, a, a.dtype())) {
      linalg::LUFactorization f;
      f.LU = detail::new_tensor(a.sizes(), a.dtype(), detail::impl_of(a));
      f.pivots = blocked_lu_into(a, f.LU);
      f.info = zero_pivot_info(f.LU);
      return f;
    }
    return fused_lu(a);
  }
  const linalg_detail::Elimination e =
      eliminate(a, Tensor(), {.multipliers = true, .pivots = true, .pivot = pivot});
  return {triu(e.u) + e.multipliers, (e.pivots + 1).to(DType::i32), zero_pivot_info(e.u)};
}

linalg::LUFactorization factor(const Tensor& a, bool pivot) {
  linalg::LUFactorization f;
  {
    NoGradGuard untracked;
    f = factor_untracked(a, pivot);
  }
  autograd::record_lu_factor(a, f.LU, f.pivots);
  return f;
}

}  // namespace

namespace linalg {

LUFactorization lu_factor_ex(const Tensor& a, bool pivot) {
  check_defined("lu_factor_ex", {&a});
  check_dtype(OpId::lu_factor_ex, a);
  check_matrix("lu_factor_ex", "A", a);
  LUFactorization f = factor(computing(a), pivot);
  f.LU = f.LU.to(a.dtype());
  return f;
}

std::pair<Tensor, Tensor> lu_factor(const Tensor& a, bool pivot) {
  check_defined("lu_factor", {&a});
  check_dtype(OpId::lu_factor, a);
  check_matrix("lu_factor", "A", a);
  const LUFactorization f = factor(computing(a), pivot);
  if (f.info.numel() > 0 && amax(f.info).item<std::int32_t>() > 0) {
    const std::vector<std::int32_t> info = f.info.reshape({-1}).to_vector<std::int32_t>();
    const auto bad = std::find_if(info.begin(), info.end(), [](std::int32_t i) { return i > 0; });
    throw LinAlgError(fmt::format(
        "torch.linalg.lu_factor: {}U[{},{}] is zero and using it on lu_solve would result in a "
        "division by zero. If you still want to perform the factorization, consider calling "
        "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)",
        batch_prefix(a, bad - info.begin()), *bad, *bad));
  }
  return {f.LU.to(a.dtype()), f.pivots};
}

PLU lu(const Tensor& a, bool pivot) {
  check_defined("lu", {&a});
  check_dtype(OpId::lu, a);
  check_matrix("lu", "A", a);
  const Tensor af = computing(a);
  const LUFactorization f = factor(af, pivot);
  const auto [l, u] = unpack_data(f.LU);
  const Tensor p = pivot ? permutation_matrix(factored_permutation(f.pivots, a.size(-2)),
                                              a.size(-2), a.dtype())
                         : empty({0}, {.dtype = a.dtype(), .device = a.device()});
  return {p, l.to(a.dtype()), u.to(a.dtype())};
}

Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left, bool adjoint) {
  const char* op = "linalg.lu_solve";
  check_defined("lu_solve", {&lu, &pivots, &b});
  check_dtype(OpId::lu_solve, lu);
  check_dtype(OpId::lu_solve, b);
  check_square("lu_solve", "LU", lu);
  if (b.dim() < 2)
    throw ShapeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.");
  if (lu.dtype() != b.dtype())
    throw DTypeError(
        fmt::format("linalg.lu_solve: Expected LU and B to have the same dtype, but "
                    "found LU of type {} and B of type {} instead",
                    dtype_name(lu.dtype()), dtype_name(b.dtype())));
  const std::int64_t n = lu.size(-1);
  if ((left ? b.size(-2) : b.size(-1)) != n)
    throw ShapeError(
        fmt::format("linalg.lu_solve: Incompatible shapes of A and B for the equation "
                    "{} ({}x{} and {}x{})",
                    left ? "AX = B" : "XA = B", n, n, b.size(-2), b.size(-1)));
  return solve_permuted(lu, permutation(checked_pivots(op, pivots, batch_of(lu, 2), n, n), n), b,
                        left, adjoint);
}

}  // namespace linalg

Tensor linalg_detail::lu_solve_factored(const Tensor& lu, const Tensor& pivots, const Tensor& b,
                                        bool left, bool adjoint) {
  return solve_permuted(lu, factored_permutation(pivots, lu.size(-1)), b, left, adjoint);
}

Tensor linalg_detail::lu_permute_rows(const Tensor& pivots, const Tensor& x) {
  return permute_rows(factored_permutation(pivots, x.size(-2)), x);
}

linalg::PLU lu_unpack(const Tensor& lu, const Tensor& pivots, bool unpack_data_,
                      bool unpack_pivots) {
  check_defined("lu_unpack", {&lu, &pivots});
  check_dtype(OpId::lu_unpack, lu);
  if (lu.dim() < 2) throw ShapeError("torch.lu_unpack: LU_data must have at least 2 dimensions.");
  const std::int64_t m = lu.size(-2), k = std::min(m, lu.size(-1));
  const Tensor none = empty({0}, {.dtype = lu.dtype(), .device = lu.device()});
  linalg::PLU out{none, none, none};
  if (unpack_pivots) {
    const Tensor p = checked_pivots("torch.lu_unpack", pivots, batch_of(lu, 2), k, m);
    out.P = permutation_matrix(permutation(p, m), m, lu.dtype());
  }
  if (unpack_data_) std::tie(out.L, out.U) = unpack_data(lu);
  return out;
}

}  // namespace ferry
