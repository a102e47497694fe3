// runtime/nn/functional.cpp — linear, bilinear, the dropouts, channel_shuffle and the thin
// activation forms of nn::functional (ferry/nn/functional.hpp). The losses
// are in loss.cpp. Everything here is composed of differentiable ops: no
// kernel of its own, so every device that has the ops has these.
#include "ferry/nn/functional.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

namespace {

// Dropout of whole channels of a [N, C, *spatial] (or unbatched [C, *spatial]) input with
// `spatial` dims: one draw per channel, the spatial dims of the mask 1.
Tensor dropout_channels(std::string_view fn, std::string_view layout, const Tensor& x, double p,
                        bool training, std::int64_t spatial) {
  if (x.defined() && x.dim() != spatial + 1 && x.dim() != spatial + 2)
    throw ShapeError(
        fmt::format("{}: expects a {}-D [N, {}] or {}-D (unbatched) [{}] input, got shape {}", fn,
                    spatial + 2, layout, spatial + 1, layout, shape_str(x.sizes())));
  Shape mask;
  if (x.defined()) {
    mask = x.sizes();
    for (std::int64_t d = 0; d < spatial; ++d) mask[mask.size() - 1 - std::size_t(d)] = 1;
  }
  return dropout_masked(fn, x, p, training, mask);
}

}  // namespace

Tensor dropout1d(const Tensor& x, double p, bool training) {
  return dropout_channels("dropout1d", "C, L", x, p, training, 1);
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  return dropout_channels("dropout2d", "C, H, W", x, p, training, 2);
}

Tensor dropout3d(const Tensor& x, double p, bool training) {
  return dropout_channels("dropout3d", "C, D, H, W", x, p, training, 3);
}

namespace {

// Note [Alpha dropout]
// SELU's outputs have mean 0 and variance 1, and its negative saturation is -λα = -1.7581.
// Dropping to that value rather than 0 and then applying a · x + b, with
// a = 1 / sqrt((λα² p + 1)(1 - p)) and b = λα a p (the dropped value's share), keeps the mean
// and variance (Klambauer et al. 2017). PyTorch writes it as x · (keep · a) + (keep - 1) λα a
// + λα a p, which is the same; so is this.
Tensor alpha_dropout_masked(std::string_view fn, const Tensor& x, double p, bool training,
                            bool whole_channels) {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error(fmt::format("{}: the probability p must be in [0, 1], got {}", fn, p));
  check_defined(fn, "input", x);
  if (!training || p == 0.0 || x.numel() == 0) return x;
  check_floating(fn, "input", x);
  if (p == 1.0) return x * 0.0;
  Shape mask = x.sizes();
  if (whole_channels) {
    if (x.dim() < 2)
      throw ShapeError(fmt::format("{}: needs an input of at least 2 dims [N, C, *], got {}", fn,
                                   shape_str(x.sizes())));
    for (std::size_t d = 2; d < mask.size(); ++d) mask[d] = 1;
  }
  constexpr double kSaturation = 1.7580993408473766;  // λα of SELU
  const double a = 1.0 / std::sqrt((kSaturation * kSaturation * p + 1) * (1 - p));
  const Tensor keep = ge(rand(mask, {.dtype = DType::f32, .device = x.device()}), p).to(x.dtype());
  const Tensor shift = (keep - 1.0) * (kSaturation * a) + kSaturation * a * p;
  return x * (keep * a) + shift;
}

}  // namespace

Tensor alpha_dropout(const Tensor& x, double p, bool training) {
  return alpha_dropout_masked("alpha_dropout", x, p, training, false);
}

Tensor feature_alpha_dropout(const Tensor& x, double p, bool training) {
  return alpha_dropout_masked("feature_alpha_dropout", x, p, training, true);
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training) {
  check_defined("rrelu", "input", x);
  check_floating("rrelu", "input", x);
  if (!(lower <= upper))
    throw ValueError(fmt::format("rrelu: lower ({}) must not exceed upper ({})", lower, upper));
  if (!training) return leaky_relu(x, (lower + upper) / 2);
  // One slope per element, drawn in f32 as dropout's mask; x > 0 keeps slope 1 (so x = 0
  // takes the drawn slope's gradient, as PyTorch's kernel).
  Tensor slope = rand(x.sizes(), {.dtype = DType::f32, .device = x.device()});
  slope = (slope * (upper - lower) + lower).to(x.dtype());
  return where(gt(x, Scalar(0)), x, x * slope);
}

Tensor gumbel_softmax(const Tensor& logits, double tau, bool hard, std::int64_t dim) {
  check_defined("gumbel_softmax", "logits", logits);
  check_floating("gumbel_softmax", "logits", logits);
  if (!(tau > 0))
    throw ValueError(fmt::format("gumbel_softmax: tau must be positive, got {}", tau));
  // -log(E), E ~ Exp(1), is standard Gumbel; a constant to the graph.
  Tensor e = empty(logits.sizes(), {.dtype = logits.dtype(), .device = logits.device()});
  {
    NoGradGuard no_grad;
    exponential_(e);
  }
  const Tensor soft = softmax((logits - log(e)) / tau, dim);
  if (!hard) return soft;
  // Straight-through: the one-hot's value, the soft sample's gradient.
  const std::int64_t d = dim < 0 ? dim + soft.dim() : dim;
  const Tensor index = argmax(soft, d, /*keepdim=*/true);
  const Tensor one_hot = scatter(zeros_like(soft), d, index, Scalar(1.0));
  return one_hot - soft.detach() + soft;
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  if (ferry::detail::autocast_applies(OpId::bilinear)) {
    const ferry::detail::AutocastOp ac(OpId::bilinear, {&x1, &x2, &weight, &bias});
    return bilinear(ac(x1), ac(x2), ac(weight), ac(bias));
  }
  check_defined("bilinear", "input1", x1);
  check_defined("bilinear", "input2", x2);
  check_defined("bilinear", "weight", weight);
  if (weight.dim() != 3)
    throw ShapeError(fmt::format(
        "bilinear: weight must be 3-D [out_features, in1_features, in2_features], got shape {}",
        shape_str(weight.sizes())));
  const std::int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  if (x1.dim() == 0 || x2.dim() != x1.dim() || x1.size(-1) != in1 || x2.size(-1) != in2 ||
      !std::equal(x1.sizes().begin(), x1.sizes().end() - 1, x2.sizes().begin()))
    throw ShapeError(fmt::format(
        "bilinear: the inputs must be [..., {}] and [..., {}] with the same leading dims "
        "(weight {}), got {} and {}",
        in1, in2, shape_str(weight.sizes()), shape_str(x1.sizes()), shape_str(x2.sizes())));
  if (bias.defined() && bias.sizes() != Shape{out})
    throw ShapeError(fmt::format("bilinear: bias must have shape [{}] (out_features), got {}", out,
                                 shape_str(bias.sizes())));
  // One matmul: x1 [B, in1] times weight as [in1, out * in2] gives x1 · weight[o] for every o;
  // the product with x2 summed over in2 finishes each bilinear form.
  Shape lead(x1.sizes().begin(), x1.sizes().end() - 1);
  const Tensor a = x1.reshape({-1, in1});
  const Tensor w = weight.permute({1, 0, 2}).reshape({in1, out * in2});
  const Tensor u = matmul(a, w).reshape({-1, out, in2});
  Tensor y = sum(u * x2.reshape({-1, 1, in2}), {2});
  if (bias.defined()) y = y + bias;
  lead.push_back(out);
  return y.reshape(lead);
}

Tensor channel_shuffle(const Tensor& x, std::int64_t groups) {
  check_defined("channel_shuffle", "input", x);
  if (groups <= 0)
    throw Error(fmt::format("channel_shuffle: groups must be positive, got {}", groups));
  if (x.dim() < 3 || x.size(1) % groups != 0)
    throw ShapeError(fmt::format(
        "channel_shuffle: expects [N, C, *] with C divisible by groups = {}, got shape {}", groups,
        shape_str(x.sizes())));
  Shape split = x.sizes();
  split[1] = x.size(1) / groups;
  split.insert(split.begin() + 1, groups);
  return x.reshape(split).transpose(1, 2).reshape(x.sizes());
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

Tensor hardshrink(const Tensor& x, double lambd) { return where(gt(abs(x), lambd), x, Scalar(0)); }

Tensor softshrink(const Tensor& x, double lambd) {
  if (!(lambd >= 0)) throw ValueError(fmt::format("softshrink: lambd must be >= 0, got {}", lambd));
  return where(gt(x, lambd), x - lambd, where(lt(x, -lambd), x + lambd, Scalar(0)));
}

Tensor tanhshrink(const Tensor& x) { return x - tanh(x); }

Tensor softsign(const Tensor& x) { return x / (abs(x) + 1); }

Tensor threshold(const Tensor& x, double threshold, double value) {
  return where(gt(x, threshold), x, Scalar(value));
}

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
