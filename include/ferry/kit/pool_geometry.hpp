// include/ferry/kit/pool_geometry.hpp — the geometry of a max_pool1d/2d call (and of its
// max_pool_backward, which gets the forward's attributes) as every backend's kernel reads it
// (docs/kernel-contract.md), read once here for the CPU and Vulkan kernels alike.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {

// One plane's 2-D geometry: a 1-D pool is a plane of height 1. h, w: the input's; oh, ow: the
// output's; kernel, stride, padding (before) and dilation along each.
struct Pool2d {
  std::int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

// `in` [N, C, *in] (x, or the backward's dx) and `out` [N, C, *out] (the values, or g).
inline Pool2d pool2d_geometry(const OpCall& call, const TensorArg& in, const TensorArg& out) {
  const int n = in.ndim() - 2;
  if ((n != 1 && n != 2) || out.ndim() != in.ndim())
    throw ShapeError(fmt::format("{}: the kernel pools 1 or 2 spatial dims, got {}", call.name(),
                                 in.ndim() - 2));
  const auto& k = call.attrs.ints("kernel_size");
  const auto& s = call.attrs.ints("stride");
  const auto& p = call.attrs.ints("padding");
  const auto& d = call.attrs.ints("dilation");
  // Dim i of the plane (0: height, 1: width) from an attribute; a 1-D pool's height is `one`.
  auto at = [&](const std::vector<std::int64_t>& v, int i, std::int64_t one) {
    return n == 1 && i == 0 ? one : v.at(std::size_t(n == 1 ? 0 : i));
  };
  return {n == 2 ? in.sizes[2] : 1,
          in.sizes[std::size_t(n + 1)],
          n == 2 ? out.sizes[2] : 1,
          out.sizes[std::size_t(n + 1)],
          at(k, 0, 1),
          at(k, 1, 1),
          at(s, 0, 1),
          at(s, 1, 1),
          at(p, 0, 0),
          at(p, 1, 0),
          at(d, 0, 1),
          at(d, 1, 1)};
}

}  // namespace ferry
