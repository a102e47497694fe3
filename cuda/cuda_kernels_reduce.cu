// cuda/cuda_kernels_reduce.cu — sum, prod, max, min and argmax on CUDA
// (docs/kernel-contract.md, "Reductions"), for every dtype.
//
// Note [CUDA reductions]
// The core hands over the input with the kept dims first and the `reduce_ndim`
// reduced dims last; the output is contiguous over the kept dims. Each group
// of dims is coalesced on its own (which keeps the row-major order argmax
// counts in) into an offset calculator: kept index o -> the slice's first
// element, reduced index r -> the element's offset within the slice. The
// schedule depends on the shape only:
//  - rows: a warp (short slices) or a block per output (Note [Row groups]),
//    its threads striding along the slice;
//  - columns: the outputs are neighbours in memory and the slices are not
//    (sum over dim 0 of a row-major matrix), or the slices are tiny: a block
//    of X outputs x Y lanes, neighbouring threads on neighbouring outputs so
//    loads are coalesced, the Y lanes of an output combined in shared memory;
//  - split: too few outputs to fill the GPU and long slices (a full
//    reduction): each slice is cut into `splits` pieces reduced by either
//    schedule into partial results in a scratch buffer, then a warp per output
//    combines its pieces.
// Every combine is commutative as well as associative, so which threads meet
// in which order changes at most the last bits of a double: floating sums
// accumulate in double (the contract's reference; a sum of 2^24 + 5 ones is
// exact; f64 elements enter unrounded) and round once to the output dtype
// (f64 keeps the double), integer and bool sums wrap in
// uint64, max/min propagate NaN, and argmax keeps the lower index among equal
// values (Note [Argmax across threads]). The grid depends on the shape and the
// GPU's SM count only, so a result repeats exactly from run to run.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "cuda_groups.cuh"
#include "cuda_loops.cuh"

namespace ferry::cuda {
namespace {

// Threads a split reduction aims for per SM: a full SM, so that enough loads
// are in flight to cover memory latency (Note [Loads in flight]).
constexpr std::int64_t kThreadsPerSm = 2048;
constexpr std::int64_t kMinPerThread = 64;  // elements per thread that make a split pay
constexpr std::int64_t kMaxSplits = 1024;
constexpr std::int64_t kWarpSlice = 1024;  // slices up to this long get a warp, longer a block
constexpr std::int64_t kTinySlice = 16;    // slices up to this long take the columns schedule
constexpr int kMaxLanes = 8;               // lanes per output in the columns schedule

// The type a value travels between threads in: warp shuffles take 32- and
// 64-bit values, so bool and u8 widen to int; the 16-bit floats compute in float.
template <typename T> using val_t =
    std::conditional_t<std::is_integral_v<T> && (sizeof(T) < 4), int, compute_t<T>>;

// ---- the operations: identity, element, combine, across a group, result ----

// Floating sums and products in double (the 16-bit floats and f32 widened
// exactly, f64 as it is), integer and bool ones in wrapping uint64 (i64 out).
// As runtime/cpu/cpu_kernels_reduce.cpp's SumProdOp.
template <typename T, bool kProd> struct SumProdOp {
  static constexpr bool kFloat = !std::is_integral_v<T>;
  using acc_t = std::conditional_t<kFloat, double, std::uint64_t>;
  using out_t = std::conditional_t<kFloat, T, std::int64_t>;
  using Fold = std::conditional_t<kProd, MulOp, AddOp>;
  __device__ static acc_t identity() { return kProd ? 1 : 0; }
  __device__ static acc_t element(T v, std::int64_t) {
    if constexpr (std::is_same_v<T, double>)
      return v;  // never through float
    else if constexpr (kFloat)
      return double(float(v));
    else
      return acc_t(std::int64_t(v));
  }
  __device__ static acc_t combine(acc_t a, acc_t b) { return Fold{}(a, b); }
  template <typename G> __device__ static acc_t across(acc_t a) {
    return G::reduce(a, Fold{}, identity());
  }
  __device__ static out_t result(acc_t a) {
    if constexpr (std::is_same_v<T, double>)
      return a;
    else if constexpr (kFloat)
      return out_t(float(a));  // the 16-bit floats round through float, as on the CPU
    else
      return out_t(a);  // modular, like PyTorch's int64 sum and prod
  }
};
template <typename T> using SumOp = SumProdOp<T, false>;
template <typename T> using ProdOp = SumProdOp<T, true>;

// Max (kMax) or min, NaN propagating (math::maximum / minimum).
template <typename T, bool kMax> struct ExtremumOp {
  using acc_t = val_t<T>;
  using out_t = T;
  using Pick = std::conditional_t<kMax, MaxOp, MinOp>;
  __device__ static acc_t identity() {
    if constexpr (!std::is_integral_v<T>)  // acc_t is float, or double for f64
      return kMax ? -std::numeric_limits<acc_t>::infinity()
                  : std::numeric_limits<acc_t>::infinity();
    else
      return kMax ? acc_t(std::numeric_limits<T>::lowest()) : acc_t(std::numeric_limits<T>::max());
  }
  __device__ static acc_t element(T v, std::int64_t) { return acc_t(v); }
  __device__ static acc_t combine(acc_t a, acc_t b) { return Pick{}(a, b); }
  template <typename G> __device__ static acc_t across(acc_t a) {
    return G::reduce(a, Pick{}, identity());
  }
  __device__ static out_t result(acc_t a) { return out_t(a); }
};

// Note [Argmax across threads]
// A thread's partial result is (value, index): its best value and the first
// index holding it. Combining keeps the greater value (NaN greatest), and the
// lower index between equal values (two NaNs are equal), so the combine is
// commutative and the first maximum wins whatever the order. Warp shuffles
// move one scalar at a time, so a group combines in two reductions: the best
// value, then the lowest index among the threads holding it. The identity is
// the least value at index INT64_MAX, which any element beats or ties with a
// lower index.
template <typename V> struct ArgAcc {
  V value;
  std::int64_t index;
};

template <typename T> struct ArgmaxOp {
  using V = val_t<T>;
  using acc_t = ArgAcc<V>;
  using out_t = std::int64_t;
  static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  __device__ static bool is_nan(V v) {
    if constexpr (std::is_floating_point_v<V>)
      return v != v;
    else
      return false;
  }
  __device__ static bool greater(V a, V b) { return a > b || (is_nan(a) && !is_nan(b)); }
  __device__ static bool same(V a, V b) { return a == b || (is_nan(a) && is_nan(b)); }
  struct Best {  // the greater value, NaN greatest
    __device__ V operator()(V a, V b) const { return greater(b, a) ? b : a; }
  };
  struct Lowest {
    __device__ std::int64_t operator()(std::int64_t a, std::int64_t b) const {
      return a < b ? a : b;
    }
  };
  __device__ static acc_t identity() {
    if constexpr (std::is_floating_point_v<V>)
      return {-std::numeric_limits<V>::infinity(), kNone};
    else
      return {V(std::numeric_limits<T>::lowest()), kNone};
  }
  __device__ static acc_t element(T v, std::int64_t r) { return {V(v), r}; }
  __device__ static acc_t combine(acc_t a, acc_t b) {
    return greater(b.value, a.value) || (same(b.value, a.value) && b.index < a.index) ? b : a;
  }
  template <typename G> __device__ static acc_t across(acc_t a) {
    const V best = G::reduce(a.value, Best{}, identity().value);
    const std::int64_t index = G::reduce(same(a.value, best) ? a.index : kNone, Lowest{}, kNone);
    return {best, index};
  }
  __device__ static out_t result(acc_t a) { return a.index; }
};

// ---- the kernels ----

template <typename Index> struct Geometry {
  OffsetCalc<1, Index> kept, red;  // output index -> slice, reduced index -> element
  bool red_unit;                   // the reduced elements of a slice are one unit-stride run
  std::int64_t n_out, n_red;
  std::int64_t chunk;      // reduced elements per piece (n_red when unsplit)
  std::int64_t n_virtual;  // pieces in all: n_out * splits, output fastest
};

template <typename Index>
__device__ __forceinline__ std::int64_t offset_of(const OffsetCalc<1, Index>& c, std::int64_t i) {
  std::int64_t off[1];
  c.get(Index(i), off);
  return off[0];
}

// Lane `lane` of `lanes`' share of piece v: its reduced elements lane, lane + lanes, ...
//
// Note [Loads in flight]
// A reduction reads each element once and does little with it, so its speed
// is the number of loads in flight over the memory's latency. A thread's
// accumulator is one dependency chain; what keeps memory busy is many threads
// (the split schedule fills every SM) and, on a unit-stride slice, four
// independent loads issued before the four combines that use them. The lane
// still visits its elements in increasing order, which argmax's tie rule
// does not need but costs nothing.
template <typename T, typename Op, typename Index>
__device__ typename Op::acc_t accumulate(const T* x, const Geometry<Index>& g, std::int64_t v,
                                         int lane, int lanes) {
  const std::int64_t o = v % g.n_out, piece = v / g.n_out;
  const T* slice = x + offset_of(g.kept, o);
  const std::int64_t end = g.n_red < (piece + 1) * g.chunk ? g.n_red : (piece + 1) * g.chunk;
  typename Op::acc_t acc = Op::identity();
  std::int64_t r = piece * g.chunk + lane;
  if (g.red_unit) {
    for (; r + 3 * lanes < end; r += 4 * lanes) {
      const T a = slice[r], b = slice[r + lanes], c = slice[r + 2 * lanes],
              d = slice[r + 3 * lanes];
      acc = Op::combine(acc, Op::element(a, r));
      acc = Op::combine(acc, Op::element(b, r + lanes));
      acc = Op::combine(acc, Op::element(c, r + 2 * lanes));
      acc = Op::combine(acc, Op::element(d, r + 3 * lanes));
    }
    for (; r < end; r += lanes) acc = Op::combine(acc, Op::element(slice[r], r));
    return acc;
  }
  for (; r < end; r += lanes) acc = Op::combine(acc, Op::element(slice[offset_of(g.red, r)], r));
  return acc;
}

// The result of piece v: the output itself, or a partial result when split.
template <typename Op> __device__ __forceinline__ void store(typename Op::acc_t acc, std::int64_t v,
                                                             typename Op::out_t* y,
                                                             typename Op::acc_t* partial) {
  if (partial)
    partial[v] = acc;
  else
    y[v] = Op::result(acc);
}

// "rows": a warp or block (Note [Row groups]) per piece.
template <typename T, typename Op, typename Index, typename Group>
__global__ void __launch_bounds__(kThreads)
    reduce_rows(const T* __restrict__ x, typename Op::out_t* __restrict__ y,
                typename Op::acc_t* __restrict__ partial, Geometry<Index> g) {
  for (std::int64_t v = Group::id(); v < g.n_virtual; v += Group::count()) {
    auto acc = Op::template across<Group>(accumulate<T, Op>(x, g, v, Group::lane(), Group::size()));
    if (Group::lane() == 0) store<Op>(acc, v, y, partial);
  }
}

// "columns": blockDim (X, Y), X * Y == kThreads; thread (tx, ty) is lane ty of piece tx.
template <typename T, typename Op, typename Index> __global__ void __launch_bounds__(kThreads)
    reduce_columns(const T* __restrict__ x, typename Op::out_t* __restrict__ y,
                   typename Op::acc_t* __restrict__ partial, Geometry<Index> g) {
  __shared__ typename Op::acc_t lanes[kThreads];
  const int X = int(blockDim.x), Y = int(blockDim.y), tx = int(threadIdx.x), ty = int(threadIdx.y);
  // Whole blocks step together: every thread reaches both barriers.
  for (std::int64_t v0 = std::int64_t(blockIdx.x) * X; v0 < g.n_virtual;
       v0 += std::int64_t(gridDim.x) * X) {
    const std::int64_t v = v0 + tx;
    const bool live = v < g.n_virtual;
    lanes[ty * X + tx] = live ? accumulate<T, Op>(x, g, v, ty, Y) : Op::identity();
    __syncthreads();
    if (ty == 0 && live) {
      typename Op::acc_t acc = lanes[tx];
      for (int k = 1; k < Y; ++k) acc = Op::combine(acc, lanes[k * X + tx]);
      store<Op>(acc, v, y, partial);
    }
    __syncthreads();
  }
}

// The split schedule's second pass: a warp combines output o's pieces
// partial[o], partial[n_out + o], ...
template <typename Op> __global__ void __launch_bounds__(kThreads)
    reduce_partials(const typename Op::acc_t* __restrict__ partial,
                    typename Op::out_t* __restrict__ y, std::int64_t n_out, std::int64_t splits) {
  for (std::int64_t o = WarpGroup::id(); o < n_out; o += WarpGroup::count()) {
    typename Op::acc_t acc = Op::identity();
    for (std::int64_t s = WarpGroup::lane(); s < splits; s += 32)
      acc = Op::combine(acc, partial[s * n_out + o]);
    acc = Op::template across<WarpGroup>(acc);
    if (WarpGroup::lane() == 0) y[o] = Op::result(acc);
  }
}

// ---- the host side ----

unsigned pow2_at_least(std::int64_t n, unsigned cap) {
  unsigned p = 1;
  while (p < cap && std::int64_t(p) < n) p <<= 1;
  return p;
}

template <typename T, typename Op, typename Index>
void launch(CudaDevice& dev, const char* op, const OpCall& call, const TensorArg& kept_view,
            const TensorArg& red_view, std::int64_t n_out, std::int64_t n_red) {
  using acc_t = typename Op::acc_t;
  using out_t = typename Op::out_t;
  Geometry<Index> g;
  g.kept = make_offset_calc<1, Index>({&kept_view}, op);
  g.red = make_offset_calc<1, Index>({&red_view}, op);
  g.n_out = n_out;
  g.n_red = n_red;
  g.red_unit = g.red.ndim == 1 && g.red.strides[0][0] == 1;

  // Columns when neighbouring outputs are neighbours in memory and the
  // elements of a slice are not, or when the slices are tiny.
  const int kd = g.kept.ndim - 1, rd = g.red.ndim - 1;
  const bool columns =
      (g.kept.strides[kd][0] == 1 && g.kept.sizes[kd] >= 8 && g.red.strides[rd][0] != 1) ||
      n_red <= kTinySlice;
  const unsigned lanes = columns               ? pow2_at_least(n_red, kMaxLanes)
                         : n_red <= kWarpSlice ? 32u
                                               : unsigned(kThreads);
  // Pieces per slice (Note [CUDA reductions]), from the shape alone.
  const std::int64_t target_threads = std::int64_t(dev.sm_count()) * kThreadsPerSm;
  std::int64_t splits = 1;
  if (n_out * lanes < target_threads && n_red >= 2 * lanes * kMinPerThread)
    splits = std::min({(target_threads + n_out * lanes - 1) / (n_out * lanes),
                       n_red / (lanes * kMinPerThread), kMaxSplits});
  g.chunk = splits > 1 ? (n_red + splits - 1) / splits : n_red;
  if (splits > 1) splits = (n_red + g.chunk - 1) / g.chunk;  // no empty piece
  g.n_virtual = n_out * splits;

  const T* x = static_cast<const T*>(data_ptr(call.inputs[0]));
  out_t* y = static_cast<out_t*>(data_ptr(call.outputs[0]));
  std::unique_ptr<Buffer> scratch;
  acc_t* partial = nullptr;
  if (splits > 1) {
    scratch = dev.allocate(std::size_t(g.n_virtual) * sizeof(acc_t));
    partial = ptr_of<acc_t>(scratch);
  }
  dev.make_current();
  if (columns) {
    const dim3 block(kThreads / lanes, lanes);
    reduce_columns<T, Op, Index>
        <<<grid_for(dev, g.n_virtual, block.x), block, 0, dev.stream()>>>(x, y, partial, g);
  } else if (lanes == 32) {
    reduce_rows<T, Op, Index, WarpGroup>
        <<<grid_for(dev, g.n_virtual, kThreads / 32), kThreads, 0, dev.stream()>>>(x, y, partial,
                                                                                   g);
  } else {
    reduce_rows<T, Op, Index, BlockGroup>
        <<<grid_for(dev, g.n_virtual, 1), kThreads, 0, dev.stream()>>>(x, y, partial, g);
  }
  check_launch(dev, op);
  if (splits > 1) {
    reduce_partials<Op><<<grid_for(dev, n_out, kThreads / 32), kThreads, 0, dev.stream()>>>(
        partial, y, n_out, splits);
    check_launch(dev, op);
  }
  // `scratch` may go now: the stream orders its reuse after these kernels
  // (Note [Stream-ordered reuse]).
}

template <typename T, typename Op> void reduce(DeviceImpl& d, const OpCall& call) {
  using out_t = typename Op::out_t;
  const std::string op(call.name());
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& out = call.outputs.at(0);
  const int reduce_ndim = int(call.attrs.i("reduce_ndim"));
  const int keep_ndim = in.ndim() - reduce_ndim;
  if (reduce_ndim < 0 || keep_ndim < 0)
    throw ShapeError(op + ": reduce_ndim is out of range for the input");
  if (out.dtype != dtype_of<out_t>())
    throw DTypeError(op + ": the cuda kernel writes " + std::string(dtype_name(dtype_of<out_t>())) +
                     " for a " + std::string(dtype_name(in.dtype)) + " input, not " +
                     std::string(dtype_name(out.dtype)));
  // The kept and the reduced dims as views of their own.
  TensorArg kept{in.buffer, in.offset, {}, {}, in.dtype}, red = kept;
  kept.sizes.assign(in.sizes.begin(), in.sizes.begin() + keep_ndim);
  kept.strides.assign(in.strides.begin(), in.strides.begin() + keep_ndim);
  red.sizes.assign(in.sizes.begin() + keep_ndim, in.sizes.end());
  red.strides.assign(in.strides.begin() + keep_ndim, in.strides.end());
  const std::int64_t n_out = kept.numel(), n_red = red.numel();
  if (out.numel() != n_out)
    throw ShapeError(op + ": the output does not match the input's kept dims");
  if (n_out == 0) return;
  CudaDevice& dev = cuda_device(d);
  if (fits_uint32(n_out) && fits_uint32(n_red))
    launch<T, Op, std::uint32_t>(dev, op.c_str(), call, kept, red, n_out, n_red);
  else
    launch<T, Op, std::uint64_t>(dev, op.c_str(), call, kept, red, n_out, n_red);
}

}  // namespace

void add_reduce_kernels(KernelTable& table) {
  table.emplace_back(OpId::sum, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "sum", (reduce<scalar_t, SumOp<scalar_t>>(d, c)));
  });
  table.emplace_back(OpId::prod, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "prod",
                            (reduce<scalar_t, ProdOp<scalar_t>>(d, c)));
  });
  table.emplace_back(OpId::max, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "max",
                            (reduce<scalar_t, ExtremumOp<scalar_t, true>>(d, c)));
  });
  table.emplace_back(OpId::min, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "min",
                            (reduce<scalar_t, ExtremumOp<scalar_t, false>>(d, c)));
  });
  table.emplace_back(OpId::argmax, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "argmax",
                            (reduce<scalar_t, ArgmaxOp<scalar_t>>(d, c)));
  });
}

}  // namespace ferry::cuda
