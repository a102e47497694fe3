// cuda/cuda_kernels_sort.cu — the scans (cumsum, cumprod, cummax, cummin),
// the stable sort and the sorted scatter_reduce on CUDA
// (docs/kernel-contract.md, "Scans", "Sort" and "scatter_reduce"), for every
// dtype, f64 in double, with the CPU kernels' semantics
// (runtime/cpu/cpu_kernels_sort.cpp).
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
//
// Note [CUDA sort]
// Each element becomes a (key, position) pair whose key is the CPU's
// sort_key: an unsigned integer ordered as the values are (float bits with
// the sign folded, -0 as +0, NaN the largest; integers with the sign bit
// flipped; inverted for descending), 32 bits for dtypes up to 4 bytes and 64
// for i64. Sorting the pairs by key ascending, stably (equal keys keep
// position order), is the stable sort in either direction. Rows shorter than
// kRadixRow go to CUB's stable segmented radix sort, one segment a row (with
// more than a few hundred rows in a call, CUB partitions the rows by length
// and waits on the stream for the partition's counts). A segment is sorted by
// one block, which leaves the GPU idle for a few long rows, so rows of
// kRadixRow elements or more are sorted together by CUB's device-wide stable
// radix sort (PyTorch's way): the pairs of all the rows by key, with their
// positions in the batch, then, for more than one row, stably by row number,
// on the bits the row count needs, each pair now carrying its position
// within its row; each row's pairs come out in key order, ties in position
// order. A last kernel reads the values back from x at the sorted positions
// (the key has lost -0's sign and NaN's payload). CUB is given int counts, so
// rows go to it in batches of at most kSortBatch elements (a row of 2^31
// elements or more is refused), which also bounds the scratch: keys and
// positions twice over (the row numbers reuse the keys' buffers), and CUB's
// temporary storage.
//
// Note [CUDA scatter_reduce]
// The targets arrive sorted, stably, so equal targets form runs that keep the
// sources' order (Note [CPU scatter_reduce]). A thread per element, grid
// stride; the thread whose element starts a run (i == 0 or t[i] != t[i - 1])
// folds the whole run in order, from out[t] with include_self, and writes
// out[t] once; every other thread does nothing. No atomics: each target has
// one writer and the fold order is the CPU's, in the same types (float for
// the floats, double for f64, wrapping 64 bits for integers and bool), so the result is the
// CPU's bit for bit and repeats from run to run. The price is that one long
// run is folded serially by a single thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "cuda_loops.cuh"
#include "ferry/kit/scatter_fold.hpp"

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
constexpr std::int64_t kSortBatch = 1 << 28;        // elements a CUB call sorts at most
constexpr std::int64_t kRadixRow = 1 << 15;         // rows this long sort globally

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

template <typename U> U* ptr_of(const std::unique_ptr<Buffer>& b) {
  return static_cast<U*>(static_cast<CudaBuffer*>(b.get())->ptr());
}

// A state moved across the lanes of a warp, 32 bits at a time; every lane of
// the warp must call it.
template <typename S> __device__ __forceinline__ S shfl_up_state(const S& s, int delta) {
  static_assert(sizeof(S) % sizeof(unsigned) == 0, "a state is whole 32-bit words");
  constexpr int kWords = int(sizeof(S) / sizeof(unsigned));
  unsigned w[kWords];
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_up_sync(0xffffffffu, w[i], delta);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}
template <typename S> __device__ __forceinline__ S shfl_state(const S& s, int lane) {
  static_assert(sizeof(S) % sizeof(unsigned) == 0, "a state is whole 32-bit words");
  constexpr int kWords = int(sizeof(S) / sizeof(unsigned));
  unsigned w[kWords];
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(0xffffffffu, w[i], lane);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
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

// The m states st[p], st[p + stride], ... folded after `before`, in order.
// They are read kStateBatch at a time, so that a thread has that many loads in
// flight rather than one.
template <typename Op>
__device__ typename Op::State fold_states(const typename Op::State* st, std::int64_t p,
                                          std::int64_t stride, std::int64_t m,
                                          typename Op::State before) {
  using State = typename Op::State;
  for (std::int64_t c0 = 0; c0 < m; c0 += kStateBatch, p += kStateBatch * stride) {
    State v[kStateBatch];
#pragma unroll
    for (int q = 0; q < kStateBatch; ++q)
      if (c0 + q < m) v[q] = st[p + q * stride];
#pragma unroll
    for (int q = 0; q < kStateBatch; ++q)
      if (c0 + q < m) before = Op::combine(before, v[q]);
  }
  return before;
}

// The same states each replaced by its exclusive prefix: `before` combined
// with the states ahead of it.
template <typename Op> __device__ void prefix_states(typename Op::State* st, std::int64_t p,
                                                     std::int64_t stride, std::int64_t m,
                                                     typename Op::State before) {
  using State = typename Op::State;
  for (std::int64_t c0 = 0; c0 < m; c0 += kStateBatch, p += kStateBatch * stride) {
    State v[kStateBatch];
#pragma unroll
    for (int q = 0; q < kStateBatch; ++q)
      if (c0 + q < m) v[q] = st[p + q * stride];
#pragma unroll
    for (int q = 0; q < kStateBatch; ++q)
      if (c0 + q < m) {
        st[p + q * stride] = before;
        before = Op::combine(before, v[q]);
      }
  }
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

// The batch positions pos[i] split into a row, row[i], and a position in the
// row, col[i].
__global__ void __launch_bounds__(kThreads)
    split_positions(const std::uint32_t* __restrict__ pos, std::uint32_t* __restrict__ row,
                    std::uint32_t* __restrict__ col, std::int64_t items, std::uint32_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += stride) {
    const std::uint32_t p = pos[i], r = p / n;
    row[i] = r;
    col[i] = p - r * n;
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
  const bool radix = n >= kRadixRow;  // long rows: sorted together, by key then by row
  CudaDevice& dev = cuda_device(d);
  const std::unique_ptr<Buffer> keys_in = dev.allocate(cap * sizeof(K)),
                                keys_out = dev.allocate(cap * sizeof(K)),
                                pos_in = dev.allocate(cap * sizeof(std::uint32_t)),
                                pos_out = dev.allocate(cap * sizeof(std::uint32_t));
  std::unique_ptr<Buffer> offsets, temp;
  std::size_t temp_size = 0;
  // CUB's temporary storage, grown to `bytes` (the old one's reuse waits for the stream).
  const auto temp_of = [&](std::size_t bytes) {
    if (!temp || bytes > temp_size) {
      temp = dev.allocate(bytes);
      temp_size = bytes;
    }
    return ptr_of<void>(temp);
  };
  K* const k_in = ptr_of<K>(keys_in);
  K* const k_out = ptr_of<K>(keys_out);
  auto* const p_in = ptr_of<std::uint32_t>(pos_in);
  auto* const p_out = ptr_of<std::uint32_t>(pos_out);
  const cudaStream_t stream = dev.stream();
  dev.make_current();
  if (!radix) {
    // Offsets relative to a batch's first row: the same for every batch.
    offsets = dev.allocate(std::size_t(batch + 1) * sizeof(int));
    fill_offsets<<<grid_for(dev, batch + 1, kThreads), kThreads, 0, stream>>>(ptr_of<int>(offsets),
                                                                              batch + 1, n);
    check_launch(dev, "sort");
  }
  for (std::int64_t r0 = 0; r0 < rows; r0 += batch) {
    const std::int64_t nr = std::min(batch, rows - r0), items = nr * n;
    const int count = int(items);
    std::size_t bytes = 0;  // first the size of CUB's temporary storage, then the sort
    if (!radix) {
      make_keys<T><<<grid_for(dev, items, kThreads), kThreads, 0, stream>>>(x + r0 * n, k_in, p_in,
                                                                            items, n, descending);
      check_launch(dev, "sort");
      const int* begins = ptr_of<int>(offsets);
      dev.check(
          cub::DeviceSegmentedSort::StableSortPairs(nullptr, bytes, k_in, k_out, p_in, p_out, count,
                                                    int(nr), begins, begins + 1, stream),
          "cub::DeviceSegmentedSort::StableSortPairs");
      dev.check(
          cub::DeviceSegmentedSort::StableSortPairs(temp_of(bytes), bytes, k_in, k_out, p_in, p_out,
                                                    count, int(nr), begins, begins + 1, stream),
          "cub::DeviceSegmentedSort::StableSortPairs");
    } else {
      // Every pair of the batch by key, positions 0 .. items - 1 in the batch.
      make_keys<T><<<grid_for(dev, items, kThreads), kThreads, 0, stream>>>(
          x + r0 * n, k_in, p_in, items, items, descending);
      check_launch(dev, "sort");
      dev.check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k_in, k_out, p_in, p_out, count, 0,
                                                int(sizeof(K) * 8), stream),
                "cub::DeviceRadixSort::SortPairs");
      dev.check(cub::DeviceRadixSort::SortPairs(temp_of(bytes), bytes, k_in, k_out, p_in, p_out,
                                                count, 0, int(sizeof(K) * 8), stream),
                "cub::DeviceRadixSort::SortPairs");
      if (nr > 1) {
        // Then stably by row, on the bits a row number needs: each row's
        // positions (now within the row) come out in key order. The keys'
        // buffers, done with, hold the row numbers.
        auto* const rows_in = ptr_of<std::uint32_t>(keys_in);
        auto* const rows_out = ptr_of<std::uint32_t>(keys_out);
        split_positions<<<grid_for(dev, items, kThreads), kThreads, 0, stream>>>(
            p_out, rows_in, p_in, items, std::uint32_t(n));
        check_launch(dev, "sort");
        int bits = 1;
        while ((std::int64_t(1) << bits) < nr) ++bits;
        bytes = 0;
        dev.check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, rows_in, rows_out, p_in, p_out,
                                                  count, 0, bits, stream),
                  "cub::DeviceRadixSort::SortPairs");
        dev.check(cub::DeviceRadixSort::SortPairs(temp_of(bytes), bytes, rows_in, rows_out, p_in,
                                                  p_out, count, 0, bits, stream),
                  "cub::DeviceRadixSort::SortPairs");
      }
    }
    // p_out: each row's positions within the row, in sorted order.
    gather_sorted<T><<<grid_for(dev, items, kThreads), kThreads, 0, stream>>>(
        x + r0 * n, p_out, y + r0 * n, idx + r0 * n, items, n);
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
