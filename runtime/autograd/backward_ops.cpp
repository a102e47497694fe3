// runtime/autograd/backward_ops.cpp — front-ends of the kernels only backward
// passes use (docs/kernel-contract.md, "Ops for training"). Callers are the
// formulas, which pass tensors already checked by the forward op (shapes,
// devices, index bounds), so these only allocate and dispatch.
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"

namespace ferry::detail {

Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& z) {
  Tensor out = new_tensor(grad.sizes(), grad.dtype(), impl_of(grad));
  run_kernel(op, {grad, z.to(grad.dtype()).expand(grad.sizes())}, {out});
  return out;
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
