// shaders/abi/lu_permutation.h — the interface of shaders/lu_permutation.comp
// (lu_pivots_to_permutation) and runtime/vulkan/vk_kernels_linalg.cpp (Note [Shader interfaces]
// in abi.h).
#ifndef FERRY_SHADER_ABI_LU_PERMUTATION_H
#define FERRY_SHADER_ABI_LU_PERMUTATION_H
#include "abi.h"

#define FERRY_LU_PERMUTATION_SPEC(X) X(1, uint, DT, DT_I64) /* the pivots' dtype code */
FERRY_SPEC_CONSTANTS(LuPermutationSpec, FERRY_LU_PERMUTATION_SPEC)

FERRY_PUSH_CONSTANTS(LuPermutationParams) {
  uint off_perm;    // the permutation's first element (i64) within its binding
  uint off_pivots;  // the pivots' first element within theirs
  uint matrices;    // how many permutations: the batch's size
  uint rows;        // m: each permutation's length
  uint steps;       // k: each matrix's pivots
}
FERRY_END_PUSH_CONSTANTS(LuPermutationParams)

#endif
