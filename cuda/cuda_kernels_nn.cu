// cuda/cuda_kernels_nn.cu — softmax, log_softmax and layer_norm on CUDA
// (docs/kernel-contract.md), for f32, f16, bf16 and f64 (computed in float, or
// in double for f64, sums in double, as the CPU kernels in
// runtime/cpu/cpu_kernels_nn.cpp do).
//
// Every row goes to a thread, a warp or a block (Note [Row groups]) and is
// read in three passes: softmax takes the maximum, then the sum of
// exp(x - max), then writes; layer_norm takes the mean, then the sum of
// squared deviations, then writes.
//
// Note [Row cache]
// A block's row of up to cached_row<C>() elements is kept in shared memory in
// the compute type C (float, double for f64) by the first pass, so the row is
// read from global memory once and the op moves the fewest bytes it can (one
// read, one write): three passes over global memory ran softmax at 0.42 of
// copy bandwidth on an H200, the later passes served from L2. Each thread
// touches only its own elements of the cache (i = lane, lane + lanes, ...), so
// the cache needs no barrier of its own. softmax keeps exp(x - max) there
// after the second pass, so exp runs once per element. Rows of a warp or a
// thread read global memory each pass (short rows stay in L1), and longer rows
// too. The cache is a budget in bytes, kRowCacheBytes: a block may use 48 KiB
// of shared memory without opting in, static and dynamic together (a launch
// asking for more fails), and the block reductions' scratch (Note [Row
// groups]) is static, so the budget leaves it 1 KiB of the 48: 12032 floats,
// 6016 doubles.
//
// Note [Softmax rows]
// The core moves the softmax dim last by transposing the input and the output
// alike, so both are strided views: the row is the last dim (strides xs, ys)
// and the other dims index rows. Those are coalesced for x and y together
// into one offset calculator (row index -> both rows' first elements). When
// the rows themselves are strided while neighbouring rows are adjacent in
// memory (softmax over dim 0 of a row-major matrix), a warp per row would
// touch 32 cache lines a load; there a thread takes a row, so the warp's loads
// run along contiguous memory instead.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "cuda_groups.cuh"
#include "cuda_loops.cuh"

namespace ferry::cuda {
namespace {

constexpr std::int64_t kWarpRow = 1024;     // rows up to this long get a warp, longer a block
constexpr std::int64_t kLongRow = 8192;     // rows beyond this get a block of 1024 threads
constexpr std::int64_t kThreadRows = 8192;  // rows a thread-per-row launch needs to fill a GPU
constexpr int kMaxBlock = 1024;
constexpr std::size_t kRowCacheBytes = 47 * 1024;  // Note [Row cache]
// The longest row the cache holds, in elements of the compute type C.
template <typename C> constexpr std::int64_t cached_row() {
  return std::int64_t(kRowCacheBytes / sizeof(C));
}
// Independent loads a thread issues before using them in a row's first pass
// (Note [Loads in flight] in cuda_kernels_reduce.cu): a block of 256 threads
// on a 4096-wide row has 16 elements a thread, two rounds of 8.
constexpr int kLoadsInFlight = 8;

// ---- softmax ----

// kCached: the block keeps the row in dynamic shared memory (Note [Row cache]).
template <typename T, bool kLog, typename Group, typename Index, bool kCached = false>
__global__ void __launch_bounds__(kMaxBlock)
    softmax_rows(const T* x, T* y, OffsetCalc<2, Index> oc, std::int64_t rows, std::int64_t n,
                 std::int64_t xs, std::int64_t ys) {
  using C = compute_t<T>;  // float, or double for f64
  extern __shared__ __align__(16) unsigned char cache_bytes[];
  [[maybe_unused]] C* cache = reinterpret_cast<C*>(cache_bytes);
  const int lane = Group::lane(), lanes = Group::size();
  for (std::int64_t r = Group::id(); r < rows; r += Group::count()) {
    std::int64_t off[2];
    oc.get(Index(r), off);
    const T* xr = x + off[0];
    T* yr = y + off[1];
    C m = -std::numeric_limits<C>::infinity();  // a NaN stays (MaxOp)
    // kLoadsInFlight loads at a time: this pass is the one that reads global memory.
    std::int64_t i = lane;
    for (; i + (kLoadsInFlight - 1) * lanes < n; i += kLoadsInFlight * lanes) {
      C v[kLoadsInFlight];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) v[k] = C(xr[(i + k * lanes) * xs]);
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        if constexpr (kCached) cache[i + k * lanes] = v[k];
        m = MaxOp{}(m, v[k]);
      }
    }
    for (; i < n; i += lanes) {
      const C v = C(xr[i * xs]);
      if constexpr (kCached) cache[i] = v;
      m = MaxOp{}(m, v);
    }
    m = Group::reduce(m, MaxOp{}, -std::numeric_limits<C>::infinity());
    double sum = 0;
    for (std::int64_t i = lane; i < n; i += lanes) {
      const C e = std::exp((kCached ? cache[i] : C(xr[i * xs])) - m);
      if constexpr (kCached && !kLog) cache[i] = e;
      sum += double(e);
    }
    sum = Group::reduce(sum, AddOp{}, 0.0);
    if constexpr (kLog) {
      // (x - max) - log(sum), in that order: folding max + log(sum) into one
      // value first would round away log(sum) when max is large.
      const C log_sum = C(std::log(sum));
      for (std::int64_t i = lane; i < n; i += lanes)
        yr[i * ys] = T(((kCached ? cache[i] : C(xr[i * xs])) - m) - log_sum);
    } else {
      const C inv = C(1.0 / sum);
      for (std::int64_t i = lane; i < n; i += lanes)
        yr[i * ys] = T((kCached ? cache[i] : std::exp(C(xr[i * xs]) - m)) * inv);
    }
  }
}

template <typename T, bool kLog, typename Index>
void launch_softmax(CudaDevice& dev, const char* op, const TensorArg& x, const TensorArg& y,
                    const TensorArg& x_rows, const TensorArg& y_rows, std::int64_t rows,
                    std::int64_t n, std::int64_t xs, std::int64_t ys) {
  const OffsetCalc<2, Index> oc = make_offset_calc<2, Index>({&x_rows, &y_rows}, op);
  const T* xp = static_cast<const T*>(data_ptr(x));
  T* yp = static_cast<T*>(data_ptr(y));
  const int inner = oc.ndim - 1;  // Note [Softmax rows]
  const bool by_thread = xs != 1 && oc.strides[inner][0] == 1 && oc.sizes[inner] >= 32 &&
                         rows >= kThreadRows && n <= kWarpRow;
  dev.make_current();
  if (by_thread) {
    softmax_rows<T, kLog, ThreadGroup, Index>
        <<<grid_for(dev, rows, kThreads), kThreads, 0, dev.stream()>>>(xp, yp, oc, rows, n, xs, ys);
  } else if (n <= kWarpRow) {
    softmax_rows<T, kLog, WarpGroup, Index>
        <<<grid_for(dev, rows, kThreads / 32), kThreads, 0, dev.stream()>>>(xp, yp, oc, rows, n, xs,
                                                                            ys);
  } else if (n <= cached_row<compute_t<T>>()) {
    softmax_rows<T, kLog, BlockGroup, Index, true>
        <<<grid_for(dev, rows, 1), kThreads, std::size_t(n) * sizeof(compute_t<T>), dev.stream()>>>(
            xp, yp, oc, rows, n, xs, ys);
  } else {
    const int threads = n > kLongRow ? kMaxBlock : kThreads;
    softmax_rows<T, kLog, BlockGroup, Index>
        <<<grid_for(dev, rows, 1), threads, 0, dev.stream()>>>(xp, yp, oc, rows, n, xs, ys);
  }
  check_launch(dev, op);
}

template <typename T, bool kLog> void softmax(DeviceImpl& d, const OpCall& call) {
  const std::string op(call.name());
  const TensorArg& x = call.inputs.at(0);
  const TensorArg& y = call.outputs.at(0);
  if (y.dtype != x.dtype || y.sizes != x.sizes)
    throw ShapeError(op + ": the output must have the input's shape and dtype");
  if (y.numel() == 0) return;  // the core never sends these
  // A 0-d tensor is one row of one element.
  const bool scalar = x.sizes.empty();
  const std::size_t nd = scalar ? 0 : x.sizes.size() - 1;
  const std::int64_t n = scalar ? 1 : x.sizes.back();
  const std::int64_t xs = scalar ? 1 : x.strides.back(), ys = scalar ? 1 : y.strides.back();
  // The dims that index rows, as views of their own.
  TensorArg x_rows{x.buffer, x.offset, {}, {}, x.dtype}, y_rows = x_rows;
  x_rows.sizes.assign(x.sizes.begin(), x.sizes.begin() + std::ptrdiff_t(nd));
  x_rows.strides.assign(x.strides.begin(), x.strides.begin() + std::ptrdiff_t(nd));
  y_rows.sizes = x_rows.sizes;
  y_rows.strides.assign(y.strides.begin(), y.strides.begin() + std::ptrdiff_t(nd));
  const std::int64_t rows = x_rows.numel();
  CudaDevice& dev = cuda_device(d);
  if (fits_uint32(rows))
    launch_softmax<T, kLog, std::uint32_t>(dev, op.c_str(), x, y, x_rows, y_rows, rows, n, xs, ys);
  else
    launch_softmax<T, kLog, std::uint64_t>(dev, op.c_str(), x, y, x_rows, y_rows, rows, n, xs, ys);
}

// ---- layer_norm ----

struct NormShape {
  std::int64_t rows, n;
  std::int64_t xs0, xs1, ys0, ys1, ws, bs, ms, rs;  // strides of x, y, weight, bias, mean, rstd
  double eps;
};

// y = (x - mean) * rstd * weight + bias over each row, with the biased
// variance from a second pass over the row (stable when the mean is large);
// mean and rstd rounded to the compute type C (float, double for f64), as the
// CPU does, before y uses them, and written as C (f32, f64 for an f64 x). An
// absent weight is 1 and an absent bias 0, applied all the same, so that the
// arithmetic is the CPU's.
// kCached: the block keeps the row in dynamic shared memory (Note [Row cache]).
template <typename T, typename Group, bool kCached = false>
__global__ void __launch_bounds__(kMaxBlock)
    layer_norm_rows(const T* x, const T* w, const T* b, T* y, compute_t<T>* mean,
                    compute_t<T>* rstd, NormShape p) {
  using C = compute_t<T>;  // float, or double for f64
  extern __shared__ __align__(16) unsigned char cache_bytes[];
  [[maybe_unused]] C* cache = reinterpret_cast<C*>(cache_bytes);
  const int lane = Group::lane(), lanes = Group::size();
  for (std::int64_t r = Group::id(); r < p.rows; r += Group::count()) {
    const T* xr = x + r * p.xs0;
    T* yr = y + r * p.ys0;
    auto at = [&](std::int64_t i) { return kCached ? cache[i] : C(xr[i * p.xs1]); };
    double s = 0;
    std::int64_t i = lane;  // kLoadsInFlight loads at a time, as in softmax_rows
    for (; i + (kLoadsInFlight - 1) * lanes < p.n; i += kLoadsInFlight * lanes) {
      C v[kLoadsInFlight];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) v[k] = C(xr[(i + k * lanes) * p.xs1]);
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        if constexpr (kCached) cache[i + k * lanes] = v[k];
        s += double(v[k]);
      }
    }
    for (; i < p.n; i += lanes) {
      const C v = C(xr[i * p.xs1]);
      if constexpr (kCached) cache[i] = v;
      s += double(v);
    }
    s = Group::reduce(s, AddOp{}, 0.0);
    const double mu = s / double(p.n);  // n == 0: NaN, like an empty mean
    double ss = 0;
    for (std::int64_t i = lane; i < p.n; i += lanes) {
      const double dx = double(at(i)) - mu;
      ss += dx * dx;
    }
    ss = Group::reduce(ss, AddOp{}, 0.0);
    const C mf = C(mu), rf = C(1.0 / std::sqrt(ss / double(p.n) + p.eps));
    for (std::int64_t i = lane; i < p.n; i += lanes) {
      const C wv = w ? C(w[i * p.ws]) : C(1), bv = b ? C(b[i * p.bs]) : C(0);
      yr[i * p.ys1] = T((at(i) - mf) * rf * wv + bv);
    }
    if (lane == 0) {
      mean[r * p.ms] = mf;
      rstd[r * p.rs] = rf;
    }
  }
}

template <typename T> void layer_norm(DeviceImpl& d, const OpCall& call) {
  const bool has_w = call.attrs.b("has_weight"), has_b = call.attrs.b("has_bias");
  const TensorArg& x = call.inputs.at(0);
  const TensorArg* w = has_w ? &call.inputs.at(1) : nullptr;
  const TensorArg* b = has_b ? &call.inputs.at(has_w ? 2 : 1) : nullptr;
  const TensorArg &y = call.outputs.at(0), &mean = call.outputs.at(1), &rstd = call.outputs.at(2);
  if (x.ndim() != 2 || y.sizes != x.sizes || y.dtype != x.dtype)
    throw ShapeError("layer_norm: the cuda kernel takes x and y of one shape [rows, N]");
  using C = compute_t<T>;  // mean and rstd: f32, or f64 for an f64 x
  if (mean.dtype != dtype_of<C>() || rstd.dtype != dtype_of<C>())
    throw DTypeError("layer_norm: the cuda kernel writes mean and rstd as " +
                     std::string(dtype_name(dtype_of<C>())) + " for a " +
                     std::string(dtype_name(x.dtype)) + " input, got " +
                     std::string(dtype_name(mean.dtype)) + " and " +
                     std::string(dtype_name(rstd.dtype)));
  NormShape p{};
  p.rows = x.sizes[0];
  p.n = x.sizes[1];
  if (mean.numel() != p.rows || rstd.numel() != p.rows || (w && w->numel() != p.n) ||
      (b && b->numel() != p.n))
    throw ShapeError("layer_norm: mean, rstd, weight or bias do not match x [rows, N]");
  if (p.rows == 0) return;
  p.xs0 = x.strides[0];
  p.xs1 = x.strides[1];
  p.ys0 = y.strides[0];
  p.ys1 = y.strides[1];
  p.ws = w ? w->strides[0] : 0;
  p.bs = b ? b->strides[0] : 0;
  p.ms = mean.strides[0];
  p.rs = rstd.strides[0];
  p.eps = call.attrs.f("eps");
  const T* xp = static_cast<const T*>(data_ptr(x));
  const T* wp = w ? static_cast<const T*>(data_ptr(*w)) : nullptr;
  const T* bp = b ? static_cast<const T*>(data_ptr(*b)) : nullptr;
  T* yp = static_cast<T*>(data_ptr(y));
  C* mp = static_cast<C*>(data_ptr(mean));
  C* rp = static_cast<C*>(data_ptr(rstd));
  CudaDevice& dev = cuda_device(d);
  dev.make_current();
  if (p.n <= kWarpRow) {
    layer_norm_rows<T, WarpGroup>
        <<<grid_for(dev, p.rows, kThreads / 32), kThreads, 0, dev.stream()>>>(xp, wp, bp, yp, mp,
                                                                              rp, p);
  } else if (p.n <= cached_row<C>()) {
    layer_norm_rows<T, BlockGroup, true>
        <<<grid_for(dev, p.rows, 1), kThreads, std::size_t(p.n) * sizeof(C), dev.stream()>>>(
            xp, wp, bp, yp, mp, rp, p);
  } else {
    const int threads = p.n > kLongRow ? kMaxBlock : kThreads;
    layer_norm_rows<T, BlockGroup>
        <<<grid_for(dev, p.rows, 1), threads, 0, dev.stream()>>>(xp, wp, bp, yp, mp, rp, p);
  }
  check_launch(dev, "layer_norm");
}

}  // namespace

void add_nn_kernels(KernelTable& table) {
  table.emplace_back(OpId::softmax, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_FLOATING(c.inputs.at(0).dtype, "softmax", (softmax<scalar_t, false>(d, c)));
  });
  table.emplace_back(OpId::log_softmax, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_FLOATING(c.inputs.at(0).dtype, "log_softmax",
                                 (softmax<scalar_t, true>(d, c)));
  });
  table.emplace_back(OpId::layer_norm, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_FLOATING(c.inputs.at(0).dtype, "layer_norm", layer_norm<scalar_t>(d, c));
  });
}

}  // namespace ferry::cuda
