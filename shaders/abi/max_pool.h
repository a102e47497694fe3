// shaders/abi/max_pool.h — the interface of shaders/max_pool.comp and
// runtime/vulkan/vk_kernels_pool.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_MAX_POOL_H
#define FERRY_SHADER_ABI_MAX_POOL_H
#include "abi.h"

#define FERRY_MAX_POOL_SPEC(X)                                  \
  X(1, uint, DT, 0) /* x and the values, g and dx (floating) */ \
  X(2, bool, BACKWARD, false)
FERRY_SPEC_CONSTANTS(MaxPoolSpec, FERRY_MAX_POOL_SPEC)

FERRY_PUSH_CONSTANTS(MaxPoolParams) {
  uint off[4];        // the first element of each binding's tensor (max_pool.comp's list)
  uint planes;        // the part's planes (a sample's channel each)
  uint h, w, oh, ow;  // the input's and the output's plane
  uint kh, kw, sh, sw, ph, pw, dh, dw;  // kernel, stride, padding (before), dilation
}
FERRY_END_PUSH_CONSTANTS(MaxPoolParams)

#endif
