// runtime/autograd/formulas_linalg.cpp — backward of cholesky, solve_triangular, lu_factor_ex,
// det, slogdet, qr, eigh, svd and pinv (formulas.hpp).
//
// Note [Closed-form gradients of the factorizations]
// The factorizations' front-ends compute their results untracked, by a fused kernel (LAPACK's
// potrf, getrf, BLAS's trsm on the CPU: Note [LAPACK through OpenBLAS]) or by the composition
// every device runs, and record one node here whose backward is PyTorch's closed form
// (FunctionsManual.cpp's cholesky_backward, linalg_solve_triangular's and linalg_lu_backward),
// so a call that records a gradient runs the fast path too, and the backward is a few
// triangular solves and products whatever n is, where differentiating the composition's steps
// replayed its n columns of element-wise ops. The formulas are made of ops (solve_triangular
// among them, itself recorded here), so they run on every device.
//
// cholesky: A = L L^T, so dL = L Phi(L^-1 dA L^-T) with Phi the lower triangle, its diagonal
// halved; its adjoint is gA = L^-T Phi(L^T gL) L^-1, made symmetric (a perturbation of A[i][j]
// is one of A[j][i] too: PyTorch's convention). solve_triangular, A X = B: gB = A^-T gX and
// gA = -gB X^T in A's triangle (the strict one where the diagonal is taken as ones); X A = B:
// gB = gX A^-T, gA = -X^T gB. LU, A = P L U with L [m, k] unit lower and U [k, n] upper,
// k = min(m, n), differentiated as in PyTorch (Walter and Lehmann's forms, the tall and the
// wide case; the square one is both): with gL the strict lower part of LU's gradient and gU
// its upper part,
//   m >= n: gA = P (gL + [L1^-T triu(gU U^T - L^T gL); 0]) U^-T   (L1: L's top k rows)
//   m <  n: gA = P L^-T (gU + [tril(L^T gL - gU U^T, -1) U1^-T, 0])   (U1: U's left k columns)
// A singular U makes the gradient inf or NaN, as PyTorch's is.
//
// det and slogdet, from A's LU: d log|det A| = tr(A^-1 dA), so slogdet's gA = g A^-T (inf or NaN
// at a singular A, as PyTorch's), and det's gA = g det(A) A^-T, A's cofactor matrix, both one
// lu_solve with the adjoint on g I. The cofactor matrix is a polynomial in A and is defined at a
// singular A too, where det(A) A^-T is 0 times inf; PyTorch 1.13 gives zero there (its first-order
// formula perturbs LU's zero pivots but keeps det = 0), which is wrong where A has rank n - 1 (the
// gradient of det at [[1, 2], [2, 4]] is [[4, -2], [-2, 1]]). Here an exact zero on U's diagonal
// is taken as delta = eps max|U| (finfo's eps; tiny where U is all zero) in det and in the solve
// alike: adj(A_delta) = adj(A) + O(delta), the error at the level of A's rounding. Where A's rank
// is n - 2 or less the adjugate is 0, and det(A_delta) is O(delta^2) against A_delta^-1's
// O(delta^-2): the product is O(delta) too (until delta^k underflows, k zeros of U; then det's
// factor is 0 and so is the result, as it should be).
//
// eigh: the perturbation theory at eigh_backward below.
//
// qr, A = Q R reduced, m >= n: with X = Q^T dA R^-1, Q^T dQ is skew and dR R^-1 upper
// triangular, so dR = (triu(X) + tril(X, -1)^T) R and dQ = dA R^-1 - Q (dR R^-1); the adjoint is
//   gA = (gQ + Q S) R^-T,  N = gR R^T - Q^T gQ,  S = triu(N) + triu(N, 1)^T
// (PyTorch's linalg_qr_backward, its copyltu(M) with M = N^T). m < n: A = Q [X | Y] and
// R = [R1 | R2] with Q, R1 = qr(X) and R2 = Q^T Y, so gY = Q gR2 and X takes the square formula
// with gQ + Y gR2^T. A rank-deficient A (a zero on R's diagonal) makes the gradient inf or NaN,
// as PyTorch's. Where A is already triangular below a column, the reflections' steps pass its
// zeros no gradient; the closed form gives them PyTorch's.
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dtype_limits.hpp"
#include "ferry/ops.hpp"
#include "linalg_internal.hpp"

namespace ferry::autograd {
namespace {

Tensor mT(const Tensor& t) { return t.transpose(-2, -1); }

// x's rows (dim -2) or columns (dim -1) continued with zeros up to `size`.
Tensor pad_zeros(const Tensor& x, std::int64_t dim, std::int64_t size) {
  if (x.size(dim) == size) return x;
  Shape shape = x.sizes();
  shape[std::size_t(std::int64_t(shape.size()) + dim)] = size - x.size(dim);
  return cat({x, zeros(shape, {.dtype = x.dtype(), .device = x.device()})}, dim);
}

Tensor cholesky_backward(const Tensor& l, const Tensor& g) {
  // tril(L^T gL) needs only gL's lower triangle: L^T times its strict upper part is strictly
  // upper triangular.
  Tensor phi = tril(matmul(mT(l), g));
  phi = (phi + mT(tril(phi, -1))) * 0.5;  // Phi's symmetric part: the diagonal halved
  const Tensor left = linalg::solve_triangular(mT(l), phi, /*upper=*/true);
  return linalg::solve_triangular(l, left, /*upper=*/false, /*left=*/false);
}

Tensor lu_backward(const Tensor& lu, const Tensor& pivots, const Tensor& g) {
  const std::int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
  // L and U only: P is applied as a gather of rows (below), and lu_unpack's pivots would be range
  // checked, a read back that these pivots, lu_factor_ex's own, do not need.
  const linalg::PLU f = lu_unpack(lu, pivots, /*unpack_data=*/true, /*unpack_pivots=*/false);
  const Tensor gl = tril(g, -1).narrow(-1, 0, k);
  const Tensor gu = triu(g).narrow(-2, 0, k);
  Tensor ga;
  if (m >= n) {
    Tensor x = triu(matmul(gu, mT(f.U)) - matmul(mT(f.L), gl));
    x = linalg::solve_triangular(mT(f.L.narrow(-2, 0, k)), x, /*upper=*/true, /*left=*/true,
                                 /*unitriangular=*/true);
    ga = linalg::solve_triangular(mT(f.U), gl + pad_zeros(x, -2, m), /*upper=*/false,
                                  /*left=*/false);
  } else {
    Tensor x = tril(matmul(mT(f.L), gl) - matmul(gu, mT(f.U)), -1);
    x = linalg::solve_triangular(mT(f.U.narrow(-1, 0, k)), x, /*upper=*/false, /*left=*/false);
    ga = linalg::solve_triangular(mT(f.L), gu + pad_zeros(x, -1, n), /*upper=*/true,
                                  /*left=*/true, /*unitriangular=*/true);
  }
  return linalg_detail::lu_permute_rows(pivots, ga);
}

// scale ([...], one per matrix) times A^-T, A = P L U packed in lu: one lu_solve with the
// adjoint on scale I (slogdet's gradient, and det's with scale g det(A)).
Tensor scaled_inverse_transposed(const Tensor& lu, const Tensor& pivots, const Tensor& scale) {
  const Tensor eye =
      ferry::eye(lu.size(-1), std::nullopt, {.dtype = lu.dtype(), .device = lu.device()});
  return linalg_detail::lu_solve_factored(lu, pivots, scale.unsqueeze(-1).unsqueeze(-1) * eye,
                                          /*left=*/true, /*adjoint=*/true);
}

// g (batch-shaped, as det's output) times A's cofactor matrix det(A) A^-T, A = P L U packed in
// lu (the Note above).
Tensor det_backward(const Tensor& lu, const Tensor& pivots, const Tensor& permutation_sign,
                    const Tensor& g) {
  const DType dt = lu.dtype();
  const Tensor d = diagonal(lu, 0, -2, -1);
  const Tensor delta =
      clamp_min(amax(abs(triu(lu)), {-2, -1}, true).squeeze(-1) * detail::machine_eps(dt),
                detail::smallest_normal(dt));
  const Tensor d_delta = where(eq(d, 0.0), delta, d);
  const Tensor lu_delta = lu + diag_embed(d_delta - d);
  return scaled_inverse_transposed(lu_delta, pivots, g * permutation_sign * prod(d_delta, {-1}));
}

// A = Q R, m >= n (R square): gA = (gQ + Q S) R^-T (the Note above).
Tensor qr_backward_tall(const Tensor& q, const Tensor& r, const Tensor& gq, const Tensor& gr) {
  const Tensor n = matmul(gr, mT(r)) - matmul(mT(q), gq);
  const Tensor s = triu(n) + mT(triu(n, 1));
  return linalg::solve_triangular(mT(r), gq + matmul(q, s), /*upper=*/false, /*left=*/false);
}

Tensor qr_backward(const Tensor& q, const Tensor& r, const Tensor& gq, const Tensor& gr) {
  const std::int64_t k = r.size(-2), n = r.size(-1);
  if (k >= n) return qr_backward_tall(q, r, gq, gr);
  // A = Q [X | Y], R = [R1 | R2], Y = Q R2.
  const Tensor r2 = r.narrow(-1, k, n - k), gr2 = gr.narrow(-1, k, n - k);
  const Tensor y = matmul(q, r2);
  const Tensor gx =
      qr_backward_tall(q, r.narrow(-1, 0, k), gq + matmul(y, mT(gr2)), gr.narrow(-1, 0, k));
  return cat({gx, matmul(q, gr2)}, -1);
}

// det's and slogdet's factors: the LU their forward made untracked, or, in a backward that
// builds a graph (Note [Higher-order gradients] in graph.hpp), A's LU made again, tracked, so
// that the closed form's dependence on A is in the graph (the pivots, piecewise constant in A,
// are the same).
Tensor lu_with_history(const Saved& a, const Saved& lu) {
  if (!ApplyingNode::current()) return lu.get();
  return linalg::lu_factor_ex(a.get()).LU;
}

// eigh, A = V diag(lambda) V^T (A's symmetric part): first-order perturbation theory gives
// dlambda = diag(P) and dV = V (F o P), P = V^T dA V, F_ij = 1 / (lambda_j - lambda_i) off the
// diagonal (zero where the two are equal: the Note in ferry/ops_linalg.hpp) and zero on it; the
// adjoint is gA = V (diag(glambda) + F o (V^T gV)) V^T, made symmetric (PyTorch's gradient of
// eigh is symmetric, as cholesky's is).
Tensor eigh_backward(const Tensor& values, const Tensor& vectors, const Tensor& gl,
                     const Tensor& gv) {
  const Tensor gap = values.unsqueeze(-2) - values.unsqueeze(-1);
  const Tensor same = eq(gap, 0.0);
  const Tensor f = where(same, Scalar(0.0), 1.0 / where(same, Scalar(1.0), gap));
  const Tensor ga =
      matmul(matmul(vectors, diag_embed(gl) + f * matmul(mT(vectors), gv)), mT(vectors));
  return (ga + mT(ga)) * 0.5;
}

// svd, A = U diag(S) Vh with k = min(m, n) (full_matrices: the first k columns of U and rows of
// Vh, the others not determined by A): PyTorch's svd_backward (real case). With E_ij = S_j^2 -
// S_i^2 and skew(X) = X - X^T,
//   gA_k = (skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)   (off the diagonal; S as diag)
// then m > n: gA = (U gA_k + (I - U U^T) gU S^-1) Vh; m < n: gA = U (gA_k Vh + S^-1 gVh (I -
// Vh^T Vh)); square: U gA_k Vh. Where two singular values are equal (E_ij = 0) or one is zero,
// the terms that divide by them are zero here (PyTorch's are inf or NaN): the singular vectors
// are not determined there, and a gradient of S alone (svdvals, matrix norms) is then still
// U diag(gS) Vh, as PyTorch's is.
Tensor svd_backward(Tensor u, const Tensor& s, Tensor vh, Tensor gu, const Tensor& gs, Tensor gvh,
                    bool full_matrices) {
  const std::int64_t k = s.size(-1);
  if (full_matrices) {
    u = u.narrow(-1, 0, k), gu = gu.narrow(-1, 0, k);
    vh = vh.narrow(-2, 0, k), gvh = gvh.narrow(-2, 0, k);
  }
  const std::int64_t m = u.size(-2), n = vh.size(-1);
  const auto skew = [](const Tensor& x) { return x - mT(x); };
  const auto inverse_or_zero = [](const Tensor& x) {
    const Tensor zero = eq(x, 0.0);
    return where(zero, Scalar(0.0), 1.0 / where(zero, Scalar(1.0), x));
  };
  const Tensor s2 = s * s;
  const Tensor f = inverse_or_zero(s2.unsqueeze(-2) - s2.unsqueeze(-1));
  Tensor ga =
      (skew(matmul(mT(u), gu)) * s.unsqueeze(-2) + s.unsqueeze(-1) * skew(matmul(vh, mT(gvh)))) *
          f +
      diag_embed(gs);
  const Tensor s_inv = inverse_or_zero(s);
  if (m > n) {
    const Tensor gu_s = gu * s_inv.unsqueeze(-2);
    return matmul(matmul(u, ga) + gu_s - matmul(u, matmul(mT(u), gu_s)), vh);
  }
  if (m < n) {
    const Tensor s_gvh = gvh * s_inv.unsqueeze(-1);
    return matmul(u, matmul(ga, vh) + s_gvh - matmul(matmul(s_gvh, mT(vh)), vh));
  }
  return matmul(matmul(u, ga), vh);
}

// pinv, P = A^+ of A [m, n]: PyTorch's pinv_backward (real case), the derivative of the
// pseudo-inverse where A's rank does not change (Golub and Pereyra), its products arranged to be
// of the smaller of m and n: m <= n, with K = G^T P,
//   gA = -(P K)^T + K P^T - A P K P^T + P^T P (G^T - K A);
// m > n, with K = P G^T, gA = -(K P)^T + (G^T - A K) P P^T + P^T K - P^T K P A.
Tensor pinv_backward(const Tensor& g, const Tensor& p, const Tensor& a) {
  const std::int64_t m = a.size(-2), n = a.size(-1);
  const Tensor pt = mT(p), gt = mT(g);
  if (m <= n) {
    const Tensor k = matmul(gt, p);
    const Tensor k_pt = matmul(k, pt);
    return -mT(matmul(p, k)) + k_pt - matmul(matmul(a, p), k_pt) +
           matmul(matmul(pt, p), gt - matmul(k, a));
  }
  const Tensor k = matmul(p, gt);
  const Tensor pt_k = matmul(pt, k);
  return -mT(matmul(k, p)) + matmul(matmul(gt - matmul(a, k), p), pt) + pt_k -
         matmul(matmul(pt_k, p), a);
}

// Factors side by side in one tensor, each flattened over its matrix dims (a node has one
// output): qr's Q and R, eigh's eigenvalues and eigenvectors. `parts` gives them back as views
// of `packed`, tracked when it is.
struct Packed {
  std::vector<Shape> shapes;
  std::vector<std::int64_t> sizes;  // elements per matrix of each factor
  static Shape flat(Shape shape, std::size_t matrix_dims) {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < matrix_dims; ++i) n *= shape.end()[-1 - std::ptrdiff_t(i)];
    shape.resize(shape.size() - matrix_dims);
    shape.push_back(n);
    return shape;
  }
  Tensor pack(const std::vector<Tensor>& factors, const std::vector<std::size_t>& matrix_dims) {
    std::vector<Tensor> flat_factors;
    for (std::size_t i = 0; i < factors.size(); ++i) {
      shapes.push_back(factors[i].sizes());
      const Shape f = flat(factors[i].sizes(), matrix_dims[i]);
      sizes.push_back(f.back());
      flat_factors.push_back(factors[i].reshape(f));
    }
    return cat(flat_factors, -1);
  }
  std::vector<Tensor> parts(const Tensor& packed) const {
    std::vector<Tensor> out;
    std::int64_t at = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      out.push_back(packed.narrow(-1, at, sizes[i]).reshape(shapes[i]));
      at += sizes[i];
    }
    return out;
  }
};

}  // namespace

void record_cholesky(const Tensor& a, const Tensor& l) {
  if (!should_record({&a})) return;
  record("linalg_choleskyBackward", {a}, l,
         [l = Saved(l)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {cholesky_backward(l.get(), g)};
         });
}

void record_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                             bool unitriangular, const Tensor& x) {
  if (!should_record({&a, &b})) return;
  record("linalg_solve_triangularBackward", {a, b}, x,
         [a = Saved(a), a_shape = a.sizes(), b_shape = b.sizes(), x = Saved(x), upper, left,
          unitriangular](const Tensor& g, const Needs& needs) -> std::vector<Tensor> {
           const Tensor at = a.get();
           const Tensor gb = linalg::solve_triangular(mT(at), g, !upper, left, unitriangular);
           Tensor ga;
           if (needs[0]) {
             const Tensor xt = mT(x.get());
             ga = sum_to(linalg_detail::triangle(-(left ? matmul(gb, xt) : matmul(xt, gb)), upper,
                                                 unitriangular),
                         a_shape);
           }
           return {ga, needs[1] ? sum_to(gb, b_shape) : Tensor()};
         });
}

void record_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots) {
  if (!should_record({&a})) return;
  record("linalg_lu_factor_exBackward", {a}, lu,
         [lu = Saved(lu), pivots = Saved(pivots)](const Tensor& g, const Needs&)
             -> std::vector<Tensor> { return {lu_backward(lu.get(), pivots.get(), g)}; });
}

void record_det(const Tensor& a, const Tensor& lu, const Tensor& pivots,
                const Tensor& permutation_sign, const Tensor& det) {
  if (!should_record({&a})) return;
  record("linalg_detBackward", {a}, det,
         [a = Saved(a), lu = Saved(lu), pivots = Saved(pivots), sign = Saved(permutation_sign)](
             const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {det_backward(lu_with_history(a, lu), pivots.get(), sign.get(), g)};
         });
}

namespace {

// A node `name` from a to its factors packed side by side (Packed), each with its matrix_dims
// (2 for a matrix, 1 for a vector), its backward `backward(factors, their gradients)`. packed,
// the node's output, is saved: in a backward that builds a graph the factors come back with
// their history (Note [Higher-order gradients] in graph.hpp). Returns the factors tracked.
using FactorsBackward =
    std::function<Tensor(const std::vector<Tensor>&, const std::vector<Tensor>&)>;
std::vector<Tensor> record_factors(std::string name, const Tensor& a,
                                   const std::vector<Tensor>& factors,
                                   const std::vector<std::size_t>& matrix_dims,
                                   FactorsBackward backward) {
  if (!should_record({&a})) return factors;
  Packed layout;
  const Tensor packed = layout.pack(factors, matrix_dims);
  record(std::move(name), {a}, packed,
         [layout, saved = Saved(packed), backward = std::move(backward)](
             const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {backward(layout.parts(saved.get()), layout.parts(g))};
         });
  return layout.parts(packed);
}

}  // namespace

std::pair<Tensor, Tensor> record_qr(const Tensor& a, const Tensor& q, const Tensor& r) {
  const std::vector<Tensor> t =
      record_factors("linalg_qrBackward", a, {q, r}, {2, 2},
                     [](const std::vector<Tensor>& f, const std::vector<Tensor>& g) {
                       return qr_backward(f[0], f[1], g[0], g[1]);
                     });
  return {t[0], t[1]};
}

std::pair<Tensor, Tensor> record_eigh(const Tensor& a, const Tensor& values,
                                      const Tensor& vectors) {
  const std::vector<Tensor> t =
      record_factors("linalg_eighBackward", a, {values, vectors}, {1, 2},
                     [](const std::vector<Tensor>& f, const std::vector<Tensor>& g) {
                       return eigh_backward(f[0], f[1], g[0], g[1]);
                     });
  return {t[0], t[1]};
}

std::tuple<Tensor, Tensor, Tensor> record_svd(const Tensor& a, const Tensor& u, const Tensor& s,
                                              const Tensor& vh, bool full_matrices) {
  const std::vector<Tensor> t =
      record_factors("linalg_svdBackward", a, {u, s, vh}, {2, 1, 2},
                     [full_matrices](const std::vector<Tensor>& f, const std::vector<Tensor>& g) {
                       return svd_backward(f[0], f[1], f[2], g[0], g[1], g[2], full_matrices);
                     });
  return {t[0], t[1], t[2]};
}

void record_pinv(const Tensor& a, const Tensor& p) {
  if (!should_record({&a})) return;
  record("linalg_pinvBackward", {a}, p,
         [a = Saved(a), p = Saved(p)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {pinv_backward(g, p.get(), a.get())};
         });
}

void record_lstsq(const Tensor& a, const Tensor& b, const Tensor& x) {
  if (!should_record({&a, &b})) return;
  record("linalg_lstsqBackward", {a, b}, x,
         [a = Saved(a), b = Saved(b), a_shape = a.sizes(), b_shape = b.sizes()](
             const Tensor& g, const Needs& needs) -> std::vector<Tensor> {
           // PyTorch's linalg_lstsq_backward: X = P B with P = pinv(A) (computed here, in the
           // backward, as PyTorch does; tracked where the pass builds a graph).
           const Tensor at = a.get();
           const Tensor p = linalg::pinv(at);
           return {
               needs[0] ? sum_to(pinv_backward(matmul(g, mT(b.get())), p, at), a_shape) : Tensor(),
               needs[1] ? sum_to(matmul(mT(p), g), b_shape) : Tensor()};
         });
}

void record_matrix_exp(const Tensor& a, const Tensor& e) {
  if (!should_record({&a})) return;
  record("linalg_matrix_expBackward", {a}, e,
         [a = Saved(a)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           // The Frechet derivative's adjoint as a block of a larger exponential (PyTorch's
           // backward_analytic_function_of_a_matrix), itself differentiable.
           const Tensor at = mT(a.get());
           const std::int64_t n = at.size(-1);
           const Tensor block = cat({cat({at, g}, -1), cat({zeros_like(at), at}, -1)}, -2);
           return {linalg::matrix_exp(block).narrow(-2, 0, n).narrow(-1, n, n)};
         });
}

void record_slogdet(const Tensor& a, const Tensor& lu, const Tensor& pivots,
                    const Tensor& logabsdet) {
  if (!should_record({&a})) return;
  record("linalg_slogdetBackward", {a}, logabsdet,
         [a = Saved(a), lu = Saved(lu), pivots = Saved(pivots)](
             const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {scaled_inverse_transposed(lu_with_history(a, lu), pivots.get(), g)};
         });
}

}  // namespace ferry::autograd
