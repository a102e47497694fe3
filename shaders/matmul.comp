// shaders/matmul.comp — C[b] = A[b] x B[b]: A [B, M, K] and B [B, K, N] strided views (any
// stride may be 0), C [B, M, N] written through its batch and row strides (unit column stride).
//
// Floating dtypes (f32, f16, bf16) run a tiled GEMM: a workgroup computes one BM x BN tile of
// C, stepping through K in BK-deep slices that it stages in shared memory as f32; each thread
// keeps a TM x TN register block of accumulators. The slices are double-buffered: while the
// threads multiply slice t from one buffer, the loads of slice t+1 from global memory are
// already in flight into registers, and land in the other buffer, so one barrier per slice
// suffices. A thread's register block is not a dense square but TM/4 x TN/4 groups of 4 x 4,
// the groups WG_Y*4 rows (WG_X*4 columns) apart: then a warp's vec4 reads of a shared slice
// row hit consecutive 16-byte words (no bank conflicts) and its stores of C are coalesced.
// The shared rows are padded by 4 floats so that the K-fast loader's stores spread over the
// banks too. Integer dtypes (i8, i16, i32, i64, u8: products wrap) take a plain loop over K from
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
// ferry-f64-ops: matmul
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#include "abi/matmul.h"  // spec and push constants, codes: shared with the host
#ifdef FERRY_F64
#define FVEC4 dvec4  // the f64 module (Note [f64 on Vulkan]) stages and accumulates doubles
#else
#define FVEC4 vec4
#endif

const uint WG_X = BN / TN;  // threads along N
const uint WG_Y = BM / TM;  // threads along M
const uint WG = WG_X * WG_Y;
const uint SA_ROW = BM / 4 + 1;  // a shared A row (one k), in vec4s, padded by one
const uint SB_ROW = BN / 4 + 1;
const uint LOADS_A = (BM * BK / 4 + WG - 1) / WG;  // vec4s of a slice each thread loads
const uint LOADS_B = (BN * BK / 4 + WG - 1) / WG;

FERRY_TENSOR(0, c)
FERRY_TENSOR(1, a)
FERRY_TENSOR(2, b)
FERRY_TENSOR(3, cin)

// Two buffers of BK rows each; element (k, m) of buffer s is sA[(s*BK + k)*SA_ROW + m/4][m%4].
shared FVEC4 sA[2 * BK * SA_ROW];
shared FVEC4 sB[2 * BK * SB_ROW];

// Loading: a slice of A is BK x BM/4 runs of 4 consecutive rows, of B BK x BN/4 runs of 4
// consecutive columns; loader slot i of a thread loads one run into a vec4, so that it lands
// in shared memory as one 16-byte store. Consecutive threads take consecutive runs along M
// (N) when A's M (B's N) stride is 1, and consecutive k otherwise, so that a warp's loads hit
// few memory segments either way.
// Whether slot i of this thread has a run: the slices need not divide evenly among threads.
bool a_valid(uint i) { return gl_LocalInvocationIndex + i * WG < BM * BK / 4; }
bool b_valid(uint i) { return gl_LocalInvocationIndex + i * WG < BN * BK / 4; }
// The run of slot i: x = group of 4 rows (A) or columns (B), y = k.
uvec2 a_slot(uint i) {
  uint idx = gl_LocalInvocationIndex + i * WG;
  return A_MFAST ? uvec2(idx % (BM / 4), idx / (BM / 4)) : uvec2(idx / BK, idx % BK);
}
uvec2 b_slot(uint i) {
  uint idx = gl_LocalInvocationIndex + i * WG;
  return B_KFAST ? uvec2(idx / BK, idx % BK) : uvec2(idx % (BN / 4), idx / (BN / 4));
}

// Rows m0 + 4 s.x + (0..3) of A at column k0 + s.y, 0 outside A. An element outside A reads
// A's first element instead (always in bounds) and drops it: no divergence, no stray read.
FVEC4 load_a(uint i, uint a_base, uint m0, uint k0) {
  uvec2 s = a_slot(i);
  uint m = m0 + 4 * s.x, k = k0 + s.y;
  bool ok = a_valid(i) && k < p.K;
  uint at = a_base + m * p.sa_m + k * p.sa_k;
  FVEC4 v;
  [[unroll]] for (uint r = 0; r < 4; ++r) {
    bool in_a = ok && m + r < p.M;
    FTYPE x = LOAD_F(a, DT, in_a ? at + r * p.sa_m : p.a_off);
    v[r] = in_a ? x : 0.0;
  }
  return v;
}
// Columns n0 + 4 s.x + (0..3) of B at row k0 + s.y, 0 outside B.
FVEC4 load_b(uint i, uint b_base, uint n0, uint k0) {
  uvec2 s = b_slot(i);
  uint n = n0 + 4 * s.x, k = k0 + s.y;
  bool ok = b_valid(i) && k < p.K;
  uint at = b_base + k * p.sb_k + n * p.sb_n;
  FVEC4 v;
  [[unroll]] for (uint j = 0; j < 4; ++j) {
    bool in_b = ok && n + j < p.N;
    FTYPE x = LOAD_F(b, DT, in_b ? at + j * p.sb_n : p.b_off);
    v[j] = in_b ? x : 0.0;
  }
  return v;
}
// Stores a loaded run into buffer `buf` of the shared slices.
void stage_a(uint i, uint buf, FVEC4 v) {
  uvec2 s = a_slot(i);
  if (a_valid(i)) sA[(buf * BK + s.y) * SA_ROW + s.x] = v;
}
void stage_b(uint i, uint buf, FVEC4 v) {
  uvec2 s = b_slot(i);
  if (b_valid(i)) sB[(buf * BK + s.y) * SB_ROW + s.x] = v;
}

void main() {
  const uint tx = gl_LocalInvocationIndex % WG_X, ty = gl_LocalInvocationIndex / WG_X;
  const uint batch = gl_WorkGroupID.z + p.batch0;
  const uint m0 = (gl_WorkGroupID.y + p.m_tile0) * BM, n0 = (gl_WorkGroupID.x + p.n_tile0) * BN;
  const uint a_base = p.a_off + batch * p.sa_b, b_base = p.b_off + batch * p.sb_b;
  const uint c_base = p.c_off + batch * p.sc_b;

  if (!IS_FLOAT_DT(DT)) {
    // Integers: each thread sums its own block straight from global memory, wrapping.
    ITYPE acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = ITYPE(0);
    for (uint k = 0; k < p.K; ++k) {
      ITYPE av[TM], bv[TN];
      [[unroll]] for (uint r = 0; r < TM; ++r) {
        uint m = m0 + (r / 4) * WG_Y * 4 + ty * 4 + r % 4;
        uint ai = m < p.M ? a_base + m * p.sa_m + k * p.sa_k : p.a_off;  // in bounds
        ITYPE v = LOAD_I(a, DT, ai);
        av[r] = m < p.M ? v : ITYPE(0);
      }
      [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint n = n0 + (j / 4) * WG_X * 4 + tx * 4 + j % 4;
        uint bi = n < p.N ? b_base + k * p.sb_k + n * p.sb_n : p.b_off;
        ITYPE v = LOAD_I(b, DT, bi);
        bv[j] = n < p.N ? v : ITYPE(0);
      }
      [[unroll]] for (uint r = 0; r < TM; ++r)
        [[unroll]] for (uint j = 0; j < TN; ++j) acc[r * TN + j] += av[r] * bv[j];
    }
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      uint m = m0 + (r / 4) * WG_Y * 4 + ty * 4 + r % 4;
      [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint n = n0 + (j / 4) * WG_X * 4 + tx * 4 + j % 4;
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

  // Floating: acc[(r * TN/4) + h] holds row r (of TM), columns group h (of TN/4).
  FVEC4 acc[TM * TN / 4];
  [[unroll]] for (uint i = 0; i < TM * TN / 4; ++i) acc[i] = FVEC4(0.0);
  FVEC4 ra[LOADS_A], rb[LOADS_B];  // the next slice, on its way from global memory

  const uint slices = (p.K + BK - 1) / BK;
  if (slices > 0) {  // stage slice 0 in buffer 0
    [[unroll]] for (uint i = 0; i < LOADS_A; ++i) ra[i] = load_a(i, a_base, m0, 0);
    [[unroll]] for (uint i = 0; i < LOADS_B; ++i) rb[i] = load_b(i, b_base, n0, 0);
    [[unroll]] for (uint i = 0; i < LOADS_A; ++i) stage_a(i, 0, ra[i]);
    [[unroll]] for (uint i = 0; i < LOADS_B; ++i) stage_b(i, 0, rb[i]);
    barrier();
  }

  for (uint t = 0; t < slices; ++t) {
    const uint cur = t & 1u;
    const bool more = t + 1 < slices;
    if (more) {  // issue the loads of slice t+1 before the arithmetic of slice t
      [[unroll]] for (uint i = 0; i < LOADS_A; ++i) ra[i] = load_a(i, a_base, m0, (t + 1) * BK);
      [[unroll]] for (uint i = 0; i < LOADS_B; ++i) rb[i] = load_b(i, b_base, n0, (t + 1) * BK);
    }

    [[unroll]] for (uint k = 0; k < BK; ++k) {
      FVEC4 av[TM / 4], bv[TN / 4];
      [[unroll]] for (uint g = 0; g < TM / 4; ++g)
        av[g] = sA[(cur * BK + k) * SA_ROW + g * WG_Y + ty];
      [[unroll]] for (uint h = 0; h < TN / 4; ++h)
        bv[h] = sB[(cur * BK + k) * SB_ROW + h * WG_X + tx];
      [[unroll]] for (uint r = 0; r < TM; ++r)
        [[unroll]] for (uint h = 0; h < TN / 4; ++h)
          acc[r * (TN / 4) + h] += av[r / 4][r % 4] * bv[h];
    }

    if (more) {  // the other buffer: every read of it finished before the last barrier
      [[unroll]] for (uint i = 0; i < LOADS_A; ++i) stage_a(i, cur ^ 1u, ra[i]);
      [[unroll]] for (uint i = 0; i < LOADS_B; ++i) stage_b(i, cur ^ 1u, rb[i]);
    }
    barrier();
  }

  [[unroll]] for (uint r = 0; r < TM; ++r) {
    uint m = m0 + (r / 4) * WG_Y * 4 + ty * 4 + r % 4;
    if (m >= p.M) continue;
    [[unroll]] for (uint h = 0; h < TN / 4; ++h) {
      uint n = n0 + h * WG_X * 4 + tx * 4;
      uint ci = c_base + m * p.sc_m + n;
      FVEC4 v = acc[r * (TN / 4) + h];
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
