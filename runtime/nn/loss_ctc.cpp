// runtime/nn/loss_ctc.cpp — the CTC loss (functional::ctc_loss, nn::CTCLoss).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/loss.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

// Note [CTC as a composition]
// The loss is the forward (alpha) recursion of Graves et al. in log space over the extended
// target l' (a blank, then each label followed by a blank: 2 S + 1 positions), run for all
// samples at once: alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s - 1),
// alpha_{t-1}(s - 2) where l'(s) is a label unlike l'(s - 2)) + log_probs[t, l'(s)], frozen
// past a sample's input length; the loss is -logsumexp of the last two positions of its own
// target. Every step is differentiable ops, so autograd runs the backward (beta) recursion;
// the gradient with respect to log_probs is -(the posterior of each frame's label), where
// PyTorch's kernel returns exp(log_probs) minus it: the log_softmax that makes log_probs
// removes that term (its rows of exp sum to one), so gradients to the logits are the same.
// Unreachable positions hold a large negative number, not -inf: the logsumexp of three -inf
// has a NaN gradient, which would reach every weight through zero multipliers.

namespace ferry::nn::functional {

namespace {

std::vector<std::int64_t> host_lengths(const char* which, const Tensor& t) {
  if (!t.defined() || t.dim() > 1 || is_floating(t.dtype()) || t.dtype() == DType::boolean)
    throw DTypeError(fmt::format(
        "ctc_loss: {} must be a 0-D or 1-D integer tensor, got {}", which,
        t.defined() ? fmt::format("{} of shape {}", dtype_name(t.dtype()), shape_str(t.sizes()))
                    : std::string("an undefined tensor")));
  return t.to(DType::i64).to_vector<std::int64_t>();
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets,
                const std::vector<std::int64_t>& input_lengths,
                const std::vector<std::int64_t>& target_lengths, std::int64_t blank,
                Reduction reduction, bool zero_infinity) {
  detail::check_defined("ctc_loss", "log_probs", log_probs);
  detail::check_defined("ctc_loss", "targets", targets);
  detail::check_floating("ctc_loss", "log_probs", log_probs);
  if (log_probs.dim() != 2 && log_probs.dim() != 3)
    throw ShapeError(fmt::format("ctc_loss: log_probs must be [T, N, C] or [T, C], got shape {}",
                                 shape_str(log_probs.sizes())));
  if (is_floating(targets.dtype()) || targets.dtype() == DType::boolean)
    throw DTypeError(
        fmt::format("ctc_loss: targets must hold class indices (an integer dtype), "
                    "got {}",
                    dtype_name(targets.dtype())));
  const bool batched = log_probs.dim() == 3;
  const Tensor lp_in = batched ? log_probs : log_probs.unsqueeze(1);
  const std::int64_t frames = lp_in.size(0), batch = lp_in.size(1), classes = lp_in.size(2);
  if (frames == 0)
    throw ShapeError(
        fmt::format("ctc_loss: log_probs has no frames (shape {})", shape_str(log_probs.sizes())));
  if (blank < 0 || blank >= classes)
    throw ValueError(fmt::format("ctc_loss: blank must be in [0, {}), got {}", classes, blank));
  if (std::int64_t(input_lengths.size()) != batch || std::int64_t(target_lengths.size()) != batch)
    throw ShapeError(
        fmt::format("ctc_loss: {} input lengths and {} target lengths for a batch of {}",
                    input_lengths.size(), target_lengths.size(), batch));
  std::int64_t longest = 0, total = 0;
  for (std::int64_t n = 0; n < batch; ++n) {
    if (input_lengths[n] < 0 || input_lengths[n] > frames)
      throw ValueError(fmt::format("ctc_loss: input length {} of sample {} is not in [0, {}]",
                                   input_lengths[n], n, frames));
    if (target_lengths[n] < 0)
      throw ValueError(
          fmt::format("ctc_loss: target length {} of sample {} is negative", target_lengths[n], n));
    longest = std::max(longest, target_lengths[n]);
    total += target_lengths[n];
  }
  // Each sample's labels, from padded [N, S] (or unbatched [S]) or concatenated targets.
  const std::vector<std::int64_t> flat = targets.to(DType::i64).to_vector<std::int64_t>();
  const bool padded = batched ? targets.dim() == 2 : true;
  const std::int64_t row = padded ? (targets.dim() == 0 ? 0 : targets.size(-1)) : 0;
  if (padded ? (targets.dim() != (batched ? 2 : 1) || (batched && targets.size(0) != batch) ||
                longest > row)
             : (targets.dim() != 1 || targets.numel() != total))
    throw ShapeError(fmt::format(
        "ctc_loss: targets of shape {} do not fit target lengths adding up to {} (longest {}): "
        "give [N, S] with S at least the longest, or the {} labels concatenated",
        shape_str(targets.sizes()), total, longest, total));
  const std::int64_t positions = 2 * longest + 1;
  std::vector<std::int64_t> ext(std::size_t(batch * positions), blank);
  std::vector<std::uint8_t> skip(ext.size(), 0), first(ext.size(), 0);
  std::vector<std::int64_t> last(static_cast<std::size_t>(batch)),
      before_last(static_cast<std::size_t>(batch));
  std::int64_t offset = 0;
  for (std::int64_t n = 0; n < batch; ++n) {
    const std::int64_t len = target_lengths[n];
    const std::int64_t start = padded ? n * row : offset;
    for (std::int64_t s = 0; s < len; ++s) {
      const std::int64_t label = flat[std::size_t(start + s)];
      if (label < 0 || label >= classes)
        throw ValueError(
            fmt::format("ctc_loss: label {} of sample {} is not in [0, {})", label, n, classes));
      ext[std::size_t(n * positions + 2 * s + 1)] = label;
      // A label may follow the label before the blank before it unless they are the same.
      if (s > 0 && label != flat[std::size_t(start + s - 1)])
        skip[std::size_t(n * positions + 2 * s + 1)] = 1;
    }
    first[std::size_t(n * positions)] = 1;
    if (len > 0) first[std::size_t(n * positions + 1)] = 1;
    last[std::size_t(n)] = 2 * len;
    before_last[std::size_t(n)] = std::max<std::int64_t>(2 * len - 1, 0);
    offset += len;
  }
  // f32 for 16-bit input; NEG stands for log 0 (Note [CTC as a composition]).
  const DType dt = log_probs.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor lp = lp_in.to(dt);
  const Device dev = lp.device();
  const double kLogZero = -1e30;
  auto on_device = [&](const auto& v, const Shape& shape) { return tensor(v, shape).to(dev); };
  const Tensor ext_t = on_device(ext, {1, batch, positions});
  const Tensor skip_t = on_device(skip, {batch, positions}).to(DType::boolean);
  const Tensor first_t = on_device(first, {batch, positions}).to(DType::boolean);
  // The log-probability of each frame's extended label: [T, N, 2 S + 1].
  const Tensor emit = gather(lp, 2, ext_t.expand({frames, batch, positions}));
  std::vector<std::int64_t> frames_of(input_lengths.begin(), input_lengths.end());
  const Tensor frames_t = on_device(frames_of, {batch, 1});
  Tensor alpha = where(first_t, emit.select(0, 0), kLogZero);
  const Tensor pad1 = full({batch, 1}, kLogZero, {.dtype = dt, .device = dev});
  const Tensor pad2 = full({batch, 2}, kLogZero, {.dtype = dt, .device = dev});
  for (std::int64_t t = 1; t < frames; ++t) {
    const Tensor a1 = positions > 1 ? cat({pad1, alpha.narrow(1, 0, positions - 1)}, 1) : pad1;
    const Tensor a2 =
        positions > 2 ? where(skip_t, cat({pad2, alpha.narrow(1, 0, positions - 2)}, 1), kLogZero)
                      : full({batch, positions}, kLogZero, {.dtype = dt, .device = dev});
    const Tensor next = logsumexp(stack({alpha, a1, a2}, 0), {0}) + emit.select(0, t);
    alpha = where(gt(frames_t, Scalar(t)), next, alpha);
  }
  // -log p = -logsumexp(alpha at the final blank, alpha at the last label).
  const Tensor at_last = gather(alpha, 1, on_device(last, {batch, 1}));
  std::vector<std::uint8_t> has_label(static_cast<std::size_t>(batch));
  for (std::int64_t n = 0; n < batch; ++n) has_label[std::size_t(n)] = target_lengths[n] > 0;
  const Tensor at_before = where(on_device(has_label, {batch, 1}).to(DType::boolean),
                                 gather(alpha, 1, on_device(before_last, {batch, 1})), kLogZero);
  Tensor ll = logsumexp(cat({at_last, at_before}, 1), {1});
  // A sample with no frames has probability one for an empty target, zero otherwise.
  std::vector<std::uint8_t> no_frames(static_cast<std::size_t>(batch));
  for (std::int64_t n = 0; n < batch; ++n) no_frames[std::size_t(n)] = input_lengths[n] == 0;
  const Tensor empty_input = on_device(no_frames, {batch}).to(DType::boolean);
  std::vector<double> empty_ll(static_cast<std::size_t>(batch));
  for (std::int64_t n = 0; n < batch; ++n)
    empty_ll[std::size_t(n)] = target_lengths[n] ? kLogZero : 0.0;
  ll = where(empty_input, on_device(empty_ll, {batch}).to(dt), ll);
  const Tensor unreachable = lt(ll, Scalar(kLogZero / 2));
  Tensor loss =
      where(unreachable, zero_infinity ? 0.0 : std::numeric_limits<double>::infinity(), neg(ll));
  if (reduction == Reduction::mean) {
    std::vector<double> divisor(static_cast<std::size_t>(batch));
    for (std::int64_t n = 0; n < batch; ++n)
      divisor[std::size_t(n)] = double(std::max<std::int64_t>(target_lengths[n], 1));
    loss = mean(loss / on_device(divisor, {batch}).to(dt));
  } else if (reduction == Reduction::sum) {
    loss = sum(loss);
  } else if (!batched) {
    loss = loss.squeeze(0);
  }
  return loss.to(log_probs.dtype());
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, std::int64_t blank, Reduction reduction,
                bool zero_infinity) {
  return ctc_loss(log_probs, targets, host_lengths("input_lengths", input_lengths),
                  host_lengths("target_lengths", target_lengths), blank, reduction, zero_infinity);
}

}  // namespace ferry::nn::functional

namespace ferry::nn {

Tensor CTCLoss::forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths) {
  return functional::ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction,
                              zero_infinity);
}

}  // namespace ferry::nn
