// ferry/nn/attention.hpp — attention: scaled_dot_product_attention (PyTorch's
// F.scaled_dot_product_attention). The design is in Note [Scaled dot-product attention] in
// runtime/nn/attention.cpp.
#pragma once

#include <optional>

#include "ferry/tensor.hpp"

namespace ferry::nn::functional {

// softmax(query · keyᵀ · scale + bias) · value over the last two dims, PyTorch's semantics:
// - query [..., L, E], key [..., S, E], value [..., S, Ev] of one floating dtype and device;
//   the result is [..., L, Ev]. The leading dims broadcast (as matmul's do).
// - attn_mask, broadcastable to [..., L, S]: bool (true: the key takes part) or of the query's
//   dtype (added to the scores). A query row whose keys are all masked out gives zeros (and
//   zero gradients), as PyTorch's since 2.5.
// - is_causal: query i sees keys j <= i (the top-left aligned lower triangle); an Error with
//   attn_mask too.
// - dropout_p: the probabilities' dropout (always applied when > 0, as in PyTorch: pass 0 in
//   evaluation).
// - scale: 1 / sqrt(E) unless given.
// - enable_gqa: grouped-query attention, the query heads (dim -3) in groups of
//   Hq / Hk per key/value head; ShapeError unless Hk divides Hq.
// Runs as the device's fused kernel where there is one (the CPU's: it never holds the L×S
// score matrix, and has a fused backward), else as the composition of matmul and softmax.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

// Rotary position embedding (RoPE, Su et al. 2021) in the rotate-half form of GPT-NeoX and
// Hugging Face's Llama: dims i and i + D/2 of a head form a pair, rotated by position · θ_i with
// θ_i = base^(-2i / D). rotary_tables makes the cos and sin of every angle, [positions, D]
// (each θ_i for both halves), computed in double and stored in options' dtype (f32 unless
// given); apply_rotary rotates x [..., L, D] by the tables' rows [offset, offset + L) (offset:
// the position of x's first row, a KV cache's length when generating). ShapeError for an odd
// or mismatched D or rows past the tables.
struct RotaryTables {
  Tensor cos, sin;
};
RotaryTables rotary_tables(std::int64_t head_dim, std::int64_t positions, double base = 10000.0,
                           const TensorOptions& options = {});
Tensor apply_rotary(const Tensor& x, const RotaryTables& tables, std::int64_t offset = 0);

}  // namespace ferry::nn::functional
