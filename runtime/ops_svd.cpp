// runtime/ops_svd.cpp — the singular value decomposition of ferry/ops_linalg.hpp and the ops made
// of it: svd, svdvals, pinv, matrix_rank, matrix_norm and lstsq. Composed as the other
// factorizations are (Note [Linear algebra as compositions] in runtime/ops_factorize.cpp), so
// they run on every device; the CPU's fused kernels are LAPACK's gesdd and, for lstsq, the driver
// named (Note [LAPACK through OpenBLAS] in runtime/cpu/cpu_kernels_lapack.cpp).
//
// Note [Singular value decomposition by one-sided Jacobi rotations]
// Hestenes' method: rotate pairs of A's columns ([..., m, n], m >= n; a wide A is transposed)
// until every two are orthogonal. A rotation of columns p and q by the angle that zeroes their
// inner product g = a_p . a_q (with a = |a_p|^2, b = |a_q|^2: zeta = (b - a) / 2g, t the smaller
// root of t^2 + 2 zeta t - 1 = 0, c = 1 / sqrt(1 + t^2), s = c t) keeps A V = U S true for the
// accumulated rotations V; when no pair is left to rotate, the columns' norms are the singular
// values and the columns over their norms U's. The pairs of a sweep are the round-robin rounds of
// the symmetric eigendecomposition (Note [Symmetric eigendecomposition by Jacobi rotations] in
// runtime/ops_orthogonal.cpp): a round's n / 2 rotations are applied at once, each column meeting
// its partner's through index_select, some twenty batched ops over [..., m, n] whatever n is. A
// pair is rotated where |g| > tol sqrt(a b), tol = m eps: the columns then are orthogonal to a few
// eps relative to their own norms, however small (the accuracy one-sided Jacobi is known for:
// Demmel and Veselic), and the sweeps stop after one that rotated no pair (one host read a sweep;
// the decision is taken on the same sums as the rotations', so that rounding cannot leave a pair
// that fails a check but is never rotated). Random matrices of 2 to 64 columns took 2 to 10
// sweeps, that last one included (docs/linalg.md). A column that is
// exactly zero (A of lower rank) has no direction: U's columns are then completed to an
// orthonormal set by a QR of U, sorted so that those columns come last, whose reflections leave
// the others as they are (up to sign, undone from R's diagonal) and turn the zero ones into the
// orthogonal complement; the same QR, complete, gives full_matrices' U where m > n. Every step
// runs untracked; the gradient is PyTorch's closed form (autograd::record_svd).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
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

Tensor transposed(const Tensor& x) { return x.transpose(-2, -1); }

Shape with(Shape batch, std::initializer_list<std::int64_t> dims) {
  batch.insert(batch.end(), dims);
  return batch;
}

LinAlgError not_converged(const char* op, bool non_finite) {
  return LinAlgError(
      fmt::format("linalg.{}: The algorithm failed to converge because the input matrix {}.", op,
                  non_finite ? "contained non-finite values"
                             : "is ill-conditioned or has too many repeated singular values"));
}

// U's columns where U has some that are zero, or U [..., m, n] completed to [..., m, m]: a QR
// (the Note above), R's diagonal signs undone on the first n columns.
Tensor complete(const Tensor& u, bool square) {
  const std::int64_t n = u.size(-1);
  const auto [q, r] = linalg::qr(u, square ? "complete" : "reduced");
  const Tensor sign = 1.0 - lt(diagonal(r, 0, -2, -1), 0.0).to(u.dtype()) * 2.0;
  const Tensor first = q.narrow(-1, 0, n) * sign.unsqueeze(-2);
  return square && q.size(-1) > n ? cat({first, q.narrow(-1, n, q.size(-1) - n)}, -1) : first;
}

// The SVD of a ([..., m, n], m >= n, computing dtype, untracked) by one-sided Jacobi rotations:
// U [..., m, n] (full: [..., m, m]), S [..., n] descending, V [..., n, n] (not transposed); S
// alone (U and V undefined, the rotations not accumulated) where !vectors.
linalg::SVD jacobi(const char* op, const Tensor& a0, bool full, bool vectors) {
  const std::int64_t m = a0.size(-2), n = a0.size(-1);
  const TensorOptions like{.dtype = a0.dtype(), .device = a0.device()};
  // Each matrix divided by its largest |entry| (the singular values scaled back at the end), so
  // that the squares summed below can neither overflow nor underflow.
  Tensor scale = amax(abs(a0), {-2, -1}, true);
  scale = where(eq(scale, 0.0), Scalar(1.0), scale);
  Tensor a = a0 / scale;
  Tensor v = vectors ? eye(n, std::nullopt, like).expand(with(batch_of(a0, 2), {n, n})).contiguous()
                     : Tensor();
  const double tol = double(m) * detail::machine_eps(a0.dtype());
  struct Round {
    Tensor partner, first, paired;
  };
  std::vector<Round> rounds;
  const Tensor idx = positions(a0, n, DType::i64);
  for (const std::vector<std::int64_t>& partner : rounds_of(n)) {
    const Tensor p = tensor(partner, {n}, {.dtype = DType::i64}).to(a0.device());
    rounds.push_back({p, lt(idx, p), ne(idx, p)});
  }
  bool has_zero = false;
  for (int sweep = 0;; ++sweep) {
    Tensor rotated = zeros({}, {.dtype = DType::boolean, .device = a0.device()});
    for (const Round& r : rounds) {
      const Tensor aq = index_select(a, -1, r.partner);
      const Tensor norm2 = sum(a * a, {-2}, true);
      const Tensor partner_norm2 = index_select(norm2, -1, r.partner);
      const Tensor g = sum(a * aq, {-2}, true);
      const Tensor rotate = logical_and(r.paired, gt(abs(g), sqrt(norm2 * partner_norm2) * tol));
      rotated = logical_or(rotated, any(rotate));
      // zeta = (|a_q|^2 - |a_p|^2) / 2g, the same at p and at q; where no rotation is made, g is
      // replaced so that nothing below divides by zero, and the selects leave it out.
      const Tensor zeta = where(r.first, partner_norm2 - norm2, norm2 - partner_norm2) /
                          (where(rotate, g, Scalar(1.0)) * 2.0);
      const Tensor t = copysign(1.0 / (abs(zeta) + sqrt(zeta * zeta + 1.0)), zeta);
      const Tensor c = where(rotate, rsqrt(t * t + 1.0), Scalar(1.0));
      const Tensor sn = where(rotate, t * c, Scalar(0.0));
      // Column p becomes c a_p - s a_q, column q c a_q + s a_p.
      const Tensor across = where(r.first, -sn, sn);
      a = a * c + aq * across;
      if (vectors) v = v * c + index_select(v, -1, r.partner) * across;
    }
    // One read a sweep: whether a pair was rotated (the sweeps end with one that rotates none:
    // the decision to stop is the rotations' own, on the same sums), whether a matrix holds a
    // NaN or an inf (whose comparisons rotate nothing), whether a column is zero.
    const Tensor norm2 = sum(a * a, {-2});
    const std::vector<std::uint8_t> status =
        stack({rotated, any(logical_not(isfinite(norm2))), any(eq(norm2, 0.0))})
            .to(DType::u8)
            .to_vector<std::uint8_t>();
    if (status[1] || (status[0] && sweep == kMaxSweeps)) throw not_converged(op, status[1]);
    if (!status[0]) {
      has_zero = status[2] != 0;
      break;
    }
  }
  const Tensor norm = sqrt(sum(a * a, {-2}));
  const ValuesIndices sorted = sort(norm, -1, true);
  if (!vectors) return {Tensor(), sorted.values * scale.squeeze(-1), Tensor()};
  const Tensor by_value = sorted.indices.unsqueeze(-2);
  Tensor u = a / where(eq(norm, 0.0), Scalar(1.0), norm).unsqueeze(-2);
  u = gather_in_range(u, -1, by_value.expand(u.sizes()).contiguous());
  v = gather_in_range(v, -1, by_value.expand(v.sizes()).contiguous());
  if (has_zero || (full && m > n)) u = complete(u, full);
  return {u, sorted.values * scale.squeeze(-1), v};
}

// The SVD of af ([..., m, n], computing dtype, untracked): gesdd where the device has the fused
// kernel, else the rotations, on A^T where A is wide (A^T = U' S V'^T gives U = V', Vh = U'^T).
// S alone (U and Vh undefined) where !vectors: gesdd's jobz 'N', rotations not accumulated.
linalg::SVD factor(const char* op, const Tensor& af, bool full, bool vectors = true) {
  const std::int64_t m = af.size(-2), n = af.size(-1), k = std::min(m, n);
  const Shape batch = batch_of(af, 2);
  const TensorOptions like{.dtype = af.dtype(), .device = af.device()};
  if (af.numel() == 0) {
    // PyTorch's shapes: where a matrix is empty, the full U and Vh are identities.
    const auto identity = [&](std::int64_t size, std::int64_t rows, std::int64_t cols) {
      return full ? eye(size, std::nullopt, like).expand(with(batch, {size, size})).contiguous()
                  : zeros(with(batch, {rows, cols}), like);
    };
    if (!vectors) return {Tensor(), zeros(with(batch, {k}), like), Tensor()};
    return {identity(m, m, k), zeros(with(batch, {k}), like), identity(n, k, n)};
  }
  if (detail::use_fused_kernel(OpId::svd, af, af.dtype())) {
    const Tensor in = af.contiguous();
    DeviceImpl& impl = detail::impl_of(in);
    const std::int64_t u = vectors ? (full ? m : k) : 0, v = vectors ? (full ? n : k) : 0;
    linalg::SVD f{detail::new_tensor(with(batch, {m, u}), af.dtype(), impl),
                  detail::new_tensor(with(batch, {k}), af.dtype(), impl),
                  detail::new_tensor(with(batch, {v, n}), af.dtype(), impl)};
    detail::run_kernel(OpId::svd, {in}, {f.U, f.S, f.Vh});
    // One read checks, as PyTorch's does; the input is scanned only to word the error.
    if (any(logical_not(isfinite(f.S))).item<bool>())
      throw not_converged(op, any(logical_not(isfinite(in))).item<bool>());
    if (!vectors) return {Tensor(), f.S, Tensor()};
    return f;
  }
  if (!vectors) return jacobi(op, m >= n ? af : transposed(af).contiguous(), full, false);
  if (m >= n) {
    const linalg::SVD f = jacobi(op, af, full, true);
    return {f.U, f.S, transposed(f.Vh).contiguous()};
  }
  const linalg::SVD f = jacobi(op, transposed(af).contiguous(), full, true);
  return {f.Vh, f.S, transposed(f.U).contiguous()};
}

// The decomposition's front-end: checks, the computing dtype, the gradient recorded.
// values_only: S alone (U and Vh undefined) where no gradient is recorded (PyTorch's
// compute_uv = false); the gradient needs the vectors (svdvals': U diag(g) Vh).
linalg::SVD svd_of(const char* op, const Tensor& a, bool full, bool values_only = false) {
  check_defined(op, {&a});
  check_dtype(OpId::svd, a);
  check_matrix(op, "A", a);
  const Tensor af = computing(a);
  const bool vectors = !values_only || autograd::should_record({&af});
  linalg::SVD f;
  {
    NoGradGuard untracked;
    f = factor(op, af.detach(), full, vectors);
  }
  if (!vectors) return {Tensor(), f.S.to(a.dtype()), Tensor()};
  if (af.numel() > 0) std::tie(f.U, f.S, f.Vh) = autograd::record_svd(af, f.U, f.S, f.Vh, full);
  return {f.U.to(a.dtype()), f.S.to(a.dtype()), f.Vh.to(a.dtype())};
}

// The magnitudes at or below which pinv and matrix_rank take a singular value as zero
// ([..., 1]), for sv [..., k] (k > 0) of a [..., m, n]: PyTorch's rule (ferry/ops_linalg.hpp).
Tensor cutoff(const Tensor& a, const Tensor& sv, const linalg::Tolerance& tol) {
  const double atol = tol.atol.value_or(0.0);
  const double rtol = tol.rtol                    ? *tol.rtol
                      : tol.atol && *tol.atol > 0 ? 0.0
                                                  : detail::machine_eps(sv.dtype()) *
                                                        double(std::max(a.size(-2), a.size(-1)));
  return maximum(amax(sv, {-1}, true) * rtol, full_like(sv.narrow(-1, 0, 1), Scalar(atol)));
}

// Singular values (hermitian: |eigenvalues|) and pinv's untracked parts, for a non-empty af.
struct Spectrum {
  Tensor left, values, right;  // A = left diag(values) right
  Tensor magnitudes;
};
Spectrum spectrum(const char* op, const Tensor& af, bool hermitian) {
  NoGradGuard untracked;
  if (hermitian) {
    check_square(op, "A", af);
    const auto [w, v] = linalg::eigh(af.detach());
    return {v, w, transposed(v), abs(w)};
  }
  const linalg::SVD f = factor(op, af.detach(), false);
  return {f.U, f.S, f.Vh, f.S};
}

// pinv of af from its spectrum, untracked.
Tensor pseudo_inverse(const Spectrum& s, const Tensor& cut) {
  NoGradGuard untracked;
  const Tensor inverse = where(gt(s.magnitudes, cut), 1.0 / s.values, Scalar(0.0));
  return matmul(transposed(s.right) * inverse.unsqueeze(-2), transposed(s.left));
}

void check_float_matrix(const char* op, OpId id, const Tensor& a) {
  check_defined(op, {&a});
  check_dtype(id, a);
  check_matrix(op, "A", a);
}

// The reduction of matrix_norm over the last two dims of x (already moved there).
Tensor norm_of_last_two(const Tensor& x, std::string_view ord) {
  if (ord == "fro") return norm(x, 2.0, {-2, -1});
  if (ord == "nuc") return sum(linalg::svdvals(x), {-1});
  throw ValueError(fmt::format("linalg.matrix_norm: Order {} not supported.", ord));
}
Tensor norm_of_last_two(const Tensor& x, double ord) {
  if (ord == 2) return amax(linalg::svdvals(x), {-1});
  if (ord == -2) return amin(linalg::svdvals(x), {-1});
  const bool columns = ord == 1 || ord == -1;
  if (!columns && !std::isinf(ord))
    throw ValueError(fmt::format("linalg.matrix_norm: Order {} not supported.", ord));
  const Tensor sums = sum(abs(x), {columns ? -2 : -1});
  return ord > 0 ? amax(sums, {-1}) : amin(sums, {-1});
}

template <typename Ord> Tensor matrix_norm_of(const Tensor& a, Ord ord,
                                              std::pair<std::int64_t, std::int64_t> dims,
                                              bool keepdim) {
  check_defined("matrix_norm", {&a});
  check_dtype(OpId::matrix_norm, a);
  if (a.dim() < 2)
    throw ShapeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  const auto wrap = [&](std::int64_t d) {
    if (d < -a.dim() || d >= a.dim())
      throw ShapeError(
          fmt::format("linalg.matrix_norm: dim {} out of range for a {}-d tensor", d, a.dim()));
    return d < 0 ? d + a.dim() : d;
  };
  const std::int64_t d0 = wrap(dims.first), d1 = wrap(dims.second);
  if (d0 == d1)
    throw ShapeError(fmt::format("linalg.matrix_norm: dims must be different. Got ({}, {})",
                                 dims.first, dims.second));
  // The two dims moved last (d0 then d1: rows then columns, which the 1 and inf orders tell
  // apart), reduced, and put back as ones where keepdim.
  std::vector<std::int64_t> order;
  for (std::int64_t d = 0; d < a.dim(); ++d)
    if (d != d0 && d != d1) order.push_back(d);
  order.push_back(d0);
  order.push_back(d1);
  Tensor out = norm_of_last_two(a.permute(order), ord);
  if (keepdim) out = out.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
  return out;
}

}  // namespace

namespace linalg {

SVD svd(const Tensor& a, bool full_matrices) { return svd_of("svd", a, full_matrices); }

Tensor svdvals(const Tensor& a) { return svd_of("svdvals", a, false, true).S; }

Tensor pinv(const Tensor& a, Tolerance tol, bool hermitian) {
  check_float_matrix("pinv", OpId::pinv, a);
  const Tensor af = computing(a);
  const std::int64_t m = a.size(-2), n = a.size(-1);
  if (af.numel() == 0) {
    if (hermitian) check_square("pinv", "A", a);
    return zeros(with(batch_of(a, 2), {n, m}), {.dtype = a.dtype(), .device = a.device()});
  }
  const Spectrum s = spectrum("pinv", af, hermitian);
  Tensor p = pseudo_inverse(s, cutoff(af, s.magnitudes, tol));
  autograd::record_pinv(af, p);
  return p.to(a.dtype());
}

Tensor matrix_rank(const Tensor& a, Tolerance tol, bool hermitian) {
  check_float_matrix("matrix_rank", OpId::matrix_rank, a);
  if (hermitian) check_square("matrix_rank", "A", a);
  const Tensor af = computing(a);
  if (af.numel() == 0) return zeros(batch_of(a, 2), {.dtype = DType::i64, .device = a.device()});
  NoGradGuard untracked;
  // The singular values alone (hermitian: the eigenvalues' magnitudes).
  const Tensor magnitudes = hermitian ? spectrum("matrix_rank", af, true).magnitudes
                                      : factor("matrix_rank", af.detach(), false, false).S;
  return sum(gt(magnitudes, cutoff(af, magnitudes, tol)), {-1}).to(DType::i64);
}

Tensor matrix_norm(const Tensor& a, std::string_view ord,
                   std::pair<std::int64_t, std::int64_t> dims, bool keepdim) {
  return matrix_norm_of(a, ord, dims, keepdim);
}

Tensor matrix_norm(const Tensor& a, double ord, std::pair<std::int64_t, std::int64_t> dims,
                   bool keepdim) {
  return matrix_norm_of(a, ord, dims, keepdim);
}

Lstsq lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond,
            std::string_view driver) {
  check_defined("lstsq", {&a, &b});
  check_dtype(OpId::lstsq, a);
  check_dtype(OpId::lstsq, b);
  if (a.dtype() != b.dtype())
    throw DTypeError(
        fmt::format("torch.linalg.lstsq: Expected input and other to have the same "
                    "dtype, but got input's dtype {} and other's dtype {}",
                    dtype_name(a.dtype()), dtype_name(b.dtype())));
  if (a.dim() < 2) throw ShapeError("torch.linalg.lstsq: input must have at least 2 dimensions.");
  if (b.dim() < 1) throw ShapeError("torch.linalg.lstsq: other must have at least 1 dimension.");
  const std::int64_t dim_diff = a.dim() - b.dim();
  if (dim_diff < 0 || dim_diff > 1)
    throw ShapeError(
        "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
        "(input.dim() - other.dim()) <= 1");
  const bool vector = dim_diff == 1;
  const Tensor b2 = vector ? b.unsqueeze(-1) : b;
  const std::int64_t m = a.size(-2), n = a.size(-1);
  if (b2.size(-2) != m)
    throw ShapeError(fmt::format("torch.linalg.lstsq: input.size(-2) should match other.size({})",
                                 vector ? -1 : -2));
  const bool gels = driver == "gels", gelsy = driver == "gelsy";
  const bool with_values = driver == "gelsd" || driver == "gelss";
  if (!gels && !gelsy && !with_values)
    throw ValueError(
        "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  const Tensor af = computing(a), bf = computing(b2);
  const TensorOptions like{.dtype = a.dtype(), .device = a.device()};
  const std::int64_t k = std::min(m, n);
  const Shape batch = broadcast_shapes(batch_of(a, 2), batch_of(b2, 2));
  const double rtol = rcond.value_or(detail::machine_eps(af.dtype()) * double(std::max(m, n)));
  // Every path runs untracked; the gradient is PyTorch's (autograd::record_lstsq).
  Tensor x, rank, values;
  {
    NoGradGuard untracked;
    if (af.numel() == 0) {
      x = zeros(with(batch, {n, b2.size(-1)}), {.dtype = af.dtype(), .device = af.device()});
      rank = zeros(batch_of(a, 2), {.dtype = DType::i64, .device = a.device()});
      values = zeros(with(batch_of(a, 2), {k}), like);
    } else if (bf.numel() > 0 && detail::use_fused_kernel(OpId::lstsq, af, af.dtype())) {
      // LAPACK's driver itself (the CPU's), as PyTorch: one read checks that every matrix was
      // solved. (Where B is empty, the composition below gives A's rank and values: LAPACK's
      // gelsd refuses no right-hand sides.)
      const Tensor ae = af.detach().expand(with(batch, {m, n})).contiguous();
      const Tensor be = bf.detach().expand(with(batch, {m, b2.size(-1)})).contiguous();
      DeviceImpl& impl = detail::impl_of(ae);
      x = detail::new_tensor(with(batch, {n, b2.size(-1)}), af.dtype(), impl);
      rank = detail::new_tensor(batch, DType::i64, impl);
      values = detail::new_tensor(with(batch, {k}), af.dtype(), impl);
      detail::run_kernel(OpId::lstsq, {ae, be}, {x, rank, values},
                         {{"rcond", rtol}, {"driver", std::string(driver)}});
      if (any(lt(rank, 0)).item<bool>()) {
        if (any(logical_not(isfinite(ae))).item<bool>()) throw not_converged("lstsq", true);
        if (gels)
          throw LinAlgError(
              "torch.linalg.lstsq: The least squares solution could not be computed because the "
              "input matrix does not have full rank.");
        throw not_converged("lstsq", false);
      }
      // The rank and the singular values are A's, in A's batch (PyTorch's shapes).
      for (std::int64_t d = 0; d < a.dim() - 2; ++d)
        if (a.size(d) == 1 && batch[std::size_t(d)] != 1) {
          rank = rank.narrow(d, 0, 1);
          values = values.narrow(d, 0, 1);
        }
      values = values.to(a.dtype());
    } else {
      // The solution of least norm, pinv(A) B, from A's SVD.
      const Spectrum s = spectrum("lstsq", af, false);
      const Tensor cut = cutoff(af, s.magnitudes, {.atol = 0.0, .rtol = rtol});
      x = matmul(pseudo_inverse(s, cut), bf);
      rank = sum(gt(s.magnitudes, cut), {-1}).to(DType::i64);
      values = s.values.to(a.dtype());
    }
  }
  autograd::record_lstsq(af, bf, x);
  Lstsq out;
  out.solution = (vector ? x.squeeze(-1) : x).to(a.dtype());
  out.rank = gels ? empty({0}, {.dtype = DType::i64, .device = a.device()}) : rank;
  out.singular_values = with_values ? values : empty({0}, like);
  out.residuals = empty({0}, like);
  // PyTorch's residuals come from LAPACK's QR and exist where the solution is unique (gelsd and
  // gelss check the rank; gels assumes it): one read for the check.
  if (m > n && !gelsy && (gels || all(eq(rank, double(n))).item<bool>())) {
    NoGradGuard untracked;
    const Tensor residual = matmul(af, x.detach()) - bf;
    out.residuals = sum(residual * residual, {-2}).to(a.dtype());
  }
  return out;
}

}  // namespace linalg
}  // namespace ferry
