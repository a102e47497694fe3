// ferry/nn/loss.hpp — the losses as modules (PyTorch's nn.CrossEntropyLoss and
// nn.MSELoss): their forward takes the input and the target and calls the
// functional form (ferry/nn/functional.hpp), where the definitions are. They
// print as PyTorch's do: "CrossEntropyLoss()".
#pragma once

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

}  // namespace ferry::nn
