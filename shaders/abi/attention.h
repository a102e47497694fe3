// shaders/abi/attention.h — the interface of shaders/attention.comp and
// runtime/vulkan/vk_kernels_attention.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_ATTENTION_H
#define FERRY_SHADER_ABI_ATTENTION_H
#include "abi.h"

// scaled_dot_product_attention and its backward (Note [Fused attention on Vulkan] in
// attention.comp). The forward is one dispatch (or SPLIT and COMBINE); the backward is three:
// STATS writes each query row's (logsumexp, rowsum(dO o O)) pair, DQ the query gradient, DKV
// the key and value ones.
FERRY_CODE(ATTN_MODE_FORWARD, 0u)
FERRY_CODE(ATTN_MODE_STATS, 1u)
FERRY_CODE(ATTN_MODE_DQ, 2u)
FERRY_CODE(ATTN_MODE_DKV, 3u)
// The forward of a few query rows, the keys split across workgroups (Note [Split-key attention
// on Vulkan] in attention.comp): SPLIT, then COMBINE where there is more than one split.
FERRY_CODE(ATTN_MODE_SPLIT, 4u)
FERRY_CODE(ATTN_MODE_COMBINE, 5u)

#define FERRY_ATTENTION_SPEC(X)                                                   \
  X(1, uint, DT, 0)         /* q, k, v, the mask, the outputs (floating) */       \
  X(2, uint, MODE, 0)       /* ATTN_MODE_* */                                     \
  X(3, uint, EC, 64)        /* head-dim elements of q and k a thread holds */     \
  X(4, uint, EVC, 64)       /* head-dim elements of v a thread holds */           \
  X(5, uint, BC, 16)        /* rows of a shared tile: keys, or queries in DKV */  \
  X(6, bool, CAUSAL, false) /* query i sees keys j <= i */                        \
  X(7, bool, MASK, false)   /* an additive mask is bound */
FERRY_SPEC_CONSTANTS(AttentionSpec, FERRY_ATTENTION_SPEC)

FERRY_PUSH_CONSTANTS(AttentionParams) {
  uint B, Hq, group;          // batch, query heads, query heads per key/value head
  uint L, S, E, EV;           // query rows, key rows, q/k head dim, v head dim
  uint mask_sb, mask_sh;      // the mask's stride per batch item and per head (0: broadcast)
  uint q_off, k_off, v_off;   // first element in each binding
  uint m_off, st_off, do_off; // the mask, the f32 row statistics, dO
  uint a_off, b_off;          // the slots 6 and 7 (Note [Fused attention on Vulkan])
  float scale;
  uint scale_bits[2];  // the scale as a double, for the f64 module
  uint splits, split_len;  // SPLIT, COMBINE: key splits per query row, and keys per split
  // DQ: the keys [range_begin, range_end) only, DKV the query rows; with accumulate, each
  // gradient added to what the slot holds (Note [Loop budget] in runtime/vulkan/vk_kernels.hpp).
  uint range_begin, range_end, accumulate;
}
FERRY_END_PUSH_CONSTANTS(AttentionParams)

#endif
