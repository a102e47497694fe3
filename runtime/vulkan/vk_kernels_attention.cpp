// runtime/vulkan/vk_kernels_attention.cpp — scaled_dot_product_attention and its backward
// through shaders/attention.comp (Note [Fused attention on Vulkan] there; the form of the
// call: Note [Scaled dot-product attention] in runtime/nn/attention.cpp). The operands are
// checked once, for every backend, by ferry/kit/attention_args.hpp. The forward pass of f16 and
// bf16 heads also runs on cooperative matrices where that path is on (Note [Attention on
// cooperative matrices]).
//
// Each tensor is bound whole: the kernel walks whole heads, so a tensor larger than one
// storage-buffer binding is an UnsupportedError naming it (at the head sizes attention runs,
// q, k and v are far smaller than the scores the composition would hold).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "abi/attention.h"
#include "ferry/error.hpp"
#include "ferry/kit/attention_args.hpp"
#include "ferry/profiler.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint32_t kWorkgroup = 64;     // rows per workgroup, one per thread
constexpr std::uint32_t kTileRows = 16;      // BC: rows of the shared tiles
constexpr std::uint32_t kMaxHeadChunk = 64;  // EC, EVC: head-dim elements a thread holds
constexpr std::uint64_t kMaxCount = std::uint64_t(1) << 31;  // 32-bit indices in the shader

// What every dispatch of one call shares: the bindings of q, k, v and the mask, and the
// geometry in the push constants.
struct AttentionCall {
  VulkanDevice& dev;
  const AttentionGeometry& g;
  DType dtype;
  OpId op;
  abi::AttentionParams p{};
  std::vector<Binding> inputs;  // q, k, v, mask (q again without one)

  AttentionCall(VulkanDevice& d, const OpCall& c, const AttentionGeometry& geo, std::size_t first,
                std::size_t mask_at)
      : dev(d), g(geo), dtype(c.inputs.at(first).dtype), op(c.op) {
    dev.require_op(c.op, dtype);
    std::uint64_t largest = 0;
    for (const TensorArg& t : c.inputs) largest = std::max(largest, std::uint64_t(t.numel()));
    for (const TensorArg& t : c.outputs) largest = std::max(largest, std::uint64_t(t.numel()));
    if (largest >= kMaxCount)
      throw UnsupportedError(fmt::format(
          "{}: a tensor of {} elements exceeds the Vulkan kernel's 2^31 limit", c.name(), largest));
    auto check_fits = [&](const TensorArg& t, std::string_view what) {
      if (!fits(dev.limits(), t))
        throw UnsupportedError(fmt::format(
            "{}: {} ({} bytes) spans more than the device's storage-buffer range ({} bytes); "
            "the Vulkan kernel binds each tensor whole",
            c.name(), what, std::uint64_t(t.numel()) * dtype_size(t.dtype),
            dev.limits().max_storage_range));
    };
    for (const TensorArg& t : c.inputs) check_fits(t, "an input");
    for (const TensorArg& t : c.outputs) check_fits(t, "an output");
    for (std::size_t i = 0; i < 3; ++i)
      inputs.push_back(dev.bind(c.inputs[first + i], Access::read));
    inputs.push_back(g.has_mask ? dev.bind(c.inputs.at(mask_at), Access::read) : inputs[0]);
    p.B = std::uint32_t(g.B);
    p.Hq = std::uint32_t(g.Hq);
    p.group = std::uint32_t(g.Hq / g.Hk);
    p.L = std::uint32_t(g.L);
    p.S = std::uint32_t(g.S);
    p.E = std::uint32_t(g.E);
    p.EV = std::uint32_t(g.Ev);
    p.mask_sb = g.Bm == 1 ? 0u : std::uint32_t(g.Hm * g.L * g.S);
    p.mask_sh = g.Hm == 1 ? 0u : std::uint32_t(g.L * g.S);
    p.scale = float(g.scale);
    std::memcpy(p.scale_bits, &g.scale, sizeof g.scale);
  }

  bool f64() const { return dtype == DType::f64; }  // its f64 module runs it
  DType stat() const { return f64() ? DType::f64 : DType::f32; }

  // One dispatch of `mode` with bindings 0-7 (Note [Fused attention on Vulkan]: slots 6 and 7
  // are the only ones the shader writes).
  void run(std::uint32_t mode, std::array<Binding, 8> b, std::array<std::uint32_t, 3> groups) {
    const abi::AttentionSpec spec{
        .WG = kWorkgroup,
        .DT = dtype_code(dtype),
        .MODE = mode,
        .EC = std::min<std::uint32_t>(kMaxHeadChunk, std::uint32_t(std::max<std::int64_t>(g.E, 1))),
        .EVC =
            std::min<std::uint32_t>(kMaxHeadChunk, std::uint32_t(std::max<std::int64_t>(g.Ev, 1))),
        .BC = f64() ? kTileRows / 2 : kTileRows,  // the tiles' bytes as f32's
        .CAUSAL = g.causal,
        .MASK = g.has_mask};
    p.q_off = b[0].element_offset;
    p.k_off = b[1].element_offset;
    p.v_off = b[2].element_offset;
    p.m_off = b[3].element_offset;
    p.st_off = b[4].element_offset;
    p.do_off = b[5].element_offset;
    p.a_off = b[6].element_offset;
    p.b_off = b[7].element_offset;
    dev.dispatch({"attention", spec.values(), std::vector<Binding>(b.begin(), b.end()), &p,
                  sizeof p, groups, std::uint32_t(op), f64()});
  }

  // A workgroup per kWorkgroup rows (x) of each of `heads` heads (y).
  std::array<std::uint32_t, 3> groups(std::int64_t rows, std::int64_t heads) const {
    const std::uint64_t blocks = (std::uint64_t(rows) + kWorkgroup - 1) / kWorkgroup;
    return {std::uint32_t(std::min<std::uint64_t>(blocks, dev.limits().max_groups_x)),
            std::uint32_t(std::min<std::uint64_t>(std::uint64_t(heads), 65535)), 1};
  }
};

// Note [Attention on cooperative matrices]
// With the cooperative-matrix path on (FERRY_VULKAN_COOPMAT, Note [Cooperative-matrix GEMM] in
// vk_kernels_coopmat.cpp), the forward pass of f16 attention (bf16 too where the device has
// bf16 matrices) whose q, k and v share a head dim the build made a module for (64, 128) runs
// on shaders/attention_coopmat.slang: FlashAttention's loop with both products (q kᵀ and P v)
// on the matrix units, the online softmax in f32 by one lane per row, P rounded to the
// operands' type for the second product as FlashAttention does. Of the modules for the head
// dim, the one with the most query rows x keys per step whose shared memory the device has
// runs it. The operands' offsets must allow 16-byte loads (multiples of 8 elements); anything
// else, and the backward pass (which reads the forward's o and logsumexp, the same either
// way), takes attention.comp. Like every coopmat kernel, checked here through its scalar
// emulation (FERRY_VULKAN_COOPMAT=emulate), not yet on a GPU's matrix units.

// shaders/attention_coopmat.slang's shared memory: sA (q's rows, P's, the f32 staging), sB
// (k's tile and v's) and sRow.
std::uint64_t coopmat_attention_shared_bytes(const EmbeddedCoopmatShader& s) {
  const std::uint64_t rows = 16 * s.warps_m, ld = (s.head_dim + 8) / 8, p_ld = (s.bk + 8) / 8;
  return 16 * (rows * ld + rows * p_ld + s.warps_m * (s.bk / 16) * 64) + 16 * 2 * s.bk * ld +
         4 * rows;
}

// The forward pass on the cooperative-matrix module that fits; false, having done nothing,
// where none runs it.
bool forward_on_coopmat(AttentionCall& call, const Binding& out, const Binding& lse) {
  VulkanDevice& dev = call.dev;
  const AttentionGeometry& g = call.g;
  const CoopmatMode mode = dev.coopmat_mode();
  const bool bf16 = call.dtype == DType::bf16;
  if (!dev.coopmat_takes(call.dtype) || g.E != g.Ev) return false;
  const KernelLimits& lim = dev.limits();
  const EmbeddedCoopmatShader* best = nullptr;
  for (std::size_t i = 0; i < kEmbeddedCoopmatShaderCount; ++i) {
    const EmbeddedCoopmatShader& s = kEmbeddedCoopmatShaders[i];
    if (s.head_dim == std::uint64_t(g.E) && s.bf16 == bf16 &&
        s.emulated == (mode == CoopmatMode::emulated) &&
        coopmat_attention_shared_bytes(s) <= lim.shared_memory &&
        32 * s.warps_m <= lim.max_workgroup_invocations &&
        (!best || s.warps_m * s.bk > best->warps_m * best->bk))
      best = &s;
  }
  const std::vector<Binding>& in = call.inputs;
  if (!best || in[0].element_offset % 8 || in[1].element_offset % 8 || in[2].element_offset % 8 ||
      out.element_offset % 2)
    return false;
  const std::uint64_t rows = 16 * best->warps_m, blocks = (std::uint64_t(g.L) + rows - 1) / rows,
                      heads = std::uint64_t(g.B * g.Hq);
  if (blocks > lim.max_groups_x || heads > 65535) return false;
  const abi::AttentionSpec spec{.DT = dtype_code(call.dtype),
                                .MODE = abi::ATTN_MODE_FORWARD,
                                .CAUSAL = g.causal,
                                .MASK = g.has_mask};
  abi::AttentionParams p = call.p;
  p.q_off = in[0].element_offset, p.k_off = in[1].element_offset;
  p.v_off = in[2].element_offset, p.m_off = in[3].element_offset;
  p.a_off = out.element_offset, p.b_off = lse.element_offset;
  if (profiler::enabled())
    profiler::note_kernel(fmt::format("coopmat attention {}, {} query rows x {} keys per step",
                                      best->name, rows, best->bk));
  dev.dispatch({.shader = best->name,
                .spec = spec.values(),
                .bindings = {in[0], in[1], in[2], in[3], out, lse},
                .push = &p,
                .push_size = sizeof p,
                .groups = {std::uint32_t(blocks), std::uint32_t(heads), 1},
                .subgroup_size = mode == CoopmatMode::on ? 32u : 0u});
  return true;
}

// inputs q, k, v, [mask]; outputs out, lse (f32; f64 for f64).
void attention_kernel(DeviceImpl& d, const OpCall& c) {
  const AttentionGeometry g =
      attention_forward_args(c, c.inputs.at(0).dtype == DType::f64 ? DType::f64 : DType::f32);
  AttentionCall call(vulkan_device(d), c, g, 0, 3);
  if (g.B * g.Hq * g.L == 0) return;  // the front-end sends no empty tensors
  const std::vector<Binding>& in = call.inputs;
  const Binding out = call.dev.bind(c.outputs[0], Access::write),
                lse = call.dev.bind(c.outputs[1], Access::write);
  if (forward_on_coopmat(call, out, lse)) return;
  call.run(abi::ATTN_MODE_FORWARD, {in[0], in[1], in[2], in[3], in[0], in[0], out, lse},
           call.groups(g.L, g.B * g.Hq));
}

// inputs dout, q, k, v, out, lse, [mask]; outputs dq, dk, dv.
void attention_backward_kernel(DeviceImpl& d, const OpCall& c) {
  const AttentionGeometry g =
      attention_backward_args(c, c.inputs.at(1).dtype == DType::f64 ? DType::f64 : DType::f32);
  AttentionCall call(vulkan_device(d), c, g, 1, 6);
  if (g.B * g.Hq * g.L == 0) return;
  VulkanDevice& dev = call.dev;
  const std::vector<Binding>& in = call.inputs;
  const Binding dout = dev.bind(c.inputs[0], Access::read);
  // (lse, D) per query row in the statistics' dtype; and a word for the written slot a mode
  // leaves unused.
  const std::uint64_t rows = std::uint64_t(g.B * g.Hq * g.L);
  std::unique_ptr<Buffer> scratch = dev.allocate(2 * rows * dtype_size(call.stat()));
  std::unique_ptr<Buffer> unused = dev.allocate(16);
  const TensorArg stats{scratch.get(), 0, {std::int64_t(2 * rows)}, {1}, call.stat()};
  const Binding nothing = dev.bind({unused.get(), 0, {4}, {1}, DType::f32}, Access::write);
  const std::uint64_t stat_groups = (rows + kWorkgroup - 1) / kWorkgroup;
  call.run(abi::ATTN_MODE_STATS,
           {in[0], dev.bind(c.inputs[4], Access::read), dev.bind(c.inputs[5], Access::read), in[3],
            in[0], dout, dev.bind(stats, Access::write), nothing},
           {std::uint32_t(std::min<std::uint64_t>(stat_groups, dev.limits().max_groups_x)), 1, 1});
  const Binding st = dev.bind(stats, Access::read);
  call.run(abi::ATTN_MODE_DQ,
           {in[0], in[1], in[2], in[3], st, dout, dev.bind(c.outputs[0], Access::write), nothing},
           call.groups(g.L, g.B * g.Hq));
  call.run(abi::ATTN_MODE_DKV,
           {in[0], in[1], in[2], in[3], st, dout, dev.bind(c.outputs[1], Access::write),
            dev.bind(c.outputs[2], Access::write)},
           call.groups(g.S, g.B * g.Hk));
  // The scratch buffers may go now: the device keeps their memory until the GPU is done.
}

}  // namespace

void add_attention_kernels(KernelTable& table) {
  table.emplace_back(OpId::scaled_dot_product_attention, attention_kernel);
  table.emplace_back(OpId::scaled_dot_product_attention_backward, attention_backward_kernel);
}

}  // namespace ferry::vulkan
