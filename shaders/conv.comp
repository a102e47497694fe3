// shaders/conv.comp — convolution (conv1d/2d/3d) and its two backward rows, as implicit GEMMs
// on gemm_tile.glsl's shared-memory tiles, with direct kernels for the products with few rows
// (depthwise convolutions).
// The host side, and which runs where, is runtime/vulkan/vk_kernels_conv.cpp (Note [Vulkan
// convolution]); the modes and bindings are in shaders/abi/conv.h.
//
// The GEMMs are the CPU's im2col products (Note [CPU convolution] in
// runtime/cpu/cpu_kernels_conv.cpp) with the columns never written out: the loader computes
// each column element from the tensor it comes from, zero where a tap falls into the padding.
// Per group g (gl_WorkGroupID.z % G), with K = the kernel's taps and L = the output positions:
//   forward          y [OC/G, N*L]  = w [OC/G, C/G*K]  x cols(x) [C/G*K, N*L]
//   backward_input   gx [C/G, N*in] = w^T [C/G, OC/G*K] x rows(gy) [OC/G*K, N*in], where row
//                    (oc, tap) of column (n, i) is gy at the output position whose window puts
//                    that tap on input position i, or zero where none does (a gather: no two
//                    threads add into one element). With a stride s, only the taps t with
//                    t * dil = i + pad (mod s) land on i, so the input positions are cut into
//                    the s (per dim) phases of i + pad mod s, one GEMM each (gl_WorkGroupID.z /
//                    G) over only the phase's taps: no product of a tap that lands nowhere, and
//                    within a phase the output position is a plain offset (phase_setup).
//   backward_weight  gw [OC/G, C/G*K] = gy [OC/G, N*L] x cols(x)^T [N*L, C/G*K], its long sum
//                    cut into pieces (gl_WorkGroupID.z / G) that write partial results, which
//                    CONV_SUM_PARTS adds up; CONV_BIAS_GRAD sums gy per channel.
// The batch is folded into the columns, so the small late layers of a CNN (7x7 positions)
// still fill whole tiles. Products with very few rows (depthwise convolutions, the input
// gradient of a layer with three input channels) would leave the tiles nearly empty, so they
// run direct kernels instead: one thread per output (forward) or input-gradient element, one
// workgroup per weight-gradient element, each summing only the taps that land.
// ferry-f64-ops: conv1d conv2d conv3d conv_backward_input conv_backward_weight
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#include "abi/conv.h"  // spec and push constants, codes: shared with the host
#include "gemm_tile.glsl"

FERRY_TENSOR(0, o)
FERRY_TENSOR(1, t1)
FERRY_TENSOR(2, t2)
FERRY_TENSOR(3, t3)

#ifdef FERRY_F64
#define DT_PART DT_F64  // the partial sums of backward_weight, in the compute type
#else
#define DT_PART DT_F32
#endif

#define U3(a) uvec3(p.a[0], p.a[1], p.a[2])

// The sizes every mode derives from the push constants, set once by main().
uint Cg, OCg, KK, L, AREA, g, k_end;

// Position i of a row-major grid of sizes sz.
uvec3 unflatten(uint i, uvec3 sz) { return uvec3(i / (sz.y * sz.z), (i / sz.z) % sz.y, i % sz.z); }
uint flatten(uvec3 q, uvec3 sz) { return (q.x * sz.y + q.y) * sz.z + q.z; }
// The next position (and sample, past the grid's last) in row-major order.
void advance(inout uint s, inout uvec3 q, uvec3 sz) {
  if (++q.z < sz.z) return;
  q.z = 0;
  if (++q.y < sz.y) return;
  q.y = 0;
  if (++q.x < sz.x) return;
  q.x = 0;
  ++s;
}
// The input position tap t of the window at output position q reads, flattened, or -1 where it
// falls into the padding.
int window_at(uvec3 q, uvec3 t) {
  ivec3 i = ivec3(q * U3(stride) + t * U3(dil)) - ivec3(U3(pad));
  if (any(lessThan(i, ivec3(0))) || any(greaterThanEqual(i, ivec3(U3(isz))))) return -1;
  return int(flatten(uvec3(i), U3(isz)));
}
// Element e of a batch sum's result of `count` elements: to binding 0, or to its part.
void store_sum(uint e, uint count, FTYPE v) {
  if (p.part0 == CONV_NO_PARTS) {
    if (ACCUMULATE) v += LOAD_F(t3, DT, p.off3 + e);
    STORE_F(o, DT, p.off0 + e, v)
  } else {
    STORE_F(o, DT_PART, p.off0 + (p.part0 + gl_WorkGroupID.z / p.G) * count + e, v)
  }
}
// Element (channel c of group g, sample s) of x at flat input position at.
uint x_index(uint s, uint c, uint at) { return p.off1 + (s * p.C + g * Cg + c) * AREA + at; }

// ---- the input gradient's stride phases (CONV_BACKWARD_INPUT) ----
// Phase r (per dim, 0 <= r < stride) holds the input positions i = first + m * stride with
// i + pad = r (mod stride), m < count; the taps that land on them are t = t0 + j * tstep,
// j < taps (t * dil = r mod stride), and tap j of position m reads output position
// c + m - j * dg (dg = dil / gcd(dil, stride)), when that is within the output.
uvec3 ph_first, ph_count, ph_t0, ph_tstep, ph_taps, ph_dg;
ivec3 ph_c;
uint PH_AREA, PH_KT;  // positions and taps of the phase

uint gcd(uint a, uint b) {
  while (b != 0) {
    uint t = a % b;
    a = b;
    b = t;
  }
  return a;
}

void phase_setup(uint phase) {
  const uvec3 st = U3(stride), r = unflatten(phase, st);
  [[unroll]] for (uint e = 0; e < 3; ++e) {
    const uint s = p.stride[e], d = p.dil[e], pad = p.pad[e], g_ds = gcd(d, s);
    ph_first[e] = (r[e] + s - pad % s) % s;
    ph_count[e] = ph_first[e] < p.isz[e] ? (p.isz[e] - ph_first[e] + s - 1) / s : 0;
    ph_tstep[e] = s / g_ds;
    ph_dg[e] = d / g_ds;
    ph_t0[e] = ~0u;  // no tap lands, unless one of the first s does (then its successors)
    for (uint t = s; t > 0; --t)
      if (((t - 1) * d) % s == r[e]) ph_t0[e] = t - 1;
    ph_taps[e] = ph_t0[e] < p.ksz[e] ? (p.ksz[e] - ph_t0[e] + ph_tstep[e] - 1) / ph_tstep[e] : 0;
    ph_c[e] = (int(ph_first[e] + pad) - int(ph_t0[e] * d)) / int(s);  // exact
  }
  PH_AREA = ph_count.x * ph_count.y * ph_count.z;
  PH_KT = ph_taps.x * ph_taps.y * ph_taps.z;
}

// ---- the GEMM modes' loaders: A [M, K] and B [K, N] as the table at the top says ----

bool inside(ivec3 i) {
  return all(greaterThanEqual(i, ivec3(0))) && all(lessThan(i, ivec3(U3(isz))));
}

// What stays fixed across the slices for the 4 columns of each loader slot of B (gemm_start):
//   forward          the column's sample's x (channel 0 of group g), and its window's corner
//                    q * stride - pad
//   backward_input   the column's sample's gy (channel 0 of group g), and the output
//                    position its phase's tap 0 reads
//   backward_weight  the column's channel's offset in x, and its tap's offset t * dil - pad
// col_base is ~0u for a column outside B.
uint col_base[LOADS_B * 4];
ivec3 col_pos[LOADS_B * 4];

void gemm_start(uint m0, uint n0) {
  [[unroll]] for (uint i = 0; i < LOADS_B; ++i) {
    const uint n = n0 + 4 * gemm_b_slot(i).x;
    if (MODE == CONV_FORWARD) {
      uint s = n / L;
      uvec3 q = unflatten(n % L, U3(osz));
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        col_base[i * 4 + j] = s < p.N ? x_index(s, 0, 0) : ~0u;
        col_pos[i * 4 + j] = ivec3(q * U3(stride)) - ivec3(U3(pad));
        advance(s, q, U3(osz));
      }
    } else if (MODE == CONV_BACKWARD_INPUT) {  // column (sample, position m of the phase)
      uint s = n / PH_AREA;
      uvec3 m = unflatten(n % PH_AREA, ph_count);
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        col_base[i * 4 + j] = s < p.N ? p.off1 + (s * p.OC + g * OCg) * L : ~0u;
        col_pos[i * 4 + j] = ivec3(m) + ph_c;
        advance(s, m, ph_count);
      }
    } else {
      uint c = n / KK;
      uvec3 t = unflatten(n % KK, U3(ksz));
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        col_base[i * 4 + j] = c < Cg ? c * AREA : ~0u;
        col_pos[i * 4 + j] = ivec3(t * U3(dil)) - ivec3(U3(pad));
        advance(c, t, U3(ksz));
      }
    }
  }
}

FVEC4 gemm_a_run(uint i, uint m, uint k) {
  FVEC4 v = FVEC4(0.0);
  if (k >= k_end) return v;
  if (MODE == CONV_FORWARD) {  // w [OC/G, C/G*K]
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (m + r < OCg) v[r] = LOAD_F(t2, DT, p.off2 + (g * OCg + m + r) * Cg * KK + k);
  } else if (MODE == CONV_BACKWARD_INPUT) {  // w^T: row c, column (oc, tap j of the phase)
    const uvec3 t = ph_t0 + unflatten(k % PH_KT, ph_taps) * ph_tstep;
    uint at = p.off2 + ((g * OCg + k / PH_KT) * Cg + m) * KK + flatten(t, U3(ksz));
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (m + r < Cg) v[r] = LOAD_F(t2, DT, at + r * KK);
  } else {  // gy: row oc, column (sample, position)
    uint s = k / L;
    uint at = p.off2 + (s * p.OC + g * OCg + m) * L + k % L;
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (m + r < OCg) v[r] = LOAD_F(t2, DT, at + r * L);
  }
  return v;
}

FVEC4 gemm_b_run(uint i, uint k, uint n) {
  FVEC4 v = FVEC4(0.0);
  if (k >= k_end) return v;
  if (MODE == CONV_FORWARD) {  // cols(x): row (c, tap), column (sample, output position)
    const uint c_off = (k / KK) * AREA;
    const ivec3 t = ivec3(unflatten(k % KK, U3(ksz)) * U3(dil));
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      const uint base = col_base[i * 4 + j];
      const ivec3 at = col_pos[i * 4 + j] + t;
      if (base != ~0u && inside(at))
        v[j] = LOAD_F(t1, DT, base + c_off + flatten(uvec3(at), U3(isz)));
    }
  } else if (MODE == CONV_BACKWARD_INPUT) {  // rows(gy): row (oc, tap j), column (sample, m)
    const uint oc_off = (k / PH_KT) * L;
    const ivec3 jo = ivec3(unflatten(k % PH_KT, ph_taps) * ph_dg);
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      const uint base = col_base[i * 4 + j];
      const ivec3 o = col_pos[i * 4 + j] - jo;
      if (base != ~0u && all(greaterThanEqual(o, ivec3(0))) && all(lessThan(o, ivec3(U3(osz)))))
        v[j] = LOAD_F(t1, DT, base + oc_off + flatten(uvec3(o), U3(osz)));
    }
  } else {  // cols(x)^T: row (sample, output position), column (c, tap)
    const uint xs = x_index(k / L, 0, 0);
    const ivec3 q = ivec3(unflatten(k % L, U3(osz)) * U3(stride));
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      const uint base = col_base[i * 4 + j];
      const ivec3 at = q + col_pos[i * 4 + j];
      if (base != ~0u && inside(at)) v[j] = LOAD_F(t1, DT, xs + base + flatten(uvec3(at), U3(isz)));
    }
  }
  return v;
}

// ---- the reductions' shared sums: the shared A slices, as scalars ----

FTYPE workgroup_sum(FTYPE v) {
  const uint n = gl_WorkGroupSize.x, i = gl_LocalInvocationIndex;  // a power of two
  sA[i].x = v;
  barrier();
  for (uint h = n / 2; h > 0; h /= 2) {
    if (i < h) sA[i].x += sA[i + h].x;
    barrier();
  }
  return sA[0].x;
}

// One element per thread over a 2-D grid of workgroups (the host spreads large counts on y).
uint thread_element() {
  return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
         gl_LocalInvocationIndex;
}
uint workgroup_element() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

void gemm_modes() {
  const uint m0 = (gl_WorkGroupID.y + p.m_tile0) * BM, n0 = (gl_WorkGroupID.x + p.n_tile0) * BN;
  const uint piece = gl_WorkGroupID.z / p.G;
  uint M, N, k0 = 0;
  if (MODE == CONV_FORWARD) {
    M = OCg, N = p.N * L, k_end = Cg * KK;
  } else if (MODE == CONV_BACKWARD_INPUT) {
    phase_setup(piece);
    if (PH_AREA == 0) return;  // the whole workgroup: a phase with no input position
    M = Cg, N = p.N * PH_AREA, k_end = OCg * PH_KT;
  } else {
    M = OCg, N = Cg * KK, k0 = piece * p.jlen, k_end = max(k0, min(k0 + p.jlen, p.N * L));
  }
  if (MODE != CONV_BACKWARD_WEIGHT && p.jlen != 0u) {  // a range of the terms
    k0 = min(p.k_begin, k_end);
    k_end = min(k_end, k0 + p.jlen);
  }
  gemm_tile(m0, n0, k0, k_end - k0);

  [[unroll]] for (uint r = 0; r < TM; ++r) {
    const uint m = gemm_row(m0, r);
    if (m >= M) continue;
    [[unroll]] for (uint h = 0; h < TN / 4; ++h) {
      const uint n = gemm_col(n0, h);
      FVEC4 v = gemm_acc[r * (TN / 4) + h];
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        const uint col = n + j;
        if (col >= N) continue;
        if (MODE == CONV_FORWARD) {
          uint oc = g * OCg + m;
          FTYPE y = v[j];
          const uint at = ((col / L) * p.OC + oc) * L + col % L;
          if (HAS_BIAS) y += LOAD_F(t3, DT, p.off3 + oc);
          if (ACCUMULATE) y += LOAD_F(t3, DT, p.off3 + at);
          STORE_F(o, DT, p.off0 + at, y)
        } else if (MODE == CONV_BACKWARD_INPUT) {
          const uvec3 in_pos = ph_first + unflatten(col % PH_AREA, ph_count) * U3(stride);
          const uint at = ((col / PH_AREA) * p.C + g * Cg + m) * AREA + flatten(in_pos, U3(isz));
          FTYPE gx = v[j];
          if (ACCUMULATE) gx += LOAD_F(t3, DT, p.off3 + at);
          STORE_F(o, DT, p.off0 + at, gx)
        } else {
          store_sum((g * OCg + m) * Cg * KK + col, p.OC * Cg * KK, v[j]);
        }
      }
    }
  }
}

void main() {
  Cg = p.C / p.G;
  OCg = p.OC / p.G;
  KK = p.ksz[0] * p.ksz[1] * p.ksz[2];
  L = p.osz[0] * p.osz[1] * p.osz[2];
  AREA = p.isz[0] * p.isz[1] * p.isz[2];
  g = gl_WorkGroupID.z % p.G;

  if (MODE <= CONV_BACKWARD_WEIGHT) {
    gemm_modes();
  } else if (MODE == CONV_SUM_PARTS) {  // gw = the sum of the parts, in part order
    const uint e = thread_element(), count = p.jlen;
    if (e >= count) return;
    FTYPE sum = 0.0;
    for (uint q = 0; q < p.part0; ++q) sum += LOAD_F(t1, DT_PART, p.off1 + q * count + e);
    if (ACCUMULATE) sum += LOAD_F(t3, DT, p.off3 + e);
    STORE_F(o, DT, p.off0 + e, sum)
  } else if (MODE == CONV_BIAS_GRAD) {  // gb[oc] = the sum of gy over samples and positions
    const uint oc = workgroup_element();
    if (oc >= p.OC) return;  // the whole workgroup
    FTYPE sum = 0.0;
    for (uint s = 0; s < p.N; ++s)
      for (uint l = gl_LocalInvocationIndex; l < L; l += gl_WorkGroupSize.x)
        sum += LOAD_F(t1, DT, p.off1 + (s * p.OC + oc) * L + l);
    sum = workgroup_sum(sum);
    if (gl_LocalInvocationIndex == 0) store_sum(oc, p.OC, sum);
  } else if (MODE == CONV_DIRECT_FORWARD) {  // y[s, oc, q]: group oc / OCg's channels' taps
    const uint e = thread_element();
    if (e >= p.N * p.OC * L) return;
    const uint q = e % L, oc = (e / L) % p.OC, s = e / (L * p.OC);
    g = oc / OCg;
    const uvec3 qo = unflatten(q, U3(osz));
    FTYPE y = HAS_BIAS ? LOAD_F(t3, DT, p.off3 + oc) : FTYPE(0.0);
    for (uint k = 0; k < KK; ++k) {
      int at = window_at(qo, unflatten(k, U3(ksz)));
      if (at < 0) continue;
      for (uint c = 0; c < Cg; ++c)
        y += LOAD_F(t1, DT, x_index(s, c, uint(at))) *
             LOAD_F(t2, DT, p.off2 + (oc * Cg + c) * KK + k);
    }
    STORE_F(o, DT, p.off0 + e, y)
  } else if (MODE == CONV_DIRECT_BACKWARD_INPUT) {  // gx[s, c, i]: group c / Cg's outputs' taps
    const uint e = thread_element();
    if (e >= p.N * p.C * AREA) return;
    const uint i = e % AREA, ca = (e / AREA) % p.C, s = e / (AREA * p.C);
    g = ca / Cg;
    const uint c = ca % Cg;
    // Only the taps of i's stride phase land on it (phase_setup).
    const uvec3 qi = unflatten(i, U3(isz)), st = U3(stride);
    phase_setup(flatten((qi + U3(pad)) % st, st));
    const ivec3 q0 = ph_c + ivec3((qi - ph_first) / st);  // the output position tap 0 reads
    FTYPE gx = 0.0;
    for (uint jt = 0; jt < PH_KT; ++jt) {
      const uvec3 j = unflatten(jt, ph_taps);
      const ivec3 q = q0 - ivec3(j * ph_dg);
      if (any(lessThan(q, ivec3(0))) || any(greaterThanEqual(q, ivec3(U3(osz))))) continue;
      const uint at = flatten(uvec3(q), U3(osz)), k = flatten(ph_t0 + j * ph_tstep, U3(ksz));
      for (uint oc = g * OCg; oc < (g + 1) * OCg; ++oc)
        gx += LOAD_F(t1, DT, p.off1 + (s * p.OC + oc) * L + at) *
              LOAD_F(t2, DT, p.off2 + (oc * Cg + c) * KK + k);
    }
    STORE_F(o, DT, p.off0 + e, gx)
  } else {  // CONV_DIRECT_BACKWARD_WEIGHT: gw[oc, c, tap] = the sum over (s, q) of gy x
    const uint e = workgroup_element(), oc = e / (Cg * KK), c = e / KK % Cg;
    if (e >= p.OC * Cg * KK) return;  // the whole workgroup
    g = oc / OCg;
    const uvec3 t = unflatten(e % KK, U3(ksz));
    FTYPE sum = 0.0;
    for (uint s = 0; s < p.N; ++s)
      for (uint q = gl_LocalInvocationIndex; q < L; q += gl_WorkGroupSize.x) {
        int at = window_at(unflatten(q, U3(osz)), t);
        if (at >= 0)
          sum += LOAD_F(t2, DT, p.off2 + (s * p.OC + oc) * L + q) *
                 LOAD_F(t1, DT, x_index(s, c, uint(at)));
      }
    sum = workgroup_sum(sum);
    if (gl_LocalInvocationIndex == 0) store_sum(e, p.OC * Cg * KK, sum);
  }
}
