// runtime/cpu/cpu_kernels_lapack.cpp — the fused kernels of cholesky, lu_factor_ex and eigh on
// the CPU: LAPACK's potrf, getrf and syevd from the OpenBLAS ferry links
// (docs/kernel-contract.md, "cholesky", "lu_factor_ex" and "eigh").
//
// Note [LAPACK through OpenBLAS]
// The factorizations are compositions that run on every device and differentiate through their
// steps (Note [Linear algebra as compositions] in runtime/ops_factorize.cpp), but on the CPU each
// of their thousands of op calls is a dispatch over a few hundred bytes, 30 to 150 times slower
// than LAPACK (docs/linalg.md). OpenBLAS ships LAPACK; where the BLAS found at build time has it
// (CMake's FERRY_BLAS_HAS_LAPACK), these kernels call it, and the core runs them where no
// gradient is recorded (a fused composite op, Note [Composite ops] in ferry/op.hpp); with a
// gradient, or without LAPACK, the composition runs. eigh's rotations run without autograd
// anyway (its gradient is attached after, in closed form), so syevd serves it with a gradient
// too. LAPACK is column-major and ferry row-major:
// a row-major matrix is its transpose to LAPACK. Cholesky of a symmetric matrix needs no copy
// (the row-major lower triangle is the column-major upper one), LU does (getrf of A^T is not
// LU of A), so its matrices are transposed into a scratch buffer and back. The batch is split
// over threads (OpenBLAS's OpenMP build runs single-threaded inside a parallel region), a
// single large matrix left to LAPACK's own threads.
#include "cpu/cpu_backend.hpp"

#ifdef FERRY_HAVE_LAPACK

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/cpu_loops.hpp"

// LAPACK's Fortran interface as OpenBLAS exports it (32-bit integers; the trailing length of
// the character argument, gfortran's convention, is passed as 1).
extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, std::size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t,
             std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t,
             std::size_t);
}

namespace ferry::cpu {
namespace {

void potrf(const char* uplo, int n, float* a, int* info) { spotrf_(uplo, &n, a, &n, info, 1); }
void potrf(const char* uplo, int n, double* a, int* info) { dpotrf_(uplo, &n, a, &n, info, 1); }
void getrf(int m, int n, float* a, int* ipiv, int* info) { sgetrf_(&m, &n, a, &m, ipiv, info); }
void getrf(int m, int n, double* a, int* ipiv, int* info) { dgetrf_(&m, &n, a, &m, ipiv, info); }
void syevd(int n, float* a, float* w, float* work, int lwork, int* iwork, int liwork, int* info) {
  ssyevd_("V", "U", &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
void syevd(int n, double* a, double* w, double* work, int lwork, int* iwork, int liwork,
           int* info) {
  dsyevd_("V", "U", &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
}

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

// The kernel of `op`: f32 or f64 (LAPACK has no 16-bit types; the core widens those first).
KernelFn f32_or_f64(const char* op, void (*f32)(const OpCall&), void (*f64)(const OpCall&)) {
  return [op, f32, f64](DeviceImpl&, const OpCall& c) {
    const DType dtype = c.inputs.at(0).dtype;
    if (dtype == DType::f32) return f32(c);
    if (dtype == DType::f64) return f64(c);
    throw DTypeError(fmt::format("{}: the cpu kernel takes f32 and f64", op));
  };
}

}  // namespace

void add_lapack_kernels(KernelTable& table) {
  table.emplace_back(OpId::cholesky,
                     f32_or_f64("cholesky", cholesky_kernel<float>, cholesky_kernel<double>));
  table.emplace_back(OpId::lu_factor_ex,
                     f32_or_f64("lu_factor_ex", lu_factor_kernel<float>, lu_factor_kernel<double>));
  table.emplace_back(OpId::eigh, f32_or_f64("eigh", eigh_kernel<float>, eigh_kernel<double>));
}

}  // namespace ferry::cpu

#else

namespace ferry::cpu {
// No LAPACK in the BLAS found at build time: cholesky, lu_factor_ex and eigh run as
// compositions.
void add_lapack_kernels(KernelTable&) {}
}  // namespace ferry::cpu

#endif
