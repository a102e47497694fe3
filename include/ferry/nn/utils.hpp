// ferry/nn/utils.hpp — PyTorch's torch.nn.utils for parameter lists: gradient
// clipping and flattening parameters into one vector and back.
#pragma once

#include <vector>

#include "ferry/tensor.hpp"

namespace ferry::nn::utils {

// Scales every gradient in place so that their joint norm (of the given type;
// infinity: the largest magnitude) is at most max_norm: by max_norm / (total
// + 1e-6) when that is below 1, as PyTorch, computed on the device without
// reading the norm back (a NaN total makes the gradients NaN, as in PyTorch).
// Returns the total norm before clipping, as a 0-d f32 tensor on the first
// gradient's device. Parameters without a gradient are skipped.
// error_if_nonfinite: a NaN or infinite total is a ValueError instead of
// scaling by it (this reads the norm back: a host wait on a GPU).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
// Clamps every gradient in place to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

// The parameters flattened and joined into one 1-D tensor (one device and
// dtype), and a vector's elements copied back into the parameters in order.
Tensor parameters_to_vector(const std::vector<Tensor>& parameters);
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace ferry::nn::utils
