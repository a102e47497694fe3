// runtime/vulkan/vk_kernels_pool.cpp — max_pool1d/2d, avg_pool1d/2d and their backward kernels
// through shaders/pool.comp (docs/kernel-contract.md; the attributes are the CPU kernels').
//
// Note [Vulkan pooling]
// Composed, pooling gathers every window into memory (nine values a 3x3 window: 2.25 times
// the input at ResNet-18's stride 2) before its argmax or sum, and its backward scatters
// through index_add. The forward kernels read each window's taps where they lie and write
// each output once. The backward kernels are gathers: a thread per input element adds the
// gradients of the windows that hold it (and, for max pooling, chose it), in output order, so
// no two threads write one element and the sum is the CPU's, with no atomics (a scatter would
// need atomic float adds, in no fixed order; PyTorch's CUDA kernels gather alike for NCHW).
// For max pooling it is the CPU's bit for bit; for average pooling the terms and their order
// are the CPU's (g / divisor, output order), the division the device's. The indices reach
// max_pool_backward only from the forward (autograd's max_poolBackward), so each lies inside
// its window; one that did not would be matched by no thread and add nothing, where the CPU's
// scatter raises ShapeError.
// Tensors larger than one binding are cut between samples, then between one sample's
// channels (vk_split.hpp): the planes are independent. One plane larger than a binding
// raises UnsupportedError. The activations are contiguous: Vulkan does not claim
// DeviceCapabilities::channels_last_cnn, so the core hands it NCHW copies of channels-last ones.
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "abi/pool.h"
#include "ferry/error.hpp"
#include "ferry/kit/pool_geometry.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// max pooling: x -> values, indices; g, indices -> dx. Average pooling: x -> y; g -> dx
// (docs/kernel-contract.md).
void pool_kernel(DeviceImpl& d, const OpCall& c, std::uint32_t mode) {
  const bool backward = mode == abi::POOL_MAX_BACKWARD || mode == abi::POOL_AVG_BACKWARD;
  const bool max = mode == abi::POOL_MAX || mode == abi::POOL_MAX_BACKWARD;
  VulkanDevice& dev = vulkan_device(d);
  const KernelLimits& lim = dev.limits();
  const TensorArg& a = c.inputs.at(0);   // x, or g
  const TensorArg& o = c.outputs.at(0);  // the values, or dx
  const TensorArg &in = backward ? o : a, &out = backward ? a : o;  // input- and output-shaped
  // The indices (max pooling), else the tensor read again in their slot.
  const TensorArg& idx = !max ? a : backward ? c.inputs.at(1) : c.outputs.at(1);
  if (!is_floating(a.dtype) || o.dtype != a.dtype)
    throw DTypeError(fmt::format("{}: the vulkan kernel takes one floating dtype, got {} and {}",
                                 c.name(), dtype_name(a.dtype), dtype_name(o.dtype)));
  if (max) check_pool_indices(c, idx, out);
  for (const TensorArg* t : {&a, &o, &idx})
    if (!t->is_contiguous())
      throw Error(fmt::format("{}: the vulkan kernel takes contiguous tensors", c.name()));
  dev.require_op(c.op, a.dtype);
  const Pool2d g = pool2d_geometry(c, in, out);
  if (in.sizes[0] != out.sizes[0] || in.sizes[1] != out.sizes[1])
    throw ShapeError(fmt::format("{}: the input and output differ in batch or channels", c.name()));
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();  // the shader's ints
  if (g.h * g.w > kMax || g.oh * g.ow > kMax)
    throw UnsupportedError(fmt::format(
        "{}: planes of {} x {} exceed the Vulkan kernel's 2^31 positions", c.name(), g.h, g.w));
  // An adaptive window's ends are products of a position and a size (pool_windows.hpp).
  if (g.adaptive && ((g.h + 1) * (g.oh + 1) > kMax || (g.w + 1) * (g.ow + 1) > kMax))
    throw UnsupportedError(fmt::format(
        "{}: adaptive pooling of {} x {} to {} x {} exceeds the Vulkan kernel's 32-bit window "
        "arithmetic",
        c.name(), g.h, g.w, g.oh, g.ow));
  if (in.numel() == 0 || out.numel() == 0) return;  // the core composes empty inputs

  abi::PoolParams p{};
  p.h = std::uint32_t(g.h);
  p.w = std::uint32_t(g.w);
  p.oh = std::uint32_t(g.oh);
  p.ow = std::uint32_t(g.ow);
  p.kh = std::uint32_t(g.kh);
  p.kw = std::uint32_t(g.kw);
  p.sh = std::uint32_t(g.sh);
  p.sw = std::uint32_t(g.sw);
  p.ph = std::uint32_t(g.ph);
  p.pw = std::uint32_t(g.pw);
  p.dh = std::uint32_t(g.dh);
  p.dw = std::uint32_t(g.dw);
  p.adaptive = g.adaptive ? 1u : 0u;
  if (!max) {
    const AvgPoolDivisor divisor = AvgPoolDivisor::of(c);
    if (divisor.divisor_override < -kMax || divisor.divisor_override > kMax)
      throw UnsupportedError(
          fmt::format("{}: the Vulkan kernel takes a divisor_override of at "
                      "most 2^31 - 1 in magnitude, got {}",
                      c.name(), divisor.divisor_override));
    p.divisor = std::int32_t(divisor.divisor_override);
    p.count_include_pad = divisor.count_include_pad ? 1u : 0u;
  }
  const std::uint32_t wg = workgroup_size(lim);
  const abi::PoolSpec spec{.WG = wg, .DT = dtype_code(a.dtype), .MODE = mode};
  // The loop iterations an element takes (Note [Loop budget] in vk_kernels.hpp), every loop
  // counted: the taps of its window (forward), or the windows that cover it (backward), a trip
  // per row and per column; adaptive windows span up to ceil(in / out) + 1 positions, and
  // cover up to ceil(out / in) + 1. An 8 x 8 window at stride 1 gave wrong results over a
  // 2048 x 2048 plane on lavapipe, its threads taking 1,024 elements each.
  auto extent = [&](std::int64_t in_size, std::int64_t out_size, std::int64_t k, std::int64_t s,
                    std::int64_t dil) -> std::uint64_t {
    if (g.adaptive)
      return backward ? std::uint64_t((out_size + in_size - 1) / in_size + 1)
                      : std::uint64_t((in_size + out_size - 1) / out_size + 1);
    return backward ? std::uint64_t(((k - 1) * dil) / s + 2) : std::uint64_t(k);
  };
  const std::uint64_t cost =
      1 + extent(g.h, g.oh, g.kh, g.sh, g.dh) * (1 + extent(g.w, g.ow, g.kw, g.sw, g.dw));
  // The views cut alike: the written one first, then the one read, then the indices (or the
  // one read again).
  for_each_part(lim, {o, a, idx}, 0, 2, [&](const auto& part, const auto&) {
    for (const TensorArg& t : part)
      if (!fits(lim, t))
        throw UnsupportedError(fmt::format(
            "{}: one plane spans more than the device's storage-buffer range ({} bytes)", c.name(),
            lim.max_storage_range));
    const Binding ob = dev.bind(part[0], Access::write), ab = dev.bind(part[1], Access::read);
    // pool.comp's slots: written, written indices, read, read indices.
    std::array<Binding, 4> b{ob, ob, ab, ab};
    if (max) b[backward ? 3 : 1] = dev.bind(part[2], backward ? Access::read : Access::write);
    for (std::size_t i = 0; i < b.size(); ++i) p.off[i] = b[i].element_offset;
    p.planes = std::uint32_t(part[0].sizes[0] * part[0].sizes[1]);
    const std::uint64_t area = backward ? std::uint64_t(g.h * g.w) : std::uint64_t(g.oh * g.ow);
    const std::array<std::uint32_t, 3> grid =
        plane_grid_within_budget(dev, c.name(), p.planes, area, wg, cost);
    dev.dispatch({"pool",
                  spec.values(),
                  {b.begin(), b.end()},
                  &p,
                  sizeof p,
                  grid,
                  std::uint32_t(c.op),
                  a.dtype == DType::f64});
  });
}

}  // namespace

void add_pool_kernels(KernelTable& table) {
  const auto add = [&](OpId op, std::uint32_t mode) {
    table.emplace_back(op, [mode](DeviceImpl& d, const OpCall& c) { pool_kernel(d, c, mode); });
  };
  add(OpId::max_pool1d, abi::POOL_MAX);
  add(OpId::max_pool2d, abi::POOL_MAX);
  add(OpId::max_pool_backward, abi::POOL_MAX_BACKWARD);
  add(OpId::avg_pool1d, abi::POOL_AVG);
  add(OpId::avg_pool2d, abi::POOL_AVG);
  add(OpId::avg_pool_backward, abi::POOL_AVG_BACKWARD);
}

}  // namespace ferry::vulkan
