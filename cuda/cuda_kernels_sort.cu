// cuda/cuda_kernels_sort.cu — the scans (cumsum, cumprod, cummax, cummin),
// the stable sort and the sorted scatter_reduce on CUDA
// (docs/kernel-contract.md, "Scans", "Sort" and "scatter_reduce"), for every
// dtype but f64, with the CPU kernels' semantics
// (runtime/cpu/cpu_kernels_sort.cpp).
//
// Note [CUDA scans]
// x arrives contiguous as [outer, n, inner]; line l = o * inner + j is the n
// elements (o * n + k) * inner + j, k = 0 .. n - 1. A scan is a state (a
// running sum or product, or a running extremum with its position), a step
// that folds in the next element, and an associative combine of an earlier
// and a later state. The schedule depends on the shape only:
//  - lines: one thread per line, sequential along n; neighbouring threads own
//    neighbouring lines, so with inner > 1 a warp's loads and stores are
//    coalesced. For many lines (kManyLines fill the GPU a thread each) or
//    short ones.
//  - blocks: fewer lines of at least kBlockLine elements (a long line, or a
//    few long columns: inner > 1 is only a stride here): a block per line.
//    Each thread folds a contiguous chunk of ceil(n / blockDim) elements into
//    a state; the block turns the states into each thread's exclusive prefix
//    with a Hillis-Steele scan in shared memory, which combines earlier
//    before later (cummax's tie rule is not commutative); each thread then
//    rescans its chunk from its prefix and writes.
// Floating sums and products accumulate in double and round once per written
// element, integer and bool ones wrap in uint64 (i64 out). The blocks
// schedule groups a floating sum differently from the CPU's running sum,
// which changes at most the last bits of a double; cummax and cummin are
// exact either way. Neither the chunks nor the order of the combines depend on
// anything but the shape (the grid, sized by the SM count, only decides which
// block takes which line), so a result repeats exactly from run to run.
//
// Note [CUDA sort]
// Each element becomes a (key, position) pair whose key is the CPU's
// sort_key: an unsigned integer ordered as the values are (float bits with
// the sign folded, -0 as +0, NaN the largest; integers with the sign bit
// flipped; inverted for descending), 32 bits for dtypes up to 4 bytes and 64
// for i64. CUB's stable segmented radix sort, one segment a row, sorts the
// pairs by key ascending and keeps equal keys in position order, which is the
// stable sort in either direction. A last kernel reads the values back from x
// at the sorted positions (the key has lost -0's sign and NaN's payload). CUB
// is given int segment offsets, so rows go to it in batches of at most
// kSortBatch elements (a row of 2^31 elements or more is refused), which also
// bounds the scratch: keys and positions twice over, and CUB's temporary
// storage. With more than a few hundred rows in a batch, CUB partitions the
// rows by length and waits on the stream for the partition's counts.
//
// Note [CUDA scatter_reduce]
// The targets arrive sorted, stably, so equal targets form runs that keep the
// sources' order (Note [CPU scatter_reduce]). A thread per element, grid
// stride; the thread whose element starts a run (i == 0 or t[i] != t[i - 1])
// folds the whole run in order, from out[t] with include_self, and writes
// out[t] once; every other thread does nothing. No atomics: each target has
// one writer and the fold order is the CPU's, in the same types (float for
// the floats, wrapping 64 bits for integers and bool), so the result is the
// CPU's bit for bit and repeats from run to run. The price is that one long
// run is folded serially by a single thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_segmented_sort.cuh>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "cuda_loops.cuh"
#include "ferry/kit/scatter_fold.hpp"

namespace ferry::cuda {
namespace {

constexpr std::int64_t kBlockLine = 2 * kThreads;  // lines at least this long may take a block
constexpr std::int64_t kManyLines = 1 << 16;       // this many lines take a thread each
constexpr std::int64_t kSortBatch = 1 << 28;       // elements a CUB call sorts at most

// ---- scans: a state, one step, the combine of an earlier and a later state ----

template <typename T, bool kProd> struct CumSumProd {
  static constexpr bool kFloat = !std::is_integral_v<T>;
  static constexpr bool kIndices = false;
  using acc_t = std::conditional_t<kFloat, double, std::uint64_t>;
  using out_t = std::conditional_t<kFloat, T, std::int64_t>;
  struct State {
    acc_t acc;
  };
  __device__ static State identity() { return {acc_t(kProd ? 1 : 0)}; }
  __device__ static void step(State& s, T v, std::int64_t) {
    acc_t a;
    if constexpr (kFloat)
      a = double(float(v));
    else
      a = acc_t(std::int64_t(v));
    s.acc = kProd ? acc_t(s.acc * a) : acc_t(s.acc + a);
  }
  __device__ static State combine(State a, State b) {
    return {kProd ? acc_t(a.acc * b.acc) : acc_t(a.acc + b.acc)};
  }
  __device__ static void write(const State& s, out_t* y, std::int64_t*, std::int64_t i) {
    if constexpr (kFloat)
      y[i] = out_t(float(s.acc));
    else
      y[i] = out_t(s.acc);  // modular, like PyTorch's int64 cumsum and cumprod
  }
};

// Running max (kMax) or min with the position it was last seen at: a later
// equal value takes over, and once a NaN is seen only a later NaN does. The
// combine keeps the later state when it would have taken over the earlier
// one, which is associative and matches the sequential scan.
template <typename T, bool kMax> struct CumExtremum {
  static constexpr bool kIndices = true;
  using C = compute_t<T>;  // 16-bit floats compare in float
  using out_t = T;
  struct State {
    C value;
    std::int64_t index;  // -1: nothing seen
  };
  __device__ static bool is_nan(C v) {
    if constexpr (std::is_floating_point_v<C>)
      return v != v;
    else
      return false;
  }
  // Whether `later` replaces `earlier`.
  __device__ static bool takes_over(C later, C earlier) {
    return is_nan(later) || (!is_nan(earlier) && (kMax ? later >= earlier : later <= earlier));
  }
  __device__ static State identity() { return {C(0), -1}; }
  __device__ static void step(State& s, T v, std::int64_t k) {
    const C c = C(v);
    if (s.index < 0 || takes_over(c, s.value)) s = {c, k};
  }
  __device__ static State combine(State a, State b) {
    return b.index >= 0 && (a.index < 0 || takes_over(b.value, a.value)) ? b : a;
  }
  __device__ static void write(const State& s, out_t* y, std::int64_t* idx, std::int64_t i) {
    y[i] = T(s.value);
    idx[i] = s.index;
  }
};

struct Lines {
  std::int64_t lines, n, inner;
  // The offset of line l's first element.
  __device__ std::int64_t first(std::int64_t l) const {
    return (l / inner) * n * inner + l % inner;
  }
};

// "lines": a thread per line (Note [CUDA scans]).
template <typename T, typename Op> __global__ void __launch_bounds__(kThreads)
    scan_lines(const T* __restrict__ x, typename Op::out_t* __restrict__ y,
               std::int64_t* __restrict__ idx, Lines g) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t l = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; l < g.lines;
       l += stride) {
    typename Op::State s = Op::identity();
    std::int64_t p = g.first(l);
    for (std::int64_t k = 0; k < g.n; ++k, p += g.inner) {
      Op::step(s, x[p], k);
      Op::write(s, y, idx, p);
    }
  }
}

// "blocks": a block per line, a chunk per thread (Note [CUDA scans]).
template <typename T, typename Op> __global__ void __launch_bounds__(kThreads)
    scan_blocks(const T* __restrict__ x, typename Op::out_t* __restrict__ y,
                std::int64_t* __restrict__ idx, Lines g) {
  using State = typename Op::State;
  __shared__ State states[kThreads];
  const int t = int(threadIdx.x), threads = int(blockDim.x);
  const std::int64_t chunk = (g.n + threads - 1) / threads;
  const std::int64_t begin = t * chunk < g.n ? t * chunk : g.n;
  const std::int64_t end = begin + chunk < g.n ? begin + chunk : g.n;
  // Whole blocks step together: every thread reaches every barrier.
  for (std::int64_t l = blockIdx.x; l < g.lines; l += gridDim.x) {
    const std::int64_t first = g.first(l);
    State s = Op::identity();
    for (std::int64_t k = begin; k < end; ++k) Op::step(s, x[first + k * g.inner], k);
    states[t] = s;
    __syncthreads();
    // Inclusive scan of the states in thread order: after the step of width
    // d, states[t] combines the states of threads t - 2d + 1 .. t.
    for (int d = 1; d < threads; d <<= 1) {
      const State v = t >= d ? Op::combine(states[t - d], states[t]) : states[t];
      __syncthreads();
      states[t] = v;
      __syncthreads();
    }
    s = t > 0 ? states[t - 1] : Op::identity();
    for (std::int64_t k = begin; k < end; ++k) {
      const std::int64_t p = first + k * g.inner;
      Op::step(s, x[p], k);
      Op::write(s, y, idx, p);
    }
    __syncthreads();  // the next line rewrites states[]
  }
}

template <typename T, typename Op> void scan(DeviceImpl& d, const OpCall& call) {
  using out_t = typename Op::out_t;
  const std::string op(call.name());
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& out = call.outputs.at(0);
  if (in.ndim() != 3) throw ShapeError(op + ": the cuda kernel expects x as [outer, n, inner]");
  if (out.dtype != dtype_of<out_t>())
    throw DTypeError(op + ": the cuda kernel writes " + std::string(dtype_name(dtype_of<out_t>())) +
                     " for a " + std::string(dtype_name(in.dtype)) + " input, not " +
                     std::string(dtype_name(out.dtype)));
  if (out.numel() != in.numel()) throw ShapeError(op + ": the output does not match x's shape");
  const TensorArg* pos = Op::kIndices ? &call.outputs.at(1) : nullptr;
  if (pos && pos->dtype != DType::i64)
    throw DTypeError(op + ": the positions output must be i64, not " +
                     std::string(dtype_name(pos->dtype)));
  if (pos && pos->numel() != in.numel())
    throw ShapeError(op + ": the positions output does not match x's shape");
  if (in.numel() == 0) return;
  if (!in.is_contiguous() || !out.is_contiguous() || (pos && !pos->is_contiguous()))
    throw ShapeError(op + ": the cuda kernel expects contiguous tensors");
  std::int64_t* idx = pos ? static_cast<std::int64_t*>(data_ptr(*pos)) : nullptr;
  const Lines g{in.sizes[0] * in.sizes[2], in.sizes[1], in.sizes[2]};
  const T* x = static_cast<const T*>(data_ptr(in));
  out_t* y = static_cast<out_t*>(data_ptr(out));
  CudaDevice& dev = cuda_device(d);
  dev.make_current();
  if (g.lines < kManyLines && g.n >= kBlockLine)
    scan_blocks<T, Op><<<grid_for(dev, g.lines, 1), kThreads, 0, dev.stream()>>>(x, y, idx, g);
  else
    scan_lines<T, Op>
        <<<grid_for(dev, g.lines, kThreads), kThreads, 0, dev.stream()>>>(x, y, idx, g);
  check_launch(dev, op.c_str());
}

// ---- sort (Note [CUDA sort]) ----

template <typename T> using sort_key_t =
    std::conditional_t<(sizeof(T) > 4), std::uint64_t, std::uint32_t>;

// runtime/cpu/cpu_kernels_sort.cpp's sort_key.
template <typename T> __device__ sort_key_t<T> sort_key(T v, bool descending) {
  using K = sort_key_t<T>;
  constexpr K kSign = K(1) << (sizeof(K) * 8 - 1);
  K k;
  if constexpr (!std::is_integral_v<T>) {
    using F = compute_t<T>;  // float for the 16-bit floats
    static_assert(sizeof(F) == sizeof(K), "a floating key has the bits of its compute type");
    F f = F(v);
    if (f != f) {
      k = std::numeric_limits<K>::max();
    } else {
      if (f == F(0)) f = F(0);  // -0 sorts as +0
      K bits;
      if constexpr (sizeof(F) == 4)
        bits = K(__float_as_uint(f));
      else
        bits = K(__double_as_longlong(f));
      k = (bits & kSign) ? K(~bits) : K(bits | kSign);
    }
  } else if constexpr (std::is_signed_v<T>) {
    k = K(v) ^ kSign;
  } else {
    k = K(v);  // u8, bool
  }
  return descending ? K(~k) : k;
}

// offsets[i] = i * n, i = 0 .. count - 1 (count * n fits an int).
__global__ void __launch_bounds__(kThreads)
    fill_offsets(int* __restrict__ offsets, std::int64_t count, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    offsets[i] = int(i * n);
}

// The pairs of `items` elements, rows of n: keys[i], and i's position in its row.
template <typename T> __global__ void __launch_bounds__(kThreads)
    make_keys(const T* __restrict__ x, sort_key_t<T>* __restrict__ keys,
              std::uint32_t* __restrict__ pos, std::int64_t items, std::int64_t n,
              bool descending) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += stride) {
    keys[i] = sort_key(x[i], descending);
    pos[i] = std::uint32_t(i % n);
  }
}

// y[i] = x[i's row at the sorted position], idx[i] = the position.
template <typename T> __global__ void __launch_bounds__(kThreads)
    gather_sorted(const T* __restrict__ x, const std::uint32_t* __restrict__ pos, T* __restrict__ y,
                  std::int64_t* __restrict__ idx, std::int64_t items, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += stride) {
    const std::uint32_t p = pos[i];
    y[i] = x[i - i % n + p];
    idx[i] = std::int64_t(p);
  }
}

template <typename U> U* ptr_of(const std::unique_ptr<Buffer>& b) {
  return static_cast<U*>(static_cast<CudaBuffer*>(b.get())->ptr());
}

template <typename T> void sort_rows(DeviceImpl& d, const OpCall& call) {
  using K = sort_key_t<T>;
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& values = call.outputs.at(0);
  const TensorArg& positions = call.outputs.at(1);
  if (in.ndim() != 2) throw ShapeError("sort: the cuda kernel expects x as [rows, n]");
  if (values.dtype != in.dtype || positions.dtype != DType::i64)
    throw DTypeError("sort: the cuda kernel writes values of x's dtype (" +
                     std::string(dtype_name(in.dtype)) + ") and i64 positions, not " +
                     std::string(dtype_name(values.dtype)) + " and " +
                     std::string(dtype_name(positions.dtype)));
  if (values.sizes != in.sizes || positions.sizes != in.sizes)
    throw ShapeError("sort: the outputs must have x's shape [rows, n]");
  const std::int64_t rows = in.sizes[0], n = in.sizes[1];
  if (rows == 0 || n == 0) return;
  if (!in.is_contiguous() || !values.is_contiguous() || !positions.is_contiguous())
    throw ShapeError("sort: the cuda kernel expects contiguous tensors");
  if (n > std::int64_t(std::numeric_limits<int>::max()))
    throw UnsupportedError("sort: the cuda kernel sorts rows of fewer than 2^31 elements, not " +
                           std::to_string(n));
  const bool descending = call.attrs.b("descending");
  const T* x = static_cast<const T*>(data_ptr(in));
  T* y = static_cast<T*>(data_ptr(values));
  auto* idx = static_cast<std::int64_t*>(data_ptr(positions));

  // Rows per CUB call: batch * n <= max(kSortBatch, n) fits an int.
  const std::int64_t batch = std::max<std::int64_t>(1, std::min(rows, kSortBatch / n));
  const auto cap = std::size_t(batch * n);
  CudaDevice& dev = cuda_device(d);
  const std::unique_ptr<Buffer> keys_in = dev.allocate(cap * sizeof(K)),
                                keys_out = dev.allocate(cap * sizeof(K)),
                                pos_in = dev.allocate(cap * sizeof(std::uint32_t)),
                                pos_out = dev.allocate(cap * sizeof(std::uint32_t)),
                                offsets = dev.allocate(std::size_t(batch + 1) * sizeof(int));
  std::unique_ptr<Buffer> temp;
  std::size_t temp_size = 0;
  const cudaStream_t stream = dev.stream();
  dev.make_current();
  // Offsets relative to a batch's first row: the same for every batch.
  fill_offsets<<<grid_for(dev, batch + 1, kThreads), kThreads, 0, stream>>>(ptr_of<int>(offsets),
                                                                            batch + 1, n);
  check_launch(dev, "sort");
  for (std::int64_t r0 = 0; r0 < rows; r0 += batch) {
    const std::int64_t nr = std::min(batch, rows - r0), items = nr * n;
    make_keys<T><<<grid_for(dev, items, kThreads), kThreads, 0, stream>>>(
        x + r0 * n, ptr_of<K>(keys_in), ptr_of<std::uint32_t>(pos_in), items, n, descending);
    check_launch(dev, "sort");
    const int* begins = ptr_of<int>(offsets);
    std::size_t bytes = 0;  // first the size of CUB's temporary storage, then the sort
    dev.check(
        cub::DeviceSegmentedSort::StableSortPairs(
            nullptr, bytes, ptr_of<K>(keys_in), ptr_of<K>(keys_out), ptr_of<std::uint32_t>(pos_in),
            ptr_of<std::uint32_t>(pos_out), items, nr, begins, begins + 1, stream),
        "cub::DeviceSegmentedSort::StableSortPairs");
    if (!temp || bytes > temp_size) {
      temp = dev.allocate(bytes);  // the old one's reuse waits for the stream
      temp_size = bytes;
    }
    dev.check(cub::DeviceSegmentedSort::StableSortPairs(
                  ptr_of<void>(temp), bytes, ptr_of<K>(keys_in), ptr_of<K>(keys_out),
                  ptr_of<std::uint32_t>(pos_in), ptr_of<std::uint32_t>(pos_out), items, nr, begins,
                  begins + 1, stream),
              "cub::DeviceSegmentedSort::StableSortPairs");
    gather_sorted<T><<<grid_for(dev, items, kThreads), kThreads, 0, stream>>>(
        x + r0 * n, ptr_of<std::uint32_t>(pos_out), y + r0 * n, idx + r0 * n, items, n);
    check_launch(dev, "sort");
  }
  // The scratch may go now (Note [Stream-ordered reuse]).
}

// ---- scatter_reduce: each run of equal targets folded in order by one thread ----

using Fold = ScatterFold;

// The fold's type: the compute type for floats (float for the 16-bit ones),
// i64 (wrapping) for integers and bool, as the CPU's.
template <typename T> using fold_t =
    std::conditional_t<std::is_integral_v<T>, std::int64_t, compute_t<T>>;

// One step of the fold: the accumulator a with the next value b.
template <typename T, Fold F> __device__ fold_t<T> fold_step(fold_t<T> a, fold_t<T> b) {
  using C = fold_t<T>;
  if constexpr (F == Fold::prod) {
    if constexpr (std::is_integral_v<T>)
      return C(std::uint64_t(a) * std::uint64_t(b));
    else
      return a * b;
  } else if constexpr (F == Fold::amax) {
    return math::maximum(a, b);
  } else if constexpr (F == Fold::amin) {
    return math::minimum(a, b);
  } else if constexpr (F == Fold::assign) {
    return b;
  } else {  // sum, mean
    if constexpr (std::is_integral_v<T>)
      return C(std::uint64_t(a) + std::uint64_t(b));
    else
      return a + b;
  }
}

// A thread per element; the one that starts a run folds it and writes its
// target (Note [CUDA scatter_reduce]).
template <typename T, Fold F> __global__ void __launch_bounds__(kThreads)
    scatter_reduce_runs(const T* __restrict__ v, const std::int64_t* __restrict__ t,
                        T* __restrict__ y, std::int64_t m, bool self) {
  using C = fold_t<T>;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m; i += stride) {
    const std::int64_t target = t[i];
    if (i > 0 && t[i - 1] == target) continue;  // not the start of a run
    C acc = self ? C(y[target]) : C(v[i]);
    std::int64_t j = self ? i : i + 1;
    for (; j < m && t[j] == target; ++j) acc = fold_step<T, F>(acc, C(v[j]));
    if constexpr (F == Fold::mean) {
      const std::int64_t n = j - i + (self ? 1 : 0);  // the run, and out[t] with include_self
      if constexpr (std::is_integral_v<T>) {
        const std::int64_t q = acc / n;  // floor division, as PyTorch's integer mean
        acc = (acc % n != 0 && acc < 0) ? q - 1 : q;
      } else {
        acc = acc / C(n);
      }
    }
    y[target] = T(acc);
  }
}

template <typename T, Fold F> void launch_scatter_reduce(CudaDevice& dev, const T* v,
                                                         const std::int64_t* t, T* y,
                                                         std::int64_t m, bool self) {
  scatter_reduce_runs<T, F>
      <<<grid_for(dev, m, kThreads), kThreads, 0, dev.stream()>>>(v, t, y, m, self);
  check_launch(dev, "scatter_reduce");
}

template <typename T> void scatter_reduce_sorted(DeviceImpl& d, const OpCall& call) {
  const TensorArg &src = call.inputs.at(0), &tgt = call.inputs.at(1), &out = call.outputs.at(0);
  if (src.ndim() != 1 || tgt.ndim() != 1 || out.ndim() != 1 || tgt.dtype != DType::i64 ||
      src.sizes[0] != tgt.sizes[0])
    throw ShapeError(
        "scatter_reduce: the cuda kernel expects 1-D values, i64 targets of the values' length "
        "and a 1-D output");
  if (out.dtype != src.dtype)
    throw DTypeError("scatter_reduce: the output (" + std::string(dtype_name(out.dtype)) +
                     ") must have the values' dtype (" + std::string(dtype_name(src.dtype)) + ")");
  const Fold fold = scatter_fold_of(call.attrs.s("reduce"));
  const bool self = call.attrs.b("include_self") && fold != Fold::assign;
  const std::int64_t m = src.sizes[0];
  if (m == 0) return;
  if (!src.is_contiguous() || !tgt.is_contiguous() || !out.is_contiguous())
    throw ShapeError("scatter_reduce: the cuda kernel expects contiguous tensors");
  const T* v = static_cast<const T*>(data_ptr(src));
  const auto* t = static_cast<const std::int64_t*>(data_ptr(tgt));
  T* y = static_cast<T*>(data_ptr(out));
  CudaDevice& dev = cuda_device(d);
  dev.make_current();
  switch (fold) {
    case Fold::sum:
      launch_scatter_reduce<T, Fold::sum>(dev, v, t, y, m, self);
      break;
    case Fold::prod:
      launch_scatter_reduce<T, Fold::prod>(dev, v, t, y, m, self);
      break;
    case Fold::mean:
      launch_scatter_reduce<T, Fold::mean>(dev, v, t, y, m, self);
      break;
    case Fold::amax:
      launch_scatter_reduce<T, Fold::amax>(dev, v, t, y, m, self);
      break;
    case Fold::amin:
      launch_scatter_reduce<T, Fold::amin>(dev, v, t, y, m, self);
      break;
    case Fold::assign:
      launch_scatter_reduce<T, Fold::assign>(dev, v, t, y, m, self);
      break;
  }
}

}  // namespace

void add_sort_kernels(KernelTable& table) {
  table.emplace_back(OpId::cumsum, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "cumsum",
                            (scan<scalar_t, CumSumProd<scalar_t, false>>(d, c)));
  });
  table.emplace_back(OpId::cumprod, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "cumprod",
                            (scan<scalar_t, CumSumProd<scalar_t, true>>(d, c)));
  });
  table.emplace_back(OpId::cummax, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "cummax",
                            (scan<scalar_t, CumExtremum<scalar_t, true>>(d, c)));
  });
  table.emplace_back(OpId::cummin, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "cummin",
                            (scan<scalar_t, CumExtremum<scalar_t, false>>(d, c)));
  });
  table.emplace_back(OpId::sort, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "sort", sort_rows<scalar_t>(d, c));
  });
  table.emplace_back(OpId::scatter_reduce, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "scatter_reduce",
                            scatter_reduce_sorted<scalar_t>(d, c));
  });
}

}  // namespace ferry::cuda
