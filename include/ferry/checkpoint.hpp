// ferry/checkpoint.hpp — activation checkpointing (torch.utils.checkpoint.checkpoint, its
// reentrant form): trading a second forward for the memory of a block's activations.
#pragma once

#include <functional>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

// Runs fn(inputs) with grad mode off, so none of fn's intermediate tensors is kept for the
// backward; the result is recorded as one node that holds only the inputs. Its backward runs
// fn again with grad mode on, from the generator's state as it was at the first run (so
// dropout draws the same masks), and backpropagates the result's gradient through that graph:
// to the inputs, and to every tensor fn reads that requires grad (a module's parameters get
// their .grad as without checkpointing). As PyTorch's reentrant checkpoint, the result is
// recorded only when an input requires grad (pass the activations, not only parameters), and
// fn must compute the same thing both times. The inputs must not be written in place before
// the backward (Error then, as for any saved tensor).
Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                  const std::vector<Tensor>& inputs);

}  // namespace ferry
