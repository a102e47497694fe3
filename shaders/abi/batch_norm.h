// shaders/abi/batch_norm.h — the interface of shaders/batch_norm.comp and
// runtime/vulkan/vk_kernels_batch_norm.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_BATCH_NORM_H
#define FERRY_SHADER_ABI_BATCH_NORM_H
#include "abi.h"

FERRY_CODE(BATCH_NORM_MODE_SUMS, 0)    // per channel and chunk of samples: two sums
FERRY_CODE(BATCH_NORM_MODE_FINISH, 1)  // per channel: the chunks merged, statistics, coefficients
FERRY_CODE(BATCH_NORM_MODE_APPLY, 2)   // per element: y or dx from the coefficients
FERRY_CODE(BATCH_NORM_SLOTS, 6)        // values per channel and chunk in the sums' scratch

#define FERRY_BATCH_NORM_SPEC(X)                                                \
  X(1, uint, DT, 0) /* x, y, g, dx, weight and bias (floating) */               \
  X(2, uint, MODE, 0)                                                           \
  X(3, bool, BACKWARD, false)                                                   \
  X(4, bool, TRAINING, true) /* batch statistics, or the running ones (eval) */ \
  X(5, bool, HAS_W, false)                                                      \
  X(6, bool, HAS_B, false)
FERRY_SPEC_CONSTANTS(BatchNormSpec, FERRY_BATCH_NORM_SPEC)

FERRY_PUSH_CONSTANTS(BatchNormParams) {
  uint off[8];      // the first element of each binding's tensor (batch_norm.comp's list)
  uint channels;    // C of the whole tensor: the [C] vectors' and scratches' length
  uint c0, part_c;  // the part's channels: [c0, c0 + part_c)
  uint samples;     // the part's samples
  uint area;        // elements of a channel in one sample (contiguous)
  uint chunk;       // MODE_SUMS: samples per chunk
  uint chunk0;      // MODE_SUMS: the part's first chunk in the scratch
  uint chunks;      // MODE_FINISH: the chunks in the scratch
  float eps;
  uint eps_bits[2];  // eps as a double's two words, for the f64 module
}
FERRY_END_PUSH_CONSTANTS(BatchNormParams)

#endif
