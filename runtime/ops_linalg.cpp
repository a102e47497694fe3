// runtime/ops_linalg.cpp — matmul's front-end: PyTorch's matmul semantics
// (1-D operands, broadcast batch dims, dtype promotion) reduced to the one
// kernel shape "matmul" knows: [B, M, K] x [B, K, N] -> [B, M, N]
// (docs/kernel-contract.md).
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"
#include "ferry/ops.hpp"

namespace ferry {

using detail::check_same_device;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;

namespace {

// t's memory as the kernel's [1, rows, cols] operand with the given strides: an
// argument only, with no Tensor (and so no allocation) of its own.
TensorArg batch_of_one(const Tensor& t, std::int64_t rows, std::int64_t cols,
                       std::int64_t row_stride, std::int64_t col_stride) {
  TensorArg arg;
  arg.buffer = &t.storage()->buffer();
  arg.offset = t.storage_offset();
  arg.dtype = t.dtype();
  arg.sizes = {1, rows, cols};
  arg.strides = {rows * row_stride, row_stride, col_stride};
  return arg;
}

// Views an [..., R, C] tensor whose leading dims broadcast to `batch` as
// [prod(batch), R, C]. A view when the batch dims merge (including a batch
// that is entirely broadcast, stride 0); a copy otherwise.
Tensor as_batched(const Tensor& t, const Shape& batch) {
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Tensor e = t.expand(full);
  std::int64_t b = detail::shape_numel(batch);
  // All batch strides 0: one matrix repeated. reshape would copy, a view does not.
  bool all_broadcast = true;
  for (std::size_t i = 0; i < batch.size(); ++i)
    all_broadcast = all_broadcast && e.stride(std::int64_t(i)) == 0;
  if (all_broadcast)
    return detail::make_view(e, {b, full[full.size() - 2], full.back()},
                             {0, e.stride(-2), e.stride(-1)}, e.storage_offset());
  return e.reshape({b, full[full.size() - 2], full.back()});
}

Tensor matmul_forward(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {{"self", &a}, {"other", &b}});
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError(
        fmt::format("matmul: both arguments need at least 1 dim, got shapes {} and {}; use mul() "
                    "to scale by a scalar",
                    shape_str(a.sizes()), shape_str(b.sizes())));
  const DType dtype = promote_types(a.dtype(), b.dtype());
  if (dtype == DType::boolean)
    throw DTypeError(
        fmt::format("matmul: not defined for bool tensors (shapes {} and {}); cast to a numeric "
                    "dtype first",
                    shape_str(a.sizes()), shape_str(b.sizes())));
  // A vector is a [1, K] row on the left and a [K, 1] column on the right;
  // its unit dim is dropped from the result.
  Tensor A = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor B = b.dim() == 1 ? b.unsqueeze(1) : b;
  const std::int64_t M = A.size(-2), K = A.size(-1), N = B.size(-1);
  if (B.size(-2) != K)
    throw ShapeError(
        fmt::format("matmul: shapes {} and {} do not fit: the first has {} columns but the second "
                    "has {} rows",
                    shape_str(a.sizes()), shape_str(b.sizes()), K, B.size(-2)));
  Shape batch_a(A.sizes().begin(), A.sizes().end() - 2);
  Shape batch_b(B.sizes().begin(), B.sizes().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_a, batch_b);
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("matmul: the batch dims of {} and {} do not broadcast ({} vs {})",
                                 shape_str(a.sizes()), shape_str(b.sizes()), shape_str(batch_a),
                                 shape_str(batch_b)));
  }
  // Cast before broadcasting, so the copy (if any) has the operand's own size.
  A = A.to(dtype);
  B = B.to(dtype);

  Shape result;
  result.reserve(batch.size() + 2);
  result = batch;
  if (a.dim() > 1) result.push_back(M);
  if (b.dim() > 1) result.push_back(N);

  if (batch_b.empty()) {
    // [..., M, K] x [K, N]: fold A's batch (if any) into the rows and run one
    // product (PyTorch does the same; it is what a Linear layer needs). The
    // kernel sees a batch of one through its arguments alone: no view tensors
    // are made for it, which is most of a small product's host time.
    Tensor A2 = batch_a.empty()
                    ? A
                    : A.reshape({detail::shape_numel(batch_a) * M, K});  // not -1: K may be 0
    Tensor out = new_tensor(result, dtype, impl_of(a));
    const std::int64_t rows = A2.size(0);
    OpCall call;
    call.op = OpId::matmul;
    call.inputs.reserve(2);  // moved in: a braced list would copy each argument's vectors
    call.inputs.push_back(batch_of_one(A2, rows, K, A2.stride(0), A2.stride(1)));
    call.inputs.push_back(batch_of_one(B, K, N, B.stride(0), B.stride(1)));
    call.outputs.push_back(batch_of_one(out, rows, N, N, 1));
    detail::run_call(impl_of(a), std::move(call));
    return out;
  }
  std::int64_t nb = detail::shape_numel(batch);
  Tensor out = new_tensor({nb, M, N}, dtype, impl_of(a));
  run_kernel(OpId::matmul, {as_batched(A, batch), as_batched(B, batch)}, {out});
  return out.view(result);
}

// Note [TF32] in ferry/ops.hpp: off unless FERRY_ALLOW_TF32=1 (or the program
// opts in). A function-local static so the environment is read exactly once,
// whichever of the two functions runs first.
std::atomic<bool>& allow_tf32_storage() {
  static std::atomic<bool> allow{kit::env::flag("FERRY_ALLOW_TF32")};
  return allow;
}

}  // namespace

void set_matmul_allow_tf32(bool allow) {
  allow_tf32_storage().store(allow, std::memory_order_relaxed);
}

bool matmul_allow_tf32() { return allow_tf32_storage().load(std::memory_order_relaxed); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (detail::autocast_applies(OpId::matmul)) {  // low (Note [Autocast])
    const detail::AutocastOp ac(OpId::matmul, {&a, &b});
    return matmul(ac(a), ac(b));
  }
  Tensor out = autograd::untracked([&] { return matmul_forward(a, b); });
  autograd::record_matmul(a, b, out);
  return out;
}

}  // namespace ferry
