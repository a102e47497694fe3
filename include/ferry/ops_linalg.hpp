// ferry/ops_linalg.hpp — torch.linalg's factorizations and solvers for small and batched
// square matrices, with PyTorch's names, shapes and errors: cholesky, solve_triangular, solve,
// inv, det, slogdet, the LU family (lu_factor, lu_factor_ex, lu, lu_solve), qr, eigh, eigvalsh,
// svd, svdvals, pinv, matrix_rank, matrix_norm, lstsq, matrix_exp, matrix_power, and torch's
// cholesky_solve, logdet and lu_unpack. Each is a composite op (Note [Composite ops] in
// ferry/op.hpp) composed in runtime/ops_factorize.cpp, ops_lu.cpp and ops_orthogonal.cpp (Note
// [Linear algebra as compositions]): a loop over the n columns of [..., n, n] matrices of batched
// matrix-vector products and element-wise updates, so it runs on every device, on every matrix of a
// batch at once. cholesky, solve_triangular, lu_factor_ex, det, slogdet and qr record closed-form
// gradients (PyTorch's, and so do the ops made of them); the others differentiate through their
// parts. A composition costs
// 9 to 41 op calls per column (docs/linalg.md), so off the CPU these are for the sizes models use
// them at (a covariance of tens of dimensions, a batch of 3x3 transforms); the CPU runs LAPACK
// and BLAS kernels under cholesky, lu_factor_ex, solve_triangular, eigh and qr (Note [LAPACK
// through OpenBLAS]).
//
// Dtypes: f32 and f64; f16 and bf16 inputs are computed in f32 and rounded back (PyTorch's
// linalg refuses them). Integer and bool inputs are a
// DTypeError, as two inputs of different dtypes are. Matrices are the last two dims; the
// batch dims of two operands broadcast. Included by ferry/ops.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ferry/tensor.hpp"

namespace ferry {

namespace linalg {

// torch.linalg.cholesky: L, lower triangular with a positive diagonal, with A = L L^T (upper:
// U with A = U^T U). Reads only A's lower triangle (upper: its upper one), as LAPACK does; the
// gradient is PyTorch's, symmetric (A is taken to be symmetric). A LinAlgError names the first
// leading minor that is not positive-definite (and the batch element).
Tensor cholesky(const Tensor& a, bool upper = false);

// torch.linalg.solve_triangular: X with A X = B (left = false: X A = B), A triangular (upper
// or lower; only that triangle is read, and with unitriangular its diagonal is taken to be
// ones). B is [..., n, k] (left = false: [..., k, n]). A zero on the diagonal gives inf and NaN,
// as in PyTorch: no error.
Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                        bool unitriangular = false);

// torch.linalg.solve: X with A X = B (left = false: X A = B), by Gaussian elimination with
// partial pivoting. B is [..., n, k], or a vector [..., n] where B has one dim, or A's batch
// dims and n (PyTorch's rule). A LinAlgError when a pivot is exactly zero (A singular).
Tensor solve(const Tensor& a, const Tensor& b, bool left = true);

// torch.linalg.inv: A^-1, as solve(A, I). A LinAlgError names the zero diagonal element of the
// factorization where A is singular.
Tensor inv(const Tensor& a);

// torch.linalg.det: the determinant, [...] for A [..., n, n] (1 for 0 x 0), by elimination with
// partial pivoting. Singular A gives 0. The gradient is the cofactor matrix det(A) A^-T, at a
// singular A too (PyTorch 1.13 gives zero there, wrong where A's rank is n - 1: the Note in
// runtime/autograd/formulas_linalg.cpp).
Tensor det(const Tensor& a);

// torch.linalg.slogdet: (sign, log|det|), sign -1, 0 or 1 and log|det| = -inf where A is singular.
// log|det|'s gradient is A^-T (inf or NaN where A is singular); sign has none.
std::pair<Tensor, Tensor> slogdet(const Tensor& a);

// torch.linalg.lu_factor_ex's results: the factorization packed as LAPACK's getrf leaves it (U in
// the upper triangle, L's multipliers below the diagonal, L's unit diagonal implied), the pivots
// (int32, 1-based: row i was swapped with row pivots[i] - 1, in order), and info (int32 [...]: 0,
// or the 1-based index of the first zero on U's diagonal).
struct LUFactorization {
  Tensor LU;
  Tensor pivots;
  Tensor info;
};

// torch.linalg.lu's and torch.lu_unpack's results: A = P L U.
struct PLU {
  Tensor P;
  Tensor L;
  Tensor U;
};

// torch.linalg.lu_factor_ex: LU with partial pivoting of A [..., m, n] of any shape, k = min(m, n),
// as LAPACK's getrf: LU [..., m, n], pivots [..., k]; pivot = false: no row swaps (pivots 1..k;
// PyTorch has that only on CUDA). No error where A is singular: info says where. Differentiable
// in A through the elimination (the pivots are held fixed), which is PyTorch's gradient where U's
// diagonal has no zero.
LUFactorization lu_factor_ex(const Tensor& a, bool pivot = true);

// torch.linalg.lu_factor: (LU, pivots), lu_factor_ex's, and a LinAlgError (PyTorch's message)
// where U's diagonal has a zero, which lu_solve would divide by (one read back, as PyTorch's).
std::pair<Tensor, Tensor> lu_factor(const Tensor& a, bool pivot = true);

// torch.linalg.lu: (P [..., m, m], L [..., m, k] unit lower triangular, U [..., k, n]) with
// A = P L U; a singular A is no error. pivot = false: P is an empty tensor and A = L U.
PLU lu(const Tensor& a, bool pivot = true);

// torch.linalg.lu_solve: X with A X = B for A given as lu_factor's (LU [..., n, n], pivots
// [..., n] int32), B [..., n, r] (batch dims broadcast with LU's); adjoint: A^T X = B; left =
// false: X A = B (X A^T = B with adjoint). Differentiable in LU and B. Pivots outside 1..n are a
// ValueError (their range read back once, as PyTorch's check does); a zero on U's diagonal gives
// inf and NaN, as PyTorch's.
Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left = true,
                bool adjoint = false);

// torch.linalg.qr: (Q, R) with A = Q R for A [..., m, n] of any shape, k = min(m, n), by
// Householder reflections with LAPACK's signs (geqrf: R's diagonal is -sign(a) |column| where a
// reflection is made), so Q and R are PyTorch's, not just a QR. mode "reduced": Q [..., m, k]
// with orthonormal columns, R [..., k, n] upper triangular; "complete": Q [..., m, m] orthogonal,
// R [..., m, n]; "r": R alone (Q an empty tensor). A ValueError for another mode. Differentiable
// in every mode, by PyTorch's closed form (inf or NaN where A's rank is below min(m, n)), which
// "r" gets too (PyTorch refuses it); "complete" where m > n, whose last m - n columns of Q are
// not determined by A and which PyTorch refuses, through the reflections' steps.
std::pair<Tensor, Tensor> qr(const Tensor& a, std::string_view mode = "reduced");

// torch.linalg.eigh: (eigenvalues [..., n] in ascending order, eigenvectors [..., n, n] as
// columns) of the symmetric A, reading its lower triangle (uplo "U": its upper one), by cyclic
// Jacobi rotations to convergence (Note [Symmetric eigendecomposition by Jacobi rotations] in
// runtime/ops_orthogonal.cpp). An eigenvector's sign is arbitrary, as LAPACK's is (PyTorch's
// and ferry's may differ). The gradient is PyTorch's closed form, symmetric like A; where two
// eigenvalues are equal the eigenvectors' part of it between them is zero (PyTorch's is inf or
// NaN). A ValueError for a uplo other than "L" or "U"; a LinAlgError where the rotations do not
// converge (a NaN or inf in A).
std::pair<Tensor, Tensor> eigh(const Tensor& a, std::string_view uplo = "L");

// torch.linalg.eigvalsh: eigh's eigenvalues alone.
Tensor eigvalsh(const Tensor& a, std::string_view uplo = "L");

// torch.linalg.svd's results: A = U diag(S) Vh.
struct SVD {
  Tensor U;
  Tensor S;
  Tensor Vh;
};

// torch.linalg.svd: the singular value decomposition of A [..., m, n] of any shape, k = min(m,
// n): S [..., k] in descending order; full_matrices: U [..., m, m] and Vh [..., n, n]
// orthogonal; otherwise U [..., m, k] and Vh [..., k, n] with orthonormal columns and rows. By
// LAPACK's gesdd on the CPU, and on the other devices by one-sided Jacobi rotations (Note
// [Singular value decomposition by one-sided Jacobi rotations] in runtime/ops_svd.cpp). A
// singular vector's sign is arbitrary, as LAPACK's is (U's column and Vh's row change sign
// together). The gradient is PyTorch's closed form (of the first k columns of U and rows of Vh
// where full_matrices); where two singular values are equal or one is zero, the parts of it
// that divide by their gap or by it are zero (PyTorch's are inf or NaN). A LinAlgError where
// the decomposition does not converge (a NaN or an inf in A).
SVD svd(const Tensor& a, bool full_matrices = true);

// torch.linalg.svdvals: svd's S alone. Its gradient U diag(gS) Vh is defined at repeated
// singular values too.
Tensor svdvals(const Tensor& a);

// The tolerance of pinv and matrix_rank, PyTorch's rule: singular values (eigenvalues' magnitudes
// with hermitian) at or below max(atol, rtol * the largest) count as zero. Neither given: atol 0
// and rtol = eps(dtype) * max(m, n); atol alone (above zero): rtol 0.
struct Tolerance {
  std::optional<double> atol;
  std::optional<double> rtol;
};

// torch.linalg.pinv: the Moore-Penrose pseudo-inverse [..., n, m] of A [..., m, n], from its SVD
// (hermitian: from eigh, reading A's lower triangle), singular values within the tolerance taken
// as zero. The gradient is PyTorch's closed form (pinv_backward), defined where the rank does
// not change.
Tensor pinv(const Tensor& a, Tolerance tol = {}, bool hermitian = false);

// torch.linalg.matrix_rank: the number of singular values above the tolerance, i64 [...].
Tensor matrix_rank(const Tensor& a, Tolerance tol = {}, bool hermitian = false);

// torch.linalg.matrix_norm over the two `dims`: ord "fro" (the default) or "nuc" (the sum of
// the singular values); 2 and -2 the largest and smallest singular value; 1 and -1 the largest
// and smallest column sum of |A|; inf and -inf (HUGE_VAL) those of the row sums. A ValueError
// for another order, a ShapeError for A of fewer than 2 dims or a max or min over zero elements.
Tensor matrix_norm(const Tensor& a, std::string_view ord = "fro",
                   std::pair<std::int64_t, std::int64_t> dims = {-2, -1}, bool keepdim = false);
Tensor matrix_norm(const Tensor& a, double ord,
                   std::pair<std::int64_t, std::int64_t> dims = {-2, -1}, bool keepdim = false);

// torch.linalg.lstsq's results. Empty tensors where the driver does not give them, as PyTorch's.
struct Lstsq {
  Tensor solution;         // [..., n, k] (B a vector: [..., n])
  Tensor residuals;        // [..., k]: |A X - B|^2 per column, where m > n, the driver is not
                           // gelsy and (but for gels) every matrix has rank n
  Tensor rank;             // i64 [...]: gelsy, gelsd, gelss
  Tensor singular_values;  // [..., min(m, n)]: gelsd, gelss
};

// torch.linalg.lstsq: the least-squares solution X of A X = B for A [..., m, n], B [..., m, k]
// (or [..., m] where B has one dim fewer than A), batch dims broadcast: the one of least norm,
// singular values of A at or below rcond times the largest taken as zero (rcond: eps(dtype) *
// max(m, n) when not given). The CPU runs the LAPACK driver named, as PyTorch's CPU does (gels: QR,
// A taken to have full rank, a LinAlgError where R is exactly singular; gelsy: QR with column
// pivoting; gelsd, gelss: the SVD); other devices compute pinv(A) B from the SVD, every driver's
// solution where A has full rank. The driver decides which of the other results are given, as
// in PyTorch. "gelsy" (PyTorch's default on the CPU) is the default on every device. The
// solution's gradient is PyTorch's (that of pinv(A) B); the other results have none.
// A ValueError for another driver, a ShapeError where m does not match, a DTypeError where A and
// B differ.
Lstsq lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond = std::nullopt,
            std::string_view driver = "gelsy");

// torch.linalg.matrix_exp: exp(A) of each square matrix of A [..., n, n], by scaling and squaring
// with the [13/13] Pade approximant (Note [Matrix exponential by scaling and squaring] in
// runtime/ops_matrix_functions.cpp): some six matmuls and a solve, then one squaring per power
// of two by which A's 1-norm exceeds 5.4 (one host read). The gradient is PyTorch's (a block of
// the exponential of a 2n x 2n matrix), second order included.
Tensor matrix_exp(const Tensor& a);

// torch.linalg.matrix_power: A^n for square A [..., m, m] and any integer n, by repeated
// squaring (PyTorch's order of products); n = 0 gives the identity (of zero gradient), n < 0
// powers inv(A) (a DTypeError for an integer A, which n >= 0 takes). Differentiates through its
// products.
Tensor matrix_power(const Tensor& a, std::int64_t n);

}  // namespace linalg

// torch.lu_unpack: (P, L, U) from lu_factor's LU [..., m, n] and pivots [..., min(m, n)] (int32,
// 1-based). unpack_data = false: L and U empty tensors; unpack_pivots = false: P one. Pivots
// outside 1..m are a ValueError (their range read back once, as PyTorch's check does).
linalg::PLU lu_unpack(const Tensor& lu, const Tensor& pivots, bool unpack_data = true,
                      bool unpack_pivots = true);

// torch.logdet: log(det A), NaN where det < 0 and -inf where A is singular.
Tensor logdet(const Tensor& a);

// torch.cholesky_solve(B, L, upper): X with A X = B given A's Cholesky factor L (A = L L^T; upper:
// A = U^T U), B [..., n, k]. Two triangular solves, reading L's lower triangle (upper: U's
// upper one). Its gradient with respect to the factor is zero on the triangle not read; PyTorch's
// treats the factor as a full matrix and gives that triangle one, which changes nothing the op
// computes (and a factor made by tril or cholesky passes none of it on).
Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper = false);

}  // namespace ferry
