// shaders/layer_norm.comp — layer_norm over the rows of x [rows, N]
// (docs/kernel-contract.md): y = (x - mean) * rstd * weight + bias, and each
// row's mean and rstd = 1 / sqrt(biased variance + eps) as f32.
//
// LANES threads share a row (WG / LANES rows per workgroup). Each thread runs
// Welford's update over its strided share of the row and the threads' (count,
// mean, M2) triples meet with Chan's formula (in a subgroup butterfly, then a
// shared-memory tree: Note [Subgroup row reductions] in subgroup.glsl): stable
// like the CPU's two passes, but reading the row once for the statistics and
// once more for the output. Float Welford loses accuracy when |mean| >> std
// (its running means carry errors of ulp(mean)), so it runs on x - K, K the
// row's first element, and the mean comes from a compensated sum of x - K:
// mean = K + sum / N is then within about an ulp of the CPU's double mean.
// Host side: runtime/vulkan/vk_kernels_nn.cpp. The f64 module (Note [f64 on Vulkan] in
// runtime/vulkan/vk_pipelines.cpp) computes in FTYPE = double and writes f64 statistics, as
// the CPU does.
// ferry-f64-ops: layer_norm
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/layer_norm.h"  // spec and push constants, codes: shared with the host
#include "subgroup.glsl"

FERRY_TENSOR(0, y)
FERRY_TENSOR(1, mo)  // mean, f32 (f64 in the f64 module)
FERRY_TENSOR(2, ro)  // rstd, likewise
FERRY_TENSOR(3, x)
FERRY_TENSOR(4, w)   // when absent the host binds y here (never read)
FERRY_TENSOR(5, b)

struct Stats {
  FTYPE count, mean, m2;  // m2: sum of squared deviations from mean
  FTYPE hi, lo;           // the sum of the values is hi + lo
};

void merge(inout Stats a, Stats b) {
  if (b.count == 0.0) return;
  if (a.count == 0.0) {
    a = b;
    return;
  }
  add_exact(a.hi, a.lo, b.hi);
  a.lo += b.lo;
  FTYPE n = a.count + b.count;
  FTYPE d = b.mean - a.mean;
  a.mean += d * (b.count / n);
  a.m2 += b.m2 + d * d * (a.count * (b.count / n));
  a.count = n;
}

shared FTYPE s_count[256];
shared FTYPE s_mean[256];
shared FTYPE s_m2[256];
shared FTYPE s_hi[256];
shared FTYPE s_lo[256];
#ifdef FERRY_F64
#define STATS_OUT(N) N##_f64
#define EPS packDouble2x32(uvec2(p.eps_bits[0], p.eps_bits[1]))
#else
#define STATS_OUT(N) N##_f32
#define EPS p.eps
#endif

void put(uint i, Stats st) {
  s_count[i] = st.count;
  s_mean[i] = st.mean;
  s_m2[i] = st.m2;
  s_hi[i] = st.hi;
  s_lo[i] = st.lo;
}
Stats get(uint i) { return Stats(s_count[i], s_mean[i], s_m2[i], s_hi[i], s_lo[i]); }

void main() {
  const uint ROWS = gl_WorkGroupSize.x / LANES;
  const uint t = row_thread();
  const uint lane = t % LANES;
  const uint row = t / LANES;
  const uint head = row * LANES;
  const uint n_blocks = (p.rows + ROWS - 1u) / ROWS;
  for (uint blk = gl_WorkGroupID.x; blk < n_blocks; blk += gl_NumWorkGroups.x) {
    const uint ri = blk * ROWS + row;
    const bool valid = ri < p.rows;
    const uint xo = p.x_off + ri * p.xs0;

    Stats st = Stats(FTYPE(0.0), FTYPE(0.0), FTYPE(0.0), FTYPE(0.0), FTYPE(0.0));
    FTYPE shift = 0.0;
    if (valid && p.n > 0u) {
      shift = LOAD_F(x, DT, xo);
      if (isinf(shift) || isnan(shift)) shift = 0.0;  // an inf or NaN poisons the row anyway
    }
    if (valid) {
      for (uint k = lane; k < p.n; k += LANES) {
        FTYPE v = LOAD_F(x, DT, xo + k * p.xs1) - shift;
        st.count += 1.0;
        FTYPE d = v - st.mean;
        st.mean += d / st.count;
        st.m2 += d * (v - st.mean);
        add_exact(st.hi, st.lo, v);
      }
    }
    const uint in_subgroup = row_subgroup_lanes(LANES);
    for (uint h = 1u; h < in_subgroup; h <<= 1u)
      merge(st, Stats(ROW_SHUFFLE(st.count, h), ROW_SHUFFLE(st.mean, h), ROW_SHUFFLE(st.m2, h),
                      ROW_SHUFFLE(st.hi, h), ROW_SHUFFLE(st.lo, h)));
    if (in_subgroup == LANES && LANES > 1u) {  // one subgroup: lane 0's triple for all
      st = Stats(ROW_SHUFFLE_BACK(st.count, lane), ROW_SHUFFLE_BACK(st.mean, lane),
                 ROW_SHUFFLE_BACK(st.m2, lane), ROW_SHUFFLE_BACK(st.hi, lane),
                 ROW_SHUFFLE_BACK(st.lo, lane));
    } else if (in_subgroup < LANES) {
      put(head + lane, st);
      for (uint h = LANES / 2u; h >= in_subgroup; h >>= 1u) {
        memoryBarrierShared();
        barrier();
        if (lane < h) {
          merge(st, get(head + lane + h));
          put(head + lane, st);
        }
      }
      memoryBarrierShared();
      barrier();
      st = get(head);  // every lane takes the row's result
    }

    if (valid) {
      // N = 0: the mean of nothing is NaN, as on the CPU. An infinite or NaN
      // value makes lo NaN; hi is then the sum.
      const FTYPE sum = isinf(st.hi) || isnan(st.hi) ? st.hi : st.hi + st.lo;
      const FTYPE mean = p.n == 0u ? F_NAN : shift + sum / FTYPE(p.n);
      const FTYPE rstd = 1.0 / safe_sqrt(st.m2 / FTYPE(p.n) + EPS);
      if (lane == 0u) {
        STATS_OUT(mo)[p.m_off + ri * p.ms] = mean;
        STATS_OUT(ro)[p.r_off + ri * p.rs] = rstd;
      }
      const uint yo = p.y_off + ri * p.ys0;
      for (uint k = lane; k < p.n; k += LANES) {
        FTYPE v = (LOAD_F(x, DT, xo + k * p.xs1) - mean) * rstd;
        if (HAS_W) v *= LOAD_F(w, DT, p.w_off + k * p.ws);
        if (HAS_B) v += LOAD_F(b, DT, p.b_off + k * p.bs);
        STORE_F(y, DT, yo + k * p.ys1, v)
      }
    }
    if (in_subgroup < LANES) {
      memoryBarrierShared();
      barrier();  // the next block reuses the slots
    }
  }
}
