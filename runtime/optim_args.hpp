// runtime/optim_args.hpp — the scalars of one adam_step / sgd_step call, from
// its attributes, as every backend's fused optimizer kernel takes them
// (docs/kernel-contract.md, "Ops for training"): the combinations (1 - beta,
// 1 - lr * weight_decay, ...) formed in double and rounded once to the kernel's
// compute type C, so that the CPU and CUDA kernels start from the same bits.
#pragma once

#include "ferry/backend.hpp"
#include "math/grad_ops.hpp"

namespace ferry::optim_args {

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
