// runtime/cpu/cpu_blas.hpp — the CPU kernels' matrix products (matmul, the convolutions'
// im2col path): one home for which library runs them. Note [OpenBLAS's kernels] in
// cpu_blas.cpp says which and why.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::cpu {

// C [M, N] = op(A) op(B) + beta C, row-major; op transposes where ta / tb. Thread-safe; inside
// an OpenMP parallel region it runs on the calling thread alone.
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
          std::int64_t ldc);

// "OpenBLAS (Zen kernels)", and where f32 goes elsewhere, which library takes it and why:
// for the cpu device's driver string.
std::string blas_status();

// Logs, once, where OpenBLAS's kernels leave out the AVX2 the CPU has: a warning where
// nothing takes their place, info where oneDNN takes the f32 products.
void warn_about_blas_once();

}  // namespace ferry::cpu
