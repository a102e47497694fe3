// runtime/nn/functional.cpp — linear, dropout, batch_norm and the thin
// activation forms of nn::functional (ferry/nn/functional.hpp). The losses
// are in loss.cpp. Everything here is composed of differentiable ops: no
// kernel of its own, so every device that has the ops has these.
#include "ferry/nn/functional.hpp"

#include <fmt/format.h>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/random.hpp"

namespace ferry::nn::functional {
namespace {

void check_defined(std::string_view fn, std::string_view arg, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("{}: {} is undefined", fn, arg));
}

void check_floating(std::string_view fn, std::string_view arg, const Tensor& t) {
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format(
        "{}: {} must be floating (f32, f16, bf16, f64), got {} (shape {}); convert it first, "
        "e.g. x.to(ferry::DType::f32)",
        fn, arg, dtype_name(t.dtype()), shape_str(t.sizes())));
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined("linear", "input", x);
  check_defined("linear", "weight", weight);
  if (weight.dim() != 2)
    throw ShapeError(
        fmt::format("linear: weight must be 2-D [out_features, in_features], got "
                    "shape {}",
                    shape_str(weight.sizes())));
  if (x.dim() == 0 || x.size(-1) != weight.size(1))
    throw ShapeError(fmt::format(
        "linear: the input's last dim must be in_features = {}, got input shape {} (weight "
        "shape {})",
        weight.size(1), shape_str(x.sizes()), shape_str(weight.sizes())));
  if (bias.defined() && bias.sizes() != Shape{weight.size(0)})
    throw ShapeError(fmt::format("linear: bias must have shape [{}] (out_features), got {}",
                                 weight.size(0), shape_str(bias.sizes())));
  // x · weightᵀ through the transposed view: no copy, and the weight's
  // gradient comes back contiguous (Note [Matmul gradient layout]).
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? y + bias : y;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error(fmt::format("dropout: the probability p must be in [0, 1], got {}", p));
  check_defined("dropout", "input", x);
  // As PyTorch: no draw at all when nothing is dropped, so the generator's
  // offset (and the masks after this one) do not depend on p = 0 layers.
  if (!training || p == 0.0 || x.numel() == 0) return x;
  check_floating("dropout", "input", x);
  if (p == 1.0) return x * 0.0;  // keeps the graph: the gradient is zero
  // The mask is drawn in f32 whatever x's dtype, so a seed gives the same
  // mask for every dtype and, with the counter-based generator, every device.
  Tensor keep = ge(rand(x.sizes(), {.dtype = DType::f32, .device = x.device()}), p);
  Tensor scale = keep.to(x.dtype()) * (1.0 / (1.0 - p));  // no history: a constant
  return x * scale;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  check_defined("batch_norm", "input", x);
  check_floating("batch_norm", "input", x);
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("batch_norm: the input must be [N, C, ...] with at least 2 dims, got shape {}",
                    shape_str(x.sizes())));
  const std::int64_t channels = x.size(1);
  auto check_vec = [&](const Tensor& t, std::string_view arg) {
    if (t.defined() && t.sizes() != Shape{channels})
      throw ShapeError(
          fmt::format("batch_norm: {} must have shape [{}] (the input's dim 1, input "
                      "shape {}), got {}",
                      arg, channels, shape_str(x.sizes()), shape_str(t.sizes())));
  };
  check_vec(running_mean, "running_mean");
  check_vec(running_var, "running_var");
  check_vec(weight, "weight");
  check_vec(bias, "bias");
  if (running_mean.defined() != running_var.defined())
    throw Error("batch_norm: running_mean and running_var must both be given or both be left out");
  if (!training && !running_mean.defined())
    throw Error(
        "batch_norm: evaluation (training = false) normalises with running_mean and running_var, "
        "which were not given");

  std::vector<std::int64_t> dims = {0};
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Shape bshape(std::size_t(x.dim()), 1);
  bshape[1] = channels;
  const std::int64_t count = channels == 0 ? 0 : x.numel() / channels;

  Tensor mean_b, var_b;
  if (training) {
    if (count <= 1)
      throw ShapeError(fmt::format(
          "batch_norm: training needs more than 1 value per channel to compute a variance, got "
          "input shape {}; use a larger batch or eval()",
          shape_str(x.sizes())));
    mean_b = mean(x, dims, /*keepdim=*/true);
    var_b = var(x, dims, /*correction=*/0, /*keepdim=*/true);
    if (running_mean.defined()) {
      // In place under NoGradGuard, so the buffers keep their identity
      // (and device) and the update is not part of any graph. The running
      // variance takes the unbiased estimate, PyTorch's rule.
      NoGradGuard no_grad;
      const Tensor bm = mean_b.reshape({channels}).to(running_mean.dtype());
      const Tensor bv =
          (var_b.reshape({channels}) * (double(count) / double(count - 1))).to(running_var.dtype());
      Tensor rm = running_mean, rv = running_var;  // handles: the writes reach the buffers
      rm.copy_(rm * (1.0 - momentum) + bm * momentum);
      rv.copy_(rv * (1.0 - momentum) + bv * momentum);
    }
  } else {
    mean_b = running_mean.to(x.dtype()).reshape(bshape);
    var_b = running_var.to(x.dtype()).reshape(bshape);
  }
  Tensor y = (x - mean_b) * rsqrt(var_b + eps);
  if (weight.defined()) y = y * weight.to(x.dtype()).reshape(bshape);
  if (bias.defined()) y = y + bias.to(x.dtype()).reshape(bshape);
  return y;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return ferry::layer_norm(x, normalized_shape, weight, bias, eps);
}

Tensor relu(const Tensor& x) { return ferry::relu(x); }

Tensor gelu(const Tensor& x, std::string_view approximate) { return ferry::gelu(x, approximate); }

Tensor normalize(const Tensor& x, double p, std::int64_t dim, double eps) {
  return x / clamp_min(norm(x, p, {dim}, /*keepdim=*/true), eps);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t dim, double eps) {
  const Shape shape = broadcast_shapes(x1.sizes(), x2.sizes());
  const Tensor a = x1.expand(shape), b = x2.expand(shape);
  const Tensor dot = sum(a * b, {dim});
  return dot / clamp_min(norm(a, 2, {dim}) * norm(b, 2, {dim}), eps);
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const Tensor d = x1 - x2 + eps;
  return norm(d, p, {d.dim() == 0 ? 0 : -1}, keepdim);
}

Tensor softmin(const Tensor& x, std::int64_t dim) { return softmax(neg(x), dim); }

Tensor glu(const Tensor& x, std::int64_t dim) {
  const std::int64_t n = x.size(dim);
  if (n % 2 != 0)
    throw ShapeError(
        fmt::format("glu: dim {} of shape {} must have an even size", dim, shape_str(x.sizes())));
  return x.narrow(dim, 0, n / 2) * sigmoid(x.narrow(dim, n / 2, n / 2));
}

}  // namespace ferry::nn::functional
