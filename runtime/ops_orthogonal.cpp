// runtime/ops_orthogonal.cpp — the orthogonal factorizations of ferry/ops_linalg.hpp, composed
// as the others are (Note [Linear algebra as compositions] in runtime/ops_factorize.cpp): QR by
// Householder reflections, and the symmetric eigendecomposition by Jacobi rotations.
//
// Note [QR by Householder reflections]
// Column j's reflection H = I - tau v v^T (v_j = 1) zeroes R's column j below the diagonal; Q is
// the product of the reflections, accumulated from the identity. The reflection is LAPACK's
// (dlarfg): beta = -sign(a_jj) |column from j| with sign(0) = +1, and none at all (tau = 0) where
// the column is already zero below the diagonal, so that R's diagonal has geqrf's signs and Q
// and R are PyTorch's to rounding, not merely a QR. Each step is a product of R and of Q with v
// (multiplies and sums), and two rank-one updates. On the CPU LAPACK's geqrf and orgqr compute
// the same reflections (Note [LAPACK through OpenBLAS]). Either runs untracked where a gradient
// is recorded, and the gradient is PyTorch's closed form (formulas_linalg.cpp), which the
// steps' gradient agrees with to rounding for A of full rank (1e-14 in f64): except where a
// column is exactly zero below the diagonal (A triangular there), whose zeros the skipped
// reflection passes no gradient while the closed form gives them PyTorch's. "complete" with
// m > n, whose gradient PyTorch refuses, differentiates through the steps.
//
// Note [Symmetric eigendecomposition by Jacobi rotations]
// A rotation in the plane (p, q) zeroes A's entry (p, q); a sweep rotates every pair once, and
// sweeps repeat until the off-diagonal part is below (n eps)^2 |A|^2 in every matrix of the batch
// (the diagonal is then the eigenvalues, the accumulated rotations the eigenvectors, each to a
// few eps: Demmel and Veselic). The pairs of a sweep are grouped into n - 1 rounds of disjoint
// pairs (a round-robin tournament), and a round's n / 2 rotations are applied at once: the new
// column p is c col_p - s col_q, so A J is A scaled by c plus A with its columns permuted
// (gather by each index's partner) scaled by +-s, element-wise, and likewise for the rows; so a
// round is some thirty batched ops over [..., n, n] whatever n is, and a sweep n - 1 rounds.
// Generic matrices took 3 to 8 sweeps (n = 2 to 64, f32 and f64). The partner's entry a_pq is
// read as the mean of (p, q) and (q, p), and set to zero after the rotation, so rounding cannot
// make A unsymmetric and the rotations stop being orthogonal. One host read per sweep (the
// convergence check). The rotations run without gradient; the gradient is recorded after, in
// closed form (autograd::record_eigh, formulas_linalg.cpp). So a device with a fused eigh kernel
// (the CPU: LAPACK's syevd, Note [LAPACK through OpenBLAS]) takes the rotations' place in every
// call, a gradient recorded or not (fused_eigh).
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "dtype_limits.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "linalg_internal.hpp"
#include "ops_internal.hpp"

namespace ferry {

namespace linalg_detail {

std::vector<std::vector<std::int64_t>> rounds_of(std::int64_t n) {
  const std::int64_t m = n + n % 2;
  std::vector<std::int64_t> seat(std::size_t(m), 0);
  for (std::int64_t i = 0; i < m; ++i) seat[std::size_t(i)] = i;
  std::vector<std::vector<std::int64_t>> rounds;
  for (std::int64_t r = 0; r + 1 < m; ++r) {
    std::vector<std::int64_t> partner(std::size_t(n), 0);
    for (std::int64_t i = 0; i < n; ++i) partner[std::size_t(i)] = i;
    for (std::int64_t k = 0; k < m / 2; ++k) {
      const std::int64_t p = seat[std::size_t(k)], q = seat[std::size_t(m - 1 - k)];
      if (p < n && q < n) partner[std::size_t(p)] = q, partner[std::size_t(q)] = p;
    }
    rounds.push_back(partner);
    // Seat 0 stays; the others move one seat round.
    const std::int64_t last = seat.back();
    for (std::int64_t i = m - 1; i > 1; --i) seat[std::size_t(i)] = seat[std::size_t(i - 1)];
    seat[1] = last;
  }
  return rounds;
}

}  // namespace linalg_detail

namespace {

using detail::check_defined;
using detail::check_dtype;
using detail::gather_in_range;
using linalg_detail::batch_of;
using linalg_detail::check_matrix;
using linalg_detail::check_square;
using linalg_detail::computing;
using linalg_detail::kMaxSweeps;
using linalg_detail::positions;
using linalg_detail::rounds_of;

// A round's indices, made once per call and reused by every sweep.
struct Round {
  Tensor columns;     // [..., n, n]: (i, j) -> partner_j, gathering A's columns
  Tensor rows;        // [..., n, n]: (i, j) -> partner_i, gathering A's rows
  Tensor entry;       // [..., n, 1]: (i, 0) -> partner_i, A[i, partner_i]
  Tensor entry_t;     // [..., 1, n]: (0, j) -> partner_j, A[partner_j, j]
  Tensor first;       // [n] bool: i < partner_i (i is the pair's p)
  Tensor paired;      // [n] bool: i has a partner this round
  Tensor pair_entry;  // [n, n] bool: j == partner_i != i, the entries a round zeroes
};

struct Eigen {
  Tensor values, vectors;  // ascending; the vectors as columns, in the values' order
};

// LAPACK's failure, as PyTorch reports it; non_finite: because A holds a NaN or an inf.
LinAlgError not_converged(const char* op, bool non_finite) {
  return LinAlgError(
      fmt::format("linalg.{}: The algorithm failed to converge because the input matrix is "
                  "ill-conditioned or has too many repeated eigenvalues{}.",
                  op, non_finite ? " (it holds a NaN or an infinity)" : ""));
}

// The eigendecomposition of s ([..., n, n], symmetric, computing dtype, no gradient).

Eigen jacobi(const char* op, const Tensor& s) {
  const std::int64_t n = s.size(-1);
  const TensorOptions like{.dtype = s.dtype(), .device = s.device()};
  // Each matrix divided by its largest |entry| (the eigenvalues scaled back at the end), so that
  // the squares summed below cannot overflow, nor underflow, where A's entries are large or tiny.
  Shape scale_shape = batch_of(s, 2);
  scale_shape.insert(scale_shape.end(), {1, 1});
  Tensor scale = ones(scale_shape, like);
  if (s.numel() > 0) {
    scale = amax(abs(s), {-2, -1}, true);
    scale = where(eq(scale, 0.0), Scalar(1.0), scale);
  }
  Tensor a = s / scale;
  Tensor v = eye(n, std::nullopt, like).expand(s.sizes()).contiguous();
  if (n > 1 && s.numel() > 0) {
    const Shape& shape = a.sizes();
    Shape column_shape = batch_of(a, 1), row_shape = batch_of(a, 2);
    column_shape.push_back(1);
    row_shape.push_back(1);
    row_shape.push_back(n);
    const Tensor idx = positions(s, n, DType::i64);
    std::vector<Round> rounds;
    for (const std::vector<std::int64_t>& partner : rounds_of(n)) {
      const Tensor p = tensor(partner, {n}, {.dtype = DType::i64}).to(s.device());
      const Tensor across = p.reshape({1, n}), down = p.reshape({n, 1});
      Round r;
      r.columns = across.expand(shape).contiguous();
      r.rows = down.expand(shape).contiguous();
      r.entry = down.expand(column_shape).contiguous();
      r.entry_t = across.expand(row_shape).contiguous();
      r.first = lt(idx, p);
      r.paired = ne(idx, p);
      r.pair_entry = logical_and(eq(idx.reshape({1, n}), down), r.paired.reshape({n, 1}));
      rounds.push_back(r);
    }
    const Tensor off_diagonal = 1.0 - eye(n, std::nullopt, like);
    const double eps = detail::machine_eps(s.dtype());
    const Tensor tolerance = sum(a * a, {-2, -1}) * ((double(n) * eps) * (double(n) * eps));
    for (int sweep = 0;; ++sweep) {
      const Tensor off = sum(a * a * off_diagonal, {-2, -1});
      // One read: whether every matrix has converged, and whether one holds a NaN or an inf.
      const std::vector<std::uint8_t> status =
          stack({all(le(off, tolerance)), any(logical_not(isfinite(off)))})
              .to(DType::u8)
              .to_vector<std::uint8_t>();
      if (status[0]) break;
      if (status[1] || sweep == kMaxSweeps) throw not_converged(op, status[1]);
      for (const Round& r : rounds) {
        const Tensor d = diagonal(a, 0, -2, -1);
        const Tensor d_partner = gather_in_range(d, -1, r.entry.squeeze(-1));
        const Tensor apq = (gather_in_range(a, -1, r.entry).squeeze(-1) +
                            gather_in_range(a, -2, r.entry_t).squeeze(-2)) *
                           0.5;
        const Tensor dp = where(r.first, d, d_partner), dq = where(r.first, d_partner, d);
        const Tensor rotate = logical_and(r.paired, ne(apq, 0.0));
        // The rotation that zeroes a_pq (Golub and Van Loan's sym.schur2): t the smaller root of
        // t^2 + 2 theta t - 1 = 0 (at theta = 0 both roots, 1 and -1, do). Where no rotation is
        // made (a_pq = 0) theta is inf or NaN, and the selects below leave it out.
        const Tensor theta = (dq - dp) / (apq * 2.0);
        const Tensor t = copysign(1.0 / (abs(theta) + sqrt(theta * theta + 1.0)), theta);
        const Tensor c = where(rotate, rsqrt(t * t + 1.0), Scalar(1.0));
        const Tensor sn = where(rotate, t * c, Scalar(0.0));
        // Column p becomes c col_p - s col_q, column q c col_q + s col_p; rows likewise.
        const Tensor across = where(r.first, -sn, sn);
        a = a * c.unsqueeze(-2) + gather_in_range(a, -1, r.columns) * across.unsqueeze(-2);
        v = v * c.unsqueeze(-2) + gather_in_range(v, -1, r.columns) * across.unsqueeze(-2);
        a = a * c.unsqueeze(-1) + gather_in_range(a, -2, r.rows) * across.unsqueeze(-1);
        a = where(logical_and(r.pair_entry, rotate.unsqueeze(-1)), Scalar(0.0), a);
      }
    }
  }
  const ValuesIndices sorted = sort(diagonal(a, 0, -2, -1) * scale.squeeze(-1), -1);
  return {sorted.values,
          gather_in_range(v, -1, sorted.indices.unsqueeze(-2).expand(v.sizes()).contiguous())};
}

// The fused kernel's eigendecomposition of s (symmetric, detached): LAPACK's syevd on the CPU
// (Note [LAPACK through OpenBLAS] in runtime/cpu/cpu_kernels_lapack.cpp). A matrix it could not
// take (a NaN or an inf) or failed on has NaN eigenvalues: one read checks, as PyTorch's does.
Eigen fused_eigh(const char* op, const Tensor& s) {
  const Tensor in = s.contiguous();
  DeviceImpl& impl = detail::impl_of(in);
  Eigen e{detail::new_tensor(batch_of(in, 1), in.dtype(), impl),
          detail::new_tensor(in.sizes(), in.dtype(), impl)};
  detail::run_kernel(OpId::eigh, {in}, {e.values, e.vectors});
  // The input is scanned for a NaN or an inf only to word the error.
  if (any(logical_not(isfinite(e.values))).item<bool>())
    throw not_converged(op, any(logical_not(isfinite(in))).item<bool>());
  return e;
}

// The symmetric matrix whose eigendecomposition eigh gives: A's lower triangle mirrored (upper:
// its upper one).
Tensor read_triangle(const Tensor& a, bool upper) {
  return upper ? triu(a) + triu(a, 1).transpose(-2, -1) : tril(a) + tril(a, -1).transpose(-2, -1);
}

std::pair<Tensor, Tensor> eigh_of(const char* op, const Tensor& a, std::string_view uplo,
                                  bool want_vectors) {
  check_defined(op, {&a});
  check_dtype(want_vectors ? OpId::eigh : OpId::eigvalsh, a);
  if (uplo != "L" && uplo != "U")
    throw ValueError(
        fmt::format("linalg.{}: Expected UPLO argument to be 'L' or 'U', but got {}", op, uplo));
  check_square(op, "A", a);
  const Tensor af = computing(a);
  // The rotations run without autograd (the gradient is attached below), so the fused kernel
  // serves a call that records a gradient too.
  const Tensor s = read_triangle(af, uplo == "U").detach();
  Eigen e = s.numel() > 0 && detail::use_fused_kernel(OpId::eigh, s, s.dtype()) ? fused_eigh(op, s)
                                                                                : jacobi(op, s);
  std::tie(e.values, e.vectors) = autograd::record_eigh(af, e.values, e.vectors);
  return {e.values.to(a.dtype()), want_vectors ? e.vectors.to(a.dtype()) : Tensor()};
}

// A = Q R in `mode` (Q undefined for "r"), in af's dtype: by LAPACK (fused) or by the
// reflections (Note [QR by Householder reflections]), whose gradient is that of the steps.
std::pair<Tensor, Tensor> factor_qr(const Tensor& af, std::string_view mode, bool fused) {
  const std::int64_t m = af.size(-2), n = af.size(-1), k = std::min(m, n);
  const bool want_q = mode != "r";
  if (fused) {
    // LAPACK's geqrf and orgqr on the CPU (Note [LAPACK through OpenBLAS]): Q with k columns
    // (m: complete; none: R alone), R with k rows (m: complete).
    const Tensor in = af.contiguous();
    Shape q_sizes = batch_of(af, 2), r_sizes = batch_of(af, 2);
    q_sizes.insert(q_sizes.end(), {m, want_q ? (mode == "complete" ? m : k) : 0});
    r_sizes.insert(r_sizes.end(), {mode == "complete" ? m : k, n});
    DeviceImpl& impl = detail::impl_of(in);
    const Tensor q = detail::new_tensor(q_sizes, in.dtype(), impl);
    const Tensor r = detail::new_tensor(r_sizes, in.dtype(), impl);
    detail::run_kernel(OpId::qr, {in}, {q, r});
    return {want_q ? q : Tensor(), r};
  }
  const Tensor rows = positions(af, m, af.dtype());
  Shape q_shape = batch_of(af, 2);
  q_shape.insert(q_shape.end(), {m, m});
  Tensor r = af;
  Tensor q = want_q ? eye(m, std::nullopt, {.dtype = af.dtype(), .device = af.device()})
                          .expand(q_shape)
                          .contiguous()
                    : Tensor();
  // The last row has nothing below its diagonal: no reflection (Note [QR by Householder
  // reflections]).
  for (std::int64_t j = 0; j < std::min(m - 1, n); ++j) {
    const Tensor below = gt(rows, double(j)).to(af.dtype());
    const Tensor x = r.select(-1, j) * below;
    const Tensor alpha = r.select(-2, j).narrow(-1, j, 1);
    const Tensor sigma = sum(x * x, {-1}, true);
    const Tensor skip = eq(sigma, 0.0);
    // (Where the reflection is skipped the other branch is still computed: its sqrt and
    // quotients are kept away from zero, so that their gradient is not NaN times zero.)
    const Tensor norm = sqrt(where(skip, Scalar(1.0), alpha * alpha + sigma));
    const Tensor beta = where(lt(alpha, 0.0), norm, -norm);
    const Tensor tau = where(skip, Scalar(0.0), (beta - alpha) / beta);
    const Tensor v =
        x / where(skip, Scalar(1.0), alpha - beta) + eq(rows, double(j)).to(af.dtype());
    // R <- H R = R - tau v (v^T R); Q <- Q H = Q - tau (Q v) v^T.
    const Tensor vr = sum(v.unsqueeze(-1) * r, {-2});
    r = r - (tau * v).unsqueeze(-1) * vr.unsqueeze(-2);
    if (want_q) {
      const Tensor qv = sum(q * v.unsqueeze(-2), {-1});
      q = q - (tau.unsqueeze(-1) * qv.unsqueeze(-1)) * v.unsqueeze(-2);
    }
  }
  r = triu(r);
  if (mode == "complete") return {q, r};
  return {want_q ? q.narrow(-1, 0, k) : Tensor(), r.narrow(-2, 0, k)};
}

}  // namespace

namespace linalg {

std::pair<Tensor, Tensor> qr(const Tensor& a, std::string_view mode) {
  check_defined("qr", {&a});
  check_dtype(OpId::qr, a);
  if (mode != "reduced" && mode != "complete" && mode != "r")
    throw ValueError(
        fmt::format("qr received unrecognized mode '{}' but expected one of "
                    "'reduced' (default), 'r', or 'complete'",
                    mode));
  check_matrix("qr", "A", a);
  const Tensor af = computing(a);
  const std::int64_t m = a.size(-2), n = a.size(-1);
  const bool fused = af.numel() > 0 && detail::use_fused_kernel(OpId::qr, af, af.dtype());
  Tensor q, r;
  if (af.numel() > 0 && autograd::should_record({&af}) && !(mode == "complete" && m > n)) {
    // The closed-form gradient (formulas_linalg.cpp) of the reduced factors, which "complete"
    // with m <= n is too; "r" computes Q for it. Where m > n, "complete"'s last m - n columns
    // of Q are not determined by A (PyTorch has no gradient there): the steps' is ferry's.
    std::pair<Tensor, Tensor> reduced;
    {
      NoGradGuard untracked;
      reduced = factor_qr(af, "reduced", fused);
    }
    std::tie(q, r) = autograd::record_qr(af, reduced.first, reduced.second);
    if (mode == "r") q = Tensor();
  } else {
    std::tie(q, r) = factor_qr(af, mode, fused && !autograd::should_record({&af}));
  }
  return {q.defined() ? q.to(a.dtype()) : empty({0}, {.dtype = a.dtype(), .device = a.device()}),
          r.to(a.dtype())};
}

std::pair<Tensor, Tensor> eigh(const Tensor& a, std::string_view uplo) {
  return eigh_of("eigh", a, uplo, true);
}

Tensor eigvalsh(const Tensor& a, std::string_view uplo) {
  return eigh_of("eigvalsh", a, uplo, false).first;
}

}  // namespace linalg
}  // namespace ferry
