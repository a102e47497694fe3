// shaders/abi/matvec.h — the interface of shaders/matvec.comp and
// runtime/vulkan/vk_kernels_matvec.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_MATVEC_H
#define FERRY_SHADER_ABI_MATVEC_H
#include "abi.h"

// A workgroup's threads (constant 0) are a power of two up to MATVEC_WG; its ROWS x S sums
// are reduced through MATVEC_SLOTS x MATVEC_WG shared floats.
FERRY_CODE(MATVEC_WG, 64u)
FERRY_CODE(MATVEC_SLOTS, 64u)  // ROWS * S <= 64

#define FERRY_MATVEC_SPEC(X)                                                         \
  X(1, uint, DT, DT_F32)   /* every tensor's dtype: f32, f16 or bf16 */              \
  X(2, uint, S, 1)         /* vectors, 1..8 */                                       \
  X(3, uint, ROWS, 1)      /* weight rows per workgroup; ROWS * S <= MATVEC_SLOTS */ \
  X(4, bool, W_VEC, false) /* the weight's rows start at multiples of 8 elements */  \
  X(5, bool, X_VEC, false) /* the vectors too, and are contiguous in k */           \
  X(6, bool, ACCUMULATE, false) /* c += the products (binding 3: c, read) */         \
  X(7, bool, ALONG_G, false) /* the weight's K rows are contiguous in g: 8 columns a thread */
FERRY_SPEC_CONSTANTS(MatvecSpec, FERRY_MATVEC_SPEC)

FERRY_PUSH_CONSTANTS(MatvecParams) {
  uint G, K;                 // weight rows, their length
  uint c_off, w_off, x_off;  // each tensor's element 0 within its binding
  uint w_batch, w_row, w_k;  // the weight's strides (w_k 1, or w_row 1 with ALONG_G)
  uint x_batch, x_s, x_k;    // the vectors'
  uint c_batch, c_s, c_g;    // where c[s][g] goes
  uint group0, batch0;       // added to gl_WorkGroupID (x, y)
}
FERRY_END_PUSH_CONSTANTS(MatvecParams)

#endif
