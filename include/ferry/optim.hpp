// ferry/optim.hpp — optimizers: SGD, Adam, AdamW, RMSprop, Adagrad, Adamax,
// NAdam and RAdam, with PyTorch's update rules and defaults.
//
// Note [Optimizers]
// An optimizer holds parameter groups (each a list of leaf tensors that
// require grad, with its own options) and per-parameter state: a step count,
// kept on the host, and state tensors (exp_avg, exp_avg_sq, max_exp_avg_sq,
// momentum_buffer) made at the parameter's first step on the parameter's own
// device and dtype. step() updates every parameter that has a gradient, in
// place: parameters and state tensors keep their identity (a Tensor handle
// taken before a step sees the new values), their storages' versions are
// bumped (autograd then refuses a backward() that saved a parameter before
// the step), and no data goes through the host. Parameters without a
// gradient are skipped and their step count does not advance, as in PyTorch.
//
// The math is PyTorch 1.13's `_single_tensor_sgd` / `_single_tensor_adam` /
// `_single_tensor_adamw` (per-element pseudo-code in docs/kernel-contract.md,
// "sgd_step, adam_step"); bias corrections are computed on the host in double
// from each parameter's own step count. Where the device has the fused kernel
// (`sgd_step`, `adam_step`) and every parameter of a group on that device is
// contiguous with one dtype, one kernel call updates all of them; otherwise
// the same update runs as element-wise ops, in PyTorch's order of operations.
// f16 and bf16 parameters are updated in f32 and rounded once on store, on
// both paths (Note [16-bit optimizer math] in runtime/optim/optimizer.cpp).
//
// State is held as Tensor handles, never as raw memory: when the transfer
// planner moves a parameter's and its state's storages to another device
// (Storage::exchange), the optimizer keeps working there.
//
// Thread-compatibility: an optimizer is used from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/op.hpp"
#include "ferry/state_dict.hpp"
#include "ferry/tensor.hpp"

namespace ferry::optim {

// PyTorch's torch.optim.SGD arguments and defaults (lr has no default there;
// libtorch's is 1e-3). nesterov needs momentum > 0 and dampening == 0.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  // Unset: the fused kernel where the device has it; false: element-wise ops;
  // true: the fused kernel or an UnsupportedError from step().
  std::optional<bool> fused;
};

// torch.optim.Adam: betas = (beta1, beta2), each in [0, 1); weight_decay is
// added to the gradient (L2 regularisation).
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  std::optional<bool> fused;  // as SGDOptions::fused
};

// torch.optim.AdamW: Adam with decoupled weight decay (the parameter is
// multiplied by 1 - lr * weight_decay), whose default is 1e-2.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  std::optional<bool> fused;  // as SGDOptions::fused
};

// A parameter group: its tensors and, optionally, its own options (the
// optimizer's defaults when left out). `{{w1, w2}, SGDOptions{.lr = 0.1}}`.
template <typename Options> struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<Options> options;
};

// What every optimizer shares: groups, per-parameter state, step(),
// zero_grad(), state_dict(). Parameters are numbered over all groups in
// order (group 0's first, ...): that index names their state.
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient. Checks first, before
  // anything is modified: every group's options (they may have been changed
  // since construction), and that each gradient has its parameter's shape
  // (ShapeError), dtype (DTypeError) and device (DeviceMismatchError), and
  // that every state tensor is on its parameter's device. fused = true where
  // the fused kernel cannot run: UnsupportedError. Should a kernel fail during
  // the update itself (out of memory, a lost device), the parameters updated
  // before it keep their update; the others keep their values, step counts
  // and state.
  void step();
  // Clears every parameter's gradient (set_to_none), or fills it with zeros.
  void zero_grad(bool set_to_none = true);

  const std::string& kind() const { return kind_; }  // "sgd", "adam", "adamw"
  std::size_t num_params() const { return params_.size(); }
  std::size_t num_param_groups() const { return groups_.size(); }
  // Every parameter, over all groups in order.
  const std::vector<Tensor>& parameters() const { return params_; }
  std::vector<Tensor> group_parameters(std::size_t group) const;
  // The global index of the k-th parameter of `group`.
  std::size_t param_index(std::size_t group, std::size_t k) const;

  // The learning rate of one group, for LR schedules that work with any
  // optimizer. set_lr(lr) sets every group's. Error for a negative lr.
  double lr(std::size_t group = 0) const;
  void set_lr(std::size_t group, double lr);
  void set_lr(double lr);
  // Each group's rate when the first LR schedule took it over (PyTorch's
  // param_group["initial_lr"]): the base every later schedule starts from.
  // Empty until a schedule sets it.
  std::vector<double>& initial_lrs() { return initial_lrs_; }

  // Note [Master weights]
  // With master weights on, every f16 or bf16 parameter gets an f32 copy, the state
  // "state.{i}.master", made from the parameter at its first step; the rule's state
  // (exp_avg, momentum_buffer, ...) is f32 too. step() widens the gradient, updates the f32
  // copy and rounds it into the parameter, so updates smaller than the parameter's last bit
  // accumulate instead of vanishing (mixed-precision training with 16-bit parameters, as
  // apex's O2). The copy is state like any other: state_dict saves it, load_state_dict
  // restores it, and migrate moves it with the model. Off by default; f32 and f64
  // parameters are unaffected. Error when switched after a step has made state.
  void set_master_weights(bool enabled);
  bool master_weights() const { return master_weights_; }

  // Steps parameter `param` (global index) has taken.
  std::int64_t step_count(std::size_t param) const;
  // Every state tensor, named "state.{param}.{name}" (e.g. "state.3.exp_avg"),
  // in parameter order: what the transfer planner moves with the model. The
  // tensors are the optimizer's own (handles, not copies).
  std::vector<std::pair<std::string, Tensor>> named_state() const;

  // The state as tensors "state.{i}.{name}" (handles to the optimizer's own)
  // plus "state.{i}.step", a 0-d i64 CPU tensor, for every parameter that has
  // state; metadata "optimizer" = kind() and "param_groups" = a JSON array of
  // {"params": [indices], <option>: value, ...}.
  StateDict state_dict() const;
  // Replaces the state and the groups' options with those of `state` (made by
  // state_dict() of an optimizer of the same kind over as many parameters in
  // as many groups; possibly on another device). Everything is checked before
  // anything changes: kind, group count and sizes, option values, every key,
  // every state tensor's shape against its parameter. State tensors are
  // copied onto each parameter's own device and dtype.
  void load_state_dict(const StateDict& state);

 protected:
  explicit Optimizer(std::string kind);

  // What one parameter carries between steps.
  struct ParamState {
    std::int64_t step = 0;
    // name -> tensor, in the order the rule made them.
    std::vector<std::pair<std::string, Tensor>> tensors;
    const Tensor* find(std::string_view name) const;
  };

  // Checks `params` (defined, floating, leaf, requiring grad, not already in
  // this optimizer nor twice in the list) and appends them as a new group.
  // Changes nothing when it throws.
  void add_params(const std::vector<Tensor>& params);
  const std::vector<std::size_t>& group_indices(std::size_t group) const;
  ParamState& state(std::size_t param) { return state_[param]; }
  const ParamState& state(std::size_t param) const { return state_[param]; }
  // The state tensor `name` of a parameter, made (zeros, the parameter's
  // shape, dtype and device) when missing; `created` tells which.
  Tensor state_tensor(std::size_t param, std::string_view name, bool* created = nullptr);
  std::string display_name() const;  // "SGD", "Adam", "AdamW": how messages name us

 private:
  // What each optimizer's rule provides.
  virtual void check_options(std::size_t group) const = 0;  // Error on a bad value
  virtual std::optional<bool> fused_option(std::size_t group) const = 0;
  virtual std::optional<OpId> fused_kernel() const = 0;  // none: element-wise only
  // Updates the parameters `params` (global indices, one device, each with a
  // gradient) of `group`: one fused call when `fused`, else element-wise.
  virtual void update(std::size_t group, const std::vector<std::size_t>& params, bool fused) = 0;
  // The state names a saved state may hold (besides "step"), and whether a
  // parameter's saved state is consistent (an error message, or empty).
  virtual std::vector<std::string> state_names() const = 0;
  virtual std::string check_saved_state(const std::vector<std::string>& names,
                                        bool has_step) const = 0;
  virtual std::string options_json(std::size_t group) const = 0;  // a JSON object
  // Parses and checks one JSON object of options per group; returns what
  // installs them (called once every other check has passed).
  virtual std::function<void()> parse_options(const std::vector<std::string>& groups) = 0;
  virtual double group_lr(std::size_t group) const = 0;
  virtual void set_group_lr(std::size_t group, double lr) = 0;

  // Whether parameter i is updated through an f32 copy (Note [Master weights]).
  bool uses_master(std::size_t i) const;

  std::string kind_;
  bool master_weights_ = false;
  std::vector<double> initial_lrs_;
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  std::vector<std::vector<std::size_t>> groups_;
};

class SGD : public Optimizer {
 public:
  using Options = SGDOptions;
  using Group = ParamGroup<SGDOptions>;
  // Error for bad options, an empty parameter list, or a bad parameter.
  explicit SGD(const std::vector<Tensor>& params, SGDOptions options = {});
  explicit SGD(const std::vector<Group>& groups, SGDOptions defaults = {});
  void add_param_group(const Group& group);
  // A group's options; change them between steps (LR schedules). Checked at
  // the next step().
  SGDOptions& options(std::size_t group = 0);
  const SGDOptions& options(std::size_t group = 0) const;
  const SGDOptions& defaults() const { return defaults_; }

 private:
  void check_options(std::size_t group) const override;
  std::optional<bool> fused_option(std::size_t group) const override;
  std::optional<OpId> fused_kernel() const override { return OpId::sgd_step; }
  void update(std::size_t group, const std::vector<std::size_t>& params, bool fused) override;
  std::vector<std::string> state_names() const override;
  std::string check_saved_state(const std::vector<std::string>& names,
                                bool has_step) const override;
  std::string options_json(std::size_t group) const override;
  std::function<void()> parse_options(const std::vector<std::string>& groups) override;
  double group_lr(std::size_t group) const override { return options(group).lr; }
  void set_group_lr(std::size_t group, double lr) override { options(group).lr = lr; }

  SGDOptions defaults_;
  std::vector<SGDOptions> options_;
};

// Adam and AdamW: one rule, AdamW's weight decay decoupled.
class AdamBase : public Optimizer {
 public:
  // The options of both (AdamOptions and AdamWOptions differ only in a default).
  struct Config {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize;
    std::optional<bool> fused;
  };

 protected:
  AdamBase(std::string kind, bool decoupled) : Optimizer(std::move(kind)), decoupled_(decoupled) {}
  virtual Config config(std::size_t group) const = 0;
  virtual void set_config(std::size_t group, const Config& c) = 0;
  static void check_config(const Config& c, std::string_view who);

 private:
  void check_options(std::size_t group) const override;
  std::optional<bool> fused_option(std::size_t group) const override;
  std::optional<OpId> fused_kernel() const override { return OpId::adam_step; }
  void update(std::size_t group, const std::vector<std::size_t>& params, bool fused) override;
  std::vector<std::string> state_names() const override;
  std::string check_saved_state(const std::vector<std::string>& names,
                                bool has_step) const override;
  std::string options_json(std::size_t group) const override;
  std::function<void()> parse_options(const std::vector<std::string>& groups) override;
  double group_lr(std::size_t group) const override { return config(group).lr; }
  void set_group_lr(std::size_t group, double lr) override;

  bool decoupled_;
};

class Adam : public AdamBase {
 public:
  using Options = AdamOptions;
  using Group = ParamGroup<AdamOptions>;
  explicit Adam(const std::vector<Tensor>& params, AdamOptions options = {});
  explicit Adam(const std::vector<Group>& groups, AdamOptions defaults = {});
  void add_param_group(const Group& group);
  AdamOptions& options(std::size_t group = 0);
  const AdamOptions& options(std::size_t group = 0) const;
  const AdamOptions& defaults() const { return defaults_; }

 private:
  Config config(std::size_t group) const override;
  void set_config(std::size_t group, const Config& c) override;

  AdamOptions defaults_;
  std::vector<AdamOptions> options_;
};

class AdamW : public AdamBase {
 public:
  using Options = AdamWOptions;
  using Group = ParamGroup<AdamWOptions>;
  explicit AdamW(const std::vector<Tensor>& params, AdamWOptions options = {});
  explicit AdamW(const std::vector<Group>& groups, AdamWOptions defaults = {});
  void add_param_group(const Group& group);
  AdamWOptions& options(std::size_t group = 0);
  const AdamWOptions& options(std::size_t group = 0) const;
  const AdamWOptions& defaults() const { return defaults_; }

 private:
  Config config(std::size_t group) const override;
  void set_config(std::size_t group, const Config& c) override;

  AdamWOptions defaults_;
  std::vector<AdamWOptions> options_;
};

// RMSprop, Adagrad, Adamax, NAdam and RAdam: PyTorch 1.13's `_single_tensor_*`
// rules as element-wise ops in PyTorch's order of operations (no fused
// kernel), on any device; options with PyTorch's names and defaults (NAdam
// and RAdam have no maximize there). State tensors have PyTorch's names:
// square_avg, momentum_buffer, grad_avg (RMSprop); sum (Adagrad); exp_avg,
// exp_inf (Adamax); exp_avg, exp_avg_sq (NAdam, RAdam). NAdam's mu_product
// is a function of the step count, computed (in f32, as PyTorch's is) from a
// table of prefix products rather than kept as state.
struct RMSpropOptions {
  double lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
  template <class F> void each(F&& f) {
    f("lr", lr), f("alpha", alpha), f("eps", eps), f("weight_decay", weight_decay);
    f("momentum", momentum), f("centered", centered), f("maximize", maximize);
  }
};
struct AdagradOptions {
  double lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
  bool maximize = false;
  template <class F> void each(F&& f) {
    f("lr", lr), f("lr_decay", lr_decay), f("weight_decay", weight_decay);
    f("initial_accumulator_value", initial_accumulator_value), f("eps", eps);
    f("maximize", maximize);
  }
};
struct AdamaxOptions {
  double lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool maximize = false;
  template <class F> void each(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps);
    f("weight_decay", weight_decay), f("maximize", maximize);
  }
};
struct NAdamOptions {
  double lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3;
  template <class F> void each(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps);
    f("weight_decay", weight_decay), f("momentum_decay", momentum_decay);
  }
};
struct RAdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  template <class F> void each(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps);
    f("weight_decay", weight_decay);
  }
};

// One class for the five (runtime/optim/elementwise_rules.cpp), by options type.
template <typename O> class ElementwiseOptimizer : public Optimizer {
 public:
  using Options = O;
  using Group = ParamGroup<O>;
  // Error for bad options, an empty parameter list, or a bad parameter.
  explicit ElementwiseOptimizer(const std::vector<Tensor>& params, O options = {});
  explicit ElementwiseOptimizer(const std::vector<Group>& groups, O defaults = {});
  void add_param_group(const Group& group);
  O& options(std::size_t group = 0);
  const O& options(std::size_t group = 0) const;
  const O& defaults() const { return defaults_; }

 private:
  void check_options(std::size_t group) const override;
  std::optional<bool> fused_option(std::size_t) const override { return false; }
  std::optional<OpId> fused_kernel() const override { return std::nullopt; }
  void update(std::size_t group, const std::vector<std::size_t>& params, bool fused) override;
  std::vector<std::string> state_names() const override;
  std::string check_saved_state(const std::vector<std::string>& names,
                                bool has_step) const override;
  std::string options_json(std::size_t group) const override;
  std::function<void()> parse_options(const std::vector<std::string>& groups) override;
  double group_lr(std::size_t group) const override { return options(group).lr; }
  void set_group_lr(std::size_t group, double lr) override { options(group).lr = lr; }

  O defaults_;
  std::vector<O> options_;
};

using RMSprop = ElementwiseOptimizer<RMSpropOptions>;
using Adagrad = ElementwiseOptimizer<AdagradOptions>;
using Adamax = ElementwiseOptimizer<AdamaxOptions>;
using NAdam = ElementwiseOptimizer<NAdamOptions>;
using RAdam = ElementwiseOptimizer<RAdamOptions>;
extern template class ElementwiseOptimizer<RMSpropOptions>;
extern template class ElementwiseOptimizer<AdagradOptions>;
extern template class ElementwiseOptimizer<AdamaxOptions>;
extern template class ElementwiseOptimizer<NAdamOptions>;
extern template class ElementwiseOptimizer<RAdamOptions>;

}  // namespace ferry::optim
