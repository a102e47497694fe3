// ferry/nn/transformer.hpp — the attention layers: MultiheadAttention,
// TransformerEncoderLayer and TransformerDecoderLayer, as PyTorch's, with its
// parameter names (in_proj_weight, out_proj.weight, self_attn.*, linear1, norm1,
// ...), so a PyTorch state_dict loads as is. Attention runs through
// nn::functional::scaled_dot_product_attention (ferry/nn/attention.hpp), the
// device's fused kernel where it has one, except where the attention weights are
// asked for (need_weights), which the fused kernel never forms.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ferry/nn/container.hpp"
#include "ferry/nn/layers.hpp"
#include "ferry/nn/module.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn {

// Options of MultiheadAttention (PyTorch's keyword arguments; kdim = vdim = embed_dim, no
// add_bias_kv or add_zero_attn).
struct MultiheadAttentionOptions {
  double dropout = 0.0;      // on the attention weights, in training
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // [N, L, E] instead of [L, N, E]
};

// The arguments of MultiheadAttention::forward beside query, key and value; the masks'
// conventions are PyTorch's and the opposite of scaled_dot_product_attention's for bools.
struct AttentionMasks {
  // [N, S]: a bool true leaves the key out; a float is added to the scores.
  Tensor key_padding_mask;
  // [L, S] or [N · num_heads, L, S]: a bool true forbids the pair; a float is added.
  Tensor attn_mask;
  // Query i sees keys j <= i (when attn_mask is undefined; with one, a hint, as in PyTorch).
  bool is_causal = false;
};

// Multi-head attention (torch.nn.MultiheadAttention): in_proj_weight [3E, E] (q, k and v
// stacked, Xavier-uniform), in_proj_bias [3E] (zeros), out_proj (Linear E -> E, bias zeros).
// forward takes query [L, N, E] (or [N, L, E] with batch_first, or unbatched [L, E]), key and
// value [S, N, E] and returns the output (query's layout) and, with need_weights, the
// attention weights [N, L, S] averaged over the heads ([N, H, L, S] without
// average_attn_weights; [L, S] or [H, L, S] unbatched), else an undefined tensor.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads,
                     const MultiheadAttentionOptions& options = {},
                     const TensorOptions& tensor_options = {});
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionMasks& masks = {}, bool need_weights = true,
                                    bool average_attn_weights = true);
  std::string extra_repr() const override;

  std::int64_t embed_dim, num_heads, head_dim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

// Options of the Transformer layers (PyTorch's keyword arguments).
struct TransformerLayerOptions {
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  // pre-norm (x + f(norm(x))) instead of post-norm (norm(x + f(x)))
  bool bias = true;
};

// torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block (linear1,
// activation, dropout, linear2), each with its residual and LayerNorm (norm1, norm2) and
// dropout (dropout1, dropout2). src [L, N, E] ([N, L, E] with batch_first, or [L, E]).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead,
                          const TransformerLayerOptions& options = {},
                          const TensorOptions& tensor_options = {});
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const AttentionMasks& src_masks);

  TransformerLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
};

// torch.nn.TransformerDecoderLayer: self-attention (self_attn), attention over the encoder's
// output (multihead_attn) and the feed-forward block, with norm1..3 and dropout1..3.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(std::int64_t d_model, std::int64_t nhead,
                          const TransformerLayerOptions& options = {},
                          const TensorOptions& tensor_options = {});
  Tensor forward(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                 const AttentionMasks& memory_masks = {});

  TransformerLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
};

// torch.nn.TransformerEncoder: num_layers copies of `layer` (in "layers", a ModuleList: state
// names "layers.0.self_attn.in_proj_weight", ...), each starting with the layer's values as
// PyTorch's deep copies do, applied in turn, then `norm` where given ("norm.weight", ...).
// The copies are new modules on the layer's device and in its dtype; `layer` itself is not
// part of the stack.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const AttentionMasks& src_masks);

  std::int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // null without one
};

// torch.nn.TransformerDecoder: the same for TransformerDecoderLayer.
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayer& layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                 const AttentionMasks& memory_masks = {});

  std::int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;
};

// torch.nn.Transformer: a TransformerEncoder of num_encoder_layers layers and a
// TransformerDecoder of num_decoder_layers, each ending in a LayerNorm ("encoder.norm",
// "decoder.norm"), and every parameter of more than one dim re-drawn Xavier-uniform, as
// PyTorch's _reset_parameters. forward(src, tgt): the encoder's output is the decoder's memory.
// src [S, N, E] and tgt [T, N, E] ([N, S, E] and [N, T, E] with batch_first; or unbatched
// [S, E], [T, E]); ShapeError when their batch sizes or feature sizes are not d_model's.
class Transformer : public Module {
 public:
  explicit Transformer(std::int64_t d_model = 512, std::int64_t nhead = 8,
                       std::int64_t num_encoder_layers = 6, std::int64_t num_decoder_layers = 6,
                       const TransformerLayerOptions& options = {},
                       const TensorOptions& tensor_options = {});
  using Module::forward;
  Tensor forward(const Tensor& src, const Tensor& tgt, const AttentionMasks& src_masks = {},
                 const AttentionMasks& tgt_masks = {}, const AttentionMasks& memory_masks = {});
  // [sz, sz] of `options`' floating dtype: -inf above the diagonal, 0 on and below it (the
  // causal mask a decoder's tgt_mask takes).
  static Tensor generate_square_subsequent_mask(std::int64_t sz, const TensorOptions& options = {});

  std::int64_t d_model, nhead;
  bool batch_first;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

}  // namespace ferry::nn
