// shaders/layer_norm_backward.comp — layer_norm's backward over the rows of x [rows, N]
// (docs/kernel-contract.md), with x̂ = (x - mean) · rstd and ĝ = g · weight, in two or three
// dispatches (MODE):
//  0: dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)). LANES threads share a row (WG / LANES rows
//     a workgroup), each summing its strided share of ĝ and ĝ · x̂; the shares meet in a
//     subgroup butterfly, then a shared-memory tree (Note [Subgroup row reductions] in
//     subgroup.glsl), then each thread writes its share of dx.
//  1: dweight = Σ_rows g · x̂ and dbias = Σ_rows g, summed with the rounding error kept
//     (TwoSum). A workgroup takes COLS neighbouring columns (neighbouring threads read
//     neighbouring elements) in WG / COLS slices of threads, each slice walking every
//     slice-th row of the workgroup's chunk of rows; the slices meet in a shared-memory tree
//     (on a GPU 32 columns, 8 slices; on a CPU-type device one slice, which needs no tree).
//     With one chunk (chunks = 1) the tree's result is the gradient, added to what dweight
//     and dbias hold where `accumulate` says this is a later part of a tensor split between
//     bindings; with several (a grid of chunks in y, where the columns alone would leave the
//     device idle) each chunk's four sums (dweight's and dbias's, each with its error) go to a scratch buffer,
//     bound at 0, 1 and 2: (chunk · 4 + k) · N + column, k = 0..3.
//  2: the chunks' sums, read from the scratch bound at 3, combined a thread a column, into
//     dweight and dbias as mode 1 writes them.
// g, x, dx and the weight are x's dtype; mean, rstd, dweight and dbias f32 (f64 in the f64
// module, which computes in double: Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp).
// Host side: runtime/vulkan/vk_kernels_nn.cpp.
// ferry-f64-ops: layer_norm_backward
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/layer_norm_backward.h"  // spec and push constants: shared with the host
#include "subgroup.glsl"

FERRY_TENSOR(0, dx)  // MODE 1 binds dweight or the scratch here, MODE 0 dx at 1 and 2 (unused)
FERRY_TENSOR(1, dw)
FERRY_TENSOR(2, db)
FERRY_TENSOR(3, g)
FERRY_TENSOR(4, x)
FERRY_TENSOR(5, st_mean)
FERRY_TENSOR(6, st_rstd)
FERRY_TENSOR(7, w)   // when absent (or in MODE 1) the host binds x here (never read)

#ifdef FERRY_F64
#define STATS(N) N##_f64
#else
#define STATS(N) N##_f32
#endif

shared FTYPE s_a[256];
shared FTYPE s_b[256];
shared FTYPE s_c[256];
shared FTYPE s_d[256];

void rows_mode() {
  const uint ROWS = gl_WorkGroupSize.x / LANES;
  const uint t = row_thread();
  const uint lane = t % LANES;
  const uint row = t / LANES;
  const uint head = row * LANES;
  const uint n_blocks = (p.rows + ROWS - 1u) / ROWS;
  for (uint blk = gl_WorkGroupID.x; blk < n_blocks; blk += gl_NumWorkGroups.x) {
    const uint ri = blk * ROWS + row;
    const bool valid = ri < p.rows;
    FTYPE mu = 0.0, rs = 0.0, a = 0.0, b = 0.0;
    const uint go = p.g_off + ri * p.gs0, xo = p.x_off + ri * p.xs0;
    if (valid) {
      mu = STATS(st_mean)[p.m_off + ri * p.ms];
      rs = STATS(st_rstd)[p.r_off + ri * p.rs];
      for (uint k = lane; k < p.n; k += LANES) {
        FTYPE gh = LOAD_F(g, DT, go + k * p.gs1);
        if (HAS_W) gh *= LOAD_F(w, DT, p.w_off + k * p.ws);
        const FTYPE xh = (LOAD_F(x, DT, xo + k * p.xs1) - mu) * rs;
        a += gh;
        b += gh * xh;
      }
    }
    // A sum's two operands give the same result in either order, so every lane of the
    // butterfly ends with the same sums.
    const uint in_subgroup = row_subgroup_lanes(LANES);
    for (uint h = 1u; h < in_subgroup; h <<= 1u) {
      a += ROW_SHUFFLE(a, h);
      b += ROW_SHUFFLE(b, h);
    }
    if (in_subgroup < LANES) {
      s_a[t] = a;
      s_b[t] = b;
      for (uint h = LANES / 2u; h >= in_subgroup; h >>= 1u) {
        memoryBarrierShared();
        barrier();
        if (lane < h) {
          s_a[t] += s_a[t + h];
          s_b[t] += s_b[t + h];
        }
      }
      memoryBarrierShared();
      barrier();
      a = s_a[head];
      b = s_b[head];
    }
    if (valid) {
      const FTYPE c1 = a / FTYPE(p.n), c2 = b / FTYPE(p.n);
      const uint dxo = p.dx_off + ri * p.dxs0;
      for (uint k = lane; k < p.n; k += LANES) {
        FTYPE gh = LOAD_F(g, DT, go + k * p.gs1);
        if (HAS_W) gh *= LOAD_F(w, DT, p.w_off + k * p.ws);
        const FTYPE xh = (LOAD_F(x, DT, xo + k * p.xs1) - mu) * rs;
        STORE_F(dx, DT, dxo + k * p.dxs1, rs * (gh - c1 - xh * c2))
      }
    }
    if (in_subgroup < LANES) {
      memoryBarrierShared();
      barrier();  // the next block reuses the slots
    }
  }
}

// The sums of a column: dweight's (gx, with its error gx_lo) and dbias's (gs, gs_lo).
struct ColumnSums {
  FTYPE gx, gx_lo, gs, gs_lo;
};

void merge(inout ColumnSums a, ColumnSums b) {
  add_exact(a.gx, a.gx_lo, b.gx);
  a.gx_lo += b.gx_lo;
  add_exact(a.gs, a.gs_lo, b.gs);
  a.gs_lo += b.gs_lo;
}

// Column j's gradients into dweight and dbias (bound at 0 or 1, and 2).
void write_column(uint j, ColumnSums c) {
  // An infinite or NaN term makes lo NaN; hi is then the sum.
  FTYPE dwv = isinf(c.gx) || isnan(c.gx) ? c.gx : c.gx + c.gx_lo;
  FTYPE dbv = isinf(c.gs) || isnan(c.gs) ? c.gs : c.gs + c.gs_lo;
  if (p.accumulate != 0u) {
    dwv += STATS(dw)[p.dw_off + j * p.dws];
    dbv += STATS(db)[p.db_off + j * p.dbs];
  }
  STATS(dw)[p.dw_off + j * p.dws] = dwv;
  STATS(db)[p.db_off + j * p.dbs] = dbv;
}

void columns_mode() {
  const uint SLICES = gl_WorkGroupSize.x / COLS;
  const uint t = gl_LocalInvocationID.x;
  const uint col = t % COLS, slice = t / COLS;
  const uint chunk = gl_WorkGroupID.y;
  const uint r0 = chunk * p.chunk_rows;
  const uint r1 = min(p.rows, r0 + p.chunk_rows);
  const uint tiles = (p.n + COLS - 1u) / COLS;
  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
    const uint j = tile * COLS + col;
    ColumnSums c = ColumnSums(FTYPE(0.0), FTYPE(0.0), FTYPE(0.0), FTYPE(0.0));
    if (j < p.n) {
      for (uint r = r0 + slice; r < r1; r += SLICES) {
        const FTYPE gv = LOAD_F(g, DT, p.g_off + r * p.gs0 + j * p.gs1);
        const FTYPE xh = (LOAD_F(x, DT, p.x_off + r * p.xs0 + j * p.xs1) -
                          STATS(st_mean)[p.m_off + r * p.ms]) *
                         STATS(st_rstd)[p.r_off + r * p.rs];
        add_exact(c.gx, c.gx_lo, gv * xh);
        add_exact(c.gs, c.gs_lo, gv);
      }
    }
    // One slice (a constant once specialized) leaves no barrier in the pipeline: lavapipe
    // runs a shader without barriers as plain SIMD loops.
    if (SLICES > 1u) {
      s_a[t] = c.gx;
      s_b[t] = c.gx_lo;
      s_c[t] = c.gs;
      s_d[t] = c.gs_lo;
      for (uint h = SLICES / 2u; h >= 1u; h >>= 1u) {
        memoryBarrierShared();
        barrier();
        if (slice < h) {
          const uint o = t + h * COLS;
          merge(c, ColumnSums(s_a[o], s_b[o], s_c[o], s_d[o]));
          s_a[t] = c.gx;
          s_b[t] = c.gx_lo;
          s_c[t] = c.gs;
          s_d[t] = c.gs_lo;
        }
      }
    }
    if (slice == 0u && j < p.n) {
      if (p.chunks == 1u) {
        write_column(j, c);
      } else {
        const uint at = p.s_off + chunk * 4u * p.n + j;
        STATS(dx)[at] = c.gx;
        STATS(dx)[at + p.n] = c.gx_lo;
        STATS(dx)[at + 2u * p.n] = c.gs;
        STATS(dx)[at + 3u * p.n] = c.gs_lo;
      }
    }
    if (SLICES > 1u) {
      memoryBarrierShared();
      barrier();  // the next tile reuses the slots
    }
  }
}

void combine_mode() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint j = gl_GlobalInvocationID.x; j < p.n; j += stride) {
    ColumnSums c = ColumnSums(FTYPE(0.0), FTYPE(0.0), FTYPE(0.0), FTYPE(0.0));
    for (uint k = 0u; k < p.chunks; ++k) {
      const uint at = p.s_off + k * 4u * p.n + j;
      merge(c, ColumnSums(STATS(g)[at], STATS(g)[at + p.n], STATS(g)[at + 2u * p.n],
                          STATS(g)[at + 3u * p.n]));
    }
    write_column(j, c);
  }
}

void main() {
  if (MODE == 0u)
    rows_mode();
  else if (MODE == 1u)
    columns_mode();
  else
    combine_mode();
}
