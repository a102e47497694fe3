// cuda/cuda_conv_geometry.hpp — a convolution call's sizes as cuDNN takes them (Note [cuDNN
// convolutions] in cuda_kernels_conv.cpp). Plain C++, so tests/cuda_module_tests.cpp checks it
// on machines without a GPU.
#pragma once

#include <array>
#include <vector>

#include "ferry/backend.hpp"

namespace ferry::cuda {

// One call's sizes as cuDNN sees them: nd spatial dims (2 or 3; a 1-D convolution is 2-D of
// height 1), and whether the input goes through an explicitly padded copy.
struct ConvGeometry {
  int nd = 2;
  int N = 0, C = 0, OC = 0, G = 1;
  std::array<int, 3> in{}, k{}, out{}, stride{}, lo{}, dil{}, pad{}, padded{};
  bool explicit_pad = false;

  std::vector<int> dims(int n, int c, const std::array<int, 3>& sp) const {
    std::vector<int> d{n, c};
    for (int i = 0; i < nd; ++i) d.push_back(sp[std::size_t(i)]);
    return d;
  }
  std::vector<int> x_dims() const { return dims(N, C, explicit_pad ? padded : in); }
  std::vector<int> y_dims() const { return dims(N, OC, out); }
  std::vector<int> w_dims() const { return dims(OC, C / G, k); }
  std::vector<int> bias_dims() const { return dims(1, OC, {1, 1, 1}); }
};

// The geometry of a conv1d/2d/3d, conv_backward_input or conv_backward_weight call: x is
// input-shaped (x or gx), w weight-shaped (w or gw), y output-shaped (y or gy), with the CPU
// kernel's attributes. Error for a view that is not contiguous, ShapeError for 1 to 3 spatial
// dims broken, UnsupportedError for sizes beyond cuDNN's ints or a padding that drops input.
ConvGeometry conv_geometry(const OpCall& c, const TensorArg& x, const TensorArg& w,
                           const TensorArg& y);

}  // namespace ferry::cuda
