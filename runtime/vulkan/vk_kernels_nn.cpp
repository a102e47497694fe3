// runtime/vulkan/vk_kernels_nn.cpp — softmax and log_softmax through
// shaders/softmax.comp, layer_norm through shaders/layer_norm.comp
// (docs/kernel-contract.md).
//
// softmax: the rows lie along the last dim of the input and of the output,
// both possibly transposed views. The dims that index the rows are coalesced
// for both tensors together; those beyond the shader's 4 are looped over on
// the host. As in vk_kernels_reduce.cpp, rows that are strided while their
// neighbours are contiguous get the thread index along the rows, and a few
// long rows are split over workgroups: a statistics pass writes (max, sum of
// exp) per piece into a scratch buffer, then the writing pass merges them.
// layer_norm: x is a [rows, N] matrix; a group of threads per row. layer_norm_backward: per
// part of rows, dx over the rows, then the parameters' gradients down the columns (in chunks
// of rows combined by a third dispatch where the columns are few), the later parts adding to
// the first's (shaders/layer_norm_backward.comp).
// Both cut tensors larger than one storage-buffer binding into chunks of rows
// (vk_split.hpp); a single row larger than a binding raises UnsupportedError
// (row_too_long says why).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "abi/layer_norm.h"
#include "abi/layer_norm_backward.h"
#include "abi/softmax.h"
#include "ferry/error.hpp"
#include "ferry/kit/layer_norm_args.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::size_t kMaxOuterDims = 4;           // softmax.comp's limit
constexpr std::uint64_t kMaxSplits = 256;          // pieces of one softmax row
constexpr std::uint64_t kMaxCount = std::uint64_t(1) << 31;  // rows, row length: 32-bit in shaders

std::uint32_t groups_for(const VulkanDevice& dev, std::uint64_t rows, std::uint32_t per_group) {
  return std::uint32_t(
      std::min<std::uint64_t>((rows + per_group - 1) / per_group, dev.limits().max_groups_x));
}

[[noreturn]] void past_loop_budget(const VulkanDevice& dev, std::string_view op, std::uint64_t rows,
                                   std::uint64_t n, std::uint64_t iterations) {
  throw_past_loop_budget(
      dev, fmt::format("{} ({} rows of {} elements)", op, rows, n),
      fmt::format("one invocation of the Vulkan kernel would run {}", iterations));
}

// layer_norm's row kernels walk each row `walks` times, a lane its share, for every round of
// rows its workgroup takes (the grid stops at max_groups_x): an UnsupportedError where one
// invocation would run past the device's loop budget (Note [Loop budget] in vk_kernels.hpp),
// every loop counted (the walks and the lanes' combining tree).
void check_row_loops(const VulkanDevice& dev, std::string_view op, std::uint64_t rows,
                     std::uint64_t n, std::uint32_t wg, std::uint32_t lanes, std::uint64_t walks) {
  const std::uint64_t per_group = wg / lanes, blocks = (rows + per_group - 1) / per_group;
  const std::uint64_t groups = std::max<std::uint64_t>(groups_for(dev, rows, wg / lanes), 1);
  const std::uint64_t rounds = (blocks + groups - 1) / groups;
  std::uint64_t tree = 0;
  for (std::uint32_t h = 1; h < lanes; h <<= 1) tree += 2;
  const std::uint64_t per_round = 1 + walks * ((n + lanes - 1) / lanes) + tree;
  if (loop_trips_per_invocation(dev.limits(), rounds, per_round) != rounds)
    past_loop_budget(dev, op, rows, n, rounds * per_round);
}

// Rows are cut apart when a tensor exceeds one binding, but a single row is not cut into
// pieces: softmax's would need their statistics merged across separately bound pieces, and
// rows (a hidden size, a vocabulary) are far shorter than any device's storage-buffer range.
[[noreturn]] void row_too_long(std::string_view op, const TensorArg& t, int dim,
                               const KernelLimits& lim) {
  throw UnsupportedError(fmt::format(
      "{}: one row ({} elements at stride {}) spans more than the device's storage-buffer "
      "range ({} bytes); the Vulkan kernel splits tensors between rows, not within one",
      op, t.sizes[std::size_t(dim)], t.strides[std::size_t(dim)], lim.max_storage_range));
}

// One dispatch group over the rows of x and y, [osize..., n] with at most 4 outer dims, each
// within one binding.
void softmax_rows(VulkanDevice& dev, bool log, const TensorArg& x, const TensorArg& y) {
  const bool f64 = x.dtype == DType::f64;  // its f64 module computes it (Note [f64 on Vulkan])
  const std::int64_t n = x.sizes.back();
  const std::span<const std::int64_t> osize = std::span(x.sizes).first(x.sizes.size() - 1);
  const std::span<const std::int64_t> xstride = std::span(x.strides).first(osize.size());
  abi::SoftmaxParams p{};
  std::uint64_t rows = 1;
  for (std::size_t d = 0; d < osize.size(); ++d) {
    p.osize[d] = std::uint32_t(osize[d]);
    p.xstride[d] = std::uint32_t(xstride[d]);
    p.ystride[d] = std::uint32_t(y.strides[d]);
    rows *= std::uint64_t(osize[d]);
  }
  if (rows >= kMaxCount || std::uint64_t(n) >= kMaxCount)
    throw UnsupportedError(
        fmt::format("{}: {} rows of {} elements exceed the Vulkan kernel's 2^31 limit",
                    log ? "log_softmax" : "softmax", rows, n));
  const Binding xb = dev.bind(x, Access::read);
  const Binding yb = dev.bind(y, Access::write);
  p.n = std::uint32_t(n);
  p.xs = std::uint32_t(x.strides.back());
  p.ys = std::uint32_t(y.strides.back());
  p.x_off = xb.element_offset;
  p.y_off = yb.element_offset;
  p.n_rows = std::uint32_t(rows);
  p.splits = 1;
  p.chunk = p.n;

  const std::uint32_t wg = workgroup_size(dev.limits());
  std::uint32_t lanes = row_lanes(dev.limits(), std::uint64_t(n), wg);
  bool row_fast = false;
  if (p.xs != 1 && !osize.empty() && xstride.back() == 1 && osize.back() >= 8) {
    row_fast = true;  // e.g. softmax over dim 0 of a row-major matrix
    lanes = std::min(wg / pow2_at_least(std::uint64_t(osize.back()), wg), lanes);
  }
  const std::uint64_t splits = row_splits(dev.limits(), rows, lanes, std::uint64_t(n), kMaxSplits);
  auto run = [&](std::uint32_t mode, Binding out, Binding rec, std::uint64_t virtual_rows) {
    const abi::SoftmaxSpec spec{.WG = wg,
                                .LOG = log,
                                .DT = dtype_code(x.dtype),
                                .MODE = mode,
                                .ODIM = std::uint32_t(osize.size()),
                                .LANES = lanes,
                                .ROW_FAST = row_fast};
    dev.dispatch({"softmax",
                  spec.values(),
                  {out, xb, rec},
                  &p,
                  sizeof p,
                  {groups_for(dev, virtual_rows, wg / lanes), 1, 1},
                  std::uint32_t(log ? OpId::log_softmax : OpId::softmax),
                  f64});
  };
  if (splits <= 1) return run(abi::SOFTMAX_MODE_FULL, yb, yb, rows);  // binding 2 unused

  p.chunk = std::uint32_t((std::uint64_t(n) + splits - 1) / splits);
  p.splits = std::uint32_t((std::uint64_t(n) + p.chunk - 1) / p.chunk);
  // (max, sum) per piece, in the dtype the shader computes in.
  const std::uint64_t values = 2 * rows * p.splits;
  const DType pair_dtype = f64 ? DType::f64 : DType::f32;
  std::unique_ptr<Buffer> scratch = dev.allocate(values * dtype_size(pair_dtype));
  TensorArg pairs{scratch.get(), 0, {std::int64_t(values)}, {1}, pair_dtype};
  const Binding rw = dev.bind(pairs, Access::write);
  p.r_off = rw.element_offset;
  run(abi::SOFTMAX_MODE_STATS, rw, rw, rows * p.splits);
  run(abi::SOFTMAX_MODE_WRITE, yb, dev.bind(pairs, Access::read), rows * p.splits);
  // `scratch` may go now: the device keeps its memory until the GPU is done with it.
}

void softmax_kernel(DeviceImpl& d, const OpCall& c, bool log) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& x = c.inputs.at(0);
  const TensorArg& y = c.outputs.at(0);
  if (!is_floating(x.dtype) || y.dtype != x.dtype)
    throw UnsupportedError(
        fmt::format("{}: takes a floating input, not {}", c.name(), dtype_name(x.dtype)));
  dev.require_op(c.op, x.dtype);
  if (y.numel() == 0 || x.ndim() == 0) return;  // the core never sends these

  const std::size_t nd = std::size_t(x.ndim()) - 1;  // the dims that index rows
  Coalesced o =
      coalesce(std::span(x.sizes).first(nd), {std::vector(x.strides.begin(), x.strides.end() - 1),
                                              std::vector(y.strides.begin(), y.strides.end() - 1)});
  if (nd == 0) o = {{}, {{}, {}}};  // a single row
  const std::size_t outer = o.sizes.size() > kMaxOuterDims ? o.sizes.size() - kMaxOuterDims : 0;
  // The views the shader reads and writes: the inner outer dims, then the row.
  auto view = [&](const TensorArg& t, const std::vector<std::int64_t>& st) {
    TensorArg v{t.buffer, t.offset, {}, {}, t.dtype};
    v.sizes.assign(o.sizes.begin() + std::ptrdiff_t(outer), o.sizes.end());
    v.strides.assign(st.begin() + std::ptrdiff_t(outer), st.end());
    v.sizes.push_back(x.sizes.back());
    v.strides.push_back(t.strides.back());
    return v;
  };
  const TensorArg xv = view(x, o.strides[0]), yv = view(y, o.strides[1]);
  std::vector<std::int64_t> idx(outer, 0);
  for (;;) {
    TensorArg xi = xv, yi = yv;
    for (std::size_t k = 0; k < outer; ++k) {
      xi.offset += idx[k] * o.strides[0][k];
      yi.offset += idx[k] * o.strides[1][k];
    }
    for_each_part(dev.limits(), {xi, yi}, 0, xi.ndim() - 1, [&](const auto& part, const auto&) {
      for (const TensorArg& t : part)
        if (!fits(dev.limits(), t)) row_too_long(c.name(), t, t.ndim() - 1, dev.limits());
      softmax_rows(dev, log, part[0], part[1]);
    });
    std::size_t k = outer;
    while (k > 0 && ++idx[k - 1] == o.sizes[k - 1]) idx[--k] = 0;
    if (k == 0) break;
  }
}

// One dispatch over rows of x, y, mean and rstd, each within one binding.
void layer_norm_rows(VulkanDevice& dev, const OpCall& c, const TensorArg& x, const TensorArg& y,
                     const TensorArg& mean, const TensorArg& rstd) {
  const bool has_w = c.attrs.b("has_weight"), has_b = c.attrs.b("has_bias");
  const std::int64_t rows = x.sizes[0], n = x.sizes[1];
  abi::LayerNormParams p{};
  const Binding yb = dev.bind(y, Access::write), mb = dev.bind(mean, Access::write),
                rb = dev.bind(rstd, Access::write), xb = dev.bind(x, Access::read);
  // Absent parameters: the output's binding again (the shader never reads it).
  Binding wb = yb, bb = yb;
  if (has_w) {
    const TensorArg& w = c.inputs.at(1);
    wb = dev.bind(w, Access::read);
    p.w_off = wb.element_offset;
    p.ws = std::uint32_t(w.strides[0]);
  }
  if (has_b) {
    const TensorArg& b = c.inputs.at(has_w ? 2 : 1);
    bb = dev.bind(b, Access::read);
    p.b_off = bb.element_offset;
    p.bs = std::uint32_t(b.strides[0]);
  }
  p.x_off = xb.element_offset;
  p.y_off = yb.element_offset;
  p.m_off = mb.element_offset;
  p.r_off = rb.element_offset;
  p.rows = std::uint32_t(rows);
  p.n = std::uint32_t(n);
  p.xs0 = std::uint32_t(x.strides[0]);
  p.xs1 = std::uint32_t(x.strides[1]);
  p.ys0 = std::uint32_t(y.strides[0]);
  p.ys1 = std::uint32_t(y.strides[1]);
  p.ms = std::uint32_t(mean.strides[0]);
  p.rs = std::uint32_t(rstd.strides[0]);
  const double eps = c.attrs.f("eps");
  p.eps = float(eps);
  std::memcpy(p.eps_bits, &eps, sizeof eps);

  const std::uint32_t wg = workgroup_size(dev.limits());
  const std::uint32_t lanes = row_lanes(dev.limits(), std::uint64_t(n), wg);
  check_row_loops(dev, "layer_norm", std::uint64_t(rows), std::uint64_t(n), wg, lanes, 2);
  const abi::LayerNormSpec spec{
      .WG = wg, .DT = dtype_code(x.dtype), .HAS_W = has_w, .HAS_B = has_b, .LANES = lanes};
  dev.dispatch({"layer_norm",
                spec.values(),
                {yb, mb, rb, xb, wb, bb},
                &p,
                sizeof p,
                {groups_for(dev, std::uint64_t(rows), wg / lanes), 1, 1},
                std::uint32_t(OpId::layer_norm),
                x.dtype == DType::f64});
}

void layer_norm_kernel(DeviceImpl& d, const OpCall& c) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& x = c.inputs.at(0);
  if (!is_floating(x.dtype))
    throw UnsupportedError(
        fmt::format("layer_norm: takes a floating input, not {}", dtype_name(x.dtype)));
  dev.require_op(OpId::layer_norm, x.dtype);
  const TensorArg &y = c.outputs.at(0), &mean = c.outputs.at(1), &rstd = c.outputs.at(2);
  const std::int64_t rows = x.sizes.at(0), n = x.sizes.at(1);
  if (rows == 0) return;
  if (std::uint64_t(rows) >= kMaxCount || std::uint64_t(n) >= kMaxCount)
    throw UnsupportedError(fmt::format(
        "layer_norm: {} rows of {} elements exceed the Vulkan kernel's 2^31 limit", rows, n));
  // Chunks of rows that fit a binding each; weight and bias are bound whole every time.
  for_each_part(dev.limits(), {x, y, mean, rstd}, 0, 1, [&](const auto& part, const auto&) {
    for (const TensorArg& t : {part[0], part[1]})
      if (!fits(dev.limits(), t)) row_too_long("layer_norm", t, 1, dev.limits());
    layer_norm_rows(dev, c, part[0], part[1], part[2], part[3]);
  });
}

// One part of rows of g, x, dx, mean and rstd, each within one binding: dx, then the part's
// column sums into dweight and dbias (added to what they hold when `accumulate`).
void layer_norm_backward_rows(VulkanDevice& dev, const LayerNormGradOperands& o, const TensorArg& g,
                              const TensorArg& x, const TensorArg& dx, const TensorArg& mean,
                              const TensorArg& rstd, bool accumulate) {
  const bool has_w = o.weight != nullptr;
  const TensorArg &dw = o.dweight, &db = o.dbias;
  abi::LayerNormBackwardParams p{};
  const Binding dxb = dev.bind(dx, Access::write), gb = dev.bind(g, Access::read),
                xb = dev.bind(x, Access::read), mb = dev.bind(mean, Access::read),
                rb = dev.bind(rstd, Access::read);
  Binding wb = xb;  // absent: x again (the shader never reads it)
  if (has_w) {
    wb = dev.bind(*o.weight, Access::read);
    p.w_off = wb.element_offset;
    p.ws = std::uint32_t(o.weight->strides[0]);
  }
  p.g_off = gb.element_offset;
  p.x_off = xb.element_offset;
  p.dx_off = dxb.element_offset;
  p.m_off = mb.element_offset;
  p.r_off = rb.element_offset;
  p.rows = std::uint32_t(x.sizes[0]);
  p.n = std::uint32_t(x.sizes[1]);
  p.gs0 = std::uint32_t(g.strides[0]);
  p.gs1 = std::uint32_t(g.strides[1]);
  p.xs0 = std::uint32_t(x.strides[0]);
  p.xs1 = std::uint32_t(x.strides[1]);
  p.dxs0 = std::uint32_t(dx.strides[0]);
  p.dxs1 = std::uint32_t(dx.strides[1]);
  p.ms = std::uint32_t(mean.strides[0]);
  p.rs = std::uint32_t(rstd.strides[0]);
  p.dws = std::uint32_t(dw.strides[0]);
  p.dbs = std::uint32_t(db.strides[0]);
  p.accumulate = accumulate ? 1u : 0u;
  const bool f64 = x.dtype == DType::f64;
  const std::uint32_t wg = workgroup_size(dev.limits());
  const std::uint32_t lanes = row_lanes(dev.limits(), std::uint64_t(p.n), wg);
  check_row_loops(dev, "layer_norm_backward", p.rows, p.n, wg, lanes, 2);
  abi::LayerNormBackwardSpec spec{
      .WG = wg, .DT = dtype_code(x.dtype), .HAS_W = has_w, .LANES = lanes, .MODE = 0};
  // One dispatch of spec's MODE with p as it stands.
  auto run = [&](std::vector<Binding> bindings, std::array<std::uint32_t, 3> groups) {
    dev.dispatch({"layer_norm_backward", spec.values(), std::move(bindings), &p, sizeof p, groups,
                  std::uint32_t(OpId::layer_norm_backward), f64});
  };
  // The slots a mode leaves unused hold the tensor it writes: the shader has stores to them,
  // which synchronization validation counts as writes whatever MODE rules out.
  run({dxb, dxb, dxb, gb, xb, mb, rb, wb},
      {groups_for(dev, std::uint64_t(p.rows), wg / lanes), 1, 1});
  // The columns: see the shader. On a GPU 32 columns a workgroup, in slices of rows; on a
  // CPU-type device, whose rows take many elements a lane for the same reason (Note [Row
  // kernel geometry]), one slice. Chunks of rows where the columns alone would leave the
  // device idle (as row_splits cuts rows), none with fewer than 32 rows a thread.
  const std::uint32_t cols =
      dev.limits().row_elements_per_lane > 1 ? wg : std::min<std::uint32_t>(32, wg);
  const std::uint32_t slices = wg / cols;
  const std::uint64_t tiles = (std::uint64_t(p.n) + cols - 1) / cols, threads = tiles * wg;
  const std::uint64_t stats_size = f64 ? 8 : 4;
  std::uint64_t chunks = 1;
  if (threads > 0 && threads < dev.limits().row_target_threads)  // none: N = 0
    chunks = std::max<std::uint64_t>(
        1, std::min({(dev.limits().row_target_threads + threads - 1) / threads,
                     std::uint64_t(p.rows) / (std::uint64_t(slices) * 32), std::uint64_t(256),
                     std::uint64_t(dev.limits().max_groups_x),
                     dev.limits().max_storage_range / (4 * std::uint64_t(p.n) * stats_size)}));
  // No chunk longer than a thread walks within the device's loop budget (Note [Loop budget]
  // in vk_kernels.hpp): its share of a chunk's rows, for each round of column tiles.
  const std::uint64_t column_groups_max = std::max<std::uint64_t>(groups_for(dev, tiles, 1), 1);
  const std::uint64_t tile_rounds = (tiles + column_groups_max - 1) / column_groups_max;
  const std::uint64_t walk =
      loop_trips_per_invocation(dev.limits(), ~0ull, tile_rounds, 8 + 2 * tile_rounds);
  if (walk != ~0ull)
    chunks = std::max<std::uint64_t>(chunks, (std::uint64_t(p.rows) + walk * slices - 1) /
                                                 std::max<std::uint64_t>(walk * slices, 1));
  if (walk == 0 || chunks > dev.limits().max_groups_x)
    past_loop_budget(dev, "layer_norm_backward", p.rows, p.n, tile_rounds * p.rows);
  p.chunk_rows = std::uint32_t((p.rows + chunks - 1) / chunks);
  p.chunks = std::uint32_t((p.rows + p.chunk_rows - 1) / p.chunk_rows);
  const Binding dwb = dev.bind(dw, Access::write), dbb = dev.bind(db, Access::write);
  p.dw_off = dwb.element_offset;
  p.db_off = dbb.element_offset;
  spec.LANES = 1;
  spec.MODE = 1;
  spec.COLS = cols;
  const std::uint32_t column_groups = groups_for(dev, tiles, 1);
  if (p.chunks == 1) {
    run({dwb, dwb, dbb, gb, xb, mb, rb, xb}, {column_groups, 1, 1});
    return;
  }
  // The chunks' sums through a scratch buffer (the device keeps its memory until the GPU is
  // done with it), then combined.
  const std::unique_ptr<Buffer> scratch =
      dev.allocate(std::size_t(p.chunks) * 4 * p.n * stats_size);
  const TensorArg sums{
      scratch.get(), 0, {std::int64_t(p.chunks) * 4 * p.n}, {1}, f64 ? DType::f64 : DType::f32};
  const Binding sw = dev.bind(sums, Access::write);
  p.s_off = sw.element_offset;
  run({sw, sw, sw, gb, xb, mb, rb, xb}, {column_groups, p.chunks, 1});
  const Binding sr = dev.bind(sums, Access::read);
  p.s_off = sr.element_offset;
  spec.MODE = 2;
  run({dwb, dwb, dbb, sr, sr, sr, sr, sr}, {groups_for(dev, std::uint64_t(p.n), wg), 1, 1});
}

// The operands: ferry/kit/layer_norm_args.hpp.
void layer_norm_backward_kernel(DeviceImpl& d, const OpCall& c) {
  VulkanDevice& dev = vulkan_device(d);
  const LayerNormGradOperands o = layer_norm_backward_args(c, "vulkan");
  dev.require_op(OpId::layer_norm_backward, o.x.dtype);
  const std::int64_t rows = o.rows, n = o.n;
  if (std::uint64_t(rows) >= kMaxCount || std::uint64_t(n) >= kMaxCount)
    throw UnsupportedError(fmt::format(
        "layer_norm_backward: {} rows of {} elements exceed the Vulkan kernel's 2^31 limit", rows,
        n));
  if (rows == 0)  // the formula does not call it for an empty input (kernel-contract.md)
    throw ShapeError("layer_norm_backward: the vulkan kernel takes at least one row");
  bool first = true;
  for_each_part(
      dev.limits(), {o.g, o.x, o.dx, o.mean, o.rstd}, 0, 1, [&](const auto& part, const auto&) {
        for (const TensorArg& t : {part[0], part[1], part[2]})
          if (!fits(dev.limits(), t)) row_too_long("layer_norm_backward", t, 1, dev.limits());
        layer_norm_backward_rows(dev, o, part[0], part[1], part[2], part[3], part[4], !first);
        first = false;
      });
}

}  // namespace

void add_nn_kernels(KernelTable& table) {
  table.emplace_back(OpId::softmax,
                     [](DeviceImpl& d, const OpCall& c) { softmax_kernel(d, c, false); });
  table.emplace_back(OpId::log_softmax,
                     [](DeviceImpl& d, const OpCall& c) { softmax_kernel(d, c, true); });
  table.emplace_back(OpId::layer_norm, layer_norm_kernel);
  table.emplace_back(OpId::layer_norm_backward, layer_norm_backward_kernel);
}

}  // namespace ferry::vulkan
