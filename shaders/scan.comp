// shaders/scan.comp — cumsum, cumprod, cummax and cummin along the lines of a
// tensor seen as [outer, inner] lines of n elements (docs/kernel-contract.md,
// "Scans"; the host side is runtime/vulkan/vk_kernels_sort.cpp).
//
// SCAN_MODE_LINES gives each line a thread that walks it in order; with lines
// along a non-innermost dim neighbouring threads load neighbouring elements.
// SCAN_MODE_ROW gives a long line a workgroup: each thread folds its own
// contiguous piece into a state, the workgroup turns the states into each
// piece's prefix (in order: cummax's index rule is not commutative), and each
// thread walks its piece again from its prefix, writing. The CHUNK modes
// (abi/scan.h) spread a few very long lines over many workgroups: a
// workgroup does the same for one chunk of a line, starting from the state
// before the chunk, which the first two dispatches compute.
//
// Float sums keep a compensated (TwoSum) pair, as reduce.comp's do, so they
// track the CPU's double accumulation; float products carry their rounding
// errors the same way (Note [Running products in float] in common.glsl). Integer
// sums and products wrap in ITYPE (64-bit in the full variant). The f64
// modules (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp) do the
// same in FTYPE = double.
// ferry-f64-ops: cumsum cumprod cummax cummin
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/scan.h"  // spec and push constants, codes: shared with the host

#include "ferry_ops.glsl"  // OP_CUMSUM, OP_CUMPROD, OP_CUMMAX, OP_CUMMIN: ferry::OpId

FERRY_TENSOR(0, y)  // the values
FERRY_TENSOR(1, ix) // cummax / cummin's i64 positions, as word pairs (else x again, unused)
FERRY_TENSOR(2, x)
FERRY_TENSOR(3, st) // CHUNK modes: the chunks' states, SCAN_STATE_WORDS each (else x again, unused)

#define NO_INDEX 0xffffffffu
const bool EXTREMUM = OP == OP_CUMMAX || OP == OP_CUMMIN;

// hi + lo the float sum or product (or hi the extremum), iv the integer's, idx
// cummax / cummin's position (NO_INDEX: nothing seen).
struct State {
  FTYPE hi, lo;
  ITYPE iv;
  uint idx;
};

State identity() {
  const bool prod = OP == OP_CUMPROD;
  return State(FTYPE(prod ? 1.0 : 0.0), FTYPE(0.0), ITYPE(prod ? 1 : 0), NO_INDEX);
}

// Whether a later value takes over from an earlier one: ties do (the later
// position wins), a NaN does, and nothing but a NaN takes over from a NaN.
bool takes_over_f(FTYPE later, FTYPE earlier) {
  if (isnan(later)) return true;
  if (isnan(earlier)) return false;
  return OP == OP_CUMMAX ? later >= earlier : later <= earlier;
}
// Narrow integers compare in 32 bits (llvmpipe miscompiles 64-bit sign tests
// on sign-extended values; elementwise.comp has the same rule).
bool takes_over_i(ITYPE later, ITYPE earlier) {
  if (IN_DT != DT_I64) return OP == OP_CUMMAX ? int(later) >= int(earlier) : int(later) <= int(earlier);
  return OP == OP_CUMMAX ? later >= earlier : later <= earlier;
}

void step(inout State s, uint e, uint k) {
  if (IS_FLOAT_DT(IN_DT)) {
    FTYPE v = LOAD_F(x, IN_DT, e);
    if (OP == OP_CUMSUM) add_exact(s.hi, s.lo, v);
    else if (OP == OP_CUMPROD) mul_carried(s.hi, s.lo, v);
    else if (s.idx == NO_INDEX || takes_over_f(v, s.hi)) { s.hi = v; s.idx = k; }
  } else {
    ITYPE v = LOAD_I(x, IN_DT, e);
    if (OP == OP_CUMSUM) s.iv += v;
    else if (OP == OP_CUMPROD) s.iv *= v;
    else if (s.idx == NO_INDEX || takes_over_i(v, s.iv)) { s.iv = v; s.idx = k; }
  }
}

// a: the state before b's chunk; b: its chunk's own state.
State combine(State a, State b) {
  if (EXTREMUM) {
    if (b.idx == NO_INDEX) return a;
    if (a.idx == NO_INDEX) return b;
    bool over = IS_FLOAT_DT(IN_DT) ? takes_over_f(b.hi, a.hi) : takes_over_i(b.iv, a.iv);
    return over ? b : a;
  }
  if (IS_FLOAT_DT(IN_DT)) {
    if (OP == OP_CUMSUM) { add_exact(a.hi, a.lo, b.hi); a.lo += b.lo; }
    else mul_carried_pair(a.hi, a.lo, b.hi, b.lo);
  } else {
    if (OP == OP_CUMSUM) a.iv += b.iv;
    else a.iv *= b.iv;
  }
  return a;
}

void write(uint e, State s) {
  if (IS_FLOAT_DT(IN_DT)) {
    // An infinite or NaN hi makes lo NaN (inf - inf); hi is then the answer.
    FTYPE v = !EXTREMUM && !isinf(s.hi) && !isnan(s.hi) ? s.hi + s.lo : s.hi;
    STORE_F(y, OUT_DT, p.y_off + e, v)
  } else {
    STORE_I(y, OUT_DT, p.y_off + e, s.iv)
  }
  if (EXTREMUM) {
    ix_u32[2u * (p.i_off + e)] = s.idx;
    ix_u32[2u * (p.i_off + e) + 1u] = 0u;
  }
}

shared FTYPE s_hi[256];
shared FTYPE s_lo[256];
shared ITYPE s_iv[256];
shared uint s_idx[256];

// A state's words: hi and lo (two words each: a double's, or a float's and 0), iv (two), idx.
#ifdef FERRY_F64
uvec2 ftype_words(double v) { return unpackDouble2x32(v); }
double ftype_of(uint w0, uint w1) { return packDouble2x32(uvec2(w0, w1)); }
#else
uvec2 ftype_words(float v) { return uvec2(floatBitsToUint(v), 0u); }
float ftype_of(uint w0, uint w1) { return uintBitsToFloat(w0); }
#endif
void put_state(uint i, State s) {
  const uint w = i * SCAN_STATE_WORDS;
  const uvec2 hi = ftype_words(s.hi), lo = ftype_words(s.lo);
  st_u32[w] = hi.x;
  st_u32[w + 1u] = hi.y;
  st_u32[w + 2u] = lo.x;
  st_u32[w + 3u] = lo.y;
#ifdef FERRY_FULL
  st_u32[w + 4u] = uint(s.iv & ITYPE(0xffffffff));
  st_u32[w + 5u] = uint(s.iv >> 32);
#else
  st_u32[w + 4u] = uint(s.iv);
  st_u32[w + 5u] = 0u;
#endif
  st_u32[w + 6u] = s.idx;
}

State get_state(uint i) {
  const uint w = i * SCAN_STATE_WORDS;
#ifdef FERRY_FULL
  const ITYPE iv = ITYPE(st_u32[w + 4u]) | (ITYPE(st_u32[w + 5u]) << 32);
#else
  const ITYPE iv = ITYPE(st_u32[w + 4u]);
#endif
  return State(ftype_of(st_u32[w], st_u32[w + 1u]), ftype_of(st_u32[w + 2u], st_u32[w + 3u]), iv,
               st_u32[w + 6u]);
}

void put_shared(uint t, State s) {
  s_hi[t] = s.hi;
  s_lo[t] = s.lo;
  s_iv[t] = s.iv;
  s_idx[t] = s.idx;
}

State get_shared(uint t) { return State(s_hi[t], s_lo[t], s_iv[t], s_idx[t]); }

// With every thread's own state in the slots, each slot becomes the state
// before its thread's piece, starting from `first`; returns (to thread 0)
// the state after the last piece. Every thread of the workgroup calls it.
State exclusive_prefixes(uint t, State first) {
  memoryBarrierShared();
  barrier();
  State prefix = first;
  if (t == 0u) {
    for (uint i = 0u; i < gl_WorkGroupSize.x; ++i) {
      State own = get_shared(i);
      put_shared(i, prefix);
      prefix = combine(prefix, own);
    }
  }
  memoryBarrierShared();
  barrier();
  return prefix;
}

// Elements [k0, k0 + len) of the line at `base`, a contiguous piece per
// thread, scanned from `first` and written (write) or only folded; returns
// (to thread 0) the state after them.
State scan_span(uint base, uint k0, uint len, State first, bool write_out) {
  const uint WG = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  const uint piece = (len + WG - 1u) / WG;
  const uint begin = k0 + min(len, t * piece), end = k0 + min(len, t * piece + piece);
  State s = identity();
  for (uint k = begin; k < end; ++k) step(s, p.x_off + base + k * p.s_n, k);
  put_shared(t, s);
  const State last = exclusive_prefixes(t, first);
  if (write_out) {
    s = get_shared(t);
    for (uint k = begin; k < end; ++k) {
      const uint e = base + k * p.s_n;
      step(s, p.x_off + e, k);
      write(e, s);
    }
  }
  memoryBarrierShared();
  barrier();  // the next span reuses the slots
  return last;
}

uint line_base(uint line) { return (line / p.inner) * p.s_outer + (line % p.inner) * p.s_inner; }

void main() {
  const uint lines = p.outer * p.inner;
  if (MODE == SCAN_MODE_LINES) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint t = gl_GlobalInvocationID.x; t < lines; t += stride) {
      const uint base = line_base(t);
      State s = identity();
      for (uint k = 0u; k < p.n; ++k) {
        const uint e = base + k * p.s_n;
        step(s, p.x_off + e, k);
        write(e, s);
      }
    }
    return;
  }
  const uint t = gl_LocalInvocationID.x;
  // The trip counts are the same for the whole workgroup, so the barriers are uniform.
  if (MODE == SCAN_MODE_ROW) {
    for (uint line = gl_WorkGroupID.x; line < lines; line += gl_NumWorkGroups.x)
      scan_span(line_base(line), 0u, p.n, identity(), true);
    return;
  }
  if (MODE == SCAN_MODE_CHUNK_PREFIX) {  // a line's chunk states, a contiguous piece per thread
    const uint WG = gl_WorkGroupSize.x;
    const uint piece = (p.chunks + WG - 1u) / WG;
    const uint begin = min(p.chunks, t * piece), end = min(p.chunks, t * piece + piece);
    for (uint line = gl_WorkGroupID.x; line < lines; line += gl_NumWorkGroups.x) {
      const uint first = line * p.chunks;
      State s = identity();
      for (uint c = begin; c < end; ++c) s = combine(s, get_state(first + c));
      put_shared(t, s);
      exclusive_prefixes(t, identity());
      s = get_shared(t);
      for (uint c = begin; c < end; ++c) {
        const State own = get_state(first + c);
        put_state(first + c, s);
        s = combine(s, own);
      }
      memoryBarrierShared();
      barrier();
    }
    return;
  }
  // CHUNK_STATES and CHUNK_APPLY: a workgroup per (line, chunk).
  const uint items = lines * p.chunks;
  for (uint item = gl_WorkGroupID.x; item < items; item += gl_NumWorkGroups.x) {
    const uint line = item / p.chunks, c = item % p.chunks;
    const uint k0 = c * p.chunk, len = min(p.chunk, p.n - k0);
    if (MODE == SCAN_MODE_CHUNK_STATES) {
      const State total = scan_span(line_base(line), k0, len, identity(), false);
      if (t == 0u) put_state(item, total);
    } else {
      scan_span(line_base(line), k0, len, get_state(item), true);
    }
  }
}
