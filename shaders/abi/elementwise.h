// shaders/abi/elementwise.h — the interface of shaders/elementwise.comp and
// runtime/vulkan/vk_kernels_elementwise.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_ELEMENTWISE_H
#define FERRY_SHADER_ABI_ELEMENTWISE_H
#include "abi.h"

#define FERRY_ELEMENTWISE_SPEC(X)                                       \
  X(1, uint, OP, 0)    /* the op's OpId (ferry_ops.glsl's OP_<NAME>) */ \
  X(2, uint, IN_DT, 0) /* the inputs' dtype (the values', for where) */ \
  X(3, uint, OUT_DT, 0)                                                 \
  X(4, uint, NDIM, 1)           /* 1..4 coalesced dims */               \
  X(5, bool, CONTIGUOUS, false) /* one dim, every stride 1: no index math */
FERRY_SPEC_CONSTANTS(ElementwiseSpec, FERRY_ELEMENTWISE_SPEC)

FERRY_PUSH_CONSTANTS(ElementwiseParams) {
  uvec4 size;       // dims, outermost first; unused dims are 1
  uvec4 stride[4];  // stride[t][d]: tensor t (0 = output, then the inputs), dim d
  uvec4 off;        // each tensor's first element within its binding
  uint n;           // elements
  uint s[5];        // op scalars: fill's value, arange's start, step and first index
}
FERRY_END_PUSH_CONSTANTS(ElementwiseParams)

#endif
