// ferry/nn/loss.hpp — the losses as modules (PyTorch's nn.CrossEntropyLoss, nn.NLLLoss,
// nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss, nn.BCELoss,
// nn.BCEWithLogitsLoss, nn.MarginRankingLoss, nn.CosineEmbeddingLoss, nn.SoftMarginLoss,
// nn.MultiLabelSoftMarginLoss, nn.HingeEmbeddingLoss, nn.TripletMarginLoss, nn.PoissonNLLLoss,
// nn.GaussianNLLLoss, nn.MultiMarginLoss): their forward takes the input and the target (and
// the second input for the two ranking losses, the three embeddings for the triplet loss, the
// variance for the Gaussian one) and calls the
// functional form (ferry/nn/functional.hpp), where the definitions are. Class weights (and
// BCEWithLogitsLoss's pos_weight) are buffers, as PyTorch registers them: they move with the
// module and are in its state_dict. They print as PyTorch's do: "CrossEntropyLoss()".
#pragma once

#include <cstdint>
#include <string>

#include "ferry/nn/functional.hpp"
#include "ferry/nn/module.hpp"

namespace ferry::nn {

class CrossEntropyLoss : public Module {
 public:
  // A defined options.weight is registered as the buffer "weight", as
  // PyTorch does, so it moves with the module and is in its state_dict.
  explicit CrossEntropyLoss(functional::CrossEntropyOptions options = {});
  using Module::forward;  // the single-input one raises: a loss takes two
  Tensor forward(const Tensor& input, const Tensor& target);

  functional::CrossEntropyOptions options;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Reduction reduction;
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(functional::NllLossOptions options = {});  // weight: the buffer "weight"
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  functional::NllLossOptions options;
};

class L1Loss : public Module {
 public:
  explicit L1Loss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Reduction reduction;
};

class SmoothL1Loss : public Module {
 public:
  explicit SmoothL1Loss(Reduction reduction = Reduction::mean, double beta = 1.0)
      : reduction(reduction), beta(beta) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Reduction reduction;
  double beta;
};

class HuberLoss : public Module {
 public:
  explicit HuberLoss(Reduction reduction = Reduction::mean, double delta = 1.0)
      : reduction(reduction), delta(delta) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Reduction reduction;
  double delta;
};

class KLDivLoss : public Module {
 public:
  // reduction: "none", "sum", "mean" or "batchmean" (PyTorch's default is "mean").
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false)
      : reduction(std::move(reduction)), log_target(log_target) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  std::string reduction;
  bool log_target;
};

class BCELoss : public Module {
 public:
  explicit BCELoss(const Tensor& weight = {}, Reduction reduction = Reduction::mean);
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Tensor weight;  // the buffer "weight", where given
  Reduction reduction;
};

class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(const Tensor& weight = {}, Reduction reduction = Reduction::mean,
                             const Tensor& pos_weight = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Tensor weight, pos_weight;  // the buffers "weight" and "pos_weight", where given
  Reduction reduction;
};

class MarginRankingLoss : public Module {
 public:
  explicit MarginRankingLoss(double margin = 0, Reduction reduction = Reduction::mean)
      : margin(margin), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target);

  double margin;
  Reduction reduction;
};

class CosineEmbeddingLoss : public Module {
 public:
  explicit CosineEmbeddingLoss(double margin = 0, Reduction reduction = Reduction::mean)
      : margin(margin), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target);

  double margin;
  Reduction reduction;
};

class SoftMarginLoss : public Module {
 public:
  explicit SoftMarginLoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Reduction reduction;
};

class MultiLabelMarginLoss : public Module {
 public:
  explicit MultiLabelMarginLoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Reduction reduction;
};

class MultiLabelSoftMarginLoss : public Module {
 public:
  explicit MultiLabelSoftMarginLoss(const Tensor& weight = {},
                                    Reduction reduction = Reduction::mean);
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  Tensor weight;  // the buffer "weight", where given
  Reduction reduction;
};

class HingeEmbeddingLoss : public Module {
 public:
  explicit HingeEmbeddingLoss(double margin = 1.0, Reduction reduction = Reduction::mean)
      : margin(margin), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  double margin;
  Reduction reduction;
};

class TripletMarginLoss : public Module {
 public:
  explicit TripletMarginLoss(double margin = 1.0, double p = 2, double eps = 1e-6,
                             bool swap = false, Reduction reduction = Reduction::mean)
      : margin(margin), p(p), eps(eps), swap(swap), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative);

  double margin, p, eps;
  bool swap;
  Reduction reduction;
};

// The distance function is kept, as PyTorch's module keeps its callable; empty is
// pairwise_distance. ValueError unless margin > 0.
class TripletMarginWithDistanceLoss : public Module {
 public:
  explicit TripletMarginWithDistanceLoss(functional::DistanceFunction distance_function = {},
                                         double margin = 1.0, bool swap = false,
                                         Reduction reduction = Reduction::mean);
  using Module::forward;
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative);

  functional::DistanceFunction distance_function;
  double margin;
  bool swap;
  Reduction reduction;
};

class PoissonNLLLoss : public Module {
 public:
  explicit PoissonNLLLoss(bool log_input = true, bool full = false, double eps = 1e-8,
                          Reduction reduction = Reduction::mean)
      : log_input(log_input), full(full), eps(eps), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& log_input_or_rate, const Tensor& target);

  bool log_input, full;
  double eps;
  Reduction reduction;
};

class GaussianNLLLoss : public Module {
 public:
  explicit GaussianNLLLoss(bool full = false, double eps = 1e-6,
                           Reduction reduction = Reduction::mean)
      : full(full), eps(eps), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var);

  bool full;
  double eps;
  Reduction reduction;
};

class MultiMarginLoss : public Module {
 public:
  explicit MultiMarginLoss(std::int64_t p = 1, double margin = 1.0, const Tensor& weight = {},
                           Reduction reduction = Reduction::mean);
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);

  std::int64_t p;
  double margin;
  Tensor weight;  // the buffer "weight", where given
  Reduction reduction;
};

// nn.CTCLoss: functional::ctc_loss with the module's blank, reduction and zero_infinity.
class CTCLoss : public Module {
 public:
  explicit CTCLoss(std::int64_t blank = 0, Reduction reduction = Reduction::mean,
                   bool zero_infinity = false)
      : blank(blank), reduction(reduction), zero_infinity(zero_infinity) {}
  using Module::forward;
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths);

  std::int64_t blank;
  Reduction reduction;
  bool zero_infinity;
};

}  // namespace ferry::nn
