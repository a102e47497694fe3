// ferry/lr_scheduler.hpp — learning-rate schedules over any optimizer's param
// groups (Optimizer::lr / set_lr), PyTorch's torch.optim.lr_scheduler:
// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, LambdaLR,
// OneCycleLR, SequentialLR and ReduceLROnPlateau, with PyTorch's defaults.
//
// As in PyTorch, constructing a schedule takes its first step (last_epoch
// 0, the lr of epoch 0 set), and each step() afterwards advances one epoch
// with PyTorch's recursive ("chainable") formula, so the learning rates are
// PyTorch's to the last bit. state_dict() holds the epoch, the base and last
// rates and the schedule's counters; load_state_dict() restores them into a
// schedule built with the same arguments. Host-only: nothing here touches a
// device.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ferry/optim.hpp"

namespace ferry::optim {

struct SchedulerState {
  std::int64_t last_epoch = 0;
  std::vector<double> base_lrs, last_lrs;
  std::map<std::string, double> values;  // a schedule's own counters
};

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual void step();  // one epoch on
  const std::vector<double>& get_last_lr() const { return last_lrs_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  virtual SchedulerState state_dict() const;
  virtual void load_state_dict(const SchedulerState& state);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // PyTorch's _initial_step: epoch 0's rates. Each schedule's constructor
  // calls it last, once its own fields are set.
  void initial_step();
  // The rate of `group` at last_epoch_, from its rate now (the chainable form).
  virtual double chained_lr(std::size_t group, double current) const = 0;
  // The rate at `epoch` from the base rate alone, for SequentialLR's restart
  // at a milestone; by default the chained form from the base rate.
  virtual double closed_form_lr(std::size_t group, std::int64_t epoch) const;
  void set_rates(const std::vector<double>& rates);

  Optimizer& optimizer_;
  std::int64_t last_epoch_ = -1;
  std::vector<double> base_lrs_, last_lrs_;

  friend class SequentialLR;
  void step_to(std::int64_t epoch);  // closed form at `epoch`
};

// lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  double closed_form_lr(std::size_t group, std::int64_t epoch) const override;
  std::int64_t step_size_;
  double gamma_;
};

// lr * gamma at each milestone (a milestone given twice: gamma^2).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  double closed_form_lr(std::size_t group, std::int64_t epoch) const override;
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  double closed_form_lr(std::size_t group, std::int64_t epoch) const override;
  double gamma_;
};

// Cosine from the base rate to eta_min over t_max epochs, and back (SGDR
// without restarts).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  double closed_form_lr(std::size_t group, std::int64_t epoch) const override;
  std::int64_t t_max_;
  double eta_min_;
};

// The factor moves linearly from start_factor to end_factor over total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           std::int64_t total_iters = 5);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  double closed_form_lr(std::size_t group, std::int64_t epoch) const override;
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

// base_lr * lambda(epoch).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(std::int64_t)> lambda);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  std::function<double(std::int64_t)> lambda_;
};

// One cycle over total_steps: from max_lr / div_factor up to max_lr for the
// first pct_start of the steps, then down to that / final_div_factor, by
// cosine. The rates only: PyTorch's momentum cycling is not done (its
// cycle_momentum=False).
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, std::int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25, double final_div_factor = 1e4);

 protected:
  double chained_lr(std::size_t group, double current) const override;
  double max_lr_, pct_start_, div_factor_, final_div_factor_;
  std::int64_t total_steps_;
};

// The schedules one after another, switching at each milestone epoch (and
// restarting the next from its epoch 0).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);
  void step() override;  // the step of the schedule whose turn it is
  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

 protected:
  double chained_lr(std::size_t, double current) const override { return current; }
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

// lr * factor once the metric has not improved for `patience` epochs
// (mode "min" or "max"; threshold relative or absolute), then `cooldown`
// epochs of rest; never below min_lr, nor by less than eps.
class ReduceLROnPlateau {
 public:
  ReduceLROnPlateau(Optimizer& optimizer, std::string mode = "min", double factor = 0.1,
                    std::int64_t patience = 10, double threshold = 1e-4,
                    std::string threshold_mode = "rel", std::int64_t cooldown = 0,
                    double min_lr = 0, double eps = 1e-8);
  void step(double metric);
  std::vector<double> get_last_lr() const;
  SchedulerState state_dict() const;
  void load_state_dict(const SchedulerState& state);

 private:
  bool better(double a, double best) const;
  Optimizer& optimizer_;
  std::string mode_, threshold_mode_;
  double factor_, threshold_, min_lr_, eps_, best_;
  std::int64_t patience_, cooldown_, cooldown_counter_ = 0, num_bad_epochs_ = 0, last_epoch_ = 0;
};

}  // namespace ferry::optim
