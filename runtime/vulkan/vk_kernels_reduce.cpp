// runtime/vulkan/vk_kernels_reduce.cpp — sum, prod, max, min and argmax through
// shaders/reduce.comp (docs/kernel-contract.md, "Reductions").
//
// The core hands over the input with the kept dims first and the reduced dims
// last. Each group is coalesced on its own (which keeps the row-major order
// argmax's index counts in); kept dims beyond the shader's 4 are looped over
// on the host. The schedule depends on the shape only:
//  - rows: LANES threads per output, loads along the reduced dim (contiguous
//    rows, or rows no better layout helps);
//  - columns (ROW_FAST): the outputs are contiguous and the rows are not (sum
//    over dim 0): neighbouring threads take neighbouring outputs;
//  - split: too few threads for the GPU and long rows (a full reduction): each
//    row is cut into pieces whose partial results go to a scratch buffer, and
//    a second dispatch combines them.
// An input beyond one storage-buffer binding (vk_split.hpp) is cut along the
// kept dims into chunks of whole rows; rows beyond a binding are cut along the
// reduced dims into pieces, each bound and reduced to records on its own (for
// as many outputs at a time as fit), combined as in the split schedule.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "abi/reduce.h"
#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr int kMaxKeptDims = 4;  // the shader's limits
constexpr int kMaxReducedDims = 8;
constexpr std::uint32_t kRecordWords = 4;  // one partial result in the scratch buffer
constexpr std::uint64_t kMaxCount = std::uint64_t(1) << 31;

using abi::ReduceParams;

// Threads per row, and whether the thread index runs along the rows.
struct Layout {
  std::uint32_t lanes = 1;
  bool row_fast = false;
};

// `inner_rows`: outputs along the innermost kept dim, when that dim is
// contiguous in memory while the rows are not (else 0).
Layout choose_layout(const KernelLimits& lim, std::uint64_t n_red, std::uint64_t inner_rows) {
  const std::uint32_t wg = workgroup_size(lim);
  const std::uint32_t lanes = row_lanes(lim, n_red, wg);
  if (inner_rows >= 8) return {std::min(wg / pow2_at_least(inner_rows, wg), lanes), true};
  return {lanes, false};
}

// A view's kept (the first kdim) and reduced dims as the shader takes them, in its push
// constants: at most 4 and 8, size-1 dims dropped (they change neither offsets nor the order).
struct Geometry {
  ReduceParams p{};
  std::uint32_t kdim = 0, rdim = 0;
  std::uint64_t n_out = 1, n_red = 1;
};

Geometry geometry(const TensorArg& x, int kdim) {
  Geometry g;
  for (int d = 0; d < x.ndim(); ++d) {
    const auto size = std::uint32_t(x.sizes[d]), stride = std::uint32_t(x.strides[d]);
    if (size == 1) continue;
    const bool kept = d < kdim;
    std::uint32_t& n = kept ? g.kdim : g.rdim;
    (kept ? g.p.ksize : g.p.rsize)[n] = size;
    (kept ? g.p.kstride : g.p.rstride)[n++] = stride;
    (kept ? g.n_out : g.n_red) *= size;
  }
  if (g.rdim == 0) g.p.rsize[g.rdim++] = g.p.rstride[0] = 1;
  g.p.n_out = std::uint32_t(g.n_out);
  g.p.n_red = std::uint32_t(g.n_red);
  return g;
}

Layout layout_of(const VulkanDevice& dev, const Geometry& g) {
  const ReduceParams& p = g.p;
  const bool columns = g.kdim > 0 && p.kstride[g.kdim - 1] == 1 && p.rstride[g.rdim - 1] != 1;
  return choose_layout(dev.limits(), g.n_red, columns ? p.ksize[g.kdim - 1] : 0);
}

// Rows of n_out records one binding holds.
std::uint64_t record_rows(const VulkanDevice& dev, std::uint64_t n_out) {
  return usable_range(dev.limits()) / (n_out * kRecordWords * 4);
}

// Pieces to cut each row into so that the GPU has enough threads (1: none), at
// most `cap`. Rounded so that pieces of ceil(n_red / splits) elements each
// number exactly `splits` (pass() recomputes that length; none is empty).
std::uint64_t splits_for(const KernelLimits& lim, const Geometry& g, Layout l, std::uint64_t cap) {
  const std::uint64_t s = row_splits(lim, g.n_out, l.lanes, g.n_red, cap);
  if (s <= 1) return 1;
  const std::uint64_t chunk = (g.n_red + s - 1) / s;
  return (g.n_red + chunk - 1) / chunk;
}

// Rows [row0, row0 + rows) of n_out records each, as an i32 view of `scratch`.
TensorArg records(Buffer* scratch, std::uint64_t row0, std::uint64_t rows, std::uint64_t n_out) {
  const auto words = std::int64_t(rows * n_out * kRecordWords);
  return {scratch, std::int64_t(row0 * n_out * kRecordWords), {words}, {1}, DType::i32};
}

struct Kind {
  std::uint32_t op;  // the OpId: the shader's OP (ferry_ops.glsl)
  std::uint32_t in_dt, out_dt;
};

// Binds `in` and `out` (each within one binding) and dispatches over n_rows rows.
void dispatch(VulkanDevice& dev, const Kind& k, std::uint32_t mode, std::uint32_t kdim,
              std::uint32_t rdim, Layout l, const TensorArg& out, const TensorArg& in,
              ReduceParams p, std::uint64_t n_rows) {
  const Binding ib = dev.bind(in, Access::read), ob = dev.bind(out, Access::write);
  p.in_off = ib.element_offset;
  p.out_off = ob.element_offset;
  const std::uint32_t wg = workgroup_size(dev.limits());
  const std::uint64_t blocks = (n_rows + wg / l.lanes - 1) / (wg / l.lanes);
  const auto groups = std::uint32_t(std::min<std::uint64_t>(blocks, dev.limits().max_groups_x));
  const abi::ReduceSpec spec{.WG = wg,
                             .OP = k.op,
                             .IN_DT = k.in_dt,
                             .OUT_DT = k.out_dt,
                             .MODE = mode,
                             .KDIM = kdim,
                             .RDIM = rdim,
                             .LANES = l.lanes,
                             .ROW_FAST = l.row_fast};
  dev.dispatch({"reduce", spec.values(), {ob, ib}, &p, sizeof p, {groups, 1, 1}, spec.OP,
                k.in_dt == abi::DT_F64});
}

// One pass over view x (geometry g) into `out`: the outputs, or (partial) splits x n_out
// records, argmax counting from `first`.
void pass(VulkanDevice& dev, const Kind& k, const TensorArg& x, const Geometry& g,
          const TensorArg& out, bool partial, std::uint64_t splits, std::uint64_t first) {
  ReduceParams p = g.p;
  p.splits = std::uint32_t(splits);
  p.chunk = std::uint32_t((g.n_red + splits - 1) / splits);
  p.first = std::uint32_t(first);
  dispatch(dev, k, partial ? abi::REDUCE_MODE_PARTIAL : abi::REDUCE_MODE_DIRECT, g.kdim, g.rdim,
           layout_of(dev, g), out, x, p, g.n_out * splits);
}

// Combines `rows` rows of n_out records in `scratch` into y: column
// reductions, first of groups of rows into fewer rows while they exceed a binding.
void finish(VulkanDevice& dev, const Kind& k, std::unique_ptr<Buffer> scratch, std::uint64_t rows,
            std::uint64_t n_out, const TensorArg& y) {
  auto combine = [&](std::uint32_t mode, const TensorArg& in, std::uint64_t count,
                     const TensorArg& out) {
    ReduceParams q{};
    q.n_out = std::uint32_t(n_out);
    q.n_red = q.chunk = std::uint32_t(count);
    q.splits = 1;
    dispatch(dev, k, mode, 0, 1, choose_layout(dev.limits(), count, n_out > 1 ? n_out : 0), out, in,
             q, n_out);
  };
  const std::uint64_t per = std::max<std::uint64_t>(record_rows(dev, n_out), 2);
  while (rows > per) {
    const std::uint64_t groups = (rows + per - 1) / per;
    std::unique_ptr<Buffer> next = dev.allocate(groups * n_out * kRecordWords * 4);
    for (std::uint64_t i = 0; i < groups; ++i) {
      const std::uint64_t n = std::min(per, rows - i * per);
      combine(abi::REDUCE_MODE_COMBINE, records(scratch.get(), i * per, n, n_out), n,
              records(next.get(), i, 1, n_out));
    }
    scratch = std::move(next);  // the device keeps its memory until the GPU is done with it
    rows = groups;
  }
  combine(abi::REDUCE_MODE_FINAL, records(scratch.get(), 0, rows, n_out), rows, y);
}

// Reduces x (kept dims, then reduced dims) into y (its outputs, contiguous). x's kept dims
// and two records per output fit one binding; its rows are cut into pieces that do too
// (vk_split.hpp; one piece when all of x fits), each reduced to its own rows of records.
void reduce(VulkanDevice& dev, const Kind& k, const TensorArg& x, int kdim, const TensorArg& y) {
  struct Piece {
    TensorArg x;
    Geometry g;
    std::uint64_t first, splits;
  };
  std::vector<Piece> pieces;
  std::uint64_t rows = 0;
  const auto n_out = std::uint64_t(y.numel());
  for_each_part(dev.limits(), {x}, kdim, x.ndim(), [&](const auto& parts, const auto& at) {
    std::uint64_t first = 0;  // row-major position in the row, as argmax counts
    for (int d = kdim; d < x.ndim(); ++d)
      first = first * std::uint64_t(x.sizes[d]) + std::uint64_t(at[std::size_t(d)]);
    Geometry g = geometry(parts[0], kdim);
    const std::uint64_t splits =
        splits_for(dev.limits(), g, layout_of(dev, g), record_rows(dev, n_out));
    pieces.push_back({parts[0], std::move(g), first, splits});
    rows += splits;
  });
  if (rows == 1) return pass(dev, k, x, pieces[0].g, y, false, 1, 0);
  std::unique_ptr<Buffer> scratch = dev.allocate(rows * n_out * kRecordWords * 4);
  std::uint64_t row = 0;
  for (const Piece& p : pieces) {
    pass(dev, k, p.x, p.g, records(scratch.get(), row, p.splits, n_out), true, p.splits, p.first);
    row += p.splits;
  }
  finish(dev, k, std::move(scratch), rows, n_out, y);
}

// Any size of x; y has x's kept dims (contiguous).
void reduce_any(VulkanDevice& dev, const Kind& k, const TensorArg& x, int kdim,
                const TensorArg& y) {
  const KernelLimits& lim = dev.limits();
  auto one = [&](const std::vector<TensorArg>& parts) {
    TensorArg out = parts[1];  // contiguous: a chunk along the outermost dim cut, the rest whole
    out.sizes = {out.numel()};
    out.strides = {1};
    TensorArg in = parts[0];  // with whole rows (the second cut below has them at one element)
    std::copy(x.sizes.begin() + kdim, x.sizes.end(), in.sizes.begin() + kdim);
    reduce(dev, k, in, kdim, out);
  };
  if (kdim == 0 || max_chunk(lim, x, 0) > 0)  // whole rows fit: chunks of outputs
    return for_each_part(lim, {x, y}, 0, kdim, [&](const auto& p, const auto&) { one(p); });
  // Rows too long: as many outputs at a time as fit with one element of each
  // row, and with two records each (the combine passes read at least two).
  TensorArg kept = x, rec = y;
  for (int d = kdim; d < x.ndim(); ++d) kept.sizes[d] = std::min<std::int64_t>(x.sizes[d], 1);
  rec.dtype = DType::i32;
  for (std::int64_t& s : rec.strides) s *= 2 * kRecordWords;
  for_each_part(lim, {kept, y, rec}, 0, kdim, [&](const auto& p, const auto&) { one(p); });
}

void run(DeviceImpl& d, const OpCall& c) {
  const OpId op = c.op;
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& in = c.inputs.at(0);
  const TensorArg& out = c.outputs.at(0);
  const int rnd = int(c.attrs.i("reduce_ndim"));
  const int knd = in.ndim() - rnd;
  if (rnd < 0 || knd < 0)
    throw ShapeError(fmt::format("{}: reduce_ndim {} is out of range for a {}-d input", c.name(),
                                 rnd, in.ndim()));
  dev.require_op(op, in.dtype);
  // Integer sums and products are i64; argmax writes its i64 as two 32-bit words, which
  // every device can, so only the integer sums need 64-bit integer support.
  if (op != OpId::argmax) dev.require_op(op, out.dtype);
  if (out.numel() == 0) return;

  std::span<const std::int64_t> sizes(in.sizes), strides(in.strides);
  Coalesced kept =
      coalesce(sizes.first(knd), {std::vector(strides.begin(), strides.begin() + knd)});
  Coalesced red = coalesce(sizes.subspan(knd), {std::vector(strides.begin() + knd, strides.end())});
  if (red.sizes.size() > std::size_t(kMaxReducedDims))
    throw UnsupportedError(fmt::format(
        "{}: the reduced dims of this view ({} after merging) exceed the Vulkan kernel's {}; "
        "make the input contiguous first",
        c.name(), red.sizes.size(), kMaxReducedDims));
  if (knd == 0) kept = {{}, {{}}};  // a full reduction: no kept dims at all

  // The shader indexes the innermost 4 kept dims; the host loops over the others.
  // x: those kept dims, then the reduced dims; y: x's outputs.
  const auto outer =
      std::ptrdiff_t(std::max<std::size_t>(kept.sizes.size(), kMaxKeptDims)) - kMaxKeptDims;
  TensorArg x = in, y = out;
  x.sizes.assign(kept.sizes.begin() + outer, kept.sizes.end());
  x.strides.assign(kept.strides[0].begin() + outer, kept.strides[0].end());
  const int kdim = x.ndim();
  y.sizes = y.strides = x.sizes;
  std::uint64_t n_out = 1, n_red = 1;
  for (int i = kdim - 1; i >= 0; --i) {
    y.strides[std::size_t(i)] = std::int64_t(n_out);
    n_out *= std::uint64_t(x.sizes[std::size_t(i)]);
  }
  for (std::int64_t s : red.sizes) n_red *= std::uint64_t(s);
  x.sizes.insert(x.sizes.end(), red.sizes.begin(), red.sizes.end());
  x.strides.insert(x.strides.end(), red.strides[0].begin(), red.strides[0].end());
  // The shader counts outputs and elements in 32 bits (an expanded input can
  // be far larger than the memory it spans).
  if (n_out >= kMaxCount || n_red >= kMaxCount)
    throw UnsupportedError(
        fmt::format("{}: {} outputs of {} elements each exceed the Vulkan kernel's 2^31 limit",
                    c.name(), n_out, n_red));
  const Kind k{std::uint32_t(op), dtype_code(in.dtype), dtype_code(out.dtype)};
  std::vector<std::int64_t> idx(std::size_t(outer), 0);
  for (std::int64_t o0 = 0;; o0 += std::int64_t(n_out)) {
    TensorArg xi = x, yi = y;
    for (std::size_t d = 0; d < idx.size(); ++d) xi.offset += idx[d] * kept.strides[0][d];
    yi.offset += o0;
    reduce_any(dev, k, xi, kdim, yi);
    std::size_t d = idx.size();
    while (d > 0 && ++idx[d - 1] == kept.sizes[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
}

}  // namespace

void add_reduce_kernels(KernelTable& table) {
  for (OpId op : {OpId::sum, OpId::prod, OpId::max, OpId::min, OpId::argmax})
    table.emplace_back(op, run);
}

}  // namespace ferry::vulkan
