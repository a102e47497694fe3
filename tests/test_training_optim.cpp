// tests/test_training_optim.cpp — adam_step and sgd_step (docs/kernel-contract.md, "Ops for
// training"), called straight through each device's kernel table: several steps of several
// parameters (an empty one, and one of more than 2^20 elements that the CPU splits across its
// threads) against PyTorch's update rules computed here in double, for weight decay, amsgrad,
// maximize, AdamW, momentum, dampening, nesterov and the buffer's first step; f16/bf16
// parameters; Vulkan against the CPU; and typed errors for bad calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "ferry/kit/math/grad_ops.hpp"
#include "ferry/kit/optim_args.hpp"
#include "op_test_util.hpp"
#include "training_test_util.hpp"

namespace {

using namespace training_test;

// ---- adam_step, sgd_step ----

struct OptimConfig {
  std::string name;
  bool adam = true;
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  std::size_t per() const { return adam ? (amsgrad ? 4 : 3) : (momentum != 0 ? 2 : 1); }
};

const OptimConfig kOptimConfigs[] = {
    {.name = "adam"},
    {.name = "adam_l2", .weight_decay = 0.1},
    {.name = "adamw", .weight_decay = 0.1, .decoupled = true},
    {.name = "adam_amsgrad_maximize",
     .beta2 = 0.99,
     .weight_decay = 0.05,
     .amsgrad = true,
     .maximize = true},
    {.name = "sgd", .adam = false, .lr = 0.1},
    {.name = "sgd_momentum_dampening",
     .adam = false,
     .lr = 0.05,
     .weight_decay = 0.01,
     .momentum = 0.9,
     .dampening = 0.3},
    {.name = "sgd_nesterov_maximize",
     .adam = false,
     .lr = 0.05,
     .maximize = true,
     .momentum = 0.8,
     .nesterov = true},
};

// Whether parameter `param`'s momentum buffer starts over at `step`: at the first step, and
// for odd parameters once more at step 3 (per parameter, as when a buffer is made later).
bool init_buffer(int step, std::size_t param) { return step == 1 || (param % 2 == 1 && step == 3); }

ferry::Attrs optim_attrs(const OptimConfig& c, int step, std::size_t n) {
  if (c.adam) {
    const double bc1 = 1 - std::pow(c.beta1, step), bc2 = 1 - std::pow(c.beta2, step);
    std::vector<std::int64_t> init(n);
    for (std::size_t i = 0; i < n; ++i) init[i] = init_buffer(step, i) ? 1 : 0;
    return ferry::Attrs{{"lr", c.lr},
                        {"beta1", c.beta1},
                        {"beta2", c.beta2},
                        {"eps", c.eps},
                        {"weight_decay", c.weight_decay},
                        {"amsgrad", c.amsgrad},
                        {"maximize", c.maximize},
                        {"decoupled_weight_decay", c.decoupled},
                        {"step_size", std::vector<double>(n, c.lr / bc1)},
                        {"bias_correction2_sqrt", std::vector<double>(n, std::sqrt(bc2))}};
  }
  std::vector<std::int64_t> init(n);
  for (std::size_t i = 0; i < n; ++i) init[i] = init_buffer(step, i) ? 1 : 0;
  return ferry::Attrs{{"lr", c.lr},
                      {"momentum", c.momentum},
                      {"dampening", c.dampening},
                      {"weight_decay", c.weight_decay},
                      {"nesterov", c.nesterov},
                      {"maximize", c.maximize},
                      {"init_buffer", init}};
}

// One element of PyTorch's update, in double; `state` is exp_avg, exp_avg_sq, max_exp_avg_sq
// (Adam) or the momentum buffer (SGD).
void reference_update(const OptimConfig& c, int step, bool init, double grad, double& p,
                      double* state) {
  if (c.adam) {
    double g = c.maximize ? -grad : grad;
    if (c.decoupled)
      p *= 1 - c.lr * c.weight_decay;
    else if (c.weight_decay != 0)
      g += c.weight_decay * p;
    double &m = state[0], &v = state[1];
    m = c.beta1 * m + (1 - c.beta1) * g;
    v = c.beta2 * v + (1 - c.beta2) * g * g;
    double second = v;
    if (c.amsgrad) second = state[2] = std::max(state[2], v);
    const double step_size = c.lr / (1 - std::pow(c.beta1, step));
    const double bc2_sqrt = std::sqrt(1 - std::pow(c.beta2, step));
    p -= step_size * m / (std::sqrt(second) / bc2_sqrt + c.eps);
  } else {
    double d = c.maximize ? -grad : grad;
    if (c.weight_decay != 0) d += c.weight_decay * p;
    if (c.momentum != 0) {
      double& buf = state[0];
      buf = init ? d : c.momentum * buf + (1 - c.dampening) * d;
      d = c.nesterov ? d + c.momentum * buf : buf;
    }
    p -= c.lr * d;
  }
}

// A parameter group's values, every tensor of every parameter in kernel output order.
using GroupValues = std::vector<std::vector<double>>;

// Gradients of magnitude 0.25 to 1, either sign: with weight decay 0.1 and parameters in
// [-2, 2], g + weight_decay * p never cancels to near 0, where Adam's m / (sqrt(v) + eps)
// turns a rounding of g into a change of a whole step, and float and double part ways.
std::vector<double> grad_values(std::int64_t n, int step, std::size_t param, DType dt) {
  std::vector<double> g = values(n, 0.25, 1, int(7 * step + param));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (((i * 2654435761u + std::size_t(step)) >> 7) & 1) g[i] = -g[i];
    g[i] = round_to(g[i], dt);
  }
  return g;
}

// `steps` calls of the kernel on `dev`; parameters start from fixed values, state from 0.
GroupValues run_optimizer(const ferry::Device& dev, const OptimConfig& c, DType dt,
                          const std::vector<Shape>& shapes, int steps) {
  std::vector<Tensor> outputs;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    outputs.push_back(
        ferry::tensor(values(numel(shapes[i]), -2, 2, int(i)), shapes[i]).to(dt).to(dev));
    for (std::size_t k = 1; k < c.per(); ++k)
      outputs.push_back(ferry::zeros(shapes[i], {.dtype = dt, .device = dev}));
  }
  for (int step = 1; step <= steps; ++step) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      grads.push_back(
          ferry::tensor(grad_values(numel(shapes[i]), step, i, dt), shapes[i]).to(dt).to(dev));
    call(dev, c.adam ? "adam_step" : "sgd_step", grads, outputs,
         optim_attrs(c, step, shapes.size()));
  }
  GroupValues result;
  for (const Tensor& t : outputs) result.push_back(t.to_vector<double>());
  return result;
}

GroupValues reference_optimizer(const OptimConfig& c, DType dt, const std::vector<Shape>& shapes,
                                int steps) {
  GroupValues r;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::vector<double> p = values(numel(shapes[i]), -2, 2, int(i));
    for (double& v : p) v = round_to(v, dt);
    std::vector<std::vector<double>> state(c.per() - 1, std::vector<double>(p.size(), 0.0));
    for (int step = 1; step <= steps; ++step) {
      const std::vector<double> g = grad_values(numel(shapes[i]), step, i, dt);
      for (std::size_t e = 0; e < p.size(); ++e) {
        double s[3] = {0, 0, 0};
        for (std::size_t k = 0; k < state.size(); ++k) s[k] = state[k][e];
        reference_update(c, step, init_buffer(step, i), g[e], p[e], s);
        p[e] = round_to(p[e], dt);  // stored in the parameter's dtype after every step
        for (std::size_t k = 0; k < state.size(); ++k) state[k][e] = round_to(s[k], dt);
      }
    }
    r.push_back(p);
    for (auto& s : state) r.push_back(s);
  }
  return r;
}

void expect_group_near(const GroupValues& got, const GroupValues& want, double rtol, double atol,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t t = 0; t < got.size(); ++t)
    expect_near(got[t], want[t], rtol, atol, what + " tensor " + std::to_string(t));
}

// An empty parameter, small ones, a 2-D one, and (f32) one of more than 2^20 elements that
// the CPU splits across its threads.
std::vector<Shape> optim_shapes(bool large) {
  std::vector<Shape> s{{0}, {1}, {7}, {17, 3}, {1000}};
  if (large) s.push_back({(1 << 20) + 5});
  return s;
}

// The kernel computes in float and stores in dt; the reference in double and stores in dt,
// so stored values may differ by a rounding or two.
// Absolute: terms of size ~1 that cancel (m, the momentum buffer) keep their rounding error.
double optim_atol(DType dt) {
  return dt == DType::f64 ? 1e-14 : dt == DType::f32 ? 1e-6 : 0.08 * eps_of(dt);
}
double optim_rtol(DType dt) {
  return dt == DType::f32 ? 2e-6 : dt == DType::f64 ? 1e-13 : 8 * eps_of(dt);
}

TEST(TrainingKernels, OptimizerStepsMatchPyTorchRulesInDouble) {
  for (const OptimConfig& c : kOptimConfigs)
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      const auto shapes = optim_shapes(dt == DType::f32);
      const std::string what = c.name + " " + std::string(ferry::dtype_name(dt));
      expect_group_near(run_optimizer(cpu(), c, dt, shapes, 4),
                        reference_optimizer(c, dt, shapes, 4), optim_rtol(dt), optim_atol(dt),
                        what);
    }
}

// The CPU's f32 Adam runs vectorized variants of its loop (runtime/cpu/cpu_kernels_optim.cpp):
// they must give the bits of the scalar rule (math::adam_update in float, one element at a
// time, every operation rounded apart), which every other device computes.
TEST(TrainingKernels, CpuAdamInF32IsTheScalarRuleBitForBit) {
  for (const OptimConfig& c : kOptimConfigs) {
    if (!c.adam) continue;
    const auto shapes = optim_shapes(true);
    const GroupValues got = run_optimizer(cpu(), c, DType::f32, shapes, 3);
    std::size_t at = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const std::int64_t n = numel(shapes[i]);
      std::vector<float> p, m(std::size_t(n), 0.0f), v(m), vmax(m);
      for (double x : values(n, -2, 2, int(i))) p.push_back(float(x));
      for (int step = 1; step <= 3; ++step) {
        const ferry::Attrs a = optim_attrs(c, step, shapes.size());
        auto s = ferry::optim_args::adam_scalars<float>(a);
        s.step_size = float(a.floats("step_size")[i]);
        s.bias_correction2_sqrt = float(a.floats("bias_correction2_sqrt")[i]);
        const std::vector<double> g = grad_values(n, step, i, DType::f32);
        for (std::size_t e = 0; e < p.size(); ++e)
          ferry::math::adam_update<float>(s, float(g[e]), p[e], m[e], v[e], vmax[e]);
      }
      std::vector<std::vector<float>> want{p, m, v};
      if (c.amsgrad) want.push_back(vmax);
      for (const std::vector<float>& w : want) {
        const std::vector<double>& t = got[at++];
        ASSERT_EQ(t.size(), w.size());
        int differ = 0;
        for (std::size_t e = 0; e < w.size(); ++e) differ += float(t[e]) != w[e];
        EXPECT_EQ(differ, 0) << c.name << ": parameter " << i << ", tensor " << (at - 1) % c.per();
      }
    }
  }
}

TEST(TrainingKernels, VulkanOptimizerStepsMatchCpu) {
  SKIP_WITHOUT_VULKAN();
  for (const OptimConfig& c : kOptimConfigs)
    for (DType dt : kGpuFloats) {
      if (!vulkan_takes(dt)) continue;
      // Large only at the device's real storage range: the split run cuts small tensors.
      const auto shapes =
          optim_shapes(dt == DType::f32 && !std::getenv("FERRY_VULKAN_MAX_STORAGE_RANGE"));
      const std::string what = c.name + " " + std::string(ferry::dtype_name(dt)) + " on vulkan";
      const double rtol = dt == DType::f32 ? 1e-6 : 2 * eps_of(dt);
      expect_group_near(run_optimizer(vulkan(), c, dt, shapes, 3),
                        run_optimizer(cpu(), c, dt, shapes, 3), rtol, rtol * 1e-2, what);
    }
}

// ---- tensors larger than one storage-buffer binding (FERRY_VULKAN_MAX_STORAGE_RANGE) ----

TEST(TrainingKernels, VulkanSplitOptimizer) {
  SKIP_UNLESS_SMALL_RANGE();
  const std::int64_t n = std::int64_t(vulkan_storage_range());  // 4 bindings of f32
  for (const OptimConfig& c : kOptimConfigs) {
    const std::vector<Shape> shapes{{n}, {3}, {n / 3}};
    expect_group_near(run_optimizer(vulkan(), c, DType::f32, shapes, 2),
                      run_optimizer(cpu(), c, DType::f32, shapes, 2), 1e-6, 1e-8, c.name);
  }
}

// ---- bad input ----

TEST(TrainingKernels, BadInputToOptimizerKernelsRaisesTypedErrors) {
  std::vector<ferry::Device> devs{cpu()};
  if (ferry::is_available("vulkan")) devs.push_back(vulkan());
  if (ferry::is_available("cuda:0")) devs.push_back(ferry::Device("cuda:0"));
  for (const ferry::Device& dev : devs) {
    // Made on the CPU and moved: the base shader variant fills no f16.
    auto ones = [&](std::int64_t n, DType dt) { return ferry::ones({n}, {.dtype = dt}).to(dev); };
    auto zeros = [&](std::int64_t n, DType dt) { return ferry::zeros({n}, {.dtype = dt}).to(dev); };
    const DType i32 = DType::i32, f32 = DType::f32;
    // Integer parameters.
    EXPECT_FERRY_ERROR(
        call(dev, "adam_step", {ones(3, i32)}, {ones(3, i32), zeros(3, i32), zeros(3, i32)},
             optim_attrs(kOptimConfigs[0], 1, 1)),
        ferry::DTypeError, "adam_step", "i32");
    EXPECT_FERRY_ERROR(
        call(dev, "sgd_step", {ones(3, i32)}, {ones(3, i32)}, optim_attrs(kOptimConfigs[4], 1, 1)),
        ferry::DTypeError, "sgd_step");
    // A state of another dtype; the wrong number of outputs or per-parameter scalars; a
    // missing attribute.
    EXPECT_FERRY_ERROR(call(dev, "sgd_step", {ones(3, f32)}, {ones(3, f32), ones(3, DType::f16)},
                            optim_attrs(kOptimConfigs[5], 1, 1)),
                       ferry::DTypeError, "sgd_step");
    EXPECT_FERRY_ERROR(
        call(dev, "adam_step", {ones(3, f32)}, {ones(3, f32)}, optim_attrs(kOptimConfigs[0], 1, 1)),
        ferry::ShapeError, "adam_step");
    EXPECT_FERRY_ERROR(call(dev, "adam_step", {ones(3, f32), ones(2, f32)},
                            {ones(3, f32), zeros(3, f32), zeros(3, f32), ones(2, f32),
                             zeros(2, f32), zeros(2, f32)},
                            optim_attrs(kOptimConfigs[0], 1, 1)),
                       ferry::ShapeError, "step_size");
    EXPECT_THROW(call(dev, "sgd_step", {ones(3, f32)}, {ones(3, f32)}, ferry::Attrs{{"lr", 0.1}}),
                 ferry::Error);
    // A bad second parameter leaves the first one as it was.
    Tensor p0 = ones(4, f32);
    EXPECT_THROW(call(dev, "sgd_step", {ones(4, f32), ones(2, i32)}, {p0, ones(2, i32)},
                      optim_attrs(kOptimConfigs[4], 1, 2)),
                 ferry::DTypeError);
    EXPECT_EQ(p0.to_vector<float>(), std::vector<float>(4, 1.0f)) << dev.str();
  }
}

}  // namespace
