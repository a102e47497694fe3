// runtime/autograd/formulas_elementwise.cpp — backward of the element-wise ops,
// casts and device moves (formulas.hpp). The formulas are PyTorch's
// (tools/autograd/derivatives.yaml), so gradients carry over.
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const auto lead = grad.dim() - std::int64_t(shape.size());
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && grad.size(lead + std::int64_t(i)) != 1) dims.push_back(lead + std::int64_t(i));
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

namespace {

// A gradient computed at the output's shape and dtype, brought to an input's.
Tensor to_input(const Tensor& g, const Tensor& like) { return sum_to(g, like.sizes()).to(like.dtype()); }

// sign(x) · g without a sign kernel: 0 where x is 0 (and NaN), as PyTorch's sgn.
Tensor times_sign(const Tensor& g, const Tensor& x) {
  return where(gt(x, 0), g, where(lt(x, 0), neg(g), Scalar(0)));
}

BackwardFn unary_formula(std::string_view op, const Tensor& x, const Tensor& y) {
  if (op == "neg") return [](const Tensor& g, const Needs&) -> std::vector<Tensor> { return {neg(g)}; };
  if (op == "abs")
    return [x = Saved(x)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      return {times_sign(g, x.get())};
    };
  if (op == "exp")
    return [y = Saved(y)](const Tensor& g, const Needs&) -> std::vector<Tensor> { return {g * y.get()}; };
  if (op == "log")
    return [x = Saved(x)](const Tensor& g, const Needs&) -> std::vector<Tensor> { return {g / x.get()}; };
  if (op == "sqrt")  // d sqrt(x) = 1 / (2 sqrt(x)), from the result
    return [y = Saved(y)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      return {g / (y.get() * 2)};
    };
  if (op == "rsqrt")  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
    return [y = Saved(y)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      Tensor r = y.get();
      return {g * (r * r * r) * -0.5};
    };
  if (op == "sin")
    return [x = Saved(x)](const Tensor& g, const Needs&) -> std::vector<Tensor> { return {g * cos(x.get())}; };
  if (op == "cos")
    return [x = Saved(x)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      return {g * neg(sin(x.get()))};
    };
  // Fused kernels (docs/kernel-contract.md): from the output for relu, sigmoid
  // and tanh, from the input for the gelus and silu.
  std::string kernel = std::string(op) + "_backward";
  if (op == "relu" || op == "sigmoid" || op == "tanh")
    return [kernel, y = Saved(y)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      return {detail::activation_backward(kernel, g, y.get())};
    };
  if (op == "gelu" || op == "gelu_tanh" || op == "silu")
    return [kernel, x = Saved(x)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      return {detail::activation_backward(kernel, g, x.get())};
    };
  throw Error(fmt::format("autograd: no backward formula for '{}' (a bug in ferry)", op));
}

BackwardFn binary_formula(std::string_view op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (op == "add")
    return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
      return {to_input(g, a.get()), to_input(g, b.get())};
    };
  if (op == "sub")
    return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
      return {to_input(g, a.get()), n[1] ? to_input(neg(g), b.get()) : Tensor()};
    };
  if (op == "mul")
    return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
      Tensor av = a.get(), bv = b.get();
      return {n[0] ? to_input(g * bv, av) : Tensor(), n[1] ? to_input(g * av, bv) : Tensor()};
    };
  if (op == "div")  // d(a/b)/db = -a / b^2 = -out / b
    return [a = Saved(a), b = Saved(b), out = Saved(out)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
      Tensor av = a.get(), bv = b.get();
      return {n[0] ? to_input(g / bv, av) : Tensor(),
              n[1] ? to_input(neg(g) * out.get() / bv, bv) : Tensor()};
    };
  if (op == "pow")  // PyTorch's pow_backward_self and pow_backward_exponent
    return [a = Saved(a), b = Saved(b), out = Saved(out)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
      Tensor av = a.get(), bv = b.get();
      std::vector<Tensor> r(2);
      if (n[0]) r[0] = to_input(where(eq(bv, 0), Scalar(0), g * bv * pow(av, bv - 1)), av);
      if (n[1]) {
        Tensor zero_base = where(eq(av, 0), ge(bv, 0), Scalar(false));
        r[1] = to_input(where(zero_base, Scalar(0), g * out.get() * log(av)), bv);
      }
      return r;
    };
  if (op == "maximum" || op == "minimum")  // ties split the gradient in half
    return [is_max = op == "maximum", a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
      Tensor av = a.get(), bv = b.get();
      Tensor half = where(eq(av, bv), g * 0.5, g);
      Tensor a_loses = is_max ? lt(av, bv) : gt(av, bv);
      Tensor b_loses = is_max ? gt(av, bv) : lt(av, bv);
      return {n[0] ? to_input(where(a_loses, Scalar(0), half), av) : Tensor(),
              n[1] ? to_input(where(b_loses, Scalar(0), half), bv) : Tensor()};
    };
  throw Error(fmt::format("autograd: no backward formula for '{}' (a bug in ferry)", op));
}

}  // namespace

void record_unary(std::string_view op, const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, y, unary_formula(op, x, y));
}

void record_binary(std::string_view op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!should_record({&a, &b})) return;
  record(fmt::format("{}Backward", op), {a, b}, out, binary_formula(op, a, b, out));
}

void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!should_record({&a, &b})) return;
  record("whereBackward", {a, b}, out,
         [c = Saved(cond), a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           Tensor cv = c.get();
           return {n[0] ? to_input(where(cv, g, Scalar(0)), a.get()) : Tensor(),
                   n[1] ? to_input(where(cv, Scalar(0), g), b.get()) : Tensor()};
         });
}

void record_cast(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record("toBackward", {x}, y, [dt = x.dtype()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {g.to(dt)};
  });
}

void record_to_device(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record("toBackward", {x}, y, [dev = x.device()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {g.to(dev)};
  });
}

}  // namespace ferry::autograd
