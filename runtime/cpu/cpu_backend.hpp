// runtime/cpu/cpu_backend.hpp — the CPU backend, built into libferry.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/backend.hpp"

namespace ferry {

std::unique_ptr<Backend> make_cpu_backend();

namespace cpu {
// Each kernel file adds its kernels to the table the CPU device registers.
using KernelTable = std::vector<std::pair<OpId, KernelFn>>;
void add_elementwise_kernels(KernelTable& table);
void add_random_kernels(KernelTable& table);
void add_reduce_kernels(KernelTable& table);
void add_linalg_kernels(KernelTable& table);
// solve_triangular through BLAS's trsm, and cholesky, lu_factor_ex, eigh and qr through LAPACK
// where the BLAS has it (cpu_kernels_lapack.cpp).
void add_lapack_kernels(KernelTable& table);
// matmul's matrix-vector path (cpu_kernels_matvec.cpp): runs the call and returns true when
// one side has at most 8 rows and the other is a weight read along k; false leaves it alone.
bool try_matvec(const OpCall& call);
void add_nn_kernels(KernelTable& table);
void add_index_kernels(KernelTable& table);
void add_grad_kernels(KernelTable& table);     // activation backward, index_add, scatter_add
void add_optim_kernels(KernelTable& table);    // adam_step, sgd_step
void add_sort_kernels(KernelTable& table);     // cumsum, cumprod, cummax, cummin, sort, topk
void add_scatter_kernels(KernelTable& table);  // scatter_reduce
void add_conv_kernels(KernelTable& table);     // conv1d/2d/3d and their backward rows
bool conv_supports(DType dtype);               // f32, f64, f16 and bf16 (widened)
void add_cnn_kernels(KernelTable& table);      // batch_norm and its backward row
void add_resample_kernels(KernelTable& table);  // interpolate (2-D) and its backward row
void add_grid_sample_kernels(KernelTable& table);  // grid_sample and its backward row
void add_pool_kernels(KernelTable& table);     // max_pool1d/2d, avg_pool1d/2d, their backward rows
void add_attention_kernels(KernelTable& table);  // scaled_dot_product_attention and its backward
}  // namespace cpu

}  // namespace ferry
