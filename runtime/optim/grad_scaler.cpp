// runtime/optim/grad_scaler.cpp — dynamic loss scaling (Note [Loss scaling] in
// ferry/grad_scaler.hpp), and amp_unscale's composition.
#include "ferry/grad_scaler.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>

#include "../dispatch.hpp"
#include "../ops_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/debug.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "optim_internal.hpp"

namespace ferry {
namespace {

// Whether `v` is a positive number that f32 holds as a finite value.
bool positive_finite_f32(double v) {
  return v > 0 && std::isfinite(v) && v <= double(std::numeric_limits<float>::max());
}

// amp_unscale on one device's gradients: the fused kernel where the device has it for every
// dtype among them, else its composition. found_inf (f32 [1] on that device) becomes 1 when a
// gradient holds an inf or NaN; each gradient is multiplied by inv_scale, in place.
void amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  bool fused = !debug::composites_only();
  for (const Tensor& g : grads)
    fused = fused && g.is_contiguous(g.suggest_memory_format()) &&
            detail::impl_of(g).supports(OpId::amp_unscale, g.dtype());
  if (fused) {
    std::vector<Tensor> outputs = grads;
    outputs.push_back(found_inf);
    optim::detail::run_fused(OpId::amp_unscale, {}, outputs, {{"inv_scale", inv_scale}});
    return;
  }
  // Composition: x * 0 is 0 for every finite x and NaN for inf and NaN, so the sum of a
  // gradient times 0 is NaN exactly when it holds one (no overflow can make a false alarm).
  // The checks of all the gradients accumulate on the device; nothing is read back here.
  Tensor bad = zeros({}, {.dtype = DType::f32, .device = found_inf.device()});
  for (Tensor g : grads) {
    bad = bad + sum(g * 0.0).to(DType::f32);
    g.mul_(inv_scale);
  }
  Tensor f = found_inf;
  f.copy_(maximum(found_inf, isnan(bad).to(DType::f32).reshape({1})));
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (!positive_finite_f32(options.init_scale))
    throw ValueError(fmt::format("GradScaler: init_scale must be a positive finite f32, got {}",
                                 options.init_scale));
  if (!(options.growth_factor > 1) || !std::isfinite(options.growth_factor))
    throw ValueError(
        fmt::format("GradScaler: growth_factor must be > 1, got {}", options.growth_factor));
  if (!(options.backoff_factor > 0 && options.backoff_factor < 1))
    throw ValueError(fmt::format("GradScaler: backoff_factor must be in (0, 1), got {}",
                                 options.backoff_factor));
  if (options.growth_interval < 1)
    throw ValueError(
        fmt::format("GradScaler: growth_interval must be >= 1, got {}", options.growth_interval));
  scale_ = float(options.init_scale);
}

Tensor GradScaler::scale(const Tensor& outputs) const {
  if (!outputs.defined()) throw Error("GradScaler::scale: the outputs are undefined");
  if (!options_.enabled) return outputs;
  const Tensor s = full({}, double(scale_), {.dtype = DType::f32, .device = outputs.device()});
  return outputs * s;
}

GradScaler::OptimizerState& GradScaler::unscale_grads(optim::Optimizer& optimizer,
                                                      const char* who) {
  OptimizerState& st = per_optimizer_[&optimizer];
  if (st.unscaled)
    throw Error(fmt::format(
        "GradScaler::{}: unscale_() was already called on this optimizer since the last "
        "update()",
        who));
  if (st.stepped)
    throw Error(
        fmt::format("GradScaler::{}: step() was already called on this optimizer "
                    "since the last update()",
                    who));
  // The gradients by device, in parameter order.
  std::map<std::string, std::vector<Tensor>> by_device;
  for (const Tensor& p : optimizer.parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() == DType::f16)
      throw DTypeError(
          "GradScaler: refusing to unscale f16 gradients (they would underflow after "
          "unscaling); keep the parameters in f32 and run the forward under ferry::Autocast, "
          "or train in bf16, which needs no scaling");
    by_device[g.device().str()].push_back(g);
  }
  if (by_device.empty())
    throw Error(
        fmt::format("GradScaler::{}: no parameter of the optimizer has a gradient; call "
                    "scale(loss).backward() first",
                    who));
  const double inv_scale = double(1.0f / scale_);  // PyTorch: scale.double().reciprocal().float()
  NoGradGuard no_grad;
  st.found_inf.clear();
  for (auto& [device, grads] : by_device) {
    Tensor found = zeros({1}, {.dtype = DType::f32, .device = grads.front().device()});
    amp_unscale(grads, found, inv_scale);
    st.found_inf.push_back(found);
  }
  st.unscaled = true;
  return st;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  unscale_grads(optimizer, "unscale_");
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  OptimizerState* st = &per_optimizer_[&optimizer];
  if (st->stepped)
    throw Error(
        "GradScaler::step: step() was already called on this optimizer since the last "
        "update()");
  if (!st->unscaled) st = &unscale_grads(optimizer, "step");
  double found = 0;
  for (const Tensor& f : st->found_inf) found += f.item<float>();  // one read per device
  st->stepped = true;
  if (found > 0) return false;
  optimizer.step();
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  if (new_scale) {
    if (!positive_finite_f32(*new_scale))
      throw ValueError(fmt::format(
          "GradScaler::update: new_scale must be a positive finite f32, got {}", *new_scale));
    scale_ = float(*new_scale);
    per_optimizer_.clear();
    return;
  }
  bool any = false, found = false;
  for (const auto& [opt, st] : per_optimizer_)
    for (const Tensor& f : st.found_inf) {
      any = true;
      found = found || f.item<float>() > 0;
    }
  if (!any)
    throw Error(
        "GradScaler::update: no inf checks were recorded since the last update(); call "
        "step() (or unscale_()) first");
  // PyTorch's _amp_update_scale_, in f32.
  if (found) {
    scale_ = float(scale_ * float(options_.backoff_factor));
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    const float grown = scale_ * float(options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  per_optimizer_.clear();
}

StateDict GradScaler::state_dict() const {
  StateDict sd;
  if (!options_.enabled) return sd;
  optim::detail::json j = {{"scale", double(scale_)},
                           {"growth_factor", options_.growth_factor},
                           {"backoff_factor", options_.backoff_factor},
                           {"growth_interval", options_.growth_interval},
                           {"_growth_tracker", growth_tracker_}};
  sd.metadata["grad_scaler"] = j.dump();
  return sd;
}

void GradScaler::load_state_dict(const StateDict& state) {
  auto it = state.metadata.find("grad_scaler");
  if (it == state.metadata.end())
    throw Error(
        "GradScaler::load_state_dict: the state dict has no 'grad_scaler' entry; it was "
        "not made by GradScaler::state_dict()");
  const auto j = optim::detail::json::parse(it->second, nullptr, false);
  if (!j.is_object())
    throw Error("GradScaler::load_state_dict: 'grad_scaler' is not a JSON object");
  const std::string where = "grad_scaler";
  GradScalerOptions o = options_;
  o.init_scale = optim::detail::json_number(j, "scale", where);
  o.growth_factor = optim::detail::json_number(j, "growth_factor", where);
  o.backoff_factor = optim::detail::json_number(j, "backoff_factor", where);
  const double interval = optim::detail::json_number(j, "growth_interval", where);
  const double tracker = optim::detail::json_number(j, "_growth_tracker", where);
  if (interval != std::floor(interval) || tracker != std::floor(tracker) || tracker < 0)
    throw Error(
        "GradScaler::load_state_dict: growth_interval and _growth_tracker must be "
        "whole numbers >= 0");
  o.growth_interval = std::int64_t(interval);
  const GradScaler checked(o);  // the same checks as the constructor's
  options_ = o;
  scale_ = checked.scale_;
  growth_tracker_ = std::int64_t(tracker);
  per_optimizer_.clear();
}

}  // namespace ferry
