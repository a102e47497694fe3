// runtime/vulkan/vk_kernels_random.cpp — random_uniform, random_normal and random_int through
// shaders/random.comp: Philox-4x32-10 with counter offset + i for element i, the same numbers
// the CPU draws (include/ferry/kit/math/philox.hpp, docs/kernel-contract.md).
//
// The 64-bit seed, offset, low and range travel as pairs of 32-bit words, so the base shader
// variant needs no int64; only random_int with a range of 2^32 or more does (its 64-bit
// remainder), and is refused on devices without it.
#include <fmt/format.h>

#include <algorithm>

#include "abi/random.h"
#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint32_t kWorkgroup = 256;

void split(std::uint64_t v, abi::uvec2& words) {
  words[0] = std::uint32_t(v);
  words[1] = std::uint32_t(v >> 32);
}

// The shader's OP is the OpId (ferry_ops.glsl).
void draw(DeviceImpl& d, const OpCall& c) {
  const OpId op = c.op;
  const std::string_view name = c.name();
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& out = c.outputs.at(0);
  const DType dt = out.dtype;
  if (!op_info(op).kernel_dtypes().has(dt))
    throw UnsupportedError(
        fmt::format("{}: the vulkan kernel does not take {}", name, dtype_name(dt)));
  dev.require(dt, name);
  if (out.numel() == 0) return;
  if (!out.is_contiguous())
    throw ShapeError(fmt::format("{}: the vulkan kernel expects a contiguous output", name));

  abi::RandomParams p{};
  split(std::uint64_t(c.attrs.i("seed")), p.seed);
  split(std::uint64_t(c.attrs.i("offset")), p.offset);
  if (op == OpId::random_uniform) {
    p.p0 = float(c.attrs.f("low"));
    p.p1 = float(c.attrs.f("high"));
  } else if (op == OpId::random_normal) {
    p.p0 = float(c.attrs.f("mean"));
    p.p1 = float(c.attrs.f("std"));
  } else {
    const auto range = std::uint64_t(c.attrs.i("range"));
    if (range == 0) throw Error(fmt::format("{}: empty range", name));
    if (range >> 32 != 0 && !dev.full_variant())
      throw UnsupportedError(
          fmt::format("{}: a range of 2^32 or more needs 64-bit integers, which {} lacks", name,
                      dev.device().str()));
    split(std::uint64_t(c.attrs.i("low")), p.low);
    split(range, p.range);
  }
  const std::uint64_t n = std::uint64_t(out.numel());
  Binding b = dev.bind(out, Access::write);  // refuses more than 2^32 elements
  p.n = std::uint32_t(n);
  p.o_off = b.element_offset;
  const std::uint32_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
  const std::uint32_t groups =
      std::uint32_t(std::min<std::uint64_t>((n + wg - 1) / wg, dev.limits().max_groups_x));
  const abi::RandomSpec spec{.WG = wg, .OP = std::uint32_t(op), .DT = dtype_code(dt)};
  dev.dispatch({"random", spec.values(), {b}, &p, sizeof p, {groups, 1, 1}});
}

}  // namespace

void add_random_kernels(KernelTable& t) {
  for (OpId op : {OpId::random_uniform, OpId::random_normal, OpId::random_int})
    t.emplace_back(op, draw);
}

}  // namespace ferry::vulkan
