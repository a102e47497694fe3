// shaders/abi/softmax.h — the interface of shaders/softmax.comp and
// runtime/vulkan/vk_kernels_nn.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_SOFTMAX_H
#define FERRY_SHADER_ABI_SOFTMAX_H
#include "abi.h"

// softmax and log_softmax. A row in one workgroup is MODE_FULL; a row too long
// for one is cut into pieces: MODE_STATS writes each piece's (max, sum) pair,
// MODE_WRITE combines them and writes the piece's outputs.
FERRY_CODE(SOFTMAX_MODE_FULL, 0u)
FERRY_CODE(SOFTMAX_MODE_STATS, 1u)
FERRY_CODE(SOFTMAX_MODE_WRITE, 2u)

#define FERRY_SOFTMAX_SPEC(X)                                             \
  X(1, bool, LOG, false)      /* log_softmax */                           \
  X(2, uint, DT, 0)           /* x's and y's dtype (floating) */          \
  X(3, uint, MODE, 0)         /* SOFTMAX_MODE_* */                        \
  X(4, uint, ODIM, 0)         /* 0..4 outer (row-indexing) dims */        \
  X(5, uint, LANES, 1)        /* threads per row, a power of two <= WG */ \
  X(6, bool, ROW_FAST, false) /* the thread index runs along the rows */
FERRY_SPEC_CONSTANTS(SoftmaxSpec, FERRY_SOFTMAX_SPEC)

FERRY_PUSH_CONSTANTS(SoftmaxParams) {
  uint osize[4], xstride[4], ystride[4];  // outer dims, outermost first
  uint n, xs, ys;                         // row length, element stride in x and in y
  uint x_off, y_off, r_off;               // first element (float) in each binding
  uint n_rows, splits, chunk;             // rows; pieces per row; elements per piece
}
FERRY_END_PUSH_CONSTANTS(SoftmaxParams)

#endif
