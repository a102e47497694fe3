// cuda/cuda_kernels_linalg.cu — "matmul" on CUDA: A [B, M, K] x B [B, K, N] ->
// C [B, M, N], the inputs strided views (a batch stride may be 0), the output
// contiguous (docs/kernel-contract.md).
//
// f32, f16, bf16 and f64 go to cuBLAS (cublasGemmStridedBatchedEx, one call
// for the whole batch), straight on the caller's memory where cuBLAS can read
// it, else from a packed copy (Note [cuBLAS operands]); f64 computes in double
// (CUBLAS_COMPUTE_64F, never TF32), as the CPU's dgemm does. Integers, and
// bf16 on GPUs before Ampere (cuBLAS has no bf16 GEMM there), use ferry's
// tiled kernel below; integer products wrap modulo 2^n like the CPU's.
#include <cublas_v2.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>

#include "cuda_error.hpp"
#include "cuda_loops.cuh"
#include "ferry/ops.hpp"

namespace ferry::cuda {
namespace {

// ---- ferry's tiled kernel ----
// Each block computes a 32 x 32 tile of C with 32 x 8 threads, four outputs a
// thread, through 32 x 32 tiles of A and B staged in shared memory in the
// compute type (float for the 16-bit floats, the type itself otherwise: 17 KiB
// of tiles for f64).
// Loads go through the operands' strides, so any view works as it is. The
// tile loops stride over the grid, so any M, N and batch fit its limits.
constexpr int kTile = 32, kRowsPerPass = 8, kBlockThreads = kTile * kRowsPerPass;

struct Strides3 {
  std::int64_t batch, row, col;
};

template <typename T> __global__ void __launch_bounds__(kBlockThreads)
    tiled_matmul(const T* __restrict__ a, Strides3 as, const T* __restrict__ b, Strides3 bs,
                 T* __restrict__ c, std::int64_t nb, std::int64_t M, std::int64_t N,
                 std::int64_t K) {
  using Acc = compute_t<T>;
  __shared__ Acc ta[kTile][kTile + 1];  // +1: no bank conflicts on column reads
  __shared__ Acc tb[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t tiles_m = (M + kTile - 1) / kTile, tiles_n = (N + kTile - 1) / kTile;
  for (std::int64_t bi = blockIdx.z; bi < nb; bi += gridDim.z)
    for (std::int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y)
      for (std::int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const std::int64_t m0 = tm * kTile, n0 = tn * kTile;
        const T* ab = a + bi * as.batch;
        const T* bb = b + bi * bs.batch;
        Acc acc[kTile / kRowsPerPass];
#pragma unroll
        for (int i = 0; i < kTile / kRowsPerPass; ++i) acc[i] = Acc(0);
        for (std::int64_t k0 = 0; k0 < K; k0 += kTile) {
#pragma unroll
          for (int i = 0; i < kTile / kRowsPerPass; ++i) {
            const int r = ty + i * kRowsPerPass;
            const std::int64_t am = m0 + r, ak = k0 + tx, bk = k0 + r, bn = n0 + tx;
            ta[r][tx] = am < M && ak < K ? Acc(ab[am * as.row + ak * as.col]) : Acc(0);
            tb[r][tx] = bk < K && bn < N ? Acc(bb[bk * bs.row + bn * bs.col]) : Acc(0);
          }
          __syncthreads();
#pragma unroll 8
          for (int kk = 0; kk < kTile; ++kk) {
            const Acc bv = tb[kk][tx];
#pragma unroll
            for (int i = 0; i < kTile / kRowsPerPass; ++i) {
              if constexpr (std::is_integral_v<Acc>)
                acc[i] = math::wrap_add(acc[i], math::wrap_mul(ta[ty + i * kRowsPerPass][kk], bv));
              else
                acc[i] += ta[ty + i * kRowsPerPass][kk] * bv;
            }
          }
          __syncthreads();  // the tiles are overwritten next round
        }
        const std::int64_t n = n0 + tx;
#pragma unroll
        for (int i = 0; i < kTile / kRowsPerPass; ++i) {
          const std::int64_t m = m0 + ty + i * kRowsPerPass;
          if (m < M && n < N) c[(bi * M + m) * N + n] = T(acc[i]);
        }
      }
}

Strides3 strides_of(const TensorArg& t) { return {t.strides[0], t.strides[1], t.strides[2]}; }

template <typename T>
void launch_tiled(CudaDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C) {
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  auto capped = [](std::int64_t n) { return unsigned(n < 65535 ? n : 65535); };
  const dim3 grid(capped((N + kTile - 1) / kTile), capped((M + kTile - 1) / kTile), capped(nb));
  dev.make_current();
  tiled_matmul<T><<<grid, dim3(kTile, kRowsPerPass), 0, dev.stream()>>>(
      static_cast<const T*>(data_ptr(A)), strides_of(A), static_cast<const T*>(data_ptr(B)),
      strides_of(B), static_cast<T*>(data_ptr(C)), nb, M, N, K);
  check_launch(dev, "matmul");
}

// ---- cuBLAS ----
// Note [cuBLAS operands]
// cuBLAS is column-major, and a row-major matrix read column-major is its
// transpose, so row-major C = A B is computed as column-major C^T = B^T A^T:
// B goes first, A second, m = N, n = M. A row-major rows x cols view with
// strides (rs, cs) is then, column-major, its cols x rows transpose with
// leading dim rs when cs is 1 (CUBLAS_OP_N), or the rows x cols matrix itself,
// read transposed (CUBLAS_OP_T), with leading dim cs when rs is 1 — provided
// the leading dim spans the other dim, as cuBLAS requires. The strides of a
// size-1 dim do not matter. Any other view (a stepped inner dim, an expanded
// matrix) is first packed into a contiguous temporary; a batch-broadcast
// operand (batch stride 0) is packed once and keeps stride 0.
struct GemmOperand {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  std::int64_t ld = 1, batch_stride = 0;
  std::unique_ptr<Buffer> packed;  // owns the packed copy, if any
};

bool cublas_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs,
                   GemmOperand& g) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<std::int64_t>(1, cols))) {
    g.op = CUBLAS_OP_N;
    g.ld = rows == 1 ? std::max<std::int64_t>(1, cols) : rs;
  } else if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<std::int64_t>(1, rows))) {
    g.op = CUBLAS_OP_T;
    g.ld = cols == 1 ? std::max<std::int64_t>(1, rows) : cs;
  } else {
    return false;
  }
  return g.ld <= INT_MAX;
}

struct Identity {
  template <typename T> __device__ T operator()(T x) const { return x; }
};

// The operand `t` ([nb, rows, cols]) as cuBLAS reads it, packed when it must be.
template <typename T> GemmOperand gemm_operand(CudaDevice& dev, const TensorArg& t) {
  const std::int64_t nb = t.sizes[0], rows = t.sizes[1], cols = t.sizes[2];
  GemmOperand g;
  g.batch_stride = nb == 1 ? 0 : t.strides[0];
  if (cublas_layout(rows, cols, t.strides[1], t.strides[2], g)) {
    g.ptr = data_ptr(t);
    return g;
  }
  const std::int64_t copies = g.batch_stride == 0 ? 1 : nb;
  g.packed = dev.allocate(std::size_t(copies * rows * cols) * sizeof(T));
  TensorArg src = t, dst;
  src.sizes[0] = copies;
  dst.buffer = g.packed.get();
  dst.sizes = src.sizes;
  dst.strides = {rows * cols, cols, 1};
  dst.dtype = t.dtype;
  launch_elementwise<T, T, 1>(dev, dst, {&src}, Identity{}, "matmul");
  g.ptr = data_ptr(dst);
  g.op = CUBLAS_OP_N;
  g.ld = std::max<std::int64_t>(1, cols);
  g.batch_stride = copies == 1 ? 0 : rows * cols;
  return g;
}

void check_cublas(CudaDevice& dev, cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw_error(dev.device().str(), call, cublasGetStatusName(st), cublasGetStatusString(st));
}

template <typename T> void cublas_matmul(CudaDevice& dev, const TensorArg& A, const TensorArg& B,
                                         const TensorArg& C, cudaDataType_t type) {
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  dev.make_current();
  // B^T first, A^T second (Note [cuBLAS operands]); the packed copies, if any,
  // are freed after the enqueue, which the stream-ordered allocator allows.
  const GemmOperand gb = gemm_operand<T>(dev, B), ga = gemm_operand<T>(dev, A);
  // f16/bf16 accumulate in f32 with f32 scalars; f32 takes TF32 only when the
  // program allowed it (Note [TF32] in ferry/ops.hpp); f64 computes in f64
  // with f64 scalars, TF32 or not.
  const bool f64 = type == CUDA_R_64F;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F
                                      : type == CUDA_R_32F && matmul_allow_tf32()
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  std::lock_guard<std::mutex> lock(dev.cublas_mutex());
  cublasHandle_t h = dev.cublas();
  check_cublas(dev, cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  check_cublas(dev,
               cublasGemmStridedBatchedEx(h, gb.op, ga.op, int(N), int(M), int(K), alpha, gb.ptr,
                                          type, int(gb.ld), gb.batch_stride, ga.ptr, type,
                                          int(ga.ld), ga.batch_stride, beta, data_ptr(C), type,
                                          int(N), M * N, int(nb), compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

void matmul_kernel(DeviceImpl& d, const OpCall& call) {
  const TensorArg &A = call.inputs.at(0), &B = call.inputs.at(1), &C = call.outputs.at(0);
  if (A.ndim() != 3 || B.ndim() != 3 || C.ndim() != 3 || A.dtype != B.dtype || A.dtype != C.dtype ||
      A.sizes[0] != C.sizes[0] || B.sizes[0] != C.sizes[0] || A.sizes[1] != C.sizes[1] ||
      B.sizes[2] != C.sizes[2] || A.sizes[2] != B.sizes[1])
    throw ShapeError(
        "matmul: the cuda kernel expects [B, M, K] and [B, K, N] inputs and a [B, M, N] output "
        "of one dtype");
  CudaDevice& dev = cuda_device(d);
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  if (nb == 0 || M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: zeros, whatever the dtype
    dev.make_current();
    dev.check(cudaMemsetAsync(data_ptr(C), 0, std::size_t(nb * M * N) * dtype_size(C.dtype),
                              dev.stream()),
              "cudaMemsetAsync");
    return;
  }
  // cuBLAS takes int sizes and a product of at most INT_MAX batches; beyond
  // that (rare: a matrix of over 2^31 rows) ferry's kernel computes it, slower.
  const bool fits_int = nb <= INT_MAX && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
  switch (C.dtype) {
    case DType::f32:
      if (fits_int) return cublas_matmul<float>(dev, A, B, C, CUDA_R_32F);
      return launch_tiled<float>(dev, A, B, C);
    case DType::f16:
      if (fits_int) return cublas_matmul<Half>(dev, A, B, C, CUDA_R_16F);
      return launch_tiled<Half>(dev, A, B, C);
    case DType::bf16:
      if (fits_int && dev.compute_capability() >= 80)
        return cublas_matmul<BFloat16>(dev, A, B, C, CUDA_R_16BF);
      return launch_tiled<BFloat16>(dev, A, B, C);
    case DType::f64:
      if (fits_int) return cublas_matmul<double>(dev, A, B, C, CUDA_R_64F);
      return launch_tiled<double>(dev, A, B, C);
    default:  // the integers: products wrap, as in PyTorch
      FERRY_CUDA_DISPATCH_INT(C.dtype, "matmul", return launch_tiled<scalar_t>(dev, A, B, C));
  }
}

}  // namespace

void add_linalg_kernels(KernelTable& table) { table.emplace_back(OpId::matmul, matmul_kernel); }

}  // namespace ferry::cuda
