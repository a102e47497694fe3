// runtime/nn/transformer.cpp — MultiheadAttention and the Transformer layers
// (ferry/nn/transformer.hpp), as PyTorch's torch/nn/modules/activation.py and
// transformer.py compute them.
#include "ferry/nn/transformer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ferry/error.hpp"
#include "ferry/nn/attention.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/init.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn {

using detail::check_size;
using detail::param_options;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A mask as scores to add: a bool true becomes -inf (PyTorch's MultiheadAttention leaves out
// what is true), a float stays.
Tensor additive(const Tensor& m, const Tensor& like) {
  if (m.dtype() != DType::boolean) return m.to(like.dtype());
  return masked_fill(zeros(m.sizes(), {like.dtype(), like.device()}), m, -kInf);
}

// attn_mask and key_padding_mask as one additive mask [1 or N, 1 or H, L, S], or undefined.
Tensor combined_mask(const AttentionMasks& masks, bool batched, std::int64_t N, std::int64_t H,
                     std::int64_t L, std::int64_t S, const Tensor& like) {
  Tensor mask;
  if (masks.attn_mask.defined()) {
    const Tensor& a = masks.attn_mask;
    if (a.sizes() == Shape{L, S})
      mask = additive(a, like).reshape({1, 1, L, S});
    else if (a.sizes() == Shape{N * H, L, S})
      mask = additive(a, like).reshape({N, H, L, S});
    else
      throw ShapeError(fmt::format(
          "MultiheadAttention: attn_mask must be [L, S] = [{}, {}] or [N * num_heads, L, S] = "
          "[{}, {}, {}], got {}",
          L, S, N * H, L, S, shape_str(a.sizes())));
  }
  if (masks.key_padding_mask.defined()) {
    const Tensor& k = masks.key_padding_mask;
    const Shape want = batched ? Shape{N, S} : Shape{S};
    if (k.sizes() != want)
      throw ShapeError(fmt::format("MultiheadAttention: key_padding_mask must be {}, got {}",
                                   shape_str(want), shape_str(k.sizes())));
    const Tensor kp = additive(k, like).reshape({N, 1, 1, S});
    mask = mask.defined() ? mask + kp : kp;
  }
  return mask;
}

}  // namespace

// ---------------------------------------------------------------- MultiheadAttention

MultiheadAttention::MultiheadAttention(std::int64_t embed_dim_, std::int64_t num_heads_,
                                       const MultiheadAttentionOptions& options_,
                                       const TensorOptions& tensor_options)
    : embed_dim(embed_dim_), num_heads(num_heads_), head_dim(0), options(options_) {
  check_size("MultiheadAttention", "embed_dim", embed_dim);
  check_size("MultiheadAttention", "num_heads", num_heads);
  if (embed_dim % num_heads != 0)
    throw ValueError(
        fmt::format("MultiheadAttention: embed_dim {} must be divisible by "
                    "num_heads {}",
                    embed_dim, num_heads));
  if (!(options.dropout >= 0.0 && options.dropout <= 1.0))
    throw ValueError(
        fmt::format("MultiheadAttention: dropout must be in [0, 1], got {}", options.dropout));
  head_dim = embed_dim / num_heads;
  const TensorOptions o = param_options("MultiheadAttention", tensor_options);
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}, o));
  init::xavier_uniform_(in_proj_weight);
  if (options.bias) {
    in_proj_bias = register_parameter("in_proj_bias", zeros({3 * embed_dim}, o));
  }
  out_proj =
      register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, options.bias, o));
  if (options.bias) init::zeros_(out_proj->bias);
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                      const Tensor& value,
                                                      const AttentionMasks& masks,
                                                      bool need_weights,
                                                      bool average_attn_weights) {
  for (const Tensor* t : {&query, &key, &value})
    if (!t->defined()) throw Error("MultiheadAttention.forward: query, key and value are needed");
  const bool batched = query.dim() == 3;
  if ((query.dim() != 2 && !batched) || key.dim() != query.dim() || value.dim() != query.dim() ||
      query.size(-1) != embed_dim || key.size(-1) != embed_dim || value.size(-1) != embed_dim)
    throw ShapeError(fmt::format(
        "MultiheadAttention(embed_dim={}): query, key and value must be [L, N, {}] ([N, L, {}] "
        "with batch_first, or unbatched [L, {}]), got {}, {} and {}",
        embed_dim, embed_dim, embed_dim, embed_dim, shape_str(query.sizes()),
        shape_str(key.sizes()), shape_str(value.sizes())));
  // Every input as [N, L, E].
  auto nle = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(0);
    return options.batch_first ? t : t.transpose(0, 1);
  };
  const Tensor q_in = nle(query), k_in = nle(key), v_in = nle(value);
  const std::int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1), H = num_heads;
  if (k_in.size(0) != N || v_in.size(0) != N || v_in.size(1) != S)
    throw ShapeError(fmt::format(
        "MultiheadAttention: key and value must have the query's batch and one length, got "
        "query {}, key {}, value {}",
        shape_str(query.sizes()), shape_str(key.sizes()), shape_str(value.sizes())));
  const std::vector<Tensor> w = chunk(in_proj_weight, 3, 0);
  const std::vector<Tensor> b =
      in_proj_bias.defined() ? chunk(in_proj_bias, 3, 0) : std::vector<Tensor>(3);
  // [N, rows, E] -> [N, H, rows, head_dim]
  auto heads = [&](const Tensor& t, std::size_t i) {
    return functional::linear(t, w[i], b[i]).reshape({N, t.size(1), H, head_dim}).transpose(1, 2);
  };
  const Tensor q = heads(q_in, 0), k = heads(k_in, 1), v = heads(v_in, 2);
  Tensor mask = combined_mask(masks, batched, N, H, L, S, q);
  const bool causal = masks.is_causal && !masks.attn_mask.defined();
  const double p = is_training() ? options.dropout : 0.0;
  Tensor out, weights;
  if (need_weights) {
    // The weights themselves are asked for: the composition, which forms them.
    Tensor s = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim)));
    if (causal)
      s = masked_fill(s, logical_not(tril(full({L, S}, true, {DType::boolean, q.device()}))),
                      -kInf);
    if (mask.defined()) s = s + mask;
    Tensor attn = softmax(s, -1);
    if (p > 0) attn = functional::dropout(attn, p, true);
    out = matmul(attn, v);
    weights = average_attn_weights ? mean(attn, {1}) : attn;
    if (!batched) weights = weights.squeeze(0);
  } else {
    out = functional::scaled_dot_product_attention(q, k, v, mask, p, causal);
  }
  out = out_proj->forward(out.transpose(1, 2).reshape({N, L, embed_dim}));
  if (!batched)
    out = out.squeeze(0);
  else if (!options.batch_first)
    out = out.transpose(0, 1);
  return {out, weights};
}

std::string MultiheadAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, dropout={}, batch_first={}", embed_dim, num_heads,
                     options.dropout, detail::bool_str(options.batch_first));
}

// ---------------------------------------------------------------- the Transformer layers

namespace {

// The feed-forward block: linear2(dropout(activation(linear1(x)))).
Tensor feed_forward(const std::string& activation, Linear& linear1, Dropout& dropout,
                    Linear& linear2, const Tensor& x) {
  const Tensor h = linear1.forward(x);
  return linear2.forward(dropout.forward(activation == "gelu" ? gelu(h) : relu(h)));
}

// One residual block around f: x + f(norm(x)) with norm_first (pre-norm), else norm(x + f(x)).
template <typename F>
Tensor residual(bool norm_first, LayerNorm& norm, const Tensor& x, const F& f) {
  return norm_first ? x + f(norm.forward(x)) : norm.forward(x + f(x));
}

void check_layer(std::string_view layer, std::int64_t d_model, const TransformerLayerOptions& o) {
  check_size(layer, "d_model", d_model);
  check_size(layer, "dim_feedforward", o.dim_feedforward);
  if (o.activation != "relu" && o.activation != "gelu")
    throw ValueError(fmt::format("{}: activation must be \"relu\" or \"gelu\", got \"{}\"", layer,
                                 o.activation));
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead,
                                                 const TransformerLayerOptions& options_,
                                                 const TensorOptions& t)
    : options(options_) {
  check_layer("TransformerEncoderLayer", d_model, options);
  const MultiheadAttentionOptions mha{options.dropout, options.bias, options.batch_first};
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, mha, t));
  linear1 = register_module(
      "linear1", std::make_shared<Linear>(d_model, options.dim_feedforward, options.bias, t));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 = register_module(
      "linear2", std::make_shared<Linear>(options.dim_feedforward, d_model, options.bias, t));
  for (auto* norm : {&norm1, &norm2})
    *norm = register_module(
        norm == &norm1 ? "norm1" : "norm2",
        std::make_shared<LayerNorm>(Shape{d_model}, options.layer_norm_eps, true, options.bias, t));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, {}); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const AttentionMasks& masks) {
  auto sa = [&](const Tensor& x) {
    return dropout1->forward(self_attn->forward(x, x, x, masks, false).first);
  };
  auto ff = [&](const Tensor& x) {
    return dropout2->forward(feed_forward(options.activation, *linear1, *dropout, *linear2, x));
  };
  return residual(options.norm_first, *norm2, residual(options.norm_first, *norm1, src, sa), ff);
}

TransformerDecoderLayer::TransformerDecoderLayer(std::int64_t d_model, std::int64_t nhead,
                                                 const TransformerLayerOptions& options_,
                                                 const TensorOptions& t)
    : options(options_) {
  check_layer("TransformerDecoderLayer", d_model, options);
  const MultiheadAttentionOptions mha{options.dropout, options.bias, options.batch_first};
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, mha, t));
  multihead_attn = register_module("multihead_attn",
                                   std::make_shared<MultiheadAttention>(d_model, nhead, mha, t));
  linear1 = register_module(
      "linear1", std::make_shared<Linear>(d_model, options.dim_feedforward, options.bias, t));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 = register_module(
      "linear2", std::make_shared<Linear>(options.dim_feedforward, d_model, options.bias, t));
  const char* names[] = {"norm1", "norm2", "norm3"};
  std::shared_ptr<LayerNorm>* norms[] = {&norm1, &norm2, &norm3};
  for (int i = 0; i < 3; ++i)
    *norms[i] = register_module(
        names[i],
        std::make_shared<LayerNorm>(Shape{d_model}, options.layer_norm_eps, true, options.bias, t));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const AttentionMasks& tgt_masks,
                                        const AttentionMasks& memory_masks) {
  if (!memory.defined()) throw Error("TransformerDecoderLayer.forward: memory is undefined");
  auto sa = [&](const Tensor& x) {
    return dropout1->forward(self_attn->forward(x, x, x, tgt_masks, false).first);
  };
  auto mha = [&](const Tensor& x) {
    return dropout2->forward(multihead_attn->forward(x, memory, memory, memory_masks, false).first);
  };
  auto ff = [&](const Tensor& x) {
    return dropout3->forward(feed_forward(options.activation, *linear1, *dropout, *linear2, x));
  };
  const bool nf = options.norm_first;
  return residual(nf, *norm3, residual(nf, *norm2, residual(nf, *norm1, tgt, sa), mha), ff);
}

namespace {

// n new layers with the prototype's sizes, options, device and dtype, each loaded with the
// prototype's values and in its training mode: what PyTorch's _get_clones (deep copies) gives.
template <class Layer>
std::shared_ptr<ModuleList> clones(const char* what, const Layer& layer, std::int64_t n) {
  if (n < 1) throw ValueError(fmt::format("{}: num_layers must be at least 1, got {}", what, n));
  const Tensor& w = layer.self_attn->in_proj_weight;
  const TensorOptions t{.dtype = w.dtype(), .device = w.device()};
  const StateDict values = layer.state_dict();
  auto list = std::make_shared<ModuleList>();
  for (std::int64_t i = 0; i < n; ++i) {
    auto copy = std::make_shared<Layer>(layer.self_attn->embed_dim, layer.self_attn->num_heads,
                                        layer.options, t);
    copy->load_state_dict(values);
    copy->train(layer.is_training());
    list->push_back(copy);
  }
  return list;
}

}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t n,
                                       std::shared_ptr<LayerNorm> norm_)
    : num_layers(n) {
  layers = register_module("layers", clones("TransformerEncoder", layer, n));
  if (norm_) norm = register_module("norm", std::move(norm_));
}

Tensor TransformerEncoder::forward(const Tensor& src) { return forward(src, {}); }

Tensor TransformerEncoder::forward(const Tensor& src, const AttentionMasks& masks) {
  Tensor x = src;
  for (const auto& m : *layers) x = static_cast<TransformerEncoderLayer&>(*m).forward(x, masks);
  return norm ? norm->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& layer, std::int64_t n,
                                       std::shared_ptr<LayerNorm> norm_)
    : num_layers(n) {
  layers = register_module("layers", clones("TransformerDecoder", layer, n));
  if (norm_) norm = register_module("norm", std::move(norm_));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory,
                                   const AttentionMasks& tgt_masks,
                                   const AttentionMasks& memory_masks) {
  Tensor x = tgt;
  for (const auto& m : *layers)
    x = static_cast<TransformerDecoderLayer&>(*m).forward(x, memory, tgt_masks, memory_masks);
  return norm ? norm->forward(x) : x;
}

Transformer::Transformer(std::int64_t d_model_, std::int64_t nhead_,
                         std::int64_t num_encoder_layers, std::int64_t num_decoder_layers,
                         const TransformerLayerOptions& options,
                         const TensorOptions& tensor_options)
    : d_model(d_model_), nhead(nhead_), batch_first(options.batch_first) {
  const auto final_norm = [&] {
    return std::make_shared<LayerNorm>(Shape{d_model}, options.layer_norm_eps, true, options.bias,
                                       tensor_options);
  };
  encoder = register_module("encoder",
                            std::make_shared<TransformerEncoder>(
                                TransformerEncoderLayer(d_model, nhead, options, tensor_options),
                                num_encoder_layers, final_norm()));
  decoder = register_module("decoder",
                            std::make_shared<TransformerDecoder>(
                                TransformerDecoderLayer(d_model, nhead, options, tensor_options),
                                num_decoder_layers, final_norm()));
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const AttentionMasks& src_masks,
                            const AttentionMasks& tgt_masks, const AttentionMasks& memory_masks) {
  detail::check_defined("Transformer.forward", "src", src);
  detail::check_defined("Transformer.forward", "tgt", tgt);
  const bool batched = src.dim() == 3;
  const std::int64_t batch_dim = batch_first ? 0 : 1;
  if (src.dim() != tgt.dim() || (batched && src.size(batch_dim) != tgt.size(batch_dim)))
    throw ShapeError(fmt::format(
        "Transformer.forward: the batch sizes of src and tgt must be equal, got src {} and tgt "
        "{}{}",
        shape_str(src.sizes()), shape_str(tgt.sizes()), batch_first ? " (batch_first)" : ""));
  if (src.dim() == 0 || src.size(-1) != d_model || tgt.size(-1) != d_model)
    throw ShapeError(fmt::format(
        "Transformer.forward: the feature size of src and tgt must be d_model = {}, got {} and {}",
        d_model, shape_str(src.sizes()), shape_str(tgt.sizes())));
  const Tensor memory = encoder->forward(src, src_masks);
  return decoder->forward(tgt, memory, tgt_masks, memory_masks);
}

Tensor Transformer::generate_square_subsequent_mask(std::int64_t sz, const TensorOptions& options) {
  return triu(full({sz, sz}, -std::numeric_limits<double>::infinity(),
                   {.dtype = options.dtype_or(DType::f32), .device = options.device}),
              1);
}

}  // namespace ferry::nn
