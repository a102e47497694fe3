// ferry/nn/init.hpp — in-place initialisation of parameters (PyTorch's
// torch.nn.init). Each function fills `t` in place under NoGradGuard (so it
// works on a parameter that requires grad), keeps its identity, device and
// dtype, draws from ferry's seeded generator (Note [Counter-based RNG]) and
// returns `t`. The distributions are PyTorch's; the numbers are ferry's own
// (manual_seed makes them reproducible on every device).
#pragma once

#include <string_view>

#include "ferry/tensor.hpp"

namespace ferry::nn::init {

// U(low, high).
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
// N(mean, std²).
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
Tensor& constant_(Tensor& t, double value);

// The recommended gain for a nonlinearity: "linear", "conv1d", ..., "sigmoid"
// give 1, "tanh" 5/3, "relu" √2, "leaky_relu" √(2 / (1 + param²)), "selu"
// 3/4. Error for another name.
double calculate_gain(std::string_view nonlinearity, double param = 0.01);

// fan_in = size(1) · receptive field, fan_out = size(0) · receptive field,
// receptive field = prod(sizes[2:]). ShapeError for fewer than 2 dims.
struct Fans {
  std::int64_t fan_in, fan_out;
};
Fans calculate_fans(const Tensor& t);

// U(-b, b) with b = gain · √(3 / fan), gain = calculate_gain(nonlinearity,
// a); mode "fan_in" or "fan_out". A tensor with no elements is left alone.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, std::string_view mode = "fan_in",
                         std::string_view nonlinearity = "leaky_relu");
// U(-b, b) with b = gain · √(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
// PyTorch's reset_parameters of Linear and the convolution layers: kaiming_uniform_(a = √5)
// on the weight, which is U(±1/√fan_in), and the same bound on the bias when it is defined.
void reset_weight_and_bias_(Tensor& weight, Tensor& bias);

}  // namespace ferry::nn::init
