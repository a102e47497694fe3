// runtime/nn/loss_margin.cpp — the margin and likelihood losses of torch.nn.functional
// (soft_margin, multilabel_soft_margin, hinge_embedding, triplet_margin, poisson_nll,
// gaussian_nll, multi_margin; ferry/nn/functional.hpp) and their modules (ferry/nn/loss.hpp).
//
// Each is composed of differentiable ops with PyTorch 1.13's definitions (aten's Loss.cpp and
// LossMultiMargin.cpp, and torch/nn/functional.py for the two written in Python there), so
// autograd differentiates it and it runs on every device. Where PyTorch's formula overflows or
// makes a NaN that its own mask then hides, the composition here computes the same values
// without the intermediate: soft_margin is -logsigmoid(y x) rather than log1p(exp(-y x)), and
// poisson_nll's Stirling term is evaluated at a target of 1 where it is masked.
#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "autocast_internal.hpp"
#include "deferred_checks.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/loss.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"
#include "ops_internal.hpp"

namespace ferry::nn {
namespace functional {

using detail::check_pair;
using detail::reduce_loss;

namespace {

// A target of ±1 (or 0/1) labels of the input's shape: floating as the input, or integers
// (PyTorch's type promotion takes both) converted to the input's dtype.
Tensor label_target(std::string_view op, const Tensor& input, const Tensor& target) {
  if (!input.defined() || !target.defined())
    throw Error(fmt::format("{}: the input and the target must be defined", op));
  const Tensor t = is_floating(target.dtype()) ? target : target.to(input.dtype());
  check_pair(op, input, t);
  return t;
}

}  // namespace

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::soft_margin_loss)) {
    const ferry::detail::AutocastOp ac(OpId::soft_margin_loss, {&input, &target});
    return soft_margin_loss(ac(input), ac(target), reduction);
  }
  const Tensor t = label_target("soft_margin_loss", input, target);
  // log(1 + exp(-y x)) = -logsigmoid(y x); its gradient -y sigmoid(-y x) is PyTorch's.
  return reduce_loss(neg(logsigmoid(input * t)), reduction);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   Reduction reduction) {
  const Tensor t = label_target("multilabel_soft_margin_loss", input, target);
  if (input.dim() == 0)
    throw ShapeError(
        "multilabel_soft_margin_loss: the input must be [C] or [N, C], got a 0-d "
        "tensor");
  Tensor loss = neg(t * logsigmoid(input) + (1 - t) * logsigmoid(neg(input)));
  if (weight.defined()) loss = loss * weight;
  const std::int64_t class_dim = input.dim() - 1;
  loss = sum(loss, {class_dim}) / double(input.size(class_dim));
  return reduce_loss(loss, reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin,
                            Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::hinge_embedding_loss)) {
    const ferry::detail::AutocastOp ac(OpId::hinge_embedding_loss, {&input, &target});
    return hinge_embedding_loss(ac(input), ac(target), margin, reduction);
  }
  const Tensor t = label_target("hinge_embedding_loss", input, target);
  // PyTorch's two terms: a label that is neither 1 nor -1 takes both.
  const Tensor margin_term = where(ne(t, 1), clamp_min(neg(input) + margin, 0), Scalar(0));
  const Tensor self_term = where(ne(t, -1), input, Scalar(0));
  return reduce_loss(margin_term + self_term, reduction);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::triplet_margin_loss)) {
    const ferry::detail::AutocastOp ac(OpId::triplet_margin_loss, {&anchor, &positive, &negative});
    return triplet_margin_loss(ac(anchor), ac(positive), ac(negative), margin, p, eps, swap,
                               reduction);
  }
  detail::check_defined("triplet_margin_loss", "anchor", anchor);
  detail::check_defined("triplet_margin_loss", "positive", positive);
  detail::check_defined("triplet_margin_loss", "negative", negative);
  if (anchor.dim() != positive.dim() || anchor.dim() != negative.dim())
    throw ShapeError(fmt::format(
        "triplet_margin_loss: the anchor, positive and negative must have the same number of "
        "dims, got {}, {} and {}",
        shape_str(anchor.sizes()), shape_str(positive.sizes()), shape_str(negative.sizes())));
  detail::check_floating("triplet_margin_loss", "anchor", anchor);
  const Tensor d_pos = pairwise_distance(anchor, positive, p, eps);
  Tensor d_neg = pairwise_distance(anchor, negative, p, eps);
  if (swap) d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps));
  return reduce_loss(clamp_min(d_pos - d_neg + margin, 0), reduction);
}

Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative,
                                         const DistanceFunction& distance_function, double margin,
                                         bool swap, Reduction reduction) {
  constexpr const char* fn = "triplet_margin_with_distance_loss";
  detail::check_defined(fn, "anchor", anchor);
  detail::check_defined(fn, "positive", positive);
  detail::check_defined(fn, "negative", negative);
  if (!(margin > 0))
    throw ValueError(fmt::format("{}: expected margin to be greater than 0, got {}", fn, margin));
  if (anchor.dim() != positive.dim() || anchor.dim() != negative.dim())
    throw ShapeError(fmt::format(
        "{}: the anchor, positive and negative must have the same number of dims, got {}, {} and "
        "{}",
        fn, shape_str(anchor.sizes()), shape_str(positive.sizes()), shape_str(negative.sizes())));
  const DistanceFunction d =
      distance_function ? distance_function
                        : [](const Tensor& a, const Tensor& b) { return pairwise_distance(a, b); };
  const Tensor d_pos = d(anchor, positive);
  Tensor d_neg = d(anchor, negative);
  if (swap) d_neg = minimum(d_neg, d(positive, negative));
  return reduce_loss(clamp_min(d_pos - d_neg + margin, 0), reduction);
}

// Note [multilabel_margin_loss as a composition]
// Per sample, the target's valid slots are those before its first -1 (a running product of
// target != -1). The margins 1 - (x[target[k]] - x[i]) for every valid slot k and every class i
// that is no valid slot's class form a [.., C, C] tensor, which is summed. A class named in
// two slots counts twice, as in PyTorch's loop.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  constexpr const char* fn = "multilabel_margin_loss";
  if (ferry::detail::autocast_applies(OpId::multi_margin_loss)) {
    // PyTorch's policy gives it f32, as multi_margin_loss (which has a row here).
    const ferry::detail::AutocastOp ac(OpId::multi_margin_loss, {&input});
    return multilabel_margin_loss(ac(input), target, reduction);
  }
  detail::check_defined(fn, "input", input);
  detail::check_defined(fn, "target", target);
  detail::check_floating(fn, "input", input);
  if (input.dim() > 2 || target.sizes() != input.sizes())
    throw ShapeError(
        fmt::format("{}: expects an input [C] or [N, C] and a target of its shape, got {} and {}",
                    fn, shape_str(input.sizes()), shape_str(target.sizes())));
  if (target.dtype() != DType::i64)
    throw DTypeError(fmt::format("{}: the target must hold i64 class indices, got {}", fn,
                                 dtype_name(target.dtype())));
  const Tensor x = input.dim() == 0 ? input.reshape({1}) : input;
  const Tensor y = target.reshape(x.sizes());
  const std::int64_t classes = x.size(-1);
  if (y.numel() > 0) {
    const auto [lo, hi] = ferry::detail::index_range(y);
    if (lo < -1 || hi >= classes)
      throw ValueError(fmt::format("{}: target holds the class {}, outside [-1, {})", fn,
                                   lo < -1 ? lo : hi, classes));
  }
  const Tensor valid = cumprod(ne(y, Scalar(-1)), -1).to(DType::boolean);  // [.., slots]
  const Tensor slot_class = where(valid, y, Scalar(0));
  const Tensor classes_idx = arange(double(classes), {.dtype = DType::i64, .device = x.device()});
  // is_target[.., i]: some valid slot names class i.
  const Tensor named = logical_and(eq(slot_class.unsqueeze(-1), classes_idx), valid.unsqueeze(-1));
  const Tensor is_target = any(named, {x.dim() - 1});
  const Tensor x_target = gather(x, -1, slot_class);  // [.., slots]
  const Tensor margins = clamp_min(1.0 - (x_target.unsqueeze(-1) - x.unsqueeze(-2)), 0);
  const Tensor counted = logical_and(valid.unsqueeze(-1), logical_not(is_target).unsqueeze(-2));
  Tensor loss = sum(where(counted, margins, Scalar(0.0)), {-2, -1}) / double(classes);
  if (input.dim() == 0) loss = loss.reshape({});
  return reduce_loss(loss, reduction);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::poisson_nll_loss)) {
    const ferry::detail::AutocastOp ac(OpId::poisson_nll_loss, {&input, &target});
    return poisson_nll_loss(ac(input), ac(target), log_input, full, eps, reduction);
  }
  check_pair("poisson_nll_loss", input, target);
  Tensor loss = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    // Stirling's approximation of log(y!), counted where y > 1 (PyTorch's masked_fill); the
    // masked elements see y = 1, so no log(0) reaches the values or the gradient.
    const Tensor counted = gt(target, 1);
    const Tensor y = where(counted, target, Scalar(1));
    const Tensor stirling = y * log(y) - y + log(y * (2 * std::numbers::pi)) * 0.5;
    loss = loss + where(counted, stirling, Scalar(0));
  }
  return reduce_loss(loss, reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full,
                         double eps, Reduction reduction) {
  check_pair("gaussian_nll_loss", input, target);
  detail::check_defined("gaussian_nll_loss", "var", var);
  detail::check_floating("gaussian_nll_loss", "var", var);
  Tensor v = var;
  if (var.sizes() != input.sizes()) {
    const Shape& in = input.sizes();
    const Shape lead(in.begin(), in.end() - (in.empty() ? 0 : 1));
    const Shape& vs = var.sizes();
    if (!in.empty() && vs == lead)
      v = var.unsqueeze(-1);  // one variance per row
    else if (in.empty() || vs.size() != in.size() || vs.back() != 1 ||
             !std::equal(vs.begin(), vs.end() - 1, lead.begin()))
      throw ValueError(fmt::format(
          "gaussian_nll_loss: var must have the input's shape {}, that shape without its last "
          "dim, or with it 1; got {}",
          shape_str(in), shape_str(vs)));
  }
  if (v.numel() > 0)
    // Off the CPU, decided at the next read of the device (Note [Deferred checks]).
    ferry::detail::check_values(
        lt(min(v.detach()), 0).to(DType::i64).reshape({1}),
        [](std::span<const std::int64_t> negative) -> std::string {
          return negative[0] != 0 ? "gaussian_nll_loss: var has negative entries" : "";
        },
        ferry::detail::CheckError::value);
  // PyTorch clamps a clone of var in place under no_grad: the forward sees the clamped values,
  // the gradient flows as through the unclamped ones.
  v = v + (clamp_min(v, eps) - v).detach();
  const Tensor d = input - target;
  Tensor loss = (log(v) + d * d / v) * 0.5;
  if (full) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return reduce_loss(loss, reduction);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, std::int64_t p, double margin,
                         const Tensor& weight, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::multi_margin_loss)) {
    const ferry::detail::AutocastOp ac(OpId::multi_margin_loss, {&input, &weight});
    return multi_margin_loss(ac(input), target, p, margin, ac(weight), reduction);
  }
  detail::check_defined("multi_margin_loss", "input", input);
  detail::check_defined("multi_margin_loss", "target", target);
  detail::check_floating("multi_margin_loss", "input", input);
  if (p != 1 && p != 2)
    throw ValueError(fmt::format("multi_margin_loss: p must be 1 or 2, got {}", p));
  if (input.dim() != 1 && input.dim() != 2)
    throw ShapeError(fmt::format("multi_margin_loss: the input must be [C] or [N, C], got {}",
                                 shape_str(input.sizes())));
  const std::int64_t classes = input.size(-1);
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  const Shape target_shape = input.dim() == 1 ? Shape{} : Shape{x.size(0)};
  if (target.sizes() != target_shape)
    throw ShapeError(fmt::format("multi_margin_loss: the target must have shape {}, got {}",
                                 shape_str(target_shape), shape_str(target.sizes())));
  const Tensor t = ferry::detail::as_index("multi_margin_loss", target).reshape({-1, 1});
  ferry::detail::check_bounds("multi_margin_loss", t, 1, classes, input.sizes());
  if (weight.defined() && weight.sizes() != Shape{classes})
    throw ShapeError(fmt::format("multi_margin_loss: weight must have shape [{}], got {}", classes,
                                 shape_str(weight.sizes())));
  const Tensor z = ferry::relu(x - gather(x, 1, t) + margin);  // PyTorch counts z > 0 only
  Tensor h = p == 2 ? z * z : z;
  if (weight.defined()) h = h * index_select(weight.to(x.dtype()), 0, t.reshape({-1})).unsqueeze(1);
  const Tensor own =
      eq(arange(double(classes), {.dtype = DType::i64, .device = x.device()}).unsqueeze(0), t);
  const Tensor loss = sum(where(own, Scalar(0), h), {1}) / double(classes);
  return reduce_loss(loss.reshape(target.sizes()), reduction);
}

}  // namespace functional

// ---------------------------------------------------------------- modules

Tensor SoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::soft_margin_loss(input, target, reduction);
}

MultiLabelSoftMarginLoss::MultiLabelSoftMarginLoss(const Tensor& w, Reduction r) : reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
}

Tensor MultiLabelSoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::multilabel_soft_margin_loss(input, target, weight, reduction);
}

Tensor HingeEmbeddingLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::hinge_embedding_loss(input, target, margin, reduction);
}

Tensor MultiLabelMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::multilabel_margin_loss(input, target, reduction);
}

TripletMarginWithDistanceLoss::TripletMarginWithDistanceLoss(
    functional::DistanceFunction distance_function_, double margin_, bool swap_,
    Reduction reduction_)
    : distance_function(std::move(distance_function_)),
      margin(margin_),
      swap(swap_),
      reduction(reduction_) {
  if (!(margin > 0))
    throw ValueError(fmt::format(
        "TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {}", margin));
}

Tensor TripletMarginWithDistanceLoss::forward(const Tensor& anchor, const Tensor& positive,
                                              const Tensor& negative) {
  return functional::triplet_margin_with_distance_loss(anchor, positive, negative,
                                                       distance_function, margin, swap, reduction);
}

Tensor TripletMarginLoss::forward(const Tensor& anchor, const Tensor& positive,
                                  const Tensor& negative) {
  return functional::triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                         reduction);
}

Tensor PoissonNLLLoss::forward(const Tensor& log_input_or_rate, const Tensor& target) {
  return functional::poisson_nll_loss(log_input_or_rate, target, log_input, full, eps, reduction);
}

Tensor GaussianNLLLoss::forward(const Tensor& input, const Tensor& target, const Tensor& var) {
  return functional::gaussian_nll_loss(input, target, var, full, eps, reduction);
}

MultiMarginLoss::MultiMarginLoss(std::int64_t p, double margin, const Tensor& w, Reduction r)
    : p(p), margin(margin), reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
}

Tensor MultiMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::multi_margin_loss(input, target, p, margin, weight, reduction);
}

}  // namespace ferry::nn
