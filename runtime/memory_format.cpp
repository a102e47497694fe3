// runtime/memory_format.cpp — Tensor's memory-format methods (ferry/memory_format.hpp) and the
// core's rule for keeping a channels-last layout through the ops.
//
// Note [Channels-last outputs]
// Kernels write contiguous outputs (docs/kernel-contract.md), so an op keeps a channels-last
// layout without any backend knowing of it: it permutes its operands into the layout's dim
// order (N, H, W, C: a channels-last tensor permuted so is contiguous), runs its kernel on
// them into a contiguous output of the permuted shape, and returns that output permuted back,
// a [N, C, H, W] view whose strides are channels-last. Element-wise ops do so when the first
// operand of the output's shape is channels-last and not also contiguous (channels_last_order;
// a broadcast bias does not decide), as PyTorch's TensorIterator follows its inputs' layout; the
// other ops that keep the layout (pooling, interpolate) compute contiguously and convert their
// result (in_memory_format_of), a copy that a channels-last kernel of their own would save.
// Convolution, batch_norm and max_pool2d do so too, except on a device whose CNN kernels take
// channels-last activations (DeviceCapabilities::channels_last_cnn, cnn_kernel_format: the
// CPU's, through oneDNN's nhwc primitives for convolution and its own row-wise kernels for the
// others), which computes in that layout and copies nothing.
#include <fmt/format.h>

#include <optional>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/tensor.hpp"
#include "memory_format_internal.hpp"

namespace ferry {
namespace {

// The dims from outermost to innermost in memory: dim 1 (the channels) last.
Shape channels_last_dims(std::int64_t n) {
  Shape order{0};
  for (std::int64_t d = 2; d < n; ++d) order.push_back(d);
  order.push_back(1);
  return order;
}

}  // namespace

std::string_view memory_format_name(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::contiguous:
      return "contiguous";
    case MemoryFormat::channels_last:
      return "channels_last";
    case MemoryFormat::channels_last_3d:
      return "channels_last_3d";
    case MemoryFormat::preserve:
      return "preserve";
  }
  return "unknown";
}

bool is_dense_in(std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides,
                 MemoryFormat format) {
  if (format == MemoryFormat::preserve)
    throw ValueError(
        "is_contiguous: MemoryFormat::preserve is not a layout; ask about contiguous, "
        "channels_last or channels_last_3d");
  const std::size_t n = sizes.size();
  const bool cl = format != MemoryFormat::contiguous;
  if (cl && std::int64_t(n) != detail::rank_of(format)) return false;
  // One pass: an empty tensor is dense whatever its strides, so a mismatch is only noted.
  bool dense = true;
  std::int64_t expected = 1;
  for (std::size_t k = 0; k < n; ++k) {  // innermost first: channels-last's is C, then W, H, N
    const std::size_t d = !cl ? n - 1 - k : k == 0 ? 1 : k == n - 1 ? 0 : n - k;
    if (sizes[d] == 0) return true;
    if (sizes[d] == 1) continue;
    dense = dense && strides[d] == expected;
    expected *= sizes[d];
  }
  return dense;
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  return is_dense_in(sizes(), strides(), format);
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::contiguous) return contiguous();
  if (format == MemoryFormat::preserve)
    throw ValueError(
        "contiguous: MemoryFormat::preserve is not a layout; name contiguous, channels_last or "
        "channels_last_3d");
  if (dim() != detail::rank_of(format))
    throw ShapeError(fmt::format("contiguous: {} needs a {}-D tensor [N, C, {}], got shape {}",
                                 memory_format_name(format), detail::rank_of(format),
                                 detail::rank_of(format) == 4 ? "H, W" : "D, H, W",
                                 shape_str(sizes())));
  if (is_contiguous(format)) return *this;
  const Shape order = channels_last_dims(dim());
  return permute(order).contiguous().permute(detail::inverse_permutation(order));
}

MemoryFormat Tensor::suggest_memory_format() const {
  for (MemoryFormat f : {MemoryFormat::channels_last, MemoryFormat::channels_last_3d})
    if (dim() == detail::rank_of(f) && is_contiguous(f) && !is_contiguous()) return f;
  return MemoryFormat::contiguous;
}

namespace detail {

std::int64_t rank_of(MemoryFormat format) { return format == MemoryFormat::channels_last ? 4 : 5; }

Shape inverse_permutation(const Shape& order) {
  Shape inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) inverse[std::size_t(order[i])] = std::int64_t(i);
  return inverse;
}

std::optional<Shape> channels_last_order(const Shape& shape,
                                         std::initializer_list<const Tensor*> operands) {
  if (shape.size() != 4 && shape.size() != 5) return std::nullopt;
  for (const Tensor* t : operands)
    if (t->defined() && t->sizes() == shape) {  // the first of the result's shape decides
      if (t->suggest_memory_format() == MemoryFormat::contiguous) return std::nullopt;
      return channels_last_dims(std::int64_t(shape.size()));
    }
  return std::nullopt;
}

Tensor as_layout_of(const Tensor& run, const Tensor& like) {
  const std::optional<Shape> order = channels_last_order(like.sizes(), {&like});
  if (!order) return run.view(like.sizes());
  Shape permuted;
  for (std::int64_t d : *order) permuted.push_back(like.size(d));
  return run.view(permuted).permute(inverse_permutation(*order));
}

MemoryFormat memory_format_of(std::int64_t rank, std::initializer_list<const Tensor*> likes) {
  for (const Tensor* t : likes)
    if (t->defined() && t->dim() == rank) {
      const MemoryFormat f = t->suggest_memory_format();
      if (f != MemoryFormat::contiguous) return f;
    }
  return MemoryFormat::contiguous;
}

Tensor in_memory_format_of(const Tensor& y, std::initializer_list<const Tensor*> likes) {
  const MemoryFormat f = memory_format_of(y.dim(), likes);
  return f == MemoryFormat::contiguous ? y : y.contiguous(f);
}

MemoryFormat cnn_kernel_format(const Tensor& x, std::initializer_list<const Tensor*> likes) {
  const MemoryFormat f = memory_format_of(x.dim(), likes);
  return f != MemoryFormat::contiguous && impl_of(x).capabilities().channels_last_cnn
             ? f
             : MemoryFormat::contiguous;
}

void set_activation_format(Attrs& attrs, MemoryFormat format) {
  if (format != MemoryFormat::contiguous) attrs.set("channels_last", true);
}

Tensor new_tensor_in(const Shape& sizes, DType dtype, DeviceImpl& device, MemoryFormat format) {
  if (format == MemoryFormat::contiguous) return new_tensor(sizes, dtype, device);
  const Shape order = channels_last_dims(std::int64_t(sizes.size()));
  Shape permuted;
  for (std::int64_t d : order) permuted.push_back(sizes[std::size_t(d)]);
  return new_tensor(permuted, dtype, device).permute(inverse_permutation(order));
}

}  // namespace detail
}  // namespace ferry
