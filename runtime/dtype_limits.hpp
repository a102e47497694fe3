// runtime/dtype_limits.hpp — torch.finfo's limits of the floating dtypes, for the code that
// keeps a value away from 0 or 1 (the distributions' clamps, det's gradient at a singular
// matrix).
#pragma once

#include <limits>

#include "ferry/dtype.hpp"

namespace ferry::detail {

// PyTorch's torch.finfo(dtype).eps: the distance from 1 to the next number.
inline double machine_eps(DType dt) {
  switch (dt) {
    case DType::f64:
      return std::numeric_limits<double>::epsilon();
    case DType::f16:
      return 0.0009765625;  // 2^-10
    case DType::bf16:
      return 0.0078125;  // 2^-7
    default:
      return double(std::numeric_limits<float>::epsilon());
  }
}

// PyTorch's torch.finfo(dtype).tiny: the smallest normal number.
inline double smallest_normal(DType dt) {
  switch (dt) {
    case DType::f64:
      return std::numeric_limits<double>::min();
    case DType::f16:
      return 6.103515625e-05;  // 2^-14
    default:                   // f32, and bf16, which has f32's exponent range
      return double(std::numeric_limits<float>::min());
  }
}

}  // namespace ferry::detail
