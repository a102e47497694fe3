// runtime/memory_format_internal.hpp — how the core's ops keep a channels-last layout
// (Note [Channels-last outputs] in memory_format.cpp). Internal to the core.
#pragma once

#include <initializer_list>
#include <optional>

#include "ferry/tensor.hpp"

namespace ferry {
class Attrs;
class DeviceImpl;
}

namespace ferry::detail {

// The permutation that takes [N, C, *spatial] to [N, *spatial, C], when an op whose output has
// `shape` should compute in it: the first of `operands` with that shape is channels-last (and
// not also contiguous). std::nullopt otherwise.
std::optional<Shape> channels_last_order(const Shape& shape,
                                         std::initializer_list<const Tensor*> operands);
Shape inverse_permutation(const Shape& order);
// The rank a channels-last format takes: 4 for channels_last, 5 for channels_last_3d.
std::int64_t rank_of(MemoryFormat format);

// The memory format of the first of `likes` of rank `rank` that is channels-last, else
// contiguous.
MemoryFormat memory_format_of(std::int64_t rank, std::initializer_list<const Tensor*> likes);
// y in the memory format of the first of `likes` with y's rank that is channels-last, else y.
Tensor in_memory_format_of(const Tensor& y, std::initializer_list<const Tensor*> likes);
// The layout in which x's device runs a CNN layer's kernel (convolution, batch_norm,
// max_pool2d, avg_pool2d, interpolate) for this call: the channels-last format of the first of
// `likes` of x's rank that is channels-last, where the device claims
// DeviceCapabilities::channels_last_cnn; contiguous otherwise (the kernel computes on contiguous
// copies and the op converts its result).
MemoryFormat cnn_kernel_format(const Tensor& x, std::initializer_list<const Tensor*> likes);
// Tells the kernel (the attribute channels_last, read by ferry::activation_format).
void set_activation_format(Attrs& attrs, MemoryFormat format);
// A new tensor (a kernel's output) of `sizes` laid out in `format` (contiguous, channels_last
// or channels_last_3d) on `device`.
Tensor new_tensor_in(const Shape& sizes, DType dtype, DeviceImpl& device, MemoryFormat format);

// `run` (1-D, contiguous, like.numel() elements) seen with like's shape, in like's layout where
// like is channels-last, else contiguous: the element at each index lies where like's does, so
// the two can be walked in memory order together (an optimizer's state, DDP's bucket views, as
// PyTorch's reducer lays them).
Tensor as_layout_of(const Tensor& run, const Tensor& like);

}  // namespace ferry::detail
