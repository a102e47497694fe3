// runtime/ops_select.cpp — the ops whose result size depends on the data or
// whose work is a search: nonzero, where(cond), masked_select,
// masked_scatter, searchsorted, bucketize, unique and repeat_interleave with
// a count per element, and rot90. Composite ops of the op table (Note
// [Composite ops] in ferry/op.hpp) made of the stable sort, scans, gathers
// and element-wise ops, so every device runs them; the data-dependent sizes
// are read back to the host once, as PyTorch's are.
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::check_dtype;
using detail::wrap_dim;

namespace {

TensorOptions i64_on(const Tensor& t) { return {.dtype = DType::i64, .device = t.device()}; }

void check_mask(std::string_view op, const Tensor& mask) {
  if (mask.dtype() != DType::boolean)
    throw DTypeError(
        fmt::format("{}: the mask must be bool, got {}", op, dtype_name(mask.dtype())));
}

// The flat positions of the nonzero elements of x, in order: the stable sort
// of "is zero" puts them first.
Tensor nonzero_positions(const Tensor& x) {
  Tensor is_zero = eq(x.reshape({-1}), 0);
  const std::int64_t count = x.numel() - sum(is_zero).item<std::int64_t>();
  return argsort(is_zero).narrow(0, 0, count);
}

}  // namespace

Tensor nonzero(const Tensor& x) {
  check_dtype(OpId::nonzero, x);
  NoGradGuard no_grad;
  Tensor flat = nonzero_positions(x);
  const Shape strides = detail::contiguous_strides(x.sizes());
  std::vector<Tensor> coords;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    coords.push_back(
        remainder(floor_divide(flat, Scalar(strides[std::size_t(d)])), Scalar(x.size(d))));
  if (coords.empty()) return zeros({flat.numel(), 0}, i64_on(x));
  return stack(coords, 1);
}

std::vector<Tensor> where(const Tensor& cond) {
  Tensor nz = nonzero(cond);
  std::vector<Tensor> out;
  for (std::int64_t d = 0; d < cond.dim(); ++d) out.push_back(nz.select(1, d).contiguous());
  if (cond.dim() == 0) out.push_back(nz.reshape({-1}));  // PyTorch: one tensor for a 0-d cond
  return out;
}

// Differentiable through the gather.
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_dtype(OpId::masked_select, x);
  check_mask("masked_select", mask);
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes());
  Tensor positions;
  {
    NoGradGuard no_grad;
    positions = nonzero_positions(mask.expand(shape));
  }
  return gather(x.expand(shape).reshape({-1}), 0, positions);
}

// The k-th true position of the mask takes source's k-th element.
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  check_dtype(OpId::masked_scatter, x);
  check_mask("masked_scatter", mask);
  if (source.dtype() != x.dtype())
    throw DTypeError(fmt::format("masked_scatter: source is {} but input is {}",
                                 dtype_name(source.dtype()), dtype_name(x.dtype())));
  if (broadcast_shapes(x.sizes(), mask.sizes()) != x.sizes())
    throw ShapeError(fmt::format("masked_scatter: a mask of shape {} does not broadcast to x's {}",
                                 shape_str(mask.sizes()), shape_str(x.sizes())));
  Tensor m = mask.expand(x.sizes());
  Tensor rank;
  {
    NoGradGuard no_grad;
    rank = cumsum(m.reshape({-1}), 0) - 1;  // i64: the source element each true position takes
    const std::int64_t needed = rank.numel() == 0 ? 0 : rank.select(0, -1).item<std::int64_t>() + 1;
    if (needed > source.numel())
      throw ShapeError(fmt::format("masked_scatter: the mask selects {} elements but source has {}",
                                   needed, source.numel()));
    rank = clamp(rank, Scalar(0), std::nullopt);
  }
  if (source.numel() == 0) return x.clone();
  Tensor taken = gather(source.reshape({-1}), 0, rank).view(x.sizes());
  return where(m, taken, x);
}

// Note [searchsorted by sorting]
// The values and the sequence of each row sorted together (stably, the values
// first for ties when not `right`, so that an equal element of the sequence
// counts as after them; the sequence first with `right`): the number of
// sequence elements before a value in that order is its insertion index.
// The sort's positions tell which merged element came from which value.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right,
                    bool out_int32) {
  check_dtype(OpId::searchsorted, sorted_sequence);
  NoGradGuard no_grad;
  const bool one_d = sorted_sequence.dim() == 1;
  if (!one_d && (values.dim() != sorted_sequence.dim() ||
                 !std::equal(values.sizes().begin(), values.sizes().end() - 1,
                             sorted_sequence.sizes().begin())))
    throw ShapeError(
        fmt::format("searchsorted: the sequence (shape {}) must be 1-D or match the "
                    "values' (shape {}) leading dims",
                    shape_str(sorted_sequence.sizes()), shape_str(values.sizes())));
  const DType common = promote_types(sorted_sequence.dtype(), values.dtype());
  Tensor seq = sorted_sequence.to(common), val = values.to(common);
  if (one_d) {
    seq = seq.reshape({1, -1});
    val = val.reshape({1, -1});
  } else if (values.dim() == 0) {
    val = val.reshape({1});
  }
  const std::int64_t m = seq.size(-1), n = val.size(-1);
  Tensor merged = right ? cat({seq, val}, -1) : cat({val, seq}, -1);
  Tensor order = argsort(merged, -1);
  Tensor from_seq = right ? lt(order, m) : ge(order, n);
  Tensor before = cumsum(from_seq, -1);  // at a value's place: the sequence elements before it
  Tensor value_index = right ? order - Scalar(m) : order;
  Tensor out =
      detail::scatter_add(val.sizes(), val.dim() - 1, where(from_seq, Scalar(0), value_index),
                          where(from_seq, Scalar(0), before));
  out = out.reshape(values.sizes());
  return out_int32 ? out.to(DType::i32) : out;
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool right, bool out_int32) {
  check_dtype(OpId::bucketize, x);
  if (boundaries.dim() != 1)
    throw ShapeError(fmt::format("bucketize: boundaries must be 1-D, got shape {}",
                                 shape_str(boundaries.sizes())));
  return searchsorted(boundaries, x, right, out_int32);
}

// Runs of equal values in the sorted x (NaNs unequal, each its own value).
UniqueResult unique(const Tensor& x, bool, bool return_inverse, bool return_counts) {
  check_dtype(OpId::unique, x);
  NoGradGuard no_grad;
  const std::int64_t n = x.numel();
  auto [sorted, order] = sort(x.reshape({-1}));
  Tensor is_new = n == 0 ? zeros({0}, {.dtype = DType::boolean, .device = x.device()})
                         : cat({ones({1}, {.dtype = DType::boolean, .device = x.device()}),
                                ne(sorted.narrow(0, 1, n - 1), sorted.narrow(0, 0, n - 1))});
  Tensor run = cumsum(is_new, 0) - 1;  // each sorted element's value
  const std::int64_t count = n == 0 ? 0 : run.select(0, -1).item<std::int64_t>() + 1;
  UniqueResult r;
  r.values = gather(sorted, 0, argsort(logical_not(is_new)).narrow(0, 0, count));
  if (return_inverse) r.inverse = detail::scatter_add({n}, 0, order, run).reshape(x.sizes());
  if (return_counts) r.counts = detail::scatter_add({count}, 0, run, ones_like(run));
  return r;
}

// Element i repeated repeats[i] times: output position p takes the element
// whose running total of repeats first exceeds p.
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<std::int64_t> dim) {
  if (!dim) return repeat_interleave(x.reshape({-1}), repeats, 0);
  const std::int64_t d = wrap_dim(*dim, x.dim(), "repeat_interleave");
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(d);
  Tensor reps = detail::as_index("repeat_interleave", repeats).reshape({-1});
  if (reps.numel() == 1) return repeat_interleave(x, reps.item<std::int64_t>(), dim);
  if (reps.numel() != n)
    throw ShapeError(
        fmt::format("repeat_interleave: {} repeats for dim {} of size {}", reps.numel(), d, n));
  Tensor index;
  {
    NoGradGuard no_grad;
    if (reps.numel() > 0 && min(reps).item<std::int64_t>() < 0)
      throw ShapeError("repeat_interleave: repeats must not be negative");
    Tensor ends = cumsum(reps, 0);
    const std::int64_t total = n == 0 ? 0 : ends.select(0, -1).item<std::int64_t>();
    index = searchsorted(ends, arange(0, double(total), 1, i64_on(x)), /*right=*/true);
  }
  return index_select(x, d, index);
}

// k quarter turns: one is flip along dims[1], then swap the two dims.
Tensor rot90(const Tensor& x, std::int64_t k, const std::vector<std::int64_t>& dims) {
  check_dtype(OpId::rot90, x);
  if (dims.size() != 2 || x.dim() < 2)
    throw ShapeError(
        fmt::format("rot90: needs two dims of a tensor of 2 or more dims, got {} "
                    "dims for shape {}",
                    dims.size(), shape_str(x.sizes())));
  const std::int64_t a = wrap_dim(dims[0], x.dim(), "rot90"),
                     b = wrap_dim(dims[1], x.dim(), "rot90");
  if (a == b) throw ShapeError("rot90: the two dims must differ");
  switch (((k % 4) + 4) % 4) {
    case 1:
      return flip(x, {b}).transpose(a, b);
    case 2:
      return flip(x, {a, b});
    case 3:
      return flip(x, {a}).transpose(a, b);
    default:
      return x.clone();
  }
}

}  // namespace ferry
