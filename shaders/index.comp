// shaders/index.comp — index_select and gather as one loop (the CPU's formulation,
// runtime/cpu/cpu_kernels_index.cpp): out[i] = x[src(i) + index[i] * dim_stride], where src
// is x viewed with the output's shape and stride 0 along `dim`, and index is viewed with the
// output's shape too (for index_select: stride 0 everywhere but `dim`). The host coalesces
// the three views to at most 4 dims (looping over any beyond) and passes their strides.
//
// Elements are moved by size, so one pipeline per element size serves every dtype; 1- and
// 2-byte elements need 8/16-bit storage (the full variant). Indices are i64, read as two
// 32-bit words so that the base variant needs no int64. The core checks every index
// (Note [Index bounds] in runtime/ops_index.cpp) but reads the verdict later (Note [Deferred
// checks] in runtime/deferred_checks.hpp), so an index outside [0, dim_size) does come here:
// it writes 0 rather than reading outside x.
//
// Specialization and push constants: shaders/abi/index.h. Grid-stride loop over the output's
// elements.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/index.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, o)
FERRY_TENSOR(1, x)
FERRY_TENSOR(2, idx)

uint offset_of(uint t, uvec4 c) {
  uvec4 s = p.stride[t];
  uint r = p.off[t];
  if (NDIM >= 1) r += c.x * s.x;
  if (NDIM >= 2) r += c.y * s.y;
  if (NDIM >= 3) r += c.z * s.z;
  if (NDIM >= 4) r += c.w * s.w;
  return r;
}

// Linear index -> coordinates over the first NDIM dims (row-major).
uvec4 coords_of(uint i) {
  uvec4 c = uvec4(0);
  if (NDIM == 1) {
    c.x = i;
  } else if (NDIM == 2) {
    c.y = i % p.size.y;
    c.x = i / p.size.y;
  } else if (NDIM == 3) {
    c.z = i % p.size.z;
    i /= p.size.z;
    c.y = i % p.size.y;
    c.x = i / p.size.y;
  } else {
    c.w = i % p.size.w;
    i /= p.size.w;
    c.z = i % p.size.z;
    i /= p.size.z;
    c.y = i % p.size.y;
    c.x = i / p.size.y;
  }
  return c;
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    uvec4 c = coords_of(i);
    uint oi = offset_of(0, c), ii = offset_of(2, c);
#ifdef FERRY_FULL
    int64_t v64 = idx_i64[ii];
    bool ok = v64 >= 0 && v64 < int64_t(p.dim_size);
    uint lo = uint(v64);
#else
    // The i64 as two words, low first (little-endian); a valid index has a zero high word.
    uint lo = idx_u32[2 * ii], hi = idx_u32[2 * ii + 1];
    bool ok = hi == 0u && lo < p.dim_size;
#endif
    uint xi = offset_of(1, c) + (ok ? lo : 0u) * p.dim_stride;
    if (ELSIZE == 4) {
      uint v = x_u32[xi];
      o_u32[oi] = ok ? v : 0u;
    } else if (ELSIZE == 8) {
#ifdef FERRY_FULL
      int64_t v = x_i64[xi];
      o_i64[oi] = ok ? v : int64_t(0);
#else
      uint v0 = x_u32[2 * xi], v1 = x_u32[2 * xi + 1];
      o_u32[2 * oi] = ok ? v0 : 0u;
      o_u32[2 * oi + 1] = ok ? v1 : 0u;
#endif
    }
#ifdef FERRY_FULL
    else if (ELSIZE == 2) {
      uint v = uint(x_u16[xi]);  // through uint: 16-bit storage, not 16-bit arithmetic
      o_u16[oi] = uint16_t(ok ? v : 0u);
    } else {
      uint v = uint(x_u8[xi]);
      o_u8[oi] = uint8_t(ok ? v : 0u);
    }
#endif
  }
}
