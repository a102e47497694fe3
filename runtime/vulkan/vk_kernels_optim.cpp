// runtime/vulkan/vk_kernels_optim.cpp — adam_step and sgd_step through shaders/optim.comp
// (docs/kernel-contract.md, "Ops for training").
//
// One dispatch per parameter, all recorded into the open command buffer: a group's
// parameters and their states are distinct tensors, so the barrier tracker finds no
// conflict between the dispatches and places no barrier (a barrier before the first one
// orders it after whatever wrote the gradients). A parameter larger than one storage-buffer
// binding is cut into parts that fit (vk_split.hpp), one dispatch each. Every tensor is
// checked before anything is recorded, so a bad call leaves every parameter as it was.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "abi/optim.h"
#include "ferry/error.hpp"
#include "ferry/kit/optim_args.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint32_t kWorkgroup = 256;
// The shader's OP is the OpId (ferry_ops.glsl).
constexpr std::uint32_t kAdam = std::uint32_t(OpId::adam_step),
                        kSgd = std::uint32_t(OpId::sgd_step);

constexpr std::size_t kBindings = 5;

// optim_args::check_group, and each parameter in a dtype this device computes.
std::size_t check_group(VulkanDevice& dev, const OpCall& c, std::size_t per) {
  const std::size_t n = optim_args::check_group(c, per, c.name());
  for (std::size_t i = 0; i < n; ++i) dev.require_op(c.op, c.inputs[i].dtype);
  return n;
}

// Hyper-parameter k (abi::HP_*) of a parameter of dtype dt: a float's bits, or a double's
// words for the f64 module (the shader's hp()).
void set_hp(abi::OptimParams& p, DType dt, std::uint32_t k, double v) {
  if (dt == DType::f64) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    p.hp[2 * k] = std::uint32_t(bits);
    p.hp[2 * k + 1] = std::uint32_t(bits >> 32);
  } else {
    const float f = float(v);
    std::memcpy(&p.hp[k], &f, 4);
  }
}

using optim_args::per_param_floats;

TensorArg flat(const TensorArg& t) {
  TensorArg f = t;
  f.sizes = {t.numel()};
  f.strides = {1};
  return f;
}

// Dispatches one parameter: views = grad, param, then its state tensors; `hp` the
// hyper-parameters (abi::HP_*) in double.
void dispatch_param(VulkanDevice& dev, std::uint32_t op, const std::vector<TensorArg>& views,
                    abi::OptimParams p, const std::array<double, abi::HP_COUNT>& hp) {
  const DType dt = views[1].dtype;
  for (std::uint32_t k = 0; k < abi::HP_COUNT; ++k) set_hp(p, dt, k, hp[k]);
  if (views[0].numel() == 0) return;
  std::vector<TensorArg> flat_views;
  for (const TensorArg& v : views) flat_views.push_back(flat(v));
  for_each_part(
      dev.limits(), flat_views, 0, 1, [&](const std::vector<TensorArg>& part, const auto&) {
        std::vector<Binding> bindings;
        for (std::size_t i = 0; i < part.size(); ++i) {
          // The parameter and its state are read and written: bound as writes, the barrier
          // tracker orders each dispatch after earlier reads and writes of those bytes.
          bindings.push_back(dev.bind(part[i], i == 0 ? Access::read : Access::write));
          p.off[i] = bindings.back().element_offset;
        }
        while (bindings.size() < kBindings) bindings.push_back(bindings[1]);  // unused by this call
        p.n = std::uint32_t(part[0].sizes[0]);
        const std::uint32_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
        const std::uint32_t groups =
            std::uint32_t(std::min<std::uint64_t>((p.n + wg - 1) / wg, dev.limits().max_groups_x));
        dev.dispatch({"optim",
                      abi::OptimSpec{.WG = wg, .OP = op, .DT = dtype_code(part[0].dtype)}.values(),
                      std::move(bindings),
                      &p,
                      sizeof p,
                      {groups, 1, 1},
                      op,
                      dt == DType::f64});
      });
}

void adam_step_kernel(DeviceImpl& d, const OpCall& c) {
  VulkanDevice& dev = vulkan_device(d);
  const bool amsgrad = c.attrs.b("amsgrad");
  const std::size_t per = amsgrad ? 4 : 3;
  const std::size_t n = check_group(dev, c, per);
  const auto& step_size = per_param_floats(c, "step_size", n, "adam_step");
  const auto& bc2 = per_param_floats(c, "bias_correction2_sqrt", n, "adam_step");
  const double lr = c.attrs.f("lr"), beta1 = c.attrs.f("beta1"), beta2 = c.attrs.f("beta2"),
               weight_decay = c.attrs.f("weight_decay");
  abi::OptimParams p{};
  p.flags = (amsgrad ? abi::F_AMSGRAD : 0u) | (c.attrs.b("maximize") ? abi::F_MAXIMIZE : 0u) |
            (c.attrs.b("decoupled_weight_decay") ? abi::F_DECOUPLED : 0u) |
            (weight_decay != 0 ? abi::F_WEIGHT_DECAY : 0u);
  // Combinations in double, each rounded once, as the CPU kernel and PyTorch do.
  std::array<double, abi::HP_COUNT> hp{};
  hp[abi::HP_LR] = lr;
  hp[abi::HP_BETA1] = beta1;
  hp[abi::HP_BETA2] = beta2;
  hp[abi::HP_ONE_MINUS_BETA1] = 1 - beta1;
  hp[abi::HP_ONE_MINUS_BETA2] = 1 - beta2;
  hp[abi::HP_EPS] = c.attrs.f("eps");
  hp[abi::HP_WEIGHT_DECAY] = weight_decay;
  hp[abi::HP_DECAY_FACTOR] = 1 - lr * weight_decay;
  for (std::size_t i = 0; i < n; ++i) {
    hp[abi::HP_STEP_SIZE] = step_size[i];
    hp[abi::HP_BIAS_CORRECTION2_SQRT] = bc2[i];
    std::vector<TensorArg> views{c.inputs[i]};
    for (std::size_t k = 0; k < per; ++k) views.push_back(c.outputs[i * per + k]);
    dispatch_param(dev, kAdam, views, p, hp);
  }
}

void sgd_step_kernel(DeviceImpl& d, const OpCall& c) {
  VulkanDevice& dev = vulkan_device(d);
  const double momentum = c.attrs.f("momentum"), weight_decay = c.attrs.f("weight_decay");
  const std::size_t per = momentum != 0 ? 2 : 1;
  const std::size_t n = check_group(dev, c, per);
  const std::vector<std::int64_t> init = optim_args::sgd_init_buffer(c, n);
  abi::OptimParams p{};
  const std::uint32_t flags = (momentum != 0 ? abi::F_MOMENTUM : 0u) |
                              (weight_decay != 0 ? abi::F_WEIGHT_DECAY : 0u) |
                              (c.attrs.b("nesterov") ? abi::F_NESTEROV : 0u) |
                              (c.attrs.b("maximize") ? abi::F_MAXIMIZE : 0u);
  std::array<double, abi::HP_COUNT> hp{};
  hp[abi::HP_LR] = c.attrs.f("lr");
  hp[abi::HP_MOMENTUM] = momentum;
  hp[abi::HP_ONE_MINUS_DAMPENING] = 1 - c.attrs.f("dampening");
  hp[abi::HP_WEIGHT_DECAY] = weight_decay;
  for (std::size_t i = 0; i < n; ++i) {
    p.flags = flags | (init[i] != 0 ? abi::F_INIT_BUFFER : 0u);
    std::vector<TensorArg> views{c.inputs[i]};
    for (std::size_t k = 0; k < per; ++k) views.push_back(c.outputs[i * per + k]);
    dispatch_param(dev, kSgd, views, p, hp);
  }
}

}  // namespace

void add_optim_kernels(KernelTable& table) {
  table.emplace_back(OpId::adam_step, adam_step_kernel);
  table.emplace_back(OpId::sgd_step, sgd_step_kernel);
}

}  // namespace ferry::vulkan
