// runtime/ops_composite.cpp — the composite ops: each written once, here, as
// a composition of other ops (Note [Composite ops] in ferry/op.hpp). They run
// on every device that runs their parts and are differentiable through them;
// a device's fused kernel replaces the composition where no gradient is
// recorded.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autocast_internal.hpp"
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
  // has no backward of its own. An op with its own formula (grad "formula":
  // cholesky, solve_triangular, lu_factor_ex) records one node whichever ran.
  if (op_info(op).grad != OpGrad::formula && autograd::should_record({&x})) return false;
  return impl_of(x).supports(op, compute);
}

bool use_fused_kernel_with_backward(const Tensor& x, OpId op) {
  if (t_composites_only || x.numel() == 0) return false;
  const DeviceImpl& impl = impl_of(x);
  if (!impl.supports(op, x.dtype())) return false;
  for (OpId backward : op_info(op).backward_kernels())
    if (!impl.supports(backward, x.dtype())) return false;
  return true;
}

Tensor composite_unary(OpId op, const Tensor& x) {
  switch (op) {
    case OpId::square:
      return square(x);
    // The rows with parameters, at PyTorch's defaults (round_decimals at
    // decimals = 1: at 0 it is round).
    case OpId::softplus:
      return softplus(x);
    case OpId::elu:
      return elu(x);
    case OpId::celu:
      return celu(x);
    case OpId::leaky_relu:
      return leaky_relu(x);
    case OpId::hardtanh:
      return hardtanh(x);
    case OpId::relu6:
      return relu6(x);
    case OpId::nan_to_num:
      return nan_to_num(x);
    case OpId::round_decimals:
      return round(x, 1);
    case OpId::isnan:
      return isnan(x);
    case OpId::isinf:
      return isinf(x);
    case OpId::isfinite:
      return isfinite(x);
    case OpId::logical_not:
      return logical_not(x);
    case OpId::bitwise_not:
      return bitwise_not(x);
    default:
      break;
  }
  throw Error(fmt::format("'{}' is not a unary composite op", op_name(op)));
}

Tensor composite_binary(OpId op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case OpId::logical_and:
      return logical_and(a, b);
    case OpId::logical_or:
      return logical_or(a, b);
    case OpId::logical_xor:
      return logical_xor(a, b);
    default:
      break;
  }
  throw Error(fmt::format("'{}' is not a binary composite op", op_name(op)));
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

// Scalar bounds that leave x's dtype as it is (an integer tensor with a float
// bound becomes float) may run the fused kernel: one pass instead of four.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  if ((min || max) && x.dtype() != DType::boolean && (!min || result_type(x, *min) == x.dtype()) &&
      (!max || result_type(x, *max) == x.dtype()) &&
      detail::use_fused_kernel(OpId::clamp, x, x.dtype())) {
    Attrs attrs;
    if (min) attrs.set("min", min->to_double()).set("min_i", min->to_int64());
    if (max) attrs.set("max", max->to_double()).set("max_i", max->to_int64());
    Tensor out = detail::new_tensor(x.sizes(), x.dtype(), detail::impl_of(x));
    if (x.numel() > 0) detail::run_kernel(OpId::clamp, {x.contiguous()}, {out}, std::move(attrs));
    return out;
  }
  return clamp_impl<Scalar>(x, min ? &*min : nullptr, max ? &*max : nullptr);
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  return clamp_impl<Tensor>(x, min.defined() ? &min : nullptr, max.defined() ? &max : nullptr);
}

Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, max); }
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp(x, min, max);
}
Tensor clip(const Tensor& x, const Tensor& min, const Tensor& max) { return clamp(x, min, max); }

// ---- activations with parameters. Each is spelt with where so that its
// gradient through the parts is PyTorch's backward formula, and the branch
// where does not take gets an input that cannot overflow: where's backward
// sends it a zero gradient, and 0 times an infinite derivative would be NaN.
namespace {

// f(x), for f16 and bf16 computed in f32 and rounded once at the end, as
// PyTorch's kernels do (exp(x) of softplus overflows f16 from x = 11.1).
template <typename F> Tensor in_float(const Tensor& x, F f) {
  if (x.dtype() != DType::f16 && x.dtype() != DType::bf16) return f(x);
  return f(x.to(DType::f32)).to(x.dtype());
}

// x where x > 0, else 0: the input of the negative branch of elu and celu.
Tensor nonpositive_part(const Tensor& x) { return where(gt(x, 0), Scalar(0), x); }

}  // namespace

Tensor softplus(const Tensor& x, double beta, double threshold) {
  if (ferry::detail::autocast_applies(OpId::softplus)) {
    const ferry::detail::AutocastOp ac(OpId::softplus, {&x});
    return softplus(ac(x), beta, threshold);
  }
  detail::check_dtype(OpId::softplus, x);
  return in_float(x, [&](const Tensor& xf) {
    Tensor bx = xf * beta;
    Tensor above = gt(bx, threshold);
    return where(above, xf, log1p(exp(where(above, Scalar(0), bx))) / beta);
  });
}

Tensor elu(const Tensor& x, double alpha) {
  detail::check_dtype(OpId::elu, x);
  return in_float(x, [&](const Tensor& xf) {
    return where(gt(xf, 0), xf, expm1(nonpositive_part(xf)) * alpha);
  });
}

Tensor celu(const Tensor& x, double alpha) {
  detail::check_dtype(OpId::celu, x);
  if (alpha == 0) throw Error("celu: alpha cannot be 0 (it divides the input)");
  return in_float(x, [&](const Tensor& xf) {
    return where(gt(xf, 0), xf, expm1(nonpositive_part(xf) / alpha) * alpha);
  });
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  detail::check_dtype(OpId::leaky_relu, x);
  return where(gt(x, 0), x, x * negative_slope);
}

// clamp with the bounds taken where x reaches them, so that the gradient is 0
// there (PyTorch's hardtanh_backward), not clamp's. Integer tensors keep their
// dtype: the bounds are truncated to integers.
Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  detail::check_dtype(OpId::hardtanh, x);
  if (is_floating(x.dtype()))
    return where(le(x, min_val), Scalar(min_val), where(ge(x, max_val), Scalar(max_val), x));
  if (x.dtype() == DType::u8 && (min_val < 0 || max_val < 0))
    throw DTypeError(
        fmt::format("hardtanh: an unsigned (u8) tensor cannot take the negative bounds [{}, {}]",
                    min_val, max_val));
  const auto lo = std::int64_t(std::trunc(min_val)), hi = std::int64_t(std::trunc(max_val));
  return where(le(x, lo), Scalar(lo), where(ge(x, hi), Scalar(hi), x));
}

Tensor relu6(const Tensor& x) {
  detail::check_dtype(OpId::relu6, x);
  return hardtanh(x, 0, 6);
}

// ---- tests and bitwise negation.
Tensor isnan(const Tensor& x) { return ne(x, x); }  // false for every integer

Tensor isinf(const Tensor& x) {
  if (!is_floating(x.dtype())) return ne(x, x);  // all false
  return eq(abs(x), INFINITY);
}

Tensor isfinite(const Tensor& x) {
  if (!is_floating(x.dtype())) return eq(x, x);  // all true
  return lt(abs(x), INFINITY);                   // false for NaN too
}

Tensor logical_not(const Tensor& x) { return eq(x, Scalar(0)); }  // NaN is true: not 0

Tensor bitwise_not(const Tensor& x) {
  detail::check_dtype(OpId::bitwise_not, x);
  if (x.dtype() == DType::boolean) return logical_not(x);
  return sub(Scalar(-1), x);  // ~x = -1 - x in two's complement (u8: 255 - x), wrapping
}

namespace {

double largest_finite(DType dt) {
  switch (dt) {
    case DType::f16:
      return 65504.0;
    case DType::bf16:
      return 3.3895313892515355e38;
    case DType::f32:
      return double(std::numeric_limits<float>::max());
    default:
      return std::numeric_limits<double>::max();
  }
}

}  // namespace

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (!is_floating(x.dtype())) return x.clone();
  const double big = largest_finite(x.dtype());
  Tensor y = where(eq(x, INFINITY), Scalar(posinf.value_or(big)), x);
  y = where(eq(x, -INFINITY), Scalar(neginf.value_or(-big)), y);
  return where(isnan(x), Scalar(nan), y);
}

// PyTorch's round_decimals: the scale is 10^|decimals| rounded to the dtype.
Tensor round(const Tensor& x, std::int64_t decimals) {
  detail::check_dtype(OpId::round_decimals, x);
  if (decimals == 0) return round(x);
  const double scale = std::pow(10.0, double(decimals < 0 ? -decimals : decimals));
  return in_float(x, [&](const Tensor& xf) {
    return decimals > 0 ? round(xf * scale) / scale : round(xf / scale) * scale;
  });
}

// log(sum(exp(x - m))) + m with m the (detached) maximum over the reduced
// dims, so that exp cannot overflow; an infinite m is taken as 0 (all -inf
// gives -inf, any +inf gives +inf), PyTorch's scheme. The gradient through
// the parts is softmax(x) over the dims: m carries none.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (ferry::detail::autocast_applies(OpId::logsumexp)) {
    const ferry::detail::AutocastOp ac(OpId::logsumexp, {&x});
    return logsumexp(ac(x), dims, keepdim);
  }
  detail::check_dtype(OpId::logsumexp, x);
  const Tensor xf = x.to(op_compute_dtype(OpId::logsumexp, x.dtype()));
  if (xf.numel() == 0) return log(sum(exp(xf), dims, keepdim));  // sums of nothing: -inf
  if (xf.dim() > 0 && detail::use_fused_kernel(OpId::logsumexp, xf, xf.dtype())) {
    // The fused kernel (the CPU's: one read for the maximum, one for the sum) on the rows
    // [kept, reduced] of the reduced dims moved last.
    const detail::ReducePlan plan = detail::plan_reduce("logsumexp", xf, dims);
    const std::int64_t rows = plan.count == 0 ? 0 : xf.numel() / plan.count;
    Tensor out = detail::new_tensor({rows}, xf.dtype(), detail::impl_of(xf));
    detail::run_kernel(OpId::logsumexp, {plan.permuted.contiguous().view({rows, plan.count})},
                       {out}, {});
    return out.view(keepdim ? plan.keepdim_sizes : plan.out_sizes);
  }
  Tensor m = max(xf.detach(), dims, /*keepdim=*/true);
  m = where(eq(abs(m), INFINITY), 0.0, m);
  Tensor lse = log(sum(exp(xf - m), dims, keepdim));
  return lse + (keepdim ? m : m.reshape(lse.sizes()));
}

// ---- logical ops: truth is "not zero" (NaN is true); the bool products and
// sums of the kernels are and and or.
Tensor logical_and(const Tensor& a, const Tensor& b) { return mul(ne(a, 0), ne(b, 0)); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return add(ne(a, 0), ne(b, 0)); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return ne(ne(a, 0), ne(b, 0)); }

// ---- ternary ops
namespace {

void check_same_dtype(const char* op, const Tensor& a, const char* a_name, const Tensor& b,
                      const char* b_name) {
  if (a.dtype() != b.dtype())
    throw DTypeError(
        fmt::format("{}: {} is {} but {} is {}; PyTorch does not promote here: cast "
                    "one of them",
                    op, a_name, dtype_name(a.dtype()), b_name, dtype_name(b.dtype())));
}

// f(a, b, w) with 16-bit floats computed in f32 and rounded once.
template <typename F> Tensor in_float3(const Tensor& a, const Tensor& b, const Tensor& w, F f) {
  if (a.dtype() != DType::f16 && a.dtype() != DType::bf16) return f(a, b, w);
  auto up = [](const Tensor& t) { return t.defined() ? t.to(DType::f32) : t; };
  return f(up(a), up(b), up(w)).to(a.dtype());
}

}  // namespace

// PyTorch's lerp: from a's side for |weight| < 1/2, from b's for the rest, so
// that weight 1 gives b exactly.
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight) {
  detail::check_dtype(OpId::lerp, a);
  check_same_dtype("lerp", a, "start", b, "end");
  check_same_dtype("lerp", a, "start", weight, "weight");
  return in_float3(a, b, weight, [](const Tensor& s, const Tensor& e, const Tensor& w) {
    Tensor d = e - s;
    return where(lt(abs(w), 0.5), s + w * d, e - d * (1 - w));
  });
}

Tensor lerp(const Tensor& a, const Tensor& b, const Scalar& weight) {
  detail::check_dtype(OpId::lerp, a);
  check_same_dtype("lerp", a, "start", b, "end");
  const double w = weight.to_double();
  return in_float3(a, b, Tensor(), [w](const Tensor& s, const Tensor& e, const Tensor&) {
    return std::abs(w) < 0.5 ? s + (e - s) * w : e - (e - s) * (1 - w);
  });
}

// x + value t1 t2, in PyTorch's order; an integer result with a float value
// is refused, as there.
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  if (ferry::detail::autocast_applies(OpId::addcmul)) {
    const ferry::detail::AutocastOp ac(OpId::addcmul, {&x, &t1, &t2});
    return addcmul(ac(x), ac(t1), ac(t2), value);
  }
  const DType dt = promote_types(x.dtype(), promote_types(t1.dtype(), t2.dtype()));
  if (!is_floating(dt) && value.is_floating())
    throw DTypeError(fmt::format(
        "addcmul: the inputs are {} (integers or bool) but value {} is a float; give an integer "
        "value or floating inputs",
        dtype_name(dt), value.str()));
  if (dt == DType::boolean) throw DTypeError("addcmul: not defined for bool inputs");
  return x + t1 * value * t2;
}

// x + value t1 / t2; integer t1 and t2 are refused (PyTorch removed integer
// division from addcdiv).
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  if (ferry::detail::autocast_applies(OpId::addcdiv)) {
    const ferry::detail::AutocastOp ac(OpId::addcdiv, {&x, &t1, &t2});
    return addcdiv(ac(x), ac(t1), ac(t2), value);
  }
  if (!is_floating(t1.dtype()) && !is_floating(t2.dtype()))
    throw DTypeError(fmt::format(
        "addcdiv: tensor1 ({}) and tensor2 ({}) are integers; integer division is not defined "
        "here: cast them to a floating dtype",
        dtype_name(t1.dtype()), dtype_name(t2.dtype())));
  return x + t1 * value / t2;
}

// PyTorch's isclose: equal, or both NaN with equal_nan, or a finite error
// within atol + rtol |b| (integers compared as f32).
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_same_dtype("isclose", a, "self", b, "other");
  if (rtol < 0 || atol < 0)
    throw ValueError(
        fmt::format("isclose: rtol ({}) and atol ({}) must be non-negative", rtol, atol));
  Tensor close = eq(a, b);
  if (equal_nan && is_floating(a.dtype()))
    close = logical_or(close, logical_and(isnan(a), isnan(b)));
  if (rtol == 0 && atol == 0) return close;
  const DType dt = is_floating(a.dtype()) ? a.dtype() : DType::f32;
  const Tensor af = a.to(dt), bf = b.to(dt);
  Tensor allowed = abs(bf * rtol) + atol;
  Tensor actual = abs(af - bf);
  return logical_or(close, logical_and(isfinite(actual), le(actual, allowed)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  Tensor close = isclose(a, b, rtol, atol, equal_nan);
  return sum(logical_not(close)).item<std::int64_t>() == 0;
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_same_device("equal", {{"self", &a}, {"other", &b}});
  if (a.sizes() != b.sizes()) return false;
  return sum(ne(a, b)).item<std::int64_t>() == 0;
}

}  // namespace ferry
