// shaders/abi/matmul.h — the interface of shaders/matmul.comp and
// runtime/vulkan/vk_kernels_linalg.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_MATMUL_H
#define FERRY_SHADER_ABI_MATMUL_H
#include "abi.h"

// The workgroup size (constant 0) is (BN / TN) * (BM / TM).
#define FERRY_MATMUL_SPEC(X)                                                \
  X(1, uint, DT, DT_F32)                                                    \
  X(2, uint, BM, 64) /* the workgroup's tile: BM x BN of C */               \
  X(3, uint, BN, 64)                                                        \
  X(4, uint, BK, 8) /* K per shared-memory slice */                         \
  X(5, uint, TM, 4) /* a thread's tile: TM x TN */                          \
  X(6, uint, TN, 4)                                                         \
  X(7, bool, A_MFAST, false)    /* A's m stride is 1 (else its k stride) */ \
  X(8, bool, B_KFAST, false)    /* B's k stride is 1 (else its n stride) */ \
  X(9, bool, ACCUMULATE, false) /* C = cin + A B (binding 3) */                     \
  X(10, bool, SMALL, false) /* a thread per element of C: tiny products (no tile) */
FERRY_SPEC_CONSTANTS(MatmulSpec, FERRY_MATMUL_SPEC)

FERRY_PUSH_CONSTANTS(MatmulParams) {
  uint M, N, K;
  uint c_off, a_off, b_off;  // each tensor's element 0 within its binding
  uint sc_b, sc_m;           // C's batch and row strides (its column stride is 1)
  uint sa_b, sa_m, sa_k;
  uint sb_b, sb_k, sb_n;
  uint m_tile0, n_tile0, batch0;  // added to gl_WorkGroupID (y, x, z); SMALL: batch0 is the
                                  // first element of C ([B, M, N] in order) of the grid
  uint elements;                  // SMALL: C's elements ([B, M, N]) the call covers
}
FERRY_END_PUSH_CONSTANTS(MatmulParams)

#endif
