// runtime/ops_inplace.cpp — the in-place `_` ops (ferry/ops_inplace.hpp,
// Note [In-place ops]): each is its out-of-place op, computed, checked, and
// written into x by one function, write_in_place() below.
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

// PyTorch's can_cast for an in-place result: not floating into integral,
// not a number into bool.
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return !(from != DType::boolean && to == DType::boolean);
}

}  // namespace

// Note [In-place ops].
Tensor& detail::write_in_place(std::string_view op, Tensor& x,
                               const std::function<Tensor(const Tensor&)>& f, bool reads_x) {
  for (std::size_t d = 0; d < x.sizes().size(); ++d)
    if (x.strides()[d] == 0 && x.sizes()[d] > 1)
      throw ValueError(
          fmt::format("{}: x is an expanded view (stride 0 along dim {}): several of "
                      "its elements are one memory location, so an in-place write "
                      "to it is ambiguous (PyTorch refuses it too); clone() it first",
                      op, d));
  const bool grad_mode = is_grad_enabled();
  const std::shared_ptr<TensorImpl> root = x.impl_ptr()->view_base.lock();  // x is a view of it
  auto refuse_view_of_leaf = [&] {
    throw Error(
        fmt::format("{}: a view of a leaf tensor that requires grad is being used in an "
                    "in-place operation; write under a ferry::NoGradGuard, or use the "
                    "out-of-place op",
                    op));
  };
  if (grad_mode && x.requires_grad()) {
    if (x.is_leaf())
      throw Error(
          fmt::format("{}: a leaf tensor that requires grad is being used in an in-place "
                      "operation; write under a ferry::NoGradGuard (as optimizers do), "
                      "or use the out-of-place op",
                      op));
    if (x.impl_ptr()->autograd->grad_fn->view_of_leaf) refuse_view_of_leaf();
  }
  if (grad_mode && root && Tensor(root).requires_grad() && Tensor(root).is_leaf())
    refuse_view_of_leaf();  // a view of it made under NoGradGuard
  // Under grad mode the op reads a copy: what it saves stays as it was.
  Tensor result = f(grad_mode && reads_x ? x.clone() : x);
  if (result.sizes() != x.sizes())
    throw ShapeError(
        fmt::format("{}: the result's shape {} is not the input's {} (an in-place op "
                    "cannot broadcast its input to a larger shape)",
                    op, shape_str(result.sizes()), shape_str(x.sizes())));
  if (!can_cast(result.dtype(), x.dtype()))
    throw DTypeError(fmt::format("{}: the result type {} cannot be cast to the input's {} in place",
                                 op, dtype_name(result.dtype()), dtype_name(x.dtype())));
  if (result.dtype() != x.dtype()) result = result.to(x.dtype());  // recorded under grad mode
  if (result.device() != x.device())
    throw DeviceMismatchError(fmt::format("{}: the result is on {}, not on x's {}", op,
                                          result.device().str(), x.device().str()));
  const TensorImpl& xi = *x.impl_ptr();
  if (grad_mode && xi.view_made_without_grad &&
      (xi.view_made_without_grad_of_grad_base || x.requires_grad() || result.requires_grad()))
    throw Error(fmt::format(
        "{}: x is a view made with grad mode off (under a ferry::NoGradGuard) and is being "
        "modified in place with grad mode on, where the write would be tracked; PyTorch forbids "
        "this as ambiguous: make both the view and the in-place op under the NoGradGuard (the "
        "write untracked) or both outside it (tracked)",
        op));
  // Note [In-place through a view]: the write changes the base's history.
  const Tensor base =
      grad_mode && root && (x.requires_grad() || result.requires_grad()) ? Tensor(root) : Tensor();
  if (base.defined() && !base.is_contiguous())
    throw Error(fmt::format(
        "{}: x is a view of a tensor (shape {}) that is not contiguous, and the write would "
        "change that tensor's gradient; ferry rewrites the history of a contiguous base only: "
        "clone() the view first",
        op, shape_str(base.sizes())));
  {
    NoGradGuard no_grad;
    detail::run_kernel(OpId::copy, {result}, {x});
    x.storage()->bump_version();
  }
  if (base.defined()) {
    autograd::record_write_through_view(base, x, result);
  } else if (grad_mode && result.requires_grad() && !result.is_leaf()) {
    autograd::meta_of(x).grad_fn = result.impl_ptr()->autograd->grad_fn;
    ++autograd::meta_of(x).history;  // x's views get new grad_fns
  } else if (grad_mode && x.requires_grad()) {
    autograd::meta_of(x).grad_fn.reset();  // a result no gradient flows through (eq_): cut
    ++autograd::meta_of(x).history;
  }
  return x;
}

namespace {

using detail::write_in_place;

// A Scalar as a 0-d tensor of the dtype x and it promote to, so that it
// promotes as the Scalar would (Note [Type promotion] in ferry/ops.hpp).
Tensor as_tensor(const Tensor& x, const Scalar& s) {
  return scalar_tensor(s, {.dtype = result_type(x, s), .device = x.device()});
}

}  // namespace

#define FERRY_INPLACE_UNARY_DEF_(name, Functor, dtypes)                                           \
  Tensor& name##_(Tensor& x) {                                                                    \
    return write_in_place(#name "_", x, [](const Tensor& s) { return unary_op(OpId::name, s); }); \
  }
FERRY_UNARY_OPS(FERRY_INPLACE_UNARY_DEF_)
#undef FERRY_INPLACE_UNARY_DEF_

#define FERRY_INPLACE_BINARY_DEF_(name, Functor, dtypes)                                     \
  Tensor& name##_(Tensor& x, const Tensor& other) {                                          \
    return write_in_place(#name "_", x,                                                      \
                          [&](const Tensor& s) { return binary_op(OpId::name, s, other); }); \
  }                                                                                          \
  Tensor& name##_(Tensor& x, const Scalar& other) {                                          \
    const Tensor o = as_tensor(x, other);                                                    \
    return write_in_place(#name "_", x,                                                      \
                          [&](const Tensor& s) { return binary_op(OpId::name, s, o); });     \
  }
FERRY_BINARY_OPS(FERRY_INPLACE_BINARY_DEF_)
FERRY_COMPARE_OPS(FERRY_INPLACE_BINARY_DEF_)
#undef FERRY_INPLACE_BINARY_DEF_

Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return write_in_place("clamp_", x, [&](const Tensor& s) { return clamp(s, min, max); });
}
Tensor& clamp_(Tensor& x, const Tensor& min, const Tensor& max) {
  return write_in_place("clamp_", x, [&](const Tensor& s) { return clamp(s, min, max); });
}
Tensor& clip_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return write_in_place("clip_", x, [&](const Tensor& s) { return clip(s, min, max); });
}
Tensor& round_(Tensor& x, std::int64_t decimals) {
  return write_in_place("round_", x, [&](const Tensor& s) { return round(s, decimals); });
}
Tensor& elu_(Tensor& x, double alpha) {
  return write_in_place("elu_", x, [&](const Tensor& s) { return elu(s, alpha); });
}
Tensor& celu_(Tensor& x, double alpha) {
  return write_in_place("celu_", x, [&](const Tensor& s) { return celu(s, alpha); });
}
Tensor& leaky_relu_(Tensor& x, double negative_slope) {
  return write_in_place("leaky_relu_", x,
                        [&](const Tensor& s) { return leaky_relu(s, negative_slope); });
}
Tensor& hardtanh_(Tensor& x, double min_val, double max_val) {
  return write_in_place("hardtanh_", x,
                        [&](const Tensor& s) { return hardtanh(s, min_val, max_val); });
}
Tensor& relu6_(Tensor& x) {
  return write_in_place("relu6_", x, [](const Tensor& s) { return relu6(s); });
}
Tensor& nan_to_num_(Tensor& x, double nan, std::optional<double> posinf,
                    std::optional<double> neginf) {
  return write_in_place("nan_to_num_", x,
                        [&](const Tensor& s) { return nan_to_num(s, nan, posinf, neginf); });
}
Tensor& logical_not_(Tensor& x) {
  return write_in_place("logical_not_", x, [](const Tensor& s) { return logical_not(s); });
}
Tensor& bitwise_not_(Tensor& x) {
  return write_in_place("bitwise_not_", x, [](const Tensor& s) { return bitwise_not(s); });
}
Tensor& logical_and_(Tensor& x, const Tensor& other) {
  return write_in_place("logical_and_", x, [&](const Tensor& s) { return logical_and(s, other); });
}
Tensor& logical_or_(Tensor& x, const Tensor& other) {
  return write_in_place("logical_or_", x, [&](const Tensor& s) { return logical_or(s, other); });
}
Tensor& logical_xor_(Tensor& x, const Tensor& other) {
  return write_in_place("logical_xor_", x, [&](const Tensor& s) { return logical_xor(s, other); });
}
Tensor& lerp_(Tensor& x, const Tensor& end, const Tensor& weight) {
  return write_in_place("lerp_", x, [&](const Tensor& s) { return lerp(s, end, weight); });
}
Tensor& lerp_(Tensor& x, const Tensor& end, const Scalar& weight) {
  return write_in_place("lerp_", x, [&](const Tensor& s) { return lerp(s, end, weight); });
}
Tensor& addcmul_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return write_in_place("addcmul_", x, [&](const Tensor& s) { return addcmul(s, t1, t2, value); });
}
Tensor& addcdiv_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return write_in_place("addcdiv_", x, [&](const Tensor& s) { return addcdiv(s, t1, t2, value); });
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  return write_in_place("masked_fill_", x,
                        [&](const Tensor& s) { return masked_fill(s, mask, value); });
}
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value) {
  return write_in_place("masked_fill_", x,
                        [&](const Tensor& s) { return masked_fill(s, mask, value); });
}
Tensor& masked_scatter_(Tensor& x, const Tensor& mask, const Tensor& source) {
  return write_in_place("masked_scatter_", x,
                        [&](const Tensor& s) { return masked_scatter(s, mask, source); });
}
Tensor& index_fill_(Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value) {
  return write_in_place("index_fill_", x,
                        [&](const Tensor& s) { return index_fill(s, dim, index, value); });
}
Tensor& index_add_(Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source,
                   const Scalar& alpha) {
  return write_in_place("index_add_", x,
                        [&](const Tensor& s) { return index_add(s, dim, index, source, alpha); });
}
Tensor& scatter_(Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                 std::string_view reduce) {
  return write_in_place("scatter_", x,
                        [&](const Tensor& s) { return scatter(s, dim, index, src, reduce); });
}
Tensor& scatter_(Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value,
                 std::string_view reduce) {
  return write_in_place("scatter_", x,
                        [&](const Tensor& s) { return scatter(s, dim, index, value, reduce); });
}
Tensor& scatter_reduce_(Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                        std::string_view reduce, bool include_self) {
  return write_in_place("scatter_reduce_", x, [&](const Tensor& s) {
    return scatter_reduce(s, dim, index, src, reduce, include_self);
  });
}
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate) {
  return write_in_place("index_put_", x,
                        [&](const Tensor& s) { return index_put(s, indices, values, accumulate); });
}

#define FERRY_INPLACE_MEMBER_(name)                                                     \
  Tensor& Tensor::name##_(const Tensor& other) { return ferry::name##_(*this, other); } \
  Tensor& Tensor::name##_(const Scalar& other) { return ferry::name##_(*this, other); }
FERRY_INPLACE_MEMBER_(add)
FERRY_INPLACE_MEMBER_(sub)
FERRY_INPLACE_MEMBER_(mul)
FERRY_INPLACE_MEMBER_(div)
FERRY_INPLACE_MEMBER_(pow)
#undef FERRY_INPLACE_MEMBER_

// As scatter_reduce "sum" of index repeated across source's other dims.
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  detail::check_dtype(OpId::index_add, x);
  Tensor in = x.dim() == 0 ? x.reshape({1}) : x;
  Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  const std::int64_t d = detail::wrap_dim(dim, in.dim(), "index_add");
  Tensor idx = detail::as_index("index_add", index).reshape({-1});
  if (src.dim() != in.dim() || src.size(d) != idx.numel())
    throw ShapeError(
        fmt::format("index_add: source (shape {}) must have the input's dims (shape "
                    "{}) with {} (the index's length) along dim {}",
                    shape_str(source.sizes()), shape_str(x.sizes()), idx.numel(), d));
  Shape along(std::size_t(in.dim()), 1);
  along[std::size_t(d)] = idx.numel();
  Tensor scaled = alpha.to_double() == 1 ? src : src * alpha;
  return scatter_reduce(in, d, idx.view(along).expand(src.sizes()), scaled, "sum")
      .reshape(x.sizes());
}

}  // namespace ferry
