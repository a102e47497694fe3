// runtime/vulkan/vk_kernels_batch_norm.cpp — batch_norm and batch_norm_backward through
// shaders/batch_norm.comp (docs/kernel-contract.md; the attributes are the CPU kernel's).
//
// Note [Vulkan batch_norm]
// A channel's values are N runs of H·W elements, one per sample, C runs apart. Composed, the
// statistics, the normalisation and the backward read a ResNet activation about ten times
// forward and twenty backward, a dispatch each. The kernel reads x twice forward (the sums,
// then y) and g and x twice backward, in three dispatches:
// 1. SUMS: a workgroup per channel and chunk of samples. The chunks make enough workgroups to
//    fill the device (Note [Row kernel geometry]: a GPU's 2^17 threads, lavapipe's 4096)
//    where the channels are few, none of fewer than kMinPerThread elements a thread.
// 2. FINISH: a thread per channel merges its chunks in order (deterministic: no atomics) into
//    the statistics, or the weight's and bias's gradients, and the per-channel coefficients.
// 3. APPLY: y or dx, a thread per element (plane_grid: a workgroup a plane on lavapipe).
// Tensors larger than one binding are cut between samples, then between channels
// (vk_split.hpp); every part's chunks go to one scratch. One channel of one sample larger than
// a binding raises UnsupportedError. The activations are contiguous: Vulkan does not claim
// DeviceCapabilities::channels_last_cnn, so the core hands it NCHW copies of channels-last ones.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "abi/batch_norm.h"
#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint64_t kMinPerThread = 16;  // SUMS: elements a thread adds, at least
constexpr std::uint64_t kMaxCount = std::uint64_t(1) << 31;  // 32-bit indices in the shader

// One call's operands (docs/kernel-contract.md's order).
struct BatchNorm {
  bool backward = false, training = false;
  const TensorArg* a = nullptr;    // x, or the backward's g
  const TensorArg* b = nullptr;    // the backward's x
  const TensorArg* out = nullptr;  // y or dx
  const TensorArg *w = nullptr, *bias = nullptr;
  const TensorArg *mean_in = nullptr, *var_in = nullptr;  // eval's running ones; the backward's
  const TensorArg *stat_a = nullptr, *stat_b = nullptr;   // mean and var, or dbias and dweight
};

BatchNorm operands(const OpCall& c, bool backward) {
  BatchNorm o{.backward = backward, .training = c.attrs.b("training")};
  const bool has_w = c.attrs.b("has_weight");
  std::size_t next = 0;
  if (backward) {
    o.a = &c.inputs.at(next++);
    o.b = &c.inputs.at(next++);
    o.mean_in = &c.inputs.at(next++);
    o.var_in = &c.inputs.at(next++);
    if (has_w) o.w = &c.inputs.at(next++);
    o.out = &c.outputs.at(0);
    o.stat_b = &c.outputs.at(1);  // dweight
    o.stat_a = &c.outputs.at(2);  // dbias
  } else {
    o.a = &c.inputs.at(next++);
    if (has_w) o.w = &c.inputs.at(next++);
    if (c.attrs.b("has_bias")) o.bias = &c.inputs.at(next++);
    if (!o.training) {
      o.mean_in = &c.inputs.at(next++);
      o.var_in = &c.inputs.at(next++);
    }
    o.out = &c.outputs.at(0);
    if (o.training) {
      o.stat_a = &c.outputs.at(1);
      o.stat_b = &c.outputs.at(2);
    }
  }
  const TensorArg& x = backward ? *o.b : *o.a;
  const DType stats = x.dtype == DType::f64 ? DType::f64 : DType::f32;
  if (!is_floating(x.dtype))
    throw DTypeError(
        fmt::format("{}: takes a floating input, not {}", c.name(), dtype_name(x.dtype)));
  if (x.ndim() < 2 || x.sizes.at(1) == 0)
    throw ShapeError(fmt::format("{}: the vulkan kernel takes [N, C, *] with C > 0", c.name()));
  for (const TensorArg* t : {o.a, o.b, o.out})
    if (t && (t->dtype != x.dtype || t->sizes != x.sizes || !t->is_contiguous()))
      throw Error(fmt::format(
          "{}: the vulkan kernel takes contiguous activations of one dtype and shape", c.name()));
  for (const TensorArg* t : {o.w, o.bias, o.mean_in, o.var_in, o.stat_a, o.stat_b}) {
    if (!t) continue;
    const DType want = t == o.w || t == o.bias ? x.dtype : stats;
    if (t->dtype != want || t->sizes != std::vector<std::int64_t>{x.sizes[1]} ||
        !t->is_contiguous())
      throw ShapeError(fmt::format("{}: the per-channel vectors must be contiguous [{}] {}",
                                   c.name(), x.sizes[1], dtype_name(want)));
  }
  return o;
}

void batch_norm_kernel(DeviceImpl& d, const OpCall& c, bool backward) {
  VulkanDevice& dev = vulkan_device(d);
  const KernelLimits& lim = dev.limits();
  const BatchNorm o = operands(c, backward);
  const TensorArg& x = backward ? *o.b : *o.a;
  dev.require_op(c.op, x.dtype);
  const std::int64_t N = x.sizes[0], C = x.sizes[1];
  const std::int64_t area = N == 0 ? 0 : x.numel() / (N * C);
  if (N * area == 0)  // the core composes empty inputs (Note [Composite ops])
    throw ShapeError(fmt::format("{}: the vulkan kernel takes a non-empty input", c.name()));
  if (std::uint64_t(C) >= kMaxCount || std::uint64_t(area) >= kMaxCount)
    throw UnsupportedError(
        fmt::format("{}: {} channels of {} elements a sample exceed the Vulkan kernel's 2^31 limit",
                    c.name(), C, area));
  const bool f64 = x.dtype == DType::f64;
  const DType ftype = f64 ? DType::f64 : DType::f32;  // the statistics', sums' and coefficients'

  // The parts, each within one binding: samples [n0, n0 + samples), channels [c0, c0 + part_c).
  struct Part {
    std::vector<TensorArg> views;  // a (, b), out
    std::int64_t c0;
  };
  std::vector<Part> parts;
  std::vector<TensorArg> views{*o.a};
  if (o.b) views.push_back(*o.b);
  views.push_back(*o.out);
  for_each_part(lim, views, 0, 2, [&](const auto& part, const auto& at) {
    for (const TensorArg& t : part)
      if (!fits(lim, t))
        throw UnsupportedError(
            fmt::format("{}: one channel of one sample ({} elements) spans more than the device's "
                        "storage-buffer range ({} bytes)",
                        c.name(), area, lim.max_storage_range));
    parts.push_back({part, at[1]});
  });

  const std::uint32_t wg = workgroup_size(lim);
  abi::BatchNormParams p{};
  p.channels = std::uint32_t(C);
  p.area = std::uint32_t(area);
  const double eps = c.attrs.f("eps");
  p.eps = float(eps);
  std::memcpy(p.eps_bits, &eps, sizeof eps);
  abi::BatchNormSpec spec{.WG = wg,
                          .DT = dtype_code(x.dtype),
                          .MODE = abi::BATCH_NORM_MODE_SUMS,
                          .BACKWARD = backward,
                          .TRAINING = o.training,
                          .HAS_W = o.w != nullptr,
                          .HAS_B = o.bias != nullptr};
  const std::uint32_t op = std::uint32_t(c.op);
  // One dispatch of the eight slots (batch_norm.comp's list), their offsets passed.
  auto dispatch = [&](const std::array<Binding, 8>& b, std::array<std::uint32_t, 3> groups) {
    for (std::size_t i = 0; i < b.size(); ++i) p.off[i] = b[i].element_offset;
    dev.dispatch(
        {"batch_norm", spec.values(), {b.begin(), b.end()}, &p, sizeof p, groups, op, f64});
  };
  auto groups = [&](std::uint64_t n) {
    return std::uint32_t(std::clamp<std::uint64_t>(n, 1, lim.max_groups_x));
  };
  // A scratch of `count` FTYPE values; the device keeps its memory until the GPU is done.
  std::vector<std::unique_ptr<Buffer>> scratch;
  auto make_scratch = [&](std::uint64_t count) {
    scratch.push_back(dev.allocate(std::size_t(count * dtype_size(ftype))));
    return TensorArg{scratch.back().get(), 0, {std::int64_t(count)}, {1}, ftype};
  };

  // 1. SUMS, where the batch's sums are needed.
  const bool sums = o.training || backward;
  std::uint64_t chunks = 0;
  TensorArg sums_t;
  if (sums) {
    const std::uint64_t target = (lim.row_target_threads + wg - 1) / wg;  // workgroups
    const std::uint64_t per_chunk = std::uint64_t(wg) * kMinPerThread;
    const std::uint64_t want = std::clamp<std::uint64_t>(
        std::min((target + C - 1) / std::uint64_t(C), std::uint64_t(N * area) / per_chunk), 1,
        std::uint64_t(N));
    const std::int64_t chunk = std::int64_t((std::uint64_t(N) + want - 1) / want);
    // A part's chunks in the scratch: one cut between channels shares its samples' chunks.
    std::vector<std::uint64_t> first(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].c0 != 0) {
        first[i] = first[i - 1];
        continue;
      }
      first[i] = chunks;
      chunks += std::uint64_t((parts[i].views[0].sizes[0] + chunk - 1) / chunk);
    }
    sums_t = make_scratch(chunks * abi::BATCH_NORM_SLOTS * std::uint64_t(C));
    const Binding sw = dev.bind(sums_t, Access::write);
    p.chunk = std::uint32_t(chunk);
    const std::optional<Binding> mean_b =
        backward ? std::optional(dev.bind(*o.mean_in, Access::read)) : std::nullopt;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const Part& part = parts[i];
      const Binding ab = dev.bind(part.views[0], Access::read);
      const Binding bb = backward ? dev.bind(part.views[1], Access::read) : ab;
      p.c0 = std::uint32_t(part.c0);
      p.part_c = std::uint32_t(part.views[0].sizes[1]);
      p.samples = std::uint32_t(part.views[0].sizes[0]);
      p.chunk0 = std::uint32_t(first[i]);
      dispatch({sw, sw, sw, ab, bb, mean_b.value_or(ab), ab, ab},
               {groups(p.part_c), groups((p.samples + p.chunk - 1) / p.chunk), 1});
    }
  }

  // 2. FINISH: the statistics or the parameters' gradients, and the coefficients.
  const TensorArg coef_t = make_scratch(4 * std::uint64_t(C));
  {
    spec.MODE = abi::BATCH_NORM_MODE_FINISH;
    const Binding cw = dev.bind(coef_t, Access::write);
    const Binding in = sums ? dev.bind(sums_t, Access::read) : dev.bind(*o.mean_in, Access::read);
    const Binding ab = o.stat_a ? dev.bind(*o.stat_a, Access::write) : cw;
    const Binding bb = o.stat_b ? dev.bind(*o.stat_b, Access::write) : cw;
    const Binding wb = o.w ? dev.bind(*o.w, Access::read) : in;
    const Binding biasb = o.bias ? dev.bind(*o.bias, Access::read) : in;
    const Binding mb = o.mean_in ? dev.bind(*o.mean_in, Access::read) : in;
    const Binding vb = o.var_in ? dev.bind(*o.var_in, Access::read) : in;
    p.chunks = std::uint32_t(chunks);
    dispatch({cw, ab, bb, in, wb, biasb, mb, vb}, {groups((std::uint64_t(C) + wg - 1) / wg), 1, 1});
  }

  // 3. APPLY, a part at a time.
  spec.MODE = abi::BATCH_NORM_MODE_APPLY;
  const Binding cr = dev.bind(coef_t, Access::read);
  for (const Part& part : parts) {
    const Binding ab = dev.bind(part.views[0], Access::read);
    const Binding bb = backward ? dev.bind(part.views[1], Access::read) : ab;
    const Binding ob = dev.bind(part.views.back(), Access::write);
    p.c0 = std::uint32_t(part.c0);
    p.part_c = std::uint32_t(part.views[0].sizes[1]);
    p.samples = std::uint32_t(part.views[0].sizes[0]);
    dispatch({ob, ob, ob, ab, bb, cr, ab, ab},
             plane_grid(lim, std::uint64_t(p.samples) * p.part_c, std::uint64_t(area), wg));
  }
}

}  // namespace

void add_batch_norm_kernels(KernelTable& table) {
  table.emplace_back(OpId::batch_norm,
                     [](DeviceImpl& d, const OpCall& c) { batch_norm_kernel(d, c, false); });
  table.emplace_back(OpId::batch_norm_backward,
                     [](DeviceImpl& d, const OpCall& c) { batch_norm_kernel(d, c, true); });
}

}  // namespace ferry::vulkan
