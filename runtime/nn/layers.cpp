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

namespace ferry::nn {
namespace {

// The options for a layer's floating tensors: f32 unless a floating dtype
// was asked for.
TensorOptions param_options(std::string_view layer, const TensorOptions& o) {
  const DType dt = o.dtype_or(DType::f32);
  if (!is_floating(dt))
    throw DTypeError(fmt::format("{}: parameters must be floating (f32, f16, bf16, f64), got {}",
                                 layer, dtype_name(dt)));
  return {.dtype = dt, .device = o.device};
}

void check_size(std::string_view layer, std::string_view what, std::int64_t v) {
  if (v < 0) throw ShapeError(fmt::format("{}: {} must be >= 0, got {}", layer, what, v));
}

const char* bool_str(bool b) { return b ? "true" : "false"; }

}  // namespace

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

// ---------------------------------------------------------------- Embedding

Embedding::Embedding(std::int64_t num, std::int64_t dim, const TensorOptions& options)
    : num_embeddings(num), embedding_dim(dim) {
  check_size("Embedding", "num_embeddings", num);
  check_size("Embedding", "embedding_dim", dim);
  weight = register_parameter("weight", empty({num, dim}, param_options("Embedding", options)));
  init::normal_(weight);
}

Tensor Embedding::forward(const Tensor& indices) {
  if (!indices.defined()) throw Error("Embedding.forward: the indices are undefined");
  if (indices.dtype() != DType::i64 && indices.dtype() != DType::i32)
    throw DTypeError(fmt::format(
        "Embedding({}, {}): the indices must be i64 or i32, got {} "
        "(shape {})",
        num_embeddings, embedding_dim, dtype_name(indices.dtype()), shape_str(indices.sizes())));
  return embedding(weight, indices);
}

std::string Embedding::extra_repr() const {
  return fmt::format("{}, {}", num_embeddings, embedding_dim);
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

// ---------------------------------------------------------------- BatchNorm1d

BatchNorm1d::BatchNorm1d(std::int64_t features, double eps_, std::optional<double> momentum_,
                         bool affine_, bool track, const TensorOptions& options)
    : num_features(features),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track) {
  check_size("BatchNorm1d", "num_features", features);
  const TensorOptions o = param_options("BatchNorm1d", options);
  if (affine) {
    weight = register_parameter("weight", ones({features}, o));
    bias = register_parameter("bias", zeros({features}, o));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({features}, o));
    running_var = register_buffer("running_var", ones({features}, o));
    num_batches_tracked = register_buffer(
        "num_batches_tracked", zeros({}, {.dtype = DType::i64, .device = options.device}));
  }
}

Tensor BatchNorm1d::forward(const Tensor& x) {
  if (!x.defined()) throw Error("BatchNorm1d.forward: the input is undefined");
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError(
        fmt::format("BatchNorm1d({}): expects a 2-D [N, C] or 3-D [N, C, L] input, got shape {}",
                    num_features, shape_str(x.sizes())));
  if (x.size(1) != num_features)
    throw ShapeError(
        fmt::format("BatchNorm1d({}): the input's dim 1 (channels) must be {}, got input shape {}",
                    num_features, num_features, shape_str(x.sizes())));
  // Everything functional::batch_norm would refuse is refused before the
  // step count moves.
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("BatchNorm1d({}): the input must be floating, got {}",
                                 num_features, dtype_name(x.dtype())));
  const bool batch_stats = is_training() || !track_running_stats;
  if (batch_stats && x.numel() / std::max<std::int64_t>(num_features, 1) <= 1)
    throw ShapeError(fmt::format(
        "BatchNorm1d({}): training needs more than 1 value per channel, got input shape {}; use "
        "a larger batch or eval()",
        num_features, shape_str(x.sizes())));
  double factor = 0.0;
  if (is_training() && track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked + 1);
    factor = momentum ? *momentum : 1.0 / double(num_batches_tracked.item<std::int64_t>());
  }
  return functional::batch_norm(x, running_mean, running_var, weight, bias, batch_stats, factor,
                                eps);
}

std::string BatchNorm1d::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features,
                     eps, momentum ? fmt::format("{}", *momentum) : std::string("None"),
                     bool_str(affine), bool_str(track_running_stats));
}

// ---------------------------------------------------------------- Dropout

Dropout::Dropout(double p_) : p(p_) {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error(fmt::format("Dropout: the probability p must be in [0, 1], got {}", p));
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=false", p); }

}  // namespace ferry::nn
