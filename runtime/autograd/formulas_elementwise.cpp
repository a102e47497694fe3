// runtime/autograd/formulas_elementwise.cpp — backward of the element-wise ops,
// casts and device moves (formulas.hpp). The formulas are PyTorch's
// (tools/autograd/derivatives.yaml), so gradients carry over.
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/math/scalar_ops.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const auto lead = grad.dim() - std::int64_t(shape.size());
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && grad.size(lead + std::int64_t(i)) != 1)
      dims.push_back(lead + std::int64_t(i));
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

namespace {

// A gradient computed at the output's shape and dtype, brought to an input's.
Tensor to_input(const Tensor& g, const Tensor& like) {
  return sum_to(g, like.sizes()).to(like.dtype());
}

// An activation's fused backward kernel, from z: its input or its output.
BackwardFn activation(OpId kernel, const Tensor& z) {
  return [kernel, z = Saved(z)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {detail::activation_backward(kernel, g, z.get())};
  };
}

// sign(x) · g without a sign kernel: 0 where x is 0 (and NaN), as PyTorch's sgn.
Tensor times_sign(const Tensor& g, const Tensor& x) {
  return where(gt(x, 0), g, where(lt(x, 0), neg(g), Scalar(0)));
}

BackwardFn unary_formula(OpId op, const Tensor& x, const Tensor& y) {
  using Grads = std::vector<Tensor>;
  switch (op) {
    case OpId::neg:
      return [](const Tensor& g, const Needs&) -> Grads { return {neg(g)}; };
    case OpId::abs:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        return {times_sign(g, x.get())};
      };
    case OpId::exp:
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads { return {g * y.get()}; };
    case OpId::expm1:  // d(e^x - 1) = e^x = y + 1
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads { return {g * (y.get() + 1)}; };
    case OpId::log:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads { return {g / x.get()}; };
    case OpId::floor:  // piecewise constant: PyTorch's zero gradient
    case OpId::ceil:
    case OpId::trunc:
    case OpId::round:
    case OpId::sign:
      return [](const Tensor& g, const Needs&) -> Grads { return {zeros_like(g)}; };
    case OpId::frac:  // x - trunc(x)
      return [](const Tensor& g, const Needs&) -> Grads { return {g}; };
    case OpId::reciprocal:  // d (1 / x) = -1 / x^2 = -y^2
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads {
        return {neg(g * y.get() * y.get())};
      };
    case OpId::log1p:  // d log(1 + x) = 1 / (1 + x)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads { return {g / (x.get() + 1)}; };
    case OpId::log2:  // d log2(x) = 1 / (x ln 2)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        return {g / (x.get() * 0.693147180559945309)};
      };
    case OpId::sqrt:  // d sqrt(x) = 1 / (2 sqrt(x)), from the result
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads { return {g / (y.get() * 2)}; };
    case OpId::rsqrt:  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads {
        Tensor r = y.get();
        return {g * (r * r * r) * -0.5};
      };
    case OpId::sin:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads { return {g * cos(x.get())}; };
    case OpId::cos:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        return {g * neg(sin(x.get()))};
      };
    case OpId::log10:  // 1 / (x ln 10)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        return {g / (x.get() * 2.302585092994045684)};
      };
    case OpId::exp2:  // 2^x ln 2
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads {
        return {g * (y.get() * 0.693147180559945309)};
      };
    case OpId::erf:  // 2/sqrt(pi) exp(-x^2), and its negative for erfc
    case OpId::erfc:
      return [x = Saved(x), c = op == OpId::erf ? 1.1283791670955126 : -1.1283791670955126](
                 const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        return {g * (exp(neg(xv * xv)) * c)};
      };
    case OpId::erfinv:  // sqrt(pi)/2 exp(y^2)
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads {
        Tensor yv = y.get();
        return {g * (exp(yv * yv) * 0.886226925452758014)};
      };
    case OpId::tan:  // 1 + tan(x)^2
      return [y = Saved(y)](const Tensor& g, const Needs&) -> Grads {
        Tensor yv = y.get();
        return {g * (yv * yv + 1)};
      };
    case OpId::asin:  // 1 / sqrt(1 - x^2), negated for acos
    case OpId::acos:
      return [x = Saved(x), is_acos = op == OpId::acos](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        Tensor d = rsqrt(neg(xv * xv) + 1);
        return {is_acos ? g * neg(d) : g * d};
      };
    case OpId::atan:  // 1 / (1 + x^2)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        return {g / (xv * xv + 1)};
      };
    case OpId::sinh:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads { return {g * cosh(x.get())}; };
    case OpId::cosh:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads { return {g * sinh(x.get())}; };
    case OpId::asinh:  // 1 / sqrt(x^2 + 1)
    case OpId::acosh:  // 1 / sqrt(x^2 - 1)
      return
          [x = Saved(x), c = op == OpId::asinh ? 1 : -1](const Tensor& g, const Needs&) -> Grads {
            Tensor xv = x.get();
            return {g * rsqrt(xv * xv + c)};
          };
    case OpId::atanh:  // 1 / (1 - x^2)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        return {g / (neg(xv * xv) + 1)};
      };
    // The activations without a fused backward: PyTorch's elu_backward,
    // hardsigmoid_backward, hardswish_backward, mish_backward and
    // log_sigmoid_backward, composed.
    case OpId::selu:
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        const double scale = math::kSeluScale, alpha = math::kSeluAlpha;
        return {where(gt(xv, 0), g * scale, g * (exp(xv) * (scale * alpha)))};
      };
    case OpId::hardsigmoid:  // 1/6 strictly inside (-3, 3)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        return {where(gt(xv, -3), where(lt(xv, 3), g / 6, Scalar(0)), Scalar(0))};
      };
    case OpId::hardswish:  // 0 below -3, x/3 + 1/2 up to 3, 1 above
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        return {where(lt(xv, -3), Scalar(0), where(le(xv, 3), g * (xv / 3 + 0.5), g))};
      };
    case OpId::mish:  // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        Tensor xv = x.get();
        Tensor t = tanh(log1p(exp(xv)));
        return {g * (t + xv * sigmoid(xv) * (neg(t * t) + 1))};
      };
    case OpId::logsigmoid:  // 1 - sigmoid(x) = sigmoid(-x)
      return [x = Saved(x)](const Tensor& g, const Needs&) -> Grads {
        return {g * sigmoid(neg(x.get()))};
      };
    // Fused kernels (docs/kernel-contract.md): from the output for relu,
    // sigmoid and tanh, from the input for the gelus and silu.
    case OpId::relu:
      return activation(OpId::relu_backward, y);
    case OpId::sigmoid:
      return activation(OpId::sigmoid_backward, y);
    case OpId::tanh:
      return activation(OpId::tanh_backward, y);
    case OpId::gelu:
      return activation(OpId::gelu_backward, x);
    case OpId::gelu_tanh:
      return activation(OpId::gelu_tanh_backward, x);
    case OpId::silu:
      return activation(OpId::silu_backward, x);
    default:
      break;
  }
  throw Error(fmt::format("autograd: no backward formula for '{}' (a bug in ferry)", op_name(op)));
}

BackwardFn binary_formula(OpId op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using Grads = std::vector<Tensor>;
  switch (op) {
    case OpId::add:
      return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs&) -> Grads {
        return {to_input(g, a.get()), to_input(g, b.get())};
      };
    case OpId::sub:
      return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> Grads {
        return {to_input(g, a.get()), n[1] ? to_input(neg(g), b.get()) : Tensor()};
      };
    case OpId::mul:
      return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> Grads {
        Tensor av = a.get(), bv = b.get();
        return {n[0] ? to_input(g * bv, av) : Tensor(), n[1] ? to_input(g * av, bv) : Tensor()};
      };
    case OpId::div:  // d(a/b)/db = -a / b^2 = -out / b
      return
          [a = Saved(a), b = Saved(b), out = Saved(out)](const Tensor& g, const Needs& n) -> Grads {
            Tensor av = a.get(), bv = b.get();
            return {n[0] ? to_input(g / bv, av) : Tensor(),
                    n[1] ? to_input(neg(g) * out.get() / bv, bv) : Tensor()};
          };
    case OpId::pow:  // PyTorch's pow_backward_self and pow_backward_exponent
      return
          [a = Saved(a), b = Saved(b), out = Saved(out)](const Tensor& g, const Needs& n) -> Grads {
            Tensor av = a.get(), bv = b.get();
            Grads r(2);
            if (n[0]) r[0] = to_input(where(eq(bv, 0), Scalar(0), g * bv * pow(av, bv - 1)), av);
            if (n[1]) {
              Tensor zero_base = where(eq(av, 0), ge(bv, 0), Scalar(false));
              r[1] = to_input(where(zero_base, Scalar(0), g * out.get() * log(av)), bv);
            }
            return r;
          };
    case OpId::atan2:  // d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
      return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> Grads {
        Tensor av = a.get(), bv = b.get();
        Tensor r = g / (av * av + bv * bv);
        return {n[0] ? to_input(r * bv, av) : Tensor(),
                n[1] ? to_input(r * neg(av), bv) : Tensor()};
      };
    case OpId::remainder:  // a - floor(a / b) b: d/db = -floor(a / b)
    case OpId::fmod:       // a - trunc(a / b) b: d/db = -trunc(a / b)
      return [a = Saved(a), b = Saved(b), floor = op == OpId::remainder](const Tensor& g,
                                                                         const Needs& n) -> Grads {
        Tensor av = a.get(), bv = b.get();
        Grads r = {n[0] ? to_input(g, av) : Tensor(), Tensor()};
        if (n[1]) {
          Tensor q = floor ? floor_divide(av, bv) : trunc(av / bv);
          r[1] = to_input(neg(g) * q, bv);
        }
        return r;
      };
    case OpId::hypot:  // a / out, b / out
      return [a = Saved(a), b = Saved(b), out = Saved(out)](const Tensor& g,
                                                            const Needs& n) -> Grads {
        Tensor av = a.get(), bv = b.get(), go = g / out.get();
        return {n[0] ? to_input(go * av, av) : Tensor(), n[1] ? to_input(go * bv, bv) : Tensor()};
      };
    case OpId::copysign:  // out / a (0 where a is 0) to a; none to b
      return [a = Saved(a), b = Saved(b), out = Saved(out)](const Tensor& g,
                                                            const Needs& n) -> Grads {
        Tensor av = a.get();
        return {n[0] ? to_input(where(eq(av, 0), Scalar(0), g * (out.get() / av)), av) : Tensor(),
                n[1] ? to_input(zeros_like(g), b.get()) : Tensor()};
      };
    // PyTorch's: xlogy(g, y) to x, 0 where x is 0 and y <= 0 (log y where x is 0 and y > 0:
    // the derivative along x = 0, pytorch/pytorch#80770); x / y to y.
    case OpId::xlogy:
      return [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> Grads {
        Tensor av = a.get(), bv = b.get();
        return {
            n[0] ? to_input(where(logical_and(eq(av, 0), le(bv, 0)), Scalar(0), xlogy(g, bv)), av)
                 : Tensor(),
            n[1] ? to_input(g * av / bv, bv) : Tensor()};
      };
    case OpId::maximum:
    case OpId::minimum:  // ties split the gradient in half
      return [is_max = op == OpId::maximum, a = Saved(a), b = Saved(b)](const Tensor& g,
                                                                        const Needs& n) -> Grads {
        Tensor av = a.get(), bv = b.get();
        Tensor half = where(eq(av, bv), g * 0.5, g);
        Tensor a_loses = is_max ? lt(av, bv) : gt(av, bv);
        Tensor b_loses = is_max ? gt(av, bv) : lt(av, bv);
        return {n[0] ? to_input(where(a_loses, Scalar(0), half), av) : Tensor(),
                n[1] ? to_input(where(b_loses, Scalar(0), half), bv) : Tensor()};
      };
    default:
      break;
  }
  throw Error(fmt::format("autograd: no backward formula for '{}' (a bug in ferry)", op_name(op)));
}

}  // namespace

void record_unary(OpId op, const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(std::string(op_info(op).backward_name), {x}, y, unary_formula(op, x, y));
}

void record_binary(OpId op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!should_record({&a, &b})) return;
  record(std::string(op_info(op).backward_name), {a, b}, out, binary_formula(op, a, b, out));
}

void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!should_record({&a, &b})) return;
  record("whereBackward", {a, b}, out,
         [c = Saved(cond), a = Saved(a), b = Saved(b)](const Tensor& g,
                                                       const Needs& n) -> std::vector<Tensor> {
           Tensor cv = c.get();
           return {n[0] ? to_input(where(cv, g, Scalar(0)), a.get()) : Tensor(),
                   n[1] ? to_input(where(cv, Scalar(0), g), b.get()) : Tensor()};
         });
}

void record_cast(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record("toBackward", {x}, y,
         [dt = x.dtype()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.to(dt)};
         });
}

void record_to_device(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record("toBackward", {x}, y,
         [dev = x.device()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.to(dev)};
         });
}

}  // namespace ferry::autograd
