// ferry/custom_op.hpp — a user's own op, by name, with its own backward.
//
// Note [Custom ops]
// register_op adds an op to ferry's table of named ops: its forward computes
// the result from the inputs (with custom kernels, Note [Custom kernels], or
// with ferry's ops), and its backward, when given, computes the inputs'
// gradients from the result's, so the op takes part in autograd like a
// built-in one (PyTorch's autograd.Function). call_op checks that the inputs
// share one device (DeviceMismatchError naming the op), runs forward with
// grad mode off, and records a backward node when grad mode is on and an
// input requires grad; the node keeps the inputs and the result, and
// backward() raises Error if one was written in place since (Note [Autograd]).
// An op registered without a backward is not differentiable: a backward pass
// that reaches it raises Error naming it.
//
// Thread-safety: register_op and call_op may be called from any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

struct OpDefinition {
  std::string name;
  // The result from the inputs, all on one device.
  std::function<Tensor(const std::vector<Tensor>& inputs)> forward;
  // One gradient per input (undefined for an input that gets none), each of
  // its input's shape, from the inputs, the result and the result's gradient.
  // Empty: the op is not differentiable.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& result,
                                    const Tensor& grad)>
      backward;
};

// Adds `op` to the table. Error when the name is empty or taken, or forward
// is missing.
void register_op(OpDefinition op);
bool has_op(std::string_view name);
// Runs op `name` on `inputs` (Note [Custom ops]). UnsupportedError for a
// name no op was registered under.
Tensor call_op(std::string_view name, const std::vector<Tensor>& inputs);

}  // namespace ferry
