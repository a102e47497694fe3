// runtime/cpu/cpu_kernels_lapack.cpp — the fused kernels of the factorizations on the CPU:
// LAPACK's potrf, getrf, syevd, geqrf with orgqr, gesdd and the least-squares drivers (gels,
// gelsy, gelsd, gelss), from the OpenBLAS ferry links, for cholesky, lu_factor_ex, eigh, qr, svd
// and lstsq; BLAS's trsm, which every BLAS has, for
// solve_triangular; and the LU family's pivots turned into a row permutation, LAPACK's laswp order
// (docs/kernel-contract.md, "cholesky", "lu_factor_ex", "eigh", "qr", "solve_triangular" and
// "lu_pivots_to_permutation").
//
// Note [LAPACK through OpenBLAS]
// The factorizations are compositions that run on every device (Note [Linear algebra as
// compositions] in runtime/ops_factorize.cpp), but on the CPU each of their thousands of op calls
// is a dispatch over a few hundred bytes, 30 to 400 times slower than LAPACK (docs/linalg.md).
// OpenBLAS ships LAPACK; where the BLAS found at build time has it (CMake's
// FERRY_BLAS_HAS_LAPACK), these kernels call it. The core runs cholesky's, lu_factor_ex's,
// solve_triangular's, eigh's, qr's, svd's and lstsq's whether or not a gradient is recorded: their
// front-ends run either path untracked and record the gradient in closed form (Note [Closed-form
// gradients of the factorizations] in runtime/autograd/formulas_linalg.cpp; eigh's is attached
// after its rotations; qr's complete mode with m > n alone differentiates through its Householder
// steps; lstsq's is PyTorch's, through pinv).
// Without LAPACK the compositions run (trsm and the pivots' permutation aside). LAPACK is
// column-major and ferry row-major: a row-major matrix is its transpose to LAPACK. Cholesky of a
// symmetric matrix needs no copy (the row-major lower triangle is the column-major upper one), LU
// and QR do (getrf of A^T is not LU of A), so their matrices are transposed into a scratch buffer
// and back; trsm takes row-major operands itself (CBLAS). The batch is split over threads
// (OpenBLAS's OpenMP build runs single-threaded inside a parallel region), a single large matrix
// left to LAPACK's own threads.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"

namespace ferry::cpu {
namespace {

// [..., m, n] contiguous: the batch count and m, n, within LAPACK's 32-bit sizes.
struct Matrices {
  std::int64_t count, m, n;
};
Matrices matrices_of(const TensorArg& x, const char* op) {
  if (x.ndim() < 2 || !x.is_contiguous())
    throw ShapeError(fmt::format("{}: the cpu kernel takes contiguous [..., m, n]", op));
  const std::int64_t m = x.sizes[std::size_t(x.ndim() - 2)], n = x.sizes.back();
  if (m * n > std::numeric_limits<int>::max())
    throw ShapeError(fmt::format("{}: the cpu kernel takes matrices of under 2^31 entries", op));
  return {m * n == 0 ? 0 : x.numel() / (m * n), m, n};
}

// Matrices per thread's share: enough work per share that threading pays.
std::int64_t grain(std::int64_t m, std::int64_t n) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, m * n));
}

// The kernel of `op`: f32 or f64 (LAPACK has no 16-bit types; the core widens those first).
KernelFn f32_or_f64(const char* op, void (*f32)(const OpCall&), void (*f64)(const OpCall&)) {
  return [op, f32, f64](DeviceImpl&, const OpCall& c) {
    const DType dtype = c.inputs.at(0).dtype;
    if (dtype == DType::f32) return f32(c);
    if (dtype == DType::f64) return f64(c);
    throw DTypeError(fmt::format("{}: the cpu kernel takes f32 and f64", op));
  };
}

void trsm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_DIAG diag, int m, int n, const float* a, int lda,
          float* b) {
  cblas_strsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, m, n, 1.0f, a, lda, b, n);
}
void trsm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_DIAG diag, int m, int n, const double* a, int lda,
          double* b) {
  cblas_dtrsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, m, n, 1.0, a, lda, b, n);
}

// X with T X = B (left) or X T = B, T [..., n, n] triangular (one matrix for every B, or one
// each), B [..., rows, cols]: B copied to X and solved in place.
template <typename T> void solve_triangular_kernel(const OpCall& call) {
  const TensorArg& t = call.inputs.at(0);
  const TensorArg& b = call.inputs.at(1);
  const Matrices zt = matrices_of(t, "solve_triangular");
  const Matrices zb = matrices_of(b, "solve_triangular");
  const bool left = call.attrs.b("left");
  const std::int64_t n = zt.n;
  if (zt.m != n || (left ? zb.m : zb.n) != n || (zt.count != 1 && zt.count != zb.count))
    throw ShapeError(
        "solve_triangular: the cpu kernel takes T [n, n] or [..., n, n] and B of "
        "T's batch");
  const CBLAS_SIDE side = left ? CblasLeft : CblasRight;
  const CBLAS_UPLO uplo = call.attrs.b("upper") ? CblasUpper : CblasLower;
  const CBLAS_DIAG diag = call.attrs.b("unitriangular") ? CblasUnit : CblasNonUnit;
  const T* a = t.data<T>();
  const T* rhs = b.data<T>();
  T* x = call.outputs.at(0).data<T>();
  const std::int64_t size = zb.m * zb.n, step = zt.count == 1 ? 0 : n * n;
  std::memcpy(x, rhs, std::size_t(zb.count * size) * sizeof(T));
  parallel_range(zb.count, grain(n, n + size), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      trsm(side, uplo, diag, int(zb.m), int(zb.n), a + i * step, int(n), x + i * size);
  });
}

// The permutation [..., m] (i64) that 0-based pivots [..., k] (any integer dtype) make of m rows:
// 0..m-1, then entries i and pivots[i] swapped for i = 0..k-1 (Note [LU's pivots as a
// permutation] in runtime/ops_lu.cpp, whose composition makes k where-and-gather steps of it).
// The core checks the pivots' range; the kernel checks it again before writing anything, as
// an index out of range would write out of bounds.
template <typename P> void pivots_to_permutation(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& out = call.outputs.at(0);
  const std::int64_t m = call.attrs.i("rows");
  if (!in.is_contiguous() || !out.is_contiguous() || in.ndim() < 1 || out.sizes.back() != m)
    throw ShapeError(
        "lu_pivots_to_permutation: the cpu kernel takes contiguous pivots [..., k] and "
        "permutation [..., rows]");
  const std::int64_t k = in.sizes.back();
  const std::int64_t count = m == 0 ? 0 : out.numel() / m;
  const P* pivots = in.data<P>();
  for (std::int64_t i = 0; i < count * k; ++i)
    if (std::int64_t(pivots[i]) < 0 || std::int64_t(pivots[i]) >= m)
      throw ValueError(fmt::format("lu_pivots_to_permutation: pivot {} is outside 0..{}",
                                   std::int64_t(pivots[i]), m - 1));
  std::int64_t* perm = out.data<std::int64_t>();
  parallel_range(count, grain(1, m + k), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      std::int64_t* row = perm + i * m;
      const P* p = pivots + i * k;
      for (std::int64_t r = 0; r < m; ++r) row[r] = r;
      for (std::int64_t j = 0; j < k; ++j) std::swap(row[j], row[std::int64_t(p[j])]);
    }
  });
}

}  // namespace
}  // namespace ferry::cpu

#ifdef FERRY_HAVE_LAPACK

// LAPACK's Fortran interface as OpenBLAS exports it (32-bit integers; the trailing length of
// the character argument, gfortran's convention, is passed as 1).
extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, std::size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t,
             std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t,
             std::size_t);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, std::size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, std::size_t);
void sgels_(const char* trans, const int* m, const int* n, const int* nrhs, float* a,
            const int* lda, float* b, const int* ldb, float* work, const int* lwork, int* info,
            std::size_t);
void dgels_(const char* trans, const int* m, const int* n, const int* nrhs, double* a,
            const int* lda, double* b, const int* ldb, double* work, const int* lwork, int* info,
            std::size_t);
void sgelsy_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b,
             const int* ldb, int* jpvt, const float* rcond, int* rank, float* work,
             const int* lwork, int* info);
void dgelsy_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b,
             const int* ldb, int* jpvt, const double* rcond, int* rank, double* work,
             const int* lwork, int* info);
void sgelsd_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b,
             const int* ldb, float* s, const float* rcond, int* rank, float* work, const int* lwork,
             int* iwork, int* info);
void dgelsd_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b,
             const int* ldb, double* s, const double* rcond, int* rank, double* work,
             const int* lwork, int* iwork, int* info);
void sgelss_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b,
             const int* ldb, float* s, const float* rcond, int* rank, float* work, const int* lwork,
             int* info);
void dgelss_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b,
             const int* ldb, double* s, const double* rcond, int* rank, double* work,
             const int* lwork, int* info);
}

namespace ferry::cpu {
namespace {

void potrf(const char* uplo, int n, float* a, int* info) { spotrf_(uplo, &n, a, &n, info, 1); }
void potrf(const char* uplo, int n, double* a, int* info) { dpotrf_(uplo, &n, a, &n, info, 1); }
void getrf(int m, int n, float* a, int* ipiv, int* info) { sgetrf_(&m, &n, a, &m, ipiv, info); }
void getrf(int m, int n, double* a, int* ipiv, int* info) { dgetrf_(&m, &n, a, &m, ipiv, info); }
void geqrf(int m, int n, float* a, float* tau, float* work, int lwork, int* info) {
  sgeqrf_(&m, &n, a, &m, tau, work, &lwork, info);
}
void geqrf(int m, int n, double* a, double* tau, double* work, int lwork, int* info) {
  dgeqrf_(&m, &n, a, &m, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, float* a, const float* tau, float* work, int lwork, int* info) {
  sorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, double* a, const double* tau, double* work, int lwork, int* info) {
  dorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, info);
}
void syevd(int n, float* a, float* w, float* work, int lwork, int* iwork, int liwork, int* info) {
  ssyevd_("V", "U", &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
void syevd(int n, double* a, double* w, double* work, int lwork, int* iwork, int liwork,
           int* info) {
  dsyevd_("V", "U", &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
}

void gesdd(const char* jobz, int m, int n, float* a, float* s, float* u, int ldu, float* vt,
           int ldvt, float* work, int lwork, int* iwork, int* info) {
  sgesdd_(jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}
void gesdd(const char* jobz, int m, int n, double* a, double* s, double* u, int ldu, double* vt,
           int ldvt, double* work, int lwork, int* iwork, int* info) {
  dgesdd_(jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}

// The four least-squares drivers on a column-major A [m, n] (lda m) and B [ldb, nrhs]; one
// signature for all (jpvt for gelsy, s for gelsd and gelss, iwork for gelsd, each unused by the
// others). lwork -1 asks for the sizes: work[0] (and, for gelsd, iwork[0]).
enum class LstsqDriver { gels, gelsy, gelsd, gelss };
struct LstsqArgs {
  int m, n, nrhs, ldb;
  double rcond;
};
template <typename T> void gelsx(LstsqDriver d, const LstsqArgs& x, T* a, T* b, int* jpvt, T* s,
                                 int* rank, T* work, int lwork, int* iwork, int* info) {
  constexpr bool f32 = std::is_same_v<T, float>;
  const T rcond = T(x.rcond);
  switch (d) {
    case LstsqDriver::gels:
      *rank = std::min(x.m, x.n);
      if constexpr (f32)
        sgels_("N", &x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, work, &lwork, info, 1);
      else
        dgels_("N", &x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, work, &lwork, info, 1);
      return;
    case LstsqDriver::gelsy:
      if constexpr (f32)
        sgelsy_(&x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, jpvt, &rcond, rank, work, &lwork, info);
      else
        dgelsy_(&x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, jpvt, &rcond, rank, work, &lwork, info);
      return;
    case LstsqDriver::gelsd:
      if constexpr (f32)
        sgelsd_(&x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, s, &rcond, rank, work, &lwork, iwork,
                info);
      else
        dgelsd_(&x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, s, &rcond, rank, work, &lwork, iwork,
                info);
      return;
    case LstsqDriver::gelss:
      if constexpr (f32)
        sgelss_(&x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, s, &rcond, rank, work, &lwork, info);
      else
        dgelss_(&x.m, &x.n, &x.nrhs, a, &x.m, b, &x.ldb, s, &rcond, rank, work, &lwork, info);
      return;
  }
}

// L with A = L L^T from A's lower triangle; L's upper triangle zero. Where the leading minor of
// order k is not positive-definite, L[k-1][k-1] is NaN (the core's check names it).
template <typename T> void cholesky_kernel(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const Matrices z = matrices_of(in, "cholesky");
  if (z.m != z.n) throw ShapeError("cholesky: the cpu kernel takes square matrices");
  const std::int64_t n = z.n;
  const T* a = in.data<T>();
  T* l = call.outputs.at(0).data<T>();
  parallel_range(z.count, grain(n, n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      T* out = l + i * n * n;
      std::memcpy(out, a + i * n * n, std::size_t(n * n) * sizeof(T));
      int info = 0;
      potrf("U", int(n), out, &info);  // the column-major upper triangle: row-major lower
      for (std::int64_t r = 0; r < n; ++r) std::fill(out + r * n + r + 1, out + (r + 1) * n, T(0));
      if (info > 0) out[(info - 1) * (n + 1)] = std::numeric_limits<T>::quiet_NaN();
    }
  });
}

// LU with partial pivoting of each [m, n]: LU packed (getrf's), pivots (int32, 1-based) and
// info (int32: 0, or the first zero on U's diagonal, 1-based).
template <typename T> void lu_factor_kernel(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const Matrices z = matrices_of(in, "lu_factor_ex");
  const std::int64_t m = z.m, n = z.n, k = std::min(m, n);
  const T* a = in.data<T>();
  T* lu = call.outputs.at(0).data<T>();
  std::int32_t* pivots = call.outputs.at(1).data<std::int32_t>();
  std::int32_t* info = call.outputs.at(2).data<std::int32_t>();
  parallel_range(z.count, grain(m, n), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> scratch(static_cast<std::size_t>(m * n));
    std::vector<int> ipiv(static_cast<std::size_t>(k));
    for (std::int64_t i = b; i < e; ++i) {
      const T* x = a + i * m * n;
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < n; ++c) scratch[std::size_t(c * m + r)] = x[r * n + c];
      int status = 0;
      getrf(int(m), int(n), scratch.data(), ipiv.data(), &status);
      T* y = lu + i * m * n;
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < n; ++c) y[r * n + c] = scratch[std::size_t(c * m + r)];
      for (std::int64_t j = 0; j < k; ++j) pivots[i * k + j] = ipiv[std::size_t(j)];
      info[i] = status;
    }
  });
}

// Q and R of each [m, n] by Householder reflections (geqrf, then orgqr for Q's columns), k =
// min(m, n): Q [m, q] with q = k (reduced), m (complete) or 0 (R alone), R [r, n] with r = k or
// m, zero below the diagonal. The reflections are LAPACK's, whose signs the composition follows
// (Note [QR by Householder reflections] in runtime/ops_orthogonal.cpp).
template <typename T> void qr_kernel(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const Matrices z = matrices_of(in, "qr");
  const std::int64_t m = z.m, n = z.n, k = std::min(m, n);
  const TensorArg& q_out = call.outputs.at(0);
  const TensorArg& r_out = call.outputs.at(1);
  const std::int64_t q = q_out.sizes.back(), r = r_out.sizes[std::size_t(r_out.ndim() - 2)];
  if ((q != 0 && q != k && q != m) || (r != k && r != m))
    throw ShapeError("qr: the cpu kernel takes Q [..., m, k, m or 0] and R [..., k or m, n]");
  const T* a = in.data<T>();
  T* qs = q_out.data<T>();
  T* rs = r_out.data<T>();
  parallel_range(z.count, grain(m, n * 2), [&](std::int64_t b, std::int64_t e) {
    // Column-major scratch for the reflectors (m x n) and for Q (m x q, the k reflectors first),
    // and the workspace both calls ask for.
    std::vector<T> scratch(static_cast<std::size_t>(m * n)), tau(static_cast<std::size_t>(k) + 1);
    std::vector<T> qbuf(static_cast<std::size_t>(m * q));
    T size_qr = 0, size_q = 0;
    int info = 0, query = -1;
    geqrf(int(m), int(n), scratch.data(), tau.data(), &size_qr, query, &info);
    if (q > 0) orgqr(int(m), int(q), int(k), qbuf.data(), tau.data(), &size_q, query, &info);
    std::vector<T> work(static_cast<std::size_t>(std::max(size_qr, size_q)) + 1);
    const int lwork = int(work.size());
    for (std::int64_t i = b; i < e; ++i) {
      const T* x = a + i * m * n;
      for (std::int64_t row = 0; row < m; ++row)
        for (std::int64_t c = 0; c < n; ++c) scratch[std::size_t(c * m + row)] = x[row * n + c];
      geqrf(int(m), int(n), scratch.data(), tau.data(), work.data(), lwork, &info);
      T* ri = rs + i * r * n;
      for (std::int64_t row = 0; row < r; ++row)
        for (std::int64_t c = 0; c < n; ++c)
          ri[row * n + c] = c >= row ? scratch[std::size_t(c * m + row)] : T(0);
      if (q == 0) continue;
      std::copy(scratch.begin(), scratch.begin() + k * m, qbuf.begin());
      orgqr(int(m), int(q), int(k), qbuf.data(), tau.data(), work.data(), lwork, &info);
      T* qi = qs + i * m * q;
      for (std::int64_t row = 0; row < m; ++row)
        for (std::int64_t c = 0; c < q; ++c) qi[row * q + c] = qbuf[std::size_t(c * m + row)];
    }
  });
}

// Eigenvalues (ascending) and eigenvectors (as columns) of each symmetric [n, n], by LAPACK's
// divide and conquer (syevd, which scales a matrix whose entries are huge or tiny). A matrix
// holding a NaN or an inf is not handed to LAPACK, and it or one LAPACK fails on gets NaN
// eigenvalues (the core's check reports it).
template <typename T> void eigh_kernel(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const Matrices z = matrices_of(in, "eigh");
  if (z.m != z.n) throw ShapeError("eigh: the cpu kernel takes square matrices");
  const std::int64_t n = z.n;
  const T* a = in.data<T>();
  T* values = call.outputs.at(0).data<T>();
  T* vectors = call.outputs.at(1).data<T>();
  parallel_range(z.count, grain(n, n * 4), [&](std::int64_t b, std::int64_t e) {
    // The workspace sizes syevd asks for.
    T work_size = 0;
    int iwork_size = 0, info = 0, query = -1;
    std::vector<T> scratch(static_cast<std::size_t>(n * n));
    syevd(int(n), scratch.data(), values, &work_size, query, &iwork_size, query, &info);
    std::vector<T> work(static_cast<std::size_t>(work_size) + 1);
    std::vector<int> iwork(static_cast<std::size_t>(iwork_size) + 1);
    for (std::int64_t i = b; i < e; ++i) {
      const T* x = a + i * n * n;
      T* w = values + i * n;
      T* v = vectors + i * n * n;
      const bool finite = std::all_of(x, x + n * n, [](T t) { return std::isfinite(t); });
      info = 0;
      if (finite) {
        std::copy(x, x + n * n, scratch.begin());
        syevd(int(n), scratch.data(), w, work.data(), int(work.size()), iwork.data(),
              int(iwork.size()), &info);
      }
      if (!finite || info != 0) {
        std::fill(w, w + n, std::numeric_limits<T>::quiet_NaN());
        std::fill(v, v + n * n, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      // LAPACK's column-major columns are the eigenvectors: v[r][c] = component r of vector c.
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < n; ++c) v[r * n + c] = scratch[std::size_t(c * n + r)];
    }
  });
}

// U, S (descending) and Vh of each [m, n] by LAPACK's divide and conquer (gesdd, PyTorch's
// driver on the CPU), k = min(m, n): U [m, m] and Vh [n, n] where the outputs are that large
// (full_matrices), U [m, k] and Vh [k, n], or S alone where they have no columns and rows (gesdd's
// jobz 'N', a third of the work). No transposes: the row-major A is the column-major
// A^T = U' S V'^T, so A = V' S U'^T, and gesdd's column-major V'^T (k or m rows, m columns) is U
// row-major, its U' (n rows, k or n columns) Vh row-major. A matrix holding a NaN or an inf is not
// handed to LAPACK, and it or one LAPACK fails on gets NaN singular values (the core's check
// reports it).
template <typename T> void svd_kernel(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const Matrices z = matrices_of(in, "svd");
  const std::int64_t m = z.m, n = z.n, k = std::min(m, n);
  const TensorArg& u_out = call.outputs.at(0);
  const TensorArg& vh_out = call.outputs.at(2);
  const std::int64_t uc = u_out.sizes.back(), vr = vh_out.sizes[std::size_t(vh_out.ndim() - 2)];
  const bool full = uc == m && vr == n, none = uc == 0 && vr == 0;
  if (!full && !none && (uc != k || vr != k))
    throw ShapeError(
        "svd: the cpu kernel takes U [..., m, m] and Vh [..., n, n], U [..., m, k] and Vh [..., "
        "k, n], or U [..., m, 0] and Vh [..., 0, n] (the singular values alone)");
  const char* jobz = full ? "A" : none ? "N" : "S";
  const int ldu = int(std::max<std::int64_t>(uc, 1)), ldvh = int(std::max<std::int64_t>(n, 1));
  const T* a = in.data<T>();
  T* us = u_out.data<T>();
  T* ss = call.outputs.at(1).data<T>();
  T* vhs = vh_out.data<T>();
  parallel_range(z.count, grain(m, n * 4), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> scratch(static_cast<std::size_t>(m * n));
    std::vector<int> iwork(static_cast<std::size_t>(8 * k) + 1);
    T work_size = 0;
    int info = 0;
    gesdd(jobz, int(n), int(m), scratch.data(), ss, vhs, ldvh, us, ldu, &work_size, -1,
          iwork.data(), &info);
    std::vector<T> work(static_cast<std::size_t>(work_size) + 1);
    for (std::int64_t i = b; i < e; ++i) {
      const T* x = a + i * m * n;
      T* si = ss + i * k;
      T* ui = us + i * m * uc;
      T* vhi = vhs + i * vr * n;
      const bool finite = std::all_of(x, x + m * n, [](T t) { return std::isfinite(t); });
      info = 0;
      if (finite) {
        std::copy(x, x + m * n, scratch.begin());
        gesdd(jobz, int(n), int(m), scratch.data(), si, vhi, ldvh, ui, ldu, work.data(),
              int(work.size()), iwork.data(), &info);
      }
      if (!finite || info != 0) {
        std::fill(si, si + k, std::numeric_limits<T>::quiet_NaN());
        std::fill(ui, ui + m * uc, std::numeric_limits<T>::quiet_NaN());
        std::fill(vhi, vhi + vr * n, std::numeric_limits<T>::quiet_NaN());
      }
    }
  });
}

// The least-squares solution of A X = B for each A [m, n] and B [m, k] (one batch: the core
// broadcasts them) by the LAPACK driver the attribute `driver` names, PyTorch's drivers on the
// CPU, with the attribute `rcond` (docs/kernel-contract.md, "lstsq"): X [n, k], the rank (gels:
// min(m, n), A taken to have full rank) and, for gelsd and gelss, A's singular values
// [min(m, n)] (zeros for the others). LAPACK takes A and B column-major, B in a [max(m, n), k]
// buffer whose first n rows it overwrites with X: both are transposed in, X out. A matrix holding
// a NaN or an inf is not handed to LAPACK; it, and one LAPACK fails on (gels: a zero on R's
// diagonal; gelsd and gelss: an SVD that did not converge), get rank -1 and NaN in X (the core's
// check words the error).
template <typename T> void lstsq_kernel(const OpCall& call) {
  const TensorArg& in = call.inputs.at(0);
  const Matrices z = matrices_of(in, "lstsq");
  const Matrices zb = matrices_of(call.inputs.at(1), "lstsq");
  const std::string& name = call.attrs.s("driver");
  const LstsqDriver d =
      name == "gels"    ? LstsqDriver::gels
      : name == "gelsy" ? LstsqDriver::gelsy
      : name == "gelsd" ? LstsqDriver::gelsd
      : name == "gelss"
          ? LstsqDriver::gelss
          : throw ValueError(fmt::format("lstsq: the cpu kernel has no driver '{}'", name));
  const std::int64_t m = z.m, n = z.n, k = zb.n, rows = std::max(m, n), mn = std::min(m, n);
  if (zb.m != m || zb.count != z.count || rows * k > std::numeric_limits<int>::max())
    throw ShapeError("lstsq: the cpu kernel takes A [..., m, n] and B [..., m, k], one batch");
  const LstsqArgs args{int(m), int(n), int(k), int(std::max<std::int64_t>(rows, 1)),
                       call.attrs.f("rcond")};
  const T* a = in.data<T>();
  const T* b = call.inputs.at(1).data<T>();
  T* x = call.outputs.at(0).data<T>();
  std::int64_t* rank = call.outputs.at(1).data<std::int64_t>();
  T* sv = call.outputs.at(2).data<T>();
  parallel_range(z.count, grain(rows, n + k), [&](std::int64_t first, std::int64_t end) {
    std::vector<T> sa(static_cast<std::size_t>(m * n)), sb(static_cast<std::size_t>(rows * k));
    std::vector<T> s(static_cast<std::size_t>(mn) + 1);
    std::vector<int> jpvt(static_cast<std::size_t>(n) + 1), iwork(1);
    T work_size = 0;
    int r = 0, info = 0;
    gelsx(d, args, sa.data(), sb.data(), jpvt.data(), s.data(), &r, &work_size, -1, iwork.data(),
          &info);
    std::vector<T> work(static_cast<std::size_t>(work_size) + 1);
    iwork.resize(static_cast<std::size_t>(std::max(iwork[0], 1)));
    for (std::int64_t i = first; i < end; ++i) {
      const T* ai = a + i * m * n;
      const T* bi = b + i * m * k;
      T* xi = x + i * n * k;
      T* si = sv + i * mn;
      const bool finite = std::all_of(ai, ai + m * n, [](T t) { return std::isfinite(t); });
      info = 0;
      if (finite) {
        for (std::int64_t row = 0; row < m; ++row) {
          for (std::int64_t c = 0; c < n; ++c) sa[std::size_t(c * m + row)] = ai[row * n + c];
          for (std::int64_t c = 0; c < k; ++c) sb[std::size_t(c * rows + row)] = bi[row * k + c];
        }
        std::fill(jpvt.begin(), jpvt.end(), 0);  // every column free to pivot
        gelsx(d, args, sa.data(), sb.data(), jpvt.data(), s.data(), &r, work.data(),
              int(work.size()), iwork.data(), &info);
      }
      const bool solved = finite && info == 0;
      rank[i] = solved ? r : -1;
      for (std::int64_t row = 0; row < n; ++row)
        for (std::int64_t c = 0; c < k; ++c)
          xi[row * k + c] =
              solved ? sb[std::size_t(c * rows + row)] : std::numeric_limits<T>::quiet_NaN();
      const bool values = solved && (d == LstsqDriver::gelsd || d == LstsqDriver::gelss);
      for (std::int64_t j = 0; j < mn; ++j) si[j] = values ? s[std::size_t(j)] : T(0);
    }
  });
}

}  // namespace
}  // namespace ferry::cpu

#endif  // FERRY_HAVE_LAPACK

namespace ferry::cpu {

void add_lapack_kernels(KernelTable& table) {
  table.emplace_back(OpId::lu_pivots_to_permutation, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_INT(c.inputs.at(0).dtype, "lu_pivots_to_permutation",
                       pivots_to_permutation<scalar_t>(c));
  });
  table.emplace_back(OpId::solve_triangular,
                     f32_or_f64("solve_triangular", solve_triangular_kernel<float>,
                                solve_triangular_kernel<double>));
#ifdef FERRY_HAVE_LAPACK
  table.emplace_back(OpId::cholesky,
                     f32_or_f64("cholesky", cholesky_kernel<float>, cholesky_kernel<double>));
  table.emplace_back(OpId::lu_factor_ex,
                     f32_or_f64("lu_factor_ex", lu_factor_kernel<float>, lu_factor_kernel<double>));
  table.emplace_back(OpId::eigh, f32_or_f64("eigh", eigh_kernel<float>, eigh_kernel<double>));
  table.emplace_back(OpId::qr, f32_or_f64("qr", qr_kernel<float>, qr_kernel<double>));
  table.emplace_back(OpId::svd, f32_or_f64("svd", svd_kernel<float>, svd_kernel<double>));
  table.emplace_back(OpId::lstsq, f32_or_f64("lstsq", lstsq_kernel<float>, lstsq_kernel<double>));
#endif
  // Without LAPACK in the BLAS found at build time, cholesky, lu_factor_ex and eigh run as
  // compositions.
}

}  // namespace ferry::cpu
