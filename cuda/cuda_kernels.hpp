// cuda/cuda_kernels.hpp — what a CUDA kernel file (cuda_kernels_*.cu) sees.
//
// A kernel is a KernelFn like every backend's (Note [Kernel contract]): it
// reads the OpCall, picks a launch for the dtype, and enqueues it on the
// device's op stream without waiting. The per-element math comes from
// include/ferry/kit/math/ (FERRY_HD functions the CPU backend runs too); the launch
// machinery (strided element-wise engine, warp and block reductions, dtype
// dispatch) is in cuda_loops.cuh.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cuda_device.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry::cuda {

using KernelTable = std::vector<std::pair<OpId, KernelFn>>;
void add_elementwise_kernels(
    KernelTable& table);  // unary, binary, compare, where, copy, fill, arange
void add_random_kernels(KernelTable& table);
void add_reduce_kernels(KernelTable& table);  // sum, max, min, argmax
void add_scan_kernels(KernelTable& table);    // cum{sum,prod,max,min}
void add_sort_kernels(KernelTable& table);    // sort, scatter_reduce
void add_nn_kernels(KernelTable& table);      // softmax, log_softmax, layer_norm
void add_linalg_kernels(KernelTable& table);  // matmul (cuBLAS; integers in ferry's kernel)
void add_index_kernels(KernelTable& table);   // index_select, gather, index_add, scatter_add
void add_grad_kernels(KernelTable& table);    // activation backward
void add_optim_kernels(KernelTable& table);   // adam_step, sgd_step (multi-tensor)
void add_conv_kernels(KernelTable& table);    // conv1d/2d/3d and their backward (cuDNN)
void add_attention_kernels(KernelTable& table);  // scaled_dot_product_attention (fused)
// Every kernel above, as a CudaDevice registers them. Making the table needs
// no GPU, so tests/cuda_module_tests.cpp checks it against the CPU backend's
// ops on machines without one.
KernelTable kernel_table();

// Checks the launch just made (cudaGetLastError) and throws BackendError
// naming the kernel.
void check_launch(CudaDevice& dev, const char* kernel);

// UnsupportedError "<op>: the cuda kernel does not take dtype <dt>".
[[noreturn]] void unsupported_dtype(const char* op, DType dt);

// Blocks for a grid-stride kernel over n items at `per_block` items a block:
// enough to fill every SM several times, never more than the work needs.
inline unsigned grid_for(const CudaDevice& dev, std::int64_t n, std::int64_t per_block) {
  std::int64_t blocks = (n + per_block - 1) / per_block;
  const std::int64_t cap = std::int64_t(dev.sm_count()) * 32;
  if (blocks > cap) blocks = cap;
  return unsigned(blocks < 1 ? 1 : blocks);
}

}  // namespace ferry::cuda
