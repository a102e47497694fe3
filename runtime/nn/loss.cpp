// runtime/nn/loss.cpp — cross_entropy and mse_loss (ferry/nn/functional.hpp)
// and their module forms (ferry/nn/loss.hpp).
//
// Note [cross_entropy from ops]
// cross_entropy is composed of differentiable ops — log_softmax, gather,
// index_select, where, sum — rather than a fused kernel, so autograd
// differentiates it and every device that has those ops runs it. The
// definitions are PyTorch 1.13's (aten/src/ATen/native/LossNLL.cpp):
//   nll_n    = -w[t_n] · lsm[n, t_n], 0 where t_n == ignore_index
//   smooth_n = -Σ_c w[c] · lsm[n, c], 0 where ignored      (label smoothing)
//   mean     = Σ_n (·)_n / Σ_{n not ignored} w[t_n]         (0/0 = NaN)
//   loss     = (1 - ε) · nll + ε / C · smooth, each reduced alike.
// Ignored targets are replaced by class 0 before the gather (any valid
// index), and `where` then zeroes their terms in the forward and their
// gradients in the backward, so an ignored element contributes nothing even
// when its logits are infinite.
#include "ferry/nn/loss.hpp"

#include <fmt/format.h>

#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/ops.hpp"

namespace ferry::nn {
namespace functional {
namespace {

void check_target(const Tensor& input, const Tensor& target, const Shape& expected) {
  if (is_floating(target.dtype()))
    throw DTypeError(fmt::format(
        "cross_entropy: the target is {} (shape {}), but only class-index targets are supported "
        "(probability targets are not); pass class indices as i64 or i32",
        dtype_name(target.dtype()), shape_str(target.sizes())));
  if (target.dtype() != DType::i64 && target.dtype() != DType::i32)
    throw DTypeError(
        fmt::format("cross_entropy: the target must hold class indices as i64 or "
                    "i32, got {} (shape {})",
                    dtype_name(target.dtype()), shape_str(target.sizes())));
  if (target.sizes() != expected)
    throw ShapeError(fmt::format(
        "cross_entropy: for an input of shape {} the target must have shape {} (the input's shape "
        "without the class dim), got {}",
        shape_str(input.sizes()), shape_str(expected), shape_str(target.sizes())));
  if (target.device() != input.device())
    throw DeviceMismatchError(fmt::format(
        "cross_entropy: the input is on {} but the target is on {}; move them to one device",
        input.device().str(), target.device().str()));
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options) {
  if (!input.defined() || !target.defined())
    throw Error("cross_entropy: the input and the target must be defined");
  if (!is_floating(input.dtype()))
    throw DTypeError(
        fmt::format("cross_entropy: the input (logits) must be floating, got {} "
                    "(shape {})",
                    dtype_name(input.dtype()), shape_str(input.sizes())));
  if (input.dim() == 0)
    throw ShapeError(
        "cross_entropy: the input must be [C], [N, C] or [N, C, d1, ...], got a 0-d "
        "tensor");
  const std::int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const std::int64_t classes = input.size(class_dim);
  Shape expected = input.sizes();
  expected.erase(expected.begin() + class_dim);
  check_target(input, target, expected);
  const double eps = options.label_smoothing;
  if (!(eps >= 0.0 && eps <= 1.0))
    throw Error(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", eps));
  const Tensor& weight = options.weight;
  if (weight.defined()) {
    if (weight.sizes() != Shape{classes})
      throw ShapeError(
          fmt::format("cross_entropy: weight must have one value per class, shape [{}], got {}",
                      classes, shape_str(weight.sizes())));
    if (!is_floating(weight.dtype()))
      throw DTypeError(fmt::format("cross_entropy: weight must be floating, got {}",
                                   dtype_name(weight.dtype())));
    if (weight.device() != input.device())
      throw DeviceMismatchError(fmt::format(
          "cross_entropy: the input is on {} but weight is on {}; move them to one device",
          input.device().str(), weight.device().str()));
  }

  // Note [cross_entropy from ops].
  const Tensor ignored = eq(target, options.ignore_index);
  const Tensor safe = where(ignored, Scalar(0), target);
  if (safe.numel() > 0) {
    // One read back to the host for both ends (a sync on a GPU).
    const auto range =
        stack({min(safe).to(DType::i64), max(safe).to(DType::i64)}).to_vector<std::int64_t>();
    const std::int64_t lo = range[0], hi = range[1];
    if (lo < 0 || hi >= classes)
      throw ShapeError(fmt::format(
          "cross_entropy: target {} is out of range for {} classes (input shape {}); targets must "
          "be in [0, {}] or equal ignore_index ({})",
          lo < 0 ? lo : hi, classes, shape_str(input.sizes()), classes - 1, options.ignore_index));
  }

  const Tensor lsm = log_softmax(input, class_dim);
  const Tensor picked = class_dim == 0 ? gather(lsm, 0, safe.reshape({1})).reshape({})
                                       : gather(lsm, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor w;   // the weight of each target, 0 where ignored: the mean's denominator
  Tensor wc;  // the class weights, broadcast along the class dim
  Tensor nll;
  if (weight.defined()) {
    wc = weight.to(lsm.dtype());
    w = where(ignored, 0.0, index_select(wc, 0, safe.reshape({-1})).reshape(target.sizes()));
    nll = where(ignored, 0.0, -(picked * w));
    Shape bshape(std::size_t(input.dim()), 1);
    bshape[std::size_t(class_dim)] = classes;
    wc = wc.reshape(bshape);
  } else {
    w = ne(target, options.ignore_index).to(lsm.dtype());
    nll = where(ignored, 0.0, -picked);
  }
  auto reduce = [&](const Tensor& per_target) {
    switch (options.reduction) {
      case Reduction::none:
        return per_target;
      case Reduction::sum:
        return sum(per_target);
      case Reduction::mean:
        break;
    }
    return sum(per_target) / sum(w);
  };
  if (eps == 0.0) return reduce(nll);
  const Tensor all = wc.defined() ? lsm * wc : lsm;
  const Tensor smooth = where(ignored, 0.0, -sum(all, {class_dim}));
  return reduce(nll) * (1.0 - eps) + reduce(smooth) * (eps / double(classes));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (!input.defined() || !target.defined())
    throw Error("mse_loss: the input and the target must be defined");
  if (input.sizes() != target.sizes())
    throw ShapeError(fmt::format(
        "mse_loss: the input has shape {} but the target has shape {}; they must be equal (PyTorch "
        "would broadcast them with a warning that this is likely a bug; expand the target "
        "explicitly if that is what you mean)",
        shape_str(input.sizes()), shape_str(target.sizes())));
  if (!is_floating(input.dtype()) || !is_floating(target.dtype()))
    throw DTypeError(
        fmt::format("mse_loss: the input and the target must be floating, got {} "
                    "and {}",
                    dtype_name(input.dtype()), dtype_name(target.dtype())));
  const Tensor d = input - target;
  const Tensor sq = d * d;
  switch (reduction) {
    case Reduction::none:
      return sq;
    case Reduction::sum:
      return sum(sq);
    case Reduction::mean:
      break;
  }
  return mean(sq);
}

}  // namespace functional

// ---------------------------------------------------------------- modules

CrossEntropyLoss::CrossEntropyLoss(functional::CrossEntropyOptions opts)
    : options(std::move(opts)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::cross_entropy(input, target, options);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::mse_loss(input, target, reduction);
}

}  // namespace ferry::nn
