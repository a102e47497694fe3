// runtime/vulkan/vk_kernels_reduce.cpp — sum, max, min and argmax through
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
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"

namespace ferry::vulkan {
namespace {

enum ReduceOp : std::uint32_t { kSum = 0, kMax = 1, kMin = 2, kArgmax = 3 };
enum Mode : std::uint32_t { kDirect = 0, kPartial = 1, kFinal = 2 };

constexpr int kMaxKeptDims = 4;  // the shader's limits
constexpr int kMaxReducedDims = 8;
constexpr std::uint64_t kTargetThreads = 1 << 17;  // enough to fill a large GPU
constexpr std::uint64_t kMinPerThread = 64;        // elements per thread that make a split pay
constexpr std::uint64_t kMaxSplits = 1024;
constexpr std::uint32_t kRecordWords = 4;  // one partial result in the scratch buffer
constexpr std::uint64_t kMaxCount = std::uint64_t(1) << 31;

// Must match the push constants of shaders/reduce.comp.
struct ReduceParams {
  std::uint32_t ksize[4], kstride[4];
  std::uint32_t rsize[8], rstride[8];
  std::uint32_t in_off, out_off, n_out, n_red, splits, chunk;
};
static_assert(sizeof(ReduceParams) <= kMaxPushBytes);

// Threads per row, and whether the thread index runs along the rows.
struct Layout {
  std::uint32_t lanes = 1;
  bool row_fast = false;
};

// `inner_rows`: outputs along the innermost kept dim, when that dim is
// contiguous in memory while the rows are not (else 0).
Layout choose_layout(std::uint32_t wg, std::uint64_t n_red, std::uint64_t inner_rows) {
  if (inner_rows >= 8) {
    const std::uint32_t rows = pow2_at_least(inner_rows, wg);
    return {std::min(wg / rows, pow2_at_least(n_red, wg)), true};
  }
  return {pow2_at_least(n_red, wg), false};
}

// A reduction the shader does in one go: at most 4 kept and 8 reduced dims.
struct Geometry {
  std::vector<std::int64_t> ksize, kstride, rsize, rstride;
  std::uint64_t n_out = 1, n_red = 1;
};

struct Kind {
  ReduceOp op;
  std::uint32_t in_dt, out_dt;
};

void dispatch(VulkanDevice& dev, const Kind& k, Mode mode, std::uint32_t kdim, std::uint32_t rdim,
              Layout l, Binding out, Binding in, const ReduceParams& p, std::uint64_t n_rows) {
  const std::uint32_t wg = workgroup_size(dev.limits());
  const std::uint64_t blocks = (n_rows + wg / l.lanes - 1) / (wg / l.lanes);
  const auto groups = std::uint32_t(std::min<std::uint64_t>(blocks, dev.limits().max_groups_x));
  dev.dispatch({"reduce",
                {wg, k.op, k.in_dt, k.out_dt, mode, kdim, rdim, l.lanes, l.row_fast ? 1u : 0u},
                {out, in},
                &p,
                sizeof p,
                {groups, 1, 1}});
}

void reduce(VulkanDevice& dev, const Kind& k, const TensorArg& in, const TensorArg& out,
            const Geometry& g) {
  ReduceParams p{};
  const auto kdim = std::uint32_t(g.ksize.size()), rdim = std::uint32_t(g.rsize.size());
  for (std::uint32_t d = 0; d < kdim; ++d) {
    p.ksize[d] = std::uint32_t(g.ksize[d]);
    p.kstride[d] = std::uint32_t(g.kstride[d]);
  }
  for (std::uint32_t d = 0; d < rdim; ++d) {
    p.rsize[d] = std::uint32_t(g.rsize[d]);
    p.rstride[d] = std::uint32_t(g.rstride[d]);
  }
  // The exact view the shader reads, so that the binding spans only that.
  TensorArg view{in.buffer, in.offset, g.ksize, g.kstride, in.dtype};
  view.sizes.insert(view.sizes.end(), g.rsize.begin(), g.rsize.end());
  view.strides.insert(view.strides.end(), g.rstride.begin(), g.rstride.end());
  const Binding x = dev.bind(view, Access::read);
  const Binding y = dev.bind(out, Access::write);
  p.in_off = x.element_offset;
  p.n_out = std::uint32_t(g.n_out);
  p.n_red = std::uint32_t(g.n_red);
  p.splits = 1;
  p.chunk = p.n_red;

  const std::uint32_t wg = workgroup_size(dev.limits());
  const bool columns = kdim > 0 && g.kstride.back() == 1 && g.rstride.back() != 1;
  const Layout l = choose_layout(wg, g.n_red, columns ? std::uint64_t(g.ksize.back()) : 0);
  std::uint64_t splits = 1;
  if (g.n_out * l.lanes < kTargetThreads && g.n_red >= 2 * l.lanes * kMinPerThread)
    splits = std::min({(kTargetThreads + g.n_out * l.lanes - 1) / (g.n_out * l.lanes),
                       g.n_red / (l.lanes * kMinPerThread), kMaxSplits});
  if (splits <= 1) {
    p.out_off = y.element_offset;
    dispatch(dev, k, kDirect, kdim, rdim, l, y, x, p, g.n_out);
    return;
  }

  // Pass 1: records[piece * n_out + o] = the piece's partial result for output o.
  p.chunk = std::uint32_t((g.n_red + splits - 1) / splits);
  p.splits = std::uint32_t((g.n_red + p.chunk - 1) / p.chunk);
  const std::uint64_t words = std::uint64_t(p.splits) * g.n_out * kRecordWords;
  std::unique_ptr<Buffer> scratch = dev.allocate(words * 4);
  TensorArg records{scratch.get(), 0, {std::int64_t(words)}, {1}, DType::i32};
  const Binding rw = dev.bind(records, Access::write);
  p.out_off = rw.element_offset;
  dispatch(dev, k, kPartial, kdim, rdim, l, rw, x, p, g.n_out * p.splits);

  // Pass 2: output o combines records o, o + n_out, ...: a column reduction.
  ReduceParams q{};
  q.in_off = rw.element_offset;
  q.out_off = y.element_offset;
  q.n_out = p.n_out;
  q.n_red = p.splits;
  q.splits = 1;
  q.chunk = q.n_red;
  const Binding rr = dev.bind(records, Access::read);
  const Layout lf = choose_layout(wg, q.n_red, g.n_out > 1 ? g.n_out : 0);
  dispatch(dev, k, kFinal, 0, 1, lf, y, rr, q, g.n_out);
  // `scratch` may go now: the device keeps its memory until the GPU is done with it.
}

void run(DeviceImpl& d, const OpCall& c, ReduceOp op) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& in = c.inputs.at(0);
  const TensorArg& out = c.outputs.at(0);
  const int rnd = int(c.attrs.i("reduce_ndim"));
  const int knd = in.ndim() - rnd;
  if (rnd < 0 || knd < 0)
    throw ShapeError(
        fmt::format("{}: reduce_ndim {} is out of range for a {}-d input", c.op, rnd, in.ndim()));
  dev.require(in.dtype, c.op);
  // Integer sums are i64; argmax writes its i64 as two 32-bit words, which
  // every device can, so only the integer sums need 64-bit integer support.
  if (op != kArgmax) dev.require(out.dtype, c.op);
  if (out.numel() == 0) return;

  std::span<const std::int64_t> sizes(in.sizes), strides(in.strides);
  Coalesced kept =
      coalesce(sizes.first(knd), {std::vector(strides.begin(), strides.begin() + knd)});
  Coalesced red = coalesce(sizes.subspan(knd), {std::vector(strides.begin() + knd, strides.end())});
  if (red.sizes.size() > std::size_t(kMaxReducedDims))
    throw UnsupportedError(fmt::format(
        "{}: the reduced dims of this view ({} after merging) exceed the Vulkan kernel's {}; "
        "make the input contiguous first",
        c.op, red.sizes.size(), kMaxReducedDims));
  Geometry g;
  g.rsize = red.sizes;
  g.rstride = red.strides[0];
  for (std::int64_t s : g.rsize) g.n_red *= std::uint64_t(s);
  if (knd == 0) kept = {{}, {{}}};  // a full reduction: no kept dims at all

  // The shader indexes the innermost 4 kept dims; the host loops over the others.
  const std::size_t nk = kept.sizes.size();
  const std::size_t outer = nk > kMaxKeptDims ? nk - kMaxKeptDims : 0;
  g.ksize.assign(kept.sizes.begin() + std::ptrdiff_t(outer), kept.sizes.end());
  g.kstride.assign(kept.strides[0].begin() + std::ptrdiff_t(outer), kept.strides[0].end());
  for (std::int64_t s : g.ksize) g.n_out *= std::uint64_t(s);
  // The shader counts outputs and elements in 32 bits (an expanded input can
  // be far larger than the memory it spans).
  if (g.n_out >= kMaxCount || g.n_red >= kMaxCount)
    throw UnsupportedError(
        fmt::format("{}: {} outputs of {} elements each exceed the Vulkan kernel's 2^31 limit",
                    c.op, g.n_out, g.n_red));
  const Kind k{op, dtype_code(in.dtype), dtype_code(out.dtype)};
  std::vector<std::int64_t> idx(outer, 0);
  for (std::int64_t o0 = 0;; o0 += std::int64_t(g.n_out)) {
    TensorArg x = in, y = out;
    for (std::size_t d = 0; d < outer; ++d) x.offset += idx[d] * kept.strides[0][d];
    y.offset += o0;
    y.sizes = {std::int64_t(g.n_out)};
    y.strides = {1};
    reduce(dev, k, x, y, g);
    std::size_t d = outer;
    while (d > 0 && ++idx[d - 1] == kept.sizes[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
}

}  // namespace

void add_reduce_kernels(KernelTable& table) {
  table.emplace_back("sum", [](DeviceImpl& d, const OpCall& c) { run(d, c, kSum); });
  table.emplace_back("max", [](DeviceImpl& d, const OpCall& c) { run(d, c, kMax); });
  table.emplace_back("min", [](DeviceImpl& d, const OpCall& c) { run(d, c, kMin); });
  table.emplace_back("argmax", [](DeviceImpl& d, const OpCall& c) { run(d, c, kArgmax); });
}

}  // namespace ferry::vulkan
