// runtime/nn/utils.cpp — ferry/nn/utils.hpp: gradient clipping and parameter
// vectors, PyTorch's torch.nn.utils, from ferry's ops. The gradients change
// in place under NoGradGuard, as an optimizer step does.
#include "ferry/nn/utils.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return scalar_tensor(0.0);
  const Device device = grads[0].device();
  // The norm of the per-gradient norms is the norm of all their elements.
  std::vector<Tensor> norms;
  for (const Tensor& g : grads)
    norms.push_back(norm(g.to(DType::f32), norm_type).reshape({1}).to(device));
  const Tensor total = norm(cat(norms), norm_type).reshape({});
  if (error_if_nonfinite) {
    // The one case that reads the norm back (a host wait for the backward pass), as PyTorch's.
    const double t = total.item<double>();
    if (!std::isfinite(t))
      throw ValueError(fmt::format(
          "clip_grad_norm_: the total norm of order {} of the gradients is {}; the gradients "
          "cannot be clipped by it (error_if_nonfinite)",
          norm_type, t));
  }
  // PyTorch's rule, on the device: every gradient times min(1, max_norm / (total + 1e-6)), in
  // the total's dtype. The factor never comes to the host, so a training step does not wait here
  // for its backward pass (the one host wait of ferry-gpt's step on vulkan:0 until 2026-12-07).
  // A NaN total makes every gradient NaN, as in PyTorch.
  const Tensor coef = clamp_max(max_norm / (total + 1e-6), 1.0);
  for (Tensor g : grads) g.copy_(g * coef.to(g.device()));
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) {
      Tensor g = p.grad();
      g.copy_(clamp(g, -clip_value, clip_value));
    }
}

Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> flat;
  for (const Tensor& p : parameters) {
    if (!flat.empty() && p.device() != flat[0].device())
      throw DeviceMismatchError(fmt::format(
          "parameters_to_vector: the parameters are on {} and {}; move them to one device",
          flat[0].device().str(), p.device().str()));
    flat.push_back(p.reshape({-1}));
  }
  if (flat.empty()) return zeros({0});
  return cat(flat);
}

void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  if (vec.dim() != 1)
    throw ShapeError(
        fmt::format("vector_to_parameters: vec must be 1-D, got shape {}", shape_str(vec.sizes())));
  std::int64_t total = 0;
  for (const Tensor& p : parameters) total += p.numel();
  if (total != vec.numel())
    throw ShapeError(
        fmt::format("vector_to_parameters: vec has {} elements but the parameters hold {}",
                    vec.numel(), total));
  NoGradGuard no_grad;
  std::int64_t at = 0;
  for (const Tensor& p : parameters) {
    Tensor target = p;
    target.copy_(vec.slice(0, at, at + p.numel()).reshape(p.sizes()));
    at += p.numel();
  }
}

}  // namespace ferry::nn::utils
