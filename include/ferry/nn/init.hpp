// ferry/nn/init.hpp — in-place initialisation of parameters (PyTorch's
// torch.nn.init). Each function fills `t` in place under NoGradGuard (so it
// works on a parameter that requires grad), keeps its identity, device and
// dtype, draws from ferry's seeded generator (Note [Counter-based RNG]) and
// returns `t`. The distributions are PyTorch's; the numbers are ferry's own
// (manual_seed makes them reproducible on every device).
#pragma once

#include <cstdint>
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
// N(0, std²) with std = gain · √(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
// N(0, std²) with std = gain / √fan, as kaiming_uniform_ (He et al.; torchvision's ResNet
// initialises its convolutions with mode "fan_out", nonlinearity "relu").
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, std::string_view mode = "fan_in",
                        std::string_view nonlinearity = "leaky_relu");
// N(mean, std²) truncated to [a, b] (ViT's, Swin's and ConvNeXt's initialisation), by
// PyTorch's method: a uniform draw between the normal CDF's values at a and b, mapped back
// through the inverse CDF (erfinv), then clamped to [a, b] against rounding. Error when
// a >= b or std <= 0. Like PyTorch's, it is accurate only when mean is within about 2 std
// of [a, b] (PyTorch warns; the draw is still in [a, b]).
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                      double b = 2.0);
// A (semi-)orthogonal matrix times gain (Saxe et al.; PyTorch's orthogonal_, which RL
// agents and recurrent networks use): t viewed as [size(0), numel / size(0)] gets the Q
// of the QR decomposition of a standard normal draw of that shape (transposed first when
// it is wide), each column's sign fixed so that R's diagonal is positive — the one Q the draw
// determines. Rows (wide) or columns (tall) are orthonormal. The QR runs once, on the host,
// in double through LAPACK (OpenBLAS's dgeqrf / dorgqr); the draw is on t's device.
// ShapeError for fewer than 2 dims.
Tensor& orthogonal_(Tensor& t, double gain = 1.0);
// The identity of a 2-D tensor (ShapeError otherwise); rectangular ones get ones on the
// main diagonal.
Tensor& eye_(Tensor& t);
// The identity of a convolution: a 3-, 4- or 5-D weight [out, in / groups, k...] with a 1 at
// the kernel's centre (size / 2 in each spatial dim) linking output channel g·(out / groups) + d
// to input channel d of its group, for d < min(out / groups, in / groups); 0 elsewhere, so a
// convolution with it returns its input's channels (cropped or zero-padded). ShapeError for
// another rank; ValueError unless groups divides size(0).
Tensor& dirac_(Tensor& t, std::int64_t groups = 1);
// Martens' sparse initialisation of a 2-D tensor: N(0, std²), then in every column
// ceil(sparsity · rows) entries, chosen at random, set to 0. ShapeError for another rank;
// ValueError unless 0 <= sparsity <= 1.
Tensor& sparse_(Tensor& t, double sparsity, double std = 0.01);
// PyTorch's reset_parameters of Linear and the convolution layers: kaiming_uniform_(a = √5)
// on the weight, which is U(±1/√fan_in), and the same bound on the bias when it is defined.
void reset_weight_and_bias_(Tensor& weight, Tensor& bias);

}  // namespace ferry::nn::init
