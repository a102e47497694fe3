// ferry/ops_conv.hpp — convolution and its sliding-window helpers, PyTorch's
// torch.nn.functional semantics: conv1d, conv2d, conv3d (stride, padding as
// sizes or "same" / "valid", dilation, groups, optional bias; batched
// [N, C, *spatial] or unbatched [C, *spatial] input) and F.unfold / F.fold
// (im2col and col2im over two spatial dims), and conv_transpose1d/2d/3d. Bad geometry is a
// ShapeError naming the sizes, PyTorch's checks in PyTorch's order, before anything is computed.
// Included by ferry/ops.hpp.
//
// Note [Convolution as im2col]
// These are composite ops of the op table (Note [Composite ops] in
// ferry/op.hpp): im2col is an index_select of the input, flattened over its
// spatial dims and given one zero slot that the taps in the padding read, at
// the positions of every window (a table computed on the host:
// runtime/sliding_window.hpp, which pooling shares), col2im the index_add of
// columns back into such an image; a convolution is then one batched matmul
// of the weight, [groups, out/groups, in/groups * prod(kernel)], with the
// columns, plus the bias, and a transposed convolution the col2im of the
// transposed weight times the input. So they run on every device that runs
// index_select, index_add and matmul, in every float dtype, and their
// gradients come from those parts (index_select's is index_add: the col2im
// of the columns' gradient). The vendor libraries' fast paths (oneDNN,
// cuDNN, an implicit-GEMM shader) are fused kernels still to come (issue 22).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

// A per-spatial-dim argument: one value for every dim, or one per dim.
using ConvSizes = std::vector<std::int64_t>;
// conv padding: sizes (one, or one per spatial dim), or "same" (stride 1 only: the output has
// the input's size, any odd extra on the right) or "valid" (none).
struct ConvPadding {
  ConvPadding(std::initializer_list<std::int64_t> s) : sizes(s) {}
  ConvPadding(ConvSizes s) : sizes(std::move(s)) {}
  ConvPadding(std::int64_t p) : sizes{p} {}
  template <std::size_t N> ConvPadding(const char (&m)[N]) : mode(m) {}  // not a literal 0
  ConvPadding(std::string_view m) : mode(m) {}
  ConvSizes sizes = {0};
  std::string mode;  // "same" or "valid"; empty: `sizes`
};

// x [N, C_in, *spatial] (or [C_in, *spatial]), weight [C_out, C_in / groups, *kernel],
// bias [C_out] or undefined -> [N, C_out, *out], out = (in + 2 pad - dilation (kernel - 1)
// - 1) / stride + 1 per spatial dim (1, 2 or 3 of them).
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ConvSizes& stride = {1}, const ConvPadding& padding = 0,
              const ConvSizes& dilation = {1}, std::int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ConvSizes& stride = {1}, const ConvPadding& padding = 0,
              const ConvSizes& dilation = {1}, std::int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ConvSizes& stride = {1}, const ConvPadding& padding = 0,
              const ConvSizes& dilation = {1}, std::int64_t groups = 1);

// conv_transpose: x [N, C_in, *spatial] (or unbatched), weight [C_in, C_out / groups, *kernel],
// bias [C_out] or undefined -> [N, C_out, *out], out = (in - 1) stride - 2 padding + dilation
// (kernel - 1) + output_padding + 1 per spatial dim; output_padding (which only resolves the
// output size) must be below the stride or the dilation. PyTorch's argument order.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const ConvSizes& stride = {1}, const ConvSizes& padding = {0},
                        const ConvSizes& output_padding = {0}, std::int64_t groups = 1,
                        const ConvSizes& dilation = {1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const ConvSizes& stride = {1}, const ConvSizes& padding = {0},
                        const ConvSizes& output_padding = {0}, std::int64_t groups = 1,
                        const ConvSizes& dilation = {1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const ConvSizes& stride = {1}, const ConvSizes& padding = {0},
                        const ConvSizes& output_padding = {0}, std::int64_t groups = 1,
                        const ConvSizes& dilation = {1});

// F.unfold: x [N, C, H, W] (or [C, H, W]) -> [N, C * kh * kw, L], each column one window
// (channel slowest, then the kernel's rows and columns), L windows in row-major order.
Tensor unfold(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& dilation = {1},
              const ConvSizes& padding = {0}, const ConvSizes& stride = {1});
// F.fold: unfold's adjoint: columns [N, C * kh * kw, L] (or [C * kh * kw, L]) summed into
// [N, C, *output_size], overlapping windows adding up.
Tensor fold(const Tensor& columns, const ConvSizes& output_size, const ConvSizes& kernel_size,
            const ConvSizes& dilation = {1}, const ConvSizes& padding = {0},
            const ConvSizes& stride = {1});

}  // namespace ferry
