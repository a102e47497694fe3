// runtime/vulkan/vk_kernels_index.cpp — index_select and gather through shaders/index.comp,
// index_add and scatter_add through shaders/index_add.comp (docs/kernel-contract.md).
//
// Both become the CPU's one loop (runtime/cpu/cpu_kernels_index.cpp): out[i] = x[src(i) +
// index[i] * stride(dim)], with src = x seen with the output's shape and stride 0 along `dim`,
// and index seen with the output's shape (index_select's varies along `dim` only). The host
// coalesces the three views, loops over dims beyond the shader's 4, and binds x with its
// whole extent along `dim`. The shader moves elements by size and reads the i64 indices as
// 32-bit words, so only x's dtype needs the device's full shader variant.
// Tensors larger than one storage-buffer binding are cut along the output's outer dims
// (vk_split.hpp), x along with them where it varies along those dims (its dims other than
// `dim`); x's extent along `dim` alone exceeding a binding raises UnsupportedError.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "abi/index.h"
#include "abi/index_add.h"
#include "ferry/error.hpp"
#include "ferry/kit/index_args.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr int kMaxDims = 4;  // dims the shader indexes
constexpr std::uint32_t kWorkgroup = 256;

// One dispatch: out and idx have the same sizes of at most 4 dims, x those and then the
// gathered dim, which the shader indexes (its stride along the others is 0 where they stand
// for `dim`).
void dispatch_part(VulkanDevice& dev, const TensorArg& out, const TensorArg& x,
                   const TensorArg& idx) {
  const std::int64_t dim_size = x.sizes.back(), dim_stride = x.strides.back();
  Binding bo = dev.bind(out, Access::write), bx = dev.bind(x, Access::read),
          bi = dev.bind(idx, Access::read);
  abi::IndexParams p{};
  const int nd = out.ndim();
  std::uint64_t n = 1;
  const TensorArg* views[3] = {&out, &x, &idx};
  for (int d = 0; d < kMaxDims; ++d) {
    p.size[d] = d < nd ? std::uint32_t(out.sizes[d]) : 1;
    n *= p.size[d];
    for (int t = 0; t < 3; ++t) p.stride[t][d] = d < nd ? std::uint32_t(views[t]->strides[d]) : 0;
  }
  if (n > 0xffffffffull)
    throw UnsupportedError("index_select/gather: the vulkan kernel takes < 2^32 output elements");
  p.off[0] = bo.element_offset;
  p.off[1] = bx.element_offset;
  p.off[2] = bi.element_offset;
  p.n = std::uint32_t(n);
  p.dim_stride = std::uint32_t(dim_stride);
  p.dim_size = std::uint32_t(dim_size);
  const std::uint32_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
  const std::uint32_t groups =
      std::uint32_t(std::min<std::uint64_t>((n + wg - 1) / wg, dev.limits().max_groups_x));
  const abi::IndexSpec spec{.WG = wg,
                            .ELSIZE = std::uint32_t(dtype_size(out.dtype)),
                            .NDIM = std::uint32_t(std::max(nd, 1))};
  dev.dispatch({"index", spec.values(), {bo, bx, bi}, &p, sizeof p, {groups, 1, 1}});
}

// out[i] = x[i with coordinate `dim` replaced by index[i]]; `index` has the output's shape.
void gather_along(DeviceImpl& d, std::string_view op, const TensorArg& x, const TensorArg& index,
                  const TensorArg& out, int dim) {
  VulkanDevice& dev = vulkan_device(d);
  if (index.dtype != DType::i64 || x.dtype != out.dtype)
    throw DTypeError(
        fmt::format("{}: the vulkan kernel expects an i64 index and an output of x's dtype", op));
  if (x.dtype != DType::f64) dev.require(x.dtype, op);  // f64 moves as 8-byte elements
  if (out.numel() == 0) return;
  const std::int64_t dim_size = x.sizes[std::size_t(dim)];
  const std::int64_t dim_stride = x.strides[std::size_t(dim)];
  if (dim_size > 0xffffffffll)
    throw UnsupportedError(fmt::format("{}: the vulkan kernel takes dims of < 2^32", op));
  std::vector<std::int64_t> src_strides = x.strides;
  src_strides[std::size_t(dim)] = 0;
  Coalesced c = coalesce(out.sizes, {out.strides, src_strides, index.strides});

  const int nd = int(c.sizes.size());
  const int outer = std::max(0, nd - kMaxDims);
  const TensorArg* base[3] = {&out, &x, &index};
  std::vector<std::int64_t> at(std::size_t(outer), 0);  // position in the outer dims
  for (;;) {
    TensorArg part[3];
    for (int t = 0; t < 3; ++t) {
      part[t] = *base[t];
      part[t].sizes.assign(c.sizes.begin() + outer, c.sizes.end());
      part[t].strides.assign(c.strides[std::size_t(t)].begin() + outer,
                             c.strides[std::size_t(t)].end());
      for (int k = 0; k < outer; ++k)
        part[t].offset += at[std::size_t(k)] * c.strides[std::size_t(t)][std::size_t(k)];
    }
    part[1].sizes.push_back(dim_size);  // x as the shader reaches it
    part[1].strides.push_back(dim_stride);
    for_each_part(
        dev.limits(), {part[0], part[1], part[2]}, 0, nd - outer, [&](const auto& p, const auto&) {
          if (!fits(dev.limits(), p[1]))
            throw UnsupportedError(
                fmt::format("{}: x along dim {} ({} elements, stride {}) spans more than the "
                            "device's storage-buffer range ({} bytes); the Vulkan kernel cuts x "
                            "only along its other dims",
                            op, dim, dim_size, dim_stride, dev.limits().max_storage_range));
          dispatch_part(dev, p[0], p[1], p[2]);
        });
    int k = outer - 1;
    while (k >= 0 && ++at[std::size_t(k)] == c.sizes[std::size_t(k)]) at[std::size_t(k--)] = 0;
    if (k < 0) break;
  }
}

void index_select_kernel(DeviceImpl& d, const OpCall& call) {
  const GatherOperands a = index_select_args(call, "vulkan");
  gather_along(d, "index_select", a.x, a.index, a.out, a.dim);
}

void gather_kernel(DeviceImpl& d, const OpCall& call) {
  const GatherOperands a = gather_args(call, "vulkan");
  gather_along(d, "gather", a.x, a.index, a.out, a.dim);
}

// ---- index_add, scatter_add ----
// The CPU's loop (Note [Deterministic accumulation] in runtime/cpu/cpu_kernels_grad.cpp), one
// invocation per output line. The views all have src's shape with `dim` moved last: out with
// its own size and stride along `dim` (the index picks the coordinate), src and the index
// with src's extent along it. Tensors larger than a binding are cut three ways, each keeping
// every element's contributions in increasing j:
//  - out along `dim` into ranges of rows [base, base + n): a dispatch adds only the
//    contributions whose index falls in its range and skips the others, so an output (an
//    embedding table) larger than a binding costs one pass over src per range;
//  - every view along the other dims: disjoint output lines;
//  - src and the index along `dim`: chunks of contributions, dispatched in order (the barrier
//    tracker puts a barrier between two that write the same bytes).

// One dispatch over views of at most 4 other dims, then `dim`; out holds the rows from `base`.
void dispatch_accumulate_once(VulkanDevice& dev, OpId op, const TensorArg& out,
                              const TensorArg& src, const TensorArg& idx, std::int64_t base) {
  // out is read and written: bound as a write, the barrier tracker orders this dispatch after
  // every earlier read or write of its bytes, and later commands after it.
  Binding bo = dev.bind(out, Access::write), bs = dev.bind(src, Access::read),
          bi = dev.bind(idx, Access::read);
  const int nd = out.ndim() - 1, last = nd;
  abi::IndexAddParams p{};
  std::uint64_t lines = 1;
  const TensorArg* views[3] = {&out, &src, &idx};
  for (int d = 0; d < kMaxDims; ++d) {
    p.size[d] = d < nd ? std::uint32_t(out.sizes[d]) : 1;
    lines *= p.size[d];
    for (int t = 0; t < 3; ++t) p.stride[t][d] = d < nd ? std::uint32_t(views[t]->strides[d]) : 0;
  }
  p.off[0] = bo.element_offset;
  p.off[1] = bs.element_offset;
  p.off[2] = bi.element_offset;
  p.lines = std::uint32_t(lines);
  p.count = std::uint32_t(src.sizes[last]);
  p.out_size = std::uint32_t(out.sizes[last]);
  p.out_step = std::uint32_t(out.strides[last]);
  p.src_step = std::uint32_t(src.strides[last]);
  p.index_step = std::uint32_t(idx.strides[last]);
  p.index_base = std::uint32_t(base);
  const std::uint32_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
  const std::uint32_t groups =
      std::uint32_t(std::min<std::uint64_t>((lines + wg - 1) / wg, dev.limits().max_groups_x));
  const abi::IndexAddSpec spec{
      .WG = wg, .DT = dtype_code(out.dtype), .NDIM = std::uint32_t(std::max(nd, 1))};
  dev.dispatch({"index_add",
                spec.values(),
                {bo, bs, bi},
                &p,
                sizeof p,
                {groups, 1, 1},
                std::uint32_t(op),
                out.dtype == DType::f64});
}

// dispatch_accumulate_once, with src and the index cut along `dim` into pieces, dispatched in
// order, where an invocation would walk its lines' contributions (a loop trip each, for each
// round of the grid-stride loop over lines) past the device's loop budget (Note [Loop
// budget] in vk_kernels.hpp): 1,048,576 contributions to one element summed 65,536 on
// lavapipe before.
void dispatch_accumulate(VulkanDevice& dev, OpId op, const TensorArg& out, const TensorArg& src,
                         const TensorArg& idx, std::int64_t base) {
  const int last = out.ndim() - 1;
  std::uint64_t lines = 1;
  for (int d = 0; d < last; ++d) lines *= std::uint64_t(out.sizes[d]);
  const std::uint64_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
  const std::uint64_t groups = std::max<std::uint64_t>(
      1, std::min<std::uint64_t>((lines + wg - 1) / wg, dev.limits().max_groups_x));
  const std::uint64_t rounds = (lines + groups * wg - 1) / (groups * wg);
  const std::int64_t count = src.sizes[last];
  const std::int64_t fit = std::int64_t(
      loop_trips_per_invocation(dev.limits(), std::uint64_t(count), rounds, 2 * rounds));
  if (fit >= count) return dispatch_accumulate_once(dev, op, out, src, idx, base);
  if (fit == 0)
    throw_past_loop_budget(dev, op_name(op),
                           fmt::format("an invocation would walk {} output lines", rounds));
  for (std::int64_t j0 = 0; j0 < count; j0 += fit) {
    const std::int64_t n = std::min(fit, count - j0);
    dispatch_accumulate_once(dev, op, out, narrow(src, last, j0, n), narrow(idx, last, j0, n),
                             base);
  }
}

// Dispatches views (other dims first, `dim` last) in parts that fit a binding.
void accumulate_in_parts(VulkanDevice& dev, OpId op, const TensorArg& out, const TensorArg& src,
                         const TensorArg& idx) {
  const KernelLimits& lim = dev.limits();
  const int last = out.ndim() - 1;
  // How many contributions src and the index take at once, their other dims as they are.
  auto j_chunk = [&](const TensorArg& s, const TensorArg& i) {
    return std::min(max_chunk(lim, s, last), max_chunk(lim, i, last));
  };
  std::int64_t base = 0;  // the first row (index along dim) of the out being processed
  // A part whose views fit, or whose other dims are down to one index: its out rows in
  // ranges that fit, each with its contributions in order, in chunks that fit.
  auto in_order = [&](const std::vector<TensorArg>& v, const auto&) {
    const std::int64_t rows = v[0].sizes[last], count = v[1].sizes[last];
    const std::int64_t row_step = max_chunk(lim, v[0], last);
    if (row_step < 1)  // a single output element larger than a binding: cannot happen
      throw UnsupportedError(
          fmt::format("{}: the output does not fit the device's "
                      "storage-buffer range ({} bytes)",
                      op_name(op), lim.max_storage_range));
    const std::int64_t step = std::max<std::int64_t>(1, j_chunk(v[1], v[2]));
    for (std::int64_t r = 0; r < rows; r += row_step) {
      const TensorArg o = narrow(v[0], last, r, std::min(row_step, rows - r));
      for (std::int64_t j = 0; j < count; j += step) {
        const std::int64_t len = std::min(step, count - j);
        dispatch_accumulate(dev, op, o, narrow(v[1], last, j, len), narrow(v[2], last, j, len),
                            base + r);
      }
    }
  };
  // Rows of out that fit with its other dims whole (usually all of them); where not even one
  // does, in_order cuts the rows of each part instead.
  const std::int64_t rows = out.sizes[last], count = src.sizes[last];
  const std::int64_t fit = max_chunk(lim, out, last);
  const std::int64_t row_step = fit < 1 ? rows : std::min(rows, fit);
  const std::int64_t step = j_chunk(src, idx);
  for (base = 0; base < rows; base += row_step) {
    const TensorArg o = narrow(out, last, base, std::min(row_step, rows - base));
    if (step < 1) {  // not even one contribution of every line fits: cut the lines first
      for_each_part(lim, {o, src, idx}, 0, last, in_order);
      continue;
    }
    for (std::int64_t j = 0; j < count; j += step) {
      const std::int64_t len = std::min(step, count - j);
      for_each_part(lim, {o, narrow(src, last, j, len), narrow(idx, last, j, len)}, 0, last,
                    in_order);
    }
  }
}

// `index` has src's shape (strides may be 0).
void accumulate_along(DeviceImpl& d, OpId id, const TensorArg& src, const TensorArg& index,
                      const TensorArg& out, int dim) {
  VulkanDevice& dev = vulkan_device(d);
  const std::string_view op = op_name(id);
  if (index.dtype != DType::i64)
    throw DTypeError(fmt::format("{}: the index must be i64, not {}", op, dtype_name(index.dtype)));
  if (src.dtype != out.dtype)
    throw DTypeError(fmt::format("{}: src ({}) must have the output's dtype ({})", op,
                                 dtype_name(src.dtype), dtype_name(out.dtype)));
  if (out.dtype == DType::boolean)
    throw UnsupportedError(fmt::format("{}: the vulkan kernel does not take bool", op));
  dev.require_op(id, out.dtype);
  if (src.numel() == 0 || out.numel() == 0) return;
  const auto ud = std::size_t(dim);
  if (src.sizes[ud] > 0xffffffffll || out.sizes[ud] > 0xffffffffll)
    throw UnsupportedError(fmt::format("{}: the vulkan kernel takes dims of < 2^32", op));
  // The other dims, coalesced, then `dim`.
  std::vector<std::int64_t> sizes;
  std::vector<std::vector<std::int64_t>> strides(3);
  const TensorArg* base[3] = {&out, &src, &index};
  for (int k = 0; k < src.ndim(); ++k) {
    if (k == dim) continue;
    sizes.push_back(src.sizes[std::size_t(k)]);
    for (int t = 0; t < 3; ++t) strides[std::size_t(t)].push_back(base[t]->strides[std::size_t(k)]);
  }
  Coalesced c = coalesce(sizes, strides);
  const std::int64_t along_size[3] = {out.sizes[ud], src.sizes[ud], src.sizes[ud]};
  const int nd = int(c.sizes.size());
  const int outer = std::max(0, nd - kMaxDims);
  std::uint64_t lines = 1;
  for (int k = outer; k < nd; ++k) lines *= std::uint64_t(c.sizes[std::size_t(k)]);
  if (lines > 0xffffffffull)
    throw UnsupportedError(fmt::format("{}: the vulkan kernel takes < 2^32 output lines", op));
  std::vector<std::int64_t> at(std::size_t(outer), 0);  // position in the outer dims
  for (;;) {
    TensorArg part[3];
    for (int t = 0; t < 3; ++t) {
      part[t] = *base[t];
      part[t].sizes.assign(c.sizes.begin() + outer, c.sizes.end());
      part[t].strides.assign(c.strides[std::size_t(t)].begin() + outer,
                             c.strides[std::size_t(t)].end());
      for (int k = 0; k < outer; ++k)
        part[t].offset += at[std::size_t(k)] * c.strides[std::size_t(t)][std::size_t(k)];
      part[t].sizes.push_back(along_size[t]);
      part[t].strides.push_back(base[t]->strides[ud]);
    }
    accumulate_in_parts(dev, id, part[0], part[1], part[2]);
    int k = outer - 1;
    while (k >= 0 && ++at[std::size_t(k)] == c.sizes[std::size_t(k)]) at[std::size_t(k--)] = 0;
    if (k < 0) break;
  }
}

void index_add_kernel(DeviceImpl& d, const OpCall& call) {
  const AccumulateOperands a = index_add_args(call, "vulkan");
  accumulate_along(d, OpId::index_add, a.src, a.index, a.out, a.dim);
}

void scatter_add_kernel(DeviceImpl& d, const OpCall& call) {
  const AccumulateOperands a = scatter_add_args(call, "vulkan");
  accumulate_along(d, OpId::scatter_add, a.src, a.index, a.out, a.dim);
}

}  // namespace

bool moves_element_bytes(OpId op) { return op == OpId::index_select || op == OpId::gather; }

void add_index_kernels(KernelTable& table) {
  table.emplace_back(OpId::index_select, index_select_kernel);
  table.emplace_back(OpId::gather, gather_kernel);
  table.emplace_back(OpId::index_add, index_add_kernel);
  table.emplace_back(OpId::scatter_add, scatter_add_kernel);
}

}  // namespace ferry::vulkan
