// runtime/vulkan/vk_kernels_random.cpp — random_uniform, random_normal and random_int through
// shaders/random.comp: Philox-4x32-10 with counter offset + i for element i, the same numbers
// the CPU draws (include/ferry/kit/math/philox.hpp, docs/kernel-contract.md).
//
// A tensor beyond one storage-buffer binding is drawn in parts, each from its own first counter.
//
// The 64-bit seed, offset, low and range travel as pairs of 32-bit words, so the base shader
// variant needs no int64; only random_int with a range of 2^32 or more does (its 64-bit
// remainder), and is refused on devices without it.
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "abi/random.h"
#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

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
  dev.require_op(op, dt);
  if (out.numel() == 0) return;
  if (!out.is_contiguous())
    throw ShapeError(fmt::format("{}: the vulkan kernel expects a contiguous output", name));

  abi::RandomParams p{};
  split(std::uint64_t(c.attrs.i("seed")), p.seed);
  if (op != OpId::random_int) {
    const bool uniform = op == OpId::random_uniform;
    const double p0 = c.attrs.f(uniform ? "low" : "mean"), p1 = c.attrs.f(uniform ? "high" : "std");
    p.p0 = float(p0);
    p.p1 = float(p1);
    split(std::bit_cast<std::uint64_t>(p0), p.d0);  // the f64 modules draw with these
    split(std::bit_cast<std::uint64_t>(p1), p.d1);
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
  // The output as one flat run, drawn in parts that each fit a binding (vk_split.hpp): element
  // i is counter offset + i in every part, so the numbers do not depend on the cut.
  TensorArg flat = out;
  flat.sizes = {out.numel()};
  flat.strides = {1};
  const std::int64_t n = flat.sizes[0];
  const std::int64_t step = std::max<std::int64_t>(1, max_chunk(dev.limits(), flat, 0));
  const std::uint64_t offset = std::uint64_t(c.attrs.i("offset"));
  const std::uint32_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
  const abi::RandomSpec spec{.WG = wg, .OP = std::uint32_t(op), .DT = dtype_code(dt)};
  for (std::int64_t s = 0; s < n; s += step) {
    const std::uint64_t len = std::uint64_t(std::min(step, n - s));
    Binding b = dev.bind(narrow(flat, 0, s, std::int64_t(len)), Access::write);
    split(offset + std::uint64_t(s), p.offset);
    p.n = std::uint32_t(len);
    p.o_off = b.element_offset;
    const std::uint32_t groups =
        std::uint32_t(std::min<std::uint64_t>((len + wg - 1) / wg, dev.limits().max_groups_x));
    dev.dispatch(
        {"random", spec.values(), {b}, &p, sizeof p, {groups, 1, 1}, spec.OP, dt == DType::f64});
  }
}

}  // namespace

void add_random_kernels(KernelTable& t) {
  for (OpId op : {OpId::random_uniform, OpId::random_normal, OpId::random_int})
    t.emplace_back(op, draw);
}

}  // namespace ferry::vulkan
