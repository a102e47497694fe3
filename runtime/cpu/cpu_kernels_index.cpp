// runtime/cpu/cpu_kernels_index.cpp — index_select and gather on the CPU
// (docs/kernel-contract.md).
//
// Both are one loop: out[i] = src[i + index[i] * stride(dim)], where `src` is x
// viewed with the output's shape and a 0 stride along `dim`, and `index` is
// viewed with the output's shape too (for index_select: stride 0 everywhere
// but `dim`). loop_nd then walks the three operands together, merging dims and
// splitting over threads; an embedding lookup becomes runs of whole rows with
// one index each. Elements are moved by size, so every dtype shares one loop.
// The front-end checks the bounds (Note [Index bounds] in ops_index.cpp); the
// kernel checks them again so that it never reads outside x, and reports the
// first bad index it saw as a ShapeError.
#include <fmt/format.h>

#include <atomic>
#include <cstring>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/index_args.hpp"

namespace ferry::cpu {
namespace {

template <typename E> void move_run(const LoopRun<3>& r, std::int64_t dim_stride_bytes,
                                    std::int64_t dim_size, std::atomic<std::int64_t>& bad,
                                    std::atomic<bool>& failed) {
  char* out = r.ptr[0];
  const char* src = r.ptr[1];
  const char* idx = r.ptr[2];
  if (r.stride[2] == 0) {  // one index for the whole run: a row copy
    std::int64_t v;
    std::memcpy(&v, idx, sizeof v);
    if (v < 0 || v >= dim_size) {
      if (!failed.exchange(true)) bad = v;
      return;
    }
    const char* s = src + v * dim_stride_bytes;
    if (r.stride[0] == sizeof(E) && r.stride[1] == sizeof(E)) {
      std::memcpy(out, s, std::size_t(r.n) * sizeof(E));
    } else {
      for (std::int64_t i = 0; i < r.n; ++i)
        std::memcpy(out + i * r.stride[0], s + i * r.stride[1], sizeof(E));
    }
    return;
  }
  for (std::int64_t i = 0; i < r.n; ++i) {
    std::int64_t v;
    std::memcpy(&v, idx + i * r.stride[2], sizeof v);
    if (v < 0 || v >= dim_size) {
      if (!failed.exchange(true)) bad = v;
      return;
    }
    E e;
    std::memcpy(&e, src + i * r.stride[1] + v * dim_stride_bytes, sizeof(E));
    std::memcpy(out + i * r.stride[0], &e, sizeof(E));
  }
}

// out[i] = x[i with coordinate `dim` replaced by index[i]]; `index` has the
// output's shape (strides may be 0).
void gather_along(std::string_view op, const TensorArg& x, const TensorArg& index,
                  const TensorArg& out, int dim) {
  if (index.dtype != DType::i64 || x.dtype != out.dtype)
    throw DTypeError(
        fmt::format("{}: the cpu kernel expects an i64 index and an output of x's dtype", op));
  TensorArg src = x;
  src.sizes = out.sizes;
  src.strides[std::size_t(dim)] = 0;
  const std::int64_t elsize = std::int64_t(dtype_size(x.dtype));
  const std::int64_t dim_stride_bytes = x.strides[std::size_t(dim)] * elsize;
  const std::int64_t dim_size = x.sizes[std::size_t(dim)];
  std::atomic<std::int64_t> bad{0};
  std::atomic<bool> failed{false};
  loop_nd<3>({&out, &src, &index}, [&](const LoopRun<3>& r) {
    if (failed.load(std::memory_order_relaxed)) return;
    switch (elsize) {
      case 1:
        move_run<std::uint8_t>(r, dim_stride_bytes, dim_size, bad, failed);
        break;
      case 2:
        move_run<std::uint16_t>(r, dim_stride_bytes, dim_size, bad, failed);
        break;
      case 4:
        move_run<std::uint32_t>(r, dim_stride_bytes, dim_size, bad, failed);
        break;
      default:
        move_run<std::uint64_t>(r, dim_stride_bytes, dim_size, bad, failed);
        break;
    }
  });
  if (failed)
    throw ShapeError(
        fmt::format("{}: index {} is out of range for dim {} of size {} (valid: 0 to {})", op,
                    bad.load(), dim, dim_size, dim_size - 1));
}

void index_select_kernel(DeviceImpl&, const OpCall& call) {
  const GatherOperands a = index_select_args(call, "cpu");
  gather_along("index_select", a.x, a.index, a.out, a.dim);
}

void gather_kernel(DeviceImpl&, const OpCall& call) {
  const GatherOperands a = gather_args(call, "cpu");
  gather_along("gather", a.x, a.index, a.out, a.dim);
}

}  // namespace

void add_index_kernels(KernelTable& table) {
  table.emplace_back(OpId::index_select, index_select_kernel);
  table.emplace_back(OpId::gather, gather_kernel);
}

}  // namespace ferry::cpu
