// runtime/ops_structure.cpp — the ops of ferry/ops_shape.hpp that assemble a tensor from the
// pieces of others: take, index_copy, diag_embed, block_diag and cartesian_prod (composite
// rows of the op table, Note [Composite ops] in ferry/op.hpp), and the views and stacks around
// them, tensor_split, atleast_1d/2d/3d, hstack, vstack, dstack and column_stack.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <string>

#include "deferred_checks.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::check_defined;
using detail::check_dtype;
using detail::wrap_dim;

void check_long_index(std::string_view op, const Tensor& index) {
  if (index.dtype() != DType::i64)
    throw DTypeError(fmt::format("{}(): Expected a long tensor for index, but got {}", op,
                                 dtype_name(index.dtype())));
}

template <typename F> std::vector<Tensor> each(const std::vector<Tensor>& tensors, F f) {
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(f(t));
  return out;
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& index) {
  check_defined("take", {&x, &index});
  check_dtype(OpId::take, x);
  detail::check_same_device("take", {{"input", &x}, {"index", &index}});
  check_long_index("take", index);
  const std::int64_t n = x.numel();
  if (index.numel() > 0)
    // A fresh tensor: off the CPU, the error comes at the next read (Note [Deferred checks]).
    detail::check_values(
        detail::index_range_values(index),
        [n, shape = x.sizes()](std::span<const std::int64_t> v) -> std::string {
          if (v[0] >= -n && v[1] < n) return {};
          return fmt::format(
              "take: index {} is out of range for a tensor of {} elements (shape {}); valid "
              "indices are {} to {}",
              v[0] < -n ? v[0] : v[1], n, shape_str(shape), -n, n - 1);
        });
  const Tensor flat = index.reshape({-1});
  const Tensor wrapped = where(lt(flat, Scalar(0)), flat + n, flat);
  // Checked above (an index still out of range after wrapping reads 0 until the error comes).
  return detail::index_select_in_range(x.reshape({-1}), 0, wrapped).reshape(index.sizes());
}

Tensor index_copy(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source) {
  check_defined("index_copy", {&x, &index, &source});
  check_dtype(OpId::index_copy, x);
  detail::check_same_device("index_copy", {{"input", &x}, {"index", &index}, {"source", &source}});
  if (index.dim() > 1)
    throw ShapeError(
        fmt::format("index_copy(): Index should have dimension 1 or 0 (got {})", index.dim()));
  check_long_index("index_copy", index);
  if (source.dtype() != x.dtype())
    throw DTypeError(fmt::format(
        "index_copy(): self and source expected to have the same dtype, but got (self) {} and "
        "(source) {}",
        dtype_name(x.dtype()), dtype_name(source.dtype())));
  // A 0-d tensor counts as [1], as PyTorch's.
  const Tensor to = x.dim() == 0 ? x.reshape({1}) : x;
  const Tensor from = source.dim() == 0 ? source.reshape({1}) : source;
  const std::int64_t d = wrap_dim(dim, to.dim(), "index_copy");
  Shape expected = to.sizes();
  expected[std::size_t(d)] = index.numel();
  if (from.sizes() != expected)
    throw ShapeError(fmt::format(
        "index_copy(): source must have the input's shape {} with the number of indices ({}) at "
        "dim {}, i.e. {}, got {}",
        shape_str(x.sizes()), index.numel(), d, shape_str(expected), shape_str(source.sizes())));
  detail::check_bounds("index_copy", index, d, to.size(d), x.sizes());
  Shape line(std::size_t(to.dim()), 1);
  line[std::size_t(d)] = index.numel();
  const Tensor spread = index.reshape(line).expand(expected).contiguous();
  return scatter(to, d, spread, from).reshape(x.sizes());
}

Tensor diag_embed(const Tensor& x, std::int64_t offset, std::int64_t dim1, std::int64_t dim2) {
  check_defined("diag_embed", {&x});
  check_dtype(OpId::diag_embed, x);
  const std::int64_t rank = x.dim() + 1;
  const std::int64_t d1 = wrap_dim(dim1, rank, "diag_embed");
  const std::int64_t d2 = wrap_dim(dim2, rank, "diag_embed");
  if (d1 == d2)
    throw ShapeError(
        fmt::format("diag_embed: diagonal dimensions cannot be identical {}, {}", dim1, dim2));
  // [..., n, n] with x's last dim on the main diagonal (where, not a product with the identity:
  // an inf would make NaNs off the diagonal), padded to [..., m, m] to move it to `offset`.
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  const TensorOptions idx{.dtype = DType::i64, .device = x.device()};
  const Tensor on = eq(arange(double(n), idx).unsqueeze(1), arange(double(n), idx));
  const Tensor zero = zeros({}, {.dtype = x.dtype(), .device = x.device()});
  Tensor square = where(on, x.reshape(x.dim() == 0 ? Shape{1} : x.sizes()).unsqueeze(-1), zero);
  const std::int64_t k = std::abs(offset);
  if (k > 0) square = offset > 0 ? pad(square, {k, 0, 0, k}) : pad(square, {0, k, k, 0});
  // The rows go to d1, the columns to d2, the batch dims to the rest, in order.
  Shape order(static_cast<std::size_t>(rank));
  std::int64_t batch = 0;
  for (std::int64_t p = 0; p < rank; ++p)
    order[std::size_t(p)] = p == d1 ? rank - 2 : p == d2 ? rank - 1 : batch++;
  return square.permute(order).contiguous();
}

Tensor block_diag(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) return zeros({1, 0});
  DType dtype = tensors[0].defined() ? tensors[0].dtype() : DType::f32;
  std::int64_t cols = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    check_defined("block_diag", {&t});
    check_dtype(OpId::block_diag, t);
    if (t.dim() > 2)
      throw ShapeError(fmt::format(
          "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {} has {} "
          "dimensions (shape {})",
          i, t.dim(), shape_str(t.sizes())));
    dtype = promote_types(dtype, t.dtype());
    cols += t.dim() == 2 ? t.size(1) : t.numel();
  }
  detail::check_same_device("block_diag", tensors);
  // Each block as rows padded with zeros to the full width, left of it the earlier blocks'.
  std::vector<Tensor> rows;
  std::int64_t left = 0;
  for (const Tensor& t : tensors) {
    const Tensor block = (t.dim() == 2 ? t : t.reshape({1, -1})).to(dtype);
    const std::int64_t width = block.size(1);
    rows.push_back(pad(block, {left, cols - left - width}));
    left += width;
  }
  return cat(rows, 0);
}

Tensor cartesian_prod(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw ValueError("cartesian_prod: expected a non-empty list of tensors");
  for (const Tensor& t : tensors) {
    check_defined("cartesian_prod", {&t});
    check_dtype(OpId::cartesian_prod, t);
    if (t.dim() != 1)
      throw ShapeError(fmt::format("cartesian_prod: Expect a 1D vector, but got shape {}",
                                   shape_str(t.sizes())));
  }
  if (tensors.size() == 1) return tensors[0];
  return stack(each(meshgrid(tensors, "ij"), [](const Tensor& g) { return g.reshape({-1}); }), 1);
}

std::vector<Tensor> tensor_split(const Tensor& x, std::int64_t sections, std::int64_t dim) {
  check_defined("tensor_split", {&x});
  if (x.dim() == 0)
    throw ShapeError(
        "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
  if (sections <= 0)
    throw ValueError(fmt::format("number of sections must be larger than 0, got {}", sections));
  const std::int64_t d = wrap_dim(dim, x.dim(), "tensor_split");
  const std::int64_t n = x.size(d), base = n / sections, longer = n % sections;
  std::vector<Tensor> out;
  for (std::int64_t i = 0, start = 0; i < sections; ++i) {
    const std::int64_t len = base + (i < longer ? 1 : 0);
    out.push_back(x.narrow(d, start, len));
    start += len;
  }
  return out;
}

std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<std::int64_t>& indices,
                                 std::int64_t dim) {
  check_defined("tensor_split", {&x});
  if (x.dim() == 0)
    throw ShapeError(
        "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
  const std::int64_t d = wrap_dim(dim, x.dim(), "tensor_split");
  const std::int64_t n = x.size(d);
  // Python's slice bounds: negative from the end, clamped to [0, n].
  const auto bound = [n](std::int64_t i) {
    return std::clamp(i < 0 ? i + n : i, std::int64_t(0), n);
  };
  std::vector<Tensor> out;
  std::int64_t start = 0;
  for (std::int64_t end : indices) {
    const std::int64_t b = bound(start), e = bound(end);
    out.push_back(x.narrow(d, b, std::max<std::int64_t>(e - b, 0)));
    start = end;
  }
  const std::int64_t b = bound(start);
  out.push_back(x.narrow(d, b, n - b));
  return out;
}

Tensor atleast_1d(const Tensor& x) {
  check_defined("atleast_1d", {&x});
  return x.dim() == 0 ? x.reshape({1}) : x;
}

Tensor atleast_2d(const Tensor& x) {
  check_defined("atleast_2d", {&x});
  if (x.dim() == 0) return x.reshape({1, 1});
  return x.dim() == 1 ? x.unsqueeze(0) : x;
}

Tensor atleast_3d(const Tensor& x) {
  check_defined("atleast_3d", {&x});
  if (x.dim() == 0) return x.reshape({1, 1, 1});
  if (x.dim() == 1) return x.unsqueeze(0).unsqueeze(2);
  return x.dim() == 2 ? x.unsqueeze(2) : x;
}

Tensor hstack(const std::vector<Tensor>& tensors) {
  const std::vector<Tensor> parts = each(tensors, atleast_1d);
  return cat(parts, !parts.empty() && parts[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& tensors) { return cat(each(tensors, atleast_2d), 0); }
Tensor dstack(const std::vector<Tensor>& tensors) { return cat(each(tensors, atleast_3d), 2); }

Tensor column_stack(const std::vector<Tensor>& tensors) {
  return cat(each(tensors,
                  [](const Tensor& t) {
                    check_defined("column_stack", {&t});
                    return t.dim() <= 1 ? t.reshape({t.numel(), 1}) : t;
                  }),
             1);
}

}  // namespace ferry
