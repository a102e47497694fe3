// runtime/optim/sgd.cpp — SGD with momentum, dampening, Nesterov, weight decay
// and maximize: PyTorch 1.13's `_single_tensor_sgd`, fused (`sgd_step`) or as
// element-wise ops (docs/kernel-contract.md, "sgd_step, adam_step").
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

// PyTorch's checks (torch/optim/sgd.py), NaN refused too.
void check_sgd(const SGDOptions& o, const std::string& who) {
  if (!(o.lr >= 0)) throw Error(fmt::format("{}: lr must be >= 0, got {}", who, o.lr));
  if (!(o.momentum >= 0))
    throw Error(fmt::format("{}: momentum must be >= 0, got {}", who, o.momentum));
  if (!(o.weight_decay >= 0))
    throw Error(fmt::format("{}: weight_decay must be >= 0, got {}", who, o.weight_decay));
  if (std::isnan(o.dampening)) throw Error(fmt::format("{}: dampening is NaN", who));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw Error(
        fmt::format("{}: nesterov needs momentum > 0 and dampening == 0, got momentum {} "
                    "and dampening {}; set momentum (e.g. 0.9) and dampening 0, or turn "
                    "nesterov off",
                    who, o.momentum, o.dampening));
}

// One parameter, as PyTorch's element-wise ops would do it (in f32 for 16-bit
// parameters: Note [16-bit optimizer math]); results are copied into the
// parameter and its buffer so both keep their identity.
void sgd_elementwise(const SGDOptions& o, Tensor p, const Tensor& grad, Tensor buf,
                     bool init_buffer) {
  const DType w = compute_dtype(p.dtype());
  Tensor pw = p.to(w);
  Tensor d = grad.to(w);
  if (o.maximize) d = neg(d);
  if (o.weight_decay != 0) d = add(d, mul(pw, o.weight_decay));  // d_p.add(param, alpha=wd)
  Tensor new_buf;
  if (o.momentum != 0) {
    // buf = clone(d_p) on its first step, else buf.mul_(momentum).add_(d_p, alpha=1-dampening)
    new_buf = init_buffer ? d : add(mul(buf.to(w), o.momentum), mul(d, 1 - o.dampening));
    d = o.nesterov ? add(d, mul(new_buf, o.momentum)) : new_buf;
  }
  Tensor new_p = add(pw, mul(d, -o.lr));  // param.add_(d_p, alpha=-lr)
  if (new_buf.defined()) buf.copy_(new_buf);
  p.copy_(new_p);
}

}  // namespace

SGD::SGD(const std::vector<Tensor>& params, SGDOptions options)
    : SGD(std::vector<Group>{Group{detail::require_params(params, "SGD"), std::nullopt}}, options) {
}

SGD::SGD(const std::vector<Group>& groups, SGDOptions defaults)
    : Optimizer("sgd"), defaults_(defaults) {
  check_sgd(defaults_, detail::who("SGD", std::nullopt));
  if (groups.empty()) throw Error("SGD: got no parameter groups; pass at least one");
  for (const Group& g : groups) add_param_group(g);
}

void SGD::add_param_group(const Group& group) {
  SGDOptions o = group.options.value_or(defaults_);
  check_sgd(o, detail::who("SGD", num_param_groups()));
  add_params(group.params);
  options_.push_back(o);
}

SGDOptions& SGD::options(std::size_t group) {
  group_indices(group);  // the range check
  return options_[group];
}

const SGDOptions& SGD::options(std::size_t group) const {
  group_indices(group);
  return options_[group];
}

void SGD::check_options(std::size_t group) const {
  check_sgd(options_[group], detail::who("SGD", group));
}

std::optional<bool> SGD::fused_option(std::size_t group) const { return options_[group].fused; }

void SGD::update(std::size_t group, const std::vector<std::size_t>& params, bool fused) {
  const SGDOptions& o = options_[group];
  std::vector<Tensor> grads, outputs, bufs;
  std::vector<std::int64_t> init;
  for (std::size_t i : params) {
    const Tensor& p = parameters()[i];
    bool created = false;
    Tensor buf = o.momentum != 0 ? state_tensor(i, "momentum_buffer", &created) : Tensor();
    ++state(i).step;
    if (fused) {
      grads.push_back(detail::laid_out_as(p.grad(), p));
      outputs.push_back(p);
      if (buf.defined()) outputs.push_back(buf);
      init.push_back(created ? 1 : 0);
    } else {
      sgd_elementwise(o, p, p.grad(), buf, created);
    }
  }
  if (!fused) return;
  Attrs attrs{{"lr", o.lr},
              {"momentum", o.momentum},
              {"dampening", o.dampening},
              {"weight_decay", o.weight_decay},
              {"nesterov", o.nesterov},
              {"maximize", o.maximize}};
  attrs.set("init_buffer", std::move(init));
  detail::run_fused(OpId::sgd_step, grads, outputs, attrs);
}

std::vector<std::string> SGD::state_names() const { return {"momentum_buffer"}; }

std::string SGD::check_saved_state(const std::vector<std::string>&, bool) const {
  return {};  // a buffer and a step may each be there or not (PyTorch's SGD saves no step)
}

std::string SGD::options_json(std::size_t group) const {
  const SGDOptions& o = options_[group];
  json j = {{"lr", o.lr},
            {"momentum", o.momentum},
            {"dampening", o.dampening},
            {"weight_decay", o.weight_decay},
            {"nesterov", o.nesterov},
            {"maximize", o.maximize},
            {"fused", o.fused ? json(*o.fused) : json(nullptr)}};
  return j.dump();
}

std::function<void()> SGD::parse_options(const std::vector<std::string>& groups) {
  std::vector<SGDOptions> parsed;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string where = fmt::format("param_groups[{}]", g);
    const json o = json::parse(groups[g]);
    SGDOptions s;
    s.lr = detail::json_number(o, "lr", where);
    s.momentum = detail::json_number(o, "momentum", where);
    s.dampening = detail::json_number(o, "dampening", where);
    s.weight_decay = detail::json_number(o, "weight_decay", where);
    s.nesterov = detail::json_bool(o, "nesterov", where);
    s.maximize = detail::json_bool(o, "maximize", where);
    s.fused = detail::json_optional_bool(o, "fused", where);
    check_sgd(s, "SGD.load_state_dict: " + where);
    parsed.push_back(s);
  }
  return [this, parsed = std::move(parsed)] { options_ = parsed; };
}

}  // namespace ferry::optim
