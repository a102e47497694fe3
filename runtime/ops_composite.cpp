// runtime/ops_composite.cpp — the composite ops: each written once, here, as
// a composition of other ops (Note [Composite ops] in ferry/op.hpp). They run
// on every device that runs their parts and are differentiable through them;
// a device's fused kernel replaces the composition where no gradient is
// recorded.
#include <fmt/format.h>

#include <cmath>

#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/debug.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

thread_local bool t_composites_only = false;

}  // namespace

namespace debug {

CompositesOnly::CompositesOnly() : previous_(t_composites_only) { t_composites_only = true; }
CompositesOnly::~CompositesOnly() { t_composites_only = previous_; }
bool composites_only() { return t_composites_only; }

}  // namespace debug

namespace detail {

bool use_fused_kernel(OpId op, const Tensor& x, DType compute) {
  if (t_composites_only) return false;
  // The composition is what autograd records (grad "parts"): a fused kernel
  // has no backward of its own.
  if (autograd::should_record({&x})) return false;
  return impl_of(x).supports(op, compute);
}

Tensor composite_unary(OpId op, const Tensor& x) {
  switch (op) {
    case OpId::square:
      return square(x);
    default:
      break;
  }
  throw Error(fmt::format("'{}' is not a unary composite op", op_name(op)));
}

}  // namespace detail

// PyTorch's square is pow(x, 2): bool counts as i64 there, as it does here.
Tensor square(const Tensor& x) {
  if (x.dtype() == DType::boolean) return square(x.to(DType::i64));
  if (detail::use_fused_kernel(OpId::square, x, x.dtype()))
    return detail::unary_kernel(OpId::square, x);  // checks the dtype
  detail::check_dtype(OpId::square, x);
  return mul(x, x);
}

// clamp is min(max(x, lo), hi), spelt with where so that the gradient is
// PyTorch's: all of it to x where lo <= x <= hi (maximum would split it at a
// tie), the rest to the bound that was taken. A NaN x stays NaN; lo > hi
// gives hi everywhere, as in PyTorch. Promotion is where's: result_type of x
// and the bounds.
namespace {

void check_clamp_dtype(DType result, const Tensor& x) {
  if (result == DType::boolean)
    throw DTypeError(fmt::format(
        "clamp: not defined for bool (a tensor of shape {} with bool bounds); cast to an "
        "integer or float dtype first",
        shape_str(x.sizes())));
}

template <typename Bound> Tensor clamp_impl(const Tensor& x, const Bound* lo, const Bound* hi) {
  if (!lo && !hi) throw Error("clamp: at least one of min and max must be given");
  Tensor y = x;
  if (lo) y = where(lt(y, *lo), *lo, y);
  if (hi) y = where(gt(y, *hi), *hi, y);
  check_clamp_dtype(y.dtype(), x);
  return y;
}

}  // namespace

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp_impl<Scalar>(x, min ? &*min : nullptr, max ? &*max : nullptr);
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  return clamp_impl<Tensor>(x, min.defined() ? &min : nullptr, max.defined() ? &max : nullptr);
}

Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, max); }

// log(sum(exp(x - m))) + m with m the (detached) maximum over the reduced
// dims, so that exp cannot overflow; an infinite m is taken as 0 (all -inf
// gives -inf, any +inf gives +inf), PyTorch's scheme. The gradient through
// the parts is softmax(x) over the dims: m carries none.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  detail::check_dtype(OpId::logsumexp, x);
  const Tensor xf = x.to(op_compute_dtype(OpId::logsumexp, x.dtype()));
  if (xf.numel() == 0) return log(sum(exp(xf), dims, keepdim));  // sums of nothing: -inf
  Tensor m = max(xf.detach(), dims, /*keepdim=*/true);
  m = where(eq(abs(m), INFINITY), 0.0, m);
  Tensor lse = log(sum(exp(xf - m), dims, keepdim));
  return lse + (keepdim ? m : m.reshape(lse.sizes()));
}

}  // namespace ferry
