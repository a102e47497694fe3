// ferry/nn/functional.hpp — the stateless forms of the layers and the losses
// (PyTorch's torch.nn.functional). Every function is built from ferry's
// differentiable ops, so autograd differentiates it and it runs on every
// device that has those ops. Errors are typed (ShapeError, DTypeError, Error)
// and name the function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// dropout2d's rule for [N, C, L] (or [C, L]) and for [N, C, D, H, W] (or [C, D, H, W]):
// F.dropout1d and F.dropout3d. ShapeError for another rank.
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout3d(const Tensor& x, double p = 0.5, bool training = true);
// Alpha dropout (Klambauer et al., for SELU networks; F.alpha_dropout): in training, each
// element is dropped with probability p to SELU's negative saturation -λα = -1.7581 rather
// than 0, and the result is a · x + b with a and b chosen so that an input of mean 0 and
// variance 1 keeps them. feature_alpha_dropout drops whole channels (one draw per [N, C]
// element of x [N, C, *]). As PyTorch's, `training` defaults to false (the identity); p = 1
// gives zeros. Error unless 0 <= p <= 1.
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
// Randomized leaky ReLU (F.rrelu): x where x > 0, else x times a slope drawn from U(lower,
// upper) per element in training, and (lower + upper) / 2 otherwise (leaky_relu; `training`
// defaults to false, as PyTorch's). The gradient is the slope used.
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3,
             bool training = false);
// Gumbel-softmax (F.gumbel_softmax): softmax((logits + g) / tau) along dim with g standard
// Gumbel noise (-log of an exponential draw); hard: the one-hot of its argmax, whose gradient is
// the soft sample's (straight-through). Error unless tau > 0.
Tensor gumbel_softmax(const Tensor& logits, double tau = 1, bool hard = false,
                      std::int64_t dim = -1);

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

// F.embedding's options (sparse gradients are not offered: ferry has no sparse tensors).
struct EmbeddingOptions {
  // Lookups of this row (negative counts from the end) give it no gradient.
  std::optional<std::int64_t> padding_idx;
  // Set: before the lookup, each looked-up row whose norm_type-norm exceeds it is scaled
  // down to it, in place in the weight (ferry::embedding_renorm_), as PyTorch's.
  std::optional<double> max_norm;
  double norm_type = 2;
  // Each lookup's gradient divided by its index's count in the input (ferry::embedding).
  bool scale_grad_by_freq = false;
};
// F.embedding(input, weight, ...): weight [num_embeddings, dim] looked up at input (i64 or
// i32, any shape) -> input.shape + [dim].
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingOptions& options = {});

// F.embedding_bag's options (sparse gradients are not offered: ferry has no sparse tensors).
struct EmbeddingBagOptions {
  std::string mode = "mean";  // "sum", "mean" or "max"
  // offsets holds one more entry than there are bags: the end of the last.
  bool include_last_offset = false;
  // Entries equal to it (negative counts from the end) are left out of their bag (and of the
  // mean's count); that row gets no gradient.
  std::optional<std::int64_t> padding_idx;
  // As EmbeddingOptions': renormalise the rows the input names first; scale each entry's
  // gradient by 1 / its index's count in the whole input.
  std::optional<double> max_norm;
  double norm_type = 2;
  bool scale_grad_by_freq = false;
};
// F.embedding_bag: the rows of weight [num_embeddings, dim] that each bag's indices pick,
// reduced per bag (sum, mean or max) into [B, dim]. input is 2-D [B, N] (bags of N, offsets
// undefined) or 1-D with offsets (1-D, the first 0, non-decreasing, none past the input's
// length): bag b holds input[offsets[b] : offsets[b + 1]]. An empty bag gives zeros.
// per_sample_weights (input's shape, mode "sum" only) scales each row before the sum. Indices
// and offsets are i64 or i32; bad ones are ShapeError or ValueError naming them.
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = {},
                     const EmbeddingBagOptions& options = {},
                     const Tensor& per_sample_weights = {});

// The shrinking activations and threshold, PyTorch's definitions (values exactly at a bound
// take the inner side, and its gradient):
//   hardshrink  x where |x| > lambd, else 0
//   softshrink  x - lambd where x > lambd, x + lambd where x < -lambd, else 0 (ValueError for
//               lambd < 0)
//   tanhshrink  x - tanh(x);  softsign  x / (1 + |x|)
//   threshold   x where x > threshold, else value
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
Tensor softshrink(const Tensor& x, double lambd = 0.5);
Tensor tanhshrink(const Tensor& x);
Tensor softsign(const Tensor& x);
Tensor threshold(const Tensor& x, double threshold, double value);
// F.bilinear: y[..., o] = x1[..., :] · weight[o] · x2[..., :] + bias[o], x1 [..., in1], x2
// [..., in2] (the same leading dims), weight [out, in1, in2], bias [out] or undefined.
// ShapeError naming the sizes that do not fit.
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = {});
// F.channel_shuffle: x [N, C, *] with C split into `groups` groups of C / groups, read back
// channel-major: channel g * (C / groups) + i goes to i * groups + g. ShapeError unless groups
// divides C; Error unless groups > 0.
Tensor channel_shuffle(const Tensor& x, std::int64_t groups);

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

// The margin and likelihood losses (PyTorch's definitions; reduction as above):
// soft_margin_loss       log(1 + exp(-y x)), y = ±1 (computed as -logsigmoid(y x): no overflow)
// multilabel_soft_margin_loss  -mean over the last dim of w (y logsigmoid(x) + (1 - y)
//                        logsigmoid(-x)), y in {0, 1}, weight broadcast over the last dim
// hinge_embedding_loss   x where y = 1, max(0, margin - x) where y = -1
// triplet_margin_loss    max(0, margin + d(a, p) - d(a, n)) with d pairwise_distance (p, eps);
//                        swap: d(a, n) replaced by min(d(a, n), d(p, n))
// poisson_nll_loss       exp(x) - y x (log_input), else x - y log(x + eps); full adds Stirling's
//                        y log y - y + log(2 pi y) / 2 where y > 1
// gaussian_nll_loss      (log(var) + (x - y)^2 / var) / 2 (+ log(2 pi) / 2 when full), var
//                        clamped at eps in the forward only (as PyTorch's no_grad clamp); var of
//                        x's shape, of x's shape without the last dim, or with it 1. ValueError
//                        for a negative var.
// multi_margin_loss      per sample sum over i != y of w[y] max(0, margin - x[y] + x[i])^p / C,
//                        x [N, C] or [C], y class indices [N] or [], p 1 or 2 (ValueError).
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        Reduction reduction = Reduction::mean);
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const Tensor& weight = {},
                                   Reduction reduction = Reduction::mean);
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            Reduction reduction = Reduction::mean);
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2, double eps = 1e-6, bool swap = false,
                           Reduction reduction = Reduction::mean);
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true,
                        bool full = false, double eps = 1e-8,
                        Reduction reduction = Reduction::mean);
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         bool full = false, double eps = 1e-6,
                         Reduction reduction = Reduction::mean);
// multilabel_margin_loss: per sample, the sum over its target classes j (target's leading
// entries before the first -1; i64 of x's shape, x [C] or [N, C]) and the non-target classes i
// of max(0, 1 - (x[j] - x[i])), over C. ShapeError for a target of another shape, ValueError
// for a class outside [-1, C).
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              Reduction reduction = Reduction::mean);
// triplet_margin_with_distance_loss: max(0, margin + d(a, p) - d(a, n)) with d the given
// distance function (default pairwise_distance); swap as triplet_margin_loss. ValueError unless
// margin > 0; ShapeError unless the three have the same number of dims.
using DistanceFunction = std::function<Tensor(const Tensor&, const Tensor&)>;
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative,
                                         const DistanceFunction& distance_function = {},
                                         double margin = 1.0, bool swap = false,
                                         Reduction reduction = Reduction::mean);
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, std::int64_t p = 1,
                         double margin = 1.0, const Tensor& weight = {},
                         Reduction reduction = Reduction::mean);
// F.ctc_loss, the connectionist temporal classification loss: -log of the total probability
// of every alignment of a target to the input's frames (blanks between and around the labels,
// a label repeated only with a blank between). log_probs [T, N, C] (log_softmax over C; or
// unbatched [T, C]); targets [N, S] padded class indices, or all targets concatenated [sum of
// target_lengths] (unbatched: [S]); input_lengths[n] <= T and target_lengths[n] per sample.
// Reduction mean divides each loss by its target length (at least 1) before the batch mean.
// A target that no alignment reaches (too few frames) has an infinite loss, or 0 (and no
// gradient) with zero_infinity. Computed in f32 for 16-bit input (returned in its dtype).
// The gradient is the true one of the loss with respect to log_probs; PyTorch's adds
// exp(log_probs), which the log_softmax before it cancels, so the logits' gradients agree.
// ValueError for a blank, label or length out of range; ShapeError for mismatched sizes.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets,
                const std::vector<std::int64_t>& input_lengths,
                const std::vector<std::int64_t>& target_lengths, std::int64_t blank = 0,
                Reduction reduction = Reduction::mean, bool zero_infinity = false);
// The lengths as 1-D integer tensors (read back to the host).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, std::int64_t blank = 0,
                Reduction reduction = Reduction::mean, bool zero_infinity = false);
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
