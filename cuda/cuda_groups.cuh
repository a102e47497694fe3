// cuda/cuda_groups.cuh — the thread groups that reduce one row together, for
// the row kernels of cuda_kernels_reduce.cu and cuda_kernels_nn.cu. Device
// code only: include it from .cu files.
//
// Note [Row groups]
// A row kernel hands each row (an output of a reduction, a softmax or
// layer_norm row) to a group of threads: one thread, one warp or one block.
// The group strides over the row's elements, then combines its threads'
// partial results with reduce(), and the kernel strides over the rows group
// by group (a grid-stride loop, so any number of rows fits a bounded grid).
// The kernels are written once over the group type; the host picks the group
// from the row length: a thread for rows whose neighbours lie next to them in
// memory (so that a warp's loads are coalesced across rows), a warp for short
// rows, a block for long ones. Every thread of a group runs the same number of
// iterations of the row loop, which block reductions (__syncthreads) need.
#pragma once

#include <cstdint>

#include "cuda_loops.cuh"

namespace ferry::cuda {

// One thread per row: reduce() is the identity.
struct ThreadGroup {
  __device__ static std::int64_t id() {
    return std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  }
  __device__ static std::int64_t count() { return std::int64_t(gridDim.x) * blockDim.x; }
  __device__ static int lane() { return 0; }
  __device__ static int size() { return 1; }
  template <typename V, typename Op> __device__ static V reduce(V v, const Op&, V) { return v; }
};

// One warp per row; blockDim.x is a multiple of 32.
struct WarpGroup {
  __device__ static std::int64_t id() {
    return (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  }
  __device__ static std::int64_t count() { return (std::int64_t(gridDim.x) * blockDim.x) >> 5; }
  __device__ static int lane() { return int(threadIdx.x & 31); }
  __device__ static int size() { return 32; }
  template <typename V, typename Op> __device__ static V reduce(V v, const Op& op, V) {
    return warp_reduce(v, op);
  }
};

// One block per row (1-D, a multiple of 32 threads, at most 1024).
struct BlockGroup {
  __device__ static std::int64_t id() { return blockIdx.x; }
  __device__ static std::int64_t count() { return gridDim.x; }
  __device__ static int lane() { return int(threadIdx.x); }
  __device__ static int size() { return int(blockDim.x); }
  template <typename V, typename Op> __device__ static V reduce(V v, const Op& op, V identity) {
    __shared__ V scratch[32];  // one per instantiation, i.e. per value type
    return block_reduce(v, op, identity, scratch);
  }
};

// The associative operations the row kernels combine with.
struct AddOp {
  template <typename V> __device__ V operator()(V a, V b) const { return a + b; }
};
struct MulOp {
  template <typename V> __device__ V operator()(V a, V b) const { return a * b; }
};
struct MaxOp {  // NaN propagates
  template <typename V> __device__ V operator()(V a, V b) const { return math::maximum(a, b); }
};
struct MinOp {  // NaN propagates
  template <typename V> __device__ V operator()(V a, V b) const { return math::minimum(a, b); }
};

}  // namespace ferry::cuda
