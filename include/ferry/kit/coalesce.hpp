// include/ferry/kit/coalesce.hpp — dim coalescing for strided kernels, shared by the GPU
// backends (the Vulkan shaders' 4-dim index math, the CUDA offset calculator).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ferry::detail {

// Dims merged where every tensor's strides allow it, size-1 dims dropped:
// a contiguous [a, b, c] becomes [a*b*c]. strides[t][d] is tensor t's stride
// of dim d. A 0-d shape becomes [1]. Row-major order is kept, so linear index
// i of the result is linear index i of the input shape.
struct Coalesced {
  std::vector<std::int64_t> sizes;
  std::vector<std::vector<std::int64_t>> strides;  // [tensor][dim]
};
Coalesced coalesce(std::span<const std::int64_t> sizes,
                   const std::vector<std::vector<std::int64_t>>& strides);

}  // namespace ferry::detail
