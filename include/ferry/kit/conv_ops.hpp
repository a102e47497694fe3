// include/ferry/kit/conv_ops.hpp — the op-table rows a backend's convolution kernels implement
// together (docs/kernel-contract.md): conv1d/2d/3d and their two backward rows. A backend that
// fuses one fuses all five (the front-end runs the kernel only where all five are supported:
// runtime/ops_conv.cpp), so the kernel tables and supports() answers go through this list.
#pragma once

#include <array>

#include "ferry/op.hpp"

namespace ferry {

inline constexpr std::array<OpId, 5> kConvKernelOps = {OpId::conv1d, OpId::conv2d, OpId::conv3d,
                                                       OpId::conv_backward_input,
                                                       OpId::conv_backward_weight};

constexpr bool is_conv_kernel_op(OpId op) {
  for (OpId c : kConvKernelOps)
    if (c == op) return true;
  return false;
}

}  // namespace ferry
