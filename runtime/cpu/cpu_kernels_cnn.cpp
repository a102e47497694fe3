// runtime/cpu/cpu_kernels_cnn.cpp — the fused batch_norm and max pooling kernels of the CPU
// (docs/kernel-contract.md): CNN layers whose compositions make several passes over
// activations of a hundred megabytes (Note [Fused CNN layers on the CPU]).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_lane_sums.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/batch_norm_args.hpp"
#include "ferry/kit/pool_geometry.hpp"

namespace ferry::cpu {
namespace {

// Note [Fused CNN layers on the CPU]
// BatchNorm2d composed of mean, var and four element-wise ops reads a ResNet activation ten
// times forward and about twenty times backward, and max pooling as gathered windows
// materialises every window (nine times the activation for 3x3) before its argmax. These
// kernels walk each channel (batch_norm) or each plane (max pooling) once or twice:
// - batch_norm: per channel, the batch sums of x - x0 and (x - x0)^2 in double (x0 the
//   channel's first element, so the variance keeps its digits when the mean is large), then
//   y = x * scale + shift. Eval mode takes the running statistics.
// - batch_norm_backward: per channel, the sums of g and g (x - mean) in double, then
//   dx = (g - mean(g) - (x - mean) rstd^2 mean(g (x - mean))) rstd w (training) or g rstd w.
// - max_pool1d/2d: per plane, each window's maximum and its flat spatial position, the first
//   tap of the largest value, a NaN taking over as PyTorch's kernel does.
// - max_pool_backward: per plane, the gradient added into the positions in order, so the
//   result does not depend on threads.
// Channels run in parallel (planes for pooling); each one's work is sequential.
//
// Channels-last calls (the attribute channels_last; DeviceCapabilities::channels_last_cnn) see
// x as [rows, C], a pixel's channels one run, and walk it row by row, the inner loop across the
// channels (as oneDNN's nhwc primitives and PyTorch's channels-last kernels do):
// - batch_norm's sums go per channel into double accumulators, over blocks of rows whose size
//   depends on C alone, the blocks' sums then added in block order (channel_sums): the result
//   does not depend on the number of threads.
// - max pooling compares a tap's C channels at once (the taps in the same order);
//   max_pool_backward adds each image's gradients in order, all its channels together (split
//   only where there are fewer images than threads), into dx itself in f32 and f64.

// Work per thread before the channels are split.
std::int64_t grain_for(std::int64_t per_item) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(per_item, 1));
}

// K sums per channel of a channels-last [rows, C], in double: add_row(r, acc) adds row r's
// terms into acc[k · C + c]. The rows go in fixed blocks (kParallelGrain elements each) summed
// in parallel, then the blocks' sums in block order, the same for any number of threads.
template <std::size_t K, typename AddRow>
std::vector<double> channel_sums(std::int64_t rows, std::int64_t channels, const AddRow& add_row) {
  const std::int64_t width = std::int64_t(K) * channels;
  const std::int64_t per_block = std::max<std::int64_t>(1, kParallelGrain / channels);
  const std::int64_t blocks = (rows + per_block - 1) / per_block;
  std::vector<double> partial(std::size_t(blocks * width), 0.0);
  parallel_range(blocks, 2, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      double* acc = partial.data() + b * width;
      for (std::int64_t r = b * per_block, r1 = std::min(rows, r + per_block); r < r1; ++r)
        add_row(r, acc);
    }
  });
  std::vector<double> total(std::size_t(width), 0.0);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t i = 0; i < width; ++i)
      total[std::size_t(i)] += partial[std::size_t(b * width + i)];
  return total;
}

// The call's activations dense in the layout its attributes say (docs/kernel-contract.md).
MemoryFormat check_activations(const OpCall& call, std::initializer_list<const TensorArg*> ts) {
  const MemoryFormat f = activation_format(call.attrs, call.inputs.at(0).ndim());
  for (const TensorArg* t : ts)
    if (!t->is_contiguous(f))
      throw Error(fmt::format("{}: the cpu kernel takes dense {} activations, got strides {}",
                              call.name(), memory_format_name(f), fmt::join(t->strides, ", ")));
  return f;
}

// s += Σ (p[i] - x0), ss += Σ (p[i] - x0)^2, in double lanes (Note [Lane sums]).
template <typename T>
void add_moments(const T* p, std::int64_t n, double x0, double& s, double& ss) {
  using C = compute_t<T>;
  const auto r = lane_sums<double, 2>(n, [&](std::int64_t i) {
    const double d = double(C(p[i])) - x0;
    return std::array<double, 2>{d, d * d};
  });
  s += r[0];
  ss += r[1];
}

// sg += Σ g[i], sgx += Σ g[i] (x[i] - m), in double lanes.
template <typename T> void add_grad_sums(const T* g, const T* x, std::int64_t n, compute_t<T> m,
                                         double& sg, double& sgx) {
  using C = compute_t<T>;
  const auto r = lane_sums<double, 2>(n, [&](std::int64_t i) {
    const double gv = double(C(g[i]));
    return std::array<double, 2>{gv, gv * double(C(x[i]) - m)};
  });
  sg += r[0];
  sgx += r[1];
}

// y = x · scale[c] + shift[c] from the channel's mean and variance, and the weight and bias.
template <typename T> struct Affine {
  using C = compute_t<T>;
  C scale, shift;
  Affine(double mean, double var, double eps, const TensorArg* w, const TensorArg* b,
         std::int64_t c) {
    const double rstd = 1.0 / std::sqrt(var + eps);
    const double wc = w ? double(C(w->data<T>()[c])) : 1.0;
    const double bc = b ? double(C(b->data<T>()[c])) : 0.0;
    scale = C(wc * rstd);
    shift = C(bc - mean * wc * rstd);
  }
};

// The mean and biased variance from the sums of x - x0 and (x - x0)^2 over `count` values.
std::pair<double, double> moments(double x0, double s, double ss, std::int64_t count) {
  const double m = s / double(count);
  return {x0 + m, std::max(ss / double(count) - m * m, 0.0)};
}

// x [N, C, *] contiguous or channels-last (attribute channels_last); [weight], [bias] [C] in
// x's dtype; eval: running mean, var [C] in the statistics' dtype (f32, f64 for f64). Outputs
// y in x's layout, and in training the batch mean and biased variance [C].
template <typename T> void batch_norm_kernel(const OpCall& call) {
  using C = compute_t<T>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const BatchNormOperands o = batch_norm_args(call, false, "cpu");
  const bool training = o.training;
  const double eps = o.eps;
  const TensorArg &x = *o.x, &y = *o.out;
  const TensorArg *w = o.weight, *b = o.bias, *run_mean = o.mean, *run_var = o.var;
  const TensorArg *mean_out = o.batch_mean, *var_out = o.batch_var;
  const MemoryFormat format = check_activations(call, {&x, &y});
  const std::int64_t N = o.N, channels = o.C, area = o.area;
  const std::int64_t count = N * area;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  // The channel's statistics: the batch's (written out) or the running ones.
  const auto statistics = [&](std::int64_t c, double x0, double s, double ss) {
    if (!training) return std::pair{double(run_mean->data<S>()[c]), double(run_var->data<S>()[c])};
    const auto mv = moments(x0, s, ss, count);
    mean_out->data<S>()[c] = S(mv.first);
    var_out->data<S>()[c] = S(mv.second);
    return mv;
  };
  if (format != MemoryFormat::contiguous) {  // [rows, C]: the sums, then y row by row
    std::vector<double> x0(static_cast<std::size_t>(channels)), sums;  // x0: the first row
    for (std::int64_t c = 0; c < channels; ++c) x0[std::size_t(c)] = double(C(xp[c]));
    if (training)
      sums = channel_sums<2>(count, channels, [&](std::int64_t r, double* acc) {
        const T* p = xp + r * channels;
#pragma omp simd
        for (std::int64_t c = 0; c < channels; ++c) {
          const double d = double(C(p[c])) - x0[std::size_t(c)];
          acc[c] += d;
          acc[channels + c] += d * d;
        }
      });
    std::vector<Affine<T>> affine;
    for (std::int64_t c = 0; c < channels; ++c) {
      const auto [mean, var] = training ? statistics(c, x0[std::size_t(c)], sums[std::size_t(c)],
                                                     sums[std::size_t(channels + c)])
                                        : statistics(c, 0, 0, 0);
      affine.emplace_back(mean, var, eps, w, b, c);
    }
    parallel_range(count, grain_for(channels), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const T* p = xp + r * channels;
        T* q = yp + r * channels;
#pragma omp simd
        for (std::int64_t c = 0; c < channels; ++c)
          q[c] = T(C(p[c]) * affine[std::size_t(c)].scale + affine[std::size_t(c)].shift);
      }
    });
    return;
  }
  parallel_range(channels, grain_for(count), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      double x0 = 0, s = 0, ss = 0;
      if (training) {
        x0 = double(C(xp[c * area]));
        for (std::int64_t n = 0; n < N; ++n)
          add_moments(xp + (n * channels + c) * area, area, x0, s, ss);
      }
      const auto [mean, var] = statistics(c, x0, s, ss);
      const Affine<T> a(mean, var, eps, w, b, c);
      for (std::int64_t n = 0; n < N; ++n) {
        const T* p = xp + (n * channels + c) * area;
        T* q = yp + (n * channels + c) * area;
        for (std::int64_t i = 0; i < area; ++i) q[i] = T(C(p[i]) * a.scale + a.shift);
      }
    }
  });
}

// g, x [N, C, *] in one layout, contiguous or channels-last; mean, var [C] (the batch's in
// training, the running ones in eval, in the statistics' dtype); [weight] [C] in x's dtype.
// Outputs dx in x's dtype and layout, and the weight's and bias's gradients [C] in the
// statistics' dtype.
template <typename T> void batch_norm_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const BatchNormOperands o = batch_norm_args(call, true, "cpu");
  const bool training = o.training;
  const double eps = o.eps;
  const TensorArg &g = *o.g, &x = *o.x, &mean_in = *o.mean, &var_in = *o.var;
  const TensorArg* w = o.weight;
  const TensorArg &dx = *o.out, &dw = *o.dweight, &db = *o.dbias;
  const MemoryFormat format = check_activations(call, {&g, &x, &dx});
  const std::int64_t N = o.N, channels = o.C, area = o.area;
  const std::int64_t count = N * area;
  const T *gp = g.data<T>(), *xp = x.data<T>();
  T* dxp = dx.data<T>();
  // dx = a (g - gmean - (x - mean) k): training's, from the channel's sums of g and
  // g (x - mean); eval's is a g.
  struct Coefficients {
    C mean, a, gmean, k;
  };
  const auto coefficients = [&](std::int64_t c, double sg, double sgx) {
    const double rstd = 1.0 / std::sqrt(double(var_in.data<S>()[c]) + eps);
    db.data<S>()[c] = S(sg);
    dw.data<S>()[c] = S(sgx * rstd);
    const double wc = w ? double(C(w->data<T>()[c])) : 1.0;
    return Coefficients{C(mean_in.data<S>()[c]), C(rstd * wc),
                        training ? C(sg / double(count)) : C(0),
                        training ? C(rstd * rstd * sgx / double(count)) : C(0)};
  };
  if (format != MemoryFormat::contiguous) {  // [rows, C]: the sums, then dx row by row
    std::vector<C> mean(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) mean[std::size_t(c)] = C(mean_in.data<S>()[c]);
    const std::vector<double> sums =
        channel_sums<2>(count, channels, [&](std::int64_t r, double* acc) {
          const T *gr = gp + r * channels, *xr = xp + r * channels;
#pragma omp simd
          for (std::int64_t c = 0; c < channels; ++c) {
            const double gv = double(C(gr[c]));
            acc[c] += gv;
            acc[channels + c] += gv * double(C(xr[c]) - mean[std::size_t(c)]);
          }
        });
    std::vector<Coefficients> k;
    for (std::int64_t c = 0; c < channels; ++c)
      k.push_back(coefficients(c, sums[std::size_t(c)], sums[std::size_t(channels + c)]));
    parallel_range(count, grain_for(2 * channels), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t at = r * channels;
#pragma omp simd
        for (std::int64_t c = 0; c < channels; ++c) {
          const Coefficients& kc = k[std::size_t(c)];
          dxp[at + c] = T(kc.a * (C(gp[at + c]) - kc.gmean - (C(xp[at + c]) - kc.mean) * kc.k));
        }
      }
    });
    return;
  }
  parallel_range(channels, grain_for(2 * count), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const C mc = C(mean_in.data<S>()[c]);
      double sg = 0, sgx = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t at = (n * channels + c) * area;
        add_grad_sums(gp + at, xp + at, area, mc, sg, sgx);
      }
      const Coefficients kc = coefficients(c, sg, sgx);
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t at = (n * channels + c) * area;
        for (std::int64_t i = 0; i < area; ++i)
          dxp[at + i] = T(kc.a * (C(gp[at + i]) - kc.gmean - (C(xp[at + i]) - kc.mean) * kc.k));
      }
    }
  });
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
                     for (std::int64_t ow = 0; ow < p.ow; ++ow) {
                       m.reset();
                       for (std::int64_t i = 0; i < p.kh; ++i) {
                         const std::int64_t ih = oh * p.sh - p.ph + i * p.dh;
                         if (ih < 0 || ih >= p.h) continue;
                         for (std::int64_t j = 0; j < p.kw; ++j) {
                           const std::int64_t iw = ow * p.sw - p.pw + j * p.dw;
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
  if (ix.dtype != DType::i64)
    throw DTypeError(
        fmt::format("{}: the indices must be i64, got {}", call.name(), dtype_name(ix.dtype)));
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
  // The windows of tap column j that lie inside the input: ow in [lo[j], hi[j]).
  std::vector<std::int64_t> lo(std::size_t(p.kw)), hi(std::size_t(p.kw));
  for (std::int64_t j = 0; j < p.kw; ++j) {
    const std::int64_t off = j * p.dw - p.pw;  // iw = ow * sw + off
    lo[std::size_t(j)] = std::clamp<std::int64_t>(off >= 0 ? 0 : (-off + p.sw - 1) / p.sw, 0, p.ow);
    hi[std::size_t(j)] =
        std::clamp<std::int64_t>(p.w - off <= 0 ? 0 : (p.w - off - 1) / p.sw + 1, 0, p.ow);
  }
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
  if (ix.dtype != DType::i64 || ix.sizes != g.sizes)
    throw ShapeError(fmt::format(
        "max_pool_backward: the indices must be i64 of the gradient's shape {}, got {} {}",
        fmt::join(g.sizes, "x"), dtype_name(ix.dtype), fmt::join(ix.sizes, "x")));
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
  // Channels-last f32 and f64 add into dx itself; a plane (a small run: it stays in cache), or
  // the 16-bit floats, into a copy in the compute type.
  C* direct = nullptr;
  if constexpr (std::is_same_v<T, C>)
    if (cl) direct = dp;
  const std::int64_t work = (in_area + out_area) * width;
  parallel_range(N * blocks, grain_for(work), [&](std::int64_t b, std::int64_t e) {
    std::vector<C> acc(direct ? 0 : static_cast<std::size_t>(in_area * width));
    for (std::int64_t task = b; task < e; ++task) {
      const std::int64_t n = task / blocks, c0 = task % blocks * width;
      const std::int64_t span = std::min(width, channels - c0);
      // Input pixel i's channel c0 + k adds up at base[i * pitch + k].
      C* const base = direct ? direct + at(n, c0, 0, in_area) : acc.data();
      const std::int64_t pitch = direct ? channels : width;
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

}  // namespace

void add_cnn_kernels(KernelTable& table) {
  table.emplace_back(OpId::batch_norm, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "batch_norm", batch_norm_kernel<scalar_t>(c));
  });
  table.emplace_back(OpId::batch_norm_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "batch_norm_backward",
                            batch_norm_backward_kernel<scalar_t>(c));
  });
  for (OpId op : {OpId::max_pool1d, OpId::max_pool2d})
    table.emplace_back(op, [](DeviceImpl&, const OpCall& c) {
      FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, c.name(), max_pool_kernel<scalar_t>(c));
    });
  table.emplace_back(OpId::max_pool_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "max_pool_backward",
                            max_pool_backward_kernel<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
