// shaders/abi/index_add.h — the interface of shaders/index_add.comp (index_add,
// scatter_add) and runtime/vulkan/vk_kernels_index.cpp (Note [Shader
// interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_INDEX_ADD_H
#define FERRY_SHADER_ABI_INDEX_ADD_H
#include "abi.h"

#define FERRY_INDEX_ADD_SPEC(X)                             \
  X(1, uint, DT, 0)   /* the dtype of out and src (DT_*) */ \
  X(2, uint, NDIM, 1) /* 1..4 other dims */
FERRY_SPEC_CONSTANTS(IndexAddSpec, FERRY_INDEX_ADD_SPEC)

FERRY_PUSH_CONSTANTS(IndexAddParams) {
  uvec4 size;       // the other dims, outermost first; unused dims are 1
  uvec4 stride[3];  // stride[t][d]: t = 0 out, 1 src, 2 index; in elements
  uvec4 off;        // out, src, index: first element within the binding
  uint lines;       // output lines: the product of size
  uint count;       // contributions per line: src's size along dim
  uint out_size;    // out's size along dim (rows bound, from index_base)
  uint out_step;    // out's stride along dim
  uint src_step;    // src's stride along dim
  uint index_step;  // the index's stride along dim
  uint index_base;  // the index of out's first bound row
}
FERRY_END_PUSH_CONSTANTS(IndexAddParams)

#endif
