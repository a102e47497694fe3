// runtime/cpu/cpu_kernels_conv.cpp — the CPU's convolution kernels (conv1d/2d/3d and their
// backward_input / backward_weight rows) in f32 and f64, and f16 and bf16 widened to f32
// (run_widened): oneDNN's primitives where the
// library loads and takes the case (cpu/onednn.hpp), else ferry's own im2col + BLAS path
// below. Note [CPU convolution] says which runs where and why.
//
// Note [CPU convolution]
// The im2col path lays each sample's windows out as [C/groups * K, L] columns (one row per
// channel and kernel tap, zeros where a tap falls in the padding) and multiplies them by the
// weight, [out/groups, C/groups * K], with OpenBLAS's gemm; its backward multiplies by the
// transposed weight and adds the columns back (col2im) for the input, and multiplies the
// output's gradient by the transposed columns for the weight. A 1x1, stride-1, unpadded
// convolution needs no columns: the input is its own.
//
// Which runs where, by measurement (ferry-bench's conv/ rows at ResNet-18's shapes, batch 32,
// f32, 2 cores with AVX-512, oneDNN 2.6.3 beside FERRY_ONEDNN=0, 2026-11-26): oneDNN's
// direct kernels are 3 to 7x faster than im2col + OpenBLAS on the 3x3 and 7x7 layers
// (layer3 3x3 forward: 111 against 25 GFLOP/s; forward and backward: 137 against 26), so
// they take every convolution with a larger kernel wherever libdnnl loads; on the 1x1
// stride-2 downsample, where oneDNN's cost is reordering the input into its blocked layout
// and back, the im2col path is faster (forward 19 against 13 GFLOP/s, with backward 19
// against 12.5), so 1x1 kernels always take it. The im2col path is what every machine has.
// Measured again once it split the batch over threads (Note [CPU convolution's threads]), on
// a 2-core AMD EPYC with AVX2 (2026-11-29): im2col 70-78 GFLOP/s forward and 67-70 with
// backward, oneDNN 76-91 and 75-83, within that VM's noise of each other, so 1x1 stays here.
// Channels-last calls (attributes channels_last and weight_channels_last) take oneDNN's nhwc
// primitives for every kernel size, 1x1 included: nothing is reordered but the weight, and on
// the 1x1/2 downsample they ran at 350 GFLOP/s forward against 230 for NCHW's im2col path
// (2026-12-02, AVX-512 VM). Without oneDNN, or in f64, the im2col path transposes the
// activations (and a channels-last weight) into its own order and the results back.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_blas.hpp"
#include "cpu/cpu_loops.hpp"
#include "cpu/onednn.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/conv_ops.hpp"
#include "ferry/profiler.hpp"
#include "parallel.hpp"

namespace ferry::cpu {
namespace {

// A convolution's sizes, the spatial dims padded to three (leading 1s).
struct Geometry {
  std::int64_t N, C, OC, G, Cg, OCg, K, L, area;
  std::int64_t in[3], k[3], out[3], s[3], lo[3], d[3];
};

Geometry geometry(const OpCall& c, const TensorArg& x, const TensorArg& w, const TensorArg& y) {
  const auto& stride = c.attrs.ints("stride");
  const auto& lo = c.attrs.ints("padding_lo");
  const auto& dil = c.attrs.ints("dilation");
  const int n = x.ndim() - 2;
  Geometry g{};
  g.N = x.sizes[0], g.C = x.sizes[1], g.OC = w.sizes[0], g.G = c.attrs.i("groups");
  g.Cg = g.C / g.G, g.OCg = g.OC / g.G, g.K = 1, g.L = 1, g.area = 1;
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - n);  // the input's spatial dim, or < 0 for a padded one
    const bool real = j >= 0;
    g.in[i] = real ? x.sizes[std::size_t(j + 2)] : 1;
    g.k[i] = real ? w.sizes[std::size_t(j + 2)] : 1;
    g.out[i] = real ? y.sizes[std::size_t(j + 2)] : 1;
    g.s[i] = real ? stride[std::size_t(j)] : 1;
    g.lo[i] = real ? lo[std::size_t(j)] : 0;
    g.d[i] = real ? dil[std::size_t(j)] : 1;
    g.K *= g.k[i], g.L *= g.out[i], g.area *= g.in[i];
  }
  return g;
}

bool needs_columns(const Geometry& g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.lo[i] != 0) return true;
  return false;
}

// cols [Cg * K, L] = the windows of channels [0, Cg) of x (one sample's group, [Cg, area]).
template <typename T> void im2col(const Geometry& g, const T* x, T* cols) {
  detail::parallel_range(g.Cg * g.K, 4, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t c = row / g.K, kk = row % g.K;
      const std::int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
      const T* xc = x + c * g.area;
      T* out = cols + row * g.L;
      for (std::int64_t od = 0; od < g.out[0]; ++od) {
        const std::int64_t id = od * g.s[0] - g.lo[0] + kd * g.d[0];
        for (std::int64_t oh = 0; oh < g.out[1]; ++oh, out += g.out[2]) {
          const std::int64_t ih = oh * g.s[1] - g.lo[1] + kh * g.d[1];
          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
            std::fill(out, out + g.out[2], T(0));
            continue;
          }
          const T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
          for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
            const std::int64_t iw = ow * g.s[2] - g.lo[2] + kw * g.d[2];
            out[ow] = iw >= 0 && iw < g.in[2] ? xrow[iw] : T(0);
          }
        }
      }
    }
  });
}

// im2col's adjoint: x [Cg, area] += the columns added back to the elements they read. One
// thread per channel, so no two threads write one element.
template <typename T> void col2im(const Geometry& g, const T* cols, T* x) {
  detail::parallel_range(g.Cg, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c)
      for (std::int64_t kk = 0; kk < g.K; ++kk) {
        const std::int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
        T* xc = x + c * g.area;
        const T* in = cols + (c * g.K + kk) * g.L;
        for (std::int64_t od = 0; od < g.out[0]; ++od) {
          const std::int64_t id = od * g.s[0] - g.lo[0] + kd * g.d[0];
          for (std::int64_t oh = 0; oh < g.out[1]; ++oh, in += g.out[2]) {
            const std::int64_t ih = oh * g.s[1] - g.lo[1] + kh * g.d[1];
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) continue;
            T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
            for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
              const std::int64_t iw = ow * g.s[2] - g.lo[2] + kw * g.d[2];
              if (iw >= 0 && iw < g.in[2]) xrow[iw] += in[ow];
            }
          }
        }
      }
  });
}

// The layouts of the call's activations (x, y and their gradients) and of its weight (or the
// weight's gradient), as the attributes say (DeviceCapabilities::channels_last_cnn;
// docs/kernel-contract.md): weight_channels_last comes only with channels_last.
struct Layouts {
  MemoryFormat activations, weight;
};
Layouts layouts(const OpCall& c) {
  const MemoryFormat a = activation_format(c.attrs, c.inputs.at(0).ndim());
  const bool w = c.attrs.has("weight_channels_last") && c.attrs.b("weight_channels_last");
  return {a, w ? a : MemoryFormat::contiguous};
}

// The activations and the weight dense in the layouts the attributes say; the bias contiguous.
void check_layouts(const OpCall& c, const Layouts& l) {
  const bool bwd_w = c.op == OpId::conv_backward_weight;
  const auto check = [&](const TensorArg& t, MemoryFormat f) {
    if (!t.is_contiguous(f))
      throw Error(fmt::format("{}: the cpu kernel takes {} activations and a {} weight, dense",
                              c.name(), memory_format_name(l.activations),
                              memory_format_name(l.weight)));
  };
  const MemoryFormat none = MemoryFormat::contiguous;
  // x or gy first; then the weight, or gy for conv_backward_weight; the bias.
  for (std::size_t i = 0; i < c.inputs.size(); ++i)
    check(c.inputs[i], i == 0 ? l.activations : i == 1 ? (bwd_w ? l.activations : l.weight) : none);
  // y or gx; or the weight's and the bias's gradients.
  for (std::size_t i = 0; i < c.outputs.size(); ++i)
    check(c.outputs[i], i == 0 ? (bwd_w ? l.weight : l.activations) : none);
}

// dst [N, cols, rows] = src [N, rows, cols] transposed sample by sample: a channels-last
// activation ([N, area, C]) into the im2col path's order ([N, C, area]) and back.
template <typename T>
void transpose_samples(const T* src, T* dst, std::int64_t N, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t B = 32;  // tiles of B x B, read and written a cache line at a time
  const std::int64_t row_tiles = (rows + B - 1) / B;
  detail::parallel_range(N * row_tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const std::int64_t n = t / row_tiles, r0 = t % row_tiles * B, r1 = std::min(rows, r0 + B);
      const T* s = src + n * rows * cols;
      T* d = dst + n * rows * cols;
      for (std::int64_t c0 = 0; c0 < cols; c0 += B)
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < std::min(cols, c0 + B); ++c)
            d[c * rows + r] = s[r * cols + c];
    }
  });
}

// Note [CPU convolution's threads]
// A convolution's GEMMs are one per sample (and group), each small next to the batch: at
// ResNet-18's 1x1/2 downsample, [128, 64] x [64, 784], about 13 MFLOP. Threading each of
// them inside OpenBLAS paid a fork and join per sample and left the im2col between them
// to one thread's worth of bandwidth, so where the batch divides well among the threads the
// samples are split over them instead, as PyTorch's slow_conv2d and oneDNN's gemm
// convolution do: each thread walks its own samples with its own columns buffer, and its
// gemm calls run single-threaded (OpenBLAS's OpenMP build does inside a parallel region).
// The weight's gradient sums over samples, so each thread but the first adds into its own
// copy, and the copies are summed once at the end. With fewer samples than that (a batch of
// one, say), the samples go one after another with the gemm and im2col threaded within.
//
// body(n, cols, part) for every sample n: cols is a buffer of `cols_size` elements of the
// thread's own, part the thread's index (0 when not split).
template <typename T, typename Body>
void for_each_sample(const Geometry& g, std::int64_t cols_size, int parts, const Body& body) {
  std::vector<T> cols(std::size_t(cols_size * parts));
  if (parts == 1) {
    for (std::int64_t n = 0; n < g.N; ++n) body(n, cols.data(), 0);
    return;
  }
#pragma omp parallel for num_threads(parts) schedule(static)
  for (std::int64_t n = 0; n < g.N; ++n) {
    const int part = omp_get_thread_num();
    body(n, cols.data() + part * cols_size, part);
  }
}

// How many threads split the batch: all of them where each gets the same number of samples
// (or enough that one more does not matter) and their scratch, `part_bytes` each (columns and
// a copy of the weight's gradient), stays within 256 MiB; else 1, as before the split (a
// 64-thread machine's copies of an f64 3x3 layer's columns would take gigabytes).
int sample_parts(const Geometry& g, std::int64_t part_bytes) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool even = g.N % threads == 0 || g.N >= 4 * threads;
  return threads > 1 && even && part_bytes * threads <= (std::int64_t(256) << 20) ? threads : 1;
}

// y [N, OC, *out] = conv(x [N, C, *in], w [OC, Cg, *k]) (+ bias [OC], where b is set).
template <typename T> void forward(const Geometry& g, const T* x, const T* w, const T* b, T* y) {
  const bool columns = needs_columns(g);
  const std::int64_t cols_size = columns ? g.Cg * g.K * g.L : 0;
  for_each_sample<T>(g, cols_size, sample_parts(g, cols_size * std::int64_t(sizeof(T))),
                     [&](std::int64_t n, T* cols, int) {
                       for (std::int64_t gi = 0; gi < g.G; ++gi) {
                         const T* xg = x + (n * g.C + gi * g.Cg) * g.area;
                         if (columns) im2col(g, xg, cols);
                         gemm(false, false, g.OCg, g.L, g.Cg * g.K, w + gi * g.OCg * g.Cg * g.K,
                              g.Cg * g.K, columns ? cols : xg, g.L, T(0),
                              y + (n * g.OC + gi * g.OCg) * g.L, g.L);
                       }
                       // The bias while the sample's output is still in cache.
                       for (std::int64_t o = 0; b && o < g.OC; ++o) {
                         T* row = y + (n * g.OC + o) * g.L;
                         for (std::int64_t l = 0; l < g.L; ++l) row[l] += b[o];
                       }
                     });
}

// gx [N, C, *in] from gy [N, OC, *out] and w.
template <typename T> void backward_input(const Geometry& g, const T* gy, const T* w, T* gx) {
  const bool columns = needs_columns(g);
  const std::int64_t cols_size = columns ? g.Cg * g.K * g.L : 0;
  for_each_sample<T>(
      g, cols_size, sample_parts(g, cols_size * std::int64_t(sizeof(T))),
      [&](std::int64_t n, T* cols, int) {
        if (columns) std::memset(gx + n * g.C * g.area, 0, std::size_t(g.C * g.area) * sizeof(T));
        for (std::int64_t gi = 0; gi < g.G; ++gi) {
          T* xg = gx + (n * g.C + gi * g.Cg) * g.area;
          gemm(true, false, g.Cg * g.K, g.L, g.OCg, w + gi * g.OCg * g.Cg * g.K, g.Cg * g.K,
               gy + (n * g.OC + gi * g.OCg) * g.L, g.L, T(0), columns ? cols : xg, g.L);
          if (columns) col2im(g, cols, xg);
        }
      });
}

// gw [OC, Cg, *k] (and gb [OC], where gb is set) from x and gy.
template <typename T>
void backward_weight(const Geometry& g, const T* x, const T* gy, T* gw, T* gb) {
  const bool columns = needs_columns(g);
  const std::int64_t wsize = g.OC * g.Cg * g.K, cols_size = columns ? g.Cg * g.K * g.L : 0;
  const int parts = sample_parts(g, (cols_size + wsize) * std::int64_t(sizeof(T)));
  // Part 0 sums into gw itself, each other part into its own copy (Note [CPU convolution's
  // threads]).
  std::vector<T> copies(std::size_t(wsize * (parts - 1)), T(0));
  std::memset(gw, 0, std::size_t(wsize) * sizeof(T));
  for_each_sample<T>(g, cols_size, parts, [&](std::int64_t n, T* cols, int part) {
    T* sum = part == 0 ? gw : copies.data() + (part - 1) * wsize;
    for (std::int64_t gi = 0; gi < g.G; ++gi) {
      const T* xg = x + (n * g.C + gi * g.Cg) * g.area;
      if (columns) im2col(g, xg, cols);
      gemm(false, true, g.OCg, g.Cg * g.K, g.L, gy + (n * g.OC + gi * g.OCg) * g.L, g.L,
           columns ? cols : xg, g.L, T(1), sum + gi * g.OCg * g.Cg * g.K, g.Cg * g.K);
    }
  });
  if (parts > 1)
    detail::parallel_range(wsize, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
      T* out = gw;
      for (int p = 1; p < parts; ++p) {
        const T* copy = copies.data() + (p - 1) * wsize;
        for (std::int64_t i = begin; i < end; ++i) out[i] += copy[i];
      }
    });
  if (gb) {
    detail::parallel_range(g.OC, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o) {
        double s = 0;
        for (std::int64_t n = 0; n < g.N; ++n) {
          const T* row = gy + (n * g.OC + o) * g.L;
          for (std::int64_t l = 0; l < g.L; ++l) s += double(row[l]);
        }
        gb[o] = T(s);
      }
    });
  }
}

// A 1x1 kernel: its columns are the input itself, or a strided pick of it.
bool pointwise(const OpCall& c) {
  const TensorArg& w = c.op == OpId::conv_backward_weight ? c.outputs.at(0) : c.inputs.at(1);
  for (std::size_t i = 2; i < w.sizes.size(); ++i)
    if (w.sizes[i] != 1) return false;
  return true;
}

template <typename T> void run(const OpCall& c) {
  const Layouts l = layouts(c);
  check_layouts(c, l);
  const bool cl = l.activations != MemoryFormat::contiguous;
  const bool wcl = l.weight != MemoryFormat::contiguous;
  if constexpr (std::is_same_v<T, float>)
    if ((cl || !pointwise(c)) && onednn::run(c, cl, wcl))
      return profiler::note_kernel(cl ? "oneDNN, channels-last" : "oneDNN");
  profiler::note_kernel(cl || wcl ? "im2col + BLAS (channels-last, transposed)" : "im2col + BLAS");
  const bool bwd_in = c.op == OpId::conv_backward_input, bwd_w = c.op == OpId::conv_backward_weight;
  const TensorArg& x = bwd_in ? c.outputs.at(0) : c.inputs.at(0);
  const TensorArg& w = bwd_w ? c.outputs.at(0) : c.inputs.at(1);
  const TensorArg& y = bwd_in ? c.inputs.at(0) : bwd_w ? c.inputs.at(1) : c.outputs.at(0);
  const Geometry g = geometry(c, x, w, y);
  // The im2col path computes in [N, C, *spatial] order: a channels-last call's activations are
  // transposed into it, and its results back.
  std::vector<T> xs, ys;
  const auto first = [&](const TensorArg& t, std::vector<T>& buf, std::int64_t area,
                         std::int64_t channels, bool read) {
    if (!cl) return t.data<T>();
    buf.resize(std::size_t(g.N * channels * area));
    if (read) transpose_samples(t.data<T>(), buf.data(), g.N, area, channels);
    return buf.data();
  };
  const auto back = [&](const std::vector<T>& buf, const TensorArg& t, std::int64_t area,
                        std::int64_t channels) {
    if (cl) transpose_samples(buf.data(), t.data<T>(), g.N, channels, area);
  };
  // A channels-last weight ([OC, *k, Cg] in memory) likewise, as [OC, Cg, *k].
  std::vector<T> ws;
  const auto weight = [&](bool read) {
    if (!wcl) return w.data<T>();
    ws.resize(std::size_t(g.OC * g.Cg * g.K));
    if (read) transpose_samples(w.data<T>(), ws.data(), g.OC, g.K, g.Cg);
    return ws.data();
  };
  const bool bias = !bwd_in && c.attrs.b("has_bias");
  if (bwd_in) {
    const T* gy = first(y, ys, g.L, g.OC, true);
    backward_input<T>(g, gy, weight(true), first(x, xs, g.area, g.C, false));
    back(xs, x, g.area, g.C);
  } else if (bwd_w) {
    backward_weight<T>(g, first(x, xs, g.area, g.C, true), first(y, ys, g.L, g.OC, true),
                       weight(false), bias ? c.outputs.at(1).data<T>() : nullptr);
    if (wcl) transpose_samples(ws.data(), w.data<T>(), g.OC, g.Cg, g.K);
  } else {
    const T* xp = first(x, xs, g.area, g.C, true);
    forward<T>(g, xp, weight(true), bias ? c.inputs.at(2).data<T>() : nullptr,
               first(y, ys, g.L, g.OC, false));
    back(ys, y, g.L, g.OC);
  }
}

// Host memory for a widened operand (run_widened): an input's is filled by the widening
// loop, so only outputs start at zero (a bias gradient the call does not ask for stays so).
class FloatScratch final : public Buffer {
 public:
  FloatScratch(std::int64_t n, bool zeroed)
      : Buffer(std::size_t(n) * sizeof(float)),
        v_(zeroed ? std::make_unique<float[]>(std::size_t(n))
                  : std::make_unique_for_overwrite<float[]>(std::size_t(n))) {}
  void* host_ptr() const override { return v_.get(); }

 private:
  std::unique_ptr<float[]> v_;
};

// f16 and bf16: every operand widened to f32, the f32 kernel (oneDNN or im2col + sgemm), each
// result rounded once, as PyTorch's CPU convolutions accumulate 16-bit operands in f32. The
// composition this replaces (unfold, matmul, fold) rounded the input's gradient twice: its
// columns, then their sums (2.5 times the error, 2026-12-04).
template <typename H> void run_widened(const OpCall& c) {
  check_layouts(c, layouts(c));  // dense: a view's elements fill [offset, offset + numel)
  OpCall wide = c;
  std::vector<std::unique_ptr<FloatScratch>> scratch;
  const auto widen = [&](TensorArg& t, bool read) {
    const std::int64_t n = t.numel();
    scratch.push_back(std::make_unique<FloatScratch>(n, !read));
    float* to = static_cast<float*>(scratch.back()->host_ptr());
    if (read) {
      const H* from = t.data<H>();
      detail::parallel_range(n, 1 << 15, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) to[i] = float(from[i]);
      });
    }
    t.buffer = scratch.back().get();
    t.offset = 0;
    t.dtype = DType::f32;
  };
  for (TensorArg& t : wide.inputs) widen(t, true);
  for (TensorArg& t : wide.outputs) widen(t, false);
  run<float>(wide);
  for (std::size_t k = 0; k < c.outputs.size(); ++k) {
    const float* from = wide.outputs[k].data<float>();
    H* to = c.outputs[k].data<H>();
    detail::parallel_range(c.outputs[k].numel(), 1 << 15, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) to[i] = H(from[i]);
    });
  }
}

void dispatch(const OpCall& c) {
  switch (c.inputs.at(0).dtype) {
    case DType::f32:
      return run<float>(c);
    case DType::f64:
      return run<double>(c);
    case DType::f16:
      return run_widened<Half>(c);
    case DType::bf16:
      return run_widened<BFloat16>(c);
    default:
      throw UnsupportedError(
          fmt::format("{}: the cpu kernel computes f32, f64, f16 and bf16, not {}", c.name(),
                      dtype_name(c.inputs.at(0).dtype)));
  }
}

}  // namespace

bool conv_supports(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

void add_conv_kernels(KernelTable& table) {
  for (OpId op : kConvKernelOps)
    table.emplace_back(op, [](DeviceImpl&, const OpCall& c) { dispatch(c); });
}

}  // namespace ferry::cpu
