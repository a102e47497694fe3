// shaders/index_add.comp — index_add and scatter_add: out[o, index[o, j]] += src[o, j], the
// CPU's one loop (Note [Deterministic accumulation] in runtime/cpu/cpu_kernels_grad.cpp).
// o runs over the coordinates other than `dim` (the lines); j over src's extent along `dim`.
// The host (vk_kernels_index.cpp) gives every view src's shape — out with its own strides,
// the index with stride 0 along the other dims for index_add — coalesces the other dims to at
// most 4 and passes the steps along `dim` separately.
//
// One invocation owns one output line and adds its contributions in increasing j, so each
// element's sum is formed in the same order as on the CPU and on every run: no atomics, and
// f32 results are bit-identical to the CPU's (one correctly rounded add at a time). Floats add
// in f32 and round on every store (f16/bf16 as the CPU does); integers wrap.
//
// An output larger than a binding comes in ranges of rows along dim: the binding holds rows
// [index_base, index_base + out_size), and a contribution whose index falls outside them is
// skipped (another dispatch adds it). The core checked every index (Note [Index bounds]); an
// index outside the output all the same adds nothing rather than writing outside it. Indices
// are i64, read as two 32-bit words in the base variant (which has no int64).
//
// Specialization and push constants: shaders/abi/index_add.h. Grid-stride loop over the lines.
// The f64 module (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp) adds doubles.
// ferry-f64-ops: index_add scatter_add
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/index_add.h"  // spec and push constants, codes: shared with the host

FERRY_TENSOR(0, o)    // read and written
FERRY_TENSOR(1, s)
FERRY_TENSOR(2, idx)

uint offset_of(uint t, uvec4 c) {
  uvec4 st = p.stride[t];
  uint r = p.off[t];
  if (NDIM >= 1) r += c.x * st.x;
  if (NDIM >= 2) r += c.y * st.y;
  if (NDIM >= 3) r += c.z * st.z;
  if (NDIM >= 4) r += c.w * st.w;
  return r;
}

// Linear line index -> coordinates over the first NDIM dims (row-major).
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
  const uint grid = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint line = gl_GlobalInvocationID.x; line < p.lines; line += grid) {
    uvec4 c = coords_of(line);
    uint ob = offset_of(0, c), sb = offset_of(1, c), ib = offset_of(2, c);
    for (uint j = 0u; j < p.count; ++j) {
      uint ii = ib + j * p.index_step;
#ifdef FERRY_FULL
      int64_t v64 = idx_i64[ii] - int64_t(p.index_base);
      if (v64 < 0 || v64 >= int64_t(p.out_size)) continue;
      uint v = uint(v64);
#else
      // The i64 as two words, low first (little-endian); a valid index has a zero high word.
      uint lo = idx_u32[2u * ii];
      if (idx_u32[2u * ii + 1u] != 0u || lo < p.index_base || lo - p.index_base >= p.out_size)
        continue;
      uint v = lo - p.index_base;
#endif
      uint oi = ob + v * p.out_step, si = sb + j * p.src_step;
      if (IS_FLOAT_DT(DT)) {
        STORE_F(o, DT, oi, LOAD_F(o, DT, oi) + LOAD_F(s, DT, si))
      } else {
        STORE_I(o, DT, oi, LOAD_I(o, DT, oi) + LOAD_I(s, DT, si))
      }
    }
  }
}
