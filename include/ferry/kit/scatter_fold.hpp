// include/ferry/kit/scatter_fold.hpp — the scatter_reduce kernel's `reduce`
// attribute (docs/kernel-contract.md, "scatter_reduce") as the CPU, CUDA and
// Vulkan kernels read it: one parse, one enum (the Vulkan shader's FOLD_*
// codes are checked against it at compile time).
#pragma once

#include <string>

#include "ferry/error.hpp"

namespace ferry {

enum class ScatterFold : unsigned { sum, prod, mean, amax, amin, assign };

inline ScatterFold scatter_fold_of(const std::string& reduce) {
  if (reduce == "sum") return ScatterFold::sum;
  if (reduce == "prod") return ScatterFold::prod;
  if (reduce == "mean") return ScatterFold::mean;
  if (reduce == "amax") return ScatterFold::amax;
  if (reduce == "amin") return ScatterFold::amin;
  if (reduce == "assign") return ScatterFold::assign;
  throw ValueError("scatter_reduce: unknown reduce \"" + reduce +
                   "\" (the kernel takes sum, prod, mean, amax, amin or assign)");
}

}  // namespace ferry
