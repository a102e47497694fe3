// shaders/sort.comp — the stable sort of contiguous rows (docs/kernel-contract.md,
// "Sort"; the host side is runtime/vulkan/vk_kernels_sort.cpp).
//
// Note [Vulkan sort]
// A bitonic sorting network over each row padded to a power of two P, in the
// form whose comparators all put the lesser element first: merge level k
// (2, 4, ..., P) starts with a "flip" step that compares element i of each
// block of k with element k - 1 - i, then half-cleaner steps compare i with
// i + j for j = k/4 ... 1 within blocks of 2j. Since no comparator ever
// moves an element upwards past a greater one, the padding (greater than
// everything) simply stays put: a pair whose upper element lies beyond n is
// skipped. Elements compare by value and then by original position, so the
// order is total and the result is the stable sort; NaN is greater than
// every number (two NaNs compare by position), -0 equals +0, and DESCENDING
// reverses the value order only.
// Steps of distance < 2 WG run in shared memory: SORT_MODE_FIRST loads a
// block of 2 WG elements from x (positions as the second key) and runs every
// level up to 2 WG; a longer row then takes, per level, one global FLIP step,
// global HALF steps while j >= 2 WG, and one SORT_MODE_MERGE for the rest.
// The values and positions live in the outputs throughout. Rows of at most FERRY_SORT_ROW_MAX
// elements take SORT_MODE_ROW instead: a thread per row inserts each element into the sorted
// prefix in the outputs (by the same order: stable), where the network would give each short
// row a workgroup of its own (4,096 rows of 4 took 190 ms on lavapipe). The f64 module (Note [f64 on
// Vulkan] in runtime/vulkan/vk_pipelines.cpp) compares and moves doubles.
// ferry-f64-ops: sort
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/sort.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, v)   // the values (sorted in place)
FERRY_TENSOR(1, ix)  // the i64 positions, as word pairs
FERRY_TENSOR(2, x)   // the input (read by SORT_MODE_FIRST)

#define NONE 0xffffffffu  // a padding slot's position: after everything

// Whether (fa, ia) goes before (fb, ib).
bool before_f(FTYPE fa, uint ia, FTYPE fb, uint ib) {
  if (ia == NONE || ib == NONE) return ib == NONE && ia != NONE;
  const bool an = isnan(fa), bn = isnan(fb);
  if (an || bn) return an && bn ? ia < ib : (DESCENDING ? an : bn);
  if (fa == fb) return ia < ib;
  return DESCENDING ? fa > fb : fa < fb;
}
// Narrow integers compare in 32 bits (llvmpipe miscompiles 64-bit sign tests
// on sign-extended values; elementwise.comp has the same rule).
bool before_i(ITYPE a, uint ia, ITYPE b, uint ib) {
  if (ia == NONE || ib == NONE) return ib == NONE && ia != NONE;
  bool eq, lt;
  if (DT == DT_I64) {
    eq = a == b;
    lt = a < b;
  } else {
    eq = int(a) == int(b);
    lt = int(a) < int(b);
  }
  if (eq) return ia < ib;
  return DESCENDING ? !lt : lt;
}

uint pos_at(uint e) { return ix_u32[2u * (p.i_off + e)]; }
void put(uint e, FTYPE f, ITYPE i, uint pos) {
  if (IS_FLOAT_DT(DT)) STORE_F(v, DT, p.v_off + e, f)
  else STORE_I(v, DT, p.v_off + e, i)
  ix_u32[2u * (p.i_off + e)] = pos;
  ix_u32[2u * (p.i_off + e) + 1u] = 0u;
}

// The pair of step (k, j) that pair number q of a row compares (a < b).
uvec2 pair_of(uint q, uint k, uint j) {
  if (j == k / 2u) {  // flip
    const uint blk = q / j, r = q % j;
    return uvec2(blk * k + r, blk * k + k - 1u - r);
  }
  const uint a = (q / j) * 2u * j + q % j;
  return uvec2(a, a + j);
}

shared FTYPE s_f[512];
shared ITYPE s_i[512];
shared uint s_pos[512];

void local_step(uint q, uint k, uint j) {
  const uvec2 ab = pair_of(q, k, j);
  const uint a = ab.x, b = ab.y;
  const bool swap = IS_FLOAT_DT(DT) ? before_f(s_f[b], s_pos[b], s_f[a], s_pos[a])
                                    : before_i(s_i[b], s_pos[b], s_i[a], s_pos[a]);
  if (swap) {
    FTYPE f = s_f[a];
    s_f[a] = s_f[b];
    s_f[b] = f;
    ITYPE i = s_i[a];
    s_i[a] = s_i[b];
    s_i[b] = i;
    uint ps = s_pos[a];
    s_pos[a] = s_pos[b];
    s_pos[b] = ps;
  }
}

// SORT_MODE_ROW: row r by insertion, in the outputs.
void sort_row(uint row) {
  const uint e0 = row * p.n;
  for (uint i = 0u; i < p.n; ++i) {
    FTYPE f = FTYPE(0);
    ITYPE iv = ITYPE(0);
    if (IS_FLOAT_DT(DT)) f = LOAD_F(x, DT, p.x_off + e0 + i);
    else iv = LOAD_I(x, DT, p.x_off + e0 + i);
    uint at = i;  // slides down past the elements it goes before
    for (; at > 0u; --at) {
      const uint e = e0 + at - 1u, pos = pos_at(e);
      if (IS_FLOAT_DT(DT)) {
        const FTYPE g = LOAD_F(v, DT, p.v_off + e);
        if (!before_f(f, i, g, pos)) break;
        put(e + 1u, g, ITYPE(0), pos);
      } else {
        const ITYPE w = LOAD_I(v, DT, p.v_off + e);
        if (!before_i(iv, i, w, pos)) break;
        put(e + 1u, 0.0, w, pos);
      }
    }
    put(e0 + at, f, iv, i);
  }
}

void main() {
  const uint WG = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  if (MODE == SORT_MODE_ROW) {
    const uint stride = gl_NumWorkGroups.x * WG;
    for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += stride) sort_row(r);
    return;
  }
  if (MODE == SORT_MODE_FLIP || MODE == SORT_MODE_HALF) {
    const uint half_p = p.padded / 2u, pairs = p.rows * half_p;
    const uint stride = gl_NumWorkGroups.x * WG;
    for (uint g = gl_GlobalInvocationID.x; g < pairs; g += stride) {
      const uint row = g / half_p;
      const uvec2 ab = pair_of(g % half_p, p.k, MODE == SORT_MODE_FLIP ? p.k / 2u : p.j);
      if (ab.y >= p.n) continue;
      const uint ea = row * p.n + ab.x, eb = row * p.n + ab.y;
      const uint pa = pos_at(ea), pb = pos_at(eb);
      if (IS_FLOAT_DT(DT)) {
        const FTYPE fa = LOAD_F(v, DT, p.v_off + ea), fb = LOAD_F(v, DT, p.v_off + eb);
        if (before_f(fb, pb, fa, pa)) {
          put(ea, fb, ITYPE(0), pb);
          put(eb, fa, ITYPE(0), pa);
        }
      } else {
        const ITYPE ia = LOAD_I(v, DT, p.v_off + ea), ib = LOAD_I(v, DT, p.v_off + eb);
        if (before_i(ib, pb, ia, pa)) {
          put(ea, 0.0, ib, pb);
          put(eb, 0.0, ia, pa);
        }
      }
    }
    return;
  }
  // A block of B = 2 WG elements of a row in shared memory.
  const uint B = 2u * WG;
  const uint blocks = (p.padded + B - 1u) / B, total = p.rows * blocks;
  for (uint blk = gl_WorkGroupID.x; blk < total; blk += gl_NumWorkGroups.x) {
    const uint row = blk / blocks, first = (blk % blocks) * B;
    for (uint s = t; s < B; s += WG) {
      const uint i = first + s, e = row * p.n + i;
      s_pos[s] = NONE;
      s_f[s] = 0.0;
      s_i[s] = ITYPE(0);
      if (i < p.n) {
        if (MODE == SORT_MODE_FIRST) {
          s_pos[s] = i;
          if (IS_FLOAT_DT(DT)) s_f[s] = LOAD_F(x, DT, p.x_off + e);
          else s_i[s] = LOAD_I(x, DT, p.x_off + e);
        } else {
          s_pos[s] = pos_at(e);
          if (IS_FLOAT_DT(DT)) s_f[s] = LOAD_F(v, DT, p.v_off + e);
          else s_i[s] = LOAD_I(v, DT, p.v_off + e);
        }
      }
    }
    memoryBarrierShared();
    barrier();
    const uint top = min(B, p.padded);
    if (MODE == SORT_MODE_FIRST) {
      for (uint k = 2u; k <= top; k *= 2u)
        for (uint j = k / 2u; j > 0u; j /= 2u) {
          if (t < top / 2u) local_step(t, k, j);
          memoryBarrierShared();
          barrier();
        }
    } else {  // the rest of level p.k: half-cleaners only (the flip was global)
      for (uint j = B / 2u; j > 0u; j /= 2u) {
        local_step(t, 4u * j, j);  // any k > 2 j: pair_of's half-cleaner
        memoryBarrierShared();
        barrier();
      }
    }
    for (uint s = t; s < B; s += WG) {
      const uint i = first + s;
      if (i < p.n) put(row * p.n + i, s_f[s], s_i[s], s_pos[s]);
    }
    memoryBarrierShared();
    barrier();  // the next block reuses the slots
  }
}
