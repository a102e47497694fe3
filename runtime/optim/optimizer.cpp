// runtime/optim/optimizer.cpp — what every optimizer shares (Note [Optimizers]
// in ferry/optim.hpp): parameter groups, the checks step() makes before it
// touches anything, choosing the fused or the element-wise path, zero_grad,
// and state_dict / load_state_dict.
//
// Note [16-bit optimizer math]
// The fused kernels compute in float and round f16/bf16 values once on store
// (docs/kernel-contract.md). The element-wise path does the same: it widens a
// 16-bit parameter, its gradient and its state to f32, runs the update there
// and copies the results back into the 16-bit tensors. Doing the element-wise
// ops on the 16-bit tensors themselves would round every intermediate and every
// scalar (lr = 1e-3 is not an f16 number), so the two paths would disagree and
// a small lr would stall against f16's coarse steps. State tensors still have
// the parameter's dtype, as in PyTorch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/optim.hpp"
#include "memory_format_internal.hpp"
#include "optim/optim_internal.hpp"

namespace ferry::optim {

namespace detail {

Tensor laid_out_as(const Tensor& t, const Tensor& param) {
  return t.contiguous(param.suggest_memory_format());
}

Tensor empty_laid_out_as(const Tensor& param, DType dtype) {
  return ferry::detail::as_layout_of(
      empty({param.numel()}, {.dtype = dtype, .device = param.device()}), param);
}

void run_fused(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
               const Attrs& attrs) {
  // Where a tensor is channels-last, each tensor as a 1-D run of its memory (Note [Fused updates
  // and memory formats]); else the tensors as they are.
  const auto order = [](const Tensor& t) {
    return ferry::detail::channels_last_order(t.sizes(), {&t});
  };
  const auto channels_last = [&](const std::vector<Tensor>& ts) {
    return std::any_of(ts.begin(), ts.end(), [&](const Tensor& t) { return order(t).has_value(); });
  };
  if (!channels_last(inputs) && !channels_last(outputs)) {
    ferry::detail::run_kernel(op, inputs, outputs, attrs);
  } else {
    const auto flat = [&](const std::vector<Tensor>& ts) {
      std::vector<Tensor> out;
      out.reserve(ts.size());
      for (const Tensor& t : ts) {
        const std::optional<Shape> o = order(t);
        out.push_back((o ? t.permute(*o) : t).view({-1}));
      }
      return out;
    };
    ferry::detail::run_kernel(op, flat(inputs), flat(outputs), attrs);
  }
  for (const Tensor& t : outputs) t.storage()->bump_version();
}

namespace {
const json& json_field(const json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end())
    throw Error(
        fmt::format("load_state_dict: {} has no option '{}'; the state dict was not made "
                    "by this optimizer's state_dict()",
                    where, key));
  return *it;
}
}  // namespace

double json_number(const json& o, const char* key, const std::string& where) {
  const json& v = json_field(o, key, where);
  if (!v.is_number())
    throw Error(fmt::format("load_state_dict: option '{}' of {} is {}, expected a number", key,
                            where, v.dump()));
  return v.get<double>();
}

bool json_bool(const json& o, const char* key, const std::string& where) {
  const json& v = json_field(o, key, where);
  if (!v.is_boolean())
    throw Error(fmt::format("load_state_dict: option '{}' of {} is {}, expected true or false", key,
                            where, v.dump()));
  return v.get<bool>();
}

std::optional<bool> json_optional_bool(const json& o, const char* key, const std::string& where) {
  const json& v = json_field(o, key, where);
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean())
    throw Error(
        fmt::format("load_state_dict: option '{}' of {} is {}, expected true, false or null", key,
                    where, v.dump()));
  return v.get<bool>();
}

const std::vector<Tensor>& require_params(const std::vector<Tensor>& params, std::string_view who) {
  if (params.empty())
    throw Error(
        fmt::format("{}: got an empty parameter list; pass the tensors to optimize (e.g. "
                    "model.parameters())",
                    who));
  return params;
}

std::string who(std::string_view optimizer, std::optional<std::size_t> group) {
  return group ? fmt::format("{} (param group {})", optimizer, *group)
               : fmt::format("{} (defaults)", optimizer);
}

}  // namespace detail

using detail::json;

Optimizer::Optimizer(std::string kind) : kind_(std::move(kind)) {}
Optimizer::~Optimizer() = default;

std::string Optimizer::display_name() const {
  if (kind_ == "sgd") return "SGD";
  if (kind_ == "adam") return "Adam";
  if (kind_ == "adamw") return "AdamW";
  if (kind_ == "rmsprop") return "RMSprop";
  if (kind_ == "adagrad") return "Adagrad";
  if (kind_ == "adamax") return "Adamax";
  if (kind_ == "nadam") return "NAdam";
  if (kind_ == "radam") return "RAdam";
  return kind_;
}

const Tensor* Optimizer::ParamState::find(std::string_view name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

// ---------------------------------------------------------------- groups

void Optimizer::add_params(const std::vector<Tensor>& params) {
  const std::string name = display_name();
  const std::size_t g = groups_.size();
  std::unordered_map<const TensorImpl*, std::pair<std::size_t, std::size_t>> seen;  // group, k
  for (std::size_t gi = 0; gi < groups_.size(); ++gi)
    for (std::size_t k = 0; k < groups_[gi].size(); ++k)
      seen.emplace(params_[groups_[gi][k]].impl_ptr().get(), std::pair{gi, k});
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Tensor& t = params[k];
    if (!t.defined())
      throw Error(
          fmt::format("{}: parameter {} of param group {} is an undefined tensor; pass the "
                      "tensors to optimize (e.g. model.parameters())",
                      name, k, g));
    if (!is_floating(t.dtype()))
      throw DTypeError(fmt::format(
          "{}: parameter {} of param group {} is {} (shape {}); only floating tensors (f32, f16, "
          "bf16, f64) can be optimized",
          name, k, g, dtype_name(t.dtype()), shape_str(t.sizes())));
    if (!t.is_leaf())
      throw Error(fmt::format(
          "{}: parameter {} of param group {} is not a leaf tensor (it is the result of {}); an "
          "optimizer updates leaves: pass the tensor requires_grad_() was called on, or "
          "x.detach().requires_grad_()",
          name, k, g, t.grad_fn_name()));
    if (!t.requires_grad())
      throw Error(
          fmt::format("{}: parameter {} of param group {} (shape {}) does not require grad, "
                      "so it would never get a gradient; call requires_grad_() on it "
                      "first, or leave it out",
                      name, k, g, shape_str(t.sizes())));
    auto [it, inserted] = seen.emplace(t.impl_ptr().get(), std::pair{g, k});
    if (!inserted)
      throw Error(fmt::format(
          "{}: parameter {} of param group {} is also parameter {} of param group {}; a tensor "
          "may appear in only one group, once (a tied parameter is one tensor: list it once)",
          name, k, g, it->second.second, it->second.first));
  }
  std::vector<std::size_t> indices;
  for (const Tensor& t : params) {
    indices.push_back(params_.size());
    params_.push_back(t);
    state_.emplace_back();
  }
  groups_.push_back(std::move(indices));
}

const std::vector<std::size_t>& Optimizer::group_indices(std::size_t group) const {
  if (group >= groups_.size())
    throw Error(fmt::format("{}: param group {} does not exist (there are {})", display_name(),
                            group, groups_.size()));
  return groups_[group];
}

std::vector<Tensor> Optimizer::group_parameters(std::size_t group) const {
  std::vector<Tensor> out;
  for (std::size_t i : group_indices(group)) out.push_back(params_[i]);
  return out;
}

std::size_t Optimizer::param_index(std::size_t group, std::size_t k) const {
  const auto& g = group_indices(group);
  if (k >= g.size())
    throw Error(fmt::format("{}: param group {} has {} parameters, there is no parameter {}",
                            display_name(), group, g.size(), k));
  return g[k];
}

double Optimizer::lr(std::size_t group) const {
  group_indices(group);
  return group_lr(group);
}

void Optimizer::set_lr(std::size_t group, double lr) {
  group_indices(group);
  if (!(lr >= 0))
    throw Error(fmt::format("{}: set_lr({}, {}): the learning rate must be >= 0", display_name(),
                            group, lr));
  set_group_lr(group, lr);
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0))
    throw Error(fmt::format("{}: set_lr({}): the learning rate must be >= 0", display_name(), lr));
  for (std::size_t g = 0; g < groups_.size(); ++g) set_group_lr(g, lr);
}

std::int64_t Optimizer::step_count(std::size_t param) const {
  if (param >= params_.size())
    throw Error(fmt::format("{}: step_count({}): there are {} parameters", display_name(), param,
                            params_.size()));
  return state_[param].step;
}

Tensor Optimizer::state_tensor(std::size_t param, std::string_view name, bool* created) {
  ParamState& s = state_[param];
  if (const Tensor* t = s.find(name)) {
    if (created) *created = false;
    return *t;
  }
  // zeros_like(param, memory_format=preserve): contiguous, or channels-last for a channels-last
  // parameter (Note [Fused updates and memory formats]); contiguous for any other strides.
  const Tensor& p = params_[param];
  Tensor t = detail::empty_laid_out_as(p, p.dtype()).zero_();
  s.tensors.emplace_back(std::string(name), t);
  if (created) *created = true;
  return t;
}

// ---------------------------------------------------------------- step

// Master weights (Note [Master weights]) apply to the 16-bit floats.
bool Optimizer::uses_master(std::size_t i) const {
  return master_weights_ && is_reduced_float(params_[i].dtype());
}

void Optimizer::set_master_weights(bool enabled) {
  if (enabled == master_weights_) return;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const DType dt = params_[i].dtype();
    if (is_reduced_float(dt) && !state_[i].tensors.empty())
      throw Error(fmt::format(
          "{}.set_master_weights: parameter {} already has state in {}; switch master weights "
          "before the first step",
          display_name(), i, dtype_name(dt)));
  }
  master_weights_ = enabled;
}

namespace {

// During one step, the f32 master copies stand in for their 16-bit parameters (Note [Master
// weights]): params[i] is the copy, with the widened gradient, so the checks and the rules
// see an f32 parameter; write_back() rounds each copy into its parameter, and the destructor
// puts the parameters back.
class MasterSwap {
 public:
  explicit MasterSwap(std::vector<Tensor>& params) : params_(params) {}
  ~MasterSwap() {
    for (auto& [i, p] : swapped_) {
      params_[i].set_grad({});
      std::swap(params_[i], p);
    }
  }
  void swap_in(std::size_t i, Tensor master) {
    if (!master.requires_grad()) master.requires_grad_();
    master.set_grad(params_[i].grad().to(DType::f32));
    swapped_.emplace_back(i, master);
    std::swap(params_[i], swapped_.back().second);
  }
  void write_back() {
    for (auto& [i, p] : swapped_) p.copy_(params_[i]);
  }

 private:
  std::vector<Tensor>& params_;
  std::vector<std::pair<std::size_t, Tensor>> swapped_;  // index, the 16-bit parameter
};

}  // namespace

void Optimizer::step() {
  NoGradGuard no_grad;
  const std::string name = display_name();
  MasterSwap masters(params_);
  struct Bucket {
    std::size_t group;
    Device device;
    std::vector<std::size_t> params;
    bool fused = false;
  };
  // Everything is checked before the first parameter changes. The master copies made on the
  // way (the checks after them see the f32 copies) are dropped again if a check fails, so that
  // a refused step leaves the state as it found it.
  std::vector<Bucket> buckets;
  std::vector<std::size_t> new_masters;
  try {
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      check_options(g);
      const std::size_t first = buckets.size();
      for (std::size_t i : groups_[g]) {
        const Tensor& p = params_[i];
        const Tensor grad = p.grad();
        if (!grad.defined()) continue;
        if (grad.device() != p.device())
          throw DeviceMismatchError(fmt::format(
              "{}.step: the gradient of parameter {} (param group {}) is on {} but the parameter "
              "is on {}; move both to one device (ferry::migrate moves a model with its "
              "gradients), or clear the gradient with zero_grad()",
              name, i, g, grad.device().str(), p.device().str()));
        if (grad.sizes() != p.sizes())
          throw ShapeError(fmt::format(
              "{}.step: the gradient of parameter {} (param group {}) has shape {} but the "
              "parameter has shape {}; set a gradient of the parameter's shape",
              name, i, g, shape_str(grad.sizes()), shape_str(p.sizes())));
        if (grad.dtype() != p.dtype())
          throw DTypeError(fmt::format(
              "{}.step: the gradient of parameter {} (param group {}) is {} but the parameter is "
              "{}; set a gradient of the parameter's dtype",
              name, i, g, dtype_name(grad.dtype()), dtype_name(p.dtype())));
        for (const auto& [sname, t] : state_[i].tensors) {
          if (t.device() != p.device())
            throw DeviceMismatchError(fmt::format(
                "{}.step: state.{}.{} is on {} but its parameter is on {}; move the optimizer "
                "with the model (ferry::migrate(model, optimizer, device))",
                name, i, sname, t.device().str(), p.device().str()));
          if (t.sizes() != p.sizes())
            throw ShapeError(fmt::format(
                "{}.step: state.{}.{} has shape {} but its parameter has shape {}; the parameter "
                "was replaced by one of another shape: make a new optimizer for it",
                name, i, sname, shape_str(t.sizes()), shape_str(p.sizes())));
        }
        if (uses_master(i)) {
          const Tensor* master = state_[i].find("master");
          if (!master) {
            state_[i].tensors.emplace_back("master",
                                           detail::laid_out_as(p.detach().to(DType::f32), p));
            master = &state_[i].tensors.back().second;
            new_masters.push_back(i);
          }
          masters.swap_in(i, *master);
        }
        auto it = std::find_if(buckets.begin() + std::ptrdiff_t(first), buckets.end(),
                               [&](const Bucket& b) { return b.device == p.device(); });
        if (it == buckets.end()) {
          buckets.push_back(Bucket{g, p.device(), {}});
          it = buckets.end() - 1;
        }
        it->params.push_back(i);
      }
      // The fused kernel needs every tensor of the call dense and of one dtype, the state
      // laid out as its parameter (Note [Fused updates and memory formats]); gradients in
      // another layout are copied.
      const std::optional<bool> want = fused_option(g);
      for (std::size_t b = first; b < buckets.size(); ++b) {
        Bucket& bucket = buckets[b];
        const Tensor& p0 = params_[bucket.params[0]];
        std::string why_not;
        const std::optional<OpId> kernel = fused_kernel();
        if (!kernel)
          why_not = fmt::format("{} has no fused kernel", name);
        else if (!p0.storage()->impl().supports(*kernel, p0.dtype()))
          why_not = fmt::format("{} has no '{}' kernel for {}", bucket.device.str(),
                                op_name(*kernel), dtype_name(p0.dtype()));
        for (std::size_t i : bucket.params) {
          if (!why_not.empty()) break;
          const Tensor& p = params_[i];
          const MemoryFormat layout = p.suggest_memory_format();
          if (!p.is_contiguous(layout))
            why_not = fmt::format("parameter {} is not contiguous, nor channels-last (strides {})",
                                  i, shape_str(p.strides()));
          else if (p.dtype() != p0.dtype())
            why_not =
                fmt::format("parameters {} and {} have different dtypes ({} and {})",
                            bucket.params[0], i, dtype_name(p0.dtype()), dtype_name(p.dtype()));
          for (const auto& [sname, t] : state_[i].tensors)
            if (why_not.empty() && (!t.is_contiguous(layout) || t.dtype() != p.dtype()))
              why_not = fmt::format("state.{}.{} is not a {} {} tensor like its parameter", i,
                                    sname, memory_format_name(layout), dtype_name(p.dtype()));
        }
        if (want == true && !why_not.empty())
          throw UnsupportedError(fmt::format(
              "{}.step: param group {} asks for the fused update (fused = true) but on {} {}; "
              "leave `fused` unset to use the fused kernel where it can run, or set it to false",
              name, g, bucket.device.str(), why_not));
        bucket.fused = want.value_or(true) && why_not.empty();
      }
    }
  } catch (...) {
    for (std::size_t i : new_masters)
      std::erase_if(state_[i].tensors, [](const auto& entry) { return entry.first == "master"; });
    throw;
  }
  // The element-wise path goes one parameter at a time, so that a failure (out
  // of memory, a lost device) undoes the bookkeeping of exactly the update
  // that did not happen: the fused kernels check everything before they
  // write, and the element-wise ops write only in their final copy_ calls.
  auto run = [&](std::size_t group, const std::vector<std::size_t>& params, bool fused) {
    std::vector<ParamState> before;
    for (std::size_t i : params) before.push_back(state_[i]);  // handles: cheap
    try {
      update(group, params, fused);
    } catch (...) {
      for (std::size_t k = 0; k < params.size(); ++k) state_[params[k]] = std::move(before[k]);
      throw;
    }
  };
  try {
    for (const Bucket& b : buckets) {
      if (b.fused) {
        run(b.group, b.params, true);
      } else {
        for (std::size_t i : b.params) run(b.group, {i}, false);
      }
    }
  } catch (...) {
    masters.write_back();  // the parameters updated before the failure keep their update
    throw;
  }
  masters.write_back();
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : params_) {
    if (set_to_none) {
      p.set_grad({});
    } else if (Tensor g = p.grad(); g.defined()) {
      g.zero_();
    }
  }
}

// ---------------------------------------------------------------- state

std::vector<std::pair<std::string, Tensor>> Optimizer::named_state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t i = 0; i < state_.size(); ++i)
    for (const auto& [n, t] : state_[i].tensors)
      out.emplace_back(fmt::format("state.{}.{}", i, n), t);
  return out;
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  for (std::size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (s.step == 0 && s.tensors.empty()) continue;
    for (const auto& [n, t] : s.tensors) sd.insert(fmt::format("state.{}.{}", i, n), t);
    sd.insert(fmt::format("state.{}.step", i),
              scalar_tensor(Scalar(static_cast<long long>(s.step)), {.dtype = DType::i64}));
  }
  json groups = json::array();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    json o = json::object();
    o["params"] = groups_[g];
    const json options = json::parse(options_json(g));
    for (const auto& [k, v] : options.items()) o[k] = v;
    groups.push_back(std::move(o));
  }
  sd.metadata["optimizer"] = kind_;
  sd.metadata["param_groups"] = groups.dump();
  return sd;
}

namespace {

// "state.12.exp_avg" -> (12, "exp_avg"); nullopt when the key is not of that form.
std::optional<std::pair<std::size_t, std::string>> parse_state_key(const std::string& key) {
  constexpr std::string_view prefix = "state.";
  if (key.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot + 1 >= key.size())
    return std::nullopt;
  std::size_t index = 0;
  for (std::size_t c = prefix.size(); c < dot; ++c) {
    if (key[c] < '0' || key[c] > '9' || index > (std::size_t(1) << 40)) return std::nullopt;
    index = index * 10 + std::size_t(key[c] - '0');
  }
  std::string name = key.substr(dot + 1);
  if (name.find('.') != std::string::npos) return std::nullopt;
  return std::pair{index, std::move(name)};
}

// The value of a saved step: one element, a whole number >= 0 (PyTorch saves
// it as a float tensor, ferry as i64).
std::int64_t read_step(const std::string& key, const Tensor& t) {
  if (t.numel() != 1)
    throw ShapeError(fmt::format("load_state_dict: '{}' has shape {}; a step is one number", key,
                                 shape_str(t.sizes())));
  double v;
  if (is_floating(t.dtype())) {
    v = t.item<double>();
  } else if (is_integral(t.dtype())) {
    v = double(t.item<std::int64_t>());
  } else {
    throw DTypeError(
        fmt::format("load_state_dict: '{}' is {}; a step is a number", key, dtype_name(t.dtype())));
  }
  if (!(v >= 0) || v != std::floor(v) || v > 9.0e15)
    throw Error(fmt::format("load_state_dict: '{}' is {}; a step is a whole number >= 0", key, v));
  return std::int64_t(v);
}

}  // namespace

void Optimizer::load_state_dict(const StateDict& sd) {
  const std::string name = display_name();
  // 1. Kind and groups.
  auto kind = sd.metadata.find("optimizer");
  auto groups_it = sd.metadata.find("param_groups");
  if (kind == sd.metadata.end() || groups_it == sd.metadata.end())
    throw Error(fmt::format(
        "{}.load_state_dict: the state dict has no '{}' metadata, so it is not an optimizer's "
        "state_dict() (for a checkpoint that holds a model too, pass the optimizer's part: "
        "sd.strip_prefix(\"<its prefix>.\"))",
        name, kind == sd.metadata.end() ? "optimizer" : "param_groups"));
  if (kind->second != kind_)
    throw Error(
        fmt::format("{}.load_state_dict: the state dict was saved by a '{}' optimizer, "
                    "this one is '{}'; load it into a {} optimizer",
                    name, kind->second, kind_, kind->second));
  json groups;
  try {
    groups = json::parse(groups_it->second);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}.load_state_dict: the 'param_groups' metadata is not valid JSON: {}",
                            name, e.what()));
  }
  if (!groups.is_array())
    throw Error(fmt::format("{}.load_state_dict: 'param_groups' must be a JSON array, got {}", name,
                            groups.dump()));
  if (groups.size() != groups_.size())
    throw Error(
        fmt::format("{}.load_state_dict: the state dict has {} param groups but this "
                    "optimizer has {}; build the optimizer with the same groups",
                    name, groups.size(), groups_.size()));
  std::unordered_map<std::size_t, std::size_t> saved_to_ours;
  std::vector<std::string> options;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const json& o = groups[g];
    const json* ids = o.is_object() && o.contains("params") ? &o["params"] : nullptr;
    if (!ids || !ids->is_array())
      throw Error(
          fmt::format("{}.load_state_dict: param_groups[{}] has no 'params' list", name, g));
    if (ids->size() != groups_[g].size())
      throw Error(
          fmt::format("{}.load_state_dict: param group {} has {} parameters in the state "
                      "dict but {} in this optimizer; build the optimizer over the same "
                      "parameters, in the same order",
                      name, g, ids->size(), groups_[g].size()));
    for (std::size_t k = 0; k < ids->size(); ++k) {
      const json& id = (*ids)[k];
      if (!id.is_number_unsigned())
        throw Error(
            fmt::format("{}.load_state_dict: param_groups[{}].params[{}] is {}, expected "
                        "a parameter index >= 0",
                        name, g, k, id.dump()));
      if (!saved_to_ours.emplace(id.get<std::size_t>(), groups_[g][k]).second)
        throw Error(
            fmt::format("{}.load_state_dict: parameter index {} is listed twice in "
                        "'param_groups'",
                        name, id.get<std::size_t>()));
    }
    json rest = o;
    rest.erase("params");
    options.push_back(rest.dump());
  }
  std::function<void()> install_options = parse_options(options);

  // 2. Every entry, against its parameter.
  std::vector<std::string> names = state_names();
  if (master_weights_) names.push_back("master");  // Note [Master weights]
  struct Found {
    std::vector<std::pair<std::string, const Tensor*>> tensors;
    std::optional<std::int64_t> step;
  };
  std::vector<Found> found(params_.size());
  for (const auto& [key, t] : sd) {
    auto parsed = parse_state_key(key);
    if (!parsed)
      throw Error(
          fmt::format("{}.load_state_dict: unexpected key '{}'; an optimizer's state dict "
                      "holds only 'state.<index>.<name>' entries",
                      name, key));
    auto ours = saved_to_ours.find(parsed->first);
    if (ours == saved_to_ours.end())
      throw Error(
          fmt::format("{}.load_state_dict: '{}' is the state of parameter {}, which no "
                      "param group lists",
                      name, key, parsed->first));
    const Tensor& p = params_[ours->second];
    if (!t.defined())
      throw Error(fmt::format("{}.load_state_dict: '{}' is an undefined tensor", name, key));
    if (parsed->second == "step") {
      found[ours->second].step = read_step(key, t);
      continue;
    }
    if (std::find(names.begin(), names.end(), parsed->second) == names.end())
      throw Error(
          fmt::format("{}.load_state_dict: '{}' names state '{}', which {} does not keep "
                      "(it keeps: {}, step)",
                      name, key, parsed->second, name, fmt::join(names, ", ")));
    if (t.sizes() != p.sizes())
      throw ShapeError(
          fmt::format("{}.load_state_dict: '{}' has shape {} but parameter {} has "
                      "shape {}",
                      name, key, shape_str(t.sizes()), ours->second, shape_str(p.sizes())));
    if (!is_floating(t.dtype()))
      throw DTypeError(fmt::format("{}.load_state_dict: '{}' is {}; state tensors are floating",
                                   name, key, dtype_name(t.dtype())));
    found[ours->second].tensors.emplace_back(parsed->second, &t);
  }
  for (std::size_t i = 0; i < found.size(); ++i) {
    std::vector<std::string> present;
    for (const auto& [n, t] : found[i].tensors)
      if (n != "master") present.push_back(n);
    if (present.size() != found[i].tensors.size() && !uses_master(i))
      throw Error(
          fmt::format("{}.load_state_dict: parameter {} is {}, which keeps no f32 master "
                      "copy",
                      name, i, dtype_name(params_[i].dtype())));
    std::string bad = check_saved_state(present, found[i].step.has_value());
    if (!bad.empty())
      throw Error(fmt::format("{}.load_state_dict: the state of parameter {} {}", name, i, bad));
  }

  // 3. Copies on each parameter's device and dtype, then the commit: nothing
  // above changed the optimizer, and nothing below can fail.
  NoGradGuard no_grad;
  std::vector<ParamState> fresh(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    fresh[i].step = found[i].step.value_or(0);
    for (const std::string& n : names)  // the rule's order, whatever the dict's
      for (const auto& [fn, src] : found[i].tensors)
        if (fn == n) {
          Tensor dst = detail::empty_laid_out_as(p, uses_master(i) ? DType::f32 : p.dtype());
          dst.copy_(*src);
          fresh[i].tensors.emplace_back(n, dst);
        }
  }
  state_ = std::move(fresh);
  install_options();
}

}  // namespace ferry::optim
