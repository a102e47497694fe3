// runtime/nn/layers.cpp — the built-in layers (ferry/nn/layers.hpp).
#include "ferry/nn/layers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/init.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"
#include "ops_internal.hpp"

namespace ferry::nn {

using detail::bool_str;
using detail::check_size;
using detail::param_options;

// ---------------------------------------------------------------- Linear

Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias, const TensorOptions& options)
    : in_features(in), out_features(out) {
  check_size("Linear", "in_features", in);
  check_size("Linear", "out_features", out);
  const TensorOptions o = param_options("Linear", options);
  weight = register_parameter("weight", empty({out, in}, o));
  if (with_bias) bias = register_parameter("bias", empty({out}, o));
  init::reset_weight_and_bias_(weight, bias);
}

Tensor Linear::forward(const Tensor& x) {
  if (!x.defined()) throw Error("Linear.forward: the input is undefined");
  if (x.dim() == 0 || x.size(-1) != in_features)
    throw ShapeError(fmt::format(
        "Linear(in_features={}, out_features={}): the input's last dim must be {}, got input "
        "shape {}",
        in_features, out_features, in_features, shape_str(x.sizes())));
  return functional::linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features,
                     bool_str(bias.defined()));
}

// ---------------------------------------------------------------- LayerNorm

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, bool with_bias,
                     const TensorOptions& options)
    : normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  if (normalized_shape.empty())
    throw ShapeError("LayerNorm: normalized_shape must have at least one dim");
  for (std::int64_t s : normalized_shape) check_size("LayerNorm", "normalized_shape", s);
  if (affine) {
    const TensorOptions o = param_options("LayerNorm", options);
    weight = register_parameter("weight", ones(normalized_shape, o));
    if (with_bias) bias = register_parameter("bias", zeros(normalized_shape, o));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (!x.defined()) throw Error("LayerNorm.forward: the input is undefined");
  const auto k = std::int64_t(normalized_shape.size());
  bool fits = x.dim() >= k;
  for (std::int64_t i = 0; fits && i < k; ++i)
    fits = x.size(x.dim() - k + i) == normalized_shape[std::size_t(i)];
  if (!fits)
    throw ShapeError(fmt::format(
        "LayerNorm({}): the input's last {} dim(s) must be {}, got input shape {}",
        shape_str(normalized_shape), k, shape_str(normalized_shape), shape_str(x.sizes())));
  return ferry::layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  // PyTorch prints the shape as a tuple: (8,) or (4, 8).
  std::string shape = "(";
  for (std::size_t i = 0; i < normalized_shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return fmt::format("{}, eps={}, elementwise_affine={}", shape, eps, bool_str(elementwise_affine));
}

// ---------------------------------------------------------------- Dropout

Dropout::Dropout(double p_) : p(p_) {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error(fmt::format("Dropout: the probability p must be in [0, 1], got {}", p));
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=false", p); }

ChannelDropout::ChannelDropout(const char* layer, double p_) : p(p_) {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error(fmt::format("{}: the probability p must be in [0, 1], got {}", layer, p));
}

std::string ChannelDropout::extra_repr() const { return fmt::format("p={}, inplace=false", p); }

Tensor Dropout1d::forward(const Tensor& x) { return functional::dropout1d(x, p, is_training()); }
Tensor Dropout2d::forward(const Tensor& x) { return functional::dropout2d(x, p, is_training()); }
Tensor Dropout3d::forward(const Tensor& x) { return functional::dropout3d(x, p, is_training()); }
Tensor AlphaDropout::forward(const Tensor& x) {
  return functional::alpha_dropout(x, p, is_training());
}
Tensor FeatureAlphaDropout::forward(const Tensor& x) {
  return functional::feature_alpha_dropout(x, p, is_training());
}

// ---------------------------------------------------------------- Bilinear

Bilinear::Bilinear(std::int64_t in1, std::int64_t in2, std::int64_t out, bool with_bias,
                   const TensorOptions& options)
    : in1_features(in1), in2_features(in2), out_features(out) {
  check_size("Bilinear", "in1_features", in1);
  check_size("Bilinear", "in2_features", in2);
  check_size("Bilinear", "out_features", out);
  const TensorOptions o = param_options("Bilinear", options);
  weight = register_parameter("weight", empty({out, in1, in2}, o));
  if (with_bias) bias = register_parameter("bias", empty({out}, o));
  // PyTorch's reset_parameters: both from U(±1/√in1).
  const double bound = in1 > 0 ? 1.0 / std::sqrt(double(in1)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) {
  return functional::bilinear(x1, x2, weight, bias);
}

std::string Bilinear::extra_repr() const {
  return fmt::format("in1_features={}, in2_features={}, out_features={}, bias={}", in1_features,
                     in2_features, out_features, bool_str(bias.defined()));
}

// ---------------------------------------------------------------- the distances, the shuffle

Tensor CosineSimilarity::forward(const Tensor& x1, const Tensor& x2) {
  return functional::cosine_similarity(x1, x2, dim, eps);
}

Tensor PairwiseDistance::forward(const Tensor& x1, const Tensor& x2) {
  return functional::pairwise_distance(x1, x2, p, eps, keepdim);
}

ChannelShuffle::ChannelShuffle(std::int64_t g) : groups(g) {
  if (g <= 0) throw Error(fmt::format("ChannelShuffle: groups must be positive, got {}", g));
}

Tensor ChannelShuffle::forward(const Tensor& x) { return functional::channel_shuffle(x, groups); }

std::string ChannelShuffle::extra_repr() const { return fmt::format("groups={}", groups); }

}  // namespace ferry::nn
