// shaders/matmul.comp — C[b] = A[b] x B[b]: A [B, M, K] and B [B, K, N] strided views (any
// stride may be 0), C [B, M, N] written through its batch and row strides (unit column stride).
//
// Floating dtypes (f32, f16, bf16; the f64 module's doubles) run the tiled GEMM of
// gemm_tile.glsl, which says how it stages and accumulates; this file says what A and B are:
// strided views, each run loaded element by element, an element outside A or B read as A's
// (B's) first element instead (always in bounds) and dropped, so no divergence and no stray
// read. Integer dtypes (i8, i16, i32, i64, u8: products wrap) take a plain loop over K from
// global memory with the same thread layout; they are rare and small.
//
// Specialization and push constants: shaders/abi/matmul.h. The workgroup is 1-D,
// (BM/TM) * (BN/TN) threads (TM, TN multiples of 4; BM = TM * WG_Y, BN = TN * WG_X).
// A_MFAST (A's M stride is 1) makes loader threads walk M rather than K, for coalesced
// reads, and B_KFAST (B's K stride is 1) walk K rather than N; the layout flags only change
// which thread loads which element, never the result. Grid: x = N tiles, y = M tiles,
// z = batches, each offset by the push constants' bases (the host splits grids beyond the
// device limit). K = 0 writes zeros. ACCUMULATE: C += A x B, the old C read through binding
// 3 (the same range as binding 0, bound for reading so that the host's barriers see the
// read), for a K cut into pieces that each fit a storage-buffer binding; otherwise binding 3
// is unused. The f64 module computes the same in double (the host picks tiles that fit).
// SMALL (products of a few elements, Note [Tiny products] in runtime/vulkan/vk_kernels_linalg.cpp):
// a 1-D grid, a thread per element of C summing its K products straight from global memory, in
// order; no tile, no shared memory, no barrier. K is never cut there, so it never accumulates.
// ferry-f64-ops: matmul
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#include "abi/matmul.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, c)
FERRY_TENSOR(1, a)
FERRY_TENSOR(2, b)
FERRY_TENSOR(3, cin)

#include "gemm_tile.glsl"

uint a_base, b_base;  // this workgroup's batch of A and B

void gemm_start(uint m0, uint n0) {}
// Rows m + (0..3) of A at column k, 0 outside A.
FVEC4 gemm_a_run(uint i, uint m, uint k) {
  bool ok = k < p.K;
  uint at = a_base + m * p.sa_m + k * p.sa_k;
  FVEC4 v;
  [[unroll]] for (uint r = 0; r < 4; ++r) {
    bool in_a = ok && m + r < p.M;
    FTYPE x = LOAD_F(a, DT, in_a ? at + r * p.sa_m : p.a_off);
    v[r] = in_a ? x : 0.0;
  }
  return v;
}
// Columns n + (0..3) of B at row k, 0 outside B.
FVEC4 gemm_b_run(uint i, uint k, uint n) {
  bool ok = k < p.K;
  uint at = b_base + k * p.sb_k + n * p.sb_n;
  FVEC4 v;
  [[unroll]] for (uint j = 0; j < 4; ++j) {
    bool in_b = ok && n + j < p.N;
    FTYPE x = LOAD_F(b, DT, in_b ? at + j * p.sb_n : p.b_off);
    v[j] = in_b ? x : 0.0;
  }
  return v;
}

// SMALL: element e of C ([B, M, N] in order), floats in FTYPE, integers wrapping.
void small_product(uint e) {
  const uint mn = p.M * p.N;
  if (e >= p.elements) return;
  const uint batch = e / mn, m = (e % mn) / p.N, n = e % p.N;
  const uint ai = p.a_off + batch * p.sa_b + m * p.sa_m, bi = p.b_off + batch * p.sb_b + n * p.sb_n;
  const uint ci = p.c_off + batch * p.sc_b + m * p.sc_m + n;
  if (IS_FLOAT_DT(DT)) {
    FTYPE acc = FTYPE(0);
    for (uint k = 0; k < p.K; ++k) acc += LOAD_F(a, DT, ai + k * p.sa_k) * LOAD_F(b, DT, bi + k * p.sb_k);
    STORE_F(c, DT, ci, acc)
  } else {
    ITYPE acc = ITYPE(0);
    for (uint k = 0; k < p.K; ++k) acc += LOAD_I(a, DT, ai + k * p.sa_k) * LOAD_I(b, DT, bi + k * p.sb_k);
    STORE_I(c, DT, ci, acc)
  }
}

void main() {
  if (SMALL) {
    small_product(p.batch0 + gl_GlobalInvocationID.x);
    return;
  }
  const uint batch = gl_WorkGroupID.z + p.batch0;
  const uint m0 = (gl_WorkGroupID.y + p.m_tile0) * BM, n0 = (gl_WorkGroupID.x + p.n_tile0) * BN;
  a_base = p.a_off + batch * p.sa_b;
  b_base = p.b_off + batch * p.sb_b;
  const uint c_base = p.c_off + batch * p.sc_b;

  if (!IS_FLOAT_DT(DT)) {
    // Integers: each thread sums its own block straight from global memory, wrapping.
    ITYPE acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = ITYPE(0);
    for (uint k = 0; k < p.K; ++k) {
      ITYPE av[TM], bv[TN];
      [[unroll]] for (uint r = 0; r < TM; ++r) {
        uint m = gemm_row(m0, r);
        uint ai = m < p.M ? a_base + m * p.sa_m + k * p.sa_k : p.a_off;  // in bounds
        ITYPE v = LOAD_I(a, DT, ai);
        av[r] = m < p.M ? v : ITYPE(0);
      }
      [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint n = gemm_col(n0, j / 4) + j % 4;
        uint bi = n < p.N ? b_base + k * p.sb_k + n * p.sb_n : p.b_off;
        ITYPE v = LOAD_I(b, DT, bi);
        bv[j] = n < p.N ? v : ITYPE(0);
      }
      [[unroll]] for (uint r = 0; r < TM; ++r)
        [[unroll]] for (uint j = 0; j < TN; ++j) acc[r * TN + j] += av[r] * bv[j];
    }
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      uint m = gemm_row(m0, r);
      [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint n = gemm_col(n0, j / 4) + j % 4;
        if (m < p.M && n < p.N) {
          uint ci = c_base + m * p.sc_m + n;
          ITYPE v = acc[r * TN + j];
          if (ACCUMULATE) v += LOAD_I(cin, DT, ci);
          STORE_I(c, DT, ci, v)
        }
      }
    }
    return;
  }

  gemm_tile(m0, n0, 0, p.K);
  [[unroll]] for (uint r = 0; r < TM; ++r) {
    uint m = gemm_row(m0, r);
    if (m >= p.M) continue;
    [[unroll]] for (uint h = 0; h < TN / 4; ++h) {
      uint n = gemm_col(n0, h);
      uint ci = c_base + m * p.sc_m + n;
      FVEC4 v = gemm_acc[r * (TN / 4) + h];
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        if (n + j < p.N) {
          uint cj = ci + j;
          FTYPE x = v[j];
          if (ACCUMULATE) x += LOAD_F(cin, DT, cj);
          STORE_F(c, DT, cj, x)
        }
      }
    }
  }
}
