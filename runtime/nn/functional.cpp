// runtime/nn/functional.cpp — linear, dropout, dropout2d and the thin
// activation forms of nn::functional (ferry/nn/functional.hpp). The losses
// are in loss.cpp. Everything here is composed of differentiable ops: no
// kernel of its own, so every device that has the ops has these.
#include "ferry/nn/functional.hpp"

#include <fmt/format.h>

#include "autocast_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/random.hpp"
#include "nn_internal.hpp"

namespace ferry::nn::functional {

using detail::check_defined;
using detail::check_floating;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (ferry::detail::autocast_applies(OpId::linear)) {
    const ferry::detail::AutocastOp ac(OpId::linear, {&x, &weight, &bias});
    return linear(ac(x), ac(weight), ac(bias));
  }
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

namespace {

// dropout with one draw per element of `mask_shape` (x's shape, or x's with the spatial dims
// 1: whole channels), broadcast over x.
Tensor dropout_masked(std::string_view fn, const Tensor& x, double p, bool training,
                      const Shape& mask_shape) {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error(fmt::format("{}: the probability p must be in [0, 1], got {}", fn, p));
  check_defined(fn, "input", x);
  // As PyTorch: no draw at all when nothing is dropped, so the generator's
  // offset (and the masks after this one) do not depend on p = 0 layers.
  if (!training || p == 0.0 || x.numel() == 0) return x;
  check_floating(fn, "input", x);
  if (p == 1.0) return x * 0.0;  // keeps the graph: the gradient is zero
  // The mask is drawn in f32 whatever x's dtype, so a seed gives the same
  // mask for every dtype and, with the counter-based generator, every device.
  Tensor keep = ge(rand(mask_shape, {.dtype = DType::f32, .device = x.device()}), p);
  Tensor scale = keep.to(x.dtype()) * (1.0 / (1.0 - p));  // no history: a constant
  return x * scale;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  return dropout_masked("dropout", x, p, training, x.defined() ? x.sizes() : Shape{});
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  if (x.defined() && x.dim() != 3 && x.dim() != 4)
    throw ShapeError(fmt::format(
        "dropout2d: expects a 4-D [N, C, H, W] or 3-D (unbatched) [C, H, W] input, got shape {}",
        shape_str(x.sizes())));
  Shape mask;
  if (x.defined()) {
    mask = x.sizes();
    mask[mask.size() - 1] = mask[mask.size() - 2] = 1;
  }
  return dropout_masked("dropout2d", x, p, training, mask);
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
  if (ferry::detail::autocast_applies(OpId::cosine_similarity)) {
    const ferry::detail::AutocastOp ac(OpId::cosine_similarity, {&x1, &x2});
    return cosine_similarity(ac(x1), ac(x2), dim, eps);
  }
  const Shape shape = broadcast_shapes(x1.sizes(), x2.sizes());
  const Tensor a = x1.expand(shape), b = x2.expand(shape);
  // PyTorch's: each vector divided by its norm clamped at eps, then the dot product, so the
  // result stays in [-1, 1] and two short vectors (norms 1e-5: a product under eps) still get
  // their cosine. PyTorch clamps the norms in place under no_grad, so the gradient flows as
  // through the unclamped norms: the clamp's step here is detached.
  const auto clamped = [&](const Tensor& n) { return n + (clamp_min(n, eps) - n).detach(); };
  const Tensor n1 = clamped(norm(a, 2, {dim}, true)), n2 = clamped(norm(b, 2, {dim}, true));
  return sum((a / n1) * (b / n2), {dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const Tensor d = x1 - x2 + eps;
  return norm(d, p, {d.dim() == 0 ? 0 : -1}, keepdim);
}

Tensor softmin(const Tensor& x, std::int64_t dim) { return softmax(neg(x), dim); }

Tensor prelu(const Tensor& x, const Tensor& weight) {
  const std::int64_t channels = x.dim() >= 2 ? x.size(1) : 1, n = weight.numel();
  if (n != 1 && n != channels)
    throw ShapeError(fmt::format(
        "prelu: the weight has {} elements, expected 1 or the input's {} channels (shape {})", n,
        channels, shape_str(x.sizes())));
  Shape along(std::size_t(std::max<std::int64_t>(x.dim(), 1)), 1);
  if (n > 1) along[1] = n;
  const Tensor w = n == 1 ? weight.reshape({}) : weight.reshape(along);
  return where(gt(x, 0), x, w * x);  // at 0 the slope side, as PyTorch's gradient takes it
}

Tensor glu(const Tensor& x, std::int64_t dim) {
  const std::int64_t n = x.size(dim);
  if (n % 2 != 0)
    throw ShapeError(
        fmt::format("glu: dim {} of shape {} must have an even size", dim, shape_str(x.sizes())));
  return x.narrow(dim, 0, n / 2) * sigmoid(x.narrow(dim, n / 2, n / 2));
}

}  // namespace ferry::nn::functional
