// shaders/gemm_tile.glsl — the tiled float GEMM that matmul.comp and conv.comp share: a
// workgroup accumulates one BM x BN tile of C = A x B over a range of K, each thread a TM x TN
// register block; what A and B are (strided views, or a convolution's implicit columns) is the
// including shader's business, through the two run loaders it defines.
//
// The K range is walked in BK-deep slices staged in shared memory as FTYPE (f32, or double in
// the f64 modules). The slices are double-buffered: while the threads multiply slice t from
// one buffer, the loads of slice t+1 from global memory are already in flight into registers,
// and land in the other buffer, so one barrier per slice suffices. A thread's register block is
// not a dense square but TM/4 x TN/4 groups of 4 x 4, the groups WG_Y*4 rows (WG_X*4 columns)
// apart: then a warp's vec4 reads of a shared slice row hit consecutive 16-byte words (no bank
// conflicts) and its stores of C are coalesced. The shared rows are padded by one vec4 so that
// the K-fast loader's stores spread over the banks too.
//
// The including shader declares, before including this file, spec constants uint BM, BN, BK,
// TM, TN (TM, TN multiples of 4; the workgroup is 1-D, (BM/TM) * (BN/TN) threads) and bool
// A_MFAST, B_KFAST (which way loader threads walk), and defines, anywhere after it:
//   FVEC4 gemm_a_run(uint i, uint m, uint k): A[m..m+3][k], zero for rows or a k outside A;
//   FVEC4 gemm_b_run(uint i, uint k, uint n): B[k][n..n+3], zero for columns or a k outside B;
//   void gemm_start(uint m0, uint n0): called once per tile before any load, so that a loader
//     can work out what stays fixed across the slices (a loader slot i, of LOADS_A or LOADS_B,
//     keeps its rows of A along M, or its columns of B along N, unless it walks K: see
//     gemm_a_slot and gemm_b_slot) instead of once per slice.
// It calls gemm_tile(m0, n0, k0, k_count), which leaves the thread's block of the tile at
// (m0, n0), summed over k in [k0, k0 + k_count), in gemm_acc: gemm_acc[r * (TN/4) + h] holds
// row gemm_row(m0, r) and columns gemm_col(n0, h) + (0..3). A loader only changes which thread
// loads which element, never the result.
#ifdef FERRY_F64
#define FVEC4 dvec4  // the f64 modules (Note [f64 on Vulkan]) stage and accumulate doubles
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

// Two buffers of BK rows each; element (k, m) of buffer s is sA[(s*BK + k)*SA_ROW + m/4][m%4].
shared FVEC4 sA[2 * BK * SA_ROW];
shared FVEC4 sB[2 * BK * SB_ROW];

FVEC4 gemm_acc[TM * TN / 4];

FVEC4 gemm_a_run(uint i, uint m, uint k);  // the including shader's loaders
FVEC4 gemm_b_run(uint i, uint k, uint n);
void gemm_start(uint m0, uint n0);

uint gemm_tx() { return gl_LocalInvocationIndex % WG_X; }
uint gemm_ty() { return gl_LocalInvocationIndex / WG_X; }
uint gemm_row(uint m0, uint r) { return m0 + (r / 4) * WG_Y * 4 + gemm_ty() * 4 + r % 4; }
uint gemm_col(uint n0, uint h) { return n0 + h * WG_X * 4 + gemm_tx() * 4; }

// Loading: a slice of A is BK x BM/4 runs of 4 consecutive rows, of B BK x BN/4 runs of 4
// consecutive columns; loader slot i of a thread loads one run into a vec4, so that it lands
// in shared memory as one 16-byte store. Consecutive threads take consecutive runs along M
// (N) when A_MFAST (B's N-fast default), and consecutive k otherwise, so that a warp's loads
// hit few memory segments either way.
// Whether slot i of this thread has a run: the slices need not divide evenly among threads.
bool gemm_a_valid(uint i) { return gl_LocalInvocationIndex + i * WG < BM * BK / 4; }
bool gemm_b_valid(uint i) { return gl_LocalInvocationIndex + i * WG < BN * BK / 4; }
// The run of slot i: x = group of 4 rows (A) or columns (B), y = k within the slice.
uvec2 gemm_a_slot(uint i) {
  uint idx = gl_LocalInvocationIndex + i * WG;
  return A_MFAST ? uvec2(idx % (BM / 4), idx / (BM / 4)) : uvec2(idx / BK, idx % BK);
}
uvec2 gemm_b_slot(uint i) {
  uint idx = gl_LocalInvocationIndex + i * WG;
  return B_KFAST ? uvec2(idx / BK, idx % BK) : uvec2(idx % (BN / 4), idx / (BN / 4));
}
FVEC4 gemm_load_a(uint i, uint m0, uint k0) {
  uvec2 s = gemm_a_slot(i);
  return gemm_a_valid(i) ? gemm_a_run(i, m0 + 4 * s.x, k0 + s.y) : FVEC4(0.0);
}
FVEC4 gemm_load_b(uint i, uint n0, uint k0) {
  uvec2 s = gemm_b_slot(i);
  return gemm_b_valid(i) ? gemm_b_run(i, k0 + s.y, n0 + 4 * s.x) : FVEC4(0.0);
}
// Stores a loaded run into buffer `buf` of the shared slices.
void gemm_stage_a(uint i, uint buf, FVEC4 v) {
  uvec2 s = gemm_a_slot(i);
  if (gemm_a_valid(i)) sA[(buf * BK + s.y) * SA_ROW + s.x] = v;
}
void gemm_stage_b(uint i, uint buf, FVEC4 v) {
  uvec2 s = gemm_b_slot(i);
  if (gemm_b_valid(i)) sB[(buf * BK + s.y) * SB_ROW + s.x] = v;
}

// The loaders see k in [k0, k0 + slices * BK): those at or past k0 + k_count must be zero, which
// the including shader's loaders guarantee by checking against the end of A's and B's K.
void gemm_tile(uint m0, uint n0, uint k0, uint k_count) {
  const uint tx = gemm_tx(), ty = gemm_ty();
  gemm_start(m0, n0);
  [[unroll]] for (uint i = 0; i < TM * TN / 4; ++i) gemm_acc[i] = FVEC4(0.0);
  FVEC4 ra[LOADS_A], rb[LOADS_B];  // the next slice, on its way from global memory

  const uint slices = (k_count + BK - 1) / BK;
  if (slices > 0) {  // stage slice 0 in buffer 0
    [[unroll]] for (uint i = 0; i < LOADS_A; ++i) ra[i] = gemm_load_a(i, m0, k0);
    [[unroll]] for (uint i = 0; i < LOADS_B; ++i) rb[i] = gemm_load_b(i, n0, k0);
    [[unroll]] for (uint i = 0; i < LOADS_A; ++i) gemm_stage_a(i, 0, ra[i]);
    [[unroll]] for (uint i = 0; i < LOADS_B; ++i) gemm_stage_b(i, 0, rb[i]);
    barrier();
  }

  for (uint t = 0; t < slices; ++t) {
    const uint cur = t & 1u;
    const bool more = t + 1 < slices;
    if (more) {  // issue the loads of slice t+1 before the arithmetic of slice t
      const uint kn = k0 + (t + 1) * BK;
      [[unroll]] for (uint i = 0; i < LOADS_A; ++i) ra[i] = gemm_load_a(i, m0, kn);
      [[unroll]] for (uint i = 0; i < LOADS_B; ++i) rb[i] = gemm_load_b(i, n0, kn);
    }

    [[unroll]] for (uint k = 0; k < BK; ++k) {
      FVEC4 av[TM / 4], bv[TN / 4];
      [[unroll]] for (uint g = 0; g < TM / 4; ++g)
        av[g] = sA[(cur * BK + k) * SA_ROW + g * WG_Y + ty];
      [[unroll]] for (uint h = 0; h < TN / 4; ++h)
        bv[h] = sB[(cur * BK + k) * SB_ROW + h * WG_X + tx];
      [[unroll]] for (uint r = 0; r < TM; ++r)
        [[unroll]] for (uint h = 0; h < TN / 4; ++h)
          gemm_acc[r * (TN / 4) + h] += av[r / 4][r % 4] * bv[h];
    }

    if (more) {  // the other buffer: every read of it finished before the last barrier
      [[unroll]] for (uint i = 0; i < LOADS_A; ++i) gemm_stage_a(i, cur ^ 1u, ra[i]);
      [[unroll]] for (uint i = 0; i < LOADS_B; ++i) gemm_stage_b(i, cur ^ 1u, rb[i]);
    }
    barrier();
  }
}
