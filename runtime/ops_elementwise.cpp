// runtime/ops_elementwise.cpp — front-ends of the element-wise ops: broadcasting,
// dtype promotion, device checks; the kernels only compute
// (Note [Kernel contract] in ferry/backend.hpp).
#include <fmt/format.h>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::check_same_device;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(
          fmt::format("shapes {} and {} do not broadcast: dim {} is {} in one and {} in the other",
                      shape_str(a), shape_str(b), i, da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// The op's row decides the dtypes (Note [The op table] in ferry/op.hpp):
// which it takes, which its kernel computes in, which it returns.
// (The error messages are only formatted on the error path: these run for
// every op.)
// A channels-last x gives a channels-last result (Note [Channels-last outputs]).
Tensor unary(OpId op, const Tensor& x) {
  if (detail::autocast_applies(op)) {  // exp, log, rsqrt, ...: f32 (Note [Autocast])
    const detail::AutocastOp ac(op, {&x});
    return unary(op, ac(x));
  }
  detail::check_dtype(op, x);
  const DType dt = op_compute_dtype(op, x.dtype());
  const std::optional<Shape> order = detail::channels_last_order(x.sizes(), {&x});
  Tensor out = autograd::untracked([&] {
    Tensor in = order ? x.to(dt).permute(*order) : x.to(dt);
    Tensor o = new_tensor(in.sizes(), op_result_dtype(op, dt), impl_of(x));
    run_kernel(op, {in}, {o});
    return order ? o.permute(detail::inverse_permutation(*order)) : o;
  });
  autograd::record_unary(op, x, out);
  return out;
}

bool divides(OpId op) {
  return op == OpId::remainder || op == OpId::fmod || op == OpId::floor_divide;
}

// C++, GPUs and PyTorch leave an integer division by zero undefined or fatal:
// it is refused here, before the kernel (a read of the divisor, which waits
// for the device; float divisions, the common case, skip it).
void check_nonzero_divisor(OpId op, const Tensor& divisor) {
  if (divisor.numel() == 0) return;
  const std::int64_t zeros = sum(eq(divisor, 0)).item<std::int64_t>();
  if (zeros > 0)
    throw ValueError(fmt::format("{}: integer division by zero ({} of the {} divisors are 0)",
                                 op_name(op), zeros, divisor.numel()));
}

// Binary ops on two tensors of promoted dtype `promoted`, broadcast to one shape.
Tensor binary(OpId op, const Tensor& a, const Tensor& b, DType promoted) {
  if (detail::autocast_applies(op)) {  // pow: f32, atan2: promote (Note [Autocast])
    const detail::AutocastOp ac(op, {&a, &b});
    const Tensor ca = ac(a), cb = ac(b);
    return binary(op, ca, cb, ca.is_same(a) && cb.is_same(b) ? promoted : result_type(ca, cb));
  }
  check_same_device(op_name(op), {{"self", &a}, {"other", &b}});
  Shape shape = broadcast_shapes(a.sizes(), b.sizes());
  if (!op_info(op).dtypes.has(promoted))
    check_op_dtype(
        op, promoted,
        fmt::format("operands of shapes {} and {}", shape_str(a.sizes()), shape_str(b.sizes())));
  const DType compute = op_compute_dtype(op, promoted);
  // The first operand of the result's shape, if channels-last, makes the result so (Note
  // [Channels-last outputs]): the kernel computes in the permuted order.
  const std::optional<Shape> order = detail::channels_last_order(shape, {&a, &b});
  Tensor out = autograd::untracked([&] {  // the casts and expands feeding the kernel: no graph
    auto operand = [&](const Tensor& t) {
      Tensor c = t.to(compute);
      if (c.sizes() != shape) c = c.expand(shape);
      return order ? c.permute(*order) : c;
    };
    Tensor divisor = operand(b);
    if (divides(op) && !is_floating(compute)) check_nonzero_divisor(op, divisor);
    Tensor first = operand(a);
    Tensor o = new_tensor(first.sizes(), op_result_dtype(op, compute), impl_of(a));
    run_kernel(op, {first, divisor}, {o});
    return order ? o.permute(detail::inverse_permutation(*order)) : o;
  });
  if (op_info(op).grad == OpGrad::formula) autograd::record_binary(op, a, b, out);
  return out;
}

Tensor binary_tt(OpId op, const Tensor& a, const Tensor& b) {
  return binary(op, a, b, result_type(a, b));
}

Tensor binary_ts(OpId op, const Tensor& a, const Scalar& s) {
  DType promoted = result_type(a, s);
  Tensor b = scalar_tensor(s, {.dtype = promoted, .device = a.device()});
  return binary(op, a, b, promoted);
}

Tensor binary_st(OpId op, const Scalar& s, const Tensor& b) {
  DType promoted = result_type(b, s);
  Tensor a = scalar_tensor(s, {.dtype = promoted, .device = b.device()});
  return binary(op, a, b, promoted);
}

int category(DType t) { return is_floating(t) ? 2 : t == DType::boolean ? 0 : 1; }

// PyTorch's combine_categories: `lower` (a 0-d tensor's or a number's dtype)
// only counts when it is of a higher category than `higher` (the dimensioned
// operands' dtype), and then the two promote.
DType combine_categories(DType higher, DType lower) {
  if (category(lower) > category(higher)) return promote_types(higher, lower);
  return higher;
}

}  // namespace

void detail::check_defined(std::string_view op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (!t->defined()) throw Error(fmt::format("{}: an operand is undefined", op));
}

Tensor detail::as_floating(const Tensor& x) {
  return is_floating(x.dtype()) ? x : x.to(DType::f32);
}

void detail::check_dtype(OpId op, const Tensor& x) {
  if (!op_info(op).dtypes.has(x.dtype()))
    check_op_dtype(op, x.dtype(), fmt::format("a tensor of shape {}", shape_str(x.sizes())));
}

Tensor detail::unary_kernel(OpId op, const Tensor& x) { return unary(op, x); }

Tensor neg(const Tensor& x) { return unary(OpId::neg, x); }
Tensor abs(const Tensor& x) { return unary(OpId::abs, x); }
Tensor relu(const Tensor& x) { return unary(OpId::relu, x); }
Tensor exp(const Tensor& x) { return unary(OpId::exp, x); }
Tensor expm1(const Tensor& x) { return unary(OpId::expm1, x); }
Tensor log(const Tensor& x) { return unary(OpId::log, x); }
Tensor log1p(const Tensor& x) { return unary(OpId::log1p, x); }
Tensor log2(const Tensor& x) { return unary(OpId::log2, x); }
Tensor log10(const Tensor& x) { return unary(OpId::log10, x); }
Tensor exp2(const Tensor& x) { return unary(OpId::exp2, x); }
Tensor erf(const Tensor& x) { return unary(OpId::erf, x); }
Tensor erfc(const Tensor& x) { return unary(OpId::erfc, x); }
Tensor erfinv(const Tensor& x) { return unary(OpId::erfinv, x); }
Tensor tan(const Tensor& x) { return unary(OpId::tan, x); }
Tensor asin(const Tensor& x) { return unary(OpId::asin, x); }
Tensor acos(const Tensor& x) { return unary(OpId::acos, x); }
Tensor atan(const Tensor& x) { return unary(OpId::atan, x); }
Tensor sinh(const Tensor& x) { return unary(OpId::sinh, x); }
Tensor cosh(const Tensor& x) { return unary(OpId::cosh, x); }
Tensor asinh(const Tensor& x) { return unary(OpId::asinh, x); }
Tensor acosh(const Tensor& x) { return unary(OpId::acosh, x); }
Tensor atanh(const Tensor& x) { return unary(OpId::atanh, x); }
Tensor selu(const Tensor& x) { return unary(OpId::selu, x); }
Tensor hardsigmoid(const Tensor& x) { return unary(OpId::hardsigmoid, x); }
Tensor hardswish(const Tensor& x) { return unary(OpId::hardswish, x); }
Tensor mish(const Tensor& x) { return unary(OpId::mish, x); }
Tensor logsigmoid(const Tensor& x) { return unary(OpId::logsigmoid, x); }
Tensor floor(const Tensor& x) { return unary(OpId::floor, x); }
Tensor ceil(const Tensor& x) { return unary(OpId::ceil, x); }
Tensor trunc(const Tensor& x) { return unary(OpId::trunc, x); }
Tensor round(const Tensor& x) { return unary(OpId::round, x); }
Tensor frac(const Tensor& x) { return unary(OpId::frac, x); }
Tensor sign(const Tensor& x) { return unary(OpId::sign, x); }
Tensor reciprocal(const Tensor& x) { return unary(OpId::reciprocal, x); }
Tensor sqrt(const Tensor& x) { return unary(OpId::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(OpId::rsqrt, x); }
Tensor sin(const Tensor& x) { return unary(OpId::sin, x); }
Tensor cos(const Tensor& x) { return unary(OpId::cos, x); }
Tensor tanh(const Tensor& x) { return unary(OpId::tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(OpId::sigmoid, x); }
Tensor silu(const Tensor& x) { return unary(OpId::silu, x); }
Tensor gelu(const Tensor& x, std::string_view approximate) {
  if (approximate == "none") return unary(OpId::gelu, x);
  if (approximate == "tanh") return unary(OpId::gelu_tanh, x);
  throw Error(
      fmt::format("gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
}

#define FERRY_BINARY(name)                                                              \
  Tensor name(const Tensor& a, const Tensor& b) { return binary_tt(OpId::name, a, b); } \
  Tensor name(const Tensor& a, const Scalar& b) { return binary_ts(OpId::name, a, b); }
FERRY_BINARY(add)
FERRY_BINARY(sub)
FERRY_BINARY(mul)
FERRY_BINARY(div)
FERRY_BINARY(pow)
FERRY_BINARY(maximum)
FERRY_BINARY(minimum)
FERRY_BINARY(eq)
FERRY_BINARY(ne)
FERRY_BINARY(lt)
FERRY_BINARY(le)
FERRY_BINARY(gt)
FERRY_BINARY(ge)
FERRY_BINARY(atan2)
FERRY_BINARY(remainder)
FERRY_BINARY(fmod)
FERRY_BINARY(floor_divide)
FERRY_BINARY(hypot)
FERRY_BINARY(copysign)
FERRY_BINARY(xlogy)
FERRY_BINARY(bitwise_and)
FERRY_BINARY(bitwise_or)
FERRY_BINARY(bitwise_xor)
FERRY_BINARY(bitwise_left_shift)
FERRY_BINARY(bitwise_right_shift)
#undef FERRY_BINARY
Tensor sub(const Scalar& a, const Tensor& b) { return binary_st(OpId::sub, a, b); }
Tensor div(const Scalar& a, const Tensor& b) { return binary_st(OpId::div, a, b); }
Tensor pow(const Scalar& a, const Tensor& b) { return binary_st(OpId::pow, a, b); }

DType result_type(const Tensor& a, const Tensor& b) {
  const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 == b0) return promote_types(a.dtype(), b.dtype());
  return a0 ? combine_categories(b.dtype(), a.dtype()) : combine_categories(a.dtype(), b.dtype());
}

DType result_type(const Tensor& t, const Scalar& s) {
  return combine_categories(t.dtype(), s.natural_dtype());
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {{"condition", &cond}, {"self", &a}, {"other", &b}});
  if (cond.dtype() != DType::boolean)
    throw DTypeError(fmt::format(
        "where: the condition must be bool, got {} (shape {}); compare first, e.g. gt(x, 0)",
        dtype_name(cond.dtype()), shape_str(cond.sizes())));
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes()), b.sizes());
  DType dt = result_type(a, b);
  Tensor out = new_tensor(shape, dt, impl_of(a));
  autograd::untracked([&] {
    run_kernel(OpId::where, {cond.expand(shape), a.to(dt).expand(shape), b.to(dt).expand(shape)},
               {out});
    return out;
  });
  autograd::record_where(cond, a, b, out);
  return out;
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return where(cond, a, scalar_tensor(b, {.dtype = result_type(a, b), .device = a.device()}));
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  return where(cond, scalar_tensor(a, {.dtype = result_type(b, a), .device = b.device()}), b);
}

Tensor unary_op(OpId op, const Tensor& x) {
  if (op_info(op).kind != OpKind::unary)
    throw Error(fmt::format("unary_op: '{}' is not a unary op", op_name(op)));
  if (op_info(op).impl == OpImpl::composite) return detail::composite_unary(op, x);
  return unary(op, x);
}

Tensor binary_op(OpId op, const Tensor& a, const Tensor& b) {
  const OpKind k = op_info(op).kind;
  if (k != OpKind::binary && k != OpKind::compare)
    throw Error(fmt::format("binary_op: '{}' is not a binary or comparison op", op_name(op)));
  if (op_info(op).impl == OpImpl::composite) return detail::composite_binary(op, a, b);
  return binary_tt(op, a, b);
}

Tensor cast(const Tensor& x, DType dtype) { return x.to(dtype); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }

}  // namespace ferry
