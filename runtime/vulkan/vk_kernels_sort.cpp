// runtime/vulkan/vk_kernels_sort.cpp — cumsum, cumprod, cummax and cummin
// through shaders/scan.comp, the stable sort through shaders/sort.comp, and
// scatter_reduce's fold of sorted targets through shaders/scatter_reduce.comp
// (docs/kernel-contract.md, "Scans", "Sort" and "scatter_reduce").
//
// Both take contiguous tensors. A scan's [outer, n, inner] is seen as lines
// [outer, inner] of n elements; tensors beyond one storage-buffer binding are
// cut along outer and inner (vk_split.hpp), each part dispatched alone. The
// sort's [rows, n] is cut along rows. A single line or row beyond a binding
// raises UnsupportedError.
#include <fmt/format.h>

#include <algorithm>

#include "abi/scan.h"
#include "abi/scatter_reduce.h"
#include "abi/sort.h"
#include "ferry/error.hpp"
#include "ferry/kit/scatter_fold.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint64_t kRowModeMin = 4096;      // a line this long gets a workgroup (ROW mode)
constexpr std::uint64_t kRowModeMaxLines = 256;  // ... when there are at most this many lines
// The CHUNK modes (abi/scan.h): chunks of a workgroup's size times this, for
// lines of at least 4 chunks when there are at most kChunkModeMaxLines (a
// single line of 16 Mi elements ran 20 times slower than the CPU on an H100
// in ROW mode, one workgroup doing it all).
constexpr std::uint64_t kChunkPerThread = 16;
constexpr std::uint64_t kChunkModeMaxLines = 64;

std::uint32_t groups_for(const VulkanDevice& dev, std::uint64_t n, std::uint32_t per_group) {
  return std::uint32_t(
      std::clamp<std::uint64_t>((n + per_group - 1) / per_group, 1, dev.limits().max_groups_x));
}

void check_lengths(std::string_view op, std::uint64_t elements) {
  if (elements >= (std::uint64_t(1) << 31))
    throw UnsupportedError(
        fmt::format("{}: the vulkan kernel takes tensors of < 2^31 elements", op));
}

// UnsupportedError unless every view fits one binding: what is left after the
// cut is one line (scan) or row (sort) of n elements, which the kernels do not cut.
void require_fits(const VulkanDevice& dev, std::string_view op, const std::vector<TensorArg>& views,
                  std::int64_t n, const char* line) {
  for (const TensorArg& v : views)
    if (!fits(dev.limits(), v))
      throw UnsupportedError(fmt::format(
          "{}: one {} of {} elements spans more than the device's storage-buffer range ({} "
          "bytes); the vulkan kernel cuts only across {}s",
          op, line, n, dev.limits().max_storage_range, line));
}

// A part of lines [outer, inner] x n: views[0] x, views[1] the values, views[2] the positions.
void scan_part(VulkanDevice& dev, OpId op, const std::vector<TensorArg>& views) {
  const TensorArg& x = views[0];
  require_fits(dev, op_name(op), views, x.sizes[2], "line");
  const bool extremum = views.size() > 2;
  const Binding by = dev.bind(views[1], Access::write), bx = dev.bind(x, Access::read);
  // Slots a mode leaves unused get the values' binding, never x's: the shader's positions and
  // states buffers are writable, and the validation layer counts a writable binding as written,
  // so x there would be a write of x's bytes that the barrier tracker never saw (a RAW hazard
  // with the next part's read of x wherever parts' bound ranges overlap, as the 16-byte-aligned
  // ranges of 1000-byte u8 lines do). For the same reason the states are bound for writing in
  // every chunk mode.
  const Binding bi = extremum ? dev.bind(views[2], Access::write) : by;
  abi::ScanParams p{};
  p.outer = std::uint32_t(x.sizes[0]);
  p.inner = std::uint32_t(x.sizes[1]);
  p.n = std::uint32_t(x.sizes[2]);
  p.s_outer = std::uint32_t(x.strides[0]);
  p.s_inner = std::uint32_t(x.strides[1]);
  p.s_n = std::uint32_t(x.strides[2]);
  p.x_off = bx.element_offset;
  p.y_off = by.element_offset;
  p.i_off = extremum ? bi.element_offset : 0;
  // The shader indexes every tensor with x's strides from its own offset: the
  // views are cut alike from tensors of one shape, all contiguous.
  const std::uint64_t lines = std::uint64_t(p.outer) * p.inner;
  const std::uint32_t wg = workgroup_size(dev.limits());
  const std::uint64_t chunk = std::uint64_t(wg) * kChunkPerThread;
  const bool chunked = lines <= kChunkModeMaxLines && p.n >= 4 * chunk;
  const bool row = !chunked && p.n >= kRowModeMin && lines <= kRowModeMaxLines;
  auto run = [&](std::uint32_t mode, std::uint64_t groups, const Binding& bs) {
    const abi::ScanSpec spec{.WG = wg,
                             .OP = std::uint32_t(op),
                             .IN_DT = dtype_code(x.dtype),
                             .OUT_DT = dtype_code(views[1].dtype),
                             .MODE = mode};
    const auto g = std::uint32_t(std::clamp<std::uint64_t>(groups, 1, dev.limits().max_groups_x));
    dev.dispatch({"scan",
                  spec.values(),
                  {by, bi, bx, bs},
                  &p,
                  sizeof p,
                  {g, 1, 1},
                  spec.OP,
                  x.dtype == DType::f64});
  };
  if (!chunked) {
    run(row ? abi::SCAN_MODE_ROW : abi::SCAN_MODE_LINES, row ? lines : (lines + wg - 1) / wg, by);
    return;
  }
  p.chunk = std::uint32_t(chunk);
  p.chunks = std::uint32_t((p.n + chunk - 1) / chunk);
  const std::uint64_t states = lines * p.chunks;
  std::unique_ptr<Buffer> scratch = dev.allocate(states * abi::SCAN_STATE_WORDS * 4);
  const TensorArg words{
      scratch.get(), 0, {std::int64_t(states * abi::SCAN_STATE_WORDS)}, {1}, DType::i32};
  run(abi::SCAN_MODE_CHUNK_STATES, states, dev.bind(words, Access::write));
  run(abi::SCAN_MODE_CHUNK_PREFIX, lines, dev.bind(words, Access::write));
  run(abi::SCAN_MODE_CHUNK_APPLY, states, dev.bind(words, Access::write));
  // `scratch` may go now: the device keeps its memory until the GPU is done with it.
}

void scan_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& x = call.inputs.at(0);
  if (x.ndim() != 3 || call.outputs.at(0).numel() != x.numel())
    throw ShapeError(fmt::format("{}: the vulkan kernel expects [outer, n, inner]", call.name()));
  dev.require_op(call.op, x.dtype);
  dev.require_op(call.op, call.outputs[0].dtype);
  if (x.numel() == 0) return;
  check_lengths(call.name(), std::uint64_t(x.numel()));
  // [outer, n, inner] -> [outer, inner, n]: the line dims first, for the cut.
  std::vector<TensorArg> views{x};
  for (const TensorArg& o : call.outputs) views.push_back(o);
  for (TensorArg& v : views) {
    std::swap(v.sizes[1], v.sizes[2]);
    std::swap(v.strides[1], v.strides[2]);
  }
  for_each_part(dev.limits(), views, 0, 2, [&](const std::vector<TensorArg>& parts, const auto&) {
    scan_part(dev, call.op, parts);
  });
}

// Rows [rows, n] of x sorted into values and positions (Note [Vulkan sort] in sort.comp).
void sort_part(VulkanDevice& dev, bool descending, const std::vector<TensorArg>& views) {
  const TensorArg& x = views[0];
  require_fits(dev, "sort", views, x.sizes[1], "row");
  const Binding bv = dev.bind(views[1], Access::write), bi = dev.bind(views[2], Access::write),
                bx = dev.bind(x, Access::read);
  abi::SortParams p{};
  p.rows = std::uint32_t(x.sizes[0]);
  p.n = std::uint32_t(x.sizes[1]);
  p.padded = 1;
  while (p.padded < p.n) p.padded *= 2;
  p.v_off = bv.element_offset;
  p.i_off = bi.element_offset;
  p.x_off = bx.element_offset;
  const std::uint32_t wg = workgroup_size(dev.limits()), block = 2 * wg;
  auto run = [&](std::uint32_t mode, std::uint64_t k, std::uint64_t j, std::uint32_t groups) {
    p.k = std::uint32_t(k);
    p.j = std::uint32_t(j);
    const abi::SortSpec spec{
        .WG = wg, .DT = dtype_code(x.dtype), .MODE = mode, .DESCENDING = descending};
    dev.dispatch({"sort",
                  spec.values(),
                  {bv, bi, bx},
                  &p,
                  sizeof p,
                  {groups, 1, 1},
                  std::uint32_t(OpId::sort),
                  x.dtype == DType::f64});
  };
  if (p.n <= FERRY_SORT_ROW_MAX) {
    // Short rows: a thread each (Note [Vulkan sort]); each element's trip and its slides past
    // the sorted prefix, counted for the loop budget (Note [Loop budget] in vk_kernels.hpp).
    const std::uint32_t groups = groups_for(dev, p.rows, wg);
    const std::uint64_t trips =
        (std::uint64_t(p.rows) + std::uint64_t(groups) * wg - 1) / (std::uint64_t(groups) * wg);
    const std::uint64_t per_row = 1 + std::uint64_t(p.n) * (p.n + 3) / 2;
    if (loop_trips_per_invocation(dev.limits(), trips, per_row) == trips)
      return run(abi::SORT_MODE_ROW, 0, 0, groups);
  }
  const std::uint64_t blocks = std::uint64_t(p.rows) * ((p.padded + block - 1) / block);
  const std::uint64_t pairs = std::uint64_t(p.rows) * (p.padded / 2);
  run(abi::SORT_MODE_FIRST, 0, 0, groups_for(dev, blocks, 1));
  for (std::uint64_t k = 2 * block; k <= p.padded; k *= 2) {
    run(abi::SORT_MODE_FLIP, k, k / 2, groups_for(dev, pairs, wg));
    for (std::uint64_t j = k / 4; j >= block; j /= 2)
      run(abi::SORT_MODE_HALF, k, j, groups_for(dev, pairs, wg));
    run(abi::SORT_MODE_MERGE, k, block / 2, groups_for(dev, blocks, 1));
  }
}

void sort_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& x = call.inputs.at(0);
  if (x.ndim() != 2 || call.outputs.size() != 2 || call.outputs[1].dtype != DType::i64)
    throw ShapeError(
        "sort: the vulkan kernel expects [rows, n] and writes values and i64 positions");
  dev.require_op(OpId::sort, x.dtype);
  if (x.numel() == 0) return;
  check_lengths("sort", std::uint64_t(x.numel()));
  const bool descending = call.attrs.b("descending");
  for_each_part(
      dev.limits(), {x, call.outputs[0], call.outputs[1]}, 0, 1,
      [&](const std::vector<TensorArg>& parts, const auto&) { sort_part(dev, descending, parts); });
}

// The shader's FOLD_* codes are the kernels' ScatterFold values.
static_assert(abi::FOLD_SUM == unsigned(ScatterFold::sum) &&
              abi::FOLD_PROD == unsigned(ScatterFold::prod) &&
              abi::FOLD_MEAN == unsigned(ScatterFold::mean) &&
              abi::FOLD_AMAX == unsigned(ScatterFold::amax) &&
              abi::FOLD_AMIN == unsigned(ScatterFold::amin) &&
              abi::FOLD_ASSIGN == unsigned(ScatterFold::assign));

// Values folded into out at sorted targets (scatter_reduce.comp): every
// tensor in one binding each, out below 2^32 elements.
void scatter_reduce_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg &v = call.inputs.at(0), &t = call.inputs.at(1), &o = call.outputs.at(0);
  if (v.ndim() != 1 || t.ndim() != 1 || o.ndim() != 1 || t.dtype != DType::i64 ||
      v.sizes[0] != t.sizes[0])
    throw ShapeError(
        "scatter_reduce: the vulkan kernel expects 1-D values, i64 targets and output");
  dev.require_op(OpId::scatter_reduce, v.dtype);
  const auto fold = std::uint32_t(scatter_fold_of(call.attrs.s("reduce")));
  if (v.numel() == 0) return;
  check_lengths("scatter_reduce", std::uint64_t(std::max(v.numel(), o.numel())));
  for (const TensorArg* a : {&v, &t, &o})
    if (!fits(dev.limits(), *a))
      throw UnsupportedError(fmt::format(
          "scatter_reduce: a tensor of {} elements spans more than the device's storage-buffer "
          "range ({} bytes), which the vulkan kernel does not cut",
          a->numel(), dev.limits().max_storage_range));
  const Binding bo = dev.bind(o, Access::write), bv = dev.bind(v, Access::read),
                bt = dev.bind(t, Access::read);
  abi::ScatterReduceParams p{};
  p.m = std::uint32_t(v.numel());
  p.v_off = bv.element_offset;
  p.t_off = bt.element_offset;
  p.o_off = bo.element_offset;
  const std::uint32_t wg = workgroup_size(dev.limits());
  const abi::ScatterReduceSpec spec{.WG = wg,
                                    .DT = dtype_code(v.dtype),
                                    .FOLD = fold,
                                    .INCLUDE_SELF = call.attrs.b("include_self")};
  // A run of one target as long as the values: in ranges, dispatched in order, that one
  // invocation walks within the device's loop budget (Note [Loop budget] in vk_kernels.hpp),
  // every loop counted: its share of the grid-stride loop and its run's fold (at most the
  // range, 2 a value counting both), the bisection of a mean's run (32). 1,048,576 values into
  // one target folded 65,536 on lavapipe before.
  const std::uint64_t range =
      std::max<std::uint64_t>(1, loop_trips_per_invocation(dev.limits(), p.m, 2, 64));
  for (std::uint64_t b = 0; b < p.m; b += range) {
    p.begin = std::uint32_t(b);
    p.end = std::uint32_t(std::min<std::uint64_t>(p.m, b + range));
    dev.dispatch({"scatter_reduce",
                  spec.values(),
                  {bo, bv, bt},
                  &p,
                  sizeof p,
                  {groups_for(dev, p.end - p.begin, wg), 1, 1},
                  std::uint32_t(OpId::scatter_reduce),
                  v.dtype == DType::f64});
  }
}

}  // namespace

void add_sort_kernels(KernelTable& table) {
  table.emplace_back(OpId::scatter_reduce, scatter_reduce_kernel);
  for (OpId op : {OpId::cumsum, OpId::cumprod, OpId::cummax, OpId::cummin})
    table.emplace_back(op, scan_kernel);
  table.emplace_back(OpId::sort, sort_kernel);
}

}  // namespace ferry::vulkan
