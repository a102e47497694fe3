// cuda/cuda_kernels_scan.cu — the scans (cumsum, cumprod, cummax, cummin) on
// CUDA (docs/kernel-contract.md, "Scans"), for every dtype, f64 in double,
// with the CPU kernels' semantics (runtime/cpu/cpu_kernels_sort.cpp).
//
// Note [CUDA scans]
// x arrives contiguous as [outer, n, inner]; line l = o * inner + j is the n
// elements (o * n + k) * inner + j, k = 0 .. n - 1. A scan is a state (a
// running sum or product, or a running extremum with its position), a step
// that folds in the next element, and an associative combine of an earlier
// and a later state, always called as combine(earlier, later): cummax's tie
// rule is not commutative. A line may be cut along n into chunks of a fixed
// length; then three passes: "fold" folds each chunk into a state (a
// scratch slot per chunk), a state scan replaces each line's chunk states,
// in chunk order, by their exclusive prefixes (a thread per line for up to
// kSerialStates chunks, else a block per line: each thread folds a run of
// states, a Hillis-Steele scan in shared memory, each thread rewrites its
// run), and "finish" rescans each chunk from its prefix and writes it. A line
// of one chunk is scanned and written in one pass, "whole". Each pass has
// two schedules:
//  - warps (contiguous lines, inner == 1, of at least kWarpLine elements): a
//    warp per chunk, which it takes a tile of kTile = 32 * kPer elements at a
//    time: coalesced loads into the warp's tile in shared memory, lane l
//    takes elements l * kPer .. l * kPer + kPer - 1 from it and folds them,
//    a shuffle scan over the lanes gives each lane the state of the lanes
//    before it, combined after the chunk's earlier tiles (`carry`); each lane
//    then steps through its elements from there, writes the outputs into the
//    tile, and the warp stores them coalesced. Warps never wait on each other:
//    no __syncthreads, only __syncwarp within a warp. A line longer than
//    kChunk (16 tiles) is cut into chunks of kChunk when there are fewer than
//    kManyWarps lines (one long line spreads over the GPU); with more lines
//    each is one chunk, scanned by one warp.
//  - strided (inner > 1, or contiguous lines shorter than kWarpLine): a
//    thread per chunk, sequential along n; neighbouring threads own
//    neighbouring lines j, so with inner > 1 a warp's loads and stores are
//    coalesced. Lines longer than kStridedChunk are cut into chunks of
//    kStridedChunk when there are fewer than kManyLines lines (a few long
//    columns get enough threads); with more lines a thread takes a line.
// Floating sums and products accumulate in double and round once per written
// element, integer and bool ones wrap in uint64 (i64 out). A chunked or
// warp scan groups a floating sum differently from the CPU's running sum,
// which changes at most the last bits of a double; cummax and cummin are
// exact either way. The schedule, the chunks and the order of every combine
// depend on the shape and this file's constants only, never on the GPU (the
// grid, sized by the SM count, only decides which warp or thread takes which
// chunk), so a result repeats bit for bit from run to run and across GPUs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "cuda_loops.cuh"

namespace ferry::cuda {
namespace {

// The scan schedules' constants (Note [CUDA scans]). None depends on the GPU,
// so neither do the chunks a line is cut into, nor the order of the combines.
constexpr int kWarp = 32;
constexpr int kPer = 8;                             // elements a lane takes from a tile
constexpr int kTile = kWarp * kPer;                 // elements a warp scans at a time
constexpr int kTilePadded = kTile + kTile / kWarp;  // a tile in shared memory
constexpr std::int64_t kWarpLine = 32;              // contiguous lines this long take warps
constexpr std::int64_t kChunk = 16 * kTile;         // a chunk of a long contiguous line
constexpr std::int64_t kManyWarps = 1 << 14;        // this many contiguous lines go unchunked
constexpr std::int64_t kStridedChunk = 64;          // a chunk of a long strided line
constexpr std::int64_t kManyLines = 1 << 16;        // this many strided lines go unchunked
constexpr std::int64_t kSerialStates = 64;          // a thread scans this many chunk states
constexpr int kStateBatch = 8;                      // chunk states a thread loads at once

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
      a = double(compute_t<T>(v));  // float for the 16-bit floats
    else
      a = acc_t(std::int64_t(v));
    s.acc = kProd ? acc_t(s.acc * a) : acc_t(s.acc + a);
  }
  __device__ static State combine(State a, State b) {
    return {kProd ? acc_t(a.acc * b.acc) : acc_t(a.acc + b.acc)};
  }
  __device__ static void write(const State& s, out_t* y, std::int64_t*, std::int64_t i) {
    if constexpr (kFloat)
      y[i] = out_t(compute_t<T>(s.acc));
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

// ---- the schedules (Note [CUDA scans]) ----

// x as [outer, n, inner], each line cut along n into `count` chunks of `len`
// elements (the last one ragged). Chunk c of line (o, j) is unit
// (o * count + c) * inner + j, which is also where its state goes in the
// scratch: a line's states are `inner` apart, neighbouring lines' adjacent.
struct Chunks {
  std::int64_t outer, n, inner;
  std::int64_t len, count;
  __host__ __device__ std::int64_t lines() const { return outer * inner; }
  __host__ __device__ std::int64_t units() const { return outer * count * inner; }
  // The scratch offset of line l's first state.
  __device__ std::int64_t first_state(std::int64_t l) const {
    return (l / inner) * count * inner + l % inner;
  }
};

// whole: scan each chunk (the whole line) from nothing and write it; fold:
// only fold each chunk into its state; finish: scan each chunk from the
// exclusive prefix the state scan left in its slot, and write it.
enum class Pass { whole, fold, finish };

// A state moved across the lanes of a warp, 32 bits at a time, by `shuffle` (a
// __shfl_up_sync or __shfl_sync of one word); every lane of the warp must call it.
template <typename S, typename Shuffle>
__device__ __forceinline__ S shuffle_state(const S& s, const Shuffle& shuffle) {
  static_assert(sizeof(S) % sizeof(unsigned) == 0, "a state is whole 32-bit words");
  constexpr int kWords = int(sizeof(S) / sizeof(unsigned));
  unsigned w[kWords];
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = shuffle(w[i]);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}
template <typename S> __device__ __forceinline__ S shfl_up_state(const S& s, int delta) {
  return shuffle_state(s, [delta](unsigned w) { return __shfl_up_sync(0xffffffffu, w, delta); });
}
template <typename S> __device__ __forceinline__ S shfl_state(const S& s, int lane) {
  return shuffle_state(s, [lane](unsigned w) { return __shfl_sync(0xffffffffu, w, lane); });
}

// A warp's tile in shared memory, one spare slot after every 32 so that lane
// l reading slots l * kPer .. l * kPer + kPer - 1 hits 32 different banks.
__device__ __forceinline__ int padded(int e) { return e + e / kWarp; }
// Bytes of one warp's tile: the input tile, or later the outputs (values, and
// positions for cummax/cummin), which reuse it.
template <typename T, typename Op> constexpr std::size_t tile_bytes() {
  const std::size_t in = std::size_t(kTilePadded) * sizeof(T);
  const std::size_t out = std::size_t(kTilePadded) *
                          (sizeof(typename Op::out_t) + (Op::kIndices ? sizeof(std::int64_t) : 0));
  return in > out ? in : out;
}

// "warps" (contiguous lines, inner == 1): a warp per chunk, tile by tile.
template <typename T, typename Op, Pass P> __global__ void __launch_bounds__(kThreads)
    scan_warps(const T* __restrict__ x, typename Op::out_t* __restrict__ y,
               std::int64_t* __restrict__ idx, typename Op::State* __restrict__ states, Chunks g) {
  using State = typename Op::State;
  using out_t = typename Op::out_t;
  constexpr int kWarps = kThreads / kWarp;
  constexpr std::size_t kBytes = tile_bytes<T, Op>();
  static_assert(kBytes % 8 == 0, "each warp's tile starts 8-byte aligned");
  __shared__ alignas(16) unsigned char tiles[kWarps][kBytes];
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  unsigned char* const tile = tiles[warp];
  T* const xs = reinterpret_cast<T*>(tile);
  out_t* const ys = reinterpret_cast<out_t*>(tile);
  std::int64_t* const is =
      Op::kIndices ? reinterpret_cast<std::int64_t*>(tile + kTilePadded * sizeof(out_t)) : nullptr;
  const std::int64_t units = g.outer * g.count;
  const std::int64_t warps = std::int64_t(gridDim.x) * kWarps;
  // A unit per warp: all 32 lanes take the same units, so every lane reaches
  // every shuffle and __syncwarp (the block's warps never wait on each other).
  for (std::int64_t u = std::int64_t(blockIdx.x) * kWarps + warp; u < units; u += warps) {
    const std::int64_t line = u / g.count, c = u % g.count;
    const std::int64_t k0 = c * g.len, k1 = k0 + g.len < g.n ? k0 + g.len : g.n;
    const T* const xl = x + line * g.n;
    State carry;  // the chunk's elements before this tile, folded
    if constexpr (P == Pass::finish)
      carry = states[u];
    else
      carry = Op::identity();
    for (std::int64_t t0 = k0; t0 < k1; t0 += kTile) {
      const int valid = k1 - t0 < kTile ? int(k1 - t0) : kTile;
      // Coalesced loads into the tile; then lane l takes elements
      // l * kPer .. l * kPer + kPer - 1 of it.
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = j * kWarp + lane;
        if (e < valid) xs[padded(e)] = xl[t0 + e];
      }
      __syncwarp();
      T v[kPer];
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = lane * kPer + j;
        v[j] = e < valid ? xs[padded(e)] : T();
      }
      __syncwarp();  // the tile is rewritten below, or by the next tile
      State s = Op::identity();
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = lane * kPer + j;
        if (e < valid) Op::step(s, v[j], t0 + e);
      }
      // Inclusive scan over the lanes, earlier before later: after the step
      // of width d, lane l holds lanes l - 2d + 1 .. l combined.
#pragma unroll
      for (int d = 1; d < kWarp; d <<= 1) {
        const State earlier = shfl_up_state(s, d);
        if (lane >= d) s = Op::combine(earlier, s);
      }
      const State total = shfl_state(s, kWarp - 1);
      if constexpr (P != Pass::fold) {
        const State before = shfl_up_state(s, 1);  // lanes 0 .. l - 1 combined
        State r = lane > 0 ? Op::combine(carry, before) : carry;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int e = lane * kPer + j;
          if (e < valid) {
            Op::step(r, v[j], t0 + e);
            Op::write(r, ys, is, padded(e));
          }
        }
        __syncwarp();
        out_t* const yl = y + line * g.n + t0;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int e = j * kWarp + lane;
          if (e < valid) {
            yl[e] = ys[padded(e)];
            if constexpr (Op::kIndices) idx[line * g.n + t0 + e] = is[padded(e)];
          }
        }
        __syncwarp();  // before the next tile's loads overwrite the outputs
      }
      carry = Op::combine(carry, total);
    }
    if constexpr (P == Pass::fold)
      if (lane == 0) states[u] = carry;
  }
}

// "strided" (inner > 1, or short contiguous lines): a thread per chunk;
// neighbouring threads own neighbouring lines j, so with inner > 1 a warp's
// loads and stores are coalesced.
template <typename T, typename Op, Pass P> __global__ void __launch_bounds__(kThreads)
    scan_strided(const T* __restrict__ x, typename Op::out_t* __restrict__ y,
                 std::int64_t* __restrict__ idx, typename Op::State* __restrict__ states,
                 Chunks g) {
  using State = typename Op::State;
  const std::int64_t units = g.units();
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += stride) {
    const std::int64_t j = u % g.inner, r = u / g.inner, c = r % g.count, o = r / g.count;
    const std::int64_t k0 = c * g.len, k1 = k0 + g.len < g.n ? k0 + g.len : g.n;
    State s;
    if constexpr (P == Pass::finish)
      s = states[u];
    else
      s = Op::identity();
    std::int64_t p = (o * g.n + k0) * g.inner + j;
    for (std::int64_t k = k0; k < k1; ++k, p += g.inner) {
      Op::step(s, x[p], k);
      if constexpr (P != Pass::fold) Op::write(s, y, idx, p);
    }
    if constexpr (P == Pass::fold) states[u] = s;
  }
}

// The m states st[p], st[p + stride], ... folded after `before`, in order, and with kPrefix
// each replaced by its exclusive prefix (`before` combined with the states ahead of it). They
// are read kStateBatch at a time, so that a thread has that many loads in flight rather than
// one. Returns the fold of all of them after `before`.
template <typename Op, bool kPrefix, typename Ptr>
__device__ typename Op::State walk_states(Ptr st, std::int64_t p, std::int64_t stride,
                                          std::int64_t m, typename Op::State before) {
  using State = typename Op::State;
  for (std::int64_t c0 = 0; c0 < m; c0 += kStateBatch, p += kStateBatch * stride) {
    State v[kStateBatch];
#pragma unroll
    for (int q = 0; q < kStateBatch; ++q)
      if (c0 + q < m) v[q] = st[p + q * stride];
#pragma unroll
    for (int q = 0; q < kStateBatch; ++q)
      if (c0 + q < m) {
        if constexpr (kPrefix) st[p + q * stride] = before;
        before = Op::combine(before, v[q]);
      }
  }
  return before;
}
template <typename Op>
__device__ typename Op::State fold_states(const typename Op::State* st, std::int64_t p,
                                          std::int64_t stride, std::int64_t m,
                                          typename Op::State before) {
  return walk_states<Op, false>(st, p, stride, m, before);
}
template <typename Op> __device__ void prefix_states(typename Op::State* st, std::int64_t p,
                                                     std::int64_t stride, std::int64_t m,
                                                     typename Op::State before) {
  walk_states<Op, true>(st, p, stride, m, before);
}

// The state scan, a thread per line: each line's chunk states, in chunk
// order, replaced by their exclusive prefixes.
template <typename Op> __global__ void __launch_bounds__(kThreads)
    scan_states_serial(typename Op::State* __restrict__ states, Chunks g) {
  const std::int64_t lines = g.lines();
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t l = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += stride)
    prefix_states<Op>(states, g.first_state(l), g.inner, g.count, Op::identity());
}

// The state scan, a block per line, for many chunks a line: each thread
// folds a run of ceil(count / blockDim) states, a Hillis-Steele scan in
// shared memory gives each thread the states before its run, and the thread
// rewrites its run with the exclusive prefixes.
template <typename Op> __global__ void __launch_bounds__(kThreads)
    scan_states_blocks(typename Op::State* __restrict__ states, Chunks g) {
  using State = typename Op::State;
  __shared__ State runs[kThreads];
  const int t = int(threadIdx.x), threads = int(blockDim.x);
  const std::int64_t per = (g.count + threads - 1) / threads;
  const std::int64_t begin = t * per < g.count ? t * per : g.count;
  const std::int64_t end = begin + per < g.count ? begin + per : g.count;
  const std::int64_t lines = g.lines();
  // Whole blocks step together: every thread reaches every barrier.
  for (std::int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const std::int64_t run = g.first_state(l) + begin * g.inner;
    runs[t] = fold_states<Op>(states, run, g.inner, end - begin, Op::identity());
    __syncthreads();
    // Inclusive scan of the runs in thread order: after the step of width d,
    // runs[t] combines the runs of threads t - 2d + 1 .. t.
    for (int d = 1; d < threads; d <<= 1) {
      const State v = t >= d ? Op::combine(runs[t - d], runs[t]) : runs[t];
      __syncthreads();
      runs[t] = v;
      __syncthreads();
    }
    prefix_states<Op>(states, run, g.inner, end - begin, t > 0 ? runs[t - 1] : Op::identity());
    __syncthreads();  // the next line rewrites runs[]
  }
}

template <typename T, typename Op, Pass P>
void launch_pass(CudaDevice& dev, bool warps, const T* x, typename Op::out_t* y, std::int64_t* idx,
                 typename Op::State* states, const Chunks& g, const char* op) {
  if (warps)
    scan_warps<T, Op, P>
        <<<grid_for(dev, g.outer * g.count, kThreads / kWarp), kThreads, 0, dev.stream()>>>(
            x, y, idx, states, g);
  else
    scan_strided<T, Op, P>
        <<<grid_for(dev, g.units(), kThreads), kThreads, 0, dev.stream()>>>(x, y, idx, states, g);
  check_launch(dev, op);
}

template <typename T, typename Op> void scan(DeviceImpl& d, const OpCall& call) {
  using out_t = typename Op::out_t;
  using State = typename Op::State;
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
  const T* x = static_cast<const T*>(data_ptr(in));
  out_t* y = static_cast<out_t*>(data_ptr(out));

  // The schedule, from the shape only (Note [CUDA scans]).
  const std::int64_t outer = in.sizes[0], n = in.sizes[1], inner = in.sizes[2];
  const std::int64_t lines = outer * inner;
  const bool warps = inner == 1 && n >= kWarpLine;
  std::int64_t len = n;
  if (warps ? n > kChunk && lines < kManyWarps : n > kStridedChunk && lines < kManyLines)
    len = warps ? kChunk : kStridedChunk;
  const Chunks g{outer, n, inner, len, (n + len - 1) / len};

  CudaDevice& dev = cuda_device(d);
  dev.make_current();
  if (g.count == 1) {
    launch_pass<T, Op, Pass::whole>(dev, warps, x, y, idx, nullptr, g, op.c_str());
    return;
  }
  const std::unique_ptr<Buffer> scratch = dev.allocate(std::size_t(g.units()) * sizeof(State));
  State* states = ptr_of<State>(scratch);
  launch_pass<T, Op, Pass::fold>(dev, warps, x, y, idx, states, g, op.c_str());
  if (g.count <= kSerialStates)
    scan_states_serial<Op>
        <<<grid_for(dev, lines, kThreads), kThreads, 0, dev.stream()>>>(states, g);
  else
    scan_states_blocks<Op><<<grid_for(dev, lines, 1), kThreads, 0, dev.stream()>>>(states, g);
  check_launch(dev, op.c_str());
  launch_pass<T, Op, Pass::finish>(dev, warps, x, y, idx, states, g, op.c_str());
  // The scratch may go now (Note [Stream-ordered reuse]).
}

}  // namespace

void add_scan_kernels(KernelTable& table) {
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
}

}  // namespace ferry::cuda
