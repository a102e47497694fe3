// runtime/optim/adam.cpp — Adam and AdamW (with amsgrad and maximize):
// PyTorch 1.13's `_single_tensor_adam` / `_single_tensor_adamw`, fused
// (`adam_step`) or as element-wise ops (docs/kernel-contract.md, "sgd_step,
// adam_step"). Bias corrections are computed on the host in double from each
// parameter's own step count, as PyTorch does with `step_t.item()`.
#include <fmt/format.h>

#include <cmath>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/optim.hpp"
#include "optim/optim_internal.hpp"

namespace ferry::optim {

using detail::json;

namespace {

// One parameter, in PyTorch's order of operations (in f32 for 16-bit
// parameters: Note [16-bit optimizer math]); the results are copied into the
// parameter and its state so that all of them keep their identity.
void adam_elementwise(double lr, double beta1, double beta2, double eps, double weight_decay,
                      bool amsgrad, bool maximize, bool decoupled, Tensor p, const Tensor& grad,
                      Tensor exp_avg, Tensor exp_avg_sq, Tensor max_exp_avg_sq, double step_size,
                      double bias_correction2_sqrt) {
  const DType w = compute_dtype(p.dtype());
  Tensor pw = p.to(w);
  Tensor g = grad.to(w);
  if (maximize) g = neg(g);
  if (decoupled) {
    // param.mul_(1 - lr * weight_decay); a factor of exactly 1 changes nothing.
    if (weight_decay != 0) pw = mul(pw, 1 - lr * weight_decay);
  } else if (weight_decay != 0) {
    g = add(g, mul(pw, weight_decay));  // grad.add(param, alpha=weight_decay)
  }
  // exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
  Tensor m = add(mul(exp_avg.to(w), beta1), mul(g, 1 - beta1));
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2): self + (value * g) * g
  Tensor v = add(mul(exp_avg_sq.to(w), beta2), mul(mul(g, 1 - beta2), g));
  Tensor vmax;
  if (amsgrad) vmax = maximum(max_exp_avg_sq.to(w), v);
  // (sqrt / bias_correction2_sqrt).add_(eps)
  Tensor denom = add(div(sqrt(amsgrad ? vmax : v), bias_correction2_sqrt), eps);
  // param.addcdiv_(exp_avg, denom, value=-step_size): self + (value * m) / denom
  Tensor new_p = add(pw, div(mul(m, -step_size), denom));
  exp_avg.copy_(m);
  exp_avg_sq.copy_(v);
  if (amsgrad) max_exp_avg_sq.copy_(vmax);
  p.copy_(new_p);
}

json config_json(double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool amsgrad, bool maximize, std::optional<bool> fused) {
  return json{{"lr", lr},
              {"beta1", beta1},
              {"beta2", beta2},
              {"eps", eps},
              {"weight_decay", weight_decay},
              {"amsgrad", amsgrad},
              {"maximize", maximize},
              {"fused", fused ? json(*fused) : json(nullptr)}};
}

}  // namespace

// PyTorch's checks (torch/optim/adam.py), NaN refused too.
void AdamBase::check_config(const Config& c, std::string_view who) {
  if (!(c.lr >= 0)) throw Error(fmt::format("{}: lr must be >= 0, got {}", who, c.lr));
  if (!(c.eps >= 0)) throw Error(fmt::format("{}: eps must be >= 0, got {}", who, c.eps));
  if (!(c.beta1 >= 0 && c.beta1 < 1))
    throw Error(fmt::format("{}: beta1 must be in [0, 1), got {}", who, c.beta1));
  if (!(c.beta2 >= 0 && c.beta2 < 1))
    throw Error(fmt::format("{}: beta2 must be in [0, 1), got {}", who, c.beta2));
  if (!(c.weight_decay >= 0))
    throw Error(fmt::format("{}: weight_decay must be >= 0, got {}", who, c.weight_decay));
}

void AdamBase::check_options(std::size_t group) const {
  check_config(config(group), detail::who(display_name(), group));
}

std::optional<bool> AdamBase::fused_option(std::size_t group) const { return config(group).fused; }

void AdamBase::set_group_lr(std::size_t group, double lr) {
  Config c = config(group);
  c.lr = lr;
  set_config(group, c);
}

void AdamBase::update(std::size_t group, const std::vector<std::size_t>& params, bool fused) {
  const Config c = config(group);
  std::vector<Tensor> grads, outputs;
  std::vector<double> step_sizes, bias_corrections2_sqrt;
  for (std::size_t i : params) {
    const Tensor& p = parameters()[i];
    Tensor exp_avg = state_tensor(i, "exp_avg");
    Tensor exp_avg_sq = state_tensor(i, "exp_avg_sq");
    // Made when first needed, so amsgrad may also be turned on later.
    Tensor max_exp_avg_sq = c.amsgrad ? state_tensor(i, "max_exp_avg_sq") : Tensor();
    const double step = double(++state(i).step);
    const double step_size = c.lr / (1 - std::pow(c.beta1, step));
    const double bias_correction2_sqrt = std::sqrt(1 - std::pow(c.beta2, step));
    if (fused) {
      grads.push_back(detail::laid_out_as(p.grad(), p));
      outputs.insert(outputs.end(), {p, exp_avg, exp_avg_sq});
      if (c.amsgrad) outputs.push_back(max_exp_avg_sq);
      step_sizes.push_back(step_size);
      bias_corrections2_sqrt.push_back(bias_correction2_sqrt);
    } else {
      adam_elementwise(c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad, c.maximize,
                       decoupled_, p, p.grad(), exp_avg, exp_avg_sq, max_exp_avg_sq, step_size,
                       bias_correction2_sqrt);
    }
  }
  if (!fused) return;
  Attrs attrs{{"lr", c.lr},
              {"beta1", c.beta1},
              {"beta2", c.beta2},
              {"eps", c.eps},
              {"weight_decay", c.weight_decay},
              {"amsgrad", c.amsgrad},
              {"maximize", c.maximize},
              {"decoupled_weight_decay", decoupled_}};
  attrs.set("step_size", std::move(step_sizes));
  attrs.set("bias_correction2_sqrt", std::move(bias_corrections2_sqrt));
  detail::run_fused(OpId::adam_step, grads, outputs, attrs);
}

std::vector<std::string> AdamBase::state_names() const {
  return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
}

std::string AdamBase::check_saved_state(const std::vector<std::string>& names,
                                        bool has_step) const {
  auto has = [&](std::string_view n) {
    for (const auto& x : names)
      if (x == n) return true;
    return false;
  };
  if (names.empty() && !has_step) return {};  // never stepped
  for (const char* n : {"exp_avg", "exp_avg_sq"})
    if (!has(n)) return fmt::format("lacks '{}' (Adam's state is exp_avg, exp_avg_sq and step)", n);
  if (!has_step) return "lacks 'step' (Adam's state is exp_avg, exp_avg_sq and step)";
  return {};
}

std::string AdamBase::options_json(std::size_t group) const {
  const Config c = config(group);
  return config_json(c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad, c.maximize, c.fused)
      .dump();
}

std::function<void()> AdamBase::parse_options(const std::vector<std::string>& groups) {
  std::vector<Config> parsed;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string where = fmt::format("param_groups[{}]", g);
    const json o = json::parse(groups[g]);
    Config c{detail::json_number(o, "lr", where),
             detail::json_number(o, "beta1", where),
             detail::json_number(o, "beta2", where),
             detail::json_number(o, "eps", where),
             detail::json_number(o, "weight_decay", where),
             detail::json_bool(o, "amsgrad", where),
             detail::json_bool(o, "maximize", where),
             detail::json_optional_bool(o, "fused", where)};
    check_config(c, display_name() + ".load_state_dict: " + where);
    parsed.push_back(c);
  }
  return [this, parsed = std::move(parsed)] {
    for (std::size_t g = 0; g < parsed.size(); ++g) set_config(g, parsed[g]);
  };
}

// ---------------------------------------------------------------- Adam, AdamW

namespace {
template <typename O> AdamBase::Config to_config(const O& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize, o.fused};
}
template <typename O> O from_config(const AdamBase::Config& c) {
  O o;
  o.lr = c.lr;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.amsgrad = c.amsgrad;
  o.maximize = c.maximize;
  o.fused = c.fused;
  return o;
}
}  // namespace

Adam::Adam(const std::vector<Tensor>& params, AdamOptions options)
    : Adam(std::vector<Group>{Group{detail::require_params(params, "Adam"), std::nullopt}},
           options) {}

Adam::Adam(const std::vector<Group>& groups, AdamOptions defaults)
    : AdamBase("adam", /*decoupled=*/false), defaults_(defaults) {
  check_config(to_config(defaults_), detail::who("Adam", std::nullopt));
  if (groups.empty()) throw Error("Adam: got no parameter groups; pass at least one");
  for (const Group& g : groups) add_param_group(g);
}

void Adam::add_param_group(const Group& group) {
  AdamOptions o = group.options.value_or(defaults_);
  check_config(to_config(o), detail::who("Adam", num_param_groups()));
  add_params(group.params);
  options_.push_back(o);
}

AdamOptions& Adam::options(std::size_t group) {
  group_indices(group);  // the range check
  return options_[group];
}
const AdamOptions& Adam::options(std::size_t group) const {
  group_indices(group);
  return options_[group];
}
AdamBase::Config Adam::config(std::size_t group) const { return to_config(options_[group]); }
void Adam::set_config(std::size_t group, const Config& c) {
  options_[group] = from_config<AdamOptions>(c);
}

AdamW::AdamW(const std::vector<Tensor>& params, AdamWOptions options)
    : AdamW(std::vector<Group>{Group{detail::require_params(params, "AdamW"), std::nullopt}},
            options) {}

AdamW::AdamW(const std::vector<Group>& groups, AdamWOptions defaults)
    : AdamBase("adamw", /*decoupled=*/true), defaults_(defaults) {
  check_config(to_config(defaults_), detail::who("AdamW", std::nullopt));
  if (groups.empty()) throw Error("AdamW: got no parameter groups; pass at least one");
  for (const Group& g : groups) add_param_group(g);
}

void AdamW::add_param_group(const Group& group) {
  AdamWOptions o = group.options.value_or(defaults_);
  check_config(to_config(o), detail::who("AdamW", num_param_groups()));
  add_params(group.params);
  options_.push_back(o);
}

AdamWOptions& AdamW::options(std::size_t group) {
  group_indices(group);
  return options_[group];
}
const AdamWOptions& AdamW::options(std::size_t group) const {
  group_indices(group);
  return options_[group];
}
AdamBase::Config AdamW::config(std::size_t group) const { return to_config(options_[group]); }
void AdamW::set_config(std::size_t group, const Config& c) {
  options_[group] = from_config<AdamWOptions>(c);
}

}  // namespace ferry::optim
