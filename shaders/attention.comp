// shaders/attention.comp — scaled_dot_product_attention, forward and backward, fused: the
// L×S scores are never stored. Host side: runtime/vulkan/vk_kernels_attention.cpp; the form
// of the call (contiguous q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, EV], an additive mask
// [Bm, Hm, L, S], the f32 logsumexp per query row): Note [Scaled dot-product attention] in
// runtime/nn/attention.cpp.
//
// Note [Fused attention on Vulkan]
// FlashAttention-2's scheme with one thread per row of the result and shared-memory tiles of
// the other side, in f32 whatever the dtype (f64 in the f64 module):
// - FORWARD: a thread is a query row i of one head (the workgroup, WG consecutive rows). The
//   keys come BC at a time: the workgroup loads the tile of k into shared memory, each thread
//   forms its BC scores, then the tile of v. Per row the thread keeps the running maximum m,
//   the running sum l of exp(s - m) and the unnormalised output o; a tile with a larger
//   maximum rescales l and o by exp(m_old - m_new). It writes o / l and logsumexp m + log l.
// - A thread holds EC elements of its head dim for q·k and EVC of v's: longer heads are walked
//   in chunks of EC for the scores, and the output in passes of EVC columns (each pass walks
//   the keys again), so every head dim runs, within the device's registers for the usual ones
//   (EC = EVC = 64 hold heads up to 64 in one pass).
// - is_causal skips the tiles past the workgroup's last row, and keys j > i in a tile; a row
//   with every key masked (l = 0) gets 0 and logsumexp +inf.
// - backward: STATS writes each row's pair (logsumexp, D = rowsum(dO o O)) to a scratch
//   buffer; DQ, a thread per query row as the forward, recomputes P = exp(s - lse) tile by tile
//   with dP = dO vᵀ and dS = P (dP - D), and adds dq += scale dS k; DKV, a thread per key row j
//   of a key/value head, walks the query tiles of every query head of its group and adds
//   dv += Pᵀ dO and dk += scale dSᵀ q. Each gradient element has one writer: no atomics.
//   Where the device's loop budget asks (Note [Loop budget] in runtime/vulkan/vk_kernels.hpp),
//   DQ walks the keys and DKV the query rows in ranges, a dispatch each, the later ones
//   adding to what the earlier wrote (range_begin, range_end, accumulate).
//
// Note [Split-key attention on Vulkan]
// A decoding step asks for one query row per head (a few with a short prompt or speculation),
// where FORWARD's thread per row leaves all but one thread of each workgroup idle, and the
// grid (a workgroup per head) smaller than a GPU's compute units; FlashDecoding's answer is to
// spread each row's keys over threads and workgroups:
// - SPLIT: a workgroup per (query row, split of split_len keys); thread t takes the split's
//   keys t, t + WG, ..., keeping for them the online softmax's m, l and o (EVC columns of v
//   a pass, as FORWARD), with no barrier in the loop. The workgroup then merges its threads'
//   triples through the shared tiles: M = max m_t, l = sum l_t e^(m_t - M), o = sum o_t
//   e^(m_t - M), a column a thread (so WG >= EVC). With one split it writes o / l and the
//   logsumexp as FORWARD does; with more, the split's (M, l, o) to the partials (slot 6 in
//   the statistics' type, row-major [rows, splits, EV + 2]).
// - COMBINE: a thread per element of the output merges a row's splits the same way, reading
//   the partials at slot 4, and writes o / l (slot 6) and, at column 0, the logsumexp (slot 7).
// The host picks it (vk_kernels_attention.cpp) for calls of at most a few query rows per head.
//
// Bindings: 0-3 q, k, v and the mask, 4 the row statistics (f32), 5 dO, all only read; 6 and
// 7 (a_off, b_off) the only ones written: the forward's o and logsumexp, STATS' statistics (it
// reads o and the logsumexp through slots 1 and 2), DQ's dq, DKV's dk and dv. The validation
// layer takes a binding the module writes anywhere as written by every dispatch of it, so no
// binding is read in one mode and written in another; a slot a mode leaves unused is bound to
// an input (0-5) or to a scratch word (6, 7).
// The f64 module (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp) computes in
// FTYPE = double, its statistics and logsumexp doubles too.
// ferry-f64-ops: scaled_dot_product_attention scaled_dot_product_attention_backward
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#ifdef FERRY_F64
#include "transcendentals_f64.glsl"
#endif
#include "abi/attention.h"  // spec and push constants, codes: shared with the host

#ifdef FERRY_F64
#define STAT(N) N##_f64
#define SCALE packDouble2x32(uvec2(p.scale_bits[0], p.scale_bits[1]))
#else
#define STAT(N) N##_f32
#define SCALE p.scale
#endif

FERRY_TENSOR(0, q)
FERRY_TENSOR(1, k)
FERRY_TENSOR(2, v)
FERRY_TENSOR(3, mask)
FERRY_TENSOR(4, st)
FERRY_TENSOR(5, dout)
FERRY_TENSOR(6, a)
FERRY_TENSOR(7, b)

shared FTYPE tile_e[BC * EC];   // k (FORWARD, DQ) or q (DKV) rows, EC columns
shared FTYPE tile_v[BC * EVC];  // v (FORWARD, DQ) or dO (DKV) rows, EVC columns

// The score of query row i and key j, scaled and masked: -inf where the key is left out.
FTYPE masked(FTYPE dot, uint i, uint j, uint mrow) {
  if (j >= p.S || (CAUSAL && j > i)) return -F_INF;
  FTYPE x = dot * SCALE;
  if (MASK) x += FTYPE(LOAD_F(mask, DT, mrow + j));
  return x;
}

// exp(x - m) with exp(-inf - anything) = 0.
FTYPE exp_from(FTYPE x, FTYPE m) { return x == -F_INF ? 0.0 : safe_exp(x - m); }

// Loads rows [r0, r0 + BC) (below `rows`), columns [c0, c0 + W) (below `cols`) of the
// row-major [rows, cols] tensor T at `base` into TILE; zeros outside. Between barriers: every
// thread of the workgroup must reach it.
#define LOAD_TILE(TILE, W, T, base, r0, rows, c0, cols)                               \
  barrier();                                                                           \
  for (uint x_ = gl_LocalInvocationID.x; x_ < BC * W; x_ += gl_WorkGroupSize.x) {     \
    const uint r_ = (r0) + x_ / W, c_ = (c0) + x_ % W;                                 \
    TILE[x_] = r_ < (rows) && c_ < (cols) ? FTYPE(LOAD_F(T, DT, (base) + r_ * (cols) + c_)) \
                                          : 0.0;                                       \
  }                                                                                    \
  barrier();

// s[jj] += q_i · k_{j0 + jj} over the whole head dim, for the BC keys from j0 (the k tiles
// pass through tile_e); q_i's elements are read from q at qrow.
#define SCORES(s, qrow, kbase, j0)                                                 \
  for (uint jj = 0u; jj < BC; ++jj) s[jj] = 0.0;                                    \
  for (uint e0 = 0u; e0 < p.E; e0 += EC) {                                          \
    LOAD_TILE(tile_e, EC, k, kbase, j0, p.S, e0, p.E)                               \
    for (uint e = 0u; e < EC && e0 + e < p.E; ++e) {                                \
      const FTYPE qe = FTYPE(LOAD_F(q, DT, (qrow) + e0 + e));                       \
      for (uint jj = 0u; jj < BC; ++jj) s[jj] += qe * tile_e[jj * EC + e];          \
    }                                                                               \
  }

void forward_or_dq() {
  const uint R = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  const uint Hk = p.Hq / p.group;
  for (uint bh = gl_WorkGroupID.y; bh < p.B * p.Hq; bh += gl_NumWorkGroups.y) {
    const uint b = bh / p.Hq, h = bh % p.Hq;
    const uint kv = b * Hk + h / p.group;
    const uint kbase = p.k_off + kv * p.S * p.E, vbase = p.v_off + kv * p.S * p.EV;
    for (uint blk = gl_WorkGroupID.x; blk * R < p.L; blk += gl_NumWorkGroups.x) {
      const uint i = blk * R + t;
      const bool valid = i < p.L;
      const uint row = bh * p.L + min(i, p.L - 1u);
      const uint qrow = p.q_off + row * p.E;
      const uint mrow = p.m_off + b * p.mask_sb + h * p.mask_sh + min(i, p.L - 1u) * p.S;
      const uint kend = CAUSAL ? min(p.S, blk * R + R) : p.S;  // the same for the workgroup
      FTYPE s[BC];
      if (MODE == ATTN_MODE_FORWARD) {
        for (uint c0 = 0u; c0 < p.EV; c0 += EVC) {
          FTYPE m = -F_INF, l = 0.0;
          FTYPE o[EVC];
          for (uint c = 0u; c < EVC; ++c) o[c] = 0.0;
          for (uint j0 = 0u; j0 < kend; j0 += BC) {
            SCORES(s, qrow, kbase, j0)
            LOAD_TILE(tile_v, EVC, v, vbase, j0, p.S, c0, p.EV)
            FTYPE mt = -F_INF;
            for (uint jj = 0u; jj < BC; ++jj) {
              s[jj] = masked(s[jj], i, j0 + jj, mrow);
              mt = max(mt, s[jj]);
            }
            const FTYPE mn = max(m, mt);
            if (mn != -F_INF) {  // else every key so far is left out: nothing to add
              const FTYPE corr = exp_from(m, mn);
              l *= corr;
              for (uint c = 0u; c < EVC; ++c) o[c] *= corr;
              for (uint jj = 0u; jj < BC; ++jj) {
                const FTYPE pj = exp_from(s[jj], mn);
                l += pj;
                for (uint c = 0u; c < EVC; ++c) o[c] += pj * tile_v[jj * EVC + c];
              }
              m = mn;
            }
          }
          if (valid) {
            const uint orow = p.a_off + row * p.EV;
            for (uint c = 0u; c < EVC && c0 + c < p.EV; ++c)
              STORE_F(a, DT, orow + c0 + c, l == 0.0 ? 0.0 : o[c] / l)
            if (c0 == 0u) STAT(b)[p.b_off + row] = l == 0.0 ? F_INF : m + safe_log(l);
          }
        }
      } else {  // ATTN_MODE_DQ
        const FTYPE lse = STAT(st)[p.st_off + 2u * row], D = STAT(st)[p.st_off + 2u * row + 1u];
        const uint dorow = p.do_off + row * p.EV;
        for (uint g0 = 0u; g0 < p.E; g0 += EC) {
          FTYPE dq[EC];
          for (uint e = 0u; e < EC; ++e) dq[e] = 0.0;
          for (uint j0 = p.range_begin; j0 < min(kend, p.range_end); j0 += BC) {
            SCORES(s, qrow, kbase, j0)
            FTYPE dp[BC];
            for (uint jj = 0u; jj < BC; ++jj) dp[jj] = 0.0;
            for (uint c0 = 0u; c0 < p.EV; c0 += EVC) {
              LOAD_TILE(tile_v, EVC, v, vbase, j0, p.S, c0, p.EV)
              for (uint c = 0u; c < EVC && c0 + c < p.EV; ++c) {
                const FTYPE g = FTYPE(LOAD_F(dout, DT, dorow + c0 + c));
                for (uint jj = 0u; jj < BC; ++jj) dp[jj] += g * tile_v[jj * EVC + c];
              }
            }
            LOAD_TILE(tile_e, EC, k, kbase, j0, p.S, g0, p.E)
            for (uint jj = 0u; jj < BC; ++jj) {
              const FTYPE pj = exp_from(masked(s[jj], i, j0 + jj, mrow), lse);
              const FTYPE ds = pj * (dp[jj] - D);
              for (uint e = 0u; e < EC; ++e) dq[e] += ds * tile_e[jj * EC + e];
            }
          }
          if (valid) {
            const uint dqrow = p.a_off + row * p.E;
            for (uint e = 0u; e < EC && g0 + e < p.E; ++e) {
              const FTYPE before = p.accumulate != 0u ? FTYPE(LOAD_F(a, DT, dqrow + g0 + e)) : 0.0;
              STORE_F(a, DT, dqrow + g0 + e, before + dq[e] * SCALE)
            }
          }
        }
      }
    }
  }
}

// DKV: a thread per key row j of key/value head kv; the query tiles of the group's heads pass
// through shared memory (q's through tile_e, dO's through tile_v).
void dkv() {
  const uint R = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  const uint Hk = p.Hq / p.group;
  const uint passes = max((p.E + EC - 1u) / EC, (p.EV + EVC - 1u) / EVC);
  for (uint bk = gl_WorkGroupID.y; bk < p.B * Hk; bk += gl_NumWorkGroups.y) {
    const uint b = bk / Hk, kvh = bk % Hk;
    for (uint blk = gl_WorkGroupID.x; blk * R < p.S; blk += gl_NumWorkGroups.x) {
      const uint j = blk * R + t;
      const bool valid = j < p.S;
      const uint jr = bk * p.S + min(j, p.S - 1u);
      const uint krow = p.k_off + jr * p.E, vrow = p.v_off + jr * p.EV;
      // Causal: rows i < blk * R see none of this workgroup's keys.
      const uint istart = CAUSAL ? min(blk * R, p.L) : 0u;
      for (uint pass = 0u; pass < passes; ++pass) {
        const uint g0 = pass * EC, c0 = pass * EVC;
        FTYPE dk[EC], dv[EVC];
        for (uint e = 0u; e < EC; ++e) dk[e] = 0.0;
        for (uint c = 0u; c < EVC; ++c) dv[c] = 0.0;
        for (uint hh = 0u; hh < p.group; ++hh) {
          const uint h = kvh * p.group + hh, bh = b * p.Hq + h;
          const uint qbase = p.q_off + bh * p.L * p.E, dobase = p.do_off + bh * p.L * p.EV;
          const uint mbase = p.m_off + b * p.mask_sb + h * p.mask_sh;
          for (uint i0 = max(istart, p.range_begin); i0 < min(p.L, p.range_end); i0 += BC) {
            // The scores s[ii] = q_{i0+ii} · k_j and dP[ii] = dO_{i0+ii} · v_j.
            FTYPE s[BC], dp[BC];
            for (uint ii = 0u; ii < BC; ++ii) s[ii] = dp[ii] = 0.0;
            for (uint e0 = 0u; e0 < p.E; e0 += EC) {
              LOAD_TILE(tile_e, EC, q, qbase, i0, p.L, e0, p.E)
              for (uint e = 0u; e < EC && e0 + e < p.E; ++e) {
                const FTYPE ke = FTYPE(LOAD_F(k, DT, krow + e0 + e));
                for (uint ii = 0u; ii < BC; ++ii) s[ii] += ke * tile_e[ii * EC + e];
              }
            }
            for (uint d0 = 0u; d0 < p.EV; d0 += EVC) {
              LOAD_TILE(tile_v, EVC, dout, dobase, i0, p.L, d0, p.EV)
              for (uint c = 0u; c < EVC && d0 + c < p.EV; ++c) {
                const FTYPE vc = FTYPE(LOAD_F(v, DT, vrow + d0 + c));
                for (uint ii = 0u; ii < BC; ++ii) dp[ii] += vc * tile_v[ii * EVC + c];
              }
            }
            FTYPE pr[BC], ds[BC];
            for (uint ii = 0u; ii < BC; ++ii) {
              const uint i = i0 + ii;
              pr[ii] = ds[ii] = 0.0;
              if (i < p.L) {
                const uint r = bh * p.L + i;
                const FTYPE lse = STAT(st)[p.st_off + 2u * r], D = STAT(st)[p.st_off + 2u * r + 1u];
                pr[ii] = exp_from(masked(s[ii], i, j, mbase + i * p.S), lse);
                ds[ii] = pr[ii] * (dp[ii] - D);
              }
            }
            // This pass's columns of q and dO: the tiles again unless they are the last loaded.
            if (p.E > EC) {
              LOAD_TILE(tile_e, EC, q, qbase, i0, p.L, g0, p.E)
            }
            if (p.EV > EVC) {
              LOAD_TILE(tile_v, EVC, dout, dobase, i0, p.L, c0, p.EV)
            }
            for (uint ii = 0u; ii < BC; ++ii) {
              for (uint e = 0u; e < EC; ++e) dk[e] += ds[ii] * tile_e[ii * EC + e];
              for (uint c = 0u; c < EVC; ++c) dv[c] += pr[ii] * tile_v[ii * EVC + c];
            }
          }
        }
        if (valid) {
          const bool add = p.accumulate != 0u;
          for (uint e = 0u; e < EC && g0 + e < p.E; ++e) {
            const uint at = p.a_off + jr * p.E + g0 + e;
            STORE_F(a, DT, at, (add ? FTYPE(LOAD_F(a, DT, at)) : 0.0) + dk[e] * SCALE)
          }
          for (uint c = 0u; c < EVC && c0 + c < p.EV; ++c) {
            const uint at = p.b_off + jr * p.EV + c0 + c;
            STORE_F(b, DT, at, (add ? FTYPE(LOAD_F(b, DT, at)) : 0.0) + dv[c])
          }
        }
      }
    }
  }
}

// STATS: (lse, rowsum(dO o O)) per query row, a thread per row; o is bound at slot 1 (k's) and
// the logsumexp (f32) at slot 2 (v's), the pairs are written to slot 6.
void stats() {
  const uint rows = p.B * p.Hq * p.L;
  for (uint r = gl_GlobalInvocationID.x; r < rows; r += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    FTYPE D = 0.0;
    for (uint c = 0u; c < p.EV; ++c)
      D += FTYPE(LOAD_F(dout, DT, p.do_off + r * p.EV + c)) *
           FTYPE(LOAD_F(k, DT, p.k_off + r * p.EV + c));
    STAT(a)[p.a_off + 2u * r] = STAT(v)[p.v_off + r];
    STAT(a)[p.a_off + 2u * r + 1u] = D;
  }
}

// SPLIT (Note [Split-key attention on Vulkan]): a thread per key of each split.
void split_keys() {
  const uint R = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  const uint Hk = p.Hq / p.group, rows = p.B * p.Hq * p.L;
  for (uint row = gl_WorkGroupID.y; row < rows; row += gl_NumWorkGroups.y) {
    const uint bh = row / p.L, i = row % p.L, b = bh / p.Hq, h = bh % p.Hq;
    const uint kv = b * Hk + h / p.group;
    const uint kbase = p.k_off + kv * p.S * p.E, vbase = p.v_off + kv * p.S * p.EV;
    const uint qrow = p.q_off + row * p.E;
    const uint mrow = p.m_off + b * p.mask_sb + h * p.mask_sh + i * p.S;
    for (uint sp = gl_WorkGroupID.x; sp < p.splits; sp += gl_NumWorkGroups.x) {
      const uint jend = min(p.S, (sp + 1u) * p.split_len);
      for (uint c0 = 0u; c0 < p.EV; c0 += EVC) {
        FTYPE m = -F_INF, l = 0.0;
        FTYPE o[EVC];
        for (uint c = 0u; c < EVC; ++c) o[c] = 0.0;
        for (uint j = sp * p.split_len + t; j < jend; j += R) {
          FTYPE dot = 0.0;
          for (uint e = 0u; e < p.E; ++e)
            dot += FTYPE(LOAD_F(q, DT, qrow + e)) * FTYPE(LOAD_F(k, DT, kbase + j * p.E + e));
          const FTYPE s = masked(dot, i, j, mrow);
          if (s == -F_INF) continue;
          if (s > m) {
            const FTYPE corr = exp_from(m, s);
            l *= corr;
            for (uint c = 0u; c < EVC; ++c) o[c] *= corr;
            m = s;
          }
          const FTYPE pj = exp_from(s, m);
          l += pj;
          for (uint c = 0u; c < EVC && c0 + c < p.EV; ++c)
            o[c] += pj * FTYPE(LOAD_F(v, DT, vbase + j * p.EV + c0 + c));
        }
        // The workgroup's maximum M, its sum, then its columns, BC threads' at a time.
        barrier();
        tile_e[t] = m;
        barrier();
        FTYPE M = -F_INF;
        for (uint u = 0u; u < R; ++u) M = max(M, tile_e[u]);
        const FTYPE w = exp_from(m, M);  // 0 for a thread that saw no key
        barrier();
        tile_e[t] = l * w;
        barrier();
        FTYPE lsum = 0.0, oc = 0.0;
        for (uint u = 0u; u < R; ++u) lsum += tile_e[u];
        for (uint r0 = 0u; r0 < R; r0 += BC) {
          barrier();
          if (t >= r0 && t < r0 + BC)
            for (uint c = 0u; c < EVC; ++c) tile_v[(t - r0) * EVC + c] = o[c] * w;
          barrier();
          if (t < EVC)
            for (uint rr = 0u; rr < BC; ++rr) oc += tile_v[rr * EVC + t];
        }
        const bool column = t < EVC && c0 + t < p.EV;
        if (p.splits == 1u) {
          if (column) STORE_F(a, DT, p.a_off + row * p.EV + c0 + t, lsum == 0.0 ? 0.0 : oc / lsum)
          if (c0 == 0u && t == 0u) STAT(b)[p.b_off + row] = lsum == 0.0 ? F_INF : M + safe_log(lsum);
        } else {
          const uint part = p.a_off + (row * p.splits + sp) * (p.EV + 2u);
          if (column) STAT(a)[part + 2u + c0 + t] = oc;
          if (c0 == 0u && t == 0u) {
            STAT(a)[part] = M;
            STAT(a)[part + 1u] = lsum;
          }
        }
      }
    }
  }
}

// COMBINE: a thread per output element merges its row's splits.
void combine() {
  const uint n = p.B * p.Hq * p.L * p.EV, stride = p.EV + 2u;
  for (uint x = gl_GlobalInvocationID.x; x < n; x += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint row = x / p.EV, c = x % p.EV, base = p.st_off + row * p.splits * stride;
    FTYPE M = -F_INF;
    for (uint sp = 0u; sp < p.splits; ++sp) M = max(M, STAT(st)[base + sp * stride]);
    FTYPE l = 0.0, o = 0.0;
    for (uint sp = 0u; sp < p.splits; ++sp) {
      const uint at = base + sp * stride;
      const FTYPE w = exp_from(STAT(st)[at], M);
      l += w * STAT(st)[at + 1u];
      o += w * STAT(st)[at + 2u + c];
    }
    STORE_F(a, DT, p.a_off + x, l == 0.0 ? 0.0 : o / l)
    if (c == 0u) STAT(b)[p.b_off + row] = l == 0.0 ? F_INF : M + safe_log(l);
  }
}

void main() {
  if (MODE == ATTN_MODE_SPLIT)
    split_keys();
  else if (MODE == ATTN_MODE_COMBINE)
    combine();
  else if (MODE == ATTN_MODE_STATS)
    stats();
  else if (MODE == ATTN_MODE_DKV)
    dkv();
  else
    forward_or_dq();
}
