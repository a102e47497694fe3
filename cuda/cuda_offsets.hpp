// cuda/cuda_offsets.hpp — strided index math for CUDA kernels, written for the
// host and the GPU (FERRY_HD) so tests/test_cuda_host.cpp checks it on the CPU.
//
// Note [Offset calculator]
// A strided kernel thread holds one linear output index and needs each
// operand's element offset. The host coalesces the operands' dims first
// (include/ferry/kit/coalesce.hpp: a contiguous or broadcast-free case collapses to one
// dim), then the thread peels dims innermost first: i % size_d, i / size_d.
// 32-bit division is several times cheaper than 64-bit on NVIDIA GPUs, so the
// calculator carries its index type: kernels use uint32 when every linear
// index fits (all but the largest tensors) and uint64 otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ferry/kit/coalesce.hpp"
#include "ferry/backend.hpp"
#include "ferry/config.hpp"
#include "ferry/error.hpp"

namespace ferry::cuda {

inline constexpr int kMaxDims = 12;

// N operands, all of one shape; strides in elements (0 for broadcast dims).
template <int N, typename Index> struct OffsetCalc {
  int ndim = 1;
  Index sizes[kMaxDims] = {};              // innermost last
  std::int64_t strides[kMaxDims][N] = {};  // [dim][operand]

  // Element offsets of linear index `linear` (row-major) in every operand.
  FERRY_HD void get(Index linear, std::int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const Index size = sizes[d];
      const Index q = linear / size;
      const Index i = linear - q * size;
      for (int k = 0; k < N; ++k) off[k] += std::int64_t(i) * strides[d][k];
      linear = q;
    }
    for (int k = 0; k < N; ++k) off[k] += std::int64_t(linear) * strides[0][k];
  }
};

// Coalesced calculator for operands sharing args[0]'s sizes. Throws
// UnsupportedError naming `op` when more than kMaxDims dims remain after
// coalescing (a view that cannot be merged into 12 dims).
template <int N, typename Index>
OffsetCalc<N, Index> make_offset_calc(const std::array<const TensorArg*, N>& args, const char* op) {
  std::vector<std::vector<std::int64_t>> strides;
  for (const TensorArg* a : args) strides.push_back(a->strides);
  detail::Coalesced c = detail::coalesce(args[0]->sizes, strides);
  if (int(c.sizes.size()) > kMaxDims)
    throw UnsupportedError(std::string(op) + ": the cuda kernel takes views of at most " +
                           std::to_string(kMaxDims) + " non-mergeable dims, not " +
                           std::to_string(c.sizes.size()));
  OffsetCalc<N, Index> oc;
  oc.ndim = int(c.sizes.size());
  for (int d = 0; d < oc.ndim; ++d) {
    oc.sizes[d] = Index(c.sizes[std::size_t(d)]);
    for (int k = 0; k < N; ++k) oc.strides[d][k] = c.strides[std::size_t(k)][std::size_t(d)];
  }
  return oc;
}

// Whether every linear index of `numel` elements fits a uint32 calculator.
inline bool fits_uint32(std::int64_t numel) { return numel <= std::int64_t(UINT32_MAX); }

}  // namespace ferry::cuda
