// runtime/cpu/cpu_kernels_cnn.cpp — the fused batch_norm and max pooling kernels of the CPU
// (docs/kernel-contract.md): CNN layers whose compositions make several passes over
// activations of a hundred megabytes (Note [Fused CNN layers on the CPU]).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_lane_sums.hpp"
#include "cpu/cpu_loops.hpp"

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

// Work per thread before the channels are split.
std::int64_t grain_for(std::int64_t per_item) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(per_item, 1));
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

template <typename T, typename S> void check_stats(const TensorArg& t, std::string_view what) {
  if (t.dtype != dtype_of<S>())
    throw DTypeError(fmt::format("batch_norm: the cpu kernel takes {} as {} for a {} input, got {}",
                                 what, dtype_name(dtype_of<S>()), dtype_name(dtype_of<T>()),
                                 dtype_name(t.dtype)));
}

// x [N, C, *] contiguous; [weight], [bias] [C] in x's dtype; eval: running mean, var [C] in
// the statistics' dtype (f32, f64 for f64). Outputs y, and in training the batch mean and
// biased variance [C].
template <typename T> void batch_norm_kernel(const OpCall& call) {
  using C = compute_t<T>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const bool training = call.attrs.b("training");
  const bool has_w = call.attrs.b("has_weight"), has_b = call.attrs.b("has_bias");
  const double eps = call.attrs.f("eps");
  const TensorArg& x = call.inputs.at(0);
  std::size_t next = 1;
  const TensorArg* w = has_w ? &call.inputs.at(next++) : nullptr;
  const TensorArg* b = has_b ? &call.inputs.at(next++) : nullptr;
  const TensorArg* run_mean = training ? nullptr : &call.inputs.at(next++);
  const TensorArg* run_var = training ? nullptr : &call.inputs.at(next++);
  const TensorArg& y = call.outputs.at(0);
  const TensorArg* mean_out = training ? &call.outputs.at(1) : nullptr;
  const TensorArg* var_out = training ? &call.outputs.at(2) : nullptr;
  for (const TensorArg* t : {run_mean, run_var, mean_out, var_out})
    if (t) check_stats<T, S>(*t, "the statistics");
  const std::int64_t N = x.sizes.at(0), channels = x.sizes.at(1);
  const std::int64_t area = channels == 0 ? 0 : x.numel() / (N * channels);
  const std::int64_t count = N * area;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_range(channels, grain_for(count), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      double mean = 0, var = 0;
      if (training) {
        const double x0 = double(C(xp[c * area]));
        double s = 0, ss = 0;
        for (std::int64_t n = 0; n < N; ++n)
          add_moments(xp + (n * channels + c) * area, area, x0, s, ss);
        const double m = s / double(count);
        mean = x0 + m;
        var = std::max(ss / double(count) - m * m, 0.0);
        mean_out->data<S>()[c] = S(mean);
        var_out->data<S>()[c] = S(var);
      } else {
        mean = double(run_mean->data<S>()[c]);
        var = double(run_var->data<S>()[c]);
      }
      const double rstd = 1.0 / std::sqrt(var + eps);
      const double wc = w ? double(C(w->data<T>()[c])) : 1.0;
      const double bc = b ? double(C(b->data<T>()[c])) : 0.0;
      const C scale = C(wc * rstd), shift = C(bc - mean * wc * rstd);
      for (std::int64_t n = 0; n < N; ++n) {
        const T* p = xp + (n * channels + c) * area;
        T* q = yp + (n * channels + c) * area;
        for (std::int64_t i = 0; i < area; ++i) q[i] = T(C(p[i]) * scale + shift);
      }
    }
  });
}

// g, x [N, C, *] contiguous; mean, var [C] (the batch's in training, the running ones in eval,
// in the statistics' dtype); [weight] [C] in x's dtype. Outputs dx in x's dtype, and the
// weight's and bias's gradients [C] in the statistics' dtype.
template <typename T> void batch_norm_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const bool training = call.attrs.b("training"), has_w = call.attrs.b("has_weight");
  const double eps = call.attrs.f("eps");
  const TensorArg &g = call.inputs.at(0), &x = call.inputs.at(1);
  const TensorArg &mean_in = call.inputs.at(2), &var_in = call.inputs.at(3);
  const TensorArg* w = has_w ? &call.inputs.at(4) : nullptr;
  const TensorArg &dx = call.outputs.at(0), &dw = call.outputs.at(1), &db = call.outputs.at(2);
  for (const TensorArg* t : {&mean_in, &var_in, &dw, &db}) check_stats<T, S>(*t, "the statistics");
  if (g.sizes != x.sizes || dx.sizes != x.sizes)
    throw ShapeError("batch_norm_backward: the gradient, input and output must have one shape");
  const std::int64_t N = x.sizes.at(0), channels = x.sizes.at(1);
  const std::int64_t area = channels == 0 ? 0 : x.numel() / (N * channels);
  const std::int64_t count = N * area;
  const T *gp = g.data<T>(), *xp = x.data<T>();
  T* dxp = dx.data<T>();
  parallel_range(channels, grain_for(2 * count), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const double mean = double(mean_in.data<S>()[c]);
      const double rstd = 1.0 / std::sqrt(double(var_in.data<S>()[c]) + eps);
      const C mc = C(mean);
      double sg = 0, sgx = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t at = (n * channels + c) * area;
        add_grad_sums(gp + at, xp + at, area, mc, sg, sgx);
      }
      db.data<S>()[c] = S(sg);
      dw.data<S>()[c] = S(sgx * rstd);
      const double wc = w ? double(C(w->data<T>()[c])) : 1.0;
      const C a = C(rstd * wc);
      // training: dx = a (g - sg / M - (x - mean) rstd^2 sgx / M)
      const C gmean = training ? C(sg / double(count)) : C(0);
      const C k = training ? C(rstd * rstd * sgx / double(count)) : C(0);
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t at = (n * channels + c) * area;
        for (std::int64_t i = 0; i < area; ++i)
          dxp[at + i] = T(a * (C(gp[at + i]) - gmean - (C(xp[at + i]) - mc) * k));
      }
    }
  });
}

// One plane's 2-D geometry: a 1-D pool is a plane of height 1.
struct Pool2d {
  std::int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

Pool2d pool_geometry(const OpCall& call) {
  const TensorArg &x = call.inputs.at(0), &y = call.outputs.at(0);
  const int n = x.ndim() - 2;
  if (n != 1 && n != 2)
    throw ShapeError(
        fmt::format("{}: the cpu kernel pools 1 or 2 spatial dims, got {}", call.name(), n));
  const auto& k = call.attrs.ints("kernel_size");
  const auto& s = call.attrs.ints("stride");
  const auto& p = call.attrs.ints("padding");
  const auto& d = call.attrs.ints("dilation");
  auto at = [&](const std::vector<std::int64_t>& v, int i, std::int64_t one) {
    return n == 1 && i == 0 ? one : v.at(std::size_t(n == 1 ? 0 : i));
  };
  return {n == 2 ? x.sizes[2] : 1,
          x.sizes[std::size_t(n + 1)],
          n == 2 ? y.sizes[2] : 1,
          y.sizes[std::size_t(n + 1)],
          at(k, 0, 1),
          at(k, 1, 1),
          at(s, 0, 1),
          at(s, 1, 1),
          at(p, 0, 0),
          at(p, 1, 0),
          at(d, 0, 1),
          at(d, 1, 1)};
}

// The max pool of `planes` planes, one output row at a time and tap by tap across the row,
// so the inner loop is a vector compare-and-select over the row's windows (each window still
// sees its taps in (i, j) order). I, the position within a plane as the row buffer holds it:
// 32 bits keep it as wide as a float lane.
template <typename T, typename I>
void max_pool_planes(const Pool2d p, const std::vector<std::int64_t>& lo,
                     const std::vector<std::int64_t>& hi, std::int64_t planes, const T* xp, T* yp,
                     std::int64_t* ip) {
  using C = compute_t<T>;
  const std::int64_t in_area = p.h * p.w, out_area = p.oh * p.ow;
  const std::int64_t work = out_area * p.kh * p.kw;
  parallel_range(planes, grain_for(work), [&](std::int64_t b, std::int64_t e) {
    std::vector<C> best(static_cast<std::size_t>(p.ow));
    std::vector<I> arg(static_cast<std::size_t>(p.ow));
    C* const bp = best.data();
    I* const ap = arg.data();
    const std::int64_t sw = p.sw;
    for (std::int64_t plane = b; plane < e; ++plane) {
      const T* src = xp + plane * in_area;
      for (std::int64_t oh = 0; oh < p.oh; ++oh) {
        std::fill(best.begin(), best.end(), -std::numeric_limits<C>::infinity());
        std::fill(arg.begin(), arg.end(), I(-1));
        for (std::int64_t i = 0; i < p.kh; ++i) {
          const std::int64_t ih = oh * p.sh - p.ph + i * p.dh;
          if (ih < 0 || ih >= p.h) continue;
          for (std::int64_t j = 0; j < p.kw; ++j) {
            const std::int64_t off = ih * p.w + j * p.dw - p.pw;  // + ow * sw
            const T* row = src + off;
            const std::int64_t end = hi[std::size_t(j)];
#pragma omp simd
            for (std::int64_t ow = lo[std::size_t(j)]; ow < end; ++ow) {
              const C v = C(row[ow * sw]);
              const C cur = bp[ow];
              const I a = ap[ow];
              const bool take = (a < 0) | (v > cur) | (v != v);  // v != v: NaN
              bp[ow] = take ? v : cur;
              ap[ow] = take ? I(off + ow * sw) : a;
            }
          }
        }
        T* yrow = yp + plane * out_area + oh * p.ow;
        std::int64_t* irow = ip + plane * out_area + oh * p.ow;
        for (std::int64_t ow = 0; ow < p.ow; ++ow) yrow[ow] = T(bp[ow]), irow[ow] = ap[ow];
      }
    }
  });
}

// x [N, C, *in] contiguous -> values [N, C, *out], indices (i64, flat in the plane).
template <typename T> void max_pool_kernel(const OpCall& call) {
  const TensorArg &x = call.inputs.at(0), &y = call.outputs.at(0), &ix = call.outputs.at(1);
  if (ix.dtype != DType::i64)
    throw DTypeError(
        fmt::format("{}: the indices must be i64, got {}", call.name(), dtype_name(ix.dtype)));
  const Pool2d p = pool_geometry(call);
  const std::int64_t planes = x.sizes.at(0) * x.sizes.at(1);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  std::int64_t* ip = ix.data<std::int64_t>();
  // The windows of tap column j that lie inside the input: ow in [lo[j], hi[j]).
  std::vector<std::int64_t> lo(std::size_t(p.kw)), hi(std::size_t(p.kw));
  for (std::int64_t j = 0; j < p.kw; ++j) {
    const std::int64_t off = j * p.dw - p.pw;  // iw = ow * sw + off
    lo[std::size_t(j)] = std::clamp<std::int64_t>(off >= 0 ? 0 : (-off + p.sw - 1) / p.sw, 0, p.ow);
    hi[std::size_t(j)] =
        std::clamp<std::int64_t>(p.w - off <= 0 ? 0 : (p.w - off - 1) / p.sw + 1, 0, p.ow);
  }
  if (p.h * p.w > std::numeric_limits<std::int32_t>::max())
    max_pool_planes<T, std::int64_t>(p, lo, hi, planes, xp, yp, ip);
  else
    max_pool_planes<T, std::int32_t>(p, lo, hi, planes, xp, yp, ip);
}

// g, indices [N, C, *out] -> dx [N, C, *in]: each window's gradient added at its maximum.
template <typename T> void max_pool_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &g = call.inputs.at(0), &ix = call.inputs.at(1), &dx = call.outputs.at(0);
  if (ix.dtype != DType::i64 || ix.sizes != g.sizes)
    throw ShapeError(fmt::format(
        "max_pool_backward: the indices must be i64 of the gradient's shape {}, got {} {}",
        fmt::join(g.sizes, "x"), dtype_name(ix.dtype), fmt::join(ix.sizes, "x")));
  const std::int64_t planes = dx.sizes.at(0) * dx.sizes.at(1);
  const std::int64_t in_area = planes == 0 ? 0 : dx.numel() / planes;
  const std::int64_t out_area = planes == 0 ? 0 : g.numel() / planes;
  const T* gp = g.data<T>();
  const std::int64_t* ip = ix.data<std::int64_t>();
  T* dp = dx.data<T>();
  std::atomic<bool> failed{false};
  std::atomic<std::int64_t> bad{0};
  parallel_range(planes, grain_for(in_area + out_area), [&](std::int64_t b, std::int64_t e) {
    std::vector<C> acc(static_cast<std::size_t>(in_area));
    for (std::int64_t plane = b; plane < e; ++plane) {
      std::fill(acc.begin(), acc.end(), C(0));
      for (std::int64_t o = 0; o < out_area; ++o) {
        const std::int64_t at = ip[plane * out_area + o];
        if (at < 0 || at >= in_area) {
          if (!failed.exchange(true)) bad = at;
          continue;  // never write outside the plane
        }
        acc[std::size_t(at)] += C(gp[plane * out_area + o]);
      }
      T* out = dp + plane * in_area;
      for (std::int64_t i = 0; i < in_area; ++i) out[i] = T(acc[std::size_t(i)]);
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
