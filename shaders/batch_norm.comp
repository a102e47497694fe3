// shaders/batch_norm.comp — batch_norm and batch_norm_backward over a contiguous x [N, C, *]
// (docs/kernel-contract.md), three dispatches a pass (MODE; Note [Vulkan batch_norm] in
// runtime/vulkan/vk_kernels_batch_norm.cpp):
//  SUMS: a workgroup per channel and chunk of samples sums two terms over its share: the
//    forward's d = x - x0 and d^2 (x0 the chunk's first value of the channel, a shift that keeps
//    the variance's digits when the mean is large, as the CPU's), the backward's g and
//    g (x - mean). Each thread keeps its rounding errors (TwoSum), the threads meet in a
//    shared-memory tree, and the chunk's shift, element count and four sums (each sum's value
//    and error) go to the scratch: slot k of channel c in chunk j at (j · SLOTS + k) · C + c.
//  FINISH: a thread per channel merges the chunks in order, moving each one's sums to the
//    first one's shift, and writes the batch mean and biased variance (forward, training) or
//    dbias = sum g and dweight = rstd · sum g (x - mean) (backward), then the coefficients of
//    APPLY at k · C + c: y = x · scale + shift, or dx = a (g - gmean - (x - mean) k), gmean and
//    k 0 in eval (the CPU's formulas, Note [Fused CNN layers on the CPU]).
//  APPLY: a thread per element, over plane_grid's grid (runtime/vulkan/vk_kernels.hpp).
// Bindings: 0 the output (SUMS: the sums; FINISH: the coefficients; APPLY: y or dx); 1 and 2
// FINISH's [C] outputs (mean and var, or dbias and dweight), else binding 0's tensor again
// (the shader has stores to them, which synchronization validation counts whatever MODE rules
// out); 3 x or g (FINISH: the sums); 4 the backward's x (FINISH: the weight); 5 the backward's
// mean in SUMS, the coefficients in APPLY, the bias in FINISH; 6 and 7 FINISH's mean and
// variance (the running ones in eval; the forward's in backward). Unused read slots hold
// binding 3's tensor. Statistics, sums and coefficients are FTYPE: f32, or f64 in the f64
// module (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp), which computes in double.
// ferry-f64-ops: batch_norm batch_norm_backward
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/batch_norm.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, o)
FERRY_TENSOR(1, oa)
FERRY_TENSOR(2, ob)
FERRY_TENSOR(3, a)
FERRY_TENSOR(4, b)
FERRY_TENSOR(5, s)
FERRY_TENSOR(6, mi)
FERRY_TENSOR(7, vi)

#ifdef FERRY_F64
#define F(N) N##_f64  // an FTYPE vector or scratch
#define WORDS 2u      // 32-bit words of an FTYPE
#define EPS packDouble2x32(uvec2(p.eps_bits[0], p.eps_bits[1]))
#else
#define F(N) N##_f32
#define WORDS 1u
#define EPS p.eps
#endif

shared FTYPE s_s[256];
shared FTYPE s_se[256];
shared FTYPE s_q[256];
shared FTYPE s_qe[256];

// SUMS: channel c of the part, samples [n0, n1).
void sums(uint c, uint n0, uint n1, uint slot0) {
  const uint t = gl_LocalInvocationID.x;
  // Between a channel's runs in consecutive samples: a part holds whole samples (part_c = C),
  // or one sample's channels (no second sample).
  const uint stride = p.part_c * p.area;
  const uint base = n0 * stride + c * p.area;
  const uint count = (n1 - n0) * p.area;
  FTYPE shift = 0.0, mean = 0.0;
  if (!BACKWARD) {
    shift = LOAD_F(a, DT, p.off[3] + base);
    if (isinf(shift) || isnan(shift)) shift = 0.0;  // an inf or NaN poisons the channel anyway
  } else {
    mean = F(s)[p.off[5] + p.c0 + c];
  }
  FTYPE sv = 0.0, se = 0.0, qv = 0.0, qe = 0.0;
  // A sample's run at a time where it has a value for every thread (no division per value:
  // lavapipe's SIMD lanes divide one at a time), else the chunk's values as one range.
  const bool runs = p.area >= gl_WorkGroupSize.x;
  const uint outer = runs ? n1 - n0 : 1u, inner = runs ? p.area : count;
  for (uint n = 0u; n < outer; ++n)
    for (uint e = t; e < inner; e += gl_WorkGroupSize.x) {
      const uint k = runs ? 0u : e / p.area;  // the sample, counted from n0
      const uint i = base + (n + k) * stride + (e - k * p.area);
      FTYPE u, v;
      if (BACKWARD) {
        u = LOAD_F(a, DT, p.off[3] + i);
        v = u * (LOAD_F(b, DT, p.off[4] + i) - mean);
      } else {
        u = LOAD_F(a, DT, p.off[3] + i) - shift;
        v = u * u;
      }
      add_exact(sv, se, u);
      add_exact(qv, qe, v);
    }
  s_s[t] = sv;
  s_se[t] = se;
  s_q[t] = qv;
  s_qe[t] = qe;
  for (uint h = gl_WorkGroupSize.x / 2u; h > 0u; h >>= 1u) {
    memoryBarrierShared();
    barrier();
    if (t < h) {
      add_exact(sv, se, s_s[t + h]);
      se += s_se[t + h];
      add_exact(qv, qe, s_q[t + h]);
      qe += s_qe[t + h];
      s_s[t] = sv;
      s_se[t] = se;
      s_q[t] = qv;
      s_qe[t] = qe;
    }
  }
  if (t == 0u) {
    const uint at = p.off[0] + slot0 + p.c0 + c;
    F(o)[at] = shift;
    o_u32[(at + p.channels) * WORDS] = count;  // slot 1, as a 32-bit word
    F(o)[at + 2u * p.channels] = sv;
    F(o)[at + 3u * p.channels] = se;
    F(o)[at + 4u * p.channels] = qv;
    F(o)[at + 5u * p.channels] = qe;
  }
  memoryBarrierShared();
  barrier();  // the next chunk reuses the slots
}

// FINISH: channel c (of the whole tensor).
void finish(uint c) {
  const uint C = p.channels;
  FTYPE sum = 0.0, sq = 0.0, total = 0.0;
  if (TRAINING || BACKWARD) {
    FTYPE hi = 0.0, lo = 0.0, qhi = 0.0, qlo = 0.0;
    const FTYPE x0 = F(a)[p.off[3] + c];  // chunk 0's shift (0 in the backward)
    for (uint j = 0u; j < p.chunks; ++j) {
      const uint at = p.off[3] + j * BATCH_NORM_SLOTS * C + c;
      const FTYPE n = FTYPE(a_u32[(at + C) * WORDS]);
      // Moved to x0: sum (d + delta) = s1 + n delta, sum (d + delta)^2 = s2 + 2 delta s1 +
      // n delta^2 (delta is 0 for the first chunk and in the backward).
      const FTYPE delta = F(a)[at] - x0;
      add_exact(hi, lo, F(a)[at + 2u * C]);
      lo += F(a)[at + 3u * C];
      add_exact(qhi, qlo, F(a)[at + 4u * C]);
      qlo += F(a)[at + 5u * C];
      if (delta != 0.0) {
        add_exact(qhi, qlo, 2.0 * delta * (F(a)[at + 2u * C] + F(a)[at + 3u * C]) +
                                n * delta * delta);
        add_exact(hi, lo, n * delta);
      }
      total += n;
    }
    // An infinite or NaN term makes the error NaN; the value is then the sum.
    sum = isinf(hi) || isnan(hi) ? hi : hi + lo;
    sq = isinf(qhi) || isnan(qhi) ? qhi : qhi + qlo;
  }
  FTYPE mean, var;
  if (TRAINING && !BACKWARD) {
    const FTYPE m = sum / total;
    mean = F(a)[p.off[3] + c] + m;
    var = max(sq / total - m * m, FTYPE(0.0));
    F(oa)[p.off[1] + c] = mean;
    F(ob)[p.off[2] + c] = var;
  } else {
    mean = F(mi)[p.off[6] + c];
    var = F(vi)[p.off[7] + c];
  }
  const FTYPE rstd = 1.0 / safe_sqrt(var + EPS);
  const FTYPE w = HAS_W ? LOAD_F(b, DT, p.off[4] + c) : FTYPE(1.0);
  if (!BACKWARD) {
    const FTYPE bias = HAS_B ? LOAD_F(s, DT, p.off[5] + c) : FTYPE(0.0);
    F(o)[p.off[0] + c] = w * rstd;                    // scale
    F(o)[p.off[0] + C + c] = bias - mean * w * rstd;  // shift
  } else {
    F(oa)[p.off[1] + c] = sum;       // dbias
    F(ob)[p.off[2] + c] = sq * rstd;  // dweight
    F(o)[p.off[0] + c] = mean;
    F(o)[p.off[0] + C + c] = rstd * w;                                          // a
    F(o)[p.off[0] + 2u * C + c] = TRAINING ? sum / total : FTYPE(0.0);          // gmean
    F(o)[p.off[0] + 3u * C + c] = TRAINING ? rstd * rstd * sq / total : FTYPE(0.0);  // k
  }
}

// APPLY: channel c's coefficients, then its element e of the part.
struct Coefficients {
  FTYPE scale, shift;       // forward
  FTYPE mean, a, gmean, k;  // backward
};

Coefficients coefficients(uint c) {
  const uint C = p.channels, at = p.off[5] + c;
  Coefficients k;
  if (!BACKWARD) {
    k.scale = F(s)[at];
    k.shift = F(s)[at + C];
  } else {
    k.mean = F(s)[at];
    k.a = F(s)[at + C];
    k.gmean = F(s)[at + 2u * C];
    k.k = F(s)[at + 3u * C];
  }
  return k;
}

void apply(uint e, Coefficients k) {
  FTYPE v;
  if (!BACKWARD) {
    v = LOAD_F(a, DT, p.off[3] + e) * k.scale + k.shift;
  } else {
    const FTYPE g = LOAD_F(a, DT, p.off[3] + e), x = LOAD_F(b, DT, p.off[4] + e);
    v = k.a * (g - k.gmean - (x - k.mean) * k.k);
  }
  STORE_F(o, DT, p.off[0] + e, v)
}

void main() {
  if (MODE == BATCH_NORM_MODE_SUMS) {
    // Workgroup (x, y): channel x of the part, chunk y of its samples.
    const uint chunks = (p.samples + p.chunk - 1u) / p.chunk;
    for (uint j = gl_WorkGroupID.y; j < chunks; j += gl_NumWorkGroups.y)
      for (uint c = gl_WorkGroupID.x; c < p.part_c; c += gl_NumWorkGroups.x) {
        const uint n0 = j * p.chunk;
        sums(c, n0, min(n0 + p.chunk, p.samples), (p.chunk0 + j) * BATCH_NORM_SLOTS * p.channels);
      }
  } else if (MODE == BATCH_NORM_MODE_FINISH) {
    const uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint c = gl_GlobalInvocationID.x; c < p.channels; c += threads) finish(c);
  } else if (p.area >= gl_WorkGroupSize.x) {
    // Workgroup (x, y): a piece of plane y (a sample's channel), its channel found once.
    const uint planes = p.samples * p.part_c, step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint q = gl_WorkGroupID.y; q < planes; q += gl_NumWorkGroups.y) {
      const Coefficients k = coefficients(p.c0 + q % p.part_c);
      for (uint i = gl_GlobalInvocationID.x; i < p.area; i += step) apply(q * p.area + i, k);
    }
  } else {  // planes smaller than a workgroup: the part as one range
    const uint n = p.samples * p.part_c * p.area;
    const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint e = gl_GlobalInvocationID.x; e < n; e += step)
      apply(e, coefficients(p.c0 + (e / p.area) % p.part_c));
  }
}
