// runtime/ops_index.cpp — front-ends of index_select, gather, cat and stack.
// index_select and gather run a kernel (docs/kernel-contract.md); cat and
// stack are built from views and Tensor::copy_, so every device that can copy
// has them.
//
// Note [Index bounds]
// An index outside its dim is the caller's error, so the front-end finds it and
// raises a ShapeError naming the op, the bad value and the valid range. It does
// so with the generic min and max reductions, which work on every device, and one
// read back of both to the host: at the call on the CPU (before any kernel runs),
// and for the ops that write a fresh tensor, at the thread's next read of any
// other device (Note [Deferred checks] in deferred_checks.hpp). The check is
// skipped for an empty index. Negative indices are refused, as in
// PyTorch's index_select and gather. Kernels may rely on the check but must
// still never read outside the tensor. The core's own compositions gather with
// indices in range by construction (the linear algebra's pivot rows and
// rotation partners) through detail::gather_in_range, and index_select with
// positions they computed on the host (flip, pad, diagonal) through
// detail::index_select_in_range, which skip the check: its read is a GPU sync
// per call, in loops of hundreds of calls.
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "deferred_checks.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::as_index;
using detail::check_bounds;
using detail::check_same_device;
using detail::check_values;
using detail::CheckError;
using detail::CheckTime;
using detail::CheckVerdict;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;
using detail::wrap_dim;

namespace detail {

// The index as i64 (i32 is widened); any other dtype is a DTypeError.
Tensor as_index(std::string_view op, const Tensor& index) {
  if (index.dtype() != DType::i64 && index.dtype() != DType::i32)
    throw DTypeError(
        fmt::format("{}: indices must be i64 or i32, got {} (shape {}); convert them with "
                    ".to(ferry::DType::i64)",
                    op, dtype_name(index.dtype()), shape_str(index.sizes())));
  return index.to(DType::i64);
}

Tensor index_range_values(const Tensor& index) {
  return ferry::stack({ferry::min(index).to(DType::i64), ferry::max(index).to(DType::i64)});
}

std::pair<std::int64_t, std::int64_t> index_range(const Tensor& index) {
  const auto v = index_range_values(index).to_vector<std::int64_t>();
  return {v[0], v[1]};
}

// Note [Index bounds].
void check_bounds(std::string_view op, const Tensor& index, std::int64_t dim, std::int64_t size,
                  const Shape& x_shape, CheckTime when) {
  if (index.numel() == 0) return;
  CheckVerdict verdict = [op = std::string(op), dim, size,
                          x_shape](std::span<const std::int64_t> v) -> std::string {
    const std::int64_t lo = v[0], hi = v[1];
    if (lo >= 0 && hi < size) return {};
    return fmt::format(
        "{}: index {} is out of range for dim {} of size {} (input shape {}); valid indices "
        "are 0 to {}",
        op, lo < 0 ? lo : hi, dim, size, shape_str(x_shape), size - 1);
  };
  check_values(index_range_values(index), std::move(verdict), CheckError::shape, when);
}

Tensor index_select(std::string_view op, const Tensor& x, std::int64_t dim, const Tensor& index,
                    bool check_range) {
  check_same_device(op, {{"input", &x}, {"index", &index}});
  if (index.dim() > 1)
    throw ShapeError(fmt::format("{}: the index must be 0-D or 1-D, got shape {}", op,
                                 shape_str(index.sizes())));
  Tensor idx = as_index(op, index).reshape({-1}).contiguous();
  // A 0-d input is treated as [1] (PyTorch accepts dim 0 and -1 for it).
  Tensor in = x.dim() == 0 ? x.reshape({1}) : x;
  const std::int64_t d = wrap_dim(dim, in.dim(), op);
  if (check_range) check_bounds(op, idx, d, in.size(d), x.sizes(), CheckTime::deferrable);
  Shape shape = in.sizes();
  shape[std::size_t(d)] = idx.numel();
  Tensor out = new_tensor(shape, x.dtype(), impl_of(x));
  if (out.numel() > 0) run_kernel(OpId::index_select, {in, idx}, {out}, Attrs{{"dim", d}});
  return out;
}

Tensor index_select_in_range(const Tensor& x, std::int64_t dim, const Tensor& index) {
  Tensor out = autograd::untracked(
      [&] { return index_select("index_select", x, dim, index, /*check_range=*/false); });
  autograd::record_index_select(x, dim, index, out);
  return out;
}

}  // namespace detail

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  Tensor out =
      autograd::untracked([&] { return detail::index_select("index_select", x, dim, index); });
  autograd::record_index_select(x, dim, index, out);
  return out;
}

namespace {

Tensor gather_forward(const Tensor& x, std::int64_t dim, const Tensor& index,
                      bool check_range = true) {
  check_same_device("gather", {{"input", &x}, {"index", &index}});
  Tensor idx = as_index("gather", index);
  if (idx.dim() != x.dim())
    throw ShapeError(
        fmt::format("gather: the index must have as many dims as the input; got index shape {} "
                    "and input shape {}",
                    shape_str(index.sizes()), shape_str(x.sizes())));
  const std::int64_t d = wrap_dim(dim, x.dim(), "gather");
  // 0-d input and index: the same as 1-element vectors.
  Tensor in = x.dim() == 0 ? x.reshape({1}) : x;
  Tensor ix = x.dim() == 0 ? idx.reshape({1}) : idx;
  for (std::int64_t i = 0; i < in.dim(); ++i)
    if (i != d && ix.size(i) > in.size(i))
      throw ShapeError(
          fmt::format("gather: index shape {} is larger than input shape {} in dim {} (only dim {} "
                      "may be larger)",
                      shape_str(index.sizes()), shape_str(x.sizes()), i, d));
  if (check_range) check_bounds("gather", ix, d, in.size(d), x.sizes(), CheckTime::deferrable);
  Tensor out = new_tensor(ix.sizes(), x.dtype(), impl_of(x));
  if (out.numel() > 0) run_kernel(OpId::gather, {in, ix}, {out}, Attrs{{"dim", d}});
  return out.view(index.sizes());
}

Tensor cat_forward(const std::vector<Tensor>& tensors, std::int64_t dim) {
  if (tensors.empty()) throw ShapeError("cat: expects a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined()) throw Error(fmt::format("cat: tensors[{}] is undefined", i));
  check_same_device("cat", tensors);
  DType dtype = tensors[0].dtype();
  for (const Tensor& t : tensors) dtype = promote_types(dtype, t.dtype());
  // Like PyTorch, 1-D tensors of shape [0] are skipped whatever the other shapes.
  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (!(tensors[i].dim() == 1 && tensors[i].size(0) == 0)) used.push_back(i);
  if (used.empty()) return new_tensor({0}, dtype, impl_of(tensors[0]));

  const Tensor& first = tensors[used[0]];
  if (first.dim() == 0)
    throw ShapeError(fmt::format(
        "cat: tensors[{}] is 0-d and cannot be concatenated; unsqueeze it or use stack", used[0]));
  const std::int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.sizes();
  shape[std::size_t(d)] = 0;
  for (std::size_t i : used) {
    const Tensor& t = tensors[i];
    bool fits = t.dim() == first.dim();
    for (std::int64_t k = 0; fits && k < t.dim(); ++k) fits = k == d || t.size(k) == first.size(k);
    if (!fits)
      throw ShapeError(
          fmt::format("cat: tensors[{}] has shape {} but tensors[{}] has shape {}; all must match "
                      "except in dim {}",
                      i, shape_str(t.sizes()), used[0], shape_str(first.sizes()), d));
    shape[std::size_t(d)] += t.size(d);
  }
  Tensor out = new_tensor(shape, dtype, impl_of(first));
  std::int64_t offset = 0;
  for (std::size_t i : used) {
    const Tensor& t = tensors[i];
    const std::int64_t n = t.size(d);
    if (n > 0 && t.numel() > 0) out.narrow(d, offset, n).copy_(t);  // copy_ converts the dtype
    offset += n;
  }
  return out;
}

}  // namespace

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  Tensor out = autograd::untracked([&] { return gather_forward(x, dim, index); });
  autograd::record_gather(x, dim, index, out);
  return out;
}

Tensor detail::gather_in_range(const Tensor& x, std::int64_t dim, const Tensor& index) {
  Tensor out = autograd::untracked([&] { return gather_forward(x, dim, index, false); });
  autograd::record_gather(x, dim, index, out);
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  Tensor out = autograd::untracked([&] { return cat_forward(tensors, dim); });
  autograd::record_cat(tensors, dim, out);
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim) {
  if (tensors.empty()) throw ShapeError("stack: expects a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) throw Error(fmt::format("stack: tensors[{}] is undefined", i));
    if (tensors[i].sizes() != tensors[0].sizes())
      throw ShapeError(fmt::format(
          "stack: tensors[{}] has shape {} but tensors[0] has shape {}; all must be equal", i,
          shape_str(tensors[i].sizes()), shape_str(tensors[0].sizes())));
  }
  check_same_device("stack", tensors);
  const std::int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  Tensor out = autograd::untracked([&] {
    std::vector<Tensor> parts;
    parts.reserve(tensors.size());
    for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
    return cat(parts, d);
  });
  autograd::record_stack(tensors, d, out);
  return out;
}

}  // namespace ferry
