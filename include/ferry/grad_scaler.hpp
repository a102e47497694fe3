// ferry/grad_scaler.hpp — dynamic loss scaling for f16 training (torch.amp.GradScaler).
//
// Note [Loss scaling]
// Gradients of an f16 forward are often smaller than f16's smallest normal (6e-5) and
// flush to zero. GradScaler multiplies the loss by a large scale before backward(), so the
// gradients are computed scaled, and divides them again ("unscales") before the optimizer
// sees them. The scale is dynamic: when a step's gradients hold an inf or NaN (the scale
// was too large), the step is skipped and the scale multiplied by backoff_factor; after
// growth_interval clean steps in a row it is multiplied by growth_factor (when the result
// is still finite in f32). The scale is an f32 number, as PyTorch's.
//
// The loop, as PyTorch's:
//   ferry::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     { ferry::Autocast amp("cuda"); loss = loss_fn(model(x), y); }
//     scaler.scale(loss).backward();
//     scaler.unscale_(opt);                               // optional: before clipping
//     nn::utils::clip_grad_norm_(model.parameters(), 1.0);
//     scaler.step(opt);                                   // skipped on inf/NaN
//     scaler.update();
//   }
// unscale_ checks and unscales every gradient of the optimizer in one pass per device (the
// amp_unscale op: the CPU's fused kernel, a composition of element-wise ops and a
// reduction elsewhere) without reading anything back to the host; step() reads one flag
// per device. Gradients must not be f16 (PyTorch's rule: unscaled f16 gradients underflow,
// which is what scaling avoids): keep f32 parameters and use autocast, or bf16 parameters,
// which need no scaling. The numbers are held to PyTorch's GradScaler over steps with
// injected inf and NaN gradients (tests/test_grad_scaler.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/optim.hpp"
#include "ferry/state_dict.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

// PyTorch's arguments and defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  std::int64_t growth_interval = 2000;
  bool enabled = true;  // false: scale() returns the loss, step() just steps
};

class FERRY_EXPORT GradScaler {
 public:
  // ValueError for a scale that is not a positive finite f32, growth_factor <= 1,
  // backoff_factor outside (0, 1), growth_interval < 1.
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale, in outputs' dtype promoted with f32 (a differentiable op).
  Tensor scale(const Tensor& outputs) const;
  // Divides the gradients of `optimizer`'s parameters by the scale, in place, and records
  // for each device whether one held an inf or NaN. Error when called twice for one
  // optimizer before update(), or after step(); DTypeError for an f16 gradient.
  void unscale_(optim::Optimizer& optimizer);
  // Unscales (unless unscale_ was called) and runs optimizer.step() unless a gradient held
  // an inf or NaN; returns whether it stepped. Error when called twice for one optimizer
  // before update(), or when no parameter of the optimizer has a gradient.
  bool step(optim::Optimizer& optimizer);
  // Backs the scale off if any step since the last update found an inf or NaN, or grows it
  // after growth_interval clean updates; new_scale sets it instead (ValueError unless a
  // positive finite number). Error when no step() or unscale_() came before it.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const { return options_.enabled ? double(scale_) : 1.0; }
  std::int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  // PyTorch's state_dict as metadata "grad_scaler": a JSON object {"scale", "growth_factor",
  // "backoff_factor", "growth_interval", "_growth_tracker"} (empty when disabled).
  StateDict state_dict() const;
  // Error when `state` has no valid "grad_scaler" entry; nothing changes then.
  void load_state_dict(const StateDict& state);

 private:
  struct OptimizerState {
    bool unscaled = false;
    bool stepped = false;
    std::vector<Tensor> found_inf;  // one f32 [1] per device of the gradients
  };
  OptimizerState& unscale_grads(optim::Optimizer& optimizer, const char* who);

  GradScalerOptions options_;
  float scale_;
  std::int64_t growth_tracker_ = 0;
  std::unordered_map<const optim::Optimizer*, OptimizerState> per_optimizer_;
};

}  // namespace ferry
