// runtime/cpu/cpu_kernels_pool.cpp — the CPU's pooling kernels (docs/kernel-contract.md):
// max_pool1d/2d, avg_pool1d/2d and their backward rows, contiguous and channels-last (Note
// [Fused CNN layers on the CPU] in cpu_kernels_cnn.cpp).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_cnn.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/pool_geometry.hpp"

namespace ferry::cpu {
namespace {

// A range of positions along one dim, [first, end).
struct Covered {
  std::int64_t first, end;
};
// The input rows (or columns) window o covers along dim d, within the input
// (ferry/kit/pool_windows.hpp).
Covered covered(const PoolDim& d, std::int64_t o) {
  return {pool_window_first(d, o), pool_window_end(d, o)};
}
// The windows that cover input position i along dim d.
Covered covering(const PoolDim& d, std::int64_t i) {
  return {pool_covering_first(d, i), pool_covering_end(d, i)};
}

// The windows of each tap column j that lie inside the input along the width: ow in
// [lo[j], hi[j]) (an output row's windows then take tap (i, j) as one strided run). Regular
// pools only: an adaptive pool's windows differ in width.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> tap_columns(const Pool2d& p) {
  std::vector<std::int64_t> lo(std::size_t(p.kw)), hi(std::size_t(p.kw));
  for (std::int64_t j = 0; j < p.kw; ++j) {
    const std::int64_t off = j * p.dw - p.pw;  // iw = ow * sw + off
    lo[std::size_t(j)] = std::clamp<std::int64_t>(off >= 0 ? 0 : (-off + p.sw - 1) / p.sw, 0, p.ow);
    hi[std::size_t(j)] =
        std::clamp<std::int64_t>(p.w - off <= 0 ? 0 : (p.w - off - 1) / p.sw + 1, 0, p.ow);
  }
  return {std::move(lo), std::move(hi)};
}

// n running maxima and their positions (max_pool_planes: an output row's windows;
// max_pool_pixels: a pixel's channels). fold() takes one tap of windows [k0, k1): window k sees
// src[k * stride], at position at + k * step, in one vector compare-and-select; the first of
// equal values stays and a NaN takes over (v != v), as in PyTorch's kernel. I, the position
// within a plane: 32 bits keep it as wide as a float lane.
template <typename T, typename I> struct RunningMax {
  using C = compute_t<T>;
  std::vector<C> best;
  std::vector<I> arg;
  explicit RunningMax(std::int64_t n)
      : best(static_cast<std::size_t>(n)), arg(static_cast<std::size_t>(n)) {}
  void reset() {
    std::fill(best.begin(), best.end(), -std::numeric_limits<C>::infinity());
    std::fill(arg.begin(), arg.end(), I(-1));
  }
  void fold(std::int64_t k0, std::int64_t k1, const T* src, std::int64_t stride, std::int64_t at,
            std::int64_t step) {
    C* const bp = best.data();
    I* const ap = arg.data();
#pragma omp simd
    for (std::int64_t k = k0; k < k1; ++k) {
      const C v = C(src[k * stride]);
      const C cur = bp[k];
      const I a = ap[k];
      const bool take = (a < 0) | (v > cur) | (v != v);  // v != v: NaN
      bp[k] = take ? v : cur;
      ap[k] = take ? I(at + k * step) : a;
    }
  }
  void store(T* values, std::int64_t* indices) const {
    for (std::size_t k = 0; k < best.size(); ++k) values[k] = T(best[k]), indices[k] = arg[k];
  }
};

// The max pool of `planes` planes, one output row at a time and tap by tap across the row,
// so the inner loop runs across the row's windows (each window still sees its taps in (i, j)
// order).
template <typename T, typename I>
void max_pool_planes(const Pool2d p, const std::vector<std::int64_t>& lo,
                     const std::vector<std::int64_t>& hi, std::int64_t planes, const T* xp, T* yp,
                     std::int64_t* ip) {
  const std::int64_t in_area = p.h * p.w, out_area = p.oh * p.ow;
  const std::int64_t work = out_area * p.kh * p.kw;
  parallel_range(planes, grain_for(work), [&](std::int64_t b, std::int64_t e) {
    RunningMax<T, I> m(p.ow);
    for (std::int64_t plane = b; plane < e; ++plane)
      for (std::int64_t oh = 0; oh < p.oh; ++oh) {
        m.reset();
        for (std::int64_t i = 0; i < p.kh; ++i) {
          const std::int64_t ih = oh * p.sh - p.ph + i * p.dh;
          if (ih < 0 || ih >= p.h) continue;
          for (std::int64_t j = 0; j < p.kw; ++j) {
            const std::int64_t off = ih * p.w + j * p.dw - p.pw;  // + ow * sw
            m.fold(lo[std::size_t(j)], hi[std::size_t(j)], xp + plane * in_area + off, p.sw, off,
                   p.sw);
          }
        }
        const std::int64_t out = plane * out_area + oh * p.ow;
        m.store(yp + out, ip + out);
      }
  });
}

// An adaptive max pool of contiguous planes, window by window: its windows differ in width, so
// a row's windows share no tap column to run across (max_pool_planes' walk). RunningMax's
// choice in (i, j) order (the first of equal values, the last NaN taking over) comes from each
// row's maximum and NaN count, vector reductions, and one scan of the row that holds it. (x as
// channels-last images of one channel through max_pool_pixels, the same memory, ran at 0.71 of
// libtorch over AlexNet's 112 x 112 to 6 x 6: a fold call per tap.)
template <typename T>
void max_pool_windows(const Pool2d p, std::int64_t planes, const T* xp, T* yp, std::int64_t* ip) {
  using C = compute_t<T>;
  const std::int64_t in_area = p.h * p.w, out_area = p.oh * p.ow;
  parallel_range(planes, grain_for(in_area), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t plane = b; plane < e; ++plane)
      for (std::int64_t oh = 0; oh < p.oh; ++oh) {
        const Covered rows = covered(p.row(), oh);
        for (std::int64_t ow = 0; ow < p.ow; ++ow) {
          const Covered cols = covered(p.col(), ow);
          const T* x = xp + plane * in_area;
          // The row of the first maximum (a later row takes over only with a greater one) and
          // of the last NaN (counted: a bool's || reduction kept GCC from vectorizing).
          C best = -std::numeric_limits<C>::infinity();
          std::int64_t best_row = -1, nan_row = -1;
          for (std::int64_t ih = rows.first; ih < rows.end; ++ih) {
            const T* row = x + ih * p.w;
            C m = -std::numeric_limits<C>::infinity();
            int nans = 0;
#pragma omp simd reduction(max : m) reduction(+ : nans)
            for (std::int64_t iw = cols.first; iw < cols.end; ++iw) {
              const C v = C(row[iw]);
              m = v > m ? v : m;
              nans += v != v;
            }
            if (nans != 0) nan_row = ih;
            if (best_row < 0 || m > best) best = m, best_row = ih;
          }
          std::int64_t arg = -1;
          if (nan_row >= 0) {
            for (std::int64_t iw = cols.first; iw < cols.end; ++iw)
              if (const C v = C(x[nan_row * p.w + iw]); v != v) arg = nan_row * p.w + iw;
          } else {
            for (std::int64_t iw = cols.first; iw < cols.end && arg < 0; ++iw)
              if (C(x[best_row * p.w + iw]) == best) arg = best_row * p.w + iw;
          }
          best = C(x[arg]);  // a NaN, or the first of equal values (0 and -0)
          const std::int64_t out = plane * out_area + oh * p.ow + ow;
          yp[out] = T(best);
          ip[out] = arg;
        }
      }
  });
}

// The max pool of a channels-last x ([N, H, W, C] in memory) into channels-last values and
// indices, an output row at a time: per output pixel, the taps in (i, j) order, each across
// the pixel's channels.
template <typename T, typename I> void max_pool_pixels(const Pool2d p, std::int64_t N,
                                                       std::int64_t channels, const T* xp, T* yp,
                                                       std::int64_t* ip) {
  parallel_range(N * p.oh, grain_for(p.ow * p.kh * p.kw * channels),
                 [&](std::int64_t b, std::int64_t e) {
                   RunningMax<T, I> m(channels);
                   for (std::int64_t row = b; row < e; ++row) {
                     const std::int64_t n = row / p.oh, oh = row % p.oh;
                     const std::int64_t h0 = pool_tap_start(p.row(), oh),
                                        kh = pool_tap_count(p.row(), oh);
                     for (std::int64_t ow = 0; ow < p.ow; ++ow) {
                       m.reset();
                       const std::int64_t w0 = pool_tap_start(p.col(), ow),
                                          kw = pool_tap_count(p.col(), ow);
                       for (std::int64_t i = 0; i < kh; ++i) {
                         const std::int64_t ih = h0 + i * p.dh;
                         if (ih < 0 || ih >= p.h) continue;
                         for (std::int64_t j = 0; j < kw; ++j) {
                           const std::int64_t iw = w0 + j * p.dw;
                           if (iw < 0 || iw >= p.w) continue;
                           const T* px = xp + ((n * p.h + ih) * p.w + iw) * channels;
                           m.fold(0, channels, px, 1, ih * p.w + iw, 0);
                         }
                       }
                       const std::int64_t out = (row * p.ow + ow) * channels;
                       m.store(yp + out, ip + out);
                     }
                   }
                 });
}

// x [N, C, *in] contiguous, or channels-last (2-D) -> values [N, C, *out] and indices (i64,
// flat in the plane) in x's layout.
template <typename T> void max_pool_kernel(const OpCall& call) {
  const TensorArg &x = call.inputs.at(0), &y = call.outputs.at(0), &ix = call.outputs.at(1);
  check_pool_indices(call, ix, y);
  const MemoryFormat format = check_activations(call, {&x, &y, &ix});
  const Pool2d p = pool2d_geometry(call, x, y);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  std::int64_t* ip = ix.data<std::int64_t>();
  const bool wide = p.h * p.w > std::numeric_limits<std::int32_t>::max();
  if (format != MemoryFormat::contiguous) {
    const std::int64_t N = x.sizes.at(0), channels = x.sizes.at(1);
    return wide ? max_pool_pixels<T, std::int64_t>(p, N, channels, xp, yp, ip)
                : max_pool_pixels<T, std::int32_t>(p, N, channels, xp, yp, ip);
  }
  const std::int64_t planes = x.sizes.at(0) * x.sizes.at(1);
  if (p.adaptive) return max_pool_windows<T>(p, planes, xp, yp, ip);
  const auto [lo, hi] = tap_columns(p);
  if (wide)
    max_pool_planes<T, std::int64_t>(p, lo, hi, planes, xp, yp, ip);
  else
    max_pool_planes<T, std::int32_t>(p, lo, hi, planes, xp, yp, ip);
}

// g, indices [N, C, *out] -> dx [N, C, *in], all contiguous or all channels-last: each
// window's gradient added at its maximum, within its image and channel, in order.
template <typename T> void max_pool_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &g = call.inputs.at(0), &ix = call.inputs.at(1), &dx = call.outputs.at(0);
  check_pool_indices(call, ix, g);
  const bool cl = check_activations(call, {&g, &ix, &dx}) != MemoryFormat::contiguous;
  const std::int64_t N = dx.sizes.at(0), channels = dx.sizes.at(1);
  const std::int64_t planes = N * channels;
  const std::int64_t in_area = planes == 0 ? 0 : dx.numel() / planes;
  const std::int64_t out_area = planes == 0 ? 0 : g.numel() / planes;
  // A task: one plane (width 1), or, channels-last, one image's channels: each output pixel's
  // run of them read, and each input pixel's written, whole (blocks of 16 of 64 channels ran
  // at a third of the speed on ResNet-18's first pool). Where there are fewer images than
  // threads, the channels are split in as many blocks as make a task per thread; the sums do
  // not depend on it (each element's terms are added in output order either way).
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t width =
      !cl || channels == 0 ? 1 : (channels + (threads + N - 1) / N - 1) / ((threads + N - 1) / N);
  const std::int64_t blocks = (channels + width - 1) / width;
  // Element (pixel, channel c) of image n: its offset in a tensor of `area` pixels per plane.
  const auto at = [&](std::int64_t n, std::int64_t c, std::int64_t pixel, std::int64_t area) {
    return cl ? (n * area + pixel) * channels + c : (n * channels + c) * area + pixel;
  };
  const T* gp = g.data<T>();
  const std::int64_t* ip = ix.data<std::int64_t>();
  T* dp = dx.data<T>();
  std::atomic<bool> failed{false};
  std::atomic<std::int64_t> bad{0};
  // f32 and f64 add into dx itself (through a plane's copy, written back element by element,
  // ResNet-18's first pool took 69.5 to 75.0 ms forward and backward, against 50.4 to 58.8 ms,
  // three runs each in a timing program); the 16-bit floats into a copy in the compute type.
  C* direct = nullptr;
  if constexpr (std::is_same_v<T, C>) direct = dp;
  const std::int64_t work = (in_area + out_area) * width;
  parallel_range(N * blocks, grain_for(work), [&](std::int64_t b, std::int64_t e) {
    std::vector<C> acc(direct ? 0 : static_cast<std::size_t>(in_area * width));
    for (std::int64_t task = b; task < e; ++task) {
      const std::int64_t n = task / blocks, c0 = task % blocks * width;
      const std::int64_t span = std::min(width, channels - c0);
      // Input pixel i's channel c0 + k adds up at base[i * pitch + k].
      C* const base = direct ? direct + at(n, c0, 0, in_area) : acc.data();
      const std::int64_t pitch = direct ? (cl ? channels : 1) : width;
      if (pitch == span)  // one run
        std::fill_n(base, in_area * span, C(0));
      else
        for (std::int64_t i = 0; i < in_area; ++i) std::fill_n(base + i * pitch, span, C(0));
      for (std::int64_t o = 0; o < out_area; ++o) {
        const std::int64_t from = at(n, c0, o, out_area);
        for (std::int64_t k = 0; k < span; ++k) {
          const std::int64_t to = ip[from + k];
          if (to < 0 || to >= in_area) {
            if (!failed.exchange(true)) bad = to;
            continue;  // never write outside the plane
          }
          base[to * pitch + k] += C(gp[from + k]);
        }
      }
      if (!direct)
        for (std::int64_t i = 0; i < in_area; ++i) {
          T* out = dp + at(n, c0, i, in_area);
          for (std::int64_t k = 0; k < span; ++k) out[k] = T(acc[std::size_t(i * width + k)]);
        }
    }
  });
  if (failed)
    throw ShapeError(fmt::format(
        "max_pool_backward: index {} is outside the {} positions of a plane", bad.load(), in_area));
}

// Every window's divisor, [oh * ow] (a plane's worth, shared by its planes).
template <typename C> std::vector<C> avg_divisors(const OpCall& call, const Pool2d& p) {
  const AvgPoolDivisor divisor = AvgPoolDivisor::of(call);
  std::vector<C> d(std::size_t(p.oh * p.ow));
  for (std::int64_t oh = 0; oh < p.oh; ++oh)
    for (std::int64_t ow = 0; ow < p.ow; ++ow)
      d[std::size_t(oh * p.ow + ow)] = C(divisor(p, oh, ow));
  return d;
}

// Whether the contiguous average pooling kernels walk window by window rather than tap column
// by tap column: for an adaptive pool's windows, which differ in width, and for windows wider
// than an output row has windows (adaptive_avg_pool2d's global pool), where a tap column's run
// of windows is shorter than a window's run of taps.
bool by_windows(const Pool2d& p) { return p.adaptive || p.kw > p.ow; }

// x [N, C, *in] -> y [N, C, *out], both contiguous or both channels-last (2-D): each window's
// taps added in (i, j) order in the compute type, then divided by its divisor.
template <typename T> void avg_pool_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &x = call.inputs.at(0), &y = call.outputs.at(0);
  const MemoryFormat format = check_activations(call, {&x, &y});
  const Pool2d p = pool2d_geometry(call, x, y);
  const std::vector<C> div = avg_divisors<C>(call, p);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const std::int64_t N = x.sizes.at(0), channels = x.sizes.at(1);
  if (format != MemoryFormat::contiguous) {
    // An output row at a time; per output pixel, the taps across its channels.
    parallel_range(N * p.oh, grain_for(p.ow * p.kh * p.kw * channels),
                   [&](std::int64_t b, std::int64_t e) {
                     std::vector<C> acc(static_cast<std::size_t>(channels));
                     for (std::int64_t row = b; row < e; ++row) {
                       const std::int64_t n = row / p.oh, oh = row % p.oh;
                       const Covered rows = covered(p.row(), oh);
                       for (std::int64_t ow = 0; ow < p.ow; ++ow) {
                         std::fill(acc.begin(), acc.end(), C(0));
                         const Covered cols = covered(p.col(), ow);
                         for (std::int64_t ih = rows.first; ih < rows.end; ++ih)
                           for (std::int64_t iw = cols.first; iw < cols.end; ++iw) {
                             const T* px = xp + ((n * p.h + ih) * p.w + iw) * channels;
#pragma omp simd
                             for (std::int64_t c = 0; c < channels; ++c) acc[c] += C(px[c]);
                           }
                         const C d = div[std::size_t(oh * p.ow + ow)];
                         T* py = yp + ((row * p.ow) + ow) * channels;
#pragma omp simd
                         for (std::int64_t c = 0; c < channels; ++c) py[c] = T(acc[c] / d);
                       }
                     }
                   });
    return;
  }
  // A plane's output row at a time, tap by tap across the row's windows; or, where the
  // windows are wider than they are many (a global pool: one window, 112 taps a row), window
  // by window along its input rows. Both add a window's taps in (i, j) order.
  const auto [lo, hi] = tap_columns(p);
  const std::int64_t in_area = p.h * p.w, out_area = p.oh * p.ow;
  const bool by_window = by_windows(p);
  parallel_range(N * channels, grain_for(out_area * p.kh * p.kw),
                 [&](std::int64_t b, std::int64_t e) {
                   std::vector<C> acc(static_cast<std::size_t>(p.ow));
                   for (std::int64_t plane = b; plane < e; ++plane)
                     for (std::int64_t oh = 0; oh < p.oh; ++oh) {
                       std::fill(acc.begin(), acc.end(), C(0));
                       const Covered rows = covered(p.row(), oh);
                       for (std::int64_t ih = rows.first; ih < rows.end; ++ih) {
                         const T* row = xp + plane * in_area + ih * p.w;
                         if (by_window) {
                           for (std::int64_t ow = 0; ow < p.ow; ++ow) {
                             const Covered cols = covered(p.col(), ow);
                             C a = acc[std::size_t(ow)];
                             for (std::int64_t iw = cols.first; iw < cols.end; ++iw)
                               a += C(row[iw]);
                             acc[std::size_t(ow)] = a;
                           }
                           continue;
                         }
                         for (std::int64_t j = 0; j < p.kw; ++j) {
                           const T* src = row + j - p.pw;
                           for (std::int64_t ow = lo[std::size_t(j)]; ow < hi[std::size_t(j)]; ++ow)
                             acc[std::size_t(ow)] += C(src[ow * p.sw]);
                         }
                       }
                       const C* d = div.data() + oh * p.ow;
                       T* py = yp + plane * out_area + oh * p.ow;
                       for (std::int64_t ow = 0; ow < p.ow; ++ow)
                         py[ow] = T(acc[std::size_t(ow)] / d[ow]);
                     }
                 });
}

// g [N, C, *out] -> dx [N, C, *in], both contiguous or both channels-last: dx at each input
// position is the sum of g / divisor over the windows that cover it, in output order (rows,
// then columns, rising), whatever the threads or the layout. Contiguous: per plane, each
// window's share added into its taps (a scatter, as PyTorch's CPU kernel); channels-last: per
// input pixel, the covering windows gathered, across the channels.
template <typename T> void avg_pool_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &g = call.inputs.at(0), &dx = call.outputs.at(0);
  const MemoryFormat format = check_activations(call, {&g, &dx});
  const Pool2d p = pool2d_geometry(call, dx, g);
  if (g.sizes.at(0) != dx.sizes.at(0) || g.sizes.at(1) != dx.sizes.at(1))
    throw ShapeError(fmt::format("{}: the gradient's batch and channels {} differ from dx's {}",
                                 call.name(), fmt::join(g.sizes, "x"), fmt::join(dx.sizes, "x")));
  const std::vector<C> div = avg_divisors<C>(call, p);
  const T* gp = g.data<T>();
  T* dp = dx.data<T>();
  const std::int64_t N = dx.sizes.at(0), channels = dx.sizes.at(1);
  if (format != MemoryFormat::contiguous) {
    parallel_range(
        N * p.h,
        grain_for(p.w * channels * ((p.kh + p.sh - 1) / p.sh) * ((p.kw + p.sw - 1) / p.sw)),
        [&](std::int64_t b, std::int64_t e) {
          std::vector<C> acc(static_cast<std::size_t>(channels));
          for (std::int64_t row = b; row < e; ++row) {
            const std::int64_t n = row / p.h, ih = row % p.h;
            const Covered rows = covering(p.row(), ih);
            for (std::int64_t iw = 0; iw < p.w; ++iw) {
              std::fill(acc.begin(), acc.end(), C(0));
              const Covered cols = covering(p.col(), iw);
              for (std::int64_t oh = rows.first; oh < rows.end; ++oh)
                for (std::int64_t ow = cols.first; ow < cols.end; ++ow) {
                  const T* pg = gp + ((n * p.oh + oh) * p.ow + ow) * channels;
                  const C d = div[std::size_t(oh * p.ow + ow)];
#pragma omp simd
                  for (std::int64_t c = 0; c < channels; ++c) acc[c] += C(pg[c]) / d;
                }
              T* px = dp + (row * p.w + iw) * channels;
#pragma omp simd
              for (std::int64_t c = 0; c < channels; ++c) px[c] = T(acc[c]);
            }
          }
        });
    return;
  }
  const auto [lo, hi] = tap_columns(p);
  const std::int64_t in_area = p.h * p.w, out_area = p.oh * p.ow;
  const bool by_window = by_windows(p);
  parallel_range(N * channels, grain_for(in_area + out_area * p.kh * p.kw),
                 [&](std::int64_t b, std::int64_t e) {
                   std::vector<C> acc(static_cast<std::size_t>(in_area)),
                       share(static_cast<std::size_t>(p.ow));
                   for (std::int64_t plane = b; plane < e; ++plane) {
                     std::fill(acc.begin(), acc.end(), C(0));
                     for (std::int64_t oh = 0; oh < p.oh; ++oh) {
                       const T* pg = gp + plane * out_area + oh * p.ow;
                       const C* d = div.data() + oh * p.ow;
                       for (std::int64_t ow = 0; ow < p.ow; ++ow)
                         share[std::size_t(ow)] = C(pg[ow]) / d[ow];
                       const Covered rows = covered(p.row(), oh);
                       // Tap columns last to first (or window by window, for wide windows):
                       // an element's shares then come in output order (ow rising), the
                       // channels-last gather's and Vulkan's.
                       for (std::int64_t ih = rows.first; ih < rows.end; ++ih) {
                         C* row = acc.data() + ih * p.w;
                         if (by_window) {
                           for (std::int64_t ow = 0; ow < p.ow; ++ow) {
                             const Covered cols = covered(p.col(), ow);
                             const C v = share[std::size_t(ow)];
                             for (std::int64_t iw = cols.first; iw < cols.end; ++iw) row[iw] += v;
                           }
                           continue;
                         }
                         for (std::int64_t j = p.kw - 1; j >= 0; --j) {
                           C* dst = row + j - p.pw;
                           for (std::int64_t ow = lo[std::size_t(j)]; ow < hi[std::size_t(j)]; ++ow)
                             dst[ow * p.sw] += share[std::size_t(ow)];
                         }
                       }
                     }
                     T* px = dp + plane * in_area;
                     for (std::int64_t i = 0; i < in_area; ++i) px[i] = T(acc[std::size_t(i)]);
                   }
                 });
}

}  // namespace

void add_pool_kernels(KernelTable& table) {
  for (OpId op : {OpId::max_pool1d, OpId::max_pool2d})
    table.emplace_back(op, [](DeviceImpl&, const OpCall& c) {
      FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, c.name(), max_pool_kernel<scalar_t>(c));
    });
  table.emplace_back(OpId::max_pool_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "max_pool_backward",
                            max_pool_backward_kernel<scalar_t>(c));
  });
  for (OpId op : {OpId::avg_pool1d, OpId::avg_pool2d})
    table.emplace_back(op, [](DeviceImpl&, const OpCall& c) {
      FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, c.name(), avg_pool_kernel<scalar_t>(c));
    });
  table.emplace_back(OpId::avg_pool_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "avg_pool_backward",
                            avg_pool_backward_kernel<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
