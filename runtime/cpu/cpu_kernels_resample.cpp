// runtime/cpu/cpu_kernels_resample.cpp — interpolate's 2-D kernels on the CPU
// (docs/kernel-contract.md): a separable resampling by the per-dim tables the core computed
// (runtime/ops_resample.cpp: nearest, bilinear and bicubic alike), forward and backward.
//
// Note [Resampling on the CPU]
// Composed, interpolate resamples one dim at a time: per dim an index_select of every tap, a
// multiply by the weights and a sum over the taps, each a pass over a tensor as large as the
// output times the taps; its backward is as many passes again, with index_add. The kernel
// keeps the composition's separable order but a row at a time, in cache: per output row, the
// rows' taps summed into a row of W (contiguous axpys the vector unit takes), then each
// output's column taps gathered from that row: y[oh, ow] = Σ_b ww[b, ow] Σ_a wh[a, oh]
// x[ih[a, oh], iw[b, ow]] in the compute type. The backward runs it in reverse: an output
// row's g · ww added into a row of W at the column taps, then that row times each row tap's
// weight into dx (per plane, in output order: deterministic; into dx itself in f32 and f64);
// the first step gathers through the column table turned around (Inverse), as a scatter's
// adds into one row would each wait on the one before.
// Taps each output reads one at a time cost taps² a position; this costs taps · (1 + W / OW).
// Planes run in parallel (output rows forward). A channels-last call (the attribute
// channels_last, DeviceCapabilities::channels_last_cnn) runs alike on rows of W · C: the
// row taps' axpys span a pixel row's channels, and each column tap adds a pixel's C channels;
// its backward runs an image a task, so an image's outputs still add in order.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_cnn.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/resample_args.hpp"

namespace ferry::cpu {
namespace {

// One dim's table: output o reads `index[t * out + o]` with weight `weight[t * out + o]`.
template <typename C> struct Table {
  std::int64_t taps = 0, out = 0;
  std::vector<std::int64_t> index;
  std::vector<C> weight;
};

// The tables of inputs 1-4 (resample_args checked their dtypes and shapes), each index checked
// against the plane `in` (H, W).
template <typename C>
std::pair<Table<C>, Table<C>> read_tables(const OpCall& call, const ResampleArgs& args) {
  const auto table = [&](std::size_t at, std::int64_t in, std::int64_t out) {
    const TensorArg &ix = call.inputs.at(at), &wt = call.inputs.at(at + 1);
    Table<C> t{ix.sizes[0], out, {}, {}};
    const std::int64_t* ip = ix.data<std::int64_t>();
    t.index.assign(ip, ip + ix.numel());
    t.weight.assign(wt.data<C>(), wt.data<C>() + wt.numel());
    for (std::int64_t i : t.index)
      if (i < 0 || i >= in)
        throw ShapeError(fmt::format("{}: table index {} is outside the input's {} positions",
                                     call.name(), i, in));
    return t;
  };
  return {table(1, args.h, args.oh), table(3, args.w, args.ow)};
}

// A table turned around: input position i's outputs out[e] and weights weight[e], e in
// [first[i], first[i + 1]), in the table's order (taps, then outputs, rising).
template <typename C> struct Inverse {
  std::vector<std::int64_t> first, out;
  std::vector<C> weight;
};
template <typename C> Inverse<C> inverse(const Table<C>& t, std::int64_t in) {
  Inverse<C> r;
  r.first.assign(std::size_t(in + 1), 0);
  for (std::int64_t i : t.index) ++r.first[std::size_t(i + 1)];
  for (std::int64_t i = 0; i < in; ++i) r.first[std::size_t(i + 1)] += r.first[std::size_t(i)];
  std::vector<std::int64_t> next(r.first.begin(), r.first.end() - 1);
  r.out.resize(t.index.size());
  r.weight.resize(t.index.size());
  for (std::size_t e = 0; e < t.index.size(); ++e) {
    const std::int64_t at = next[std::size_t(t.index[e])]++;
    r.out[std::size_t(at)] = std::int64_t(e) % t.out;
    r.weight[std::size_t(at)] = t.weight[e];
  }
  return r;
}

// The operands (resample_args) of a call: a (x, or dx) [N, C, H, W] and b (y, or g)
// [N, C, OH, OW], both dense in the call's layout (contiguous, or channels-last: `cl`).
struct Planes {
  ResampleArgs args;
  bool cl;
};
Planes check_planes(const OpCall& call, const TensorArg& a, const TensorArg& b) {
  const ResampleArgs args = resample_args(call, a, b);
  return {args, check_activations(call, {&a, &b}) != MemoryFormat::contiguous};
}

// x [N, C, H, W] -> y [N, C, OH, OW], an output row at a time: the rows' taps first, into a row
// of W (row axpys, in the vector unit), then each output's column taps gathered from it.
template <typename T> void resample_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &x = call.inputs.at(0), &y = call.outputs.at(0);
  const auto [args, cl] = check_planes(call, x, y);
  const std::int64_t H = args.h, W = args.w, OH = args.oh, OW = args.ow;
  const auto [th, tw] = read_tables<C>(call, args);
  // A task's image (plane, or channels-last image) and its k channels a position (1, or C).
  const std::int64_t k = cl ? x.sizes[1] : 1, images = cl ? x.sizes[0] : x.sizes[0] * x.sizes[1];
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_range(images * OH, grain_for(k * (th.taps * W + tw.taps * OW)),
                 [&](std::int64_t r0, std::int64_t r1) {
                   std::vector<C> row(static_cast<std::size_t>(W * k)),
                       out(static_cast<std::size_t>(OW * k));
                   for (std::int64_t task = r0; task < r1; ++task) {
                     const std::int64_t image = task / OH, oh = task % OH;
                     std::fill(row.begin(), row.end(), C(0));
                     for (std::int64_t a = 0; a < th.taps; ++a) {
                       const C wa = th.weight[std::size_t(a * OH + oh)];
                       const T* src = xp + (image * H + th.index[std::size_t(a * OH + oh)]) * W * k;
                       C* r = row.data();
#pragma omp simd
                       for (std::int64_t i = 0; i < W * k; ++i) r[i] += wa * C(src[i]);
                     }
                     std::fill(out.begin(), out.end(), C(0));
                     for (std::int64_t b = 0; b < tw.taps; ++b) {
                       const std::int64_t* iw = tw.index.data() + b * OW;
                       const C* wb = tw.weight.data() + b * OW;
                       const C* r = row.data();
                       C* o = out.data();
                       if (k == 1) {
#pragma omp simd
                         for (std::int64_t ow = 0; ow < OW; ++ow) o[ow] += wb[ow] * r[iw[ow]];
                       } else {
                         for (std::int64_t ow = 0; ow < OW; ++ow) {
                           const C* rc = r + iw[ow] * k;
                           C* oc = o + ow * k;
#pragma omp simd
                           for (std::int64_t c = 0; c < k; ++c) oc[c] += wb[ow] * rc[c];
                         }
                       }
                     }
                     T* dst = yp + task * OW * k;
                     for (std::int64_t i = 0; i < OW * k; ++i) dst[i] = T(out[std::size_t(i)]);
                   }
                 });
}

// g [N, C, OH, OW] -> dx [N, C, H, W], an output row at a time: a row of W, each column the sum
// of g · ww over the outputs that read it (the column table turned around, so it is a gather),
// then that row, times each row tap's weight, into dx's rows (row axpys); per plane in output
// order, so the sums do not depend on the threads.
template <typename T> void resample_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &g = call.inputs.at(0), &dx = call.outputs.at(0);
  const auto [args, cl] = check_planes(call, dx, g);
  const std::int64_t H = args.h, W = args.w, OH = args.oh, OW = args.ow;
  const auto [th, tw] = read_tables<C>(call, args);
  // A task's image (plane, or channels-last image: its rows of W · C) and its k channels a
  // position (1, or C). An image's outputs add into its dx in order, so one task an image.
  const std::int64_t k = cl ? dx.sizes[1] : 1,
                     images = cl ? dx.sizes[0] : dx.sizes[0] * dx.sizes[1];
  const std::int64_t area = H * W * k;
  const Inverse<C> cols = inverse(tw, W);
  const T* gp = g.data<T>();
  T* dp = dx.data<T>();
  parallel_range(images, grain_for(area + OH * k * (th.taps * W + tw.taps * OW)),
                 [&](std::int64_t i0, std::int64_t i1) {
                   // f32 and f64 add into dx itself; the 16-bit floats into an image of C.
                   std::vector<C> buffer(std::is_same_v<T, C> ? 0 : std::size_t(area));
                   std::vector<C> row(static_cast<std::size_t>(W * k));
                   for (std::int64_t image = i0; image < i1; ++image) {
                     C* acc;
                     if constexpr (std::is_same_v<T, C>)
                       acc = dp + image * area;
                     else
                       acc = buffer.data();
                     std::fill_n(acc, area, C(0));
                     for (std::int64_t oh = 0; oh < OH; ++oh) {
                       const T* src = gp + (image * OH + oh) * OW * k;
                       // Column iw's outputs gathered (no store waits on the last one's).
                       if (k == 1) {
                         for (std::int64_t iw = 0; iw < W; ++iw) {
                           C v = 0;
                           for (std::int64_t e = cols.first[std::size_t(iw)];
                                e < cols.first[std::size_t(iw) + 1]; ++e)
                             v += cols.weight[std::size_t(e)] * C(src[cols.out[std::size_t(e)]]);
                           row[std::size_t(iw)] = v;
                         }
                       } else {
                         for (std::int64_t iw = 0; iw < W; ++iw) {
                           C* rc = row.data() + iw * k;
                           std::fill_n(rc, k, C(0));
                           for (std::int64_t e = cols.first[std::size_t(iw)];
                                e < cols.first[std::size_t(iw) + 1]; ++e) {
                             const C w = cols.weight[std::size_t(e)];
                             const T* gc = src + cols.out[std::size_t(e)] * k;
#pragma omp simd
                             for (std::int64_t c = 0; c < k; ++c) rc[c] += w * C(gc[c]);
                           }
                         }
                       }
                       for (std::int64_t a = 0; a < th.taps; ++a) {
                         const C wa = th.weight[std::size_t(a * OH + oh)];
                         C* d = acc + th.index[std::size_t(a * OH + oh)] * W * k;
                         const C* r = row.data();
#pragma omp simd
                         for (std::int64_t i = 0; i < W * k; ++i) d[i] += wa * r[i];
                       }
                     }
                     if constexpr (!std::is_same_v<T, C>)
                       for (std::int64_t i = 0; i < area; ++i) dp[image * area + i] = T(acc[i]);
                   }
                 });
}

}  // namespace

void add_resample_kernels(KernelTable& table) {
  table.emplace_back(OpId::interpolate, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "interpolate", resample_kernel<scalar_t>(c));
  });
  table.emplace_back(OpId::interpolate_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "interpolate_backward",
                            resample_backward_kernel<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
