// shaders/abi/layer_norm_backward.h — the interface of shaders/layer_norm_backward.comp and
// runtime/vulkan/vk_kernels_nn.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_LAYER_NORM_BACKWARD_H
#define FERRY_SHADER_ABI_LAYER_NORM_BACKWARD_H
#include "abi.h"

#define FERRY_LAYER_NORM_BACKWARD_SPEC(X)                                               \
  X(1, uint, DT, 0) /* g, x, dx and weight (floating) */                                \
  X(2, bool, HAS_W, false)                                                              \
  X(3, uint, LANES, 1) /* threads per row (MODE 0), a power of two <= WG */             \
  X(4, uint, MODE, 0)  /* 0: dx over the rows; 1: dweight and dbias down the columns in \
                          chunks of rows; 2: the chunks' sums combined */               \
  X(5, uint, COLS, 32) /* MODE 1: columns a workgroup takes, a power of two <= WG */
FERRY_SPEC_CONSTANTS(LayerNormBackwardSpec, FERRY_LAYER_NORM_BACKWARD_SPEC)

FERRY_PUSH_CONSTANTS(LayerNormBackwardParams) {
  uint g_off, x_off, dx_off, m_off, r_off, w_off, dw_off, db_off;  // first element in each binding
  uint rows, n;
  uint gs0, gs1, xs0, xs1, dxs0, dxs1;  // row and element strides of g, x and dx
  uint ms, rs, ws, dws, dbs;            // strides of mean, rstd, weight, dweight, dbias
  uint accumulate;          // MODES 1, 2: add to dweight and dbias (a later part of a split)
  uint chunks, chunk_rows;  // MODE 1's chunks of rows (its grid's y) and rows in each
  uint s_off;               // MODES 1, 2: the scratch's first element in its binding
}
FERRY_END_PUSH_CONSTANTS(LayerNormBackwardParams)

#endif
