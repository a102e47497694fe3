// runtime/ops_linalg.cpp — matmul's front-end: PyTorch's matmul semantics
// (1-D operands, broadcast batch dims, dtype promotion) reduced to the one
// kernel shape "matmul" knows: [B, M, K] x [B, K, N] -> [B, M, N]
// (docs/kernel-contract.md).
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry {

using detail::check_same_device;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;

namespace {

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

  Shape result = batch;
  if (a.dim() > 1) result.push_back(M);
  if (b.dim() > 1) result.push_back(N);

  Tensor out;
  if (batch_b.empty() && !batch_a.empty()) {
    // [..., M, K] x [K, N]: fold the batch into the rows and run one large
    // product (PyTorch does the same; it is what a Linear layer needs).
    Tensor A2 = A.reshape({detail::shape_numel(batch_a) * M, K});  // not -1: K may be 0
    out = new_tensor({1, A2.size(0), N}, dtype, impl_of(a));
    run_kernel(OpId::matmul, {A2.unsqueeze(0), B.unsqueeze(0)}, {out});
  } else if (batch.empty()) {  // [M, K] x [K, N]: one product, no batch views to make
    out = new_tensor({1, M, N}, dtype, impl_of(a));
    run_kernel(OpId::matmul, {A.unsqueeze(0), B.unsqueeze(0)}, {out});
  } else {
    std::int64_t nb = detail::shape_numel(batch);
    out = new_tensor({nb, M, N}, dtype, impl_of(a));
    run_kernel(OpId::matmul, {as_batched(A, batch), as_batched(B, batch)}, {out});
  }
  return out.view(result);
}

// Note [TF32] in ferry/ops.hpp: off unless FERRY_ALLOW_TF32=1 (or the program
// opts in). A function-local static so the environment is read exactly once,
// whichever of the two functions runs first.
std::atomic<bool>& allow_tf32_storage() {
  static std::atomic<bool> allow{[] {
    const char* v = std::getenv("FERRY_ALLOW_TF32");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }()};
  return allow;
}

}  // namespace

void set_matmul_allow_tf32(bool allow) {
  allow_tf32_storage().store(allow, std::memory_order_relaxed);
}

bool matmul_allow_tf32() { return allow_tf32_storage().load(std::memory_order_relaxed); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor out = autograd::untracked([&] { return matmul_forward(a, b); });
  autograd::record_matmul(a, b, out);
  return out;
}

}  // namespace ferry
