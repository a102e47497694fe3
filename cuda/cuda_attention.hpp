// cuda/cuda_attention.hpp — the fused attention kernels' launches (cuda_kernels_attention.cu,
// Note [Fused attention on CUDA]) as the host side (cuda_attention.cpp) calls them, once it
// has checked the operands.
#pragma once

#include <cstdint>

#include "cuda_device.hpp"

namespace ferry::cuda {

struct AttentionParams {
  std::int64_t B, Hq, group, L, S, E, EV;  // group: query heads per key/value head
  std::int64_t mask_sb, mask_sh;           // the mask's batch and head strides (0: broadcast)
  double scale;
  bool causal, has_mask;
};

// Device pointers of contiguous tensors; mask null without one. lse is in the compute type
// (f32; f64 for f64).
struct AttentionForward {
  const void *q, *k, *v, *mask;
  void *out, *lse;
};
struct AttentionBackward {
  const void *dout, *q, *k, *v, *out, *lse, *mask;
  void *dq, *dk, *dv;
};

// Enqueue on the device's stream; `dtype` is q's (f32, f16, bf16 or f64).
void launch_attention_forward(CudaDevice& dev, DType dtype, const AttentionParams& p,
                              const AttentionForward& a);
void launch_attention_backward(CudaDevice& dev, DType dtype, const AttentionParams& p,
                               const AttentionBackward& a);

}  // namespace ferry::cuda
