// ferry/nn/layers.hpp — the built-in layers: Linear, Bilinear, Embedding, EmbeddingBag, LayerNorm,
// the dropouts, CosineSimilarity, PairwiseDistance and ChannelShuffle (the activations:
// ferry/nn/activation.hpp; batch, group and instance normalisation: ferry/nn/normalization.hpp).
//
// Semantics, defaults and initial distributions are PyTorch's (the numbers
// are drawn from ferry's generator, so they differ from PyTorch's but a
// manual_seed makes them reproducible on every device). Each layer's tensors
// are public fields, as in libtorch, and registered under PyTorch's names, so
// a PyTorch state_dict loads as is. `options` places the tensors on a device
// and in a floating dtype (f32 by default) from the start.
//
// forward() checks the input's shape and raises ShapeError naming the layer,
// what it expects and what it got.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/nn/activation.hpp"  // the activation modules, once here
#include "ferry/nn/functional.hpp"
#include "ferry/nn/module.hpp"
#include "ferry/nn/normalization.hpp"  // BatchNorm1d used to live here
#include "ferry/tensor.hpp"

namespace ferry::nn {

// y = x · weightᵀ + bias. weight [out, in] and bias [out] are both drawn
// from U(-1/√in, 1/√in) (PyTorch's kaiming_uniform_(a=√5) and its bias rule).
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true,
         const TensorOptions& options = {});
  Tensor forward(const Tensor& x) override;  // [..., in] -> [..., out]
  std::string extra_repr() const override;

  std::int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one
};

// A lookup table: indices (i64 or i32, any shape) -> rows of weight
// [num_embeddings, embedding_dim], drawn from N(0, 1). With padding_idx (negative counts from
// the end), that row starts at zeros and gets no gradient, as nn.Embedding's. max_norm and
// scale_grad_by_freq: functional::EmbeddingOptions (max_norm rescales the weight's looked-up
// rows in place on every forward).
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim,
            const TensorOptions& options = {},
            std::optional<std::int64_t> padding_idx = std::nullopt);
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim,
            functional::EmbeddingOptions options, const TensorOptions& tensor_options = {});
  Tensor forward(const Tensor& indices) override;  // shape -> shape + [embedding_dim]
  std::string extra_repr() const override;

  std::int64_t num_embeddings, embedding_dim;
  std::optional<std::int64_t> padding_idx;  // wrapped into [0, num_embeddings)
  std::optional<double> max_norm;
  double norm_type = 2;
  bool scale_grad_by_freq = false;
  Tensor weight;
};

// nn.EmbeddingBag: functional::embedding_bag over its weight [num_embeddings, embedding_dim]
// (N(0, 1); the padding_idx row zeros).
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(std::int64_t num_embeddings, std::int64_t embedding_dim,
               functional::EmbeddingBagOptions options = {},
               const TensorOptions& tensor_options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& offsets = {},
                 const Tensor& per_sample_weights = {});
  std::string extra_repr() const override;

  std::int64_t num_embeddings, embedding_dim;
  functional::EmbeddingBagOptions options;  // padding_idx wrapped into [0, num_embeddings)
  Tensor weight;
};

// Normalises over the last normalized_shape.size() dims; weight (ones) and
// bias (zeros) when elementwise_affine (bias only when `bias`).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true, const TensorOptions& options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

// functional::dropout(x, p, is_training()). Error unless 0 <= p <= 1.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p;
};

// What the channel and alpha dropouts share: p, checked, and their printing.
class ChannelDropout : public Module {
 public:
  std::string extra_repr() const override;

  double p;

 protected:
  ChannelDropout(const char* layer, double p);
};

// functional::dropout1d / dropout2d / dropout3d(x, p, is_training()): whole channels of
// [N, C, L], [N, C, H, W] or [N, C, D, H, W] (or the unbatched forms).
class Dropout1d : public ChannelDropout {
 public:
  explicit Dropout1d(double p = 0.5) : ChannelDropout("Dropout1d", p) {}
  Tensor forward(const Tensor& x) override;
};
class Dropout2d : public ChannelDropout {
 public:
  explicit Dropout2d(double p = 0.5) : ChannelDropout("Dropout2d", p) {}
  Tensor forward(const Tensor& x) override;
};
class Dropout3d : public ChannelDropout {
 public:
  explicit Dropout3d(double p = 0.5) : ChannelDropout("Dropout3d", p) {}
  Tensor forward(const Tensor& x) override;
};
// functional::alpha_dropout / feature_alpha_dropout(x, p, is_training()) (Note [Alpha
// dropout] in runtime/nn/functional.cpp): for SELU networks.
class AlphaDropout : public ChannelDropout {
 public:
  explicit AlphaDropout(double p = 0.5) : ChannelDropout("AlphaDropout", p) {}
  Tensor forward(const Tensor& x) override;
};
class FeatureAlphaDropout : public ChannelDropout {
 public:
  explicit FeatureAlphaDropout(double p = 0.5) : ChannelDropout("FeatureAlphaDropout", p) {}
  Tensor forward(const Tensor& x) override;
};

// y = x1 · weight[o] · x2 + bias[o] (functional::bilinear). weight [out, in1, in2] and bias
// [out] are both drawn from U(-1/√in1, 1/√in1), as PyTorch's reset_parameters.
class Bilinear : public Module {
 public:
  Bilinear(std::int64_t in1_features, std::int64_t in2_features, std::int64_t out_features,
           bool bias = true, const TensorOptions& options = {});
  using Module::forward;
  Tensor forward(const Tensor& x1, const Tensor& x2);  // [..., in1], [..., in2] -> [..., out]
  std::string extra_repr() const override;

  std::int64_t in1_features, in2_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one
};

// functional::cosine_similarity and functional::pairwise_distance as modules.
class CosineSimilarity : public Module {
 public:
  explicit CosineSimilarity(std::int64_t dim = 1, double eps = 1e-8) : dim(dim), eps(eps) {}
  using Module::forward;
  Tensor forward(const Tensor& x1, const Tensor& x2);

  std::int64_t dim;
  double eps;
};
class PairwiseDistance : public Module {
 public:
  explicit PairwiseDistance(double p = 2, double eps = 1e-6, bool keepdim = false)
      : p(p), eps(eps), keepdim(keepdim) {}
  using Module::forward;
  Tensor forward(const Tensor& x1, const Tensor& x2);

  double p, eps;
  bool keepdim;
};

// functional::channel_shuffle(x, groups).
class ChannelShuffle : public Module {
 public:
  explicit ChannelShuffle(std::int64_t groups);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::int64_t groups;
};

}  // namespace ferry::nn
