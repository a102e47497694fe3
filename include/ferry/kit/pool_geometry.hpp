// include/ferry/kit/pool_geometry.hpp — the geometry of a pooling kernel's call (max_pool1d/2d,
// avg_pool1d/2d, and their backward kernels, which get the forward's attributes) as every
// backend's kernel reads it (docs/kernel-contract.md), read once here for the CPU and Vulkan
// kernels alike; and average pooling's divisors (ferry/kit/pool_windows.hpp's window counts).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/pool_windows.hpp"

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
  // Average pooling has no dilation.
  static const std::vector<std::int64_t> ones{1, 1};
  const auto& d = call.attrs.has("dilation") ? call.attrs.ints("dilation") : ones;
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

// An average pool's divisors: the attribute divisor_override where set (nonzero), else the
// product of the window's counts along its dims.
struct AvgPoolDivisor {
  bool count_include_pad;
  std::int64_t divisor_override;  // 0: none
  static AvgPoolDivisor of(const OpCall& call) {
    return {call.attrs.b("count_include_pad"),
            call.attrs.has("divisor_override") ? call.attrs.i("divisor_override") : 0};
  }
  // Window (oh, ow)'s divisor.
  std::int64_t operator()(const Pool2d& p, std::int64_t oh, std::int64_t ow) const {
    if (divisor_override != 0) return divisor_override;
    return avg_pool_window_count(oh, p.h, p.kh, p.sh, p.ph, count_include_pad) *
           avg_pool_window_count(ow, p.w, p.kw, p.sw, p.pw, count_include_pad);
  }
};

// A max pool's indices (i64, the shape of the pool's output `out`), checked.
inline void check_pool_indices(const OpCall& call, const TensorArg& indices, const TensorArg& out) {
  if (indices.dtype != DType::i64 || indices.sizes != out.sizes)
    throw ShapeError(fmt::format("{}: the indices must be i64 of the output's shape {}, got {} {}",
                                 call.name(), fmt::join(out.sizes, "x"), dtype_name(indices.dtype),
                                 fmt::join(indices.sizes, "x")));
}

}  // namespace ferry
