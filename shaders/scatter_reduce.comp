// shaders/scatter_reduce.comp — values folded into out at sorted targets
// (docs/kernel-contract.md, "scatter_reduce"; the host side is
// runtime/vulkan/vk_kernels_sort.cpp).
//
// The targets arrive grouped by a stable sort, so equal targets form runs in the
// sources' order. The thread of a run's first element folds the run in that
// order (starting from out's value with INCLUDE_SELF) and writes out once: no
// atomics, and the same fold order as the CPU's, so the results agree
// exactly (Note [CPU scatter_reduce] in runtime/cpu/cpu_kernels_scatter.cpp).
// Floats fold in float, integers in ITYPE (wrapping); narrow integers compare
// and divide in 32 bits (llvmpipe miscompiles 64-bit sign tests on
// sign-extended values; elementwise.comp has the same rule). The f64 module (Note [f64 on
// Vulkan] in runtime/vulkan/vk_pipelines.cpp) folds doubles in double.
// ferry-f64-ops: scatter_reduce
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/scatter_reduce.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, o)  // out, read and written
FERRY_TENSOR(1, v)  // the values
FERRY_TENSOR(2, t)  // the i64 targets, as word pairs

uvec2 target(uint i) { return uvec2(t_u32[2u * (p.t_off + i)], t_u32[2u * (p.t_off + i) + 1u]); }

FTYPE fold_f(FTYPE a, FTYPE b) {
  if (FOLD == FOLD_PROD) return a * b;
  if (FOLD == FOLD_AMAX) return max_f(a, b);
  if (FOLD == FOLD_AMIN) return min_f(a, b);
  if (FOLD == FOLD_ASSIGN) return b;
  return a + b;
}

ITYPE fold_i(ITYPE a, ITYPE b) {
  if (FOLD == FOLD_PROD) return a * b;
  if (FOLD == FOLD_ASSIGN) return b;
  if (FOLD == FOLD_AMAX || FOLD == FOLD_AMIN) {
    const bool greater = DT == DT_I64 ? a > b : int(a) > int(b);
    return (FOLD == FOLD_AMAX) == greater ? a : b;
  }
  return a + b;
}

// Floor division by a positive count, as PyTorch's integer mean, on
// non-negative operands only: GLSL leaves / and % of negative integers
// undefined (NVIDIA's driver and llvmpipe disagree there).
ITYPE floor_div(ITYPE a, uint n) {
  if (DT != DT_I64) {
    const int s = int(a);
    return ITYPE(s >= 0 ? s / int(n) : -((-s + int(n) - 1) / int(n)));
  }
  const ITYPE d = ITYPE(n);
  return a >= ITYPE(0) ? a / d : -((-a + d - ITYPE(1)) / d);
}

void main() {
  const bool self = INCLUDE_SELF && FOLD != FOLD_ASSIGN;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.m; i += stride) {
    const uvec2 tg = target(i);
    if (i > 0u && target(i - 1u) == tg) continue;  // not the start of a run
    const uint e = p.o_off + tg.x;                 // the host keeps targets below 2^32
    uint j = self ? i : i + 1u;
    if (IS_FLOAT_DT(DT)) {
      FTYPE acc = self ? LOAD_F(o, DT, e) : LOAD_F(v, DT, p.v_off + i);
      for (; j < p.m && target(j) == tg; ++j) acc = fold_f(acc, LOAD_F(v, DT, p.v_off + j));
      if (FOLD == FOLD_MEAN) acc /= FTYPE(j - i + (self ? 1u : 0u));
      STORE_F(o, DT, e, acc)
    } else {
      ITYPE acc = self ? LOAD_I(o, DT, e) : LOAD_I(v, DT, p.v_off + i);
      for (; j < p.m && target(j) == tg; ++j) acc = fold_i(acc, LOAD_I(v, DT, p.v_off + j));
      if (FOLD == FOLD_MEAN) acc = floor_div(acc, j - i + (self ? 1u : 0u));
      STORE_I(o, DT, e, acc)
    }
  }
}
