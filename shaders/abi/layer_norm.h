// shaders/abi/layer_norm.h — the interface of shaders/layer_norm.comp and
// runtime/vulkan/vk_kernels_nn.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_LAYER_NORM_H
#define FERRY_SHADER_ABI_LAYER_NORM_H
#include "abi.h"

#define FERRY_LAYER_NORM_SPEC(X)                           \
  X(1, uint, DT, 0) /* x, y, weight and bias (floating) */ \
  X(2, bool, HAS_W, false)                                 \
  X(3, bool, HAS_B, false)                                 \
  X(4, uint, LANES, 1) /* threads per row, a power of two <= WG */
FERRY_SPEC_CONSTANTS(LayerNormSpec, FERRY_LAYER_NORM_SPEC)

FERRY_PUSH_CONSTANTS(LayerNormParams) {
  uint x_off, y_off, m_off, r_off, w_off, b_off;  // first element in each binding
  uint rows, n;
  uint xs0, xs1, ys0, ys1;  // row and element strides of x and y
  uint ms, rs, ws, bs;      // strides of mean, rstd, weight, bias
  float eps;
  uint eps_bits[2];  // eps as a double's two words, for the f64 module
}
FERRY_END_PUSH_CONSTANTS(LayerNormParams)

#endif
