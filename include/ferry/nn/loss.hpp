// ferry/nn/loss.hpp — the losses as modules (PyTorch's nn.CrossEntropyLoss, nn.NLLLoss,
// nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss, nn.BCELoss,
// nn.BCEWithLogitsLoss, nn.MarginRankingLoss, nn.CosineEmbeddingLoss): their forward takes the
// input and the target (and the second input, for the two ranking losses) and calls the
// functional form (ferry/nn/functional.hpp), where the definitions are. Class weights (and
// BCEWithLogitsLoss's pos_weight) are buffers, as PyTorch registers them: they move with the
// module and are in its state_dict. They print as PyTorch's do: "CrossEntropyLoss()".
#pragma once

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

}  // namespace ferry::nn
