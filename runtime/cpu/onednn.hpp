// runtime/cpu/onednn.hpp — oneDNN (libdnnl), loaded at run time, for the CPU's convolution
// kernels (Note [CPU convolution] in cpu_kernels_conv.cpp) and, where OpenBLAS's kernels leave
// out the CPU's widest vectors, f32 matrix products (cpu_blas.hpp). Built where dnnl.h was found;
// libdnnl.so.2 is opened on first use, so a machine without it runs ferry's own kernels and
// status() says why. FERRY_ONEDNN=0 turns it off (to measure or test the other path).
#pragma once

#include <cstdint>
#include <string>

#include "ferry/backend.hpp"

namespace ferry::cpu::onednn {

// "oneDNN 2.6.3" where it runs, else "oneDNN off: <why>".
std::string status();

// Runs a conv1d/2d/3d, conv_backward_input or conv_backward_weight call (f32;
// cpu_kernels_conv.cpp's attributes) through oneDNN, its activations (x, y and their
// gradients) channels-last where `channels_last` and its weight (or the weight's gradient)
// where `weight_channels_last` (cpu_kernels_conv.cpp's Layouts, read from the attributes
// there), else contiguous; false, having done nothing, where oneDNN is off or does not take
// the case.
bool run(const OpCall& call, bool channels_last, bool weight_channels_last);

// Whether sgemm() below runs (oneDNN loaded).
bool has_sgemm();

// C [M, N] = op(A) op(B) + beta C in f32, row-major, through dnnl_sgemm, which picks its
// kernels by the CPU's features (Note [OpenBLAS's kernels] in cpu_blas.cpp); false, having
// done nothing, where oneDNN is off or refuses the arguments.
bool sgemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc);

}  // namespace ferry::cpu::onednn
