// runtime/cpu/cpu_kernels_nn.cpp — softmax, log_softmax, layer_norm and its backward, and the fused
// logsumexp on the CPU (docs/kernel-contract.md). Each row is loaded into a buffer of the compute
// type (float, widening f16/bf16; double for f64), gathering a strided row, computed there, and
// stored; rows are split over threads. softmax's sums accumulate in double, layer_norm's in
// float lanes added into double (Note [Lane sums]).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_clones.hpp"  // FERRY_CPU_CLONES on the layer_norm row loops
#include "cpu/cpu_lane_sums.hpp"
#include "cpu/cpu_loops.hpp"
#include "cpu/cpu_vector_math.hpp"
#include "ferry/kit/layer_norm_args.hpp"

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

// v[i] = exp(v[i] - m) over a row: through glibc's libmvec a vector at a time where the
// build found it (Note [CPU vector math]; its expf is within a few ulps of the scalar one,
// which the conformance suite's threshold for the composition allows), else one at a time.
template <typename C> void exp_shifted(C* v, std::int64_t n, C m) {
  std::int64_t i = 0;
#ifdef FERRY_HAVE_LIBMVEC
  if constexpr (std::is_same_v<C, float>) i = vector_exp_shifted(v, n, m);
#endif
  for (; i < n; ++i) v[i] = std::exp(v[i] - m);
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
    // log_softmax keeps the row and takes its exps beside it.
    std::vector<C> buf(static_cast<std::size_t>(kLog ? 2 * n : n));
    C* v = buf.data();
    for (std::int64_t r = begin; r < end; ++r) {
      load_row(xb + row_offset(x, r), n, xs, v);
      C m = -std::numeric_limits<C>::infinity();
      for (std::int64_t i = 0; i < n; ++i) m = (v[i] > m || v[i] != v[i]) ? v[i] : m;
      double sum = 0;
      if constexpr (kLog) {
        C* e = v + n;
        std::copy(v, v + n, e);
        exp_shifted(e, n, m);
        for (std::int64_t i = 0; i < n; ++i) sum += double(e[i]);
        // (x - max) - log(sum), in that order: folding max + log(sum) into one
        // value first would round away log(sum) when max is large.
        const C log_sum = C(std::log(sum));
        for (std::int64_t i = 0; i < n; ++i) v[i] = (v[i] - m) - log_sum;
      } else {
        exp_shifted(v, n, m);
        for (std::int64_t i = 0; i < n; ++i) sum += double(v[i]);
        const C inv = C(1.0 / sum);
        for (std::int64_t i = 0; i < n; ++i) v[i] *= inv;
      }
      store_row(v, n, ys, yb + row_offset(y, r));
    }
  });
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

// The forward's operands, as one thread's range of rows reads them.
template <typename T> struct LayerNormRows {
  using C = compute_t<T>;
  const TensorArg &x, &y;
  const C *w, *b;  // the parameters widened to C: ones and zeros where there are none
  C *mean, *rstd;  // in C: f32, or f64 for an f64 x
  std::int64_t mean_s, rstd_s, n;
  double eps;
};

// Rows [r0, r1) of y = (x - mean) * rstd * weight + bias. The mean and the biased variance
// are two passes of float lanes over the row in `v` (Note [Lane sums]); the second pass,
// over x - mean, stays accurate when the mean is large against the spread.
template <typename T> FERRY_CPU_CLONES void layer_norm_row_range(const LayerNormRows<T>& a,
                                                                 std::int64_t r0, std::int64_t r1,
                                                                 compute_t<T>* v) {
  using C = compute_t<T>;
  const std::int64_t n = a.n;
  for (std::int64_t r = r0; r < r1; ++r) {
    load_row(a.x.template data<T>() + r * a.x.strides[0], n, a.x.strides[1], v);
    const double mean =
        lane_sums<C, 1>(n, [&](std::int64_t i) { return std::array<C, 1>{v[i]}; })[0] /
        double(n);  // n == 0: NaN, like an empty mean
    const C mf = C(mean);
    const double ss = lane_sums<C, 1>(n, [&](std::int64_t i) {
      const C d = v[i] - mf;
      return std::array<C, 1>{d * d};
    })[0];
    const C rf = C(1.0 / std::sqrt(ss / double(n) + a.eps));
    for (std::int64_t i = 0; i < n; ++i) v[i] = (v[i] - mf) * rf * a.w[i] + a.b[i];
    store_row(v, n, a.y.strides[1], a.y.template data<T>() + r * a.y.strides[0]);
    a.mean[r * a.mean_s] = mf;
    a.rstd[r * a.rstd_s] = rf;
  }
}

// y = (x - mean) * rstd * weight + bias over each row of [rows, N]; the variance is biased.
// mean and rstd are written in the compute type: f32, or f64 for an f64 x.
template <typename T> void layer_norm_rows(const OpCall& call) {
  using C = compute_t<T>;
  const bool has_w = call.attrs.b("has_weight"), has_b = call.attrs.b("has_bias");
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
  const LayerNormRows<T> a{x,
                           y,
                           wf.data(),
                           bf.data(),
                           mean_out.data<C>(),
                           rstd_out.data<C>(),
                           mean_out.strides[0],
                           rstd_out.strides[0],
                           n,
                           call.attrs.f("eps")};
  parallel_rows(rows, n, [&](std::int64_t begin, std::int64_t end) {
    std::vector<C> buf(static_cast<std::size_t>(n));
    layer_norm_row_range<T>(a, begin, end, buf.data());
  });
}

// Note [layer_norm's backward on the CPU]
// The composition (formulas_nn.cpp) walks [rows, n] a dozen times, one op at a time: x̂, g · w,
// two row means, the products, the weight's and bias's column sums. This kernel reads g and x
// once and writes dx once. Each row keeps x̂ and g · w in two buffers of the compute type while
// it sums mean(g · w) and mean(g · w · x̂) in lanes (Note [Lane sums]), then dx = rstd · (g · w
// - mean(g · w) - x̂ · mean(g · w · x̂)). The weight's (Σ g · x̂) and bias's (Σ g) gradients are
// column sums over the rows: the rows are cut into one part per thread; each part sums its
// columns over kColumnBlock rows in the compute type, then adds them into its double sums, and
// the parts are added once at the end, in a fixed order (so as many threads give the same bits
// every run).
constexpr std::int64_t kColumnBlock = 32;

// One part's rows [r0, r1) of the backward (operands `o`, the weight widened to C in `wf`,
// ones where there is none): dx, and the part's column sums sgx (Σ g x̂) and sg (Σ g), in
// double. xh, gh and the column blocks cgx, cg are n elements each.
template <typename T> FERRY_CPU_CLONES void layer_norm_backward_part(
    const LayerNormGradOperands& o, const compute_t<T>* __restrict wf, std::int64_t r0,
    std::int64_t r1, compute_t<T>* __restrict xh, compute_t<T>* __restrict gh,
    compute_t<T>* __restrict cgx, compute_t<T>* __restrict cg, double* __restrict sgx,
    double* __restrict sg) {
  using C = compute_t<T>;
  const std::int64_t n = o.n;
  const C* mean = o.mean.template data<C>();
  const C* rstd = o.rstd.template data<C>();
  for (std::int64_t j = 0; j < n; ++j) cgx[j] = cg[j] = C(0);
  for (std::int64_t r = r0; r < r1; ++r) {
    load_row(o.x.template data<T>() + r * o.x.strides[0], n, o.x.strides[1], xh);
    load_row(o.g.template data<T>() + r * o.g.strides[0], n, o.g.strides[1], gh);
    const C mu = mean[r * o.mean.strides[0]], rs = rstd[r * o.rstd.strides[0]];
    const auto s = lane_sums<C, 2>(n, [&](std::int64_t j) {
      const C xv = (xh[j] - mu) * rs, gv = gh[j], gw = gv * wf[j];
      cgx[j] += gv * xv;
      cg[j] += gv;
      xh[j] = xv;
      gh[j] = gw;
      return std::array<C, 2>{gw, gw * xv};
    });
    const C c1 = C(s[0] / double(n)), c2 = C(s[1] / double(n));
    for (std::int64_t j = 0; j < n; ++j) gh[j] = (gh[j] - c1 - xh[j] * c2) * rs;
    store_row(gh, n, o.dx.strides[1], o.dx.template data<T>() + r * o.dx.strides[0]);
    if ((r - r0) % kColumnBlock == kColumnBlock - 1 || r + 1 == r1)  // the block into double
      for (std::int64_t j = 0; j < n; ++j) {
        sgx[j] += double(cgx[j]);
        sg[j] += double(cg[j]);
        cgx[j] = cg[j] = C(0);
      }
  }
}

// The operands: ferry/kit/layer_norm_args.hpp.
template <typename T> void layer_norm_backward_rows(const OpCall& call) {
  using C = compute_t<T>;
  const LayerNormGradOperands o = layer_norm_backward_args(call, "cpu");
  const std::int64_t rows = o.rows, n = o.n;
  const auto un = static_cast<std::size_t>(n);
  std::vector<C> wf(un, C(1));
  if (o.weight) load_row(o.weight->data<T>(), n, o.weight->strides[0], wf.data());
  const std::int64_t parts =
      rows == 0 ? 0
                : std::clamp<std::int64_t>(rows * n / kParallelGrain, 1,
                                           std::min<std::int64_t>(omp_get_max_threads(), rows));
  std::vector<double> sums(std::size_t(parts) * 2 * un, 0.0);  // per part: Σ g x̂, then Σ g
  parallel_range(parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    std::vector<C> scratch(4 * un);  // x̂, g · w, and the two column blocks
    for (std::int64_t p = p0; p < p1; ++p) {
      double* sgx = sums.data() + std::size_t(p) * 2 * un;
      layer_norm_backward_part<T>(o, wf.data(), rows * p / parts, rows * (p + 1) / parts,
                                  scratch.data(), scratch.data() + un, scratch.data() + 2 * un,
                                  scratch.data() + 3 * un, sgx, sgx + un);
    }
  });
  C* dw_p = o.dweight.data<C>();
  C* db_p = o.dbias.data<C>();
  for (std::size_t j = 0; j < un; ++j) {
    double sa = 0, sb = 0;
    for (std::int64_t p = 0; p < parts; ++p) {
      sa += sums[std::size_t(p) * 2 * un + j];
      sb += sums[std::size_t(p) * 2 * un + un + j];
    }
    dw_p[std::int64_t(j) * o.dweight.strides[0]] = C(sa);
    db_p[std::int64_t(j) * o.dbias.strides[0]] = C(sb);
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
