// cuda/cuda_kernels_sort.cu — the stable sort and the sorted scatter_reduce on
// CUDA (docs/kernel-contract.md, "Sort" and "scatter_reduce"), for every
// dtype, f64 in double, with the CPU kernels' semantics
// (runtime/cpu/cpu_kernels_sort.cpp, cpu_kernels_scatter.cpp).
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
// The targets arrive grouped by a stable sort, so equal targets form runs that keep the
// sources' order (Note [CPU scatter_reduce]). A thread per element, grid
// stride; the thread whose element starts a run (i == 0 or t[i] != t[i - 1])
// folds the whole run in order, from out[t] with include_self, and writes
// out[t] once; every other thread does nothing. No atomics: each target has
// one writer and the fold order is the CPU's, in the same types (float for
// the floats, double for f64, wrapping 64 bits for integers and bool), so the result is the
// CPU's bit for bit and repeats from run to run. The price is that one long
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
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

constexpr std::int64_t kSortBatch = 1 << 28;  // elements a CUB call sorts at most
constexpr std::int64_t kRadixRow = 1 << 15;   // rows this long sort globally

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
  table.emplace_back(OpId::sort, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "sort", sort_rows<scalar_t>(d, c));
  });
  table.emplace_back(OpId::scatter_reduce, [](DeviceImpl& d, const OpCall& c) {
    FERRY_CUDA_DISPATCH_ALL(c.inputs.at(0).dtype, "scatter_reduce",
                            scatter_reduce_sorted<scalar_t>(d, c));
  });
}

}  // namespace ferry::cuda
