// runtime/sliding_window.hpp — the window geometry that convolution, pooling and their
// adjoints share (Note [Convolution as im2col] in ferry/ops_conv.hpp). Internal to the core.
//
// Per spatial dim, a WindowDim says which input element each tap of each window reads; their
// product over the dims is one index table into the input flattened over its spatial dims,
// with one extra slot (one past the last element) for the taps that fall outside it. A
// gather of that table is im2col (the slot holding 0 for a convolution, -inf for a max
// pool); its adjoint, an index_add back, is col2im. Regular windows (stride, padding,
// dilation) and adaptive ones (PyTorch's floor/ceil bounds, the widest window padded out)
// are the same table, so every op here is an index_select, an index_add and a reduction or a
// matmul: it runs on every device, in every float dtype, differentiable through its parts.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry::detail {

struct WindowDim {
  std::int64_t in = 0;           // the input's size
  std::int64_t taps = 0;         // taps per window: the kernel, or the widest adaptive window
  std::int64_t out = 0;          // how many windows
  std::vector<std::int64_t> at;  // [taps * out], tap-major: the input index read, or -1
};

// `v` with one value per spatial dim (a single value repeats), or a ShapeError naming `op`.
std::vector<std::int64_t> per_dim(std::string_view op, std::string_view what,
                                  const std::vector<std::int64_t>& v, std::size_t n);

// Window o's tap k reads o * stride - pad_lo + k * dilation (outside [0, in): -1).
WindowDim sliding_dim(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                      std::int64_t pad_lo, std::int64_t dilation, std::int64_t out);
// PyTorch's adaptive windows: window o covers [floor(o in / out), ceil((o + 1) in / out)).
WindowDim adaptive_dim(std::int64_t in, std::int64_t out);

// The product table, [K, L] row-major (K = every dim's taps, L = every dim's windows, the
// first dim slowest in both): the flat spatial index each tap reads, or the input's spatial
// area where a tap is outside in some dim.
std::vector<std::int64_t> window_table(const std::vector<WindowDim>& dims);

// x [N, C, *spatial] -> [N, C, K, L], `fill` where a tap is outside the input.
Tensor gather_windows(const Tensor& x, const std::vector<WindowDim>& dims, double fill);
// gather_windows' adjoint: columns [N, C, K, L] -> [N, C, *spatial], each tap added into the
// element it read (the taps outside dropped).
Tensor scatter_windows(const Tensor& columns, const std::vector<WindowDim>& dims);
// The flat spatial index (i64, [N, C, *out]) of the tap `tap` ([N, C, 1, L], as argmax over
// gather_windows' dim 2 gives) of every window: max pooling's indices.
Tensor tap_positions(const Tensor& tap, const std::vector<WindowDim>& dims);

}  // namespace ferry::detail
