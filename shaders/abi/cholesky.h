// shaders/abi/cholesky.h — the interface of shaders/cholesky.comp (cholesky) and
// runtime/vulkan/vk_kernels_factor.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_CHOLESKY_H
#define FERRY_SHADER_ABI_CHOLESKY_H
#include "abi.h"

// The rows of multipliers a workgroup passes through shared memory at once: the host counts
// the chunks' loop trips with it.
#define FERRY_CHOLESKY_CHUNK 128

#define FERRY_CHOLESKY_SPEC(X) \
  X(1, bool, PER_THREAD, false) /* a thread factors a whole matrix (small n), not a workgroup */
FERRY_SPEC_CONSTANTS(CholeskySpec, FERRY_CHOLESKY_SPEC)

// A dispatch takes the steps [j0, j1) of every matrix of its grid, in place in L (the host
// copied A there first). Step j0's row updates start at row r0 (j0 + 1: the whole step; more: a
// step the last dispatch began) and step j1 - 1's end at row r1 (n: the whole step), so that a
// step too long for the loop budget goes in several dispatches (Note [Loop budget] in
// runtime/vulkan/vk_kernels.hpp).
FERRY_PUSH_CONSTANTS(CholeskyParams) {
  uint n;         // each matrix's order
  uint matrices;  // the matrices of this dispatch's grid
  uint j0, j1;    // the steps this dispatch takes
  uint r0, r1;    // the rows of the first step's and of the last step's updates (above)
  uint off_l;     // the first element of this dispatch's matrices within the binding
}
FERRY_END_PUSH_CONSTANTS(CholeskyParams)

#endif
