// ferry/ops_resample.hpp — resizing and rearranging images, PyTorch's torch.nn.functional
// semantics: interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear and
// area, align_corners, size or scale_factor) and pixel_shuffle / pixel_unshuffle. Included by
// ferry/ops.hpp.
//
// Note [Interpolation is separable]
// Every mode but area weighs the input along each spatial dim on its own (bilinear and
// bicubic are products of 1-D weights), so interpolate resizes one dim at a time: an
// index_select of the taps each output position reads (1 for nearest, 2 for linear, 4 for
// cubic, clamped at the edges) weighed by a [taps, out] table of coefficients computed on the
// host with PyTorch's source-index rule and its float arithmetic. It runs on every device
// and its gradient, through index_select, is PyTorch's upsample backward. area is
// adaptive_avg_pool.
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

// [*, C * r^2, H, W] -> [*, C, H * r, W * r], and its inverse.
Tensor pixel_shuffle(const Tensor& x, std::int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, std::int64_t downscale_factor);

}  // namespace ferry
