// runtime/vulkan/vk_kernels_attention.cpp — scaled_dot_product_attention and its backward
// through shaders/attention.comp (Note [Fused attention on Vulkan] there; the form of the
// call: Note [Scaled dot-product attention] in runtime/nn/attention.cpp). The operands are
// checked once, for every backend, by ferry/kit/attention_args.hpp. The forward pass of f16 and
// bf16 heads, and its backward, also run on cooperative matrices where that path is on (Note
// [Attention on cooperative matrices]).
//
// Each tensor is bound whole: the kernel walks whole heads, so a tensor larger than one
// storage-buffer binding is an UnsupportedError naming it (at the head sizes attention runs,
// q, k and v are far smaller than the scores the composition would hold).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "abi/attention.h"
#include "ferry/error.hpp"
#include "ferry/kit/attention_args.hpp"
#include "ferry/profiler.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_kernels.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint32_t kWorkgroup = 64;     // rows per workgroup, one per thread
constexpr std::uint32_t kTileRows = 16;      // BC: rows of the shared tiles
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
    p.range_end = std::numeric_limits<std::uint32_t>::max();  // every key, every query row
  }

  bool f64() const { return dtype == DType::f64; }  // its f64 module runs it
  std::uint32_t chunk(std::int64_t dim) const {     // EC, EVC
    return attention_head_chunk(dim, dev.limits().attention_min_head_chunk);
  }
  DType stat() const { return f64() ? DType::f64 : DType::f32; }

  // One dispatch of `mode` with bindings 0-7 (Note [Fused attention on Vulkan]: slots 6 and 7
  // are the only ones the shader writes).
  void run(std::uint32_t mode, std::array<Binding, 8> b, std::array<std::uint32_t, 3> groups) {
    // (SPLIT merges its threads' maxima and sums through tile_e: BC * EC >= kWorkgroup.)
    // STATS and COMBINE take one pipeline per dtype (Note [Attention head chunks] in
    // vk_policy.hpp).
    const bool split = mode == abi::ATTN_MODE_SPLIT,
               rowwise = mode == abi::ATTN_MODE_STATS || mode == abi::ATTN_MODE_COMBINE;
    const abi::AttentionSpec spec{
        .WG = kWorkgroup,
        .DT = dtype_code(dtype),
        .MODE = mode,
        .EC = split || rowwise ? kMaxAttentionHeadChunk : chunk(g.E),
        .EVC = rowwise ? kMaxAttentionHeadChunk : chunk(g.Ev),
        .BC = f64() ? kTileRows / 2 : kTileRows,  // the tiles' bytes as f32's
        .CAUSAL = !rowwise && g.causal,
        .MASK = !rowwise && g.has_mask};
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

// The loop iterations of one invocation of attention.comp's FORWARD pass over `g`, and of its
// DQ and DKV passes as a fixed part and a part per tile of the keys (DQ) or query rows (DKV)
// they walk; every loop counted (Note [Loop budget] in vk_kernels.hpp: which loops the driver
// unrolls, and so leaves out of its count, is its choice).
struct LoopIterations {
  std::uint64_t forward = 0;
  std::uint64_t dq_fixed = 0, dq_per_tile = 0, dkv_fixed = 0, dkv_per_tile = 0;
  std::uint64_t tile_rows = 0;  // BC
};
LoopIterations attention_loop_iterations(const AttentionGeometry& g, bool f64,
                                         const KernelLimits& lim) {
  const auto ceil_div = [](std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; };
  const std::uint64_t E = std::uint64_t(std::max<std::int64_t>(g.E, 1)),
                      Ev = std::uint64_t(std::max<std::int64_t>(g.Ev, 1));
  const std::uint64_t bc = f64 ? kTileRows / 2 : kTileRows,
                      ec = attention_head_chunk(g.E, lim.attention_min_head_chunk),
                      evc = attention_head_chunk(g.Ev, lim.attention_min_head_chunk);
  const auto load = [&](std::uint64_t w) { return ceil_div(bc * w, kWorkgroup); };
  const auto dots = [&](std::uint64_t w) { return w * (1 + bc); };
  const std::uint64_t scores = bc + ceil_div(E, ec) * (load(ec) + dots(ec));
  // The grid-stride loops' rounds: a workgroup per 64 rows, 65,535 heads a round.
  const auto rounds = [&](std::int64_t rows, std::int64_t heads) {
    const std::uint64_t blocks =
        ceil_div(std::uint64_t(std::max<std::int64_t>(rows, 1)), kWorkgroup);
    return ceil_div(std::uint64_t(std::max<std::int64_t>(heads, 1)), 65535) *
           ceil_div(blocks, std::min<std::uint64_t>(blocks, lim.max_groups_x));
  };
  const std::uint64_t passes_q = rounds(g.L, g.B * g.Hq), group = std::uint64_t(g.Hq / g.Hk);
  const std::uint64_t passes_kv =
      rounds(g.S, g.B * g.Hk) * std::max(ceil_div(E, ec), ceil_div(Ev, evc));
  LoopIterations n;
  n.tile_rows = bc;
  n.forward =
      passes_q * ceil_div(Ev, evc) *
      (evc + ceil_div(std::uint64_t(g.S), bc) * (scores + load(evc) + 2 * bc + evc + bc * evc));
  n.dq_fixed = passes_q * ceil_div(E, ec) * ec;
  n.dq_per_tile =
      passes_q * ceil_div(E, ec) *
      (scores + bc + ceil_div(Ev, evc) * (load(evc) + dots(evc)) + load(ec) + bc * (1 + ec));
  n.dkv_fixed = passes_kv * (ec + evc);
  n.dkv_per_tile = passes_kv * group *
                   (scores + bc + ceil_div(Ev, evc) * (load(evc) + dots(evc)) + load(ec) +
                    load(evc) + bc * (ec + evc));
  return n;
}

// The rows (keys for DQ, query rows for DKV) one dispatch of a backward pass walks within the
// device's loop budget: every one of `extent` where there is none; a multiple of the tile rows
// else; an UnsupportedError where not even one tile fits.
std::int64_t backward_range(const VulkanDevice& dev, const LoopIterations& n, std::uint64_t fixed,
                            std::uint64_t per_tile, std::int64_t extent, const char* pass) {
  const std::uint64_t tiles = std::max<std::uint64_t>(
      (std::uint64_t(std::max<std::int64_t>(extent, 1)) + n.tile_rows - 1) / n.tile_rows, 1);
  const std::uint64_t fit = loop_trips_per_invocation(dev.limits(), tiles, per_tile, fixed);
  if (fit == 0)
    throw_past_loop_budget(dev, "scaled_dot_product_attention_backward",
                           fmt::format("the {} pass runs {} for its first rows alone; "
                                       "FERRY_VULKAN_FUSED_ATTENTION=0 runs the composition",
                                       pass, fixed + per_tile));
  return fit == tiles ? std::max<std::int64_t>(extent, 1) : std::int64_t(fit * n.tile_rows);
}

// Note [Attention on cooperative matrices]
// With the cooperative-matrix path on (FERRY_VULKAN_COOPMAT, Note [Cooperative-matrix GEMM] in
// vk_kernels_coopmat.cpp), f16 attention (bf16 too where the device has bf16 matrices) whose
// q, k and v share one head dim E, a multiple of 8 up to 128, runs on them, on the modules of
// the smallest head dim built that holds E (64 or 128; the columns past E are zeros):
// - the forward pass on shaders/attention_coopmat.slang: FlashAttention's loop with both
//   products (q kᵀ and P v) on the matrix units, the online softmax in f32 by one lane per
//   row, P rounded to the operands' type for the second product as FlashAttention does;
// - the backward's DQ and DKV passes on shaders/attention_backward_coopmat.slang, after
//   attention.comp's STATS pass (each row's logsumexp and rowsum(dO o O), O(L D) work): the
//   five products (q kᵀ and dO vᵀ again, dS k, Pᵀ dO, dSᵀ q) on the matrix units, P and dS
//   rounded to the operands' type, the gradients summed in f32. It reads the forward's o and
//   logsumexp, so it follows either forward.
// Of the modules for the head dim and pass whose shared memory the device has, the one
// measured fastest for the call's geometry runs it where tuning is on (Note [Measured coopmat
// tiles] in vk_kernels_coopmat.cpp: on by default on the tensor-core path), else the one
// with the most rows x tile rows per step. The operands' offsets must allow 16-byte loads
// (multiples of 8 elements); anything else takes attention.comp. Like every coopmat kernel,
// checked here through its scalar emulation (FERRY_VULKAN_COOPMAT=emulate), not yet on a
// GPU's matrix units.

// A cooperative-matrix module that can run one pass of a call, and its grid: a workgroup per
// 16 x warps_m rows (x) of each head (y).
struct AttentionModule {
  const EmbeddedCoopmatShader* shader;
  std::array<std::uint32_t, 3> groups;
};

// The modules of `pass` that can run the call over `rows` rows of `heads` heads (the call's
// dtype; the smallest head dim built that holds the call's; shared memory, workgroup size and
// grid within the device's), the most rows x tile rows per step first: the choice without
// measurement.
std::vector<AttentionModule> coopmat_attention_modules(const AttentionCall& call,
                                                       std::uint32_t pass, std::int64_t rows,
                                                       std::int64_t heads) {
  const VulkanDevice& dev = call.dev;
  const std::uint64_t E = std::uint64_t(call.g.E);
  std::vector<AttentionModule> out;
  if (!dev.coopmat_takes(call.dtype) || call.g.Ev != call.g.E || E % 8 != 0 || heads > 65535)
    return out;
  const bool emulated = dev.coopmat_mode() == CoopmatMode::emulated;
  const KernelLimits& lim = dev.limits();
  for (std::size_t i = 0; i < kEmbeddedCoopmatShaderCount; ++i) {
    const EmbeddedCoopmatShader& s = kEmbeddedCoopmatShaders[i];
    const std::uint64_t per = 16 * s.warps_m, blocks = (std::uint64_t(rows) + per - 1) / per;
    if (s.head_dim >= E && s.attention_pass == pass && s.bf16 == (call.dtype == DType::bf16) &&
        s.emulated == emulated && coopmat_shared_bytes(s) <= lim.shared_memory &&
        32 * s.warps_m <= lim.max_workgroup_invocations && blocks <= lim.max_groups_x)
      out.push_back({&s, {std::uint32_t(blocks), std::uint32_t(heads), 1}});
  }
  // The modules of the smallest head dim that holds E (the padding multiplies zeros), the
  // largest steps first.
  std::stable_sort(out.begin(), out.end(), [](const AttentionModule& a, const AttentionModule& b) {
    if (a.shader->head_dim != b.shader->head_dim) return a.shader->head_dim < b.shader->head_dim;
    return a.shader->warps_m * a.shader->bk > b.shader->warps_m * b.shader->bk;
  });
  const std::uint32_t head_dim = out.empty() ? 0 : out.front().shader->head_dim;
  std::erase_if(out, [&](const AttentionModule& m) { return m.shader->head_dim != head_dim; });
  return out;
}

// Of `modules` (not empty) for `pass` over `rows` rows of `heads` heads against `others` rows,
// the one that runs: with tuning on (FERRY_VULKAN_COOPMAT_TUNE), measured, each run through
// `run` (Note [Measured coopmat tiles] in vk_kernels_coopmat.cpp); else the first. `how` says
// which, for the profiler.
const AttentionModule& pick_attention_module(AttentionCall& call, std::uint32_t pass,
                                             const std::vector<AttentionModule>& modules,
                                             std::int64_t rows, std::int64_t heads,
                                             std::int64_t others,
                                             const std::function<void(const AttentionModule&)>& run,
                                             const char** how) {
  *how = "the largest that fits";
  if (!call.dev.coopmat_tuning() || modules.size() < 2) return modules.front();
  const TileKey key{std::uint64_t(heads),
                    std::uint64_t(rows),
                    std::uint64_t(others),
                    std::uint64_t(call.g.E),
                    0,
                    call.dev.coopmat_mode() == CoopmatMode::emulated,
                    call.dtype == DType::bf16,
                    1 + pass};
  std::vector<const EmbeddedCoopmatShader*> shaders;
  for (const AttentionModule& m : modules) shaders.push_back(m.shader);
  return modules[choose_measured_module(
      call.dev, key, shaders, [&](std::size_t i) { run(modules[i]); }, how)];
}

// One dispatch of attention module `m` with `bindings` (q, k, v and the mask, then the
// forward's o and logsumexp, or the backward's statistics, dO and gradients) and the push
// constants `p`.
void dispatch_coopmat_attention(AttentionCall& call, const AttentionModule& m,
                                const abi::AttentionParams& p, std::vector<Binding> bindings) {
  const abi::AttentionSpec spec{.DT = dtype_code(call.dtype),
                                .MODE = m.shader->attention_pass,
                                .CAUSAL = call.g.causal,
                                .MASK = call.g.has_mask};
  call.dev.dispatch({.shader = m.shader->name,
                     .spec = spec.values(),
                     .bindings = std::move(bindings),
                     .push = &p,
                     .push_size = sizeof p,
                     .groups = m.groups,
                     .subgroup_size = call.dev.coopmat_mode() == CoopmatMode::on ? 32u : 0u});
}

// The forward pass on the cooperative-matrix module chosen; false, having done nothing, where
// none runs it.
bool forward_on_coopmat(AttentionCall& call, const Binding& out, const Binding& lse) {
  const AttentionGeometry& g = call.g;
  const std::vector<AttentionModule> modules =
      coopmat_attention_modules(call, abi::ATTN_MODE_FORWARD, g.L, g.B * g.Hq);
  const std::vector<Binding>& in = call.inputs;
  if (modules.empty() || in[0].element_offset % 8 || in[1].element_offset % 8 ||
      in[2].element_offset % 8 || out.element_offset % 2)
    return false;
  abi::AttentionParams p = call.p;
  p.q_off = in[0].element_offset, p.k_off = in[1].element_offset;
  p.v_off = in[2].element_offset, p.m_off = in[3].element_offset;
  p.a_off = out.element_offset, p.b_off = lse.element_offset;
  auto run = [&](const AttentionModule& m) {
    dispatch_coopmat_attention(call, m, p, {in[0], in[1], in[2], in[3], out, lse});
  };
  const char* how = nullptr;
  const AttentionModule& m =
      pick_attention_module(call, abi::ATTN_MODE_FORWARD, modules, g.L, g.B * g.Hq, g.S, run, &how);
  if (profiler::enabled())
    profiler::note_kernel(fmt::format("coopmat attention {}, {} query rows x {} keys per step ({})",
                                      m.shader->name, 16 * m.shader->warps_m, m.shader->bk, how));
  run(m);
  return true;
}

// The backward's DQ and DKV passes on the cooperative-matrix modules chosen, from
// attention.comp's row statistics `st`; false, having done nothing, where either pass has
// none. `nothing` fills DQ's unused slot 7.
bool backward_on_coopmat(AttentionCall& call, const Binding& dout, const Binding& st,
                         const Binding& dq, const Binding& dk, const Binding& dv,
                         const Binding& nothing) {
  const AttentionGeometry& g = call.g;
  const std::vector<AttentionModule> dq_modules =
      coopmat_attention_modules(call, abi::ATTN_MODE_DQ, g.L, g.B * g.Hq);
  const std::vector<AttentionModule> dkv_modules =
      coopmat_attention_modules(call, abi::ATTN_MODE_DKV, g.S, g.B * g.Hk);
  const std::vector<Binding>& in = call.inputs;
  if (dq_modules.empty() || dkv_modules.empty() || in[0].element_offset % 8 ||
      in[1].element_offset % 8 || in[2].element_offset % 8 || dout.element_offset % 8 ||
      dq.element_offset % 2 || dk.element_offset % 2 || dv.element_offset % 2)
    return false;
  abi::AttentionParams p = call.p;
  p.q_off = in[0].element_offset, p.k_off = in[1].element_offset;
  p.v_off = in[2].element_offset, p.m_off = in[3].element_offset;
  p.st_off = st.element_offset, p.do_off = dout.element_offset;
  p.a_off = dq.element_offset, p.b_off = 0;
  abi::AttentionParams pkv = p;
  pkv.a_off = dk.element_offset, pkv.b_off = dv.element_offset;
  auto run_dq = [&](const AttentionModule& m) {
    dispatch_coopmat_attention(call, m, p, {in[0], in[1], in[2], in[3], st, dout, dq, nothing});
  };
  auto run_dkv = [&](const AttentionModule& m) {
    dispatch_coopmat_attention(call, m, pkv, {in[0], in[1], in[2], in[3], st, dout, dk, dv});
  };
  const char *how_dq = nullptr, *how_dkv = nullptr;
  const AttentionModule& mq = pick_attention_module(call, abi::ATTN_MODE_DQ, dq_modules, g.L,
                                                    g.B * g.Hq, g.S, run_dq, &how_dq);
  const AttentionModule& mkv = pick_attention_module(call, abi::ATTN_MODE_DKV, dkv_modules, g.S,
                                                     g.B * g.Hk, g.L, run_dkv, &how_dkv);
  if (profiler::enabled())
    profiler::note_kernel(fmt::format("coopmat attention backward {} ({}) and {} ({})",
                                      mq.shader->name, how_dq, mkv.shader->name, how_dkv));
  run_dq(mq);
  run_dkv(mkv);
  return true;
}

// The forward on SPLIT, and COMBINE where there are several splits (Note [Split-key attention
// on Vulkan] in attention.comp); false, having done nothing, where the policy (vk_policy.hpp's
// key_split) keeps the call on FORWARD or the partials would not fit one binding.
bool forward_on_split_keys(AttentionCall& call, const Binding& out, const Binding& lse) {
  static_assert(kWorkgroup >= kMaxAttentionHeadChunk && kWorkgroup % kTileRows == 0,
                "SPLIT merges a column of the output per thread, kTileRows threads at a time");
  const AttentionGeometry& g = call.g;
  const std::uint64_t rows = std::uint64_t(g.B * g.Hq * g.L);
  const std::uint64_t budget = call.dev.limits().loop_budget;
  const bool forward_fits =
      budget == 0 || attention_loop_iterations(g, call.f64(), call.dev.limits()).forward <= budget;
  // (the backward's DQ and DKV walk ranges instead: attention_backward_kernel)
  const KeySplit split =
      key_split(call.dev.split_attention(), {g.L, std::int64_t(rows), g.S, g.E, g.Ev}, forward_fits,
                budget, call.dev.limits().attention_min_head_chunk);
  VulkanDevice& dev = call.dev;
  const std::uint64_t parts = rows * split.splits * std::uint64_t(g.Ev + 2);
  const std::uint64_t part_bytes = parts * dtype_size(call.stat());
  if (split.splits == 0 || g.Ev == 0 ||
      (split.splits > 1 && (parts >= kMaxCount || part_bytes > dev.limits().max_storage_range))) {
    if (!forward_fits)
      throw_past_loop_budget(dev, "scaled_dot_product_attention",
                             fmt::format("no kernel walks {} keys of head dim {} within it; "
                                         "FERRY_VULKAN_FUSED_ATTENTION=0 runs the composition",
                                         g.S, g.E));
    return false;
  }
  const std::vector<Binding>& in = call.inputs;
  call.p.splits = split.splits;
  call.p.split_len = split.split_len;
  if (profiler::enabled())
    profiler::note_kernel(fmt::format("split-key attention, {} split{} of {} keys per query row",
                                      split.splits, split.splits == 1 ? "" : "s", split.split_len));
  const std::array<std::uint32_t, 3> grid{
      std::uint32_t(std::min<std::uint64_t>(split.splits, dev.limits().max_groups_x)),
      std::uint32_t(std::min<std::uint64_t>(rows, 65535)), 1};
  if (split.splits == 1) {
    call.run(abi::ATTN_MODE_SPLIT, {in[0], in[1], in[2], in[3], in[0], in[0], out, lse}, grid);
    return true;
  }
  // The partials, and a word for the slot SPLIT leaves unused.
  std::unique_ptr<Buffer> scratch = dev.allocate(part_bytes);
  std::unique_ptr<Buffer> unused = dev.allocate(16);
  const TensorArg partials{scratch.get(), 0, {std::int64_t(parts)}, {1}, call.stat()};
  const Binding nothing = dev.bind({unused.get(), 0, {4}, {1}, DType::f32}, Access::write);
  call.run(abi::ATTN_MODE_SPLIT,
           {in[0], in[1], in[2], in[3], in[0], in[0], dev.bind(partials, Access::write), nothing},
           grid);
  const std::uint64_t combine_groups = (rows * std::uint64_t(g.Ev) + kWorkgroup - 1) / kWorkgroup;
  call.run(
      abi::ATTN_MODE_COMBINE,
      {in[0], in[1], in[2], in[3], dev.bind(partials, Access::read), in[0], out, lse},
      {std::uint32_t(std::min<std::uint64_t>(combine_groups, dev.limits().max_groups_x)), 1, 1});
  return true;  // (the device keeps the scratch buffers' memory until the GPU is done)
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
  if (forward_on_split_keys(call, out, lse) || forward_on_coopmat(call, out, lse)) return;
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
  const LoopIterations n = attention_loop_iterations(g, call.f64(), dev.limits());
  const std::int64_t dq_keys = backward_range(dev, n, n.dq_fixed, n.dq_per_tile, g.S, "DQ"),
                     dkv_rows = backward_range(dev, n, n.dkv_fixed, n.dkv_per_tile, g.L, "DKV");
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
  const Binding dq = dev.bind(c.outputs[0], Access::write),
                dk = dev.bind(c.outputs[1], Access::write),
                dv = dev.bind(c.outputs[2], Access::write);
  if (backward_on_coopmat(call, dout, st, dq, dk, dv, nothing)) return;
  // In ranges of keys (DQ) and query rows (DKV) where the loop budget asks, the later
  // dispatches adding to the earlier's gradients; one dispatch each, of every row, elsewhere.
  auto in_ranges = [&](std::uint32_t mode, std::int64_t extent, std::int64_t step,
                       std::array<Binding, 8> b, std::array<std::uint32_t, 3> groups) {
    std::int64_t begin = 0;
    do {
      call.p.range_begin = std::uint32_t(begin);
      call.p.range_end = dev.limits().loop_budget == 0
                             ? std::numeric_limits<std::uint32_t>::max()
                             : std::uint32_t(std::min(extent, begin + step));
      call.p.accumulate = begin > 0;
      call.run(mode, b, groups);
      begin += step;
    } while (begin < extent);
    call.p.range_begin = 0, call.p.range_end = std::numeric_limits<std::uint32_t>::max();
    call.p.accumulate = 0;
  };
  in_ranges(abi::ATTN_MODE_DQ, g.S, dq_keys, {in[0], in[1], in[2], in[3], st, dout, dq, nothing},
            call.groups(g.L, g.B * g.Hq));
  in_ranges(abi::ATTN_MODE_DKV, g.L, dkv_rows, {in[0], in[1], in[2], in[3], st, dout, dk, dv},
            call.groups(g.S, g.B * g.Hk));
  // The scratch buffers may go now: the device keeps their memory until the GPU is done.
}

}  // namespace

void add_attention_kernels(KernelTable& table) {
  table.emplace_back(OpId::scaled_dot_product_attention, attention_kernel);
  table.emplace_back(OpId::scaled_dot_product_attention_backward, attention_backward_kernel);
}

}  // namespace ferry::vulkan
