// runtime/autograd/backward_ops.cpp — front-ends of the kernels only backward
// passes use (docs/kernel-contract.md, "Ops for training"). Callers are the
// formulas, which pass tensors already checked by the forward op (shapes,
// devices, index bounds), so these only allocate and dispatch.
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"

namespace ferry::detail {

// A channels-last gradient gives a channels-last result, computed in the permuted order as
// the element-wise ops compute (Note [Channels-last outputs]): a contiguous output of
// channels-last operands walked them strided element by element (ResNet-18's first
// relu_backward, [32, 64, 112, 112] channels-last, took 69 ms a call against 11 ms for its
// NCHW twin).
Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& z) {
  const std::optional<Shape> order = channels_last_order(grad.sizes(), {&grad, &z});
  const auto laid = [&](const Tensor& t) { return order ? t.permute(*order) : t; };
  const Tensor g = laid(grad);
  Tensor out = new_tensor(g.sizes(), grad.dtype(), impl_of(grad));
  run_kernel(op, {g, laid(z.to(grad.dtype()).expand(grad.sizes()))}, {out});
  return order ? out.permute(inverse_permutation(*order)) : out;
}

// Both accumulate into a zero tensor the kernel reads and writes.
Tensor index_add(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = zeros(shape, {.dtype = src.dtype(), .device = src.device()});
  if (src.numel() > 0) run_kernel(OpId::index_add, {src, index}, {out}, Attrs{{"dim", dim}});
  return out;
}

Tensor scatter_add(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = zeros(shape, {.dtype = src.dtype(), .device = src.device()});
  if (src.numel() > 0) run_kernel(OpId::scatter_add, {src, index}, {out}, Attrs{{"dim", dim}});
  return out;
}

}  // namespace ferry::detail
