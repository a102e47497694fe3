// runtime/ops_sort.cpp — front-ends of the scans (cumsum, cumprod, cummax,
// cummin) and the sort, and the selections composed from the sort: argsort,
// topk, kthvalue, median and mode (ferry/ops_sort.hpp).
//
// The kernels see contiguous tensors only (docs/kernel-contract.md, "Scans"
// and "Sort"): a scan gets x as [outer, n, inner] and runs along the middle
// dim, so any dim of a contiguous tensor needs no copy; the sort gets x as
// [rows, n] with the sorted dim last, which a dim other than the last costs
// one copy (as in PyTorch). Outputs come back as views of x's shape.
#include <fmt/format.h>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::check_dtype;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;
using detail::wrap_dim;

namespace {

// Scan kernel `op` along dim d of x into a new tensor of `out_dtype` (and the
// i64 positions, for cummax and cummin).
ValuesIndices run_scan(OpId op, const Tensor& x, std::int64_t d, DType out_dtype) {
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (std::int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(d);
  const Shape lines{outer, n, inner};
  Tensor in = x.contiguous().view(lines);
  ValuesIndices r{new_tensor(lines, out_dtype, impl_of(x)), {}};
  const bool with_indices = op_info(op).outputs == 2;
  if (with_indices) r.indices = new_tensor(lines, DType::i64, impl_of(x));
  if (x.numel() > 0) {
    if (with_indices)
      run_kernel(op, {in}, {r.values, r.indices});
    else
      run_kernel(op, {in}, {r.values});
  }
  r.values = r.values.view(x.sizes());
  if (with_indices) r.indices = r.indices.view(x.sizes());
  return r;
}

Tensor cumulative(OpId op, const Tensor& x, std::int64_t dim, std::optional<DType> dtype) {
  check_dtype(op, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), op_name(op));
  Tensor src = dtype ? x.to(*dtype) : x;  // the cast is part of the graph
  const DType out_dtype = is_floating(src.dtype()) ? src.dtype() : DType::i64;
  Tensor out = autograd::untracked([&] { return run_scan(op, src, d, out_dtype).values; });
  if (op == OpId::cumsum)
    autograd::record_cumsum(src, d, out);
  else
    autograd::record_cumprod(src, d, out);
  return out;
}

ValuesIndices cum_extremum(OpId op, const Tensor& x, std::int64_t dim) {
  check_dtype(op, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), op_name(op));
  ValuesIndices r;
  {
    NoGradGuard no_grad;
    r = run_scan(op, x, d, x.dtype());
  }
  autograd::record_cum_extremum(op_name(op), x, d, r.indices, r.values);
  return r;
}

// The sort kernel along dim d (wrapped) of x, not recorded.
ValuesIndices sort_forward(const Tensor& x, std::int64_t d, bool descending) {
  NoGradGuard no_grad;
  if (x.dim() == 0) return {x.clone(), zeros({}, {.dtype = DType::i64, .device = x.device()})};
  Tensor moved = movedim(x, d, -1).contiguous();
  const std::int64_t n = moved.size(-1);
  const std::int64_t rows = n == 0 ? 0 : moved.numel() / n;
  ValuesIndices r{new_tensor({rows, n}, x.dtype(), impl_of(x)),
                  new_tensor({rows, n}, DType::i64, impl_of(x))};
  if (moved.numel() > 0)
    run_kernel(OpId::sort, {moved.view({rows, n})}, {r.values, r.indices},
               Attrs{{"descending", descending}});
  r.values = movedim(r.values.view(moved.sizes()), -1, d);
  r.indices = movedim(r.indices.view(moved.sizes()), -1, d);
  return r;
}

// The element at position `pos` (i64, x's shape with size 1 along d) of each
// slice of the sorted x along d; keepdim keeps d as size 1.
ValuesIndices pick(const ValuesIndices& sorted, std::int64_t d, const Tensor& pos, bool keepdim,
                   bool zero_dim) {
  ValuesIndices r{gather(sorted.values, d, pos), gather(sorted.indices, d, pos)};
  if (zero_dim) return {r.values.reshape({}), r.indices.reshape({})};
  if (!keepdim) return {r.values.squeeze(d), r.indices.squeeze(d)};
  return r;
}

// A selection's slice length along d, refused when empty (PyTorch's IndexError).
std::int64_t slice_length(std::string_view op, const Tensor& x, std::int64_t d) {
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(d);
  if (n == 0)
    throw ShapeError(
        fmt::format("{}: dim {} of input shape {} has size 0; {} of an empty set is "
                    "undefined",
                    op, d, shape_str(x.sizes()), op));
  return n;
}

// x's shape with size 1 along d (0-d x: [1]).
Shape keep_shape(const Tensor& x, std::int64_t d) {
  if (x.dim() == 0) return {1};
  Shape s = x.sizes();
  s[std::size_t(d)] = 1;
  return s;
}

}  // namespace

Tensor cumsum(const Tensor& x, std::int64_t dim, std::optional<DType> dtype) {
  if (ferry::detail::autocast_applies(OpId::cumsum)) {
    const ferry::detail::AutocastOp ac(OpId::cumsum, {&x});
    return cumsum(ac(x), dim, dtype);
  }
  return cumulative(OpId::cumsum, x, dim, dtype);
}
Tensor cumprod(const Tensor& x, std::int64_t dim, std::optional<DType> dtype) {
  if (ferry::detail::autocast_applies(OpId::cumprod)) {
    const ferry::detail::AutocastOp ac(OpId::cumprod, {&x});
    return cumprod(ac(x), dim, dtype);
  }
  return cumulative(OpId::cumprod, x, dim, dtype);
}
ValuesIndices cummax(const Tensor& x, std::int64_t dim) {
  return cum_extremum(OpId::cummax, x, dim);
}
ValuesIndices cummin(const Tensor& x, std::int64_t dim) {
  return cum_extremum(OpId::cummin, x, dim);
}

// The values are x gathered at the indices, which is also their gradient.
ValuesIndices sort(const Tensor& x, std::int64_t dim, bool descending) {
  check_dtype(OpId::sort, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), "sort");
  ValuesIndices r = sort_forward(x, d, descending);
  autograd::record_gather(x, d, r.indices, r.values);
  return r;
}

Tensor argsort(const Tensor& x, std::int64_t dim, bool descending) {
  check_dtype(OpId::argsort, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), "argsort");
  return sort_forward(x, d, descending).indices;
}

ValuesIndices topk(const Tensor& x, std::int64_t k, std::int64_t dim, bool largest, bool) {
  check_dtype(OpId::topk, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), "topk");
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(d);
  if (k < 0 || k > n)
    throw ShapeError(
        fmt::format("topk: k = {} is out of range for dim {} of size {} (input shape "
                    "{}); k must be in [0, {}]",
                    k, d, n, shape_str(x.sizes()), n));
  if (x.dim() > 0 && detail::use_fused_kernel(OpId::topk, x, x.dtype())) {
    // The fused kernel (the CPU's: a selection, not a sort) on [rows, n] with d last.
    Tensor moved = movedim(x, d, -1).contiguous();
    const std::int64_t rows = n == 0 ? 0 : moved.numel() / n;
    ValuesIndices r{new_tensor({rows, k}, x.dtype(), impl_of(x)),
                    new_tensor({rows, k}, DType::i64, impl_of(x))};
    if (rows > 0 && k > 0)
      run_kernel(OpId::topk, {moved.view({rows, n})}, {r.values, r.indices},
                 Attrs{{"k", k}, {"largest", largest}});
    Shape shape = moved.sizes();
    shape.back() = k;
    return {movedim(r.values.view(shape), -1, d).contiguous(),
            movedim(r.indices.view(shape), -1, d).contiguous()};
  }
  ValuesIndices s = sort(x, d, largest);
  if (x.dim() == 0) return s;
  return {s.values.narrow(d, 0, k).contiguous(), s.indices.narrow(d, 0, k).contiguous()};
}

ValuesIndices kthvalue(const Tensor& x, std::int64_t k, std::int64_t dim, bool keepdim) {
  check_dtype(OpId::kthvalue, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), "kthvalue");
  const std::int64_t n = slice_length("kthvalue", x, d);
  if (k < 1 || k > n)
    throw ShapeError(
        fmt::format("kthvalue: k = {} is out of range for dim {} of size {} (input "
                    "shape {}); k counts from 1 to {}",
                    k, d, n, shape_str(x.sizes()), n));
  const Tensor pos = full(keep_shape(x, d), k - 1, {.dtype = DType::i64, .device = x.device()});
  const Tensor in = x.dim() == 0 ? x.reshape({1}) : x;
  return pick(sort(in, d), d, pos, keepdim, x.dim() == 0);
}

// Stable ascending order puts the NaNs last, in their order: a slice with
// NaNs has its first NaN at n - (the number of NaNs).
ValuesIndices median(const Tensor& x, std::int64_t dim, bool keepdim) {
  check_dtype(OpId::median, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), "median");
  const std::int64_t n = slice_length("median", x, d);
  const Tensor in = x.dim() == 0 ? x.reshape({1}) : x;
  Tensor pos;
  {
    NoGradGuard no_grad;
    pos = full(keep_shape(x, d), (n - 1) / 2, {.dtype = DType::i64, .device = x.device()});
    if (is_floating(x.dtype())) {
      Tensor nans = sum(isnan(in), {d}, /*keepdim=*/true);
      pos = where(gt(nans, 0), Scalar(n) - nans, pos);
    }
  }
  return pick(sort(in, d), d, pos, keepdim, x.dim() == 0);
}

Tensor median(const Tensor& x) {
  check_dtype(OpId::median, x);
  if (x.numel() == 0 && is_floating(x.dtype()))
    return full({}, std::numeric_limits<double>::quiet_NaN(),
                {.dtype = x.dtype(), .device = x.device()});
  return median(x.reshape({-1}), 0).values.reshape({});
}

// Runs of equal values in the sorted slice (NaNs equal to each other): the
// longest run, the first of equally long ones (the smallest value), and its
// last position, which holds the largest original index of that value.
ValuesIndices mode(const Tensor& x, std::int64_t dim, bool keepdim) {
  check_dtype(OpId::mode, x);
  const std::int64_t d = wrap_dim(dim, x.dim(), "mode");
  const std::int64_t n = slice_length("mode", x, d);
  const Tensor in = x.dim() == 0 ? x.reshape({1}) : x;
  ValuesIndices s = sort(in, d);
  Tensor pos;
  {
    NoGradGuard no_grad;
    Tensor prev = s.values.narrow(d, 0, n - 1), cur = s.values.narrow(d, 1, n - 1);
    Tensor differ = logical_and(ne(cur, prev), logical_not(logical_and(isnan(cur), isnan(prev))));
    Tensor first = ones(keep_shape(in, d), {.dtype = DType::boolean, .device = x.device()});
    Tensor run = cumsum(cat({first, differ}, d), d) - 1;  // each position's run
    Tensor counts = detail::scatter_add(in.sizes(), d, run, ones_like(run));
    Tensor last = cumsum(counts, d) - 1;  // each run's last position
    pos = gather(last, d, argmax(counts, d, /*keepdim=*/true));
  }
  return pick(s, d, pos, keepdim, x.dim() == 0);
}

}  // namespace ferry
