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

#include <span>
#include <string>
#include <string_view>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "deferred_checks.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"
#include "ops_internal.hpp"

namespace ferry::nn {
namespace functional {

using detail::check_pair;
using detail::reduce_loss;
namespace {

void check_target(const char* op, const Tensor& input, const Tensor& target,
                  const Shape& expected) {
  if (is_floating(target.dtype()))
    throw DTypeError(fmt::format(
        "{}: the target is {} (shape {}): a class-index target must be i64 or i32 "
        "(cross_entropy also takes class probabilities: a floating target of the input's shape)",
        op, dtype_name(target.dtype()), shape_str(target.sizes())));
  if (target.dtype() != DType::i64 && target.dtype() != DType::i32)
    throw DTypeError(
        fmt::format("{}: the target must hold class indices as i64 or "
                    "i32, got {} (shape {})",
                    op, dtype_name(target.dtype()), shape_str(target.sizes())));
  if (target.sizes() != expected)
    throw ShapeError(
        fmt::format("{}: for an input of shape {} the target must have shape {} (the input's shape "
                    "without the class dim), got {}",
                    op, shape_str(input.sizes()), shape_str(expected), shape_str(target.sizes())));
  if (target.device() != input.device())
    throw DeviceMismatchError(
        fmt::format("{}: the input is on {} but the target is on {}; move them to one device", op,
                    input.device().str(), target.device().str()));
}

}  // namespace

namespace {

// The checks every form shares: a floating input of [C], [N, C] or [N, C, ...].
std::int64_t class_dim_of(const char* op, const Tensor& input, const Tensor& target) {
  if (!input.defined() || !target.defined())
    throw Error(fmt::format("{}: the input and the target must be defined", op));
  if (!is_floating(input.dtype()))
    throw DTypeError(
        fmt::format("{}: the input ({}) must be floating, got {} (shape {})", op,
                    std::string_view(op) == "nll_loss" ? "log-probabilities" : "logits",
                    dtype_name(input.dtype()), shape_str(input.sizes())));
  if (input.dim() == 0)
    throw ShapeError(
        fmt::format("{}: the input must be [C], [N, C] or [N, C, d1, ...], got a 0-d tensor", op));
  return input.dim() == 1 ? 0 : 1;
}

void check_weight(const char* op, const Tensor& weight, const Tensor& input, std::int64_t classes) {
  if (!weight.defined()) return;
  if (weight.sizes() != Shape{classes})
    throw ShapeError(fmt::format("{}: weight must have one value per class, shape [{}], got {}", op,
                                 classes, shape_str(weight.sizes())));
  if (!is_floating(weight.dtype()))
    throw DTypeError(
        fmt::format("{}: weight must be floating, got {}", op, dtype_name(weight.dtype())));
  if (weight.device() != input.device())
    throw DeviceMismatchError(
        fmt::format("{}: the input is on {} but weight is on {}; move them to one device", op,
                    input.device().str(), weight.device().str()));
}

// Note [cross_entropy from ops], from the log-probabilities `lsm`: the one
// body of cross_entropy's class-index form and of nll_loss.
Tensor nll_of(const char* op, const Tensor& input, const Tensor& lsm, const Tensor& target,
              const CrossEntropyOptions& options) {
  const std::int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const std::int64_t classes = input.size(class_dim);
  Shape expected = input.sizes();
  expected.erase(expected.begin() + class_dim);
  check_target(op, input, target, expected);
  const double eps = options.label_smoothing;
  const Tensor& weight = options.weight;
  const Tensor ignored = eq(target, options.ignore_index);
  const Tensor safe = where(ignored, Scalar(0), target);
  if (safe.numel() > 0)
    // At the call on the CPU, else at this thread's next read of the device (Note [Deferred
    // checks]): a training step on a GPU does not wait here for its forward pass.
    ferry::detail::check_values(
        ferry::detail::index_range_values(safe),
        [op = std::string(op), classes, shape = input.sizes(),
         ignore = options.ignore_index](std::span<const std::int64_t> v) -> std::string {
          if (v[0] >= 0 && v[1] < classes) return {};
          return fmt::format(
              "{}: target {} is out of range for {} classes (input shape {}); targets must be "
              "in [0, {}] or equal ignore_index ({})",
              op, v[0] < 0 ? v[0] : v[1], classes, shape_str(shape), classes - 1, ignore);
        });
  // The targets' range is checked above; the kernels write 0 for one out of range meanwhile.
  using ferry::detail::gather_in_range;
  const Tensor picked = class_dim == 0 ? gather_in_range(lsm, 0, safe.reshape({1})).reshape({})
                                       : gather_in_range(lsm, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor w;   // the weight of each target, 0 where ignored: the mean's denominator
  Tensor wc;  // the class weights, broadcast along the class dim
  Tensor nll;
  if (weight.defined()) {
    wc = weight.to(lsm.dtype());
    w = where(
        ignored, 0.0,
        ferry::detail::index_select_in_range(wc, 0, safe.reshape({-1})).reshape(target.sizes()));
    nll = where(ignored, 0.0, -(picked * w));
    Shape bshape(std::size_t(input.dim()), 1);
    bshape[std::size_t(class_dim)] = classes;
    wc = wc.reshape(bshape);
  } else {
    w = ne(target, options.ignore_index).to(lsm.dtype());
    nll = where(ignored, 0.0, -picked);
  }
  auto reduce = [&](const Tensor& per_target) {
    if (options.reduction != Reduction::mean) return reduce_loss(per_target, options.reduction);
    return sum(per_target) / sum(w);
  };
  if (eps == 0.0) return reduce(nll);
  const Tensor all = wc.defined() ? lsm * wc : lsm;
  const Tensor smooth = where(ignored, 0.0, -sum(all, {class_dim}));
  return reduce(nll) * (1.0 - eps) + reduce(smooth) * (eps / double(classes));
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options) {
  const std::int64_t class_dim = class_dim_of("cross_entropy", input, target);
  const std::int64_t classes = input.size(class_dim);
  const double eps = options.label_smoothing;
  if (!(eps >= 0.0 && eps <= 1.0))
    throw Error(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", eps));
  check_weight("cross_entropy", options.weight, input, classes);
  const Tensor lsm = log_softmax(input, class_dim);
  // As PyTorch: a target of the input's shape holds class probabilities, any
  // other holds class indices (a floating one is refused there).
  if (!is_floating(target.dtype()) || target.sizes() != input.sizes())
    return nll_of("cross_entropy", input, lsm, target, options);
  // Class probabilities: -sum_c w_c t_c lsm_c per element, the target smoothed
  // toward 1/C; mean divides by the element count (PyTorch's rule here).
  Tensor t = eps > 0 ? target * (1.0 - eps) + eps / double(classes) : target;
  Tensor terms = lsm * t;
  if (options.weight.defined()) {
    Shape bshape(std::size_t(input.dim()), 1);
    bshape[std::size_t(class_dim)] = classes;
    terms = terms * options.weight.to(lsm.dtype()).reshape(bshape);
  }
  return reduce_loss(neg(sum(terms, {class_dim})), options.reduction);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options) {
  if (ferry::detail::autocast_applies(OpId::nll_loss)) {
    const ferry::detail::AutocastOp ac(OpId::nll_loss, {&input, &options.weight});
    return nll_loss(ac(input), target,
                    {.weight = ac(options.weight),
                     .ignore_index = options.ignore_index,
                     .reduction = options.reduction});
  }
  const std::int64_t class_dim = class_dim_of("nll_loss", input, target);
  check_weight("nll_loss", options.weight, input, input.size(class_dim));
  return nll_of("nll_loss", input, input, target,
                {.weight = options.weight,
                 .ignore_index = options.ignore_index,
                 .reduction = options.reduction});
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::mse_loss)) {
    const ferry::detail::AutocastOp ac(OpId::mse_loss, {&input, &target});
    return mse_loss(ac(input), ac(target), reduction);
  }
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
  return reduce_loss(d * d, reduction);
}

// ---- the element-wise losses, PyTorch's definitions (torch.nn.functional).

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::l1_loss)) {
    const ferry::detail::AutocastOp ac(OpId::l1_loss, {&input, &target});
    return l1_loss(ac(input), ac(target), reduction);
  }
  check_pair("l1_loss", input, target);
  return reduce_loss(abs(input - target), reduction);
}

// 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta = 0: l1).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  if (ferry::detail::autocast_applies(OpId::smooth_l1_loss)) {
    const ferry::detail::AutocastOp ac(OpId::smooth_l1_loss, {&input, &target});
    return smooth_l1_loss(ac(input), ac(target), reduction, beta);
  }
  check_pair("smooth_l1_loss", input, target);
  if (beta < 0) throw ValueError(fmt::format("smooth_l1_loss: beta must be >= 0, got {}", beta));
  const Tensor d = abs(input - target);
  if (beta == 0) return reduce_loss(d, reduction);
  return reduce_loss(where(lt(d, beta), d * d * (0.5 / beta), d - 0.5 * beta), reduction);
}

// 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  if (ferry::detail::autocast_applies(OpId::huber_loss)) {
    const ferry::detail::AutocastOp ac(OpId::huber_loss, {&input, &target});
    return huber_loss(ac(input), ac(target), reduction, delta);
  }
  check_pair("huber_loss", input, target);
  if (!(delta > 0)) throw ValueError(fmt::format("huber_loss: delta must be > 0, got {}", delta));
  const Tensor d = abs(input - target);
  return reduce_loss(where(lt(d, delta), d * d * 0.5, (d - 0.5 * delta) * delta), reduction);
}

// target (log target - input), 0 where target is 0; with log_target the
// target is given as its log. batchmean divides the sum by the batch size.
Tensor kl_div(const Tensor& input, const Tensor& target, std::string_view reduction,
              bool log_target) {
  if (ferry::detail::autocast_applies(OpId::kl_div)) {
    const ferry::detail::AutocastOp ac(OpId::kl_div, {&input, &target});
    return kl_div(ac(input), ac(target), reduction, log_target);
  }
  check_pair("kl_div", input, target);
  const Tensor terms =
      log_target ? exp(target) * (target - input) : xlogy(target, target) - target * input;
  if (reduction == "none") return terms;
  if (reduction == "sum") return sum(terms);
  if (reduction == "mean") return mean(terms);
  if (reduction == "batchmean")
    return input.dim() == 0 ? sum(terms) : sum(terms) / double(input.size(0));
  throw ValueError(
      fmt::format("kl_div: reduction must be none, sum, mean or batchmean, got \"{}\"", reduction));
}

// -w (t log x + (1 - t) log(1 - x)), each log clamped at -100 as PyTorch's.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            Reduction reduction) {
  {
    ferry::detail::AutocastOp banned(OpId::binary_cross_entropy, {&input, &target, &weight});
  }  // refused under autocast
  check_pair("binary_cross_entropy", input, target);
  if (input.numel() > 0) {
    // Off the CPU, decided at the next read of the device (Note [Deferred checks]).
    const Tensor x = input.detach();
    ferry::detail::check_values(
        stack({lt(min(x), 0), gt(max(x), 1)}).to(DType::i64),
        [](std::span<const std::int64_t> v) -> std::string {
          if (v[0] == 0 && v[1] == 0) return {};
          return "binary_cross_entropy: the input must hold probabilities in [0, 1]";
        },
        ferry::detail::CheckError::value);
  }
  // One node with PyTorch's backward (autograd/formulas_nn.cpp), not the composition's.
  const Tensor loss = autograd::untracked([&] {
    const Tensor log_x = clamp_min(log(input), -100);
    const Tensor log_1mx = clamp_min(log1p(neg(input)), -100);
    const Tensor l = neg(target * log_x + (1 - target) * log_1mx);
    return weight.defined() ? l * weight : l;
  });
  autograd::record_binary_cross_entropy(input, target, weight, loss);
  return reduce_loss(loss, reduction);
}

// (1 - t) x + (1 + (pw - 1) t) log(1 + exp(-x)), the log written as
// log1p(exp(-|x|)) + max(-x, 0) so that it cannot overflow (PyTorch's form).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::binary_cross_entropy_with_logits)) {
    const ferry::detail::AutocastOp ac(OpId::binary_cross_entropy_with_logits,
                                       {&input, &target, &weight, &pos_weight});
    return binary_cross_entropy_with_logits(ac(input), ac(target), ac(weight), ac(pos_weight),
                                            reduction);
  }
  check_pair("binary_cross_entropy_with_logits", input, target);
  // PyTorch's form: its gradient is (1 - t) - lw (1 - sigmoid(x)) everywhere. A softplus
  // written with |x| and max(-x, 0) has the right values but, at x = 0 exactly (a zero-initialised
  // last layer), both kinks take a zero gradient: 1 - t instead of 1/2 - t.
  const Tensor log_sig = logsigmoid(input);
  Tensor loss = pos_weight.defined()
                    ? (1 - target) * input - ((pos_weight - 1) * target + 1) * log_sig
                    : (1 - target) * input - log_sig;
  if (weight.defined()) loss = loss * weight;
  return reduce_loss(loss, reduction);
}

// max(0, -y (x1 - x2) + margin).
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::margin_ranking_loss)) {
    const ferry::detail::AutocastOp ac(OpId::margin_ranking_loss, {&input1, &input2, &target});
    return margin_ranking_loss(ac(input1), ac(input2), ac(target), margin, reduction);
  }
  check_pair("margin_ranking_loss", input1, input2);
  return reduce_loss(ferry::relu(neg(target) * (input1 - input2) + margin), reduction);
}

// 1 - cos(x1, x2) where y = 1, max(0, cos - margin) where y = -1; cos over
// dim 1 (dim 0 for vectors) as PyTorch computes it, with 1e-12 added to each
// squared magnitude.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin, Reduction reduction) {
  if (ferry::detail::autocast_applies(OpId::cosine_embedding_loss)) {
    const ferry::detail::AutocastOp ac(OpId::cosine_embedding_loss, {&input1, &input2, &target});
    return cosine_embedding_loss(ac(input1), ac(input2), ac(target), margin, reduction);
  }
  check_pair("cosine_embedding_loss", input1, input2);
  if (input1.dim() != 1 && input1.dim() != 2)
    throw ShapeError(fmt::format("cosine_embedding_loss: the inputs must be 1-D or 2-D, got {}",
                                 shape_str(input1.sizes())));
  const std::int64_t d = input1.dim() - 1;
  const Tensor prod = sum(input1 * input2, {d});
  const Tensor m1 = sum(input1 * input1, {d}) + 1e-12, m2 = sum(input2 * input2, {d}) + 1e-12;
  const Tensor cos = prod / sqrt(m1 * m2);
  const Tensor loss =
      where(eq(target, 1), 1 - cos, where(eq(target, -1), ferry::relu(cos - margin), Scalar(0)));
  return reduce_loss(loss, reduction);
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

NLLLoss::NLLLoss(functional::NllLossOptions opts) : options(std::move(opts)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::nll_loss(input, target, options);
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::l1_loss(input, target, reduction);
}

Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::smooth_l1_loss(input, target, reduction, beta);
}

Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::huber_loss(input, target, reduction, delta);
}

Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::kl_div(input, target, reduction, log_target);
}

BCELoss::BCELoss(const Tensor& w, Reduction r) : reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
}

Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy(input, target, weight, reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(const Tensor& w, Reduction r, const Tensor& pw)
    : reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
  if (pw.defined()) pos_weight = register_buffer("pos_weight", pw);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction);
}

Tensor MarginRankingLoss::forward(const Tensor& input1, const Tensor& input2,
                                  const Tensor& target) {
  return functional::margin_ranking_loss(input1, input2, target, margin, reduction);
}

Tensor CosineEmbeddingLoss::forward(const Tensor& input1, const Tensor& input2,
                                    const Tensor& target) {
  return functional::cosine_embedding_loss(input1, input2, target, margin, reduction);
}

}  // namespace ferry::nn
