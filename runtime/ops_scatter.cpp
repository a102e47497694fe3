// runtime/ops_scatter.cpp — scatter, scatter_reduce and index_put
// (ferry/ops_shape.hpp, Note [Deterministic scatter]) around one kernel,
// "scatter_reduce" (docs/kernel-contract.md): the sources' values and their
// targets (linear positions in the contiguous result), sorted by target with
// the stable sort, folded target by target into the result.
#include <fmt/format.h>

#include <algorithm>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::as_index;
using detail::check_bounds;
using detail::check_same_device;
using detail::run_kernel;
using detail::wrap_dim;

namespace detail {

// Folds `values` into out (contiguous) at the linear positions `targets`
// (i64, values' shape): the kernel after a stable sort by target, or straight
// in the sources' order on a device whose kernel folds that way itself (the
// CPU: one pass, the same result as the sorted runs).
Attrs fold_attrs(std::string_view reduce, bool include_self) {
  return Attrs{{"reduce", std::string(reduce)}, {"include_self", include_self}};
}

void scatter_fold(Tensor& out, const Tensor& targets, const Tensor& values, std::string_view reduce,
                  bool include_self) {
  if (targets.numel() == 0) return;
  Tensor t = targets.reshape({-1}).contiguous(), v = values.reshape({-1}).contiguous();
  if (!detail::impl_of(out).capabilities().scatter_in_order) {
    Tensor order = argsort(t);
    t = gather(t, 0, order);
    v = gather(v, 0, order);
  }
  run_kernel(OpId::scatter_reduce, {v, t}, {out.view({-1})}, fold_attrs(reduce, include_self));
}

}  // namespace detail

namespace {

// The linear positions in x (contiguous) of index's elements along dim d:
// index * stride(d) plus the offset of their other coordinates.
Tensor scatter_targets(const Tensor& x, std::int64_t d, const Tensor& index) {
  const Shape strides = detail::contiguous_strides(x.sizes());
  const std::int64_t stride = strides.empty() ? 1 : strides[std::size_t(d)];
  Tensor t = stride == 1 ? index : index * Scalar(stride);  // a pass fewer along the last dim
  for (std::int64_t i = 0; i < index.dim(); ++i) {
    if (i == d || index.size(i) == 1) continue;
    Shape at(std::size_t(index.dim()), 1);
    at[std::size_t(i)] = index.size(i);
    t = t +
        arange(0, double(index.size(i)), 1, {.dtype = DType::i64, .device = x.device()}).view(at) *
            Scalar(strides[std::size_t(i)]);
  }
  return t;
}

const char* const kReductions[] = {"sum", "prod", "mean", "amax", "amin"};

struct ScatterArgs {
  std::int64_t d;
  Tensor index;  // i64
  Tensor src;    // src's first index.size() elements per dim
};

// PyTorch's checks: index as many dims as x, no larger than src anywhere nor
// than x outside dim; src of x's dtype, on x's device (the range along dim:
// scatter_forward).
ScatterArgs scatter_args(std::string_view op, const Tensor& x, std::int64_t dim,
                         const Tensor& index, const Tensor& src) {
  check_same_device(op, {{"input", &x}, {"index", &index}, {"src", &src}});
  Tensor idx = as_index(op, index);
  Tensor xin = x.dim() == 0 ? x.reshape({1}) : x;
  if (x.dim() == 0) idx = idx.reshape({-1});
  const std::int64_t d = wrap_dim(dim, xin.dim(), op);
  Tensor s = src.dim() == 0 && idx.dim() == 1 ? src.reshape({1}) : src;
  if (idx.dim() != xin.dim() || (s.dim() != idx.dim() && idx.numel() > 0))
    throw ShapeError(
        fmt::format("{}: index (shape {}) must have as many dims as input (shape {}) "
                    "and src (shape {})",
                    op, shape_str(index.sizes()), shape_str(x.sizes()), shape_str(src.sizes())));
  if (src.dtype() != x.dtype())
    throw DTypeError(fmt::format("{}: src is {} but input is {}; they must have the same dtype", op,
                                 dtype_name(src.dtype()), dtype_name(x.dtype())));
  for (std::int64_t i = 0; i < idx.dim(); ++i)
    if ((i != d && idx.size(i) > xin.size(i)) || (idx.numel() > 0 && idx.size(i) > s.size(i)))
      throw ShapeError(fmt::format(
          "{}: index shape {} is larger than input shape {} (outside dim "
          "{}) or src shape {} in dim {}",
          op, shape_str(index.sizes()), shape_str(x.sizes()), d, shape_str(src.sizes()), i));
  for (std::int64_t i = 0; i < idx.dim() && idx.numel() > 0; ++i) s = s.narrow(i, 0, idx.size(i));
  return {d, idx, s};
}

// x with a.src folded in at a.index along a.d. A scatter_in_order device takes the index form
// (docs/kernel-contract.md): the kernel finds the targets and checks the index's range in its
// one pass; out is a fresh tensor, so an index out of range leaves nothing half-written: the
// core then names it (check_bounds). Elsewhere the core checks, then makes the targets and
// groups them.
Tensor scatter_forward(std::string_view op, const Tensor& x, const ScatterArgs& a,
                       std::string_view reduce, bool include_self) {
  NoGradGuard no_grad;
  Tensor out = x.clone();
  Tensor flat = x.dim() == 0 ? out.reshape({1}) : out;
  if (a.index.numel() == 0) return out;
  if (detail::impl_of(flat).capabilities().scatter_in_order) {
    try {
      run_kernel(OpId::scatter_reduce, {a.src.contiguous(), a.index.contiguous()}, {flat},
                 detail::fold_attrs(reduce, include_self).set("dim", a.d));
    } catch (const ShapeError&) {
      check_bounds(op, a.index, a.d, flat.size(a.d), x.sizes());
      throw;
    }
    return out;
  }
  check_bounds(op, a.index, a.d, flat.size(a.d), x.sizes());
  // The kernel wants each target's values adjacent, in the sources' order. A
  // column's targets (all coordinates but dim's fixed) are its own, so each
  // column is sorted alone, stably (rows of a sort that a device cuts across
  // rows, where one sort of all the targets may not fit its buffers), and the
  // columns fold in pieces of at most kFoldPiece values, each a kernel call
  // whose buffers fit.
  constexpr std::int64_t kFoldPiece = std::int64_t(1) << 18;
  Tensor t = movedim(scatter_targets(flat, a.d, a.index), a.d, -1).contiguous();
  const std::int64_t len = t.size(-1), columns = t.numel() / len;
  Tensor v = movedim(a.src, a.d, -1).contiguous();
  const Tensor order = argsort(t, -1);
  t = gather(t, -1, order).reshape({columns, len});
  v = gather(v, -1, order).reshape({columns, len});
  const std::int64_t per_piece = std::max<std::int64_t>(1, kFoldPiece / len);
  for (std::int64_t c = 0; c < columns; c += per_piece) {
    const std::int64_t n = std::min(per_piece, columns - c);
    run_kernel(OpId::scatter_reduce,
               {v.narrow(0, c, n).reshape({-1}), t.narrow(0, c, n).reshape({-1})},
               {flat.view({-1})}, detail::fold_attrs(reduce, include_self));
  }
  return out;
}

}  // namespace

Tensor scatter_reduce(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self) {
  detail::check_dtype(OpId::scatter_reduce, x);
  if (std::find(std::begin(kReductions), std::end(kReductions), reduce) == std::end(kReductions))
    throw ValueError(
        fmt::format("scatter_reduce: reduce must be sum, prod, mean, amax or amin, "
                    "got \"{}\"",
                    reduce));
  ScatterArgs a = scatter_args("scatter_reduce", x, dim, index, src);
  Tensor out = scatter_forward("scatter_reduce", x, a, reduce, include_self);
  autograd::record_scatter_reduce(x, a.d, a.index, a.src, reduce, include_self, out);
  return out;
}

Tensor scatter(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
               std::string_view reduce) {
  if (reduce == "add") return scatter_reduce(x, dim, index, src, "sum");
  if (reduce == "multiply") return scatter_reduce(x, dim, index, src, "prod");
  if (!reduce.empty())
    throw ValueError(
        fmt::format("scatter: reduce must be \"add\" or \"multiply\", got \"{}\"", reduce));
  detail::check_dtype(OpId::scatter, x);
  ScatterArgs a = scatter_args("scatter", x, dim, index, src);
  Tensor out = scatter_forward("scatter", x, a, "assign", false);
  autograd::record_scatter_reduce(x, a.d, a.index, a.src, "assign", false, out);
  return out;
}

Tensor scatter(const Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value,
               std::string_view reduce) {
  Tensor idx = as_index("scatter", index);
  Tensor src = full(idx.sizes(), value, {.dtype = x.dtype(), .device = x.device()});
  return scatter(x, dim, idx, src, reduce);
}

// The index tensors broadcast together select x[i0, i1, ..., :, ...]; each
// selected element's linear position is sum_k i_k * stride(k) plus its
// position within the trailing dims. A bool mask stands for its nonzero().
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  if (ferry::detail::autocast_applies(OpId::index_put)) {
    const ferry::detail::AutocastOp ac(OpId::index_put, {&x, &values});
    return index_put(ac(x), indices, ac(values), accumulate);
  }
  detail::check_dtype(OpId::index_put, x);
  std::vector<Tensor> idx;
  for (const Tensor& i : indices) {
    if (i.dtype() == DType::boolean) {
      for (const Tensor& c : where(i)) idx.push_back(c);
      continue;
    }
    idx.push_back(as_index("index_put", i));
  }
  if (idx.empty() || std::int64_t(idx.size()) > x.dim())
    throw ShapeError(fmt::format("index_put: {} index tensors for an input of shape {}", idx.size(),
                                 shape_str(x.sizes())));
  if (values.dtype() != x.dtype())
    throw DTypeError(fmt::format("index_put: values are {} but input is {}",
                                 dtype_name(values.dtype()), dtype_name(x.dtype())));
  Shape bshape = idx[0].sizes();
  for (const Tensor& i : idx) bshape = broadcast_shapes(bshape, i.sizes());
  const Shape strides = detail::contiguous_strides(x.sizes());
  const std::int64_t k = std::int64_t(idx.size());
  Tensor target = zeros(bshape, {.dtype = DType::i64, .device = x.device()});
  for (std::int64_t j = 0; j < k; ++j) {
    Tensor ij = idx[std::size_t(j)];
    // Negative indices count from the end, as in PyTorch's indexing.
    ij = where(lt(ij, 0), ij + Scalar(x.size(j)), ij);
    check_bounds("index_put", ij, j, x.size(j), x.sizes());
    target = target + ij.expand(bshape) * Scalar(strides[std::size_t(j)]);
  }
  // The selected sub-tensors: [bshape..., x.sizes()[k:]...].
  Shape rest(x.sizes().begin() + k, x.sizes().end()), shape = bshape;
  shape.insert(shape.end(), rest.begin(), rest.end());
  std::int64_t inner = 1;
  for (std::int64_t r : rest) inner *= r;
  Shape tshape = bshape;
  tshape.push_back(1);
  Tensor offsets = arange(0, double(inner), 1, {.dtype = DType::i64, .device = x.device()});
  Tensor targets = (target.view(tshape) + offsets).reshape(shape);
  Tensor vals = values.expand(shape);
  const std::string_view reduce = accumulate ? "sum" : "assign";
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x.clone();
    detail::scatter_fold(out, targets, vals.contiguous(), reduce, accumulate);
  }
  // As a scatter along a flattened x: the same gradients.
  autograd::record_index_put(x, targets, vals, reduce, out);
  return out;
}

}  // namespace ferry
