// shaders/softmax.comp — softmax and log_softmax along the last dim of strided
// rows (docs/kernel-contract.md): the input and the output may both be
// transposed views, so every row has its own offset in each.
//
// LANES threads share a row (WG / LANES rows per workgroup; ROW_FAST runs the
// thread index along the rows, for rows that are strided while neighbouring
// rows are contiguous). Each thread keeps an "online" pair: the maximum m of
// what it saw and s = sum exp(v - m), rescaled when m grows, so the row is
// read twice (statistics, then output) instead of three times. The pairs meet
// in a subgroup butterfly and a shared-memory tree (Note [Subgroup row reductions] in
// subgroup.glsl).
// Few long rows are cut into `splits` pieces: SOFTMAX_MODE_STATS writes each piece's
// pair to a scratch buffer; SOFTMAX_MODE_WRITE merges a row's pairs and writes the
// piece. SOFTMAX_MODE_FULL does a whole row in one dispatch. Host side:
// runtime/vulkan/vk_kernels_nn.cpp. The f64 module (Note [f64 on Vulkan] in
// runtime/vulkan/vk_pipelines.cpp) computes in FTYPE = double, its pairs doubles too.
// ferry-f64-ops: softmax log_softmax
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FERRY_F64
#include "transcendentals_f64.glsl"
#endif
#include "abi/softmax.h"  // spec and push constants, codes: shared with the host
#include "subgroup.glsl"

FERRY_TENSOR(0, y)  // the output (the scratch buffer again in SOFTMAX_MODE_STATS)
FERRY_TENSOR(1, x)
FERRY_TENSOR(2, r)  // (m, s) pairs of the pieces: written by SOFTMAX_MODE_STATS, read by SOFTMAX_MODE_WRITE

void outer_offsets(uint i, out uint xo, out uint yo) {
  xo = p.x_off;
  yo = p.y_off;
  for (int d = int(ODIM) - 1; d >= 0; --d) {
    uint c = i % p.osize[d];
    xo += c * p.xstride[d];
    yo += c * p.ystride[d];
    i /= p.osize[d];
  }
}

// Adds v to (m, s). -inf adds nothing (exp(-inf) = 0; m = -inf would make
// v - m NaN); NaN poisons s, which turns the whole row NaN, as on the CPU.
void push(inout FTYPE m, inout FTYPE s, FTYPE v) {
  if (isnan(v)) {
    s = F_NAN;
  } else if (v > m) {
    s = s * safe_exp(m - v) + 1.0;
    m = v;
  } else if (v != -F_INF) {
    s += safe_exp(v - m);
  }
}

void merge(inout FTYPE m, inout FTYPE s, FTYPE m2, FTYPE s2) {
  FTYPE mm = max(m, m2);
  // A zero (empty) side adds nothing, even when its m is -inf.
  s = (s == 0.0 ? 0.0 : s * safe_exp(m - mm)) + (s2 == 0.0 ? 0.0 : s2 * safe_exp(m2 - mm));
  m = mm;
}

shared FTYPE s_m[256];
shared FTYPE s_s[256];
#ifdef FERRY_F64
#define R_PAIRS r_f64
#else
#define R_PAIRS r_f32
#endif

void main() {
  const uint ROWS = gl_WorkGroupSize.x / LANES;
  const uint t = row_thread();
  const uint lane = ROW_FAST ? t / ROWS : t % LANES;
  const uint row = ROW_FAST ? t % ROWS : t / LANES;
  const uint head = row * LANES;  // the row's first slot
  const uint splits = MODE == SOFTMAX_MODE_FULL ? 1u : p.splits;
  // Virtual row v = piece * n_rows + row: neighbouring threads get neighbouring rows.
  const uint n_virtual = p.n_rows * splits;
  const uint n_blocks = (n_virtual + ROWS - 1u) / ROWS;
  for (uint blk = gl_WorkGroupID.x; blk < n_blocks; blk += gl_NumWorkGroups.x) {
    const uint v = blk * ROWS + row;
    const bool valid = v < n_virtual;
    const uint ri = v % p.n_rows;
    const uint begin = (v / p.n_rows) * p.chunk;
    const uint end = p.n - begin > p.chunk ? begin + p.chunk : p.n;
    uint xo, yo;
    outer_offsets(ri, xo, yo);

    FTYPE m = -F_INF, s = 0.0;
    if (valid) {
      if (MODE == SOFTMAX_MODE_WRITE) {
        for (uint k = lane; k < splits; k += LANES) {
          uint w = p.r_off + 2u * (k * p.n_rows + ri);
          merge(m, s, R_PAIRS[w], R_PAIRS[w + 1u]);
        }
      } else {
        for (uint k = begin + lane; k < end; k += LANES) push(m, s, LOAD_F(x, DT, xo + k * p.xs));
      }
    }
    // The lanes' pairs meet: first those in one subgroup, then the rest in shared memory.
    const uint in_subgroup = ROW_FAST ? 1u : row_subgroup_lanes(LANES);
    for (uint h = 1u; h < in_subgroup; h <<= 1u) merge(m, s, ROW_SHUFFLE(m, h), ROW_SHUFFLE(s, h));
    if (in_subgroup < LANES) {
      s_m[head + lane] = m;
      s_s[head + lane] = s;
      for (uint h = LANES / 2u; h >= in_subgroup; h >>= 1u) {
        memoryBarrierShared();
        barrier();
        if (lane < h) {
          merge(m, s, s_m[head + lane + h], s_s[head + lane + h]);
          s_m[head + lane] = m;
          s_s[head + lane] = s;
        }
      }
      memoryBarrierShared();
      barrier();
      m = s_m[head];  // every lane takes the row's result
      s = s_s[head];
    }

    if (MODE == SOFTMAX_MODE_STATS) {
      if (valid && lane == 0u) {
        R_PAIRS[p.r_off + 2u * v] = m;
        R_PAIRS[p.r_off + 2u * v + 1u] = s;
      }
    } else if (valid) {
      // m = +inf (an infinite element) or -inf (all -inf) gives NaN on the CPU.
      if (isinf(m)) s = F_NAN;
      const FTYPE log_s = safe_log(s), inv = 1.0 / s;
      for (uint k = begin + lane; k < end; k += LANES) {
        FTYPE d = LOAD_F(x, DT, xo + k * p.xs) - m;
        // (x - max) - log(sum), in this order, as the contract asks.
        STORE_F(y, DT, yo + k * p.ys, LOG ? d - log_s : safe_exp(d) * inv)
      }
    }
    if (in_subgroup < LANES) {
      memoryBarrierShared();
      barrier();  // the next block reuses the slots
    }
  }
}
