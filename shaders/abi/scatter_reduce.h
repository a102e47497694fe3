// shaders/abi/scatter_reduce.h — the interface of shaders/scatter_reduce.comp
// and runtime/vulkan/vk_kernels_sort.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_SCATTER_REDUCE_H
#define FERRY_SHADER_ABI_SCATTER_REDUCE_H
#include "abi.h"

// The reductions, by the names the kernel's "reduce" attribute gives them.
FERRY_CODE(FOLD_SUM, 0u)
FERRY_CODE(FOLD_PROD, 1u)
FERRY_CODE(FOLD_MEAN, 2u)
FERRY_CODE(FOLD_AMAX, 3u)
FERRY_CODE(FOLD_AMIN, 4u)
FERRY_CODE(FOLD_ASSIGN, 5u)

#define FERRY_SCATTER_REDUCE_SPEC(X)                    \
  X(1, uint, DT, 0)   /* the values' and out's dtype */ \
  X(2, uint, FOLD, 0) /* FOLD_* */                      \
  X(3, bool, INCLUDE_SELF, false)
FERRY_SPEC_CONSTANTS(ScatterReduceSpec, FERRY_SCATTER_REDUCE_SPEC)

FERRY_PUSH_CONSTANTS(ScatterReduceParams) {
  uint m;                    // values and targets
  uint v_off, t_off, o_off;  // first element in each binding (t_off: i64 elements)
  uint begin, end;           // the values this dispatch folds: [begin, end) of the m
}
FERRY_END_PUSH_CONSTANTS(ScatterReduceParams)

#endif
