// include/ferry/kit/math/grad_ops.hpp — the per-element math of the kernels training
// needs: activation derivatives and optimizer updates (docs/kernel-contract.md,
// "Ops for training"), written once for the host and (under nvcc) the GPU.
// shaders/elementwise.comp and shaders/optim.comp mirror these formulas in GLSL.
//
// As in scalar_ops.hpp, each formula is a template over its compute type F:
// float for f32, f16 and bf16, double for f64. The formulas, and the order of
// their operations, are PyTorch's (aten/src/ATen/native/cpu/*Kernel.cpp and
// torch/optim/{adam,sgd}.py), so results carry over bit for bit where the
// arithmetic allows.
#pragma once

#include <cmath>

#include "ferry/config.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::math {

inline constexpr double kInvSqrt2Pi = 0.39894228040143268;  // 1 / sqrt(2 pi)

// ---- activation backward: g is the gradient of the forward output ----
// From the forward output y (relu, sigmoid, tanh) or input x (gelu, gelu_tanh, silu).

// threshold_backward(g, y, 0): a NaN y fails `y <= 0`, so it passes the gradient.
template <typename F> FERRY_HD F relu_backward(F g, F y) { return y <= F(0) ? F(0) : g; }

template <typename F> FERRY_HD F sigmoid_backward(F g, F y) { return g * (F(1) - y) * y; }

template <typename F> FERRY_HD F tanh_backward(F g, F y) { return g * (F(1) - y * y); }

// d/dx x Phi(x) = Phi(x) + x phi(x).
template <typename F> FERRY_HD F gelu_backward(F g, F x) {
  const F cdf = F(0.5) * std::erfc(x * F(-kSqrtHalf));  // as gelu_erf
  const F pdf = F(kInvSqrt2Pi) * std::exp(x * x * F(-0.5));
  return g * (cdf + x * pdf);
}

// d/dx 0.5 x (1 + tanh(k (x + c x^3))).
template <typename F> FERRY_HD F gelu_tanh_backward(F g, F x) {
  const F k = F(kSqrt2OverPi), c = F(kGeluTanhCubic);
  const F x_sq = x * x;
  const F t = std::tanh(k * (x + c * (x_sq * x)));
  const F left = F(0.5) * x;
  const F right = F(1) + t;
  const F inner_derivative = k * (F(1) + F(3) * c * x_sq);
  return g * (F(0.5) * right + left * (F(1) - t * t) * inner_derivative);
}

// d/dx x s(x) = s (1 + x (1 - s)), s = sigmoid(x).
template <typename F> FERRY_HD F silu_backward(F g, F x) {
  const F s = sigmoid(x);
  return g * s * (F(1) + x * (F(1) - s));
}

// ---- optimizer steps (one element; the scalars come from the host in F) ----

// Adam's scalars as one element needs them. The host computes every combination
// of hyper-parameters in double (1 - beta1, 1 - lr * weight_decay, ...), as
// PyTorch's Python code does, and rounds each once to F.
template <typename F> struct AdamScalars {
  F beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  F weight_decay;           // L2 penalty added to the gradient (Adam)
  F decay_factor;           // 1 - lr * weight_decay, the parameter's shrink (AdamW)
  F step_size;              // lr / (1 - beta1^step), per parameter
  F bias_correction2_sqrt;  // sqrt(1 - beta2^step), per parameter
  bool amsgrad, maximize, decoupled, has_weight_decay;
};

// One element of _single_tensor_adam; vmax is read and written only with amsgrad.
template <typename F>
FERRY_HD void adam_update(const AdamScalars<F>& s, F grad, F& p, F& m, F& v, F& vmax) {
  F g = s.maximize ? -grad : grad;
  if (s.decoupled)
    p = p * s.decay_factor;
  else if (s.has_weight_decay)
    g = g + s.weight_decay * p;
  m = m * s.beta1 + s.one_minus_beta1 * g;
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
  F second = v;
  if (s.amsgrad) {
    vmax = maximum(vmax, v);
    second = vmax;
  }
  const F denom = std::sqrt(second) / s.bias_correction2_sqrt + s.eps;
  p = p - s.step_size * (m / denom);
}

template <typename F> struct SgdScalars {
  F lr, momentum, one_minus_dampening, weight_decay;
  bool has_momentum, has_weight_decay, nesterov, maximize;
  bool init_buffer;  // per parameter: the buffer's first step
};

// One element of _single_tensor_sgd; buf is read and written only with momentum.
template <typename F> FERRY_HD void sgd_update(const SgdScalars<F>& s, F grad, F& p, F& buf) {
  F d = s.maximize ? -grad : grad;
  if (s.has_weight_decay) d = d + s.weight_decay * p;
  if (s.has_momentum) {
    buf = s.init_buffer ? d : buf * s.momentum + s.one_minus_dampening * d;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  p = p - s.lr * d;
}

}  // namespace ferry::math
