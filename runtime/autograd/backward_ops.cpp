// runtime/autograd/backward_ops.cpp — front-ends of the kernels only backward
// passes use (docs/kernel-contract.md, "Ops for training"). Callers are the
// formulas, which pass tensors already checked by the forward op (shapes,
// devices, index bounds), so these only allocate and dispatch, and give the
// kernels' results the derivatives a second backward needs (Note [Higher-order
// gradients] in graph.hpp): the kernels run untracked, and each front-end
// records its own formula, made of ops.
#include <cmath>
#include <numbers>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"
#include "ops_internal.hpp"

namespace ferry::detail {
namespace {

// The activation's second derivative, as a function of the z its backward kernel reads (the
// output for relu, sigmoid and tanh, the input for the others): d/dz of the kernel's factor,
// so that d activation_backward(g, z) / dz = g * this. Undefined for relu (zero almost
// everywhere). Ops, so it differentiates again.
Tensor second_derivative(OpId op, const Tensor& z) {
  switch (op) {
    case OpId::sigmoid_backward:  // d/dy y(1 - y)
      return neg(z * 2.0) + 1.0;
    case OpId::tanh_backward:  // d/dy (1 - y^2)
      return z * -2.0;
    case OpId::gelu_backward: {  // phi(x) (2 - x^2)
      const Tensor x2 = z * z;
      return exp(x2 * -0.5) * (0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2) *
             (neg(x2) + 2.0);
    }
    case OpId::gelu_tanh_backward: {  // (1 - t^2) (u' - x t u'^2 + x u'' / 2), t = tanh(u)
      const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
      const Tensor x2 = z * z;
      const Tensor t = tanh((z + z * x2 * c) * k);
      const Tensor du = (x2 * (3 * c) + 1.0) * k;
      return (neg(t * t) + 1.0) * (du - z * t * du * du + x2 * (3 * c * k));
    }
    case OpId::silu_backward: {  // s (1 - s) (2 + x (1 - 2 s)), s = sigmoid(x)
      const Tensor sg = sigmoid(z);
      return sg * (neg(sg) + 1.0) * (z * (neg(sg * 2.0) + 1.0) + 2.0);
    }
    default:
      return {};
  }
}

// A channels-last gradient gives a channels-last result, computed in the permuted order as
// the element-wise ops compute (Note [Channels-last outputs]): a contiguous output of
// channels-last operands walked them strided element by element (ResNet-18's first
// relu_backward, [32, 64, 112, 112] channels-last, took 69 ms a call against 11 ms for its
// NCHW twin).
Tensor run_activation_backward(OpId op, const Tensor& grad, const Tensor& z) {
  const std::optional<Shape> order = channels_last_order(grad.sizes(), {&grad, &z});
  const auto laid = [&](const Tensor& t) { return order ? t.permute(*order) : t; };
  const Tensor g = laid(grad);
  Tensor out = new_tensor(g.sizes(), grad.dtype(), impl_of(grad));
  run_kernel(op, {g, laid(z.to(grad.dtype()).expand(grad.sizes()))}, {out});
  return order ? out.permute(inverse_permutation(*order)) : out;
}

}  // namespace

// The result is linear in grad (the same kernel takes the second gradient) and moves with z
// by the activation's second derivative.
Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& z) {
  Tensor out;
  {
    NoGradGuard untracked;
    out = run_activation_backward(op, grad, z);
  }
  if (!autograd::should_record({&grad, &z})) return out;  // a first backward: no formula
  autograd::record(std::string(op_name(op)) + "Backward", {grad, z}, out,
                   [op, grad = autograd::Saved(grad), z = autograd::Saved(z)](
                       const Tensor& gg, const autograd::Needs& needs) -> std::vector<Tensor> {
                     const Tensor g = grad.get(), zv = z.get();
                     Tensor dz;
                     if (needs[1])
                       if (const Tensor f = second_derivative(op, zv.to(g.dtype())); f.defined())
                         dz = autograd::sum_to(gg * g * f, zv.sizes()).to(zv.dtype());
                     return {needs[0] ? activation_backward(op, gg, zv) : Tensor(), dz};
                   });
  return out;
}

namespace {

// index_add's and scatter_add's kernel `op`: src accumulated into a zero tensor of `shape`, which
// the kernel reads and writes; linear in src, whose gradient `reads` the positions src went to.
Tensor accumulate(OpId op, const Shape& shape, std::int64_t dim, const Tensor& index,
                  const Tensor& src, Tensor (*reads)(const Tensor&, std::int64_t, const Tensor&)) {
  Tensor out = zeros(shape, {.dtype = src.dtype(), .device = src.device()});
  if (src.numel() == 0) return out;
  {
    NoGradGuard untracked;
    run_kernel(op, {src, index}, {out}, Attrs{{"dim", dim}});
  }
  if (!autograd::should_record({&src})) return out;
  autograd::record(std::string(op_name(op)) + "Backward", {src}, out,
                   [dim, index, reads](const Tensor& gg, const autograd::Needs&) {
                     return std::vector<Tensor>{reads(gg, dim, index)};
                   });
  return out;
}

}  // namespace

Tensor index_add(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return accumulate(OpId::index_add, shape, dim, index, src, index_select_in_range);
}

Tensor scatter_add(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return accumulate(OpId::scatter_add, shape, dim, index, src, gather_in_range);
}

}  // namespace ferry::detail

namespace ferry::detail {

Tensor linear_kernel(OpId op, const std::vector<Tensor>& in, const Shape& sizes,
                     MemoryFormat format, const Attrs& attrs,
                     std::function<Tensor(const Tensor&)> adjoint) {
  const Tensor& first = in.at(0);
  Tensor out = new_tensor_in(sizes, first.dtype(), impl_of(first), format);
  {
    NoGradGuard untracked;
    run_kernel(op, in, {out}, attrs);
  }
  if (!autograd::should_record({&first})) return out;
  autograd::record(std::string(op_name(op)) + "Backward", {first}, out,
                   [adjoint = std::move(adjoint)](const Tensor& gg, const autograd::Needs&) {
                     return std::vector<Tensor>{adjoint(gg)};
                   });
  return out;
}

namespace {

MemoryFormat weight_format(const Attrs& attrs, MemoryFormat activations) {
  return attrs.has("weight_channels_last") ? activations : MemoryFormat::contiguous;
}

}  // namespace

// dx = B(g, w), bilinear: d/dg along gg is the forward of gg, d/dw the weight's gradient with
// gg as the input.
Tensor ConvKernels::input_grad(const Tensor& g, const Tensor& w) const {
  const MemoryFormat format = activation_format(attrs, std::int64_t(x_sizes.size()));
  Tensor dx = new_tensor_in(x_sizes, g.dtype(), impl_of(g), format);
  {
    NoGradGuard untracked;
    run_kernel(OpId::conv_backward_input,
               {g.contiguous(format), w.contiguous(weight_format(attrs, format))}, {dx}, attrs);
  }
  if (!autograd::should_record({&g, &w})) return dx;
  autograd::record("conv_backward_inputBackward", {g, w}, dx,
                   [self = *this, g = autograd::Saved(g), w = autograd::Saved(w)](
                       const Tensor& gg, const autograd::Needs& n) -> std::vector<Tensor> {
                     const Tensor gv = g.get(), wv = w.get();
                     return {n[0] ? self.output(gg, wv) : Tensor(),
                             n[1] ? self.weight_grad(gg, gv, false).first : Tensor()};
                   });
  return dx;
}

// dw = C(x, g), bilinear: d/dx along gg is the input's gradient from g through the weight gg,
// d/dg the forward of x through gg; db = Σ g, whose derivative spreads gg over g's positions.
std::pair<Tensor, Tensor> ConvKernels::weight_grad(const Tensor& x, const Tensor& g,
                                                   bool bias) const {
  const MemoryFormat format = activation_format(attrs, std::int64_t(x_sizes.size()));
  Attrs a = attrs;
  a.set("has_bias", bias);
  std::vector<Tensor> out{
      new_tensor_in(w_sizes, x.dtype(), impl_of(x), weight_format(attrs, format))};
  if (bias) out.push_back(new_tensor({w_sizes[0]}, x.dtype(), impl_of(x)));
  {
    NoGradGuard untracked;
    run_kernel(OpId::conv_backward_weight, {x.contiguous(format), g.contiguous(format)}, out, a);
  }
  if (!autograd::should_record({&x, &g})) return {out[0], bias ? out[1] : Tensor()};
  autograd::record(
      "conv_backward_weightBackward", {x, g}, out[0],
      [self = *this, x = autograd::Saved(x), g = autograd::Saved(g)](
          const Tensor& gg, const autograd::Needs& n) -> std::vector<Tensor> {
        const Tensor xv = x.get(), gv = g.get();
        return {n[0] ? self.input_grad(gv, gg) : Tensor(), n[1] ? self.output(xv, gg) : Tensor()};
      });
  if (!bias) return {out[0], Tensor()};
  autograd::record(
      "conv_backward_biasBackward", {g}, out[1],
      [sizes = g.sizes()](const Tensor& gg, const autograd::Needs&) -> std::vector<Tensor> {
        Shape spread(sizes.size(), 1);
        spread[1] = sizes[1];
        return {gg.reshape(spread).expand(sizes)};
      });
  return {out[0], out[1]};
}

// y = F(x, w), bilinear: its gradients are the two backward kernels'.
Tensor ConvKernels::output(const Tensor& x, const Tensor& w) const {
  const MemoryFormat format = activation_format(attrs, std::int64_t(x_sizes.size()));
  Attrs a = attrs;
  a.set("has_bias", false);
  Tensor y = new_tensor_in(y_sizes, x.dtype(), impl_of(x), format);
  {
    NoGradGuard untracked;
    run_kernel(forward, {x.contiguous(format), w.contiguous(weight_format(attrs, format))}, {y}, a);
  }
  if (!autograd::should_record({&x, &w})) return y;
  autograd::record(std::string(op_name(forward)) + "Backward", {x, w}, y,
                   [self = *this, x = autograd::Saved(x), w = autograd::Saved(w)](
                       const Tensor& gy, const autograd::Needs& n) -> std::vector<Tensor> {
                     const Tensor xv = x.get(), wv = w.get();
                     return {n[0] ? self.input_grad(gy, wv) : Tensor(),
                             n[1] ? self.weight_grad(xv, gy, false).first : Tensor()};
                   });
  return y;
}

}  // namespace ferry::detail
