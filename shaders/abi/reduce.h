// shaders/abi/reduce.h — the interface of shaders/reduce.comp and
// runtime/vulkan/vk_kernels_reduce.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_REDUCE_H
#define FERRY_SHADER_ABI_REDUCE_H
#include "abi.h"

// MODE_DIRECT does a row in one workgroup. A long row is cut into pieces:
// MODE_PARTIAL writes one record (4 words) per (piece, output), MODE_FINAL
// combines each output's records, and MODE_COMBINE merges groups of records
// into records when there are too many for one pass.
FERRY_CODE(REDUCE_MODE_DIRECT, 0u)
FERRY_CODE(REDUCE_MODE_PARTIAL, 1u)
FERRY_CODE(REDUCE_MODE_FINAL, 2u)
FERRY_CODE(REDUCE_MODE_COMBINE, 3u)

#define FERRY_REDUCE_SPEC(X)                                                    \
  X(1, uint, OP, 0)           /* OpId: OP_SUM, OP_MAX, OP_MIN, OP_ARGMAX */     \
  X(2, uint, IN_DT, 0)        /* the input's dtype (also in MODE_FINAL) */      \
  X(3, uint, OUT_DT, 0)       /* the output's dtype (unused by MODE_PARTIAL) */ \
  X(4, uint, MODE, 0)         /* REDUCE_MODE_* */                               \
  X(5, uint, KDIM, 0)         /* 0..4 kept (output) dims */                     \
  X(6, uint, RDIM, 1)         /* 1..8 reduced dims */                           \
  X(7, uint, LANES, 1)        /* threads per row, a power of two <= WG */       \
  X(8, bool, ROW_FAST, false) /* the thread index runs along the rows */
FERRY_SPEC_CONSTANTS(ReduceSpec, FERRY_REDUCE_SPEC)

FERRY_PUSH_CONSTANTS(ReduceParams) {
  uint ksize[4], kstride[4];  // kept dims, outermost first
  uint rsize[8], rstride[8];  // reduced dims, outermost first
  uint in_off, out_off;       // first element in its binding (word, for records)
  uint n_out;                 // outputs
  uint n_red;                 // elements per row (records per output in MODE_FINAL/COMBINE)
  uint splits;                // pieces a row is cut into (MODE_PARTIAL; else 1)
  uint chunk;                 // elements per piece
  uint first;                 // position of the view's first element in its row (argmax)
}
FERRY_END_PUSH_CONSTANTS(ReduceParams)

#endif
