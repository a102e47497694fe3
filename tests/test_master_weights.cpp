// f32 master weights for 16-bit parameters (Note [Master weights] in ferry/optim.hpp): updates
// below the parameter's last bit accumulate; the 16-bit parameter is the f32 run's, rounded,
// on the fused and the element-wise paths and on every device; the copy is saved, restored
// and checked like any state.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ferry/ferry.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace optim = ferry::optim;

// Steps `opt` over `p` with the gradients g_k = sin(k + index) * scale, widened from `dt`.
void train(optim::Optimizer& opt, const Tensor& p, int steps, double scale) {
  for (int k = 0; k < steps; ++k) {
    const Tensor g =
        (ferry::sin(ferry::arange(0, p.numel(), 1, {.device = p.device()}) + k) * scale)
            .reshape(p.sizes())
            .to(p.dtype());
    p.set_grad(g);
    opt.step();
  }
}

TEST(MasterWeights, UpdatesBelowTheLastBitAccumulate) {
  // bf16 holds 1.0 - 1e-3 as 1.0: without a master copy, SGD never moves the parameter.
  for (bool master : {false, true}) {
    Tensor p = ferry::ones({4}, {.dtype = DType::bf16}).requires_grad_();
    optim::SGD opt({p}, {.lr = 1.0});
    opt.set_master_weights(master);
    for (int k = 0; k < 20; ++k) {
      p.set_grad(ferry::full({4}, 1e-3, {.dtype = DType::bf16}));
      opt.step();
    }
    const float v = p.detach().to(DType::f32).to_vector<float>()[0];
    if (master)
      EXPECT_NEAR(v, 1.0 - 20 * 1e-3, 4e-3);  // within one bf16 step of 0.98
    else
      EXPECT_EQ(v, 1.0f);
  }
}

// The 16-bit parameter is the f32 parameter of the same run, rounded: same gradients (the
// 16-bit ones, widened), same rule, fused or element-wise.
void expect_rounded_f32_run(const std::string& dev, const std::string& rule,
                            std::optional<bool> fused, DType dt) {
  SCOPED_TRACE(dev + " " + rule + " " + std::string(ferry::dtype_name(dt)));
  ferry::manual_seed(7);
  const Tensor init = ferry::randn({3, 5}, {.device = ferry::Device(dev)});
  Tensor low = init.to(dt).requires_grad_();
  Tensor ref = low.detach().to(DType::f32).requires_grad_();
  auto make = [&](const Tensor& p) -> std::unique_ptr<optim::Optimizer> {
    if (rule == "sgd")
      return std::make_unique<optim::SGD>(
          std::vector<Tensor>{p}, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .fused = fused});
    return std::make_unique<optim::AdamW>(std::vector<Tensor>{p},
                                          optim::AdamWOptions{.lr = 1e-2, .fused = fused});
  };
  auto opt_low = make(low), opt_ref = make(ref);
  opt_low->set_master_weights(true);
  for (int k = 0; k < 12; ++k) {
    const Tensor g =
        (ferry::sin(ferry::arange(0, 15, 1, {.device = ferry::Device(dev)}) * 0.7 + k) * 0.3)
            .reshape({3, 5})
            .to(dt);
    low.set_grad(g);
    ref.set_grad(g.to(DType::f32));
    opt_low->step();
    opt_ref->step();
  }
  const auto named = opt_low->named_state();
  const auto master = std::find_if(named.begin(), named.end(),
                                   [](const auto& e) { return e.first == "state.0.master"; });
  ASSERT_NE(master, named.end());
  EXPECT_EQ(master->second.dtype(), DType::f32);
  for (const auto& [n, t] : named) EXPECT_EQ(t.dtype(), DType::f32) << n;
  EXPECT_TRUE(ferry::allclose(master->second.cpu(), ref.detach().cpu(), 1e-6, 1e-6));
  EXPECT_TRUE(ferry::equal(low.detach().cpu(), ref.detach().to(dt).cpu()));
}

TEST(MasterWeights, SixteenBitParameterIsTheRoundedF32Run) {
  for (DType dt : {DType::bf16, DType::f16})
    for (const char* rule : {"sgd", "adamw"})
      for (std::optional<bool> fused : {std::optional<bool>(), std::optional<bool>(false)})
        expect_rounded_f32_run("cpu", rule, fused, dt);
}

class MasterWeightsOnDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(MasterWeightsOnDevice, SixteenBitParameterIsTheRoundedF32Run) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  expect_rounded_f32_run(GetParam(), "adamw", std::nullopt, DType::f16);
  expect_rounded_f32_run(GetParam(), "sgd", false, DType::bf16);
}

// The copy is state like any other: migrate moves it with the model, and the run goes on as
// the one that stayed.
TEST_P(MasterWeightsOnDevice, CopyMovesWithTheModel) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  auto run = [&](bool moved) {
    ferry::manual_seed(4);
    ferry::nn::Linear lin(6, 3, true, {.dtype = DType::bf16});
    optim::AdamW opt(lin.parameters(), {.lr = 1e-2});
    opt.set_master_weights(true);
    const Tensor x = ferry::randn({5, 6}, {.dtype = DType::bf16});
    ferry::Device at = ferry::Device::cpu();
    for (int k = 0; k < 6; ++k) {
      const ferry::Device dev =
          moved && k >= 2 && k < 4 ? ferry::Device(GetParam()) : ferry::Device::cpu();
      if (dev != at) ferry::migrate(lin, opt, dev), at = dev;
      opt.zero_grad();
      ferry::sum(ferry::pow(lin.forward(x.to(dev)), 2)).backward();
      opt.step();
    }
    for (const auto& [n, t] : opt.named_state())
      if (n.ends_with(".master")) EXPECT_EQ(t.device(), ferry::Device::cpu()) << n;
    return lin.weight.detach().to(DType::f32);
  };
  EXPECT_TRUE(ferry::allclose(run(true), run(false), 1e-2, 1e-2));
}

INSTANTIATE_TEST_SUITE_P(Devices, MasterWeightsOnDevice,
                         ::testing::ValuesIn(ferry_test::accelerator_names()),
                         [](const auto& info) { return ferry_test::backend_of(info.param); });

TEST(MasterWeights, F32ParametersKeepNoCopy) {
  Tensor p = ferry::ones({3}).requires_grad_();
  optim::Adam opt({p}, {.lr = 0.1});
  opt.set_master_weights(true);
  train(opt, p, 2, 1.0);
  for (const auto& [n, t] : opt.named_state()) EXPECT_EQ(n.find("master"), std::string::npos);
}

// A step refused by its checks keeps no master copy it made before the refusal (the checks
// of later parameters run after the first ones' copies exist).
TEST(MasterWeights, RefusedStepLeavesNoCopy) {
  Tensor p = ferry::ones({4}, {.dtype = DType::bf16}).requires_grad_();
  Tensor q = ferry::ones({2, 2}).t().requires_grad_();  // not contiguous: no fused update
  optim::SGD opt({p, q}, {.lr = 0.5, .fused = true});
  opt.set_master_weights(true);
  p.set_grad(ferry::ones({4}, {.dtype = DType::bf16}));
  q.set_grad(ferry::ones({2, 2}));
  EXPECT_THROW(opt.step(), ferry::UnsupportedError);
  EXPECT_TRUE(opt.named_state().empty());
  EXPECT_EQ(p.dtype(), DType::bf16);
  EXPECT_TRUE(ferry::equal(p.detach(), ferry::ones({4}, {.dtype = DType::bf16})));
  q.set_grad({});
  opt.step();
  ASSERT_EQ(opt.named_state().size(), 1u);
  EXPECT_EQ(opt.named_state()[0].first, "state.0.master");
  EXPECT_TRUE(ferry::equal(p.detach(), ferry::full({4}, 0.5, {.dtype = DType::bf16})));
}

TEST(MasterWeights, StateDictRoundTripAndMismatches) {
  Tensor p = ferry::ones({6}, {.dtype = DType::bf16}).requires_grad_();
  optim::AdamW opt({p}, {.lr = 1e-3});
  opt.set_master_weights(true);
  train(opt, p, 3, 1e-2);
  EXPECT_THROW(opt.set_master_weights(false), ferry::Error);  // state exists
  const ferry::StateDict sd = opt.state_dict();
  ASSERT_TRUE(sd.contains("state.0.master"));
  EXPECT_EQ(sd.at("state.0.master").dtype(), DType::f32);

  // A fresh optimizer with master weights continues the same run.
  Tensor q = p.detach().clone().requires_grad_();
  optim::AdamW resumed({q}, {.lr = 1e-3});
  resumed.set_master_weights(true);
  resumed.load_state_dict(sd);
  train(opt, p, 3, 1e-2);
  train(resumed, q, 3, 1e-2);
  EXPECT_TRUE(ferry::equal(p.detach(), q.detach()));

  // One without them refuses the copy; an f32 parameter keeps none.
  Tensor r = p.detach().clone().requires_grad_();
  optim::AdamW plain({r}, {.lr = 1e-3});
  EXPECT_THROW(plain.load_state_dict(sd), ferry::Error);
  Tensor f = ferry::ones({6}).requires_grad_();
  optim::AdamW wide({f}, {.lr = 1e-3});
  wide.set_master_weights(true);
  EXPECT_THROW(wide.load_state_dict(sd), ferry::Error);
}

}  // namespace
