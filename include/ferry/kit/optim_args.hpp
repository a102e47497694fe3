// include/ferry/kit/optim_args.hpp — the scalars of one adam_step / sgd_step call, from
// its attributes, as every backend's fused optimizer kernel takes them
// (docs/kernel-contract.md, "Ops for training"): the combinations (1 - beta,
// 1 - lr * weight_decay, ...) formed in double and rounded once to the kernel's
// compute type C, so that the CPU and CUDA kernels start from the same bits.
// Also the checks of a call's layout every backend makes before it touches
// memory, so that a bad call changes nothing. (Plain string building, no fmt:
// nvcc compiles this header too.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/math/grad_ops.hpp"

namespace ferry::optim_args {

// Checks the layout of one multi-tensor call: n grads; `per` outputs per
// parameter, each of its grad's dtype and element count; all floating and
// contiguous. Returns n. A backend adds the dtypes it cannot compute.
inline std::size_t check_group(const OpCall& c, std::size_t per, std::string_view op) {
  const std::string o(op);
  const std::size_t n = c.inputs.size();
  if (c.outputs.size() != n * per)
    throw ShapeError(o + ": " + std::to_string(n) + " grads need " + std::to_string(n * per) +
                     " outputs (" + std::to_string(per) +
                     " per parameter, see docs/kernel-contract.md), got " +
                     std::to_string(c.outputs.size()));
  for (std::size_t i = 0; i < n; ++i) {
    const TensorArg& g = c.inputs[i];
    const std::string param = o + ": parameter " + std::to_string(i);
    if (!is_floating(g.dtype))
      throw DTypeError(param + " is " + std::string(dtype_name(g.dtype)) +
                       "; optimizers update floating tensors");
    for (std::size_t k = 0; k < per; ++k) {
      const TensorArg& t = c.outputs[i * per + k];
      const std::string tensor = param + ": tensor " + std::to_string(k);
      if (t.dtype != g.dtype)
        throw DTypeError(param + ": every tensor must have the grad's dtype " +
                         std::string(dtype_name(g.dtype)) + ", tensor " + std::to_string(k) +
                         " is " + std::string(dtype_name(t.dtype)));
      if (t.numel() != g.numel())
        throw ShapeError(tensor + " has " + std::to_string(t.numel()) + " elements, the grad " +
                         std::to_string(g.numel()));
      if (!t.is_contiguous()) throw ShapeError(tensor + " is not contiguous");
    }
    if (!g.is_contiguous()) throw ShapeError(param + ": the grad is not contiguous");
  }
  return n;
}

// Attribute `name`: one double per parameter.
inline const std::vector<double>& per_param_floats(const OpCall& c, const char* name, std::size_t n,
                                                   std::string_view op) {
  const std::vector<double>& v = c.attrs.floats(name);
  if (v.size() != n)
    throw ShapeError(std::string(op) + ": attr " + name + " has " + std::to_string(v.size()) +
                     " entries for " + std::to_string(n) + " parameters");
  return v;
}

// sgd_step's init_buffer: per parameter, whether this is its momentum
// buffer's first step (all 0 without momentum, where the attr is not read).
inline std::vector<std::int64_t> sgd_init_buffer(const OpCall& c, std::size_t n) {
  if (c.attrs.f("momentum") == 0) return std::vector<std::int64_t>(n, 0);
  std::vector<std::int64_t> init = c.attrs.ints("init_buffer");
  if (init.size() != n)
    throw ShapeError("sgd_step: attr init_buffer has " + std::to_string(init.size()) +
                     " entries for " + std::to_string(n) + " parameters");
  return init;
}

template <typename C> math::AdamScalars<C> adam_scalars(const Attrs& a) {
  const double lr = a.f("lr"), beta1 = a.f("beta1"), beta2 = a.f("beta2"),
               weight_decay = a.f("weight_decay");
  math::AdamScalars<C> s{};
  s.beta1 = C(beta1);
  s.beta2 = C(beta2);
  s.one_minus_beta1 = C(1 - beta1);
  s.one_minus_beta2 = C(1 - beta2);
  s.eps = C(a.f("eps"));
  s.weight_decay = C(weight_decay);
  s.decay_factor = C(1 - lr * weight_decay);
  s.amsgrad = a.b("amsgrad");
  s.maximize = a.b("maximize");
  s.decoupled = a.b("decoupled_weight_decay");
  s.has_weight_decay = weight_decay != 0;
  return s;
}

template <typename C> math::SgdScalars<C> sgd_scalars(const Attrs& a) {
  const double momentum = a.f("momentum"), weight_decay = a.f("weight_decay");
  math::SgdScalars<C> s{};
  s.lr = C(a.f("lr"));
  s.momentum = C(momentum);
  s.one_minus_dampening = C(1 - a.f("dampening"));
  s.weight_decay = C(weight_decay);
  s.has_momentum = momentum != 0;
  s.has_weight_decay = weight_decay != 0;
  s.nesterov = a.b("nesterov");
  s.maximize = a.b("maximize");
  return s;
}

}  // namespace ferry::optim_args
