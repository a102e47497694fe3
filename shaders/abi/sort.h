// shaders/abi/sort.h — the interface of shaders/sort.comp and
// runtime/vulkan/vk_kernels_sort.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_SORT_H
#define FERRY_SHADER_ABI_SORT_H
#include "abi.h"

// The stages of the bitonic sort (Note [Vulkan sort] in sort.comp).
// SORT_MODE_FIRST: loads x, and sorts blocks of 2 WG elements in shared memory;
// SORT_MODE_FLIP and SORT_MODE_HALF: one global step (k, j) of a longer merge;
// SORT_MODE_MERGE: the steps j < 2 WG of merge level k, in shared memory;
// SORT_MODE_ROW: short rows (FERRY_SORT_ROW_MAX elements at most), a thread per row.
FERRY_CODE(SORT_MODE_FIRST, 0u)
FERRY_CODE(SORT_MODE_FLIP, 1u)
FERRY_CODE(SORT_MODE_HALF, 2u)
FERRY_CODE(SORT_MODE_MERGE, 3u)
FERRY_CODE(SORT_MODE_ROW, 4u)
#define FERRY_SORT_ROW_MAX 16

#define FERRY_SORT_SPEC(X)                            \
  X(1, uint, DT, 0)   /* x's and the values' dtype */ \
  X(2, uint, MODE, 0) /* SORT_MODE_* */               \
  X(3, bool, DESCENDING, false)
FERRY_SPEC_CONSTANTS(SortSpec, FERRY_SORT_SPEC)

FERRY_PUSH_CONSTANTS(SortParams) {
  uint rows, n;              // rows of n elements, contiguous
  uint padded;               // n rounded up to a power of two
  uint k, j;                 // the merge level and the step's distance (FLIP, HALF, MERGE)
  uint v_off, i_off, x_off;  // first element in each binding (i_off: i64 elements)
}
FERRY_END_PUSH_CONSTANTS(SortParams)

#endif
