// cuda/cuda_loops.cuh — the launch machinery every CUDA kernel file shares:
// dtype dispatch, the element-wise engine (contiguous, vectorized; strided,
// through the offset calculator) and warp/block reductions. Device code only:
// include it from .cu files.
//
// Note [CUDA element-wise engine]
// launch_elementwise<Out, In, NIN>(dev, out, {inputs}, f, op) computes
// out[i] = f(in_0[i], ..., in_{NIN-1}[i]) for every element of `out`, the
// inputs already broadcast to its shape (Note [Kernel contract]). After
// coalescing, when every operand is one unit-stride run, each thread moves
// kVec elements per access through aligned vector loads and stores (16 bytes
// for f32; 32 for f64 and i64, which nvcc issues as two 16-byte accesses, the
// pointers checked for 32-byte alignment all the same): bandwidth-bound ops
// need wide accesses to reach HBM speed. Any
// other layout (transposed, sliced, broadcast with stride 0) goes through the
// strided kernel, one element per thread and iteration, with 32-bit index math
// where it fits (Note [Offset calculator]). Both are grid-stride loops over at
// most 32 blocks per SM, so a launch costs the same for any size.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <limits>

#include "cuda_kernels.hpp"
#include "cuda_offsets.hpp"
#include "ferry/dtype.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::cuda {

using math::compute_t;

// ---- dtype dispatch: `scalar_t` bound to the element type. The float cases
// include f64, which computes in double (compute_t<double> is double: Note
// [Where f64 computes] in docs/kernel-contract.md), as the CPU's
// FERRY_CPU_FLOAT_CASES do.
#define FERRY_CUDA_CASE(DT, ...)             \
  case DType::DT: {                          \
    using scalar_t = dtype_cpp_t<DType::DT>; \
    __VA_ARGS__;                             \
    break;                                   \
  }
#define FERRY_CUDA_FLOAT_CASES(...)  \
  FERRY_CUDA_CASE(f32, __VA_ARGS__)  \
  FERRY_CUDA_CASE(f16, __VA_ARGS__)  \
  FERRY_CUDA_CASE(bf16, __VA_ARGS__) \
  FERRY_CUDA_CASE(f64, __VA_ARGS__)
#define FERRY_CUDA_INT_CASES(...)   \
  FERRY_CUDA_CASE(i32, __VA_ARGS__) \
  FERRY_CUDA_CASE(i64, __VA_ARGS__) \
  FERRY_CUDA_CASE(u8, __VA_ARGS__)  \
  FERRY_CUDA_CASE(i8, __VA_ARGS__)  \
  FERRY_CUDA_CASE(i16, __VA_ARGS__)
#define FERRY_CUDA_INTEGRAL_CASES(...) \
  FERRY_CUDA_INT_CASES(__VA_ARGS__)    \
  FERRY_CUDA_CASE(boolean, __VA_ARGS__)
#define FERRY_CUDA_NUMERIC_CASES(...) \
  FERRY_CUDA_FLOAT_CASES(__VA_ARGS__) \
  FERRY_CUDA_INT_CASES(__VA_ARGS__)
#define FERRY_CUDA_ALL_CASES(...)       \
  FERRY_CUDA_NUMERIC_CASES(__VA_ARGS__) \
  FERRY_CUDA_CASE(boolean, __VA_ARGS__)
#define FERRY_CUDA_DISPATCH(dtype, op, CASES, ...) \
  switch (dtype) {                                 \
    CASES(__VA_ARGS__)                             \
    default:                                       \
      ::ferry::cuda::unsupported_dtype(op, dtype); \
  }
#define FERRY_CUDA_DISPATCH_FLOATING(dtype, op, ...) \
  FERRY_CUDA_DISPATCH(dtype, op, FERRY_CUDA_FLOAT_CASES, __VA_ARGS__)
#define FERRY_CUDA_DISPATCH_INT(dtype, op, ...) \
  FERRY_CUDA_DISPATCH(dtype, op, FERRY_CUDA_INT_CASES, __VA_ARGS__)
#define FERRY_CUDA_DISPATCH_INTEGRAL(dtype, op, ...) \
  FERRY_CUDA_DISPATCH(dtype, op, FERRY_CUDA_INTEGRAL_CASES, __VA_ARGS__)
#define FERRY_CUDA_DISPATCH_NUMERIC(dtype, op, ...) \
  FERRY_CUDA_DISPATCH(dtype, op, FERRY_CUDA_NUMERIC_CASES, __VA_ARGS__)
#define FERRY_CUDA_DISPATCH_ALL(dtype, op, ...) \
  FERRY_CUDA_DISPATCH(dtype, op, FERRY_CUDA_ALL_CASES, __VA_ARGS__)

inline constexpr int kThreads = 256;  // threads per block of the grid-stride kernels
inline constexpr int kVec = 4;        // elements per vector access

template <typename T, int V> struct alignas(sizeof(T) * V) VecOf { T v[V]; };

template <typename In, int NIN> struct InputPtrs { const In* p[NIN > 0 ? NIN : 1]; };

template <int NIN, typename F, typename In>
__device__ __forceinline__ auto apply_inputs(const F& f, const In (&x)[NIN > 0 ? NIN : 1]) {
  if constexpr (NIN == 1)
    return f(x[0]);
  else if constexpr (NIN == 2)
    return f(x[0], x[1]);
  else
    return f(x[0], x[1], x[2]);
}

template <int V, typename Out, typename In, int NIN, typename F>
__global__ void __launch_bounds__(kThreads)
    elementwise_contiguous(Out* __restrict__ out, InputPtrs<In, NIN> in, std::int64_t n, F f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t nvec = n / V;
  for (std::int64_t i = first; i < nvec; i += stride) {
    VecOf<In, V> a[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) a[k] = reinterpret_cast<const VecOf<In, V>*>(in.p[k])[i];
    VecOf<Out, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      In x[NIN];
#pragma unroll
      for (int k = 0; k < NIN; ++k) x[k] = a[k].v[j];
      o.v[j] = Out(apply_inputs<NIN>(f, x));
    }
    reinterpret_cast<VecOf<Out, V>*>(out)[i] = o;
  }
  for (std::int64_t i = nvec * V + first; i < n; i += stride) {  // the tail, < V elements
    In x[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) x[k] = in.p[k][i];
    out[i] = Out(apply_inputs<NIN>(f, x));
  }
}

template <typename Out, typename In, int NIN, typename Index, typename F>
__global__ void __launch_bounds__(kThreads)
    elementwise_strided(Out* __restrict__ out, InputPtrs<In, NIN> in, OffsetCalc<NIN + 1, Index> oc,
                        std::int64_t n, F f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::int64_t off[NIN + 1];
    oc.get(Index(i), off);
    In x[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) x[k] = in.p[k][off[k + 1]];
    out[off[0]] = Out(apply_inputs<NIN>(f, x));
  }
}

inline bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Note [CUDA element-wise engine]. `f` is a device functor (In...) -> Out.
template <typename Out, typename In, int NIN, typename F>
void launch_elementwise(CudaDevice& dev, const TensorArg& out,
                        const std::array<const TensorArg*, NIN>& ins, F f, const char* op) {
  static_assert(NIN >= 1 && NIN <= 3, "element-wise ops take one to three inputs");
  const std::int64_t n = out.numel();
  if (n == 0) return;
  std::array<const TensorArg*, NIN + 1> all;
  all[0] = &out;
  for (int k = 0; k < NIN; ++k) all[k + 1] = ins[k];
  auto oc = make_offset_calc<NIN + 1, std::uint64_t>(all, op);
  InputPtrs<In, NIN> in;
  for (int k = 0; k < NIN; ++k) in.p[k] = static_cast<const In*>(data_ptr(*ins[k]));
  Out* o = static_cast<Out*>(data_ptr(out));
  dev.make_current();
  bool contiguous = oc.ndim == 1;
  for (int k = 0; contiguous && k <= NIN; ++k) contiguous = oc.strides[0][k] == 1;
  if (contiguous) {
    bool vec = aligned_to(o, sizeof(Out) * kVec);
    for (int k = 0; vec && k < NIN; ++k) vec = aligned_to(in.p[k], sizeof(In) * kVec);
    if (vec)
      elementwise_contiguous<kVec, Out, In, NIN>
          <<<grid_for(dev, n, std::int64_t(kThreads) * kVec), kThreads, 0, dev.stream()>>>(o, in, n,
                                                                                           f);
    else
      elementwise_contiguous<1, Out, In, NIN>
          <<<grid_for(dev, n, kThreads), kThreads, 0, dev.stream()>>>(o, in, n, f);
  } else if (fits_uint32(n)) {
    OffsetCalc<NIN + 1, std::uint32_t> oc32;
    oc32.ndim = oc.ndim;
    for (int d = 0; d < oc.ndim; ++d) {
      oc32.sizes[d] = std::uint32_t(oc.sizes[d]);
      for (int k = 0; k <= NIN; ++k) oc32.strides[d][k] = oc.strides[d][k];
    }
    elementwise_strided<Out, In, NIN>
        <<<grid_for(dev, n, kThreads), kThreads, 0, dev.stream()>>>(o, in, oc32, n, f);
  } else {
    elementwise_strided<Out, In, NIN>
        <<<grid_for(dev, n, kThreads), kThreads, 0, dev.stream()>>>(o, in, oc, n, f);
  }
  check_launch(dev, op);
}

// ---- reductions within a warp and a block ----
// `op` is associative (and, for these helpers, commutative): a + b, max, ...
template <typename T, typename Op> __device__ __forceinline__ T warp_reduce(T v, const Op& op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;  // every lane holds the result
}

// Reduces one value per thread of the block; every thread gets the result.
// `scratch` is __shared__ T[32]; blockDim.x is a multiple of 32, at most 1024.
// Calls __syncthreads(), so every thread of the block must call it.
template <typename T, typename Op>
__device__ T block_reduce(T v, const Op& op, T identity, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  return warp_reduce(v, op);
}

}  // namespace ferry::cuda
