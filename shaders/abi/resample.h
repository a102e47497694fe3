// shaders/abi/resample.h — the interface of shaders/resample.comp and
// runtime/vulkan/vk_kernels_resample.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_RESAMPLE_H
#define FERRY_SHADER_ABI_RESAMPLE_H
#include "abi.h"

// What a dispatch computes (MODE); bindings: 0 written, 1 read, 2 and 3 the rows' indices
// (i64) and weights (the compute type: f64 for f64, else f32), 4 and 5 the columns', 6 the
// ranges (RESAMPLE_RANGES' output; binding 1's tensor otherwise):
FERRY_CODE(RESAMPLE, 0u)           // y; x
FERRY_CODE(RESAMPLE_RANGES, 1u)    // the ranges; (the ranges)
FERRY_CODE(RESAMPLE_BACKWARD, 2u)  // dx; g, and binding 6 the ranges
// The most taps a dispatch takes along a dim (bicubic's 4): the backward keeps each column
// tap's range of outputs in registers.
FERRY_CODE(RESAMPLE_MAX_TAPS, 4u)

// The taps are constants so that the shader's loops over them unroll.
#define FERRY_RESAMPLE_SPEC(X)                            \
  X(1, uint, DT, 0) /* x and y, g and dx (floating) */    \
  X(2, uint, MODE, RESAMPLE)                              \
  X(3, uint, TAPS_H, 1) /* the tables' taps: the rows' */ \
  X(4, uint, TAPS_W, 1) /* and the columns' (RESAMPLE_MAX_TAPS at most) */
FERRY_SPEC_CONSTANTS(ResampleSpec, FERRY_RESAMPLE_SPEC)

FERRY_PUSH_CONSTANTS(ResampleParams) {
  uint off[7];        // the first element of each binding's tensor
  uint planes;        // the part's planes (a sample's channel each)
  uint h, w, oh, ow;  // the input's and the output's plane
}
FERRY_END_PUSH_CONSTANTS(ResampleParams)

#endif
