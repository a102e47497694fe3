// shaders/abi/lu_factor.h — the interface of shaders/lu_factor.comp (lu_factor_ex) and
// runtime/vulkan/vk_kernels_linalg.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_LU_FACTOR_H
#define FERRY_SHADER_ABI_LU_FACTOR_H
#include "abi.h"

// The rows of multipliers a workgroup passes through shared memory at once: the host counts
// the chunks' loop trips with it.
#define FERRY_LU_FACTOR_CHUNK 128

#define FERRY_LU_FACTOR_SPEC(X) \
  X(1, bool, PER_THREAD, false) /* a thread factors a whole matrix (small n), not a workgroup */
FERRY_SPEC_CONSTANTS(LuFactorSpec, FERRY_LU_FACTOR_SPEC)

// A dispatch takes the elimination's steps [j0, j1) of every matrix of its grid, in place in LU
// (the host copied A there first). Step j0's row updates start at row r0 (j0 + 1: the whole
// step, its pivot search and row swap first; more: a step the last dispatch began) and step
// j1 - 1's end at row r1 (m: the whole step), so that a step too long for the loop budget goes
// in several dispatches (Note [Loop budget] in runtime/vulkan/vk_kernels.hpp).
FERRY_PUSH_CONSTANTS(LuFactorParams) {
  uint m, n;          // each matrix's rows and columns
  uint matrices;      // the matrices of this dispatch's grid
  uint j0, j1;        // the steps this dispatch takes
  uint r0, r1;        // the rows of the first step's and of the last step's updates (above)
  uint first;         // 1: the first dispatch: info starts at 0 (else from what info holds)
  uint off_lu;        // first elements of this dispatch's matrices within the bindings
  uint off_pivots;
  uint off_info;
}
FERRY_END_PUSH_CONSTANTS(LuFactorParams)

#endif
