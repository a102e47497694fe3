// shaders/lu_permutation.comp — lu_pivots_to_permutation: the permutation [..., m] (i64) that
// 0-based pivots [..., k] make of m rows, the CPU kernel's loop (runtime/cpu/cpu_kernels_lapack.cpp,
// Note [LU's pivots as a permutation] in runtime/ops_lu.cpp): 0..m-1, then entries j and
// pivots[j] traded for j = 0..k-1.
//
// The swaps of one matrix depend on each other, so one invocation makes one permutation, in a
// grid-stride loop over the batch; a batch of many small matrices (solve's usual case) keeps
// the device busy, and a single large matrix still costs one dispatch, where the composition
// costs four per pivot. Both tensors are contiguous. The permutation is written as pairs of
// 32-bit words (its high words zero), so the base variant serves i32 pivots too; the core
// checked the pivots' range (runtime/ops_lu.cpp), and a pivot outside [0, m) all the same
// swaps nothing rather than writing outside the permutation.
//
// Specialization and push constants: shaders/abi/lu_permutation.h.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/lu_permutation.h"  // spec and push constants: shared with the host

FERRY_TENSOR(0, perm)
FERRY_TENSOR(1, piv)

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint b = gl_GlobalInvocationID.x; b < p.matrices; b += step) {
    const uint row0 = p.off_perm + b * p.rows;  // in i64 elements
    for (uint r = 0u; r < p.rows; ++r) {
      perm_u32[2u * (row0 + r)] = r;
      perm_u32[2u * (row0 + r) + 1u] = 0u;
    }
    const uint piv0 = p.off_pivots + b * p.steps;
    for (uint j = 0u; j < p.steps; ++j) {
      const ITYPE q = LOAD_I(piv, DT, piv0 + j);
      if (q < ITYPE(0) || q >= ITYPE(p.rows)) continue;
      const uint a = 2u * (row0 + j), c = 2u * (row0 + uint(q));
      const uint t = perm_u32[a];
      perm_u32[a] = perm_u32[c];
      perm_u32[c] = t;
    }
  }
}
