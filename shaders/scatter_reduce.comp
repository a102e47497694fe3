// shaders/scatter_reduce.comp — values folded into out at sorted targets
// (docs/kernel-contract.md, "scatter_reduce"; the host side is
// runtime/vulkan/vk_kernels_sort.cpp).
//
// The targets arrive grouped by a stable sort, so equal targets form runs in the
// sources' order. The thread of a run's first element folds the run in that
// order (starting from out's value with INCLUDE_SELF) and writes out once: no
// atomics, and the same fold order as the CPU's, so the results agree
// exactly (Note [CPU scatter_reduce] in runtime/cpu/cpu_kernels_scatter.cpp).
// A dispatch folds the values [begin, end): the host cuts them into ranges, dispatched in order,
// so that no invocation's loops run past the device's loop budget (Note [Loop budget] in
// runtime/vulkan/vk_kernels.hpp). A run that began in an earlier range continues from the
// partial fold that range stored (a mean divides once, where its run ends, by the run's
// length, from its first element found by bisection).
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

// The first element of the run that holds i (its elements are contiguous: the predicate
// target(k) == tg is false before the run and true from it to i).
uint run_start(uint i, uvec2 tg) {
  uint lo = 0u, hi = i;  // the start lies in [lo, hi]
  while (lo < hi) {
    const uint mid = lo + (hi - lo) / 2u;
    if (target(mid) == tg) hi = mid; else lo = mid + 1u;
  }
  return lo;
}

void main() {
  const bool self = INCLUDE_SELF && FOLD != FOLD_ASSIGN;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = p.begin + gl_GlobalInvocationID.x; i < p.end; i += stride) {
    const uvec2 tg = target(i);
    const bool run_on = i > 0u && target(i - 1u) == tg;  // the run began before i
    if (run_on && i > p.begin) continue;  // not the first of its run in this range
    const uint e = p.o_off + tg.x;        // the host keeps targets below 2^32
    const bool from_out = run_on || self;  // an earlier range's partial, or out's value
    uint j = from_out ? i : i + 1u;
    if (IS_FLOAT_DT(DT)) {
      FTYPE acc = from_out ? LOAD_F(o, DT, e) : LOAD_F(v, DT, p.v_off + i);
      for (; j < p.end && target(j) == tg; ++j) acc = fold_f(acc, LOAD_F(v, DT, p.v_off + j));
      const bool ends = j == p.m || target(j) != tg;
      if (FOLD == FOLD_MEAN && ends)
        acc /= FTYPE(j - (run_on ? run_start(i, tg) : i) + (self ? 1u : 0u));
      STORE_F(o, DT, e, acc)
    } else {
      ITYPE acc = from_out ? LOAD_I(o, DT, e) : LOAD_I(v, DT, p.v_off + i);
      for (; j < p.end && target(j) == tg; ++j) acc = fold_i(acc, LOAD_I(v, DT, p.v_off + j));
      const bool ends = j == p.m || target(j) != tg;
      if (FOLD == FOLD_MEAN && ends)
        acc = floor_div(acc, j - (run_on ? run_start(i, tg) : i) + (self ? 1u : 0u));
      STORE_I(o, DT, e, acc)
    }
  }
}
