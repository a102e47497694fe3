// Optimizer state (Note [Optimizers] in ferry/optim.hpp): state_dict() and
// load_state_dict() — round trips that resume a trajectory bit for bit, across
// devices and through a safetensors file, and every mismatch refused before
// anything changes; moving state storages in place (the transfer planner's
// Storage::exchange); and the errors of construction and step().
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "optim_test_util.hpp"

namespace {

using ferry::Device;
using ferry::DType;
using ferry::StateDict;
using ferry::Tensor;
using ferry_optim_test::Config;
using ferry_optim_test::Scenario;
namespace optim = ferry::optim;

// Everything observable about an optimizer's state: per parameter the step
// count, and every state tensor's name and exact values; plus the lr of each group.
struct Snapshot {
  std::vector<std::int64_t> steps;
  std::vector<std::pair<std::string, std::vector<double>>> state;
  std::vector<double> lrs;
  bool operator==(const Snapshot&) const = default;
};
Snapshot snapshot(const optim::Optimizer& opt) {
  Snapshot s;
  for (std::size_t i = 0; i < opt.num_params(); ++i) s.steps.push_back(opt.step_count(i));
  for (const auto& [n, t] : opt.named_state()) s.state.emplace_back(n, ferry_optim_test::values(t));
  for (std::size_t g = 0; g < opt.num_param_groups(); ++g) s.lrs.push_back(opt.lr(g));
  return s;
}

std::vector<std::vector<double>> param_values(const std::vector<Tensor>& params) {
  std::vector<std::vector<double>> v;
  for (const Tensor& p : params) v.push_back(ferry_optim_test::values(p));
  return v;
}

// A state dict with every tensor moved to `device`.
StateDict moved(const StateDict& sd, const Device& device) {
  StateDict out;
  for (const auto& [k, t] : sd) out.insert(k, t.to(device));
  out.metadata = sd.metadata;
  return out;
}

// ---------------------------------------------------------------- round trips

class OptimStateDict : public ::testing::TestWithParam<Config> {};

// Train 3 steps, save, load into a fresh optimizer over fresh parameters with
// the same values, train 3 more: the same numbers as 6 uninterrupted steps, bit
// for bit, whether the dict stayed on the CPU, visited vulkan:0 or a file.
TEST_P(OptimStateDict, ResumesBitForBit) {
  const Config& config = GetParam();
  const Device cpu = Device::cpu();
  Scenario straight(config, DType::f32, cpu, std::nullopt);
  for (int s = 0; s < ferry_optim_test::kSteps; ++s) straight.step(s);

  std::vector<std::string> routes{"cpu", "file"};
  for (const std::string& d : ferry_optim_test::test_devices())
    if (d != "cpu") routes.push_back(d);
  for (const std::string& route : routes) {
    Scenario first(config, DType::f32, cpu, std::nullopt);
    for (int s = 0; s < 3; ++s) first.step(s);
    StateDict sd = first.opt->state_dict();
    if (route != "cpu" && route != "file") {
      sd = moved(sd, Device(route));
    } else if (route == "file") {
      const std::string path = ::testing::TempDir() + "ferry_optim_" + config.name +
                               std::to_string(::getpid()) + ".safetensors";
      ferry::save_safetensors(path, sd);
      sd = ferry::load_safetensors(path);
      std::remove(path.c_str());
    }
    Scenario second(config, DType::f32, cpu, std::nullopt);
    for (std::size_t i = 0; i < second.params.size(); ++i) {
      ferry::NoGradGuard no_grad;
      second.params[i].copy_(first.params[i]);
    }
    second.opt->load_state_dict(sd);
    EXPECT_EQ(snapshot(*second.opt), snapshot(*first.opt)) << route;
    for (int s = 3; s < ferry_optim_test::kSteps; ++s) second.step(s);
    EXPECT_EQ(param_values(second.params), param_values(straight.params)) << route;
    EXPECT_EQ(snapshot(*second.opt), snapshot(*straight.opt)) << route;
  }
}

void resume_on(const Config& config, const Device& gpu);

// A checkpoint saved on the CPU resumes on each accelerator (the state is
// copied onto each parameter's device), matching the CPU's run to rounding.
TEST_P(OptimStateDict, ResumesOnAnotherDevice) {
  std::vector<std::string> gpus = ferry_optim_test::test_devices();
  gpus.erase(gpus.begin());  // the CPU
  if (gpus.empty()) GTEST_SKIP() << "no accelerator here: " << ferry::describe_devices();
  for (const std::string& gpu_name : gpus) resume_on(GetParam(), Device(gpu_name));
}

void resume_on(const Config& config, const Device& gpu) {
  SCOPED_TRACE(gpu.str());
  const Device cpu = Device::cpu();
  Scenario straight(config, DType::f32, cpu, std::nullopt);
  for (int s = 0; s < ferry_optim_test::kSteps; ++s) straight.step(s);
  Scenario first(config, DType::f32, cpu, std::nullopt);
  for (int s = 0; s < 3; ++s) first.step(s);
  Scenario second(config, DType::f32, gpu, std::nullopt);
  for (std::size_t i = 0; i < second.params.size(); ++i) {
    ferry::NoGradGuard no_grad;
    second.params[i].copy_(first.params[i]);
  }
  second.opt->load_state_dict(first.opt->state_dict());
  for (const auto& [n, t] : second.opt->named_state()) EXPECT_EQ(t.device(), gpu) << n;
  for (int s = 3; s < ferry_optim_test::kSteps; ++s) second.step(s);
  for (std::size_t i = 0; i < second.params.size(); ++i)
    ferry_test::expect_close(ferry_optim_test::values(second.params[i]),
                             ferry_optim_test::values(straight.params[i]), 1e-5, 1e-6,
                             "param " + std::to_string(i));
}

INSTANTIATE_TEST_SUITE_P(AllOptions, OptimStateDict,
                         ::testing::ValuesIn(ferry_optim_test::all_configs()),
                         [](const auto& info) { return info.param.name; });

TEST(OptimStateDictFormat, KeysStepsAndMetadata) {
  Scenario run(ferry_optim_test::adam("a", {.lr = 0.01, .amsgrad = true}), DType::f32,
               Device::cpu(), std::nullopt);
  run.step(0);  // param 2 has no gradient at step 0: no state
  run.step(1);
  StateDict sd = run.opt->state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{
                           "state.0.exp_avg", "state.0.exp_avg_sq", "state.0.max_exp_avg_sq",
                           "state.0.step", "state.1.exp_avg", "state.1.exp_avg_sq",
                           "state.1.max_exp_avg_sq", "state.1.step", "state.2.exp_avg",
                           "state.2.exp_avg_sq", "state.2.max_exp_avg_sq", "state.2.step"}));
  const Tensor& step = sd.at("state.0.step");
  EXPECT_EQ(step.dim(), 0);
  EXPECT_EQ(step.dtype(), DType::i64);
  EXPECT_TRUE(step.device().is_cpu());
  EXPECT_EQ(step.item<std::int64_t>(), 2);
  EXPECT_EQ(sd.at("state.2.step").item<std::int64_t>(), 1);
  // The tensors are the optimizer's own (a handle, as a module's state_dict()).
  EXPECT_TRUE(sd.at("state.1.exp_avg").is_same(run.opt->named_state()[3].second));
  EXPECT_EQ(sd.metadata.at("optimizer"), "adam");
  auto groups = nlohmann::json::parse(sd.metadata.at("param_groups"));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["params"], nlohmann::json::parse("[0, 1, 2]"));
  EXPECT_EQ(groups[0]["lr"].get<double>(), 0.01);
  EXPECT_EQ(groups[0]["beta2"].get<double>(), 0.999);
  EXPECT_EQ(groups[0]["amsgrad"], true);
  EXPECT_TRUE(groups[0]["fused"].is_null());
}

// load_state_dict restores the groups' options too.
TEST(OptimStateDictFormat, RestoresOptions) {
  Tensor a = ferry::ones({2}).requires_grad_(), b = ferry::ones({3}).requires_grad_();
  optim::SGD saved({{{a}, optim::SGDOptions{.lr = 0.3, .momentum = 0.7}},
                    {{b}, optim::SGDOptions{.lr = 0.01, .nesterov = false, .fused = false}}});
  Tensor c = ferry::ones({2}).requires_grad_(), d = ferry::ones({3}).requires_grad_();
  optim::SGD fresh({{{c}, std::nullopt}, {{d}, std::nullopt}});
  fresh.load_state_dict(saved.state_dict());
  EXPECT_EQ(fresh.options(0).lr, 0.3);
  EXPECT_EQ(fresh.options(0).momentum, 0.7);
  EXPECT_EQ(fresh.options(1).lr, 0.01);
  EXPECT_EQ(fresh.options(1).fused, std::optional<bool>(false));
  EXPECT_FALSE(fresh.options(0).fused.has_value());
}

// ---------------------------------------------------------------- bad loads

struct BadLoad {
  const char* what;
  std::function<void(StateDict&)> corrupt;
  std::vector<std::string> needles;
};

TEST(OptimStateDictErrors, MismatchesChangeNothing) {
  Scenario target(ferry_optim_test::adam("t", {.lr = 0.02}), DType::f32, Device::cpu(),
                  std::nullopt);
  target.step(0);
  target.step(1);
  const Snapshot before = snapshot(*target.opt);

  Scenario source(ferry_optim_test::adam("s", {.lr = 0.5}), DType::f32, Device::cpu(),
                  std::nullopt);
  for (int s = 0; s < 3; ++s) source.step(s);
  auto set_groups = [](StateDict& sd, const std::string& json) {
    sd.metadata["param_groups"] = json;
  };
  const std::string opts =
      R"("lr":0.1,"beta1":0.9,"beta2":0.999,"eps":1e-8,"weight_decay":0,"amsgrad":false,"maximize":false,"fused":null)";
  const std::vector<BadLoad> cases = {
      {"no metadata", [](StateDict& sd) { sd.metadata.clear(); }, {"no 'optimizer' metadata"}},
      {"other kind",
       [](StateDict& sd) { sd.metadata["optimizer"] = "sgd"; },
       {"'sgd' optimizer", "this one is 'adam'"}},
      {"bad json", [&](StateDict& sd) { set_groups(sd, "[{"); }, {"not valid JSON"}},
      {"two groups",
       [&](StateDict& sd) {
         set_groups(sd, "[{\"params\":[0,1]," + opts + "},{\"params\":[2]," + opts + "}]");
       },
       {"2 param groups", "has 1"}},
      {"group size",
       [&](StateDict& sd) { set_groups(sd, "[{\"params\":[0,1]," + opts + "}]"); },
       {"param group 0 has 2 parameters in the state dict but 3"}},
      {"bad lr",
       [&](StateDict& sd) {
         set_groups(sd, R"([{"params":[0,1,2],"lr":-1,"beta1":0.9,"beta2":0.999,"eps":1e-8,)"
                        R"("weight_decay":0,"amsgrad":false,"maximize":false,"fused":null}])");
       },
       {"param_groups[0]", "lr must be >= 0", "-1"}},
      {"missing option",
       [&](StateDict& sd) { set_groups(sd, R"([{"params":[0,1,2],"lr":0.1}])"); },
       {"param_groups[0] has no option 'beta1'"}},
      {"unknown index",
       [&](StateDict& sd) { sd.insert("state.7.exp_avg", ferry::zeros({5})); },
       {"'state.7.exp_avg'", "parameter 7", "no param group lists"}},
      {"unknown key",
       [&](StateDict& sd) { sd.insert("lr", ferry::zeros({1})); },
       {"unexpected key 'lr'"}},
      {"unknown state",
       [&](StateDict& sd) { sd.insert("state.0.momentum_buffer", ferry::zeros({5})); },
       {"'state.0.momentum_buffer'", "does not keep"}},
      {"shape",
       [&](StateDict& sd) {
         sd.insert_or_assign("state.1.exp_avg", ferry::zeros({3, 2}));
       },
       {"'state.1.exp_avg' has shape [3, 2] but parameter 1 has shape [2, 3]"}},
      {"dtype",
       [&](StateDict& sd) {
         sd.insert_or_assign("state.1.exp_avg", ferry::zeros({2, 3}, {.dtype = DType::i32}));
       },
       {"'state.1.exp_avg' is i32"}},
      {"missing exp_avg_sq",
       [&](StateDict& sd) { sd.erase("state.2.exp_avg_sq"); },
       {"state of parameter 2", "lacks 'exp_avg_sq'"}},
      {"missing step",
       [&](StateDict& sd) { sd.erase("state.0.step"); },
       {"state of parameter 0", "lacks 'step'"}},
      {"negative step",
       [&](StateDict& sd) {
         sd.insert_or_assign("state.0.step", ferry::scalar_tensor(-3, {.dtype = DType::i64}));
       },
       {"'state.0.step' is -3", "whole number >= 0"}},
      {"step shape",
       [&](StateDict& sd) {
         sd.insert_or_assign("state.0.step", ferry::zeros({2}, {.dtype = DType::i64}));
       },
       {"'state.0.step' has shape [2]"}},
  };
  for (const BadLoad& c : cases) {
    StateDict sd = source.opt->state_dict();
    c.corrupt(sd);
    try {
      target.opt->load_state_dict(sd);
      ADD_FAILURE() << c.what << ": loaded";
    } catch (const ferry::Error& e) {
      const std::string msg = e.what();
      for (const std::string& n : c.needles)
        EXPECT_NE(msg.find(n), std::string::npos)
            << c.what << ": message lacks \"" << n << "\": " << msg;
    }
    EXPECT_EQ(snapshot(*target.opt), before) << c.what << ": a failed load changed the state";
    EXPECT_EQ(target.opt->lr(0), 0.02) << c.what;
  }
  // The untouched dict still loads.
  target.opt->load_state_dict(source.opt->state_dict());
  EXPECT_EQ(snapshot(*target.opt), snapshot(*source.opt));
}

// ---------------------------------------------------------------- moved storages

// Replaces a tensor's memory with a copy on `device`, keeping its Storage (what
// the transfer planner's commit does).
void move_storage(const Tensor& t, const Device& device) {
  ferry::Storage& s = *t.storage();
  auto staging = ferry::Storage::allocate(device, s.nbytes());
  ferry::detail::copy_storage_bytes(*staging, 0, s, 0, s.nbytes());
  ferry::DeviceImpl& impl = staging->impl();
  std::unique_ptr<ferry::Buffer> buffer = staging->exchange(impl, impl.allocate(0));
  s.exchange(impl, std::move(buffer));
}

// The optimizer holds Tensor handles: after the storages of parameters,
// gradients and state move (to a new buffer, or to another device), step()
// keeps working, where the memory now is.
TEST(OptimMovedState, KeepsWorkingAfterStorageExchange) {
  const std::vector<std::string> targets = ferry_optim_test::test_devices();
  for (const auto& config : ferry_optim_test::all_configs()) {
    for (const std::string& target : targets) {
      Scenario straight(config, DType::f32, Device::cpu(), std::nullopt);
      Scenario moving(config, DType::f32, Device::cpu(), std::nullopt);
      for (int s = 0; s < 3; ++s) {
        straight.step(s);
        moving.step(s);
      }
      for (const Tensor& p : moving.params) move_storage(p, Device(target));
      for (const auto& [n, t] : moving.opt->named_state()) move_storage(t, Device(target));
      // Gradients left behind on the CPU: refused before anything changes.
      moving.params[0].set_grad({});
      moving.params[1].set_grad(ferry::ones({2, 3}, {.device = Device(target)}));
      if (target != "cpu") {
        // set_grad refuses another device, so swap the gradient's storage back.
        move_storage(moving.params[1].grad(), Device::cpu());
        const Snapshot before = snapshot(*moving.opt);
        EXPECT_FERRY_ERROR(moving.opt->step(), ferry::DeviceMismatchError,
                           "gradient of parameter 1", "is on cpu", target);
        EXPECT_EQ(snapshot(*moving.opt), before);
      }
      for (int s = 3; s < ferry_optim_test::kSteps; ++s) {
        straight.step(s);
        for (std::size_t i = 0; i < moving.params.size(); ++i)
          moving.params[i].set_grad(
              ferry_optim_test::has_grad(s, i)
                  ? ferry_optim_test::make_grad(ferry_optim_test::grad_data(s, i),
                                                ferry_optim_test::kShapes[i], DType::f32,
                                                Device(target))
                  : Tensor());
        moving.opt->step();
      }
      for (const auto& [n, t] : moving.opt->named_state())
        EXPECT_EQ(t.device(), Device(target)) << n;
      for (std::size_t i = 0; i < moving.params.size(); ++i) {
        const std::string at = config.name + " on " + target + " param " + std::to_string(i);
        if (target == "cpu")
          EXPECT_EQ(ferry_optim_test::values(moving.params[i]),
                    ferry_optim_test::values(straight.params[i]))
              << at;
        else
          ferry_test::expect_close(ferry_optim_test::values(moving.params[i]),
                                   ferry_optim_test::values(straight.params[i]), 1e-5, 1e-6, at);
      }
    }
  }
}

// ---------------------------------------------------------------- construction errors

TEST(OptimErrors, BadOptions) {
  Tensor w = ferry::ones({2}).requires_grad_();
  using optim::Adam, optim::AdamW, optim::SGD;
  EXPECT_FERRY_ERROR(SGD({w}, {.lr = -0.1}), ferry::Error, "SGD", "lr must be >= 0", "-0.1");
  EXPECT_FERRY_ERROR(SGD({w}, {.lr = std::nan("")}), ferry::Error, "SGD", "lr must be >= 0");
  EXPECT_FERRY_ERROR(SGD({w}, {.momentum = -1}), ferry::Error, "momentum must be >= 0");
  EXPECT_FERRY_ERROR(SGD({w}, {.weight_decay = -1}), ferry::Error, "weight_decay must be >= 0");
  EXPECT_FERRY_ERROR(SGD({w}, {.nesterov = true}), ferry::Error, "nesterov needs momentum > 0",
                     "momentum 0");
  EXPECT_FERRY_ERROR(SGD({w}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}), ferry::Error,
                     "dampening == 0", "dampening 0.1");
  EXPECT_FERRY_ERROR(Adam({w}, {.lr = -1}), ferry::Error, "Adam", "lr must be >= 0");
  EXPECT_FERRY_ERROR(Adam({w}, {.beta1 = 1.0}), ferry::Error, "beta1 must be in [0, 1)", "1");
  EXPECT_FERRY_ERROR(Adam({w}, {.beta2 = -0.1}), ferry::Error, "beta2 must be in [0, 1)");
  EXPECT_FERRY_ERROR(Adam({w}, {.eps = -1e-8}), ferry::Error, "eps must be >= 0");
  EXPECT_FERRY_ERROR(AdamW({w}, {.weight_decay = -0.01}), ferry::Error, "AdamW",
                     "weight_decay must be >= 0");
  // A group's own options are checked, and name the group.
  Tensor v = ferry::ones({2}).requires_grad_();
  EXPECT_FERRY_ERROR(SGD({{{w}, std::nullopt}, {{v}, optim::SGDOptions{.lr = -2}}}), ferry::Error,
                     "param group 1", "lr must be >= 0");
  // Options changed to bad values between steps: step() refuses before it changes anything.
  SGD sgd({w}, {.lr = 0.1});
  w.set_grad(ferry::ones({2}));
  sgd.options().momentum = -0.5;
  EXPECT_FERRY_ERROR(sgd.step(), ferry::Error, "param group 0", "momentum must be >= 0");
  EXPECT_EQ(ferry_optim_test::values(w), (std::vector<double>{1, 1}));
  EXPECT_FERRY_ERROR(sgd.options(2), ferry::Error, "param group 2 does not exist");
}

TEST(OptimErrors, BadParameters) {
  using optim::Adam, optim::SGD;
  Tensor w = ferry::ones({2}).requires_grad_();
  Tensor v = ferry::ones({3}).requires_grad_();
  EXPECT_FERRY_ERROR(SGD(std::vector<Tensor>{}), ferry::Error, "empty parameter list");
  EXPECT_FERRY_ERROR(Adam(std::vector<Adam::Group>{}), ferry::Error, "no parameter groups");
  EXPECT_FERRY_ERROR(SGD({w, v, w}), ferry::Error, "parameter 2 of param group 0",
                     "also parameter 0 of param group 0");
  EXPECT_FERRY_ERROR(Adam({{{w}, std::nullopt}, {{v, w}, std::nullopt}}), ferry::Error,
                     "parameter 1 of param group 1", "also parameter 0 of param group 0");
  Adam adam({w});
  EXPECT_FERRY_ERROR(adam.add_param_group({{w}, std::nullopt}), ferry::Error,
                     "also parameter 0 of param group 0");
  EXPECT_EQ(adam.num_param_groups(), 1u);  // the failed add changed nothing
  EXPECT_EQ(adam.num_params(), 1u);
  Tensor ints = ferry::tensor(std::vector<std::int32_t>{1, 2});
  EXPECT_FERRY_ERROR(SGD({ints}), ferry::DTypeError, "parameter 0 of param group 0", "i32",
                     "floating");
  Tensor y = w * 2.0f;
  EXPECT_FERRY_ERROR(SGD({y}), ferry::Error, "not a leaf", "mulBackward");
  EXPECT_FERRY_ERROR(SGD({ferry::ones({2})}), ferry::Error, "does not require grad",
                     "requires_grad_()");
  EXPECT_FERRY_ERROR(SGD({Tensor()}), ferry::Error, "undefined tensor");
}

TEST(OptimErrors, BadGradientsAreRefusedBeforeAnyChange) {
  Tensor a = ferry::ones({2, 3}).requires_grad_();
  Tensor b = ferry::ones({2, 3}).requires_grad_();
  optim::Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(ferry::ones({2, 3}));
  b.set_grad(ferry::ones({2, 3}));
  // A gradient whose shape disagrees with its parameter (set_grad refuses one,
  // so the gradient's own metadata is edited: same number of elements).
  b.grad().impl_ptr()->sizes = {3, 2};
  b.grad().impl_ptr()->strides = {2, 1};
  EXPECT_FERRY_ERROR(opt.step(), ferry::ShapeError, "gradient of parameter 1", "[3, 2]", "[2, 3]");
  EXPECT_EQ(ferry_optim_test::values(a), std::vector<double>(6, 1.0));  // a was not updated
  EXPECT_EQ(opt.step_count(0), 0);
  EXPECT_TRUE(opt.named_state().empty());
  b.grad().impl_ptr()->dtype = DType::i32;  // same element size
  b.grad().impl_ptr()->sizes = {2, 3};
  b.grad().impl_ptr()->strides = {3, 1};
  EXPECT_FERRY_ERROR(opt.step(), ferry::DTypeError, "gradient of parameter 1", "i32", "f32");
  EXPECT_EQ(ferry_optim_test::values(a), std::vector<double>(6, 1.0));
}

}  // namespace

namespace {

// State left behind on another device than its parameter is refused before
// anything changes (the transfer planner moves both together).
TEST(OptimMovedState, StateOnAnotherDeviceIsRefused) {
  if (!ferry::is_available("vulkan"))
    GTEST_SKIP() << "no Vulkan device here: " << ferry::describe_devices();
  Scenario run(ferry_optim_test::adam("a", {.lr = 0.1}), DType::f32, Device::cpu(), std::nullopt);
  run.step(0);
  const Device gpu("vulkan:0");
  move_storage(run.params[0], gpu);
  const Snapshot before = snapshot(*run.opt);
  run.params[0].set_grad(ferry::ones(ferry_optim_test::kShapes[0], {.device = gpu}));
  run.params[1].set_grad({});
  EXPECT_FERRY_ERROR(run.opt->step(), ferry::DeviceMismatchError, "state.0.exp_avg is on cpu",
                     "its parameter is on vulkan:0", "migrate");
  EXPECT_EQ(snapshot(*run.opt), before);
}

// A failure inside the update (here: the test plugin's kernels refuse f64) leaves the
// parameter's step count and state as they were, so a later step starts clean.
TEST(OptimErrors, FailedUpdateUndoesItsBookkeeping) {
  ferry::load_backend_module(std::string(FERRY_TEST_PLUGIN_DIR) + "/libferry_backend_testdev.so");
  const Device gpu("testdev:0");
  for (bool elementwise : {false, true}) {
    Tensor w = ferry::tensor(std::vector<double>{1, 2}).to(gpu).requires_grad_();
    w.set_grad(ferry::tensor(std::vector<double>{1, 1}).to(gpu));
    optim::SGD opt(
        {w},
        {.lr = 0.1, .momentum = 0.9, .fused = elementwise ? std::optional(false) : std::nullopt});
    EXPECT_THROW(opt.step(), ferry::UnsupportedError);
    EXPECT_EQ(opt.step_count(0), 0);
    EXPECT_TRUE(opt.named_state().empty());
    EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{1, 2}));
  }
}

// A strided gradient is copied for the fused kernel; the result is the same.
TEST(OptimErrors, StridedGradientsWork) {
  for (const std::string& dev_name : ferry_optim_test::test_devices()) {
    const Device dev(dev_name);
    Tensor a = ferry::ones({2, 3}, {.device = dev}).requires_grad_();
    Tensor b = ferry::ones({2, 3}, {.device = dev}).requires_grad_();
    optim::Adam opt({a, b}, {.lr = 0.1});
    Tensor g = ferry::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}).to(dev);
    a.set_grad(g.t());  // strides [1, 2]
    ASSERT_FALSE(a.grad().is_contiguous());
    b.set_grad(g.t().contiguous());
    opt.step();
    EXPECT_EQ(ferry_optim_test::values(a), ferry_optim_test::values(b)) << dev_name;
  }
}

}  // namespace
