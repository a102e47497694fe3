// shaders/abi/triangular_solve.h — the interface of shaders/triangular_solve.comp
// (solve_triangular) and runtime/vulkan/vk_kernels_linalg.cpp (Note [Shader interfaces] in
// abi.h).
#ifndef FERRY_SHADER_ABI_TRIANGULAR_SOLVE_H
#define FERRY_SHADER_ABI_TRIANGULAR_SOLVE_H
#include "abi.h"

#define FERRY_TRIANGULAR_SOLVE_SPEC(X)                                        \
  X(1, bool, UPPER, false) /* T upper triangular: rows solved from the last */ \
  X(2, bool, UNIT, false)  /* T's diagonal taken as ones */                     \
  X(3, bool, PER_THREAD, false) /* a thread per column (small n), not a workgroup */
FERRY_SPEC_CONSTANTS(TriangularSolveSpec, FERRY_TRIANGULAR_SOLVE_SPEC)

// The left form T X = B of the call (X T = B is T^T X^T = B^T: the host swaps the strides).
// Strides and offsets in elements; a workgroup (or, PER_THREAD, a thread) solves one column of
// one matrix of the batch.
FERRY_PUSH_CONSTANTS(TriangularSolveParams) {
  uint n;        // T's order: X's rows
  uint cols;     // X's columns (right-hand sides) per matrix
  uint g0;       // the first (matrix, column) pair of this dispatch: matrix * cols + column
  uint pairs;    // every (matrix, column) pair: matrices * cols
  uint s0, s1;   // the substitution's steps this dispatch takes (the loop budget's cut)
  uint copy;     // 1: first copy B's column into X (the first range)
  uint t_row, t_col, t_batch;  // T's strides; t_batch 0: one T for every matrix of B
  uint x_row, x_col, x_batch;  // X's, and B's alike
  uint off_x, off_t, off_b;    // first elements within the bindings
}
FERRY_END_PUSH_CONSTANTS(TriangularSolveParams)

#endif
