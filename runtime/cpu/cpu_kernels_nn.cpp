// runtime/cpu/cpu_kernels_nn.cpp — softmax, log_softmax, layer_norm and its backward, and the fused
// logsumexp on the CPU (docs/kernel-contract.md). Each row is loaded into a buffer of the compute
// type (float, widening f16/bf16; double for f64), gathering a strided row, computed there, and
// stored; rows are split over threads. Sums accumulate in double.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "cpu/cpu_vector_math.hpp"

namespace ferry::cpu {
namespace {

// The element offset of row `r` of a tensor whose last dim is the row.
std::int64_t row_offset(const TensorArg& t, std::int64_t r) {
  std::int64_t off = t.offset;
  for (int d = t.ndim() - 2; d >= 0; --d) {
    off += (r % t.sizes[d]) * t.strides[d];
    r /= t.sizes[d];
  }
  return off;
}

template <typename T, typename C>
void load_row(const T* p, std::int64_t n, std::int64_t stride, C* buf) {
  if (stride == 1) {
    for (std::int64_t i = 0; i < n; ++i) buf[i] = C(p[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) buf[i] = C(p[i * stride]);
  }
}

template <typename T, typename C>
void store_row(const C* buf, std::int64_t n, std::int64_t stride, T* p) {
  if (stride == 1) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = T(buf[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) p[i * stride] = T(buf[i]);
  }
}

// Splits `rows` rows of `n` elements over threads.
template <typename Body> void parallel_rows(std::int64_t rows, std::int64_t n, const Body& body) {
  parallel_range(rows, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(n, 1)),
                 body);
}

// Along the last dim: softmax = exp(x - max) / sum, log_softmax = x - max -
// log(sum), with max the row's maximum (subtracting it keeps exp from
// overflowing). A NaN anywhere in a row makes the whole row NaN.
template <typename T, bool kLog> void softmax_rows(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg& x = call.inputs.at(0);
  const TensorArg& y = call.outputs.at(0);
  const std::int64_t n = x.sizes.back();
  const std::int64_t rows = n == 0 ? 0 : x.numel() / n;
  const std::int64_t xs = x.strides.back(), ys = y.strides.back();
  const T* xb = static_cast<const T*>(x.buffer->host_ptr());
  T* yb = static_cast<T*>(y.buffer->host_ptr());
  parallel_rows(rows, n, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> buf(static_cast<std::size_t>(n));
    C* v = buf.data();
    for (std::int64_t r = begin; r < end; ++r) {
      load_row(xb + row_offset(x, r), n, xs, v);
      C m = -std::numeric_limits<C>::infinity();
      for (std::int64_t i = 0; i < n; ++i) m = (v[i] > m || v[i] != v[i]) ? v[i] : m;
      double sum = 0;
      if constexpr (kLog) {
        for (std::int64_t i = 0; i < n; ++i) sum += double(std::exp(v[i] - m));
        // (x - max) - log(sum), in that order: folding max + log(sum) into one
        // value first would round away log(sum) when max is large.
        const C log_sum = C(std::log(sum));
        for (std::int64_t i = 0; i < n; ++i) v[i] = (v[i] - m) - log_sum;
      } else {
        for (std::int64_t i = 0; i < n; ++i) {
          v[i] = std::exp(v[i] - m);
          sum += double(v[i]);
        }
        const C inv = C(1.0 / sum);
        for (std::int64_t i = 0; i < n; ++i) v[i] *= inv;
      }
      store_row(v, n, ys, yb + row_offset(y, r));
    }
  });
}

// v[i] = exp(v[i] - m) over a row: through glibc's libmvec four floats at a time where the
// build found it (its expf is within a few ulps of the scalar one, which the conformance
// suite's threshold for the composition allows), else one at a time.
template <typename C> void exp_shifted(C* v, std::int64_t n, C m) {
  std::int64_t i = 0;
#ifdef FERRY_HAVE_LIBMVEC
  if constexpr (std::is_same_v<C, float>) {
    const __m128 mm = _mm_set1_ps(m);
    for (; i + 4 <= n; i += 4)
      _mm_storeu_ps(v + i, VectorForm<math::ops::Exp>::apply(_mm_sub_ps(_mm_loadu_ps(v + i), mm)));
  }
#endif
  for (; i < n; ++i) v[i] = std::exp(v[i] - m);
}

// logsumexp's fused kernel (Note [Composite ops]) over each row of [rows, n]: the
// composition's steps (ops_composite.cpp) in one read for the maximum m (taken as 0 when
// infinite; NaN propagates) and one for the sum of exp(x - m), in double, rounded to the
// compute type before the log as the composition's sum is; then log(sum) + m.
template <typename T> void logsumexp_rows(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg& x = call.inputs.at(0);
  const std::int64_t n = x.sizes.back();
  const std::int64_t rows = n == 0 ? 0 : x.numel() / n;
  const std::int64_t xs = x.strides.back();
  const T* xb = static_cast<const T*>(x.buffer->host_ptr());
  T* y = call.outputs.at(0).data<T>();
  parallel_rows(rows, n, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> buf(static_cast<std::size_t>(n));
    C* v = buf.data();
    for (std::int64_t r = begin; r < end; ++r) {
      load_row(xb + row_offset(x, r), n, xs, v);
      // The maximum in eight lanes, NaN tracked apart, so that the loop vectorizes.
      C lanes[8];
      for (C& l : lanes) l = -std::numeric_limits<C>::infinity();
      bool nan = false;
      std::int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) {
          const C a = v[i + j];
          lanes[j] = a > lanes[j] ? a : lanes[j];
          nan |= a != a;
        }
      for (; i < n; ++i) {
        lanes[0] = v[i] > lanes[0] ? v[i] : lanes[0];
        nan |= v[i] != v[i];
      }
      C m = nan ? std::numeric_limits<C>::quiet_NaN() : *std::max_element(lanes, lanes + 8);
      if (std::isinf(m)) m = 0;
      exp_shifted(v, n, m);
      // Eight running sums, as the CPU's sum kernel keeps (Note [CPU reductions]).
      double lane[8] = {};
      for (i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) lane[j] += double(v[i + j]);
      for (; i < n; ++i) lane[0] += double(v[i]);
      for (int j = 1; j < 8; j *= 2)
        for (int k = 0; k + j < 8; k += 2 * j) lane[k] += lane[k + j];
      y[r] = T(C(std::log(C(lane[0]))) + m);
    }
  });
}

// y = (x - mean) * rstd * weight + bias over each row of [rows, N]; the
// variance is biased and computed in a second pass over the row (stable even
// when the mean is large). mean and rstd are written in the compute type: f32,
// or f64 for an f64 x.
template <typename T> void layer_norm_rows(const OpCall& call) {
  using C = compute_t<T>;
  const bool has_w = call.attrs.b("has_weight"), has_b = call.attrs.b("has_bias");
  const double eps = call.attrs.f("eps");
  const TensorArg& x = call.inputs.at(0);
  const TensorArg* w = has_w ? &call.inputs.at(1) : nullptr;
  const TensorArg* b = has_b ? &call.inputs.at(has_w ? 2 : 1) : nullptr;
  const TensorArg &y = call.outputs.at(0), &mean_out = call.outputs.at(1),
                  &rstd_out = call.outputs.at(2);
  const std::int64_t rows = x.sizes.at(0), n = x.sizes.at(1);
  if (mean_out.dtype != dtype_of<C>() || rstd_out.dtype != dtype_of<C>())
    throw DTypeError(fmt::format(
        "layer_norm: the cpu kernel writes mean and rstd as {} for a {} input, got {} and {}",
        dtype_name(dtype_of<C>()), dtype_name(x.dtype), dtype_name(mean_out.dtype),
        dtype_name(rstd_out.dtype)));
  // The affine parameters, widened once.
  std::vector<C> wf(static_cast<std::size_t>(n), C(1)), bf(static_cast<std::size_t>(n), C(0));
  if (w) load_row(w->data<T>(), n, w->strides[0], wf.data());
  if (b) load_row(b->data<T>(), n, b->strides[0], bf.data());
  C* mean_p = mean_out.data<C>();
  C* rstd_p = rstd_out.data<C>();
  parallel_rows(rows, n, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> buf(static_cast<std::size_t>(n));
    C* v = buf.data();
    for (std::int64_t r = begin; r < end; ++r) {
      load_row(x.data<T>() + r * x.strides[0], n, x.strides[1], v);
      double s = 0;
      for (std::int64_t i = 0; i < n; ++i) s += v[i];
      const double mean = s / double(n);  // n == 0: NaN, like an empty mean
      double ss = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double d = double(v[i]) - mean;
        ss += d * d;
      }
      const double rstd = 1.0 / std::sqrt(ss / double(n) + eps);
      const C mf = C(mean), rf = C(rstd);
      for (std::int64_t i = 0; i < n; ++i)
        v[i] = (v[i] - mf) * rf * wf[std::size_t(i)] + bf[std::size_t(i)];
      store_row(v, n, y.strides[1], y.data<T>() + r * y.strides[0]);
      mean_p[r * mean_out.strides[0]] = mf;
      rstd_p[r * rstd_out.strides[0]] = rf;
    }
  });
}

// Note [layer_norm's backward on the CPU]
// The composition (formulas_nn.cpp) walks [rows, n] a dozen times, one op at a time: x̂, g · w,
// two row means, the products, the weight's and bias's column sums. This kernel reads g and x
// once and writes dx once. Each row keeps x̂ and g · w in two buffers of the compute type while
// it sums mean(g · w) and mean(g · w · x̂), then dx = rstd · (g · w - mean(g · w) - x̂ ·
// mean(g · w · x̂)). The weight's (Σ g · x̂) and bias's (Σ g) gradients are column sums over the
// rows: the rows are cut into one part per thread, each part sums its own columns in double,
// and the parts are added once at the end, in a fixed order (so as many threads give the same
// bits every run).
constexpr int kSumLanes = 8;  // independent row sums, so the compiler can vectorize them

// g, x [rows, n] (x's dtype); mean, rstd [rows] (the forward's, the statistics' dtype); then
// weight [n] (x's dtype) if has_weight. Outputs dx [rows, n] (x's dtype), dweight and dbias [n]
// (the statistics' dtype).
template <typename T> void layer_norm_backward_rows(const OpCall& call) {
  using C = compute_t<T>;
  const bool has_w = call.attrs.b("has_weight");
  const TensorArg &g = call.inputs.at(0), &x = call.inputs.at(1);
  const TensorArg &mean_in = call.inputs.at(2), &rstd_in = call.inputs.at(3);
  const TensorArg* w = has_w ? &call.inputs.at(4) : nullptr;
  const TensorArg &dx = call.outputs.at(0), &dw = call.outputs.at(1), &db = call.outputs.at(2);
  for (const TensorArg* t : {&mean_in, &rstd_in, &dw, &db})
    if (t->dtype != dtype_of<C>())
      throw DTypeError(fmt::format(
          "layer_norm_backward: the cpu kernel takes the statistics and writes the parameters' "
          "gradients as {} for a {} input, got {}",
          dtype_name(dtype_of<C>()), dtype_name(x.dtype), dtype_name(t->dtype)));
  for (const TensorArg* t : {&g, &dx, w})
    if (t && t->dtype != x.dtype)
      throw DTypeError(
          fmt::format("layer_norm_backward: g, dx and the weight must be x's {}, got {}",
                      dtype_name(x.dtype), dtype_name(t->dtype)));
  if (x.ndim() != 2 || g.sizes != x.sizes || dx.sizes != x.sizes)
    throw ShapeError("layer_norm_backward: the gradient, input and output must be one [rows, n]");
  const std::int64_t rows = x.sizes[0], n = x.sizes[1];
  const auto un = static_cast<std::size_t>(n);
  if (mean_in.numel() != rows || rstd_in.numel() != rows || dw.numel() != n || db.numel() != n ||
      (w && w->numel() != n))
    throw ShapeError(
        fmt::format("layer_norm_backward: mean and rstd must have {} elements and the weight and "
                    "the parameters' gradients {}",
                    rows, n));
  std::vector<C> wf(un, C(1));
  if (w) load_row(w->data<T>(), n, w->strides[0], wf.data());
  const C* mean_p = mean_in.data<C>();
  const C* rstd_p = rstd_in.data<C>();
  const std::int64_t parts =
      rows == 0 ? 0
                : std::clamp<std::int64_t>(rows * n / kParallelGrain, 1,
                                           std::min<std::int64_t>(omp_get_max_threads(), rows));
  std::vector<double> sums(std::size_t(parts) * 2 * un, 0.0);  // per part: Σ g x̂, then Σ g
  parallel_range(parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    std::vector<C> xbuf(un), gbuf(un);
    C *xh = xbuf.data(), *gh = gbuf.data();
    for (std::int64_t p = p0; p < p1; ++p) {
      double* sgx = sums.data() + std::size_t(p) * 2 * un;
      double* sg = sgx + un;
      for (std::int64_t r = rows * p / parts; r < rows * (p + 1) / parts; ++r) {
        load_row(x.data<T>() + r * x.strides[0], n, x.strides[1], xh);
        load_row(g.data<T>() + r * g.strides[0], n, g.strides[1], gh);
        const C mu = mean_p[r * mean_in.strides[0]], rs = rstd_p[r * rstd_in.strides[0]];
        double s1[kSumLanes] = {}, s2[kSumLanes] = {};
        std::int64_t i = 0;
        auto step = [&](std::int64_t j, int l) {
          const C xv = (xh[j] - mu) * rs, gv = gh[j], gw = gv * wf[std::size_t(j)];
          sgx[j] += double(gv * xv);
          sg[j] += double(gv);
          xh[j] = xv;
          gh[j] = gw;
          s1[l] += double(gw);
          s2[l] += double(gw * xv);
        };
        for (; i + kSumLanes <= n; i += kSumLanes)
          for (int l = 0; l < kSumLanes; ++l) step(i + l, l);
        for (; i < n; ++i) step(i, 0);
        double t1 = 0, t2 = 0;
        for (int l = 0; l < kSumLanes; ++l) t1 += s1[l], t2 += s2[l];
        const C c1 = C(t1 / double(n)), c2 = C(t2 / double(n));
        for (std::int64_t j = 0; j < n; ++j) gh[j] = (gh[j] - c1 - xh[j] * c2) * rs;
        store_row(gh, n, dx.strides[1], dx.data<T>() + r * dx.strides[0]);
      }
    }
  });
  C* dw_p = dw.data<C>();
  C* db_p = db.data<C>();
  for (std::size_t j = 0; j < un; ++j) {
    double a = 0, b = 0;
    for (std::int64_t p = 0; p < parts; ++p) {
      a += sums[std::size_t(p) * 2 * un + j];
      b += sums[std::size_t(p) * 2 * un + un + j];
    }
    dw_p[std::int64_t(j) * dw.strides[0]] = C(a);
    db_p[std::int64_t(j) * db.strides[0]] = C(b);
  }
}

}  // namespace

void add_nn_kernels(KernelTable& table) {
  table.emplace_back(OpId::logsumexp, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "logsumexp", logsumexp_rows<scalar_t>(c));
  });
  table.emplace_back(OpId::softmax, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "softmax", (softmax_rows<scalar_t, false>(c)));
  });
  table.emplace_back(OpId::log_softmax, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "log_softmax", (softmax_rows<scalar_t, true>(c)));
  });
  table.emplace_back(OpId::layer_norm, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "layer_norm", layer_norm_rows<scalar_t>(c));
  });
  table.emplace_back(OpId::layer_norm_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(1).dtype, "layer_norm_backward",
                            layer_norm_backward_rows<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
