// runtime/nn/init.cpp — nn::init: in-place parameter initialisation
// (ferry/nn/init.hpp).
#include "ferry/nn/init.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/random.hpp"

namespace ferry::nn::init {
namespace {

void check_floating(std::string_view fn, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("nn::init::{}: the tensor is undefined", fn));
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format("nn::init::{}: needs a floating tensor, got {} (shape {})", fn,
                                 dtype_name(t.dtype()), shape_str(t.sizes())));
}

}  // namespace

// Tensor's in-place draws (ferry/random.hpp), under NoGradGuard: PyTorch's
// nn.init writes parameters that require grad.
Tensor& uniform_(Tensor& t, double low, double high) {
  check_floating("uniform_", t);
  NoGradGuard no_grad;
  return ferry::uniform_(t, low, high);
}

Tensor& normal_(Tensor& t, double mean, double std) {
  check_floating("normal_", t);
  NoGradGuard no_grad;
  return ferry::normal_(t, mean, std);
}

Tensor& constant_(Tensor& t, double value) {
  if (!t.defined()) throw Error("nn::init::constant_: the tensor is undefined");
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

double calculate_gain(std::string_view nonlinearity, double param) {
  for (std::string_view linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d", "sigmoid"})
    if (nonlinearity == linear) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw Error(
      fmt::format("nn::init::calculate_gain: unknown nonlinearity '{}' (known: linear, conv1d..3d, "
                  "conv_transpose1d..3d, sigmoid, tanh, relu, leaky_relu, selu)",
                  nonlinearity));
}

Fans calculate_fans(const Tensor& t) {
  if (!t.defined()) throw Error("nn::init: the tensor is undefined");
  if (t.dim() < 2)
    throw ShapeError(
        fmt::format("nn::init: fan in and fan out need a tensor of at least 2 dims, got shape {}",
                    shape_str(t.sizes())));
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& kaiming_uniform_(Tensor& t, double a, std::string_view mode,
                         std::string_view nonlinearity) {
  check_floating("kaiming_uniform_", t);
  if (mode != "fan_in" && mode != "fan_out")
    throw Error(
        fmt::format("nn::init::kaiming_uniform_: mode must be \"fan_in\" or \"fan_out\", "
                    "got \"{}\"",
                    mode));
  const Fans fans = calculate_fans(t);
  if (t.numel() == 0) return t;  // PyTorch: initialising zero elements is a no-op
  const double fan = double(mode == "fan_in" ? fans.fan_in : fans.fan_out);
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan);
  return init::uniform_(t, -bound, bound);
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  check_floating("xavier_uniform_", t);
  const Fans fans = calculate_fans(t);
  if (t.numel() == 0) return t;
  const double bound = gain * std::sqrt(6.0 / double(fans.fan_in + fans.fan_out));
  return init::uniform_(t, -bound, bound);
}

void reset_weight_and_bias_(Tensor& weight, Tensor& bias) {
  kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  const std::int64_t fan_in = weight.numel() > 0 ? calculate_fans(weight).fan_in : 0;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

}  // namespace ferry::nn::init
