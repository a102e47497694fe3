// cuda/cuda_kernels_index.cu — index_select, gather, index_add and scatter_add
// on CUDA (docs/kernel-contract.md), the CPU's loops
// (runtime/cpu/cpu_kernels_index.cpp, cpu_kernels_grad.cpp) one element or one
// line per thread.
//
// index_select and gather are one kernel: out[i] = x[src(i) + index[i] *
// stride(dim)], where src is x seen with the output's shape and stride 0 along
// `dim`, and index is seen with the output's shape (index_select's varies
// along `dim` only). The three views are coalesced into one offset calculator
// and elements are moved by size, so one instantiation serves every dtype of
// that width.
//
// Note [Index bounds on the GPU]
// The core checks every index (Note [Index bounds]), but reads its verdict
// only at the thread's next read of the device (Note [Deferred checks] in
// runtime/deferred_checks.hpp), so these kernels do meet bad indices: a kernel
// cannot throw from the GPU without a synchronization, so a bad index is
// skipped (gather writes 0 for it), as the Vulkan backend does: never a read
// or a write outside the buffers.
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_loops.cuh"
#include "ferry/kit/index_args.hpp"

namespace ferry::cuda {
namespace {

template <typename E, typename Index> __global__ void __launch_bounds__(kThreads)
    gather_elements(E* __restrict__ out, const E* __restrict__ x,
                    const std::int64_t* __restrict__ index, OffsetCalc<3, Index> oc, std::int64_t n,
                    std::int64_t dim_stride, std::int64_t dim_size) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::int64_t off[3];
    oc.get(Index(i), off);
    const std::int64_t v = index[off[2]];
    out[off[0]] = v >= 0 && v < dim_size ? x[off[1] + v * dim_stride] : E(0);
  }
}

// A calculator of the index type the element count allows (Note [Offset calculator]).
template <typename Launch> void with_offset_calc(const std::array<const TensorArg*, 3>& views,
                                                 std::int64_t n, const char* op,
                                                 const Launch& launch) {
  auto oc = make_offset_calc<3, std::uint64_t>(views, op);
  if (!fits_uint32(n)) return launch(oc);
  OffsetCalc<3, std::uint32_t> oc32;
  oc32.ndim = oc.ndim;
  for (int d = 0; d < oc.ndim; ++d) {
    oc32.sizes[d] = std::uint32_t(oc.sizes[d]);
    for (int k = 0; k < 3; ++k) oc32.strides[d][k] = oc.strides[d][k];
  }
  launch(oc32);
}

template <typename E> void launch_gather(CudaDevice& dev, const TensorArg& out,
                                         const TensorArg& src, const TensorArg& idx,
                                         std::int64_t dim_stride, std::int64_t dim_size,
                                         const char* op) {
  const std::int64_t n = out.numel();
  E* o = static_cast<E*>(data_ptr(out));
  const E* x = static_cast<const E*>(data_ptr(src));
  const auto* ix = static_cast<const std::int64_t*>(data_ptr(idx));
  dev.make_current();
  with_offset_calc({&out, &src, &idx}, n, op, [&](const auto& oc) {
    using Index = std::remove_cvref_t<decltype(oc.sizes[0])>;
    gather_elements<E, Index><<<grid_for(dev, n, kThreads), kThreads, 0, dev.stream()>>>(
        o, x, ix, oc, n, dim_stride, dim_size);
  });
  check_launch(dev, op);
}

// out[i] = x[i with coordinate `dim` replaced by index[i]]; `index` has the
// output's shape (strides may be 0).
void gather_along(DeviceImpl& d, const char* op, const TensorArg& x, const TensorArg& index,
                  const TensorArg& out, int dim) {
  if (index.dtype != DType::i64 || x.dtype != out.dtype)
    throw DTypeError(std::string(op) +
                     ": the cuda kernel expects an i64 index and an output of x's dtype");
  if (out.numel() == 0) return;
  CudaDevice& dev = cuda_device(d);
  TensorArg src = x;
  src.sizes = out.sizes;
  src.strides[std::size_t(dim)] = 0;
  const std::int64_t dim_stride = x.strides[std::size_t(dim)];
  const std::int64_t dim_size = x.sizes[std::size_t(dim)];
  switch (dtype_size(x.dtype)) {
    case 1:
      return launch_gather<std::uint8_t>(dev, out, src, index, dim_stride, dim_size, op);
    case 2:
      return launch_gather<std::uint16_t>(dev, out, src, index, dim_stride, dim_size, op);
    case 4:
      return launch_gather<std::uint32_t>(dev, out, src, index, dim_stride, dim_size, op);
    default:
      return launch_gather<std::uint64_t>(dev, out, src, index, dim_stride, dim_size, op);
  }
}

void index_select_kernel(DeviceImpl& d, const OpCall& call) {
  const GatherOperands a = index_select_args(call, "cuda");
  gather_along(d, "index_select", a.x, a.index, a.out, a.dim);
}

void gather_kernel(DeviceImpl& d, const OpCall& call) {
  const GatherOperands a = gather_args(call, "cuda");
  gather_along(d, "gather", a.x, a.index, a.out, a.dim);
}

// ---- index_add, scatter_add (Note [Deterministic accumulation] in
// runtime/cpu/cpu_kernels_grad.cpp) ----
// Seen with src's shape, every coordinate but `dim` names one output line; one
// thread owns a line and adds its contributions j = 0, 1, ... in order, so
// every element's sum is formed in the CPU's order, with no atomics, and no
// two threads ever touch one output element. Neighbouring threads own
// neighbouring lines (the innermost other dim), so their accesses coalesce.

template <typename T> __device__ __forceinline__ T add_rounded(T a, T b) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(float(a) + float(b));  // rounded after every addition, as the CPU does
  else if constexpr (std::is_floating_point_v<T>)
    return a + b;
  else
    return math::wrap_add(a, b);
}

struct AlongDim {
  std::int64_t count;       // contributions per line: src.size(dim)
  std::int64_t src_step;    // src's stride along dim
  std::int64_t index_step;  // the index's stride along dim
  std::int64_t out_step;    // out's stride along dim
  std::int64_t out_size;    // out's size along dim
};

template <typename T, typename Index> __global__ void __launch_bounds__(kThreads)
    accumulate_lines(T* __restrict__ out, const T* __restrict__ src,
                     const std::int64_t* __restrict__ index, OffsetCalc<3, Index> oc,
                     std::int64_t lines, AlongDim a) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t line = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; line < lines;
       line += stride) {
    std::int64_t off[3];
    oc.get(Index(line), off);
    T* o = out + off[0];
    for (std::int64_t j = 0; j < a.count; ++j) {
      const std::int64_t v = index[off[2] + j * a.index_step];
      if (v < 0 || v >= a.out_size) continue;  // Note [Index bounds on the GPU]
      T* p = o + v * a.out_step;
      *p = add_rounded(*p, src[off[1] + j * a.src_step]);
    }
  }
}

// `index_view` has src's shape (strides may be 0).
void accumulate_along(DeviceImpl& d, const char* op, const TensorArg& src,
                      const TensorArg& index_view, const TensorArg& out, int dim) {
  if (index_view.dtype != DType::i64)
    throw DTypeError(std::string(op) + ": the index must be i64, not " +
                     std::string(dtype_name(index_view.dtype)));
  if (src.dtype != out.dtype)
    throw DTypeError(std::string(op) + ": src (" + std::string(dtype_name(src.dtype)) +
                     ") must have the output's dtype (" + std::string(dtype_name(out.dtype)) + ")");
  // bool is not numeric: PyTorch's index_add_ on bool is an OR, which no gradient
  // needs. f64 adds in double (add_rounded).
  if (out.dtype == DType::boolean) unsupported_dtype(op, out.dtype);
  if (src.numel() == 0 || out.numel() == 0) return;
  CudaDevice& dev = cuda_device(d);
  const auto ud = std::size_t(dim);
  const AlongDim a{src.sizes[ud], src.strides[ud], index_view.strides[ud], out.strides[ud],
                   out.sizes[ud]};
  // The three views without `dim`: one element each per line.
  TensorArg lo = out, ls = src, li = index_view;
  for (TensorArg* t : {&lo, &ls, &li}) {
    t->sizes = src.sizes;
    t->sizes.erase(t->sizes.begin() + dim);
    t->strides.erase(t->strides.begin() + dim);
  }
  const std::int64_t lines = ls.numel();
  const auto* ix = static_cast<const std::int64_t*>(data_ptr(index_view));
  dev.make_current();
  FERRY_CUDA_DISPATCH_NUMERIC(out.dtype, op, {
    auto* o = static_cast<scalar_t*>(data_ptr(out));
    const auto* s = static_cast<const scalar_t*>(data_ptr(src));
    with_offset_calc({&lo, &ls, &li}, lines, op, [&](const auto& oc) {
      using Index = std::remove_cvref_t<decltype(oc.sizes[0])>;
      accumulate_lines<scalar_t, Index>
          <<<grid_for(dev, lines, kThreads), kThreads, 0, dev.stream()>>>(o, s, ix, oc, lines, a);
    });
  });
  check_launch(dev, op);
}

void index_add_kernel(DeviceImpl& d, const OpCall& call) {
  const AccumulateOperands a = index_add_args(call, "cuda");
  accumulate_along(d, "index_add", a.src, a.index, a.out, a.dim);
}

void scatter_add_kernel(DeviceImpl& d, const OpCall& call) {
  const AccumulateOperands a = scatter_add_args(call, "cuda");
  accumulate_along(d, "scatter_add", a.src, a.index, a.out, a.dim);
}

}  // namespace

void add_index_kernels(KernelTable& table) {
  table.emplace_back(OpId::index_select, index_select_kernel);
  table.emplace_back(OpId::gather, gather_kernel);
  table.emplace_back(OpId::index_add, index_add_kernel);
  table.emplace_back(OpId::scatter_add, scatter_add_kernel);
}

}  // namespace ferry::cuda
