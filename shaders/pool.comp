// shaders/pool.comp — max_pool1d/2d, avg_pool1d/2d and their backward kernels over contiguous
// [N, C, *] planes (docs/kernel-contract.md; a 1-D pool is a plane of height 1), regular or
// adaptive windows. Host side, and why gathers: Note [Vulkan pooling] in
// runtime/vulkan/vk_kernels_pool.cpp.
//  POOL_MAX: a thread per output element walks its window's taps in (i, j) order, keeping the
//    first of equal values and letting a NaN take over (the CPU's rule), and writes the
//    maximum and its flat position in the plane as an i64 (two 32-bit words: the base shader
//    variant has no 64-bit integers).
//  POOL_MAX_BACKWARD: a thread per input element adds the gradients of the windows that hold
//    it and chose it, in the order of the outputs, as the CPU adds them: the same sum, bit for
//    bit.
//  POOL_AVG: a thread per output element adds its window's taps in (i, j) order and divides by
//    the window's divisor (PyTorch's, as ferry/kit/pool_geometry.hpp's AvgPoolDivisor).
//  POOL_AVG_BACKWARD: a thread per input element adds g / divisor of the windows that cover
//    it, in output order, as the CPU does.
// Bindings: 0 the values, y or dx; 1 the indices (POOL_MAX; binding 0's tensor otherwise: the
// shader has stores to it, which synchronization validation counts whatever MODE rules out);
// 2 x or g; 3 the indices (POOL_MAX_BACKWARD; binding 2's tensor otherwise).
// The grid: plane_grid's (runtime/vulkan/vk_kernels.hpp).
// ferry-f64-ops: max_pool1d max_pool2d max_pool_backward avg_pool1d avg_pool2d avg_pool_backward
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/pool.h"  // spec and push constants: shared with the host
// The windows' extents, counts and coverings: shared with the CPU's kernels
#include "ferry/kit/pool_windows.hpp"

FERRY_TENSOR(0, o)
FERRY_TENSOR(1, io)
FERRY_TENSOR(2, a)
FERRY_TENSOR(3, ii)

// The plane's dims, regular or adaptive (ferry/kit/pool_windows.hpp).
PoolDim rows() {
  return PoolDim(int(p.h), int(p.oh), int(p.kh), int(p.sh), int(p.ph), int(p.dh),
                 p.adaptive != 0u);
}
PoolDim cols() {
  return PoolDim(int(p.w), int(p.ow), int(p.kw), int(p.sw), int(p.pw), int(p.dw),
                 p.adaptive != 0u);
}

// Output element r of plane q.
void forward(uint q, uint r) {
  const int oh = int(r / p.ow), ow = int(r - uint(oh) * p.ow);
  const uint plane = p.off[2] + q * p.h * p.w;
  const int h0 = pool_tap_start(rows(), oh), kh = pool_tap_count(rows(), oh);
  const int w0 = pool_tap_start(cols(), ow), kw = pool_tap_count(cols(), ow);
  FTYPE best = -F_INF;
  int arg = -1;
  for (int i = 0; i < kh; ++i) {
    const int ih = h0 + i * int(p.dh);
    if (ih < 0 || ih >= int(p.h)) continue;
    for (int j = 0; j < kw; ++j) {
      const int iw = w0 + j * int(p.dw);
      if (iw < 0 || iw >= int(p.w)) continue;
      const int at = ih * int(p.w) + iw;
      const FTYPE v = LOAD_F(a, DT, plane + uint(at));
      if (arg < 0 || v > best || isnan(v)) {
        best = v;
        arg = at;
      }
    }
  }
  const uint oi = q * p.oh * p.ow + r;
  STORE_F(o, DT, p.off[0] + oi, best)
  io_u32[2u * (p.off[1] + oi)] = uint(arg);
  io_u32[2u * (p.off[1] + oi) + 1u] = arg < 0 ? 0xffffffffu : 0u;
}

// Input element r of plane q: the windows whose span covers it, rows then columns in
// increasing order (PyTorch's CUDA kernel finds them alike); a window whose dilated taps step
// over r cannot have chosen it.
void backward(uint q, uint r) {
  const int ih = int(r / p.w), iw = int(r - uint(ih) * p.w);
  const uint plane = q * p.oh * p.ow;
  FTYPE sum = 0.0;
  for (int oh = pool_covering_first(rows(), ih); oh < pool_covering_end(rows(), ih); ++oh)
    for (int ow = pool_covering_first(cols(), iw); ow < pool_covering_end(cols(), iw); ++ow) {
      const uint oi = plane + uint(oh) * p.ow + uint(ow);
      if (ii_u32[2u * (p.off[3] + oi)] == r && ii_u32[2u * (p.off[3] + oi) + 1u] == 0u)
        sum += LOAD_F(a, DT, p.off[2] + oi);
    }
  STORE_F(o, DT, p.off[0] + q * p.h * p.w + r, sum)
}

// Window (oh, ow)'s divisor: divisor_override, or the product of its counts along the dims.
FTYPE divisor(int oh, int ow) {
  if (p.divisor != 0) return FTYPE(p.divisor);
  const bool pad = p.count_include_pad != 0u;
  return FTYPE(avg_pool_window_count(rows(), oh, pad) * avg_pool_window_count(cols(), ow, pad));
}

// Output element r of plane q: its window's taps inside the input, rows then columns.
void avg_forward(uint q, uint r) {
  const int oh = int(r / p.ow), ow = int(r - uint(oh) * p.ow);
  const uint plane = p.off[2] + q * p.h * p.w;
  FTYPE sum = 0.0;
  for (int ih = pool_window_first(rows(), oh); ih < pool_window_end(rows(), oh); ++ih)
    for (int iw = pool_window_first(cols(), ow); iw < pool_window_end(cols(), ow); ++iw)
      sum += LOAD_F(a, DT, plane + uint(ih) * p.w + uint(iw));
  STORE_F(o, DT, p.off[0] + q * p.oh * p.ow + r, sum / divisor(oh, ow))
}

// Input element r of plane q: the windows that cover it, rows then columns in increasing
// order, each adding its gradient over its divisor.
void avg_backward(uint q, uint r) {
  const int ih = int(r / p.w), iw = int(r - uint(ih) * p.w);
  const uint plane = p.off[2] + q * p.oh * p.ow;
  FTYPE sum = 0.0;
  for (int oh = pool_covering_first(rows(), ih); oh < pool_covering_end(rows(), ih); ++oh)
    for (int ow = pool_covering_first(cols(), iw); ow < pool_covering_end(cols(), iw); ++ow)
      sum += LOAD_F(a, DT, plane + uint(oh) * p.ow + uint(ow)) / divisor(oh, ow);
  STORE_F(o, DT, p.off[0] + q * p.h * p.w + r, sum)
}

void visit(uint q, uint r) {
  if (MODE == POOL_MAX)
    forward(q, r);
  else if (MODE == POOL_MAX_BACKWARD)
    backward(q, r);
  else if (MODE == POOL_AVG)
    avg_forward(q, r);
  else
    avg_backward(q, r);
}

void main() {
  const bool backward = MODE == POOL_MAX_BACKWARD || MODE == POOL_AVG_BACKWARD;
  FOR_EACH_PLANE_ELEMENT(p.planes, backward ? p.h * p.w : p.oh * p.ow, visit)
}
