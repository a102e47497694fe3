// runtime/optim/elementwise_rules.cpp — RMSprop, Adagrad, Adamax, NAdam and
// RAdam (ferry/optim.hpp): PyTorch 1.13's `_single_tensor_*` update rules as
// element-wise ops, in PyTorch's order of operations, in f32 for 16-bit
// parameters (Note [16-bit optimizer math]). One class serves the five; a
// Rule<Options> gives each its name, checks, state and update.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/optim.hpp"
#include "optim/optim_internal.hpp"

namespace ferry::optim {

using detail::json;

namespace {

template <typename O> struct Rule;

// One parameter's step: its value, gradient and state in the work dtype; the
// update writes them back with copy_ (handles keep their identity).
struct Step {
  Tensor p, g;                // p in the work dtype; g already negated for maximize
  std::int64_t step;          // the parameter's count, this step included
  bool created;               // the state was made this step
  std::vector<Tensor> state;  // the rule's state tensors, in state_names() order
};

void check_nonneg(std::string_view who, const char* name, double v) {
  if (!(v >= 0)) throw Error(fmt::format("{}: {} must be >= 0, got {}", who, name, v));
}
void check_beta(std::string_view who, const char* name, double v) {
  if (!(v >= 0 && v < 1))
    throw Error(fmt::format("{}: {} must be in [0, 1), got {}", who, name, v));
}

Tensor with_decay(const Tensor& g, const Tensor& p, double wd) {
  return wd != 0 ? add(g, mul(p, wd)) : g;  // grad.add(param, alpha=weight_decay)
}

template <> struct Rule<RMSpropOptions> {
  static constexpr const char* kind = "rmsprop";
  static constexpr const char* name = "RMSprop";
  static std::vector<std::string> state() { return {"square_avg", "momentum_buffer", "grad_avg"}; }
  static void check(const RMSpropOptions& o, std::string_view who) {
    check_nonneg(who, "lr", o.lr), check_nonneg(who, "eps", o.eps);
    check_nonneg(who, "momentum", o.momentum), check_nonneg(who, "weight_decay", o.weight_decay);
    check_nonneg(who, "alpha", o.alpha);
  }
  static bool uses(const RMSpropOptions& o, std::size_t k) {
    return k == 0 || (k == 1 && o.momentum > 0) || (k == 2 && o.centered);
  }
  static void update(const RMSpropOptions& o, Step& s, std::vector<Tensor>& out) {
    Tensor g = with_decay(s.g, s.p, o.weight_decay);
    Tensor sq = addcmul(mul(s.state[0], o.alpha), g, g, 1 - o.alpha);
    out[0] = sq;
    Tensor avg;
    if (o.centered) {
      Tensor ga = add(mul(s.state[2], o.alpha), mul(g, 1 - o.alpha));
      out[2] = ga;
      avg = sqrt(addcmul(sq, ga, ga, -1));
    } else {
      avg = sqrt(sq);
    }
    avg = add(avg, o.eps);
    if (o.momentum > 0) {
      Tensor buf = addcdiv(mul(s.state[1], o.momentum), g, avg);
      out[1] = buf;
      s.p = add(s.p, mul(buf, -o.lr));
    } else {
      s.p = addcdiv(s.p, g, avg, -o.lr);
    }
  }
};

template <> struct Rule<AdagradOptions> {
  static constexpr const char* kind = "adagrad";
  static constexpr const char* name = "Adagrad";
  static std::vector<std::string> state() { return {"sum"}; }
  static void check(const AdagradOptions& o, std::string_view who) {
    check_nonneg(who, "lr", o.lr), check_nonneg(who, "lr_decay", o.lr_decay);
    check_nonneg(who, "weight_decay", o.weight_decay), check_nonneg(who, "eps", o.eps);
    check_nonneg(who, "initial_accumulator_value", o.initial_accumulator_value);
  }
  static bool uses(const AdagradOptions&, std::size_t) { return true; }
  static void update(const AdagradOptions& o, Step& s, std::vector<Tensor>& out) {
    Tensor g = with_decay(s.g, s.p, o.weight_decay);
    const double clr = o.lr / (1 + double(s.step - 1) * o.lr_decay);
    Tensor sum = s.created ? full_like(s.state[0], o.initial_accumulator_value) : s.state[0];
    sum = addcmul(sum, g, g, 1);
    out[0] = sum;
    s.p = addcdiv(s.p, g, add(sqrt(sum), o.eps), -clr);
  }
};

template <> struct Rule<AdamaxOptions> {
  static constexpr const char* kind = "adamax";
  static constexpr const char* name = "Adamax";
  static std::vector<std::string> state() { return {"exp_avg", "exp_inf"}; }
  static void check(const AdamaxOptions& o, std::string_view who) {
    check_nonneg(who, "lr", o.lr), check_nonneg(who, "eps", o.eps);
    check_nonneg(who, "weight_decay", o.weight_decay);
    check_beta(who, "beta1", o.beta1), check_beta(who, "beta2", o.beta2);
  }
  static bool uses(const AdamaxOptions&, std::size_t) { return true; }
  static void update(const AdamaxOptions& o, Step& s, std::vector<Tensor>& out) {
    Tensor g = with_decay(s.g, s.p, o.weight_decay);
    Tensor m = add(mul(s.state[0], o.beta1), mul(g, 1 - o.beta1));
    Tensor inf = maximum(mul(s.state[1], o.beta2), add(abs(g), o.eps));
    out[0] = m, out[1] = inf;
    const double clr = o.lr / (1 - std::pow(o.beta1, double(s.step)));
    s.p = addcdiv(s.p, m, inf, -clr);
  }
};

template <> struct Rule<NAdamOptions> {
  static constexpr const char* kind = "nadam";
  static constexpr const char* name = "NAdam";
  static std::vector<std::string> state() { return {"exp_avg", "exp_avg_sq"}; }
  static void check(const NAdamOptions& o, std::string_view who) {
    check_nonneg(who, "lr", o.lr), check_nonneg(who, "eps", o.eps);
    check_nonneg(who, "weight_decay", o.weight_decay);
    check_nonneg(who, "momentum_decay", o.momentum_decay);
    check_beta(who, "beta1", o.beta1), check_beta(who, "beta2", o.beta2);
  }
  static bool uses(const NAdamOptions&, std::size_t) { return true; }
  static double mu_at(const NAdamOptions& o, std::int64_t t) {
    return o.beta1 * (1. - 0.5 * std::pow(0.96, double(t) * o.momentum_decay));
  }
  // mu_1 * ... * mu_step, multiplied in f32 in step order as PyTorch's f32 tensor is, from
  // prefix products kept per thread and (beta1, momentum_decay): a step costs O(1), not
  // O(step). A product that reached 0 stays 0, so the table stops growing there.
  static float mu_product_at(const NAdamOptions& o, std::int64_t step) {
    thread_local std::map<std::pair<double, double>, std::vector<float>> tables;
    std::vector<float>& prefix = tables[{o.beta1, o.momentum_decay}];
    if (prefix.empty()) prefix.push_back(1.f);
    while (std::int64_t(prefix.size()) <= step && prefix.back() != 0.f)
      prefix.push_back(prefix.back() * float(mu_at(o, std::int64_t(prefix.size()))));
    return step < std::int64_t(prefix.size()) ? prefix[std::size_t(step)] : 0.f;
  }
  static void update(const NAdamOptions& o, Step& s, std::vector<Tensor>& out) {
    const double bias_correction2 = 1 - std::pow(o.beta2, double(s.step));
    Tensor g = with_decay(s.g, s.p, o.weight_decay);
    const float mu_product = mu_product_at(o, s.step);
    const double mu = mu_at(o, s.step), mu_next = mu_at(o, s.step + 1);
    const float mu_product_next = mu_product * float(mu) * float(mu_next);
    Tensor m = add(mul(s.state[0], o.beta1), mul(g, 1 - o.beta1));
    Tensor v = addcmul(mul(s.state[1], o.beta2), g, g, 1 - o.beta2);
    out[0] = m, out[1] = v;
    Tensor denom = add(sqrt(div(v, bias_correction2)), o.eps);
    s.p = addcdiv(s.p, g, denom, -o.lr * (1. - mu) / (1. - double(mu_product)));
    s.p = addcdiv(s.p, m, denom, -o.lr * mu_next / (1. - double(mu_product_next)));
  }
};

template <> struct Rule<RAdamOptions> {
  static constexpr const char* kind = "radam";
  static constexpr const char* name = "RAdam";
  static std::vector<std::string> state() { return {"exp_avg", "exp_avg_sq"}; }
  static void check(const RAdamOptions& o, std::string_view who) {
    check_nonneg(who, "lr", o.lr), check_nonneg(who, "eps", o.eps);
    check_nonneg(who, "weight_decay", o.weight_decay);
    check_beta(who, "beta1", o.beta1), check_beta(who, "beta2", o.beta2);
  }
  static bool uses(const RAdamOptions&, std::size_t) { return true; }
  static void update(const RAdamOptions& o, Step& s, std::vector<Tensor>& out) {
    const double step = double(s.step);
    const double bc1 = 1 - std::pow(o.beta1, step), bc2 = 1 - std::pow(o.beta2, step);
    Tensor g = with_decay(s.g, s.p, o.weight_decay);
    Tensor m = add(mul(s.state[0], o.beta1), mul(g, 1 - o.beta1));
    Tensor v = addcmul(mul(s.state[1], o.beta2), g, g, 1 - o.beta2);
    out[0] = m, out[1] = v;
    Tensor corrected = div(m, bc1);
    const double rho_inf = 2 / (1 - o.beta2) - 1;
    const double rho_t = rho_inf - 2 * step * std::pow(o.beta2, step) / bc2;
    if (rho_t > 5.) {
      const double rect =
          std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
      Tensor adaptive = div(Scalar(std::sqrt(bc2)), add(sqrt(v), o.eps));
      s.p = sub(s.p, mul(mul(mul(corrected, o.lr), adaptive), rect));
    } else {
      s.p = sub(s.p, mul(corrected, o.lr));
    }
  }
};

// The rule's options' JSON, and back.
template <typename O> json to_json(O o) {
  json j = json::object();
  o.each([&](const char* key, auto& v) { j[key] = v; });
  return j;
}
template <typename O> O from_json(const json& j, const std::string& where) {
  O o;
  o.each([&](const char* key, auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, bool>)
      v = detail::json_bool(j, key, where);
    else
      v = detail::json_number(j, key, where);
  });
  return o;
}

}  // namespace

template <typename O>
ElementwiseOptimizer<O>::ElementwiseOptimizer(const std::vector<Tensor>& params, O options)
    : ElementwiseOptimizer(
          std::vector<Group>{Group{detail::require_params(params, Rule<O>::name), std::nullopt}},
          options) {}

template <typename O>
ElementwiseOptimizer<O>::ElementwiseOptimizer(const std::vector<Group>& groups, O defaults)
    : Optimizer(Rule<O>::kind), defaults_(defaults) {
  Rule<O>::check(defaults_, detail::who(Rule<O>::name, std::nullopt));
  if (groups.empty())
    throw Error(fmt::format("{}: got no parameter groups; pass at least one", Rule<O>::name));
  for (const Group& g : groups) add_param_group(g);
}

template <typename O> void ElementwiseOptimizer<O>::add_param_group(const Group& group) {
  O o = group.options.value_or(defaults_);
  Rule<O>::check(o, detail::who(Rule<O>::name, num_param_groups()));
  add_params(group.params);
  options_.push_back(o);
}

template <typename O> O& ElementwiseOptimizer<O>::options(std::size_t group) {
  group_indices(group);  // the range check
  return options_[group];
}
template <typename O> const O& ElementwiseOptimizer<O>::options(std::size_t group) const {
  group_indices(group);
  return options_[group];
}

template <typename O> void ElementwiseOptimizer<O>::check_options(std::size_t group) const {
  Rule<O>::check(options_[group], detail::who(Rule<O>::name, group));
}

template <typename O> void ElementwiseOptimizer<O>::update(std::size_t group,
                                                           const std::vector<std::size_t>& params,
                                                           bool) {
  const O& o = options_[group];
  const std::vector<std::string> names = Rule<O>::state();
  for (std::size_t i : params) {
    const Tensor& param = parameters()[i];
    const DType w = compute_dtype(param.dtype());
    Step s{param.to(w), param.grad().to(w), state(i).step + 1, false, {}};
    if constexpr (requires { o.maximize; })
      if (o.maximize) s.g = neg(s.g);
    std::vector<Tensor> handles(names.size());
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (!Rule<O>::uses(o, k)) {
        s.state.emplace_back();
        continue;
      }
      bool created = false;
      handles[k] = state_tensor(i, names[k], &created);
      s.created = s.created || created;
      s.state.push_back(handles[k].to(w));
    }
    std::vector<Tensor> out(names.size());
    Rule<O>::update(o, s, out);
    ++state(i).step;
    for (std::size_t k = 0; k < names.size(); ++k)
      if (out[k].defined()) handles[k].copy_(out[k]);
    Tensor p = param;
    p.copy_(s.p);
  }
}

template <typename O> std::vector<std::string> ElementwiseOptimizer<O>::state_names() const {
  return Rule<O>::state();
}

template <typename O>
std::string ElementwiseOptimizer<O>::check_saved_state(const std::vector<std::string>&,
                                                       bool) const {
  return {};  // each state tensor is made when missing
}

template <typename O> std::string ElementwiseOptimizer<O>::options_json(std::size_t group) const {
  return to_json(options_[group]).dump();
}

template <typename O> std::function<void()> ElementwiseOptimizer<O>::parse_options(
    const std::vector<std::string>& groups) {
  std::vector<O> parsed;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string where = fmt::format("param_groups[{}]", g);
    O o = from_json<O>(json::parse(groups[g]), where);
    Rule<O>::check(o, fmt::format("{}.load_state_dict: {}", Rule<O>::name, where));
    parsed.push_back(o);
  }
  return [this, parsed = std::move(parsed)] { options_ = parsed; };
}

template class ElementwiseOptimizer<RMSpropOptions>;
template class ElementwiseOptimizer<AdagradOptions>;
template class ElementwiseOptimizer<AdamaxOptions>;
template class ElementwiseOptimizer<NAdamOptions>;
template class ElementwiseOptimizer<RAdamOptions>;

}  // namespace ferry::optim
