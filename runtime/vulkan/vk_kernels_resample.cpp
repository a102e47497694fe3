// runtime/vulkan/vk_kernels_resample.cpp — interpolate's 2-D kernels (interpolate and
// interpolate_backward) through shaders/resample.comp (docs/kernel-contract.md; the operands
// are the CPU kernels', checked by ferry/kit/resample_args.hpp).
//
// Note [Vulkan resampling]
// Composed, a 2-D interpolate is per dim an index_select of every tap, a multiply by the
// weights and a sum over the taps: passes over tensors as large as the output times the taps,
// and its backward scatters through index_add. The forward kernel reads each output's taps
// where they lie and writes each output once. The backward kernel is a gather, as pooling's
// (Note [Vulkan pooling]): a thread per input element adds the gradients of the outputs that
// read it, so no two threads write one element and no atomics are needed (a scatter would
// need atomic float adds, in no fixed order). A first dispatch finds, per tap and input
// position of each dim, its range of outputs in the tables by binary search, since each tap's
// indices do not decrease along the outputs (every mode's tables are monotone:
// docs/kernel-contract.md says so of the contract), into a scratch of (taps_h * H + taps_w * W)
// pairs: a search per position, not per element (per element, the backward of bilinear x2 at
// [32, 64, 112, 112] took 3.9 s on lavapipe, against 2.9 s). The terms and their order are the
// CPU's (Note [Resampling on the CPU]). The taps are specialization constants (1, 2 or 4: the
// loops over them unroll, which took the forward from 3.5 s to 1.5 s there); more than
// RESAMPLE_MAX_TAPS raise UnsupportedError.
// Tensors larger than one binding are cut between samples, then between one sample's
// channels (vk_split.hpp): the planes are independent; the tables are bound whole. One plane
// larger than a binding raises UnsupportedError. The activations are contiguous: Vulkan does
// not claim DeviceCapabilities::channels_last_cnn, so the core hands it NCHW copies.
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <limits>
#include <memory>

#include "abi/resample.h"
#include "ferry/error.hpp"
#include "ferry/kit/resample_args.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// x -> y, or g -> dx, by the tables of inputs 1-4.
void resample_kernel(DeviceImpl& d, const OpCall& c, std::uint32_t mode) {
  const bool backward = mode == abi::RESAMPLE_BACKWARD;
  VulkanDevice& dev = vulkan_device(d);
  const KernelLimits& lim = dev.limits();
  const TensorArg& a = c.inputs.at(0);   // x, or g
  const TensorArg& o = c.outputs.at(0);  // y, or dx
  const ResampleArgs g = backward ? resample_args(c, o, a) : resample_args(c, a, o);
  for (const TensorArg* t : {&a, &o})
    if (!t->is_contiguous())
      throw Error(fmt::format("{}: the vulkan kernel takes contiguous tensors", c.name()));
  dev.require_op(c.op, a.dtype);
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  if (g.h * g.w > kMax || g.oh * g.ow > kMax || g.taps_h * g.oh > kMax || g.taps_w * g.ow > kMax)
    throw UnsupportedError(
        fmt::format("{}: planes of {} x {} (or {} x {}) exceed the Vulkan kernel's 2^31 positions",
                    c.name(), g.h, g.w, g.oh, g.ow));
  if (g.taps_h > std::int64_t(abi::RESAMPLE_MAX_TAPS) ||
      g.taps_w > std::int64_t(abi::RESAMPLE_MAX_TAPS))
    throw UnsupportedError(fmt::format("{}: the Vulkan kernel takes at most {} taps, got {} and {}",
                                       c.name(), abi::RESAMPLE_MAX_TAPS, g.taps_h, g.taps_w));
  if (a.numel() == 0 || o.numel() == 0) return;  // the core composes empty inputs

  abi::ResampleParams p{};
  p.h = std::uint32_t(g.h);
  p.w = std::uint32_t(g.w);
  p.oh = std::uint32_t(g.oh);
  p.ow = std::uint32_t(g.ow);
  // The tables, bound whole: each is [taps, OH] or [taps, OW] and small.
  std::array<Binding, 4> tables;
  for (std::size_t i = 0; i < tables.size(); ++i)
    tables[i] = dev.bind(c.inputs.at(i + 1), Access::read);
  const std::uint32_t wg = workgroup_size(lim);
  abi::ResampleSpec spec{.WG = wg,
                         .DT = dtype_code(a.dtype),
                         .MODE = mode,
                         .TAPS_H = std::uint32_t(g.taps_h),
                         .TAPS_W = std::uint32_t(g.taps_w)};
  // The loop iterations an element takes (Note [Loop budget] in vk_kernels.hpp), every loop
  // counted: its taps (forward), or for each tap the range of outputs it reaches, up to
  // ceil(out / in) + 1 a dim (backward). A bilinear upsampling by 32 gave a backward 99% off
  // on lavapipe, its threads taking 1,024 elements each.
  const std::uint64_t th = std::uint64_t(g.taps_h), tw = std::uint64_t(g.taps_w);
  const std::uint64_t rh = std::uint64_t((g.oh + g.h - 1) / std::max<std::int64_t>(g.h, 1) + 1),
                      rw = std::uint64_t((g.ow + g.w - 1) / std::max<std::int64_t>(g.w, 1) + 1);
  const std::uint64_t cost =
      backward ? tw + th * (2 + rh * (1 + tw * (1 + rw))) : 2 * tw + th * (1 + tw) + th;
  const auto dispatch = [&](const std::array<Binding, 7>& b, std::uint64_t planes,
                            std::uint64_t area) {
    for (std::size_t i = 0; i < b.size(); ++i) p.off[i] = b[i].element_offset;
    p.planes = std::uint32_t(planes);
    const std::array<std::uint32_t, 3> grid =
        plane_grid_within_budget(dev, c.name(), planes, area, wg, cost);
    dev.dispatch({"resample",
                  spec.values(),
                  {b.begin(), b.end()},
                  &p,
                  sizeof p,
                  grid,
                  std::uint32_t(c.op),
                  a.dtype == DType::f64});
  };
  // The backward's ranges of outputs per (tap, input position) of each dim, once a call, into
  // a scratch the device frees when the GPU is done with it.
  std::unique_ptr<Buffer> scratch;
  Binding ranges{};
  if (backward) {
    const std::uint64_t count = std::uint64_t(g.taps_h * g.h + g.taps_w * g.w);
    scratch = dev.allocate(std::size_t(2 * count * sizeof(std::uint32_t)));
    const TensorArg t{scratch.get(), 0, {std::int64_t(2 * count)}, {1}, DType::i32};
    spec.MODE = abi::RESAMPLE_RANGES;
    const Binding w = dev.bind(t, Access::write);
    ranges = dev.bind(t, Access::read);
    dispatch({w, ranges, tables[0], tables[1], tables[2], tables[3], ranges}, 1, count);
    spec.MODE = mode;
  }
  for_each_part(lim, {o, a}, 0, 2, [&](const auto& part, const auto&) {
    for (const TensorArg& t : part)
      if (!fits(lim, t))
        throw UnsupportedError(fmt::format(
            "{}: one plane spans more than the device's storage-buffer range ({} bytes)", c.name(),
            lim.max_storage_range));
    const Binding read = dev.bind(part[1], Access::read);
    dispatch({dev.bind(part[0], Access::write), read, tables[0], tables[1], tables[2], tables[3],
              backward ? ranges : read},
             std::uint64_t(part[0].sizes[0] * part[0].sizes[1]),
             backward ? std::uint64_t(g.h * g.w) : std::uint64_t(g.oh * g.ow));
  });
}

}  // namespace

void add_resample_kernels(KernelTable& table) {
  table.emplace_back(OpId::interpolate,
                     [](DeviceImpl& d, const OpCall& c) { resample_kernel(d, c, abi::RESAMPLE); });
  table.emplace_back(OpId::interpolate_backward, [](DeviceImpl& d, const OpCall& c) {
    resample_kernel(d, c, abi::RESAMPLE_BACKWARD);
  });
}

}  // namespace ferry::vulkan
