// shaders/resample.comp — interpolate's 2-D kernels over contiguous [N, C, H, W] planes, by the
// per-dim tables the core computed for every mode (docs/kernel-contract.md). Host side, and
// why gathers: Note [Vulkan resampling] in runtime/vulkan/vk_kernels_resample.cpp.
//  RESAMPLE: a thread per output element:
//    y[oh, ow] = Σ_b ww[b, ow] Σ_a wh[a, oh] x[ih[a, oh], iw[b, ow]], the CPU's terms in the
//    CPU's order (Note [Resampling on the CPU]).
//  RESAMPLE_RANGES: a thread per (tap, input position) of each dim finds the range of outputs
//    whose index is that position (a binary search: each tap's indices do not decrease along
//    the outputs), for the backward: ranges [t * H + i] of the rows, then [TAPS_H * H + t * W
//    + i] of the columns, each two uints (first, end).
//  RESAMPLE_BACKWARD: a thread per input element gathers the outputs that read it, by those
//    ranges: output row by output row, the row's columns summed with their weights and the sum
//    times the row's weight, in the CPU's order.
// An index is read as its low 32-bit word; one at or past the plane's end adds nothing (the
// tables reach the kernel only from the core; the CPU's kernel raises ShapeError on an index
// outside the plane).
// Bindings: abi/resample.h. The grid: plane_grid's (runtime/vulkan/vk_kernels.hpp).
// ferry-f64-ops: interpolate interpolate_backward
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/resample.h"  // spec and push constants: shared with the host

FERRY_TENSOR(0, o)
FERRY_TENSOR(1, a)
FERRY_TENSOR(2, ih)
FERRY_TENSOR(3, wh)
FERRY_TENSOR(4, iw)
FERRY_TENSOR(5, ww)
FERRY_TENSOR(6, rg)

// The weights' dtype: the compute type.
#define WDT (DT == DT_F64 ? DT_F64 : DT_F32)

// Index table N's entry e (an i64, read as its low 32-bit word: the base variant has no 64-bit
// integers, and the indices lie in [0, len)), as a uint; one at or past len as len (skipped).
#define TABLE_INDEX(N, e, len) min(N##_u32[2u * (e)], (len))

// The outputs [x, y) of tap row `base` (n outputs) whose index is i: the indices do not
// decrease along the outputs, so two binary searches find them.
#define TABLE_RANGE(N)                                        \
  uvec2 N##_range(uint base, uint n, uint len, uint i) {      \
    uint lo = 0u, hi = n;                                     \
    while (lo < hi) {                                         \
      const uint m = (lo + hi) / 2u;                          \
      if (TABLE_INDEX(N, base + m, len) < i) lo = m + 1u;     \
      else hi = m;                                            \
    }                                                         \
    uint end = lo;                                            \
    hi = n;                                                   \
    while (end < hi) {                                        \
      const uint m = (end + hi) / 2u;                         \
      if (TABLE_INDEX(N, base + m, len) <= i) end = m + 1u;   \
      else hi = m;                                            \
    }                                                         \
    return uvec2(lo, end);                                    \
  }
TABLE_RANGE(ih)
TABLE_RANGE(iw)

// Output element r of plane q.
void forward(uint q, uint r) {
  const uint oh = r / p.ow, ow = r - oh * p.ow;
  const uint plane = p.off[1] + q * p.h * p.w;
  FTYPE y = 0.0;
  for (uint b = 0u; b < TAPS_W; ++b) {
    const uint col = TABLE_INDEX(iw, p.off[4] + b * p.ow + ow, p.w);
    if (col == p.w) continue;
    FTYPE row = 0.0;  // the CPU's row value at this column
    for (uint t = 0u; t < TAPS_H; ++t) {
      const uint ir = TABLE_INDEX(ih, p.off[2] + t * p.oh + oh, p.h);
      if (ir < p.h) row += LOAD_F(wh, WDT, p.off[3] + t * p.oh + oh) * LOAD_F(a, DT, plane + ir * p.w + col);
    }
    y += LOAD_F(ww, WDT, p.off[5] + b * p.ow + ow) * row;
  }
  STORE_F(o, DT, p.off[0] + q * p.oh * p.ow + r, y)
}

// Range entry r: a tap of the rows', or of the columns'.
void ranges(uint r) {
  const uint rows = TAPS_H * p.h;
  uvec2 range;
  if (r < rows) {
    const uint t = r / p.h;
    range = ih_range(p.off[2] + t * p.oh, p.oh, p.h, r - t * p.h);
  } else {
    const uint t = (r - rows) / p.w;
    range = iw_range(p.off[4] + t * p.ow, p.ow, p.w, r - rows - t * p.w);
  }
  o_u32[2u * (p.off[0] + r)] = range.x;
  o_u32[2u * (p.off[0] + r) + 1u] = range.y;
}

// Tap t's range of outputs of input position i along the rows (the rows' ranges) or columns.
uvec2 row_range(uint t, uint i) {
  const uint e = p.off[6] + t * p.h + i;
  return uvec2(rg_u32[2u * e], rg_u32[2u * e + 1u]);
}
uvec2 col_range(uint t, uint i) {
  const uint e = p.off[6] + TAPS_H * p.h + t * p.w + i;
  return uvec2(rg_u32[2u * e], rg_u32[2u * e + 1u]);
}

// Input element r of plane q: the output rows that read its row, rising, and in each the
// columns that read its column (taps, then outputs, rising), as the CPU adds them.
void backward(uint q, uint r) {
  const uint row = r / p.w, col = r - row * p.w;
  uvec2 cols[RESAMPLE_MAX_TAPS];
  for (uint b = 0u; b < TAPS_W; ++b) cols[b] = col_range(b, col);
  uint first = p.oh, last = 0u;
  for (uint t = 0u; t < TAPS_H; ++t) {
    const uvec2 rows = row_range(t, row);
    if (rows.x < rows.y) {
      first = min(first, rows.x);
      last = max(last, rows.y);
    }
  }
  const uint plane = p.off[1] + q * p.oh * p.ow;
  FTYPE dx = 0.0;
  for (uint oh = first; oh < last; ++oh) {
    FTYPE v = 0.0;  // the CPU's row value: output row oh's columns that read col
    for (uint b = 0u; b < TAPS_W; ++b)
      for (uint ow = cols[b].x; ow < cols[b].y; ++ow)
        v += LOAD_F(ww, WDT, p.off[5] + b * p.ow + ow) * LOAD_F(a, DT, plane + oh * p.ow + ow);
    for (uint t = 0u; t < TAPS_H; ++t)
      if (TABLE_INDEX(ih, p.off[2] + t * p.oh + oh, p.h) == row)
        dx += LOAD_F(wh, WDT, p.off[3] + t * p.oh + oh) * v;
  }
  STORE_F(o, DT, p.off[0] + q * p.h * p.w + r, dx)
}

void visit(uint q, uint r) {
  if (MODE == RESAMPLE)
    forward(q, r);
  else if (MODE == RESAMPLE_RANGES)
    ranges(r);
  else
    backward(q, r);
}

void main() {
  const uint area = MODE == RESAMPLE          ? p.oh * p.ow
                    : MODE == RESAMPLE_RANGES ? TAPS_H * p.h + TAPS_W * p.w
                                              : p.h * p.w;
  FOR_EACH_PLANE_ELEMENT(p.planes, area, visit)
}
