// ferry/nn/functional.hpp — the stateless forms of the layers and the losses
// (PyTorch's torch.nn.functional). Every function is built from ferry's
// differentiable ops, so autograd differentiates it and it runs on every
// device that has those ops. Errors are typed (ShapeError, DTypeError, Error)
// and name the function.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ferry/tensor.hpp"

namespace ferry::nn {

// How a loss reduces its per-element values.
enum class Reduction { none, mean, sum };

}  // namespace ferry::nn

namespace ferry::nn::functional {

// x · weightᵀ + bias over the last dim: x [..., in], weight [out, in], bias
// [out] or undefined. ShapeError when the sizes do not fit.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// Training: zeroes each element with probability p and scales the others by
// 1 / (1 - p); the mask comes from ferry's seeded generator, so a seed gives
// the same mask on every device. p = 0 or !training returns x; p = 1 gives
// zeros. Error unless 0 <= p <= 1.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// dropout of whole channels: one draw per channel of [N, C, H, W] (or unbatched [C, H, W]),
// the channel zeroed or scaled by 1 / (1 - p). ShapeError for another rank.
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

// Batch normalisation over dim 1 of x [N, C, *] (PyTorch's F.batch_norm). With `training`,
// normalises with the batch's statistics (biased variance) and, when running_mean / running_var are
// defined, updates them in place as (1 - momentum) · running + momentum · batch, with the unbiased
// batch variance. Otherwise normalises with the running statistics. weight and bias ([C]) are
// optional.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

// Group normalisation (F.group_norm): x [N, C, *] split into num_groups groups of C /
// num_groups channels, each group of each sample normalised with its own mean and biased
// variance, then weight and bias ([C], optional) per channel. ShapeError unless num_groups
// divides C.
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// Instance normalisation (F.instance_norm): every channel of every sample of x [N, C, *]
// normalised over its spatial dims. With use_input_stats, the statistics are the input's and
// running_mean / running_var, when given ([C]), move toward their mean over the batch (the
// unbiased variance) by momentum, in place; otherwise the running statistics normalise.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {},
                     const Tensor& running_var = {}, const Tensor& weight = {},
                     const Tensor& bias = {}, bool use_input_stats = true, double momentum = 0.1,
                     double eps = 1e-5);

// Local response normalisation across channels (F.local_response_norm): x [N, C, *] (3 or
// more dims) divided by (k + alpha / size * the sum of squares over `size` neighbouring
// channels, zero-padded)^beta.
Tensor local_response_norm(const Tensor& x, std::int64_t size, double alpha = 1e-4,
                           double beta = 0.75, double k = 1.0);

// Root-mean-square normalisation over the last normalized_shape.size() dims (F.rms_norm):
// x / sqrt(mean(x^2) + eps) · weight (optional, normalized_shape), in f32 for the 16-bit
// dtypes. eps unset: the machine epsilon of x's dtype, as PyTorch's.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

// ferry::layer_norm, here for symmetry with PyTorch's functional.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor relu(const Tensor& x);
// approximate: "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none");

struct CrossEntropyOptions {
  Tensor weight;  // per-class rescaling weights [C]; undefined: all 1
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0.0;  // in [0, 1]
};

// PyTorch's cross_entropy with class-index targets. input: [N, C],
// [N, C, d1, ...] or [C] (unbatched) logits, floating; target: class indices
// (i64 or i32) of shape [N], [N, d1, ...] or [] respectively. Per element,
//   l = -w[t] · log_softmax(input)[t]                 (0 where t == ignore_index)
// and with label smoothing ε over C classes
//   l = (1 - ε) · l + ε / C · (-Σ_c w[c] · log_softmax(input)[c])   (0 where ignored)
// mean divides the sum by Σ w[t] over the targets not ignored (NaN when every
// target is ignored, as in PyTorch); sum sums; none keeps the target's shape.
// A floating target of the input's shape holds class probabilities instead:
//   l = -Σ_c w[c] · t'[c] · log_softmax(input)[c],  t' = (1 - ε) t + ε / C,
// and mean divides by the number of elements (ignore_index does not apply).
// Errors: a target out of [0, C) that is not ignore_index is a ShapeError
// naming it; mismatched shapes are ShapeErrors.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});

struct NllLossOptions {
  Tensor weight;  // per-class rescaling weights [C]; undefined: all 1
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
};
// PyTorch's nll_loss: cross_entropy's class-index form on log-probabilities
// (input [C], [N, C] or [N, C, d1, ...], e.g. from log_softmax), without the
// softmax and the label smoothing.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options = {});

// (input - target)², reduced. The shapes must be equal (ShapeError): PyTorch
// broadcasts them with a warning that it is likely a bug; ferry refuses.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

// The other losses of torch.nn.functional, with PyTorch's definitions and
// defaults; the input and target of one shape (ShapeError), floating
// (DTypeError). smooth_l1 is quadratic below beta, huber below delta.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::mean, double beta = 1.0);
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                  double delta = 1.0);
// input: log-probabilities; reduction "none", "sum", "mean" or "batchmean".
Tensor kl_div(const Tensor& input, const Tensor& target, std::string_view reduction = "mean",
              bool log_target = false);
// input: probabilities in [0, 1] (ValueError otherwise); weight broadcasts.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = Reduction::mean);
// input: logits; pos_weight weighs the positive term (broadcast over the last dim).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        Reduction reduction = Reduction::mean);
// target holds 1 or -1.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin = 0, Reduction reduction = Reduction::mean);
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin = 0, Reduction reduction = Reduction::mean);

// x / max(||x||_p over dim, eps).
Tensor normalize(const Tensor& x, double p = 2, std::int64_t dim = 1, double eps = 1e-12);
// x1 . x2 / max(||x1|| ||x2||, eps) over dim (inputs broadcast).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t dim = 1,
                         double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6,
                         bool keepdim = false);
Tensor softmin(const Tensor& x, std::int64_t dim);  // softmax(-x)
// The first half of dim times sigmoid of the second half (dim even).
Tensor glu(const Tensor& x, std::int64_t dim = -1);
// F.prelu: x where x > 0, weight x elsewhere; weight has one element or one per channel (dim 1
// of x; x of fewer than 2 dims has one channel). ShapeError for other sizes.
Tensor prelu(const Tensor& x, const Tensor& weight);

}  // namespace ferry::nn::functional
