// The optimizers' update rules (Note [Optimizers] in ferry/optim.hpp) against an
// independent double-precision reference of PyTorch's rules
// (optim_test_util.hpp): every option of SGD, Adam and AdamW, several steps,
// parameters that skip steps, several groups, f32/f16/bf16/f64, the CPU,
// vulkan:0 and cuda:0 (f64 where the device computes it); the fused kernels against the
// element-wise path; in-place updates; zero_grad; LR changes; and convex problems solved end to
// end. The PyTorch numbers themselves are checked in test_optim_pytorch.cpp, state dicts and errors
// in test_optim_state.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "optim_test_util.hpp"

namespace {

using ferry::Device;
using ferry::DType;
using ferry::Tensor;
using ferry_optim_test::Config;
using ferry_optim_test::RefParam;
using ferry_optim_test::Scenario;
namespace optim = ferry::optim;

// Tolerances against the reference, which rounds what it stores to the
// dtype: f32 differs by the rounding of each op; f16/bf16 also by a stored
// value landing on the other side of a rounding boundary (an ulp or two).
struct Tol {
  double rtol, atol_of_max;  // atol = atol_of_max * max |reference value|
};
Tol tol_for(DType dt) {
  switch (dt) {
    case DType::f64:
      return {1e-12, 1e-13};
    case DType::f32:
      return {3e-6, 1e-6};
    case DType::f16:
      return {3e-3, 1e-3};
    default:
      return {2e-2, 8e-3};  // bf16
  }
}

void expect_near_ref(const std::vector<double>& got, const std::vector<double>& want, Tol tol,
                     const std::string& what) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  ferry_test::expect_close(got, want, tol.rtol, tol.atol_of_max * scale, what);
}

// Whether `device` computes `dtype` (f64 where its supports() says so: the CPU
// and CUDA, not Vulkan; 16-bit types where the device has them).
bool device_computes(const Device& device, DType dtype) {
  if (device.is_cpu()) return true;
  if (dtype == DType::f64) {
    const ferry::DeviceImpl& impl = ferry::device_impl(device);
    return impl.supports(ferry::OpId::adam_step, dtype) &&
           impl.supports(ferry::OpId::sgd_step, dtype) && impl.supports(ferry::OpId::mul, dtype);
  }
  const ferry::DeviceInfo info = ferry::device_impl(device).info();
  if (dtype == DType::f16) return info.caps.f16;
  if (dtype == DType::bf16) return info.caps.bf16;
  return true;
}

// Runs the scenario with ferry and with the reference and compares the
// parameters, every state tensor and every step count after each step.
void check_against_reference(const Config& c, DType dtype, const Device& device,
                             std::optional<bool> fused) {
  Scenario run(c, dtype, device, fused);
  std::vector<RefParam> ref(run.params.size());
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i].p = ferry_optim_test::values(run.params[i]);
  const Tol tol = tol_for(dtype);
  for (int s = 0; s < ferry_optim_test::kSteps; ++s) {
    run.step(s);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      if (ferry_optim_test::has_grad(s, i)) {
        // The reference sees the gradient as stored in the dtype.
        std::vector<double> g;
        for (float x : ferry_optim_test::grad_data(s, i))
          g.push_back(ferry_optim_test::round_to(x, dtype));
        ferry_optim_test::ref_step(c, ref[i], g, dtype);
      }
      const std::string at = c.name + " step " + std::to_string(s) + " param " + std::to_string(i);
      EXPECT_EQ(run.opt->step_count(i), ref[i].step) << at;
      expect_near_ref(ferry_optim_test::values(run.params[i]), ref[i].p, tol, at + " param");
      auto check_state = [&](const char* name, const std::vector<double>& want) {
        expect_near_ref(ferry_optim_test::state_values(*run.opt, i, name), want, tol,
                        at + " " + name);
      };
      check_state("exp_avg", ref[i].exp_avg);
      check_state("exp_avg_sq", ref[i].exp_avg_sq);
      check_state("max_exp_avg_sq", ref[i].max_exp_avg_sq);
      check_state("momentum_buffer", ref[i].momentum_buffer);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------- the rules

// One test process per configuration and device (each opens the device once);
// the dtypes it computes and both paths (default, element-wise) run inside.
using RuleParam = std::tuple<Config, std::string>;

class OptimRule : public ::testing::TestWithParam<RuleParam> {};

TEST_P(OptimRule, MatchesDoubleReference) {
  const auto& [config, device_name] = GetParam();
  FERRY_SKIP_UNLESS_DEVICE(device_name);
  const Device device(device_name);
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    if (!device_computes(device, dtype)) continue;  // Vulkan's optimizer kernels take no f64
    for (bool elementwise : {false, true}) {
      SCOPED_TRACE(std::string(ferry::dtype_name(dtype)) +
                   (elementwise ? ", element-wise path" : ", default path"));
      check_against_reference(config, dtype, device,
                              elementwise ? std::optional<bool>(false) : std::nullopt);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

std::string config_device_name(const ::testing::TestParamInfo<RuleParam>& info) {
  const auto& [config, device] = info.param;
  return config.name + "_" + ferry_test::backend_of(device);
}

INSTANTIATE_TEST_SUITE_P(AllOptions, OptimRule,
                         ::testing::Combine(::testing::ValuesIn(ferry_optim_test::all_configs()),
                                            ::testing::ValuesIn(ferry_test::all_device_names())),
                         config_device_name);

// ---------------------------------------------------------------- groups

TEST(Optim, ParamGroupsKeepTheirOwnOptions) {
  for (const std::string& dev_name : ferry_optim_test::test_devices()) {
    const Device dev(dev_name);
    auto p = [&](std::size_t i) {
      return ferry_optim_test::make_param(ferry_optim_test::init_data(i),
                                          ferry_optim_test::kShapes[i], DType::f32, dev);
    };
    std::vector<Tensor> params{p(0), p(1), p(2)};
    // Group 0: params 0 and 1 with momentum; group 1: param 2, plain, added later.
    const optim::SGDOptions a{.lr = 0.05, .momentum = 0.9, .dampening = 0.1};
    const optim::SGDOptions b{.lr = 0.2};
    optim::SGD sgd({{{params[0], params[1]}, a}});
    sgd.add_param_group({{params[2]}, b});
    ASSERT_EQ(sgd.num_param_groups(), 2u);
    EXPECT_EQ(sgd.group_parameters(1).size(), 1u);
    EXPECT_TRUE(sgd.group_parameters(1)[0].is_same(params[2]));
    EXPECT_EQ(sgd.param_index(1, 0), 2u);
    EXPECT_EQ(sgd.options(0).momentum, 0.9);
    EXPECT_EQ(sgd.options(1).momentum, 0.0);

    std::vector<RefParam> ref(3);
    for (std::size_t i = 0; i < 3; ++i) ref[i].p = ferry_optim_test::values(params[i]);
    for (int s = 0; s < 4; ++s) {
      for (std::size_t i = 0; i < 3; ++i) {
        auto g = ferry_optim_test::grad_data(s, i);
        params[i].set_grad(
            ferry_optim_test::make_grad(g, ferry_optim_test::kShapes[i], DType::f32, dev));
        ferry_optim_test::ref_sgd_step(i < 2 ? a : b, ref[i],
                                       std::vector<double>(g.begin(), g.end()), DType::f32);
      }
      sgd.step();
    }
    for (std::size_t i = 0; i < 3; ++i)
      expect_near_ref(ferry_optim_test::values(params[i]), ref[i].p, tol_for(DType::f32),
                      dev_name + " param " + std::to_string(i));
    EXPECT_TRUE(ferry_optim_test::state_values(sgd, 2, "momentum_buffer").empty());

    // Adam with defaults for one group and amsgrad + weight decay in the other.
    std::vector<Tensor> q{p(0), p(1), p(2)};
    const optim::AdamOptions defaults{.lr = 2e-2};
    const optim::AdamOptions other{.lr = 5e-2, .weight_decay = 0.1, .amsgrad = true};
    optim::Adam adam({{{q[0]}, std::nullopt}, {{q[1], q[2]}, other}}, defaults);
    EXPECT_EQ(adam.options(0).lr, 2e-2);
    EXPECT_TRUE(adam.options(1).amsgrad);
    std::vector<RefParam> aref(3);
    for (std::size_t i = 0; i < 3; ++i) aref[i].p = ferry_optim_test::values(q[i]);
    for (int s = 0; s < 4; ++s) {
      for (std::size_t i = 0; i < 3; ++i) {
        auto g = ferry_optim_test::grad_data(s, i);
        q[i].set_grad(
            ferry_optim_test::make_grad(g, ferry_optim_test::kShapes[i], DType::f32, dev));
        ferry_optim_test::ref_adam_step(ferry_optim_test::ref_options(i == 0 ? defaults : other),
                                        aref[i], std::vector<double>(g.begin(), g.end()),
                                        DType::f32);
      }
      adam.step();
    }
    for (std::size_t i = 0; i < 3; ++i)
      expect_near_ref(ferry_optim_test::values(q[i]), aref[i].p, tol_for(DType::f32),
                      dev_name + " adam param " + std::to_string(i));
  }
}

// LR schedules change a group's options between steps.
TEST(Optim, LearningRateChangesBetweenSteps) {
  Tensor w = ferry_optim_test::make_param({1, -2, 3}, {3}, DType::f32, Device::cpu());
  optim::Adam opt({w}, {.lr = 0.1});
  RefParam ref;
  ref.p = {1, -2, 3};
  optim::AdamOptions ro{.lr = 0.1};
  const double lrs[] = {0.1, 0.05, 0.01, 0.2};
  for (int s = 0; s < 4; ++s) {
    if (s == 1) opt.options(0).lr = lrs[s];  // through the options ...
    if (s >= 2) opt.set_lr(lrs[s]);          // ... or the optimizer-wide setter
    EXPECT_EQ(opt.lr(0), lrs[s]);
    ro.lr = lrs[s];
    std::vector<float> g{0.5f, -1.0f + float(s), 2.0f};
    w.set_grad(ferry::tensor(g));
    opt.step();
    ferry_optim_test::ref_adam_step(ferry_optim_test::ref_options(ro), ref,
                                    std::vector<double>(g.begin(), g.end()), DType::f32);
    expect_near_ref(ferry_optim_test::values(w), ref.p, tol_for(DType::f32),
                    "step " + std::to_string(s));
  }
  EXPECT_FERRY_ERROR(opt.set_lr(-1.0), ferry::Error, "Adam", "learning rate", ">= 0");
  EXPECT_FERRY_ERROR(opt.lr(3), ferry::Error, "param group 3", "there are 1");
}

// ---------------------------------------------------------------- fused kernels

// The fused kernels (`adam_step`, `sgd_step`: docs/kernel-contract.md) and the
// element-wise path compute the same update; they differ only in the rounding
// order of an expression or two (PyTorch's addcdiv multiplies before it divides).
class OptimFused : public ::testing::TestWithParam<RuleParam> {};

void check_fused_matches_elementwise(const Config& config, DType dtype, const Device& device) {
  Scenario fused(config, dtype, device, true);
  Scenario elementwise(config, dtype, device, false);
  const Tol tol = dtype == DType::f32 ? Tol{2e-6, 1e-6} : tol_for(dtype);
  for (int s = 0; s < ferry_optim_test::kSteps; ++s) {
    fused.step(s);
    elementwise.step(s);
    for (std::size_t i = 0; i < fused.params.size(); ++i) {
      const std::string at = "step " + std::to_string(s) + " param " + std::to_string(i);
      expect_near_ref(ferry_optim_test::values(fused.params[i]),
                      ferry_optim_test::values(elementwise.params[i]), tol, at);
      auto a = fused.opt->named_state(), b = elementwise.opt->named_state();
      ASSERT_EQ(a.size(), b.size()) << at;
      for (std::size_t k = 0; k < a.size(); ++k) {
        EXPECT_EQ(a[k].first, b[k].first);
        expect_near_ref(ferry_optim_test::values(a[k].second),
                        ferry_optim_test::values(b[k].second), tol, at + " " + a[k].first);
      }
    }
  }
}

TEST_P(OptimFused, MatchesElementwise) {
  const auto& [config, device_name] = GetParam();
  FERRY_SKIP_UNLESS_DEVICE(device_name);
  const Device device(device_name);
  const char* op = config.kind == ferry_optim_test::Kind::sgd ? "sgd_step" : "adam_step";
  ASSERT_TRUE(ferry_optim_test::has_kernel(device, op))
      << device.str() << " has no '" << op
      << "' kernel (docs/kernel-contract.md lists it for every first-party backend)";
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    if (!device_computes(device, dtype)) continue;
    SCOPED_TRACE(std::string(ferry::dtype_name(dtype)));
    check_fused_matches_elementwise(config, dtype, device);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOptions, OptimFused,
                         ::testing::Combine(::testing::ValuesIn(ferry_optim_test::all_configs()),
                                            ::testing::ValuesIn(ferry_test::all_device_names())),
                         config_device_name);

// ---------------------------------------------------------------- in place

TEST(Optim, StepIsInPlaceAndBumpsVersions) {
  for (const auto& config : ferry_optim_test::all_configs()) {
    for (bool elementwise : {false, true}) {
      Scenario run(config, DType::f32, Device::cpu(),
                   elementwise ? std::optional(false) : std::nullopt);
      run.step(0);  // makes the state of params 0 and 1
      auto storages_before = run.params[0].storage();
      auto state_before = run.opt->named_state();
      const auto v0 = run.params[0].storage()->version();
      const auto v2 = run.params[2].storage()->version();
      const auto values2 = ferry_optim_test::values(run.params[2]);
      run.params[2].set_grad({});  // param 2 has no gradient: untouched
      run.params[0].set_grad(ferry::ones_like(run.params[0]));
      run.params[1].set_grad(ferry::ones_like(run.params[1]));
      run.opt->step();
      EXPECT_EQ(run.params[0].storage(), storages_before);
      EXPECT_GT(run.params[0].storage()->version(), v0) << config.name;
      EXPECT_EQ(run.params[2].storage()->version(), v2) << config.name;
      EXPECT_EQ(ferry_optim_test::values(run.params[2]), values2);
      EXPECT_EQ(run.opt->step_count(2), 0);
      auto state_after = run.opt->named_state();
      ASSERT_EQ(state_before.size(), state_after.size()) << config.name;
      for (std::size_t k = 0; k < state_before.size(); ++k) {
        EXPECT_EQ(state_before[k].first, state_after[k].first);
        EXPECT_TRUE(state_before[k].second.is_same(state_after[k].second)) << state_before[k].first;
      }
    }
  }
}

// A parameter saved for backward and then updated makes backward() refuse
// (Note [Autograd]): the optimizer bumps the version.
TEST(Optim, AutogradSeesTheUpdate) {
  Tensor w = ferry::tensor(std::vector<float>{1, 2}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  Tensor loss = ferry::sum(w * w);
  w.set_grad(ferry::tensor(std::vector<float>{1, 1}));
  opt.step();
  EXPECT_THROW(loss.backward(), ferry::Error);
  ferry_test::expect_close(ferry_optim_test::values(w), {0.9, 1.9}, 1e-7, 0);
}

TEST(Optim, ZeroGrad) {
  Tensor a = ferry::tensor(std::vector<float>{1, 2}).requires_grad_();
  Tensor b = ferry::tensor(std::vector<float>{3}).requires_grad_();
  optim::Adam opt({a, b});
  ferry::sum(a * b).backward();
  Tensor ga = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(a.grad().is_same(ga));  // the same tensor, zeroed
  ferry_test::expect_close(ferry_optim_test::values(a.grad()), {0, 0}, 0, 0);
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  opt.step();  // no gradients: nothing happens
  EXPECT_EQ(opt.step_count(0), 0);
  EXPECT_TRUE(opt.named_state().empty());
}

TEST(Optim, NamedStateAndParameters) {
  Scenario run(ferry_optim_test::adam("amsgrad", {.amsgrad = true}), DType::f32, Device::cpu(),
               std::nullopt);
  EXPECT_EQ(run.opt->kind(), "adam");
  ASSERT_EQ(run.opt->parameters().size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(run.opt->parameters()[i].is_same(run.params[i]));
  EXPECT_TRUE(run.opt->named_state().empty());  // lazily made
  run.step(0);                                  // param 2 has no gradient at step 0
  std::vector<std::string> names;
  for (const auto& [n, t] : run.opt->named_state()) {
    names.push_back(n);
    EXPECT_EQ(t.dtype(), DType::f32);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq",
                                             "state.0.max_exp_avg_sq", "state.1.exp_avg",
                                             "state.1.exp_avg_sq", "state.1.max_exp_avg_sq"}));
  EXPECT_EQ(run.opt->named_state()[3].second.sizes(), ferry_optim_test::kShapes[1]);
}

// A strided parameter cannot go to the fused kernel; the element-wise path
// updates it through its strides.
TEST(Optim, NonContiguousParameter) {
  for (const std::string& dev_name : ferry_optim_test::test_devices()) {
    const Device dev(dev_name);
    Tensor base = ferry::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).to(dev);
    Tensor w;
    {
      ferry::NoGradGuard no_grad;
      w = base.t();  // [3, 2], strides [1, 3]
    }
    w.requires_grad_();
    ASSERT_FALSE(w.is_contiguous());
    optim::SGD opt({w}, {.lr = 0.5, .momentum = 0.9});
    w.set_grad(ferry::ones({3, 2}, {.device = dev}));
    opt.step();
    opt.step();
    // buf = 1, then 1.9: w = x - 0.5 - 0.95
    ferry_test::expect_close(ferry_optim_test::values(base), {-0.45, 0.55, 1.55, 2.55, 3.55, 4.55},
                             1e-6, 0, dev_name);
    optim::SGD strict({w}, {.lr = 0.5, .fused = true});
    EXPECT_FERRY_ERROR(strict.step(), ferry::UnsupportedError, "fused = true", "not contiguous");
  }
}

// ---------------------------------------------------------------- end to end

// Minimises f(x) = sum(a * (x - c)^2) / 2 (optimum x = c) through autograd,
// as the README's training loop does.
template <typename Opt, typename Options>
void minimise_quadratic(const Device& dev, Options options, int steps, const std::string& what) {
  const std::vector<float> c{1.5f, -2.0f, 0.25f, 3.0f};
  Tensor a = ferry::tensor(std::vector<float>{1.0f, 2.0f, 0.5f, 4.0f}).to(dev);
  Tensor target = ferry::tensor(c).to(dev);
  Tensor x = ferry::zeros({4}, {.device = dev}).requires_grad_();
  Opt opt({x}, options);
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor d = x - target;
    Tensor loss = ferry::sum(a * d * d) * 0.5f;
    loss.backward();
    opt.step();
  }
  ferry_test::expect_close(ferry_optim_test::values(x), {c.begin(), c.end()}, 0, 2e-3,
                           what + " on " + dev.str());
}

TEST(Optim, MinimisesAConvexQuadratic) {
  for (const std::string& dev_name : ferry_optim_test::test_devices()) {
    const Device dev(dev_name);
    minimise_quadratic<optim::SGD>(dev, optim::SGDOptions{.lr = 0.2}, 200, "SGD");
    minimise_quadratic<optim::SGD>(dev, optim::SGDOptions{.lr = 0.05, .momentum = 0.9}, 300,
                                   "SGD momentum");
    minimise_quadratic<optim::SGD>(
        dev, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true}, 300, "Nesterov");
    minimise_quadratic<optim::Adam>(dev, optim::AdamOptions{.lr = 0.05}, 1000, "Adam");
    minimise_quadratic<optim::Adam>(dev, optim::AdamOptions{.lr = 0.05, .amsgrad = true}, 1000,
                                    "AMSGrad");
    minimise_quadratic<optim::AdamW>(dev, optim::AdamWOptions{.lr = 0.05, .weight_decay = 0}, 1000,
                                     "AdamW");
  }
}

// The training loop of docs/architecture.md, as written there.
TEST(Optim, ArchitectureExampleTrainsALinearModel) {
  ferry::manual_seed(7);
  ferry::nn::Linear model(3, 1);
  Tensor x = ferry::randn({32, 3});
  Tensor y = ferry::matmul(x, ferry::tensor(std::vector<float>{1, -2, 0.5f}, {3, 1})) + 0.25f;
  ferry::optim::Adam opt(model.parameters(), {.lr = 1e-2});
  float first = 0, last = 0;
  for (int s = 0; s < 1500; ++s) {
    Tensor d = model.forward(x) - y;
    Tensor loss = ferry::mean(d * d);
    opt.zero_grad();
    loss.backward();
    opt.step();
    (s == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_GT(first, 0.5f);
  EXPECT_LT(last, 1e-6f);
  ferry_test::expect_close(ferry_optim_test::values(model.weight), {1, -2, 0.5}, 0, 1e-3);
}

// With weight decay the optimum moves: SGD's L2 term gives a·(x − c) + λx = 0.
TEST(Optim, WeightDecayMovesTheOptimum) {
  Tensor x = ferry::zeros({2}).requires_grad_();
  Tensor c = ferry::tensor(std::vector<float>{2, -4});
  optim::SGD opt({x}, {.lr = 0.1, .momentum = 0.5, .weight_decay = 1.0});
  for (int s = 0; s < 300; ++s) {
    opt.zero_grad();
    Tensor d = x - c;
    ferry::sum(d * d * 0.5f).backward();
    opt.step();
  }
  ferry_test::expect_close(ferry_optim_test::values(x), {1, -2}, 0, 1e-4);  // x = c / 2
}

}  // namespace
