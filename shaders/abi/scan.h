// shaders/abi/scan.h — the interface of shaders/scan.comp (cumsum, cumprod,
// cummax, cummin) and runtime/vulkan/vk_kernels_sort.cpp (Note [Shader
// interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_SCAN_H
#define FERRY_SHADER_ABI_SCAN_H
#include "abi.h"

// SCAN_MODE_LINES: a thread per line, along it in order. SCAN_MODE_ROW: a
// workgroup per line, each thread a contiguous piece (a long line, few lines).
// The CHUNK modes, three dispatches, for a few very long lines: each line is
// cut into chunks of p.chunk elements; CHUNK_STATES folds each chunk (a
// workgroup each) into its state in the states binding, CHUNK_PREFIX turns
// each line's chunk states into the states before each chunk (a workgroup per
// line), CHUNK_APPLY scans each chunk from that state, writing.
FERRY_CODE(SCAN_MODE_LINES, 0u)
FERRY_CODE(SCAN_MODE_ROW, 1u)
FERRY_CODE(SCAN_MODE_CHUNK_STATES, 2u)
FERRY_CODE(SCAN_MODE_CHUNK_PREFIX, 3u)
FERRY_CODE(SCAN_MODE_CHUNK_APPLY, 4u)
FERRY_CODE(SCAN_STATE_WORDS, 7u)  // a state in the states binding: hi, lo, iv (2 words each), idx

#define FERRY_SCAN_SPEC(X)                                                      \
  X(1, uint, OP, 0)     /* OpId: OP_CUMSUM, OP_CUMPROD, OP_CUMMAX, OP_CUMMIN */ \
  X(2, uint, IN_DT, 0)  /* x's dtype */                                         \
  X(3, uint, OUT_DT, 0) /* the values' dtype */                                 \
  X(4, uint, MODE, 0)   /* SCAN_MODE_* */
FERRY_SPEC_CONSTANTS(ScanSpec, FERRY_SCAN_SPEC)

FERRY_PUSH_CONSTANTS(ScanParams) {
  uint outer, inner, n;        // lines are (outer, inner) pairs of n elements each
  uint s_outer, s_inner, s_n;  // their strides, the same in every tensor (elements)
  uint x_off, y_off, i_off;    // first element in each binding (i_off: i64 elements)
  uint chunk, chunks;          // CHUNK modes: elements per chunk, chunks per line
}
FERRY_END_PUSH_CONSTANTS(ScanParams)

#endif
