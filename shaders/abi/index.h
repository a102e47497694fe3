// shaders/abi/index.h — the interface of shaders/index.comp (index_select,
// gather) and runtime/vulkan/vk_kernels_index.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_INDEX_H
#define FERRY_SHADER_ABI_INDEX_H
#include "abi.h"

#define FERRY_INDEX_SPEC(X)                                     \
  X(1, uint, ELSIZE, 4) /* element size in bytes: 1, 2, 4, 8 */ \
  X(2, uint, NDIM, 1)   /* 1..4 coalesced dims */
FERRY_SPEC_CONSTANTS(IndexSpec, FERRY_INDEX_SPEC)

FERRY_PUSH_CONSTANTS(IndexParams) {
  uvec4 size;       // dims, outermost first; unused dims are 1
  uvec4 stride[3];  // stride[t][d]: t = 0 output, 1 x (0 along dim), 2 index; in elements
  uvec4 off;        // output, x, index: first element within the binding
  uint n;           // output elements
  uint dim_stride;  // x's stride along dim
  uint dim_size;    // x's size along dim
}
FERRY_END_PUSH_CONSTANTS(IndexParams)

#endif
