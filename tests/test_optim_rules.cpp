// tests/test_optim_rules.cpp — RMSprop, Adagrad, Adamax, NAdam and RAdam
// beyond their PyTorch trajectories (test_optim_pytorch.cpp): a state_dict
// saved mid-run and loaded into a fresh optimizer continues the same run, the
// options are checked, and 16-bit parameters update in f32.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace optim = ferry::optim;

template <typename Opt> void check_resume(typename Opt::Options options) {
  ferry::manual_seed(3);
  Tensor a = ferry::randn({4}).requires_grad_(), b = ferry::randn({2, 3}).requires_grad_();
  Tensor a2 = a.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
  Opt first({a, b}, options);
  auto grads = [](std::int64_t s) {
    ferry::manual_seed(100 + std::uint64_t(s));
    return std::pair{ferry::randn({4}), ferry::randn({2, 3})};
  };
  for (std::int64_t s = 0; s < 3; ++s) {
    auto [ga, gb] = grads(s);
    a.set_grad(ga), b.set_grad(gb);
    first.step();
  }
  Opt second({a2, b2}, typename Opt::Options{});
  {
    ferry::NoGradGuard no_grad;
    a2.copy_(a), b2.copy_(b);
  }
  second.load_state_dict(first.state_dict());
  EXPECT_EQ(second.options().lr, options.lr);
  auto [ga, gb] = grads(3);
  a.set_grad(ga), b.set_grad(gb), a2.set_grad(ga), b2.set_grad(gb);
  first.step();
  second.step();
  EXPECT_EQ(a.to_vector<float>(), a2.to_vector<float>()) << first.kind();
  EXPECT_EQ(b.to_vector<float>(), b2.to_vector<float>()) << first.kind();
  EXPECT_EQ(second.step_count(0), 4);
}

TEST(OptimRules, StateDictResumesTheRun) {
  check_resume<optim::RMSprop>({.lr = 0.01, .momentum = 0.9, .centered = true});
  check_resume<optim::Adagrad>({.lr = 0.1, .lr_decay = 0.01, .initial_accumulator_value = 0.1});
  check_resume<optim::Adamax>({.lr = 0.01, .weight_decay = 0.1});
  check_resume<optim::NAdam>({.lr = 0.01});
  check_resume<optim::RAdam>({.lr = 0.01, .beta2 = 0.9});
}

TEST(OptimRules, OptionsAreChecked) {
  Tensor p = ferry::zeros({2}).requires_grad_();
  EXPECT_THROW(optim::RMSprop({p}, {.lr = -1}), ferry::Error);
  EXPECT_THROW(optim::Adagrad({p}, {.eps = -1}), ferry::Error);
  EXPECT_THROW(optim::Adamax({p}, {.beta1 = 1.0}), ferry::Error);
  EXPECT_THROW(optim::NAdam({p}, {.momentum_decay = -0.1}), ferry::Error);
  EXPECT_THROW(optim::RAdam({p}, {.beta2 = -0.5}), ferry::Error);
  optim::RAdam ok({p});
  ok.options().lr = -0.5;  // checked at the next step, before anything changes
  p.set_grad(ferry::ones({2}));
  EXPECT_THROW(ok.step(), ferry::Error);
  EXPECT_EQ(ok.step_count(0), 0);
}

TEST(OptimRules, HalfParametersUpdateInF32) {
  Tensor h = ferry::full({3}, 1.0, {.dtype = DType::f16}).requires_grad_();
  Tensor f = ferry::full({3}, 1.0).requires_grad_();
  optim::NAdam oh({h}, {.lr = 0.1}), of({f}, {.lr = 0.1});
  h.set_grad(ferry::full({3}, 0.5, {.dtype = DType::f16}));
  f.set_grad(ferry::full({3}, 0.5));
  oh.step();
  of.step();
  EXPECT_EQ(h.to_vector<float>(), f.to(DType::f16).to_vector<float>());
}

}  // namespace
