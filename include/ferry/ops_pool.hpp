// ferry/ops_pool.hpp — pooling, PyTorch's torch.nn.functional semantics: max_pool1d/2d/3d
// (stride defaulting to the kernel, padding, dilation, ceil_mode, the argmax indices),
// avg_pool1d/2d/3d (count_include_pad, divisor_override), adaptive_avg_pool1d/2d/3d and
// adaptive_max_pool1d/2d/3d, and max_unpool1d/2d/3d. Inputs are batched [N, C, *spatial] or
// unbatched [C, *spatial], in a float dtype; bad geometry is a ShapeError naming the sizes,
// PyTorch's checks, before anything is computed. Included by ferry/ops.hpp.
//
// Note [Pooling as gathered windows]
// A pool is the window table of convolution (Note [Convolution as im2col] in
// ferry/ops_conv.hpp) gathered into [N, C, taps, windows] and reduced over the taps: a sum
// divided by each window's divisor, or an argmax whose gather is the value (so the gradient
// goes to the first maximum of each window alone, as PyTorch's, where max() over a dim would
// share it among ties). The taps in the padding read -inf for a max and 0 for an average;
// an adaptive window narrower than the widest reads them too. Max pooling's indices are the
// table's entries at the argmax: flat positions in each input plane, as PyTorch's. This is
// the composition; a device with the pool kernels (cpu, vulkan) runs those, adaptive pooling
// too (docs/kernel-contract.md). The 3-D pools have no kernels: they are the composition on
// every device (its window table is n-dimensional), and a global adaptive average is the mean.
#pragma once

#include <cstdint>
#include <optional>

#include "ferry/ops_conv.hpp"
#include "ferry/ops_sort.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

// stride empty: the kernel size. Each size is one value or one per spatial dim. The output
// per dim is floor((in + 2 padding - dilation (kernel - 1) - 1) / stride) + 1 (ceil with
// ceil_mode, where the last window still starts inside the input or its left padding);
// padding must be at most half the kernel.
Tensor max_pool1d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride = {},
                  const ConvSizes& padding = {0}, const ConvSizes& dilation = {1},
                  bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride = {},
                  const ConvSizes& padding = {0}, const ConvSizes& dilation = {1},
                  bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride = {},
                  const ConvSizes& padding = {0}, const ConvSizes& dilation = {1},
                  bool ceil_mode = false);
// The same, with the i64 index of each maximum within its input plane (h * W + w; in 3-D
// within its volume, d * H * W + h * W + w).
ValuesIndices max_pool1d_with_indices(const Tensor& x, const ConvSizes& kernel_size,
                                      const ConvSizes& stride = {}, const ConvSizes& padding = {0},
                                      const ConvSizes& dilation = {1}, bool ceil_mode = false);
ValuesIndices max_pool2d_with_indices(const Tensor& x, const ConvSizes& kernel_size,
                                      const ConvSizes& stride = {}, const ConvSizes& padding = {0},
                                      const ConvSizes& dilation = {1}, bool ceil_mode = false);
ValuesIndices max_pool3d_with_indices(const Tensor& x, const ConvSizes& kernel_size,
                                      const ConvSizes& stride = {}, const ConvSizes& padding = {0},
                                      const ConvSizes& dilation = {1}, bool ceil_mode = false);

// The mean of each window: divided by the window's size within the padded input
// (count_include_pad) or within the input, or by divisor_override (nonzero) when given.
Tensor avg_pool1d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride = {},
                  const ConvSizes& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride = {},
                  const ConvSizes& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = std::nullopt);
Tensor avg_pool3d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride = {},
                  const ConvSizes& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = std::nullopt);

// F.lp_pool1d / lp_pool2d: the p-norm of each window, (sum of x^p)^(1/p), composed as
// PyTorch's: avg_pool of x^p (no padding; stride empty: the kernel size) times the window's
// size, its sign kept through relu(|.|), to the power 1/p. So, as there, a ceil_mode partial
// window is scaled by the full window's size, and an odd p with negative sums gives NaN.
Tensor lp_pool1d(const Tensor& x, double norm_type, const ConvSizes& kernel_size,
                 const ConvSizes& stride = {}, bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& x, double norm_type, const ConvSizes& kernel_size,
                 const ConvSizes& stride = {}, bool ceil_mode = false);

// Adaptive pooling to output_size (positive; one value or one per spatial dim): window o of
// a dim spans [floor(o in / out), ceil((o + 1) in / out)).
Tensor adaptive_avg_pool1d(const Tensor& x, const ConvSizes& output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, const ConvSizes& output_size);
Tensor adaptive_avg_pool3d(const Tensor& x, const ConvSizes& output_size);
Tensor adaptive_max_pool1d(const Tensor& x, const ConvSizes& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, const ConvSizes& output_size);
Tensor adaptive_max_pool3d(const Tensor& x, const ConvSizes& output_size);
ValuesIndices adaptive_max_pool1d_with_indices(const Tensor& x, const ConvSizes& output_size);
ValuesIndices adaptive_max_pool2d_with_indices(const Tensor& x, const ConvSizes& output_size);
ValuesIndices adaptive_max_pool3d_with_indices(const Tensor& x, const ConvSizes& output_size);

// Max pooling's partial inverse (F.max_unpool1d/2d/3d): each value of x placed at its index
// (as max_poolNd_with_indices gives them, within each plane or volume) of a zero output of
// [N, C, *output_size]. output_size empty: (in - 1) stride - 2 padding + kernel per dim; given
// (n sizes, or n + 2 with N and C first), each within stride of that (ValueError otherwise).
// indices: i64 of x's shape, each in [0, the output's plane size) (ValueError naming the one
// that is not). Where two indices are equal, one of their values lands there.
Tensor max_unpool1d(const Tensor& x, const Tensor& indices, const ConvSizes& kernel_size,
                    const ConvSizes& stride = {}, const ConvSizes& padding = {0},
                    const ConvSizes& output_size = {});
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, const ConvSizes& kernel_size,
                    const ConvSizes& stride = {}, const ConvSizes& padding = {0},
                    const ConvSizes& output_size = {});
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, const ConvSizes& kernel_size,
                    const ConvSizes& stride = {}, const ConvSizes& padding = {0},
                    const ConvSizes& output_size = {});

}  // namespace ferry
