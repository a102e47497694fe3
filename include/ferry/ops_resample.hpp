// ferry/ops_resample.hpp — resizing and rearranging images, PyTorch's torch.nn.functional
// semantics: interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear and
// area, align_corners, size or scale_factor), grid_sample and affine_grid, and pixel_shuffle /
// pixel_unshuffle. Included by ferry/ops.hpp.
//
// Note [Interpolation is separable]
// Every mode but area weighs the input along each spatial dim on its own (bilinear and
// bicubic are products of 1-D weights), so interpolate resizes one dim at a time: an
// index_select of the taps each output position reads (1 for nearest, 2 for linear, 4 for
// cubic, clamped at the edges) weighed by a [taps, out] table of coefficients computed on the
// host with PyTorch's source-index rule and its float arithmetic. It runs on every device
// and its gradient, through index_select, is PyTorch's upsample backward. area is
// adaptive_avg_pool.
//
// Note [Sampling at a grid as gathers]
// grid_sample's weights are not separable tables: each output position has its own point. So
// it is composed per point: the grid unnormalized to pixel coordinates, the padding mode
// applied (border clamps, reflection folds with abs and fmod, zeros leaves the point for the
// reads to miss), then each tap (2 per dim for bilinear, 1 for nearest, 4 for bicubic) read as
// rows of the input laid out [N · pixels, C] by index_select, weighed and summed; a tap that
// falls outside the input weighs 0. The taps' positions come from floor and round and carry
// no gradient; the weights carry the grid's (PyTorch's formulas, including the zero gradient
// where border or reflection clamps), and index_select's gradient, an index_add of rows, is
// the input's. 16-bit inputs place their points in f32. It runs on every device.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

struct InterpolateOptions {
  std::vector<std::int64_t> size;    // the output's spatial sizes (one, or one per dim), or
  std::vector<double> scale_factor;  // the scale per spatial dim (one, or one per dim)
  // "nearest", "nearest-exact", "linear" (3-D input), "bilinear" (4-D), "bicubic" (4-D),
  // "trilinear" (5-D), "area"
  std::string_view mode = "nearest";
  // linear modes only: whether the corner pixels' centres of input and output align
  std::optional<bool> align_corners;
  // with scale_factor: compute the scale from the output size (true) or use it as given
  bool recompute_scale_factor = false;
};

// x [N, C, *spatial] (1 to 3 spatial dims) resized to `size`, or to floor(in * scale_factor).
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// torch.nn.functional.grid_sample: input [N, C, H, W] read at grid [N, OH, OW, 2] (or [N, C,
// D, H, W] at [N, OD, OH, OW, 3]), the grid's last dim the (x, y[, z]) position in [-1, 1]
// (x along W), giving [N, C, OH, OW] (or [N, C, OD, OH, OW]). mode "bilinear" (trilinear in 3
// dims), "nearest" or "bicubic" (4-D only); padding_mode "zeros", "border" or "reflection";
// align_corners: -1 and 1 are the corner pixels' centres, rather than their outer edges.
// Differentiable in the input and the grid. Input and grid share one floating dtype.
Tensor grid_sample(const Tensor& input, const Tensor& grid, std::string_view mode = "bilinear",
                   std::string_view padding_mode = "zeros", bool align_corners = false);

// torch.nn.functional.affine_grid: the grid [N, H, W, 2] (or [N, D, H, W, 3]) that theta [N,
// 2, 3] (or [N, 3, 4]) maps the output positions of size [N, C, H, W] (or [N, C, D, H, W]) to,
// for grid_sample; differentiable in theta.
Tensor affine_grid(const Tensor& theta, const std::vector<std::int64_t>& size,
                   bool align_corners = false);

// [*, C * r^2, H, W] -> [*, C, H * r, W * r], and its inverse.
Tensor pixel_shuffle(const Tensor& x, std::int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, std::int64_t downscale_factor);

}  // namespace ferry
