// shaders/matvec.comp — matmul's matrix-vector path: c[s][g] = Σ_k x[s][k] · w[g][k] for
// S <= 8 vectors against G weight rows contiguous in k (or, ALONG_G, K rows contiguous in g),
// per batch (Note [Matrix-vector products] in ferry/kit/matvec_shape.hpp; the host:
// runtime/vulkan/vk_kernels_matvec.cpp).
//
// A workgroup takes ROWS weight rows. Its threads walk k together in chunks of 8 elements,
// thread t taking chunks t, t + WG, ..., so neighbouring threads read neighbouring 16 or 32
// bytes of a row (coalesced on a GPU); a chunk is one uvec4 of 16-bit weights or two of
// floats, converted in registers (16-bit weights are never widened in memory), and each
// vector's chunk, loaded once, serves all ROWS rows. Where a row does not start at a multiple
// of 8 elements (W_VEC false), or past the last whole chunk, elements are loaded one at a
// time. Each thread keeps ROWS x S sums in f32 (ROWS x S may exceed the workgroup's threads);
// a shared-memory tree adds them up across the workgroup at the end, and the threads store
// them in the output's dtype. Rows past G (the last workgroup) read row G - 1, in bounds, and
// store nothing.
//
// ALONG_G: the weight's K rows are contiguous in g instead (x · W with W [K, G]; Note [Matrix-
// vector products]). Then a thread takes 8 neighbouring columns, neighbouring threads the
// next 8 (so a row's elements are read together, coalesced on a GPU), and walks k, reading the
// 8 as one 16-byte word of f16 or bf16 or two of floats where W_VEC (rows starting at
// multiples of 8 elements), else one at a time, and keeping its 8 x S sums in f32: no tree,
// no barrier. Grid x: groups of 8 WG columns.
//
// A K too long for one invocation within the device's loop budget comes in pieces, each after
// the first adding to c (ACCUMULATE). Specialization and push constants: shaders/abi/matvec.h. Grid: x = groups of ROWS rows,
// y = batches, each offset by the push constants' bases (the host splits grids beyond the
// device limit).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#include "abi/matvec.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, c)
FERRY_TENSOR(1, w)
FERRY_TENSOR(2, x)
FERRY_TENSOR(3, c_old)  // ACCUMULATE: c's values before, added to the products
// The weight and the vectors as 16-byte words, for the chunked loads.
layout(set = 0, binding = 1, std430) buffer w_v4_t { uvec4 w_v4[]; };
layout(set = 0, binding = 2, std430) buffer x_v4_t { uvec4 x_v4[]; };

shared float red[MATVEC_SLOTS * MATVEC_WG];

// Eight 16-bit values (element 0 in u.x's low half) as floats.
void widen16(uvec4 u, out vec4 lo, out vec4 hi) {
  if (DT == DT_F16) {
    lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
  } else {  // bf16: a float's high half
    lo = uintBitsToFloat(uvec4(u.x << 16, u.x & 0xffff0000u, u.y << 16, u.y & 0xffff0000u));
    hi = uintBitsToFloat(uvec4(u.z << 16, u.z & 0xffff0000u, u.w << 16, u.w & 0xffff0000u));
  }
}

// Elements e .. e + 7 (e a multiple of 8) of binding V4 as floats.
#define LOAD8(V4, e, lo, hi)                    \
  if (DT == DT_F32) {                           \
    lo = uintBitsToFloat(V4[(e) / 4u]);         \
    hi = uintBitsToFloat(V4[(e) / 4u + 1u]);    \
  } else {                                      \
    widen16(V4[(e) / 8u], lo, hi);              \
  }

// c[s][g] + (c_old) at the output's place, in its dtype.
void store_c(uint batch, uint s, uint g, float v) {
  const uint at = p.c_off + batch * p.c_batch + s * p.c_s + g * p.c_g;
  if (ACCUMULATE) v += LOAD_F(c_old, DT, at);
  STORE_F(c, DT, at, v)
}

void columns(uint batch) {
  const uint g0 = ((gl_WorkGroupID.x + p.group0) * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * 8u;
  if (g0 >= p.G) return;
  const uint wcol = p.w_off + batch * p.w_batch + g0, xb = p.x_off + batch * p.x_batch;
  const bool whole = W_VEC && g0 + 8u <= p.G;  // the 8 columns are one aligned chunk
  vec4 lo[8], hi[8];  // [s]: columns g0 .. g0 + 3 and g0 + 4 .. g0 + 7
  [[unroll]] for (uint s = 0; s < S; ++s) lo[s] = hi[s] = vec4(0.0);
  for (uint k = 0; k < p.K; ++k) {
    vec4 wl, wh;
    if (whole) {
      LOAD8(w_v4, wcol + k * p.w_k, wl, wh)
    } else {
      [[unroll]] for (uint j = 0; j < 4u; ++j) {
        wl[j] = g0 + j < p.G ? LOAD_F(w, DT, wcol + k * p.w_k + j) : 0.0;
        wh[j] = g0 + j + 4u < p.G ? LOAD_F(w, DT, wcol + k * p.w_k + j + 4u) : 0.0;
      }
    }
    [[unroll]] for (uint s = 0; s < S; ++s) {
      const float xv = LOAD_F(x, DT, xb + s * p.x_s + k * p.x_k);
      lo[s] += xv * wl;
      hi[s] += xv * wh;
    }
  }
  [[unroll]] for (uint s = 0; s < S; ++s)
    [[unroll]] for (uint j = 0; j < 4u; ++j) {
      if (g0 + j < p.G) store_c(batch, s, g0 + j, lo[s][j]);
      if (g0 + j + 4u < p.G) store_c(batch, s, g0 + j + 4u, hi[s][j]);
    }
}

void main() {
  const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  const uint batch = gl_WorkGroupID.y + p.batch0;
  if (ALONG_G) {
    columns(batch);
    return;
  }
  const uint g0 = (gl_WorkGroupID.x + p.group0) * ROWS;
  const uint wb = p.w_off + batch * p.w_batch, xb = p.x_off + batch * p.x_batch;
  uint w_at[MATVEC_SLOTS];  // each row's element 0
  [[unroll]] for (uint r = 0; r < ROWS; ++r) w_at[r] = wb + min(g0 + r, p.G - 1u) * p.w_row;
  float acc[MATVEC_SLOTS];  // acc[r * S + s]
  [[unroll]] for (uint i = 0; i < MATVEC_SLOTS; ++i) acc[i] = 0.0;

  const uint kv = W_VEC ? p.K & ~7u : 0u;  // the chunked part of each row
  for (uint k = tid * 8u; k < kv; k += wg * 8u) {
    vec4 xl[MATVEC_SLOTS], xh[MATVEC_SLOTS];
    [[unroll]] for (uint s = 0; s < S; ++s) {
      if (X_VEC) {
        LOAD8(x_v4, xb + s * p.x_s + k, xl[s], xh[s])
      } else {
        const uint at = xb + s * p.x_s + k * p.x_k;
        [[unroll]] for (uint j = 0; j < 4; ++j) {
          xl[s][j] = LOAD_F(x, DT, at + j * p.x_k);
          xh[s][j] = LOAD_F(x, DT, at + (j + 4u) * p.x_k);
        }
      }
    }
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      vec4 wl, wh;
      LOAD8(w_v4, w_at[r] + k, wl, wh)
      [[unroll]] for (uint s = 0; s < S; ++s) acc[r * S + s] += dot(wl, xl[s]) + dot(wh, xh[s]);
    }
  }
  for (uint k = kv + tid; k < p.K; k += wg) {
    float xs[MATVEC_SLOTS];
    [[unroll]] for (uint s = 0; s < S; ++s) xs[s] = LOAD_F(x, DT, xb + s * p.x_s + k * p.x_k);
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      const float wv = LOAD_F(w, DT, w_at[r] + k);
      [[unroll]] for (uint s = 0; s < S; ++s) acc[r * S + s] += wv * xs[s];
    }
  }

  [[unroll]] for (uint i = 0; i < ROWS * S; ++i) red[i * MATVEC_WG + tid] = acc[i];
  barrier();
  for (uint h = wg / 2u; h > 0u; h /= 2u) {
    if (tid < h)
      [[unroll]] for (uint i = 0; i < ROWS * S; ++i) red[i * MATVEC_WG + tid] +=
          red[i * MATVEC_WG + tid + h];
    barrier();
  }
  for (uint i = tid; i < ROWS * S; i += wg) {
    const uint r = i / S, s = i % S;
    if (g0 + r < p.G) store_c(batch, s, g0 + r, red[i * MATVEC_WG]);
  }
}
