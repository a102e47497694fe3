// runtime/ops_elementwise.cpp — front-ends of the element-wise ops: broadcasting,
// dtype promotion, device checks; the kernels only compute
// (Note [Kernel contract] in ferry/backend.hpp).
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry {

using detail::check_same_device;
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

enum class Kind { floating, keep, keep_numeric };

// Unary ops: `floating` ops give f32 for integer and bool inputs; `keep` ops
// keep the dtype (bool refused where meaningless).
Tensor unary(std::string_view op, const Tensor& x, Kind kind) {
  DType dt = x.dtype();
  if (kind == Kind::floating && !is_floating(dt)) dt = DType::f32;
  if (kind == Kind::keep_numeric && dt == DType::boolean)
    throw DTypeError(fmt::format(
        "{}: not defined for bool tensors (shape {}); cast to an integer or float dtype first", op,
        shape_str(x.sizes())));
  Tensor in = x.to(dt);
  Tensor out = new_tensor(x.sizes(), dt, x.device());
  run_kernel(op, {in}, {out});
  autograd::record_unary(op, x, out);
  return out;
}

enum class Result { promoted, floating, boolean };

// Binary ops on two tensors of promoted dtype `compute`, broadcast to one shape.
Tensor binary(std::string_view op, const Tensor& a, const Tensor& b, DType compute, Result result) {
  check_same_device(op, {{"self", &a}, {"other", &b}});
  Shape shape = broadcast_shapes(a.sizes(), b.sizes());
  if (result == Result::floating && !is_floating(compute)) compute = DType::f32;
  if (compute == DType::boolean && (op == "sub" || op == "pow"))
    throw DTypeError(fmt::format(
        "{}: not defined for two bool tensors ({} and {}); use logical ops or cast first", op,
        shape_str(a.sizes()), shape_str(b.sizes())));
  DType out_dtype = result == Result::boolean ? DType::boolean : compute;
  Tensor out = new_tensor(shape, out_dtype, a.device());
  autograd::untracked([&] {  // the casts and expands that feed the kernel are not in the graph
    run_kernel(op, {a.to(compute).expand(shape), b.to(compute).expand(shape)}, {out});
    return out;
  });
  if (result != Result::boolean) autograd::record_binary(op, a, b, out);
  return out;
}

Result result_of(std::string_view op) {
  if (op == "div") return Result::floating;
  if (op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge")
    return Result::boolean;
  return Result::promoted;
}

Tensor binary_tt(std::string_view op, const Tensor& a, const Tensor& b) {
  return binary(op, a, b, promote_types(a.dtype(), b.dtype()), result_of(op));
}

// PyTorch's rule for a Python number beside a tensor: it only changes the
// dtype when it is of a higher category (bool < integer < floating).
DType promote_with_scalar(DType t, const Scalar& s) {
  int tc = is_floating(t) ? 2 : t == DType::boolean ? 0 : 1;
  int sc = s.is_floating() ? 2 : s.is_bool() ? 0 : 1;
  return sc > tc ? s.natural_dtype() : t;
}

Tensor binary_ts(std::string_view op, const Tensor& a, const Scalar& s) {
  DType compute = promote_with_scalar(a.dtype(), s);
  Tensor b = scalar_tensor(s, {.dtype = compute, .device = a.device()});
  return binary(op, a, b, compute, result_of(op));
}

Tensor binary_st(std::string_view op, const Scalar& s, const Tensor& b) {
  DType compute = promote_with_scalar(b.dtype(), s);
  Tensor a = scalar_tensor(s, {.dtype = compute, .device = b.device()});
  return binary(op, a, b, compute, result_of(op));
}

}  // namespace

Tensor neg(const Tensor& x) { return unary("neg", x, Kind::keep_numeric); }
Tensor abs(const Tensor& x) { return unary("abs", x, Kind::keep_numeric); }
Tensor relu(const Tensor& x) { return unary("relu", x, Kind::keep_numeric); }
Tensor exp(const Tensor& x) { return unary("exp", x, Kind::floating); }
Tensor log(const Tensor& x) { return unary("log", x, Kind::floating); }
Tensor sqrt(const Tensor& x) { return unary("sqrt", x, Kind::floating); }
Tensor rsqrt(const Tensor& x) { return unary("rsqrt", x, Kind::floating); }
Tensor sin(const Tensor& x) { return unary("sin", x, Kind::floating); }
Tensor cos(const Tensor& x) { return unary("cos", x, Kind::floating); }
Tensor tanh(const Tensor& x) { return unary("tanh", x, Kind::floating); }
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", x, Kind::floating); }
Tensor silu(const Tensor& x) { return unary("silu", x, Kind::floating); }
Tensor gelu(const Tensor& x, std::string_view approximate) {
  if (approximate == "none") return unary("gelu", x, Kind::floating);
  if (approximate == "tanh") return unary("gelu_tanh", x, Kind::floating);
  throw Error(
      fmt::format("gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
}

#define FERRY_BINARY(name)                                                         \
  Tensor name(const Tensor& a, const Tensor& b) { return binary_tt(#name, a, b); } \
  Tensor name(const Tensor& a, const Scalar& b) { return binary_ts(#name, a, b); }
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
#undef FERRY_BINARY
Tensor sub(const Scalar& a, const Tensor& b) { return binary_st("sub", a, b); }
Tensor div(const Scalar& a, const Tensor& b) { return binary_st("div", a, b); }
Tensor pow(const Scalar& a, const Tensor& b) { return binary_st("pow", a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {{"condition", &cond}, {"self", &a}, {"other", &b}});
  if (cond.dtype() != DType::boolean)
    throw DTypeError(fmt::format(
        "where: the condition must be bool, got {} (shape {}); compare first, e.g. gt(x, 0)",
        dtype_name(cond.dtype()), shape_str(cond.sizes())));
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes()), b.sizes());
  DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = new_tensor(shape, dt, a.device());
  autograd::untracked([&] {
    run_kernel("where", {cond.expand(shape), a.to(dt).expand(shape), b.to(dt).expand(shape)},
               {out});
    return out;
  });
  autograd::record_where(cond, a, b, out);
  return out;
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return where(
      cond, a,
      scalar_tensor(b, {.dtype = promote_with_scalar(a.dtype(), b), .device = a.device()}));
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  return where(cond,
               scalar_tensor(a, {.dtype = promote_with_scalar(b.dtype(), a), .device = b.device()}),
               b);
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
