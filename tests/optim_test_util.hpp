// Shared by the optimizer tests (test_optim*.cpp): an independent
// double-precision reference of PyTorch 1.13's update rules, written straight
// from torch/optim/sgd.py, adam.py and adamw.py (`_single_tensor_*`), and
// small helpers for devices and tensors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"

namespace ferry_optim_test {

// The value a stored element of `dtype` holds: the reference rounds what it
// stores (parameters, state) as ferry's tensors do, and computes in double.
inline double round_to(double x, ferry::DType dtype) {
  switch (dtype) {
    case ferry::DType::f32:
      return double(float(x));
    case ferry::DType::f16:
      return double(float(ferry::Half(float(x))));
    case ferry::DType::bf16:
      return double(float(ferry::BFloat16(float(x))));
    default:
      return x;
  }
}

// One parameter's reference state.
struct RefParam {
  std::vector<double> p, exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer;
  bool has_buffer = false;
  std::int64_t step = 0;
};

// _single_tensor_sgd for one parameter.
inline void ref_sgd_step(const ferry::optim::SGDOptions& o, RefParam& s,
                         const std::vector<double>& grad, ferry::DType dtype) {
  ++s.step;
  const bool init = o.momentum != 0 && !s.has_buffer;
  if (o.momentum != 0 && init) s.momentum_buffer.assign(s.p.size(), 0);
  for (std::size_t j = 0; j < s.p.size(); ++j) {
    double d = o.maximize ? -grad[j] : grad[j];
    if (o.weight_decay != 0) d += o.weight_decay * s.p[j];
    if (o.momentum != 0) {
      // The buffer is stored rounded; this step goes on with the exact value.
      const double buf = init ? d : s.momentum_buffer[j] * o.momentum + (1 - o.dampening) * d;
      s.momentum_buffer[j] = round_to(buf, dtype);
      d = o.nesterov ? d + o.momentum * buf : buf;
    }
    s.p[j] = round_to(s.p[j] - o.lr * d, dtype);
  }
  if (o.momentum != 0) s.has_buffer = true;
}

struct RefAdamOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};
inline RefAdamOptions ref_options(const ferry::optim::AdamOptions& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize, false};
}
inline RefAdamOptions ref_options(const ferry::optim::AdamWOptions& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize, true};
}

// _single_tensor_adam / _single_tensor_adamw for one parameter.
inline void ref_adam_step(const RefAdamOptions& o, RefParam& s, const std::vector<double>& grad,
                          ferry::DType dtype) {
  if (s.step == 0) {
    s.exp_avg.assign(s.p.size(), 0);
    s.exp_avg_sq.assign(s.p.size(), 0);
  }
  if (o.amsgrad && s.max_exp_avg_sq.empty()) s.max_exp_avg_sq.assign(s.p.size(), 0);
  ++s.step;
  const double bias_correction1 = 1 - std::pow(o.beta1, double(s.step));
  const double bias_correction2 = 1 - std::pow(o.beta2, double(s.step));
  const double step_size = o.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (std::size_t j = 0; j < s.p.size(); ++j) {
    double g = o.maximize ? -grad[j] : grad[j];
    double p = s.p[j];
    if (o.decoupled) {
      p *= 1 - o.lr * o.weight_decay;
    } else if (o.weight_decay != 0) {
      g += o.weight_decay * p;
    }
    double m = s.exp_avg[j] * o.beta1 + (1 - o.beta1) * g;
    double v = s.exp_avg_sq[j] * o.beta2 + (1 - o.beta2) * g * g;
    s.exp_avg[j] = round_to(m, dtype);
    s.exp_avg_sq[j] = round_to(v, dtype);
    if (o.amsgrad) {
      v = std::max(s.max_exp_avg_sq[j], v);
      s.max_exp_avg_sq[j] = round_to(v, dtype);
    }
    const double denom = std::sqrt(v) / bias_correction2_sqrt + o.eps;
    s.p[j] = round_to(p - step_size * m / denom, dtype);
  }
}

// The devices the tests run on: the CPU and each accelerator this machine has.
inline std::vector<std::string> test_devices() { return ferry_test::available_device_names(); }

// Elements of `t` as doubles (any floating dtype, any device).
inline std::vector<double> values(const ferry::Tensor& t) { return t.to_vector<double>(); }

// A parameter on `device` of `dtype` holding `data` (rounded to dtype).
inline ferry::Tensor make_param(const std::vector<float>& data, const ferry::Shape& shape,
                                ferry::DType dtype, const ferry::Device& device) {
  return ferry::tensor(data, shape).to(device, dtype).requires_grad_();
}

// Same as make_param, for a gradient (never requires grad).
inline ferry::Tensor make_grad(const std::vector<float>& data, const ferry::Shape& shape,
                               ferry::DType dtype, const ferry::Device& device) {
  return ferry::tensor(data, shape).to(device, dtype);
}

// Whether `device` has the fused kernel `op` (the other engineer's adam_step /
// sgd_step).
inline bool has_kernel(const ferry::Device& device, const char* op) {
  return ferry::device_impl(device).find_kernel(ferry::op_from_name(op).value()) != nullptr;
}

// ---------------------------------------------------------------- scenarios

enum class Kind { sgd, adam, adamw };

// One optimizer configuration: the kind and its options (the others unused).
struct Config {
  std::string name;
  Kind kind = Kind::sgd;
  ferry::optim::SGDOptions sgd{};
  ferry::optim::AdamOptions adam{};
  ferry::optim::AdamWOptions adamw{};
};

// gtest prints a parameter by its name (test names and failure messages).
inline void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

inline Config sgd(std::string name, ferry::optim::SGDOptions o) {
  return {std::move(name), Kind::sgd, o, {}, {}};
}
inline Config adam(std::string name, ferry::optim::AdamOptions o) {
  return {std::move(name), Kind::adam, {}, o, {}};
}
inline Config adamw(std::string name, ferry::optim::AdamWOptions o) {
  return {std::move(name), Kind::adamw, {}, {}, o};
}

// Every rule and option the tests cover.
inline std::vector<Config> all_configs() {
  return {
      sgd("sgd_plain", {.lr = 0.1}),
      sgd("sgd_momentum", {.lr = 0.05, .momentum = 0.9}),
      sgd("sgd_dampening", {.lr = 0.05, .momentum = 0.9, .dampening = 0.3}),
      sgd("sgd_nesterov", {.lr = 0.05, .momentum = 0.8, .nesterov = true}),
      sgd("sgd_weight_decay", {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.05}),
      sgd("sgd_maximize", {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1, .maximize = true}),
      adam("adam_default", {.lr = 1e-2}),
      adam("adam_weight_decay", {.lr = 1e-2, .weight_decay = 0.1}),
      adam("adam_amsgrad", {.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.95, .amsgrad = true}),
      adam("adam_maximize", {.lr = 1e-2, .eps = 1e-6, .weight_decay = 0.05, .maximize = true}),
      adamw("adamw_default", {.lr = 1e-2}),
      adamw("adamw_amsgrad_maximize",
            {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true, .maximize = true}),
  };
}

inline std::unique_ptr<ferry::optim::Optimizer> make_optimizer(
    const Config& c, const std::vector<ferry::Tensor>& params, std::optional<bool> fused) {
  switch (c.kind) {
    case Kind::sgd: {
      auto o = c.sgd;
      o.fused = fused;
      return std::make_unique<ferry::optim::SGD>(params, o);
    }
    case Kind::adam: {
      auto o = c.adam;
      o.fused = fused;
      return std::make_unique<ferry::optim::Adam>(params, o);
    }
    case Kind::adamw: {
      auto o = c.adamw;
      o.fused = fused;
      return std::make_unique<ferry::optim::AdamW>(params, o);
    }
  }
  return nullptr;
}

inline void ref_step(const Config& c, RefParam& s, const std::vector<double>& grad,
                     ferry::DType dtype) {
  switch (c.kind) {
    case Kind::sgd:
      ref_sgd_step(c.sgd, s, grad, dtype);
      break;
    case Kind::adam:
      ref_adam_step(ref_options(c.adam), s, grad, dtype);
      break;
    case Kind::adamw:
      ref_adam_step(ref_options(c.adamw), s, grad, dtype);
      break;
  }
}

// The scenario every trajectory test runs: three parameters, kSteps steps;
// parameter 2 gets its first gradient at step 1, parameter 1 none at step 3.
inline const std::vector<ferry::Shape> kShapes = {{5}, {2, 3}, {3, 1}};
constexpr int kSteps = 6;
inline bool has_grad(int step, std::size_t param) {
  return !((step == 0 && param == 2) || (step == 3 && param == 1));
}
inline std::int64_t numel_of(const ferry::Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
inline std::vector<float> init_data(std::size_t param) {
  return ferry_test::sample(numel_of(kShapes[param]), -1.5f, 1.5f, int(param) + 1);
}
inline std::vector<float> grad_data(int step, std::size_t param) {
  return ferry_test::sample(numel_of(kShapes[param]), -2.0f, 2.0f, 100 + 10 * step + int(param));
}

// Parameters of the scenario on `device` as `dtype`, and an optimizer over them.
struct Scenario {
  ferry::DType dtype;
  ferry::Device device;
  std::vector<ferry::Tensor> params;
  std::unique_ptr<ferry::optim::Optimizer> opt;

  Scenario(const Config& c, ferry::DType dt, const ferry::Device& dev, std::optional<bool> fused)
      : dtype(dt), device(dev) {
    for (std::size_t i = 0; i < kShapes.size(); ++i)
      params.push_back(make_param(init_data(i), kShapes[i], dtype, device));
    opt = make_optimizer(c, params, fused);
  }
  // Sets the scenario's gradients of step `s` and steps.
  void step(int s) {
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].set_grad(has_grad(s, i) ? make_grad(grad_data(s, i), kShapes[i], dtype, device)
                                        : ferry::Tensor());
    opt->step();
  }
};

// The value of a state tensor, or empty when the optimizer has none of that name.
inline std::vector<double> state_values(const ferry::optim::Optimizer& opt, std::size_t param,
                                        const std::string& name) {
  const std::string key = "state." + std::to_string(param) + "." + name;
  for (const auto& [k, t] : opt.named_state())
    if (k == key) return values(t);
  return {};
}

}  // namespace ferry_optim_test
