// shaders/abi/conv.h — the interface of shaders/conv.comp and
// runtime/vulkan/vk_kernels_conv.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_CONV_H
#define FERRY_SHADER_ABI_CONV_H
#include "abi.h"

// What a dispatch computes (MODE), and what its bindings 0 (written), 1, 2 and 3 are:
FERRY_CODE(CONV_FORWARD, 0u)          // y; x, w, bias (w again without HAS_BIAS)
FERRY_CODE(CONV_BACKWARD_INPUT, 1u)   // gx; gy, w
FERRY_CODE(CONV_BACKWARD_WEIGHT, 2u)  // gw (or parts of it, below); x, gy
FERRY_CODE(CONV_SUM_PARTS, 3u)        // gw or gb; its part0 parts of jlen elements each
FERRY_CODE(CONV_BIAS_GRAD, 4u)        // gb (or parts); gy
FERRY_CODE(CONV_DIRECT_FORWARD, 5u)       // the direct kernels (no GEMM tiles), bound as the
FERRY_CODE(CONV_DIRECT_BACKWARD_INPUT, 6u)   // modes above
FERRY_CODE(CONV_DIRECT_BACKWARD_WEIGHT, 7u)  // gw (or parts); x, gy
// The sums over the batch (CONV_BACKWARD_WEIGHT, CONV_BIAS_GRAD, CONV_DIRECT_BACKWARD_WEIGHT) write
// their result straight to binding 0 when part0 is CONV_NO_PARTS; otherwise they write part
// part0 + (gl_WorkGroupID.z / G) of a buffer of parts in the compute type (f32, or f64 in the
// f64 module), each as long as the result, which CONV_SUM_PARTS adds up in order. With
// ACCUMULATE, what they write to binding 0 is added to what it held, read through binding 3
// (the same range, bound for reading so that the host's barriers see the read).
FERRY_CODE(CONV_NO_PARTS, 0xffffffffu)

// The workgroup size (constant 0) is (BN / TN) * (BM / TM) for the GEMM modes (0-2), and at
// most 2 * BK * (BM / 4 + 1) * 4 for the others (their reductions use the shared A slices).
#define FERRY_CONV_SPEC(X)                                                   \
  X(1, uint, DT, DT_F32)                                                     \
  X(2, uint, BM, 64) /* the GEMM tile, as in matmul.h */                     \
  X(3, uint, BN, 64)                                                         \
  X(4, uint, BK, 8)                                                          \
  X(5, uint, TM, 4)                                                          \
  X(6, uint, TN, 4)                                                          \
  X(7, bool, A_MFAST, false)                                                 \
  X(8, bool, B_KFAST, false)                                                 \
  X(9, uint, MODE, CONV_FORWARD)                                             \
  X(10, bool, HAS_BIAS, false) /* CONV_FORWARD, CONV_DIRECT_FORWARD add binding 3 */ \
  X(11, bool, ACCUMULATE, false)
FERRY_SPEC_CONSTANTS(ConvSpec, FERRY_CONV_SPEC)

// The geometry is the CPU kernel's: three spatial dims, leading ones of size 1 for conv1d/2d.
FERRY_PUSH_CONSTANTS(ConvParams) {
  uint N, C, OC, G;  // batch, input and output channels, groups
  uint isz[3], osz[3], ksz[3];  // input, output and kernel sizes
  uint stride[3], pad[3], dil[3];  // pad: the low side's
  uint off0, off1, off2, off3;  // each binding's tensor's element 0 within the binding
  uint jlen;  // CONV_BACKWARD_WEIGHT: its sum over (sample, position) in pieces of jlen terms;
              // CONV_SUM_PARTS: the elements of the result; CONV_FORWARD and
              // CONV_BACKWARD_INPUT: 0, or only the sums' terms k_begin .. k_begin + jlen - 1
              // (the host's cut for the loop budget; with ACCUMULATE, added to binding 3)
  uint part0;  // the first part this dispatch writes, or CONV_NO_PARTS (CONV_SUM_PARTS: parts)
  uint m_tile0, n_tile0;  // added to gl_WorkGroupID (y, x)
  uint k_begin;  // see jlen
}
FERRY_END_PUSH_CONSTANTS(ConvParams)

#endif
