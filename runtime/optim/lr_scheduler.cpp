// runtime/optim/lr_scheduler.cpp — ferry/lr_scheduler.hpp: PyTorch 1.13's
// schedules (torch/optim/lr_scheduler.py), their chainable get_lr and closed
// forms written out in the same operation order, so the rates match to the bit.
#include "ferry/lr_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ferry/error.hpp"

namespace ferry::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

// ---- the base
// The base rates are the optimizer's initial_lrs, which the first schedule
// records: a second schedule over the same optimizer starts from them, not
// from the rate the first one has set (PyTorch's initial_lr).
LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  std::vector<double>& initial = optimizer.initial_lrs();
  if (initial.size() != optimizer.num_param_groups()) {
    initial.clear();
    for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g)
      initial.push_back(optimizer.lr(g));
  }
  base_lrs_ = initial;
}

void LRScheduler::initial_step() { step(); }

void LRScheduler::set_rates(const std::vector<double>& rates) {
  for (std::size_t g = 0; g < rates.size(); ++g) optimizer_.set_lr(g, rates[g]);
  last_lrs_ = rates;
}

void LRScheduler::step() {
  ++last_epoch_;
  std::vector<double> rates;
  for (std::size_t g = 0; g < base_lrs_.size(); ++g)
    rates.push_back(chained_lr(g, optimizer_.lr(g)));
  set_rates(rates);
}

double LRScheduler::closed_form_lr(std::size_t group, std::int64_t epoch) const {
  return epoch == 0 ? base_lrs_[group] : chained_lr(group, base_lrs_[group]);
}

void LRScheduler::step_to(std::int64_t epoch) {
  last_epoch_ = epoch;
  std::vector<double> rates;
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) rates.push_back(closed_form_lr(g, epoch));
  set_rates(rates);
}

SchedulerState LRScheduler::state_dict() const { return {last_epoch_, base_lrs_, last_lrs_, {}}; }

void LRScheduler::load_state_dict(const SchedulerState& state) {
  if (state.base_lrs.size() != base_lrs_.size())
    throw Error(fmt::format("lr scheduler: the state has {} param groups, this optimizer {}",
                            state.base_lrs.size(), base_lrs_.size()));
  last_epoch_ = state.last_epoch;
  base_lrs_ = state.base_lrs;
  last_lrs_ = state.last_lrs;
}

// ---- the schedules
StepLR::StepLR(Optimizer& o, std::int64_t step_size, double gamma)
    : LRScheduler(o), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0)
    throw ValueError(fmt::format("StepLR: step_size must be > 0, got {}", step_size));
  initial_step();
}
double StepLR::chained_lr(std::size_t, double current) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current;
  return current * gamma_;
}
double StepLR::closed_form_lr(std::size_t g, std::int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma_, double(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& o, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(o), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}
double MultiStepLR::chained_lr(std::size_t, double current) const {
  const auto n = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  return n == 0 ? current : current * std::pow(gamma_, double(n));
}
double MultiStepLR::closed_form_lr(std::size_t g, std::int64_t epoch) const {
  const auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lrs_[g] * std::pow(gamma_, double(passed));
}

ExponentialLR::ExponentialLR(Optimizer& o, double gamma) : LRScheduler(o), gamma_(gamma) {
  initial_step();
}
double ExponentialLR::chained_lr(std::size_t, double current) const {
  return last_epoch_ == 0 ? current : current * gamma_;
}
double ExponentialLR::closed_form_lr(std::size_t g, std::int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma_, double(epoch));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, std::int64_t t_max, double eta_min)
    : LRScheduler(o), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0)
    throw ValueError(fmt::format("CosineAnnealingLR: T_max must be > 0, got {}", t_max));
  initial_step();
}
double CosineAnnealingLR::chained_lr(std::size_t g, double current) const {
  const double e = double(last_epoch_), t = double(t_max_);
  if (last_epoch_ == 0) return current;
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)
    return current + (base_lrs_[g] - eta_min_) * (1 - std::cos(kPi / t)) / 2;
  return (1 + std::cos(kPi * e / t)) / (1 + std::cos(kPi * (e - 1) / t)) * (current - eta_min_) +
         eta_min_;
}
double CosineAnnealingLR::closed_form_lr(std::size_t g, std::int64_t epoch) const {
  return eta_min_ +
         (base_lrs_[g] - eta_min_) * (1 + std::cos(kPi * double(epoch) / double(t_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& o, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(o),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1) || !(end_factor >= 0 && end_factor <= 1))
    throw ValueError(fmt::format(
        "LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got {} and {}",
        start_factor, end_factor));
  initial_step();
}
double LinearLR::chained_lr(std::size_t, double current) const {
  if (last_epoch_ == 0) return current * start_factor_;
  if (last_epoch_ > total_iters_) return current;
  return current * (1.0 + (end_factor_ - start_factor_) /
                              (double(total_iters_) * start_factor_ +
                               double(last_epoch_ - 1) * (end_factor_ - start_factor_)));
}
double LinearLR::closed_form_lr(std::size_t g, std::int64_t epoch) const {
  return base_lrs_[g] *
         (start_factor_ + (end_factor_ - start_factor_) * double(std::min(total_iters_, epoch)) /
                              double(total_iters_));
}

LambdaLR::LambdaLR(Optimizer& o, std::function<double(std::int64_t)> lambda)
    : LRScheduler(o), lambda_(std::move(lambda)) {
  if (!lambda_) throw Error("LambdaLR: the lambda is empty");
  initial_step();
}
double LambdaLR::chained_lr(std::size_t g, double) const {
  return base_lrs_[g] * lambda_(last_epoch_);
}

OneCycleLR::OneCycleLR(Optimizer& o, double max_lr, std::int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor)
    : LRScheduler(o),
      max_lr_(max_lr),
      pct_start_(pct_start),
      div_factor_(div_factor),
      final_div_factor_(final_div_factor),
      total_steps_(total_steps) {
  if (total_steps <= 0)
    throw ValueError(fmt::format("OneCycleLR: total_steps must be > 0, got {}", total_steps));
  if (!(pct_start >= 0 && pct_start <= 1))
    throw ValueError(fmt::format("OneCycleLR: pct_start must be in [0, 1], got {}", pct_start));
  // PyTorch sets initial_lr = max_lr / div_factor as every group's base.
  for (double& b : base_lrs_) b = max_lr / div_factor;
  o.initial_lrs() = base_lrs_;
  initial_step();
}
double OneCycleLR::chained_lr(std::size_t, double) const {
  if (last_epoch_ > total_steps_)
    throw ValueError(fmt::format("OneCycleLR: stepped {} times, but total_steps is {}",
                                 last_epoch_ + 1, total_steps_));
  const double initial = max_lr_ / div_factor_, min_lr = initial / final_div_factor_;
  struct Phase {
    double end_step, start, end;
  };
  const Phase phases[2] = {{pct_start_ * double(total_steps_) - 1, initial, max_lr_},
                           {double(total_steps_) - 1, max_lr_, min_lr}};
  double start_step = 0, lr = 0;
  const double step = double(last_epoch_);
  for (int i = 0; i < 2; ++i) {
    if (step <= phases[i].end_step || i == 1) {
      const double pct = (step - start_step) / (phases[i].end_step - start_step);
      lr = phases[i].end + (phases[i].start - phases[i].end) / 2.0 * (std::cos(kPi * pct) + 1);
      break;
    }
    start_step = phases[i].end_step;
  }
  return lr;
}

SequentialLR::SequentialLR(Optimizer& o, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(o), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  if (schedulers_.empty() || milestones_.size() + 1 != schedulers_.size())
    throw ValueError(
        fmt::format("SequentialLR: {} schedules need {} milestones, got {}", schedulers_.size(),
                    schedulers_.empty() ? 0 : schedulers_.size() - 1, milestones_.size()));
  for (const auto& s : schedulers_)
    if (&s->optimizer_ != &o) throw Error("SequentialLR: every schedule must drive this optimizer");
  // As PyTorch: the rates back to the first base, each schedule's own first
  // step undone, and the first schedule's first step taken again.
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) o.set_lr(g, schedulers_[0]->base_lrs_[g]);
  base_lrs_ = schedulers_[0]->base_lrs_;
  for (const auto& s : schedulers_) --s->last_epoch_;
  schedulers_[0]->initial_step();
  last_epoch_ = 0;
  last_lrs_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const auto idx = std::size_t(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    schedulers_[idx]->step_to(0);
  else
    schedulers_[idx]->step();
  last_lrs_ = schedulers_[idx]->get_last_lr();
}

SchedulerState SequentialLR::state_dict() const {
  SchedulerState s = LRScheduler::state_dict();
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    s.values[fmt::format("schedule.{}.last_epoch", i)] = double(schedulers_[i]->last_epoch_);
  return s;
}

void SequentialLR::load_state_dict(const SchedulerState& state) {
  LRScheduler::load_state_dict(state);
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    if (auto it = state.values.find(fmt::format("schedule.{}.last_epoch", i));
        it != state.values.end())
      schedulers_[i]->last_epoch_ = std::int64_t(it->second);
}

// ---- ReduceLROnPlateau
ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& o, std::string mode, double factor,
                                     std::int64_t patience, double threshold,
                                     std::string threshold_mode, std::int64_t cooldown,
                                     double min_lr, double eps)
    : optimizer_(o),
      mode_(std::move(mode)),
      threshold_mode_(std::move(threshold_mode)),
      factor_(factor),
      threshold_(threshold),
      min_lr_(min_lr),
      eps_(eps),
      patience_(patience),
      cooldown_(cooldown) {
  if (!(factor < 1.0))
    throw ValueError(fmt::format("ReduceLROnPlateau: factor must be < 1, got {}", factor));
  if (mode_ != "min" && mode_ != "max")
    throw ValueError(fmt::format("ReduceLROnPlateau: mode must be min or max, got {}", mode_));
  if (threshold_mode_ != "rel" && threshold_mode_ != "abs")
    throw ValueError(fmt::format("ReduceLROnPlateau: threshold_mode must be rel or abs, got {}",
                                 threshold_mode_));
  best_ = mode_ == "min" ? std::numeric_limits<double>::infinity()
                         : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::better(double a, double best) const {
  if (mode_ == "min")
    return threshold_mode_ == "rel" ? a < best * (1 - threshold_) : a < best - threshold_;
  return threshold_mode_ == "rel" ? a > best * (threshold_ + 1) : a > best + threshold_;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > patience_) {
    for (std::size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
      const double old_lr = optimizer_.lr(g), new_lr = std::max(old_lr * factor_, min_lr_);
      if (old_lr - new_lr > eps_) optimizer_.set_lr(g, new_lr);
    }
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
}

std::vector<double> ReduceLROnPlateau::get_last_lr() const {
  std::vector<double> r;
  for (std::size_t g = 0; g < optimizer_.num_param_groups(); ++g) r.push_back(optimizer_.lr(g));
  return r;
}

SchedulerState ReduceLROnPlateau::state_dict() const {
  return {last_epoch_,
          {},
          get_last_lr(),
          {{"best", best_},
           {"num_bad_epochs", double(num_bad_epochs_)},
           {"cooldown_counter", double(cooldown_counter_)}}};
}

void ReduceLROnPlateau::load_state_dict(const SchedulerState& s) {
  last_epoch_ = s.last_epoch;
  best_ = s.values.at("best");
  num_bad_epochs_ = std::int64_t(s.values.at("num_bad_epochs"));
  cooldown_counter_ = std::int64_t(s.values.at("cooldown_counter"));
}

}  // namespace ferry::optim
