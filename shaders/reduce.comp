// shaders/reduce.comp — sum, prod, max, min and argmax over the trailing (reduced)
// dims of a strided tensor (docs/kernel-contract.md, "Reductions").
//
// A workgroup of WG threads works on WG / LANES rows (outputs) at a time, LANES
// threads per row: each thread folds a strided subset of its row into an
// accumulator, then the row's threads combine theirs in a subgroup butterfly and a
// shared-memory tree (Note [Subgroup row reductions] in subgroup.glsl).
// With ROW_FAST the thread index runs along the rows, so when the outputs are
// contiguous in memory and the rows are not (sum over dim 0), neighbouring
// threads still load neighbouring elements.
// Few long rows are split over several workgroups (REDUCE_MODE_PARTIAL writes one
// record per (split, output) into a scratch buffer, REDUCE_MODE_FINAL combines the
// records of each output); REDUCE_MODE_DIRECT does a row in one go. Rows longer than
// one storage-buffer binding are cut by the host into pieces, each bound and
// reduced to records on its own (`first` counts argmax positions from the
// row's start); REDUCE_MODE_COMBINE merges groups of records into records when there
// are more than one binding holds. The host side is
// runtime/vulkan/vk_kernels_reduce.cpp.
//
// Float sums keep a compensated (TwoSum) pair per accumulator, so they match
// the CPU's double accumulation to about float rounding, even for 2^24 terms;
// float products carry their rounding errors in the pair too (Note [Running
// products in float] in common.glsl).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/reduce.h"  // spec and push constants, codes: shared with the host
#include "subgroup.glsl"

#include "ferry_ops.glsl"  // OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_ARGMAX: ferry::OpId
#ifdef FERRY_FIXED_OP
// A module of one op (Note [Per-op shader modules] in runtime/vulkan/vk_pipelines.cpp).
#define OP FERRY_FIXED_OP
#endif
// The ops the f64 modules compute, in double (Note [f64 on Vulkan]; shaders.cmake reads this):
// ferry-f64-ops: sum prod max min argmax

// Binding 0: the output, or the records (4 words each) in REDUCE_MODE_PARTIAL and REDUCE_MODE_COMBINE.
// Binding 1: the input, or the records in REDUCE_MODE_FINAL and REDUCE_MODE_COMBINE.
FERRY_TENSOR(0, o)
FERRY_TENSOR(1, x)

#ifdef FERRY_FULL
#define ITYPE_MAX int64_t(0x7fffffffffffffffl)
#define ITYPE_MIN int64_t(0x8000000000000000l)
#else
#define ITYPE_MAX 2147483647
#define ITYPE_MIN (-2147483647 - 1)
#endif
#define NO_INDEX 0xffffffffu

// hi + lo is the float sum or product (lo holds the rounding errors of hi; Note [Running
// products in float] in common.glsl), or hi the float max/min/argmax value; iv the integer
// value; idx the argmax position.
struct Acc {
  FTYPE hi, lo;
  ITYPE iv;
  uint idx;
};

Acc identity() {
  Acc a;
  a.hi = OP == OP_MAX ? -F_INF : (OP == OP_MIN ? F_INF : (OP == OP_PROD ? 1.0 : 0.0));
  a.lo = 0.0;
  a.iv = OP == OP_MAX ? ITYPE_MIN : (OP == OP_MIN ? ITYPE_MAX : ITYPE(OP == OP_PROD ? 1 : 0));
  a.idx = NO_INDEX;
  return a;
}

// Whether (v, i) beats (a.hi/a.iv, a.idx) for argmax: larger, or NaN (the
// maximum), or equal (NaN included) at a smaller index: the first maximum wins.
bool arg_better_f(FTYPE v, uint i, Acc a) {
  if (i == NO_INDEX) return false;
  if (a.idx == NO_INDEX) return true;
  bool vn = isnan(v), an = isnan(a.hi);
  if (vn || an) return vn && (!an || i < a.idx);
  return v > a.hi || (v == a.hi && i < a.idx);
}
bool arg_better_i(ITYPE v, uint i, Acc a) {
  if (i == NO_INDEX) return false;
  return a.idx == NO_INDEX || v > a.iv || (v == a.iv && i < a.idx);
}

// Folds element `e` of x, at position k of its row, into a.
void step(inout Acc a, uint e, uint k) {
  if (IS_FLOAT_DT(IN_DT)) {
    FTYPE v = LOAD_F(x, IN_DT, e);
    if (OP == OP_SUM) add_exact(a.hi, a.lo, v);
    else if (OP == OP_PROD) mul_carried(a.hi, a.lo, v);
    else if (OP == OP_MAX) a.hi = max_f(a.hi, v);
    else if (OP == OP_MIN) a.hi = min_f(a.hi, v);
    else if (arg_better_f(v, k, a)) { a.hi = v; a.idx = k; }
  } else {
    ITYPE v = LOAD_I(x, IN_DT, e);
    if (OP == OP_SUM) a.iv += v;  // wraps, like the CPU's int64 sum
    else if (OP == OP_PROD) a.iv *= v;
    else if (OP == OP_MAX) a.iv = max(a.iv, v);
    else if (OP == OP_MIN) a.iv = min(a.iv, v);
    else if (arg_better_i(v, k, a)) { a.iv = v; a.idx = k; }
  }
}

void combine(inout Acc a, Acc b) {
  if (IS_FLOAT_DT(IN_DT)) {
    if (OP == OP_SUM) { add_exact(a.hi, a.lo, b.hi); a.lo += b.lo; }
    else if (OP == OP_PROD) mul_carried_pair(a.hi, a.lo, b.hi, b.lo);
    else if (OP == OP_MAX) a.hi = max_f(a.hi, b.hi);
    else if (OP == OP_MIN) a.hi = min_f(a.hi, b.hi);
    else if (arg_better_f(b.hi, b.idx, a)) a = b;
  } else {
    if (OP == OP_SUM) a.iv += b.iv;
    else if (OP == OP_PROD) a.iv *= b.iv;
    else if (OP == OP_MAX) a.iv = max(a.iv, b.iv);
    else if (OP == OP_MIN) a.iv = min(a.iv, b.iv);
    else if (arg_better_i(b.iv, b.idx, a)) a = b;
  }
}

// ---- records: an Acc as 4 words (hi or the integer's low word, lo or its high word, idx;
// for f64: hi's two words, idx, lo rounded to float, an error term that needs no more) ----
void store_record(uint w, Acc a) {
#ifdef FERRY_F64
  if (IN_DT == DT_F64) {
    uvec2 h = unpackDouble2x32(a.hi);
    o_u32[w] = h.x;
    o_u32[w + 1u] = h.y;
    o_u32[w + 2u] = a.idx;
    o_u32[w + 3u] = floatBitsToUint(float(a.lo));
    return;
  }
#endif
  if (IS_FLOAT_DT(IN_DT)) {
    o_u32[w] = floatBitsToUint(float(a.hi));  // float(): a no-op but in the f64 modules
    o_u32[w + 1u] = floatBitsToUint(float(a.lo));
  } else {
#ifdef FERRY_FULL
    o_u32[w] = uint(a.iv);
    o_u32[w + 1u] = uint(a.iv >> 32);
#else
    o_u32[w] = uint(a.iv);
    o_u32[w + 1u] = a.iv < 0 ? 0xffffffffu : 0u;
#endif
  }
  o_u32[w + 2u] = a.idx;
}
Acc load_record(uint w) {
  Acc a;
  a.hi = uintBitsToFloat(x_u32[w]);
  a.lo = uintBitsToFloat(x_u32[w + 1u]);
#ifdef FERRY_FULL
  a.iv = int64_t(uint64_t(x_u32[w]) | (uint64_t(x_u32[w + 1u]) << 32));
#else
  a.iv = int(x_u32[w]);
#endif
  a.idx = x_u32[w + 2u];
#ifdef FERRY_F64
  if (IN_DT == DT_F64) {
    a.hi = packDouble2x32(uvec2(x_u32[w], x_u32[w + 1u]));
    a.lo = uintBitsToFloat(x_u32[w + 3u]);
  }
#endif
  return a;
}

void store_result(uint i, Acc a) {
  if (OP == OP_ARGMAX) {
    // i64 output as two words, so argmax needs no 64-bit integer support.
    o_u32[2u * i] = a.idx;
    o_u32[2u * i + 1u] = 0u;
  } else if (IS_FLOAT_DT(IN_DT)) {
    // An infinite or NaN hi makes lo NaN (inf - inf); hi is then the answer.
    FTYPE v = (OP == OP_SUM || OP == OP_PROD) && !isinf(a.hi) && !isnan(a.hi) ? a.hi + a.lo : a.hi;
    STORE_F(o, OUT_DT, i, v)
  } else {
    STORE_I(o, OUT_DT, i, a.iv)
  }
}

// ---- geometry ----
uint kept_offset(uint i) {
  uint off = 0u;
  for (int d = int(KDIM) - 1; d >= 0; --d) {
    off += (i % p.ksize[d]) * p.kstride[d];
    i /= p.ksize[d];
  }
  return off;
}
uint red_offset(uint k) {
  if (RDIM == 1u) return k * p.rstride[0];
  uint off = 0u;
  for (int d = int(RDIM) - 1; d >= 0; --d) {
    off += (k % p.rsize[d]) * p.rstride[d];
    k /= p.rsize[d];
  }
  return off;
}

shared FTYPE s_hi[256];
shared FTYPE s_lo[256];
shared ITYPE s_iv[256];
shared uint s_idx[256];

void put(uint s, Acc a) {
  s_hi[s] = a.hi;
  s_lo[s] = a.lo;
  s_iv[s] = a.iv;
  s_idx[s] = a.idx;
}
Acc get(uint s) { return Acc(s_hi[s], s_lo[s], s_iv[s], s_idx[s]); }

// The accumulator of the thread o away in the subgroup (ROW_SHUFFLE), the fields the op uses.
Acc shuffle_xor(Acc a, uint o) {
  Acc b = a;
  if (IS_FLOAT_DT(IN_DT)) {
    b.hi = ROW_SHUFFLE(a.hi, o);
    if (OP == OP_SUM || OP == OP_PROD) b.lo = ROW_SHUFFLE(a.lo, o);
  } else {
#ifdef FERRY_FULL  // 64-bit shuffles need an extension of their own: two words
    b.iv = int64_t(uint64_t(ROW_SHUFFLE(uint(a.iv), o)) |
                   (uint64_t(ROW_SHUFFLE(uint(a.iv >> 32), o)) << 32));
#else
    b.iv = ROW_SHUFFLE(a.iv, o);
#endif
  }
  if (OP == OP_ARGMAX) b.idx = ROW_SHUFFLE(a.idx, o);
  return b;
}

void main() {
  const uint ROWS = gl_WorkGroupSize.x / LANES;
  const uint t = row_thread();
  const uint lane = ROW_FAST ? t / ROWS : t % LANES;
  const uint row = ROW_FAST ? t % ROWS : t / LANES;
  const uint slot = row * LANES + lane;
  // Virtual row v = piece * n_out + output, so that neighbouring rows are
  // neighbouring outputs in every mode (coalesced with ROW_FAST).
  const uint n_rows = p.n_out * (MODE == REDUCE_MODE_PARTIAL ? p.splits : 1u);
  const uint n_blocks = (n_rows + ROWS - 1u) / ROWS;
  // The trip count is the same for the whole workgroup, so the barriers are uniform.
  for (uint blk = gl_WorkGroupID.x; blk < n_blocks; blk += gl_NumWorkGroups.x) {
    const uint v = blk * ROWS + row;
    Acc a = identity();
    if (v < n_rows) {
      const uint oi = v % p.n_out;
      if (MODE == REDUCE_MODE_FINAL || MODE == REDUCE_MODE_COMBINE) {
        for (uint k = lane; k < p.n_red; k += LANES)
          combine(a, load_record(p.in_off + 4u * (k * p.n_out + oi)));
      } else {
        const uint begin = (v / p.n_out) * p.chunk;
        const uint end = p.n_red - begin > p.chunk ? begin + p.chunk : p.n_red;
        const uint base = p.in_off + kept_offset(oi);
        for (uint k = begin + lane; k < end; k += LANES) step(a, base + red_offset(k), p.first + k);
      }
    }
    // The lanes' accumulators meet: first those in one subgroup, then the rest in shared
    // memory; lane 0 ends with the row's.
    const uint in_subgroup = ROW_FAST ? 1u : row_subgroup_lanes(LANES);
    for (uint h = 1u; h < in_subgroup; h <<= 1u) combine(a, shuffle_xor(a, h));
    if (in_subgroup < LANES) {
      put(slot, a);
      for (uint s = LANES / 2u; s >= in_subgroup; s >>= 1u) {
        memoryBarrierShared();
        barrier();
        if (lane < s) {
          combine(a, get(slot + s));
          put(slot, a);
        }
      }
    }
    if (lane == 0u && v < n_rows) {
      if (MODE == REDUCE_MODE_PARTIAL || MODE == REDUCE_MODE_COMBINE) store_record(p.out_off + 4u * v, a);
      else store_result(p.out_off + v, a);
    }
    if (in_subgroup < LANES) {
      memoryBarrierShared();
      barrier();  // the next block reuses the slots
    }
  }
}
