// ferry/memory_format.hpp — the order in which a dense tensor's elements lie in memory
// (PyTorch's torch.memory_format).
//
// Note [Memory formats]
// A 4-D tensor [N, C, H, W] is contiguous when its strides walk W fastest, then H, C and N, and
// channels-last when they walk C fastest, then W, H and N (NHWC: the layout GPUs' and oneDNN's
// convolutions prefer, since a pixel's channels are one run); a 5-D one is channels_last_3d in
// NDHWC. Either way the tensor keeps its logical shape [N, C, H, W]: only the strides differ
// (PyTorch: [N, C, H, W] channels-last has strides [HWC, 1, WC, C]). Size-1 dims are ignored,
// as PyTorch ignores them, so a tensor can be both.
//
// Where the layout is kept (as PyTorch keeps it): element-wise ops whose output has the shape
// of a channels-last operand (unary ops, binary ops and their broadcasts, casts with
// Tensor::to(dtype), moves with Tensor::to(device)) compute in the permuted order and return
// their result channels-last (Note [Channels-last outputs] in runtime/memory_format.cpp);
// conv1d/2d/3d and conv_transpose return channels-last when the input or the weight is; the
// 2-D and 3-D pools, interpolate and batch_norm (element-wise underneath) keep the input's.
// Reductions, matmul and the shape ops return contiguous results, as in PyTorch.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace ferry {

enum class MemoryFormat {
  contiguous,        // row-major: the last dim fastest
  channels_last,     // 4-D only: NHWC
  channels_last_3d,  // 5-D only: NDHWC
  preserve,          // the input's (for ops that make a tensor like another)
};

std::string_view memory_format_name(MemoryFormat format);

// Whether a view of `sizes` and `strides` (in elements) is dense in `format`'s order:
// contiguous, or channels-last (4-D for channels_last, 5-D for channels_last_3d; false at
// another rank). Size-1 dims may have any stride and an empty view is in every order, as in
// PyTorch. The one rule Tensor::is_contiguous and the kernels' TensorArg::is_contiguous ask;
// ValueError for preserve, which is no layout.
bool is_dense_in(std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides,
                 MemoryFormat format);

}  // namespace ferry
