// shaders/abi/random.h — the interface of shaders/random.comp and
// runtime/vulkan/vk_kernels_random.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_RANDOM_H
#define FERRY_SHADER_ABI_RANDOM_H
#include "abi.h"

#define FERRY_RANDOM_SPEC(X)                     \
  X(1, uint, OP, 0)      /* OpId: OP_RANDOM_* */ \
  X(2, uint, DT, DT_F32) /* the output's dtype */
FERRY_SPEC_CONSTANTS(RandomSpec, FERRY_RANDOM_SPEC)

FERRY_PUSH_CONSTANTS(RandomParams) {
  uint n;        // elements
  uint o_off;    // the output's first element within its binding
  uvec2 offset;  // counter of element 0: lo, hi
  uvec2 seed;    // key: lo, hi
  float p0, p1;  // uniform: low, high; normal: mean, std
  uvec2 low;     // random_int: low as int64 (lo, hi words)
  uvec2 range;   // random_int: range as uint64
  uvec2 d0, d1;  // the f64 modules: p0 and p1 as doubles (lo, hi words)
}
FERRY_END_PUSH_CONSTANTS(RandomParams)

#endif
