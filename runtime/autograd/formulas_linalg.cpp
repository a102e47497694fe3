// runtime/autograd/formulas_linalg.cpp — backward of cholesky, solve_triangular and
// lu_factor_ex (formulas.hpp).
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
#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
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
  const linalg::PLU f = lu_unpack(lu, pivots);
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
  return matmul(f.P, ga);
}

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

}  // namespace ferry::autograd
