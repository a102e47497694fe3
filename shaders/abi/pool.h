// shaders/abi/pool.h — the interface of shaders/pool.comp and
// runtime/vulkan/vk_kernels_pool.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_POOL_H
#define FERRY_SHADER_ABI_POOL_H
#include "abi.h"

// What a dispatch computes (MODE), and what its bindings 0 (written), 1, 2 and 3 are:
FERRY_CODE(POOL_MAX, 0u)           // values; indices, x, (x)
FERRY_CODE(POOL_MAX_BACKWARD, 1u)  // dx; (dx), g, indices
FERRY_CODE(POOL_AVG, 2u)           // y; (y), x, (x)
FERRY_CODE(POOL_AVG_BACKWARD, 3u)  // dx; (dx), g, (g)

#define FERRY_POOL_SPEC(X)                                      \
  X(1, uint, DT, 0) /* x and the values, g and dx (floating) */ \
  X(2, uint, MODE, POOL_MAX)
FERRY_SPEC_CONSTANTS(PoolSpec, FERRY_POOL_SPEC)

FERRY_PUSH_CONSTANTS(PoolParams) {
  uint off[4];        // the first element of each binding's tensor (pool.comp's list)
  uint planes;        // the part's planes (a sample's channel each)
  uint h, w, oh, ow;  // the input's and the output's plane
  uint kh, kw, sh, sw, ph, pw, dh, dw;  // kernel, stride, padding (before), dilation
  int divisor;             // average pooling: divisor_override, or 0 for the windows' counts
  uint count_include_pad;  // average pooling: the counts include the padding (1) or not (0)
  uint adaptive;  // PyTorch's adaptive windows (1: kernel, stride, padding, dilation unused)
}
FERRY_END_PUSH_CONSTANTS(PoolParams)

#endif
