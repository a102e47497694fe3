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

// Whether a pooling kernel's call pools PyTorch's adaptive windows (the attribute `adaptive`):
// then the input's and the output's sizes alone place them, and it has no kernel_size, stride,
// padding or dilation.
inline bool is_adaptive_pool(const OpCall& call) {
  return call.attrs.has("adaptive") && call.attrs.b("adaptive");
}

// An adaptive pool's dim of `extent` positions and `windows` windows, and its widest window.
inline PoolDim adaptive_pool_dim(std::int64_t extent, std::int64_t windows) {
  return {extent, windows, 1, 1, 0, 1, true};
}
inline std::int64_t adaptive_widest_window(std::int64_t extent, std::int64_t windows) {
  std::int64_t k = 0;
  for (std::int64_t o = 0; o < windows; ++o)
    k = std::max(k, pool_tap_count(adaptive_pool_dim(extent, windows), o));
  return k;
}

// One plane's 2-D geometry: a 1-D pool is a plane of height 1. h, w: the input's; oh, ow: the
// output's; kernel, stride, padding (before) and dilation along each. An adaptive pool's
// windows come from the sizes (row() and col()); its kh, kw are then its widest window's taps
// and sh, sw the mean step, which only size the work, with no padding and dilation 1.
struct Pool2d {
  std::int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  bool adaptive = false;
  PoolDim row() const { return {h, oh, kh, sh, ph, dh, adaptive}; }
  PoolDim col() const { return {w, ow, kw, sw, pw, dw, adaptive}; }
};

// `in` [N, C, *in] (x, or the backward's dx) and `out` [N, C, *out] (the values, or g).
inline Pool2d pool2d_geometry(const OpCall& call, const TensorArg& in, const TensorArg& out) {
  const int n = in.ndim() - 2;
  if ((n != 1 && n != 2) || out.ndim() != in.ndim())
    throw ShapeError(fmt::format("{}: the kernel pools 1 or 2 spatial dims, got {}", call.name(),
                                 in.ndim() - 2));
  const std::int64_t h = n == 2 ? in.sizes[2] : 1, w = in.sizes[std::size_t(n + 1)];
  const std::int64_t oh = n == 2 ? out.sizes[2] : 1, ow = out.sizes[std::size_t(n + 1)];
  if (is_adaptive_pool(call)) {
    if ((h * w == 0) != (oh * ow == 0))
      throw ShapeError(fmt::format("{}: adaptive pooling of {}x{} positions to {}x{}", call.name(),
                                   h, w, oh, ow));
    return {h,
            w,
            oh,
            ow,
            adaptive_widest_window(h, oh),
            adaptive_widest_window(w, ow),
            std::max<std::int64_t>(1, oh == 0 ? 1 : h / oh),
            std::max<std::int64_t>(1, ow == 0 ? 1 : w / ow),
            0,
            0,
            1,
            1,
            true};
  }
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
  return {h,           w,           oh,          ow,          at(k, 0, 1), at(k, 1, 1),
          at(s, 0, 1), at(s, 1, 1), at(p, 0, 0), at(p, 1, 0), at(d, 0, 1), at(d, 1, 1)};
}

// An average pool's divisors: the attribute divisor_override where set (nonzero), else the
// product of the window's counts along its dims (an adaptive pool: its extents).
struct AvgPoolDivisor {
  bool count_include_pad;
  std::int64_t divisor_override;  // 0: none
  static AvgPoolDivisor of(const OpCall& call) {
    return {!is_adaptive_pool(call) && call.attrs.b("count_include_pad"),
            call.attrs.has("divisor_override") ? call.attrs.i("divisor_override") : 0};
  }
  // Window (oh, ow)'s divisor.
  std::int64_t operator()(const Pool2d& p, std::int64_t oh, std::int64_t ow) const {
    if (divisor_override != 0) return divisor_override;
    return avg_pool_window_count(p.row(), oh, count_include_pad) *
           avg_pool_window_count(p.col(), ow, count_include_pad);
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
