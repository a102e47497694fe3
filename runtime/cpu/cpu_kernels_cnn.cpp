// runtime/cpu/cpu_kernels_cnn.cpp — the fused batch_norm kernels of the CPU
// (docs/kernel-contract.md): a CNN layer whose composition makes several passes over
// activations of a hundred megabytes (Note [Fused CNN layers on the CPU]; pooling's kernels:
// cpu_kernels_pool.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_cnn.hpp"
#include "cpu/cpu_lane_sums.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/batch_norm_args.hpp"

namespace ferry::cpu {
namespace {

// Note [Fused CNN layers on the CPU]
// BatchNorm2d composed of mean, var and four element-wise ops reads a ResNet activation ten
// times forward and about twenty times backward, and pooling as gathered windows
// materialises every window (nine times the activation for 3x3) before its argmax or sum.
// These kernels walk each channel (batch_norm) or each plane (pooling) once or twice:
// - batch_norm: per channel, the batch sums of x - x0 and (x - x0)^2 in double (x0 the
//   channel's first element, so the variance keeps its digits when the mean is large), then
//   y = x * scale + shift. Eval mode takes the running statistics.
// - batch_norm_backward: per channel, the sums of g and g (x - mean) in double, then
//   dx = (g - mean(g) - (x - mean) rstd^2 mean(g (x - mean))) rstd w (training) or g rstd w.
// - max_pool1d/2d: per plane, each window's maximum and its flat spatial position, the first
//   tap of the largest value, a NaN taking over as PyTorch's kernel does.
// - max_pool_backward: per plane, the gradient added into the positions in order, so the
//   result does not depend on threads.
// - avg_pool1d/2d: per plane, an output row's windows summed tap by tap across the row, each
//   divided by its divisor (AvgPoolDivisor, PyTorch's); avg_pool_backward adds each window's
//   g / divisor into its taps in order, as PyTorch's CPU kernel does.
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
// - avg pooling adds a tap's C channels at once; avg_pool_backward gathers: each input pixel
//   adds the windows that cover it, in output order, across its channels.

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

}  // namespace

void add_cnn_kernels(KernelTable& table) {
  table.emplace_back(OpId::batch_norm, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "batch_norm", batch_norm_kernel<scalar_t>(c));
  });
  table.emplace_back(OpId::batch_norm_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "batch_norm_backward",
                            batch_norm_backward_kernel<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
