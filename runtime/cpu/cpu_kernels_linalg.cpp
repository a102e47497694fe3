// runtime/cpu/cpu_kernels_linalg.cpp — "matmul" on the CPU: [B, M, K] x [B, K, N]
// -> [B, M, N], the inputs strided views (a batch stride may be 0), the output
// contiguous (docs/kernel-contract.md).
//
// f32 goes to sgemm and f64 to dgemm (cpu_blas.hpp: OpenBLAS's, or oneDNN's sgemm where
// OpenBLAS's kernels leave out the CPU's widest vectors), one call per batch,
// straight on the caller's memory when each matrix has a unit stride in one of
// its two dims (a transposed view is passed transposed); otherwise the matrix is
// packed first. f16/bf16 are widened to f32, multiplied by sgemm and rounded
// back, except products with at most 8 rows on one side (cpu_kernels_matvec.cpp). Integers,
// and many small float matrices (where a BLAS call costs more
// than the work), use a plain loop parallel over output rows (accumulating in
// float, or double for f64); integer products wrap like PyTorch's.

#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_blas.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::cpu {
namespace {

// One operand: batch stride, row stride and column stride in elements.
struct Operand {
  std::int64_t batch, row, col;
};

Operand operand_of(const TensorArg& t) { return {t.strides[0], t.strides[1], t.strides[2]}; }

// Plain product for one output row: c[0..N) = sum_k a[k] * b[k, :], in Acc.
template <typename T, typename Acc> void naive_row(const T* a, std::int64_t a_col, const T* b,
                                                   const Operand& bs, T* c, std::int64_t N,
                                                   std::int64_t K, Acc* acc) {
  for (std::int64_t j = 0; j < N; ++j) acc[j] = Acc(0);
  for (std::int64_t k = 0; k < K; ++k) {
    const Acc av = Acc(a[k * a_col]);
    const T* brow = b + k * bs.row;
    if constexpr (std::is_integral_v<Acc>) {
      if (bs.col == 1) {
        for (std::int64_t j = 0; j < N; ++j)
          acc[j] = math::wrap_add(acc[j], math::wrap_mul(av, Acc(brow[j])));
      } else {
        for (std::int64_t j = 0; j < N; ++j)
          acc[j] = math::wrap_add(acc[j], math::wrap_mul(av, Acc(brow[j * bs.col])));
      }
    } else {
      if (bs.col == 1) {
        for (std::int64_t j = 0; j < N; ++j) acc[j] += av * Acc(brow[j]);
      } else {
        for (std::int64_t j = 0; j < N; ++j) acc[j] += av * Acc(brow[j * bs.col]);
      }
    }
  }
  for (std::int64_t j = 0; j < N; ++j) c[j] = T(acc[j]);
}

template <typename T> void naive_matmul(const OpCall& call) {
  using Acc = compute_t<T>;  // float for the 16-bit floats; the type itself otherwise
  const TensorArg &A = call.inputs[0], &B = call.inputs[1], &C = call.outputs[0];
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  const Operand as = operand_of(A), bs = operand_of(B);
  const T* a = A.data<T>();
  const T* b = B.data<T>();
  T* c = C.data<T>();
  parallel_range(nb * M,
                 std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, N * K)),
                 [&](std::int64_t begin, std::int64_t end) {
                   std::vector<Acc> acc(static_cast<std::size_t>(N));
                   for (std::int64_t r = begin; r < end; ++r) {
                     const std::int64_t bi = r / M, i = r % M;
                     naive_row<T, Acc>(a + bi * as.batch + i * as.row, as.col, b + bi * bs.batch,
                                       bs, c + r * N, N, K, acc.data());
                   }
                 });
}

// How sgemm can read a rows x cols matrix with strides (rs, cs) in place:
// row-major with leading dim `ld`, transposed or not. Strides of size-1 dims
// do not matter. ok == false: it has to be packed first.
struct BlasLayout {
  bool ok = false;
  bool trans = false;
  std::int64_t ld = 1;
};

BlasLayout blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  BlasLayout l;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<std::int64_t>(1, cols))) {
    l = {true, false, rows == 1 ? std::max<std::int64_t>(1, cols) : rs};
  } else if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<std::int64_t>(1, rows))) {
    l = {true, true, cols == 1 ? std::max<std::int64_t>(1, rows) : cs};
  }
  if (l.ld > INT_MAX) l.ok = false;
  return l;
}

// Copies a strided rows x cols matrix of T into a contiguous one of D (f32
// for the 16-bit floats, T itself otherwise).
template <typename T, typename D> void pack(const T* src, std::int64_t rows, std::int64_t cols,
                                            std::int64_t rs, std::int64_t cs, D* dst) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[i * cols + j] = D(src[i * rs + j * cs]);
}

// C (contiguous, M x N) = A (M x K) * B (K x N) through sgemm (F = float) or
// dgemm (F = double); `scratch` holds packed copies when a layout does not fit.
template <typename F> void gemm(const F* a, std::int64_t a_rs, std::int64_t a_cs, const F* b,
                                std::int64_t b_rs, std::int64_t b_cs, F* c, std::int64_t M,
                                std::int64_t N, std::int64_t K, std::vector<F>& scratch_a,
                                std::vector<F>& scratch_b) {
  BlasLayout la = blas_layout(M, K, a_rs, a_cs), lb = blas_layout(K, N, b_rs, b_cs);
  if (!la.ok) {
    scratch_a.resize(std::size_t(M * K));
    pack(a, M, K, a_rs, a_cs, scratch_a.data());
    a = scratch_a.data();
    la = {true, false, K};
  }
  if (!lb.ok) {
    scratch_b.resize(std::size_t(K * N));
    pack(b, K, N, b_rs, b_cs, scratch_b.data());
    b = scratch_b.data();
    lb = {true, false, N};
  }
  cpu::gemm(la.trans, lb.trans, M, N, K, a, la.ld, b, lb.ld, F(0), c, std::max<std::int64_t>(1, N));
}

// f32 through sgemm, f64 through dgemm, on the caller's memory where it can.
template <typename F> void blas_matmul(const OpCall& call) {
  const TensorArg &A = call.inputs[0], &B = call.inputs[1], &C = call.outputs[0];
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  const Operand as = operand_of(A), bs = operand_of(B);
  std::vector<F> sa, sb;
  for (std::int64_t i = 0; i < nb; ++i)
    gemm<F>(A.data<F>() + i * as.batch, as.row, as.col, B.data<F>() + i * bs.batch, bs.row, bs.col,
            C.data<F>() + i * M * N, M, N, K, sa, sb);
}

// f16/bf16: widen both operands of a batch, sgemm, round the result back.
template <typename T> void widened_matmul(const OpCall& call) {
  const TensorArg &A = call.inputs[0], &B = call.inputs[1], &C = call.outputs[0];
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  const Operand as = operand_of(A), bs = operand_of(B);
  std::vector<float> a(std::size_t(M * K)), b(std::size_t(K * N)), c(std::size_t(M * N)), unused_a,
      unused_b;
  T* out = C.data<T>();
  for (std::int64_t i = 0; i < nb; ++i) {
    pack(A.data<T>() + i * as.batch, M, K, as.row, as.col, a.data());
    pack(B.data<T>() + i * bs.batch, K, N, bs.row, bs.col, b.data());
    gemm<float>(a.data(), K, 1, b.data(), N, 1, c.data(), M, N, K, unused_a, unused_b);
    for (std::int64_t j = 0; j < M * N; ++j) out[i * M * N + j] = T(c[std::size_t(j)]);
  }
}

void matmul_kernel(DeviceImpl&, const OpCall& call) {
  const TensorArg &A = call.inputs.at(0), &B = call.inputs.at(1), &C = call.outputs.at(0);
  if (A.ndim() != 3 || B.ndim() != 3 || C.ndim() != 3 || A.dtype != B.dtype || A.dtype != C.dtype)
    throw ShapeError(
        "matmul: the cpu kernel expects [B, M, K] and [B, K, N] inputs and a [B, M, N] output "
        "of one dtype");
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  if (nb == 0 || M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: zeros, whatever the dtype
    const std::size_t elsize = dtype_size(C.dtype);
    std::memset(static_cast<char*>(C.buffer->host_ptr()) + C.offset * elsize, 0,
                std::size_t(nb * M * N) * elsize);
    return;
  }
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    throw ShapeError(
        "matmul: the cpu kernel supports matrices of at most 2^31 - 1 rows and columns");
  // One side of at most 8 rows (a token's activations, a vector): a pass over the other side,
  // read as it is (Note [Matrix-vector products on the CPU]).
  if (try_matvec(call)) return;
  // Many small products: one BLAS call each costs more than the arithmetic.
  const bool small = nb > 1 && M * N * K <= 32 * 32 * 32;
  switch (C.dtype) {
    case DType::f32:
      if (small)
        naive_matmul<float>(call);
      else
        blas_matmul<float>(call);
      break;
    case DType::f64:
      if (small)
        naive_matmul<double>(call);
      else
        blas_matmul<double>(call);
      break;
    case DType::f16:
      if (small)
        naive_matmul<Half>(call);
      else
        widened_matmul<Half>(call);
      break;
    case DType::bf16:
      if (small)
        naive_matmul<BFloat16>(call);
      else
        widened_matmul<BFloat16>(call);
      break;
    default:  // the integers: products wrap, as in PyTorch
      FERRY_DISPATCH_INT(C.dtype, "matmul", naive_matmul<scalar_t>(call));
  }
}

}  // namespace

void add_linalg_kernels(KernelTable& table) { table.emplace_back(OpId::matmul, matmul_kernel); }

}  // namespace ferry::cpu
