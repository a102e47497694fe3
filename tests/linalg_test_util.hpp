// Helpers shared by the linear-algebra tests (test_linalg.cpp, test_linalg_orthogonal.cpp).
#pragma once

#include "ferry/ferry.hpp"

namespace ferry_test {

// Eigenvectors (columns of v) with each sign chosen so that the column's entry of largest
// magnitude is positive: the sign LAPACK and ferry give is arbitrary, and
// tools/gen_linalg_reference.py fixes PyTorch's the same way.
inline ferry::Tensor sign_fixed(const ferry::Tensor& v) {
  const ferry::Tensor at = ferry::argmax(ferry::abs(v), -2, true);
  return v * ferry::sign(ferry::gather(v, -2, at));
}

}  // namespace ferry_test
